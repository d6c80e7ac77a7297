//! The event log: keys deleted by lazy expiry, keys created and keys a
//! read command missed, which the server turns into keyspace
//! notifications; the count of lazy expiries (INFO's expired_keys counts
//! them with active expiry's) and of read commands' hits and misses.
//!
//! Nothing is recorded unless `Db::log_events` asks for it, so an event
//! site costs one branch when no one listens. The core (mod.rs) records at
//! the two places these events happen, `Db::live` and `Db::insert`.
//! `KeyEvent` and the `LOG_*` bits are declared in mod.rs, with the other
//! types of `Db`'s fields.

use super::{Db, KeyEvent, MemberExpiry, LOG_MISS};

impl Db {
    /// Number of keys lazy expiry deleted (on access) since the last call;
    /// resets the count. Active expiry is counted by its own return value.
    #[inline]
    pub fn take_lazy_expired(&mut self) -> u64 {
        std::mem::take(&mut self.lazy_expired)
    }

    /// Members lazy member expiry removed since the last call, per key,
    /// oldest first (always recorded: the server counts and replays them).
    pub fn take_member_expiry(&mut self) -> Vec<MemberExpiry> {
        std::mem::take(&mut self.member_expired)
    }

    /// True if lazy member expiry removed members since the last
    /// `take_member_expiry`.
    #[inline]
    pub fn has_member_expiry(&self) -> bool {
        !self.member_expired.is_empty()
    }

    /// Counts a read command's lookup of `key` (when `count_reads` says
    /// one runs): a hit, or a miss, recorded as `KeyEvent::Miss` too when
    /// `notify` (Redis leaves OBJECT's misses unannounced) and `LOG_MISS`
    /// asks.
    #[inline]
    pub fn note_read(&mut self, key: &[u8], found: bool, notify: bool) {
        if !self.count_reads {
            return;
        }
        if found {
            self.read_hits += 1;
        } else {
            self.read_misses += 1;
            if notify {
                self.log(LOG_MISS, KeyEvent::Miss, key);
            }
        }
    }

    /// Read lookups that found their key and that did not since the last
    /// call; resets both.
    #[inline]
    pub fn take_read_counts(&mut self) -> (u64, u64) {
        (std::mem::take(&mut self.read_hits), std::mem::take(&mut self.read_misses))
    }

    /// Records `event` for `key` if `bit` of `log_events` asks for it.
    #[inline]
    pub(super) fn log(&mut self, bit: u8, event: KeyEvent, key: &[u8]) {
        if self.log_events & bit != 0 {
            self.events.push((event, key.into()));
        }
    }

    /// True if key events wait in the log.
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The key events recorded since the last call, oldest first (see
    /// `log_events`); empties the log.
    pub fn take_events(&mut self) -> Vec<(KeyEvent, Box<[u8]>)> {
        std::mem::take(&mut self.events)
    }
}
