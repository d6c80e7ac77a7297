//! `List`: the value of a Redis LIST.
//!
//! Two shapes over one node format (`encoding::listpack` entries after a
//! 4-byte element count):
//!
//! ```text
//! Small:  Vec<u8> = [count u32 LE][entry][entry]...        ("listpack")
//! Large:  Box<Chain> = VecDeque of nodes, each a buffer of the same
//!         format, plus the total length                     ("quicklist")
//! ```
//!
//! The shapes follow Redis's own rules with the same numbers, so OBJECT
//! ENCODING is simply the shape: entries have Redis's listpack sizes, so a
//! buffer's `len() + 3` is Redis's `lpBytes`. A small list becomes a chain
//! when `list-max-listpack-size` would be exceeded (checked before adding,
//! as Redis does, from the raw sizes of the new elements), and a chain turns
//! back into a small list after shrinking when it has one node that is under
//! half the limit. Both conversions move the one buffer, copying nothing, so
//! the memory curve has no step at the threshold: a chain costs its small
//! buffers plus 24 bytes a node and one 48-byte header.
//!
//! Node rules follow Redis's quicklist: a node takes an element while its
//! estimated size stays under the limit; an element larger than the limit
//! gets a node of its own ("plain", never merged into). Nodes are never
//! merged on delete; an empty node is dropped.
//!
//! Complexity: push/pop O(1) amortised (a node's buffer moves on a head
//! insert, at most 64 KiB); index O(nodes + node size); LREM/LTRIM linear.
//!
//! Compression (`list-compress-depth`, Redis's quicklist rules): with depth
//! N > 0 the N nodes at each end stay plain and the interior ones are kept
//! as zstd frames, a node under 48 bytes of entries is not tried, and a
//! node is kept compressed only if that saves more than 8 bytes and a size
//! class. A packed node keeps its element count in the same header word,
//! so finding an index never decompresses:
//!
//! ```text
//! packed node: [count | PACKED u32 LE][plain length u32 LE][zstd frame]
//! ```
//!
//! Readers (`get`, the iterators) decompress a packed node into a buffer of
//! their own and leave the list as it is; a write opens (decompresses) the
//! nodes it changes and `settle` compresses them again afterwards. The ends
//! of a chain are always plain, so a push or pop at either end touches no
//! frame; a pop makes no node interior and a push only the nodes it moved
//! past position N from its end, so a push costs one compression per node
//! filled. A
//! plain node that did not compress well enough is marked (TRIED) until it
//! changes, so it is not tried again on every push. Decompressing checks
//! the frame's length and every entry (`listpack::validate`), so no stored
//! byte can misread.
//!
//! Memory (`mem_usage`): heap bytes this list owns, each block rounded to
//! jemalloc's size class (a packed node counts its compressed bytes).

use std::collections::VecDeque;
use std::rc::Rc;

use crate::encoding::listpack::{self, decode, prev};
use crate::encoding::zdict;
use crate::encoding::{alloc_size, reserve_class, shrink_class};
use crate::strref::StrRef;

/// Node header: the element count, u32 LE (with the two flags below).
const HDR: usize = 4;
/// Header flag: the node is packed (a zstd frame, see the module header).
const PACKED: u32 = 1 << 31;
/// Header flag: a plain node that did not compress well enough; any change
/// to the node rewrites the header and clears it.
const TRIED: u32 = 1 << 30;
/// Header bits of the element count.
const COUNT_MASK: u32 = TRIED - 1;
/// A packed node's header: count word and plain length.
const PACKED_HDR: usize = 8;
/// Redis's quicklist: nodes with fewer bytes of entries are not compressed.
const MIN_COMPRESS_BYTES: usize = 48;
/// Redis's quicklist: a compressed node must save more than this.
const MIN_COMPRESS_IMPROVE: usize = 8;
/// zstd level for nodes (docs/design/compression.md has the measurement).
const ZSTD_LEVEL: i32 = 1;
/// Redis's node size limits for list-max-listpack-size -1..=-5.
const SIZE_LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// Redis's safety size limit when the fill is a count.
const SAFETY_LIMIT: usize = 8192;
/// Redis's per-element overhead estimate when deciding if a node has room.
const ESTIMATE_OVERHEAD: usize = 8;

