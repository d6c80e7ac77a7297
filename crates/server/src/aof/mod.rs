//! The append-only file, in Redis 7's multi-part layout (see `manifest`):
//! start-up loading, appending, rewriting, and turning it on and off.
//!
//! The AOF hangs off the write stream (`feed.rs`): an `AofSink` turns each
//! propagated command into RESP bytes in a buffer; no command writes to
//! the AOF itself. The event loop calls [`flush`] once per iteration,
//! after running every ready client and before any reply of that
//! iteration leaves (Redis's beforeSleep order): the buffer is written,
//! and with `appendfsync always` fsynced, so a reply never announces a
//! write the disk does not hold (a group commit: one fsync per iteration,
//! not per command). `everysec` asks a background thread for an fsync at
//! most once a second; `no` leaves it to the OS.
//!
//! A rewrite writes a new base file (the RDB writer's image, or commands
//! with aof-use-rdb-preamble no), opens a new incremental file, publishes
//! both in the manifest (temp file, fsync, rename, fsync of the
//! directory) and deletes what they replaced. With an RDB preamble the
//! base is a fork-free background snapshot (`rewrite_background`); a base
//! of commands is written on the executor. CONFIG SET appendonly yes
//! starts such a rewrite with the writes going to a temporary incremental
//! file until the base is complete (`AofState::wait_rewrite`).
//!
//! Parts: `manifest` (the manifest's text), `reader` (the command part's
//! bytes), `check` (redis-check-aof), `state` (what `Server` keeps),
//! `load` (replay through the command table).

pub mod files;
pub mod load;

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::bgsave::Purpose;
use crate::command::Host;
use crate::server::{unix_ms, Server};
use files::{aof_dir, base_dir, dir_name, errno_text, file_name, log, Logged};
use crate::aofcore::manifest::Manifest;
use crate::aofcore::state::{AofSink, Fsync, Syncer};

/// Reads the manifest of the AOF directory, if there is one.
///
/// Errors: the manifest is unreadable or malformed; Redis's FATAL lines
/// are logged.
pub fn read_manifest(srv: &Server) -> Result<Manifest, Logged> {
    let path = aof_dir(srv).join(crate::aofcore::manifest::manifest_name(&file_name(srv)));
    let text = match fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Manifest::default()),
        Err(e) => {
            log(srv).warning(&format!("Fatal error: can't open the AOF manifest file {} for reading: {}", path.display(), errno_text(&e)));
            return Err(Logged);
        }
    };
    Manifest::parse(&text).map_err(|(err, at)| {
        let l = log(srv);
        l.warning("\n*** FATAL AOF MANIFEST FILE ERROR ***\n");
        if let Some((n, line)) = at {
            l.warning(&format!("Reading the manifest file, at line {n}\n"));
            l.warning(&format!(">>> '{line}'\n"));
        }
        l.warning(&format!("{err}\n"));
        Logged
    })
}

