//! Size-class slab allocator for keyspace blobs, in safe Rust.
//!
//! Every key's blob (see `blob.rs`) lives here. Small blobs (up to
//! `MAX_SMALL`, 1 KiB) are rounded up to a multiple of 8 from 16 on, and
//! cut from 64 KiB pages that each serve one class; below 16 bytes every
//! length is its own class (`TINY`), on pages of at most 4,096 slots, in
//! a jemalloc size class (8 KiB for the 2-byte class, 56 KiB for the
//! 15-byte one), because a tiny blob
//! (`SET key:<n> <n>` with packed keys: 5 to 7 bytes) rounded up to 16
//! would pay up to twice its size; jemalloc's own small
//! classes are 16 bytes apart above 64 and 128 apart from 512 to 1024, and
//! would cost up to 15 bytes per key (up to 127 for the small hashes and
//! sorted sets kept in their key's blob). Larger blobs are exact-length
//! boxes in a side arena, where jemalloc's rounding is a small fraction of
//! the blob.
//!
//! A blob that grows (an inline collection gaining entries) moves up
//! through the classes; the pages it left keep the slots of the blobs that
//! stayed, and their free slots wait for the next blob of that class. So a
//! population of collections that all grow (seed 002's partitions filling
//! up) leaves free slots behind in the smaller classes: 26 MB of them after
//! 1M sessions in 131,072 partitions, against 59 MB in use. `slack_bytes`
//! reports them; INFO's used_memory leaves them out as it leaves out
//! jemalloc's own free regions, and RSS counts them. Moving blobs out of
//! sparse pages (an active defrag) would give them back.
//!
//! An address is a 34-bit integer, never 0, so that it fits in a table slot:
//!
//! ```text
//!   bit 33 = 0: small   | page + 1 (21 bits) | slot in page (12 bits) |
//!   bit 33 = 1: large   | arena index + 1 (33 bits)                   |
//! ```
//!
//! ## Pages
//!
//! A page record (32 bytes, asserted) holds the page's bytes, its class, its
//! live count, how many slots have been carved from its front so far, and the
//! head of the page's own free list: freed slots are threaded through their
//! first 2 bytes as u16 slot indices (every blob is at least 2 bytes: its
//! flags and key length). A page has at most 4,096 slots (12 address bits).
//! Each class keeps its pages that have room (a free or an uncarved slot) in
//! a doubly linked list threaded through the page records; full pages are in
//! no list.
//!
//! ```text
//!   class 24:  head -> page 7 <-> page 2 <-> page 12 <- tail     (pages with room)
//!   page 7:    | live | free: 4 -> 1 -> NONE | live | live | free | carved | uncarved ... |
//!               slot 0  slot 1                slot 2 slot 3 slot 4
//! ```
//!
//! - alloc, O(1): the class's head page (a slot from its free list, else its
//!   next uncarved slot); a page that becomes full leaves the list. With no
//!   page in the list: a spare empty page, else a new 64 KiB page.
//! - free, O(1): the slot goes on its page's free list. A full page that gets
//!   a free slot joins the list at the tail, so the head page fills up first
//!   and the others can drain. A page whose live count reaches 0 leaves the
//!   list and becomes a spare.
//! - Spares (the hysteresis rule): at most `SPARES` (2) empty pages are kept,
//!   shared by all classes (a spare takes the class of whoever needs a page
//!   next); when a page empties with both spare places taken, the oldest spare's bytes go
//!   back to the global allocator. Without a spare, an alloc/free ping-pong
//!   at a page boundary would allocate and free 64 KiB each time. Shared
//!   rather than one per class because a blob moving between classes (an
//!   inline hash growing through its sizes, a key whose value alternates
//!   between two lengths) empties a page in one class as it needs one in
//!   another: one shared spare serves both, where a spare per class would
//!   keep an idle page in each of the 141 classes (up to 9 MiB) and leave the
//!   pages a growing hash passed through behind. Two rather than one so that
//!   two such ping-pongs at once still do not churn. After a mass delete at
//!   most 128 KiB of empty pages stay held. A spare whose byte count does
//!   not suit its new class (a tiny class's page is smaller) gets new bytes.
//! - A released page keeps its number (its bytes become an empty box),
//!   because the addresses of live blobs embed page numbers; released numbers
//!   are reused, newest first, before the page table grows.
//!
//! Freed large blobs are dropped and their arena index reused.
//! `allocated_bytes` is exact for what is held: pages that hold bytes (spares
//! included), large blobs and the bookkeeping vectors, each with jemalloc's
//! rounding. A freed blob's or a fresh slot's bytes are unspecified.
//! Limits: 2^21 page numbers (128 GiB of small blobs), 2^33 large blobs.

