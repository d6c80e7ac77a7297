//! MEMORY REPORT's jobs: one walk over a database per calling client, in
//! slices between other clients' commands, grouping keys by pattern
//! (the `keyreport` crate, shared with the command-line tool).
//!
//! The command parks its client (as a blocking command does, with no keys
//! and no deadline) and leaves a [`Job`] here; the event loop calls
//! [`Reports::step`] once per turn with a time slice, and when a job's
//! cursor comes back to 0 it keeps the result in `done` and has the
//! client's command run again, which then only writes the reply. Commands
//! that cannot block (inside MULTI, a script) walk the whole database at
//! once.
//!
//! The walk is SCAN's (`Db::scan_sized`, which also gives each key's
//! MEMORY USAGE): its cursor only moves up in hash order, so a key that
//! exists for the whole walk is counted once, and a key written meanwhile
//! is counted once or not at all. Keys whose TTL passed and that are not
//! yet reclaimed are left out, as MEMORY USAGE would not find them.
//!
//! A job whose client went away (closed, or released by CLIENT UNBLOCK) is
//! dropped at the next step.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use keyreport::{Aggregate, KeyInfo, Report};
use resp::Reply;
use storage::{Db, StrRef, ValueRef};

use crate::client::ClientId;

/// Keys per SCAN step: the time is looked at between steps.
const STEP_KEYS: usize = 256;

/// Strings up to this length are "embstr" in Redis (one allocation with the
/// object header); longer ones are "raw".
const EMBSTR_MAX: usize = 44;

/// The name OBJECT ENCODING gives a value: Redis's name for the encoding
/// Redis would have picked, mapped from ours.
///
/// Strings: a canonical i64 is "int", other strings of at most 44 bytes are
/// "embstr", longer ones "raw". Every write stores a canonical integer as
/// an integer except APPEND and SETRANGE, which keep bytes where Redis
/// leaves a raw string; so such bytes are "raw" too. Hashes: `Hash::encoding_name` (listpack,
/// listpackex or hashtable, following Redis's thresholds and history).
/// Sorted sets: `ZSet::encoding_name` (listpack or skiplist).
/// Streams: always "stream", as in Redis.
pub fn encoding_name(v: ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Str(StrRef::Int(_)) => "int",
        ValueRef::Str(StrRef::Bytes(b)) if storage::strref::parse_canonical_i64(b).is_some() => "raw",
        ValueRef::Str(StrRef::Bytes(b)) if b.len() <= EMBSTR_MAX => "embstr",
        ValueRef::Str(StrRef::Bytes(_)) => "raw",
        ValueRef::Hash(h) => h.encoding_name(),
        ValueRef::ZSet(z) => z.encoding_name(),
        ValueRef::List(l) => l.encoding_name(),
        ValueRef::Set(s) => s.encoding_name(),
        ValueRef::Stream(s) => s.encoding_name(),
    }
}

/// What a report covers.
#[derive(Debug, Clone)]
pub struct Options {
    /// The database walked.
    pub db: usize,
    /// Patterns reported at most (the rest are only counted).
    pub limit: usize,
    /// Stop after this many keys counted (a sample: keys come in hash order).
    pub samples: Option<u64>,
    /// Only keys starting with this.
    pub prefix: Option<Vec<u8>>,
}

/// One report in progress.
pub struct Job {
    opts: Options,
    cursor: u64,
    agg: Aggregate,
    /// Keys in the database when the job started.
    db_keys: u64,
    started: Instant,
    /// True once a key was left out because the sample was full.
    cut: bool,
}

/// A report done: what the reply is written from.
pub struct Finished {
    pub opts: Options,
    pub report: Report,
    pub db_keys: u64,
    /// True if SAMPLES stopped the walk early.
    pub sampled: bool,
    pub elapsed: Duration,
}

impl Job {
    pub fn new(opts: Options, db_keys: u64) -> Job {
        Job { opts, cursor: 0, agg: Aggregate::new(), db_keys, started: Instant::now(), cut: false }
    }