/// Writes `m` as the manifest: a temp file, fsync, rename, fsync of the
/// directory, as Redis does, so a crash leaves the old or the new one.
///
/// Errors: logged with Redis's lines.
pub fn persist_manifest(srv: &Server, m: &Manifest) -> Result<(), Logged> {
    let dir = aof_dir(srv);
    let fname = file_name(srv);
    let (name, tmp) = (crate::aofcore::manifest::manifest_name(&fname), crate::aofcore::manifest::temp_manifest_name(&fname));
    let l = log(srv);
    let mut f = File::create(dir.join(&tmp)).map_err(|e| l.warning(&format!("Can't open the AOF manifest file {tmp}: {}", errno_text(&e))))?;
    f.write_all(m.format().as_bytes()).map_err(|e| l.warning(&format!("Error trying to write the temporary AOF manifest file {tmp}: {}", errno_text(&e))))?;
    f.sync_all().map_err(|e| l.warning(&format!("Fail to fsync the temp AOF file {tmp}: {}.", errno_text(&e))))?;
    fs::rename(dir.join(&tmp), dir.join(&name))
        .map_err(|e| l.warning(&format!("Error trying to rename the temporary AOF manifest file {tmp} into {name}: {}", errno_text(&e))))?;
    sync_dir(&dir).map_err(|e| l.warning(&format!("Fail to fsync AOF directory {}: {}.", dir.join(&name).display(), errno_text(&e))))?;
    Ok(())
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn create_dir(srv: &Server) -> Result<(), Logged> {
    let dir = aof_dir(srv);
    fs::create_dir_all(&dir).map_err(|e| log(srv).warning(&format!("Can't open or create append-only dir {}: {}", dir_name(srv), errno_text(&e))))?;
    Ok(())
}


fn file_size(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Loads the AOF at start-up (appendonly yes): an old single file in
/// `dir` is first moved into the directory under a new manifest, as Redis
/// 7 upgrades it; then the base and incremental files are replayed. No
/// AOF at all loads nothing (and the RDB file is not read either, as in
/// Redis).
///
/// Errors: why it was refused is logged; the caller exits with status 1.
pub fn load_at_start(srv: &mut Server, host: &mut dyn Host) -> Result<(), Logged> {
    let started = Instant::now();
    let mut m = read_manifest(srv)?;
    let fname = file_name(srv);
    let old = base_dir(srv).join(&fname);
    let dir = aof_dir(srv);
    if old.is_file() {
        let empty = m.base.is_none() && m.incr.is_empty();
        let half_done = m.incr.is_empty() && m.base.as_ref().is_some_and(|b| b.name == fname) && !dir.join(&fname).exists();
        if !dir.is_dir() || empty || half_done {
            upgrade(srv, &mut m, &old)?;
        }
    }
    let found = load::load_files(srv, host, &m, false);
    srv.aof.manifest = m;
    match found {
        Err(Logged) => Err(Logged),
        Ok(None) => Ok(()),
        Ok(Some(_)) => {
            log(srv).notice(&format!("DB loaded from append only file: {:.3} seconds", started.elapsed().as_secs_f64()));
            Ok(())
        }
    }
}

/// Moves an old-style single AOF into the directory as its base.
fn upgrade(srv: &mut Server, m: &mut Manifest, old: &Path) -> Result<(), Logged> {
    create_dir(srv)?;
    let fname = file_name(srv);
    m.base = Some(crate::aofcore::manifest::Entry { name: fname.clone(), seq: 1, kind: crate::aofcore::manifest::Kind::Base });
    m.base_seq = 1;
    persist_manifest(srv, m)?;
    fs::rename(old, aof_dir(srv).join(&fname)).map_err(|e| {
        log(srv).warning(&format!("Error trying to move the old AOF file {fname} into dir {}: {}", dir_name(srv), errno_text(&e)));
    })?;
    log(srv).notice(&format!("Successfully migrated an old-style AOF file ({fname}) into the AOF directory ({}).", dir_name(srv)));
    Ok(())
}

/// After loading, with appendonly yes: makes a base file if there is no
/// AOF yet, opens the last incremental file (or a new one) for appending,
/// writes the manifest, and attaches the AOF to the write stream. With
/// appendonly no, only reads the manifest (a later CONFIG SET appendonly
/// yes continues its numbering).
///
/// Errors: logged; the caller exits with status 1.
pub fn open_at_start(srv: &mut Server, host: &mut dyn Host) -> Result<(), Logged> {
    apply_settings(srv);
    if !srv.config.flag("appendonly") {
        srv.aof.manifest = read_manifest(srv).unwrap_or_default();
        return Ok(());
    }
    create_dir(srv)?;
    let fname = file_name(srv);
    let dir = aof_dir(srv);
    let mut m = srv.aof.manifest.clone();
    let had_incr = !m.incr.is_empty();
    if m.base.is_none() && !had_incr {
        let name = m.new_base(&fname, srv.config.flag("aof-use-rdb-preamble"));
        write_base(srv, host, &dir.join(&name)).map_err(|e| log(srv).warning(&e))?;
        log(srv).notice(&format!("Creating AOF base file {name} on server start"));
    }
    let name = match m.incr.last() {
        Some(e) => e.name.clone(),
        None => m.new_incr(&fname),
    };
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join(&name))
        .map_err(|e| log(srv).warning(&format!("Can't open the append-only file {name}: {}", errno_text(&e))))?;
    persist_manifest(srv, &m)?;
    let base = m.base.as_ref().map_or(0, |b| file_size(&dir.join(&b.name)));
    srv.aof.current_size = m.load_order().map(|e| file_size(&dir.join(&e.name))).sum();
    srv.aof.base_size = base;
    srv.aof.manifest = m;
    srv.aof.file = Some(file);
    start(srv);
    note_synced(srv, 0);
    log(srv).notice(&format!("{} AOF incr file {name} on server start", if had_incr { "Opening" } else { "Creating" }));
    Ok(())
}

/// Marks the AOF on and attaches its sink (the next command it logs is
/// preceded by SELECT).
fn start(srv: &mut Server) {
    srv.aof.on = true;
    srv.feed.detach("aof");
    srv.feed.attach(Box::new(AofSink(srv.aof.pending.clone())));
    // The stream's offset measures how far the AOF is fsynced (WAITAOF).
    crate::replication::ensure_sink(srv);
}

/// Mirrors appendfsync and aof-timestamp-enabled into the running state.
pub fn apply_settings(srv: &mut Server) {
    srv.aof.fsync = Fsync::parse(srv.config.get("appendfsync").unwrap_or("everysec"));
    srv.aof.no_fsync_on_rewrite = srv.config.flag("no-appendfsync-on-rewrite");
    srv.aof.pending.borrow_mut().timestamps = srv.config.flag("aof-timestamp-enabled");
}

/// After CONFIG SET: follows appendfsync / aof-timestamp-enabled, and
/// turns the AOF on (a rewrite, as Redis's startAppendOnly) or off.
///
/// Errors: the AOF could not be turned on (the reason is logged).
pub fn config_changed(srv: &mut Server, host: &mut dyn Host) -> Result<(), String> {
    apply_settings(srv);
    if srv.persist.loading.is_some() && !srv.aof.on {
        // Loading at start-up: the databases are not in place yet (a
        // rewrite now would write an empty base); `open_at_start` follows
        // the setting once they are.
        return Ok(());
    }
    let want = srv.config.flag("appendonly");
    if want && !srv.aof.on {
        // What is written from here is fsynced from here, but WAITAOF
        // counts nothing local until the first rewrite holds the data set
        // (Redis's AOF_WAIT_REWRITE).
        srv.aof.synced_off = srv.repl.end_offset();
        srv.aof.fsync_inflight = None;
        srv.repl.fsynced = 0;
        // Until its first rewrite completes, writes are not in any file the
        // manifest names (Redis's AOF_WAIT_REWRITE).
        if srv.bgsave.is_some() && crate::persist::bgsave_running(srv) != Some(Purpose::AofBase) {
            // One background save at a time: the rewrite starts from cron
            // once BGSAVE (or a replica's sync) is done; writes meanwhile
            // are in the data set the base will hold.
            srv.aof.on = true;
            srv.aof.wait_rewrite = true;
            srv.aof.rewrite_scheduled = true;
            log(srv).notice("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
            return Ok(());
        }
        if srv.feed.depth() > 1 {
            // Inside EXEC or a script: what the transaction propagated so
            // far would reach the new file after the base that holds it.
            srv.aof.on = true;
            srv.aof.wait_rewrite = true;
            srv.aof.rewrite_scheduled = true;
            log(srv).notice("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.");
            return Ok(());
        }
        if srv.aof.rewrite_base.is_some() {
            // A rewrite started with the AOF off has no incremental file.
            log(srv).notice("AOF was enabled but there is already an AOF rewriting in background. Stopping background AOF and starting a rewrite now.");
            kill_rewrite(srv);
        }
        srv.aof.on = true;
        srv.aof.wait_rewrite = true;
        if let Err(e) = rewrite_background(srv, host) {
            srv.aof.on = false;
            srv.aof.wait_rewrite = false;
            srv.repl.fsynced = -1;
            srv.aof.file = None;
            srv.feed.detach("aof");
            log(srv).warning(&e);
            log(srv).warning("Redis needs to enable the AOF but can't trigger a background AOF rewrite operation. Check the above logs for more info about the error.");
            return Err("Unable to turn on AOF. Check server logs.".into());
        }
    } else if !want && srv.aof.on {
        stop(srv);
    }
    Ok(())
}

/// Turns the AOF off: what is buffered is written and synced, the file
/// closed, the sink detached.
pub fn stop(srv: &mut Server) {
    if srv.aof.rewrite_base.is_some() {
        kill_rewrite(srv);
    }
    flush(srv);
    if let Some(f) = srv.aof.file.take() {
        let _ = f.sync_data();
    }
    srv.aof.on = false;
    srv.aof.wait_rewrite = false;
    srv.aof.rewrite_scheduled = false;
    srv.aof.pending.borrow_mut().buf.clear();
    srv.aof.fsync_inflight = None;
    srv.repl.fsynced = -1;
    srv.feed.detach("aof");
}

/// After a replica loaded its primary's image: the AOF, which holds the
/// data set the image replaced, starts over from a rewrite of the new
/// one, as Redis's replica restarts its AOF after a full sync. It follows
/// `appendonly` as it stands now: set to yes while the image loaded (which
/// only records the setting), the AOF starts here.
///
/// Errors: the AOF could not be turned on again (logged).
pub fn restart_after_sync(srv: &mut Server, host: &mut dyn Host) -> Result<(), String> {
    if !srv.config.flag("appendonly") {
        return Ok(());
    }
    if srv.aof.on {
        stop(srv);
    }
    config_changed(srv, host)
}

/// The file is fsynced up to stream offset `off`: WAITAOF counts it (and a
/// replica acknowledges it) unless the first rewrite is still pending.
fn note_synced(srv: &mut Server, off: i64) {
    srv.aof.synced_off = off;
    if !srv.aof.wait_rewrite {
        srv.repl.fsynced = off;
    }
}

/// The temporary incremental file that takes the writes while the first
/// rewrite of an AOF turned on at run time is written.
fn temp_incr_name(fname: &str) -> String {
    format!("temp-{fname}.incr")
}

/// Ends a background rewrite before it completes (the AOF was turned
/// off): the base being written is dropped, the manifest keeps what it
/// had. Redis kills its rewrite child then, and says so in these words.
fn kill_rewrite(srv: &mut Server) {
    log(srv).notice(&format!("Killing running AOF rewrite child: {}", std::process::id()));
    if crate::persist::bgsave_running(srv) == Some(Purpose::AofBase) {
        crate::persist::bgsave_abort(srv);
    }
    srv.aof_base_done = None;
    srv.aof.rewrite_started = None;
    if let Some(base) = srv.aof.rewrite_base.take() {
        let _ = fs::remove_file(aof_dir(srv).join(base));
    }
}

/// True while a background rewrite's base is being written.
pub fn rewrite_running(srv: &Server) -> bool {
    srv.aof.rewrite_base.is_some()
}

/// Writes what the sink buffered to the incremental file; with
/// `appendfsync always` fsyncs it too, with `everysec` asks the fsync
/// thread when a second has passed. Called once per event-loop iteration
/// before replies are sent. A write error with `always` exits, as Redis
/// does: acknowledging writes that are not on disk is not an option.
pub fn flush(srv: &mut Server) {
    if !srv.aof.on {
        return;
    }
    // The buffer and the replication stream are fed together: what is
    // written now reaches this offset of the stream.
    let end = srv.repl.end_offset();
    let buf = std::mem::take(&mut srv.aof.pending.borrow_mut().buf);
    if !buf.is_empty() {
        let Some(file) = srv.aof.file.as_mut() else {
            // Waiting for a scheduled rewrite to open the file: the base
            // will hold these writes.
            return;
        };
        if srv.aof.flush_sleep_us > 0 {
            std::thread::sleep(Duration::from_micros(srv.aof.flush_sleep_us));
        }
        let mut written = 0;
        let result = loop {
            match file.write(&buf[written..]) {
                Ok(0) => break Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
                Ok(n) => {
                    written += n;
                    if written == buf.len() {
                        break Ok(());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(()) => {
                srv.aof.current_size += buf.len() as u64;
                srv.aof.unsynced = true;
                if !srv.aof.last_write_ok {
                    log(srv).warning("AOF write error looks solved, Redis can write again.");
                }
                srv.aof.last_write_ok = true;
                srv.aof.last_write_error = None;
            }
            Err(e) => {
                // A partial write is cut off again, so the retry does not
                // leave half a command in the file; if it cannot be, what
                // was written stays and only the rest is retried.
                let mut rest = &buf[..];
                if written > 0 {
                    let cut = file.stream_position().and_then(|end| {
                        let size = end - written as u64;
                        file.set_len(size)?;
                        file.seek(std::io::SeekFrom::Start(size)).map(|_| ())
                    });
                    if cut.is_err() {
                        srv.aof.current_size += written as u64;
                        rest = &buf[written..];
                    }
                }
                let l = log(srv);
                let why = errno_text(&e);
                // Logged once per 30 s while it lasts (every turn retries).
                let quiet = srv.aof.write_error_logged.is_some_and(|t| t.elapsed() < Duration::from_secs(30));
                if !quiet || srv.aof.fsync == Fsync::Always {
                    srv.aof.write_error_logged = Some(Instant::now());
                    l.warning(&format!("Error writing to the AOF file: {why}"));
                }
                if srv.aof.fsync == Fsync::Always {
                    l.warning("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
                    std::process::exit(1);
                }
                srv.aof.last_write_ok = false;
                srv.aof.last_write_error = Some(why);
                // Keep the bytes for the next try, before anything newer.
                let mut p = srv.aof.pending.borrow_mut();
                let newer = std::mem::replace(&mut p.buf, rest.to_vec());
                p.buf.extend_from_slice(&newer);
                return;
            }
        }
    }
    sync_if_due(srv, false, end);
}

/// The fsync part of `flush` (also run from cron, so a quiet everysec
/// server syncs its last writes within a second or two). `end` is the
/// stream offset the written data reaches, which becomes the fsynced
/// offset once an fsync covers it; when everything written is fsynced
/// (and the policy fsyncs at all), the fsynced offset follows the stream,
/// which also carries what the AOF does not (PINGs to replicas).
fn sync_if_due(srv: &mut Server, cron: bool, end: i64) {
    if let Some(off) = srv.aof.fsync_inflight {
        if srv.aof.syncer.as_ref().is_none_or(|s| !s.busy()) {
            srv.aof.fsync_inflight = None;
            note_synced(srv, off);
        }
    }
    if !srv.aof.unsynced {
        if srv.aof.fsync != Fsync::No && srv.aof.fsync_inflight.is_none() && srv.aof.pending.borrow().buf.is_empty() && srv.aof.file.is_some() {
            note_synced(srv, end);
        }
        return;
    }
    // no-appendfsync-on-rewrite yes: while a background save or rewrite
    // writes its file, the AOF is written but fsynced only after it, as
    // Redis skips the fsync while a child does disk I/O (the operator
    // trades durability for latency; WAITAOF waits for the fsync).
    if srv.aof.no_fsync_on_rewrite && (srv.bgsave.is_some() || rewrite_running(srv)) {
        return;
    }
    let Some(file) = srv.aof.file.as_ref() else { return };
    match srv.aof.fsync {
        Fsync::Always if !cron => {
            if let Err(e) = file.sync_data() {
                log(srv).warning(&format!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {}. Exiting...", errno_text(&e)));
                std::process::exit(1);
            }
            srv.aof.unsynced = false;
            srv.aof.last_fsync = Instant::now();
            note_synced(srv, end);
        }
        Fsync::EverySec if srv.aof.last_fsync.elapsed() >= Duration::from_secs(1) => {
            let s = srv.aof.syncer.get_or_insert_with(Syncer::start);
            if s.request(file) {
                srv.aof.unsynced = false;
                srv.aof.last_fsync = Instant::now();
                srv.aof.fsync_inflight = Some(end);
            }
        }
        _ => {}
    }
}

/// Called at shutdown: writes and fsyncs what is left.
pub fn shutdown(srv: &mut Server) {
    if !srv.aof.on {
        return;
    }
    flush(srv);
    log(srv).notice("Calling fsync() on the AOF file.");
    if let Some(f) = srv.aof.file.as_ref() {
        let _ = f.sync_data();
    }
}

/// Periodic AOF work: the everysec fsync, a scheduled rewrite, and the
/// automatic rewrite when the AOF grew auto-aof-rewrite-percentage past
/// its base and is at least auto-aof-rewrite-min-size.
pub fn cron(srv: &mut Server, host: &mut dyn Host) {
    flush(srv);
    let end = srv.repl.end_offset();
    sync_if_due(srv, true, end);
    if let Some(e) = srv.aof.syncer.as_ref().and_then(Syncer::error) {
        srv.aof.last_write_ok = false;
        srv.aof.last_write_error = Some(errno_text(&e));
    }
    rewrite_poll(srv);
    if srv.aof.rewrite_scheduled && srv.feed.depth() == 0 && srv.bgsave.is_none() {
        srv.aof.rewrite_scheduled = false;
        if let Err(e) = rewrite_background(srv, host) {
            log(srv).warning(&e);
        }
        return;
    }
    if srv.bgsave.is_some() {
        return;
    }
    if !srv.aof.on || srv.aof.file.is_none() {
        return;
    }
    let pct: u64 = srv.config.get("auto-aof-rewrite-percentage").and_then(|v| v.parse().ok()).unwrap_or(0);
    let min: u64 = srv.config.get("auto-aof-rewrite-min-size").and_then(|v| v.parse().ok()).unwrap_or(0);
    let (cur, base) = (srv.aof.current_size, srv.aof.base_size.max(1));
    if pct > 0 && cur > min && (cur - base.min(cur)) * 100 / base >= pct {
        log(srv).notice(&format!("Starting automatic rewriting of AOF on {}% growth", (cur - base.min(cur)) * 100 / base));
        if let Err(e) = rewrite_background(srv, host) {
            log(srv).warning(&e);
        }
    }
}

/// BGREWRITEAOF, the automatic rewrite and a scheduled one, without fork
/// (a base of commands with aof-use-rdb-preamble no as the RDB image). A
/// new incremental file takes every write from now on (the manifest lists it at once, after the old
/// ones, so a crash loses nothing), and the base is written from a
/// keyspace snapshot taken now, as BGSAVE writes its file; when it is
/// complete, `rewrite_poll` switches the manifest to the new base and the
/// new incremental file and deletes what they replace. With the AOF off
/// it writes only the base, and the manifest names it alone when it is
/// complete.
///
/// Errors: what failed; the manifest then still describes the data.
pub fn rewrite_background(srv: &mut Server, host: &mut dyn Host) -> Result<(), String> {
    if srv.aof.on && srv.aof.file.is_none() && !srv.aof.wait_rewrite {
        return rewrite(srv, host);
    }
    if srv.bgsave.is_some() {
        return Err("Background append only file rewriting already in progress".into());
    }
    log(srv).notice(&format!("Background append only file rewriting started by pid {}", std::process::id()));
    if create_dir(srv).is_err() {
        return Err("Can't open or create append-only dir".into());
    }
    let dir = aof_dir(srv);
    let fname = file_name(srv);
    let mut m = srv.aof.manifest.clone();
    // With the AOF on, writes from now on go to a new incremental file;
    // with it off (BGREWRITEAOF still writes a base, as Redis does) there
    // is none. The first rewrite of an AOF just turned on writes them to a
    // temporary one, which becomes the incremental file when the base is
    // complete (the manifest must not name an incremental file without
    // the base that precedes it).
    if srv.aof.wait_rewrite {
        let name = temp_incr_name(&fname);
        let f = create_aof_file(&dir, &name)?;
        log(srv).notice(&format!("Creating AOF incr file {name} on background rewrite"));
        srv.aof.file = Some(f);
        srv.aof.unsynced = false;
        start(srv);
    } else if srv.aof.on {
        flush(srv);
        if let Some(f) = srv.aof.file.as_ref() {
            let _ = f.sync_data();
        }
        let (f, incr) = new_incr_file(&mut m, &dir, &fname)?;
        if persist_manifest(srv, &m).is_err() {
            let _ = fs::remove_file(dir.join(&incr));
            return Err("Error persisting the AOF manifest".into());
        }
        log(srv).notice(&format!("Creating AOF incr file {incr} on background rewrite"));
        srv.aof.file = Some(f);
        srv.aof.unsynced = false;
        srv.aof.manifest = m.clone();
        start(srv);
    }
    let base = m.new_base(&fname, srv.config.flag("aof-use-rdb-preamble"));
    if let Err(e) = crate::persist::aof_base_start(srv, host, dir.join(&base)) {
        if srv.aof.wait_rewrite {
            let _ = fs::remove_file(dir.join(temp_incr_name(&fname)));
            srv.aof.file = None;
            srv.aof.pending.borrow_mut().buf.clear();
        }
        rewrite_ended(srv, Err(e.clone()));
        return Err(e);
    }
    srv.aof.rewrite_base = Some(base);
    srv.aof.rewrite_started = Some(Instant::now());
    Ok(())
}

/// Adds a new incremental file to `m` and creates it, empty, in `dir`.
///
/// Errors: it could not be created, in Redis's words.
fn new_incr_file(m: &mut Manifest, dir: &Path, fname: &str) -> Result<(File, String), String> {
    let name = m.new_incr(fname);
    let f = create_aof_file(dir, &name)?;
    Ok((f, name))
}

/// Creates (or empties) the AOF file `name` in `dir`.
///
/// Errors: it could not be created, in Redis's words.
fn create_aof_file(dir: &Path, name: &str) -> Result<File, String> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join(name))
        .map_err(|e| format!("Can't open the append-only file {name}: {}", errno_text(&e)))
}

/// Takes the end of a background rewrite's base, if it came: switches
/// the manifest to the new base and the newest incremental file, deletes
/// what they replace, and logs and counts it as Redis does.
pub fn rewrite_poll(srv: &mut Server) {
    let Some(outcome) = srv.aof_base_done.take() else { return };
    let Some(base) = srv.aof.rewrite_base.take() else { return };
    let dir = aof_dir(srv);
    let fname = file_name(srv);
    let wait_rewrite = srv.aof.wait_rewrite;
    let result = outcome.and_then(|_| {
        let mut m = srv.aof.manifest.clone();
        // The base's form (RDB image or commands) is the one it started
        // with, whatever aof-use-rdb-preamble says now.
        if m.new_base(&fname, base.ends_with(".rdb")) != base {
            return Err("the AOF changed during the rewrite".to_string());
        }
        if wait_rewrite {
            // The writes made since the start become the first incremental
            // file; incremental files of an earlier time the AOF was on are
            // history (the base holds them).
            let temp = temp_incr_name(&fname);
            let incr = m.new_incr(&fname);
            fs::rename(dir.join(&temp), dir.join(&incr)).map_err(|e| format!("Error trying to rename the temporary AOF incr file {temp} into {incr}: {}", errno_text(&e)))?;
            log(srv).notice(&format!("Successfully renamed the temporary AOF incr file {temp} into {incr}"));
            m.retire_incr(1);
        } else {
            // The AOF is on now if and only if it was at the start (turning
            // it off or on ends a running rewrite): then the newest
            // incremental file, made at the start, stays.
            m.retire_incr(usize::from(srv.aof.on));
        }
        persist_manifest(srv, &m).map_err(|_| "Error persisting the AOF manifest".to_string())?;
        for h in std::mem::take(&mut m.history) {
            log(srv).notice(&format!("Removing the history file {} in the background", h.name));
            let _ = fs::remove_file(dir.join(&h.name));
        }
        let _ = persist_manifest(srv, &m);
        srv.aof.manifest = m;
        let base_size = file_size(&dir.join(&base));
        let incr_size = srv.aof.manifest.incr.last().map_or(0, |e| file_size(&dir.join(&e.name)));
        srv.aof.base_size = base_size;
        srv.aof.current_size = base_size + incr_size;
        Ok(())
    });
    if result.is_err() {
        let _ = fs::remove_file(dir.join(&base));
    }
    let ok = result.is_ok();
    rewrite_ended(srv, result);
    if wait_rewrite && srv.aof.on {
        if ok {
            srv.aof.wait_rewrite = false;
            srv.repl.fsynced = srv.aof.synced_off;
        } else {
            // The writes of the failed attempt go with its temporary file;
            // the next attempt starts from a new snapshot, as Redis retries.
            let temp = temp_incr_name(&fname);
            log(srv).notice(&format!("Removing the temp incr aof file {temp} in the background"));
            let _ = fs::remove_file(dir.join(&temp));
            srv.aof.file = None;
            srv.aof.pending.borrow_mut().buf.clear();
            srv.aof.rewrite_scheduled = true;
        }
    }
}

/// Counts and logs the end of a rewrite.
fn rewrite_ended(srv: &mut Server, result: Result<(), String>) {
    srv.aof.last_rewrite_secs = srv.aof.rewrite_started.take().map_or(0, |t| t.elapsed().as_secs() as i64);
    let l = log(srv);
    match result {
        Ok(()) => {
            srv.aof.rewrites += 1;
            srv.aof.rewrite_failures = 0;
            srv.aof.last_rewrite_ok = true;
            l.notice("Background AOF rewrite terminated with success");
            l.notice("Background AOF rewrite finished successfully");
        }
        Err(e) => {
            srv.aof.rewrite_failures += 1;
            srv.aof.last_rewrite_ok = false;
            // Empty when the caller logs the reason itself.
            if !e.is_empty() {
                l.warning(&e);
            }
            l.warning("Background AOF rewrite terminated with error");
        }
    }
}

/// A rewrite on this thread: a new base from the dataset, a new
/// incremental file when the AOF is on, the manifest switched to them, the
/// files they replace deleted. For an AOF on without an open file (the
/// new files must be complete before the manifest names them).
///
/// Errors: what failed; nothing of the manifest changed then.
pub fn rewrite(srv: &mut Server, host: &mut dyn Host) -> Result<(), String> {
    log(srv).notice(&format!("Background append only file rewriting started by pid {}", std::process::id()));
    srv.aof.rewrite_started = Some(Instant::now());
    flush(srv);
    let result = rewrite_files(srv, host);
    if result.is_ok() && srv.aof.wait_rewrite {
        srv.aof.wait_rewrite = false;
        srv.repl.fsynced = srv.aof.synced_off;
    }
    rewrite_ended(srv, result.clone().map_err(|_| String::new()));
    result
}

fn rewrite_files(srv: &mut Server, host: &mut dyn Host) -> Result<(), String> {
    if create_dir(srv).is_err() {
        return Err("Can't open or create append-only dir".into());
    }
    let dir = aof_dir(srv);
    let fname = file_name(srv);
    let mut m = srv.aof.manifest.clone();
    let mut new_file = None;
    if srv.aof.on {
        let (f, name) = new_incr_file(&mut m, &dir, &fname)?;
        log(srv).notice(&format!("Creating AOF incr file {name} on background rewrite"));
        new_file = Some((f, name));
    }
    let base = m.new_base(&fname, srv.config.flag("aof-use-rdb-preamble"));
    let base_path = dir.join(&base);
    let undo = |name: &Option<(File, String)>| {
        if let Some((_, n)) = name {
            let _ = fs::remove_file(dir.join(n));
        }
    };
    if let Err(e) = write_base(srv, host, &base_path) {
        undo(&new_file);
        return Err(e);
    }
    m.retire_incr(usize::from(new_file.is_some()));
    if persist_manifest(srv, &m).is_err() {
        undo(&new_file);
        let _ = fs::remove_file(&base_path);
        return Err("Error persisting the AOF manifest".into());
    }
    // From here the new files are the AOF.
    let base_size = file_size(&base_path);
    srv.aof.base_size = base_size;
    srv.aof.current_size = base_size;
    if let Some((f, _)) = new_file {
        srv.aof.file = Some(f);
        srv.aof.unsynced = false;
        start(srv);
    }
    for h in std::mem::take(&mut m.history) {
        log(srv).notice(&format!("Removing the history file {} in the background", h.name));
        let _ = fs::remove_file(dir.join(&h.name));
    }
    let _ = persist_manifest(srv, &m);
    srv.aof.manifest = m;
    Ok(())
}

/// Writes a base file at `path` (under a temporary name first): the RDB
/// image with aof-use-rdb-preamble yes, else one command per key.
///
/// Errors: what failed, in Redis's words where it has them.
pub fn write_base(srv: &mut Server, host: &mut dyn Host, path: &Path) -> Result<(), String> {
    let tmp = path.with_file_name(format!("temp-rewriteaof-{}.aof", std::process::id()));
    let result = if srv.config.flag("aof-use-rdb-preamble") {
        crate::persist::write_image(srv, host, &tmp, true)
    } else {
        write_commands(srv, host, &tmp)
    };
    let result = result.and_then(|()| fs::rename(&tmp, path).map_err(|e| format!("Error moving temp append only file on the final destination: {}", errno_text(&e))));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A base of commands: function libraries (FUNCTION LOAD), then for each
/// database a SELECT and one RESTORE per key carrying its absolute TTL.
fn write_commands(srv: &Server, host: &mut dyn Host, tmp: &Path) -> Result<(), String> {
    let now = unix_ms();
    let mut out = Vec::new();
    if srv.config.flag("aof-timestamp-enabled") {
        out.extend_from_slice(format!("#TS:{}\r\n", now / 1000).as_bytes());
    }
    for code in host.scripts_ref().function_codes() {
        crate::aofcore::reader::encode(&[b"FUNCTION".to_vec(), b"LOAD".to_vec(), code], &mut out);
    }
    for (i, db) in srv.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        crate::aofcore::reader::encode(&[b"SELECT".to_vec(), i.to_string().into_bytes()], &mut out);
        db.for_each(|k, v, exp| {
            if exp.is_some_and(|e| e <= now) {
                return;
            }
            crate::aofcore::reader::encode_restore(k, &storage::rdb::dump_payload(v, now), exp, &mut out);
        });
    }
    let mut f = File::create(tmp).map_err(|e| format!("Opening the temp file for AOF rewrite in rewriteAppendOnlyFile(): {}", errno_text(&e)))?;
    f.write_all(&out).and_then(|()| f.sync_all()).map_err(|e| format!("Write error writing append only file on disk: {}", errno_text(&e)))
}

/// DEBUG LOADAOF: writes what is buffered, empties the dataset and loads
/// it back from the AOF files.
///
/// Errors: Redis's reply text; the reason is logged.
pub fn debug_loadaof(srv: &mut Server, host: &mut dyn Host) -> Result<(), String> {
    if srv.aof.on {
        flush(srv);
        if let Some(f) = srv.aof.file.as_ref() {
            let _ = f.sync_data();
        }
    }
    for db in &mut srv.dbs {
        db.clear();
    }
    let m = read_manifest(srv).map_err(|_| "Error trying to load the AOF files, check server logs.".to_string())?;
    // Redis deletes leftover history files here.
    let dir = aof_dir(srv);
    let mut m2 = m.clone();
    if !m2.history.is_empty() && !srv.config.flag("aof-disable-auto-gc") {
        for h in std::mem::take(&mut m2.history) {
            log(srv).notice(&format!("Removing the history file {} in the background", h.name));
            let _ = fs::remove_file(dir.join(&h.name));
        }
        let _ = persist_manifest(srv, &m2);
    }
    match load::load_files(srv, host, &m2, true) {
        Err(Logged) => Err("Error trying to load the AOF files, check server logs.".into()),
        Ok(_) => {
            srv.aof.manifest = m2;
            log(srv).notice("Append Only File loaded by DEBUG LOADAOF");
            Ok(())
        }
    }
}

/// INFO persistence's AOF lines, as Redis 7 prints them.
pub fn info(srv: &Server) -> Vec<(&'static str, String)> {
    let a = &srv.aof;
    let mut v: Vec<(&'static str, String)> = vec![
        ("aof_enabled", u8::from(a.on).to_string()),
        ("aof_rewrite_in_progress", u8::from(rewrite_running(srv)).to_string()),
        ("aof_rewrite_scheduled", u8::from(a.rewrite_scheduled).to_string()),
        ("aof_last_rewrite_time_sec", a.last_rewrite_secs.to_string()),
        ("aof_current_rewrite_time_sec", a.rewrite_started.map_or(-1, |t| t.elapsed().as_secs() as i64).to_string()),
        ("aof_last_bgrewrite_status", if a.last_rewrite_ok { "ok" } else { "err" }.into()),
        ("aof_rewrites", a.rewrites.to_string()),
        ("aof_rewrites_consecutive_failures", a.rewrite_failures.to_string()),
        ("aof_last_write_status", if a.last_write_ok && !a.syncer.as_ref().is_some_and(Syncer::failed) { "ok" } else { "err" }.into()),
        ("aof_last_cow_size", "0".into()),
        ("module_fork_in_progress", "0".into()),
        ("module_fork_last_cow_size", "0".into()),
    ];
    if srv.config.flag("appendonly") {
        v.push(("aof_current_size", a.current_size.to_string()));
        v.push(("aof_base_size", a.base_size.to_string()));
        v.push(("aof_pending_rewrite", u8::from(a.rewrite_scheduled).to_string()));
        v.push(("aof_buffer_length", a.buffered().to_string()));
        v.push(("aof_pending_bio_fsync", u8::from(a.syncer.as_ref().is_some_and(Syncer::busy)).to_string()));
        v.push(("aof_delayed_fsync", "0".into()));
    }
    v
}
