//! The bytes of a background save: an RDB image fed by the keyspace's
//! point-in-time snapshots (one per database, `Db::snapshot_begin`) and
//! written to a file by a thread of its own, so the executor only
//! serializes and never waits on the disk. `persist` decides when a save
//! starts, steps the snapshots between commands and reports the end; this
//! module knows nothing of the server's state.
//!
//! The executor serializes keys into 1 MiB chunks and hands them to the
//! writer thread, leaving strings plain: the writer compresses them
//! (`RdbWriter::defer_compression`, `rdb::compress_deferred`), so LZF, a
//! fair share of a save's work, runs beside the executor rather than on
//! it, and the file is byte for byte what compressing in place would give.
//! A chunk is cut only between keys, so no string straddles two.
//! `in_flight` counts the (plain) bytes handed over and not yet
//! written, and the stepping stops while it is above `MAX_IN_FLIGHT`, so
//! the extra memory a save costs is that buffer, not a copy of the data
//! (writes to parts not yet saved add to it without waiting: they cannot).
//!
//! The header goes out first, at the newest version, and is settled last:
//! the writer learns which version the data needs (hash field TTLs need 12,
//! functions 10) only once every key went through it, so the thread
//! checksums what follows the header and `rdb::sealed` gives the final
//! header and checksum, which it writes before syncing and renaming the
//! file into place.
//!
//! A diskless full sync's image is read while it is written: its header's
//! version is settled before the first key (`Plan::stream_version`, from
//! what the dataset holds at the save's start, which is what the image
//! holds), and the thread publishes how many bytes are in the file
//! (`Progress`), so the replicas' transfers follow the save instead of
//! waiting for its end. A key needing more than that version fails the
//! save rather than going out in a form the header does not announce.

use std::fs::{self, File};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use storage::rdb::{self, Deferred, RdbWriter, WriteOptions, HEADER_LEN, RDB_VERSION};
use storage::{SnapshotSink, ValueRef};

use crate::aofcore::reader::{encode, encode_restore};

/// Bytes the executor gathers before handing them to the writer thread.
const CHUNK: usize = 1 << 20;
/// A chunk's buffer is allocated this much larger than `CHUNK`: it ships
/// once a key takes it past `CHUNK`, and a buffer of exactly `CHUNK` grew
/// (copying the whole megabyte) for that last key of every chunk.
const CHUNK_ROOM: usize = CHUNK + (64 << 10);
/// Bytes handed over and not yet written above which stepping waits.
pub const MAX_IN_FLIGHT: usize = 16 << 20;

/// What a background save is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// BGSAVE, save points: the RDB file.
    Rdb,
    /// An AOF rewrite's base file (RDB preamble, aux aof-base 1).
    AofBase,
    /// A full sync's image for replicas.
    Repl,
}

/// How the image is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// An RDB file.
    Rdb,
    /// An AOF base without RDB preamble (`aof-use-rdb-preamble no`):
    /// FUNCTION LOAD per library, then per database a SELECT and one
    /// `RESTORE key ttl payload REPLACE [ABSTTL]` per key, as commands;
    /// with `timestamp` (aof-timestamp-enabled) a `#TS:` line first.
    Commands { timestamp: bool },
}

/// What a save needs to know before its first key.
pub struct Plan<'a> {
    /// What the file is for.
    pub purpose: Purpose,
    /// How it is written.
    pub form: Form,
    /// Where the file goes once complete.
    pub path: PathBuf,
    /// Where it is written meanwhile.
    pub tmp: PathBuf,
    /// `rdbcompression` and `rdbchecksum`.
    pub opts: WriteOptions,
    /// fsync the file every `AUTOSYNC_BYTES` as it is written
    /// (rdb-save-incremental-fsync, aof-rewrite-incremental-fsync).
    pub incremental_fsync: bool,
    /// `rdb-key-save-delay`: microseconds the writer waits per key (a
    /// negative -n waits 1 µs for about one key in n), to slow a save down.
    pub key_delay_us: i64,
    /// The image's moment, Unix ms (hash fields due by then are left out).
    pub now: i64,
    /// The standard AUX fields: the Redis version reported, the image's
    /// Unix seconds, memory in use.
    pub redis_ver: &'a str,
    pub ctime_secs: i64,
    pub used_mem: u64,
    /// The replication AUX fields (repl-stream-db, repl-id, repl-offset),
    /// when this server's replication history may be continued.
    pub repl: Option<(usize, String, i64)>,
    /// Function libraries' code.
    pub functions: &'a [Vec<u8>],
    /// Per database: keys and keys with a deadline, at the start (RESIZEDB).
    pub sizes: Vec<(u64, u64)>,
    /// The version the header declares from the start, for an image read
    /// while it is written; None settles it at the end.
    pub stream_version: Option<u16>,
}

