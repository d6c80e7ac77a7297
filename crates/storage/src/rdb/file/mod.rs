//! RDB files: the snapshot format SAVE and BGSAVE write and a starting
//! server loads, on top of the value layer in `rdb`.
//!
//! ```text
//! "REDIS" <version, 4 ASCII digits>
//! ( AUX <key> <value> )*                        metadata: redis-ver, ctime ...
//! ( FUNCTION2 <library code> )*                 Redis 7.0+ function libraries
//! ( SELECTDB <index> [RESIZEDB <keys> <expires>]
//!   ( [EXPIRETIME_MS <i64 LE> | EXPIRETIME <i32 LE, seconds>]
//!     [IDLE <len> | FREQ <u8>]
//!     <value type> <key> <value body> )* )*
//! EOF <CRC-64 of everything before it, u64 LE; 0 when checksums are off>
//! ```
//!
//! Strings and lengths use the value layer's encodings. Opcodes share the
//! byte space with value types: 244 and up are opcodes, below are types.
//! `writer` writes files a key at a time with no reference to the
//! keyspace, so a save can be spread over many event-loop turns; `loader`
//! reads a whole file from memory into callbacks, or into databases.
//!
//! Versions: a file's header version is the newest layout it may hold.
//! Redis 7.0 loads up to 10, 7.2 up to 11, 7.4 and 8 up to 12. The writer
//! is told its version up front (the header is written first) and refuses
//! a value that needs a newer one; `value_version` and `min_file_version`
//! pick the lowest version that holds given data.

mod loader;
mod writer;

pub use loader::{load, load_into, load_reader, LoadOptions, LoadSummary, Loaded, LoadedEntry, RdbVisitor};
pub use writer::{min_file_version, value_version, RdbWriteError, RdbWriter, WriteOptions};

use std::fmt;

/// File-level opcodes (the bytes that are not value types).
mod op {
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
mod module_ty {
    pub const PRE_GA: u8 = 6;
    pub const V2: u8 = 7;
}

/// The file magic.
const MAGIC: &[u8; 5] = b"REDIS";
/// First version whose files end with a checksum.
const CHECKSUM_SINCE: u16 = 5;
/// First version with FUNCTION2 (Redis 7.0's own).
const FUNCTIONS_SINCE: u16 = 10;

/// An RDB file that could not be loaded, with the byte offset where the
/// problem was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbFileError {
    /// Offset from the start of the file.
    pub offset: usize,
    /// What is wrong there.
    pub message: String,
}

impl RdbFileError {
    fn new(offset: usize, message: impl Into<String>) -> Self {
        RdbFileError { offset, message: message.into() }
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
fn show(b: &[u8]) -> String {
    let mut s: String = b.iter().take(64).flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect();
    if b.len() > 64 {
        s.push_str("...");
    }
    s
}

/// A module type's name from its 64-bit id: nine characters of 6 bits
/// each from the top, then 10 bits of encoding version.
fn module_name(id: u64) -> String {
    const CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    (0..9).map(|i| CHARS[((id >> (58 - 6 * i)) & 63) as usize] as char).collect()
}

#[cfg(test)]
mod tests;
