//! LZF compression, for `rdbcompression yes`: strings over 20 bytes are
//! written compressed when that makes them shorter, as Redis does.
//!
//! The output is the stream format `lzf::decompress` reads (and Redis's
//! decompressor, which is the reference liblzf's): literal runs of at most
//! 32 bytes opened by `len - 1`, and back references of 3 to 264 bytes at
//! most 8192 bytes back. It need not match liblzf byte for byte, only be a
//! valid stream: matches are found through a table of the last position of
//! each 3-byte hash, greedily, with no lazy matching. That is one pass and
//! one table per call, sized to the input (at most 4096 entries), which is
//! cheap next to the I/O of a save.
//!
//! Written here rather than taken from a crate: the crates that implement
//! LZF either bind the C library (which brings `unsafe` and a C build) or
//! are small unmaintained ports, and the format is short enough to keep
//! whole next to its decompressor, whose tests check every stream made here.

/// Longest back reference: 7 in the control byte, 255 more in the next
/// one, plus the 2 every match implies.
const MAX_MATCH: usize = 2 + 7 + 255;
/// Farthest back a reference can point (13 offset bits, plus one).
const MAX_BACK: usize = 1 << 13;
/// Longest literal run one control byte announces.
const MAX_LITERALS: usize = 32;
/// Most bits of the 3-byte hash: a table of 4096 entries.
const MAX_HASH_BITS: u32 = 12;

fn hash3(b: &[u8], bits: u32) -> usize {
    let v = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
    (v.wrapping_mul(0x9E37_79B1) >> (32 - bits)) as usize
}

/// Appends the pending literals `lit` to `out` in runs of at most 32.
fn flush_literals(out: &mut Vec<u8>, lit: &[u8]) {
    for run in lit.chunks(MAX_LITERALS) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
}

/// Compresses `input`; None when the result would not be shorter than
/// `limit` bytes (the caller then stores the input as it is). The check is
/// made as the output grows, so an incompressible input costs one pass and
/// at most `limit` bytes of output.
pub fn compress(input: &[u8], limit: usize) -> Option<Vec<u8>> {
    if input.len() >= u32::MAX as usize {
        return None; // positions are kept in 32 bits
    }
    let mut out = Vec::with_capacity(limit.min(input.len()));
    // Position + 1 of the last occurrence of each hash; 0 means none. A
    // short input gets a small table: clearing 16 KiB per 30-byte string
    // would cost more than compressing it.
    let bits = (usize::BITS - input.len().leading_zeros()).clamp(6, MAX_HASH_BITS);
    let mut table = vec![0u32; 1 << bits];
    let mut lit_start = 0;
    let mut i = 0;
    while i + 3 <= input.len() {
        let h = hash3(&input[i..], bits);
        let cand = table[h] as usize;
        table[h] = (i + 1) as u32;
        if cand > 0 && i - (cand - 1) <= MAX_BACK && input[cand - 1..cand + 2] == input[i..i + 3] {
            let from = cand - 1;
            let max = MAX_MATCH.min(input.len() - i);
            let mut len = 3;
            while len < max && input[from + len] == input[i + len] {
                len += 1;
            }
            flush_literals(&mut out, &input[lit_start..i]);
            let off = i - from - 1; // 0..8192: 5 bits in the control byte, 8 after
            let stored = len - 2;
            if stored < 7 {
                out.push(((stored as u8) << 5) | (off >> 8) as u8);
            } else {
                out.push((7 << 5) | (off >> 8) as u8);
                out.push((stored - 7) as u8);
            }
            out.push(off as u8);
            // Index the positions the match covered, so later data can
            // refer into it (the last two have no full 3 bytes yet).
            for k in i + 1..(i + len).min(input.len().saturating_sub(2)) {
                table[hash3(&input[k..], bits)] = (k + 1) as u32;
            }
            i += len;
            lit_start = i;
            if out.len() >= limit {
                return None;
            }
        } else {
            i += 1;
            // Bound the pending run so the size check stays meaningful.
            if i - lit_start == MAX_LITERALS {
                flush_literals(&mut out, &input[lit_start..i]);
                lit_start = i;
                if out.len() >= limit {
                    return None;
                }
            }
        }
    }
    flush_literals(&mut out, &input[lit_start..]);
    (out.len() < limit).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::super::lzf::decompress;
    use super::*;

    fn round_trip(input: &[u8]) -> Option<usize> {
        let c = compress(input, usize::MAX)?;
        assert_eq!(decompress(&c, input.len()).as_deref(), Some(input), "input of {} bytes", input.len());
        Some(c.len())
    }

    #[test]
    fn repetitive_input_shrinks_and_decompresses() {
        assert!(round_trip(&[b'a'; 100]).unwrap() < 10);
        let text: Vec<u8> = (0..2000).flat_map(|i| format!("key:{i}:value ").into_bytes()).collect();
        assert!(round_trip(&text).unwrap() < text.len() / 2);
        // Runs longer than one match and farther than one window.
        let mut far = vec![0u8; 20_000];
        for (i, b) in far.iter_mut().enumerate() {
            *b = (i % 251) as u8 ^ (i / 9000) as u8;
        }
        round_trip(&far);
    }

    #[test]
    fn every_small_input_decompresses() {
        for len in 0..80 {
            round_trip(&vec![b'z'; len]);
            round_trip(&(0..len as u8).collect::<Vec<_>>());
            round_trip(&(0..len).map(|i| (i % 3) as u8).collect::<Vec<_>>());
        }
    }

    #[test]
    fn pseudo_random_inputs_decompress() {
        let mut x: u64 = 0x1234_5678;
        for len in [1, 2, 3, 4, 31, 32, 33, 64, 1000, 9000, 70_000] {
            // Few distinct bytes, so matches of every length and distance occur.
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b"ab\0"[(x % 3) as usize]
                })
                .collect();
            round_trip(&input);
        }
    }

    #[test]
    fn limit_is_respected() {
        let mut x: u64 = 88_172_645_463_325_252;
        let noise: Vec<u8> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        assert_eq!(compress(&noise, noise.len()), None);
        assert_eq!(compress(&[b'a'; 100], 3), None);
        assert!(compress(&[b'a'; 100], 10).is_some());
        assert_eq!(compress(b"", 0), None);
    }
}
