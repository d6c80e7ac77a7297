//! The AOF manifest: which files of the AOF directory make up the log, in
//! Redis 7's multi-part layout.
//!
//! ```text
//! appendonlydir/
//!   appendonly.aof.manifest        file appendonly.aof.2.base.rdb seq 2 type b
//!                                  file appendonly.aof.3.incr.aof seq 3 type i
//!   appendonly.aof.2.base.rdb      the dataset at the last rewrite (RDB, or
//!                                  commands with aof-use-rdb-preamble no)
//!   appendonly.aof.3.incr.aof      commands since, in RESP array form
//! ```
//!
//! One line per file: `file <name> seq <n> type <b|h|i>`, keys in any
//! order and extra pairs ignored (Redis's forward compatibility), the base
//! first, then history files (left over from a rewrite, to delete), then
//! incremental files in increasing `seq`. A name that needs quoting is
//! written quoted, as Redis's `sdscatrepr` does. Pure text in, text out:
//! no files here, so `check` and the fuzz target share it.

/// What a file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The dataset at the last rewrite (`b`).
    Base,
    /// Replaced by a rewrite, waiting to be deleted (`h`).
    History,
    /// Commands appended since the base (`i`).
    Incr,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Base => 'b',
            Kind::History => 'h',
            Kind::Incr => 'i',
        }
    }
}

/// One file of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// File name inside the AOF directory (never a path).
    pub name: String,
    /// Sequence number.
    pub seq: i64,
    /// Role.
    pub kind: Kind,
}

/// The manifest: base, history and incremental files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The base file, if any.
    pub base: Option<Entry>,
    /// Files a rewrite replaced, still to delete.
    pub history: Vec<Entry>,
    /// Incremental files, oldest first.
    pub incr: Vec<Entry>,
    /// The last base sequence number used.
    pub base_seq: i64,
    /// The last incremental sequence number used.
    pub incr_seq: i64,
}

/// The manifest's file name for `appendfilename`.
pub fn manifest_name(appendfilename: &str) -> String {
    format!("{appendfilename}.manifest")
}

/// The temporary name the manifest is written under before its rename.
pub fn temp_manifest_name(appendfilename: &str) -> String {
    format!("temp-{appendfilename}.manifest")
}

/// Longest manifest line Redis reads.
const MAX_LINE: usize = 1024;

impl Manifest {
    /// Parses a manifest's text.
    ///
    /// Errors: Redis's message, and the 1-based line number with the line
    /// (trimmed) when one was being read.
    pub fn parse(text: &[u8]) -> Result<Manifest, (String, Option<(usize, String)>)> {
        let mut m = Manifest::default();
        if text.is_empty() {
            return Err(("Found an empty AOF manifest".into(), None));
        }
        let mut maxseq = 0i64;
        let mut rest = text;
        let mut linenum = 0;
        while !rest.is_empty() {
            // As fgets with a MAX_LINE+1 buffer: a longer line comes in pieces.
            let cut = rest.iter().take(MAX_LINE).position(|&b| b == b'\n').map(|p| p + 1).unwrap_or(rest.len().min(MAX_LINE));
            let raw = &rest[..cut];
            rest = &rest[cut..];
            linenum += 1;
            if raw.first() == Some(&b'#') {
                continue;
            }
            let line = String::from_utf8_lossy(raw).trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n')).to_string();
            let at = || Some((linenum, line.clone()));
            if !raw.contains(&b'\n') {
                return Err(("The AOF manifest file contains too long line".into(), at()));
            }
            if line.is_empty() {
                return Err(("Invalid AOF manifest file format".into(), at()));
            }
            let argv = match split_args(line.as_bytes()) {
                Some(a) if a.len() >= 6 && a.len() % 2 == 0 => a,
                _ => return Err(("Invalid AOF manifest file format".into(), at())),
            };
            let (mut name, mut seq, mut kind) = (None, 0i64, None);
            for pair in argv.chunks(2) {
                let key = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
                match key.as_str() {
                    "file" => {
                        let n = String::from_utf8_lossy(&pair[1]).into_owned();
                        if n.contains('/') || n.contains('\\') {
                            return Err(("File can't be a path, just a filename".into(), at()));
                        }
                        name = Some(n);
                    }
                    "seq" => seq = atoll(&pair[1]),
                    "type" => kind = pair[1].first().copied(),
                    _ => {}
                }
            }
            let (Some(name), Some(kind)) = (name.filter(|n| !n.is_empty()), kind.filter(|&k| k != 0)) else {
                return Err(("Invalid AOF manifest file format".into(), at()));
            };
            if seq == 0 {
                return Err(("Invalid AOF manifest file format".into(), at()));
            }
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return Err(("Found duplicate base file information".into(), at()));
                    }
                    m.base_seq = seq;
                    m.base = Some(Entry { name, seq, kind: Kind::Base });
                }
                b'h' => m.history.push(Entry { name, seq, kind: Kind::History }),
                b'i' => {
                    if seq <= maxseq {
                        return Err(("Found a non-monotonic sequence number".into(), at()));
                    }
                    maxseq = seq;
                    m.incr_seq = seq;
                    m.incr.push(Entry { name, seq, kind: Kind::Incr });
                }
                _ => return Err(("Unknown AOF file type".into(), at())),
            }
        }
        if linenum == 0 {
            return Err(("Found an empty AOF manifest".into(), None));
        }
        Ok(m)
    }

    /// The manifest's text: base, history, incremental files.
    pub fn format(&self) -> String {
        let mut s = String::new();
        for e in self.base.iter().chain(&self.history).chain(&self.incr) {
            s.push_str(&format!("file {} seq {} type {}\n", repr_if_needed(&e.name), e.seq, e.kind.letter()));
        }
        s
    }

    /// Makes a new base named for `appendfilename` (`.rdb` when `rdb`), the
    /// old base becoming history. Returns the new base's name.
    pub fn new_base(&mut self, appendfilename: &str, rdb: bool) -> String {
        if let Some(mut old) = self.base.take() {
            old.kind = Kind::History;
            self.history.insert(0, old);
        }
        self.base_seq += 1;
        let name = format!("{appendfilename}.{}.base.{}", self.base_seq, if rdb { "rdb" } else { "aof" });
        self.base = Some(Entry { name: name.clone(), seq: self.base_seq, kind: Kind::Base });
        name
    }

    /// Adds a new incremental file. Returns its name.
    pub fn new_incr(&mut self, appendfilename: &str) -> String {
        self.incr_seq += 1;
        let name = format!("{appendfilename}.{}.incr.aof", self.incr_seq);
        self.incr.push(Entry { name: name.clone(), seq: self.incr_seq, kind: Kind::Incr });
        name
    }

    /// Marks every incremental file but the last `keep` as history (after
    /// a rewrite: the new base holds what they held).
    pub fn retire_incr(&mut self, keep: usize) {
        let n = self.incr.len().saturating_sub(keep);
        for mut e in self.incr.drain(..n).rev() {
            e.kind = Kind::History;
            self.history.insert(0, e);
        }
    }

    /// The base and incremental files, in loading order.
    pub fn load_order(&self) -> impl Iterator<Item = &Entry> {
        self.base.iter().chain(&self.incr)
    }
}

