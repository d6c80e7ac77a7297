//! Server commands: DBSIZE FLUSHDB FLUSHALL SAVE BGREWRITEAOF CONFIG INFO.
//!
//! INFO prints Redis 7.4's sections and field names, because clients and
//! monitoring tools parse them; fields for machinery densekv does not have
//! (forks, replication links) keep Redis's idle values.

use crate::command::flags::*;
use crate::command::{container, is, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::bgsave::Purpose;
use crate::client::ReplRole;
use crate::memory;
use std::sync::atomic::Ordering::Relaxed;
use crate::server::{unix_ms, unix_us, RATE_BUSY_NS, RATE_CYCLES, RATE_NET_IN, RATE_NET_OUT, RATE_OPS, RATE_REPL_IN, RATE_REPL_OUT};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    vec![
        spec("dbsize", 1, READONLY | FAST, NO_KEYS, dbsize).acl(&["keyspace", "read", "fast"]).group("server").doc("Returns the number of keys in the database.", "1.0.0"),
        spec("flushdb", -1, WRITE, NO_KEYS, flushdb).acl(&["keyspace", "write", "slow", "dangerous"]).group("server").doc("Removes all keys from the current database.", "1.0.0"),
        spec("flushall", -1, WRITE, NO_KEYS, flushall).acl(&["keyspace", "write", "slow", "dangerous"]).group("server").doc("Removes all keys from all databases.", "1.0.0"),
        container(
            "config",
            vec![
                spec("get", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config_get).acl(&["admin", "slow", "dangerous"]).doc("Returns the effective values of configuration parameters.", "2.0.0"),
                spec("set", -4, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config_set).acl(&["admin", "slow", "dangerous"]).doc("Sets configuration parameters in-flight.", "2.0.0"),
                spec("resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config_resetstat).acl(&["admin", "slow", "dangerous"]).doc("Resets the server's statistics.", "2.0.0"),
                spec("rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config_rewrite).acl(&["admin", "slow", "dangerous"]).doc("Persists the effective configuration to file.", "2.8.0"),
                spec("help", 2, LOADING | STALE, NO_KEYS, config_help).acl(&["slow"]).doc("Returns helpful text about the different subcommands.", "5.0.0"),
            ],
        ),
        spec("save", 1, ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING, NO_KEYS, save).acl(&["admin", "slow", "dangerous"]).group("server").doc("Synchronously saves the database(s) to disk.", "1.0.0"),
        spec("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, NO_KEYS, bgsave).acl(&["admin", "slow", "dangerous"]).group("server").doc("Asynchronously saves the database(s) to disk.", "1.0.0"),
        spec("bgrewriteaof", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, NO_KEYS, bgrewriteaof).acl(&["admin", "slow", "dangerous"]).group("server").doc("Asynchronously rewrites the append-only file to disk.", "1.0.0"),
        spec("info", -1, LOADING | STALE, NO_KEYS, info).acl(&["slow", "dangerous"]).group("server").doc("Returns information and statistics about the server.", "1.0.0"),
    ]
}

/// DBSIZE
pub fn dbsize(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let n = ctx.db().len() as i64;
    ctx.out().int(n);
    Ok(())
}

/// How a flush frees what it removes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// Inline, not counted (SYNC inside a transaction).
    Sync,
    /// Inline, counted as lazily freed: Redis runs a SYNC flush as a
    /// blocking asynchronous one, so the client sees the same either way.
    Blocking,
    /// On the freeing thread (ASYNC, or lazyfree-lazy-user-flush).
    Async,
}

/// Parses [ASYNC | SYNC].
fn flush_mode(ctx: &Ctx, args: &[Vec<u8>]) -> Result<Flush, CmdError> {
    let asked = match args.get(1) {
        None => ctx.srv.config.flag("lazyfree-lazy-user-flush"),
        Some(a) if args.len() == 2 && is(a, "sync") => false,
        Some(a) if args.len() == 2 && is(a, "async") => true,
        _ => return Err(CmdError::Syntax),
    };
    Ok(match (asked, ctx.client.in_exec) {
        (true, _) => Flush::Async,
        (false, false) => Flush::Blocking,
        (false, true) => Flush::Sync,
    })
}

/// Empties database `i` the way `mode` says.
fn flush_db(srv: &mut crate::server::Server, i: usize, mode: Flush) {
    let db = &mut srv.dbs[i];
    let n = db.len() as u64;
    match mode {
        Flush::Async if n > 0 => {
            // A running background save keeps the old table and frees it
            // itself, a segment at a time, once it has what it needs.
            if let Some(old) = db.detach() {
                srv.lazyfree.free(Box::new(old), n);
            }
        }
        Flush::Blocking => {
            db.clear();
            srv.lazyfree.count_freed(n);
        }
        _ => db.clear(),
    }
    // Clients blocked for a key's deletion (XREADGROUP) must hear of it.
    srv.blocking.signal_db(i);
}

/// FLUSHDB [ASYNC | SYNC]
pub fn flushdb(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mode = flush_mode(ctx, args)?;
    let db = ctx.client.db;
    ctx.srv.touch_all_watched(Some(db), ctx.client);
    crate::publish::invalidate_all(ctx.srv, Some(&*ctx.client));
    flush_db(ctx.srv, db, mode);
    ctx.srv.dirty += 1;
    ctx.out().ok();
    Ok(())
}

/// FLUSHALL [ASYNC | SYNC]. As Redis does, it aborts a background save
/// and, with save points set, saves the empty dataset at once.
pub fn flushall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mode = flush_mode(ctx, args)?;
    ctx.srv.touch_all_watched(None, ctx.client);
    crate::publish::invalidate_all(ctx.srv, Some(&*ctx.client));
    crate::persist::rdb_bgsave_abort(ctx.srv);
    for db in 0..ctx.srv.dbs.len() {
        flush_db(ctx.srv, db, mode);
    }
    // Counted before the save, which then holds it: with save points a
    // FLUSHALL leaves no change unsaved (rdb_changes_since_last_save 0),
    // as Redis's rdbSave resets its counter after the flush.
    ctx.srv.dirty += 1;
    if !ctx.srv.config.save_points().is_empty() {
        if let Err(e) = crate::persist::save(ctx.srv, ctx.host) {
            ctx.srv.config.log.warning(&e);
        }
    }
    ctx.out().ok();
    Ok(())
}

/// SAVE: writes the RDB file on this thread, as Redis does.
pub fn save(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if matches!(crate::persist::bgsave_running(ctx.srv), Some(Purpose::Rdb | Purpose::Repl)) {
        return Err(CmdError::err("Background save already in progress"));
    }
    match crate::persist::save(ctx.srv, ctx.host) {
        Ok(()) => {
            ctx.out().ok();
            Ok(())
        }
        Err(e) => {
            eprintln!("Error saving DB on disk: {e}");
            Err(CmdError::Custom("ERR".into()))
        }
    }
}

/// BGSAVE [SCHEDULE]: starts a background save (without fork: the
/// executor serializes between commands, a thread writes the file).
/// While an AOF rewrite runs it is refused, or with SCHEDULE started when
/// the rewrite ends; inside a transaction it is scheduled, as Redis does.
pub fn bgsave(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let schedule = match args.len() {
        1 => false,
        2 if is(&args[1], "schedule") => true,
        _ => return Err(CmdError::Syntax),
    };
    let running = crate::persist::bgsave_running(ctx.srv);
    if matches!(running, Some(Purpose::Rdb | Purpose::Repl)) {
        return Err(CmdError::err("Background save already in progress"));
    }
    if running.is_some() || ctx.client.in_exec {
        if !schedule && !ctx.client.in_exec {
            return Err(CmdError::err(
                "Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
            ));
        }
        ctx.srv.persist.bg_scheduled = true;
        ctx.out().simple("Background saving scheduled");
        return Ok(());
    }
    crate::persist::bgsave_start(ctx.srv, ctx.host).map_err(CmdError::err)?;
    ctx.out().simple("Background saving started");
    Ok(())
}

/// BGREWRITEAOF: rewrites the AOF in the background (`aof::rewrite_background`).
/// Inside a transaction or script it is scheduled for the next cron tick,
/// so the new incremental file cannot receive writes the new base holds.
pub fn bgrewriteaof(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if crate::aof::rewrite_running(ctx.srv) {
        // Its base may be written already, the switch to it not yet made.
        return Err(CmdError::err("Background append only file rewriting already in progress"));
    }
    match crate::persist::bgsave_running(ctx.srv) {
        Some(Purpose::AofBase) => return Err(CmdError::err("Background append only file rewriting already in progress")),
        Some(Purpose::Rdb | Purpose::Repl) => {
            ctx.srv.aof.rewrite_scheduled = true;
            ctx.out().simple("Background append only file rewriting scheduled");
            return Ok(());
        }
        None => {}
    }
    if ctx.srv.feed.depth() > 1 {
        ctx.srv.aof.rewrite_scheduled = true;
        ctx.out().simple("Background append only file rewriting scheduled");
        return Ok(());
    }
    match crate::aof::rewrite_background(ctx.srv, ctx.host) {
        Ok(()) => {
            ctx.out().simple("Background append only file rewriting started");
            Ok(())
        }
        Err(e) => {
            ctx.srv.config.log.warning(&e);
            Err(CmdError::err("Can't execute an AOF background rewriting. Please check the server logs for more information."))
        }
    }
}

/// CONFIG GET parameter [parameter ...]
pub fn config_get(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut pairs: Vec<(&'static str, String)> = Vec::new();
    for pat in &args[2..] {
        for (n, v) in ctx.srv.config.matching(pat) {
            if !pairs.iter().any(|(m, _)| *m == n) {
                pairs.push((n, v));
            }
        }
    }
    let out = ctx.out();
    out.map(pairs.len());
    for (n, v) in pairs {
        out.bulk(n.as_bytes());
        out.bulk(v.as_bytes());
    }
    Ok(())
}

/// What CONFIG SET refuses while a data set loads: where files are, and
/// how a replica loads its primary's image.
const DENY_LOADING: &[&str] = &["dir", "repl-diskless-load"];

/// After a CONFIG SET failed and its old settings are back: applies again
/// those of `seen` that act outside the settings (the process's
/// oom_score_adj, the TLS configuration).
fn reapply(srv: &mut crate::server::Server, seen: &[&str]) {
    if seen.iter().any(|n| n.starts_with("oom-score-adj")) {
        let _ = srv.apply_oom_score();
    }
    if seen.iter().any(|n| n.starts_with("tls-")) {
        let _ = srv.reload_tls();
    }
}

/// CONFIG SET parameter value [parameter value ...]; all or nothing.
pub fn config_set(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut next = ctx.srv.config.clone();
    let mut seen = Vec::new();
    for pair in args[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_string();
        let value = String::from_utf8_lossy(&pair[1]).to_string();
        let param = crate::config::lookup(&name);
        let canon = param.map(|p| p.name);
        if param.is_some_and(|p| p.protected) && !ctx.srv.config.allows("enable-protected-configs", &ctx.client.addr) {
            return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - can't set protected config")));
        }
        if let Some(c) = canon {
            // Settings a load in progress depends on wait for its end
            // (Redis's DENY_LOADING_CONFIG).
            if ctx.srv.persist.loading.is_some() && DENY_LOADING.contains(&c) {
                return Err(CmdError::Custom(crate::dispatch::LOADING_ERROR.into()));
            }
            if seen.contains(&c) {
                return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter")));
            }
            seen.push(c);
        }
        next.set(&name, &value, false).map_err(|e| {
            if canon.is_none() {
                CmdError::err(format!("Unknown option or number of arguments for CONFIG SET - '{name}'"))
            } else {
                CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {e}"))
            }
        })?;
    }
    let pass_before = ctx.srv.config.get("requirepass").map(str::to_string);
    let before = std::mem::replace(&mut ctx.srv.config, next);
    if let Some(name) = seen.iter().find(|n| n.starts_with("oom-score-adj")) {
        if ctx.srv.apply_oom_score().is_err() {
            // As Redis rolls back: the old settings, applied again.
            ctx.srv.config = before;
            let _ = ctx.srv.apply_oom_score();
            return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - Failed to set current oom_score_adj. Check server logs.")));
        }
    }
    if let Some(name) = seen.iter().find(|n| n.starts_with("tls-")) {
        // New certificates (or settings) for the connections to come.
        if ctx.srv.reload_tls().is_err() {
            ctx.srv.config = before;
            return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - Unable to update TLS configuration. Check server logs.")));
        }
    }
    // New I/O threads start (or the last ones begin to retire) before the
    // change is kept; clients move to and from them between commands.
    let threads = |c: &crate::config::Config| c.get("io-threads").and_then(|v| v.parse::<usize>().ok()).unwrap_or(1);
    let (io_threads, io_threads_before) = (threads(&ctx.srv.config), threads(&before));
    if io_threads != io_threads_before {
        if let Err(e) = ctx.host.set_io_threads(ctx.srv, io_threads) {
            ctx.srv.config = before;
            reapply(ctx.srv, &seen);
            return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument 'io-threads') - {e}")));
        }
    }
    // New addresses are listened on before the change is kept (the event
    // loop swaps its sockets), as Redis rebinds on CONFIG SET.
    let addr = |c: &crate::config::Config| (c.get("bind").unwrap_or("").to_string(), c.port, c.get("tls-port").and_then(|v| v.parse::<u16>().ok()).unwrap_or(0));
    let (bind, port, tls_port) = addr(&ctx.srv.config);
    if (bind.clone(), port, tls_port) != addr(&before) {
        let name = ["bind", "port", "tls-port"].into_iter().find(|n| seen.contains(n)).unwrap_or("port");
        let now = std::mem::replace(&mut ctx.srv.config, before);
        if let Err(e) = ctx.host.relisten(ctx.srv, &bind, port, tls_port) {
            // Everything goes back, what was already applied too (Redis
            // re-applies the old values).
            reapply(ctx.srv, &seen);
            if io_threads != io_threads_before {
                let _ = ctx.host.set_io_threads(ctx.srv, io_threads_before);
            }
            return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {e}")));
        }
        ctx.srv.config = now;
    } else {
        drop(before);
    }
    if seen.iter().any(|n| matches!(*n, "proc-title-template" | "port" | "tls-port" | "bind")) {
        ctx.srv.apply_proc_title();
    }
    ctx.srv.apply_db_settings();
    ctx.srv.apply_cluster_settings();
    crate::cron::update_hz(ctx.srv);
    crate::crash::configure_from(&ctx.srv.config);
    crate::replication::config_changed(ctx.srv);
    crate::persist::config_changed(ctx.srv);
    // A lower maxmemory (or a policy that can now evict) takes effect at
    // once, as Redis starts evicting on CONFIG SET: the event loop evicts
    // after this turn, clients waiting on no command included.
    if ctx.srv.config.maxmemory != 0 {
        ctx.srv.evict.unfinished = true;
    }
    // So does a lower maxmemory-clients: clients over it go once this
    // command's turn ends.
    ctx.srv.client_mem_stale = true;
    ctx.srv.acl.pubsub_all = ctx.srv.config.get("acl-pubsub-default") == Some("allchannels");
    // requirepass is the default user's password (setting it replaces its
    // passwords; clearing it makes it nopass).
    let pass = ctx.srv.config.get("requirepass").map(str::to_string);
    if pass != pass_before {
        ctx.srv.acl.set_requirepass(pass.unwrap_or_default().as_bytes());
    }
    if let Err(e) = crate::aof::config_changed(ctx.srv, ctx.host) {
        let _ = ctx.srv.config.set("appendonly", "no", false);
        return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument 'appendonly') - {e}")));
    }
    ctx.out().ok();
    Ok(())
}

