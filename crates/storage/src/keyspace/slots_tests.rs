//! Tests of slot mode (slots.rs, and slot mode's directories in table.rs),
//! kept out of tests.rs because they need their own checks: every slot's
//! count and keys compared with a walk of the whole table, the two-level
//! directory's shape, and a model of which keys are stored, driven with
//! keys that crowd into few slots (hash tags). Also the memory budgets:
//! slot mode within 2 bytes a key of standalone, and a hot slot's
//! directory small.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;

use super::table::SLOT_BITS;
use super::*;
use crate::eviction::Rank;
use crate::slot::{key_hash_slot, SLOTS};
use crate::types::hash::{Hash, HashConfig};
use crate::types::set::{Set, SetConfig};

/// Every stored key (live or not yet reclaimed) by slot, from a walk of
/// the whole table.
fn by_slot(db: &Db) -> BTreeMap<u16, BTreeSet<Vec<u8>>> {
    let mut out: BTreeMap<u16, BTreeSet<Vec<u8>>> = BTreeMap::new();
    db.for_each(|k, _, _| {
        assert!(out.entry(key_hash_slot(k)).or_default().insert(k.to_vec()), "for_each gave a key twice");
    });
    out
}

/// The slot index against a brute-force walk: every slot's count, the
/// nonzero list, each used slot's keys (all, none, and a limit), and the
/// directories' shape.
fn check_slots(db: &Db) {
    assert!(db.slots_enabled());
    let want = by_slot(db);
    for slot in 0..SLOTS as u16 {
        assert_eq!(db.count_keys_in_slot(slot), want.get(&slot).map_or(0, |k| k.len() as u64), "slot {slot}");
    }
    let nonzero: Vec<(u16, u64)> = db.slot_counts_nonzero().collect();
    assert_eq!(nonzero, want.iter().map(|(&s, k)| (s, k.len() as u64)).collect::<Vec<_>>());
    for (&slot, keys) in &want {
        let got = db.keys_in_slot(slot, usize::MAX);
        assert_eq!(got.len(), keys.len(), "slot {slot}: no key twice");
        assert_eq!(&got.into_iter().collect::<BTreeSet<_>>(), keys, "slot {slot}");
        assert_eq!(db.keys_in_slot(slot, 0), Vec::<Vec<u8>>::new());
        let some = db.keys_in_slot(slot, 3);
        assert_eq!(some.len(), keys.len().min(3));
        assert!(some.iter().all(|k| keys.contains(k)));
    }
    check_dirs(db);
}

/// The two-level directory is consistent: the top level is at most one
/// entry per slot (depth 14); a segment of depth d owns an aligned run of
/// 2^(depth-d) entries; a slot's own directory (only at depth 14) is
/// reached from its one entry and its segments (deeper than 14) own
/// aligned runs in it; each segment is reached from exactly one run, and
/// holds only keys it is found by.
fn check_dirs(db: &Db) {
    let ix = db.slot_index.as_deref().expect("slot mode");
    assert!(db.depth <= SLOT_BITS);
    assert_eq!(db.dir.len(), 1 << db.depth);
    let mut seen = vec![0u32; db.segs.len()];
    let mut subs_seen = vec![false; ix.subs.len()];
    let mut i = 0;
    while i < db.dir.len() {
        let e = db.dir[i];
        if e & SUB != 0 {
            assert_eq!(db.depth, SLOT_BITS, "slot directories only under one entry a slot");
            let k = (e & !SUB) as usize;
            assert!(!subs_seen[k], "one directory per slot");
            subs_seen[k] = true;
            let sub = &ix.subs[k];
            assert_eq!(sub.dir.len(), 1 << sub.depth);
            let mut j = 0;
            while j < sub.dir.len() {
                let seg = &db.segs[sub.dir[j] as usize];
                let local = seg.depth as u32 - SLOT_BITS;
                assert!(local >= 1 && local <= sub.depth, "depth {} under slot {i}", seg.depth);
                let span = 1usize << (sub.depth - local);
                assert_eq!(j % span, 0);
                assert!(sub.dir[j..j + span].iter().all(|&x| x == sub.dir[j]));
                seen[sub.dir[j] as usize] += 1;
                j += span;
            }
            i += 1;
        } else {
            let seg = &db.segs[e as usize];
            assert!(seg.depth as u32 <= db.depth);
            let span = 1usize << (db.depth - seg.depth as u32);
            assert_eq!(i % span, 0);
            assert!(db.dir[i..i + span].iter().all(|&x| x == e));
            seen[e as usize] += 1;
            i += span;
        }
    }
    assert!(subs_seen.iter().all(|&s| s), "every slot directory is in use");
    assert!(seen.iter().all(|&n| n == 1), "each segment reached from one run");
    for (si, seg) in db.segs.iter().enumerate() {
        for &s in seg.slots.iter().filter(|&&s| s != 0) {
            let key = db.blob(s).key;
            assert_eq!(db.seg_of(db.key_hash(key)), si);
            assert_eq!(db.find(key).2.map(|p| seg.slots[p]), Some(s));
        }
    }
}

