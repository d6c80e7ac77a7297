//! The value layer: one value in Redis's RDB encoding, written (DUMP, and
//! each entry of an RDB file) and read back (RESTORE, and each entry of a
//! loaded file), with the DUMP payload's footer. See the `rdb` module
//! header for the layouts written and read.

use crate::strref::{parse_canonical_i64, StrRef};
use crate::types::hash::{ExpireCond, Hash, HashConfig};
use crate::types::list::{End, List, ListConfig};
use crate::types::set::{Set, SetConfig};
use crate::types::zset::{ZSet, ZsetConfig};
use crate::value::{Value, ValueRef};
use super::packed::Elem;
use super::crc64::crc64;
use super::primitives::{parse_score, put_len, put_str, ty, RdbError, Reader, RDB_VERSION};
use super::{packed, stream};

/// The version written for plain layouts: Redis 6.0 and later load it.
const PLAIN_VERSION: u16 = 9;
/// Largest field deadline Redis accepts (2^48 - 1 ms).
const MAX_FIELD_DEADLINE: i64 = (1 << 48) - 1;

/// The configuration that shapes loaded collections.
#[derive(Debug, Clone, Default)]
pub struct Shapes {
    /// Hash encoding limits.
    pub hash: HashConfig,
    /// List node fill.
    pub list: ListConfig,
    /// Set encoding limits.
    pub set: SetConfig,
    /// Sorted-set encoding limits.
    pub zset: ZsetConfig,
}

// ------------------------------------------------------------------ writing

/// A string as Redis writes it: integers that fit 32 bits in the integer
/// encoding, everything else raw. Bytes that are such an integer's
/// canonical form (11 bytes at most) count as one, as Redis tries them
/// (rdbTryIntegerEncoding): a value writes the same whether it is kept as
/// an integer or as its digits.
pub(crate) fn put_strref(out: &mut Vec<u8>, s: StrRef) {
    let s = match s {
        StrRef::Bytes(b) if b.len() <= 11 => parse_canonical_i64(b).map_or(s, StrRef::Int),
        _ => s,
    };
    match s {
        StrRef::Int(v) if i8::try_from(v).is_ok() => out.extend_from_slice(&[0xc0, v as i8 as u8]),
        StrRef::Int(v) if i16::try_from(v).is_ok() => {
            out.push(0xc1);
            out.extend_from_slice(&(v as i16).to_le_bytes());
        }
        StrRef::Int(v) if i32::try_from(v).is_ok() => {
            out.push(0xc2);
            out.extend_from_slice(&(v as i32).to_le_bytes());
        }
        StrRef::Int(v) => put_str(out, v.to_string().as_bytes()),
        StrRef::Bytes(b) => put_str(out, b),
    }
}

