//! `Stream`: the value of a Redis STREAM — an append-only log of entries
//! (each an ID and field/value pairs) plus consumer groups.
//!
//! Entries live in packed nodes, each keyed by a base ID that is at most
//! the ID of every entry it holds and above every entry of the node before
//! it (Redis's radix tree of listpacks, with a sorted deque in place of
//! the radix tree, so memory is exact and appends/head trims are O(1)):
//!
//! ```text
//! nodes: VecDeque<(base: StreamId, Node)>   sorted by base
//! Node.buf:
//!   [n varint] n x elem                  master fields: the fields of
//!                                        the node's first entry
//!   entry*: [flags u8][ms - base.ms varint][seq varint]
//!           seq is `seq - base.seq` when the ms delta is 0, else raw
//!           flags & SAME: values only, one elem per master field
//!           otherwise:    [pairs varint] pairs x (field elem, value elem)
//!   elem:   [h varint] h & 1 == 1: the integer zigzag(h >> 1) (a string
//!                                  that is an i64's canonical form)
//!                      h & 1 == 0: h >> 1 bytes of string follow
//! ```
//!
//! Entries whose fields repeat the master's (the usual case: a stream of
//! events of one shape) cost their values, a flags byte and two short
//! varints. A deleted entry is cut out of its node at once (Redis only
//! flags it); a node left empty is dropped. A node accepts appends while
//! it has taken fewer than `stream-node-max-entries` entries (deleted ones
//! included, as in Redis, so trims by whole node match Redis's) and fewer
//! than `stream-node-max-bytes` bytes.
//!
//! Consumer groups, consumers and pending entries (PELs) are sorted
//! vectors: groups and consumers by name (Redis's reply order), PELs by
//! ID. Reads are binary searches; acknowledging from the middle shifts the
//! tail, which is cheap for the PEL sizes clients keep.
//!
//! Bookkeeping mirrors Redis 7: `last_id`, `first_id` (as recorded, for
//! XINFO), `max_deleted_id`, `entries_added`, and per group `entries_read`
//! with the lag estimate of `group_lag`.
//!
//! Memory (`mem_usage`): heap bytes this stream owns, each block rounded
//! to jemalloc's size class; the owner counts `size_of::<Stream>()`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;

use crate::encoding::{alloc_size, reserve_class, shrink_class};
use crate::strref::parse_canonical_i64;

/// The largest total of field and value bytes one entry may hold (Redis's
/// listpack limit).
pub const MAX_ENTRY_BYTES: usize = 1 << 30;
/// `entries_read` of a group whose read counter is unknown.
pub const INVALID_ENTRIES_READ: i64 = -1;
/// Flag of an entry whose fields are the node's master fields.
const SAME: u8 = 1;

/// A stream entry ID: milliseconds and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// 0-0.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID.
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    /// An ID from its parts.
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID; None after `MAX`.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID; None before `MIN`.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// True for 0-0.
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }
}

/// `ms-seq`, as replies show an ID.
impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Node size limits: `stream-node-max-bytes` and `stream-node-max-entries`
/// (0 means no limit, as in Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamConfig {
    /// Most bytes a node's buffer grows to.
    pub node_max_bytes: usize,
    /// Most entries a node takes.
    pub node_max_entries: usize,
    /// Seconds an idempotent ID is remembered unless the stream sets its
    /// own (`stream-idmp-duration`, XCFGSET IDMP-DURATION).
    pub idmp_duration: u64,
    /// Idempotent IDs remembered per producer, likewise
    /// (`stream-idmp-maxsize`, XCFGSET IDMP-MAXSIZE).
    pub idmp_maxsize: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig { node_max_bytes: 4096, node_max_entries: 100, idmp_duration: 100, idmp_maxsize: 100 }
    }
}

/// Redis 8.6's idempotent production (XADD IDMP / IDMPAUTO, XCFGSET): per
/// producer, the idempotent IDs it sent lately, each with the entry it
/// made and when, oldest first; and the stream's settings and counters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Idmp {
    /// XCFGSET's IDMP-DURATION (seconds); None: the server's default.
    pub duration: Option<u64>,
    /// XCFGSET's IDMP-MAXSIZE; None: the server's default.
    pub maxsize: Option<u64>,
    /// Idempotent IDs ever recorded (kept across XCFGSET's clearing).
    pub iids_added: u64,
    /// XADDs answered from the record instead of adding.
    pub iids_duplicates: u64,
    producers: Vec<(Box<[u8]>, IidQueue)>,
}

/// One producer's idempotent IDs, oldest first: (ID, entry made, when).
type IidQueue = VecDeque<(Box<[u8]>, StreamId, i64)>;

impl Idmp {
    /// The duration (ms) and per-producer size in force under `cfg`.
    pub fn limits(&self, cfg: &StreamConfig) -> (i64, usize) {
        let secs = self.duration.unwrap_or(cfg.idmp_duration);
        (secs.saturating_mul(1000).min(i64::MAX as u64) as i64, self.maxsize.unwrap_or(cfg.idmp_maxsize) as usize)
    }

    fn producer(&self, pid: &[u8]) -> Result<usize, usize> {
        self.producers.binary_search_by(|(p, _)| (**p).cmp(pid))
    }

    /// Forgets the IDs of producer `pid` older than `ttl_ms` at `now`,
    /// and the producer once it has none.
    fn expire(&mut self, pid: &[u8], now: i64, ttl_ms: i64) {
        let Ok(i) = self.producer(pid) else { return };
        let q = &mut self.producers[i].1;
        while q.front().is_some_and(|(_, _, at)| now.saturating_sub(*at) >= ttl_ms) {
            q.pop_front();
        }
        if q.is_empty() {
            self.producers.remove(i);
        }
    }

    /// The entry producer `pid` made with idempotent ID `iid`, if it is
    /// still remembered; a hit counts as a duplicate.
    pub fn lookup(&mut self, pid: &[u8], iid: &[u8], now: i64, cfg: &StreamConfig) -> Option<StreamId> {
        let (ttl, _) = self.limits(cfg);
        self.expire(pid, now, ttl);
        let i = self.producer(pid).ok()?;
        let id = self.producers[i].1.iter().find(|(k, _, _)| **k == *iid).map(|(_, id, _)| *id)?;
        self.iids_duplicates += 1;
        Some(id)
    }

