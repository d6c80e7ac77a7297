//! Listpack entries: list elements packed back to back in one byte buffer,
//! walkable in both directions.
//!
//! The entry format is Redis's listpack entry, byte count for byte count, so
//! that a buffer's length is exactly the `lpBytes` Redis would compute for
//! the same elements (minus its 7-byte header and terminator, which we do
//! not store). That lets `types::list` take Redis's listpack/quicklist
//! decisions on the same numbers Redis uses, with no estimate.
//!
//! ```text
//! entry:  tag [payload] backlen
//!   0x00..=0x7f  the integer 0..=127                      (1 byte)
//!   0x80..=0xbf  string, length tag & 0x3f, then bytes   (1 + len)
//!   0xc0..=0xdf  13-bit signed integer, high bits in tag (2 bytes)
//!   0xe0..=0xef  string, 12-bit length (tag & 0x0f, next byte), bytes
//!   0xf0         string, u32 LE length, bytes            (5 + len)
//!   0xf1 i16 LE | 0xf2 i24 LE | 0xf3 i32 LE | 0xf4 i64 LE
//! backlen: the length of tag + payload in 7-bit groups, most significant
//!   group first; every byte but the first has bit 7 set, so a reader
//!   walking backwards stops at the byte without it (1..=5 bytes).
//! ```
//!
//! Integers are stored only for the canonical decimal form of an i64, so
//! elements read back byte-exact.
//!
//! Invariants: buffers are built only by this module, so a malformed entry
//! is a bug and decoding panics. Complexity: decode O(1) per entry; insert
//! and delete move the tail of the buffer once.

use super::reserve_class;
use crate::strref::{parse_canonical_i64, StrRef};

/// How an element is stored: an integer or bytes, and the entry's size.
#[derive(Debug, Clone, Copy)]
struct Enc<'a> {
    value: StrRef<'a>,
    /// Tag plus payload.
    body: usize,
}

fn classify(elem: &[u8]) -> Enc<'_> {
    if let Some(v) = parse_canonical_i64(elem) {
        let body = match v {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32768..=32767 => 3,
            -8_388_608..=8_388_607 => 4,
            -2_147_483_648..=2_147_483_647 => 5,
            _ => 9,
        };
        return Enc {
            value: StrRef::Int(v),
            body,
        };
    }
    let n = elem.len();
    let hdr = if n < 64 {
        1
    } else if n < 4096 {
        2
    } else {
        5
    };
    Enc {
        value: StrRef::Bytes(elem),
        body: hdr + n,
    }
}

