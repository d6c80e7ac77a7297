//! Loading RDB files: every opcode Redis 7.0 to 8 writes, versions 1 to
//! 12, from a byte slice, into callbacks (`load`) or databases
//! (`load_into`).
//!
//! The whole file is in memory: values are decoded by the value layer's
//! `Reader`, which works on slices. Nothing is allocated from a count the
//! file states (the value layer checks counts against the bytes left;
//! RESIZEDB is only passed on), so a corrupt or hostile file is an
//! `RdbFileError` naming the offset of the item that failed, never a panic
//! or a huge allocation.
//!
//! What is refused, with a message saying so: module data (MODULE_AUX,
//! module value types; densekv loads no modules), the function layout of
//! Redis 7.0's release candidates, and
//! versions newer than 12. SLOT_INFO (cluster slot sizes) is skipped; the
//! "lua" aux field (scripts saved by Redis before 7.0) is not passed on.
//! Empty keys are skipped as Redis skips them. Hash fields already due
//! are loaded like the others, as Redis loads them: the keyspace's field
//! expiry removes them afterwards (and counts them), so a hash whose every
//! field is due is still a key loaded.

use std::io::Read;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};

use super::super::crc64::crc64;
use super::super::primitives::{ty, RdbError, Reader, RDB_VERSION};
use super::super::value::Shapes;
use super::format::{module_name, module_ty, op, show, RdbFileError, CHECKSUM_SINCE, MAGIC};
use crate::keyspace::prepack::{DbView, Prepack, Prepacker};
use crate::{Db, Ttl, Value};

/// How to load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Encoding limits for the collections built.
    pub shapes: Shapes,
    /// The current Unix time in ms: hash fields due then are dropped, and
    /// `load_into` skips keys whose deadline has passed.
    pub now: i64,
    /// Verify the checksum (a stored checksum of 0 is never verified).
    /// Off is Redis's `rdbchecksum no`.
    pub verify_checksum: bool,
    /// Keep keys whose deadline has passed, as a replica loads: they are
    /// the primary's to expire (its DELs follow), and a replica that
    /// dropped them at load would differ from its primary meanwhile.
    pub keep_expired: bool,
    /// Called on a thread the load starts (the packing thread) after each
    /// piece of its work and once more as it ends, with that thread's own
    /// record: a server that counts its memory per thread publishes the
    /// thread's allocations there, since the loader frees and keeps what
    /// the thread allocated.
    pub publish_thread: Option<fn(&mut i64)>,
}

impl LoadOptions {
    /// Default shapes, checksum verified, time `now`, expired keys left out.
    pub fn new(now: i64) -> Self {
        LoadOptions { shapes: Shapes::default(), now, verify_checksum: true, keep_expired: false, publish_thread: None }
    }
}

/// One key as the file holds it.
#[derive(Debug)]
pub struct LoadedEntry {
    /// The database (the last SELECTDB; 0 before any).
    pub db: u64,
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Value,
    /// Deadline in Unix ms (EXPIRETIME_MS, or EXPIRETIME times 1000).
    pub expire_ms: Option<i64>,
    /// LRU idle seconds, when the file has them (IDLE).
    pub idle_secs: Option<u64>,
    /// LFU counter, when the file has it (FREQ).
    pub freq: Option<u8>,
    /// Where its item (the value type byte) starts in the file.
    pub offset: usize,
}

/// What `load` calls for each item, in file order. An `Err` stops the
/// load with that message at the item's offset.
pub trait RdbVisitor {
    /// An AUX field (except "lua").
    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let _ = (key, value);
        Ok(())
    }

    /// SELECTDB: the following keys belong to database `index`.
    fn select_db(&mut self, index: u64) -> Result<(), String> {
        let _ = index;
        Ok(())
    }

    /// RESIZEDB: the current database's key and expire counts, a hint
    /// that the file may state wrongly.
    fn resize_db(&mut self, keys: u64, expires: u64) -> Result<(), String> {
        let _ = (keys, expires);
        Ok(())
    }

    /// A function library's code (FUNCTION2).
    fn function(&mut self, code: Vec<u8>) -> Result<(), String> {
        let _ = code;
        Ok(())
    }

    /// A key.
    fn entry(&mut self, entry: LoadedEntry) -> Result<(), String>;

    /// A key skipped because its value is empty; counted in
    /// `LoadSummary::empty_skipped`.
    fn empty_key(&mut self, key: &[u8]) {
        let _ = key;
    }

    /// Called after each item (a key, an opcode) with the offset reached, so a caller can
    /// report progress or do other work while a long file loads. False
    /// stops the load with an error.
    fn progress(&mut self, offset: usize) -> bool {
        let _ = offset;
        true
    }
}

