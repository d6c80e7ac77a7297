//! Dispatch of one request: the checks every command passes before it runs
//! (unknown command, arity, MULTI queueing, -BUSY while a script is timed
//! out, eviction and OOM, Pub/Sub context, CLIENT PAUSE), then `exec::run`; and, after
//! each top-level command, the clients blocked on keys it made ready, which
//! re-run their command here (see `blocking.rs` for the registry).
//!
//! Above `exec.rs` (which runs one looked-up command and does its
//! bookkeeping) so that re-running a blocked command is a call down, never
//! a call back up from the blocking registry.

use std::time::Instant;

use crate::acl::LogContext;
use crate::blocking::TimeoutReply;
use crate::client::{Client, ClientId, ReplRole};
use crate::command::{flags, CmdError, CommandMap, Host, Spec, SpecAt};
use crate::evict;
use crate::exec::{self, lookup, reply_error, run, Lookup, OOM_ERROR};
use crate::server::Server;

/// Commands that run immediately even inside MULTI.
fn runs_in_multi(name: &str) -> bool {
    matches!(name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset")
}

/// True if `argv` (looked up as `spec`) must wait because of CLIENT PAUSE
/// or a shutdown waiting for replicas.
#[inline]
pub fn is_paused(srv: &Server, host: &dyn Host, spec: &Spec, argv: &[Vec<u8>], now: i64) -> bool {
    // Nothing pauses: one test of four fields on every command.
    if srv.pause.is_none() && srv.shutdown_wait.is_none() && srv.repl.failover.is_none() && srv.cluster_pause_until == 0 {
        return false;
    }
    is_paused_slow(srv, host, spec, argv, now)
}

#[cold]
#[inline(never)]
fn is_paused_slow(srv: &Server, host: &dyn Host, spec: &Spec, argv: &[Vec<u8>], now: i64) -> bool {
    let Some(write_only) = srv.paused_at(now) else { return false };
    if !write_only {
        return true;
    }
    // WRITE mode holds writes and commands that may write; EXEC of a
    // transaction is judged by what it queued (done by the caller); a
    // script by the flags its shebang declares; PUBLISH and PFCOUNT may
    // replicate, so they wait too.
    let f = host.scripts_ref().command_flags(spec, argv);
    f & flags::WRITE != 0 || f & flags::MAY_REPLICATE != 0
}

/// True if `argv` names a key of a slot being handed off by an atomic
/// slot migration (its commands wait until the owner is settled).
fn held_by_handoff(srv: &Server, spec: &Spec, argv: &[Vec<u8>]) -> bool {
    spec.find_keys(argv).iter().filter_map(|&(i, _)| argv.get(i)).any(|k| srv.migrations.is_paused(storage::slot::key_hash_slot(k)))
}

/// Redis's reply to commands without the `loading` flag while the RDB file
/// loads at start-up.
pub const LOADING_ERROR: &str = "LOADING Redis is loading the dataset in memory";

/// Redis's reply to a command from a client that must AUTH first.
pub const NOAUTH_ERROR: &str = "NOAUTH Authentication required.";

/// Runs one request from `c`. Returns false if the client must wait (paused).
pub fn call(srv: &mut Server, host: &mut dyn Host, c: &mut Client, argv: Vec<Vec<u8>>) -> bool {
    call_at(srv, host, c, argv, None, None)
}

/// `call`, with where in the command table the request's command was
/// found already, if it was (`exec::key_args`), and the clock reading the
/// command starts from, if one was taken just now (the end of the command
/// before it in a pipeline): None reads the clock.
pub fn call_at(srv: &mut Server, host: &mut dyn Host, c: &mut Client, argv: Vec<Vec<u8>>, at: Option<SpecAt>, start: Option<Instant>) -> bool {
    if !c.asking {
        return call_once(srv, host, c, argv, at, start);
    }
    // ASKING lasts one command, or a whole transaction (Redis clears it
    // after each command but ASKING itself, outside MULTI).
    let ran = call_once(srv, host, c, argv, at, start);
    if ran && c.multi.is_none() && c.last_cmd != "asking" {
        c.asking = false;
    }
    ran
}

/// `call` without the ASKING bookkeeping.
fn call_once(srv: &mut Server, host: &mut dyn Host, c: &mut Client, argv: Vec<Vec<u8>>, at: Option<SpecAt>, start: Option<Instant>) -> bool {
    let start = start.unwrap_or_else(Instant::now);
    let now = srv.unix_ms_at(start);
    let table = host.table().clone();
    let spec = match exec::lookup_at(&table, &argv, at) {
        Lookup::Found(s) => s,
        Lookup::Unknown(e) | Lookup::BadArity(e) => {
            match argv.first().and_then(|n| table.find(n)) {
                // EXEC with arguments is refused as any EXEC is: the
                // transaction goes, with EXECABORT.
                Some(s) if s.full_name == "exec" => reject(srv, c, s, &e),
                found => {
                    if c.multi.is_some() {
                        c.multi_error = true;
                    }
                    if let Some(s) = found {
                        srv.cmdstats.entry(s.id, s.full_name).rejected += 1;
                    }
                    reply_error(srv, c, &e);
                }
            }
            return true;
        }
    };
    let name = spec.full_name;
    // As Redis: set at lookup, so refusals (ACL LOG's client-info) show it.
    c.last_cmd = name;
    if !c.authenticated && !spec.has(flags::NO_AUTH) && srv.acl.auth_required() {
        reject(srv, c, spec, &CmdError::Custom(NOAUTH_ERROR.into()));
        return true;
    }
    if c.multi.is_some() && !runs_in_multi(name) && spec.has(flags::NO_MULTI) {
        reject(srv, c, spec, &CmdError::err("Command not allowed inside a transaction"));
        return true;
    }
    // The common case, a user allowed everything, costs one branch.
    if c.user.as_ref().is_some_and(|u| !u.borrow().unrestricted) {
        let ctx = if c.multi.is_some() { LogContext::Multi } else { LogContext::Toplevel };
        if let Some((_, msg)) = exec::acl_refuse(srv, c, spec, &argv, ctx, None) {
            reject(srv, c, spec, &CmdError::Custom(format!("NOPERM {msg}")));
            return true;
        }
    }
    // Cluster routing (Redis's getNodeByQuery): one branch standalone.
    // What this node's primary sends is applied wherever its keys hash.
    // A command without keys (other than EXEC) runs anywhere: skip the
    // write-flag lookup that routing would not read.
    // The destination's connection to the source (atomic slot migration,
    // migration.rs) applies keys of slots not served here yet.
    if srv.cluster.is_some() && c.repl_role != ReplRole::Primary && !c.slot_import && (name == "exec" || spec.has_keys()) {
        let write = if name == "exec" { queued_has(&table, c, flags::WRITE) } else { host.scripts_ref().command_flags(spec, &argv) & flags::WRITE != 0 };
        if let Err(r) = crate::redirect::check(srv, &table, c, spec, &argv, write, now) {
            redirect(srv, c, spec, r.message());
            return true;
        }
    }
    // Valkey's CLIENT CAPA redirect: a standalone replica sends such a
    // client's data commands to its primary (reads too, unless READONLY).
    if c.capa_redirect && srv.cluster.is_none() && c.repl_role != ReplRole::Primary {
        if let Some(p) = srv.repl.primary.as_ref() {
            let has = |f: u32| spec.has(f) || (name == "exec" && queued_has(&table, c, f));
            if has(flags::WRITE) || (has(flags::READONLY) && !c.readonly) {
                let msg = format!("REDIRECT {}:{}", p.host, p.port);
                redirect(srv, c, spec, msg);
                return true;
            }
        }
    }
    if srv.tracking.clients > 0 {
        crate::publish::limit_tracking_table(srv, Some(&mut *c));
    }
    // A replica of this server reads no data: its connection carries the
    // stream, and what it sends must not be answered with data (Redis).
    if c.repl_role == ReplRole::Replica && spec.flags & (flags::WRITE | flags::READONLY | flags::MAY_REPLICATE) != 0 {
        reject(srv, c, spec, &CmdError::err("Replica can't interact with the keyspace"));
        return true;
    }
    if srv.repl.is_replica() && c.repl_role != ReplRole::Primary {
        if let Some(e) = replica_refusal(srv, &*host, &table, c, spec, &argv) {
            reject(srv, c, spec, &CmdError::Custom(e.into()));
            return true;
        }
    }
    if srv.persist.loading.is_some() && !spec.has(flags::LOADING) {
        reject(srv, c, spec, &CmdError::Custom(LOADING_ERROR.into()));
        return true;
    }
    if srv.repl.transfer_loading == Some(true) && no_async_loading(&table, c, spec) {
        reject(srv, c, spec, &CmdError::Custom(LOADING_ERROR.into()));
        return true;
    }
    if srv.script.is_some_and(|r| r.timed_out) && !spec.has(flags::ALLOW_BUSY) {
        reject(srv, c, spec, &CmdError::Custom(srv.busy_error().into()));
        return true;
    }
    // Eviction first (Redis's performEvictions), then OOM for what may
    // grow memory when nothing more could go. With maxmemory gone while
    // memory was over it, the first command ends that spell's timing.
    if (srv.config.maxmemory != 0 || srv.evict.exceeded_since.is_some()) && c.repl_role != ReplRole::Primary {
        let outcome = evict::perform(srv, Some(&mut *c), now);
        if srv.tracking.clients > 0 && !srv.tracking.pending.is_empty() {
            // This client cached keys just evicted: it hears so before
            // its reply, as Redis delivers them.
            crate::publish::flush_invalidations(srv, c);
            c.reply.raw(&srv.pending_push);
            srv.pending_push.clear();
        }
        if outcome == evict::Outcome::Fail && oom_sensitive(&*host, &table, c, spec, &argv) {
            reject(srv, c, spec, &CmdError::Custom(OOM_ERROR.into()));
            return true;
        }
    }
    if let Some(e) = srv.disk_error().filter(|_| disk_sensitive(&*host, &table, c, spec, &argv)) {
        if c.repl_role != ReplRole::Primary {
            reject(srv, c, spec, &CmdError::Custom(e.into_owned()));
            return true;
        }
        // The primary's stream: refusing its write would leave this
        // replica's data behind its primary's. Redis's replica stops
        // (the default) or, with replica-ignore-disk-write-errors, applies
        // it and says so.
        if !srv.config.flag("replica-ignore-disk-write-errors") && spec.full_name != "ping" {
            panic!("Replica was unable to write command to disk.");
        }
        srv.note_write_despite_disk_error();
    }
    if let Some(e) = srv.replicas_error().filter(|_| spec.full_name != "ping" && disk_sensitive(&*host, &table, c, spec, &argv)) {
        reject(srv, c, spec, &CmdError::Custom(e.into()));
        return true;
    }
    if c.pubsub.is_some() && !c.reply.resp3 && !allowed_in_pubsub(name) {
        let msg = format!("Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context");
        reject(srv, c, spec, &CmdError::err(msg));
        return true;
    }
    if let Some(queue) = c.multi.as_mut().filter(|_| !runs_in_multi(name)) {
        queue.push(argv);
        c.reply.simple("QUEUED");
        return true;
    }
    let paused = if name == "exec" {
        srv.paused_at(now).is_some()
            && c.multi.as_ref().is_some_and(|q| {
                q.iter().any(|a| matches!(lookup(&table, a), Lookup::Found(s) if is_paused(srv, &*host, s, a, now)))
            })
    } else {
        is_paused(srv, &*host, spec, &argv, now)
    };
    if paused {
        return false;
    }
    // A slot being handed off holds its commands until its owner is
    // settled; then routing sends them on.
    if !srv.migrations.paused.is_empty() && c.repl_role == ReplRole::None && !c.slot_import {
        let held = if name == "exec" {
            c.multi.as_ref().is_some_and(|q| q.iter().any(|a| matches!(lookup(&table, a), Lookup::Found(s) if held_by_handoff(srv, s, a))))
        } else {
            held_by_handoff(srv, spec, &argv)
        };
        if held {
            return false;
        }
    }
    let end_before = srv.repl.end_offset();
    run(srv, host, c, spec, &argv, now, start);
    // The stream offset of the client's last write: what its WAIT and
    // WAITAOF wait for (Redis's c->woff).
    let end = srv.repl.end_offset();
    if end != end_before {
        c.woff = end;
    }
    if c.repl_role != ReplRole::Primary && srv.repl.is_replica() && spec.has(flags::WRITE) {
        note_local_ttls(srv, c.db, spec, &argv, now);
    }
    // Clients blocked on keys this command (or EXEC) made ready; not in the
    // middle of a timed-out script, whose writes must stay atomic.
    if srv.script.is_none() {
        let ended = srv.last_cmd_end;
        serve_ready(srv, host);
        if srv.last_cmd_end != ended {
            // Woken clients ran (and were answered) after this command's
            // end: the next request reads the clock afresh.
            srv.last_cmd_end = None;
        }
    }
    // A client of an I/O thread sent arguments that thread parsed (and
    // allocated): they go back to it; others to this thread's spares.
    match (c.io.as_ref(), srv.io.as_mut()) {
        (Some(link), Some(io)) => io.give_back(link.thread, argv),
        _ => resp::spare::recycle(argv),
    }
    true
}

/// A writable replica's own client wrote: the keys it left with a TTL are
/// this replica's to expire (its primary knows nothing of them), as
/// Redis's replica remembers them (`cron::expire_local_keys`).
fn note_local_ttls(srv: &mut Server, db: usize, spec: &Spec, argv: &[Vec<u8>], now: i64) {
    for (i, _) in spec.find_keys(argv) {
        let Some(key) = argv.get(i) else { continue };
        if matches!(srv.dbs[db].expire_of(key, now), Some(Some(_))) {
            srv.repl.local_keys.insert((db, key.clone()));
        }
    }
}

/// Why a replica refuses `spec` from an ordinary client, if it does: a
/// write while replica-read-only (EXEC of a transaction that queued one;
/// a script by its declared flags), anything not flagged `stale` while the
/// link is down and replica-serve-stale-data is off.
fn replica_refusal(srv: &Server, host: &dyn Host, table: &CommandMap, c: &Client, spec: &Spec, argv: &[Vec<u8>]) -> Option<&'static str> {
    let link_up = srv.repl.primary.as_ref().is_some_and(|p| p.state == crate::repl::LinkState::Connected);
    if !link_up && !srv.config.flag("replica-serve-stale-data") && !spec.has(flags::STALE) {
        return Some(crate::repl::MASTERDOWN_ERROR);
    }
    if srv.config.flag("replica-read-only") && disk_sensitive(host, table, c, spec, argv) && spec.full_name != "ping" {
        return Some(crate::repl::READONLY_ERROR);
    }
    None
}

