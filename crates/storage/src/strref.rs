//! Strings as the keyspace hands them out, and the integer rules they follow.
//!
//! `StrRef` is either an integer or raw bytes: a string whose bytes are the
//! canonical decimal form of an i64 (`parse_canonical_i64`) is kept as that
//! integer, in the keyspace and in every compact encoding, and `int_len`
//! gives its length without formatting it.
//!
//! This is a leaf module: it imports nothing from the crate, so encodings and
//! collection types can use it without depending on `value` (which holds
//! the collection types and so sits above them).

/// Parses `s` only if it is exactly how Redis would print the integer.
pub fn parse_canonical_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = (c - b'0') as i64;
        v = v.checked_mul(10)?;
        v = if neg { v.checked_sub(d)? } else { v.checked_add(d)? };
    }
    Some(v)
}

/// A borrowed string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrRef<'a> {
    /// Stored as an integer.
    Int(i64),
    /// Stored as bytes.
    Bytes(&'a [u8]),
}

impl StrRef<'_> {
    /// The string's bytes (integers are formatted).
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            StrRef::Int(v) => v.to_string().into_bytes(),
            StrRef::Bytes(b) => b.to_vec(),
        }
    }

    /// The string's length in bytes.
    pub fn len(&self) -> usize {
        match self {
            StrRef::Int(v) => int_len(*v),
            StrRef::Bytes(b) => b.len(),
        }
    }

    /// True for the empty string.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Number of bytes in the decimal form of `v`.
pub fn int_len(v: i64) -> usize {
    let mut n = if v < 0 { 2 } else { 1 };
    let mut u = v.unsigned_abs();
    while u >= 10 {
        u /= 10;
        n += 1;
    }
    n
}
