//! Size-class slab allocator for keyspace blobs, in safe Rust.
//!
//! Every key's blob (see `blob.rs`) lives here. Small blobs (up to
//! `MAX_SMALL` bytes) are rounded up to a multiple of 8 (at least 16) and cut
//! from 64 KiB pages that each serve one class; jemalloc's own small classes
//! are 16 bytes apart above 64 and would cost up to 15 bytes per key. Larger
//! blobs are exact-length boxes in a side arena, where jemalloc's rounding is
//! a small fraction of the blob.
//!
//! An address is a 34-bit integer, never 0, so that it fits in a table slot:
//!
//! ```text
//!   bit 33 = 0: small   | page + 1 (21 bits) | index in page (12 bits) |
//!   bit 33 = 1: large   | arena index + 1 (33 bits)                    |
//! ```
//!
//! Freed small blobs form a per-class free list threaded through their first
//! 8 bytes; freed large ones are dropped and their arena index reused.
//! Pages are never handed back to the global allocator before `Db::clear`
//! (a limitation: after a mass delete the memory is reused by later inserts
//! of the same class, not returned).
//! Limits: 2^21 pages (128 GiB of small blobs), 2^33 large blobs.

/// Bytes per page.
pub const PAGE: usize = 64 * 1024;
/// Largest blob served from pages.
pub const MAX_SMALL: usize = 256;
const CLASSES: usize = MAX_SMALL / 8 - 1; // 16, 24, ..., 256
const LARGE: u64 = 1 << 33;

#[derive(Debug)]
struct Page {
    data: Box<[u8]>,
    class: u8,
}

#[derive(Debug, Default, Clone, Copy)]
struct Class {
    /// Head of the free list (an address), 0 when empty.
    free: u64,
    /// Page being carved (page + 1), 0 for none, and the next index in it.
    bump_page: u32,
    bump_idx: u32,
}

/// The allocator. Holds no pointers: addresses are plain integers.
#[derive(Debug)]
pub struct Slab {
    pages: Vec<Page>,
    classes: [Class; CLASSES],
    large: Vec<Box<[u8]>>,
    large_free: Vec<u64>,
    large_bytes: usize,
}

impl Default for Slab {
    fn default() -> Self {
        Slab { pages: Vec::new(), classes: [Class::default(); CLASSES], large: Vec::new(), large_free: Vec::new(), large_bytes: 0 }
    }
}

/// The bytes a blob of `len` bytes occupies: its slab class, or jemalloc's
/// size class for a large one.
pub fn class_size(len: usize) -> usize {
    if len <= MAX_SMALL {
        len.max(16).div_ceil(8) * 8
    } else {
        jemalloc_size(len)
    }
}

/// jemalloc's size class for an allocation of `n` bytes (4 classes per
/// doubling above 64 bytes; pages above that), used for accounting.
pub fn jemalloc_size(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 16 {
        return 16;
    }
    if n <= 64 {
        return n.div_ceil(16) * 16;
    }
    let pow = usize::BITS - (n - 1).leading_zeros(); // 2^pow >= n
    let step = 1usize << (pow - 3);
    n.div_ceil(step) * step
}

impl Slab {
    /// Allocates a blob able to hold `len` bytes. Returns its address and its
    /// bytes (`class_size(len)` long for small blobs, `len` for large ones).
    pub fn alloc(&mut self, len: usize) -> (u64, &mut [u8]) {
        if len > MAX_SMALL {
            let b = vec![0u8; len].into_boxed_slice();
            self.large_bytes += jemalloc_size(len);
            let i = match self.large_free.pop() {
                Some(i) => {
                    self.large[i as usize] = b;
                    i
                }
                None => {
                    self.large.push(b);
                    self.large.len() as u64 - 1
                }
            };
            assert!(i + 1 < LARGE, "slab: too many large blobs");
            return (LARGE | (i + 1), &mut self.large[i as usize]);
        }
        let size = class_size(len);
        let c = size / 8 - 2;
        let addr = if self.classes[c].free != 0 {
            let a = self.classes[c].free;
            let next = u64::from_le_bytes(self.bytes(a)[..8].try_into().expect("blob >= 16 bytes"));
            self.classes[c].free = next;
            a
        } else {
            let per_page = (PAGE / size) as u32;
            let cl = &mut self.classes[c];
            if cl.bump_page == 0 || cl.bump_idx >= per_page {
                self.pages.push(Page { data: vec![0u8; PAGE].into_boxed_slice(), class: c as u8 });
                assert!(self.pages.len() < 1 << 21, "slab: out of page numbers");
                cl.bump_page = self.pages.len() as u32;
                cl.bump_idx = 0;
            }
            let a = ((cl.bump_page as u64) << 12) | cl.bump_idx as u64;
            cl.bump_idx += 1;
            a
        };
        (addr, self.bytes_mut(addr))
    }

