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
//! Hashing: SipHash keyed per table (std's `RandomState`), so clients
//! cannot aim many fields at one bucket.
//!
//! Complexity: get/insert/remove O(bucket_entries) expected; a split or
//! merge is O(one bucket). The bucket vector grows by a quarter at a time
//! and the min-tree doubles (8 bytes per leaf); both are small next to the
//! buckets. Values are stored inline, so a split moves big values too.

use std::hash::{BuildHasher, RandomState};

use super::fieldpack::{Entry, Layout};
use super::{alloc_size, reserve_class};
use crate::strref::StrRef;

/// A large hash: see the module header.
#[derive(Debug, Clone)]
pub struct Table<const V: bool> {
    buckets: Vec<Vec<u8>>,
    len: usize,
    hasher: RandomState,
    mins: Vec<i64>,
    bucket_entries: u32,
    /// Owner's flags, carried through conversion (the table ignores them).
    pub flags: u8,
}

fn floor_log2(n: usize) -> u32 {
    usize::BITS - 1 - n.leading_zeros()
}

impl<const V: bool> Table<V> {
    /// A table holding the fieldpack entries `entries` (`len` of them) as
    /// its one bucket, then split down to about `bucket_entries` per bucket.
    pub fn from_packed(entries: Vec<u8>, len: usize, flags: u8, bucket_entries: usize) -> Self {
        let mut t = Table {
            buckets: vec![entries],
            len,
            hasher: RandomState::new(),
            mins: Vec::new(),
            bucket_entries: bucket_entries.clamp(1, u32::MAX as usize) as u32,
            flags,
        };
        if Layout::<V>::min_deadline(&t.buckets[0], 0).is_some() {
            t.enable_mins();
        }
        t.grow();
        t
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
        Layout::<V>::find(&self.buckets[self.addr(field)], 0, field)
    }

    /// Sets `field` to `value`, dropping its TTL. Returns the old deadline
    /// as `fieldpack::upsert` does (`None`: the field is new).
    pub fn insert(&mut self, field: &[u8], value: StrRef) -> Option<Option<i64>> {
        let b = self.addr(field);
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
        let old = Layout::<V>::remove(&mut self.buckets[b], 0, field)?;
        self.len -= 1;
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
        let Some(start) = Layout::<V>::find(&self.buckets[b], 0, field).map(|e| e.start) else {
            return false;
        };
        Layout::<V>::set_deadline(&mut self.buckets[b], start, deadline);
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
            removed += Layout::<V>::retain(&mut self.buckets[b], 0, |e, _| {
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
    pub fn iter(&self) -> impl Iterator<Item = Entry<'_>> {
        self.buckets.iter().flat_map(|b| Layout::<V>::iter(b, 0))
    }

    /// The raw buckets, for iterators that walk them directly.
    pub fn buckets(&self) -> &[Vec<u8>] {
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
            for e in Layout::<V>::iter(&self.buckets[b], 0) {
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
            let b = &self.buckets[(rng() % self.buckets.len() as u64) as usize];
            let k = Layout::<V>::iter(b, 0).count();
            if k > 0 {
                return Layout::<V>::iter(b, 0).nth((rng() % k as u64) as usize);
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
        let mut old = std::mem::take(&mut self.buckets[s]);
        let mut moved = Vec::new();
        let hasher = &self.hasher;
        Layout::<V>::retain(&mut old, 0, |e, raw| {
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
        self.refresh(s);
        self.refresh(n);
    }

    fn merge(&mut self) {
        let m = self.buckets.len() - 1;
        let partner = m - (1 << floor_log2(m));
        let last = self.buckets.pop().expect("n > 1");
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
        let d = self.buckets.get(b).and_then(|buf| Layout::<V>::min_deadline(buf, 0)).unwrap_or(i64::MAX);
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
