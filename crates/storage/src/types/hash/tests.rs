//! Tests of `Hash`: behaviour per shape, a model-based property test across
//! both shapes and conversion, and the bytes-per-field budgets.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

const NOW: i64 = 1_700_000_000_000;

fn small_cfg() -> HashConfig {
    HashConfig {
        max_listpack_entries: 4,
        max_listpack_value: 8,
        small_max_entries: 6,
        small_max_bytes: 80,
        bucket_entries: 2,
    }
}

fn is_large(h: &Hash) -> bool {
    matches!(h.repr, Repr::Large(_))
}

/// xorshift64*: deterministic test randomness.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn random_field(r: &mut impl FnMut() -> u64, len: usize) -> Vec<u8> {
    (0..len).map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789"[(r() % 36) as usize]).collect()
}

#[test]
fn small_basics_and_names() {
    let cfg = HashConfig::default();
    let mut h = Hash::new();
    assert!(h.insert(b"a", b"1", &cfg));
    assert!(h.insert(b"b", b"hello", &cfg));
    assert!(!h.insert(b"a", b"-5", &cfg));
    assert_eq!(h.len(), 2);
    assert_eq!(h.get(b"a", NOW), Some(StrRef::Int(-5)));
    assert_eq!(h.get(b"b", NOW), Some(StrRef::Bytes(b"hello")));
    assert_eq!(h.get(b"c", NOW), None);
    assert_eq!(h.encoding_name(), "listpack");
    assert_eq!(h.iter(NOW).map(|(f, _)| f.to_vec()).collect::<Vec<_>>(), [b"a".to_vec(), b"b".to_vec()]);
    assert!(h.remove(b"a"));
    assert!(!h.remove(b"a"));
    // A long value flips Redis's view to hashtable, for good.
    h.insert(b"big", &[b'x'; 65], &cfg);
    assert_eq!(h.encoding_name(), "hashtable");
    h.remove(b"big");
    assert_eq!(h.encoding_name(), "hashtable");
    assert!(!is_large(&h));
}

#[test]
fn names_follow_redis_thresholds() {
    let cfg = HashConfig::default();
    let mut h = Hash::new();
    for i in 0..128 {
        h.insert(format!("f{i}").as_bytes(), b"v", &cfg);
    }
    assert_eq!(h.encoding_name(), "listpack");
    assert_eq!(h.set_expire(b"nope", NOW + 10, ExpireCond::Always, NOW), -2);
    assert_eq!(h.encoding_name(), "listpackex");
    h.insert(b"f128", b"v", &cfg);
    assert_eq!(h.encoding_name(), "hashtable");
    // Our shape follows our own limit (512 fields), not Redis's threshold.
    assert!(!is_large(&h));
    for i in 129..=512 {
        h.insert(format!("f{i}").as_bytes(), b"v", &cfg);
    }
    assert!(is_large(&h));
    // Shrinking does not go back to a listpack, in Redis or here.
    for i in 0..500 {
        h.remove(format!("f{i}").as_bytes());
    }
    assert_eq!(h.encoding_name(), "hashtable");
    for i in 0..500 {
        h.insert(format!("f{i}").as_bytes(), b"v", &cfg);
    }
    assert_eq!(h.len(), 513);
    for i in 0..=512 {
        assert_eq!(h.get(format!("f{i}").as_bytes(), NOW), Some(StrRef::Bytes(b"v")));
    }
}

