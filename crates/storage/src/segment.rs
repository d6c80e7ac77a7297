//! One segment of the keyspace table: a bucketized two-choice cuckoo table of
//! 8-byte slots, and the 64-bit key hash that places keys in segments.
//!
//! A slot packs everything the table needs without touching the blob:
//!
//! ```text
//!   bit  0..14  tag: the 14 hash bits right after the segment's prefix
//!   bit 14      has a deadline (active expiry skips other keys unread)
//!   bit 15..30  access field: LRU clock or LFU time and counter (`crate::access`)
//!   bit 30..64  slab address of the blob (never 0, so an empty slot is 0)
//! ```
//!
//! Buckets hold 8 slots (one cache line). A key may sit in one of two buckets,
//! both derived from its tag alone, so growing a segment (rehashing every slot
//! into more buckets) and cuckoo kicks never read a blob. Only a split, which
//! needs the next hash bit, re-hashes keys. Because the tag is the next 14 bits
//! of the hash after the segment's prefix, ordering a segment's slots by tag
//! orders its keys by hash, which is what SCAN's cursor relies on.
//!
//! Bucket counts follow jemalloc's size classes (slot array = 64 * buckets
//! bytes), growing by 1.14x-1.25x steps up to `MAX_BUCKETS`, so that the
//! average load stays near 0.85-0.9 with no allocator slack.
//! Complexity: lookup reads two buckets; insert may kick up to `MAX_KICKS`.

/// Slots per bucket.
pub const BUCKET: usize = 8;
/// Bucket counts a segment takes: 64 * n bytes is a jemalloc size class.
const SIZES: [usize; 28] = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256];
/// Largest bucket count before a full segment splits.
pub const MAX_BUCKETS: usize = 256;
const MAX_KICKS: usize = 64;

/// Bits of hash kept in a slot.
pub const TAG_BITS: u32 = 14;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// Slot bit: the key has a deadline.
pub const TTL_BIT: u64 = 1 << 14;
const CLOCK_SHIFT: u32 = 15;
/// Modulus of the access field (the LRU clock counts seconds).
pub const CLOCK_MOD: i64 = 1 << 15;
const ADDR_SHIFT: u32 = 30;

/// Builds a slot.
pub fn make_slot(tag: u64, ttl: bool, clock: i64, addr: u64) -> u64 {
    tag | if ttl { TTL_BIT } else { 0 } | ((clock.rem_euclid(CLOCK_MOD) as u64) << CLOCK_SHIFT) | (addr << ADDR_SHIFT)
}
/// The slot's tag.
pub fn tag_of(s: u64) -> u64 {
    s & TAG_MASK
}
/// The slot's blob address.
pub fn addr_of(s: u64) -> u64 {
    s >> ADDR_SHIFT
}
/// The slot's last-access clock.
pub fn clock_of(s: u64) -> i64 {
    ((s >> CLOCK_SHIFT) & (CLOCK_MOD as u64 - 1)) as i64
}
/// The slot with its clock replaced.
pub fn with_clock(s: u64, clock: i64) -> u64 {
    (s & !((CLOCK_MOD as u64 - 1) << CLOCK_SHIFT)) | ((clock.rem_euclid(CLOCK_MOD) as u64) << CLOCK_SHIFT)
}

/// The tag of hash `h` in a segment of depth `depth`: the 14 bits after the prefix.
pub fn tag_at(h: u64, depth: u32) -> u64 {
    (h << depth) >> (64 - TAG_BITS)
}

