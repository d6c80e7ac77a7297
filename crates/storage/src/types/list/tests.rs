//! Tests of `List`: unit cases for both shapes and their conversions, a
//! proptest against `VecDeque<Vec<u8>>` with small limits, and the
//! bytes-per-element budget.

use super::*;
use proptest::prelude::*;

fn contents(l: &List) -> Vec<Vec<u8>> {
    l.iter().map(|v| v.to_vec()).collect()
}

/// Structural invariants: counts add up, no empty node in a chain, and both
/// iterators agree with each other.
fn check(l: &List) {
    check_depth(l, 0);
}

/// `check`, and with depth > 0 the compression shape: the `depth` nodes at
/// each end plain, every interior node packed unless it was tried.
fn check_depth(l: &List, depth: usize) {
    if let Repr::Large(c) = &l.repr {
        assert!(c.nodes.iter().all(|b| count(b) > 0), "empty node");
        assert_eq!(c.nodes.iter().map(|b| count(b)).sum::<usize>(), c.len);
        let n = c.nodes.len();
        for (i, b) in c.nodes.iter().enumerate() {
            let end = i < depth.max(1) || i + depth.max(1) >= n;
            if end {
                assert!(!is_packed(b), "end node {i} of {n} packed");
            } else if depth > 0 {
                assert!(header(b) & (PACKED | TRIED) != 0, "interior node {i} of {n} left plain");
            }
            if is_packed(b) {
                let plain = unpack(b).expect("unpacks");
                assert_eq!(count(&plain), count(b));
            }
        }
    }
    let fwd = contents(l);
    assert_eq!(fwd.len(), l.len());
    if !fwd.is_empty() {
        let mut rev: Vec<Vec<u8>> = l.rev_from(l.len() - 1).map(|v| v.to_vec()).collect();
        rev.reverse();
        assert_eq!(rev, fwd);
    }
}

#[test]
fn encodings_follow_redis_rules() {
    let cfg = ListConfig::default();
    let mut l = List::new();
    l.push(End::Tail, &[b"a", b"b", b"c"], &cfg);
    assert_eq!(l.encoding_name(), "listpack");
    let big = vec![b'x'; 8193];
    l.push(End::Tail, &[&big], &cfg);
    assert_eq!(l.encoding_name(), "quicklist");
    assert_eq!(l.pop(End::Tail, &cfg), Some(big.clone()));
    assert_eq!(l.encoding_name(), "listpack");

    // Count limit 3: the fourth element converts; popping back to one converts back.
    let cfg3 = ListConfig { fill: 3, ..Default::default() };
    let mut l = List::new();
    l.push(End::Tail, &[b"a", b"b", b"c"], &cfg3);
    assert_eq!(l.encoding_name(), "listpack");
    l.push(End::Tail, &[b"d"], &cfg3);
    assert_eq!(l.encoding_name(), "quicklist");
    l.pop(End::Tail, &cfg3);
    l.pop(End::Tail, &cfg3);
    assert_eq!(l.encoding_name(), "quicklist");
    l.pop(End::Tail, &cfg3);
    assert_eq!(l.encoding_name(), "listpack");

    // -6 is treated as -5 (64 KiB).
    let cfg6 = ListConfig { fill: -6, ..Default::default() };
    let mut l = List::new();
    l.push(End::Tail, &[vec![b'x'; 60000]], &cfg6);
    assert_eq!(l.encoding_name(), "listpack");
    l.push(End::Tail, &[vec![b'x'; 5536]], &cfg6);
    assert_eq!(l.encoding_name(), "quicklist");
}

