//! Key deadlines and active expiry.
//!
//! A key's deadline lives in its blob (only when it has one) and the TTL bit
//! of its slot. Each segment keeps a lower bound of its keys' deadlines
//! (`Segment::min_deadline`), lowered by `note_deadline` on every store, so
//! `active_expire` skips segments with nothing due. It resumes where the
//! last call stopped (`Db::hand`) and examines at most `budget` keys a call;
//! a segment that grew or split since (its `shape` changed) is restarted
//! from its first slot, and a segment walked to the end gets an exact
//! bound again.
//!
//! Lazy expiry, a due key found on access, is in the core (`Db::live`).
//! `Hand` is declared in mod.rs with the other field types of `Db`.

use super::{Db, Hand};
use crate::blob::{self, Blob};
use crate::segment::{addr_of, clock_of, make_slot, tag_of, TTL_BIT};

/// Blobs up to this long are copied on the stack by `rewrite_deadline`.
const SMALL_COPY: usize = 256;

impl Db {
    /// Lowers segment `si`'s deadline bound to `t` (and that of the pass
    /// active expiry has under way, if it is in that segment).
    pub(super) fn note_deadline(&mut self, si: usize, t: i64) {
        let seg = &mut self.segs[si];
        seg.min_deadline = seg.min_deadline.min(t);
        if self.hand.seg == si {
            self.hand.min = self.hand.min.min(t);
        }
    }

    /// Deadline of a live key: None if absent, Some(None) if it has none.
    pub fn expire_of(&mut self, key: &[u8], now: i64) -> Option<Option<i64>> {
        let (si, pos) = self.live(key, now)?;
        Some(self.blob(self.segs[si].slots[pos]).deadline)
    }

    /// Sets the deadline of a live key (None removes it). Returns false if absent.
    pub fn set_expire(&mut self, key: &[u8], expire: Option<i64>, now: i64) -> bool {
        let Some((si, pos)) = self.live(key, now) else { return false };
        self.pre_write_slot(si, pos);
        self.rewrite_deadline(si, pos, expire);
        true
    }

    /// Rewrites the blob at (si, pos) with a new deadline. The value is the
    /// same one, so a string's raw mark (`rawmark.rs`) moves with it, as
    /// Redis keeps the same object when only the TTL changes.
    fn rewrite_deadline(&mut self, si: usize, pos: usize, deadline: Option<i64>) {
        let s = self.segs[si].slots[pos];
        // A copy, as the new blob may go over the old one's bytes; on the
        // stack for a blob of a small class (most keys), so no allocation.
        let (mut small, large);
        let bytes = self.slab.bytes(addr_of(s));
        let copy: &[u8] = if bytes.len() <= SMALL_COPY {
            small = [0u8; SMALL_COPY];
            small[..bytes.len()].copy_from_slice(bytes);
            &small[..bytes.len()]
        } else {
            large = bytes.to_vec();
            &large
        };
        let b = Blob::parse(copy);
        if let crate::blob::Body::Packed(p) = b.body() {
            // The same packed bytes go into the new blob: count them
            // before the old one's release could free their table.
            self.packs.retain(p);
        }
        self.release_blob(s);
        let key = self.raw_key(&b);
        let addr = self.store_blob(si, &key, b.body(), deadline, Some(addr_of(s)));
        if blob::is_marked_raw(copy) {
            blob::mark_raw(self.slab.bytes_mut(addr));
        }
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
                        on_expired(&self.raw_key(&b));
                        self.pre_write_slot(si, pos);
                        let gone = self.delete(si, pos);
                        self.discard(gone, self.lazy_expire);
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
