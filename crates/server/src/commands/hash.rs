//! HASH commands, including per-field expiry (HEXPIRE family, Redis 7.4) and
//! Redis 8's HGETDEL / HGETEX / HSETEX.
//!
//! The structure (`storage::types::hash::Hash`) hides fields whose deadline
//! has passed; this file adds what Redis's commands do on top of that:
//! a command that names an expired field deletes it first (`with_fields`,
//! `reclaim`: counted in INFO expired_subkeys, `hexpired`), HLEN still counts
//! expired fields not yet reclaimed, and HRANDFIELD reclaims all of them
//! before sampling. Active reclaiming is the keyspace's field-expiry index,
//! run from `cron.rs`.
//!
//! Keys are reached through `ctx.read`/`ctx.write` (access.rs): a write edits
//! the hash in place through a guard, whose drop re-registers the hash in
//! the field-expiry index or deletes the key when the hash is empty, and
//! raises the events recorded with `changed` (then `del` if the hash went).
//! Writes compute their result before creating a key, so an error never
//! leaves an empty hash behind. Argument checks follow Redis's order (key
//! type, then time, then FIELDS/numfields), because clients and the test
//! suite see which error wins.

use crate::ldouble::Ext;
use crate::notify;
use resp::Reply;
use storage::types::hash::{ExpireCond, Hash, HashConfig};
use storage::StrRef;

use crate::command::flags::*;
use crate::commands::string::with_bytes;
use crate::command::{arg_i64, arg_range, is, keys, kf, range_spec, spec, CmdError, CmdResult, Ctx, Spec};
use crate::commands::subexpire::{self, expire_generic, name_of, parse_deadline, persist_generic, propagate_dels, ttl_generic, NUMFIELDS_POSITIVE};

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
        s("hlen", 2, READONLY | FAST, hlen, RF, "Returns the number of fields in a hash.", "2.0.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        s("hstrlen", 3, READONLY | FAST, hstrlen, RF, "Returns the length of the value of a field.", "3.2.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        s("hexists", 3, READONLY | FAST, hexists, RF, "Determines whether a field exists in a hash.", "2.0.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        s("hkeys", 2, READONLY, hkeys, RS, "Returns all fields in a hash.", "2.0.0"),
        s("hvals", 2, READONLY, hvals, RS, "Returns all values in a hash.", "2.0.0"),
        s("hgetall", 2, READONLY, hgetall, RS, "Returns all fields and values in a hash.", "2.0.0"),
        s("hincrby", 4, WRITE | DENYOOM | FAST, hincrby, WF, "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", "2.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("hincrbyfloat", 4, WRITE | DENYOOM | FAST, hincrbyfloat, WF, "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", "2.6.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
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

/// True if `field` is stored in `h` but its deadline has passed: the
/// structure hides it, and a command that names it deletes it first.
fn stale(h: &Hash, field: &[u8], now: i64) -> bool {
    matches!(h.expire_of(field, i64::MIN), Some(Some(d)) if d < now)
}

/// `hexpired` (`times` over) after lazy field expiry, then `del` if the
/// hash went.
fn fields_expired(ctx: &mut Ctx, key: &[u8], times: usize, gone: bool) {
    for _ in 0..times {
        ctx.notify(notify::HASH, "hexpired", key);
    }
    if gone {
        ctx.notify(notify::GENERIC, "del", key);
    }
}

/// Deletes those of `fields` that are stored in the hash at `key` but
/// expired, as Redis does when a command names them: counted in
/// expired_subkeys, `hexpired` once for the command (or, with `per_field`,
/// once per field, as HGETDEL, HGETEX and HSETEX raise it), then `del` if
/// the hash went. Lazy expiry is not the command's own write: WATCH sees
/// it, the dirty counter does not.
fn reclaim<'f>(ctx: &mut Ctx, key: &[u8], fields: impl Iterator<Item = &'f [u8]>, per_field: bool) -> CmdResult {
    let now = ctx.now;
    let Some(mut w) = ctx.write::<Hash>(key, notify::HASH)? else { return Ok(()) };
    let h = w.get();
    let gone_fields: Vec<&[u8]> = fields.filter(|f| stale(h, f, now) && h.remove(f)).collect();
    let n = gone_fields.len();
    let gone = h.is_empty();
    // Dropped unchanged: the hash is synced (deleted if empty), nothing raised.
    drop(w);
    propagate_dels::<Hash, _>(ctx, key, gone_fields);
    if n > 0 {
        ctx.srv.expired_subkeys += n as u64;
        ctx.key_touched(key);
        fields_expired(ctx, key, if per_field { n } else { 1 }, gone);
    }
    Ok(())
}

/// Calls `f` with the hash at `key` (None: absent) and the reply buffer,
/// once expired fields among `fields` are deleted (`reclaim`). One lookup
/// when none is, the usual case.
fn with_fields<'f, R>(
    ctx: &mut Ctx,
    key: &[u8],
    fields: impl Iterator<Item = &'f [u8]> + Clone,
    per_field: bool,
    f: impl FnOnce(Option<&Hash>, &mut Reply) -> R,
) -> Result<R, CmdError> {
    let now = ctx.now;
    let (h, out) = ctx.read_out::<Hash>(key)?;
    if !h.is_some_and(|h| fields.clone().any(|x| stale(h, x, now))) {
        return Ok(f(h, out));
    }
    reclaim(ctx, key, fields, per_field)?;
    let (h, out) = ctx.read_out::<Hash>(key)?;
    Ok(f(h, out))
}

/// Checks the type of `key` and deletes the expired ones among `fields`
/// (`with_fields` with nothing to read).
fn expire_named<'f>(ctx: &mut Ctx, key: &[u8], fields: impl Iterator<Item = &'f [u8]> + Clone, per_field: bool) -> CmdResult {
    with_fields(ctx, key, fields, per_field, |_, _| ())
}

