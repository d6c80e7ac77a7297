//! Eviction under maxmemory (Redis's performEvictions): before a command
//! runs, while used memory is over maxmemory, keys chosen by
//! maxmemory-policy are deleted; when none can go (noeviction, or a
//! volatile policy with no key that has a TTL) the caller refuses the
//! commands that may grow memory with the OOM error.
//!
//! Candidates come from sampling (`storage::Db::sample`): each round
//! samples `maxmemory-samples` keys of every database into the pool of
//! best candidates (`storage::EvictionPool`), then takes the best one that
//! still exists. The random policies take one random key, databases in
//! turn. An evicted key counts in INFO evicted_keys, publishes the
//! `evicted` keyspace event, invalidates WATCH and client caches (CLIENT
//! TRACKING) and goes to the write
//! stream as DEL (UNLINK with lazyfree-lazy-eviction, whose values are
//! freed on the freeing thread), outside the command being admitted.
//!
//! One call spends at most the time maxmemory-eviction-tenacity allows;
//! if memory is still over then, the command runs anyway and the event
//! loop calls again (`EvictState::unfinished`) until it is under, as
//! Redis's eviction timer does.

use std::time::{Duration, Instant};

use crate::client::{Client, ReplRole};
use crate::config::Policy;
use crate::server::Server;
use crate::{lazyfree, notify, publish};

/// What a call achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Memory is under maxmemory (or there is no limit).
    Ok,
    /// Keys went, memory is still over, the time limit stopped it: the
    /// work goes on later and commands are admitted meanwhile.
    Running,
    /// Memory is over and nothing (more) can be evicted.
    Fail,
}

