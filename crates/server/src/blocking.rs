//! Blocked clients: commands that wait for a key to get data (BLPOP, BZPOPMIN,
//! BLMOVE ...) or for a deadline (WAIT).
//!
//! # How a handler blocks
//!
//! A handler that finds nothing to serve calls [`block_or_null`] (or, to
//! choose the reply itself when blocking is not allowed, `ctx.may_block()`
//! then `ctx.block(req)`), writes no reply and returns `Ok(())`. Dispatch
//! (`exec::run`) then parks the client: it keeps the command's argv, stops
//! reading further requests from it and does not count the command yet.
//!
//! ```ignore
//! if nothing_to_pop {
//!     return block_or_null(ctx, keys, deadline, is_list, NullKind::Array);
//! }
//! // or, with a custom timeout reply or re-run arguments:
//! if !ctx.may_block() { /* reply as on timeout */ }
//! ctx.block(BlockRequest { rerun_argv: Some(pinned), ..BlockRequest::on_keys(keys, deadline, is_stream) });
//! ```
//!
//! # How it wakes up
//!
//! Every write signals its key (`Ctx::key_modified` calls [`Blocking::signal`]);
//! a signal is kept only for keys someone waits on. After each top-level
//! command (a whole EXEC or script included) [`serve_ready`] walks the
//! signalled keys and, for each, the clients waiting on it in FIFO order
//! (only those queued before the pass began, so a client that blocks again
//! cannot loop): if the request's `ready` test accepts the
//! key's current value, the client is unparked and its command re-runs from
//! scratch, exactly as if just received. That re-run replies (data, or
//! WRONGTYPE if the key changed type under a BLMOVE destination), or blocks
//! again at the tail of the queues with its original deadline. Writes done
//! by a re-run (BLMOVE's push) signal further keys, served in the same pass.
//! Re-running instead of handing data over is what Redis 7 does; it keeps
//! every blocking command's logic in its own handler, so a new blocking
//! type (XREAD BLOCK) needs only a `ready` test and the handler.
//!
//! # Deadlines
//!
//! Deadlines (Unix ms) live in a `(deadline, client id)` ordered set, so the
//! event loop finds what is due, and how long it may sleep, in O(log n) with
//! any number of blocked clients ([`expire`] runs every loop turn, so a
//! timeout is answered to the millisecond, not at the next cron tick). A due
//! client gets its request's timeout reply.
//!
//! A client answered outside its own turn (served, timed out, unblocked) is
//! listed in `Blocking::take_woken`; the event loop then writes its reply
//! and runs the requests it pipelined behind the blocking command.
//!
//! # Accounting
//!
//! As in Redis, a blocking command counts once in commandstats, the slow
//! log and the latency monitor: when it finally replies (served, timed out,
//! or CLIENT UNBLOCK), with the execution time of all its runs and without
//! the time spent waiting. A client disconnected or killed while blocked is
//! not counted.
//!
//! Blocking is refused (the handler answers as on timeout) inside MULTI/EXEC,
//! for socketless internal clients, and while `Blocking::deny` is raised
//! (script runners raise it around the commands a script calls).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Instant;

use storage::ValueRef;

use crate::client::{Client, ClientId};
use crate::commands::{Ctx, CmdError, CmdResult};
use crate::exec::{self, Lookup};
use crate::server::Server;

/// Decides whether the current value of a waited key is worth re-running
/// the blocked command for (None: the key does not exist).
pub type ReadyFn = fn(Option<ValueRef<'_>>) -> bool;

/// What a blocked client is told when its deadline passes (or on CLIENT
/// UNBLOCK ... TIMEOUT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutReply {
    /// Null array: `*-1` in RESP2, `_` in RESP3 (every key-blocking command).
    NullArray,
    /// An integer (WAIT: replicas that acknowledged).
    Int(i64),
    /// A pair of integers (WAITAOF: local, replicas).
    Pair(i64, i64),
}