#[test]
fn index_insert_set_remove() {
    let cfg = ListConfig { fill: 2, ..Default::default() };
    let mut l = List::new();
    for i in 0..10 {
        l.push(End::Tail, &[i.to_string()], &cfg);
    }
    assert_eq!(l.get(0).map(|v| v.get().to_vec()), Some(b"0".to_vec()));
    assert_eq!(l.get(-1).map(|v| v.get().to_vec()), Some(b"9".to_vec()));
    assert_eq!(l.get(10), None);
    assert_eq!(l.get(-11), None);
    assert!(l.insert_by_pivot(b"5", false, b"x", &cfg));
    assert!(!l.insert_by_pivot(b"nope", false, b"x", &cfg));
    l.set(0, b"zero", &cfg);
    assert_eq!(l.remove(b"x", 0, false, &cfg), 1);
    check(&l);
    assert_eq!(
        contents(&l)[..3],
        [b"zero".to_vec(), b"1".to_vec(), b"2".to_vec()]
    );
    l.keep_range(2, 3, &cfg);
    assert_eq!(contents(&l), [b"2".to_vec(), b"3".to_vec(), b"4".to_vec()]);
    check(&l);
}

#[derive(Debug, Clone)]
enum Op {
    Push(bool, Vec<Vec<u8>>),
    Pop(bool),
    Set(usize, Vec<u8>),
    Insert(Vec<u8>, bool, Vec<u8>),
    Remove(Vec<u8>, usize, bool),
    Trim(usize, usize),
}

