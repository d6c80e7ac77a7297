//! Tests of `ZSet`: a model-based property test across both shapes and the
//! conversion, rank/partition/iteration checks, and bytes-per-member figures.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn small_cfg() -> ZsetConfig {
    ZsetConfig { max_listpack_entries: 4, max_listpack_value: 8, small_max_entries: 6, small_max_bytes: 80 }
}

fn is_large(z: &ZSet) -> bool {
    matches!(z.repr, Repr::Large(_))
}

/// The model's view in set order.
fn ordered(m: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
    let mut v: Vec<_> = m.iter().map(|(k, s)| (k.clone(), *s)).collect();
    v.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
    v
}

fn check(z: &ZSet, m: &BTreeMap<Vec<u8>, f64>) {
    let want = ordered(m);
    assert_eq!(z.len(), want.len());
    let got: Vec<_> = z.iter().map(|(k, s)| (k.to_vec(), s)).collect();
    assert_eq!(got, want);
    let mut walked = Vec::new();
    z.for_each(|k, s| walked.push((k.to_vec(), s)));
    assert_eq!(walked, want);
    for (r, (k, s)) in want.iter().enumerate() {
        assert_eq!(z.score(k), Some(*s));
        assert_eq!(z.rank(k), Some((r, *s)));
        assert_eq!(z.get_by_rank(r).map(|(k, s)| (k.to_vec(), s)), Some((k.clone(), *s)));
    }
    if let Repr::Large(l) = &z.repr {
        assert_eq!(l.chunks.iter().map(|c| c.len as usize).sum::<usize>(), l.len);
        assert!(l.chunks.iter().all(|c| c.len > 0));
        assert_eq!(l.tags.iter().filter(|&&t| t > TOMB).count(), l.len);
        // Every chunk is named by exactly as many index slots as it has
        // entries, and its id leads back to its position.
        let mut named = vec![0usize; l.pos.len()];
        for i in (0..l.tags.len()).filter(|&i| l.tags[i] > TOMB) {
            named[l.ids.get(i) as usize] += 1;
        }
        for (ci, c) in l.chunks.iter().enumerate() {
            assert_eq!(l.pos[c.id as usize] as usize, ci);
            assert_eq!(named[c.id as usize], c.len as usize, "chunk {ci} (id {})", c.id);
        }
        assert_eq!(l.chunks.len() + l.free.len(), l.pos.len());
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u16, i32, bool),
    Remove(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u16..300, -300i32..300, any::<bool>()).prop_map(|(k, s, f)| Op::Insert(k, s, f)),
        1 => (0u16..300).prop_map(Op::Remove),
    ]
}