/// What `load` found besides what it passed to the visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSummary {
    /// The file's RDB version.
    pub version: u16,
    /// Offset just past the checksum (past EOF before version 5): where
    /// the RDB ends. Bytes after it are not read (an AOF with an RDB
    /// preamble goes on there).
    pub end: usize,
    /// Keys passed to the visitor.
    pub keys: u64,
    /// Keys skipped because they were empty.
    pub empty_skipped: u64,
    /// The stored checksum (0: none).
    pub checksum: u64,
}

/// Parses the RDB file in `bytes`, calling `visitor` for each item.
pub fn load(bytes: &[u8], opts: &LoadOptions, visitor: &mut impl RdbVisitor) -> Result<LoadSummary, RdbFileError> {
    // A file ends in EOF and the checksum of everything before it: the
    // checksum of a large file is computed on a second thread while this
    // one parses (it was a tenth of a load's time, all at the end), and
    // used if EOF turns out to be where the file said.
    if let Some(body) = crc_body(bytes, opts) {
        return std::thread::scope(|s| {
            let ahead = std::thread::Builder::new().name("rdb-crc".into()).spawn_scoped(s, || crc64(0, body)).ok();
            parse(bytes, opts, visitor, ahead.map(|h| CrcAhead { len: body.len(), get: Box::new(move || h.join().ok()) }))
        });
    }
    parse(bytes, opts, visitor, None)
}

/// Files from this size on have their checksum computed beside the parse.
const CRC_AHEAD_MIN: usize = 4 << 20;

/// The bytes whose checksum may be computed beside the parse: all but the
/// last 8 of a file of `CRC_AHEAD_MIN` or more whose checksum is checked.
fn crc_body<'a>(bytes: &'a [u8], opts: &LoadOptions) -> Option<&'a [u8]> {
    (opts.verify_checksum && bytes.len() >= CRC_AHEAD_MIN).then(|| &bytes[..bytes.len() - 8])
}

/// A checksum on its way from another thread: of the first `len` bytes;
/// `get` waits for it (None: the thread failed to give it).
struct CrcAhead<'a> {
    len: usize,
    get: Box<dyn FnOnce() -> Option<u64> + 'a>,
}

