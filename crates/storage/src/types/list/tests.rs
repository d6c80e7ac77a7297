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
    if let Repr::Large(c) = &l.repr {
        assert!(c.nodes.iter().all(|b| count(b) > 0), "empty node");
        assert_eq!(c.nodes.iter().map(|b| count(b)).sum::<usize>(), c.len);
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
    let cfg3 = ListConfig { fill: 3 };
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
    let cfg6 = ListConfig { fill: -6 };
    let mut l = List::new();
    l.push(End::Tail, &[vec![b'x'; 60000]], &cfg6);
    assert_eq!(l.encoding_name(), "listpack");
    l.push(End::Tail, &[vec![b'x'; 5536]], &cfg6);
    assert_eq!(l.encoding_name(), "quicklist");
}

#[test]
fn index_insert_set_remove() {
    let cfg = ListConfig { fill: 2 };
    let mut l = List::new();
    for i in 0..10 {
        l.push(End::Tail, &[i.to_string()], &cfg);
    }
    assert_eq!(l.get(0), Some(StrRef::Int(0)));
    assert_eq!(l.get(-1), Some(StrRef::Int(9)));
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
    fn matches_vecdeque(fill in prop::sample::select(vec![-2i64, -1, 0, 1, 2, 3, 5, 100]), ops in prop::collection::vec(op(), 1..120)) {
        let cfg = ListConfig { fill };
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
            check(&l);
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
