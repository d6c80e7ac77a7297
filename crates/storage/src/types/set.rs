//! `Set`: the value of a Redis SET.
//!
//! Three shapes:
//!
//! ```text
//! Ints:   IntSet (encoding::intset: sorted 2/4/8-byte integers)
//! Small:  Vec<u8> = [flags u8][count u16 LE][entry][entry]...  linear scan
//! Large:  Box<Table<false>>  (encoding::fieldtable: linear hashing over
//!                      fieldpack buckets)
//! ```
//!
//! Small and Large hold members as `encoding::fieldpack` entries in the
//! `Members` layout (a header byte and the member, no value), so a set
//! shares the hash's compact table, its SCAN guarantee and its per-entry
//! TTL machinery: a 36-byte member costs 37 bytes plus its share of bucket
//! rounding, with no per-member pointer or allocation.
//!
//! The Ints shape exists exactly while Redis's set would be an intset
//! (every member a canonical integer, at most `set-max-intset-entries` of
//! them), so its iteration order (ascending) and OBJECT ENCODING match.
//! Past that the set moves to Small, and Small moves into a table past our
//! own limits (`small_max_entries`/`small_max_bytes`): the buffer becomes
//! the table's first bucket, so the byte cost per member is the same
//! before and after and there is no memory cliff. Neither move is undone,
//! except where Redis rebuilds a set (`maybe_to_intset`, for SINTERSTORE).
//!
//! OBJECT ENCODING: "intset" for the Ints shape; otherwise a sticky flag
//! records whether Redis would have converted its listpack to a hashtable
//! (entry count past `set-max-listpack-entries`, a member longer than
//! `set-max-listpack-value`, a size hint past it), answering "hashtable"
//! or "listpack" whatever our own shape is. All conversion decisions live
//! in this file (`insert`, `reserve_hint`, `maybe_to_intset`,
//! `fit_shape`).
//!
//! Member TTLs (a densekv extension, SEXPIRE family): a member's deadline
//! is the fieldpack entry's own 6-byte deadline, so a TTL costs 6 bytes on
//! the member that has one and nothing elsewhere; the large shape's
//! min-tree (8 bytes a bucket, allocated with the first TTL) gives the
//! set's earliest deadline in O(1). An intset holds no deadline, so the
//! first TTL moves it to the packed shapes (named "listpack" or
//! "hashtable" by the rule a string member joining it follows). Reads here
//! do not hide members past their deadline: the keyspace removes them
//! (`expire_due_with`) before any command sees the set, so every command
//! sees only live members without knowing about TTLs. Re-adding a member
//! drops its TTL, as HSET drops a field's.
//!
//! Memory (`mem_usage`): heap bytes this set owns, each block rounded to
//! jemalloc's size class; the `size_of::<Set>()` bytes where the owner
//! embeds it are the owner's to count.

use crate::encoding::alloc_size;
use crate::encoding::fieldpack::{self, Members};
use crate::encoding::fieldtable::{self, Table};
use crate::encoding::intset::IntSet;
use crate::strref::{parse_canonical_i64, StrRef};
use crate::types::hash::ExpireCond;

/// Redis would report "hashtable" rather than "listpack".
const F_HASHTABLE: u8 = 1;
/// A member of the small shape got a TTL once (so `min_deadline` scans the
/// buffer only for sets that may have one).
const F_TTL: u8 = 2;
/// Small header: flags, then the member count as u16 LE.
const HDR: usize = 3;
/// The value passed with every member: none (the `Members` layout stores
/// no value).
const NO_VALUE: StrRef<'static> = StrRef::Bytes(b"");

/// Thresholds steering encodings. The first three are Redis's config
/// parameters and decide what `encoding_name` answers (and when the Ints
/// shape ends); the rest are ours, tuned by measurement (tests shrink them
/// to exercise conversion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetConfig {
    /// `set-max-intset-entries` (default 512).
    pub max_intset_entries: usize,
    /// `set-max-listpack-entries` (default 128).
    pub max_listpack_entries: usize,
    /// `set-max-listpack-value` (default 64).
    pub max_listpack_value: usize,
    /// Most members the small shape holds (at most 65534).
    pub small_max_entries: usize,
    /// Most bytes the small shape's buffer holds.
    pub small_max_bytes: usize,
    /// Average members per bucket of the large shape before it splits one.
    pub bucket_entries: usize,
    /// Bytes per bucket of the large shape when its members all have one
    /// length (fixed-width buckets, `fieldtable`); 0: never that form.
    pub fixed_bucket_bytes: usize,
}

