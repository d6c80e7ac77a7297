//! `redis-check-aof`: densekv-server run under that name (main.rs looks
//! at argv[0]) checks an AOF as Redis's tool does, with its messages and
//! exit codes:
//!
//! ```text
//! redis-check-aof [--fix|--truncate-to-timestamp <unix>] <file.manifest|file.aof>
//! ```
//!
//! A manifest is checked file by file (base, then incremental files); an
//! old single file as it is, with an RDB preamble checked by the RDB
//! loader first. `--fix` cuts a file back to its last complete command
//! (only the last file, and only after a `y` on standard input);
//! `--truncate-to-timestamp` cuts the last file at the first `#TS:`
//! annotation later than the given time.
//!
//! The whole file is read into memory and walked with offsets; every
//! length is checked against what is left before it is used.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use storage::rdb::{self, LoadOptions, LoadedEntry, RdbVisitor};

use crate::aofcore::manifest::Manifest;

/// How one file went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    Ok,
    Empty,
    Truncated,
    TimestampTruncated,
}

/// The tool's exit: status 1 after its message.
struct Exit;

/// State kept across files, as the tool's globals.
struct Checker {
    /// Lines consumed so far (counted across files, as Redis's tool does).
    line: i64,
    /// The offset the last read started at (for error messages).
    epos: usize,
    /// The first error met.
    error: String,
    /// --truncate-to-timestamp; 0 when not given.
    to_ts: i64,
    out: Box<dyn Write>,
    input: Box<dyn BufRead>,
}

macro_rules! say {
    ($c:expr, $($arg:tt)*) => {{
        let _ = writeln!($c.out, $($arg)*);
    }};
}

struct Nop;

impl RdbVisitor for Nop {
    fn entry(&mut self, _: LoadedEntry) -> Result<(), String> {
        Ok(())
    }
}

/// Runs the tool with `args` (without argv[0], which `prog` is); returns
/// the exit status.
pub fn main(prog: &str, args: &[String]) -> u8 {
    let mut c = Checker { line: 1, epos: 0, error: String::new(), to_ts: 0, out: Box::new(std::io::stdout()), input: Box::new(std::io::stdin().lock()) };
    let status = match run(&mut c, prog, args) {
        Ok(()) => 0,
        Err(Exit) => 1,
    };
    let _ = c.out.flush();
    status
}

fn run(c: &mut Checker, prog: &str, args: &[String]) -> Result<(), Exit> {
    let usage = |c: &mut Checker| {
        say!(c, "Usage: {prog} [--fix|--truncate-to-timestamp $timestamp] <file.manifest|file.aof>");
        Exit
    };
    let (path, fix) = match args {
        [v] if v == "-v" || v == "--version" => {
            say!(c, "redis-check-aof {}", crate::REDIS_VERSION);
            return Ok(());
        }
        [p] => (p.clone(), false),
        [f, p] if f == "--fix" => (p.clone(), true),
        [t, ts, p] if t == "--truncate-to-timestamp" => {
            match ts.parse::<i64>() {
                Ok(v) => c.to_ts = v,
                Err(_) => {
                    say!(c, "Invalid timestamp, aborting...");
                    return Err(Exit);
                }
            }
            (p.clone(), false)
        }
        _ => return Err(usage(c)),
    };
    let path = PathBuf::from(path);
    let dir = path.parent().map(|d| if d.as_os_str().is_empty() { PathBuf::from(".") } else { d.to_path_buf() }).unwrap_or_else(|| PathBuf::from("."));
    let bytes = read(c, &path)?;
    if is_manifest(&bytes) {
        check_multi_part(c, &dir, &bytes, fix)
    } else {
        say!(c, "Start checking Old-Style AOF");
        let preamble = bytes.len() >= 8 && bytes.starts_with(b"REDIS");
        let name = path.display().to_string();
        let r = check_single(c, &name, &path, true, fix, preamble)?;
        report(c, r, &name, "AOF");
        Ok(())
    }
}

fn read(c: &mut Checker, path: &Path) -> Result<Vec<u8>, Exit> {
    std::fs::read(path).map_err(|e| {
        say!(c, "Cannot open file {}: {}", path.display(), crate::config::strerror(&e));
        Exit
    })
}

/// A manifest: some `file ...` line before anything that is not a comment.
fn is_manifest(bytes: &[u8]) -> bool {
    let mut found = false;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b"#") {
            continue;
        }
        if line.starts_with(b"file") {
            found = true;
        } else {
            break;
        }
    }
    found
}

