//! The one allocation per key: header, key, optional deadline and value.
//!
//! ```text
//!   | flags u8 | key len (LEB128 varint) | key | deadline (only with TTL) | value | pad |
//!   deadline: Unix ms as 6 bytes LE, for 0 <= t < 2^48 - 1 (any date
//!             before the year 10889); else the 6 bytes ff ff ff ff ff ff
//!             and the deadline as i64 LE (14 bytes: EXPIREAT and RESTORE
//!             ABSTTL accept any i64)
//!   flags: bits 0-1 kind (0 raw string, 1 integer, 2 object: u32 LE index
//!          into the Db's object table, 3 small collection: its inline
//!          form, `encoding::inline`)
//!          bit 2    has deadline
//!          bits 3-5 pad: bytes of slack at the end (0..=7), in a blob of
//!                   16 bytes or more; a shorter blob has a slab class of
//!                   its own length, so no slack, and bits 3-5 are the
//!                   prefix id of a number key (bit 6)
//!          bit 6    the key is stored packed (the keyspace decodes it):
//!                   in a blob of 16 bytes or more in `encoding::keypack`'s
//!                   form, which ends itself, so no key length precedes
//!                   it; in a shorter one as a number key (below)
//!          bit 7    raw: a string edited in place (APPEND, SETRANGE,
//!                   SETBIT, BITFIELD), which Redis reports as "raw"
//!                   whatever its length; any new store clears it.
//!                   With kind 1 (integer, where the mark never applies)
//!                   it means packed instead: a string kept in its
//!                   compressed form (`encoding::packed`, which holds
//!                   its own raw mark)
//! ```
//!
//! A number key (`key:123456`, with key-compression on) replaces the key
//! length and key with the number after the key's prefix, as a LEB128
//! varint, which ends itself; the prefix (id 0-7 in the keyspace's
//! `keypack::Prefixes`, bits 3-5) and the decimal digits give back the key
//! (`Prefixes::unpack_number`). It is used only where the blob stays under
//! 16 bytes, where the slab has a class for each length:
//!
//! ```text
//!   | flags: kind, TTL, 1 << 6 | id << 3 | n varint | deadline? | value |
//!   SET key:123456 123456: | 0x41 | c0 c4 07 | 40 e2 01 |  (7 bytes)
//! ```
//!
//! The blob's length is not stored: the slab knows its class size, and `pad`
//! recovers the exact end. An integer string keeps its i64 as the shortest
//! little-endian two's-complement prefix (1..=8 bytes, sign-extended on read),
//! so `SET k 123456` costs 3 value bytes. Kind 2 stores a collection as the
//! 4-byte index of its slot in the Db's object table, so the table stays
//! uniform and the blob stays safe Rust (no pointer). Kind 3 is a small hash
//! or sorted set stored in the blob itself (`types::hash` and `types::zset`
//! decide which qualify and write the bytes): no object slot and no second
//! allocation.
//!
//! Seed 002's hash per session (`HSET session:<40 hex> i <7 digits> x
//! <10 digits>` + EXPIRE, both switches on) fits the 40-byte class:
//!
//! ```text
//!   | flags | packed key 22 | deadline 6 | inline hash 11: header, i, i32, x, i32 |
//! ```

use crate::encoding::keypack;
use crate::slab::{class_size, Slab, MAX_SMALL, TINY};
use crate::strref::StrRef;

