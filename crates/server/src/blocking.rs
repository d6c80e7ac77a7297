//! The registry of blocked clients: commands that wait for a key to get data
//! (BLPOP, BZPOPMIN, BLMOVE ...) or for a deadline (WAIT). Who waits on what,
//! in which order, until when. Plain data below the server state; serving
//! and releasing waiters, which re-runs or accounts their command, is
//! dispatch's (`dispatch.rs`), so this file imports nothing above it.
//!
//! # How a handler blocks
//!
//! A handler that finds nothing to serve calls `command::block_or_null`
//! (or, to choose the reply itself when blocking is not allowed,
//! `ctx.may_block()` then `ctx.block(req)`), writes no reply and returns
//! `Ok(())`. Dispatch (`exec::run`, through
//! [`Blocking::park_if_requested`]) then parks the client: it keeps the
//! command's argv, stops reading further requests from it and does not
//! count the command yet.
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
//! command (a whole EXEC or script included) `dispatch::serve_ready` walks the
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
//! any number of blocked clients (`dispatch::expire_blocked` runs every loop turn, so a
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use storage::ValueRef;

use crate::client::{Client, ClientId};

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
    /// A time (Unix ms) at which to re-run the command although no key was
    /// signalled: a blocked XREADGROUP ... CLAIM wakes when a pending entry
    /// becomes idle enough to claim. At that time its keys are signalled,
    /// so every client waiting on them is tried, as Redis does.
    pub wake_at: Option<i64>,
}

impl BlockRequest {
    /// Waits on `keys` until `deadline`, woken when `ready` accepts a key's
    /// value; null array on timeout, no argv rewrite.
    pub fn on_keys(keys: Vec<Vec<u8>>, deadline: Option<i64>, ready: ReadyFn) -> BlockRequest {
        BlockRequest { keys, deadline, ready, on_nokey: false, on_timeout: TimeoutReply::NullArray, rerun_argv: None, wake_at: None }
    }
}

/// One parked client.
pub struct Parked {
    db: usize,
    seq: u64,
    /// What it waits for.
    pub req: BlockRequest,
    /// The command to re-run (or to account, when released).
    pub argv: Vec<Vec<u8>>,
    /// Execution time of the runs so far, in microseconds.
    pub spent_us: u64,
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
    /// Wake-up times of parked clients (`BlockRequest::wake_at`), apart
    /// from the deadlines, which INFO counts.
    wakeups: Deadlines,
    /// Signalled keys, in signal order, not yet served.
    ready: VecDeque<(usize, Vec<u8>)>,
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

    /// Changes what parked client `id` is told when released on timeout
    /// (WAIT: the replicas that acknowledged so far).
    pub fn set_timeout_reply(&mut self, id: ClientId, reply: TimeoutReply) {
        if let Some(p) = self.parked.get_mut(&id) {
            p.req.on_timeout = reply;
        }
    }

    /// Every blocked client, in no particular order.
    pub fn parked_ids(&self) -> Vec<ClientId> {
        self.parked.keys().copied().collect()
    }

    /// What blocked client `id` waits with: its keys and command.
    pub fn parked(&self, id: ClientId) -> Option<&Parked> {
        self.parked.get(&id)
    }

    /// True if `id` is blocked.
    pub fn is_blocked(&self, id: ClientId) -> bool {
        self.parked.contains_key(&id)
    }

