//! The cluster's data: the types of the public contract (`Cluster`, `Node`,
//! `Settings`, `Env`, `Action`, `LinkAddr`) and the primitives every other
//! file of the module builds on: the node table (add, delete, rename), the
//! slot table (add, delete, move), replica links, links to peers, the small
//! random generator, and the "to do before sleep" flags.
//!
//! It is the bottom of the module: the other files use it and nothing here
//! uses them. Nothing here sends messages; the rules of when to change what
//! (gossip, failure detection, failover) live above, in the files that say
//! so.

use std::collections::HashMap;

use clusterbus::node_flags as nf;
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
    /// repl-ping-replica-period, ms: part of a replica's data age limit.
    pub repl_ping_period_ms: u64,
}

impl Default for Settings {
    /// Redis's defaults for a node on port 6379.
    fn default() -> Settings {
        Settings {
            node_timeout: 15000,
            port: 6379,
            pport: 0,
            bus_port: 16379,
            announce_ip: String::new(),
            announce_port: 0,
            announce_tls_port: 0,
            announce_bus_port: 0,
            announce_hostname: String::new(),
            announce_human_nodename: String::new(),
            preferred_endpoint_type: "ip".into(),
            require_full_coverage: true,
            replica_validity_factor: 10,
            migration_barrier: 1,
            allow_replica_migration: true,
            replica_no_failover: false,
            allow_reads_when_down: false,
            allow_pubsubshard_when_down: true,
            link_sendbuf_limit: 0,
            ping_interval: 0,
            tls_cluster: false,
            repl_ping_period_ms: 10_000,
        }
    }
}

impl Settings {
    /// The ports this node announces: (tcp, tls, bus), as Redis derives them
    /// from the ports and the cluster-announce-* overrides.
    pub fn announced_ports(&self) -> (u16, u16, u16) {
        let (mut tcp, mut tls) = if self.tls_cluster { (self.pport, self.port) } else { (self.port, self.pport) };
        if self.announce_port != 0 {
            tcp = self.announce_port;
        }
        if self.announce_tls_port != 0 {
            tls = self.announce_tls_port;
        }
        let bus = if self.announce_bus_port != 0 { self.announce_bus_port } else { self.bus_port };
        (tcp, tls, bus)
    }
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
    /// The slots it serves (primaries). Change it only through `Cluster`'s
    /// slot functions, which keep `numslots` and `Cluster::slots` in step.
    pub slots: SlotBitmap,
    /// Number of slots set in `slots`.
    pub numslots: usize,
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
    /// Unix ms `repl_offset` was last updated.
    pub repl_offset_time: u64,
    /// Our outbound link to it.
    pub link: Option<LinkId>,
    /// Its inbound link to us.
    pub inbound_link: Option<LinkId>,
    /// Primaries that reported it failing: (reporter, Unix ms).
    pub fail_reports: Vec<(NodeName, u64)>,
    /// Unix ms this node was created in the table.
    pub ctime: u64,
    /// Unix ms of our last vote for one of its replicas (primaries).
    pub voted_time: u64,
    /// Unix ms since when it is an orphaned primary (0: it is not).
    pub orphaned_time: u64,
    /// The PING number it was last put in the gossip of (so one PING does
    /// not carry it twice).
    pub last_in_ping_gossip: u64,
    /// A `Connect` was asked for and not yet answered.
    pub connecting: bool,
}

impl Node {
    /// A node with nothing known but its name and flags.
    pub fn new(name: NodeName, shard_id: NodeName, flags: u16, now: u64) -> Node {
        Node {
            name,
            shard_id,
            flags,
            config_epoch: 0,
            slots: SlotBitmap::default(),
            numslots: 0,
            replicaof: None,
            ip: String::new(),
            tcp_port: 0,
            tls_port: 0,
            cport: 0,
            hostname: String::new(),
            human_nodename: String::new(),
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            repl_offset: 0,
            repl_offset_time: 0,
            link: None,
            inbound_link: None,
            fail_reports: Vec::new(),
            ctime: now,
            voted_time: 0,
            orphaned_time: 0,
            last_in_ping_gossip: 0,
            connecting: false,
        }
    }

