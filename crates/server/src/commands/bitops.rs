//! Bitmap commands: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO.
//!
//! A bitmap is a plain string; bit 0 is the most significant bit of byte 0.
//! Offsets are checked against proto-max-bulk-len before any string is grown,
//! so a huge offset costs an error, not an allocation. Reads treat bytes past
//! the end as zero and never grow the string; writes grow it zero-padded and
//! store it back whole (the keyspace hands out read-only string views).
//!
//! BITFIELD's overflow rules (WRAP, SAT, FAIL) follow Redis's arithmetic
//! exactly, including its treatment of out-of-range SET values.

use crate::notify;
use storage::{Ttl, Value};

use crate::command::flags::*;
use crate::commands::string::with_bytes;
use crate::command::{is, keys, kf, range_spec, spec, CmdError, CmdResult, Ctx, KeyFlags, Spec};

/// BITFIELD's key flags: only read when every operation is GET.
fn bitfield_keys(argv: &[Vec<u8>]) -> Vec<(usize, KeyFlags)> {
    let writes = argv.iter().skip(2).any(|a| is(a, "set") || is(a, "incrby"));
    vec![(1, if writes { kf::RW_ACCESS_UPDATE } else { kf::RO_ACCESS })]
}

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let k1 = keys(1, 1, 1);
    let s = |name, arity, flags, k, h, acl, summary, since| spec(name, arity, flags, k, h).acl(acl).group("bitmap").doc(summary, since);
    const WS: &[&str] = &["write", "bitmap", "slow"];
    const RF: &[&str] = &["read", "bitmap", "fast"];
    const RS: &[&str] = &["read", "bitmap", "slow"];
    vec![
        s("setbit", 4, WRITE | DENYOOM, k1, setbit, WS, "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", "2.2.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE, 1, 0, 1)]),
        s("getbit", 3, READONLY | FAST, k1, getbit, RF, "Returns a bit value by offset.", "2.2.0"),
        s("bitcount", -2, READONLY, k1, bitcount, RS, "Counts the number of set bits (population counting) in a string.", "2.6.0"),
        s("bitpos", -3, READONLY, k1, bitpos, RS, "Finds the first set (1) or clear (0) bit in a string.", "2.8.7"),
        s("bitop", -4, WRITE | DENYOOM, keys(2, -1, 1), bitop, WS, "Performs bitwise operations on multiple strings, and stores the result.", "2.6.0")
            .key_specs(vec![range_spec(kf::OW_UPDATE, 2, 0, 1), range_spec(kf::RO_ACCESS, 3, -1, 1)]),
        s("bitfield", -2, WRITE | DENYOOM, k1, bitfield, WS, "Performs arbitrary bitfield integer operations on strings.", "3.2.0")
            .key_specs(vec![range_spec(kf::RW_ACCESS_UPDATE_VAR, 1, 0, 1)])
            .getkeys(bitfield_keys),
        s("bitfield_ro", -2, READONLY | FAST, k1, bitfield_ro, RF, "Performs arbitrary read-only bitfield integer operations on strings.", "6.0.0"),
    ]
}

fn bad_offset() -> CmdError {
    CmdError::err("bit offset is not an integer or out of range")
}

/// Parses a bit offset. With `bits > 0`, a `#n` offset means `n * bits`
/// (BITFIELD). The byte holding the bit must lie within proto-max-bulk-len.
fn parse_bit_offset(ctx: &Ctx, arg: &[u8], bits: u32) -> Result<u64, CmdError> {
    let (hash, digits) = match arg.split_first() {
        Some((b'#', rest)) if bits > 0 => (true, rest),
        _ => (false, arg),
    };
    let mut v = resp::num::parse_i64(digits).ok_or_else(bad_offset)?;
    if hash {
        v = v.checked_mul(bits as i64).ok_or_else(bad_offset)?;
    }
    if v < 0 || (v >> 3) >= ctx.srv.config.proto_max_bulk_len {
        return Err(bad_offset());
    }
    Ok(v as u64)
}

