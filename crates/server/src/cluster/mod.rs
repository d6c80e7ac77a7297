//! Redis Cluster: this node's view of the cluster, as a state machine with
//! no sockets (sans-IO).
//!
//! The event loop (net.rs) owns the bus listener and the links and hands
//! this module what happens on them: a link opened or closed, a decoded
//! message (`clusterbus::Message`), a tick of the clock. The state machine
//! answers by queueing `Action`s (send this message on that link, connect
//! to that node, become a replica of that primary, delete the keys of these
//! slots ...) that the loop carries out. Nothing here reads the clock, the
//! keyspace or the network on its own: what it needs of the rest of the
//! server comes in an `Env`. That keeps gossip, failure detection and
//! failover testable as plain values (several `Cluster`s wired together
//! in a test, with a simulated clock).
//!
//! Layer: beside `repl` and `pubsub` (registries): `Server` holds an
//! `Option<Box<Cluster>>`, present only with `cluster-enabled yes`, so
//! standalone mode pays nothing for it.

use std::collections::HashMap;

pub use clusterbus::{NodeName, SlotBitmap, NULL_NAME, SLOTS};

/// A bus link, as the event loop numbers them.
pub type LinkId = u64;

/// The cluster settings of the config (cluster-*), copied in at start and
/// again after every CONFIG SET of one of them.
#[derive(Debug, Clone)]
pub struct Settings {
    /// cluster-node-timeout, ms.
    pub node_timeout: u64,
    /// The client port (`port`), or `tls-port` when tls-cluster is on.
    pub port: u16,
    /// The other client port (TLS when `port` is TCP), 0 if none.
    pub pport: u16,
    /// The bus port we listen on (cluster-port, or port + 10000).
    pub bus_port: u16,
    /// cluster-announce-ip ("" = let peers see our address).
    pub announce_ip: String,
    /// cluster-announce-port (0 = `port`).
    pub announce_port: u16,
    /// cluster-announce-tls-port (0 = the tls port).
    pub announce_tls_port: u16,
    /// cluster-announce-bus-port (0 = `bus_port`).
    pub announce_bus_port: u16,
    /// cluster-announce-hostname.
    pub announce_hostname: String,
    /// cluster-announce-human-nodename.
    pub announce_human_nodename: String,
    /// cluster-preferred-endpoint-type: "ip", "hostname" or "unknown-endpoint".
    pub preferred_endpoint_type: String,
    /// cluster-require-full-coverage.
    pub require_full_coverage: bool,
    /// cluster-replica-validity-factor.
    pub replica_validity_factor: u64,
    /// cluster-migration-barrier.
    pub migration_barrier: u64,
    /// cluster-allow-replica-migration.
    pub allow_replica_migration: bool,
    /// cluster-replica-no-failover.
    pub replica_no_failover: bool,
    /// cluster-allow-reads-when-down.
    pub allow_reads_when_down: bool,
    /// cluster-allow-pubsubshard-when-down.
    pub allow_pubsubshard_when_down: bool,
    /// cluster-link-sendbuf-limit, bytes (0 = none).
    pub link_sendbuf_limit: u64,
    /// cluster-ping-interval, ms (0 = Redis's default schedule).
    pub ping_interval: u64,
    /// tls-cluster.
    pub tls_cluster: bool,
}

/// What the state machine needs of the rest of the server at a call.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// Now, Unix milliseconds.
    pub now_ms: u64,
    /// Our replication offset (master_repl_offset for a primary, the
    /// processed offset for a replica).
    pub repl_offset: u64,
    /// For a replica: ms since the link to its primary went down, or since
    /// the last interaction with it (Redis's data age); 0 when connected.
    pub primary_link_down_ms: u64,
    /// For a replica: whether the link to its primary is up.
    pub primary_link_up: bool,
    /// Whether db 0 (the only db in cluster mode) holds keys.
    pub has_keys: bool,
}

