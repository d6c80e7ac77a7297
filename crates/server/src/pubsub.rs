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

use std::collections::HashMap;

use crate::client::{Client, ClientId};
pub use crate::client::{Kind, Subscriptions};

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

    pub(crate) fn map_ref(&self, kind: Kind) -> &HashMap<Vec<u8>, Vec<ClientId>> {
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
