//! `ZSet`: the value of a Redis sorted set — members ordered by (score,
//! member bytes), each member once.
//!
//! Two shapes over one packed entry format:
//!
//! ```text
//! entry:  [0xf3 deadline: 6 bytes LE]? score [member len: LEB128] member
//!   score tag  0x00..=0xef  the integer score 0..=239, no payload
//!              0xf0 i16 LE | 0xf1 i32 LE | 0xf2 f64 LE (any other score)
//!   0xf3       (densekv member TTL) the member's deadline in Unix ms, 48
//!              bits, before its score: 7 bytes on members with a TTL only
//!
//! Small:  Vec<u8> = [flags u8][count u16 LE][entry][entry]...
//!         sorted by (score, member); linear scan
//! Large:  Box<Large> =
//!         chunks: Vec<Chunk>   sorted runs of packed entries, each at most
//!                              CHUNK_ENTRIES entries / CHUNK_BYTES bytes;
//!                              chunk i's entries all sort before chunk i+1's;
//!                              each with its earliest member deadline
//!         fen:    Vec<u32>     Fenwick tree of chunk lengths (rank <-> chunk)
//!         index:  tags: Vec<u8> + ids: Vec<u16> (Vec<u32> past 65,536 chunks)
//!                              open addressing by member hash, linear
//!                              probing: a 1-byte hash tag and the id of the
//!                              chunk holding the member, no member bytes
//!                              and no score; any capacity (fastrange),
//!                              load kept in 3/4..7/8, so about 4 bytes a
//!                              member
//!         pos:    Vec<u32>     chunk id -> position in `chunks`
//! ```
//!
//! The index finds a member without storing it a second time: a tag match
//! names a chunk, which is scanned for the member (at most CHUNK_ENTRIES
//! entries); the scan yields its score. Chunk ids are stable while chunks
//! before them split and merge; a split or merge relabels the index slots
//! of the entries it moves (`index_move`, which explains why relabelling
//! the first matching slot is exact). Removal leaves a tombstone; the index
//! is rebuilt from the chunks when it grows, shrinks or fills with
//! tombstones, so it is always a function of the chunks' contents.
//!
//! Why chunk ids and not scores: an index of (tag, f64 score) cost about
//! 11 bytes a member, more than the entries themselves for typical
//! members (seed 003's 365 (day, count) members: 8.5 bytes of entry, 24
//! bytes a member in all); with two-byte ids it is about 4.
//!
//! Complexity (n members, c = n / ~CHUNK_ENTRIES chunks): score lookup,
//! insert, remove, rank and seek-by-rank are O(log c + CHUNK_ENTRIES); a
//! chunk split or merge rebuilds the Fenwick tree, O(c), once per about
//! CHUNK_ENTRIES/2 inserts. Iteration from a rank is O(1) per entry.
//!
//! A set starts small and becomes large past `small_max_entries` members or
//! `small_max_bytes` bytes (`maybe_convert`, the one place that converts);
//! the small buffer becomes the first chunk, so nothing is re-encoded.
//! What OBJECT ENCODING says is a sticky flag set by Redis's own rules
//! (`zset-max-listpack-entries`/`-value`): "skiplist" once Redis would have
//! converted, else "listpack". Our shape thresholds are independent.
//!
//! Scores are never NaN (callers reject NaN). -0.0 and 0.0 compare equal,
//! as in Redis, and are stored as given.
//!
//! Member TTLs (densekv's ZEXPIRE family): the 0xf3 prefix holds a
//! member's deadline; a flag (`F_TTL`) records that a member got one, so
//! sets that never had a TTL answer `min_deadline` at once, and each chunk
//! keeps its earliest deadline, so active expiry reads only chunks with a
//! due member. Reads here do not hide members past their deadline: the
//! keyspace removes them (`expire_due_with`) before a command sees the
//! set. `insert` (ZADD) drops the member's TTL, as HSET drops a field's;
//! `insert_keep_ttl` (ZINCRBY, ZADD INCR) keeps it, as HINCRBY does.
//!
//! Inline form (`inline_encode` / `from_inline`): the keyspace keeps a small
//! set that Redis would call listpack, and that never had a member TTL, in
//! its key's blob, written more tightly than the small shape: integer
//! scores as distances from the previous one, members of one length without
//! their length byte. It lends such a set out as an ordinary small `ZSet`.
//!
//! Memory (`mem_usage`): heap bytes this set owns, each block rounded to
//! jemalloc's size class; the owner counts `size_of::<ZSet>()`.

use std::cmp::Ordering;

use crate::encoding::fieldpack::get_varint;
use crate::encoding::put_varint;
use crate::encoding::{alloc_size, inline, reserve_class, shrink_class};
use crate::segment::hash;
use crate::slab::prefetch_bytes;

/// Small header: flags, then the member count as u16 LE.
const HDR: usize = 3;
/// Redis would report "skiplist".
const F_SKIPLIST: u8 = 1;
/// A member got a TTL once.
const F_TTL: u8 = 2;
/// Tag of the deadline prefix of an entry with a TTL.
const TTL_TAG: u8 = 0xf3;
/// Bytes of that prefix: the tag and a 48-bit deadline.
const TTL_LEN: usize = 7;
/// The largest deadline an entry holds (2^48 - 1 ms).
pub const MAX_DEADLINE: i64 = (1 << 48) - 1;
/// Most entries in one chunk of the large shape.
const CHUNK_ENTRIES: usize = 64;
/// Most bytes in one chunk (a chunk holding a single larger entry is fine).
const CHUNK_BYTES: usize = 2048;
/// Index tags: 0 empty, 1 tombstone, 2..=255 hash-derived.
const EMPTY: u8 = 0;
const TOMB: u8 = 1;

/// Thresholds steering encodings. The first two are Redis's config
/// parameters and only decide what `encoding_name` answers; the rest are
/// ours (tests shrink them to exercise conversion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZsetConfig {
    /// `zset-max-listpack-entries` (default 128).
    pub max_listpack_entries: usize,
    /// `zset-max-listpack-value` (default 64).
    pub max_listpack_value: usize,
    /// Most members the small shape holds (at most 65535).
    pub small_max_entries: usize,
    /// Most bytes the small shape's buffer holds.
    pub small_max_bytes: usize,
}

