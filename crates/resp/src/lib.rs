//! RESP: the Redis serialization protocol, both directions.
//!
//! `parse` turns request bytes into argument vectors (multibulk and inline
//! forms, resumable across reads); `write` renders replies for RESP2 or RESP3
//! clients from one set of calls, so command code never looks at the protocol
//! version. This crate knows nothing of commands, keys or sockets.

pub mod dtoa;
pub mod num;
pub mod parse;
pub mod spare;
pub mod write;

pub use parse::{Limits, Parsed, Parser, ProtocolError};
pub use write::Reply;
