//! `Db`: one logical database, mapping keys to values with optional deadlines.
//!
//! Every read takes `now` (milliseconds since the Unix epoch, fixed for the
//! whole command by the caller) and treats a key whose deadline is at or
//! before `now` as absent, deleting it on the spot (lazy expiry).
//! `active_expire` reclaims due keys that nobody touches.
//!
//! Layout (see docs/design/keyspace.md): an extendible hash table. A
//! directory indexed by the top `depth` bits of the key hash points at
//! segments (`segment.rs`); a full segment grows in small steps and, at its
//! largest size, splits alone, so there is no whole-table rehash. Each key is
//! one 8-byte slot plus one slab blob (`blob.rs`, `slab.rs`) holding key,
//! value and the deadline only when there is one.
//!
//! SCAN's cursor is a position in hash space: all keys whose hash (truncated
//! to the segment's prefix plus 14 tag bits) lies below it were returned.
//! Splits and growth never move a key across that order, so a key present for
//! the whole scan is returned at least once.
//!
//! Collections (HASH, LIST, SET, ZSET, STREAM) live in an object table beside the slab: the key's
//! blob holds the 4-byte index of the object's slot (`Vec<Option<Obj>>`,
//! 24 bytes a slot, freed slots reused through a free list). Compared with a
//! pointer to a `Box<Hash>` this is safe Rust and saves the box's 32-byte
//! jemalloc block; it costs the table's growth slack (up to 2x of 24 bytes
//! a slot right after it doubles) and a free-list entry per hole.
//!
//! Field expiry index (DESIGN §3): every hash with at least one field TTL is
//! registered once in `fexp`, ordered by its earliest field deadline.
//! `active_expire_fields` pops due hashes from the front, so it never scans
//! hashes without due fields. Whoever edits a hash in place through
//! `ValueMut` calls `sync_object` afterwards, which re-registers it (and
//! deletes the key when the hash became empty); insert, remove and every
//! deletion keep the index in step on their own.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::blob::{self, Blob, Body};
use crate::encoding::fieldpack;
use crate::segment::{addr_of, clock_of, hash, make_slot, tag_at, tag_of, with_clock, Segment, CLOCK_MOD, TAG_BITS, TTL_BIT};
use crate::slab::{jemalloc_size, Slab};
use crate::strref::{parse_canonical_i64, StrRef};
use crate::types::hash::Hash;
use crate::types::list::List;
use crate::types::set::Set;
use crate::types::stream::Stream;
use crate::types::zset::ZSet;
use crate::value::{Value, ValueMut, ValueRef};

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

/// A collection in the object table. Hashes sit in the slot itself; other
/// types are boxed so that a slot stays 24 bytes (`Option<Obj>` uses the
/// niche of the hash's buffer; a `Set` alone is 32 bytes); a boxed
/// collection pays one more jemalloc block. A new type adds a variant
/// here and an arm in each method below; only hashes have field TTLs.
#[derive(Debug, Clone)]
enum Obj {
    Hash(Hash),
    List(Box<List>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

const _: () = assert!(size_of::<Option<Obj>>() == 24);

impl Obj {
    /// The collection an owned value carries; None for a string.
    fn from_value(v: Value) -> Option<Obj> {
        match v {
            Value::Hash(h) => Some(Obj::Hash(*h)),
            Value::List(l) => Some(Obj::List(l)),
            Value::Set(s) => Some(Obj::Set(s)),
            Value::ZSet(z) => Some(Obj::ZSet(z)),
            Value::Stream(s) => Some(Obj::Stream(s)),
            Value::Int(_) | Value::Bytes(_) => None,
        }
    }

    fn into_value(self) -> Value {
        match self {
            Obj::Hash(h) => Value::Hash(Box::new(h)),
            Obj::List(l) => Value::List(l),
            Obj::Set(s) => Value::Set(s),
            Obj::ZSet(z) => Value::ZSet(z),
            Obj::Stream(s) => Value::Stream(s),
        }
    }

    fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Obj::Hash(h) => ValueRef::Hash(h),
            Obj::List(l) => ValueRef::List(l),
            Obj::Set(s) => ValueRef::Set(s),
            Obj::ZSet(z) => ValueRef::ZSet(z),
            Obj::Stream(s) => ValueRef::Stream(s),
        }
    }

    fn as_mut(&mut self) -> ValueMut<'_> {
        match self {
            Obj::Hash(h) => ValueMut::Hash(h),
            Obj::List(l) => ValueMut::List(l),
            Obj::Set(s) => ValueMut::Set(s),
            Obj::ZSet(z) => ValueMut::ZSet(z),
            Obj::Stream(s) => ValueMut::Stream(s),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Obj::Hash(h) => h.is_empty(),
            Obj::List(l) => l.is_empty(),
            Obj::Set(s) => s.is_empty(),
            Obj::ZSet(z) => z.is_empty(),
            // An empty stream is still a key (XADD MAXLEN 0, XDEL of all).
            Obj::Stream(_) => false,
        }
    }

    /// Heap bytes owned, the box of a boxed type included.
    fn mem_usage(&self) -> usize {
        match self {
            Obj::Hash(h) => h.mem_usage(),
            Obj::List(l) => jemalloc_size(size_of::<List>()) + l.mem_usage(),
            Obj::Set(s) => jemalloc_size(size_of::<Set>()) + s.mem_usage(),
            Obj::ZSet(z) => jemalloc_size(size_of::<ZSet>()) + z.mem_usage(),
            Obj::Stream(s) => jemalloc_size(size_of::<Stream>()) + s.mem_usage(),
        }
    }

    /// Earliest field deadline (only hashes have field TTLs).
    fn min_deadline(&self) -> Option<i64> {
        match self {
            Obj::Hash(h) => h.min_deadline(),
            Obj::List(_) | Obj::Set(_) | Obj::ZSet(_) | Obj::Stream(_) => None,
        }
    }
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
    hash: Hash,
    dirty: bool,
}

