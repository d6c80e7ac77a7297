//! Slot mode: the keyspace of a Redis Cluster node knows each key's hash
//! slot (`crate::slot`), for CLUSTER COUNTKEYSINSLOT, GETKEYSINSLOT and
//! SLOT-STATS, and for moving or dropping every key of a slot.
//!
//! Nothing is stored per key. In slot mode a key's table hash carries its
//! slot in the top 14 bits (`table::slot_hash`), so a slot's keys are one
//! run of hash space: one segment, shared with neighbouring slots while
//! the table is small (a slot's keys are then those whose tag starts with
//! the slot's low bits), or a run of segments under the slot's own
//! directory (table.rs). What slot mode adds per Db is a count of keys
//! per slot (64 KiB), and a small directory per slot that outgrew a
//! segment; the top-level directory grows as a standalone one does, to at
//! most one entry a slot (64 KiB).
//! The counts change where `Db::len` does: `insert` of a new key and
//! `delete` (every removal: DEL, lazy and active expiry, eviction, an
//! emptied collection); `clear` and `detach` start a fresh index.
//!
//! A standalone Db has no index (`Db::slot_index` is None): it pays one
//! predictable branch on the lookup and delete paths and no byte a key.
//! Slot mode is chosen once, on an empty Db (`Db::with_slots`,
//! `Db::enable_slots`), and kept by `clear`, `detach` and `empty_like`.
//!
//! `SlotIndex` is declared in mod.rs with the other types of `Db`'s fields.

use super::{Db, SlotIndex, SUB};
use crate::segment::{tag_of, Segment};
use crate::slab::jemalloc_size;
use crate::slot::{key_hash_slot, SLOTS};

use super::table::SLOT_BITS;

impl Db {
    /// An empty database in slot mode (`enable_slots`).
    pub fn with_slots() -> Db {
        let mut db = Db::new();
        db.enable_slots();
        db
    }

    /// Turns slot mode on: from now on the Db keeps a count of keys per
    /// Redis Cluster hash slot and can list a slot's keys
    /// (`count_keys_in_slot`, `keys_in_slot`, `slot_counts_nonzero`), at
    /// the cost of 64 KiB for the Db and no byte a key. Settings are
    /// kept. Does nothing if slot mode is on already.
    ///
    /// Panics: when the Db holds a key or a snapshot is running (the
    /// table's hash changes with the mode, so keys would be lost).
    pub fn enable_slots(&mut self) {
        assert!(self.len == 0 && self.snap.is_none(), "enable_slots: on an empty Db with no snapshot running");
        if self.slot_index.is_some() {
            return;
        }
        // Deleted keys may have left segments, splits and index entries.
        if self.segs.len() > 1 || !self.fexp_segs.is_empty() {
            drop(self.detach());
        }
        self.slot_index = Some(Box::new(SlotIndex { counts: vec![0; SLOTS].into_boxed_slice(), subs: Vec::new() }));
    }

    /// True in slot mode.
    pub fn slots_enabled(&self) -> bool {
        self.slot_index.is_some()
    }

    /// An empty database in the same mode (standalone or slots) and with
    /// the same settings (`no_touch`, `keep_expired`, `log_events`,
    /// `access`): what a load or a full resync should fill in place of
    /// this one.
    pub fn empty_like(&self) -> Db {
        let mut db = Db { no_touch: self.no_touch, keep_expired: self.keep_expired, log_events: self.log_events, access: self.access, value_compression: self.value_compression, key_compression: self.key_compression, ..Db::default() };
        if self.slot_index.is_some() {
            db.enable_slots();
        }
        db
    }

    /// Number of keys in hash slot `slot`, counting keys past their
    /// deadline not yet reclaimed (as `len`, and as Redis's CLUSTER
    /// COUNTKEYSINSLOT). O(1).
    ///
    /// Panics: when slot mode is off, or `slot` is 16,384 or more.
    pub fn count_keys_in_slot(&self, slot: u16) -> u64 {
        u64::from(self.index().counts[slot as usize])
    }

