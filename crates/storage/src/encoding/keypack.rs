//! Keys of common shapes kept packed: a prefix shared by many keys stored
//! once, then a run of hex or decimal digits (or a UUID) at half a byte a
//! digit, giving back exactly the same bytes.
//!
//! ```text
//!   | prefix id u8 | form u8 | nibbles, two a byte, high first |
//!   form: bit 0 upper-case hex letters (A-F), else lower (digits have no case)
//!         bit 1 odd number of digits (the last byte's low nibble is 0)
//!         bit 2 UUID: 32 digits shown as 8-4-4-4-12 with hyphens
//!         bits 3-7 zero
//! ```
//!
//! `session:` + 40 hex digits (48 bytes) becomes 22 bytes; `key:123456`
//! becomes 5. The tail is the longest run at the end of the key of digits
//! and letters of one case (leading zeros included: a digit is a nibble,
//! not a number), so every key maps to one packed form and back:
//! equal packed forms mean equal keys, and `eq` compares a packed key with
//! a probe without decoding it into memory. A key is packed only when the
//! form is shorter; at most 255 prefixes of at most 64 bytes are kept
//! (never freed: 16 KiB at most), and a key whose prefix finds no room
//! stays raw. Hashing, cluster slots, SCAN, KEYS, RENAME, DUMP, RDB and
//! replication all see the raw key (the keyspace decodes it for them).
//! `unpack` checks everything it reads, so arbitrary bytes never panic it
//! (fuzz/fuzz_targets/packed_value.rs feeds it too).

use std::collections::HashMap;

const UPPER: u8 = 1;
const ODD: u8 = 2;
const UUID: u8 = 4;
/// Longest prefix kept in the table.
const MAX_PREFIX: usize = 64;
/// Most prefixes (ids are one byte).
const MAX_PREFIXES: usize = 255;
/// Hyphen positions of a UUID's text.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

const LOWER_DIGITS: &[u8; 16] = b"0123456789abcdef";
const UPPER_DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// The shared prefixes of one keyspace.
#[derive(Debug, Default)]
pub struct Prefixes {
    list: Vec<Vec<u8>>,
    ids: HashMap<Vec<u8>, u8>,
}

/// Per byte: bit 0 a digit, bit 1 a lower-case hex letter, bit 2 an
/// upper-case one; bits 4-7 its nibble. A table, not branches: key digits
/// are random, and a branch per digit mispredicted half the time (perf
/// showed packing at 15% of a SETEX).
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = match b {
            b'0'..=b'9' => 1 | (b - b'0') << 4,
            b'a'..=b'f' => 2 | (b - b'a' + 10) << 4,
            b'A'..=b'F' => 4 | (b - b'A' + 10) << 4,
            _ => 0,
        };
        c += 1;
    }
    t
};

fn nibble(c: u8) -> u8 {
    CLASS[c as usize] >> 4
}

/// Length of the run at the end of `key` of digits and letters of one
/// case (`upper`).
fn run_len(key: &[u8], upper: bool) -> usize {
    let mask = if upper { 1 | 4 } else { 1 | 2 };
    key.iter().rev().take_while(|&&c| CLASS[c as usize] & mask != 0).count()
}

/// True if `t` is a UUID's text in one case (`upper`).
fn is_uuid(t: &[u8], upper: bool) -> bool {
    let mask = if upper { 1 | 4 } else { 1 | 2 };
    t.len() == 36
        && HYPHENS.iter().all(|&i| t[i] == b'-')
        && t.iter().enumerate().all(|(i, &c)| HYPHENS.contains(&i) || CLASS[c as usize] & mask != 0)
}

