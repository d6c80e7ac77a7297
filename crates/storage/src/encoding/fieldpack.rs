//! Fieldpack: hash fields, their values and optional deadlines packed back
//! to back in one byte buffer, searched by a linear walk.
//!
//! It is both the whole of a small hash and one bucket of a large one
//! (`fieldtable`), so a hash changes shape without re-encoding a byte.
//!
//! ```text
//! buffer: [ caller's header: `base` bytes ][ entry ][ entry ] ...
//!
//! entry:  hdr [deadline: 6 bytes LE]? [field len: LEB128]? field value
//!         (a set's member entry, `Members`, ends at the field: no value)
//!   hdr   bit 7: a deadline follows (the field has a TTL)
//!         bits 0-6: field length 0..=126, or 127 = LEB128 length follows
//!   deadline  Unix ms, 48 bits (Redis's own limit for field TTLs)
//! value:  tag [payload]
//!   0x00..=0x7f  the integer 0..=127, no payload
//!   0x80..=0xbf  bytes, length = tag & 0x3f (0..=63), then the bytes
//!   0xc0 i8 | 0xc1 i16 LE | 0xc2 i32 LE | 0xc3 i64 LE
//!   0xc4         bytes, LEB128 length, then the bytes
//! ```
//!
//! A 24-byte field with value "1" costs 26 bytes; a TTL adds 6, only to the
//! fields that have one. The layout is a type parameter: a hash's buffers
//! are `Fields` (every entry has a value), a set's are `Members` (no value
//! and no tag byte: a 16-byte member is 17 bytes), so a buffer is always
//! read with the layout it was written in. Integers are kept only when the bytes are the
//! canonical decimal form, so values read back byte-exact.
//!
//! Invariants: entries are well formed and fields are unique within a
//! buffer (callers check before adding). Buffers are only ever built by
//! this module, so a malformed one is a bug and decoding panics.
//!
//! Complexity: lookup, update and delete are O(buffer length); a delete or
//! a size-changing update moves the tail once. Capacity grows by allocator
//! size classes (`reserve_class`), never by doubling.

use super::{put_varint, reserve_class, shrink_class};
use crate::strref::{parse_canonical_i64, StrRef};

const TTL_BIT: u8 = 0x80;
const LONG_FIELD: u8 = 0x7f;
const DEADLINE_LEN: usize = 6;

/// The largest deadline an entry can hold: 2^48 - 1 ms (Redis rejects
/// larger field expiry times with "invalid expire time").
pub const MAX_DEADLINE: i64 = (1 << 48) - 1;

/// The entry layout of a buffer: `VALUES` says whether each entry carries a
/// value after its field. The functions of this module are its associated
/// functions.
#[derive(Debug, Clone, Copy)]
pub struct Layout<const VALUES: bool>;

/// A hash's entries: field, then value.
pub type Fields = Layout<true>;
/// A set's entries: the member alone (values passed in are empty).
pub type Members = Layout<false>;

/// One decoded entry, borrowed from its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Offset of the entry's first byte.
    pub start: usize,
    /// Offset just past the entry.
    pub end: usize,
    /// The field name.
    pub field: &'a [u8],
    /// The value.
    pub value: StrRef<'a>,
    /// Unix-ms deadline, if the field has a TTL.
    pub deadline: Option<i64>,
}

impl Entry<'_> {
    /// True unless the deadline has passed (a field is expired once its
    /// deadline is strictly before `now`, as in Redis).
    pub fn live(&self, now: i64) -> bool {
        self.deadline.is_none_or(|d| d >= now)
    }
}

/// The value as it will be stored: an integer when `bytes` is the
/// canonical decimal form of one.
pub fn classify(bytes: &[u8]) -> StrRef<'_> {
    match parse_canonical_i64(bytes) {
        Some(v) => StrRef::Int(v),
        None => StrRef::Bytes(bytes),
    }
}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// The LEB128 number at `p` and the offset past it.
pub(crate) fn get_varint(buf: &[u8], mut p: usize) -> (usize, usize) {
    let (mut n, mut shift) = (0usize, 0);
    loop {
        let b = buf[p];
        p += 1;
        n |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            return (n, p);
        }
        shift += 7;
    }
}

