//! DUMP and RESTORE: a key's value as a Redis-format payload (RDB value,
//! RDB version, CRC-64), so values move between densekv and Redis in both
//! directions. The codec itself is `storage::rdb`.

use storage::rdb::{self, Shapes};
use storage::Ttl;

use super::flags::*;
use super::{arg_i64, is, keys, spec, CmdError, CmdResult, Ctx, Spec};

/// The command table entries.
pub fn table() -> Vec<Spec> {
    let g = "generic";
    vec![
        spec("dump", 2, READONLY, keys(1, 1, 1), dump).acl(&["keyspace", "read", "slow"]).group(g).doc("Returns a serialized representation of the value stored at a key.", "2.6.0"),
        spec("restore", -4, WRITE | DENYOOM, keys(1, 1, 1), restore).acl(&["keyspace", "write", "slow", "dangerous"]).group(g).doc("Creates a key from the serialized representation of a value.", "2.6.0"),
    ]
}

/// DUMP key
pub fn dump(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    match ctx.db().get(&args[1], now).map(|v| rdb::dump_payload(v, now)) {
        Some(p) => ctx.out().bulk(&p),
        None => ctx.out().null(),
    }
    Ok(())
}

/// The encoding limits loaded values are shaped by, from the live config.
fn shapes(ctx: &Ctx) -> Shapes {
    Shapes {
        hash: super::hash::cfg(ctx),
        list: super::list::config(ctx),
        set: super::set::config(ctx),
        zset: super::zset::zcfg(ctx),
    }
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
///
/// Checks run in Redis's order: options, then an existing key (BUSYKEY),
/// then the TTL, then the payload. FREQ is validated but not kept: densekv
/// keeps no per-key LFU counter.
pub fn restore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, None, None);
    let mut i = 4;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "absttl") {
            absttl = true;
        } else if is(&args[i], "idletime") && more && freq.is_none() {
            let v = arg_i64(&args[i + 1])?;
            if v < 0 {
                return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            i += 1;
        } else if is(&args[i], "freq") && more && idle.is_none() {
            let v = arg_i64(&args[i + 1])?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(v);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let key = &args[1];
    let now = ctx.now;
    if !replace && ctx.db().contains(key, now) {
        return Err(CmdError::Custom("BUSYKEY Target key name already exists.".into()));
    }
    let ttl = arg_i64(&args[2])?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let body = rdb::verify_payload(&args[3], true).map_err(|_| CmdError::err("DUMP payload version or checksum are wrong"))?;
    let value = rdb::restore_value(body, &shapes(ctx), now).map_err(|_| CmdError::err("Bad data format"))?;
    let deadline = match ttl {
        0 => None,
        t if absttl => Some(t),
        t => Some(t.saturating_add(now)),
    };
    let db = ctx.db();
    let deleted = replace && db.remove(key, now).is_some();
    if deadline.is_some_and(|t| t <= now) {
        // Already expired: nothing is created (an old key was still replaced).
        if deleted {
            ctx.key_modified(key);
        }
        ctx.out().ok();
        return Ok(());
    }
    db.insert(key, value, deadline.map_or(Ttl::Clear, Ttl::At), now);
    if let Some(secs) = idle {
        db.set_idle_secs(key, secs, now);
    }
    ctx.key_modified(key);
    ctx.out().ok();
    Ok(())
}
