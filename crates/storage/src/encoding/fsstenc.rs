//! An FSST encoder with a lookup index sized to its symbol table, built
//! once from the symbols the fsst-rs crate trained (the crate is kept for
//! training only).
//!
//! Why not the crate's encoder: its index is a 64K-entry table of two-byte
//! prefixes (128 KiB) plus a 32 KiB hash of three-byte prefixes, 160 KiB a
//! table kept for the table's whole life. A table has at most 255 symbols,
//! so an index over the symbols themselves needs a few KiB.
//!
//! ```text
//!   single[256]   | code u8 | len u8 |: the one-byte symbol of each byte,
//!                 or (ESCAPE, 1)
//!   first[256]    page of each byte as the first byte of a symbol of 2
//!                 bytes or more (0: none)
//!   pages[p][256] by the second byte: | code u8 | len u8 |, the 2-byte
//!                 symbol of those two bytes, else the one-byte one (or
//!                 ESCAPE); bit 7 of len (LONGER): a symbol of 3-8 bytes
//!                 starts with these two bytes. Page 0 is all zero
//!                 (`single` answers).
//!   long[2^k]     the symbols of 3-8 bytes, by their first 3 bytes in a
//!                 cuckoo table (two hash functions; each symbol in one of
//!                 its two slots): | symbol u64 | len u8 | code u8 |;
//!                 an empty slot holds a 3-byte key that hashes elsewhere
//!                 both ways, so no lookup that reaches it matches it
//! ```
//!
//! At each position the encoder takes the longest symbol it finds (greedy,
//! as FSST does), else writes ESCAPE and the literal byte. The common step,
//! a 2-byte symbol that no longer one extends, is two loads and a predicted
//! branch whose path advances by a constant, so the next step need not wait
//! for the loads (the crate's encoder is shaped the same way).
//!
//! Its output is the code stream `packed.rs` stores and decodes: a code
//! below 255 is that symbol, 255 is followed by one literal byte. Like the
//! crate's encoder (whose three-byte hash drops a symbol that collides) it
//! may leave a symbol unused or pick a shorter one: a long symbol cuckoo
//! placement cannot fit, the shorter of two that share their first three
//! bytes when it sits in the first slot looked at, or the symbols of more
//! than `MAX_PAGES` first bytes. The tests check that its output is no
//! longer than the crate's on seed 002's sessions and on arbitrary bytes.
//!
//! Memory: 16 bytes of long slots for each of four slots a long symbol
//! (a power of two: 8 KiB on seed 002's sessions, at most 16 KiB), and a
//! page of 512 bytes for each distinct first byte of the symbols of 2 bytes
//! and more (18 on sessions), at most `MAX_PAGES`: at most 33 KiB a table,
//! about 18 KiB on sessions, against the crate's 160 KiB. No unsafe code.

/// The code followed by one literal byte.
pub const ESCAPE: u8 = 255;

/// Most pages (distinct first bytes of symbols of 2 bytes and more) indexed.
pub const MAX_PAGES: usize = 32;

#[derive(Clone, Copy, Default)]
struct Long {
    sym: u64,
    len: u8,
    code: u8,
}

/// The encoding index of one symbol table.
pub struct Encoder {
    single: [u16; 256],
    first: [u8; 256],
    pages: Box<[[u16; 256]]>,
    long: Box<[Long]>,
    /// 32 - log2(long.len()).
    shift: u32,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.long.iter().filter(|x| x.code != ESCAPE).count();
        f.debug_struct("Encoder").field("pages", &(self.pages.len() - 1)).field("long", &used).field("slots", &self.long.len()).finish()
    }
}

/// The bytes of a `len`-byte symbol in a little-endian word.
#[inline]
fn low_bytes(len: usize) -> u64 {
    u64::MAX >> (64 - 8 * len)
}

/// The two slots of a symbol whose first three bytes are `k`, in a table
/// of 2^(32 - shift) slots: the top bits of two products.
#[inline]
fn slots(k: u64, shift: u32) -> (usize, usize) {
    let k = k as u32;
    ((k.wrapping_mul(0x9E37_79B1) >> shift) as usize, (k.wrapping_mul(0x85EB_CA77) >> shift) as usize)
}

/// The flag of a page entry whose two bytes begin a symbol of 3 bytes or more.
const LONGER: u16 = 0x8000;

fn pair(code: u8, len: u8) -> u16 {
    u16::from_le_bytes([code, len])
}

