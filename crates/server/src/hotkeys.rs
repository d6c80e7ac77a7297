//! HOTKEYS (Redis 8.6): a tracking session that finds the keys taking the
//! most CPU time and the most network bytes. Each command with keys that
//! runs while a session is active gives its execution time and its request
//! plus reply bytes to its keys, shared evenly; the keys go into one top-K
//! structure per metric. The session ends on HOTKEYS STOP or after its
//! DURATION; its results stay until HOTKEYS RESET or the next START.
//!
//! The top-K structure is probabilistic, as Redis's is, so its memory does
//! not grow with the number of distinct keys: a count-min sketch (4 rows of
//! counters, about 100 per key asked for) estimates every key's total, and
//! a candidate list of ten times K keys keeps those with the largest
//! estimates. A key enters the list when its estimate passes the smallest
//! one there, which it then replaces. Estimates can only be too high, by
//! what colliding keys add: with about 100 counters per reported key and
//! the minimum over 4 rows, a key whose share is well above 1/(100 K) comes
//! out in order.
//!
//! A leaf: it knows nothing of clients, commands or the server; `exec`
//! offers each command's keys and measures, the HOTKEYS command
//! (`commands/hotkeys.rs`) reads them back. Not tracking costs `exec` one
//! test per command.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// Rows of the count-min sketch.
const ROWS: usize = 4;

/// Top-K keys by a weight, estimated in bounded memory.
#[derive(Debug)]
pub struct TopK {
    /// Counters, `ROWS` rows of `width` each.
    sketch: Vec<u64>,
    /// Counters per row (a power of two).
    width: usize,
    /// Candidate keys and their estimated totals.
    top: HashMap<Vec<u8>, u64>,
    /// Most candidates kept.
    cap: usize,
    /// No candidate's estimate is below this (while the list is full).
    floor: u64,
    /// Sum of every weight added.
    pub total: u64,
    /// Seeds the hashing, so that one key's collisions differ per process.
    hasher: std::collections::hash_map::RandomState,
}

impl TopK {
    /// A structure for the top `k` keys.
    pub fn new(k: usize) -> TopK {
        let width = (k.max(1) * 100).next_power_of_two();
        TopK {
            sketch: vec![0; ROWS * width],
            width,
            top: HashMap::new(),
            cap: k.max(1) * 10,
            floor: 0,
            total: 0,
            hasher: Default::default(),
        }
    }

    /// Adds `w` to `key`'s total. A zero weight changes nothing.
    pub fn add(&mut self, key: &[u8], w: u64) {
        if w == 0 {
            return;
        }
        self.total += w;
        let mut h = self.hasher.build_hasher();
        h.write(key);
        let h = h.finish();
        // Double hashing: row i uses h1 + i * h2 (h2 odd, so rows differ).
        let (h1, h2) = (h as u32 as usize, ((h >> 32) as usize) | 1);
        let mut est = u64::MAX;
        for row in 0..ROWS {
            let i = row * self.width + (h1.wrapping_add(row.wrapping_mul(h2)) & (self.width - 1));
            self.sketch[i] = self.sketch[i].saturating_add(w);
            est = est.min(self.sketch[i]);
        }
        if let Some(v) = self.top.get_mut(key) {
            *v = (*v).max(est);
            return;
        }
        if self.top.len() < self.cap {
            self.top.insert(key.to_vec(), est);
            return;
        }
        if est <= self.floor {
            return;
        }
        // Candidates only grow, so the floor is a lower bound: find the
        // real smallest one.
        let (min_key, min) = self.top.iter().min_by_key(|(_, &v)| v).map(|(k, &v)| (k.clone(), v)).expect("list is full");
        self.floor = min;
        if est > min {
            self.top.remove(&min_key);
            self.top.insert(key.to_vec(), est);
        }
    }

    /// The `k` keys with the largest estimates, largest first (ties by
    /// key), with their estimates.
    pub fn list(&self, k: usize) -> Vec<(&[u8], u64)> {
        let mut v: Vec<(&[u8], u64)> = self.top.iter().map(|(k, &n)| (&k[..], n)).filter(|&(_, n)| n > 0).collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        v.truncate(k);
        v
    }

