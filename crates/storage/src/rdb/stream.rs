//! Streams in RDB: Redis's STREAM_LISTPACKS layouts (types 15, 19, 21).
//!
//! A stream is written as Redis 7.x writes it: each packed node as its key
//! (the base ID, 16 bytes big endian) and a listpack in t_stream's shape,
//! then the length, last, first and largest deleted IDs, the added-entries
//! counter, and the consumer groups (last ID, read counter, PEL with
//! delivery time and count, consumers with their times and pending IDs).
//! Type 19 (RDB 10, loadable by Redis 7.0) is written when every consumer's
//! active time equals its seen time, which is what loading type 19 assumes;
//! otherwise type 21 (RDB 11, Redis 7.2+), which carries active times.
//!
//! A node's listpack holds a master entry (live count, deleted count,
//! master field count, the fields, a 0), then per entry: flags, ms and seq
//! deltas from the base, then either the values alone (flag SAMEFIELDS:
//! the fields are the master's) or a field count and field/value pairs,
//! and last the entry's element count. densekv cuts deleted entries out,
//! so it writes none; when loading, entries flagged deleted are skipped
//! but still count toward the node's fill.
//!
//! Loading checks what Redis's sanitize-dump-payload checks and what
//! densekv's invariants need: every listpack's shape and counts, node keys
//! and entry IDs ascending, the stated length, the last ID not below the
//! last entry, unique group and consumer names, and a PEL whose every entry
//! has exactly one owning consumer. Anything else is `RdbError`.

use super::packed::{self, Elem, ListpackWriter};
use super::primitives::{put_len, put_str, ty, RdbError, Reader};
use crate::types::stream::{Entry, PackedNode, Stream, StreamId, INVALID_ENTRIES_READ};
use crate::value::Value;

/// Entry flag: deleted (a tombstone).
const FLAG_DELETED: i64 = 1;
/// Entry flag: the entry's fields are the master fields.
const FLAG_SAMEFIELDS: i64 = 2;

/// RDB version of type 19 (Redis 7.0).
const VERSION_2: u16 = 10;
/// RDB version of type 21 (Redis 7.2).
const VERSION_3: u16 = 11;

fn id_bytes(id: StreamId) -> [u8; 16] {
    let mut b = [0; 16];
    b[..8].copy_from_slice(&id.ms.to_be_bytes());
    b[8..].copy_from_slice(&id.seq.to_be_bytes());
    b
}

fn id_from(b: &[u8]) -> Result<StreamId, RdbError> {
    if b.len() != 16 {
        return Err(RdbError::BAD);
    }
    Ok(StreamId::new(u64::from_be_bytes(b[..8].try_into().expect("8 bytes")), u64::from_be_bytes(b[8..].try_into().expect("8 bytes"))))
}

/// A node's listpack, as t_stream lays it out.
fn node_listpack(n: &PackedNode) -> Vec<u8> {
    let mut w = ListpackWriter::new();
    w.int(n.entries.len() as i64);
    w.int(0); // deleted entries: densekv keeps none
    w.int(n.master.len() as i64);
    for f in &n.master {
        w.str(f);
    }
    w.int(0);
    for e in &n.entries {
        let same = e.fields.len() == 2 * n.master.len() && e.fields.iter().step_by(2).zip(&n.master).all(|(a, b)| a == b);
        w.int(if same { FLAG_SAMEFIELDS } else { 0 });
        w.int(e.id.ms.wrapping_sub(n.base.ms) as i64);
        w.int(e.id.seq.wrapping_sub(n.base.seq) as i64);
        let pairs = e.fields.len() / 2;
        if same {
            for v in e.fields.iter().skip(1).step_by(2) {
                w.str(v);
            }
            w.int(pairs as i64 + 3);
        } else {
            w.int(pairs as i64);
            for s in &e.fields {
                w.str(s);
            }
            w.int(2 * pairs as i64 + 4);
        }
    }
    w.finish()
}