/// The fields of a list of field arguments.
fn names(fields: &[Vec<u8>]) -> impl Iterator<Item = &[u8]> + Clone {
    fields.iter().map(Vec::as_slice)
}

/// Replies with the live values of `fields` in `h` (nulls if absent).
fn reply_fields(out: &mut Reply, h: Option<&Hash>, fields: &[Vec<u8>], now: i64) {
    out.array(fields.len());
    for f in fields {
        match h.and_then(|h| h.get(f, now)) {
            Some(v) => bulk_str(out, v),
            None => out.null(),
        }
    }
}

fn bulk_str(out: &mut Reply, v: StrRef) {
    match v {
        StrRef::Int(i) => out.bulk_i64(i),
        StrRef::Bytes(b) => out.bulk(b),
    }
}

/// Parses `FIELDS numfields field...` where `args[at]` should be FIELDS.
fn fields_arg<'a>(args: &'a [Vec<u8>], at: usize, bad_count: &str) -> Result<&'a [Vec<u8>], CmdError> {
    subexpire::fields_arg(args, at, bad_count, "FIELDS")
}

/// HSET key field value [field value ...] / HMSET (replies OK).
pub fn hset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() % 2 == 1 {
        return Err(CmdError::Arity(name_of(args)));
    }
    let cfg = ctx.srv.config.hash;
    let mut w = ctx.write_or_create(&args[1], notify::HASH, Hash::default)?;
    let (h, out) = w.parts();
    let created = args[2..].chunks(2).filter(|p| h.insert(&p[0], &p[1], &cfg)).count();
    if args[0][1].eq_ignore_ascii_case(&b's') {
        out.int(created as i64);
    } else {
        out.ok();
    }
    w.changed("hset");
    Ok(())
}

/// HSETNX key field value
pub fn hsetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, field) = (&args[1], &args[2]);
    let (cfg, now) = (ctx.srv.config.hash, ctx.now);
    expire_named(ctx, key, names(&args[2..3]), false)?;
    let mut w = ctx.write_or_create(key, notify::HASH, Hash::default)?;
    let (h, out) = w.parts();
    if h.contains(field, now) {
        out.int(0);
        return Ok(());
    }
    h.insert(field, &args[3], &cfg);
    out.int(1);
    w.changed("hset");
    Ok(())
}

/// HGET key field
pub fn hget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    with_fields(ctx, &args[1], names(&args[2..3]), false, |h, out| match h.and_then(|h| h.get(&args[2], now)) {
        Some(v) => bulk_str(out, v),
        None => out.null(),
    })
}