    /// Remembers that `pid` made entry `id` with `iid` at `now`, dropping
    /// the producer's oldest past the size limit.
    pub fn record(&mut self, pid: &[u8], iid: &[u8], id: StreamId, now: i64, cfg: &StreamConfig) {
        let (ttl, max) = self.limits(cfg);
        self.expire(pid, now, ttl);
        let i = match self.producer(pid) {
            Ok(i) => i,
            Err(i) => {
                self.producers.insert(i, (pid.into(), VecDeque::new()));
                i
            }
        };
        let q = &mut self.producers[i].1;
        q.retain(|(k, _, _)| **k != *iid);
        q.push_back((iid.into(), id, now));
        while q.len() > max.max(1) {
            q.pop_front();
        }
        self.iids_added += 1;
    }

    /// XCFGSET: sets what is given; a change of either value forgets every
    /// producer's IDs (the counters stay).
    pub fn configure(&mut self, duration: Option<u64>, maxsize: Option<u64>, cfg: &StreamConfig) {
        let before = self.limits(cfg);
        if duration.is_some() {
            self.duration = duration;
        }
        if maxsize.is_some() {
            self.maxsize = maxsize;
        }
        if self.limits(cfg) != before {
            self.producers.clear();
        }
    }

    /// Producers and idempotent IDs remembered at `now` (XINFO STREAM's
    /// pids-tracked and iids-tracked).
    pub fn tracked(&self, now: i64, cfg: &StreamConfig) -> (usize, usize) {
        let (ttl, _) = self.limits(cfg);
        let live = |q: &IidQueue| q.iter().filter(|(_, _, at)| now.saturating_sub(*at) < ttl).count();
        let counts: Vec<usize> = self.producers.iter().map(|(_, q)| live(q)).filter(|n| *n > 0).collect();
        (counts.len(), counts.iter().sum())
    }

    fn mem_usage(&self) -> usize {
        self.producers.iter().map(|(p, q)| alloc_size(p.len()) + q.iter().map(|(k, _, _)| alloc_size(k.len()) + 40).sum::<usize>()).sum()
    }
}

/// One entry, copied out: its ID and its fields and values, alternating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's ID.
    pub id: StreamId,
    /// field, value, field, value, ...
    pub fields: Vec<Vec<u8>>,
}

/// How XADD names the new entry's ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddId {
    /// `*`: the time, or the last ID's successor.
    Auto,
    /// `<ms>-*`: this time, the next free sequence.
    Ms(u64),
    /// An explicit ID.
    Exact(StreamId),
}

/// Why an XADD ID is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    /// The ID is not above the stream's last ID (or no such ID exists).
    NotGreater,
    /// The stream's last ID is the largest possible one.
    Exhausted,
}

/// How XTRIM (or XADD's trim option) bounds the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries with an ID below this one.
    MinId(StreamId),
}

/// What deleting or trimming an entry does about the consumer groups that
/// reference it (Redis 8.2's KEEPREF / DELREF / ACKED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RefPolicy {
    /// Delete the entry; pending lists keep their (now dangling) references.
    #[default]
    KeepRef,
    /// Delete the entry and drop it from every group's pending list.
    DelRef,
    /// Delete the entry only if no group still needs it: none has it
    /// pending and every group was delivered past it.
    Acked,
}

/// An entry taken over by XREADGROUP ... CLAIM, with what it had been
/// before: idle ms since its last delivery and times delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedEntry {
    /// The entry.
    pub entry: Entry,
    /// Ms since its previous delivery.
    pub idle: i64,
    /// Times delivered before this claim.
    pub delivery_count: u64,
}

/// A pending (delivered, not acknowledged) entry of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    /// Unix ms of the last delivery.
    pub delivery_time: i64,
    /// Times delivered.
    pub delivery_count: u64,
    /// Owner; None only for an entry claimed with FORCE by no consumer yet.
    pub consumer: Option<Box<[u8]>>,
}

/// How XNACK (Redis 8.8) changes a released entry's delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackMode {
    /// One less: the delivery does not count.
    Silent,
    /// Unchanged.
    Fail,
    /// The largest count (`i64::MAX`): the entry failed for good.
    Fatal,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    name: Box<[u8]>,
    /// Unix ms of the last interaction (read or claim attempt).
    pub seen_time: i64,
    /// Unix ms of the last successful read or claim; -1 if none.
    pub active_time: i64,
    pel: Vec<StreamId>,
}

impl Consumer {
    /// The consumer's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// IDs pending for this consumer, ascending.
    pub fn pending(&self) -> &[StreamId] {
        &self.pel
    }

    fn mem_usage(&self) -> usize {
        alloc_size(self.name.len()) + alloc_size(self.pel.capacity() * size_of::<StreamId>())
    }
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    name: Box<[u8]>,
    /// Last ID delivered to the group.
    pub last_id: StreamId,
    /// Logical read counter; `INVALID_ENTRIES_READ` when unknown.
    pub entries_read: i64,
    pel: Vec<(StreamId, Nack)>,
    consumers: Vec<Consumer>,
}

/// How a claim changes an entry's delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Add one.
    Incr,
    /// Leave as is (JUSTID).
    Keep,
    /// Set (RETRYCOUNT).
    Set(u64),
}

impl Group {
    fn new(name: &[u8], last_id: StreamId, entries_read: i64) -> Group {
        Group { name: name.into(), last_id, entries_read, pel: Vec::new(), consumers: Vec::new() }
    }

    /// The group's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Pending entries, ascending by ID.
    pub fn pending(&self) -> &[(StreamId, Nack)] {
        &self.pel
    }

    /// Index of the first pending entry at or after `id`.
    pub fn pending_from(&self, id: StreamId) -> usize {
        self.pel.partition_point(|(k, _)| *k < id)
    }

