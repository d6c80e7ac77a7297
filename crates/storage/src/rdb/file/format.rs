//! The file format's vocabulary: opcodes, magic, the versions features
//! arrived in, and the error a bad file is refused with (naming its
//! offset). Shared by the writer and the loader.

use std::fmt;

/// File-level opcodes (the bytes that are not value types).
pub(super) mod op {
    /// Cluster slot sizes (Redis 7.4+ in cluster mode): three lengths.
    pub const SLOT_INFO: u8 = 244;
    /// One function library: its code as a string (Redis 7.0 GA and later).
    pub const FUNCTION2: u8 = 245;
    /// Redis 7.0's release candidates' function layout.
    pub const FUNCTION_PRE_GA: u8 = 246;
    /// Data a module saves outside any key.
    pub const MODULE_AUX: u8 = 247;
    /// The next key's LRU idle time in seconds (a length).
    pub const IDLE: u8 = 248;
    /// The next key's LFU counter (one byte).
    pub const FREQ: u8 = 249;
    /// A metadata key/value pair.
    pub const AUX: u8 = 250;
    /// Key and expire counts of the current database, as a sizing hint.
    pub const RESIZEDB: u8 = 251;
    /// The next key's deadline, Unix milliseconds (8 bytes LE).
    pub const EXPIRETIME_MS: u8 = 252;
    /// The next key's deadline, Unix seconds (4 bytes LE; old files).
    pub const EXPIRETIME: u8 = 253;
    /// The database the following keys belong to.
    pub const SELECTDB: u8 = 254;
    /// End of data; the checksum follows.
    pub const EOF: u8 = 255;
}

/// Value types for module data (densekv loads no modules).
pub(super) mod module_ty {
    pub const PRE_GA: u8 = 6;
    pub const V2: u8 = 7;
}

/// The file magic.
pub(super) const MAGIC: &[u8; 5] = b"REDIS";
/// First version whose files end with a checksum.
pub(super) const CHECKSUM_SINCE: u16 = 5;
/// First version with FUNCTION2 (Redis 7.0's own).
pub(super) const FUNCTIONS_SINCE: u16 = 10;

/// An RDB file that could not be loaded, with the byte offset where the
/// problem was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbFileError {
    /// Offset from the start of the file.
    pub offset: usize,
    /// What is wrong there.
    pub message: String,
    /// For a checksum mismatch: the checksum of the file's bytes and the
    /// one it stores (Redis logs both before "RDB CRC error").
    pub crc_mismatch: Option<(u64, u64)>,
}

impl RdbFileError {
    pub(super) fn new(offset: usize, message: impl Into<String>) -> Self {
        RdbFileError { offset, message: message.into(), crc_mismatch: None }
    }
}

impl fmt::Display for RdbFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bad file format reading the RDB at offset {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for RdbFileError {}

/// A key or name for an error message: printable ASCII as is, other bytes
/// escaped, long ones cut.
pub(super) fn show(b: &[u8]) -> String {
    let mut s: String = b.iter().take(64).flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect();
    if b.len() > 64 {
        s.push_str("...");
    }
    s
}

/// A module type's name from its 64-bit id: nine characters of 6 bits
/// each from the top, then 10 bits of encoding version.
pub(super) fn module_name(id: u64) -> String {
    const CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    (0..9).map(|i| CHARS[((id >> (58 - 6 * i)) & 63) as usize] as char).collect()
}

