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
pub mod listpack;
pub mod intset;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
