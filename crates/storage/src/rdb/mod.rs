//! Values in Redis's RDB format: the serialization DUMP produces and
//! RESTORE consumes, and the value layer of RDB files.
//!
//! Writing uses the plain layouts every Redis since 2.x loads (string, list
//! and set as counted strings, sorted set with binary doubles, hash as
//! field/value pairs), plus Redis 7.4's hash-with-field-TTL layout when a
//! field has a deadline; the payload carries the lowest RDB version that
//! has the layout used, so Redis 7.0 restores what densekv dumps unless it
//! holds field TTLs, which 7.0 cannot represent. Streams use Redis 7's
//! listpack layouts (see `stream`), again at the lowest version that holds
//! what the stream carries.
//! Sets and sorted sets with member TTLs (a densekv extension) use
//! densekv's own type bytes 224 and 225, shaped like HASH_METADATA (the
//! earliest deadline, then each member's TTL relative to it plus one, 0 for
//! none): Redis refuses them as an unknown type instead of loading them
//! without their TTLs; without member TTLs the plain layouts are written.
//!
//! Reading accepts everything Redis 7.x and 8 write for strings, lists,
//! sets, sorted sets, hashes and streams: integer and LZF-compressed
//! strings, ziplists, listpacks, intsets, quicklists, both hash-with-TTL
//! layouts, and the three stream layouts. Every length is checked against the bytes left and nothing is
//! allocated from a declared count, so a corrupt or hostile payload is an
//! error (`RdbError`), never a panic or a huge allocation; duplicate
//! members are errors too, as with Redis's sanitize-dump-payload.
//!
//! Files, bottom up: `crc64` and `lzf`; `primitives` (the error, type
//! bytes, lengths, strings and `Reader`, which every part uses); `packed`
//! (ziplist, listpack and intset blobs); `stream` and `functions`; then
//! `value`: plain values, DUMP payloads and the dispatch on type bytes.
//! Each file imports only files before it; this one only re-exports.
//! Whole RDB files (header, opcodes, databases, checksum) are in `file`,
//! built on this layer; `lzf_compress` serves its `rdbcompression`.

mod crc64;
mod file;
mod functions;
mod lzf;
mod lzf_compress;
mod packed;
mod primitives;
mod stream;
mod value;

pub use crc64::crc64;
pub use file::{
    load, load_into, load_into_with, load_reader, min_file_version, value_version, LoadOptions, LoadSummary, Loaded, LoadedEntry, RdbFileError, RdbVisitor,
    RdbWriteError, RdbWriter, WriteOptions, sealed, compress_deferred, Deferred, HEADER_LEN,
};
pub use functions::{function_codes, function_payload};
pub use primitives::{RdbError, Reader, RDB_VERSION};

pub use value::*;