    /// The pending entry `id`.
    pub fn nack(&self, id: StreamId) -> Option<&Nack> {
        self.pel.binary_search_by_key(&id, |(k, _)| *k).ok().map(|i| &self.pel[i].1)
    }

    /// Consumers, ascending by name.
    pub fn consumers(&self) -> &[Consumer] {
        &self.consumers
    }

    fn consumer_pos(&self, name: &[u8]) -> Result<usize, usize> {
        self.consumers.binary_search_by(|c| (*c.name).cmp(name))
    }

    /// The consumer called `name`.
    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumer_pos(name).ok().map(|i| &self.consumers[i])
    }

    /// The consumer called `name`, for changing its times.
    pub fn consumer_mut(&mut self, name: &[u8]) -> Option<&mut Consumer> {
        self.consumer_pos(name).ok().map(|i| &mut self.consumers[i])
    }

    /// Creates consumer `name` (seen now, never active); false if it exists.
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> bool {
        match self.consumer_pos(name) {
            Ok(_) => false,
            Err(i) => {
                self.consumers.insert(i, Consumer { name: name.into(), seen_time: now, active_time: -1, pel: Vec::new() });
                true
            }
        }
    }

    /// Deletes consumer `name` and its pending entries; returns how many
    /// entries it had pending, None if there was no such consumer.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let i = self.consumer_pos(name).ok()?;
        let c = self.consumers.remove(i);
        for id in &c.pel {
            if let Ok(p) = self.pel.binary_search_by_key(id, |(k, _)| *k) {
                self.pel.remove(p);
            }
        }
        Some(c.pel.len())
    }

    /// Acknowledges `id`; true if it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Ok(p) = self.pel.binary_search_by_key(&id, |(k, _)| *k) else { return false };
        let (_, nack) = self.pel.remove(p);
        if let Some(owner) = nack.consumer {
            self.unlink(&owner, id);
        }
        true
    }

    fn unlink(&mut self, owner: &[u8], id: StreamId) {
        if let Ok(ci) = self.consumer_pos(owner) {
            let pel = &mut self.consumers[ci].pel;
            if let Ok(k) = pel.binary_search(&id) {
                pel.remove(k);
            }
        }
    }

    fn link(&mut self, owner: &[u8], id: StreamId) {
        if let Ok(ci) = self.consumer_pos(owner) {
            let pel = &mut self.consumers[ci].pel;
            if let Err(k) = pel.binary_search(&id) {
                pel.insert(k, id);
            }
        }
    }

    /// Records a delivery of `id` to `consumer` (which must exist) by a
    /// group read: a new pending entry, or one taken over from its previous
    /// owner with its count reset to 1.
    pub fn deliver(&mut self, id: StreamId, consumer: &[u8], now: i64) {
        let nack = Nack { delivery_time: now, delivery_count: 1, consumer: Some(consumer.into()) };
        match self.pel.binary_search_by_key(&id, |(k, _)| *k) {
            Ok(p) => {
                let old = std::mem::replace(&mut self.pel[p].1, nack);
                if let Some(o) = old.consumer {
                    self.unlink(&o, id);
                }
            }
            Err(p) => self.pel.insert(p, (id, nack)),
        }
        self.link(consumer, id);
    }

    /// Adds `id` to the PEL with no owner (XCLAIM FORCE) unless pending.
    pub fn force_pending(&mut self, id: StreamId, now: i64) {
        if let Err(p) = self.pel.binary_search_by_key(&id, |(k, _)| *k) {
            self.pel.insert(p, (id, Nack { delivery_time: now, delivery_count: 1, consumer: None }));
        }
    }

    /// Gives the pending entry `id` to `consumer` (which must exist) with
    /// a new delivery time and count; false if `id` is not pending.
    pub fn claim(&mut self, id: StreamId, consumer: &[u8], delivery_time: i64, retry: Retry) -> bool {
        let Ok(p) = self.pel.binary_search_by_key(&id, |(k, _)| *k) else { return false };
        let nack = &mut self.pel[p].1;
        nack.delivery_time = delivery_time;
        match retry {
            Retry::Incr => nack.delivery_count = nack.delivery_count.saturating_add(1),
            Retry::Keep => {}
            Retry::Set(n) => nack.delivery_count = n,
        }
        let old = nack.consumer.take();
        nack.consumer = Some(consumer.into());
        if old.as_deref() != Some(consumer) {
            if let Some(o) = old {
                self.unlink(&o, id);
            }
            self.link(consumer, id);
        }
        true
    }

    /// XNACK: gives pending `id` back to the group: no owner, delivery
    /// time 0 (idle for any claim, which takes it before entries that were
    /// delivered), the count changed by `mode` or set to `retry`. An entry
    /// not pending is created unowned when `force` (the caller checks it is
    /// stored), with count 0, `retry`, or the largest for FATAL. False if
    /// nothing was released.
    pub fn release(&mut self, id: StreamId, mode: NackMode, retry: Option<u64>, force: bool) -> bool {
        const FATAL: u64 = i64::MAX as u64;
        let p = match self.pel.binary_search_by_key(&id, |(k, _)| *k) {
            Ok(p) => p,
            Err(p) if force => {
                let count = retry.unwrap_or(if mode == NackMode::Fatal { FATAL } else { 0 });
                self.pel.insert(p, (id, Nack { delivery_time: 0, delivery_count: count, consumer: None }));
                return true;
            }
            Err(_) => return false,
        };
        let n = &mut self.pel[p].1;
        n.delivery_time = 0;
        n.delivery_count = match (retry, mode) {
            (Some(c), _) => c,
            (None, NackMode::Silent) => n.delivery_count.saturating_sub(1),
            (None, NackMode::Fail) => n.delivery_count,
            (None, NackMode::Fatal) => FATAL,
        };
        if let Some(o) = n.consumer.take() {
            self.unlink(&o, id);
        }
        true
    }

    /// Counts one more delivery of pending `id` (a history re-read).
    pub fn redeliver(&mut self, id: StreamId, now: i64) {
        if let Ok(p) = self.pel.binary_search_by_key(&id, |(k, _)| *k) {
            let n = &mut self.pel[p].1;
            n.delivery_time = now;
            n.delivery_count = n.delivery_count.saturating_add(1);
        }
    }

    fn mem_usage(&self) -> usize {
        alloc_size(self.name.len())
            + alloc_size(self.pel.capacity() * size_of::<(StreamId, Nack)>())
            + self.pel.iter().map(|(_, n)| n.consumer.as_ref().map_or(0, |c| alloc_size(c.len()))).sum::<usize>()
            + alloc_size(self.consumers.capacity() * size_of::<Consumer>())
            + self.consumers.iter().map(Consumer::mem_usage).sum::<usize>()
    }
}

