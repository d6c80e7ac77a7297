//! The append-only file's lower half: its formats and its running state,
//! with no server state and no command execution, so the server state can
//! hold the AOF and the tools can read its files without the layers that
//! load and rewrite it (`aof/`).
//!
//! `manifest` and `reader` are the file formats (bytes in, no state);
//! `check` is redis-check-aof on top of them; `state` is the sink on the
//! write stream, its buffer, the open file and the fsync thread.

pub mod check;
pub mod manifest;
pub mod reader;
pub mod state;
