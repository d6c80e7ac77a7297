//! HASH commands, including per-field expiry (HEXPIRE family, Redis 7.4) and
//! Redis 8's HGETDEL / HGETEX / HSETEX.
//!
//! The structure (`storage::types::hash::Hash`) hides fields whose deadline
//! has passed; this file adds what Redis's commands do on top of that:
//! a command that names an expired field deletes it first (`expire_field`,
//! counted in INFO expired_subkeys), HLEN still counts expired fields not yet
//! reclaimed, and HRANDFIELD reclaims all of them before sampling. Active
//! reclaiming is the keyspace's field-expiry index, run from `cron.rs`.
//!
//! Every write ends in `written`: `Db::sync_object` re-registers the hash in
//! the field-expiry index or deletes the key when the hash is empty, then
//! `ctx.key_modified`. Writes compute their result before creating a key, so
//! an error never leaves an empty hash behind. Argument checks follow
//! Redis's order (key type, then time, then FIELDS/numfields), because
//! clients and the test suite see which error wins.

use crate::notify;
use resp::Reply;
use storage::types::hash::{ExpireCond, Hash};
use storage::{Db, StrRef, Value, ValueMut, ValueRef};

use crate::command::flags::*;
use crate::commands::string::db_and_out;
use crate::command::{arg_f64, arg_i64, is, keys, spec, CmdError, CmdResult, Ctx, Spec};

/// Largest field deadline Redis accepts from a command: 2^46 - 1 ms.
const MAX_FIELD_MS: i64 = (1 << 46) - 1;
/// A HRANDFIELD with a huge negative count stops (and the client is closed)
/// once its reply passes this size.
const MAX_SAMPLE_REPLY: usize = 1 << 30;

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    const RF: &[&str] = &["read", "hash", "fast"];
    const RS: &[&str] = &["read", "hash", "slow"];
    const WF: &[&str] = &["write", "hash", "fast"];
    let k1 = keys(1, 1, 1);
    let s = |name, arity, flags, h, acl, summary, since| spec(name, arity, flags, k1, h).acl(acl).group("hash").doc(summary, since);
    vec![
        s("hset", -4, WRITE | DENYOOM | FAST, hset, WF, "Creates or modifies the value of a field in a hash.", "2.0.0"),
        s("hsetnx", 4, WRITE | DENYOOM | FAST, hsetnx, WF, "Sets the value of a field in a hash only when the field doesn't exist.", "2.0.0"),
        s("hmset", -4, WRITE | DENYOOM | FAST, hset, WF, "Sets the values of multiple fields.", "2.0.0"),
        s("hget", 3, READONLY | FAST, hget, RF, "Returns the value of a field in a hash.", "2.0.0"),
        s("hmget", -3, READONLY | FAST, hmget, RF, "Returns the values of all fields in a hash.", "2.0.0"),
        s("hdel", -3, WRITE | FAST, hdel, WF, "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", "2.0.0"),
        s("hlen", 2, READONLY | FAST, hlen, RF, "Returns the number of fields in a hash.", "2.0.0"),
        s("hstrlen", 3, READONLY | FAST, hstrlen, RF, "Returns the length of the value of a field.", "3.2.0"),
        s("hexists", 3, READONLY | FAST, hexists, RF, "Determines whether a field exists in a hash.", "2.0.0"),
        s("hkeys", 2, READONLY, hkeys, RS, "Returns all fields in a hash.", "2.0.0"),
        s("hvals", 2, READONLY, hvals, RS, "Returns all values in a hash.", "2.0.0"),
        s("hgetall", 2, READONLY, hgetall, RS, "Returns all fields and values in a hash.", "2.0.0"),
        s("hincrby", 4, WRITE | DENYOOM | FAST, hincrby, WF, "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", "2.0.0"),
        s("hincrbyfloat", 4, WRITE | DENYOOM | FAST, hincrbyfloat, WF, "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", "2.6.0"),
        s("hrandfield", -2, READONLY, hrandfield, RS, "Returns one or more random fields from a hash.", "6.2.0"),
        s("hscan", -3, READONLY, hscan, RS, "Iterates over fields and values of a hash.", "2.8.0"),
        s("hexpire", -6, WRITE | DENYOOM | FAST, hexpire, WF, "Set expiry for hash field using relative time to expire (seconds)", "7.4.0"),
        s("hpexpire", -6, WRITE | DENYOOM | FAST, hpexpire, WF, "Set expiry for hash field using relative time to expire (milliseconds)", "7.4.0"),
        s("hexpireat", -6, WRITE | DENYOOM | FAST, hexpireat, WF, "Set expiry for hash field using an absolute Unix timestamp (seconds)", "7.4.0"),
        s("hpexpireat", -6, WRITE | DENYOOM | FAST, hpexpireat, WF, "Set expiry for hash field using an absolute Unix timestamp (milliseconds)", "7.4.0"),
        s("httl", -5, READONLY | FAST, httl, RF, "Returns the TTL in seconds of a hash field.", "7.4.0"),
        s("hpttl", -5, READONLY | FAST, hpttl, RF, "Returns the TTL in milliseconds of a hash field.", "7.4.0"),
        s("hexpiretime", -5, READONLY | FAST, hexpiretime, RF, "Returns the expiration time of a hash field as a Unix timestamp, in seconds.", "7.4.0"),
        s("hpexpiretime", -5, READONLY | FAST, hpexpiretime, RF, "Returns the expiration time of a hash field as a Unix timestamp, in msec.", "7.4.0"),
        s("hpersist", -5, WRITE | FAST, hpersist, WF, "Removes the expiration time for each specified field", "7.4.0"),
        s("hgetdel", -5, WRITE | FAST, hgetdel, WF, "Returns the value of a field and deletes it from the hash.", "8.0.0"),
        s("hgetex", -5, WRITE | FAST, hgetex, WF, "Get the value of one or more fields of a given hash key, and optionally set their expiration.", "8.0.0"),
        s("hsetex", -6, WRITE | DENYOOM | FAST, hsetex, WF, "Set the value of one or more fields of a given hash key, and optionally set their expiration.", "8.0.0"),
    ]
}

