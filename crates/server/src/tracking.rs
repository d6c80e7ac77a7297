//! Client-side caching (CLIENT TRACKING): which clients may hold which keys.
//!
//! Two tables, both global across databases as in Redis (a client caches
//! key names, not (db, key) pairs):
//!
//! - the key table, for clients in the default mode: each key a tracking
//!   client read maps to the ids of the clients that read it. A change to
//!   the key takes the entry out and invalidates each of them; the next
//!   read puts the key back. Entries of clients that turned tracking off or
//!   left are not hunted down: an invalidation skips ids that no longer
//!   track, and the table is emptied when the last tracking client goes.
//! - the prefix table, for BCAST clients: each prefix maps to its clients
//!   and to the keys with that prefix changed since the last broadcast, each
//!   with the id of the client that changed it last (None: expiry), so a
//!   NOLOOP client is not told about its own writes.
//!
//! This module only keeps the tables; `publish.rs` (above the server state)
//! writes the invalidation messages. Per-client flags live in
//! `Client::tracking`. The hot paths read one counter, `clients`: with no
//! tracking client nothing here runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::client::{Client, ClientId, ClientTracking};

/// One BCAST prefix.
#[derive(Debug, Default)]
struct Bcast {
    /// Clients subscribed to the prefix.
    clients: BTreeSet<ClientId>,
    /// Keys changed since the last broadcast -> who changed them last.
    keys: BTreeMap<Vec<u8>, Option<ClientId>>,
}

/// The keys one broadcast tells the clients of one prefix about.
#[derive(Debug)]
pub struct Broadcast {
    /// The prefix's clients.
    pub clients: Vec<ClientId>,
    /// Changed keys, sorted, with the client that changed each last.
    pub keys: Vec<(Vec<u8>, Option<ClientId>)>,
}

/// What CLIENT TRACKING ON asks for, parsed.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// REDIRECT id (0: none).
    pub redirect: ClientId,
    /// BCAST.
    pub bcast: bool,
    /// OPTIN.
    pub optin: bool,
    /// OPTOUT.
    pub optout: bool,
    /// NOLOOP.
    pub noloop: bool,
    /// PREFIX arguments, in order.
    pub prefixes: Vec<Vec<u8>>,
}

/// The tracking registry (see the module header).
#[derive(Debug, Default)]
pub struct Tracking {
    table: HashMap<Vec<u8>, Vec<ClientId>>,
    /// (key, client) pairs in `table` (INFO tracking_total_items).
    items: usize,
    prefixes: BTreeMap<Vec<u8>, Bcast>,
    /// Some prefix has changed keys waiting for a broadcast.
    bcast_pending: bool,
    /// Clients with tracking on (INFO tracking_clients). Zero means every
    /// hook returns at once.
    pub clients: usize,
    /// Invalidations for the running client, sent after its reply (after
    /// the whole EXEC or script): a key, or None for "everything" (a flush).
    pub pending: Vec<Option<Vec<u8>>>,
    /// Consecutive limit passes that could not get under
    /// tracking-table-max-keys; each one tries harder.
    limit_runs: u32,
}

