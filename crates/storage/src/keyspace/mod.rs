//! `Db`: one logical database, mapping keys to values with optional deadlines.
//!
//! Every read takes `now` (milliseconds since the Unix epoch, fixed for the
//! whole command by the caller) and treats a key whose deadline is at or
//! before `now` as absent, deleting it on the spot (lazy expiry).
//! `active_expire` reclaims due keys that nobody touches.
//!
//! Layout (see docs/design/keyspace.md): an extendible hash table of
//! segments (`crate::segment`) that grows a segment at a time, never by a
//! whole-table rehash. Each key is one 8-byte slot plus one slab blob
//! (`crate::blob`, `crate::slab`) holding key, value and the deadline only
//! when there is one. Collections live in an object table the blob points
//! into (objects.rs); a small hash lives in its blob itself and is lent out
//! decoded (`Pending`).
//!
//! This file declares `Db`, the types its fields are made of and the
//! keyspace's public types, and holds the core: finding a live key, get,
//! insert, remove, INCRBY, lending inline hashes and the object table's
//! slots. The other files each add one concern's methods to `Db`:
//!
//! - `table.rs`: the directory and segments: a key's slot, growth, splits
//! - `expire.rs`: key deadlines and active expiry
//! - `field_expiry.rs`: the index of hashes with field TTLs, active field expiry
//! - `events.rs`: the log of lazy expiries and new keys
//! - `scan.rs`: `for_each`, SCAN and RANDOMKEY
//! - `evict.rs`: sampling keys for eviction
//! - `snapshot.rs`: point-in-time snapshots without fork, and `detach`
//! - `slots.rs`: slot mode (Redis Cluster): keys per hash slot, the keys
//!   of one slot
//! - `objects.rs`: `Obj`, one collection in the object table
//! - `rawmark.rs`: the mark of a string edited in place (OBJECT ENCODING raw)
//! - `tests.rs`: the unit and property tests of all of them;
//!   `snapshot_tests.rs`: those of snapshots; `slots_tests.rs`: those of
//!   slot mode
//!
//! Imports go one way. `objects.rs` imports nothing from the keyspace; this
//! file imports only `objects.rs`; the concern files import this file (for
//! `Db` and its field types) and `objects.rs`, never each other. That is
//! why `Hand` (active expiry's cursor), `KeyEvent`, the snapshot types
//! (`SnapshotSink`, `Snap`) and the slot index (`SlotIndex`, `SubDir`)
//! are declared here and not beside the methods that use them: a file
//! declaring one would be imported by this file while importing `Db`
//! from it. The methods call
//! each other across files (`insert` notes a deadline, `active_expire`
//! deletes): one `impl Db` spread over files, which needs no import.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::access::{lfu_decayed, Access};
use crate::blob::{self, Blob, Body, BodyKind, KeyKind};
use crate::encoding::keypack::{self, Prefixes};
use crate::encoding::packed::{self, PackStats, Tables};
use std::borrow::Cow;
use crate::segment::{addr_of, clock_of, make_slot, tag_at, tag_of, with_clock, Segment, CLOCK_MOD, TTL_BIT};
use crate::slab::{jemalloc_size, Slab};
use crate::strref::{parse_canonical_i64, StrRef};
use crate::value::{Kind, Value, ValueMut, ValueRef};
use objects::Obj;

mod events;
mod evict;
mod expire;
mod field_expiry;
mod objects;
pub mod prepack;
mod rawmark;
mod scan;
mod slots;
mod snapshot;
mod table;

/// Most keys one `Db::prefetch` call takes.
pub const PREFETCH_MAX: usize = 32;
#[cfg(test)]
mod slots_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;

/// Why `Db::incr_by` refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncrError {
    /// The key holds a collection.
    WrongType,
    /// The string is not an integer.
    NotInt,
    /// The result does not fit an i64.
    Overflow,
}

/// An inline hash decoded from its blob and lent out by `get`/`get_mut`
/// (the blob's bytes cannot be borrowed as a `Hash`). It is written back,
/// if lent for writing, by the next call that changes the Db (`flush`);
/// until then readers that take `&self` see it in place of the blob.
#[derive(Debug)]
struct Pending {
    si: usize,
    pos: usize,
    /// The key's slot when lent: identifies the key without a lookup.
    slot: u64,
    obj: Obj,
    dirty: bool,
}

/// What `find` gives: the key's hash, its segment and its slot there if
/// stored.
type Found = (u64, usize, Option<usize>);

/// A value being stored: owned, or a string borrowed from the caller
/// (`insert_str`), which goes into its blob with no copy in between.
enum NewValue<'a> {
    Owned(Value),
    Str(StrRef<'a>),
}

/// What an insert does to the key's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Keep the existing deadline, if the key existed.
    Keep,
    /// No deadline.
    Clear,
    /// Expire at this Unix time in milliseconds.
    At(i64),
}

/// Where active expiry stopped: a segment, a slot in it, the segment's shape
/// then, and the earliest deadline seen so far in this pass (expire.rs).
#[derive(Debug, Clone, Copy)]
struct Hand {
    seg: usize,
    pos: usize,
    shape: u32,
    min: i64,
}

/// `Db::log_events` bit: record keys deleted by lazy expiry.
pub const LOG_EXPIRED: u8 = 1;
/// `Db::log_events` bit: record keys created.
pub const LOG_NEW: u8 = 2;

/// `Db::log_events` bit: record keys a read command looked for and did
/// not find (`keymiss`).
pub const LOG_MISS: u8 = 8;

/// `Db::log_events` bit: record members of sets and sorted sets removed
/// on access because their TTL passed (and the key's deletion with its
/// last member).
pub const LOG_MEMBERS: u8 = 4;

/// A key event the server may turn into a keyspace notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyEvent {
    /// Found due on access and deleted (lazy expiry).
    Expired,
    /// Created: stored where no live key was.
    New,
    /// Members of a set (`Kind::Set`) or sorted set (`Kind::ZSet`) found
    /// past their TTL on access and removed (`sexpired` / `zexpired`).
    MembersExpired(Kind),
    /// The key went with its last member (`del`), after `MembersExpired`.
    Emptied,
    /// A read command looked for the key and found none (`keymiss`).
    Miss,
}