/// True if `spec` must wait out an async load: commands flagged so, and
/// EXEC of a transaction that queued one (Redis).
fn no_async_loading(table: &CommandMap, c: &Client, spec: &Spec) -> bool {
    spec.has(flags::NO_ASYNC_LOADING)
        || (spec.full_name == "exec" && queued_has(table, c, flags::NO_ASYNC_LOADING))
}

/// True if the client's open transaction queued a command flagged `flag`
/// (what a check of EXEC judges it by).
fn queued_has(table: &CommandMap, c: &Client, flag: u32) -> bool {
    c.multi.as_ref().is_some_and(|q| q.iter().any(|a| matches!(lookup(table, a), Lookup::Found(s) if s.has(flag))))
}

/// Commands a RESP2 client in Pub/Sub mode may run.
fn allowed_in_pubsub(name: &str) -> bool {
    matches!(name, "subscribe" | "ssubscribe" | "psubscribe" | "unsubscribe" | "sunsubscribe" | "punsubscribe" | "ping" | "quit" | "reset")
}

/// True if `spec` must be refused while memory is over `maxmemory`: commands
/// that may grow memory, EXEC of a transaction that queued one, and anything
/// that would be queued (a queue grows without bound), but never EXEC,
/// DISCARD, QUIT or RESET themselves.
fn oom_sensitive(host: &dyn Host, table: &CommandMap, c: &Client, spec: &Spec, argv: &[Vec<u8>]) -> bool {
    match spec.full_name {
        "exec" => queued_has(table, c, flags::DENYOOM),
        "discard" | "quit" | "reset" => false,
        _ => host.scripts_ref().command_flags(spec, argv) & flags::DENYOOM != 0 || c.multi.is_some(),
    }
}

