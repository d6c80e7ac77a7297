//! Round trips through DUMP payloads, payloads written by Redis 7.0 and 8
//! (captured from real servers, as hex), and corrupt input; streams too.

use super::*;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn load(hex: &str) -> Value {
    let p = unhex(hex);
    let body = verify_payload(&p, true).expect("valid payload");
    restore_value(body, &Shapes::default(), 0).expect("loads")
}

fn strings(v: &Value) -> Vec<Vec<u8>> {
    match v.as_ref() {
        ValueRef::List(l) => l.iter().map(|e| e.to_vec()).collect(),
        ValueRef::Set(s) => {
            let mut m: Vec<Vec<u8>> = s.iter().map(|e| e.to_vec()).collect();
            m.sort();
            m
        }
        ValueRef::Hash(h) => {
            let mut m: Vec<Vec<u8>> = h.iter(0).flat_map(|(f, v)| [f.to_vec(), v.to_vec()]).collect();
            m.sort();
            m
        }
        ValueRef::ZSet(z) => z.iter().flat_map(|(m, s)| [m.to_vec(), s.to_string().into_bytes()]).collect(),
        ValueRef::Str(s) => vec![s.to_vec()],
        ValueRef::Stream(_) => unreachable!("no stream test vectors here"),
    }
}

