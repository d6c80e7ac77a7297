//! Strings kept below their raw size: FSST symbol tables that the keyspace
//! trains itself, per key pattern, and the stored form of a string
//! compressed with one of them.
//!
//! ```text
//!   | table u8 | raw len (LEB128 varint) | codes |
//!   table:  bits 0-5 the table's id in `Tables` (0..MAX_TABLES)
//!           bit 6    the codec: 0 FSST; 1 a zstd frame if the raw
//!                    length is `zdict::MIN_LEN` or more, a shape's
//!                    numbers (encoding/shape.rs) if it is less (`ZSTD`)
//!           bit 7    the "raw" mark of a string edited in place (OBJECT
//!                    ENCODING; see keyspace/rawmark.rs)
//!   codes:  FSST: code c < 255 stands for the table's symbol c (1-8
//!           bytes), 255 (escape) is followed by one literal byte;
//!           zstd: one magicless frame under the table's dictionary
//!           (encoding/zdict.rs); shape: the numbers of the value's holes
//! ```
//!
//! Two codecs, chosen by a value's length: on seed 002's 46-byte session
//! JSON a 256-symbol FSST table gives 13.4 bytes of codes a value and
//! decodes in about 30 ns, where zstd with a trained dictionary gives 23-24
//! bytes (its frame and block headers alone are 5) and decodes in 150-200 ns;
//! on records of several hundred bytes zstd with a 16 KiB dictionary packs
//! about twice as tight as FSST (docs/design/compression.md has the
//! figures). So a table holds FSST symbols and, where its pattern's samples
//! include enough values of `zdict::MIN_LEN` bytes and more, a zstd
//! dictionary trained from those same samples; values of that length are
//! packed with zstd, shorter ones with FSST. And where most of the samples
//! share one text with numbers in it (ids, counters, timestamps in a fixed
//! JSON record), the table holds that shape too: a short value of the shape
//! is stored as its numbers alone (7 bytes of seed 002's 46-byte sessions,
//! where FSST gives 13), and encoding it is a compare and a parse instead of
//! FSST's lookups; a value that does not fit the shape takes FSST.
//!
//! A value is stored packed only when the form above is shorter than the
//! value itself; `Tables::pack` says so. The raw length is kept so STRLEN and
//! the encoding answers need no decoding, and so a decoder can check that
//! the codes give exactly that many bytes. Decoding is our own safe code
//! (the crate's decoder trusts its input); `unpack` checks every code
//! against the table and refuses anything malformed, so arbitrary bytes
//! never panic it (fuzz/fuzz_targets/packed_value.rs).
//!
//! Tables: at most `MAX_TABLES`, each about 18 KiB of encoding index on
//! seed 002's sessions and at most 33 KiB
//! (fsstenc.rs: the fsst-rs crate trains the symbols, our own encoder packs
//! with them) and 2.3 KiB of decoding symbols, counted in used_memory as
//! every heap byte is; at most `MAX_DICTS` of them
//! also hold a zstd dictionary (prepared for both directions, at most
//! `DICT_MEMORY` bytes together, allocated through the same allocator so
//! used_memory counts them alike). A table is trained from
//! `SAMPLES` values of a pattern (a key's bytes up to its first ':' or
//! digit): about a millisecond on the executor, so there is no background
//! thread. When a pattern's values drift (recent packed sizes 25% worse than
//! at training; for a table with a zstd dictionary, than over its first
//! `DRIFT_WINDOW` values, since a dictionary holds much of its own samples
//! and packs them far better than anything else) its table is retrained
//! from new samples; the old table
//! stays readable for the values that use it and is freed when the last of
//! them goes.

use std::collections::HashMap;
use std::sync::Arc;

use super::fsstenc::{Encoder, ESCAPE};
use super::shape::Shape;
use super::zdict::{self, Dict};
use super::{put_varint, read_varint, same};

/// Most tables a keyspace holds at once (ids fit in 6 bits).
pub const MAX_TABLES: usize = 64;
/// Most tables that also hold a zstd dictionary.
pub const MAX_DICTS: usize = 16;
/// Most bytes of prepared zstd dictionaries a keyspace holds: a table
/// whose new dictionary would pass it keeps FSST only.
pub const DICT_MEMORY: usize = 8 << 20;
/// Longest value packed (with zstd; FSST stops at `MAX_LEN`).
pub const MAX_ZLEN: usize = 64 * 1024;
/// Values of one pattern sampled before a table is trained.
pub const SAMPLES: usize = 256;
/// Values shorter than this are never packed (no room to save anything
/// after the header).
pub const MIN_LEN: usize = 12;
/// Largest value sampled and packed: longer ones go raw (zstd territory).
pub const MAX_LEN: usize = 4096;
/// Most patterns being sampled at once (with `SAMPLE_BYTES`, a bound on
/// sample memory: 4 MiB).
const MAX_SAMPLING: usize = 64;
/// Most bytes of samples kept for one pattern: training starts when they
/// are reached even before `SAMPLES` values.
const SAMPLE_BYTES: usize = 64 * 1024;
/// Values packed between two drift checks of a table.
const DRIFT_WINDOW: u64 = 4096;

