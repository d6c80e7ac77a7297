//! A key's access field: the 15 bits of its table slot (`segment.rs`) that
//! say how recently or how often the key was used, for OBJECT IDLETIME /
//! FREQ and for eviction under maxmemory.
//!
//! The bits hold one of two things, chosen by the maxmemory policy (as a
//! Redis object's 24 `lru` bits do), so that LFU costs no memory per key:
//!
//! ```text
//!   LRU:  | last access, Unix seconds mod 2^15 (15 bits)     |
//!   LRM:  | last write, Unix seconds mod 2^15 (15 bits)      |
//!   LFU:  | minutes mod 2^7 (7 bits) | log counter (8 bits)  |
//! ```
//!
//! The LFU counter is logarithmic: each access bumps it with probability
//! 1 / ((counter - LFU_INIT) * lfu-log-factor + 1), so 255 stands for
//! about a million accesses at the default factor; every `lfu-decay-time`
//! minutes of idleness take one off. A new key starts at `LFU_INIT` so it
//! is not evicted before it had a chance to be read again.
//!
//! Limits: the LFU time has 7 bits (Redis keeps 16), so idleness is known
//! modulo 128 minutes: a key untouched for longer looks less idle than it
//! is and decays by the remainder. Switching policy reinterprets the bits;
//! values adjust as keys are accessed again (Redis behaves the same).

/// The LFU counter of a new key.
pub const LFU_INIT: u8 = 5;

/// Bits of the LFU field holding the minutes.
const MINUTE_BITS: u32 = 7;
const MINUTES_MOD: i64 = 1 << MINUTE_BITS;

/// What the access field of every key of a `Db` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// The last access time, in seconds.
    #[default]
    Lru,
    /// The last modification time, in seconds (the LRM policies of Redis
    /// 8.6): reads leave it, writes set it (`Db::modified`).
    Lrm,
    /// An LFU counter and the minute it last decayed.
    Lfu {
        /// lfu-log-factor.
        log_factor: u32,
        /// lfu-decay-time: minutes of idleness per step down (0: never).
        decay_minutes: u32,
    },
}

/// Packs an LFU field from a time (Unix ms) and a counter.
pub fn lfu_pack(now_ms: i64, counter: u8) -> i64 {
    ((now_ms / 60_000).rem_euclid(MINUTES_MOD) << 8) | counter as i64
}

/// The counter of an LFU field, after the decay due at `now_ms`.
pub fn lfu_decayed(field: i64, now_ms: i64, decay_minutes: u32) -> u8 {
    let counter = (field & 0xff) as u8;
    if decay_minutes == 0 {
        return counter;
    }
    let last = (field >> 8) & (MINUTES_MOD - 1);
    let elapsed = (now_ms / 60_000 - last).rem_euclid(MINUTES_MOD);
    let periods = elapsed / decay_minutes as i64;
    counter.saturating_sub(periods.min(255) as u8)
}

/// One logarithmic increment of `counter`; `r` is a uniform random u64.
pub fn lfu_incr(counter: u8, log_factor: u32, r: u64) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = counter.saturating_sub(LFU_INIT) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    let x = (r >> 11) as f64 / (1u64 << 53) as f64;
    if x < p { counter + 1 } else { counter }
}

impl Access {
    /// The field of a key created at `now_ms`.
    pub fn fresh(self, now_ms: i64) -> i64 {
        match self {
            Access::Lru | Access::Lrm => now_ms / 1000,
            Access::Lfu { .. } => lfu_pack(now_ms, LFU_INIT),
        }
    }

    /// The field after an access at `now_ms`; `r` is a uniform random u64
    /// (the LFU increment is probabilistic).
    pub fn touched(self, field: i64, now_ms: i64, r: u64) -> i64 {
        match self {
            Access::Lru => now_ms / 1000,
            Access::Lrm => field,
            Access::Lfu { log_factor, decay_minutes } => {
                lfu_pack(now_ms, lfu_incr(lfu_decayed(field, now_ms, decay_minutes), log_factor, r))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfu_field_fits_the_slot_bits() {
        let f = lfu_pack(i64::MAX / 2, 255);
        assert!((0..1 << 15).contains(&f));
        assert_eq!(lfu_decayed(f, i64::MAX / 2, 1), 255);
    }

    #[test]
    fn lfu_decays_one_step_per_period() {
        let t = 60_000 * 20_000_000;
        let f = lfu_pack(t, 20);
        assert_eq!(lfu_decayed(f, t + 59_999, 1), 20);
        assert_eq!(lfu_decayed(f, t + 3 * 60_000, 1), 17);
        assert_eq!(lfu_decayed(f, t + 10 * 60_000, 2), 15);
        assert_eq!(lfu_decayed(f, t + 100 * 60_000, 1), 0);
        assert_eq!(lfu_decayed(f, t + 100 * 60_000, 0), 20);
    }

    #[test]
    fn lfu_counter_grows_logarithmically() {
        let mut rng = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut c = LFU_INIT;
        for _ in 0..100 {
            c = lfu_incr(c, 10, next());
        }
        assert!(c > 8 && c < 40, "{c}");
        let mut d = LFU_INIT;
        for _ in 0..100_000 {
            d = lfu_incr(d, 10, next());
        }
        assert!(d > c && d < 255, "{d}");
        assert_eq!(lfu_incr(255, 10, 0), 255);
        // Below the initial value every access counts.
        assert_eq!(lfu_incr(0, 10, u64::MAX), 1);
    }
}
