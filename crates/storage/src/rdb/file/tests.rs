//! Whole files through `RdbWriter` and back through `load`/`load_into`:
//! every type and encoding, TTLs, compression and checksum options,
//! versions, and corrupt, truncated and hostile input.

use super::super::{dump_payload, write_value, Shapes};
use super::*;
use super::format::*;
use crate::types::hash::{ExpireCond, Hash};
use crate::types::list::{End, List};
use crate::types::set::Set;
use crate::types::stream::{Stream, StreamConfig, StreamId};
use crate::types::zset::ZSet;
use crate::{Db, Value, ValueRef};

const NOW: i64 = 1_700_000_000_000;
const FAR: i64 = 4_102_444_800_000; // 2100-01-01

/// A value as comparable text: order kept where the type has one, sorted
/// where it has none; streams as their DUMP payload (fully ordered).
fn canon(v: ValueRef) -> Vec<String> {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut out: Vec<String> = match v {
        ValueRef::Str(x) => return vec![format!("str {}", s(&x.to_vec()))],
        ValueRef::List(l) => return l.iter().map(|e| s(&e.to_vec())).collect(),
        ValueRef::ZSet(z) => return z.iter().map(|(m, sc)| format!("{} {sc}", s(m))).collect(),
        ValueRef::Stream(_) => return vec![format!("{:?}", dump_payload(v, NOW))],
        ValueRef::Set(x) => x.iter().map(|m| s(&m.to_vec())).collect(),
        ValueRef::Hash(h) => h.iter(NOW).map(|(f, x)| format!("{}={} ttl {:?}", s(f), s(&x.to_vec()), h.expire_of(f, NOW))).collect(),
    };
    out.sort();
    out
}

fn list(items: impl IntoIterator<Item = Vec<u8>>) -> Value {
    let items: Vec<Vec<u8>> = items.into_iter().collect();
    let mut l = List::new();
    l.push(End::Tail, &items, &Shapes::default().list);
    Value::List(Box::new(l))
}

fn set(members: impl IntoIterator<Item = Vec<u8>>) -> Value {
    let mut s = Set::new();
    for m in members {
        s.insert(&m, &Shapes::default().set);
    }
    Value::Set(Box::new(s))
}

fn zset(n: usize, member_len: usize) -> Value {
    let mut z = ZSet::new();
    for i in 0..n {
        let m = format!("{i:0member_len$}");
        z.insert(m.as_bytes(), i as f64 / 3.0 - 7.0, &Shapes::default().zset);
    }
    z.insert(b"-inf", f64::NEG_INFINITY, &Shapes::default().zset);
    z.maybe_convert(&Shapes::default().zset);
    Value::ZSet(Box::new(z))
}

fn hash(n: usize, ttls: &[(usize, i64)]) -> Value {
    let mut h = Hash::new();
    for i in 0..n {
        h.insert(format!("field{i}").as_bytes(), format!("value {i} {}", "v".repeat(i % 40)).as_bytes(), &Shapes::default().hash);
    }
    for &(i, at) in ttls {
        h.set_expire(format!("field{i}").as_bytes(), at, ExpireCond::Always, 0);
    }
    h.maybe_convert(&Shapes::default().hash);
    Value::Hash(Box::new(h))
}

fn stream(active_differs: bool) -> Value {
    let cfg = StreamConfig { node_max_bytes: 4096, node_max_entries: 5, ..StreamConfig::default() };
    let mut s = Stream::new();
    for i in 0..23u64 {
        let v = format!("reading {i} {}", "x".repeat(i as usize * 3));
        s.append(StreamId::new(1000 + i, 0), &[b"sensor".to_vec(), v.into_bytes()], &cfg);
    }
    s.create_group(b"g", StreamId::MIN, 0);
    let g = s.group_mut(b"g").unwrap();
    g.create_consumer(b"alice", 50);
    g.deliver(StreamId::new(1001, 0), b"alice", 70);
    g.deliver(StreamId::new(1002, 0), b"alice", 70);
    let c = g.consumer_mut(b"alice").unwrap();
    c.active_time = if active_differs { 40 } else { c.seen_time };
    Value::Stream(Box::new(s))
}

/// Every type in each of its encodings, with and without deadlines, over
/// three databases: (db, key, value, deadline).
fn dataset(field_ttls: bool) -> Vec<(u64, Vec<u8>, Value, Option<i64>)> {
    let long_text: Vec<u8> = "the quick brown fox jumps over the lazy dog ".repeat(50).into_bytes();
    let mut d: Vec<(u64, &str, Value, Option<i64>)> = vec![
        (0, "int", Value::Int(-12345), None),
        (0, "bigint", Value::Int(i64::MIN), Some(FAR)),
        (0, "short", Value::Bytes(b"hello".to_vec()), None),
        (0, "empty", Value::Bytes(Vec::new()), None),
        (0, "long compressible", Value::Bytes(long_text.clone()), Some(FAR + 1)),
        (0, "incompressible", Value::Bytes((0..200u32).map(|i| (i * 7919 % 251) as u8).collect()), None),
        (0, "list small", list([b"a".to_vec(), b"12".to_vec(), long_text.clone()]), None),
        (0, "list big", list((0..2000).map(|i| format!("element number {i}").into_bytes())), Some(FAR)),
        (1, "set intset", set((0..50).map(|i| (i * 37 - 500).to_string().into_bytes())), None),
        (1, "set listpack", set((0..20).map(|i| format!("m{i}").into_bytes())), None),
        (1, "set hashtable", set((0..1000).map(|i| format!("member-{i}-{}", "y".repeat(i % 30)).into_bytes())), Some(FAR)),
        (1, "zset listpack", zset(10, 4), None),
        (1, "zset skiplist", zset(500, 30), None),
        (1, "hash listpack", hash(10, &[]), None),
        (1, "hash hashtable", hash(1000, &[]), Some(FAR)),
        (5, "stream", stream(false), None),
        (5, "a key long enough to be compressed when compression is on, repeated repeated repeated", Value::Int(1), None),
    ];
    if field_ttls {
        d.push((5, "hash ttl listpack", hash(5, &[(1, FAR), (3, FAR + 9)]), None));
        d.push((5, "hash ttl table", hash(900, &[(0, FAR), (899, FAR + 5)]), Some(FAR)));
        d.push((5, "stream active", stream(true), None));
    }
    d.into_iter().map(|(db, k, v, t)| (db, k.as_bytes().to_vec(), v, t)).collect()
}

