//! Background freeing: UNLINK of a big value and FLUSHDB/FLUSHALL ASYNC
//! hand what they removed to one freeing thread, so the executor never
//! stalls on dropping millions of allocations.
//!
//! The thread publishes what it freed (memory::publish_thread) after each
//! job, before the job stops counting as pending, so used_memory is back
//! down by the time lazyfree_pending_objects reads 0. INFO's lazyfree_pending_objects
//! and lazyfreed_objects are the two counters kept here; objects are counted
//! as Redis counts them (one per UNLINKed value, one per key of a flushed
//! database).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use storage::{Value, ValueRef};

/// Values whose freeing costs more than this many steps go to the thread
/// (Redis's LAZYFREE_THRESHOLD).
pub const THRESHOLD: usize = 64;

struct Job {
    garbage: Box<dyn Send>,
    objects: u64,
}

/// Handle on the freeing thread.
pub struct LazyFree {
    tx: Option<Sender<Job>>,
    pending: Arc<AtomicU64>,
    freed: Arc<AtomicU64>,
}

impl Default for LazyFree {
    fn default() -> Self {
        Self::new()
    }
}

impl LazyFree {
    /// Starts the freeing thread. If it cannot start, values are freed
    /// inline (and still counted).
    pub fn new() -> LazyFree {
        let (tx, rx) = channel::<Job>();
        let pending = Arc::new(AtomicU64::new(0));
        let freed = Arc::new(AtomicU64::new(0));
        let (p, f) = (pending.clone(), freed.clone());
        let started = std::thread::Builder::new().name("lazyfree".into()).spawn(move || {
            crate::affinity::pin(crate::affinity::Role::Bio);
            let mut published = 0;
            for job in rx {
                drop(job.garbage);
                crate::memory::publish_thread(&mut published);
                // Release: whoever reads the counters with Acquire sees the
                // published frees as well.
                p.fetch_sub(job.objects, Ordering::Release);
                f.fetch_add(job.objects, Ordering::Release);
            }
        });
        LazyFree { tx: started.ok().map(|_| tx), pending, freed }
    }

    /// Frees `garbage` in the background, counting it as `objects`.
    pub fn free(&self, garbage: Box<dyn Send>, objects: u64) {
        self.pending.fetch_add(objects, Ordering::Relaxed);
        let job = Job { garbage, objects };
        let undelivered = match &self.tx {
            Some(tx) => tx.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = undelivered {
            drop(job.garbage);
            self.pending.fetch_sub(objects, Ordering::Relaxed);
            self.freed.fetch_add(objects, Ordering::Relaxed);
        }
    }

    /// Counts objects freed inline as lazily freed (a SYNC flush that Redis
    /// would run as a blocking asynchronous one).
    pub fn count_freed(&self, objects: u64) {
        self.freed.fetch_add(objects, Ordering::Relaxed);
    }

    /// INFO lazyfree_pending_objects.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Acquire)
    }

    /// INFO lazyfreed_objects.
    pub fn freed(&self) -> u64 {
        self.freed.load(Ordering::Acquire)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&self) {
        self.freed.store(0, Ordering::Relaxed);
    }
}

/// About how many allocations freeing `v` takes (Redis's free effort):
/// one for the packed small forms, one per element for the large ones.
pub fn free_effort(v: ValueRef) -> usize {
    match v {
        ValueRef::Str(_) => 1,
        ValueRef::Hash(h) if h.encoding_name() == "hashtable" => h.len(),
        ValueRef::Set(s) if s.encoding_name() == "hashtable" => s.len(),
        ValueRef::ZSet(z) if z.encoding_name() == "skiplist" => z.len(),
        ValueRef::List(l) if l.encoding_name() == "quicklist" => l.len(),
        ValueRef::Stream(s) => s.free_effort(),
        _ => 1,
    }
}

/// Drops `v` here, or on the freeing thread when that is worth it.
pub fn drop_value(lazy: &LazyFree, v: Value) {
    if free_effort(v.as_ref()) > THRESHOLD {
        lazy.free(Box::new(v), 1);
    }
}
