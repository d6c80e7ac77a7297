//! Fieldtable: a large hash as a linear-hashing table of small fieldpack
//! buckets, grown and shrunk one bucket at a time.
//!
//! ```text
//! Table { buckets, len, hasher, mins, bucket_entries, flags }
//!
//!  buckets: Vec<Vec<u8>>   n = 2^L + s buckets (0 <= s < 2^L)
//!   [0] [1] ... [s-1] | [s] ... [2^L-1] | [2^L] ... [2^L+s-1]
//!   split: L+1 bits     not yet split:    split images of 0..s:
//!                       L bits            L+1 bits
//!   each bucket = fieldpack entries (no header) in layout V (a hash's
//!   fields with values, or a set's bare members), ~bucket_entries of them,
//!   its capacity a jemalloc size class.
//!
//!  mins: Vec<i64>          empty until some field gets a TTL; then a
//!                          min-tree: leaf P+b = earliest deadline in
//!                          bucket b (i64::MAX: none), root at [1].
//! ```
//!
//! Why this shape rather than a hash map of owned strings: a field costs its
//! packed bytes (a 24-byte field with value "1" is 26 bytes), plus about one
//! byte of bucket header and the allocator's class rounding of its bucket
//! (under 12% on average). There is no per-field pointer, no table of slots
//! at a load factor, and no whole-table rehash: when the average bucket
//! exceeds `bucket_entries`, bucket `s` alone splits into `s` and `2^L + s`
//! (bit L of each field's hash decides), so growth costs one bucket's bytes
//! per insert and memory rises smoothly with the field count. Deletions
//! merge the last bucket back into its partner when the average falls
//! under a quarter of the target. A small hash is one fieldpack buffer, so
//! converting to a table moves that buffer in as bucket 0; the next inserts
//! split it down.
//!
//! SCAN: the cursor is a position in bit-reversed hash order. A bucket at
//! depth d holds exactly the fields whose low d hash bits equal its index,
//! i.e. one contiguous interval of that order; each step returns the whole
//! bucket under the cursor and moves the cursor to the end of its interval.
//! Splits and merges only refine or coarsen the intervals, so a field
//! present for the whole scan is returned at least once whatever the table
//! did in between (it may be returned twice).
//!
//! Field TTLs: the min-tree gives the table's earliest deadline in O(1) and
//! finds a due bucket in O(log n), so active expiry touches only buckets
//! with due fields. Any change to a bucket of a table that has a tree
//! rescans that bucket (O(bucket)) and updates O(log n) tree nodes.
//!
//! Fixed-width buckets (sets only): when a set becomes a table and all its
//! members have one length `width` (1..=64 bytes: UUIDs, hashes, ids), a
//! bucket can hold its members without their length bytes, back to back
//! (`Form::Bare`: a 16-byte member costs 16 bytes, not 17), or each after
//! a 6-byte deadline slot (`Form::Timed`, for buckets where most members
//! have a TTL: 6 bytes a member where the packed form spends 7 on a TTL'd
//! one). Buckets of such a table are sized by bytes (`fixed_bytes`, about
//! 1 KiB) rather than by `bucket_entries`, so bucket headers weigh less.
//! Two bits per bucket (`fixed`, `timed`) give its form. A member of
//! another length turns only its own bucket into the packed form (O(bucket),
//! never the whole table); so does a first TTL in a bare bucket, and a
//! packed bucket of `width`-byte members goes back to a fixed form when that
//! is smaller (`settle`): bare with no TTL left, timed once at least 5 in 6
//! members have one. A split keeps a fixed bucket's form (the halves of a
//! packed one settle); a merge of two forms gives the larger one's (packed
//! over timed over bare).
//!
//! Hashing: SipHash keyed per table (std's `RandomState`), so clients
//! cannot aim many fields at one bucket.
//!
//! Complexity: get/insert/remove O(bucket_entries) expected; a split or
//! merge is O(one bucket). The bucket vector grows by a quarter at a time
//! and the min-tree doubles (8 bytes per leaf); both are small next to the
//! buckets. Values are stored inline, so a split moves big values too.

use std::hash::{BuildHasher, RandomState};

use super::fieldpack::{Entry, Layout, MAX_DEADLINE};
use super::{alloc_size, reserve_class, shrink_class};
use crate::strref::StrRef;