fn write_file(data: &[(u64, Vec<u8>, Value, Option<i64>)], version: u16, opts: WriteOptions, functions: &[&[u8]]) -> Vec<u8> {
    let mut w = RdbWriter::new(Vec::new(), version, opts).unwrap();
    w.standard_aux("7.0.15", NOW / 1000, 123_456, false).unwrap();
    w.aux(b"repl-id", b"0123456789abcdef0123456789abcdef01234567").unwrap();
    w.functions(functions.iter().copied()).unwrap();
    write_entries(&mut w, data);
    let written = w.bytes_written();
    let (out, len) = w.finish().unwrap();
    assert_eq!((len, out.len() as u64), (written + 9, written + 9)); // EOF, checksum
    out
}

/// Writes `data`'s keys, each database's run after its SELECTDB/RESIZEDB.
fn write_entries<W: std::io::Write>(w: &mut RdbWriter<W>, data: &[(u64, Vec<u8>, Value, Option<i64>)]) {
    let mut current = None;
    for (db, k, v, t) in data {
        if current != Some(*db) {
            let n = data.iter().filter(|e| e.0 == *db).count() as u64;
            let e = data.iter().filter(|e| e.0 == *db && e.3.is_some()).count() as u64;
            w.select_db(*db, n, e).unwrap();
            current = Some(*db);
        }
        assert!(w.entry(k, v.as_ref(), *t, NOW).unwrap());
    }
}

/// Collects everything `load` reports.
#[derive(Default)]
struct Collect {
    aux: Vec<(Vec<u8>, Vec<u8>)>,
    dbs: Vec<u64>,
    sizes: Vec<(u64, u64)>,
    functions: Vec<Vec<u8>>,
    entries: Vec<LoadedEntry>,
}

impl RdbVisitor for Collect {
    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.aux.push((key.to_vec(), value.to_vec()));
        Ok(())
    }
    fn select_db(&mut self, index: u64) -> Result<(), String> {
        self.dbs.push(index);
        Ok(())
    }
    fn resize_db(&mut self, keys: u64, expires: u64) -> Result<(), String> {
        self.sizes.push((keys, expires));
        Ok(())
    }
    fn function(&mut self, code: Vec<u8>) -> Result<(), String> {
        self.functions.push(code);
        Ok(())
    }
    fn entry(&mut self, entry: LoadedEntry) -> Result<(), String> {
        self.entries.push(entry);
        Ok(())
    }
}

fn collect(bytes: &[u8]) -> Result<(Collect, LoadSummary), RdbFileError> {
    let mut c = Collect::default();
    let s = load(bytes, &LoadOptions::new(NOW), &mut c)?;
    Ok((c, s))
}

fn err(bytes: &[u8]) -> RdbFileError {
    match collect(bytes) {
        Ok(_) => panic!("loaded"),
        Err(e) => e,
    }
}