/// Earliest field deadline of an inline hash body.
fn inline_min(body: Body<'_>) -> Option<i64> {
    match body {
        Body::Hash(e, _) => fieldpack::min_deadline(e, 0),
        Body::Str(_) | Body::Obj(_) => None,
    }
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

/// Deepest directory: a segment's prefix plus its 14 tag bits fit in 64 bits.
const MAX_DEPTH: u32 = 64 - TAG_BITS;

/// Where active expiry stopped: a segment, a slot in it, the segment's shape
/// then, and the earliest deadline seen so far in this pass.
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

/// A key event the server may turn into a keyspace notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyEvent {
    /// Found due on access and deleted (lazy expiry).
    Expired,
    /// Created: stored where no live key was.
    New,
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
    /// Keys deleted by lazy expiry since the last `take_lazy_expired`.
    lazy_expired: u64,
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
    /// The inline hash lent out by the last `get`/`get_mut`, if any.
    pending: Option<Pending>,
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
            lazy_expired: 0,
            log_events: 0,
            events: Vec::new(),
            objs: Vec::new(),
            free_objs: Vec::new(),
            fexp: BTreeMap::new(),
            fexp_at: HashMap::new(),
            fexp_segs: BTreeSet::new(),
            inline_ttl: 0,
            pending: None,
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

    /// Bytes this database holds from the allocator: slab pages, large blobs,
    /// segment slot arrays, the directory, the object table and every
    /// object's heap bytes, with jemalloc's rounding. O(objects).
    pub fn allocated_bytes(&self) -> usize {
        self.slab.allocated_bytes()
            + jemalloc_size(self.objs.capacity() * size_of::<Option<Obj>>())
            + jemalloc_size(self.free_objs.capacity() * 4)
            + self.objs.iter().flatten().map(Obj::mem_usage).sum::<usize>()
            + self.segs.iter().map(Segment::allocated_bytes).sum::<usize>()
            + jemalloc_size(self.segs.capacity() * size_of::<Segment>())
            + jemalloc_size(self.dir.capacity() * 4)
            + self.pending.as_ref().map_or(0, |p| p.hash.mem_usage())
    }

    fn seg_of(&self, h: u64) -> usize {
        if self.depth == 0 {
            self.dir[0] as usize
        } else {
            self.dir[(h >> (64 - self.depth)) as usize] as usize
        }
    }

    fn blob(&self, s: u64) -> Blob<'_> {
        Blob::parse(self.slab.bytes(addr_of(s)))
    }

    fn obj(&self, i: u32) -> &Obj {
        self.objs[i as usize].as_ref().expect("blob points at a live object")
    }

    /// The value the slot `s` holds (an inline hash only when lent out).
    fn value_of(&self, s: u64) -> ValueRef<'_> {
        match self.blob(s).body() {
            Body::Str(v) => ValueRef::Str(v),
            Body::Obj(i) => self.obj(i).as_ref(),
            Body::Hash(..) => match &self.pending {
                Some(p) if p.slot == s => ValueRef::Hash(&p.hash),
                _ => unreachable!("an inline hash is read through `pending` or `with_value`"),
            },
        }
    }

    /// Calls `f` with the value the slot `s` holds, decoding an inline
    /// hash that is not lent out into a temporary.
    fn with_value<R>(&self, s: u64, f: impl FnOnce(ValueRef<'_>) -> R) -> R {
        match self.blob(s).body() {
            Body::Hash(e, ex) if self.pending.as_ref().is_none_or(|p| p.slot != s) => {
                f(ValueRef::Hash(&Hash::from_inline(e, ex)))
            }
            _ => f(self.value_of(s)),
        }
    }

    /// Lends the inline hash at (si, pos), if it holds one, as `pending`.
    fn lend_inline(&mut self, si: usize, pos: usize, dirty: bool) {
        let s = self.segs[si].slots[pos];
        if let Body::Hash(e, ex) = self.blob(s).body() {
            let hash = Hash::from_inline(e, ex);
            self.pending = Some(Pending { si, pos, slot: s, hash, dirty });
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
        if p.hash.is_empty() {
            self.delete(p.si, p.pos);
            return true;
        }
        let s = p.slot;
        let b = self.blob(s);
        let (key, deadline) = (b.key.to_vec(), b.deadline);
        self.free_blob(s);
        let addr = self.store(p.si, &key, Value::Hash(Box::new(p.hash)), deadline);
        self.segs[p.si].slots[p.pos] = make_slot(tag_of(s), deadline.is_some(), clock_of(s), addr);
        false
    }

    /// Writes a blob in segment `si`, registering an inline hash's field
    /// TTLs in the field-expiry index.
    fn store_blob(&mut self, si: usize, key: &[u8], body: Body<'_>, deadline: Option<i64>) -> u64 {
        if let Some(t) = inline_min(body) {
            self.inline_ttl += 1;
            self.note_field_deadline(si, t);
        }
        blob::store(&mut self.slab, key, body, deadline)
    }

    /// Frees the blob of slot `s` (the object it points at is the caller's).
    fn free_blob(&mut self, s: u64) {
        if inline_min(self.blob(s).body()).is_some() {
            self.inline_ttl -= 1;
        }
        self.slab.free(addr_of(s));
    }

    /// Lowers segment `si`'s field-deadline bound to `t` and re-registers it.
    fn note_field_deadline(&mut self, si: usize, t: i64) {
        let seg = &mut self.segs[si];
        if t < seg.field_min {
            if seg.field_min != i64::MAX {
                self.fexp_segs.remove(&(seg.field_min, si as u32));
            }
            seg.field_min = t;
            self.fexp_segs.insert((t, si as u32));
        }
    }

    /// Writes the blob for `key` in segment `si`: strings and small hashes
    /// inline, other collections into the object table.
    fn store(&mut self, si: usize, key: &[u8], value: Value, deadline: Option<i64>) -> u64 {
        let body = match &value {
            Value::Int(v) => Some(Body::Str(StrRef::Int(*v))),
            Value::Bytes(b) => Some(Body::Str(StrRef::Bytes(b))),
            Value::Hash(h) => h.inline_parts().map(|(e, ex)| Body::Hash(e, ex)),
            Value::ZSet(_) | Value::List(_) | Value::Set(_) | Value::Stream(_) => None,
        };
        if let Some(body) = body {
            return self.store_blob(si, key, body, deadline);
        }
        let h = Obj::from_value(value).expect("object body");
        let i = match self.free_objs.pop() {
            Some(i) => {
                self.objs[i as usize] = Some(h);
                i
            }
            None => {
                self.objs.push(Some(h));
                u32::try_from(self.objs.len() - 1).expect("fewer than 2^32 objects")
            }
        };
        self.reindex(i, key);
        self.store_blob(si, key, Body::Obj(i), deadline)
    }

    /// Frees the object slot `i` (and its index entry); returns the object.
    fn take_obj(&mut self, i: u32) -> Obj {
        if let Some(t) = self.fexp_at.remove(&i) {
            self.fexp.remove(&(t, i));
        }
        self.free_objs.push(i);
        self.objs[i as usize].take().expect("live object")
    }

    /// Brings object `i`'s entry in the field-expiry index in step with its
    /// earliest field deadline.
    fn reindex(&mut self, i: u32, key: &[u8]) {
        let want = self.obj(i).min_deadline();
        let have = self.fexp_at.get(&i).copied();
        if want == have {
            return;
        }
        let old_key = have.and_then(|t| self.fexp.remove(&(t, i)));
        match want {
            Some(t) => {
                self.fexp.insert((t, i), old_key.unwrap_or_else(|| key.into()));
                self.fexp_at.insert(i, t);
            }
            None => {
                self.fexp_at.remove(&i);
            }
        }
    }

    /// Finds `key`: (hash, segment, slot index if stored).
    fn find(&self, key: &[u8]) -> (u64, usize, Option<usize>) {
        let h = hash(key);
        let si = self.seg_of(h);
        let seg = &self.segs[si];
        let pos = seg.find(tag_at(h, seg.depth as u32), |s| Blob::key_of(self.slab.bytes(addr_of(s))) == key);
        (h, si, pos)
    }

    /// Finds a live `key`, deleting it if due and touching it unless
    /// `no_touch`. Writes back a lent inline hash first.
    fn live(&mut self, key: &[u8], now: i64) -> Option<(usize, usize)> {
        self.flush();
        let (_, si, pos) = self.find(key);
        let pos = pos?;
        let s = self.segs[si].slots[pos];
        if s & TTL_BIT != 0 && matches!(self.blob(s).deadline, Some(t) if t <= now) {
            if self.keep_expired {
                return None;
            }
            self.delete(si, pos);
            self.lazy_expired += 1;
            self.log(LOG_EXPIRED, KeyEvent::Expired, key);
            return None;
        }
        if !self.no_touch {
            self.segs[si].slots[pos] = with_clock(s, now / 1000);
        }
        Some((si, pos))
    }

    /// Removes the slot at (si, pos) and frees its blob; returns the
    /// collection it held, if any.
    fn delete(&mut self, si: usize, pos: usize) -> Option<Obj> {
        let s = self.segs[si].take(pos);
        self.len -= 1;
        if s & TTL_BIT != 0 {
            self.volatile -= 1;
        }
        let obj = match self.blob(s).body() {
            Body::Obj(i) => Some(self.take_obj(i)),
            Body::Str(_) | Body::Hash(..) => None,
        };
        self.free_blob(s);
        obj
    }

    fn note_deadline(&mut self, si: usize, t: i64) {
        let seg = &mut self.segs[si];
        seg.min_deadline = seg.min_deadline.min(t);
        if self.hand.seg == si {
            self.hand.min = self.hand.min.min(t);
        }
    }

    /// The live value of `key`.
    pub fn get(&mut self, key: &[u8], now: i64) -> Option<ValueRef<'_>> {
        let (si, pos) = self.live(key, now)?;
        self.lend_inline(si, pos, false);
        Some(self.value_of(self.segs[si].slots[pos]))
    }

    /// A mutable view of the live value of `key`.
    /// After editing a collection, call `sync_object`.
    pub fn get_mut(&mut self, key: &[u8], now: i64) -> Option<ValueMut<'_>> {
        let (si, pos) = self.live(key, now)?;
        self.lend_inline(si, pos, true);
        let s = self.segs[si].slots[pos];
        Some(match Blob::parse(self.slab.bytes(addr_of(s))).body() {
            Body::Str(v) => ValueMut::Str(v),
            Body::Obj(i) => self.objs[i as usize].as_mut().expect("live object").as_mut(),
            Body::Hash(..) => ValueMut::Hash(&mut self.pending.as_mut().expect("just lent").hash),
        })
    }

    /// The live value of `key` for writing, first inserting `make()` (with
    /// no deadline) when the key is absent. After editing a collection,
    /// call `sync_object`.
    pub fn get_or_insert_with(&mut self, key: &[u8], now: i64, make: impl FnOnce() -> Value) -> ValueMut<'_> {
        if self.live(key, now).is_none() {
            self.insert(key, make(), Ttl::Clear, now);
        }
        self.get_mut(key, now).expect("just inserted")
    }

    /// Epilogue of an in-place edit of `key`'s collection: deletes the key
    /// if the collection is now empty (returns true then), else updates
    /// its entry in the field-expiry index. Does nothing for a string.
    pub fn sync_object(&mut self, key: &[u8]) -> bool {
        let mine = self.pending.as_ref().is_some_and(|p| self.blob(p.slot).key == key);
        if self.flush() && mine {
            return true;
        }
        let (_, si, Some(pos)) = self.find(key) else { return false };
        let i = match self.blob(self.segs[si].slots[pos]).body() {
            Body::Obj(i) => i,
            Body::Hash([], _) => {
                self.delete(si, pos);
                return true;
            }
            Body::Str(_) | Body::Hash(..) => return false,
        };
        if self.obj(i).is_empty() {
            self.delete(si, pos);
            return true;
        }
        self.reindex(i, key);
        false
    }

    /// Number of hashes with at least one field TTL (INFO's subexpiry).
    pub fn field_expiry_len(&self) -> usize {
        self.fexp.len() + self.inline_ttl
    }

    /// Active field expiry: removes up to `max` due fields (deadline before
    /// `now`) from the hashes at the front of the field-expiry index,
    /// calling `on_field(key, field)` for each, deletes hashes left empty
    /// and re-registers the others by their new earliest deadline.
    /// Returns (fields removed, keys deleted).
    pub fn active_expire_fields(&mut self, now: i64, max: usize, mut on_field: impl FnMut(&[u8], &[u8])) -> (usize, usize) {
        self.flush();
        let (mut fields, mut keys) = (0, 0);
        while fields < max {
            // The earlier of the two fronts: a segment of inline hashes or
            // one hash in the object table.
            let seg_front = self.fexp_segs.first().copied().filter(|&(t, _)| t < now);
            let obj_front = self.fexp.first_key_value().filter(|(&(t, _), _)| t < now);
            let (i, key) = match (seg_front, obj_front) {
                (None, None) => break,
                (Some((ts, si)), o) if o.is_none_or(|(&(to, _), _)| ts <= to) => {
                    let (n, k) = self.expire_segment_fields(si as usize, now, max - fields, &mut on_field);
                    fields += n;
                    keys += k;
                    continue;
                }
                (_, Some((&(_, i), key))) => (i, key.clone()),
                (Some(_), None) => unreachable!("taken by the arm above"),
            };
            let Some(Obj::Hash(h)) = self.objs[i as usize].as_mut() else { unreachable!("only hashes have field deadlines") };
            let n = h.expire_due_with(now, max - fields, |f| on_field(&key, f));
            fields += n;
            if self.sync_object(&key) {
                keys += 1;
            } else if n == 0 {
                // Nothing was due after all (cannot happen while the index
                // is in step); re-index and stop rather than spin.
                break;
            }
        }
        (fields, keys)
    }

    /// Active field expiry over the inline hashes of segment `si`: removes
    /// up to `max` due fields, then re-registers the segment by the
    /// earliest field deadline left in it. Returns (fields, keys deleted).
    fn expire_segment_fields(&mut self, si: usize, now: i64, max: usize, on_field: &mut impl FnMut(&[u8], &[u8])) -> (usize, usize) {
        let seg = &mut self.segs[si];
        self.fexp_segs.remove(&(seg.field_min, si as u32));
        seg.field_min = i64::MAX;
        let (mut fields, mut keys) = (0, 0);
        for pos in 0..self.segs[si].slots.len() {
            let s = self.segs[si].slots[pos];
            if s == 0 {
                continue;
            }
            let Some(t) = inline_min(self.blob(s).body()) else { continue };
            if t >= now || fields >= max {
                self.note_field_deadline(si, t);
                continue;
            }
            let b = self.blob(s);
            let Body::Hash(e, ex) = b.body() else { unreachable!("inline_min is only Some for a hash") };
            let (key, mut hash) = (b.key.to_vec(), Hash::from_inline(e, ex));
            fields += hash.expire_due_with(now, max - fields, |f| on_field(&key, f));
            self.pending = Some(Pending { si, pos, slot: s, hash, dirty: true });
            keys += usize::from(self.flush());
        }
        (fields, keys)
    }

    /// True if `key` is live.
    pub fn contains(&mut self, key: &[u8], now: i64) -> bool {
        self.live(key, now).is_some()
    }

    /// Deadline of a live key: None if absent, Some(None) if it has none.
    pub fn expire_of(&mut self, key: &[u8], now: i64) -> Option<Option<i64>> {
        let (si, pos) = self.live(key, now)?;
        Some(self.blob(self.segs[si].slots[pos]).deadline)
    }

    /// Sets or replaces `key`. Returns true if a live key was replaced.
    pub fn insert(&mut self, key: &[u8], value: Value, ttl: Ttl, now: i64) -> bool {
        self.flush();
        let (h, si, pos) = self.find(key);
        let mut old = None;
        if let Some(pos) = pos {
            let s = self.segs[si].slots[pos];
            let d = self.blob(s).deadline;
            if matches!(d, Some(t) if t <= now) {
                self.delete(si, pos);
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
            // Free first so that a same-class blob reuses the same bytes.
            let s = self.segs[si].take(pos);
            if let Body::Obj(i) = self.blob(s).body() {
                self.take_obj(i);
            }
            self.free_blob(s);
            let addr = self.store(si, key, value, deadline);
            self.len -= 1;
            self.volatile -= usize::from(s & TTL_BIT != 0);
            // Re-insert into the same slot: its bucket has room now.
            let ns = make_slot(tag_of(s), deadline.is_some(), now / 1000, addr);
            self.segs[si].slots[pos] = ns;
            self.segs[si].len += 1;
            self.segs[si].volatile += u32::from(deadline.is_some());
        } else {
            let addr = self.store(si, key, value, deadline);
            let tag = tag_at(h, self.segs[si].depth as u32);
            if let Some(t) = deadline {
                self.note_deadline(si, t);
            }
            self.insert_slot(si, make_slot(tag, deadline.is_some(), now / 1000, addr));
        }
        if let Some(t) = deadline {
            if old.is_some() {
                self.note_deadline(si, t);
            }
        }
        self.len += 1;
        self.volatile += usize::from(deadline.is_some());
        if old.is_none() {
            self.log(LOG_NEW, KeyEvent::New, key);
        }
        old.is_some()
    }

    /// Puts a new slot into segment `si`, growing or splitting it when full.
    fn insert_slot(&mut self, si: usize, s: u64) {
        if let Err(held) = self.segs[si].insert(s) {
            let seg = &mut self.segs[si];
            if !seg.at_max() || seg.depth as u32 >= MAX_DEPTH {
                seg.grow(held);
            } else {
                self.split(si, held);
            }
        }
    }

    /// Splits segment `si` into two of one more bit of depth; `extra` is a
    /// slot that did not fit. Keys are re-hashed here (and only here) to read
    /// the next bit and their new tags.
    fn split(&mut self, si: usize, extra: u64) {
        let d = self.segs[si].depth as u32;
        if d == self.depth {
            self.dir = self.dir.iter().flat_map(|&x| [x, x]).collect();
            self.depth += 1;
        }
        let old = std::mem::replace(&mut self.segs[si], Segment::with_room(0, 0));
        let items: Vec<u64> = old.slots.iter().copied().filter(|&s| s != 0).chain([extra]).collect();
        let mut kids = [Segment::with_room(d as u8 + 1, items.len() / 2), Segment::with_room(d as u8 + 1, items.len() / 2)];
        for s in items {
            let h = hash(Blob::key_of(self.slab.bytes(addr_of(s))));
            let kid = &mut kids[((h << d) >> 63) as usize];
            let ns = (s & !((1 << TAG_BITS) - 1)) | tag_at(h, d + 1);
            if let Err(held) = kid.insert(ns) {
                kid.grow(held);
            }
        }
        let [mut left, mut right] = kids;
        left.min_deadline = old.min_deadline;
        right.min_deadline = old.min_deadline;
        left.field_min = old.field_min;
        right.field_min = old.field_min;
        left.shape = old.shape.wrapping_add(1);
        self.segs[si] = left;
        let ri = self.segs.len() as u32;
        right.shape = 0;
        self.segs.push(right);
        if old.field_min != i64::MAX {
            self.fexp_segs.insert((old.field_min, ri));
        }
        let start = self.dir.iter().position(|&x| x as usize == si).expect("segment in directory");
        let span = 1usize << (self.depth - d);
        for x in &mut self.dir[start + span / 2..start + span] {
            *x = ri;
        }
    }

    /// Rewrites the blob at (si, pos) with a new deadline.
    fn rewrite_deadline(&mut self, si: usize, pos: usize, deadline: Option<i64>) {
        let s = self.segs[si].slots[pos];
        let copy = self.slab.bytes(addr_of(s)).to_vec();
        let b = Blob::parse(&copy);
        self.free_blob(s);
        let addr = self.store_blob(si, b.key, b.body(), deadline);
        let had = s & TTL_BIT != 0;
        let ns = make_slot(tag_of(s), deadline.is_some(), clock_of(s), addr);
        let seg = &mut self.segs[si];
        seg.slots[pos] = ns;
        match (had, deadline.is_some()) {
            (false, true) => {
                seg.volatile += 1;
                self.volatile += 1;
            }
            (true, false) => {
                seg.volatile -= 1;
                self.volatile -= 1;
            }
            _ => {}
        }
        if let Some(t) = deadline {
            self.note_deadline(si, t);
        }
    }

    /// INCRBY on the string at `key`: adds `by` to its integer value (an
    /// absent key counts as 0 and is created without a deadline; an existing
    /// deadline is kept). The integer is rewritten in place when it still
    /// fits its blob, so a counter update costs one lookup.
    ///
    /// Errors: `IncrError::WrongType` for a collection, `NotInt` for a
    /// string that is not an integer, `Overflow` when the sum overflows.
    pub fn incr_by(&mut self, key: &[u8], by: i64, now: i64) -> Result<i64, IncrError> {
        let Some((si, pos)) = self.live(key, now) else {
            self.insert(key, Value::Int(by), Ttl::Clear, now);
            return Ok(by);
        };
        let s = self.segs[si].slots[pos];
        let cur = match self.blob(s).body() {
            Body::Obj(_) | Body::Hash(..) => return Err(IncrError::WrongType),
            Body::Str(StrRef::Int(v)) => v,
            Body::Str(StrRef::Bytes(b)) => parse_canonical_i64(b).ok_or(IncrError::NotInt)?,
        };
        let v = cur.checked_add(by).ok_or(IncrError::Overflow)?;
        if !blob::rewrite_int(self.slab.bytes_mut(addr_of(s)), v) {
            self.insert(key, Value::Int(v), Ttl::Keep, now);
        }
        Ok(v)
    }

    /// Sets the deadline of a live key (None removes it). Returns false if absent.
    pub fn set_expire(&mut self, key: &[u8], expire: Option<i64>, now: i64) -> bool {
        let Some((si, pos)) = self.live(key, now) else { return false };
        self.rewrite_deadline(si, pos, expire);
        true
    }

    /// Removes a live key, returning its value.
    pub fn remove(&mut self, key: &[u8], now: i64) -> Option<Value> {
        let (si, pos) = self.live(key, now)?;
        let s = self.segs[si].slots[pos];
        let v = match self.blob(s).body() {
            Body::Str(v) => ValueRef::Str(v).to_owned(),
            Body::Hash(e, ex) => Value::Hash(Box::new(Hash::from_inline(e, ex))),
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

    /// Number of keys lazy expiry deleted (on access) since the last call;
    /// resets the count. Active expiry is counted by its own return value.
    pub fn take_lazy_expired(&mut self) -> u64 {
        std::mem::take(&mut self.lazy_expired)
    }

    /// Records `event` for `key` if `bit` of `log_events` asks for it.
    #[inline]
    fn log(&mut self, bit: u8, event: KeyEvent, key: &[u8]) {
        if self.log_events & bit != 0 {
            self.events.push((event, key.into()));
        }
    }

    /// True if key events wait in the log.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The key events recorded since the last call, oldest first (see
    /// `log_events`); empties the log.
    pub fn take_events(&mut self) -> Vec<(KeyEvent, Box<[u8]>)> {
        std::mem::take(&mut self.events)
    }

    /// Removes every key. Settings (`no_touch`, `keep_expired`,
    /// `log_events`) stay; recorded events are dropped.
    pub fn clear(&mut self) {
        self.pending = None;
        let (no_touch, keep_expired, log_events) = (self.no_touch, self.keep_expired, self.log_events);
        *self = Db::default();
        self.no_touch = no_touch;
        self.keep_expired = keep_expired;
        self.log_events = log_events;
    }

    /// Calls `f(key, value, deadline)` for every stored key, live or not yet reclaimed.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<i64>)) {
        for seg in &self.segs {
            for &s in seg.slots.iter().filter(|&&s| s != 0) {
                let b = self.blob(s);
                self.with_value(s, |v| f(b.key, v, b.deadline));
            }
        }
    }

    /// One SCAN step from `cursor` (0 starts), visiting about `count` keys with
    /// `f(key, value, deadline)` (more when several share a hash position).
    /// Returns the next cursor, 0 when done.
    /// Every key present for the whole scan is visited at least once.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<i64>)) -> u64 {
        let count = count.max(1);
        let mut c = cursor;
        let mut n = 0;
        let mut items: Vec<u64> = Vec::new();
        loop {
            let seg = &self.segs[self.seg_of(c)];
            let d = seg.depth as u32;
            let prefix = if d == 0 { 0 } else { c >> (64 - d) };
            let from = tag_at(c, d);
            items.clear();
            items.extend(seg.slots.iter().copied().filter(|&s| s != 0 && tag_of(s) >= from));
            let mut emit = |s: u64| {
                let b = self.blob(s);
                self.with_value(s, |v| f(b.key, v, b.deadline));
            };
            let want = count - n;
            if items.len() > want {
                items.select_nth_unstable_by_key(want - 1, |&s| tag_of(s));
                let last = tag_of(items[want - 1]);
                for &s in items.iter().filter(|&&s| tag_of(s) <= last) {
                    emit(s);
                }
                if last + 1 < 1 << TAG_BITS {
                    let base = if d == 0 { 0 } else { prefix << (64 - d) };
                    return base | ((last + 1) << (64 - TAG_BITS - d));
                }
                n = count;
            } else {
                items.iter().for_each(|&s| emit(s));
                n += items.len();
            }
            // This segment is done: move to the next prefix.
            if d == 0 || prefix + 1 == 1 << d {
                return 0;
            }
            c = (prefix + 1) << (64 - d);
            if n >= count {
                return c;
            }
        }
    }

    /// A random stored key (possibly expired but not yet reclaimed), using `r` as randomness.
    pub fn random_key(&self, r: u64) -> Option<&[u8]> {
        if self.len == 0 {
            return None;
        }
        let mut r = r;
        for _ in 0..64 {
            r = r.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(0x1405_7B7E_F767_814F);
            let x = r ^ (r >> 29);
            let seg = &self.segs[self.dir[(x % self.dir.len() as u64) as usize] as usize];
            if seg.len == 0 {
                continue;
            }
            let n = seg.slots.len();
            let start = ((x >> 32) % n as u64) as usize;
            let s = (0..n).map(|i| seg.slots[(start + i) % n]).find(|&s| s != 0)?;
            return Some(self.blob(s).key);
        }
        let s = self.segs.iter().flat_map(|g| g.slots.iter()).copied().find(|&s| s != 0)?;
        Some(self.blob(s).key)
    }

    /// Bytes this key costs: its blob's slab class plus its share of the
    /// segment's slot array (the array's bytes divided by the keys in it,
    /// rounded up); for a collection also its object-table slot and the
    /// collection's own heap bytes.
    pub fn mem_usage(&mut self, key: &[u8], now: i64) -> Option<usize> {
        let (si, pos) = self.live(key, now)?;
        let seg = &self.segs[si];
        let s = seg.slots[pos];
        let obj = match self.blob(s).body() {
            Body::Obj(i) => size_of::<Option<Obj>>() + self.obj(i).mem_usage(),
            Body::Str(_) | Body::Hash(..) => 0,
        };
        Some(self.slab.cost(addr_of(s)) + seg.allocated_bytes().div_ceil(seg.len as usize) + obj)
    }

    /// Active expiry: examines at most `budget` keys that have a deadline,
    /// from where the last call stopped, skipping segments with nothing due,
    /// and deletes the due ones, calling `on_expired` for each.
    /// Returns (examined, expired).
    pub fn active_expire(&mut self, now: i64, budget: usize, mut on_expired: impl FnMut(&[u8])) -> (usize, usize) {
        self.flush();
        let (mut examined, mut expired) = (0, 0);
        let mut skipped = 0;
        while self.volatile > 0 && examined < budget && skipped <= self.segs.len() {
            if self.hand.seg >= self.segs.len() {
                self.hand = Hand { seg: 0, pos: 0, shape: 0, min: i64::MAX };
            }
            let si = self.hand.seg;
            if self.hand.pos == 0 || self.hand.shape != self.segs[si].shape {
                self.hand = Hand { seg: si, pos: 0, shape: self.segs[si].shape, min: i64::MAX };
            }
            let seg = &self.segs[si];
            if seg.volatile == 0 || seg.min_deadline > now {
                self.hand = Hand { seg: si + 1, pos: 0, shape: 0, min: i64::MAX };
                skipped += 1;
                continue;
            }
            while self.hand.pos < self.segs[si].slots.len() && examined < budget {
                let pos = self.hand.pos;
                self.hand.pos += 1;
                let s = self.segs[si].slots[pos];
                if s & TTL_BIT == 0 {
                    continue;
                }
                examined += 1;
                let b = self.blob(s);
                match b.deadline {
                    Some(t) if t <= now => {
                        on_expired(b.key);
                        self.delete(si, pos);
                        expired += 1;
                    }
                    Some(t) => self.hand.min = self.hand.min.min(t),
                    None => {}
                }
            }
            if self.hand.pos >= self.segs[si].slots.len() {
                self.segs[si].min_deadline = self.hand.min;
                self.hand = Hand { seg: si + 1, pos: 0, shape: 0, min: i64::MAX };
                skipped += 1;
            }
        }
        (examined, expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incr_by_in_place_and_across_classes() {
        let mut db = Db::new();
        assert_eq!(db.incr_by(b"c", 5, 0), Ok(5));
        db.set_expire(b"c", Some(1_000), 0);
        for _ in 0..300 {
            db.incr_by(b"c", 1, 0).unwrap();
        }
        assert_eq!(db.get(b"c", 0), Some(ValueRef::Str(StrRef::Int(305))));
        // Growing past the blob's class falls back to a new blob, deadline kept.
        assert_eq!(db.incr_by(b"c", i64::MAX - 305, 0), Ok(i64::MAX));
        assert_eq!(db.expire_of(b"c", 0), Some(Some(1_000)));
        assert_eq!(db.incr_by(b"c", 1, 0), Err(IncrError::Overflow));
        assert_eq!(db.incr_by(b"c", i64::MIN, 0), Ok(-1));
        db.insert(b"s", Value::string(b"abc"), Ttl::Clear, 0);
        assert_eq!(db.incr_by(b"s", 1, 0), Err(IncrError::NotInt));
        assert_eq!(db.len(), 2);
    }
    use crate::strref::StrRef;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashMap};

    #[test]
    fn key_events_are_logged_only_when_asked() {
        let mut db = Db::new();
        db.insert(b"a", Value::Int(1), Ttl::At(100), 0);
        assert!(!db.has_events());
        db.log_events = LOG_EXPIRED | LOG_NEW;
        db.insert(b"b", Value::Int(1), Ttl::At(100), 0);
        db.insert(b"b", Value::Int(2), Ttl::Keep, 0); // replaced: not new
        assert!(db.get(b"a", 100).is_none());
        db.insert(b"b", Value::Int(3), Ttl::Clear, 200); // expired, then new
        let names: Vec<(KeyEvent, &[u8])> = vec![(KeyEvent::New, b"b"), (KeyEvent::Expired, b"a"), (KeyEvent::Expired, b"b"), (KeyEvent::New, b"b")];
        let got = db.take_events();
        assert_eq!(got.iter().map(|(e, k)| (*e, &k[..])).collect::<Vec<_>>(), names);
        assert_eq!(db.take_lazy_expired(), 2);
        db.clear();
        assert_eq!(db.log_events, LOG_EXPIRED | LOG_NEW);
        assert!(!db.has_events());
    }

    #[test]
    fn lazy_expiry_and_ttl_modes() {
        let mut db = Db::new();
        db.insert(b"a", Value::Int(1), Ttl::At(100), 0);
        assert_eq!(db.volatile_len(), 1);
        db.insert(b"a", Value::Int(2), Ttl::Keep, 0);
        assert_eq!(db.expire_of(b"a", 0), Some(Some(100)));
        assert!(db.get(b"a", 100).is_none());
        assert_eq!(db.len(), 0);
        assert_eq!(db.take_lazy_expired(), 1);
        assert_eq!(db.take_lazy_expired(), 0);
        assert_eq!(db.volatile_len(), 0);
    }

    #[test]
    fn scan_survives_deletes() {
        let mut db = Db::new();
        for i in 0..100 {
            db.insert(format!("k{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = db.scan(cursor, 7, |k, _, _| {
                seen.insert(k.to_vec());
            });
            round += 1;
            if round == 3 {
                for i in 0..10 {
                    db.remove(format!("k{i}").as_bytes(), 0);
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 10..100 {
            assert!(seen.contains(format!("k{i}").as_bytes()));
        }
    }

    #[test]
    fn active_expire_reclaims() {
        let mut db = Db::new();
        for i in 0..1000 {
            db.insert(format!("k{i}").as_bytes(), Value::Int(i), if i % 2 == 0 { Ttl::At(10) } else { Ttl::Clear }, 0);
        }
        let mut n = 0;
        while db.volatile_len() > 0 {
            n += db.active_expire(20, 100, |_| {}).1;
        }
        assert_eq!(n, 500);
        assert_eq!(db.len(), 500);
    }

    #[test]
    fn mass_delete_and_expiry_give_slab_pages_back() {
        use crate::slab::PAGE;
        // The table's slot arrays do not shrink; everything else must.
        let table = |db: &Db| {
            db.segs.iter().map(Segment::allocated_bytes).sum::<usize>()
                + jemalloc_size(db.segs.capacity() * size_of::<Segment>())
                + jemalloc_size(db.dir.capacity() * 4)
        };
        let mut db = Db::new();
        let empty = db.allocated_bytes() - table(&db);
        let n = 200_000u64;
        let key = |i: u64| format!("key:{i}").into_bytes();
        for i in 0..n {
            // Values of 20..60 bytes spread the blobs over six slab classes;
            // one key in four expires instead of being deleted.
            let ttl = if i.is_multiple_of(4) { Ttl::At(100) } else { Ttl::Clear };
            db.insert(&key(i), Value::Bytes(vec![b'v'; 20 + (i % 40) as usize]), ttl, 0);
        }
        let loaded = db.allocated_bytes() - table(&db);
        assert!(loaded > empty + 100 * PAGE, "loaded {loaded}");
        // Delete in an order unrelated to insertion (7919 is prime to n).
        for j in 0..n {
            let i = j * 7919 % n;
            if !i.is_multiple_of(4) {
                assert!(db.remove(&key(i), 0).is_some());
            }
        }
        while db.volatile_len() > 0 {
            db.active_expire(200, 1000, |_| {});
        }
        assert!(db.is_empty());
        let after = db.allocated_bytes() - table(&db);
        eprintln!("slab and objects: empty {empty}, loaded {loaded}, after deleting all {after}");
        assert!(after <= empty + 3 * PAGE, "after {after}, empty {empty}");
        assert!(db.slab.allocated_bytes() <= 2 * PAGE + 16 * 1024);
    }

    fn session_key(i: u64) -> Vec<u8> {
        let h = hash(&i.to_le_bytes()) as u128 * 0x1_0000_0001 + i as u128;
        format!("session:{:040x}", h).into_bytes()
    }

    #[test]
    fn splits_keep_every_key() {
        let mut db = Db::new();
        for i in 0..50_000i64 {
            db.insert(format!("k{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        assert!(db.segs.len() > 16, "table split");
        assert_eq!(db.len(), 50_000);
        for i in 0..50_000i64 {
            assert_eq!(db.get(format!("k{i}").as_bytes(), 0), Some(ValueRef::Str(StrRef::Int(i))));
        }
        // The directory is consistent: each segment owns a contiguous,
        // aligned span matching its depth.
        let mut i = 0;
        while i < db.dir.len() {
            let seg = &db.segs[db.dir[i] as usize];
            let span = 1usize << (db.depth - seg.depth as u32);
            assert_eq!(i % span, 0);
            assert!(db.dir[i..i + span].iter().all(|&x| x == db.dir[i]));
            i += span;
        }
        let total: u32 = db.segs.iter().map(|s| s.len).sum();
        assert_eq!(total as usize, db.len());
    }

    #[test]
    fn scan_sees_stable_keys_while_table_changes() {
        let mut db = Db::new();
        for i in 0..5_000i64 {
            db.insert(format!("stable{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        for i in 0..5_000i64 {
            db.insert(format!("churn{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        let mut seen = std::collections::HashSet::new();
        let (mut cursor, mut round, mut next) = (0, 0i64, 5_000i64);
        loop {
            let mut got = 0;
            cursor = db.scan(cursor, 10, |k, _, _| {
                seen.insert(k.to_vec());
                got += 1;
            });
            assert!(got <= 40, "count honoured roughly: {got}");
            round += 1;
            // Insert many new keys (forcing growth and splits) and delete some.
            for _ in 0..30 {
                db.insert(format!("churn{next}").as_bytes(), Value::Int(next), Ttl::Clear, 0);
                next += 1;
            }
            db.remove(format!("churn{}", round * 3).as_bytes(), 0);
            if cursor == 0 {
                break;
            }
        }
        assert!(db.segs.len() > 8);
        for i in 0..5_000i64 {
            assert!(seen.contains(format!("stable{i}").as_bytes()), "stable{i} missed");
        }
    }

    #[test]
    fn full_scan_returns_each_key_once_when_quiet() {
        let mut db = Db::new();
        for i in 0..20_000i64 {
            db.insert(format!("k{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        let mut seen = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = db.scan(cursor, 100, |k, _, _| seen.push(k.to_vec()));
            if cursor == 0 {
                break;
            }
        }
        seen.sort();
        let n = seen.len();
        seen.dedup();
        assert_eq!(n, 20_000);
        assert_eq!(seen.len(), 20_000);
    }

    #[test]
    fn mass_expiry_is_incremental() {
        let mut db = Db::new();
        for i in 0..300_000u64 {
            let ttl = if i % 3 == 0 { Ttl::At(1_000) } else { Ttl::Clear };
            db.insert(format!("key:{i}").as_bytes(), Value::Int(i as i64), ttl, 0);
        }
        let (mut calls, mut walked) = (0, 0);
        while db.volatile_len() > 0 {
            let (examined, _) = db.active_expire(2_000, 256, |_| {});
            assert!(examined <= 256);
            calls += 1;
            walked += examined;
        }
        assert_eq!(db.len(), 200_000);
        assert!(calls < 2_000, "{calls} calls");
        // The work is about one look at each volatile key, not a rescan per
        // batch (a bound on work rather than on time, which a loaded machine
        // skews).
        assert!(walked <= 2 * 100_000, "{walked} keys examined");
        // Nothing due: returns at once.
        assert_eq!(db.active_expire(3_000, 256, |_| {}), (0, 0));
    }

    #[test]
    fn idle_mem_usage_random() {
        let mut db = Db::new();
        db.insert(b"a", Value::Bytes(vec![1; 46]), Ttl::Clear, 10_000);
        db.no_touch = true;
        db.get(b"a", 15_000);
        assert_eq!(db.idle_secs(b"a", 17_000), Some(7));
        db.no_touch = false;
        db.get(b"a", 15_000);
        assert_eq!(db.idle_secs(b"a", 17_000), Some(2));
        let m = db.mem_usage(b"a", 17_000).unwrap();
        assert_eq!(m, 56 + 64); // blob class 56, one key alone in a 1-bucket segment
        assert_eq!(db.random_key(12345), Some(&b"a"[..]));
        db.set_expire(b"a", Some(20_000), 17_000);
        assert_eq!(db.expire_of(b"a", 17_000), Some(Some(20_000)));
        assert_eq!(db.mem_usage(b"a", 17_000), Some(64 + 64));
        for i in 0..1000 {
            db.insert(format!("r{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        let keys: std::collections::HashSet<Vec<u8>> = (0..200u64).map(|r| db.random_key(r).unwrap().to_vec()).collect();
        assert!(keys.len() > 100);
    }

    fn per_key(n: u64, mut f: impl FnMut(&mut Db, u64)) -> f64 {
        let mut db = Db::new();
        let base = db.allocated_bytes();
        for i in 0..n {
            f(&mut db, i);
        }
        (db.allocated_bytes() - base) as f64 / n as f64
    }

    #[test]
    fn bytes_per_key_budget() {
        let a = per_key(200_000, |db, i| {
            db.insert(&session_key(i), Value::Bytes(vec![b'v'; 46]), Ttl::At(1 << 42), 0);
        });
        let b = per_key(200_000, |db, i| {
            db.insert(format!("key:{i}").as_bytes(), Value::Int(i as i64), Ttl::Clear, 0);
        });
        eprintln!("bytes per key: sessions {a:.2}, small ints {b:.2}");
        assert!(a < 115.0, "sessions: {a}");
        assert!(b < 34.0, "small ints: {b}");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, Option<i64>, bool, i64),
        Remove(u8),
        Get(u8),
        SetExpire(u8, Option<i64>),
        Expire(usize),
        Tick(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<u8>(), proptest::option::of(0i64..200), any::<bool>(), -1000i64..1000).prop_map(|(k, t, keep, v)| Op::Insert(k, t, keep, v)),
            2 => any::<u8>().prop_map(Op::Remove),
            2 => any::<u8>().prop_map(Op::Get),
            1 => (any::<u8>(), proptest::option::of(0i64..200)).prop_map(|(k, t)| Op::SetExpire(k, t)),
            1 => (1usize..50).prop_map(Op::Expire),
            1 => (0i64..20).prop_map(Op::Tick),
        ]
    }

    fn pkey(k: u8) -> Vec<u8> {
        // Some long keys to exercise large blobs and varint lengths.
        if k.is_multiple_of(17) { vec![k; 300] } else { format!("key{k}").into_bytes() }
    }

    proptest! {
        #[test]
        fn matches_model(ops in proptest::collection::vec(op(), 1..600)) {
            let mut db = Db::new();
            let mut model: HashMap<Vec<u8>, (Value, Option<i64>)> = HashMap::new();
            let mut now = 0i64;
            for op in ops {
                model.retain(|_, (_, d)| !matches!(d, Some(t) if *t <= now));
                match op {
                    Op::Insert(k, t, keep, v) => {
                        let key = pkey(k);
                        let value = if v % 3 == 0 { Value::Bytes(vec![v as u8; (v.unsigned_abs() % 300) as usize]) } else { Value::Int(v * 1_000_003) };
                        let ttl = match (t, keep) { (Some(t), _) => Ttl::At(now + t), (None, true) => Ttl::Keep, (None, false) => Ttl::Clear };
                        let old = model.get(&key).map(|e| e.1);
                        let d = match ttl { Ttl::At(t) => Some(t), Ttl::Keep => old.flatten(), Ttl::Clear => None };
                        prop_assert_eq!(db.insert(&key, value.clone(), ttl, now), old.is_some());
                        model.insert(key, (value, d));
                    }
                    Op::Remove(k) => {
                        let key = pkey(k);
                        prop_assert_eq!(db.remove(&key, now), model.remove(&key).map(|e| e.0));
                    }
                    Op::Get(k) => {
                        let key = pkey(k);
                        let want = model.get(&key).map(|e| e.0.as_ref());
                        prop_assert_eq!(db.get(&key, now), want);
                        prop_assert_eq!(db.expire_of(&key, now), model.get(&key).map(|e| e.1));
                    }
                    Op::SetExpire(k, t) => {
                        let key = pkey(k);
                        let d = t.map(|t| now + t);
                        prop_assert_eq!(db.set_expire(&key, d, now), model.contains_key(&key));
                        if let Some(e) = model.get_mut(&key) { e.1 = d; }
                    }
                    Op::Expire(n) => {
                        let mut gone = Vec::new();
                        db.active_expire(now, n, |k| gone.push(k.to_vec()));
                        for k in gone {
                            prop_assert!(!model.contains_key(&k), "expired a live key");
                        }
                    }
                    Op::Tick(dt) => now += dt,
                }
                prop_assert_eq!(db.volatile_len(), {
                    let mut n = 0; db.for_each(|_, _, d| n += usize::from(d.is_some())); n
                });
            }
            let mut stored = HashMap::new();
            db.for_each(|k, v, d| { stored.insert(k.to_vec(), (v.to_owned(), d)); });
            prop_assert_eq!(stored.len(), db.len());
            for (k, e) in &model {
                prop_assert_eq!(stored.get(k), Some(e));
            }
            for (k, (_, d)) in &stored {
                prop_assert!(model.contains_key(k) || matches!(d, Some(t) if *t <= now));
            }
        }
    }

    fn hash_of(fields: &[(&str, Option<i64>)]) -> Hash {
        hash_with(fields, b"v")
    }

    /// A hash with a value longer than hash-max-listpack-value, which
    /// Redis calls hashtable: kept in the object table, never inline.
    fn big_hash_of(fields: &[(&str, Option<i64>)]) -> Hash {
        hash_with(fields, &[b'v'; 70])
    }

    fn hash_with(fields: &[(&str, Option<i64>)], value: &[u8]) -> Hash {
        let mut h = Hash::new();
        let cfg = crate::types::hash::HashConfig::default();
        for (f, d) in fields {
            h.insert(f.as_bytes(), value, &cfg);
            if let Some(d) = d {
                h.set_expire(f.as_bytes(), *d, crate::types::hash::ExpireCond::Always, 0);
            }
        }
        h
    }

    fn hash_mut<'a>(db: &'a mut Db, key: &[u8], now: i64) -> &'a mut Hash {
        match db.get_or_insert_with(key, now, || Value::Hash(Box::default())) {
            ValueMut::Hash(h) => h,
            _ => panic!("not a hash"),
        }
    }

    #[test]
    fn zsets_live_in_the_object_table() {
        use crate::types::zset::{ZSet, ZsetConfig};
        let cfg = ZsetConfig::default();
        let mut db = Db::default();
        let mut z = ZSet::new();
        z.insert(b"a", 1.0, &cfg);
        db.insert(b"z", Value::ZSet(Box::new(z.clone())), Ttl::Clear, 0);
        assert_eq!(db.get(b"z", 0), Some(ValueRef::ZSet(&z)));
        assert!(db.mem_usage(b"z", 0).unwrap() > z.mem_usage());
        let Some(ValueMut::ZSet(zm)) = db.get_mut(b"z", 0) else { panic!("not a zset") };
        zm.remove(b"a");
        assert!(db.sync_object(b"z"));
        assert!(!db.contains(b"z", 0));
        assert_eq!(db.objs.iter().flatten().count(), 0);
    }

    #[test]
    fn lists_and_sets_live_in_the_object_table() {
        use crate::types::list::{End, List, ListConfig};
        use crate::types::set::{Set, SetConfig};
        let mut db = Db::default();
        let mut l = List::new();
        l.push(End::Tail, &[b"a", b"b"], &ListConfig::default());
        let mut s = Set::new();
        s.insert(b"7", &SetConfig::default());
        db.insert(b"l", Value::List(Box::new(l.clone())), Ttl::Clear, 0);
        db.insert(b"s", Value::Set(Box::new(s.clone())), Ttl::At(1_000), 0);
        db.insert(b"h", Value::Hash(Box::new(big_hash_of(&[("f", Some(500))]))), Ttl::Clear, 0);
        assert_eq!(db.get(b"l", 0), Some(ValueRef::List(&l)));
        assert_eq!(db.get(b"s", 0).map(|v| v.kind().name()), Some("set"));
        // Only the hash is in the field-expiry index; a boxed type's box is counted.
        assert_eq!(db.field_expiry_len(), 1);
        assert!(db.mem_usage(b"s", 0).unwrap() >= 24 + 32 + s.mem_usage());
        // A list emptied in place is deleted by sync_object; its slot is reused.
        let Some(ValueMut::List(lm)) = db.get_mut(b"l", 0) else { panic!("not a list") };
        lm.pop(End::Head, &ListConfig::default());
        lm.pop(End::Head, &ListConfig::default());
        assert!(db.sync_object(b"l"));
        assert!(!db.contains(b"l", 0));
        assert_eq!(db.objs.iter().flatten().count(), 2);
        let v = db.remove(b"s", 0).unwrap();
        assert_eq!(v, Value::Set(Box::new(s)));
        db.insert(b"s2", v, Ttl::Clear, 0);
        assert_eq!(db.objs.len(), 3);
        assert_eq!(db.active_expire_fields(1_000, 100, |_, _| {}), (1, 1));
        assert!(!db.contains(b"h", 1_000));
        assert_eq!(db.objs.iter().flatten().count(), 1);
    }

    #[test]
    fn hash_values_round_trip() {
        for big in [false, true] {
            hash_round_trip(if big { big_hash_of } else { hash_of }, big);
        }
    }

    type MakeHash = fn(&[(&str, Option<i64>)]) -> Hash;

    fn hash_round_trip(make: MakeHash, big: bool) {
        let mut db = Db::new();
        let h = make(&[("a", None), ("b", Some(500))]);
        db.insert(b"h", Value::Hash(Box::new(h.clone())), Ttl::Clear, 0);
        db.insert(b"s", Value::Int(1), Ttl::Clear, 0);
        assert_eq!(db.get(b"h", 0).map(|v| v.kind().name()), Some("hash"));
        assert_eq!(db.get(b"h", 0), Some(ValueRef::Hash(&h)));
        assert_eq!(db.field_expiry_len(), 1);
        let cost = db.mem_usage(b"h", 0).unwrap();
        if big {
            assert_eq!(cost, 16 + 64 / 2 + 24 + h.mem_usage());
        } else {
            // Inline: "h" and two entries (4 and 10 bytes) in one 24-byte blob.
            assert_eq!(cost, 24 + 64 / 2);
        }
        let objs = usize::from(big);
        // Renaming is remove + insert: the object moves, the index follows.
        let v = db.remove(b"h", 0).unwrap();
        assert_eq!(v, Value::Hash(Box::new(h.clone())));
        assert_eq!(db.field_expiry_len(), 0);
        db.insert(b"h2", v, Ttl::At(1_000), 0);
        assert_eq!(db.field_expiry_len(), 1);
        // Overwriting with a string frees the object slot and its index entry.
        db.insert(b"h2", Value::Int(5), Ttl::Keep, 0);
        assert_eq!(db.field_expiry_len(), 0);
        assert_eq!(db.objs.iter().flatten().count(), 0);
        // The freed slot is reused.
        db.insert(b"h3", Value::Hash(Box::new(h)), Ttl::At(1_000), 0);
        assert_eq!(db.objs.len(), objs);
        db.set_expire(b"h3", None, 0);
        assert!(matches!(db.get(b"h3", 0), Some(ValueRef::Hash(_))));
        // Key expiry drops the hash and its index entry.
        db.set_expire(b"h3", Some(10), 0);
        assert!(db.get(b"h3", 10).is_none());
        assert_eq!(db.field_expiry_len(), 0);
        let mut seen = Vec::new();
        db.for_each(|k, v, _| seen.push((k.to_vec(), v.kind())));
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(seen, vec![(b"h2".to_vec(), crate::value::Kind::Str), (b"s".to_vec(), crate::value::Kind::Str)]);
    }

    #[test]
    fn in_place_edits_and_sync() {
        for value in [&b"1"[..], &[b'x'; 70]] {
            let inline = value.len() == 1;
            let mut db = Db::new();
            let cfg = crate::types::hash::HashConfig::default();
            hash_mut(&mut db, b"h", 0).insert(b"f", value, &cfg);
            assert!(!db.sync_object(b"h"));
            assert_eq!(db.field_expiry_len(), 0);
            assert_eq!(db.objs.len(), usize::from(!inline));
            let index = |db: &Db| -> Vec<i64> {
                if inline { db.fexp_segs.iter().map(|e| e.0).collect() } else { db.fexp.keys().map(|e| e.0).collect() }
            };
            hash_mut(&mut db, b"h", 0).set_expire(b"f", 100, crate::types::hash::ExpireCond::Always, 0);
            db.sync_object(b"h");
            assert_eq!(index(&db), vec![100]);
            hash_mut(&mut db, b"h", 0).set_expire(b"f", 50, crate::types::hash::ExpireCond::Lt, 0);
            db.sync_object(b"h");
            assert_eq!(index(&db), vec![50]);
            assert_eq!(db.field_expiry_len(), 1);
            hash_mut(&mut db, b"h", 0).remove(b"f");
            assert!(db.sync_object(b"h"), "empty hash is deleted");
            assert_eq!((db.len(), db.field_expiry_len()), (0, 0));
            assert!(!db.sync_object(b"missing"));
        }
    }

    #[test]
    fn inline_hash_grows_into_the_object_table() {
        let mut db = Db::new();
        let cfg = crate::types::hash::HashConfig::default();
        // An edit left lent out is written back by the next call.
        hash_mut(&mut db, b"h", 0).insert(b"f0", b"v", &cfg);
        assert_eq!(db.len(), 1);
        let mut i = 0;
        while db.objs.is_empty() {
            i += 1;
            hash_mut(&mut db, b"h", 0).insert(format!("f{i}").as_bytes(), b"v", &cfg);
            db.sync_object(b"h");
        }
        // f0..f9 are 5-byte entries, f10.. 6: 50 + 13 * 6 = 128 bytes is the
        // largest inline hash (INLINE_MAX_BYTES), one more field moves it out.
        assert_eq!((i, crate::types::hash::INLINE_MAX_BYTES), (23, 128));
        let Some(ValueRef::Hash(h)) = db.get(b"h", 0) else { panic!("not a hash") };
        assert_eq!((h.len(), h.encoding_name()), (i + 1, "listpack"));
        // TYPE-level checks and a string overwrite free everything.
        assert_eq!(db.incr_by(b"h", 1, 0), Err(IncrError::WrongType));
        db.insert(b"h", Value::Int(1), Ttl::Clear, 0);
        assert_eq!(db.objs.iter().flatten().count(), 0);
        // OBJECT ENCODING's listpackex survives in the blob.
        hash_mut(&mut db, b"e", 0).insert(b"f", b"v", &cfg);
        hash_mut(&mut db, b"e", 0).set_expire(b"g", 5, crate::types::hash::ExpireCond::Always, 0);
        db.sync_object(b"e");
        let Some(ValueRef::Hash(h)) = db.get(b"e", 0) else { panic!("not a hash") };
        assert_eq!(h.encoding_name(), "listpackex");
        assert!(db.objs.iter().flatten().count() == 0);
    }

    #[test]
    fn active_field_expiry_is_bounded_and_deletes_empty_hashes() {
        let mut db = Db::new();
        let cfg = crate::types::hash::HashConfig::default();
        let h = hash_mut(&mut db, b"big", 0);
        for i in 0..100_000 {
            let f = format!("f{i}");
            h.insert(f.as_bytes(), b"1", &cfg);
            h.set_expire(f.as_bytes(), 1_000 + (i % 3), crate::types::hash::ExpireCond::Always, 0);
        }
        db.sync_object(b"big");
        db.insert(b"small", Value::Hash(Box::new(hash_of(&[("x", Some(5_000)), ("y", None)]))), Ttl::Clear, 0);
        assert_eq!(db.field_expiry_len(), 2);
        // Nothing is due at the deadline itself (fields expire after it).
        assert_eq!(db.active_expire_fields(1_000, 10, |_, _| {}), (0, 0));
        let mut got = 0;
        let mut calls = 0;
        loop {
            let (n, k) = db.active_expire_fields(2_000, 1_000, |key, _| assert_eq!(key, b"big"));
            assert!(n <= 1_000);
            got += n;
            calls += 1;
            if k == 1 {
                break;
            }
        }
        assert_eq!((got, calls), (100_000, 100));
        assert!(db.get(b"big", 2_000).is_none());
        assert_eq!(db.len(), 1);
        // The small hash loses only its TTL field and stays.
        assert_eq!(db.active_expire_fields(6_000, 1_000, |_, _| {}), (1, 0));
        assert_eq!(db.field_expiry_len(), 0);
        let Some(ValueRef::Hash(h)) = db.get(b"small", 6_000) else { panic!() };
        assert_eq!(h.len(), 1);
    }

    /// The field-expiry index holds exactly the live hashes with a field
    /// TTL, each under its earliest deadline and its own key.
    /// Inline hashes are covered by their segment's entry, at a bound no
    /// later than any of their field deadlines.
    fn check_index(db: &Db) {
        let mut want = std::collections::BTreeMap::new();
        db.for_each(|k, v, _| {
            if let ValueRef::Hash(h) = v {
                if let Some(t) = h.min_deadline() {
                    want.insert(k.to_vec(), t);
                }
            }
        });
        let mut got: std::collections::BTreeMap<Vec<u8>, i64> = db.fexp.iter().map(|(&(t, _), k)| (k.to_vec(), t)).collect();
        let mut inline = 0;
        for (si, seg) in db.segs.iter().enumerate() {
            assert_eq!(db.fexp_segs.contains(&(seg.field_min, si as u32)), seg.field_min != i64::MAX);
            for &s in seg.slots.iter().filter(|&&s| s != 0) {
                if let Some(t) = inline_min(db.blob(s).body()) {
                    assert!(seg.field_min <= t, "segment {si} registered after a field deadline");
                    got.insert(db.blob(s).key.to_vec(), t);
                    inline += 1;
                }
            }
        }
        assert_eq!(got, want);
        assert_eq!(db.fexp_segs.len(), db.segs.iter().filter(|g| g.field_min != i64::MAX).count());
        assert_eq!(db.field_expiry_len(), want.len());
        assert_eq!(db.inline_ttl, inline);
        assert_eq!(db.fexp.len(), db.fexp_at.len());
        assert_eq!(db.objs.iter().flatten().count() + db.free_objs.len(), db.objs.len());
    }

    proptest! {
        #[test]
        fn field_index_stays_in_step(ops in proptest::collection::vec((0u8..6, 0u8..4, 0u8..8, 0i64..50), 1..300)) {
            let mut db = Db::new();
            let cfg = crate::types::hash::HashConfig { small_max_entries: 4, ..Default::default() };
            let mut now = 0;
            for (op, k, f, t) in ops {
                let key = [b'h', b'0' + k];
                let field = [b'f', b'0' + f];
                match op {
                    0 => {
                        if !matches!(db.get(&key, now), Some(ValueRef::Str(_))) {
                            let ValueMut::Hash(h) = db.get_or_insert_with(&key, now, || Value::Hash(Box::default())) else { unreachable!() };
                            // Field 7 gets a long value: such a hash lives in the object table.
                            h.insert(&field, if f == 7 { &[b'v'; 70] } else { b"v" }, &cfg);
                            h.set_expire(&field, now + t, crate::types::hash::ExpireCond::Always, now);
                            db.sync_object(&key);
                        }
                    }
                    1 => {
                        if let Some(ValueMut::Hash(h)) = db.get_mut(&key, now) {
                            h.remove(&field);
                            db.sync_object(&key);
                        }
                    }
                    2 => {
                        if let Some(v) = db.remove(&key, now) {
                            db.insert(&[b'h', b'0' + (k + 1) % 4], v, Ttl::Keep, now);
                        }
                    }
                    3 => { db.insert(&key, Value::Int(t), Ttl::Clear, now); }
                    4 => { db.active_expire_fields(now, 1 + t as usize % 5, |_, _| {}); }
                    _ => {
                        now += t;
                        if t % 7 == 0 {
                            db.set_expire(&key, Some(now + 3), now);
                        }
                    }
                }
                check_index(&db);
            }
            while db.active_expire_fields(now + 100, 3, |_, _| {}).0 > 0 {}
            db.for_each(|_, v, _| {
                if let ValueRef::Hash(h) = v {
                    assert!(h.min_deadline().is_none_or(|d| d >= now + 100));
                }
            });
            check_index(&db);
        }
    }

    /// 1M one-field hashes (seed 004, 200,000 here): the inline form costs
    /// one blob and a slot share; a field TTL adds 6 bytes to the blob and
    /// no index entry of its own (one per segment).
    #[test]
    fn one_field_hash_budget() {
        use crate::types::hash::{ExpireCond, HashConfig};
        let cfg = HashConfig::default();
        let mut one = Hash::new();
        one.insert(b"name", b"1", &cfg);
        let plain = per_key(200_000, |db, i| {
            db.insert(format!("h{i:010}").as_bytes(), Value::Hash(Box::new(one.clone())), Ttl::Clear, 0);
        });
        let mut segs = (0, 0);
        let ttl = per_key(200_000, |db, i| {
            let key = format!("h{i:010}");
            hash_mut(db, key.as_bytes(), 0).insert(b"name", b"1", &cfg);
            hash_mut(db, key.as_bytes(), 0).set_expire(b"name", 3_600_000 + i as i64, ExpireCond::Always, 0);
            db.sync_object(key.as_bytes());
            segs = (db.fexp_segs.len(), db.segs.len());
        });
        eprintln!("one-field hashes: {plain:.2} B/key, {ttl:.2} with a field TTL");
        assert!(plain <= 48.0, "{plain}");
        assert!(ttl <= 64.0, "{ttl}");
        assert!(segs.0 <= segs.1, "{segs:?}");
    }

    #[derive(Debug, Clone)]
    enum HOp {
        Set(u8, u8, bool),
        Del(u8, u8),
        Expire(u8, u8, i64),
        Persist(u8, u8),
        Read(u8, u8),
        Rename(u8),
        KeyTtl(u8, i64),
        Active(usize),
        Tick(i64),
    }

    fn hop() -> impl Strategy<Value = HOp> {
        let (k, f) = (0u8..4, 0u8..8);
        prop_oneof![
            5 => (k.clone(), f.clone(), any::<bool>()).prop_map(|(k, f, long)| HOp::Set(k, f, long)),
            2 => (k.clone(), f.clone()).prop_map(|(k, f)| HOp::Del(k, f)),
            4 => (k.clone(), f.clone(), 0i64..40).prop_map(|(k, f, t)| HOp::Expire(k, f, t)),
            1 => (k.clone(), f.clone()).prop_map(|(k, f)| HOp::Persist(k, f)),
            3 => (k.clone(), f).prop_map(|(k, f)| HOp::Read(k, f)),
            1 => k.clone().prop_map(HOp::Rename),
            1 => (k, 1i64..60).prop_map(|(k, t)| HOp::KeyTtl(k, t)),
            2 => (1usize..6).prop_map(HOp::Active),
            3 => (0i64..15).prop_map(HOp::Tick),
        ]
    }

    /// Model: key -> (field -> (value, field deadline), key deadline).
    type HModel = BTreeMap<Vec<u8>, (BTreeMap<Vec<u8>, (Vec<u8>, Option<i64>)>, Option<i64>)>;

    proptest! {
        /// Small hashes (inline, and promoted when a long value pushes
        /// them past the inline bound) against a map model with field and
        /// key TTLs, lazy and active field expiry, renames.
        #[test]
        fn inline_hashes_match_model(ops in proptest::collection::vec(hop(), 1..250)) {
            use crate::types::hash::{ExpireCond, HashConfig};
            let cfg = HashConfig::default();
            let mut db = Db::new();
            let mut model = HModel::new();
            let mut now = 1_000i64;
            let key = |k: u8| format!("hash:{k}").into_bytes();
            let field = |f: u8| format!("field{f}").into_bytes();
            for op in ops {
                model.retain(|_, (_, d)| !matches!(d, Some(t) if *t <= now));
                match op {
                    HOp::Set(k, f, long) => {
                        let v = if long { vec![b'x'; 30] } else { vec![b'0' + f] };
                        hash_mut(&mut db, &key(k), now).insert(&field(f), &v, &cfg);
                        db.sync_object(&key(k));
                        model.entry(key(k)).or_default().0.insert(field(f), (v, None));
                    }
                    HOp::Del(k, f) => {
                        let want = model.get_mut(&key(k)).is_some_and(|e| e.0.remove(&field(f)).is_some());
                        let got = match db.get_mut(&key(k), now) {
                            Some(ValueMut::Hash(h)) => h.remove(&field(f)),
                            _ => false,
                        };
                        prop_assert_eq!(got, want);
                        db.sync_object(&key(k));
                    }
                    HOp::Expire(k, f, t) => {
                        let e = model.get_mut(&key(k)).and_then(|e| e.0.get_mut(&field(f)));
                        let live = e.as_ref().is_some_and(|x| x.1.is_none_or(|d| d >= now));
                        let want = if !live { -2 } else if t == 0 { 2 } else { 1 };
                        let got = match db.get_mut(&key(k), now) {
                            Some(ValueMut::Hash(h)) => h.set_expire(&field(f), now + t, ExpireCond::Always, now),
                            _ => -2,
                        };
                        prop_assert_eq!(got, want);
                        match want {
                            1 => e.expect("live").1 = Some(now + t),
                            2 => { model.get_mut(&key(k)).expect("live").0.remove(&field(f)); }
                            _ => {}
                        }
                        db.sync_object(&key(k));
                    }
                    HOp::Persist(k, f) => {
                        let e = model.get_mut(&key(k)).and_then(|e| e.0.get_mut(&field(f))).filter(|x| x.1.is_none_or(|d| d >= now));
                        let want = match &e { None => -2, Some(x) if x.1.is_none() => -1, Some(_) => 1 };
                        if let Some(x) = e { x.1 = None; }
                        let got = match db.get_mut(&key(k), now) {
                            Some(ValueMut::Hash(h)) => h.persist(&field(f), now),
                            _ => -2,
                        };
                        prop_assert_eq!(got, want);
                        db.sync_object(&key(k));
                    }
                    HOp::Read(k, f) => {
                        let want: Option<Vec<(Vec<u8>, Vec<u8>)>> = model.get(&key(k)).map(|e| {
                            e.0.iter().filter(|(_, x)| x.1.is_none_or(|d| d >= now)).map(|(f, x)| (f.clone(), x.0.clone())).collect()
                        });
                        let want_ttl = model.get(&key(k)).and_then(|e| e.0.get(&field(f))).filter(|x| x.1.is_none_or(|d| d >= now)).map(|x| x.1);
                        let stored = model.get(&key(k)).map(|e| e.0.len());
                        match db.get(&key(k), now) {
                            Some(ValueRef::Hash(h)) => {
                                let mut got: Vec<(Vec<u8>, Vec<u8>)> = h.iter(now).map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                                got.sort();
                                prop_assert_eq!(Some(got), want);
                                prop_assert_eq!(h.expire_of(&field(f), now), want_ttl);
                                prop_assert_eq!(Some(h.len()), stored);
                            }
                            other => prop_assert!(other.is_none() && want.is_none(), "{:?}", other),
                        }
                    }
                    HOp::Rename(k) => {
                        let (from, to) = (key(k), key((k + 1) % 4));
                        let d = db.expire_of(&from, now).flatten();
                        if let Some(v) = db.remove(&from, now) {
                            db.insert(&to, v, d.map_or(Ttl::Clear, Ttl::At), now);
                            let e = model.remove(&from).expect("model has it");
                            prop_assert_eq!(e.1, d);
                            model.insert(to, e);
                        }
                    }
                    HOp::KeyTtl(k, t) => {
                        let got = db.set_expire(&key(k), Some(now + t), now);
                        prop_assert_eq!(got, model.contains_key(&key(k)));
                        if let Some(e) = model.get_mut(&key(k)) { e.1 = Some(now + t); }
                    }
                    HOp::Active(max) => {
                        let mut gone = Vec::new();
                        let (n, _) = db.active_expire_fields(now, max, |k, f| gone.push((k.to_vec(), f.to_vec())));
                        prop_assert!(n <= max);
                        prop_assert_eq!(n, gone.len());
                        for (k, f) in gone {
                            // A key past its own deadline, not yet reclaimed, may lose fields too.
                            let Some(e) = model.get_mut(&k) else { continue };
                            let x = e.0.remove(&f).expect("expired a missing field");
                            prop_assert!(matches!(x.1, Some(d) if d < now), "expired a live field");
                        }
                    }
                    HOp::Tick(dt) => now += dt,
                }
                model.retain(|_, e| !e.0.is_empty() && !matches!(e.1, Some(t) if t <= now));
                check_index(&db);
                // Expired keys stay counted until reclaimed, so compare
                // presence (which reclaims) only some of the time.
                if now & 1 == 0 {
                    for k in 0..4 {
                        prop_assert_eq!(db.contains(&key(k), now), model.contains_key(&key(k)));
                    }
                }
            }
            // Active expiry alone reclaims every due field.
            now += 100;
            model.retain(|_, (_, d)| !matches!(d, Some(t) if *t <= now));
            while db.active_expire_fields(now, 3, |_, _| {}).0 > 0 {}
            for (k, (fields, _)) in &model {
                let live = fields.values().filter(|x| x.1.is_none_or(|d| d >= now)).count();
                match db.get(k, now) {
                    Some(ValueRef::Hash(h)) => prop_assert_eq!(h.len(), live),
                    other => prop_assert!(other.is_none() && live == 0, "{:?}", other),
                }
            }
            check_index(&db);
        }
    }

    const _: () = assert!(size_of::<Hand>() == 32);
}
