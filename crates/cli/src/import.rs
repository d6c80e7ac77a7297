//! `densekv import`: CSV, JSONL or RESP records to commands, pipelined.
//!
//! A mapping is a command template, `HSET user:{id} name {name}`: words
//! split on spaces, `{x}` replaced by a record's field (`{0}` the first
//! CSV column, `{name}` a CSV header's column or a JSON field). Each record
//! gives one command per `--map`; `--ttl` adds an EXPIRE of the key (the
//! command's first argument). RESP input is sent as it is.
//!
//! Memory stays bounded whatever the input size: records are read as
//! streamed, and at most `--window` commands are in flight (replies are
//! read as they come back and matched to input lines, so an error reply is
//! reported with the lines that caused it).
//!
//! When every `--map` is a variadic command (HSET, SADD, ZADD, RPUSH), the
//! records of a batch (1024) that write the same key are sent as one
//! command with all their members, in input order: the server then does a
//! fraction of the per-command work, which is most of the cost of a load.
//! Commands on different keys may then reach the server in another order
//! than the input's; with a SET among the maps nothing is merged.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::conn::{encode, Conn, Val};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Jsonl,
    Resp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Gzip {
    Auto,
    Yes,
    No,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnError {
    Skip,
    Abort,
}

pub struct Opts {
    pub file: String,
    pub format: Format,
    pub gzip: Gzip,
    pub maps: Vec<String>,
    pub header: bool,
    pub ttl: Option<u64>,
    pub db: u32,
    pub into_db: Option<u32>,
    pub swap_with: Option<u32>,
    pub on_error: OnError,
    pub window: usize,
}

/// One piece of a template word.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Lit(Vec<u8>),
    Col(usize),
    Name(String),
}

/// A command template.
#[derive(Debug, Clone)]
struct Template {
    words: Vec<Vec<Piece>>,
}

/// Records whose commands are merged per key before sending.
const MERGE_ROWS: usize = 1024;

const COMMANDS: &[(&str, usize)] = &[("SET", 3), ("HSET", 4), ("SADD", 3), ("ZADD", 4), ("RPUSH", 3)];

fn parse_template(s: &str) -> Result<Template, String> {
    let mut words = Vec::new();
    for w in s.split_whitespace() {
        let mut pieces = Vec::new();
        let mut rest = w;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                pieces.push(Piece::Lit(rest.as_bytes()[..open].to_vec()));
            }
            let close = rest[open..].find('}').ok_or_else(|| format!("--map '{s}': unclosed {{"))? + open;
            let name = &rest[open + 1..close];
            if name.is_empty() {
                return Err(format!("--map '{s}': empty {{}}"));
            }
            pieces.push(match name.parse::<usize>() {
                Ok(i) => Piece::Col(i),
                Err(_) => Piece::Name(name.to_string()),
            });
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Lit(rest.as_bytes().to_vec()));
        }
        words.push(pieces);
    }
    let cmd = match words.first().map(|w| w.as_slice()) {
        Some([Piece::Lit(c)]) => String::from_utf8_lossy(c).to_ascii_uppercase(),
        _ => return Err(format!("--map '{s}': must start with a command name")),
    };
    let Some(&(_, min)) = COMMANDS.iter().find(|(c, _)| *c == cmd) else {
        return Err(format!("--map '{s}': command must be one of SET, HSET, SADD, ZADD, RPUSH"));
    };
    if words.len() < min || (cmd != "SET" && cmd != "SADD" && cmd != "RPUSH" && (words.len() - 2) % 2 != 0) {
        return Err(format!("--map '{s}': wrong number of arguments for {cmd}"));
    }
    Ok(Template { words })
}

/// A record's fields, by column or name.
enum Record<'a> {
    Csv(&'a csv::ByteRecord, &'a HashMap<String, usize>),
    Json(&'a serde_json::Map<String, serde_json::Value>),
}