// ---- varints and nodes ------------------------------------------------------

fn put_var(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn get_var(buf: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn var_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// An element's header when it is stored as an integer: the canonical
/// decimal form of an i64 whose zigzag form leaves room for the tag bit.
fn int_head(s: &[u8]) -> Option<u64> {
    let v = parse_canonical_i64(s)?;
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (z < 1 << 62).then_some(z << 1 | 1)
}

/// Bytes `put_elem` writes for `s`.
fn elem_len(s: &[u8]) -> usize {
    match int_head(s) {
        Some(h) => var_len(h),
        None => var_len((s.len() as u64) << 1) + s.len(),
    }
}

/// Writes an element: a varint whose low bit tells an integer (the
/// zigzag value above it) from a string (its length above it, then bytes).
fn put_elem(buf: &mut Vec<u8>, s: &[u8]) {
    match int_head(s) {
        Some(h) => put_var(buf, h),
        None => {
            put_var(buf, (s.len() as u64) << 1);
            buf.extend_from_slice(s);
        }
    }
}

/// Reads an element written by `put_elem`.
fn get_elem<'a>(buf: &'a [u8], at: &mut usize) -> Cow<'a, [u8]> {
    let h = get_var(buf, at);
    if h & 1 == 1 {
        let z = h >> 1;
        let v = (z >> 1) as i64 ^ -((z & 1) as i64);
        return Cow::Owned(v.to_string().into_bytes());
    }
    let n = (h >> 1) as usize;
    let s = &buf[*at..*at + n];
    *at += n;
    Cow::Borrowed(s)
}

/// Steps over an element.
fn skip_elem(buf: &[u8], at: &mut usize) {
    let h = get_var(buf, at);
    if h & 1 == 0 {
        *at += (h >> 1) as usize;
    }
}

/// A packed run of entries (see the module header).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    buf: Vec<u8>,
    /// Entries present.
    live: u32,
    /// Entries ever appended (present or deleted): the fill for new appends.
    taken: u32,
}

/// Where one entry lies in a node.
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: StreamId,
    start: usize,
    payload: usize,
    end: usize,
    same: bool,
}

impl Node {
    /// A node whose master fields are those of `pairs` (field, value, ...).
    fn new(pairs: &[impl AsRef<[u8]>]) -> Node {
        let mut buf = Vec::new();
        let n = pairs.len() / 2;
        let need = var_len(n as u64) + pairs.iter().step_by(2).map(|f| elem_len(f.as_ref())).sum::<usize>();
        reserve_class(&mut buf, need);
        put_var(&mut buf, n as u64);
        for f in pairs.iter().step_by(2) {
            put_elem(&mut buf, f.as_ref());
        }
        Node { buf, live: 0, taken: 0 }
    }

    /// (master field spans, offset of the first entry).
    fn master(&self) -> (Vec<Cow<'_, [u8]>>, usize) {
        let mut at = 0;
        let n = get_var(&self.buf, &mut at) as usize;
        let fields = (0..n).map(|_| get_elem(&self.buf, &mut at)).collect();
        (fields, at)
    }

    fn slot(&self, base: StreamId, nmaster: usize, start: usize) -> Slot {
        let b = &self.buf;
        let mut at = start;
        let same = b[at] & SAME != 0;
        at += 1;
        let dms = get_var(b, &mut at);
        let s = get_var(b, &mut at);
        let id = StreamId::new(base.ms + dms, if dms == 0 { base.seq + s } else { s });
        let payload = at;
        let strs = if same { nmaster } else { 2 * get_var(b, &mut at) as usize };
        for _ in 0..strs {
            skip_elem(b, &mut at);
        }
        Slot { id, start, payload, end: at, same }
    }

    /// Every entry's slot, in order.
    fn slots(&self, base: StreamId) -> Vec<Slot> {
        let (m, mut at) = self.master();
        let mut out = Vec::with_capacity(self.live as usize);
        while at < self.buf.len() {
            let s = self.slot(base, m.len(), at);
            at = s.end;
            out.push(s);
        }
        out
    }

    fn fields(&self, s: &Slot) -> Vec<Vec<u8>> {
        let b = &self.buf;
        let mut at = s.payload;
        if s.same {
            let (m, _) = self.master();
            let mut out = Vec::with_capacity(m.len() * 2);
            for f in m {
                out.push(f.into_owned());
                out.push(get_elem(b, &mut at).into_owned());
            }
            out
        } else {
            let n = 2 * get_var(b, &mut at) as usize;
            (0..n).map(|_| get_elem(b, &mut at).into_owned()).collect()
        }
    }

    fn push(&mut self, base: StreamId, id: StreamId, pairs: &[impl AsRef<[u8]>]) {
        let (m, _) = self.master();
        let same = m.len() * 2 == pairs.len() && m.iter().zip(pairs.iter().step_by(2)).all(|(a, b)| **a == *b.as_ref());
        let dms = id.ms - base.ms;
        let seq = if dms == 0 { id.seq - base.seq } else { id.seq };
        let strs = |it: &mut dyn Iterator<Item = &[u8]>| it.map(elem_len).sum::<usize>();
        let body = if same {
            strs(&mut pairs.iter().skip(1).step_by(2).map(|s| s.as_ref()))
        } else {
            var_len(pairs.len() as u64 / 2) + strs(&mut pairs.iter().map(|s| s.as_ref()))
        };
        reserve_class(&mut self.buf, 1 + var_len(dms) + var_len(seq) + body);
        self.buf.push(if same { SAME } else { 0 });
        put_var(&mut self.buf, dms);
        put_var(&mut self.buf, seq);
        if same {
            for v in pairs.iter().skip(1).step_by(2) {
                put_elem(&mut self.buf, v.as_ref());
            }
        } else {
            put_var(&mut self.buf, pairs.len() as u64 / 2);
            for s in pairs {
                put_elem(&mut self.buf, s.as_ref());
            }
        }
        self.live += 1;
        self.taken += 1;
    }

