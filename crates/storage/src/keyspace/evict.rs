//! Sampling keys for eviction under maxmemory (Redis's approximated
//! LRU/LFU); the ranks and the pool of candidates are in `crate::eviction`.
//!
//! No per-key list orders keys by age or frequency (DESIGN §4): eviction
//! looks at a few random keys, ranks them by what their slot's access
//! field (`crate::access`) or deadline says, and keeps the best ones in a
//! small pool so that each round improves on the last.
//!
//! A sample picks a segment about in proportion to its share of the keys
//! (`Db::pick_segment`: through the directory, or in slot mode by its
//! length), and walks its slots from a random position, as Redis walks a few
//! buckets of its dict: a few cache lines, no blob read except to hand the
//! key out. Keys close in one segment are sampled together; the pool and
//! the next samples make up for it.

use super::Db;
use crate::access::{lfu_decayed, Access};
use crate::eviction::Rank;
use crate::segment::{clock_of, CLOCK_MOD, TTL_BIT};

/// Segments a sample may look at before falling back to a linear search.
const PICKS: usize = 16;

impl Db {
    /// Calls `f(key, score)` for up to `n` stored keys picked at random
    /// (only keys with a deadline when `volatile`), scored by `rank` at
    /// `now`. Keys past their deadline but not reclaimed may be given.
    /// Returns how many were given: fewer than `n` only when fewer keys
    /// qualify or the segments picked held too few of them; at least one
    /// whenever one qualifies.
    pub fn sample(&mut self, n: usize, volatile: bool, rank: Rank, now: i64, mut f: impl FnMut(&[u8], u64)) -> usize {
        let have = if volatile { self.volatile } else { self.len };
        if n == 0 || have == 0 {
            return 0;
        }
        let decay = match self.access {
            Access::Lfu { decay_minutes, .. } => decay_minutes,
            Access::Lru | Access::Lrm => 0,
        };
        let mut given = 0;
        let mut seen = 0;
        for pick in 0..=PICKS {
            let r = self.next_random();
            let si = if pick < PICKS {
                self.pick_segment(r)
            } else if given == 0 {
                // Sparse keys (few volatile ones in a big table): the first
                // segment holding one, from a random place.
                let start = (r % self.segs.len() as u64) as usize;
                let Some(si) = (0..self.segs.len()).map(|i| (start + i) % self.segs.len()).find(|&i| self.qualifying(i, volatile) > 0) else {
                    return 0;
                };
                si
            } else {
                break;
            };
            let seg = &self.segs[si];
            let in_seg = self.qualifying(si, volatile);
            if in_seg == 0 {
                continue;
            }
            let len = seg.slots.len();
            let start = ((r >> 32) % len as u64) as usize;
            let mut taken = 0;
            for i in 0..len {
                if given == n || taken == in_seg {
                    break;
                }
                let s = seg.slots[(start + i) % len];
                if s == 0 || (volatile && s & TTL_BIT == 0) {
                    continue;
                }
                let b = self.blob(s);
                let score = match rank {
                    Rank::Lru => (now / 1000 - clock_of(s)).rem_euclid(CLOCK_MOD) as u64,
                    Rank::Lfu => 255 - lfu_decayed(clock_of(s), now, decay) as u64,
                    Rank::Ttl => b.deadline.map_or(0, |t| u64::MAX - t.max(0) as u64),
                    Rank::Random => 0,
                };
                f(&self.raw_key(&b), score);
                given += 1;
                taken += 1;
            }
            seen += taken;
            if given == n || seen >= have {
                break;
            }
        }
        given
    }

    /// Keys of segment `si` a sample may give.
    fn qualifying(&self, si: usize, volatile: bool) -> usize {
        let seg = &self.segs[si];
        if volatile { seg.volatile as usize } else { seg.len as usize }
    }
}
