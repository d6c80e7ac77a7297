//! nodes.conf: reading and writing the cluster's config file in Redis's
//! format, so a densekv node and a Redis node can read each other's files
//! and a restarted node rejoins as itself.
//!
//! The file is CLUSTER NODES with aux fields (see describe.rs) plus one
//! `vars currentEpoch N lastVoteEpoch N` line. Reading accepts what Redis
//! 7.0 writes (no aux fields, sometimes no `@cport`) and what 7.2 to 8
//! write (`,hostname,tls-port=..,nodename=..,shard-id=..`); aux fields this
//! code does not know are checked for shape and skipped, so a file from a
//! newer version loads. The file is untrusted bytes: every field is checked
//! and a bad line is an error that names it, never a panic.
//!
//! The ping and pong times are kept as read: the first call that brings a
//! clock (`settle_loaded_times`) turns each non-zero one into "now", as
//! Redis does at load, so that a node is not taken as failing at once.

use clusterbus::node_flags as nf;

use super::describe::flag_from_name;
use super::state::{consts, parse_name, todo, Action, Cluster, Node, NodeName, Settings, SLOTS};

/// Characters an aux field's name and value may not contain.
const AUX_FORBIDDEN: &[u8] = b"!#$%&()*+:;<>?@[]^{|}~";

fn valid_aux(s: &str) -> bool {
    s.bytes().all(|c| c.is_ascii_alphanumeric() || !AUX_FORBIDDEN.contains(&c))
}

fn num<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("bad {what} '{s}'"))
}

fn slot_num(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(v) if (v as usize) < SLOTS => Ok(v),
        _ => Err(format!("bad slot '{s}'")),
    }
}

impl Cluster {
    /// The node called `name`, created empty (no flags) if unknown: a line
    /// may name a primary or a migration peer before that node's own line.
    fn node_or_placeholder(&mut self, name: NodeName) -> NodeName {
        if !self.nodes.contains_key(&name) {
            let shard = self.random_name();
            self.add_node(Node::new(name, shard, 0, 0));
        }
        name
    }