    /// Cuts out the entry at `s`.
    fn cut(&mut self, s: &Slot) {
        self.buf.drain(s.start..s.end);
        self.live -= 1;
        shrink_class(&mut self.buf);
    }
}

// ---- the stream -------------------------------------------------------------

/// A stream value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stream {
    nodes: VecDeque<(StreamId, Node)>,
    len: u64,
    last_id: StreamId,
    first_id: StreamId,
    max_deleted_id: StreamId,
    entries_added: u64,
    groups: Vec<Group>,
    /// Idempotent production's record and settings.
    pub idmp: Idmp,
}

impl Stream {
    /// An empty stream with no groups.
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if no entry is stored (an empty stream still exists as a key).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The last ID ever generated (or set by XSETID).
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// The first entry's ID as recorded (0-0 when empty).
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    /// The largest ID deleted by XDEL (0-0 if none).
    pub fn max_deleted_id(&self) -> StreamId {
        self.max_deleted_id
    }

    /// Entries ever added.
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// Number of packed nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The ID XADD would give the next entry.
    pub fn next_id(&self, how: AddId, now_ms: u64) -> Result<StreamId, AddError> {
        if self.last_id == StreamId::MAX {
            return Err(AddError::Exhausted);
        }
        let id = match how {
            AddId::Auto if now_ms > self.last_id.ms => StreamId::new(now_ms, 0),
            AddId::Auto => self.last_id.incr().ok_or(AddError::NotGreater)?,
            AddId::Ms(ms) if ms == self.last_id.ms => {
                StreamId::new(ms, self.last_id.seq.checked_add(1).ok_or(AddError::NotGreater)?)
            }
            AddId::Ms(ms) => StreamId::new(ms, 0),
            AddId::Exact(id) => id,
        };
        if id <= self.last_id {
            return Err(AddError::NotGreater);
        }
        Ok(id)
    }

    /// Appends an entry; `id` must be above `last_id` (from `next_id`)
    /// and `pairs` an even, non-empty list of fields and values.
    pub fn append(&mut self, id: StreamId, pairs: &[impl AsRef<[u8]>], cfg: &StreamConfig) {
        debug_assert!(id > self.last_id && !pairs.is_empty() && pairs.len().is_multiple_of(2));
        let bytes: usize = pairs.iter().map(|p| p.as_ref().len()).sum();
        let max_bytes = if cfg.node_max_bytes == 0 { MAX_ENTRY_BYTES } else { cfg.node_max_bytes.min(MAX_ENTRY_BYTES) };
        let full = match self.nodes.back() {
            None => true,
            Some((_, n)) => {
                n.buf.len() + bytes >= max_bytes || (cfg.node_max_entries != 0 && n.taken as usize >= cfg.node_max_entries)
            }
        };
        if full {
            self.nodes.push_back((id, Node::new(pairs)));
        }
        let (base, node) = self.nodes.back_mut().expect("a tail node");
        node.push(*base, id, pairs);
        self.len += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.len == 1 {
            self.first_id = id;
        }
    }

    /// Index of the node that would hold `id` (the last whose base is at
    /// most `id`), if any.
    fn node_of(&self, id: StreamId) -> Option<usize> {
        self.nodes.partition_point(|(b, _)| *b <= id).checked_sub(1)
    }

