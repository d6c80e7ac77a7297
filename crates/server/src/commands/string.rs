//! String commands: GET/SET and their variants, counters, ranges and LCS.
//!
//! Strings are read through `StrRef` without copying where the reply can be
//! written straight from the stored bytes (`ctx.read_str`). A string that is the
//! canonical decimal form of an i64 is stored as an integer (`Value::string`),
//! so counters never parse text. Strings are replaced whole (`ctx.set_value`
//! with `Ttl::Keep`) because the keyspace hands out read-only string views;
//! size limits are checked before anything is allocated.
//!
//! Argument checks happen in Redis's order (option syntax first, then the
//! key's type, then option values where Redis does it so), because clients
//! and Redis's test suite see which error wins.

use resp::Reply;
use storage::{IncrError, StrRef, Ttl, Value};

use crate::command::flags::*;
use crate::ldouble::Ext;
use crate::notify;
use crate::command::{arg_i64, is, keys, kf, range_spec, spec, CmdError, CmdResult, Ctx, KeyFlags, Spec};
use crate::keyspec::{Begin, Find, KeySpec};

/// SET's key flags: it reads the old value only with GET or a condition.
fn set_keys(argv: &[Vec<u8>]) -> Vec<(usize, KeyFlags)> {
    let reads = argv.iter().skip(3).any(|a| is(a, "get") || Cond::parse(a).is_some());
    vec![(1, if reads { kf::RW_ACCESS_UPDATE } else { kf::OW_UPDATE })]
}

/// DELEX's key flags: a plain delete, or one that reads the value first.
fn delex_keys(argv: &[Vec<u8>]) -> Vec<(usize, KeyFlags)> {
    vec![(1, if argv.len() > 2 { kf::RW_ACCESS_DELETE } else { kf::RM_DELETE })]
}

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    const RF: &[&str] = &["read", "string", "fast"];
    const RS: &[&str] = &["read", "string", "slow"];
    const WF: &[&str] = &["write", "string", "fast"];
    const WS: &[&str] = &["write", "string", "slow"];
    let k1 = keys(1, 1, 1);
    let s = |name, arity, flags, k, h, acl, summary, since| spec(name, arity, flags, k, h).acl(acl).group("string").doc(summary, since);
    vec![
        s("get", 2, READONLY | FAST, k1, get, RF, "Returns the string value of a key.", "1.0.0"),
        s("set", -3, WRITE | DENYOOM, k1, set, WS, "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", "1.0.0")
            .key_specs(vec![range_spec(&["RW", "access", "update", "variable_flags"], 1, 0, 1)])
            .getkeys(set_keys),
        s("setnx", 3, WRITE | DENYOOM | FAST, k1, setnx, WF, "Set the string value of a key only when the key doesn't exist.", "1.0.0"),
        s("setex", 4, WRITE | DENYOOM, k1, setex, WS, "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", "2.0.0"),
        s("psetex", 4, WRITE | DENYOOM, k1, psetex, WS, "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", "2.6.0"),
        s("mget", -2, READONLY | FAST, keys(1, -1, 1), mget, RF, "Atomically returns the string values of one or more keys.", "1.0.0"),
        s("mset", -3, WRITE | DENYOOM, keys(1, -1, 2), mset, WS, "Atomically creates or modifies the string values of one or more keys.", "1.0.1")
            .key_specs(vec![range_spec(kf::OW_UPDATE, 1, -1, 2)]),
        s("msetnx", -3, WRITE | DENYOOM, keys(1, -1, 2), msetnx, WS, "Atomically modifies the string values of one or more keys only when all keys don't exist.", "1.0.1"),
        s("getset", 3, WRITE | DENYOOM | FAST, k1, getset, WF, "Returns the previous string value of a key after setting it to a new value.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("getdel", 2, WRITE | FAST, k1, getdel, WF, "Returns the string value of a key after deleting the key.", "6.2.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1)]),
        s("getex", -2, WRITE | FAST, k1, getex, WF, "Returns the string value of a key after setting its expiration time.", "6.2.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("append", 3, WRITE | DENYOOM | FAST, k1, append, WF, "Appends a string to the value of a key. Creates the key if it doesn't exist.", "2.0.0"),
        s("strlen", 2, READONLY | FAST, k1, strlen, RF, "Returns the length of a string value.", "2.2.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        s("incr", 2, WRITE | DENYOOM | FAST, k1, incr, WF, "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("decr", 2, WRITE | DENYOOM | FAST, k1, decr, WF, "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("incrby", 3, WRITE | DENYOOM | FAST, k1, incrby, WF, "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("decrby", 3, WRITE | DENYOOM | FAST, k1, decrby, WF, "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("incrbyfloat", 3, WRITE | DENYOOM | FAST, k1, incrbyfloat, WF, "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "2.6.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("getrange", 4, READONLY, k1, getrange, RS, "Returns a substring of the string stored at a key.", "2.4.0"),
        s("substr", 4, READONLY, k1, getrange, RS, "Returns a substring from a string value.", "1.0.0"),
        s("setrange", 4, WRITE | DENYOOM, k1, setrange, WS, "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", "2.2.0"),
        s("lcs", -3, READONLY, keys(1, 2, 1), lcs, RS, "Finds the longest common substring.", "7.0.0"),
        s("digest", 2, READONLY | FAST, k1, digest, RF, "Returns the XXH3 hash of a string value.", "8.4.0")
            .key_specs(vec![range_spec(kf::RO_ACCESS, 1, 0, 1)]),
        s("delex", -2, WRITE | FAST, k1, delex, WF, "Conditionally removes the specified key based on value or digest comparison.", "8.4.0")
            .key_specs(vec![range_spec(&["RW", "delete", "variable_flags"], 1, 0, 1)])
            .getkeys(delex_keys),
        s("msetex", -4, WRITE | DENYOOM, crate::keyspec::NO_KEYS, msetex, WS, "Atomically sets multiple string keys with a shared expiration in a single operation. Supports flexible argument parsing where condition and expiration flags can appear in any order.", "8.4.0")
            .key_specs(vec![KeySpec { flags: kf::OW_UPDATE, begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 2 } }]),
        s("increx", -2, WRITE | DENYOOM | FAST, k1, increx, WF, "Increments the numeric value of a key by a number and sets its expiration time. Uses 0 as initial value if the key doesn't exist.", "8.8.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("delifeq", 3, WRITE, k1, delifeq, WS, "Delete key if value matches string.", "9.0.0")
            .key_specs(vec![range_spec(&["RM", "access", "delete"], 1, 0, 1)]),
    ]
}

/// Runs `f` on the bytes of `s` (an integer is formatted into a small buffer).
pub(crate) fn with_bytes<R>(s: StrRef<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
    match s {
        StrRef::Bytes(b) => f(b),
        StrRef::Int(v) => {
            let mut buf = Vec::with_capacity(20);
            resp::num::write_i64(&mut buf, v);
            f(&buf)
        }
    }
}

/// Writes a stored string as a bulk reply.
fn reply_str(out: &mut Reply, s: StrRef<'_>) {
    match s {
        StrRef::Int(v) => out.bulk_i64(v),
        StrRef::Bytes(b) => out.bulk(b),
    }
}

/// Errs unless a string of `size + append` bytes fits in `max`
/// (proto-max-bulk-len).
fn check_string_len(max: i64, size: u64, append: u64) -> CmdResult {
    match size.checked_add(append) {
        Some(total) if total <= max as u64 => Ok(()),
        _ => Err(CmdError::err("string exceeds maximum allowed size (proto-max-bulk-len)")),
    }
}

/// Replies with the value of `key` (null if absent), as GET does. Its
/// lookup counts as a read (keyspace hits and misses, keymiss) inside the
/// write commands that use it too (GETDEL, GETSET, SET GET), as Redis's
/// getGenericCommand reads.
fn reply_get(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    ctx.counting_reads(|ctx| reply_value(ctx, key))
}

fn reply_value(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let (s, out) = ctx.read_str(key)?;
    match s {
        Some(s) => reply_str(out, s),
        None => out.null(),
    }
    Ok(())
}

/// GET key
pub fn get(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    reply_get(ctx, &args[1])
}

/// Which expire option was given (they exclude each other).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExpireKind {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// A compare-before-write condition (SET's and DELEX's IFEQ, IFNE, IFDEQ,
/// IFDNE, Redis 8.4): on the value itself, or on its digest (`DIGEST`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    Eq,
    Ne,
    DigestEq,
    DigestNe,
}

impl Cond {
    fn parse(word: &[u8]) -> Option<Cond> {
        [("ifeq", Cond::Eq), ("ifne", Cond::Ne), ("ifdeq", Cond::DigestEq), ("ifdne", Cond::DigestNe)]
            .into_iter()
            .find(|(n, _)| is(word, n))
            .map(|(_, c)| c)
    }

    /// True when the condition needs the key to exist (IFEQ, IFDEQ): a
    /// missing key fails them as XX fails; IFNE and IFDNE pass it.
    fn needs_key(self) -> bool {
        matches!(self, Cond::Eq | Cond::DigestEq)
    }

    /// Whether the stored string `cur` passes the condition against `arg`.
    /// Digests compare as hex text, case-insensitively.
    fn holds(self, cur: &[u8], arg: &[u8]) -> bool {
        match self {
            Cond::Eq => cur == arg,
            Cond::Ne => cur != arg,
            Cond::DigestEq => digest_hex(cur).as_bytes().eq_ignore_ascii_case(arg),
            Cond::DigestNe => !digest_hex(cur).as_bytes().eq_ignore_ascii_case(arg),
        }
    }
}

/// The digest Redis gives a string value (DIGEST, IFDEQ, IFDNE): XXH3's
/// 64-bit hash with seed 0, as 16 lowercase hex digits.
pub(crate) fn digest_hex(value: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(value))
}

