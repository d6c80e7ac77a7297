//! Periodic work run by the event loop `hz` times a second: active expiry,
//! idle-client timeouts, the end of CLIENT PAUSE, memory peak tracking.

use std::time::{Duration, Instant};

use crate::server::{unix_ms, Server};

/// Share of one tick the active expiry cycle may use, in percent, at effort 1
/// (Redis uses 25%); each effort step adds 2 points.
const EXPIRE_CPU_PERCENT: u64 = 25;
/// Keys examined between clock reads.
const EXPIRE_BATCH: usize = 256;

/// One cron tick.
pub fn tick(srv: &mut Server) {
    let now = unix_ms();
    if let Some(p) = srv.pause {
        if now >= p.until {
            srv.pause = None;
        }
    }
    if srv.active_expire_enabled {
        active_expire(srv, now);
    }
    if srv.config.timeout > 0 {
        let limit = Duration::from_secs(srv.config.timeout);
        let t = Instant::now();
        for c in srv.clients.values_mut() {
            if !c.monitor && c.multi.is_none() && t.duration_since(c.last_interaction) > limit {
                c.close_asap = true;
            }
        }
    }
    for c in srv.clients.values_mut() {
        // Give back a query buffer that grew for one big request.
        if c.qbuf.len() == 0 && c.qbuf.capacity() > 32 * 1024 && c.qbuf_peak < c.qbuf.capacity() / 2 {
            c.qbuf = Vec::new();
        }
        c.qbuf_peak = 0;
    }
    let (t0, n0) = srv.ops_sample;
    let dt = t0.elapsed().as_secs_f64();
    if dt >= 0.1 {
        srv.ops_per_sec = (srv.total_commands.saturating_sub(n0) as f64 / dt) as u64;
        srv.ops_sample = (Instant::now(), srv.total_commands);
    }
    let used = crate::memory::allocated();
    srv.peak_memory = srv.peak_memory.max(used);
}

/// Reclaims due keys across databases within a CPU budget per tick.
pub fn active_expire(srv: &mut Server, now: i64) {
    let effort = srv.config.active_expire_effort;
    let budget = Duration::from_micros((1_000_000 / srv.config.hz) * (EXPIRE_CPU_PERCENT + 2 * (effort - 1)) / 100);
    let start = Instant::now();
    let ndb = srv.dbs.len();
    let mut idle_dbs = 0;
    while idle_dbs < ndb && start.elapsed() < budget {
        let i = srv.expire_db_cursor % ndb;
        let (examined, expired) = srv.dbs[i].active_expire(now, EXPIRE_BATCH, |_| {});
        srv.expired_keys += expired as u64;
        if examined < EXPIRE_BATCH || expired * 10 < examined {
            // Little is due here: move on to the next database.
            srv.expire_db_cursor = (i + 1) % ndb;
            idle_dbs += 1;
        } else {
            idle_dbs = 0;
        }
    }
}
