//! The command table and what every handler shares.
//!
//! Each family file exports `table() -> Vec<Spec>`: one row per command with
//! its name, arity (negative: at least), flags, key positions, ACL categories
//! and handler. `registry()` joins them; dispatch (`exec.rs`), COMMAND, ACL
//! categories and key extraction all read that one table.
//!
//! Handlers receive the whole argv (argv[0] is the command name), write their
//! reply through `ctx.out()` and return `Err(CmdError)` *before* writing
//! anything when the command fails, so the error is the only reply.

pub mod bitops;
pub mod connection;
pub mod introspection;
pub mod keys;
pub mod server;
pub mod string;
pub mod transaction;

use std::collections::HashMap;
use std::rc::Rc;

use resp::Reply;
use storage::{Db, Value, ValueRef};

use crate::client::Client;
use crate::server::Server;

/// A command handler.
pub type Handler = fn(&mut Ctx, &[Vec<u8>]) -> Result<(), CmdError>;

/// Command flags, as COMMAND INFO names them.
pub mod flags {
    /// May modify data.
    pub const WRITE: u32 = 1 << 0;
    /// Never modifies data.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory: refused when over maxmemory.
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative.
    pub const ADMIN: u32 = 1 << 3;
    /// Pub/sub related.
    pub const PUBSUB: u32 = 1 << 4;
    /// Not allowed in scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// Allowed while loading.
    pub const LOADING: u32 = 1 << 6;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 7;
    /// Not shown to MONITOR.
    pub const SKIP_MONITOR: u32 = 1 << 8;
    /// Not recorded in the slow log.
    pub const SKIP_SLOWLOG: u32 = 1 << 9;
    /// O(1) or O(log n).
    pub const FAST: u32 = 1 << 10;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 11;
    /// May replicate.
    pub const MAY_REPLICATE: u32 = 1 << 12;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 13;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u32 = 1 << 14;
    /// Blocks the client.
    pub const BLOCKING: u32 = 1 << 15;
    /// Runs even when clients are paused (CLIENT PAUSE ALL pauses it still).
    pub const NO_PAUSE_WRITE: u32 = 1 << 16;

    /// Names in COMMAND INFO order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Key positions: first, last (negative counts from the end), step. (0,0,0): no keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys {
    /// Index of the first key.
    pub first: i32,
    /// Index of the last key; -1 is the last argument.
    pub last: i32,
    /// Distance between keys.
    pub step: i32,
}

/// Key positions helper.
pub const fn keys(first: i32, last: i32, step: i32) -> Keys {
    Keys { first, last, step }
}

/// No key arguments.
pub const NO_KEYS: Keys = keys(0, 0, 0);

/// One command (or subcommand) of the table.
#[derive(Clone)]
pub struct Spec {
    /// Lowercase name; subcommands use their own word (e.g. "get").
    pub name: &'static str,
    /// Name as stats and errors show it: `get`, or `config|get` for a
    /// subcommand. Set by `registry`.
    pub full_name: &'static str,
    /// Argument count including the name; negative means at least -arity.
    pub arity: i32,
    /// `flags::*` bits.
    pub flags: u32,
    /// Key positions.
    pub keys: Keys,
    /// ACL categories, without '@'.
    pub acl: &'static [&'static str],
    /// Command group for COMMAND DOCS (string, keyspace, server, ...).
    pub group: &'static str,
    /// One-line summary for COMMAND DOCS.
    pub summary: &'static str,
    /// Version that introduced it.
    pub since: &'static str,
    /// Handler; container commands dispatch to `subcommands` instead.
    pub handler: Handler,
    /// Subcommands (CONFIG GET, CLIENT LIST, ...).
    pub subcommands: Vec<Spec>,
    /// Key extraction for commands whose keys move with their arguments
    /// (`numkeys` forms: ZUNION, ZMPOP, ...); COMMAND shows them as
    /// "movablekeys". Given the whole argv, returns key positions.
    pub getkeys: Option<fn(&[Vec<u8>]) -> Vec<usize>>,
}