/// CONFIG RESETSTAT
pub fn config_resetstat(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    ctx.srv.reset_stats();
    ctx.out().ok();
    Ok(())
}

/// CONFIG REWRITE: keeps the file's lines that name no known parameter and
/// writes every non-default parameter after them, then the ACL users (as
/// `user` lines) unless an ACL file holds them.
pub fn config_rewrite(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    ctx.srv.rewrite_config(false).map_err(CmdError::err)?;
    ctx.out().ok();
    Ok(())
}

/// CONFIG HELP
pub fn config_help(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    crate::commands::introspection::help_reply(
        ctx,
        "config",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

/// Sections INFO prints with no argument or `default`.
const DEFAULT_SECTIONS: &[&str] =
    &["server", "clients", "memory", "persistence", "stats", "replication", "cpu", "module_list", "errorstats", "cluster", "keyspace"];
/// Every section, in output order.
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "threads",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "compression",
];

/// Which sections an INFO call asks for (lowercase).
pub fn wanted_sections(args: &[Vec<u8>]) -> Vec<String> {
    let mut want: Vec<String> = Vec::new();
    if args.len() <= 1 {
        want.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }
    for a in args.iter().skip(1) {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        match a.as_str() {
            "default" => want.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string())),
            "all" | "everything" => want.extend(ALL_SECTIONS.iter().map(|s| s.to_string())),
            _ => want.push(a),
        }
    }
    want
}

