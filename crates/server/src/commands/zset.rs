//! Sorted-set commands (ZADD, ZRANGE and friends, the set operations,
//! ZPOP/ZMPOP, ZSCAN, ZRANDMEMBER).
//!
//! Every range command reduces its range (by rank, by score or by lex) to an
//! ascending rank interval `[lo, hi)` with `ZSet::partition`, then walks it
//! forward (`iter_from`), reversing the slice for REV; so the storage type
//! needs no reverse iterator and each command is O(log n + reply).
//!
//! Replies follow Redis 7.4 byte for byte: scores are doubles (bulk strings
//! in RESP2), WITHSCORES pairs are nested arrays in RESP3 and flat in RESP2,
//! and parse errors come before key lookups, as in `t_zset.c`.
//!
//! BZPOPMIN, BZPOPMAX and BZMPOP serve at once when a sorted set has
//! members, else block through `crate::blocking`, which re-runs the same
//! handler when a waited key gets a sorted set.
//!
//! The set operations read sorted sets and, as Redis does, plain SETs
//! (every member scoring 1).

use crate::notify;
use std::borrow::Cow;

use resp::Reply;
use storage::types::set::Set;
use storage::types::zset::{cmp_entry, ZSet};
use storage::{StrRef, Ttl, Value, ValueRef};

use crate::commands::members::Members;
use crate::commands::subexpire;
use crate::commands::keys::{parse_cursor, parse_scan_opts, ScanExtra, ScanOpts};
use crate::command::flags::*;
use crate::command::{arg_f64, arg_i64, arg_range, is, keys, parse_c_double, kf, range_spec, spec, Begin, CmdError, CmdResult, Ctx, Find, KeyFlags, KeySpec, Spec, NO_KEYS};
use crate::args::parse_timeout_secs;
use crate::access::Write;
use crate::command::{block_or_null, NullKind};
use crate::glob;

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    const RF: &[&str] = &["read", "sortedset", "fast"];
    const RS: &[&str] = &["read", "sortedset", "slow"];
    const WF: &[&str] = &["write", "sortedset", "fast"];
    const WS: &[&str] = &["write", "sortedset", "slow"];
    let k1 = keys(1, 1, 1);
    let s = |name, arity, flags, k, h, acl, summary, since| spec(name, arity, flags, k, h).acl(acl).group("sorted-set").doc(summary, since);
    vec![
        s("zadd", -4, WRITE | DENYOOM | FAST, k1, zadd, WF, "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", "1.2.0"),
        s("zincrby", 4, WRITE | DENYOOM | FAST, k1, zincrby, WF, "Increments the score of a member in a sorted set.", "1.2.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("zscore", 3, READONLY | FAST, k1, zscore, RF, "Returns the score of a member in a sorted set.", "1.2.0"),
        s("zmscore", -3, READONLY | FAST, k1, zmscore, RF, "Returns the score of one or more members in a sorted set.", "6.2.0"),
        s("zcard", 2, READONLY | FAST, k1, zcard, RF, "Returns the number of members in a sorted set.", "1.2.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        s("zrem", -3, WRITE | FAST, k1, zrem, WF, "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", "1.2.0"),
        s("zrange", -4, READONLY, k1, zrange, RS, "Returns members in a sorted set within a range of indexes.", "1.2.0"),
        s("zrangebyscore", -4, READONLY, k1, zrangebyscore, RS, "Returns members in a sorted set within a range of scores.", "1.0.5"),
        s("zrevrangebyscore", -4, READONLY, k1, zrevrangebyscore, RS, "Returns members in a sorted set within a range of scores in reverse order.", "2.2.0"),
        s("zrangebylex", -4, READONLY, k1, zrangebylex, RS, "Returns members in a sorted set within a lexicographical range.", "2.8.9"),
        s("zrevrangebylex", -4, READONLY, k1, zrevrangebylex, RS, "Returns members in a sorted set within a lexicographical range in reverse order.", "2.8.9"),
        s("zrevrange", -4, READONLY, k1, zrevrange, RS, "Returns members in a sorted set within a range of indexes in reverse order.", "1.2.0"),
        s("zrank", -3, READONLY | FAST, k1, zrank, RF, "Returns the index of a member in a sorted set ordered by ascending scores.", "2.0.0"),
        s("zrevrank", -3, READONLY | FAST, k1, zrevrank, RF, "Returns the index of a member in a sorted set ordered by descending scores.", "2.0.0"),
        s("zcount", 4, READONLY | FAST, k1, zcount, RF, "Returns the count of members in a sorted set that have scores within a range.", "2.0.0"),
        s("zlexcount", 4, READONLY | FAST, k1, zlexcount, RF, "Returns the number of members in a sorted set within a lexicographical range.", "2.8.9"),
        s("zscan", -3, READONLY, k1, zscan, RS, "Iterates over members and scores of a sorted set.", "2.8.0"),
        s("zpopmin", -2, WRITE | FAST, k1, zpopmin, WF, "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "5.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1)]),
        s("zpopmax", -2, WRITE | FAST, k1, zpopmax, WF, "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "5.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1)]),
        s("zrandmember", -2, READONLY, k1, zrandmember, RS, "Returns one or more random members from a sorted set.", "6.2.0"),
        s("zremrangebyrank", 4, WRITE, k1, zremrangebyrank, WS, "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", "2.0.0"),
        s("zremrangebyscore", 4, WRITE, k1, zremrangebyscore, WS, "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", "1.2.0"),
        s("zremrangebylex", 4, WRITE, k1, zremrangebylex, WS, "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", "2.8.9"),
        s("zrangestore", -5, WRITE | DENYOOM, keys(1, 2, 1), zrangestore, WS, "Stores a range of members from sorted set in a key.", "6.2.0")
            .key_specs(vec![range_spec(kf::OW_UPDATE, 1, 0, 1), range_spec(kf::RO_ACCESS, 2, 0, 1)]),
        s("zunionstore", -4, WRITE | DENYOOM, k1, zunionstore, WS, "Stores the union of multiple sorted sets in a key.", "2.0.0").key_specs(store_specs()),
        s("zinterstore", -4, WRITE | DENYOOM, k1, zinterstore, WS, "Stores the intersect of multiple sorted sets in a key.", "2.0.0").key_specs(store_specs()),
        s("zdiffstore", -4, WRITE | DENYOOM, k1, zdiffstore, WS, "Stores the difference of multiple sorted sets in a key.", "6.2.0").key_specs(store_specs()),
        s("zunion", -3, READONLY, NO_KEYS, zunion, RS, "Returns the union of multiple sorted sets.", "6.2.0").key_specs(vec![numkeys_spec(kf::RO_ACCESS, 1)]),
        s("zinter", -3, READONLY, NO_KEYS, zinter, RS, "Returns the intersect of multiple sorted sets.", "6.2.0").key_specs(vec![numkeys_spec(kf::RO_ACCESS, 1)]),
        s("zdiff", -3, READONLY, NO_KEYS, zdiff, RS, "Returns the difference between multiple sorted sets.", "6.2.0").key_specs(vec![numkeys_spec(kf::RO_ACCESS, 1)]),
        s("zintercard", -3, READONLY, NO_KEYS, zintercard, RS, "Returns the number of members of the intersect of multiple sorted sets.", "7.0.0").key_specs(vec![numkeys_spec(kf::RO_ACCESS, 1)]),
        s("zmpop", -4, WRITE, NO_KEYS, zmpop, WS, "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", "7.0.0").key_specs(vec![numkeys_spec(kf::RW_ACCESS_DELETE, 1)]),
        s("bzpopmin", -3, WRITE | FAST | BLOCKING, keys(1, -2, 1), bzpopmin, &["write", "sortedset", "fast", "blocking"], "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "5.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, -2, 1)]),
        s("bzpopmax", -3, WRITE | FAST | BLOCKING, keys(1, -2, 1), bzpopmax, &["write", "sortedset", "fast", "blocking"], "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.", "5.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, -2, 1)]),
        // Member TTLs: a densekv extension shaped like HEXPIRE (subexpire.rs).
        s("zexpire", -6, WRITE | DENYOOM | FAST, k1, zexpire, WF, "Set expiry for sorted set members using relative time to expire (seconds)", "7.4.0"),
        s("zpexpire", -6, WRITE | DENYOOM | FAST, k1, zpexpire, WF, "Set expiry for sorted set members using relative time to expire (milliseconds)", "7.4.0"),
        s("zexpireat", -6, WRITE | DENYOOM | FAST, k1, zexpireat, WF, "Set expiry for sorted set members using an absolute Unix timestamp (seconds)", "7.4.0"),
        s("zpexpireat", -6, WRITE | DENYOOM | FAST, k1, zpexpireat, WF, "Set expiry for sorted set members using an absolute Unix timestamp (milliseconds)", "7.4.0"),
        s("zttl", -5, READONLY | FAST, k1, zttl, RF, "Returns the TTL in seconds of sorted set members.", "7.4.0"),
        s("zpttl", -5, READONLY | FAST, k1, zpttl, RF, "Returns the TTL in milliseconds of sorted set members.", "7.4.0"),
        s("zexpiretime", -5, READONLY | FAST, k1, zexpiretime, RF, "Returns the expiration time of sorted set members as a Unix timestamp, in seconds.", "7.4.0"),
        s("zpexpiretime", -5, READONLY | FAST, k1, zpexpiretime, RF, "Returns the expiration time of sorted set members as a Unix timestamp, in msec.", "7.4.0"),
        s("zpersist", -5, WRITE | FAST, k1, zpersist, WF, "Removes the expiration time of sorted set members.", "7.4.0"),
        s("bzmpop", -5, WRITE | BLOCKING, NO_KEYS, bzmpop, &["write", "sortedset", "slow", "blocking"], "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "7.0.0").key_specs(vec![numkeys_spec(kf::RW_ACCESS_DELETE, 2)]),
    ]
}