impl Default for ZsetConfig {
    fn default() -> Self {
        ZsetConfig { max_listpack_entries: 128, max_listpack_value: 64, small_max_entries: 128, small_max_bytes: 4096 }
    }
}

/// A score as a set Redis keeps as a listpack holds it: Redis stores a
/// score that is an integer as one, so -0.0 comes back as 0 (a skiplist
/// keeps the sign).
fn listpack_score(s: f64) -> f64 {
    if s == 0.0 { 0.0 } else { s }
}

/// Total order of (score, member) pairs: by score (NaN never occurs, -0.0
/// equals 0.0), then by member bytes.
pub fn cmp_entry(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    s1.partial_cmp(&s2).unwrap_or(Ordering::Equal).then_with(|| m1.cmp(m2))
}

// ---- packed entries --------------------------------------------------------

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn score_len(s: f64) -> usize {
    let i = s as i64;
    if i as f64 != s || (s == 0.0 && s.is_sign_negative()) {
        9
    } else if (0..0xf0).contains(&i) {
        1
    } else if i16::try_from(i).is_ok() {
        3
    } else if i32::try_from(i).is_ok() {
        5
    } else {
        9
    }
}

fn entry_len(score: f64, member: &[u8]) -> usize {
    score_len(score) + varint_len(member.len()) + member.len()
}

fn encode(out: &mut Vec<u8>, score: f64, member: &[u8]) {
    let i = score as i64;
    match score_len(score) {
        1 => out.push(i as u8),
        3 => {
            out.push(0xf0);
            out.extend_from_slice(&(i as i16).to_le_bytes());
        }
        5 => {
            out.push(0xf1);
            out.extend_from_slice(&(i as i32).to_le_bytes());
        }
        _ => {
            out.push(0xf2);
            out.extend_from_slice(&score.to_le_bytes());
        }
    }
    put_varint(out, member.len());
    out.extend_from_slice(member);
}

/// The deadline of the entry at `off`, if it has one.
fn deadline_at(b: &[u8], off: usize) -> Option<i64> {
    (b[off] == TTL_TAG).then(|| {
        let mut d = [0u8; 8];
        d[..6].copy_from_slice(&b[off + 1..off + TTL_LEN]);
        u64::from_le_bytes(d) as i64
    })
}

/// Sets or clears the deadline of the entry at `off`; returns the change
/// in the buffer's length.
fn set_deadline_at(b: &mut Vec<u8>, off: usize, deadline: Option<i64>) -> isize {
    let has = b[off] == TTL_TAG;
    match deadline {
        Some(d) => {
            assert!((0..=MAX_DEADLINE).contains(&d), "member deadline out of range: {d}");
            let bytes = (d as u64).to_le_bytes();
            if has {
                b[off + 1..off + TTL_LEN].copy_from_slice(&bytes[..6]);
                0
            } else {
                reserve_class(b, TTL_LEN);
                b.splice(off..off, std::iter::once(TTL_TAG).chain(bytes[..6].iter().copied()));
                TTL_LEN as isize
            }
        }
        None if has => {
            b.drain(off..off + TTL_LEN);
            shrink_class(b);
            -(TTL_LEN as isize)
        }
        None => 0,
    }
}

/// The earliest deadline of the entries of `b` from `from` (i64::MAX: none).
fn min_deadline_in(b: &[u8], from: usize) -> i64 {
    let mut min = i64::MAX;
    let mut off = from;
    while off < b.len() {
        if let Some(d) = deadline_at(b, off) {
            min = min.min(d);
        }
        off = decode(b, off).2;
    }
    min
}

/// Decodes the entry at `off`: (score, member, offset past it).
#[inline(always)]
fn decode(b: &[u8], off: usize) -> (f64, &[u8], usize) {
    let off = if b[off] == TTL_TAG { off + TTL_LEN } else { off };
    let (score, p) = match b[off] {
        t @ 0..=0xef => (t as f64, off + 1),
        0xf0 => (i16::from_le_bytes([b[off + 1], b[off + 2]]) as f64, off + 3),
        0xf1 => (i32::from_le_bytes(b[off + 1..off + 5].try_into().expect("4 bytes")) as f64, off + 5),
        0xf2 => (f64::from_le_bytes(b[off + 1..off + 9].try_into().expect("8 bytes")), off + 9),
        t => panic!("corrupt zset entry tag {t:#x}"),
    };
    if b[p] < 0x80 {
        let n = b[p] as usize;
        return (score, &b[p + 1..p + 1 + n], p + 1 + n);
    }
    let (n, p) = get_varint(b, p);
    (score, &b[p..p + n], p + n)
}

/// Entries of a packed run, in order.
#[derive(Debug, Clone)]
struct Packed<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Iterator for Packed<'a> {
    type Item = (f64, &'a [u8], usize);

    /// Yields (score, member, offset of the entry).
    fn next(&mut self) -> Option<Self::Item> {
        if self.off >= self.buf.len() {
            return None;
        }
        let at = self.off;
        let (s, m, end) = decode(self.buf, at);
        self.off = end;
        Some((s, m, at))
    }
}

fn packed(buf: &[u8], from: usize) -> Packed<'_> {
    Packed { buf, off: from }
}

/// Inserts an entry at byte offset `at`.
fn insert_at(buf: &mut Vec<u8>, at: usize, score: f64, member: &[u8]) {
    let mut e = Vec::with_capacity(entry_len(score, member));
    encode(&mut e, score, member);
    reserve_class(buf, e.len());
    buf.splice(at..at, e);
}

// ---- inline form -------------------------------------------------------------

/// The inline form's score codes (`ZSet::inline_encode`). Entries are in
/// score order, so an integer score is written as its distance from the
/// previous one (from 0 for the first) when both are integers and it is
/// ahead: expiry times or days clustered in a partition take 2 bytes, not 5.
///
/// ```text
/// 0x00..=0xbf  distance 0..=191
/// 0xc0..=0xdf  distance 192 + (tag & 0x1f) << 8 | b0            (2 bytes)
/// 0xe0..=0xef  distance 8384 + (tag & 0x0f) << 16 | b1 << 8 | b0 (3 bytes)
/// 0xf0         an integer score, i32 LE                         (5 bytes)
/// 0xf2         any other score, f64 LE                          (9 bytes)
/// ```
const NEAR: u64 = 192;
const MID: u64 = NEAR + (1 << 13);
const FAR: u64 = MID + (1 << 20);