/// `1.23M`-style sizes, as Redis's bytesToHuman prints them.
fn human(n: u64) -> String {
    let f = n as f64;
    let units = [(1u64 << 50, "P"), (1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (div, u) in units {
        if n >= div {
            return format!("{:.2}{u}", f / div as f64);
        }
    }
    format!("{n}B")
}

/// The process's user and system CPU time, in seconds.
pub fn cpu_times() -> (f64, f64) {
    // utime and stime (fields 14, 15) of /proc/self/stat, in clock ticks.
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else { return (0.0, 0.0) };
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
}

/// Builds the INFO text for `want`.
pub fn info_text(ctx: &mut Ctx, want: &[String]) -> String {
    use std::fmt::Write;
    let srv = &*ctx.srv;
    let c = &*ctx.client;
    let si = ctx.host.scripts_ref().info();
    let mut s = String::new();
    let mut first = true;
    let mut section = |s: &mut String, title: &str| {
        if !first {
            s.push_str("\r\n");
        }
        first = false;
        s.push_str("# ");
        s.push_str(title);
        s.push_str("\r\n");
    };
    let has = |n: &str| want.iter().any(|w| w == n);
    let uptime = srv.started.elapsed().as_secs();
    // The caller is out of the table while it runs; id 0 is no connection
    // (the metrics page renders INFO for nobody). Replicas are not counted,
    // as in Redis (they are connected_slaves).
    let nclients = srv.clients.values().filter(|x| x.repl_role != ReplRole::Replica).count() + usize::from(c.id != 0);
    // The freeing thread publishes its frees before a job stops counting as
    // pending, so its counters are read first: a reply that shows no pending
    // objects shows their memory gone too.
    let (lazy_pending, lazy_freed) = (srv.lazyfree.pending(), srv.lazyfree.freed());
    let used = srv.used_memory();
    let peak = srv.peak_memory.max(used);
    let rss = memory::rss();
    let line = |s: &mut String, k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(s, "{k}:{v}\r\n");
    };
    if has("server") {
        section(&mut s, "Server");
        line(&mut s, "redis_version", &crate::REDIS_VERSION);
        line(&mut s, "densekv_version", &env!("CARGO_PKG_VERSION"));
        line(&mut s, "redis_git_sha1", &"00000000");
        line(&mut s, "redis_git_dirty", &0);
        line(&mut s, "redis_build_id", &"0");
        line(&mut s, "redis_mode", &if srv.cluster.is_some() { "cluster" } else { "standalone" });
        line(&mut s, "os", &std::env::consts::OS);
        line(&mut s, "arch_bits", &(usize::BITS));
        line(&mut s, "monotonic_clock", &"POSIX clock_gettime");
        line(&mut s, "multiplexing_api", &"epoll");
        line(&mut s, "atomicvar_api", &"c11-builtin");
        line(&mut s, "gcc_version", &"0.0.0");
        line(&mut s, "process_id", &srv.pid);
        line(&mut s, "process_supervised", &"no");
        line(&mut s, "run_id", &srv.run_id);
        line(&mut s, "tcp_port", &if srv.config.port == 0 { srv.config.get("tls-port").unwrap_or("0").parse().unwrap_or(0) } else { srv.config.port });
        line(&mut s, "server_time_usec", &unix_us());
        line(&mut s, "uptime_in_seconds", &uptime);
        line(&mut s, "uptime_in_days", &(uptime / 86400));
        line(&mut s, "hz", &srv.hz);
        line(&mut s, "configured_hz", &srv.config.hz);
        line(&mut s, "lru_clock", &((unix_ms() / 1000) & 0xff_ffff));
        line(&mut s, "executable", &std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
        line(&mut s, "config_file", &srv.config.file.clone().unwrap_or_default());
        line(&mut s, "io_threads_active", &u8::from(srv.io.as_ref().is_some_and(|io| io.live() > 0)));
        if let Some(ms) = crate::shutdown::remaining_ms(srv) {
            line(&mut s, "shutdown_in_milliseconds", &ms);
        }
        line(&mut s, "listener0", &format!("name=tcp,bind={},port={}", srv.config.get("bind").unwrap_or(""), srv.config.port));
    }
    if has("clients") {
        section(&mut s, "Clients");
        let watching = srv.clients.values().filter(|x| !x.watched.is_empty()).count() + usize::from(!c.watched.is_empty());
        let max_in = srv.clients.values().map(|x| x.qbuf.capacity()).chain([c.qbuf.capacity()]).max().unwrap_or(0);
        let max_out = srv.clients.values().map(|x| x.reply.buf.capacity()).chain([c.reply.buf.capacity()]).max().unwrap_or(0);
        line(&mut s, "connected_clients", &nclients);
        // Redis counts two links per other known node.
        line(&mut s, "cluster_connections", &srv.cluster.as_deref().map_or(0, |cl| cl.nodes.len().saturating_sub(1) * 2));
        line(&mut s, "maxclients", &srv.config.maxclients);
        line(&mut s, "client_recent_max_input_buffer", &max_in);
        line(&mut s, "client_recent_max_output_buffer", &max_out);
        // Clients held by CLIENT PAUSE count as blocked, as in Redis.
        line(&mut s, "blocked_clients", &(srv.clients.values().filter(|x| x.paused).count() + srv.blocking.clients()));
        line(&mut s, "tracking_clients", &srv.tracking.clients);
        line(&mut s, "pubsub_clients", &srv.pubsub.clients);
        line(&mut s, "watching_clients", &watching);
        line(&mut s, "clients_in_timeout_table", &srv.blocking.with_deadline());
        line(&mut s, "total_watched_keys", &srv.watched.len());
        line(&mut s, "total_blocking_keys", &srv.blocking.keys());
        line(&mut s, "total_blocking_keys_on_nokey", &srv.blocking.keys_on_nokey());
    }
    if has("memory") {
        section(&mut s, "Memory");
        let o = crate::overhead::Overhead::of(srv, c, &si);
        let maxmem = srv.config.maxmemory;
        let total_sys = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok()))
            .unwrap_or(0)
            * 1024;
        let active = memory::active();
        let resident = memory::resident();
        let frag = if used == 0 { 0.0 } else { rss as f64 / used as f64 };
        line(&mut s, "used_memory", &used);
        line(&mut s, "used_memory_human", &human(used));
        line(&mut s, "used_memory_rss", &rss);
        line(&mut s, "used_memory_rss_human", &human(rss));
        line(&mut s, "used_memory_peak", &peak);
        line(&mut s, "used_memory_peak_human", &human(peak));
        line(&mut s, "used_memory_peak_perc", &format!("{:.2}%", if peak == 0 { 0.0 } else { used as f64 * 100.0 / peak as f64 }));
        // As Redis: the overhead includes the memory used at start-up, and
        // the dataset's share is of what was allocated since.
        let overhead = o.total();
        line(&mut s, "used_memory_overhead", &overhead);
        let dataset = used.saturating_sub(overhead);
        let net = used.saturating_sub(srv.used_memory_startup);
        line(&mut s, "used_memory_startup", &srv.used_memory_startup);
        line(&mut s, "used_memory_dataset", &dataset);
        line(&mut s, "used_memory_dataset_perc", &format!("{:.2}%", if net == 0 { 0.0 } else { dataset as f64 * 100.0 / net as f64 }));
        line(&mut s, "allocator_allocated", &used);
        line(&mut s, "allocator_active", &active);
        line(&mut s, "allocator_resident", &resident);
        line(&mut s, "allocator_muzzy", &0);
        line(&mut s, "total_system_memory", &total_sys);
        line(&mut s, "total_system_memory_human", &human(total_sys));
        let (lua_mem, scripts_mem) = (si.eval_vm, si.eval_cache);
        line(&mut s, "used_memory_lua", &lua_mem);
        line(&mut s, "used_memory_vm_eval", &lua_mem);
        line(&mut s, "used_memory_lua_human", &human(lua_mem as u64));
        line(&mut s, "used_memory_scripts_eval", &scripts_mem);
        line(&mut s, "number_of_cached_scripts", &si.cached_scripts);
        let (fn_vm, fn_mem) = (si.functions_vm, si.functions_overhead);
        line(&mut s, "number_of_functions", &si.functions);
        line(&mut s, "number_of_libraries", &si.libraries);
        line(&mut s, "used_memory_vm_functions", &fn_vm);
        line(&mut s, "used_memory_vm_total", &(lua_mem + fn_vm));
        line(&mut s, "used_memory_vm_total_human", &human((lua_mem + fn_vm) as u64));
        line(&mut s, "used_memory_functions", &fn_mem);
        line(&mut s, "used_memory_scripts", &(scripts_mem + fn_mem));
        line(&mut s, "used_memory_scripts_human", &human((scripts_mem + fn_mem) as u64));
        line(&mut s, "maxmemory", &maxmem);
        line(&mut s, "maxmemory_human", &human(maxmem));
        line(&mut s, "maxmemory_policy", &srv.config.get("maxmemory-policy").unwrap_or("noeviction"));
        line(&mut s, "allocator_frag_ratio", &format!("{:.2}", if used == 0 { 0.0 } else { active as f64 / used as f64 }));
        line(&mut s, "allocator_frag_bytes", &active.saturating_sub(used));
        line(&mut s, "allocator_rss_ratio", &format!("{:.2}", if active == 0 { 0.0 } else { resident as f64 / active as f64 }));
        line(&mut s, "allocator_rss_bytes", &(resident as i64 - active as i64));
        line(&mut s, "rss_overhead_ratio", &format!("{:.2}", if resident == 0 { 0.0 } else { rss as f64 / resident as f64 }));
        line(&mut s, "rss_overhead_bytes", &(rss as i64 - resident as i64));
        line(&mut s, "mem_fragmentation_ratio", &format!("{frag:.2}"));
        line(&mut s, "mem_fragmentation_bytes", &(rss as i64 - used as i64));
        line(&mut s, "mem_not_counted_for_evict", &srv.mem_not_counted_for_evict());
        line(&mut s, "mem_replication_backlog", &o.backlog);
        line(&mut s, "mem_total_replication_buffers", &o.repl_buffers);
        line(&mut s, "mem_clients_slaves", &o.replicas);
        line(&mut s, "mem_clients_normal", &o.normal);
        line(&mut s, "mem_cluster_links", &o.links);
        let (asm_out, asm_in, asm_peak) = crate::migration::memory_info(srv);
        line(&mut s, "mem_cluster_slot_migration_output_buffer", &asm_out);
        line(&mut s, "mem_cluster_slot_migration_input_buffer", &asm_in);
        line(&mut s, "mem_cluster_slot_migration_input_buffer_peak", &asm_peak);
        line(&mut s, "mem_aof_buffer", &o.aof);
        line(&mut s, "mem_allocator", &"jemalloc-5.3.0");
        line(&mut s, "mem_overhead_db_hashtable_rehashing", &0);
        line(&mut s, "active_defrag_running", &0);
        line(&mut s, "lazyfree_pending_objects", &lazy_pending);
        line(&mut s, "lazyfreed_objects", &lazy_freed);
    }
    if has("persistence") {
        section(&mut s, "Persistence");
        line(&mut s, "loading", &u8::from(srv.persist.loading.is_some()));
        line(&mut s, "async_loading", &u8::from(srv.repl.transfer_loading == Some(true)));
        // No fork, so no copy-on-write to report.
        for k in ["current_cow_peak", "current_cow_size", "current_cow_size_age"] {
            line(&mut s, k, &0);
        }
        let p = srv.persist;
        let (done, total) = crate::persist::bgsave_progress(srv).unwrap_or((0, 0));
        let perc = if total == 0 { 0.0 } else { (done as f64 * 100.0 / total as f64).min(100.0) };
        line(&mut s, "current_fork_perc", &format!("{perc:.2}"));
        line(&mut s, "current_save_keys_processed", &done);
        line(&mut s, "current_save_keys_total", &total);
        line(&mut s, "rdb_changes_since_last_save", &(srv.dirty - p.dirty_at_save));
        line(&mut s, "rdb_bgsave_in_progress", &u8::from(matches!(crate::persist::bgsave_running(srv), Some(Purpose::Rdb | Purpose::Repl))));
        line(&mut s, "rdb_last_save_time", &srv.last_save);
        line(&mut s, "rdb_last_bgsave_status", &if p.last_save_ok { "ok" } else { "err" });
        line(&mut s, "rdb_last_bgsave_time_sec", &p.last_bg_secs);
        line(&mut s, "rdb_current_bgsave_time_sec", &p.bg_started.map_or(-1, |t| t.elapsed().as_secs() as i64));
        line(&mut s, "rdb_saves", &p.saves);
        line(&mut s, "rdb_last_cow_size", &0);
        line(&mut s, "rdb_last_load_keys_expired", &p.last_load_expired);
        line(&mut s, "rdb_last_load_keys_loaded", &p.last_load_keys);
        for (k, v) in crate::aof::info(srv) {
            line(&mut s, k, &v);
        }
        if let Some(l) = srv.persist.loading {
            // As Redis computes them: the share read, and the time left at
            // the pace so far (1 s before a second has passed).
            let perc = if l.total_bytes == 0 { 0.0 } else { l.loaded_bytes as f64 * 100.0 / l.total_bytes as f64 };
            let remaining = l.total_bytes.saturating_sub(l.loaded_bytes).max(1) as i64;
            let elapsed = crate::server::unix_ms() / 1000 - l.start_secs;
            let eta = if elapsed <= 0 { 1 } else { elapsed * remaining / (l.loaded_bytes as i64 + 1) };
            line(&mut s, "loading_start_time", &l.start_secs);
            line(&mut s, "loading_total_bytes", &l.total_bytes);
            line(&mut s, "loading_rdb_used_mem", &l.rdb_used_mem);
            line(&mut s, "loading_loaded_bytes", &l.loaded_bytes);
            line(&mut s, "loading_loaded_perc", &format!("{perc:.2}"));
            line(&mut s, "loading_eta_seconds", &eta);
        }
    }
    if has("stats") {
        section(&mut s, "Stats");
        line(&mut s, "total_connections_received", &srv.total_connections);
        line(&mut s, "total_commands_processed", &srv.total_commands);
        line(&mut s, "instantaneous_ops_per_sec", &(srv.rates.get(RATE_OPS) as u64));
        line(&mut s, "total_net_input_bytes", &srv.net.input);
        line(&mut s, "total_net_output_bytes", &srv.net.output);
        line(&mut s, "total_net_repl_input_bytes", &srv.net.repl_input);
        line(&mut s, "total_net_repl_output_bytes", &srv.net.repl_output);
        for (k, i) in [
            ("instantaneous_input_kbps", RATE_NET_IN),
            ("instantaneous_output_kbps", RATE_NET_OUT),
            ("instantaneous_input_repl_kbps", RATE_REPL_IN),
            ("instantaneous_output_repl_kbps", RATE_REPL_OUT),
        ] {
            line(&mut s, k, &format!("{:.2}", srv.rates.get(i) / 1024.0));
        }
        line(&mut s, "rejected_connections", &srv.rejected_connections);
        line(&mut s, "sync_full", &srv.repl.sync_full);
        line(&mut s, "sync_partial_ok", &srv.repl.sync_partial_ok);
        line(&mut s, "sync_partial_err", &srv.repl.sync_partial_err);
        line(&mut s, "expired_subkeys", &srv.expired_subkeys);
        line(&mut s, "expired_keys", &srv.expired_keys);
        line(&mut s, "expired_stale_perc", &format!("{:.2}", srv.expired_stale_perc * 100.0));
        line(&mut s, "expired_time_cap_reached_count", &srv.expire_cap_reached);
        line(&mut s, "expire_cycle_cpu_milliseconds", &(srv.expire_cycle_us / 1000));
        line(&mut s, "evicted_keys", &srv.evicted_keys);
        line(&mut s, "evicted_clients", &srv.evicted_clients);
        line(&mut s, "evicted_scripts", &si.evicted_scripts);
        let (current_exceeded, total_exceeded) = srv.evict.exceeded_ms();
        line(&mut s, "total_eviction_exceeded_time", &total_exceeded);
        line(&mut s, "current_eviction_exceeded_time", &current_exceeded);
        line(&mut s, "keyspace_hits", &srv.keyspace_hits);
        line(&mut s, "keyspace_misses", &srv.keyspace_misses);
        line(&mut s, "pubsub_channels", &srv.pubsub.len(crate::pubsub::Kind::Channel));
        line(&mut s, "pubsub_patterns", &srv.pubsub.len(crate::pubsub::Kind::Pattern));
        line(&mut s, "pubsubshard_channels", &srv.pubsub.len(crate::pubsub::Kind::Shard));
        // Saves never fork and nothing defragments: these stay 0.
        for k in ["latest_fork_usec", "total_forks"] {
            line(&mut s, k, &0);
        }
        line(&mut s, "migrate_cached_sockets", &srv.migrate_conns.len());
        line(&mut s, "slave_expires_tracked_keys", &srv.repl.local_keys.len());
        for k in [
            "active_defrag_hits",
            "active_defrag_misses",
            "active_defrag_key_hits",
            "active_defrag_key_misses",
            "total_active_defrag_time",
            "current_active_defrag_time",
        ] {
            line(&mut s, k, &0);
        }
        line(&mut s, "tracking_total_keys", &srv.tracking.keys());
        line(&mut s, "tracking_total_items", &srv.tracking.items());
        line(&mut s, "tracking_total_prefixes", &srv.tracking.prefixes());
        line(&mut s, "unexpected_error_replies", &srv.unexpected_error_replies);
        line(&mut s, "total_error_replies", &srv.total_error_replies);
        line(&mut s, "dump_payload_sanitizations", &0);
        line(&mut s, "total_reads_processed", &srv.net_reads);
        line(&mut s, "total_writes_processed", &srv.net_writes);
        // Threads that ended (CONFIG SET io-threads) still count.
        let (reads, writes) = srv.io.iter().flat_map(|io| io.stats()).fold(srv.io_ended, |(r, w), t| (r + t.reads.load(Relaxed), w + t.writes.load(Relaxed)));
        line(&mut s, "io_threaded_reads_processed", &reads);
        line(&mut s, "io_threaded_writes_processed", &writes);
        line(&mut s, "client_query_buffer_limit_disconnections", &srv.client_kills);
        line(&mut s, "client_output_buffer_limit_disconnections", &srv.obuf_kills);
        line(&mut s, "reply_buffer_shrinks", &srv.reply_shrinks);
        line(&mut s, "reply_buffer_expands", &srv.reply_expands);
        line(&mut s, "eventloop_cycles", &srv.el.cycles);
        line(&mut s, "eventloop_duration_sum", &(srv.el.busy_ns / 1000));
        line(&mut s, "eventloop_duration_cmd_sum", &(srv.el.cmd_ns / 1000));
        line(&mut s, "instantaneous_eventloop_cycles_per_sec", &(srv.rates.get(RATE_CYCLES).round() as u64));
        line(&mut s, "instantaneous_eventloop_duration_usec", &srv.rates.mean_per(RATE_BUSY_NS, RATE_CYCLES, 1000.0));
        line(&mut s, "acl_access_denied_auth", &srv.acl.denied[0]);
        line(&mut s, "acl_access_denied_cmd", &srv.acl.denied[1]);
        line(&mut s, "acl_access_denied_key", &srv.acl.denied[2]);
        line(&mut s, "acl_access_denied_channel", &srv.acl.denied[3]);
    }
    if has("replication") {
        section(&mut s, "Replication");
        s.push_str(&crate::replication::info(srv));
    }
    if has("threads") {
        // Redis 8's section: one line per thread, the executor's first
        // (its own sockets: replicas, the primary link, clients not yet
        // moved to a thread), then every thread still running, a
        // retiring one until it ended.
        section(&mut s, "Threads");
        let own = srv.clients.values().filter(|x| x.sock.is_some()).count() + usize::from(c.sock.is_some());
        line(&mut s, "io_thread_0", &format!("clients={own},reads={},writes={}", srv.net_reads, srv.net_writes));
        for (i, t) in srv.io.iter().flat_map(|io| io.stats()).enumerate() {
            line(&mut s, &format!("io_thread_{}", i + 1), &format!("clients={},reads={},writes={}", t.clients.load(Relaxed), t.reads.load(Relaxed), t.writes.load(Relaxed)));
        }
    }
    if has("cpu") {
        section(&mut s, "CPU");
        let (user, sys) = cpu_times();
        line(&mut s, "used_cpu_sys", &format!("{sys:.6}"));
        line(&mut s, "used_cpu_user", &format!("{user:.6}"));
        line(&mut s, "used_cpu_sys_children", &"0.000000");
        line(&mut s, "used_cpu_user_children", &"0.000000");
        line(&mut s, "used_cpu_sys_main_thread", &format!("{sys:.6}"));
        line(&mut s, "used_cpu_user_main_thread", &format!("{user:.6}"));
    }
    if has("modules") || has("module_list") {
        section(&mut s, "Modules");
    }
    let mut stats = srv.cmdstats.sorted();
    stats.retain(|(_, st)| st.calls + st.rejected + st.failed > 0);
    if has("commandstats") {
        section(&mut s, "Commandstats");
        for (n, st) in &stats {
            let per = if st.calls == 0 { 0.0 } else { st.usec as f64 / st.calls as f64 };
            let _ = write!(
                s,
                "cmdstat_{n}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}\r\n",
                st.calls, st.usec, st.rejected, st.failed
            );
        }
    }
    if has("errorstats") {
        section(&mut s, "Errorstats");
        let mut errs: Vec<(&String, &u64)> = srv.errorstats.iter().collect();
        errs.sort();
        for (code, n) in errs {
            let _ = write!(s, "errorstat_{code}:count={n}\r\n");
        }
    }
    if has("latencystats") {
        section(&mut s, "Latencystats");
        if srv.config.flag("latency-tracking") {
            let pcts: Vec<f64> = srv
                .config
                .get("latency-tracking-info-percentiles")
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            for (n, st) in stats.iter().filter(|(_, st)| st.recorded() > 0) {
                let parts: Vec<String> =
                    pcts.iter().map(|p| format!("p{}={:.3}", fmt_pct(*p), st.percentile(*p))).collect();
                let _ = write!(s, "latency_percentiles_usec_{n}:{}\r\n", parts.join(","));
            }
        }
    }
    if has("cluster") {
        section(&mut s, "Cluster");
        line(&mut s, "cluster_enabled", &u8::from(srv.cluster.is_some()));
    }
    if has("keyspace") {
        section(&mut s, "Keyspace");
        for (i, db) in srv.dbs.iter().enumerate() {
            if !db.is_empty() {
                let _ = write!(s, "db{i}:keys={},expires={},avg_ttl=0,subexpiry={}\r\n", db.len(), db.volatile_len(), db.field_expiry_len());
            }
        }
    }
    if has("compression") {
        // densekv: strings kept packed (docs/design/compression.md).
        section(&mut s, "Compression");
        let st = srv.dbs.iter().map(|d| d.pack_stats()).fold(storage::encoding::packed::PackStats::default(), |a, b| {
            storage::encoding::packed::PackStats {
                tables: a.tables + b.tables,
                values: a.values + b.values,
                raw_bytes: a.raw_bytes + b.raw_bytes,
                packed_bytes: a.packed_bytes + b.packed_bytes,
                trained: a.trained + b.trained,
                freed: a.freed + b.freed,
                dicts: a.dicts + b.dicts,
                dict_bytes: a.dict_bytes + b.dict_bytes,
                zstd_values: a.zstd_values + b.zstd_values,
                shapes: a.shapes + b.shapes,
                shape_values: a.shape_values + b.shape_values,
            }
        });
        line(&mut s, "value_compression", &if srv.config.flag("value-compression") { "yes" } else { "no" });
        line(&mut s, "key_compression", &if srv.config.flag("key-compression") { "yes" } else { "no" });
        line(&mut s, "compression_dictionaries", &st.tables);
        line(&mut s, "compression_dictionaries_trained", &st.trained);
        line(&mut s, "compression_dictionaries_freed", &st.freed);
        line(&mut s, "compressed_values", &st.values);
        line(&mut s, "compressed_bytes_before", &st.raw_bytes);
        line(&mut s, "compressed_bytes_after", &st.packed_bytes);
        line(&mut s, "compression_zstd_dictionaries", &st.dicts);
        line(&mut s, "compression_zstd_dictionary_bytes", &st.dict_bytes);
        line(&mut s, "compressed_values_zstd", &st.zstd_values);
        line(&mut s, "compression_shapes", &st.shapes);
        line(&mut s, "compressed_values_shape", &st.shape_values);
    }
    // Only when named: neither `all` nor `everything` includes it (Redis).
    if has("debug") {
        section(&mut s, "Debug");
        line(&mut s, "eventloop_duration_aof_sum", &(srv.el.aof_ns / 1000));
        line(&mut s, "eventloop_duration_cron_sum", &(srv.el.cron_ns / 1000));
        line(&mut s, "eventloop_duration_max", &srv.el.duration_max_us);
        line(&mut s, "eventloop_cmd_per_cycle_max", &srv.el.cmd_per_cycle_max);
    }
    s
}

/// Percentile names as Redis prints them: 50, 99, 99.9.
fn fmt_pct(p: f64) -> String {
    let s = format!("{p}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// INFO [section ...]
pub fn info(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let want = wanted_sections(args);
    let s = info_text(ctx, &want);
    ctx.out().verbatim(s.as_bytes());
    Ok(())
}