/// The string at `key` grown (zero-padded) to hold bit `maxbit`, for writing.
/// Returns the bytes and whether growing (or creating) changed anything.
fn string_for_write(ctx: &mut Ctx, key: &[u8], maxbit: u64) -> Result<(Vec<u8>, bool), CmdError> {
    // The offset was checked against proto-max-bulk-len, so this fits.
    let need = (maxbit >> 3) as usize + 1;
    match ctx.read_str(key)?.0 {
        None => Ok((vec![0; need], true)),
        Some(s) => {
            let mut v = Vec::with_capacity(need.max(s.len()));
            with_bytes(s, |b| v.extend_from_slice(b));
            let grown = v.len() < need;
            if grown {
                v.resize(need, 0);
            }
            Ok((v, grown))
        }
    }
}

/// SETBIT key offset value
pub fn setbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let offset = parse_bit_offset(ctx, &args[2], 0)?;
    let bad_bit = || CmdError::err("bit is not an integer or out of range");
    let on = resp::num::parse_i64(&args[3]).ok_or_else(bad_bit)?;
    if on & !1 != 0 {
        return Err(bad_bit());
    }
    let key = &args[1];
    let (mut v, dirty) = string_for_write(ctx, key, offset)?;
    let (byte, mask) = ((offset >> 3) as usize, 0x80u8 >> (offset & 7));
    let old = v[byte] & mask != 0;
    if dirty || old != (on == 1) {
        if on == 1 {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        // Bytes even when it reads as an integer: Redis leaves it raw.
        ctx.set_value(key, Value::Bytes(v), Ttl::Keep);
        ctx.notify(notify::STRING, "setbit", key);
    }
    // Redis unshares the string for the edit, changed or not: "raw".
    let now = ctx.now;
    ctx.db().mark_raw(key, now);
    ctx.out().int(old as i64);
    Ok(())
}

/// GETBIT key offset
pub fn getbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let offset = parse_bit_offset(ctx, &args[2], 0)?;
    let (s, out) = ctx.read_str(&args[1])?;
    let bit = match s {
        None => 0,
        Some(s) => with_bytes(s, |b| b.get((offset >> 3) as usize).map_or(0, |&c| (c >> (7 - (offset & 7))) & 1)),
    };
    out.int(bit as i64);
    Ok(())
}