/// True if `spec` must be refused while persisting fails (MISCONF): writes,
/// EXEC of a transaction that queued one, and PING, as Redis does.
fn disk_sensitive(host: &dyn Host, table: &CommandMap, c: &Client, spec: &Spec, argv: &[Vec<u8>]) -> bool {
    match spec.full_name {
        "exec" => queued_has(table, c, flags::WRITE),
        "ping" => true,
        _ => host.scripts_ref().command_flags(spec, argv) & flags::WRITE != 0,
    }
}

/// Sends the client elsewhere (or refuses a command cluster mode cannot
/// serve), as Redis's clusterRedirectClient: EXEC discards its
/// transaction and answers the redirection itself; a command queued in
/// MULTI flags the transaction.
fn redirect(srv: &mut Server, c: &mut Client, spec: &Spec, msg: String) {
    srv.cmdstats.entry(spec.id, spec.full_name).rejected += 1;
    if spec.full_name == "exec" {
        c.multi = None;
        c.multi_error = false;
        srv.unwatch_all(c);
    } else if c.multi.is_some() {
        c.multi_error = true;
    }
    reply_error(srv, c, &CmdError::Custom(msg));
}

/// Refuses a command before it runs: counts it as rejected, flags an open
/// transaction, and for EXEC discards the transaction with EXECABORT.
fn reject(srv: &mut Server, c: &mut Client, spec: &Spec, e: &CmdError) {
    srv.cmdstats.entry(spec.id, spec.full_name).rejected += 1;
    // A refused EXEC always answers EXECABORT, even outside MULTI (Redis).
    if spec.full_name == "exec" {
        c.multi = None;
        c.multi_error = false;
        srv.unwatch_all(c);
        // Redis quotes the refusal without the ERR its other replies add.
        let why = e.message();
        let msg = format!("EXECABORT Transaction discarded because of: {}", why.strip_prefix("ERR ").unwrap_or(&why));
        reply_error(srv, c, &CmdError::Custom(msg));
        return;
    }
    if c.multi.is_some() {
        c.multi_error = true;
    }
    reply_error(srv, c, e);
}