/// Options shared by SET and GETEX.
#[derive(Default)]
struct StrOpts<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<(ExpireKind, &'a [u8])>,
    /// SET's IFEQ / IFNE / IFDEQ / IFDNE and its argument; excludes NX, XX
    /// and the other conditions.
    cond: Option<(Cond, &'a [u8])>,
}

/// Parses SET's (`set == true`, from argv[3]) or GETEX's options (from argv[2]),
/// with Redis's compatibility rules: the same expire option may repeat (the
/// last wins), different ones conflict.
fn parse_str_opts(args: &[Vec<u8>], set: bool) -> Result<StrOpts<'_>, CmdError> {
    let mut o = StrOpts::default();
    let mut i = if set { 3 } else { 2 };
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        let other_expire = |k: ExpireKind| matches!(o.expire, Some((e, _)) if e != k);
        let kind = if is(a, "ex") {
            Some(ExpireKind::Ex)
        } else if is(a, "px") {
            Some(ExpireKind::Px)
        } else if is(a, "exat") {
            Some(ExpireKind::ExAt)
        } else if is(a, "pxat") {
            Some(ExpireKind::PxAt)
        } else {
            None
        };
        let cond = if set { Cond::parse(a) } else { None };
        if set && is(a, "nx") && !o.xx && o.cond.is_none() {
            o.nx = true;
        } else if set && is(a, "xx") && !o.nx && o.cond.is_none() {
            o.xx = true;
        } else if let (Some(c), Some(n), false) = (cond, next, o.nx || o.xx || o.cond.is_some()) {
            o.cond = Some((c, n));
            i += 1;
        } else if set && is(a, "get") {
            o.get = true;
        } else if set && is(a, "keepttl") && o.expire.is_none() {
            o.keepttl = true;
        } else if !set && is(a, "persist") && o.expire.is_none() {
            o.persist = true;
        } else if let (Some(k), Some(n)) = (kind, next) {
            if o.keepttl || o.persist || other_expire(k) {
                return Err(CmdError::Syntax);
            }
            o.expire = Some((k, n));
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

fn invalid_expire(cmd: &str) -> CmdError {
    CmdError::err(format!("invalid expire time in '{cmd}' command"))
}

/// Turns an expire option value into an absolute Unix ms deadline, with
/// Redis's checks: positive, no overflow once scaled and made absolute.
fn expire_deadline(cmd: &str, kind: ExpireKind, arg: &[u8], now: i64) -> Result<i64, CmdError> {
    let v = arg_i64(arg)?;
    let secs = matches!(kind, ExpireKind::Ex | ExpireKind::ExAt);
    if v <= 0 || (secs && v > i64::MAX / 1000) {
        return Err(invalid_expire(cmd));
    }
    let ms = if secs { v * 1000 } else { v };
    match kind {
        ExpireKind::Ex | ExpireKind::Px => ms.checked_add(now).ok_or_else(|| invalid_expire(cmd)),
        _ => Ok(ms),
    }
}

/// What SET-like commands reply when they did (or did not) set.
enum SetReply {
    /// `+OK` / null (SET, SETEX, PSETEX).
    OkNull,
    /// `:1` / `:0` (SETNX).
    OneZero,
}

/// The core of SET, SETNX, SETEX and PSETEX.
fn set_generic(ctx: &mut Ctx, cmd: &str, o: &StrOpts, key: &[u8], val: &[u8], reply: SetReply) -> CmdResult {
    let now = ctx.now;
    let deadline = match o.expire {
        Some((kind, arg)) => Some(expire_deadline(cmd, kind, arg, now)?),
        None => None,
    };
    if o.get {
        // The old value is the reply whatever happens next.
        reply_get(ctx, key)?;
    }
    // Only the conditions read whether the key exists: a plain SET does
    // not pay a second lookup of it.
    let found = (o.nx || o.xx || o.cond.is_some()) && ctx.db().contains(key, now);
    let mut refused = (o.nx && found) || ((o.xx || o.cond.is_some_and(|(c, _)| c.needs_key())) && !found);
    if let (Some((c, arg)), true, false) = (o.cond, found, refused) {
        // The condition reads the old value, which must then be a string
        // (with GET the type was checked above already).
        let cur = ctx.read_str(key)?.0.map(|s| with_bytes(s, |b| c.holds(b, arg)));
        refused = cur == Some(false);
    }
    if refused {
        if !o.get {
            match reply {
                SetReply::OkNull => ctx.out().null(),
                SetReply::OneZero => ctx.out().int(0),
            }
        }
        return Ok(());
    }
    let ttl = match (deadline, o.keepttl) {
        (Some(t), _) => Ttl::At(t),
        (None, true) => Ttl::Keep,
        (None, false) => Ttl::Clear,
    };
    ctx.set_str(key, val, ttl);
    ctx.notify(notify::STRING, "set", key);
    if deadline.is_some() {
        ctx.notify(notify::GENERIC, "expire", key);
    }
    if !o.get {
        match reply {
            SetReply::OkNull => ctx.out().ok(),
            SetReply::OneZero => ctx.out().int(1),
        }
    }
    Ok(())
}

/// SET key value [NX | XX | IFEQ v | IFNE v | IFDEQ d | IFDNE d] [GET]
/// [EX s | PX ms | EXAT ts | PXAT ts | KEEPTTL]
pub fn set(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let o = parse_str_opts(args, true)?;
    set_generic(ctx, "set", &o, &args[1], &args[2], SetReply::OkNull)
}

/// SETNX key value
pub fn setnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let o = StrOpts { nx: true, ..StrOpts::default() };
    set_generic(ctx, "setnx", &o, &args[1], &args[2], SetReply::OneZero)
}

/// SETEX key seconds value
pub fn setex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let o = StrOpts { expire: Some((ExpireKind::Ex, &args[2])), ..StrOpts::default() };
    set_generic(ctx, "setex", &o, &args[1], &args[3], SetReply::OkNull)
}