/// Appends EOF and a valid checksum.
fn seal(mut b: Vec<u8>) -> Vec<u8> {
    b.push(op::EOF);
    let crc = crc64(0, &b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

use super::super::crc64;

#[test]
fn every_type_round_trips_with_each_option() {
    let data = dataset(true);
    let libs: [&[u8]; 2] = [b"#!lua name=mylib\nredis.register_function('f', function() return 1 end)", b"#!lua name=other\n"];
    for (compression, checksum) in [(true, true), (false, true), (true, false), (false, false)] {
        let bytes = write_file(&data, 12, WriteOptions { compression, checksum }, &libs);
        assert_eq!(&bytes[..9], b"REDIS0012");
        let (c, sum) = collect(&bytes).unwrap();
        assert_eq!((sum.version, sum.end, sum.keys, sum.empty_skipped), (12, bytes.len(), data.len() as u64, 0));
        assert_eq!(sum.checksum != 0, checksum);
        let aux: Vec<(&[u8], &[u8])> = c.aux.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        assert_eq!(
            aux,
            [
                (&b"redis-ver"[..], &b"7.0.15"[..]),
                (b"redis-bits", b"64"),
                (b"ctime", b"1700000000"),
                (b"used-mem", b"123456"),
                (b"aof-base", b"0"),
                (b"repl-id", b"0123456789abcdef0123456789abcdef01234567")
            ]
        );
        assert_eq!(c.functions, libs.map(<[u8]>::to_vec));
        assert_eq!(c.dbs, [0, 1, 5]);
        assert_eq!(c.sizes, [(8, 3), (7, 2), (5, 1)]);
        for (e, (db, k, v, t)) in c.entries.iter().zip(&data) {
            assert_eq!((e.db, &e.key, e.expire_ms, e.idle_secs, e.freq), (*db, k, *t, None, None));
            assert_eq!(canon(e.value.as_ref()), canon(v.as_ref()), "key {}", String::from_utf8_lossy(k));
        }
    }
}

#[test]
fn encodings_survive_the_round_trip() {
    let data = dataset(true);
    let bytes = write_file(&data, 12, WriteOptions::default(), &[]);
    let (c, _) = collect(&bytes).unwrap();
    let enc = |v: &Value| match v.as_ref() {
        ValueRef::Str(_) => "string",
        ValueRef::List(l) => l.encoding_name(),
        ValueRef::Set(s) => s.encoding_name(),
        ValueRef::ZSet(z) => z.encoding_name(),
        ValueRef::Hash(h) => h.encoding_name(),
        ValueRef::Stream(s) => s.encoding_name(),
    };
    for (e, (_, _, v, _)) in c.entries.iter().zip(&data) {
        assert_eq!(enc(&e.value), enc(v), "key {}", String::from_utf8_lossy(&e.key));
    }
    let names: Vec<&str> = data.iter().map(|e| enc(&e.2)).collect();
    for want in ["intset", "listpack", "hashtable", "skiplist", "listpackex", "stream"] {
        assert!(names.contains(&want), "dataset lacks {want}: {names:?}");
    }
}

#[test]
fn compression_shrinks_and_matches_the_plain_layout() {
    let data = dataset(false);
    let plain = write_file(&data, 10, WriteOptions { compression: false, checksum: true }, &[]);
    let packed = write_file(&data, 10, WriteOptions::default(), &[]);
    assert!(packed.len() < plain.len(), "{} vs {}", packed.len(), plain.len());
    let text: Vec<_> = data.iter().filter(|e| e.1.starts_with(b"long")).cloned().collect();
    let plain = write_file(&text, 10, WriteOptions { compression: false, checksum: true }, &[]);
    let packed = write_file(&text, 10, WriteOptions::default(), &[]);
    assert!(packed.len() * 5 < plain.len(), "{} vs {}", packed.len(), plain.len());
    // Uncompressed entries are exactly the value layer's bytes; with
    // compression on, values with no string over 20 bytes are too.
    for (_, _, v, _) in &data {
        let mut want = Vec::new();
        write_value(&mut want, v.as_ref(), NOW);
        let mut w = RdbWriter::new(Vec::new(), 12, WriteOptions { compression: false, checksum: false }).unwrap();
        let start = w.bytes_written() as usize;
        w.entry(b"k", v.as_ref(), None, NOW).unwrap();
        let (out, _) = w.finish().unwrap();
        let entry = &out[start..out.len() - 9];
        assert_eq!(entry[0], want[0]);
        assert_eq!(&entry[1..3], &[1, b'k']);
        assert_eq!(&entry[3..], &want[1..]);
    }
    let small = list((0..100).map(|i| format!("e{i}").into_bytes()));
    let mut want = Vec::new();
    write_value(&mut want, small.as_ref(), NOW);
    let mut w = RdbWriter::new(Vec::new(), 12, WriteOptions::default()).unwrap();
    w.entry(b"k", small.as_ref(), None, NOW).unwrap();
    let (out, _) = w.finish().unwrap();
    assert_eq!(&out[12..out.len() - 9], &want[1..]);
}

#[test]
fn a_compressed_string_uses_the_lzf_encoding() {
    let v = Value::Bytes(vec![b'a'; 100]);
    let mut w = RdbWriter::new(Vec::new(), 9, WriteOptions::default()).unwrap();
    w.entry(b"k", v.as_ref(), None, NOW).unwrap();
    let (out, _) = w.finish().unwrap();
    // type 0, key, then 0xC3 <clen> <ulen=100> data.
    assert_eq!(&out[9..13], &[0, 1, b'k', 0xc3]);
    assert_eq!(out[14], 0x40);
    assert_eq!(out[15], 100);
    let (c, _) = collect(&out).unwrap();
    assert_eq!(c.entries[0].value, v);
}

#[test]
fn value_version_matches_the_value_writer() {
    for (_, k, v, _) in dataset(true) {
        let mut out = Vec::new();
        let written = write_value(&mut out, v.as_ref(), NOW);
        assert_eq!(value_version(v.as_ref()), written, "key {}", String::from_utf8_lossy(&k));
    }
    assert_eq!(min_file_version(9, false), 9);
    assert_eq!(min_file_version(9, true), 10);
    assert_eq!(min_file_version(11, true), 11);
    assert_eq!(min_file_version(0, false), 9);
}

#[test]
fn a_value_too_new_for_the_header_is_refused_and_nothing_written() {
    let mut w = RdbWriter::new(Vec::new(), 10, WriteOptions::default()).unwrap();
    w.select_db(0, 2, 0).unwrap();
    let before = w.bytes_written();
    let e = w.entry(b"h", hash(3, &[(1, FAR)]).as_ref(), None, NOW).unwrap_err();
    assert!(matches!(e, RdbWriteError::Version { needed: 12, declared: 10 }), "{e}");
    let e = w.entry(b"s", stream(true).as_ref(), None, NOW).unwrap_err();
    assert!(matches!(e, RdbWriteError::Version { needed: 11, declared: 10 }), "{e}");
    assert_eq!(w.bytes_written(), before);
    w.entry(b"s", stream(false).as_ref(), None, NOW).unwrap();
    let (out, _) = w.finish().unwrap();
    let (c, _) = collect(&out).unwrap();
    assert_eq!(c.entries.len(), 1);

    let mut w = RdbWriter::new(Vec::new(), 9, WriteOptions::default()).unwrap();
    assert!(matches!(w.functions([&b"#!lua name=x\n"[..]]), Err(RdbWriteError::Version { needed: 10, declared: 9 })));
    w.functions([]).unwrap();
    assert!(matches!(RdbWriter::new(Vec::new(), 13, WriteOptions::default()), Err(RdbWriteError::UnsupportedVersion(13))));
    assert!(matches!(RdbWriter::new(Vec::new(), 8, WriteOptions::default()), Err(RdbWriteError::UnsupportedVersion(8))));
}

#[test]
fn hash_fields_due_are_loaded_as_redis_loads_them() {
    let h = hash(3, &[(0, NOW - 5), (1, NOW - 5), (2, NOW - 1)]);
    let mut w = RdbWriter::new(Vec::new(), 12, WriteOptions::default()).unwrap();
    // Not written once every field is due...
    assert!(!w.entry(b"gone", h.as_ref(), None, NOW).unwrap());
    // ... but written before they fell due, loaded after: every field is
    // there, for field expiry to remove (Redis counts such a key loaded).
    assert!(w.entry(b"later", h.as_ref(), None, NOW - 10).unwrap());
    let partly = hash(3, &[(0, NOW - 5), (1, FAR)]);
    assert!(w.entry(b"partly", partly.as_ref(), None, NOW - 10).unwrap());
    let (out, _) = w.finish().unwrap();
    let (c, sum) = collect(&out).unwrap();
    assert_eq!((sum.keys, sum.empty_skipped), (2, 0));
    assert_eq!(c.entries[0].key, b"later");
    assert_eq!(c.entries[1].key, b"partly");
    let ValueRef::Hash(h) = c.entries[0].value.as_ref() else { panic!("not a hash") };
    assert_eq!(h.len(), 3);
    assert_eq!(h.expire_of(b"field2", i64::MIN), Some(Some(NOW - 1)));
    let ValueRef::Hash(h) = c.entries[1].value.as_ref() else { panic!("not a hash") };
    assert_eq!(h.len(), 3);
}

#[test]
fn load_into_fills_databases_and_skips_expired_keys() {
    let mut data = dataset(true);
    data.push((1, b"expired".to_vec(), Value::Int(1), Some(NOW)));
    data.push((1, b"expired long ago".to_vec(), Value::Int(1), Some(5)));
    let bytes = write_file(&data, 12, WriteOptions::default(), &[b"#!lua name=l\n"]);
    let mut dbs: Vec<Db> = (0..16).map(|_| Db::new()).collect();
    let loaded = load_into(&bytes, &mut dbs, &LoadOptions::new(NOW)).unwrap();
    assert_eq!((loaded.inserted, loaded.expired_skipped, loaded.summary.keys), (data.len() as u64 - 2, 2, data.len() as u64));
    assert_eq!(loaded.functions, [b"#!lua name=l\n".to_vec()]);
    assert_eq!(loaded.aux.len(), 6);
    for (db, k, v, t) in data.iter().filter(|e| e.3.is_none_or(|t| t > NOW)) {
        let db = &mut dbs[*db as usize];
        assert_eq!(db.expire_of(k, NOW), Some(*t));
        assert_eq!(canon(db.get(k, NOW).unwrap()), canon(v.as_ref()));
    }
    assert_eq!([0, 1, 5].map(|i| dbs[i].len()), [8, 7, 5]);

    // Too few databases; a key twice; dbs already holding a key.
    let mut two: Vec<Db> = (0..2).map(|_| Db::new()).collect();
    let e = load_into(&bytes, &mut two, &LoadOptions::new(NOW)).unwrap_err();
    assert!(e.message.contains("database 5 is out of range"), "{e}");
    assert_eq!(bytes[e.offset], op::SELECTDB);
    let mut w = RdbWriter::new(Vec::new(), 9, WriteOptions::default()).unwrap();
    w.entry(b"k", Value::Int(1).as_ref(), None, NOW).unwrap();
    let at = w.bytes_written() as usize;
    w.entry(b"k", Value::Int(2).as_ref(), None, NOW).unwrap();
    let (dup, _) = w.finish().unwrap();
    let mut one = vec![Db::new()];
    let e = load_into(&dup, &mut one, &LoadOptions::new(NOW)).unwrap_err();
    assert_eq!((e.offset, e.message.as_str()), (at, "duplicate key 'k' in database 0"));
    assert!(load_into(&dup, &mut [], &LoadOptions::new(NOW)).is_err());
}

#[test]
fn old_opcodes_and_trailing_bytes() {
    // Version 3 (no checksum), EXPIRETIME in seconds, IDLE, FREQ,
    // SLOT_INFO and an ignored "lua" aux field.
    let mut b = b"REDIS0003".to_vec();
    b.extend_from_slice(&[op::AUX, 3, b'l', b'u', b'a', 1, b'x']);
    b.extend_from_slice(&[op::SELECTDB, 2, op::SLOT_INFO, 5, 1, 0]);
    b.push(op::EXPIRETIME);
    b.extend_from_slice(&2_000_000_000i32.to_le_bytes());
    b.extend_from_slice(&[op::IDLE, 0x40, 200, op::FREQ, 7, 0, 1, b'k', 1, b'v']);
    b.extend_from_slice(&[0, 1, b'p', 0xc0, 0xff, op::EOF]);
    let n = b.len();
    b.extend_from_slice(b"*1\r\n$4\r\nPING\r\n"); // what an AOF would go on with
    let (c, sum) = collect(&b).unwrap();
    assert_eq!((sum.version, sum.end, sum.keys, sum.checksum), (3, n, 2, 0));
    assert!(c.aux.is_empty());
    let e = &c.entries[0];
    assert_eq!((e.db, &e.key[..], e.expire_ms, e.idle_secs, e.freq), (2, &b"k"[..], Some(2_000_000_000_000), Some(200), Some(7)));
    assert_eq!(c.entries[0].value, Value::Bytes(b"v".to_vec()));
    let e = &c.entries[1];
    assert_eq!((&e.key[..], e.expire_ms, e.idle_secs, e.freq, &e.value), (&b"p"[..], None, None, None, &Value::Int(-1)));
    // Since version 5 the checksum follows EOF, trailing bytes after it.
    let mut v9 = seal(b"REDIS0009".to_vec());
    let n = v9.len();
    v9.extend_from_slice(b"junk");
    assert_eq!(collect(&v9).unwrap().1.end, n);
}

#[test]
fn empty_keys_are_skipped_as_redis_does() {
    let mut b = b"REDIS0009".to_vec();
    for t in [1u8, 2, 3, 4, 5, 14, 18] {
        b.extend_from_slice(&[t, 1, b'e', 0]);
    }
    b.extend_from_slice(&[0, 1, b'k', 0]);
    let (c, sum) = collect(&seal(b)).unwrap();
    assert_eq!((sum.keys, sum.empty_skipped), (1, 7));
    assert_eq!(c.entries[0].value, Value::Bytes(Vec::new()));
}

#[test]
fn a_large_file_checksummed_beside_the_parse_is_checked_as_a_small_one() {
    // Past 4 MiB the checksum runs on a second thread over all but the last
    // 8 bytes, and is used only when EOF stands just before them.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        }).collect()
    };
    let big: Vec<(u64, Vec<u8>, Value, Option<i64>)> = (0..80u64).map(|i| (0, format!("big:{i}").into_bytes(), Value::Bytes(noise(64 * 1024)), None)).collect();
    let good = write_file(&big, RDB_VERSION, WriteOptions::default(), &[]);
    assert!(good.len() > 5 << 20);
    let (c, sum) = collect(&good).unwrap();
    assert_eq!(c.entries.len(), 80);
    assert_eq!(sum.checksum, u64::from_le_bytes(good[good.len() - 8..].try_into().unwrap()));
    // A flipped byte in a value, and one in the checksum.
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 0x10;
    assert_eq!(err(&bad).message, "RDB CRC error");
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 1;
    let e = err(&bad);
    assert_eq!((e.offset, e.message.as_str()), (good.len() - 8, "RDB CRC error"));
    assert!(e.crc_mismatch.is_some());
    // Bytes after the checksum: EOF is not where the thread assumed, and the
    // checksum is computed over what precedes EOF, as for a small file.
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"tail");
    assert_eq!(collect(&trailing).unwrap().0.entries.len(), 80);
    let mut bad = trailing.clone();
    bad[good.len() / 3] ^= 0x01;
    assert_eq!(err(&bad).message, "RDB CRC error");
    // With compression on, the packing thread computes it between batches.
    let packed_load = |bytes: &[u8]| {
        let mut dbs: Vec<Db> = (0..1).map(|_| { let mut d = Db::new(); d.value_compression = true; d.key_compression = true; d }).collect();
        super::loader::load_into_threads(bytes, &mut dbs, &LoadOptions::new(NOW), &mut |_| true, true).map(|l| l.inserted)
    };
    assert_eq!(packed_load(&good).unwrap(), 80);
    assert_eq!(packed_load(&trailing).unwrap(), 80);
    for at in [good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x04;
        assert_eq!(packed_load(&bad).unwrap_err().message, "RDB CRC error");
    }
}

