//! Point-in-time snapshots of a `Db` without fork: the machinery BGSAVE
//! and AOF rewrite stand on (docs/design/keyspace.md, "Snapshots").
//!
//! Redis forks and lets copy-on-write keep the image, which can double
//! memory under writes. Here the executor serializes the table itself, a
//! few segments per `snapshot_step` between commands, into a
//! `SnapshotSink`; a write to a segment the snapshot has not reached yet
//! first serializes that whole segment (the pre-write rule), so what the
//! sink receives is the Db as it was at `snapshot_begin`, and the extra
//! memory is what the sink buffers, not a copy of the data.
//!
//! Which segments are pending is one mark per segment (`Db::marks`, the
//! epoch of the last snapshot that serialized it) against the Db's epoch,
//! which `snapshot_begin` bumps: starting is O(1). Steps walk `segs` (not
//! the directory, whose duplicate entries would repeat a segment) from a
//! cursor, skipping segments a write already serialized. A split copies
//! the mark to both halves (table.rs); the new half goes to the end of
//! `segs`, where the cursor has yet to pass. Collections in the object
//! table are reached through their key's slot, so one goes out whole with
//! its segment.
//!
//! Every mutation calls a pre-write hook before it changes keys or values:
//! with no snapshot running that is one predictable branch on `Db::snap`.
//! A write to one key in a pending segment gives the sink that key, and
//! the few others of its segment that share its tag (`pre_write_slot`; a
//! key about to be created gives only those, `pre_write_new`), and sets
//! the tag's bit in the segment's `TagBits`; the segment's step skips the
//! keys whose tag bit is set. Every key with a given tag sits in that
//! tag's two candidate buckets, so they are found without hashing, and a
//! set bit means each of them, and any key created with that tag since,
//! is handled. So a write pays for about one key, not its segment's 2,000:
//! with writes spread over the keyspace, serializing whole segments ran
//! most of a save on the executor in its first milliseconds, stalling
//! clients for as long (docs/design/keyspace.md, "Snapshots"). The bitmap
//! is 2 KiB per pending segment written to, freed when the step gets
//! there. Writes that touch many keys of a segment at once (active field
//! expiry of inline hashes) still serialize the whole segment (`pre_write`).
//! `clear` during a snapshot does not
//! serialize what is left (that could stall the executor for seconds): it
//! hands the old table to the snapshot (`detach`), which serializes its
//! pending segments and frees it a segment at a time in later steps, and
//! the Db goes on with a fresh table that is no part of the image.
//!
//! Not here: the file format (the sink's business), more than one snapshot
//! of a Db at a time, and the server's side (stepping between commands,
//! FLUSHALL ASYNC and SWAPDB during a snapshot).

use super::{Db, Detached, Snap, SnapshotSink, TagBits};
use crate::blob::Body;
use crate::segment::{addr_of, tag_at, tag_of, BUCKET, TAG_BITS};
use crate::slab::jemalloc_size;

/// How many slots ahead of the one it serializes a step asks for a blob
/// (`Slab::prefetch`): enough misses in flight to hide the memory's latency.
const PREFETCH_AHEAD: usize = 16;