/// Something the event loop must do for the state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Open an outbound bus link to `node` at `ip:cport`; the loop answers
    /// with `Cluster::link_connected` or `Cluster::link_failed`.
    Connect {
        /// The node the link is for.
        node: NodeName,
        /// Its address.
        ip: String,
        /// Its bus port.
        cport: u16,
    },
    /// Send `msg` on `link`.
    Send {
        /// The link.
        link: LinkId,
        /// The message.
        msg: Box<clusterbus::Message>,
    },
    /// Close `link`; the loop then calls `Cluster::link_closed`.
    Close {
        /// The link.
        link: LinkId,
    },
    /// Become a replica of the primary at `ip:port` (as REPLICAOF does).
    Replicate {
        /// Its address.
        ip: String,
        /// Its client port.
        port: u16,
    },
    /// Stop replicating and become a primary (REPLICAOF NO ONE), after a
    /// won election or a manual failover.
    Promote,
    /// Delete every key in these slots (ownership passed to another node).
    DropSlots(Vec<u16>),
    /// Deliver a message that came over the bus to this node's subscribers.
    Publish {
        /// The channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
        /// SPUBLISH (shard channel) rather than PUBLISH.
        shard: bool,
    },
    /// Shard-channel subscribers of these slots lose them (the slots moved):
    /// unsubscribe them as Redis does (an `sunsubscribe` push each).
    ShardChannelsMoved(Vec<u16>),
    /// Pause client writes until `until_ms` (manual failover on a primary).
    PauseWrites {
        /// Unix ms.
        until_ms: u64,
    },
    /// Undo `PauseWrites`.
    UnpauseWrites,
    /// Write nodes.conf now (atomically, through a temporary file), and
    /// fsync it when `fsync`.
    SaveConfig {
        /// fsync after writing.
        fsync: bool,
    },
    /// Write a line to the server log; `level` is Redis's: 0 debug,
    /// 1 verbose, 2 notice, 3 warning.
    Log {
        /// Level.
        level: u8,
        /// Text.
        text: String,
    },
}

/// One node as this node knows it (Redis's clusterNode).
#[derive(Debug, Clone)]
pub struct Node {
    /// Its name (40 hex digits).
    pub name: NodeName,
    /// Its shard id (40 hex digits).
    pub shard_id: NodeName,
    /// `clusterbus::node_flags`.
    pub flags: u16,
    /// Its config epoch.
    pub config_epoch: u64,
    /// The slots it serves (primaries).
    pub slots: SlotBitmap,
    /// Its primary, for a replica.
    pub replicaof: Option<NodeName>,
    /// Its IP (empty when unknown).
    pub ip: String,
    /// Its TCP client port.
    pub tcp_port: u16,
    /// Its TLS client port.
    pub tls_port: u16,
    /// Its bus port.
    pub cport: u16,
    /// Its announced hostname.
    pub hostname: String,
    /// Its announced human-readable name.
    pub human_nodename: String,
    /// Unix ms of the PING we wait an answer to (0: none).
    pub ping_sent: u64,
    /// Unix ms of its last PONG.
    pub pong_received: u64,
    /// Unix ms of anything last received from it.
    pub data_received: u64,
    /// Unix ms it was flagged FAIL.
    pub fail_time: u64,
    /// Its last known replication offset.
    pub repl_offset: u64,
    /// Our outbound link to it.
    pub link: Option<LinkId>,
    /// Its inbound link to us.
    pub inbound_link: Option<LinkId>,
    /// Primaries that reported it failing: (reporter, Unix ms).
    pub fail_reports: Vec<(NodeName, u64)>,
}

/// This node's view of the cluster (Redis's clusterState).
#[derive(Debug)]
pub struct Cluster {
    /// This node's name (a key of `nodes`).
    pub myself: NodeName,
    /// Every known node, this one included.
    pub nodes: HashMap<NodeName, Node>,
    /// The owner of each slot (`SLOTS` entries).
    pub slots: Vec<Option<NodeName>>,
    /// Slots this node is migrating, and to whom (CLUSTER SETSLOT MIGRATING).
    pub migrating_to: HashMap<u16, NodeName>,
    /// Slots this node is importing, and from whom (SETSLOT IMPORTING).
    pub importing_from: HashMap<u16, NodeName>,
    /// The current epoch.
    pub current_epoch: u64,
    /// The epoch of the last vote this node gave.
    pub last_vote_epoch: u64,
    /// cluster_state: ok (true) or fail.
    pub state_ok: bool,
    /// Settings from the config.
    pub settings: Settings,
    /// What the event loop must do next; it drains this after every call.
    pub actions: Vec<Action>,
}