/// The hash at `key`: None if absent, WrongType if the key holds another type.
fn lookup<'a>(db: &'a mut Db, key: &[u8], now: i64) -> Result<Option<&'a Hash>, CmdError> {
    match db.get(key, now) {
        None => Ok(None),
        Some(ValueRef::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// Type check only: Ok(true) if `key` holds a hash, Ok(false) if absent.
fn check(ctx: &mut Ctx, key: &[u8]) -> Result<bool, CmdError> {
    let now = ctx.now;
    Ok(lookup(ctx.db(), key, now)?.is_some())
}

/// The hash at `key` for writing, created empty when absent. Callers have
/// checked the type first.
fn hash_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> &'a mut Hash {
    let now = ctx.now;
    match ctx.db().get_or_insert_with(key, now, || Value::Hash(Box::default())) {
        ValueMut::Hash(h) => h,
        _ => unreachable!("type checked by the caller"),
    }
}

/// Epilogue of every write to the hash at `key`: raises `event` (if any)
/// and `del` when the write emptied the hash. Returns true then.
fn written(ctx: &mut Ctx, key: &[u8], event: Option<&str>) -> bool {
    let gone = ctx.db().sync_object(key);
    ctx.key_modified(key);
    if let Some(e) = event {
        ctx.notify(notify::HASH, e, key);
    }
    if gone {
        ctx.notify(notify::GENERIC, "del", key);
    }
    gone
}

/// `hexpired` after lazy field expiry, then `del` if the hash went.
fn fields_expired(ctx: &mut Ctx, key: &[u8], gone: bool) {
    ctx.notify(notify::HASH, "hexpired", key);
    if gone {
        ctx.notify(notify::GENERIC, "del", key);
    }
}

/// Deletes `field` if it is stored but expired, as Redis does when a command
/// names it (and the key, if that empties the hash), raising `hexpired`;
/// checks the key's type on the way (one lookup for both).
fn expire_field(ctx: &mut Ctx, key: &[u8], field: &[u8]) -> Result<(), CmdError> {
    if let Some(gone) = expire_field_quiet(ctx, key, field)? {
        fields_expired(ctx, key, gone);
    }
    Ok(())
}

/// `expire_field` without the events: Some(key deleted) if the field was
/// expired.
fn expire_field_quiet(ctx: &mut Ctx, key: &[u8], field: &[u8]) -> Result<Option<bool>, CmdError> {
    let now = ctx.now;
    let db = ctx.db();
    let h = match db.get_mut(key, now) {
        None => return Ok(None),
        Some(ValueMut::Hash(h)) => h,
        Some(_) => return Err(CmdError::WrongType),
    };
    if matches!(h.expire_of(field, i64::MIN), Some(Some(d)) if d < now) {
        h.remove(field);
        let gone = db.sync_object(key);
        ctx.srv.expired_subkeys += 1;
        ctx.key_touched(key);
        return Ok(Some(gone));
    }
    Ok(None)
}

fn bulk_str(out: &mut Reply, v: StrRef) {
    match v {
        StrRef::Int(i) => out.bulk_i64(i),
        StrRef::Bytes(b) => out.bulk(b),
    }
}

/// Parses `FIELDS numfields field...` where `args[at]` should be FIELDS;
/// returns the fields. `bad_count` is the command's text for a numfields
/// that is not a positive integer.
fn fields_arg<'a>(args: &'a [Vec<u8>], at: usize, bad_count: &str) -> Result<&'a [Vec<u8>], CmdError> {
    if at >= args.len() || !is(&args[at], "fields") {
        return Err(CmdError::err("Mandatory argument FIELDS is missing or not at the right position"));
    }
    let n = args.get(at + 1).and_then(|a| resp::num::parse_i64(a)).filter(|&n| n >= 1).ok_or_else(|| CmdError::err(bad_count))?;
    let rest = &args[at + 2..];
    if usize::try_from(n).ok() != Some(rest.len()) {
        return Err(CmdError::err("The `numfields` parameter must match the number of arguments"));
    }
    Ok(rest)
}

