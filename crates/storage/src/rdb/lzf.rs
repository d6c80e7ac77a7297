//! LZF decompression, for strings Redis compressed in RDB files and DUMP
//! payloads (`rdbcompression yes`, strings over 20 bytes).
//!
//! The format is a sequence of runs, each opened by a control byte: below
//! 32 it announces `ctrl + 1` literal bytes; otherwise its top three bits
//! give a match length (7 means "add the next byte"), and its low five bits
//! with the next byte give how far back the match starts. Every offset and
//! length is checked, so a corrupt input is an error, never a panic.

/// Decompresses `input` into exactly `out_len` bytes; None if the input is
/// corrupt or does not produce exactly `out_len` bytes.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(i..i + n)?;
            if out.len() + n > out_len {
                return None;
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            len += 2;
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            if out.len() + len > out_len {
                return None;
            }
            // Byte by byte: a match may overlap the bytes it produces.
            for k in 0..len {
                let b = out[start + k];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_matches() {
        // "abcabcabcabc": 3 literals, then a 9-byte match 3 back.
        let input = [2, b'a', b'b', b'c', (7 << 5), 0, 2];
        assert_eq!(decompress(&input, 12).as_deref(), Some(&b"abcabcabcabc"[..]));
        // Overlapping run: one literal then a match one back.
        let input = [0, b'x', (3 << 5), 0];
        assert_eq!(decompress(&input, 6).as_deref(), Some(&b"xxxxxx"[..]));
    }

    #[test]
    fn corrupt_input_is_refused() {
        assert_eq!(decompress(&[5, b'a'], 6), None); // literal past the end
        assert_eq!(decompress(&[(1 << 5), 9], 3), None); // match before the start
        assert_eq!(decompress(&[0, b'a'], 2), None); // too short
        assert_eq!(decompress(&[1, b'a', b'b'], 1), None); // too long
        assert_eq!(decompress(&[0xe0], 9), None); // truncated control
    }
}
