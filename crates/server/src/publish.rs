//! Delivery: Pub/Sub messages, keyspace notifications and client-side
//! caching invalidations reaching clients.
//!
//! The registry of who listens to what is `pubsub.rs`, below the server
//! state; this layer, above it, writes messages into subscribers' reply
//! buffers. A message for another client is appended to that client's reply
//! buffer and the client is queued with `Server::wake` so that the event
//! loop writes it. A message for the client running the command (a RESP3
//! client publishing to itself) waits in `Server::pending_push` until the
//! command, or the whole EXEC, has replied, as Redis orders it.
//!
//! Keyspace notifications: every write calls `Ctx::notify(class, event,
//! key)`, which lands in [`emit`] when the class is on (`notify.rs` holds
//! the classes and the flag word). The event goes out through
//! [`publish_from`] like any message, as `__keyspace@<db>__:<key>` (message:
//! the event) when `K` is set, then `__keyevent@<db>__:<event>` (message:
//! the key) when `E` is set. Events born inside storage (lazy expiry, key
//! creation) are recorded by the database and published by
//! [`flush_db_log`] before the command's next event or after the command;
//! cron publishes active-expiry events with no running client.
//!
//! Invalidations (CLIENT TRACKING; the tables are `tracking.rs`): a change
//! to a key reaches [`invalidate_key`] from the write epilogue, expiry and
//! the table limit; flushes reach [`invalidate_all`]. Messages for the
//! running client wait in `Tracking::pending` and leave after its reply
//! ([`flush_invalidations`]); BCAST changes are gathered and sent once per
//! event-loop turn ([`broadcast_invalidations`]).

use resp::Reply;

use crate::client::{Client, ClientId, Kind, ReplyMode};
use crate::notify;
use crate::server::Server;

/// Writes a (un)subscribe confirmation to the running client. These are
/// push replies: CLIENT REPLY OFF does not silence them, so when replies are
/// off they go where the exec epilogue appends them after the truncation.
pub fn confirm(srv: &mut Server, c: &mut Client, word: &[u8], name: Option<&[u8]>, count: usize) {
    let silenced = c.reply_mode != ReplyMode::On;
    let mut tmp = Reply::new();
    tmp.resp3 = c.reply.resp3;
    let out = if silenced { &mut tmp } else { &mut c.reply };
    out.push(3);
    out.bulk(word);
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
    srv.pending_push.extend_from_slice(&tmp.buf);
}

/// Publishes `msg` on `channel` (a shard channel when `shard`) to every
/// subscriber and matching pattern; `cur` is the client running the
/// command. Returns the number of deliveries (PUBLISH's reply).
pub fn publish(srv: &mut Server, cur: &mut Client, channel: &[u8], msg: &[u8], shard: bool) -> usize {
    publish_from(srv, Some((cur.id, cur.reply.resp3)), channel, msg, shard)
}

/// `publish` where the running client, if any, is given as (id, speaks
/// RESP3): cron publishes expiry events while no client runs.
pub fn publish_from(srv: &mut Server, cur: Option<(ClientId, bool)>, channel: &[u8], msg: &[u8], shard: bool) -> usize {
    if srv.pubsub.is_empty() {
        return 0;
    }
    let mut n = 0;
    let (kind, word): (Kind, &[u8]) = if shard { (Kind::Shard, b"smessage") } else { (Kind::Channel, b"message") };
    let direct: Vec<ClientId> = srv.pubsub.map_ref(kind).get(channel).cloned().unwrap_or_default();
    for id in direct {
        deliver(srv, cur, id, &[word, channel, msg]);
        n += 1;
    }
    let patterns = srv.pubsub.map_ref(Kind::Pattern);
    if !shard && !patterns.is_empty() {
        let hits: Vec<(Vec<u8>, ClientId)> = patterns
            .iter()
            .filter(|(p, _)| crate::glob::matches(p, channel, false))
            .flat_map(|(p, ids)| ids.iter().map(move |&id| (p.clone(), id)))
            .collect();
        for (pat, id) in hits {
            deliver(srv, cur, id, &[b"pmessage", &pat, channel, msg]);
            n += 1;
        }
    }
    n
}

/// Appends one push message to client `id`'s output and has it flushed.
/// A client over its output buffer limit is closed (`obuf`).
fn deliver(srv: &mut Server, cur: Option<(ClientId, bool)>, id: ClientId, parts: &[&[u8]]) {
    if let Some((_, resp3)) = cur.filter(|c| c.0 == id) {
        let mut r = Reply::new();
        r.resp3 = resp3;
        write_push(&mut r, parts);
        srv.pending_push.extend_from_slice(&r.buf);
        return;
    }
    let Server { clients, config, .. } = srv;
    let Some(c) = clients.get_mut(&id) else { return };
    if c.close_asap {
        return;
    }
    write_push(&mut c.reply, parts);
    let over = crate::obuf::reached(&config.obuf, c);
    pushed(srv, id, over);
}