/// What a blob stores after the key: a string or an object-table index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// A string (integer or bytes).
    Str(StrRef<'a>),
    /// Index into the Db's object table.
    Obj(u32),
    /// A small collection kept in the blob: its inline form (a header
    /// byte naming the type, then its entries; `encoding::inline`).
    Inline(&'a [u8]),
    /// A string in packed form (`encoding::packed`): decode to read it.
    Packed(&'a [u8]),
}

const KIND_RAW: u8 = 0;
const KIND_INT: u8 = 1;
const KIND_OBJ: u8 = 2;
const KIND_INLINE: u8 = 3;
const HAS_TTL: u8 = 4;
const RAW_ENC: u8 = 0x80;
/// Kind 1 with bit 7: a packed string.
const PACKED: u8 = KIND_INT | RAW_ENC;
/// Bit 6: the key is packed (keypack form from 16 bytes on, a number key below).
const KEY_PACKED: u8 = 0x40;
/// Largest pad: a blob of 16 bytes or more is at most 7 bytes short of its class.
const MAX_PAD: usize = 7;

/// Slack bytes at the end of blob `b`.
fn pad_of(b: &[u8]) -> usize {
    if b.len() < TINY { 0 } else { ((b[0] >> 3) & 7) as usize }
}

/// How the key of a blob is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The raw bytes.
    Raw,
    /// `encoding::keypack`'s packed form.
    Packed,
    /// A number key: the prefix with this id, then the number whose
    /// LEB128 varint is the stored key bytes (`Prefixes::unpack_number`).
    Number(u8),
}

/// How the key in blob `b` is stored.
pub fn key_kind(b: &[u8]) -> KeyKind {
    match (b[0] & KEY_PACKED != 0, b.len() < TINY) {
        (false, _) => KeyKind::Raw,
        (true, false) => KeyKind::Packed,
        (true, true) => KeyKind::Number((b[0] >> 3) & 7),
    }
}

/// A key as `store` writes it: its raw bytes and the packed forms the
/// keyspace found for it; `store` takes the one that costs least.
#[derive(Debug, Clone, Copy)]
pub struct KeyForm<'a> {
    /// The raw bytes.
    pub raw: &'a [u8],
    /// `encoding::keypack`'s packed form, used only if it makes the blob
    /// a smaller slab class and the blob is 9 bytes or more (short ones
    /// are padded to 16, at most 7 bytes).
    pub packed: Option<&'a [u8]>,
    /// A number key: prefix id (0-7) and number, used if the blob then
    /// stays under 16 bytes.
    pub number: Option<(u8, u64)>,
}

impl<'a> KeyForm<'a> {
    /// Just the raw bytes.
    pub fn raw(raw: &'a [u8]) -> Self {
        KeyForm { raw, packed: None, number: None }
    }
}

/// Bytes of a LEB128 varint of `n`.
fn varint_len_u64(n: u64) -> usize {
    (64 - (n | 1).leading_zeros() as usize).div_ceil(7)
}

/// True if a number key `n` makes a blob of less than 16 bytes with this
/// value and deadline (the keyspace asks before giving the key's prefix an id).
pub fn number_key_fits(n: u64, value: &Body<'_>, deadline: Option<i64>) -> bool {
    1 + varint_len_u64(n) + deadline_len(deadline) + value_len(value).1 < TINY
}

/// The kind bits and stored length of a value.
fn value_len(value: &Body<'_>) -> (u8, usize) {
    match *value {
        Body::Str(StrRef::Int(v)) => (KIND_INT, int_bytes(v)),
        Body::Str(StrRef::Bytes(b)) => (KIND_RAW, b.len()),
        Body::Obj(_) => (KIND_OBJ, 4),
        Body::Inline(e) => (KIND_INLINE, e.len()),
        Body::Packed(p) => (PACKED, p.len()),
    }
}

/// True if the flags byte is a packed string's.
fn is_packed(flags: u8) -> bool {
    flags & (3 | RAW_ENC) == PACKED
}

/// Which `Body` the blob `b` holds, from its flags byte alone: for a
/// caller that only branches on it, with no decoding of the key.
pub fn body_kind(b: &[u8]) -> BodyKind {
    if is_packed(b[0]) {
        return BodyKind::Packed;
    }
    match b[0] & 3 {
        KIND_OBJ => BodyKind::Obj,
        KIND_INLINE => BodyKind::Inline,
        _ => BodyKind::Str,
    }
}