impl Record<'_> {
    fn field(&self, p: &Piece) -> Result<Cow<'_, [u8]>, String> {
        match (self, p) {
            (_, Piece::Lit(l)) => Ok(Cow::Owned(l.clone())),
            (Record::Csv(r, _), Piece::Col(i)) => r.get(*i).map(Cow::Borrowed).ok_or_else(|| format!("no column {i}")),
            (Record::Csv(r, names), Piece::Name(n)) => names.get(n).and_then(|&i| r.get(i)).map(Cow::Borrowed).ok_or_else(|| format!("no column {n}")),
            (Record::Json(_), Piece::Col(i)) => Err(format!("{{{i}}}: JSON fields are named")),
            (Record::Json(m), Piece::Name(n)) => match m.get(n) {
                None | Some(serde_json::Value::Null) => Err(format!("no field {n}")),
                Some(serde_json::Value::String(s)) => Ok(Cow::Owned(s.as_bytes().to_vec())),
                Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(Cow::Owned(v.to_string().into_bytes())),
                Some(_) => Err(format!("field {n} is not a string or number")),
            },
        }
    }

    fn render(&self, t: &Template) -> Result<Vec<Vec<u8>>, String> {
        t.words
            .iter()
            .map(|w| {
                let mut out = Vec::new();
                for p in w {
                    out.extend_from_slice(&self.field(p)?);
                }
                Ok(out)
            })
            .collect()
    }
}

/// Counts the bytes read from the input file (compressed, if gzipped).
struct Counting<R> {
    inner: R,
    n: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }
}

/// The input, decompressed if needed; its size when known.
fn open(o: &Opts, counter: Arc<AtomicU64>) -> io::Result<(Box<dyn BufRead>, Option<u64>)> {
    let (raw, size): (Box<dyn Read>, Option<u64>) = if o.file == "-" {
        (Box::new(io::stdin().lock()), None)
    } else {
        let f = File::open(&o.file).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", o.file)))?;
        let size = f.metadata().ok().map(|m| m.len());
        (Box::new(f), size)
    };
    let mut br = BufReader::with_capacity(1 << 16, Counting { inner: raw, n: counter });
    let gz = match o.gzip {
        Gzip::Yes => true,
        Gzip::No => false,
        Gzip::Auto => o.file.ends_with(".gz") || br.fill_buf()?.starts_with(&[0x1f, 0x8b]),
    };
    Ok(if gz { (Box::new(BufReader::with_capacity(1 << 16, flate2::read::MultiGzDecoder::new(br))), size) } else { (Box::new(br), size) })
}

/// A command with the members of several records, not yet sent.
struct Merged {
    cmd: Vec<u8>,
    key: Vec<u8>,
    members: Vec<Vec<u8>>,
    /// Input lines of its first and last record.
    first: u64,
    last: u64,
}

/// Counters and the reporting of problems.
struct Run {
    conn: Conn,
    window: usize,
    /// Input lines (first, last) of each command in flight.
    in_flight: VecDeque<(u64, u64)>,
    /// Merged commands not yet sent, and where each (command, key) is in
    /// that list.
    merged: Vec<Merged>,
    merged_at: HashMap<(Vec<u8>, Vec<u8>), usize>,
    merged_rows: usize,
    ttl: Option<String>,
    buf: Vec<u8>,
    rows: u64,
    commands: u64,
    errors: u64,
    abort: bool,
    on_error: OnError,
}

impl Run {
    fn problem(&mut self, line: u64, msg: &str) {
        self.errors += 1;
        eprintln!("line {line}: {msg}");
        if self.on_error == OnError::Abort {
            self.abort = true;
        }
    }

    fn queue(&mut self, line: u64, args: &[&[u8]]) -> io::Result<()> {
        self.queue_lines((line, line), args)
    }

    /// Adds a record's command to the merged batch.
    fn merge(&mut self, line: u64, args: Vec<Vec<u8>>) {
        let mut args = args.into_iter();
        let cmd = args.next().expect("templates have a command");
        let key = args.next().expect("templates have a key");
        let k = (cmd, key);
        match self.merged_at.get(&k) {
            Some(&i) => {
                let m = &mut self.merged[i];
                m.members.extend(args);
                m.last = line;
            }
            None => {
                self.merged_at.insert(k.clone(), self.merged.len());
                self.merged.push(Merged { cmd: k.0, key: k.1, members: args.collect(), first: line, last: line });
            }
        }
    }