/// How far the writer thread got: bytes in the file, and whether the file
/// is complete (checksum included). Readers of a streamed image follow it.
#[derive(Debug, Default)]
pub struct Progress {
    written: AtomicU64,
    complete: AtomicBool,
}

impl Progress {
    /// Bytes in the file, and whether that is all of it. Complete is read
    /// first: once it is set, the count is final.
    pub fn get(&self) -> (u64, bool) {
        let complete = self.complete.load(Ordering::Acquire);
        (self.written.load(Ordering::Acquire), complete)
    }
}

/// A save that finished: the file's size.
#[derive(Debug, Clone, Copy)]
pub struct Saved {
    pub bytes: u64,
}

/// A background save in progress: the image the snapshots feed, and the
/// writer thread's ends.
pub struct Job {
    image: Arc<Mutex<Image>>,
    in_flight: Arc<AtomicUsize>,
    done: Receiver<Result<Saved, String>>,
    /// Set when the job is dropped: the thread stops at the next key.
    stop: Arc<AtomicBool>,
    /// `rdb-key-save-delay` as the writer reads it before each key's wait
    /// and between its slices: a CONFIG SET reaches a running save (there
    /// is no child holding its own copy of the config).
    key_delay: Arc<AtomicI64>,
    tmp: PathBuf,
    /// What the writer thread wrote so far.
    progress: Arc<Progress>,
    /// The header's version when it was settled at the start.
    stream_version: Option<u16>,
    /// True once every snapshot ended and the rest went to the writer.
    pub sealed: bool,
    /// What the file is for.
    pub purpose: Purpose,
    /// How much executor time the snapshot steps may take next.
    pub pace: Pace,
}

/// The executor's time budget for snapshot steps while clients are being
/// served: a credit that grows by a share of the time spent on them and
/// shrinks by the time steps take, so the share holds on average even
/// though a step, which gives whole segments, overshoots a small budget.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Nanoseconds steps may still take (negative: owed).
    pub credit_ns: i64,
    /// When clients were last served.
    pub last_served: std::time::Instant,
}

/// The image being serialized: the RDB writer (or, for a base of
/// commands, the chunks alone) over the chunk channel, and which database
/// its last key went to.
struct Image {
    out: Option<Out>,
    db: Option<usize>,
    /// Per database: (keys, with deadline) at the start, and whether its
    /// SELECTDB with that hint went out already.
    sizes: Vec<(u64, u64)>,
    selected: Vec<bool>,
    now: i64,
    per_key_chunks: bool,
    checksum: bool,
    err: Option<String>,
    keys: u64,
}

/// Where an image's keys go, by its `Form`.
enum Out {
    Rdb(RdbWriter<Chunks>),
    Commands(Chunks),
}

/// The writer's output: bytes gathered into chunks for the thread, with
/// the strings in them the thread is to compress.
struct Chunks {
    buf: Vec<u8>,
    /// Offset in the writer's output of `buf`'s first byte.
    base: u64,
    /// Strings in `buf` left for the thread to compress: (prefix, data,
    /// end) offsets into `buf`.
    spans: Vec<(usize, usize, usize)>,
    keys: u64,
    tx: Sender<Msg>,
    in_flight: Arc<AtomicUsize>,
}

enum Msg {
    /// Bytes with the strings in them to compress, and how many keys they
    /// end (for `rdb-key-save-delay`).
    Bytes(Vec<u8>, Vec<(usize, usize, usize)>, u64),
    /// Every byte was sent: for an RDB file, settle the header for
    /// `version` (unless it was declared from the start) and add the
    /// checksum (zero unless asked); then sync, rename.
    Finish { rdb: bool, version: u16, checksum: bool, settled: bool },
}