impl Db {
    /// Starts a snapshot into `sink`: from now on, `snapshot_step` feeds
    /// the sink the Db's content as it is now, whatever writes come
    /// between steps. O(1).
    ///
    /// Panics: when a snapshot is already running (`snapshot_running`).
    pub fn snapshot_begin(&mut self, sink: Box<dyn SnapshotSink>) {
        assert!(self.snap.is_none(), "snapshot_begin: a snapshot is already running");
        // An edit made through `get_mut` before now belongs to the image.
        self.flush();
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Wrapped: no old mark may equal the new epoch.
            self.marks.fill(0);
            self.epoch = 1;
        }
        self.written = vec![None; self.segs.len()];
        self.snap = Some(Box::new(Snap { sink, next: 0, detached: Vec::new() }));
    }

    /// True while a snapshot is running (from `snapshot_begin` to
    /// `snapshot_end` or `snapshot_abort`).
    pub fn snapshot_running(&self) -> bool {
        self.snap.is_some()
    }

    /// Serializes pending segments into the sink until about `max_entries`
    /// keys went out (whole segments, so up to one segment, about 2,000
    /// keys, more; freeing a detached table's keys counts too). Returns
    /// true when the snapshot is complete; then `snapshot_end` hands the
    /// sink back.
    ///
    /// Panics: when no snapshot is running.
    pub fn snapshot_step(&mut self, max_entries: usize) -> bool {
        assert!(self.snap.is_some(), "snapshot_step: no snapshot running");
        self.flush();
        let mut snap = self.snap.take().expect("checked above");
        let mut work = 0;
        while work < max_entries.max(1) {
            // Detached tables first: draining them gives memory back.
            if let Some(d) = snap.detached.first_mut() {
                if d.next == d.db.segs.len() {
                    snap.detached.remove(0);
                    continue;
                }
                let si = d.next;
                d.next += 1;
                if d.db.marks[si] != d.db.epoch {
                    work += d.db.emit_segment(si, &mut *snap.sink);
                }
                work += d.db.free_segment(si);
                continue;
            }
            self.skip_serialized(&mut snap);
            let si = snap.next;
            if si == self.segs.len() {
                break;
            }
            work += self.emit_segment(si, &mut *snap.sink);
            self.marks[si] = self.epoch;
            snap.next += 1;
        }
        let done = self.snapshot_done(&mut snap);
        self.snap = Some(snap);
        done
    }

    /// Ends a complete snapshot and hands its sink back, so the caller can
    /// finish the file. Returns None, and the snapshot goes on, when none
    /// is running or it is not complete (a write since the last step may
    /// have detached a table: step again).
    pub fn snapshot_end(&mut self) -> Option<Box<dyn SnapshotSink>> {
        let mut snap = self.snap.take()?;
        if !self.snapshot_done(&mut snap) {
            self.snap = Some(snap);
            return None;
        }
        self.written = Vec::new();
        Some(snap.sink)
    }

    /// Stops the snapshot where it is and hands its sink back (None when
    /// none is running). Tables `clear` detached into it are freed at
    /// once, as a blocking FLUSHALL would have.
    pub fn snapshot_abort(&mut self) -> Option<Box<dyn SnapshotSink>> {
        self.written = Vec::new();
        self.snap.take().map(|s| s.sink)
    }

    /// Empties the Db like `clear` and returns the old table for the caller
    /// to free (FLUSHALL ASYNC frees it on another thread), or None when a
    /// running snapshot took it: the snapshot still needs its pending
    /// segments, and frees it a segment at a time as it goes. Settings
    /// (`no_touch`, `keep_expired`, `log_events`, `access`) and slot mode
    /// stay with the Db.
    pub fn detach(&mut self) -> Option<Db> {
        self.pending = None;
        let mut fresh = Db { epoch: self.epoch, ..self.empty_like() };
        // The fresh table holds nothing of the image: serialized already.
        fresh.marks[0] = self.epoch;
        fresh.snap = self.snap.take();
        let old = std::mem::replace(self, fresh);
        match self.snap.as_deref_mut() {
            Some(snap) => {
                snap.detached.push(Detached { db: Box::new(old), next: 0 });
                snap.next = 0;
                None
            }
            None => Some(old),
        }
    }

    /// The pre-write rule: serializes segment `si` if the running snapshot
    /// has yet to. Every mutation calls it before touching the segment's
    /// keys or values; with no snapshot it is one branch.
    #[inline]
    pub(super) fn pre_write(&mut self, si: usize) {
        if self.snap.is_some() {
            self.pre_write_slow(si);
        }
    }

    /// The pre-write rule for one stored key, the one at slot `pos` of
    /// segment `si`: gives it (and its tag's other keys) to the running
    /// snapshot if that has yet to. Every mutation of one key calls it (or
    /// `pre_write_new`) first.
    #[inline]
    pub(super) fn pre_write_slot(&mut self, si: usize, pos: usize) {
        if self.snap.is_some() {
            self.pre_write_tag(si, tag_of(self.segs[si].slots[pos]));
        }
    }

    /// The pre-write rule for a key of hash `h` about to be created in
    /// segment `si`: the snapshot must not give it.
    #[inline]
    pub(super) fn pre_write_new(&mut self, si: usize, h: u64) {
        if self.snap.is_some() {
            self.pre_write_tag(si, tag_at(h, self.segs[si].depth as u32));
        }
    }

    /// `pre_write_slot` for `key`, for callers that hold a key rather than
    /// a slot (active field expiry of a hash in the object table).
    pub(super) fn pre_write_key(&mut self, key: &[u8]) {
        if self.snap.is_some() {
            let (h, si, _) = self.find(key);
            self.pre_write_tag(si, tag_at(h, self.segs[si].depth as u32));
        }
    }

    /// True when the running snapshot handled the keys of segment `si`
    /// with tag `tag` one by one.
    pub(super) fn handled(&self, si: usize, tag: u64) -> bool {
        self.written.get(si).and_then(|w| w.as_deref()).is_some_and(|w| w[(tag >> 6) as usize] & (1 << (tag & 63)) != 0)
    }

    #[cold]
    #[inline(never)]
    fn pre_write_tag(&mut self, si: usize, tag: u64) {
        if self.marks[si] == self.epoch || self.handled(si, tag) {
            return;
        }
        let bits = self.written[si].get_or_insert_with(|| Box::new([0; 1 << (TAG_BITS - 6)]));
        bits[(tag >> 6) as usize] |= 1 << (tag & 63);
        // The keys with this tag: at most the two candidate buckets' slots.
        let mut keys = [0u64; 2 * BUCKET];
        let mut n = 0;
        self.segs[si].find(tag, |s| {
            keys[n] = s;
            n += 1;
            false
        });
        if n > 0 {
            let mut snap = self.snap.take().expect("called with a snapshot running");
            for &s in &keys[..n] {
                self.emit_slot(s, &mut *snap.sink);
            }
            self.snap = Some(snap);
        }
    }

    /// Split hook (table.rs): segment `si`, of depth `d` before the split,
    /// kept the keys whose hash bit after the prefix is 0 and `ri` (just
    /// pushed) took the others. A key's tag in its half is its old tag
    /// shifted left one bit, the bit that chose the half falling off the
    /// top and the next hash bit coming in, so each half's bit for tag t
    /// is the old bit for (half << 13) | (t >> 1).
    pub(super) fn split_written(&mut self, si: usize, ri: usize) {
        if self.written.is_empty() {
            return;
        }
        debug_assert_eq!(ri, self.written.len(), "the new half is the last segment");
        let Some(old) = self.written[si].take() else {
            self.written.push(None);
            return;
        };
        let half = |side: usize| -> Box<TagBits> {
            let mut b: Box<TagBits> = Box::new([0; 1 << (TAG_BITS - 6)]);
            let top = side << (TAG_BITS - 1);
            for t in 0..1usize << TAG_BITS {
                let o = top | (t >> 1);
                if old[o >> 6] & (1 << (o & 63)) != 0 {
                    b[t >> 6] |= 1 << (t & 63);
                }
            }
            b
        };
        self.written[si] = Some(half(0));
        self.written.push(Some(half(1)));
    }

    #[cold]
    #[inline(never)]
    fn pre_write_slow(&mut self, si: usize) {
        if self.marks[si] == self.epoch {
            return;
        }
        let mut snap = self.snap.take().expect("called with a snapshot running");
        self.emit_segment(si, &mut *snap.sink);
        self.marks[si] = self.epoch;
        self.snap = Some(snap);
    }

    /// Moves the live table's cursor past segments already serialized.
    fn skip_serialized(&self, snap: &mut Snap) {
        while snap.next < self.segs.len() && self.marks[snap.next] == self.epoch {
            snap.next += 1;
        }
    }

    /// True when `snap` has nothing left to serialize or free.
    fn snapshot_done(&self, snap: &mut Snap) -> bool {
        self.skip_serialized(snap);
        snap.detached.is_empty() && snap.next == self.segs.len()
    }

    /// Gives every key of segment `si` to `sink` but those the snapshot
    /// handled one by one (their tag's bit, dropped here); returns how
    /// many keys were looked at.
    fn emit_segment(&mut self, si: usize, sink: &mut dyn SnapshotSink) -> usize {
        let written = self.written.get_mut(si).and_then(Option::take);
        let slots = &self.segs[si].slots;
        let mut n = 0;
        for (i, &s) in slots.iter().enumerate() {
            if let Some(&ahead) = slots.get(i + PREFETCH_AHEAD) {
                if ahead != 0 {
                    self.slab.prefetch(addr_of(ahead));
                }
            }
            if s == 0 {
                continue;
            }
            n += 1;
            let t = tag_of(s);
            if written.as_ref().is_some_and(|w| w[(t >> 6) as usize] & (1 << (t & 63)) != 0) {
                continue;
            }
            self.emit_slot(s, sink);
        }
        n
    }

    /// Gives the key of slot `s` to `sink`.
    fn emit_slot(&self, s: u64, sink: &mut dyn SnapshotSink) {
        let b = self.blob(s);
        let key = self.raw_key(&b);
        self.with_value(s, |v| sink.entry(&key, v, b.deadline));
    }

    /// Frees every key of segment `si` of a detached table, and its slot
    /// array; returns how many keys. Only for a table no one reads again:
    /// counters and indexes are dropped with it, not kept in step (the
    /// field-expiry entries go here, so the final drop stays small).
    fn free_segment(&mut self, si: usize) -> usize {
        let slots = std::mem::take(&mut self.segs[si].slots);
        let mut n = 0;
        for &s in slots.iter().filter(|&&s| s != 0) {
            if let Body::Obj(i) = self.blob(s).body() {
                if let Some(t) = self.fexp_at.remove(&i) {
                    self.fexp.remove(&(t, i));
                }
                drop(self.objs[i as usize].take());
            }
            self.slab.free(addr_of(s));
            n += 1;
        }
        let seg = &mut self.segs[si];
        seg.len = 0;
        seg.volatile = 0;
        self.len -= n;
        n
    }

    /// Bytes a running snapshot holds beside the Db's own table: its state
    /// and the tables detached into it (not what its sink buffers).
    pub(super) fn snapshot_bytes(&self) -> usize {
        self.snap.as_ref().map_or(0, |snap| {
            self.written_bytes()
                + jemalloc_size(size_of::<Snap>())
                + jemalloc_size(snap.detached.capacity() * size_of::<Detached>())
                + snap.detached.iter().map(|d| jemalloc_size(size_of::<Db>()) + d.db.allocated_bytes() + d.db.written_bytes()).sum::<usize>()
        })
    }

    /// Bytes of the per-segment tag bitmaps and their index.
    fn written_bytes(&self) -> usize {
        if self.written.is_empty() {
            return 0;
        }
        jemalloc_size(self.written.capacity() * 8) + self.written.iter().flatten().count() * jemalloc_size(size_of::<TagBits>())
    }
}