/// The variants of `Body`, without their contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// `Body::Str`.
    Str,
    /// `Body::Obj`.
    Obj,
    /// `Body::Inline`.
    Inline,
    /// `Body::Packed`.
    Packed,
}

fn varint_len(mut n: usize) -> usize {
    let mut l = 1;
    while n >= 0x80 {
        n >>= 7;
        l += 1;
    }
    l
}

/// Bytes needed for the shortest sign-extended LE form of `v`.
fn int_bytes(v: i64) -> usize {
    (1..8).find(|&n| (v << (64 - 8 * n)) >> (64 - 8 * n) == v).unwrap_or(8)
}

/// Escape of the short deadline form: these 6 bytes are followed by the
/// deadline as a full i64.
const DEADLINE_ESCAPE: u64 = (1 << 48) - 1;
/// Bytes of the short deadline form.
const SHORT_DEADLINE: usize = 6;

/// Bytes a deadline takes in a blob: none without one, 6 for Unix ms in
/// 0..2^48 - 1 (any date before the year 10889), 14 for any other i64.
pub fn deadline_len(deadline: Option<i64>) -> usize {
    match deadline {
        None => 0,
        Some(t) if (t as u64) < DEADLINE_ESCAPE => SHORT_DEADLINE,
        Some(_) => SHORT_DEADLINE + 8,
    }
}

/// Writes `deadline` (if any) at the start of `b`; returns its length
/// (`deadline_len`). The one writer of a key's deadline.
fn write_deadline(b: &mut [u8], deadline: Option<i64>) -> usize {
    let Some(t) = deadline else { return 0 };
    let len = deadline_len(deadline);
    let short = if len == SHORT_DEADLINE { t as u64 } else { DEADLINE_ESCAPE };
    b[..SHORT_DEADLINE].copy_from_slice(&short.to_le_bytes()[..SHORT_DEADLINE]);
    if len > SHORT_DEADLINE {
        b[SHORT_DEADLINE..len].copy_from_slice(&t.to_le_bytes());
    }
    len
}

/// Reads the deadline `write_deadline` wrote at the start of `b`; returns
/// it and its length. The one reader of a key's deadline.
fn read_deadline(b: &[u8]) -> (i64, usize) {
    let mut short = [0u8; 8];
    short[..SHORT_DEADLINE].copy_from_slice(&b[..SHORT_DEADLINE]);
    match u64::from_le_bytes(short) {
        DEADLINE_ESCAPE => {
            let long = b[SHORT_DEADLINE..SHORT_DEADLINE + 8].try_into().expect("8 bytes");
            (i64::from_le_bytes(long), SHORT_DEADLINE + 8)
        }
        t => (t as i64, SHORT_DEADLINE),
    }
}

/// Writes a new blob for (key, value, deadline) into `slab`; returns its address.
#[cfg(test)]
pub fn store(slab: &mut Slab, key: KeyForm<'_>, value: Body<'_>, deadline: Option<i64>) -> u64 {
    store_over(slab, None, key, value, deadline)
}