/// A key under one of a few hash tags, or a plain key.
fn tagged(tag: u64, n: u64) -> Vec<u8> {
    format!("{{t{tag}}}:{n}").into_bytes()
}

fn plain(n: u64) -> Vec<u8> {
    format!("key:{n}").into_bytes()
}

#[test]
fn standalone_has_no_index_and_slot_mode_sticks() {
    let db = Db::new();
    assert!(!db.slots_enabled());
    assert!(!db.empty_like().slots_enabled());
    let mut db = Db::with_slots();
    assert!(db.slots_enabled());
    db.insert(b"foo", Value::Int(1), Ttl::Clear, 0);
    assert_eq!(db.count_keys_in_slot(12182), 1, "foo is in slot 12182");
    assert_eq!(db.keys_in_slot(12182, 10), vec![b"foo".to_vec()]);
    db.clear();
    assert!(db.slots_enabled() && db.is_empty());
    assert_eq!(db.count_keys_in_slot(12182), 0);
    db.insert(b"foo", Value::Int(1), Ttl::Clear, 0);
    let old = db.detach().expect("no snapshot: the old table comes back");
    assert!(old.slots_enabled() && db.slots_enabled());
    assert_eq!((old.count_keys_in_slot(12182), db.count_keys_in_slot(12182)), (1, 0));
    assert!(db.empty_like().slots_enabled());
    // A used but emptied standalone Db may turn to slot mode; its old
    // segments go.
    let mut db = Db::new();
    for i in 0..5_000 {
        db.insert(&plain(i), Value::Int(1), Ttl::Clear, 0);
    }
    for i in 0..5_000 {
        db.remove(&plain(i), 0);
    }
    db.access = Access::Lrm;
    db.enable_slots();
    assert_eq!((db.segs.len(), db.access), (1, Access::Lrm));
    db.insert(&plain(1), Value::Int(1), Ttl::Clear, 0);
    check_slots(&db);
}

#[test]
#[should_panic(expected = "enable_slots")]
fn enable_slots_refuses_a_db_with_keys() {
    let mut db = Db::new();
    db.insert(b"a", Value::Int(1), Ttl::Clear, 0);
    db.enable_slots();
}

#[test]
#[should_panic(expected = "standalone")]
fn slot_calls_on_a_standalone_db_panic() {
    Db::new().count_keys_in_slot(0);
}

