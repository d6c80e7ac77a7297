//! Replaying the AOF files into the databases: an RDB base (or preamble)
//! through the RDB loader, commands through the command table with a fake
//! client, MULTI/EXEC honoured, as Redis's loader does.
//!
//! A file that ends in the middle of a command (or of a transaction) is
//! truncated to its last complete command and loaded when
//! aof-load-truncated is yes and it is the last file, refused otherwise;
//! bytes that are not a command are refused. Refusals are logged with
//! Redis's lines plus one naming the offset; the server then exits, so
//! nothing is kept half-loaded.

use std::fs;
use std::time::Instant;

use storage::rdb::{self, LoadOptions};

use crate::aofcore::manifest::Manifest;
use crate::aofcore::reader::{Item, ReadError, Reader};
use super::files::{aof_dir, file_name, log, Logged};
use crate::client::{Client, ClientId};
use crate::command::Host;
use crate::exec::{self, Lookup};
use crate::server::{unix_ms, Server};

/// The fake client's id (Redis's CLIENT_ID_AOF).
const AOF_CLIENT: ClientId = ClientId::MAX;

/// How one file went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Empty,
    Truncated,
    Failed,
}

/// Loads the manifest's base and incremental files in order. Returns
/// None when the manifest names no file, Some(total bytes) otherwise.
/// While loading, the write stream is set aside so replayed commands are
/// not logged again, and due keys read as live.
///
/// Errors: a file is missing, corrupt, or truncated where that is not
/// allowed (logged).
pub fn load_files(srv: &mut Server, host: &mut dyn Host, m: &Manifest, debug: bool) -> Result<Option<u64>, Logged> {
    let files: Vec<_> = m.load_order().cloned().collect();
    if files.is_empty() {
        return Ok(None);
    }
    let dir = aof_dir(srv);
    let mut total = 0;
    for f in &files {
        match fs::metadata(dir.join(&f.name)) {
            Ok(md) => total += md.len(),
            Err(e) => {
                log(srv).warning(&format!("Unable to obtain the AOF file {} length. stat: {}", f.name, crate::config::strerror(&e)));
                return Err(Logged);
            }
        }
    }
    if total == 0 {
        return Ok(Some(0));
    }
    let feed = std::mem::take(&mut srv.feed);
    // Clients see the server loading (-LOADING, INFO loading:1) until the
    // last file is replayed, also while a slow script from the AOF lets
    // them in; at start-up they are served while the base loads.
    let loading_before = srv.persist.loading.replace(crate::server::Loading { start_secs: unix_ms() / 1000, total_bytes: total, loaded_bytes: 0, rdb_used_mem: 0 });
    // Nothing expires while the files replay, as in Redis: a key whose
    // PEXPIREAT is past keeps that deadline, later commands still find it
    // (an RPUSH appends to it), and expiry takes it once loaded.
    for db in &mut srv.dbs {
        db.ignore_deadlines = true;
    }
    let result = (|| {
        let n = files.len();
        for (i, f) in files.iter().enumerate() {
            let last = i + 1 == n;
            let started = Instant::now();
            let st = load_file(srv, host, &f.name, !debug);
            if st == Status::Ok || (st == Status::Truncated && last) {
                let what = if f.kind == crate::aofcore::manifest::Kind::Base { "base" } else { "incr" };
                log(srv).notice(&format!("DB loaded from {what} file {}: {:.3} seconds", f.name, started.elapsed().as_secs_f64()));
            }
            if st == Status::Truncated && !last {
                log(srv).warning("Fatal error: the truncated file is not the last file");
                return Err(Logged);
            }
            if st == Status::Failed {
                return Err(Logged);
            }
        }
        Ok(())
    })();
    for db in &mut srv.dbs {
        db.ignore_deadlines = false;
    }
    srv.feed = feed;
    srv.persist.loading = loading_before;
    if result.is_err() {
        for db in &mut srv.dbs {
            db.clear();
        }
        return Err(Logged);
    }
    srv.aof.current_size = total;
    srv.aof.base_size = m.base.as_ref().and_then(|b| fs::metadata(dir.join(&b.name)).ok()).map_or(0, |md| md.len());
    srv.persist.dirty_at_save = srv.dirty;
    Ok(Some(total))
}