fn container_handler(_: &mut Ctx, _: &[Vec<u8>]) -> Result<(), CmdError> {
    Err(CmdError::Custom("ERR container command called without subcommand".into()))
}

/// A table row.
pub fn spec(name: &'static str, arity: i32, flags: u32, keys: Keys, handler: Handler) -> Spec {
    Spec { name, full_name: name, arity, flags, keys, acl: &[], group: "generic", summary: "", since: "1.0.0", handler, subcommands: Vec::new(), getkeys: None }
}

/// A container command whose work is done by its subcommands.
pub fn container(name: &'static str, subcommands: Vec<Spec>) -> Spec {
    Spec {
        name,
        full_name: name,
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &[],
        group: "server",
        summary: "",
        since: "1.0.0",
        handler: container_handler,
        subcommands,
        getkeys: None,
    }
}

impl Spec {
    /// Sets the ACL categories.
    pub fn acl(mut self, acl: &'static [&'static str]) -> Spec {
        self.acl = acl;
        self
    }

    /// Sets the command group.
    pub fn group(mut self, g: &'static str) -> Spec {
        self.group = g;
        self
    }

    /// Sets the summary and the version that introduced the command.
    pub fn doc(mut self, summary: &'static str, since: &'static str) -> Spec {
        self.summary = summary;
        self.since = since;
        self
    }

    /// Sets the key extraction of a movablekeys command.
    pub fn getkeys(mut self, f: fn(&[Vec<u8>]) -> Vec<usize>) -> Spec {
        self.getkeys = Some(f);
        self
    }

    /// Positions of the key arguments in `argv`: the movablekeys hook when
    /// set, else the (first, last, step) triple.
    pub fn keys_of(&self, argv: &[Vec<u8>]) -> Vec<usize> {
        match self.getkeys {
            Some(f) => f(argv),
            None => self.key_positions(argv.len()),
        }
    }

    /// True if a flag bit is set.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// True if `argc` arguments satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a > 0 && argc as i32 == a) || (a < 0 && argc as i32 >= -a)
    }

    /// Finds a subcommand by name (case-insensitive).
    pub fn subcommand(&self, name: &[u8]) -> Option<&Spec> {
        self.subcommands.iter().find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// Positions of the key arguments in `argv` according to `keys`.
    pub fn key_positions(&self, argc: usize) -> Vec<usize> {
        let k = self.keys;
        if k.first <= 0 {
            return Vec::new();
        }
        let last = if k.last < 0 { argc as i32 + k.last } else { k.last };
        let mut out = Vec::new();
        let mut i = k.first;
        while i <= last && (i as usize) < argc {
            out.push(i as usize);
            i += k.step.max(1);
        }
        out
    }
}

/// The command table: lowercase name -> spec. Shared behind an `Rc` so
/// dispatch can hold a spec while it mutates the server.
pub type CommandMap = Rc<HashMap<String, Spec, rustc_hash::FxBuildHasher>>;

/// All commands, keyed by lowercase name.
pub fn registry() -> CommandMap {
    let mut all = Vec::new();
    all.extend(bitops::table());
    all.extend(connection::table());
    all.extend(introspection::table());
    all.extend(keys::table());
    all.extend(server::table());
    all.extend(string::table());
    all.extend(transaction::table());
    let mut map = HashMap::default();
    for mut s in all {
        for sub in &mut s.subcommands {
            // Leaked once per table build: names live as long as the table.
            sub.full_name = Box::leak(format!("{}|{}", s.name, sub.name).into_boxed_str());
        }
        let name = s.name.to_string();
        assert!(map.insert(name.clone(), s).is_none(), "command {name} registered twice");
    }
    Rc::new(map)
}