    /// Bytes held.
    pub fn mem_usage(&self) -> usize {
        self.sketch.len() * 8 + self.top.keys().map(|k| k.len() + 48).sum::<usize>()
    }
}

/// Totals over the session, whatever sampling and slots chose.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    /// Microseconds of every command with keys.
    pub us_all: u64,
    /// Of those in the selected slots.
    pub us_selected: u64,
    /// Of those in the selected slots that were sampled (kept only when
    /// sampling).
    pub us_sampled_selected: u64,
    /// Network bytes (request and reply) of every command with keys.
    pub net_all: u64,
    /// Of those in the selected slots.
    pub net_selected: u64,
    /// Of those in the selected slots that were sampled.
    pub net_sampled_selected: u64,
}

/// What HOTKEYS START asked for.
#[derive(Debug, Clone)]
pub struct Start {
    /// Track CPU time.
    pub cpu: bool,
    /// Track network bytes.
    pub net: bool,
    /// K.
    pub count: usize,
    /// Milliseconds to run (0: until STOP).
    pub duration_ms: i64,
    /// Track each command with probability 1/ratio.
    pub sample_ratio: u64,
    /// Slot ranges to track, sorted and merged; None: all.
    pub slots: Option<Vec<(u16, u16)>>,
}

/// One tracking session (HOTKEYS START), running or stopped.
#[derive(Debug)]
pub struct HotKeys {
    /// Still tracking.
    pub active: bool,
    /// By CPU time, when tracked.
    pub cpu: Option<TopK>,
    /// By network bytes, when tracked.
    pub net: Option<TopK>,
    /// K: how many keys GET reports per metric.
    pub count: usize,
    /// Milliseconds the session lasts (0: until STOP); once stopped, how
    /// long it ran.
    pub duration_ms: i64,
    /// Each command is tracked with probability 1/ratio.
    pub sample_ratio: u64,
    /// Slot ranges tracked (cluster mode), sorted and merged; None: all.
    pub slots: Option<Vec<(u16, u16)>>,
    /// Unix ms of START.
    pub start_ms: i64,
    /// Process user and system CPU seconds at START.
    pub start_cpu: (f64, f64),
    /// Totals.
    pub totals: Totals,
}

impl HotKeys {
    /// A session running from `start_ms` (Unix ms), when the process had
    /// used `start_cpu` seconds of user and system time.
    pub fn new(s: Start, start_ms: i64, start_cpu: (f64, f64)) -> HotKeys {
        HotKeys {
            active: true,
            cpu: s.cpu.then(|| TopK::new(s.count)),
            net: s.net.then(|| TopK::new(s.count)),
            count: s.count,
            duration_ms: s.duration_ms,
            sample_ratio: s.sample_ratio,
            slots: s.slots,
            start_ms,
            start_cpu,
            totals: Totals::default(),
        }
    }

    /// Ends the session when its DURATION has passed; true if it did.
    pub fn expire(&mut self, now_ms: i64) -> bool {
        if self.active && self.duration_ms > 0 {
            let elapsed = now_ms - self.start_ms;
            if elapsed >= self.duration_ms {
                self.stop(now_ms);
                return true;
            }
        }
        false
    }

    /// Ends the session (HOTKEYS STOP).
    pub fn stop(&mut self, now_ms: i64) {
        self.active = false;
        self.duration_ms = now_ms - self.start_ms;
    }

    /// Milliseconds tracked so far (or in all, once stopped).
    pub fn elapsed_ms(&self, now_ms: i64) -> i64 {
        if self.active {
            now_ms - self.start_ms
        } else {
            self.duration_ms
        }
    }

    /// Whether keys of `slot` are tracked.
    pub fn selects(&self, slot: u16) -> bool {
        match &self.slots {
            None => true,
            Some(r) => r.iter().any(|&(a, b)| (a..=b).contains(&slot)),
        }
    }