/// Keys counted by the argument at `at`, starting right after it.
fn numkeys_spec(flags: KeyFlags, at: i32) -> KeySpec {
    KeySpec { flags, begin: Begin::Index(at), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } }
}

/// A *STORE command's keys: the destination, then numkeys-counted sources.
fn store_specs() -> Vec<KeySpec> {
    vec![range_spec(kf::OW_UPDATE, 1, 0, 1), numkeys_spec(kf::RO_ACCESS, 2)]
}

// ---- shared plumbing ------------------------------------------------------

/// Writes members (and scores) as ZRANGE does: with scores, an array of
/// member/score pairs (the reply writer picks RESP2's flat or RESP3's
/// nested shape).
fn reply_items<M: AsRef<[u8]>>(out: &mut Reply, items: &[(M, f64)], withscores: bool) {
    if !withscores {
        out.array(items.len());
        items.iter().for_each(|(m, _)| out.bulk(m.as_ref()));
        return;
    }
    out.pairs(items.len());
    for (m, s) in items {
        out.pair();
        out.bulk(m.as_ref());
        out.double(*s);
    }
}

/// Stores `items` (distinct members) under `dst` or deletes `dst` when empty; replies
/// with the count. The encoding name follows the result, as in Redis.
/// `event` is the command's keyspace event (`zunionstore`, ...).
pub(crate) fn store_result(ctx: &mut Ctx, dst: &[u8], items: &[(Vec<u8>, f64)], event: &str) {
    let now = ctx.now;
    if items.is_empty() {
        if ctx.db().remove(dst, now).is_some() {
            ctx.modified(dst, notify::GENERIC, "del");
        }
        ctx.out().int(0);
        return;
    }
    let mut entries: Vec<(&[u8], f64)> = items.iter().map(|(m, s)| (m.as_slice(), *s)).collect();
    // GEOSEARCHSTORE hands them in distance order.
    if !entries.is_sorted_by(|a, b| cmp_entry(a.1, a.0, b.1, b.0) == std::cmp::Ordering::Less) {
        entries.sort_unstable_by(|a, b| cmp_entry(a.1, a.0, b.1, b.0));
    }
    let z = ZSet::from_sorted(entries, &ctx.srv.config.zset);
    ctx.set_value(dst, Value::ZSet(Box::new(z)), Ttl::Clear);
    ctx.notify(notify::ZSET, event, dst);
    ctx.out().int(items.len() as i64);
}

