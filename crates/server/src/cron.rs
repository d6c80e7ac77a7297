//! Periodic work run by the event loop `hz` times a second: active expiry,
//! idle-client timeouts, the end of CLIENT PAUSE, memory peak tracking,
//! (a shutdown a signal scheduled runs from the event loop right after the
//! tick, as Redis's serverCron runs it: it needs the `Host` to save).
//! Active expiry publishes `expired` / `hexpired` keyspace events.

use std::time::{Duration, Instant};

use crate::client::Resized;
use crate::{notify, publish};
use crate::server::{unix_ms, Server};
use storage::value::Kind;

/// Share of one tick the active expiry cycle may use, in percent, at effort 1
/// (Redis uses 25%); each effort step adds 2 points.
const EXPIRE_CPU_PERCENT: u64 = 25;
/// Keys examined between clock reads.
const EXPIRE_BATCH: usize = 256;
/// Hash fields reclaimed between clock reads (about 50 ns each).
const FIELD_BATCH: usize = 2048;

/// Clients per cron tick above which `dynamic-hz` raises the frequency.
const CLIENTS_PER_TICK: u64 = 200;
/// The highest frequency `dynamic-hz` goes to (`hz`'s own maximum).
const MAX_HZ: u64 = 500;

/// The cron frequency for `configured` hz and `clients` connected: with
/// `dynamic` on, the configured value doubled for as long as each tick
/// would still have more than `CLIENTS_PER_TICK` clients to look at, up to
/// `MAX_HZ`, so per-client periodic work keeps its pace when many connect
/// (Redis's dynamic-hz); otherwise the configured value.
pub fn effective_hz(configured: u64, clients: usize, dynamic: bool) -> u64 {
    let mut hz = configured.clamp(1, MAX_HZ);
    if dynamic {
        while clients as u64 / hz > CLIENTS_PER_TICK && hz < MAX_HZ {
            hz = (hz * 2).min(MAX_HZ);
        }
    }
    hz
}

/// Settles the frequency in effect (`Server::hz`, INFO's `hz`) for the
/// clients connected now: at every tick, and after CONFIG SET.
pub fn update_hz(srv: &mut Server) {
    srv.hz = effective_hz(srv.config.hz, srv.clients.len(), srv.config.flag("dynamic-hz"));
}

/// A writable replica deletes the keys its own clients gave a TTL once
/// due, as Redis's replica does (expireSlaveKeys): its primary, which
/// deletes every other key, never heard of them. A key that lost its TTL
/// or went away is forgotten.
fn expire_local_keys(srv: &mut Server, now: i64) {
    let keys = std::mem::take(&mut srv.repl.local_keys);
    for (db, key) in keys {
        let d = &mut srv.dbs[db];
        let stored = d.stored(&key);
        let kept = d.keep_expired;
        d.keep_expired = false;
        let ttl = d.expire_of(&key, now);
        d.keep_expired = kept;
        match ttl {
            Some(Some(_)) => {
                srv.repl.local_keys.insert((db, key));
            }
            None if stored => srv.expired_keys += 1,
            _ => {}
        }
    }
}