/// Bytes per page.
pub const PAGE: usize = 64 * 1024;
/// Largest blob served from pages.
pub const MAX_SMALL: usize = 1024;
/// Classes of 16, 24, ..., 1024 bytes (indices 0..127), then one for each
/// length below 16 (`TINY`: 2..=15 bytes, indices 127..141).
const CLASSES: usize = WIDE + TINY_CLASSES;
const WIDE: usize = MAX_SMALL / 8 - 1;
/// Blobs shorter than this have a class of their own length.
pub const TINY: usize = 16;
const TINY_CLASSES: usize = TINY - 2;
/// Most slots a page holds (the address has 12 bits for the slot).
const MAX_SLOTS: usize = 4096;
const LARGE: u64 = 1 << 33;
/// Empty pages kept for reuse (see the header).
const SPARES: usize = 2;
/// End of a page's free list.
const NONE: u16 = u16::MAX;

#[derive(Debug)]
struct Page {
    /// The page's bytes; an empty box once the page is released.
    data: Box<[u8]>,
    /// Neighbours in the class's list of pages with room (page + 1, 0 for none).
    prev: u32,
    next: u32,
    /// Slots in use.
    live: u16,
    /// Slots cut from the front so far; those from here on were never used.
    carved: u16,
    /// First slot of the page's free list, `NONE` when it is empty.
    free: u16,
    class: u8,
}

const _: () = assert!(size_of::<Page>() == 32);

#[derive(Debug, Default, Clone, Copy)]
struct Class {
    /// Ends of the list of pages with room (page + 1, 0 for none).
    head: u32,
    tail: u32,
}

/// The allocator. Holds no pointers: addresses are plain integers.
#[derive(Debug)]
pub struct Slab {
    pages: Vec<Page>,
    classes: [Class; CLASSES],
    /// Empty pages kept for any class (page + 1), oldest first; `nspares` used.
    spares: [u32; SPARES],
    nspares: usize,
    /// Numbers of released pages, reused last-in first-out.
    released: Vec<u32>,
    /// Pages holding bytes (in use or spare), and their bytes.
    held: usize,
    held_bytes: usize,
    large: Vec<Box<[u8]>>,
    large_free: Vec<u64>,
    large_bytes: usize,
    /// Bytes of small blobs in use (slot sizes).
    small_used: usize,
}

impl Default for Slab {
    fn default() -> Self {
        Slab {
            pages: Vec::new(),
            classes: [Class::default(); CLASSES],
            spares: [0; SPARES],
            nspares: 0,
            released: Vec::new(),
            held: 0,
            held_bytes: 0,
            large: Vec::new(),
            large_free: Vec::new(),
            large_bytes: 0,
            small_used: 0,
        }
    }
}

/// The bytes a blob of `len` bytes occupies: its slab class, or jemalloc's
/// size class for a large one.
pub fn class_size(len: usize) -> usize {
    if len < TINY {
        len.max(2)
    } else if len <= MAX_SMALL {
        len.div_ceil(8) * 8
    } else {
        jemalloc_size(len)
    }
}