fn value_len(v: StrRef) -> usize {
    match v {
        StrRef::Int(0..=127) => 1,
        StrRef::Int(i) if i8::try_from(i).is_ok() => 2,
        StrRef::Int(i) if i16::try_from(i).is_ok() => 3,
        StrRef::Int(i) if i32::try_from(i).is_ok() => 5,
        StrRef::Int(_) => 9,
        StrRef::Bytes(b) if b.len() <= 63 => 1 + b.len(),
        StrRef::Bytes(b) => 1 + varint_len(b.len()) + b.len(),
    }
}

/// Appends a value: tag, then payload.
fn encode_value(out: &mut Vec<u8>, value: StrRef) {
    match value {
        StrRef::Int(i @ 0..=127) => out.push(i as u8),
        StrRef::Int(i) => {
            if let Ok(x) = i8::try_from(i) {
                out.push(0xc0);
                out.extend_from_slice(&x.to_le_bytes());
            } else if let Ok(x) = i16::try_from(i) {
                out.push(0xc1);
                out.extend_from_slice(&x.to_le_bytes());
            } else if let Ok(x) = i32::try_from(i) {
                out.push(0xc2);
                out.extend_from_slice(&x.to_le_bytes());
            } else {
                out.push(0xc3);
                out.extend_from_slice(&i.to_le_bytes());
            }
        }
        StrRef::Bytes(b) => {
            if b.len() <= 63 {
                out.push(0x80 | b.len() as u8);
            } else {
                out.push(0xc4);
                put_varint(out, b.len());
            }
            out.extend_from_slice(b);
        }
    }
}

fn int_at<const N: usize>(buf: &[u8], p: usize) -> [u8; N] {
    buf[p..p + N].try_into().expect("slice of N bytes")
}

/// Decodes the value whose tag is at `p`; returns it and the offset past it.
fn decode_value(buf: &[u8], mut p: usize) -> (StrRef<'_>, usize) {
    let tag = buf[p];
    p += 1;
    let value = match tag {
        0x00..=0x7f => StrRef::Int(tag as i64),
        0x80..=0xbf => {
            let n = (tag & 0x3f) as usize;
            p += n;
            StrRef::Bytes(&buf[p - n..p])
        }
        0xc0 => {
            p += 1;
            StrRef::Int(i8::from_le_bytes(int_at(buf, p - 1)) as i64)
        }
        0xc1 => {
            p += 2;
            StrRef::Int(i16::from_le_bytes(int_at(buf, p - 2)) as i64)
        }
        0xc2 => {
            p += 4;
            StrRef::Int(i32::from_le_bytes(int_at(buf, p - 4)) as i64)
        }
        0xc3 => {
            p += 8;
            StrRef::Int(i64::from_le_bytes(int_at(buf, p - 8)))
        }
        0xc4 => {
            let (n, q) = get_varint(buf, p);
            p = q + n;
            StrRef::Bytes(&buf[q..p])
        }
        _ => panic!("fieldpack: bad value tag {tag:#x} at {}", p - 1),
    };
    (value, p)
}

/// Bytes taken by the value whose tag is at `p` (tag included).
fn value_size(buf: &[u8], p: usize) -> usize {
    match buf[p] {
        0x00..=0x7f => 1,
        t @ 0x80..=0xbf => 1 + (t & 0x3f) as usize,
        0xc0 => 2,
        0xc1 => 3,
        0xc2 => 5,
        0xc3 => 9,
        _ => {
            let (n, q) = get_varint(buf, p + 1);
            q - p + n
        }
    }
}

/// The field's offset and length in the entry starting at `pos`.
fn field_at(buf: &[u8], pos: usize) -> (usize, usize) {
    let hdr = buf[pos];
    let p = pos + 1 + if hdr & TTL_BIT != 0 { DEADLINE_LEN } else { 0 };
    match hdr & !TTL_BIT {
        LONG_FIELD => {
            let (n, q) = get_varint(buf, p);
            (q, n)
        }
        n => (p, n as usize),
    }
}