/// Parses a score that must be a float (NotFloat otherwise).
fn score_arg(a: &[u8]) -> Result<f64, CmdError> {
    arg_f64(a)
}

// ---- ranges -----------------------------------------------------------------

/// A score interval, each end inclusive or exclusive.
#[derive(Debug, Clone, Copy)]
struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
        let bound = |a: &[u8]| -> Option<(f64, bool)> {
            let (ex, t) = match a.first() {
                Some(b'(') => (true, &a[1..]),
                _ => (false, a),
            };
            Some((parse_c_double(t)?, ex))
        };
        let err = || CmdError::err("min or max is not a float");
        let (min, minex) = bound(min).ok_or_else(err)?;
        let (max, maxex) = bound(max).ok_or_else(err)?;
        Ok(ScoreRange { min, minex, max, maxex })
    }

    fn below_min(&self, s: f64) -> bool {
        if self.minex { s <= self.min } else { s < self.min }
    }

    fn within_max(&self, s: f64) -> bool {
        if self.maxex { s < self.max } else { s <= self.max }
    }
}

/// One end of a lex interval.
#[derive(Debug, Clone)]
enum Lex {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

/// A member interval (meaningful when all scores are equal).
#[derive(Debug, Clone)]
struct LexRange {
    min: Lex,
    max: Lex,
}

impl LexRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
        let item = |a: &[u8]| match a {
            b"+" => Some(Lex::PosInf),
            b"-" => Some(Lex::NegInf),
            [b'(', rest @ ..] => Some(Lex::Excl(rest.to_vec())),
            [b'[', rest @ ..] => Some(Lex::Incl(rest.to_vec())),
            _ => None,
        };
        let err = || CmdError::err("min or max not valid string range item");
        Ok(LexRange { min: item(min).ok_or_else(err)?, max: item(max).ok_or_else(err)? })
    }

    fn below_min(&self, m: &[u8]) -> bool {
        match &self.min {
            Lex::NegInf => false,
            Lex::PosInf => true,
            Lex::Incl(x) => m < x.as_slice(),
            Lex::Excl(x) => m <= x.as_slice(),
        }
    }

    fn within_max(&self, m: &[u8]) -> bool {
        match &self.max {
            Lex::NegInf => false,
            Lex::PosInf => true,
            Lex::Incl(x) => m <= x.as_slice(),
            Lex::Excl(x) => m < x.as_slice(),
        }
    }
}