/// Serves the clients waiting on signalled keys (see the module header).
/// Called after each top-level command; the running client is not in
/// `srv.clients` and is never one of the waiters served.
#[inline(always)]
pub fn serve_ready(srv: &mut Server, host: &mut dyn Host) {
    if srv.blocking.has_ready() {
        serve_all_ready(srv, host);
    }
}

#[inline(never)]
fn serve_all_ready(srv: &mut Server, host: &mut dyn Host) {
    while let Some(k) = srv.blocking.pop_ready() {
        serve_key(srv, host, &k);
    }
}

/// Re-runs, in FIFO order, the clients waiting on `k` whose `ready` test
/// accepts its value. Clients that block again get a new sequence number
/// past `limit`, so each waiter is tried at most once; the walk stops early
/// once the key is gone and nobody waits for deletions, so a push to a key
/// with thousands of waiters costs O(served · log n).
fn serve_key(srv: &mut Server, host: &mut dyn Host, k: &(usize, Vec<u8>)) {
    let limit = srv.blocking.seq_limit();
    let mut from = 0;
    loop {
        let next = srv.blocking.next_waiter(k, from, limit);
        let Some((seq, id)) = next else { return };
        from = seq + 1;
        let Some(ready) = srv.blocking.ready_fn(id) else { continue };
        let now = srv.unix_ms_at(Instant::now());
        let value = srv.dbs[k.0].get(&k.1, now);
        let gone = value.is_none();
        if !ready(value) {
            if gone && !srv.blocking.any_on_nokey() {
                return;
            }
            continue;
        }
        rerun(srv, host, id);
    }
}