    /// Entries with IDs in `start..=end`, ascending (or descending when
    /// `rev`), at most `count` of them (0: all).
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool, count: usize) -> Vec<Entry> {
        let mut out = Vec::new();
        if start > end {
            return out;
        }
        let full = |out: &Vec<Entry>| count != 0 && out.len() >= count;
        if !rev {
            let mut ni = self.node_of(start).unwrap_or(0);
            while let Some((base, node)) = self.nodes.get(ni) {
                if *base > end {
                    break;
                }
                for s in node.slots(*base) {
                    if s.id > end || full(&out) {
                        return out;
                    }
                    if s.id >= start {
                        out.push(Entry { id: s.id, fields: node.fields(&s) });
                    }
                }
                ni += 1;
            }
        } else {
            let Some(mut ni) = self.node_of(end) else { return out };
            loop {
                let (base, node) = &self.nodes[ni];
                for s in node.slots(*base).iter().rev() {
                    if s.id < start || full(&out) {
                        return out;
                    }
                    if s.id <= end {
                        out.push(Entry { id: s.id, fields: node.fields(s) });
                    }
                }
                if ni == 0 {
                    break;
                }
                ni -= 1;
            }
        }
        out
    }

    /// The entry `id`.
    pub fn get(&self, id: StreamId) -> Option<Entry> {
        self.range(id, id, false, 1).pop()
    }

    /// True if entry `id` is stored.
    pub fn contains(&self, id: StreamId) -> bool {
        let Some(ni) = self.node_of(id) else { return false };
        let (base, node) = &self.nodes[ni];
        node.slots(*base).iter().any(|s| s.id == id)
    }

    /// ID of the last entry present (0-0 when empty).
    pub fn last_entry_id(&self) -> StreamId {
        self.nodes.back().and_then(|(b, n)| n.slots(*b).last().map(|s| s.id)).unwrap_or_default()
    }

    fn first_entry_id(&self) -> StreamId {
        self.nodes.front().and_then(|(b, n)| n.slots(*b).first().map(|s| s.id)).unwrap_or_default()
    }

    /// Deletes entry `id` (XDEL); true if it was stored. Tracks the largest
    /// deleted ID and the recorded first ID as Redis does.
    pub fn remove(&mut self, id: StreamId) -> bool {
        if !self.cut_entry(id) {
            return false;
        }
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        true
    }

    /// True if a consumer group may still need entry `id`: it is pending
    /// in some group, or some group has not been delivered that far yet.
    pub fn is_referenced(&self, id: StreamId) -> bool {
        self.groups.iter().any(|g| g.last_id < id || g.nack(id).is_some())
    }

    /// Drops `id` from the pending list of every group (DELREF); true if
    /// some group had it pending.
    pub fn unref_all(&mut self, id: StreamId) -> bool {
        let mut any = false;
        for g in &mut self.groups {
            any |= g.ack(id);
        }
        any
    }

    /// Deletes entry `id` as `policy` says (XDELEX, XACKDEL): None if it is
    /// not stored (DELREF still drops dangling references to it), Some(true)
    /// if deleted, Some(false) if ACKED kept it because a group needs it.
    pub fn remove_with(&mut self, id: StreamId, policy: RefPolicy) -> Option<bool> {
        if policy == RefPolicy::DelRef {
            self.unref_all(id);
        }
        if !self.contains(id) {
            return None;
        }
        if policy == RefPolicy::Acked && self.is_referenced(id) {
            return Some(false);
        }
        Some(self.remove(id))
    }

    /// Trims as `trim` does, handling group references as `policy` says:
    /// DELREF drops the trimmed entries from every pending list; ACKED
    /// skips (keeps) entries a group still needs and trims the others.
    pub fn trim_with(&mut self, how: Trim, approx: bool, limit: u64, policy: RefPolicy) -> u64 {
        match policy {
            RefPolicy::KeepRef => self.trim(how, approx, limit),
            RefPolicy::DelRef => {
                let mut pending: Vec<StreamId> = self.groups.iter().flat_map(|g| g.pel.iter().map(|(id, _)| *id)).collect();
                pending.sort_unstable();
                pending.dedup();
                pending.retain(|id| self.contains(*id));
                let n = self.trim(how, approx, limit);
                for id in pending {
                    if !self.contains(id) {
                        self.unref_all(id);
                    }
                }
                n
            }
            RefPolicy::Acked if self.groups.is_empty() => self.trim(how, approx, limit),
            RefPolicy::Acked => self.trim_acked(how, approx, limit),
        }
    }

    /// ACKED trimming: from the head, entries no group needs are deleted
    /// until the bound holds; entries still needed stay. With `approx`,
    /// only whole nodes none of whose entries is needed go.
    fn trim_acked(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let nodes: Vec<Vec<StreamId>> = self.nodes.iter().map(|(b, n)| n.slots(*b).iter().map(|s| s.id).collect()).collect();
        let mut deleted = 0u64;
        'nodes: for ids in nodes {
            if approx {
                let fits = ids.iter().all(|id| !self.is_referenced(*id))
                    && match how {
                        Trim::MaxLen(max) => self.len - ids.len() as u64 >= max,
                        Trim::MinId(min) => ids.last().is_some_and(|id| *id < min),
                    };
                if !fits || (limit != 0 && deleted + ids.len() as u64 > limit) {
                    break;
                }
                for id in ids {
                    self.cut_entry(id);
                    deleted += 1;
                }
                continue;
            }
            for id in ids {
                let stop = match how {
                    Trim::MaxLen(max) => self.len <= max,
                    Trim::MinId(min) => id >= min,
                };
                if stop || (limit != 0 && deleted >= limit) {
                    break 'nodes;
                }
                if !self.is_referenced(id) && self.cut_entry(id) {
                    deleted += 1;
                }
            }
        }
        deleted
    }

    /// Removes stored entry `id` without recording it as a tombstone
    /// (trimming does not); keeps the recorded first ID right.
    fn cut_entry(&mut self, id: StreamId) -> bool {
        let Some(ni) = self.node_of(id) else { return false };
        let (base, node) = &mut self.nodes[ni];
        let Some(s) = node.slots(*base).into_iter().find(|s| s.id == id) else { return false };
        node.cut(&s);
        if node.live == 0 {
            self.nodes.remove(ni);
        }
        self.len -= 1;
        if self.len == 0 {
            self.first_id = StreamId::MIN;
        } else if id == self.first_id {
            self.first_id = self.first_entry_id();
        }
        true
    }

    /// Trims from the head (Redis's streamTrim): whole nodes first; with
    /// `approx` only whole nodes; `limit` (0: none) caps the entries
    /// removed. Returns how many were removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        while let Some((base, node)) = self.nodes.front() {
            if let Trim::MaxLen(max) = how {
                if self.len <= max {
                    break;
                }
            }
            let live = u64::from(node.live);
            if limit != 0 && deleted + live > limit {
                break;
            }
            let whole = match how {
                Trim::MaxLen(max) => self.len - live >= max,
                Trim::MinId(min) => node.slots(*base).last().is_some_and(|s| s.id < min),
            };
            if whole {
                self.nodes.pop_front();
                self.len -= live;
                deleted += live;
                continue;
            }
            if approx {
                break;
            }
            let (base, node) = self.nodes.front_mut().expect("front node");
            let slots = node.slots(*base);
            let mut cut_to = None;
            for s in &slots {
                let stop = match how {
                    Trim::MaxLen(max) => self.len <= max,
                    Trim::MinId(min) => s.id >= min,
                };
                if stop {
                    break;
                }
                cut_to = Some(s.end);
                node.live -= 1;
                self.len -= 1;
                deleted += 1;
            }
            if let Some(end) = cut_to {
                let start = slots[0].start;
                node.buf.drain(start..end);
                shrink_class(&mut node.buf);
            }
            break;
        }
        if self.len == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.first_entry_id();
        }
        deleted
    }

    /// XSETID: sets the last ID and, when given, the added-entries counter
    /// and the largest deleted ID. The caller has checked Redis's rules.
    pub fn set_ids(&mut self, last: StreamId, entries_added: Option<u64>, max_deleted: Option<StreamId>) {
        self.last_id = last;
        if let Some(n) = entries_added {
            self.entries_added = n;
        }
        if let Some(m) = max_deleted {
            self.max_deleted_id = m;
        }
    }

    // ---- groups -------------------------------------------------------------

    /// Consumer groups, ascending by name.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    fn group_pos(&self, name: &[u8]) -> Result<usize, usize> {
        self.groups.binary_search_by(|g| (*g.name).cmp(name))
    }

    /// The group called `name`.
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.group_pos(name).ok().map(|i| &self.groups[i])
    }

    /// The group called `name`, for changing it.
    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.group_pos(name).ok().map(|i| &mut self.groups[i])
    }

    /// A group read counter given by a client (XGROUP CREATE/SETID
    /// ENTRIESREAD), capped at the entries ever added: a group cannot have
    /// read more than that, and Redis 8 caps it so the lag is never negative.
    pub fn capped_entries_read(&self, entries_read: i64) -> i64 {
        if entries_read != INVALID_ENTRIES_READ && entries_read as u64 > self.entries_added {
            self.entries_added as i64
        } else {
            entries_read
        }
    }

    /// Creates a group; false if one with that name exists.
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        match self.group_pos(name) {
            Ok(_) => false,
            Err(i) => {
                self.groups.insert(i, Group::new(name, last_id, entries_read));
                true
            }
        }
    }

    /// Destroys a group; false if there was none.
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        match self.group_pos(name) {
            Ok(i) => {
                self.groups.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// True if some deleted entry may lie in `start..=end` (Redis's
    /// streamRangeHasTombstones).
    pub fn has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        self.len != 0 && !self.max_deleted_id.is_zero() && start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// The logical read counter of `id` (entries from the first ever up to
    /// it), when it can be known (Redis's
    /// streamEstimateDistanceFromFirstEverEntry); None otherwise.
    pub fn estimate_entries_read(&self, id: StreamId) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.len == 0 && id <= self.last_id {
            return Some(added);
        }
        if !id.is_zero() && id < self.max_deleted_id {
            return None;
        }
        if id == self.last_id {
            return Some(added);
        } else if id > self.last_id {
            return None;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return Some(added - self.len as i64);
            } else if id == self.first_id {
                return Some(added - self.len as i64 + 1);
            }
        }
        None
    }

    /// The group's lag (entries not yet delivered to it), None when it
    /// cannot be known (Redis's streamReplyWithCGLag).
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 || self.len == 0 {
            return Some(0);
        }
        if g.last_id < self.first_id && self.max_deleted_id < self.first_id {
            return Some(self.len as i64);
        }
        if g.entries_read != INVALID_ENTRIES_READ && !self.has_tombstones(g.last_id, StreamId::MAX) {
            return Some(added - g.entries_read);
        }
        self.estimate_entries_read(g.last_id).map(|r| added - r)
    }

    /// Group read of new entries (XREADGROUP ... `>`): up to `count` (0:
    /// all) entries after the group's last ID, advancing it and its read
    /// counter; unless `noack`, each becomes pending for `consumer` (which
    /// must exist), whose active time is set.
    pub fn read_group(&mut self, group: &[u8], consumer: &[u8], count: usize, noack: bool, now: i64) -> Vec<Entry> {
        let Ok(gi) = self.group_pos(group) else { return Vec::new() };
        let Some(start) = self.groups[gi].last_id.incr() else { return Vec::new() };
        let entries = self.range(start, StreamId::MAX, false, count);
        for e in &entries {
            let g = &self.groups[gi];
            // The counter goes on by one only while it can be trusted: it is
            // known, the group has not fallen behind the first entry (a trim
            // passed it) and no deletion lies ahead of it; otherwise it is
            // estimated again from the entry's ID (Redis 8).
            let read = if g.entries_read != INVALID_ENTRIES_READ
                && g.last_id >= self.first_id
                && !self.has_tombstones(g.last_id, StreamId::MAX)
            {
                Some(g.entries_read + 1)
            } else if self.entries_added != 0 {
                Some(self.estimate_entries_read(e.id).unwrap_or(INVALID_ENTRIES_READ))
            } else {
                None
            };
            let g = &mut self.groups[gi];
            if let Some(r) = read {
                g.entries_read = r;
            }
            g.last_id = e.id;
            if !noack {
                g.deliver(e.id, consumer, now);
                if let Some(c) = g.consumer_mut(consumer) {
                    c.active_time = now;
                }
            }
        }
        entries
    }

    /// XREADGROUP ... CLAIM: takes over for `consumer` (which must exist)
    /// the group's pending entries idle for at least `min_idle` ms whose
    /// entry is still stored, longest idle first (ties by ID), up to
    /// `count` (0: all). Each comes with the idle time and delivery count
    /// it had before this delivery, which counts one more and restarts its
    /// idle time; the consumer becomes active.
    pub fn claim_idle(&mut self, group: &[u8], consumer: &[u8], min_idle: i64, count: usize, now: i64) -> Vec<ClaimedEntry> {
        let Ok(gi) = self.group_pos(group) else { return Vec::new() };
        let mut due: Vec<(i64, StreamId, u64)> = self.groups[gi]
            .pel
            .iter()
            .filter(|(_, n)| now.saturating_sub(n.delivery_time) >= min_idle)
            .map(|(id, n)| (n.delivery_time, *id, n.delivery_count))
            .collect();
        due.sort_unstable();
        let limit = if count == 0 { usize::MAX } else { count };
        let mut out = Vec::new();
        for (time, id, delivered) in due {
            if out.len() == limit {
                break;
            }
            let Some(entry) = self.get(id) else { continue };
            let g = &mut self.groups[gi];
            g.claim(id, consumer, now, Retry::Incr);
            if let Some(c) = g.consumer_mut(consumer) {
                c.active_time = now;
            }
            out.push(ClaimedEntry { entry, idle: now.saturating_sub(time).max(0), delivery_count: delivered });
        }
        out
    }

    /// When the next pending entry of `group` that is still stored becomes
    /// idle for `min_idle` ms (Unix ms), None if it has none: a blocked
    /// XREADGROUP ... CLAIM wakes then.
    pub fn next_claimable(&self, group: &[u8], min_idle: i64) -> Option<i64> {
        let g = self.group(group)?;
        g.pel.iter().filter(|(id, _)| self.contains(*id)).map(|(_, n)| n.delivery_time.saturating_add(min_idle)).min()
    }

    /// Group read of a consumer's history (XREADGROUP with an ID): its
    /// pending IDs from `start`, up to `count` (0: all), each with its
    /// entry, or None when the entry was deleted meanwhile. Each entry
    /// found counts one more delivery.
    pub fn read_history(&mut self, group: &[u8], consumer: &[u8], start: StreamId, count: usize, now: i64) -> Vec<(StreamId, Option<Entry>)> {
        let Ok(gi) = self.group_pos(group) else { return Vec::new() };
        let Some(c) = self.groups[gi].consumer(consumer) else { return Vec::new() };
        let from = c.pel.partition_point(|k| *k < start);
        let ids: Vec<StreamId> = c.pel[from..].iter().take(if count == 0 { usize::MAX } else { count }).copied().collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let e = self.get(id);
            if e.is_some() {
                self.groups[gi].redeliver(id, now);
            }
            out.push((id, e));
        }
        out
    }

    /// How much work freeing this stream is, by Redis's lazy-free rule:
    /// one per node, plus per group one and the first group's PEL size.
    pub fn free_effort(&self) -> usize {
        let per_group = self.groups.first().map_or(0, |g| 1 + g.pel.len());
        self.nodes.len() + self.groups.len() * per_group
    }

    /// Heap bytes owned (see the module header).
    pub fn mem_usage(&self) -> usize {
        alloc_size(self.nodes.capacity() * size_of::<(StreamId, Node)>())
            + self.nodes.iter().map(|(_, n)| alloc_size(n.buf.capacity())).sum::<usize>()
            + alloc_size(self.groups.capacity() * size_of::<Group>())
            + self.groups.iter().map(Group::mem_usage).sum::<usize>()
            + self.idmp.mem_usage()
    }

    /// What Redis's OBJECT ENCODING answers.
    pub fn encoding_name(&self) -> &'static str {
        "stream"
    }
}