fn b(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

#[test]
fn redis_7_0_payloads_load() {
    assert_eq!(load("000568656c6c6f0a006372df766534200a"), Value::Bytes(b"hello".to_vec()));
    assert_eq!(load("00c139300a009d94ea2793fc08b9"), Value::Int(12345));
    assert_eq!(load("00c0f90a005e26d130d7a242ab"), Value::Int(-7));
    assert_eq!(load("000d313233343536373839303132330a005e0c12ae0429bc1e"), Value::Int(1_234_567_890_123));
    // LZF-compressed 100 x 'a'.
    assert_eq!(load("00c3094064016161e057000161610a00e8a3b507b06df271"), Value::Bytes(vec![b'a'; 100]));
    // Quicklist of one listpack node.
    let l = load("120102171700000005008161028162020101c3e802f290eefe04ff0a004735e5c1042a0590");
    assert_eq!(strings(&l), b(&["a", "b", "1", "1000", "-70000"]));
    // Intset.
    let s = load("0b100200000004000000fbff010002002c010a0088f631da7988f241");
    assert_eq!(strings(&s), b(&["-5", "1", "2", "300"]));
    // Set as counted strings.
    assert_eq!(strings(&load("0203017a017801790a0002f49c4ccddab524")), b(&["x", "y", "z"]));
    // Sorted set listpack with an infinite score.
    let z = load("111c1c000000060081610283312e3504816202020181630283696e6604ff0a0089597f26062da8a1");
    assert_eq!(strings(&z), b(&["a", "1.5", "b", "2", "c", "inf"]));
    // Hash listpack.
    let h = load("10252500000006008266310382763103826632030201826633038a787878787878787878780bff0a00d942b347ea7eabc5");
    assert_eq!(strings(&h), b(&["2", "f1", "f2", "f3", "v1", "xxxxxxxxxx"]));
}

#[test]
fn redis_8_payloads_load() {
    // Set listpack (Redis 7.2+).
    let s = load("1410100000000300817802817902817a02ff0c00e6f757bb21e2cd72");
    assert_eq!(strings(&s), b(&["x", "y", "z"]));
    // Hash listpack with field TTLs: a at 4102444800000, b at ...123, c none.
    let p = unhex("1900d8c32cbb0300002c2c00000009008161020101f400d8c32cbb030000098162020201f47bd8c32cbb0300000981630203010001ff0c001c7a22c96eb8a221");
    let v = restore_value(verify_payload(&p, true).unwrap(), &Shapes::default(), 0).unwrap();
    let ValueRef::Hash(h) = v.as_ref() else { panic!("not a hash") };
    assert_eq!(h.expire_of(b"a", 0), Some(Some(4_102_444_800_000)));
    assert_eq!(h.expire_of(b"b", 0), Some(Some(4_102_444_800_123)));
    assert_eq!(h.expire_of(b"c", 0), Some(None));
    assert_eq!(h.encoding_name(), "listpackex");
    // Loaded after a's deadline: a is gone.
    let v = restore_value(verify_payload(&p, true).unwrap(), &Shapes::default(), 4_102_444_800_000).unwrap();
    let ValueRef::Hash(h) = v.as_ref() else { panic!("not a hash") };
    assert_eq!(h.len(), 2);
    assert_eq!(h.get(b"a", 4_102_444_800_000), None);
}

fn roundtrip(v: &Value) -> Value {
    let p = dump_payload(v.as_ref(), 0);
    restore_value(verify_payload(&p, true).unwrap(), &Shapes::default(), 0).unwrap()
}

#[test]
fn every_type_round_trips() {
    let shapes = Shapes::default();
    for s in [Value::Int(0), Value::Int(-129), Value::Int(70_000), Value::Int(i64::MIN), Value::Bytes(b"".to_vec()), Value::Bytes(vec![7; 20_000])] {
        assert_eq!(roundtrip(&s), s);
    }
    let mut l = List::new();
    let items: Vec<Vec<u8>> = (0..1000).map(|i| format!("e{i}").into_bytes()).chain([vec![], vec![b'x'; 70_000]]).collect();
    l.push(End::Tail, &items, &shapes.list);
    assert_eq!(strings(&roundtrip(&Value::List(Box::new(l)))), items);

    let mut s = Set::new();
    for i in 0..300 {
        s.insert(format!("{}", i * 7 - 500).as_bytes(), &shapes.set);
    }
    let v = Value::Set(Box::new(s));
    assert_eq!(strings(&roundtrip(&v)), strings(&v));

    let mut z = ZSet::new();
    for i in 0..300 {
        z.insert(format!("m{i}").as_bytes(), i as f64 / 7.0 - 3.0, &shapes.zset);
    }
    z.insert(b"ninf", f64::NEG_INFINITY, &shapes.zset);
    let v = Value::ZSet(Box::new(z));
    assert_eq!(strings(&roundtrip(&v)), strings(&v));

    let mut h = Hash::new();
    for i in 0..700 {
        h.insert(format!("f{i}").as_bytes(), format!("{i}").as_bytes(), &shapes.hash);
    }
    h.set_expire(b"f3", 5_000, ExpireCond::Always, 0);
    h.set_expire(b"f9", 9_000, ExpireCond::Always, 0);
    let v = Value::Hash(Box::new(h));
    let p = dump_payload(v.as_ref(), 0);
    assert_eq!(p[0], ty::HASH_METADATA);
    assert_eq!(u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]]), RDB_VERSION);
    let back = roundtrip(&v);
    assert_eq!(strings(&back), strings(&v));
    let ValueRef::Hash(h) = back.as_ref() else { panic!("not a hash") };
    assert_eq!(h.expire_of(b"f3", 0), Some(Some(5_000)));
    assert_eq!(h.expire_of(b"f9", 0), Some(Some(9_000)));
    assert_eq!(h.expire_of(b"f4", 0), Some(None));
}

#[test]
fn plain_payloads_use_the_old_version() {
    let p = dump_payload(Value::Int(5).as_ref(), 0);
    assert_eq!(&p[..5], &[ty::STRING, 0xc0, 5, 9, 0]); // int8 encoding, RDB 9
    assert_eq!(p.len(), 13);
    assert_eq!(u64::from_le_bytes(p[5..].try_into().unwrap()), crc64(0, &p[..5]));
}