/// `store`, in place of the blob at `old` when there is one (its
/// keyspace bookkeeping already undone): the new blob takes `old`'s bytes
/// when it falls in their class (`Slab::replace`), else `old` is freed.
pub fn store_over(slab: &mut Slab, old: Option<u64>, key: KeyForm<'_>, value: Body<'_>, deadline: Option<i64>) -> u64 {
    fn alloc(slab: &mut Slab, old: Option<u64>, len: usize) -> (u64, &mut [u8]) {
        match old {
            Some(a) => slab.replace(a, len),
            None => slab.alloc(len),
        }
    }
    let (kind, vlen) = value_len(&value);
    let rest = deadline_len(deadline) + vlen;
    let raw_len = 1 + varint_len(key.raw.len()) + key.raw.len() + rest;
    // keypack's form ends itself: no key length before it.
    let packed_len = |p: &[u8]| 1 + p.len() + rest;
    let flags = kind | if deadline.is_some() { HAS_TTL } else { 0 };
    if let Some((id, n)) = key.number.filter(|&(id, n)| id < 8 && 1 + varint_len_u64(n) + rest < TINY) {
        let (addr, b) = alloc(slab, old, 1 + varint_len_u64(n) + rest);
        b[0] = flags | KEY_PACKED | id << 3;
        let at = 1 + write_varint(&mut b[1..], n);
        write_rest(&mut b[at..], &value, vlen, deadline);
        return addr;
    }
    // A packed key shorter than 16 bytes is padded up to 16 (so that bit
    // 6 means keypack's form), which the pad's 3 bits allow from 9 bytes on.
    // One byte short of that, the key is written widened (its count in a
    // byte of its own), which reaches the 9 bytes.
    let widen = key.packed.is_some_and(|p| packed_len(p) + MAX_PAD + 1 == TINY);
    let packed = key.packed.filter(|&p| {
        let len = packed_len(p) + usize::from(widen);
        len + MAX_PAD >= TINY && class_size(len.max(TINY)) < class_size(raw_len)
    });
    let len = match packed {
        Some(p) => packed_len(p) + usize::from(widen),
        None => raw_len,
    };
    let size = if packed.is_some() { len.max(TINY) } else { len };
    let pad = if size <= MAX_SMALL { class_size(size) - len } else { 0 };
    let (addr, b) = alloc(slab, old, size);
    debug_assert!(pad == 0 || (b.len() >= TINY && pad <= MAX_PAD));
    b[0] = flags | (pad as u8) << 3 | if packed.is_some() { KEY_PACKED } else { 0 };
    let at = match packed {
        Some(p) if widen => 1 + keypack::write_widened(p, &mut b[1..]),
        Some(p) => {
            debug_assert_eq!(keypack::packed_len(p), Some(p.len()), "a packed key ends itself");
            b[1..1 + p.len()].copy_from_slice(p);
            1 + p.len()
        }
        None => {
            let k = key.raw;
            let at = 1 + write_varint(&mut b[1..], k.len() as u64);
            b[at..at + k.len()].copy_from_slice(k);
            at + k.len()
        }
    };
    write_rest(&mut b[at..], &value, vlen, deadline);
    addr
}

/// `write_varint` for other modules' tests.
#[cfg(test)]
pub(crate) fn tests_varint(b: &mut [u8], n: u64) -> usize {
    write_varint(b, n)
}

/// Writes `n` as a LEB128 varint at the start of `b`; returns its length.
fn write_varint(b: &mut [u8], mut n: u64) -> usize {
    let mut at = 0;
    while n >= 0x80 {
        b[at] = (n as u8) | 0x80;
        n >>= 7;
        at += 1;
    }
    b[at] = n as u8;
    at + 1
}

/// Writes the deadline (if any) and the value (`vlen` bytes) at the start of `b`.
fn write_rest(b: &mut [u8], value: &Body<'_>, vlen: usize, deadline: Option<i64>) {
    let at = write_deadline(b, deadline);
    match value {
        Body::Str(StrRef::Int(v)) => b[at..at + vlen].copy_from_slice(&v.to_le_bytes()[..vlen]),
        Body::Str(StrRef::Bytes(v)) => b[at..at + vlen].copy_from_slice(v),
        Body::Obj(i) => b[at..at + 4].copy_from_slice(&i.to_le_bytes()),
        Body::Inline(e) | Body::Packed(e) => b[at..at + vlen].copy_from_slice(e),
    }
}