impl Encoder {
    /// Builds the index of a table whose code c is `syms[c]` (little-endian,
    /// the first `lens[c]` bytes). Where two codes name the same symbol the
    /// lower is used.
    ///
    /// Panics if there are more than 255 symbols or a length is not 1-8.
    pub fn new(syms: &[u64], lens: &[u8]) -> Encoder {
        assert!(syms.len() == lens.len() && syms.len() < ESCAPE as usize + 1);
        let mut single = [pair(ESCAPE, 1); 256];
        let mut pairs: Vec<(u16, u8)> = Vec::new();
        let mut longs: Vec<Long> = Vec::new();
        // From high codes to low, so the lowest of equal symbols is written last.
        for (c, (&s, &l)) in syms.iter().zip(lens).enumerate().rev() {
            assert!((1..=8).contains(&l), "symbol length {l}");
            let sym = s & low_bytes(l as usize);
            let code = c as u8;
            match l {
                1 => single[sym as usize] = pair(code, 1),
                2 => pairs.push((sym as u16, code)),
                _ => longs.push(Long { sym, len: l, code }),
            }
        }
        // Pages for the first bytes with the most symbols of 2 bytes and more.
        let mut per_byte = [0usize; 256];
        for k in pairs.iter().map(|p| p.0).chain(longs.iter().map(|x| x.sym as u16)) {
            per_byte[(k & 0xFF) as usize] += 1;
        }
        let mut bytes: Vec<usize> = (0..256).filter(|&b| per_byte[b] > 0).collect();
        bytes.sort_by_key(|&b| (std::cmp::Reverse(per_byte[b]), b));
        bytes.truncate(MAX_PAGES);
        let mut first = [0u8; 256];
        for (p, &b) in bytes.iter().enumerate() {
            first[b] = p as u8 + 1;
        }
        let mut pages = vec![[0u16; 256]; bytes.len() + 1].into_boxed_slice();
        for (p, &b) in bytes.iter().enumerate() {
            pages[p + 1].fill(single[b]);
        }
        let at = |k: u16| (first[(k & 0xFF) as usize] as usize, (k >> 8) as usize);
        let paged = |k: u16| first[(k & 0xFF) as usize] != 0;
        pairs.retain(|p| paged(p.0));
        longs.retain(|x| paged(x.sym as u16));
        for &(k, code) in &pairs {
            let (p, b1) = at(k);
            pages[p][b1] = pair(code, 2);
        }
        for x in &longs {
            let (p, b1) = at(x.sym as u16);
            pages[p][b1] |= LONGER;
        }
        // Long symbols: the lowest code of equal ones, longest first so
        // that, where placement fails, a shorter one is the one left out.
        longs.reverse();
        longs.sort_by_key(|x| (std::cmp::Reverse(x.len), x.sym));
        longs.dedup_by_key(|x| (x.sym, x.len));
        // Four slots a symbol or more (a power of two): a cuckoo table that
        // empty places everything, and small enough to stay in cache.
        let size = (4 * longs.len()).next_power_of_two().max(16);
        let shift = 32 - size.trailing_zeros();
        let mut long = vec![Long::default(); size].into_boxed_slice();
        let mut used = vec![false; size];
        // A symbol goes to its first slot if free, else its second; else it
        // takes the first and the one there moves to its other slot (and so
        // on, a bounded number of times; what is left over goes unused).
        // Longest first, the longer of two symbols that share their first
        // three bytes sits in the first slot, which a lookup tries first.
        for x in longs {
            let (a, b) = slots(x.sym & 0xFF_FFFF, shift);
            let (mut x, mut at) = (x, if used[a] && !used[b] { b } else { a });
            for _ in 0..64 {
                if !used[at] {
                    used[at] = true;
                    long[at] = x;
                    break;
                }
                std::mem::swap(&mut long[at], &mut x);
                let (a, b) = slots(x.sym & 0xFF_FFFF, shift);
                at = if at == a { b } else { a };
            }
        }
        // Empty slots: a 3-byte key that no lookup reaching this slot has
        // (one whose own two slots are both elsewhere), code ESCAPE.
        for at in 0..size {
            if !used[at] {
                let k = (0..).find(|&k| {
                    let (a, b) = slots(k, shift);
                    a != at && b != at
                });
                long[at] = Long { sym: k.expect("a key hashing elsewhere"), len: 3, code: ESCAPE };
            }
        }
        Encoder { single, first, pages, long, shift }
    }