/// PSETEX key milliseconds value
pub fn psetex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let o = StrOpts { expire: Some((ExpireKind::Px, &args[2])), ..StrOpts::default() };
    set_generic(ctx, "psetex", &o, &args[1], &args[3], SetReply::OkNull)
}

/// GETEX key [EX s | PX ms | EXAT ts | PXAT ts | PERSIST]
pub fn getex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // Its lookup is a read (Redis's lookupKeyRead), though GETEX writes;
    // nothing after it reads a key.
    ctx.counting_reads(|ctx| getex_value(ctx, args))
}

fn getex_value(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let o = parse_str_opts(args, false)?;
    let key = &args[1];
    let now = ctx.now;
    let (s, out) = ctx.read_str(key)?;
    let Some(s) = s else {
        out.null();
        return Ok(());
    };
    // Redis checks the expire value only once the key is known to exist.
    let deadline = match o.expire {
        Some((kind, arg)) => Some((kind, expire_deadline("getex", kind, arg, now)?)),
        None => None,
    };
    reply_str(out, s);
    match deadline {
        Some((ExpireKind::ExAt | ExpireKind::PxAt, t)) if ctx.already_expired(t) => {
            ctx.db().remove(key, now);
            ctx.modified(key, notify::GENERIC, "del");
            // Replayed as the delete, as EXPIRE with a past deadline is.
            let del = ctx.srv.expire_cmd().to_vec();
            ctx.srv.feed.replace_current(vec![del, key.clone()]);
        }
        Some((_, t)) => {
            ctx.db().set_expire(key, Some(t), now);
            ctx.modified(key, notify::GENERIC, "expire");
        }
        None if o.persist => {
            if matches!(ctx.db().expire_of(key, now), Some(Some(_))) {
                ctx.db().set_expire(key, None, now);
                ctx.modified(key, notify::GENERIC, "persist");
            }
        }
        None => {}
    }
    Ok(())
}