const NUMFIELDS_POSITIVE: &str = "Number of fields must be a positive integer";

/// A field deadline from a command argument: `secs` scales by 1000, `base`
/// is added (now for relative forms, 0 for absolute ones). Errors as Redis.
fn parse_deadline(name: &str, arg: &[u8], secs: bool, base: i64) -> Result<i64, CmdError> {
    let v = arg_i64(arg)?;
    if v < 0 {
        return Err(CmdError::err("invalid expire time, must be >= 0"));
    }
    let bad = || CmdError::err(format!("invalid expire time in '{name}' command"));
    let ms = if secs {
        if v > MAX_FIELD_MS / 1000 {
            return Err(bad());
        }
        v * 1000
    } else {
        v
    };
    if ms > MAX_FIELD_MS - base {
        return Err(bad());
    }
    Ok(ms + base)
}

/// Lower-case command name for error texts.
fn name_of(args: &[Vec<u8>]) -> String {
    String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
}

/// HSET key field value [field value ...] / HMSET (replies OK).
pub fn hset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() % 2 == 1 {
        return Err(CmdError::Arity(name_of(args)));
    }
    let key = &args[1];
    check(ctx, key)?;
    let cfg = ctx.srv.config.hash;
    let h = hash_mut(ctx, key);
    let created = args[2..].chunks(2).filter(|p| h.insert(&p[0], &p[1], &cfg)).count();
    written(ctx, key, Some("hset"));
    if args[0][1].eq_ignore_ascii_case(&b's') {
        ctx.out().int(created as i64);
    } else {
        ctx.out().ok();
    }
    Ok(())
}

/// HSETNX key field value
pub fn hsetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, field) = (&args[1], &args[2]);
    let now = ctx.now;
    if check(ctx, key)? {
        expire_field(ctx, key, field)?;
        if lookup(ctx.db(), key, now)?.is_some_and(|h| h.contains(field, now)) {
            ctx.out().int(0);
            return Ok(());
        }
    }
    let cfg = ctx.srv.config.hash;
    hash_mut(ctx, key).insert(field, &args[3], &cfg);
    written(ctx, key, Some("hset"));
    ctx.out().int(1);
    Ok(())
}

/// HGET key field
pub fn hget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    expire_field(ctx, &args[1], &args[2])?;
    let (db, out) = db_and_out(ctx);
    match lookup(db, &args[1], now)?.and_then(|h| h.get(&args[2], now)) {
        Some(v) => bulk_str(out, v),
        None => out.null(),
    }
    Ok(())
}

