//! Client eviction under maxmemory-clients (Redis's evictClients): when
//! the memory of all normal and Pub/Sub connections together reaches the
//! limit, the largest evictable ones are closed until it is under again.
//!
//! Each client is counted at `Client::memory_kept` into `Server::client_mem`
//! (`mem_counted` remembers its share): after each of its turns, after a
//! flush of replies others pushed to it (Pub/Sub, invalidations, MONITOR),
//! in cron, as an I/O thread's input arrives (its bytes, until the turn
//! counts the client exactly: `arrived`), and all at once at the end of the turn that changed
//! maxmemory-clients or maxmemory (as Redis evicts after the command, with
//! the running client counted as its turn leaves it).
//! Replicas, the primary and internal clients are not counted; clients
//! with CLIENT NO-EVICT are counted but never chosen. An evicted client
//! loses its unsent replies and is closed at the end of the loop turn.

use std::time::Instant;

use crate::client::{Client, ClientId, ReplRole};
use crate::server::Server;

/// True if a client's memory counts in the total.
fn counted(c: &Client) -> bool {
    c.connected() && c.repl_role == ReplRole::None && !c.close_asap
}

/// True if the client may be chosen.
fn evictable(c: &Client) -> bool {
    counted(c) && !c.no_evict
}

/// True if maxmemory-clients is set.
pub fn enabled(srv: &Server) -> bool {
    srv.config.maxmemory_clients > 0
}

/// Brings `c`'s share of the total up to date.
pub fn account(srv: &mut Server, c: &mut Client) {
    let now = if counted(c) { c.memory_kept() } else { 0 };
    srv.client_mem = srv.client_mem - c.mem_counted + now;
    c.mem_counted = now;
}

/// Takes a closing client's share out of the total.
pub fn forget(srv: &mut Server, c: &mut Client) {
    srv.client_mem -= c.mem_counted;
    c.mem_counted = 0;
}

/// Counts the running client `c` (out of the registry) after its turn
/// and evicts if the total reached the limit. True if `c` was evicted.
pub fn after_turn(srv: &mut Server, c: &mut Client) -> bool {
    if std::mem::take(&mut srv.client_mem_stale) {
        recount(srv, Some(c));
        return c.close_asap;
    }
    if !enabled(srv) || c.close_asap {
        return false;
    }
    account(srv, c);
    evict(srv, Some(c));
    c.close_asap
}

/// Counts client `id` (in the registry) again and evicts if needed: after
/// replies pushed by others were flushed to it.
pub fn after_push(srv: &mut Server, id: ClientId) {
    if !enabled(srv) {
        return;
    }
    if let Some(mut c) = srv.clients.take(&id) {
        account(srv, &mut c);
        srv.clients.put(id, c);
    }
    evict_now(srv);
}

/// Adds `bytes` of input an I/O thread just delivered to client `c`'s
/// share, as its memory until its turn counts it exactly; returns what to
/// add to `Server::client_mem`. The threads' read buffers are already in
/// used_memory, so a command served before `c` (and the key eviction it
/// runs) must see them as `c`'s, as it does when the executor reads each
/// socket as it serves it. Only the bytes of an unfinished request count,
/// not whole requests this turn runs (on the event loop those sit in the
/// shared read buffer, no client's), nor the buffer's room or what parsing
/// will make: `c` is not charged more than it will hold.
pub fn arrived(c: &mut Client, bytes: usize) -> usize {
    if !counted(c) {
        return 0;
    }
    c.mem_counted += bytes;
    bytes
}

/// Counts every client afresh (cron; a new limit) and evicts if needed.
/// `current` is the running client, out of the registry, if any.
pub fn recount(srv: &mut Server, mut current: Option<&mut Client>) {
    if !enabled(srv) {
        return;
    }
    let mut total = 0;
    for c in srv.clients.values_mut() {
        c.mem_counted = if counted(c) { c.memory_kept() } else { 0 };
        total += c.mem_counted;
    }
    if let Some(c) = current.as_deref_mut() {
        c.mem_counted = if counted(c) { c.memory_kept() } else { 0 };
        total += c.mem_counted;
    }
    srv.client_mem = total;
    evict(srv, current);
}

/// Evicts if the total reached the limit, no client running (after
/// `arrived`, `after_push`).
pub fn evict_now(srv: &mut Server) {
    evict(srv, None);
}

/// Closes the largest evictable clients while the total is at or over
/// the limit. `current` is the running client, out of the registry.
fn evict(srv: &mut Server, mut current: Option<&mut Client>) {
    let limit = srv.config.maxmemory_clients as usize;
    if limit == 0 || srv.client_mem < limit {
        return;
    }
    let mut candidates: Vec<(usize, ClientId)> = srv.clients.values().filter(|c| evictable(c)).map(|c| (c.mem_counted, c.id)).collect();
    if let Some(c) = current.as_deref().filter(|c| evictable(c)) {
        candidates.push((c.mem_counted, c.id));
    }
    // Largest first; among equals, the newest connection.
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    let now = Instant::now();
    for (_, id) in candidates {
        if srv.client_mem < limit {
            break;
        }
        let c = match current.as_deref_mut() {
            Some(c) if c.id == id => c,
            _ => match srv.clients.get_mut(&id) {
                Some(c) => c,
                None => continue,
            },
        };
        let line = c.info_line(now);
        c.reply.buf.truncate(c.sent);
        c.close_asap = true;
        let mem = std::mem::take(&mut c.mem_counted);
        srv.client_mem -= mem;
        srv.config.log.verbose(&format!("Evicting client: {line}"));
        srv.evicted_clients += 1;
        srv.sweep_clients = true;
    }
}