/// True for a score the distance codes can carry: an integer below 2^52
/// in magnitude (so sums stay exact), and not -0.0 (whose sign they lose).
fn whole(s: f64) -> bool {
    s.fract() == 0.0 && s.abs() < (1u64 << 52) as f64 && !(s == 0.0 && s.is_sign_negative())
}

fn put_score(out: &mut Vec<u8>, prev: f64, score: f64) {
    if whole(prev) && whole(score) && score >= prev && ((score - prev) as u64) < FAR {
        let d = (score - prev) as u64;
        if d < NEAR {
            out.push(d as u8);
        } else if d < MID {
            let d = d - NEAR;
            out.extend_from_slice(&[0xc0 | (d >> 8) as u8, d as u8]);
        } else {
            let d = d - MID;
            out.extend_from_slice(&[0xe0 | (d >> 16) as u8, d as u8, (d >> 8) as u8]);
        }
    } else if whole(score) && i32::try_from(score as i64).is_ok() {
        out.push(0xf0);
        out.extend_from_slice(&(score as i32).to_le_bytes());
    } else {
        out.push(0xf2);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

/// The score whose code starts at `p`, and the offset past it.
fn get_score(b: &[u8], p: usize, prev: f64) -> (f64, usize) {
    let t = b[p];
    match t {
        0x00..=0xbf => (prev + t as f64, p + 1),
        0xc0..=0xdf => (prev + (NEAR + (((t & 0x1f) as u64) << 8 | b[p + 1] as u64)) as f64, p + 2),
        0xe0..=0xef => {
            let d = MID + (((t & 0x0f) as u64) << 16 | (b[p + 2] as u64) << 8 | b[p + 1] as u64);
            (prev + d as f64, p + 3)
        }
        0xf0 => (i32::from_le_bytes(b[p + 1..p + 5].try_into().expect("4 bytes")) as f64, p + 5),
        0xf2 => (f64::from_le_bytes(b[p + 1..p + 9].try_into().expect("8 bytes")), p + 9),
        _ => panic!("corrupt inline zset score code {t:#x}"),
    }
}

/// Calls `f` with each (score, member) of an inline body.
fn walk_inline(body: &[u8], width: usize, mut f: impl FnMut(f64, &[u8])) {
    let (mut p, mut prev) = (0, 0.0);
    while p < body.len() {
        let (score, q) = get_score(body, p, prev);
        let (n, q) = if width > 0 { (width, q) } else { get_varint(body, q) };
        f(score, &body[q..q + n]);
        prev = score;
        p = q + n;
    }
}

// ---- large shape -----------------------------------------------------------

#[derive(Debug, Clone)]
struct Chunk {
    buf: Vec<u8>,
    len: u32,
    /// Stable name of this chunk in the index (its position changes as
    /// chunks before it split or merge; this does not).
    id: u32,
    /// Earliest member deadline in `buf` (i64::MAX: none).
    min: i64,
}

impl Default for Chunk {
    fn default() -> Self {
        Chunk { buf: Vec::new(), len: 0, id: 0, min: i64::MAX }
    }
}

impl Chunk {
    fn new(buf: Vec<u8>, len: u32) -> Chunk {
        let min = min_deadline_in(&buf, 0);
        Chunk { buf, len, id: 0, min }
    }

    fn first(&self) -> (f64, &[u8]) {
        let (s, m, _) = decode(&self.buf, 0);
        (s, m)
    }

    /// (score, offset, end) of `member` in this chunk.
    fn find(&self, member: &[u8]) -> Option<(f64, usize, usize)> {
        packed(&self.buf, 0).find(|e| e.1 == member).map(|(s, _, at)| (s, at, decode(&self.buf, at).2))
    }
}

/// The index's chunk ids: two bytes each while every id fits, four after.
#[derive(Debug, Clone)]
enum Ids {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl Ids {
    fn new(cap: usize, widest: u32) -> Ids {
        if widest <= u16::MAX as u32 { Ids::Narrow(vec![0; cap]) } else { Ids::Wide(vec![0; cap]) }
    }

    #[inline]
    fn get(&self, i: usize) -> u32 {
        match self {
            Ids::Narrow(v) => v[i] as u32,
            Ids::Wide(v) => v[i],
        }
    }

    fn set(&mut self, i: usize, id: u32) {
        match self {
            Ids::Narrow(v) => match u16::try_from(id) {
                Ok(x) => v[i] = x,
                Err(_) => {
                    let mut wide: Vec<u32> = v.iter().map(|&x| x as u32).collect();
                    wide[i] = id;
                    *self = Ids::Wide(wide);
                }
            },
            Ids::Wide(v) => v[i] = id,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Ids::Narrow(v) => alloc_size(v.capacity() * 2),
            Ids::Wide(v) => alloc_size(v.capacity() * 4),
        }
    }
}

#[derive(Debug, Clone)]
struct Large {
    chunks: Vec<Chunk>,
    fen: Vec<u32>,
    len: usize,
    flags: u8,
    /// Index slots: a tag each (EMPTY, TOMB or hash-derived) ...
    tags: Vec<u8>,
    /// ... and the id of the chunk holding the slot's member.
    ids: Ids,
    /// Slots holding a member or a tombstone.
    used: usize,
    /// Chunk id -> position in `chunks` (FREE_ID: unused id).
    pos: Vec<u32>,
    /// Unused ids, reused first so ids stay small.
    free: Vec<u32>,
}

const FREE_ID: u32 = u32::MAX;

/// The slot a hash starts probing at: `h` scaled onto [0, cap), so the
/// capacity need not be a power of two and can grow in small steps.
fn home(h: u64, cap: usize) -> usize {
    ((h as u128 * cap as u128) >> 64) as usize
}

fn tag_of(h: u64) -> u8 {
    // Low bits: `home` uses the high ones.
    2 + (h as u8 % 254)
}

impl Large {
    fn with_chunks(chunks: Vec<Chunk>, len: usize, flags: u8) -> Large {
        let mut l = Large { chunks, fen: Vec::new(), len, flags, tags: Vec::new(), ids: Ids::Narrow(Vec::new()), used: 0, pos: Vec::new(), free: Vec::new() };
        for i in 0..l.chunks.len() {
            l.chunks[i].id = i as u32;
        }
        l.pos = (0..l.chunks.len() as u32).collect();
        l
    }

    fn from_chunk(buf: Vec<u8>, len: usize, flags: u8) -> Large {
        let mut l = Large::with_chunks(vec![Chunk::new(buf, len as u32)], len, flags);
        while let Some(i) = l.chunks.iter().position(|c| c.len as usize > CHUNK_ENTRIES || (c.buf.len() > CHUNK_BYTES && c.len > 1)) {
            l.split(i);
        }
        l.rebuild_fen();
        l.rebuild_index();
        l
    }

    /// A large set over one sorted run of `len` packed entries, cut into
    /// chunks about three quarters full, so that inserts do not split at
    /// once.
    fn from_run(run: &[u8], len: usize, flags: u8) -> Large {
        const FILL_ENTRIES: usize = CHUNK_ENTRIES * 3 / 4;
        const FILL_BYTES: usize = CHUNK_BYTES * 3 / 4;
        let mut chunks = Vec::with_capacity(len / FILL_ENTRIES + 1);
        let cut = |chunks: &mut Vec<Chunk>, bytes: &[u8], n: u32| {
            let mut buf = Vec::new();
            reserve_class(&mut buf, bytes.len());
            buf.extend_from_slice(bytes);
            chunks.push(Chunk::new(buf, n));
        };
        let (mut start, mut n) = (0, 0);
        for (s, m, at) in packed(run, 0) {
            if n > 0 && (n as usize == FILL_ENTRIES || at + entry_len(s, m) - start > FILL_BYTES) {
                cut(&mut chunks, &run[start..at], n);
                (start, n) = (at, 0);
            }
            n += 1;
        }
        if n > 0 {
            cut(&mut chunks, &run[start..], n);
        }
        let mut l = Large::with_chunks(chunks, len, flags);
        l.rebuild_fen();
        l.rebuild_index();
        l
    }

    fn rebuild_fen(&mut self) {
        let n = self.chunks.len();
        self.fen.clear();
        self.fen.extend(self.chunks.iter().map(|c| c.len));
        for i in 0..n {
            let j = i | (i + 1);
            if j < n {
                self.fen[j] += self.fen[i];
            }
        }
        self.fen.shrink_to(alloc_size(n * 4) / 4);
    }

    fn fen_add(&mut self, mut i: usize, delta: i32) {
        while i < self.fen.len() {
            self.fen[i] = self.fen[i].wrapping_add_signed(delta);
            i |= i + 1;
        }
    }

    /// Entries in chunks [0, i).
    fn prefix(&self, mut i: usize) -> usize {
        let mut s = 0;
        while i > 0 {
            s += self.fen[i - 1] as usize;
            i &= i - 1;
        }
        s
    }

    /// The chunk holding rank `r` (< len) and the rank within it.
    fn seek(&self, mut r: usize) -> (usize, usize) {
        let n = self.fen.len();
        let mut pos = 0;
        let mut step = n.next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next <= n && (self.fen[next - 1] as usize) <= r {
                r -= self.fen[next - 1] as usize;
                pos = next;
            }
            step >>= 1;
        }
        (pos, r)
    }

    /// Number of entries for which `before` holds (a prefix of the order),
    /// and the chunk where the first entry failing it is or would go.
    fn partition(&self, before: &impl Fn(f64, &[u8]) -> bool) -> (usize, usize, usize) {
        let ci = self.chunks.partition_point(|c| {
            let (s, m) = c.first();
            before(s, m)
        });
        if ci == 0 {
            return (0, 0, 0);
        }
        let c = &self.chunks[ci - 1];
        let mut k = 0;
        let mut off = c.buf.len();
        for (s, m, at) in packed(&c.buf, 0) {
            if !before(s, m) {
                off = at;
                break;
            }
            k += 1;
        }
        (self.prefix(ci - 1) + k, ci - 1, off)
    }

    /// `member`'s index slot, chunk position, byte range in the chunk and
    /// score. Every slot whose tag matches sends us to one chunk, which is
    /// scanned for the member.
    fn find(&self, member: &[u8]) -> Option<(usize, usize, usize, usize, f64)> {
        if self.tags.is_empty() {
            return None;
        }
        let h = hash(member);
        let (tag, cap) = (tag_of(h), self.tags.len());
        let mut i = home(h, cap);
        loop {
            match self.tags[i] {
                EMPTY => return None,
                t if t == tag => {
                    let ci = self.pos[self.ids.get(i) as usize] as usize;
                    if let Some((s, at, end)) = self.chunks[ci].find(member) {
                        return Some((i, ci, at, end, s));
                    }
                }
                _ => {}
            }
            i = if i + 1 == cap { 0 } else { i + 1 };
        }
    }

    /// Adds `member`, just inserted into chunk `id`, to the index.
    fn index_add(&mut self, member: &[u8], id: u32) {
        if (self.used + 1) * 8 > self.tags.len() * 7 {
            // The rebuild reads the chunks, which already hold the member.
            self.rebuild_index();
            return;
        }
        let h = hash(member);
        let cap = self.tags.len();
        let mut i = home(h, cap);
        while self.tags[i] > TOMB {
            i = if i + 1 == cap { 0 } else { i + 1 };
        }
        self.used += usize::from(self.tags[i] == EMPTY);
        self.tags[i] = tag_of(h);
        self.ids.set(i, id);
    }

    /// Points the index at chunk `to` for `member`, which moved there from
    /// chunk `from`: relabels the first slot with its tag and `from` on its
    /// probe path. That slot may be another member's of the same tag that
    /// stayed in `from`; that member then still finds the moved member's
    /// own slot further along its path (both lie in one probe run), so
    /// every member keeps a slot naming its chunk.
    fn index_move(&mut self, member: &[u8], from: u32, to: u32) {
        let h = hash(member);
        let (tag, cap) = (tag_of(h), self.tags.len());
        let mut i = home(h, cap);
        loop {
            match self.tags[i] {
                EMPTY => unreachable!("a member of chunk {from} has no index slot"),
                t if t == tag && self.ids.get(i) == from => {
                    self.ids.set(i, to);
                    return;
                }
                _ => {}
            }
            i = if i + 1 == cap { 0 } else { i + 1 };
        }
    }

    /// Rebuilds the index from the chunks at a load of about 3/4.
    fn rebuild_index(&mut self) {
        let cap = self.len + self.len / 3 + 8;
        self.tags = vec![EMPTY; cap];
        self.ids = Ids::new(cap, self.pos.len().saturating_sub(1) as u32);
        self.used = 0;
        for c in &self.chunks {
            for (_, m, _) in packed(&c.buf, 0) {
                let h = hash(m);
                let mut i = home(h, cap);
                while self.tags[i] != EMPTY {
                    i = if i + 1 == cap { 0 } else { i + 1 };
                }
                self.tags[i] = tag_of(h);
                self.ids.set(i, c.id);
                self.used += 1;
            }
        }
    }

    fn new_id(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.pos.push(FREE_ID);
            self.pos.len() as u32 - 1
        })
    }

    fn free_id(&mut self, id: u32) {
        self.pos[id as usize] = FREE_ID;
        self.free.push(id);
    }

    /// Records the positions of chunks `from..`.
    fn renumber(&mut self, from: usize) {
        for (i, c) in self.chunks.iter().enumerate().skip(from) {
            self.pos[c.id as usize] = i as u32;
        }
    }

    /// Moves the upper half of chunk `ci` into a new chunk after it (the
    /// Fenwick tree is the caller's to rebuild).
    fn split(&mut self, ci: usize) {
        let id = self.new_id();
        let c = &mut self.chunks[ci];
        let half = c.len as usize / 2;
        let (_, _, at) = packed(&c.buf, 0).nth(half).expect("half < len");
        let mut tail = Vec::new();
        reserve_class(&mut tail, c.buf.len() - at);
        tail.extend_from_slice(&c.buf[at..]);
        c.buf.truncate(at);
        shrink_class(&mut c.buf);
        let moved = c.len - half as u32;
        c.len = half as u32;
        let had_ttl = c.min != i64::MAX;
        if had_ttl {
            c.min = min_deadline_in(&c.buf, 0);
        }
        let tail_min = if had_ttl { min_deadline_in(&tail, 0) } else { i64::MAX };
        let from = c.id;
        if !self.tags.is_empty() {
            for (_, m, _) in packed(&tail, 0) {
                self.index_move(m, from, id);
            }
        }
        self.chunks.insert(ci + 1, Chunk { buf: tail, len: moved, id, min: tail_min });
        self.renumber(ci + 1);
    }

    /// Inserts a new (absent) member into chunk order and the index.
    fn insert(&mut self, score: f64, member: &[u8]) {
        if self.chunks.is_empty() {
            let id = self.new_id();
            self.chunks.push(Chunk { id, ..Chunk::default() });
            self.renumber(0);
            self.rebuild_fen();
        }
        let (_, ci, off) = self.partition(&|s, m| cmp_entry(s, m, score, member) == Ordering::Less);
        let c = &mut self.chunks[ci];
        insert_at(&mut c.buf, off, score, member);
        c.len += 1;
        self.len += 1;
        let (id, full) = (c.id, c.len as usize > CHUNK_ENTRIES || (c.buf.len() > CHUNK_BYTES && c.len > 1));
        self.index_add(member, id);
        if full {
            self.split(ci);
            self.rebuild_fen();
        } else {
            self.fen_add(ci, 1);
        }
    }

    /// Removes the member at index slot `slot`, chunk `ci`, bytes
    /// at..end, merging small neighbours.
    fn remove(&mut self, slot: usize, ci: usize, at: usize, end: usize) {
        self.tags[slot] = TOMB;
        let c = &mut self.chunks[ci];
        let had = deadline_at(&c.buf, at);
        c.buf.drain(at..end);
        c.len -= 1;
        self.len -= 1;
        if had == Some(c.min) {
            c.min = min_deadline_in(&c.buf, 0);
        }
        if c.len == 0 {
            let id = c.id;
            self.chunks.remove(ci);
            self.free_id(id);
            self.renumber(ci);
            self.rebuild_fen();
        } else {
            let merge = |a: &Chunk, b: &Chunk| (a.len + b.len) as usize <= CHUNK_ENTRIES / 2 && a.buf.len() + b.buf.len() <= CHUNK_BYTES / 2;
            let with = if ci + 1 < self.chunks.len() && merge(&self.chunks[ci], &self.chunks[ci + 1]) {
                Some(ci)
            } else if ci > 0 && merge(&self.chunks[ci - 1], &self.chunks[ci]) {
                Some(ci - 1)
            } else {
                None
            };
            if let Some(a) = with {
                let b = self.chunks.remove(a + 1);
                let to = self.chunks[a].id;
                for (_, m, _) in packed(&b.buf, 0) {
                    self.index_move(m, b.id, to);
                }
                let c = &mut self.chunks[a];
                reserve_class(&mut c.buf, b.buf.len());
                c.buf.extend_from_slice(&b.buf);
                c.len += b.len;
                c.min = c.min.min(b.min);
                self.free_id(b.id);
                self.renumber(a + 1);
                self.rebuild_fen();
            } else {
                shrink_class(&mut self.chunks[ci].buf);
                self.fen_add(ci, -1);
            }
        }
        if self.len > 16 && self.len * 3 < self.tags.len() {
            self.rebuild_index();
        }
    }

    fn mem_usage(&self) -> usize {
        alloc_size(size_of::<Large>())
            + alloc_size(self.chunks.capacity() * size_of::<Chunk>())
            + self.chunks.iter().map(|c| alloc_size(c.buf.capacity())).sum::<usize>()
            + alloc_size(self.fen.capacity() * 4)
            + alloc_size(self.tags.capacity())
            + self.ids.bytes()
            + alloc_size(self.pos.capacity() * 4)
            + alloc_size(self.free.capacity() * 4)
    }
}

