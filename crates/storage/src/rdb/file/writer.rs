//! Writing RDB files a piece at a time: header, aux fields, function
//! libraries, databases and their keys, then EOF and the checksum.
//!
//! `RdbWriter` holds only the output, a running CRC-64 and the bytes of
//! the entry being written, so a save can feed it one key at a time and do
//! other work between keys (densekv saves without fork). Each call writes
//! its whole item to the output before returning, or nothing when it fails
//! before output (a value that needs a newer version than the header's).
//!
//! With `compression` on, strings over 20 bytes (keys, string values,
//! members and fields of lists, sets, sorted sets and plain hashes, aux
//! values, library code) are LZF-compressed when that saves space, as
//! Redis's `rdbcompression yes` does. Hashes with field TTLs and streams
//! are written by the value layer as they are, uncompressed: still valid,
//! only larger than Redis's file would be.

use std::io::{self, Write};

use super::super::crc64::{crc64, crc64_combine};
use super::super::lzf_compress;
use super::super::primitives::{put_len, put_str, ty, RDB_VERSION};
use super::super::value::{put_strref, write_value};
use super::format::{op, FUNCTIONS_SINCE, MAGIC};
use crate::{StrRef, Value, ValueRef};

/// Oldest version the writer declares: Redis 6's, the first that loads
/// every layout the value writer uses for plain values.
const MIN_WRITE_VERSION: u16 = 9;
/// Strings this long or shorter are never compressed (Redis's threshold).
const COMPRESS_OVER: usize = 20;
/// Entry buffers larger than this are given back after the entry.
const KEEP_BUFFER: usize = 1 << 20;

/// Options of a save: Redis's `rdbcompression` and `rdbchecksum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// LZF-compress strings over 20 bytes when that saves space.
    pub compression: bool,
    /// End the file with its CRC-64; off, the checksum written is 0 and
    /// loaders skip verification.
    pub checksum: bool,
}

impl Default for WriteOptions {
    /// Redis's defaults: both on.
    fn default() -> Self {
        WriteOptions { compression: true, checksum: true }
    }
}

/// Why an `RdbWriter` call failed.
#[derive(Debug)]
pub enum RdbWriteError {
    /// The output failed; the file is incomplete.
    Io(io::Error),
    /// `new` was asked for a version it does not write (9 to 12 only).
    UnsupportedVersion(u16),
    /// The item needs RDB version `needed` but the header declared
    /// `declared`. Nothing was written for it; the file is still
    /// consistent.
    Version {
        /// Version the item needs.
        needed: u16,
        /// Version of the file being written.
        declared: u16,
    },
}

impl std::fmt::Display for RdbWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RdbWriteError::Io(e) => write!(f, "writing the RDB file: {e}"),
            RdbWriteError::UnsupportedVersion(v) => write!(f, "RDB version {v} is not one densekv writes (9 to {RDB_VERSION})"),
            RdbWriteError::Version { needed, declared } => {
                write!(f, "an item needs RDB version {needed} but the file is version {declared}")
            }
        }
    }
}

impl std::error::Error for RdbWriteError {}

impl From<io::Error> for RdbWriteError {
    fn from(e: io::Error) -> Self {
        RdbWriteError::Io(e)
    }
}

/// The lowest RDB version that holds `v` as `RdbWriter::entry` writes it:
/// 12 for a hash with field TTLs (Redis 7.4), 11 for a stream whose
/// consumers' active and seen times differ (Redis 7.2), 10 for other
/// streams (Redis 7.0), 9 for everything else. Cheap: it looks at no
/// element.
pub fn value_version(v: ValueRef) -> u16 {
    match v {
        ValueRef::Hash(h) if h.min_deadline().is_some() => 12,
        ValueRef::Set(s) if s.min_deadline().is_some() => 12,
        ValueRef::ZSet(z) if z.min_deadline().is_some() => 12,
        ValueRef::Stream(s) => {
            let active = s.groups().iter().flat_map(|g| g.consumers()).any(|c| c.active_time != c.seen_time);
            if active {
                11
            } else {
                10
            }
        }
        _ => MIN_WRITE_VERSION,
    }
}

