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
//!
//! Slot mode (Redis Cluster, slots.rs) changes only the hash and the
//! directory's shape. A key's table hash is its hash slot in the top 14
//! bits and 50 bits of its ordinary hash below (`slot_hash`), so each
//! slot's keys are one run of hash space: segments of depth up to 14 hold
//! whole slots (several, while the table is small), deeper ones part of
//! one slot. The top-level directory grows as a standalone one does but
//! stops at depth 14, one entry per slot; a slot whose keys outgrow one
//! segment then gets a directory of its own (`SubDir`), indexed by the
//! hash bits after the slot. One global depth would let a single hot slot
//! (a million keys under one hash tag) double the whole directory to 2^24
//! entries.

use super::{Db, Hand, SubDir, PREFETCH_MAX, SUB};
use crate::segment::{addr_of, hash, tag_at, tag_of, Segment, TAG_BITS};
use crate::slab::prefetch_bytes;
use crate::slot::{key_hash_slot, SLOTS};

/// Deepest directory: a segment's prefix plus its 14 tag bits fit in 64 bits.
const MAX_DEPTH: u32 = 64 - TAG_BITS;


/// Hash bits that name a key's slot in slot mode (2^14 = `SLOTS`).
pub(super) const SLOT_BITS: u32 = 14;
const _: () = assert!(1 << SLOT_BITS == SLOTS);

/// The table hash of `key` in slot mode: its Redis Cluster hash slot in
/// the top 14 bits, the top 50 bits of its ordinary hash below them (well
/// mixed, for the tags and buckets inside segments).
pub(super) fn slot_hash(key: &[u8]) -> u64 {
    (u64::from(key_hash_slot(key)) << (64 - SLOT_BITS)) | (hash(key) >> SLOT_BITS)
}

impl Db {
    /// The table hash of `key`: `segment::hash`, or in slot mode
    /// `slot_hash` (one predictable branch).
    #[inline]
    pub(super) fn key_hash(&self, key: &[u8]) -> u64 {
        if self.slot_index.is_none() {
            hash(key)
        } else {
            slot_hash(key)
        }
    }

    /// The segment that holds the keys of hash `h`.
    #[inline]
    pub(super) fn seg_of(&self, h: u64) -> usize {
        let e = if self.depth == 0 { self.dir[0] } else { self.dir[(h >> (64 - self.depth)) as usize] };
        if e & SUB == 0 {
            e as usize
        } else {
            self.sub_seg(e, h)
        }
    }

    /// `seg_of` through a slot's own directory (slot mode).
    #[cold]
    fn sub_seg(&self, e: u32, h: u64) -> usize {
        let sub = &self.slot_index.as_ref().expect("SUB entries only in slot mode").subs[(e & !SUB) as usize];
        sub.dir[((h << SLOT_BITS) >> (64 - sub.depth)) as usize] as usize
    }

    /// A segment picked by the random `r`, about in proportion to its keys
    /// (eviction samples, RANDOMKEY). Standalone, a random directory entry:
    /// a segment's share of the entries is its share of hash space, so of
    /// the keys. In slot mode hash space is not keys (a hot slot holds
    /// many in a sliver of it), so a random segment, kept with probability
    /// `len / 2,048` (a full segment's size), up to 16 draws; the last
    /// one otherwise.
    pub(super) fn pick_segment(&self, r: u64) -> usize {
        if self.slot_index.is_none() {
            return self.dir[(r % self.dir.len() as u64) as usize] as usize;
        }
        let mut x = r;
        let mut si = 0;
        for _ in 0..16 {
            // splitmix64's finalizer over a Weyl sequence.
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            si = (z % self.segs.len() as u64) as usize;
            if (z >> 40) % 2048 < u64::from(self.segs[si].len) {
                break;
            }
        }
        si
    }

    /// Finds `key`: (hash, segment, slot index if stored).
    pub(super) fn find(&self, key: &[u8]) -> super::Found {
        let h = self.key_hash(key);
        let si = self.seg_of(h);
        let seg = &self.segs[si];
        let pos = seg.find(tag_at(h, seg.depth as u32), |s| self.holds_key(s, key));
        (h, si, pos)
    }

    /// Asks the CPU to start loading what looking up `keys` will read, for
    /// a batch of commands about to run: first each key's two candidate
    /// buckets, then, once those are on their way, the blob of the first
    /// slot whose tag matches. With a keyspace larger than the caches each
    /// lookup otherwise waits for two misses in turn (bucket, then blob),
    /// most of a GET's or SET's time on the executor; issued together for
    /// the batch, the misses overlap. A hint only: no effect on any value.
    /// At most `PREFETCH_MAX` keys are taken.
    pub fn prefetch(&self, keys: &[&[u8]]) {
        let keys = &keys[..keys.len().min(PREFETCH_MAX)];
        let mut at = [(0u64, 0usize); PREFETCH_MAX];
        for (k, slot) in keys.iter().zip(at.iter_mut()) {
            let h = self.key_hash(k);
            let si = self.seg_of(h);
            let seg = &self.segs[si];
            for r in seg.candidates(tag_at(h, seg.depth as u32)) {
                prefetch_bytes(&seg.slots[r], 1);
            }
            *slot = (h, si);
        }
        for &(h, si) in &at[..keys.len()] {
            let seg = &self.segs[si];
            let tag = tag_at(h, seg.depth as u32);
            // The first slot with the tag, in the order `find` looks:
            // the key's own but for a tag collision (16 slots against 14
            // bits of tag), so the scan stops there.
            let first = seg.candidates(tag).into_iter().flatten().map(|i| seg.slots[i]).find(|&s| s != 0 && tag_of(s) == tag);
            if let Some(s) = first {
                prefetch_bytes(self.slab.bytes(addr_of(s)), 2);
            }
        }
    }

