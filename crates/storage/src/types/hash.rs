//! `Hash`: the value of a Redis HASH, with per-field expiration (HEXPIRE).
//!
//! Two shapes, one entry format (`encoding::fieldpack`):
//!
//! ```text
//! Small:  Vec<u8> = [flags u8][count u16 LE][entry][entry]...   linear scan
//! Large:  Box<Table<true>>  (encoding::fieldtable: linear hashing over
//!                      fieldpack buckets, per-bucket min deadline tree)
//! ```
//!
//! The keyspace may also keep a small hash's entries inline in its key's
//! blob (`inline_encode` / `from_inline`); that form is the keyspace's, and
//! it lends such a hash out as an ordinary small `Hash`.
//!
//! A hash starts small and becomes large once it holds more than
//! `small_max_entries` fields or `small_max_bytes` bytes (`maybe_convert`,
//! the one place that converts). The small buffer moves into the table as
//! its first bucket, so conversion copies nothing and costs no memory
//! spike; the table never converts back (as Redis never does).
//!
//! What OBJECT ENCODING says is tracked apart from the shape: Redis's answer
//! depends on `hash-max-listpack-entries`/`-value` and on history (a Redis
//! hash that once became a hashtable, or got a field TTL, stays so), so two
//! sticky flags record what Redis would have done and `encoding_name` maps
//! them: "hashtable" once a size threshold was crossed, else "listpackex"
//! once HEXPIRE-family commands touched the hash, else "listpack". Our own
//! thresholds are chosen by measurement (docs/design/hash.md), not by those.
//!
//! Expiry: all reads take `now` (Unix ms) and hide fields whose deadline is
//! before it; they stay stored (and counted by `len`, like Redis's HLEN)
//! until `expire_due`, `remove`, `insert` or `set_expire` reclaims them.
//!
//! Memory (`mem_usage`): heap bytes this hash owns, each block rounded to
//! jemalloc's size class; the `size_of::<Hash>()` bytes where the owner
//! embeds it are the owner's to count.

use crate::encoding::fieldpack::{self, Entry, Fields, MAX_DEADLINE};
use crate::encoding::fieldtable::Table;
use crate::encoding::{alloc_size, inline, reserve_class};
use crate::strref::StrRef;

/// Redis would report "hashtable" (a size threshold was crossed once).
const F_HASHTABLE: u8 = 1;
/// Redis would report "listpackex" (a field TTL was set once).
const F_LISTPACK_EX: u8 = 2;
/// Small header: flags, then the field count as u16 LE.
const HDR: usize = 3;

/// Most entry bytes a hash may have to be stored inline in its key's blob
/// (`inline_encode`; see `encoding::inline::MAX_BYTES`).
pub const INLINE_MAX_BYTES: usize = inline::MAX_BYTES;

/// Bytes of the shortest sign-extended little-endian form of `x` (1..=8).
fn int_bytes(x: i64) -> usize {
    (1..8).find(|&n| (x << (64 - 8 * n)) >> (64 - 8 * n) == x).unwrap_or(8)
}

/// Thresholds steering encodings. The first two are Redis's config
/// parameters and only decide what `encoding_name` answers; the rest are
/// ours, tuned by measurement (tests shrink them to exercise conversion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashConfig {
    /// `hash-max-listpack-entries` (default 128).
    pub max_listpack_entries: usize,
    /// `hash-max-listpack-value` (default 64).
    pub max_listpack_value: usize,
    /// Most fields the small shape holds (at most 65535; default 512, where
    /// one buffer is never in a bigger size class than Redis's listpack).
    pub small_max_entries: usize,
    /// Most bytes the small shape's buffer holds.
    pub small_max_bytes: usize,
    /// Average fields per bucket of the large shape before it splits one.
    pub bucket_entries: usize,
}

impl Default for HashConfig {
    fn default() -> Self {
        HashConfig {
            max_listpack_entries: 128,
            max_listpack_value: 64,
            small_max_entries: 512,
            small_max_bytes: 16 * 1024,
            bucket_entries: 24,
        }
    }
}