/// Walks the entries of a buffer from `pos`.
#[derive(Debug, Clone)]
pub struct Iter<'a, const VALUES: bool> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a, const V: bool> Iterator for Iter<'a, V> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let e = Layout::<V>::decode(self.buf, self.pos);
        self.pos = e.end;
        Some(e)
    }
}

impl<const V: bool> Layout<V> {
    /// Encoded size of an entry.
    pub fn entry_len(field: &[u8], value: StrRef, has_deadline: bool) -> usize {
        let flen = if field.len() < LONG_FIELD as usize { 0 } else { varint_len(field.len()) };
        1 + if has_deadline { DEADLINE_LEN } else { 0 } + flen + field.len() + if V { value_len(value) } else { 0 }
    }

    /// Appends an entry (the caller has reserved room, or accepts Vec growth).
    fn encode(out: &mut Vec<u8>, field: &[u8], value: StrRef, deadline: Option<i64>) {
        debug_assert!(V || value == StrRef::Bytes(b""), "a member entry has no value");
        let long = field.len() >= LONG_FIELD as usize;
        let mut hdr = if long { LONG_FIELD } else { field.len() as u8 };
        if deadline.is_some() {
            hdr |= TTL_BIT;
        }
        out.push(hdr);
        if let Some(d) = deadline {
            out.extend_from_slice(&(d as u64).to_le_bytes()[..DEADLINE_LEN]);
        }
        if long {
            put_varint(out, field.len());
        }
        out.extend_from_slice(field);
        if V {
            encode_value(out, value);
        }
    }