impl Tracking {
    /// Checks PREFIX arguments against each other and against the prefixes
    /// `c` already has: two prefixes overlap when one starts the other.
    ///
    /// Errors: Redis's message naming the first overlapping pair.
    pub fn check_prefixes(c: &Client, prefixes: &[Vec<u8>]) -> Result<(), String> {
        let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(old) = c.tracking.as_ref().and_then(|t| t.prefixes.iter().find(|o| overlap(o, p))) {
                return Err(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    text(p),
                    text(old)
                ));
            }
            if let Some(other) = prefixes[i + 1..].iter().find(|o| overlap(o, p)) {
                return Err(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    text(p),
                    text(other)
                ));
            }
        }
        Ok(())
    }

    /// Turns tracking on for `c` (or changes its options; the caller has
    /// checked them): a BCAST client is added to its prefixes, the empty
    /// one when none is given. Returns true if `c` was not tracking before.
    pub fn enable(&mut self, c: &mut Client, opts: &Options) -> bool {
        let first = c.tracking.is_none();
        if first {
            self.clients += 1;
        }
        let t = c.tracking.get_or_insert_with(Box::default);
        t.redirect = opts.redirect;
        t.broken_redirect = false;
        t.bcast = opts.bcast;
        t.optin = opts.optin;
        t.optout = opts.optout;
        t.noloop = opts.noloop;
        if opts.bcast {
            let empty = [Vec::new()];
            let list = if opts.prefixes.is_empty() { &empty[..] } else { &opts.prefixes[..] };
            for p in list {
                if self.prefixes.entry(p.clone()).or_default().clients.insert(c.id) {
                    t.prefixes.insert(p.clone());
                }
            }
        }
        first
    }

    /// Turns tracking off for `c` (CLIENT TRACKING OFF, RESET, disconnect).
    /// Returns true if it was on and no client tracks any more.
    pub fn disable(&mut self, c: &mut Client) -> bool {
        let Some(t) = c.tracking.take() else { return false };
        self.forget_prefixes(c.id, &t);
        self.clients -= 1;
        if self.clients == 0 {
            // Nobody left to invalidate: drop the stale entries at once.
            self.table = HashMap::new();
            self.items = 0;
            self.pending.clear();
        }
        self.clients == 0
    }

    fn forget_prefixes(&mut self, id: ClientId, t: &ClientTracking) {
        for p in &t.prefixes {
            if let Some(b) = self.prefixes.get_mut(p) {
                b.clients.remove(&id);
                if b.clients.is_empty() {
                    self.prefixes.remove(p);
                }
            }
        }
    }

    /// Records that client `id` read `keys` and may cache them.
    pub fn remember<'k>(&mut self, id: ClientId, keys: impl Iterator<Item = &'k [u8]>) {
        for key in keys {
            let ids = match self.table.get_mut(key) {
                Some(ids) => ids,
                None => self.table.entry(key.to_vec()).or_default(),
            };
            if !ids.contains(&id) {
                ids.push(id);
                self.items += 1;
            }
        }
    }

    /// Takes `key` out of the key table: the clients that may cache it.
    pub fn take_key(&mut self, key: &[u8]) -> Option<Vec<ClientId>> {
        let ids = self.table.remove(key)?;
        self.items -= ids.len();
        Some(ids)
    }

    /// Notes a change of `key` by `by` (None: expiry or eviction) for every
    /// BCAST prefix that matches it.
    pub fn note_change(&mut self, key: &[u8], by: Option<ClientId>) {
        for (p, b) in self.prefixes.iter_mut() {
            if key.starts_with(p) {
                b.keys.insert(key.to_vec(), by);
                self.bcast_pending = true;
            }
        }
    }

    /// True if some BCAST prefix has changes waiting.
    #[inline]
    pub fn has_broadcast(&self) -> bool {
        self.bcast_pending
    }

    /// Takes the changes waiting for a broadcast, one entry per prefix with
    /// changes, in prefix order.
    pub fn take_broadcasts(&mut self) -> Vec<Broadcast> {
        self.bcast_pending = false;
        let mut out = Vec::new();
        for b in self.prefixes.values_mut() {
            if b.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut b.keys).into_iter().collect();
            out.push(Broadcast { clients: b.clients.iter().copied().collect(), keys });
        }
        out
    }

    /// Empties the key table (FLUSHALL, FLUSHDB: every client is told that
    /// everything is invalid instead).
    pub fn clear_keys(&mut self) {
        self.table = HashMap::new();
        self.items = 0;
    }

    /// Keys to evict so that the key table gets back to `max` keys (0: no
    /// limit), at most 100 per call plus 100 for each earlier call that
    /// could not get there, as Redis bounds the effort. The caller
    /// invalidates them.
    pub fn over_limit(&mut self, max: usize) -> Vec<Vec<u8>> {
        if max == 0 || self.table.len() <= max {
            self.limit_runs = 0;
            return Vec::new();
        }
        let effort = 100 * (self.limit_runs as usize + 1);
        let excess = self.table.len() - max;
        if excess > effort {
            self.limit_runs += 1;
        } else {
            self.limit_runs = 0;
        }
        self.table.keys().take(excess.min(effort)).cloned().collect()
    }

    /// Keys in the key table (INFO tracking_total_keys).
    pub fn keys(&self) -> usize {
        self.table.len()
    }

    /// (key, client) pairs in the key table (INFO tracking_total_items).
    pub fn items(&self) -> usize {
        self.items
    }

    /// BCAST prefixes in use (INFO tracking_total_prefixes).
    pub fn prefixes(&self) -> usize {
        self.prefixes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: ClientId) -> Client {
        Client::new(id, None, String::new(), String::new())
    }

    #[test]
    fn key_table_counts_and_empties_with_the_last_client() {
        let mut t = Tracking::default();
        let (mut a, mut b) = (client(1), client(2));
        assert!(t.enable(&mut a, &Options::default()));
        assert!(!t.enable(&mut a, &Options { noloop: true, ..Options::default() }));
        t.enable(&mut b, &Options::default());
        assert_eq!(t.clients, 2);
        t.remember(1, [&b"k"[..], b"k", b"j"].into_iter());
        t.remember(2, [&b"k"[..]].into_iter());
        assert_eq!((t.keys(), t.items()), (2, 3));
        assert_eq!(t.take_key(b"k"), Some(vec![1, 2]));
        assert_eq!(t.take_key(b"k"), None);
        assert_eq!((t.keys(), t.items()), (1, 1));
        assert!(!t.disable(&mut a));
        assert!(t.disable(&mut b));
        assert!(!t.disable(&mut b));
        assert_eq!((t.clients, t.keys(), t.items()), (0, 0, 0));
    }

    #[test]
    fn prefixes_overlap_and_broadcast() {
        let mut t = Tracking::default();
        let mut a = client(1);
        let p = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert!(Tracking::check_prefixes(&a, &p(&["FOOBAR", "FOO"])).unwrap_err().starts_with("ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'"));
        t.enable(&mut a, &Options { bcast: true, prefixes: p(&["a:", "b:"]), ..Options::default() });
        assert!(Tracking::check_prefixes(&a, &p(&["a"])).unwrap_err().contains("existing prefix 'a:'"));
        assert!(Tracking::check_prefixes(&a, &p(&["c:"])).is_ok());
        assert_eq!(t.prefixes(), 2);
        t.note_change(b"a:1", Some(1));
        t.note_change(b"c:1", Some(1));
        t.note_change(b"b:1", None);
        assert!(t.has_broadcast());
        let out = t.take_broadcasts();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].keys, vec![(b"a:1".to_vec(), Some(1))]);
        assert_eq!(out[1].clients, vec![1]);
        assert!(!t.has_broadcast() && t.take_broadcasts().is_empty());
        t.disable(&mut a);
        assert_eq!(t.prefixes(), 0);
    }

    #[test]
    fn the_limit_evicts_exactly_the_excess_with_growing_effort() {
        let mut t = Tracking::default();
        let keys: Vec<Vec<u8>> = (0..250).map(|i| format!("k{i}").into_bytes()).collect();
        t.remember(1, keys.iter().map(|k| &k[..]));
        let mut evicted = 0;
        loop {
            let v = t.over_limit(1);
            if v.is_empty() {
                break;
            }
            for k in v {
                t.take_key(&k);
                evicted += 1;
            }
        }
        assert_eq!((evicted, t.keys()), (249, 1));
        assert!(t.over_limit(0).is_empty());
    }
}
