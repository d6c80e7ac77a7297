//! Compact encodings behind the collection types, and the allocator model
//! they use to report memory.
//!
//! Every encoding counts its memory as the allocator will: the sum, over the
//! heap blocks it owns, of each block's requested size rounded up to
//! jemalloc's size class (`alloc_size`). Buffers are grown to a whole size
//! class on purpose (`reserve_class`), so the slack the allocator would hand
//! out anyway holds data instead of being wasted, and a capacity is always
//! exactly what the allocator charges.

pub mod fieldpack;
pub mod fieldtable;
pub mod fsstenc;
pub mod listpack;
pub mod intset;
pub mod keypack;
pub mod packed;
pub mod shape;
pub mod zdict;

/// Appends `n` as a LEB128 varint (the encodings' lengths and counts).
pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// `a == b` for short slices (a shape's pieces, a key's prefix, a
/// pattern): the lengths, then a few word compares instead of a call to
/// memcmp.
#[inline(always)]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let half = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().expect("4 bytes"));
    match n {
        0 => true,
        1..=3 => a == b,
        4..=8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => {
            // Whole words, then one that ends at the last byte (it may
            // overlap the one before).
            let mut i = 0;
            while i + 8 < n {
                if word(a, i) != word(b, i) {
                    return false;
                }
                i += 8;
            }
            word(a, n - 8) == word(b, n - 8)
        }
    }
}

/// The LEB128 varint at the start of `b` and its length; None if it is
/// cut short or holds more than a usize (stored and fuzzed bytes alike).
pub(crate) fn read_varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut n = 0usize;
    for (i, &c) in b.iter().enumerate().take(10) {
        let part = ((c & 0x7F) as usize).checked_shl(7 * i as u32)?;
        if i == 9 && c > 1 {
            return None;
        }
        n |= part;
        if c < 0x80 {
            return Some((n, i + 1));
        }
    }
    None
}

/// The first byte of a collection kept inline in its key's blob (the
/// keyspace's small-collection form, `blob::Body::Inline`): which type it
/// is and how its entries are written.
///
/// ```text
/// bits 0-1  0: a hash (types::hash), 2: a hash OBJECT ENCODING calls
///           listpackex, 1: a sorted set (types::zset), 3: a hash of
///           integers (below)
/// bits 2-7  0: entries in the type's own packed form; w in 1..=63: every
///           field (member) is w bytes long and its length is left out
///
/// a hash of integers (bits 0-1 = 3), every field w bytes, every value an
/// integer, no TTL, not listpackex:
/// bits 2-4  w - 1 (w in 1..=8)
/// bits 5-7  v - 1: every value is a v-byte little-endian two's-complement
///           integer (v in 1..=8), sign-extended on read, with no tag
/// ```
///
/// The fixed width is stored once per collection: a partition of keys that
/// are all one length (session ids, UUIDs, hashes) saves a byte an entry.
/// A hash of integers with short field names (seed 002's `i <id> x <ts>`)
/// also leaves out each value's tag byte: `i` and `x` with 7- and
/// 10-digit values are 11 bytes with the header instead of 13.
pub mod inline {
    /// Bit 0: a sorted set.
    pub const ZSET: u8 = 1;
    /// Bit 1: a hash Redis would call listpackex.
    pub const HASH_EX: u8 = 2;
    /// Bits 0-1 both: a hash of integers.
    pub const INT_HASH: u8 = 3;
    /// Largest fixed width the header can hold.
    pub const MAX_WIDTH: usize = 63;
    /// Largest field width (and integer width) of a hash of integers.
    pub const MAX_INT_WIDTH: usize = 8;

    /// True if the header is a sorted set's.
    pub fn is_zset(header: u8) -> bool {
        header & 3 == ZSET
    }

    /// The header of a hash of integers: `w`-byte fields, `v`-byte values.
    pub fn int_header(w: usize, v: usize) -> u8 {
        debug_assert!((1..=MAX_INT_WIDTH).contains(&w) && (1..=MAX_INT_WIDTH).contains(&v));
        INT_HASH | ((w - 1) as u8) << 2 | ((v - 1) as u8) << 5
    }

    /// The integer width of a hash of integers' header; None for others.
    pub fn int_width(header: u8) -> Option<usize> {
        (header & 3 == INT_HASH).then_some(usize::from(header >> 5) + 1)
    }
    /// Most entry bytes (in the type's own packed form) a collection may
    /// have to be kept inline: up to a few dozen short entries, so that
    /// with its key the blob stays within the slab's largest class (1 KiB).
    /// Every access to an inline collection copies its bytes once, so the
    /// bound also bounds that copy.
    pub const MAX_BYTES: usize = 960;

    /// The header byte for a type bit, its flags and a fixed width (0: none).
    pub fn header(bits: u8, width: usize) -> u8 {
        debug_assert!(width <= MAX_WIDTH && bits < 4);
        bits | (width as u8) << 2
    }