/// The raw mark in the first byte of the packed form.
pub const RAW_MARK: u8 = 0x80;
/// The codec bit in the first byte: the codes are a zstd frame (a value of
/// `zdict::MIN_LEN` bytes or more) or a shape's numbers (a shorter one).
pub const ZSTD: u8 = 0x40;
/// The table id in the first byte.
const ID_MASK: u8 = 0x3F;

/// One trained table.
struct Table {
    /// The encoding index of the symbols (fsstenc.rs), shared read-only
    /// with a `PackView` (never changed after training).
    enc: Arc<Encoder>,
    /// Decoding symbols, little-endian, and their lengths.
    syms: Vec<u64>,
    lens: Vec<u8>,
    /// The zstd dictionary for values of `zdict::MIN_LEN` bytes and more,
    /// if the samples had enough of them (and the caps allowed it);
    /// shared read-only with a `PackView` like `enc`.
    dict: Option<Arc<Dict>>,
    /// The text most samples share with numbers in it, if they did;
    /// shared read-only with a `PackView` like `enc`.
    shape: Option<Arc<Shape>>,
    /// Which training made it (`PackStats::trained` then): a `PackView`'s
    /// form is accepted only from the table that is still current.
    serial: u64,
    /// Stored values that use this table.
    refs: u64,
    /// The pattern it was trained for, while it is that pattern's current
    /// table (None once replaced: freed when `refs` reaches 0).
    pattern: Option<Vec<u8>>,
    /// Raw and packed bytes at training: over the samples (FSST only), or
    /// over the first `DRIFT_WINDOW` values packed (with a zstd
    /// dictionary: (0, 0) until then).
    trained: (u64, u64),
    /// Raw and packed bytes since the last drift check.
    window: (u64, u64, u64),
}

/// Counters for INFO.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PackStats {
    /// Live tables.
    pub tables: usize,
    /// Values stored packed now.
    pub values: u64,
    /// Their raw bytes.
    pub raw_bytes: u64,
    /// Their stored (packed) bytes, header included.
    pub packed_bytes: u64,
    /// Tables trained so far (retraining included).
    pub trained: u64,
    /// Tables freed so far.
    pub freed: u64,
    /// Live tables that hold a zstd dictionary.
    pub dicts: usize,
    /// Bytes of their prepared dictionaries.
    pub dict_bytes: usize,
    /// Values stored packed with zstd now (part of `values`).
    pub zstd_values: u64,
    /// Live tables that hold a shape.
    pub shapes: usize,
    /// Values stored as a shape's numbers now (part of `values`).
    pub shape_values: u64,
}

/// The tables of one keyspace, and the samples being gathered for new ones.
#[derive(Default)]
pub struct Tables {
    tables: Vec<Option<Table>>,
    current: HashMap<Vec<u8>, u8>,
    sampling: HashMap<Vec<u8>, Vec<Vec<u8>>>,
    stats: PackStats,
    /// The zstd compression context.
    coder: zdict::Coder,
    /// The table the last write found current (a hint: `current_id`
    /// checks it), so a run of writes to one pattern skips hashing it.
    last: usize,
    /// Bumped whenever a pattern gets or loses its current table, so a
    /// `PackView` can tell it is out of date (`Tables::version`).
    changes: u64,
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables").field("stats", &self.stats).finish()
    }
}

/// The pattern a key belongs to: its bytes up to (not including) the
/// first ':' or ASCII digit, at most 32 bytes. `session:ab12..` and
/// `session:99..` share `session`; `key17` is `key`.
pub fn pattern_of(key: &[u8]) -> &[u8] {
    let end = key.iter().position(|&c| c == b':' || c.is_ascii_digit()).unwrap_or(key.len());
    &key[..end.min(32)]
}

/// The raw length a packed form states (O(1)); None if malformed.
pub fn raw_len(packed: &[u8]) -> Option<usize> {
    read_varint(packed.get(1..)?).map(|(n, _)| n)
}

/// True if the packed form carries the raw mark.
pub fn is_marked_raw(packed: &[u8]) -> bool {
    packed.first().is_some_and(|b| b & RAW_MARK != 0)
}

/// The table id of a packed form.
pub fn table_of(packed: &[u8]) -> u8 {
    packed[0] & ID_MASK
}

/// How a packed form's codes are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Fsst,
    Zstd,
    Shape,
}

/// The codec of a packed form (FSST if malformed).
pub fn codec_of(packed: &[u8]) -> Codec {
    match (packed.first(), raw_len(packed)) {
        (Some(&first), Some(len)) => codec_from(first, len),
        _ => Codec::Fsst,
    }
}

/// The codec a form's first byte and raw length name.
fn codec_from(first: u8, raw: usize) -> Codec {
    match (first & ZSTD != 0, raw >= zdict::MIN_LEN) {
        (false, _) => Codec::Fsst,
        (true, true) => Codec::Zstd,
        (true, false) => Codec::Shape,
    }
}

/// True if the packed form is a zstd frame.
pub fn is_zstd(packed: &[u8]) -> bool {
    codec_of(packed) == Codec::Zstd
}

/// The codecs of one table, borrowed for `encode`.
#[derive(Clone, Copy)]
struct Codecs<'a> {
    enc: &'a Encoder,
    dict: Option<&'a Dict>,
    shape: Option<&'a Shape>,
}

