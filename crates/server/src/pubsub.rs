//! Pub/Sub state and message delivery.
//!
//! Two indexes kept in step: the server maps each channel, pattern and
//! shard channel to the clients subscribed to it (in subscription order,
//! which is the delivery order), and each subscribed client holds the set
//! of names it is subscribed to (`Client::pubsub`, boxed so that the many
//! clients that never subscribe pay one null pointer). `Client::pubsub`
//! being `Some` is Redis's CLIENT_PUBSUB flag: set by any (P|S)SUBSCRIBE,
//! cleared when the last subscription goes.
//!
//! A message for another client is appended to that client's reply buffer
//! and the client is queued with `Server::wake` so that the event loop
//! writes it. A message for the client running the command (a RESP3
//! client publishing to itself) waits in `Server::pending_push` until the
//! command, or the whole EXEC, has replied, as Redis orders it.
//!
//! Keyspace notifications (`notify.rs`) publish through `publish_from`
//! like any message; cron publishes expiry events with no running client.

use std::collections::{BTreeSet, HashMap};

use resp::Reply;

use crate::client::{Client, ClientId};
use crate::server::Server;

/// Which of the three namespaces a subscription lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE channels.
    Channel,
    /// PSUBSCRIBE glob patterns.
    Pattern,
    /// SSUBSCRIBE shard channels.
    Shard,
}

impl Kind {
    /// The reply word confirming a subscription of this kind.
    pub fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    /// The reply word confirming an unsubscription of this kind.
    pub fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// The names one client is subscribed to. Sorted sets, so that an
/// argument-less UNSUBSCRIBE confirms in a stable order.
#[derive(Debug, Default)]
pub struct Subscriptions {
    /// SUBSCRIBE channels.
    pub channels: BTreeSet<Vec<u8>>,
    /// PSUBSCRIBE patterns.
    pub patterns: BTreeSet<Vec<u8>>,
    /// SSUBSCRIBE shard channels.
    pub shard: BTreeSet<Vec<u8>>,
}

impl Subscriptions {
    fn set(&mut self, kind: Kind) -> &mut BTreeSet<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count a (un)subscribe confirmation carries: channels plus
    /// patterns for those two kinds, shard channels alone for shard ones.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }

    fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }
}

/// The server side of Pub/Sub: who listens to what.
#[derive(Debug, Default)]
pub struct PubSub {
    channels: HashMap<Vec<u8>, Vec<ClientId>>,
    patterns: HashMap<Vec<u8>, Vec<ClientId>>,
    shard: HashMap<Vec<u8>, Vec<ClientId>>,
    /// Clients in Pub/Sub mode (INFO pubsub_clients).
    pub clients: usize,
}

impl PubSub {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Vec<u8>, Vec<ClientId>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn map_ref(&self, kind: Kind) -> &HashMap<Vec<u8>, Vec<ClientId>> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    /// Puts `c` in Pub/Sub mode (idempotent).
    pub fn mark(&mut self, c: &mut Client) {
        if c.pubsub.is_none() {
            c.pubsub = Some(Box::default());
            self.clients += 1;
        }
    }

    /// Takes `c` out of Pub/Sub mode if it has no subscription left.
    pub fn unmark_if_idle(&mut self, c: &mut Client) {
        if c.pubsub.as_ref().is_some_and(|s| s.total() == 0) {
            c.pubsub = None;
            self.clients -= 1;
        }
    }

    /// Subscribes `c` (already marked) to `name`. Returns false if it was
    /// subscribed already.
    pub fn subscribe(&mut self, c: &mut Client, kind: Kind, name: &[u8]) -> bool {
        let Some(subs) = c.pubsub.as_mut() else { return false };
        if !subs.set(kind).insert(name.to_vec()) {
            return false;
        }
        self.map(kind).entry(name.to_vec()).or_default().push(c.id);
        true
    }

    /// Unsubscribes `c` from `name`. Returns false if it was not subscribed.
    pub fn unsubscribe(&mut self, c: &mut Client, kind: Kind, name: &[u8]) -> bool {
        let Some(subs) = c.pubsub.as_mut() else { return false };
        if !subs.set(kind).remove(name) {
            return false;
        }
        let map = self.map(kind);
        if let Some(ids) = map.get_mut(name) {
            ids.retain(|&id| id != c.id);
            if ids.is_empty() {
                map.remove(name);
            }
        }
        true
    }