/// `load`'s parse, with the checksum of the file's start on its way
/// (`crc_ahead`), or none.
fn parse(bytes: &[u8], opts: &LoadOptions, visitor: &mut impl RdbVisitor, crc_ahead: Option<CrcAhead<'_>>) -> Result<LoadSummary, RdbFileError> {
    let version = header(bytes)?;
    let mut f = FileReader { r: Reader::new(bytes) };
    f.r.pos = 9;
    let mut sum = LoadSummary { version, end: 0, keys: 0, empty_skipped: 0, checksum: 0 };
    let mut db = 0;
    // Set by opcodes before a key, for that key only.
    let (mut expire_ms, mut idle_secs, mut freq) = (None, None, None);
    loop {
        let at = f.r.pos;
        let t = f.field("opcode or value type", Reader::u8)?;
        let said = |m: String| RdbFileError::new(at, m);
        match t {
            op::EOF => break,
            op::SELECTDB => {
                db = f.field("database index", Reader::len)?;
                visitor.select_db(db).map_err(said)?;
            }
            op::RESIZEDB => {
                let keys = f.field("RESIZEDB key count", Reader::len)?;
                let expires = f.field("RESIZEDB expire count", Reader::len)?;
                visitor.resize_db(keys, expires).map_err(said)?;
            }
            op::AUX => {
                let key = f.field("AUX field name", Reader::string)?;
                let value = f.field("AUX field value", Reader::string)?;
                if key != b"lua" {
                    visitor.aux(&key, &value).map_err(said)?;
                }
            }
            op::EXPIRETIME_MS => expire_ms = Some(f.field("EXPIRETIME_MS deadline", Reader::millis)?),
            op::EXPIRETIME => {
                let b = f.field("EXPIRETIME deadline", |r| r.take(4))?;
                expire_ms = Some(i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64 * 1000);
            }
            op::IDLE => idle_secs = Some(f.field("IDLE time", Reader::len)?),
            op::FREQ => freq = Some(f.field("FREQ counter", Reader::u8)?),
            op::SLOT_INFO => {
                for what in ["SLOT_INFO slot", "SLOT_INFO size", "SLOT_INFO expire count"] {
                    f.field(what, Reader::len)?;
                }
            }
            op::FUNCTION2 => {
                let code = f.field("function library", Reader::string)?;
                visitor.function(code).map_err(said)?;
            }
            op::FUNCTION_PRE_GA => {
                return Err(said("function libraries in the format of Redis 7.0's release candidates are not supported".into()));
            }
            op::MODULE_AUX => {
                let id = f.field("module id", Reader::len)?;
                return Err(said(format!("auxiliary data of module '{}' is not supported: densekv loads no modules", module_name(id))));
            }
            _ => {
                let key = f.field("key", Reader::string)?;
                let value = f.value(t, &key, at, opts)?;
                let taken = (expire_ms.take(), idle_secs.take(), freq.take());
                let Some(value) = value else {
                    visitor.empty_key(&key);
                    sum.empty_skipped += 1;
                    continue;
                };
                let (expire_ms, idle_secs, freq) = taken;
                visitor.entry(LoadedEntry { db, key, value, expire_ms, idle_secs, freq, offset: at }).map_err(said)?;
                sum.keys += 1;
            }
        }
        if !visitor.progress(f.r.pos) {
            return Err(RdbFileError::new(f.r.pos, "loading stopped"));
        }
    }
    let eof = f.r.pos;
    if version >= CHECKSUM_SINCE {
        let stored = f.field("checksum after EOF", Reader::millis)? as u64;
        if opts.verify_checksum && stored != 0 {
            let computed = match crc_ahead {
                Some(c) if c.len == eof => (c.get)().unwrap_or_else(|| crc64(0, &bytes[..eof])),
                _ => crc64(0, &bytes[..eof]),
            };
            if computed != stored {
                // Redis's reason, which its tests and tools look for.
                let mut e = RdbFileError::new(eof, "RDB CRC error");
                e.crc_mismatch = Some((computed, stored));
                return Err(e);
            }
        }
        sum.checksum = stored;
    }
    sum.end = f.r.pos;
    Ok(sum)
}

/// `load` of everything `r` yields.
pub fn load_reader(mut r: impl Read, opts: &LoadOptions, visitor: &mut impl RdbVisitor) -> Result<LoadSummary, RdbFileError> {
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes).map_err(|e| RdbFileError::new(bytes.len(), format!("read error: {e}")))?;
    load(&bytes, opts, visitor)
}

/// The magic and version; the version.
fn header(bytes: &[u8]) -> Result<u16, RdbFileError> {
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(RdbFileError::new(0, "not an RDB file: it does not start with \"REDIS\""));
    }
    let Some(digits) = bytes.get(5..9) else {
        return Err(RdbFileError::new(bytes.len(), "unexpected end of file in the header"));
    };
    let version = std::str::from_utf8(digits).ok().filter(|s| s.bytes().all(|c| c.is_ascii_digit())).and_then(|s| s.parse::<u16>().ok());
    match version {
        Some(v) if (1..=RDB_VERSION).contains(&v) => Ok(v),
        Some(v) => Err(RdbFileError::new(5, format!("can't handle RDB format version {v}: densekv loads versions 1 to {RDB_VERSION} (Redis up to 8)"))),
        None => Err(RdbFileError::new(5, format!("bad version field \"{}\"", show(digits)))),
    }
}

/// A reader that names what it was reading when it fails.
struct FileReader<'a> {
    r: Reader<'a>,
}