/// Client `id` (in the registry) got output pushed: it is closed if that
/// took it `over` its output buffer limit, and flushed at the turn's end.
fn pushed(srv: &mut Server, id: ClientId, over: bool) {
    if over {
        if let Some(mut c) = srv.clients.remove(&id) {
            crate::obuf::close(srv, &mut c);
            srv.clients.insert(id, c);
        }
    }
    srv.wake(id);
}

fn write_push(r: &mut Reply, parts: &[&[u8]]) {
    r.push(parts.len());
    for p in parts {
        r.bulk(p);
    }
}

/// The client a message is published from: the one running the command, if
/// any (cron has none).
pub type From<'a> = Option<&'a mut Client>;

/// Publishes one event of `class` on key `key` of database `db`, after the
/// events storage recorded in that database. The caller has checked
/// `wanted`.
pub fn emit(srv: &mut Server, mut cur: From<'_>, db: usize, class: u32, event: &str, key: &[u8]) {
    flush_db_log(srv, cur.as_deref_mut(), db);
    publish_event(srv, cur, db, class, event, key);
}

/// Publishes (or, with no subscriber anywhere, drops) the events storage
/// recorded in database `db`.
pub fn flush_db_log(srv: &mut Server, mut cur: From<'_>, db: usize) {
    if !srv.dbs[db].has_events() {
        return;
    }
    for (ev, key) in srv.dbs[db].take_events() {
        if ev == storage::KeyEvent::Expired {
            // A key found expired goes to the AOF and replicas as DEL
            // (UNLINK with lazyfree-lazy-expire) when found, so ahead of
            // the command that found it: a replica keeps due keys until
            // told, and an AOF replays the command onto the old key.
            if !srv.feed.is_empty() {
                let cmd = srv.expire_cmd().to_vec();
                srv.feed.push(db, vec![cmd, key.to_vec()]);
            }
            if srv.tracking.clients > 0 {
                invalidate_key(srv, cur.as_deref(), None, &key, true);
            }
        }
        let (class, name) = match ev {
            storage::KeyEvent::Expired => (notify::EXPIRED, "expired"),
            storage::KeyEvent::New => (notify::NEW, "new"),
            storage::KeyEvent::MembersExpired(storage::value::Kind::ZSet) => (notify::ZSET, "zexpired"),
            storage::KeyEvent::MembersExpired(_) => (notify::SET, "sexpired"),
            storage::KeyEvent::Emptied => (notify::GENERIC, "del"),
            storage::KeyEvent::Miss => (notify::KEY_MISS, "keymiss"),
        };
        publish_event(srv, cur.as_deref_mut(), db, class, name, &key);
    }
}

/// Members of sets and sorted sets that reaching a key found past their
/// TTL and removed (lazy member expiry, in the keyspace) in database `d`:
/// counted in expired_subkeys (and the key in expired_keys when it went
/// with them), replayed as one SREM / ZREM per member before the command
/// itself, as hash fields' expiry goes out as HDELs, and signalled as a
/// change of the key (WATCH, client tracking). Their keyspace events
/// (`sexpired` / `zexpired`, then `del`) come through the database's event
/// log, ahead of the command's own. `cur` is the client whose command
/// reached the keys (None from cron).
pub fn member_expiry(srv: &mut Server, mut cur: Option<&mut Client>, d: usize) {
    for e in srv.dbs[d].take_member_expiry() {
        srv.expired_subkeys += e.members.len() as u64;
        srv.expired_keys += u64::from(e.deleted);
        if !srv.feed.is_empty() {
            let cmd: &[u8] = if e.kind == storage::value::Kind::ZSet { b"ZREM" } else { b"SREM" };
            for m in e.members {
                srv.feed.push(d, vec![cmd.to_vec(), e.key.to_vec(), m.into_vec()]);
            }
        }
        match cur.as_deref_mut() {
            Some(c) => srv.touch_watched(d, &e.key, c),
            None => srv.touch_watched_all(d, &e.key),
        }
        if srv.tracking.clients > 0 {
            let by = cur.as_deref().map(|c| c.id);
            invalidate_key(srv, cur.as_deref(), by, &e.key, true);
        }
    }
}

fn publish_event(srv: &mut Server, cur: From<'_>, db: usize, class: u32, event: &str, key: &[u8]) {
    let flags = srv.config.notify_flags;
    if !notify::wanted(flags, class) || srv.pubsub.is_empty() {
        return;
    }
    let from: Option<(ClientId, bool)> = cur.map(|c| (c.id, c.reply.resp3));
    if flags & notify::KEYSPACE != 0 {
        let mut chan = format!("__keyspace@{db}__:").into_bytes();
        chan.extend_from_slice(key);
        publish_from(srv, from, &chan, event.as_bytes(), false);
    }
    if flags & notify::KEYEVENT != 0 {
        let chan = format!("__keyevent@{db}__:{event}");
        publish_from(srv, from, chan.as_bytes(), key, false);
    }
}