/// Members of one set or sorted set that lazy member expiry removed when
/// a command reached the key (`Db::take_member_expiry`): the server
/// counts them, and replays them as SREM / ZREM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberExpiry {
    /// `Kind::Set` or `Kind::ZSet`.
    pub kind: Kind,
    /// The key.
    pub key: Box<[u8]>,
    /// The members removed, in the order removed.
    pub members: Vec<Box<[u8]>>,
    /// True if the key went with its last member.
    pub deleted: bool,
}

/// Where a snapshot's image goes (`Db::snapshot_begin`): the keyspace
/// calls `entry` once per key the Db held when the snapshot began, with
/// the key's value and deadline as they were then, in no particular order.
/// A sink that can fail (a file) keeps its first error and reports it when
/// the caller takes it back with `Db::snapshot_end`. `Send`, because a
/// `Db` is: the server frees a flushed one on another thread, and may
/// move a sink to a writer thread.
pub trait SnapshotSink: Send {
    /// One key of the image. Keys past their deadline but not yet
    /// reclaimed are given too (with that deadline), as are hash fields
    /// past theirs: the sink decides what to keep (an RDB writer keeps the
    /// keys, which loaders drop, and leaves the fields out).
    fn entry(&mut self, key: &[u8], value: ValueRef<'_>, expire_at_ms: Option<i64>);
}

/// A snapshot in progress (snapshot.rs). The segments it has yet to
/// serialize are those of the live table whose mark is not the Db's epoch,
/// and those of the tables `clear` detached while it ran.
struct Snap {
    sink: Box<dyn SnapshotSink>,
    /// Every live-table segment below this index is serialized.
    next: usize,
    /// Tables taken from the Db by `clear` (or `detach`) during the
    /// snapshot, oldest first. Their pending segments are still part of
    /// the image; `snapshot_step` serializes and frees them a segment at a
    /// time, so a FLUSHALL neither stalls nor loses the image.
    detached: Vec<Detached>,
}

/// One bit per tag (`segment::TAG_BITS` bits) of a pending segment: set,
/// every key of the segment with that tag is one the running snapshot
/// handled already (gave before its first write, or born since
/// `snapshot_begin`), and the segment's step skips them.
type TagBits = [u64; 1 << (crate::segment::TAG_BITS - 6)];

/// A table detached into a snapshot, and how far it has been drained.
struct Detached {
    db: Box<Db>,
    /// Segments below this index are serialized (if they were pending) and freed.
    next: usize,
}

impl std::fmt::Debug for Snap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snap").field("next", &self.next).field("detached", &self.detached.len()).finish_non_exhaustive()
    }
}

/// Slot mode's index (slots.rs, table.rs): how many keys each Redis
/// Cluster hash slot holds, and the second-level directories of the slots
/// whose keys fill more than one segment. In slot mode a key's table hash
/// starts with its slot (`table::slot_hash`), and the top-level directory
/// stops doubling at one entry per slot (depth 14); an entry is then a
/// segment index, or `SUB` plus the index of the slot's `SubDir`.
struct SlotIndex {
    /// Keys stored per slot, live or not yet reclaimed (`Db::len`'s rule).
    counts: Box<[u32]>,
    /// Second-level directories, by the index their slot's entry holds.
    subs: Vec<SubDir>,
}

/// A slot's own directory, when its keys fill several segments: `2^depth`
/// segment indices, chosen by the `depth` hash bits after the slot's 14.
/// A hot slot (every key under one hash tag) deepens only its own
/// directory, never the top-level one.
#[derive(Debug)]
struct SubDir {
    depth: u32,
    dir: Vec<u32>,
}

/// Top-level directory entry flag (slot mode): the rest is a `SubDir` index.
const SUB: u32 = 1 << 31;

impl std::fmt::Debug for SlotIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.counts.iter().filter(|&&n| n != 0).count();
        f.debug_struct("SlotIndex").field("slots_used", &used).field("subs", &self.subs).finish()
    }
}