/// One cron tick.
pub fn tick(srv: &mut Server) {
    srv.rebase_clock();
    let now = unix_ms();
    if let Some(p) = srv.pause {
        if now >= p.until {
            srv.set_pause(None);
        }
    }
    // A replica deletes what its primary tells it to, nothing on its own.
    if srv.active_expire_enabled && srv.paused_at(now).is_none() && !srv.is_replica_node() {
        let start = Instant::now();
        if !active_expire(srv, now) {
            srv.expire_cap_reached += 1;
        }
        srv.free_discarded();
        let us = start.elapsed().as_micros() as u64;
        srv.expire_cycle_us += us;
        srv.latency_sample("expire-cycle", us / 1000);
    }
    if srv.repl.is_replica() && !srv.repl.local_keys.is_empty() {
        expire_local_keys(srv, now);
    }
    if srv.config.timeout > 0 {
        let limit = Duration::from_secs(srv.config.timeout);
        let t = Instant::now();
        for c in srv.clients.values_mut() {
            // A blocked client waits on its own deadline, not the idle timeout;
            // subscribers are idle by design.
            if !c.monitor && c.repl_role == crate::client::ReplRole::None && c.multi.is_none() && c.pubsub.is_none() && !c.blocked && t.duration_since(c.last_interaction) > limit {
                c.close_asap = true;
            }
        }
    }
    crate::conn::close_idle_migrate_conns(&mut srv.migrate_conns);
    let t = Instant::now();
    for c in srv.clients.values_mut() {
        // Give back a query buffer that grew for one big request.
        if c.qbuf.is_empty() && c.qbuf.capacity() > 32 * 1024 && c.qbuf_peak < c.qbuf.capacity() / 2 {
            c.qbuf = Vec::new();
        }
        c.qbuf_peak = 0;
        if srv.reply_resizing {
            match c.reply_room.adapt(t, srv.reply_peak_reset, c.reply.buf.len()) {
                Resized::Same => {}
                Resized::Shrunk => srv.reply_shrinks += 1,
                Resized::Expanded => srv.reply_expands += 1,
            }
            // An idle buffer larger than its room gives the rest back.
            if c.sent == c.reply.buf.len() && c.reply.buf.capacity() > c.reply_room.size {
                c.reply.buf = Vec::with_capacity(c.reply_room.size);
                c.sent = 0;
            }
        }
    }
    let (n, el) = (srv.net, &srv.el);
    srv.rates.sample([srv.total_commands, n.input, n.output, n.repl_input, n.repl_output, el.total_cycles, el.total_busy_ns]);
    if let Some(h) = srv.hotkeys.as_deref_mut() {
        h.expire(now);
    }
    let used = srv.used_memory();
    srv.peak_memory = srv.peak_memory.max(used);
    // Even with no command coming, the tracking table comes back within
    // tracking-table-max-keys (after a CONFIG SET lowered it).
    if srv.tracking.clients > 0 {
        publish::limit_tracking_table(srv, None);
    }
}