    /// Decodes the entry starting at `pos` (a member entry's value is empty
    /// bytes).
    ///
    /// Panics: if the buffer is malformed (a broken invariant).
    pub fn decode(buf: &[u8], pos: usize) -> Entry<'_> {
        let deadline = (buf[pos] & TTL_BIT != 0).then(|| {
            let mut d = [0u8; 8];
            d[..DEADLINE_LEN].copy_from_slice(&buf[pos + 1..pos + 1 + DEADLINE_LEN]);
            u64::from_le_bytes(d) as i64
        });
        let (f, flen) = field_at(buf, pos);
        let field = &buf[f..f + flen];
        let (value, end) = if V { decode_value(buf, f + flen) } else { (StrRef::Bytes(&[]), f + flen) };
        Entry { start: pos, end, field, value, deadline }
    }

    /// The entries of `buf` after a `base`-byte header.
    pub fn iter(buf: &[u8], base: usize) -> Iter<'_, V> {
        Iter { buf, pos: base }
    }

    /// The entry for `field`, expired or not. The walk reads only headers and
    /// lengths; values are decoded for the match alone.
    pub fn find<'a>(buf: &'a [u8], base: usize, field: &[u8]) -> Option<Entry<'a>> {
        let mut p = base;
        while p < buf.len() {
            let (q, flen) = field_at(buf, p);
            if flen == field.len() && buf[q..q + flen] == *field {
                return Some(Self::decode(buf, p));
            }
            p = q + flen + if V { value_size(buf, q + flen) } else { 0 };
        }
        None
    }

    /// The width every field of `buf` has, when all of its entries (at
    /// least one) have no deadline and a field of one length in 1..=`max`;
    /// such entries can be written without their header byte
    /// (`strip_headers`).
    pub fn fixed_width(buf: &[u8], base: usize, max: usize) -> Option<usize> {
        let mut width = None;
        let mut p = base;
        while p < buf.len() {
            let hdr = buf[p];
            let w = hdr as usize;
            if hdr & TTL_BIT != 0 || w == 0 || w > max || w >= LONG_FIELD as usize || width.is_some_and(|x| x != w) {
                return None;
            }
            width = Some(w);
            p += 1 + w + if V { value_size(buf, p + 1 + w) } else { 0 };
        }
        width
    }

    /// Appends the entries of `buf` (after `base`) to `out` without their
    /// header bytes; `width` is what `fixed_width` returned for them.
    pub fn strip_headers(buf: &[u8], base: usize, width: usize, out: &mut Vec<u8>) {
        let mut p = base;
        while p < buf.len() {
            debug_assert_eq!(buf[p] as usize, width, "an entry of another width");
            let end = p + 1 + width + if V { value_size(buf, p + 1 + width) } else { 0 };
            out.extend_from_slice(&buf[p + 1..end]);
            p = end;
        }
    }

    /// How many entries `strip_headers` wrote into `body`.
    pub fn stripped_count(body: &[u8], width: usize) -> usize {
        let (mut p, mut n) = (0, 0);
        while p < body.len() {
            p += width + if V { value_size(body, p + width) } else { 0 };
            n += 1;
        }
        n
    }

    /// Undoes `strip_headers`: appends the entries `body` holds, each with
    /// its header byte again (a `width`-byte field, no deadline).
    ///
    /// Panics: if `body` is not what `strip_headers` wrote.
    pub fn restore_headers(body: &[u8], width: usize, out: &mut Vec<u8>) {
        assert!((1..LONG_FIELD as usize).contains(&width), "fieldpack: bad fixed width {width}");
        let mut p = 0;
        while p < body.len() {
            let end = p + width + if V { value_size(body, p + width) } else { 0 };
            out.push(width as u8);
            out.extend_from_slice(&body[p..end]);
            p = end;
        }
        assert_eq!(p, body.len(), "fieldpack: a stripped entry runs past its buffer");
    }

    /// The earliest deadline in `buf`.
    pub fn min_deadline(buf: &[u8], base: usize) -> Option<i64> {
        Self::iter(buf, base).filter_map(|e| e.deadline).min()
    }

    /// Sets `field` to `value` with no deadline, in place if it exists (order
    /// is kept, as Redis keeps a listpack's). Returns the old entry's deadline
    /// (`Some(None)`: it had none), or `None` if the field is new (appended).
    pub fn upsert(buf: &mut Vec<u8>, base: usize, field: &[u8], value: StrRef) -> Option<Option<i64>> {
        let new_len = Self::entry_len(field, value, false);
        match Self::find(buf, base, field).map(|e| (e.start, e.end, e.deadline)) {
            None => {
                reserve_class(buf, new_len);
                Self::encode(buf, field, value, None);
                None
            }
            Some((start, end, old)) => {
                let mut tmp = Vec::with_capacity(new_len);
                Self::encode(&mut tmp, field, value, None);
                reserve_class(buf, new_len.saturating_sub(end - start));
                buf.splice(start..end, tmp);
                shrink_class(buf);
                Some(old)
            }
        }
    }

    /// Appends an entry known to be absent (used when moving raw entries is
    /// not possible, e.g. in tests and loaders).
    pub fn push(buf: &mut Vec<u8>, field: &[u8], value: StrRef, deadline: Option<i64>) {
        reserve_class(buf, Self::entry_len(field, value, deadline.is_some()));
        Self::encode(buf, field, value, deadline);
    }

    /// Removes the entry spanning `start..end`.
    pub fn remove_at(buf: &mut Vec<u8>, start: usize, end: usize) {
        buf.drain(start..end);
        shrink_class(buf);
    }

    /// Removes `field`; returns its deadline (`Some(None)`: none), or `None`
    /// if absent.
    pub fn remove(buf: &mut Vec<u8>, base: usize, field: &[u8]) -> Option<Option<i64>> {
        let (start, end, dl) = Self::find(buf, base, field).map(|e| (e.start, e.end, e.deadline))?;
        Self::remove_at(buf, start, end);
        Some(dl)
    }

    /// Sets or clears the deadline of the entry starting at `start`.
    ///
    /// Panics: if `deadline` is outside `0..=MAX_DEADLINE`.
    pub fn set_deadline(buf: &mut Vec<u8>, start: usize, deadline: Option<i64>) {
        let has = buf[start] & TTL_BIT != 0;
        match deadline {
            Some(d) => {
                assert!((0..=MAX_DEADLINE).contains(&d), "field deadline out of range: {d}");
                let bytes = (d as u64).to_le_bytes();
                if !has {
                    reserve_class(buf, DEADLINE_LEN);
                    buf[start] |= TTL_BIT;
                    buf.splice(start + 1..start + 1, bytes[..DEADLINE_LEN].iter().copied());
                } else {
                    buf[start + 1..start + 1 + DEADLINE_LEN].copy_from_slice(&bytes[..DEADLINE_LEN]);
                }
            }
            None if has => {
                buf[start] &= !TTL_BIT;
                buf.drain(start + 1..start + 1 + DEADLINE_LEN);
                shrink_class(buf);
            }
            None => {}
        }
    }

    /// Keeps the entries for which `keep` (given the entry and its raw bytes)
    /// returns true, compacting in place (one pass, no allocation). Returns how
    /// many were dropped.
    pub fn retain(buf: &mut Vec<u8>, base: usize, mut keep: impl FnMut(&Entry, &[u8]) -> bool) -> usize {
        let (mut r, mut w, mut dropped) = (base, base, 0);
        while r < buf.len() {
            let (start, end, kept) = {
                let e = Self::decode(buf, r);
                (e.start, e.end, keep(&e, &buf[e.start..e.end]))
            };
            if kept {
                if w != start {
                    buf.copy_within(start..end, w);
                }
                w += end - start;
            } else {
                dropped += 1;
            }
            r = end;
        }
        buf.truncate(w);
        shrink_class(buf);
        dropped
    }

    /// Drops up to `max` entries whose deadline is before `now`, calling `f`
    /// with each one's field; returns how many went.
    pub fn retain_live(buf: &mut Vec<u8>, base: usize, now: i64, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut budget = max;
        Self::retain(buf, base, |e, _| {
            let due = budget > 0 && !e.live(now);
            if due {
                f(e.field);
                budget -= 1;
            }
            !due
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(field: &[u8], value: &[u8], deadline: Option<i64>) {
        let mut buf = vec![9u8; 2];
        let v = classify(value);
        Fields::push(&mut buf, field, v, deadline);
        assert_eq!(buf.len() - 2, Fields::entry_len(field, v, deadline.is_some()));
        let e = Fields::decode(&buf, 2);
        assert_eq!((e.field, e.value.to_vec(), e.deadline, e.end), (field, value.to_vec(), deadline, buf.len()));
    }

    #[test]
    fn encodings_roundtrip() {
        let long = vec![b'x'; 300];
        for v in [&b"0"[..], b"127", b"128", b"-1", b"-128", b"-129", b"32767", b"-32769", b"2147483648",
            b"-9223372036854775808", b"9223372036854775807", b"", b"007", b"-0", b"hello", &long[..63], &long[..64], &long] {
            for f in [&b""[..], b"f", &long[..126], &long[..127], &long] {
                roundtrip(f, v, None);
                roundtrip(f, v, Some(0));
                roundtrip(f, v, Some(MAX_DEADLINE));
            }
        }
    }

    #[test]
    fn fixed_width_entries_drop_their_headers_and_come_back() {
        let values: [&[u8]; 5] = [b"1", b"-70000", b"", b"\x82\xa1i\xce\x00\x01\x02\x03\xa1x\xce\x6b\x70\xa3\x80", &[b'v'; 200]];
        let mut buf = vec![9u8; 2];
        assert_eq!(Fields::fixed_width(&buf, 2, 63), None, "no entries, no width");
        for (i, v) in values.iter().enumerate() {
            Fields::push(&mut buf, &[i as u8; 18], classify(v), None);
        }
        assert_eq!(Fields::fixed_width(&buf, 2, 63), Some(18));
        assert_eq!(Fields::fixed_width(&buf, 2, 17), None, "wider than allowed");
        let mut body = Vec::new();
        Fields::strip_headers(&buf, 2, 18, &mut body);
        assert_eq!(body.len(), buf.len() - 2 - values.len());
        assert_eq!(Fields::stripped_count(&body, 18), values.len());
        let mut back = vec![9u8; 2];
        Fields::restore_headers(&body, 18, &mut back);
        assert_eq!(back, buf);
        // A field of another length, a deadline or an empty field: no width.
        let mut other = buf.clone();
        Fields::push(&mut other, b"short", StrRef::Int(1), None);
        assert_eq!(Fields::fixed_width(&other, 2, 63), None);
        let mut timed = buf.clone();
        Fields::set_deadline(&mut timed, 2, Some(5));
        assert_eq!(Fields::fixed_width(&timed, 2, 63), None);
        let mut empty = vec![9u8; 2];
        Fields::push(&mut empty, b"", StrRef::Int(1), None);
        assert_eq!(Fields::fixed_width(&empty, 2, 63), None);
        // Members: no value after the field.
        let mut m = Vec::new();
        for i in 0..4u8 {
            Members::push(&mut m, &[i; 16], StrRef::Bytes(b""), None);
        }
        assert_eq!(Members::fixed_width(&m, 0, 63), Some(16));
        let mut body = Vec::new();
        Members::strip_headers(&m, 0, 16, &mut body);
        assert_eq!(body.len(), 64);
        let mut back = Vec::new();
        Members::restore_headers(&body, 16, &mut back);
        assert_eq!(back, m);
    }

    #[test]
    fn member_entries_carry_no_value() {
        let long = vec![b'm'; 300];
        for f in [&b""[..], b"m", &long[..16], &long[..126], &long[..127], &long] {
            for deadline in [None, Some(0), Some(MAX_DEADLINE)] {
                let mut buf = vec![7u8; 3];
                Members::push(&mut buf, b"other", StrRef::Bytes(b""), None);
                let at = buf.len();
                Members::push(&mut buf, f, StrRef::Bytes(b""), deadline);
                assert_eq!(buf.len() - at, Members::entry_len(f, StrRef::Bytes(b""), deadline.is_some()));
                let e = Members::find(&buf, 3, f).expect("pushed");
                assert_eq!((e.start, e.end, e.field, e.value, e.deadline), (at, buf.len(), f, StrRef::Bytes(&b""[..]), deadline));
                assert_eq!(Members::iter(&buf, 3).count(), 2);
                assert_eq!(Members::remove(&mut buf, 3, b"other"), Some(None));
                assert_eq!(Members::iter(&buf, 3).map(|e| e.field).collect::<Vec<_>>(), [f]);
            }
        }
        // A 16-byte member is 17 bytes: header and member, no tag.
        assert_eq!(Members::entry_len(&[0u8; 16], StrRef::Bytes(b""), false), 17);
        assert_eq!(Fields::entry_len(&[0u8; 16], StrRef::Bytes(b""), false), 18);
    }

    #[test]
    fn sizes() {
        assert_eq!(Fields::entry_len(&[b'a'; 24], classify(b"1"), false), 26);
        assert_eq!(Fields::entry_len(&[b'a'; 8], classify(b"x"), true), 17);
        assert_eq!(Fields::entry_len(&[b'a'; 127], classify(b"1000"), false), 1 + 1 + 127 + 3);
    }

    #[test]
    fn upsert_remove_deadline() {
        let mut buf = vec![0u8];
        assert_eq!(Fields::upsert(&mut buf, 1, b"a", classify(b"1")), None);
        assert_eq!(Fields::upsert(&mut buf, 1, b"b", classify(b"two")), None);
        let start = Fields::find(&buf, 1, b"a").unwrap().start;
        Fields::set_deadline(&mut buf, start, Some(1000));
        assert_eq!(Fields::find(&buf, 1, b"a").unwrap().deadline, Some(1000));
        assert_eq!(Fields::min_deadline(&buf, 1), Some(1000));
        // In-place update keeps order and drops the TTL.
        assert_eq!(Fields::upsert(&mut buf, 1, b"a", classify(b"a longer value")), Some(Some(1000)));
        let fields: Vec<_> = Fields::iter(&buf, 1).map(|e| e.field.to_vec()).collect();
        assert_eq!(fields, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(Fields::min_deadline(&buf, 1), None);
        let start = Fields::find(&buf, 1, b"b").unwrap().start;
        Fields::set_deadline(&mut buf, start, Some(5));
        Fields::set_deadline(&mut buf, start, None);
        assert_eq!(Fields::find(&buf, 1, b"b").unwrap().value, StrRef::Bytes(b"two"));
        assert_eq!(Fields::remove(&mut buf, 1, b"a"), Some(None));
        assert_eq!(Fields::remove(&mut buf, 1, b"a"), None);
        assert_eq!(Fields::retain(&mut buf, 1, |_, _| false), 1);
        assert_eq!(buf, [0]);
    }
}