/// Every path that adds or removes a key keeps the counts exact.
#[test]
fn counts_follow_every_path() {
    let (hcfg, scfg) = (HashConfig::default(), SetConfig::default());
    let mut db = Db::with_slots();
    // Writes: new keys (a few tags and plain ones), some with deadlines.
    for i in 0..6_000u64 {
        let key = if i % 3 == 0 { tagged(i % 5, i) } else { plain(i) };
        let ttl = if i % 4 == 0 { Ttl::At(1_000 + i as i64) } else { Ttl::Clear };
        db.insert(&key, Value::Int(i as i64), ttl, 0);
    }
    assert_eq!(db.len(), 6_000);
    check_slots(&db);
    // Overwrites do not count twice; INCRBY and get_or_insert_with create.
    for i in 0..1_000u64 {
        assert!(db.insert(&plain(3 * i + 1), Value::Bytes(vec![b'x'; 30]), Ttl::Keep, 0));
    }
    db.incr_by(b"{t1}:counter", 5, 0).expect("new counter");
    db.get_or_insert_with(b"{t2}:made", 0, || Value::Int(0));
    check_slots(&db);
    // DEL, and RENAME (remove + insert) across slots.
    for i in (0..6_000u64).step_by(7) {
        let key = if i % 3 == 0 { tagged(i % 5, i) } else { plain(i) };
        db.remove(&key, 0);
    }
    for i in (1..6_000u64).step_by(11) {
        let key = plain(i);
        if let (Some(d), Some(v)) = (db.expire_of(&key, 0), db.remove(&key, 0)) {
            db.insert(&tagged(9, i), v, d.map_or(Ttl::Clear, Ttl::At), 0);
        }
    }
    check_slots(&db);
    // RESTORE of collections, an inline hash emptied in place, a set
    // emptied in place.
    let mut h = Hash::new();
    h.insert(b"f", b"v", &hcfg);
    db.insert(b"{t3}:h", Value::Hash(Box::new(h)), Ttl::Clear, 0);
    let mut s = Set::new();
    for m in 0..300 {
        s.insert(format!("m{m}").as_bytes(), &scfg);
    }
    db.insert(b"{t3}:s", Value::Set(Box::new(s)), Ttl::Clear, 0);
    check_slots(&db);
    let Some(ValueMut::Hash(h)) = db.get_mut(b"{t3}:h", 0) else { panic!("a hash") };
    h.remove(b"f");
    assert!(db.sync_object(b"{t3}:h"));
    let Some(ValueMut::Set(s)) = db.get_mut(b"{t3}:s", 0) else { panic!("a set") };
    for m in 0..300 {
        s.remove(format!("m{m}").as_bytes());
    }
    assert!(db.sync_object(b"{t3}:s"));
    check_slots(&db);
    // Due keys count until reclaimed (as Redis's COUNTKEYSINSLOT), then
    // not: lazily on access, and actively.
    let before = db.len();
    for i in (0..3_000u64).step_by(4) {
        db.get(&plain(i), 10_000);
    }
    assert!(db.len() < before);
    check_slots(&db);
    while db.active_expire(10_000, 500, |_| {}).0 > 0 {}
    assert_eq!(db.volatile_len(), 0);
    check_slots(&db);
    // Eviction: the server samples, then deletes.
    let mut victims = Vec::new();
    for _ in 0..50 {
        db.sample(5, false, Rank::Random, 10_000, |k, _| victims.push(k.to_vec()));
    }
    assert!(victims.len() >= 200);
    for k in &victims {
        db.remove(k, 10_000);
    }
    check_slots(&db);
    // FLUSHDB.
    db.clear();
    check_slots(&db);
    assert_eq!(db.slot_counts_nonzero().count(), 0);
}

/// GETKEYSINSLOT then DEL, as a node empties a slot it lost: each call
/// gives the next keys, up to the count, until the slot is empty, and no
/// other slot changes.
#[test]
fn keys_in_slot_drains_a_slot() {
    let mut db = Db::with_slots();
    for i in 0..5_000u64 {
        db.insert(&tagged(0, i), Value::Int(1), Ttl::Clear, 0);
        db.insert(&plain(i), Value::Int(1), Ttl::Clear, 0);
    }
    let slot = key_hash_slot(&tagged(0, 0));
    assert_eq!(db.count_keys_in_slot(slot), 5_000 + (0..5_000).filter(|&i| key_hash_slot(&plain(i)) == slot).count() as u64);
    assert!(!db.slot_index.as_ref().expect("slot mode").subs.is_empty(), "5,000 keys in a slot: it has its own directory");
    check_slots(&db);
    let others: Vec<(u16, u64)> = db.slot_counts_nonzero().filter(|&(s, _)| s != slot).collect();
    let mut gone = BTreeSet::new();
    loop {
        let left = db.count_keys_in_slot(slot) as usize;
        let keys = db.keys_in_slot(slot, 100);
        assert_eq!(keys.len(), left.min(100));
        if keys.is_empty() {
            break;
        }
        for k in keys {
            assert_eq!(key_hash_slot(&k), slot);
            assert!(db.remove(&k, 0).is_some());
            assert!(gone.insert(k));
        }
    }
    assert!(gone.len() >= 5_000);
    assert_eq!(db.slot_counts_nonzero().collect::<Vec<_>>(), others);
    check_slots(&db);
}