/// Asks the CPU to start loading the cache lines that hold the first
/// `lines * 64` bytes of `b` (all of it if shorter), for a walk that reads
/// them soon (the slab's blobs, a sorted set's next chunk, the keyspace
/// table's buckets). Those bytes span one line more than `lines` when `b`
/// does not start on a line: a 40-byte blob 40 bytes into a line has its
/// key on the next one. A hint only: no effect on any value.
#[inline]
pub fn prefetch_bytes<T>(b: &[T], lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = b.as_ptr().cast::<i8>();
        let bytes = std::mem::size_of_val(b).min(lines * 64);
        let first = p as usize % 64;
        for i in 0..(first + bytes).div_ceil(64) {
            // SAFETY: SSE is part of every x86_64 target, and a prefetch
            // only hints the cache: it reads nothing the program sees and
            // cannot fault, whatever the address (`wrapping_sub` and
            // `wrapping_add` make no claim that it is in bounds).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_sub(first).wrapping_add(i * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (b, lines);
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

/// Heap bytes of a vector's buffer of `n` bytes: none when it has no capacity.
fn buffer_size(n: usize) -> usize {
    if n == 0 { 0 } else { jemalloc_size(n) }
}

/// Slot size of class `c`.
fn slot_size(c: usize) -> usize {
    if c < WIDE { (c + 2) * 8 } else { c - WIDE + 2 }
}

/// The class of slot size `size` (a `class_size`).
fn class_of(size: usize) -> usize {
    if size < TINY { WIDE + size - 2 } else { size / 8 - 2 }
}

/// Slots in a page of class `c`.
fn per_page(c: usize) -> usize {
    page_bytes(c) / slot_size(c)
}

/// Bytes of a page of class `c`: `PAGE`, or for a tiny class the largest
/// jemalloc size class that holds at most 4,096 slots, so that the page
/// costs what it says (4,096 slots of 15 bytes would be 60 KiB, which
/// jemalloc serves from its 64 KiB class).
fn page_bytes(c: usize) -> usize {
    if c < WIDE {
        return PAGE;
    }
    let most = MAX_SLOTS * slot_size(c);
    let mut n = most;
    while jemalloc_size(n) != n {
        n -= 1;
    }
    n
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
        let c = class_of(size);
        if self.classes[c].head == 0 {
            let p = self.take_page(c);
            self.link_tail(c, p);
        }
        let p = self.classes[c].head as usize - 1;
        let page = &mut self.pages[p];
        let slot = if page.free != NONE {
            let s = page.free as usize;
            page.free = u16::from_le_bytes([page.data[s * size], page.data[s * size + 1]]);
            if page.free != NONE {
                // The next alloc of this class reads that slot's link, freed
                // long ago and cold: start loading it now (SET over a big
                // keyspace waited for that miss on every write).
                prefetch_bytes(&page.data[page.free as usize * size..], 1);
            }
            s
        } else {
            page.carved += 1;
            page.carved as usize - 1
        };
        page.live += 1;
        self.small_used += size;
        if page.live as usize == per_page(c) {
            self.unlink(c, p);
        }
        let addr = ((p as u64 + 1) << 12) | slot as u64;
        (addr, &mut self.pages[p].data[slot * size..(slot + 1) * size])
    }

    /// `free(old)` then `alloc(len)`, except that when `len` falls in the
    /// class of `old` (for a large blob: has its exact length) the blob's
    /// own bytes are handed back under the same address: overwriting a
    /// value with one of about its size then costs no free-list walk and
    /// touches no other memory. The bytes hold what `old` held, as a
    /// reused slot of `alloc` holds stale bytes.
    pub fn replace(&mut self, old: u64, len: usize) -> (u64, &mut [u8]) {
        if old & LARGE != 0 {
            if len > MAX_SMALL && self.large[(old & !LARGE) as usize - 1].len() == len {
                return (old, &mut self.large[(old & !LARGE) as usize - 1]);
            }
        } else if len <= MAX_SMALL {
            let (p, i) = Self::small_pos(old);
            let c = self.pages[p].class as usize;
            if class_of(class_size(len)) == c {
                let size = slot_size(c);
                return (old, &mut self.pages[p].data[i * size..(i + 1) * size]);
            }
        }
        self.free(old);
        self.alloc(len)
    }

    /// An empty page for class `c`, in no list: a spare, else a new one
    /// (under a released number when there is one).
    fn take_page(&mut self, c: usize) -> usize {
        let p = if self.nspares > 0 {
            self.nspares -= 1;
            let p = self.spares[self.nspares] as usize - 1;
            if self.pages[p].data.len() != page_bytes(c) {
                self.held_bytes -= self.pages[p].data.len();
                self.held_bytes += page_bytes(c);
                self.pages[p].data = vec![0u8; page_bytes(c)].into_boxed_slice();
            }
            p
        } else {
            let data = vec![0u8; page_bytes(c)].into_boxed_slice();
            self.held += 1;
            self.held_bytes += page_bytes(c);
            match self.released.pop() {
                Some(n) => {
                    self.pages[n as usize].data = data;
                    n as usize
                }
                None => {
                    self.pages.push(Page { data, prev: 0, next: 0, live: 0, carved: 0, free: NONE, class: 0 });
                    assert!(self.pages.len() < 1 << 21, "slab: out of page numbers");
                    self.pages.len() - 1
                }
            }
        };
        let page = &mut self.pages[p];
        page.class = c as u8;
        page.carved = 0;
        page.free = NONE;
        p
    }

    fn link_tail(&mut self, c: usize, p: usize) {
        let t = self.classes[c].tail;
        self.pages[p].prev = t;
        self.pages[p].next = 0;
        match t {
            0 => self.classes[c].head = p as u32 + 1,
            t => self.pages[t as usize - 1].next = p as u32 + 1,
        }
        self.classes[c].tail = p as u32 + 1;
    }

    fn unlink(&mut self, c: usize, p: usize) {
        let Page { prev, next, .. } = self.pages[p];
        match prev {
            0 => self.classes[c].head = next,
            q => self.pages[q as usize - 1].next = next,
        }
        match next {
            0 => self.classes[c].tail = prev,
            q => self.pages[q as usize - 1].prev = prev,
        }
        self.pages[p].prev = 0;
        self.pages[p].next = 0;
    }

    /// Keeps empty page `p` as a spare, releasing the oldest spare if all
    /// places are taken.
    fn add_spare(&mut self, p: usize) {
        if self.nspares == SPARES {
            let old = self.spares[0] as usize - 1;
            self.spares.copy_within(1.., 0);
            self.nspares -= 1;
            self.held_bytes -= self.pages[old].data.len();
            self.pages[old].data = Box::default();
            self.held -= 1;
            self.released.push(old as u32);
        }
        self.spares[self.nspares] = p as u32 + 1;
        self.nspares += 1;
    }

    fn small_pos(addr: u64) -> (usize, usize) {
        ((addr >> 12) as usize - 1, (addr & 0xFFF) as usize)
    }

    /// The bytes of the blob at `addr` (class-size long for small blobs).
    #[inline]
    pub fn bytes(&self, addr: u64) -> &[u8] {
        if addr & LARGE != 0 {
            return &self.large[(addr & !LARGE) as usize - 1];
        }
        let (p, i) = Self::small_pos(addr);
        let page = &self.pages[p];
        let size = slot_size(page.class as usize);
        &page.data[i * size..(i + 1) * size]
    }

    /// Asks the CPU to start loading the blob at `addr` into cache, for a
    /// walk that will read it a few keys from now (a snapshot step's keys
    /// lie all over the slab; waiting for each in turn was most of a
    /// save's cost on the executor). A hint only: no effect on any value.
    #[inline]
    pub fn prefetch(&self, addr: u64) {
        // The first 256 bytes: most blobs whole, a larger one's head.
        prefetch_bytes(self.bytes(addr), 4);
    }

    /// Mutable bytes of the blob at `addr`.
    #[inline]
    pub fn bytes_mut(&mut self, addr: u64) -> &mut [u8] {
        if addr & LARGE != 0 {
            return &mut self.large[(addr & !LARGE) as usize - 1];
        }
        let (p, i) = Self::small_pos(addr);
        let page = &mut self.pages[p];
        let size = slot_size(page.class as usize);
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

    /// Frees the blob at `addr`. A page left empty becomes a spare (see the
    /// header), possibly handing an older spare back to the allocator.
    pub fn free(&mut self, addr: u64) {
        if addr & LARGE != 0 {
            let i = (addr & !LARGE) - 1;
            let b = std::mem::take(&mut self.large[i as usize]);
            self.large_bytes -= jemalloc_size(b.len());
            self.large_free.push(i);
            return;
        }
        let (p, s) = Self::small_pos(addr);
        let page = &mut self.pages[p];
        let c = page.class as usize;
        let size = slot_size(c);
        assert!(page.live > 0 && !page.data.is_empty(), "slab: free of a blob in an empty page");
        let was_full = page.live as usize == per_page(c);
        let next = page.free;
        page.data[s * size..s * size + 2].copy_from_slice(&next.to_le_bytes());
        page.free = s as u16;
        page.live -= 1;
        self.small_used -= size;
        if page.live == 0 {
            if !was_full {
                self.unlink(c, p);
            }
            self.add_spare(p);
        } else if was_full {
            self.link_tail(c, p);
        }
    }

    /// Bytes of held pages that no blob uses: free slots, slots never
    /// carved, the tail a class's slots leave, spare pages.
    pub fn slack_bytes(&self) -> usize {
        self.held_bytes - self.small_used
    }

    /// Bytes held from the global allocator: pages holding bytes (spares
    /// included), large blobs and the bookkeeping vectors.
    pub fn allocated_bytes(&self) -> usize {
        self.held_bytes
            + self.large_bytes
            + buffer_size(self.pages.capacity() * size_of::<Page>())
            + buffer_size(self.released.capacity() * 4)
            + buffer_size(self.large.capacity() * size_of::<Box<[u8]>>())
            + buffer_size(self.large_free.capacity() * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    impl Slab {
        /// Checks every invariant of the page bookkeeping; panics on a broken one.
        pub(crate) fn check(&self) {
            let mut held = 0;
            let mut listed = vec![false; self.pages.len()];
            for (c, cl) in self.classes.iter().enumerate() {
                let (mut q, mut prev) = (cl.head, 0);
                while q != 0 {
                    let p = q as usize - 1;
                    assert!(!listed[p], "page {p} listed twice");
                    listed[p] = true;
                    let page = &self.pages[p];
                    assert_eq!(page.class as usize, c);
                    assert_eq!(page.prev, prev);
                    assert!(page.live > 0 && (page.live as usize) < per_page(c), "listed page {p} is empty or full");
                    (prev, q) = (q, page.next);
                }
                assert_eq!(cl.tail, prev);
            }
            let spares = &self.spares[..self.nspares];
            assert!(self.nspares <= SPARES);
            for (p, page) in self.pages.iter().enumerate() {
                let spare = spares.contains(&(p as u32 + 1));
                let released = self.released.contains(&(p as u32));
                if page.data.is_empty() {
                    assert!(released && !spare && !listed[p] && page.live == 0);
                    continue;
                }
                held += 1;
                assert_eq!(page.data.len(), page_bytes(page.class as usize));
                assert!(!released);
                let per_page = per_page(page.class as usize);
                assert_eq!(spare, page.live == 0, "page {p}: empty pages are spares, spares are empty");
                assert_eq!(listed[p], !spare && (page.live as usize) < per_page);
                if spare {
                    continue;
                }
                // Free slots = the page's free list + its uncarved tail.
                let size = slot_size(page.class as usize);
                let (mut n, mut s) = (0, page.free);
                while s != NONE {
                    assert!(s < page.carved);
                    n += 1;
                    assert!(n <= per_page, "free list of page {p} loops");
                    s = u16::from_le_bytes([page.data[s as usize * size], page.data[s as usize * size + 1]]);
                }
                assert_eq!(page.live as usize + n + per_page - page.carved as usize, per_page);
            }
            assert_eq!(held, self.held);
            let bytes: usize = self.pages.iter().map(|p| p.data.len()).sum();
            assert_eq!(bytes, self.held_bytes);
            assert_eq!(self.released.len() + held, self.pages.len());
            let used: usize = self.pages.iter().map(|p| p.live as usize * slot_size(p.class as usize)).sum();
            assert_eq!(used, self.small_used, "bytes of small blobs in use");
        }

        /// Blobs allocated and not freed, small and large.
        pub(crate) fn live_blobs(&self) -> usize {
            let small: usize = self.pages.iter().map(|p| p.live as usize).sum();
            small + self.large.len() - self.large_free.len()
        }

        fn bookkeeping(&self) -> usize {
            self.allocated_bytes() - self.held_bytes - self.large_bytes
        }
    }

    #[test]
    fn classes_and_jemalloc_sizes() {
        assert_eq!(class_size(1), 2);
        assert_eq!(class_size(7), 7);
        assert_eq!(class_size(15), 15);
        assert_eq!(class_size(16), 16);
        assert_eq!(class_size(17), 24);
        for len in 2..=MAX_SMALL {
            let size = class_size(len);
            assert_eq!(slot_size(class_of(size)), size);
            assert!(class_of(size) < CLASSES && per_page(class_of(size)) <= MAX_SLOTS);
        }
        assert_eq!(page_bytes(class_of(7)), 7 * 4096);
        assert_eq!(page_bytes(class_of(15)), 56 * 1024);
        for c in 0..CLASSES {
            assert_eq!(jemalloc_size(page_bytes(c)), page_bytes(c), "class {c}");
            assert!(per_page(c) <= MAX_SLOTS && page_bytes(c) - per_page(c) * slot_size(c) < slot_size(c), "class {c}");
        }
        assert_eq!(class_size(104), 104);
        assert_eq!(class_size(256), 256);
        assert_eq!(class_size(1017), 1024);
        assert_eq!(class_size(1024), 1024);
        assert_eq!(class_size(1025), 1280);
        assert_eq!(jemalloc_size(257), 320);
        assert_eq!(jemalloc_size(104), 112);
        assert_eq!(jemalloc_size(1025), 1280);
        assert_eq!(jemalloc_size(65536), 65536);
        assert_eq!(jemalloc_size(48), 48);
        assert_eq!(size_of::<Page>(), 32);
        assert_eq!(buffer_size(0), 0);
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
        let before = (s.pages.len(), s.held, s.large_bytes);
        for &(a, _, _) in addrs.iter().step_by(2) {
            s.free(a);
        }
        s.check();
        for e in addrs.iter_mut().step_by(2) {
            let (a, b) = s.alloc(e.1);
            b[..e.1].fill(e.2);
            e.0 = a;
        }
        assert_eq!((s.pages.len(), s.held, s.large_bytes), before, "freed blobs are reused");
        for &(a, len, v) in &addrs {
            assert!(s.bytes(a)[..len].iter().all(|&x| x == v));
        }
        s.check();
    }

    #[test]
    fn replace_keeps_the_bytes_within_a_class_and_moves_across() {
        let mut s = Slab::default();
        let (a, b) = s.alloc(40);
        b.fill(7);
        let (other, _) = s.alloc(40);
        let used = s.small_used;
        // 33..=40 bytes share the 40-byte class: same address, bytes kept.
        for len in [33, 40, 36] {
            let (r, b) = s.replace(a, len);
            assert_eq!((r, b.len()), (a, 40), "len {len}");
            assert!(b.iter().all(|&x| x == 7));
            assert_eq!(s.small_used, used);
        }
        // Another class: the old slot is freed, the blob moves.
        let (moved, b) = s.replace(a, 41);
        assert_ne!(moved, a);
        assert_eq!(b.len(), 48);
        assert_eq!(s.small_used, used - 40 + 48);
        // The freed slot is the next of its class.
        assert_eq!(s.alloc(40).0, a);
        s.check();
        // A tiny class holds one length only (a second blob keeps the
        // 9-byte page from becoming the spare the 10-byte class takes).
        let (t, _) = s.alloc(9);
        let (t9, _) = s.alloc(9);
        assert_eq!(s.replace(t, 9).0, t);
        let (t2, b) = s.replace(t, 10);
        assert_ne!(t2, t);
        assert_eq!(b.len(), 10);
        // A large blob is kept only at its exact length.
        let (l, b) = s.alloc(MAX_SMALL + 100);
        b.fill(3);
        let large = s.large_bytes;
        let (r, b) = s.replace(l, MAX_SMALL + 100);
        assert_eq!(r, l);
        assert!(b.iter().all(|&x| x == 3));
        assert_eq!(s.large_bytes, large);
        let (r, b) = s.replace(l, MAX_SMALL + 99);
        assert_eq!(b.len(), MAX_SMALL + 99);
        assert_eq!(s.large_bytes, jemalloc_size(MAX_SMALL + 99));
        let (small, b) = s.replace(r, 20);
        assert_eq!(b.len(), 24);
        assert_eq!(s.large_bytes, 0);
        s.free(small);
        s.free(other);
        s.free(t2);
        s.free(t9);
        s.free(moved);
        s.free(a);
        s.check();
        assert_eq!(s.small_used, 0);
    }

    #[test]
    fn draining_pages_gives_them_back() {
        let mut s = Slab::default();
        let empty = s.allocated_bytes();
        let per_page = PAGE / 64;
        let mut addrs: Vec<u64> = (0..10 * per_page).map(|_| s.alloc(60).0).collect();
        assert_eq!(s.held, 10);
        assert_eq!(s.allocated_bytes(), 10 * PAGE + s.bookkeeping());
        // Free in an order that drains every page bit by bit.
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for i in (1..addrs.len()).rev() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            addrs.swap(i, (rng % (i as u64 + 1)) as usize);
        }
        for (n, &a) in addrs.iter().enumerate() {
            s.free(a);
            if n % 997 == 0 {
                s.check();
            }
        }
        s.check();
        assert_eq!(s.held, SPARES, "all pages but the spares are released");
        assert_eq!(s.allocated_bytes(), SPARES * PAGE + s.bookkeeping());
        assert!(s.bookkeeping() <= empty + 1024);
        // Spares serve any class; only then does the page table grow again.
        let pages = s.pages.len();
        let (a, _) = s.alloc(200);
        let (b, _) = s.alloc(16);
        let (c, _) = s.alloc(100);
        assert_eq!((s.held, s.pages.len()), (SPARES + 1, pages));
        for x in [a, b, c] {
            s.free(x);
        }
        s.check();
        assert_eq!(s.held, SPARES);
        // A tiny class takes a spare too, with bytes of its own page size,
        // and its page becomes a spare of that size when it empties.
        let tiny: Vec<u64> = (0..5000).map(|_| s.alloc(7).0).collect();
        s.check();
        assert_eq!(s.held, SPARES);
        assert_eq!(s.allocated_bytes(), 2 * 7 * MAX_SLOTS + s.bookkeeping());
        for a in tiny {
            s.free(a);
        }
        s.check();
        assert_eq!(s.held, SPARES);
    }

    #[test]
    fn ping_pong_at_a_page_boundary_keeps_the_page() {
        let mut s = Slab::default();
        let full: Vec<u64> = (0..PAGE / 32).map(|_| s.alloc(32).0).collect();
        assert_eq!(s.held, 1);
        for _ in 0..10_000 {
            let (a, _) = s.alloc(32);
            s.free(a);
        }
        assert_eq!((s.held, s.pages.len()), (2, 2), "one spare, no churn");
        // A blob moving through the classes (a growing inline hash) leaves
        // at most a spare behind, not a page per class it passed through.
        let mut a = s.alloc(16).0;
        for len in (24..=MAX_SMALL).step_by(8) {
            let (b, _) = s.alloc(len);
            s.free(a);
            a = b;
        }
        s.free(a);
        s.check();
        assert_eq!(s.held, 1 + SPARES);
        for a in full {
            s.free(a);
        }
        s.check();
        assert_eq!(s.held, SPARES);
    }

    #[test]
    fn page_numbers_are_reused_and_live_blobs_stay() {
        let mut s = Slab::default();
        let per_page = PAGE / 64;
        // Five pages of class 64; every blob holds its own number.
        let blobs: Vec<u64> = (0..5 * per_page)
            .map(|i| {
                let (a, b) = s.alloc(64);
                b[..8].copy_from_slice(&(i as u64).to_le_bytes());
                a
            })
            .collect();
        let page_of = |a: u64| (a >> 12) as usize - 1;
        // Empty pages 1, 2 and 3 (two become spares, one is released).
        for &a in &blobs[per_page..4 * per_page] {
            s.free(a);
        }
        s.check();
        assert_eq!((s.held, s.pages.len()), (2 + SPARES, 5));
        assert_eq!(s.released, vec![1]);
        // New pages of another class: the spares, then the released number.
        let others: Vec<u64> = (0..3 * (PAGE / 128)).map(|_| s.alloc(128).0).collect();
        assert_eq!(s.pages.len(), 5, "no new page number");
        assert!(others.iter().any(|&a| page_of(a) == 1), "page 1 is reused");
        assert!(s.released.is_empty());
        s.check();
        for (i, &a) in blobs.iter().enumerate() {
            if !(per_page..4 * per_page).contains(&i) {
                assert_eq!(s.bytes(a)[..8], (i as u64).to_le_bytes(), "blob {i} survives");
                assert_eq!(s.bytes(a).len(), 64);
            }
        }
        assert_eq!(s.allocated_bytes(), 5 * PAGE + s.bookkeeping());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(usize),
        Free(usize),
        /// Allocates many blobs of one length, filling pages.
        Burst(usize, usize),
        /// Frees about one live blob in `n`, draining many pages at once.
        Sweep(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let len = prop_oneof![3 => 1usize..=16, 1 => 17usize..=64, 3 => 200usize..=256, 1 => 900usize..=1400];
        prop_oneof![
            6 => len.prop_map(Op::Alloc),
            4 => any::<usize>().prop_map(Op::Free),
            1 => (1usize..4).prop_map(Op::Sweep),
            1 => (prop_oneof![Just(16usize), Just(100), Just(256)], 1usize..600).prop_map(|(len, n)| Op::Burst(len, n)),
        ]
    }

    /// Fills the blob at `a` with a pattern derived from `a` and `len`.
    fn pattern(a: u64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (a as usize * 31 + i * 7 + len) as u8).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_model(ops in proptest::collection::vec(op(), 1..3000)) {
            let mut s = Slab::default();
            let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
            let mut live: Vec<u64> = Vec::new();
            let free = |s: &mut Slab, model: &mut HashMap<u64, Vec<u8>>, a: u64| {
                let want = model.remove(&a).unwrap();
                prop_assert_eq!(&s.bytes(a)[..want.len()], &want[..]);
                s.free(a);
                Ok(())
            };
            for (n, o) in ops.into_iter().enumerate() {
                match o {
                    Op::Alloc(len) => {
                        let (a, b) = s.alloc(len);
                        prop_assert_eq!(b.len(), if len > MAX_SMALL { len } else { class_size(len) });
                        let p = pattern(a, len);
                        b[..len].copy_from_slice(&p);
                        prop_assert!(a != 0 && a < 1 << 34);
                        prop_assert!(model.insert(a, p).is_none(), "address {} handed out twice", a);
                        live.push(a);
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let a = live.swap_remove(i % live.len());
                        free(&mut s, &mut model, a)?;
                    }
                    Op::Free(_) => {}
                    Op::Burst(len, k) => {
                        for _ in 0..k {
                            let (a, b) = s.alloc(len);
                            let p = pattern(a, len);
                            b[..len].copy_from_slice(&p);
                            prop_assert!(model.insert(a, p).is_none(), "address {} handed out twice", a);
                            live.push(a);
                        }
                    }
                    Op::Sweep(k) => {
                        let mut i = 0;
                        while i < live.len() {
                            if (live[i] as usize + n).is_multiple_of(k + 1) {
                                let a = live.swap_remove(i);
                                free(&mut s, &mut model, a)?;
                            } else {
                                i += 1;
                            }
                        }
                    }
                }
                if n % 64 == 0 {
                    s.check();
                }
            }
            s.check();
            for (&a, want) in &model {
                prop_assert_eq!(&s.bytes(a)[..want.len()], &want[..]);
            }
            // Exact accounting: each held page, each large blob's class.
            let large: usize = model.iter().filter(|(a, _)| **a & LARGE != 0).map(|(_, v)| jemalloc_size(v.len())).sum();
            prop_assert_eq!(s.allocated_bytes(), s.held_bytes + large + s.bookkeeping());
            let small = model.keys().filter(|a| **a & LARGE == 0).count();
            let in_use: std::collections::HashSet<usize> = model.keys().filter(|a| **a & LARGE == 0).map(|a| (a >> 12) as usize).collect();
            prop_assert!(s.held <= in_use.len() + SPARES, "{} pages held for {} small blobs on {} pages", s.held, small, in_use.len());
            for a in live {
                free(&mut s, &mut model, a)?;
            }
            s.check();
            prop_assert!(s.held <= SPARES);
            prop_assert!(s.held + s.released.len() == s.pages.len());
        }
    }
}