/// Parses the optional BYTE | BIT unit; true for BIT.
fn parse_unit(a: &[u8]) -> Result<bool, CmdError> {
    if is(a, "bit") {
        Ok(true)
    } else if is(a, "byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Clips `[start, end]` (negatives from the end) to a string of `total`
/// units, as BITCOUNT and BITPOS do. Returns None when the range is empty.
fn clip(mut start: i64, mut end: i64, total: i64) -> Option<(i64, i64)> {
    if start < 0 {
        start = start.saturating_add(total);
    }
    if end < 0 {
        end = end.saturating_add(total);
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    (start <= end).then_some((start, end))
}

/// Number of set bits among bits `[s, e]` (inclusive) of `b`.
fn count_bits(b: &[u8], s: u64, e: u64) -> u64 {
    let (sb, eb) = ((s >> 3) as usize, (e >> 3) as usize);
    let mut n: u64 = b[sb..=eb].iter().map(|c| c.count_ones() as u64).sum();
    // Take off the bits of the first and last byte that lie outside the range.
    n -= (b[sb] & !(0xffu8 >> (s & 7))).count_ones() as u64;
    n -= (b[eb] & (0x7fu8 >> (e & 7))).count_ones() as u64;
    n
}

/// BITCOUNT key [start end [BYTE | BIT]]
pub fn bitcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let range = match args.len() {
        2 => None,
        4 | 5 => {
            let start = crate::command::arg_i64(&args[2])?;
            let end = crate::command::arg_i64(&args[3])?;
            let isbit = if args.len() == 5 { parse_unit(&args[4])? } else { false };
            Some((start, end, isbit))
        }
        _ => return Err(CmdError::Syntax),
    };
    let (s, out) = ctx.read_str(&args[1])?;
    let Some(s) = s else {
        out.int(0);
        return Ok(());
    };
    let n = with_bytes(s, |b| {
        let len = b.len() as i64;
        let bits = match range {
            None => (len > 0).then(|| (0, len * 8 - 1)),
            Some((start, end, _)) if start < 0 && end < 0 && start > end => None,
            Some((start, end, true)) => clip(start, end, len * 8),
            Some((start, end, false)) => clip(start, end, len).map(|(s, e)| (s * 8, e * 8 + 7)),
        };
        bits.map_or(0, |(s, e)| count_bits(b, s as u64, e as u64))
    });
    out.int(n as i64);
    Ok(())
}

/// Position of the first bit equal to `bit` among bits `[s, e]` of `b`.
fn find_bit(b: &[u8], s: u64, e: u64, bit: bool) -> Option<u64> {
    let skip = if bit { 0x00 } else { 0xff };
    let mut i = s;
    while i <= e {
        let byte = b[(i >> 3) as usize];
        if i & 7 == 0 && i + 7 <= e && byte == skip {
            i += 8;
            continue;
        }
        if ((byte >> (7 - (i & 7))) & 1 == 1) == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// BITPOS key bit [start [end [BYTE | BIT]]]
pub fn bitpos(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let bit = crate::command::arg_i64(&args[2])?;
    if bit != 0 && bit != 1 {
        return Err(CmdError::err("The bit argument must be 1 or 0."));
    }
    if args.len() > 6 {
        return Err(CmdError::Syntax);
    }
    let start = match args.get(3) {
        Some(a) => crate::command::arg_i64(a)?,
        None => 0,
    };
    let isbit = match args.get(5) {
        Some(a) => parse_unit(a)?,
        None => false,
    };
    let end = match args.get(4) {
        Some(a) => Some(crate::command::arg_i64(a)?),
        None => None,
    };
    let (s, out) = ctx.read_str(&args[1])?;
    let Some(s) = s else {
        out.int(if bit == 1 { -1 } else { 0 });
        return Ok(());
    };
    let pos = with_bytes(s, |b| {
        let len = b.len() as i64;
        let range = if isbit {
            clip(start, end.unwrap_or(i64::MAX), len * 8)
        } else {
            clip(start, end.unwrap_or(len - 1), len).map(|(s, e)| (s * 8, e * 8 + 7))
        };
        let Some((s, e)) = range else { return -1 };
        match find_bit(b, s as u64, e as u64, bit == 1) {
            Some(p) => p as i64,
            // Looking for a clear bit past an open-ended range finds the
            // first bit after the string (its right side is zero-padded).
            None if bit == 0 && end.is_none() => e + 1,
            None => -1,
        }
    });
    out.int(pos);
    Ok(())
}

/// BITOP AND | OR | XOR | NOT destkey key [key ...]
pub fn bitop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    /// The operations: Redis 2.6's four, and 8.2's four that single out
    /// the first source (DIFF, DIFF1, ANDOR) or count sources (ONE).
    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
        Diff,
        Diff1,
        AndOr,
        One,
    }
    const OPS: [(&str, Op); 8] = [
        ("and", Op::And),
        ("or", Op::Or),
        ("xor", Op::Xor),
        ("not", Op::Not),
        ("diff", Op::Diff),
        ("diff1", Op::Diff1),
        ("andor", Op::AndOr),
        ("one", Op::One),
    ];
    let (name, op) = OPS.into_iter().find(|(n, _)| is(&args[1], n)).ok_or(CmdError::Syntax)?;
    if op == Op::Not && args.len() != 4 {
        return Err(CmdError::err("BITOP NOT must be called with a single source key."));
    }
    if matches!(op, Op::Diff | Op::Diff1 | Op::AndOr) && args.len() < 5 {
        return Err(CmdError::err(format!("BITOP {} must be called with at least two source keys.", name.to_ascii_uppercase())));
    }
    let now = ctx.now;
    let mut srcs: Vec<Vec<u8>> = Vec::with_capacity(args.len() - 3);
    for k in &args[3..] {
        srcs.push(ctx.read_str(k)?.0.map(|s| s.to_vec()).unwrap_or_default());
    }
    let maxlen = srcs.iter().map(Vec::len).max().unwrap_or(0);
    let dest = &args[2];
    if maxlen == 0 {
        if ctx.db().remove(dest, now).is_some() {
            ctx.modified(dest, notify::GENERIC, "del");
        }
        ctx.out().int(0);
        return Ok(());
    }
    let at = |v: &Vec<u8>, j: usize| v.get(j).copied().unwrap_or(0);
    let res: Vec<u8> = (0..maxlen)
        .map(|j| {
            let first = at(&srcs[0], j);
            let rest = &srcs[1..];
            // The others OR-ed together, for the ops that set the first
            // source against the rest.
            let others = || rest.iter().fold(0u8, |acc, s| acc | at(s, j));
            match op {
                Op::And => rest.iter().fold(first, |acc, s| acc & at(s, j)),
                Op::Or => rest.iter().fold(first, |acc, s| acc | at(s, j)),
                Op::Xor => rest.iter().fold(first, |acc, s| acc ^ at(s, j)),
                Op::Not => !first,
                Op::Diff => first & !others(),
                Op::Diff1 => !first & others(),
                Op::AndOr => first & others(),
                Op::One => {
                    // Bits seen once so far, and bits seen more than once.
                    let (once, many) = rest.iter().fold((first, 0u8), |(once, many), s| {
                        let b = at(s, j);
                        (once ^ (b & !many), many | (once & b))
                    });
                    once & !many
                }
            }
        })
        .collect();
    ctx.set_str(dest, &res, Ttl::Clear);
    ctx.notify(notify::STRING, "set", dest);
    ctx.out().int(maxlen as i64);
    Ok(())
}

/// What BITFIELD does on overflow.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation.
#[derive(Debug)]
enum FieldOp {
    Get,
    Set(i64),
    Incr(i64),
}

/// A parsed BITFIELD operation on an integer of `bits` bits at `offset`.
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// Parses an `i<n>` / `u<n>` type: i1..i64, u1..u63.
fn parse_type(a: &[u8]) -> Result<(bool, u32), CmdError> {
    let err = || CmdError::err("Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.");
    let (signed, digits) = match a.split_first() {
        Some((b'i', d)) => (true, d),
        Some((b'u', d)) => (false, d),
        _ => return Err(err()),
    };
    let bits = resp::num::parse_i64(digits).ok_or_else(err)?;
    if bits < 1 || (signed && bits > 64) || (!signed && bits > 63) {
        return Err(err());
    }
    Ok((signed, bits as u32))
}

/// Reads `bits` bits at bit `offset` as an unsigned number; missing bytes are 0.
fn get_unsigned(b: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for i in 0..bits as u64 {
        let pos = offset + i;
        let bit = b.get((pos >> 3) as usize).map_or(0, |c| (c >> (7 - (pos & 7))) & 1);
        v = (v << 1) | bit as u64;
    }
    v
}

/// Reads `bits` bits at bit `offset` as a two's-complement number.
fn get_signed(b: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(b, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Writes the low `bits` bits of `v` at bit `offset`; `b` must be long enough.
fn set_bits(b: &mut [u8], offset: u64, bits: u32, v: u64) {
    for i in 0..bits as u64 {
        let pos = offset + i;
        let mask = 0x80u8 >> (pos & 7);
        if (v >> (bits as u64 - 1 - i)) & 1 == 1 {
            b[(pos >> 3) as usize] |= mask;
        } else {
            b[(pos >> 3) as usize] &= !mask;
        }
    }
}

/// Redis's unsigned overflow check: Some(replacement) when `value + incr`
/// does not fit in `bits` bits (None for FAIL, which replaces nothing).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<u64>> {
    let max = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX.checked_shl(bits).unwrap_or(0));
    let limit = if value > max || (incr > 0 && incr > maxincr) {
        max
    } else if incr < 0 && incr < minincr {
        0
    } else {
        return None;
    };
    Some(match ow {
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    })
}

/// Redis's signed overflow check, as `unsigned_overflow`.
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<i64>> {
    let max = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    let limit = if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        max
    } else if value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
        min
    } else {
        return None;
    };
    Some(match ow {
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    })
}

