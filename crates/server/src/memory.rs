//! Allocator statistics. jemalloc is the global allocator (see main.rs);
//! its own counters are used_memory and friends in INFO memory.
//!
//! used_memory is exact, as Redis's own counter is: every thread that
//! allocates keeps jemalloc's per-thread running totals of bytes allocated
//! and freed (size classes, updated on every malloc and free, thread cache
//! hits included), and live bytes are their sum over threads. jemalloc's
//! `stats.allocated` is not used for it: it counts freed blocks still held in
//! a thread cache as allocated and so runs hundreds of kilobytes ahead after
//! a burst of frees, which is noise in a bytes-per-entry measurement.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

use tikv_jemalloc_ctl::thread::{allocatedp, deallocatedp, ThreadLocal};
use tikv_jemalloc_ctl::{epoch, stats};

type Counters = Option<(ThreadLocal<u64>, ThreadLocal<u64>)>;

thread_local! {
    static COUNTERS: Cell<Option<Counters>> = const { Cell::new(None) };
}

/// Net bytes (allocated minus freed) of the helper threads, as each last
/// published it with [`publish_thread`].
static HELPERS_NET: AtomicI64 = AtomicI64::new(0);

/// Net bytes allocated minus freed by the calling thread since it started.
fn thread_net() -> i64 {
    let counters = COUNTERS.with(|c| match c.get() {
        Some(v) => v,
        None => {
            let v = allocatedp::read().ok().zip(deallocatedp::read().ok());
            c.set(Some(v));
            v
        }
    });
    match counters {
        Some((a, d)) => a.get() as i64 - d.get() as i64,
        None => 0,
    }
}

/// Publishes a helper thread's change in net bytes since its last call;
/// `last` is that thread's own record of what it published. Helper threads
/// (background freeing) call this after each piece of work so that the
/// executor's [`allocated`] includes what they freed.
pub fn publish_thread(last: &mut i64) {
    let now = thread_net();
    HELPERS_NET.fetch_add(now - *last, Ordering::Relaxed);
    *last = now;
}

/// What a helper thread last published, for [`publish_at_exit`].
struct AtExit(Cell<Option<i64>>);

impl Drop for AtExit {
    fn drop(&mut self) {
        if let Some(mut last) = self.0.get() {
            publish_thread(&mut last);
        }
    }
}

thread_local! {
    static AT_EXIT: AtExit = const { AtExit(Cell::new(None)) };
}

/// A helper thread that ends while the server runs on (an I/O thread
/// retired by CONFIG SET io-threads) calls this last, with its record of
/// what it published: what it frees after (std frees the thread's closure
/// once it returns) is published once more as the thread exits, from a
/// thread-local destructor. `COUNTERS` has none, so it is still there
/// then, and so is jemalloc's own per-thread state, which goes after the
/// thread-local destructors.
pub fn publish_at_exit(last: i64) {
    AT_EXIT.with(|e| e.0.set(Some(last)));
}

/// Bytes currently allocated by the program: the executor thread's net
/// bytes plus the helpers'. Call it on the executor thread.
pub fn allocated() -> u64 {
    (thread_net() + HELPERS_NET.load(Ordering::Relaxed)).max(0) as u64
}

/// Bytes in active pages (jemalloc `stats.active`, refreshed first).
pub fn active() -> u64 {
    let _ = epoch::advance();
    stats::active::read().unwrap_or(0) as u64
}

/// Bytes of resident memory mapped by the allocator (`stats.resident`,
/// refreshed first).
pub fn resident() -> u64 {
    let _ = epoch::advance();
    stats::resident::read().unwrap_or(0) as u64
}

/// Resident set size of the process, from /proc/self/statm.
pub fn rss() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else { return 0 };
    let pages: u64 = s.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}