/// HMGET key field [field ...]
pub fn hmget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    if check(ctx, &args[1])? {
        // One `hexpired` for the command, as Redis raises it.
        let (mut expired, mut gone) = (false, false);
        for f in &args[2..] {
            if let Some(g) = expire_field_quiet(ctx, &args[1], f)? {
                expired = true;
                gone |= g;
            }
        }
        if expired {
            fields_expired(ctx, &args[1], gone);
        }
    }
    let (db, out) = db_and_out(ctx);
    let h = lookup(db, &args[1], now)?;
    out.array(args.len() - 2);
    for f in &args[2..] {
        match h.and_then(|h| h.get(f, now)) {
            Some(v) => bulk_str(out, v),
            None => out.null(),
        }
    }
    Ok(())
}

/// HDEL key field [field ...]: expired fields not yet reclaimed count as
/// deleted, as in Redis.
pub fn hdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let mut n = 0;
    if check(ctx, key)? {
        let h = hash_mut(ctx, key);
        n = args[2..].iter().filter(|f| h.remove(f)).count();
        if n > 0 {
            written(ctx, key, Some("hdel"));
        }
    }
    ctx.out().int(n as i64);
    Ok(())
}

/// HLEN key: counts expired fields not yet reclaimed, as Redis does.
pub fn hlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let n = lookup(ctx.db(), &args[1], now)?.map_or(0, Hash::len);
    ctx.out().int(n as i64);
    Ok(())
}

/// HSTRLEN key field
pub fn hstrlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    expire_field(ctx, &args[1], &args[2])?;
    let n = lookup(ctx.db(), &args[1], now)?.and_then(|h| h.get(&args[2], now)).map_or(0, |v| v.len());
    ctx.out().int(n as i64);
    Ok(())
}

/// HEXISTS key field
pub fn hexists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    expire_field(ctx, &args[1], &args[2])?;
    let found = lookup(ctx.db(), &args[1], now)?.is_some_and(|h| h.contains(&args[2], now));
    ctx.out().int(i64::from(found));
    Ok(())
}

/// HKEYS / HVALS / HGETALL: live fields, values or both (a map).
fn getall(ctx: &mut Ctx, key: &[u8], fields: bool, values: bool) -> CmdResult {
    let now = ctx.now;
    let (db, out) = db_and_out(ctx);
    let h = lookup(db, key, now)?;
    let n = h.map_or(0, |h| h.iter(now).count());
    if fields && values {
        out.map(n);
    } else {
        out.array(n);
    }
    for (f, v) in h.into_iter().flat_map(|h| h.iter(now)) {
        if fields {
            out.bulk(f);
        }
        if values {
            bulk_str(out, v);
        }
    }
    Ok(())
}

/// HKEYS key
pub fn hkeys(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    getall(ctx, &args[1], true, false)
}

/// HVALS key
pub fn hvals(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    getall(ctx, &args[1], false, true)
}

/// HGETALL key
pub fn hgetall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    getall(ctx, &args[1], true, true)
}

/// Current value of a field for HINCRBY*: the key's type checked, an
/// expired field deleted first. Returns (value bytes, field deadline).
fn counter_field(ctx: &mut Ctx, key: &[u8], field: &[u8]) -> Result<(Option<Vec<u8>>, Option<i64>), CmdError> {
    let now = ctx.now;
    if !check(ctx, key)? {
        return Ok((None, None));
    }
    expire_field(ctx, key, field)?;
    let h = lookup(ctx.db(), key, now)?;
    Ok(match h.and_then(|h| Some((h.get(field, now)?.to_vec(), h.expire_of(field, now)?))) {
        Some((v, d)) => (Some(v), d),
        None => (None, None),
    })
}

/// Writes `value` into `field`, keeping the field's TTL `deadline`;
/// `event` is the command's keyspace event.
fn set_keep_ttl(ctx: &mut Ctx, key: &[u8], field: &[u8], value: &[u8], deadline: Option<i64>, event: &str) {
    let (cfg, now) = (ctx.srv.config.hash, ctx.now);
    let h = hash_mut(ctx, key);
    h.insert(field, value, &cfg);
    if let Some(d) = deadline {
        h.set_expire(field, d, ExpireCond::Always, now);
    }
    written(ctx, key, Some(event));
}

/// HINCRBY key field increment
pub fn hincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let incr = arg_i64(&args[3])?;
    let (old, deadline) = counter_field(ctx, &args[1], &args[2])?;
    let old = match old {
        Some(v) => storage::strref::parse_canonical_i64(&v).ok_or_else(|| CmdError::err("hash value is not an integer"))?,
        None => 0,
    };
    let new = old.checked_add(incr).ok_or(CmdError::Overflow)?;
    set_keep_ttl(ctx, &args[1], &args[2], new.to_string().as_bytes(), deadline, "hincrby");
    ctx.out().int(new);
    Ok(())
}