/// What a range command selects.
#[derive(Debug, Clone)]
enum Range {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Ascending rank interval [lo, hi) of the members inside a score or lex range.
fn bounds(z: &ZSet, r: &Range) -> (usize, usize) {
    let (lo, hi) = match r {
        Range::Score(sr) => (z.partition(|s, _| sr.below_min(s)), z.partition(|s, _| sr.within_max(s))),
        Range::Lex(lr) => (z.partition(|_, m| lr.below_min(m)), z.partition(|_, m| lr.within_max(m))),
        Range::Rank(..) => (0, z.len()),
    };
    (lo, hi.max(lo))
}

/// The ascending rank interval a range command emits (reversed for `rev`),
/// after LIMIT `offset`/`limit` (limit < 0: no limit; offset < 0: nothing).
fn select(z: &ZSet, r: &Range, rev: bool, offset: i64, limit: i64) -> (usize, usize) {
    let n = z.len() as i64;
    if let Range::Rank(start, end) = *r {
        let mut s = if start < 0 { start + n } else { start };
        let mut e = if end < 0 { end + n } else { end };
        s = s.max(0);
        if s > e || s >= n {
            return (0, 0);
        }
        e = e.min(n - 1);
        return if rev { ((n - 1 - e) as usize, (n - s) as usize) } else { (s as usize, (e + 1) as usize) };
    }
    let (lo, hi) = bounds(z, r);
    if offset < 0 {
        return (0, 0);
    }
    let avail = hi - lo;
    let off = usize::try_from(offset).unwrap_or(usize::MAX).min(avail);
    let take = if limit < 0 { avail - off } else { usize::try_from(limit).unwrap_or(usize::MAX).min(avail - off) };
    if rev { (hi - off - take, hi - off) } else { (lo + off, lo + off + take) }
}

/// The members of `[lo, hi)`, in emission order.
fn collect(z: &ZSet, (lo, hi): (usize, usize), rev: bool) -> Vec<(&[u8], f64)> {
    let mut v: Vec<_> = z.iter_from(lo).take(hi - lo).collect();
    if rev {
        v.reverse();
    }
    v
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Auto,
    Rank,
    Score,
    Lex,
}

/// ZRANGE and every legacy range command, and ZRANGESTORE (`dst`).
/// `at` is the index of the source key; `kind`/`rev` are fixed by legacy
/// commands and chosen by options (BYSCORE, BYLEX, REV) otherwise.
fn range_generic(ctx: &mut Ctx, args: &[Vec<u8>], at: usize, dst: Option<&[u8]>, mut kind: Kind, rev: Option<bool>) -> CmdResult {
    let key = &args[at];
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut reverse = rev;
    let mut j = at + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if dst.is_none() && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            offset = arg_i64(&args[j + 1])?;
            limit = arg_i64(&args[j + 2])?;
            j += 2;
        } else if reverse.is_none() && is(a, "rev") {
            // A second REV is a syntax error, as a second BYSCORE is.
            reverse = Some(true);
        } else if kind == Kind::Auto && is(a, "bylex") {
            kind = Kind::Lex;
        } else if kind == Kind::Auto && is(a, "byscore") {
            kind = Kind::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = reverse.unwrap_or(false);
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    // Redis takes a count of -1 for "no LIMIT given", so `LIMIT 5 -1` passes by rank.
    if limit != -1 && kind == Kind::Rank {
        return Err(CmdError::err("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
    }
    if withscores && kind == Kind::Lex {
        return Err(CmdError::err("syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut min, mut max) = (&args[at + 1], &args[at + 2]);
    if rev && kind != Kind::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let range = match kind {
        Kind::Score => Range::Score(ScoreRange::parse(min, max)?),
        Kind::Lex => Range::Lex(LexRange::parse(min, max)?),
        _ => Range::Rank(arg_i64(min)?, arg_i64(max)?),
    };
    let (z, out) = ctx.read_out::<ZSet>(key)?;
    let Some(z) = z else {
        match dst {
            Some(d) => store_result(ctx, d, &[], "zrangestore"),
            None => out.array(0),
        }
        return Ok(());
    };
    let sel = select(z, &range, rev, offset, limit);
    let items = collect(z, sel, rev);
    match dst {
        None => reply_items(out, &items, withscores),
        Some(d) => {
            let owned: Vec<(Vec<u8>, f64)> = items.iter().map(|(m, s)| (m.to_vec(), *s)).collect();
            let mut sorted = owned;
            if rev {
                sorted.reverse();
            }
            store_result(ctx, d, &sorted, "zrangestore");
        }
    }
    Ok(())
}

// ---- handlers -----------------------------------------------------------------

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
pub fn zadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    add_generic(ctx, args, false)
}

/// ZINCRBY key increment member
pub fn zincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    add_generic(ctx, args, true)
}

fn add_generic(ctx: &mut Ctx, args: &[Vec<u8>], mut incr: bool) -> CmdResult {
    let key = &args[1];
    let (mut nx, mut xx, mut gt, mut lt, mut ch) = (false, false, false, false, false);
    let mut i = 2;
    if !incr {
        while i < args.len() {
            let a = &args[i];
            if is(a, "nx") {
                nx = true;
            } else if is(a, "xx") {
                xx = true;
            } else if is(a, "ch") {
                ch = true;
            } else if is(a, "incr") {
                incr = true;
            } else if is(a, "gt") {
                gt = true;
            } else if is(a, "lt") {
                lt = true;
            } else {
                break;
            }
            i += 1;
        }
    }
    let rest = &args[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let n = rest.len() / 2;
    if nx && xx {
        return Err(CmdError::err("XX and NX options at the same time are not compatible"));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(CmdError::err("GT, LT, and/or NX options at the same time are not compatible"));
    }
    if incr && n > 1 {
        return Err(CmdError::err("INCR option supports a single increment-element pair"));
    }
    let scores = rest.chunks(2).map(|p| score_arg(&p[0])).collect::<Result<Vec<f64>, _>>()?;
    let cfg = ctx.srv.config.zset;
    let Some(mut w) = (if xx {
        ctx.write::<ZSet>(key, notify::ZSET)?
    } else {
        Some(ctx.write_or_create(key, notify::ZSET, || ZSet::with_hint(n, rest[1].len(), &cfg))?)
    }) else {
        if incr { ctx.out().null() } else { ctx.out().int(0) }
        return Ok(());
    };
    let (z, out) = w.parts();
    z.size_hint(n, &cfg);
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0);
    let mut last = 0.0;
    let mut nan = false;
    // ZADD of a member drops its TTL, as HSET drops a field's, even at the
    // same score; INCR keeps it, as HINCRBY does.
    let mut persisted = false;
    for (pair, &score) in rest.chunks(2).zip(&scores) {
        let member = &pair[1];
        match z.score(member) {
            Some(cur) => {
                if nx {
                    continue;
                }
                let new = if incr { cur + score } else { score };
                if new.is_nan() {
                    nan = true;
                    break;
                }
                if (gt && new <= cur) || (lt && new >= cur) {
                    continue;
                }
                processed += 1;
                last = new;
                if new != cur {
                    if incr {
                        z.insert_keep_ttl(member, new, &cfg);
                    } else {
                        z.insert(member, new, &cfg);
                    }
                    updated += 1;
                } else if !incr && z.persist(member, i64::MIN) == 1 {
                    persisted = true;
                }
            }
            None => {
                if xx {
                    continue;
                }
                z.insert(member, score, &cfg);
                added += 1;
                processed += 1;
                last = score;
            }
        }
    }
    if nan {
        // Only INCR can produce NaN, and it has one pair: nothing changed.
        return Err(CmdError::err("resulting score is not a number (NaN)"));
    }
    if incr {
        if processed > 0 { out.double(last) } else { out.null() }
    } else {
        out.int(if ch { added + updated } else { added });
    }
    if added + updated > 0 {
        w.added(if incr { "zincr" } else { "zadd" });
    }
    if persisted {
        w.touched();
    }
    Ok(())
}

/// ZEXPIRE key seconds [NX|XX|GT|LT] MEMBERS numfields member...
pub fn zexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::expire_generic::<ZSet>(ctx, args, true, true)
}

/// ZPEXPIRE key milliseconds [NX|XX|GT|LT] MEMBERS numfields member...
pub fn zpexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::expire_generic::<ZSet>(ctx, args, false, true)
}

/// ZEXPIREAT key unix-seconds [NX|XX|GT|LT] MEMBERS numfields member...
pub fn zexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::expire_generic::<ZSet>(ctx, args, true, false)
}

/// ZPEXPIREAT key unix-ms [NX|XX|GT|LT] MEMBERS numfields member...
pub fn zpexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::expire_generic::<ZSet>(ctx, args, false, false)
}

/// ZTTL key MEMBERS numfields member...
pub fn zttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::ttl_generic::<ZSet>(ctx, args, true, true)
}

/// ZPTTL key MEMBERS numfields member...
pub fn zpttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::ttl_generic::<ZSet>(ctx, args, false, true)
}

/// ZEXPIRETIME key MEMBERS numfields member...
pub fn zexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::ttl_generic::<ZSet>(ctx, args, true, false)
}

/// ZPEXPIRETIME key MEMBERS numfields member...
pub fn zpexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::ttl_generic::<ZSet>(ctx, args, false, false)
}

/// ZPERSIST key MEMBERS numfields member...
pub fn zpersist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subexpire::persist_generic::<ZSet>(ctx, args)
}

/// ZSCORE key member
pub fn zscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (z, out) = ctx.read_out::<ZSet>(&args[1])?;
    match z.and_then(|z| z.score(&args[2])) {
        Some(s) => out.double(s),
        None => out.null(),
    }
    Ok(())
}