impl<'a> FileReader<'a> {
    /// Reads `what` with `read`; an error names the offset where it began.
    fn field<T>(&mut self, what: &str, read: impl FnOnce(&mut Reader<'a>) -> Result<T, RdbError>) -> Result<T, RdbFileError> {
        let start = self.r.pos;
        read(&mut self.r).map_err(|_| {
            let message = if start >= self.r.b.len() { format!("unexpected end of file: expected {what}") } else { format!("truncated or invalid {what}") };
            RdbFileError::new(start, message)
        })
    }

    /// The value of type `t` of `key`, whose entry starts at `at`; None
    /// for an empty key (Redis writes none, but loads them by skipping).
    fn value(&mut self, t: u8, key: &[u8], at: usize, opts: &LoadOptions) -> Result<Option<Value>, RdbFileError> {
        let fail = |m: String| RdbFileError::new(at, format!("{m} (key '{}')", show(key)));
        match t {
            module_ty::PRE_GA | module_ty::V2 => {
                let id = self.field("module id", Reader::len)?;
                return Err(fail(format!("values of module type '{}' are not supported: densekv loads no modules", module_name(id))));
            }
            t if type_name(t).is_none() => return Err(fail(format!("unknown value type {t}"))),
            _ => {}
        }
        let start = self.r.pos;
        if matches!(t, ty::LIST | ty::SET | ty::ZSET | ty::ZSET_2 | ty::HASH | ty::LIST_QUICKLIST | ty::LIST_QUICKLIST_2) && self.r.len() == Ok(0) {
            return Ok(None);
        }
        self.r.pos = start;
        // i64::MIN as the fields' "now": none is due while loading.
        match self.r.value(t, &opts.shapes, i64::MIN) {
            Ok(v) => Ok(Some(v)),
            // Skipped as Redis skips them: empty collections.
            Err(RdbError::EMPTY) => Ok(None),
            Err(e) if !e.reason.is_empty() => Err(fail(format!("{} ({} value)", e.reason, type_name(t).unwrap_or("?")))),
            Err(_) => Err(fail(format!("truncated or corrupt {} value", type_name(t).unwrap_or("?")))),
        }
    }
}

/// What a value type is, for messages; None for types the value layer
/// does not read.
fn type_name(t: u8) -> Option<&'static str> {
    Some(match t {
        ty::STRING => "string",
        ty::LIST => "list",
        ty::SET => "set",
        ty::ZSET | ty::ZSET_2 => "sorted set",
        ty::HASH => "hash",
        ty::HASH_ZIPMAP => "zipmap hash",
        ty::LIST_ZIPLIST => "ziplist list",
        ty::SET_INTSET => "intset set",
        ty::ZSET_ZIPLIST => "ziplist sorted set",
        ty::HASH_ZIPLIST => "ziplist hash",
        ty::LIST_QUICKLIST | ty::LIST_QUICKLIST_2 => "quicklist list",
        ty::STREAM_LISTPACKS | ty::STREAM_LISTPACKS_2 | ty::STREAM_LISTPACKS_3 => "stream",
        ty::HASH_LISTPACK => "listpack hash",
        ty::ZSET_LISTPACK => "listpack sorted set",
        ty::SET_LISTPACK => "listpack set",
        ty::HASH_METADATA | ty::HASH_METADATA_PRE_GA => "hash with field TTLs",
        ty::HASH_LISTPACK_EX | ty::HASH_LISTPACK_EX_PRE_GA => "listpack hash with field TTLs",
        ty::SET_TTL => "set with member TTLs",
        ty::ZSET_TTL => "sorted set with member TTLs",
        _ => return None,
    })
}

/// What `load_into` loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The file's version, end and checksum; `keys` counts keys read,
    /// including those skipped as expired.
    pub summary: LoadSummary,
    /// The AUX fields, in file order.
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// The function libraries' code, in file order.
    pub functions: Vec<Vec<u8>>,
    /// Keys inserted.
    pub inserted: u64,
    /// Keys skipped because their deadline had passed at `now`.
    pub expired_skipped: u64,
    /// Those keys, with their database (a primary's replicas may hold them
    /// and must be told they are gone).
    pub expired_keys: Vec<(usize, Vec<u8>)>,
    /// Keys skipped because they were empty (`summary.empty_skipped` of them).
    pub empty_keys: Vec<Vec<u8>>,
}