    /// Up to `count` keys of hash slot `slot` (CLUSTER GETKEYSINSLOT), in
    /// table order. Keys past their deadline but not yet reclaimed are
    /// included, as Redis includes them; nothing is expired or touched.
    /// Calling it again after deleting the keys it gave (a slot being
    /// emptied or migrated) gives the next ones.
    ///
    /// Time: the keys returned, plus a walk of the one segment that holds
    /// the slot (at most 2,048 slot words, no blob read) when the slot
    /// shares a segment with others, or else one check per segment of the
    /// slot the walk passes (a hot slot's emptied segments stay, as the
    /// table never merges segments).
    ///
    /// Panics: when slot mode is off, or `slot` is 16,384 or more.
    pub fn keys_in_slot(&self, slot: u16, count: usize) -> Vec<Vec<u8>> {
        let ix = self.index();
        let want = count.min(ix.counts[slot as usize] as usize);
        let mut out = Vec::with_capacity(want);
        if want == 0 {
            return out;
        }
        let e = self.dir[slot as usize >> (SLOT_BITS - self.depth)];
        if e & SUB == 0 {
            let seg = &self.segs[e as usize];
            let d = seg.depth as u32;
            debug_assert!(d <= SLOT_BITS, "a slot's one segment is no deeper than the slot");
            // In a segment of depth d, a tag's top 14 - d bits are the low
            // bits of its key's slot (all 0 bits when d is 14).
            let mask = (1u64 << (SLOT_BITS - d)) - 1;
            let low = u64::from(slot) & mask;
            self.keys_of(seg, |s| tag_of(s) >> d == low, want, &mut out);
        } else {
            let sub = &ix.subs[(e & !SUB) as usize];
            let mut i = 0;
            while i < sub.dir.len() && out.len() < want {
                let seg = &self.segs[sub.dir[i] as usize];
                i += 1 << (sub.depth - (seg.depth as u32 - SLOT_BITS));
                if seg.len != 0 {
                    self.keys_of(seg, |_| true, want, &mut out);
                }
            }
        }
        debug_assert_eq!(out.len(), want, "the slot's count matches its keys");
        out
    }

    /// Appends to `out` the keys of the occupied slot words of `seg` for
    /// which `mine` holds, until `out` has `want`.
    fn keys_of(&self, seg: &Segment, mine: impl Fn(u64) -> bool, want: usize, out: &mut Vec<Vec<u8>>) {
        for &s in seg.slots.iter() {
            if out.len() == want {
                return;
            }
            if s != 0 && mine(s) {
                out.push(self.slot_key(s).into_owned());
            }
        }
    }

    /// The hash slots that hold at least one key, in slot order, with
    /// their counts (as `count_keys_in_slot`): which slots a node must
    /// empty when it loses them, and CLUSTER SLOT-STATS' key counts.
    /// Walks the 16,384 counts.
    ///
    /// Panics: when slot mode is off.
    pub fn slot_counts_nonzero(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.index().counts.iter().enumerate().filter(|&(_, &n)| n != 0).map(|(i, &n)| (i as u16, u64::from(n)))
    }

    fn index(&self) -> &SlotIndex {
        self.slot_index.as_deref().expect("a slot-mode call on a standalone Db (see enable_slots)")
    }

    /// Counts a new key of table hash `h` (slot mode only).
    pub(super) fn slot_added(&mut self, h: u64) {
        let ix = self.slot_index.as_deref_mut().expect("slot mode");
        ix.counts[(h >> (64 - SLOT_BITS)) as usize] += 1;
    }

    /// Uncounts the key of slot word `s`, just taken from the table but
    /// its blob not yet freed (slot mode only).
    pub(super) fn slot_removed(&mut self, s: u64) {
        let slot = key_hash_slot(&self.slot_key(s)) as usize;
        let ix = self.slot_index.as_deref_mut().expect("slot mode");
        ix.counts[slot] -= 1;
    }

    /// Bytes of the slot index: the counts and the slots' own directories
    /// (the top-level directory is counted with the table).
    pub(super) fn slot_index_bytes(&self) -> usize {
        self.slot_index.as_deref().map_or(0, |ix| {
            jemalloc_size(size_of::<SlotIndex>())
                + jemalloc_size(ix.counts.len() * 4)
                + jemalloc_size(ix.subs.capacity() * size_of::<super::SubDir>())
                + ix.subs.iter().map(|s| jemalloc_size(s.dir.capacity() * 4)).sum::<usize>()
        })
    }
}