/// Writes the packed form of `value` under table `id` into `out` (cleared
/// first): the shape's numbers if the table has a shape and the value fits
/// it; one zstd frame if the table has a dictionary, the value is long
/// enough and the frame leaves the form shorter than the value; else FSST
/// codes. Returns the codec, or None if none applies (too long for
/// FSST). The form may be no shorter than the value: the caller decides.
/// Depends only on the table, so any thread makes the same bytes.
fn encode(c: Codecs, coder: &mut zdict::Coder, id: u8, value: &[u8], out: &mut Vec<u8>) -> Option<Codec> {
    out.clear();
    if let Some(s) = c.shape.filter(|_| value.len() < zdict::MIN_LEN) {
        out.push(id | ZSTD);
        put_varint(out, value.len());
        if s.encode(value, out) {
            return Some(Codec::Shape);
        }
        out.clear();
    }
    let (enc, dict) = (c.enc, c.dict);
    if let Some(d) = dict.filter(|_| value.len() >= zdict::MIN_LEN) {
        out.push(id | ZSTD);
        put_varint(out, value.len());
        // Only a frame that leaves the whole form shorter than the
        // value is worth keeping.
        let room = value.len() - out.len() - 1;
        if coder.compress(d, value, room, out) {
            return Some(Codec::Zstd);
        }
        out.clear();
    }
    if value.len() > MAX_LEN {
        return None;
    }
    out.push(id);
    put_varint(out, value.len());
    enc.encode(value, out);
    Some(Codec::Fsst)
}

/// What a `ViewPacker` made of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepacked {
    /// Nothing: no table for its pattern in the view, or a length that is
    /// never packed. `Tables::pack` decides on the executor.
    None,
    /// A form made with the table of training `serial` in `codec`,
    /// possibly no shorter than the value.
    Form { serial: u64, codec: Codec },
}

/// One current table as a `PackView` holds it.
#[derive(Clone)]
struct ViewTable {
    pattern: Vec<u8>,
    id: u8,
    serial: u64,
    enc: Arc<Encoder>,
    dict: Option<Arc<Dict>>,
    shape: Option<Arc<Shape>>,
}

impl ViewTable {
    fn codecs(&self) -> Codecs<'_> {
        Codecs { enc: &self.enc, dict: self.dict.as_deref(), shape: self.shape.as_deref() }
    }
}

/// A read-only copy of a keyspace's current tables (`Tables::view`),
/// sendable to another thread: an RDB load packs values there while the
/// executor parses and inserts. Tables never change after training, so a
/// form made here is byte for byte the one `Tables::pack` makes with the
/// same table; `Tables::accept` takes it only while that table is still
/// its pattern's current one.
#[derive(Clone, Default)]
pub struct PackView {
    tables: Vec<ViewTable>,
}

/// Packs values with a `PackView`, with its own zstd context and buffer.
#[derive(Default)]
pub struct ViewPacker {
    view: PackView,
    coder: zdict::Coder,
    /// Index in `view.tables` of the last hit.
    last: usize,
}

impl ViewPacker {
    /// Packs with `view` from now on.
    pub fn set_view(&mut self, view: PackView) {
        self.view = view;
        self.last = 0;
    }

    /// Writes into `out` the form `Tables::pack` would make of `value` of
    /// `key` with the view's table for its pattern, if there is one.
    pub fn pack(&mut self, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Prepacked {
        if value.len() < MIN_LEN || value.len() > MAX_ZLEN {
            return Prepacked::None;
        }
        let pattern = pattern_of(key);
        let hit = match self.view.tables.get(self.last) {
            Some(t) if t.pattern == pattern => Some(self.last),
            _ => self.view.tables.iter().position(|t| t.pattern == pattern),
        };
        let Some(i) = hit else { return Prepacked::None };
        self.last = i;
        let t = &self.view.tables[i];
        match encode(t.codecs(), &mut self.coder, t.id, value, out) {
            Some(codec) => Prepacked::Form { serial: t.serial, codec },
            None => Prepacked::None,
        }
    }
}

impl Table {
    fn codecs(&self) -> Codecs<'_> {
        Codecs { enc: &self.enc, dict: self.dict.as_deref(), shape: self.shape.as_deref() }
    }

    /// Trains FSST symbols from all `samples`, the shape most of them
    /// share if they do, and, if `dict` allows, a zstd dictionary from
    /// those of `zdict::MIN_LEN` bytes and more.
    fn new(samples: &[Vec<u8>], pattern: Vec<u8>, dict: bool, serial: u64) -> Table {
        let refs: Vec<&[u8]> = samples.iter().map(|v| &v[..]).collect();
        // The crate trains the symbols; our own index encodes with them
        // (about 18 KiB on sessions, where the crate's lookup structures,
        // kept for the table's life, are 160 KiB).
        let comp = fsst::Compressor::train(&refs);
        let syms: Vec<u64> = comp.symbol_table().iter().map(|s| s.to_u64()).collect();
        let lens = comp.symbol_lengths().to_vec();
        drop(comp);
        let enc = Arc::new(Encoder::new(&syms, &lens));
        let dict = if dict {
            let large: Vec<&[u8]> = refs.iter().copied().filter(|v| v.len() >= zdict::MIN_LEN).collect();
            Dict::train(&large).map(Arc::new)
        } else {
            None
        };
        let shape = Shape::train(samples).map(Arc::new);
        let mut t = Table { enc, syms, lens, dict, shape, serial, refs: 0, pattern: Some(pattern), trained: (0, 0), window: (0, 0, 0) };
        if t.dict.is_none() {
            t.measure(samples);
        }
        t
    }

