//! Unit and property tests of `Db`, kept beside the keyspace's files
//! rather than in each: the property tests (`matches_model`,
//! `field_index_stays_in_step`, `inline_hashes_match_model`) cross every
//! concern at once, and proptest keeps their regression seeds per source
//! file (proptest-regressions/keyspace/tests.txt).

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::field_expiry::inline_min;
use super::*;
use crate::types::hash::Hash;
use crate::eviction::{EvictionPool, Rank};
use crate::segment::hash;
use crate::strref::StrRef;

#[test]
fn incr_by_in_place_and_across_classes() {
    let mut db = Db::new();
    assert_eq!(db.incr_by(b"c", 5, 0), Ok(5));
    db.set_expire(b"c", Some(1_000), 0);
    for _ in 0..300 {
        db.incr_by(b"c", 1, 0).unwrap();
    }
    assert_eq!(db.get(b"c", 0), Some(ValueRef::Str(StrRef::Int(305))));
    // Growing past the blob's class falls back to a new blob, deadline kept.
    assert_eq!(db.incr_by(b"c", i64::MAX - 305, 0), Ok(i64::MAX));
    assert_eq!(db.expire_of(b"c", 0), Some(Some(1_000)));
    assert_eq!(db.incr_by(b"c", 1, 0), Err(IncrError::Overflow));
    assert_eq!(db.incr_by(b"c", i64::MIN, 0), Ok(-1));
    db.insert(b"s", Value::string(b"abc"), Ttl::Clear, 0);
    assert_eq!(db.incr_by(b"s", 1, 0), Err(IncrError::NotInt));
    assert_eq!(db.len(), 2);
    // A key past its deadline counts from 0 again, with no deadline: the
    // expired one is deleted first (and counted), then the key created.
    assert_eq!(db.incr_by(b"c", 7, 1_000), Ok(7));
    assert_eq!(db.expire_of(b"c", 1_000), Some(None));
    assert_eq!(db.take_lazy_expired(), 1);
    assert_eq!(db.len(), 2);
    // Created keys are found by a later lookup, whatever segment growth
    // their creation caused.
    for i in 0..5_000u32 {
        assert_eq!(db.incr_by(format!("n:{i}").as_bytes(), i64::from(i), 1_000), Ok(i64::from(i)));
    }
    for i in 0..5_000u32 {
        assert_eq!(db.get(format!("n:{i}").as_bytes(), 1_000), Some(ValueRef::Str(StrRef::Int(i64::from(i)))));
    }
    assert_eq!(db.len(), 5_002);
}

/// `insert_str` stores what `insert` of `Value::string` stores: the same
/// value, form and bytes, for integers, strings that only look like one,
/// values that pack, with a deadline kept or cleared, over a key of any
/// kind of value, with compression on and off.
#[test]
fn insert_str_stores_what_insert_of_a_string_stores() {
    let values: Vec<Vec<u8>> = vec![
        b"0".to_vec(),
        b"-42".to_vec(),
        b"9223372036854775807".to_vec(),
        b"9223372036854775808".to_vec(),
        b"007".to_vec(),
        b"".to_vec(),
        b"xxx".to_vec(),
        session_value(7),
        vec![b'v'; 5000],
    ];
    for compress in [false, true] {
        let (mut a, mut b) = (Db::new(), Db::new());
        for db in [&mut a, &mut b] {
            db.key_compression = compress;
            db.value_compression = compress;
        }
        for round in 0..3 {
            for (i, v) in values.iter().enumerate() {
                let key = format!("key:{:06}", i * 7 + round).into_bytes();
                let ttl = match (i + round) % 3 {
                    0 => Ttl::Clear,
                    1 => Ttl::Keep,
                    _ => Ttl::At(1 << 50),
                };
                if round == 1 {
                    // Over a collection: the object goes, the string takes its place.
                    a.insert(&key, Value::Hash(Box::default()), Ttl::Clear, 0);
                    b.insert(&key, Value::Hash(Box::default()), Ttl::Clear, 0);
                }
                assert_eq!(a.insert(&key, Value::string(v), ttl, 0), b.insert_str(&key, v, ttl, 0));
                let got = |db: &mut Db| (db.get(&key, 0).map(|r| format!("{r:?}")), db.expire_of(&key, 0), db.mem_usage(&key, 0));
                assert_eq!(got(&mut a), got(&mut b), "value {i} round {round} compress {compress}");
            }
        }
        assert_eq!(a.len(), b.len());
        assert_eq!(a.allocated_bytes(), b.allocated_bytes());
    }
}

#[test]
fn key_events_are_logged_only_when_asked() {
    let mut db = Db::new();
    db.insert(b"a", Value::Int(1), Ttl::At(100), 0);
    assert!(!db.has_events());
    db.log_events = LOG_EXPIRED | LOG_NEW;
    db.insert(b"b", Value::Int(1), Ttl::At(100), 0);
    db.insert(b"b", Value::Int(2), Ttl::Keep, 0); // replaced: not new
    assert!(db.get(b"a", 100).is_none());
    db.insert(b"b", Value::Int(3), Ttl::Clear, 200); // expired, then new
    let names: Vec<(KeyEvent, &[u8])> = vec![(KeyEvent::New, b"b"), (KeyEvent::Expired, b"a"), (KeyEvent::Expired, b"b"), (KeyEvent::New, b"b")];
    let got = db.take_events();
    assert_eq!(got.iter().map(|(e, k)| (*e, &k[..])).collect::<Vec<_>>(), names);
    assert_eq!(db.take_lazy_expired(), 2);
    db.clear();
    assert_eq!(db.log_events, LOG_EXPIRED | LOG_NEW);
    assert!(!db.has_events());
}

#[test]
fn stored_live_sees_deadlines_but_deletes_nothing() {
    let mut db = Db::new();
    db.insert(b"a", Value::Int(1), Ttl::At(100), 0);
    assert!(db.stored_live(b"a", 99));
    assert!(!db.stored_live(b"a", 100));
    assert!(!db.stored_live(b"b", 0));
    assert!(db.stored(b"a"), "not deleted");
    assert_eq!(db.take_lazy_expired(), 0);
    db.ignore_deadlines = true;
    assert!(db.stored_live(b"a", 100));
}

#[test]
fn lazy_expiry_and_ttl_modes() {
    let mut db = Db::new();
    db.insert(b"a", Value::Int(1), Ttl::At(100), 0);
    assert_eq!(db.volatile_len(), 1);
    db.insert(b"a", Value::Int(2), Ttl::Keep, 0);
    assert_eq!(db.expire_of(b"a", 0), Some(Some(100)));
    assert!(db.get(b"a", 100).is_none());
    assert_eq!(db.len(), 0);
    assert_eq!(db.take_lazy_expired(), 1);
    assert_eq!(db.take_lazy_expired(), 0);
    assert_eq!(db.volatile_len(), 0);
}