    /// Makes room for about `n` keys in an empty table: as many segments as
    /// a table grown to `n` keys would have, each sized for its share.
    /// Loading a dump this table wrote feeds keys in hash order, so one
    /// young segment at a time takes a narrow run of hashes, fills, grows
    /// and splits: presized, each key goes straight to its final segment
    /// (a third of the load time went to inserting and splitting before).
    /// Does nothing to a table that holds keys or was ever split.
    ///
    /// In slot mode the segments are made (up to one per slot) but not
    /// sized: a node holds only its own slots, usually a fraction of hash
    /// space, so sizing every segment for an even share would leave most
    /// of them empty at full size. Each segment grows in place as its keys
    /// come (growth re-places slots without reading a blob); only the
    /// splits are saved.
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
        let slots = self.slot_index.is_some();
        let depth = if slots { depth.min(SLOT_BITS) } else { depth };
        let count = 1usize << depth;
        // Sized for a load of 0.95 (with_room aims at 0.8; its size classes
        // round up, to 0.76-0.95): a table grown key by key sits near 0.9,
        // and a segment its share overflows grows as it would have.
        let room = if slots { 0 } else { (n / count) * 84 / 100 };
        self.segs = (0..count).map(|_| Segment::with_room(depth as u8, room)).collect();
        self.dir = (0..count as u32).collect();
        self.depth = depth;
        self.marks = vec![self.marks[0]; count];
        self.hand = Hand { seg: 0, pos: 0, shape: 0, min: i64::MAX };
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
        // A hash of one of its keys locates the segment's directory entries.
        let he = self.key_hash(&self.slot_key(extra));
        let old = std::mem::replace(&mut self.segs[si], Segment::with_room(0, 0));
        let items: Vec<u64> = old.slots.iter().copied().filter(|&s| s != 0).chain([extra]).collect();
        let mut kids = [Segment::with_room(d as u8 + 1, items.len() / 2), Segment::with_room(d as u8 + 1, items.len() / 2)];
        let mut left_out = Vec::new();
        for s in items {
            let h = self.key_hash(&self.slot_key(s));
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
        self.point_right_half(si, d, he, ri);
        for s in left_out {
            let h = self.key_hash(&self.slot_key(s));
            let si = self.seg_of(h);
            let ns = (s & !((1 << TAG_BITS) - 1)) | tag_at(h, self.segs[si].depth as u32);
            self.insert_slot(si, ns);
        }
    }

    /// Split hook: segment `si`, of depth `d` before the split and holding
    /// hash `h`, kept the left half of its hash range and `ri` took the
    /// right one; points the directory entries of the right half at `ri`,
    /// doubling the directory that holds them first when `si` was as deep
    /// as it. In slot mode a segment of depth 14 or more is within one
    /// slot, and the top-level directory is 14 deep and stays so: the
    /// segment's entries are in that slot's `SubDir` (made at the slot's
    /// first split, from its one top-level entry).
    fn point_right_half(&mut self, si: usize, d: u32, h: u64, ri: u32) {
        if let Some(ix) = self.slot_index.as_deref_mut().filter(|_| d >= SLOT_BITS) {
            debug_assert_eq!(self.depth, SLOT_BITS, "a segment of a slot's depth makes the directory one entry a slot");
            let slot = (h >> (64 - SLOT_BITS)) as usize;
            let e = self.dir[slot];
            if e & SUB == 0 {
                debug_assert_eq!((e as usize, d), (si, SLOT_BITS), "a slot's one segment");
                self.dir[slot] = SUB | u32::try_from(ix.subs.len()).expect("fewer than 2^31 directories");
                ix.subs.push(SubDir { depth: 1, dir: vec![si as u32, ri] });
                return;
            }
            let sub = &mut ix.subs[(e & !SUB) as usize];
            point_in(&mut sub.dir, &mut sub.depth, h << SLOT_BITS, si, d - SLOT_BITS, ri);
            return;
        }
        point_in(&mut self.dir, &mut self.depth, h, si, d, ri);
    }
}

/// `Db::point_right_half` in one directory of `2^depth` entries indexed by
/// the top bits of `h`, for a segment `si` of local depth `d` (its depth
/// counted from that directory's first bit).
fn point_in(dir: &mut Vec<u32>, depth: &mut u32, h: u64, si: usize, d: u32, ri: u32) {
    if d == *depth {
        *dir = dir.iter().flat_map(|&x| [x, x]).collect();
        *depth += 1;
    }
    let span = 1usize << (*depth - d);
    let start = (h >> (64 - *depth)) as usize & !(span - 1);
    debug_assert_eq!(dir[start] as usize, si, "the segment's entries start here");
    for x in &mut dir[start + span / 2..start + span] {
        *x = ri;
    }
}