/// Unparks `id` and runs its command again, for a wait that ends by
/// something other than a key (a MEMORY REPORT walk that finished).
pub fn resume(srv: &mut Server, host: &mut dyn Host, id: ClientId) {
    rerun(srv, host, id);
}

/// Unparks `id` and runs its command again.
fn rerun(srv: &mut Server, host: &mut dyn Host, id: ClientId) {
    let Some(mut c) = srv.clients.take(&id) else { return };
    if c.close_asap {
        // Killed by the command that made the key ready: leave the data.
        srv.clients.put(id, c);
        return;
    }
    let Some(p) = srv.blocking.unpark(id) else {
        srv.clients.put(id, c);
        return;
    };
    c.blocked = false;
    c.argv_mem = 0;
    let table = host.table().clone();
    if let Lookup::Found(spec) = exec::lookup(&table, &p.argv) {
        // Rights are checked again: they may have changed while it waited.
        if c.user.as_ref().is_some_and(|u| !u.borrow().unrestricted) {
            if let Some((_, msg)) = exec::acl_refuse(srv, &c, spec, &p.argv, LogContext::Toplevel, None) {
                reject(srv, &mut c, spec, &CmdError::Custom(format!("NOPERM {msg}")));
                srv.blocking.wake(id);
                srv.sweep_clients = true;
                srv.clients.put(id, c);
                return;
            }
        }
        srv.blocking.begin_rerun(&p);
        let start = Instant::now();
        let now = srv.unix_ms_at(start);
        exec::run(srv, host, &mut c, spec, &p.argv, now, start);
        srv.blocking.end_rerun();
    }
    if !c.blocked {
        srv.blocking.wake(id);
    }
    srv.sweep_clients = true;
    srv.clients.put(id, c);
}