/// A hot slot (every key under one hash tag) deepens only its own
/// directory: with one global depth, a million keys in a slot would have
/// made the directory 2^24 entries (64 MiB).
#[test]
fn hot_slot_keeps_the_directory_small() {
    const N: u64 = 1_000_000;
    let mut db = Db::with_slots();
    for i in 0..N {
        db.insert(format!("{{user1}}:{i}").as_bytes(), Value::Int(i as i64), Ttl::Clear, 0);
    }
    let slot = key_hash_slot(b"user1");
    assert_eq!(db.count_keys_in_slot(slot), N);
    let ix = db.slot_index.as_deref().expect("slot mode");
    let top = crate::slab::jemalloc_size(db.dir.capacity() * 4);
    let subs = db.slot_index_bytes() - crate::slab::jemalloc_size(SLOTS * 4) - crate::slab::jemalloc_size(size_of::<SlotIndex>());
    let depth = ix.subs.iter().map(|s| s.depth).max().unwrap_or(0);
    eprintln!(
        "hot slot, {N} keys: {} segments; top directory {top} B, slot directories {subs} B (depth {depth}); flat, it would be 2^{} entries",
        db.segs.len(),
        SLOT_BITS + depth
    );
    assert_eq!(ix.subs.len(), 1);
    assert_eq!(top, 64 * 1024);
    // ~550 segments of ~1,800 keys: 2^10 entries, 2^11 at worst.
    assert!(subs <= 8 * 1024 + 64, "slot directory {subs} B");
    assert_eq!(db.keys_in_slot(slot, 10).len(), 10);
    assert_eq!(db.keys_in_slot(slot, 5_000).len(), 5_000);
    for i in (0..N).step_by(997) {
        assert!(db.contains(format!("{{user1}}:{i}").as_bytes(), 0));
    }
    // Sampling finds the keys although nearly all of hash space is empty.
    let mut n = 0;
    assert_eq!(db.sample(16, false, Rank::Random, 0, |_, _| n += 1), 16);
    assert!(db.random_key(7).is_some());
}

/// Bytes a key, from `Db::allocated_bytes` (all of the Db, its empty
/// table included), for `n` keys `key:<i>` with small integer values.
fn bytes_per_key(mut db: Db, n: u64) -> f64 {
    for i in 0..n {
        db.insert(&plain(i), Value::Int(i as i64), Ttl::Clear, 0);
    }
    db.allocated_bytes() as f64 / n as f64
}

/// Slot mode costs at most 2 bytes a key over standalone: nothing is
/// stored per key; the difference is the 64 KiB of counts, and a table
/// whose segments split at slot boundaries.
#[test]
fn slot_mode_costs_at_most_two_bytes_a_key() {
    const N: u64 = 1_000_000;
    let standalone = bytes_per_key(Db::new(), N);
    let slots = bytes_per_key(Db::with_slots(), N);
    let fixed = Db::with_slots().allocated_bytes() - Db::new().allocated_bytes();
    eprintln!("bytes per key, {N} keys key:<n>: standalone {standalone:.2}, slot mode {slots:.2} ({:+.2}); an empty slot-mode Db holds {fixed} B more", slots - standalone);
    assert!(slots - standalone <= 2.0, "standalone {standalone}, slot mode {slots}");
}

/// `reserve` in slot mode makes the segments (at most one per slot) but
/// does not size them, and keys land without splits.
#[test]
fn reserve_in_slot_mode_presizes_the_directory_only() {
    let mut db = Db::with_slots();
    let empty = db.allocated_bytes();
    db.reserve(100_000);
    assert_eq!(db.segs.len(), 64);
    assert!(db.allocated_bytes() - empty < 16 * 1024, "unsized segments: {} B", db.allocated_bytes() - empty);
    check_dirs(&db);
    for i in 0..100_000 {
        db.insert(&plain(i), Value::Int(7), Ttl::Clear, 0);
    }
    assert!(db.segs.len() <= 80, "few splits, if any: {}", db.segs.len());
    check_slots(&db);
    let mut big = Db::with_slots();
    big.reserve(1 << 30);
    assert_eq!(big.segs.len(), SLOTS, "no deeper than one segment per slot");
    check_dirs(&big);
}

