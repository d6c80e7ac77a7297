//! Key routing in cluster mode (Redis's getNodeByQuery): whether a request
//! may run on this node, or which error sends its client elsewhere.
//!
//! One function decides for every caller: a client's command (dispatch),
//! the queued commands of a transaction at EXEC, a command a script runs,
//! a blocked client whose slot may have moved. It reads the key arguments
//! through the command table's key specs (`Spec::find_keys`, the same
//! extraction COMMAND GETKEYS and ACLs use), so a shard channel of
//! SSUBSCRIBE or SPUBLISH routes like a key, as in Redis.
//!
//! The rules, in Redis's order: every key of the request (of every queued
//! command at EXEC) must hash to one slot (-CROSSSLOT); an unassigned slot
//! is -CLUSTERDOWN Hash slot not served; a cluster in the fail state serves
//! nothing with keys, or only reads with cluster-allow-reads-when-down
//! (shard Pub/Sub has its own switch); a slot this node is migrating sends
//! a client whose keys are all missing here to the target (-ASK), and one
//! whose keys are only partly here gets -TRYAGAIN; an importing slot is
//! served after ASKING (or with a command flagged so); a READONLY client
//! (or shard Pub/Sub) on a replica reads its primary's slots here; any
//! other slot served elsewhere is -MOVED to its owner.
//!
//! Standalone mode never comes here: callers test `Server::cluster` first,
//! one branch on the hot path.

use crate::client::Client;
use crate::cluster::{Cluster, NodeName};
use crate::command::{CommandMap, Spec};
use crate::exec::{lookup, Lookup};
use crate::server::Server;

/// Why a request cannot run here, as Redis's cluster redirection codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Keys of more than one slot.
    CrossSlot,
    /// A multi-key request in a slot being moved, with only some keys here.
    TryAgain,
    /// The cluster is down.
    Down,
    /// The cluster is down and only reads are served.
    DownReadOnly,
    /// The slot has no owner.
    Unbound,
    /// The slot is served at `host:port`.
    Moved {
        /// The slot.
        slot: u16,
        /// Its owner's endpoint.
        host: String,
        /// Its owner's client port.
        port: u16,
    },
    /// Ask `host:port`, which imports the slot, for this one request.
    Ask {
        /// The slot.
        slot: u16,
        /// The importing node's endpoint.
        host: String,
        /// Its client port.
        port: u16,
    },
}

impl Refusal {
    /// The error reply, as Redis words it (without the leading `-`).
    pub fn message(&self) -> String {
        match self {
            Refusal::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Refusal::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Refusal::Down => "CLUSTERDOWN The cluster is down".into(),
            Refusal::DownReadOnly => "CLUSTERDOWN The cluster is down and only accepts read commands".into(),
            Refusal::Unbound => "CLUSTERDOWN Hash slot not served".into(),
            Refusal::Moved { slot, host, port } => format!("MOVED {slot} {host}:{port}"),
            Refusal::Ask { slot, host, port } => format!("ASK {slot} {host}:{port}"),
        }
    }

    /// The error a script's `redis.call` raises instead (Redis's
    /// scriptVerifyClusterState texts).
    pub fn script_message(&self, command: &str) -> String {
        match self {
            Refusal::Down => "ERR Script attempted to execute a command while the cluster is down".into(),
            Refusal::DownReadOnly => "ERR Script attempted to execute a write command while the cluster is down and readonly".into(),
            Refusal::CrossSlot => format!("ERR Command '{command}' in script attempted to access keys that do not hash to the same slot"),
            _ => "ERR Script attempted to access a non local key in a cluster node script".into(),
        }
    }
}