/// A large hash: see the module header.
#[derive(Debug, Clone)]
pub struct Table<const V: bool> {
    buckets: Vec<Vec<u8>>,
    len: usize,
    hasher: RandomState,
    mins: Vec<i64>,
    /// Bit b set: bucket b is in a fixed-width form (see the header)...
    fixed: Vec<u64>,
    /// ...with a deadline slot before each member.
    timed: Vec<u64>,
    bucket_entries: u32,
    /// The members' length in fixed-width buckets; 0 when there are none.
    width: u8,
    /// Owner's flags, carried through conversion (the table ignores them).
    pub flags: u8,
}

/// Longest member kept in fixed-width buckets: past it the length byte
/// saved is under 1.5%.
const MAX_FIXED_WIDTH: usize = 64;

/// The form of one bucket (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Fieldpack entries.
    Packed,
    /// `width`-byte members back to back.
    Bare,
    /// A 6-byte deadline slot (LE, `NO_DEADLINE`: none), then the member.
    Timed,
}

/// Bytes of a timed member's deadline slot.
const SLOT: usize = 6;

/// A slot's "no TTL": the one 48-bit value it cannot hold as a deadline
/// (a member given exactly `MAX_DEADLINE` moves its bucket to the packed
/// form, which can).
const NO_DEADLINE: u64 = MAX_DEADLINE as u64;

/// The members of one bucket, in any form.
#[derive(Debug, Clone)]
pub enum BucketIter<'a, const V: bool> {
    Packed(super::fieldpack::Iter<'a, V>),
    Fixed { buf: &'a [u8], width: usize, timed: bool, pos: usize },
}

impl<'a, const V: bool> Iterator for BucketIter<'a, V> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        match self {
            BucketIter::Packed(it) => it.next(),
            BucketIter::Fixed { buf, width, timed, pos } => {
                let e = (*pos < buf.len()).then(|| fixed_entry(buf, *pos, *width, *timed))?;
                *pos = e.end;
                Some(e)
            }
        }
    }
}

/// Every entry of a table, bucket by bucket (`Table::iter`).
#[derive(Debug, Clone)]
pub struct Iter<'a, const V: bool> {
    table: &'a Table<V>,
    next: usize,
    cur: BucketIter<'a, V>,
}

impl<'a, const V: bool> Iterator for Iter<'a, V> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        loop {
            if let Some(e) = self.cur.next() {
                return Some(e);
            }
            if self.next >= self.table.buckets.len() {
                return None;
            }
            self.cur = self.table.bucket_iter(self.next);
            self.next += 1;
        }
    }
}

/// The fixed-width member at `pos`, as an entry.
fn fixed_entry(buf: &[u8], pos: usize, width: usize, timed: bool) -> Entry<'_> {
    let (deadline, at) = if timed {
        let mut d = [0u8; 8];
        d[..SLOT].copy_from_slice(&buf[pos..pos + SLOT]);
        let d = u64::from_le_bytes(d);
        ((d != NO_DEADLINE).then_some(d as i64), pos + SLOT)
    } else {
        (None, pos)
    };
    Entry { start: pos, end: at + width, field: &buf[at..at + width], value: StrRef::Bytes(b""), deadline }
}

/// Writes a timed member's deadline slot at the start of `out`.
fn put_slot(out: &mut [u8], deadline: Option<i64>) {
    let d = deadline.map_or(NO_DEADLINE, |d| d as u64);
    out[..SLOT].copy_from_slice(&d.to_le_bytes()[..SLOT]);
}

/// Offset of the record holding `m` among the fixed-width records of `buf`
/// (members of `m.len()` bytes, after a slot when `timed`). The member's
/// first eight bytes are compared as one word: random members differ there.
fn fixed_find(buf: &[u8], m: &[u8], timed: bool) -> Option<usize> {
    let off = if timed { SLOT } else { 0 };
    let rec = m.len() + off;
    let at = if m.len() >= 8 {
        let head = u64::from_ne_bytes(m[..8].try_into().expect("8 bytes"));
        buf.chunks_exact(rec).position(|r| u64::from_ne_bytes(r[off..off + 8].try_into().expect("8 bytes")) == head && r[off + 8..] == m[8..])
    } else {
        buf.chunks_exact(rec).position(|r| r[off..] == *m)
    };
    at.map(|i| i * rec)
}