/// The lowest file version for values needing at most `values` (the
/// largest `value_version`, or 0 with no key) and, if `functions`, for
/// function libraries, which need Redis 7.0's version 10. Redis loads a
/// file whose version is at most its own: 10 for 7.0, 11 for 7.2, 12 for
/// 7.4 and 8.
pub fn min_file_version(values: u16, functions: bool) -> u16 {
    let floor = if functions { FUNCTIONS_SINCE } else { MIN_WRITE_VERSION };
    values.max(floor)
}

/// Bytes of the header (`REDIS` and four version digits).
pub const HEADER_LEN: usize = MAGIC.len() + 4;

/// The header declaring `version` and the file's checksum, for a file
/// whose header is settled after its body was written: `rest_crc` is
/// crc64 of every byte after the header up to and including EOF, and
/// `rest_len` their count. The checksum goes after EOF; the header
/// overwrites the first `HEADER_LEN` bytes.
pub fn sealed(version: u16, rest_crc: u64, rest_len: u64) -> ([u8; HEADER_LEN], u64) {
    let mut header = [0u8; HEADER_LEN];
    header[..MAGIC.len()].copy_from_slice(MAGIC);
    header[MAGIC.len()..].copy_from_slice(format!("{version:04}").as_bytes());
    (header, crc64_combine(crc64(0, &header), rest_crc, rest_len))
}

/// Writes one RDB file to `W`, item by item. Wrap a file in a
/// `BufWriter`: each item is one or two `write_all` calls.
///
/// After an `Io` error the output is incomplete and the writer should be
/// dropped; after a `Version` error nothing was written and it goes on.
#[derive(Debug)]
pub struct RdbWriter<W: Write> {
    w: W,
    version: u16,
    opts: WriteOptions,
    crc: u64,
    written: u64,
    /// The lowest version what was written so far fits in.
    needed: u16,
    /// The current item's opcodes, key and (for an entry) type byte.
    head: Vec<u8>,
    /// The current entry's value: type byte, then body.
    body: Vec<u8>,
    /// Compression left to whoever writes the output (`defer_compression`).
    defer: bool,
    /// Strings left plain in `head` and `body`: (prefix, data, end) offsets.
    head_spans: Vec<(usize, usize, usize)>,
    body_spans: Vec<(usize, usize, usize)>,
    /// Those strings in the output, by absolute offset, until taken.
    deferred: Vec<Deferred>,
}

/// A string a writer with deferred compression wrote plain: bytes
/// `prefix..end` of the output are its plain encoding (length, then the
/// string from `data`). `compress_deferred` gives it the form a writer
/// without deferral would have written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deferred {
    pub prefix: u64,
    pub data: u64,
    pub end: u64,
}

/// Copies `buf` to `out`, writing each string of `spans` ((prefix, data,
/// end) offsets into `buf`, ascending, as `Deferred` gives them less the
/// offset of `buf`'s first byte) as `RdbWriter` writes a string when it
/// compresses: LZF when that is shorter, else unchanged. The result is
/// byte for byte what a writer without deferral would have written.
pub fn compress_deferred(buf: &[u8], spans: &[(usize, usize, usize)], out: &mut Vec<u8>) {
    let mut at = 0;
    for &(prefix, data, end) in spans {
        out.extend_from_slice(&buf[at..prefix]);
        put_str_lzf(out, &buf[data..end], true, None);
        at = end;
    }
    out.extend_from_slice(&buf[at..]);
}

impl<W: Write> RdbWriter<W> {
    /// Starts a file of RDB `version` (9 to 12) on `w`, writing the
    /// header. See `min_file_version` for which to pick.
    pub fn new(w: W, version: u16, opts: WriteOptions) -> Result<Self, RdbWriteError> {
        if !(MIN_WRITE_VERSION..=RDB_VERSION).contains(&version) {
            return Err(RdbWriteError::UnsupportedVersion(version));
        }
        let mut me = RdbWriter {
            w,
            version,
            opts,
            crc: 0,
            written: 0,
            needed: MIN_WRITE_VERSION,
            head: Vec::new(),
            body: Vec::new(),
            defer: false,
            head_spans: Vec::new(),
            body_spans: Vec::new(),
            deferred: Vec::new(),
        };
        me.head.extend_from_slice(MAGIC);
        me.head.extend_from_slice(format!("{version:04}").as_bytes());
        me.emit(false)?;
        Ok(me)
    }