    /// Sets the drift baseline to the packed share of `samples` (shape or
    /// FSST, as each would be packed; header included, and no more than
    /// the value, as the drift window counts them).
    fn measure(&mut self, samples: &[Vec<u8>]) {
        let raw: u64 = samples.iter().map(|v| v.len() as u64).sum();
        let mut form = Vec::new();
        let codecs = Codecs { dict: None, ..self.codecs() };
        let mut coder = zdict::Coder::default();
        let packed: u64 = samples
            .iter()
            .map(|v| {
                let len = match encode(codecs, &mut coder, 0, v, &mut form) {
                    Some(_) => form.len(),
                    None => v.len(),
                };
                len.min(v.len()) as u64
            })
            .sum();
        self.trained = (raw, packed);
    }

    /// Decodes `codes` into `out`, expecting exactly `len` bytes.
    fn decode(&self, codes: &[u8], len: usize, out: &mut Vec<u8>) -> Option<()> {
        // A code gives at most 8 bytes: a longer stated length is malformed
        // (and must not size an allocation).
        if len > codes.len() * 8 {
            return None;
        }
        let start = out.len();
        out.reserve(len);
        let mut i = 0;
        while i < codes.len() {
            let c = codes[i];
            if c == ESCAPE {
                out.push(*codes.get(i + 1)?);
                i += 2;
            } else {
                let sym = self.syms.get(c as usize)?.to_le_bytes();
                out.extend_from_slice(&sym[..self.lens[c as usize] as usize]);
                i += 1;
            }
            if out.len() - start > len {
                return None;
            }
        }
        (out.len() - start == len).then_some(())
    }
}

impl Tables {
    /// Counters for INFO.
    pub fn stats(&self) -> PackStats {
        let live = self.tables.iter().flatten();
        let dicts = live.clone().filter_map(|t| t.dict.as_ref());
        PackStats {
            shapes: live.clone().filter(|t| t.shape.is_some()).count(),
            tables: live.count(),
            dicts: dicts.clone().count(),
            dict_bytes: dicts.map(|d| d.bytes()).sum(),
            ..self.stats
        }
    }