/// Applies one write op to `b`. Returns the reply value (None: FAIL overflow)
/// and whether the stored bits changed.
fn apply_write(b: &mut [u8], f: &Field) -> (Option<i64>, bool) {
    let (arg, is_incr) = match f.op {
        FieldOp::Set(v) => (v, false),
        FieldOp::Incr(v) => (v, true),
        FieldOp::Get => unreachable!("GET is not a write"),
    };
    let (newval, retval, oldval) = if f.signed {
        let old = get_signed(b, f.offset, f.bits);
        let (value, incr) = if is_incr { (old, arg) } else { (arg, 0) };
        let new = match signed_overflow(value, incr, f.bits, f.overflow) {
            None => value.wrapping_add(incr),
            Some(Some(r)) => r,
            Some(None) => return (None, false),
        };
        (new as u64, if is_incr { new } else { old }, old as u64)
    } else {
        let old = get_unsigned(b, f.offset, f.bits);
        let (value, incr) = if is_incr { (old, arg) } else { (arg as u64, 0) };
        let new = match unsigned_overflow(value, incr, f.bits, f.overflow) {
            None => value.wrapping_add(incr as u64),
            Some(Some(r)) => r,
            Some(None) => return (None, false),
        };
        (new, if is_incr { new as i64 } else { old as i64 }, old)
    };
    set_bits(b, f.offset, f.bits, newval);
    let mask = if f.bits == 64 { u64::MAX } else { (1u64 << f.bits) - 1 };
    (Some(retval), oldval & mask != newval & mask)
}