/// Appends stream `s` (type byte and body); returns the RDB version.
pub(super) fn write(out: &mut Vec<u8>, s: &Stream) -> u16 {
    let v3 = s.groups().iter().flat_map(|g| g.consumers()).any(|c| c.active_time != c.seen_time);
    out.push(if v3 { ty::STREAM_LISTPACKS_3 } else { ty::STREAM_LISTPACKS_2 });
    put_len(out, s.node_count() as u64);
    for n in s.packed_nodes() {
        put_str(out, &id_bytes(n.base));
        put_str(out, &node_listpack(&n));
    }
    put_len(out, s.len());
    for id in [s.last_id(), s.first_id(), s.max_deleted_id()] {
        put_len(out, id.ms);
        put_len(out, id.seq);
    }
    put_len(out, s.entries_added());
    put_len(out, s.groups().len() as u64);
    for g in s.groups() {
        put_str(out, g.name());
        put_len(out, g.last_id.ms);
        put_len(out, g.last_id.seq);
        put_len(out, g.entries_read as u64); // -1 (unknown) as Redis writes it
        put_len(out, g.pending().len() as u64);
        for (id, n) in g.pending() {
            out.extend_from_slice(&id_bytes(*id));
            out.extend_from_slice(&n.delivery_time.to_le_bytes());
            put_len(out, n.delivery_count);
        }
        put_len(out, g.consumers().len() as u64);
        for c in g.consumers() {
            put_str(out, c.name());
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            if v3 {
                out.extend_from_slice(&c.active_time.to_le_bytes());
            }
            put_len(out, c.pending().len() as u64);
            for id in c.pending() {
                out.extend_from_slice(&id_bytes(*id));
            }
        }
    }
    if v3 {
        VERSION_3
    } else {
        VERSION_2
    }
}

/// The next listpack element as an integer (a string that parses counts).
fn int<'a>(it: &mut impl Iterator<Item = Elem<'a>>) -> Result<i64, RdbError> {
    it.next().and_then(Elem::as_i64).ok_or(RdbError::BAD)
}

/// A count read from a listpack: non-negative and at most `left`.
fn small<'a>(it: &mut impl Iterator<Item = Elem<'a>>, left: usize) -> Result<usize, RdbError> {
    usize::try_from(int(it)?).ok().filter(|&n| n <= left).ok_or(RdbError::BAD)
}

/// A node from its key and listpack, with how many entries it had taken
/// (live and deleted).
fn read_node(base: StreamId, blob: &[u8]) -> Result<(PackedNode, u64), RdbError> {
    let elems = packed::listpack(blob)?;
    let total = elems.len();
    let mut it = elems.into_iter();
    let live = small(&mut it, total)?;
    let deleted = small(&mut it, total)?;
    let nmaster = small(&mut it, total)?;
    let master: Vec<Vec<u8>> = it.by_ref().take(nmaster).map(Elem::to_vec).collect();
    if master.len() != nmaster || int(&mut it)? != 0 {
        return Err(RdbError::BAD);
    }
    let mut entries = Vec::with_capacity(live);
    let mut tombstones = 0;
    for _ in 0..live.checked_add(deleted).ok_or(RdbError::BAD)? {
        let flags = int(&mut it)?;
        let id = StreamId::new(base.ms.wrapping_add(int(&mut it)? as u64), base.seq.wrapping_add(int(&mut it)? as u64));
        let mut fields = Vec::new();
        let count = if flags & FLAG_SAMEFIELDS != 0 {
            for f in &master {
                fields.push(f.clone());
                fields.push(it.next().ok_or(RdbError::BAD)?.to_vec());
            }
            nmaster + 3
        } else {
            let n = small(&mut it, total)?;
            for _ in 0..2 * n {
                fields.push(it.next().ok_or(RdbError::BAD)?.to_vec());
            }
            2 * n + 4
        };
        if int(&mut it)? != count as i64 {
            return Err(RdbError::BAD);
        }
        if flags & FLAG_DELETED != 0 {
            tombstones += 1;
        } else {
            entries.push(Entry { id, fields });
        }
    }
    if it.next().is_some() || entries.len() != live || tombstones != deleted {
        return Err(RdbError::BAD);
    }
    Ok((PackedNode { base, master, entries }, (live + deleted) as u64))
}