fn report(c: &mut Checker, r: Checked, name: &str, kind: &str) {
    match r {
        Checked::Ok => say!(c, "{kind} {name} is valid"),
        Checked::Empty => say!(c, "{kind} {name} is empty"),
        Checked::TimestampTruncated => say!(c, "Successfully truncated AOF {name} to timestamp {}", c.to_ts),
        Checked::Truncated => say!(c, "Successfully truncated AOF {name}"),
    }
}

fn check_multi_part(c: &mut Checker, dir: &Path, text: &[u8], fix: bool) -> Result<(), Exit> {
    say!(c, "Start checking Multi Part AOF");
    let m = Manifest::parse(text).map_err(|(err, at)| {
        say!(c, "\n*** FATAL AOF MANIFEST FILE ERROR ***\n");
        if let Some((n, line)) = at {
            say!(c, "Reading the manifest file, at line {n}\n");
            say!(c, ">>> '{line}'\n");
        }
        say!(c, "{err}\n");
        Exit
    })?;
    let total = m.load_order().count();
    let mut n = 0;
    if let Some(b) = &m.base {
        n += 1;
        let path = dir.join(&b.name);
        let bytes = read(c, &path)?;
        let preamble = bytes.len() >= 8 && bytes.starts_with(b"REDIS");
        say!(c, "Start to check BASE AOF ({} format).", if preamble { "RDB" } else { "RESP" });
        let r = check_single(c, &b.name, &path, n == total, fix, preamble)?;
        report(c, r, &b.name, "BASE AOF");
    }
    if !m.incr.is_empty() {
        say!(c, "Start to check INCR files.");
        for e in &m.incr {
            n += 1;
            let r = check_single(c, &e.name, &dir.join(&e.name), n == total, fix, false)?;
            report(c, r, &e.name, "INCR AOF");
        }
    }
    say!(c, "All AOF files and manifest are valid");
    Ok(())
}

/// A cursor with the tool's reading rules.
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    /// A read went past the end (feof).
    eof: bool,
}

impl Cur<'_> {
    /// fgets with a buffer of `size`: up to size-1 bytes or a newline.
    fn gets(&mut self, size: usize) -> Option<&[u8]> {
        if self.pos >= self.b.len() {
            self.eof = true;
            return None;
        }
        let rest = &self.b[self.pos..];
        let max = rest.len().min(size - 1);
        let n = rest[..max].iter().position(|&x| x == b'\n').map_or(max, |p| p + 1);
        if n == rest.len() && rest[n - 1] != b'\n' {
            self.eof = true;
        }
        self.pos += n;
        Some(&self.b[self.pos - n..self.pos])
    }
}

fn set_error(c: &mut Checker, msg: String) {
    c.error = format!("0x{:16x}: {msg}", c.epos);
}

/// `*<n>` / `$<n>` followed by CRLF. None (with the error set, or at EOF
/// without) when it is not.
fn read_long(c: &mut Checker, cur: &mut Cur, prefix: u8) -> Option<i64> {
    c.epos = cur.pos;
    let line = cur.gets(128)?.to_vec();
    if line[0] != prefix {
        set_error(c, format!("Expected prefix '{}', got: '{}'", prefix as char, line[0] as char));
        return None;
    }
    // strtol: blanks, sign, digits; the rest must start with CRLF.
    let mut i = 1;
    while i < line.len() && line[i].is_ascii_whitespace() && line[i] != b'\r' && line[i] != b'\n' {
        i += 1;
    }
    let start = i;
    if i < line.len() && (line[i] == b'-' || line[i] == b'+') {
        i += 1;
    }
    let digits = i;
    while i < line.len() && line[i].is_ascii_digit() {
        i += 1;
    }
    let v = if i > digits { std::str::from_utf8(&line[start..i]).ok()?.parse::<i64>().unwrap_or(i64::MAX) } else { 0 };
    let rest = if i > digits { &line[i..] } else { &line[1..] };
    consume_newline(c, rest).then_some(v)
}

fn consume_newline(c: &mut Checker, b: &[u8]) -> bool {
    if !b.starts_with(b"\r\n") {
        let x = |i: usize| b.get(i).copied().unwrap_or(0);
        set_error(c, format!("Expected \\r\\n, got: {:02x}{:02x}", x(0), x(1)));
        return false;
    }
    c.line += 1;
    true
}