/// One request as routing sees it.
pub struct Request<'a> {
    /// The commands whose keys count: the one command, or a transaction's
    /// queued ones at EXEC.
    pub commands: &'a [(&'a Spec, &'a [Vec<u8>])],
    /// It may write (its flags, a script's declared flags, or any queued
    /// command's at EXEC).
    pub write: bool,
    /// SSUBSCRIBE, SUNSUBSCRIBE or SPUBLISH: channels route like keys, but
    /// their "keys" are never looked up.
    pub pubsubshard: bool,
    /// The client sent ASKING just before (or the command asks itself).
    pub asking: bool,
    /// The client sent READONLY.
    pub readonly: bool,
    /// The client came over TLS (redirections name TLS ports).
    pub tls: bool,
    /// MIGRATE, which works on the local keys of an open slot.
    pub migrate: bool,
}

/// The slot of the request's keys, if it has any and they share one.
///
/// Errors: `Refusal::CrossSlot`.
pub fn request_slot(req: &Request) -> Result<Option<u16>, Refusal> {
    let mut slot = None;
    for (spec, argv) in req.commands {
        for (i, _) in spec.find_keys(argv) {
            let Some(key) = argv.get(i) else { continue };
            let s = storage::slot::key_hash_slot(key);
            match slot {
                None => slot = Some(s),
                Some(first) if first != s => return Err(Refusal::CrossSlot),
                Some(_) => {}
            }
        }
    }
    Ok(slot)
}

/// Decides where `req` runs: Ok when here, else why not. `stored` says
/// whether db 0 holds a key (only asked for keys of an open slot).
///
/// Errors: the redirection or refusal, as `Refusal`.
pub fn route(cluster: &Cluster, req: &Request, stored: &dyn Fn(&[u8]) -> bool) -> Result<(), Refusal> {
    let mut first: Option<(&[u8], u16)> = None;
    let mut owner: Option<&NodeName> = None;
    let (mut migrating, mut importing, mut multiple) = (false, false, false);
    let (mut missing, mut existing) = (0usize, 0usize);
    // This node's own slot bitmap (2 KiB) answers the common case; the
    // table of every slot's owner (16,384 names) is read only for a slot
    // served elsewhere, where a cache miss does not matter.
    let mine = &cluster.me().slots;
    for (spec, argv) in req.commands {
        for (i, _) in spec.find_keys(argv) {
            let Some(key) = argv.get(i) else { continue };
            let s = storage::slot::key_hash_slot(key);
            match first {
                None => {
                    first = Some((key, s));
                    owner = if mine.get(s) { Some(&cluster.myself) } else { cluster.slots[s as usize].as_ref() };
                    let Some(o) = owner else { return Err(Refusal::Unbound) };
                    if *o == cluster.myself && !cluster.migrating_to.is_empty() && cluster.migrating_to.contains_key(&s) {
                        migrating = true;
                    } else if !cluster.importing_from.is_empty() && cluster.importing_from.contains_key(&s) {
                        importing = true;
                    }
                }
                Some((k, fs)) if k != key.as_slice() => {
                    if fs != s {
                        return Err(Refusal::CrossSlot);
                    }
                    multiple = true;
                }
                Some(_) => {}
            }
            if (migrating || importing) && !req.pubsubshard && !stored(key) {
                missing += 1;
            } else {
                existing += 1;
            }
        }
    }
    // No key at all: any node serves it.
    let (Some((_, slot)), Some(owner)) = (first, owner) else { return Ok(()) };
    if !cluster.state_ok {
        if req.pubsubshard {
            if !cluster.settings.allow_pubsubshard_when_down {
                return Err(Refusal::Down);
            }
        } else if !cluster.settings.allow_reads_when_down {
            return Err(Refusal::Down);
        } else if req.write {
            return Err(Refusal::DownReadOnly);
        }
    }
    if (migrating || importing) && req.migrate {
        return Ok(());
    }
    if migrating && missing > 0 {
        if existing > 0 {
            return Err(Refusal::TryAgain);
        }
        let to = &cluster.migrating_to[&slot];
        return Err(match cluster.nodes.get(to) {
            Some(n) => {
                let (host, port) = cluster.endpoint(n, req.tls);
                Refusal::Ask { slot, host, port }
            }
            None => Refusal::Unbound,
        });
    }
    if importing && req.asking {
        if multiple && missing > 0 {
            return Err(Refusal::TryAgain);
        }
        return Ok(());
    }
    if (req.readonly || req.pubsubshard) && !req.write && cluster.is_replica() && cluster.me().replicaof.as_ref() == Some(owner) {
        return Ok(());
    }
    if *owner == cluster.myself {
        return Ok(());
    }
    match cluster.nodes.get(owner) {
        Some(n) => {
            let (host, port) = cluster.endpoint(n, req.tls);
            Err(Refusal::Moved { slot, host, port })
        }
        None => Err(Refusal::Unbound),
    }
}

