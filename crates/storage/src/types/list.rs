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
//! Memory (`mem_usage`): heap bytes this list owns, each block rounded to
//! jemalloc's size class.

use std::collections::VecDeque;

use crate::encoding::listpack::{self, decode, prev};
use crate::encoding::{alloc_size, reserve_class, shrink_class};
use crate::strref::StrRef;

/// Node header: the element count, u32 LE.
const HDR: usize = 4;
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
}

impl Default for ListConfig {
    fn default() -> Self {
        ListConfig { fill: -2 }
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

fn count(b: &[u8]) -> usize {
    u32::from_le_bytes(b[..HDR].try_into().expect("header")) as usize
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
        match &self.repr {
            Repr::Small(b) => (0, offset_in(b, i)),
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
                (ni, offset_in(&c.nodes[ni], k))
            }
        }
    }

    /// The element at Redis index `index`, if in range.
    pub fn get(&self, index: i64) -> Option<StrRef<'_>> {
        let i = self.resolve(index)?;
        let (ni, at) = self.locate(i);
        Some(decode(self.nodes().get(ni)?, at).0)
    }

    /// Elements from index `i` (0-based) towards the tail.
    pub fn iter_from(&self, i: usize) -> Iter<'_> {
        if i >= self.len() {
            return Iter {
                nodes: Nodes::Many(&EMPTY),
                ni: 0,
                at: 0,
            };
        }
        let (ni, at) = self.locate(i);
        Iter {
            nodes: self.nodes(),
            ni,
            at,
        }
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
            };
        }
        let (ni, at) = self.locate(i);
        let nodes = self.nodes();
        let end = decode(nodes.get(ni).expect("located"), at).1;
        RevIter { nodes, ni, at: end }
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
        if c.nodes.len() != 1 || is_plain(&c.nodes[0], cfg) {
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
        for e in elems {
            self.push_one(end, e.as_ref(), cfg);
        }
    }

    fn push_one(&mut self, end: End, elem: &[u8], cfg: &ListConfig) {
        match &mut self.repr {
            Repr::Small(b) => {
                let at = if end == End::Head { HDR } else { b.len() };
                insert_node(b, at, elem);
            }
            Repr::Large(c) => {
                c.len += 1;
                let node = if end == End::Head {
                    c.nodes.front_mut()
                } else {
                    c.nodes.back_mut()
                };
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
        let Some(i) = self.iter().position(|v| listpack::eq(v, pivot)) else {
            return false;
        };
        self.grow_check(elem.len(), 1, cfg);
        self.insert_at(i + usize::from(after), elem, cfg);
        true
    }

    /// LSET: replaces element `i` (0-based, in range) with `elem`.
    pub fn set(&mut self, i: usize, elem: &[u8], cfg: &ListConfig) {
        self.grow_check(elem.len(), 1, cfg);
        let (ni, at) = self.locate(i);
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
            shrink_class(b);
        } else {
            self.insert_at(i, elem, cfg);
            self.delete_range(i + 1, 1);
        }
        self.shrink_check(cfg);
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
            let b = &mut nodes[ni];
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
            *b = out;
            removed += gone;
        }
        if let Repr::Large(c) = &mut self.repr {
            c.len -= removed;
            c.nodes.retain(|b| count(b) > 0);
        }
        self.shrink_check(cfg);
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

/// Elements towards the tail, see `List::iter_from`.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    nodes: Nodes<'a>,
    ni: usize,
    at: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = StrRef<'a>;

    fn next(&mut self) -> Option<StrRef<'a>> {
        loop {
            let b = self.nodes.get(self.ni)?;
            if self.at < b.len() {
                let (v, next) = decode(b, self.at);
                self.at = next;
                return Some(v);
            }
            self.ni += 1;
            self.at = HDR;
        }
    }
}

/// Elements towards the head, see `List::rev_from`.
#[derive(Debug, Clone)]
pub struct RevIter<'a> {
    nodes: Nodes<'a>,
    ni: usize,
    at: usize,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = StrRef<'a>;

    fn next(&mut self) -> Option<StrRef<'a>> {
        loop {
            let b = self.nodes.get(self.ni)?;
            if self.at > HDR {
                self.at = prev(b, self.at);
                return Some(decode(b, self.at).0);
            }
            self.ni = self.ni.checked_sub(1)?;
            self.at = self.nodes.get(self.ni)?.len();
        }
    }
}

#[cfg(test)]
mod tests;