/// HINCRBYFLOAT key field increment
pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let incr = arg_f64(&args[3])?;
    if !incr.is_finite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let (old, deadline) = counter_field(ctx, &args[1], &args[2])?;
    let old = match old {
        Some(v) => resp::num::parse_f64(&v).ok_or_else(|| CmdError::err("hash value is not a float"))?,
        None => 0.0,
    };
    let new = old + incr;
    if !new.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    let text = resp::num::format_f64_human(new);
    set_keep_ttl(ctx, &args[1], &args[2], text.as_bytes(), deadline, "hincrbyfloat");
    ctx.out().bulk(text.as_bytes());
    Ok(())
}

/// Reclaims every expired field of the hash at `key` (HRANDFIELD does so
/// before sampling). Returns false if the key is gone (or never was).
fn expire_all(ctx: &mut Ctx, key: &[u8]) -> bool {
    let now = ctx.now;
    let db = ctx.db();
    let Some(ValueMut::Hash(h)) = db.get_mut(key, now) else { return false };
    let n = h.expire_due(now, usize::MAX);
    let gone = n > 0 && db.sync_object(key);
    ctx.srv.expired_subkeys += n as u64;
    if n > 0 {
        ctx.key_touched(key);
        fields_expired(ctx, key, gone);
    }
    !gone
}

/// HRANDFIELD key [count [WITHVALUES]]
pub fn hrandfield(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let key = &args[1];
    let mut count = None;
    let mut withvalues = false;
    if args.len() >= 3 {
        let l = arg_i64(&args[2])?;
        if l == i64::MIN {
            return Err(CmdError::err("value is out of range"));
        }
        if args.len() > 4 || (args.len() == 4 && !is(&args[3], "withvalues")) {
            return Err(CmdError::Syntax);
        }
        if args.len() == 4 {
            withvalues = true;
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
                return Err(CmdError::err("value is out of range"));
            }
        }
        count = Some(l);
    }
    let exists = check(ctx, key)? && expire_all(ctx, key);
    let mut seed = ctx.srv.random();
    let mut rng = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (db, out) = db_and_out(ctx);
    let h = if exists { lookup(db, key, now)? } else { None };
    let Some(l) = count else {
        match h.and_then(|h| h.random_field(now, &mut rng)) {
            Some((f, _)) => out.bulk(f),
            None => out.null(),
        }
        return Ok(());
    };
    let Some(h) = h.filter(|_| l != 0) else {
        out.array(0);
        return Ok(());
    };
    let pairs_flat = withvalues && !out.resp3;
    let emit = |out: &mut Reply, f: &[u8], v: StrRef| {
        if withvalues && out.resp3 {
            out.array(2);
        }
        out.bulk(f);
        if withvalues {
            bulk_str(out, v);
        }
    };
    let size = h.len();
    if l < 0 || l == 1 {
        let n = l.unsigned_abs() as usize;
        out.array(if pairs_flat { n * 2 } else { n });
        for _ in 0..n {
            let (f, v) = h.random_field(now, &mut rng).expect("hash has live fields");
            emit(out, f, v);
            if out.buf.len() > MAX_SAMPLE_REPLY {
                // Redis stops here when the output limit closes the client;
                // we close it rather than build an unbounded reply.
                ctx.client.close_asap = true;
                break;
            }
        }
        return Ok(());
    }
    let n = (l as usize).min(size);
    out.array(if pairs_flat { n * 2 } else { n });
    if n == size {
        h.iter(now).for_each(|(f, v)| emit(out, f, v));
    } else if n * 3 > size {
        let mut all: Vec<_> = h.iter(now).collect();
        while all.len() > n {
            let i = (rng() % all.len() as u64) as usize;
            all.swap_remove(i);
        }
        all.into_iter().for_each(|(f, v)| emit(out, f, v));
    } else {
        let mut seen = std::collections::HashSet::with_capacity(n);
        while seen.len() < n {
            let (f, v) = h.random_field(now, &mut rng).expect("hash has live fields");
            if seen.insert(f) {
                emit(out, f, v);
            }
        }
    }
    Ok(())
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]
pub fn hscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let cursor = crate::commands::keys::parse_cursor(&args[2]).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let (db, out) = db_and_out(ctx);
    let Some(h) = lookup(db, &args[1], now)? else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let crate::commands::keys::ScanOpts { count, pattern, novalues, .. } = crate::commands::keys::parse_scan_opts(args, 3, crate::commands::keys::ScanExtra::NoValues)?;
    let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let next = h.scan(cursor, count, now, |f, v| {
        if pattern.is_none_or(|p| crate::glob::matches(p, f, false)) {
            found.push((f.to_vec(), if novalues { Vec::new() } else { v.to_vec() }));
        }
    });
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(if novalues { found.len() } else { found.len() * 2 });
    for (f, v) in found {
        out.bulk(&f);
        if !novalues {
            out.bulk(&v);
        }
    }
    Ok(())
}