/// GETDEL key
pub fn getdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    reply_get(ctx, key)?;
    let now = ctx.now;
    if ctx.db().remove(key, now).is_some() {
        ctx.modified(key, notify::GENERIC, "del");
    }
    Ok(())
}

/// GETSET key value
pub fn getset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    reply_get(ctx, &args[1])?;
    ctx.set_str(&args[1], &args[2], Ttl::Clear);
    ctx.notify(notify::STRING, "set", &args[1]);
    Ok(())
}

/// MGET key [key ...]: keys of other types read as null.
pub fn mget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ctx.out().array(args.len() - 1);
    for k in &args[1..] {
        match ctx.read_str(k) {
            Ok((Some(s), out)) => reply_str(out, s),
            Ok((None, out)) => out.null(),
            Err(_) => ctx.out().null(),
        }
    }
    Ok(())
}

fn mset_generic(ctx: &mut Ctx, args: &[Vec<u8>], nx: bool) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Arity(if nx { "msetnx" } else { "mset" }.into()));
    }
    let now = ctx.now;
    if nx && args[1..].chunks(2).any(|kv| ctx.srv.dbs[ctx.client.db].contains(&kv[0], now)) {
        ctx.out().int(0);
        return Ok(());
    }
    for kv in args[1..].chunks(2) {
        ctx.set_str(&kv[0], &kv[1], Ttl::Clear);
        ctx.notify(notify::STRING, "set", &kv[0]);
    }
    if nx {
        ctx.out().int(1);
    } else {
        ctx.out().ok();
    }
    Ok(())
}

/// MSET key value [key value ...]
pub fn mset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    mset_generic(ctx, args, false)
}

/// MSETNX key value [key value ...]
pub fn msetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    mset_generic(ctx, args, true)
}

/// DIGEST key: the XXH3 digest of a string value as 16 hex digits; null
/// when the key is missing.
pub fn digest(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (s, out) = ctx.read_str(&args[1])?;
    match s {
        Some(s) => out.bulk(with_bytes(s, digest_hex).as_bytes()),
        None => out.null(),
    }
    Ok(())
}

/// Deletes `key` after a condition passed and replicates the delete as
/// DEL, so that a replay does not compare again.
fn delete_checked(ctx: &mut Ctx, key: &[u8]) {
    let now = ctx.now;
    ctx.db().remove(key, now);
    ctx.modified(key, notify::GENERIC, "del");
    ctx.srv.feed.replace_current(vec![b"DEL".to_vec(), key.to_vec()]);
}

/// DELEX key [IFEQ v | IFNE v | IFDEQ d | IFDNE d]: DEL of one key, or,
/// with a condition, of a string key whose value (or digest) passes it.
pub fn delex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let now = ctx.now;
    if args.len() == 2 {
        let n = if ctx.db().remove(key, now).is_some() {
            ctx.modified(key, notify::GENERIC, "del");
            1
        } else {
            0
        };
        ctx.out().int(n);
        return Ok(());
    }
    let cond = match (args.len(), Cond::parse(&args[2])) {
        (4, Some(c)) => c,
        _ => return Err(CmdError::Syntax),
    };
    delete_if(ctx, key, |b| cond.holds(b, &args[3]))
}

/// Deletes the string at `key` if `test` holds for its bytes; replies 1
/// if it did, 0 if not or absent (WRONGTYPE for another type).
fn delete_if(ctx: &mut Ctx, key: &[u8], test: impl FnOnce(&[u8]) -> bool) -> CmdResult {
    let pass = ctx.read_str(key)?.0.map(|s| with_bytes(s, test));
    if pass == Some(true) {
        delete_checked(ctx, key);
        ctx.out().int(1);
    } else {
        ctx.out().int(0);
    }
    Ok(())
}

/// DELIFEQ key value (Valkey 9): deletes a string key holding `value`.
pub fn delifeq(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    delete_if(ctx, &args[1], |b| b == &args[2][..])
}

/// MSETEX numkeys key value [key value ...] [NX | XX]
/// [EX s | PX ms | EXAT ts | PXAT ts | KEEPTTL]: MSET with one condition
/// for all keys (NX: none exists, XX: all exist) and one expiry; 1 when
/// set, 0 when the condition failed. Options may come in any order.
pub fn msetex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let bad_numkeys = || CmdError::err("invalid numkeys value");
    let n = arg_i64(&args[1]).map_err(|_| bad_numkeys())?;
    if n < 1 || n > (args.len() as i64 - 2) / 2 {
        return Err(bad_numkeys());
    }
    let pairs_end = 2 + 2 * n as usize;
    let (mut nx, mut xx, mut keepttl) = (false, false, false);
    let mut expire: Option<(ExpireKind, &[u8])> = None;
    let mut i = pairs_end;
    while i < args.len() {
        let a = &args[i];
        let kind = [("ex", ExpireKind::Ex), ("px", ExpireKind::Px), ("exat", ExpireKind::ExAt), ("pxat", ExpireKind::PxAt)]
            .into_iter()
            .find(|(w, _)| is(a, w))
            .map(|(_, k)| k);
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "keepttl") && expire.is_none() {
            keepttl = true;
        } else if let (Some(k), Some(v)) = (kind, args.get(i + 1)) {
            if keepttl || matches!(expire, Some((e, _)) if e != k) {
                return Err(CmdError::Syntax);
            }
            expire = Some((k, v));
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let now = ctx.now;
    let deadline = match expire {
        Some((kind, arg)) => Some(expire_deadline("msetex", kind, arg, now)?),
        None => None,
    };
    let pairs = &args[2..pairs_end];
    if nx || xx {
        let db = &mut ctx.srv.dbs[ctx.client.db];
        let ok = pairs.chunks(2).all(|kv| db.contains(&kv[0], now) == xx);
        if !ok {
            ctx.out().int(0);
            return Ok(());
        }
    }
    let ttl = match (deadline, keepttl) {
        (Some(t), _) => Ttl::At(t),
        (None, true) => Ttl::Keep,
        (None, false) => Ttl::Clear,
    };
    for kv in pairs.chunks(2) {
        ctx.set_str(&kv[0], &kv[1], ttl);
        ctx.notify(notify::STRING, "set", &kv[0]);
        if deadline.is_some() {
            ctx.notify(notify::GENERIC, "expire", &kv[0]);
        }
    }
    if let (Some(t), Some((kind, _))) = (deadline, expire) {
        if kind != ExpireKind::PxAt {
            // Replayed with the absolute deadline, as SET is.
            let mut replay = args[..pairs_end].to_vec();
            replay.extend(args[pairs_end..].iter().filter(|a| is(a, "nx") || is(a, "xx")).cloned());
            replay.push(b"PXAT".to_vec());
            replay.push(t.to_string().into_bytes());
            ctx.srv.feed.replace_current(replay);
        }
    }
    ctx.out().int(1);
    Ok(())
}