    /// The longest symbol at the start of `word`, which holds the next
    /// `avail` input bytes (1-8; bytes above them are zero): (code, length
    /// in bytes), or (ESCAPE, 1) when none matches.
    #[inline(always)]
    fn step(&self, word: u64, avail: usize) -> (u8, usize) {
        let b0 = (word & 0xFF) as usize;
        let two = self.pages[self.first[b0] as usize][((word >> 8) & 0xFF) as usize];
        // Page 0 (no symbol of 2 bytes or more starts with b0) is all zero.
        let e = if two == 0 { self.single[b0] } else { two };
        if e & LONGER != 0 {
            let (a, b) = slots(word & 0xFF_FFFF, self.shift);
            let a = &self.long[a];
            let la = a.len as usize;
            if (word ^ a.sym) & low_bytes(la) == 0 && la <= avail {
                return (a.code, la);
            }
            let b = &self.long[b];
            let lb = b.len as usize;
            if (word ^ b.sym) & low_bytes(lb) == 0 && lb <= avail {
                return (b.code, lb);
            }
        }
        let [code, len] = (e & !LONGER).to_le_bytes();
        if len as usize > avail {
            // A 2-byte symbol at the last byte (only in the tail).
            let [code, _] = self.single[b0].to_le_bytes();
            return (code, 1);
        }
        (code, len as usize)
    }

    /// Writes the code at position `i` of `input` to `buf[*o..]`, moves `o`
    /// past it and returns how many input bytes it covers.
    #[inline(always)]
    fn emit(&self, input: &[u8], i: usize, buf: &mut [u8], o: &mut usize) -> usize {
        let (word, avail) = if i + 8 <= input.len() {
            (u64::from_le_bytes(input[i..i + 8].try_into().expect("8 bytes")), 8)
        } else {
            let mut tail = [0u8; 8];
            let avail = input.len() - i;
            tail[..avail].copy_from_slice(&input[i..]);
            (u64::from_le_bytes(tail), avail)
        };
        let (code, len) = self.step(word, avail);
        (buf[*o], buf[*o + 1]) = (code, word as u8);
        *o += 1 + usize::from(code == ESCAPE);
        len
    }

    /// Appends the codes of `input` to `out`: at most 2 bytes an input byte.
    pub fn encode(&self, input: &[u8], out: &mut Vec<u8>) {
        let base = out.len();
        // Room for all escapes; each step writes the literal after its code
        // and keeps it only for an escape (no branch).
        out.resize(base + 2 * input.len(), 0);
        let buf = &mut out[base..];
        let (mut i, mut o) = (0, 0);
        // Whole words while 8 bytes remain, then the tail zero-padded.
        while i + 8 <= input.len() {
            let word = u64::from_le_bytes(input[i..i + 8].try_into().expect("8 bytes"));
            // The common case first: a 2-byte symbol that no longer one
            // extends. Its length is a constant on this path, so the next
            // step's position does not wait on the table load (the branch
            // is predicted), as in the crate's encoder.
            let two = self.pages[self.first[(word & 0xFF) as usize] as usize][((word >> 8) & 0xFF) as usize];
            if two >> 8 == 2 {
                buf[o] = two as u8;
                o += 1;
                i += 2;
                continue;
            }
            let (code, len) = self.step(word, 8);
            (buf[o], buf[o + 1]) = (code, word as u8);
            o += 1 + usize::from(code == ESCAPE);
            i += len;
        }
        while i < input.len() {
            i += self.emit(input, i, buf, &mut o);
        }
        out.truncate(base + o);
    }

    /// Heap bytes of the index (its pages and long slots).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.pages) + std::mem::size_of_val(&*self.long)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decodes `codes` with the symbols (a reference decoder).
    fn decode(syms: &[u64], lens: &[u8], codes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < codes.len() {
            if codes[i] == ESCAPE {
                out.push(codes[i + 1]);
                i += 2;
            } else {
                let c = codes[i] as usize;
                out.extend_from_slice(&syms[c].to_le_bytes()[..lens[c] as usize]);
                i += 1;
            }
        }
        out
    }

    fn trained(samples: &[Vec<u8>]) -> (fsst::Compressor, Vec<u64>, Vec<u8>) {
        let refs: Vec<&[u8]> = samples.iter().map(|v| &v[..]).collect();
        let comp = fsst::Compressor::train(&refs);
        let syms = comp.symbol_table().iter().map(|s| s.to_u64()).collect();
        let lens = comp.symbol_lengths().to_vec();
        (comp, syms, lens)
    }