/// Loads one file of the AOF; `serve`: clients are served while its RDB
/// part loads (start-up only: DEBUG LOADAOF runs inside a command).
fn load_file(srv: &mut Server, host: &mut dyn Host, name: &str, serve: bool) -> Status {
    let path = aof_dir(srv).join(name);
    let l = log(srv);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            l.warning(&format!("The append log file {name} doesn't exist: {}", crate::config::strerror(&e)));
            return Status::Failed;
        }
        Err(e) => {
            l.warning(&format!("Fatal error: can't open the append log file {name} for reading: {}", crate::config::strerror(&e)));
            return Status::Failed;
        }
    };
    if bytes.is_empty() {
        return Status::Empty;
    }
    let mut start = 0;
    if bytes.starts_with(b"REDIS") {
        let old_style = name == file_name(srv);
        l.notice(if old_style { "Reading RDB preamble from AOF file..." } else { "Reading RDB base file on AOF loading..." });
        // A preamble's keys are kept even if expired, as Redis does: the
        // commands after it may touch them.
        let opts = LoadOptions { shapes: srv.config.shapes(), now: i64::MIN, verify_checksum: srv.config.flag("rdbchecksum"), keep_expired: false, publish_thread: Some(crate::memory::publish_thread) };
        // Served only when the base comes first, into empty databases.
        let result = if serve && srv.dbs.iter().all(|d| d.is_empty()) {
            match crate::persist::load_aside(srv, host, &bytes, &opts) {
                Ok(r) => r,
                Err(_) => {
                    l.warning(&format!("Loading of {name} interrupted by a shutdown"));
                    return Status::Failed;
                }
            }
        } else {
            rdb::load_into(&bytes, &mut srv.dbs, &opts)
        };
        match result {
            Ok(loaded) => {
                if let Err(e) = host.scripts().load_functions(loaded.functions) {
                    l.warning(&format!("Failed loading the functions of {name}: {e}"));
                    return Status::Failed;
                }
                start = loaded.summary.end;
                if old_style {
                    l.notice("Reading the remaining AOF tail...");
                }
            }
            Err(e) => {
                l.warning(&format!("{e} ({name})"));
                l.warning(&if old_style {
                    format!("Error reading the RDB preamble of the AOF file {name}, AOF loading aborted")
                } else {
                    format!("Error reading the RDB base file {name}, AOF loading aborted")
                });
                return Status::Failed;
            }
        }
    }
    replay(srv, host, name, &path, &bytes, start, serve)
}

/// Replays an AOF image held in memory (an optional RDB preamble, then
/// commands), running only the commands `allow` lets through: the AOF
/// fuzz target's entry. Nothing is truncated or written.
///
/// Errors: why the image was refused.
pub fn replay_image(srv: &mut Server, host: &mut dyn Host, bytes: &[u8], allow: &dyn Fn(&[Vec<u8>]) -> bool) -> Result<(), String> {
    let mut start = 0;
    if bytes.starts_with(b"REDIS") {
        let opts = LoadOptions { shapes: srv.config.shapes(), now: i64::MIN, verify_checksum: true, keep_expired: false, publish_thread: Some(crate::memory::publish_thread) };
        let loaded = rdb::load_into(bytes, &mut srv.dbs, &opts).map_err(|e| e.to_string())?;
        start = loaded.summary.end;
    }
    match run_commands(srv, host, "image", bytes, start, allow, false) {
        Ran::Done => Ok(()),
        Ran::Failed => Err("refused".into()),
        Ran::Truncated(at) => Err(format!("truncated after offset {at}")),
    }
}

/// How the command part went.
enum Ran {
    Done,
    Failed,
    /// Ended inside a command or transaction; the last good offset.
    Truncated(usize),
}

/// Runs the command part of a file from `start`; a truncated tail is cut
/// off the file when aof-load-truncated allows it.
fn replay(srv: &mut Server, host: &mut dyn Host, name: &str, path: &std::path::Path, bytes: &[u8], start: usize, serve: bool) -> Status {
    let l = log(srv);
    let valid_up_to = match run_commands(srv, host, name, bytes, start, &|_| true, serve) {
        Ran::Done => return Status::Ok,
        Ran::Failed => return Status::Failed,
        Ran::Truncated(at) => at,
    };
    if srv.config.flag("aof-load-truncated") {
        l.warning(&format!("!!! Warning: short read while loading the AOF file {name}!!!"));
        l.warning(&format!("!!! Truncating the AOF {name} at offset {valid_up_to} !!!"));
        let cut = fs::OpenOptions::new().write(true).open(path).and_then(|f| f.set_len(valid_up_to as u64));
        match cut {
            Ok(()) => {
                // The incremental file appended to afterwards is opened in
                // append mode, so it goes on at the new end.
                l.warning(&format!("AOF {name} loaded anyway because aof-load-truncated is enabled"));
                return Status::Truncated;
            }
            Err(e) => l.warning(&format!("Error truncating the AOF file {name}: {}", crate::config::strerror(&e))),
        }
    }
    l.warning(&format!(
        "Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
    ));
    Status::Failed
}