    /// Packs `value` of `key` into `out` (cleared first) if a table for its
    /// pattern exists and the packed form is shorter than `value`; returns
    /// true then (the caller must store it, and call `release` when the
    /// stored value goes). Otherwise samples the value toward a table for
    /// its pattern (training one when enough are gathered) and returns
    /// false.
    pub fn pack(&mut self, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> bool {
        if value.len() < MIN_LEN || value.len() > MAX_ZLEN {
            return false;
        }
        let pattern = pattern_of(key);
        let Some(id) = self.current_id(pattern) else {
            if value.len() <= MAX_LEN {
                self.sample(pattern, value);
            }
            return false;
        };
        let t = self.tables[id as usize].as_ref().expect("current table is live");
        let Some(codec) = encode(t.codecs(), &mut self.coder, id, value, out) else {
            return false;
        };
        self.account(id, value.len(), out.len(), codec)
    }

    /// Counts a form of `len` bytes made with table `id` (current) for a
    /// value of `raw` bytes: the drift window (which may retire the table),
    /// then, if the form is shorter than the value, its reference and
    /// INFO's counters. Returns true if the form is to be stored.
    #[inline]
    fn account(&mut self, id: u8, raw: usize, len: usize, codec: Codec) -> bool {
        let t = self.tables[id as usize].as_mut().expect("current table is live");
        t.window.0 += raw as u64;
        t.window.1 += len.min(raw) as u64;
        t.window.2 += 1;
        if t.window.2 >= DRIFT_WINDOW {
            let (w_raw, w_packed, _) = std::mem::take(&mut t.window);
            if t.trained.0 == 0 {
                // The first window of a table with a dictionary: its baseline.
                t.trained = (w_raw, w_packed);
            } else if w_packed * t.trained.0 * 4 > 5 * t.trained.1 * w_raw {
                // Drifted: packed share 25% worse than at training.
                let p = t.pattern.take().expect("current table has a pattern");
                self.current.remove(&p);
                self.changes += 1;
                if t.refs == 0 {
                    self.tables[id as usize] = None;
                    self.stats.freed += 1;
                    return false;
                }
            }
        }
        if len >= raw {
            return false;
        }
        let t = self.tables[id as usize].as_mut().expect("the table is in use");
        t.refs += 1;
        self.stats.values += 1;
        self.count_codec(codec, 1);
        self.stats.raw_bytes += raw as u64;
        self.stats.packed_bytes += len as u64;
        true
    }

    /// `pack` for a value whose form a `ViewPacker` made (`pre`, `len`
    /// bytes; the caller holds them): Some(true) if that form is to be
    /// stored, counted exactly as `pack` counts it, Some(false) if the
    /// value is to be stored raw (as `pack` would decide with the same
    /// bytes), None if the form was made with a table that is not (or no
    /// longer) the pattern's current one, or with none: the caller must
    /// call `pack`, which samples or packs as it would have anyway. So a
    /// load that packs on another thread stores the same bytes as one
    /// that does not.
    pub fn accept(&mut self, key: &[u8], raw: usize, pre: Prepacked, len: usize) -> Option<bool> {
        let Prepacked::Form { serial, codec } = pre else { return None };
        let id = self.current_id(pattern_of(key))?;
        if self.tables[id as usize].as_ref().expect("current table is live").serial != serial {
            return None;
        }
        Some(self.account(id, raw, len, codec))
    }

    /// A number that changes whenever a pattern gets or loses its current
    /// table: a `PackView` taken at one version packs as `pack` does until
    /// the version changes.
    pub fn version(&self) -> u64 {
        self.changes
    }

    /// A read-only copy of the current tables, for a `ViewPacker` on
    /// another thread (the tables' encoders are shared, not copied).
    pub fn view(&self) -> PackView {
        let mut tables: Vec<ViewTable> = self
            .current
            .iter()
            .map(|(p, &id)| {
                let t = self.tables[id as usize].as_ref().expect("current table is live");
                ViewTable { pattern: p.clone(), id, serial: t.serial, enc: Arc::clone(&t.enc), dict: t.dict.clone(), shape: t.shape.clone() }
            })
            .collect();
        tables.sort_by_key(|t| t.id);
        PackView { tables }
    }

    /// The current table of `pattern`. A table's `pattern` is Some(p)
    /// exactly while `current` maps p to it, so the last hit is checked
    /// against it first (a compare of a few bytes instead of a hash).
    #[inline]
    fn current_id(&mut self, pattern: &[u8]) -> Option<u8> {
        if let Some(Some(t)) = self.tables.get(self.last) {
            if t.pattern.as_deref().is_some_and(|p| same(p, pattern)) {
                return Some(self.last as u8);
            }
        }
        let id = *self.current.get(pattern)?;
        self.last = id as usize;
        Some(id)
    }

    fn sample(&mut self, pattern: &[u8], value: &[u8]) {
        if !self.sampling.contains_key(pattern) {
            if self.tables.iter().flatten().count() >= MAX_TABLES {
                return;
            }
            if self.sampling.len() >= MAX_SAMPLING {
                // Full of patterns: drop the one with the fewest samples,
                // so rare prefixes seen early cannot keep a busy pattern
                // from ever being sampled.
                let least = self.sampling.iter().min_by_key(|(_, v)| v.len()).map(|(k, _)| k.clone()).expect("full");
                self.sampling.remove(&least);
            }
            self.sampling.insert(pattern.to_vec(), Vec::new());
        }
        let s = self.sampling.get_mut(pattern).expect("just ensured");
        s.push(value.to_vec());
        // Train at SAMPLES values, or sooner once they hold SAMPLE_BYTES
        // (large values), so samples never hold more than that a pattern.
        if s.len() < SAMPLES && s.iter().map(Vec::len).sum::<usize>() < SAMPLE_BYTES {
            return;
        }
        let samples = self.sampling.remove(pattern).expect("present");
        let id = match self.tables.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.tables.len() < MAX_TABLES => {
                self.tables.push(None);
                self.tables.len() - 1
            }
            None => return,
        };
        let dicts = self.tables.iter().flatten().filter_map(|t| t.dict.as_ref());
        let room = dicts.clone().count() < MAX_DICTS;
        let used: usize = dicts.map(|d| d.bytes()).sum();
        let mut t = Table::new(&samples, pattern.to_vec(), room, self.stats.trained);
        if t.dict.as_ref().is_some_and(|d| used + d.bytes() > DICT_MEMORY) {
            // Over the memory cap: this pattern keeps FSST only.
            t.dict = None;
            t.measure(&samples);
        }
        self.tables[id] = Some(t);
        self.current.insert(pattern.to_vec(), id as u8);
        self.stats.trained += 1;
        self.changes += 1;
    }

    /// Notes that a stored packed value went away (deleted, overwritten or
    /// rewritten); frees its table when nothing uses it and it is no
    /// longer current.
    #[inline]
    pub fn release(&mut self, packed: &[u8]) {
        let id = table_of(packed) as usize;
        let raw = raw_len(packed).expect("stored form is valid");
        self.count_codec(codec_from(packed[0], raw), -1);
        let t = self.tables[id].as_mut().expect("a stored value's table is live");
        t.refs -= 1;
        self.stats.values -= 1;
        self.stats.raw_bytes -= raw as u64;
        self.stats.packed_bytes -= packed.len() as u64;
        if t.refs == 0 && t.pattern.is_none() {
            self.tables[id] = None;
            self.stats.freed += 1;
        }
    }