    /// From now on, strings this writer would compress are written plain
    /// and listed (`output_and_deferred`), for the thread that writes the
    /// output to compress them (`compress_deferred`) off the caller's
    /// thread. Only with `compression` on; the checksum must then be the
    /// writing thread's too (the bytes change), so `checksum` must be off.
    pub fn defer_compression(&mut self) {
        debug_assert!(!self.opts.checksum, "a deferred-compression writer's checksum would cover the plain bytes");
        self.defer = self.opts.compression;
    }

    /// The output, and the strings left for it to compress (taken by the
    /// caller before it hands those bytes on).
    pub fn output_and_deferred(&mut self) -> (&mut W, &mut Vec<Deferred>) {
        (&mut self.w, &mut self.deferred)
    }

    /// The version the header declared.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The lowest version whose header would declare everything written
    /// so far (`min_file_version` of it): a writer started at the newest
    /// version, for a file whose header is settled last.
    pub fn needed_version(&self) -> u16 {
        self.needed
    }

    /// The output, for a caller that needs to act between items (hand
    /// buffered bytes on after each key, say).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.w
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Writes an AUX field. A value that is the canonical decimal form of
    /// a 32-bit integer is written in the integer encoding, as Redis
    /// writes redis-bits, ctime and the like.
    pub fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), RdbWriteError> {
        self.head.push(op::AUX);
        self.put_str(key);
        match Value::string(value) {
            Value::Int(v) if i32::try_from(v).is_ok() => put_strref(&mut self.head, StrRef::Int(v)),
            _ => self.put_str(value),
        }
        self.emit(false)
    }

    /// Writes the AUX fields of a replication history a restarted server
    /// may continue by PSYNC: repl-stream-db (the database the stream had
    /// selected), repl-id and repl-offset, as Redis writes them.
    pub fn repl_aux(&mut self, stream_db: usize, replid: &str, offset: i64) -> Result<(), RdbWriteError> {
        self.aux(b"repl-stream-db", stream_db.to_string().as_bytes())?;
        self.aux(b"repl-id", replid.as_bytes())?;
        self.aux(b"repl-offset", offset.to_string().as_bytes())
    }

    /// Writes the AUX fields Redis puts first in every file: redis-ver
    /// (the version densekv reports), redis-bits, ctime (Unix seconds),
    /// used-mem and aof-base (1 in an AOF's base file, else 0).
    pub fn standard_aux(&mut self, redis_ver: &str, ctime_secs: i64, used_mem: u64, aof_base: bool) -> Result<(), RdbWriteError> {
        self.aux(b"redis-ver", redis_ver.as_bytes())?;
        self.aux(b"redis-bits", usize::BITS.to_string().as_bytes())?;
        self.aux(b"ctime", ctime_secs.to_string().as_bytes())?;
        self.aux(b"used-mem", used_mem.to_string().as_bytes())?;
        self.aux(b"aof-base", if aof_base { b"1" } else { b"0" })
    }

    /// Writes function libraries, each as the full code FUNCTION LOAD was
    /// given (Redis writes them after the aux fields, before any
    /// database). Needs a file of version 10 or later.
    pub fn functions<'a>(&mut self, codes: impl IntoIterator<Item = &'a [u8]>) -> Result<(), RdbWriteError> {
        for code in codes {
            if self.version < FUNCTIONS_SINCE {
                return Err(RdbWriteError::Version { needed: FUNCTIONS_SINCE, declared: self.version });
            }
            self.needed = self.needed.max(FUNCTIONS_SINCE);
            self.head.push(op::FUNCTION2);
            self.put_str(code);
            self.emit(false)?;
        }
        Ok(())
    }

    /// Starts database `index`: SELECTDB, then RESIZEDB with its key count
    /// and how many of those have a deadline (a sizing hint for loaders).
    /// Entries before any `select_db` load into database 0.
    pub fn select_db(&mut self, index: u64, keys: u64, expires: u64) -> Result<(), RdbWriteError> {
        self.head.push(op::SELECTDB);
        put_len(&mut self.head, index);
        self.head.push(op::RESIZEDB);
        put_len(&mut self.head, keys);
        put_len(&mut self.head, expires);
        self.emit(false)
    }

    /// Switches back to database `index` without a RESIZEDB hint: for a
    /// file whose databases' keys come interleaved (a background save
    /// takes keys from whichever database a write touched first).
    pub fn reselect_db(&mut self, index: u64) -> Result<(), RdbWriteError> {
        self.head.push(op::SELECTDB);
        put_len(&mut self.head, index);
        self.emit(false)
    }

    /// Writes one key: EXPIRETIME_MS when it has a deadline, then its
    /// value. Hash fields due at `now` are left out; a hash with none left
    /// is not written at all (returns false), as an empty key would be
    /// refused by loaders. Keys already expired are written: loaders skip
    /// them, replicas keep them until told.
    pub fn entry(&mut self, key: &[u8], v: ValueRef, expire_ms: Option<i64>, now: i64) -> Result<bool, RdbWriteError> {
        if let ValueRef::Hash(h) = v {
            if h.iter(now).next().is_none() {
                return Ok(false);
            }
        }
        self.body.clear();
        let needed = if self.opts.compression { self.value_compressed(v, now) } else { write_value(&mut self.body, v, now) };
        if needed > self.version {
            self.body.clear();
            self.body_spans.clear();
            return Err(RdbWriteError::Version { needed, declared: self.version });
        }
        self.needed = self.needed.max(needed);
        if let Some(t) = expire_ms {
            self.head.push(op::EXPIRETIME_MS);
            self.head.extend_from_slice(&t.to_le_bytes());
        }
        self.head.push(self.body[0]);
        self.put_str(key);
        self.emit(true)?;
        Ok(true)
    }

    /// Writes EOF and the checksum, flushes, and returns the output and
    /// the file's length.
    pub fn finish(mut self) -> Result<(W, u64), RdbWriteError> {
        self.head.push(op::EOF);
        self.emit(false)?;
        let crc = if self.opts.checksum { self.crc } else { 0 };
        self.w.write_all(&crc.to_le_bytes())?;
        self.w.flush()?;
        Ok((self.w, self.written + 8))
    }

    /// Writes EOF and the checksum a file whose header declares the
    /// lowest version for what was written (`min_file_version` of
    /// `needed_version`) would have, flushes, and returns the output, the
    /// file's length and that header, which the caller writes over the
    /// first `HEADER_LEN` bytes. Start the writer at `RDB_VERSION`: a
    /// synchronous save then walks the keyspace once, not twice.
    pub fn finish_lowest(mut self) -> Result<(W, u64, [u8; HEADER_LEN]), RdbWriteError> {
        self.head.push(op::EOF);
        self.emit(false)?;
        let version = min_file_version(self.needed, false);
        let rest = self.written - HEADER_LEN as u64;
        let (header, crc) = if self.opts.checksum {
            // The running checksum covers the header written first; take it
            // out (crc is linear: crc(h || r) = shift(crc(h), |r|) ^ crc(r)).
            let mut declared = [0u8; HEADER_LEN];
            declared[..MAGIC.len()].copy_from_slice(MAGIC);
            declared[MAGIC.len()..].copy_from_slice(format!("{:04}", self.version).as_bytes());
            let rest_crc = self.crc ^ crc64_combine(crc64(0, &declared), 0, rest);
            sealed(version, rest_crc, rest)
        } else {
            (sealed(version, 0, rest).0, 0)
        };
        self.w.write_all(&crc.to_le_bytes())?;
        self.w.flush()?;
        Ok((self.w, self.written + 8, header))
    }

    /// Writes EOF and flushes, leaving the checksum to the caller, and
    /// returns the output with crc64 of what follows the header and its
    /// length, for `sealed`. For a file written in pieces on another
    /// thread: see `sealed`.
    pub fn finish_unsealed(mut self) -> Result<W, RdbWriteError> {
        self.head.push(op::EOF);
        self.emit(false)?;
        self.w.flush()?;
        Ok(self.w)
    }

    /// Writes `head`, then (for an entry) `body` past its type byte, and
    /// folds both into the checksum.
    fn emit(&mut self, with_body: bool) -> Result<(), RdbWriteError> {
        if self.defer {
            // Absolute offsets: head goes at `written`, body (past its type
            // byte) right after it.
            let head_at = self.written;
            let body_at = head_at + self.head.len() as u64;
            let at = |base: u64, skip: usize| move |(p, d, e): (usize, usize, usize)| Deferred { prefix: base + (p - skip) as u64, data: base + (d - skip) as u64, end: base + (e - skip) as u64 };
            self.deferred.extend(self.head_spans.drain(..).map(at(head_at, 0)));
            if with_body {
                self.deferred.extend(self.body_spans.drain(..).map(at(body_at, 1)));
            }
            self.body_spans.clear();
        }
        let body: &[u8] = if with_body { &self.body[1..] } else { &[] };
        for part in [&self.head[..], body] {
            if part.is_empty() {
                continue;
            }
            self.w.write_all(part)?;
            if self.opts.checksum {
                self.crc = crc64(self.crc, part);
            }
            self.written += part.len() as u64;
        }
        self.head.clear();
        self.body.clear();
        if self.body.capacity() > KEEP_BUFFER {
            self.body = Vec::new();
        }
        if self.head.capacity() > KEEP_BUFFER {
            self.head = Vec::new();
        }
        Ok(())
    }

    /// A string into `head`, compressed when the options say so.
    fn put_str(&mut self, s: &[u8]) {
        put_str_lzf(&mut self.head, s, self.opts.compression, self.defer.then_some(&mut self.head_spans));
    }

    /// `v` into `body` in the layouts `write_value` uses, with long strings
    /// compressed; hashes with field TTLs, sets and sorted sets with member
    /// TTLs and streams go to `write_value` unchanged. Returns the version needed.
    fn value_compressed(&mut self, v: ValueRef, now: i64) -> u16 {
        let out = &mut self.body;
        let mut spans = self.defer.then_some(&mut self.body_spans);
        match v {
            ValueRef::Str(s) => {
                out.push(ty::STRING);
                put_strref_lzf(out, s, spans.as_deref_mut());
            }
            ValueRef::List(l) => {
                out.push(ty::LIST);
                put_len(out, l.len() as u64);
                for e in l.iter() {
                    put_strref_lzf(out, e.get(), spans.as_deref_mut());
                }
            }
            ValueRef::Set(s) if s.min_deadline().is_none() => {
                out.push(ty::SET);
                put_len(out, s.len() as u64);
                for m in s.iter() {
                    put_strref_lzf(out, m, spans.as_deref_mut());
                }
            }
            ValueRef::ZSet(z) if z.min_deadline().is_none() => {
                out.push(ty::ZSET_2);
                put_len(out, z.len() as u64);
                for (m, score) in z.iter() {
                    put_str_lzf(out, m, true, spans.as_deref_mut());
                    out.extend_from_slice(&score.to_le_bytes());
                }
            }
            ValueRef::Hash(h) if h.min_deadline().is_none() => {
                let fields: Vec<_> = h.iter(now).collect();
                out.push(ty::HASH);
                put_len(out, fields.len() as u64);
                for (f, v) in fields {
                    put_str_lzf(out, f, true, spans.as_deref_mut());
                    put_strref_lzf(out, v, spans.as_deref_mut());
                }
            }
            // Field and member TTLs (their own layouts) and streams.
            ValueRef::Hash(_) | ValueRef::Set(_) | ValueRef::ZSet(_) | ValueRef::Stream(_) => return write_value(out, v, now),
        }
        MIN_WRITE_VERSION
    }
}