// ------------------------------------------------------- client tracking

/// What one invalidation message says: the keys are invalid.
#[derive(Debug, Clone, Copy)]
pub enum Invalid<'a> {
    /// One key.
    Key(&'a [u8]),
    /// Several keys, already written as a RESP array of bulk strings (a
    /// BCAST broadcast builds it once for all its clients).
    Keys(&'a [u8]),
    /// Every key (a flush), as the null of the given RESP version: that of
    /// the tracking client, even when redirected, as Redis sends it.
    All { resp3: bool },
}

/// Writes the invalidation message for a sink that speaks `resp3` and,
/// if `redirected` there, is subscribed (`pubsub`): a RESP3 push, a
/// `__redis__:invalidate` Pub/Sub message for a subscribed RESP2 client a
/// message is redirected to, or nothing (RESP2 has no push). Returns
/// true if something was written.
fn write_invalidation(r: &mut Reply, resp3: bool, pubsub: bool, redirected: bool, what: Invalid<'_>) -> bool {
    if resp3 {
        r.push(2);
        r.bulk(b"invalidate");
    } else if redirected && pubsub {
        r.push(3);
        r.bulk(b"message");
        r.bulk(b"__redis__:invalidate");
    } else {
        return false;
    }
    match what {
        Invalid::Key(k) => {
            r.array(1);
            r.bulk(k);
        }
        Invalid::Keys(proto) => r.raw(proto),
        Invalid::All { resp3: true } => r.raw(b"_\r\n"),
        Invalid::All { resp3: false } => r.raw(b"$-1\r\n"),
    }
    true
}

/// Appends a message for the running client, which follows its reply.
fn to_running(srv: &mut Server, running: &Client, f: impl FnOnce(&mut Reply) -> bool) {
    let mut r = Reply::new();
    r.resp3 = running.reply.resp3;
    if f(&mut r) {
        srv.pending_push.extend_from_slice(&r.buf);
    }
}

/// Sends one invalidation for tracking client `target`, to it or to the
/// client it redirects to; `running` is the client running a command (not
/// in `srv.clients`), if any, whose messages follow its reply. A
/// redirection to a client that left marks `target`'s redirection broken
/// and, in RESP3, tells `target` so.
fn send_invalidation(srv: &mut Server, running: Option<&mut Client>, target: ClientId, what: Invalid<'_>) {
    let is_running = running.as_ref().is_some_and(|c| c.id == target);
    let (redirect, resp3) = {
        let t = if is_running { running.as_deref() } else { srv.clients.get(&target) };
        let Some(t) = t else { return };
        (t.tracking.as_ref().map_or(0, |x| x.redirect), t.reply.resp3)
    };
    if redirect == 0 {
        if is_running {
            let Some(c) = running else { return };
            to_running(srv, c, |r| write_invalidation(r, resp3, false, false, what));
        } else if let Some(c) = srv.clients.get_mut(&target) {
            if write_invalidation(&mut c.reply, resp3, false, false, what) {
                let over = crate::obuf::reached(&srv.config.obuf, c);
                pushed(srv, target, over);
            }
        }
        return;
    }
    if let Some(c) = running.as_deref().filter(|c| c.id == redirect) {
        let pubsub = c.pubsub.is_some();
        let resp3 = c.reply.resp3;
        to_running(srv, c, |r| write_invalidation(r, resp3, pubsub, true, what));
        return;
    }
    if let Some(c) = srv.clients.get_mut(&redirect) {
        let (resp3, pubsub) = (c.reply.resp3, c.pubsub.is_some());
        if write_invalidation(&mut c.reply, resp3, pubsub, true, what) {
            let over = crate::obuf::reached(&srv.config.obuf, c);
            pushed(srv, redirect, over);
        }
        return;
    }
    // The redirection client is gone.
    let broken = |r: &mut Reply| {
        r.push(2);
        r.bulk(b"tracking-redir-broken");
        r.int(redirect as i64);
        true
    };
    if is_running {
        let Some(c) = running else { return };
        if let Some(t) = c.tracking.as_mut() {
            t.broken_redirect = true;
        }
        if resp3 {
            to_running(srv, c, broken);
        }
    } else if let Some(c) = srv.clients.get_mut(&target) {
        if let Some(t) = c.tracking.as_mut() {
            t.broken_redirect = true;
        }
        if resp3 {
            broken(&mut c.reply);
            srv.wake(target);
        }
    }
}

/// Invalidates `key` after a change: every default-mode client that read it
/// is told (the running client after its reply; a NOLOOP one not about a
/// change made while it runs), and, when `bcast`, the change is noted for
/// the BCAST prefixes that match, as made by `by` (None: expiry). The
/// caller has checked `srv.tracking.clients`.
pub fn invalidate_key(srv: &mut Server, running: Option<&Client>, by: Option<ClientId>, key: &[u8], bcast: bool) {
    if bcast {
        srv.tracking.note_change(key, by);
    }
    let Some(ids) = srv.tracking.take_key(key) else { return };
    for id in ids {
        if let Some(c) = running.filter(|c| c.id == id) {
            // The running client hears of it after its reply.
            match c.tracking.as_deref() {
                Some(t) if !t.bcast && !t.noloop => srv.tracking.pending.push(Some(key.to_vec())),
                _ => {}
            }
            continue;
        }
        let tracks = srv.clients.get(&id).and_then(|c| c.tracking.as_deref()).is_some_and(|t| !t.bcast);
        if tracks {
            send_invalidation(srv, None, id, Invalid::Key(key));
        }
    }
}

/// A flush (FLUSHALL, FLUSHDB): every tracking client is told that every
/// key is invalid (the running one after its reply), and the key table is
/// emptied.
pub fn invalidate_all(srv: &mut Server, running: Option<&Client>) {
    if srv.tracking.clients == 0 {
        return;
    }
    let mut ids: Vec<(ClientId, bool)> = srv.clients.values().filter(|c| c.tracking.is_some()).map(|c| (c.id, c.reply.resp3)).collect();
    ids.sort_unstable();
    for (id, resp3) in ids {
        send_invalidation(srv, None, id, Invalid::All { resp3 });
    }
    if running.is_some_and(|c| c.tracking.is_some()) {
        srv.tracking.pending.push(None);
    }
    srv.tracking.clear_keys();
}

/// Sends the running client's pending invalidations (after its reply, the
/// whole EXEC's or script's), ahead of its other pushes.
pub fn flush_invalidations(srv: &mut Server, c: &mut Client) {
    let resp3 = c.reply.resp3;
    for what in std::mem::take(&mut srv.tracking.pending) {
        let id = c.id;
        match &what {
            Some(k) => send_invalidation(srv, Some(&mut *c), id, Invalid::Key(k)),
            None => send_invalidation(srv, Some(&mut *c), id, Invalid::All { resp3 }),
        }
    }
}

/// Sends BCAST clients the keys changed under their prefixes since the last
/// call: one message per prefix, the same to every client but NOLOOP ones,
/// which are not told about keys they changed last. Called by the event
/// loop between turns, with no client running.
pub fn broadcast_invalidations(srv: &mut Server) {
    for b in srv.tracking.take_broadcasts() {
        let proto = keys_array(b.keys.iter().map(|(k, _)| &k[..]), b.keys.len());
        for &id in &b.clients {
            let noloop = srv.clients.get(&id).and_then(|c| c.tracking.as_deref()).map(|t| t.noloop);
            match noloop {
                None => {}
                Some(false) => send_invalidation(srv, None, id, Invalid::Keys(&proto)),
                Some(true) => {
                    let mine = |by: &Option<ClientId>| *by == Some(id);
                    let n = b.keys.iter().filter(|(_, by)| !mine(by)).count();
                    if n > 0 {
                        let own = keys_array(b.keys.iter().filter(|(_, by)| !mine(by)).map(|(k, _)| &k[..]), n);
                        send_invalidation(srv, None, id, Invalid::Keys(&own));
                    }
                }
            }
        }
    }
}

fn keys_array<'k>(keys: impl Iterator<Item = &'k [u8]>, n: usize) -> Vec<u8> {
    let mut r = Reply::new();
    r.array(n);
    for k in keys {
        r.bulk(k);
    }
    r.buf
}

/// Keeps the key table within `tracking-table-max-keys`, invalidating the
/// keys it drops as if they had changed (BCAST clients are not told:
/// nothing changed). `running` is the client about to run a command, whose
/// messages it gets at once, before that command's reply.
pub fn limit_tracking_table(srv: &mut Server, running: Option<&mut Client>) {
    let max = srv.config.get("tracking-table-max-keys").and_then(|v| v.parse().ok()).unwrap_or(0);
    let victims = srv.tracking.over_limit(max);
    if victims.is_empty() {
        return;
    }
    match running {
        Some(c) => {
            for k in &victims {
                invalidate_key(srv, Some(&*c), None, k, false);
            }
            flush_invalidations(srv, c);
            c.reply.raw(&srv.pending_push);
            srv.pending_push.clear();
        }
        None => {
            for k in &victims {
                invalidate_key(srv, None, None, k, false);
            }
        }
    }
}