/// Replaces the integer stored in blob bytes `b` with `v` when the new value
/// fits in the blob's current size class (INCR without a new allocation).
/// Returns false, leaving `b` untouched, if the blob does not hold an
/// integer or `v` needs a bigger class.
pub fn rewrite_int(b: &mut [u8], v: i64) -> bool {
    let flags = b[0];
    if flags & 3 != KIND_INT || flags & RAW_ENC != 0 || b.len() > MAX_SMALL {
        return false;
    }
    let view = Blob::parse(b);
    let at = b.len() - pad_of(b) - view.value.len();
    let vlen = int_bytes(v);
    // A blob under 16 bytes has no pad: its class is its exact length.
    let max_pad = if b.len() < TINY { 0 } else { MAX_PAD };
    if at + vlen > b.len() || b.len() - at - vlen > max_pad {
        return false;
    }
    let pad = b.len() - at - vlen;
    if b.len() >= TINY {
        b[0] = (flags & 7) | (pad as u8) << 3 | (flags & RAW_ENC) | (flags & KEY_PACKED);
    }
    b[at..at + vlen].copy_from_slice(&v.to_le_bytes()[..vlen]);
    true
}

/// Marks the blob `b` of a bytes string as edited in place ("raw" in
/// OBJECT ENCODING). Returns false, leaving `b` untouched, for any other
/// kind of value.
pub fn mark_raw(b: &mut [u8]) -> bool {
    if is_packed(b[0]) {
        let end = b.len() - pad_of(b);
        let at = end - Blob::parse(b).value.len();
        b[at] |= crate::encoding::packed::RAW_MARK;
        return true;
    }
    if b[0] & 3 != KIND_RAW {
        return false;
    }
    b[0] |= RAW_ENC;
    true
}

/// True if the blob `b` holds a bytes string (not an integer or object).
pub fn is_kind_bytes(b: &[u8]) -> bool {
    b[0] & 3 == KIND_RAW || is_packed(b[0])
}

/// True if the blob `b` holds a bytes string marked by `mark_raw`.
pub fn is_marked_raw(b: &[u8]) -> bool {
    if is_packed(b[0]) {
        return crate::encoding::packed::is_marked_raw(Blob::parse(b).value);
    }
    b[0] & 3 == KIND_RAW && b[0] & RAW_ENC != 0
}

/// Where the key starts and its length (after the flags byte and varint;
/// a number key's varint is the key).
fn key_span(b: &[u8]) -> (usize, usize) {
    match key_kind(b) {
        KeyKind::Number(_) => {
            let len = b[1..].iter().position(|&c| c < 0x80).expect("a number key's varint ends") + 1;
            return (1, len);
        }
        KeyKind::Packed => return (1, keypack::packed_len(&b[1..]).expect("a packed key ends in its blob")),
        KeyKind::Raw => {}
    }
    let mut at = 1;
    let mut klen = 0usize;
    let mut shift = 0;
    loop {
        let c = b[at];
        at += 1;
        klen |= ((c & 0x7F) as usize) << shift;
        if c < 0x80 {
            return (at, klen);
        }
        shift += 7;
    }
}

/// A decoded view of a blob.
#[derive(Debug, Clone, Copy)]
pub struct Blob<'a> {
    /// The key as stored: raw or packed, as `key_kind` says (the keyspace
    /// decodes a packed one).
    pub key: &'a [u8],
    /// How `key` is stored.
    pub key_kind: KeyKind,
    /// The deadline, if any.
    pub deadline: Option<i64>,
    kind: u8,
    value: &'a [u8],
}

