//! RDB files on disk: SAVE's synchronous dump, loading at start-up and
//! DEBUG RELOAD. The format itself (`storage::rdb`) knows nothing of
//! files, configuration or the scripting engine; this layer decides where
//! the file goes (`dir` + `dbfilename`), writes it so that a crash never
//! leaves a half-written file under the real name (a temp file, fsync,
//! rename, as Redis does), and carries function libraries through the
//! scripting engine that `Host` lends.
//!
//! BGSAVE does not fork: every database's keyspace snapshot begins at
//! once (O(1) each), the event loop calls `bgsave_step` between commands
//! to serialize a slice at a time within a CPU budget, and `bgsave::Job`
//! writes the bytes on a thread of its own. A write to a part of the
//! keyspace not yet saved serializes that part first (storage's pre-write
//! rule), so the file is the image at the moment BGSAVE ran.
//! `on_cron` starts the saves the `save` points ask for and reports ends.
//!
//! The AOF (`aof/`) writes its RDB base through `write_image`.

use std::fs::{self, File};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::bgsave::{Form, Job, Plan, Purpose};

use storage::rdb::{self, LoadOptions, RdbWriter, WriteOptions};

use crate::command::Host;
use crate::server::{unix_ms, Server};

/// The RDB file's path: `dir` joined with `dbfilename`.
pub fn rdb_path(srv: &Server) -> PathBuf {
    let dir = srv.config.get("dir").filter(|d| !d.is_empty()).unwrap_or(".");
    PathBuf::from(dir).join(srv.config.get("dbfilename").unwrap_or("dump.rdb"))
}

/// Writes every database and the function libraries to the RDB file, on
/// this thread (SAVE, SHUTDOWN's final save, FLUSHALL with save points).
/// A background save running goes on (it has its own image); SAVE
/// refuses while an RDB one runs, as Redis does. The file is written under a
/// temporary name, synced, then renamed over the old one.
///
/// Errors: what failed, as the log and the error reply say it.
pub fn save(srv: &mut Server, host: &mut dyn Host) -> Result<(), String> {
    let path = rdb_path(srv);
    let tmp = path.with_file_name(format!("temp-{}.rdb", std::process::id()));
    let result = write_file(srv, host, &tmp, false).and_then(|()| fs::rename(&tmp, &path).map_err(|e| format!("rename: {e}")));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    let p = &mut srv.persist;
    // As Redis: a foreground save that fails leaves the background
    // status (what stop-writes-on-bgsave-error reads) as it was; one that
    // succeeds clears an earlier failure.
    if result.is_ok() {
        p.last_save_ok = true;
        p.saves += 1;
        p.dirty_at_save = srv.dirty;
        srv.last_save = unix_ms() / 1000;
    }
    result
}

/// Writes an RDB image of every database and the function libraries to
/// `path` and fsyncs it (no rename: the caller owns the name). With
/// `aof_base` the image is marked as an AOF base (aux `aof-base`), as
/// the AOF rewrite writes it.
///
/// Errors: what failed.
pub fn write_image(srv: &Server, host: &mut dyn Host, path: &std::path::Path, aof_base: bool) -> Result<(), String> {
    write_file(srv, host, path, aof_base)
}