fn elem() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::sample::select(vec!["a", "b", "c", "1", "-7", "300", "70000", "01", ""]).prop_map(|s| s.as_bytes().to_vec()),
        2 => prop::collection::vec(b'a'..=b'e', 0..100),
        1 => (4000usize..5000).prop_map(|n| vec![b'L'; n]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), prop::collection::vec(elem(), 1..6)).prop_map(|(h, v)| Op::Push(h, v)),
        2 => any::<bool>().prop_map(Op::Pop),
        1 => (0usize..200, elem()).prop_map(|(i, e)| Op::Set(i, e)),
        1 => (elem(), any::<bool>(), elem()).prop_map(|(p, a, e)| Op::Insert(p, a, e)),
        1 => (elem(), 0usize..3, any::<bool>()).prop_map(|(e, n, t)| Op::Remove(e, n, t)),
        1 => (0usize..50, 0usize..200).prop_map(|(s, n)| Op::Trim(s, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn matches_vecdeque(fill in prop::sample::select(vec![-2i64, -1, 0, 1, 2, 3, 5, 100]), compress in prop::sample::select(vec![0usize, 0, 1, 2]), ops in prop::collection::vec(op(), 1..120)) {
        let cfg = ListConfig { fill, compress };
        let mut l = List::new();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        for op in ops {
            match op {
                Op::Push(head, v) => {
                    l.push(if head { End::Head } else { End::Tail }, &v, &cfg);
                    for e in v {
                        if head { m.push_front(e) } else { m.push_back(e) }
                    }
                }
                Op::Pop(head) => {
                    let got = l.pop(if head { End::Head } else { End::Tail }, &cfg);
                    prop_assert_eq!(got, if head { m.pop_front() } else { m.pop_back() });
                }
                Op::Set(i, e) => {
                    if i < m.len() {
                        l.set(i, &e, &cfg);
                        m[i] = e;
                    }
                }
                Op::Insert(p, after, e) => {
                    let want = m.iter().position(|x| *x == p);
                    prop_assert_eq!(l.insert_by_pivot(&p, after, &e, &cfg), want.is_some());
                    if let Some(i) = want {
                        m.insert(i + usize::from(after), e);
                    }
                }
                Op::Remove(e, n, tail) => {
                    let mut left = if n == 0 { usize::MAX } else { n };
                    let idx: Vec<usize> = if tail { (0..m.len()).rev().collect() } else { (0..m.len()).collect() };
                    let mut kill = Vec::new();
                    for i in idx {
                        if left > 0 && m[i] == e {
                            kill.push(i);
                            left -= 1;
                        }
                    }
                    kill.sort_unstable();
                    for &i in kill.iter().rev() {
                        m.remove(i);
                    }
                    prop_assert_eq!(l.remove(&e, n, tail, &cfg), kill.len());
                }
                Op::Trim(s, n) => {
                    let s = s.min(m.len());
                    let n = n.min(m.len() - s);
                    l.keep_range(s, n, &cfg);
                    m = m.iter().skip(s).take(n).cloned().collect();
                }
            }
            check_depth(&l, compress);
            prop_assert_eq!(contents(&l), m.iter().cloned().collect::<Vec<_>>());
            for (i, e) in m.iter().enumerate().step_by(7) {
                prop_assert_eq!(l.get(i as i64).map(|v| v.to_vec()), Some(e.clone()));
                prop_assert_eq!(l.rev_from(i).next().map(|v| v.to_vec()), Some(e.clone()));
            }
            if l.encoding_name() == "listpack" && fill > 0 {
                // Redis checks counts exactly (sizes only by estimate).
                prop_assert!(l.len() <= fill as usize);
            }
        }
    }
}

/// Bytes per element (heap of the list only) at several sizes, for short
/// strings like "item:12345" and for small integers. Printed with
/// `--nocapture`; the budget guards against regressions.
#[test]
fn bytes_per_element() {
    let cfg = ListConfig::default();
    for n in [10usize, 100, 128, 129, 1000, 10_000, 100_000] {
        let mut s = List::new();
        let mut i = List::new();
        for k in 0..n {
            s.push(End::Tail, &[format!("item:{:05}", k % 100_000)], &cfg);
            i.push(End::Tail, &[(k % 1000).to_string()], &cfg);
        }
        let (bs, bi) = (
            s.mem_usage() as f64 / n as f64,
            i.mem_usage() as f64 / n as f64,
        );
        println!(
            "n={n:>6} {:>10} 10-byte strings {bs:6.2} B/elem, ints {bi:6.2} B/elem",
            s.encoding_name()
        );
        // 12-byte entries plus at most one size-class step (25%).
        assert!(bs < 15.5, "strings: {bs}");
        assert!(bi < 3.5, "ints: {bi}");
    }
}


/// JSON-like records of 100-200 bytes that compress well in 8 KiB nodes.
fn event(i: usize) -> Vec<u8> {
    let kinds = ["page_view", "click", "add_to_cart", "search"];
    format!(
        r#"{{"event":"{}","ts":{},"user_id":{},"page":"/products/{}","device":"mobile","country":"DE"}}"#,
        kinds[i * 7 % 4],
        1_764_000_000_000u64 + i as u64 * 37,
        100_000 + i * 7919 % 50_000,
        i * 31 % 9973
    )
    .into_bytes()
}

fn packed_nodes(l: &List) -> usize {
    l.quicklist_stats().map_or(0, |(_, p, _)| p)
}

#[test]
fn compressed_interior_nodes() {
    for depth in [1usize, 2, 3] {
        let plain_cfg = ListConfig::default();
        let cfg = ListConfig { compress: depth, ..plain_cfg };
        let mut l = List::new();
        let mut p = List::new();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        for i in 0..5000 {
            let e = event(i);
            if i % 3 == 0 {
                l.push(End::Head, &[&e], &cfg);
                p.push(End::Head, &[&e], &plain_cfg);
                m.push_front(e);
            } else {
                l.push(End::Tail, &[&e], &cfg);
                p.push(End::Tail, &[&e], &plain_cfg);
                m.push_back(e);
            }
        }
        check_depth(&l, depth);
        let (nodes, packed, bytes) = l.quicklist_stats().expect("quicklist");
        assert_eq!(packed, nodes - 2 * depth, "every interior node packed");
        assert_eq!(Some((nodes, 0, bytes)), p.quicklist_stats());
        assert!(l.mem_usage() * 3 < p.mem_usage(), "{} vs {}", l.mem_usage(), p.mem_usage());
        assert_eq!(contents(&l), m.iter().cloned().collect::<Vec<_>>());
        for i in (0..m.len()).step_by(97) {
            assert_eq!(l.get(i as i64).map(|v| v.to_vec()).as_ref(), Some(&m[i]));
            let back: Vec<Vec<u8>> = l.rev_from(i).take(300).map(|v| v.to_vec()).collect();
            let want: Vec<Vec<u8>> = m.iter().take(i + 1).rev().take(300).cloned().collect();
            assert_eq!(back, want);
        }
        // Writes in the middle open nodes and settle packs them again.
        let mid = m.len() / 2;
        l.set(mid, b"replaced", &cfg);
        m[mid] = b"replaced".to_vec();
        assert!(l.insert_by_pivot(&m[mid + 500].clone(), true, b"inserted", &cfg));
        m.insert(mid + 501, b"inserted".to_vec());
        let victim = m[1000].clone();
        assert_eq!(l.remove(&victim, 0, false, &cfg), m.iter().filter(|e| **e == victim).count());
        m.retain(|e| *e != victim);
        check_depth(&l, depth);
        assert_eq!(packed_nodes(&l), l.quicklist_stats().unwrap().0 - 2 * depth);
        l.keep_range(700, 3000, &cfg);
        let kept: VecDeque<Vec<u8>> = m.iter().skip(700).take(3000).cloned().collect();
        check_depth(&l, depth);
        assert_eq!(contents(&l), kept.iter().cloned().collect::<Vec<_>>());
        while l.len() > 10 {
            l.pop(End::Head, &cfg);
            l.pop(End::Tail, &cfg);
        }
        check_depth(&l, depth);
        assert_eq!(contents(&l), kept.iter().skip(1495).take(10).cloned().collect::<Vec<_>>());
        // Depth 0 after compression: ends stay plain, frames stay readable.
        l.push(End::Tail, &[b"x"], &plain_cfg);
        check(&l);
    }
}

#[test]
fn small_or_incompressible_nodes_stay_plain() {
    // Count-limited nodes of tiny entries are under Redis's 48 bytes.
    let cfg = ListConfig { fill: 3, compress: 1 };
    let mut l = List::new();
    for i in 0..100 {
        l.push(End::Tail, &[format!("{i}")], &cfg);
    }
    assert_eq!(packed_nodes(&l), 0);
    check_depth(&l, 1);
    // Random bytes do not compress: tried once, kept plain.
    let cfg = ListConfig { fill: -1, compress: 1 };
    let mut l = List::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..200 {
        let e: Vec<u8> = (0..100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        l.push(End::Tail, &[e], &cfg);
    }
    assert_eq!(packed_nodes(&l), 0);
    check_depth(&l, 1);
}

proptest! {
    /// Decompressing never panics and never accepts a frame that does not
    /// give whole entries of the stated count, whatever the bytes.
    #[test]
    fn unpack_never_panics(
        seed in 0usize..5000,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        junk in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let cfg = ListConfig { fill: 20, compress: 1 };
        let mut l = List::new();
        for i in 0..100 {
            l.push(End::Tail, &[event(seed + i)], &cfg);
        }
        let Repr::Large(c) = &l.repr else { unreachable!() };
        let b = c.nodes.iter().find(|b| is_packed(b)).expect("a packed node").clone();
        prop_assert!(unpack(&b).is_some());
        let mut bad = b.clone();
        for (i, v) in flips {
            let i = i.index(bad.len());
            bad[i] ^= v;
        }
        if let Some(node) = unpack(&bad) {
            prop_assert_eq!(listpack::validate(&node, HDR), Some(count(&node)));
        }
        let cut = cut.index(b.len());
        let _ = unpack(&b[..cut]);
        let mut j = b[..PACKED_HDR].to_vec();
        j.extend_from_slice(&junk);
        let _ = unpack(&j);
        let _ = unpack(&junk);
        let _ = listpack::validate(&junk, 0);
    }
}
