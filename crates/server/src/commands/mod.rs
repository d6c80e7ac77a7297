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
pub mod dump;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod introspection;
pub mod keys;
pub mod list;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod transaction;
pub mod zset;

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
    /// Key positions depend on the arguments (ZUNIONSTORE's numkeys, SORT's
    /// STORE). Never set by hand: `registry` derives it from `Spec::getkeys`
    /// and `Spec::key_specs`, as Redis derives it from its key specs.
    pub const MOVABLE_KEYS: u32 = 1 << 17;
    /// Valid with zero keys (EVAL with numkeys 0): COMMAND GETKEYS answers an
    /// empty array instead of an error.
    pub const NO_MANDATORY_KEYS: u32 = 1 << 18;

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
        // may_replicate is hidden from COMMAND INFO, as in Redis.
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
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

/// Access flags of a key argument, as COMMAND INFO and COMMAND
/// GETKEYSANDFLAGS name them: one of RW/RO/OW/RM, then lowercase details
/// (access, update, insert, delete, not_key, incomplete, variable_flags).
pub type KeyFlags = &'static [&'static str];

/// Common key flag sets.
pub mod kf {
    use super::KeyFlags;
    /// Read only, the value is returned or used.
    pub const RO_ACCESS: KeyFlags = &["RO", "access"];
    /// Read and modified in place.
    pub const RW_UPDATE: KeyFlags = &["RW", "update"];
    /// Read, returned and modified (GETSET, LPOP...).
    pub const RW_ACCESS_UPDATE: KeyFlags = &["RW", "access", "update"];
    /// Read, returned and possibly removed (LMOVE's source).
    pub const RW_ACCESS_DELETE: KeyFlags = &["RW", "access", "delete"];
    /// Elements are added (LMOVE's destination).
    pub const RW_INSERT: KeyFlags = &["RW", "insert"];
    /// Overwritten whatever it held (SET, a STORE destination).
    pub const OW_UPDATE: KeyFlags = &["OW", "update"];
    /// Removed (DEL).
    pub const RM_DELETE: KeyFlags = &["RM", "delete"];
}

/// Where a key spec starts looking for keys (Redis's `begin_search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// At this argument index.
    Index(i32),
    /// Just after `keyword`, searched from argument `startfrom` onwards, or
    /// backwards from the end when `startfrom` is negative.
    Keyword(&'static str, i32),
    /// Not expressible: `Spec::getkeys` finds these keys.
    Unknown,
}

/// How a key spec finds its keys from where it began (Redis's `find_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Find {
    /// `lastkey` (relative to the start; -1: the last argument), `keystep`,
    /// `limit` (when > 0 with lastkey -1: only the first 1/limit of the rest).
    Range { lastkey: i32, keystep: i32, limit: i32 },
    /// The key count is at `keynumidx` (relative to the start), the keys
    /// begin at `firstkey` (relative to the start), every `keystep`.
    Keynum { keynumidx: i32, firstkey: i32, keystep: i32 },
    /// Not expressible: `Spec::getkeys` finds these keys.
    Unknown,
}

/// One key spec: a group of key arguments sharing the same access flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    /// Access flags of these keys.
    pub flags: KeyFlags,
    /// Where the search starts.
    pub begin: Begin,
    /// How keys are found from there.
    pub find: Find,
}

/// A key spec over a fixed range: keys from `index` to `lastkey` (relative
/// to `index`, or -1 for the last argument), every `step`.
pub const fn range_spec(flags: KeyFlags, index: i32, lastkey: i32, step: i32) -> KeySpec {
    KeySpec {
        flags,
        begin: Begin::Index(index),
        find: Find::Range {
            lastkey,
            keystep: step,
            limit: 0,
        },
    }
}