/// Addresses of one bus link, given with each message it carries.
#[derive(Debug, Clone, Default)]
pub struct LinkAddr {
    /// The peer's IP as the socket sees it.
    pub peer_ip: String,
    /// Our own IP on this link (how a MEET teaches a node its address).
    pub local_ip: String,
}

impl Cluster {
    /// A new cluster of one: this node, a primary with no slots, a fresh
    /// random name and shard id drawn from `seed`'s generator.
    pub fn new(settings: Settings, seed: u64) -> Cluster {
        let _ = seed;
        unimplemented!("cluster state machine: new {settings:?}")
    }

    /// The cluster as nodes.conf `text` describes it (Redis's format, as
    /// `config_text` writes it). Errors name the line that is wrong.
    pub fn load(text: &str, settings: Settings, seed: u64) -> Result<Cluster, String> {
        let _ = (text, seed);
        unimplemented!("cluster state machine: load {settings:?}")
    }

    /// nodes.conf as Redis writes it: one line a node, then the `vars` line.
    pub fn config_text(&self) -> String {
        unimplemented!("cluster state machine: config_text")
    }

    /// Our outbound link to `node` is connected.
    pub fn link_connected(&mut self, node: &NodeName, link: LinkId, env: &Env) {
        let _ = (node, link, env);
        unimplemented!("cluster state machine: link_connected")
    }

    /// Connecting to `node` failed.
    pub fn link_failed(&mut self, node: &NodeName, env: &Env) {
        let _ = (node, env);
        unimplemented!("cluster state machine: link_failed")
    }

    /// `link` (inbound or outbound) is closed.
    pub fn link_closed(&mut self, link: LinkId, env: &Env) {
        let _ = (link, env);
        unimplemented!("cluster state machine: link_closed")
    }

    /// A whole message arrived on `link`. `inbound` says whether the peer
    /// opened the link.
    pub fn on_message(&mut self, link: LinkId, inbound: bool, addr: &LinkAddr, msg: clusterbus::Message, env: &Env) {
        let _ = (link, inbound, addr, msg, env);
        unimplemented!("cluster state machine: on_message")
    }

    /// The periodic work (Redis's clusterCron), called every 100 ms.
    pub fn tick(&mut self, env: &Env) {
        let _ = env;
        unimplemented!("cluster state machine: tick")
    }

    /// Work deferred to the end of the loop's turn (Redis's
    /// clusterBeforeSleep): failover steps, the cluster state, saving the
    /// config.
    pub fn before_sleep(&mut self, env: &Env) {
        let _ = env;
        unimplemented!("cluster state machine: before_sleep")
    }

    /// Sends PUBLISH (or, with `shard`, PUBLISHSHARD to the nodes of our
    /// shard) over the bus.
    pub fn publish(&mut self, channel: &[u8], message: &[u8], shard: bool, env: &Env) {
        let _ = (channel, message, shard, env);
        unimplemented!("cluster state machine: publish")
    }

    /// This node.
    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }

    /// Whether this node is a replica.
    pub fn is_replica(&self) -> bool {
        self.me().flags & clusterbus::node_flags::SLAVE != 0
    }

    /// The owner of `slot`, if any.
    pub fn slot_owner(&self, slot: u16) -> Option<&Node> {
        self.slots[slot as usize].as_ref().and_then(|n| self.nodes.get(n))
    }

    /// The endpoint clients are sent to for `node` (-MOVED, -ASK, CLUSTER
    /// SLOTS): its IP, hostname or "" as cluster-preferred-endpoint-type
    /// says ("?" for a hostname it has not announced), and its TLS port
    /// when `tls` (the client came over TLS) and it has one.
    pub fn endpoint(&self, node: &Node, tls: bool) -> (String, u16) {
        let host = match self.settings.preferred_endpoint_type.as_str() {
            "hostname" if node.hostname.is_empty() => "?".to_string(),
            "hostname" => node.hostname.clone(),
            "unknown-endpoint" => String::new(),
            _ => node.ip.clone(),
        };
        let port = if tls && node.tls_port != 0 { node.tls_port } else { node.tcp_port };
        (host, port)
    }
}
