//! Introspection and administration: CLIENT, COMMAND, SLOWLOG, COMMANDLOG, LATENCY,
//! MONITOR, DEBUG, TIME, LASTSAVE, SHUTDOWN, MODULE. (FUNCTION is in
//! `crate::script::function`.)
//!
//! COMMAND's replies are derived from the one command table (`Spec`), never
//! from a second list. The running client is not in `srv.clients` while its
//! command runs, so everything that walks "all clients" (CLIENT LIST/KILL)
//! looks at `ctx.client` as well.

use std::time::{Duration, Instant};

use crate::command::flags::*;
use crate::command::{arg_i64, container, is, spec, Begin, CmdError, CmdResult, Ctx, Find, KeyFlags, KeySpec, Spec, NO_KEYS};
use crate::blocking::BlockRequest;
use crate::dispatch::{self, Release};
use crate::client::{Client, ReplyMode};
use crate::commandlog::LogKind;
use crate::server::{unix_us, Pause, Server};
use crate::tracking::{Options, Tracking};

const ADM: &[&str] = &["admin", "slow", "dangerous"];

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let conn: &[&str] = &["slow", "connection"];
    let conn_adm: &[&str] = &["admin", "slow", "dangerous", "connection"];
    let cl = NOSCRIPT | LOADING | STALE;
    vec![
        container(
            "client",
            vec![
                spec("id", 2, cl, NO_KEYS, client_id).acl(conn).doc("Returns the unique client ID of the connection.", "5.0.0"),
                spec("info", 2, cl, NO_KEYS, client_info).acl(conn).doc("Returns information about the connection.", "6.2.0"),
                spec("list", -2, ADMIN | cl, NO_KEYS, client_list).acl(conn_adm).doc("Lists open connections.", "2.4.0"),
                spec("kill", -3, ADMIN | cl, NO_KEYS, client_kill).acl(conn_adm).doc("Terminates open connections.", "2.4.0"),
                spec("setname", 3, cl, NO_KEYS, client_setname).acl(conn).doc("Sets the connection name.", "2.6.9"),
                spec("getname", 2, cl, NO_KEYS, client_getname).acl(conn).doc("Returns the name of the connection.", "2.6.9"),
                spec("setinfo", 4, cl, NO_KEYS, client_setinfo).acl(conn).doc("Sets information specific to the client or connection.", "7.2.0"),
                spec("reply", 3, cl, NO_KEYS, client_reply).acl(conn).doc("Instructs the server whether to reply to commands.", "3.2.0"),
                spec("pause", -3, ADMIN | cl, NO_KEYS, client_pause).acl(conn_adm).doc("Suspends commands processing.", "3.0.0"),
                spec("unblock", -3, ADMIN | cl, NO_KEYS, client_unblock).acl(conn_adm).doc("Unblocks a client blocked by a blocking command from a different connection.", "5.0.0"),
                spec("unpause", 2, ADMIN | cl, NO_KEYS, client_unpause).acl(conn_adm).doc("Resumes processing commands from paused clients.", "6.2.0"),
                spec("no-evict", 3, ADMIN | cl, NO_KEYS, client_no_evict).acl(conn_adm).doc("Sets the client eviction mode of the connection.", "7.0.0"),
                spec("no-touch", 3, cl, NO_KEYS, client_no_touch).acl(conn).doc("Controls whether commands sent by the client affect the LRU/LFU of accessed keys.", "7.2.0"),
                spec("tracking", -3, cl, NO_KEYS, client_tracking).acl(conn).doc("Controls server-assisted client-side caching for the connection.", "6.0.0"),
                spec("caching", 3, cl, NO_KEYS, client_caching).acl(conn).doc("Instructs the server whether to track the keys in the next request.", "6.0.0"),
                spec("getredir", 2, cl, NO_KEYS, client_getredir).acl(conn).doc("Returns the client ID to which the connection's tracking notifications are redirected.", "6.0.0"),
                spec("trackinginfo", 2, cl, NO_KEYS, client_trackinginfo).acl(conn).doc("Returns information about server-assisted client-side caching for the connection.", "6.2.0"),
                spec("capa", -3, cl, NO_KEYS, client_capa).acl(conn).doc("Declares the client's capabilities (Valkey).", "8.0.0"),
                spec("help", 2, LOADING | STALE, NO_KEYS, client_help).acl(conn).doc("Returns helpful text about the different subcommands.", "5.0.0"),
            ],
        )
        .group("connection")
        .doc("A container for client connection commands.", "2.4.0"),
        Spec { arity: -1, flags: LOADING | STALE, handler: command_all, ..container(
            "command",
            vec![
                spec("count", 2, LOADING | STALE, NO_KEYS, command_count).acl(&["slow", "connection"]).doc("Returns a count of commands.", "2.8.13"),
                spec("info", -2, LOADING | STALE, NO_KEYS, command_info).acl(&["slow", "connection"]).doc("Returns information about one, multiple or all commands.", "2.8.13"),
                spec("docs", -2, LOADING | STALE, NO_KEYS, command_docs).acl(&["slow", "connection"]).doc("Returns documentary information about one, multiple or all commands.", "7.0.0"),
                spec("list", -2, LOADING | STALE, NO_KEYS, command_list).acl(&["slow", "connection"]).doc("Returns a list of command names.", "7.0.0"),
                spec("getkeys", -3, LOADING | STALE, NO_KEYS, command_getkeys).acl(&["slow", "connection"]).doc("Extracts the key names from an arbitrary command.", "2.8.13"),
                spec("getkeysandflags", -3, LOADING | STALE, NO_KEYS, command_getkeysandflags).acl(&["slow", "connection"]).doc("Extracts the key names and access flags for an arbitrary command.", "7.0.0"),
                spec("help", 2, LOADING | STALE, NO_KEYS, command_help).acl(&["slow", "connection"]).doc("Returns helpful text about the different subcommands.", "5.0.0"),
            ],
        ) }
        .acl(&["slow", "connection"])
        .group("server")
        .doc("Returns detailed information about all commands.", "2.8.13"),
        container(
            "slowlog",
            vec![
                spec("get", -2, ADMIN | LOADING | STALE, NO_KEYS, slowlog_get).acl(ADM).doc("Returns the slow log's entries.", "2.2.12"),
                spec("len", 2, ADMIN | LOADING | STALE, NO_KEYS, slowlog_len).acl(ADM).doc("Returns the number of entries in the slow log.", "2.2.12"),
                spec("reset", 2, ADMIN | LOADING | STALE, NO_KEYS, slowlog_reset).acl(ADM).doc("Clears all entries from the slow log.", "2.2.12"),
                spec("help", 2, LOADING | STALE, NO_KEYS, slowlog_help).acl(&["slow"]).doc("Show helpful text about the different subcommands", "6.2.0"),
            ],
        )
        .doc("A container for slow log commands.", "2.2.12"),
        container(
            "commandlog",
            vec![
                spec("get", 4, ADMIN | LOADING | STALE, NO_KEYS, commandlog_get).acl(ADM).doc("Returns the specified command log's entries.", "8.1.0"),
                spec("len", 3, ADMIN | LOADING | STALE, NO_KEYS, commandlog_len).acl(ADM).doc("Returns the number of entries in the specified type of command log.", "8.1.0"),
                spec("reset", 3, ADMIN | LOADING | STALE, NO_KEYS, commandlog_reset).acl(ADM).doc("Clears all entries from the specified type of command log.", "8.1.0"),
                spec("help", 2, LOADING | STALE, NO_KEYS, commandlog_help).acl(&["slow"]).doc("Show helpful text about the different subcommands", "8.1.0"),
            ],
        )
        .doc("A container for command log commands.", "8.1.0"),
        container(
            "latency",
            vec![
                spec("latest", 2, ADMIN | cl, NO_KEYS, latency_latest).acl(ADM).doc("Returns the latest latency samples for all events.", "2.8.13"),
                spec("history", 3, ADMIN | cl, NO_KEYS, latency_history).acl(ADM).doc("Returns timestamp-latency samples for an event.", "2.8.13"),
                spec("reset", -2, ADMIN | cl, NO_KEYS, latency_reset).acl(ADM).doc("Resets the latency data for one or more events.", "2.8.13"),
                spec("doctor", 2, ADMIN | cl, NO_KEYS, latency_doctor).acl(ADM).doc("Returns a human-readable latency analysis report.", "2.8.13"),
                spec("graph", 3, ADMIN | cl, NO_KEYS, latency_graph).acl(ADM).doc("Returns a latency graph for an event.", "2.8.13"),
                spec("histogram", -2, ADMIN | cl, NO_KEYS, latency_histogram).acl(ADM).doc("Returns the cumulative distribution of latencies of a subset or all commands.", "7.0.0"),
                spec("help", 2, LOADING | STALE, NO_KEYS, latency_help).acl(&["slow"]).doc("Returns helpful text about the different subcommands.", "2.8.13"),
            ],
        )
        .doc("A container for latency diagnostics commands.", "2.8.13"),
        spec("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI, NO_KEYS, monitor)
            .acl(ADM)
            .group("server")
            .doc("Listens for all requests received by the server in real-time.", "1.0.0"),
        spec("time", 1, LOADING | STALE | FAST, NO_KEYS, time).acl(&["fast"]).group("server").doc("Returns the server time.", "2.6.0"),
        spec("lastsave", 1, LOADING | STALE | FAST, NO_KEYS, lastsave)
            .acl(&["admin", "fast", "dangerous"])
            .group("server")
            .doc("Returns the Unix timestamp of the last successful save to disk.", "1.0.0"),
        spec("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, NO_KEYS, shutdown)
            .acl(ADM)
            .group("server")
            .doc("Synchronously saves the database(s) to disk and shuts down the Redis server.", "1.0.0"),
        spec("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, debug).acl(ADM).group("server").doc("A container for debugging commands.", "1.0.0"),
        container(
            "module",
            vec![
                spec("list", 2, ADMIN | NOSCRIPT, NO_KEYS, module_list).acl(ADM).doc("Returns all loaded modules.", "4.0.0"),
                spec("load", -3, ADMIN | NOSCRIPT, NO_KEYS, module_load).acl(ADM).doc("Loads a module.", "4.0.0"),
                spec("loadex", -3, ADMIN | NOSCRIPT, NO_KEYS, module_load).acl(ADM).doc("Loads a module using extended parameters.", "7.0.0"),
                spec("unload", 3, ADMIN | NOSCRIPT, NO_KEYS, module_unload).acl(ADM).doc("Unloads a module.", "4.0.0"),
                spec("help", 2, LOADING | STALE, NO_KEYS, module_help).acl(&["slow"]).doc("Returns helpful text about the different subcommands.", "5.0.0"),
            ],
        )
        .doc("A container for module commands.", "4.0.0"),
    ]
}

/// Replies to `<CMD> HELP` the way Redis does: a header line, the given
/// pairs of lines, then HELP's own entry; all as status replies.
pub fn help_reply(ctx: &mut Ctx, cmd: &str, lines: &[&str]) {
    let out = ctx.out();
    out.array(lines.len() + 3);
    out.simple(&format!("{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", cmd.to_ascii_uppercase()));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Print this help.");
}

fn on_off(a: &[u8]) -> Result<bool, CmdError> {
    if is(a, "on") {
        Ok(true)
    } else if is(a, "off") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

// ---------------------------------------------------------------- CLIENT

fn client_id(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let id = ctx.client.id as i64;
    ctx.out().int(id);
    Ok(())
}

fn client_info(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ctx.client.argv_mem = argv_len(args);
    let line = ctx.client.info_line(Instant::now()) + "\n";
    ctx.client.argv_mem = 0;
    ctx.out().verbatim(line.as_bytes());
    Ok(())
}

/// The caller's `argv-mem` while CLIENT INFO or CLIENT LIST shows it: the
/// bytes of the command's arguments (a client's field holds them only
/// while it is blocked, so no command pays for counting them).
fn argv_len(args: &[Vec<u8>]) -> usize {
    args.iter().map(Vec::len).sum()
}

/// Redis's client types: replicas and MONITOR clients (which Redis flags
/// as replicas too) are "replica", the primary's link "master".
fn client_type_matches(c: &Client, ty: &str) -> bool {
    use crate::client::ReplRole;
    match ty {
        "normal" => !c.monitor && c.pubsub.is_none() && c.repl_role == ReplRole::None,
        "replica" | "slave" => c.monitor || c.repl_role == ReplRole::Replica,
        "master" => c.repl_role == ReplRole::Primary,
        "pubsub" => c.pubsub.is_some(),
        _ => false,
    }
}

fn parse_client_type(a: &[u8]) -> Result<String, CmdError> {
    let t = String::from_utf8_lossy(a).to_ascii_lowercase();
    match t.as_str() {
        "normal" | "master" | "replica" | "slave" | "pubsub" => Ok(t),
        _ => Err(CmdError::err(format!("Unknown client type '{}'", String::from_utf8_lossy(a)))),
    }
}

/// What CLIENT LIST and CLIENT KILL select clients by: Redis's filters
/// (ID, TYPE, ADDR, LADDR, USER, SKIPME, MAXAGE), those Valkey 8.1 added
/// (NAME, IDLE, FLAGS, LIB-NAME, LIB-VER, DB, CAPA, IP) and Valkey 9's
/// NOT- forms of all but SKIPME, MAXAGE and IDLE; all given must hold.
#[derive(Default)]
struct ClientFilter {
    ids: Option<Vec<u64>>,
    ty: Option<String>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    user: Option<crate::acl::UserRef>,
    skipme: bool,
    /// Seconds; 0: any age.
    maxage: i64,
    /// Seconds; 0: any idle time.
    idle: i64,
    /// Flag letters as CLIENT LIST shows them, all required.
    flags: Option<Vec<u8>>,
    name: Option<Vec<u8>>,
    lib_name: Option<Vec<u8>>,
    lib_ver: Option<Vec<u8>>,
    db: Option<usize>,
    /// Capability letters (`r`: redirect), all required.
    capa: Option<Vec<u8>>,
    ip: Option<Vec<u8>>,
    /// The NOT- filters, one criterion each: a client matching any of them
    /// is left out.
    not: Vec<ClientFilter>,
}

/// Flag letters a FLAGS filter may name (Valkey's list).
const FILTER_FLAGS: &[u8] = b"OSMPxbtRBdcuAUreTIN";

/// Filters that have a NOT- form (Valkey 9).
const NEGATABLE: &[&str] = &["id", "type", "addr", "laddr", "user", "flags", "name", "lib-name", "lib-ver", "db", "capa", "ip"];

impl ClientFilter {
    /// Parses `args[i..]`, option-value pairs; ID and NOT-ID take one or
    /// more numbers. `kill`: CLIENT KILL's defaults (SKIPME yes) and its
    /// error for a bad first ID.
    fn parse(srv: &crate::server::Server, args: &[Vec<u8>], mut i: usize, kill: bool) -> Result<ClientFilter, CmdError> {
        let mut f = ClientFilter { skipme: kill, ..ClientFilter::default() };
        while i < args.len() {
            let o = &args[i];
            if args.get(i + 1).is_none() {
                return Err(CmdError::Syntax);
            }
            let lower = o.to_ascii_lowercase();
            i = match lower.strip_prefix(b"not-") {
                Some(base) if NEGATABLE.iter().any(|n| n.as_bytes() == base) => {
                    let mut one = ClientFilter::default();
                    let next = one.parse_one(srv, base, args, i, kill, true)?;
                    f.not.push(one);
                    next
                }
                _ => f.parse_one(srv, &lower, args, i, kill, false)?,
            };
        }
        Ok(f)
    }

    /// Parses the filter `name` (lower case, without NOT-) at `args[i]`,
    /// its value(s) after it (at least one is there); returns the index
    /// after them. `neg`: it was given as NOT-, for the error texts that
    /// name the filter.
    fn parse_one(&mut self, srv: &crate::server::Server, name: &[u8], args: &[Vec<u8>], i: usize, kill: bool, neg: bool) -> Result<usize, CmdError> {
        let v = &args[i + 1];
        let which = |plain: &str| if neg { format!("NOT-{}", plain.to_ascii_uppercase()) } else { "provided".to_string() };
        match name {
            b"id" => {
                // Every number after ID is one, as Valkey reads it.
                let ids = self.ids.get_or_insert_with(Vec::new);
                let mut n = 0;
                while let Some(a) = args.get(i + 1 + n) {
                    let Ok(id) = arg_i64(a) else { break };
                    if id < 1 {
                        return Err(CmdError::err("client-id should be greater than 0"));
                    }
                    ids.push(id as u64);
                    n += 1;
                }
                if n == 0 {
                    return Err(CmdError::err(if kill { "client-id should be greater than 0" } else { "Invalid client ID" }));
                }
                return Ok(i + 1 + n);
            }
            b"maxage" => {
                self.maxage = arg_i64(v).map_err(|_| CmdError::err("maxage is not an integer or out of range"))?;
                if self.maxage <= 0 {
                    return Err(CmdError::err("maxage should be greater than 0"));
                }
            }
            b"idle" => {
                self.idle = arg_i64(v).map_err(|_| CmdError::err("idle is not an integer or out of range"))?;
                if self.idle <= 0 {
                    return Err(CmdError::err("idle should be greater than 0"));
                }
            }
            b"type" => self.ty = Some(parse_client_type(v)?),
            b"addr" => self.addr = Some(v.clone()),
            b"laddr" => self.laddr = Some(v.clone()),
            b"user" => match srv.acl.user(v) {
                Some(u) => self.user = Some(u),
                None => return Err(CmdError::err(format!("No such user '{}'", String::from_utf8_lossy(v)))),
            },
            b"skipme" => {
                self.skipme = if is(v, "yes") {
                    true
                } else if is(v, "no") {
                    false
                } else {
                    return Err(CmdError::Syntax);
                };
            }
            b"flags" => {
                if !v.iter().all(|b| FILTER_FLAGS.contains(b)) {
                    return Err(CmdError::err(format!("Unknown flags found in the {} filter: {}", which("flags"), String::from_utf8_lossy(v))));
                }
                self.flags = Some(v.clone());
            }
            b"name" => self.name = Some(v.clone()),
            b"lib-name" => self.lib_name = Some(v.clone()),
            b"lib-ver" => self.lib_ver = Some(v.clone()),
            b"db" => {
                let n = arg_i64(v).ok().filter(|n| i32::try_from(*n).is_ok()).ok_or_else(|| CmdError::err("DB is not an integer or out of range"))?;
                if n < 0 || n as usize >= srv.dbs.len() {
                    return Err(CmdError::err(format!("DB number should be between 0 and {}", srv.dbs.len() - 1)));
                }
                self.db = Some(n as usize);
            }
            b"capa" => {
                if !v.iter().all(|&b| b == b'r') {
                    return Err(CmdError::err(format!("Unknown capa found in the {} filter: {}", which("capa"), String::from_utf8_lossy(v))));
                }
                self.capa = Some(v.clone());
            }
            b"ip" => self.ip = Some(v.clone()),
            _ => return Err(CmdError::Syntax),
        }
        Ok(i + 2)
    }

    /// True if client `c` (`me`: the one asking) is selected.
    fn matches(&self, c: &Client, me: bool, now: Instant) -> bool {
        let has = |want: &Option<Vec<u8>>, got: &Option<Vec<u8>>| want.as_ref().is_none_or(|w| got.as_ref() == Some(w));
        self.addr.as_ref().is_none_or(|a| a == c.addr.as_bytes())
            && self.laddr.as_ref().is_none_or(|a| a == c.laddr.as_bytes())
            && self.ty.as_deref().is_none_or(|t| client_type_matches(c, t))
            && self.ids.as_ref().is_none_or(|ids| ids.contains(&c.id))
            && self.user.as_ref().is_none_or(|u| c.user.as_ref().is_some_and(|cu| std::rc::Rc::ptr_eq(u, cu)))
            && !(me && self.skipme)
            && (self.maxage == 0 || now.duration_since(c.created).as_secs() as i64 >= self.maxage)
            && (self.idle == 0 || now.duration_since(c.last_interaction).as_secs() as i64 >= self.idle)
            && self.flags.as_ref().is_none_or(|f| flags_match(&c.flags(), f))
            && has(&self.name, &c.name)
            && has(&self.lib_name, &c.lib_name)
            && has(&self.lib_ver, &c.lib_ver)
            && self.db.is_none_or(|d| d == c.db)
            && self.capa.as_ref().is_none_or(|_| c.capa_redirect)
            && self.ip.as_ref().is_none_or(|ip| ip_matches(&c.addr, ip))
            && !self.not.iter().any(|n| n.matches(c, me, now))
    }
}

/// True if a client showing flags `shown` (CLIENT LIST's letters) has
/// every letter of `want`; `N` asks for a client with no flag at all.
fn flags_match(shown: &str, want: &[u8]) -> bool {
    want.iter().all(|&w| if w == b'N' { shown == "N" } else { shown.as_bytes().contains(&w) })
}

/// True if address `addr` (`ip:port`, `[ipv6]:port`) is from `ip`; a Unix
/// socket client (port 0) never is.
fn ip_matches(addr: &str, ip: &[u8]) -> bool {
    let Some((host, port)) = addr.rsplit_once(':') else { return false };
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    host.as_bytes() == ip && !port.starts_with('0')
}

/// CLIENT LIST [filter ...]
fn client_list(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = Instant::now();
    if args.len() == 3 {
        return Err(CmdError::Syntax);
    }
    let f = ClientFilter::parse(ctx.srv, args, 2, false)?;
    ctx.client.argv_mem = argv_len(args);
    let mut all: Vec<&Client> = ctx.srv.clients.values().collect();
    all.push(ctx.client);
    let me = ctx.client.id;
    let mut s = String::new();
    let srv = &*ctx.srv;
    let mut add = |c: &Client| {
        s.push_str(&c.info_line_with(now, crate::replication::replica_unsent(srv, c.id)));
        s.push('\n');
    };
    let picked = |c: &Client| f.matches(c, c.id == me, now);
    match &f.ids {
        // Redis lists ID matches in the order the IDs were given.
        Some(ids) => {
            for id in ids {
                if let Some(c) = all.iter().find(|c| c.id == *id && picked(c)) {
                    add(c);
                }
            }
        }
        None => {
            all.sort_by_key(|c| c.id);
            all.iter().filter(|c| picked(c)).for_each(|c| add(c));
        }
    }
    ctx.client.argv_mem = 0;
    ctx.out().verbatim(s.as_bytes());
    Ok(())
}

/// CLIENT KILL addr | CLIENT KILL filter ...
fn client_kill(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let old_form = args.len() == 3;
    let f = if old_form {
        // The old form may kill the caller itself.
        ClientFilter { addr: Some(args[2].clone()), ..ClientFilter::default() }
    } else {
        ClientFilter::parse(ctx.srv, args, 2, true)?
    };
    let now = Instant::now();
    let mut killed = 0;
    let mut primary_link = None;
    ctx.srv.sweep_clients = true;
    for c in ctx.srv.clients.values_mut() {
        if f.matches(c, false, now) {
            c.close_asap = true;
            killed += 1;
            if c.repl_role == crate::client::ReplRole::Primary {
                primary_link = Some((c.id, c.db));
            }
        }
    }
    if let Some((id, db)) = primary_link {
        crate::replication::primary_link_lost(ctx.srv, id, db);
    }
    let kill_me = f.matches(ctx.client, true, now);
    if kill_me {
        killed += 1;
    }
    if old_form {
        if killed == 0 {
            return Err(CmdError::err("No such client"));
        }
        ctx.out().ok();
    } else {
        ctx.out().int(killed);
    }
    if kill_me {
        ctx.client.close_after_reply = true;
    }
    Ok(())
}

/// CLIENT CAPA capability [capability ...] (Valkey): the client declares
/// what it can handle; `redirect` (any case) is the one Valkey knows, and
/// other words are accepted and ignored, as Valkey does.
fn client_capa(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args[2..].iter().any(|a| is(a, "redirect")) {
        ctx.client.capa_redirect = true;
    }
    ctx.out().ok();
    Ok(())
}

/// Client names and SETINFO values: printable ASCII without spaces.
pub fn valid_client_attr(v: &[u8]) -> bool {
    v.iter().all(|&b| b > b' ' && b <= b'~')
}

fn client_setname(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = &args[2];
    if !valid_client_attr(n) {
        return Err(CmdError::err("Client names cannot contain spaces, newlines or special characters."));
    }
    ctx.client.name = if n.is_empty() { None } else { Some(n.clone()) };
    ctx.out().ok();
    Ok(())
}

fn client_getname(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    match ctx.client.name.clone() {
        Some(n) => ctx.out().bulk(&n),
        None => ctx.out().null(),
    }
    Ok(())
}

fn client_setinfo(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let attr = String::from_utf8_lossy(&args[2]).into_owned();
    let v = &args[3];
    let is_name = is(&args[2], "lib-name");
    if !is_name && !is(&args[2], "lib-ver") {
        return Err(CmdError::err(format!("Unrecognized option '{attr}'")));
    }
    if !valid_client_attr(v) {
        return Err(CmdError::err(format!("{attr} cannot contain spaces, newlines or special characters.")));
    }
    let val = if v.is_empty() { None } else { Some(v.clone()) };
    if is_name {
        ctx.client.lib_name = val;
    } else {
        ctx.client.lib_ver = val;
    }
    ctx.out().ok();
    Ok(())
}

fn client_reply(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let a = &args[2];
    if is(a, "on") {
        ctx.client.reply_mode = ReplyMode::On;
        ctx.out().ok();
    } else if is(a, "off") {
        ctx.client.reply_mode = ReplyMode::Off;
    } else if is(a, "skip") {
        if ctx.client.reply_mode != ReplyMode::Off {
            ctx.client.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}

fn client_pause(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // Redis checks the mode before the timeout.
    let write_only = match args.len() {
        3 => false,
        4 if is(&args[3], "write") => true,
        4 if is(&args[3], "all") => false,
        4 => return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL")),
        _ => return Err(CmdError::subcommand(args)),
    };
    let ms = arg_i64(&args[2]).map_err(|_| CmdError::err("timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let until = ctx.now.saturating_add(ms);
    let p = match ctx.srv.pause {
        Some(old) if old.until > ctx.now => Pause { until: old.until.max(until), write_only: old.write_only && write_only },
        _ => Pause { until, write_only },
    };
    ctx.srv.set_pause(Some(p));
    ctx.out().ok();
    Ok(())
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]
fn client_unblock(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::subcommand(args));
    }
    let how = match args.get(3) {
        None => Release::Timeout,
        Some(a) if is(a, "timeout") => Release::Timeout,
        Some(a) if is(a, "error") => Release::Error,
        Some(_) => return Err(CmdError::err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
    };
    let id = arg_i64(&args[2])?;
    // The running client is never blocked, and is not in `srv.clients`.
    let done = u64::try_from(id).is_ok_and(|id| dispatch::release(ctx.srv, ctx.host.table(), id, how));
    ctx.out().int(i64::from(done));
    Ok(())
}

fn client_unpause(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    ctx.srv.set_pause(None);
    ctx.out().ok();
    Ok(())
}

fn client_no_evict(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ctx.client.no_evict = on_off(&args[2])?;
    ctx.out().ok();
    Ok(())
}

fn client_no_touch(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ctx.client.no_touch = on_off(&args[2])?;
    ctx.out().ok();
    Ok(())
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP]: options are checked in Redis's order, so the same
/// bad command gets the same error.
fn client_tracking(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut opts = Options::default();
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        let a = &args[i];
        if is(a, "redirect") && more {
            i += 1;
            if opts.redirect != 0 {
                return Err(CmdError::err("A client can only redirect to a single other client"));
            }
            let id = arg_i64(&args[i])?;
            let exists = id as u64 == ctx.client.id || ctx.srv.clients.contains_key(&(id as u64));
            if id <= 0 || !exists {
                return Err(CmdError::err("The client ID you want redirect to does not exist"));
            }
            opts.redirect = id as u64;
        } else if is(a, "bcast") {
            opts.bcast = true;
        } else if is(a, "optin") {
            opts.optin = true;
        } else if is(a, "optout") {
            opts.optout = true;
        } else if is(a, "noloop") {
            opts.noloop = true;
        } else if is(a, "prefix") && more {
            i += 1;
            opts.prefixes.push(args[i].clone());
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if is(&args[2], "off") {
        if ctx.srv.tracking.disable(ctx.client) {
            ctx.srv.apply_notify_flags();
        }
        ctx.out().ok();
        return Ok(());
    }
    if !is(&args[2], "on") {
        return Err(CmdError::Syntax);
    }
    if !opts.bcast && !opts.prefixes.is_empty() {
        return Err(CmdError::err("PREFIX option requires BCAST mode to be enabled"));
    }
    if let Some(t) = ctx.client.tracking.as_deref() {
        if t.bcast != opts.bcast {
            return Err(CmdError::err(
                "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
    }
    if opts.bcast && (opts.optin || opts.optout) {
        return Err(CmdError::err("OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if opts.optin && opts.optout {
        return Err(CmdError::err("You can't specify both OPTIN mode and OPTOUT mode"));
    }
    let (was_in, was_out) = ctx.client.tracking.as_deref().map_or((false, false), |t| (t.optin, t.optout));
    if (opts.optin && was_out) || (opts.optout && was_in) {
        return Err(CmdError::err(
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if opts.bcast {
        Tracking::check_prefixes(ctx.client, &opts.prefixes).map_err(CmdError::Custom)?;
    }
    if ctx.srv.tracking.enable(ctx.client, &opts) {
        ctx.srv.apply_notify_flags();
    }
    ctx.out().ok();
    Ok(())
}

/// CLIENT CACHING YES|NO: the next command's keys are (OPTIN) or are not
/// (OPTOUT) remembered.
fn client_caching(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(t) = ctx.client.tracking.as_deref_mut() else {
        return Err(CmdError::err("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    };
    if is(&args[2], "yes") {
        if !t.optin {
            return Err(CmdError::err("CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."));
        }
    } else if is(&args[2], "no") {
        if !t.optout {
            return Err(CmdError::err("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    t.caching = true;
    ctx.out().ok();
    Ok(())
}

fn client_getredir(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let id = ctx.client.tracking.as_ref().map_or(-1, |t| t.redirect as i64);
    ctx.out().int(id);
    Ok(())
}

fn client_trackinginfo(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let t = ctx.client.tracking.clone();
    let out = ctx.out();
    out.map(3);
    out.bulk(b"flags");
    let mut flags = vec![if t.is_some() { "on" } else { "off" }];
    if let Some(t) = t.as_deref() {
        let caching = t.caching;
        let pairs = [
            (t.bcast, "bcast"),
            (t.optin, "optin"),
            (t.optin && caching, "caching-yes"),
            (t.optout, "optout"),
            (t.optout && caching, "caching-no"),
            (t.noloop, "noloop"),
            (t.broken_redirect, "broken_redirect"),
        ];
        flags.extend(pairs.iter().filter(|p| p.0).map(|p| p.1));
    }
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"redirect");
    out.int(t.as_ref().map_or(-1, |t| t.redirect as i64));
    out.bulk(b"prefixes");
    let prefixes = t.map(|t| t.prefixes.clone()).unwrap_or_default();
    out.array(prefixes.len());
    for p in prefixes {
        out.bulk(&p);
    }
    Ok(())
}

fn client_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "client",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "    * MAXAGE <maxage>",
            "      Kill connections older than the specified age.",
            "    * NAME <name>, IDLE <seconds>, FLAGS <letters>, LIB-NAME <name>,",
            "      LIB-VER <version>, DB <db>, CAPA <letters>, IP <ip>",
            "      Kill connections with that name, idle that long or longer, with all",
            "      those CLIENT LIST flags, library, database, capabilities or IP.",
            "    * NOT-<option> <value> for ID, TYPE, ADDR, LADDR, USER, NAME, FLAGS,",
            "      LIB-NAME, LIB-VER, DB, CAPA and IP",
            "      Spare connections that match the option.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "    * ID <client-id> [<client-id> ...]",
            "      Return clients with those ids.",
            "    * Every KILL option but the old <ip:port> form",
            "      Return the clients it selects (SKIPME defaults to no).",
            "CAPA <capability> [<capability> ...]",
            "    Declare what the client supports: REDIRECT (a replica answers its",
            "    commands with -REDIRECT to its primary).",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
        ],
    );
    Ok(())
}

// ---------------------------------------------------------------- COMMAND

fn flag_names(s: &Spec) -> Vec<&'static str> {
    NAMES.iter().filter(|(f, _)| s.has(*f)).map(|(_, n)| *n).collect()
}

/// Writes one COMMAND INFO entry (10 fields, as Redis 7).
fn write_info(ctx: &mut Ctx, full: &str, s: &Spec) {
    let out = ctx.out();
    out.array(10);
    out.bulk(full.as_bytes());
    out.int(s.arity as i64);
    let fl = flag_names(s);
    out.set(fl.len());
    for f in fl {
        out.simple(f);
    }
    out.int(s.keys.first as i64);
    out.int(s.keys.last as i64);
    out.int(s.keys.step as i64);
    out.set(s.acl.len());
    for a in s.acl {
        out.simple(&format!("@{a}"));
    }
    let tips = super::tips::tips(full);
    out.set(tips.len());
    for t in tips {
        out.bulk(t.as_bytes());
    }
    // Key specs are a set in RESP3, as are the subcommands of a command
    // that has none (Redis's addReplySetLen); present subcommands an array.
    let specs = s.effective_key_specs();
    out.set(specs.len());
    for ks in &specs {
        write_key_spec(out, ks);
    }
    if s.subcommands.is_empty() {
        out.set(0);
        return;
    }
    out.array(s.subcommands.len());
    let mut subs: Vec<&Spec> = s.subcommands.iter().collect();
    subs.sort_by_key(|x| x.name);
    let subs: Vec<Spec> = subs.into_iter().cloned().collect();
    for sub in &subs {
        write_info(ctx, &format!("{full}|{}", sub.name), sub);
    }
}

/// One key spec as COMMAND INFO shows it.
fn write_key_spec(out: &mut resp::Reply, ks: &KeySpec) {
    out.map(3);
    out.bulk(b"flags");
    out.set(ks.flags.len());
    for f in ks.flags {
        out.simple(f);
    }
    out.bulk(b"begin_search");
    out.map(2);
    out.bulk(b"type");
    match ks.begin {
        Begin::Index(i) => {
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.int(i as i64);
        }
        Begin::Keyword(word, from) => {
            out.bulk(b"keyword");
            out.bulk(b"spec");
            out.map(2);
            out.bulk(b"keyword");
            out.bulk(word.as_bytes());
            out.bulk(b"startfrom");
            out.int(from as i64);
        }
        Begin::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
    out.bulk(b"find_keys");
    out.map(2);
    out.bulk(b"type");
    match ks.find {
        Find::Range { lastkey, keystep, limit } => {
            out.bulk(b"range");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"lastkey");
            out.int(lastkey as i64);
            out.bulk(b"keystep");
            out.int(keystep as i64);
            out.bulk(b"limit");
            out.int(limit as i64);
        }
        Find::Keynum { keynumidx, firstkey, keystep } => {
            out.bulk(b"keynum");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"keynumidx");
            out.int(keynumidx as i64);
            out.bulk(b"firstkey");
            out.int(firstkey as i64);
            out.bulk(b"keystep");
            out.int(keystep as i64);
        }
        Find::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
}

fn sorted_commands(ctx: &Ctx) -> Vec<(String, Spec)> {
    let mut v: Vec<(String, Spec)> = ctx.host.table().iter().map(|(n, s)| (n.clone(), s.clone())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Finds `name` or `container|sub` in the table.
fn find_spec(ctx: &Ctx, name: &[u8]) -> Option<(String, Spec)> {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    match lower.split_once('|') {
        None => ctx.host.table().get(&lower).map(|s| (lower.clone(), s.clone())),
        Some((c, sub)) => {
            let parent = ctx.host.table().get(c)?;
            parent.subcommand(sub.as_bytes()).map(|s| (lower.clone(), s.clone()))
        }
    }
}

fn command_all(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() != 1 {
        return Err(CmdError::err(format!(
            "unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(&args[1])
        )));
    }
    let all = sorted_commands(ctx);
    ctx.out().array(all.len());
    for (n, s) in &all {
        write_info(ctx, n, s);
    }
    Ok(())
}

fn command_count(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let n = ctx.host.table().len() as i64;
    ctx.out().int(n);
    Ok(())
}

fn command_info(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() == 2 {
        return command_all(ctx, &args[..1]);
    }
    ctx.out().array(args.len() - 2);
    for a in &args[2..] {
        match find_spec(ctx, a) {
            Some((n, s)) => write_info(ctx, &n, &s),
            None => ctx.out().null(),
        }
    }
    Ok(())
}

fn write_docs(ctx: &mut Ctx, s: &Spec, full: &str) {
    let subs: Vec<Spec> = {
        let mut v = s.subcommands.clone();
        v.sort_by_key(|x| x.name);
        v
    };
    let out = ctx.out();
    out.map(if subs.is_empty() { 3 } else { 4 });
    out.bulk(b"summary");
    out.bulk(s.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(s.since.as_bytes());
    out.bulk(b"group");
    out.bulk(s.group.as_bytes());
    if !subs.is_empty() {
        out.bulk(b"subcommands");
        out.map(subs.len());
        for sub in &subs {
            let n = format!("{full}|{}", sub.name);
            ctx.out().bulk(n.as_bytes());
            write_docs(ctx, sub, &n);
        }
    }
}

fn command_docs(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let found: Vec<(String, Spec)> = if args.len() == 2 {
        sorted_commands(ctx)
    } else {
        args[2..].iter().filter_map(|a| find_spec(ctx, a)).collect()
    };
    ctx.out().map(found.len());
    for (n, s) in &found {
        ctx.out().bulk(n.as_bytes());
        let group = if n.contains('|') { ctx.host.table().get(n.split('|').next().unwrap_or("")).map(|p| p.group) } else { None };
        let mut s = s.clone();
        if let Some(g) = group {
            s.group = g;
        }
        write_docs(ctx, &s, n);
    }
    Ok(())
}

fn command_list(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    enum Filter {
        None,
        Module,
        Acl(String),
        Pattern(Vec<u8>),
    }
    let filter = match args.len() {
        2 => Filter::None,
        5 if is(&args[2], "filterby") => {
            if is(&args[3], "module") {
                Filter::Module
            } else if is(&args[3], "aclcat") {
                Filter::Acl(String::from_utf8_lossy(&args[4]).to_ascii_lowercase())
            } else if is(&args[3], "pattern") {
                Filter::Pattern(args[4].clone())
            } else {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut names = Vec::new();
    for (n, s) in sorted_commands(ctx) {
        let mut rows = vec![(n.clone(), s.acl)];
        rows.extend(s.subcommands.iter().map(|x| (format!("{n}|{}", x.name), x.acl)));
        for (full, acl) in rows {
            let keep = match &filter {
                Filter::None => true,
                Filter::Module => false,
                Filter::Acl(c) => acl.iter().any(|a| a == c),
                Filter::Pattern(p) => crate::glob::matches(p, full.as_bytes(), true),
            };
            if keep {
                names.push(full);
            }
        }
    }
    let out = ctx.out();
    out.array(names.len());
    for n in names {
        out.bulk(n.as_bytes());
    }
    Ok(())
}

/// Keys of `argv` (the command to inspect) with their flags, or the error
/// Redis gives, checked in Redis's order.
fn getkeys(ctx: &Ctx, argv: &[Vec<u8>]) -> Result<Vec<(usize, KeyFlags)>, CmdError> {
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
    let Some(top) = ctx.host.table().get(&name) else {
        return Err(CmdError::err("Invalid command specified"));
    };
    let s = if top.subcommands.is_empty() || argv.len() == 1 {
        top
    } else {
        match argv.get(1).and_then(|a| top.subcommand(a)) {
            Some(sub) => sub,
            None => return Err(CmdError::err("Invalid command specified")),
        }
    };
    if !s.has_keys() {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !s.arity_ok(argv.len()) {
        return Err(CmdError::err("Invalid number of arguments specified for command"));
    }
    let keys = s.find_keys(argv);
    if keys.is_empty() && !s.has(NO_MANDATORY_KEYS) {
        return Err(CmdError::err("Invalid arguments specified for command"));
    }
    Ok(keys)
}

fn command_getkeys(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let keys = getkeys(ctx, &args[2..])?;
    let out = ctx.out();
    out.array(keys.len());
    for (p, _) in keys {
        out.bulk(&args[2 + p]);
    }
    Ok(())
}

fn command_getkeysandflags(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let keys = getkeys(ctx, &args[2..])?;
    let out = ctx.out();
    out.array(keys.len());
    for (p, flags) in keys {
        out.array(2);
        out.bulk(&args[2 + p]);
        out.set(flags.len());
        for f in flags {
            out.simple(f);
        }
    }
    Ok(())
}

fn command_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "command",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

// ---------------------------------------------------------------- SLOWLOG

fn slowlog_get(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::subcommand(args));
    }
    let mut count = 10i64;
    if let Some(a) = args.get(2) {
        count = arg_i64(a).ok().filter(|&n| n >= -1).ok_or_else(|| CmdError::err("count should be greater than or equal to -1"))?;
    }
    log_entries_reply(ctx, LogKind::Slow, count);
    Ok(())
}

/// Replies with the newest `count` entries (-1: all) of a command log.
fn log_entries_reply(ctx: &mut Ctx, kind: LogKind, count: i64) {
    let Ctx { srv, client, .. } = ctx;
    let log = &srv.commandlog[kind as usize];
    let n = if count == -1 { log.len() } else { (count as usize).min(log.len()) };
    let out = &mut client.reply;
    out.array(n);
    for e in log.entries.iter().take(n) {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.time);
        out.int(e.value as i64);
        out.array(e.argv.len());
        for a in &e.argv {
            out.bulk(a);
        }
        out.bulk(e.addr.as_bytes());
        out.bulk(&e.name);
    }
}

fn slowlog_len(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let n = ctx.srv.commandlog[LogKind::Slow as usize].len() as i64;
    ctx.out().int(n);
    Ok(())
}

fn slowlog_reset(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    ctx.srv.commandlog[LogKind::Slow as usize].clear();
    ctx.out().ok();
    Ok(())
}

// ---------------------------------------------------------------- COMMANDLOG

/// The log a COMMANDLOG type argument names, or Valkey's error.
fn log_kind(a: &[u8]) -> Result<LogKind, CmdError> {
    LogKind::parse(a).ok_or_else(|| CmdError::err("type should be one of the following: slow, large-request, large-reply"))
}

/// COMMANDLOG GET count type
fn commandlog_get(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let count = arg_i64(&args[2]).ok().filter(|&n| n >= -1).ok_or_else(|| CmdError::err("count should be greater than or equal to -1"))?;
    let kind = log_kind(&args[3])?;
    log_entries_reply(ctx, kind, count);
    Ok(())
}

/// COMMANDLOG LEN type
fn commandlog_len(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let kind = log_kind(&args[2])?;
    let n = ctx.srv.commandlog[kind as usize].len() as i64;
    ctx.out().int(n);
    Ok(())
}

/// COMMANDLOG RESET type
fn commandlog_reset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let kind = log_kind(&args[2])?;
    ctx.srv.commandlog[kind as usize].clear();
    ctx.out().ok();
    Ok(())
}

fn commandlog_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "commandlog",
        &[
            "GET <count> <type>",
            "    Return the newest <count> entries of the <type> command log (-1 means all).",
            "    Each entry holds: id, timestamp, the measure (microseconds for slow,",
            "    bytes for large-request and large-reply), arguments array,",
            "    client IP and port, client name.",
            "LEN <type>",
            "    Return the number of entries of the <type> command log.",
            "RESET <type>",
            "    Clear the <type> command log.",
            "    <type> is one of: slow, large-request, large-reply.",
        ],
    );
    Ok(())
}

fn slowlog_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "slowlog",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

// ---------------------------------------------------------------- LATENCY

fn latency_latest(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let mut rows: Vec<(String, i64, u64, u64)> = ctx
        .srv
        .latency
        .iter()
        .filter_map(|(n, s)| s.samples.back().map(|&(t, ms)| (n.clone(), t, ms, s.max)))
        .collect();
    rows.sort();
    let out = ctx.out();
    out.array(rows.len());
    for (n, t, ms, max) in rows {
        out.array(4);
        out.bulk(n.as_bytes());
        out.int(t);
        out.int(ms as i64);
        out.int(max as i64);
    }
    Ok(())
}

fn latency_history(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    let samples: Vec<(i64, u64)> = ctx.srv.latency.get(&name).map(|s| s.samples.iter().copied().collect()).unwrap_or_default();
    let out = ctx.out();
    out.array(samples.len());
    for (t, ms) in samples {
        out.array(2);
        out.int(t);
        out.int(ms as i64);
    }
    Ok(())
}

fn latency_reset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = if args.len() == 2 {
        let n = ctx.srv.latency.len();
        ctx.srv.latency.clear();
        n
    } else {
        args[2..].iter().filter(|a| ctx.srv.latency.remove(String::from_utf8_lossy(a).as_ref()).is_some()).count()
    };
    ctx.out().int(n as i64);
    Ok(())
}

fn latency_doctor(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let mut s = String::new();
    if ctx.srv.latency.is_empty() {
        s.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sleep tonight.\n");
    } else {
        s.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        let mut names: Vec<&String> = ctx.srv.latency.keys().collect();
        names.sort();
        for (i, n) in names.iter().enumerate() {
            let ser = &ctx.srv.latency[*n];
            let avg = if ser.samples.is_empty() { 0 } else { ser.samples.iter().map(|x| x.1).sum::<u64>() / ser.samples.len() as u64 };
            s.push_str(&format!(
                "{}. {}: {} latency spikes (average {}ms, mean deviation 0ms, period 0 sec). Worst all time event {}ms.\n",
                i + 1,
                n,
                ser.samples.len(),
                avg,
                ser.max
            ));
        }
        s.push_str("\nI have a few advices for you:\n\n- Check your system for latency sources outside the server.\n");
    }
    ctx.out().verbatim(s.as_bytes());
    Ok(())
}

fn latency_graph(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    let Some(ser) = ctx.srv.latency.get(&name).filter(|s| !s.samples.is_empty()) else {
        return Err(CmdError::err(format!("No samples available for event '{name}'")));
    };
    let max = ser.samples.iter().map(|x| x.1).max().unwrap_or(0);
    let min = ser.samples.iter().map(|x| x.1).min().unwrap_or(0);
    let mut s = format!("{name} - high {max} ms, low {min} ms (all time high {} ms)\n", ser.max);
    s.push_str(&"-".repeat(80));
    s.push('\n');
    const ROWS: u64 = 4;
    for row in (1..=ROWS).rev() {
        for &(_, ms) in &ser.samples {
            let level = if max == 0 { 0 } else { (ms * ROWS).div_ceil(max) };
            s.push(if level >= row { '#' } else { ' ' });
        }
        s.push('\n');
    }
    ctx.out().verbatim(s.as_bytes());
    Ok(())
}

fn latency_histogram(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut rows: Vec<(String, u64, Vec<u64>)> = Vec::new();
    let wanted: Option<Vec<String>> = (args.len() > 2).then(|| args[2..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect());
    for (n, st) in ctx.srv.cmdstats.sorted() {
        let recorded = st.recorded();
        if recorded == 0 {
            continue;
        }
        if let Some(w) = &wanted {
            if !w.iter().any(|x| x == n || n.strip_prefix(x.as_str()).is_some_and(|r| r.starts_with('|'))) {
                continue;
            }
        }
        rows.push((n.to_string(), recorded, st.histogram.to_vec()));
    }
    let out = ctx.out();
    out.map(rows.len());
    for (n, calls, hist) in rows {
        out.bulk(n.as_bytes());
        out.map(2);
        out.bulk(b"calls");
        out.int(calls as i64);
        out.bulk(b"histogram_usec");
        let last = hist.iter().rposition(|&c| c > 0).unwrap_or(0);
        let first = hist.iter().position(|&c| c > 0).unwrap_or(0);
        let buckets: Vec<(u64, u64)> = {
            let mut cum = 0;
            (first..=last)
                .filter_map(|i| {
                    cum += hist[i];
                    (hist[i] > 0).then_some((1u64 << i, cum))
                })
                .collect()
        };
        out.map(buckets.len());
        for (b, c) in buckets {
            out.int(b as i64);
            out.int(c as i64);
        }
    }
    Ok(())
}

fn latency_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "latency",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}

// ---------------------------------------------------------------- misc

fn monitor(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    if !ctx.client.monitor {
        ctx.client.monitor = true;
        let id = ctx.client.id;
        ctx.srv.monitors.push(id);
    }
    ctx.out().ok();
    Ok(())
}

fn time(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let us = unix_us();
    let out = ctx.out();
    out.array(2);
    out.bulk(format!("{}", us / 1_000_000).as_bytes());
    out.bulk(format!("{}", us % 1_000_000).as_bytes());
    Ok(())
}

fn lastsave(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let t = ctx.srv.last_save;
    ctx.out().int(t);
    Ok(())
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]: runs the shutdown
/// sequence (`crate::shutdown`); on success the client sees its connection
/// close, as with Redis, and the event loop stops after this command.
/// While replicas catch up the caller is blocked (so is any other caller
/// meanwhile); it sees the connection close when the server exits, or an
/// error if the shutdown is aborted or fails.
fn shutdown(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut abort = false;
    let mut words = Vec::new();
    for a in &args[1..] {
        if is(a, "abort") {
            abort = true;
        } else if is(a, "nosave") || is(a, "save") || is(a, "now") || is(a, "force") {
            words.push(String::from_utf8_lossy(a).into_owned());
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let flags = crate::shutdown::Flags::from_words(words.iter().map(String::as_str));
    if (abort && flags.any()) || (flags.save && flags.nosave) {
        return Err(CmdError::Syntax);
    }
    if abort {
        let waiters = crate::shutdown::abort(ctx.srv).map_err(|_| CmdError::err("No shutdown in progress."))?;
        for id in waiters {
            dispatch::release(ctx.srv, ctx.host.table(), id, Release::Failed(crate::shutdown::FAILED));
        }
        ctx.out().ok();
        return Ok(());
    }
    if !flags.now && !ctx.may_block() {
        return Err(CmdError::err("SHUTDOWN without NOW or ABORT isn't allowed for DENY BLOCKING client"));
    }
    if !flags.nosave && ctx.srv.script.is_some_and(|s| s.timed_out) {
        // Only SHUTDOWN NOSAVE may end a busy script.
        return Err(CmdError::Custom(ctx.srv.busy_error().into()));
    }
    let shutdown_block = BlockRequest::on_keys(Vec::new(), None, |_| false);
    if crate::shutdown::join(ctx.srv, ctx.client.id) {
        // A shutdown already waits for replicas: this caller waits with it.
        ctx.block(shutdown_block);
        return Ok(());
    }
    // The offset replicas must reach includes every write so far.
    crate::replication::drain(ctx.srv);
    match crate::shutdown::prepare(ctx.srv, ctx.host, flags).map_err(|_| CmdError::err(crate::shutdown::FAILED))? {
        crate::shutdown::Progress::Exiting => ctx.client.close_asap = true,
        crate::shutdown::Progress::Waiting => {
            crate::shutdown::join(ctx.srv, ctx.client.id);
            ctx.block(shutdown_block);
        }
    }
    Ok(())
}

/// MODULE LIST: densekv loads no modules.
fn module_list(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    ctx.out().array(0);
    Ok(())
}

fn module_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "module",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
    Ok(())
}

/// MODULE LOAD / LOADEX: densekv does not load Redis modules (their C
/// API is Redis's own process), so every load fails as a module that
/// cannot load fails in Redis: the warning in the log, Redis's error to
/// the client. Refused first where enable-module-command does not allow
/// the client, as Redis refuses it.
fn module_load(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if !ctx.srv.config.allows("enable-module-command", &ctx.client.addr) {
        return Err(CmdError::err(not_allowed("MODULE", "enable-module-command")));
    }
    let path = String::from_utf8_lossy(&args[2]);
    ctx.srv.config.log.warning(&format!("Module {path} failed to load: densekv does not load Redis modules"));
    Err(CmdError::err("Error loading the extension. Please check the server logs."))
}

/// MODULE UNLOAD: no module is ever loaded (Redis's error and warning).
fn module_unload(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if !ctx.srv.config.allows("enable-module-command", &ctx.client.addr) {
        return Err(CmdError::err(not_allowed("MODULE", "enable-module-command")));
    }
    let name = String::from_utf8_lossy(&args[2]);
    ctx.srv.config.log.warning(&format!("Error unloading module {name}: no such module with that name"));
    Err(CmdError::err("Error unloading module: no such module with that name"))
}

/// DEBUG PROTOCOL <type>: one sample reply of each RESP type, so clients
/// can test their parsers; the values are Redis's, byte for byte.
fn debug_protocol(ctx: &mut Ctx, kind: &[u8]) -> CmdResult {
    let resp3 = ctx.client.reply.resp3;
    let kind = String::from_utf8_lossy(kind).to_ascii_lowercase();
    if kind == "push" && !resp3 {
        return Err(CmdError::err("RESP2 is not supported by this command"));
    }
    let out = ctx.out();
    match kind.as_str() {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        // Redis's own sample value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        "double" => out.double(3.141),
        "bignum" => {
            let n = b"1234567999999999999999999999999999999";
            if resp3 {
                out.raw(b"(");
                out.raw(n);
                out.raw(b"\r\n");
            } else {
                out.bulk(n);
            }
        }
        "null" => out.null(),
        "array" | "set" => {
            if kind == "set" {
                out.set(3);
            } else {
                out.array(3);
            }
            (0..3).for_each(|j| out.int(j));
        }
        "map" => {
            out.map(3);
            for j in 0..3 {
                out.int(j);
                out.boolean(j == 1);
            }
        }
        "attrib" => {
            // An attribute is not a reply: a real one follows it.
            if resp3 {
                out.raw(b"|1\r\n");
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "true" | "false" => out.boolean(kind == "true"),
        "verbatim" => out.verbatim(b"This is a verbatim\nstring"),
        _ => {
            return Err(CmdError::err(
                "Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

/// DEBUG LISTPACK <key> and DEBUG QUICKLIST <key> [<level>]: as Redis, print
/// the value's packed structure on stdout (the server log) and reply a status
/// saying so; a value in another encoding gets Redis's error. densekv prints
/// the entries in stored order, each with the bytes Redis's listpack entry for
/// it takes; for a quicklist only the element count unless <level> is not 0.
fn debug_packed(ctx: &mut Ctx, sub: &str, args: &[Vec<u8>]) -> CmdResult {
    use storage::encoding::listpack::entry_len;
    use storage::ValueRef;
    let quicklist = sub == "quicklist";
    // Redis reads <level> with atoi: anything that is not a number is 0.
    let full = quicklist
        && args.get(3).is_some_and(|a| std::str::from_utf8(a).ok().and_then(|s| s.trim().parse::<i64>().ok()).unwrap_or(0) != 0);
    let now = ctx.now;
    let Some(v) = ctx.db().get(&args[2], now) else { return Err(CmdError::NoSuchKey) };
    let enc = match &v {
        ValueRef::List(l) => l.encoding_name(),
        ValueRef::Hash(h) => h.encoding_name(),
        ValueRef::ZSet(z) => z.encoding_name(),
        ValueRef::Set(s) => s.encoding_name(),
        _ => "",
    };
    if quicklist && enc != "quicklist" {
        return Err(CmdError::err("Not a quicklist encoded object."));
    }
    if !quicklist && enc != "listpack" && enc != "listpackex" {
        return Err(CmdError::err("Not a listpack encoded object."));
    }
    // The entries as Redis's listpack holds them: list elements, set members,
    // hash field-value pairs (plus the TTL in ms, 0 for none, in listpackex),
    // sorted-set member-score pairs (an integral score as an integer).
    let mut entries: Vec<Vec<u8>> = Vec::new();
    match &v {
        ValueRef::List(l) if !quicklist || full => entries.extend(l.iter().map(|e| e.to_vec())),
        ValueRef::Set(s) => entries.extend(s.iter().map(|m| m.to_vec())),
        ValueRef::Hash(h) => {
            for (f, val) in h.iter(now) {
                entries.push(f.to_vec());
                entries.push(val.to_vec());
                if enc == "listpackex" {
                    entries.push(h.expire_of(f, now).flatten().unwrap_or(0).to_string().into_bytes());
                }
            }
        }
        ValueRef::ZSet(z) => {
            for (m, score) in z.iter() {
                entries.push(m.to_vec());
                let s = if score.fract() == 0.0 && score.abs() < 9.2e18 {
                    (score as i64).to_string()
                } else {
                    resp::num::format_f64_g17(score)
                };
                entries.push(s.into_bytes());
            }
        }
        _ => {}
    }
    let mut text = if quicklist {
        let count = if let ValueRef::List(l) = &v { l.len() } else { 0 };
        format!("{{count : {count}}}\n")
    } else {
        let bytes = 7 + entries.iter().map(|e| entry_len(e)).sum::<usize>();
        format!("{{total bytes {bytes}}} {{num entries {}}}\n", entries.len())
    };
    // lpRepr's fields but the address and raw bytes: the entry's header
    // (tag) bytes, back-length bytes and payload bytes, as Redis encodes it.
    let mut offset = 6;
    for (i, e) in entries.iter().enumerate() {
        let (hdr, payload) = match storage::strref::parse_canonical_i64(e) {
            Some(0..=127) => (1, 0),
            Some(-4096..=4095) => (1, 1),
            Some(-32_768..=32_767) => (1, 2),
            Some(-8_388_608..=8_388_607) => (1, 3),
            Some(n) if i32::try_from(n).is_ok() => (1, 4),
            Some(_) => (1, 8),
            None if e.len() < 64 => (1, e.len()),
            None if e.len() < 4096 => (2, e.len()),
            None => (5, e.len()),
        };
        let total = entry_len(e);
        let shown = &e[..e.len().min(40)];
        text.push_str(&format!(
            "{{\n\tindex: {i:2},\n\toffset: {offset},\n\thdr+entrylen+backlen: {total:2},\n\thdrlen: {hdr:3},\n\tbacklen: {:2},\n\tpayload: {payload}\n\t[str]{}{}\n}}\n",
            total - hdr - payload,
            shown.escape_ascii(),
            if e.len() > 40 { "..." } else { "" }
        ));
        offset += total;
    }
    text.push_str("{end}\n\n");
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
    ctx.out().simple(if quicklist {
        "Quicklist structure printed on stdout"
    } else {
        "Listpack structure printed on stdout"
    });
    Ok(())
}

/// Redis's refusal of DEBUG (or MODULE LOAD, LOADEX, UNLOAD) when
/// enable-debug-command (enable-module-command) does not allow this
/// client. MODULE LIST and HELP are open, as in Redis.
fn not_allowed(cmd: &str, setting: &str) -> String {
    format!(
        "{cmd} command not allowed. If the {setting} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
    )
}

/// DEBUG <subcommand>: the subset Redis's tests and tools use.
/// DEBUG RELOAD [NOSAVE] [NOFLUSH]: saves the RDB file (unless NOSAVE),
/// empties the databases (unless NOFLUSH) and loads the file back, as
/// Redis does to check that a dataset survives the round trip.
fn debug_reload(ctx: &mut Ctx, opts: &[Vec<u8>]) -> CmdResult {
    let (mut save, mut flush) = (true, true);
    for o in opts {
        if is(o, "nosave") {
            save = false;
        } else if is(o, "noflush") {
            flush = false;
        } else if is(o, "merge") {
            return Err(CmdError::err("DEBUG RELOAD MERGE is not supported"));
        } else {
            return Err(CmdError::err("DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."));
        }
    }
    if save {
        crate::persist::save(ctx.srv, ctx.host).map_err(|e| {
            eprintln!("Error saving DB on disk: {e}");
            CmdError::Custom("ERR".into())
        })?;
    }
    if flush {
        for db in &mut ctx.srv.dbs {
            db.clear();
        }
    }
    if let Err(e) = crate::persist::load(ctx.srv, ctx.host) {
        eprintln!("{e}");
        return Err(CmdError::err("Error trying to load the RDB dump, check server logs."));
    }
    ctx.out().ok();
    Ok(())
}

/// DEBUG DIGEST-VALUE key [key ...]: each value's digest (all zeros for
/// a missing key), logically expired keys included, as Redis does.
fn debug_digest_value(ctx: &mut Ctx, keys: &[Vec<u8>]) -> CmdResult {
    let mut digests = Vec::with_capacity(keys.len());
    let db = ctx.db();
    let touch = std::mem::replace(&mut db.no_touch, true);
    for k in keys {
        // i64::MIN as "now": nothing counts as expired, nothing is reclaimed.
        let has_deadline = db.expire_of(k, i64::MIN).flatten().is_some();
        let d = db.get(k, i64::MIN).map_or([0; 20], |v| crate::digest::value(v, has_deadline));
        digests.push(crate::digest::hex(&d));
    }
    db.no_touch = touch;
    let out = ctx.out();
    out.array(digests.len());
    digests.iter().for_each(|d| out.simple(d));
    Ok(())
}

/// DEBUG POPULATE count [prefix] [size]: adds `count` string keys
/// `prefix:N` (prefix "key") holding `value:N`, cut or padded with zero
/// bytes to `size` when given; keys that exist are left alone. As in
/// Redis, the keys are not counted as changes for the save points.
fn debug_populate(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let positive = |a: &[u8]| match resp::num::parse_i64(a) {
        Some(n) if n >= 0 => Ok(n as u64),
        Some(_) => Err(CmdError::err("value is out of range, must be positive")),
        None => Err(CmdError::NotInt),
    };
    let count = positive(&args[2])?;
    let prefix: &[u8] = args.get(3).map_or(b"key", |p| p.as_slice());
    let size = match args.get(4) {
        Some(a) => Some(positive(a)? as usize),
        None => None,
    };
    let now = ctx.now;
    for j in 0..count {
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!(":{j}").as_bytes());
        if ctx.db().contains(&key, now) {
            continue;
        }
        let mut val = format!("value:{j}").into_bytes();
        if let Some(n) = size.filter(|&n| n > 0) {
            val.resize(n, 0);
        }
        ctx.db().insert(&key, storage::Value::string(&val), storage::Ttl::Clear, now);
        ctx.key_touched(&key);
    }
    ctx.out().ok();
    Ok(())
}

/// DEBUG REPLYBUFFER PEAK-RESET-TIME <never|reset|ms> | RESIZING <0|1>.
fn debug_replybuffer(srv: &mut Server, args: &[Vec<u8>]) -> Result<(), CmdError> {
    let (what, arg) = (&args[2], &args[3]);
    if what.eq_ignore_ascii_case(b"peak-reset-time") {
        srv.reply_peak_reset = if arg.eq_ignore_ascii_case(b"never") {
            None
        } else if arg.eq_ignore_ascii_case(b"reset") {
            Some(Duration::from_millis(crate::client::REPLY_PEAK_RESET_MS))
        } else {
            // A negative time is "never", as in Redis.
            u64::try_from(crate::command::arg_i64(arg)?).ok().map(Duration::from_millis)
        };
    } else if what.eq_ignore_ascii_case(b"resizing") {
        srv.reply_resizing = atoi(arg) != 0;
    } else {
        return Err(CmdError::subcommand(args));
    }
    Ok(())
}

/// An argument as C's atoi reads it: leading digits (after an optional
/// sign), 0 when there are none.
fn atoi(a: &[u8]) -> i64 {
    let s = std::str::from_utf8(a).unwrap_or("").trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = digits.bytes().take_while(u8::is_ascii_digit).fold(0i64, |n, d| n.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    if neg {
        -n
    } else {
        n
    }
}

/// DEBUG OBJECT's line for `key`.
///
/// Errors: no such key.
fn debug_object(ctx: &mut Ctx, key: &[u8], now: i64) -> Result<String, CmdError> {
    let idle = ctx.db().idle_secs(key, now);
    let list_cfg = ctx.srv.config.list;
    let Some(v) = ctx.db().get(key, now) else { return Err(CmdError::NoSuchKey) };
    let (enc, len) = match v {
        storage::ValueRef::Str(storage::StrRef::Int(n)) => ("int", storage::strref::int_len(n)),
        storage::ValueRef::Str(s) => (crate::commands::keys::encoding_name(v), s.len()),
        storage::ValueRef::Hash(h) => (h.encoding_name(), h.mem_usage()),
        storage::ValueRef::ZSet(z) => (z.encoding_name(), z.mem_usage()),
        storage::ValueRef::List(l) => (l.encoding_name(), l.mem_usage()),
        storage::ValueRef::Set(s) => (s.encoding_name(), s.mem_usage()),
        storage::ValueRef::Stream(s) => (s.encoding_name(), s.mem_usage()),
    };
    // Redis's quicklist fields, and how many nodes are kept compressed.
    let ql = match v {
        storage::ValueRef::List(l) => l.quicklist_stats().map_or(String::new(), |(nodes, packed, bytes)| {
            let cfg = list_cfg;
            format!(
                " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{bytes} ql_compressed_nodes:{packed}",
                l.len() as f64 / nodes.max(1) as f64,
                cfg.fill,
                u8::from(cfg.compress != 0),
            )
        }),
        _ => String::new(),
    };
    Ok(format!(
        "Value at:0x{:012x} refcount:1 encoding:{enc} serializedlength:{} lru:0 lru_seconds_idle:{}{ql}",
        ctx.srv.random() & 0xffff_ffff_fff0,
        len + 1,
        idle.unwrap_or(0)
    ))
}

fn debug(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if !ctx.srv.config.allows("enable-debug-command", &ctx.client.addr) {
        return Err(CmdError::err(not_allowed("DEBUG", "enable-debug-command")));
    }
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("sleep", 3) => {
            let secs = crate::command::arg_f64(&args[2])?;
            if secs > 0.0 {
                std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
            }
        }
        ("set-active-expire", 3) => ctx.srv.active_expire_enabled = args[2] != b"0",
        ("set-skip-checksum-validation", 3) => ctx.srv.skip_checksum_validation = atoi(&args[2]) != 0,
        ("pause-cron", 3) => ctx.srv.cron_paused = args[2] != b"0",
        ("aof-flush-sleep", 3) => ctx.srv.aof.flush_sleep_us = u64::try_from(crate::command::arg_i64(&args[2])?).unwrap_or(0),
        ("object", 3) => {
            let now = ctx.now;
            // The key as stored, due or not (Redis's DEBUG OBJECT finds it
            // in the dictionary without expiring it).
            ctx.db().ignore_deadlines = true;
            let found = debug_object(ctx, &args[2], now);
            ctx.db().ignore_deadlines = false;
            let line = found?;
            ctx.out().simple(&line);
            return Ok(());
        }
        ("change-repl-id", 2) => {
            // A new history: nobody may continue the old one (Redis's
            // changeReplicationId + clearReplicationId2).
            ctx.srv.repl.replid = crate::repl::random_id();
            ctx.srv.repl.clear_replid2();
        }
        ("replicate", n) if n >= 3 => crate::replication::replicate_only(ctx.srv, &args[2..]),
        ("quicklist-packed-threshold", 3) | ("stringmatch-len", _) | ("set-disable-deny-scripts", 3) => {}
        ("listpack", 3) | ("quicklist", 3 | 4) => return debug_packed(ctx, &sub, args),
        ("protocol", 3) => return debug_protocol(ctx, &args[2]),
        ("reload" | "populate", _) if ctx.srv.persist.loading.is_some() => return Err(CmdError::Custom(crate::dispatch::LOADING_ERROR.into())),
        ("reload", _) => return debug_reload(ctx, &args[2..]),
        ("digest", 2) => {
            let d = crate::digest::dataset(&ctx.srv.dbs);
            ctx.out().simple(&crate::digest::hex(&d));
            return Ok(());
        }
        ("digest-value", _) => return debug_digest_value(ctx, &args[2..]),
        ("populate", 3..=5) => return debug_populate(ctx, args),
        ("log", 3) => ctx.srv.config.log.warning(&format!("DEBUG LOG: {}", String::from_utf8_lossy(&args[2]))),
        ("loadaof", _) => {
            crate::aof::debug_loadaof(ctx.srv, ctx.host).map_err(CmdError::err)?;
            ctx.srv.dirty = 0;
            ctx.srv.persist.dirty_at_save = 0;
        }
        ("replybuffer", 4) => debug_replybuffer(ctx.srv, args)?,
        ("config-rewrite-force-all", 2) => ctx.srv.rewrite_config(true).map_err(|e| CmdError::err(format!("CONFIG-REWRITE-FORCE-ALL failed: {e}")))?,
        ("drop-cluster-packet-filter", 3) => {
            // The message type the bus drops on receipt; -1 none, -2 all.
            let t = crate::command::arg_i64(&args[2])?;
            ctx.srv.cluster_drop_filter = i32::try_from(t).unwrap_or(-1);
        }
        ("clusterlink", 5) if is(&args[2], "kill") => return debug_clusterlink_kill(ctx, &args[3], &args[4]),
        // On request, the two ways a bug ends the server: a panic and a
        // failed assertion, each reported in the log (crash.rs).
        ("panic", 2) => panic!("DEBUG PANIC called at Unix time {}", ctx.now / 1000),
        ("assert", 2) => assert!(std::hint::black_box(1) == 2, "DEBUG ASSERT: an assertion that fails, on request"),
        ("help", 2) => {
            help_reply(
                ctx,
                "debug",
                &[
                    "ASSERT",
                    "    Crash the server with a failed assertion, reported in the log.",
                    "CLUSTERLINK KILL <to|from|all> <node-id>",
                    "    Kills the link based on the direction to/from (both) with the provided node.",
                    "CONFIG-REWRITE-FORCE-ALL",
                    "    Like CONFIG REWRITE but writes all configuration options, including",
                    "    keywords not listed in original configuration file or default values.",
                    "DIGEST",
                    "    Output a hex signature representing the current DB content.",
                    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
                    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
                    "DIGEST-VALUE <key> [<key> ...]",
                    "    Output a hex signature of the values of all the specified keys.",
                    "LISTPACK <key>",
                    "    Show low level info about the listpack encoding of <key>.",
                    "LOG <message>",
                    "    Write <message> to the server log.",
                    "OBJECT <key>",
                    "    Show low level info about `key` and associated value.",
                    "AOF-FLUSH-SLEEP <microseconds>",
                    "    Wait this long before each write of buffered commands to the AOF (0: never).",
                    "PANIC",
                    "    Crash the server with a panic, reported in the log.",
                    "PAUSE-CRON <0|1>",
                    "    Stop periodic cron job processing.",
                    "POPULATE <count> [<prefix>] [<size>]",
                    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
                    "    it is used instead of the 'key' prefix. These are not propagated to",
                    "    replicas. Cluster slots are not respected so keys not belonging to the",
                    "    current node can be created in cluster mode.",
                    "PROTOCOL <type>",
                    "    Reply with a test value of the specified type. <type> can be: string,",
                    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
                    "    true, false.",
                    "REPLYBUFFER PEAK-RESET-TIME <NEVER|RESET|milliseconds>",
                    "    How often the peak a client's reply buffer is sized by starts over;",
                    "    NEVER keeps the last peak, RESET restores the default (5000).",
                    "REPLYBUFFER RESIZING <0|1>",
                    "    Turn the cron's sizing of client reply buffers off or on.",
                    "SET-ACTIVE-EXPIRE <0|1>",
                    "    Setting it to 0 disables expiring keys in background when they are not accessed.",
                    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
                    "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
                    "SLEEP <seconds>",
                    "    Stop the server for <seconds>. Decimals allowed.",
                ],
            );
            return Ok(());
        }
        _ => {
            return Err(CmdError::subcommand(args))
        }
    }
    ctx.out().ok();
    Ok(())
}

/// DEBUG CLUSTERLINK KILL to|from|all <node-id>: closes our outbound
/// link to the node, its inbound link to us, or both (the event loop
/// carries the closes out after the command, as the bus's own).
fn debug_clusterlink_kill(ctx: &mut Ctx, dir: &[u8], node: &[u8]) -> CmdResult {
    let Some(cl) = ctx.srv.cluster.as_deref_mut() else {
        return Err(CmdError::err("Debug option only available for cluster mode enabled setup!"));
    };
    let found = <[u8; 40]>::try_from(node).ok().and_then(|n| cl.nodes.get(&n));
    let Some(n) = found else {
        return Err(CmdError::err(format!("Unknown node {}", String::from_utf8_lossy(node))));
    };
    let (to, from) = match () {
        _ if is(dir, "to") => (n.link, None),
        _ if is(dir, "from") => (None, n.inbound_link),
        _ if is(dir, "all") => (n.link, n.inbound_link),
        _ => return Err(CmdError::err(format!("Unknown direction {}", String::from_utf8_lossy(dir)))),
    };
    for link in to.into_iter().chain(from) {
        cl.actions.push(crate::cluster::Action::Close { link });
    }
    ctx.out().ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_attr_validation() {
        assert!(valid_client_attr(b"redis-py"));
        assert!(!valid_client_attr(b"a b"));
        assert!(!valid_client_attr(b"a\n"));
        assert!(valid_client_attr(b""));
    }

    #[test]
    fn table_rows_have_docs() {
        for s in table() {
            assert!(!s.summary.is_empty(), "{} has no summary", s.name);
        }
    }
}