fn write_file(srv: &Server, host: &mut dyn Host, tmp: &std::path::Path, aof_base: bool) -> Result<(), String> {
    let now = unix_ms();
    let codes = host.scripts_ref().function_codes();
    // Written at the newest version, then the header is settled to the
    // lowest every value fits in (so Redis 7.0 loads the file unless the
    // data needs a newer layout, hash field TTLs say): one walk, not two.
    let opts = WriteOptions { compression: srv.config.flag("rdbcompression"), checksum: srv.config.flag("rdbchecksum") };
    // rdb-key-save-delay slows an RDB save on this thread too (SAVE, the
    // shutdown's save), as Redis's; not a base for the AOF, which this
    // thread writes only when the AOF is turned on.
    let key_delay = if aof_base { 0 } else { key_save_delay(srv).max(0) as u64 };
    let shutting_down = srv.shutdown_signal.is_some();
    let file = File::create(tmp).map_err(|e| format!("Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}", tmp.display(), cwd()))?;
    let incremental = srv.config.flag(if aof_base { "aof-rewrite-incremental-fsync" } else { "rdb-save-incremental-fsync" });
    let file = crate::bgsave::AutoSync::new(file, incremental);
    let mut w = RdbWriter::new(BufWriter::with_capacity(1 << 20, file), rdb::RDB_VERSION, opts).map_err(|e| e.to_string())?;
    w.standard_aux(crate::REDIS_VERSION, now / 1000, crate::memory::allocated(), aof_base).map_err(|e| e.to_string())?;
    if let Some((db, id, offset)) = repl_save_info(srv) {
        w.repl_aux(db, &id, offset).map_err(|e| e.to_string())?;
    }
    if !codes.is_empty() {
        w.functions(codes.iter().map(|c| c.as_slice())).map_err(|e| e.to_string())?;
    }
    for (i, db) in srv.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        w.select_db(i as u64, db.len() as u64, db.volatile_len() as u64).map_err(|e| e.to_string())?;
        let mut failed = None;
        let mut n = 0u64;
        db.for_each(|k, v, exp| {
            if failed.is_none() {
                if let Err(e) = w.entry(k, v, exp, now) {
                    failed = Some(e.to_string());
                }
            }
            n += 1;
            if key_delay > 0 {
                std::thread::sleep(Duration::from_micros(key_delay));
            }
            if shutting_down && (key_delay > 0 || n.is_multiple_of(1024)) && host.sigint_pending() {
                // A second SIGINT during the shutdown's save: exit now,
                // leaving no temp file behind, as Redis does.
                let _ = fs::remove_file(tmp);
                srv.config.log.signal_line("You insist... exiting now.");
                std::process::exit(1);
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
    }
    let (buf, _, header) = w.finish_lowest().map_err(|e| e.to_string())?;
    let mut file = buf.into_inner().map_err(|e| format!("write: {}", e.error()))?.file;
    file.seek(SeekFrom::Start(0)).and_then(|_| file.write_all(&header)).map_err(|e| format!("write: {e}"))?;
    file.sync_all().map_err(|e| format!("fsync: {e}"))?;
    Ok(())
}

/// The replication AUX fields an image carries, as Redis's
/// rdbPopulateSaveInfo decides: on a primary with a backlog, its id, its
/// offset and the database its stream has selected (0 if none yet); on a
/// replica with a history (synchronized now or before), that history and
/// the database its primary's stream has selected. None otherwise: nobody
/// could continue this server's history.
pub fn repl_save_info(srv: &Server) -> Option<(usize, String, i64)> {
    let r = &srv.repl;
    let db = match &r.primary {
        Some(p) if r.cached => p.client.and_then(|id| srv.clients.get(&id)).map_or(r.primary_db, |c| c.db),
        Some(_) => return None,
        None if r.backlog.active => srv.feed.selected().unwrap_or(0),
        None => return None,
    };
    Some((db, r.replid.clone(), r.end_offset()))
}

/// At start-up, the replication history an RDB file's AUX fields carry
/// (Redis's loadDataFromDisk). A replica (`replica_at_load`) takes it as its
/// own, to continue it by PSYNC; a primary keeps it as its second id, up
/// to the offset the file was saved at, and goes on from that offset, so
/// its replicas can continue after its restart. The primary's backlog is
/// started by the caller (`Repl::restored`).
fn restore_repl_info(srv: &mut Server, aux: &[(Vec<u8>, Vec<u8>)]) {
    let field = |name: &[u8]| aux.iter().find(|(k, _)| k == name).map(|(_, v)| String::from_utf8_lossy(v).into_owned());
    let (Some(id), Some(offset), Some(db)) = (field(b"repl-id"), field(b"repl-offset").and_then(|o| o.parse::<i64>().ok()), field(b"repl-stream-db").and_then(|d| d.parse::<usize>().ok())) else { return };
    if id.len() != 40 || offset < 0 || db >= srv.dbs.len() {
        return;
    }
    let replica = replica_at_load(srv);
    let r = &mut srv.repl;
    if replica {
        r.replid = id;
        r.offset = offset;
        r.primary_db = db;
    } else {
        r.replid2 = id;
        r.second_offset = offset + 1;
        r.offset = offset;
        r.no_replicas_since = Instant::now();
    }
    r.restored = true;
}

/// Whether this server loads its file as a replica: `replicaof` is set
/// (the link starts after the load), or nodes.conf, read before the data,
/// says this cluster node is one (`Server::is_replica_node`).
fn replica_at_load(srv: &Server) -> bool {
    srv.config.get("replicaof").is_some_and(|v| !v.is_empty()) || srv.is_replica_node()
}

fn cwd() -> String {
    std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()
}

/// What a load read: keys inserted, keys skipped as expired, keys skipped
/// as empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadStats {
    /// Keys inserted.
    pub keys: u64,
    /// Keys left out because their deadline had passed.
    pub expired: u64,
    /// Keys left out because their value was empty (each is logged).
    pub empty: u64,
}

/// Why a load failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// The file could not be read, or its function libraries not loaded.
    Failed(String),
    /// The file is not valid RDB: its path, and what is wrong where.
    Corrupt(PathBuf, String),
    /// The AOF loader refused its files and logged why already.
    Logged,
    /// A shutdown signal came while the file loaded at start-up.
    Interrupted,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Failed(m) => f.write_str(m),
            LoadError::Corrupt(path, m) => write!(f, "{m} ({})", path.display()),
            LoadError::Logged => f.write_str("Fatal error loading the AOF, check server logs."),
            LoadError::Interrupted => f.write_str("loading interrupted by a shutdown signal"),
        }
    }
}