/// `atoll`: leading digits with an optional sign, 0 when none.
fn atoll(b: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(b);
    let t = s.trim_start();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let mut v: i64 = 0;
    for c in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// True when a name must be written quoted (Redis's `sdsneedsrepr`).
fn needs_repr(s: &str) -> bool {
    s.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n' | b'\r' | b'\t' | 7 | 8) || !(b.is_ascii_graphic()) && b != b'\'')
}

fn repr_if_needed(s: &str) -> String {
    if !needs_repr(s) {
        return s.to_string();
    }
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// Splits a line into arguments as Redis's `sdssplitargs`: blanks
/// separate, double quotes take escapes (`\n`, `\xHH` ...), single quotes
/// only `\'`; a closing quote must be followed by a blank. None when
/// unbalanced.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                if i >= n {
                    return None;
                }
                if line[i] == b'\\' && i + 3 < n && line[i + 1] == b'x' && line[i + 2].is_ascii_hexdigit() && line[i + 3].is_ascii_hexdigit() {
                    let h = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    cur.push(h(line[i + 2]) * 16 + h(line[i + 3]));
                    i += 3;
                } else if line[i] == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        c => c,
                    });
                } else if line[i] == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(line[i]);
                }
            } else if insq {
                if i >= n {
                    return None;
                }
                if line[i] == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if line[i] == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(line[i]);
                }
            } else if i >= n || line[i].is_ascii_whitespace() {
                break;
            } else if line[i] == b'"' {
                inq = true;
            } else if line[i] == b'\'' {
                insq = true;
            } else {
                cur.push(line[i]);
            }
            i += 1;
        }
        out.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_naming() {
        let mut m = Manifest::default();
        assert_eq!(m.new_base("appendonly.aof", true), "appendonly.aof.1.base.rdb");
        assert_eq!(m.new_incr("appendonly.aof"), "appendonly.aof.1.incr.aof");
        let text = m.format();
        assert_eq!(text, "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n");
        assert_eq!(Manifest::parse(text.as_bytes()).unwrap(), m);
        m.new_base("appendonly.aof", false);
        m.new_incr("appendonly.aof");
        m.retire_incr(1);
        assert_eq!(
            m.format(),
            "file appendonly.aof.2.base.aof seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.1.base.rdb seq 1 type h\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
        );
        let q = Entry { name: "a b".into(), seq: 1, kind: Kind::Incr };
        let m2 = Manifest { incr: vec![q], incr_seq: 1, ..Default::default() };
        assert_eq!(m2.format(), "file \"a b\" seq 1 type i\n");
        assert_eq!(Manifest::parse(m2.format().as_bytes()).unwrap(), m2);
    }

    #[test]
    fn refuses_what_redis_refuses() {
        let err = |t: &str| Manifest::parse(t.as_bytes()).unwrap_err().0;
        assert_eq!(err(""), "Found an empty AOF manifest");
        assert_eq!(err("file a seq 1\n"), "Invalid AOF manifest file format");
        assert_eq!(err("file a seq 1 type x\n"), "Unknown AOF file type");
        assert_eq!(err("file a/b seq 1 type i\n"), "File can't be a path, just a filename");
        assert_eq!(err("file a seq 1 type b\nfile b seq 2 type b\n"), "Found duplicate base file information");
        assert_eq!(err("file a seq 2 type i\nfile b seq 1 type i\n"), "Found a non-monotonic sequence number");
        assert_eq!(err("file a seq 1 type i"), "The AOF manifest file contains too long line");
        assert_eq!(err("\n"), "Invalid AOF manifest file format");
        // Comments and extra pairs are accepted.
        assert!(Manifest::parse(b"# hi\nfile a seq 1 type i foo bar\n").is_ok());
    }
}