/// `list-max-listpack-size`: positive, the most elements in a node;
/// negative, a node byte limit (-1: 4 KiB ... -5: 64 KiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListConfig {
    /// The parameter's value (Redis's `fill`).
    pub fill: i64,
    /// `list-compress-depth`: nodes kept plain at each end; 0 compresses
    /// nothing.
    pub compress: usize,
}

impl Default for ListConfig {
    fn default() -> Self {
        ListConfig { fill: -2, compress: 0 }
    }
}

impl ListConfig {
    /// (byte limit, count limit) of a node, as Redis's quicklistNodeLimit.
    fn limits(&self) -> (usize, usize) {
        if self.fill >= 0 {
            (usize::MAX, self.fill.max(1) as usize)
        } else {
            let i = (self.fill.unsigned_abs() as usize - 1).min(SIZE_LEVELS.len() - 1);
            (SIZE_LEVELS[i], usize::MAX)
        }
    }

    fn exceeds(&self, bytes: usize, count: usize) -> bool {
        let (size, n) = self.limits();
        if size != usize::MAX {
            bytes > size
        } else {
            bytes > SAFETY_LIMIT || count > n
        }
    }

    /// An element this large gets a node of its own.
    fn is_large(&self, sz: usize) -> bool {
        let (size, _) = self.limits();
        if size == usize::MAX {
            sz > SAFETY_LIMIT
        } else {
            sz > size
        }
    }
}

/// Which end of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The head (left, index 0).
    Head,
    /// The tail (right, index -1).
    Tail,
}

fn header(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..HDR].try_into().expect("header"))
}

fn count(b: &[u8]) -> usize {
    (header(b) & COUNT_MASK) as usize
}

fn is_packed(b: &[u8]) -> bool {
    header(b) & PACKED != 0
}

/// Compresses plain node `b` in place if that saves enough (Redis's rules
/// and a smaller size class); otherwise marks it TRIED. A packed or TRIED
/// node is left as it is.
fn pack(b: &mut Vec<u8>) {
    let h = header(b);
    if h & (PACKED | TRIED) != 0 {
        return;
    }
    let plain = b.len();
    let mark_tried = |b: &mut Vec<u8>| b[..HDR].copy_from_slice(&(h | TRIED).to_le_bytes());
    if plain - HDR < MIN_COMPRESS_BYTES || plain > u32::MAX as usize {
        return mark_tried(b);
    }
    let mut z = Vec::new();
    let packed = zdict::compress_plain(ZSTD_LEVEL, &b[HDR..], &mut z);
    let Some(z) = packed.then_some(z).filter(|z| {
        let n = PACKED_HDR + z.len();
        n + MIN_COMPRESS_IMPROVE < plain && alloc_size(n) < alloc_size(b.capacity())
    }) else {
        return mark_tried(b);
    };
    let mut out = Vec::with_capacity(alloc_size(PACKED_HDR + z.len()));
    out.extend_from_slice(&(h | PACKED).to_le_bytes());
    out.extend_from_slice(&(plain as u32).to_le_bytes());
    out.extend_from_slice(&z);
    *b = out;
}

/// The plain node that packed node `b` holds, or None if the frame does not
/// give exactly the stated length of whole entries, as many as the header
/// says. Never panics, whatever the bytes (fuzz/fuzz_targets/list_node.rs).
pub fn unpack(b: &[u8]) -> Option<Vec<u8>> {
    let h = u32::from_le_bytes(b.get(..HDR)?.try_into().ok()?);
    let plain = u32::from_le_bytes(b.get(HDR..PACKED_HDR)?.try_into().ok()?) as usize;
    if h & PACKED == 0 || plain < HDR {
        return None;
    }
    // The frame states its size too: both must agree before allocating.
    let stated = zdict::plain_content_size(b.get(PACKED_HDR..)?)?;
    if stated != (plain - HDR) as u64 {
        return None;
    }
    let mut out = vec![0u8; plain];
    let n = zdict::decompress_plain(&b[PACKED_HDR..], &mut out[HDR..])?;
    if HDR + n != plain {
        return None;
    }
    let cnt = (h & COUNT_MASK) as usize;
    if listpack::validate(&out, HDR)? != cnt {
        return None;
    }
    out[..HDR].copy_from_slice(&(cnt as u32).to_le_bytes());
    Some(out)
}

