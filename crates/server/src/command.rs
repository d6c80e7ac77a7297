//! The command table's row type and what a handler receives.
//!
//! Each family file exports `table() -> Vec<Spec>`: one row per command with
//! its name, arity (negative: at least), flags, key positions, ACL categories
//! and handler; `build_table` joins the rows once. Dispatch (`exec.rs`,
//! `dispatch.rs`), COMMAND, ACL categories and key extraction all read that
//! one table.
//!
//! Handlers receive a `Ctx` and the whole argv (argv[0] is the command name),
//! write their reply through `ctx.out()` and return `Err(CmdError)` *before*
//! writing anything when the command fails, so the error is the only reply.
//! The layers above dispatch (the families' joined table, scripting, the
//! event loop) reach a handler only through `Ctx::host`.

use std::any::Any;
use std::rc::Rc;

use resp::Reply;
use storage::{Db, Value};

pub use crate::args::{arg_f64, arg_i64, arg_range, is, parse_c_double, CmdError, CmdResult};
use crate::blocking::{BlockRequest, ReadyFn};
use crate::client::Client;
pub use crate::cmdname::{Names, SpecAt};
pub use crate::keyspec::{keys, kf, range_spec, Begin, Find, KeyFlags, KeySpec, Keys, KeysFn, NO_KEYS};
use crate::keyspec::keys_from_specs;
use crate::server::Server;
use crate::{acl, notify, publish};

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
    /// STORE). Never set by hand: `build_table` derives it from `Spec::getkeys`
    /// and `Spec::key_specs`, as Redis derives it from its key specs.
    pub const MOVABLE_KEYS: u32 = 1 << 17;
    /// Valid with zero keys (EVAL with numkeys 0): COMMAND GETKEYS answers an
    /// empty array instead of an error.
    pub const NO_MANDATORY_KEYS: u32 = 1 << 18;
    /// Refused with -LOADING while a replica loads a full sync's image
    /// beside the data it still serves (async loading).
    pub const NO_ASYNC_LOADING: u32 = 1 << 19;

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
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// One command (or subcommand) of the table.
#[derive(Clone)]
pub struct Spec {
    /// Lowercase name; subcommands use their own word (e.g. "get").
    pub name: &'static str,
    /// Name as stats and errors show it: `get`, or `config|get` for a
    /// subcommand. Set by `build_table`.
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
    /// Index in the ACL catalog (`catalog`). Set by `build_table`.
    pub id: usize,
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
        id: 0,
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
        // Not @fast, so @slow: Redis files every such command there,
        // containers included (ACL CAT slow lists them).
        acl: &["slow"],
        group: "server",
        summary: "",
        since: "1.0.0",
        handler: container_handler,
        subcommands,
        id: 0,
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
        // The declared specs are used in place (no copy for each call:
        // routing asks this of every command in cluster mode).
        let derived;
        let specs: &[KeySpec] = if !self.key_specs.is_empty() || self.keys.first <= 0 {
            &self.key_specs
        } else {
            derived = self.effective_key_specs();
            &derived
        };
        let variable = specs.iter().any(|k| k.flags.contains(&"variable_flags"));
        if !specs.is_empty() && !variable {
            if let Some(keys) = keys_from_specs(specs, argv) {
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

/// The command table: lowercase name -> spec. Shared behind an `Rc` so
/// dispatch can hold a spec while it mutates the server.
pub type CommandMap = Rc<Commands>;

/// The commands by name, found case-insensitively from a request's raw
/// first argument (`cmdname::Names`, which says how). Every request looks
/// its command up once (a pipelined one for the prefetch, which hands on
/// its `SpecAt`; with I/O threads the thread that parsed it): this is most
/// of what that costs.
#[derive(Clone, Default)]
pub struct Commands {
    /// In the order of `names`' places.
    specs: Vec<Spec>,
    names: Names,
}

impl Commands {
    /// The spec named `name` in any case.
    #[inline]
    pub fn find(&self, name: &[u8]) -> Option<&Spec> {
        self.find_at(name).and_then(|a| self.at(a))
    }

    /// The spec at `at` (found in this table by `find_at`).
    #[inline]
    pub fn at(&self, at: SpecAt) -> Option<&Spec> {
        self.specs.get(at.index())
    }

    /// Where the spec named `name` (any case) is.
    #[inline]
    pub fn find_at(&self, name: &[u8]) -> Option<SpecAt> {
        self.names.find_at(name)
    }

    /// The names alone, for other threads to find commands by (`Names`).
    pub fn names(&self) -> Names {
        self.names.clone()
    }

    /// The spec named `name` (any case).
    pub fn get(&self, name: &str) -> Option<&Spec> {
        self.find(name.as_bytes())
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name.as_bytes()).is_some()
    }

    pub fn len(&self) -> usize {
        self.specs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// (name, spec) of every command, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Spec)> {
        self.names.iter().zip(&self.specs)
    }

    pub fn values(&self) -> impl Iterator<Item = &Spec> {
        self.specs.iter()
    }

    /// Adds `spec` as `name`, replacing and returning a command of that
    /// name (any case).
    pub fn insert(&mut self, name: String, spec: Spec) -> Option<Spec> {
        let old = self.remove(&name);
        self.names.push(name);
        self.specs.push(spec);
        old
    }

    /// Takes out the command named `name` (any case).
    pub fn remove(&mut self, name: &str) -> Option<Spec> {
        let i = self.names.find_at(name.as_bytes())?.index();
        self.names.swap_remove(i);
        Some(self.specs.swap_remove(i))
    }
}

/// Builds the command table from every family's rows: derives
/// `MOVABLE_KEYS`, names subcommands `parent|sub`, refuses duplicates.
pub fn build_table(all: Vec<Spec>) -> CommandMap {
    let mut map = Commands::default();
    let mut next_id = 0;
    for mut s in all {
        if s.movable() {
            s.flags |= flags::MOVABLE_KEYS;
        }
        s.id = next_id;
        next_id += 1;
        for sub in &mut s.subcommands {
            sub.id = next_id;
            next_id += 1;
            // Leaked once per table build: names live as long as the table.
            sub.full_name = Box::leak(format!("{}|{}", s.name, sub.name).into_boxed_str());
            if sub.movable() {
                sub.flags |= flags::MOVABLE_KEYS;
            }
        }
        let name = s.name.to_string();
        assert!(map.names.find_at(name.as_bytes()).is_none(), "command {name} registered twice");
        map.names.push(name);
        map.specs.push(s);
    }
    Rc::new(map)
}

/// The table as the ACL sees it (`acl::Catalog`), commands at their `id`.
/// Give it the table as built, before rename-command removes rows.
///
/// Panics: if some id is missing (a renamed or trimmed table).
pub fn catalog(table: &CommandMap) -> acl::Catalog {
    let mut cmds: Vec<(usize, acl::CatalogCmd)> = Vec::new();
    for s in table.values() {
        let subs = s.subcommands.iter().map(|x| x.id).collect();
        cmds.push((s.id, acl::CatalogCmd { name: s.full_name, cats: s.acl, parent: None, subs, no_auth: s.has(flags::NO_AUTH) }));
        for sub in &s.subcommands {
            let c = acl::CatalogCmd { name: sub.full_name, cats: sub.acl, parent: Some(s.id), subs: vec![], no_auth: sub.has(flags::NO_AUTH) };
            cmds.push((sub.id, c));
        }
    }
    cmds.sort_by_key(|c| c.0);
    assert!(cmds.iter().enumerate().all(|(i, c)| c.0 == i), "command ids are dense");
    acl::Catalog::new(cmds.into_iter().map(|c| c.1).collect())
}

/// What a handler sees: the server, the calling client, and the time.
pub struct Ctx<'a> {
    /// What the layers above dispatch lend it: the command table, the
    /// scripting engine, serving other clients while a script is busy.
    pub host: &'a mut dyn Host,
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

    /// True if a deadline `when` set now is already past, so the key goes
    /// at once rather than getting it. Not while due keys read as live (a
    /// replica applying its primary's stream, an AOF being loaded): there
    /// the deadline is set and the key expires later, as Redis leaves
    /// expiry out while loading and to the primary on a replica.
    pub fn already_expired(&self, when: i64) -> bool {
        when <= self.now && !self.srv.dbs[self.client.db].ignore_deadlines
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
        // Under an LRM policy the key's clock counts writes only.
        let now = self.now;
        self.srv.dbs[db].modified(key, now);
        self.srv.touch_watched(db, key, self.client);
        self.srv.blocking.signal(db, key);
        self.invalidate(key);
    }

    /// Tells the clients that may cache `key` that it changed (CLIENT
    /// TRACKING). One branch while no client tracks.
    #[inline]
    pub fn invalidate(&mut self, key: &[u8]) {
        if self.srv.tracking.clients > 0 {
            publish::invalidate_key(self.srv, Some(&*self.client), Some(self.client.id), key, true);
        }
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
        if notify::wanted(self.srv.config.notify_flags, class) {
            publish::emit(self.srv, Some(&mut *self.client), db, class, event, key);
        }
    }

    /// Stores `value` under `key` with `ttl` and signals the change.
    pub fn set_value(&mut self, key: &[u8], value: Value, ttl: storage::Ttl) {
        let now = self.now;
        self.db().insert(key, value, ttl, now);
        self.key_modified(key);
    }

    /// `set_value` of the string `bytes` (as `Value::string` would store
    /// it), with no copy made on the way to its blob.
    pub fn set_str(&mut self, key: &[u8], bytes: &[u8], ttl: storage::Ttl) {
        let now = self.now;
        self.db().insert_str(key, bytes, ttl, now);
        self.key_modified(key);
    }
}

impl Ctx<'_> {
    /// True if the running client may block: not inside MULTI/EXEC, not a
    /// socketless internal client, not while a script runs.
    pub fn may_block(&self) -> bool {
        !self.client.in_exec && self.client.connected() && self.srv.blocking.deny == 0
    }

