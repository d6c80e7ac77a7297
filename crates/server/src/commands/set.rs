//! Set commands: SADD, SREM, SMOVE, membership, random members, SSCAN and
//! the algebra (SINTER/SUNION/SDIFF, their STORE forms, SINTERCARD).
//!
//! Replies and errors follow Redis 7.4, including which encoding a stored
//! result ends up with (a STORE builds its result the way Redis does, so
//! OBJECT ENCODING answers the same): `storage::types::set` makes every
//! encoding decision; this file only says what kind of empty set Redis
//! would start from.
//!
//! Multi-key commands copy their input sets out of the keyspace first
//! (the keyspace lends one value at a time); sets are compact, so the copy
//! costs about as much as the result Redis builds for SUNION/SDIFF.

use crate::notify;
use std::collections::HashSet;

use resp::Reply;
use storage::types::set::{Set, SetConfig};
use storage::{StrRef, Ttl, Value};

use crate::commands::keys::{parse_cursor, parse_scan_opts, ScanExtra, ScanOpts};
use crate::commands::subexpire;
use storage::types::hash::ExpireCond;
use crate::command::flags::*;
use crate::command::{arg_i64, arg_range, is, keys, kf, range_spec, spec, Begin, CmdError, CmdResult, Ctx, Find, KeySpec, Spec, NO_KEYS};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    const RF: &[&str] = &["read", "set", "fast"];
    const RS: &[&str] = &["read", "set", "slow"];
    const WF: &[&str] = &["write", "set", "fast"];
    const WS: &[&str] = &["write", "set", "slow"];
    let k1 = keys(1, 1, 1);
    let all = keys(1, -1, 1);
    let store = keys(1, -1, 1);
    // A STORE overwrites its destination and reads the sources.
    let stores = || vec![range_spec(kf::OW_UPDATE, 1, 0, 1), range_spec(kf::RO_ACCESS, 2, -1, 1)];
    let s = |name, arity, flags, k, h, acl, summary, since| spec(name, arity, flags, k, h).acl(acl).group("set").doc(summary, since);
    vec![
        s("sadd", -3, WRITE | DENYOOM | FAST, k1, sadd, WF, "Adds one or more members to a set. Creates the key if it doesn't exist.", "1.0.0"),
        s("srem", -3, WRITE | FAST, k1, srem, WF, "Removes one or more members from a set. Deletes the set if the last member was removed.", "1.0.0"),
        s("smembers", 2, READONLY, k1, smembers, RS, "Returns all members of a set.", "1.0.0"),
        s("sismember", 3, READONLY | FAST, k1, sismember, RF, "Determines whether a member belongs to a set.", "1.0.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        s("smismember", -3, READONLY | FAST, k1, smismember, RF, "Determines whether multiple members belong to a set.", "6.2.0"),
        s("scard", 2, READONLY | FAST, k1, scard, RF, "Returns the number of members in a set.", "1.0.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        s("sscan", -3, READONLY, k1, sscan, RS, "Iterates over members of a set.", "2.8.0"),
        s("srandmember", -2, READONLY, k1, srandmember, RS, "Get one or multiple random members from a set", "1.0.0"),
        s("spop", -2, WRITE | FAST, k1, spop, WF, "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1)]),
        s("smove", 4, WRITE | FAST, keys(1, 2, 1), smove, WF, "Moves a member from one set to another.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1), range_spec(kf::RW_INSERT, 2, 0, 1)]),
        s("sinter", -2, READONLY, all, sinter, RS, "Returns the intersect of multiple sets.", "1.0.0"),
        // Keys follow numkeys (movable keys, no legacy range), as in Redis.
        s("sintercard", -3, READONLY, NO_KEYS, sintercard, RS, "Returns the number of members of the intersect of multiple sets.", "7.0.0")
            .key_specs(vec![KeySpec { flags: kf::RO_ACCESS, begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } }]),
        s("sinterstore", -3, WRITE | DENYOOM, store, sinterstore, WS, "Stores the intersect of multiple sets in a key.", "1.0.0").key_specs(stores()),
        s("sunion", -2, READONLY, all, sunion, RS, "Returns the union of multiple sets.", "1.0.0"),
        s("sunionstore", -3, WRITE | DENYOOM, store, sunionstore, WS, "Stores the union of multiple sets in a key.", "1.0.0").key_specs(stores()),
        s("sdiff", -2, READONLY, all, sdiff, RS, "Returns the difference of multiple sets.", "1.0.0"),
        s("sdiffstore", -3, WRITE | DENYOOM, store, sdiffstore, WS, "Stores the difference of multiple sets in a key.", "1.0.0").key_specs(stores()),
        // Member TTLs: a densekv extension shaped like HEXPIRE (subexpire.rs).
        s("sexpire", -6, WRITE | DENYOOM | FAST, k1, sexpire, WF, "Set expiry for set members using relative time to expire (seconds)", "7.4.0"),
        s("spexpire", -6, WRITE | DENYOOM | FAST, k1, spexpire, WF, "Set expiry for set members using relative time to expire (milliseconds)", "7.4.0"),
        s("sexpireat", -6, WRITE | DENYOOM | FAST, k1, sexpireat, WF, "Set expiry for set members using an absolute Unix timestamp (seconds)", "7.4.0"),
        s("spexpireat", -6, WRITE | DENYOOM | FAST, k1, spexpireat, WF, "Set expiry for set members using an absolute Unix timestamp (milliseconds)", "7.4.0"),
        s("sttl", -5, READONLY | FAST, k1, sttl, RF, "Returns the TTL in seconds of set members.", "7.4.0"),
        s("spttl", -5, READONLY | FAST, k1, spttl, RF, "Returns the TTL in milliseconds of set members.", "7.4.0"),
        s("sexpiretime", -5, READONLY | FAST, k1, sexpiretime, RF, "Returns the expiration time of set members as a Unix timestamp, in seconds.", "7.4.0"),
        s("spexpiretime", -5, READONLY | FAST, k1, spexpiretime, RF, "Returns the expiration time of set members as a Unix timestamp, in msec.", "7.4.0"),
        s("spersist", -5, WRITE | FAST, k1, spersist, WF, "Removes the expiration time of set members.", "7.4.0"),
        s("saddex", -4, WRITE | DENYOOM | FAST, k1, saddex, WF, "Adds members that expire after a number of seconds (Dragonfly's SADDEX).", "7.4.0"),
    ]
}

fn member(out: &mut Reply, m: StrRef) {
    match m {
        StrRef::Int(v) => out.bulk_i64(v),
        StrRef::Bytes(b) => out.bulk(b),
    }
}

/// xorshift64* over the server's random state (shared with RANDOMKEY).
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// SADD key member [member ...]
pub fn sadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, cfg) = (&args[1], ctx.srv.config.set);
    let hint = args.len() - 2;
    let mut w = ctx.write_or_create(key, notify::SET, || Set::with_hint(&args[2], hint, &cfg))?;
    let created = w.created();
    let (s, out) = w.parts();
    if !created {
        s.reserve_hint(hint, &cfg);
    }
    // Re-adding a member drops its TTL, as HSET drops a field's: a change
    // even when nothing is added, which must be replayed.
    let ttls = s.min_deadline().is_some();
    let mut persisted = false;
    let added = args[2..]
        .iter()
        .filter(|m| {
            persisted |= ttls && matches!(s.expire_of(m), Some(Some(_)));
            s.insert(m, &cfg)
        })
        .count();
    out.int(added as i64);
    if added > 0 {
        w.added("sadd");
    }
    if persisted {
        w.touched();
    }
    Ok(())
}

