//! Walking the keys: `for_each`, SCAN and RANDOMKEY.
//!
//! SCAN's cursor is a position in hash space: all keys whose hash (truncated
//! to the segment's prefix plus 14 tag bits) lies below it were returned.
//! Splits and growth never move a key across that order (table.rs), so a
//! key present for the whole scan is returned at least once.
//!
//! These only read (`&self`): keys not yet reclaimed are visited too, and an
//! inline hash is seen through `Db::with_value` (the lent copy, or a
//! temporary decoded from its blob).

use super::Db;
use crate::segment::{tag_at, tag_of, Segment, TAG_BITS};
use crate::value::ValueRef;

impl Db {
    /// Calls `f(key, value, deadline)` for every stored key, live or not yet reclaimed.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<i64>)) {
        for seg in &self.segs {
            for &s in seg.slots.iter().filter(|&&s| s != 0) {
                let b = self.blob(s);
                self.with_value(s, |v| f(&self.raw_key(&b), v, b.deadline));
            }
        }
    }

    /// One SCAN step from `cursor` (0 starts), visiting about `count` keys with
    /// `f(key, value, deadline)` (more when several share a hash position).
    /// Returns the next cursor, 0 when done.
    /// Every key present for the whole scan is visited at least once.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<i64>)) -> u64 {
        self.scan_slots(cursor, count, |_, s| {
            let b = self.blob(s);
            self.with_value(s, |v| f(&self.raw_key(&b), v, b.deadline));
        })
    }

    /// SCAN's step that also gives each key's `mem_usage` in bytes:
    /// `f(key, value, deadline, bytes)`. As the cursor only moves up in
    /// hash order, a walk from 0 to 0 visits a key present throughout once
    /// and never twice, whatever is written between the steps.
    pub fn scan_sized(&mut self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<i64>, usize)) -> u64 {
        // A hash lent for writing is stored back first, so its size is
        // the one MEMORY USAGE would see.
        self.flush();
        let this = &*self;
        this.scan_slots(cursor, count, |seg, s| {
            let b = this.blob(s);
            let bytes = this.slot_usage(seg, s);
            this.with_value(s, |v| f(&this.raw_key(&b), v, b.deadline, bytes));
        })
    }

    /// The walk behind `scan` and `scan_sized`: calls `emit(segment, slot)`.
    fn scan_slots(&self, cursor: u64, count: usize, mut emit: impl FnMut(&Segment, u64)) -> u64 {
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
            let want = count - n;
            if items.len() > want {
                items.select_nth_unstable_by_key(want - 1, |&s| tag_of(s));
                let last = tag_of(items[want - 1]);
                for &s in items.iter().filter(|&&s| tag_of(s) <= last) {
                    emit(seg, s);
                }
                if last + 1 < 1 << TAG_BITS {
                    let base = if d == 0 { 0 } else { prefix << (64 - d) };
                    return base | ((last + 1) << (64 - TAG_BITS - d));
                }
                n = count;
            } else {
                items.iter().for_each(|&s| emit(seg, s));
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
    pub fn random_key(&self, r: u64) -> Option<std::borrow::Cow<'_, [u8]>> {
        if self.len == 0 {
            return None;
        }
        let mut r = r;
        for _ in 0..64 {
            r = r.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(0x1405_7B7E_F767_814F);
            let x = r ^ (r >> 29);
            let seg = &self.segs[self.pick_segment(x)];
            if seg.len == 0 {
                continue;
            }
            let n = seg.slots.len();
            let start = ((x >> 32) % n as u64) as usize;
            let s = (0..n).map(|i| seg.slots[(start + i) % n]).find(|&s| s != 0)?;
            return Some(self.slot_key(s));
        }
        let s = self.segs.iter().flat_map(|g| g.slots.iter()).copied().find(|&s| s != 0)?;
        Some(self.slot_key(s))
    }
}
