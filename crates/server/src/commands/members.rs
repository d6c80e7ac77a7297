//! `Members`: the hash table the set operations (ZUNIONSTORE, ZINTER,
//! ZDIFF, ...) accumulate into, keyed by member bytes borrowed from the
//! inputs.
//!
//! Most members that such commands combine by the million are short (day
//! numbers, ids, small integers), and hashing and comparing them as byte
//! slices is where a union's time went. So a member of up to 7 bytes is
//! kept as one integer (its bytes, then its length and a marker bit in the
//! top byte, so that "1" and "1\0" differ and no key is 0) in an open
//! addressing table of integer keys (multiplicative hash, linear probing,
//! at most half full: a lookup is a multiply and, mostly, one compare);
//! longer members go to a hash map of byte slices. A member always goes to
//! the same table, so the two never hold the same member.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

type Fx = BuildHasherDefault<FxHasher>;

/// Longest member kept as an integer key.
const SHORT: usize = 7;

/// Marks a packed key, so that none is 0 (an empty slot).
const MARK: u64 = 0x80 << 56;

#[inline]
fn pack(m: &[u8]) -> Option<u64> {
    if m.len() > SHORT {
        return None;
    }
    // Two loads that may overlap: an overlapping byte lands on the same
    // position from both, so OR-ing them gives the bytes in order.
    let n = m.len();
    let bytes = match n {
        0 => 0,
        1 => m[0] as u64,
        2..=3 => {
            let lo = u16::from_le_bytes([m[0], m[1]]) as u64;
            let hi = u16::from_le_bytes([m[n - 2], m[n - 1]]) as u64;
            lo | hi << (8 * (n - 2))
        }
        _ => {
            let lo = u32::from_le_bytes([m[0], m[1], m[2], m[3]]) as u64;
            let hi = u32::from_le_bytes([m[n - 4], m[n - 3], m[n - 2], m[n - 1]]) as u64;
            lo | hi << (8 * (n - 4))
        }
    };
    Some(MARK | (n as u64) << 56 | bytes)
}

/// The member bytes of a packed key, in a buffer the caller provides.
fn unpack(k: u64, buf: &mut [u8; 8]) -> &[u8] {
    *buf = k.to_le_bytes();
    let n = (buf[7] & 0x7f) as usize;
    &buf[..n]
}

/// Open addressing over packed keys; 0 marks an empty slot.
struct Short<V> {
    slots: Vec<(u64, V)>,
    len: usize,
    /// 64 - log2(slots.len()).
    shift: u32,
}

impl<V: Copy + Default> Short<V> {
    fn with_capacity(n: usize) -> Self {
        let cap = (2 * n).next_power_of_two().max(16);
        Short { slots: vec![(0, V::default()); cap], len: 0, shift: 64 - cap.trailing_zeros() }
    }