/// SEXPIRE key seconds [NX|XX|GT|LT] MEMBERS numfields member...
pub fn sexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::expire_generic::<Set>(ctx, args, true, true)
}

/// SPEXPIRE key milliseconds [NX|XX|GT|LT] MEMBERS numfields member...
pub fn spexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::expire_generic::<Set>(ctx, args, false, true)
}

/// SEXPIREAT key unix-seconds [NX|XX|GT|LT] MEMBERS numfields member...
pub fn sexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::expire_generic::<Set>(ctx, args, true, false)
}

/// SPEXPIREAT key unix-ms [NX|XX|GT|LT] MEMBERS numfields member...
pub fn spexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::expire_generic::<Set>(ctx, args, false, false)
}

/// STTL key MEMBERS numfields member...
pub fn sttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::ttl_generic::<Set>(ctx, args, true, true)
}

/// SPTTL key MEMBERS numfields member...
pub fn spttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::ttl_generic::<Set>(ctx, args, false, true)
}

/// SEXPIRETIME key MEMBERS numfields member...
pub fn sexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::ttl_generic::<Set>(ctx, args, true, false)
}

/// SPEXPIRETIME key MEMBERS numfields member...
pub fn spexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::ttl_generic::<Set>(ctx, args, false, false)
}

/// SPERSIST key MEMBERS numfields member...
pub fn spersist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::persist_generic::<Set>(ctx, args)
}