/// Keeps the entries of a bucket in `form` for which `keep` (given the
/// entry and its raw bytes) returns true, compacting in place; returns how
/// many were dropped.
fn retain_in<const V: bool>(buf: &mut Vec<u8>, form: Form, width: usize, mut keep: impl FnMut(&Entry, &[u8]) -> bool) -> usize {
    if form == Form::Packed {
        return Layout::<V>::retain(buf, 0, keep);
    }
    let timed = form == Form::Timed;
    let rec = width + if timed { SLOT } else { 0 };
    let (mut kept, mut dropped) = (0, 0);
    for at in (0..buf.len()).step_by(rec) {
        if keep(&fixed_entry(buf, at, width, timed), &buf[at..at + rec]) {
            buf.copy_within(at..at + rec, kept);
            kept += rec;
        } else {
            dropped += 1;
        }
    }
    buf.truncate(kept);
    shrink_class(buf);
    dropped
}

fn floor_log2(n: usize) -> u32 {
    usize::BITS - 1 - n.leading_zeros()
}

/// Bit `b` of a bitmap.
fn bit(v: &[u64], b: usize) -> bool {
    v.get(b / 64).is_some_and(|w| w >> (b % 64) & 1 != 0)
}

fn set_bit(v: &mut Vec<u64>, b: usize, on: bool) {
    if on {
        if v.len() <= b / 64 {
            v.resize(b / 64 + 1, 0);
        }
        v[b / 64] |= 1 << (b % 64);
    } else if let Some(w) = v.get_mut(b / 64) {
        *w &= !(1 << (b % 64));
    }
}

impl<const V: bool> Table<V> {
    /// A table holding the fieldpack entries `entries` (`len` of them) as
    /// its one bucket, then split down to about `bucket_entries` per bucket.
    pub fn from_packed(entries: Vec<u8>, len: usize, flags: u8, bucket_entries: usize) -> Self {
        Self::from_packed_fixed(entries, len, flags, bucket_entries, 0)
    }

    /// `from_packed`, keeping the members in fixed-width buckets of about
    /// `fixed_bytes` bytes when they all have one length (sets only; 0:
    /// never).
    pub fn from_packed_fixed(entries: Vec<u8>, len: usize, flags: u8, bucket_entries: usize, fixed_bytes: usize) -> Self {
        let mut t = Table {
            buckets: vec![entries],
            len,
            hasher: RandomState::new(),
            mins: Vec::new(),
            fixed: Vec::new(),
            timed: Vec::new(),
            bucket_entries: bucket_entries.clamp(1, u32::MAX as usize) as u32,
            width: 0,
            flags,
        };
        let mut all = Layout::<V>::iter(&t.buckets[0], 0);
        let width = all.clone().next().map_or(0, |e| e.field.len());
        if !V && fixed_bytes > 0 && (1..=MAX_FIXED_WIDTH).contains(&width) && all.all(|e| e.field.len() == width) {
            t.width = width as u8;
            t.bucket_entries = (fixed_bytes / width).clamp(bucket_entries.max(1), u32::MAX as usize) as u32;
            t.settle(0);
        }
        if t.bucket_iter(0).any(|e| e.deadline.is_some()) {
            t.enable_mins();
        }
        t.grow();
        t
    }

    fn form(&self, b: usize) -> Form {
        match (bit(&self.fixed, b), bit(&self.timed, b)) {
            (false, _) => Form::Packed,
            (true, false) => Form::Bare,
            (true, true) => Form::Timed,
        }
    }

    /// Rewrites bucket `b` in form `to` (O(bucket)). The caller knows its
    /// members fit: all `width` bytes long for a fixed form, none with a TTL
    /// for `Bare`, none with `MAX_DEADLINE` for `Timed`.
    fn convert(&mut self, b: usize, to: Form) {
        if self.form(b) == to {
            return;
        }
        let w = self.width as usize;
        let n = self.bucket_iter(b).count();
        let mut out = Vec::with_capacity(alloc_size(match to {
            Form::Packed => self.buckets[b].len() + n,
            Form::Bare => n * w,
            Form::Timed => n * (w + SLOT),
        }));
        for e in self.bucket_iter(b) {
            match to {
                Form::Packed => Layout::<V>::push(&mut out, e.field, StrRef::Bytes(b""), e.deadline),
                Form::Bare => out.extend_from_slice(e.field),
                Form::Timed => {
                    let at = out.len();
                    out.resize(at + SLOT, 0);
                    put_slot(&mut out[at..], e.deadline);
                    out.extend_from_slice(e.field);
                }
            }
        }
        self.buckets[b] = out;
        set_bit(&mut self.fixed, b, to != Form::Packed);
        set_bit(&mut self.timed, b, to == Form::Timed);
    }