#[test]
fn corrupt_payloads_are_errors() {
    let good = dump_payload(Value::Bytes(b"hello world".to_vec()).as_ref(), 0);
    assert!(verify_payload(&good, true).is_ok());
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x20;
        assert!(verify_payload(&bad, true).is_err(), "flip at {i}");
    }
    for cut in 0..good.len() {
        assert!(verify_payload(&good[..cut], true).is_err() || restore_value(verify_payload(&good[..cut], true).unwrap(), &Shapes::default(), 0).is_err());
    }
    // A newer RDB version is refused.
    let mut newer = good.clone();
    let n = newer.len();
    newer[n - 10] = 13;
    assert!(verify_payload(&newer, false).is_err());
    // Without the checksum, bodies are still checked: a huge declared count,
    // a truncated element, a duplicate member, trailing bytes.
    for body in [
        unhex("0281ffffffffffffffff"),
        unhex("020301610162"),
        unhex("020201610161"),
        unhex("0201016101"),
        unhex("000161ff"),
        unhex("ff"),
        unhex("0400"),
    ] {
        assert!(restore_value(&body, &Shapes::default(), 0).is_err(), "{body:?}");
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A cheap deterministic fuzz over every type byte.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 40) as usize;
        let mut body: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8 ^ i as u8).collect();
        if let Some(first) = body.first_mut() {
            *first %= 26;
        }
        let _ = restore_value(&body, &Shapes::default(), 0);
    }
}

// ------------------------------------------------------------------ streams

use crate::types::stream::{Retry, Stream, StreamConfig, StreamId};

fn stream_of(v: &Value) -> &Stream {
    let ValueRef::Stream(s) = v.as_ref() else { panic!("not a stream") };
    s
}

fn sid(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

/// Entries as (id, fields) with the fields as text, for comparisons.
fn entries(s: &Stream) -> Vec<(String, Vec<String>)> {
    s.range(StreamId::MIN, StreamId::MAX, false, 0)
        .into_iter()
        .map(|e| (e.id.to_string(), e.fields.iter().map(|f| String::from_utf8(f.clone()).unwrap()).collect()))
        .collect()
}

fn version_of(p: &[u8]) -> u16 {
    u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]])
}

// Redis 7.0: XADD s 1-1 f v, 1-2 f 12, 2-0 a b c d, 3-5 f 300; XDEL s 1-2;
// XGROUP CREATE s g1 0 and g2 $; XREADGROUP g1 alice COUNT 2, then bob COUNT 1.
const REDIS_STREAM: &str = "130110000000000000000100000000000000014049490000001d00030101010101816602000102010001000181760204010301000101010c01040100010101dfff0202018161028162028163028164020801020102010401c12c020401ff03030501010102040202673103050403000000000000000100000000000000019346bf01a201000001000000000000000200000000000000009346bf01a20100000100000000000000030000000000000005ab46bf01a2010000010205616c6963659346bf01a201000002000000000000000100000000000000010000000000000002000000000000000003626f62ab46bf01a20100000100000000000000030000000000000005026732030581ffffffffffffffff00000a00e8c85cca1fe2eda9";
// Redis 7.0: XADD t 5-0 name x n 1, 5-1 name y n 2, 6-0 other -70000;
// XGROUP CREATE t g 0; XREADGROUP g c COUNT 1.
const REDIS_STREAM_PLAIN: &str = "130110000000000000000500000000000000004048480000001900030100010201846e616d6505816e02000102010001000181780201010501020100010101817902020105010001010100010101856f7468657206f290eefe040601ff03060005000000030101670500010100000000000000050000000000000000a76cbf01a201000001010163a76cbf01a201000001000000000000000500000000000000000a00f78c9a65bd1a9b0d";
// Redis 7.0: XADD e 1-1 a b; XDEL e 1-1; XGROUP CREATE e grp $ ENTRIESREAD 0.
const REDIS_STREAM_EMPTY: &str = "13000001010000010101010367727001010000000a00d168ce09058a180e";