    /// The names `c` is subscribed to in `kind`, in order.
    pub fn names_of(c: &Client, kind: Kind) -> Vec<Vec<u8>> {
        match c.pubsub.as_deref() {
            Some(s) => match kind {
                Kind::Channel => s.channels.iter().cloned().collect(),
                Kind::Pattern => s.patterns.iter().cloned().collect(),
                Kind::Shard => s.shard.iter().cloned().collect(),
            },
            None => Vec::new(),
        }
    }

    /// Drops every subscription of `c` silently and leaves Pub/Sub mode
    /// (disconnect, RESET).
    pub fn forget(&mut self, c: &mut Client) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in Self::names_of(c, kind) {
                self.unsubscribe(c, kind, &name);
            }
        }
        self.unmark_if_idle(c);
    }

    /// Number of subscribers of `name` (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn numsub(&self, kind: Kind, name: &[u8]) -> usize {
        self.map_ref(kind).get(name).map_or(0, Vec::len)
    }

    /// Number of distinct names with subscribers (PUBSUB NUMPAT, INFO).
    pub fn len(&self, kind: Kind) -> usize {
        self.map_ref(kind).len()
    }

    /// True if nobody is subscribed to anything.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }

    /// Names with subscribers matching `pattern` (all when None).
    pub fn active(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        self.map_ref(kind).keys().filter(|n| pattern.is_none_or(|p| crate::glob::matches(p, n, false))).cloned().collect()
    }
}

/// Writes a (un)subscribe confirmation to the running client. These are
/// push replies: CLIENT REPLY OFF does not silence them, so when replies are
/// off they go where the exec epilogue appends them after the truncation.
pub fn confirm(srv: &mut Server, c: &mut Client, word: &[u8], name: Option<&[u8]>, count: usize) {
    let silenced = c.reply_mode != crate::client::ReplyMode::On;
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
    let spec = srv.config.get("client-output-buffer-limit").unwrap_or("");
    let words: Vec<&str> = spec.split_whitespace().collect();
    let at = words.iter().position(|w| w.eq_ignore_ascii_case("pubsub"));
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
    if !shard && !srv.pubsub.patterns.is_empty() {
        let hits: Vec<(Vec<u8>, ClientId)> = srv
            .pubsub
            .patterns
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
        srv.client_kills += 1;
    }
    srv.wake(id);
}

fn write_push(r: &mut Reply, parts: &[&[u8]]) {
    r.push(parts.len());
    for p in parts {
        r.bulk(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: ClientId) -> Client {
        Client::new(id, None, String::new(), String::new())
    }

    #[test]
    fn both_indexes_stay_in_step() {
        let mut ps = PubSub::default();
        let mut a = client(1);
        let mut b = client(2);
        ps.mark(&mut a);
        ps.mark(&mut b);
        assert!(ps.subscribe(&mut a, Kind::Channel, b"x"));
        assert!(!ps.subscribe(&mut a, Kind::Channel, b"x"));
        assert!(ps.subscribe(&mut b, Kind::Channel, b"x"));
        assert!(ps.subscribe(&mut a, Kind::Pattern, b"x*"));
        assert!(ps.subscribe(&mut a, Kind::Shard, b"s"));
        assert_eq!(ps.numsub(Kind::Channel, b"x"), 2);
        assert_eq!(a.pubsub.as_ref().map(|s| (s.count(Kind::Channel), s.count(Kind::Shard))), Some((2, 1)));
        assert_eq!(ps.clients, 2);
        ps.forget(&mut a);
        assert!(a.pubsub.is_none());
        assert_eq!(ps.clients, 1);
        assert_eq!(ps.numsub(Kind::Channel, b"x"), 1);
        assert_eq!(ps.len(Kind::Pattern), 0);
        assert_eq!(ps.len(Kind::Shard), 0);
        assert!(ps.unsubscribe(&mut b, Kind::Channel, b"x"));
        ps.unmark_if_idle(&mut b);
        assert!(ps.is_empty());
        assert_eq!(ps.clients, 0);
    }
}
