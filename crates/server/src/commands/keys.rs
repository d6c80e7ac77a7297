//! Generic key commands (the `keyspace` family): existence, type, renaming,
//! copying and moving between databases, iteration (KEYS, SCAN, RANDOMKEY),
//! introspection (OBJECT, MEMORY) and the expiry commands (EXPIRE family, TTL
//! family, PERSIST), plus SWAPDB.
//!
//! Every handler works only through the `Db` API, so it is indifferent to how
//! the keyspace lays keys out. Reads that Redis performs "without touching"
//! (EXISTS, TYPE, TTL, OBJECT) set `no_touch` on the database for the rest of
//! the command; dispatch resets it before the next one.
//!
//! `encoding_name` is the one place that maps our encodings to the names
//! OBJECT ENCODING replies with.

use crate::notify;
use storage::{Db, StrRef, Ttl, ValueRef};

use crate::command::flags::*;
use crate::command::{arg_i64, container, is, keys, kf, range_spec, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::glob;
use crate::memory;
use crate::memreport;
use crate::blocking::BlockRequest;

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let ks_w: &[&str] = &["keyspace", "write", "slow"];
    let ks_wf: &[&str] = &["keyspace", "write", "fast"];
    let ks_r: &[&str] = &["keyspace", "read", "slow"];
    let ks_rf: &[&str] = &["keyspace", "read", "fast"];
    let one = keys(1, 1, 1);
    let two = keys(1, 2, 1);
    let g = "generic";
    vec![
        spec("del", -2, WRITE, keys(1, -1, 1), del).acl(ks_w).group(g).doc("Deletes one or more keys.", "1.0.0"),
        spec("unlink", -2, WRITE | FAST, keys(1, -1, 1), unlink).acl(ks_wf).group(g).doc("Asynchronously deletes one or more keys.", "4.0.0"),
        spec("exists", -2, READONLY | FAST, keys(1, -1, 1), exists).acl(ks_rf).group(g).doc("Determines whether one or more keys exist.", "1.0.0")
            .key_specs(vec![range_spec(kf::RO, 1, -1, 1)]),
        spec("type", 2, READONLY | FAST, one, type_).acl(ks_rf).group(g).doc("Determines the type of value stored at a key.", "1.0.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        spec("rename", 3, WRITE, two, rename).acl(ks_w).group(g).doc("Renames a key and overwrites the destination.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1), range_spec(kf::OW_UPDATE, 2, 0, 1)]),
        spec("renamenx", 3, WRITE | FAST, two, renamenx).acl(ks_wf).group(g).doc("Renames a key only when the target key name doesn't exist.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1), range_spec(kf::OW_INSERT, 2, 0, 1)]),
        spec("copy", -3, WRITE | DENYOOM, two, copy).acl(ks_w).group(g).doc("Copies the value of a key to a new key.", "6.2.0")
            .key_specs(vec![range_spec(kf::RO_ACCESS, 1, 0, 1), range_spec(kf::OW_UPDATE, 2, 0, 1)]),
        spec("move", 3, WRITE | FAST, one, move_).acl(ks_wf).group(g).doc("Moves a key to another database.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        spec("keys", 2, READONLY, NO_KEYS, keys_).acl(&["keyspace", "read", "slow", "dangerous"]).group(g).doc("Returns all key names that match a pattern.", "1.0.0"),
        spec("scan", -2, READONLY, NO_KEYS, scan).acl(ks_r).group(g).doc("Iterates over the key names in the database.", "2.8.0"),
        spec("randomkey", 1, READONLY, NO_KEYS, randomkey).acl(ks_r).group(g).doc("Returns a random key name from the database.", "1.0.0"),
        spec("touch", -2, READONLY | FAST, keys(1, -1, 1), touch)
            .acl(ks_rf)
            .group(g)
            .doc("Returns the number of existing keys out of those specified after updating the time they were last accessed.", "3.2.1")
            .key_specs(vec![range_spec(kf::RO, 1, -1, 1)]),
        container(
            "object",
            vec![
                spec("encoding", 3, READONLY, keys(2, 2, 1), object_encoding).acl(ks_r).group(g).doc("Returns the internal encoding of a Redis object.", "2.2.3")
                    .key_specs(vec![range_spec(kf::RO, 2, 0, 1)]),
                spec("freq", 3, READONLY, keys(2, 2, 1), object_freq).acl(ks_r).group(g).doc("Returns the logarithmic access frequency counter of a Redis object.", "4.0.0")
                    .key_specs(vec![range_spec(kf::RO, 2, 0, 1)]),
                spec("idletime", 3, READONLY, keys(2, 2, 1), object_idletime).acl(ks_r).group(g).doc("Returns the time since the last access to a Redis object.", "2.2.3")
                    .key_specs(vec![range_spec(kf::RO, 2, 0, 1)]),
                spec("refcount", 3, READONLY, keys(2, 2, 1), object_refcount).acl(ks_r).group(g).doc("Returns the reference count of a value of a key.", "2.2.3")
                    .key_specs(vec![range_spec(kf::RO, 2, 0, 1)]),
                spec("help", 2, LOADING | STALE, NO_KEYS, object_help).acl(&["keyspace", "slow"]).group(g).doc("Returns helpful text about the different subcommands.", "6.2.0"),
            ],
        )
        .group(g)
        .doc("A container for object introspection commands.", "2.2.3"),
        spec("expire", -3, WRITE | FAST, one, expire).acl(ks_wf).group(g).doc("Sets the expiration time of a key in seconds.", "1.0.0"),
        spec("pexpire", -3, WRITE | FAST, one, pexpire).acl(ks_wf).group(g).doc("Sets the expiration time of a key in milliseconds.", "2.6.0"),
        spec("expireat", -3, WRITE | FAST, one, expireat).acl(ks_wf).group(g).doc("Sets the expiration time of a key to a Unix timestamp.", "1.2.0"),
        spec("pexpireat", -3, WRITE | FAST, one, pexpireat).acl(ks_wf).group(g).doc("Sets the expiration time of a key to a Unix milliseconds timestamp.", "2.6.0"),
        spec("ttl", 2, READONLY | FAST, one, ttl).acl(ks_rf).group(g).doc("Returns the expiration time in seconds of a key.", "1.0.0"),
        spec("pttl", 2, READONLY | FAST, one, pttl).acl(ks_rf).group(g).doc("Returns the expiration time in milliseconds of a key.", "2.6.0"),
        spec("expiretime", 2, READONLY | FAST, one, expiretime).acl(ks_rf).group(g).doc("Returns the expiration time of a key as a Unix timestamp.", "7.0.0"),
        spec("pexpiretime", 2, READONLY | FAST, one, pexpiretime).acl(ks_rf).group(g).doc("Returns the expiration time of a key as a Unix milliseconds timestamp.", "7.0.0"),
        spec("persist", 2, WRITE | FAST, one, persist).acl(ks_wf).group(g).doc("Removes the expiration time of a key.", "2.2.0"),
        container(
            "memory",
            vec![
                spec("usage", -3, READONLY, keys(2, 2, 1), memory_usage).acl(&["read", "slow"]).group("server").doc("Estimates the memory usage of a key.", "4.0.0")
                    .key_specs(vec![range_spec(kf::RO, 2, 0, 1)]),
                spec("stats", 2, 0, NO_KEYS, memory_stats).acl(&["slow"]).group("server").doc("Returns details about memory usage.", "4.0.0"),
                spec("doctor", 2, 0, NO_KEYS, memory_doctor).acl(&["slow"]).group("server").doc("Outputs a memory problems report.", "4.0.0"),
                spec("malloc-stats", 2, 0, NO_KEYS, memory_malloc_stats).acl(&["slow"]).group("server").doc("Returns the allocator statistics.", "4.0.0"),
                spec("report", -2, READONLY | BLOCKING, NO_KEYS, memory_report).acl(&["keyspace", "read", "slow"]).group("server").doc("Reports memory usage by key pattern (a densekv extension).", "7.4.0"),
                spec("purge", 2, 0, NO_KEYS, memory_purge).acl(&["slow"]).group("server").doc("Asks the allocator to release memory.", "4.0.0"),
                spec("help", 2, LOADING | STALE, NO_KEYS, memory_help).acl(&["slow"]).group("server").doc("Returns helpful text about the different subcommands.", "4.0.0"),
            ],
        )
        .doc("A container for memory diagnostics commands.", "4.0.0"),
        spec("swapdb", 3, WRITE | FAST, NO_KEYS, swapdb).acl(&["keyspace", "write", "fast", "dangerous"]).group("server").doc("Swaps two Redis databases.", "4.0.0"),
    ]
}