impl<'a> Blob<'a> {
    /// Decodes the blob bytes as the slab returns them.
    pub fn parse(b: &'a [u8]) -> Blob<'a> {
        let flags = b[0];
        let end = b.len() - pad_of(b);
        let (mut at, klen) = key_span(b);
        let key = &b[at..at + klen];
        at += klen;
        let deadline = if flags & HAS_TTL != 0 {
            let (t, len) = read_deadline(&b[at..]);
            at += len;
            Some(t)
        } else {
            None
        };
        let kind = if is_packed(flags) { PACKED } else { flags & 3 };
        Blob { key, key_kind: key_kind(b), deadline, kind, value: &b[at..end] }
    }

    /// Just the key as stored (lookups compare it for every tag match; no
    /// need to decode the rest); packed unless `key_kind` says raw.
    pub fn key_of(b: &'a [u8]) -> &'a [u8] {
        let (at, klen) = key_span(b);
        &b[at..at + klen]
    }

    /// What the blob stores after the key.
    pub fn body(&self) -> Body<'a> {
        match self.kind {
            KIND_OBJ => Body::Obj(u32::from_le_bytes(self.value[..4].try_into().expect("4 bytes"))),
            KIND_INLINE => Body::Inline(self.value),
            PACKED => Body::Packed(self.value),
            _ => Body::Str(self.value()),
        }
    }

    /// The value as a string view (meaningless for an object blob).
    fn value(&self) -> StrRef<'a> {
        match self.kind {
            KIND_INT => {
                let n = self.value.len();
                let mut buf = [0u8; 8];
                buf[..n].copy_from_slice(self.value);
                let v = i64::from_le_bytes(buf);
                StrRef::Int((v << (64 - 8 * n)) >> (64 - 8 * n))
            }
            _ => StrRef::Bytes(self.value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    /// Deadlines in 0..2^48 - 1 take 6 bytes, every other i64 14, and all
    /// come back exactly, with every kind of key and value after them.
    #[test]
    fn deadline_forms() {
        let mut s = Slab::default();
        let cases = [
            (0, 6),
            (1, 6),
            (1_767_225_600_000, 6),
            ((1 << 48) - 2, 6),
            ((1 << 48) - 1, 14),
            (1 << 48, 14),
            (i64::MAX, 14),
            (i64::MAX - 1, 14),
            (-1, 14),
            (i64::MIN, 14),
        ];
        let packed = [&[0u8, 20 << 3][..], &[0x5a; 20]].concat();
        let forms = [
            KeyForm::raw(b"k"),
            KeyForm::raw(&[7; 300]),
            KeyForm { raw: b"key:123456", packed: None, number: Some((3, 123456)) },
            KeyForm { raw: &[b'x'; 60], packed: Some(&packed), number: None },
        ];
        let values = [Body::Str(StrRef::Int(-9)), Body::Str(StrRef::Bytes(b"v")), Body::Obj(3), Body::Inline(b"\x04a\x01"), Body::Str(StrRef::Bytes(&[1; 40]))];
        for (t, len) in cases {
            assert_eq!(deadline_len(Some(t)), len, "{t}");
            let mut b = [0u8; 14];
            assert_eq!(write_deadline(&mut b, Some(t)), len);
            assert_eq!(read_deadline(&b), (t, len), "{t}");
            for form in forms {
                for v in values {
                    let a = store(&mut s, form, v, Some(t));
                    let b = Blob::parse(s.bytes(a));
                    assert_eq!((b.deadline, b.body()), (Some(t), v), "{t} {form:?}");
                    let without = store(&mut s, form, v, None);
                    let n = |a| s.bytes(a).len() - pad_of(s.bytes(a));
                    if key_kind(s.bytes(a)) == key_kind(s.bytes(without)) {
                        assert_eq!(n(a), n(without) + len, "{t} {form:?} {v:?}");
                    }
                }
            }
        }
        assert_eq!(deadline_len(None), 0);
    }

    #[test]
    fn round_trip() {
        let mut s = Slab::default();
        let big = vec![7u8; 1000];
        let cases: Vec<(Vec<u8>, Value, Option<i64>)> = vec![
            (b"k".to_vec(), Value::Int(0), None),
            (b"key:1".to_vec(), Value::Int(-1), Some(5)),
            (b"x".repeat(200), Value::Int(i64::MIN), None),
            (b"y".to_vec(), Value::Int(i64::MAX), Some(-3)),
            (b"".to_vec(), Value::Bytes(vec![]), None),
            (vec![1; 48], Value::Bytes(vec![2; 46]), Some(1 << 40)),
            (vec![3; 130], Value::Bytes(big.clone()), None),
        ];
        for v in [127i64, 128, -128, -129, 1 << 31, 999_999] {
            let a = store(&mut s, KeyForm::raw(b"i"), Body::Str(StrRef::Int(v)), None);
            assert_eq!(Blob::parse(s.bytes(a)).body(), Body::Str(StrRef::Int(v)));
        }
        for (k, v, d) in cases {
            let crate::value::ValueRef::Str(sv) = v.as_ref() else { unreachable!() };
            let a = store(&mut s, KeyForm::raw(&k), Body::Str(sv), d);
            let b = Blob::parse(s.bytes(a));
            assert_eq!(b.key, &k[..]);
            assert_eq!(b.deadline, d);
            assert_eq!(b.body(), Body::Str(sv));
        }
        // Workload (a): 48-byte key, 46-byte value, TTL: exactly 104 bytes.
        let a = store(&mut s, KeyForm::raw(&[1; 48]), Body::Str(StrRef::Bytes(&[2; 46])), Some(1));
        assert_eq!(s.cost(a), 104);
        // Workload (b): "key:123456" -> 123456: 15 bytes (a class of its
        // own), 7 as a number key (prefix id 0, the number's 3-byte varint).
        let a = store(&mut s, KeyForm::raw(b"key:123456"), Body::Str(StrRef::Int(123456)), None);
        assert_eq!(s.cost(a), 15);
        let form = KeyForm { raw: b"key:123456", packed: Some(&[0, 3 << 3, 0x12, 0x34, 0x56]), number: Some((0, 123456)) };
        let a = store(&mut s, form, Body::Str(StrRef::Int(123456)), None);
        assert_eq!(s.bytes(a), [0x41, 0xc0, 0xc4, 0x07, 0x40, 0xe2, 0x01]);
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key, b.key_kind, b.deadline, b.body()), (&[0xc0, 0xc4, 0x07][..], KeyKind::Number(0), None, Body::Str(StrRef::Int(123456))));
        assert!(number_key_fits(123456, &Body::Str(StrRef::Int(123456)), None));
        // With a deadline and prefix id 5: 1 + 3 + 6 + 1 = 11 bytes.
        let form = KeyForm { number: Some((5, 123456)), ..form };
        let a = store(&mut s, form, Body::Str(StrRef::Int(-5)), Some(77));
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key, b.key_kind, b.deadline, b.body()), (&[0xc0, 0xc4, 0x07][..], KeyKind::Number(5), Some(77), Body::Str(StrRef::Int(-5))));
        assert_eq!(s.cost(a), 11);
        // INCR in place keeps the number key while the integer's width stays.
        assert!(rewrite_int(s.bytes_mut(a), 100));
        assert!(!rewrite_int(s.bytes_mut(a), 1000), "a wider integer needs a new blob");
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key_kind, b.deadline, b.body()), (KeyKind::Number(5), Some(77), Body::Str(StrRef::Int(100))));
        // No number form where the blob would reach 16 bytes: keypack's
        // form if it gives a smaller class, else raw.
        let long = Body::Str(StrRef::Bytes(&[9; 12]));
        assert!(!number_key_fits(123456, &long, None));
        let a = store(&mut s, form, long, None);
        assert_eq!(key_kind(s.bytes(a)), KeyKind::Raw, "5 + 12 in 24 bytes either way");
        let a = store(&mut s, form, Body::Str(StrRef::Bytes(&[9; 15])), None);
        assert_eq!(key_kind(s.bytes(a)), KeyKind::Packed, "a 24-byte blob, not a 32");
        assert_eq!(s.cost(a), 24);
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key, b.body()), (&[0, 3 << 3, 0x12, 0x34, 0x56][..], Body::Str(StrRef::Bytes(&[9; 15]))));
        // A packed form under 16 bytes is padded to 16, from 9 bytes on.
        let short = KeyForm { raw: b"session:0011223344", packed: Some(&[1, 5 << 3, 0, 0x11, 0x22, 0x33, 0x44]), number: None };
        let a = store(&mut s, short, Body::Str(StrRef::Int(1)), None);
        assert_eq!((key_kind(s.bytes(a)), s.cost(a)), (KeyKind::Packed, 16));
        assert!(rewrite_int(s.bytes_mut(a), 1 << 40));
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key, b.body()), (&[1, 5 << 3, 0, 0x11, 0x22, 0x33, 0x44][..], Body::Str(StrRef::Int(1 << 40))));
        // A byte shorter (8 bytes), the key is written widened to reach 9.
        let short = KeyForm { raw: b"session:00112233", packed: Some(&[1, 4 << 3, 0, 0x11, 0x22, 0x33]), number: None };
        let a = store(&mut s, short, Body::Str(StrRef::Int(1)), None);
        assert_eq!((key_kind(s.bytes(a)), s.cost(a)), (KeyKind::Packed, 16));
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key, b.body()), (&[1, 0, 4, 0, 0x11, 0x22, 0x33][..], Body::Str(StrRef::Int(1))));
        assert!(!keypack::is_canonical(b.key));
        let mut p = keypack::Prefixes::default();
        let mut form = Vec::new();
        assert!(p.pack(b"p:0011", &mut form), "prefix id 0");
        assert!(p.pack(b"session:00112233", &mut form));
        assert_eq!(form, [1, 4 << 3, 0, 0x11, 0x22, 0x33]);
        let mut back = Vec::new();
        p.unpack(b.key, &mut back).expect("a widened key unpacks");
        assert_eq!(back, b"session:00112233");
        assert!(p.eq(b.key, b"session:00112233"));
        // An object handle: "user:1" + 4-byte index, 11 bytes.
        let a = store(&mut s, KeyForm::raw(b"user:1"), Body::Obj(70_000), Some(9));
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key, b.deadline, b.body()), (&b"user:1"[..], Some(9), Body::Obj(70_000)));
        let a = store(&mut s, KeyForm::raw(b"user:1"), Body::Obj(7), None);
        assert_eq!(s.cost(a), 12);
        // A small collection in the blob: any bytes come back exactly.
        for (e, d) in [(&b"\x00\x04name\x01"[..], None), (&b"\x02"[..], Some(3)), (&[9u8; 200][..], None), (&[5u8; 900][..], Some(1))] {
            let a = store(&mut s, KeyForm::raw(b"h:1"), Body::Inline(e), d);
            let b = Blob::parse(s.bytes(a));
            assert_eq!((b.key, b.deadline, b.body()), (&b"h:1"[..], d, Body::Inline(e)));
        }
        // Seed 002's hash per session with both switches on: flags, the
        // 22-byte packed key, a 6-byte deadline, an 11-byte hash of
        // integers (header, `i` and `x` with their i32s): 40 bytes.
        let key = [&[1u8, 20 << 3][..], &[0xab; 20]].concat();
        let form = KeyForm { raw: &[b'a'; 48], packed: Some(&key), number: None };
        let hash = [&[crate::encoding::inline::int_header(1, 4), b'i'][..], &9_999_999i32.to_le_bytes(), b"x", &1_702_592_000i32.to_le_bytes()].concat();
        let a = store(&mut s, form, Body::Inline(&hash), Some(1_767_225_600_000));
        assert_eq!(s.bytes(a).len(), 40);
        assert_eq!(s.cost(a), 40);
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key, b.deadline, b.body()), (&key[..], Some(1_767_225_600_000), Body::Inline(&hash)));
        // A one-field hash with an 11-byte key: 24 bytes. (The header byte
        // names the field width, 4, so the field has no length byte.)
        let a = store(&mut s, KeyForm::raw(b"h0000000001"), Body::Inline(b"\x10name\x01"), None);
        assert_eq!(s.cost(a), 24);
    }
}