    fn session(i: u64) -> Vec<u8> {
        format!("{{\"user_id\":{},\"ts\":{},\"role\":\"u\"}}", 1_000_000 + i * 7919 % 9_000_000, 1_700_000_000 + i * 104_729 % 2_592_000).into_bytes()
    }

    #[test]
    fn sessions_encode_no_longer_than_the_crate() {
        let samples: Vec<Vec<u8>> = (0..256).map(session).collect();
        let (comp, syms, lens) = trained(&samples);
        let enc = Encoder::new(&syms, &lens);
        assert!(enc.heap_bytes() < 40 * 1024, "{enc:?}");
        let (mut ours, mut theirs) = (0, 0);
        for i in 1000..3000 {
            let v = session(i);
            let mut out = Vec::new();
            enc.encode(&v, &mut out);
            assert_eq!(decode(&syms, &lens, &out), v);
            ours += out.len();
            theirs += comp.compress(&v).len();
        }
        assert!(ours <= theirs, "{ours} > {theirs}");
    }

    #[test]
    fn hand_made_table() {
        // Codes: 0 "ab", 1 "abcd", 2 "a", 3 "abcdefgh", 4 "x\0", 5 "\0".
        let syms = [u64::from_le_bytes(*b"ab\0\0\0\0\0\0"), u64::from_le_bytes(*b"abcd\0\0\0\0"), b'a' as u64, u64::from_le_bytes(*b"abcdefgh"), b'x' as u64, 0];
        let lens = [2, 4, 1, 8, 2, 1];
        let enc = Encoder::new(&syms, &lens);
        let mut out = Vec::new();
        enc.encode(b"abcdefghabcdabcaabx", &mut out);
        assert_eq!(out, [3, 1, 0, ESCAPE, b'c', 2, 0, ESCAPE, b'x']);
        out.clear();
        // "x\0" matches only where the zero byte is really there.
        enc.encode(b"x\0x", &mut out);
        assert_eq!(out, [4, ESCAPE, b'x']);
    }

    #[test]
    fn more_first_bytes_than_pages() {
        // 40 two-byte symbols "Aa", "Bb", ... with 40 distinct first bytes:
        // those past MAX_PAGES go unused, and everything still round-trips.
        let syms: Vec<u64> = (0..40u64).map(|i| (0x41 + i) | (0x61 + i) << 8).collect();
        let lens = vec![2u8; 40];
        let enc = Encoder::new(&syms, &lens);
        let input: Vec<u8> = (0..40u8).flat_map(|i| [0x41 + i, 0x61 + i]).collect();
        let mut out = Vec::new();
        enc.encode(&input, &mut out);
        assert_eq!(decode(&syms, &lens, &out), input);
        assert_eq!(out.len(), MAX_PAGES + 2 * 2 * (40 - MAX_PAGES));
    }

    proptest! {
        /// Any bytes, under a table trained on any samples, decode back
        /// exactly, in no more bytes than the crate's encoder writes.
        #[test]
        fn round_trip(samples in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 1..20),
                      values in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..30)) {
            let (comp, syms, lens) = trained(&samples);
            let enc = Encoder::new(&syms, &lens);
            for v in &values {
                let mut out = vec![7];
                enc.encode(v, &mut out);
                prop_assert_eq!(&decode(&syms, &lens, &out[1..]), v);
                if v.len() >= 8 {
                    prop_assert!(out.len() - 1 <= comp.compress(v).len());
                }
            }
        }

        /// The same for values built from the samples' own bytes, where
        /// symbols match often.
        #[test]
        fn round_trip_alike(samples in prop::collection::vec(prop::collection::vec(0u8..6, 1..80), 1..20),
                            picks in prop::collection::vec((0usize..20, 0usize..80, 0usize..80), 1..30)) {
            let (comp, syms, lens) = trained(&samples);
            let enc = Encoder::new(&syms, &lens);
            let mut v = Vec::new();
            for (s, a, b) in picks {
                let s = &samples[s % samples.len()];
                let (a, b) = (a.min(s.len()), b.min(s.len()));
                v.extend_from_slice(&s[a.min(b)..a.max(b)]);
            }
            let mut out = Vec::new();
            enc.encode(&v, &mut out);
            prop_assert_eq!(&decode(&syms, &lens, &out), &v);
            if v.len() >= 8 {
                prop_assert!(out.len() <= comp.compress(&v).len() + v.len() / 16 + 1);
            }
        }
    }
}