#[test]
fn field_expiry_codes() {
    for cfg in [HashConfig::default(), small_cfg()] {
        let mut h = Hash::new();
        for i in 0..10 {
            h.insert(format!("f{i}").as_bytes(), b"v", &cfg);
        }
        assert_eq!(is_large(&h), cfg.small_max_entries < 10);
        use ExpireCond::*;
        assert_eq!(h.set_expire(b"f0", NOW + 100, Xx, NOW), 0);
        assert_eq!(h.set_expire(b"f0", NOW + 100, Gt, NOW), 0);
        assert_eq!(h.set_expire(b"f0", NOW + 100, Lt, NOW), 1);
        assert_eq!(h.set_expire(b"f0", NOW + 50, Nx, NOW), 0);
        assert_eq!(h.set_expire(b"f0", NOW + 200, Lt, NOW), 0);
        assert_eq!(h.set_expire(b"f0", NOW + 200, Gt, NOW), 1);
        assert_eq!(h.set_expire(b"f1", NOW + 50, Nx, NOW), 1);
        assert_eq!(h.expire_of(b"f0", NOW), Some(Some(NOW + 200)));
        assert_eq!(h.expire_of(b"f2", NOW), Some(None));
        assert_eq!(h.expire_of(b"zz", NOW), None);
        assert_eq!(h.min_deadline(), Some(NOW + 50));
        assert_eq!(h.persist(b"f1", NOW), 1);
        assert_eq!(h.persist(b"f1", NOW), -1);
        assert_eq!(h.persist(b"zz", NOW), -2);
        assert_eq!(h.min_deadline(), Some(NOW + 200));
        // Deadline at or before now deletes (condition checked first).
        assert_eq!(h.set_expire(b"f2", NOW, Xx, NOW), 0);
        assert_eq!(h.set_expire(b"f2", NOW, Always, NOW), 2);
        assert_eq!(h.len(), 9);
        // Expired (deadline < now) fields are invisible but still counted.
        assert_eq!(h.get(b"f0", NOW + 200), Some(StrRef::Bytes(b"v")));
        assert_eq!(h.get(b"f0", NOW + 201), None);
        assert_eq!(h.set_expire(b"f0", NOW + 500, Always, NOW + 201), -2);
        assert_eq!(h.len(), 9);
        assert_eq!(h.iter(NOW + 201).count(), 8);
        assert_eq!(h.expire_due(NOW + 201, 10), 1);
        assert_eq!(h.len(), 8);
        assert_eq!(h.min_deadline(), None);
        // HSET drops the TTL.
        h.set_expire(b"f3", NOW + 5, Always, NOW);
        assert!(!h.insert(b"f3", b"w", &cfg));
        assert_eq!(h.expire_of(b"f3", NOW), Some(None));
    }
}

#[test]
fn scan_sees_every_field_across_conversion() {
    let cfg = HashConfig { bucket_entries: 4, small_max_entries: 20, ..HashConfig::default() };
    let mut h = Hash::new();
    for i in 0..15 {
        h.insert(format!("f{i}").as_bytes(), b"1", &cfg);
    }
    let mut seen = BTreeSet::new();
    // A small hash comes back whole, cursor 0.
    assert_eq!(h.scan(0, 1, NOW, |f, _| {
            seen.insert(f.to_vec());
        }), 0);
    assert_eq!(seen.len(), 15);
    for i in 15..200 {
        h.insert(format!("f{i}").as_bytes(), b"1", &cfg);
    }
    let (mut cursor, mut seen, mut extra) = (0, BTreeSet::new(), 200);
    loop {
        cursor = h.scan(cursor, 5, NOW, |f, _| {
            seen.insert(f.to_vec());
        });
        for _ in 0..20 {
            h.insert(format!("f{extra}").as_bytes(), b"1", &cfg);
            extra += 1;
        }
        if cursor == 0 {
            break;
        }
    }
    for i in 0..200 {
        assert!(seen.contains(format!("f{i}").as_bytes()), "f{i} missed");
    }
}

#[test]
fn random_field_is_live() {
    for cfg in [HashConfig::default(), small_cfg()] {
        let mut h = Hash::new();
        let mut r = rng(7);
        assert_eq!(h.random_field(NOW, &mut r), None);
        for i in 0..20 {
            h.insert(format!("f{i}").as_bytes(), b"v", &cfg);
            if i != 13 {
                h.set_expire(format!("f{i}").as_bytes(), NOW + 1, ExpireCond::Always, NOW);
            }
        }
        for _ in 0..50 {
            assert_eq!(h.random_field(NOW + 2, &mut r).unwrap().0, b"f13");
        }
        let distinct: BTreeSet<_> = (0..500).map(|_| h.random_field(NOW, &mut r).unwrap().0.to_vec()).collect();
        assert_eq!(distinct.len(), 20);
    }
}

