//! The packed blobs Redis embeds in RDB values: ziplist (RDB 7 and older),
//! listpack (RDB 9 and newer) and intset. All three are read to load what
//! Redis wrote; listpacks are also written, because a stream's RDB layout
//! is its listpacks and nothing else.
//!
//! Each reader walks the blob once, checks every length (and a listpack
//! entry's trailing back-length) against the bytes left, and yields
//! elements as `Elem`; a blob that does not end exactly at its terminator
//! is corrupt. The writer picks each entry's encoding as Redis does
//! (strings in an integer's canonical form become integers, the smallest
//! width that fits), so what it writes is byte for byte Redis's.

use super::primitives::RdbError;
use crate::strref::parse_canonical_i64;

/// One element of a packed blob.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Elem<'a> {
    /// A string element.
    Str(&'a [u8]),
    /// An integer element.
    Int(i64),
}

impl Elem<'_> {
    /// The element as bytes (integers in decimal).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Str(s) => s.to_vec(),
            Elem::Int(v) => v.to_string().into_bytes(),
        }
    }

    /// The element as an integer, if it is one (or a string that parses as one).
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Elem::Int(v) => Some(v),
            Elem::Str(s) => std::str::from_utf8(s).ok()?.parse().ok(),
        }
    }
}

fn bytes(b: &[u8], at: usize, n: usize) -> Result<&[u8], RdbError> {
    at.checked_add(n).and_then(|end| b.get(at..end)).ok_or(RdbError::BAD)
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |acc, &x| (acc << 8) | x as u64)
}

/// Sign-extends the low `bits` bits of `v`.
fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// Appends the back-length of an entry of `len` bytes: 7 bits per byte,
/// most significant first, every byte but the first flagged 0x80.
fn put_backlen(out: &mut Vec<u8>, len: usize) {
    let n = crate::encoding::listpack::backlen_len(len);
    for k in (0..n).rev() {
        let bits = ((len >> (7 * k)) & 0x7f) as u8;
        out.push(if k == n - 1 { bits } else { bits | 0x80 });
    }
}

/// A listpack being written, entry by entry.
#[derive(Debug, Default)]
pub struct ListpackWriter {
    body: Vec<u8>,
    count: usize,
}