/// One command; tracks MULTI/EXEC nesting in `multi`.
fn process_resp(c: &mut Checker, cur: &mut Cur, file: &str, multi: &mut i32) -> bool {
    let Some(argc) = read_long(c, cur, b'*') else { return false };
    for i in 0..argc.max(0) {
        let Some(len) = read_long(c, cur, b'$') else { return false };
        if !(0..=i64::MAX - 2).contains(&len) {
            set_error(c, format!("Expected to read string of {len} bytes, which is not in the suitable range"));
            return false;
        }
        c.epos = cur.pos;
        let want = (len as u64).saturating_add(2);
        let have = (cur.b.len() - cur.pos) as u64;
        if have < want {
            cur.pos = cur.b.len();
            cur.eof = true;
            set_error(c, format!("Expected to read {want} bytes, got {have} bytes"));
            return false;
        }
        let s = &cur.b[cur.pos..cur.pos + len as usize];
        let nl = cur.b[cur.pos + len as usize..cur.pos + want as usize].to_vec();
        let (is_multi, is_exec) = (s.eq_ignore_ascii_case(b"multi"), s.eq_ignore_ascii_case(b"exec"));
        cur.pos += want as usize;
        if !consume_newline(c, &nl) {
            return false;
        }
        if i == 0 {
            if is_multi {
                *multi += 1;
                if *multi > 1 {
                    set_error(c, format!("Unexpected MULTI in AOF {file}"));
                    return false;
                }
            } else if is_exec {
                *multi -= 1;
                if *multi != 0 {
                    set_error(c, format!("Unexpected EXEC in AOF {file}"));
                    return false;
                }
            }
        }
    }
    true
}

fn check_single(c: &mut Checker, name: &str, path: &Path, last: bool, fix: bool, preamble: bool) -> Result<Checked, Exit> {
    let bytes = read(c, path)?;
    let shown = path.display().to_string();
    if bytes.is_empty() {
        return Ok(Checked::Empty);
    }
    let mut cur = Cur { b: &bytes, pos: 0, eof: false };
    if preamble {
        say!(c, "[offset 0] Checking RDB file {shown}");
        match rdb::load(&bytes, &LoadOptions::new(0), &mut Nop) {
            Ok(sum) => {
                say!(c, "[offset {}] Checksum OK", sum.end);
                say!(c, "[offset {}] \\o/ RDB looks OK! \\o/", sum.end);
                say!(c, "RDB preamble is OK, proceeding with AOF tail...");
                cur.pos = sum.end;
            }
            Err(e) => {
                say!(c, "--- RDB ERROR DETECTED ---");
                say!(c, "[offset {}] {}", e.offset, e.message);
                say!(c, "RDB preamble of AOF file is not sane, aborting.");
                return Err(Exit);
            }
        }
    }
    let mut pos = cur.pos;
    let mut multi = 0;
    loop {
        if multi == 0 {
            pos = cur.pos;
        }
        let Some(&first) = bytes.get(cur.pos) else {
            cur.eof = true;
            break;
        };
        if first == b'#' {
            c.epos = cur.pos;
            let line = cur.gets(super::reader::LINE_MAX).unwrap_or_default().to_vec();
            if c.to_ts != 0 && line.starts_with(b"#TS:") {
                let digits = &line[4..];
                let end = digits.iter().position(|b| !b.is_ascii_digit() && *b != b'-').unwrap_or(digits.len());
                let ts = std::str::from_utf8(&digits[..end]).ok().and_then(|s| s.parse::<i64>().ok());
                let Some(ts) = ts.filter(|_| digits.get(end) == Some(&b'\r')) else {
                    say!(c, "Invalid timestamp annotation");
                    return Err(Exit);
                };
                if ts <= c.to_ts {
                    continue;
                }
                if c.epos == 0 {
                    say!(c, "AOF {shown} has nothing before timestamp {}, aborting...", c.to_ts);
                    return Err(Exit);
                }
                if !last {
                    say!(c, "Failed to truncate AOF {shown} to timestamp {} to offset {} because it is not the last file.", c.to_ts, c.epos);
                    say!(c, "If you insist, please delete all files after this file according to the manifest file and delete the corresponding records in manifest file manually. Then re-run redis-check-aof.");
                    return Err(Exit);
                }
                if truncate(path, c.epos as u64).is_err() {
                    say!(c, "Failed to truncate AOF {shown} to timestamp {}", c.to_ts);
                    return Err(Exit);
                }
                return Ok(Checked::TimestampTruncated);
            }
        } else if first == b'*' {
            if !process_resp(c, &mut cur, &shown, &mut multi) {
                break;
            }
        } else {
            say!(c, "AOF {name} format error");
            break;
        }
    }
    if cur.eof && multi != 0 && c.error.is_empty() {
        set_error(c, "Reached EOF before reading EXEC for MULTI".into());
    }
    if !c.error.is_empty() {
        let e = c.error.clone();
        say!(c, "{e}");
    }
    let size = bytes.len();
    let diff = size - pos;
    if diff == 0 && c.to_ts != 0 {
        say!(c, "Truncate nothing in AOF {name} to timestamp {}", c.to_ts);
        return Ok(Checked::Ok);
    }
    say!(c, "AOF analyzed: filename={name}, size={size}, ok_up_to={pos}, ok_up_to_line={}, diff={diff}", c.line);
    if diff > 0 {
        if !fix {
            say!(c, "AOF {name} is not valid. Use the --fix option to try fixing it.");
            return Err(Exit);
        }
        if !last {
            say!(c, "Failed to truncate AOF {name} because it is not the last file");
            return Err(Exit);
        }
        say!(c, "This will shrink the AOF {name} from {size} bytes, with {diff} bytes, to {pos} bytes");
        let _ = write!(c.out, "Continue? [y/N]: ");
        let _ = c.out.flush();
        let mut answer = String::new();
        let _ = c.input.read_line(&mut answer);
        if !answer.starts_with(['y', 'Y']) {
            say!(c, "Aborting...");
            return Err(Exit);
        }
        if truncate(path, pos as u64).is_err() {
            say!(c, "Failed to truncate AOF {name}");
            return Err(Exit);
        }
        return Ok(Checked::Truncated);
    }
    Ok(Checked::Ok)
}

