//! `Db`: one logical database, mapping keys to values with optional deadlines.
//!
//! Every read takes `now` (milliseconds since the Unix epoch, fixed for the
//! whole command by the caller) and treats a key whose deadline is at or
//! before `now` as absent, deleting it on the spot (lazy expiry).
//! `active_expire` reclaims due keys that nobody touches.
//!
//! Layout: keys live in a dense vector (`slots`) indexed by a hash map, so
//! that SCAN can walk positions and random sampling is O(1). Deletion moves
//! the last slot into the hole; SCAN walks positions downwards so that a key
//! moved that way is never skipped (it may be returned twice, which SCAN allows).

use std::collections::HashMap;

use crate::value::{Value, ValueMut, ValueRef};

/// What an insert does to the key's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Keep the existing deadline, if the key existed.
    Keep,
    /// No deadline.
    Clear,
    /// Expire at this Unix time in milliseconds.
    At(i64),
}

#[derive(Debug)]
struct Slot {
    key: Box<[u8]>,
    value: Value,
    expire: Option<i64>,
    /// Last access, Unix seconds.
    access: i64,
}

/// One database.
#[derive(Debug, Default)]
pub struct Db {
    index: HashMap<Box<[u8]>, usize>,
    slots: Vec<Slot>,
    volatile: usize,
    /// Position of the active-expiry clock hand.
    hand: usize,
    /// When true, reads do not update a key's last-access time (CLIENT NO-TOUCH).
    pub no_touch: bool,
    /// Keys deleted by lazy expiry since the last `take_lazy_expired`.
    lazy_expired: u64,
}

impl Db {
    /// An empty database.
    pub fn new() -> Self {
        Db::default()
    }