/// Runs commands from `start` with a fake client (those `allow` refuses
/// are skipped), queueing inside MULTI as Redis's loader does. With
/// `serve`, clients are served every `loading-process-events-interval-bytes`
/// (they get -LOADING but for INFO, CONFIG and the like) and
/// `key-load-delay` slows each command, for tests, as in an RDB load.
fn run_commands(srv: &mut Server, host: &mut dyn Host, name: &str, bytes: &[u8], start: usize, allow: &dyn Fn(&[Vec<u8>]) -> bool, serve: bool) -> Ran {
    let l = log(srv);
    let interval = srv.config.get("loading-process-events-interval-bytes").and_then(|v| v.parse::<usize>().ok()).unwrap_or(2 << 20).max(1);
    let delay: i64 = if serve { srv.config.get("key-load-delay").and_then(|v| v.parse().ok()).unwrap_or(0) } else { 0 };
    let mut next_serve = start + interval;
    let table = host.table().clone();
    let mut c = Client::new(AOF_CLIENT, None, String::new(), String::new());
    let mut r = Reader::new(bytes, start);
    let mut valid_up_to = start;
    let mut valid_before_multi = start;
    let bad_format = |l: &crate::log::Log| {
        l.warning(&format!(
            "Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"
        ));
        Ran::Failed
    };
    loop {
        let at = r.pos();
        if serve && at >= next_serve && c.multi.is_none() {
            next_serve = at + interval;
            if let Some(ld) = srv.persist.loading.as_mut() {
                ld.loaded_bytes = at as u64;
            }
            if !host.serve_while_loading(srv) {
                l.warning(&format!("Loading of {name} interrupted by a shutdown"));
                return Ran::Failed;
            }
        }
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay as u64));
        }
        let argv = match r.next_item() {
            Ok(None) => {
                if c.multi.is_some() {
                    l.warning(&format!("Revert incomplete MULTI/EXEC transaction in AOF file {name}"));
                    return Ran::Truncated(valid_before_multi);
                }
                return Ran::Done;
            }
            Ok(Some(Item::Annotation(_))) => continue,
            Ok(Some(Item::Command(argv))) => argv,
            Err(ReadError::Truncated) => return Ran::Truncated(valid_up_to),
            Err(ReadError::Format) => {
                l.warning(&format!("AOF {name}: not a command at offset {at}"));
                return bad_format(&l);
            }
        };
        let spec = match exec::lookup(&table, &argv) {
            Lookup::Found(s) => s,
            Lookup::Unknown(_) => {
                l.warning(&format!("Unknown command '{}' reading the append only file {name}", String::from_utf8_lossy(&argv[0])));
                return Ran::Failed;
            }
            Lookup::BadArity(_) => {
                l.warning(&format!("Wrong number of arguments for '{}' at offset {at} of the append only file {name}", String::from_utf8_lossy(&argv[0])));
                return bad_format(&l);
            }
        };
        if !allow(&argv) {
            valid_up_to = r.pos();
            continue;
        }
        if spec.full_name == "multi" {
            valid_before_multi = valid_up_to;
        }
        if let Some(q) = c.multi.as_mut().filter(|_| spec.full_name != "exec") {
            q.push(argv);
        } else {
            exec::run(srv, host, &mut c, spec, &argv, unix_ms(), Instant::now());
            if let Some(err) = c.reply.buf.strip_prefix(b"-") {
                let err = crate::log::first_line(err);
                srv.unexpected_error(crate::server::ErrorTo::AofLoader, &err, spec.full_name);
            }
            if c.blocked {
                // A blocking command that found nothing: as if timed out.
                srv.blocking.forget(c.id);
                c.blocked = false;
            }
            srv.aof.loaded_commands += 1;
        }
        c.reply.buf.clear();
        c.sent = 0;
        valid_up_to = r.pos();
    }
}