/// Loads the RDB file into the (empty) databases and the function
/// libraries into the engine: Some(what was read), or None when there is
/// no file. Empty keys are skipped and logged, as Redis does.
///
/// Errors: the file's name and the offset and reason it was refused at;
/// nothing is kept of a file that fails (the databases are emptied).
pub fn load(srv: &mut Server, host: &mut dyn Host) -> Result<Option<LoadStats>, LoadError> {
    load_file(srv, host, false)
}

/// `load` at start-up, as Redis loads: clients are served while the file
/// loads (`Host::serve_while_loading`, every
/// `loading-process-events-interval-bytes`), into databases kept aside
/// meanwhile, so every command not flagged `loading` is answered -LOADING
/// and those that run see empty databases. `key-load-delay` slows it (µs
/// per key; -n sleeps 1 µs for about one key in n), for tests.
///
/// Errors: as `load`, and `Interrupted` when a shutdown signal came.
pub fn load_serving(srv: &mut Server, host: &mut dyn Host) -> Result<Option<LoadStats>, LoadError> {
    load_file(srv, host, true)
}

fn load_file(srv: &mut Server, host: &mut dyn Host, serve: bool) -> Result<Option<LoadStats>, LoadError> {
    bgsave_abort(srv);
    let path = rdb_path(srv);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LoadError::Failed(format!("Fatal error loading the DB, check server logs. {}: {e}", path.display()))),
    };
    let verify_checksum = srv.config.flag("rdbchecksum") && !srv.skip_checksum_validation;
    let opts = LoadOptions { shapes: srv.config.shapes(), now: unix_ms(), verify_checksum, keep_expired: replica_at_load(srv), publish_thread: Some(crate::memory::publish_thread) };
    let result = if serve {
        load_aside(srv, host, &bytes, &opts)?
    } else {
        rdb::load_into(&bytes, &mut srv.dbs, &opts)
    };
    let loaded = match result {
        Ok(l) => l,
        Err(e) => {
            for db in &mut srv.dbs {
                db.clear();
            }
            if let Some((expected, got)) = e.crc_mismatch {
                srv.config.log.warning(&format!("Wrong RDB checksum expected: ({expected:x}) but got ({got:x}). Aborting now."));
            }
            return Err(LoadError::Corrupt(path, e.to_string()));
        }
    };
    // What Redis says of the file's AUX fields as it loads.
    let log = &srv.config.log;
    for (k, v) in &loaded.aux {
        let text = String::from_utf8_lossy(v);
        match k.as_slice() {
            b"redis-ver" => log.notice(&format!("Loading RDB produced by version {text}")),
            b"ctime" => {
                let age = text.parse::<i64>().map_or(0, |t| (unix_ms() / 1000 - t).max(0));
                log.notice(&format!("RDB age {age} seconds"));
            }
            b"used-mem" => {
                let mb = text.parse::<u64>().unwrap_or(0) as f64 / (1024.0 * 1024.0);
                log.notice(&format!("RDB memory usage when created {mb:.2} Mb"));
            }
            _ => {}
        }
    }
    for key in &loaded.empty_keys {
        srv.config.log.notice(&format!("rdbLoadObject skipping empty key: {}", String::from_utf8_lossy(key)));
    }
    if serve {
        restore_repl_info(srv, &loaded.aux);
        if srv.repl.restored && !replica_at_load(srv) {
            // Its replicas may hold the keys that expired while it was
            // down: they go out as DELs once its stream starts.
            srv.repl.expired_at_load = loaded.expired_keys;
        }
    }
    host.scripts().load_functions(loaded.functions).map_err(|e| LoadError::Failed(format!("{} ({}): {e}", "loading functions", path.display())))?;
    let stats = LoadStats { keys: loaded.inserted, expired: loaded.expired_skipped, empty: loaded.summary.empty_skipped };
    (srv.persist.last_load_keys, srv.persist.last_load_expired) = (stats.keys, stats.expired);
    srv.persist.dirty_at_save = srv.dirty;
    Ok(Some(stats))
}