    /// Flagged a primary.
    pub fn is_primary(&self) -> bool {
        self.flags & nf::MASTER != 0
    }
    /// Flagged a replica.
    pub fn is_replica(&self) -> bool {
        self.flags & nf::SLAVE != 0
    }
    /// In handshake (name not yet learnt).
    pub fn in_handshake(&self) -> bool {
        self.flags & nf::HANDSHAKE != 0
    }
    /// PFAIL.
    pub fn timed_out(&self) -> bool {
        self.flags & nf::PFAIL != 0
    }
    /// FAIL.
    pub fn failed(&self) -> bool {
        self.flags & nf::FAIL != 0
    }
    /// Has an address.
    pub fn has_addr(&self) -> bool {
        self.flags & nf::NOADDR == 0
    }
    /// The client port peers and clients use by default (TLS in a TLS cluster).
    pub fn default_port(&self, tls_cluster: bool) -> u16 {
        if tls_cluster {
            self.tls_port
        } else {
            self.tcp_port
        }
    }
}

/// Addresses of one bus link, given with each message it carries.
#[derive(Debug, Clone, Default)]
pub struct LinkAddr {
    /// The peer's IP as the socket sees it.
    pub peer_ip: String,
    /// Our own IP on this link (how a MEET teaches a node its address).
    pub local_ip: String,
}

/// One bus link this node knows of.
#[derive(Debug, Clone)]
pub struct Link {
    /// The node at the other end; None for an inbound link whose sender
    /// is not known yet.
    pub node: Option<NodeName>,
    /// The peer opened it.
    pub inbound: bool,
    /// Unix ms it was set up.
    pub ctime: u64,
}

/// The election state of a replica (Redis's failover_auth_*).
#[derive(Debug, Clone, Default)]
pub struct Election {
    /// Unix ms the election may start (or started).
    pub auth_time: u64,
    /// Votes received.
    pub auth_count: usize,
    /// The request was sent.
    pub auth_sent: bool,
    /// Our rank among the replicas of our primary.
    pub auth_rank: u64,
    /// The epoch we asked votes for.
    pub auth_epoch: u64,
    /// Why we cannot fail over, last logged (a `cant` constant).
    pub cant_reason: u8,
    /// Unix s of that log line.
    pub cant_logged_s: u64,
}

/// A manual failover in progress (Redis's mf_*).
#[derive(Debug, Clone, Default)]
pub struct ManualFailover {
    /// Unix ms it times out; 0 when none runs.
    pub end: u64,
    /// Replica side: the offsets match, the election may start.
    pub can_start: bool,
    /// Primary side: the replica that asked.
    pub replica: Option<NodeName>,
    /// Replica side: the paused primary's offset, once it told us.
    pub primary_offset: Option<u64>,
}

/// Reasons a replica cannot fail over (for the log).
pub mod cant {
    /// None.
    pub const NONE: u8 = 0;
    /// The data is too old.
    pub const DATA_AGE: u8 = 1;
    /// Waiting the election delay.
    pub const WAITING_DELAY: u8 = 2;
    /// The election expired.
    pub const EXPIRED: u8 = 3;
    /// Waiting for votes.
    pub const WAITING_VOTES: u8 = 4;
}

/// Work deferred to `before_sleep` (Redis's CLUSTER_TODO_*).
pub mod todo {
    /// Run the election step.
    pub const HANDLE_FAILOVER: u32 = 1;
    /// Recompute cluster_state.
    pub const UPDATE_STATE: u32 = 2;
    /// Write nodes.conf.
    pub const SAVE_CONFIG: u32 = 4;
    /// ... and fsync it.
    pub const FSYNC_CONFIG: u32 = 8;
    /// Run the manual failover step.
    pub const HANDLE_MANUALFAILOVER: u32 = 16;
}