    /// The fixed width a header names (0: entries carry their lengths).
    pub fn width(header: u8) -> usize {
        if header & 3 == INT_HASH { usize::from((header >> 2) & 7) + 1 } else { (header >> 2) as usize }
    }
}

/// Bytes jemalloc reserves for a request of `n` bytes (its `nallocx` on
/// 64-bit Linux with a 16-byte quantum and 4 KiB pages); 0 for 0.
///
/// Classes: 8, then multiples of 16 up to 128, then four classes per
/// doubling (160, 192, 224, 256, 320, ...): at most 25% above the request.
pub fn alloc_size(n: usize) -> usize {
    match n {
        0 => 0,
        1..=8 => 8,
        9..=128 => (n + 15) & !15,
        _ => {
            let lg = usize::BITS - 1 - (n - 1).leading_zeros();
            let spacing = 1usize << (lg - 2);
            (n + spacing - 1) & !(spacing - 1)
        }
    }
}

/// Makes room for `extra` more bytes, growing the capacity to exactly the
/// size class of the new length (never doubling), so memory follows the
/// data within one class step.
pub fn reserve_class(v: &mut Vec<u8>, extra: usize) {
    let need = v.len() + extra;
    if need > v.capacity() {
        v.reserve_exact(alloc_size(need) - v.len());
    }
}

/// Returns memory when the contents fit in a class at most half the
/// capacity (the hysteresis keeps alternating insert/remove from
/// reallocating each time). An empty vector frees its block.
pub fn shrink_class(v: &mut Vec<u8>) {
    let want = alloc_size(v.len());
    if want <= v.capacity() / 2 {
        v.shrink_to(want);
    }
}

/// The text of every number below 100, two digits each ("00" to "99").
const PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// 10 to the power of 0 to 19.
const TEN: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// The digits `n` is written with (1-20): an estimate from its bits
/// (log10 2 is about 1233/4096), one compare to correct it.
pub(crate) fn digit_count(n: u64) -> usize {
    let bits = 64 - (n | 1).leading_zeros() as usize;
    let t = (bits * 1233) >> 12;
    (t + 1 - usize::from(n < TEN[t])).max(1)
}

/// Writes `n` in decimal into `slot` right-aligned, with zeros to its left (`slot`
/// holds at least `digit_count(n)` bytes): four digits a step (one
/// division on the chain, two independent ones beside it), then pairs.
pub(crate) fn write_digits(slot: &mut [u8], mut n: u64) {
    let mut at = slot.len();
    let pair = |at: usize, r: usize, slot: &mut [u8]| slot[at - 2..at].copy_from_slice(&PAIRS[2 * r..2 * r + 2]);
    while n >= 10_000 {
        let r = (n % 10_000) as usize;
        n /= 10_000;
        pair(at, r % 100, slot);
        pair(at - 2, r / 100, slot);
        at -= 4;
    }
    let mut n = n as usize;
    if n >= 100 {
        pair(at, n % 100, slot);
        n /= 100;
        at -= 2;
    }
    if n >= 10 {
        pair(at, n, slot);
        at -= 2;
    } else {
        slot[at - 1] = b'0' + n as u8;
        at -= 1;
    }
    slot[..at].fill(b'0');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn alloc_size_matches_jemalloc() {
        let mut sizes: Vec<usize> = (1..=70_000).collect();
        sizes.extend([100_000, 1 << 20, (1 << 20) + 1, 3 << 20, 10_000_000]);
        for n in sizes {
            // SAFETY: nallocx only computes a size class; it allocates nothing.
            let real = unsafe { tikv_jemalloc_sys::nallocx(n, 0) };
            assert_eq!(alloc_size(n), real, "n = {n}");
        }
    }

    #[test]
    fn reserve_and_shrink_track_classes() {
        let mut v = Vec::new();
        reserve_class(&mut v, 129);
        assert_eq!(v.capacity(), 160);
        v.resize(150, 0);
        reserve_class(&mut v, 20);
        assert_eq!(v.capacity(), 192);
        v.truncate(10);
        shrink_class(&mut v);
        assert_eq!(v.capacity(), 16);
        v.clear();
        shrink_class(&mut v);
        assert_eq!(v.capacity(), 0);
    }

    proptest! {
        /// `same` is `==`.
        #[test]
        fn same_is_eq(a in prop::collection::vec(0u8..3, 0..40), flip in any::<prop::sample::Index>()) {
            prop_assert!(same(&a, &a));
            if !a.is_empty() {
                let mut b = a.clone();
                b[flip.index(a.len())] ^= 1;
                prop_assert!(!same(&a, &b));
                prop_assert!(!same(&a, &a[1..]));
            }
        }

        /// Numbers are written as `format!` writes them, zero-filled.
        #[test]
        fn write_digits_is_format(n in any::<u64>(), extra in 0usize..3) {
            let d = digit_count(n);
            prop_assert_eq!(d, n.to_string().len());
            let mut slot = vec![b'?'; d + extra];
            write_digits(&mut slot, n);
            prop_assert_eq!(slot, format!("{n:0w$}", w = d + extra).into_bytes());
        }
    }
}