/// Makes node `b` plain if it is packed. The bytes are our own, so a frame
/// that does not decode is a broken invariant.
fn open(b: &mut Vec<u8>) {
    if is_packed(b) {
        *b = unpack(b).expect("packed list node decodes");
    }
}

/// Node `b` as a plain buffer: borrowed if plain, else decompressed.
fn plain_node(b: &[u8]) -> Result<&[u8], Rc<Vec<u8>>> {
    if is_packed(b) {
        Err(Rc::new(unpack(b).expect("packed list node decodes")))
    } else {
        Ok(b)
    }
}

fn add_count(b: &mut [u8], delta: isize) {
    let n = count(b) as isize + delta;
    b[..HDR].copy_from_slice(&(n as u32).to_le_bytes());
}

fn new_node() -> Vec<u8> {
    let mut b = Vec::new();
    reserve_class(&mut b, HDR);
    b.extend_from_slice(&[0; HDR]);
    b
}

/// Redis's lpBytes for a node: our entries plus its 6-byte header and end byte.
fn lp_bytes(b: &[u8]) -> usize {
    b.len() - HDR + 7
}

/// Byte offset of the `k`th entry of node `b`, walking from the nearer end.
fn offset_in(b: &[u8], k: usize) -> usize {
    let n = count(b);
    if k <= n / 2 {
        (0..k).fold(HDR, |at, _| decode(b, at).1)
    } else {
        (k..n).fold(b.len(), |at, _| prev(b, at))
    }
}

/// Deletes `n` entries starting at entry index `k` of node `b`.
fn drain_node(b: &mut Vec<u8>, k: usize, n: usize) {
    let from = offset_in(b, k);
    let to = (0..n).fold(from, |at, _| decode(b, at).1);
    b.drain(from..to);
    add_count(b, -(n as isize));
    shrink_class(b);
}

fn insert_node(b: &mut Vec<u8>, at: usize, elem: &[u8]) {
    listpack::insert(b, at, elem);
    add_count(b, 1);
}

/// A large node holds one element larger than the node limit.
fn is_plain(b: &[u8], cfg: &ListConfig) -> bool {
    count(b) == 1 && cfg.is_large(decode(b, HDR).0.len())
}

/// True if node `b` may take one more element of `sz` raw bytes.
fn allow_insert(b: &[u8], sz: usize, cfg: &ListConfig) -> bool {
    !is_plain(b, cfg)
        && !cfg.is_large(sz)
        && !cfg.exceeds(lp_bytes(b) + sz + ESTIMATE_OVERHEAD, count(b) + 1)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Chain {
    nodes: VecDeque<Vec<u8>>,
    len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Small(Vec<u8>),
    Large(Box<Chain>),
}

/// A list value: a sequence of byte strings (integers kept compactly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List {
    repr: Repr,
}

impl Default for List {
    fn default() -> Self {
        List::new()
    }
}

impl List {
    /// An empty list (small shape, one 8-byte block).
    pub fn new() -> List {
        List {
            repr: Repr::Small(new_node()),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(b) => count(b),
            Repr::Large(c) => c.len,
        }
    }