/// Loads the RDB file in `bytes` into `dbs` (database i into `dbs[i]`),
/// as a starting master does: keys whose deadline is at or before
/// `opts.now` are left out (unless `opts.keep_expired`). The databases should be empty: a key already
/// present, like a key twice in the file, is an error. A database index
/// past `dbs.len()` is an error. On error, what was inserted stays.
pub fn load_into(bytes: &[u8], dbs: &mut [Db], opts: &LoadOptions) -> Result<Loaded, RdbFileError> {
    load_into_with(bytes, dbs, opts, &mut |_| true)
}

/// `load_into`, calling `progress(offset)` after each item (see
/// `RdbVisitor::progress`; false stops the load).
///
/// With key or value compression on in any database, keys and values are
/// packed on a second thread (keyspace/prepack.rs): this thread parses and
/// inserts, a batch or two behind the parser, and stores exactly what it
/// would have stored packing them itself. Errors are the same, at the same
/// offsets: a key that fails to insert (a duplicate) is reported at its own
/// offset, ahead of any error the parser met after it.
pub fn load_into_with(bytes: &[u8], dbs: &mut [Db], opts: &LoadOptions, progress: &mut dyn FnMut(usize) -> bool) -> Result<Loaded, RdbFileError> {
    load_into_threads(bytes, dbs, opts, progress, true)
}

/// `load_into_with`, packing on a second thread only if `thread` allows
/// (false: all on this one; the tests compare the two).
pub(super) fn load_into_threads(bytes: &[u8], dbs: &mut [Db], opts: &LoadOptions, progress: &mut dyn FnMut(usize) -> bool, thread: bool) -> Result<Loaded, RdbFileError> {
    // A key takes at least 3 bytes of the file (type, key length, value):
    // RESIZEDB hints beyond that are not believed.
    let max_keys = bytes.len() / 3;
    let packing = thread && dbs.iter().any(|d| d.pack_view_version().is_some());
    let sent = vec![None; dbs.len()];
    let mut into = IntoDbs { dbs, now: opts.now, keep_expired: opts.keep_expired, aux: Vec::new(), functions: Vec::new(), inserted: 0, expired: Vec::new(), empty: Vec::new(), progress, db: 0, max_keys, pipe: None, failed: None };
    let result = if packing {
        std::thread::scope(|s| {
            let (to_packer, batches) = sync_channel::<(Vec<(usize, DbView)>, Batch)>(2);
            let (packed, from_packer) = sync_channel::<Batch>(2);
            // The packing thread also computes the file's checksum while it
            // waits for batches: on two cores a third thread for it took
            // the loading thread's core.
            let body = crc_body(bytes, opts);
            let (crc_tx, crc_rx) = sync_channel::<u64>(1);
            let publish = opts.publish_thread;
            std::thread::Builder::new()
                .name("rdb-pack".into())
                .spawn_scoped(s, move || pack_batches(batches, packed, publish, body.map(|b| (b, crc_tx))))
                .map_err(|e| RdbFileError::new(0, format!("can't start the packing thread: {e}")))?;
            into.pipe = Some(Pipe { to: to_packer, from: from_packer, batch: Batch::default(), in_flight: 0, spare: Vec::new(), sent });
            let ahead = body.map(|b| CrcAhead { len: b.len(), get: Box::new(move || crc_rx.recv().ok()) });
            let r = parse(bytes, opts, &mut into, ahead);
            // Keys parsed before an error are still inserted, as without
            // the thread (and one of them may fail first).
            let _ = into.finish();
            // Closing the channels ends the thread.
            into.pipe = None;
            r
        })
    } else {
        load(bytes, opts, &mut into)
    };
    if let Some(e) = into.failed.take() {
        return Err(e);
    }
    let summary = result?;
    Ok(Loaded { summary, aux: into.aux, functions: into.functions, inserted: into.inserted, expired_skipped: into.expired.len() as u64, expired_keys: into.expired, empty_keys: into.empty })
}