    /// Counts one command with `keys` (at least one) that took `us`
    /// microseconds and `bytes` of request and reply. `selected`: its slot
    /// is tracked; `sampled`: the sampling draw chose it. `first` picks
    /// which key gets the first of the units left over when the weights do
    /// not divide evenly (any number; taken modulo the keys).
    pub fn record(&mut self, keys: &[&[u8]], selected: bool, sampled: bool, us: u64, bytes: u64, first: usize) {
        let t = &mut self.totals;
        t.us_all += us;
        t.net_all += bytes;
        if !selected {
            return;
        }
        t.us_selected += us;
        t.net_selected += bytes;
        if !sampled {
            return;
        }
        if self.sample_ratio > 1 {
            t.us_sampled_selected += us;
            t.net_sampled_selected += bytes;
        }
        let n = keys.len() as u64;
        let first = first % keys.len();
        for (i, key) in keys.iter().enumerate() {
            // Key i gets the even share, plus one unit of the remainder if
            // it is among the `rem` keys from `first` on.
            let extra = |total: u64| {
                let rem = (total % n) as usize;
                u64::from((i + keys.len() - first) % keys.len() < rem)
            };
            if let Some(cpu) = &mut self.cpu {
                cpu.add(key, us / n + extra(us));
            }
            if let Some(net) = &mut self.net {
                net.add(key, bytes / n + extra(bytes));
            }
        }
    }

    /// Bytes held.
    pub fn mem_usage(&self) -> usize {
        std::mem::size_of::<HotKeys>() + self.cpu.as_ref().map_or(0, TopK::mem_usage) + self.net.as_ref().map_or(0, TopK::mem_usage)
    }
}

/// Sorted slots merged into inclusive ranges.
pub fn ranges(sorted: &[u16]) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for &s in sorted {
        match out.last_mut() {
            Some((_, b)) if *b + 1 == s => *b = s,
            _ => out.push((s, s)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_key_comes_first_among_many() {
        let mut t = TopK::new(10);
        for i in 0..100_000u32 {
            t.add(format!("k{}", i % 5000).as_bytes(), 1);
            if i % 10 == 0 {
                t.add(b"hot", 5);
            }
        }
        let l = t.list(10);
        assert_eq!(l[0].0, b"hot");
        assert!(l[0].1 >= 50_000);
        assert_eq!(t.total, 150_000);
        assert!(t.top.len() <= 100);
    }

    #[test]
    fn exact_while_few_keys() {
        let mut t = TopK::new(3);
        t.add(b"a", 3);
        t.add(b"b", 7);
        t.add(b"c", 0);
        assert_eq!(t.list(5), vec![(&b"b"[..], 7), (&b"a"[..], 3)]);
    }

    fn start(duration_ms: i64, slots: Option<Vec<(u16, u16)>>) -> Start {
        Start { cpu: true, net: true, count: 10, duration_ms, sample_ratio: 1, slots }
    }

    #[test]
    fn remainder_spread_adds_up() {
        let mut h = HotKeys::new(start(0, None), 0, (0.0, 0.0));
        h.record(&[b"a", b"b", b"c"], true, true, 2, 10, 1);
        let cpu: u64 = h.cpu.as_ref().unwrap().list(10).iter().map(|x| x.1).sum();
        let net: u64 = h.net.as_ref().unwrap().list(10).iter().map(|x| x.1).sum();
        assert_eq!((cpu, net), (2, 10));
        assert_eq!(h.cpu.as_ref().unwrap().list(10).len(), 2);
    }

    #[test]
    fn slots_merge_and_select() {
        assert_eq!(ranges(&[1, 2, 3, 7, 9, 10]), vec![(1, 3), (7, 7), (9, 10)]);
        let h = HotKeys::new(start(0, Some(ranges(&[5, 6]))), 0, (0.0, 0.0));
        assert!(h.selects(6) && !h.selects(7));
    }

    #[test]
    fn duration_ends_session() {
        let mut h = HotKeys::new(start(1000, None), 5000, (0.0, 0.0));
        assert!(!h.expire(5999));
        assert!(h.expire(6001));
        assert!(!h.active);
        assert_eq!(h.elapsed_ms(9999), 1001);
    }
}
