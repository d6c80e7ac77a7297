//! Delivery: Pub/Sub messages and keyspace notifications reaching clients.
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

/// The pubsub class of client-output-buffer-limit: (hard, soft) bytes.
fn pubsub_limits(srv: &Server) -> (u64, u64) {
    obuf_limits(srv, "pubsub")
}

/// One class (`normal`, `replica`, `pubsub`) of client-output-buffer-limit:
/// (hard, soft) bytes, 0 for no limit.
pub fn obuf_limits(srv: &Server, class: &str) -> (u64, u64) {
    let spec = srv.config.get("client-output-buffer-limit").unwrap_or("");
    let words: Vec<&str> = spec.split_whitespace().collect();
    let at = words.iter().position(|w| w.eq_ignore_ascii_case(class));
    let num = |i: usize| words.get(i).and_then(|w| crate::config::parse_memory(w)).map_or(0, |v| v.max(0) as u64);
    at.map_or((0, 0), |i| (num(i + 1), num(i + 2)))
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
    let (hard, _soft) = pubsub_limits(srv);
    let mut n = 0;
    let (kind, word): (Kind, &[u8]) = if shard { (Kind::Shard, b"smessage") } else { (Kind::Channel, b"message") };
    let direct: Vec<ClientId> = srv.pubsub.map_ref(kind).get(channel).cloned().unwrap_or_default();
    for id in direct {
        deliver(srv, cur, id, hard, &[word, channel, msg]);
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
            deliver(srv, cur, id, hard, &[b"pmessage", &pat, channel, msg]);
            n += 1;
        }
    }
    n
}

/// Appends one push message to client `id`'s output and has it flushed.
/// A client whose output passes the pubsub hard limit is closed.
fn deliver(srv: &mut Server, cur: Option<(ClientId, bool)>, id: ClientId, hard: u64, parts: &[&[u8]]) {
    if let Some((_, resp3)) = cur.filter(|c| c.0 == id) {
        let mut r = Reply::new();
        r.resp3 = resp3;
        write_push(&mut r, parts);
        srv.pending_push.extend_from_slice(&r.buf);
        return;
    }
    let Some(c) = srv.clients.get_mut(&id) else { return };
    if c.close_asap {
        return;
    }
    write_push(&mut c.reply, parts);
    if hard > 0 && c.pending_out() as u64 > hard {
        c.close_asap = true;
        srv.obuf_kills += 1;
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
        let (class, name) = match ev {
            storage::KeyEvent::Expired => (notify::EXPIRED, "expired"),
            storage::KeyEvent::New => (notify::NEW, "new"),
        };
        publish_event(srv, cur.as_deref_mut(), db, class, name, &key);
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