impl ListpackWriter {
    /// An empty listpack.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an integer in the narrowest encoding that holds it.
    pub fn int(&mut self, v: i64) {
        let start = self.body.len();
        let b = &mut self.body;
        match v {
            0..=127 => b.push(v as u8),
            -4096..=4095 => b.extend_from_slice(&[0xc0 | ((v as u16 >> 8) & 0x1f) as u8, v as u8]),
            -32_768..=32_767 => {
                b.push(0xf1);
                b.extend_from_slice(&(v as i16).to_le_bytes());
            }
            -8_388_608..=8_388_607 => {
                b.push(0xf2);
                b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            _ if i32::try_from(v).is_ok() => {
                b.push(0xf3);
                b.extend_from_slice(&(v as i32).to_le_bytes());
            }
            _ => {
                b.push(0xf4);
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.close(start);
    }

    /// Appends a string; one in an i64's canonical decimal form is stored
    /// as that integer, as Redis does.
    pub fn str(&mut self, s: &[u8]) {
        if let Some(v) = parse_canonical_i64(s) {
            return self.int(v);
        }
        let start = self.body.len();
        let b = &mut self.body;
        match s.len() {
            n @ 0..=63 => b.push(0x80 | n as u8),
            n @ 64..=4095 => b.extend_from_slice(&[0xe0 | (n >> 8) as u8, n as u8]),
            n => {
                b.push(0xf0);
                b.extend_from_slice(&(n as u32).to_le_bytes());
            }
        }
        b.extend_from_slice(s);
        self.close(start);
    }

    fn close(&mut self, start: usize) {
        let len = self.body.len() - start;
        put_backlen(&mut self.body, len);
        self.count += 1;
    }

    /// The finished blob: header (total bytes, element count or 65535 when
    /// it does not fit), entries, terminator.
    pub fn finish(self) -> Vec<u8> {
        let total = 6 + self.body.len() + 1;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(&(self.count.min(0xffff) as u16).to_le_bytes());
        out.extend_from_slice(&self.body);
        out.push(0xff);
        out
    }
}

/// The elements of a listpack.
pub fn listpack(b: &[u8]) -> Result<Vec<Elem<'_>>, RdbError> {
    let total = le(bytes(b, 0, 4)?) as usize;
    if total != b.len() || total < 7 {
        return Err(RdbError::BAD);
    }
    let mut out = Vec::new();
    let mut i = 6;
    loop {
        let e = *b.get(i).ok_or(RdbError::BAD)?;
        if e == 0xff {
            break;
        }
        let (elem, len) = match e {
            0x00..=0x7f => (Elem::Int(e as i64), 1),
            0x80..=0xbf => {
                let n = (e & 0x3f) as usize;
                (Elem::Str(bytes(b, i + 1, n)?), 1 + n)
            }
            0xc0..=0xdf => {
                let v = ((e as u64 & 0x1f) << 8) | *b.get(i + 1).ok_or(RdbError::BAD)? as u64;
                (Elem::Int(signed(v, 13)), 2)
            }
            0xe0..=0xef => {
                let n = ((e as usize & 0x0f) << 8) | *b.get(i + 1).ok_or(RdbError::BAD)? as usize;
                (Elem::Str(bytes(b, i + 2, n)?), 2 + n)
            }
            0xf0 => {
                let n = le(bytes(b, i + 1, 4)?) as usize;
                (Elem::Str(bytes(b, i + 5, n)?), 5 + n)
            }
            0xf1 => (Elem::Int(signed(le(bytes(b, i + 1, 2)?), 16)), 3),
            0xf2 => (Elem::Int(signed(le(bytes(b, i + 1, 3)?), 24)), 4),
            0xf3 => (Elem::Int(signed(le(bytes(b, i + 1, 4)?), 32)), 5),
            0xf4 => (Elem::Int(le(bytes(b, i + 1, 8)?) as i64), 9),
            _ => return Err(RdbError::BAD),
        };
        // Each entry ends with its own length, 7 bits per byte.
        let end = i.checked_add(len).ok_or(RdbError::BAD)?;
        let mut want = Vec::with_capacity(5);
        put_backlen(&mut want, len);
        if bytes(b, end, want.len())? != want.as_slice() {
            return Err(RdbError::BAD);
        }
        i = end + want.len();
        out.push(elem);
    }
    let declared = le(bytes(b, 4, 2)?) as usize;
    if i + 1 != b.len() || (declared != 0xffff && declared != out.len()) {
        return Err(RdbError::BAD);
    }
    Ok(out)
}

/// The elements of a ziplist.
pub fn ziplist(b: &[u8]) -> Result<Vec<Elem<'_>>, RdbError> {
    let total = le(bytes(b, 0, 4)?) as usize;
    if total != b.len() || total < 11 {
        return Err(RdbError::BAD);
    }
    let mut out = Vec::new();
    let mut i = 10;
    // Where the last entry starts (the header's tail offset must say so)
    // and how long it is (the next entry's prevlen must say so).
    let (mut last, mut prev_len) = (10, 0);
    loop {
        let first = *b.get(i).ok_or(RdbError::BAD)?;
        if first == 0xff {
            break;
        }
        let start = i;
        let prevlen = if first < 254 {
            i += 1;
            first as usize
        } else if first == 254 {
            i += 5;
            le(bytes(b, start + 1, 4)?) as usize
        } else {
            return Err(RdbError::BAD);
        };
        if prevlen != prev_len {
            return Err(RdbError::BAD);
        }
        let e = *b.get(i).ok_or(RdbError::BAD)?;
        let (elem, len) = match e >> 6 {
            0 => {
                let n = (e & 0x3f) as usize;
                (Elem::Str(bytes(b, i + 1, n)?), 1 + n)
            }
            1 => {
                let n = ((e as usize & 0x3f) << 8) | *b.get(i + 1).ok_or(RdbError::BAD)? as usize;
                (Elem::Str(bytes(b, i + 2, n)?), 2 + n)
            }
            2 => {
                let n = bytes(b, i + 1, 4)?.iter().fold(0usize, |acc, &x| (acc << 8) | x as usize);
                (Elem::Str(bytes(b, i + 5, n)?), 5 + n)
            }
            _ => match e {
                0xc0 => (Elem::Int(signed(le(bytes(b, i + 1, 2)?), 16)), 3),
                0xd0 => (Elem::Int(signed(le(bytes(b, i + 1, 4)?), 32)), 5),
                0xe0 => (Elem::Int(le(bytes(b, i + 1, 8)?) as i64), 9),
                0xf0 => (Elem::Int(signed(le(bytes(b, i + 1, 3)?), 24)), 4),
                0xfe => (Elem::Int(signed(le(bytes(b, i + 1, 1)?), 8)), 2),
                0xf1..=0xfd => (Elem::Int((e & 0x0f) as i64 - 1), 1),
                _ => return Err(RdbError::BAD),
            },
        };
        i = i.checked_add(len).ok_or(RdbError::BAD)?;
        (last, prev_len) = (start, i - start);
        out.push(elem);
    }
    let declared = le(bytes(b, 8, 2)?) as usize;
    let tail = le(bytes(b, 4, 4)?) as usize;
    if i + 1 != b.len() || tail != last || (declared != 0xffff && declared != out.len()) {
        return Err(RdbError::BAD);
    }
    Ok(out)
}

/// A field and its value.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// The field-value pairs of a zipmap (hashes in Redis 2.4 and older):
/// `<count: 1 byte, 254+ when unknown> (<len> field <len> <free: 1 byte>
/// value <free bytes>)* 0xff`, where a length is one byte below 254, or
/// 254 and a 4-byte little-endian length. The count, when below 254, must
/// match; the blob must end at its terminator and hold at least one pair.
pub fn zipmap(b: &[u8]) -> Result<Vec<Pair<'_>>, RdbError> {
    fn len(b: &[u8], i: &mut usize) -> Result<Option<usize>, RdbError> {
        match *b.get(*i).ok_or(RdbError::BAD)? {
            255 => Ok(None),
            254 => {
                let n = le(bytes(b, *i + 1, 4)?) as usize;
                *i += 5;
                Ok(Some(n))
            }
            n => {
                *i += 1;
                Ok(Some(n as usize))
            }
        }
    }
    let declared = *b.first().ok_or(RdbError::BAD)? as usize;
    let mut out = Vec::new();
    let mut i = 1;
    while let Some(flen) = len(b, &mut i)? {
        let field = bytes(b, i, flen)?;
        i += flen;
        let vlen = len(b, &mut i)?.ok_or(RdbError::BAD)?;
        let free = *b.get(i).ok_or(RdbError::BAD)? as usize;
        let value = bytes(b, i + 1, vlen)?;
        i = i + 1 + vlen + free;
        out.push((field, value));
    }
    // Redis never wrote an empty zipmap: one is corrupt, not an empty key.
    if out.is_empty() || i + 1 != b.len() || (declared < 254 && declared != out.len()) {
        return Err(RdbError::BAD);
    }
    Ok(out)
}