#[test]
fn errors_name_the_offset() {
    let good = write_file(&dataset(true), 12, WriteOptions::default(), &[b"#!lua name=l\n"]);
    // Checksum: a flipped bit in a value, or in the checksum itself.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x10;
    let e = err(&bad);
    assert!(e.offset <= mid || e.message == "RDB CRC error", "{e}");
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 1;
    let e = err(&bad);
    assert_eq!(e.offset, good.len() - 8);
    assert_eq!(e.to_string(), format!("Bad file format reading the RDB at offset {}: RDB CRC error", good.len() - 8));
    assert!(e.crc_mismatch.is_some_and(|(computed, stored)| computed != stored && stored == u64::from_le_bytes(bad[bad.len() - 8..].try_into().unwrap())));
    // ... not checked when told so, nor when the file says 0.
    let mut opts = LoadOptions::new(NOW);
    opts.verify_checksum = false;
    assert!(load(&bad, &opts, &mut Collect::default()).is_ok());
    let mut zero = good.clone();
    let n = zero.len();
    zero[n - 8..].fill(0);
    assert!(collect(&zero).is_ok());

    // Header problems.
    assert_eq!(err(b"").message, "unexpected end of file in the header");
    assert_eq!(err(b"REDIS00").offset, 7);
    assert_eq!(err(b"RODIS0009").offset, 0);
    assert!(err(b"VALKEY080").message.starts_with("not an RDB file"));
    let e = err(b"REDIS0013\xff");
    assert_eq!(e.offset, 5);
    assert!(e.message.contains("can't handle RDB format version 13"), "{e}");
    assert!(err(b"REDIS0000\xff").message.contains("version 0"));
    assert!(err(b"REDIS00x9\xff").message.starts_with("bad version field"));

    // Refused items, each at its opcode's or entry's offset.
    let with = |body: &[u8]| seal([&b"REDIS0011"[..], body].concat());
    let e = err(&with(&[op::FUNCTION_PRE_GA, 1, b'x']));
    assert_eq!(e.offset, 9);
    assert!(e.message.contains("release candidates"), "{e}");
    // Module id of "ReJSON-RL", encoding version 3.
    let name_id = |name: &str, ver: u64| {
        const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        name.bytes().fold(0u64, |id, c| (id << 6) | CHARS.iter().position(|&x| x == c).unwrap() as u64) << 10 | ver
    };
    let mut m = vec![0, 1, b'k', 1, b'v', op::MODULE_AUX, 0x81];
    m.extend_from_slice(&name_id("ReJSON-RL", 3).to_be_bytes());
    let e = err(&with(&m));
    assert_eq!(e.offset, 14);
    assert_eq!(e.message, "auxiliary data of module 'ReJSON-RL' is not supported: densekv loads no modules");
    let mut m = vec![op::SELECTDB, 0, 7, 3, b'j', b's', b'n', 0x81];
    m.extend_from_slice(&name_id("ReJSON-RL", 3).to_be_bytes());
    let e = err(&with(&m));
    assert_eq!(e.offset, 11);
    assert_eq!(e.message, "values of module type 'ReJSON-RL' are not supported: densekv loads no modules (key 'jsn')");
    let e = err(&with(&[9, 1, b'z', 0]));
    assert!(e.message.contains("zipmap"), "{e}");
    let e = err(&with(&[0, 1, b'k', 0, 200, 1, b'k', 0]));
    assert_eq!((e.offset, e.message.as_str()), (13, "unknown value type 200 (key 'k')"));
    let e = err(&with(&[1, 2, b'k', 0xff, 0x80, 0xff, 0xff, 0xff, 0xff]));
    assert_eq!(e.offset, 9);
    assert!(e.message.contains("list value (key 'k\\xff')"), "{e}");
    // An absurd length is refused before anything is allocated for it.
    let e = err(&with(&[0, 1, b'k', 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));
    assert_eq!(e.offset, 9);
    let e = err(&with(&[op::AUX, 0x80, 0x7f, 0xff, 0xff, 0xff]));
    assert_eq!((e.offset, e.message.as_str()), (10, "truncated or invalid AUX field name"));
    let e = err(&with(&[op::SELECTDB, 0xc0]));
    assert_eq!((e.offset, e.message.as_str()), (10, "truncated or invalid database index"));
    // No EOF at all.
    let e = err(b"REDIS0011\xfe\x00");
    assert_eq!((e.offset, e.message.as_str()), (11, "unexpected end of file: expected opcode or value type"));
    let e = err(b"REDIS0011\xff\x00\x00");
    assert_eq!((e.offset, e.message.as_str()), (10, "truncated or invalid checksum after EOF"));
}

#[test]
fn every_truncation_is_an_error_and_every_byte_flip_is_safe() {
    let small = ["int", "short", "long compressible", "list small", "set intset", "zset listpack", "hash listpack", "stream", "hash ttl listpack", "stream active"];
    let data: Vec<_> = dataset(true).into_iter().filter(|e| small.contains(&std::str::from_utf8(&e.1).unwrap())).collect();
    assert_eq!(data.len(), small.len());
    let good = write_file(&data, 12, WriteOptions::default(), &[b"#!lua name=l\n"]);
    for cut in 0..good.len() {
        let e = err(&good[..cut]);
        assert!(e.offset <= cut, "cut {cut}: {e}");
    }
    let mut opts = LoadOptions::new(NOW);
    opts.verify_checksum = false;
    let step = (good.len() / 3000).max(1);
    for i in (0..good.len()).step_by(step) {
        for flip in [0x01, 0x80, 0xff] {
            let mut b = good.clone();
            b[i] ^= flip;
            let _ = load(&b, &opts, &mut Collect::default());
            if let Err(e) = collect(&b) {
                assert!(e.offset < b.len(), "{e}");
            }
        }
    }
}

#[test]
fn function_opcode_matches_the_function_payload() {
    let libs: [&[u8]; 2] = [b"#!lua name=a\nreturn", &[b'y'; 10]];
    let payload = super::super::function_payload(libs);
    let mut w = RdbWriter::new(Vec::new(), 10, WriteOptions { compression: false, checksum: true }).unwrap();
    w.functions(libs).unwrap();
    let (out, _) = w.finish().unwrap();
    assert_eq!(&out[9..out.len() - 9], &payload[..payload.len() - 10]);
}

#[test]
fn visitor_errors_carry_the_item_offset() {
    struct NoKeys;
    impl RdbVisitor for NoKeys {
        fn entry(&mut self, e: LoadedEntry) -> Result<(), String> {
            Err(format!("no room for {}", String::from_utf8_lossy(&e.key)))
        }
    }
    let mut w = RdbWriter::new(Vec::new(), 11, WriteOptions::default()).unwrap();
    w.select_db(0, 1, 1).unwrap();
    let at = w.bytes_written() as usize;
    w.entry(b"k", Value::Int(1).as_ref(), Some(FAR), NOW).unwrap();
    let (out, _) = w.finish().unwrap();
    // The offset is the type byte's, after the entry's EXPIRETIME_MS.
    let e = load(&out, &LoadOptions::new(NOW), &mut NoKeys).unwrap_err();
    assert_eq!((e.offset, e.message.as_str()), (at + 9, "no room for k"));
    assert_eq!((out[at], out[at + 9]), (op::EXPIRETIME_MS, 0));
}

#[test]
fn load_reader_reads_everything() {
    let good = write_file(&dataset(false), 10, WriteOptions::default(), &[]);
    let mut c = Collect::default();
    let sum = load_reader(&good[..], &LoadOptions::new(NOW), &mut c).unwrap();
    assert_eq!(sum.keys, dataset(false).len() as u64);
}

/// A background save writes at the newest version with no checksum, then
/// settles header and checksum with `sealed`: the result is byte for byte
/// the file written at the lowest version from the start.
#[test]
fn a_file_sealed_afterwards_equals_one_written_at_its_version() {
    for (field_ttls, functions) in [(false, false), (false, true), (true, false), (true, true)] {
        let data = dataset(field_ttls);
        let codes: &[&[u8]] = if functions { &[b"#!lua name=lib\nredis.register_function('f', function() return 1 end)"] } else { &[] };
        for compression in [false, true] {
            let mut w = RdbWriter::new(Vec::new(), crate::rdb::RDB_VERSION, WriteOptions { compression, checksum: false }).unwrap();
            w.standard_aux("7.0.15", NOW / 1000, 123_456, false).unwrap();
            w.aux(b"repl-id", b"0123456789abcdef0123456789abcdef01234567").unwrap();
            w.functions(codes.iter().copied()).unwrap();
            write_entries(&mut w, &data);
            let version = w.needed_version();
            let mut out = w.finish_unsealed().unwrap();
            let rest = &out[HEADER_LEN..];
            let (header, crc) = sealed(version, crate::rdb::crc64(0, rest), rest.len() as u64);
            out[..HEADER_LEN].copy_from_slice(&header);
            out.extend_from_slice(&crc.to_le_bytes());
            let want = write_file(&data, min_file_version(version, false), WriteOptions { compression, checksum: true }, codes);
            let values = data.iter().map(|e| value_version(e.2.as_ref())).max().unwrap();
            assert_eq!(version, min_file_version(values, functions));
            assert_eq!(version >= 12, field_ttls);
            assert!(out == want, "ttls {field_ttls} functions {functions} compression {compression}");
        }
    }
}

#[test]
fn reselecting_a_database_adds_no_resize_hint() {
    let mut w = RdbWriter::new(Vec::new(), 10, WriteOptions::default()).unwrap();
    w.select_db(0, 1, 0).unwrap();
    w.entry(b"a", Value::string(b"1").as_ref(), None, NOW).unwrap();
    w.select_db(1, 1, 0).unwrap();
    w.entry(b"b", Value::string(b"2").as_ref(), None, NOW).unwrap();
    w.reselect_db(0).unwrap();
    w.entry(b"c", Value::string(b"3").as_ref(), None, NOW).unwrap();
    let (out, _) = w.finish().unwrap();
    let (c, _) = collect(&out).unwrap();
    assert_eq!(c.dbs, [0, 1, 0]);
    assert_eq!(c.sizes, [(1, 0), (1, 0)]);
    assert_eq!(c.entries.iter().map(|e| e.db).collect::<Vec<_>>(), [0, 1, 0]);
}

/// A synchronous save writes at the newest version and settles the header
/// last: the bytes equal the file written at the lowest version.
#[test]
fn finish_lowest_equals_writing_at_the_lowest_version() {
    for field_ttls in [false, true] {
        let data = dataset(field_ttls);
        for (compression, checksum) in [(false, true), (true, true), (true, false)] {
            let opts = WriteOptions { compression, checksum };
            let mut w = RdbWriter::new(Vec::new(), crate::rdb::RDB_VERSION, opts).unwrap();
            w.standard_aux("7.0.15", NOW / 1000, 123_456, false).unwrap();
            w.aux(b"repl-id", b"0123456789abcdef0123456789abcdef01234567").unwrap();
            write_entries(&mut w, &data);
            let version = min_file_version(w.needed_version(), false);
            let (mut out, len, header) = w.finish_lowest().unwrap();
            assert_eq!(len, out.len() as u64);
            out[..HEADER_LEN].copy_from_slice(&header);
            assert!(out == write_file(&data, version, opts, &[]), "ttls {field_ttls} {opts:?}");
        }
    }
}

/// A writer that leaves compression to the thread writing its output
/// (`defer_compression`) lists the strings it left plain; compressing
/// them afterwards (`compress_deferred`), in pieces cut anywhere between
/// strings, gives the very bytes of a writer that compressed as it went.
#[test]
fn deferred_compression_gives_the_same_bytes() {
    let long_key = b"a key long enough to be compressed when compression is on, repeated repeated repeated".to_vec();
    let mut data = dataset(true);
    data.push((2, long_key.clone(), Value::Bytes(b"x".repeat(100)), Some(FAR)));
    data.push((2, b"incompressible".to_vec(), Value::Bytes((0..200u32).map(|i| (i * 7919 % 251) as u8).collect()), None));
    let opts = WriteOptions { compression: true, checksum: false };
    let write = |defer: bool| {
        let mut w = RdbWriter::new(Vec::new(), crate::rdb::RDB_VERSION, opts).unwrap();
        if defer {
            w.defer_compression();
        }
        w.standard_aux("7.0.15", NOW / 1000, 123_456, false).unwrap();
        w.functions([&b"#!lua name=lib\nredis.register_function('f', function() return 1 end) -- padding padding"[..]]).unwrap();
        write_entries(&mut w, &data);
        let deferred = std::mem::take(w.output_and_deferred().1);
        (w.finish_unsealed().unwrap(), deferred)
    };
    let (direct, none) = write(false);
    assert!(none.is_empty());
    let (plain, deferred) = write(true);
    assert!(deferred.len() >= 5, "{deferred:?}");
    assert!(plain.len() > direct.len());
    // Cut the plain output into pieces at string boundaries, as chunks are.
    for cut in [plain.len(), 1000, 97] {
        let mut out = Vec::new();
        let mut at = 0usize;
        let mut spans = deferred.iter().peekable();
        while at < plain.len() {
            let mut end = (at + cut).min(plain.len());
            // A piece never splits a string: move its end past one that straddles it.
            if let Some(d) = deferred.iter().find(|d| (d.prefix as usize) < end && (d.end as usize) > end) {
                end = d.end as usize;
            }
            let mut rel = Vec::new();
            while let Some(d) = spans.next_if(|d| (d.end as usize) <= end) {
                rel.push((d.prefix as usize - at, d.data as usize - at, d.end as usize - at));
            }
            compress_deferred(&plain[at..end], &rel, &mut out);
            at = end;
        }
        assert!(out == direct, "cut {cut}: {} bytes vs {}", out.len(), direct.len());
    }
}

/// Seed 002's sessions and more, in two databases: keys and values of
/// several patterns (FSST, zstd, numbers, values that drift so a table is
/// retired mid-load, collections), to load with compression on.
fn packable_dataset() -> Vec<(u64, Vec<u8>, Value, Option<i64>)> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut data = Vec::new();
    for i in 0..30_000u64 {
        let key = format!("session:{:040x}", u128::from(rnd()) << 64 | u128::from(rnd())).into_bytes();
        let value = if (12_000..18_000).contains(&i) {
            // Bytes no table shortens: the session table drifts and is
            // retired, and the pattern trains again.
            (0..46).map(|_| rnd() as u8).collect()
        } else {
            format!("{{\"user_id\":{},\"ts\":{},\"role\":\"u\"}}", 1_000_000 + rnd() % 9_000_000, 1_700_000_000 + rnd() % 2_592_000).into_bytes()
        };
        data.push((0, key, Value::Bytes(value), (i % 3 != 0).then_some(NOW + 1_000 + i as i64)));
        if i % 10 == 0 {
            let shape = format!("{{\"name\":\"Describe{i}Request\",\"type\":\"structure\",\"members\":{{\"InstanceIds\":{{\"shape\":\"InstanceIdStringList\",\"documentation\":\"<p>The IDs of the instances ({}) to describe, as a list; every instance named must exist and belong to the caller.</p>\"}},\"DryRun\":{{\"shape\":\"Boolean\"}}}}}}", rnd() % 1_000_003);
            data.push((0, format!("shape:{i}").into_bytes(), Value::Bytes(shape.into_bytes()), None));
            data.push((0, format!("key:{i}").into_bytes(), Value::Int(i as i64), None));
            data.push((0, format!("short{i}").into_bytes(), Value::Bytes(b"tiny".to_vec()), None));
        }
        if i % 1000 == 0 {
            data.push((0, format!("user:{i}:cart").into_bytes(), list((0..5).map(|j| format!("item-{j}").into_bytes())), None));
        }
    }
    for i in 0..5_000u64 {
        let key = format!("session:{:040X}", u128::from(rnd())).into_bytes();
        let value = format!("{{\"user_id\":{},\"ts\":{},\"role\":\"a\"}}", 1_000_000 + rnd() % 9_000_000, 1_700_000_000 + i).into_bytes();
        data.push((2, key, Value::Bytes(value), Some(NOW + 5_000)));
    }
    data
}