/// A command failure, rendered to wire text in one place (`message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    /// WRONGTYPE.
    WrongType,
    /// ERR syntax error.
    Syntax,
    /// ERR value is not an integer or out of range.
    NotInt,
    /// ERR value is not a valid float.
    NotFloat,
    /// ERR increment or decrement would overflow.
    Overflow,
    /// ERR no such key.
    NoSuchKey,
    /// ERR DB index is out of range.
    DbIndex,
    /// ERR wrong number of arguments for '<name>' command.
    Arity(String),
    /// Any other error; the full text after '-', with its code (ERR, NOPERM, ...).
    Custom(String),
}

impl CmdError {
    /// The error line without '-' and CRLF.
    pub fn message(&self) -> String {
        match self {
            CmdError::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            CmdError::Syntax => "ERR syntax error".into(),
            CmdError::NotInt => "ERR value is not an integer or out of range".into(),
            CmdError::NotFloat => "ERR value is not a valid float".into(),
            CmdError::Overflow => "ERR increment or decrement would overflow".into(),
            CmdError::NoSuchKey => "ERR no such key".into(),
            CmdError::DbIndex => "ERR DB index is out of range".into(),
            CmdError::Arity(name) => format!("ERR wrong number of arguments for '{name}' command"),
            CmdError::Custom(s) => s.clone(),
        }
    }

    /// An `ERR ...` error.
    pub fn err(msg: impl Into<String>) -> CmdError {
        CmdError::Custom(format!("ERR {}", msg.into()))
    }
}

/// Result of a handler.
pub type CmdResult = Result<(), CmdError>;

/// What a handler sees: the server, the calling client, and the time.
pub struct Ctx<'a> {
    /// Server state (databases, config, other clients, stats).
    pub srv: &'a mut Server,
    /// The client running the command.
    pub client: &'a mut Client,
    /// Command time in Unix milliseconds, fixed for the whole command.
    pub now: i64,
}

impl Ctx<'_> {
    /// The selected database.
    pub fn db(&mut self) -> &mut Db {
        &mut self.srv.dbs[self.client.db]
    }

    /// The reply buffer.
    pub fn out(&mut self) -> &mut Reply {
        &mut self.client.reply
    }

    /// The epilogue of every write: invalidates WATCH, counts the change.
    pub fn key_modified(&mut self, key: &[u8]) {
        self.srv.dirty += 1;
        let db = self.client.db;
        self.srv.touch_watched(db, key, self.client);
    }

    /// Reads a key expected to hold a string; WrongType otherwise.
    pub fn get_str(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
        let now = self.now;
        match self.db().get(key, now) {
            None => Ok(None),
            Some(ValueRef::Str(s)) => Ok(Some(s.to_vec())),
            #[allow(unreachable_patterns)]
            Some(_) => Err(CmdError::WrongType),
        }
    }

    /// Stores `value` under `key` with `ttl` and signals the change.
    pub fn set_value(&mut self, key: &[u8], value: Value, ttl: storage::Ttl) {
        let now = self.now;
        self.db().insert(key, value, ttl, now);
        self.key_modified(key);
    }
}

/// Parses an integer argument; NotInt on failure.
pub fn arg_i64(a: &[u8]) -> Result<i64, CmdError> {
    resp::num::parse_i64(a).ok_or(CmdError::NotInt)
}

/// Parses a float argument; NotFloat on failure.
pub fn arg_f64(a: &[u8]) -> Result<f64, CmdError> {
    resp::num::parse_f64(a).ok_or(CmdError::NotFloat)
}

/// Case-insensitive comparison of an argument with an ASCII word.
pub fn is(a: &[u8], word: &str) -> bool {
    a.eq_ignore_ascii_case(word.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let reg = registry();
        for (name, s) in reg.iter() {
            assert_eq!(name, &name.to_ascii_lowercase());
            assert!(!(s.has(flags::WRITE) && s.has(flags::READONLY)), "{name}: WRITE and READONLY");
            assert!(s.arity != 0, "{name}: arity 0");
            let mut seen = std::collections::HashSet::new();
            for sub in &s.subcommands {
                assert!(seen.insert(sub.name), "{name}|{} twice", sub.name);
                assert!(!(sub.has(flags::WRITE) && sub.has(flags::READONLY)));
            }
        }
    }
}