#[test]
fn scan_survives_deletes() {
    let mut db = Db::new();
    for i in 0..100 {
        db.insert(format!("k{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0;
    let mut round = 0;
    loop {
        cursor = db.scan(cursor, 7, |k, _, _| {
            seen.insert(k.to_vec());
        });
        round += 1;
        if round == 3 {
            for i in 0..10 {
                db.remove(format!("k{i}").as_bytes(), 0);
            }
        }
        if cursor == 0 {
            break;
        }
    }
    for i in 10..100 {
        assert!(seen.contains(format!("k{i}").as_bytes()));
    }
}

#[test]
fn active_expire_reclaims() {
    let mut db = Db::new();
    for i in 0..1000 {
        db.insert(format!("k{i}").as_bytes(), Value::Int(i), if i % 2 == 0 { Ttl::At(10) } else { Ttl::Clear }, 0);
    }
    let mut n = 0;
    while db.volatile_len() > 0 {
        n += db.active_expire(20, 100, |_| {}).1;
    }
    assert_eq!(n, 500);
    assert_eq!(db.len(), 500);
}

#[test]
fn mass_delete_and_expiry_give_slab_pages_back() {
    use crate::slab::PAGE;
    // The table's slot arrays do not shrink; everything else must.
    let table = |db: &Db| {
        db.segs.iter().map(Segment::allocated_bytes).sum::<usize>()
            + jemalloc_size(db.segs.capacity() * size_of::<Segment>())
            + jemalloc_size(db.dir.capacity() * 4)
    };
    let mut db = Db::new();
    let empty = db.allocated_bytes() - table(&db);
    let n = 200_000u64;
    let key = |i: u64| format!("key:{i}").into_bytes();
    for i in 0..n {
        // Values of 20..60 bytes spread the blobs over six slab classes;
        // one key in four expires instead of being deleted.
        let ttl = if i.is_multiple_of(4) { Ttl::At(100) } else { Ttl::Clear };
        db.insert(&key(i), Value::Bytes(vec![b'v'; 20 + (i % 40) as usize]), ttl, 0);
    }
    let loaded = db.allocated_bytes() - table(&db);
    assert!(loaded > empty + 100 * PAGE, "loaded {loaded}");
    // Delete in an order unrelated to insertion (7919 is prime to n).
    for j in 0..n {
        let i = j * 7919 % n;
        if !i.is_multiple_of(4) {
            assert!(db.remove(&key(i), 0).is_some());
        }
    }
    while db.volatile_len() > 0 {
        db.active_expire(200, 1000, |_| {});
    }
    assert!(db.is_empty());
    let after = db.allocated_bytes() - table(&db);
    eprintln!("slab and objects: empty {empty}, loaded {loaded}, after deleting all {after}");
    assert!(after <= empty + 3 * PAGE, "after {after}, empty {empty}");
    assert!(db.slab.allocated_bytes() <= 2 * PAGE + 16 * 1024);
}

fn session_key(i: u64) -> Vec<u8> {
    let h = hash(&i.to_le_bytes()) as u128 * 0x1_0000_0001 + i as u128;
    format!("session:{:040x}", h).into_bytes()
}

#[test]
fn splits_keep_every_key() {
    let mut db = Db::new();
    for i in 0..50_000i64 {
        db.insert(format!("k{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
    }
    assert!(db.segs.len() > 16, "table split");
    assert_eq!(db.len(), 50_000);
    for i in 0..50_000i64 {
        assert_eq!(db.get(format!("k{i}").as_bytes(), 0), Some(ValueRef::Str(StrRef::Int(i))));
    }
    // The directory is consistent: each segment owns a contiguous,
    // aligned span matching its depth.
    let mut i = 0;
    while i < db.dir.len() {
        let seg = &db.segs[db.dir[i] as usize];
        let span = 1usize << (db.depth - seg.depth as u32);
        assert_eq!(i % span, 0);
        assert!(db.dir[i..i + span].iter().all(|&x| x == db.dir[i]));
        i += span;
    }
    let total: u32 = db.segs.iter().map(|s| s.len).sum();
    assert_eq!(total as usize, db.len());
}

#[test]
fn scan_sees_stable_keys_while_table_changes() {
    let mut db = Db::new();
    for i in 0..5_000i64 {
        db.insert(format!("stable{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
    }
    for i in 0..5_000i64 {
        db.insert(format!("churn{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
    }
    let mut seen = std::collections::HashSet::new();
    let (mut cursor, mut round, mut next) = (0, 0i64, 5_000i64);
    loop {
        let mut got = 0;
        cursor = db.scan(cursor, 10, |k, _, _| {
            seen.insert(k.to_vec());
            got += 1;
        });
        assert!(got <= 40, "count honoured roughly: {got}");
        round += 1;
        // Insert many new keys (forcing growth and splits) and delete some.
        for _ in 0..30 {
            db.insert(format!("churn{next}").as_bytes(), Value::Int(next), Ttl::Clear, 0);
            next += 1;
        }
        db.remove(format!("churn{}", round * 3).as_bytes(), 0);
        if cursor == 0 {
            break;
        }
    }
    assert!(db.segs.len() > 8);
    for i in 0..5_000i64 {
        assert!(seen.contains(format!("stable{i}").as_bytes()), "stable{i} missed");
    }
}

#[test]
fn full_scan_returns_each_key_once_when_quiet() {
    let mut db = Db::new();
    for i in 0..20_000i64 {
        db.insert(format!("k{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
    }
    let mut seen = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = db.scan(cursor, 100, |k, _, _| seen.push(k.to_vec()));
        if cursor == 0 {
            break;
        }
    }
    seen.sort();
    let n = seen.len();
    seen.dedup();
    assert_eq!(n, 20_000);
    assert_eq!(seen.len(), 20_000);
}

#[test]
fn scan_sized_gives_mem_usage_and_each_key_once_under_churn() {
    let mut db = Db::new();
    for i in 0..3_000i64 {
        db.insert(format!("stable{i}").as_bytes(), Value::string(&vec![b'x'; (i % 200) as usize]), Ttl::Clear, 0);
    }
    db.insert(b"h", Value::Int(0), Ttl::Clear, 0);
    // Quiet: every key's bytes are what mem_usage says.
    let mut sizes = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = db.scan_sized(cursor, 100, |k, _, _, bytes| sizes.push((k.to_vec(), bytes)));
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(sizes.len(), 3_001);
    for (k, bytes) in &sizes {
        assert_eq!(db.mem_usage(k, 0), Some(*bytes));
    }
    // Under inserts (growth, splits) and deletes between steps: the keys
    // present throughout are seen exactly once.
    let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
    let (mut cursor, mut next) = (0, 0i64);
    loop {
        cursor = db.scan_sized(cursor, 10, |k, _, _, _| *seen.entry(k.to_vec()).or_default() += 1);
        for _ in 0..40 {
            db.insert(format!("churn{next}").as_bytes(), Value::Int(next), Ttl::Clear, 0);
            next += 1;
        }
        db.remove(format!("churn{}", next / 2).as_bytes(), 0);
        if cursor == 0 {
            break;
        }
    }
    assert!(db.segs.len() > 8);
    for i in 0..3_000i64 {
        assert_eq!(seen.get(format!("stable{i}").as_bytes()), Some(&1), "stable{i}");
    }
    assert!(seen.values().all(|&n| n == 1));
}

#[test]
fn mass_expiry_is_incremental() {
    let mut db = Db::new();
    for i in 0..300_000u64 {
        let ttl = if i % 3 == 0 { Ttl::At(1_000) } else { Ttl::Clear };
        db.insert(format!("key:{i}").as_bytes(), Value::Int(i as i64), ttl, 0);
    }
    let (mut calls, mut walked) = (0, 0);
    while db.volatile_len() > 0 {
        let (examined, _) = db.active_expire(2_000, 256, |_| {});
        assert!(examined <= 256);
        calls += 1;
        walked += examined;
    }
    assert_eq!(db.len(), 200_000);
    assert!(calls < 2_000, "{calls} calls");
    // The work is about one look at each volatile key, not a rescan per
    // batch (a bound on work rather than on time, which a loaded machine
    // skews).
    assert!(walked <= 2 * 100_000, "{walked} keys examined");
    // Nothing due: returns at once.
    assert_eq!(db.active_expire(3_000, 256, |_| {}), (0, 0));
}

#[test]
fn idle_mem_usage_random() {
    let mut db = Db::new();
    db.insert(b"a", Value::Bytes(vec![1; 46]), Ttl::Clear, 10_000);
    db.no_touch = true;
    db.get(b"a", 15_000);
    assert_eq!(db.idle_secs(b"a", 17_000), Some(7));
    db.no_touch = false;
    db.get(b"a", 15_000);
    assert_eq!(db.idle_secs(b"a", 17_000), Some(2));
    let m = db.mem_usage(b"a", 17_000).unwrap();
    assert_eq!(m, 56 + 64); // blob class 56, one key alone in a 1-bucket segment
    assert_eq!(db.random_key(12345).as_deref(), Some(&b"a"[..]));
    db.set_expire(b"a", Some(20_000), 17_000);
    assert_eq!(db.expire_of(b"a", 17_000), Some(Some(20_000)));
    // The deadline's 6 bytes keep the blob in class 56 (55 bytes).
    assert_eq!(db.mem_usage(b"a", 17_000), Some(56 + 64));
    for i in 0..1000 {
        db.insert(format!("r{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
    }
    let keys: std::collections::HashSet<Vec<u8>> = (0..200u64).map(|r| db.random_key(r).unwrap().to_vec()).collect();
    assert!(keys.len() > 100);
}

fn per_key(n: u64, mut f: impl FnMut(&mut Db, u64)) -> f64 {
    let mut db = Db::new();
    let base = db.allocated_bytes();
    for i in 0..n {
        f(&mut db, i);
    }
    (db.allocated_bytes() - base) as f64 / n as f64
}

#[test]
fn bytes_per_key_budget() {
    let a = per_key(200_000, |db, i| {
        db.insert(&session_key(i), Value::Bytes(vec![b'v'; 46]), Ttl::At(1 << 42), 0);
    });
    let b = per_key(200_000, |db, i| {
        db.insert(format!("key:{i}").as_bytes(), Value::Int(i as i64), Ttl::Clear, 0);
    });
    eprintln!("bytes per key: sessions {a:.2}, small ints {b:.2}");
    assert!(a < 115.0, "sessions: {a}");
    assert!(b < 34.0, "small ints: {b}");
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, Option<i64>, bool, i64),
    Remove(u8),
    Get(u8),
    SetExpire(u8, Option<i64>),
    Expire(usize),
    Tick(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<u8>(), proptest::option::of(0i64..200), any::<bool>(), -1000i64..1000).prop_map(|(k, t, keep, v)| Op::Insert(k, t, keep, v)),
        2 => any::<u8>().prop_map(Op::Remove),
        2 => any::<u8>().prop_map(Op::Get),
        1 => (any::<u8>(), proptest::option::of(0i64..200)).prop_map(|(k, t)| Op::SetExpire(k, t)),
        1 => (1usize..50).prop_map(Op::Expire),
        1 => (0i64..20).prop_map(Op::Tick),
    ]
}

fn pkey(k: u8) -> Vec<u8> {
    // Some long keys to exercise large blobs and varint lengths.
    if k.is_multiple_of(17) { vec![k; 300] } else { format!("key{k}").into_bytes() }
}

proptest! {
    #[test]
    fn matches_model(ops in proptest::collection::vec(op(), 1..600)) {
        let mut db = Db::new();
        let mut model: HashMap<Vec<u8>, (Value, Option<i64>)> = HashMap::new();
        let mut now = 0i64;
        for op in ops {
            model.retain(|_, (_, d)| !matches!(d, Some(t) if *t <= now));
            match op {
                Op::Insert(k, t, keep, v) => {
                    let key = pkey(k);
                    let value = if v % 3 == 0 { Value::Bytes(vec![v as u8; (v.unsigned_abs() % 300) as usize]) } else { Value::Int(v * 1_000_003) };
                    let ttl = match (t, keep) { (Some(t), _) => Ttl::At(now + t), (None, true) => Ttl::Keep, (None, false) => Ttl::Clear };
                    let old = model.get(&key).map(|e| e.1);
                    let d = match ttl { Ttl::At(t) => Some(t), Ttl::Keep => old.flatten(), Ttl::Clear => None };
                    prop_assert_eq!(db.insert(&key, value.clone(), ttl, now), old.is_some());
                    model.insert(key, (value, d));
                }
                Op::Remove(k) => {
                    let key = pkey(k);
                    prop_assert_eq!(db.remove(&key, now), model.remove(&key).map(|e| e.0));
                }
                Op::Get(k) => {
                    let key = pkey(k);
                    let want = model.get(&key).map(|e| e.0.as_ref());
                    prop_assert_eq!(db.get(&key, now), want);
                    prop_assert_eq!(db.expire_of(&key, now), model.get(&key).map(|e| e.1));
                }
                Op::SetExpire(k, t) => {
                    let key = pkey(k);
                    let d = t.map(|t| now + t);
                    prop_assert_eq!(db.set_expire(&key, d, now), model.contains_key(&key));
                    if let Some(e) = model.get_mut(&key) { e.1 = d; }
                }
                Op::Expire(n) => {
                    let mut gone = Vec::new();
                    db.active_expire(now, n, |k| gone.push(k.to_vec()));
                    for k in gone {
                        prop_assert!(!model.contains_key(&k), "expired a live key");
                    }
                }
                Op::Tick(dt) => now += dt,
            }
            prop_assert_eq!(db.volatile_len(), {
                let mut n = 0; db.for_each(|_, _, d| n += usize::from(d.is_some())); n
            });
        }
        let mut stored = HashMap::new();
        db.for_each(|k, v, d| { stored.insert(k.to_vec(), (v.to_owned(), d)); });
        prop_assert_eq!(stored.len(), db.len());
        // One blob a key, whether a write replaced its blob in place or
        // moved it (`Slab::replace`), and the slab's books balance.
        db.slab.check();
        prop_assert_eq!(db.slab.live_blobs(), db.len());
        for (k, e) in &model {
            prop_assert_eq!(stored.get(k), Some(e));
        }
        for (k, (_, d)) in &stored {
            prop_assert!(model.contains_key(k) || matches!(d, Some(t) if *t <= now));
        }
    }
}

fn hash_of(fields: &[(&str, Option<i64>)]) -> Hash {
    hash_with(fields, b"v")
}

/// A hash with a value longer than hash-max-listpack-value, which
/// Redis calls hashtable: kept in the object table, never inline.
fn big_hash_of(fields: &[(&str, Option<i64>)]) -> Hash {
    hash_with(fields, &[b'v'; 70])
}

fn hash_with(fields: &[(&str, Option<i64>)], value: &[u8]) -> Hash {
    let mut h = Hash::new();
    let cfg = crate::types::hash::HashConfig::default();
    for (f, d) in fields {
        h.insert(f.as_bytes(), value, &cfg);
        if let Some(d) = d {
            h.set_expire(f.as_bytes(), *d, crate::types::hash::ExpireCond::Always, 0);
        }
    }
    h
}

fn hash_mut<'a>(db: &'a mut Db, key: &[u8], now: i64) -> &'a mut Hash {
    match db.get_or_insert_with(key, now, || Value::Hash(Box::default())) {
        ValueMut::Hash(h) => h,
        _ => panic!("not a hash"),
    }
}

#[test]
fn small_zsets_live_in_their_blob_and_grow_into_the_object_table() {
    use crate::types::zset::{ZSet, ZsetConfig};
    let cfg = ZsetConfig::default();
    let mut db = Db::default();
    let mut z = ZSet::new();
    z.insert(b"a", 1.0, &cfg);
    db.insert(b"z", Value::ZSet(Box::new(z.clone())), Ttl::Clear, 0);
    assert_eq!(db.objs.iter().flatten().count(), 0, "a small zset is kept inline");
    assert_eq!(db.get(b"z", 0), Some(ValueRef::ZSet(&z)));
    // The copy that read decoded can be moved out, once; nothing is lent
    // for a string.
    assert_eq!(db.take_lent(), Some(Value::ZSet(Box::new(z.clone()))));
    assert_eq!(db.take_lent(), None);
    db.insert(b"s", Value::Int(1), Ttl::Clear, 0);
    db.get(b"s", 0);
    assert_eq!(db.take_lent(), None);
    db.remove(b"s", 0);
    // flags, key length, "z" and the 3-byte inline form of {a: 1}: 6
    // bytes, a slab class of its own (below 16 bytes each length is one).
    let (_, si, pos) = db.find(b"z");
    assert_eq!(db.slab.cost(addr_of(db.segs[si].slots[pos.unwrap()])), 6);
    // Grown past the inline bound it moves to the object table...
    let mut i = 0;
    while db.objs.iter().flatten().count() == 0 {
        i += 1;
        let Some(ValueMut::ZSet(zm)) = db.get_mut(b"z", 0) else { panic!("not a zset") };
        zm.insert(format!("member:{i:04}:{}", "x".repeat(30)).as_bytes(), i as f64, &cfg);
        db.sync_object(b"z");
    }
    // ...once its packed entries pass 960 bytes: "a" takes 3, each
    // 42-byte member 44 (a 1-byte score, a length byte), 3 + 22 * 44 > 960.
    assert_eq!(i, 22);
    // ...and stays there when it shrinks, as a big hash does (a rename or
    // RESTORE, which store it anew, would inline it again).
    let Some(ValueMut::ZSet(zm)) = db.get_mut(b"z", 0) else { panic!("not a zset") };
    zm.remove(b"a");
    db.sync_object(b"z");
    assert_eq!(db.objs.iter().flatten().count(), 1);
    // A member TTL keeps a zset in the object table, where the index sees it.
    let mut t = ZSet::new();
    t.insert(b"m", 2.0, &cfg);
    db.insert(b"t", Value::ZSet(Box::new(t)), Ttl::Clear, 0);
    let Some(ValueMut::ZSet(tm)) = db.get_mut(b"t", 0) else { panic!("not a zset") };
    assert_eq!(tm.set_expire(b"m", 5_000, crate::types::hash::ExpireCond::Always, 0), 1);
    db.sync_object(b"t");
    assert_eq!(db.objs.iter().flatten().count(), 2);
    assert_eq!(db.field_expiry_len(), 1);
    // Removing the last member of an inline zset deletes the key.
    db.insert(b"e", Value::ZSet(Box::new(z.clone())), Ttl::Clear, 0);
    let Some(ValueMut::ZSet(em)) = db.get_mut(b"e", 0) else { panic!("not a zset") };
    em.remove(b"a");
    assert!(db.sync_object(b"e"));
    assert!(!db.contains(b"e", 0));
    assert_eq!(db.remove(b"z", 0).map(|v| matches!(v, Value::ZSet(_))), Some(true));
    assert_eq!(db.incr_by(b"t", 1, 0), Err(IncrError::WrongType));
}

#[test]
fn lists_and_sets_live_in_the_object_table() {
    use crate::types::list::{End, List, ListConfig};
    use crate::types::set::{Set, SetConfig};
    let mut db = Db::default();
    let mut l = List::new();
    l.push(End::Tail, &[b"a", b"b"], &ListConfig::default());
    let mut s = Set::new();
    s.insert(b"7", &SetConfig::default());
    db.insert(b"l", Value::List(Box::new(l.clone())), Ttl::Clear, 0);
    db.insert(b"s", Value::Set(Box::new(s.clone())), Ttl::At(1_000), 0);
    db.insert(b"h", Value::Hash(Box::new(big_hash_of(&[("f", Some(500))]))), Ttl::Clear, 0);
    assert_eq!(db.get(b"l", 0), Some(ValueRef::List(&l)));
    assert_eq!(db.get(b"s", 0).map(|v| v.kind().name()), Some("set"));
    // Only the hash is in the field-expiry index; a boxed type's box is counted.
    assert_eq!(db.field_expiry_len(), 1);
    assert!(db.mem_usage(b"s", 0).unwrap() >= 24 + 32 + s.mem_usage());
    // A list emptied in place is deleted by sync_object; its slot is reused.
    let Some(ValueMut::List(lm)) = db.get_mut(b"l", 0) else { panic!("not a list") };
    lm.pop(End::Head, &ListConfig::default());
    lm.pop(End::Head, &ListConfig::default());
    assert!(db.sync_object(b"l"));
    assert!(!db.contains(b"l", 0));
    assert_eq!(db.objs.iter().flatten().count(), 2);
    let v = db.remove(b"s", 0).unwrap();
    assert_eq!(v, Value::Set(Box::new(s)));
    db.insert(b"s2", v, Ttl::Clear, 0);
    assert_eq!(db.objs.len(), 3);
    assert_eq!(db.active_expire_fields(1_000, 100, |_, _| {}), (1, 1));
    assert!(!db.contains(b"h", 1_000));
    assert_eq!(db.objs.iter().flatten().count(), 1);
}

#[test]
fn hash_values_round_trip() {
    for big in [false, true] {
        hash_round_trip(if big { big_hash_of } else { hash_of }, big);
    }
}

type MakeHash = fn(&[(&str, Option<i64>)]) -> Hash;

fn hash_round_trip(make: MakeHash, big: bool) {
    let mut db = Db::new();
    let h = make(&[("a", None), ("b", Some(500))]);
    db.insert(b"h", Value::Hash(Box::new(h.clone())), Ttl::Clear, 0);
    db.insert(b"s", Value::Int(1), Ttl::Clear, 0);
    assert_eq!(db.get(b"h", 0).map(|v| v.kind().name()), Some("hash"));
    assert_eq!(db.get(b"h", 0), Some(ValueRef::Hash(&h)));
    assert_eq!(db.field_expiry_len(), 1);
    let cost = db.mem_usage(b"h", 0).unwrap();
    if big {
        // Flags, key length, "h", the 4-byte object index: a 7-byte blob.
        assert_eq!(cost, 7 + 64 / 2 + 24 + h.mem_usage());
    } else {
        // Inline: "h" and two entries (4 and 10 bytes) in one 24-byte blob.
        assert_eq!(cost, 24 + 64 / 2);
    }
    let objs = usize::from(big);
    // Renaming is remove + insert: the object moves, the index follows.
    let v = db.remove(b"h", 0).unwrap();
    assert_eq!(v, Value::Hash(Box::new(h.clone())));
    assert_eq!(db.field_expiry_len(), 0);
    db.insert(b"h2", v, Ttl::At(1_000), 0);
    assert_eq!(db.field_expiry_len(), 1);
    // Overwriting with a string frees the object slot and its index entry.
    db.insert(b"h2", Value::Int(5), Ttl::Keep, 0);
    assert_eq!(db.field_expiry_len(), 0);
    assert_eq!(db.objs.iter().flatten().count(), 0);
    // The freed slot is reused.
    db.insert(b"h3", Value::Hash(Box::new(h)), Ttl::At(1_000), 0);
    assert_eq!(db.objs.len(), objs);
    db.set_expire(b"h3", None, 0);
    assert!(matches!(db.get(b"h3", 0), Some(ValueRef::Hash(_))));
    // Key expiry drops the hash and its index entry.
    db.set_expire(b"h3", Some(10), 0);
    assert!(db.get(b"h3", 10).is_none());
    assert_eq!(db.field_expiry_len(), 0);
    let mut seen = Vec::new();
    db.for_each(|k, v, _| seen.push((k.to_vec(), v.kind())));
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(seen, vec![(b"h2".to_vec(), crate::value::Kind::Str), (b"s".to_vec(), crate::value::Kind::Str)]);
}

#[test]
fn in_place_edits_and_sync() {
    for value in [&b"1"[..], &[b'x'; 70]] {
        let inline = value.len() == 1;
        let mut db = Db::new();
        let cfg = crate::types::hash::HashConfig::default();
        hash_mut(&mut db, b"h", 0).insert(b"f", value, &cfg);
        assert!(!db.sync_object(b"h"));
        assert_eq!(db.field_expiry_len(), 0);
        assert_eq!(db.objs.len(), usize::from(!inline));
        let index = |db: &Db| -> Vec<i64> {
            if inline { db.fexp_segs.iter().map(|e| e.0).collect() } else { db.fexp.keys().map(|e| e.0).collect() }
        };
        hash_mut(&mut db, b"h", 0).set_expire(b"f", 100, crate::types::hash::ExpireCond::Always, 0);
        db.sync_object(b"h");
        assert_eq!(index(&db), vec![100]);
        hash_mut(&mut db, b"h", 0).set_expire(b"f", 50, crate::types::hash::ExpireCond::Lt, 0);
        db.sync_object(b"h");
        assert_eq!(index(&db), vec![50]);
        assert_eq!(db.field_expiry_len(), 1);
        hash_mut(&mut db, b"h", 0).remove(b"f");
        assert!(db.sync_object(b"h"), "empty hash is deleted");
        assert_eq!((db.len(), db.field_expiry_len()), (0, 0));
        assert!(!db.sync_object(b"missing"));
    }
}

#[test]
fn inline_hash_grows_into_the_object_table() {
    let mut db = Db::new();
    let cfg = crate::types::hash::HashConfig::default();
    // An edit left lent out is written back by the next call.
    let value = [b'v'; 20];
    hash_mut(&mut db, b"h", 0).insert(b"f000", &value, &cfg);
    assert_eq!(db.len(), 1);
    let mut i = 0;
    while db.objs.is_empty() {
        i += 1;
        hash_mut(&mut db, b"h", 0).insert(format!("f{i:03}").as_bytes(), &value, &cfg);
        db.sync_object(b"h");
    }
    // Each field is a 26-byte entry: 36 * 26 = 936 bytes is the largest
    // inline hash (INLINE_MAX_BYTES), one more field moves it out.
    assert_eq!((i, crate::types::hash::INLINE_MAX_BYTES), (36, 960));
    let Some(ValueRef::Hash(h)) = db.get(b"h", 0) else { panic!("not a hash") };
    assert_eq!((h.len(), h.encoding_name()), (i + 1, "listpack"));
    // TYPE-level checks and a string overwrite free everything.
    assert_eq!(db.incr_by(b"h", 1, 0), Err(IncrError::WrongType));
    db.insert(b"h", Value::Int(1), Ttl::Clear, 0);
    assert_eq!(db.objs.iter().flatten().count(), 0);
    // OBJECT ENCODING's listpackex survives in the blob.
    hash_mut(&mut db, b"e", 0).insert(b"f", b"v", &cfg);
    hash_mut(&mut db, b"e", 0).set_expire(b"g", 5, crate::types::hash::ExpireCond::Always, 0);
    db.sync_object(b"e");
    let Some(ValueRef::Hash(h)) = db.get(b"e", 0) else { panic!("not a hash") };
    assert_eq!(h.encoding_name(), "listpackex");
    assert!(db.objs.iter().flatten().count() == 0);
}

#[test]
fn active_field_expiry_is_bounded_and_deletes_empty_hashes() {
    let mut db = Db::new();
    let cfg = crate::types::hash::HashConfig::default();
    let h = hash_mut(&mut db, b"big", 0);
    for i in 0..100_000 {
        let f = format!("f{i}");
        h.insert(f.as_bytes(), b"1", &cfg);
        h.set_expire(f.as_bytes(), 1_000 + (i % 3), crate::types::hash::ExpireCond::Always, 0);
    }
    db.sync_object(b"big");
    db.insert(b"small", Value::Hash(Box::new(hash_of(&[("x", Some(5_000)), ("y", None)]))), Ttl::Clear, 0);
    assert_eq!(db.field_expiry_len(), 2);
    // Nothing is due at the deadline itself (fields expire after it).
    assert_eq!(db.active_expire_fields(1_000, 10, |_, _| {}), (0, 0));
    let mut got = 0;
    let mut calls = 0;
    loop {
        let (n, k) = db.active_expire_fields(2_000, 1_000, |key, _| assert_eq!(key, b"big"));
        assert!(n <= 1_000);
        got += n;
        calls += 1;
        if k == 1 {
            break;
        }
    }
    assert_eq!((got, calls), (100_000, 100));
    assert!(db.get(b"big", 2_000).is_none());
    assert_eq!(db.len(), 1);
    // The small hash loses only its TTL field and stays.
    assert_eq!(db.active_expire_fields(6_000, 1_000, |_, _| {}), (1, 0));
    assert_eq!(db.field_expiry_len(), 0);
    let Some(ValueRef::Hash(h)) = db.get(b"small", 6_000) else { panic!() };
    assert_eq!(h.len(), 1);
}

/// The field-expiry index holds exactly the live hashes with a field
/// TTL, each under its earliest deadline and its own key.
/// Inline hashes are covered by their segment's entry, at a bound no
/// later than any of their field deadlines.
fn check_index(db: &Db) {
    let mut want = std::collections::BTreeMap::new();
    db.for_each(|k, v, _| {
        if let ValueRef::Hash(h) = v {
            if let Some(t) = h.min_deadline() {
                want.insert(k.to_vec(), t);
            }
        }
    });
    let mut got: std::collections::BTreeMap<Vec<u8>, i64> = db.fexp.iter().map(|(&(t, _), k)| (k.to_vec(), t)).collect();
    let mut inline = 0;
    for (si, seg) in db.segs.iter().enumerate() {
        assert_eq!(db.fexp_segs.contains(&(seg.field_min, si as u32)), seg.field_min != i64::MAX);
        for &s in seg.slots.iter().filter(|&&s| s != 0) {
            if let Some(t) = inline_min(db.blob(s).body()) {
                assert!(seg.field_min <= t, "segment {si} registered after a field deadline");
                got.insert(db.blob(s).key.to_vec(), t);
                inline += 1;
            }
        }
    }
    assert_eq!(got, want);
    assert_eq!(db.fexp_segs.len(), db.segs.iter().filter(|g| g.field_min != i64::MAX).count());
    assert_eq!(db.field_expiry_len(), want.len());
    assert_eq!(db.inline_ttl, inline);
    assert_eq!(db.fexp.len(), db.fexp_at.len());
    assert_eq!(db.objs.iter().flatten().count() + db.free_objs.len(), db.objs.len());
}

proptest! {
    #[test]
    fn field_index_stays_in_step(ops in proptest::collection::vec((0u8..6, 0u8..4, 0u8..8, 0i64..50), 1..300)) {
        let mut db = Db::new();
        let cfg = crate::types::hash::HashConfig { small_max_entries: 4, ..Default::default() };
        let mut now = 0;
        for (op, k, f, t) in ops {
            let key = [b'h', b'0' + k];
            let field = [b'f', b'0' + f];
            match op {
                0 => {
                    if !matches!(db.get(&key, now), Some(ValueRef::Str(_))) {
                        let ValueMut::Hash(h) = db.get_or_insert_with(&key, now, || Value::Hash(Box::default())) else { unreachable!() };
                        // Field 7 gets a long value: such a hash lives in the object table.
                        h.insert(&field, if f == 7 { &[b'v'; 70] } else { b"v" }, &cfg);
                        h.set_expire(&field, now + t, crate::types::hash::ExpireCond::Always, now);
                        db.sync_object(&key);
                    }
                }
                1 => {
                    if let Some(ValueMut::Hash(h)) = db.get_mut(&key, now) {
                        h.remove(&field);
                        db.sync_object(&key);
                    }
                }
                2 => {
                    if let Some(v) = db.remove(&key, now) {
                        db.insert(&[b'h', b'0' + (k + 1) % 4], v, Ttl::Keep, now);
                    }
                }
                3 => { db.insert(&key, Value::Int(t), Ttl::Clear, now); }
                4 => { db.active_expire_fields(now, 1 + t as usize % 5, |_, _| {}); }
                _ => {
                    now += t;
                    if t % 7 == 0 {
                        db.set_expire(&key, Some(now + 3), now);
                    }
                }
            }
            check_index(&db);
        }
        while db.active_expire_fields(now + 100, 3, |_, _| {}).0 > 0 {}
        db.for_each(|_, v, _| {
            if let ValueRef::Hash(h) = v {
                assert!(h.min_deadline().is_none_or(|d| d >= now + 100));
            }
        });
        check_index(&db);
    }
}

/// 1M one-field hashes (seed 004, 200,000 here): the inline form costs
/// one blob and a slot share; a field TTL adds 6 bytes to the blob and
/// no index entry of its own (one per segment).
#[test]
fn one_field_hash_budget() {
    use crate::types::hash::{ExpireCond, HashConfig};
    let cfg = HashConfig::default();
    let mut one = Hash::new();
    one.insert(b"name", b"1", &cfg);
    let plain = per_key(200_000, |db, i| {
        db.insert(format!("h{i:010}").as_bytes(), Value::Hash(Box::new(one.clone())), Ttl::Clear, 0);
    });
    let mut segs = (0, 0);
    let ttl = per_key(200_000, |db, i| {
        let key = format!("h{i:010}");
        hash_mut(db, key.as_bytes(), 0).insert(b"name", b"1", &cfg);
        hash_mut(db, key.as_bytes(), 0).set_expire(b"name", 3_600_000 + i as i64, ExpireCond::Always, 0);
        db.sync_object(key.as_bytes());
        segs = (db.fexp_segs.len(), db.segs.len());
    });
    eprintln!("one-field hashes: {plain:.2} B/key, {ttl:.2} with a field TTL");
    assert!(plain <= 48.0, "{plain}");
    assert!(ttl <= 64.0, "{ttl}");
    assert!(segs.0 <= segs.1, "{segs:?}");
}

#[derive(Debug, Clone)]
enum HOp {
    Set(u8, u8, bool),
    Del(u8, u8),
    Expire(u8, u8, i64),
    Persist(u8, u8),
    Read(u8, u8),
    Rename(u8),
    KeyTtl(u8, i64),
    Active(usize),
    Tick(i64),
}

fn hop() -> impl Strategy<Value = HOp> {
    let (k, f) = (0u8..4, 0u8..8);
    prop_oneof![
        5 => (k.clone(), f.clone(), any::<bool>()).prop_map(|(k, f, long)| HOp::Set(k, f, long)),
        2 => (k.clone(), f.clone()).prop_map(|(k, f)| HOp::Del(k, f)),
        4 => (k.clone(), f.clone(), 0i64..40).prop_map(|(k, f, t)| HOp::Expire(k, f, t)),
        1 => (k.clone(), f.clone()).prop_map(|(k, f)| HOp::Persist(k, f)),
        3 => (k.clone(), f).prop_map(|(k, f)| HOp::Read(k, f)),
        1 => k.clone().prop_map(HOp::Rename),
        1 => (k, 1i64..60).prop_map(|(k, t)| HOp::KeyTtl(k, t)),
        2 => (1usize..6).prop_map(HOp::Active),
        3 => (0i64..15).prop_map(HOp::Tick),
    ]
}

/// Model: key -> (field -> (value, field deadline), key deadline).
type HModel = BTreeMap<Vec<u8>, (BTreeMap<Vec<u8>, (Vec<u8>, Option<i64>)>, Option<i64>)>;

proptest! {
    /// Small hashes (inline, and promoted when a long value pushes
    /// them past the inline bound) against a map model with field and
    /// key TTLs, lazy and active field expiry, renames.
    #[test]
    fn inline_hashes_match_model(ops in proptest::collection::vec(hop(), 1..250)) {
        use crate::types::hash::{ExpireCond, HashConfig};
        let cfg = HashConfig::default();
        let mut db = Db::new();
        let mut model = HModel::new();
        let mut now = 1_000i64;
        let key = |k: u8| format!("hash:{k}").into_bytes();
        let field = |f: u8| format!("field{f}").into_bytes();
        for op in ops {
            model.retain(|_, (_, d)| !matches!(d, Some(t) if *t <= now));
            match op {
                HOp::Set(k, f, long) => {
                    let v = if long { vec![b'x'; 30] } else { vec![b'0' + f] };
                    hash_mut(&mut db, &key(k), now).insert(&field(f), &v, &cfg);
                    db.sync_object(&key(k));
                    model.entry(key(k)).or_default().0.insert(field(f), (v, None));
                }
                HOp::Del(k, f) => {
                    let want = model.get_mut(&key(k)).is_some_and(|e| e.0.remove(&field(f)).is_some());
                    let got = match db.get_mut(&key(k), now) {
                        Some(ValueMut::Hash(h)) => h.remove(&field(f)),
                        _ => false,
                    };
                    prop_assert_eq!(got, want);
                    db.sync_object(&key(k));
                }
                HOp::Expire(k, f, t) => {
                    let e = model.get_mut(&key(k)).and_then(|e| e.0.get_mut(&field(f)));
                    let live = e.as_ref().is_some_and(|x| x.1.is_none_or(|d| d >= now));
                    let want = if !live { -2 } else if t == 0 { 2 } else { 1 };
                    let got = match db.get_mut(&key(k), now) {
                        Some(ValueMut::Hash(h)) => h.set_expire(&field(f), now + t, ExpireCond::Always, now),
                        _ => -2,
                    };
                    prop_assert_eq!(got, want);
                    match want {
                        1 => e.expect("live").1 = Some(now + t),
                        2 => { model.get_mut(&key(k)).expect("live").0.remove(&field(f)); }
                        _ => {}
                    }
                    db.sync_object(&key(k));
                }
                HOp::Persist(k, f) => {
                    let e = model.get_mut(&key(k)).and_then(|e| e.0.get_mut(&field(f))).filter(|x| x.1.is_none_or(|d| d >= now));
                    let want = match &e { None => -2, Some(x) if x.1.is_none() => -1, Some(_) => 1 };
                    if let Some(x) = e { x.1 = None; }
                    let got = match db.get_mut(&key(k), now) {
                        Some(ValueMut::Hash(h)) => h.persist(&field(f), now),
                        _ => -2,
                    };
                    prop_assert_eq!(got, want);
                    db.sync_object(&key(k));
                }
                HOp::Read(k, f) => {
                    let want: Option<Vec<(Vec<u8>, Vec<u8>)>> = model.get(&key(k)).map(|e| {
                        e.0.iter().filter(|(_, x)| x.1.is_none_or(|d| d >= now)).map(|(f, x)| (f.clone(), x.0.clone())).collect()
                    });
                    let want_ttl = model.get(&key(k)).and_then(|e| e.0.get(&field(f))).filter(|x| x.1.is_none_or(|d| d >= now)).map(|x| x.1);
                    let stored = model.get(&key(k)).map(|e| e.0.len());
                    match db.get(&key(k), now) {
                        Some(ValueRef::Hash(h)) => {
                            let mut got: Vec<(Vec<u8>, Vec<u8>)> = h.iter(now).map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                            got.sort();
                            prop_assert_eq!(Some(got), want);
                            prop_assert_eq!(h.expire_of(&field(f), now), want_ttl);
                            prop_assert_eq!(Some(h.len()), stored);
                        }
                        other => prop_assert!(other.is_none() && want.is_none(), "{:?}", other),
                    }
                }
                HOp::Rename(k) => {
                    let (from, to) = (key(k), key((k + 1) % 4));
                    let d = db.expire_of(&from, now).flatten();
                    if let Some(v) = db.remove(&from, now) {
                        db.insert(&to, v, d.map_or(Ttl::Clear, Ttl::At), now);
                        let e = model.remove(&from).expect("model has it");
                        prop_assert_eq!(e.1, d);
                        model.insert(to, e);
                    }
                }
                HOp::KeyTtl(k, t) => {
                    let got = db.set_expire(&key(k), Some(now + t), now);
                    prop_assert_eq!(got, model.contains_key(&key(k)));
                    if let Some(e) = model.get_mut(&key(k)) { e.1 = Some(now + t); }
                }
                HOp::Active(max) => {
                    let mut gone = Vec::new();
                    let (n, _) = db.active_expire_fields(now, max, |k, f| gone.push((k.to_vec(), f.to_vec())));
                    prop_assert!(n <= max);
                    prop_assert_eq!(n, gone.len());
                    for (k, f) in gone {
                        // A key past its own deadline, not yet reclaimed, may lose fields too.
                        let Some(e) = model.get_mut(&k) else { continue };
                        let x = e.0.remove(&f).expect("expired a missing field");
                        prop_assert!(matches!(x.1, Some(d) if d < now), "expired a live field");
                    }
                }
                HOp::Tick(dt) => now += dt,
            }
            model.retain(|_, e| !e.0.is_empty() && !matches!(e.1, Some(t) if t <= now));
            check_index(&db);
            // Expired keys stay counted until reclaimed, so compare
            // presence (which reclaims) only some of the time.
            if now & 1 == 0 {
                for k in 0..4 {
                    prop_assert_eq!(db.contains(&key(k), now), model.contains_key(&key(k)));
                }
            }
        }
        // Active expiry alone reclaims every due field.
        now += 100;
        model.retain(|_, (_, d)| !matches!(d, Some(t) if *t <= now));
        while db.active_expire_fields(now, 3, |_, _| {}).0 > 0 {}
        for (k, (fields, _)) in &model {
            let live = fields.values().filter(|x| x.1.is_none_or(|d| d >= now)).count();
            match db.get(k, now) {
                Some(ValueRef::Hash(h)) => prop_assert_eq!(h.len(), live),
                other => prop_assert!(other.is_none() && live == 0, "{:?}", other),
            }
        }
        check_index(&db);
    }
}

const _: () = assert!(size_of::<Hand>() == 32);

/// Loading a dump inserts keys in another table's iteration order (one
/// segment after another, hash-ordered): the table must absorb that order
/// as well as a random one.
#[test]
fn inserting_in_another_tables_order() {
    let mut a = Db::default();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..300_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = format!("key:{:012}", x % 1_000_000);
        a.insert(k.as_bytes(), Value::string(b"v"), Ttl::Clear, 0);
    }
    let mut b = Db::default();
    a.for_each(|k, _, _| {
        b.insert(k, Value::string(b"v"), Ttl::Clear, 0);
    });
    assert_eq!(a.len(), b.len());
    a.for_each(|k, _, _| assert!(b.get(k, 0).is_some()));
    // Hash order costs no more table than random order, give or take.
    let (ta, tb) = (a.allocated_bytes(), b.allocated_bytes());
    assert!(tb * 10 <= ta * 12, "hash-ordered {tb} bytes, random order {ta}");
}

/// `reserve` presizes an empty table to the segments `n` keys would
/// grow, and keys then land there without splits, in any order;
/// a table that holds keys is left as it is.
#[test]
fn reserve_presizes_an_empty_table_only() {
    let mut db = Db::new();
    db.reserve(100_000);
    assert_eq!(db.segs.len(), 64, "100,000 / 1,800 rounded up to a power of two");
    assert_eq!(db.dir.len(), 64);
    // In hash order, as a dump of this table lists them.
    let mut keys: Vec<Vec<u8>> = (0..100_000u32).map(|i| format!("key:{i}").into_bytes()).collect();
    keys.sort_by_key(|k| crate::segment::hash(k));
    for k in &keys {
        db.insert(k, Value::Int(7), Ttl::Clear, 0);
    }
    assert_eq!(db.len(), 100_000);
    assert!(db.segs.len() <= 80, "few splits, if any: {}", db.segs.len());
    for k in keys.iter().step_by(97) {
        assert!(matches!(db.get(k, 0), Some(ValueRef::Str(StrRef::Int(7)))));
    }
    let segs = db.segs.len();
    db.reserve(10_000_000);
    assert_eq!(db.segs.len(), segs, "a table with keys is not resized");
    let mut small = Db::new();
    small.reserve(1_000);
    assert_eq!(small.segs.len(), 1, "one segment's worth needs no presizing");
}

fn filled(n: usize, volatile_every: usize, now: i64) -> Db {
    let mut db = Db::new();
    for i in 0..n {
        let ttl = if volatile_every > 0 && i % volatile_every == 0 { Ttl::At(now + 1_000_000 + i as i64) } else { Ttl::Clear };
        db.insert(format!("k{i}").as_bytes(), Value::Int(i as i64), ttl, now);
    }
    db
}

#[test]
fn sample_gives_stored_keys_and_only_volatile_ones_when_asked() {
    let now = 1_700_000_000_000;
    let mut db = Db::new();
    assert_eq!(db.sample(5, false, Rank::Random, now, |_, _| panic!("empty")), 0);
    let mut db2 = filled(5_000, 10, now);
    std::mem::swap(&mut db, &mut db2);
    for _ in 0..200 {
        let mut keys = Vec::new();
        let n = db.sample(5, false, Rank::Random, now, |k, _| keys.push(k.to_vec()));
        assert_eq!(n, 5);
        assert_eq!(keys.len(), 5);
        for k in &keys {
            assert!(db.contains(k, now));
        }
        let mut vkeys = Vec::new();
        assert_eq!(db.sample(5, true, Rank::Ttl, now, |k, s| vkeys.push((k.to_vec(), s))), 5);
        for (k, s) in &vkeys {
            let t = db.expire_of(k, now).unwrap().expect("a volatile key");
            assert_eq!(*s, u64::MAX - t as u64);
        }
    }
}

#[test]
fn sample_finds_a_lone_volatile_key_in_a_big_table() {
    let now = 1_700_000_000_000;
    let mut db = filled(50_000, 0, now);
    db.set_expire(b"k12345", Some(now + 10_000), now);
    for _ in 0..20 {
        let mut keys = Vec::new();
        assert_eq!(db.sample(5, true, Rank::Ttl, now, |k, _| keys.push(k.to_vec())), 1);
        assert_eq!(keys, vec![b"k12345".to_vec()]);
    }
    // Never more keys than there are.
    let mut small = filled(3, 0, now);
    assert_eq!(small.sample(10, false, Rank::Random, now, |_, _| {}), 3);
}

#[test]
fn samples_cover_the_keyspace() {
    let now = 1_700_000_000_000;
    let mut db = filled(20_000, 0, now);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..40_000 {
        db.sample(5, false, Rank::Random, now, |k, _| {
            seen.insert(k.to_vec());
        });
    }
    // 200k draws over 20k keys: a uniform sampler misses almost none.
    assert!(seen.len() > 19_000, "only {} keys ever sampled", seen.len());
}

#[test]
fn lru_scores_are_idle_seconds() {
    let now = 1_700_000_000_000;
    let mut db = filled(1_000, 0, now);
    let later = now + 50_000;
    for i in 0..500 {
        db.get(format!("k{i}").as_bytes(), later);
    }
    let mut checked = 0;
    db.sample(1_000, false, Rank::Lru, later, |k, s| {
        let i: usize = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
        assert_eq!(s, if i < 500 { 0 } else { 50 }, "key {i}");
        checked += 1;
    });
    assert!(checked > 0);
}

#[test]
fn lfu_counts_accesses_in_the_access_bits() {
    let now = 1_700_000_000_000;
    let mut db = Db::new();
    db.access = crate::access::Access::Lfu { log_factor: 10, decay_minutes: 1 };
    db.insert(b"hot", Value::Int(1), Ttl::Clear, now);
    db.insert(b"cold", Value::Int(1), Ttl::Clear, now);
    assert_eq!(db.freq(b"hot", now), Some(crate::access::LFU_INIT));
    for _ in 0..1_000 {
        db.get(b"hot", now);
    }
    let hot = db.freq(b"hot", now).unwrap();
    assert!(hot > 15, "{hot}");
    assert_eq!(db.freq(b"cold", now), Some(crate::access::LFU_INIT));
    // Decay: one step per idle minute; OBJECT FREQ itself does not touch.
    assert_eq!(db.freq(b"hot", now + 3 * 60_000), Some(hot - 3));
    assert_eq!(db.freq(b"hot", now + 3 * 60_000), Some(hot - 3));
    let mut scores = HashMap::new();
    db.sample(10, false, Rank::Lfu, now, |k, s| {
        scores.insert(k.to_vec(), s);
    });
    assert_eq!(scores[&b"hot"[..]], 255 - hot as u64);
    assert_eq!(scores[&b"cold"[..]], 255 - crate::access::LFU_INIT as u64);
    assert!(db.set_freq(b"cold", 200, now));
    assert_eq!(db.freq(b"cold", now), Some(200));
}

#[test]
fn eviction_pool_keeps_the_best_candidates() {
    let mut pool = EvictionPool::default();
    for i in 0..100u64 {
        pool.offer(i * 7 % 101, (i % 3) as usize, format!("k{i}").as_bytes());
    }
    assert_eq!(pool.len(), EvictionPool::SIZE);
    let mut last = u64::MAX;
    let mut n = 0;
    while let Some((db, k)) = pool.pop_best() {
        let i: u64 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
        assert_eq!(db, (i % 3) as usize);
        let score = i * 7 % 101;
        assert!(score < last && score >= 100 - 16, "{score}");
        last = score;
        n += 1;
    }
    assert_eq!(n, EvictionPool::SIZE);
    // A key offered again takes its new score instead of a second place.
    pool.offer(5, 0, b"a");
    pool.offer(1, 0, b"b");
    pool.offer(0, 0, b"a");
    assert_eq!(pool.len(), 2);
    assert_eq!(pool.pop_best(), Some((0, b"b"[..].into())));
    pool.clear();
    assert!(pool.is_empty());
}

#[test]
fn slack_counts_unused_slab_bytes() {
    let now = 1_700_000_000_000;
    let mut db = filled(10_000, 0, now);
    let before = db.slack_bytes();
    // Every other key, so that no page empties (an empty page beyond the
    // spares goes back to the allocator and is no longer slack).
    let mut freed = 0;
    for i in (0..10_000).step_by(2) {
        let key = format!("k{i}");
        // Flags, key length, key, the integer's 1 or 2 bytes: below 16
        // bytes every length is its own slab class.
        freed += 2 + key.len() + if i < 128 { 1 } else { 2 };
        db.remove(key.as_bytes(), now);
    }
    // Freed slots stay in their pages but count as slack, not as used.
    assert_eq!(db.slack_bytes(), before + freed, "{} -> {}", before, db.slack_bytes());
}

/// A set or sorted set with member TTLs: due members vanish as soon as the
/// key is reached (recorded for the server), the key goes with its last
/// member, the index counts such keys, and active expiry reclaims members
/// of keys nobody reaches, telling each member's type.
#[test]
fn member_ttls_expire_on_access_and_actively() {
    use crate::types::hash::ExpireCond;
    use crate::types::set::{Set, SetConfig};
    use crate::types::zset::{ZSet, ZsetConfig};
    let (scfg, zcfg) = (SetConfig::default(), ZsetConfig::default());
    let mut db = Db::new();
    db.log_events = LOG_MEMBERS;
    let mut s = Set::new_listpack();
    for m in [&b"a"[..], b"b", b"c"] {
        s.insert(m, &scfg);
    }
    s.set_expire(b"a", 100, ExpireCond::Always, 0, &scfg);
    s.set_expire(b"b", 200, ExpireCond::Always, 0, &scfg);
    db.insert(b"s", Value::Set(Box::new(s)), Ttl::Clear, 0);
    let mut z = ZSet::new();
    z.insert(b"x", 1.0, &zcfg);
    z.set_expire(b"x", 100, ExpireCond::Always, 0);
    db.insert(b"z", Value::ZSet(Box::new(z)), Ttl::Clear, 0);
    assert_eq!(db.member_ttl, 2);
    assert_eq!(db.field_expiry_len(), 2);
    // Nothing is due at 100 (a member lives through its deadline's ms).
    assert!(matches!(db.get(b"s", 100), Some(ValueRef::Set(s)) if s.len() == 3));
    assert!(!db.has_member_expiry());
    // At 101 "a" is gone before the set is lent out.
    assert!(matches!(db.get(b"s", 101), Some(ValueRef::Set(s)) if s.len() == 2 && !s.contains(b"a")));
    let e = db.take_member_expiry();
    assert_eq!(e, vec![MemberExpiry { kind: Kind::Set, key: b"s"[..].into(), members: vec![b"a"[..].into()], deleted: false }]);
    assert_eq!(db.take_events(), vec![(KeyEvent::MembersExpired(Kind::Set), b"s"[..].into())]);
    // The sorted set's last member goes: so does the key.
    assert!(!db.contains(b"z", 101));
    let e = db.take_member_expiry();
    assert!(e[0].deleted && e[0].kind == Kind::ZSet);
    assert_eq!(db.take_events().len(), 2);
    assert_eq!((db.len(), db.member_ttl), (1, 1));
    // Active expiry, with nobody reaching the key.
    let mut got = Vec::new();
    assert_eq!(db.active_expire_members(1_000, 100, |k, key, m| got.push((k, key.to_vec(), m.to_vec()))), (1, 0));
    assert_eq!(got, vec![(Kind::Set, b"s".to_vec(), b"b".to_vec())]);
    assert_eq!((db.member_ttl, db.field_expiry_len()), (0, 0));
    assert!(matches!(db.get(b"s", 1_000), Some(ValueRef::Set(s)) if s.len() == 1));
    // Deleting a key with member TTLs leaves the index empty.
    let mut s = Set::new_listpack();
    s.insert(b"q", &scfg);
    s.set_expire(b"q", 5_000, ExpireCond::Always, 0, &scfg);
    db.insert(b"t", Value::Set(Box::new(s)), Ttl::Clear, 0);
    assert_eq!(db.member_ttl, 1);
    db.remove(b"t", 0);
    assert_eq!((db.member_ttl, db.field_expiry_len()), (0, 0));
}

fn session_value(i: u64) -> Vec<u8> {
    format!("{{\"user_id\":{},\"ts\":{},\"role\":\"u\"}}", 1_000_000 + i * 7919 % 9_000_000, 1_700_000_000 + i * 104_729 % 2_592_000).into_bytes()
}

/// With value compression on, seed 002's sessions are stored packed once
/// a table is trained, cost less than raw, and read back byte for byte
/// through every path (get, get_mut, for_each, remove, str_len, a
/// deadline rewrite, the raw mark).
#[test]
fn packed_strings_read_back_exactly() {
    let mut db = Db::new();
    db.value_compression = true;
    let key = |i: u64| format!("session:{i:040x}").into_bytes();
    for i in 0..2000 {
        db.insert(&key(i), Value::Bytes(session_value(i)), Ttl::At(1 << 50), 0);
    }
    let st = db.pack_stats();
    assert_eq!(st.tables, 1);
    assert!(st.values > 1500, "{st:?}");
    assert!(st.packed_bytes * 2 < st.raw_bytes, "{st:?}");
    let raw_cost = {
        let mut plain = Db::new();
        plain.insert(&key(5000), Value::Bytes(session_value(5000)), Ttl::At(1 << 50), 0);
        plain.mem_usage(&key(5000), 0).unwrap()
    };
    assert!(db.mem_usage(&key(1999), 0).unwrap() + 16 <= raw_cost);
    for i in 0..2000 {
        assert_eq!(db.get(&key(i), 0), Some(ValueRef::Str(StrRef::Bytes(&session_value(i)))));
        assert_eq!(db.str_len(&key(i), 0), Some(Some(session_value(i).len())));
    }
    assert_eq!(db.get_mut(&key(1990), 0), Some(ValueMut::Str(StrRef::Bytes(&session_value(1990)))));
    let mut seen = 0;
    db.for_each(|k, v, _| {
        let i = u64::from_str_radix(std::str::from_utf8(&k[8..]).unwrap(), 16).unwrap();
        assert_eq!(v, ValueRef::Str(StrRef::Bytes(&session_value(i))));
        seen += 1;
    });
    assert_eq!(seen, 2000);
    assert!(db.set_expire(&key(1998), None, 0));
    assert_eq!(db.get(&key(1998), 0), Some(ValueRef::Str(StrRef::Bytes(&session_value(1998)))));
    assert!(!db.marked_raw(&key(1997)));
    assert!(db.mark_raw(&key(1997), 0));
    assert!(db.marked_raw(&key(1997)));
    assert_eq!(db.get(&key(1997), 0), Some(ValueRef::Str(StrRef::Bytes(&session_value(1997)))));
    assert_eq!(db.incr_by(&key(1996), 1, 0), Err(IncrError::NotInt));
    assert_eq!(db.remove(&key(1995), 0), Some(Value::Bytes(session_value(1995))));
    for i in 0..2000 {
        db.remove(&key(i), 0);
    }
    let st = db.pack_stats();
    assert_eq!((st.values, st.raw_bytes, st.packed_bytes), (0, 0, 0));
}

proptest! {
    /// Random strings under random keys of a few patterns, with
    /// compression switched on and off midway: the Db matches a map.
    #[test]
    fn packed_strings_match_model(ops in prop::collection::vec((0u8..6, 0u64..40, prop::collection::vec(prop::sample::select(&b"ab{}\":,0123xyz"[..]), 0..90)), 1..600)) {
        let mut db = Db::new();
        db.value_compression = true;
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        // Enough look-alike values to train a table for pattern "p".
        for i in 0..300u64 {
            let k = format!("p:seed{i}").into_bytes();
            let v = session_value(i);
            db.insert(&k, Value::Bytes(v.clone()), Ttl::Clear, 0);
            model.insert(k, v);
        }
        for (op, k, v) in ops {
            let key = format!("{}:{k}", ["p", "q"][(k % 2) as usize]).into_bytes();
            match op {
                0 | 1 => {
                    db.insert(&key, Value::string(&v), Ttl::Keep, 0);
                    model.insert(key.clone(), v);
                }
                2 => {
                    prop_assert_eq!(db.remove(&key, 0).map(|v| match v { Value::Int(i) => i.to_string().into_bytes(), Value::Bytes(b) => b, _ => unreachable!() }), model.remove(&key));
                }
                3 => {
                    db.set_expire(&key, Some(1 << 50), 0);
                }
                4 => {
                    db.value_compression = !db.value_compression;
                }
                _ => {
                    db.mark_raw(&key, 0);
                }
            }
            let got = db.get(&key, 0).map(|v| match v { ValueRef::Str(s) => s.to_vec(), _ => unreachable!() });
            prop_assert_eq!(got.as_ref(), model.get(&key));
            prop_assert_eq!(db.str_len(&key, 0).flatten(), model.get(&key).map(Vec::len));
        }
        for (k, v) in &model {
            let got = db.get(k, 0).map(|v| match v { ValueRef::Str(s) => s.to_vec(), _ => unreachable!() });
            prop_assert_eq!(got.as_ref(), Some(v));
        }
        db.clear();
        prop_assert_eq!(db.pack_stats().values, 0);
    }
}

proptest! {
    /// Keys of hex, decimal and UUID shapes (and others) with key and
    /// value compression switched on and off: every key comes back exactly
    /// through get, scan, random_key and deletion, and lookups of keys
    /// that differ by one byte, case or a leading zero never mix them up.
    /// Integer values make blobs under 16 bytes, where decimal keys are
    /// number keys; in-place integer rewrites keep them.
    #[test]
    fn packed_keys_match_model(ops in prop::collection::vec((0u8..7, 0u32..300, 0u8..8), 1..500)) {
        let mut db = Db::new();
        db.key_compression = true;
        db.value_compression = true;
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let key_of = |n: u32, shape: u8| -> Vec<u8> {
            match shape {
                0 => format!("session:{:040x}", u128::from(n) * 0x9E37_79B9_7F4A_7C15).into_bytes(),
                1 => format!("key:{n}").into_bytes(),
                2 => format!("key:{n:06}").into_bytes(),
                6 => format!("{n}").into_bytes(),
                7 => format!("p{}:{}", n % 11, n * 1000).into_bytes(),
                3 => format!("u:{:08x}-e29b-41d4-a716-{:012x}", n, u64::from(n) * 7).into_bytes(),
                4 => format!("U:{:08X}-E29B-41D4-A716-{:012X}", n, u64::from(n) * 7).into_bytes(),
                _ => format!("user:{n}:cart").into_bytes(),
            }
        };
        for (op, n, shape) in ops {
            let key = key_of(n, shape);
            match op {
                0 => {
                    let v = session_value(u64::from(n));
                    db.insert(&key, Value::Bytes(v.clone()), if n % 3 == 0 { Ttl::At(1 << 50) } else { Ttl::Clear }, 0);
                    model.insert(key.clone(), v);
                }
                1 | 5 => {
                    let v = i64::from(n) * if op == 5 { 1 << 20 } else { -1 };
                    db.insert(&key, Value::Int(v), if n % 3 == 0 { Ttl::At(1 << 50) } else { Ttl::Clear }, 0);
                    model.insert(key.clone(), v.to_string().into_bytes());
                }
                2 => {
                    let got = db.remove(&key, 0).map(|v| match v {
                        Value::Bytes(b) => b,
                        Value::Int(i) => i.to_string().into_bytes(),
                        _ => unreachable!(),
                    });
                    prop_assert_eq!(got, model.remove(&key));
                }
                3 => {
                    db.set_expire(&key, Some(1 << 51), 0);
                }
                6 => {
                    // In place while the integer's width stays, else a new blob.
                    let by = if n % 2 == 0 { 1 } else { 1 << 30 };
                    let cur = model.get(&key).map(|v| std::str::from_utf8(v).unwrap().parse::<i64>().ok());
                    match (db.incr_by(&key, by, 0), cur) {
                        (Ok(v), Some(Some(c))) => {
                            prop_assert_eq!(v, c + by);
                            model.insert(key.clone(), v.to_string().into_bytes());
                        }
                        (Ok(v), None) => {
                            prop_assert_eq!(v, by);
                            model.insert(key.clone(), v.to_string().into_bytes());
                        }
                        (Err(_), Some(None)) => {}
                        (got, want) => prop_assert!(false, "incr {:?} with {:?}", got, want),
                    }
                }
                _ => {
                    db.key_compression = !db.key_compression;
                }
            }
            let got = db.get(&key, 0).map(|v| match v { ValueRef::Str(s) => s.to_vec(), _ => unreachable!() });
            prop_assert_eq!(got.as_ref(), model.get(&key));
        }
        let mut seen = BTreeMap::new();
        db.for_each(|k, v, _| {
            let ValueRef::Str(s) = v else { unreachable!() };
            seen.insert(k.to_vec(), s.to_vec());
        });
        prop_assert_eq!(&seen, &model);
        let mut scanned = BTreeMap::new();
        let mut cursor = 0;
        loop {
            cursor = db.scan(cursor, 50, |k, v, _| {
                let ValueRef::Str(s) = v else { unreachable!() };
                scanned.insert(k.to_vec(), s.to_vec());
            });
            if cursor == 0 {
                break;
            }
        }
        prop_assert_eq!(&scanned, &model);
        if let Some(k) = db.random_key(7) {
            prop_assert!(model.contains_key(&k[..]));
        }
        for k in model.keys() {
            prop_assert!(db.remove(k, 0).is_some());
        }
        prop_assert_eq!(db.len(), 0);
    }
}

/// Seed 002's hash per session (`HSET session:<40 hex> i <7 digits> x
/// <10 digits>` + EXPIRE) with both switches on is one 40-byte blob: flags,
/// the 22-byte packed key, a 6-byte deadline and an 11-byte hash of
/// integers; every field, the deadline and OBJECT ENCODING come back.
#[test]
fn hash_session_blob_is_40_bytes() {
    let mut db = Db::new();
    db.key_compression = true;
    db.value_compression = true;
    let cfg = crate::types::hash::HashConfig::default();
    let now = 1_764_000_000_000;
    let fields = |i: u64| (format!("{}", 1_000_000 + i * 8_999_999 % 9_000_000), format!("{}", 1_700_000_000 + i * 2_591 % 2_592_000));
    for i in 0..2_000u64 {
        let (id, ts) = fields(i);
        let mut h = Hash::new();
        h.insert(b"i", id.as_bytes(), &cfg);
        h.insert(b"x", ts.as_bytes(), &cfg);
        db.insert(&session_key(i), Value::Hash(Box::new(h)), Ttl::At(now + 2_592_000_000 + i as i64), now);
        let (_, si, pos) = db.find(&session_key(i));
        assert_eq!(db.slab.cost(addr_of(db.segs[si].slots[pos.unwrap()])), 40, "{i}");
    }
    for i in 0..2_000u64 {
        let (id, ts) = fields(i);
        assert_eq!(db.expire_of(&session_key(i), now), Some(Some(now + 2_592_000_000 + i as i64)));
        let Some(ValueRef::Hash(h)) = db.get(&session_key(i), now) else { panic!("a hash") };
        assert_eq!(h.get(b"i", now), Some(StrRef::Int(id.parse().unwrap())));
        assert_eq!(h.get(b"x", now), Some(StrRef::Int(ts.parse().unwrap())));
        assert_eq!(h.encoding_name(), "listpack");
    }
}

/// Packed keys survive table growth (splits re-hash decoded keys) and
/// cost what the design says for seed 002's sessions: 48 bytes a blob.
#[test]
fn packed_session_keys_through_splits() {
    let mut db = Db::new();
    db.key_compression = true;
    db.value_compression = true;
    let key = |i: u64| format!("session:{:040x}", u128::from(i) * 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835).into_bytes();
    for i in 0..50_000 {
        db.insert(&key(i), Value::Bytes(session_value(i)), Ttl::At(1 << 50), 0);
    }
    assert_eq!(db.len(), 50_000);
    for i in 0..50_000 {
        assert_eq!(db.get(&key(i), 0), Some(ValueRef::Str(StrRef::Bytes(&session_value(i)))), "{i}");
    }
    let total: usize = (40_000..50_000).map(|i| db.slab.cost(addr_of(db.segs[db.find(&key(i)).1].slots[db.find(&key(i)).2.unwrap()]))).sum();
    assert!(total / 10_000 <= 56, "{} bytes a blob", total / 10_000);
}

#[test]
fn lazy_flags_leave_replaced_and_expired_collections_to_the_caller() {
    use crate::types::set::{Set, SetConfig};
    let set = |m: &[u8]| {
        let mut s = Set::new();
        s.insert(m, &SetConfig::default());
        Value::Set(Box::new(s))
    };
    let mut db = Db::default();
    // Off: freed here, nothing left over.
    db.insert(b"a", set(b"1"), Ttl::Clear, 0);
    db.insert(b"a", Value::Int(1), Ttl::Clear, 0);
    assert!(!db.has_discarded());
    // lazy_server_del: an overwrite's collection is left; an expiry's is not.
    db.lazy_server_del = true;
    db.insert(b"b", set(b"2"), Ttl::At(10), 0);
    db.insert(b"b", Value::Int(1), Ttl::Clear, 0);
    db.insert(b"c", set(b"3"), Ttl::At(10), 0);
    assert!(db.get(b"c", 10).is_none());
    assert_eq!(db.take_discarded(), vec![set(b"2")]);
    // lazy_expire: expiries on access, on overwrite and by the active cycle.
    db.lazy_server_del = false;
    db.lazy_expire = true;
    db.insert(b"d", set(b"4"), Ttl::At(10), 0);
    db.insert(b"e", set(b"5"), Ttl::At(10), 0);
    db.insert(b"f", set(b"6"), Ttl::At(10), 0);
    assert!(db.get(b"d", 10).is_none());
    db.insert(b"e", Value::Int(1), Ttl::Clear, 10);
    db.active_expire(10, 100, |_| {});
    let mut left = db.take_discarded();
    left.sort_by_key(|v| format!("{v:?}"));
    assert_eq!(left, vec![set(b"4"), set(b"5"), set(b"6")]);
    assert!(!db.has_discarded());
    assert_eq!(db.len(), 3); // a, b, e
}