/// Type names SCAN TYPE accepts, as TYPE replies them.
const TYPE_NAMES: &[&str] = &["string", "list", "set", "zset", "hash", "stream"];

/// Redis shares the integer objects 0..9999; OBJECT REFCOUNT reports them as
/// INT_MAX unless an LRU/LFU policy with a maxmemory limit forbids sharing.
const SHARED_INTEGERS: i64 = 10_000;

pub use crate::memreport::encoding_name;

/// Marks `key` of database `db` as changed (WATCH, dirty counter, blocked clients).
fn modified_in(ctx: &mut Ctx, db: usize, key: &[u8]) {
    ctx.srv.dirty += 1;
    ctx.srv.touch_watched(db, key, ctx.client);
    ctx.srv.blocking.signal(db, key);
    ctx.invalidate(key);
}

/// Parses a database index: NotInt if not a 32-bit integer, DbIndex if out of range.
fn arg_db(ctx: &Ctx, a: &[u8]) -> Result<usize, CmdError> {
    let v = arg_i64(a)?;
    if i32::try_from(v).is_err() {
        return Err(CmdError::NotInt);
    }
    usize::try_from(v).ok().filter(|&i| i < ctx.srv.dbs.len()).ok_or(CmdError::DbIndex)
}

/// DEL key [key ...]
pub fn del(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // lazyfree-lazy-user-del yes: DEL frees as UNLINK does.
    let lazy = ctx.srv.config.flag("lazyfree-lazy-user-del");
    del_generic(ctx, args, lazy)
}

