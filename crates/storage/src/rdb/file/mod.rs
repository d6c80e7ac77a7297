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

mod format;
mod loader;
mod writer;

pub use loader::{load, load_into, load_into_with, load_reader, LoadOptions, LoadSummary, Loaded, LoadedEntry, RdbVisitor};
pub use format::RdbFileError;
pub use writer::{compress_deferred, min_file_version, sealed, value_version, Deferred, RdbWriteError, RdbWriter, WriteOptions, HEADER_LEN};

#[cfg(test)]
mod tests;
