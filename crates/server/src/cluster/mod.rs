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
//! in a test, with a simulated clock: tests.rs).
//!
//! Layer: beside `repl` and `pubsub` (registries): `Server` holds an
//! `Option<Box<Cluster>>`, present only with `cluster-enabled yes`, so
//! standalone mode pays nothing for it.
//!
//! The files, bottom up (each uses only those above it in this list):
//! state.rs (the types and table primitives), describe.rs (NODES, INFO,
//! SLOTS, SHARDS as text and lists), nodes_conf.rs (the config file),
//! send.rs (building messages), failure.rs (PFAIL, FAIL, cluster state),
//! failover.rs (roles, elections, votes, manual failover, migration),
//! gossip.rs (receiving messages, handshake, the tick), admin.rs (what the
//! CLUSTER subcommands change), migrate.rs (atomic slot migration's tasks
//! and ownership switch), and this file, the public entry points the
//! event loop calls. docs/design/cluster.md tells the whole story.

mod admin;
mod describe;
mod failover;
mod failure;
mod gossip;
pub mod migrate;
mod nodes_conf;
mod send;
mod state;

pub use admin::{FailoverMode, OpError};
pub use describe::{flags_text, msg_type_name};
pub use gossip::MeetError;
pub use state::{valid_name, Action, Cluster, Env, Link, LinkAddr, LinkId, Node, Settings};
pub use state::{NodeName, SlotBitmap, NULL_NAME, SLOTS};

/// A node name as text.
pub fn name_string(n: &NodeName) -> String {
    state::name_str(n).to_string()
}

impl Cluster {
    /// A new cluster of one: this node, a primary with no slots, a fresh
    /// random name and shard id drawn from `seed`'s generator. Queues
    /// `SaveConfig` (Redis writes nodes.conf at once).
    pub fn new(settings: Settings, seed: u64) -> Cluster {
        Cluster::fresh(settings, seed)
    }

    /// The cluster as nodes.conf `text` describes it (Redis's format, as
    /// `config_text` writes it). Errors name the line that is wrong.
    pub fn load(text: &str, settings: Settings, seed: u64) -> Result<Cluster, String> {
        Cluster::from_conf(text, settings, seed)
    }

    /// nodes.conf as Redis writes it: one line a node, then the `vars` line.
    pub fn config_text(&self) -> String {
        self.conf_text()
    }

    /// Our outbound link to `node` is connected.
    pub fn link_connected(&mut self, node: &NodeName, link: LinkId, env: &Env) {
        self.begin(env);
        self.on_link_connected(node, link, env);
    }

    /// Connecting to `node` failed.
    pub fn link_failed(&mut self, node: &NodeName, env: &Env) {
        self.begin(env);
        self.on_link_failed(node, env);
    }

    /// `link` (inbound or outbound) is closed.
    pub fn link_closed(&mut self, link: LinkId, env: &Env) {
        self.begin(env);
        self.on_link_closed(link);
    }

    /// A whole message arrived on `link`. `inbound` says whether the peer
    /// opened the link.
    pub fn on_message(&mut self, link: LinkId, inbound: bool, addr: &LinkAddr, msg: clusterbus::Message, env: &Env) {
        self.begin(env);
        self.process_message(link, inbound, addr, msg, env);
    }

    /// The periodic work (Redis's clusterCron), called every 100 ms.
    pub fn tick(&mut self, env: &Env) {
        self.begin(env);
        self.cron(env);
    }

    /// Work deferred to the end of the loop's turn (Redis's
    /// clusterBeforeSleep): failover steps, the cluster state, saving the
    /// config.
    pub fn before_sleep(&mut self, env: &Env) {
        self.begin(env);
        self.sleep_work(env);
    }

    /// Sends PUBLISH (or, with `shard`, PUBLISHSHARD to the nodes of our
    /// shard) over the bus.
    pub fn publish(&mut self, channel: &[u8], message: &[u8], shard: bool, env: &Env) {
        self.begin(env);
        self.send_publish(channel, message, shard, env);
    }

    /// What every entry point with a clock does first: a config just
    /// loaded takes its times from the first clock it sees.
    fn begin(&mut self, env: &Env) {
        if self.settle_pending {
            self.settle_pending = false;
            self.settle_loaded_times(env.now_ms);
        }
    }
}

#[cfg(test)]
mod tests;