    /// Walks `db` until `until` (None: to the end); true once done.
    pub fn step(&mut self, db: &mut Db, now: i64, until: Option<Instant>) -> bool {
        let Job { opts, agg, cursor, cut, .. } = self;
        loop {
            *cursor = db.scan_sized(*cursor, STEP_KEYS, |key, v, deadline, bytes| {
                if deadline.is_some_and(|t| t <= now) || opts.prefix.as_ref().is_some_and(|p| !key.starts_with(p)) {
                    return;
                }
                if opts.samples.is_some_and(|n| agg.keys >= n) {
                    *cut = true;
                    return;
                }
                let raw = match v {
                    ValueRef::Str(s) => Some((key.len() + s.len()) as u64),
                    _ => None,
                };
                agg.add(KeyInfo { key, kind: v.kind().name(), encoding: encoding_name(v), bytes: bytes as u64, ttl_ms: deadline.map(|t| t - now), raw });
            });
            if *cursor == 0 || (opts.samples.is_some_and(|n| agg.keys >= n)) {
                return true;
            }
            if until.is_some_and(|t| Instant::now() >= t) {
                return false;
            }
        }
    }

    /// The result, once `step` said done.
    pub fn finish(self) -> Finished {
        let sampled = self.cut || (self.cursor != 0 && self.opts.samples.is_some());
        let elapsed = self.started.elapsed();
        Finished { report: self.agg.finish(self.opts.limit), opts: self.opts, db_keys: self.db_keys, sampled, elapsed }
    }
}

/// The jobs in progress, by client, and the results not yet replied.
#[derive(Default)]
pub struct Reports {
    jobs: BTreeMap<ClientId, Job>,
    done: HashMap<ClientId, Finished>,
}