fn fold(a: u64, b: u64) -> u64 {
    let r = (a as u128) * (b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

fn read_tail(b: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(buf)
}

/// The 64-bit hash of a key (a folded-multiply hash in the wyhash family).
pub fn hash(key: &[u8]) -> u64 {
    const K: [u64; 4] = [0x9E37_79B9_7F4A_7C15, 0xC2B2_AE3D_27D4_EB4F, 0x1656_67B1_9E37_79F9, 0xD6E8_FEB8_6659_FD93];
    let mut h = K[0] ^ (key.len() as u64).wrapping_mul(K[1]);
    let mut rest = key;
    while rest.len() >= 16 {
        h = fold(read_tail(&rest[..8]) ^ K[1], read_tail(&rest[8..16]) ^ h);
        rest = &rest[16..];
    }
    let (a, b) = if rest.len() >= 8 { (read_tail(&rest[..8]), read_tail(&rest[8..])) } else { (read_tail(rest), 0) };
    h = fold(a ^ K[2], b ^ h ^ K[3]);
    fold(h ^ K[0], K[2])
}

fn buckets_of(tag: u64, nb: usize) -> (usize, usize) {
    let b1 = (tag as usize * nb) >> TAG_BITS;
    let mut x = tag.wrapping_mul(0x5BD1) & TAG_MASK;
    x ^= x >> 7;
    let b2 = (x as usize * nb) >> TAG_BITS;
    (b1, b2)
}

/// A segment: `slots.len() / 8` buckets of 8 slots.
#[derive(Debug)]
pub struct Segment {
    /// The slots; 0 is empty.
    pub slots: Box<[u64]>,
    /// Occupied slots.
    pub len: u32,
    /// Occupied slots with the TTL bit.
    pub volatile: u32,
    /// Bumped whenever slots move (growth, split), so a paused walk restarts.
    pub shape: u32,
    /// Number of leading hash bits shared by every key here.
    pub depth: u8,
    /// No deadline here is earlier than this (a lower bound).
    pub min_deadline: i64,
    /// No field deadline of an inline hash here is earlier than this (a
    /// lower bound; the Db's field-expiry index holds the segment under it).
    pub field_min: i64,
}

const _: () = assert!(size_of::<Segment>() == 48);

impl Segment {
    /// An empty segment of `depth` with room for about `n` keys.
    pub fn with_room(depth: u8, n: usize) -> Segment {
        let want = (n * 10).div_ceil(BUCKET * 8); // load <= 0.8
        let nb = SIZES.iter().copied().find(|&s| s >= want).unwrap_or(want.max(MAX_BUCKETS));
        Segment { slots: vec![0; nb * BUCKET].into_boxed_slice(), len: 0, volatile: 0, shape: 0, depth, min_deadline: i64::MAX, field_min: i64::MAX }
    }

    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.slots.len() / BUCKET
    }

    /// Positions of the two candidate buckets of `tag`.
    pub fn candidates(&self, tag: u64) -> [std::ops::Range<usize>; 2] {
        let (b1, b2) = buckets_of(tag, self.buckets());
        [b1 * BUCKET..(b1 + 1) * BUCKET, b2 * BUCKET..(b2 + 1) * BUCKET]
    }

    /// Index of the occupied slot with `tag` for which `is_key` holds.
    pub fn find(&self, tag: u64, mut is_key: impl FnMut(u64) -> bool) -> Option<usize> {
        let [r1, r2] = self.candidates(tag);
        let same = r1 == r2;
        for r in [r1, r2].into_iter().take(if same { 1 } else { 2 }) {
            for i in r {
                let s = self.slots[i];
                if s != 0 && tag_of(s) == tag && is_key(s) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Inserts slot `s` (counting it). When both buckets are full, kicks
    /// entries to their other bucket; if that fails the segment is full and
    /// an entry (maybe another one) is handed back uninserted as Err.
    pub fn insert(&mut self, mut s: u64) -> Result<(), u64> {
        let new = s;
        let [r1, r2] = self.candidates(tag_of(s));
        for r in [r1.clone(), r2] {
            if let Some(i) = self.slots[r.clone()].iter().position(|&x| x == 0) {
                self.slots[r.start + i] = s;
                self.count(s);
                return Ok(());
            }
        }
        // Random walk: swap into the bucket at hand, move the victim to its other bucket.
        let mut r = r1;
        for k in 0..MAX_KICKS {
            let i = r.start + (tag_of(s) as usize + k) % BUCKET;
            let victim = std::mem::replace(&mut self.slots[i], s);
            s = victim;
            let [a, b] = self.candidates(tag_of(s));
            let other = if a == r { b } else { a };
            if let Some(j) = self.slots[other.clone()].iter().position(|&x| x == 0) {
                self.slots[other.start + j] = s;
                self.count(new);
                return Ok(());
            }
            r = other;
        }
        // `new` is in, `s` was displaced and is not: count one in, one out.
        self.count(new);
        self.len -= 1;
        if s & TTL_BIT != 0 {
            self.volatile -= 1;
        }
        Err(s)
    }

    fn count(&mut self, s: u64) {
        self.len += 1;
        if s & TTL_BIT != 0 {
            self.volatile += 1;
        }
    }

    /// Clears slot `i`, returning what it held.
    pub fn take(&mut self, i: usize) -> u64 {
        let s = std::mem::replace(&mut self.slots[i], 0);
        self.len -= 1;
        if s & TTL_BIT != 0 {
            self.volatile -= 1;
        }
        s
    }

    /// True when a bucket's worth of keys or more share `tag` in its two
    /// buckets: growing cannot make room for one more (both buckets follow
    /// from the tag alone).
    pub fn crowded(&self, tag: u64) -> bool {
        let [r1, r2] = self.candidates(tag);
        let same = r1 == r2;
        let mut n = self.slots[r1].iter().filter(|&&s| s != 0 && tag_of(s) == tag).count();
        if !same {
            n += self.slots[r2].iter().filter(|&&s| s != 0 && tag_of(s) == tag).count();
        }
        n >= BUCKET
    }

    /// True when the segment is at its largest size and should split instead of growing.
    pub fn at_max(&self) -> bool {
        self.buckets() >= MAX_BUCKETS
    }

    /// Rehashes into the next size (past `MAX_BUCKETS` in 1/8 steps when a
    /// split could not make room), inserting `extra` too.
    pub fn grow(&mut self, extra: u64) {
        let mut items: Vec<u64> = self.slots.iter().copied().filter(|&s| s != 0).collect();
        items.push(extra);
        let mut nb = self.buckets();
        loop {
            nb = SIZES.iter().copied().find(|&s| s > nb).unwrap_or(nb + nb / 8);
            self.slots = vec![0; nb * BUCKET].into_boxed_slice();
            self.len = 0;
            self.volatile = 0;
            self.shape = self.shape.wrapping_add(1);
            if items.iter().all(|&s| self.insert(s).is_ok()) {
                return;
            }
        }
    }

    /// Bytes of memory this segment holds (jemalloc classes included).
    pub fn allocated_bytes(&self) -> usize {
        crate::slab::jemalloc_size(self.slots.len() * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_high_before_growing() {
        let mut seg = Segment::with_room(0, 0);
        let mut loads = Vec::new();
        for n in 1..=20_000u64 {
            let h = hash(&n.to_le_bytes());
            let s = make_slot(tag_at(h, 0), n % 3 == 0, 0, n);
            if let Err(held) = seg.insert(s) {
                if seg.at_max() {
                    loads.push(seg.len as f64 / seg.slots.len() as f64);
                    break;
                }
                seg.grow(held);
            }
            assert_eq!(seg.len as u64, n);
        }
        assert!(loads[0] > 0.9, "load at failure {loads:?}");
        let mut seen: Vec<u64> = seg.slots.iter().filter(|&&s| s != 0).map(|&s| addr_of(s)).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), seg.len as usize);
        // Every entry is found in one of its candidate buckets.
        for &s in seg.slots.iter().filter(|&&s| s != 0) {
            assert!(seg.find(tag_of(s), |x| x == s).is_some());
        }
        assert_eq!(seg.volatile as usize, seg.slots.iter().filter(|&&s| s & TTL_BIT != 0).count());
    }

    #[test]
    fn slot_fields() {
        let s = make_slot(0x3FFF, true, 70_000, (1 << 34) - 1);
        assert_eq!(tag_of(s), 0x3FFF);
        assert_eq!(addr_of(s), (1 << 34) - 1);
        assert_eq!(clock_of(s), 70_000 % CLOCK_MOD);
        assert_eq!(clock_of(with_clock(s, 5)), 5);
        assert_eq!(addr_of(with_clock(s, 5)), (1 << 34) - 1);
    }
}
