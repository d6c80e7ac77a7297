//! Round trips through DUMP payloads, payloads written by Redis 7.0 and 8
//! (captured from real servers, as hex), and corrupt input.

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
    let p = dump_payload(v.as_ref(), 0).unwrap();
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
    let p = dump_payload(v.as_ref(), 0).unwrap();
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
    let p = dump_payload(Value::Int(5).as_ref(), 0).unwrap();
    assert_eq!(&p[..5], &[ty::STRING, 0xc0, 5, 9, 0]); // int8 encoding, RDB 9
    assert_eq!(p.len(), 13);
    assert_eq!(u64::from_le_bytes(p[5..].try_into().unwrap()), crc64(0, &p[..5]));
}

#[test]
fn corrupt_payloads_are_errors() {
    let good = dump_payload(Value::Bytes(b"hello world".to_vec()).as_ref(), 0).unwrap();
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