impl Reports {
    /// True while some job has work left.
    pub fn busy(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Jobs in progress.
    pub fn running(&self) -> usize {
        self.jobs.len()
    }

    /// Starts `job` for client `id` (replacing one it had).
    pub fn start(&mut self, id: ClientId, job: Job) {
        self.done.remove(&id);
        self.jobs.insert(id, job);
    }

    /// The finished report of client `id`, if there is one.
    pub fn take_done(&mut self, id: ClientId) -> Option<Finished> {
        self.done.remove(&id)
    }

    /// Drops what is kept for `id` (its result was delivered or it left).
    pub fn forget(&mut self, id: ClientId) {
        self.jobs.remove(&id);
        self.done.remove(&id);
    }

    /// Advances the jobs for about `slice` in all; jobs whose client is no
    /// longer waiting (`waiting` false) are dropped. Returns the clients
    /// whose report is now done (kept until [`Reports::take_done`]).
    pub fn step(&mut self, dbs: &mut [Db], now: i64, slice: Duration, waiting: impl Fn(ClientId) -> bool) -> Vec<ClientId> {
        let until = Instant::now() + slice;
        let ids: Vec<ClientId> = self.jobs.keys().copied().collect();
        let mut finished = Vec::new();
        for id in ids {
            if !waiting(id) {
                self.jobs.remove(&id);
                continue;
            }
            let job = self.jobs.get_mut(&id).expect("listed above");
            let done = match dbs.get_mut(job.opts.db) {
                Some(db) => job.step(db, now, Some(until)),
                None => true,
            };
            if done {
                let job = self.jobs.remove(&id).expect("listed above");
                self.done.insert(id, job.finish());
                finished.push(id);
            }
            if Instant::now() >= until {
                break;
            }
        }
        finished
    }
}

/// Writes a finished report: a map (a flat array in RESP2), documented in
/// the README's MEMORY REPORT section.
pub fn write_reply(out: &mut Reply, f: &Finished) {
    let r = &f.report;
    out.map(8);
    out.bulk(b"db");
    out.int(f.opts.db as i64);
    out.bulk(b"keys-in-db");
    out.int(f.db_keys as i64);
    out.bulk(b"keys-scanned");
    out.int(r.keys as i64);
    out.bulk(b"bytes");
    out.int(r.bytes as i64);
    out.bulk(b"sampled");
    out.int(i64::from(f.sampled));
    out.bulk(b"patterns-total");
    out.int(r.pattern_count as i64);
    out.bulk(b"patterns");
    out.array(r.patterns.len());
    for (name, p) in &r.patterns {
        out.map(13);
        out.bulk(b"pattern");
        out.bulk(name);
        out.bulk(b"keys");
        out.int(p.keys as i64);
        out.bulk(b"bytes");
        out.int(p.bytes as i64);
        out.bulk(b"bytes-per-key");
        out.int(p.bytes_per_key() as i64);
        out.bulk(b"string-raw-bytes");
        out.int(p.string_raw as i64);
        out.bulk(b"string-bytes");
        out.int(p.string_bytes as i64);
        out.bulk(b"types");
        counts(out, &p.types);
        out.bulk(b"encodings");
        counts(out, &p.encodings);
        out.bulk(b"with-ttl");
        out.int(p.with_ttl as i64);
        let ttl = |out: &mut Reply, v: Option<i64>| match v {
            Some(v) => out.int(v),
            None => out.null(),
        };
        let any = p.with_ttl > 0;
        out.bulk(b"ttl-min-ms");
        ttl(out, any.then_some(p.ttl_min));
        out.bulk(b"ttl-median-ms");
        ttl(out, p.ttl_median());
        out.bulk(b"ttl-max-ms");
        ttl(out, any.then_some(p.ttl_max));
        out.bulk(b"largest");
        out.array(p.largest.len());
        for (k, b) in &p.largest {
            out.array(2);
            out.bulk(k);
            out.int(*b as i64);
        }
    }
    out.bulk(b"histograms");
    out.map(r.histograms.len());
    for h in &r.histograms {
        out.bulk(h.kind.as_bytes());
        let rows = h.rows();
        out.array(rows.len());
        for (lo, hi, keys, bytes) in rows {
            out.array(4);
            out.int(lo as i64);
            out.int(hi.min(i64::MAX as u64) as i64);
            out.int(keys as i64);
            out.int(bytes as i64);
        }
    }
}

/// A (name, count) list as a map.
fn counts(out: &mut Reply, list: &[(String, u64)]) {
    out.map(list.len());
    for (n, c) in list {
        out.bulk(n.as_bytes());
        out.int(*c as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::{Ttl, Value};

    fn opts(samples: Option<u64>, prefix: Option<&[u8]>) -> Options {
        Options { db: 0, limit: 10, samples, prefix: prefix.map(<[u8]>::to_vec) }
    }

    #[test]
    fn walks_in_slices_and_counts_each_key_once() {
        let mut db = Db::new();
        for i in 0..5_000i64 {
            db.insert(format!("user:{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        db.insert(b"gone:1", Value::Int(1), Ttl::At(5), 0);
        db.insert(b"ttl:1", Value::Int(1), Ttl::At(1_000), 0);
        let mut job = Job::new(opts(None, None), db.len() as u64);
        let mut steps = 0;
        // A slice that is always over: one SCAN step per call.
        while !job.step(&mut db, 10, Some(Instant::now())) {
            steps += 1;
        }
        assert!(steps > 10);
        let f = job.finish();
        assert_eq!(f.report.keys, 5_001);
        let total: u64 = (0..5_000).map(|i| db.mem_usage(format!("user:{i}").as_bytes(), 10).unwrap() as u64).sum();
        let user = f.report.patterns.iter().find(|p| p.0 == b"user:{n}").unwrap();
        assert_eq!(user.1.bytes, total);
        let ttl = f.report.patterns.iter().find(|p| p.0 == b"ttl:{n}").unwrap();
        assert_eq!((ttl.1.with_ttl, ttl.1.ttl_min), (1, 990));
        assert!(!f.sampled);
    }

    #[test]
    fn samples_and_prefix() {
        let mut db = Db::new();
        for i in 0..1_000i64 {
            db.insert(format!("a:{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
            db.insert(format!("b:{i}").as_bytes(), Value::Int(i), Ttl::Clear, 0);
        }
        let mut job = Job::new(opts(Some(100), None), 2_000);
        assert!(job.step(&mut db, 0, None));
        let f = job.finish();
        assert_eq!(f.report.keys, 100);
        assert!(f.sampled);
        let mut job = Job::new(opts(None, Some(b"b:")), 2_000);
        assert!(job.step(&mut db, 0, None));
        let f = job.finish();
        assert_eq!(f.report.keys, 1_000);
        assert_eq!(f.report.patterns.len(), 1);
    }
}