/// HMGET key field [field ...]: one `hexpired` for the command, as Redis
/// raises it.
pub fn hmget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let fields = &args[2..];
    with_fields(ctx, &args[1], names(fields), false, |h, out| reply_fields(out, h, fields, now))
}

/// HDEL key field [field ...]: expired fields not yet reclaimed count as
/// deleted, as in Redis.
pub fn hdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(mut w) = ctx.write::<Hash>(&args[1], notify::HASH)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let (h, out) = w.parts();
    let n = args[2..].iter().filter(|f| h.remove(f)).count();
    out.int(n as i64);
    if n > 0 {
        w.changed("hdel");
    }
    Ok(())
}

/// HLEN key: counts expired fields not yet reclaimed, as Redis does.
pub fn hlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = ctx.read::<Hash>(&args[1])?.map_or(0, Hash::len);
    ctx.out().int(n as i64);
    Ok(())
}

/// HSTRLEN key field
pub fn hstrlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    with_fields(ctx, &args[1], names(&args[2..3]), false, |h, out| {
        out.int(h.and_then(|h| h.get(&args[2], now)).map_or(0, |v| v.len()) as i64);
    })
}

/// HEXISTS key field
pub fn hexists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    with_fields(ctx, &args[1], names(&args[2..3]), false, |h, out| {
        out.int(i64::from(h.is_some_and(|h| h.contains(&args[2], now))));
    })
}

/// HKEYS / HVALS / HGETALL: live fields, values or both (a map).
fn getall(ctx: &mut Ctx, key: &[u8], fields: bool, values: bool) -> CmdResult {
    let now = ctx.now;
    let (h, out) = ctx.read_out::<Hash>(key)?;
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

/// Stores `value` in `field` keeping the field's TTL, as HINCRBY* do.
fn set_keep_ttl(h: &mut Hash, field: &[u8], value: &[u8], now: i64, cfg: &HashConfig) {
    let deadline = h.expire_of(field, now).flatten();
    h.insert(field, value, cfg);
    if let Some(d) = deadline {
        h.set_expire(field, d, ExpireCond::Always, now);
    }
}

/// HINCRBY key field increment
pub fn hincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, field) = (&args[1], &args[2]);
    let incr = arg_i64(&args[3])?;
    let (cfg, now) = (ctx.srv.config.hash, ctx.now);
    expire_named(ctx, key, names(&args[2..3]), false)?;
    let mut w = ctx.write_or_create(key, notify::HASH, Hash::default)?;
    let (h, out) = w.parts();
    let old = match h.get(field, now) {
        None => 0,
        Some(StrRef::Int(v)) => v,
        Some(StrRef::Bytes(b)) => storage::strref::parse_canonical_i64(b).ok_or_else(|| CmdError::err("hash value is not an integer"))?,
    };
    let new = old.checked_add(incr).ok_or(CmdError::Overflow)?;
    set_keep_ttl(h, field, new.to_string().as_bytes(), now, &cfg);
    out.int(new);
    w.changed("hincrby");
    Ok(())
}

/// HINCRBYFLOAT key field increment: in x87 extended precision like
/// INCRBYFLOAT; replayed as an HSET of the result, as Redis propagates it.
pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, field) = (&args[1], &args[2]);
    let incr = Ext::parse(&args[3]).ok_or(CmdError::NotFloat)?;
    if !incr.is_finite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let (cfg, now) = (ctx.srv.config.hash, ctx.now);
    expire_named(ctx, key, names(&args[2..3]), false)?;
    let mut w = ctx.write_or_create(key, notify::HASH, Hash::default)?;
    let (h, out) = w.parts();
    let old = match h.get(field, now) {
        None => Ext::from_i64(0),
        Some(v) => with_bytes(v, Ext::parse).ok_or_else(|| CmdError::err("hash value is not a float"))?,
    };
    let new = old.plus(incr);
    if !new.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    let text = new.to_human();
    set_keep_ttl(h, field, text.as_bytes(), now, &cfg);
    out.bulk(text.as_bytes());
    w.changed("hincrbyfloat");
    w.ctx().srv.feed.replace_current(vec![b"HSET".to_vec(), key.clone(), field.clone(), text.into_bytes()]);
    Ok(())
}