struct IntoDbs<'a> {
    dbs: &'a mut [Db],
    now: i64,
    keep_expired: bool,
    aux: Vec<(Vec<u8>, Vec<u8>)>,
    functions: Vec<Vec<u8>>,
    inserted: u64,
    expired: Vec<(usize, Vec<u8>)>,
    empty: Vec<Vec<u8>>,
    progress: &'a mut dyn FnMut(usize) -> bool,
    /// The database the last SELECTDB named (RESIZEDB's).
    db: usize,
    /// Most keys the file can hold.
    max_keys: usize,
    /// The packing thread, with compression on.
    pipe: Option<Pipe>,
    /// The first key that failed to insert: its error, at its own offset
    /// (with `pipe`, inserts run behind the parser).
    failed: Option<RdbFileError>,
}

/// Keys handed to the packing thread at a time.
const BATCH: usize = 16384;

/// Parsed keys on their way to the keyspace, with the forms the packing
/// thread made (`packs[i]` for `entries[i]`, ranges in `buf`).
#[derive(Default)]
struct Batch {
    entries: Vec<(usize, LoadedEntry)>,
    packs: Vec<Prepack>,
    buf: Vec<u8>,
}

/// The loader's end of the packing thread.
struct Pipe {
    to: SyncSender<(Vec<(usize, DbView)>, Batch)>,
    from: Receiver<Batch>,
    /// Keys parsed and not yet sent.
    batch: Batch,
    /// Batches sent and not yet inserted.
    in_flight: usize,
    /// Emptied batches, to reuse their buffers.
    spare: Vec<Batch>,
    /// Per database, the tables' and prefixes' version its last view had.
    sent: Vec<Option<(u64, usize)>>,
}

/// The packing thread: packs each batch with the latest views it was sent
/// and hands it back, until the loader closes its channel; `publish` (see
/// `LoadOptions::publish_thread`) after each batch and at the end. With
/// `crc`, whenever no batch waits it advances the checksum of those bytes
/// a chunk at a time, and sends it once complete (the loader waits for it
/// at EOF, when it sends no batch: at most one batch is then out, so
/// handing it back never blocks).
fn pack_batches(batches: Receiver<(Vec<(usize, DbView)>, Batch)>, packed: SyncSender<Batch>, publish: Option<fn(&mut i64)>, crc: Option<(&[u8], SyncSender<u64>)>) {
    /// Bytes checksummed between two looks for a batch (about 0.1 ms).
    const CRC_CHUNK: usize = 256 << 10;
    let mut published = 0;
    let mut publish = move || {
        if let Some(f) = publish {
            f(&mut published);
        }
    };
    let mut crc = crc.map(|(body, tx)| (body, 0usize, 0u64, tx));
    let mut packer = Prepacker::default();
    loop {
        let next = match batches.try_recv() {
            Ok(x) => x,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                if let Some((body, at, sum, tx)) = crc.as_mut() {
                    if *at < body.len() {
                        let end = (*at + CRC_CHUNK).min(body.len());
                        *sum = crc64(*sum, &body[*at..end]);
                        *at = end;
                        if end == body.len() {
                            let _ = tx.send(*sum);
                        }
                        continue;
                    }
                }
                match batches.recv() {
                    Ok(x) => x,
                    Err(_) => break,
                }
            }
        };
        let (views, mut b) = next;
        for (db, view) in views {
            packer.set_view(db, view);
        }
        b.packs.clear();
        b.buf.clear();
        for (db, e) in &b.entries {
            let pre = packer.pack(*db, &e.key, &e.value, &mut b.buf);
            b.packs.push(pre);
        }
        publish();
        if packed.send(b).is_err() {
            break;
        }
    }
    drop(packer);
    publish();
}