/// Loads `bytes` into databases of their own, serving clients between
/// keys, and puts them in place at the end. Errors: `Interrupted`; the
/// inner result is the file's.
///
/// The AOF's RDB base loads through here too, at start-up; the databases
/// are empty then, and what was being reported as loading before is
/// reported again after.
pub fn load_aside(srv: &mut Server, host: &mut dyn Host, bytes: &[u8], opts: &LoadOptions) -> Result<Result<rdb::Loaded, rdb::RdbFileError>, LoadError> {
    let fresh = srv.dbs.iter().map(storage::Db::empty_like).collect();
    let mut dbs = std::mem::replace(&mut srv.dbs, fresh);
    let start_secs = unix_ms() / 1000;
    let before = srv.persist.loading.replace(crate::server::Loading { start_secs, total_bytes: bytes.len() as u64, loaded_bytes: 0, rdb_used_mem: 0 });
    let interval = srv.config.get("loading-process-events-interval-bytes").and_then(|v| v.parse::<usize>().ok()).unwrap_or(2 << 20).max(1);
    let delay: i64 = srv.config.get("key-load-delay").and_then(|v| v.parse().ok()).unwrap_or(0);
    let (mut next, mut items, mut stopped) = (interval, 0u64, false);
    let result = rdb::load_into_with(bytes, &mut dbs, opts, &mut |offset| {
        items += 1;
        match delay {
            0 => {}
            d if d > 0 => std::thread::sleep(Duration::from_micros(d as u64)),
            // Statistically: a 1 µs sleep for about one item in -d.
            d => {
                if items % d.unsigned_abs() == 0 {
                    std::thread::sleep(Duration::from_micros(1));
                }
            }
        }
        if offset < next {
            return true;
        }
        next = offset + interval;
        if let Some(l) = srv.persist.loading.as_mut() {
            l.loaded_bytes = offset as u64;
        }
        stopped = !host.serve_while_loading(srv);
        !stopped
    });
    srv.persist.loading = before;
    // What ran meanwhile saw the empty stand-ins; nothing of theirs is kept.
    srv.dbs = dbs;
    srv.apply_db_settings();
    if stopped {
        for db in &mut srv.dbs {
            db.clear();
        }
        return Err(LoadError::Interrupted);
    }
    Ok(result)
}

/// Share of the executor's time a background save may take while clients
/// are being served, in percent: the rest is theirs (an idle server saves
/// at full speed).
const BUSY_SHARE_PERCENT: i64 = 10;
/// The executor counts as idle, and a save steps at full speed, once no
/// client was served for this long: not in the gaps between one client's
/// requests, whose round trips are tens of microseconds.
const IDLE_AFTER: Duration = Duration::from_millis(2);
/// Most a step takes at a time, and most credit the busy share saves up.
const MAX_SLICE: Duration = Duration::from_millis(2);
/// Keys per snapshot step between clock reads (a step rounds up to whole
/// segments, about 2,000 keys).
const STEP_KEYS: usize = 512;
/// Seconds before save points retry a failed background save (Redis's
/// CONFIG_BGSAVE_RETRY_DELAY).
const RETRY_DELAY_SECS: i64 = 5;