/// How a blocked client is released without being served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Its timeout reply.
    Timeout,
    /// `-UNBLOCKED client unblocked via CLIENT UNBLOCK`.
    Error,
    /// The command failed after all: `-ERR` with this text (a SHUTDOWN
    /// that waited for replicas, then was aborted or could not save).
    Failed(&'static str),
    /// An error of its own (this text, its first word the code): a
    /// server turned replica releases its blocked clients with
    /// `-UNBLOCKED ...`.
    Unblocked(&'static str),
    /// A cluster redirection (-MOVED, -CLUSTERDOWN ...): its key's slot
    /// is no longer served here.
    Redirected(String),
}

/// Releases blocked client `id` (which must not be the running client);
/// false if it is not blocked. The reply is counted as the command's.
pub fn release(srv: &mut Server, table: &CommandMap, id: ClientId, how: Release) -> bool {
    if !srv.blocking.is_blocked(id) {
        return false;
    }
    let Some(mut c) = srv.clients.take(&id) else { return false };
    let p = srv.blocking.unpark(id).expect("checked above");
    c.blocked = false;
    c.argv_mem = 0;
    let mark = c.reply.buf.len();
    let failed = match how {
        Release::Timeout => {
            match p.req.on_timeout {
                TimeoutReply::NullArray => c.reply.null_array(),
                TimeoutReply::Int(n) => c.reply.int(n),
                TimeoutReply::Pair(a, b) => {
                    c.reply.array(2);
                    c.reply.int(a);
                    c.reply.int(b);
                }
            }
            false
        }
        Release::Error => {
            exec::reply_error(srv, &mut c, &CmdError::Custom("UNBLOCKED client unblocked via CLIENT UNBLOCK".into()));
            true
        }
        Release::Failed(msg) => {
            exec::reply_error(srv, &mut c, &CmdError::err(msg));
            true
        }
        Release::Unblocked(msg) => {
            exec::reply_error(srv, &mut c, &CmdError::Custom(msg.into()));
            true
        }
        Release::Redirected(msg) => {
            exec::reply_error(srv, &mut c, &CmdError::Custom(msg));
            true
        }
    };
    if let Lookup::Found(spec) = exec::lookup(table, &p.argv) {
        let reply_bytes = c.reply.buf.len().saturating_sub(mark);
        exec::account(srv, &mut c, spec, &p.argv, p.spent_us, reply_bytes, failed);
    }
    srv.blocking.wake(id);
    srv.sweep_clients = true;
    srv.clients.put(id, c);
    true
}

/// Answers every blocked client whose deadline is at or before `now` (Unix ms).
pub fn expire_blocked(srv: &mut Server, table: &CommandMap, now: i64) {
    for id in srv.blocking.due(now) {
        release(srv, table, id, Release::Timeout);
    }
}

/// Re-runs the blocked clients whose wake-up time (`BlockRequest::wake_at`)
/// is at or before `now`, with everyone else waiting on their keys.
pub fn wake_due(srv: &mut Server, host: &mut dyn Host, now: i64) {
    if srv.blocking.signal_wakeups(now) {
        serve_ready(srv, host);
    }
}
