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
        fixed_bucket_bytes: 8,
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

fn member() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        (-40i64..40).prop_map(|i| i.to_string().into_bytes()),
        any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        "[a-c0]{1,3}".prop_map(String::into_bytes),
        "[x-z]{6,12}".prop_map(String::into_bytes),
    ]
}

/// Members of one width but for one in sixteen: the set's table keeps them
/// in fixed-width buckets, which change form as odd members come and go.
fn uniform_member() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        15 => "[a-d]{4}".prop_map(String::into_bytes),
        1 => "[a-d]{2}".prop_map(String::into_bytes),
    ]
}

fn op_of(member: impl Strategy<Value = Vec<u8>> + Clone) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => member.clone().prop_map(Op::Insert),
        3 => member.prop_map(Op::Remove),
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
    fn set_matches_model((first, ops) in prop_oneof![
        (member(), prop::collection::vec(op_of(member()), 1..150)),
        (uniform_member(), prop::collection::vec(op_of(uniform_member()), 1..150)),
    ]) {
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

// ---- member TTLs ------------------------------------------------------------

#[derive(Debug, Clone)]
enum TtlOp {
    Insert(u8),
    Remove(u8),
    Expire(u8, i64, u8),
    Persist(u8),
    /// Removes members due at this time, at most this many.
    ExpireDue(i64, u8),
}

fn ttl_op() -> impl Strategy<Value = TtlOp> {
    prop_oneof![
        4 => any::<u8>().prop_map(TtlOp::Insert),
        1 => any::<u8>().prop_map(TtlOp::Remove),
        3 => (any::<u8>(), 0i64..1000, 0u8..5).prop_map(|(m, d, c)| TtlOp::Expire(m, d, c)),
        1 => any::<u8>().prop_map(TtlOp::Persist),
        1 => (0i64..1000, 1u8..20).prop_map(|(t, n)| TtlOp::ExpireDue(t, n)),
    ]
}

/// Integers (intset candidates) and strings, some long; with `uniform`,
/// 4-byte members but for one in sixteen (a set of fixed-width buckets
/// whose buckets change form).
fn ttl_member(k: u8, uniform: bool) -> Vec<u8> {
    if uniform {
        return match k % 16 {
            0 => format!("odd-{k}").into_bytes(),
            _ => vec![b'a' + k % 4, b'a' + k / 4 % 4, b'a' + k / 16 % 4, b'a' + k / 64],
        };
    }
    match k % 3 {
        0 => (k as i64 - 100).to_string().into_bytes(),
        1 => format!("m{k}").into_bytes(),
        _ => format!("member-with-a-longer-name-{k}").into_bytes(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Member TTLs against a model (member -> deadline) through every shape
    /// and conversion: reply codes, deadlines, the earliest deadline,
    /// bounded expiry of due members, and the members themselves.
    #[test]
    fn member_ttls_match_model(ops in prop::collection::vec(ttl_op(), 1..300), tiny in any::<bool>(), uniform in any::<bool>()) {
        use crate::types::hash::ExpireCond;
        let cfg = if tiny { small_cfg() } else { SetConfig::default() };
        let mut s = Set::new();
        let mut m: std::collections::BTreeMap<Vec<u8>, Option<i64>> = Default::default();
        let now = 500;
        for op in &ops {
            match *op {
                TtlOp::Insert(k) => {
                    let v = ttl_member(k, uniform);
                    let new = !m.contains_key(&v);
                    prop_assert_eq!(s.insert(&v, &cfg), new);
                    m.insert(v, None); // re-adding drops the TTL
                }
                TtlOp::Remove(k) => {
                    let v = ttl_member(k, uniform);
                    prop_assert_eq!(s.remove(&v), m.remove(&v).is_some());
                }
                TtlOp::Expire(k, d, c) => {
                    let v = ttl_member(k, uniform);
                    let cond = [ExpireCond::Always, ExpireCond::Nx, ExpireCond::Xx, ExpireCond::Gt, ExpireCond::Lt][c as usize];
                    let want = match m.get(&v) {
                        None => -2,
                        Some(Some(old)) if *old < now => -2,
                        Some(old) => {
                            let met = match (cond, old) {
                                (ExpireCond::Always, _) => true,
                                (ExpireCond::Nx, o) => o.is_none(),
                                (ExpireCond::Xx, o) => o.is_some(),
                                (ExpireCond::Gt, o) => o.is_some_and(|o| d > o),
                                (ExpireCond::Lt, o) => o.is_none_or(|o| d < o),
                            };
                            if !met { 0 } else if d <= now { 2 } else { 1 }
                        }
                    };
                    prop_assert_eq!(s.set_expire(&v, d, cond, now, &cfg), want);
                    match want {
                        1 => { m.insert(v, Some(d)); }
                        2 => { m.remove(&v); }
                        _ => {}
                    }
                }
                TtlOp::Persist(k) => {
                    let v = ttl_member(k, uniform);
                    let want = match m.get(&v) {
                        None => -2,
                        Some(Some(d)) if *d < now => -2,
                        Some(None) => -1,
                        Some(Some(_)) => 1,
                    };
                    prop_assert_eq!(s.persist(&v, now, &cfg), want);
                    if want == 1 {
                        m.insert(v, None);
                    }
                }
                TtlOp::ExpireDue(t, max) => {
                    let mut gone = Vec::new();
                    let n = s.expire_due_with(t, max as usize, |x| gone.push(x.to_vec()));
                    let due = m.iter().filter(|(_, d)| d.is_some_and(|d| d < t)).count();
                    prop_assert_eq!(n, due.min(max as usize));
                    prop_assert_eq!(gone.len(), n);
                    for g in gone {
                        let d = m.remove(&g).expect("removed a member of the model");
                        prop_assert!(d.is_some_and(|d| d < t));
                    }
                }
            }
            prop_assert_eq!(s.len(), m.len());
            prop_assert_eq!(s.min_deadline(), m.values().flatten().min().copied(), "after {:?}", op);
            let got: std::collections::BTreeMap<Vec<u8>, Option<i64>> = s.iter_ttl().map(|(v, d)| (v.to_vec(), d)).collect();
            prop_assert_eq!(&got, &m);
            for (v, d) in &m {
                prop_assert_eq!(s.expire_of(v), Some(*d));
                prop_assert!(s.contains(v));
            }
        }
    }
}

#[test]
fn a_member_ttl_costs_six_bytes_in_the_large_shape() {
    let cfg = SetConfig::default();
    // The benchmark's shape (bench/compare.py member-ttl): 1M 8-byte members.
    let n = 1_000_000;
    let (mut plain, mut timed) = (Set::new(), Set::new());
    for i in 0..n {
        let m = format!("m{i:07}");
        plain.insert(m.as_bytes(), &cfg);
        timed.insert(m.as_bytes(), &cfg);
        timed.set_expire(m.as_bytes(), 1_000_000 + i as i64, crate::types::hash::ExpireCond::Always, 0, &cfg);
    }
    let extra = (timed.mem_usage() as f64 - plain.mem_usage() as f64) / n as f64;
    println!("{extra:.2} bytes per member TTL");
    assert!(extra > 5.0 && extra <= 8.0, "{extra} bytes per member TTL");
    assert_eq!(timed.min_deadline(), Some(1_000_000));
    let mut gone = 0;
    while timed.expire_due_with(1_000_000 + n as i64, 4096, |_| gone += 1) > 0 {}
    assert_eq!((gone, timed.len()), (n, 0));
}

/// A member is its bytes and one header byte (no value tag, `Members`),
/// plus bucket rounding and headers: 16 random bytes (seed 001's UUIDs)
/// and 24 random letters (seed 000) at 100,000 members. With a tag byte
/// these were 20.9 and 29.8.
#[test]
fn budget_members_without_a_value_tag() {
    let cfg = SetConfig::default();
    let mut r = rng(7);
    let (mut bin, mut chars) = (Set::new(), Set::new());
    for _ in 0..100_000 {
        let (a, b) = (r(), r());
        let mut m = a.to_le_bytes().to_vec();
        m.extend_from_slice(&b.to_le_bytes());
        assert!(bin.insert(&m, &cfg));
        let c: Vec<u8> = (0..24).map(|_| b'a' + (r() % 26) as u8).collect();
        assert!(chars.insert(&c, &cfg));
    }
    let per = |s: &Set| s.mem_usage() as f64 / s.len() as f64;
    assert!(per(&bin) <= 20.0, "16-byte members: {:.2} B/member", per(&bin));
    assert!(per(&chars) <= 29.2, "24-char members: {:.2} B/member", per(&chars));
}
