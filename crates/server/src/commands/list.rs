//! The LIST command family: LPUSH ... LMPOP.
//!
//! Handlers parse every argument before touching the keyspace (Redis's
//! order: numbers and keywords first, then the key's type; LINDEX and LSET
//! look the key up first, as Redis does), so an error is always the only
//! reply. Storage (`storage::types::list::List`) picks the
//! encoding; the handlers pass it `list-max-listpack-size` and never look at
//! the shape. Keys are reached through `crate::access`: a write guard deletes
//! a list that became empty and raises the write's events.
//!
//! The blocking variants (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) serve at
//! once when a list has data, else block through `crate::blocking`, which
//! re-runs the same handler when a waited key gets a list.

use crate::notify;
use resp::Reply;
use storage::types::list::{Elem, End, List};
use storage::{StrRef, ValueRef};

use crate::command::flags::*;
use crate::args::parse_timeout_secs;
use crate::command::{block_or_null, NullKind};
use crate::command::{arg_i64, arg_range, is, keys, kf, range_spec, spec, Begin, CmdError, CmdResult, Ctx, Find, KeySpec, Spec, NO_KEYS};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    const RF: &[&str] = &["read", "list", "fast"];
    const RS: &[&str] = &["read", "list", "slow"];
    const WF: &[&str] = &["write", "list", "fast"];
    const WS: &[&str] = &["write", "list", "slow"];
    const WSB: &[&str] = &["write", "list", "slow", "blocking"];
    let k1 = keys(1, 1, 1);
    let k12 = keys(1, 2, 1);
    // Source popped from, destination pushed to (LMOVE, RPOPLPUSH).
    let moves = || vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1), range_spec(kf::RW_INSERT, 2, 0, 1)];
    let s = |name, arity, flags, k, h, acl, summary, since| {
        spec(name, arity, flags, k, h)
            .acl(acl)
            .group("list")
            .doc(summary, since)
    };
    vec![
        s("lpush", -3, WRITE | DENYOOM | FAST, k1, lpush, WF, "Prepends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"),
        s("rpush", -3, WRITE | DENYOOM | FAST, k1, rpush, WF, "Appends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"),
        s("lpushx", -3, WRITE | DENYOOM | FAST, k1, lpushx, WF, "Prepends one or more elements to a list only when the list exists.", "2.2.0"),
        s("rpushx", -3, WRITE | DENYOOM | FAST, k1, rpushx, WF, "Appends an element to a list only when the list exists.", "2.2.0"),
        s("lpop", -2, WRITE | FAST, k1, lpop, WF, "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1)]),
        s("rpop", -2, WRITE | FAST, k1, rpop, WF, "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", "1.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1)]),
        s("llen", 2, READONLY | FAST, k1, llen, RF, "Returns the length of a list.", "1.0.0")
            .key_specs(vec![range_spec(kf::RO, 1, 0, 1)]),
        s("lrange", 4, READONLY, k1, lrange, RS, "Returns a range of elements from a list.", "1.0.0"),
        s("lindex", 3, READONLY, k1, lindex, RS, "Returns an element from a list by its index.", "1.0.0"),
        s("lset", 4, WRITE | DENYOOM, k1, lset, WS, "Sets the value of an element in a list by its index.", "1.0.0"),
        s("lrem", 4, WRITE, k1, lrem, WS, "Removes elements from a list. Deletes the list if the last element was removed.", "1.0.0"),
        s("ltrim", 4, WRITE, k1, ltrim, WS, "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "1.0.0"),
        s("linsert", 5, WRITE | DENYOOM, k1, linsert, WS, "Inserts an element before or after another element in a list.", "2.2.0"),
        s("lpos", -3, READONLY, k1, lpos, RS, "Returns the index of matching elements in a list.", "6.0.6"),
        s("lmove", 5, WRITE | DENYOOM, k12, lmove, WS, "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "6.2.0").key_specs(moves()),
        s("rpoplpush", 3, WRITE | DENYOOM, k12, rpoplpush, WS, "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "1.2.0").key_specs(moves()),
        // Keys follow numkeys (movable keys, no legacy range), as in Redis.
        s("lmpop", -4, WRITE, NO_KEYS, lmpop, WS, "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "7.0.0")
            .key_specs(vec![numkeys_spec(1)]),
        s("blpop", -3, WRITE | BLOCKING, keys(1, -2, 1), blpop, WSB, "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, -2, 1)]),
        s("brpop", -3, WRITE | BLOCKING, keys(1, -2, 1), brpop, WSB, "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, -2, 1)]),
        s("brpoplpush", 4, WRITE | DENYOOM | BLOCKING, k12, brpoplpush, WSB, "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "2.2.0").key_specs(moves()),
        s("blmove", 6, WRITE | DENYOOM | BLOCKING, k12, blmove, WSB, "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "6.2.0").key_specs(moves()),
        s("blmpop", -5, WRITE | BLOCKING, NO_KEYS, blmpop, WSB, "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "7.0.0")
            .key_specs(vec![numkeys_spec(2)]),
    ]
}

/// Keys counted by the argument at `at`, starting right after it (LMPOP, BLMPOP).
fn numkeys_spec(at: i32) -> KeySpec {
    KeySpec { flags: kf::RW_ACCESS_DELETE, begin: Begin::Index(at), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } }
}

/// What wakes a client blocked on a list key: a list under it.
fn is_list(v: Option<ValueRef<'_>>) -> bool {
    matches!(v, Some(ValueRef::List(_)))
}

/// Writes an element as a bulk string.
fn bulk(out: &mut Reply, v: StrRef<'_>) {
    match v {
        StrRef::Int(i) => out.bulk_i64(i),
        StrRef::Bytes(b) => out.bulk(b),
    }
}

/// LEFT or RIGHT; syntax error otherwise.
fn arg_end(a: &[u8]) -> Result<End, CmdError> {
    if is(a, "left") {
        Ok(End::Head)
    } else if is(a, "right") {
        Ok(End::Tail)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Pushes the elements at `end` of the list at `args[1]`, creating it
/// unless `existing_only`; replies the new length (0: no such key).
fn push_generic(ctx: &mut Ctx, args: &[Vec<u8>], end: End, existing_only: bool) -> CmdResult {
    let (key, cfg) = (&args[1], ctx.srv.config.list);
    let Some(mut w) = (if existing_only {
        ctx.write::<List>(key, notify::LIST)?
    } else {
        Some(ctx.write_or_create(key, notify::LIST, List::new)?)
    }) else {
        ctx.out().int(0);
        return Ok(());
    };
    let (l, out) = w.parts();
    l.push(end, &args[2..], &cfg);
    out.int(l.len() as i64);
    w.added(push_event(end));
    Ok(())
}

/// LPUSH key element [element ...]
pub fn lpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push_generic(ctx, args, End::Head, false)
}

/// RPUSH key element [element ...]
pub fn rpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push_generic(ctx, args, End::Tail, false)
}

/// LPUSHX key element [element ...]
pub fn lpushx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push_generic(ctx, args, End::Head, true)
}

/// RPUSHX key element [element ...]
pub fn rpushx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push_generic(ctx, args, End::Tail, true)
}

fn pop_generic(ctx: &mut Ctx, args: &[Vec<u8>], end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Arity(
            String::from_utf8_lossy(&args[0]).to_ascii_lowercase(),
        ));
    }
    let count = match args.get(2) {
        Some(a) => Some(arg_range(a, 0, Some("value is out of range, must be positive"))? as usize),
        None => None,
    };
    let cfg = ctx.srv.config.list;
    let Some(mut w) = ctx.write::<List>(&args[1], notify::LIST)? else {
        match count {
            Some(_) => ctx.out().null_array(),
            None => ctx.out().null(),
        }
        return Ok(());
    };
    let (l, out) = w.parts();
    match count {
        None => {
            let v = l.pop(end, &cfg).expect("stored lists are never empty");
            out.bulk(&v);
        }
        Some(0) => {
            out.array(0);
            return Ok(());
        }
        Some(n) => {
            let n = n.min(l.len());
            out.array(n);
            for _ in 0..n {
                out.bulk(&l.pop(end, &cfg).expect("counted"));
            }
        }
    }
    w.changed(pop_event(end));
    Ok(())
}

/// The event of a push at `end`.
fn push_event(end: End) -> &'static str {
    match end {
        End::Head => "lpush",
        End::Tail => "rpush",
    }
}

/// The event of a pop at `end`.
fn pop_event(end: End) -> &'static str {
    match end {
        End::Head => "lpop",
        End::Tail => "rpop",
    }
}

/// LPOP key [count]
pub fn lpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    pop_generic(ctx, args, End::Head)
}

/// RPOP key [count]
pub fn rpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    pop_generic(ctx, args, End::Tail)
}

/// LLEN key
pub fn llen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = ctx.read::<List>(&args[1])?.map_or(0, List::len);
    ctx.out().int(n as i64);
    Ok(())
}