/// Timing constants, as Redis has them.
pub mod consts {
    /// Failure reports are valid for node_timeout times this.
    pub const FAIL_REPORT_VALIDITY_MULT: u64 = 2;
    /// A primary with slots loses FAIL after node_timeout times this.
    pub const FAIL_UNDO_TIME_MULT: u64 = 2;
    /// A manual failover must complete within this, ms.
    pub const MF_TIMEOUT: u64 = 5000;
    /// The primary pauses writes for MF_TIMEOUT times this.
    pub const MF_PAUSE_MULT: u64 = 2;
    /// An orphaned primary waits this long for a migrating replica, ms.
    pub const REPLICA_MIGRATION_DELAY: u64 = 5000;
    /// A forgotten node stays out this long, s.
    pub const BLACKLIST_TTL: u64 = 60;
    /// The bus port is the client port plus this, by default.
    pub const PORT_INCR: u32 = 10000;
    /// Bounds of the delay before a primary in the minority rejoins, ms.
    pub const MAX_REJOIN_DELAY: u64 = 5000;
    /// See MAX_REJOIN_DELAY.
    pub const MIN_REJOIN_DELAY: u64 = 500;
    /// A restarted primary stays in fail state at least this long, ms.
    pub const WRITABLE_DELAY: u64 = 2000;
    /// Log "can't failover" again after this, s.
    pub const CANT_FAILOVER_RELOG_PERIOD: u64 = 10;
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
    /// The links this node knows of.
    pub links: HashMap<LinkId, Link>,
    /// Forgotten nodes (CLUSTER FORGET) and the Unix second they may return.
    pub blacklist: HashMap<NodeName, u64>,
    /// Primaries serving at least one slot (cluster_size).
    pub size: usize,
    /// Messages sent, by type.
    pub stats_sent: [u64; clusterbus::msg_type::COUNT as usize],
    /// Messages received, by type.
    pub stats_received: [u64; clusterbus::msg_type::COUNT as usize],
    /// Links closed for exceeding cluster-link-sendbuf-limit.
    pub links_buffer_limit_exceeded: u64,
    /// Deferred work (`todo` flags).
    pub todo: u32,
    /// Replica election state.
    pub election: Election,
    /// Manual failover state.
    pub mf: ManualFailover,
    /// Slots whose owner stopped claiming them (UPDATE leaves them out).
    pub owner_not_claiming: SlotBitmap,
    /// Nodes in PFAIL at the last tick.
    pub pfail_nodes: usize,
    /// Ticks so far.
    pub iteration: u64,
    /// PINGs built so far.
    pub pings_built: u64,
    /// Unix ms we were last in the minority (cluster state).
    pub among_minority_time: u64,
    /// Unix ms of the first cluster-state update.
    pub first_state_time: u64,
    /// A loaded replica must (re)start replication at the next tick.
    pub replicate_pending: bool,
    /// The cluster-announce-ip last applied to this node ("" = none).
    pub announced_ip: String,
    /// Loaded from nodes.conf: the file's times await a clock
    /// (`settle_loaded_times`).
    pub settle_pending: bool,
    /// The random generator's state.
    pub rng: u64,
}

