//! The cluster as text and as plain lists, for CLUSTER NODES, INFO, SLOTS,
//! SHARDS and nodes.conf.
//!
//! A CLUSTER NODES line and a nodes.conf line are one format (Redis writes
//! its config file with the same function): `name ip:port@cport[,hostname]
//! flags primary ping_sent pong_recv config_epoch link slots...`. The file
//! adds the aux fields after the hostname (`,tls-port=N,nodename=X,
//! shard-id=Y`, written from the last known field to the first as Redis
//! does); clients see neither aux fields nor a "tls-port" they did not ask
//! for. Both end this node's line with its slots in migration
//! (`[slot->-node]`, `[slot-<-node]`). Building RESP replies is the command's business
//! (commands/cluster.rs): this file gives it the ranges and lists.

use std::fmt::Write;

use clusterbus::node_flags as nf;

use super::state::{name_str, Cluster, Node, NodeName, SLOTS};

/// Flag names in CLUSTER NODES order.
const FLAG_NAMES: [(u16, &str); 8] = [
    (nf::MYSELF, "myself"),
    (nf::MASTER, "master"),
    (nf::SLAVE, "slave"),
    (nf::PFAIL, "fail?"),
    (nf::FAIL, "fail"),
    (nf::HANDSHAKE, "handshake"),
    (nf::NOADDR, "noaddr"),
    (nf::NOFAILOVER, "nofailover"),
];

/// `flags` as CLUSTER NODES writes them ("myself,master", or "noflags").
pub fn flags_text(flags: u16) -> String {
    let names: Vec<&str> = FLAG_NAMES.iter().filter(|(f, _)| flags & f != 0).map(|(_, n)| *n).collect();
    if names.is_empty() {
        "noflags".into()
    } else {
        names.join(",")
    }
}

/// Parses one flag name of a nodes.conf line.
pub fn flag_from_name(name: &str) -> Option<u16> {
    if name.eq_ignore_ascii_case("noflags") {
        return Some(0);
    }
    FLAG_NAMES.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)).map(|(f, _)| *f)
}

/// The name CLUSTER INFO gives message type `t`.
pub fn msg_type_name(t: usize) -> &'static str {
    match t {
        0 => "ping",
        1 => "pong",
        2 => "meet",
        3 => "fail",
        4 => "publish",
        5 => "auth-req",
        6 => "auth-ack",
        7 => "update",
        8 => "mfstart",
        9 => "module",
        10 => "publishshard",
        _ => "unknown",
    }
}