fn member(k: u16) -> Vec<u8> {
    // Varying lengths, a few long enough to trip the small-bytes limit.
    let mut m = format!("m{k}").into_bytes();
    if k.is_multiple_of(37) {
        m.extend(std::iter::repeat_n(b'x', 40));
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn matches_model(ops in proptest::collection::vec(op(), 1..1500)) {
        let cfg = small_cfg();
        let mut z = ZSet::new();
        let mut m = BTreeMap::new();
        for op in ops {
            match op {
                Op::Insert(k, s, frac) => {
                    let score = if frac { s as f64 / 7.0 } else { s as f64 * 1000.0 };
                    let k = member(k);
                    prop_assert_eq!(z.insert(&k, score, &cfg), m.insert(k, score));
                }
                Op::Remove(k) => {
                    let k = member(k);
                    prop_assert_eq!(z.remove(&k), m.remove(&k));
                }
            }
        }
        check(&z, &m);
        let lo = z.partition(|s, _| s < 0.0);
        prop_assert_eq!(lo, m.values().filter(|&&s| s < 0.0).count());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Building from sorted entries gives what inserting them one by one
    /// gives (contents, encoding name), keeps the chunk limits, and the
    /// result takes further edits like any other set.
    #[test]
    fn from_sorted_matches_inserts(keys in proptest::collection::btree_map(0u16..2000, -300i32..300, 0..700), small in any::<bool>()) {
        let cfg = if small { small_cfg() } else { ZsetConfig::default() };
        let m: BTreeMap<Vec<u8>, f64> = keys.iter().map(|(&k, &s)| (member(k), s as f64 / 3.0)).collect();
        let want = ordered(&m);
        let mut z = ZSet::from_sorted(want.iter().map(|(k, s)| (k.as_slice(), *s)), &cfg);
        let mut one_by_one = ZSet::new();
        for (k, s) in &want {
            one_by_one.insert(k, *s, &cfg);
        }
        check(&z, &m);
        prop_assert_eq!(z.encoding_name(), one_by_one.encoding_name());
        prop_assert_eq!(is_large(&z), is_large(&one_by_one));
        if let Repr::Large(l) = &z.repr {
            prop_assert!(l.chunks.iter().all(|c| c.len as usize <= CHUNK_ENTRIES && (c.len == 1 || c.buf.len() <= CHUNK_BYTES)));
        }
        let mut m = m;
        for k in keys.keys().take(50) {
            prop_assert_eq!(z.insert(&member(k + 5000), 1.5, &cfg), m.insert(member(k + 5000), 1.5));
            prop_assert_eq!(z.remove(&member(*k)), m.remove(&member(*k)));
        }
        check(&z, &m);
    }
}

#[test]
fn scores_round_trip() {
    // Named "skiplist" from the start: a listpack-named set turns -0.0
    // into 0 (`listpack_zero_loses_its_sign`).
    let cfg = ZsetConfig { max_listpack_entries: 0, ..ZsetConfig::default() };
    let mut z = ZSet::new();
    let scores = [0.0, -0.0, 1.0, 239.0, 240.0, -1.0, 32767.0, -32769.0, 1e15, 1.5, f64::INFINITY, f64::NEG_INFINITY, 1e300, 5e-324];
    for (i, s) in scores.iter().enumerate() {
        z.insert(format!("{i}").as_bytes(), *s, &cfg);
    }
    for (i, s) in scores.iter().enumerate() {
        let got = z.score(format!("{i}").as_bytes()).unwrap();
        assert_eq!(got.to_bits(), s.to_bits(), "{s}");
    }
    assert_eq!(z.get_by_rank(0).unwrap().1, f64::NEG_INFINITY);
    // -0.0 and 0.0 tie on score and order by member.
    assert_eq!(z.rank(b"0").unwrap().0 + 1, z.rank(b"1").unwrap().0);
}

#[test]
fn listpack_zero_loses_its_sign() {
    let cfg = small_cfg();
    let mut z = ZSet::new();
    z.insert(b"a", -0.0, &cfg);
    assert_eq!(z.score(b"a").unwrap().to_bits(), 0.0f64.to_bits());
    let built = ZSet::from_sorted([(&b"a"[..], -0.0), (&b"b"[..], 1.0)], &cfg);
    assert_eq!(built.score(b"a").unwrap().to_bits(), 0.0f64.to_bits());
    // Past the listpack limits Redis keeps a skiplist, which keeps the sign.
    for i in 0..5 {
        z.insert(format!("m{i}").as_bytes(), i as f64, &cfg);
    }
    assert_eq!(z.encoding_name(), "skiplist");
    z.insert(b"b", -0.0, &cfg);
    assert_eq!(z.score(b"b").unwrap().to_bits(), (-0.0f64).to_bits());
    let long = b"a member longer than eight bytes";
    let built = ZSet::from_sorted([(&long[..], -0.0)], &cfg);
    assert_eq!(built.score(long).unwrap().to_bits(), (-0.0f64).to_bits());
}

#[test]
fn encoding_names_follow_redis() {
    let cfg = small_cfg();
    let mut z = ZSet::new();
    for i in 0..4 {
        z.insert(format!("{i}").as_bytes(), i as f64, &cfg);
    }
    assert_eq!(z.encoding_name(), "listpack");
    z.insert(b"4", 4.0, &cfg);
    assert_eq!(z.encoding_name(), "skiplist");
    for i in 0..5 {
        z.remove(format!("{i}").as_bytes());
    }
    assert!(z.is_empty());
    let mut z = ZSet::new();
    z.insert(b"123456789", 1.0, &cfg);
    assert_eq!(z.encoding_name(), "skiplist");
    assert_eq!(ZSet::with_hint(5, 1, &cfg).encoding_name(), "skiplist");
    assert_eq!(ZSet::with_hint(4, 8, &cfg).encoding_name(), "listpack");
}

#[test]
fn large_random_ops_and_scan() {
    let cfg = ZsetConfig::default();
    let mut z = ZSet::new();
    let mut m = BTreeMap::new();
    let mut s: u64 = 88172645463325252;
    for _ in 0..20_000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let k = format!("member:{}", s % 3000).into_bytes();
        if s.is_multiple_of(5) {
            assert_eq!(z.remove(&k), m.remove(&k));
        } else {
            let score = ((s >> 20) % 1000) as f64;
            assert_eq!(z.insert(&k, score, &cfg), m.insert(k, score));
        }
    }
    assert!(is_large(&z));
    check(&z, &m);
    let mut seen = Vec::new();
    let mut cur = 0;
    loop {
        cur = z.scan(cur, 10, |k, _| seen.push(k.to_vec()));
        if cur == 0 {
            break;
        }
    }
    assert_eq!(seen.len(), m.len());
    while let Some((k, _)) = z.get_by_rank(0).map(|(k, s)| (k.to_vec(), s)) {
        z.remove(&k);
    }
    assert!(z.is_empty());
}

/// Bytes per member (heap of the set only) for "member:N" with integer
/// scores, at several sizes: the curve must stay smooth across the
/// small -> large conversion. Run with --nocapture to see the figures.
#[test]
fn bytes_per_member() {
    let cfg = ZsetConfig::default();
    let mut prev = 0.0;
    for n in [10usize, 100, 128, 129, 200, 1000, 10_000, 100_000] {
        let mut z = ZSet::new();
        for i in 0..n {
            z.insert(format!("member:{i}").as_bytes(), i as f64, &cfg);
        }
        let per = z.mem_usage() as f64 / n as f64;
        println!("zset {n:>7} members: {per:.1} bytes/member");
        assert!(per < 48.0, "{n}: {per}");
        if prev > 0.0 {
            assert!(per < prev * 2.5, "cliff at {n}: {prev} -> {per}");
        }
        prev = per;
    }
}

/// Past 65,536 chunks the index's chunk ids widen to four bytes, and
/// lookups, inserts and removals still find every member.
#[test]
fn wide_chunk_ids() {
    let cfg = ZsetConfig::default();
    let n = 3_300_000usize;
    let members: Vec<Vec<u8>> = (0..n).map(|i| format!("{i:08}").into_bytes()).collect();
    let mut z = ZSet::from_sorted(members.iter().enumerate().map(|(i, m)| (m.as_slice(), i as f64)), &cfg);
    let Repr::Large(l) = &z.repr else { panic!("large") };
    assert!(l.chunks.len() > 65_536, "{} chunks", l.chunks.len());
    assert!(matches!(l.ids, Ids::Wide(_)));
    for i in (0..n).step_by(997) {
        assert_eq!(z.score(&members[i]), Some(i as f64));
    }
    for i in (0..n).step_by(1009) {
        assert_eq!(z.insert(&members[i], -(i as f64), &cfg), Some(i as f64));
        assert_eq!(z.score(&members[i]), Some(-(i as f64)));
    }
    for i in (0..n).step_by(2003) {
        assert!(z.remove(&members[i]).is_some());
        assert_eq!(z.score(&members[i]), None);
    }
    assert_eq!(z.score(&members[1]), Some(1.0));
}

#[test]
fn ids_widen_in_place() {
    let mut ids = Ids::new(4, 10);
    ids.set(1, 7);
    ids.set(2, 70_000);
    assert!(matches!(ids, Ids::Wide(_)));
    assert_eq!((ids.get(0), ids.get(1), ids.get(2)), (0, 7, 70_000));
}

// ---- member TTLs ------------------------------------------------------------

#[derive(Debug, Clone)]
enum TtlOp {
    Insert(u16, i32),
    IncrKeep(u16),
    Remove(u16),
    Expire(u16, i64),
    Persist(u16),
    /// Removes members due at this time, at most this many.
    ExpireDue(i64, u8),
}

fn ttl_op() -> impl Strategy<Value = TtlOp> {
    prop_oneof![
        4 => (0u16..200, -300i32..300).prop_map(|(k, s)| TtlOp::Insert(k, s)),
        1 => (0u16..200).prop_map(TtlOp::IncrKeep),
        1 => (0u16..200).prop_map(TtlOp::Remove),
        3 => (0u16..200, 0i64..1000).prop_map(|(k, d)| TtlOp::Expire(k, d)),
        1 => (0u16..200).prop_map(TtlOp::Persist),
        1 => (0i64..1000, 1u8..40).prop_map(|(t, n)| TtlOp::ExpireDue(t, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Member TTLs against a model (member -> (score, deadline)) across
    /// both shapes: the order, ranks and scores (`check`), every deadline,
    /// the earliest one, and bounded expiry of due members.
    #[test]
    fn member_ttls_match_model(ops in proptest::collection::vec(ttl_op(), 1..800), small in any::<bool>()) {
        use crate::types::hash::ExpireCond;
        let cfg = if small { small_cfg() } else { ZsetConfig::default() };
        let mut z = ZSet::new();
        let mut m: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        let mut ttl: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        let now = 500;
        for op in &ops {
            match *op {
                TtlOp::Insert(k, s) => {
                    let v = member(k);
                    prop_assert_eq!(z.insert(&v, s as f64, &cfg), m.insert(v.clone(), s as f64));
                    ttl.remove(&v);
                }
                TtlOp::IncrKeep(k) => {
                    let v = member(k);
                    let s = m.get(&v).copied().unwrap_or(0.0) + 1.5;
                    prop_assert_eq!(z.insert_keep_ttl(&v, s, &cfg), m.insert(v.clone(), s));
                }
                TtlOp::Remove(k) => {
                    let v = member(k);
                    prop_assert_eq!(z.remove(&v), m.remove(&v));
                    ttl.remove(&v);
                }
                TtlOp::Expire(k, d) => {
                    let v = member(k);
                    let want = match (m.contains_key(&v), ttl.get(&v)) {
                        (false, _) => -2,
                        (true, Some(&old)) if old < now => -2,
                        _ if d <= now => 2,
                        _ => 1,
                    };
                    prop_assert_eq!(z.set_expire(&v, d, ExpireCond::Always, now), want);
                    if want == 1 {
                        ttl.insert(v, d);
                    } else if want == 2 {
                        m.remove(&v);
                        ttl.remove(&v);
                    }
                }
                TtlOp::Persist(k) => {
                    let v = member(k);
                    let want = match (m.contains_key(&v), ttl.get(&v)) {
                        (false, _) => -2,
                        (true, Some(&d)) if d < now => -2,
                        (true, None) => -1,
                        (true, Some(_)) => 1,
                    };
                    prop_assert_eq!(z.persist(&v, now), want);
                    if want == 1 {
                        ttl.remove(&v);
                    }
                }
                TtlOp::ExpireDue(t, max) => {
                    let mut gone = Vec::new();
                    let n = z.expire_due_with(t, max as usize, |x| gone.push(x.to_vec()));
                    let due = ttl.values().filter(|&&d| d < t).count();
                    prop_assert_eq!(n, due.min(max as usize));
                    for g in gone {
                        prop_assert!(ttl.remove(&g).is_some_and(|d| d < t));
                        prop_assert!(m.remove(&g).is_some());
                    }
                }
            }
            check(&z, &m);
            prop_assert_eq!(z.min_deadline(), ttl.values().min().copied(), "after {:?}", op);
            for (v, _) in m.iter() {
                prop_assert_eq!(z.expire_of(v), Some(ttl.get(v).copied()));
            }
            let mut walked = Vec::new();
            z.for_each_ttl(|v, s, d| walked.push((v.to_vec(), s, d)));
            prop_assert_eq!(walked.len(), m.len());
            for (v, s, d) in walked {
                prop_assert_eq!(m.get(&v), Some(&s));
                prop_assert_eq!(d, ttl.get(&v).copied());
            }
            if let Repr::Large(l) = &z.repr {
                for c in &l.chunks {
                    prop_assert_eq!(c.min, min_deadline_in(&c.buf, 0));
                }
            }
        }
    }
}

#[test]
fn a_member_ttl_costs_seven_bytes_and_rounding() {
    let cfg = ZsetConfig::default();
    // The benchmark's shape (bench/compare.py member-ttl): 1M 8-byte members.
    let n = 1_000_000;
    let (mut plain, mut timed) = (ZSet::new(), ZSet::new());
    for i in 0..n {
        let m = format!("m{i:07}");
        plain.insert(m.as_bytes(), i as f64, &cfg);
        timed.insert(m.as_bytes(), i as f64, &cfg);
        timed.set_expire(m.as_bytes(), 1_000_000 + i as i64, crate::types::hash::ExpireCond::Always, 0);
    }
    let extra = (timed.mem_usage() as f64 - plain.mem_usage() as f64) / n as f64;
    println!("{extra:.2} bytes per member TTL");
    // 7 bytes a member plus the allocator's rounding of the chunks: in
    // this sequential load the chunks stay half full at exactly a size
    // class (448 bytes), and the TTLs move them to 768: 9.9 bytes.
    assert!(extra > 6.0 && extra <= 10.0, "{extra} bytes per member TTL");
    assert_eq!(timed.min_deadline(), Some(1_000_000));
    let mut gone = 0;
    while timed.expire_due_with(1_000_000 + n as i64, 4096, |_| gone += 1) > 0 {}
    assert_eq!((gone, timed.len()), (n, 0));
}

/// Scores the inline form's codes must carry exactly: distances of every
/// size, codes' edges, negatives, fractions, -0.0, infinities, and integers
/// at and past 2^52 (where distances stop).
fn tricky_score() -> impl Strategy<Value = f64> {
    prop_oneof![
        (0i64..300).prop_map(|i| i as f64),
        (-5i64..5).prop_map(|i| (1_800_000_000 + i) as f64),
        (0i64..2_000_000).prop_map(|i| (1_800_000_000 + i) as f64),
        prop::sample::select(vec![
            0.0, -0.0, 191.0, 192.0, 8383.0, 8384.0, 1_056_959.0, 1_056_960.0, -1.0, 0.5, -2.25, 1e300,
            f64::INFINITY, f64::NEG_INFINITY, 2147483647.0, 2147483648.0, -2147483648.0, -2147483649.0,
            4503599627370495.0, 4503599627370496.0, 9007199254740993.0, 1e-300,
        ]),
        any::<f64>().prop_filter("no NaN", |s| !s.is_nan()),
    ]
}

proptest! {
    /// The inline form gives back the same set, bit for bit, whatever the
    /// scores and member lengths; sets it must not hold are refused.
    #[test]
    fn inline_form_round_trips(
        entries in proptest::collection::vec((tricky_score(), 0usize..6), 0..40),
        fixed in any::<bool>(),
    ) {
        let cfg = ZsetConfig::default();
        let mut z = ZSet::new();
        // Whether a member was inserted twice: a new score may take fewer
        // bytes, and the packed buffer keeps its capacity then (shrink_class's
        // hysteresis), while a decoded copy is sized for its bytes.
        let mut rescored = false;
        for (i, (s, len)) in entries.iter().enumerate() {
            let m = if fixed { format!("m{i:05}").into_bytes() } else { vec![b'a' + (i % 26) as u8; len * 12 + i % 7] };
            rescored |= z.insert(&m, *s, &cfg).is_some();
        }
        let mut out = vec![0xaa];
        let inline = z.inline_encode(&mut out);
        let Repr::Small(b) = &z.repr else { unreachable!("40 members stay small") };
        // Long members make Redis's skiplist, which stays out.
        prop_assert_eq!(inline, b[0] == 0 && b.len() - HDR <= inline::MAX_BYTES);
        if !inline {
            prop_assert_eq!(out.len(), 1, "nothing appended when refused");
            return Ok(());
        }
        let back = ZSet::from_inline(&out[1..]);
        prop_assert_eq!(&back, &z);
        prop_assert_eq!(back.encoding_name(), "listpack");
        let Repr::Small(c) = &back.repr else { unreachable!("small") };
        prop_assert_eq!(c, b, "the same packed bytes");
        // The copy holds one allocation class for its bytes; the original
        // the same, unless a re-scored member left it room to spare.
        prop_assert_eq!(back.mem_usage(), alloc_size(c.len()));
        if rescored {
            prop_assert!(z.mem_usage() >= back.mem_usage());
        } else {
            prop_assert_eq!(back.mem_usage(), z.mem_usage());
        }
        if fixed && !z.is_empty() {
            prop_assert_eq!(inline::width(out[1]), 6);
        }
    }
}

#[test]
fn inline_form_refuses_what_it_cannot_hold() {
    let cfg = ZsetConfig::default();
    let mut out = Vec::new();
    // A member TTL, even once removed, keeps a set out of the inline form.
    let mut z = ZSet::new();
    z.insert(b"a", 1.0, &cfg);
    z.set_expire(b"a", 5_000, crate::types::hash::ExpireCond::Always, 0);
    assert!(!z.inline_encode(&mut out));
    z.persist(b"a", 0);
    assert!(!z.inline_encode(&mut out));
    // What Redis would call a skiplist.
    let z = ZSet::with_hint(200, 1, &cfg);
    assert!(!z.inline_encode(&mut out));
    // The large shape.
    let mut z = ZSet::new();
    for i in 0..200 {
        z.insert(format!("{i}").as_bytes(), i as f64, &ZsetConfig { small_max_entries: 100, ..cfg });
    }
    assert!(!z.inline_encode(&mut out));
    assert!(out.is_empty());
    // An empty set is one header byte.
    assert!(ZSet::new().inline_encode(&mut out));
    assert_eq!(out, [inline::ZSET]);
    assert!(ZSet::from_inline(&out).is_empty());
}

/// Seed 002's expiry partitions: 18-byte session ids scored by Unix-second
/// expiry times clustered within a day. Inline, a member costs its bytes
/// and 2-3 bytes of score, not 24.
#[test]
fn clustered_integer_scores_take_two_or_three_bytes_inline() {
    let cfg = ZsetConfig::default();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut bytes, mut members) = (0, 0);
    for _ in 0..200 {
        let mut z = ZSet::new();
        for _ in 0..15 {
            let id: Vec<u8> = (0..18).map(|_| next() as u8).collect();
            z.insert(&id, (1_802_592_000 + next() % 100_000) as f64, &cfg);
        }
        let mut out = Vec::new();
        assert!(z.inline_encode(&mut out));
        assert_eq!(ZSet::from_inline(&out), z);
        bytes += out.len() - 1;
        members += 15;
    }
    let per = bytes as f64 / members as f64;
    assert!((20.0..21.0).contains(&per), "{per:.2} bytes a member");
}