    fn small_pos(addr: u64) -> (usize, usize) {
        ((addr >> 12) as usize - 1, (addr & 0xFFF) as usize)
    }

    /// The bytes of the blob at `addr` (class-size long for small blobs).
    pub fn bytes(&self, addr: u64) -> &[u8] {
        if addr & LARGE != 0 {
            return &self.large[(addr & !LARGE) as usize - 1];
        }
        let (p, i) = Self::small_pos(addr);
        let page = &self.pages[p];
        let size = (page.class as usize + 2) * 8;
        &page.data[i * size..(i + 1) * size]
    }

    /// Mutable bytes of the blob at `addr`.
    pub fn bytes_mut(&mut self, addr: u64) -> &mut [u8] {
        if addr & LARGE != 0 {
            return &mut self.large[(addr & !LARGE) as usize - 1];
        }
        let (p, i) = Self::small_pos(addr);
        let page = &mut self.pages[p];
        let size = (page.class as usize + 2) * 8;
        &mut page.data[i * size..(i + 1) * size]
    }

    /// Bytes the blob at `addr` costs (its class size).
    pub fn cost(&self, addr: u64) -> usize {
        if addr & LARGE != 0 {
            jemalloc_size(self.bytes(addr).len())
        } else {
            self.bytes(addr).len()
        }
    }

    /// Frees the blob at `addr`.
    pub fn free(&mut self, addr: u64) {
        if addr & LARGE != 0 {
            let i = (addr & !LARGE) - 1;
            let b = std::mem::take(&mut self.large[i as usize]);
            self.large_bytes -= jemalloc_size(b.len());
            self.large_free.push(i);
            return;
        }
        let (p, _) = Self::small_pos(addr);
        let c = self.pages[p].class as usize;
        let next = self.classes[c].free;
        self.bytes_mut(addr)[..8].copy_from_slice(&next.to_le_bytes());
        self.classes[c].free = addr;
    }

    /// Bytes held from the global allocator: pages, large blobs and the
    /// bookkeeping vectors.
    pub fn allocated_bytes(&self) -> usize {
        self.pages.len() * PAGE
            + self.large_bytes
            + jemalloc_size(self.pages.capacity() * size_of::<Page>())
            + jemalloc_size(self.large.capacity() * size_of::<Box<[u8]>>())
            + jemalloc_size(self.large_free.capacity() * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_jemalloc_sizes() {
        assert_eq!(class_size(1), 16);
        assert_eq!(class_size(17), 24);
        assert_eq!(class_size(104), 104);
        assert_eq!(class_size(256), 256);
        assert_eq!(jemalloc_size(257), 320);
        assert_eq!(jemalloc_size(104), 112);
        assert_eq!(jemalloc_size(1025), 1280);
        assert_eq!(jemalloc_size(65536), 65536);
        assert_eq!(jemalloc_size(48), 48);
    }

    #[test]
    fn alloc_free_reuse() {
        let mut s = Slab::default();
        let mut addrs = Vec::new();
        for i in 0..5000usize {
            let len = 9 + i % 300;
            let (a, b) = s.alloc(len);
            assert!(a != 0 && a < 1 << 34);
            assert!(b.len() >= len);
            b[..len].fill(i as u8);
            addrs.push((a, len, i as u8));
        }
        for &(a, len, v) in &addrs {
            assert!(s.bytes(a)[..len].iter().all(|&x| x == v));
        }
        let before = (s.pages.len(), s.large_bytes);
        for &(a, _, _) in addrs.iter().step_by(2) {
            s.free(a);
        }
        for e in addrs.iter_mut().step_by(2) {
            let (a, b) = s.alloc(e.1);
            b[..e.1].fill(e.2);
            e.0 = a;
        }
        assert_eq!((s.pages.len(), s.large_bytes), before, "freed blobs are reused");
        for &(a, len, v) in &addrs {
            assert!(s.bytes(a)[..len].iter().all(|&x| x == v));
        }
    }
}
