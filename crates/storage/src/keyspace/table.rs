//! The key table: an extendible hash of segments, and where a key's slot is.
//!
//! A directory indexed by the top `depth` bits of the key hash points at
//! segments (`crate::segment`); a full segment grows in small steps and, at
//! its largest size, splits alone, so there is no whole-table rehash. A
//! slot holds the key's hash tag and its blob's address; what the blob
//! holds is the core's business (mod.rs).
//!
//! Kept apart because growth is the one place keys are re-hashed, and the
//! SCAN cursor (scan.rs) relies on it: a split sends each key to the half
//! its next hash bit names, so no key moves across hash order.

use super::Db;
use crate::blob::Blob;
use crate::segment::{addr_of, hash, tag_at, tag_of, Segment, TAG_BITS};

/// Deepest directory: a segment's prefix plus its 14 tag bits fit in 64 bits.
const MAX_DEPTH: u32 = 64 - TAG_BITS;

impl Db {
    /// The segment that holds the keys of hash `h`.
    pub(super) fn seg_of(&self, h: u64) -> usize {
        if self.depth == 0 {
            self.dir[0] as usize
        } else {
            self.dir[(h >> (64 - self.depth)) as usize] as usize
        }
    }

    /// Finds `key`: (hash, segment, slot index if stored).
    pub(super) fn find(&self, key: &[u8]) -> (u64, usize, Option<usize>) {
        let h = hash(key);
        let si = self.seg_of(h);
        let seg = &self.segs[si];
        let pos = seg.find(tag_at(h, seg.depth as u32), |s| Blob::key_of(self.slab.bytes(addr_of(s))) == key);
        (h, si, pos)
    }

    /// Makes room for about `n` keys in an empty table: as many segments as
    /// a table grown to `n` keys would have, each sized for its share.
    /// Loading a dump this table wrote feeds keys in hash order, so one
    /// young segment at a time takes a narrow run of hashes, fills, grows
    /// and splits: presized, each key goes straight to its final segment
    /// (a third of the load time went to inserting and splitting before).
    /// Does nothing to a table that holds keys or was ever split.
    pub fn reserve(&mut self, n: usize) {
        if self.len != 0 || self.segs.len() != 1 || self.snap.is_some() {
            return;
        }
        // A grown segment holds up to 2,048 slots at a load near 0.9.
        const PER_SEGMENT: usize = 1_800;
        let depth = n.div_ceil(PER_SEGMENT).next_power_of_two().trailing_zeros().min(20);
        if depth == 0 {
            return;
        }
        let count = 1usize << depth;
        // Sized for a load of 0.95 (with_room aims at 0.8; its size classes
        // round up, to 0.76-0.95): a table grown key by key sits near 0.9,
        // and a segment its share overflows grows as it would have.
        let room = (n / count) * 84 / 100;
        self.segs = (0..count).map(|_| Segment::with_room(depth as u8, room)).collect();
        self.dir = (0..count as u32).collect();
        self.depth = depth;
        self.marks = vec![self.marks[0]; count];
        self.hand = super::Hand { seg: 0, pos: 0, shape: 0, min: i64::MAX };
    }

    /// Puts a new slot into segment `si`, growing or splitting it when full.
    ///
    /// A segment that is not at its largest size grows, unless the slot
    /// that did not fit has a whole bucket's worth of keys sharing its tag:
    /// a key's two buckets depend on its tag alone, so no size would make
    /// room, and only a split (which moves the tag window one bit on) can.
    /// That happens when keys arrive in hash order, as when loading a dump
    /// this table wrote: a young segment then holds a narrow run of hashes.
    pub(super) fn insert_slot(&mut self, si: usize, s: u64) {
        if let Err(held) = self.segs[si].insert(s) {
            let seg = &mut self.segs[si];
            if seg.depth as u32 >= MAX_DEPTH || (!seg.at_max() && !seg.crowded(tag_of(held))) {
                seg.grow(held);
            } else {
                self.split(si, held);
            }
        }
    }

    /// Splits segment `si` into two of one more bit of depth; `extra` is a
    /// slot that did not fit. Keys are re-hashed here (and only here) to read
    /// the next bit and their new tags. A key that fits in neither half
    /// (its tag still crowded) goes in afterwards through `insert_slot`,
    /// which may split that half again.
    fn split(&mut self, si: usize, extra: u64) {
        let d = self.segs[si].depth as u32;
        if d == self.depth {
            self.dir = self.dir.iter().flat_map(|&x| [x, x]).collect();
            self.depth += 1;
        }
        let old = std::mem::replace(&mut self.segs[si], Segment::with_room(0, 0));
        let items: Vec<u64> = old.slots.iter().copied().filter(|&s| s != 0).chain([extra]).collect();
        let mut kids = [Segment::with_room(d as u8 + 1, items.len() / 2), Segment::with_room(d as u8 + 1, items.len() / 2)];
        let mut left_out = Vec::new();
        for s in items {
            let h = hash(Blob::key_of(self.slab.bytes(addr_of(s))));
            let kid = &mut kids[((h << d) >> 63) as usize];
            let ns = (s & !((1 << TAG_BITS) - 1)) | tag_at(h, d + 1);
            if let Err(held) = kid.insert(ns) {
                if kid.crowded(tag_of(held)) {
                    left_out.push(held);
                } else {
                    kid.grow(held);
                }
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
        // Both halves keep the snapshot mark: pending stays pending,
        // serialized stays serialized (snapshot.rs).
        self.marks.push(self.marks[si]);
        self.split_written(si, ri as usize);
        if old.field_min != i64::MAX {
            self.fexp_segs.insert((old.field_min, ri));
        }
        let start = self.dir.iter().position(|&x| x as usize == si).expect("segment in directory");
        let span = 1usize << (self.depth - d);
        for x in &mut self.dir[start + span / 2..start + span] {
            *x = ri;
        }
        for s in left_out {
            let h = hash(Blob::key_of(self.slab.bytes(addr_of(s))));
            let si = self.seg_of(h);
            let ns = (s & !((1 << TAG_BITS) - 1)) | tag_at(h, self.segs[si].depth as u32);
            self.insert_slot(si, ns);
        }
    }
}