/// BGSAVE: starts a background save of every database and the function
/// libraries to the RDB file.
///
/// Errors: one is running already, or the writer thread could not start.
pub fn bgsave_start(srv: &mut Server, host: &mut dyn Host) -> Result<(), String> {
    let path = rdb_path(srv);
    let tmp = path.with_file_name(format!("temp-bg-{}-{}.rdb", std::process::id(), next_job()));
    snapshot_start(srv, host, Purpose::Rdb, Form::Rdb, path, tmp, None)?;
    srv.persist.bg_scheduled = false;
    srv.config.log.notice(&format!("Background saving started by pid {}", std::process::id()));
    Ok(())
}

/// Starts writing an AOF base to `path` in the background, as BGSAVE
/// does: an RDB image marked aof-base, or with aof-use-rdb-preamble no a
/// base of commands (`Form::Commands`). Its end is left in
/// `Server::aof_base_done` for the AOF to take.
///
/// Errors: a background save is running, or the thread could not start.
pub fn aof_base_start(srv: &mut Server, host: &mut dyn Host, path: PathBuf) -> Result<(), String> {
    let tmp = path.with_file_name(format!("temp-rewriteaof-bg-{}-{}.aof", std::process::id(), next_job()));
    srv.aof_base_done = None;
    let form = if srv.config.flag("aof-use-rdb-preamble") { Form::Rdb } else { Form::Commands { timestamp: srv.config.flag("aof-timestamp-enabled") } };
    snapshot_start(srv, host, Purpose::AofBase, form, path, tmp, None)
}

/// Starts a full sync's image for replicas in the background, to a temp
/// file of its own in `dir`; its end is left in `Repl::rdb_done`. With
/// `stream` (a diskless sync) the header's version is settled now, so
/// the file can be sent while it is written (`Job::stream`).
///
/// Errors: a background save is running, or the thread could not start.
pub fn repl_save_start(srv: &mut Server, host: &mut dyn Host, stream: bool) -> Result<(), String> {
    let n = next_job();
    let path = rdb_path(srv).with_file_name(format!("temp-repl-{}-{n}.rdb", std::process::id()));
    let tmp = path.with_file_name(format!("temp-repl-bg-{}-{n}.rdb", std::process::id()));
    srv.repl.rdb_done = None;
    let version = stream.then(|| stream_version(srv, !host.scripts_ref().function_codes().is_empty()));
    snapshot_start(srv, host, Purpose::Repl, Form::Rdb, path.clone(), tmp, version)?;
    srv.repl.rdb_path = Some(path);
    let target = if stream { "replicas sockets" } else { "disk" };
    srv.config.log.notice(&format!("Starting BGSAVE for SYNC with target: {target} (pid {})", std::process::id()));
    Ok(())
}

/// The lowest RDB version the data holds now needs, for an image whose
/// header goes out before its keys: 12 with any hash field or member TTL
/// (counted by the keyspace), else what its collections need (streams:
/// 10, or 11 when a consumer's active time differs from its seen time),
/// at least 10 with functions. Without field TTLs that walks the object
/// tables (collections only, no key or string visited) and stops at the
/// first value needing 11; a Redis 7.0 replica, which loads up to 10, so
/// still gets a file it loads whenever the data allows. The snapshot
/// begins right after, with no command between: the image holds exactly
/// this data.
fn stream_version(srv: &Server, functions: bool) -> u16 {
    if srv.dbs.iter().any(|d| d.field_expiry_len() > 0) {
        return rdb::RDB_VERSION;
    }
    let mut needed = 0;
    for v in srv.dbs.iter().flat_map(|d| d.objects()) {
        needed = needed.max(rdb::value_version(v));
        if needed >= 11 {
            break;
        }
    }
    rdb::min_file_version(needed, functions)
}