/// SADDEX key [KEEPTTL] seconds member [member ...] (Dragonfly's): adds the
/// members with a TTL of `seconds`; members already there get the TTL too,
/// unless KEEPTTL, which leaves theirs (or their lack of one) alone.
/// Replies the number of members added. `seconds` must be positive. Replayed as SADD of the new
/// members and SPEXPIREAT of those whose deadline it set.
pub fn saddex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, cfg, now) = (&args[1], ctx.srv.config.set, ctx.now);
    let keep = is(&args[2], "keepttl");
    let at = if keep { 3 } else { 2 };
    let members = args.get(at + 1..).filter(|m| !m.is_empty()).ok_or_else(|| CmdError::Arity("saddex".into()))?;
    let deadline = subexpire::parse_deadline("saddex", &args[at], true, now)?;
    if deadline <= now {
        // A member that would be gone at once is refused, not added.
        return Err(CmdError::err("invalid expire time in 'saddex' command"));
    }
    let mut w = ctx.write_or_create(key, notify::SET, || Set::with_hint(&members[0], members.len(), &cfg))?;
    let (s, out) = w.parts();
    let (mut added, mut timed) = (Vec::new(), Vec::new());
    for m in members {
        // Not `insert` for a member already there: that would drop its TTL.
        let new = !s.contains(m) && s.insert(m, &cfg);
        if new {
            added.push(m.clone());
        }
        if (new || !keep) && s.set_expire(m, deadline, ExpireCond::Always, now, &cfg) == 1 {
            timed.push(m.clone());
        }
    }
    out.int(added.len() as i64);
    if !added.is_empty() {
        w.changed("sadd");
    }
    if !timed.is_empty() {
        w.changed("sexpire");
    }
    drop(w);
    if !ctx.srv.feed.is_empty() {
        let db = ctx.client.db;
        if !added.is_empty() {
            let mut sadd = vec![b"SADD".to_vec(), key.clone()];
            sadd.extend(added);
            ctx.srv.feed.push(db, sadd);
        }
        if timed.is_empty() {
            ctx.srv.feed.skip_current();
        } else {
            let mut argv = vec![b"SPEXPIREAT".to_vec(), key.clone(), deadline.to_string().into_bytes(), b"MEMBERS".to_vec()];
            argv.push(timed.len().to_string().into_bytes());
            argv.extend(timed);
            ctx.srv.feed.replace_current(argv);
        }
    }
    Ok(())
}

/// SREM key member [member ...]
pub fn srem(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(mut w) = ctx.write::<Set>(&args[1], notify::SET)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let (s, out) = w.parts();
    let mut removed = 0;
    for m in &args[2..] {
        if s.remove(m) {
            removed += 1;
            if s.is_empty() {
                break;
            }
        }
    }
    out.int(removed);
    if removed > 0 {
        w.changed("srem");
    }
    Ok(())
}

/// SMOVE source destination member
pub fn smove(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (src, dst, m, cfg) = (&args[1], &args[2], &args[3], ctx.srv.config.set);
    let Some(s) = ctx.read::<Set>(src)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let in_src = s.contains(m);
    ctx.holds::<Set>(dst)?;
    if src == dst || !in_src {
        ctx.out().int(in_src as i64);
        return Ok(());
    }
    if let Some(mut w) = ctx.write::<Set>(src, notify::SET)? {
        w.get().remove(m);
        w.changed("srem");
    }
    let mut w = ctx.write_or_create(dst, notify::SET, || Set::with_hint(m, 1, &cfg))?;
    let (d, out) = w.parts();
    let added = d.insert(m, &cfg);
    out.int(1);
    if added {
        w.changed("sadd");
    }
    Ok(())
}

/// SISMEMBER key member
pub fn sismember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let hit = ctx.read::<Set>(&args[1])?.is_some_and(|s| s.contains(&args[2]));
    ctx.out().int(hit as i64);
    Ok(())
}

/// SMISMEMBER key member [member ...]
pub fn smismember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (s, out) = ctx.read_out::<Set>(&args[1])?;
    out.array(args.len() - 2);
    for m in &args[2..] {
        out.int(s.is_some_and(|s| s.contains(m)) as i64);
    }
    Ok(())
}