/// UNLINK key [key ...]: DEL that frees big values on the freeing thread.
pub fn unlink(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    del_generic(ctx, args, true)
}

fn del_generic(ctx: &mut Ctx, args: &[Vec<u8>], lazy: bool) -> CmdResult {
    let now = ctx.now;
    let mut n = 0;
    for k in &args[1..] {
        if let Some(v) = ctx.db().remove(k, now) {
            if lazy {
                crate::lazyfree::drop_value(&ctx.srv.lazyfree, v);
            }
            ctx.modified(k, notify::GENERIC, "del");
            n += 1;
        }
    }
    ctx.out().int(n);
    Ok(())
}

/// EXISTS key [key ...]
pub fn exists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ctx.db().no_touch = true;
    reply_present(ctx, &args[1..])
}

/// Replies with how many of `keys` exist, each lookup counted as a read
/// (EXISTS, TOUCH).
fn reply_present(ctx: &mut Ctx, keys: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    let n = keys
        .iter()
        .filter(|k| {
            let found = db.contains(k, now);
            db.note_read(k, found, true);
            found
        })
        .count();
    ctx.out().int(n as i64);
    Ok(())
}

/// TYPE key
pub fn type_(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    db.no_touch = true;
    let name = db.get_read(&args[1], now).map_or("none", |v| v.kind().name());
    ctx.out().simple(name);
    Ok(())
}

/// RENAME key newkey
pub fn rename(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    rename_generic(ctx, args, false)
}

/// RENAMENX key newkey
pub fn renamenx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    rename_generic(ctx, args, true)
}

fn rename_generic(ctx: &mut Ctx, args: &[Vec<u8>], nx: bool) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    let now = ctx.now;
    let db = ctx.db();
    let Some(expire) = db.expire_of(src, now) else { return Err(CmdError::NoSuchKey) };
    if src == dst || (nx && db.contains(dst, now)) {
        if nx {
            ctx.out().int(0);
        } else {
            ctx.out().ok();
        }
        return Ok(());
    }
    // The same object moves in Redis: a raw string stays raw.
    let raw = db.marked_raw(src);
    let value = db.remove(src, now).ok_or(CmdError::NoSuchKey)?;
    db.insert(dst, value, expire.map_or(Ttl::Clear, Ttl::At), now);
    if raw {
        db.mark_raw(dst, now);
    }
    ctx.key_modified(src);
    ctx.key_modified(dst);
    ctx.notify(notify::GENERIC, "rename_from", src);
    ctx.notify(notify::GENERIC, "rename_to", dst);
    if nx {
        ctx.out().int(1);
    } else {
        ctx.out().ok();
    }
    Ok(())
}

