//! RDB's building blocks, shared by every part of the codec: the error,
//! the value type bytes, the version, the length and string encodings,
//! and `Reader`, a bounds-checked cursor that reads them.
//!
//! Kept in a file of their own so that the parts that use them (mod.rs for
//! plain values, `stream`, `functions`, `packed` for the error) import
//! them from here and mod.rs imports those parts, one way: when they lived
//! in mod.rs, mod.rs and each part imported each other.

use super::lzf;

/// A payload or file that is not valid RDB, with what was found wrong
/// when a layer knows it (Redis's words where it logs the same problem,
/// e.g. "Ziplist integrity check failed", which tools and tests grep for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdbError {
    /// What is wrong; empty when nothing more than "invalid" is known.
    pub reason: &'static str,
}

impl RdbError {
    /// Invalid, no more said (a length past the end, a bad tag...).
    pub const BAD: RdbError = RdbError { reason: "" };

    /// A well-formed collection with no element: Redis never writes one,
    /// RESTORE refuses it and a file load skips the key.
    pub const EMPTY: RdbError = RdbError { reason: "empty key" };

    /// A hash whose every field is due at `now` (a file load reads fields
    /// with no "now", so only a RESTORE payload meets this).
    pub const ALL_EXPIRED: RdbError = RdbError { reason: "all hash fields expired" };

    /// An error saying `reason`.
    pub const fn because(reason: &'static str) -> RdbError {
        RdbError { reason }
    }

    /// This error, or one saying `reason` if it says nothing yet: an outer
    /// layer names the structure an inner layer's bare failure was in.
    pub fn or(self, reason: &'static str) -> RdbError {
        if self.reason.is_empty() {
            RdbError { reason }
        } else {
            self
        }
    }
}

impl std::fmt::Display for RdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.reason.is_empty() { "invalid RDB data" } else { self.reason })
    }
}

/// RDB value type bytes.
pub(super) mod ty {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    pub const HASH_METADATA: u8 = 24;
    pub const HASH_LISTPACK_EX: u8 = 25;
    /// densekv's own: a set with member TTLs (Redis refuses the type).
    pub const SET_TTL: u8 = 224;
    /// densekv's own: a sorted set with member TTLs.
    pub const ZSET_TTL: u8 = 225;
}

/// The newest RDB version this codec reads (Redis 7.4 and 8 write 12).
pub const RDB_VERSION: u16 = 12;

// ------------------------------------------------------------------ writing

/// Appends a length in RDB's variable-width encoding.
pub(super) fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends a string as an RDB length and its bytes.
pub(super) fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

// ------------------------------------------------------------------ reading

/// A cursor over RDB bytes.
pub struct Reader<'a> {
    pub(super) b: &'a [u8],
    /// Offset of the next byte to read.
    pub(super) pos: usize,
}

/// A length field: a count, or the marker of a specially encoded string.
enum Len {
    Count(u64),
    Special(u8),
}

impl<'a> Reader<'a> {
    /// A reader at the start of `b`.
    pub fn new(b: &'a [u8]) -> Self {
        Reader { b, pos: 0 }
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let end = self.pos.checked_add(n).ok_or(RdbError::BAD)?;
        let s = self.b.get(self.pos..end).ok_or(RdbError::BAD)?;
        self.pos = end;
        Ok(s)
    }

    pub(super) fn u8(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn raw_len(&mut self) -> Result<Len, RdbError> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => Len::Count((b & 0x3f) as u64),
            1 => Len::Count((((b & 0x3f) as u64) << 8) | self.u8()? as u64),
            2 if b == 0x80 => Len::Count(u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")) as u64),
            2 if b == 0x81 => Len::Count(u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes"))),
            3 => Len::Special(b & 0x3f),
            _ => return Err(RdbError::BAD),
        })
    }

    pub(super) fn len(&mut self) -> Result<u64, RdbError> {
        match self.raw_len()? {
            Len::Count(n) => Ok(n),
            Len::Special(_) => Err(RdbError::BAD),
        }
    }

    /// A count of elements, each taking at least `min_bytes` bytes: larger
    /// than the bytes left means corruption (and caps any reservation).
    pub(super) fn count(&mut self, min_bytes: usize) -> Result<usize, RdbError> {
        let n = self.len()?;
        let left = (self.b.len() - self.pos) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return Err(RdbError::BAD);
        }
        Ok(n as usize)
    }

    /// A string in any of its encodings.
    pub(super) fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.raw_len()? {
            Len::Count(n) => Ok(self.take(usize::try_from(n).map_err(|_| RdbError::BAD)?)?.to_vec()),
            Len::Special(0) => Ok((self.u8()? as i8).to_string().into_bytes()),
            Len::Special(1) => Ok(i16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")).to_string().into_bytes()),
            Len::Special(2) => Ok(i32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")).to_string().into_bytes()),
            Len::Special(3) => {
                let clen = usize::try_from(self.len()?).map_err(|_| RdbError::BAD)?;
                let ulen = usize::try_from(self.len()?).map_err(|_| RdbError::BAD)?;
                let data = self.take(clen)?;
                // LZF expands at most about 256x, which bounds the allocation.
                if ulen > clen.saturating_mul(256).saturating_add(64) {
                    return Err(RdbError::BAD);
                }
                lzf::decompress(data, ulen).ok_or(RdbError::BAD)
            }
            Len::Special(_) => Err(RdbError::BAD),
        }
    }

    pub(super) fn millis(&mut self) -> Result<i64, RdbError> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    pub(super) fn binary_double(&mut self) -> Result<f64, RdbError> {
        let v = f64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
        if v.is_nan() {
            return Err(RdbError::BAD);
        }
        Ok(v)
    }

    /// The old textual double: a length byte (253 NaN, 254 +inf, 255 -inf).
    pub(super) fn text_double(&mut self) -> Result<f64, RdbError> {
        match self.u8()? {
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            253 => Err(RdbError::BAD),
            n => parse_score(self.take(n as usize)?),
        }
    }
}

/// A score as Redis prints it ("inf", "-inf", decimal); NaN is an error.
pub(super) fn parse_score(s: &[u8]) -> Result<f64, RdbError> {
    let s = std::str::from_utf8(s).map_err(|_| RdbError::BAD)?;
    let v = match s {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => s.parse::<f64>().map_err(|_| RdbError::BAD)?,
    };
    if v.is_nan() {
        return Err(RdbError::BAD);
    }
    Ok(v)
}