    /// True if the list has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn nodes(&self) -> Nodes<'_> {
        match &self.repr {
            Repr::Small(b) => Nodes::One(b),
            Repr::Large(c) => Nodes::Many(&c.nodes),
        }
    }

    /// Resolves a Redis index (negative counts from the tail) to 0..len.
    pub fn resolve(&self, index: i64) -> Option<usize> {
        let len = self.len() as i64;
        let i = if index < 0 {
            index.checked_add(len)?
        } else {
            index
        };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// (node, byte offset) of element `i` (< len).
    fn locate(&self, i: usize) -> (usize, usize) {
        let (ni, k, node) = self.find(i);
        let at = match node {
            Some(node) => offset_in(&node, k),
            None => offset_in(self.nodes().get(ni).expect("located"), k),
        };
        (ni, at)
    }

    /// (node, element index in it, the node decompressed if it is packed)
    /// of element `i` (< len).
    fn find(&self, i: usize) -> (usize, usize, Option<Rc<Vec<u8>>>) {
        match &self.repr {
            Repr::Small(_) => (0, i, None),
            Repr::Large(c) => {
                let (mut ni, mut k) = (0, i);
                if i < c.len / 2 {
                    while k >= count(&c.nodes[ni]) {
                        k -= count(&c.nodes[ni]);
                        ni += 1;
                    }
                } else {
                    let mut from_end = c.len - i;
                    ni = c.nodes.len() - 1;
                    while from_end > count(&c.nodes[ni]) {
                        from_end -= count(&c.nodes[ni]);
                        ni -= 1;
                    }
                    k = count(&c.nodes[ni]) - from_end;
                }
                (ni, k, plain_node(&c.nodes[ni]).err())
            }
        }
    }

    /// The element at Redis index `index`, if in range.
    pub fn get(&self, index: i64) -> Option<Elem<'_>> {
        let i = self.resolve(index)?;
        let (ni, k, node) = self.find(i);
        Some(match node {
            Some(node) => Elem::Node(node.clone(), offset_in(&node, k)),
            None => {
                let b = self.nodes().get(ni)?;
                Elem::Ref(decode(b, offset_in(b, k)).0)
            }
        })
    }

    /// Elements from index `i` (0-based) towards the tail.
    pub fn iter_from(&self, i: usize) -> Iter<'_> {
        if i >= self.len() {
            return Iter {
                nodes: Nodes::Many(&EMPTY),
                ni: 0,
                at: 0,
                cur: None,
            };
        }
        let (ni, k, cur) = self.find(i);
        let nodes = self.nodes();
        let at = match &cur {
            Some(node) => offset_in(node, k),
            None => offset_in(nodes.get(ni).expect("located"), k),
        };
        Iter { nodes, ni, at, cur }
    }

    /// All elements, head to tail.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// Elements from index `i` (0-based) towards the head.
    pub fn rev_from(&self, i: usize) -> RevIter<'_> {
        if i >= self.len() {
            return RevIter {
                nodes: Nodes::Many(&EMPTY),
                ni: 0,
                at: 0,
                cur: None,
            };
        }
        let (ni, k, cur) = self.find(i);
        let nodes = self.nodes();
        let end = match &cur {
            Some(node) => decode(node, offset_in(node, k)).1,
            None => {
                let b = nodes.get(ni).expect("located");
                decode(b, offset_in(b, k)).1
            }
        };
        RevIter { nodes, ni, at: end, cur }
    }

    /// Converts a small list to a chain if adding `n` elements of `bytes`
    /// raw bytes in all could exceed the limit (Redis's check before a write).
    fn grow_check(&mut self, bytes: usize, n: usize, cfg: &ListConfig) {
        let Repr::Small(b) = &mut self.repr else {
            return;
        };
        if cfg.exceeds(
            lp_bytes(b).saturating_add(bytes),
            count(b).saturating_add(n),
        ) {
            let b = std::mem::take(b);
            let len = count(&b);
            let mut nodes = VecDeque::new();
            if len > 0 {
                nodes.push_back(b);
            }
            self.repr = Repr::Large(Box::new(Chain { nodes, len }));
        }
    }

    /// Turns a one-node chain back into a small list once it is under half
    /// the limit (Redis's hysteresis after a shrinking write).
    fn shrink_check(&mut self, cfg: &ListConfig) {
        let Repr::Large(c) = &mut self.repr else {
            return;
        };
        if c.nodes.len() != 1 {
            return;
        }
        open(&mut c.nodes[0]);
        if is_plain(&c.nodes[0], cfg) {
            return;
        }
        let (size, n) = cfg.limits();
        if lp_bytes(&c.nodes[0]) > size / 2 || c.len > n / 2 {
            return;
        }
        let b = c.nodes.pop_front().expect("one node");
        self.repr = Repr::Small(b);
    }

    /// Pushes `elems` in order at `end` (LPUSH's order: each at the head).
    pub fn push<E: AsRef<[u8]>>(&mut self, end: End, elems: &[E], cfg: &ListConfig) {
        let bytes = elems
            .iter()
            .map(|e| e.as_ref().len())
            .fold(0usize, usize::saturating_add);
        self.grow_check(bytes, elems.len(), cfg);
        let before = self.node_count();
        for e in elems {
            self.push_one(end, e.as_ref(), cfg);
        }
        // Each node added moved one more node into the interior.
        let d = cfg.compress;
        let added = self.node_count() - before;
        let n = self.node_count();
        let touched = match end {
            End::Head => d..d + added + 1,
            End::Tail => (n - 1).saturating_sub(d + added)..n.saturating_sub(d),
        };
        self.settle(cfg, touched);
    }

    fn node_count(&self) -> usize {
        match &self.repr {
            Repr::Small(_) => 1,
            Repr::Large(c) => c.nodes.len(),
        }
    }

    /// Puts the chain back in the shape `list-compress-depth` asks for after
    /// a write: the end nodes plain (always the first and the last, so a push
    /// or pop never meets a frame, whatever the depth was before), and the
    /// nodes at positions `touched` that are interior compressed. A pop or
    /// trim makes no node interior; a push makes the nodes it passed
    /// interior; LSET, LINSERT and LREM open nodes anywhere and ask for all
    /// (each is already linear in the list).
    fn settle(&mut self, cfg: &ListConfig, touched: std::ops::Range<usize>) {
        let Repr::Large(c) = &mut self.repr else {
            return;
        };
        let (n, d) = (c.nodes.len(), cfg.compress);
        let keep = d.max(1).min(n);
        for i in (0..keep).chain(n - keep..n) {
            open(&mut c.nodes[i]);
        }
        if d == 0 || n <= 2 * d {
            return;
        }
        (touched.start.max(d)..touched.end.min(n - d)).for_each(|i| pack(&mut c.nodes[i]));
    }

    fn push_one(&mut self, end: End, elem: &[u8], cfg: &ListConfig) {
        match &mut self.repr {
            Repr::Small(b) => {
                let at = if end == End::Head { HDR } else { b.len() };
                insert_node(b, at, elem);
            }
            Repr::Large(c) => {
                c.len += 1;
                let mut node = if end == End::Head {
                    c.nodes.front_mut()
                } else {
                    c.nodes.back_mut()
                };
                if let Some(b) = node.as_deref_mut() {
                    open(b);
                }
                if let Some(b) = node.filter(|b| allow_insert(b, elem.len(), cfg)) {
                    let at = if end == End::Head { HDR } else { b.len() };
                    insert_node(b, at, elem);
                    return;
                }
                let mut b = new_node();
                insert_node(&mut b, HDR, elem);
                if end == End::Head {
                    c.nodes.push_front(b)
                } else {
                    c.nodes.push_back(b)
                }
            }
        }
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End, cfg: &ListConfig) -> Option<Vec<u8>> {
        let i = if end == End::Head {
            0
        } else {
            self.len().checked_sub(1)?
        };
        let v = self.get(i as i64)?.to_vec();
        self.delete_range(i, 1);
        self.shrink_check(cfg);
        self.settle(cfg, 0..0);
        Some(v)
    }

    /// Deletes `n` elements from index `i` (the range must be in bounds).
    fn delete_range(&mut self, i: usize, n: usize) {
        if n == 0 {
            return;
        }
        match &mut self.repr {
            Repr::Small(b) => drain_node(b, i, n),
            Repr::Large(c) => {
                c.len -= n;
                let (mut ni, mut k, mut left) = (0, i, n);
                while k >= count(&c.nodes[ni]) {
                    k -= count(&c.nodes[ni]);
                    ni += 1;
                }
                while left > 0 {
                    let cnt = count(&c.nodes[ni]);
                    let take = left.min(cnt - k);
                    if take == cnt {
                        c.nodes.remove(ni);
                    } else {
                        open(&mut c.nodes[ni]);
                        drain_node(&mut c.nodes[ni], k, take);
                        ni += 1;
                    }
                    left -= take;
                    k = 0;
                }
            }
        }
    }

    /// Keeps only elements `start..start + n` (LTRIM), start + n <= len.
    pub fn keep_range(&mut self, start: usize, n: usize, cfg: &ListConfig) {
        let len = self.len();
        self.delete_range(start + n, len - start - n);
        self.delete_range(0, start);
        self.shrink_check(cfg);
        self.settle(cfg, 0..0);
    }

    /// Inserts `elem` so that it becomes element `i` (0..=len).
    fn insert_at(&mut self, i: usize, elem: &[u8], cfg: &ListConfig) {
        if i == 0 {
            return self.push_one(End::Head, elem, cfg);
        }
        if i == self.len() {
            return self.push_one(End::Tail, elem, cfg);
        }
        let (ni, at) = self.locate(i);
        match &mut self.repr {
            Repr::Small(b) => insert_node(b, at, elem),
            Repr::Large(c) => {
                c.len += 1;
                open(&mut c.nodes[ni]);
                if ni > 0 {
                    open(&mut c.nodes[ni - 1]);
                }
                if allow_insert(&c.nodes[ni], elem.len(), cfg) {
                    return insert_node(&mut c.nodes[ni], at, elem);
                }
                if at == HDR && ni > 0 && allow_insert(&c.nodes[ni - 1], elem.len(), cfg) {
                    let b = &mut c.nodes[ni - 1];
                    let end = b.len();
                    return insert_node(b, end, elem);
                }
                // Split the node at the insertion point; the element then
                // goes between nodes `pos - 1` and `pos`.
                let pos = if at > HDR {
                    let b = &mut c.nodes[ni];
                    let (mut k, mut p) = (0, HDR);
                    while p < at {
                        p = decode(b, p).1;
                        k += 1;
                    }
                    let mut right = new_node();
                    right.extend_from_slice(&b[at..]);
                    add_count(&mut right, (count(b) - k) as isize);
                    b.truncate(at);
                    b[..HDR].copy_from_slice(&(k as u32).to_le_bytes());
                    shrink_class(b);
                    c.nodes.insert(ni + 1, right);
                    ni + 1
                } else {
                    ni
                };
                if pos > 0 && allow_insert(&c.nodes[pos - 1], elem.len(), cfg) {
                    let b = &mut c.nodes[pos - 1];
                    let end = b.len();
                    insert_node(b, end, elem);
                } else if allow_insert(&c.nodes[pos], elem.len(), cfg) {
                    insert_node(&mut c.nodes[pos], HDR, elem);
                } else {
                    let mut b = new_node();
                    insert_node(&mut b, HDR, elem);
                    c.nodes.insert(pos, b);
                }
            }
        }
    }

    /// LINSERT: puts `elem` before (or after) the first element equal to
    /// `pivot`. Returns false if there is no such element.
    pub fn insert_by_pivot(
        &mut self,
        pivot: &[u8],
        after: bool,
        elem: &[u8],
        cfg: &ListConfig,
    ) -> bool {
        let Some(i) = self.iter().position(|v| listpack::eq(v.get(), pivot)) else {
            return false;
        };
        self.grow_check(elem.len(), 1, cfg);
        self.insert_at(i + usize::from(after), elem, cfg);
        self.settle(cfg, 0..usize::MAX);
        true
    }

    /// LSET: replaces element `i` (0-based, in range) with `elem`.
    pub fn set(&mut self, i: usize, elem: &[u8], cfg: &ListConfig) {
        self.grow_check(elem.len(), 1, cfg);
        let (ni, at) = self.locate(i);
        if let Repr::Large(c) = &mut self.repr {
            open(&mut c.nodes[ni]);
        }
        let fits = match &self.repr {
            Repr::Small(_) => true,
            Repr::Large(c) => {
                let b = &c.nodes[ni];
                let old = decode(b, at).1 - at;
                !is_plain(b, cfg)
                    && !cfg.is_large(elem.len())
                    && !cfg.exceeds(
                        (lp_bytes(b) + listpack::entry_len(elem)).saturating_sub(old),
                        count(b),
                    )
            }
        };
        if fits {
            let b = match &mut self.repr {
                Repr::Small(b) => b,
                Repr::Large(c) => &mut c.nodes[ni],
            };
            let end = decode(b, at).1;
            b.drain(at..end);
            listpack::insert(b, at, elem);
            add_count(b, 0);
            shrink_class(b);
        } else {
            self.insert_at(i, elem, cfg);
            self.delete_range(i + 1, 1);
        }
        self.shrink_check(cfg);
        self.settle(cfg, 0..usize::MAX);
    }

    /// LREM: removes up to `limit` elements equal to `elem` (0: all),
    /// scanning from the tail when `from_tail`. Returns how many.
    pub fn remove(
        &mut self,
        elem: &[u8],
        limit: usize,
        from_tail: bool,
        cfg: &ListConfig,
    ) -> usize {
        let mut left = if limit == 0 { usize::MAX } else { limit };
        let mut removed = 0;
        let nodes: &mut [Vec<u8>] = match &mut self.repr {
            Repr::Small(b) => std::slice::from_mut(b),
            Repr::Large(c) => c.nodes.make_contiguous(),
        };
        let order: Box<dyn Iterator<Item = usize>> = if from_tail {
            Box::new((0..nodes.len()).rev())
        } else {
            Box::new(0..nodes.len())
        };
        for ni in order {
            if left == 0 {
                break;
            }
            // A packed node is read from a decompressed copy and replaced
            // only if it loses an element.
            let opened = is_packed(&nodes[ni]).then(|| unpack(&nodes[ni]).expect("packed list node decodes"));
            let b: &[u8] = opened.as_deref().unwrap_or(&nodes[ni]);
            let mut spans = Vec::new();
            let mut at = HDR;
            while at < b.len() {
                let (v, next) = decode(b, at);
                spans.push((at, next, listpack::eq(v, elem)));
                at = next;
            }
            let mut kill = vec![false; spans.len()];
            let idx: Box<dyn Iterator<Item = usize>> = if from_tail {
                Box::new((0..spans.len()).rev())
            } else {
                Box::new(0..spans.len())
            };
            for k in idx {
                if left == 0 {
                    break;
                }
                if spans[k].2 {
                    kill[k] = true;
                    left -= 1;
                }
            }
            let gone = kill.iter().filter(|&&x| x).count();
            if gone == 0 {
                continue;
            }
            let mut out = Vec::with_capacity(alloc_size(b.len()));
            out.extend_from_slice(&b[..HDR]);
            for (k, &(s, e, _)) in spans.iter().enumerate() {
                if !kill[k] {
                    out.extend_from_slice(&b[s..e]);
                }
            }
            add_count(&mut out, -(gone as isize));
            shrink_class(&mut out);
            nodes[ni] = out;
            removed += gone;
        }
        if let Repr::Large(c) = &mut self.repr {
            c.len -= removed;
            c.nodes.retain(|b| count(b) > 0);
        }
        self.shrink_check(cfg);
        self.settle(cfg, 0..usize::MAX);
        removed
    }

    /// Heap bytes owned by this list, each block rounded to jemalloc's
    /// size class (the figure MEMORY USAGE adds to its key's cost).
    pub fn mem_usage(&self) -> usize {
        match &self.repr {
            Repr::Small(b) => alloc_size(b.capacity()),
            Repr::Large(c) => {
                alloc_size(size_of::<Chain>())
                    + alloc_size(c.nodes.capacity() * size_of::<Vec<u8>>())
                    + c.nodes
                        .iter()
                        .map(|b| alloc_size(b.capacity()))
                        .sum::<usize>()
            }
        }
    }

    /// For a quicklist: (nodes, nodes kept compressed, the sum of Redis's
    /// lpBytes of every node uncompressed), as DEBUG OBJECT shows them.
    pub fn quicklist_stats(&self) -> Option<(usize, usize, usize)> {
        let Repr::Large(c) = &self.repr else {
            return None;
        };
        let packed = c.nodes.iter().filter(|b| is_packed(b)).count();
        let bytes = c
            .nodes
            .iter()
            .map(|b| {
                if is_packed(b) {
                    u32::from_le_bytes(b[HDR..PACKED_HDR].try_into().expect("plain length")) as usize
                        - HDR
                        + 7
                } else {
                    lp_bytes(b)
                }
            })
            .sum();
        Some((c.nodes.len(), packed, bytes))
    }

    /// What Redis's OBJECT ENCODING answers: "listpack" or "quicklist".
    pub fn encoding_name(&self) -> &'static str {
        match self.repr {
            Repr::Small(_) => "listpack",
            Repr::Large(_) => "quicklist",
        }
    }
}