/// COPY source destination [DB destination-db] [REPLACE]
pub fn copy(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let src_db = ctx.client.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "db") && i + 1 < args.len() {
            dst_db = arg_db(ctx, &args[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if ctx.srv.cluster.is_some() && (src_db != 0 || dst_db != 0) {
        return Err(CmdError::err("Copying to another database is not allowed in cluster mode"));
    }
    let (src, dst) = (&args[1], &args[2]);
    if src_db == dst_db && src == dst {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let now = ctx.now;
    let db = &mut ctx.srv.dbs[src_db];
    let Some(expire) = db.expire_of(src, now) else {
        ctx.out().int(0);
        return Ok(());
    };
    let Some(value) = db.get(src, now).map(|v| v.to_owned()) else {
        ctx.out().int(0);
        return Ok(());
    };
    // Redis copies a raw string as a raw one.
    let raw = db.marked_raw(src);
    let target = &mut ctx.srv.dbs[dst_db];
    if !replace && target.contains(dst, now) {
        ctx.out().int(0);
        return Ok(());
    }
    target.insert(dst, value, expire.map_or(Ttl::Clear, Ttl::At), now);
    if raw {
        target.mark_raw(dst, now);
    }
    ctx.srv.expired_keys += target.take_lazy_expired();
    modified_in(ctx, dst_db, dst);
    ctx.notify_db(dst_db, notify::GENERIC, "copy_to", dst);
    ctx.out().int(1);
    Ok(())
}

/// MOVE key db
pub fn move_(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.cluster.is_some() {
        return Err(CmdError::err("MOVE is not allowed in cluster mode"));
    }
    let src_db = ctx.client.db;
    let dst_db = arg_db(ctx, &args[2])?;
    if src_db == dst_db {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let key = &args[1];
    let now = ctx.now;
    let Some(expire) = ctx.srv.dbs[src_db].expire_of(key, now) else {
        ctx.out().int(0);
        return Ok(());
    };
    let target = &mut ctx.srv.dbs[dst_db];
    let taken = target.contains(key, now);
    ctx.srv.expired_keys += target.take_lazy_expired();
    if taken {
        ctx.out().int(0);
        return Ok(());
    }
    let raw = ctx.srv.dbs[src_db].marked_raw(key);
    let Some(value) = ctx.srv.dbs[src_db].remove(key, now) else {
        ctx.out().int(0);
        return Ok(());
    };
    ctx.srv.dbs[dst_db].insert(key, value, expire.map_or(Ttl::Clear, Ttl::At), now);
    if raw {
        // The same object moves in Redis: a raw string stays raw.
        ctx.srv.dbs[dst_db].mark_raw(key, now);
    }
    modified_in(ctx, src_db, key);
    modified_in(ctx, dst_db, key);
    ctx.notify_db(src_db, notify::GENERIC, "move_from", key);
    ctx.notify_db(dst_db, notify::GENERIC, "move_to", key);
    ctx.out().int(1);
    Ok(())
}

/// KEYS pattern
pub fn keys_(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let pat = &args[1];
    let all = pat.as_slice() == b"*";
    let now = ctx.now;
    let mut found: Vec<Vec<u8>> = Vec::new();
    ctx.db().for_each(|k, _, exp| {
        if exp.is_none_or(|t| t > now) && (all || glob::matches(pat, k, false)) {
            found.push(k.to_vec());
        }
    });
    let out = ctx.out();
    out.array(found.len());
    for k in &found {
        out.bulk(k);
    }
    Ok(())
}

/// Parses a SCAN cursor as Redis does (an unsigned 64-bit decimal).
pub(crate) fn parse_cursor(a: &[u8]) -> Option<u64> {
    if let Some(v) = resp::num::parse_i64(a) {
        return u64::try_from(v).ok();
    }
    let s = std::str::from_utf8(a).ok()?.trim_start();
    s.strip_prefix('+').unwrap_or(s).parse::<u64>().ok()
}

/// Options shared by SCAN, SSCAN, HSCAN and ZSCAN.
pub(crate) struct ScanOpts<'a> {
    /// COUNT (default 10).
    pub count: usize,
    /// MATCH pattern; None for no pattern or `*`.
    pub pattern: Option<&'a [u8]>,
    /// SCAN's TYPE filter.
    pub type_name: Option<&'static str>,
    /// HSCAN's NOVALUES.
    pub novalues: bool,
}

/// The option a SCAN variant takes beyond MATCH and COUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScanExtra {
    /// SCAN: TYPE name.
    Type,
    /// HSCAN: NOVALUES.
    NoValues,
    /// SSCAN, ZSCAN: nothing more.
    Nothing,
}

/// Parses `[MATCH pattern] [COUNT count]` and the variant's extra option
/// from `args[from..]`, with Redis's errors.
pub(crate) fn parse_scan_opts(args: &[Vec<u8>], from: usize, extra: ScanExtra) -> Result<ScanOpts<'_>, CmdError> {
    let mut o = ScanOpts { count: 10, pattern: None, type_name: None, novalues: false };
    let mut i = from;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if is(&args[i], "count") && has_value {
            let n = arg_i64(&args[i + 1])?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else if is(&args[i], "match") && has_value {
            o.pattern = Some(args[i + 1].as_slice()).filter(|p| *p != b"*");
            i += 2;
        } else if extra == ScanExtra::Type && is(&args[i], "type") && has_value {
            let t = &args[i + 1];
            let name = TYPE_NAMES.iter().copied().find(|n| is(t, n));
            o.type_name = Some(name.ok_or_else(|| CmdError::err(format!("unknown type name '{}'", String::from_utf8_lossy(t))))?);
            i += 2;
        } else if is(&args[i], "novalues") {
            if extra != ScanExtra::NoValues {
                return Err(CmdError::err("NOVALUES option can only be used in HSCAN"));
            }
            o.novalues = true;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}


/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
pub fn scan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let cursor = parse_cursor(&args[1]).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let ScanOpts { count, pattern, type_name, .. } = parse_scan_opts(args, 2, ScanExtra::Type)?;
    let now = ctx.now;
    let db = ctx.db();
    let mut found: Vec<(Vec<u8>, bool)> = Vec::new();
    let next = db.scan(cursor, count, |k, v, exp| {
        if type_name.is_some_and(|t| t != v.kind().name()) {
            return;
        }
        if pattern.is_some_and(|p| !glob::matches(p, k, false)) {
            return;
        }
        found.push((k.to_vec(), exp.is_some_and(|t| t <= now)));
    });
    // Keys found expired are reclaimed now (lazy expiry) and left out.
    found.retain(|(k, expired)| !*expired || db.contains(k, now));
    let out = ctx.out();
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(found.len());
    for (k, _) in &found {
        out.bulk(k);
    }
    Ok(())
}

/// RANDOMKEY
pub fn randomkey(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    loop {
        let r = ctx.srv.random();
        let db = ctx.db();
        let Some(key) = db.random_key(r).map(|k| k.to_vec()) else {
            ctx.out().null();
            return Ok(());
        };
        // An expired key is reclaimed by the lookup and another one drawn.
        if db.contains(&key, now) {
            ctx.out().bulk(&key);
            return Ok(());
        }
    }
}

/// TOUCH key [key ...]
pub fn touch(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    reply_present(ctx, &args[1..])
}

/// True if the configured maxmemory-policy is of the `kind` ("lru" or "lfu") family.
fn policy_is(ctx: &Ctx, kind: &str) -> bool {
    ctx.srv.config.get("maxmemory-policy").is_some_and(|p| p.contains(kind))
}

/// Looks `key` up for OBJECT without touching it; replies null when absent.
fn object_lookup<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Option<&'a mut Db> {
    let now = ctx.now;
    let db = ctx.db();
    db.no_touch = true;
    let found = db.contains(key, now);
    // Counted as a read, but a miss is not announced (Redis's
    // LOOKUP_NONOTIFY).
    db.note_read(key, found, false);
    if found {
        return Some(ctx.db());
    }
    ctx.out().null();
    None
}

/// OBJECT ENCODING key
pub fn object_encoding(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let Some(db) = object_lookup(ctx, &args[2]) else { return Ok(()) };
    let mut name = db.get(&args[2], now).map_or("", encoding_name);
    if name == "embstr" && db.marked_raw(&args[2]) {
        name = "raw";
    }
    ctx.out().bulk(name.as_bytes());
    Ok(())
}

/// OBJECT FREQ key: the key's logarithmic access counter, decayed to now
/// (kept in the key's access bits under an LFU policy).
pub fn object_freq(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let lfu = ctx.srv.config.eviction.policy.lfu();
    let Some(db) = object_lookup(ctx, &args[2]) else { return Ok(()) };
    if !lfu {
        return Err(CmdError::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let freq = db.freq(&args[2], now).unwrap_or(0);
    ctx.out().int(freq as i64);
    Ok(())
}

/// OBJECT IDLETIME key
pub fn object_idletime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let lfu = ctx.srv.config.eviction.policy.lfu();
    let Some(db) = object_lookup(ctx, &args[2]) else { return Ok(()) };
    if lfu {
        return Err(CmdError::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let idle = db.idle_secs(&args[2], now).unwrap_or(0);
    ctx.out().int(idle);
    Ok(())
}

/// OBJECT REFCOUNT key
pub fn object_refcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let no_sharing = ctx.srv.config.maxmemory != 0 && (policy_is(ctx, "lru") || policy_is(ctx, "lfu"));
    let Some(db) = object_lookup(ctx, &args[2]) else { return Ok(()) };
    let shared = matches!(db.get(&args[2], now), Some(ValueRef::Str(StrRef::Int(v))) if (0..SHARED_INTEGERS).contains(&v));
    ctx.out().int(if shared && !no_sharing { i32::MAX as i64 } else { 1 });
    Ok(())
}

/// Writes Redis's HELP reply: a header, `lines`, then the HELP entry.
fn help_reply(ctx: &mut Ctx, cmd: &str, lines: &[&str]) {
    let out = ctx.out();
    out.array(lines.len() + 3);
    out.simple(&format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Print this help.");
}

/// OBJECT HELP
pub fn object_help(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    );
    Ok(())
}

/// Which variant of the EXPIRE family runs.
#[derive(Clone, Copy)]
struct ExpireCmd {
    name: &'static str,
    unit_ms: i64,
    absolute: bool,
}

/// EXPIRE key seconds [NX | XX | GT | LT]
pub fn expire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, ExpireCmd { name: "expire", unit_ms: 1000, absolute: false })
}

/// PEXPIRE key milliseconds [NX | XX | GT | LT]
pub fn pexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, ExpireCmd { name: "pexpire", unit_ms: 1, absolute: false })
}

