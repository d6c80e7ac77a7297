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
//! Every mutation calls `pre_write(segment)` before it changes the
//! segment's keys or values: with no snapshot running that is one
//! predictable branch on `Db::snap`. `clear` during a snapshot does not
//! serialize what is left (that could stall the executor for seconds): it
//! hands the old table to the snapshot (`detach`), which serializes its
//! pending segments and frees it a segment at a time in later steps, and
//! the Db goes on with a fresh table that is no part of the image.
//!
//! Not here: the file format (the sink's business), more than one snapshot
//! of a Db at a time, and the server's side (stepping between commands,
//! FLUSHALL ASYNC and SWAPDB during a snapshot).

use super::{Db, Detached, Snap, SnapshotSink};
use crate::blob::Body;
use crate::segment::addr_of;
use crate::slab::jemalloc_size;

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
        Some(snap.sink)
    }

    /// Stops the snapshot where it is and hands its sink back (None when
    /// none is running). Tables `clear` detached into it are freed at
    /// once, as a blocking FLUSHALL would have.
    pub fn snapshot_abort(&mut self) -> Option<Box<dyn SnapshotSink>> {
        self.snap.take().map(|s| s.sink)
    }

    /// Empties the Db like `clear` and returns the old table for the caller
    /// to free (FLUSHALL ASYNC frees it on another thread), or None when a
    /// running snapshot took it: the snapshot still needs its pending
    /// segments, and frees it a segment at a time as it goes. Settings
    /// (`no_touch`, `keep_expired`, `log_events`) stay with the Db.
    pub fn detach(&mut self) -> Option<Db> {
        self.pending = None;
        let mut fresh = Db { no_touch: self.no_touch, keep_expired: self.keep_expired, log_events: self.log_events, access: self.access, epoch: self.epoch, ..Db::default() };
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

    /// `pre_write` for the segment of `key`, for callers that hold a key
    /// rather than a slot (active field expiry of a hash in the object table).
    pub(super) fn pre_write_key(&mut self, key: &[u8]) {
        if self.snap.is_some() {
            let (_, si, _) = self.find(key);
            self.pre_write_slow(si);
        }
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

    /// Gives every key of segment `si` to `sink`; returns how many.
    fn emit_segment(&self, si: usize, sink: &mut dyn SnapshotSink) -> usize {
        let mut n = 0;
        for &s in self.segs[si].slots.iter().filter(|&&s| s != 0) {
            let b = self.blob(s);
            self.with_value(s, |v| sink.entry(b.key, v, b.deadline));
            n += 1;
        }
        n
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
            jemalloc_size(size_of::<Snap>())
                + jemalloc_size(snap.detached.capacity() * size_of::<Detached>())
                + snap.detached.iter().map(|d| jemalloc_size(size_of::<Db>()) + d.db.allocated_bytes()).sum::<usize>()
        })
    }
}