    /// Notes a stored packed value that was copied into a new blob (the
    /// same bytes stored again, e.g. with a new deadline).
    pub fn retain(&mut self, packed: &[u8]) {
        let raw = raw_len(packed).expect("stored form is valid");
        self.count_codec(codec_from(packed[0], raw), 1);
        let t = self.tables[table_of(packed) as usize].as_mut().expect("live table");
        t.refs += 1;
        self.stats.values += 1;
        self.stats.raw_bytes += raw as u64;
        self.stats.packed_bytes += packed.len() as u64;
    }

    /// Adds `n` (1 or -1) to the values counted for `codec`.
    #[inline]
    fn count_codec(&mut self, codec: Codec, n: i64) {
        match codec {
            Codec::Zstd => self.stats.zstd_values = self.stats.zstd_values.wrapping_add_signed(n),
            Codec::Shape => self.stats.shape_values = self.stats.shape_values.wrapping_add_signed(n),
            Codec::Fsst => {}
        }
    }

    /// Appends the raw bytes of `packed` to `out`. None if the form is
    /// malformed or names no live table (never for stored values).
    pub fn unpack(&self, packed: &[u8], out: &mut Vec<u8>) -> Option<()> {
        let first = *packed.first()?;
        let (len, n) = read_varint(&packed[1..])?;
        let t = self.tables.get((first & ID_MASK) as usize)?.as_ref()?;
        if first & ZSTD != 0 && len < zdict::MIN_LEN {
            return t.shape.as_deref()?.decode(&packed[1 + n..], len, out);
        }
        if first & ZSTD != 0 {
            // The stated length sizes the output buffer: bound it first.
            if len > MAX_ZLEN {
                return None;
            }
            return zdict::decompress(t.dict.as_deref()?, &packed[1 + n..], len, out);
        }
        let start = out.len();
        let r = t.decode(&packed[1 + n..], len, out);
        if r.is_none() {
            out.truncate(start);
        }
        r
    }

