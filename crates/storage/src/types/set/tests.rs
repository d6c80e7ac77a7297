//! Tests of `Set`: Redis's encoding names at each threshold, a model-based
//! property test across all shapes and conversions, and bytes-per-member
//! budgets.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

fn small_cfg() -> SetConfig {
    SetConfig {
        max_intset_entries: 5,
        max_listpack_entries: 4,
        max_listpack_value: 8,
        small_max_entries: 6,
        small_max_bytes: 60,
        bucket_entries: 2,
    }
}

fn shape(s: &Set) -> &'static str {
    match s.repr {
        Repr::Ints(_) => "ints",
        Repr::Small(_) => "small",
        Repr::Large(_) => "large",
    }
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

fn members(s: &Set) -> BTreeSet<Vec<u8>> {
    s.iter().map(|m| m.to_vec()).collect()
}

#[test]
fn intset_basics_and_order() {
    let cfg = SetConfig::default();
    let mut s = Set::new();
    for m in [b"5".as_slice(), b"-3", b"100000", b"5"] {
        s.insert(m, &cfg);
    }
    assert_eq!(s.len(), 3);
    assert_eq!(s.encoding_name(), "intset");
    assert_eq!(s.iter().map(|m| m.to_vec()).collect::<Vec<_>>(), [b"-3".to_vec(), b"5".to_vec(), b"100000".to_vec()]);
    assert!(s.contains(b"5") && !s.contains(b"05") && !s.contains(b"x"));
    // Non-canonical integers are strings: the set becomes a listpack.
    assert!(s.insert(b"007", &cfg));
    assert_eq!(s.encoding_name(), "listpack");
    assert!(s.contains(b"007") && s.contains(b"100000") && !s.contains(b"7"));
    assert!(s.remove(b"-3") && !s.remove(b"-3"));
    assert_eq!(s.len(), 3);
}

#[test]
fn names_follow_redis_thresholds() {
    let cfg = SetConfig::default();
    // Intset past 512 entries: hashtable.
    let mut s = Set::new();
    for i in 0..512 {
        s.insert(i.to_string().as_bytes(), &cfg);
    }
    assert_eq!(s.encoding_name(), "intset");
    s.insert(b"512", &cfg);
    assert_eq!(s.encoding_name(), "hashtable");
    assert_eq!(shape(&s), "large");
    // Intset of 127 plus a string: listpack; of 128: hashtable.
    for (n, name) in [(127, "listpack"), (128, "hashtable")] {
        let mut s = Set::new();
        for i in 0..n {
            s.insert(i.to_string().as_bytes(), &cfg);
        }
        s.insert(b"a", &cfg);
        assert_eq!(s.encoding_name(), name, "n = {n}");
        assert_eq!(s.len(), n + 1);
    }
    // An intset whose widest member is longer than 64 digits cannot exist,
    // but a long string joining one makes a hashtable.
    let mut s = Set::new();
    s.insert(b"1", &cfg);
    s.insert(&[b'x'; 65], &cfg);
    assert_eq!(s.encoding_name(), "hashtable");
    // Listpack: 128 members fine, the 129th converts; long member converts.
    let mut s = Set::new_listpack();
    for i in 0..128 {
        s.insert(format!("m{i}").as_bytes(), &cfg);
    }
    assert_eq!(s.encoding_name(), "listpack");
    assert!(!s.insert(b"m0", &cfg));
    assert_eq!(s.encoding_name(), "listpack");
    s.insert(b"m128", &cfg);
    assert_eq!(s.encoding_name(), "hashtable");
    s.remove(b"m128");
    assert_eq!(s.encoding_name(), "hashtable");
    let mut s = Set::new_listpack();
    s.insert(&[b'x'; 64], &cfg);
    assert_eq!(s.encoding_name(), "listpack");
    s.insert(&[b'y'; 65], &cfg);
    assert_eq!(s.encoding_name(), "hashtable");
    // Creation hints (SADD's member count).
    assert_eq!(Set::with_hint(b"1", 512, &cfg).encoding_name(), "intset");
    assert_eq!(Set::with_hint(b"1", 513, &cfg).encoding_name(), "hashtable");
    assert_eq!(Set::with_hint(b"a", 128, &cfg).encoding_name(), "listpack");
    assert_eq!(Set::with_hint(b"a", 129, &cfg).encoding_name(), "hashtable");
    let mut s = Set::new_listpack();
    s.reserve_hint(129, &cfg);
    assert_eq!(s.encoding_name(), "hashtable");
    let mut s = Set::new();
    s.insert(b"1", &cfg);
    s.reserve_hint(513, &cfg);
    assert_eq!(s.encoding_name(), "hashtable");
    assert!(s.contains(b"1"));
}