// ---- RDB loading and saving -------------------------------------------------

/// One packed node as an RDB listpack carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedNode {
    /// The node's key: at most the ID of every entry in it.
    pub base: StreamId,
    /// Master fields: the fields of the first entry the node took.
    pub master: Vec<Vec<u8>>,
    /// The entries present, ascending.
    pub entries: Vec<Entry>,
}

impl Stream {
    /// The packed nodes in order, copied out (RDB writing).
    pub fn packed_nodes(&self) -> impl Iterator<Item = PackedNode> + '_ {
        self.nodes.iter().map(|(base, node)| PackedNode {
            base: *base,
            master: node.master().0.into_iter().map(Cow::into_owned).collect(),
            entries: node.slots(*base).iter().map(|s| Entry { id: s.id, fields: node.fields(s) }).collect(),
        })
    }

    /// Appends a node loaded from RDB that had taken `taken` entries (its
    /// deleted ones included). False, with nothing changed, unless the node
    /// has entries, its base is above every stored entry, its IDs ascend
    /// from the base, and each entry has a non-empty, even field list.
    pub fn load_node(&mut self, n: &PackedNode, taken: u64) -> bool {
        let above = self.nodes.is_empty() || self.last_entry_id() < n.base;
        let ascending = n.entries.first().is_some_and(|e| e.id >= n.base) && n.entries.windows(2).all(|w| w[0].id < w[1].id);
        let shaped = n.entries.iter().all(|e| !e.fields.is_empty() && e.fields.len().is_multiple_of(2));
        if !above || !ascending || !shaped {
            return false;
        }
        let empty: &[u8] = &[];
        let pairs: Vec<&[u8]> = n.master.iter().flat_map(|f| [f.as_slice(), empty]).collect();
        let mut node = Node::new(&pairs);
        for e in &n.entries {
            node.push(n.base, e.id, &e.fields);
        }
        node.taken = node.taken.max(u32::try_from(taken).unwrap_or(u32::MAX));
        self.len += n.entries.len() as u64;
        self.nodes.push_back((n.base, node));
        true
    }

    /// Sets the bookkeeping an RDB value carries, once its nodes are
    /// loaded; `first` None takes the first entry's ID (old layouts). False
    /// if `last` is below the last entry's ID.
    pub fn load_meta(&mut self, last: StreamId, first: Option<StreamId>, max_deleted: StreamId, entries_added: u64) -> bool {
        if last < self.last_entry_id() {
            return false;
        }
        self.last_id = last;
        self.first_id = first.unwrap_or_else(|| self.first_entry_id());
        self.max_deleted_id = max_deleted;
        self.entries_added = entries_added;
        true
    }
}