/// A handler's request to block the calling client.
#[derive(Debug, Clone)]
pub struct BlockRequest {
    /// Keys of the client's database to wait on (may be empty: deadline only).
    pub keys: Vec<Vec<u8>>,
    /// Unix ms deadline; None waits forever.
    pub deadline: Option<i64>,
    /// Which values of a signalled key wake the client.
    pub ready: ReadyFn,
    /// Also wake on deletion or type change (XREADGROUP); shown by INFO
    /// `total_blocking_keys_on_nokey`.
    pub on_nokey: bool,
    /// Reply on timeout.
    pub on_timeout: TimeoutReply,
    /// Arguments to re-run instead of the original ones (XREAD BLOCK pins
    /// `$` to the last id it saw, as Redis rewrites its argv); the slow
    /// log then shows these too.
    pub rerun_argv: Option<Vec<Vec<u8>>>,
}

impl BlockRequest {
    /// Waits on `keys` until `deadline`, woken when `ready` accepts a key's
    /// value; null array on timeout, no argv rewrite.
    pub fn on_keys(keys: Vec<Vec<u8>>, deadline: Option<i64>, ready: ReadyFn) -> BlockRequest {
        BlockRequest { keys, deadline, ready, on_nokey: false, on_timeout: TimeoutReply::NullArray, rerun_argv: None }
    }
}

/// One parked client.
struct Parked {
    db: usize,
    seq: u64,
    req: BlockRequest,
    argv: Vec<Vec<u8>>,
    /// Execution time of the runs so far, in microseconds.
    spent_us: u64,
}

/// Deadline-ordered set of blocked clients: cheap earliest-deadline lookup
/// and removal with thousands of entries.
#[derive(Debug, Default)]
pub struct Deadlines {
    set: BTreeSet<(i64, ClientId)>,
}

impl Deadlines {
    /// Adds `id` due at `at` (Unix ms).
    pub fn insert(&mut self, at: i64, id: ClientId) {
        self.set.insert((at, id));
    }

    /// Removes `id` due at `at`; false if absent.
    pub fn remove(&mut self, at: i64, id: ClientId) -> bool {
        self.set.remove(&(at, id))
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<i64> {
        self.set.first().map(|&(at, _)| at)
    }

    /// The clients due at or before `now`, earliest first (left in the set).
    pub fn due(&self, now: i64) -> Vec<ClientId> {
        self.set.range(..=(now, ClientId::MAX)).map(|&(_, id)| id).collect()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// The server's registry of blocked clients (one per executor).
#[derive(Default)]
pub struct Blocking {
    /// (db, key) -> waiting clients by block sequence number (FIFO).
    waiters: HashMap<(usize, Vec<u8>), BTreeMap<u64, ClientId>>,
    parked: HashMap<ClientId, Parked>,
    deadlines: Deadlines,
    /// Signalled keys, in signal order, not yet served.
    ready: Vec<(usize, Vec<u8>)>,
    ready_set: HashSet<(usize, Vec<u8>)>,
    /// Clients that got their final reply and must be flushed, then resume
    /// reading requests (drained by the event loop).
    woken: Vec<ClientId>,
    /// A handler's pending request to block the running client.
    request: Option<BlockRequest>,
    /// Deadline and spent time of the client being re-run.
    resumed: Option<(Option<i64>, u64)>,
    /// Execution time of earlier runs, added to the accounting of the
    /// command that is finishing now.
    carried_us: u64,
    next_seq: u64,
    /// Parked clients that wake on deletion too.
    nokey: usize,
    /// Raised while blocking is not allowed (a script is running).
    pub deny: u32,
}

impl Blocking {
    /// Number of blocked clients (INFO `blocked_clients`).
    pub fn clients(&self) -> usize {
        self.parked.len()
    }

    /// Keys with at least one waiter (INFO `total_blocking_keys`).
    pub fn keys(&self) -> usize {
        self.waiters.len()
    }

    /// Keys with a waiter that wakes on deletion (INFO `total_blocking_keys_on_nokey`).
    pub fn keys_on_nokey(&self) -> usize {
        self.waiters.values().filter(|w| w.values().any(|id| self.parked.get(id).is_some_and(|p| p.req.on_nokey))).count()
    }

    /// Blocked clients with a deadline (INFO `clients_in_timeout_table`).
    pub fn with_deadline(&self) -> usize {
        self.deadlines.len()
    }

    /// True if `id` is blocked.
    pub fn is_blocked(&self, id: ClientId) -> bool {
        self.parked.contains_key(&id)
    }

    /// Marks `key` of `db` as possibly ready; a no-op unless someone waits on it.
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if self.waiters.is_empty() {
            return;
        }
        let k = (db, key.to_vec());
        if self.waiters.contains_key(&k) && self.ready_set.insert(k.clone()) {
            self.ready.push(k);
        }
    }

    /// Signals every waited key of `db` (SWAPDB, FLUSHDB: the data under
    /// every key may have changed).
    pub fn signal_db(&mut self, db: usize) {
        let keys: Vec<Vec<u8>> = self.waiters.keys().filter(|(d, _)| *d == db).map(|(_, k)| k.clone()).collect();
        for k in keys {
            self.signal(db, &k);
        }
    }

    /// Clients to flush and resume, taken by the event loop.
    pub fn take_woken(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.woken)
    }

    /// The earliest deadline (Unix ms), None if no blocked client has one.
    pub fn next_deadline(&self) -> Option<i64> {
        self.deadlines.next()
    }

    /// Execution time of earlier runs of the command now finishing (taken once).
    pub fn take_carried_us(&mut self) -> u64 {
        std::mem::take(&mut self.carried_us)
    }

    /// True while a blocked client's command is being re-run.
    pub fn rerunning(&self) -> bool {
        self.resumed.is_some()
    }

    /// Unregisters `id`: from its keys' queues and the deadline set.
    fn unpark(&mut self, id: ClientId) -> Option<Parked> {
        let p = self.parked.remove(&id)?;
        if p.req.on_nokey {
            self.nokey -= 1;
        }
        for key in &p.req.keys {
            let k = (p.db, key.clone());
            if let Some(q) = self.waiters.get_mut(&k) {
                q.remove(&p.seq);
                if q.is_empty() {
                    self.waiters.remove(&k);
                }
            }
        }
        if let Some(at) = p.req.deadline {
            self.deadlines.remove(at, id);
        }
        Some(p)
    }

    /// Forgets a client that is going away (disconnect, CLIENT KILL).
    pub fn forget(&mut self, id: ClientId) {
        self.unpark(id);
    }
}

impl Ctx<'_> {
    /// True if the running client may block: not inside MULTI/EXEC, not a
    /// socketless internal client, not while a script runs.
    pub fn may_block(&self) -> bool {
        !self.client.in_exec && self.client.sock.is_some() && self.srv.blocking.deny == 0
    }

