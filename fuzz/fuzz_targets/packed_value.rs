//! Fuzz target for the decoders of packed strings (encoding/packed.rs,
//! all three codecs: FSST, zstd frames (encoding/zdict.rs) and shapes'
//! numbers (encoding/shape.rs)) and packed keys
//! (encoding/keypack.rs): arbitrary bytes, read as a stored packed form
//! under a trained table, must decode to exactly the length their header
//! states or be refused, never panic. The first bytes
//! also pick sample values, so tables of every shape are tried; whatever
//! a table packs must unpack to itself, and likewise for keys (keypack's
//! form and number keys: a prefix id and a varint).
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use storage::encoding::keypack::{number_parts, packed_len, read_number, Prefixes};
use storage::encoding::packed::{raw_len, Tables, RAW_MARK, ZSTD};

thread_local! {
    static ZTABLE: RefCell<Tables> = RefCell::new({
        let mut z = Tables::default();
        let large: Vec<Vec<u8>> = (0..64u32)
            .map(|i| {
                format!("{{\"name\":\"Shape{i}\",\"type\":\"structure\",\"members\":{{\"Id\":{{\"shape\":\"String\",\"documentation\":\"<p>The ID {} of the resource, as returned by the describe call.</p>\"}},\"DryRun\":{{\"shape\":\"Boolean\"}}}}}}", i * 7919 % 1000).into_bytes()
            })
            .collect();
        z.train_now(b"z", &large);
        z
    });
    /// A table with a shape: seed 002's session records.
    static STABLE: RefCell<Tables> = RefCell::new({
        let mut t = Tables::default();
        let sessions: Vec<Vec<u8>> = (0..256u64)
            .map(|i| format!("{{\"user_id\":{},\"ts\":{},\"role\":\"u\"}}", 1_000_000 + i * 2_654_435_761 % 9_000_000, 1_700_000_000 + i * 40_503 % 2_592_000).into_bytes())
            .collect();
        t.train_now(b"s", &sessions);
        assert_eq!(t.stats().shapes, 1);
        t
    });
}

/// `rest` after a header of `head` and the varint `len`, read by `t`:
/// exactly `len` bytes, or refused with nothing written.
fn unpack_under(t: &Tables, head: u8, len: usize, rest: &[u8]) {
    let mut form = vec![head];
    let mut n = len;
    while n >= 0x80 {
        form.push(n as u8 | 0x80);
        n >>= 7;
    }
    form.push(n as u8);
    form.extend_from_slice(rest);
    let mut out = Vec::new();
    match t.unpack(&form, &mut out) {
        Some(()) => assert_eq!(out.len(), len),
        None => assert!(out.is_empty()),
    }
}

/// `value` packed by `t` under `key`, where it packs, is shorter and
/// unpacks to itself; the stored value is then let go.
fn pack_round_trip(t: &mut Tables, key: &[u8], value: &[u8]) {
    let mut packed = Vec::new();
    if t.pack(key, value, &mut packed) {
        assert!(packed.len() < value.len());
        let mut back = Vec::new();
        t.unpack(&packed, &mut back).expect("own packed form decodes");
        assert_eq!(back, value);
        t.release(&packed);
    }
}

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    let (samples, rest) = data.split_at(cut);
    let mut t = Tables::default();
    let chunks: Vec<Vec<u8>> = if samples.is_empty() { vec![b"{\"user_id\":1234567}".to_vec()] } else { samples.chunks(24).map(<[u8]>::to_vec).collect() };
    t.train_now(b"p", &chunks);
    let mut out = Vec::new();
    match t.unpack(rest, &mut out) {
        Some(()) => assert_eq!(Some(out.len()), raw_len(rest)),
        None => assert!(out.is_empty()),
    }
    pack_round_trip(&mut t, b"p:1", rest);
    // The zstd form: a table whose samples are large enough for a
    // dictionary (records of a shared template), trained once per process
    // (training a dictionary takes milliseconds, which would make each run
    // slow), the input read as a frame after a zstd header, and the input
    // packed.
    ZTABLE.with(|z| {
        let mut z = z.borrow_mut();
        let len = u16::from_le_bytes([data.get(1).copied().unwrap_or(0), data.get(2).copied().unwrap_or(0)]) as usize;
        unpack_under(&z, ZSTD | (cut as u8 & RAW_MARK), len, rest);
        out.clear();
        if z.unpack(rest, &mut out).is_some() {
            assert_eq!(Some(out.len()), raw_len(rest));
        }
        pack_round_trip(&mut z, b"z:1", rest);
    });
    // The shape form: the input as a shape's numbers under a length the
    // input's first byte picks (below zstd's least, so read as a shape),
    // and the input packed, the shape's way where it fits.
    STABLE.with(|t| {
        let mut t = t.borrow_mut();
        let len = data.get(1).map_or(46, |&b| usize::from(b % 200));
        unpack_under(&t, ZSTD | (cut as u8 & RAW_MARK), len, rest);
        pack_round_trip(&mut t, b"s:1", rest);
    });
    let mut prefixes = Prefixes::default();
    let mut key = Vec::new();
    prefixes.pack(b"session:00ff", &mut key);
    let mut back = Vec::new();
    if prefixes.unpack(rest, &mut back).is_some() {
        assert!(prefixes.eq(rest, &back));
        assert_eq!(packed_len(rest), Some(rest.len()));
    }
    assert!(packed_len(rest).is_none_or(|n| n <= rest.len()));
    if prefixes.pack(rest, &mut key) {
        assert_eq!(packed_len(&key), Some(key.len()));
        back.clear();
        prefixes.unpack(&key, &mut back).expect("own packed key decodes");
        assert_eq!(back, rest);
        assert!(prefixes.eq(&key, rest));
    }
    prefixes.number_id(b"key:");
    let id = cut as u8 % 10;
    back.clear();
    if prefixes.unpack_number(id, rest, &mut back).is_some() {
        assert!(prefixes.eq_number(id, rest, &back));
        assert!(read_number(rest).is_some());
    }
    if let Some((prefix, n)) = number_parts(rest) {
        if let Some(id) = prefixes.number_id(prefix) {
            let mut varint = Vec::new();
            let mut m = n;
            while m >= 0x80 {
                varint.push(m as u8 | 0x80);
                m >>= 7;
            }
            varint.push(m as u8);
            assert_eq!(read_number(&varint), Some(n));
            back.clear();
            prefixes.unpack_number(id, &varint, &mut back).expect("own number key decodes");
            assert_eq!(back, rest);
            assert!(prefixes.eq_number(id, &varint, rest));
        }
    }
});
