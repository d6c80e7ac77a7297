//! Big-endian field access for the other files: a checked cursor for
//! reading bodies, and fixed-offset reads and writes for the header.
//!
//! Every read here is checked, so a length computed wrongly elsewhere turns
//! into a `DecodeError::Malformed`, never an out-of-bounds panic. The callers
//! check lengths first anyway (each body's expected totlen), which is what
//! makes those errors say something useful; these checks are the floor.

use crate::DecodeError;

/// A cursor over the bytes of a body that reads fields in order.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The next `n` bytes; `what` names the field for the error.
    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let (head, tail) = self.rest.split_at_checked(n).ok_or(DecodeError::Malformed(what))?;
        self.rest = tail;
        Ok(head)
    }

    pub(crate) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let b = self.bytes(N, what)?;
        let mut a = [0; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }
}

/// The `N` bytes at `at` of a slice known to hold them (the header, whose
/// length is checked once before any field is read).
pub(crate) fn get<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(get(b, at))
}

pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(get(b, at))
}

pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(get(b, at))
}

/// Writes `v` at `at` of a buffer already long enough.
pub(crate) fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

/// The text of a NUL-padded field: the bytes before the first NUL, looking
/// at no more than `max` bytes (Redis forces the last byte of an IP field
/// to NUL before using it, so a field with no NUL keeps `max` bytes).
pub(crate) fn text_before_nul(b: &[u8], max: usize) -> &[u8] {
    let b = &b[..b.len().min(max)];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_reads_in_order_and_stops_at_the_end() {
        let mut r = Reader::new(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]);
        assert_eq!(r.u8("a"), Ok(1));
        assert_eq!(r.u16("b"), Ok(0x0203));
        assert_eq!(r.u32("c"), Ok(0x0405_0607));
        assert_eq!(r.u64("d"), Ok(0x0809_0a0b_0c0d_0e0f));
        assert_eq!(r.remaining(), 2);
        assert_eq!(r.u32("e"), Err(DecodeError::Malformed("e")));
        // A failed read consumes nothing.
        assert_eq!(r.bytes(2, "f"), Ok(&[16, 17][..]));
        assert_eq!(r.bytes(1, "g"), Err(DecodeError::Malformed("g")));
        assert_eq!(r.bytes(0, "h"), Ok(&[][..]));
    }

    #[test]
    fn text_stops_at_the_first_nul_or_the_limit() {
        assert_eq!(text_before_nul(b"127.0.0.1\0\0\0", 45), b"127.0.0.1");
        assert_eq!(text_before_nul(b"ab\0cd", 45), b"ab");
        assert_eq!(text_before_nul(b"\0abc", 45), b"");
        assert_eq!(text_before_nul(&[b'x'; 46], 45), &[b'x'; 45][..]);
        assert_eq!(text_before_nul(b"", 45), b"");
    }

    #[test]
    fn fixed_offsets_are_big_endian() {
        let mut b = [0u8; 16];
        put(&mut b, 1, &0x0102u16.to_be_bytes());
        put(&mut b, 3, &0x0304_0506u32.to_be_bytes());
        put(&mut b, 7, &0x0708_090a_0b0c_0d0eu64.to_be_bytes());
        assert_eq!(b, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0]);
        assert_eq!(get_u16(&b, 1), 0x0102);
        assert_eq!(get_u32(&b, 3), 0x0304_0506);
        assert_eq!(get_u64(&b, 7), 0x0708_090a_0b0c_0d0e);
    }
}