/// Clamps Redis's (start, stop) to a range of `len` elements: (first, count).
fn clamp_range(start: i64, stop: i64, len: usize) -> (usize, usize) {
    let len = len as i64;
    let mut start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    };
    let mut stop = if stop < 0 {
        stop.saturating_add(len)
    } else {
        stop
    };
    start = start.max(0);
    if start > stop || start >= len {
        return (0, 0);
    }
    stop = stop.min(len - 1);
    (start as usize, (stop - start + 1) as usize)
}

/// LRANGE key start stop
pub fn lrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (start, stop) = (arg_i64(&args[2])?, arg_i64(&args[3])?);
    let (l, out) = ctx.read_out::<List>(&args[1])?;
    let Some(l) = l else {
        out.array(0);
        return Ok(());
    };
    let (first, n) = clamp_range(start, stop, l.len());
    out.array(n);
    for v in l.iter_from(first).take(n) {
        bulk(out, v.get());
    }
    Ok(())
}

/// LINDEX key index
pub fn lindex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // Unlike most list commands, Redis looks the key up before the index:
    // a missing key is a null and a wrong type WRONGTYPE whatever the index.
    let (l, out) = ctx.read_out::<List>(&args[1])?;
    let Some(l) = l else {
        out.null();
        return Ok(());
    };
    let index = arg_i64(&args[2])?;
    match l.get(index) {
        Some(v) => bulk(out, v.get()),
        None => out.null(),
    }
    Ok(())
}