fn bitfield_generic(ctx: &mut Ctx, args: &[Vec<u8>], ro: bool) -> CmdResult {
    let mut ops: Vec<Field> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 2;
    while j < args.len() {
        let rem = args.len() - j - 1;
        let sub = &args[j];
        let kind = if is(sub, "get") && rem >= 2 {
            0
        } else if is(sub, "set") && rem >= 3 {
            1
        } else if is(sub, "incrby") && rem >= 3 {
            2
        } else if is(sub, "overflow") && rem >= 1 {
            let t = &args[j + 1];
            overflow = if is(t, "wrap") {
                Overflow::Wrap
            } else if is(t, "sat") {
                Overflow::Sat
            } else if is(t, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = parse_type(&args[j + 1])?;
        let offset = parse_bit_offset(ctx, &args[j + 2], bits)?;
        let op = match kind {
            0 => FieldOp::Get,
            _ => {
                let top = offset + bits as u64 - 1;
                highest = Some(highest.map_or(top, |h| h.max(top)));
                let v = crate::command::arg_i64(&args[j + 3])?;
                if kind == 1 {
                    FieldOp::Set(v)
                } else {
                    FieldOp::Incr(v)
                }
            }
        };
        ops.push(Field { op, signed, bits, offset, overflow });
        j += if kind == 0 { 3 } else { 4 };
    }
    let key = &args[1];
    let Some(top) = highest else {
        // Only GETs: read without creating or growing the key.
        let (s, out) = ctx.read_str(key)?;
        out.array(ops.len());
        let read = |b: &[u8], f: &Field| if f.signed { get_signed(b, f.offset, f.bits) } else { get_unsigned(b, f.offset, f.bits) as i64 };
        for f in &ops {
            let v = match s {
                Some(s) => with_bytes(s, |b| read(b, f)),
                None => 0,
            };
            out.int(v);
        }
        return Ok(());
    };
    if ro {
        return Err(CmdError::err("BITFIELD_RO only supports the GET subcommand"));
    }
    let (mut v, grown) = string_for_write(ctx, key, top)?;
    let mut changes = 0u64;
    let mut replies: Vec<Option<i64>> = Vec::with_capacity(ops.len());
    for f in &ops {
        if let FieldOp::Get = f.op {
            let r = if f.signed { get_signed(&v, f.offset, f.bits) } else { get_unsigned(&v, f.offset, f.bits) as i64 };
            replies.push(Some(r));
            continue;
        }
        let (r, changed) = apply_write(&mut v, f);
        if r.is_some() && (grown || changed) {
            changes += 1;
        }
        replies.push(r);
    }
    if changes > 0 || grown {
        // Growing stores the key even when every write failed (OVERFLOW FAIL);
        // Redis counts one change per modifying operation.
        ctx.set_value(key, Value::Bytes(v), Ttl::Keep);
        ctx.srv.dirty = (ctx.srv.dirty + changes).saturating_sub(1);
        if changes > 0 {
            ctx.notify(notify::STRING, "setbit", key);
        }
    }
    // Writes unshare the string, as for SETBIT: "raw" in OBJECT ENCODING.
    let now = ctx.now;
    ctx.db().mark_raw(key, now);
    let out = ctx.out();
    out.array(replies.len());
    for r in replies {
        match r {
            Some(v) => out.int(v),
            None => out.null(),
        }
    }
    Ok(())
}

/// BITFIELD key [GET enc offset | [OVERFLOW WRAP|SAT|FAIL] SET enc offset value | INCRBY enc offset incr ...]
pub fn bitfield(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

/// BITFIELD_RO key [GET enc offset ...]
pub fn bitfield_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_counting_and_search() {
        let b = [0xffu8, 0xf0, 0x00];
        assert_eq!(count_bits(&b, 0, 23), 12);
        assert_eq!(count_bits(&b, 4, 11), 8);
        assert_eq!(count_bits(&b, 9, 9), 1);
        assert_eq!(find_bit(&b, 0, 23, false), Some(12));
        assert_eq!(find_bit(&b, 0, 11, false), None);
        assert_eq!(find_bit(&b, 16, 23, true), None);
        assert_eq!(find_bit(&b, 3, 23, true), Some(3));
        assert_eq!(clip(-2, -1, 3), Some((1, 2)));
        assert_eq!(clip(0, -1, 0), None);
    }

    #[test]
    fn bitfield_arithmetic() {
        let mut b = vec![0u8; 2];
        set_bits(&mut b, 4, 8, 0xab);
        assert_eq!(b, [0x0a, 0xb0]);
        assert_eq!(get_unsigned(&b, 4, 8), 0xab);
        assert_eq!(get_signed(&b, 4, 8), 0xab_u8 as i8 as i64);
        assert_eq!(get_unsigned(&b, 12, 8), 0); // past the end reads zero
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Wrap), Some(Some(0)));
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Sat), Some(Some(255)));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Sat), Some(Some(0)));
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Overflow::Wrap), Some(Some(255)));
        assert_eq!(unsigned_overflow(10, 5, 8, Overflow::Fail), None);
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), Some(Some(-128)));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Sat), Some(Some(-128)));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Overflow::Wrap), Some(Some(i64::MIN)));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Overflow::Fail), Some(None));
        assert_eq!(signed_overflow(-5, 3, 64, Overflow::Fail), None);
    }
}