static EMPTY: VecDeque<Vec<u8>> = VecDeque::new();

/// The node buffers of either shape.
#[derive(Debug, Clone, Copy)]
enum Nodes<'a> {
    One(&'a [u8]),
    Many(&'a VecDeque<Vec<u8>>),
}

impl<'a> Nodes<'a> {
    fn get(&self, i: usize) -> Option<&'a [u8]> {
        match *self {
            Nodes::One(b) => (i == 0).then_some(b),
            Nodes::Many(n) => n.get(i).map(|b| &b[..]),
        }
    }
}

/// An element as the list hands it out: borrowed from a plain node, or
/// an entry of a node decompressed for the reader (shared by the elements
/// read from it, freed with the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elem<'a> {
    /// In a plain node.
    Ref(StrRef<'a>),
    /// The entry at this offset of a decompressed node.
    Node(Rc<Vec<u8>>, usize),
}

impl Elem<'_> {
    /// The element.
    pub fn get(&self) -> StrRef<'_> {
        match self {
            Elem::Ref(v) => *v,
            Elem::Node(b, at) => decode(b, *at).0,
        }
    }

    /// The element's bytes (integers are formatted).
    pub fn to_vec(&self) -> Vec<u8> {
        self.get().to_vec()
    }

    /// The element's length in bytes.
    pub fn len(&self) -> usize {
        self.get().len()
    }

    /// True for the empty string.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq<StrRef<'_>> for Elem<'_> {
    fn eq(&self, other: &StrRef<'_>) -> bool {
        self.get() == *other
    }
}