/// The condition of HEXPIRE and friends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireCond {
    /// Always set.
    Always,
    /// Only if the field has no TTL.
    Nx,
    /// Only if the field has a TTL.
    Xx,
    /// Only if the new deadline is later (no TTL counts as infinite).
    Gt,
    /// Only if the new deadline is earlier (no TTL counts as infinite).
    Lt,
}

impl ExpireCond {
    /// One member's HEXPIRE-family step, given its current deadline
    /// (`None`: no such member; `Some(None)`: no TTL): `Err(code)` is the
    /// reply with nothing to change (-2 absent or already past its
    /// deadline, 0 condition not met), `Ok(true)` removes it (reply 2,
    /// the time is now or past), `Ok(false)` sets the deadline (reply 1).
    pub fn step(self, current: Option<Option<i64>>, deadline: i64, now: i64) -> Result<bool, i64> {
        let old = match current {
            None => return Err(-2),
            Some(Some(d)) if d < now => return Err(-2),
            Some(d) => d,
        };
        if !self.met(old, deadline) {
            return Err(0);
        }
        Ok(deadline <= now)
    }

    /// Whether `deadline` may replace `old` (None: no TTL) under this
    /// condition.
    pub fn met(self, old: Option<i64>, deadline: i64) -> bool {
        match (old, self) {
            (_, ExpireCond::Always) => true,
            (None, c) => matches!(c, ExpireCond::Nx | ExpireCond::Lt),
            (Some(_), ExpireCond::Nx) => false,
            (Some(_), ExpireCond::Xx) => true,
            (Some(o), ExpireCond::Gt) => deadline > o,
            (Some(o), ExpireCond::Lt) => deadline < o,
        }
    }
}

#[derive(Debug, Clone)]
enum Repr {
    Small(Vec<u8>),
    Large(Box<Table<true>>),
}

/// A hash value: fields to values, each field with an optional deadline.
#[derive(Debug, Clone)]
pub struct Hash {
    repr: Repr,
}

/// Equal when both hold the same fields with the same values and deadlines
/// (expired fields not yet removed included), whatever the shapes.
impl PartialEq for Hash {
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len()
            && self.iter(i64::MIN).all(|(f, v)| {
                other.get(f, i64::MIN) == Some(v) && other.expire_of(f, i64::MIN) == self.expire_of(f, i64::MIN)
            })
    }
}

impl Eq for Hash {}

impl Default for Hash {
    fn default() -> Self {
        Hash::new()
    }
}

impl Hash {
    /// An empty hash (small shape, one 8-byte block).
    pub fn new() -> Hash {
        let mut buf = Vec::new();
        reserve_class(&mut buf, HDR);
        buf.extend_from_slice(&[0; HDR]);
        Hash { repr: Repr::Small(buf) }
    }