/// Time one call may spend evicting, by tenacity (Redis's curve: linear
/// up to 10, then 15% more per step; 100 is unlimited).
pub fn time_limit(tenacity: u32) -> Option<Duration> {
    match tenacity {
        0..=10 => Some(Duration::from_micros(50 * tenacity as u64)),
        11..=99 => Some(Duration::from_micros((500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64)),
        _ => None,
    }
}

/// Memory counted against maxmemory. `current` is the running client,
/// out of the registry: a replica's output buffer is not counted (a
/// replica's REPLCONF ACK runs eviction with the stream in its buffer).
fn counted(srv: &Server, current: Option<&Client>) -> u64 {
    let running = current.filter(|c| c.repl_role == ReplRole::Replica).map_or(0, |c| c.reply.buf.capacity() as u64);
    // What is not counted first: reply buffers an I/O thread frees leave
    // in_transit after they leave used_memory, so read in this order the
    // two never count a buffer twice.
    let not_counted = srv.mem_not_counted_for_evict() + running;
    srv.used_memory().saturating_sub(not_counted)
}

/// True if memory is over maxmemory and nothing can be evicted now: what
/// a script checks before running a command that may grow memory.
pub fn over_limit(srv: &Server) -> bool {
    srv.config.maxmemory != 0 && counted(srv, None) > srv.config.maxmemory
}

/// Evicts keys until memory is under maxmemory, within the time limit.
/// `current` is the client whose command waits (not in `srv.clients`):
/// it sees its own WATCH invalidated and its keyspace events.
pub fn perform(srv: &mut Server, current: Option<&mut Client>, now: i64) -> Outcome {
    let (outcome, measured) = evict(srv, current, now);
    if measured {
        // How long memory stays over maxmemory, as Redis times it: from
        // the first call that could not bring it under to the first that did.
        let e = &mut srv.evict;
        match outcome {
            Outcome::Running | Outcome::Fail => {
                e.exceeded_since.get_or_insert_with(Instant::now);
            }
            Outcome::Ok => {
                if let Some(t) = e.exceeded_since.take() {
                    e.exceeded_us += t.elapsed().as_micros() as u64;
                }
            }
        }
    }
    outcome
}

/// `perform`'s work; the flag is false where eviction is not safe to run
/// now (loading, a script, a pause), which Redis leaves out of its timing.
fn evict(srv: &mut Server, mut current: Option<&mut Client>, now: i64) -> (Outcome, bool) {
    let max = srv.config.maxmemory;
    // Not while loading, inside a script that lent the server to others
    // (its writes must stay atomic), while CLIENT PAUSE holds writes (a
    // pause must not change data), or on a replica told to leave memory
    // to its primary, as Redis.
    let paused = srv.paused_at(now).is_some();
    // A replica keeps what its primary sends and deletes only what the
    // primary deletes (replica-ignore-maxmemory yes, the default): its own
    // evictions would make it differ from the primary.
    let replica = srv.repl.is_replica() && srv.config.flag("replica-ignore-maxmemory");
    if max != 0 && (srv.persist.loading.is_some() || srv.script.is_some() || paused || replica) {
        srv.evict.unfinished = false;
        return (Outcome::Ok, false);
    }
    if max == 0 || counted(srv, current.as_deref()) <= max {
        srv.evict.unfinished = false;
        return (Outcome::Ok, true);
    }
    let ev = srv.config.eviction;
    if ev.policy == Policy::NoEviction {
        srv.evict.unfinished = false;
        return (Outcome::Fail, true);
    }
    let limit = time_limit(ev.tenacity);
    let start = Instant::now();
    let mut evicted = 0u64;
    // What is over the limit now is what goes, counted as each key's
    // removal frees it (Redis's mem_tofree and mem_freed). Memory the
    // eviction itself adds (invalidation messages for clients that cached
    // the key, the DEL for replicas) is not taken off what was freed: it
    // leaves with this turn's replies, and chasing it would evict on
    // until the database is empty.
    let tofree = (counted(srv, current.as_deref()) - max) as i64;
    let mut freed = 0i64;
    while freed < tofree {
        let Some((db, key)) = pick(srv, ev.policy, now) else { break };
        freed += evict_key(srv, current.as_deref_mut(), db, &key, now);
        evicted += 1;
        if evicted.is_multiple_of(16) {
            // Values freed on the freeing thread free nothing here: look
            // at memory itself now and then, as Redis does under
            // lazyfree-lazy-eviction.
            if ev.lazy && counted(srv, current.as_deref()) <= max {
                break;
            }
            if limit.is_some_and(|l| start.elapsed() >= l) {
                if counted(srv, current.as_deref()) <= max {
                    break;
                }
                srv.evict.unfinished = true;
                return (Outcome::Running, true);
            }
        }
    }
    srv.evict.unfinished = false;
    if freed >= tofree || counted(srv, current.as_deref()) <= max {
        return (Outcome::Ok, true);
    }
    // Values freed on the freeing thread count once it is done: wait a
    // little for it, as Redis does, before refusing.
    if srv.lazyfree.pending() > 0 {
        let wait = Instant::now();
        while srv.lazyfree.pending() > 0 && wait.elapsed() < Duration::from_millis(1) {
            std::thread::yield_now();
        }
        if counted(srv, current.as_deref()) <= max {
            return (Outcome::Ok, true);
        }
    }
    (Outcome::Fail, true)
}

/// The next key to evict under `policy`: (database, key).
fn pick(srv: &mut Server, policy: Policy, now: i64) -> Option<(usize, Box<[u8]>)> {
    let volatile = policy.volatile();
    let rank = policy.rank()?;
    let ndb = srv.dbs.len();
    if rank == storage::Rank::Random {
        for i in 0..ndb {
            let d = (srv.evict.next_db + i) % ndb;
            let mut found = None;
            srv.dbs[d].sample(1, volatile, rank, now, |k, _| found = Some(Box::from(k)));
            if let Some(k) = found {
                srv.evict.next_db = (d + 1) % ndb;
                return Some((d, k));
            }
        }
        return None;
    }
    let samples = srv.config.eviction.samples;
    // A round whose pool holds only keys gone since is followed by another;
    // a bounded number, in case keys vanish as fast as they are sampled.
    for _ in 0..16 {
        let mut any = false;
        let Server { dbs, evict, .. } = srv;
        for (d, db) in dbs.iter_mut().enumerate() {
            any |= db.sample(samples, volatile, rank, now, |k, score| evict.pool.offer(score, d, k)) > 0;
        }
        if !any {
            return None;
        }
        while let Some((d, k)) = srv.evict.pool.pop_best() {
            if srv.dbs[d].stored(&k) {
                return Some((d, k));
            }
        }
    }
    None
}

/// Deletes `key` of database `db` as an eviction and does its
/// bookkeeping. Returns the memory the removal freed, measured before
/// the bookkeeping adds any.
fn evict_key(srv: &mut Server, mut current: Option<&mut Client>, db: usize, key: &[u8], now: i64) -> i64 {
    let lazy = srv.config.eviction.lazy;
    let before = srv.used_memory() as i64;
    let removed = srv.dbs[db].remove(key, now);
    // A key found past its deadline was reclaimed as expired instead.
    srv.expired_keys += srv.dbs[db].take_lazy_expired();
    let Some(value) = removed else {
        let freed = before - srv.used_memory() as i64;
        publish::flush_db_log(srv, current.as_deref_mut(), db);
        return freed;
    };
    if lazy {
        lazyfree::drop_value(&srv.lazyfree, value);
    } else {
        drop(value);
    }
    let freed = before - srv.used_memory() as i64;
    srv.evicted_keys += 1;
    match current.as_deref_mut() {
        Some(c) => srv.touch_watched(db, key, c),
        None => srv.touch_watched_all(db, key),
    }
    // Clients caching it hear of it (CLIENT TRACKING), as of any change.
    if srv.tracking.clients > 0 {
        publish::invalidate_key(srv, current.as_deref(), None, key, true);
    }
    publish::emit(srv, current, db, notify::EVICTED, "evicted", key);
    if !srv.feed.is_empty() {
        let cmd: &[u8] = if lazy { b"UNLINK" } else { b"DEL" };
        srv.feed.push(db, vec![cmd.to_vec(), key.to_vec()]);
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limit_follows_tenacity() {
        assert_eq!(time_limit(0), Some(Duration::ZERO));
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(11), Some(Duration::from_micros(575)));
        assert!(time_limit(99).unwrap() > Duration::from_secs(1));
        assert_eq!(time_limit(100), None);
    }
}
