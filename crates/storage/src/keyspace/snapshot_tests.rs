//! Tests of snapshots (snapshot.rs), kept out of tests.rs because they
//! need their own model: the image a snapshot emits is compared with a
//! copy of the Db taken when it began, while a twin Db without snapshots
//! checks that taking one never changes what the Db does. Also the cost
//! probe `write_paths_cost` (ignored; run it by name with `--ignored
//! --nocapture` in release) that times the write paths the snapshot hooks
//! sit on, to compare builds with and without the hooks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use proptest::prelude::*;

use super::*;
use crate::types::hash::{ExpireCond, Hash, HashConfig};
use crate::types::set::{Set, SetConfig};

/// The image as the tests compare it: key -> (value, deadline).
type Image = BTreeMap<Vec<u8>, (Value, Option<i64>)>;

/// The Db's content now, every stored key (as a snapshot sees it).
fn content(db: &Db) -> Image {
    let mut out = Image::new();
    db.for_each(|k, v, d| {
        assert!(out.insert(k.to_vec(), (v.to_owned(), d)).is_none(), "for_each gave a key twice");
    });
    out
}

/// What a sink received: (key, value, deadline) in arrival order.
type Received = Arc<Mutex<Vec<(Vec<u8>, Value, Option<i64>)>>>;

/// A sink that keeps a copy of everything it is given (for the model
/// checks; `CountSink` for the memory ones).
#[derive(Default, Clone)]
struct CollectSink(Received);

impl SnapshotSink for CollectSink {
    fn entry(&mut self, key: &[u8], value: ValueRef<'_>, expire_at_ms: Option<i64>) {
        self.0.lock().expect("not poisoned").push((key.to_vec(), value.to_owned(), expire_at_ms));
    }
}

impl CollectSink {
    /// What was given, as an image; panics if a key came twice.
    fn image(&self) -> Image {
        let mut out = Image::new();
        for (k, v, d) in self.0.lock().expect("not poisoned").iter() {
            assert!(out.insert(k.clone(), (v.clone(), *d)).is_none(), "key {:?} given twice", String::from_utf8_lossy(k));
        }
        out
    }

    fn len(&self) -> usize {
        self.0.lock().expect("not poisoned").len()
    }
}

/// A sink that only counts.
#[derive(Default, Clone)]
struct CountSink(Arc<AtomicUsize>);