/// One database's snapshot sink: keys go into the shared image under
/// their database's SELECTDB.
struct DbSink {
    db: usize,
    image: Arc<Mutex<Image>>,
}

impl Job {
    /// Starts the file: the header, AUX fields and functions go to the
    /// writer thread; keys follow as the snapshots give them (`sink`).
    ///
    /// Errors: the writer thread could not be started.
    pub fn start(plan: Plan) -> Result<Job, String> {
        let (tx, rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let mut chunks = Chunks { buf: Vec::with_capacity(CHUNK_ROOM), base: 0, spans: Vec::new(), keys: 0, tx, in_flight: in_flight.clone() };
        let out = match plan.form {
            Form::Rdb => {
                // The header declares the newest version until the thread
                // settles it, or the one settled up front for an image read
                // as it grows.
                let opts = WriteOptions { compression: plan.opts.compression, checksum: false };
                let mut w = RdbWriter::new(chunks, plan.stream_version.unwrap_or(RDB_VERSION), opts).map_err(|e| e.to_string())?;
                // LZF runs on the thread: the executor's share of a save
                // is then the encoding alone.
                w.defer_compression();
                let mut head = || -> Result<(), rdb::RdbWriteError> {
                    w.standard_aux(plan.redis_ver, plan.ctime_secs, plan.used_mem, plan.purpose == Purpose::AofBase)?;
                    if let Some((db, id, offset)) = &plan.repl {
                        w.repl_aux(*db, id, *offset)?;
                    }
                    w.functions(plan.functions.iter().map(|c| c.as_slice()))
                };
                head().map_err(|e| e.to_string())?;
                Out::Rdb(w)
            }
            Form::Commands { timestamp } => {
                if timestamp {
                    chunks.buf.extend_from_slice(format!("#TS:{}\r\n", plan.now / 1000).as_bytes());
                }
                for code in plan.functions {
                    encode(&[&b"FUNCTION"[..], b"LOAD", code], &mut chunks.buf);
                }
                Out::Commands(chunks)
            }
        };
        let (path, tmp, delay) = (plan.path, plan.tmp.clone(), plan.key_delay_us);
        let key_delay = Arc::new(AtomicI64::new(delay));
        let live_delay = key_delay.clone();
        let flight = in_flight.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let progress = Arc::new(Progress::default());
        let shown = progress.clone();
        // Created here, not by the thread: a streamed image's readers open
        // it as soon as the save started.
        let incremental = plan.incremental_fsync;
        let role = if plan.purpose == Purpose::AofBase { crate::affinity::Role::AofRewrite } else { crate::affinity::Role::Bgsave };
        let file = File::create(&tmp)
            .map(|f| AutoSync::new(f, incremental))
            .map_err(|e| format!("Failed opening the temp RDB file {} for saving: {e}", tmp.display()));
        std::thread::Builder::new()
            .name("bgsave".into())
            .spawn(move || {
                crate::affinity::pin(role);
                // The chunks it writes were allocated by the executor and
                // are freed here: published as they go, and at its exit.
                let mut published = 0;
                crate::memory::publish_at_exit(0);
                let r = write_file(rx, file, &tmp, &path, &flight, &live_delay, &stopped, &shown, &mut published);
                if r.is_err() {
                    let _ = fs::remove_file(&tmp);
                }
                crate::memory::publish_thread(&mut published);
                crate::memory::publish_at_exit(published);
                let _ = done_tx.send(r);
            })
            .map_err(|e| format!("Can't save in background: {e}"))?;
        let n = plan.sizes.len();
        let image = Image {
            out: Some(out),
            db: None,
            sizes: plan.sizes,
            selected: vec![false; n],
            now: plan.now,
            per_key_chunks: delay != 0,
            checksum: plan.opts.checksum,
            err: None,
            keys: 0,
        };
        let pace = Pace { credit_ns: 0, last_served: std::time::Instant::now() };
        Ok(Job { image: Arc::new(Mutex::new(image)), in_flight, done, stop, key_delay, tmp: plan.tmp, progress, stream_version: plan.stream_version, sealed: false, purpose: plan.purpose, pace })
    }

    /// A new `rdb-key-save-delay` for the keys still to write, and for the
    /// wait in progress.
    pub fn set_key_delay(&self, us: i64) {
        self.key_delay.store(us, Ordering::Relaxed);
    }

    /// The snapshot sink for database `db`.
    pub fn sink(&self, db: usize) -> Box<dyn SnapshotSink> {
        Box::new(DbSink { db, image: self.image.clone() })
    }

    /// True while the writer thread is far enough behind that stepping
    /// should wait.
    pub fn backed_up(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) > MAX_IN_FLIGHT
    }