/// The digit characters a packed tail stands for, in order (hyphens of a
/// UUID included). None if `form` or the length is malformed.
fn tail_chars(form: u8, bytes: &[u8]) -> Option<impl Iterator<Item = u8> + '_> {
    if form & !(UPPER | ODD | UUID) != 0 {
        return None;
    }
    if bytes.is_empty() {
        return None;
    }
    let n = bytes.len() * 2 - usize::from(form & ODD != 0);
    if (form & ODD != 0 && bytes[bytes.len() - 1] & 0xF != 0) || (form & UUID != 0 && n != 32) {
        return None;
    }
    let digits = if form & UPPER != 0 { UPPER_DIGITS } else { LOWER_DIGITS };
    let uuid = form & UUID != 0;
    Some((0..n).flat_map(move |i| {
        let b = bytes[i / 2];
        let c = digits[(if i % 2 == 0 { b >> 4 } else { b & 0xF }) as usize];
        // In a UUID, a hyphen comes before digits 8, 12, 16 and 20.
        let hyphen = uuid && matches!(i, 8 | 12 | 16 | 20);
        hyphen.then_some(b'-').into_iter().chain(std::iter::once(c))
    }))
}

impl Prefixes {
    /// Writes the packed form of `key` into `out` (cleared first) and
    /// returns true, if the key has a digit tail, its prefix has (or gets)
    /// an id, and the form is shorter than the key.
    pub fn pack(&mut self, key: &[u8], out: &mut Vec<u8>) -> bool {
        let (lo, up) = (run_len(key, false), run_len(key, true));
        let mut upper = up > lo;
        let mut n = lo.max(up);
        let t = &key[key.len().saturating_sub(36)..];
        if t.len() == 36 && (is_uuid(t, false) || is_uuid(t, true)) {
            upper = is_uuid(t, true) && !is_uuid(t, false);
            n = 36;
        } else if n < 2 {
            return false;
        }
        let mut form = if upper { UPPER } else { 0 };
        if n == 36 && t.len() == 36 && (is_uuid(t, false) || is_uuid(t, true)) {
            form |= UUID;
        }
        let (prefix, tail) = key.split_at(key.len() - n);
        let digits = if form & UUID != 0 { 32 } else { n };
        if 2 + digits.div_ceil(2) >= key.len() || prefix.len() > MAX_PREFIX {
            return false;
        }
        let id = match self.ids.get(prefix) {
            Some(&id) => id,
            None if self.list.len() < MAX_PREFIXES => {
                let id = self.list.len() as u8;
                self.list.push(prefix.to_vec());
                self.ids.insert(prefix.to_vec(), id);
                id
            }
            None => return false,
        };
        if digits % 2 == 1 {
            form |= ODD;
        }
        out.clear();
        out.push(id);
        out.push(form);
        let mut half = None;
        for &c in tail {
            if c == b'-' && form & UUID != 0 {
                continue;
            }
            match half.take() {
                None => half = Some(nibble(c) << 4),
                Some(h) => out.push(h | nibble(c)),
            }
        }
        out.extend(half);
        true
    }

    /// Appends the key `packed` stands for to `out`. None if malformed.
    pub fn unpack(&self, packed: &[u8], out: &mut Vec<u8>) -> Option<()> {
        let (&id, rest) = packed.split_first()?;
        let (&form, bytes) = rest.split_first()?;
        let prefix = self.list.get(id as usize)?;
        let chars = tail_chars(form, bytes)?;
        out.extend_from_slice(prefix);
        out.extend(chars);
        Some(())
    }