/// SCAN over a slot-mode table with a hot slot, under churn that splits
/// the hot slot's segments: keys present throughout are seen exactly once
/// (the cursor only moves up in hash order, whichever directory holds it).
#[test]
fn scan_in_slot_mode_sees_stable_keys_once_under_churn() {
    let mut db = Db::with_slots();
    for i in 0..4_000u64 {
        db.insert(&tagged(1, i), Value::Int(0), Ttl::Clear, 0);
        db.insert(&plain(i), Value::Int(0), Ttl::Clear, 0);
    }
    let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
    let (mut cursor, mut next) = (0, 0u64);
    loop {
        cursor = db.scan(cursor, 20, |k, _, _| *seen.entry(k.to_vec()).or_default() += 1);
        for _ in 0..40 {
            db.insert(format!("{{t1}}:new{next}").as_bytes(), Value::Int(1), Ttl::Clear, 0);
            next += 1;
        }
        db.remove(format!("{{t1}}:new{}", next / 2).as_bytes(), 0);
        if cursor == 0 {
            break;
        }
    }
    let depth = db.slot_index.as_deref().expect("slot mode").subs.iter().map(|s| s.depth).max();
    assert!(depth >= Some(2), "the hot slot's directory grew during the scan: {depth:?}");
    for i in 0..4_000u64 {
        assert_eq!(seen.get(&tagged(1, i)), Some(&1));
        assert_eq!(seen.get(&plain(i)), Some(&1));
    }
    assert!(seen.values().all(|&n| n == 1));
    check_slots(&db);
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u16, Option<i64>),
    Remove(u16),
    Get(u16),
    SetExpire(u16, Option<i64>),
    Rename(u16, u16),
    Active(usize),
    Tick(i64),
    Clear,
}

/// Keys crowd into few slots: most are under one of four hash tags, one
/// of which (`{hot}`) is prefilled with enough keys for its own
/// directory.
fn okey(k: u16) -> Vec<u8> {
    match k % 8 {
        0..=2 => format!("{{hot}}:{k}").into_bytes(),
        3 => format!("{{a}}:{k}").into_bytes(),
        4 => format!("{{b}}:{k}").into_bytes(),
        5 => format!("x{{c}}{k}").into_bytes(),
        _ => format!("k{k}").into_bytes(),
    }
}

fn sop() -> impl Strategy<Value = Op> {
    let k = 0u16..600;
    prop_oneof![
        25 => (k.clone(), proptest::option::of(0i64..100)).prop_map(|(k, t)| Op::Insert(k, t)),
        10 => k.clone().prop_map(Op::Remove),
        10 => k.clone().prop_map(Op::Get),
        5 => (k.clone(), proptest::option::of(0i64..100)).prop_map(|(k, t)| Op::SetExpire(k, t)),
        5 => (k.clone(), k).prop_map(|(a, b)| Op::Rename(a, b)),
        5 => (1usize..40).prop_map(Op::Active),
        5 => (0i64..30).prop_map(Op::Tick),
        1 => Just(Op::Clear),
    ]
}

