//! Keys of common shapes kept packed: a prefix shared by many keys stored
//! once, then a run of hex or decimal digits (or a UUID) at half a byte a
//! digit, giving back exactly the same bytes.
//!
//! ```text
//!   | prefix id u8 | form u8 | count varint (if bits 3-7 are 0) | nibbles, two a byte, high first |
//!   form: bit 0 upper-case hex letters (A-F), else lower (digits have no case)
//!         bit 1 odd number of digits (the last byte's low nibble is 0)
//!         bit 2 UUID: 32 digits shown as 8-4-4-4-12 with hyphens
//!         bits 3-7 bytes of nibbles, 1..=31; 0: more, their count follows
//!                  as a LEB128 varint
//! ```
//!
//! `session:` + 40 hex digits (48 bytes) becomes 22 bytes; `key:123456`
//! becomes 5. The form ends itself (`packed_len`), so the blob that holds
//! it stores no key length: tails of up to 62 digits (any hex digest up to
//! SHA-256's 64, UUIDs, decimal ids) need nothing more than the form byte. The tail is the longest run at the end of the key of digits
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
//!
//! Number keys: a key that ends in a decimal number written the one way
//! (no leading zero, at most 19 digits) can also be kept as its prefix's
//! id (0-7, ids the first eight prefixes got) and the number, as a LEB128
//! varint (`number`, `unpack_number`, `eq_number`): `key:123456` is 3
//! bytes and an id. `blob.rs` uses that form only for blobs under 16
//! bytes, where it finds the id room in the blob's flags and saves the key
//! length byte; there, nibbles would cost the same 3 bytes for the digits
//! and 2 more for the id and form.

use std::collections::HashMap;

use super::{put_varint, read_varint, same};

const UPPER: u8 = 1;
const ODD: u8 = 2;
const UUID: u8 = 4;
/// Bits 3-7 of the form: bytes of nibbles (0: a varint count follows).
const COUNT_SHIFT: u8 = 3;
/// Most nibble bytes the form byte can count.
const MAX_FORM_COUNT: usize = 31;
/// Longest prefix kept in the table.
const MAX_PREFIX: usize = 64;
/// Most prefixes (ids are one byte).
const MAX_PREFIXES: usize = 255;
/// Prefix ids a number key can name (3 bits in the blob's flags).
const NUMBER_IDS: usize = 8;
/// Most digits of a number key's tail (any 19 digits fit in a u64).
const MAX_NUMBER_DIGITS: usize = 19;
/// Hyphen positions of a UUID's text.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

const LOWER_DIGITS: &[u8; 16] = b"0123456789abcdef";
const UPPER_DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// `key` past `prefix`, if it starts with it (compared a word at a time:
/// a lookup compares one on every tag match).
#[inline]
fn strip_prefix<'a>(key: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let (head, tail) = key.split_at_checked(prefix.len())?;
    same(head, prefix).then_some(tail)
}

