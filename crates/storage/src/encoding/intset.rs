//! Intset: a sorted array of distinct integers in one byte buffer, each
//! stored in the narrowest width that fits the widest member.
//!
//! ```text
//! buffer: [width: 2 | 4 | 8][v0][v1]...[vn-1]   each v: `width` bytes LE,
//!                                                 v0 < v1 < ... < vn-1
//! ```
//!
//! It is the shape of a SET whose members are all canonical decimal
//! integers and few (Redis's `set-max-intset-entries`), where it costs 2-8
//! bytes a member and iterates in ascending order, as Redis's intset does.
//!
//! Invariants: values are strictly ascending and each fits `width`; the
//! buffer is only built here, so a violation is a bug.
//!
//! Complexity: lookup O(log n); insert and remove O(n) (one move of the
//! tail); a member wider than `width` re-encodes the whole array once.
//! Capacity grows by allocator size classes, never by doubling.

use super::{alloc_size, reserve_class, shrink_class};

/// A sorted set of distinct i64s, see the module header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntSet {
    buf: Vec<u8>,
}

impl Default for IntSet {
    fn default() -> Self {
        IntSet::new()
    }
}

fn width_of(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

impl IntSet {
    /// An empty intset (one 8-byte block).
    pub fn new() -> IntSet {
        let mut buf = Vec::new();
        reserve_class(&mut buf, 1);
        buf.push(2);
        IntSet { buf }
    }

    fn width(&self) -> usize {
        self.buf[0] as usize
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        (self.buf.len() - 1) / self.width()
    }

    /// True if there is no member.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 1
    }

    /// The member at rank `i` (ascending).
    ///
    /// Panics: if `i >= len()`.
    pub fn get(&self, i: usize) -> i64 {
        let w = self.width();
        let p = 1 + i * w;
        let b = &self.buf[p..p + w];
        match w {
            2 => i16::from_le_bytes([b[0], b[1]]) as i64,
            4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    }

    /// `Ok(rank)` of `v`, or `Err(rank it would take)`.
    fn search(&self, v: i64) -> Result<usize, usize> {
        if width_of(v) > self.width() {
            // Wider than every member: below all or above all.
            return Err(if v < 0 { 0 } else { self.len() });
        }
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(&v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// True if `v` is a member.
    pub fn contains(&self, v: i64) -> bool {
        self.search(v).is_ok()
    }

    fn put(&mut self, i: usize, v: i64) {
        let w = self.width();
        let p = 1 + i * w;
        self.buf[p..p + w].copy_from_slice(&v.to_le_bytes()[..w]);
    }

    /// Adds `v`; false if it was already a member.
    pub fn insert(&mut self, v: i64) -> bool {
        let w = width_of(v);
        if w > self.width() {
            self.widen(w);
        }
        let Err(at) = self.search(v) else { return false };
        let w = self.width();
        reserve_class(&mut self.buf, w);
        let p = 1 + at * w;
        self.buf.splice(p..p, std::iter::repeat_n(0, w));
        self.put(at, v);
        true
    }

    /// Re-encodes every member at width `w` (larger than the current one).
    fn widen(&mut self, w: usize) {
        let n = self.len();
        let mut buf = Vec::new();
        reserve_class(&mut buf, 1 + n * w);
        buf.push(w as u8);
        for i in 0..n {
            buf.extend_from_slice(&self.get(i).to_le_bytes()[..w]);
        }
        self.buf = buf;
    }

    /// Removes `v`; false if it was not a member. The width never shrinks
    /// (as in Redis).
    pub fn remove(&mut self, v: i64) -> bool {
        let Ok(at) = self.search(v) else { return false };
        let w = self.width();
        let p = 1 + at * w;
        self.buf.drain(p..p + w);
        shrink_class(&mut self.buf);
        true
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Smallest and largest member; `None` if empty.
    pub fn bounds(&self) -> Option<(i64, i64)> {
        let n = self.len();
        (n > 0).then(|| (self.get(0), self.get(n - 1)))
    }

    /// Heap bytes owned, rounded to jemalloc's size class.
    pub fn mem_usage(&self) -> usize {
        alloc_size(self.buf.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn widths_and_order() {
        let mut s = IntSet::new();
        assert!(s.insert(5) && s.insert(-3) && !s.insert(5));
        assert_eq!(s.width(), 2);
        assert!(s.insert(1 << 40));
        assert_eq!(s.width(), 8);
        assert!(s.insert(i64::MIN) && s.insert(70000));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![i64::MIN, -3, 5, 70000, 1 << 40]);
        assert!(s.contains(70000) && !s.contains(6) && !s.contains(i64::MAX));
        assert!(s.remove(-3) && !s.remove(-3));
        assert_eq!(s.bounds(), Some((i64::MIN, 1 << 40)));
        assert_eq!(s.mem_usage(), alloc_size(s.buf.capacity()));
    }

    proptest! {
        #[test]
        fn matches_btreeset(ops in prop::collection::vec((any::<bool>(), prop_oneof![-300i64..300, any::<i64>()]), 0..300)) {
            let mut s = IntSet::new();
            let mut m = BTreeSet::new();
            for (add, v) in ops {
                if add {
                    prop_assert_eq!(s.insert(v), m.insert(v));
                } else {
                    prop_assert_eq!(s.remove(v), m.remove(&v));
                }
                prop_assert_eq!(s.len(), m.len());
            }
            prop_assert!(s.iter().eq(m.iter().copied()));
            for v in -300..300 {
                prop_assert_eq!(s.contains(v), m.contains(&v));
            }
        }
    }
}