/// EXPIREAT key unix-time-seconds [NX | XX | GT | LT]
pub fn expireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, ExpireCmd { name: "expireat", unit_ms: 1000, absolute: true })
}

/// PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]
pub fn pexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, ExpireCmd { name: "pexpireat", unit_ms: 1, absolute: true })
}

fn expire_generic(ctx: &mut Ctx, args: &[Vec<u8>], cmd: ExpireCmd) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            return Err(CmdError::err(format!("Unsupported option {}", String::from_utf8_lossy(a))));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::err("NX and XX, GT or LT options at the same time are not compatible"));
    }
    if gt && lt {
        return Err(CmdError::err("GT and LT options at the same time are not compatible"));
    }
    let invalid = || CmdError::err(format!("invalid expire time in '{}' command", cmd.name));
    let base = if cmd.absolute { 0 } else { ctx.now };
    let when = arg_i64(&args[2])?.checked_mul(cmd.unit_ms).ok_or_else(invalid)?.checked_add(base).ok_or_else(invalid)?;
    let key = &args[1];
    let now = ctx.now;
    let db = ctx.db();
    let Some(current) = db.expire_of(key, now) else {
        ctx.out().int(0);
        return Ok(());
    };
    // A key without a deadline counts as never expiring: GT never applies, LT always does.
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| when <= c))
        || (lt && current.is_some_and(|c| when >= c));
    if refused {
        ctx.out().int(0);
        return Ok(());
    }
    let event = if ctx.already_expired(when) {
        // A deadline already past deletes the key outright (a DEL, not an
        // expiry), and replicas and the AOF get that DEL (UNLINK under
        // lazyfree-lazy-expire), as Redis rewrites it: a past PEXPIREAT
        // would only set the deadline there, since a replica and a
        // replaying AOF never expire keys themselves.
        ctx.db().remove(key, now);
        let del = ctx.srv.expire_cmd().to_vec();
        ctx.srv.feed.replace_current(vec![del, key.clone()]);
        "del"
    } else {
        ctx.db().set_expire(key, Some(when), now);
        "expire"
    };
    ctx.modified(key, notify::GENERIC, event);
    ctx.out().int(1);
    Ok(())
}