/// Whether `name` is a valid node name: 40 characters of [a-z0-9].
pub fn valid_name(name: &[u8]) -> bool {
    name.len() == clusterbus::NAME_LEN && name.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// `name` as text.
pub fn name_str(name: &NodeName) -> &str {
    std::str::from_utf8(name).unwrap_or("????????????????????????????????????????")
}

/// `bytes` as a node name, if it is one.
pub fn parse_name(bytes: &[u8]) -> Option<NodeName> {
    if !valid_name(bytes) {
        return None;
    }
    let mut n = NULL_NAME;
    n.copy_from_slice(bytes);
    Some(n)
}

impl Cluster {
    /// An empty table around `myself` (a node to be inserted by the caller).
    pub(crate) fn empty(settings: Settings, seed: u64) -> Cluster {
        Cluster {
            myself: NULL_NAME,
            nodes: HashMap::new(),
            slots: vec![None; SLOTS],
            migrating_to: HashMap::new(),
            importing_from: HashMap::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            state_ok: false,
            settings,
            actions: Vec::new(),
            links: HashMap::new(),
            blacklist: HashMap::new(),
            size: 0,
            stats_sent: [0; clusterbus::msg_type::COUNT as usize],
            stats_received: [0; clusterbus::msg_type::COUNT as usize],
            links_buffer_limit_exceeded: 0,
            todo: 0,
            election: Election::default(),
            mf: ManualFailover::default(),
            owner_not_claiming: SlotBitmap::default(),
            pfail_nodes: 0,
            iteration: 0,
            pings_built: 0,
            among_minority_time: 0,
            first_state_time: 0,
            replicate_pending: false,
            settle_pending: false,
            announced_ip: String::new(),
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// The next pseudo-random number (splitmix64).
    pub(crate) fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 40 random lowercase hex digits: a new node name or shard id.
    pub(crate) fn random_name(&mut self) -> NodeName {
        let mut n = NULL_NAME;
        for chunk in n.chunks_mut(16) {
            let r = self.random();
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = b"0123456789abcdef"[((r >> (i * 4)) & 15) as usize];
            }
        }
        n
    }

    /// Defers `flags` (`todo`) to `before_sleep`.
    pub(crate) fn later(&mut self, flags: u32) {
        self.todo |= flags;
    }

    /// Queues a log line.
    pub(crate) fn log(&mut self, level: u8, text: String) {
        self.actions.push(Action::Log { level, text });
    }

    /// This node, to change.
    pub(crate) fn me_mut(&mut self) -> &mut Node {
        self.nodes.get_mut(&self.myself).expect("myself is in the table")
    }

    /// Whether this node is a primary.
    pub(crate) fn i_am_primary(&self) -> bool {
        self.me().is_primary()
    }

    /// Our primary, for a replica.
    pub(crate) fn my_primary(&self) -> Option<NodeName> {
        self.me().replicaof
    }

    /// The primary whose slots we serve: ourselves, or our primary.
    pub(crate) fn my_shard_primary(&self) -> NodeName {
        if self.is_replica() {
            self.my_primary().unwrap_or(self.myself)
        } else {
            self.myself
        }
    }

    /// Every node name, sorted (a stable order for output and for the
    /// random picks of tests).
    pub fn sorted_names(&self) -> Vec<NodeName> {
        let mut v: Vec<NodeName> = self.nodes.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// The replicas of `primary`, sorted by name.
    pub fn replicas_of(&self, primary: &NodeName) -> Vec<NodeName> {
        let mut v: Vec<NodeName> =
            self.nodes.values().filter(|n| n.replicaof.as_ref() == Some(primary) && n.name != *primary).map(|n| n.name).collect();
        v.sort_unstable();
        v
    }

    /// Replicas of `primary` that are neither FAIL nor PFAIL.
    pub(crate) fn ok_replicas(&self, primary: &NodeName) -> usize {
        self.nodes.values().filter(|n| n.replicaof.as_ref() == Some(primary) && !n.failed() && !n.timed_out()).count()
    }

    /// Whether any primary has a replica.
    fn primaries_have_replicas(&self) -> bool {
        self.nodes.values().any(|n| n.is_replica() && n.replicaof.is_some_and(|p| self.nodes.get(&p).is_some_and(|p| !p.is_replica())))
    }

    /// Adds a node (its name must be new).
    pub(crate) fn add_node(&mut self, node: Node) {
        let old = self.nodes.insert(node.name, node);
        assert!(old.is_none(), "a node name added twice");
    }

    /// Deletes a node: its slots, migrations, failure reports, links.
    pub(crate) fn del_node(&mut self, name: &NodeName) {
        for s in 0..SLOTS as u16 {
            if self.slots[s as usize] == Some(*name) {
                self.del_slot(s);
            }
        }
        self.migrating_to.retain(|_, n| n != name);
        self.importing_from.retain(|_, n| n != name);
        for n in self.nodes.values_mut() {
            n.fail_reports.retain(|(r, _)| r != name);
            if n.replicaof == Some(*name) {
                n.replicaof = None;
            }
        }
        let primary = self.nodes.get(name).and_then(|n| if n.is_replica() { n.replicaof } else { None });
        if let Some(p) = primary {
            self.unlink_replica(name, &p);
        }
        if let Some(n) = self.nodes.remove(name) {
            for l in [n.link, n.inbound_link].into_iter().flatten() {
                self.close_link(l);
            }
        }
    }

    /// Renames a node (a handshake node learning its real name).
    pub(crate) fn rename_node(&mut self, old: &NodeName, new: NodeName) {
        let mut n = self.nodes.remove(old).expect("renaming a known node");
        n.name = new;
        for l in [n.link, n.inbound_link].into_iter().flatten() {
            if let Some(link) = self.links.get_mut(&l) {
                link.node = Some(new);
            }
        }
        self.nodes.insert(new, n);
    }

    /// Makes `replica` a replica of `primary` in the table (Redis's
    /// clusterNodeAddSlave plus setting slaveof): the primary becomes a
    /// target of replica migration.
    pub(crate) fn link_replica(&mut self, replica: &NodeName, primary: &NodeName) {
        if let Some(r) = self.nodes.get_mut(replica) {
            r.replicaof = Some(*primary);
        }
        if let Some(p) = self.nodes.get_mut(primary) {
            p.flags |= nf::MIGRATE_TO;
        }
    }

    /// Undoes `link_replica` (clusterNodeRemoveSlave): a primary left with
    /// no replica is no longer a migration target.
    pub(crate) fn unlink_replica(&mut self, replica: &NodeName, primary: &NodeName) {
        if let Some(r) = self.nodes.get_mut(replica) {
            if r.replicaof == Some(*primary) {
                r.replicaof = None;
            }
        }
        if self.replicas_of(primary).iter().all(|r| r == replica) {
            if let Some(p) = self.nodes.get_mut(primary) {
                p.flags &= !nf::MIGRATE_TO;
            }
        }
    }

    /// Gives `slot` to `owner` if nobody has it. Returns whether it did.
    pub(crate) fn add_slot(&mut self, owner: &NodeName, slot: u16) -> bool {
        if self.slots[slot as usize].is_some() {
            return false;
        }
        let first = self.nodes.get(owner).is_some_and(|n| n.numslots == 0);
        let have_replicas = first && self.primaries_have_replicas();
        let Some(n) = self.nodes.get_mut(owner) else { return false };
        if !n.slots.get(slot) {
            n.slots.set(slot);
            n.numslots += 1;
            if n.numslots == 1 && have_replicas {
                n.flags |= nf::MIGRATE_TO;
            }
        }
        self.slots[slot as usize] = Some(*owner);
        true
    }

    /// Gives `owner` every slot of `a..=b` that nobody has (one lookup of
    /// the node for the whole range: loading a config, ADDSLOTSRANGE).
    pub(crate) fn add_slot_range(&mut self, owner: &NodeName, a: u16, b: u16) {
        let first = self.nodes.get(owner).is_some_and(|n| n.numslots == 0);
        let have_replicas = first && self.primaries_have_replicas();
        let Some(n) = self.nodes.get_mut(owner) else { return };
        for s in a..=b {
            if self.slots[s as usize].is_some() {
                continue;
            }
            if !n.slots.get(s) {
                n.slots.set(s);
                n.numslots += 1;
            }
            self.slots[s as usize] = Some(*owner);
        }
        if first && n.numslots > 0 && have_replicas {
            n.flags |= nf::MIGRATE_TO;
        }
    }

    /// Takes `slot` from its owner. Returns whether it had one. Shard
    /// channel subscribers of a slot our shard loses are told
    /// (`ShardChannelsMoved`).
    pub(crate) fn del_slot(&mut self, slot: u16) -> bool {
        let Some(owner) = self.slots[slot as usize] else { return false };
        if owner == self.my_shard_primary() {
            match self.actions.last_mut() {
                Some(Action::ShardChannelsMoved(v)) => v.push(slot),
                _ => self.actions.push(Action::ShardChannelsMoved(vec![slot])),
            }
        }
        if let Some(n) = self.nodes.get_mut(&owner) {
            if n.slots.get(slot) {
                n.slots.clear(slot);
                n.numslots -= 1;
            }
        }
        self.slots[slot as usize] = None;
        self.owner_not_claiming.clear(slot);
        true
    }

    /// Moves every slot of `from` to `to`; returns how many.
    pub(crate) fn move_node_slots(&mut self, from: &NodeName, to: &NodeName) -> usize {
        let slots: Vec<u16> = self.nodes.get(from).map(|n| n.slots.iter().collect()).unwrap_or_default();
        for &s in &slots {
            self.del_slot(s);
            self.add_slot(to, s);
        }
        slots.len()
    }

    /// Takes every slot from `node`; returns how many.
    pub(crate) fn del_node_slots(&mut self, node: &NodeName) -> usize {
        let slots: Vec<u16> = self.nodes.get(node).map(|n| n.slots.iter().collect()).unwrap_or_default();
        for &s in &slots {
            self.del_slot(s);
        }
        slots.len()
    }

    /// Whether nobody claims `slot`: no owner, or an owner that stopped
    /// claiming it.
    pub(crate) fn slot_unclaimed(&self, slot: u16) -> bool {
        self.slots[slot as usize].is_none() || self.owner_not_claiming.get(slot)
    }

    /// Forgets every migrating and importing slot.
    pub(crate) fn close_all_slots(&mut self) {
        self.migrating_to.clear();
        self.importing_from.clear();
    }

    /// The largest config epoch known, or the current epoch if larger.
    pub(crate) fn max_epoch(&self) -> u64 {
        self.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0).max(self.current_epoch)
    }

    /// Forgets `link` and asks the loop to close it (freeClusterLink).
    pub(crate) fn close_link(&mut self, link: LinkId) {
        if self.forget_link(link) {
            self.actions.push(Action::Close { link });
        }
    }

    /// Drops `link` from the link table and from its node (outbound or
    /// inbound). Returns false when it was not known.
    pub(crate) fn forget_link(&mut self, link: LinkId) -> bool {
        let Some(l) = self.links.remove(&link) else { return false };
        if let Some(n) = l.node.and_then(|n| self.nodes.get_mut(&n)) {
            if n.link == Some(link) {
                n.link = None;
            }
            if n.inbound_link == Some(link) {
                n.inbound_link = None;
            }
        }
        true
    }

    /// Whether `link` is our outbound link to a node (answers to PINGs
    /// on it are its PONGs).
    pub(crate) fn link_node(&self, link: LinkId) -> Option<NodeName> {
        self.links.get(&link).and_then(|l| l.node)
    }

    /// Adds `node` to the blacklist for BLACKLIST_TTL seconds.
    pub(crate) fn blacklist_add(&mut self, node: &NodeName, now_s: u64) {
        self.blacklist_cleanup(now_s);
        self.blacklist.insert(*node, now_s + consts::BLACKLIST_TTL);
    }

    /// Whether `node` is blacklisted.
    pub(crate) fn blacklisted(&mut self, node: &NodeName, now_s: u64) -> bool {
        self.blacklist_cleanup(now_s);
        self.blacklist.contains_key(node)
    }

    /// Drops expired blacklist entries.
    pub(crate) fn blacklist_cleanup(&mut self, now_s: u64) {
        self.blacklist.retain(|_, &mut exp| exp >= now_s);
    }

    /// Sets `node`'s shard id, and that of its primary or replicas (Redis's
    /// updateShardId): a shard has one id.
    pub(crate) fn update_shard_id(&mut self, node: &NodeName, shard: NodeName) {
        let Some(n) = self.nodes.get_mut(node) else { return };
        if n.shard_id == shard {
            return;
        }
        n.shard_id = shard;
        let primary = n.replicaof;
        self.later(todo::SAVE_CONFIG);
        match primary {
            None => {
                for r in self.replicas_of(node) {
                    if let Some(r) = self.nodes.get_mut(&r) {
                        if r.shard_id != shard {
                            r.shard_id = shard;
                            self.todo |= todo::SAVE_CONFIG | todo::FSYNC_CONFIG;
                        }
                    }
                }
            }
            Some(p) => {
                if let Some(p) = self.nodes.get_mut(&p) {
                    if p.shard_id != shard {
                        p.shard_id = shard;
                        self.todo |= todo::SAVE_CONFIG | todo::FSYNC_CONFIG;
                    }
                }
            }
        }
    }

    /// This node.
    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }

    /// Whether this node is a replica.
    pub fn is_replica(&self) -> bool {
        self.me().flags & nf::SLAVE != 0
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

    /// Copies what the settings say of this node into its entry: ports,
    /// announced IP, hostname, human name, the NOFAILOVER flag (Redis
    /// does this at start and on every cron run).
    pub(crate) fn update_myself_from_settings(&mut self) {
        let (tcp, tls, bus) = self.settings.announced_ports();
        let ip = self.settings.announce_ip.clone();
        let host = self.settings.announce_hostname.clone();
        let human = self.settings.announce_human_nodename.clone();
        let nofailover = if self.settings.replica_no_failover { nf::NOFAILOVER } else { 0 };
        let dropped = ip.is_empty() && !self.announced_ip.is_empty();
        self.announced_ip = ip.clone();
        let me = self.me_mut();
        me.tcp_port = tcp;
        me.tls_port = tls;
        me.cport = bus;
        if !ip.is_empty() {
            me.ip = ip;
        } else if dropped {
            // No longer announced: learn it again from the next MEET/PING.
            me.ip.clear();
        }
        let mut save = me.hostname != host || me.human_nodename != human;
        me.hostname = host;
        me.human_nodename = human;
        if me.flags & nf::NOFAILOVER != nofailover {
            me.flags = (me.flags & !nf::NOFAILOVER) | nofailover;
            save = true;
        }
        if save {
            self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE);
        }
    }
}
