//! `redis-check-rdb`: checks an RDB file and reports what it holds or
//! where it is broken, in redis-check-rdb's words (`[offset N] ...` lines,
//! `--- RDB ERROR DETECTED ---`, `[info] N keys read`), on standard output.
//!
//! Two callers, as in Redis: the binary run under a name ending in
//! `redis-check-rdb` (main.rs dispatches on argv[0]; exit status 0 for a
//! sound file, 1 otherwise), and the server when a file fails to load at
//! start-up, so the log says what the checker found before the server
//! exits.
//!
//! The check is the loader itself (`storage::rdb::load`, checksum and every
//! value's structure verified, as with sanitize-dump-payload yes) with a
//! visitor that counts and reports; nothing is kept. Not reported: module
//! data (densekv's loader refuses it with its own message).

use std::io::Write;

use storage::rdb::{self, LoadOptions, LoadedEntry, RdbVisitor};
use storage::ValueRef;

/// Counts and report lines gathered while reading.
struct Check {
    out: Vec<String>,
    keys: u64,
    expires: u64,
    already_expired: u64,
    subexpires: u64,
    now: i64,
    /// Offset of the item being read, for the report lines (RdbVisitor
    /// does not pass it; the lines use the last known offset).
    offset: usize,
}

impl RdbVisitor for Check {
    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.out.push(format!("[offset {}] AUX FIELD {} = '{}'", self.offset, key.escape_ascii(), value.escape_ascii()));
        Ok(())
    }

    fn select_db(&mut self, index: u64) -> Result<(), String> {
        self.out.push(format!("[offset {}] Selecting DB ID {index}", self.offset));
        Ok(())
    }

    fn entry(&mut self, e: LoadedEntry) -> Result<(), String> {
        self.keys += 1;
        if let Some(t) = e.expire_ms {
            self.expires += 1;
            if t < self.now {
                self.already_expired += 1;
            }
        }
        if let ValueRef::Hash(h) = e.value.as_ref() {
            if h.min_deadline().is_some() {
                self.subexpires += 1;
            }
        }
        Ok(())
    }
}

impl Check {
    fn info(&self) -> [String; 4] {
        [
            format!("[info] {} keys read", self.keys),
            format!("[info] {} expires", self.expires),
            format!("[info] {} already expired", self.already_expired),
            format!("[info] {} subexpires", self.subexpires),
        ]
    }
}

/// Checks the RDB file at `path`; returns the report lines (without
/// newlines) and whether the file is sound.
pub fn check(path: &str, verify_checksum: bool) -> (Vec<String>, bool) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let mut c = Check { out: vec![format!("[offset 0] Checking RDB file {path}")], keys: 0, expires: 0, already_expired: 0, subexpires: 0, now, offset: 0 };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            c.out.push("--- RDB ERROR DETECTED ---".into());
            c.out.push(format!("[offset 0] Cannot open RDB file {path}: {e}"));
            c.out.extend(c.info());
            return (c.out, false);
        }
    };
    let opts = LoadOptions { verify_checksum, ..LoadOptions::new(now) };
    match rdb::load(&bytes, &opts, &mut c) {
        Ok(summary) => {
            c.offset = summary.end;
            if summary.version >= 5 {
                c.out.push(if summary.checksum == 0 || !verify_checksum {
                    format!("[offset {}] RDB file was saved with checksum disabled: no check performed.", summary.end)
                } else {
                    format!("[offset {}] Checksum OK", summary.end)
                });
            }
            c.out.push(format!("[offset {}] \\o/ RDB looks OK! \\o/", summary.end));
            c.out.extend(c.info());
            (c.out, true)
        }
        Err(e) => {
            c.out.push("--- RDB ERROR DETECTED ---".into());
            c.out.push(format!("[offset {}] {}", e.offset, e.message));
            c.out.extend(c.info());
            (c.out, false)
        }
    }
}

/// The `redis-check-rdb <file>` tool; returns the exit status.
pub fn main(prog: &str, args: &[String]) -> u8 {
    match args {
        [a] if a == "-v" || a == "--version" => {
            println!("redis-check-rdb {}", crate::REDIS_VERSION);
            0
        }
        [path] => {
            let (lines, ok) = check(path, true);
            print_lines(&lines);
            u8::from(!ok)
        }
        _ => {
            eprintln!("Usage: {prog} <rdb-file-name>");
            1
        }
    }
}

/// Writes report lines to standard output, where redis-check-rdb writes
/// them (also when the server runs the check: its log may be a file).
pub fn print_lines(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_garbage_files_are_errors() {
        let (lines, ok) = check("/nonexistent/dump.rdb", true);
        assert!(!ok);
        assert!(lines.iter().any(|l| l == "--- RDB ERROR DETECTED ---"), "{lines:?}");
        let path = std::env::temp_dir().join(format!("densekv-check-rdb-{}.rdb", std::process::id()));
        std::fs::write(&path, b"REDIS0011\xfe\x00\x0d\x01k\x05abcde\xff").unwrap();
        let (lines, ok) = check(&path.to_string_lossy(), true);
        let _ = std::fs::remove_file(&path);
        assert!(!ok, "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("Selecting DB ID 0")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("integrity check failed")), "{lines:?}");
    }
}
