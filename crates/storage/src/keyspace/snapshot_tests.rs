//! Tests of snapshots (snapshot.rs), kept out of tests.rs because they
//! need their own model: the image a snapshot emits is compared with a
//! copy of the Db taken when it began, while a twin Db without snapshots
//! checks that taking one never changes what the Db does. Also the cost
//! probe `write_paths_cost` (ignored; run it by name with `--ignored
//! --nocapture` in release) that times the write paths the snapshot hooks
//! sit on, to compare builds with and without the hooks.

use std::time::Instant;

use super::*;
use crate::types::hash::HashConfig;

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