/// LSET key index element
pub fn lset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let cfg = ctx.srv.config.list;
    // The key first (no such key, WRONGTYPE), then the index, as in Redis.
    let mut w = ctx.write::<List>(&args[1], notify::LIST)?.ok_or(CmdError::NoSuchKey)?;
    // Redis hands the index on as a C int, keeping its low 32 bits: LSET at
    // 9223372036854775807 (0x7fff_ffff_ffff_ffff, so -1) sets the last element.
    let index = i64::from(arg_i64(&args[2])? as i32);
    let (l, out) = w.parts();
    let i = l
        .resolve(index)
        .ok_or_else(|| CmdError::err("index out of range"))?;
    l.set(i, &args[3], &cfg);
    out.ok();
    w.changed("lset");
    Ok(())
}

/// LREM key count element
pub fn lrem(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let count = arg_range(&args[2], -i64::MAX, None)?;
    let cfg = ctx.srv.config.list;
    let Some(mut w) = ctx.write::<List>(&args[1], notify::LIST)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let (l, out) = w.parts();
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let removed = l.remove(&args[3], limit, count < 0, &cfg);
    out.int(removed as i64);
    if removed > 0 {
        w.changed("lrem");
    }
    Ok(())
}

/// LTRIM key start stop
pub fn ltrim(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (start, stop) = (arg_i64(&args[2])?, arg_i64(&args[3])?);
    let cfg = ctx.srv.config.list;
    let Some(mut w) = ctx.write::<List>(&args[1], notify::LIST)? else {
        ctx.out().ok();
        return Ok(());
    };
    let (l, out) = w.parts();
    let (first, n) = clamp_range(start, stop, l.len());
    l.keep_range(first, n, &cfg);
    out.ok();
    // Signalled even when nothing was trimmed, as Redis does.
    w.changed("ltrim");
    Ok(())
}

