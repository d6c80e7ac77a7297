//! The one allocation per key: header, key, optional deadline and value.
//!
//! ```text
//!   | flags u8 | key len (LEB128 varint) | key | deadline i64 LE (only with TTL) | value | pad |
//!   flags: bits 0-1 kind (0 raw string, 1 integer, 2 object: u32 LE index
//!          into the Db's object table, 3 small collection: its inline
//!          form, `encoding::inline`)
//!          bit 2    has deadline
//!          bits 3-6 pad: bytes of slack at the end (0..=15); in a blob
//!                   longer than 16 bytes the slack is at most 7, so
//!                   pad is bits 3-5 and bit 6 says the key is stored
//!                   packed (`encoding::keypack`: the keyspace decodes it)
//!          bit 7    raw: a string edited in place (APPEND, SETRANGE,
//!                   SETBIT, BITFIELD), which Redis reports as "raw"
//!                   whatever its length; any new store clears it.
//!                   With kind 1 (integer, where the mark never applies)
//!                   it means packed instead: a string kept in its
//!                   compressed form (`encoding::packed`, which holds
//!                   its own raw mark)
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

use crate::slab::{class_size, Slab, MAX_SMALL};
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
/// Bit 6 in a blob of more than 16 bytes: the key is packed.
const KEY_PACKED: u8 = 0x40;
/// Blobs longer than this can carry `KEY_PACKED`.
const KEY_PACK_MIN: usize = 16;

/// Slack bytes at the end of blob `b`.
fn pad_of(b: &[u8]) -> usize {
    let mask = if b.len() > KEY_PACK_MIN { 7 } else { 0xF };
    ((b[0] >> 3) & mask) as usize
}

/// True if the key in blob `b` is stored packed.
pub fn key_is_packed(b: &[u8]) -> bool {
    b.len() > KEY_PACK_MIN && b[0] & KEY_PACKED != 0
}

/// A key as `store` writes it.
#[derive(Debug, Clone, Copy)]
pub enum KeyForm<'a> {
    /// The raw bytes.
    Raw(&'a [u8]),
    /// A packed form, used when the blob is long enough to say so; else
    /// the raw bytes.
    Packed { packed: &'a [u8], raw: &'a [u8] },
}