/// Keys of the prefilled hot slot, beyond those the ops touch.
const HOT: u64 = 3_000;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A slot-mode Db and a model (stored key -> (slot, deadline)) given
    /// the same random writes, deletes, renames and expiry, lazy and
    /// active, with keys crowding into a few slots: after each op the
    /// slots it touched have the model's count and keys; at the end every
    /// slot does, and a full SCAN gives every stored key exactly once.
    #[test]
    fn slot_index_matches_model(ops in proptest::collection::vec(sop(), 1..400), prefill in any::<bool>()) {
        let mut db = Db::with_slots();
        let mut model: HashMap<Vec<u8>, (u16, Option<i64>)> = HashMap::new();
        if prefill {
            for i in 0..HOT {
                let key = format!("{{hot}}:pre{i}").into_bytes();
                db.insert(&key, Value::Int(1), Ttl::Clear, 0);
                model.insert(key, (key_hash_slot(b"hot"), None));
            }
        }
        let mut now = 0i64;
        for op in ops {
            // Reaching a due key reclaims it (lazy expiry): the model too.
            let reach = |model: &mut HashMap<Vec<u8>, (u16, Option<i64>)>, key: &[u8]| {
                if matches!(model.get(key), Some((_, Some(t))) if *t <= now) {
                    model.remove(key);
                }
            };
            let mut touched = Vec::new();
            match op {
                Op::Insert(k, t) => {
                    let key = okey(k);
                    reach(&mut model, &key);
                    let d = t.map(|t| now + t);
                    prop_assert_eq!(db.insert(&key, Value::Int(1), d.map_or(Ttl::Clear, Ttl::At), now), model.contains_key(&key));
                    model.insert(key.clone(), (key_hash_slot(&key), d));
                    touched.push(key);
                }
                Op::Remove(k) => {
                    let key = okey(k);
                    reach(&mut model, &key);
                    prop_assert_eq!(db.remove(&key, now).is_some(), model.remove(&key).is_some());
                    touched.push(key);
                }
                Op::Get(k) => {
                    let key = okey(k);
                    reach(&mut model, &key);
                    prop_assert_eq!(db.get(&key, now).is_some(), model.contains_key(&key));
                    touched.push(key);
                }
                Op::SetExpire(k, t) => {
                    let key = okey(k);
                    reach(&mut model, &key);
                    let d = t.map(|t| now + t);
                    prop_assert_eq!(db.set_expire(&key, d, now), model.contains_key(&key));
                    if let Some(e) = model.get_mut(&key) {
                        e.1 = d;
                    }
                    touched.push(key);
                }
                Op::Rename(a, b) => {
                    // As RENAME does it: the source is looked up, and the
                    // destination reached only if the source is live.
                    let (src, dst) = (okey(a), okey(b));
                    reach(&mut model, &src);
                    let found = db.expire_of(&src, now);
                    prop_assert_eq!(found.is_some(), model.contains_key(&src));
                    if let Some(d) = found.filter(|_| src != dst) {
                        let v = db.remove(&src, now).expect("live");
                        reach(&mut model, &dst);
                        db.insert(&dst, v, d.map_or(Ttl::Clear, Ttl::At), now);
                        model.remove(&src);
                        model.insert(dst.clone(), (key_hash_slot(&dst), d));
                    }
                    touched.push(src);
                    touched.push(dst);
                }
                Op::Active(n) => {
                    let mut gone = Vec::new();
                    db.active_expire(now, n, |k| gone.push(k.to_vec()));
                    for k in gone {
                        let e = model.remove(&k);
                        prop_assert!(matches!(e, Some((_, Some(t))) if t <= now), "expired a live key");
                        touched.push(k);
                    }
                }
                Op::Tick(dt) => now += dt,
                Op::Clear => {
                    db.clear();
                    model.clear();
                }
            }
            prop_assert_eq!(db.len(), model.len());
            for key in touched {
                let slot = key_hash_slot(&key);
                let want: BTreeSet<Vec<u8>> = model.iter().filter(|(_, e)| e.0 == slot).map(|(k, _)| k.clone()).collect();
                prop_assert_eq!(db.count_keys_in_slot(slot), want.len() as u64);
                let got: BTreeSet<Vec<u8>> = db.keys_in_slot(slot, usize::MAX).into_iter().collect();
                prop_assert_eq!(got, want);
            }
        }
        let mut counts: BTreeMap<u16, u64> = BTreeMap::new();
        for (slot, _) in model.values() {
            *counts.entry(*slot).or_default() += 1;
        }
        prop_assert_eq!(db.slot_counts_nonzero().collect::<BTreeMap<_, _>>(), counts);
        check_slots(&db);
        let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut cursor = 0;
        loop {
            cursor = db.scan(cursor, 17, |k, _, _| *seen.entry(k.to_vec()).or_default() += 1);
            if cursor == 0 {
                break;
            }
        }
        prop_assert_eq!(seen.len(), model.len());
        prop_assert!(seen.values().all(|&n| n == 1), "a key seen twice");
        prop_assert!(model.keys().all(|k| seen.contains_key(k)));
    }
}

/// CPU time this thread has used, in seconds (from /proc: 10 ms ticks),
/// so that time other processes take on a shared machine is not counted.
fn thread_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("Linux /proc");
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the line.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    ticks as f64 / 100.0
}

