//! Argument vectors kept for reuse. A request's arguments are a vector of
//! byte vectors: three allocations for a GET, 21 for an MSET of ten
//! pairs, each freed again once the command ran. The server hands a
//! command's vector back here (`recycle`) and the one-pass parser fills it
//! with the next request's bytes, so a steady stream of small requests
//! allocates nothing. Each thread keeps its own; the server hands a
//! vector back on the thread that parsed it (an I/O thread's go back to
//! it), so that a thread frees what it allocated.

use std::cell::RefCell;

/// Vectors kept at most: one pipelined batch's worth (the executor parses
/// up to 16 requests ahead of the one running).
const KEEP: usize = 32;
/// Largest argument buffer kept; a bigger one is freed and its slot starts
/// empty. Capped so that what the spares hold stays small (at most
/// `KEEP * MAX_ARGS` buffers of `ARG_KEEP` bytes, 128 KiB, and their 48 KiB
/// of vector slots) and a buffer reused for a shorter argument wastes
/// little.
const ARG_KEEP: usize = 64;
/// Vectors of more arguments than this are not kept.
const MAX_ARGS: usize = 64;

thread_local! {
    static SPARE: RefCell<Vec<Vec<Vec<u8>>>> = const { RefCell::new(Vec::new()) };
}

/// Gives `argv` back for a later request to reuse; what is too big to keep
/// is freed here.
pub fn recycle(mut argv: Vec<Vec<u8>>) {
    if argv.capacity() > MAX_ARGS || argv.capacity() == 0 {
        return;
    }
    for a in argv.iter_mut().filter(|a| a.capacity() > ARG_KEEP) {
        *a = Vec::new();
    }
    SPARE.with_borrow_mut(|s| {
        if s.len() < KEEP {
            s.push(argv);
        }
    });
}

/// A vector to fill with a request's `n` arguments: a kept one (its old
/// arguments still in it, to be overwritten: see `Filler`), or a new one.
#[inline]
pub(crate) fn take(n: usize) -> Vec<Vec<u8>> {
    if n <= MAX_ARGS {
        if let Some(v) = SPARE.with_borrow_mut(Vec::pop) {
            return v;
        }
    }
    Vec::with_capacity(n)
}

/// Fills a vector from `take` argument by argument, reusing the buffers
/// of the arguments it held. Dropped unfinished (the request was not
/// whole), it gives the vector back.
pub(crate) struct Filler {
    argv: Vec<Vec<u8>>,
    /// Arguments written so far; those at and past it are old.
    at: usize,
}

impl Filler {
    #[inline]
    pub(crate) fn new(n: usize) -> Filler {
        Filler { argv: take(n), at: 0 }
    }

    #[inline]
    pub(crate) fn push(&mut self, arg: &[u8]) {
        match self.argv.get_mut(self.at) {
            Some(a) => {
                a.clear();
                a.extend_from_slice(arg);
            }
            None => self.argv.push(arg.to_vec()),
        }
        self.at += 1;
    }

    /// The filled vector, without the old arguments past the new ones.
    #[inline]
    pub(crate) fn finish(mut self) -> Vec<Vec<u8>> {
        let mut argv = std::mem::take(&mut self.argv);
        argv.truncate(self.at);
        argv
    }
}

impl Drop for Filler {
    #[inline]
    fn drop(&mut self) {
        if self.argv.capacity() != 0 {
            recycle(std::mem::take(&mut self.argv));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(args: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut f = Filler::new(args.len());
        for a in args {
            f.push(a);
        }
        f.finish()
    }

    #[test]
    fn a_recycled_vector_holds_only_the_new_arguments() {
        SPARE.with_borrow_mut(Vec::clear);
        let first = fill(&[b"MSET", b"k1", b"v1", b"k2", b"v2"]);
        recycle(first);
        let second = fill(&[b"GET", b"key"]);
        assert_eq!(second, vec![b"GET".to_vec(), b"key".to_vec()]);
        recycle(second);
        let third = fill(&[b"SET", b"k", b"a longer value than any before"]);
        assert_eq!(third, vec![b"SET".to_vec(), b"k".to_vec(), b"a longer value than any before".to_vec()]);
        assert!(SPARE.with_borrow(Vec::is_empty));
    }

    #[test]
    fn big_buffers_and_vectors_are_not_kept() {
        SPARE.with_borrow_mut(Vec::clear);
        let big = vec![0u8; ARG_KEEP + 1];
        recycle(vec![b"SET".to_vec(), b"k".to_vec(), big]);
        let kept = SPARE.with_borrow(|s| s[0].iter().map(Vec::capacity).collect::<Vec<_>>());
        assert_eq!(kept.len(), 3);
        assert_eq!(kept[2], 0, "the buffer over ARG_KEEP was freed");
        SPARE.with_borrow_mut(Vec::clear);
        recycle(vec![Vec::new(); MAX_ARGS + 1]);
        assert!(SPARE.with_borrow(Vec::is_empty));
        for _ in 0..KEEP + 5 {
            recycle(vec![b"GET".to_vec()]);
        }
        assert_eq!(SPARE.with_borrow(Vec::len), KEEP);
    }
}