    /// True if the packed key `packed` is `key` (no allocation; a plain
    /// loop, as lookups run it on every tag match).
    pub fn eq(&self, packed: &[u8], key: &[u8]) -> bool {
        let [id, form, bytes @ ..] = packed else { return false };
        let Some(prefix) = self.list.get(*id as usize) else { return false };
        let Some(tail) = key.strip_prefix(&prefix[..]) else { return false };
        if form & !(UPPER | ODD | UUID) != 0 || bytes.is_empty() {
            return false;
        }
        let odd = form & ODD != 0;
        let uuid = form & UUID != 0;
        let digits = bytes.len() * 2 - usize::from(odd);
        if tail.len() != digits + if uuid { 4 } else { 0 } || (uuid && digits != 32) || (odd && bytes[bytes.len() - 1] & 0xF != 0) {
            return false;
        }
        let allowed = if form & UPPER != 0 { 1 | 4 } else { 1 | 2 };
        let mut i = 0;
        for (j, &c) in tail.iter().enumerate() {
            if uuid && HYPHENS.contains(&j) {
                if c != b'-' {
                    return false;
                }
                continue;
            }
            let class = CLASS[c as usize];
            let b = bytes[i / 2];
            let nib = if i % 2 == 0 { b >> 4 } else { b & 0xF };
            if class & allowed == 0 || class >> 4 != nib {
                return false;
            }
            i += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round(p: &mut Prefixes, key: &[u8]) -> Option<usize> {
        let mut out = Vec::new();
        if !p.pack(key, &mut out) {
            return None;
        }
        let mut back = Vec::new();
        p.unpack(&out, &mut back).unwrap();
        assert_eq!(back, key);
        assert!(p.eq(&out, key));
        Some(out.len())
    }

    #[test]
    fn shapes() {
        let mut p = Prefixes::default();
        assert_eq!(round(&mut p, b"session:0123456789abcdef0123456789abcdef01234567"), Some(22));
        assert_eq!(round(&mut p, b"key:123456"), Some(5));
        assert_eq!(round(&mut p, b"key:000123"), Some(5), "leading zeros kept");
        assert_eq!(round(&mut p, b"key:12345"), Some(5), "odd digit count");
        assert_eq!(round(&mut p, b"u:550e8400-e29b-41d4-a716-446655440000"), Some(18));
        assert_eq!(round(&mut p, b"U:550E8400-E29B-41D4-A716-446655440000"), Some(18));
        assert_eq!(round(&mut p, b"h:DEADBEEF00"), Some(7));
        assert_eq!(round(&mut p, b"mixed:DEADbeef"), Some(4), "the lower run only");
        assert_eq!(round(&mut p, b"k1"), None, "nothing saved");
        assert_eq!(round(&mut p, b"user:1000:cart"), None, "no digit tail");
        assert_eq!(round(&mut p, b""), None);
        // Distinct keys have distinct forms; a probe differing anywhere is unequal.
        let mut a = Vec::new();
        p.pack(b"key:0123", &mut a);
        for other in [&b"key:123"[..], b"key:01234", b"kez:0123", b"key:0124", b"key:012", b"KEY:0123", b"key:0123 "] {
            assert!(!p.eq(&a, other), "{:?}", std::str::from_utf8(other));
        }
    }

    #[test]
    fn prefixes_are_bounded() {
        let mut p = Prefixes::default();
        for i in 0..300 {
            let k = format!("p{i}x:{}", 1_000_000 + i);
            let packed = round(&mut p, k.as_bytes());
            assert_eq!(packed.is_some(), i < MAX_PREFIXES, "{i}");
        }
        assert!(round(&mut p, b"toolong".repeat(20).iter().chain(b":12345678").copied().collect::<Vec<u8>>().as_slice()).is_none());
    }

    proptest! {
        /// Any key packs (or not) and comes back exactly; `eq` agrees with
        /// byte equality against any other key.
        #[test]
        fn round_trip(keys in prop::collection::vec(prop::collection::vec(prop::sample::select(&b"ab:-0159fAF-x"[..]), 0..50), 1..40)) {
            let mut p = Prefixes::default();
            let mut forms = Vec::new();
            for k in &keys {
                round(&mut p, k);
                let mut out = Vec::new();
                if p.pack(k, &mut out) {
                    forms.push((k.clone(), out));
                }
            }
            for (k, f) in &forms {
                for other in &keys {
                    prop_assert_eq!(p.eq(f, other), k == other);
                }
            }
        }

        #[test]
        fn unpack_never_panics(b in prop::collection::vec(any::<u8>(), 0..40)) {
            let mut p = Prefixes::default();
            let mut out = Vec::new();
            p.pack(b"session:00ff", &mut out);
            let mut back = Vec::new();
            let ok = p.unpack(&b, &mut back).is_some();
            if ok {
                prop_assert!(p.eq(&b, &back));
            }
        }
    }
}
