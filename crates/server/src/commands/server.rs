//! Server commands: DBSIZE FLUSHDB FLUSHALL CONFIG INFO DEBUG.

use super::flags::*;
use super::{container, is, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::memory;

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    vec![
        spec("dbsize", 1, READONLY | FAST, NO_KEYS, dbsize).acl(&["keyspace", "read", "fast"]).group("server").doc("Returns the number of keys in the database.", "1.0.0"),
        spec("flushdb", -1, WRITE, NO_KEYS, flushdb).acl(&["keyspace", "write", "slow", "dangerous"]).group("server").doc("Removes all keys from the current database.", "1.0.0"),
        spec("flushall", -1, WRITE, NO_KEYS, flushall).acl(&["keyspace", "write", "slow", "dangerous"]).group("server").doc("Removes all keys from all databases.", "1.0.0"),
        container(
            "config",
            vec![
                spec("get", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config_get).acl(&["admin", "slow", "dangerous"]).doc("Returns the effective values of configuration parameters.", "2.0.0"),
                spec("set", -4, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config_set).acl(&["admin", "slow", "dangerous"]).doc("Sets configuration parameters in-flight.", "2.0.0"),
            ],
        ),
        spec("info", -1, LOADING | STALE, NO_KEYS, info).acl(&["slow", "dangerous"]).group("server").doc("Returns information and statistics about the server.", "1.0.0"),
        container(
            "debug",
            vec![spec("set-active-expire", 3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, debug_set_active_expire).acl(&["admin", "slow", "dangerous"])],
        ),
    ]
}

/// DBSIZE
pub fn dbsize(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let n = ctx.db().len() as i64;
    ctx.out().int(n);
    Ok(())
}

fn flush_mode(args: &[Vec<u8>]) -> Result<(), CmdError> {
    match args.get(1) {
        None => Ok(()),
        Some(a) if args.len() == 2 && (is(a, "sync") || is(a, "async")) => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

/// FLUSHDB [ASYNC | SYNC]
pub fn flushdb(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    flush_mode(args)?;
    let db = ctx.client.db;
    ctx.srv.touch_all_watched(Some(db), ctx.client);
    ctx.srv.dbs[db].clear();
    ctx.srv.dirty += 1;
    ctx.out().ok();
    Ok(())
}

/// FLUSHALL [ASYNC | SYNC]
pub fn flushall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    flush_mode(args)?;
    ctx.srv.touch_all_watched(None, ctx.client);
    for db in ctx.srv.dbs.iter_mut() {
        db.clear();
    }
    ctx.srv.dirty += 1;
    ctx.out().ok();
    Ok(())
}

/// CONFIG GET parameter [parameter ...]
pub fn config_get(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut pairs: Vec<(&'static str, String)> = Vec::new();
    for pat in &args[2..] {
        for (n, v) in ctx.srv.config.matching(pat) {
            if !pairs.iter().any(|(m, _)| *m == n) {
                pairs.push((n, v));
            }
        }
    }
    let out = ctx.out();
    out.map(pairs.len());
    for (n, v) in pairs {
        out.bulk(n.as_bytes());
        out.bulk(v.as_bytes());
    }
    Ok(())
}

/// CONFIG SET parameter value [parameter value ...]; all or nothing.
pub fn config_set(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() % 2 != 0 {
        return Err(CmdError::Arity("config|set".into()));
    }
    let mut next = ctx.srv.config.clone();
    let mut seen = Vec::new();
    for pair in args[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_string();
        let value = String::from_utf8_lossy(&pair[1]).to_string();
        let canon = crate::config::lookup(&name).map(|p| p.name);
        if let Some(c) = canon {
            if seen.contains(&c) {
                return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter")));
            }
            seen.push(c);
        }
        next.set(&name, &value, false).map_err(|e| {
            if canon.is_none() {
                CmdError::err(format!("Unknown option or number of arguments for CONFIG SET - '{name}'"))
            } else {
                CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {e}"))
            }
        })?;
    }
    ctx.srv.config = next;
    ctx.out().ok();
    Ok(())
}

/// INFO [section ...]
pub fn info(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let mut s = String::new();
    s.push_str("# Server\r\n");
    s.push_str(&format!("redis_version:{}\r\n", crate::REDIS_VERSION));
    s.push_str(&format!("densekv_version:{}\r\n", env!("CARGO_PKG_VERSION")));
    s.push_str(&format!("process_id:{}\r\n", ctx.srv.pid));
    s.push_str(&format!("tcp_port:{}\r\n", ctx.srv.config.port));
    s.push_str("\r\n# Memory\r\n");
    s.push_str(&format!("used_memory:{}\r\n", memory::allocated()));
    s.push_str(&format!("used_memory_rss:{}\r\n", memory::rss()));
    ctx.out().verbatim(s.as_bytes());
    Ok(())
}

/// DEBUG SET-ACTIVE-EXPIRE 0|1
pub fn debug_set_active_expire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ctx.srv.active_expire_enabled = args[2] != b"0";
    ctx.out().ok();
    Ok(())
}