    /// For an image whose header was settled at the start: the file being
    /// written (readable from its first byte while it grows) and the
    /// writer's progress through it.
    pub fn stream(&self) -> Option<(PathBuf, Arc<Progress>)> {
        self.stream_version.map(|_| (self.tmp.clone(), self.progress.clone()))
    }

    /// Keys serialized so far.
    pub fn keys_done(&self) -> u64 {
        self.image().keys
    }

    /// Every snapshot ended: writes EOF and tells the thread to settle the
    /// header, sync and rename. The sinks must be dropped (the snapshots
    /// handed them back).
    pub fn seal(&mut self) {
        let mut im = self.image();
        match im.out.take() {
            None => return,
            Some(Out::Commands(mut chunks)) => {
                chunks.ship();
                let _ = chunks.tx.send(Msg::Finish { rdb: false, version: 0, checksum: false, settled: true });
            }
            Some(Out::Rdb(mut w)) => {
                let (out, deferred) = w.output_and_deferred();
                out.adopt(deferred);
                // A settled header already declares a version every key
                // fitted in (the writer refuses a key needing more).
                let version = self.stream_version.unwrap_or_else(|| rdb::min_file_version(w.needed_version(), false));
                let settled = self.stream_version.is_some();
                let checksum = im.checksum;
                match w.finish_unsealed() {
                    Ok(mut chunks) => {
                        chunks.ship();
                        let _ = chunks.tx.send(Msg::Finish { rdb: true, version, checksum, settled });
                    }
                    Err(e) => {
                        im.err.get_or_insert(e.to_string());
                    }
                }
            }
        }
        drop(im);
        self.sealed = true;
    }

    /// The outcome, once the thread is done: Some(Ok) when the file is in
    /// place, Some(Err) with what failed (serializing or writing).
    pub fn poll(&self) -> Option<Result<Saved, String>> {
        if let Some(e) = self.image().err.clone() {
            // Serialization failed: the thread waits for bytes that will
            // not come; dropping the job ends it and removes the file.
            return Some(Err(e));
        }
        match self.done.try_recv() {
            Ok(r) => Some(r),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err("the background save thread stopped".into())),
        }
    }

    fn image(&self) -> MutexGuard<'_, Image> {
        // A panic while holding the lock cannot leave the image half
        // updated in a way that matters: the save fails on its own.
        self.image.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Job {
    /// An abort (or the end): the thread stops at its next key, and the
    /// temp file goes now, so a server exiting right after leaves none.
    /// After a save that succeeded the file was renamed and this is a no-op.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = fs::remove_file(&self.tmp);
    }
}

impl SnapshotSink for DbSink {
    fn entry(&mut self, key: &[u8], value: ValueRef<'_>, expire_at_ms: Option<i64>) {
        let mut im = self.image.lock().unwrap_or_else(|p| p.into_inner());
        im.entry(self.db, key, value, expire_at_ms);
    }
}

impl Image {
    fn entry(&mut self, db: usize, key: &[u8], value: ValueRef<'_>, expire_at_ms: Option<i64>) {
        if self.err.is_some() {
            return;
        }
        let w = match self.out.as_mut() {
            None => return,
            Some(Out::Commands(c)) => {
                // A key already expired is left out, as Redis's rewrite
                // leaves it; the others carry their absolute deadline.
                if expire_at_ms.is_some_and(|t| t <= self.now) {
                    return;
                }
                if self.db != Some(db) {
                    encode(&[&b"SELECT"[..], db.to_string().as_bytes()], &mut c.buf);
                    self.db = Some(db);
                }
                encode_restore(key, &rdb::dump_payload(value, self.now), expire_at_ms, &mut c.buf);
                self.keys += 1;
                c.keys += 1;
                if self.per_key_chunks || c.buf.len() >= CHUNK {
                    c.ship();
                }
                return;
            }
            Some(Out::Rdb(w)) => w,
        };
        let r = (|| {
            if self.db != Some(db) {
                if self.selected[db] {
                    w.reselect_db(db as u64)?;
                } else {
                    let (keys, expires) = self.sizes[db];
                    w.select_db(db as u64, keys, expires)?;
                    self.selected[db] = true;
                }
                self.db = Some(db);
            }
            w.entry(key, value, expire_at_ms, self.now)
        })();
        match r {
            Ok(_) => {
                self.keys += 1;
                let (out, deferred) = w.output_and_deferred();
                out.adopt(deferred);
                out.keys += 1;
                if self.per_key_chunks || out.buf.len() >= CHUNK {
                    out.ship();
                }
            }
            Err(e) => self.err = Some(e.to_string()),
        }
    }
}