/// Appends `v`'s type byte and body to `out`; returns the RDB version the
/// layout needs.
pub fn write_value(out: &mut Vec<u8>, v: ValueRef, now: i64) -> u16 {
    match v {
        ValueRef::Stream(s) => return stream::write(out, s),
        ValueRef::Str(s) => {
            out.push(ty::STRING);
            put_strref(out, s);
        }
        ValueRef::List(l) => {
            out.push(ty::LIST);
            put_len(out, l.len() as u64);
            for e in l.iter() {
                put_strref(out, e.get());
            }
        }
        ValueRef::Set(s) if s.min_deadline().is_some() => {
            // densekv's own layout (Redis refuses it): the earliest
            // deadline, then each member with its TTL relative to it plus
            // one (0: none), as HASH_METADATA does; members already past
            // their deadline are left out.
            let min = s.min_deadline().unwrap_or(0);
            let live: Vec<_> = s.iter_ttl().filter(|(_, d)| d.is_none_or(|d| d >= now)).collect();
            out.push(ty::SET_TTL);
            out.extend_from_slice(&min.to_le_bytes());
            put_len(out, live.len() as u64);
            for (m, d) in live {
                put_len(out, d.map_or(0, |t| (t - min) as u64 + 1));
                put_strref(out, m);
            }
            return RDB_VERSION;
        }
        ValueRef::ZSet(z) if z.min_deadline().is_some() => {
            let min = z.min_deadline().unwrap_or(0);
            let mut live = Vec::new();
            z.for_each_ttl(|m, score, d| {
                if d.is_none_or(|d| d >= now) {
                    live.push((m, score, d));
                }
            });
            out.push(ty::ZSET_TTL);
            out.extend_from_slice(&min.to_le_bytes());
            put_len(out, live.len() as u64);
            for (m, score, d) in live {
                put_len(out, d.map_or(0, |t| (t - min) as u64 + 1));
                put_str(out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
            return RDB_VERSION;
        }
        ValueRef::Set(s) => {
            out.push(ty::SET);
            put_len(out, s.len() as u64);
            for m in s.iter() {
                put_strref(out, m);
            }
        }
        ValueRef::ZSet(z) => {
            out.push(ty::ZSET_2);
            put_len(out, z.len() as u64);
            for (m, score) in z.iter() {
                put_str(out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        ValueRef::Hash(h) => {
            let fields: Vec<_> = h.iter(now).collect();
            // The hash's own earliest deadline (it may belong to a field due
            // but not yet reclaimed: still a valid base for the offsets).
            let Some(min) = h.min_deadline() else {
                out.push(ty::HASH);
                put_len(out, fields.len() as u64);
                for (f, v) in fields {
                    put_str(out, f);
                    put_strref(out, v);
                }
                return PLAIN_VERSION;
            };
            // Each TTL is written relative to the earliest, plus one (0: none).
            out.push(ty::HASH_METADATA);
            out.extend_from_slice(&min.to_le_bytes());
            put_len(out, fields.len() as u64);
            for (f, v) in fields {
                put_len(out, h.expire_of(f, now).flatten().map_or(0, |t| (t - min) as u64 + 1));
                put_str(out, f);
                put_strref(out, v);
            }
            return RDB_VERSION;
        }
    }
    PLAIN_VERSION
}

/// DUMP's payload for `v`: the value, the RDB version (2 bytes, little
/// endian) and a CRC-64 of everything before it (8 bytes, little endian).
pub fn dump_payload(v: ValueRef, now: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let version = write_value(&mut out, v, now);
    out.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a DUMP payload's version and checksum; returns the value part.
/// `check_crc` false skips the checksum (Redis's skip-checksum-validation).
pub fn verify_payload(p: &[u8], check_crc: bool) -> Result<&[u8], RdbError> {
    let body_len = p.len().checked_sub(10).ok_or(RdbError::BAD)?;
    let version = u16::from_le_bytes([p[body_len], p[body_len + 1]]);
    if version > RDB_VERSION {
        return Err(RdbError::BAD);
    }
    let crc = u64::from_le_bytes(p[body_len + 2..].try_into().map_err(|_| RdbError::BAD)?);
    if check_crc && crc64(0, &p[..body_len + 2]) != crc {
        return Err(RdbError::BAD);
    }
    Ok(&p[..body_len])
}

/// Decodes a verified payload body (as `verify_payload` returns it) into a
/// value; hash fields already due at `now` are dropped. The whole body must
/// be one value.
pub fn restore_value(body: &[u8], shapes: &Shapes, now: i64) -> Result<Value, RdbError> {
    let mut r = Reader::new(body);
    let t = r.u8()?;
    let v = r.value(t, shapes, now)?;
    if r.pos != body.len() {
        return Err(RdbError::BAD);
    }
    Ok(v)
}

// ------------------------------------------------------------------ reading

impl Reader<'_> {
    /// One value of RDB type `t`.
    pub fn value(&mut self, t: u8, shapes: &Shapes, now: i64) -> Result<Value, RdbError> {
        let v = match t {
            ty::STRING => Value::string(&self.string()?),
            ty::LIST => {
                let n = self.count(1)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.string()?);
                }
                list_of(items, shapes)?
            }
            ty::LIST_ZIPLIST => {
                let blob = self.string()?;
                let elems = packed::ziplist(&blob).map_err(|_| RdbError::because("List ziplist integrity check failed."))?;
                list_of(elems.into_iter().map(Elem::to_vec).collect(), shapes)?
            }
            ty::LIST_QUICKLIST | ty::LIST_QUICKLIST_2 => {
                let nodes = self.count(1)?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    let container = if t == ty::LIST_QUICKLIST_2 { self.len()? } else { 2 };
                    let blob = self.string()?;
                    match container {
                        // A plain node: one big element, never empty.
                        1 if blob.is_empty() => return Err(RdbError::because("Quicklist integrity check failed.")),
                        1 => items.push(blob),
                        2 => {
                            let (elems, why) = if t == ty::LIST_QUICKLIST {
                                (packed::ziplist(&blob), "Ziplist integrity check failed.")
                            } else {
                                (packed::listpack(&blob), "Listpack integrity check failed.")
                            };
                            // An empty node is skipped, as Redis does; a list
                            // left empty is an empty key.
                            let elems = elems.map_err(|_| RdbError::because(why))?;
                            items.extend(elems.into_iter().map(Elem::to_vec));
                        }
                        _ => return Err(RdbError::because("Quicklist integrity check failed.")),
                    }
                }
                list_of(items, shapes)?
            }
            ty::SET => {
                let n = self.count(1)?;
                let mut members = Vec::with_capacity(n);
                for _ in 0..n {
                    members.push(self.string()?);
                }
                set_of(members, shapes)?
            }
            ty::SET_INTSET => {
                let blob = self.string()?;
                let why = RdbError::because("Intset integrity check failed.");
                set_of(packed::intset(&blob).map_err(blame(why))?.into_iter().map(|v| v.to_string().into_bytes()).collect(), shapes).map_err(blame(why))?
            }
            ty::SET_LISTPACK => {
                let blob = self.string()?;
                let why = RdbError::because("Set listpack integrity check failed.");
                set_of(packed::listpack(&blob).map_err(blame(why))?.into_iter().map(Elem::to_vec).collect(), shapes).map_err(blame(why))?
            }
            ty::ZSET | ty::ZSET_2 => {
                let n = self.count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let m = self.string()?;
                    let s = if t == ty::ZSET_2 { self.binary_double()? } else { self.text_double()? };
                    pairs.push((m, s));
                }
                zset_of(pairs, shapes)?
            }
            ty::ZSET_ZIPLIST | ty::ZSET_LISTPACK => {
                let blob = self.string()?;
                let why = RdbError::because(if t == ty::ZSET_ZIPLIST { "Zset ziplist integrity check failed." } else { "Zset listpack integrity check failed." });
                let elems = if t == ty::ZSET_ZIPLIST { packed::ziplist(&blob) } else { packed::listpack(&blob) }.map_err(blame(why))?;
                if elems.len() % 2 != 0 {
                    return Err(why);
                }
                let mut pairs = Vec::with_capacity(elems.len() / 2);
                for p in elems.chunks_exact(2) {
                    let score = match p[1] {
                        Elem::Int(v) => v as f64,
                        Elem::Str(s) => parse_score(s).map_err(blame(why))?,
                    };
                    pairs.push((p[0].to_vec(), score));
                }
                zset_of(pairs, shapes).map_err(blame(why))?
            }
            ty::HASH => {
                let n = self.count(2)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    fields.push((self.string()?, self.string()?, None));
                }
                hash_of(fields, shapes, now)?
            }
            ty::HASH_METADATA | ty::HASH_METADATA_PRE_GA => {
                let min = if t == ty::HASH_METADATA { self.millis()? } else { 0 };
                if !(0..=MAX_FIELD_DEADLINE).contains(&min) {
                    return Err(RdbError::BAD);
                }
                let n = self.count(3)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    let ttl = self.len()?;
                    let at = match (ttl, t) {
                        (0, _) => None,
                        (x, ty::HASH_METADATA) => Some(i64::try_from(x - 1).map_err(|_| RdbError::BAD)?.checked_add(min).ok_or(RdbError::BAD)?),
                        (x, _) => Some(i64::try_from(x).map_err(|_| RdbError::BAD)?),
                    };
                    if at.is_some_and(|a| a > MAX_FIELD_DEADLINE) {
                        return Err(RdbError::BAD);
                    }
                    fields.push((self.string()?, self.string()?, at));
                }
                hash_of(fields, shapes, now)?
            }
            ty::HASH_ZIPLIST | ty::HASH_LISTPACK => {
                let blob = self.string()?;
                let why = RdbError::because(if t == ty::HASH_ZIPLIST { "Hash ziplist integrity check failed." } else { "Hash listpack integrity check failed." });
                let elems = if t == ty::HASH_ZIPLIST { packed::ziplist(&blob) } else { packed::listpack(&blob) }.map_err(blame(why))?;
                if elems.len() % 2 != 0 {
                    return Err(why);
                }
                hash_of(elems.chunks_exact(2).map(|p| (p[0].to_vec(), p[1].to_vec(), None)).collect(), shapes, now).map_err(blame(why))?
            }
            ty::HASH_ZIPMAP => {
                let blob = self.string()?;
                let why = RdbError::because("Zipmap integrity check failed.");
                let pairs = packed::zipmap(&blob).map_err(blame(why))?;
                hash_of(pairs.into_iter().map(|(f, v)| (f.to_vec(), v.to_vec(), None)).collect(), shapes, now).map_err(blame(why))?
            }
            ty::HASH_LISTPACK_EX | ty::HASH_LISTPACK_EX_PRE_GA => {
                if t == ty::HASH_LISTPACK_EX {
                    self.millis()?; // the earliest deadline; recomputed below
                }
                let blob = self.string()?;
                let why = RdbError::because("Hash listpack integrity check failed.");
                let elems = packed::listpack(&blob).map_err(blame(why))?;
                if elems.len() % 3 != 0 {
                    return Err(why);
                }
                let mut fields = Vec::with_capacity(elems.len() / 3);
                // Redis keeps fields with a TTL first, in deadline order, then
                // those without: any other order is corrupt.
                let mut last = Some(0);
                for p in elems.chunks_exact(3) {
                    let at = match p[2] {
                        Elem::Int(0) => None,
                        Elem::Int(t) if (1..=MAX_FIELD_DEADLINE).contains(&t) => Some(t),
                        _ => return Err(why),
                    };
                    match (last, at) {
                        (None, Some(_)) => return Err(why),
                        (Some(prev), Some(t)) if t < prev => return Err(why),
                        _ => {}
                    }
                    last = at;
                    fields.push((p[0].to_vec(), p[1].to_vec(), at));
                }
                hash_of(fields, shapes, now)?
            }
            ty::SET_TTL | ty::ZSET_TTL => {
                let min = self.millis()?;
                if !(0..=MAX_FIELD_DEADLINE).contains(&min) {
                    return Err(RdbError::BAD);
                }
                let n = self.count(if t == ty::SET_TTL { 2 } else { 10 })?;
                let (mut members, mut pairs) = (Vec::new(), Vec::new());
                for _ in 0..n {
                    let at = match self.len()? {
                        0 => None,
                        x => Some(i64::try_from(x - 1).map_err(|_| RdbError::BAD)?.checked_add(min).ok_or(RdbError::BAD)?),
                    };
                    if at.is_some_and(|a| a > MAX_FIELD_DEADLINE) {
                        return Err(RdbError::BAD);
                    }
                    let m = self.string()?;
                    if t == ty::SET_TTL {
                        members.push((m, at));
                    } else {
                        pairs.push((m, self.binary_double()?, at));
                    }
                }
                if t == ty::SET_TTL {
                    set_with_ttls(members, shapes, now)?
                } else {
                    zset_with_ttls(pairs, shapes, now)?
                }
            }
            ty::STREAM_LISTPACKS | ty::STREAM_LISTPACKS_2 | ty::STREAM_LISTPACKS_3 => self.stream(t)?,
            _ => return Err(RdbError::BAD),
        };
        Ok(v)
    }
}