/// Reclaims due keys across databases within a CPU budget per tick.
///
/// The keyspace walk visits every key, with or without a deadline, so two
/// rules keep it both prompt and cheap: in each database it goes on while a
/// batch yields well (at least a tenth of the volatile keys it passed were
/// due), and in any case until it has covered `1/hz` of the database, so
/// every key is looked at about once a second even when the due ones are
/// few and clustered. The CPU budget bounds both; the next tick resumes
/// where the budget ran out.
///
/// Hash fields come first in each database: the field-expiry index hands out
/// only hashes with due fields, so every batch is useful work, and a hash
/// left empty is deleted (counted in expired_keys, its fields in
/// expired_subkeys).
///
/// Returns false if it stopped at the time budget with work left.
pub fn active_expire(srv: &mut Server, now: i64) -> bool {
    let effort = srv.config.active_expire_effort.clamp(1, 10);
    let hz = srv.hz.max(1);
    let budget = Duration::from_micros((1_000_000 / hz) * (EXPIRE_CPU_PERCENT + 2 * (effort - 1)) / 100);
    let start = Instant::now();
    let ndb = srv.dbs.len();
    let first = srv.expire_db_cursor % ndb.max(1);
    let flags = srv.config.notify_flags;
    let (tell_keys, tell_fields) = (notify::wanted(flags, notify::EXPIRED), notify::wanted(flags, notify::HASH | notify::SET | notify::ZSET | notify::GENERIC));
    // Expired keys are invalidated for the clients that may cache them.
    let track = srv.tracking.clients > 0;
    // Expired keys leave the write stream as DEL (UNLINK with
    // lazyfree-lazy-expire), as Redis propagates them to replicas and the AOF.
    let replay_keys = !srv.feed.is_empty();
    let expire_cmd = srv.expire_cmd();
    let (tell_keys, want_fields) = (tell_keys || track || replay_keys, tell_fields || track);
    // Keys to publish events for, filled by the storage callbacks only
    // when someone may hear them.
    let mut hit: Vec<Box<[u8]>> = Vec::new();
    // Their types, for the event names (hash, set or sorted set).
    let mut hit_kind: Vec<Kind> = Vec::new();
    // HDELs (SREMs, ZREMs) to propagate, filled only when the write stream
    // has a consumer.
    let mut hdels: Vec<Vec<Vec<u8>>> = Vec::new();
    // Volatile keys looked at and found due, for expired_stale_perc.
    let (mut sampled, mut due) = (0.0, 0u64);
    for d in 0..ndb {
        // Lazy member expiry recorded outside a command (eviction's
        // lookups): counted and replayed now.
        if srv.dbs[d].has_member_expiry() {
            publish::member_expiry(srv, None, d);
        }
    }
    for k in 0..ndb {
        let i = (first + k) % ndb;
        let min_sweep = srv.dbs[i].len() / hz as usize;
        let mut examined_here = 0;
        loop {
            if start.elapsed() >= budget {
                srv.expire_db_cursor = i;
                record_stale(srv, sampled, due);
                return false;
            }
            let replay = !srv.feed.is_empty();
            let (fields, keys) = srv.dbs[i].active_expire_members(now, FIELD_BATCH, |kind, key, field| {
                if want_fields && hit.last().is_none_or(|k| **k != *key) {
                    hit.push(key.into());
                    hit_kind.push(kind);
                }
                if replay {
                    let cmd: &[u8] = match kind {
                        Kind::Set => b"SREM",
                        Kind::ZSet => b"ZREM",
                        _ => b"HDEL",
                    };
                    hdels.push(vec![cmd.to_vec(), key.to_vec(), field.to_vec()]);
                }
            });
            // Each expired field is replayed as its own HDEL, as Redis does.
            for argv in hdels.drain(..) {
                srv.feed.push(i, argv);
            }
            srv.expired_subkeys += fields as u64;
            srv.expired_keys += keys as u64;
            for (key, kind) in hit.drain(..).zip(hit_kind.drain(..)) {
                if track {
                    publish::invalidate_key(srv, None, None, &key, true);
                }
                if !tell_fields {
                    continue;
                }
                // One `hexpired` (`sexpired`, `zexpired`) per key per
                // batch, then `del` if the key went (a lookup that neither
                // touches nor expires).
                let (class, event) = match kind {
                    Kind::Set => (notify::SET, "sexpired"),
                    Kind::ZSet => (notify::ZSET, "zexpired"),
                    _ => (notify::HASH, "hexpired"),
                };
                publish::emit(srv, None, i, class, event, &key);
                if srv.dbs[i].idle_secs(&key, now).is_none() {
                    publish::emit(srv, None, i, notify::GENERIC, "del", &key);
                }
            }
            if fields < FIELD_BATCH {
                break;
            }
        }
        loop {
            if start.elapsed() >= budget {
                srv.expire_db_cursor = i;
                record_stale(srv, sampled, due);
                return false;
            }
            let db = &mut srv.dbs[i];
            let volatile_share = db.volatile_len() as f64 / db.len().max(1) as f64;
            let (examined, expired) = db.active_expire(now, EXPIRE_BATCH, |key| {
                if tell_keys {
                    hit.push(key.into());
                }
            });
            srv.expired_keys += expired as u64;
            for key in hit.drain(..) {
                if replay_keys {
                    srv.feed.push(i, vec![expire_cmd.to_vec(), key.to_vec()]);
                }
                if track {
                    publish::invalidate_key(srv, None, None, &key, true);
                }
                publish::emit(srv, None, i, notify::EXPIRED, "expired", &key);
            }
            examined_here += examined;
            // The walk visits every key; the volatile ones among them are
            // what Redis's sampling looks at.
            sampled += examined as f64 * volatile_share;
            due += expired as u64;
            let good = (expired as f64) >= 0.1 * examined as f64 * volatile_share;
            if examined < EXPIRE_BATCH || (!good && examined_here >= min_sweep) {
                break;
            }
        }
    }
    srv.expire_db_cursor = (first + 1) % ndb.max(1);
    record_stale(srv, sampled, due);
    true
}

/// INFO expired_stale_perc: the share of volatile keys a cycle found due,
/// smoothed over cycles as Redis smooths it (5% of each new cycle).
fn record_stale(srv: &mut Server, sampled: f64, due: u64) {
    let current = if sampled > 0.0 { (due as f64 / sampled).min(1.0) } else { 0.0 };
    srv.expired_stale_perc = current * 0.05 + srv.expired_stale_perc * 0.95;
}

#[cfg(test)]
mod tests {
    use super::effective_hz;

    #[test]
    fn dynamic_hz_doubles_with_clients_up_to_the_maximum() {
        assert_eq!(effective_hz(10, 0, true), 10);
        assert_eq!(effective_hz(10, 2000, true), 10);
        assert_eq!(effective_hz(10, 2010, true), 20);
        assert_eq!(effective_hz(10, 10_000, true), 80);
        assert_eq!(effective_hz(10, 1_000_000, true), 500);
        assert_eq!(effective_hz(300, 1_000_000, true), 500);
        assert_eq!(effective_hz(10, 1_000_000, false), 10);
        assert_eq!(effective_hz(500, 0, false), 500);
    }
}