/// ZMSCORE key member [member ...]
pub fn zmscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (z, out) = ctx.read_out::<ZSet>(&args[1])?;
    out.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => out.double(s),
            None => out.null(),
        }
    }
    Ok(())
}

/// ZCARD key
pub fn zcard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = ctx.read::<ZSet>(&args[1])?.map_or(0, ZSet::len);
    ctx.out().int(n as i64);
    Ok(())
}

/// ZREM key member [member ...]
pub fn zrem(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(mut w) = ctx.write::<ZSet>(&args[1], notify::ZSET)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let (z, out) = w.parts();
    let removed = args[2..].iter().filter(|m| z.remove(m).is_some()).count();
    out.int(removed as i64);
    if removed > 0 {
        w.changed("zrem");
    }
    Ok(())
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, 1, None, Kind::Auto, None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
pub fn zrangestore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, 2, Some(&args[1]), Kind::Auto, None)
}

/// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, 1, None, Kind::Rank, Some(true))
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, 1, None, Kind::Score, Some(false))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, 1, None, Kind::Score, Some(true))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, 1, None, Kind::Lex, Some(false))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, 1, None, Kind::Lex, Some(true))
}

/// ZRANK key member [WITHSCORE]
pub fn zrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    rank_generic(ctx, args, false)
}

/// ZREVRANK key member [WITHSCORE]
pub fn zrevrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    rank_generic(ctx, args, true)
}

fn rank_generic(ctx: &mut Ctx, args: &[Vec<u8>], rev: bool) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::Arity(if rev { "zrevrank" } else { "zrank" }.into()));
    }
    let withscore = match args.get(3) {
        Some(a) if is(a, "withscore") => true,
        Some(_) => return Err(CmdError::Syntax),
        None => false,
    };
    let (z, out) = ctx.read_out::<ZSet>(&args[1])?;
    match z.and_then(|z| z.rank(&args[2]).map(|(r, s)| (if rev { z.len() - 1 - r } else { r }, s))) {
        Some((r, s)) => {
            if withscore {
                out.array(2);
            }
            out.int(r as i64);
            if withscore {
                out.double(s);
            }
        }
        None if withscore => out.null_array(),
        None => out.null(),
    }
    Ok(())
}

/// ZCOUNT key min max
pub fn zcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = Range::Score(ScoreRange::parse(&args[2], &args[3])?);
    count_generic(ctx, &args[1], &r)
}

/// ZLEXCOUNT key min max
pub fn zlexcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = Range::Lex(LexRange::parse(&args[2], &args[3])?);
    count_generic(ctx, &args[1], &r)
}

fn count_generic(ctx: &mut Ctx, key: &[u8], r: &Range) -> CmdResult {
    let n = ctx.read::<ZSet>(key)?.map_or(0, |z| {
        let (lo, hi) = bounds(z, r);
        hi - lo
    });
    ctx.out().int(n as i64);
    Ok(())
}

/// ZREMRANGEBYRANK key start stop
pub fn zremrangebyrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = Range::Rank(arg_i64(&args[2])?, arg_i64(&args[3])?);
    remrange_generic(ctx, &args[1], &r)
}

/// ZREMRANGEBYSCORE key min max
pub fn zremrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = Range::Score(ScoreRange::parse(&args[2], &args[3])?);
    remrange_generic(ctx, &args[1], &r)
}

/// ZREMRANGEBYLEX key min max
pub fn zremrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = Range::Lex(LexRange::parse(&args[2], &args[3])?);
    remrange_generic(ctx, &args[1], &r)
}

fn remrange_generic(ctx: &mut Ctx, key: &[u8], r: &Range) -> CmdResult {
    let Some(mut w) = ctx.write::<ZSet>(key, notify::ZSET)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let (z, out) = w.parts();
    let sel = select(z, r, false, 0, -1);
    let doomed: Vec<Vec<u8>> = z.iter_from(sel.0).take(sel.1 - sel.0).map(|(m, _)| m.to_vec()).collect();
    for m in &doomed {
        z.remove(m);
    }
    out.int(doomed.len() as i64);
    if !doomed.is_empty() {
        w.changed(match r {
            Range::Rank(..) => "zremrangebyrank",
            Range::Score(_) => "zremrangebyscore",
            Range::Lex(_) => "zremrangebylex",
        });
    }
    Ok(())
}

/// ZPOPMIN key [count]
pub fn zpopmin(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    zpop_cmd(ctx, args, false)
}

/// ZPOPMAX key [count]
pub fn zpopmax(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    zpop_cmd(ctx, args, true)
}

fn zpop_cmd(ctx: &mut Ctx, args: &[Vec<u8>], max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    // Redis's positive-long parse: a non-integer gets the range text too.
    let count = match args.get(2) {
        Some(a) => Some(arg_range(a, 0, Some("value is out of range, must be positive"))? as usize),
        None => None,
    };
    let Some(mut w) = ctx.write::<ZSet>(&args[1], notify::ZSET)? else {
        ctx.out().array(0);
        return Ok(());
    };
    let popped = pop(&mut w, max, count.unwrap_or(1));
    let out = w.out();
    // With a count, member/score pairs (nested in RESP3); without, one
    // flat member and score in both protocols, as Redis replies.
    if count.is_some() {
        out.pairs(popped.len());
    } else {
        out.array(popped.len() * 2);
    }
    for (m, s) in &popped {
        if count.is_some() {
            out.pair();
        }
        out.bulk(m);
        out.double(*s);
    }
    Ok(())
}

/// Removes up to `count` members from the low (or high, `max`) end of the
/// sorted set under `w` and returns them in pop order; records the change.
fn pop(w: &mut Write<ZSet>, max: bool, count: usize) -> Vec<(Vec<u8>, f64)> {
    let z = w.get();
    let n = count.min(z.len());
    let start = if max { z.len() - n } else { 0 };
    let mut items: Vec<(Vec<u8>, f64)> = z.iter_from(start).take(n).map(|(m, s)| (m.to_vec(), s)).collect();
    if max {
        items.reverse();
    }
    for (m, _) in &items {
        z.remove(m);
    }
    if !items.is_empty() {
        w.changed(if max { "zpopmax" } else { "zpopmin" });
    }
    items
}