/// True if the flags byte is a packed string's.
fn is_packed(flags: u8) -> bool {
    flags & (3 | RAW_ENC) == PACKED
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

/// Writes a new blob for (key, value, deadline) into `slab`; returns its address.
pub fn store(slab: &mut Slab, key: KeyForm<'_>, value: Body<'_>, deadline: Option<i64>) -> u64 {
    let (kind, vlen) = match value {
        Body::Str(StrRef::Int(v)) => (KIND_INT, int_bytes(v)),
        Body::Str(StrRef::Bytes(b)) => (KIND_RAW, b.len()),
        Body::Obj(_) => (KIND_OBJ, 4),
        Body::Inline(e) => (KIND_INLINE, e.len()),
        Body::Packed(p) => (PACKED, p.len()),
    };
    let blob_len = |k: &[u8]| 1 + varint_len(k.len()) + k.len() + if deadline.is_some() { 8 } else { 0 } + vlen;
    let (key, packed) = match key {
        KeyForm::Packed { packed, .. } if class_size(blob_len(packed)) > KEY_PACK_MIN => (packed, true),
        KeyForm::Packed { raw, .. } | KeyForm::Raw(raw) => (raw, false),
    };
    let len = blob_len(key);
    let pad = if len <= MAX_SMALL { class_size(len) - len } else { 0 };
    let (addr, b) = slab.alloc(len);
    debug_assert!(!packed || b.len() > KEY_PACK_MIN);
    b[0] = kind | if deadline.is_some() { HAS_TTL } else { 0 } | (pad as u8) << 3 | if packed { KEY_PACKED } else { 0 };
    let mut at = 1;
    let mut n = key.len();
    while n >= 0x80 {
        b[at] = (n as u8) | 0x80;
        n >>= 7;
        at += 1;
    }
    b[at] = n as u8;
    at += 1;
    b[at..at + key.len()].copy_from_slice(key);
    at += key.len();
    if let Some(t) = deadline {
        b[at..at + 8].copy_from_slice(&t.to_le_bytes());
        at += 8;
    }
    match value {
        Body::Str(StrRef::Int(v)) => b[at..at + vlen].copy_from_slice(&v.to_le_bytes()[..vlen]),
        Body::Str(StrRef::Bytes(v)) => b[at..at + vlen].copy_from_slice(v),
        Body::Obj(i) => b[at..at + 4].copy_from_slice(&i.to_le_bytes()),
        Body::Inline(e) | Body::Packed(e) => b[at..at + vlen].copy_from_slice(e),
    }
    addr
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
    let max_pad = if b.len() > KEY_PACK_MIN { 7 } else { 15 };
    if at + vlen > b.len() || b.len() - at - vlen > max_pad {
        return false;
    }
    let pad = b.len() - at - vlen;
    let keep = if b.len() > KEY_PACK_MIN { flags & KEY_PACKED } else { 0 };
    b[0] = (flags & 7) | (pad as u8) << 3 | (flags & RAW_ENC) | keep;
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

/// Where the key starts and its length (after the flags byte and varint).
fn key_span(b: &[u8]) -> (usize, usize) {
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
    /// The key as stored: packed when `key_packed` (the keyspace decodes
    /// it), else the raw bytes.
    pub key: &'a [u8],
    /// True if `key` is in packed form.
    pub key_packed: bool,
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
            at += 8;
            Some(i64::from_le_bytes(b[at - 8..at].try_into().expect("8 bytes")))
        } else {
            None
        };
        let kind = if is_packed(flags) { PACKED } else { flags & 3 };
        Blob { key, key_packed: key_is_packed(b), deadline, kind, value: &b[at..end] }
    }

    /// Just the key as stored (lookups compare it for every tag match; no
    /// need to decode the rest); packed if `key_is_packed`.
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
            let a = store(&mut s, KeyForm::Raw(b"i"), Body::Str(StrRef::Int(v)), None);
            assert_eq!(Blob::parse(s.bytes(a)).body(), Body::Str(StrRef::Int(v)));
        }
        for (k, v, d) in cases {
            let crate::value::ValueRef::Str(sv) = v.as_ref() else { unreachable!() };
            let a = store(&mut s, KeyForm::Raw(&k), Body::Str(sv), d);
            let b = Blob::parse(s.bytes(a));
            assert_eq!(b.key, &k[..]);
            assert_eq!(b.deadline, d);
            assert_eq!(b.body(), Body::Str(sv));
        }
        // Workload (a): 48-byte key, 46-byte value, TTL: exactly 104 bytes.
        let a = store(&mut s, KeyForm::Raw(&[1; 48]), Body::Str(StrRef::Bytes(&[2; 46])), Some(1));
        assert_eq!(s.cost(a), 104);
        // Workload (b): "key:123456" -> 123456: 16 bytes.
        let a = store(&mut s, KeyForm::Raw(b"key:123456"), Body::Str(StrRef::Int(123456)), None);
        assert_eq!(s.cost(a), 16);
        // An object handle: "user:1" + 4-byte index in a 16-byte class.
        let a = store(&mut s, KeyForm::Raw(b"user:1"), Body::Obj(70_000), Some(9));
        let b = Blob::parse(s.bytes(a));
        assert_eq!((b.key, b.deadline, b.body()), (&b"user:1"[..], Some(9), Body::Obj(70_000)));
        let a = store(&mut s, KeyForm::Raw(b"user:1"), Body::Obj(7), None);
        assert_eq!(s.cost(a), 16);
        // A small collection in the blob: any bytes come back exactly.
        for (e, d) in [(&b"\x00\x04name\x01"[..], None), (&b"\x02"[..], Some(3)), (&[9u8; 200][..], None), (&[5u8; 900][..], Some(1))] {
            let a = store(&mut s, KeyForm::Raw(b"h:1"), Body::Inline(e), d);
            let b = Blob::parse(s.bytes(a));
            assert_eq!((b.key, b.deadline, b.body()), (&b"h:1"[..], d, Body::Inline(e)));
        }
        // A one-field hash with an 11-byte key: 24 bytes. (The header byte
        // names the field width, 4, so the field has no length byte.)
        let a = store(&mut s, KeyForm::Raw(b"h0000000001"), Body::Inline(b"\x10name\x01"), None);
        assert_eq!(s.cost(a), 24);
    }
}