/// `why` for any failure but an empty collection, which stays
/// `RdbError::EMPTY`: what went wrong inside a packed blob is reported as
/// that blob's integrity check failing, as Redis reports it.
fn blame(why: RdbError) -> impl Fn(RdbError) -> RdbError {
    move |e| if e == RdbError::EMPTY { e } else { why }
}

fn list_of(items: Vec<Vec<u8>>, shapes: &Shapes) -> Result<Value, RdbError> {
    if items.is_empty() {
        return Err(RdbError::EMPTY);
    }
    let mut l = List::new();
    l.push(End::Tail, &items, &shapes.list);
    Ok(Value::List(Box::new(l)))
}

fn set_of(members: Vec<Vec<u8>>, shapes: &Shapes) -> Result<Value, RdbError> {
    let Some(first) = members.first() else { return Err(RdbError::EMPTY) };
    let mut s = Set::with_hint(first, members.len(), &shapes.set);
    for m in &members {
        if !s.insert(m, &shapes.set) {
            return Err(RdbError::because("Duplicate set members detected"));
        }
    }
    Ok(Value::Set(Box::new(s)))
}

/// A set from (member, deadline) pairs (densekv's SET_TTL layout): members
/// due at `now` are left out, and a set left with none is an error.
fn set_with_ttls(members: Vec<(Vec<u8>, Option<i64>)>, shapes: &Shapes, now: i64) -> Result<Value, RdbError> {
    let Some((first, _)) = members.first() else { return Err(RdbError::EMPTY) };
    let mut s = Set::with_hint(first, members.len(), &shapes.set);
    for (m, at) in &members {
        if !s.insert(m, &shapes.set) {
            return Err(RdbError::because("Duplicate set members detected"));
        }
        if let Some(t) = *at {
            s.set_expire(m, t, ExpireCond::Always, now, &shapes.set);
        }
    }
    if s.is_empty() {
        return Err(RdbError::ALL_EXPIRED);
    }
    Ok(Value::Set(Box::new(s)))
}

