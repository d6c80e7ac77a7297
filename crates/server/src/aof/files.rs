//! Where the AOF's files are: the directory (`dir` + `appenddirname`),
//! the names built on `appendfilename`, and the log the AOF writes to.

use std::path::PathBuf;

use crate::log::Log;
use crate::server::Server;

/// The directory the AOF lives in: `dir` joined with `appenddirname`.
pub fn aof_dir(srv: &Server) -> PathBuf {
    base_dir(srv).join(srv.config.get("appenddirname").unwrap_or("appendonlydir"))
}

/// `dir`, where an old single-file AOF lives.
pub fn base_dir(srv: &Server) -> PathBuf {
    PathBuf::from(srv.config.get("dir").filter(|d| !d.is_empty()).unwrap_or("."))
}

/// `appendfilename`.
pub fn file_name(srv: &Server) -> String {
    srv.config.get("appendfilename").unwrap_or("appendonly.aof").to_string()
}

/// The server's log.
pub fn log(srv: &Server) -> Log {
    srv.config.log.clone()
}

/// Redis's strerror text for an I/O error.
pub fn errno_text(e: &std::io::Error) -> String {
    crate::config::strerror(e)
}

/// `appenddirname`.
pub fn dir_name(srv: &Server) -> String {
    srv.config.get("appenddirname").unwrap_or("appendonlydir").to_string()
}

/// A failure whose reason was already logged, with Redis's lines; the
/// caller only decides what follows (exit at start-up, an error reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logged;

impl From<()> for Logged {
    fn from((): ()) -> Logged {
        Logged
    }
}