/// Bytes of the back-length of an entry whose tag and payload take `body`
/// bytes. Redis moves to the next width one below each 7-bit boundary (an
/// entry of exactly 16,383 bytes has a 3-byte back-length), and a listpack
/// it validates must use its widths.
pub(crate) fn backlen_len(body: usize) -> usize {
    match body {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Bytes the entry for `elem` takes (tag, payload and backlen).
pub fn entry_len(elem: &[u8]) -> usize {
    let e = classify(elem);
    e.body + backlen_len(e.body)
}

/// Inserts the entry for `elem` at byte offset `at` (an entry boundary);
/// returns its length. Capacity grows by allocator size classes.
pub fn insert(buf: &mut Vec<u8>, at: usize, elem: &[u8]) -> usize {
    let e = classify(elem);
    let bl = backlen_len(e.body);
    let total = e.body + bl;
    reserve_class(buf, total);
    let mut tmp = [0u8; 14];
    let head;
    let payload: &[u8] = match e.value {
        StrRef::Int(v) => {
            let (tag, n): (u8, usize) = match e.body {
                1 => (v as u8, 0),
                2 => {
                    let u = (v as u16) & 0x1fff;
                    tmp[1] = u as u8;
                    (0xc0 | (u >> 8) as u8, 1)
                }
                3 => (0xf1, 2),
                4 => (0xf2, 3),
                5 => (0xf3, 4),
                _ => (0xf4, 8),
            };
            tmp[0] = tag;
            if e.body >= 3 {
                tmp[1..1 + n].copy_from_slice(&v.to_le_bytes()[..n]);
            }
            head = 1 + n;
            &[]
        }
        StrRef::Bytes(b) => {
            let n = b.len();
            if n < 64 {
                tmp[0] = 0x80 | n as u8;
                head = 1;
            } else if n < 4096 {
                tmp[0] = 0xe0 | (n >> 8) as u8;
                tmp[1] = n as u8;
                head = 2;
            } else {
                tmp[0] = 0xf0;
                tmp[1..5].copy_from_slice(&(n as u32).to_le_bytes());
                head = 5;
            }
            b
        }
    };
    let mut back = [0u8; 5];
    for (i, slot) in back[..bl].iter_mut().enumerate() {
        let shift = 7 * (bl - 1 - i);
        *slot = ((e.body >> shift) & 0x7f) as u8 | if i > 0 { 0x80 } else { 0 };
    }
    let tail = buf.len() - at;
    buf.resize(buf.len() + total, 0);
    buf.copy_within(at..at + tail, at + total);
    buf[at..at + head].copy_from_slice(&tmp[..head]);
    buf[at + head..at + head + payload.len()].copy_from_slice(payload);
    buf[at + e.body..at + total].copy_from_slice(&back[..bl]);
    total
}

/// Decodes the entry at `at`: its element and the offset just past it.
pub fn decode(buf: &[u8], at: usize) -> (StrRef<'_>, usize) {
    let tag = buf[at];
    let (value, body) = match tag {
        0x00..=0x7f => (StrRef::Int(tag as i64), 1),
        0x80..=0xbf => {
            let n = (tag & 0x3f) as usize;
            (StrRef::Bytes(&buf[at + 1..at + 1 + n]), 1 + n)
        }
        0xc0..=0xdf => {
            let u = ((tag as u16 & 0x1f) << 8) | buf[at + 1] as u16;
            // Sign-extend 13 bits.
            (StrRef::Int(((u << 3) as i16 >> 3) as i64), 2)
        }
        0xe0..=0xef => {
            let n = ((tag as usize & 0x0f) << 8) | buf[at + 1] as usize;
            (StrRef::Bytes(&buf[at + 2..at + 2 + n]), 2 + n)
        }
        0xf0 => {
            let n = u32::from_le_bytes(buf[at + 1..at + 5].try_into().expect("4 bytes")) as usize;
            (StrRef::Bytes(&buf[at + 5..at + 5 + n]), 5 + n)
        }
        0xf1..=0xf4 => {
            let n = [2, 3, 4, 8][(tag - 0xf1) as usize];
            let mut le = [0u8; 8];
            le[..n].copy_from_slice(&buf[at + 1..at + 1 + n]);
            // Sign-extend from n bytes.
            let shift = 64 - 8 * n as u32;
            (
                StrRef::Int((i64::from_le_bytes(le) << shift) >> shift),
                1 + n,
            )
        }
        _ => panic!("corrupt listpack entry tag {tag:#x} at {at}"),
    };
    (value, at + body + backlen_len(body))
}

/// The offset of the entry that ends at `end` (walking backwards).
pub fn prev(buf: &[u8], end: usize) -> usize {
    let mut body = 0usize;
    let mut i = end;
    let mut shift = 0;
    loop {
        i -= 1;
        let b = buf[i];
        body |= ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    i - body
}

/// Checks that `buf[at..]` is whole entries as `insert` writes them (tags,
/// lengths within the buffer, back-lengths of the right width and value),
/// so that `decode` and `prev` can walk it; returns how many. For bytes
/// that did not come from `insert` (a decompressed list node).
pub fn validate(buf: &[u8], mut at: usize) -> Option<usize> {
    let mut n = 0;
    while at < buf.len() {
        let tag = buf[at];
        let byte = |i: usize| buf.get(at + i).map(|&b| b as usize);
        let body = match tag {
            0x00..=0x7f => 1,
            0x80..=0xbf => 1 + (tag & 0x3f) as usize,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 2 + ((tag as usize & 0x0f) << 8 | byte(1)?),
            0xf0 => {
                let len = buf.get(at + 1..at + 5)?;
                5usize.checked_add(u32::from_le_bytes(len.try_into().ok()?) as usize)?
            }
            0xf1..=0xf4 => 1 + [2, 3, 4, 8][(tag - 0xf1) as usize],
            _ => return None,
        };
        let bl = backlen_len(body);
        let end = at.checked_add(body)?.checked_add(bl)?;
        let back = buf.get(at + body..end)?;
        for (i, &b) in back.iter().enumerate() {
            let shift = 7 * (bl - 1 - i);
            let want = ((body >> shift) & 0x7f) as u8 | if i > 0 { 0x80 } else { 0 };
            if b != want {
                return None;
            }
        }
        at = end;
        n += 1;
    }
    Some(n)
}

/// True if `elem` equals the stored element `v` (an integer entry equals
/// only the canonical decimal form of its value).
pub fn eq(v: StrRef<'_>, elem: &[u8]) -> bool {
    match v {
        StrRef::Bytes(b) => b == elem,
        StrRef::Int(i) => parse_canonical_i64(elem) == Some(i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_sizes() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let cases: Vec<(Vec<u8>, usize)> = vec![
            (b"0".to_vec(), 2),
            (b"127".to_vec(), 2),
            (b"128".to_vec(), 3),
            (b"-1".to_vec(), 3),
            (b"-4096".to_vec(), 3),
            (b"4096".to_vec(), 4),
            (b"-32768".to_vec(), 4),
            (b"8388607".to_vec(), 5),
            (b"-2147483648".to_vec(), 6),
            (b"9223372036854775807".to_vec(), 10),
            (b"-9223372036854775808".to_vec(), 10),
            (b"9223372036854775808".to_vec(), 21),
            (b"01".to_vec(), 4),
            (b"".to_vec(), 2),
            (b"hello".to_vec(), 7),
            (mid.clone(), 2 + 300 + 2),
            (long.clone(), 5 + 5000 + 2),
            // Redis's back-length widths change one below each 7-bit boundary.
            (vec![b'z'; 16_377], 5 + 16_377 + 2),
            (vec![b'z'; 16_378], 5 + 16_378 + 3),
        ];
        let mut buf = Vec::new();
        for (e, size) in &cases {
            assert_eq!(entry_len(e), *size, "{:?}", String::from_utf8_lossy(e));
            let at = buf.len();
            assert_eq!(insert(&mut buf, at, e), *size);
        }
        let mut at = 0;
        for (e, _) in &cases {
            let (v, next) = decode(&buf, at);
            assert_eq!(v.to_vec(), *e);
            assert!(eq(v, e));
            assert_eq!(prev(&buf, next), at);
            at = next;
        }
        assert_eq!(at, buf.len());
        // Insert in the middle keeps neighbours intact.
        insert(&mut buf, 0, b"first");
        assert_eq!(decode(&buf, 0).0, StrRef::Bytes(b"first"));
        assert!(!eq(StrRef::Int(1), b"01"));
    }
}