#[test]
fn redis_7_0_stream_payloads_load() {
    let v = load(REDIS_STREAM);
    let s = stream_of(&v);
    let e = |id: &str, f: &[&str]| (id.to_string(), f.iter().map(|x| x.to_string()).collect::<Vec<_>>());
    assert_eq!(entries(s), vec![e("1-1", &["f", "v"]), e("2-0", &["a", "b", "c", "d"]), e("3-5", &["f", "300"])]);
    assert_eq!((s.len(), s.last_id(), s.first_id(), s.max_deleted_id(), s.entries_added()), (3, sid(3, 5), sid(1, 1), sid(1, 2), 4));
    let g1 = s.group(b"g1").unwrap();
    assert_eq!((g1.last_id, g1.entries_read), (sid(3, 5), 4));
    let pel: Vec<_> = g1.pending().iter().map(|(id, n)| (*id, n.delivery_time, n.delivery_count, n.consumer.as_deref().unwrap().to_vec())).collect();
    assert_eq!(
        pel,
        vec![
            (sid(1, 1), 1_795_325_642_387, 1, b"alice".to_vec()),
            (sid(2, 0), 1_795_325_642_387, 1, b"alice".to_vec()),
            (sid(3, 5), 1_795_325_642_411, 1, b"bob".to_vec()),
        ]
    );
    let alice = g1.consumer(b"alice").unwrap();
    assert_eq!((alice.seen_time, alice.active_time, alice.pending()), (1_795_325_642_387, 1_795_325_642_387, &[sid(1, 1), sid(2, 0)][..]));
    assert_eq!(g1.consumer(b"bob").unwrap().pending(), [sid(3, 5)]);
    let g2 = s.group(b"g2").unwrap();
    assert_eq!((g2.last_id, g2.entries_read, g2.pending().len(), g2.consumers().len()), (sid(3, 5), -1, 0, 0));
    // Dumped again it drops the tombstone but keeps everything else, as type 19.
    let p = dump_payload(v.as_ref(), 0);
    assert_eq!((p[0], version_of(&p)), (ty::STREAM_LISTPACKS_2, 10));
    assert_same_stream(&roundtrip(&v), &v);

    let empty = load(REDIS_STREAM_EMPTY);
    let s = stream_of(&empty);
    assert_eq!((s.len(), s.last_id(), s.max_deleted_id(), s.entries_added(), s.node_count()), (0, sid(1, 1), sid(1, 1), 1, 0));
    assert_eq!(s.group(b"grp").unwrap().entries_read, 0);
}

#[test]
fn stream_without_tombstones_dumps_as_redis_does() {
    // Same layout, byte for byte, as Redis 7.0 wrote it.
    let p = unhex(REDIS_STREAM_PLAIN);
    assert_eq!(dump_payload(load(REDIS_STREAM_PLAIN).as_ref(), 0), p);
    let p = unhex(REDIS_STREAM_EMPTY);
    assert_eq!(dump_payload(load(REDIS_STREAM_EMPTY).as_ref(), 0), p);
}

/// Same entries, IDs, groups, PELs and consumers (what a payload carries:
/// a node's fill counter, which counts deleted entries, does not travel).
fn assert_same_stream(a: &Value, b: &Value) {
    let (x, y) = (stream_of(a), stream_of(b));
    assert_eq!(entries(x), entries(y));
    assert_eq!((x.len(), x.last_id(), x.first_id(), x.max_deleted_id(), x.entries_added(), x.node_count()), (y.len(), y.last_id(), y.first_id(), y.max_deleted_id(), y.entries_added(), y.node_count()));
    assert_eq!(x.groups(), y.groups());
    assert_eq!(dump_payload(a.as_ref(), 0), dump_payload(b.as_ref(), 0));
}

