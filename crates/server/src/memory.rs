//! Allocator statistics. jemalloc is the global allocator (see main.rs);
//! its own counters are used_memory and friends in INFO memory.

use tikv_jemalloc_ctl::{epoch, stats};

/// Bytes currently allocated by the program (jemalloc `stats.allocated`).
pub fn allocated() -> u64 {
    let _ = epoch::advance();
    stats::allocated::read().unwrap_or(0) as u64
}

/// Bytes in active pages (jemalloc `stats.active`).
pub fn active() -> u64 {
    stats::active::read().unwrap_or(0) as u64
}

/// Bytes of resident memory mapped by the allocator (`stats.resident`).
pub fn resident() -> u64 {
    stats::resident::read().unwrap_or(0) as u64
}

/// Resident set size of the process, from /proc/self/statm.
pub fn rss() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else { return 0 };
    let pages: u64 = s.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}
