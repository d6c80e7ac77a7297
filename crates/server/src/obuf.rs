//! client-output-buffer-limit for normal and Pub/Sub clients (Redis's
//! checkClientOutputBufferLimits): a client whose unsent output reaches its
//! class's hard limit, or stays at or above the soft limit for longer than
//! its seconds, is closed with its unsent replies dropped.
//!
//! Checked where output grows (after a client's own commands, when a
//! publish or an invalidation is pushed to it) and in cron, so that a soft
//! limit expires on a client nobody writes to any more. What counts is
//! what Redis counts for the same unsent bytes: the first `REPLY_BUF_FREE`
//! sit in a fixed per-client buffer its limit leaves out (a reply that
//! fits there never closes a client, whatever the limit); the rest sit in
//! blocks of 16 KiB, each counted at the size its allocation really takes
//! (16 KiB and a 16-byte header come from the allocator's 20 KiB class)
//! plus its list node. So a limit closes a client at the same reply size
//! in both servers: KEYS of 110 KB passes a 100,000-byte limit (six
//! blocks) where the bare byte count, 94 KB past the fixed buffer, would
//! not (the arithmetic is `client::reply_usage`, below this module, so
//! CLIENT LIST's `omem`, `obl` and `oll` report the same figures).
//! Replicas are held to the replica class on their stream by
//! `replication`, through `over`.

use std::time::Instant;

use crate::client::{reply_usage as usage, Client, ClientId, ReplRole};
use crate::config::{ObufConfig, ObufLimit};
use crate::server::Server;

/// The limits of `c`'s class; None for replicas and the primary.
fn limits(cfg: &ObufConfig, c: &Client) -> Option<ObufLimit> {
    match c.repl_role {
        ReplRole::None if c.pubsub.is_some() => Some(cfg.pubsub),
        ReplRole::None => Some(cfg.normal),
        _ => None,
    }
}

/// True if `c` passed its class's limit (replicas: see `over`).
pub fn reached(cfg: &ObufConfig, c: &mut Client) -> bool {
    let Some(l) = limits(cfg, c) else { return false };
    over(l, usage(c.pending_out()), &mut c.obuf_soft_since)
}

/// True if output of `used` bytes passed limit `l`. Starts the soft-limit
/// clock (`soft_since`) when the output first reaches the soft limit, and
/// stops it once the output falls under it again.
pub fn over(l: ObufLimit, used: u64, soft_since: &mut Option<Instant>) -> bool {
    if l.hard > 0 && used >= l.hard {
        return true;
    }
    if l.soft > 0 && used >= l.soft {
        match soft_since {
            None => {
                *soft_since = Some(Instant::now());
                false
            }
            Some(since) => since.elapsed().as_millis() > u128::from(l.soft_secs) * 1000,
        }
    } else {
        *soft_since = None;
        false
    }
}

/// Closes `c` for passing its output limit: its unsent replies never
/// leave, and the closing is counted and logged as Redis does.
pub fn close(srv: &mut Server, c: &mut Client) {
    c.reply.buf.truncate(c.sent);
    c.close_asap = true;
    srv.obuf_kills += 1;
    srv.sweep_clients = true;
    srv.config.log.warning(&format!("Client {} scheduled to be closed ASAP for overcoming of output buffer limits.", c.info_line(Instant::now())));
}

/// `reached` then `close` for `c` (out of the registry); true if it was
/// closed.
pub fn enforce(srv: &mut Server, c: &mut Client) -> bool {
    if !c.close_asap && reached(&srv.config.obuf, c) {
        close(srv, c);
        return true;
    }
    false
}

/// Cron: applies the limits to every client with output waiting, so a soft
/// limit runs out on a client that receives nothing more.
pub fn cron(srv: &mut Server) {
    let waiting: Vec<ClientId> = srv.clients.values().filter(|c| c.obuf_soft_since.is_some() || c.pending_out() > 0).map(|c| c.id).collect();
    for id in waiting {
        if let Some(mut c) = srv.clients.remove(&id) {
            enforce(srv, &mut c);
            srv.clients.insert(id, c);
        }
    }
}