/// APPEND key value
pub fn append(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, tail) = (&args[1], &args[2]);
    let max = ctx.srv.config.proto_max_bulk_len;
    let (new, existed) = match ctx.read_str(key)?.0 {
        None => (Value::string(tail), false),
        Some(s) => {
            // Checked before copying, so an oversize append allocates nothing.
            check_string_len(max, s.len() as u64, tail.len() as u64)?;
            let mut v = Vec::with_capacity(s.len() + tail.len());
            with_bytes(s, |b| v.extend_from_slice(b));
            v.extend_from_slice(tail);
            // Kept as bytes even when it reads as an integer: Redis leaves an
            // appended string raw (OBJECT ENCODING, `keys::encoding_name`).
            (Value::Bytes(v), true)
        }
    };
    let len = match &new {
        Value::Int(i) => storage::strref::int_len(*i),
        Value::Bytes(b) => b.len(),
        Value::Hash(_) | Value::ZSet(_) | Value::List(_) | Value::Set(_) | Value::Stream(_) => unreachable!("APPEND builds a string"),
    };
    ctx.set_value(key, new, Ttl::Keep);
    if existed {
        // An existing string grown in place: Redis reports it "raw".
        let now = ctx.now;
        ctx.db().mark_raw(key, now);
    }
    ctx.notify(notify::STRING, "append", key);
    ctx.out().int(len as i64);
    Ok(())
}

/// STRLEN key
pub fn strlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // The stored length, O(1) even for a packed string.
    let now = ctx.now;
    let db = ctx.db();
    let found = db.str_len(&args[1], now);
    db.note_read(&args[1], found.is_some(), true);
    let n = match found {
        None => 0,
        Some(Some(n)) => n,
        Some(None) => return Err(CmdError::WrongType),
    };
    ctx.out().int(n as i64);
    Ok(())
}

/// Adds `by` to the integer at `key` (0 if absent) and replies the result.
fn incr_generic(ctx: &mut Ctx, key: &[u8], by: i64) -> CmdResult {
    let now = ctx.now;
    let v = ctx.db().incr_by(key, by, now).map_err(|e| match e {
        IncrError::WrongType => CmdError::WrongType,
        IncrError::NotInt => CmdError::NotInt,
        IncrError::Overflow => CmdError::Overflow,
    })?;
    ctx.modified(key, notify::STRING, "incrby");
    ctx.out().int(v);
    Ok(())
}

/// INCR key
pub fn incr(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    incr_generic(ctx, &args[1], 1)
}

/// DECR key
pub fn decr(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    incr_generic(ctx, &args[1], -1)
}

/// INCRBY key increment
pub fn incrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let by = arg_i64(&args[2])?;
    incr_generic(ctx, &args[1], by)
}

/// DECRBY key decrement
pub fn decrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let by = arg_i64(&args[2])?;
    let neg = by.checked_neg().ok_or_else(|| CmdError::err("decrement would overflow"))?;
    incr_generic(ctx, &args[1], neg)
}

/// INCRBYFLOAT key increment: computed in x87 extended precision and
/// printed as Redis prints a long double (`ldouble`); replayed as a SET of
/// the result with KEEPTTL, as Redis propagates it.
pub fn incrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let cur = match ctx.read_str(key)?.0 {
        None => Ext::from_i64(0),
        Some(StrRef::Int(v)) => Ext::from_i64(v),
        Some(StrRef::Bytes(b)) => Ext::parse(b).ok_or(CmdError::NotFloat)?,
    };
    let by = Ext::parse(&args[2]).ok_or(CmdError::NotFloat)?;
    let v = cur.plus(by);
    if !v.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    let text = v.to_human();
    ctx.set_str(key, text.as_bytes(), Ttl::Keep);
    ctx.notify(notify::STRING, "incrbyfloat", key);
    // Replayed as the value it produced: float arithmetic may round
    // differently elsewhere (Redis's replicas use long doubles).
    ctx.out().bulk(text.as_bytes());
    ctx.srv.feed.replace_current(vec![b"SET".to_vec(), key.clone(), text.into_bytes(), b"KEEPTTL".to_vec()]);
    Ok(())
}

