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
mod tests;