    /// Blocks the running client: the handler must then write no reply and
    /// return `Ok(())`. Check `may_block` first.
    pub fn block(&mut self, req: BlockRequest) {
        self.srv.blocking.request = Some(req);
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

/// Parses a blocking timeout in seconds (fractions allowed) into a Unix ms
/// deadline; 0 means none. Redis's errors and rounding (up to the next ms);
/// like Redis's long double parser it also takes hexadecimal integers.
pub fn parse_timeout_secs(a: &[u8], now: i64) -> Result<Option<i64>, CmdError> {
    let v = resp::num::parse_f64(a).or_else(|| parse_hex(a)).ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    let ms = v * 1000.0;
    if ms > i64::MAX as f64 {
        return Err(CmdError::err("timeout is out of range"));
    }
    deadline_from_ms(ms.ceil() as i64, now)
}

/// `[+-]0x<hex digits>` as a float.
fn parse_hex(a: &[u8]) -> Option<f64> {
    let (neg, rest) = match a.first()? {
        b'-' => (true, &a[1..]),
        b'+' => (false, &a[1..]),
        _ => (false, a),
    };
    let digits = rest.strip_prefix(b"0x").or_else(|| rest.strip_prefix(b"0X"))?;
    if digits.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for &d in digits {
        v = v * 16.0 + f64::from(char::from(d).to_digit(16)?);
    }
    Some(if neg { -v } else { v })
}

/// Parses a timeout in milliseconds (WAIT, WAITAOF) into a deadline.
pub fn parse_timeout_ms(a: &[u8], now: i64) -> Result<Option<i64>, CmdError> {
    let ms = resp::num::parse_i64(a).ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    deadline_from_ms(ms, now)
}

fn deadline_from_ms(ms: i64, now: i64) -> Result<Option<i64>, CmdError> {
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if ms == 0 {
        return Ok(None);
    }
    now.checked_add(ms).map(Some).ok_or_else(|| CmdError::err("timeout is out of range"))
}

/// Called by dispatch right after a handler ran: if it asked to block,
/// parks `c` (keeping `argv` and the `usec` this run took) and returns
/// true; the command is then not accounted yet. A request from a handler
/// that failed (`ok` false) is dropped.
pub fn park_if_requested(srv: &mut Server, c: &mut Client, argv: &[Vec<u8>], usec: u64, ok: bool) -> bool {
    let Some(mut req) = srv.blocking.request.take() else { return false };
    if !ok {
        return false;
    }
    let b = &mut srv.blocking;
    let mut spent_us = usec;
    if let Some((deadline, spent)) = b.resumed.take() {
        // A re-run that blocks again keeps its first deadline.
        req.deadline = deadline;
        spent_us += spent;
    }
    let mut seen = HashSet::new();
    req.keys.retain(|k| seen.insert(k.clone()));
    let seq = b.next_seq;
    b.next_seq += 1;
    for key in &req.keys {
        b.waiters.entry((c.db, key.clone())).or_default().insert(seq, c.id);
    }
    if let Some(at) = req.deadline {
        b.deadlines.insert(at, c.id);
    }
    if req.on_nokey {
        b.nokey += 1;
    }
    let argv = req.rerun_argv.take().unwrap_or_else(|| argv.to_vec());
    b.parked.insert(c.id, Parked { db: c.db, seq, req, argv, spent_us });
    c.blocked = true;
    true
}

/// Serves the clients waiting on signalled keys (see the module header).
/// Called after each top-level command; the running client is not in
/// `srv.clients` and is never one of the waiters served.
pub fn serve_ready(srv: &mut Server) {
    while !srv.blocking.ready.is_empty() {
        let batch = std::mem::take(&mut srv.blocking.ready);
        for k in batch {
            srv.blocking.ready_set.remove(&k);
            serve_key(srv, &k);
        }
    }
}

/// Re-runs, in FIFO order, the clients waiting on `k` whose `ready` test
/// accepts its value. Clients that block again get a new sequence number
/// past `limit`, so each waiter is tried at most once; the walk stops early
/// once the key is gone and nobody waits for deletions, so a push to a key
/// with thousands of waiters costs O(served · log n).
fn serve_key(srv: &mut Server, k: &(usize, Vec<u8>)) {
    let limit = srv.blocking.next_seq;
    let mut from = 0;
    loop {
        let next = srv.blocking.waiters.get(k).and_then(|q| q.range(from..limit).next().map(|(&s, &id)| (s, id)));
        let Some((seq, id)) = next else { return };
        from = seq + 1;
        let Some(ready) = srv.blocking.parked.get(&id).map(|p| p.req.ready) else { continue };
        let now = srv.unix_ms_at(Instant::now());
        let value = srv.dbs[k.0].get(&k.1, now);
        let gone = value.is_none();
        if !ready(value) {
            if gone && srv.blocking.nokey == 0 {
                return;
            }
            continue;
        }
        rerun(srv, id);
    }
}

/// Unparks `id` and runs its command again.
fn rerun(srv: &mut Server, id: ClientId) {
    let Some(mut c) = srv.clients.remove(&id) else { return };
    if c.close_asap {
        // Killed by the command that made the key ready: leave the data.
        srv.clients.insert(id, c);
        return;
    }
    let Some(p) = srv.blocking.unpark(id) else {
        srv.clients.insert(id, c);
        return;
    };
    c.blocked = false;
    let table = srv.commands.clone();
    if let Lookup::Found(spec) = exec::lookup(&table, &p.argv) {
        srv.blocking.resumed = Some((p.req.deadline, p.spent_us));
        srv.blocking.carried_us = p.spent_us;
        let start = Instant::now();
        let now = srv.unix_ms_at(start);
        exec::run(srv, &mut c, spec, &p.argv, now, start);
        srv.blocking.resumed = None;
        srv.blocking.carried_us = 0;
    }
    if !c.blocked {
        srv.blocking.woken.push(id);
    }
    srv.sweep_clients = true;
    srv.clients.insert(id, c);
}

/// How a blocked client is released without being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Its timeout reply.
    Timeout,
    /// `-UNBLOCKED client unblocked via CLIENT UNBLOCK`.
    Error,
}

/// Releases blocked client `id` (which must not be the running client);
/// false if it is not blocked. The reply is counted as the command's.
pub fn release(srv: &mut Server, id: ClientId, how: Release) -> bool {
    if !srv.blocking.is_blocked(id) {
        return false;
    }
    let Some(mut c) = srv.clients.remove(&id) else { return false };
    let p = srv.blocking.unpark(id).expect("checked above");
    c.blocked = false;
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
    };
    let table = srv.commands.clone();
    if let Lookup::Found(spec) = exec::lookup(&table, &p.argv) {
        exec::account(srv, &mut c, spec, &p.argv, p.spent_us, failed);
    }
    srv.blocking.woken.push(id);
    srv.sweep_clients = true;
    srv.clients.insert(id, c);
    true
}