/// True for the commands whose "keys" are shard channels.
pub fn is_pubsubshard(spec: &Spec) -> bool {
    matches!(spec.full_name, "ssubscribe" | "sunsubscribe" | "spublish")
}

/// Routes client `c`'s `argv` (looked up as `spec`; EXEC routes its queued
/// commands), `write` saying whether it may write, at Unix ms `now`. Ok
/// when it runs here, and always for commands without keys.
///
/// Errors: the refusal to reply.
pub fn check(srv: &Server, table: &CommandMap, c: &Client, spec: &Spec, argv: &[Vec<u8>], write: bool, now: i64) -> Result<(), Refusal> {
    let Some(cluster) = srv.cluster.as_deref() else { return Ok(()) };
    let exec = spec.full_name == "exec";
    if !exec && !spec.has_keys() {
        return Ok(());
    }
    let mut pubsubshard = is_pubsubshard(spec);
    // One command needs no list of its own (this runs for every command
    // with keys, so it allocates nothing).
    let queued: Vec<(&Spec, &[Vec<u8>])>;
    let one: [(&Spec, &[Vec<u8>]); 1];
    let commands: &[(&Spec, &[Vec<u8>])] = if exec {
        // EXEC outside MULTI fails by itself, wherever it runs.
        let Some(queue) = c.multi.as_ref() else { return Ok(()) };
        queued = queue
            .iter()
            .filter_map(|a| match lookup(table, a) {
                Lookup::Found(s) => Some((s, a.as_slice())),
                _ => None,
            })
            .collect();
        // Redis's pubsubshard_included: a queued SPUBLISH lets the
        // transaction run on a replica of the slot's primary.
        pubsubshard |= queued.iter().any(|(s, _)| is_pubsubshard(s));
        &queued
    } else {
        one = [(spec, argv)];
        &one
    };
    let req = Request {
        commands,
        write,
        pubsubshard,
        asking: c.asking || spec.full_name == "restore-asking",
        readonly: c.readonly,
        tls: c.is_tls(),
        migrate: spec.full_name == "migrate",
    };
    // A key past its deadline is missing (Redis looks keys up with
    // LOOKUP_NOEXPIRE: not deleted, but not found): -ASK in a migrating slot.
    let db = &srv.dbs[0];
    route(cluster, &req, &|k| db.stored_live(k, now))
}