/// LINSERT key BEFORE|AFTER pivot element
pub fn linsert(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let after = if is(&args[2], "after") {
        true
    } else if is(&args[2], "before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let cfg = ctx.srv.config.list;
    let Some(mut w) = ctx.write::<List>(&args[1], notify::LIST)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let (l, out) = w.parts();
    if !l.insert_by_pivot(&args[3], after, &args[4], &cfg) {
        out.int(-1);
        return Ok(());
    }
    out.int(l.len() as i64);
    w.changed("linsert");
    Ok(())
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
pub fn lpos(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut rank, mut count, mut maxlen): (i64, Option<usize>, usize) = (1, None, 0);
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if is(&args[j], "rank") && more {
            rank = arg_range(&args[j + 1], -i64::MAX, None)?;
            if rank == 0 {
                return Err(CmdError::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(&args[j], "count") && more {
            count = Some(arg_range(&args[j + 1], 0, Some("COUNT can't be negative"))? as usize);
        } else if is(&args[j], "maxlen") && more {
            maxlen = arg_range(&args[j + 1], 0, Some("MAXLEN can't be negative"))? as usize;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    let elem = &args[2];
    let (l, out) = ctx.read_out::<List>(&args[1])?;
    let Some(l) = l else {
        match count {
            Some(_) => out.array(0),
            None => out.null(),
        }
        return Ok(());
    };
    let len = l.len();
    let from_tail = rank < 0;
    let skip = rank.unsigned_abs() - 1;
    let scan: Box<dyn Iterator<Item = Elem>> = if from_tail {
        Box::new(l.rev_from(len - 1))
    } else {
        Box::new(l.iter())
    };
    let limit = if maxlen == 0 { len } else { maxlen.min(len) };
    let want = match count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => n,
    };
    let mut found = Vec::new();
    let mut matches = 0u64;
    for (k, v) in scan.take(limit).enumerate() {
        if storage::encoding::listpack::eq(v.get(), elem) {
            matches += 1;
            if matches > skip {
                found.push(if from_tail { len - 1 - k } else { k });
                if found.len() >= want {
                    break;
                }
            }
        }
    }
    match count {
        Some(_) => {
            out.array(found.len());
            for i in found {
                out.int(i as i64);
            }
        }
        None => match found.first() {
            Some(&i) => out.int(i as i64),
            None => out.null(),
        },
    }
    Ok(())
}

/// Pops from `src` and pushes onto `dst`; replies the element or null.
///
/// Redis counts an LMOVE as one change and raises the push on the
/// destination before the pop on the source, so the source's guard records
/// nothing: its signal and events are raised here after the push, and the
/// destination's guard counts the change.
fn move_generic(ctx: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End) -> CmdResult {
    let cfg = ctx.srv.config.list;
    let Some(mut s) = ctx.write::<List>(src, notify::LIST)? else {
        ctx.out().null();
        return Ok(());
    };
    s.ctx().holds::<List>(dst)?;
    if src == dst {
        // A rotation: the list is never empty in between.
        let (l, out) = s.parts();
        let v = l.pop(from, &cfg).expect("stored lists are never empty");
        l.push(to, &[&v], &cfg);
        out.bulk(&v);
        s.changed(push_event(to));
        s.changed(pop_event(from));
        return Ok(());
    }
    let (l, out) = s.parts();
    let v = l.pop(from, &cfg).expect("stored lists are never empty");
    out.bulk(&v);
    // Stored lists are never empty: the drop below deletes an emptied one.
    let gone = l.is_empty();
    drop(s);
    ctx.key_touched(src);
    let mut d = ctx.write_or_create(dst, notify::LIST, List::new)?;
    d.get().push(to, &[&v], &cfg);
    d.changed(push_event(to));
    drop(d);
    ctx.notify(notify::LIST, pop_event(from), src);
    if gone {
        ctx.notify(notify::GENERIC, "del", src);
    }
    Ok(())
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
pub fn lmove(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (from, to) = (arg_end(&args[3])?, arg_end(&args[4])?);
    move_generic(ctx, &args[1], &args[2], from, to)
}

/// RPOPLPUSH source destination
pub fn rpoplpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    move_generic(ctx, &args[1], &args[2], End::Tail, End::Head)
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub fn lmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (keys, end, count) = parse_mpop(args, 1)?;
    if !mpop(ctx, keys, end, count)? {
        ctx.out().null_array();
    }
    Ok(())
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub fn blmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (keys, end, count) = parse_mpop(args, 2)?;
    let deadline = parse_timeout_secs(&args[1], ctx.now)?;
    if mpop(ctx, keys, end, count)? {
        return Ok(());
    }
    block_or_null(ctx, keys, deadline, is_list, NullKind::Array)
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT n]` from `args[at]` on:
/// (keys, end, count).
fn parse_mpop(args: &[Vec<u8>], at: usize) -> Result<(&[Vec<u8>], End, usize), CmdError> {
    let numkeys = arg_range(&args[at], 1, Some("numkeys should be greater than 0"))? as u64;
    let keys_end = (at as u64 + 1).saturating_add(numkeys);
    if keys_end >= args.len() as u64 {
        return Err(CmdError::Syntax);
    }
    let keys_end = keys_end as usize;
    let end = arg_end(&args[keys_end])?;
    let mut count = None;
    let mut j = keys_end + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "count") && j + 1 < args.len() {
            count =
                Some(arg_range(&args[j + 1], 1, Some("count should be greater than 0"))? as usize);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((&args[at + 1..keys_end], end, count.unwrap_or(1)))
}

/// Pops up to `count` elements from the first non-empty list of `keys` and
/// replies `[key, [elements]]`; false (nothing written) if all are empty.
fn mpop(ctx: &mut Ctx, keys: &[Vec<u8>], end: End, count: usize) -> Result<bool, CmdError> {
    let cfg = ctx.srv.config.list;
    for key in keys {
        let Some(mut w) = ctx.write::<List>(key, notify::LIST)? else {
            continue;
        };
        let (l, out) = w.parts();
        let n = count.min(l.len());
        out.array(2);
        out.bulk(key);
        out.array(n);
        for _ in 0..n {
            out.bulk(&l.pop(end, &cfg).expect("counted"));
        }
        w.changed(pop_event(end));
        return Ok(true);
    }
    Ok(false)
}

fn bpop(ctx: &mut Ctx, args: &[Vec<u8>], end: End) -> CmdResult {
    let deadline = parse_timeout_secs(&args[args.len() - 1], ctx.now)?;
    let keys = &args[1..args.len() - 1];
    let cfg = ctx.srv.config.list;
    for key in keys {
        let Some(mut w) = ctx.write::<List>(key, notify::LIST)? else {
            continue;
        };
        let (l, out) = w.parts();
        let v = l.pop(end, &cfg).expect("stored lists are never empty");
        out.array(2);
        out.bulk(key);
        out.bulk(&v);
        w.changed(pop_event(end));
        return Ok(());
    }
    block_or_null(ctx, keys, deadline, is_list, NullKind::Array)
}

/// BLPOP key [key ...] timeout
pub fn blpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bpop(ctx, args, End::Head)
}

/// BRPOP key [key ...] timeout
pub fn brpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bpop(ctx, args, End::Tail)
}

/// LMOVE from `src` to `dst` if `src` holds a list, else blocks on `src`.
fn bmove(ctx: &mut Ctx, args: &[Vec<u8>], from: End, to: End, timeout: &[u8]) -> CmdResult {
    let deadline = parse_timeout_secs(timeout, ctx.now)?;
    if !ctx.holds::<List>(&args[1])? {
        return block_or_null(ctx, &args[1..2], deadline, is_list, NullKind::Bulk);
    }
    move_generic(ctx, &args[1], &args[2], from, to)
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
pub fn blmove(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (from, to) = (arg_end(&args[3])?, arg_end(&args[4])?);
    bmove(ctx, args, from, to, &args[5])
}

/// BRPOPLPUSH source destination timeout
pub fn brpoplpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bmove(ctx, args, End::Tail, End::Head, &args[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(clamp_range(0, -1, 5), (0, 5));
        assert_eq!(clamp_range(-100, 100, 5), (0, 5));
        assert_eq!(clamp_range(3, 1, 5), (0, 0));
        assert_eq!(clamp_range(5, 10, 5), (0, 0));
        assert_eq!(clamp_range(-2, -1, 5), (3, 2));
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 5), (0, 5));
    }

    #[test]
    fn numbers() {
        assert_eq!(
            arg_range(b"x", 0, Some("COUNT can't be negative")),
            Err(CmdError::err("COUNT can't be negative"))
        );
        assert_eq!(arg_range(b"x", -i64::MAX, None), Err(CmdError::NotInt));
        assert_eq!(
            arg_range(b"-9223372036854775808", -i64::MAX, None),
            Err(CmdError::err("value is out of range, value must between -9223372036854775807 and 9223372036854775807"))
        );
        assert_eq!(arg_end(b"LeFt"), Ok(End::Head));
        assert_eq!(arg_end(b"up"), Err(CmdError::Syntax));
    }
}