/// INCREX's options, as parsed (values still text where the mode decides
/// how to read them).
#[derive(Default)]
struct IncrexOpts<'a> {
    /// BYINT (false) or BYFLOAT (true) and its text; None: BYINT 1.
    by: Option<(bool, &'a [u8])>,
    lbound: Option<&'a [u8]>,
    ubound: Option<&'a [u8]>,
    saturate: bool,
    expire: Option<(ExpireKind, &'a [u8])>,
    persist: bool,
    enx: bool,
}

fn parse_increx(args: &[Vec<u8>]) -> Result<IncrexOpts<'_>, CmdError> {
    let mut o = IncrexOpts::default();
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1).map(Vec::as_slice);
        let kind = [("ex", ExpireKind::Ex), ("px", ExpireKind::Px), ("exat", ExpireKind::ExAt), ("pxat", ExpireKind::PxAt)]
            .into_iter()
            .find(|(w, _)| is(a, w))
            .map(|(_, k)| k);
        match (kind, next) {
            (Some(k), Some(v)) if o.expire.is_none() && !o.persist => {
                o.expire = Some((k, v));
                i += 2;
                continue;
            }
            (Some(_), _) => return Err(CmdError::Syntax),
            (None, _) => {}
        }
        if (is(a, "byint") || is(a, "byfloat")) && o.by.is_none() && next.is_some() {
            o.by = Some((is(a, "byfloat"), next.unwrap_or_default()));
            i += 1;
        } else if is(a, "lbound") && o.lbound.is_none() && next.is_some() {
            o.lbound = next;
            i += 1;
        } else if is(a, "ubound") && o.ubound.is_none() && next.is_some() {
            o.ubound = next;
            i += 1;
        } else if is(a, "saturate") && !o.saturate {
            o.saturate = true;
        } else if is(a, "persist") && !o.persist && o.expire.is_none() && !o.enx {
            o.persist = true;
        } else if is(a, "enx") && !o.enx && !o.persist {
            o.enx = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if o.enx && o.expire.is_none() {
        return Err(CmdError::err("ENX flag requires an expiration option (EX, PX, EXAT or PXAT)"));
    }
    Ok(o)
}

/// INCREX's result: the value and the applied increment, as integers or
/// as long doubles printed.
enum Increx {
    Int(i64, i64),
    Float(String, String),
}

/// INCREX's arithmetic on one kind of number: the value after the
/// increment (None: refused, the key stays as it is) and the increment
/// that value amounts to.
fn increx_int(cur: i64, by: i64, lo: i64, hi: i64, saturate: bool) -> Result<Option<(i64, i64)>, CmdError> {
    let next = match cur.checked_add(by) {
        Some(v) if (lo..=hi).contains(&v) => v,
        _ if !saturate => return Ok(None),
        Some(v) => v.clamp(lo, hi),
        None if by > 0 => hi,
        None => lo,
    };
    let applied = next.checked_sub(cur).ok_or_else(|| CmdError::err("applied increment would overflow"))?;
    Ok(Some((next, applied)))
}

fn increx_float(cur: Ext, by: Ext, lo: Option<Ext>, hi: Option<Ext>, saturate: bool) -> Result<Option<(Ext, Ext)>, CmdError> {
    use std::cmp::Ordering::{Greater, Less};
    let v = cur.plus(by);
    let below = lo.filter(|l| v.compare(*l) == Some(Less));
    let above = hi.filter(|h| v.compare(*h) == Some(Greater));
    let next = match (below, above) {
        (None, None) if v.is_finite() => v,
        _ if !saturate => return Ok(None),
        (Some(l), _) => l,
        (_, Some(h)) => h,
        // Past the type's range with no bound on that side.
        (None, None) => return Err(CmdError::err("increment would produce NaN or Infinity")),
    };
    Ok(Some((next, next.minus(cur))))
}

/// INCREX key [BYINT n | BYFLOAT f] [LBOUND l] [UBOUND u] [SATURATE]
/// [EX s | PX ms | EXAT ts | PXAT ts | PERSIST] [ENX] (Redis 8.8): adds to
/// the number at `key` (0 if absent), refusing a result outside the bounds
/// or the type's range (reply `[value, 0]`, nothing changes) or, with
/// SATURATE, stopping at the bound; sets the TTL in the same step (ENX:
/// only when the key has none). Replies `[new value, applied increment]`,
/// integers or doubles by mode. Replayed as the SET of the result (or a
/// DEL when the deadline has passed), as Redis propagates it.
pub fn increx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let o = parse_increx(args)?;
    let float = o.by.is_some_and(|(f, _)| f);
    let now = ctx.now;
    let deadline = match o.expire {
        Some((kind, arg)) => Some(expire_deadline("increx", kind, arg, now)?),
        None => None,
    };
    let bad_bound = |name: &str| CmdError::err(format!("{name} is not {}", if float { "a valid float" } else { "an integer" }));
    let bound_gt = || CmdError::err("LBOUND can't be greater than UBOUND");
    let (done, applied) = if float {
        let by = Ext::parse(o.by.map_or(b"1".as_slice(), |(_, t)| t)).ok_or_else(|| CmdError::err("Increment is not a valid float"))?;
        if !by.is_finite() {
            return Err(CmdError::err("BYFLOAT increment cannot be Infinity"));
        }
        let bound = |b: Option<&[u8]>, name: &str| b.map(|t| Ext::parse(t).filter(|v| v.is_finite()).ok_or_else(|| bad_bound(name))).transpose();
        let (lo, hi) = (bound(o.lbound, "LBOUND")?, bound(o.ubound, "UBOUND")?);
        if let (Some(l), Some(h)) = (lo, hi) {
            if l.compare(h) == Some(std::cmp::Ordering::Greater) {
                return Err(bound_gt());
            }
        }
        let cur = match ctx.read_str(key)?.0 {
            None => Ext::from_i64(0),
            Some(StrRef::Int(v)) => Ext::from_i64(v),
            Some(StrRef::Bytes(b)) => Ext::parse(b).ok_or(CmdError::NotFloat)?,
        };
        if !cur.is_finite() {
            return Err(CmdError::err("value cannot be Infinity"));
        }
        match increx_float(cur, by, lo, hi, o.saturate)? {
            None => (Increx::Float(cur.to_human(), "0".into()), false),
            Some((v, d)) => (Increx::Float(v.to_human(), d.to_human()), true),
        }
    } else {
        let by = match o.by {
            Some((_, t)) => arg_i64(t).map_err(|_| CmdError::err("Increment is not an integer"))?,
            None => 1,
        };
        let bound = |b: Option<&[u8]>, name: &str, dflt: i64| b.map_or(Ok(dflt), |t| arg_i64(t).map_err(|_| bad_bound(name)));
        let (lo, hi) = (bound(o.lbound, "LBOUND", i64::MIN)?, bound(o.ubound, "UBOUND", i64::MAX)?);
        if lo > hi {
            return Err(bound_gt());
        }
        let cur = match ctx.read_str(key)?.0 {
            None => 0,
            Some(StrRef::Int(v)) => v,
            Some(StrRef::Bytes(_)) => return Err(CmdError::NotInt),
        };
        match increx_int(cur, by, lo, hi, o.saturate)? {
            None => (Increx::Int(cur, 0), false),
            Some((v, d)) => (Increx::Int(v, d), true),
        }
    };
    let out = ctx.out();
    out.array(2);
    let text = match done {
        Increx::Int(v, d) => {
            out.int(v);
            out.int(d);
            v.to_string()
        }
        Increx::Float(v, d) => {
            out.double_text(v.as_bytes());
            out.double_text(d.as_bytes());
            v
        }
    };
    if !applied {
        // Out of range: the key, its TTL and the replicas see nothing.
        ctx.srv.feed.skip_current();
        return Ok(());
    }
    let old_ttl = ctx.db().expire_of(key, now).flatten();
    // ENX leaves a key's TTL alone; otherwise the option decides.
    let deadline = deadline.filter(|_| !(o.enx && old_ttl.is_some()));
    let event = if float { "incrbyfloat" } else { "incrby" };
    if deadline.is_some_and(|t| ctx.already_expired(t)) {
        // Already expired: the key goes, as SET with a past deadline would.
        if ctx.db().remove(key, now).is_some() {
            ctx.modified(key, notify::GENERIC, "del");
            ctx.srv.feed.replace_current(vec![b"DEL".to_vec(), key.clone()]);
        } else {
            ctx.srv.feed.skip_current();
        }
        return Ok(());
    }
    let ttl = match (deadline, o.persist) {
        (Some(t), _) => Ttl::At(t),
        (None, true) => Ttl::Clear,
        (None, false) => Ttl::Keep,
    };
    ctx.set_str(key, text.as_bytes(), ttl);
    ctx.notify(notify::STRING, event, key);
    let mut replay = vec![b"SET".to_vec(), key.clone(), text.into_bytes()];
    match (deadline, o.persist) {
        (Some(t), _) => {
            ctx.notify(notify::GENERIC, "expire", key);
            replay.extend([b"PXAT".to_vec(), t.to_string().into_bytes()]);
        }
        (None, true) => {
            if old_ttl.is_some() {
                ctx.notify(notify::GENERIC, "persist", key);
            }
        }
        (None, false) => replay.push(b"KEEPTTL".to_vec()),
    }
    ctx.srv.feed.replace_current(replay);
    Ok(())
}