impl Group {
    /// Adds a pending entry with no owner yet (RDB loading; the owner comes
    /// with its consumer); false if `id` is already pending.
    pub fn load_pending(&mut self, id: StreamId, delivery_time: i64, delivery_count: u64) -> bool {
        match self.pel.binary_search_by_key(&id, |(k, _)| *k) {
            Ok(_) => false,
            Err(p) => {
                self.pel.insert(p, (id, Nack { delivery_time, delivery_count, consumer: None }));
                true
            }
        }
    }

    /// Adds a consumer loaded from RDB with its times and pending IDs;
    /// false if it exists or an ID is not pending or already owned.
    pub fn load_consumer(&mut self, name: &[u8], seen_time: i64, active_time: i64, ids: &[StreamId]) -> bool {
        let Err(ci) = self.consumer_pos(name) else { return false };
        let mut pel = Vec::with_capacity(ids.len());
        for id in ids {
            let Ok(p) = self.pel.binary_search_by_key(id, |(k, _)| *k) else { return false };
            let nack = &mut self.pel[p].1;
            if nack.consumer.is_some() {
                return false;
            }
            nack.consumer = Some(name.into());
            pel.push(*id);
        }
        pel.sort_unstable();
        self.consumers.insert(ci, Consumer { name: name.into(), seen_time, active_time, pel });
        true
    }
}

#[cfg(test)]
mod tests;