    /// Blocks the running client: the handler must then write no reply and
    /// return `Ok(())`. Check `may_block` first.
    pub fn block(&mut self, req: BlockRequest) {
        self.srv.blocking.request(req);
    }
}

/// The null reply a handler gives instead of blocking when it may not block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullKind {
    /// `*-1` (BLPOP, BZPOPMIN, BLMPOP ...).
    Array,
    /// `$-1` (BLMOVE, BRPOPLPUSH).
    Bulk,
}

/// Blocks on `keys` until `deadline`, or, where blocking is not allowed,
/// replies the null of `kind` at once (Redis treats it as an immediate
/// timeout). The timeout reply is the null array.
pub fn block_or_null(ctx: &mut Ctx, keys: &[Vec<u8>], deadline: Option<i64>, ready: ReadyFn, kind: NullKind) -> CmdResult {
    if !ctx.may_block() {
        match kind {
            NullKind::Array => ctx.out().null_array(),
            NullKind::Bulk => ctx.out().null(),
        }
        return Ok(());
    }
    ctx.block(BlockRequest::on_keys(keys.to_vec(), deadline, ready));
    Ok(())
}

/// What dispatch borrows from the layers above it for one call, passed down
/// as a trait object so that dispatch imports nothing above it: the command
/// table (joined from every family, which sit above dispatch), the
/// scripting engine (above the families), and the event loop's ability to
/// serve other clients while a script is busy (the top layer).
pub trait Host {
    /// The command table.
    fn table(&self) -> &CommandMap;
    /// The scripting engine.
    fn scripts(&mut self) -> &mut dyn Scripts;
    /// The scripting engine, to read.
    fn scripts_ref(&self) -> &dyn Scripts;
    /// Serves every other client once (accept, read, run, write): a script
    /// past busy-reply-threshold calls it between steps, so that SCRIPT KILL
    /// can reach it. The running client is not in `srv.clients`.
    fn serve_others(&mut self, srv: &mut Server);