/// HEXPIRE family: `secs` scales the time, `relative` adds now.
fn expire_generic(ctx: &mut Ctx, args: &[Vec<u8>], secs: bool, relative: bool) -> CmdResult {
    let now = ctx.now;
    let key = &args[1];
    let exists = check(ctx, key)?;
    let deadline = parse_deadline(&name_of(args), &args[2], secs, if relative { now } else { 0 })?;
    let cond = [("nx", ExpireCond::Nx), ("xx", ExpireCond::Xx), ("gt", ExpireCond::Gt), ("lt", ExpireCond::Lt)]
        .into_iter()
        .find(|(w, _)| is(&args[3], w))
        .map(|(_, c)| c);
    let at = if cond.is_some() { 4 } else { 3 };
    let fields = fields_arg(args, at, "Parameter `numFields` should be greater than 0")?;
    let mut codes = Vec::with_capacity(fields.len());
    if exists {
        let h = hash_mut(ctx, key);
        codes.extend(fields.iter().map(|f| h.set_expire(f, deadline, cond.unwrap_or(ExpireCond::Always), now)));
        // A deadline in the past deletes the fields (code 2): `hdel` then.
        let event = if codes.contains(&2) {
            Some("hdel")
        } else if codes.contains(&1) {
            Some("hexpire")
        } else {
            None
        };
        written(ctx, key, event);
    } else {
        codes.resize(fields.len(), -2);
    }
    let out = ctx.out();
    out.array(codes.len());
    codes.into_iter().for_each(|c| out.int(c));
    Ok(())
}

/// HEXPIRE key seconds [NX|XX|GT|LT] FIELDS numfields field...
pub fn hexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, true, true)
}

/// HPEXPIRE key milliseconds [NX|XX|GT|LT] FIELDS numfields field...
pub fn hpexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, false, true)
}

/// HEXPIREAT key unix-seconds [NX|XX|GT|LT] FIELDS numfields field...
pub fn hexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, true, false)
}

/// HPEXPIREAT key unix-ms [NX|XX|GT|LT] FIELDS numfields field...
pub fn hpexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, false, false)
}

/// HTTL family: remaining time (`relative`) or deadline, in seconds
/// (rounded up, as Redis) or ms; -2 no such field, -1 no TTL.
fn ttl_generic(ctx: &mut Ctx, args: &[Vec<u8>], secs: bool, relative: bool) -> CmdResult {
    let now = ctx.now;
    let (db, out) = db_and_out(ctx);
    let h = lookup(db, &args[1], now)?;
    let fields = fields_arg(args, 2, NUMFIELDS_POSITIVE)?;
    let base = if relative { now } else { 0 };
    out.array(fields.len());
    for f in fields {
        out.int(match h.and_then(|h| h.expire_of(f, now)) {
            None => -2,
            Some(None) => -1,
            Some(Some(d)) if d <= now => -2,
            Some(Some(d)) if secs => (d + 999 - base) / 1000,
            Some(Some(d)) => d - base,
        });
    }
    Ok(())
}

/// HTTL key FIELDS numfields field...
pub fn httl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, args, true, true)
}

/// HPTTL key FIELDS numfields field...
pub fn hpttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, args, false, true)
}

/// HEXPIRETIME key FIELDS numfields field...
pub fn hexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, args, true, false)
}

/// HPEXPIRETIME key FIELDS numfields field...
pub fn hpexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, args, false, false)
}