    /// Number of fields, including expired fields not yet removed (as HLEN).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(b) => u16::from_le_bytes([b[1], b[2]]) as usize,
            Repr::Large(t) => t.len(),
        }
    }

    /// True if no field is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entry(&self, field: &[u8]) -> Option<Entry<'_>> {
        match &self.repr {
            Repr::Small(b) => Fields::find(b, HDR, field),
            Repr::Large(t) => t.get(field),
        }
    }

    fn live_entry(&self, field: &[u8], now: i64) -> Option<Entry<'_>> {
        self.entry(field).filter(|e| e.live(now))
    }

    /// The value of `field` unless absent or expired at `now`.
    pub fn get(&self, field: &[u8], now: i64) -> Option<StrRef<'_>> {
        self.live_entry(field, now).map(|e| e.value)
    }

    /// True if `field` is present and not expired at `now`.
    pub fn contains(&self, field: &[u8], now: i64) -> bool {
        self.live_entry(field, now).is_some()
    }

    /// Sets `field` to `value` and drops its TTL (as HSET does). Returns
    /// true if the field count grew (an expired field not yet removed is
    /// overwritten and counts as existing, keeping `len` consistent).
    pub fn insert(&mut self, field: &[u8], value: &[u8], cfg: &HashConfig) -> bool {
        let v = fieldpack::classify(value);
        let new = match &mut self.repr {
            Repr::Small(b) => {
                let new = Fields::upsert(b, HDR, field, v).is_none();
                if new {
                    let n = u16::from_le_bytes([b[1], b[2]]) + 1;
                    b[1..3].copy_from_slice(&n.to_le_bytes());
                }
                new
            }
            Repr::Large(t) => t.insert(field, v).is_none(),
        };
        if field.len() > cfg.max_listpack_value || value.len() > cfg.max_listpack_value {
            self.set_flag(F_HASHTABLE);
        }
        self.maybe_convert(cfg);
        new
    }

    /// Removes `field`, expired or not; true if it was stored.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Small(b) => {
                let gone = Fields::remove(b, HDR, field).is_some();
                if gone {
                    let n = u16::from_le_bytes([b[1], b[2]]) - 1;
                    b[1..3].copy_from_slice(&n.to_le_bytes());
                }
                gone
            }
            Repr::Large(t) => t.remove(field).is_some(),
        }
    }

    /// The live fields and values at `now`.
    pub fn iter(&self, now: i64) -> Iter<'_> {
        match &self.repr {
            Repr::Small(b) => Iter { cur: Fields::iter(b, HDR), rest: [].iter(), now },
            Repr::Large(t) => Iter { cur: Fields::iter(&[], 0), rest: t.buckets().iter(), now },
        }
    }

    /// A random live field and its value (for HRANDFIELD), `rng` supplying
    /// random u64s; `None` if no field is live.
    pub fn random_field(&self, now: i64, rng: &mut impl FnMut() -> u64) -> Option<(&[u8], StrRef<'_>)> {
        let n = self.len();
        for _ in 0..16 {
            let e = match &self.repr {
                Repr::Small(b) if n > 0 => Fields::iter(b, HDR).nth((rng() % n as u64) as usize),
                Repr::Small(_) => None,
                Repr::Large(t) => t.random(rng),
            }?;
            if e.live(now) {
                return Some((e.field, e.value));
            }
        }
        // Mostly expired: fall back to the first live field.
        self.iter(now).next()
    }

    /// One SCAN step: calls `f` with live fields from `cursor` on until at
    /// least `count` were visited; returns the next cursor (0: done). A
    /// small hash is returned whole in one step, as Redis does for a
    /// listpack. A field present for the whole scan is returned at least
    /// once, across growth and conversion (details in `fieldtable`).
    pub fn scan(&self, cursor: u64, count: usize, now: i64, mut f: impl FnMut(&[u8], StrRef)) -> u64 {
        match &self.repr {
            Repr::Small(b) => {
                Fields::iter(b, HDR).filter(|e| e.live(now)).for_each(|e| f(e.field, e.value));
                0
            }
            Repr::Large(t) => t.scan(cursor, count, |e| {
                if e.live(now) {
                    f(e.field, e.value)
                }
            }),
        }
    }

    /// HEXPIRE-family update of one field. Returns Redis's reply code: -2 no
    /// such (live) field, 0 condition not met, 1 deadline set, 2 field
    /// deleted because `deadline <= now`.
    ///
    /// Panics: if `deadline > MAX_DEADLINE` (2^48-1 ms); callers reject
    /// such times with Redis's error first.
    pub fn set_expire(&mut self, field: &[u8], deadline: i64, cond: ExpireCond, now: i64) -> i64 {
        assert!(deadline <= MAX_DEADLINE, "field deadline out of range: {deadline}");
        // Redis turns a listpack into listpackex as soon as the command runs.
        self.set_flag(F_LISTPACK_EX);
        let Some(e) = self.live_entry(field, now) else {
            return -2;
        };
        if !cond.met(e.deadline, deadline) {
            return 0;
        }
        if deadline <= now {
            self.remove(field);
            return 2;
        }
        self.set_deadline(field, Some(deadline));
        1
    }

    fn set_deadline(&mut self, field: &[u8], deadline: Option<i64>) {
        match &mut self.repr {
            Repr::Small(b) => {
                let start = Fields::find(b, HDR, field).expect("field checked by caller").start;
                Fields::set_deadline(b, start, deadline);
            }
            Repr::Large(t) => {
                t.set_deadline(field, deadline);
            }
        }
    }

    /// HPERSIST of one field: -2 no such (live) field, -1 it has no TTL,
    /// 1 TTL removed.
    pub fn persist(&mut self, field: &[u8], now: i64) -> i64 {
        match self.live_entry(field, now) {
            None => -2,
            Some(e) if e.deadline.is_none() => -1,
            Some(_) => {
                self.set_deadline(field, None);
                1
            }
        }
    }

    /// `None`: no such live field; `Some(None)`: no TTL; `Some(Some(d))`:
    /// deadline `d` in Unix ms.
    pub fn expire_of(&self, field: &[u8], now: i64) -> Option<Option<i64>> {
        self.live_entry(field, now).map(|e| e.deadline)
    }

    /// The earliest deadline of any stored field (expired ones included),
    /// by which the keyspace indexes this hash. O(1) when large, a scan of
    /// the buffer when small.
    pub fn min_deadline(&self) -> Option<i64> {
        match &self.repr {
            Repr::Small(b) => Fields::min_deadline(b, HDR),
            Repr::Large(t) => t.min_deadline(),
        }
    }

    /// Removes up to `max` fields expired at `now`; returns how many.
    pub fn expire_due(&mut self, now: i64, max: usize) -> usize {
        self.expire_due_with(now, max, |_| {})
    }

    /// `expire_due`, calling `f` with each removed field (for HDEL
    /// propagation and keyspace notifications).
    pub fn expire_due_with(&mut self, now: i64, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        match &mut self.repr {
            Repr::Small(b) => {
                let gone = Fields::retain_live(b, HDR, now, max, &mut f);
                let n = u16::from_le_bytes([b[1], b[2]]) - gone as u16;
                b[1..3].copy_from_slice(&n.to_le_bytes());
                gone
            }
            Repr::Large(t) => t.expire_due(now, max, f),
        }
    }

    /// Heap bytes owned by this hash, each block rounded to jemalloc's
    /// size class (the exact figure MEMORY USAGE adds to its key's cost).
    pub fn mem_usage(&self) -> usize {
        match &self.repr {
            Repr::Small(b) => alloc_size(b.capacity()),
            Repr::Large(t) => t.mem_usage(),
        }
    }

    /// Appends the hash as the keyspace keeps it inline in a key's blob
    /// (`encoding::inline`): the header byte, then its fieldpack entries,
    /// without their header bytes when every field has one length and no
    /// TTL. Returns false, appending nothing, when it does not qualify: the
    /// large shape, a hash Redis would call hashtable, or more than
    /// `INLINE_MAX_BYTES` of entries.
    pub fn inline_encode(&self, out: &mut Vec<u8>) -> bool {
        let Repr::Small(b) = &self.repr else { return false };
        if b[0] & F_HASHTABLE != 0 || b.len() - HDR > INLINE_MAX_BYTES {
            return false;
        }
        let ex = if b[0] & F_LISTPACK_EX != 0 { inline::HASH_EX } else { 0 };
        match Fields::fixed_width(b, HDR, inline::MAX_WIDTH) {
            Some(w) if ex == 0 && w <= inline::MAX_INT_WIDTH && Self::int_width(b).is_some() => {
                let v = Self::int_width(b).expect("just checked");
                out.push(inline::int_header(w, v));
                for e in Fields::iter(b, HDR) {
                    let StrRef::Int(x) = e.value else { unreachable!("int_width checked every value") };
                    out.extend_from_slice(e.field);
                    out.extend_from_slice(&x.to_le_bytes()[..v]);
                }
            }
            Some(w) => {
                out.push(inline::header(ex, w));
                Fields::strip_headers(b, HDR, w, out);
            }
            None => {
                out.push(inline::header(ex, 0));
                out.extend_from_slice(&b[HDR..]);
            }
        }
        true
    }

    /// The value width of the inline form of integers (`encoding::inline`)
    /// for the small buffer `b`: the bytes that hold its widest integer,
    /// when every value is an integer and that form is shorter than the
    /// entries' own tagged values. None otherwise.
    fn int_width(b: &[u8]) -> Option<usize> {
        let (mut v, mut n, mut tagged) = (1, 0, 0);
        for e in Fields::iter(b, HDR) {
            let StrRef::Int(x) = e.value else { return None };
            v = v.max(int_bytes(x));
            n += 1;
            tagged += e.end - e.start - 1 - e.field.len();
        }
        (n > 0 && n * v < tagged).then_some(v)
    }

    /// Rebuilds a hash from `inline_encode`'s bytes (the small shape,
    /// buffer sized to its class).
    pub fn from_inline(bytes: &[u8]) -> Hash {
        let (hdr, body) = (bytes[0], &bytes[1..]);
        debug_assert!(!inline::is_zset(hdr), "a sorted set's inline bytes");
        let mut buf = Vec::new();
        let w = inline::width(hdr);
        if let Some(v) = inline::int_width(hdr) {
            assert_eq!(body.len() % (w + v), 0, "hash of integers: a cut entry");
            let int = |e: &[u8]| {
                let mut x = [0u8; 8];
                x[..v].copy_from_slice(&e[w..]);
                let shift = 64 - 8 * v as u32;
                (i64::from_le_bytes(x) << shift) >> shift
            };
            let entries = body.chunks_exact(w + v);
            let len: usize = entries.clone().map(|e| Fields::entry_len(&e[..w], StrRef::Int(int(e)), false)).sum();
            reserve_class(&mut buf, HDR + len);
            buf.push(0);
            buf.extend_from_slice(&(entries.len() as u16).to_le_bytes());
            for e in entries {
                Fields::push(&mut buf, &e[..w], StrRef::Int(int(e)), None);
            }
            return Hash { repr: Repr::Small(buf) };
        }
        let n = if w > 0 { Fields::stripped_count(body, w) } else { Fields::iter(body, 0).count() };
        reserve_class(&mut buf, HDR + body.len() + if w > 0 { n } else { 0 });
        buf.push(if hdr & inline::HASH_EX != 0 { F_LISTPACK_EX } else { 0 });
        buf.extend_from_slice(&(n as u16).to_le_bytes());
        if w > 0 {
            Fields::restore_headers(body, w, &mut buf);
        } else {
            buf.extend_from_slice(body);
        }
        Hash { repr: Repr::Small(buf) }
    }

    /// The earliest field deadline of an inline hash's bytes (fixed-width
    /// entries, integers' included, have none).
    pub fn inline_min_deadline(bytes: &[u8]) -> Option<i64> {
        if inline::width(bytes[0]) > 0 { None } else { Fields::min_deadline(&bytes[1..], 0) }
    }

    /// What Redis's OBJECT ENCODING would answer for this hash's history.
    pub fn encoding_name(&self) -> &'static str {
        let flags = self.flags();
        if flags & F_HASHTABLE != 0 {
            "hashtable"
        } else if flags & F_LISTPACK_EX != 0 {
            "listpackex"
        } else {
            "listpack"
        }
    }

    fn flags(&self) -> u8 {
        match &self.repr {
            Repr::Small(b) => b[0],
            Repr::Large(t) => t.flags,
        }
    }

    fn set_flag(&mut self, f: u8) {
        match &mut self.repr {
            Repr::Small(b) => b[0] |= f,
            Repr::Large(t) => t.flags |= f,
        }
    }

    /// The one place a hash changes shape or Redis-visible encoding: marks
    /// "hashtable" past Redis's entry threshold, and moves a small hash
    /// into a table past our own limits.
    pub fn maybe_convert(&mut self, cfg: &HashConfig) {
        if self.len() > cfg.max_listpack_entries {
            self.set_flag(F_HASHTABLE);
        }
        let Repr::Small(b) = &mut self.repr else { return };
        let n = u16::from_le_bytes([b[1], b[2]]) as usize;
        if n > cfg.small_max_entries.min(u16::MAX as usize - 1) || b.len() > cfg.small_max_bytes {
            let mut entries = std::mem::take(b);
            let flags = entries[0];
            entries.drain(..HDR);
            self.repr = Repr::Large(Box::new(Table::from_packed(entries, n, flags, cfg.bucket_entries)));
        }
    }
}

/// Live fields of a hash, see `Hash::iter`.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    cur: fieldpack::Iter<'a, true>,
    rest: std::slice::Iter<'a, Vec<u8>>,
    now: i64,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], StrRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.cur.next() {
                Some(e) if e.live(self.now) => return Some((e.field, e.value)),
                Some(_) => {}
                None => self.cur = Fields::iter(self.rest.next()?, 0),
            }
        }
    }
}

#[cfg(test)]
mod tests;