/// Extracts keys where the key specs cannot (a spec with `Begin::Unknown`
/// or the `incomplete` flag, like SORT's STORE or MIGRATE's KEYS) or where
/// the flags depend on the arguments (`variable_flags`, like SET ... GET):
/// (argument index, flags) pairs, in order. Returning nothing means
/// "invalid arguments" unless the command has `NO_MANDATORY_KEYS`.
pub type KeysFn = fn(&[Vec<u8>]) -> Vec<(usize, KeyFlags)>;

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
    /// Legacy key positions (first, last, step), as COMMAND INFO shows them.
    pub keys: Keys,
    /// Key specs; empty means one range spec derived from `keys`.
    pub key_specs: Vec<KeySpec>,
    /// Key extraction for commands whose keys specs cannot express.
    pub getkeys: Option<KeysFn>,
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
}

fn container_handler(_: &mut Ctx, _: &[Vec<u8>]) -> Result<(), CmdError> {
    Err(CmdError::Custom("ERR container command called without subcommand".into()))
}

/// A table row.
pub fn spec(name: &'static str, arity: i32, flags: u32, keys: Keys, handler: Handler) -> Spec {
    Spec {
        name,
        full_name: name,
        arity,
        flags,
        keys,
        key_specs: Vec::new(),
        getkeys: None,
        acl: &[],
        group: "generic",
        summary: "",
        since: "1.0.0",
        handler,
        subcommands: Vec::new(),
    }
}