/// HPERSIST key FIELDS numfields field...
pub fn hpersist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let key = &args[1];
    let exists = check(ctx, key)?;
    let fields = fields_arg(args, 2, NUMFIELDS_POSITIVE)?;
    let mut codes = vec![-2; fields.len()];
    if exists {
        let h = hash_mut(ctx, key);
        for (c, f) in codes.iter_mut().zip(fields) {
            *c = h.persist(f, now);
        }
        if codes.contains(&1) {
            written(ctx, key, Some("hpersist"));
        }
    }
    let out = ctx.out();
    out.array(codes.len());
    codes.into_iter().for_each(|c| out.int(c));
    Ok(())
}

/// Live values of `fields` (expired ones deleted first), for HGETDEL/HGETEX.
fn values_of(ctx: &mut Ctx, key: &[u8], fields: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, CmdError> {
    let now = ctx.now;
    let mut vals = Vec::with_capacity(fields.len());
    for f in fields {
        expire_field(ctx, key, f)?;
        vals.push(lookup(ctx.db(), key, now)?.and_then(|h| h.get(f, now)).map(|v| v.to_vec()));
    }
    Ok(vals)
}

fn reply_values(ctx: &mut Ctx, vals: Vec<Option<Vec<u8>>>) {
    let out = ctx.out();
    out.array(vals.len());
    for v in vals {
        match v {
            Some(v) => out.bulk(&v),
            None => out.null(),
        }
    }
}

/// HGETDEL key FIELDS numfields field...
pub fn hgetdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let exists = check(ctx, key)?;
    let fields = fields_arg(args, 2, NUMFIELDS_POSITIVE)?;
    let now = ctx.now;
    let mut vals = vec![None; fields.len()];
    if exists {
        for (f, v) in fields.iter().zip(&mut vals) {
            expire_field(ctx, key, f)?;
            let Some(ValueMut::Hash(h)) = ctx.db().get_mut(key, now) else { break };
            *v = h.get(f, now).map(|s| s.to_vec());
            if v.is_some() {
                h.remove(f);
            }
        }
        if vals.iter().any(Option::is_some) {
            written(ctx, key, Some("hdel"));
        }
    }
    reply_values(ctx, vals);
    Ok(())
}

/// HGETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST] FIELDS numfields field...
pub fn hgetex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let key = &args[1];
    let exists = check(ctx, key)?;
    let opt = &args[2];
    let timed = [("ex", true, true), ("px", false, true), ("exat", true, false), ("pxat", false, false)]
        .into_iter()
        .find(|(w, ..)| is(opt, w));
    let persist = is(opt, "persist");
    let (deadline, at) = match timed {
        Some((_, secs, rel)) => (Some(parse_deadline("hgetex", &args[3], secs, if rel { now } else { 0 })?), 4),
        None if persist => (None, 3),
        None => (None, 2),
    };
    let fields = fields_arg(args, at, NUMFIELDS_POSITIVE)?;
    if !exists {
        reply_values(ctx, vec![None; fields.len()]);
        return Ok(());
    }
    let vals = values_of(ctx, key, fields)?;
    if (deadline.is_some() || persist) && vals.iter().any(Option::is_some) {
        let h = hash_mut(ctx, key);
        let (mut changed, mut deleted) = (false, false);
        for (f, _) in fields.iter().zip(&vals).filter(|(_, v)| v.is_some()) {
            let code = match deadline {
                Some(d) => h.set_expire(f, d, ExpireCond::Always, now),
                None => h.persist(f, now),
            };
            changed |= code > 0;
            deleted |= deadline.is_some() && code == 2;
        }
        if changed {
            let event = match (deleted, deadline) {
                (true, _) => "hdel",
                (false, Some(_)) => "hexpire",
                (false, None) => "hpersist",
            };
            written(ctx, key, Some(event));
        }
    }
    reply_values(ctx, vals);
    Ok(())
}

