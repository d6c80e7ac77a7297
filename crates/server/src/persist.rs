//! RDB files on disk: SAVE's synchronous dump, loading at start-up and
//! DEBUG RELOAD. The format itself (`storage::rdb`) knows nothing of
//! files, configuration or the scripting engine; this layer decides where
//! the file goes (`dir` + `dbfilename`), writes it so that a crash never
//! leaves a half-written file under the real name (a temp file, fsync,
//! rename, as Redis does), and carries function libraries through the
//! scripting engine that `Host` lends.
//!
//! Not here yet: BGSAVE (without fork, on the keyspace's incremental
//! snapshots) and save points. The AOF (`aof/`) writes its RDB base
//! through `write_image`.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::PathBuf;

use storage::rdb::{self, LoadOptions, RdbWriter, WriteOptions};

use crate::command::Host;
use crate::server::{unix_ms, Server};

/// The RDB file's path: `dir` joined with `dbfilename`.
pub fn rdb_path(srv: &Server) -> PathBuf {
    let dir = srv.config.get("dir").filter(|d| !d.is_empty()).unwrap_or(".");
    PathBuf::from(dir).join(srv.config.get("dbfilename").unwrap_or("dump.rdb"))
}

/// Writes every database and the function libraries to the RDB file, on
/// this thread (SAVE, SHUTDOWN's final save). The file is written under a
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
    p.last_save_ok = result.is_ok();
    if result.is_ok() {
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
    // The lowest version every value fits in, so Redis 7.0 loads the file
    // unless the data needs a newer layout (hash field TTLs, say).
    let mut values = 0u16;
    for db in &srv.dbs {
        db.for_each(|_, v, _| values = values.max(rdb::value_version(v)));
    }
    let version = rdb::min_file_version(values, !codes.is_empty());
    let opts = WriteOptions { compression: srv.config.flag("rdbcompression"), checksum: srv.config.flag("rdbchecksum") };
    let file = File::create(tmp).map_err(|e| format!("Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}", tmp.display(), cwd()))?;
    let mut w = RdbWriter::new(BufWriter::with_capacity(1 << 20, file), version, opts).map_err(|e| e.to_string())?;
    w.standard_aux(crate::REDIS_VERSION, now / 1000, crate::memory::allocated(), aof_base).map_err(|e| e.to_string())?;
    if !codes.is_empty() {
        w.functions(codes.iter().map(|c| c.as_slice())).map_err(|e| e.to_string())?;
    }
    for (i, db) in srv.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        w.select_db(i as u64, db.len() as u64, db.volatile_len() as u64).map_err(|e| e.to_string())?;
        let mut failed = None;
        db.for_each(|k, v, exp| {
            if failed.is_none() {
                if let Err(e) = w.entry(k, v, exp, now) {
                    failed = Some(e.to_string());
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
    }
    let (buf, _) = w.finish().map_err(|e| e.to_string())?;
    let file = buf.into_inner().map_err(|e| format!("write: {}", e.error()))?;
    file.sync_all().map_err(|e| format!("fsync: {e}"))?;
    Ok(())
}

fn cwd() -> String {
    std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()
}

/// Loads the RDB file into the (empty) databases and the function
/// libraries into the engine: Some((keys loaded, keys skipped as
/// expired)), or None when there is no file.
///
/// Errors: the file's name and the offset and reason it was refused at;
/// nothing is kept of a file that fails (the databases are emptied).
pub fn load(srv: &mut Server, host: &mut dyn Host) -> Result<Option<(u64, u64)>, String> {
    let path = rdb_path(srv);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("Fatal error loading the DB, check server logs. {}: {e}", path.display())),
    };
    let opts = LoadOptions { shapes: srv.config.shapes(), now: unix_ms(), verify_checksum: srv.config.flag("rdbchecksum") };
    let loaded = match rdb::load_into(&bytes, &mut srv.dbs, &opts) {
        Ok(l) => l,
        Err(e) => {
            for db in &mut srv.dbs {
                db.clear();
            }
            return Err(format!("{} ({})", e, path.display()));
        }
    };
    host.scripts().load_functions(loaded.functions).map_err(|e| format!("{} ({}): {e}", "loading functions", path.display()))?;
    let (keys, expired) = (loaded.inserted, loaded.expired_skipped);
    (srv.persist.last_load_keys, srv.persist.last_load_expired) = (keys, expired);
    srv.persist.dirty_at_save = srv.dirty;
    Ok(Some((keys, expired)))
}