impl Default for SetConfig {
    fn default() -> Self {
        SetConfig {
            max_intset_entries: 512,
            max_listpack_entries: 128,
            max_listpack_value: 64,
            small_max_entries: 128,
            small_max_bytes: 4 * 1024,
            bucket_entries: 24,
            fixed_bucket_bytes: 1024,
        }
    }
}

impl SetConfig {
    /// Redis caps intsets at 2^30 entries whatever the configuration.
    fn intset_cap(&self) -> usize {
        self.max_intset_entries.min(1 << 30)
    }
}

#[derive(Debug, Clone)]
enum Repr {
    Ints(IntSet),
    Small(Vec<u8>),
    Large(Box<Table<false>>),
}

/// A set of byte-string members.
#[derive(Debug, Clone)]
pub struct Set {
    repr: Repr,
}

impl Default for Set {
    fn default() -> Self {
        Set::new()
    }
}

/// Equal when both hold the same members, whatever the shapes.
impl PartialEq for Set {
    fn eq(&self, other: &Set) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains_ref(m))
    }
}

impl Eq for Set {}

fn small_count(b: &[u8]) -> usize {
    u16::from_le_bytes([b[1], b[2]]) as usize
}

fn set_small_count(b: &mut [u8], n: usize) {
    b[1..3].copy_from_slice(&(n as u16).to_le_bytes());
}

fn new_small(flags: u8) -> Vec<u8> {
    let mut b = Vec::new();
    crate::encoding::reserve_class(&mut b, HDR);
    b.extend_from_slice(&[flags, 0, 0]);
    b
}

impl Set {
    /// An empty set that Redis would call an intset.
    pub fn new() -> Set {
        Set { repr: Repr::Ints(IntSet::new()) }
    }

    /// An empty set that Redis would call a listpack.
    pub fn new_listpack() -> Set {
        Set { repr: Repr::Small(new_small(0)) }
    }

    /// The set a command creates to hold `first` and about `hint` members
    /// in all (Redis's choice: intset if `first` is an integer and the hint
    /// fits, else listpack if it fits, else hashtable).
    pub fn with_hint(first: &[u8], hint: usize, cfg: &SetConfig) -> Set {
        if parse_canonical_i64(first).is_some() && hint <= cfg.intset_cap() {
            Set::new()
        } else if hint <= cfg.max_listpack_entries {
            Set::new_listpack()
        } else {
            Set { repr: Repr::Small(new_small(F_HASHTABLE)) }
        }
    }

    /// An empty set of the kind Redis starts from when it rebuilds this one
    /// (SPOP of most members): intset if this is one, else listpack.
    pub fn empty_like(&self) -> Set {
        match self.repr {
            Repr::Ints(_) => Set::new(),
            _ => Set::new_listpack(),
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.len(),
            Repr::Small(b) => small_count(b),
            Repr::Large(t) => t.len(),
        }
    }