/// Shared body of TTL, PTTL, EXPIRETIME and PEXPIRETIME.
fn ttl_generic(ctx: &mut Ctx, key: &[u8], ms: bool, absolute: bool) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    db.no_touch = true;
    let found = db.expire_of(key, now);
    db.note_read(key, found.is_some(), true);
    let reply = match found {
        None => -2,
        Some(None) => -1,
        Some(Some(t)) => {
            let v = if absolute { t } else { t.saturating_sub(now).max(0) };
            if ms {
                v
            } else {
                v.saturating_add(500) / 1000
            }
        }
    };
    ctx.out().int(reply);
    Ok(())
}

/// TTL key
pub fn ttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &args[1], false, false)
}

/// PTTL key
pub fn pttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &args[1], true, false)
}

/// EXPIRETIME key
pub fn expiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &args[1], false, true)
}

/// PEXPIRETIME key
pub fn pexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &args[1], true, true)
}

/// PERSIST key
pub fn persist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let key = &args[1];
    let db = ctx.db();
    if db.expire_of(key, now).flatten().is_some() {
        db.set_expire(key, None, now);
        ctx.modified(key, notify::GENERIC, "persist");
        ctx.out().int(1);
    } else {
        ctx.out().int(0);
    }
    Ok(())
}

/// MEMORY USAGE key [SAMPLES count]
pub fn memory_usage(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "samples") && i + 1 < args.len() {
            if arg_i64(&args[i + 1])? < 0 {
                return Err(CmdError::Syntax);
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    // Sizes are exact, so SAMPLES only needs validating.
    let now = ctx.now;
    match ctx.db().mem_usage(&args[2], now) {
        Some(n) => ctx.out().int(n as i64),
        None => ctx.out().null(),
    }
    Ok(())
}

/// MEMORY REPORT [DB index] [PREFIX prefix] [SAMPLES count] [LIMIT count]
///
/// A densekv extension (see `memreport`): the client waits while the
/// database is walked in slices between other clients' commands, then this
/// runs again and writes the report.
pub fn memory_report(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let id = ctx.client.id;
    if let Some(done) = ctx.srv.reports.take_done(id) {
        memreport::write_reply(ctx.out(), &done);
        return Ok(());
    }
    let mut opts = memreport::Options { db: ctx.client.db, limit: 100, samples: None, prefix: None };
    let mut i = 2;
    while i < args.len() {
        let Some(v) = args.get(i + 1) else { return Err(CmdError::Syntax) };
        if is(&args[i], "db") {
            opts.db = arg_db(ctx, v)?;
        } else if is(&args[i], "prefix") {
            opts.prefix = Some(v.clone());
        } else if is(&args[i], "samples") || is(&args[i], "limit") {
            let n = arg_i64(v)?;
            if n <= 0 {
                return Err(CmdError::err(format!("{} must be positive", String::from_utf8_lossy(&args[i]).to_ascii_uppercase())));
            }
            if is(&args[i], "samples") {
                opts.samples = Some(n as u64);
            } else {
                opts.limit = n as usize;
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let mut job = memreport::Job::new(opts.clone(), ctx.srv.dbs[opts.db].len() as u64);
    if !ctx.may_block() {
        // Inside MULTI or a script: nothing else runs meanwhile anyway.
        let now = ctx.now;
        job.step(&mut ctx.srv.dbs[opts.db], now, None);
        memreport::write_reply(ctx.out(), &job.finish());
        return Ok(());
    }
    ctx.srv.reports.start(id, job);
    ctx.block(BlockRequest::on_keys(Vec::new(), None, |_| false));
    Ok(())
}

/// MEMORY STATS: Redis's field names, filled with what we measure.
pub fn memory_stats(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let allocated = memory::allocated();
    let active = memory::active();
    let resident = memory::resident();
    let rss = memory::rss();
    // total.allocated is used_memory, as in Redis (INFO shows the same).
    let used = ctx.srv.used_memory();
    let peak = ctx.srv.peak_memory.max(used);
    let si = ctx.host.scripts_ref().info();
    let o = crate::overhead::Overhead::of(ctx.srv, ctx.client, &si);
    let dbs: Vec<(usize, usize)> = ctx.srv.dbs.iter().enumerate().filter(|(_, d)| !d.is_empty()).map(|(i, d)| (i, d.len())).collect();
    let keys: u64 = dbs.iter().map(|&(_, n)| n as u64).sum();
    let overhead = o.total();
    let dataset = used.saturating_sub(overhead);
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let out = &mut ctx.client.reply;
    out.map(31 + dbs.len());
    let int = |out: &mut resp::Reply, name: &str, v: u64| {
        out.bulk(name.as_bytes());
        out.int(i64::try_from(v).unwrap_or(i64::MAX));
    };
    int(out, "peak.allocated", peak);
    int(out, "total.allocated", used);
    int(out, "startup.allocated", o.startup);
    int(out, "replication.backlog", o.backlog);
    int(out, "clients.slaves", o.replicas);
    int(out, "clients.normal", o.normal);
    int(out, "cluster.links", o.links);
    int(out, "aof.buffer", o.aof);
    int(out, "lua.caches", o.lua);
    int(out, "functions.caches", o.functions);
    // The keyspace's table is in the dataset: densekv has no per-database
    // dictionaries to count apart.
    for &(i, _) in &dbs {
        out.bulk(format!("db.{i}").as_bytes());
        out.map(2);
        int(out, "overhead.hashtable.main", 0);
        int(out, "overhead.hashtable.expires", 0);
    }
    int(out, "overhead.db.hashtable.lut", 0);
    int(out, "overhead.db.hashtable.rehashing", 0);
    int(out, "overhead.total", overhead);
    int(out, "db.dict.rehashing.count", 0);
    int(out, "keys.count", keys);
    int(out, "keys.bytes-per-key", dataset.checked_div(keys).unwrap_or(0));
    int(out, "dataset.bytes", dataset);
    out.bulk(b"dataset.percentage");
    out.double(100.0 * ratio(dataset, used.saturating_sub(o.startup)));
    out.bulk(b"peak.percentage");
    out.double(100.0 * ratio(used, peak));
    int(out, "allocator.allocated", allocated);
    int(out, "allocator.active", active);
    int(out, "allocator.resident", resident);
    int(out, "allocator.muzzy", 0);
    out.bulk(b"allocator-fragmentation.ratio");
    out.double(ratio(active, allocated));
    int(out, "allocator-fragmentation.bytes", active.saturating_sub(allocated));
    out.bulk(b"allocator-rss.ratio");
    out.double(ratio(resident, active));
    int(out, "allocator-rss.bytes", resident.saturating_sub(active));
    out.bulk(b"rss-overhead.ratio");
    out.double(ratio(rss, resident));
    int(out, "rss-overhead.bytes", rss.saturating_sub(resident));
    out.bulk(b"fragmentation");
    out.double(ratio(rss, used));
    int(out, "fragmentation.bytes", rss.saturating_sub(used));
    Ok(())
}

/// Below this much allocated memory MEMORY DOCTOR declines to judge, as Redis does.
const DOCTOR_MIN_BYTES: u64 = 5 * 1024 * 1024;

/// MEMORY DOCTOR
pub fn memory_doctor(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let text: &str = if memory::allocated() < DOCTOR_MIN_BYTES {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n"
    } else {
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n"
    };
    ctx.out().verbatim(text.as_bytes());
    Ok(())
}

/// MEMORY MALLOC-STATS: the allocator's main counters.
pub fn memory_malloc_stats(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let text = format!(
        "___ Begin jemalloc statistics ___\nAllocated: {}, active: {}, resident: {}\n--- End jemalloc statistics ---\n",
        memory::allocated(),
        memory::active(),
        memory::resident()
    );
    ctx.out().verbatim(text.as_bytes());
    Ok(())
}

/// MEMORY PURGE: jemalloc returns dirty pages on its own schedule; nothing to force.
pub fn memory_purge(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    ctx.out().ok();
    Ok(())
}

/// MEMORY HELP
pub fn memory_help(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "REPORT [DB <index>] [PREFIX <prefix>] [SAMPLES <count>] [LIMIT <count>]",
            "    Group the keys of a database by pattern (digit runs, hex ids and UUIDs",
            "    replaced by placeholders) and report keys, bytes, types, encodings, TTLs",
            "    and the largest keys of each pattern, and key sizes per type (densekv).",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

/// SWAPDB index1 index2
pub fn swapdb(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.cluster.is_some() {
        return Err(CmdError::err("SWAPDB is not allowed in cluster mode"));
    }
    let parse = |a: &[u8], what: &str| {
        resp::num::parse_i64(a).filter(|v| i32::try_from(*v).is_ok()).ok_or_else(|| CmdError::err(format!("invalid {what} DB index")))
    };
    let a = parse(&args[1], "first")?;
    let b = parse(&args[2], "second")?;
    let n = ctx.srv.dbs.len();
    let (Ok(a), Ok(b)) = (usize::try_from(a), usize::try_from(b)) else { return Err(CmdError::DbIndex) };
    if a >= n || b >= n {
        return Err(CmdError::DbIndex);
    }
    // A watcher is disturbed if its key exists in either database, before or after.
    ctx.srv.touch_all_watched(Some(a), ctx.client);
    ctx.srv.touch_all_watched(Some(b), ctx.client);
    ctx.srv.dbs.swap(a, b);
    ctx.srv.touch_all_watched(Some(a), ctx.client);
    ctx.srv.touch_all_watched(Some(b), ctx.client);
    // Blocked clients stay with their database index, now over other data.
    ctx.srv.blocking.signal_db(a);
    ctx.srv.blocking.signal_db(b);
    ctx.srv.dirty += 1;
    ctx.out().ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::Value;

    #[test]
    fn encoding_names() {
        assert_eq!(encoding_name(Value::string(b"123").as_ref()), "int");
        assert_eq!(encoding_name(Value::string(&[b'a'; 44]).as_ref()), "embstr");
        assert_eq!(encoding_name(Value::string(&[b'a'; 45]).as_ref()), "raw");
        assert_eq!(encoding_name(Value::string(b"0123").as_ref()), "embstr");
    }

    #[test]
    fn cursors() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"-1"), None);
        assert_eq!(parse_cursor(b"abc"), None);
        assert_eq!(parse_cursor(b""), None);
    }
}