    /// Serves clients while the RDB file loads at start-up (the databases
    /// are empty meanwhile; dispatch answers -LOADING to commands without
    /// the `loading` flag) and closes those that left. Returns false when a
    /// shutdown signal came: the load stops and the server exits. Hosts
    /// without clients serve none.
    fn serve_while_loading(&mut self, srv: &mut Server) -> bool {
        let _ = srv;
        true
    }

    /// Listens on `port` and `tls_port` at every address of `bind` in place
    /// of the current TCP and TLS sockets (CONFIG SET port, tls-port,
    /// bind); on failure the current sockets stay. Hosts without
    /// listeners refuse.
    ///
    /// Errors: Redis's CONFIG SET reason.
    fn relisten(&mut self, srv: &mut Server, bind: &str, port: u16, tls_port: u16) -> Result<(), &'static str> {
        let _ = (srv, bind, port, tls_port);
        Err("Unable to listen on this port. Check server logs.")
    }

    /// Serves clients with `n` - 1 I/O threads from now on (CONFIG SET
    /// io-threads): threads start, or retire once their clients came
    /// back; clients move to and from them between commands. Hosts
    /// without sockets refuse.
    ///
    /// Errors: why the threads could not be started.
    fn set_io_threads(&mut self, srv: &mut Server, n: usize) -> Result<(), String> {
        let _ = (srv, n);
        Err("I/O threads cannot be changed here".into())
    }

    /// True if a SIGINT came since the signals were last read (and takes
    /// the signals that came): a save on this thread during a shutdown asks,
    /// as a second SIGINT means "exit now". Hosts without signals say no.
    fn sigint_pending(&mut self) -> bool {
        false
    }
}