/// The members of an intset.
pub fn intset(b: &[u8]) -> Result<Vec<i64>, RdbError> {
    let width = le(bytes(b, 0, 4)?) as usize;
    let n = le(bytes(b, 4, 4)?) as usize;
    if !matches!(width, 2 | 4 | 8) || n.checked_mul(width).and_then(|x| x.checked_add(8)) != Some(b.len()) {
        return Err(RdbError::BAD);
    }
    let vals: Vec<i64> = b[8..].chunks_exact(width).map(|c| signed(le(c), 8 * width as u32)).collect();
    if vals.windows(2).any(|w| w[0] >= w[1]) {
        return Err(RdbError::BAD); // an intset is sorted and without duplicates
    }
    Ok(vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listpack from entries already encoded (encoding + data), adding
    /// each entry's backlen and the header and terminator.
    fn lp(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        for e in entries {
            body.extend_from_slice(e);
            assert!(e.len() < 128);
            body.push(e.len() as u8);
        }
        let total = 6 + body.len() + 1;
        let mut b = (total as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        b.extend_from_slice(&body);
        b.push(0xff);
        b
    }

    #[test]
    fn listpack_every_encoding() {
        let b = lp(&[
            &[5],                              // 7-bit uint
            &[0x83, b'a', b'b', b'c'],         // 6-bit string
            &[0xdf, 0xff],                     // 13-bit int: -1
            &[0xf1, 0x00, 0x80],               // int16: -32768
            &[0xf2, 0xff, 0xff, 0x7f],         // int24: 8388607
            &[0xf3, 0x00, 0x00, 0x00, 0x80],   // int32: i32::MIN
            &[0xf4, 1, 0, 0, 0, 0, 0, 0, 0x80], // int64
            &[0xe0, 3, b'x', b'y', b'z'],      // 12-bit string
        ]);
        assert_eq!(
            listpack(&b).unwrap(),
            vec![
                Elem::Int(5),
                Elem::Str(b"abc"),
                Elem::Int(-1),
                Elem::Int(-32768),
                Elem::Int(8_388_607),
                Elem::Int(i32::MIN as i64),
                Elem::Int(i64::MIN + 1),
                Elem::Str(b"xyz"),
            ]
        );
    }

    #[test]
    fn listpack_writer_round_trips_in_redis_encoding() {
        let long = vec![b'x'; 70_000];
        let mid = vec![b'y'; 200];
        let mut w = ListpackWriter::new();
        for v in [0, 127, 128, -1, -4096, 4095, -32_768, 32_767, 8_388_607, -8_388_608, i32::MIN as i64, i32::MAX as i64, i64::MIN, i64::MAX] {
            w.int(v);
        }
        for s in [&b""[..], b"abc", b"-0", b"007", b"12", &mid, &long] {
            w.str(s);
        }
        let b = w.finish();
        let got: Vec<Vec<u8>> = listpack(&b).unwrap().into_iter().map(Elem::to_vec).collect();
        let want: Vec<Vec<u8>> = ["0", "127", "128", "-1", "-4096", "4095", "-32768", "32767", "8388607", "-8388608", "-2147483648", "2147483647", "-9223372036854775808", "9223372036854775807", "", "abc", "-0", "007", "12"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .chain([mid.clone(), long.clone()])
            .collect();
        assert_eq!(got, want);
        // Entries as Redis encodes them ("12" becomes the 7-bit integer 12).
        let mut w = ListpackWriter::new();
        w.str(b"12");
        w.str(b"ab");
        w.int(-1);
        w.int(1000);
        assert_eq!(w.finish(), lp(&[&[12], &[0x82, b'a', b'b'], &[0xdf, 0xff], &[0xc3, 0xe8]]));
    }

    #[test]
    fn backlen_matches_redis_boundaries() {
        for (len, bytes) in [(127, vec![127]), (128, vec![1, 0x80]), (16_382, vec![127, 0xfe]), (16_383, vec![0, 0xff, 0xff])] {
            let mut out = Vec::new();
            put_backlen(&mut out, len);
            assert_eq!(out, bytes, "len {len}");
        }
    }

    #[test]
    fn listpack_corruption_is_an_error() {
        let good = lp(&[&[0x83, b'a', b'b', b'c']]);
        assert!(listpack(&good).is_ok());
        for cut in 0..good.len() {
            assert!(listpack(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = good.clone();
        bad[6] = 0x8f; // string longer than the blob
        assert!(listpack(&bad).is_err());
        let mut bad = good.clone();
        bad[4] = 9; // wrong count
        assert!(listpack(&bad).is_err());
    }

    #[test]
    fn ziplist_every_encoding() {
        // header (zlbytes, zltail, zllen), entries with prevlen, end.
        let entries: Vec<Vec<u8>> = vec![
            vec![0, 0x03, b'f', b'o', b'o'],
            vec![5, 0xfe, 0x80],             // int8 -128
            vec![3, 0xf1],                   // imm 0
            vec![2, 0xfd],                   // imm 12
            vec![2, 0xc0, 0xff, 0x7f],       // int16
            vec![4, 0xf0, 0x00, 0x00, 0x80], // int24 min
            vec![5, 0xd0, 1, 0, 0, 0],       // int32
            vec![6, 0xe0, 2, 0, 0, 0, 0, 0, 0, 0],
            vec![10, 0x40, 0x02, b'h', b'i'], // 14-bit string
        ];
        let body: Vec<u8> = entries.concat();
        let total = 10 + body.len() + 1;
        let tail = 10 + body.len() - entries.last().map_or(0, Vec::len);
        let mut b = (total as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&(tail as u32).to_le_bytes());
        b.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        b.extend_from_slice(&body);
        b.push(0xff);
        assert_eq!(
            ziplist(&b).unwrap(),
            vec![
                Elem::Str(b"foo"),
                Elem::Int(-128),
                Elem::Int(0),
                Elem::Int(12),
                Elem::Int(32767),
                Elem::Int(-8_388_608),
                Elem::Int(1),
                Elem::Int(2),
                Elem::Str(b"hi"),
            ]
        );
        for cut in 0..b.len() {
            assert!(ziplist(&b[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn intset_widths_and_order() {
        let mut b = 2u32.to_le_bytes().to_vec();
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&(-5i16).to_le_bytes());
        b.extend_from_slice(&7i16.to_le_bytes());
        assert_eq!(intset(&b).unwrap(), vec![-5, 7]);
        let mut unsorted = b.clone();
        unsorted[8..].copy_from_slice(&[7, 0, 0xfb, 0xff]);
        assert!(intset(&unsorted).is_err());
        assert!(intset(&b[..11]).is_err());
        let mut wide = 3u32.to_le_bytes().to_vec();
        wide.extend_from_slice(&0u32.to_le_bytes());
        assert!(intset(&wide).is_err());
    }
}