    /// Number of keys, including expired ones not yet reclaimed (as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the database holds no key.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Number of keys with a deadline.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    fn live_index(&mut self, key: &[u8], now: i64) -> Option<usize> {
        let i = *self.index.get(key)?;
        if matches!(self.slots[i].expire, Some(t) if t <= now) {
            self.remove_at(i);
            self.lazy_expired += 1;
            return None;
        }
        if !self.no_touch {
            self.slots[i].access = now / 1000;
        }
        Some(i)
    }

    fn remove_at(&mut self, i: usize) -> Slot {
        let slot = self.slots.swap_remove(i);
        self.index.remove(&slot.key);
        if i < self.slots.len() {
            let moved = &self.slots[i].key;
            *self.index.get_mut(moved).expect("moved key indexed") = i;
        }
        if slot.expire.is_some() {
            self.volatile -= 1;
        }
        slot
    }

    /// The live value of `key`.
    pub fn get(&mut self, key: &[u8], now: i64) -> Option<ValueRef<'_>> {
        let i = self.live_index(key, now)?;
        Some(self.slots[i].value.as_ref())
    }

    /// A mutable view of the live value of `key`.
    pub fn get_mut(&mut self, key: &[u8], now: i64) -> Option<ValueMut<'_>> {
        let i = self.live_index(key, now)?;
        Some(match self.slots[i].value.as_ref() {
            ValueRef::Str(s) => ValueMut::Str(s),
        })
    }

    /// True if `key` is live.
    pub fn contains(&mut self, key: &[u8], now: i64) -> bool {
        self.live_index(key, now).is_some()
    }

    /// Deadline of a live key: None if absent, Some(None) if it has none.
    pub fn expire_of(&mut self, key: &[u8], now: i64) -> Option<Option<i64>> {
        let i = self.live_index(key, now)?;
        Some(self.slots[i].expire)
    }

    /// Sets or replaces `key`. Returns true if a live key was replaced.
    pub fn insert(&mut self, key: &[u8], value: Value, ttl: Ttl, now: i64) -> bool {
        match self.live_index(key, now) {
            Some(i) => {
                let slot = &mut self.slots[i];
                slot.value = value;
                let old = slot.expire;
                slot.expire = match ttl {
                    Ttl::Keep => old,
                    Ttl::Clear => None,
                    Ttl::At(t) => Some(t),
                };
                match (old.is_some(), slot.expire.is_some()) {
                    (false, true) => self.volatile += 1,
                    (true, false) => self.volatile -= 1,
                    _ => {}
                }
                true
            }
            None => {
                let expire = match ttl {
                    Ttl::At(t) => Some(t),
                    _ => None,
                };
                if expire.is_some() {
                    self.volatile += 1;
                }
                let key: Box<[u8]> = key.into();
                self.index.insert(key.clone(), self.slots.len());
                self.slots.push(Slot { key, value, expire, access: now / 1000 });
                false
            }
        }
    }

    /// Sets the deadline of a live key (None removes it). Returns false if absent.
    pub fn set_expire(&mut self, key: &[u8], expire: Option<i64>, now: i64) -> bool {
        let Some(i) = self.live_index(key, now) else { return false };
        let slot = &mut self.slots[i];
        match (slot.expire.is_some(), expire.is_some()) {
            (false, true) => self.volatile += 1,
            (true, false) => self.volatile -= 1,
            _ => {}
        }
        slot.expire = expire;
        true
    }

    /// Removes a live key, returning its value.
    pub fn remove(&mut self, key: &[u8], now: i64) -> Option<Value> {
        let i = self.live_index(key, now)?;
        Some(self.remove_at(i).value)
    }

    /// Seconds since the key was last read or written, without touching it.
    pub fn idle_secs(&mut self, key: &[u8], now: i64) -> Option<i64> {
        let saved = std::mem::replace(&mut self.no_touch, true);
        let i = self.live_index(key, now);
        self.no_touch = saved;
        Some((now / 1000 - self.slots[i?].access).max(0))
    }

    /// Number of keys lazy expiry deleted (on access) since the last call;
    /// resets the count. Active expiry is counted by its own return value.
    pub fn take_lazy_expired(&mut self) -> u64 {
        std::mem::take(&mut self.lazy_expired)
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        let no_touch = self.no_touch;
        *self = Db::default();
        self.no_touch = no_touch;
    }

    /// Calls `f(key, value, deadline)` for every stored key, live or not yet reclaimed.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<i64>)) {
        for s in &self.slots {
            f(&s.key, s.value.as_ref(), s.expire);
        }
    }

    /// One SCAN step from `cursor` (0 starts), visiting about `count` keys with
    /// `f(key, value, deadline)`. Returns the next cursor, 0 when done.
    /// Every key present for the whole scan is visited at least once.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<i64>)) -> u64 {
        let mut end = if cursor == 0 { self.slots.len() } else { (cursor as usize).min(self.slots.len()) };
        let mut n = 0;
        while end > 0 && n < count.max(1) {
            end -= 1;
            let s = &self.slots[end];
            f(&s.key, s.value.as_ref(), s.expire);
            n += 1;
        }
        end as u64
    }

    /// A random stored key (possibly expired but not yet reclaimed), using `r` as randomness.
    pub fn random_key(&self, r: u64) -> Option<&[u8]> {
        if self.slots.is_empty() {
            return None;
        }
        Some(&self.slots[(r % self.slots.len() as u64) as usize].key)
    }

    /// Bytes this key costs, key and value together (an estimate until the
    /// compact layout lands).
    pub fn mem_usage(&mut self, key: &[u8], now: i64) -> Option<usize> {
        let i = self.live_index(key, now)?;
        let s = &self.slots[i];
        let v = match &s.value {
            Value::Int(_) => 0,
            Value::Bytes(b) => b.len(),
        };
        Some(s.key.len() + v + std::mem::size_of::<Slot>() + 16)
    }

    /// Active expiry: examines at most `budget` keys from where the last call
    /// stopped and deletes the due ones, calling `on_expired` for each.
    /// Returns (examined, expired).
    pub fn active_expire(&mut self, now: i64, budget: usize, mut on_expired: impl FnMut(&[u8])) -> (usize, usize) {
        if self.volatile == 0 {
            return (0, 0);
        }
        let mut examined = 0;
        let mut expired = 0;
        while examined < budget && !self.slots.is_empty() {
            if self.hand >= self.slots.len() {
                self.hand = 0;
            }
            examined += 1;
            if matches!(self.slots[self.hand].expire, Some(t) if t <= now) {
                let s = self.remove_at(self.hand);
                on_expired(&s.key);
                expired += 1;
            } else {
                self.hand += 1;
            }
        }
        (examined, expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_expiry_and_ttl_modes() {
        let mut db = Db::new();
        db.insert(b"a", Value::Int(1), Ttl::At(100), 0);
        assert_eq!(db.volatile_len(), 1);
        db.insert(b"a", Value::Int(2), Ttl::Keep, 0);
        assert_eq!(db.expire_of(b"a", 0), Some(Some(100)));
        assert!(db.get(b"a", 100).is_none());
        assert_eq!(db.len(), 0);
        assert_eq!(db.take_lazy_expired(), 1);
        assert_eq!(db.take_lazy_expired(), 0);
        assert_eq!(db.volatile_len(), 0);
    }

    #[test]
    fn scan_survives_deletes() {
        let mut db = Db::new();
        for i in 0..100 {
            db.insert(format!("k{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = db.scan(cursor, 7, |k, _, _| {
                seen.insert(k.to_vec());
            });
            round += 1;
            if round == 3 {
                for i in 0..10 {
                    db.remove(format!("k{i}").as_bytes(), 0);
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 10..100 {
            assert!(seen.contains(format!("k{i}").as_bytes()));
        }
    }

    #[test]
    fn active_expire_reclaims() {
        let mut db = Db::new();
        for i in 0..1000 {
            db.insert(format!("k{i}").as_bytes(), Value::Int(i), if i % 2 == 0 { Ttl::At(10) } else { Ttl::Clear }, 0);
        }
        let mut n = 0;
        while db.volatile_len() > 0 {
            n += db.active_expire(20, 100, |_| {}).1;
        }
        assert_eq!(n, 500);
        assert_eq!(db.len(), 500);
    }
}