    /// Marks `key` of `db` as possibly ready; a no-op unless someone waits on it.
    #[inline(always)]
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if !self.waiters.is_empty() {
            self.signal_waited(db, key);
        }
    }

    #[inline(never)]
    fn signal_waited(&mut self, db: usize, key: &[u8]) {
        let k = (db, key.to_vec());
        if self.waiters.contains_key(&k) && self.ready_set.insert(k.clone()) {
            self.ready.push_back(k);
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

    /// The earliest deadline or wake-up time (Unix ms), None if no blocked
    /// client has one.
    pub fn next_deadline(&self) -> Option<i64> {
        match (self.deadlines.next(), self.wakeups.next()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Signals the keys of every parked client whose wake-up time is at or
    /// before `now` (its wake-up is then used up); true if any was due.
    pub fn signal_wakeups(&mut self, now: i64) -> bool {
        if self.wakeups.next().is_none_or(|at| at > now) {
            return false;
        }
        for id in self.wakeups.due(now) {
            let Some(p) = self.parked.get_mut(&id) else { continue };
            if let Some(at) = p.req.wake_at.take() {
                self.wakeups.remove(at, id);
            }
            let (db, keys) = (p.db, p.req.keys.clone());
            for k in keys {
                self.signal(db, &k);
            }
        }
        true
    }

    /// Execution time of earlier runs of the command now finishing (taken once).
    pub fn take_carried_us(&mut self) -> u64 {
        std::mem::take(&mut self.carried_us)
    }

    /// True while a blocked client's command is being re-run.
    pub fn rerunning(&self) -> bool {
        self.resumed.is_some()
    }

    /// True if some signalled key waits to be served.
    #[inline]
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The next signalled key to serve, in signal order; keys signalled
    /// while serving queue up behind it.
    pub fn pop_ready(&mut self) -> Option<(usize, Vec<u8>)> {
        let k = self.ready.pop_front()?;
        self.ready_set.remove(&k);
        Some(k)
    }

    /// The sequence number the next parked client gets: a pass over a
    /// key's waiters stops there, so a client that blocks again is tried
    /// once per pass.
    pub fn seq_limit(&self) -> u64 {
        self.next_seq
    }

    /// The first waiter on `k` with a sequence number in `from..limit`.
    pub fn next_waiter(&self, k: &(usize, Vec<u8>), from: u64, limit: u64) -> Option<(u64, ClientId)> {
        self.waiters.get(k).and_then(|q| q.range(from..limit).next().map(|(&s, &id)| (s, id)))
    }

    /// The readiness test of parked client `id`.
    pub fn ready_fn(&self, id: ClientId) -> Option<ReadyFn> {
        self.parked.get(&id).map(|p| p.req.ready)
    }

    /// True if some parked client wakes on deletion too.
    pub fn any_on_nokey(&self) -> bool {
        self.nokey != 0
    }

    /// Clients whose deadline is at or before `now`.
    pub fn due(&self, now: i64) -> Vec<ClientId> {
        if self.deadlines.next().is_none_or(|at| at > now) {
            return Vec::new();
        }
        self.deadlines.due(now)
    }

    /// Marks the start of a re-run of a client unparked with `p`: a block
    /// during it keeps the first deadline, and the command's accounting
    /// carries the time of the earlier runs.
    pub fn begin_rerun(&mut self, p: &Parked) {
        self.resumed = Some((p.req.deadline, p.spent_us));
        self.carried_us = p.spent_us;
    }

    /// Marks the end of a re-run.
    pub fn end_rerun(&mut self) {
        self.resumed = None;
        self.carried_us = 0;
    }

    /// Queues `id` for the event loop to flush and resume.
    pub fn wake(&mut self, id: ClientId) {
        self.woken.push(id);
    }

    /// A handler's request to block the running client (see `Ctx::block`).
    pub fn request(&mut self, req: BlockRequest) {
        self.request = Some(req);
    }

    /// Unregisters `id`: from its keys' queues and the deadline set.
    pub fn unpark(&mut self, id: ClientId) -> Option<Parked> {
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
        if let Some(at) = p.req.wake_at {
            self.wakeups.remove(at, id);
        }
        Some(p)
    }

    /// Forgets a client that is going away (disconnect, CLIENT KILL).
    pub fn forget(&mut self, id: ClientId) {
        self.unpark(id);
    }
}

impl Blocking {
    /// Called by dispatch right after a handler ran: if it asked to block,
    /// parks `c` (keeping `argv` and the `usec` this run took) and returns
    /// true; the command is then not accounted yet. A request from a handler
    /// that failed (`ok` false) is dropped.
    #[inline(always)]
    pub fn park_if_requested(&mut self, c: &mut Client, argv: &[Vec<u8>], usec: u64, ok: bool) -> bool {
        self.request.is_some() && self.park(c, argv, usec, ok)
    }

    #[inline(never)]
    fn park(&mut self, c: &mut Client, argv: &[Vec<u8>], usec: u64, ok: bool) -> bool {
        let Some(mut req) = self.request.take() else { return false };
        if !ok {
            return false;
        }
        let mut spent_us = usec;
        if let Some((deadline, spent)) = self.resumed.take() {
            // A re-run that blocks again keeps its first deadline.
            req.deadline = deadline;
            spent_us += spent;
        }
        let mut seen = HashSet::new();
        req.keys.retain(|k| seen.insert(k.clone()));
        let seq = self.next_seq;
        self.next_seq += 1;
        for key in &req.keys {
            self.waiters.entry((c.db, key.clone())).or_default().insert(seq, c.id);
        }
        if let Some(at) = req.deadline {
            self.deadlines.insert(at, c.id);
        }
        if let Some(at) = req.wake_at {
            self.wakeups.insert(at, c.id);
        }
        if req.on_nokey {
            self.nokey += 1;
        }
        let argv = req.rerun_argv.take().unwrap_or_else(|| argv.to_vec());
        c.argv_mem = argv.iter().map(Vec::len).sum();
        self.parked.insert(c.id, Parked { db: c.db, seq, req, argv, spent_us });
        c.blocked = true;
        true
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