/// Where a blocked client waiting on `key` (for a command that writes if
/// `write`) must go now, as Redis re-checks blocked clients: the cluster
/// went down, or the slot moved to another node that this one does not
/// import it from. None while it may go on waiting here.
pub fn blocked_elsewhere(cluster: &Cluster, key: &[u8], write: bool, readonly: bool, tls: bool) -> Option<Refusal> {
    if !cluster.state_ok {
        return Some(Refusal::Down);
    }
    let slot = storage::slot::key_hash_slot(key);
    let owner = cluster.slots[slot as usize].as_ref();
    let here = owner == Some(&cluster.myself)
        || (readonly && !write && cluster.is_replica() && owner.is_some() && cluster.me().replicaof.as_ref() == owner);
    if here || cluster.importing_from.contains_key(&slot) {
        return None;
    }
    match owner.and_then(|o| cluster.nodes.get(o)) {
        None => Some(Refusal::Unbound),
        Some(n) => {
            let (host, port) = cluster.endpoint(n, tls);
            Some(Refusal::Moved { slot, host, port })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Node;
    use crate::command::flags;
    use std::collections::HashMap;

    fn name(c: u8) -> NodeName {
        [c; 40]
    }

    fn node(n: NodeName, port: u16, primary: Option<NodeName>) -> Node {
        let flags = if primary.is_some() { clusterbus::node_flags::SLAVE } else { clusterbus::node_flags::MASTER };
        let mut x = Node::new(n, n, flags, 0);
        x.replicaof = primary;
        x.ip = "10.0.0.1".into();
        x.tcp_port = port;
        x.tls_port = port + 1000;
        x.cport = port + 10000;
        x
    }

    /// Node A (port 7000) serves slots 0..=8191, node B (7001) the rest;
    /// C (7002) is B's replica. `me` is one of them.
    fn cluster(me: NodeName) -> Cluster {
        let (a, b, c) = (name(b'a'), name(b'b'), name(b'c'));
        let mut cl = Cluster::new(crate::server::cluster_settings(&crate::config::Config::default()), 1);
        cl.nodes = HashMap::new();
        cl.nodes.insert(a, node(a, 7000, None));
        cl.nodes.insert(b, node(b, 7001, None));
        cl.nodes.insert(c, node(c, 7002, Some(b)));
        cl.myself = me;
        cl.slots = (0..clusterbus::SLOTS).map(|s| Some(if s < 8192 { a } else { b })).collect();
        cl.state_ok = true;
        cl.actions.clear();
        cl
    }

    fn argv(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    /// Routes `words` for a client with the given flags; `stored` lists the
    /// keys db 0 holds.
    fn go(cl: &Cluster, words: &[&str], asking: bool, readonly: bool, stored: &[&str]) -> Result<(), Refusal> {
        let table = crate::registry::registry();
        let a = argv(words);
        let Lookup::Found(spec) = lookup(&table, &a) else { panic!("no command {words:?}") };
        let req = Request {
            commands: &[(spec, a.as_slice())],
            write: spec.has(flags::WRITE),
            pubsubshard: is_pubsubshard(spec),
            asking,
            readonly,
            tls: false,
            migrate: spec.full_name == "migrate",
        };
        route(cl, &req, &|k| stored.iter().any(|s| s.as_bytes() == k))
    }

    fn slot(key: &str) -> u16 {
        storage::slot::key_hash_slot(key.as_bytes())
    }

    // Keys by slot: "a" 15495 (B), "b" 3300 (A), "c" 7365 (A), "foo" 12182 (B).

    #[test]
    fn serves_own_slots_and_moves_others() {
        let cl = cluster(name(b'a'));
        assert_eq!(slot("b"), 3300);
        assert_eq!(go(&cl, &["get", "b"], false, false, &[]), Ok(()));
        assert_eq!(go(&cl, &["set", "foo", "1"], false, false, &[]), Err(Refusal::Moved { slot: 12182, host: "10.0.0.1".into(), port: 7001 }));
        assert_eq!(Refusal::Moved { slot: 12182, host: "10.0.0.1".into(), port: 7001 }.message(), "MOVED 12182 10.0.0.1:7001");
        // Keyless commands run anywhere; so does a key-taking one given none.
        assert_eq!(go(&cl, &["ping"], false, false, &[]), Ok(()));
        assert_eq!(go(&cl, &["sunsubscribe"], false, false, &[]), Ok(()));
    }

    #[test]
    fn tls_clients_are_sent_to_tls_ports() {
        let cl = cluster(name(b'a'));
        let table = crate::registry::registry();
        let a = argv(&["get", "foo"]);
        let Lookup::Found(spec) = lookup(&table, &a) else { panic!() };
        let req = Request { commands: &[(spec, a.as_slice())], write: false, pubsubshard: false, asking: false, readonly: false, tls: true, migrate: false };
        assert_eq!(route(&cl, &req, &|_| false).map_err(|e| e.message()), Err("MOVED 12182 10.0.0.1:8001".to_string()));
    }

    #[test]
    fn cross_slot_and_hash_tags() {
        let cl = cluster(name(b'a'));
        assert_eq!(go(&cl, &["mset", "b", "1", "c", "2"], false, false, &[]), Err(Refusal::CrossSlot));
        assert_eq!(go(&cl, &["mset", "{b}x", "1", "{b}y", "2"], false, false, &[]), Ok(()));
        // The same key twice is one key.
        assert_eq!(go(&cl, &["mset", "b", "1", "b", "2"], false, false, &[]), Ok(()));
        // Shard channels route like keys.
        assert_eq!(go(&cl, &["ssubscribe", "b", "c"], false, false, &[]), Err(Refusal::CrossSlot));
        assert!(matches!(go(&cl, &["spublish", "foo", "m"], false, false, &[]), Err(Refusal::Moved { slot: 12182, .. })));
        assert_eq!(Refusal::CrossSlot.message(), "CROSSSLOT Keys in request don't hash to the same slot");
    }

    #[test]
    fn unassigned_slot_and_cluster_down() {
        let mut cl = cluster(name(b'a'));
        cl.del_slot(3300);
        assert_eq!(go(&cl, &["get", "b"], false, false, &[]), Err(Refusal::Unbound));
        assert_eq!(Refusal::Unbound.message(), "CLUSTERDOWN Hash slot not served");
        cl.state_ok = false;
        assert_eq!(go(&cl, &["get", "c"], false, false, &[]), Err(Refusal::Down));
        cl.settings.allow_reads_when_down = true;
        assert_eq!(go(&cl, &["get", "c"], false, false, &[]), Ok(()));
        assert_eq!(go(&cl, &["set", "c", "1"], false, false, &[]), Err(Refusal::DownReadOnly));
        assert_eq!(Refusal::DownReadOnly.message(), "CLUSTERDOWN The cluster is down and only accepts read commands");
        // Shard Pub/Sub has its own switch, on by default.
        assert_eq!(go(&cl, &["spublish", "c", "m"], false, false, &[]), Ok(()));
        cl.settings.allow_pubsubshard_when_down = false;
        assert_eq!(go(&cl, &["spublish", "c", "m"], false, false, &[]), Err(Refusal::Down));
        // Keyless commands are served even so.
        assert_eq!(go(&cl, &["ping"], false, false, &[]), Ok(()));
    }

    #[test]
    fn migrating_slot_asks_for_missing_keys() {
        let mut cl = cluster(name(b'a'));
        cl.migrating_to.insert(3300, name(b'b'));
        assert_eq!(go(&cl, &["get", "b"], false, false, &["b"]), Ok(()));
        assert_eq!(go(&cl, &["get", "b"], false, false, &[]), Err(Refusal::Ask { slot: 3300, host: "10.0.0.1".into(), port: 7001 }));
        assert_eq!(go(&cl, &["mget", "{b}1", "{b}2"], false, false, &["{b}1"]), Err(Refusal::TryAgain));
        assert_eq!(go(&cl, &["mget", "{b}1", "{b}2"], false, false, &[]), Err(Refusal::Ask { slot: 3300, host: "10.0.0.1".into(), port: 7001 }));
        assert_eq!(Refusal::TryAgain.message(), "TRYAGAIN Multiple keys request during rehashing of slot");
        assert_eq!(Refusal::Ask { slot: 3300, host: "h".into(), port: 1 }.message(), "ASK 3300 h:1");
        // Shard channels are never looked up as keys.
        assert_eq!(go(&cl, &["spublish", "b", "m"], false, false, &[]), Ok(()));
    }

    #[test]
    fn importing_slot_needs_asking() {
        let mut cl = cluster(name(b'a'));
        cl.importing_from.insert(12182, name(b'b'));
        assert!(matches!(go(&cl, &["get", "foo"], false, false, &[]), Err(Refusal::Moved { .. })));
        assert_eq!(go(&cl, &["get", "foo"], true, false, &[]), Ok(()));
        assert_eq!(go(&cl, &["mget", "{foo}1", "{foo}2"], true, false, &["{foo}1"]), Err(Refusal::TryAgain));
        assert_eq!(go(&cl, &["mget", "{foo}1", "{foo}2"], true, false, &["{foo}1", "{foo}2"]), Ok(()));
        // A single missing key is served: it may be created here.
        assert_eq!(go(&cl, &["set", "foo", "1"], true, false, &[]), Ok(()));
    }

    #[test]
    fn readonly_client_reads_on_a_replica() {
        let cl = cluster(name(b'c'));
        assert!(matches!(go(&cl, &["get", "foo"], false, false, &[]), Err(Refusal::Moved { port: 7001, .. })));
        assert_eq!(go(&cl, &["get", "foo"], false, true, &[]), Ok(()));
        assert!(matches!(go(&cl, &["set", "foo", "1"], false, true, &[]), Err(Refusal::Moved { port: 7001, .. })));
        // Not its primary's slot: moved to the owner.
        assert!(matches!(go(&cl, &["get", "b"], false, true, &[]), Err(Refusal::Moved { port: 7000, .. })));
        // Shard Pub/Sub reads on replicas without READONLY.
        assert_eq!(go(&cl, &["ssubscribe", "foo"], false, false, &[]), Ok(()));
    }

    /// A server whose cluster is `cl`, a client, and the command table,
    /// for `check`.
    fn server_with(cl: Cluster) -> (crate::server::Server, crate::client::Client, CommandMap) {
        let mut srv = crate::server::Server::new(crate::config::Config::default());
        srv.cluster = Some(Box::new(cl));
        (srv, crate::client::Client::new(1, None, "test".into(), String::new()), crate::registry::registry())
    }

    #[test]
    fn exec_with_a_queued_spublish_runs_on_a_replica() {
        let (srv, mut c, table) = server_with(cluster(name(b'c')));
        let exec = argv(&["exec"]);
        let Lookup::Found(spec) = lookup(&table, &exec) else { panic!() };
        c.multi = Some(vec![argv(&["spublish", "foo", "m"])]);
        assert_eq!(check(&srv, &table, &c, spec, &exec, false, 0), Ok(()));
        // A write queued with it still goes to the primary.
        c.multi = Some(vec![argv(&["spublish", "foo", "m"]), argv(&["set", "foo", "1"])]);
        assert!(matches!(check(&srv, &table, &c, spec, &exec, true, 0), Err(Refusal::Moved { port: 7001, .. })));
    }

    #[test]
    fn an_expired_key_in_a_migrating_slot_is_asked_for() {
        let mut cl = cluster(name(b'a'));
        cl.migrating_to.insert(3300, name(b'b'));
        let (mut srv, c, table) = server_with(cl);
        srv.dbs[0].insert(b"b", storage::Value::Int(1), storage::Ttl::At(100), 0);
        let get = argv(&["get", "b"]);
        let Lookup::Found(spec) = lookup(&table, &get) else { panic!() };
        assert_eq!(check(&srv, &table, &c, spec, &get, false, 99), Ok(()));
        assert_eq!(check(&srv, &table, &c, spec, &get, false, 100), Err(Refusal::Ask { slot: 3300, host: "10.0.0.1".into(), port: 7001 }));
        assert!(srv.dbs[0].stored(b"b"), "routing deletes nothing");
    }

    #[test]
    fn blocked_clients_follow_their_slot() {
        let mut cl = cluster(name(b'a'));
        assert_eq!(blocked_elsewhere(&cl, b"b", true, false, false), None);
        assert!(matches!(blocked_elsewhere(&cl, b"foo", true, false, false), Some(Refusal::Moved { slot: 12182, .. })));
        cl.importing_from.insert(12182, name(b'b'));
        assert_eq!(blocked_elsewhere(&cl, b"foo", true, false, false), None);
        cl.del_slot(3300);
        assert_eq!(blocked_elsewhere(&cl, b"b", true, false, false), Some(Refusal::Unbound));
        cl.state_ok = false;
        assert_eq!(blocked_elsewhere(&cl, b"c", false, false, false), Some(Refusal::Down));
    }
}