/// A sorted set from (member, score, deadline) triples (densekv's ZSET_TTL
/// layout): members due at `now` are left out.
fn zset_with_ttls(triples: Vec<(Vec<u8>, f64, Option<i64>)>, shapes: &Shapes, now: i64) -> Result<Value, RdbError> {
    let pairs = triples.iter().map(|(m, s, _)| (m.clone(), *s)).collect();
    let Value::ZSet(mut z) = zset_of(pairs, shapes)? else { unreachable!("zset_of makes a sorted set") };
    for (m, _, at) in &triples {
        if let Some(t) = *at {
            z.set_expire(m, t, ExpireCond::Always, now);
        }
    }
    if z.is_empty() {
        return Err(RdbError::ALL_EXPIRED);
    }
    Ok(Value::ZSet(z))
}

fn zset_of(pairs: Vec<(Vec<u8>, f64)>, shapes: &Shapes) -> Result<Value, RdbError> {
    if pairs.is_empty() {
        return Err(RdbError::EMPTY);
    }
    let max_len = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let mut z = ZSet::with_hint(pairs.len(), max_len, &shapes.zset);
    for (m, s) in &pairs {
        if z.insert(m, *s, &shapes.zset).is_some() {
            return Err(RdbError::because("Duplicate zset fields detected"));
        }
    }
    z.maybe_convert(&shapes.zset);
    Ok(Value::ZSet(Box::new(z)))
}

/// A hash from (field, value, deadline) triples; fields due at `now` are
/// left out, and a hash left with no field is an error (an empty key).
fn hash_of(fields: Vec<(Vec<u8>, Vec<u8>, Option<i64>)>, shapes: &Shapes, now: i64) -> Result<Value, RdbError> {
    let mut h = Hash::new();
    let mut seen = 0;
    for (f, v, at) in &fields {
        if !h.insert(f, v, &shapes.hash) {
            return Err(RdbError::because("Duplicate hash fields detected"));
        }
        seen += 1;
        if let Some(t) = *at {
            if h.set_expire(f, t, ExpireCond::Always, now) == 2 {
                continue; // already due: set_expire removed it
            }
        }
    }
    if seen == 0 {
        return Err(RdbError::EMPTY);
    }
    if h.is_empty() {
        return Err(RdbError::ALL_EXPIRED);
    }
    h.maybe_convert(&shapes.hash);
    Ok(Value::Hash(Box::new(h)))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