// ---- the type --------------------------------------------------------------

#[derive(Debug, Clone)]
enum Repr {
    Small(Vec<u8>),
    Large(Box<Large>),
}

/// A sorted set value.
#[derive(Debug, Clone)]
pub struct ZSet {
    repr: Repr,
}

/// Equal members with bit-identical scores, whatever the shapes.
impl PartialEq for ZSet {
    fn eq(&self, other: &ZSet) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits())
    }
}

impl Eq for ZSet {}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::new()
    }
}

impl ZSet {
    /// An empty sorted set (small shape).
    pub fn new() -> ZSet {
        let mut buf = Vec::new();
        reserve_class(&mut buf, HDR);
        buf.extend_from_slice(&[0; HDR]);
        ZSet { repr: Repr::Small(buf) }
    }

    /// An empty sorted set about to receive about `size_hint` members, the
    /// longest `max_len_hint` bytes: named "skiplist" from the start when
    /// Redis would create one (as ZADD and the *STORE commands do).
    pub fn with_hint(size_hint: usize, max_len_hint: usize, cfg: &ZsetConfig) -> ZSet {
        let mut z = ZSet::new();
        if size_hint > cfg.max_listpack_entries || max_len_hint > cfg.max_listpack_value {
            z.set_flag(F_SKIPLIST);
        }
        z
    }