    /// Sends the merged batch.
    fn flush_merged(&mut self) -> io::Result<()> {
        self.merged_at.clear();
        self.merged_rows = 0;
        for Merged { cmd, key, members, first, last } in std::mem::take(&mut self.merged) {
            let mut args: Vec<&[u8]> = vec![&cmd, &key];
            args.extend(members.iter().map(Vec::as_slice));
            self.queue_lines((first, last), &args)?;
            if let Some(t) = self.ttl.clone() {
                self.queue_lines((first, last), &[b"EXPIRE", &key, t.as_bytes()])?;
            }
        }
        Ok(())
    }

    fn queue_lines(&mut self, lines: (u64, u64), args: &[&[u8]]) -> io::Result<()> {
        encode(&mut self.buf, args);
        self.in_flight.push_back(lines);
        self.commands += 1;
        if self.buf.len() >= 1 << 16 {
            self.conn.send_raw(&self.buf)?;
            self.buf.clear();
        }
        if self.in_flight.len() >= self.window {
            self.drain(self.window / 2)?;
        }
        Ok(())
    }

    /// Sends what is buffered and reads replies until at most `keep` are in flight.
    fn drain(&mut self, keep: usize) -> io::Result<()> {
        self.conn.send_raw(&self.buf)?;
        self.buf.clear();
        self.conn.flush()?;
        while self.in_flight.len() > keep {
            let (first, last) = self.in_flight.pop_front().expect("non-empty");
            if let Val::Err(e) = self.conn.read()? {
                if first == last {
                    self.problem(first, &format!("server replied: {e}"));
                } else {
                    self.errors += 1;
                    eprintln!("lines {first}-{last} (merged): server replied: {e}");
                    if self.on_error == OnError::Abort {
                        self.abort = true;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs the import; Ok(true) when it completed (and swapped, if asked).
pub fn run(o: &Opts, mut conn: Conn) -> Result<bool, String> {
    let templates = o.maps.iter().map(|m| parse_template(m)).collect::<Result<Vec<_>, _>>()?;
    if o.format == Format::Resp && !templates.is_empty() {
        return Err("--map does not apply to --format resp".into());
    }
    if o.format != Format::Resp && templates.is_empty() {
        return Err("--map is required for csv and jsonl".into());
    }
    let io_err = |e: io::Error| e.to_string();
    let target = o.into_db.unwrap_or(o.db);
    conn.ok(&[b"SELECT", target.to_string().as_bytes()]).map_err(io_err)?;
    if o.into_db.is_some() {
        conn.ok(&[b"FLUSHDB"]).map_err(io_err)?;
    }
    let counter = Arc::new(AtomicU64::new(0));
    let (input, size) = open(o, counter.clone()).map_err(io_err)?;
    let tty = io::stderr().is_terminal();
    let bar = if !tty {
        ProgressBar::hidden()
    } else if let Some(n) = size {
        let b = ProgressBar::new(n);
        b.set_style(ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg} ETA {eta}").expect("static template"));
        b
    } else {
        let b = ProgressBar::new_spinner();
        b.set_style(ProgressStyle::with_template("{spinner} {bytes} read {msg}").expect("static template"));
        b
    };
    let started = Instant::now();
    let mut last_report = started;
    let ttl = o.ttl.map(|t| t.to_string());
    let merging = templates.iter().all(|t| !matches!(t.words[0].as_slice(), [Piece::Lit(c)] if c.eq_ignore_ascii_case(b"SET")));
    let mut run = Run { conn, window: o.window.max(2), in_flight: VecDeque::new(), merged: Vec::new(), merged_at: HashMap::new(), merged_rows: 0, ttl: ttl.clone(), buf: Vec::with_capacity(1 << 17), rows: 0, commands: 0, errors: 0, abort: false, on_error: o.on_error };
    let mut tick = |run: &Run| {
        if !run.rows.is_multiple_of(4096) {
            return;
        }
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        let rate = run.rows as f64 / secs;
        if tty {
            bar.set_position(counter.load(Ordering::Relaxed));
            bar.set_message(format!("{} rows, {rate:.0} rows/s", run.rows));
        } else if last_report.elapsed() >= Duration::from_secs(2) {
            last_report = Instant::now();
            let pct = size.map(|n| format!(" ({:.0}%)", 100.0 * counter.load(Ordering::Relaxed) as f64 / n.max(1) as f64)).unwrap_or_default();
            eprintln!("imported {} rows{pct}, {rate:.0} rows/s", run.rows);
        }
    };
    let emit = |run: &mut Run, line: u64, rec: &Record| -> io::Result<()> {
        let mut all = Vec::with_capacity(templates.len());
        for t in &templates {
            match rec.render(t) {
                Ok(args) => all.push(args),
                Err(e) => {
                    run.problem(line, &format!("malformed record: {e}"));
                    return Ok(());
                }
            }
        }
        if merging {
            for args in all {
                run.merge(line, args);
            }
            run.merged_rows += 1;
            if run.merged_rows >= MERGE_ROWS {
                run.flush_merged()?;
            }
        } else {
            for args in &all {
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                run.queue(line, &refs)?;
                if let Some(t) = &ttl {
                    run.queue(line, &[b"EXPIRE", &args[1], t.as_bytes()])?;
                }
            }
        }
        run.rows += 1;
        Ok(())
    };
    let result: io::Result<()> = (|| {
        match o.format {
            Format::Csv => {
                let mut rdr = csv::ReaderBuilder::new().has_headers(o.header).flexible(true).from_reader(input);
                let names: HashMap<String, usize> = if o.header { rdr.byte_headers()?.iter().enumerate().map(|(i, h)| (String::from_utf8_lossy(h).into_owned(), i)).collect() } else { HashMap::new() };
                let mut rec = csv::ByteRecord::new();
                loop {
                    match rdr.read_byte_record(&mut rec) {
                        Ok(false) => break,
                        Ok(true) => {
                            let line = rec.position().map_or(0, |p| p.line());
                            emit(&mut run, line, &Record::Csv(&rec, &names))?;
                        }
                        Err(e) => {
                            let line = e.position().map_or(0, |p| p.line());
                            run.problem(line, &format!("malformed CSV: {e}"));
                            if matches!(e.kind(), csv::ErrorKind::Io(_)) {
                                return Err(io::Error::other(e.to_string()));
                            }
                        }
                    }
                    tick(&run);
                    if run.abort {
                        break;
                    }
                }
            }
            Format::Jsonl => {
                let mut line_no = 0;
                for line in input.split(b'\n') {
                    let line = line?;
                    line_no += 1;
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match serde_json::from_slice::<serde_json::Value>(&line) {
                        Ok(serde_json::Value::Object(m)) => emit(&mut run, line_no, &Record::Json(&m))?,
                        Ok(_) => run.problem(line_no, "malformed record: not a JSON object"),
                        Err(e) => run.problem(line_no, &format!("malformed JSON: {e}")),
                    }
                    tick(&run);
                    if run.abort {
                        break;
                    }
                }
            }
            Format::Resp => resp_input(input, &mut run, &mut tick)?,
        }
        // Records before an abort were good: they are sent and answered.
        run.flush_merged()?;
        run.drain(0)?;
        Ok(())
    })();
    bar.finish_and_clear();
    result.map_err(io_err)?;
    let secs = started.elapsed().as_secs_f64();
    let mut swapped = String::new();
    if !run.abort {
        if let (Some(n), Some(m)) = (o.into_db, o.swap_with) {
            run.conn.ok(&[b"SWAPDB", n.to_string().as_bytes(), m.to_string().as_bytes()]).map_err(io_err)?;
            swapped = format!(", db {n} swapped with db {m}");
        }
    }
    eprintln!(
        "{} {} rows ({} commands) in {secs:.2}s, {:.0} rows/s; {} errors{}{swapped}",
        if run.abort { "aborted after" } else { "imported" },
        run.rows,
        run.commands,
        run.rows as f64 / secs.max(1e-9),
        run.errors,
        if run.abort { "; nothing swapped" } else { "" }
    );
    Ok(!run.abort)
}

/// RESP input: each `*N` array of bulk strings is one command, sent as it is.
fn resp_input(mut input: Box<dyn BufRead>, run: &mut Run, tick: &mut dyn FnMut(&Run)) -> io::Result<()> {
    let mut line_no: u64 = 0;
    let mut line = Vec::new();
    let read_line = |input: &mut Box<dyn BufRead>, line: &mut Vec<u8>, line_no: &mut u64| -> io::Result<bool> {
        line.clear();
        if input.read_until(b'\n', line)? == 0 {
            return Ok(false);
        }
        *line_no += 1;
        Ok(true)
    };
    let num = |l: &[u8], t: u8| -> Option<usize> {
        let l = l.strip_suffix(b"\r\n").or_else(|| l.strip_suffix(b"\n"))?;
        let (&c, rest) = l.split_first()?;
        (c == t).then(|| std::str::from_utf8(rest).ok()?.parse().ok())?
    };
    'commands: loop {
        if !read_line(&mut input, &mut line, &mut line_no)? {
            return Ok(());
        }
        let start = line_no;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some(n) = num(&line, b'*').filter(|&n| n > 0) else {
            run.problem(start, "malformed RESP: expected *<count>");
            if run.abort {
                return Ok(());
            }
            continue;
        };
        let mut args: Vec<Vec<u8>> = Vec::with_capacity(n);
        for _ in 0..n {
            let ok = read_line(&mut input, &mut line, &mut line_no)?;
            let Some(len) = ok.then(|| num(&line, b'$')).flatten() else {
                run.problem(line_no, "malformed RESP: expected $<length>");
                if run.abort {
                    return Ok(());
                }
                continue 'commands;
            };
            let mut b = vec![0; len + 2];
            input.read_exact(&mut b)?;
            line_no += b[..len].iter().filter(|&&c| c == b'\n').count() as u64 + 1;
            if &b[len..] != b"\r\n" {
                run.problem(line_no, "malformed RESP: bulk string not followed by CRLF");
                if run.abort {
                    return Ok(());
                }
                continue 'commands;
            }
            b.truncate(len);
            args.push(b);
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        run.queue(start, &refs)?;
        run.rows += 1;
        tick(run);
        if run.abort {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates() {
        let t = parse_template("HSET user:{id} name {name}").unwrap();
        assert_eq!(t.words.len(), 4);
        assert_eq!(t.words[1], vec![Piece::Lit(b"user:".to_vec()), Piece::Name("id".into())]);
        assert_eq!(parse_template("set {0} {1}").unwrap().words[2], vec![Piece::Col(1)]);
        assert!(parse_template("DEL {0}").is_err());
        assert!(parse_template("HSET k f").is_err());
        assert!(parse_template("SET {0 x").is_err());
        assert!(parse_template("ZADD z {0}").is_err());
        let rec = csv::ByteRecord::from(vec!["7", "ann"]);
        let names = HashMap::from([("id".to_string(), 0), ("name".to_string(), 1)]);
        let r = Record::Csv(&rec, &names).render(&t).unwrap();
        assert_eq!(r, vec![b"HSET".to_vec(), b"user:7".to_vec(), b"name".to_vec(), b"ann".to_vec()]);
        let j: serde_json::Value = serde_json::from_str(r#"{"id": 7, "name": "ann"}"#).unwrap();
        assert_eq!(Record::Json(j.as_object().unwrap()).render(&t).unwrap(), r);
        let j: serde_json::Value = serde_json::from_str(r#"{"id": 7}"#).unwrap();
        assert!(Record::Json(j.as_object().unwrap()).render(&t).is_err());
    }
}