    /// True if there is no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(s) => parse_canonical_i64(member).is_some_and(|v| s.contains(v)),
            Repr::Small(b) => Members::find(b, HDR, member).is_some(),
            Repr::Large(t) => t.get(member).is_some(),
        }
    }

    /// `contains` for a member as another set yields it.
    pub fn contains_ref(&self, member: StrRef) -> bool {
        match (member, &self.repr) {
            (StrRef::Int(v), Repr::Ints(s)) => s.contains(v),
            (StrRef::Int(v), _) => self.contains(v.to_string().as_bytes()),
            (StrRef::Bytes(b), _) => self.contains(b),
        }
    }

    /// Adds `member`; true if it was not there. A member already there
    /// loses its TTL, if it had one (as HSET drops a field's). May change
    /// the shape or the Redis-visible encoding (see the module header).
    pub fn insert(&mut self, member: &[u8], cfg: &SetConfig) -> bool {
        if let Repr::Ints(s) = &mut self.repr {
            if let Some(v) = parse_canonical_i64(member) {
                if !s.insert(v) {
                    return false;
                }
                if s.len() > cfg.intset_cap() {
                    self.ints_to_packed(F_HASHTABLE, cfg);
                }
                return true;
            }
            // A string joins: listpack if the intset is small and short
            // enough to become one, as Redis decides, else hashtable.
            let widest = s.bounds().map_or(0, |(lo, hi)| crate::strref::int_len(lo).max(crate::strref::int_len(hi)));
            let fits = s.len() < cfg.max_listpack_entries
                && member.len() <= cfg.max_listpack_value
                && widest <= cfg.max_listpack_value;
            self.ints_to_packed(if fits { 0 } else { F_HASHTABLE }, cfg);
        }
        let n = self.len();
        let added = match &mut self.repr {
            Repr::Ints(_) => unreachable!("converted above"),
            Repr::Small(b) => match Members::find(b, HDR, member).map(|e| (e.start, e.deadline)) {
                None => {
                    Members::push(b, member, NO_VALUE, None);
                    set_small_count(b, n + 1);
                    true
                }
                Some((start, Some(_))) => {
                    Members::set_deadline(b, start, None);
                    false
                }
                Some((_, None)) => false,
            },
            Repr::Large(t) => match t.get(member).map(|e| e.deadline) {
                None => t.insert(member, NO_VALUE).is_none(),
                Some(Some(_)) => {
                    t.set_deadline(member, None);
                    false
                }
                Some(None) => false,
            },
        };
        if added && (n >= cfg.max_listpack_entries || member.len() > cfg.max_listpack_value) {
            self.set_flag(F_HASHTABLE);
        }
        if added {
            self.fit_shape(cfg);
        }
        added
    }

    /// Removes `member`; true if it was there. Never changes the shape.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(s) => parse_canonical_i64(member).is_some_and(|v| s.remove(v)),
            Repr::Small(b) => {
                let gone = Members::remove(b, HDR, member).is_some();
                if gone {
                    let n = small_count(b) - 1;
                    set_small_count(b, n);
                }
                gone
            }
            Repr::Large(t) => t.remove(member).is_some(),
        }
    }

    /// The members: ascending for an intset, else in storage order.
    pub fn iter(&self) -> Iter<'_> {
        let inner = match &self.repr {
            Repr::Ints(s) => Inner::Ints(s, 0),
            Repr::Small(b) => Inner::Packed(Members::iter(b, HDR)),
            Repr::Large(t) => Inner::Table(t.iter()),
        };
        Iter { inner }
    }

    /// A random member, `rng` supplying random u64s; `None` if empty.
    pub fn random(&self, rng: &mut impl FnMut() -> u64) -> Option<StrRef<'_>> {
        let n = self.len() as u64;
        if n == 0 {
            return None;
        }
        match &self.repr {
            Repr::Ints(s) => Some(StrRef::Int(s.get((rng() % n) as usize))),
            Repr::Small(b) => Members::iter(b, HDR).nth((rng() % n) as usize).map(|e| StrRef::Bytes(e.field)),
            Repr::Large(t) => t.random(rng).map(|e| StrRef::Bytes(e.field)),
        }
    }

    /// Removes and returns a random member; `None` if empty.
    pub fn pop_random(&mut self, rng: &mut impl FnMut() -> u64) -> Option<Vec<u8>> {
        let m = self.random(rng)?.to_vec();
        self.remove(&m);
        Some(m)
    }

    /// One SSCAN step: calls `f` with members from `cursor` on until at
    /// least `count` were visited; returns the next cursor (0: done). An
    /// intset or small set is returned whole in one step, as Redis does;
    /// a member present for the whole scan is returned at least once.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(StrRef)) -> u64 {
        match &self.repr {
            Repr::Large(t) => t.scan(cursor, count, |e| f(StrRef::Bytes(e.field))),
            _ => {
                self.iter().for_each(f);
                0
            }
        }
    }

    /// Prepares for about `hint` members being added (SADD's argument
    /// count): Redis converts a listpack or intset to a hashtable up front
    /// when the hint alone exceeds its limit.
    pub fn reserve_hint(&mut self, hint: usize, cfg: &SetConfig) {
        match &self.repr {
            Repr::Ints(_) if hint > cfg.intset_cap() => self.ints_to_packed(F_HASHTABLE, cfg),
            Repr::Small(_) | Repr::Large(_) if hint > cfg.max_listpack_entries => self.set_flag(F_HASHTABLE),
            _ => {}
        }
    }

    /// Rebuilds the set as an intset when every member is a canonical
    /// integer, there are few enough and none has a TTL (Redis does this
    /// to a stored intersection). Returns true if it converted.
    pub fn maybe_to_intset(&mut self, cfg: &SetConfig) -> bool {
        if matches!(self.repr, Repr::Ints(_)) || self.len() > cfg.intset_cap() || self.min_deadline().is_some() {
            return false;
        }
        let mut s = IntSet::new();
        for m in self.iter() {
            match m {
                StrRef::Int(v) => s.insert(v),
                StrRef::Bytes(b) => match parse_canonical_i64(b) {
                    Some(v) => s.insert(v),
                    None => return false,
                },
            };
        }
        self.repr = Repr::Ints(s);
        true
    }

    /// The deadline of `member`: `None` if absent, `Some(None)` if it has no
    /// TTL, `Some(Some(ms))` (past or not: see the module header).
    pub fn expire_of(&self, member: &[u8]) -> Option<Option<i64>> {
        match &self.repr {
            Repr::Ints(s) => parse_canonical_i64(member).filter(|&v| s.contains(v)).map(|_| None),
            Repr::Small(b) => Members::find(b, HDR, member).map(|e| e.deadline),
            Repr::Large(t) => t.get(member).map(|e| e.deadline),
        }
    }

    /// SEXPIRE-family update of one member, as `Hash::set_expire` does for
    /// a field. Returns the reply code: -2 no such member (or one past its
    /// deadline), 0 condition not met, 1 deadline set, 2 member removed
    /// because `deadline <= now`.
    ///
    /// Panics: if `deadline > fieldpack::MAX_DEADLINE` (callers reject
    /// such times with Redis's error first).
    pub fn set_expire(&mut self, member: &[u8], deadline: i64, cond: ExpireCond, now: i64, cfg: &SetConfig) -> i64 {
        assert!(deadline <= fieldpack::MAX_DEADLINE, "member deadline out of range: {deadline}");
        match cond.step(self.expire_of(member), deadline, now) {
            Err(code) => code,
            Ok(true) => {
                self.remove(member);
                2
            }
            Ok(false) => {
                self.set_deadline(member, Some(deadline), cfg);
                1
            }
        }
    }

    /// SPERSIST of one member: -2 no such (live) member, -1 it has no TTL,
    /// 1 TTL removed.
    pub fn persist(&mut self, member: &[u8], now: i64, cfg: &SetConfig) -> i64 {
        match self.expire_of(member) {
            None => -2,
            Some(Some(d)) if d < now => -2,
            Some(None) => -1,
            Some(Some(_)) => {
                self.set_deadline(member, None, cfg);
                1
            }
        }
    }

    /// Sets or clears the deadline of a member known to be present; an
    /// intset first moves to the packed shapes, which can hold one.
    fn set_deadline(&mut self, member: &[u8], deadline: Option<i64>, cfg: &SetConfig) {
        if let Repr::Ints(s) = &self.repr {
            if deadline.is_none() {
                return;
            }
            let widest = s.bounds().map_or(0, |(lo, hi)| crate::strref::int_len(lo).max(crate::strref::int_len(hi)));
            let fits = s.len() <= cfg.max_listpack_entries && widest <= cfg.max_listpack_value;
            self.ints_to_packed(if fits { 0 } else { F_HASHTABLE }, cfg);
        }
        match &mut self.repr {
            Repr::Ints(_) => unreachable!("converted above"),
            Repr::Small(b) => {
                let start = Members::find(b, HDR, member).expect("member checked by caller").start;
                Members::set_deadline(b, start, deadline);
                if deadline.is_some() {
                    b[0] |= F_TTL;
                }
            }
            Repr::Large(t) => {
                t.set_deadline(member, deadline);
            }
        }
    }

    /// The earliest member deadline (past ones included), by which the
    /// keyspace indexes the set: O(1) for the intset and large shapes and
    /// for a small set that never had a TTL, else a scan of its buffer.
    pub fn min_deadline(&self) -> Option<i64> {
        match &self.repr {
            Repr::Ints(_) => None,
            Repr::Small(b) if b[0] & F_TTL == 0 => None,
            Repr::Small(b) => Members::min_deadline(b, HDR),
            Repr::Large(t) => t.min_deadline(),
        }
    }

    /// Removes up to `max` members whose deadline is before `now`, calling
    /// `f` with each; returns how many. The large shape visits only the
    /// buckets that hold one.
    pub fn expire_due_with(&mut self, now: i64, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        match &mut self.repr {
            Repr::Ints(_) => 0,
            Repr::Small(b) if b[0] & F_TTL == 0 => 0,
            Repr::Small(b) => {
                let gone = Members::retain_live(b, HDR, now, max, &mut f);
                let n = small_count(b) - gone;
                set_small_count(b, n);
                gone
            }
            Repr::Large(t) => t.expire_due(now, max, f),
        }
    }

    /// The members with their deadlines (for DUMP and RDB files), in
    /// `iter`'s order.
    pub fn iter_ttl(&self) -> impl Iterator<Item = (StrRef<'_>, Option<i64>)> {
        let packed: Box<dyn Iterator<Item = fieldpack::Entry<'_>>> = match &self.repr {
            Repr::Ints(_) => Box::new(std::iter::empty()),
            Repr::Small(b) => Box::new(Members::iter(b, HDR)),
            Repr::Large(t) => Box::new(t.iter()),
        };
        let ints = match &self.repr {
            Repr::Ints(s) => Some(s.iter().map(|v| (StrRef::Int(v), None))),
            _ => None,
        };
        ints.into_iter().flatten().chain(packed.map(|e| (StrRef::Bytes(e.field), e.deadline)))
    }

    /// Heap bytes owned by this set, each block rounded to jemalloc's size
    /// class (the exact figure MEMORY USAGE adds to its key's cost).
    pub fn mem_usage(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.mem_usage(),
            Repr::Small(b) => alloc_size(b.capacity()),
            Repr::Large(t) => t.mem_usage(),
        }
    }

    /// What Redis's OBJECT ENCODING would answer for this set's history.
    pub fn encoding_name(&self) -> &'static str {
        let flags = match &self.repr {
            Repr::Ints(_) => return "intset",
            Repr::Small(b) => b[0],
            Repr::Large(t) => t.flags,
        };
        if flags & F_HASHTABLE != 0 {
            "hashtable"
        } else {
            "listpack"
        }
    }

    fn set_flag(&mut self, f: u8) {
        match &mut self.repr {
            Repr::Ints(_) => {}
            Repr::Small(b) => b[0] |= f,
            Repr::Large(t) => t.flags |= f,
        }
    }

    /// Moves an intset's members into the packed shapes, with `flags`.
    fn ints_to_packed(&mut self, flags: u8, cfg: &SetConfig) {
        let Repr::Ints(s) = &self.repr else { return };
        let mut b = new_small(flags);
        let mut digits = itoa_buf();
        for v in s.iter() {
            Members::push(&mut b, fmt_i64(v, &mut digits), NO_VALUE, None);
        }
        let n = s.len();
        if n < u16::MAX as usize {
            set_small_count(&mut b, n);
            self.repr = Repr::Small(b);
        } else {
            b.drain(..HDR);
            self.repr = Repr::Large(Box::new(Table::from_packed_fixed(b, n, flags, cfg.bucket_entries, cfg.fixed_bucket_bytes)));
        }
        self.fit_shape(cfg);
    }

    /// The one place a small set becomes a table: past our own limits.
    fn fit_shape(&mut self, cfg: &SetConfig) {
        let Repr::Small(b) = &mut self.repr else { return };
        let n = small_count(b);
        if n > cfg.small_max_entries.min(u16::MAX as usize - 1) || b.len() > cfg.small_max_bytes {
            let mut entries = std::mem::take(b);
            let flags = entries[0];
            entries.drain(..HDR);
            self.repr = Repr::Large(Box::new(Table::from_packed_fixed(entries, n, flags, cfg.bucket_entries, cfg.fixed_bucket_bytes)));
        }
    }
}

fn itoa_buf() -> [u8; 20] {
    [0; 20]
}

/// Formats `v` in decimal into `buf` without allocating.
fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut u = v.unsigned_abs();
    let mut p = buf.len();
    loop {
        p -= 1;
        buf[p] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        p -= 1;
        buf[p] = b'-';
    }
    &buf[p..]
}

/// Members of a set, see `Set::iter`.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    inner: Inner<'a>,
}

#[derive(Debug, Clone)]
enum Inner<'a> {
    Ints(&'a IntSet, usize),
    Packed(fieldpack::Iter<'a, false>),
    Table(fieldtable::Iter<'a, false>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = StrRef<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Ints(s, i) => {
                let v = (*i < s.len()).then(|| s.get(*i))?;
                *i += 1;
                Some(StrRef::Int(v))
            }
            Inner::Packed(it) => it.next().map(|e| StrRef::Bytes(e.field)),
            Inner::Table(it) => it.next().map(|e| StrRef::Bytes(e.field)),
        }
    }
}

#[cfg(test)]
mod tests;