/// Everything a keyspace holds, in a comparable form: each key with its
/// value, deadline and MEMORY USAGE, and the packing counters.
/// A key, its value, its deadline and its MEMORY USAGE.
type Held = (Vec<u8>, Vec<String>, Option<i64>, Option<usize>);

fn held(db: &mut Db) -> (Vec<Held>, PackStats, usize) {
    let mut keys = Vec::new();
    db.for_each(|k, v, t| keys.push((k.to_vec(), canon(v), t)));
    keys.sort();
    let keys = keys.into_iter().map(|(k, v, t)| { let m = db.mem_usage(&k, NOW); (k, v, t, m) }).collect();
    (keys, db.pack_stats(), db.allocated_bytes())
}

use crate::encoding::packed::PackStats;
use crate::rdb::RDB_VERSION;

#[test]
fn packing_on_a_second_thread_stores_what_one_thread_stores() {
    let data = packable_dataset();
    let bytes = write_file(&data, RDB_VERSION, WriteOptions::default(), &[]);
    let make = || -> Vec<Db> {
        (0..3).map(|_| { let mut d = Db::new(); d.value_compression = true; d.key_compression = true; d }).collect()
    };
    let (mut one, mut two) = (make(), make());
    let a = super::loader::load_into_threads(&bytes, &mut one, &LoadOptions::new(NOW), &mut |_| true, false).unwrap();
    let b = super::loader::load_into_threads(&bytes, &mut two, &LoadOptions::new(NOW), &mut |_| true, true).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.inserted, data.len() as u64);
    for i in 0..3 {
        let (x, y) = (held(&mut one[i]), held(&mut two[i]));
        assert_eq!(x.0.len(), y.0.len());
        for (p, q) in x.0.iter().zip(&y.0) {
            assert_eq!(p, q);
        }
        assert_eq!((x.1, x.2), (y.1, y.2), "database {i}");
    }
    let st = two[0].pack_stats();
    assert!(st.trained >= 3 && st.zstd_values > 0 && st.values > 10_000, "{st:?}");
    // And what was loaded is the file's data.
    for (db, k, v, t) in &data {
        let d = &mut two[*db as usize];
        assert_eq!(canon(d.get(k, NOW).unwrap()), canon(v.as_ref()));
        assert_eq!(d.expire_of(k, NOW), Some(*t));
    }
}