    /// Puts bucket `b` of a fixed-width table in its smallest form: a fixed
    /// one when every member is `width` bytes (bare without TTLs, timed when
    /// at least 5 in 6 have one), else packed.
    fn settle(&mut self, b: usize) {
        if self.width == 0 || b >= self.buckets.len() {
            return;
        }
        let w = self.width as usize;
        let (mut n, mut timed, mut fits) = (0usize, 0usize, true);
        for e in self.bucket_iter(b) {
            n += 1;
            timed += e.deadline.is_some() as usize;
            fits &= e.field.len() == w && e.deadline != Some(MAX_DEADLINE);
        }
        let to = if !fits {
            Form::Packed
        } else if timed == 0 {
            Form::Bare
        } else if 6 * timed >= 5 * n {
            Form::Timed
        } else {
            Form::Packed
        };
        self.convert(b, to);
    }

    /// The entries of bucket `b`.
    fn bucket_iter(&self, b: usize) -> BucketIter<'_, V> {
        match self.form(b) {
            Form::Packed => BucketIter::Packed(Layout::<V>::iter(&self.buckets[b], 0)),
            f => BucketIter::Fixed { buf: &self.buckets[b], width: self.width as usize, timed: f == Form::Timed, pos: 0 },
        }
    }

    /// Bytes of one record of fixed-width bucket `b`.
    fn record_len(&self, b: usize) -> usize {
        self.width as usize + if self.form(b) == Form::Timed { SLOT } else { 0 }
    }

    /// Offset of `field`'s record in fixed-width bucket `b`.
    fn find_fixed(&self, b: usize, field: &[u8]) -> Option<usize> {
        (field.len() == self.width as usize).then(|| fixed_find(&self.buckets[b], field, self.form(b) == Form::Timed))?
    }

    /// `retain_in` on bucket `b`.
    fn retain_bucket(&mut self, b: usize, keep: impl FnMut(&Entry, &[u8]) -> bool) -> usize {
        let form = self.form(b);
        retain_in::<V>(&mut self.buckets[b], form, self.width as usize, keep)
    }

    /// Number of fields (expired ones not yet removed included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the table holds no field.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn addr(&self, field: &[u8]) -> usize {
        self.addr_of(self.hasher.hash_one(field))
    }

    fn addr_of(&self, h: u64) -> usize {
        let n = self.buckets.len();
        let l = floor_log2(n);
        let b = h as usize & ((1 << l) - 1);
        if b < n - (1 << l) {
            h as usize & ((2 << l) - 1)
        } else {
            b
        }
    }

    /// The entry for `field`, expired or not.
    pub fn get(&self, field: &[u8]) -> Option<Entry<'_>> {
        let b = self.addr(field);
        match self.form(b) {
            Form::Packed => Layout::<V>::find(&self.buckets[b], 0, field),
            f => self.find_fixed(b, field).map(|at| fixed_entry(&self.buckets[b], at, self.width as usize, f == Form::Timed)),
        }
    }

    /// Sets `field` to `value`, dropping its TTL. Returns the old deadline
    /// as `fieldpack::upsert` does (`None`: the field is new).
    pub fn insert(&mut self, field: &[u8], value: StrRef) -> Option<Option<i64>> {
        let b = self.addr(field);
        if let f @ (Form::Bare | Form::Timed) = self.form(b) {
            if field.len() == self.width as usize {
                let timed = f == Form::Timed;
                if let Some(at) = self.find_fixed(b, field) {
                    let old = fixed_entry(&self.buckets[b], at, field.len(), timed).deadline;
                    if old.is_some() {
                        put_slot(&mut self.buckets[b][at..], None);
                        self.refresh(b);
                    }
                    return Some(old);
                }
                let rec = self.record_len(b);
                let buf = &mut self.buckets[b];
                reserve_class(buf, rec);
                if timed {
                    let at = buf.len();
                    buf.resize(at + SLOT, 0);
                    put_slot(&mut buf[at..], None);
                }
                buf.extend_from_slice(field);
                self.len += 1;
                self.grow();
                return None;
            }
            self.convert(b, Form::Packed);
        }
        let old = Layout::<V>::upsert(&mut self.buckets[b], 0, field, value);
        match old {
            None => {
                self.len += 1;
                self.grow();
            }
            Some(Some(_)) => self.refresh(b),
            Some(None) => {}
        }
        old
    }

    /// Removes `field`; returns its old deadline, `None` if absent.
    pub fn remove(&mut self, field: &[u8]) -> Option<Option<i64>> {
        let b = self.addr(field);
        let old = match self.form(b) {
            Form::Packed => Layout::<V>::remove(&mut self.buckets[b], 0, field)?,
            f => {
                let at = self.find_fixed(b, field)?;
                let old = fixed_entry(&self.buckets[b], at, field.len(), f == Form::Timed).deadline;
                let end = at + self.record_len(b);
                Layout::<V>::remove_at(&mut self.buckets[b], at, end);
                old
            }
        };
        self.len -= 1;
        if self.form(b) == Form::Packed {
            self.settle(b);
        }
        if old.is_some() {
            self.refresh(b);
        }
        self.shrink();
        Some(old)
    }

    /// Sets or clears the deadline of `field`; false if absent.
    ///
    /// Panics: if the deadline is outside `0..=MAX_DEADLINE`.
    pub fn set_deadline(&mut self, field: &[u8], deadline: Option<i64>) -> bool {
        let b = self.addr(field);
        let form = self.form(b);
        if form != Form::Packed {
            let Some(at) = self.find_fixed(b, field) else {
                return false;
            };
            if form == Form::Bare && deadline.is_none() {
                return true;
            }
            if form == Form::Timed && deadline != Some(MAX_DEADLINE) {
                assert!(deadline.is_none_or(|d| (0..=MAX_DEADLINE).contains(&d)), "field deadline out of range: {deadline:?}");
                put_slot(&mut self.buckets[b][at..], deadline);
                if deadline.is_some() {
                    self.enable_mins();
                } else {
                    self.settle(b);
                }
                self.refresh(b);
                return true;
            }
            // A first TTL in a bare bucket, or one a slot cannot hold.
            self.convert(b, Form::Packed);
        }
        let Some(start) = Layout::<V>::find(&self.buckets[b], 0, field).map(|e| e.start) else {
            return false;
        };
        Layout::<V>::set_deadline(&mut self.buckets[b], start, deadline);
        self.settle(b);
        if deadline.is_some() {
            self.enable_mins();
        }
        self.refresh(b);
        true
    }

    /// The earliest deadline of any field.
    pub fn min_deadline(&self) -> Option<i64> {
        self.mins.get(1).copied().filter(|&d| d != i64::MAX)
    }

    /// Removes up to `max` fields whose deadline is before `now`, calling
    /// `f` with each; returns how many. Visits only buckets holding one.
    pub fn expire_due(&mut self, now: i64, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut removed = 0;
        while removed < max && self.mins.get(1).is_some_and(|&d| d < now) {
            let p = self.mins.len() / 2;
            let mut i = 1;
            while i < p {
                i = if self.mins[2 * i] < now { 2 * i } else { 2 * i + 1 };
            }
            let b = i - p;
            let mut budget = max - removed;
            // The bucket's new earliest deadline comes out of the same walk,
            // so the tree leaf is set without rescanning the bucket.
            let mut earliest = i64::MAX;
            removed += self.retain_bucket(b, |e, _| {
                let due = budget > 0 && !e.live(now);
                if due {
                    f(e.field);
                    budget -= 1;
                } else if let Some(d) = e.deadline {
                    earliest = earliest.min(d);
                }
                !due
            });
            self.set_min(b, earliest);
        }
        self.len -= removed;
        for _ in 0..removed.min(64) {
            self.shrink();
        }
        removed
    }

    /// All entries, bucket by bucket.
    pub fn iter(&self) -> Iter<'_, V> {
        Iter { table: self, next: 0, cur: BucketIter::Fixed { buf: &[], width: 1, timed: false, pos: 0 } }
    }

    /// The raw buckets, for iterators that walk them directly (a hash's:
    /// only sets have fixed-width buckets).
    pub fn buckets(&self) -> &[Vec<u8>] {
        debug_assert!(self.width == 0, "fixed-width buckets are walked with iter()");
        &self.buckets
    }

    /// Calls `f` with every entry of the buckets under `cursor` until at
    /// least `count` entries were passed or the scan ended; returns the next
    /// cursor, 0 when done. See the module header for the guarantee.
    pub fn scan(&self, mut cursor: u64, count: usize, mut f: impl FnMut(&Entry)) -> u64 {
        let mut seen = 0;
        loop {
            let n = self.buckets.len();
            let l = floor_log2(n);
            let mut depth = l;
            let mut b = cursor as usize & ((1 << l) - 1);
            if b < n - (1 << l) {
                depth = l + 1;
                b = cursor as usize & ((2 << l) - 1);
            }
            for e in self.bucket_iter(b) {
                f(&e);
                seen += 1;
            }
            // Next interval in bit-reversed order at this bucket's depth.
            cursor |= !((1u64 << depth) - 1);
            cursor = cursor.reverse_bits().wrapping_add(1).reverse_bits();
            if cursor == 0 || seen >= count {
                return cursor;
            }
        }
    }

    /// A random entry (expired or not): a random non-empty bucket, then a
    /// random entry in it. Fields in sparse buckets are favoured a little,
    /// as with Redis's dict sampling. `None` if empty.
    pub fn random(&self, rng: &mut impl FnMut() -> u64) -> Option<Entry<'_>> {
        if self.len == 0 {
            return None;
        }
        for _ in 0..64 {
            let b = (rng() % self.buckets.len() as u64) as usize;
            let k = if self.form(b) == Form::Packed { self.bucket_iter(b).count() } else { self.buckets[b].len() / self.record_len(b) };
            if k > 0 {
                return self.bucket_iter(b).nth((rng() % k as u64) as usize);
            }
        }
        self.iter().next()
    }

    /// Heap bytes owned, as jemalloc counts them (see `encoding`): the
    /// table struct, the bucket vector, every bucket, the min-tree.
    pub fn mem_usage(&self) -> usize {
        alloc_size(size_of::<Table<V>>())
            + alloc_size(self.buckets.capacity() * size_of::<Vec<u8>>())
            + self.buckets.iter().map(|b| alloc_size(b.capacity())).sum::<usize>()
            + alloc_size(self.mins.capacity() * size_of::<i64>())
            + alloc_size(self.fixed.capacity() * size_of::<u64>())
            + alloc_size(self.timed.capacity() * size_of::<u64>())
    }

    /// Splits buckets until the average is at most `bucket_entries`.
    fn grow(&mut self) {
        while self.len > self.buckets.len() * self.bucket_entries as usize {
            self.split();
        }
    }

    /// Merges one bucket when the average falls under a quarter of target.
    fn shrink(&mut self) {
        let n = self.buckets.len();
        if n > 1 && self.len * 4 < (n - 1) * self.bucket_entries as usize {
            self.merge();
        }
    }

    fn split(&mut self) {
        let n = self.buckets.len();
        let l = floor_log2(n);
        let s = n - (1 << l);
        let form = self.form(s);
        let mut moved = Vec::new();
        let hasher = &self.hasher;
        let mut old = std::mem::take(&mut self.buckets[s]);
        retain_in::<V>(&mut old, form, self.width as usize, |e, raw| {
            let stay = (hasher.hash_one(e.field) >> l) & 1 == 0;
            if !stay {
                reserve_class(&mut moved, raw.len());
                moved.extend_from_slice(raw);
            }
            stay
        });
        // The half left behind gives back its slack at once (retain's
        // hysteresis would keep up to twice its size).
        old.shrink_to(alloc_size(old.len()));
        self.buckets[s] = old;
        if self.buckets.len() == self.buckets.capacity() {
            self.buckets.reserve_exact((n / 4).max(4));
        }
        self.buckets.push(moved);
        set_bit(&mut self.fixed, n, form != Form::Packed);
        set_bit(&mut self.timed, n, form == Form::Timed);
        if form == Form::Packed {
            // The half without the member that packed the bucket may fit
            // a fixed form again.
            self.settle(s);
            self.settle(n);
        }
        self.refresh(s);
        self.refresh(n);
    }

    fn merge(&mut self) {
        let m = self.buckets.len() - 1;
        let partner = m - (1 << floor_log2(m));
        // Both in one form: the larger of the two (packed, timed, bare).
        let to = match (self.form(m), self.form(partner)) {
            (a, b) if a == b => a,
            (Form::Packed, _) | (_, Form::Packed) => Form::Packed,
            _ => Form::Timed,
        };
        self.convert(m, to);
        self.convert(partner, to);
        let last = self.buckets.pop().expect("n > 1");
        set_bit(&mut self.fixed, m, false);
        set_bit(&mut self.timed, m, false);
        reserve_class(&mut self.buckets[partner], last.len());
        self.buckets[partner].extend_from_slice(&last);
        if self.buckets.capacity() > 8 && self.buckets.len() < self.buckets.capacity() / 2 {
            self.buckets.shrink_to(self.buckets.len() + self.buckets.len() / 4);
        }
        self.refresh(partner);
        self.refresh(m);
    }

    fn enable_mins(&mut self) {
        if self.mins.is_empty() {
            let p = self.buckets.len().next_power_of_two();
            self.mins = vec![i64::MAX; 2 * p];
            for b in 0..self.buckets.len() {
                self.refresh(b);
            }
        }
    }

    /// Recomputes bucket `b`'s earliest deadline into the tree (a bucket
    /// index past the end counts as empty).
    fn refresh(&mut self, b: usize) {
        if self.mins.is_empty() {
            return;
        }
        let mut p = self.mins.len() / 2;
        if b >= p {
            let mut grown = vec![i64::MAX; 4 * p];
            grown[2 * p..3 * p].copy_from_slice(&self.mins[p..]);
            p *= 2;
            for i in (1..p).rev() {
                grown[i] = grown[2 * i].min(grown[2 * i + 1]);
            }
            self.mins = grown;
        }
        let d = match b < self.buckets.len() && self.form(b) != Form::Bare {
            true => self.bucket_iter(b).filter_map(|e| e.deadline).min(),
            false => None,
        };
        let d = d.unwrap_or(i64::MAX);
        self.set_min(b, d);
    }

    /// Sets bucket `b`'s leaf of the min-tree (which covers `b` already) to
    /// `d` and updates the path to the root.
    fn set_min(&mut self, b: usize, d: i64) {
        let p = self.mins.len() / 2;
        let mut i = p + b;
        self.mins[i] = d;
        while i > 1 {
            i /= 2;
            self.mins[i] = self.mins[2 * i].min(self.mins[2 * i + 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn field(i: usize) -> Vec<u8> {
        format!("field:{i}").into_bytes()
    }

    fn table(n: usize, per_bucket: usize) -> Table<true> {
        let mut t = Table::from_packed(Vec::new(), 0, 0, per_bucket);
        for i in 0..n {
            assert_eq!(t.insert(&field(i), StrRef::Int(i as i64)), None);
        }
        t
    }

    fn member(i: usize) -> Vec<u8> {
        format!("{i:08}").into_bytes()
    }

    /// How many non-empty buckets are in each form.
    fn forms(t: &Table<false>) -> [usize; 3] {
        let mut n = [0; 3];
        for b in (0..t.buckets.len()).filter(|&b| !t.buckets[b].is_empty()) {
            n[t.form(b) as usize] += 1;
        }
        n
    }

    /// True when every non-empty bucket is in form `f`.
    fn all_in(t: &Table<false>, f: Form) -> bool {
        let n = forms(t);
        n[f as usize] == n.iter().sum::<usize>()
    }

    #[test]
    fn fixed_width_buckets_change_form_one_at_a_time() {
        let mut packed = Vec::new();
        for i in 0..4 {
            Layout::<false>::push(&mut packed, &member(i), StrRef::Bytes(b""), None);
        }
        let mut t = Table::<false>::from_packed_fixed(packed, 4, 0, 2, 32);
        for i in 4..400 {
            assert_eq!(t.insert(&member(i), StrRef::Bytes(b"")), None);
        }
        assert_eq!(t.insert(&member(7), StrRef::Bytes(b"")), Some(None));
        assert!(all_in(&t, Form::Bare), "{:?}", forms(&t));
        assert_eq!(t.buckets.iter().map(Vec::len).sum::<usize>(), 400 * 8, "no length bytes");
        // An odd member packs its own bucket only; removing it unpacks it.
        let odd = b"odd".to_vec();
        t.insert(&odd, StrRef::Bytes(b""));
        let nb = forms(&t).iter().sum::<usize>();
        assert_eq!(forms(&t), [1, nb - 1, 0]);
        assert!(t.get(&odd).is_some() && t.get(&member(399)).is_some());
        assert_eq!(t.remove(&odd), Some(None));
        assert!(all_in(&t, Form::Bare), "{:?}", forms(&t));
        // A first TTL packs its bucket; most members timed make it timed.
        for i in 0..400 {
            assert!(t.set_deadline(&member(i), Some(1000 + i as i64)));
        }
        assert!(all_in(&t, Form::Timed), "{:?}", forms(&t));
        assert_eq!(t.min_deadline(), Some(1000));
        assert_eq!(t.get(&member(5)).unwrap().deadline, Some(1005));
        // A deadline a slot cannot hold packs the bucket, and reads back.
        assert!(t.set_deadline(&member(9), Some(MAX_DEADLINE)));
        assert_eq!(t.get(&member(9)).unwrap().deadline, Some(MAX_DEADLINE));
        assert_eq!(forms(&t)[Form::Packed as usize], 1);
        // Re-adding drops the TTL; persisting every member makes them bare.
        assert_eq!(t.insert(&member(5), StrRef::Bytes(b"")), Some(Some(1005)));
        assert_eq!(t.get(&member(5)).unwrap().deadline, None);
        for i in 0..400 {
            assert!(t.set_deadline(&member(i), None));
        }
        assert!(all_in(&t, Form::Bare), "{:?}", forms(&t));
        assert_eq!(t.min_deadline(), None);
        // Merges of a bare and a timed bucket; expiry through timed buckets.
        for i in (0..400).step_by(2) {
            t.set_deadline(&member(i), Some(2000));
        }
        for i in 0..400 {
            if i % 2 == 1 {
                t.set_deadline(&member(i), Some(3000));
            }
        }
        for i in 200..400 {
            t.set_deadline(&member(i), None);
        }
        let mut gone = BTreeSet::new();
        assert_eq!(t.expire_due(2500, 1000, |m| {
            gone.insert(m.to_vec());
        }), 100);
        assert_eq!(gone, (0..200).step_by(2).map(member).collect());
        for i in 250..400 {
            assert_eq!(t.remove(&member(i)), Some(None));
        }
        let left: BTreeSet<Vec<u8>> = t.iter().map(|e| e.field.to_vec()).collect();
        assert_eq!(left, (1..200).step_by(2).chain(200..250).map(member).collect());
        assert_eq!(t.len(), 150);
        assert_eq!(t.min_deadline(), Some(3000));
        // Expiring most members merges buckets (bare with timed ones).
        let before = t.buckets.len();
        assert_eq!(t.expire_due(i64::MAX, 1000, |_| {}), 100);
        assert!(t.buckets.len() < before);
        let left: BTreeSet<Vec<u8>> = t.iter().map(|e| e.field.to_vec()).collect();
        assert_eq!(left, (200..250).map(member).collect());
    }

    #[test]
    fn grows_and_shrinks_one_bucket_at_a_time() {
        let mut t = table(1000, 8);
        assert_eq!(t.buckets.len(), 125);
        for i in 0..1000 {
            assert_eq!(t.get(&field(i)).unwrap().value, StrRef::Int(i as i64));
        }
        for i in 0..990 {
            assert_eq!(t.remove(&field(i)), Some(None));
        }
        assert!(t.buckets.len() <= 10 * 4 / 8 + 1, "{} buckets", t.buckets.len());
        for i in 990..1000 {
            assert!(t.get(&field(i)).is_some());
        }
        assert_eq!(t.iter().count(), 10);
    }

    #[test]
    fn scan_survives_growth_and_shrink() {
        let mut t = table(300, 4);
        let (mut cursor, mut seen) = (0, BTreeSet::new());
        let mut step = 0;
        loop {
            cursor = t.scan(cursor, 10, |e| {
                seen.insert(e.field.to_vec());
            });
            // Grow, then shrink, while the scan runs.
            step += 1;
            if step < 20 {
                for i in 0..50 {
                    t.insert(&field(10_000 + step * 50 + i), StrRef::Int(0));
                }
            } else {
                for i in 0..50 {
                    t.remove(&field(10_000 + (step - 19) * 50 + i));
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..300 {
            assert!(seen.contains(&field(i)), "field {i} missed");
        }
    }

    #[test]
    fn min_tree_tracks_deadlines() {
        let mut t = table(500, 4);
        assert_eq!(t.min_deadline(), None);
        for i in 0..100 {
            assert!(t.set_deadline(&field(i), Some(1000 + i as i64)));
        }
        assert_eq!(t.min_deadline(), Some(1000));
        // Growth after the tree exists keeps it right.
        for i in 500..2000 {
            t.insert(&field(i), StrRef::Int(1));
        }
        t.set_deadline(&field(1999), Some(10));
        assert_eq!(t.min_deadline(), Some(10));
        t.insert(&field(1999), StrRef::Int(2));
        assert_eq!(t.min_deadline(), Some(1000));
        let mut gone = Vec::new();
        assert_eq!(t.expire_due(1050, 1000, |f| gone.push(f.to_vec())), 50);
        assert_eq!(gone.len(), 50);
        assert_eq!(t.min_deadline(), Some(1050));
        assert_eq!(t.expire_due(i64::MAX, 7, |_| {}), 7);
        assert_eq!(t.len(), 2000 - 57);
        assert_eq!(t.expire_due(i64::MAX, 1000, |_| {}), 43);
        assert_eq!(t.min_deadline(), None);
        assert_eq!(t.len(), 1900);
    }
}