/// SCARD key
pub fn scard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = ctx.read::<Set>(&args[1])?.map_or(0, |s| s.len());
    ctx.out().int(n as i64);
    Ok(())
}

/// SMEMBERS key
pub fn smembers(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (s, out) = ctx.read_out::<Set>(&args[1])?;
    reply_set(out, s);
    Ok(())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
pub fn sscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let cursor = parse_cursor(&args[2]).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let (s, out) = ctx.read_out::<Set>(&args[1])?;
    let Some(s) = s else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let ScanOpts { count, pattern, .. } = parse_scan_opts(args, 3, ScanExtra::Nothing)?;
    let mut found = Vec::new();
    let next = s.scan(cursor, count, |m| {
        let m = m.to_vec();
        if pattern.is_none_or(|p| crate::glob::matches(p, &m, false)) {
            found.push(m);
        }
    });
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(found.len());
    found.iter().for_each(|m| out.bulk(m));
    Ok(())
}

/// Replies beyond this many elements would exhaust memory before Redis's
/// output-buffer limit closes the client; refused instead.
const MAX_RANDOM_REPLY: u64 = 1 << 27;

/// SRANDMEMBER key [count]
pub fn srandmember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => {
            Some(arg_range(a, -i64::MAX, None)?)
        }
    };
    let mut state = ctx.srv.rng;
    let (s, out) = ctx.read_out::<Set>(&args[1])?;
    let r = random_members(s, out, count, &mut || next_random(&mut state));
    ctx.srv.rng = state;
    r
}

/// SRANDMEMBER's reply: `count` (None: one member, not an array) random
/// members of `s`, distinct when `count` is positive.
fn random_members(s: Option<&Set>, out: &mut Reply, count: Option<i64>, mut rng: &mut dyn FnMut() -> u64) -> CmdResult {
    let Some(s) = s else {
        match count {
            None => out.null(),
            Some(_) => out.array(0),
        }
        return Ok(());
    };
    let Some(l) = count else {
        member(out, s.random(&mut rng).expect("stored sets are not empty"));
        return Ok(());
    };
    let n = l.unsigned_abs();
    if (l < 0 || n == 1) && n > 0 {
        if n > MAX_RANDOM_REPLY {
            return Err(CmdError::err("value is out of range"));
        }
        out.array(n as usize);
        for _ in 0..n {
            member(out, s.random(&mut rng).expect("stored sets are not empty"));
        }
        return Ok(());
    }
    let size = s.len();
    let n = n as usize;
    if n >= size {
        out.array(size);
        s.iter().for_each(|m| member(out, m));
        return Ok(());
    }
    out.array(n);
    for m in distinct_sample(s, n, &mut rng) {
        out.bulk(&m);
    }
    Ok(())
}

/// `n` (< len) distinct random members of `s`.
fn distinct_sample(s: &Set, n: usize, rng: &mut impl FnMut() -> u64) -> Vec<Vec<u8>> {
    if n.saturating_mul(3) > s.len() {
        // Most of the set: shuffle a copy and keep a prefix.
        let mut all: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        for i in 0..n {
            let j = i + (rng() % (all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(n);
        return all;
    }
    let mut picked = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let m = s.random(rng).expect("stored sets are not empty").to_vec();
        if picked.insert(m.clone()) {
            out.push(m);
        }
    }
    out
}

/// Members per SREM that SPOP with a count is replayed as.
const SPOP_BATCH: usize = 1024;

/// SPOP key [count]
pub fn spop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match arg_i64(a) {
            Ok(v) if v >= 0 => Some(v as u64),
            _ => return Err(CmdError::err("value is out of range, must be positive")),
        },
    };
    let (key, cfg) = (&args[1], ctx.srv.config.set);
    let mut state = ctx.srv.rng;
    let Some(mut w) = ctx.write::<Set>(key, notify::SET)? else {
        match count {
            None => ctx.out().null(),
            Some(_) => ctx.out().set(0),
        }
        return Ok(());
    };
    let (s, out) = w.parts();
    let mark = out.buf.len();
    let popped = pop_members(s, out, count, &cfg, &mut || next_random(&mut state));
    // Replayed as SREM of the members it took (random elsewhere), read
    // back from the reply just written, 1024 members per SREM as Redis
    // batches them.
    let srem = (popped && !w.ctx().srv.feed.is_empty()).then(|| {
        let reply = w.ctx().client.reply.buf[mark..].to_vec();
        reply_members(&reply)
            .chunks(SPOP_BATCH)
            .map(|members| {
                let mut argv = vec![b"SREM".to_vec(), key.clone()];
                argv.extend_from_slice(members);
                argv
            })
            .collect::<Vec<_>>()
    });
    if popped {
        w.changed("spop");
    }
    drop(w);
    match srem {
        Some(mut cmds) if cmds.len() == 1 => ctx.srv.feed.replace_current(cmds.remove(0)),
        Some(cmds) => {
            ctx.srv.feed.skip_current();
            for argv in cmds {
                ctx.srv.feed.push(ctx.client.db, argv);
            }
        }
        None => {}
    }
    ctx.srv.rng = state;
    Ok(())
}