/// Reclaims every expired field of the hash at `key` (HRANDFIELD does so
/// before sampling), with one `hexpired`.
fn expire_all(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let now = ctx.now;
    let Some(mut w) = ctx.write::<Hash>(key, notify::HASH)? else { return Ok(()) };
    let h = w.get();
    let mut gone_fields = Vec::new();
    let n = h.expire_due_with(now, usize::MAX, |f| gone_fields.push(f.to_vec()));
    let gone = h.is_empty();
    drop(w);
    propagate_dels::<Hash, _>(ctx, key, gone_fields);
    if n > 0 {
        ctx.srv.expired_subkeys += n as u64;
        ctx.key_touched(key);
        fields_expired(ctx, key, 1, gone);
    }
    Ok(())
}

/// HRANDFIELD key [count [WITHVALUES]]
pub fn hrandfield(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let key = &args[1];
    let mut count = None;
    let mut withvalues = false;
    if args.len() >= 3 {
        let l = arg_range(&args[2], -i64::MAX, None)?;
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
    if ctx.read::<Hash>(key)?.and_then(Hash::min_deadline).is_some_and(|d| d < now) {
        expire_all(ctx, key)?;
    }
    let mut seed = ctx.srv.random();
    let mut rng = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let hard = ctx.srv.config.obuf.normal.hard;
    let (h, out) = ctx.read_again::<Hash>(key)?;
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
    let header = |out: &mut Reply, n: usize| if withvalues { out.pairs(n) } else { out.array(n) };
    let emit = |out: &mut Reply, f: &[u8], v: StrRef| {
        if withvalues {
            out.pair();
        }
        out.bulk(f);
        if withvalues {
            bulk_str(out, v);
        }
    };
    let size = h.len();
    if l < 0 || l == 1 {
        let n = l.unsigned_abs() as usize;
        header(out, n);
        for _ in 0..n {
            let (f, v) = h.random_field(now, &mut rng).expect("hash has live fields");
            emit(out, f, v);
            if hard > 0 && crate::client::reply_usage(out.buf.len()) >= hard {
                // Redis stops here when the output limit closes the client;
                // so do we (dispatch drops the reply and closes it).
                break;
            }
            if out.buf.len() > MAX_SAMPLE_REPLY {
                // With no limit set: we close it rather than build an
                // unbounded reply.
                ctx.client.close_asap = true;
                break;
            }
        }
        return Ok(());
    }
    let n = (l as usize).min(size);
    header(out, n);
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
    use crate::commands::keys::{parse_cursor, parse_scan_opts, ScanExtra, ScanOpts};
    let now = ctx.now;
    let cursor = parse_cursor(&args[2]).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let (h, out) = ctx.read_out::<Hash>(&args[1])?;
    let Some(h) = h else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let ScanOpts { count, pattern, novalues, .. } = parse_scan_opts(args, 3, ScanExtra::NoValues)?;
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

/// HEXPIRE key seconds [NX|XX|GT|LT] FIELDS numfields field...
pub fn hexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic::<Hash>(ctx, args, true, true)
}

/// HPEXPIRE key milliseconds [NX|XX|GT|LT] FIELDS numfields field...
pub fn hpexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic::<Hash>(ctx, args, false, true)
}

/// HEXPIREAT key unix-seconds [NX|XX|GT|LT] FIELDS numfields field...
pub fn hexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic::<Hash>(ctx, args, true, false)
}

/// HPEXPIREAT key unix-ms [NX|XX|GT|LT] FIELDS numfields field...
pub fn hpexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic::<Hash>(ctx, args, false, false)
}

/// HTTL key FIELDS numfields field...
pub fn httl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic::<Hash>(ctx, args, true, true)
}

/// HPTTL key FIELDS numfields field...
pub fn hpttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic::<Hash>(ctx, args, false, true)
}

/// HEXPIRETIME key FIELDS numfields field...
pub fn hexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic::<Hash>(ctx, args, true, false)
}