/// The byte range `[start, end]` (inclusive, negatives from the end) of a
/// string of `len` bytes, clipped as Redis 8's GETRANGE does: an end that
/// still lies before the string after counting from the end gives the empty
/// string (Redis 7.x clamped it to the first byte); None when empty.
fn clip_range(mut start: i64, mut end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if start < 0 {
        start = start.saturating_add(len);
    }
    if end < 0 {
        end = end.saturating_add(len);
    }
    if len == 0 || start >= len || end < 0 || start > end {
        return None;
    }
    Some((start.max(0) as usize, end.min(len - 1) as usize))
}

/// GETRANGE key start end (also SUBSTR)
pub fn getrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let start = arg_i64(&args[2])?;
    let end = arg_i64(&args[3])?;
    let (s, out) = ctx.read_str(&args[1])?;
    match s {
        None => out.bulk(b""),
        Some(s) => with_bytes(s, |b| match clip_range(start, end, b.len()) {
            Some((s, e)) => out.bulk(&b[s..=e]),
            None => out.bulk(b""),
        }),
    }
    Ok(())
}

/// SETRANGE key offset value
pub fn setrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, val) = (&args[1], &args[3]);
    let offset = arg_i64(&args[2])?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    let offset = offset as u64;
    let max = ctx.srv.config.proto_max_bulk_len;
    let (s, out) = ctx.read_str(key)?;
    if val.is_empty() {
        out.int(s.map_or(0, |s| s.len()) as i64);
        return Ok(());
    }
    check_string_len(max, offset, val.len() as u64)?;
    // Within proto-max-bulk-len, so these fit in usize.
    let (offset, end) = (offset as usize, offset as usize + val.len());
    let mut v = Vec::with_capacity(end.max(s.map_or(0, |s| s.len())));
    if let Some(s) = s {
        with_bytes(s, |b| v.extend_from_slice(b));
    }
    if v.len() < end {
        v.resize(end, 0);
    }
    v[offset..end].copy_from_slice(val);
    let len = v.len();
    // Bytes even when it reads as an integer: Redis leaves it raw.
    ctx.set_value(key, Value::Bytes(v), Ttl::Keep);
    // A string Redis builds or edits in place: "raw" in OBJECT ENCODING.
    let now = ctx.now;
    ctx.db().mark_raw(key, now);
    ctx.notify(notify::STRING, "setrange", key);
    ctx.out().int(len as i64);
    Ok(())
}

/// One matching range of LCS IDX: positions in a and b, inclusive.
struct LcsMatch {
    a: (u32, u32),
    b: (u32, u32),
}