/// What wakes a client blocked on a sorted-set key: a sorted set under it.
fn is_zset(v: Option<ValueRef<'_>>) -> bool {
    matches!(v, Some(ValueRef::ZSet(_)))
}

/// BZPOPMIN key [key ...] timeout
pub fn bzpopmin(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bzpop(ctx, args, false)
}

/// BZPOPMAX key [key ...] timeout
pub fn bzpopmax(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bzpop(ctx, args, true)
}

fn bzpop(ctx: &mut Ctx, args: &[Vec<u8>], max: bool) -> CmdResult {
    let deadline = parse_timeout_secs(&args[args.len() - 1], ctx.now)?;
    let keys = &args[1..args.len() - 1];
    for key in keys {
        let Some(mut w) = ctx.write::<ZSet>(key, notify::ZSET)? else {
            continue;
        };
        let popped = pop(&mut w, max, 1);
        let out = w.out();
        out.array(3);
        out.bulk(key);
        for (m, s) in &popped {
            out.bulk(m);
            out.double(*s);
        }
        return Ok(());
    }
    block_or_null(ctx, keys, deadline, is_zset, NullKind::Array)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
pub fn zmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    mpop_generic(ctx, args, 1, false)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub fn bzmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    mpop_generic(ctx, args, 2, true)
}

/// ZMPOP and BZMPOP; `at` is the numkeys argument.
fn mpop_generic(ctx: &mut Ctx, args: &[Vec<u8>], at: usize, block: bool) -> CmdResult {
    let numkeys = resp::num::parse_i64(&args[at]).filter(|&n| n >= 1).ok_or_else(|| CmdError::err("numkeys should be greater than 0"))?;
    let where_at = usize::try_from(numkeys).ok().and_then(|n| n.checked_add(at + 1)).filter(|&w| w < args.len()).ok_or(CmdError::Syntax)?;
    let max = match &args[where_at] {
        a if is(a, "min") => false,
        a if is(a, "max") => true,
        _ => return Err(CmdError::Syntax),
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "count") && j + 1 < args.len() {
            let c = resp::num::parse_i64(&args[j + 1]).filter(|&c| c >= 1).ok_or_else(|| CmdError::err("count should be greater than 0"))?;
            count = Some(c as usize);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let deadline = if block { parse_timeout_secs(&args[1], ctx.now)? } else { None };
    let keys = &args[at + 1..where_at];
    for key in keys {
        let Some(mut w) = ctx.write::<ZSet>(key, notify::ZSET)? else {
            continue;
        };
        let popped = pop(&mut w, max, count.unwrap_or(1));
        let out = w.out();
        // Member/score pairs are nested in both protocols here.
        out.array(2);
        out.bulk(key);
        out.array(popped.len());
        for (m, s) in &popped {
            out.array(2);
            out.bulk(m);
            out.double(*s);
        }
        return Ok(());
    }
    if block {
        return block_or_null(ctx, keys, deadline, is_zset, NullKind::Array);
    }
    ctx.out().null_array();
    Ok(())
}

/// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(c) = args.get(2) else {
        let n = ctx.read::<ZSet>(&args[1])?.map_or(0, ZSet::len);
        if n == 0 {
            ctx.out().null();
            return Ok(());
        }
        let r = (ctx.srv.random() % n as u64) as usize;
        let (z, out) = ctx.read_again::<ZSet>(&args[1])?;
        let z = z.expect("checked above");
        let (m, _) = z.get_by_rank(r).expect("rank < len");
        out.bulk(m);
        return Ok(());
    };
    let l = arg_range(c, -i64::MAX, None)?;
    let withscores = match args.get(3) {
        _ if args.len() > 4 => return Err(CmdError::Syntax),
        Some(a) if is(a, "withscores") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
                return Err(CmdError::err("value is out of range"));
            }
            true
        }
        Some(_) => return Err(CmdError::Syntax),
        None => false,
    };
    let n = ctx.read::<ZSet>(&args[1])?.map_or(0, ZSet::len);
    if n == 0 || l == 0 {
        ctx.out().array(0);
        return Ok(());
    }
    let count = l.unsigned_abs() as usize;
    let ranks: Vec<usize> = if l < 0 {
        (0..count).map(|_| (ctx.srv.random() % n as u64) as usize).collect()
    } else if count >= n {
        (0..n).collect()
    } else {
        // Partial Fisher-Yates over the ranks: distinct, random order.
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..count {
            let j = i + (ctx.srv.random() % (n - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count);
        all
    };
    let (z, out) = ctx.read_again::<ZSet>(&args[1])?;
    let z = z.expect("checked above");
    let items: Vec<(&[u8], f64)> = ranks.iter().map(|&r| z.get_by_rank(r).expect("rank < len")).collect();
    reply_items(out, &items, withscores);
    Ok(())
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
pub fn zscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let cursor = parse_cursor(&args[2]).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let ScanOpts { count, pattern, .. } = parse_scan_opts(args, 3, ScanExtra::Nothing)?;
    let (z, out) = ctx.read_out::<ZSet>(&args[1])?;
    // Redis hands out a listpack's scores as the listpack holds them (its
    // double reply text) but formats a skiplist's with %.17g.
    let text = match z {
        Some(z) if z.encoding_name() != "listpack" => resp::dtoa::format_f64_printf17,
        _ => resp::dtoa::format_f64_reply,
    };
    let mut found: Vec<(Vec<u8>, f64)> = Vec::new();
    let next = match z {
        Some(z) => z.scan(cursor, count, |m, s| {
            if pattern.is_none_or(|p| glob::matches(p, m, false)) {
                found.push((m.to_vec(), s));
            }
        }),
        None => 0,
    };
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(found.len() * 2);
    for (m, s) in &found {
        out.bulk(m);
        out.bulk(text(*s).as_bytes());
    }
    Ok(())
}

// ---- set operations --------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
    /// Redis 8.8: input scores are ignored; each set a member is in adds
    /// its weight (1 by default), so the score counts the sets.
    Count,
}