    fn home(&self, k: u64) -> usize {
        (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The slot holding `k`, or the empty one where it would go.
    #[inline]
    fn slot(&self, k: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        loop {
            let s = self.slots[i].0;
            if s == k || s == 0 {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn upsert(&mut self, k: u64, new: impl FnOnce() -> V, update: impl FnOnce(&mut V)) {
        let i = self.slot(k);
        if self.slots[i].0 == k {
            return update(&mut self.slots[i].1);
        }
        self.slots[i] = (k, new());
        self.len += 1;
        if 2 * self.len > self.slots.len() {
            self.rebuild(2 * self.slots.len(), |_, _| true);
        }
    }

    fn get_mut(&mut self, k: u64) -> Option<&mut V> {
        let i = self.slot(k);
        (self.slots[i].0 == k).then(|| &mut self.slots[i].1)
    }

    /// Rehashes into `cap` slots, keeping the entries `keep` admits.
    fn rebuild(&mut self, cap: usize, mut keep: impl FnMut(u64, &mut V) -> bool) {
        let old = std::mem::replace(&mut self.slots, vec![(0, V::default()); cap]);
        self.shift = 64 - cap.trailing_zeros();
        self.len = 0;
        for (k, mut v) in old {
            if k != 0 && keep(k, &mut v) {
                let i = self.slot(k);
                self.slots[i] = (k, v);
                self.len += 1;
            }
        }
    }

    /// Removes `k`, moving later entries of its probe run back so that no
    /// lookup stops short at the hole.
    fn remove(&mut self, k: u64) {
        let mask = self.slots.len() - 1;
        let mut hole = self.slot(k);
        if self.slots[hole].0 != k {
            return;
        }
        self.len -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let kj = self.slots[j].0;
            if kj == 0 {
                break;
            }
            let h = self.home(kj);
            // It stays when its home lies cyclically in (hole, j].
            let stays = if hole <= j { hole < h && h <= j } else { hole < h || h <= j };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = (0, V::default());
    }

    fn retain(&mut self, keep: impl FnMut(u64, &mut V) -> bool) {
        self.rebuild(self.slots.len(), keep);
    }

    fn entries(&self) -> impl Iterator<Item = (u64, V)> + '_ {
        self.slots.iter().copied().filter(|e| e.0 != 0)
    }
}

/// Members (borrowed for `'a`, or owned) with a value each.
pub struct Members<'a, V> {
    short: Short<V>,
    long: HashMap<Cow<'a, [u8]>, V, Fx>,
}

impl<'a, V: Copy + Default> Members<'a, V> {
    /// An empty table with room for about `n` members without growing.
    pub fn with_capacity(n: usize) -> Self {
        Members { short: Short::with_capacity(n), long: HashMap::with_hasher(Fx::default()) }
    }

    pub fn len(&self) -> usize {
        self.short.len + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `m` with `new()`, or passes its value to `update`.
    #[inline]
    pub fn upsert(&mut self, m: Cow<'a, [u8]>, new: impl FnOnce() -> V, update: impl FnOnce(&mut V)) {
        match pack(&m) {
            Some(k) => self.short.upsert(k, new, update),
            None => match self.long.entry(m) {
                Entry::Occupied(mut e) => update(e.get_mut()),
                Entry::Vacant(e) => {
                    e.insert(new());
                }
            },
        }
    }

    pub fn get_mut(&mut self, m: &[u8]) -> Option<&mut V> {
        match pack(m) {
            Some(k) => self.short.get_mut(k),
            None => self.long.get_mut(m),
        }
    }

    pub fn remove(&mut self, m: &[u8]) {
        match pack(m) {
            Some(k) => self.short.remove(k),
            None => {
                self.long.remove(m);
            }
        }
    }

    /// Keeps the members for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8], &mut V) -> bool) {
        let mut buf = [0u8; 8];
        self.short.retain(|k, v| keep(unpack(k, &mut buf), v));
        self.long.retain(|m, v| keep(m, v));
    }

    /// Calls `f` with every member and its value.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&[u8], &mut V)) {
        let mut buf = [0u8; 8];
        for (k, v) in self.short.slots.iter_mut().filter(|e| e.0 != 0) {
            f(unpack(*k, &mut buf), v);
        }
        self.long.iter_mut().for_each(|(m, v)| f(m, v));
    }

    /// The members, owned, with their values, in no particular order.
    pub fn into_vec(self) -> Vec<(Vec<u8>, V)> {
        let mut out = Vec::with_capacity(self.len());
        let mut buf = [0u8; 8];
        out.extend(self.short.entries().map(|(k, v)| (unpack(k, &mut buf).to_vec(), v)));
        out.extend(self.long.into_iter().map(|(m, v)| (m.into_owned(), v)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_every_byte_in_place() {
        let mut buf = [0u8; 8];
        for n in 0..=SHORT {
            let m: Vec<u8> = (1..=n as u8).map(|i| i.wrapping_mul(37)).collect();
            let k = pack(&m).expect("short");
            assert_eq!(unpack(k, &mut buf), &m[..]);
        }
        assert_eq!(pack(b"12345678"), None);
    }

    #[test]
    fn short_and_long_members_are_told_apart() {
        let mut m: Members<u32> = Members::with_capacity(4);
        let names: [&[u8]; 6] = [b"", b"1", b"1\0", b"1234567", b"12345678", b"\0\0\0\0\0\0\0"];
        for (i, n) in names.iter().enumerate() {
            m.upsert(Cow::Borrowed(n), || i as u32, |_| panic!("{n:?} seen twice"));
        }
        assert_eq!(m.len(), names.len());
        m.upsert(Cow::Owned(b"1".to_vec()), || panic!("\"1\" is there"), |v| *v += 10);
        assert_eq!(m.get_mut(b"1").copied(), Some(11));
        m.remove(b"12345678");
        m.retain(|k, _| k != b"");
        let mut all = m.into_vec();
        all.sort();
        let want: Vec<(Vec<u8>, u32)> =
            vec![(b"\0\0\0\0\0\0\0".to_vec(), 5), (b"1".to_vec(), 11), (b"1\0".to_vec(), 2), (b"1234567".to_vec(), 3)];
        assert_eq!(all, want);
    }

    #[test]
    fn matches_a_model_through_growth_and_removal() {
        let mut m: Members<u64> = Members::with_capacity(1);
        let mut model = std::collections::BTreeMap::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for step in 0..50_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = if x.is_multiple_of(5) { format!("member:{}", x % 500) } else { format!("{}", x % 3000) }.into_bytes();
            if x.is_multiple_of(3) {
                m.remove(&key);
                model.remove(&key);
            } else {
                m.upsert(Cow::Owned(key.clone()), || step, |v| *v += step);
                *model.entry(key).or_insert(0) += step;
            }
            if step % 9973 == 0 {
                m.retain(|k, _| k.len() != 2);
                model.retain(|k, _| k.len() != 2);
            }
            assert_eq!(m.len(), model.len());
        }
        for (k, v) in &model {
            assert_eq!(m.get_mut(k).copied(), Some(*v));
        }
        let mut all = m.into_vec();
        all.sort();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    }
}