/// Replaces every database with the image a primary sent (a replica's
/// full sync), as Redis's replica loads the RDB it received. With
/// `repl-diskless-load swapdb` the image loads into databases of its own
/// and replaces the old ones only once it loaded, so a refused image
/// leaves the old data in place; otherwise the old data goes first.
///
/// Errors: the image was refused (the databases are left empty, or as
/// they were with swapdb).
pub fn load_replica_image(srv: &mut Server, host: &mut dyn Host, bytes: &[u8]) -> Result<LoadStats, String> {
    bgsave_abort(srv);
    let verify_checksum = srv.config.flag("rdbchecksum") && !srv.skip_checksum_validation;
    let opts = LoadOptions { shapes: srv.config.shapes(), now: unix_ms(), verify_checksum, keep_expired: true, publish_thread: Some(crate::memory::publish_thread) };
    // A diskless load said so when its image began to arrive.
    let said = srv.repl.transfer_loading.is_some();
    let loaded = if srv.config.get("repl-diskless-load") == Some("swapdb") {
        if !said {
            srv.config.log.notice("MASTER <-> REPLICA sync: Loading DB in memory");
        }
        let mut fresh: Vec<storage::Db> = srv.dbs.iter().map(storage::Db::empty_like).collect();
        let loaded = rdb::load_into(bytes, &mut fresh, &opts).map_err(|e| e.to_string())?;
        srv.config.log.notice("MASTER <-> REPLICA sync: Discarding the old data");
        let old = std::mem::replace(&mut srv.dbs, fresh);
        discard_replaced(srv, old);
        loaded
    } else {
        srv.config.log.notice("MASTER <-> REPLICA sync: Flushing old data");
        let fresh = srv.dbs.iter().map(storage::Db::empty_like).collect();
        let old = std::mem::replace(&mut srv.dbs, fresh);
        discard_replaced(srv, old);
        srv.apply_db_settings();
        srv.apply_expire_mode();
        if !said {
            srv.config.log.notice("MASTER <-> REPLICA sync: Loading DB in memory");
        }
        // Clients (INFO answers loading:1, the rest -LOADING) and the
        // cluster bus are served meanwhile, as Redis's replica serves them
        // while it loads what its primary sent.
        match load_aside(srv, host, bytes, &opts) {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => {
                for db in &mut srv.dbs {
                    db.clear();
                }
                return Err(e.to_string());
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    host.scripts().load_functions(loaded.functions).map_err(|e| format!("loading functions: {e}"))?;
    srv.apply_db_settings();
    srv.apply_expire_mode();
    Ok(LoadStats { keys: loaded.inserted, expired: loaded.expired_skipped, empty: loaded.summary.empty_skipped })
}

/// Frees the databases a full sync's image replaced (no save runs: the
/// load aborted it): on the freeing thread with `replica-lazy-flush`
/// (counted in lazyfreed_objects, as Redis counts a lazy flush), here
/// otherwise. The new databases take their settings at the load's end.
fn discard_replaced(srv: &mut Server, old: Vec<storage::Db>) {
    let n: u64 = old.iter().map(|d| d.len() as u64).sum();
    if srv.config.flag("replica-lazy-flush") && n > 0 {
        srv.lazyfree.free(Box::new(old), n);
    }
}

/// A number of its own for each background save's temp file: an aborted
/// save's thread removes its file when it stops, which may be after the
/// next save began.
fn next_job() -> u64 {
    static JOBS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    JOBS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// After CONFIG SET: a running background save takes the new
/// `rdb-key-save-delay` (Redis's forked child keeps the one it started
/// with; a test that slowed a save then kills the child, and here lowering
/// the delay is what ends the slow save).
pub fn config_changed(srv: &mut Server) {
    if let Some(job) = &srv.bgsave {
        job.set_key_delay(key_save_delay(srv));
    }
}

/// `rdb-key-save-delay`, in microseconds per key (negative -k: about one
/// microsecond every k keys).
fn key_save_delay(srv: &Server) -> i64 {
    srv.config.get("rdb-key-save-delay").and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn snapshot_start(srv: &mut Server, host: &mut dyn Host, purpose: Purpose, form: Form, path: PathBuf, tmp: PathBuf, stream_version: Option<u16>) -> Result<(), String> {
    if srv.bgsave.is_some() {
        return Err("Background save already in progress".into());
    }
    let now = unix_ms();
    let codes = host.scripts_ref().function_codes();
    let plan = Plan {
        purpose,
        form,
        path,
        tmp,
        opts: WriteOptions { compression: srv.config.flag("rdbcompression"), checksum: srv.config.flag("rdbchecksum") },
        incremental_fsync: srv.config.flag(if purpose == Purpose::AofBase { "aof-rewrite-incremental-fsync" } else { "rdb-save-incremental-fsync" }),
        key_delay_us: key_save_delay(srv),
        now,
        redis_ver: crate::REDIS_VERSION,
        ctime_secs: now / 1000,
        used_mem: crate::memory::allocated(),
        repl: repl_save_info(srv),
        functions: &codes,
        sizes: srv.dbs.iter().map(|d| (d.len() as u64, d.volatile_len() as u64)).collect(),
        stream_version,
    };
    if purpose == Purpose::Rdb {
        srv.persist.last_bg_try = now / 1000;
    }
    let job = match Job::start(plan) {
        Ok(j) => j,
        Err(e) => {
            if purpose == Purpose::Rdb {
                srv.persist.last_save_ok = false;
            }
            return Err(e);
        }
    };
    for (i, db) in srv.dbs.iter_mut().enumerate() {
        db.snapshot_begin(job.sink(i));
    }
    let p = &mut srv.persist;
    p.bg_started = Some(Instant::now());
    p.bg_dirty_at_start = srv.dirty;
    p.bg_keys_total = srv.dbs.iter().map(|d| d.len() as u64).sum();
    srv.bgsave = Some(job);
    Ok(())
}

/// The purpose of the background save running, if one is.
pub fn bgsave_running(srv: &Server) -> Option<Purpose> {
    srv.bgsave.as_ref().map(|j| j.purpose)
}

/// Runs a slice of the background save, between commands (none while the
/// writer thread is behind). `served` is the time the executor just spent
/// on clients; while it is busy the save takes `BUSY_SHARE_PERCENT` of its
/// time on average (`bgsave::Pace`), once it has been idle for `IDLE_AFTER`
/// slices of `MAX_SLICE` back to back. Returns how long the
/// event loop may sleep before the next slice: None when no save needs
/// stepping (none runs, or all its keys went out).
pub fn bgsave_step(srv: &mut Server, served: Duration) -> Option<Duration> {
    let job = srv.bgsave.as_mut()?;
    if job.sealed {
        return bgsave_poll(srv);
    }
    if job.backed_up() {
        return Some(Duration::from_millis(1));
    }
    let start = Instant::now();
    let pace = &mut job.pace;
    if !served.is_zero() {
        pace.last_served = start;
        pace.credit_ns = (pace.credit_ns + served.as_nanos() as i64 * BUSY_SHARE_PERCENT / 100).min(MAX_SLICE.as_nanos() as i64);
    }
    let idle = start.duration_since(pace.last_served) >= IDLE_AFTER;
    let budget = if idle {
        MAX_SLICE
    } else if pace.credit_ns > 0 {
        Duration::from_nanos(pace.credit_ns as u64)
    } else {
        // Owed: no step this turn; look again when idle would begin.
        return Some(IDLE_AFTER);
    };
    let mut complete = true;
    for db in srv.dbs.iter_mut() {
        while db.snapshot_running() {
            if db.snapshot_step(STEP_KEYS) {
                // Complete: the sink comes back and is dropped.
                if db.snapshot_end().is_some() {
                    break;
                }
            }
            if start.elapsed() >= budget || srv.bgsave.as_ref().is_some_and(|j| j.backed_up()) {
                complete = false;
                break;
            }
        }
        if !complete {
            break;
        }
    }
    if let Some(job) = srv.bgsave.as_mut() {
        if !idle {
            job.pace.credit_ns -= start.elapsed().as_nanos() as i64;
        }
    }
    if complete && srv.dbs.iter().all(|d| !d.snapshot_running()) {
        if let Some(job) = srv.bgsave.as_mut() {
            job.seal();
        }
        return bgsave_poll(srv);
    }
    Some(if idle { Duration::ZERO } else { IDLE_AFTER })
}

/// Reports a background save that ended: logs, counters, the status
/// `stop-writes-on-bgsave-error` reads. Returns the event loop's sleep
/// bound while the writer thread is still at work.
fn bgsave_poll(srv: &mut Server) -> Option<Duration> {
    let outcome = srv.bgsave.as_ref()?.poll();
    let Some(outcome) = outcome else { return Some(Duration::from_millis(5)) };
    let purpose = srv.bgsave.take().map(|j| j.purpose);
    for db in srv.dbs.iter_mut() {
        db.snapshot_abort();
    }
    let p = &mut srv.persist;
    let secs = p.bg_started.take().map_or(-1, |t| t.elapsed().as_secs() as i64);
    if purpose == Some(Purpose::AofBase) {
        srv.aof_base_done = Some(outcome);
        return None;
    }
    if purpose == Some(Purpose::Repl) {
        let path = srv.repl.rdb_path.take().unwrap_or_default();
        srv.repl.rdb_done = Some(outcome.map(|_| path));
        return None;
    }
    p.last_bg_secs = secs;
    match outcome {
        Ok(_) => {
            p.last_save_ok = true;
            p.saves += 1;
            p.dirty_at_save = p.bg_dirty_at_start.max(p.dirty_at_save);
            srv.last_save = unix_ms() / 1000;
            srv.config.log.notice("DB saved on disk");
            srv.config.log.notice("Background saving terminated with success");
        }
        Err(e) => {
            p.last_save_ok = false;
            srv.config.log.warning(&e);
            srv.config.log.warning("Background saving error");
        }
    }
    None
}

/// Stops a running background save, keeps nothing of it (the writer
/// thread removes its temp file), and leaves the last save's status as
/// it was: an abort is not a failure (FLUSHALL, SHUTDOWN, a load).
pub fn bgsave_abort(srv: &mut Server) {
    let Some(job) = srv.bgsave.take() else { return };
    for db in srv.dbs.iter_mut() {
        db.snapshot_abort();
    }
    srv.persist.bg_started = None;
    match job.purpose {
        Purpose::Rdb => srv.config.log.warning("Background saving terminated by signal 10"),
        Purpose::AofBase => srv.aof_base_done = Some(Err("Background AOF rewrite terminated by signal 10".into())),
        Purpose::Repl => srv.repl.rdb_done = Some(Err("Background RDB transfer terminated by signal 10".into())),
    }
}

/// `bgsave_abort` for an RDB save only (FLUSHALL: an AOF rewrite goes on,
/// the flush reaches the new incremental file).
pub fn rdb_bgsave_abort(srv: &mut Server) {
    if bgsave_running(srv) == Some(Purpose::Rdb) {
        bgsave_abort(srv);
    }
}

/// Keys the running background save has serialized, and how many the
/// databases held when it began (INFO current_save_keys_*).
pub fn bgsave_progress(srv: &Server) -> Option<(u64, u64)> {
    srv.bgsave.as_ref().filter(|j| j.purpose == Purpose::Rdb).map(|j| (j.keys_done(), srv.persist.bg_keys_total))
}

/// Cron's part: a save the `save` points ask for, as Redis's serverCron
/// starts one (enough changes, enough seconds since the last save, and a
/// failed attempt at least `RETRY_DELAY_SECS` ago), or one BGSAVE
/// SCHEDULE left waiting.
pub fn on_cron(srv: &mut Server, host: &mut dyn Host) {
    if srv.bgsave.is_some() {
        bgsave_poll(srv);
        return;
    }
    let now = unix_ms() / 1000;
    let changes = srv.dirty - srv.persist.dirty_at_save;
    let may_retry = srv.persist.last_save_ok || now - srv.persist.last_bg_try > RETRY_DELAY_SECS;
    let due = srv.config.save_points().into_iter().find(|&(secs, n)| changes as i64 >= n && now - srv.last_save > secs && may_retry);
    if let Some((secs, _)) = due {
        srv.config.log.notice(&format!("{changes} changes in {secs} seconds. Saving..."));
    } else if !srv.persist.bg_scheduled {
        return;
    }
    if let Err(e) = bgsave_start(srv, host) {
        srv.config.log.warning(&e);
    }
}