/// The bulk strings of a reply (SPOP's members), in order: every `$len`
/// payload; integers (`:`, intset members in RESP3 sets are still bulks)
/// too.
fn reply_members(reply: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < reply.len() {
        let Some(end) = reply[i..].windows(2).position(|w| w == b"\r\n").map(|e| i + e) else { break };
        let line = &reply[i..end];
        i = end + 2;
        match line.first() {
            Some(b'$') => {
                let Some(n) = std::str::from_utf8(&line[1..]).ok().and_then(|v| v.parse::<usize>().ok()) else { continue };
                out.push(reply[i..i + n].to_vec());
                i += n + 2;
            }
            Some(b':') => out.push(line[1..].to_vec()),
            _ => {}
        }
    }
    out
}

/// SPOP's work on `s`: pops `count` (None: one, replied as a bulk) random
/// members into the reply. Returns true if any was popped.
fn pop_members(s: &mut Set, out: &mut Reply, count: Option<u64>, cfg: &SetConfig, mut rng: &mut dyn FnMut() -> u64) -> bool {
    match count {
        None => {
            let m = s.pop_random(&mut rng).expect("stored sets are not empty");
            out.bulk(&m);
        }
        Some(0) => {
            out.set(0);
            return false;
        }
        Some(n) if n as usize >= s.len() => {
            out.set(s.len());
            s.iter().for_each(|m| member(out, m));
            *s = s.empty_like();
        }
        Some(n) => {
            let n = n as usize;
            let remaining = s.len() - n;
            out.set(n);
            if remaining * 5 > n {
                for _ in 0..n {
                    out.bulk(&s.pop_random(&mut rng).expect("count below size"));
                }
            } else {
                // Most members go: move the few that stay into a new set
                // (as Redis does, which also resets the encoding) and reply
                // with what is left of the old one.
                let mut keep = s.empty_like();
                for _ in 0..remaining {
                    let m = s.pop_random(&mut rng).expect("remaining below size");
                    keep.insert(&m, cfg);
                }
                s.iter().for_each(|m| member(out, m));
                *s = keep;
            }
        }
    }
    true
}

/// Copies of the sets at `keys` (None: absent); WrongType if any key holds
/// another type.
fn load(ctx: &mut Ctx, keys: &[Vec<u8>]) -> Result<Vec<Option<Set>>, CmdError> {
    keys.iter().map(|k| Ok(ctx.read::<Set>(k)?.cloned())).collect()
}

/// The intersection of `sets` (None if one is absent), built as Redis
/// builds a stored one (from an intset if the smallest input is one, else
/// from a listpack); `limit` stops early (0: none).
fn intersect(sets: &[Option<Set>], limit: usize, cfg: &SetConfig) -> Option<Set> {
    let mut sets: Vec<&Set> = sets.iter().map(|s| s.as_ref()).collect::<Option<_>>()?;
    sets.sort_by_key(|s| s.len());
    let (first, rest) = sets.split_first()?;
    let mut out = first.empty_like();
    for m in first.iter() {
        if rest.iter().all(|s| s.contains_ref(m)) {
            out.insert(&m.to_vec(), cfg);
            if limit > 0 && out.len() >= limit {
                break;
            }
        }
    }
    Some(out)
}

/// Writes `s` (or deletes `dst` when empty) as SINTERSTORE & co do;
/// `event` is the command's keyspace event.
fn store(ctx: &mut Ctx, dst: &[u8], s: Set, event: &str) {
    let now = ctx.now;
    let n = s.len();
    if n > 0 {
        ctx.set_value(dst, Value::Set(Box::new(s)), Ttl::Clear);
        ctx.notify(notify::SET, event, dst);
    } else if ctx.db().remove(dst, now).is_some() {
        ctx.modified(dst, notify::GENERIC, "del");
    }
    ctx.out().int(n as i64);
}