/// What dispatch and INFO need of the scripting engine. The script layer
/// implements it and reaches its own engine back through `as_any`.
pub trait Scripts: Any {
    /// The flags `argv` runs with: for EVAL, EVALSHA, FCALL and their _RO
    /// forms, the spec's flags as the script's declared flags change them
    /// (CLIENT PAUSE WRITE and OOM judge a script by what it declares);
    /// otherwise `spec.flags`.
    fn command_flags(&self, spec: &Spec, argv: &[Vec<u8>]) -> u32;
    /// Counts and memory for INFO.
    fn info(&self) -> ScriptInfo;
    /// The function libraries' code, for an RDB file.
    fn function_codes(&self) -> Vec<Vec<u8>>;
    /// Replaces the loaded libraries with those read from an RDB file.
    ///
    /// Errors: the first library that does not load (bad code, a function
    /// name used twice); the libraries are then those loaded before it.
    fn load_functions(&mut self, codes: Vec<Vec<u8>>) -> Result<(), String>;
    /// The engine as its concrete type.
    fn as_any(&mut self) -> &mut dyn Any;
}

/// Scripting figures INFO shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptInfo {
    /// Bytes of the EVAL interpreter.
    pub eval_vm: usize,
    /// Bytes of the EVAL script cache.
    pub eval_cache: usize,
    /// Scripts in the EVAL cache.
    pub cached_scripts: usize,
    /// Scripts evicted from the EVAL cache.
    pub evicted_scripts: u64,
    /// Bytes of the functions interpreter.
    pub functions_vm: usize,
    /// Bytes of function bookkeeping.
    pub functions_overhead: usize,
    /// Functions loaded.
    pub functions: usize,
    /// Libraries loaded.
    pub libraries: usize,
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
        // MSETEX-like: numkeys keys, each followed by its value.
        let m = spec("msetex", -4, flags::WRITE, NO_KEYS, noop).key_specs(vec![KeySpec {
            flags: kf::OW_UPDATE,
            begin: Begin::Index(1),
            find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 2 },
        }]);
        let found: Vec<usize> = m.find_keys(&argv("msetex 2 a 1 b 2 ex 10")).into_iter().map(|k| k.0).collect();
        assert_eq!(found, [2, 4]);
        assert!(m.find_keys(&argv("msetex 3 a 1 b 2")).is_empty());
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
    fn commands_are_found_in_any_case_and_only_by_their_name() {
        let table = crate::registry::registry();
        assert!(table.len() > 200);
        for (name, spec) in table.iter() {
            assert!(std::ptr::eq(table.find(name.as_bytes()).unwrap(), spec));
            assert!(std::ptr::eq(table.find(name.to_ascii_uppercase().as_bytes()).unwrap(), spec));
            // One byte more, one less, or another with the same case-folded
            // hash input (0x20 bit cleared on a non-letter) finds nothing
            // or another command, never this one by mistake.
            let mut longer = name.as_bytes().to_vec();
            longer.push(b'x');
            assert!(table.find(&longer).is_none_or(|s| !std::ptr::eq(s, spec)));
            assert!(table.find(&name.as_bytes()[..name.len() - 1]).is_none_or(|s| !std::ptr::eq(s, spec)));
        }
        assert!(table.find(b"").is_none());
        assert!(table.find(b"SET\0").is_none());
        assert!(table.find(b"s\xc5t").is_none());
        assert!(table.find(b"GET").is_some_and(|s| s.name == "get"));
        // '_' (0x5f) and DEL (0x7f) hash alike; only one is a name's byte.
        let mut t = Commands::default();
        t.insert("a_b".into(), spec("a_b", 1, 0, NO_KEYS, noop));
        assert!(t.find(b"A_B").is_some());
        assert!(t.find(b"a\x7fb").is_none());
        assert!(t.remove("A_b").is_some() && t.find(b"a_b").is_none() && t.is_empty());
        // Past 24 bytes (a rename-command's name): compared whole.
        t.insert("renamed-to-a-much-longer-name-x".into(), spec("x", 1, 0, NO_KEYS, noop));
        assert!(t.find(b"RENAMED-TO-A-MUCH-LONGER-NAME-X").is_some());
        assert!(t.find(b"renamed-to-a-much-longer-name-y").is_none());
        assert!(t.find(b"renamed-to-a-much-longer-name-x-").is_none());
    }
}