impl IntoDbs<'_> {
    /// Inserts key `e` into database `i`, with the forms the packing thread
    /// made, if any.
    fn insert(&mut self, i: usize, e: LoadedEntry, pre: Option<(&Prepack, &[u8])>) -> Result<(), String> {
        let db = &mut self.dbs[i];
        let ttl = e.expire_ms.map_or(Ttl::Clear, Ttl::At);
        let replaced = match pre {
            Some((p, buf)) => db.insert_prepacked(&e.key, e.value, ttl, self.now, p, buf),
            None => db.insert(&e.key, e.value, ttl, self.now),
        };
        if replaced {
            let m = format!("duplicate key '{}' in database {i}", show(&e.key));
            self.failed.get_or_insert_with(|| RdbFileError::new(e.offset, m.clone()));
            return Err(m);
        }
        if let Some(secs) = e.idle_secs {
            db.set_idle_secs(&e.key, i64::try_from(secs).unwrap_or(i64::MAX), self.now);
        }
        self.inserted += 1;
        Ok(())
    }

    /// Sends the keys parsed so far to the packing thread, with new views
    /// of the databases whose tables or prefixes changed since the last,
    /// then inserts the batch before it, so one is packed while this
    /// thread parses the next and inserts the one before.
    fn send(&mut self) -> Result<(), String> {
        let Some(p) = self.pipe.as_mut() else { return Ok(()) };
        let mut views = Vec::new();
        for (i, db) in self.dbs.iter().enumerate() {
            let v = db.pack_view_version();
            if v.is_some() && v != p.sent[i] {
                views.push((i, db.pack_view()));
                p.sent[i] = v;
            }
        }
        let batch = std::mem::replace(&mut p.batch, p.spare.pop().unwrap_or_default());
        p.to.send((views, batch)).map_err(|_| "the packing thread stopped".to_string())?;
        p.in_flight += 1;
        if p.in_flight > 1 {
            self.receive()?;
        }
        Ok(())
    }

    /// Inserts the oldest batch sent.
    fn receive(&mut self) -> Result<(), String> {
        let Some(p) = self.pipe.as_mut() else { return Ok(()) };
        let mut b = p.from.recv().map_err(|_| "the packing thread stopped".to_string())?;
        p.in_flight -= 1;
        let mut r = Ok(());
        for (k, (i, e)) in b.entries.drain(..).enumerate() {
            let pre = b.packs.get(k).copied().unwrap_or(Prepack::NONE);
            r = self.insert(i, e, Some((&pre, &b.buf)));
            if r.is_err() {
                break;
            }
        }
        b.packs.clear();
        if let Some(p) = self.pipe.as_mut() {
            p.spare.push(b);
        }
        r
    }

    /// Inserts every key parsed and not inserted yet.
    fn finish(&mut self) -> Result<(), String> {
        let Some(p) = self.pipe.as_mut() else { return Ok(()) };
        if !p.batch.entries.is_empty() {
            let batch = std::mem::take(&mut p.batch);
            p.to.send((Vec::new(), batch)).map_err(|_| "the packing thread stopped".to_string())?;
            p.in_flight += 1;
        }
        while self.pipe.as_ref().is_some_and(|p| p.in_flight > 0) {
            self.receive()?;
        }
        Ok(())
    }

    fn check_db(&self, index: u64) -> Result<usize, String> {
        usize::try_from(index)
            .ok()
            .filter(|&i| i < self.dbs.len())
            .ok_or_else(|| format!("database {index} is out of range: the server has {} (see the databases setting)", self.dbs.len()))
    }
}

impl RdbVisitor for IntoDbs<'_> {
    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.aux.push((key.to_vec(), value.to_vec()));
        Ok(())
    }

    fn select_db(&mut self, index: u64) -> Result<(), String> {
        self.db = self.check_db(index)?;
        Ok(())
    }

    fn resize_db(&mut self, keys: u64, _expires: u64) -> Result<(), String> {
        let n = usize::try_from(keys).unwrap_or(usize::MAX).min(self.max_keys);
        self.dbs[self.db].reserve(n);
        Ok(())
    }

    fn function(&mut self, code: Vec<u8>) -> Result<(), String> {
        self.functions.push(code);
        Ok(())
    }

    fn empty_key(&mut self, key: &[u8]) {
        self.empty.push(key.to_vec());
    }

    fn progress(&mut self, offset: usize) -> bool {
        (self.progress)(offset)
    }

    fn entry(&mut self, e: LoadedEntry) -> Result<(), String> {
        let i = self.check_db(e.db)?;
        if !self.keep_expired && e.expire_ms.is_some_and(|t| t <= self.now) {
            self.expired.push((i, e.key));
            return Ok(());
        }
        let Some(p) = self.pipe.as_mut() else { return self.insert(i, e, None) };
        p.batch.entries.push((i, e));
        if p.batch.entries.len() >= BATCH {
            self.send()?;
        }
        Ok(())
    }
}