/// One database.
#[derive(Debug)]
pub struct Db {
    segs: Vec<Segment>,
    /// Segment index per top-`depth`-bit hash prefix.
    dir: Vec<u32>,
    depth: u32,
    slab: Slab,
    len: usize,
    volatile: usize,
    hand: Hand,
    /// When true, reads do not update a key's last-access time (CLIENT NO-TOUCH).
    pub no_touch: bool,
    /// When true, due keys read as absent but are not deleted (expiry is
    /// held while CLIENT PAUSE holds writes: a pause must not change data).
    pub keep_expired: bool,
    /// When true, due keys read as live (a replica applying its primary's
    /// stream: the primary decides when a key expires, and says so with a
    /// DEL).
    pub ignore_deadlines: bool,
    /// Keys deleted by lazy expiry since the last `take_lazy_expired`.
    lazy_expired: u64,
    /// When true, the lookups of `get_read` and `note_read` are a read
    /// command's, counted as Redis's lookupKeyRead counts them (the server
    /// sets it per command).
    pub count_reads: bool,
    /// Read lookups that found their key, and that did not, since the last
    /// `take_read_counts` (INFO keyspace_hits, keyspace_misses).
    read_hits: u64,
    read_misses: u64,
    /// Which key events to record for `take_events` (`LOG_EXPIRED`,
    /// `LOG_NEW`); zero, the default, records nothing and costs one branch.
    pub log_events: u8,
    /// Recorded key events, oldest first.
    events: Vec<(KeyEvent, Box<[u8]>)>,
    /// Collections, by the index their key's blob holds; None: a free slot.
    objs: Vec<Option<Obj>>,
    /// Free slots of `objs`, reused first.
    free_objs: Vec<u32>,
    /// Field-expiry index: (earliest field deadline, object index) -> key.
    fexp: BTreeMap<(i64, u32), Box<[u8]>>,
    /// Object index -> the deadline it is registered under in `fexp`.
    fexp_at: HashMap<u32, i64>,
    /// Field-expiry index of inline hashes, by segment: (the segment's
    /// `field_min`, segment index). Per segment rather than per hash so a
    /// field TTL on a small hash costs no index entry of its own.
    fexp_segs: BTreeSet<(i64, u32)>,
    /// Inline hashes with at least one field TTL.
    inline_ttl: usize,
    /// Sets and sorted sets registered in `fexp` (member TTLs): while
    /// zero, reaching a key costs no member-expiry check at all.
    member_ttl: usize,
    /// Lazy member expiry since the last `take_member_expiry`.
    member_expired: Vec<MemberExpiry>,
    /// lazyfree-lazy-server-del: the collection an overwrite replaces is
    /// left in `discarded` for the caller to free, not freed here.
    pub lazy_server_del: bool,
    /// lazyfree-lazy-expire: so is the collection of a key that expired.
    pub lazy_expire: bool,
    /// Collections left for the caller to free (`take_discarded`).
    discarded: Vec<Value>,
    /// The inline hash lent out by the last `get`/`get_mut`, if any.
    pending: Option<Pending>,
    /// Snapshot epoch, bumped by each `snapshot_begin`.
    epoch: u32,
    /// Per segment (same index as `segs`): the epoch of the last snapshot
    /// that serialized it. The running snapshot has yet to serialize the
    /// segments whose mark is not `epoch`.
    marks: Vec<u32>,
    /// The snapshot in progress, if any (snapshot.rs).
    snap: Option<Box<Snap>>,
    /// Per segment (same index as `segs`) while a snapshot runs: the tags
    /// whose keys it handled one by one, allocated at a segment's first
    /// write (snapshot.rs). Empty when none runs.
    written: Vec<Option<Box<TagBits>>>,
    /// What the access bits of the slots hold (LRU clock or LFU counter);
    /// set from the maxmemory policy.
    pub access: Access,
    /// State of the generator behind LFU increments and sampling.
    rng: u64,
    /// Slot mode (Redis Cluster): the slot index; None for a standalone
    /// Db, which then pays one branch for the feature and no bytes a key.
    slot_index: Option<Box<SlotIndex>>,
    /// Store strings packed where a table for their key's pattern makes
    /// them shorter (`value-compression`; encoding/packed.rs). Turning it
    /// off stops packing new values; packed ones stay readable.
    pub value_compression: bool,
    /// The packing tables and their counters.
    packs: Tables,
    /// A packed string decoded for the caller of `get`/`get_mut`.
    scratch: Vec<u8>,
    /// Where `store` packs a string before writing its blob.
    pack_buf: Vec<u8>,
    /// Store keys of common shapes packed (`key-compression`;
    /// encoding/keypack.rs). Off: new keys go raw; packed ones stay
    /// readable.
    pub key_compression: bool,
    /// The shared key prefixes.
    prefixes: Prefixes,
    /// Where `store_blob` packs a key.
    key_buf: Vec<u8>,
    /// `key_buf` already holds the packed form of the key `store_blob`
    /// writes next: `insert` copied it from the blob it replaces (the
    /// same key packs to the same bytes), so an overwrite packs nothing.
    key_packed: bool,
}

impl Default for Db {
    fn default() -> Self {
        Db {
            segs: vec![Segment::with_room(0, 0)],
            dir: vec![0],
            depth: 0,
            slab: Slab::default(),
            len: 0,
            volatile: 0,
            hand: Hand { seg: 0, pos: 0, shape: 0, min: i64::MAX },
            no_touch: false,
            keep_expired: false,
            ignore_deadlines: false,
            lazy_expired: 0,
            count_reads: false,
            read_hits: 0,
            read_misses: 0,
            log_events: 0,
            events: Vec::new(),
            objs: Vec::new(),
            free_objs: Vec::new(),
            fexp: BTreeMap::new(),
            fexp_at: HashMap::new(),
            fexp_segs: BTreeSet::new(),
            inline_ttl: 0,
            member_ttl: 0,
            member_expired: Vec::new(),
            lazy_server_del: false,
            lazy_expire: false,
            discarded: Vec::new(),
            pending: None,
            epoch: 0,
            marks: vec![0],
            snap: None,
            written: Vec::new(),
            access: Access::Lru,
            rng: 0x9E37_79B9_7F4A_7C15,
            slot_index: None,
            value_compression: false,
            packs: Tables::default(),
            scratch: Vec::new(),
            pack_buf: Vec::new(),
            key_compression: false,
            prefixes: Prefixes::default(),
            key_buf: Vec::new(),
            key_packed: false,
        }
    }
}

impl Db {
    /// An empty database.
    pub fn new() -> Self {
        Db::default()
    }