/// A stream built through the public API: several nodes, entries with and
/// without the master fields, deletions, two groups with pending entries.
fn busy_stream(active_differs: bool) -> Stream {
    let cfg = StreamConfig { node_max_bytes: 4096, node_max_entries: 3, ..StreamConfig::default() };
    let mut s = Stream::new();
    for i in 0..10u64 {
        let pairs: Vec<Vec<u8>> = if i % 4 == 3 {
            vec![b"other".to_vec(), vec![b'x'; 100 * i as usize], b"n".to_vec(), b"-1".to_vec()]
        } else {
            vec![b"name".to_vec(), format!("v{i}").into_bytes(), b"n".to_vec(), (i as i64 * 1000 - 4000).to_string().into_bytes()]
        };
        s.append(sid(1000 + i / 2, i % 2), &pairs, &cfg);
    }
    assert!(s.remove(sid(1000, 0)) && s.remove(sid(1002, 1)));
    s.create_group(b"g", StreamId::MIN, 0);
    s.create_group(b"h", sid(1003, 0), -1);
    let g = s.group_mut(b"g").unwrap();
    g.create_consumer(b"alice", 50);
    g.create_consumer(b"bob", 60);
    g.deliver(sid(1000, 1), b"alice", 70);
    g.deliver(sid(1001, 0), b"bob", 80);
    g.deliver(sid(1003, 1), b"alice", 90);
    g.claim(sid(1001, 0), b"bob", 85, Retry::Set(7));
    for c in [&b"alice"[..], b"bob"] {
        let c = g.consumer_mut(c).unwrap();
        c.active_time = if active_differs { 40 } else { c.seen_time };
    }
    if active_differs {
        g.create_consumer(b"idle", 100); // never active: -1
    }
    s.set_ids(sid(2000, 0), Some(42), Some(sid(1002, 1)));
    s
}

#[test]
fn streams_round_trip() {
    for active_differs in [false, true] {
        let v = Value::Stream(Box::new(busy_stream(active_differs)));
        let p = dump_payload(v.as_ref(), 0);
        let want = if active_differs { (ty::STREAM_LISTPACKS_3, 11) } else { (ty::STREAM_LISTPACKS_2, 10) };
        assert_eq!((p[0], version_of(&p)), want);
        assert_same_stream(&roundtrip(&v), &v);
    }
    // An empty stream with no groups, and one emptied by deletion.
    assert_eq!(roundtrip(&Value::Stream(Box::default())), Value::Stream(Box::default()));
    let mut s = Stream::new();
    s.append(sid(5, 5), &[b"a", b"b"], &StreamConfig::default());
    s.remove(sid(5, 5));
    let v = Value::Stream(Box::new(s));
    assert_same_stream(&roundtrip(&v), &v);
}