/// HPEXPIRETIME key FIELDS numfields field...
pub fn hpexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic::<Hash>(ctx, args, false, false)
}

/// HPERSIST key FIELDS numfields field...
pub fn hpersist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    persist_generic::<Hash>(ctx, args)
}

/// Replies with one null per field (HGETDEL/HGETEX on a missing key).
fn reply_nulls(ctx: &mut Ctx, n: usize) {
    let out = ctx.out();
    out.array(n);
    (0..n).for_each(|_| out.null());
}

/// HGETDEL key FIELDS numfields field...
pub fn hgetdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let exists = ctx.holds::<Hash>(key)?;
    let fields = fields_arg(args, 2, NUMFIELDS_POSITIVE)?;
    if !exists {
        reply_nulls(ctx, fields.len());
        return Ok(());
    }
    let now = ctx.now;
    expire_named(ctx, key, names(fields), true)?;
    let Some(mut w) = ctx.write::<Hash>(key, notify::HASH)? else {
        reply_nulls(ctx, fields.len());
        return Ok(());
    };
    let (h, out) = w.parts();
    out.array(fields.len());
    let mut deleted = false;
    for f in fields {
        match h.get(f, now) {
            Some(v) => {
                bulk_str(out, v);
                h.remove(f);
                deleted = true;
            }
            None => out.null(),
        }
    }
    if deleted {
        w.changed("hdel");
    }
    Ok(())
}

/// HGETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST] FIELDS numfields field...
pub fn hgetex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let key = &args[1];
    let exists = ctx.holds::<Hash>(key)?;
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
        reply_nulls(ctx, fields.len());
        return Ok(());
    }
    if deadline.is_none() && !persist {
        return with_fields(ctx, key, names(fields), true, |h, out| reply_fields(out, h, fields, now));
    }
    expire_named(ctx, key, names(fields), true)?;
    let Some(mut w) = ctx.write::<Hash>(key, notify::HASH)? else {
        reply_nulls(ctx, fields.len());
        return Ok(());
    };
    let (h, out) = w.parts();
    // The values as they were before their TTLs change.
    reply_fields(out, Some(h), fields, now);
    let (mut changed, mut deleted) = (false, false);
    for f in fields {
        // A field named twice and deleted by its first TTL is left alone.
        if !h.contains(f, now) {
            continue;
        }
        let code = match deadline {
            Some(d) => h.set_expire(f, d, ExpireCond::Always, now),
            None => h.persist(f, now),
        };
        changed |= code > 0;
        deleted |= deadline.is_some() && code == 2;
    }
    if changed {
        w.changed(match (deleted, deadline) {
            (true, _) => "hdel",
            (false, Some(_)) => "hexpire",
            (false, None) => "hpersist",
        });
    }
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
    let exists = ctx.holds::<Hash>(key)?;
    if !exists && fxx {
        ctx.out().int(0);
        return Ok(());
    }
    if exists && (fnx || fxx) {
        let named = pairs.chunks(2).map(|p| p[0].as_slice());
        expire_named(ctx, key, named, true)?;
        let found = ctx.read::<Hash>(key)?.map_or(0, |h| pairs.chunks(2).filter(|p| h.contains(&p[0], now)).count());
        if (fnx && found > 0) || (fxx && found < pairs.len() / 2) {
            ctx.out().int(0);
            return Ok(());
        }
    }
    let cfg = ctx.srv.config.hash;
    let mut w = ctx.write_or_create(key, notify::HASH, Hash::default)?;
    let (h, out) = w.parts();
    for p in pairs.chunks(2) {
        let old = if keepttl { h.expire_of(&p[0], now).flatten() } else { None };
        h.insert(&p[0], &p[1], &cfg);
        if let Some(d) = deadline.or(old) {
            h.set_expire(&p[0], d, ExpireCond::Always, now);
        }
    }
    out.int(1);
    // `hset`, then what the TTL did: set (`hexpire`) or, in the past,
    // deleted the fields (`hdel`); the guard adds `del` if the hash went.
    w.changed("hset");
    if let Some(d) = deadline {
        w.changed(if d <= now { "hdel" } else { "hexpire" });
    }
    Ok(())
}