/// Longest common subsequence of `a` and `b`: its bytes, its length, and the
/// matching ranges from the end of the strings backwards (as Redis emits them).
fn lcs_compute(a: &[u8], b: &[u8]) -> (Vec<u8>, u32, Vec<LcsMatch>) {
    let (alen, blen) = (a.len(), b.len());
    let w = blen + 1;
    let mut t = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] { t[(i - 1) * w + j - 1] + 1 } else { t[(i - 1) * w + j].max(t[i * w + j - 1]) };
        }
    }
    let total = t[alen * w + blen];
    let mut out = vec![0u8; total as usize];
    let mut idx = total as usize;
    let mut matches = Vec::new();
    // Current range; `None` when no range is open.
    let mut cur: Option<LcsMatch> = None;
    let (mut i, mut j) = (alen, blen);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            out[idx - 1] = a[i - 1];
            let (pi, pj) = ((i - 1) as u32, (j - 1) as u32);
            match &mut cur {
                None => cur = Some(LcsMatch { a: (pi, pi), b: (pj, pj) }),
                Some(m) if m.a.0 == i as u32 && m.b.0 == j as u32 => {
                    m.a.0 -= 1;
                    m.b.0 -= 1;
                }
                Some(_) => emit = true,
            }
            if cur.as_ref().is_some_and(|m| m.a.0 == 0 || m.b.0 == 0) {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if cur.is_some() {
                emit = true;
            }
        }
        if emit {
            if let Some(m) = cur.take() {
                matches.push(m);
            }
        }
    }
    (out, total, matches)
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
pub fn lcs(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // LCS words its type error its own way.
    let read = |ctx: &mut Ctx, k: &[u8]| -> Result<Vec<u8>, CmdError> {
        match ctx.read_str(k) {
            Ok((s, _)) => Ok(s.map(|s| s.to_vec()).unwrap_or_default()),
            Err(_) => Err(CmdError::err("The specified keys must contain string values")),
        }
    };
    let a = read(ctx, &args[1])?;
    let b = read(ctx, &args[2])?;
    let (mut getlen, mut getidx, mut withlen, mut minlen) = (false, false, false, 0i64);
    let mut i = 3;
    while i < args.len() {
        let o = &args[i];
        if is(o, "idx") {
            getidx = true;
        } else if is(o, "len") {
            getlen = true;
        } else if is(o, "withmatchlen") {
            withlen = true;
        } else if is(o, "minmatchlen") && i + 1 < args.len() {
            minlen = arg_i64(&args[i + 1])?.max(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if getlen && getidx {
        return Err(CmdError::err("If you want both the length and indexes, please just use IDX."));
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(CmdError::err("String too long for LCS"));
    }
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells.saturating_mul(4) > ctx.srv.config.proto_max_bulk_len as u64 {
        return Err(CmdError::err("Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"));
    }
    let (text, total, matches) = lcs_compute(&a, &b);
    let out = ctx.out();
    if getidx {
        let shown: Vec<&LcsMatch> = matches.iter().filter(|m| minlen == 0 || (m.a.1 - m.a.0 + 1) as i64 >= minlen).collect();
        out.map(2);
        out.bulk(b"matches");
        out.array(shown.len());
        for m in shown {
            out.array(2 + withlen as usize);
            out.array(2);
            out.int(m.a.0 as i64);
            out.int(m.a.1 as i64);
            out.array(2);
            out.int(m.b.0 as i64);
            out.int(m.b.1 as i64);
            if withlen {
                out.int((m.a.1 - m.a.0 + 1) as i64);
            }
        }
        out.bulk(b"len");
        out.int(total as i64);
    } else if getlen {
        out.int(total as i64);
    } else {
        out.bulk(&text);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_xxh3_as_16_hex_digits() {
        // Redis's DIGEST page: SET key1 "Hello world" -> DIGEST key1.
        assert_eq!(digest_hex(b"Hello world"), "b6acb9d84a38ff74");
        assert_eq!(digest_hex(b"").len(), 16);
        assert!(Cond::DigestEq.holds(b"Hello world", b"B6ACB9D84A38FF74"));
        assert!(!Cond::DigestNe.holds(b"Hello world", b"b6acb9d84a38ff74"));
        assert!(Cond::DigestNe.holds(b"Hello world", b"b6acb9d84a38ff7"));
        assert!(Cond::Eq.holds(b"v", b"v") && Cond::Ne.holds(b"v", b"w"));
        assert!(Cond::Eq.needs_key() && Cond::DigestEq.needs_key());
        assert!(!Cond::Ne.needs_key() && !Cond::DigestNe.needs_key());
    }

    #[test]
    fn ranges_clip_like_redis() {
        assert_eq!(clip_range(0, -1, 5), Some((0, 4)));
        assert_eq!(clip_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(clip_range(3, 1, 5), None);
        assert_eq!(clip_range(5, 10, 5), None);
        assert_eq!(clip_range(0, -100, 5), None);
        assert_eq!(clip_range(-100, -99, 5), None);
        assert_eq!(clip_range(-5000, 10000, 5), Some((0, 4)));
        assert_eq!(clip_range(-1, -100, 5), None);
        assert_eq!(clip_range(0, 0, 0), None);
        assert_eq!(clip_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }

    #[test]
    fn lcs_matches_redis_example() {
        let (text, len, m) = lcs_compute(b"ohmytext", b"mynewtext");
        assert_eq!(text, b"mytext");
        assert_eq!(len, 6);
        let got: Vec<_> = m.iter().map(|m| (m.a, m.b)).collect();
        assert_eq!(got, vec![((4, 7), (5, 8)), ((2, 3), (0, 1))]);
        assert_eq!(lcs_compute(b"", b"abc").1, 0);
    }

    #[test]
    fn expire_deadlines() {
        assert_eq!(expire_deadline("set", ExpireKind::Ex, b"10", 1000).ok(), Some(11_000));
        assert_eq!(expire_deadline("set", ExpireKind::PxAt, b"5", 1000).ok(), Some(5));
        let bad = Err(invalid_expire("set"));
        assert_eq!(expire_deadline("set", ExpireKind::Ex, b"0", 0), bad);
        assert_eq!(expire_deadline("set", ExpireKind::Ex, b"9223372036854776", 0), bad);
        assert_eq!(expire_deadline("set", ExpireKind::Px, b"9223372036854775807", 1), bad);
        assert_eq!(expire_deadline("set", ExpireKind::Ex, b"x", 0), Err(CmdError::NotInt));
    }
}