    /// Parses nodes.conf `text` into this (empty) table.
    pub(crate) fn parse_conf(&mut self, text: &str) -> Result<(), String> {
        let mut myself = None;
        for (i, line) in text.split('\n').enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let argv: Vec<&str> = line.split_ascii_whitespace().collect();
            self.parse_line(&argv, &mut myself)
                .map_err(|e| format!("nodes.conf line {}: {e}: \"{}\"", i + 1, line.chars().take(200).collect::<String>()))?;
        }
        let Some(me) = myself else { return Err("nodes.conf: no line has the myself flag".into()) };
        self.myself = me;
        let n = &self.nodes[&me];
        if n.flags & (nf::MASTER | nf::SLAVE) == 0 {
            return Err("nodes.conf: this node is neither master nor slave".into());
        }
        if n.is_replica() && n.replicaof.is_none() {
            return Err("nodes.conf: this node is a replica of no node".into());
        }
        // A replica's shard is its primary's, whatever the file's order.
        let pairs: Vec<(NodeName, NodeName)> = self.nodes.values().filter_map(|n| n.replicaof.map(|p| (n.name, p))).collect();
        for (r, p) in pairs {
            if let Some(shard) = self.nodes.get(&p).map(|p| p.shard_id) {
                self.nodes.get_mut(&r).expect("listed").shard_id = shard;
            }
        }
        let max = self.max_epoch();
        if max > self.current_epoch {
            self.current_epoch = max;
        }
        Ok(())
    }

    fn parse_line(&mut self, argv: &[&str], myself: &mut Option<NodeName>) -> Result<(), String> {
        if argv[0].eq_ignore_ascii_case("vars") {
            if argv.len().is_multiple_of(2) {
                return Err("vars wants name value pairs".into());
            }
            for kv in argv[1..].chunks(2) {
                if kv[0].eq_ignore_ascii_case("currentEpoch") {
                    self.current_epoch = num(kv[1], "currentEpoch")?;
                } else if kv[0].eq_ignore_ascii_case("lastVoteEpoch") {
                    self.last_vote_epoch = num(kv[1], "lastVoteEpoch")?;
                } else {
                    self.log(2, format!("Skipping unknown cluster config variable '{}'", kv[0]));
                }
            }
            return Ok(());
        }
        if argv.len() < 8 {
            return Err("fewer than 8 fields".into());
        }
        let name = parse_name(argv[0].as_bytes()).ok_or("bad node name")?;
        if self.nodes.get(&name).is_some_and(|n| n.flags & (nf::MASTER | nf::SLAVE) != 0) {
            return Err("node listed twice".into());
        }
        self.node_or_placeholder(name);

        // ip:port[@cport][,hostname[,aux=value ...]]
        let parts: Vec<&str> = argv[1].split(',').collect();
        let hostname = parts.get(1).copied().unwrap_or("");
        let (mut tcp, mut tls) = (None, None);
        let mut shard = None;
        let mut human = String::new();
        for aux in parts.iter().skip(2) {
            let (k, v) = aux.split_once('=').ok_or_else(|| format!("bad aux field '{aux}'"))?;
            if v.contains('=') || !valid_aux(k) || !valid_aux(v) {
                return Err(format!("bad aux field '{aux}'"));
            }
            match k {
                "shard-id" => shard = Some(parse_name(v.as_bytes()).ok_or("bad shard-id")?),
                "nodename" => human = v.to_string(),
                "tcp-port" => tcp = Some(num::<u16>(v, "tcp-port")?),
                "tls-port" => tls = Some(num::<u16>(v, "tls-port")?),
                _ => {}
            }
        }
        let (ip, ports) = parts[0].rsplit_once(':').ok_or("no ':' in the address")?;
        let (port, cport) = match ports.split_once('@') {
            Some((p, c)) => (num::<u16>(p, "port")?, Some(num::<u16>(c, "bus port")?)),
            None => (num::<u16>(ports, "port")?, None),
        };
        let tls_cluster = self.settings.tls_cluster;
        let mut flags = 0;
        for f in argv[2].split(',') {
            let bit = flag_from_name(f).ok_or_else(|| format!("unknown flag '{f}'"))?;
            if bit == nf::MYSELF {
                if myself.is_some() {
                    return Err("a second myself".into());
                }
                *myself = Some(name);
            }
            flags |= bit;
        }
        let primary = if argv[3] == "-" {
            None
        } else {
            let p = parse_name(argv[3].as_bytes()).ok_or("bad primary name")?;
            if p == name {
                return Err("a replica of itself".into());
            }
            Some(self.node_or_placeholder(p))
        };
        let ping_sent: u64 = num(argv[4], "ping time")?;
        let pong_received: u64 = num(argv[5], "pong time")?;
        let epoch: u64 = num(argv[6], "config epoch")?;

        let n = self.nodes.get_mut(&name).expect("added above");
        n.hostname = hostname.to_string();
        n.human_nodename = human;
        n.ip = ip.to_string();
        match (tcp, tls) {
            (None, None) if tls_cluster => n.tls_port = port,
            (None, None) => n.tcp_port = port,
            (Some(t), None) => {
                n.tcp_port = t;
                n.tls_port = port;
            }
            (None, Some(t)) => {
                n.tcp_port = port;
                n.tls_port = t;
            }
            (Some(a), Some(b)) => {
                n.tcp_port = a;
                n.tls_port = b;
            }
        }
        n.cport = cport.unwrap_or_else(|| (n.default_port(tls_cluster) as u32 + consts::PORT_INCR).min(65535) as u16);
        n.flags = flags;
        if flags & nf::FAIL != 0 {
            n.fail_time = 1;
        }
        n.ping_sent = ping_sent;
        n.pong_received = pong_received;
        n.config_epoch = if n.is_replica() && primary.is_some() { 0 } else { epoch };
        if let Some(s) = shard {
            n.shard_id = s;
        }
        if let Some(p) = primary {
            self.link_replica(&name, &p);
        }

        for word in &argv[8..] {
            if let Some(inner) = word.strip_prefix('[') {
                let inner = inner.strip_suffix(']').ok_or("bad migration field")?;
                let (slot, to, peer) = if let Some((s, p)) = inner.split_once("->-") {
                    (s, true, p)
                } else if let Some((s, p)) = inner.split_once("-<-") {
                    (s, false, p)
                } else {
                    return Err(format!("bad migration field '{word}'"));
                };
                let slot = slot_num(slot)?;
                let peer = parse_name(peer.as_bytes()).ok_or("bad node name in a migration field")?;
                self.node_or_placeholder(peer);
                if to {
                    self.migrating_to.insert(slot, peer);
                } else {
                    self.importing_from.insert(slot, peer);
                }
                continue;
            }
            let (a, b) = match word.split_once('-') {
                Some((a, b)) => (slot_num(a)?, slot_num(b)?),
                None => {
                    let s = slot_num(word)?;
                    (s, s)
                }
            };
            if a <= b {
                self.add_slot_range(&name, a, b);
            }
        }
        Ok(())
    }

    /// After `load`, at the first call with a clock: the file's non-zero
    /// ping/pong times and FAIL times become `now`.
    pub(crate) fn settle_loaded_times(&mut self, now: u64) {
        for n in self.nodes.values_mut() {
            if n.ping_sent != 0 {
                n.ping_sent = now;
            }
            if n.pong_received != 0 {
                n.pong_received = now;
            }
            if n.fail_time != 0 {
                n.fail_time = now;
            }
            n.ctime = now;
        }
    }

    /// nodes.conf's text: every node not in handshake, sorted by name,
    /// then the vars line.
    pub(crate) fn conf_text(&self) -> String {
        let mut out = String::new();
        let ranges = self.all_ranges();
        for name in self.sorted_names() {
            let n = &self.nodes[&name];
            if n.in_handshake() {
                continue;
            }
            let r = ranges.get(&name).map_or(&[][..], |r| r);
            out.push_str(&self.node_line_with(n, true, false, r));
            out.push('\n');
        }
        out.push_str(&format!("vars currentEpoch {} lastVoteEpoch {}\n", self.current_epoch, self.last_vote_epoch));
        out
    }

    /// A fresh node: a primary with no slots and a random name and shard.
    pub(crate) fn fresh(settings: Settings, seed: u64) -> Cluster {
        let mut c = Cluster::empty(settings, seed);
        let name = c.random_name();
        let shard = c.random_name();
        c.myself = name;
        c.add_node(Node::new(name, shard, nf::MYSELF | nf::MASTER, 0));
        c.update_myself_from_settings();
        c.todo = 0;
        c.log(2, format!("No cluster configuration found, I'm {}", super::state::name_str(&name)));
        c.actions.push(Action::SaveConfig { fsync: true });
        c
    }

    /// The cluster nodes.conf `text` describes.
    pub(crate) fn from_conf(text: &str, settings: Settings, seed: u64) -> Result<Cluster, String> {
        let mut c = Cluster::empty(settings, seed);
        c.parse_conf(text)?;
        c.update_myself_from_settings();
        c.todo = 0;
        c.replicate_pending = c.is_replica();
        c.log(2, format!("Node configuration loaded, I'm {}", super::state::name_str(&c.myself)));
        c.later(todo::UPDATE_STATE);
        c.settle_pending = true;
        Ok(c)
    }
}