#[test]
fn one_field_hash_is_tiny() {
    let mut h = Hash::new();
    h.insert(b"hello_world", b"1", &HashConfig::default());
    assert_eq!(h.mem_usage(), 16);
    h.insert(b"hello_world", b"value", &HashConfig::default());
    assert_eq!(h.mem_usage(), 32);
    assert_eq!(size_of::<Hash>(), 24);
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, Vec<u8>),
    Remove(u8),
    Expire(u8, i64, u8),
    Persist(u8),
    ExpireDue(usize),
    Advance(i64),
}

fn field_name(i: u8) -> Vec<u8> {
    match i % 4 {
        0 => vec![b'L'; 120 + i as usize],
        _ => format!("f{i}").into_bytes(),
    }
}

fn op() -> impl Strategy<Value = Op> {
    let value = prop_oneof![
        Just(b"1".to_vec()),
        Just(b"-200".to_vec()),
        Just(b"70000".to_vec()),
        Just(b"12345678901".to_vec()),
        Just(b"007".to_vec()),
        prop::collection::vec(any::<u8>(), 0..80),
    ];
    prop_oneof![
        4 => (0u8..40, value).prop_map(|(f, v)| Op::Insert(f, v)),
        2 => (0u8..40).prop_map(Op::Remove),
        3 => (0u8..40, -5i64..60, 0u8..5).prop_map(|(f, d, c)| Op::Expire(f, d, c)),
        1 => (0u8..40).prop_map(Op::Persist),
        1 => (0usize..5).prop_map(Op::ExpireDue),
        1 => (0i64..30).prop_map(Op::Advance),
    ]
}

type Model = BTreeMap<Vec<u8>, (Vec<u8>, Option<i64>)>;