/// Re-signs a body (type byte onward) as a payload at version 11.
fn sign(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn corrupt_streams_are_errors() {
    let good = unhex(REDIS_STREAM);
    let body = &good[..good.len() - 10];
    let shapes = Shapes::default();
    assert!(restore_value(body, &shapes, 0).is_ok());
    for cut in 0..body.len() {
        assert!(restore_value(&body[..cut], &shapes, 0).is_err(), "cut at {cut}");
    }
    // Every single-byte change either loads or is refused, never panics.
    for i in 0..body.len() {
        for x in [0x01, 0x80, 0xff] {
            let mut bad = body.to_vec();
            bad[i] ^= x;
            let _ = restore_value(&bad, &shapes, 0);
        }
    }
    // Specific inconsistencies, each found in a valid payload by its bytes.
    let fix = |from: &str, to: &str| {
        let (f, t) = (unhex(from), unhex(to));
        let at = body.windows(f.len()).position(|w| w == f.as_slice()).expect("pattern present");
        let mut b = body.to_vec();
        b.splice(at..at + f.len(), t);
        assert!(restore_value(verify_payload(&sign(&b), true).unwrap(), &shapes, 0).is_err(), "{from} -> {to}");
    };
    fix("ff0303050101", "ff0403050101"); // length 3 stated as 4
    fix("ff0303050101", "ff0303040101"); // last ID 3-4, below the last entry
    fix("0267310305", "0267320305"); // two groups called g2
    // bob's pending 3-5 becomes 3-6, which the group PEL lacks.
    fix("03626f62ab46bf01a20100000100000000000000030000000000000005", "03626f62ab46bf01a20100000100000000000000030000000000000006");
    // bob claims 2-0 too, which alice owns.
    fix("03626f62ab46bf01a20100000100000000000000030000000000000005", "03626f62ab46bf01a20100000100000000000000020000000000000000");
    // bob pends nothing: 3-5 has no owner.
    fix("03626f62ab46bf01a20100000100000000000000030000000000000005", "03626f62ab46bf01a201000000");
    // The node key is not 16 bytes.
    fix("0110000000000000000100000000000000014049", "010f0000000000000001000000000000014049");
}

/// Payloads from Redis's corrupt-dump suite (bodies only, checksum left off):
/// each is refused with the reason Redis logs for it, and an empty
/// collection is `EMPTY`, not a corruption.
#[test]
fn refusals_say_why() {
    let why = |hex: &str| restore_value(&unhex(hex), &Shapes::default(), 0).unwrap_err();
    // Hash ziplist with a duplicate field ("a" twice).
    assert_eq!(why("0d1b1b00000016000000040000026100040262000402610004026400ff").reason, "Hash ziplist integrity check failed.");
    // Hash ziplist whose third entry's prevlen (0x14) is wrong.
    assert_eq!(why("0d1b1b00000016000000040000026100040262000414630004026400ff").reason, "Hash ziplist integrity check failed.");
    // A listpack-ex hash with a TTL-less field before one with a TTL.
    assert_eq!(
        why("172d2d0000000900826631038276310300018266320382763203f4e0597a96000000000982663303827633030001ff").reason,
        "Hash listpack integrity check failed."
    );
    // An empty intset (well formed, no members).
    assert_eq!(why("0b080200000000000000"), RdbError::EMPTY);
    // An empty quicklist node, the list's only one.
    assert_eq!(why("0e010b0b0000000a0000000000ff"), RdbError::EMPTY);
    // A zipmap whose count (3) does not match its two pairs.
    assert_eq!(why("090e03016101007802626202017a7a00ff").reason, "Zipmap integrity check failed.");
    // An empty zipmap is corrupt (Redis never wrote one), not an empty key.
    assert_eq!(why("090200ff").reason, "Zipmap integrity check failed.");
}

/// A member that is an integer's digits dumps as that integer (Redis's
/// rdbTryIntegerEncoding), however the set keeps it: a set left with "193"
/// after its member TTLs ran out kept it as an integer, one loaded from
/// the dump kept the digits, and the two dumps differed (found by the
/// rdb_value fuzz target: dump, load, dump must give the same bytes).
#[test]
fn integer_digits_dump_as_integers() {
    let found = [
        0xe0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x01, 0x10, 0x08, 0x08, 0x00, 0x00, 0x00, 0xe1, 0x82, 0x82, 0x27, 0x02, 0x00,
        0x08, 0xde, 0x05, 0x04, 0x05, 0x01, 0x05, 0x04, 0x00, 0xc1, 0xc1, 0x00, 0x01, 0x10, 0x00, 0x00, 0xe1, 0x82, 0x82, 0x27, 0x02, 0x00, 0x00,
        0xde, 0x04, 0x01, 0x02, 0x01, 0x01, 0x04, 0x00, 0xc1, 0xc1, 0x00,
    ];
    let shapes = Shapes::default();
    let v = restore_value(&found, &shapes, 0).expect("loads");
    let p = dump_payload(v.as_ref(), 0);
    let again = restore_value(verify_payload(&p, true).expect("verifies"), &shapes, 0).expect("own payload loads");
    assert_eq!(dump_payload(again.as_ref(), 0), p);
    let mut digits = Vec::new();
    put_strref(&mut digits, StrRef::Bytes(b"193"));
    let mut int = Vec::new();
    put_strref(&mut int, StrRef::Int(193));
    assert_eq!(digits, int);
    for not_canonical in [&b"0193"[..], b"+1", b"-0", b" 1", b"123456789012"] {
        let mut out = Vec::new();
        put_strref(&mut out, StrRef::Bytes(not_canonical));
        assert_eq!(out[1..], *not_canonical, "{not_canonical:?} stays raw");
    }
}