#[test]
fn maybe_to_intset_rebuilds_integer_sets() {
    let cfg = SetConfig::default();
    let mut s = Set::with_hint(b"a", 200, &cfg);
    for i in 0..200 {
        s.insert(i.to_string().as_bytes(), &cfg);
    }
    assert_eq!(s.encoding_name(), "hashtable");
    assert!(s.maybe_to_intset(&cfg));
    assert_eq!(s.encoding_name(), "intset");
    assert_eq!(s.len(), 200);
    s.insert(b"x", &cfg);
    assert!(!s.maybe_to_intset(&cfg));
}

#[test]
fn scan_sees_every_member_across_growth() {
    let cfg = small_cfg();
    let mut s = Set::new_listpack();
    for i in 0..50 {
        s.insert(format!("k{i}").as_bytes(), &cfg);
    }
    let mut seen = BTreeSet::new();
    let mut cursor = 0;
    let mut i = 50;
    loop {
        cursor = s.scan(cursor, 3, |m| {
            seen.insert(m.to_vec());
        });
        // Grow while scanning: the original members must all be seen.
        for _ in 0..5 {
            s.insert(format!("k{i}").as_bytes(), &cfg);
            i += 1;
        }
        if cursor == 0 {
            break;
        }
    }
    for j in 0..50 {
        assert!(seen.contains(format!("k{j}").as_bytes()), "k{j} missed");
    }
}

#[test]
fn random_and_pop() {
    let cfg = small_cfg();
    let mut r = rng(7);
    for first in [b"1".as_slice(), b"a"] {
        let mut s = Set::with_hint(first, 1, &cfg);
        let mut m = BTreeSet::new();
        for i in 0..40 {
            let v = if first == b"1" { i.to_string() } else { format!("v{i}") };
            s.insert(v.as_bytes(), &cfg);
            m.insert(v.into_bytes());
        }
        assert!(m.contains(&s.random(&mut r).unwrap().to_vec()));
        while let Some(p) = s.pop_random(&mut r) {
            assert!(m.remove(&p));
        }
        assert!(m.is_empty() && s.is_empty());
        assert_eq!(s.random(&mut r), None);
    }
}

#[test]
fn equality_ignores_shape() {
    let cfg = SetConfig::default();
    let mut a = Set::new();
    let mut b = Set::with_hint(b"a", 1000, &cfg);
    for i in 0..10 {
        a.insert(i.to_string().as_bytes(), &cfg);
        b.insert(i.to_string().as_bytes(), &cfg);
    }
    assert_eq!(a, b);
    b.remove(b"3");
    assert_ne!(a, b);
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u8>),
    Remove(Vec<u8>),
    Pop(u64),
    Hint(usize),
    ToIntset,
}

fn member() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (-40i64..40).prop_map(|i| i.to_string().into_bytes()),
        any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        "[a-c0]{1,3}".prop_map(String::into_bytes),
        "[x-z]{6,12}".prop_map(String::into_bytes),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => member().prop_map(Op::Insert),
        3 => member().prop_map(Op::Remove),
        1 => any::<u64>().prop_map(Op::Pop),
        1 => (0usize..10).prop_map(Op::Hint),
        1 => Just(Op::ToIntset),
    ]
}