fn reply_set(out: &mut Reply, s: Option<&Set>) {
    match s {
        None => out.set(0),
        Some(s) => {
            out.set(s.len());
            s.iter().for_each(|m| member(out, m));
        }
    }
}

/// SINTER key [key ...]
pub fn sinter(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (sets, cfg) = (load(ctx, &args[1..])?, ctx.srv.config.set);
    reply_set(ctx.out(), intersect(&sets, 0, &cfg).as_ref());
    Ok(())
}

/// SINTERSTORE destination key [key ...]
pub fn sinterstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (sets, cfg) = (load(ctx, &args[2..])?, ctx.srv.config.set);
    let mut s = intersect(&sets, 0, &cfg).unwrap_or_default();
    s.maybe_to_intset(&cfg);
    store(ctx, &args[1], s, "sinterstore");
    Ok(())
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn sintercard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    const NUMKEYS: &str = "numkeys should be greater than 0";
    let numkeys = arg_i64(&args[1]).ok().filter(|&n| n >= 1).ok_or_else(|| CmdError::err(NUMKEYS))? as u64;
    if numkeys > (args.len() - 2) as u64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0usize;
    let mut i = end;
    while i < args.len() {
        if is(&args[i], "limit") && i + 1 < args.len() {
            let l = arg_i64(&args[i + 1]).ok().filter(|&l| l >= 0).ok_or_else(|| CmdError::err("LIMIT can't be negative"))?;
            limit = usize::try_from(l).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let (sets, cfg) = (load(ctx, &args[2..end])?, ctx.srv.config.set);
    let n = intersect(&sets, limit, &cfg).map_or(0, |s| s.len());
    ctx.out().int(n as i64);
    Ok(())
}

/// The union of `sets`, built as Redis builds a stored one.
fn union(sets: &[Option<Set>], cfg: &SetConfig) -> Set {
    let mut out = Set::new();
    for s in sets.iter().flatten() {
        for m in s.iter() {
            out.insert(&m.to_vec(), cfg);
        }
    }
    out
}

/// The difference first minus the rest, with Redis's choice of algorithm
/// (it decides how a stored result passes through encodings). `same`:
/// a later key names the first set.
fn difference(sets: &[Option<Set>], same: bool, cfg: &SetConfig) -> Set {
    let mut out = Set::new();
    let Some(Some(first)) = sets.first() else { return out };
    if same {
        return out;
    }
    let mut rest: Vec<&Set> = sets[1..].iter().flatten().collect();
    let one = (first.len() * (rest.len() + 1)) / 2;
    let two = first.len() + rest.iter().map(|s| s.len()).sum::<usize>();
    if one <= two {
        rest.sort_by_key(|s| std::cmp::Reverse(s.len()));
        for m in first.iter() {
            if !rest.iter().any(|s| s.contains_ref(m)) {
                out.insert(&m.to_vec(), cfg);
            }
        }
    } else {
        for m in first.iter() {
            out.insert(&m.to_vec(), cfg);
        }
        for s in rest {
            if out.is_empty() {
                break;
            }
            for m in s.iter() {
                out.remove(&m.to_vec());
            }
        }
    }
    out
}

fn same_as_first(keys: &[Vec<u8>]) -> bool {
    keys[1..].iter().any(|k| *k == keys[0])
}

/// SUNION key [key ...]
pub fn sunion(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (sets, cfg) = (load(ctx, &args[1..])?, ctx.srv.config.set);
    reply_set(ctx.out(), Some(&union(&sets, &cfg)));
    Ok(())
}

/// SUNIONSTORE destination key [key ...]
pub fn sunionstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (sets, cfg) = (load(ctx, &args[2..])?, ctx.srv.config.set);
    store(ctx, &args[1], union(&sets, &cfg), "sunionstore");
    Ok(())
}

/// SDIFF key [key ...]
pub fn sdiff(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (sets, cfg) = (load(ctx, &args[1..])?, ctx.srv.config.set);
    reply_set(ctx.out(), Some(&difference(&sets, same_as_first(&args[1..]), &cfg)));
    Ok(())
}

/// SDIFFSTORE destination key [key ...]
pub fn sdiffstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (sets, cfg) = (load(ctx, &args[2..])?, ctx.srv.config.set);
    let s = difference(&sets, same_as_first(&args[2..]), &cfg);
    store(ctx, &args[1], s, "sdiffstore");
    Ok(())
}