/// A container command whose work is done by its subcommands.
pub fn container(name: &'static str, subcommands: Vec<Spec>) -> Spec {
    Spec {
        name,
        full_name: name,
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        key_specs: Vec::new(),
        getkeys: None,
        acl: &[],
        group: "server",
        summary: "",
        since: "1.0.0",
        handler: container_handler,
        subcommands,
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

    /// Sets the key specs (keys with different access flags, keyword or
    /// numkeys driven keys). `keys` stays the legacy first/last/step.
    pub fn key_specs(mut self, specs: Vec<KeySpec>) -> Spec {
        self.key_specs = specs;
        self
    }

    /// Sets the key extraction function used when the key specs cannot
    /// answer (see `KeysFn`).
    pub fn getkeys(mut self, f: KeysFn) -> Spec {
        self.getkeys = Some(f);
        self
    }

    /// The key specs, the implicit one derived from `keys` included.
    pub fn effective_key_specs(&self) -> Vec<KeySpec> {
        if !self.key_specs.is_empty() || self.keys.first <= 0 {
            return self.key_specs.clone();
        }
        let k = self.keys;
        let lastkey = if k.last < 0 { k.last } else { k.last - k.first };
        let flags = if self.has(flags::WRITE) { kf::RW_UPDATE } else { kf::RO_ACCESS };
        vec![range_spec(flags, k.first, lastkey, k.step.max(1))]
    }

    /// True if the command takes key arguments at all.
    pub fn has_keys(&self) -> bool {
        self.keys.first > 0 || !self.key_specs.is_empty() || self.getkeys.is_some()
    }

    /// True if key positions depend on the arguments, by Redis's rule: some
    /// spec is not a plain index range, is incomplete, or several ranges do
    /// not join into one first/last/step-1 run.
    fn movable(&self) -> bool {
        let mut prev_last: Option<i32> = None;
        for k in &self.key_specs {
            if k.flags.contains(&"incomplete") {
                return true;
            }
            let (Begin::Index(i), Find::Range { lastkey, keystep, .. }) = (k.begin, k.find) else {
                return true;
            };
            if self.key_specs.len() > 1 && (keystep != 1 || prev_last.is_some_and(|p| p != i - 1)) {
                return true;
            }
            prev_last = Some(if lastkey >= 0 { i + lastkey } else { lastkey });
        }
        false
    }

    /// The key arguments of `argv` with their access flags: from the key
    /// specs when they answer, else from `getkeys`. Empty when the arguments
    /// do not fit (a bad numkeys, say).
    pub fn find_keys(&self, argv: &[Vec<u8>]) -> Vec<(usize, KeyFlags)> {
        let specs = self.effective_key_specs();
        let variable = specs.iter().any(|k| k.flags.contains(&"variable_flags"));
        if !specs.is_empty() && !variable {
            if let Some(keys) = keys_from_specs(&specs, argv) {
                return keys;
            }
        }
        self.getkeys.map(|f| f(argv)).unwrap_or_default()
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
}

/// Applies key specs to `argv` as Redis does; None when a spec cannot
/// answer (unknown or incomplete spec, bad numkeys, out of bounds), so the
/// caller falls back to `Spec::getkeys`.
fn keys_from_specs(specs: &[KeySpec], argv: &[Vec<u8>]) -> Option<Vec<(usize, KeyFlags)>> {
    let argc = argv.len() as i64;
    let mut out = Vec::new();
    for ks in specs {
        let first = match ks.begin {
            Begin::Index(i) => i as i64,
            Begin::Unknown => return None,
            Begin::Keyword(word, from) => {
                // Redis's bounds: forwards up to the last argument
                // excluded, backwards down to argument 2.
                let hit = if from > 0 {
                    (from as i64..argc - 1).find(|&i| is(&argv[i as usize], word))
                } else {
                    (2..(argc + from as i64 + 1).min(argc)).rev().find(|&i| is(&argv[i as usize], word))
                };
                match hit {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
        };
        let (first, last, step) = match ks.find {
            Find::Range { lastkey, keystep, limit } => {
                let last = if lastkey >= 0 {
                    first + lastkey as i64
                } else if limit <= 0 {
                    argc + lastkey as i64
                } else {
                    first + (argc - first) / limit as i64 + lastkey as i64
                };
                (first, last, keystep.max(1) as i64)
            }
            Find::Unknown => return None,
            Find::Keynum { keynumidx, firstkey, keystep } => {
                let at = first + keynumidx as i64;
                let n = argv.get(at as usize).and_then(|a| resp::num::parse_i64(a)).filter(|n| *n >= 0);
                let n = n?;
                let first = first + firstkey as i64;
                (first, first.saturating_add(n - 1), keystep.max(1) as i64)
            }
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            out.push((i as usize, ks.flags));
            i += step;
        }
        if ks.flags.contains(&"incomplete") {
            return None;
        }
    }
    Some(out)
}

/// The command table: lowercase name -> spec. Shared behind an `Rc` so
/// dispatch can hold a spec while it mutates the server.
pub type CommandMap = Rc<HashMap<String, Spec, rustc_hash::FxBuildHasher>>;

/// All commands, keyed by lowercase name.
pub fn registry() -> CommandMap {
    let mut all = Vec::new();
    all.extend(bitops::table());
    all.extend(connection::table());
    all.extend(geo::table());
    all.extend(hash::table());
    all.extend(hll::table());
    all.extend(introspection::table());
    all.extend(keys::table());
    all.extend(dump::table());
    all.extend(list::table());
    all.extend(pubsub::table());
    all.extend(replication::table());
    all.extend(set::table());
    all.extend(sort::table());
    all.extend(stream::table());
    all.extend(server::table());
    all.extend(crate::script::table());
    all.extend(string::table());
    all.extend(transaction::table());
    all.extend(zset::table());
    let mut map = HashMap::default();
    for mut s in all {
        if s.movable() {
            s.flags |= flags::MOVABLE_KEYS;
        }
        for sub in &mut s.subcommands {
            // Leaked once per table build: names live as long as the table.
            sub.full_name = Box::leak(format!("{}|{}", s.name, sub.name).into_boxed_str());
            if sub.movable() {
                sub.flags |= flags::MOVABLE_KEYS;
            }
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

    /// The epilogue of every write: invalidates WATCH, counts the change,
    /// wakes clients blocked on the key.
    pub fn key_modified(&mut self, key: &[u8]) {
        self.srv.dirty += 1;
        self.key_touched(key);
    }

    /// `key_modified` plus the keyspace event `event` of `class` for it: the
    /// usual end of a write to one key.
    pub fn modified(&mut self, key: &[u8], class: u32, event: &str) {
        self.key_modified(key);
        self.notify(class, event, key);
    }

    /// `key_modified` without counting a change, for the second key of a
    /// write Redis counts once (LMOVE's destination).
    pub fn key_touched(&mut self, key: &[u8]) {
        let db = self.client.db;
        self.srv.touch_watched(db, key, self.client);
        self.srv.blocking.signal(db, key);
    }

    /// Raises keyspace notification `event` of `class` (`notify::*`) on
    /// `key` of the selected database: one call per event, at the point of
    /// change, with Redis's event name. One branch when the class is off.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        let db = self.client.db;
        self.notify_db(db, class, event, key);
    }

    /// `notify` for a key of database `db` (MOVE's and COPY's destination).
    #[inline]
    pub fn notify_db(&mut self, db: usize, class: u32, event: &str, key: &[u8]) {
        if crate::notify::wanted(self.srv.config.notify_flags, class) {
            crate::notify::emit(self.srv, Some(&mut *self.client), db, class, event, key);
        }
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

    fn argv(words: &str) -> Vec<Vec<u8>> {
        words.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    fn noop(_: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
        Ok(())
    }

    #[test]
    fn key_specs_find_keys_and_movability() {
        // ZUNIONSTORE-like: destination, then numkeys-counted sources.
        let z = spec("zunionstore", -4, flags::WRITE, keys(1, 1, 1), noop).key_specs(vec![
            range_spec(kf::OW_UPDATE, 1, 0, 1),
            KeySpec { flags: kf::RO_ACCESS, begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ]);
        assert!(z.movable());
        let found: Vec<usize> = z.find_keys(&argv("zunionstore d 2 a b")).into_iter().map(|k| k.0).collect();
        assert_eq!(found, [1, 3, 4]);
        assert!(z.find_keys(&argv("zunionstore d 1443677133621497600 a")).is_empty());
        assert!(z.find_keys(&argv("zunionstore d x a")).is_empty());
        // Keyword begin, searched backwards.
        let st = spec("x", -2, flags::WRITE, NO_KEYS, noop).key_specs(vec![KeySpec {
            flags: kf::OW_UPDATE,
            begin: Begin::Keyword("STORE", -2),
            find: Find::Range { lastkey: 0, keystep: 1, limit: 0 },
        }]);
        assert_eq!(st.find_keys(&argv("x a store k b")), vec![(3, kf::OW_UPDATE)]);
        assert!(st.find_keys(&argv("x a b")).is_empty());
        // An unknown spec falls back to getkeys.
        let u = spec("y", -2, flags::READONLY, NO_KEYS, noop)
            .key_specs(vec![KeySpec { flags: kf::RO_ACCESS, begin: Begin::Unknown, find: Find::Unknown }])
            .getkeys(|a| vec![(a.len() - 1, kf::RO_ACCESS)]);
        assert!(u.movable());
        assert_eq!(u.find_keys(&argv("y a b")), vec![(2, kf::RO_ACCESS)]);
        // Consecutive plain ranges (LMOVE) are not movable; MSET's step is fine alone.
        let l = spec("lmove", 5, flags::WRITE, keys(1, 2, 1), noop)
            .key_specs(vec![range_spec(kf::RW_ACCESS_DELETE, 1, 0, 1), range_spec(kf::RW_INSERT, 2, 0, 1)]);
        assert!(!l.movable());
        let m = spec("mset", -3, flags::WRITE, keys(1, -1, 2), noop);
        assert_eq!(m.find_keys(&argv("mset a 1 b 2")), vec![(1, kf::RW_UPDATE), (3, kf::RW_UPDATE)]);
    }

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