impl Reader<'_> {
    fn stream_id(&mut self) -> Result<StreamId, RdbError> {
        Ok(StreamId::new(self.len()?, self.len()?))
    }

    fn raw_id(&mut self) -> Result<StreamId, RdbError> {
        id_from(self.take(16)?)
    }

    /// A counter that densekv's arithmetic keeps in an i64.
    fn counter(&mut self) -> Result<u64, RdbError> {
        self.len().ok().filter(|&n| i64::try_from(n).is_ok()).ok_or(RdbError::BAD)
    }

    /// A stream of RDB type `t` (15, 19 or 21).
    pub(super) fn stream(&mut self, t: u8) -> Result<Value, RdbError> {
        let mut s = Stream::new();
        let nodes = self.count(2)?;
        for _ in 0..nodes {
            let base = id_from(&self.string()?)?;
            let blob = self.string()?;
            let (node, taken) = read_node(base, &blob).map_err(|_| RdbError::because("Stream listpack integrity check failed."))?;
            if !s.load_node(&node, taken) {
                return Err(RdbError::BAD);
            }
        }
        if self.len()? != s.len() {
            return Err(RdbError::BAD);
        }
        let last = self.stream_id()?;
        let loaded = if t == ty::STREAM_LISTPACKS {
            s.load_meta(last, None, StreamId::MIN, s.len())
        } else {
            let first = self.stream_id()?;
            let max_deleted = self.stream_id()?;
            let added = self.counter()?;
            s.load_meta(last, Some(first), max_deleted, added)
        };
        if !loaded {
            return Err(RdbError::BAD);
        }
        let groups = self.count(3)?;
        for _ in 0..groups {
            let name = self.string()?;
            let last_id = self.stream_id()?;
            let entries_read = if t == ty::STREAM_LISTPACKS {
                s.estimate_entries_read(last_id).unwrap_or(INVALID_ENTRIES_READ)
            } else {
                match self.len()? {
                    u64::MAX => INVALID_ENTRIES_READ,
                    n => i64::try_from(n).map_err(|_| RdbError::BAD)?,
                }
            };
            if !s.create_group(&name, last_id, entries_read) {
                return Err(RdbError::BAD); // duplicate group
            }
            let g = s.group_mut(&name).ok_or(RdbError::BAD)?;
            for _ in 0..self.count(16 + 8 + 1)? {
                let id = self.raw_id()?;
                let time = self.millis()?;
                let count = self.len()?;
                if time < 0 || !g.load_pending(id, time, count) {
                    return Err(RdbError::BAD);
                }
            }
            for _ in 0..self.count(1 + 8 + 1)? {
                let cname = self.string()?;
                let seen = self.millis()?;
                let active = if t == ty::STREAM_LISTPACKS_3 { self.millis()? } else { seen };
                let n = self.count(16)?;
                let mut ids = Vec::with_capacity(n);
                for _ in 0..n {
                    ids.push(self.raw_id()?);
                }
                if seen < 0 || active < -1 {
                    return Err(RdbError::BAD);
                }
                if g.consumer(&cname).is_some() {
                    return Err(RdbError::because("Duplicate stream consumer detected."));
                }
                if !g.load_consumer(&cname, seen, active, &ids) {
                    return Err(RdbError::BAD);
                }
            }
            if g.pending().iter().any(|(_, n)| n.consumer.is_none()) {
                return Err(RdbError::because("Stream CG PEL entry without consumer"));
            }
        }
        Ok(Value::Stream(Box::new(s)))
    }
}
