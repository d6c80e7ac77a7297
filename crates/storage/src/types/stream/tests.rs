//! Tests of `Stream`: the node encoding, group bookkeeping, and a proptest
//! of XADD/XDEL/XTRIM against a `BTreeMap` model with small node limits.

use std::collections::BTreeMap;

use super::*;
use proptest::prelude::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn pairs(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn ids(es: &[Entry]) -> Vec<StreamId> {
    es.iter().map(|e| e.id).collect()
}

#[test]
fn ids_step_and_print() {
    assert_eq!(id(1, 5).incr(), Some(id(1, 6)));
    assert_eq!(id(1, u64::MAX).incr(), Some(id(2, 0)));
    assert_eq!(StreamId::MAX.incr(), None);
    assert_eq!(id(2, 0).decr(), Some(id(1, u64::MAX)));
    assert_eq!(StreamId::MIN.decr(), None);
    assert_eq!(id(12, 3).to_string(), "12-3");
}

#[test]
fn next_id_rules() {
    let mut s = Stream::new();
    assert_eq!(s.next_id(AddId::Auto, 100), Ok(id(100, 0)));
    assert_eq!(s.next_id(AddId::Exact(id(0, 0)), 100), Err(AddError::NotGreater));
    s.append(id(100, 5), &pairs(&["a", "1"]), &StreamConfig::default());
    assert_eq!(s.next_id(AddId::Auto, 50), Ok(id(100, 6)));
    assert_eq!(s.next_id(AddId::Ms(100), 0), Ok(id(100, 6)));
    assert_eq!(s.next_id(AddId::Ms(99), 0), Err(AddError::NotGreater));
    assert_eq!(s.next_id(AddId::Ms(101), 0), Ok(id(101, 0)));
    assert_eq!(s.next_id(AddId::Exact(id(100, 5)), 0), Err(AddError::NotGreater));
    s.set_ids(id(100, u64::MAX), None, None);
    assert_eq!(s.next_id(AddId::Ms(100), 0), Err(AddError::NotGreater));
    s.set_ids(StreamId::MAX, None, None);
    assert_eq!(s.next_id(AddId::Auto, 0), Err(AddError::Exhausted));
}

#[test]
fn packs_same_fields_densely() {
    let cfg = StreamConfig { node_max_bytes: 0, node_max_entries: 0, ..StreamConfig::default() };
    let mut s = Stream::new();
    for i in 0..1000u64 {
        let v = i.to_string();
        s.append(id(1_700_000_000_000 + i, 0), &[b"temperature".as_slice(), v.as_bytes()], &cfg);
    }
    assert_eq!(s.node_count(), 1);
    // flags + 2-byte ms delta + seq + 1..4 value bytes with its length.
    let node_bytes = s.nodes[0].1.buf.len();
    assert!(node_bytes < 1000 * 9, "{node_bytes}");
    let all = s.range(StreamId::MIN, StreamId::MAX, false, 0);
    assert_eq!(all.len(), 1000);
    assert_eq!(all[7].fields, pairs(&["temperature", "7"]));
    // An entry with other fields is stored in full.
    s.append(id(1_800_000_000_000, 0), &pairs(&["x", "1", "y", "2"]), &cfg);
    assert_eq!(s.get(id(1_800_000_000_000, 0)).unwrap().fields, pairs(&["x", "1", "y", "2"]));
}

#[test]
fn elements_round_trip_as_ints_or_strings() {
    let cases: [&[u8]; 11] = [b"", b"0", b"-0", b"007", b"-5", b"42", b"1700000000123", b"9223372036854775807", b"-9223372036854775808", b"2305843009213693951", b"2305843009213693952"];
    for c in cases {
        let mut buf = Vec::new();
        put_elem(&mut buf, c);
        assert_eq!(buf.len(), elem_len(c), "{c:?}");
        let mut at = 0;
        assert_eq!(&*get_elem(&buf, &mut at), c);
        assert_eq!(at, buf.len());
        let mut at = 0;
        skip_elem(&buf, &mut at);
        assert_eq!(at, buf.len());
    }
    // A 13-digit timestamp costs 7 bytes instead of 14.
    assert_eq!(elem_len(b"1700000000123"), 7);
}

#[test]
fn nodes_follow_limits() {
    let cfg = StreamConfig { node_max_bytes: 4096, node_max_entries: 5, ..StreamConfig::default() };
    let mut s = Stream::new();
    for i in 1..=12 {
        s.append(id(i, 0), &pairs(&["f", "v"]), &cfg);
    }
    assert_eq!(s.node_count(), 3);
    // Deleted entries still count towards a node's fill.
    assert!(s.remove(id(12, 0)));
    for i in 13..=16 {
        s.append(id(i, 0), &pairs(&["f", "v"]), &cfg);
    }
    assert_eq!(s.node_count(), 4);
    let small = StreamConfig { node_max_bytes: 20, node_max_entries: 0, ..StreamConfig::default() };
    let mut t = Stream::new();
    for i in 1..=10 {
        t.append(id(i, 0), &pairs(&["field", "value"]), &small);
    }
    assert!(t.node_count() >= 5);
}

#[test]
fn trim_whole_nodes_like_redis() {
    let cfg = StreamConfig { node_max_bytes: 0, node_max_entries: 10, ..StreamConfig::default() };
    let mut s = Stream::new();
    for i in 1..=100 {
        s.append(id(i, 0), &pairs(&["f", "v"]), &cfg);
    }
    assert_eq!(s.trim(Trim::MaxLen(55), true, 0), 40);
    assert_eq!(s.len(), 60);
    assert_eq!(s.first_id(), id(41, 0));
    assert_eq!(s.trim(Trim::MaxLen(55), false, 0), 5);
    assert_eq!(s.first_id(), id(46, 0));
    assert_eq!(s.trim(Trim::MinId(id(72, 0)), true, 0), 25);
    assert_eq!(s.trim(Trim::MinId(id(72, 0)), false, 0), 1);
    assert_eq!(s.first_id(), id(72, 0));
    assert_eq!(s.trim(Trim::MaxLen(0), true, 10), 9);
    assert_eq!(s.len(), 20);
}

#[test]
fn groups_pel_and_lag() {
    let cfg = StreamConfig::default();
    let mut s = Stream::new();
    for i in 1..=5 {
        s.append(id(i, 0), &pairs(&["f", "v"]), &cfg);
    }
    assert!(s.create_group(b"g", StreamId::MIN, INVALID_ENTRIES_READ));
    assert!(!s.create_group(b"g", StreamId::MIN, 0));
    let g = s.group(b"g").unwrap();
    assert_eq!(s.group_lag(g), Some(5));
    s.group_mut(b"g").unwrap().create_consumer(b"alice", 10);
    let got = s.read_group(b"g", b"alice", 2, false, 20);
    assert_eq!(ids(&got), [id(1, 0), id(2, 0)]);
    let g = s.group(b"g").unwrap();
    assert_eq!((g.last_id, g.entries_read), (id(2, 0), 2));
    assert_eq!(s.group_lag(g), Some(3));
    assert_eq!(g.consumer(b"alice").unwrap().pending(), [id(1, 0), id(2, 0)]);
    // Claiming moves the entry between consumers.
    let g = s.group_mut(b"g").unwrap();
    g.create_consumer(b"bob", 30);
    assert!(g.claim(id(1, 0), b"bob", 30, Retry::Incr));
    assert_eq!(g.nack(id(1, 0)).unwrap().delivery_count, 2);
    assert_eq!(g.consumer(b"alice").unwrap().pending(), [id(2, 0)]);
    assert_eq!(g.consumer(b"bob").unwrap().pending(), [id(1, 0)]);
    assert!(g.ack(id(1, 0)));
    assert!(!g.ack(id(1, 0)));
    assert_eq!(g.delete_consumer(b"alice"), Some(1));
    assert!(g.pending().is_empty());
    // A deletion after the group's position makes the lag unknown.
    assert!(s.remove(id(4, 0)));
    assert_eq!(s.group_lag(s.group(b"g").unwrap()), None);
    let hist = {
        let g = s.group_mut(b"g").unwrap();
        g.create_consumer(b"c", 0);
        s.read_group(b"g", b"c", 0, false, 40);
        s.read_history(b"g", b"c", StreamId::MIN, 0, 50)
    };
    assert_eq!(hist.iter().map(|h| h.0).collect::<Vec<_>>(), [id(3, 0), id(5, 0)]);
    assert_eq!(s.group_lag(s.group(b"g").unwrap()), Some(0));
    assert!(s.free_effort() >= 1 + 1 + 2);
    assert!(s.mem_usage() > 0);
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8, u8),
    Del(u8),
    TrimLen(u8, bool),
    TrimMin(u8, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..4, 0u8..3).prop_map(|(g, n)| Op::Add(g, n)),
        2 => any::<u8>().prop_map(Op::Del),
        1 => (0u8..60, any::<bool>()).prop_map(|(n, a)| Op::TrimLen(n, a)),
        1 => (any::<u8>(), any::<bool>()).prop_map(|(n, a)| Op::TrimMin(n, a)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn matches_btreemap(max_entries in 0usize..6, max_bytes in prop::sample::select(vec![0usize, 16, 64, 4096]), ops in prop::collection::vec(op(), 1..150)) {
        let cfg = StreamConfig { node_max_bytes: max_bytes, node_max_entries: max_entries, ..StreamConfig::default() };
        let mut s = Stream::new();
        let mut m: BTreeMap<StreamId, Vec<Vec<u8>>> = BTreeMap::new();
        let mut t = 0u64;
        for op in ops {
            match op {
                Op::Add(gap, shape) => {
                    t += u64::from(gap);
                    let new = s.next_id(AddId::Auto, t).unwrap();
                    let v = new.seq.to_string();
                    let f = match shape {
                        0 => pairs(&["a", &v]),
                        1 => pairs(&["a", &v, "b", "x"]),
                        _ => pairs(&["zz", "", "a", &v]),
                    };
                    s.append(new, &f, &cfg);
                    m.insert(new, f);
                }
                Op::Del(k) => {
                    let victim = m.keys().nth(usize::from(k) % (m.len() + 1)).copied();
                    let target = victim.unwrap_or(id(999, 0));
                    prop_assert_eq!(s.remove(target), m.remove(&target).is_some());
                }
                Op::TrimLen(n, approx) => {
                    let before = s.len();
                    let d = s.trim(Trim::MaxLen(u64::from(n)), approx, 0);
                    prop_assert_eq!(before - d, s.len());
                    if !approx { prop_assert!(s.len() <= u64::from(n)); }
                    while m.len() as u64 > s.len() { m.pop_first(); }
                }
                Op::TrimMin(k, approx) => {
                    let min = m.keys().nth(usize::from(k) % (m.len() + 1)).copied().unwrap_or(StreamId::MAX);
                    s.trim(Trim::MinId(min), approx, 0);
                    if !approx { prop_assert!(s.range(StreamId::MIN, StreamId::MAX, false, 0).iter().all(|e| e.id >= min)); }
                    while m.len() as u64 > s.len() { m.pop_first(); }
                }
            }
            prop_assert_eq!(s.len() as usize, m.len());
            prop_assert_eq!(s.first_id(), m.keys().next().copied().unwrap_or_default());
            let all = s.range(StreamId::MIN, StreamId::MAX, false, 0);
            let want: Vec<(StreamId, Vec<Vec<u8>>)> = m.iter().map(|(k, v)| (*k, v.clone())).collect();
            prop_assert_eq!(all.iter().map(|e| (e.id, e.fields.clone())).collect::<Vec<_>>(), want.clone());
            let mut rev = s.range(StreamId::MIN, StreamId::MAX, true, 0);
            rev.reverse();
            prop_assert_eq!(rev, all);
            if let (Some(a), Some(b)) = (m.keys().nth(m.len() / 3), m.keys().nth(2 * m.len() / 3)) {
                let got = ids(&s.range(*a, *b, false, 3));
                let exp: Vec<StreamId> = m.range(*a..=*b).map(|(k, _)| *k).take(3).collect();
                prop_assert_eq!(got, exp);
                let got = ids(&s.range(*a, *b, true, 2));
                let exp: Vec<StreamId> = m.range(*a..=*b).rev().map(|(k, _)| *k).take(2).collect();
                prop_assert_eq!(got, exp);
                prop_assert!(s.contains(*a));
            }
            if let Some((_, n)) = s.nodes.iter().find(|(_, n)| n.live == 0) {
                prop_assert!(false, "empty node {:?}", n);
            }
        }
    }
}

#[test]
fn empty_stream_stays_a_key() {
    use crate::keyspace::{Db, Ttl};
    use crate::value::{Kind, Value, ValueMut};
    let mut db = Db::new();
    db.insert(b"s", Value::Stream(Box::default()), Ttl::Clear, 0);
    let Some(ValueMut::Stream(s)) = db.get_mut(b"s", 0) else { panic!("not a stream") };
    s.append(id(1, 0), &pairs(&["f", "v"]), &StreamConfig::default());
    assert!(s.remove(id(1, 0)));
    assert!(!db.sync_object(b"s"));
    assert_eq!(db.get(b"s", 0).map(|v| v.kind()), Some(Kind::Stream));
    assert!(db.mem_usage(b"s", 0).unwrap() >= size_of::<Stream>());
}

/// A stream of entries 1-0..=n-0 in nodes of two, with group `g` delivered
/// up to `delivered` and consumer `c` holding those entries pending.
fn referenced_stream(n: u64, delivered: u64) -> Stream {
    let cfg = StreamConfig { node_max_bytes: 0, node_max_entries: 2, ..StreamConfig::default() };
    let mut s = Stream::new();
    for i in 1..=n {
        s.append(id(i, 0), &pairs(&["f", "v"]), &cfg);
    }
    s.create_group(b"g", StreamId::MIN, 0);
    s.group_mut(b"g").unwrap().create_consumer(b"c", 0);
    s.read_group(b"g", b"c", delivered as usize, false, 0);
    s
}

#[test]
fn references_decide_what_acked_deletes() {
    let mut s = referenced_stream(4, 2);
    // Pending (1, 2) or not yet delivered (3, 4): all referenced.
    assert!((1..=4).all(|i| s.is_referenced(id(i, 0))));
    assert_eq!(s.remove_with(id(1, 0), RefPolicy::Acked), Some(false));
    s.group_mut(b"g").unwrap().ack(id(1, 0));
    assert!(!s.is_referenced(id(1, 0)));
    assert_eq!(s.remove_with(id(1, 0), RefPolicy::Acked), Some(true));
    assert_eq!(s.remove_with(id(1, 0), RefPolicy::Acked), None);
    // DELREF drops the reference even when the entry is gone already.
    assert_eq!(s.remove_with(id(2, 0), RefPolicy::KeepRef), Some(true));
    assert!(s.group(b"g").unwrap().nack(id(2, 0)).is_some());
    assert_eq!(s.remove_with(id(2, 0), RefPolicy::DelRef), None);
    assert!(s.group(b"g").unwrap().nack(id(2, 0)).is_none());
    assert_eq!(s.max_deleted_id(), id(2, 0));
}

#[test]
fn trim_policies() {
    // DELREF: trimmed entries leave the pending lists, kept ones stay.
    let mut s = referenced_stream(6, 6);
    assert_eq!(s.trim_with(Trim::MaxLen(3), false, 0, RefPolicy::DelRef), 3);
    let pel: Vec<StreamId> = s.group(b"g").unwrap().pending().iter().map(|(i, _)| *i).collect();
    assert_eq!(pel, [id(4, 0), id(5, 0), id(6, 0)]);
    assert_eq!(s.group(b"g").unwrap().consumer(b"c").unwrap().pending(), [id(4, 0), id(5, 0), id(6, 0)]);
    // ACKED: only entries delivered and acknowledged go, trimming is not
    // a tombstone, and the first ID follows.
    let mut s = referenced_stream(6, 4);
    for i in [1, 3] {
        s.group_mut(b"g").unwrap().ack(id(i, 0));
    }
    assert_eq!(s.trim_with(Trim::MaxLen(0), false, 0, RefPolicy::Acked), 2);
    assert_eq!(ids(&s.range(StreamId::MIN, StreamId::MAX, false, 0)), [id(2, 0), id(4, 0), id(5, 0), id(6, 0)]);
    assert_eq!(s.first_id(), id(2, 0));
    assert!(s.max_deleted_id().is_zero());
    // MINID stops at the bound; approx only takes whole unreferenced nodes.
    let mut s = referenced_stream(6, 6);
    for i in 1..=6 {
        s.group_mut(b"g").unwrap().ack(id(i, 0));
    }
    assert_eq!(s.trim_with(Trim::MinId(id(2, 0)), false, 0, RefPolicy::Acked), 1);
    let mut s = referenced_stream(6, 6);
    for i in [1, 2, 3] {
        s.group_mut(b"g").unwrap().ack(id(i, 0));
    }
    assert_eq!(s.trim_with(Trim::MaxLen(0), true, 0, RefPolicy::Acked), 2);
    assert_eq!(s.len(), 4);
    // KEEPREF is plain trimming.
    let mut s = referenced_stream(4, 4);
    assert_eq!(s.trim_with(Trim::MaxLen(1), false, 0, RefPolicy::KeepRef), 3);
    assert_eq!(s.group(b"g").unwrap().pending().len(), 4);
}

#[test]
fn claim_idle_takes_longest_idle_first_and_counts_deliveries() {
    let mut s = Stream::new();
    for ms in 1..=4 {
        s.append(id(ms, 0), &pairs(&["f", "v"]), &StreamConfig::default());
    }
    s.create_group(b"g", StreamId::MIN, 0);
    let g = s.group_mut(b"g").unwrap();
    g.create_consumer(b"a", 0);
    g.create_consumer(b"b", 0);
    s.read_group(b"g", b"a", 0, false, 1000);
    // 3-0 delivered earliest, then 1-0 and 2-0 together; 4-0 recently.
    let g = s.group_mut(b"g").unwrap();
    g.claim(id(3, 0), b"a", 100, Retry::Keep);
    g.claim(id(4, 0), b"a", 1900, Retry::Keep);
    s.remove(id(2, 0));
    assert_eq!(s.next_claimable(b"g", 500), Some(600));
    let got = s.claim_idle(b"g", b"b", 500, 0, 2000);
    // 2-0 is gone from the stream: skipped, left pending.
    let seen: Vec<(StreamId, i64, u64)> = got.iter().map(|c| (c.entry.id, c.idle, c.delivery_count)).collect();
    assert_eq!(seen, vec![(id(3, 0), 1900, 1), (id(1, 0), 1000, 1)]);
    let g = s.group(b"g").unwrap();
    assert_eq!(g.nack(id(1, 0)).map(|n| (n.delivery_count, n.delivery_time)), Some((2, 2000)));
    assert_eq!(g.consumer(b"b").unwrap().pending(), &[id(1, 0), id(3, 0)]);
    assert_eq!(g.consumer(b"b").unwrap().active_time, 2000);
    assert!(g.nack(id(2, 0)).is_some());
    // COUNT limits; nothing else is idle long enough.
    assert_eq!(s.claim_idle(b"g", b"a", 0, 1, 2000).len(), 1);
    assert!(s.claim_idle(b"g", b"a", 5000, 0, 2000).is_empty());
    assert_eq!(s.next_claimable(b"g", 5000), Some(7000));
}