/// A string, LZF-compressed (encoding 0xC3: compressed length, original
/// length, data) when `compress`, it is over 20 bytes and that is shorter.
/// With `defer`, such a string is written plain and its (prefix, data,
/// end) offsets in `out` are listed there instead.
fn put_str_lzf(out: &mut Vec<u8>, s: &[u8], compress: bool, defer: Option<&mut Vec<(usize, usize, usize)>>) {
    if compress && s.len() > COMPRESS_OVER {
        if let Some(spans) = defer {
            let prefix = out.len();
            put_str(out, s);
            spans.push((prefix, out.len() - s.len(), out.len()));
            return;
        }
        // Compressed form: 1 + len(clen) + len(ulen) + clen bytes, plain:
        // len(ulen) + ulen; 6 spare bytes cover the longest length field.
        if let Some(c) = lzf_compress::compress(s, s.len() - 6) {
            out.push(0xc3);
            put_len(out, c.len() as u64);
            put_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    put_str(out, s);
}

fn put_strref_lzf(out: &mut Vec<u8>, s: StrRef, defer: Option<&mut Vec<(usize, usize, usize)>>) {
    match s {
        StrRef::Bytes(b) if b.len() > 11 => put_str_lzf(out, b, true, defer),
        _ => put_strref(out, s),
    }
}