    /// Trains a table for `pattern` from `samples` at once (tests, fuzzing).
    pub fn train_now(&mut self, pattern: &[u8], samples: &[Vec<u8>]) {
        for s in samples.iter().cycle().take(SAMPLES) {
            self.sample(pattern, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn session(i: u64) -> Vec<u8> {
        format!("{{\"user_id\":{},\"ts\":{},\"role\":\"u\"}}", 1_000_000 + i * 2_654_435_761 % 9_000_000, 1_700_000_000 + i * 40_503 % 2_592_000).into_bytes()
    }

    /// Packs `v` (pattern `p`) and, where it is stored packed, checks the
    /// form (shorter than `v`, stating its length, unpacking to it) and
    /// returns it.
    fn pack_and_check(t: &mut Tables, v: &[u8]) -> Result<Option<Vec<u8>>, TestCaseError> {
        let mut out = Vec::new();
        if !t.pack(b"p:x", v, &mut out) {
            return Ok(None);
        }
        prop_assert!(out.len() < v.len());
        prop_assert_eq!(raw_len(&out), Some(v.len()));
        let mut back = Vec::new();
        t.unpack(&out, &mut back).unwrap();
        prop_assert_eq!(&back[..], v);
        Ok(Some(out))
    }

    #[test]
    fn sessions_pack_to_a_third() {
        let mut t = Tables::default();
        let mut out = Vec::new();
        for i in 0..SAMPLES as u64 {
            assert!(!t.pack(b"session:ab", &session(i), &mut out));
        }
        assert_eq!(t.stats().tables, 1);
        let (mut raw, mut packed) = (0, 0);
        for i in 1000..2000 {
            let v = session(i);
            assert!(t.pack(b"session:cd", &v, &mut out));
            assert_eq!(raw_len(&out), Some(v.len()));
            let mut back = Vec::new();
            t.unpack(&out, &mut back).unwrap();
            assert_eq!(back, v);
            raw += v.len();
            packed += out.len();
        }
        assert!(packed * 2 < raw, "{packed} of {raw}");
        assert_eq!(t.stats().values, 1000);
    }

    #[test]
    fn rare_patterns_do_not_starve_a_busy_one() {
        let mut t = Tables::default();
        let mut out = Vec::new();
        for i in 0..200 {
            t.pack(format!("rare{}x:1", "y".repeat(i)).as_bytes(), b"some value of a rare pattern", &mut out);
        }
        for i in 0..SAMPLES as u64 {
            t.pack(b"session:1", &session(i), &mut out);
        }
        assert!(t.pack(b"session:2", &session(9999), &mut out));
        assert!(t.sampling.len() <= MAX_SAMPLING);
    }

    #[test]
    fn large_values_train_early() {
        let mut t = Tables::default();
        let mut out = Vec::new();
        let v: Vec<u8> = b"{\"name\":\"a structure\",\"members\":{}} ".repeat(100);
        for _ in 0..SAMPLE_BYTES / v.len() + 1 {
            t.pack(b"big:1", &v, &mut out);
        }
        assert_eq!(t.stats().tables, 1);
    }

    #[test]
    fn a_replaced_table_lives_until_its_last_value_goes() {
        let mut t = Tables::default();
        let mut out = Vec::new();
        t.train_now(b"s", &[b"aaaaaaaaaaaaaaaaaaaaaaaa".to_vec()]);
        assert!(t.pack(b"s:1", b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &mut out));
        let kept = out.clone();
        // Drift: values unlike the samples, until the window closes.
        let odd: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
        for _ in 0..DRIFT_WINDOW {
            t.pack(b"s:2", &odd, &mut out);
        }
        assert!(!t.current.contains_key(&b"s"[..]), "drift retires the table");
        assert_eq!(t.stats().tables, 1, "still used by a stored value");
        let mut back = Vec::new();
        t.unpack(&kept, &mut back).unwrap();
        assert_eq!(back, b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        t.release(&kept);
        assert_eq!(t.stats().tables, 0);
        assert_eq!(t.stats().values, 0);
    }

    /// A record of a few hundred bytes, alike across `i` (an API shape).
    fn shape(i: u64) -> Vec<u8> {
        format!(
            "{{\"name\":\"Describe{i}Request\",\"type\":\"structure\",\"members\":{{\"InstanceIds\":{{\"shape\":\"InstanceIdStringList\",\"documentation\":\"<p>The IDs of the instances ({}).</p>\",\"locationName\":\"InstanceId\"}},\"DryRun\":{{\"shape\":\"Boolean\",\"documentation\":\"<p>Checks whether you have the required permissions for the action.</p>\"}},\"MaxResults\":{{\"shape\":\"Integer\"}}}}}}",
            i * 7919 % 1_000_003
        )
        .into_bytes()
    }

    #[test]
    fn large_values_pack_with_zstd() {
        let mut t = Tables::default();
        let mut out = Vec::new();
        for i in 0..SAMPLES as u64 {
            t.pack(b"shape:1", &shape(i), &mut out);
        }
        let st = t.stats();
        assert_eq!((st.tables, st.dicts), (1, 1));
        assert!(st.dict_bytes > 0);
        let (mut raw, mut packed) = (0, 0);
        let mut kept = Vec::new();
        // Values after training, in the loop above, were packed too.
        let before = st.zstd_values;
        for i in 1000..1100 {
            let v = shape(i);
            assert!(t.pack(b"shape:2", &v, &mut out));
            assert!(is_zstd(&out));
            assert_eq!(raw_len(&out), Some(v.len()));
            let mut back = Vec::new();
            t.unpack(&out, &mut back).unwrap();
            assert_eq!(back, v);
            raw += v.len();
            packed += out.len();
            kept.push(out.clone());
        }
        assert!(packed * 4 < raw, "{packed} of {raw}");
        // Short values of the same pattern still go through FSST.
        assert!(t.pack(b"shape:3", b"{\"name\":\"Describe1Request\"}", &mut out));
        assert!(!is_zstd(&out));
        t.release(&out);
        assert_eq!(t.stats().zstd_values, before + 100);
        // The raw mark leaves the codec and table readable.
        let mut marked = kept[0].clone();
        marked[0] |= RAW_MARK;
        let mut back = Vec::new();
        t.unpack(&marked, &mut back).unwrap();
        assert_eq!(back, shape(1000));
        for k in &kept {
            t.release(k);
        }
        assert_eq!(t.stats().zstd_values, before);
    }

    #[test]
    fn a_retired_zstd_table_lives_until_its_last_value_goes() {
        let mut t = Tables::default();
        let mut out = Vec::new();
        let samples: Vec<Vec<u8>> = (0..64).map(shape).collect();
        t.train_now(b"s", &samples);
        assert!(t.pack(b"s:1", &shape(5000), &mut out));
        assert!(is_zstd(&out));
        let kept = out.clone();
        // The first window sets the baseline (a dictionary packs its own
        // samples far better than other values, so they would not do).
        let mut good = Vec::new();
        for i in 0..DRIFT_WINDOW {
            assert!(t.pack(b"s:3", &shape(10_000 + i), &mut out));
            good.push(out.clone());
        }
        assert!(t.current.contains_key(&b"s"[..]), "like values do not retire it");
        // Bytes no codec can shorten (xorshift output).
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let odd: Vec<u8> = (0..600)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        for _ in 0..DRIFT_WINDOW {
            t.pack(b"s:2", &odd, &mut out);
        }
        assert!(!t.current.contains_key(&b"s"[..]), "drift retires the table");
        assert_eq!((t.stats().tables, t.stats().dicts), (1, 1));
        let mut back = Vec::new();
        t.unpack(&kept, &mut back).unwrap();
        assert_eq!(back, shape(5000));
        t.release(&kept);
        for g in &good {
            t.release(g);
        }
        assert_eq!((t.stats().tables, t.stats().dicts, t.stats().dict_bytes), (0, 0, 0));
    }

    #[test]
    fn dictionaries_are_capped() {
        let mut t = Tables::default();
        for p in 0..MAX_DICTS + 3 {
            let samples: Vec<Vec<u8>> = (0..64).map(|i| shape(i + 100 * p as u64)).collect();
            t.train_now(format!("p{}x", "y".repeat(p)).as_bytes(), &samples);
        }
        let st = t.stats();
        assert_eq!(st.tables, MAX_DICTS + 3);
        assert_eq!(st.dicts, MAX_DICTS);
        assert!(st.dict_bytes <= DICT_MEMORY);
    }

    #[test]
    fn a_zstd_form_with_a_huge_length_is_refused() {
        let mut t = Tables::default();
        let samples: Vec<Vec<u8>> = (0..64).map(shape).collect();
        t.train_now(b"s", &samples);
        let mut out = Vec::new();
        assert!(t.pack(b"s:1", &shape(1), &mut out));
        let mut bad = vec![out[0]];
        put_varint(&mut bad, MAX_ZLEN + 1);
        bad.extend_from_slice(&out[3..]);
        let mut back = Vec::new();
        assert!(t.unpack(&bad, &mut back).is_none());
        assert!(back.is_empty());
    }

    proptest! {
        /// Any bytes, under any table trained on any samples, come back
        /// exactly; packed only when shorter.
        #[test]
        fn round_trip(samples in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 1..20),
                      values in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..50)) {
            let mut t = Tables::default();
            t.train_now(b"p", &samples);
            let mut out = Vec::new();
            let mut kept = Vec::new();
            for v in &values {
                if t.pack(b"p:x", v, &mut out) {
                    prop_assert!(out.len() < v.len());
                    prop_assert_eq!(raw_len(&out), Some(v.len()));
                    let mut back = b"prefix".to_vec();
                    t.unpack(&out, &mut back).unwrap();
                    prop_assert_eq!(&back[6..], &v[..]);
                    kept.push(out.clone());
                }
            }
            for k in &kept {
                t.release(k);
            }
            prop_assert_eq!(t.stats().values, 0);
            prop_assert_eq!(t.stats().raw_bytes, 0);
        }

        /// The same with zstd: values of every length around and above
        /// `zdict::MIN_LEN`, some alike (shapes with noise), some not.
        #[test]
        fn round_trip_zstd(noise in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..30),
                           cut in prop::collection::vec(0usize..2000, 1..30)) {
            let mut t = Tables::default();
            let samples: Vec<Vec<u8>> = (0..64).map(shape).collect();
            t.train_now(b"p", &samples);
            let mut kept = Vec::new();
            for (i, (n, c)) in noise.iter().zip(&cut).enumerate() {
                let mut v = shape(i as u64);
                v.extend_from_slice(n);
                v.extend(std::iter::repeat_n(n.first().copied().unwrap_or(7), *c));
                v.truncate(c + 150);
                kept.extend(pack_and_check(&mut t, &v)?);
            }
            for k in &kept {
                t.release(k);
            }
            prop_assert_eq!(t.stats().values, 0);
            prop_assert_eq!(t.stats().zstd_values, 0);
        }

        /// The same with a shape: values of the samples' text with numbers
        /// in and out of the holes' ranges, leading zeros, other text.
        #[test]
        fn round_trip_shape(nums in prop::collection::vec((0u64..20_000_000, 0u64..5_000_000_000), 1..60),
                            noise in prop::collection::vec("[0-9a-z\\{\\}\":,]{0,6}", 1..60)) {
            let mut t = Tables::default();
            let samples: Vec<Vec<u8>> = (0..SAMPLES as u64).map(session).collect();
            t.train_now(b"p", &samples);
            prop_assert_eq!(t.stats().shapes, 1);
            let mut kept = Vec::new();
            for (i, ((a, b), n)) in nums.iter().zip(noise.iter().cycle()).enumerate() {
                let v = match i % 3 {
                    0 => format!("{{\"user_id\":{a},\"ts\":{b},\"role\":\"u\"}}"),
                    1 => format!("{{\"user_id\":0{a},\"ts\":{b},\"role\":\"u\"}}{n}"),
                    _ => format!("{{\"user_id\":{a},{n}\"ts\":{b},\"role\":\"u\"}}"),
                }.into_bytes();
                kept.extend(pack_and_check(&mut t, &v)?);
            }
            let shaped = kept.iter().filter(|k| codec_of(k) == Codec::Shape).count() as u64;
            prop_assert_eq!(t.stats().shape_values, shaped);
            for k in &kept {
                t.release(k);
            }
            prop_assert_eq!(t.stats().values, 0);
            prop_assert_eq!(t.stats().shape_values, 0);
        }

        /// Arbitrary bytes after a zstd header never panic the decoder.
        #[test]
        fn unpack_zstd_never_panics(len in 0usize..5000, b in prop::collection::vec(any::<u8>(), 0..400)) {
            let mut t = Tables::default();
            let samples: Vec<Vec<u8>> = (0..64).map(shape).collect();
            t.train_now(b"p", &samples);
            let mut form = vec![ZSTD];
            put_varint(&mut form, len);
            form.extend_from_slice(&b);
            let mut out = Vec::new();
            if t.unpack(&form, &mut out).is_some() {
                prop_assert_eq!(out.len(), len);
            } else {
                prop_assert!(out.is_empty());
            }
        }

        /// Arbitrary bytes never panic the decoder, and what it accepts
        /// has the length the header states.
        #[test]
        fn unpack_never_panics(b in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut t = Tables::default();
            t.train_now(b"p", &[session(1), session(2)]);
            let mut out = Vec::new();
            if t.unpack(&b, &mut out).is_some() {
                prop_assert_eq!(Some(out.len()), raw_len(&b));
            } else {
                prop_assert!(out.is_empty());
            }
        }
    }
}