/// Nanoseconds of thread CPU time per call of `f(db, i)` for `i` in
/// `0..n`, on a Db made by `setup`.
fn ns_per_op(n: u64, setup: impl Fn() -> Db, mut f: impl FnMut(&mut Db, u64)) -> f64 {
    let mut db = setup();
    let t = thread_cpu_secs();
    for i in 0..n {
        f(&mut db, i);
    }
    (thread_cpu_secs() - t) * 1e9 / n as f64
}

/// What slot mode costs beside standalone: bytes a key at several sizes,
/// and the time of the hot paths, keys spread over slots and all in one
/// (thread CPU time, the best of 5 rounds that alternate the modes).
/// Run in release:
/// `cargo test -p storage --release slot_mode_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn slot_mode_cost() {
    for n in [100_000u64, 300_000, 1_000_000, 3_000_000] {
        let a = bytes_per_key(Db::new(), n);
        let b = bytes_per_key(Db::with_slots(), n);
        eprintln!("{n:>9} keys key:<n>: standalone {a:.2} B/key, slot mode {b:.2} ({:+.2})", b - a);
    }
    const N: u64 = 1_000_000;
    let spread: Vec<Vec<u8>> = (0..N).map(plain).collect();
    let hot: Vec<Vec<u8>> = (0..N).map(|i| format!("{{user1}}:{i}").into_bytes()).collect();
    let absent: Vec<Vec<u8>> = (0..N).map(|i| format!("absent:{i}").into_bytes()).collect();
    let t = thread_cpu_secs();
    let mut x = 0u64;
    for _ in 0..10 {
        for k in &spread {
            x ^= crate::segment::hash(k);
        }
    }
    let plain_hash = (thread_cpu_secs() - t) * 1e9 / (10 * N) as f64;
    let t = thread_cpu_secs();
    for _ in 0..10 {
        for k in &spread {
            x ^= super::table::slot_hash(k);
        }
    }
    eprintln!("hash of key:<n>: {plain_hash:.1} ns, slot_hash {:.1} ns ({x:x})", (thread_cpu_secs() - t) * 1e9 / (10 * N) as f64);
    let filled = |slots: bool, keys: &[Vec<u8>]| {
        let mut db = if slots { Db::with_slots() } else { Db::new() };
        for (i, k) in keys.iter().enumerate() {
            db.insert(k, Value::Int(i as i64), Ttl::Clear, 0);
        }
        db
    };
    let modes: [(&str, bool, &[Vec<u8>]); 3] = [("standalone", false, &spread), ("slot mode", true, &spread), ("slot mode, one hot slot", true, &hot)];
    let mut best = [[f64::MAX; 4]; 3];
    for _ in 0..5 {
        for (m, &(_, slots, keys)) in modes.iter().enumerate() {
            let new = || if slots { Db::with_slots() } else { Db::new() };
            let row = [
                ns_per_op(N, new, |db, i| {
                    db.insert(&keys[i as usize], Value::Int(i as i64), Ttl::Clear, 0);
                }),
                ns_per_op(N, || filled(slots, keys), |db, i| {
                    db.get(&keys[(i * 7919 % N) as usize], 0).expect("present");
                }),
                ns_per_op(N, || filled(slots, keys), |db, i| {
                    assert!(db.get(&absent[i as usize], 0).is_none());
                }),
                ns_per_op(N, || filled(slots, keys), |db, i| {
                    db.remove(&keys[(i * 7919 % N) as usize], 0).expect("present");
                }),
            ];
            for (b, v) in best[m].iter_mut().zip(row) {
                *b = b.min(v);
            }
        }
    }
    for (m, (name, _, _)) in modes.iter().enumerate() {
        let [insert, get, miss, remove] = best[m];
        eprintln!("{name:>24}: insert {insert:.0} ns, get {get:.0} ns, miss {miss:.0} ns, remove {remove:.0} ns");
    }
    let db = filled(true, &spread);
    let t = thread_cpu_secs();
    let mut got = 0;
    for _ in 0..10 {
        for slot in 0..SLOTS as u16 {
            got += db.keys_in_slot(slot, 10).len();
        }
    }
    eprintln!("keys_in_slot(slot, 10) over every slot, {N} keys spread: {:.0} ns a call ({got} keys)", (thread_cpu_secs() - t) * 1e9 / (10 * SLOTS) as f64);
}