impl Cluster {
    /// The slot ranges `node` owns in the slot table, in order.
    pub fn node_ranges(&self, node: &NodeName) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for s in 0..SLOTS as u16 {
            if self.slots[s as usize].as_ref() != Some(node) {
                continue;
            }
            match out.last_mut() {
                Some((_, end)) if *end + 1 == s => *end = s,
                _ => out.push((s, s)),
            }
        }
        out
    }

    /// Every run of slots with one owner: (start, end, owner), in order
    /// (CLUSTER SLOTS).
    pub fn slot_ranges(&self) -> Vec<(u16, u16, NodeName)> {
        let mut out: Vec<(u16, u16, NodeName)> =
            self.all_ranges().into_iter().flat_map(|(owner, r)| r.into_iter().map(move |(a, b)| (a, b, owner))).collect();
        out.sort_unstable_by_key(|r| r.0);
        out
    }

    /// The shards: (shard id, its nodes sorted by name), sorted by shard id
    /// (CLUSTER SHARDS). Every node but those in handshake belongs to one.
    pub fn shards(&self) -> Vec<(NodeName, Vec<NodeName>)> {
        let mut map: std::collections::BTreeMap<NodeName, Vec<NodeName>> = std::collections::BTreeMap::new();
        for name in self.sorted_names() {
            let n = &self.nodes[&name];
            map.entry(n.shard_id).or_default().push(name);
        }
        map.into_iter().collect()
    }

    /// The primary of a shard's nodes, as CLUSTER SHARDS picks it: that of
    /// the first node not failing.
    pub fn shard_primary(&self, members: &[NodeName]) -> Option<NodeName> {
        let n = members.iter().filter_map(|m| self.nodes.get(m)).find(|n| !n.failed())?;
        if n.is_replica() {
            n.replicaof
        } else {
            Some(n.name)
        }
    }

    /// The config epoch shown for `node`: its primary's for a replica.
    pub fn shown_epoch(&self, node: &Node) -> u64 {
        match node.replicaof.filter(|_| node.is_replica()).and_then(|p| self.nodes.get(&p)) {
            Some(p) => p.config_epoch,
            None => node.config_epoch,
        }
    }

    /// One CLUSTER NODES line, without the newline. `conf`: the nodes.conf
    /// form (aux fields). This node's line ends with its slots in migration
    /// either way, as Redis's does. `tls_primary`: the
    /// TLS port in the address (a client over TLS).
    pub fn node_line(&self, node: &Node, conf: bool, tls_primary: bool) -> String {
        self.node_line_with(node, conf, tls_primary, &self.node_ranges(&node.name))
    }

    /// The slot ranges of every node, in one pass over the slot table.
    /// From each node's own slot map (set exactly where `slots` names it
    /// the owner: `add_slot`/`del_slot` keep the two together), which costs
    /// a 2 KiB scan per owning node instead of 16,384 name comparisons: a
    /// nodes.conf save runs this after every slot a reshard moves.
    pub(crate) fn all_ranges(&self) -> std::collections::HashMap<NodeName, Vec<(u16, u16)>> {
        self.nodes.values().filter(|n| n.numslots > 0).map(|n| (n.name, n.slots.ranges())).collect()
    }

    /// `node_line` with the node's slot ranges given.
    pub(crate) fn node_line_with(&self, node: &Node, conf: bool, tls_primary: bool, ranges: &[(u16, u16)]) -> String {
        let port = if tls_primary { node.tls_port } else { node.tcp_port };
        let mut s = String::with_capacity(128);
        let _ = write!(s, "{} {}:{}@{}", name_str(&node.name), node.ip, port, node.cport);
        if !node.hostname.is_empty() {
            let _ = write!(s, ",{}", node.hostname);
        }
        if conf {
            if node.hostname.is_empty() {
                s.push(',');
            }
            if tls_primary {
                let _ = write!(s, ",tcp-port={}", node.tcp_port);
            } else {
                let _ = write!(s, ",tls-port={}", node.tls_port);
            }
            if !node.human_nodename.is_empty() {
                let _ = write!(s, ",nodename={}", node.human_nodename);
            }
            let _ = write!(s, ",shard-id={}", name_str(&node.shard_id));
        }
        s.push(' ');
        s.push_str(&flags_text(node.flags));
        s.push(' ');
        match node.replicaof {
            Some(p) => s.push_str(name_str(&p)),
            None => s.push('-'),
        }
        let connected = node.link.is_some() || node.flags & nf::MYSELF != 0;
        let _ = write!(
            s,
            " {} {} {} {}",
            node.ping_sent,
            node.pong_received,
            self.shown_epoch(node),
            if connected { "connected" } else { "disconnected" }
        );
        for &(a, b) in ranges {
            if a == b {
                let _ = write!(s, " {a}");
            } else {
                let _ = write!(s, " {a}-{b}");
            }
        }
        // Our own open slots, in the file and in CLUSTER NODES alike: redis-cli
        // finds open slots (check, fix, reshard) only there.
        if node.flags & nf::MYSELF != 0 {
            let mut open: Vec<u16> = self.migrating_to.keys().chain(self.importing_from.keys()).copied().collect();
            open.sort_unstable();
            open.dedup();
            for slot in open {
                if let Some(to) = self.migrating_to.get(&slot) {
                    let _ = write!(s, " [{slot}->-{}]", name_str(to));
                } else if let Some(from) = self.importing_from.get(&slot) {
                    let _ = write!(s, " [{slot}-<-{}]", name_str(from));
                }
            }
        }
        s
    }

    /// CLUSTER NODES: every node's line (nodes in handshake too), sorted by
    /// name, each ending in a newline.
    pub fn nodes_text(&self, tls_primary: bool) -> String {
        let mut out = String::new();
        let ranges = self.all_ranges();
        for name in self.sorted_names() {
            let r = ranges.get(&name).map_or(&[][..], |r| r);
            out.push_str(&self.node_line_with(&self.nodes[&name], false, tls_primary, r));
            out.push('\n');
        }
        out
    }

    /// CLUSTER INFO's text (CRLF line ends, as Redis).
    pub fn info_text(&self) -> String {
        let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
        for owner in self.slots.iter().flatten() {
            assigned += 1;
            match self.nodes.get(owner) {
                Some(n) if n.failed() => fail += 1,
                Some(n) if n.timed_out() => pfail += 1,
                _ => ok += 1,
            }
        }
        let mut s = String::new();
        let _ = write!(
            s,
            "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\n\
             cluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\n\
             cluster_my_epoch:{}\r\n",
            if self.state_ok { "ok" } else { "fail" },
            self.nodes.len(),
            self.size,
            self.current_epoch,
            self.shown_epoch(self.me()),
        );
        for (dir, stats) in [("sent", &self.stats_sent), ("received", &self.stats_received)] {
            let mut total = 0;
            for (t, &n) in stats.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                total += n;
                let _ = write!(s, "cluster_stats_messages_{}_{dir}:{n}\r\n", msg_type_name(t));
            }
            let _ = write!(s, "cluster_stats_messages_{dir}:{total}\r\n");
        }
        let _ = write!(s, "total_cluster_links_buffer_limit_exceeded:{}\r\n", self.links_buffer_limit_exceeded);
        s
    }
}