/// HSETEX key [FNX|FXX] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL] FIELDS numfields field value...
pub fn hsetex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let key = &args[1];
    let (mut fnx, mut fxx, mut keepttl) = (false, false, false);
    let mut deadline = None;
    let mut pairs = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "fields") {
            if i + 3 >= args.len() {
                return Err(CmdError::Arity("hsetex".into()));
            }
            let n = resp::num::parse_i64(&args[i + 1])
                .filter(|n| (1..=i32::MAX as i64).contains(n))
                .ok_or_else(|| CmdError::err("invalid number of fields"))?;
            let rest = &args[i + 2..];
            if !rest.len().is_multiple_of(2) || usize::try_from(n).ok() != Some(rest.len() / 2) {
                return Err(CmdError::Arity("hsetex".into()));
            }
            pairs = Some(rest);
            break;
        }
        let timed = [("ex", true, true), ("px", false, true), ("exat", true, false), ("pxat", false, false)]
            .into_iter()
            .find(|(w, ..)| is(a, w));
        if timed.is_some() || is(a, "keepttl") {
            if deadline.is_some() || keepttl {
                return Err(CmdError::err("Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified"));
            }
            if let Some((_, secs, rel)) = timed {
                let t = args.get(i + 1).ok_or_else(|| CmdError::err("missing expire time"))?;
                deadline = Some(parse_deadline("hsetex", t, secs, if rel { now } else { 0 })?);
                i += 1;
            } else {
                keepttl = true;
            }
        } else if is(a, "fxx") || is(a, "fnx") {
            if fnx || fxx {
                return Err(CmdError::err("Only one of FXX or FNX arguments can be specified"));
            }
            fxx = is(a, "fxx");
            fnx = !fxx;
        } else {
            return Err(CmdError::err(format!("unknown argument: {}", String::from_utf8_lossy(a))));
        }
        i += 1;
    }
    let pairs = pairs.ok_or_else(|| CmdError::Arity("hsetex".into()))?;
    let exists = check(ctx, key)?;
    if !exists && fxx {
        ctx.out().int(0);
        return Ok(());
    }
    if exists && (fnx || fxx) {
        let mut found = 0;
        for p in pairs.chunks(2) {
            expire_field(ctx, key, &p[0])?;
            found += usize::from(lookup(ctx.db(), key, now)?.is_some_and(|h| h.contains(&p[0], now)));
        }
        if (fnx && found > 0) || (fxx && found < pairs.len() / 2) {
            ctx.out().int(0);
            return Ok(());
        }
    }
    let cfg = ctx.srv.config.hash;
    let h = hash_mut(ctx, key);
    for p in pairs.chunks(2) {
        let old = if keepttl { h.expire_of(&p[0], now).flatten() } else { None };
        h.insert(&p[0], &p[1], &cfg);
        if let Some(d) = deadline.or(old) {
            h.set_expire(&p[0], d, ExpireCond::Always, now);
        }
    }
    // `hset`, then what the TTL did: set (`hexpire`) or, in the past,
    // deleted the fields (`hdel`), then `del` if the hash went.
    let gone = ctx.db().sync_object(key);
    ctx.modified(key, notify::HASH, "hset");
    if let Some(d) = deadline {
        ctx.notify(notify::HASH, if d <= now { "hdel" } else { "hexpire" }, key);
    }
    if gone {
        ctx.notify(notify::GENERIC, "del", key);
    }
    ctx.out().int(1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn fields_argument_errors() {
        let a = argv("httl k FIELDS 2 a b");
        assert_eq!(fields_arg(&a, 2, NUMFIELDS_POSITIVE).unwrap().len(), 2);
        let e = |s: &str| fields_arg(&argv(s), 2, NUMFIELDS_POSITIVE).unwrap_err().message();
        assert_eq!(e("httl k FIELDS 3 a b"), "ERR The `numfields` parameter must match the number of arguments");
        assert_eq!(e("httl k FIELDS 0 a"), "ERR Number of fields must be a positive integer");
        assert_eq!(e("httl k FIELDS x a"), "ERR Number of fields must be a positive integer");
        assert_eq!(e("httl k FIELD 1 a"), "ERR Mandatory argument FIELDS is missing or not at the right position");
    }

    #[test]
    fn deadlines_are_bounded() {
        assert_eq!(parse_deadline("hexpire", b"10", true, 5), Ok(10_005));
        assert_eq!(parse_deadline("hpexpire", b"-1", false, 0).unwrap_err().message(), "ERR invalid expire time, must be >= 0");
        assert_eq!(
            parse_deadline("hexpire", b"70368744177", true, 1000).unwrap_err().message(),
            "ERR invalid expire time in 'hexpire' command"
        );
        assert_eq!(parse_deadline("hpexpireat", b"70368744177663", false, 0), Ok(MAX_FIELD_MS));
        assert_eq!(parse_deadline("hexpire", b"x", true, 0), Err(CmdError::NotInt));
    }
}