    /// Notes that about `size_hint` members are about to be added (ZADD with
    /// many pairs): Redis converts to a skiplist up front past its entry
    /// threshold, so the name follows.
    pub fn size_hint(&mut self, size_hint: usize, cfg: &ZsetConfig) {
        if size_hint > cfg.max_listpack_entries {
            self.set_flag(F_SKIPLIST);
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(b) => u16::from_le_bytes([b[1], b[2]]) as usize,
            Repr::Large(l) => l.len,
        }
    }

    /// True if no member is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn set_small_len(b: &mut [u8], n: usize) {
        b[1..3].copy_from_slice(&(n as u16).to_le_bytes());
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Small(b) => packed(b, HDR).find(|e| e.1 == member).map(|e| e.0),
            Repr::Large(l) => l.find(member).map(|f| f.4),
        }
    }

    /// A sorted set of `entries`, given in (score, member) order with each
    /// member once (what the *STORE commands computed): encoded in one
    /// pass, with no search per member, and named as inserting them one
    /// by one would have named it.
    pub fn from_sorted<'m>(entries: impl IntoIterator<Item = (&'m [u8], f64)>, cfg: &ZsetConfig) -> ZSet {
        let mut buf = vec![0; HDR];
        let (mut n, mut longest, mut negative_zero) = (0, 0, false);
        for (m, s) in entries {
            debug_assert!(!s.is_nan());
            negative_zero |= s == 0.0 && s.is_sign_negative();
            encode(&mut buf, s, m);
            n += 1;
            longest = longest.max(m.len());
        }
        let flags = if n > cfg.max_listpack_entries || longest > cfg.max_listpack_value { F_SKIPLIST } else { 0 };
        if flags == 0 && negative_zero {
            // Rare: re-encode with listpack's zeros (see `listpack_score`).
            let mut fixed = vec![0; HDR];
            let mut off = HDR;
            while off < buf.len() {
                let (s, m, end) = decode(&buf, off);
                encode(&mut fixed, listpack_score(s), m);
                off = end;
            }
            buf = fixed;
        }
        if n <= cfg.small_max_entries.min(u16::MAX as usize - 1) && buf.len() <= cfg.small_max_bytes {
            buf[0] = flags;
            Self::set_small_len(&mut buf, n);
            let mut small = Vec::new();
            reserve_class(&mut small, buf.len());
            small.extend_from_slice(&buf);
            return ZSet { repr: Repr::Small(small) };
        }
        ZSet { repr: Repr::Large(Box::new(Large::from_run(&buf[HDR..], n, flags))) }
    }

    /// Sets `member`'s score (NaN is a caller bug) and drops its TTL, as
    /// ZADD does. Returns the previous score, None if the member is new.
    pub fn insert(&mut self, member: &[u8], score: f64, cfg: &ZsetConfig) -> Option<f64> {
        debug_assert!(!score.is_nan());
        let listpack = self.flags() & F_SKIPLIST == 0 && self.len() < cfg.max_listpack_entries && member.len() <= cfg.max_listpack_value;
        let score = if listpack { listpack_score(score) } else { score };
        let old = self.score(member);
        if let Some(o) = old {
            if o == score && o.is_sign_negative() == score.is_sign_negative() {
                if self.flags() & F_TTL != 0 {
                    self.set_deadline(member, None);
                }
                return old;
            }
            self.remove_entry(member);
        }
        match &mut self.repr {
            Repr::Small(b) => {
                let at = packed(b, HDR)
                    .find(|e| cmp_entry(e.0, e.1, score, member) == Ordering::Greater)
                    .map_or(b.len(), |e| e.2);
                insert_at(b, at, score, member);
                let n = u16::from_le_bytes([b[1], b[2]]) as usize + 1;
                Self::set_small_len(b, n);
            }
            Repr::Large(l) => l.insert(score, member),
        }
        if member.len() > cfg.max_listpack_value {
            self.set_flag(F_SKIPLIST);
        }
        self.maybe_convert(cfg);
        old
    }

    /// `insert`, keeping the member's TTL if it has one (ZINCRBY, ZADD INCR,
    /// as HINCRBY keeps a field's).
    pub fn insert_keep_ttl(&mut self, member: &[u8], score: f64, cfg: &ZsetConfig) -> Option<f64> {
        let dl = if self.flags() & F_TTL != 0 { self.expire_of(member).flatten() } else { None };
        let old = self.insert(member, score, cfg);
        if dl.is_some() {
            self.set_deadline(member, dl);
        }
        old
    }

    /// The deadline of `member`: `None` if absent, `Some(None)` if it has
    /// no TTL, `Some(Some(ms))` (past or not: see the module header).
    pub fn expire_of(&self, member: &[u8]) -> Option<Option<i64>> {
        match &self.repr {
            Repr::Small(b) => packed(b, HDR).find(|e| e.1 == member).map(|e| deadline_at(b, e.2)),
            Repr::Large(l) => {
                let (_, ci, at, _, _) = l.find(member)?;
                Some(deadline_at(&l.chunks[ci].buf, at))
            }
        }
    }

    /// ZEXPIRE-family update of one member, as `Hash::set_expire` does for
    /// a field. Returns the reply code: -2 no such member (or one past its
    /// deadline), 0 condition not met, 1 deadline set, 2 member removed
    /// because `deadline <= now`.
    ///
    /// Panics: if `deadline > MAX_DEADLINE` (callers reject such times
    /// with Redis's error first).
    pub fn set_expire(&mut self, member: &[u8], deadline: i64, cond: crate::types::hash::ExpireCond, now: i64) -> i64 {
        assert!(deadline <= MAX_DEADLINE, "member deadline out of range: {deadline}");
        match cond.step(self.expire_of(member), deadline, now) {
            Err(code) => code,
            Ok(true) => {
                self.remove(member);
                2
            }
            Ok(false) => {
                self.set_deadline(member, Some(deadline));
                1
            }
        }
    }

    /// ZPERSIST of one member: -2 no such (live) member, -1 it has no TTL,
    /// 1 TTL removed.
    pub fn persist(&mut self, member: &[u8], now: i64) -> i64 {
        match self.expire_of(member) {
            None => -2,
            Some(Some(d)) if d < now => -2,
            Some(None) => -1,
            Some(Some(_)) => {
                self.set_deadline(member, None);
                1
            }
        }
    }

    /// Sets or clears the deadline of `member`, if present.
    fn set_deadline(&mut self, member: &[u8], deadline: Option<i64>) {
        if deadline.is_some() {
            self.set_flag(F_TTL);
        }
        match &mut self.repr {
            Repr::Small(b) => {
                let Some((_, _, at)) = packed(b, HDR).find(|e| e.1 == member) else { return };
                set_deadline_at(b, at, deadline);
            }
            Repr::Large(l) => {
                let Some((_, ci, at, _, _)) = l.find(member) else { return };
                let c = &mut l.chunks[ci];
                set_deadline_at(&mut c.buf, at, deadline);
                c.min = min_deadline_in(&c.buf, 0);
                if c.buf.len() > CHUNK_BYTES && c.len > 1 {
                    l.split(ci);
                    l.rebuild_fen();
                }
            }
        }
    }

    /// The earliest member deadline (past ones included), by which the
    /// keyspace indexes the set: O(1) for a set that never had a TTL, else
    /// a scan of the small buffer or of the chunks' own minimums.
    pub fn min_deadline(&self) -> Option<i64> {
        if self.flags() & F_TTL == 0 {
            return None;
        }
        let min = match &self.repr {
            Repr::Small(b) => min_deadline_in(b, HDR),
            Repr::Large(l) => l.chunks.iter().map(|c| c.min).min().unwrap_or(i64::MAX),
        };
        (min != i64::MAX).then_some(min)
    }

    /// Removes up to `max` members whose deadline is before `now`, calling
    /// `f` with each; returns how many. The large shape reads only chunks
    /// holding one.
    pub fn expire_due_with(&mut self, now: i64, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        if self.flags() & F_TTL == 0 {
            return 0;
        }
        let mut due: Vec<Vec<u8>> = Vec::new();
        let collect = |b: &[u8], from: usize, due: &mut Vec<Vec<u8>>| {
            let mut off = from;
            while off < b.len() && due.len() < max {
                let (_, m, end) = decode(b, off);
                if deadline_at(b, off).is_some_and(|d| d < now) {
                    due.push(m.to_vec());
                }
                off = end;
            }
        };
        match &self.repr {
            Repr::Small(b) => collect(b, HDR, &mut due),
            Repr::Large(l) => {
                for c in l.chunks.iter().filter(|c| c.min < now) {
                    if due.len() >= max {
                        break;
                    }
                    collect(&c.buf, 0, &mut due);
                }
            }
        }
        for m in &due {
            f(m);
            self.remove_entry(m);
        }
        due.len()
    }

    /// Calls `f` with every member, its score and its deadline, in
    /// ascending order (for DUMP and RDB files).
    pub fn for_each_ttl<'s>(&'s self, mut f: impl FnMut(&'s [u8], f64, Option<i64>)) {
        let mut walk = |buf: &'s [u8], from: usize| {
            let mut off = from;
            while off < buf.len() {
                let (s, m, end) = decode(buf, off);
                f(m, s, deadline_at(buf, off));
                off = end;
            }
        };
        match &self.repr {
            Repr::Small(b) => walk(b, HDR),
            Repr::Large(l) => l.chunks.iter().for_each(|c| walk(&c.buf, 0)),
        }
    }

    /// Removes `member` from the order and the index; returns its score if
    /// it was present.
    fn remove_entry(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Small(b) => {
                let (score, _, at) = packed(b, HDR).find(|e| e.1 == member)?;
                let end = decode(b, at).2;
                b.drain(at..end);
                let n = u16::from_le_bytes([b[1], b[2]]) as usize - 1;
                Self::set_small_len(b, n);
                shrink_class(b);
                Some(score)
            }
            Repr::Large(l) => {
                let (slot, ci, at, end, score) = l.find(member)?;
                l.remove(slot, ci, at, end);
                Some(score)
            }
        }
    }

    /// Removes `member`; returns its score if it was present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        self.remove_entry(member)
    }

    /// Number of members for which `before(score, member)` holds, given
    /// that it holds for a prefix of the order (e.g. "score < 5").
    pub fn partition(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Small(b) => packed(b, HDR).take_while(|e| before(e.0, e.1)).count(),
            Repr::Large(l) => l.partition(&before).0,
        }
    }

    /// 0-based ascending rank of `member` and its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        let s = self.score(member)?;
        Some((self.partition(|es, em| cmp_entry(es, em, s, member) == Ordering::Less), s))
    }

    /// Members from rank `start` on (ascending), with their scores.
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        match &self.repr {
            Repr::Small(b) => {
                let mut cur = packed(b, HDR);
                for _ in 0..start {
                    if cur.next().is_none() {
                        break;
                    }
                }
                Iter { cur, rest: [].iter() }
            }
            Repr::Large(l) if start < l.len => {
                let (ci, r) = l.seek(start);
                let mut cur = packed(&l.chunks[ci].buf, 0);
                for _ in 0..r {
                    cur.next();
                }
                Iter { cur, rest: l.chunks[ci + 1..].iter() }
            }
            Repr::Large(_) => Iter { cur: packed(&[], 0), rest: [].iter() },
        }
    }

    /// All members in ascending order, with their scores.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// Calls `f` with every member and its score in ascending order: what
    /// `iter` yields, walked chunk by chunk in one tight loop (the set
    /// operations read millions of members this way).
    #[inline]
    pub fn for_each<'s>(&'s self, mut f: impl FnMut(&'s [u8], f64)) {
        let mut walk = |buf: &'s [u8]| {
            let mut off = 0;
            while off < buf.len() {
                let (s, m, end) = decode(buf, off);
                f(m, s);
                off = end;
            }
        };
        match &self.repr {
            Repr::Small(b) => walk(&b[HDR..]),
            Repr::Large(l) => {
                // A chunk is a few cache lines of its own allocation: asking
                // for the next one while this one is walked hides the wait
                // (ZUNIONSTORE over thousands of sets spent 40% on it).
                for (i, c) in l.chunks.iter().enumerate() {
                    if let Some(next) = l.chunks.get(i + 1) {
                        prefetch_bytes(&next.buf, CHUNK_BYTES / 64);
                    }
                    walk(&c.buf);
                }
            }
        }
    }

    /// The member at rank `r` (ascending) and its score.
    pub fn get_by_rank(&self, r: usize) -> Option<(&[u8], f64)> {
        self.iter_from(r).next()
    }

    /// One ZSCAN step: calls `f` for members from `cursor` (a rank) on,
    /// at least `count` of them; returns the next cursor (0: done). A small
    /// set is returned whole, as Redis does for a listpack. Ranks shift when
    /// members before the cursor are removed, so under concurrent removal a
    /// member may be missed (Redis guarantees more; ZSCAN users rarely mix).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        if let Repr::Small(_) = self.repr {
            self.iter().for_each(|(m, s)| f(m, s));
            return 0;
        }
        let start = usize::try_from(cursor).unwrap_or(usize::MAX);
        let mut n = 0;
        for (m, s) in self.iter_from(start).take(count.max(1)) {
            f(m, s);
            n += 1;
        }
        let next = start.saturating_add(n);
        if next >= self.len() { 0 } else { next as u64 }
    }

    /// Heap bytes owned, rounded to allocator size classes.
    pub fn mem_usage(&self) -> usize {
        match &self.repr {
            Repr::Small(b) => alloc_size(b.capacity()),
            Repr::Large(l) => l.mem_usage(),
        }
    }

    /// Appends the sorted set as the keyspace keeps it inline in a key's
    /// blob (`encoding::inline`): the header byte, then each member after
    /// its score code (distance from the previous score where it can be);
    /// a member's length is left out when all have one length. Returns
    /// false, appending nothing, unless the set is small, has never had a
    /// member TTL, would be called listpack and has at most
    /// `inline::MAX_BYTES` of entries.
    pub fn inline_encode(&self, out: &mut Vec<u8>) -> bool {
        let Repr::Small(b) = &self.repr else { return false };
        if b[0] != 0 || b.len() - HDR > inline::MAX_BYTES {
            return false;
        }
        let mut width = None;
        for (_, m, _) in packed(b, HDR) {
            if m.is_empty() || m.len() > inline::MAX_WIDTH || width.is_some_and(|w| w != m.len()) {
                width = Some(0);
                break;
            }
            width = Some(m.len());
        }
        let width = width.unwrap_or(0);
        out.push(inline::header(inline::ZSET, width));
        let mut prev = 0.0;
        for (score, m, _) in packed(b, HDR) {
            put_score(out, prev, score);
            if width == 0 {
                put_varint(out, m.len());
            }
            out.extend_from_slice(m);
            prev = score;
        }
        true
    }

    /// Rebuilds a sorted set from `inline_encode`'s bytes (the small
    /// shape, buffer sized to its class).
    ///
    /// Panics: on bytes `inline_encode` did not write.
    pub fn from_inline(bytes: &[u8]) -> ZSet {
        let (hdr, body) = (bytes[0], &bytes[1..]);
        assert_eq!(hdr & 3, inline::ZSET, "not a sorted set's inline bytes");
        let width = inline::width(hdr);
        let (mut size, mut n) = (HDR, 0);
        walk_inline(body, width, |s, m| {
            size += entry_len(s, m);
            n += 1;
        });
        let mut buf = Vec::new();
        reserve_class(&mut buf, size);
        buf.push(0);
        buf.extend_from_slice(&(n as u16).to_le_bytes());
        walk_inline(body, width, |s, m| encode(&mut buf, s, m));
        ZSet { repr: Repr::Small(buf) }
    }

    /// What Redis's OBJECT ENCODING would answer: "listpack" or "skiplist".
    pub fn encoding_name(&self) -> &'static str {
        if self.flags() & F_SKIPLIST != 0 { "skiplist" } else { "listpack" }
    }

    fn flags(&self) -> u8 {
        match &self.repr {
            Repr::Small(b) => b[0],
            Repr::Large(l) => l.flags,
        }
    }

    fn set_flag(&mut self, f: u8) {
        match &mut self.repr {
            Repr::Small(b) => b[0] |= f,
            Repr::Large(l) => l.flags |= f,
        }
    }

    /// Takes Redis's skiplist encoding for good, whatever the size: Redis
    /// converts a sorted set it SORTs so.
    pub fn to_skiplist(&mut self) {
        self.set_flag(F_SKIPLIST);
    }

    /// The one place a sorted set changes shape or Redis-visible encoding:
    /// marks "skiplist" past Redis's entry threshold, and moves a small set
    /// into chunks past our own limits.
    pub fn maybe_convert(&mut self, cfg: &ZsetConfig) {
        if self.len() > cfg.max_listpack_entries {
            self.set_flag(F_SKIPLIST);
        }
        let Repr::Small(b) = &mut self.repr else { return };
        let n = u16::from_le_bytes([b[1], b[2]]) as usize;
        if n > cfg.small_max_entries.min(u16::MAX as usize - 1) || b.len() > cfg.small_max_bytes {
            let mut entries = std::mem::take(b);
            let flags = entries[0];
            entries.drain(..HDR);
            self.repr = Repr::Large(Box::new(Large::from_chunk(entries, n, flags)));
        }
    }
}

/// Members of a sorted set in ascending order, with scores.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    cur: Packed<'a>,
    rest: std::slice::Iter<'a, Chunk>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((s, m, _)) = self.cur.next() {
                return Some((m, s));
            }
            self.cur = packed(&self.rest.next()?.buf, 0);
        }
    }
}

#[cfg(test)]
mod tests;