impl SnapshotSink for CountSink {
    fn entry(&mut self, _key: &[u8], _value: ValueRef<'_>, _expire_at_ms: Option<i64>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Steps `db`'s snapshot to the end; returns the number of steps.
fn finish(db: &mut Db, max: usize) -> usize {
    let mut steps = 1;
    while !db.snapshot_step(max) {
        steps += 1;
    }
    assert!(db.snapshot_end().is_some(), "a complete snapshot ends");
    steps
}

/// Compares two images with a readable message on the first difference.
fn assert_images_eq(got: &Image, want: &Image) {
    for (k, v) in want {
        assert_eq!(got.get(k), Some(v), "key {:?}", String::from_utf8_lossy(k));
    }
    for k in got.keys() {
        assert!(want.contains_key(k), "extra key {:?}", String::from_utf8_lossy(k));
    }
}

/// Nanoseconds per call of `f(db, i)` for `i` in `0..n`, best of `rounds`,
/// each round on a Db made by `setup`.
fn time_per_op(rounds: usize, n: u64, setup: impl Fn() -> Db, mut f: impl FnMut(&mut Db, u64)) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let mut db = setup();
        let t = Instant::now();
        for i in 0..n {
            f(&mut db, i);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

fn bench_key(i: u64) -> Vec<u8> {
    format!("key:{i:08}").into_bytes()
}

/// Times the write paths the snapshot hooks sit on, with no snapshot
/// running. Run before and after a change to the hooks:
/// `cargo test -p storage --release write_paths_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a timing probe, not a check"]
fn write_paths_cost() {
    const N: u64 = 400_000;
    let cfg = HashConfig::default();
    let filled = || {
        let mut db = Db::new();
        for i in 0..N {
            db.insert(&bench_key(i), Value::Int(i as i64), Ttl::Clear, 0);
        }
        db
    };
    let keys: Vec<Vec<u8>> = (0..N).map(bench_key).collect();
    let mut rows = Vec::new();
    rows.push(("insert new", time_per_op(5, N, Db::new, |db, i| {
        db.insert(&keys[i as usize], Value::Int(i as i64), Ttl::Clear, 0);
    })));
    rows.push(("insert overwrite", time_per_op(5, N, filled, |db, i| {
        db.insert(&keys[i as usize], Value::Int(-(i as i64)), Ttl::Keep, 0);
    })));
    rows.push(("incr_by", time_per_op(5, N, filled, |db, i| {
        db.incr_by(&keys[i as usize], 1, 0).expect("an integer");
    })));
    rows.push(("set_expire", time_per_op(5, N, filled, |db, i| {
        db.set_expire(&keys[i as usize], Some(1 << 40), 0);
    })));
    rows.push(("get", time_per_op(5, N, filled, |db, i| {
        db.get(&keys[i as usize], 0).expect("present");
    })));
    rows.push(("hash field set + sync", time_per_op(5, N, Db::new, |db, i| {
        let k = &keys[(i % 50_000) as usize];
        match db.get_or_insert_with(k, 0, || Value::Hash(Box::default())) {
            ValueMut::Hash(h) => {
                h.insert(&i.to_le_bytes()[..1], b"v", &cfg);
            }
            _ => unreachable!("a hash"),
        }
        db.sync_object(k);
    })));
    rows.push(("remove", time_per_op(5, N, filled, |db, i| {
        db.remove(&keys[i as usize], 0).expect("present");
    })));
    for (name, ns) in rows {
        eprintln!("{name:>24}: {ns:7.1} ns/op");
    }
}

/// Keys the model ops use: `PREFILL` written before the ops start (enough
/// for several segments, so pending and serialized ones mix), the rest
/// new, so inserts split segments during snapshots.
const PREFILL: u16 = 5_000;
const KEYS: u16 = 6_000;

fn mkey(k: u16, slots: bool) -> Vec<u8> {
    // Some long keys, for large blobs. In slot mode half the keys share a
    // hash tag: a hot slot, whose segments split under its own directory.
    if k.is_multiple_of(97) {
        format!("{k:0>300}").into_bytes()
    } else if slots && k.is_multiple_of(2) {
        format!("{{hot}}k{k}").into_bytes()
    } else {
        format!("k{k}").into_bytes()
    }
}

/// A value of each shape the keyspace stores differently: integer and
/// byte strings, inline and object-table hashes (with field TTLs), small
/// and large sets.
fn mvalue(kind: u8, v: i64, now: i64) -> Value {
    let hcfg = HashConfig::default();
    let scfg = SetConfig::default();
    match kind % 6 {
        0 => Value::Int(v),
        1 => Value::Bytes(vec![b'b'; (v.unsigned_abs() % 200) as usize]),
        2 | 3 => {
            let long = kind % 6 == 3;
            let mut h = Hash::new();
            for f in 0..1 + v.unsigned_abs() % 4 {
                let val = if long { vec![b'h'; 70] } else { vec![b'h'; 3] };
                h.insert(&f.to_le_bytes()[..1], &val, &hcfg);
                if f % 2 == 1 {
                    h.set_expire(&f.to_le_bytes()[..1], now + v.rem_euclid(40), ExpireCond::Always, now);
                }
            }
            Value::Hash(Box::new(h))
        }
        4 | 5 => {
            let mut s = Set::new();
            let n = if kind % 6 == 5 { 200 } else { 1 + v.unsigned_abs() % 10 };
            for m in 0..n {
                s.insert(format!("m{m}").as_bytes(), &scfg);
            }
            Value::Set(Box::new(s))
        }
        _ => unreachable!("kind % 6"),
    }
}

#[derive(Debug, Clone)]
enum SOp {
    Set(u16, u8, i64, Option<i64>),
    Del(u16),
    Incr(u16),
    Expire(u16, Option<i64>),
    Get(u16),
    HashEdit(u16, u8, u8),
    SetEdit(u16, u8, bool),
    Active(usize),
    ActiveFields(usize),
    Tick(i64),
    Clear,
    Begin,
    Step(usize),
    End,
    Abort,
}

fn sop() -> impl Strategy<Value = SOp> {
    let k = 0..KEYS;
    prop_oneof![
        6 => (k.clone(), any::<u8>(), -1000i64..1000, proptest::option::of(0i64..300)).prop_map(|(k, t, v, d)| SOp::Set(k, t, v, d)),
        2 => k.clone().prop_map(SOp::Del),
        2 => k.clone().prop_map(SOp::Incr),
        2 => (k.clone(), proptest::option::of(0i64..300)).prop_map(|(k, d)| SOp::Expire(k, d)),
        2 => k.clone().prop_map(SOp::Get),
        3 => (k.clone(), 0u8..6, 0u8..3).prop_map(|(k, f, a)| SOp::HashEdit(k, f, a)),
        2 => (k, 0u8..12, any::<bool>()).prop_map(|(k, m, add)| SOp::SetEdit(k, m, add)),
        1 => (1usize..200).prop_map(SOp::Active),
        1 => (1usize..50).prop_map(SOp::ActiveFields),
        2 => (0i64..30).prop_map(SOp::Tick),
        1 => Just(SOp::Clear),
        3 => Just(SOp::Begin),
        6 => (1usize..3_000).prop_map(SOp::Step),
        1 => Just(SOp::End),
        1 => Just(SOp::Abort),
    ]
}

/// Applies a data op to `db`; returns what it answered (text, and the
/// value a read or delete gave), for comparing a Db that snapshots with
/// one that does not. Values are compared by `==`: their Debug form
/// shows layout (hash seeds) that may differ.
fn apply(db: &mut Db, op: &SOp, now: i64) -> (String, Option<Value>) {
    let mut value = None;
    let text = apply_inner(db, op, now, &mut value);
    (text, value)
}

fn apply_inner(db: &mut Db, op: &SOp, now: i64, value: &mut Option<Value>) -> String {
    let slots = db.slots_enabled();
    let mkey = |k| mkey(k, slots);
    let hcfg = HashConfig::default();
    let scfg = SetConfig::default();
    match *op {
        SOp::Set(k, kind, v, d) => {
            let ttl = match d { Some(d) => Ttl::At(now + d), None if v % 2 == 0 => Ttl::Keep, None => Ttl::Clear };
            format!("{}", db.insert(&mkey(k), mvalue(kind, v, now), ttl, now))
        }
        SOp::Del(k) => {
            *value = db.remove(&mkey(k), now);
            String::new()
        }
        SOp::Incr(k) => format!("{:?}", db.incr_by(&mkey(k), 7, now)),
        SOp::Expire(k, d) => format!("{}", db.set_expire(&mkey(k), d.map(|d| now + d), now)),
        SOp::Get(k) => {
            *value = db.get(&mkey(k), now).map(|v| v.to_owned());
            String::new()
        }
        SOp::HashEdit(k, f, a) => {
            let field = [b'0' + f];
            let got = match db.get_mut(&mkey(k), now) {
                Some(ValueMut::Hash(h)) => match a {
                    0 => format!("{}", h.insert(&field, b"edited", &hcfg)),
                    1 => format!("{}", h.remove(&field)),
                    _ => format!("{}", h.set_expire(&field, now + 3, ExpireCond::Always, now)),
                },
                other => format!("{:?}", other.map(|v| matches!(v, ValueMut::Hash(_)))),
            };
            format!("{got} {}", db.sync_object(&mkey(k)))
        }
        SOp::SetEdit(k, m, add) => {
            let member = format!("m{m}");
            let got = match db.get_mut(&mkey(k), now) {
                Some(ValueMut::Set(s)) if add => s.insert(member.as_bytes(), &scfg),
                Some(ValueMut::Set(s)) => s.remove(member.as_bytes()),
                _ => false,
            };
            format!("{got} {}", db.sync_object(&mkey(k)))
        }
        SOp::Active(n) => {
            let mut gone = Vec::new();
            let r = db.active_expire(now, n, |k| gone.push(k.to_vec()));
            format!("{r:?} {gone:?}")
        }
        SOp::ActiveFields(n) => {
            let mut gone = Vec::new();
            let r = db.active_expire_fields(now, n, |k, f| gone.push((k.to_vec(), f.to_vec())));
            format!("{r:?} {gone:?}")
        }
        SOp::Clear => {
            db.clear();
            String::new()
        }
        SOp::Tick(_) | SOp::Begin | SOp::Step(_) | SOp::End | SOp::Abort => unreachable!("not a data op"),
    }
}

/// A Db holding `PREFILL` keys of every shape, some with deadlines; in
/// slot mode if `slots`.
fn prefilled(now: i64, slots: bool) -> Db {
    let mut db = if slots { Db::with_slots() } else { Db::new() };
    for k in 0..PREFILL {
        let v = i64::from(k) * 7919 % 2000 - 1000;
        let ttl = if k % 5 == 0 { Ttl::At(now + i64::from(k % 300)) } else { Ttl::Clear };
        db.insert(&mkey(k, slots), mvalue((k % 13) as u8, v, now), ttl, now);
    }
    db
}

/// State of the snapshot the model test is taking.
struct Taking {
    sink: CollectSink,
    /// The Db's content at `snapshot_begin`.
    want: Image,
    /// The last step said complete, and no `clear` came since.
    complete: bool,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random writes of every kind (strings, collections edited in
    /// place, deadlines, lazy and active expiry, field expiry, FLUSHDB)
    /// interleaved with snapshot steps: each complete snapshot emitted
    /// exactly the Db's content at its begin, each key once; and a twin
    /// Db given the same writes but no snapshot answers the same and ends
    /// with the same content.
    #[test]
    fn snapshot_is_the_image_at_begin(ops in proptest::collection::vec(sop(), 1..400)) {
        snapshot_model(&ops, false)?;
    }
}

proptest! {
    // Fewer cases: the standalone run covers what both modes share.
    #![proptest_config(ProptestConfig { cases: 20, ..ProptestConfig::default() })]

    /// The same in slot mode, half the keys in one hot slot: snapshots,
    /// splits under a slot's own directory and FLUSHDB keep the image and
    /// the twin's answers, and the per-slot counts stay exact.
    #[test]
    fn snapshot_is_the_image_at_begin_in_slot_mode(ops in proptest::collection::vec(sop(), 1..400)) {
        snapshot_model(&ops, true)?;
    }
}

/// The body of the snapshot model tests, in slot mode if `slots`.
fn snapshot_model(ops: &[SOp], slots: bool) -> Result<(), TestCaseError> {
    let mut now = 1_000_000i64;
    let mut db = prefilled(now, slots);
    let mut twin = prefilled(now, slots);
    let mut taking: Option<Taking> = None;
    for op in ops {
        match *op {
            SOp::Tick(dt) => now += dt,
            SOp::Begin => {
                if taking.is_none() {
                    let sink = CollectSink::default();
                    let want = content(&db);
                    db.snapshot_begin(Box::new(sink.clone()));
                    taking = Some(Taking { sink, want, complete: false });
                }
            }
            SOp::Step(n) => {
                if let Some(t) = &mut taking {
                    let before = t.sink.len();
                    t.complete = db.snapshot_step(n);
                    // Whole segments: at most one segment (2,048 slots) past `n`.
                    prop_assert!(t.sink.len() - before < n.max(1) + 2_048);
                }
            }
            SOp::End => {
                if let Some(t) = &taking {
                    let complete = t.complete;
                    match db.snapshot_end() {
                        Some(_) => {
                            let t = taking.take().expect("running");
                            assert_images_eq(&t.sink.image(), &t.want);
                        }
                        None => prop_assert!(!complete, "a complete snapshot refused to end"),
                    }
                }
            }
            SOp::Abort => {
                if taking.take().is_some() {
                    prop_assert!(db.snapshot_abort().is_some());
                }
            }
            _ => {
                if matches!(op, SOp::Clear) {
                    if let Some(t) = &mut taking {
                        t.complete = false;
                    }
                }
                let a = apply(&mut db, op, now);
                let b = apply(&mut twin, op, now);
                prop_assert_eq!(a, b, "{:?}", op);
            }
        }
    }
    if let Some(t) = taking.take() {
        finish(&mut db, 1_000);
        assert_images_eq(&t.sink.image(), &t.want);
    }
    prop_assert!(!db.snapshot_running());
    prop_assert_eq!(db.len(), twin.len());
    assert_images_eq(&content(&db), &content(&twin));
    if slots {
        let mut counts = BTreeMap::new();
        db.for_each(|k, _, _| *counts.entry(crate::slot::key_hash_slot(k)).or_insert(0u64) += 1);
        prop_assert_eq!(db.slot_counts_nonzero().collect::<BTreeMap<_, _>>(), counts);
    }
    Ok(())
}

/// A Db of `n` integer keys `k{i}`.
fn ints(n: u64) -> Db {
    let mut db = Db::new();
    for i in 0..n {
        db.insert(format!("k{i}").as_bytes(), Value::Int(i as i64), Ttl::Clear, 0);
    }
    db
}

#[test]
fn splits_during_a_snapshot_keep_the_image() {
    let mut db = ints(20_000);
    let want = content(&db);
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    db.snapshot_step(3_000);
    let segs = db.segs.len();
    // New keys split segments, serialized ones (behind the cursor) and
    // pending ones alike; old keys change and go.
    for i in 0..40_000u64 {
        db.insert(format!("new{i}").as_bytes(), Value::Int(-1), Ttl::Clear, 0);
        if i % 3 == 0 {
            db.insert(format!("k{}", i / 2).as_bytes(), Value::Int(-2), Ttl::Clear, 0);
        }
        if i % 5 == 0 {
            db.remove(format!("k{}", 19_999 - i / 2).as_bytes(), 0);
        }
        if i % 4_000 == 0 {
            db.snapshot_step(500);
        }
    }
    assert!(db.segs.len() >= 2 * segs, "splits happened: {} -> {}", segs, db.segs.len());
    finish(&mut db, 2_000);
    assert_images_eq(&sink.image(), &want);
}

/// Slot mode: writes during a snapshot split a hot slot's segments under
/// its own directory and delete keys, and FLUSHDB detaches the table; the
/// image is the content at begin, the counts follow every write, and the
/// fresh table is in slot mode.
#[test]
fn slot_mode_snapshot_while_writing() {
    let slot_counts = |db: &Db| {
        let mut counts = BTreeMap::new();
        db.for_each(|k, _, _| *counts.entry(crate::slot::key_hash_slot(k)).or_insert(0u64) += 1);
        assert_eq!(db.slot_counts_nonzero().collect::<BTreeMap<_, _>>(), counts);
    };
    let mut db = Db::with_slots();
    for i in 0..3_000u64 {
        db.insert(format!("{{hot}}:{i}").as_bytes(), Value::Int(i as i64), Ttl::Clear, 0);
        db.insert(format!("k{i}").as_bytes(), Value::Int(i as i64), Ttl::Clear, 0);
    }
    let want = content(&db);
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    db.snapshot_step(1_000);
    let segs = db.segs.len();
    for i in 0..20_000u64 {
        db.insert(format!("{{hot}}:new{i}").as_bytes(), Value::Int(-1), Ttl::Clear, 0);
        if i % 3 == 0 {
            db.remove(format!("{{hot}}:{}", i / 7).as_bytes(), 0);
            db.insert(format!("k{}", i / 7).as_bytes(), Value::Int(-2), Ttl::Clear, 0);
        }
        if i % 2_000 == 0 {
            db.snapshot_step(500);
        }
    }
    assert!(db.segs.len() >= segs + 8, "the hot slot split: {segs} -> {}", db.segs.len());
    slot_counts(&db);
    finish(&mut db, 2_000);
    assert_images_eq(&sink.image(), &want);
    // FLUSHDB mid-snapshot: the old table goes to the snapshot.
    let want = content(&db);
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    db.snapshot_step(1_000);
    db.clear();
    assert!(db.slots_enabled());
    db.insert(b"{hot}:after", Value::Int(1), Ttl::Clear, 0);
    slot_counts(&db);
    finish(&mut db, 2_000);
    assert_images_eq(&sink.image(), &want);
    assert_eq!(db.slot_counts_nonzero().collect::<Vec<_>>(), vec![(crate::slot::key_hash_slot(b"hot"), 1)]);
}

/// The split rule itself, which no write can reach (every write
/// serializes its segment before it splits it): with the hooks held off,
/// splits of pending and of serialized segments leave every old key in a
/// half marked as its segment was, so the snapshot still gives each key
/// of the image exactly once.
#[test]
fn split_halves_keep_their_segment_mark() {
    let mut db = ints(12_000);
    let want = content(&db);
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    db.snapshot_step(4_000);
    let mark = |db: &Db, k: &[u8]| db.marks[db.find(k).1] == db.epoch;
    let before: Vec<(Vec<u8>, bool)> = want.keys().map(|k| (k.clone(), mark(&db, k))).collect();
    assert!(before.iter().any(|x| x.1) && before.iter().any(|x| !x.1), "both kinds of segment");
    let held = db.snap.take();
    let segs = db.segs.len();
    for i in 0..30_000u64 {
        db.insert(format!("new{i}").as_bytes(), Value::Int(0), Ttl::Clear, 0);
    }
    db.snap = held;
    assert!(db.segs.len() >= 2 * segs);
    for (k, was) in &before {
        assert_eq!(mark(&db, k), *was, "{:?}", String::from_utf8_lossy(k));
    }
    finish(&mut db, 4_000);
    // New keys in pending halves go out too; every old key exactly once.
    let got = sink.image();
    for (k, v) in &want {
        assert_eq!(got.get(k), Some(v));
    }
}

#[test]
fn large_collection_edited_mid_snapshot() {
    let cfg = SetConfig::default();
    let mut db = ints(10_000);
    let mut big = Set::new();
    for m in 0..100_000u32 {
        big.insert(format!("member:{m}").as_bytes(), &cfg);
    }
    db.insert(b"big", Value::Set(Box::new(big.clone())), Ttl::At(1 << 41), 0);
    let want = content(&db);
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    let edit = |db: &mut Db, from: u32, n: u32| {
        let Some(ValueMut::Set(s)) = db.get_mut(b"big", 0) else { panic!("a set") };
        for m in from..from + n {
            s.remove(format!("member:{m}").as_bytes());
        }
        s.insert(format!("new:{from}").as_bytes(), &cfg);
        db.sync_object(b"big");
    };
    // The first edit finds its segment pending: the set goes out whole,
    // as it was, before the edit.
    let before = sink.len();
    edit(&mut db, 0, 50_000);
    assert!(sink.len() > before, "the edit serialized the set's segment");
    assert!(sink.0.lock().expect("not poisoned").iter().any(|e| e.0 == b"big"));
    db.snapshot_step(1_000);
    // Later edits find it serialized: nothing more goes out for it.
    edit(&mut db, 50_000, 10_000);
    db.remove(b"big", 0);
    finish(&mut db, 1_000);
    let got = sink.image();
    assert_images_eq(&got, &want);
    match &got[&b"big"[..]].0 {
        Value::Set(s) => assert_eq!(s.len(), 100_000),
        other => panic!("{other:?}"),
    }
    assert!(!db.contains(b"big", 0));
}

#[test]
fn clear_mid_snapshot_detaches_the_table() {
    let hcfg = HashConfig::default();
    let mut db = ints(50_000);
    // Object-table hashes with field TTLs, so the detached table has
    // field-expiry entries to drop as it drains.
    for i in 0..2_000u64 {
        let mut h = Hash::new();
        h.insert(b"f", &[b'v'; 80], &hcfg);
        h.set_expire(b"f", 1 << 40, ExpireCond::Always, 0);
        db.insert(format!("h{i}").as_bytes(), Value::Hash(Box::new(h)), Ttl::Clear, 0);
    }
    let want = content(&db);
    let full = db.allocated_bytes();
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    db.snapshot_step(5_000);
    db.clear();
    assert_eq!(db.len(), 0);
    assert_eq!(db.field_expiry_len(), 0);
    // The old table is the snapshot's now, still counted, not yet freed.
    assert!(db.allocated_bytes() > full * 9 / 10, "{} of {}", db.allocated_bytes(), full);
    // Writes after the clear are no part of the image.
    for i in 0..1_000u64 {
        db.insert(format!("after{i}").as_bytes(), Value::Int(1), Ttl::Clear, 0);
        db.insert(format!("k{i}").as_bytes(), Value::Int(-1), Ttl::Clear, 0);
    }
    // A second clear detaches a second table (all of it serialized).
    db.clear();
    for i in 0..1_000u64 {
        db.insert(format!("after{i}").as_bytes(), Value::Int(2), Ttl::Clear, 0);
    }
    // Each step serializes and frees a bounded slice; memory falls as
    // the detached tables drain.
    let mut last = db.allocated_bytes();
    let mut steps = 0;
    loop {
        let before = sink.len();
        let done = db.snapshot_step(2_000);
        assert!(sink.len() - before <= 2_000 + 2_048);
        let now = db.allocated_bytes();
        assert!(now <= last, "memory grew during a drain: {last} -> {now}");
        last = now;
        steps += 1;
        if done {
            break;
        }
    }
    assert!(steps > 10, "the drain took {steps} steps");
    assert!(db.snapshot_end().is_some());
    assert_images_eq(&sink.image(), &want);
    // What is left is the fresh table's: as much as a Db built from scratch.
    let mut twin = Db::new();
    for i in 0..1_000u64 {
        twin.insert(format!("after{i}").as_bytes(), Value::Int(2), Ttl::Clear, 0);
    }
    assert_images_eq(&content(&db), &content(&twin));
    assert_eq!(db.allocated_bytes(), twin.allocated_bytes());
}

#[test]
fn clear_after_the_last_step_needs_one_more() {
    let mut db = ints(5_000);
    let want = content(&db);
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    while !db.snapshot_step(1_000) {}
    db.clear();
    assert!(db.snapshot_end().is_none(), "the detached table is not freed yet");
    assert!(db.snapshot_running());
    while !db.snapshot_step(1_000) {}
    assert!(db.snapshot_end().is_some());
    assert_images_eq(&sink.image(), &want);
}

#[test]
fn detach_without_a_snapshot_hands_the_table_back() {
    let mut db = ints(1_000);
    db.log_events = LOG_NEW;
    let old = db.detach().expect("no snapshot: the caller frees it");
    assert_eq!(old.len(), 1_000);
    assert!(db.is_empty());
    assert_eq!(db.log_events, LOG_NEW);
    db.snapshot_begin(Box::new(CountSink::default()));
    db.insert(b"x", Value::Int(1), Ttl::Clear, 0);
    assert!(db.detach().is_none(), "a snapshot takes it");
    assert!(db.snapshot_abort().is_some());
}

/// The snapshot keeps no copy of the data: with a counting sink, the Db
/// under snapshot (its own bytes plus what the snapshot holds) stays
/// within a few hundred bytes of a twin given the same writes and no
/// snapshot, plus the tag bitmaps of pending segments written to (2 KiB
/// each, and 8 bytes a segment for their index), and is the twin's size
/// again when the snapshot ends.
#[test]
fn memory_beyond_the_db_stays_bounded() {
    let fill = |db: &mut Db| {
        for i in 0..200_000u64 {
            db.insert(format!("key:{i}").as_bytes(), Value::Bytes(vec![b'x'; 40]), Ttl::Clear, 0);
        }
    };
    let (mut db, mut twin) = (Db::new(), Db::new());
    fill(&mut db);
    fill(&mut twin);
    let count = CountSink::default();
    db.snapshot_begin(Box::new(count.clone()));
    let mut worst = 0isize;
    let mut x = 1u64;
    let mut round = 0;
    let mut writes = 0;
    loop {
        let done = db.snapshot_step(1_000);
        for _ in 0..20 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = format!("key:{}", (x >> 33) % 250_000);
            let v = Value::Bytes(vec![b'y'; 40 + (x % 3) as usize]);
            db.insert(key.as_bytes(), v.clone(), Ttl::Clear, 0);
            twin.insert(key.as_bytes(), v, Ttl::Clear, 0);
            writes += 1;
        }
        let extra = db.allocated_bytes() as isize - twin.allocated_bytes() as isize;
        let sets = db.written.iter().flatten().count() as isize;
        let index = jemalloc_size(db.written.capacity() * 8) as isize;
        assert!(extra <= 512 + index + 2048 * sets, "{extra} bytes beyond the twin after {writes} writes into {sets} segments");
        worst = worst.max(extra);
        round += 1;
        if done {
            break;
        }
    }
    assert!(db.snapshot_end().is_some());
    assert_eq!(count.0.load(Ordering::Relaxed), 200_000);
    eprintln!("snapshot over {round} rounds: at most {worst} bytes beyond a twin Db of {} bytes", twin.allocated_bytes());
    assert_eq!(db.allocated_bytes(), twin.allocated_bytes());
}

#[test]
fn epoch_wrap_starts_clean() {
    let mut db = ints(5_000);
    db.epoch = u32::MAX - 1;
    for round in 0..3 {
        let want = content(&db);
        let sink = CollectSink::default();
        db.snapshot_begin(Box::new(sink.clone()));
        db.snapshot_step(1_500);
        db.insert(format!("r{round}").as_bytes(), Value::Int(round), Ttl::Clear, 0);
        finish(&mut db, 1_500);
        assert_images_eq(&sink.image(), &want);
    }
    assert_eq!(db.epoch, 2);
}

#[test]
fn an_edit_lent_before_begin_is_in_the_image() {
    let cfg = HashConfig::default();
    let mut db = ints(100);
    let mut h = Hash::new();
    h.insert(b"a", b"1", &cfg);
    db.insert(b"h", Value::Hash(Box::new(h)), Ttl::Clear, 0);
    // An inline hash lent for writing and edited, not yet written back.
    let Some(ValueMut::Hash(h)) = db.get_mut(b"h", 0) else { panic!("a hash") };
    h.insert(b"b", b"2", &cfg);
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    let Some(ValueMut::Hash(h)) = db.get_mut(b"h", 0) else { panic!("a hash") };
    h.insert(b"c", b"3", &cfg);
    db.sync_object(b"h");
    finish(&mut db, 10);
    let got = sink.image();
    let Value::Hash(h) = &got[&b"h"[..]].0 else { panic!("a hash") };
    assert_eq!((h.get(b"b", 0), h.get(b"c", 0)), (Some(StrRef::Int(2)), None));
}

#[test]
fn lazy_and_active_expiry_serialize_first() {
    let mut db = Db::new();
    for i in 0..20_000i64 {
        db.insert(format!("t{i}").as_bytes(), Value::Int(i), Ttl::At(100 + i % 50), 0);
    }
    let want = content(&db);
    let sink = CollectSink::default();
    db.snapshot_begin(Box::new(sink.clone()));
    // Everything is due: lazy expiry of some keys, active expiry of the rest.
    for i in 0..500 {
        assert!(db.get(format!("t{}", i * 40).as_bytes(), 1_000).is_none());
    }
    db.snapshot_step(2_000);
    while db.active_expire(1_000, 3_000, |_| {}).1 > 0 {}
    assert!(db.is_empty());
    finish(&mut db, 2_000);
    assert_images_eq(&sink.image(), &want);
}

#[test]
#[should_panic(expected = "already running")]
fn one_snapshot_at_a_time() {
    let mut db = Db::new();
    db.snapshot_begin(Box::new(CountSink::default()));
    db.snapshot_begin(Box::new(CountSink::default()));
}

/// A write in a pending segment gives the sink that one key (and the
/// rare keys of its segment with the same tag), not its segment:
/// overwriting, deleting, expiring and creating keys all over a table the
/// snapshot has not stepped into costs one entry per existing key touched
/// (none for a key created) and per same-tag neighbour, each old value
/// goes out exactly once, and nothing written after `snapshot_begin` does.
#[test]
fn a_write_gives_one_key_not_its_segment() {
    let mut db = ints(50_000);
    db.set_expire(b"k7", Some(10), 0);
    let want = content(&db);
    let count = CountSink::default();
    let sink = CollectSink::default();
    struct Both(CountSink, CollectSink);
    impl SnapshotSink for Both {
        fn entry(&mut self, key: &[u8], value: ValueRef<'_>, expire_at_ms: Option<i64>) {
            self.0.entry(key, value, expire_at_ms);
            self.1.entry(key, value, expire_at_ms);
        }
    }
    // Keys sharing a segment and a tag with a key written go out with it.
    let place = |db: &Db, k: &[u8]| {
        let (h, si, _) = db.find(k);
        (si, tag_at(h, db.segs[si].depth as u32))
    };
    let touched: Vec<_> = [&b"k1"[..], b"k2", b"k3", b"k4", b"k7", b"fresh"].iter().map(|k| place(&db, k)).collect();
    let with_them = want.keys().filter(|k| touched.contains(&place(&db, k))).count();
    assert!((5..10).contains(&with_them), "{with_them}");
    db.snapshot_begin(Box::new(Both(count.clone(), sink.clone())));
    assert!(db.segs.len() > 10, "a table of many segments");
    db.insert(b"k1", Value::Int(-1), Ttl::Clear, 0);
    db.insert(b"k1", Value::Int(-2), Ttl::Clear, 0);
    assert_eq!(db.incr_by(b"k2", 5, 0), Ok(7));
    assert!(db.remove(b"k3", 0).is_some());
    db.set_expire(b"k4", Some(500), 0);
    assert!(db.get(b"k7", 20).is_none(), "expired lazily");
    db.insert(b"fresh", Value::Int(1), Ttl::Clear, 0);
    db.insert(b"fresh", Value::Int(2), Ttl::Clear, 0);
    assert!(db.remove(b"fresh", 0).is_some());
    db.insert(b"fresh", Value::Int(3), Ttl::Clear, 0);
    assert_eq!(count.0.load(Ordering::Relaxed), with_them, "k1, k2, k3, k4 and k7 and their tags' other keys, once each");
    finish(&mut db, 1_000);
    assert_eq!(count.0.load(Ordering::Relaxed), 50_000);
    assert_images_eq(&sink.image(), &want);
    assert!(db.written.is_empty(), "the bitmaps go with the snapshot");
}