fn aggregate(a: Aggregate, acc: &mut f64, v: f64) {
    match a {
        Aggregate::Sum | Aggregate::Count => {
            *acc += v;
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        // As Redis compares: an equal value (0 against -0) leaves the
        // accumulated one.
        Aggregate::Min => {
            if v < *acc {
                *acc = v;
            }
        }
        Aggregate::Max => {
            if v > *acc {
                *acc = v;
            }
        }
    }
}

/// Parsed ZUNION/ZINTER/ZDIFF(STORE)/ZINTERCARD arguments.
struct SetOpArgs {
    weights: Vec<f64>,
    agg: Aggregate,
    withscores: bool,
    limit: usize,
}

/// The input keys counted by the numkeys argument at `at`.
fn setop_keys(args: &[Vec<u8>], at: usize) -> Result<&[Vec<u8>], CmdError> {
    let n = arg_i64(&args[at])?;
    if n < 1 {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        return Err(CmdError::err(format!("at least 1 input key is needed for '{name}' command")));
    }
    let n = usize::try_from(n).map_err(|_| CmdError::Syntax)?;
    if n > args.len() - at - 1 {
        return Err(CmdError::Syntax);
    }
    Ok(&args[at + 1..at + 1 + n])
}

/// Parses from the numkeys argument at `at`; `store` and `card` select
/// which options exist, as in Redis.
fn parse_setop(args: &[Vec<u8>], at: usize, op: SetOp, store: bool, card: bool) -> Result<SetOpArgs, CmdError> {
    let n = setop_keys(args, at)?.len();
    let mut p = SetOpArgs { weights: vec![1.0; n], agg: Aggregate::Sum, withscores: false, limit: 0 };
    let mut j = at + 1 + n;
    while j < args.len() {
        let left = args.len() - j;
        let a = &args[j];
        if op != SetOp::Diff && !card && left > n && is(a, "weights") {
            for (w, arg) in p.weights.iter_mut().zip(&args[j + 1..j + 1 + n]) {
                *w = resp::num::parse_f64(arg).ok_or_else(|| CmdError::err("weight value is not a float"))?;
            }
            j += 1 + n;
        } else if op != SetOp::Diff && !card && left >= 2 && is(a, "aggregate") {
            let v = &args[j + 1];
            p.agg = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else if is(v, "count") {
                Aggregate::Count
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && !card && is(a, "withscores") {
            p.withscores = true;
            j += 1;
        } else if card && left >= 2 && is(a, "limit") {
            let l = resp::num::parse_i64(&args[j + 1]).filter(|&l| l >= 0).ok_or_else(|| CmdError::err("LIMIT can't be negative"))?;
            p.limit = usize::try_from(l).unwrap_or(usize::MAX);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(p)
}

/// One input of a set operation, borrowed from the keyspace: a sorted
/// set, a SET (every member scoring 1, as in Redis) or an absent key.
#[derive(Clone, Copy)]
enum Src<'a> {
    Z(&'a ZSet),
    S(&'a Set),
    Empty,
}

/// An input bigger than this many times the members still in play is
/// probed member by member rather than walked.
const PROBE_RATIO: usize = 16;

impl<'a> Src<'a> {
    fn of(v: Option<ValueRef<'a>>) -> Src<'a> {
        match v {
            Some(ValueRef::ZSet(z)) => Src::Z(z),
            Some(ValueRef::Set(s)) => Src::S(s),
            _ => Src::Empty,
        }
    }

    fn len(self) -> usize {
        match self {
            Src::Z(z) => z.len(),
            Src::S(s) => s.len(),
            Src::Empty => 0,
        }
    }

    /// Walks the members in storage order; only a SET's integers are
    /// formatted, everything else is borrowed.
    fn for_each(self, mut f: impl FnMut(Cow<'a, [u8]>, f64)) {
        match self {
            Src::Z(z) => z.for_each(|m, s| f(Cow::Borrowed(m), s)),
            Src::S(s) => s.iter().for_each(|m| match m {
                StrRef::Bytes(b) => f(Cow::Borrowed(b), 1.0),
                StrRef::Int(_) => f(Cow::Owned(m.to_vec()), 1.0),
            }),
            Src::Empty => {}
        }
    }

    fn score(self, m: &[u8]) -> Option<f64> {
        match self {
            Src::Z(z) => z.score(m),
            Src::S(s) => s.contains(m).then_some(1.0),
            Src::Empty => None,
        }
    }
}

/// A score times its input's weight; 0 where that is NaN (0 * inf), as in
/// Redis.
fn weighted(s: f64, w: f64) -> f64 {
    let v = s * w;
    if v.is_nan() { 0.0 } else { v }
}

/// Adds every input's members, weighted, to `acc`, combining with `f`;
/// inputs in the order `order` gives, scores read through `score`.
fn union_into<'a>(acc: &mut Members<'a, f64>, srcs: &[Src<'a>], weights: &[f64], order: &[usize], score: impl Fn(f64) -> f64, f: impl Fn(&mut f64, f64)) {
    for &i in order {
        let (src, w) = (srcs[i], weights[i]);
        src.for_each(|m, s| {
            let v = weighted(score(s), w);
            acc.upsert(m, || v, |a| f(a, v));
        });
    }
}

/// Members with their combined scores, as a set operation yields them.
type Combined = Vec<(Vec<u8>, f64)>;

/// Computes a set operation; the result is sorted by (score, member)
/// unless `card` (ZINTERCARD only counts; at most `limit` members, 0: no
/// limit). The inputs (numkeys at `at`) are looked up before the options
/// are parsed, as Redis refuses a key of the wrong type before a bad option.
///
/// The inputs are read in place, never copied: a union accumulates into
/// one hash table sized up front for the largest input; an intersection
/// starts from the smallest input and, input by input, keeps the members found
/// again, walking an input or, when it is much larger than what is left,
/// probing it per member; a difference removes the others' members the
/// same way.
fn compute(ctx: &mut Ctx, args: &[Vec<u8>], at: usize, op: SetOp, store: bool, card: bool) -> Result<(SetOpArgs, Combined), CmdError> {
    let mut held = Vec::new();
    let values = ctx.read_many(setop_keys(args, at)?, &mut held, |v| matches!(v, ValueRef::ZSet(_) | ValueRef::Set(_)))?;
    let p = parse_setop(args, at, op, store, card)?;
    let srcs: Vec<Src> = values.into_iter().map(Src::of).collect();
    // Redis combines the inputs from the smallest to the largest (a stable
    // sort), which decides how floating-point sums round and which of 0
    // and -0 a MIN or MAX keeps.
    let mut order: Vec<usize> = (0..srcs.len()).collect();
    if op != SetOp::Diff {
        order.sort_by_key(|&i| srcs[i].len());
    }
    // COUNT (Redis 8.8) ignores the input scores: each input a member is
    // in adds its weight.
    let count = p.agg == Aggregate::Count;
    let score = move |s: f64| if count { 1.0 } else { s };
    let mut result: Combined = match op {
        SetOp::Union => {
            let largest = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
            let mut acc = Members::with_capacity(largest);
            // One loop per aggregate, so that none decides per member.
            match p.agg {
                Aggregate::Sum | Aggregate::Count => {
                    union_into(&mut acc, &srcs, &p.weights, &order, score, |a, v| aggregate(Aggregate::Sum, a, v))
                }
                Aggregate::Min => union_into(&mut acc, &srcs, &p.weights, &order, score, |a, v| aggregate(Aggregate::Min, a, v)),
                Aggregate::Max => union_into(&mut acc, &srcs, &p.weights, &order, score, |a, v| aggregate(Aggregate::Max, a, v)),
            }
            acc.into_vec()
        }
        SetOp::Inter => {
            let first = order[0];
            let mut acc = Members::with_capacity(srcs[first].len());
            srcs[first].for_each(|m, s| acc.upsert(m, || (weighted(score(s), p.weights[first]), false), |_| {}));
            for &i in &order[1..] {
                if acc.is_empty() {
                    break;
                }
                let (src, w) = (srcs[i], p.weights[i]);
                let mut hits = 0;
                // Unlike the first input's, these products stay NaN (0 *
                // inf), as in Redis: a SUM meeting one restarts from 0.
                let mut found = |e: &mut (f64, bool), s: f64| {
                    aggregate(p.agg, &mut e.0, score(s) * w);
                    e.1 = true;
                    hits += 1;
                };
                if src.len() > PROBE_RATIO * acc.len() {
                    acc.for_each_mut(|m, e| {
                        if let Some(s) = src.score(m) {
                            found(e, s);
                        }
                    });
                } else {
                    src.for_each(|m, s| {
                        if let Some(e) = acc.get_mut(&m) {
                            found(e, s);
                        }
                    });
                }
                if hits == acc.len() {
                    acc.for_each_mut(|_, e| e.1 = false);
                } else {
                    acc.retain(|_, e| std::mem::take(&mut e.1));
                }
            }
            let found = acc.into_vec().into_iter().map(|(m, (s, _))| (m, s));
            if card && p.limit > 0 { found.take(p.limit).collect() } else { found.collect() }
        }
        SetOp::Diff => {
            let mut acc = Members::with_capacity(srcs[0].len());
            srcs[0].for_each(|m, s| acc.upsert(m, || s, |_| {}));
            for &src in &srcs[1..] {
                if acc.is_empty() {
                    break;
                }
                if src.len() > PROBE_RATIO * acc.len() {
                    acc.retain(|m, _| src.score(m).is_none());
                } else {
                    src.for_each(|m, _| acc.remove(&m));
                }
            }
            acc.into_vec()
        }
    };
    if !card {
        result.sort_unstable_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
    }
    Ok((p, result))
}

fn setop_reply(ctx: &mut Ctx, args: &[Vec<u8>], op: SetOp) -> CmdResult {
    let (p, items) = compute(ctx, args, 1, op, false, false)?;
    reply_items(ctx.out(), &items, p.withscores);
    Ok(())
}

fn setop_store(ctx: &mut Ctx, args: &[Vec<u8>], op: SetOp) -> CmdResult {
    let (_, items) = compute(ctx, args, 2, op, true, false)?;
    let event = match op {
        SetOp::Union => "zunionstore",
        SetOp::Inter => "zinterstore",
        SetOp::Diff => "zdiffstore",
    };
    store_result(ctx, &args[1], &items, event);
    Ok(())
}

/// ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX|COUNT] [WITHSCORES]
pub fn zunion(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    setop_reply(ctx, args, SetOp::Union)
}

/// ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX|COUNT] [WITHSCORES]
pub fn zinter(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    setop_reply(ctx, args, SetOp::Inter)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
pub fn zdiff(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    setop_reply(ctx, args, SetOp::Diff)
}

/// ZUNIONSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX|COUNT]
pub fn zunionstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    setop_store(ctx, args, SetOp::Union)
}

/// ZINTERSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX|COUNT]
pub fn zinterstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    setop_store(ctx, args, SetOp::Inter)
}

/// ZDIFFSTORE dst numkeys key [key ...]
pub fn zdiffstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    setop_store(ctx, args, SetOp::Diff)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn zintercard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = compute(ctx, args, 1, SetOp::Inter, false, true)?.1.len();
    ctx.out().int(n as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_select() {
        let cfg = storage::types::zset::ZsetConfig::default();
        let mut z = ZSet::new();
        for (i, m) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            z.insert(m.as_bytes(), i as f64, &cfg);
        }
        assert_eq!(select(&z, &Range::Rank(0, -1), false, 0, -1), (0, 5));
        assert_eq!(select(&z, &Range::Rank(0, 1), true, 0, -1), (3, 5));
        assert_eq!(select(&z, &Range::Rank(3, 1), false, 0, -1), (0, 0));
        let sr = Range::Score(ScoreRange::parse(b"(1", b"3").unwrap());
        assert_eq!(select(&z, &sr, false, 0, -1), (2, 4));
        assert_eq!(select(&z, &sr, true, 1, 5), (2, 3));
        assert_eq!(select(&z, &sr, false, -1, 5), (0, 0));
        let lr = Range::Lex(LexRange::parse(b"[b", b"(d").unwrap());
        assert_eq!(bounds(&z, &lr), (1, 3));
        assert!(LexRange::parse(b"b", b"+").is_err());
        assert!(ScoreRange::parse(b"(x", b"1").is_err());
    }
}