/// Elements towards the tail, see `List::iter_from`.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    nodes: Nodes<'a>,
    ni: usize,
    at: usize,
    /// Node `ni` decompressed, when it is packed.
    cur: Option<Rc<Vec<u8>>>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        loop {
            let b = self.nodes.get(self.ni)?;
            if let Some(node) = &self.cur {
                if self.at < node.len() {
                    let at = self.at;
                    self.at = decode(node, at).1;
                    return Some(Elem::Node(node.clone(), at));
                }
            } else if self.at < b.len() {
                let (v, next) = decode(b, self.at);
                self.at = next;
                return Some(Elem::Ref(v));
            }
            self.ni += 1;
            self.at = HDR;
            self.cur = self.nodes.get(self.ni).and_then(|b| plain_node(b).err());
        }
    }
}

/// Elements towards the head, see `List::rev_from`.
#[derive(Debug, Clone)]
pub struct RevIter<'a> {
    nodes: Nodes<'a>,
    ni: usize,
    at: usize,
    /// Node `ni` decompressed, when it is packed.
    cur: Option<Rc<Vec<u8>>>,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        loop {
            let b = self.nodes.get(self.ni)?;
            if self.at > HDR {
                if let Some(node) = &self.cur {
                    self.at = prev(node, self.at);
                    return Some(Elem::Node(node.clone(), self.at));
                }
                self.at = prev(b, self.at);
                return Some(Elem::Ref(decode(b, self.at).0));
            }
            self.ni = self.ni.checked_sub(1)?;
            let b = self.nodes.get(self.ni)?;
            self.cur = plain_node(b).err();
            self.at = self.cur.as_ref().map_or(b.len(), |node| node.len());
        }
    }
}

#[cfg(test)]
mod tests;