impl Chunks {
    /// Takes the writer's list of strings to compress, which are all in
    /// `buf` (a chunk is shipped only after this).
    fn adopt(&mut self, deferred: &mut Vec<Deferred>) {
        let at = |o: u64| (o - self.base) as usize;
        self.spans.extend(deferred.drain(..).map(|d| (at(d.prefix), at(d.data), at(d.end))));
    }

    /// Hands what was gathered to the writer thread.
    fn ship(&mut self) {
        if self.buf.is_empty() && self.keys == 0 {
            return;
        }
        let buf = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_ROOM));
        self.base += buf.len() as u64;
        self.in_flight.fetch_add(buf.len(), Ordering::Relaxed);
        // A send fails only when the thread is gone; the job reports why.
        let _ = self.tx.send(Msg::Bytes(buf, std::mem::take(&mut self.spans), std::mem::take(&mut self.keys)));
    }
}

/// Gathers bytes; the image ships them once a key is complete (`ship`), so
/// a chunk never splits a string the thread compresses.
impl Write for Chunks {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Bytes written between two fsyncs of a file being saved with
/// rdb-save-incremental-fsync or aof-rewrite-incremental-fsync (Redis's
/// 4 MB).
pub const AUTOSYNC_BYTES: u64 = 4 * 1024 * 1024;

/// A file being saved, fsynced after every `AUTOSYNC_BYTES` written when
/// `on`, so that a large save does not leave all its dirty pages to one
/// fsync at the end (a long stall of the disk for everything else).
pub struct AutoSync {
    pub file: File,
    on: bool,
    since: u64,
    /// fsyncs done so far.
    pub syncs: u64,
}

impl AutoSync {
    pub fn new(file: File, on: bool) -> AutoSync {
        AutoSync { file, on, since: 0, syncs: 0 }
    }
}

impl Write for AutoSync {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.since += n as u64;
        if self.on && self.since >= AUTOSYNC_BYTES {
            self.file.sync_data()?;
            self.since = 0;
            self.syncs += 1;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The writer thread: bytes to `file` (at `tmp`) as they come, checksumming all but
/// the header; at `Finish`, the settled header and checksum, fsync, and
/// the rename onto `path`. Returns when finished, or when the job was
/// dropped (an abort: the caller removes `tmp`).
#[allow(clippy::too_many_arguments)]
fn write_file(rx: Receiver<Msg>, mut file: Result<AutoSync, String>, tmp: &Path, path: &Path, in_flight: &AtomicUsize, delay_us: &AtomicI64, stop: &AtomicBool, progress: &Progress, published: &mut i64) -> Result<Saved, String> {
    let (mut crc, mut len) = (0u64, 0u64);
    let mut delayed = 0u64;
    // A chunk with its strings compressed, written into the previous
    // chunk's buffer: the thread allocates none of its own per chunk.
    let mut squeezed = Vec::with_capacity(CHUNK_ROOM);
    loop {
        // What the last chunk freed counts in used_memory before the
        // thread waits for the next.
        crate::memory::publish_thread(published);
        let Ok(msg) = rx.recv() else { return Err("Background saving aborted".into()) };
        match msg {
            Msg::Bytes(plain, spans, keys) => {
                in_flight.fetch_sub(plain.len(), Ordering::Relaxed);
                let buf = if spans.is_empty() {
                    plain
                } else {
                    squeezed.clear();
                    rdb::compress_deferred(&plain, &spans, &mut squeezed);
                    std::mem::replace(&mut squeezed, plain)
                };
                for _ in 0..keys {
                    delayed += 1;
                    key_delay(delay_us, delayed, stop);
                }
                if stop.load(Ordering::Relaxed) {
                    return Err("Background saving aborted".into());
                }
                if let Ok(f) = file.as_mut() {
                    let skip = HEADER_LEN.saturating_sub(len as usize).min(buf.len());
                    crc = rdb::crc64(crc, &buf[skip..]);
                    len += buf.len() as u64;
                    if let Err(e) = f.write_all(&buf) {
                        file = Err(format!("Write error saving DB on disk: {e}"));
                    } else {
                        progress.written.store(len, Ordering::Release);
                    }
                }
            }
            Msg::Finish { rdb, version, checksum, settled } => {
                let mut f = file?;
                if stop.load(Ordering::Relaxed) {
                    return Err("Background saving aborted".into());
                }
                let io = |e: io::Error| format!("Write error saving DB on disk: {e}");
                let rest = len.saturating_sub(HEADER_LEN as u64);
                let (header, sum) = rdb::sealed(version, crc, rest);
                let sum = if checksum { sum } else { 0 };
                if rdb {
                    f.write_all(&sum.to_le_bytes()).map_err(io)?;
                    len += 8;
                }
                if settled {
                    // The header written first is this one: readers may
                    // have it already, and every byte is in place.
                    progress.written.store(len, Ordering::Release);
                    progress.complete.store(true, Ordering::Release);
                } else {
                    f.file.seek(SeekFrom::Start(0)).map_err(io)?;
                    f.file.write_all(&header).map_err(io)?;
                }
                f.file.sync_all().map_err(io)?;
                drop(f);
                fs::rename(tmp, path).map_err(|e| format!("Error moving temp DB file {} on the final destination {} (in server root dir {}): {e}", tmp.display(), path.display(), cwd()))?;
                if let Some(dir) = path.parent().and_then(|d| File::open(if d.as_os_str().is_empty() { Path::new(".") } else { d }).ok()) {
                    let _ = dir.sync_all();
                }
                return Ok(Saved { bytes: len });
            }
        }
    }
}

/// `rdb-key-save-delay` for the `n`-th key: `us` microseconds, or for a
/// negative -k, one microsecond about once in k keys. Long waits are cut
/// into slices so that an abort (`stop`) ends them promptly, and the
/// setting is read again after each, so lowering it shortens the wait in
/// progress.
fn key_delay(us: &AtomicI64, n: u64, stop: &AtomicBool) {
    let slice = Duration::from_millis(10);
    let mut waited = Duration::ZERO;
    loop {
        let want = Duration::from_micros(match us.load(Ordering::Relaxed) {
            0 => 0,
            u if u > 0 => u as u64,
            u => u64::from(n.is_multiple_of(u.unsigned_abs())),
        });
        if waited >= want || stop.load(Ordering::Relaxed) {
            return;
        }
        let d = (want - waited).min(slice);
        std::thread::sleep(d);
        waited += d;
    }
}

fn cwd() -> String {
    std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes 10 MiB and 1 byte through an `AutoSync` in 64 KiB pieces:
    /// the fsyncs it made, and whether the file holds every byte.
    fn write_ten_mib(on: bool) -> (u64, bool) {
        let path = std::env::temp_dir().join(format!("densekv-autosync-{}-{on}", std::process::id()));
        let mut f = AutoSync::new(File::create(&path).expect("temp file"), on);
        let piece: Vec<u8> = (0..64 * 1024).map(|i| i as u8).collect();
        for _ in 0..160 {
            f.write_all(&piece).expect("write");
        }
        f.write_all(b"!").expect("write");
        let syncs = f.syncs;
        drop(f);
        let back = fs::read(&path).expect("read back");
        let _ = fs::remove_file(&path);
        let whole = back.len() == 160 * piece.len() + 1 && back.chunks(piece.len()).take(160).all(|c| c == &piece[..]);
        (syncs, whole)
    }

    #[test]
    fn incremental_fsync_syncs_every_four_mib() {
        assert_eq!(write_ten_mib(true), (2, true));
        assert_eq!(write_ten_mib(false), (0, true));
    }
}