fn check(h: &Hash, m: &Model, now: i64, ht: bool, ex: bool) {
    assert_eq!(h.len(), m.len());
    let live: BTreeMap<Vec<u8>, Vec<u8>> = m
        .iter()
        .filter(|(_, (_, d))| d.is_none_or(|d| d >= now))
        .map(|(f, (v, _))| (f.clone(), v.clone()))
        .collect();
    let got: BTreeMap<Vec<u8>, Vec<u8>> = h.iter(now).map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
    assert_eq!(got, live);
    for (f, (_, d)) in m {
        let want = live.contains_key(f).then_some(*d);
        assert_eq!(h.expire_of(f, now), want);
        assert_eq!(h.get(f, now).map(|v| v.to_vec()), live.get(f).cloned());
    }
    assert_eq!(h.min_deadline(), m.values().filter_map(|(_, d)| *d).min());
    let name = if ht { "hashtable" } else if ex { "listpackex" } else { "listpack" };
    assert_eq!(h.encoding_name(), name);
    let (mut cursor, mut seen) = (0, BTreeSet::new());
    loop {
        cursor = h.scan(cursor, 3, now, |f, _| {
            seen.insert(f.to_vec());
        });
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(seen, live.keys().cloned().collect());
    assert!(h.mem_usage() > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn hash_matches_model(ops in prop::collection::vec(op(), 1..120)) {
        let cfg = small_cfg();
        let mut h = Hash::new();
        let mut m = Model::new();
        let (mut now, mut ht, mut ex) = (1000i64, false, false);
        let mut r = rng(3);
        for op in ops {
            match op {
                Op::Insert(f, v) => {
                    let f = field_name(f);
                    ht |= f.len() > cfg.max_listpack_value || v.len() > cfg.max_listpack_value;
                    prop_assert_eq!(h.insert(&f, &v, &cfg), m.insert(f, (v, None)).is_none());
                    ht |= m.len() > cfg.max_listpack_entries;
                }
                Op::Remove(f) => {
                    let f = field_name(f);
                    prop_assert_eq!(h.remove(&f), m.remove(&f).is_some());
                }
                Op::Expire(f, d, c) => {
                    let f = field_name(f);
                    let cond = [ExpireCond::Always, ExpireCond::Nx, ExpireCond::Xx, ExpireCond::Gt, ExpireCond::Lt][c as usize];
                    let deadline = now + d;
                    ex = true;
                    let want = match m.get(&f) {
                        Some((_, old)) if old.is_none_or(|o| o >= now) => {
                            let met = match (old, cond) {
                                (_, ExpireCond::Always) => true,
                                (None, c) => c == ExpireCond::Nx || c == ExpireCond::Lt,
                                (Some(_), ExpireCond::Nx) => false,
                                (Some(_), ExpireCond::Xx) => true,
                                (Some(o), ExpireCond::Gt) => deadline > *o,
                                (Some(o), ExpireCond::Lt) => deadline < *o,
                            };
                            if !met { 0 } else if deadline <= now { m.remove(&f); 2 } else {
                                m.get_mut(&f).unwrap().1 = Some(deadline);
                                1
                            }
                        }
                        _ => -2,
                    };
                    prop_assert_eq!(h.set_expire(&f, deadline, cond, now), want);
                }
                Op::Persist(f) => {
                    let f = field_name(f);
                    let want = match m.get_mut(&f) {
                        Some((_, d)) if d.is_none_or(|d| d >= now) => if d.take().is_some() { 1 } else { -1 },
                        _ => -2,
                    };
                    prop_assert_eq!(h.persist(&f, now), want);
                }
                Op::ExpireDue(max) => {
                    let due = m.values().filter(|(_, d)| d.is_some_and(|d| d < now)).count();
                    let mut gone = Vec::new();
                    let n = h.expire_due_with(now, max, |f| gone.push(f.to_vec()));
                    prop_assert_eq!(n, due.min(max));
                    prop_assert_eq!(gone.len(), n);
                    for f in gone {
                        let (_, d) = m.remove(&f).expect("removed field was stored");
                        prop_assert!(d.is_some_and(|d| d < now));
                    }
                }
                Op::Advance(ms) => now += ms,
            }
            check(&h, &m, now, ht, ex);
            let live = h.iter(now).count();
            prop_assert_eq!(h.random_field(now, &mut r).is_some(), live > 0);
        }
    }
}

/// Bytes per field after inserting `n` random 24-character fields with
/// value "1", reporting every step to `each`.
fn curve(n: usize, mut each: impl FnMut(usize, f64)) {
    let cfg = HashConfig::default();
    let mut h = Hash::new();
    let mut r = rng(42);
    for i in 1..=n {
        assert!(h.insert(&random_field(&mut r, 24), b"1", &cfg));
        each(i, h.mem_usage() as f64 / i as f64);
    }
}

#[test]
fn budget_24_char_fields_smooth() {
    let mut prev = f64::MAX;
    let mut worst_small: f64 = 0.0;
    let mut worst_large: f64 = 0.0;
    curve(200_000, |n, bpf| {
        if n <= 512 {
            worst_small = worst_small.max(bpf);
        } else {
            worst_large = worst_large.max(bpf);
        }
        assert!(bpf <= prev * 1.3, "cliff at n = {n}: {prev:.1} -> {bpf:.1} bytes/field");
        prev = bpf;
        if n >= 16 {
            assert!(bpf <= if n <= 512 { 33.0 } else { 36.0 }, "n = {n}: {bpf:.1} bytes/field");
        }
    });
    println!("24-char fields: worst {worst_small:.1} B/field for n <= 512, {worst_large:.1} above");
}

#[test]
fn budget_short_fields_with_and_without_ttl() {
    let cfg = HashConfig::default();
    let n = 200_000;
    let mut h = Hash::new();
    for i in 0..n {
        h.insert(format!("{i:08}").as_bytes(), b"x", &cfg);
    }
    let plain = h.mem_usage() as f64 / n as f64;
    for i in 0..n {
        assert_eq!(h.set_expire(format!("{i:08}").as_bytes(), NOW + 1 + i as i64, ExpireCond::Always, NOW), 1);
    }
    let ttl = h.mem_usage() as f64 / n as f64;
    println!("8-byte fields, n = {n}: {plain:.1} B/field, {ttl:.1} with a TTL each");
    assert!(plain <= 24.0, "{plain}");
    assert!(ttl <= 32.0, "{ttl}");
    assert_eq!(h.min_deadline(), Some(NOW + 1));
}

/// Measurements for docs/design/hash.md: run with
/// `cargo test --release -p storage measure_hash -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_hash() {
    let mut points = vec![1, 2, 4, 8, 16, 32, 64, 100, 128, 129, 150, 200, 256, 300, 400, 512, 513, 1000, 10_000, 100_000];
    points.reverse();
    let mut prev = f64::MAX;
    let mut worst_step: f64 = 0.0;
    curve(100_000, |n, bpf| {
        worst_step = worst_step.max(bpf / prev);
        prev = bpf;
        if points.last() == Some(&n) {
            points.pop();
            println!("24-char fields n = {n}: {bpf:.1} B/field");
        }
    });
    println!("worst step ratio up to 100k: {worst_step:.3}");
    let cfg = HashConfig::default();
    let n = 1_000_000;
    let mut h = Hash::new();
    let mut worst = std::time::Duration::ZERO;
    let start = std::time::Instant::now();
    for i in 0..n {
        let t = std::time::Instant::now();
        h.insert(format!("{i:08}").as_bytes(), b"x", &cfg);
        worst = worst.max(t.elapsed());
    }
    let total = start.elapsed();
    let plain = h.mem_usage() as f64 / n as f64;
    let t = std::time::Instant::now();
    for i in 0..n {
        h.set_expire(format!("{i:08}").as_bytes(), NOW + 1 + i as i64, ExpireCond::Always, NOW);
    }
    let expire_time = t.elapsed();
    let ttl = h.mem_usage() as f64 / n as f64;
    let t = std::time::Instant::now();
    let mut hits = 0;
    for i in 0..n {
        hits += h.get(format!("{i:08}").as_bytes(), NOW).is_some() as usize;
    }
    let get_time = t.elapsed();
    assert_eq!(hits, n);
    println!("1M 8-byte fields: {plain:.1} B/field, {ttl:.1} with TTLs; inserts {total:?} (worst single {worst:?}), set_expire {expire_time:?}, get {get_time:?}");
    let t = std::time::Instant::now();
    let removed = h.expire_due(NOW + 1 + n as i64, usize::MAX);
    println!("expire_due of all {removed}: {:?}", t.elapsed());
}

/// For every N up to 512, N 24-char fields with value "1" cost no more
/// than Redis's listpack of them (7 bytes of header and end mark, 26 + 2
/// bytes per field and value) rounded to its jemalloc class.
#[test]
fn budget_not_above_redis_listpack_up_to_512() {
    curve(512, |n, bpf| {
        let redis = alloc_size(7 + 28 * n) as f64 / n as f64;
        assert!(bpf <= redis, "n = {n}: {bpf:.2} B/field, Redis's listpack {redis:.2}");
    });
}

/// A hash whose fields are one width of 1-8 bytes and whose values are all
/// integers is kept inline with no tag bytes: the header names the
/// integers' width, the widest value's shortest form, and it is chosen
/// only where it is shorter than the tagged values.
#[test]
fn inline_hash_of_integers() {
    let cfg = HashConfig::default();
    let enc = |pairs: &[(&str, &str)]| {
        let mut h = Hash::new();
        for (f, v) in pairs {
            h.insert(f.as_bytes(), v.as_bytes(), &cfg);
        }
        let mut out = Vec::new();
        assert!(h.inline_encode(&mut out));
        let back = Hash::from_inline(&out);
        let (Repr::Small(a), Repr::Small(b)) = (&h.repr, &back.repr) else { unreachable!("small") };
        assert_eq!(a, b, "{pairs:?}");
        assert_eq!(back.mem_usage(), h.mem_usage());
        assert_eq!(Hash::inline_min_deadline(&out), None);
        out
    };
    // Seed 002's session: header, `i` + 4 bytes, `x` + 4 bytes.
    let out = enc(&[("i", "9999999"), ("x", "1702592000")]);
    assert_eq!(out.len(), 11);
    assert_eq!((inline::width(out[0]), inline::int_width(out[0])), (1, Some(4)));
    // A 7-digit id under 2^23 alone: 3 bytes.
    assert_eq!(enc(&[("i", "8388607")]), [inline::int_header(1, 3), b'i', 0xff, 0xff, 0x7f]);
    assert_eq!(enc(&[("i", "-8388608")]), [inline::int_header(1, 3), b'i', 0, 0, 0x80]);
    // Wide and negative values, 8-byte fields.
    let out = enc(&[("field001", "-5000000000"), ("field002", &i64::MIN.to_string()), ("field003", &i64::MAX.to_string())]);
    assert_eq!(inline::int_width(out[0]), Some(8));
    assert_eq!(out.len(), 1 + 3 * 16);
    // Not where it would not save: small values (one tag byte each) and
    // a mix of one large and many small ones stay tagged.
    for pairs in [&[("a", "1"), ("b", "127")][..], &[("a", "1"), ("b", "2"), ("c", "3"), ("d", "1000000000")]] {
        assert_eq!(inline::int_width(enc(pairs)[0]), None, "{pairs:?}");
    }
    // Not with a non-integer value, a 9-byte field or mixed widths.
    for pairs in [&[("a", "1000"), ("b", "x")][..], &[("field0001", "1000")], &[("a", "1000"), ("bb", "1000")], &[("a", "01000")]] {
        assert_eq!(inline::int_width(enc(pairs)[0]), None, "{pairs:?}");
    }
    // Not for a hash OBJECT ENCODING calls listpackex (its header bit).
    let mut h = Hash::new();
    h.insert(b"i", b"1000000", &cfg);
    h.set_expire(b"i", 1 << 40, ExpireCond::Always, 0);
    h.persist(b"i", 0);
    let mut out = Vec::new();
    assert!(h.inline_encode(&mut out));
    assert_eq!((out[0] & 3, Hash::from_inline(&out).encoding_name()), (inline::HASH_EX, "listpackex"));
}

proptest! {
    /// The inline form gives back the same hash, byte for byte: fixed-width
    /// fields lose their length bytes there, field TTLs and mixed lengths
    /// keep the packed entries as they are.
    #[test]
    fn inline_form_round_trips(
        fields in proptest::collection::vec((0usize..3, prop::option::of(1i64..1_000), any::<u32>()), 0..30),
        ex in any::<bool>(),
    ) {
        let cfg = HashConfig::default();
        let mut h = Hash::new();
        for (i, (len, ttl, v)) in fields.iter().enumerate() {
            let f = format!("{i:0w$}", w = 8 + len * (i % 2)).into_bytes();
            h.insert(&f, v.to_string().as_bytes(), &cfg);
            if let Some(t) = ttl.filter(|_| ex) {
                h.set_expire(&f, 10_000 + t, ExpireCond::Always, 0);
            }
        }
        let mut out = vec![0x55];
        prop_assert!(h.inline_encode(&mut out), "30 short fields fit");
        let back = Hash::from_inline(&out[1..]);
        let (Repr::Small(a), Repr::Small(b)) = (&h.repr, &back.repr) else { unreachable!("small") };
        prop_assert_eq!(a, b);
        prop_assert_eq!(back.mem_usage(), h.mem_usage());
        prop_assert_eq!(back.encoding_name(), h.encoding_name());
        let uniform = Fields::iter(a, HDR).all(|e| e.field.len() == 8 && e.deadline.is_none());
        prop_assert_eq!(inline::width(out[1]) > 0, uniform && !h.is_empty());
        prop_assert_eq!(Hash::inline_min_deadline(&out[1..]), h.min_deadline());
    }
}