    /// Number of keys, including expired ones not yet reclaimed (as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the database holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of keys with a deadline.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    /// Every collection in the object table (each HASH, LIST, SET, ZSET
    /// and STREAM not stored inline in its key's blob), in table order,
    /// expired keys' included: a walk without keys or strings, for
    /// questions about what the data holds (the RDB version it needs).
    pub fn objects(&self) -> impl Iterator<Item = ValueRef<'_>> {
        self.objs.iter().flatten().map(Obj::as_ref)
    }

    /// Bytes this database holds from the allocator: slab pages, large blobs,
    /// segment slot arrays, the directory, the object table and every
    /// object's heap bytes, with jemalloc's rounding, and what a running
    /// snapshot holds (tables detached into it; not its sink). O(objects).
    pub fn allocated_bytes(&self) -> usize {
        self.slab.allocated_bytes()
            + jemalloc_size(self.objs.capacity() * size_of::<Option<Obj>>())
            + jemalloc_size(self.free_objs.capacity() * 4)
            + self.objs.iter().flatten().map(Obj::mem_usage).sum::<usize>()
            + self.segs.iter().map(Segment::allocated_bytes).sum::<usize>()
            + jemalloc_size(self.segs.capacity() * size_of::<Segment>())
            + jemalloc_size(self.dir.capacity() * 4)
            + self.pending.as_ref().map_or(0, |p| p.obj.mem_usage())
            + jemalloc_size(self.marks.capacity() * 4)
            + self.slot_index_bytes()
            + self.snapshot_bytes()
    }

    fn blob(&self, s: u64) -> Blob<'_> {
        Blob::parse(self.slab.bytes(addr_of(s)))
    }

    /// The raw key of blob `b` (decoded if stored packed).
    fn raw_key<'a>(&self, b: &Blob<'a>) -> Cow<'a, [u8]> {
        let number = match b.key_kind {
            KeyKind::Raw => return Cow::Borrowed(b.key),
            KeyKind::Packed => None,
            KeyKind::Number(id) => Some(id),
        };
        let mut k = Vec::with_capacity(b.key.len() * 3 + 8);
        match number {
            None => self.prefixes.unpack(b.key, &mut k),
            Some(id) => self.prefixes.unpack_number(id, b.key, &mut k),
        }
        .expect("a stored packed key decodes");
        Cow::Owned(k)
    }

    /// True if the blob of slot `s` holds `key` (compared packed when
    /// stored packed, without decoding).
    fn holds_key(&self, s: u64, key: &[u8]) -> bool {
        let b = self.slab.bytes(addr_of(s));
        let stored = Blob::key_of(b);
        match blob::key_kind(b) {
            KeyKind::Raw => stored == key,
            KeyKind::Packed => self.prefixes.eq(stored, key),
            KeyKind::Number(id) => self.prefixes.eq_number(id, stored, key),
        }
    }

    /// The raw key of slot `s`, for hashing.
    fn slot_key(&self, s: u64) -> Cow<'_, [u8]> {
        self.raw_key(&self.blob(s))
    }

    /// The value the slot `s` holds (an inline hash only when lent out).
    fn value_of(&self, s: u64) -> ValueRef<'_> {
        match self.blob(s).body() {
            Body::Str(v) => ValueRef::Str(v),
            Body::Obj(i) => self.obj(i).as_ref(),
            Body::Inline(_) => match &self.pending {
                Some(p) if p.slot == s => p.obj.as_ref(),
                _ => unreachable!("an inline collection is read through `pending` or `with_value`"),
            },
            Body::Packed(_) => unreachable!("a packed string is read through `scratch` or `with_value`"),
        }
    }

    /// Decodes the packed string of slot `s` into `scratch` (cleared
    /// first) if it holds one; returns true then.
    fn unpack_to_scratch(&mut self, s: u64) -> bool {
        let Body::Packed(p) = Blob::parse(self.slab.bytes(addr_of(s))).body() else { return false };
        self.scratch.clear();
        self.packs.unpack(p, &mut self.scratch).expect("a stored packed string decodes");
        true
    }

    /// Counters of packed strings and their tables (INFO).
    pub fn pack_stats(&self) -> PackStats {
        self.packs.stats()
    }

    /// The length of the live string at `key` without decoding it
    /// (STRLEN, O(1)): None if absent, Some(None) if not a string.
    pub fn str_len(&mut self, key: &[u8], now: i64) -> Option<Option<usize>> {
        let (si, pos) = self.live(key, now)?;
        Some(match self.blob(self.segs[si].slots[pos]).body() {
            Body::Str(v) => Some(v.len()),
            Body::Packed(p) => packed::raw_len(p),
            Body::Obj(_) | Body::Inline(_) => None,
        })
    }

    /// Calls `f` with the value the slot `s` holds, decoding an inline
    /// hash that is not lent out into a temporary.
    fn with_value<R>(&self, s: u64, f: impl FnOnce(ValueRef<'_>) -> R) -> R {
        match self.blob(s).body() {
            Body::Inline(e) if self.pending.as_ref().is_none_or(|p| p.slot != s) => {
                f(Obj::from_inline(e).as_ref())
            }
            Body::Packed(p) => {
                let mut raw = Vec::new();
                self.packs.unpack(p, &mut raw).expect("a stored packed string decodes");
                f(ValueRef::Str(StrRef::Bytes(&raw)))
            }
            _ => f(self.value_of(s)),
        }
    }

    /// Lends the inline hash at (si, pos), if it holds one, as `pending`.
    fn lend_inline(&mut self, si: usize, pos: usize, dirty: bool) {
        let s = self.segs[si].slots[pos];
        if let Body::Inline(e) = self.blob(s).body() {
            let obj = Obj::from_inline(e);
            self.pending = Some(Pending { si, pos, slot: s, obj, dirty });
        }
    }

    /// Writes back the inline hash lent for writing: deletes its key if
    /// it became empty (returns true then), else stores it again, inline
    /// or, grown past the inline bound, in the object table.
    fn flush(&mut self) -> bool {
        let Some(p) = self.pending.take() else { return false };
        if !p.dirty {
            return false;
        }
        // `get_mut` gave the key to the snapshot before lending, and
        // `snapshot_begin` flushes, so no edit reaches a pending segment.
        debug_assert!(
            self.snap.is_none() || self.marks[p.si] == self.epoch || self.handled(p.si, tag_of(p.slot)),
            "a lent hash the snapshot has yet to give"
        );
        if p.obj.is_empty() {
            self.delete(p.si, p.pos);
            return true;
        }
        let s = p.slot;
        let b = self.blob(s);
        let (key, deadline) = (self.raw_key(&b).into_owned(), b.deadline);
        self.release_blob(s);
        let addr = self.store(p.si, &key, NewValue::Owned(p.obj.into_value()), deadline, None, Some(addr_of(s)));
        self.segs[p.si].slots[p.pos] = make_slot(tag_of(s), deadline.is_some(), clock_of(s), addr);
        false
    }

    /// Writes the blob for `key` in segment `si`: strings and small hashes
    /// inline, other collections into the object table.
    fn store(&mut self, si: usize, key: &[u8], value: NewValue<'_>, deadline: Option<i64>, hint: Option<prepack::Hint<'_>>, old: Option<u64>) -> u64 {
        let mut inline = Vec::new();
        if let Some(k) = hint.and_then(|h| h.key).filter(|_| self.key_compression) {
            // The packed key store_blob would make (prepack.rs).
            self.key_buf.clear();
            self.key_buf.extend_from_slice(k);
            self.key_packed = true;
        }
        let value = match value {
            NewValue::Owned(v) => v,
            NewValue::Str(v) => return self.store_str(si, key, v, deadline, hint, old),
        };
        if let Value::Bytes(b) = &value {
            return self.store_str(si, key, StrRef::Bytes(b), deadline, hint, old);
        }
        let body = match &value {
            Value::Int(v) => Some(Body::Str(StrRef::Int(*v))),
            v if objects::encode_inline(v, &mut inline) => Some(Body::Inline(&inline)),
            _ => None,
        };
        if let Some(body) = body {
            return self.store_blob(si, key, body, deadline, old);
        }
        let i = self.put_obj(Obj::from_value(value).expect("object body"), key);
        self.store_blob(si, key, Body::Obj(i), deadline, old)
    }

    /// `store` of a string: packed when value compression is on and it
    /// pays, else as it is.
    fn store_str(&mut self, si: usize, key: &[u8], value: StrRef<'_>, deadline: Option<i64>, hint: Option<prepack::Hint<'_>>, old: Option<u64>) -> u64 {
        if let StrRef::Bytes(b) = value {
            if self.value_compression {
                let made = hint.and_then(|h| Some((self.packs.accept(key, b.len(), h.value, h.form.len())?, h.form)));
                if let Some((stored, form)) = made {
                    let body = if stored { Body::Packed(form) } else { Body::Str(StrRef::Bytes(b)) };
                    return self.store_blob(si, key, body, deadline, old);
                }
                let mut buf = std::mem::take(&mut self.pack_buf);
                let packed = self.packs.pack(key, b, &mut buf);
                let addr = self.store_blob(si, key, if packed { Body::Packed(&buf) } else { Body::Str(StrRef::Bytes(b)) }, deadline, old);
                self.pack_buf = buf;
                return addr;
            }
        }
        self.store_blob(si, key, Body::Str(value), deadline, old)
    }

    fn obj(&self, i: u32) -> &Obj {
        self.objs[i as usize].as_ref().expect("blob points at a live object")
    }

    /// Puts `obj`, the collection of `key`, in a free slot of the object
    /// table (a new one if none is free) and registers it in the
    /// field-expiry index; returns its index.
    fn put_obj(&mut self, obj: Obj, key: &[u8]) -> u32 {
        let i = match self.free_objs.pop() {
            Some(i) => {
                self.objs[i as usize] = Some(obj);
                i
            }
            None => {
                self.objs.push(Some(obj));
                u32::try_from(self.objs.len() - 1).expect("fewer than 2^32 objects")
            }
        };
        self.reindex(i, key);
        i
    }

    /// Frees the object slot `i` (and its index entry); returns the object.
    fn take_obj(&mut self, i: u32) -> Obj {
        if let Some(t) = self.fexp_at.remove(&i) {
            self.fexp.remove(&(t, i));
            if self.obj(i).expires_on_access() {
                self.member_ttl -= 1;
            }
        }
        self.free_objs.push(i);
        self.objs[i as usize].take().expect("live object")
    }

    /// Finds a live `key`, deleting it if due and touching it unless
    /// `no_touch`. Writes back a lent inline hash first.
    fn live(&mut self, key: &[u8], now: i64) -> Option<(usize, usize)> {
        self.live_or_vacant(key, now).ok()
    }

    /// `live`, telling apart a key not stored at all: Err with what its
    /// lookup found (for `insert_found` to create it without looking it
    /// up again; nothing has changed since), and a key that was stored
    /// but is gone now (Err(None): expired, or a collection emptied by
    /// member expiry).
    fn live_or_vacant(&mut self, key: &[u8], now: i64) -> Result<(usize, usize), Option<Found>> {
        self.flush();
        let (h, si, pos) = self.find(key);
        let Some(pos) = pos else { return Err(Some((h, si, None))) };
        let s = self.segs[si].slots[pos];
        if s & TTL_BIT != 0 && !self.ignore_deadlines && matches!(self.blob(s).deadline, Some(t) if t <= now) {
            if self.keep_expired {
                return Err(None);
            }
            self.pre_write_slot(si, pos);
            let gone = self.delete(si, pos);
            self.discard(gone, self.lazy_expire);
            self.lazy_expired += 1;
            self.log(LOG_EXPIRED, KeyEvent::Expired, key);
            return Err(None);
        }
        if self.member_ttl > 0 && !self.keep_expired && self.expire_members(si, pos, key, now) {
            return Err(None);
        }
        if !self.no_touch {
            let field = self.touched(clock_of(s), now);
            self.segs[si].slots[pos] = with_clock(s, field);
        }
        Ok((si, pos))
    }

    /// Creates `key` (with no deadline) when `live_or_vacant` said it is
    /// absent: with the lookup it made when it can, else by `insert`.
    fn create(&mut self, key: &[u8], vacant: Option<Found>, value: Value, now: i64) {
        match vacant {
            Some(found) => self.insert_found(key, NewValue::Owned(value), Ttl::Clear, now, None, found),
            None => self.insert(key, value, Ttl::Clear, now),
        };
    }

    /// Lazy member expiry: if the key at (si, pos) holds a set or sorted
    /// set with members past their deadline, removes them all, records
    /// them (`member_expired`, and the event log), and deletes the key if
    /// none is left (returns true then).
    fn expire_members(&mut self, si: usize, pos: usize, key: &[u8], now: i64) -> bool {
        let Body::Obj(i) = self.blob(self.segs[si].slots[pos]).body() else { return false };
        if !self.obj(i).expires_on_access() || self.fexp_at.get(&i).is_none_or(|&t| t >= now) {
            return false;
        }
        self.pre_write_slot(si, pos);
        let obj = self.objs[i as usize].as_mut().expect("live object");
        let kind = obj.kind();
        let mut members = Vec::new();
        obj.expire_due_with(now, usize::MAX, |m| members.push(m.into()));
        let deleted = obj.is_empty();
        if deleted {
            self.delete(si, pos);
        } else {
            self.reindex(i, key);
        }
        if !members.is_empty() {
            self.log(LOG_MEMBERS, KeyEvent::MembersExpired(kind), key);
            if deleted {
                self.log(LOG_MEMBERS, KeyEvent::Emptied, key);
            }
            self.member_expired.push(MemberExpiry { kind, key: key.into(), members, deleted });
        }
        deleted
    }

    /// Frees a collection taken out of the table here, or with `lazy`
    /// leaves it for the caller (`take_discarded`), who frees big ones off
    /// the executor (lazyfree-lazy-server-del, lazyfree-lazy-expire).
    fn discard(&mut self, obj: Option<Obj>, lazy: bool) {
        if let (Some(o), true) = (obj, lazy) {
            self.discarded.push(o.into_value());
        }
    }

    /// The collections overwrites and expiries left for the caller to free
    /// since the last call (none unless `lazy_server_del`/`lazy_expire`).
    pub fn take_discarded(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.discarded)
    }

    /// True if `take_discarded` has something to give.
    pub fn has_discarded(&self) -> bool {
        !self.discarded.is_empty()
    }

    /// Removes the slot at (si, pos) and frees its blob; returns the
    /// collection it held, if any.
    fn delete(&mut self, si: usize, pos: usize) -> Option<Obj> {
        let s = self.segs[si].take(pos);
        self.len -= 1;
        if self.slot_index.is_some() {
            self.slot_removed(s);
        }
        if s & TTL_BIT != 0 {
            self.volatile -= 1;
        }
        let obj = match self.blob(s).body() {
            Body::Obj(i) => Some(self.take_obj(i)),
            Body::Str(_) | Body::Inline(_) | Body::Packed(_) => None,
        };
        self.free_blob(s);
        obj
    }

    /// The live value of `key`.
    pub fn get(&mut self, key: &[u8], now: i64) -> Option<ValueRef<'_>> {
        let (si, pos) = self.live(key, now)?;
        self.value_at(si, pos)
    }

    /// `get` for a read command (Redis's lookupKeyRead): the lookup is
    /// counted as a hit or a miss, and a miss recorded as `KeyEvent::Miss`
    /// (see `note_read`).
    pub fn get_read(&mut self, key: &[u8], now: i64) -> Option<ValueRef<'_>> {
        let found = self.live(key, now);
        self.note_read(key, found.is_some(), true);
        let (si, pos) = found?;
        self.value_at(si, pos)
    }

    /// The live value in slot `pos` of segment `si`, as `get` returns it.
    fn value_at(&mut self, si: usize, pos: usize) -> Option<ValueRef<'_>> {
        let s = self.segs[si].slots[pos];
        // The flags byte says which of the three ways applies; only that
        // one decodes the blob.
        match blob::body_kind(self.slab.bytes(addr_of(s))) {
            BodyKind::Packed => {
                self.unpack_to_scratch(s);
                return Some(ValueRef::Str(StrRef::Bytes(&self.scratch)));
            }
            BodyKind::Inline => self.lend_inline(si, pos, false),
            BodyKind::Str | BodyKind::Obj => {}
        }
        Some(self.value_of(s))
    }

    /// Moves out the copy of an inline collection the last `get` lent for
    /// reading (None when it lent none: the value was a string or in the
    /// object table), for a caller that keeps it past the next call
    /// (`read_many`) instead of decoding the blob again.
    pub fn take_lent(&mut self) -> Option<Value> {
        self.pending.take_if(|p| !p.dirty).map(|p| p.obj.into_value())
    }

    /// A mutable view of the live value of `key`.
    /// After editing a collection, call `sync_object`.
    pub fn get_mut(&mut self, key: &[u8], now: i64) -> Option<ValueMut<'_>> {
        // A write usually follows a read of the same key (the type check):
        // the copy lent for reading is still the blob's (any change to the
        // Db since would have dropped it), so it is lent again for writing
        // rather than decoded a second time.
        let read = self.pending.take_if(|p| !p.dirty);
        let (si, pos) = self.live(key, now)?;
        self.pre_write_slot(si, pos);
        let s = self.segs[si].slots[pos];
        match read {
            Some(mut p) if (p.si, p.pos, addr_of(p.slot)) == (si, pos, addr_of(s)) => {
                debug_assert!(matches!(self.blob(s).body(), Body::Inline(_)), "a lent copy of an inline blob");
                // The access clock may have moved; write back under the slot as it is.
                p.slot = s;
                p.dirty = true;
                self.pending = Some(p);
            }
            _ => self.lend_inline(si, pos, true),
        }
        if self.unpack_to_scratch(s) {
            return Some(ValueMut::Str(StrRef::Bytes(&self.scratch)));
        }
        Some(match Blob::parse(self.slab.bytes(addr_of(s))).body() {
            Body::Str(v) => ValueMut::Str(v),
            Body::Packed(_) => unreachable!("decoded above"),
            Body::Obj(i) => self.objs[i as usize].as_mut().expect("live object").as_mut(),
            Body::Inline(_) => self.pending.as_mut().expect("just lent").obj.as_mut(),
        })
    }

    /// The live value of `key` for writing, first inserting `make()` (with
    /// no deadline) when the key is absent. After editing a collection,
    /// call `sync_object`.
    pub fn get_or_insert_with(&mut self, key: &[u8], now: i64, make: impl FnOnce() -> Value) -> ValueMut<'_> {
        if let Err(vacant) = self.live_or_vacant(key, now) {
            self.create(key, vacant, make(), now);
        }
        self.get_mut(key, now).expect("just inserted")
    }

    /// Epilogue of an in-place edit of `key`'s collection: deletes the key
    /// if the collection is now empty (returns true then), else updates
    /// its entry in the field-expiry index. Does nothing for a string.
    pub fn sync_object(&mut self, key: &[u8]) -> bool {
        let mine = self.pending.as_ref().is_some_and(|p| self.holds_key(p.slot, key));
        if self.flush() && mine {
            return true;
        }
        let (_, si, Some(pos)) = self.find(key) else { return false };
        let i = match self.blob(self.segs[si].slots[pos]).body() {
            Body::Obj(i) => i,
            Body::Inline([_]) => {
                self.pre_write_slot(si, pos);
                self.delete(si, pos);
                return true;
            }
            Body::Str(_) | Body::Inline(_) | Body::Packed(_) => return false,
        };
        if self.obj(i).is_empty() {
            self.pre_write_slot(si, pos);
            self.delete(si, pos);
            return true;
        }
        self.reindex(i, key);
        false
    }

    /// The collection `key` holds in the object table (every type but
    /// strings and the small hashes kept inline), without expiring or
    /// touching it: for a command that reads many keys together (ZUNIONSTORE
    /// over thousands) after `get` has checked each of them. None if the
    /// key is absent or holds a string or an inline hash.
    pub fn peek_object(&self, key: &[u8]) -> Option<ValueRef<'_>> {
        let (_, si, pos) = self.find(key);
        match self.blob(self.segs[si].slots[pos?]).body() {
            Body::Obj(i) => Some(self.obj(i).as_ref()),
            Body::Str(_) | Body::Inline(_) | Body::Packed(_) => None,
        }
    }

    /// True if `key` is stored, live or past its deadline, without
    /// touching or expiring it.
    pub fn stored(&self, key: &[u8]) -> bool {
        self.find(key).2.is_some()
    }

    /// True if `key` is stored and not past its deadline (as `live` sees
    /// it, `ignore_deadlines` included), without touching, expiring or
    /// deleting it: cluster routing's view of a key.
    pub fn stored_live(&self, key: &[u8], now: i64) -> bool {
        let (_, si, pos) = self.find(key);
        let Some(pos) = pos else { return false };
        let s = self.segs[si].slots[pos];
        !(s & TTL_BIT != 0 && !self.ignore_deadlines && matches!(self.blob(s).deadline, Some(t) if t <= now))
    }

    /// True if `key` is live.
    pub fn contains(&mut self, key: &[u8], now: i64) -> bool {
        self.live(key, now).is_some()
    }

    /// Sets or replaces `key`. Returns true if a live key was replaced.
    pub fn insert(&mut self, key: &[u8], value: Value, ttl: Ttl, now: i64) -> bool {
        self.insert_with(key, NewValue::Owned(value), ttl, now, None)
    }

    /// `insert` of the string `bytes` (stored as `Value::string` would
    /// make it, an integer when it reads as one), copied straight from the
    /// caller's bytes into its blob.
    pub fn insert_str(&mut self, key: &[u8], bytes: &[u8], ttl: Ttl, now: i64) -> bool {
        self.insert_with(key, NewValue::Str(Value::string_ref(bytes)), ttl, now, None)
    }

    /// `insert`, with forms of the key and value made on another thread
    /// (prepack.rs), used where they are what `store` would make.
    fn insert_with(&mut self, key: &[u8], value: NewValue<'_>, ttl: Ttl, now: i64, hint: Option<prepack::Hint<'_>>) -> bool {
        self.flush();
        let found = self.find(key);
        self.insert_found(key, value, ttl, now, hint, found)
    }

    /// `insert_with` after the lookup: `found` is what `find` gave for
    /// `key`, with no change to the Db since.
    fn insert_found(&mut self, key: &[u8], value: NewValue<'_>, ttl: Ttl, now: i64, hint: Option<prepack::Hint<'_>>, found: Found) -> bool {
        let (h, si, pos) = found;
        match pos {
            Some(pos) => self.pre_write_slot(si, pos),
            None => self.pre_write_new(si, h),
        }
        let mut old = None;
        if let Some(pos) = pos {
            let s = self.segs[si].slots[pos];
            // Only a slot with the TTL bit has a deadline in its blob.
            let d = if s & TTL_BIT != 0 { self.blob(s).deadline } else { None };
            if matches!(d, Some(t) if t <= now) {
                let gone = self.delete(si, pos);
                self.discard(gone, self.lazy_expire);
                self.lazy_expired += 1;
                self.log(LOG_EXPIRED, KeyEvent::Expired, key);
            } else {
                old = Some((pos, d));
            }
        }
        let deadline = match ttl {
            Ttl::Keep => old.and_then(|(_, d)| d),
            Ttl::Clear => None,
            Ttl::At(t) => Some(t),
        };
        if let Some((pos, _)) = old {
            // The new blob goes over the old one's bytes when it fits their
            // class (`store_blob`'s `old`).
            let s = self.segs[si].take(pos);
            // The flags byte says whether the old blob has more to give: a
            // packed key to reuse, a collection to drop (a string over a
            // plain key, the usual overwrite, needs no parse).
            let bytes = self.slab.bytes(addr_of(s));
            if self.key_compression && blob::key_kind(bytes) == KeyKind::Packed {
                let b = Blob::parse(bytes);
                if keypack::is_canonical(b.key) {
                    self.key_buf.clear();
                    self.key_buf.extend_from_slice(b.key);
                    self.key_packed = true;
                }
            }
            if blob::body_kind(bytes) == BodyKind::Obj {
                if let Body::Obj(i) = Blob::parse(bytes).body() {
                    let replaced = self.take_obj(i);
                    self.discard(Some(replaced), self.lazy_server_del);
                }
            }
            self.release_blob(s);
            let addr = self.store(si, key, value, deadline, hint, Some(addr_of(s)));
            self.len -= 1;
            self.volatile -= usize::from(s & TTL_BIT != 0);
            // Re-insert into the same slot: its bucket has room now.
            let field = self.touched(clock_of(s), now);
            let ns = make_slot(tag_of(s), deadline.is_some(), field, addr);
            self.segs[si].slots[pos] = ns;
            self.segs[si].len += 1;
            self.segs[si].volatile += u32::from(deadline.is_some());
        } else {
            let addr = self.store(si, key, value, deadline, hint, None);
            let tag = tag_at(h, self.segs[si].depth as u32);
            if let Some(t) = deadline {
                self.note_deadline(si, t);
            }
            self.insert_slot(si, make_slot(tag, deadline.is_some(), self.access.fresh(now), addr));
        }
        if let Some(t) = deadline {
            if old.is_some() {
                self.note_deadline(si, t);
            }
        }
        self.len += 1;
        self.volatile += usize::from(deadline.is_some());
        if old.is_none() {
            if self.slot_index.is_some() {
                self.slot_added(h);
            }
            self.log(LOG_NEW, KeyEvent::New, key);
        }
        old.is_some()
    }

    /// INCRBY on the string at `key`: adds `by` to its integer value (an
    /// absent key counts as 0 and is created without a deadline; an existing
    /// deadline is kept). The integer is rewritten in place when it still
    /// fits its blob, so a counter update costs one lookup.
    ///
    /// Errors: `IncrError::WrongType` for a collection, `NotInt` for a
    /// string that is not an integer, `Overflow` when the sum overflows.
    pub fn incr_by(&mut self, key: &[u8], by: i64, now: i64) -> Result<i64, IncrError> {
        let (si, pos) = match self.live_or_vacant(key, now) {
            Ok(at) => at,
            Err(vacant) => {
                self.create(key, vacant, Value::Int(by), now);
                return Ok(by);
            }
        };
        let s = self.segs[si].slots[pos];
        if self.unpack_to_scratch(s) {
            let cur = parse_canonical_i64(&self.scratch).ok_or(IncrError::NotInt)?;
            let v = cur.checked_add(by).ok_or(IncrError::Overflow)?;
            self.insert(key, Value::Int(v), Ttl::Keep, now);
            return Ok(v);
        }
        let cur = match self.blob(s).body() {
            Body::Obj(_) | Body::Inline(_) => return Err(IncrError::WrongType),
            Body::Packed(_) => unreachable!("decoded above"),
            Body::Str(StrRef::Int(v)) => v,
            Body::Str(StrRef::Bytes(b)) => parse_canonical_i64(b).ok_or(IncrError::NotInt)?,
        };
        let v = cur.checked_add(by).ok_or(IncrError::Overflow)?;
        self.pre_write_slot(si, pos);
        if !blob::rewrite_int(self.slab.bytes_mut(addr_of(s)), v) {
            self.insert(key, Value::Int(v), Ttl::Keep, now);
        }
        Ok(v)
    }

    /// Removes a live key, returning its value.
    pub fn remove(&mut self, key: &[u8], now: i64) -> Option<Value> {
        let (si, pos) = self.live(key, now)?;
        self.pre_write_slot(si, pos);
        let s = self.segs[si].slots[pos];
        let v = match self.blob(s).body() {
            Body::Str(v) => ValueRef::Str(v).to_owned(),
            Body::Packed(p) => {
                let mut raw = Vec::new();
                self.packs.unpack(p, &mut raw).expect("a stored packed string decodes");
                Value::Bytes(raw)
            }
            Body::Inline(e) => Obj::from_inline(e).into_value(),
            Body::Obj(_) => Value::Int(0),
        };
        Some(match self.delete(si, pos) {
            Some(o) => o.into_value(),
            None => v,
        })
    }

    /// Seconds since the key was last read or written, without touching it.
    /// The clock has 15 bits, so idle times wrap after about 9 hours.
    pub fn idle_secs(&mut self, key: &[u8], now: i64) -> Option<i64> {
        let saved = std::mem::replace(&mut self.no_touch, true);
        let found = self.live(key, now);
        self.no_touch = saved;
        let (si, pos) = found?;
        Some((now / 1000 - clock_of(self.segs[si].slots[pos])).rem_euclid(CLOCK_MOD))
    }

    /// The LFU counter of a live key, decayed to `now`, without touching it
    /// (OBJECT FREQ). Meaningful only while `access` is LFU.
    pub fn freq(&mut self, key: &[u8], now: i64) -> Option<u8> {
        let saved = std::mem::replace(&mut self.no_touch, true);
        let found = self.live(key, now);
        self.no_touch = saved;
        let (si, pos) = found?;
        let decay = match self.access {
            Access::Lfu { decay_minutes, .. } => decay_minutes,
            Access::Lru | Access::Lrm => 0,
        };
        Some(lfu_decayed(clock_of(self.segs[si].slots[pos]), now, decay))
    }

    /// Sets the LFU counter of a live key (RESTORE FREQ); false if absent.
    pub fn set_freq(&mut self, key: &[u8], freq: u8, now: i64) -> bool {
        let saved = std::mem::replace(&mut self.no_touch, true);
        let found = self.live(key, now);
        self.no_touch = saved;
        let Some((si, pos)) = found else { return false };
        let s = self.segs[si].slots[pos];
        self.segs[si].slots[pos] = with_clock(s, crate::access::lfu_pack(now, freq));
        true
    }

    /// Bytes of slab pages this database holds but no key uses (free and
    /// never-used slots, spare pages): reusable without asking the
    /// allocator, so not counted as used memory (maxmemory, INFO).
    pub fn slack_bytes(&self) -> usize {
        self.slab.slack_bytes()
    }

    /// Records a write of `key` at `now` in its access field when the field
    /// counts writes (`Access::Lrm`); otherwise the access that found the
    /// key already counted. Does not reclaim or touch anything else.
    #[inline]
    pub fn modified(&mut self, key: &[u8], now: i64) {
        if self.access == Access::Lrm {
            self.modified_lrm(key, now);
        }
    }

    fn modified_lrm(&mut self, key: &[u8], now: i64) {
        self.flush();
        let (_, si, pos) = self.find(key);
        if let Some(pos) = pos {
            let s = self.segs[si].slots[pos];
            self.segs[si].slots[pos] = with_clock(s, now / 1000);
        }
    }

    /// The access field after an access at `now` (see `crate::access`).
    fn touched(&mut self, field: i64, now: i64) -> i64 {
        if self.access == Access::Lru {
            return now / 1000;
        }
        let r = self.next_random();
        self.access.touched(field, now, r)
    }

    /// The next number of the Db's own generator (xorshift64*).
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Makes a live key look idle for `secs` seconds (RESTORE IDLETIME);
    /// the 15-bit clock keeps the value modulo about 9 hours.
    pub fn set_idle_secs(&mut self, key: &[u8], secs: i64, now: i64) -> bool {
        let saved = std::mem::replace(&mut self.no_touch, true);
        let found = self.live(key, now);
        self.no_touch = saved;
        let Some((si, pos)) = found else { return false };
        let s = self.segs[si].slots[pos];
        self.segs[si].slots[pos] = with_clock(s, (now / 1000).saturating_sub(secs).rem_euclid(CLOCK_MOD));
        true
    }

    /// Bytes this key costs: its blob's slab class plus its share of the
    /// segment's slot array (the array's bytes divided by the keys in it,
    /// rounded up); for a collection also its object-table slot and the
    /// collection's own heap bytes.
    pub fn mem_usage(&mut self, key: &[u8], now: i64) -> Option<usize> {
        let (si, pos) = self.live(key, now)?;
        let seg = &self.segs[si];
        Some(self.slot_usage(seg, seg.slots[pos]))
    }

    /// `mem_usage` of the key in slot `s` of `seg`.
    fn slot_usage(&self, seg: &Segment, s: u64) -> usize {
        let obj = match self.blob(s).body() {
            Body::Obj(i) => size_of::<Option<Obj>>() + self.obj(i).mem_usage(),
            Body::Str(_) | Body::Inline(_) | Body::Packed(_) => 0,
        };
        self.slab.cost(addr_of(s)) + seg.allocated_bytes().div_ceil(seg.len as usize) + obj
    }

    /// Removes every key. Settings (`no_touch`, `keep_expired`,
    /// `log_events`, `access`) and slot mode stay; recorded events are
    /// dropped. During a snapshot
    /// the old table goes to the snapshot, which serializes what it still
    /// needs and frees it in later steps (`detach`); otherwise it is freed
    /// here.
    pub fn clear(&mut self) {
        drop(self.detach());
    }
}