fn truncate(path: &Path, len: u64) -> std::io::Result<()> {
    std::fs::OpenOptions::new().write(true).open(path)?.set_len(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_on(args: &[&str], input: &str) -> (u8, String) {
        struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.borrow_mut().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut c = Checker {
            line: 1,
            epos: 0,
            error: String::new(),
            to_ts: 0,
            out: Box::new(Shared(buf.clone())),
            input: Box::new(std::io::Cursor::new(input.as_bytes().to_vec())),
        };
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let st = match run(&mut c, "redis-check-aof", &args) {
            Ok(()) => 0,
            Err(Exit) => 1,
        };
        let out = String::from_utf8_lossy(&buf.borrow()).into_owned();
        (st, out)
    }

    #[test]
    fn checks_fixes_and_truncates_to_timestamp() {
        let dir = std::env::temp_dir().join(format!("densekv-check-aof-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let aof = dir.join("appendonly.aof.1.incr.aof");
        let good = "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nset\r\n$3\r\nfoo\r\n$3\r\nbar\r\n";
        std::fs::write(&aof, format!("{good}*2\r\n$3\r\nget")).unwrap();
        std::fs::write(dir.join("appendonly.aof.manifest"), "file appendonly.aof.1.incr.aof seq 1 type i\n").unwrap();
        let m = dir.join("appendonly.aof.manifest");
        let m = m.to_str().unwrap();
        let (st, out) = run_on(&[m], "");
        assert_eq!(st, 1);
        assert!(out.contains("ok_up_to_line=15") && out.contains("not valid"), "{out}");
        let (st, out) = run_on(&["--fix", m], "y\n");
        assert_eq!(st, 0, "{out}");
        assert!(out.contains("Successfully truncated AOF"), "{out}");
        assert_eq!(std::fs::read_to_string(&aof).unwrap(), good);
        let (st, out) = run_on(&[m], "");
        assert_eq!(st, 0);
        assert!(out.contains("All AOF files and manifest are valid"), "{out}");
        std::fs::write(&aof, format!("#TS:1628217470\r\n{good}#TS:1628217472\r\n{good}")).unwrap();
        let (st, out) = run_on(&["--truncate-to-timestamp", "1628217471", m], "");
        assert_eq!(st, 0, "{out}");
        assert_eq!(std::fs::read_to_string(&aof).unwrap(), format!("#TS:1628217470\r\n{good}"));
        let (st, out) = run_on(&["--truncate-to-timestamp", "1628217469", m], "");
        assert_eq!(st, 1);
        assert!(out.contains("aborting"), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