/// The shared prefixes of one keyspace.
#[derive(Debug, Default, Clone)]
pub struct Prefixes {
    list: Vec<Vec<u8>>,
    ids: HashMap<Vec<u8>, u8>,
    /// The id the last write found (a hint: `id_of` compares its prefix
    /// first, so a run of keys with one prefix skips hashing it).
    last: usize,
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

/// The two digits of each byte, high nibble first, as the little-endian
/// u16 of their text: [lower-case letters, upper-case letters].
static HEX_PAIRS: [[u16; 256]; 2] = {
    let mut t = [[0u16; 256]; 2];
    let mut b = 0;
    while b < 256 {
        t[0][b] = u16::from_le_bytes([LOWER_DIGITS[b >> 4], LOWER_DIGITS[b & 15]]);
        t[1][b] = u16::from_le_bytes([UPPER_DIGITS[b >> 4], UPPER_DIGITS[b & 15]]);
        b += 1;
    }
    t
};

/// The hex text of four bytes (in memory order, high digit first), as the
/// little-endian word of its eight characters: each byte spread to two
/// bytes, one digit in each, then made ASCII with no branch (a digit above
/// 9 gets the letters' offset).
#[inline]
fn hex_text(b: u32, upper: bool) -> u64 {
    let mut x = u64::from(b);
    x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
    x = (x | x << 8) & 0x00FF_00FF_00FF_00FF;
    // Each byte's high digit in the low byte of its pair, its low digit above.
    let n = ((x >> 4) & 0x000F_000F_000F_000F) | ((x & 0x000F_000F_000F_000F) << 8);
    let letter = ((n + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    n + 0x3030_3030_3030_3030 + letter * if upper { 7 } else { 39 }
}

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

/// Bytes of the count varint `pack` writes for `n` nibble bytes (none up
/// to 31: the form byte holds those).
fn count_bytes(n: usize) -> usize {
    if n <= MAX_FORM_COUNT { 0 } else { (usize::BITS - n.leading_zeros()).div_ceil(7) as usize }
}

/// Length of the packed key at the start of `b` (prefix id, form, count,
/// nibbles), read from its form: the blob that holds a packed key finds
/// its end so. None if `b` is too short for what the form says. `b` may
/// go on past the key.
pub fn packed_len(b: &[u8]) -> Option<usize> {
    let &form = b.get(1)?;
    let len = match usize::from(form >> COUNT_SHIFT) {
        0 => {
            let (n, used) = read_varint(&b[2..])?;
            (2 + used).checked_add(n)?
        }
        n => 2 + n,
    };
    (len <= b.len()).then_some(len)
}

/// Splits a packed key into prefix id, form (bits 0-2) and nibble bytes.
/// None unless `packed` is exactly one packed key with its count written
/// as `pack` writes it (in the form byte up to 31, else the shortest varint).
fn split(packed: &[u8]) -> Option<(u8, u8, &[u8])> {
    let [id, form, rest @ ..] = packed else { return None };
    let (n, bytes) = match usize::from(form >> COUNT_SHIFT) {
        0 => {
            let (n, used) = read_varint(rest)?;
            // `pack`'s count, or `write_widened`'s one-byte count.
            if count_bytes(n) != used && !(used == 1 && (1..=MAX_FORM_COUNT).contains(&n)) {
                return None;
            }
            (n, &rest[used..])
        }
        n => (n, rest),
    };
    (bytes.len() == n).then_some((*id, form & (UPPER | ODD | UUID), bytes))
}

/// True if `packed` is the form `pack` writes (not `write_widened`'s).
pub fn is_canonical(packed: &[u8]) -> bool {
    packed.len() < 2 || packed[1] >> COUNT_SHIFT != 0 || packed.len() > 2 + 1 + MAX_FORM_COUNT
}

/// Writes `packed` (as `pack` wrote it, with at most 31 nibble bytes) into
/// `out` one byte longer: its count as a one-byte varint instead of in the
/// form byte. The same key, for a blob that needs a byte more to be padded
/// to its slab class. Returns the length written.
pub fn write_widened(packed: &[u8], out: &mut [u8]) -> usize {
    let (id, form) = (packed[0], packed[1]);
    debug_assert!(form >> COUNT_SHIFT != 0, "only a count in the form byte widens");
    out[0] = id;
    out[1] = form & (UPPER | ODD | UUID);
    out[2] = form >> COUNT_SHIFT;
    out[3..packed.len() + 1].copy_from_slice(&packed[2..]);
    packed.len() + 1
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

/// The number a canonical decimal tail stands for: 1-19 ASCII digits, no
/// leading zero unless it is "0". None otherwise.
fn parse_number(t: &[u8]) -> Option<u64> {
    if t.is_empty() || t.len() > MAX_NUMBER_DIGITS || (t[0] == b'0' && t.len() > 1) {
        return None;
    }
    t.iter().try_fold(0u64, |n, &c| c.is_ascii_digit().then(|| n * 10 + u64::from(c - b'0')))
}

/// Decodes a LEB128 varint that is exactly `b`, written the shortest way
/// (no trailing zero group) and within 64 bits. None otherwise.
pub fn read_number(b: &[u8]) -> Option<u64> {
    let (&last, _) = b.split_last()?;
    if b.len() > 10 || last >= 0x80 || (last == 0 && b.len() > 1) || b[..b.len() - 1].iter().any(|&c| c < 0x80) {
        return None;
    }
    let mut n = 0u64;
    for (i, &c) in b.iter().enumerate() {
        let part = u64::from(c & 0x7F);
        if i == 9 && part > 1 {
            return None;
        }
        n |= part << (7 * i);
    }
    Some(n)
}

/// Splits `key` into its prefix and the number its decimal tail stands for,
/// if it has one (see the header). The prefix never ends in a digit.
pub fn number_parts(key: &[u8]) -> Option<(&[u8], u64)> {
    let digits = key.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    let (prefix, tail) = key.split_at(key.len() - digits);
    Some((prefix, parse_number(tail)?)).filter(|_| prefix.len() <= MAX_PREFIX)
}

impl Prefixes {
    /// The id of a known `prefix`. Prefixes are never removed, so the
    /// last hit stays valid while its bytes match.
    fn id_of(&mut self, prefix: &[u8]) -> Option<u8> {
        if self.list.get(self.last).is_some_and(|p| p[..] == *prefix) {
            return Some(self.last as u8);
        }
        let id = *self.ids.get(prefix)?;
        self.last = usize::from(id);
        Some(id)
    }

    /// The id of `prefix` for a number key: its id if it has one below 8,
    /// else a new one if fewer than 8 prefixes are known. None otherwise.
    pub fn number_id(&mut self, prefix: &[u8]) -> Option<u8> {
        match self.id_of(prefix) {
            Some(id) => (usize::from(id) < NUMBER_IDS).then_some(id),
            None if self.list.len() < NUMBER_IDS && prefix.len() <= MAX_PREFIX => {
                let id = self.list.len() as u8;
                self.list.push(prefix.to_vec());
                self.ids.insert(prefix.to_vec(), id);
                Some(id)
            }
            None => None,
        }
    }

    /// Appends the key of number-key parts `id` and `bytes` (the number's
    /// varint) to `out`. None if malformed (an unknown or too high id, a
    /// varint not written the shortest way), so stored bytes never misread.
    pub fn unpack_number(&self, id: u8, bytes: &[u8], out: &mut Vec<u8>) -> Option<()> {
        let prefix = self.list.get(usize::from(id)).filter(|_| usize::from(id) < NUMBER_IDS)?;
        let n = read_number(bytes)?;
        // 20 digits only from a number no 19-digit tail gives.
        let digits = super::digit_count(n);
        if digits > MAX_NUMBER_DIGITS {
            return None;
        }
        out.extend_from_slice(prefix);
        let at = out.len();
        out.resize(at + digits, 0);
        super::write_digits(&mut out[at..], n);
        Some(())
    }

    /// True if number-key parts `id` and `bytes` stand for `key` (no
    /// allocation: the probe's tail is parsed and the numbers compared).
    pub fn eq_number(&self, id: u8, bytes: &[u8], key: &[u8]) -> bool {
        let Some(prefix) = self.list.get(usize::from(id)) else { return false };
        let Some(tail) = strip_prefix(key, prefix) else { return false };
        usize::from(id) < NUMBER_IDS && parse_number(tail).is_some_and(|n| read_number(bytes) == Some(n))
    }

    /// Writes the packed form of `key` into `out` (cleared first) and
    /// returns true, if the key has a digit tail, its prefix has (or gets)
    /// an id, and the form is shorter than the key.
    pub fn pack(&mut self, key: &[u8], out: &mut Vec<u8>) -> bool {
        self.pack_as(key, out, true)
    }

    /// `pack` with the prefixes known already: a key whose prefix has no
    /// id is left alone (false), so a copy of a keyspace's prefixes packs
    /// on another thread exactly as the keyspace would (ids are never
    /// reused) without giving out ids of its own.
    pub fn pack_known(&mut self, key: &[u8], out: &mut Vec<u8>) -> bool {
        self.pack_as(key, out, false)
    }

    /// The number of prefixes known (they are only ever added).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True if no prefix is known.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn pack_as(&mut self, key: &[u8], out: &mut Vec<u8>, add: bool) -> bool {
        let (lo, up) = (run_len(key, false), run_len(key, true));
        let mut upper = up > lo;
        let mut n = lo.max(up);
        let t = &key[key.len().saturating_sub(36)..];
        let uuid_lower = is_uuid(t, false);
        let uuid = uuid_lower || is_uuid(t, true);
        if uuid {
            upper = !uuid_lower;
            n = 36;
        } else if n < 2 {
            return false;
        }
        let mut form = if upper { UPPER } else { 0 };
        if uuid {
            form |= UUID;
        }
        let (prefix, tail) = key.split_at(key.len() - n);
        let digits = if uuid { 32 } else { n };
        let nbytes = digits.div_ceil(2);
        if 2 + count_bytes(nbytes) + nbytes >= key.len() || prefix.len() > MAX_PREFIX {
            return false;
        }
        let id = match self.id_of(prefix) {
            Some(id) => id,
            None if add && self.list.len() < MAX_PREFIXES => {
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
        if nbytes <= MAX_FORM_COUNT {
            out.push(form | (nbytes as u8) << COUNT_SHIFT);
        } else {
            out.push(form);
            put_varint(out, nbytes);
        }
        if uuid {
            let mut half = None;
            for &c in tail.iter().filter(|&&c| c != b'-') {
                match half.take() {
                    None => half = Some(nibble(c) << 4),
                    Some(h) => out.push(h | nibble(c)),
                }
            }
        } else {
            // Two digits a byte, a branch-free loop (most keys take this).
            let pairs = tail.chunks_exact(2);
            let last = pairs.remainder().first().map(|&c| nibble(c) << 4);
            out.extend(pairs.map(|p| nibble(p[0]) << 4 | nibble(p[1])));
            out.extend(last);
        }
        true
    }

    /// Appends the key `packed` stands for to `out`. None if malformed.
    pub fn unpack(&self, packed: &[u8], out: &mut Vec<u8>) -> Option<()> {
        let (id, form, bytes) = split(packed)?;
        let prefix = self.list.get(id as usize)?;
        let chars = tail_chars(form, bytes)?;
        out.extend_from_slice(prefix);
        out.extend(chars);
        Some(())
    }

    /// True if the packed key `packed` is `key` (no allocation; a plain
    /// loop, as lookups run it on every tag match).
    pub fn eq(&self, packed: &[u8], key: &[u8]) -> bool {
        let Some((id, form, bytes)) = split(packed) else { return false };
        let Some(prefix) = self.list.get(id as usize) else { return false };
        let Some(tail) = strip_prefix(key, prefix) else { return false };
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
        if !uuid {
            // The text each byte's two digits have in the key's case (one
            // load), against the key's two bytes: no branch per digit (key
            // digits are random, so such a branch mispredicts). A pair
            // matches exactly when both characters are digits of that case
            // with those values: the text of a packed key is unique.
            // Four bytes at a time: their text, made in a register, against
            // eight of the key's; then the pairs left. The first difference
            // returns: a tag match is nearly always the key, so the branch
            // is predicted (and the loop stays scalar: vectorized, its
            // set-up cost more than the five steps of a session key).
            let upper = form & UPPER != 0;
            let whole = (bytes.len() - usize::from(odd)) / 4;
            let (b4, t8) = (&bytes[..4 * whole], &tail[..8 * whole]);
            for i in 0..whole {
                let b = u32::from_le_bytes(b4[4 * i..4 * i + 4].try_into().expect("4 bytes"));
                if hex_text(b, upper) != u64::from_le_bytes(t8[8 * i..8 * i + 8].try_into().expect("8 bytes")) {
                    return false;
                }
            }
            let mut ok = true;
            let pairs = &HEX_PAIRS[usize::from(upper)];
            let two = tail[8 * whole..].chunks_exact(2);
            let last = two.remainder().first().copied();
            for (p, &b) in two.zip(&bytes[4 * whole..]) {
                ok &= u16::from_le_bytes([p[0], p[1]]) == pairs[b as usize];
            }
            if let Some(c) = last {
                // The last byte's high nibble; its low one is 0 (checked).
                ok &= pairs[bytes[bytes.len() - 1] as usize].to_le_bytes()[0] == c;
            }
            return ok;
        }
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
        // The form ends itself, whatever follows it in a blob.
        assert_eq!(packed_len(&out), Some(out.len()));
        let mut more = out.clone();
        more.extend_from_slice(&[0x80, 0xff, 7]);
        assert_eq!(packed_len(&more), Some(out.len()));
        assert_eq!(packed_len(&out[..out.len() - 1]), None);
        Some(out.len())
    }

    #[test]
    fn long_tails_count_in_a_varint() {
        let mut p = Prefixes::default();
        // 62 digits: 31 bytes, counted in the form byte; 63 and 64 (a
        // SHA-256 in hex): 32 bytes and a 1-byte count; 300: 150 and 2.
        for (digits, len) in [(62, 33), (63, 35), (64, 35), (300, 2 + 2 + 150)] {
            let key: Vec<u8> = b"sha:".iter().copied().chain((0..digits).map(|i| b"0123456789abcdef"[i * 7 % 16])).collect();
            assert_eq!(round(&mut p, &key), Some(len), "{digits} digits");
        }
        // A count written as neither `pack` nor `write_widened` writes it
        // is refused; the widened form is the same key.
        let mut out = Vec::new();
        assert!(p.pack(b"sha:0123456789", &mut out));
        let (id, form) = (out[0], out[1] & 7);
        let two_byte_5: Vec<u8> = [id, form, 0x85, 0].iter().chain(&out[2..]).copied().collect();
        let mut back = Vec::new();
        assert_eq!(p.unpack(&two_byte_5, &mut back), None);
        assert!(!p.eq(&two_byte_5, b"sha:0123456789"));
        let mut widened = vec![0; out.len() + 1];
        assert_eq!(write_widened(&out, &mut widened), out.len() + 1);
        assert_eq!(widened[..3], [id, form, 5]);
        assert!(!is_canonical(&widened) && is_canonical(&out));
        assert_eq!(packed_len(&widened), Some(widened.len()));
        p.unpack(&widened, &mut back).expect("widened unpacks");
        assert_eq!(back, b"sha:0123456789");
        assert!(p.eq(&widened, b"sha:0123456789"));
        let mut wrong = out.clone();
        wrong[1] += 1 << COUNT_SHIFT;
        assert_eq!(p.unpack(&wrong, &mut back), None);
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

    /// Packs `key` as a number key if it can be; checks that it comes back.
    fn number(p: &mut Prefixes, key: &[u8]) -> Option<(u8, Vec<u8>)> {
        let (prefix, n) = number_parts(key)?;
        let id = p.number_id(prefix)?;
        let mut bytes = [0u8; 10];
        let len = crate::blob::tests_varint(&mut bytes, n);
        let bytes = bytes[..len].to_vec();
        let mut back = Vec::new();
        p.unpack_number(id, &bytes, &mut back).unwrap();
        assert_eq!(back, key);
        assert!(p.eq_number(id, &bytes, key));
        Some((id, bytes))
    }

    #[test]
    fn number_keys() {
        let mut p = Prefixes::default();
        assert_eq!(number(&mut p, b"key:123456"), Some((0, vec![0xc0, 0xc4, 0x07])));
        assert_eq!(number(&mut p, b"key:0"), Some((0, vec![0])));
        assert_eq!(number(&mut p, b"7"), Some((1, vec![7])), "an empty prefix");
        assert_eq!(number(&mut p, b"key:9999999999999999999").map(|(_, b)| b.len()), Some(10));
        assert_eq!(number(&mut p, b"key:10000000000000000000"), None, "20 digits");
        assert_eq!(number(&mut p, b"key:0123"), None, "a leading zero");
        assert_eq!(number(&mut p, b"key:"), None, "no digits");
        assert_eq!(number(&mut p, b"user:1000:cart"), None);
        let (id, bytes) = number(&mut p, b"key:120").unwrap();
        for other in [&b"key:12"[..], b"key:0120", b"key:1200", b"kez:120", b"key:120 ", b"key:+120", b"key120", b"7"] {
            assert!(!p.eq_number(id, &bytes, other), "{:?}", std::str::from_utf8(other));
        }
        // Ids 0-7 only; a prefix that got a higher id from `pack` has none.
        for i in 2..8 {
            assert_eq!(number(&mut p, format!("p{i}:1").as_bytes()).map(|(id, _)| id), Some(i));
        }
        assert_eq!(number(&mut p, b"p8:1"), None);
        assert_eq!(number(&mut p, b"key:5").map(|(id, _)| id), Some(0));
        // Malformed parts are refused, never misread.
        let mut out = Vec::new();
        for (id, bytes) in [(0u8, &[][..]), (0, &[0x80][..]), (0, &[0x80, 0x00][..]), (8, &[1][..]), (0, &[0xff; 10][..]), (0, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01][..])] {
            assert!(p.unpack_number(id, bytes, &mut out).is_none(), "{id} {bytes:?}");
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
        fn round_trip(keys in prop::collection::vec(prop::collection::vec(prop::sample::select(&b"ab:-0159fAF-x"[..]), 0..150), 1..40)) {
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

        /// `eq` against keys one character from a packed key's (any byte,
        /// a digit of the other case, a digit changed) is byte equality.
        #[test]
        fn eq_near_misses(n in 2usize..48, seed in any::<u64>(), upper in any::<bool>(), at in any::<prop::sample::Index>(), to in any::<u8>(), how in 0u8..3) {
            let digits: &[u8] = if upper { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
            let mut x = seed;
            let key: Vec<u8> = b"user:".iter().copied().chain((0..n).map(|_| { x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); digits[(x >> 60) as usize] })).collect();
            let mut p = Prefixes::default();
            let mut f = Vec::new();
            prop_assume!(p.pack(&key, &mut f));
            prop_assert!(p.eq(&f, &key));
            let mut other = key.clone();
            let i = 5 + at.index(n);
            other[i] = match how {
                0 => to,
                1 => other[i].to_ascii_lowercase() ^ if upper { 0 } else { 0x20 },
                _ => digits[usize::from(to % 16)],
            };
            prop_assert_eq!(p.eq(&f, &other), other == key, "{}", String::from_utf8_lossy(&other));
        }

        /// Any key with a decimal tail comes back from its number form;
        /// `eq_number` agrees with byte equality against any other key.
        #[test]
        fn number_round_trip(keys in prop::collection::vec(prop::collection::vec(prop::sample::select(&b"ab:0019"[..]), 0..24), 1..40)) {
            let mut p = Prefixes::default();
            let forms: Vec<_> = keys.iter().filter_map(|k| number(&mut p, k).map(|f| (k, f))).collect();
            for (k, (id, bytes)) in &forms {
                for other in &keys {
                    prop_assert_eq!(p.eq_number(*id, bytes, other), *k == other);
                }
            }
        }

        /// Arbitrary number-key parts decode or are refused, never panic;
        /// what decodes compares equal to itself.
        #[test]
        fn unpack_number_never_panics(id in 0u8..10, b in prop::collection::vec(any::<u8>(), 0..12)) {
            let mut p = Prefixes::default();
            p.number_id(b"key:");
            p.number_id(b"");
            let mut back = Vec::new();
            if p.unpack_number(id, &b, &mut back).is_some() {
                prop_assert!(p.eq_number(id, &b, &back));
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
                prop_assert_eq!(packed_len(&b), Some(b.len()), "what unpacks ends where it says");
            }
            prop_assert!(packed_len(&b).is_none_or(|n| n <= b.len()));
        }
    }
}