/// Redis's encoding, modelled from its rules (t_set.c) on the model set.
fn redis_name(name: &mut &'static str, m: &BTreeSet<Vec<u8>>, op: &Op, added: bool, cfg: &SetConfig) {
    let all_ints = || m.iter().all(|v| parse_canonical_i64(v).is_some());
    match op {
        Op::Insert(v) if added => match *name {
            "intset" if parse_canonical_i64(v).is_some() && m.len() > cfg.max_intset_entries => *name = "hashtable",
            "intset" if parse_canonical_i64(v).is_some() => {}
            "intset" => {
                let n = m.len() - 1;
                let widest = m.iter().filter(|x| *x != v).map(|x| x.len()).max().unwrap_or(0);
                let fits = n < cfg.max_listpack_entries && v.len() <= cfg.max_listpack_value && widest <= cfg.max_listpack_value;
                *name = if fits { "listpack" } else { "hashtable" };
            }
            "listpack" if m.len() > cfg.max_listpack_entries || v.len() > cfg.max_listpack_value => *name = "hashtable",
            _ => {}
        },
        Op::Hint(h) => match *name {
            "intset" if *h > cfg.max_intset_entries => *name = "hashtable",
            "listpack" if *h > cfg.max_listpack_entries => *name = "hashtable",
            _ => {}
        },
        Op::ToIntset if !m.is_empty() && m.len() <= cfg.max_intset_entries && all_ints() => *name = "intset",
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn set_matches_model(first in member(), ops in prop::collection::vec(op(), 1..150)) {
        let cfg = small_cfg();
        let mut s = Set::with_hint(&first, 1, &cfg);
        let mut name = s.encoding_name();
        let mut m = BTreeSet::new();
        let mut r = rng(3);
        for op in &ops {
            let mut added = false;
            match op {
                Op::Insert(v) => {
                    added = s.insert(v, &cfg);
                    prop_assert_eq!(added, m.insert(v.clone()));
                }
                Op::Remove(v) => prop_assert_eq!(s.remove(v), m.remove(v)),
                Op::Pop(seed) => {
                    let mut r2 = rng(*seed);
                    match s.pop_random(&mut r2) {
                        Some(p) => prop_assert!(m.remove(&p)),
                        None => prop_assert!(m.is_empty()),
                    }
                }
                Op::Hint(h) => s.reserve_hint(*h, &cfg),
                Op::ToIntset => {
                    let done = s.maybe_to_intset(&cfg);
                    if done {
                        prop_assert!(m.iter().all(|v| parse_canonical_i64(v).is_some()));
                    }
                }
            }
            redis_name(&mut name, &m, op, added, &cfg);
            if matches!(op, Op::ToIntset) && m.is_empty() && s.encoding_name() == "intset" {
                name = "intset";
            }
            prop_assert_eq!(s.encoding_name(), name, "after {:?}", op);
            prop_assert_eq!(s.len(), m.len());
            prop_assert_eq!(&members(&s), &m);
            for v in m.iter() {
                prop_assert!(s.contains(v));
            }
            if let Some(x) = s.random(&mut r) {
                prop_assert!(m.contains(&x.to_vec()));
            }
            let mut seen = BTreeSet::new();
            let mut c = 0;
            loop {
                c = s.scan(c, 2, |x| { seen.insert(x.to_vec()); });
                if c == 0 { break; }
            }
            prop_assert_eq!(&seen, &m);
            prop_assert!(s.mem_usage() > 0 || m.is_empty());
        }
    }
}

fn uuid(r: &mut impl FnMut() -> u64) -> Vec<u8> {
    let (a, b) = (r(), r());
    let hex = format!("{a:016x}{b:016x}");
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]).into_bytes()
}

/// Bytes per member after each insert of a random 36-byte UUID string.
fn curve(n: usize, mut each: impl FnMut(usize, f64)) {
    let cfg = SetConfig::default();
    let mut s = Set::new();
    let mut r = rng(42);
    for i in 1..=n {
        assert!(s.insert(&uuid(&mut r), &cfg));
        each(i, s.mem_usage() as f64 / i as f64);
    }
}

#[test]
fn budget_uuid_members_smooth() {
    let mut prev = f64::MAX;
    let mut worst: f64 = 0.0;
    curve(100_000, |n, bpm| {
        assert!(bpm <= prev * 1.3, "cliff at n = {n}: {prev:.1} -> {bpm:.1} bytes/member");
        prev = bpm;
        if n >= 16 {
            worst = worst.max(bpm);
            assert!(bpm <= 48.0, "n = {n}: {bpm:.1} bytes/member");
        }
    });
    println!("UUID members: worst {worst:.1} B/member for 16 <= n <= 100k");
}

#[test]
fn budget_intset() {
    let cfg = SetConfig::default();
    let mut s = Set::new();
    for i in 0..512 {
        s.insert((i * 1000).to_string().as_bytes(), &cfg);
    }
    assert_eq!(s.encoding_name(), "intset");
    assert!(s.mem_usage() <= 512 * 4 * 5 / 4, "{}", s.mem_usage());
}

/// Measurements for the report: run with
/// `cargo test --release -p storage measure_set -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_set() {
    let mut points = vec![1, 8, 64, 128, 129, 200, 512, 513, 1000, 10_000, 100_000, 1_000_000];
    points.reverse();
    let mut prev = f64::MAX;
    let mut worst_step: f64 = 0.0;
    let t = std::time::Instant::now();
    curve(1_000_000, |n, bpm| {
        worst_step = worst_step.max(bpm / prev);
        prev = bpm;
        if points.last() == Some(&n) {
            points.pop();
            println!("UUID members n = {n}: {bpm:.1} B/member");
        }
    });
    println!("worst step ratio: {worst_step:.3}; 1M inserts (with measuring) {:?}", t.elapsed());
}