#[test]
fn packing_on_a_second_thread_fails_as_one_thread_fails() {
    let mut data = packable_dataset();
    data.truncate(8_000);
    let dup = data[6_000].clone();
    let mut w = RdbWriter::new(Vec::new(), RDB_VERSION, WriteOptions::default()).unwrap();
    write_entries(&mut w, &data);
    let at = w.bytes_written() as usize;
    w.entry(&dup.1, dup.2.as_ref(), dup.3, NOW).unwrap();
    // Keys after the duplicate, then a file cut short: the duplicate is
    // still what is reported, at its own offset.
    for (_, k, v, t) in &data[7_000..7_900] {
        w.entry(&[b"x:", &k[..]].concat(), v.as_ref(), *t, NOW).unwrap();
    }
    let (whole, _) = w.finish().unwrap();
    let cut = &whole[..whole.len() - 40];
    for bytes in [&whole[..], cut] {
        let mut errs = Vec::new();
        for thread in [false, true] {
            let mut dbs: Vec<Db> = (0..3).map(|_| { let mut d = Db::new(); d.value_compression = true; d.key_compression = true; d }).collect();
            let e = super::loader::load_into_threads(bytes, &mut dbs, &LoadOptions::new(NOW), &mut |_| true, thread).unwrap_err();
            errs.push((e, dbs[0].len()));
        }
        assert_eq!(errs[0], errs[1]);
        assert_eq!(errs[0].0.offset, at);
        assert_eq!(errs[0].0.message, format!("duplicate key '{}' in database 0", String::from_utf8_lossy(&dup.1)));
    }
    // A file cut short with no duplicate fails at the same offset either way.
    let plain = write_file(&data, RDB_VERSION, WriteOptions::default(), &[]);
    let cut = &plain[..plain.len() - 300];
    let errs: Vec<RdbFileError> = [false, true]
        .map(|thread| {
            let mut dbs: Vec<Db> = (0..3).map(|_| { let mut d = Db::new(); d.value_compression = true; d.key_compression = true; d }).collect();
            super::loader::load_into_threads(cut, &mut dbs, &LoadOptions::new(NOW), &mut |_| true, thread).unwrap_err()
        })
        .into();
    assert_eq!(errs[0], errs[1]);
    // Stopped by the progress callback (a shutdown while loading).
    let mut n = 0;
    let mut dbs: Vec<Db> = (0..3).map(|_| { let mut d = Db::new(); d.value_compression = true; d.key_compression = true; d }).collect();
    let e = load_into_with(&plain, &mut dbs, &LoadOptions::new(NOW), &mut |_| { n += 1; n < 5_000 }).unwrap_err();
    assert_eq!(e.message, "loading stopped");
}