/// Answers every client whose deadline is at or before `now` (Unix ms).
pub fn expire(srv: &mut Server, now: i64) {
    if srv.blocking.deadlines.next().is_none_or(|at| at > now) {
        return;
    }
    for id in srv.blocking.deadlines.due(now) {
        release(srv, id, Release::Timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_pop_in_order() {
        let mut d = Deadlines::default();
        d.insert(30, 1);
        d.insert(10, 2);
        d.insert(20, 3);
        d.insert(10, 4);
        assert_eq!(d.next(), Some(10));
        assert!(d.remove(20, 3));
        assert!(!d.remove(20, 3));
        assert_eq!(d.due(9), Vec::<ClientId>::new());
        assert_eq!(d.due(10), vec![2, 4]);
        assert!(d.remove(10, 2) && d.remove(10, 4));
        assert_eq!(d.next(), Some(30));
        assert_eq!(d.due(i64::MAX), vec![1]);
        assert!(d.remove(30, 1));
        assert!(d.is_empty());
    }

    #[test]
    fn deadlines_scale() {
        let mut d = Deadlines::default();
        for i in 0..10_000u64 {
            d.insert(((i * 7919) % 10_000) as i64, i);
        }
        assert_eq!(d.len(), 10_000);
        let due = d.due(4_999);
        assert_eq!(due.len(), 5_000);
        for (at, id) in (0..5_000).zip(due) {
            assert!(d.remove(at, id));
        }
        assert_eq!(d.next(), Some(5_000));
    }

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout_secs(b"0", 1000), Ok(None));
        assert_eq!(parse_timeout_secs(b"0.0001", 1000), Ok(Some(1001)));
        assert_eq!(parse_timeout_secs(b"1.5", 1000), Ok(Some(2500)));
        assert_eq!(parse_timeout_secs(b"-1", 0), Err(CmdError::err("timeout is negative")));
        assert_eq!(parse_timeout_secs(b"abc", 0), Err(CmdError::err("timeout is not a float or out of range")));
        assert_eq!(parse_timeout_secs(b"inf", 0), Err(CmdError::err("timeout is out of range")));
        assert_eq!(parse_timeout_secs(b"0x7FFFFFFFFFFFFF", 0), Err(CmdError::err("timeout is out of range")));
        assert_eq!(parse_timeout_secs(b"0x10", 0), Ok(Some(16_000)));
        assert_eq!(parse_timeout_secs(b"0x", 0), Err(CmdError::err("timeout is not a float or out of range")));
        assert_eq!(parse_timeout_secs(b"9223372036854775", 1000), Err(CmdError::err("timeout is out of range")));
        assert_eq!(parse_timeout_ms(b"1.5", 0), Err(CmdError::err("timeout is not an integer or out of range")));
        assert_eq!(parse_timeout_ms(b"100", 5), Ok(Some(105)));
    }

    #[test]
    fn signal_only_waited_keys() {
        let mut b = Blocking::default();
        b.signal(0, b"k");
        assert!(b.ready.is_empty());
        b.waiters.entry((0, b"k".to_vec())).or_default().insert(0, 7);
        b.signal(0, b"k");
        b.signal(0, b"k");
        b.signal(1, b"k");
        assert_eq!(b.ready, vec![(0, b"k".to_vec())]);
        b.signal_db(0);
        assert_eq!(b.ready.len(), 1);
    }
}
