//! Building and queueing bus messages: the header every message carries,
//! PING/PONG/MEET with their gossip and extensions, FAIL, UPDATE, PUBLISH,
//! and the failover messages. Each message leaves as an `Action::Send` on
//! a link, counted per type for CLUSTER INFO.
//!
//! Which nodes a PING gossips about follows Redis: about a tenth of the
//! known nodes (at least three) picked at random among the healthy ones
//! that have a link or slots, plus every node in PFAIL, so failure reports
//! spread fast. Extensions ride only on links to nodes that showed they
//! understand them.

use clusterbus::{mflags0, msg_type, node_flags as nf, Body, Extension, Gossip, Header, Message};

use super::state::{Action, Cluster, Env, LinkId, NodeName, NULL_NAME};

/// At most this many bytes of an IP fit a header or gossip field.
const IP_MAX: usize = clusterbus::IP_LEN - 1;

fn ip_bytes(ip: &str) -> Vec<u8> {
    let b = ip.as_bytes();
    b[..b.len().min(IP_MAX)].to_vec()
}

impl Cluster {
    /// The header of a message from this node now.
    pub(crate) fn header(&self, env: &Env) -> Header {
        let me = self.me();
        let primary = match me.replicaof.filter(|_| me.is_replica()).and_then(|p| self.nodes.get(&p)) {
            Some(p) => p,
            None => me,
        };
        let (tcp, tls, bus) = self.settings.announced_ports();
        let (port, pport) = if self.settings.tls_cluster { (tls, tcp) } else { (tcp, tls) };
        let mut mflags = [mflags0::EXT_DATA, 0, 0];
        if me.is_primary() && self.mf.end != 0 {
            mflags[0] |= mflags0::PAUSED;
        }
        Header {
            port,
            current_epoch: self.current_epoch,
            config_epoch: primary.config_epoch,
            offset: env.repl_offset,
            sender: self.myself,
            myslots: primary.slots.clone(),
            replicaof: me.replicaof.unwrap_or(NULL_NAME),
            myip: ip_bytes(&self.settings.announce_ip),
            pport,
            cport: bus,
            flags: me.flags,
            state: if self.state_ok { 0 } else { 1 },
            mflags,
        }
    }

    /// A message of type `t` with `body`.
    pub(crate) fn message(&self, t: u16, body: Body, env: &Env) -> Message {
        Message { msg_type: t, header: self.header(env), body }
    }

    /// Queues `msg` on `link`, if we still have that link.
    pub(crate) fn send(&mut self, link: LinkId, msg: Message) {
        if !self.links.contains_key(&link) {
            return;
        }
        if let Some(n) = self.stats_sent.get_mut(msg.msg_type as usize) {
            *n += 1;
        }
        self.actions.push(Action::Send { link, msg: Box::new(msg) });
    }

    /// Queues `msg` on our link to every node but us and those in handshake.
    pub(crate) fn broadcast(&mut self, msg: Message) {
        for name in self.sorted_names() {
            let n = &self.nodes[&name];
            if n.flags & (nf::MYSELF | nf::HANDSHAKE) != 0 {
                continue;
            }
            if let Some(l) = n.link {
                self.send(l, msg.clone());
            }
        }
    }

    /// A gossip section about `n`.
    fn gossip_entry(&self, name: &NodeName) -> Gossip {
        let n = &self.nodes[name];
        let (port, pport) = if self.settings.tls_cluster { (n.tls_port, n.tcp_port) } else { (n.tcp_port, n.tls_port) };
        Gossip {
            name: n.name,
            ping_sent: (n.ping_sent / 1000) as u32,
            pong_received: (n.pong_received / 1000) as u32,
            ip: ip_bytes(&n.ip),
            port,
            cport: n.cport,
            flags: n.flags,
            pport,
        }
    }

    /// The ping extensions this node sends: hostname and human name when
    /// set, the forgotten nodes still in the blacklist, the shard id.
    fn extensions(&self, now_s: u64) -> Vec<Extension> {
        let me = self.me();
        let mut v = Vec::new();
        if !me.hostname.is_empty() {
            v.push(Extension::Hostname(me.hostname.as_bytes().to_vec()));
        }
        if !me.human_nodename.is_empty() {
            v.push(Extension::HumanNodename(me.human_nodename.as_bytes().to_vec()));
        }
        let mut forgotten: Vec<(&NodeName, &u64)> = self.blacklist.iter().collect();
        forgotten.sort_unstable();
        for (name, &exp) in forgotten {
            if exp >= now_s {
                v.push(Extension::ForgottenNode { name: *name, ttl: exp - now_s });
            }
        }
        v.push(Extension::ShardId(me.shard_id));
        v
    }

    /// Sends a PING, PONG or MEET (`t`) on `link`, with gossip.
    pub(crate) fn send_ping(&mut self, link: LinkId, t: u16, env: &Env) {
        let Some(l) = self.links.get(&link) else { return };
        let (inbound, target) = (l.inbound, l.node);
        self.pings_built += 1;
        let mark = self.pings_built;
        let names = self.sorted_names();
        let total = names.len();
        let mut fresh = total as i64 - 2;
        let mut wanted = (total / 10).max(3) as i64;
        if wanted > fresh {
            wanted = fresh;
        }
        if !inbound && t == msg_type::PING {
            if let Some(n) = target.and_then(|t| self.nodes.get_mut(&t)) {
                n.ping_sent = env.now_ms;
            }
        }
        let mut picked: Vec<NodeName> = Vec::new();
        let mut tries = wanted * 3;
        while fresh > 0 && (picked.len() as i64) < wanted && tries > 0 {
            tries -= 1;
            let name = names[(self.random() % total as u64) as usize];
            if name == self.myself || Some(name) == target {
                continue;
            }
            let n = &self.nodes[&name];
            if n.timed_out() {
                continue;
            }
            if n.flags & (nf::HANDSHAKE | nf::NOADDR) != 0 || (n.link.is_none() && n.numslots == 0) {
                fresh -= 1;
                continue;
            }
            if n.last_in_ping_gossip == mark {
                continue;
            }
            self.nodes.get_mut(&name).expect("listed").last_in_ping_gossip = mark;
            picked.push(name);
            fresh -= 1;
        }
        let mut pfail_wanted = self.pfail_nodes;
        for name in &names {
            if pfail_wanted == 0 {
                break;
            }
            let n = &self.nodes[name];
            if n.flags & (nf::HANDSHAKE | nf::NOADDR) != 0 || !n.timed_out() {
                continue;
            }
            picked.push(*name);
            pfail_wanted -= 1;
        }
        let gossip: Vec<Gossip> = picked.iter().map(|n| self.gossip_entry(n)).collect();
        let ext_ok = target.and_then(|t| self.nodes.get(&t)).is_some_and(|n| n.flags & nf::EXTENSIONS_SUPPORTED != 0);
        let extensions = if ext_ok { self.extensions(env.now_ms / 1000) } else { Vec::new() };
        let msg = self.message(t, Body::Ping { gossip, extensions }, env);
        self.send(link, msg);
    }

    /// Sends a PONG to every node we have a link to, or only to the
    /// replicas of our shard (`local_replicas`).
    pub(crate) fn broadcast_pong(&mut self, local_replicas: bool, env: &Env) {
        let my_primary = self.me().replicaof;
        for name in self.sorted_names() {
            let n = &self.nodes[&name];
            let Some(link) = n.link else { continue };
            if name == self.myself || n.in_handshake() {
                continue;
            }
            if local_replicas {
                let local = n.is_replica() && n.replicaof.is_some_and(|p| p == self.myself || Some(p) == my_primary);
                if !local {
                    continue;
                }
            }
            self.send_ping(link, msg_type::PONG, env);
        }
    }

    /// Tells every node that `node` is failing.
    pub(crate) fn send_fail(&mut self, node: &NodeName, env: &Env) {
        let msg = self.message(msg_type::FAIL, Body::Fail { node: *node }, env);
        self.broadcast(msg);
    }

    /// Tells the node at the end of `link` the slots of `node` (it has a
    /// stale view).
    pub(crate) fn send_update(&mut self, link: Option<LinkId>, node: &NodeName, env: &Env) {
        let Some(link) = link else { return };
        let Some(n) = self.nodes.get(node) else { return };
        let mut slots = n.slots.clone();
        for (b, nc) in slots.0.iter_mut().zip(self.owner_not_claiming.0.iter()) {
            *b &= !nc;
        }
        let body = Body::Update { config_epoch: n.config_epoch, node: *node, slots };
        let msg = self.message(msg_type::UPDATE, body, env);
        self.send(link, msg);
    }

    /// PUBLISH to every node, or PUBLISHSHARD to the nodes of our shard.
    pub(crate) fn send_publish(&mut self, channel: &[u8], message: &[u8], shard: bool, env: &Env) {
        let t = if shard { msg_type::PUBLISHSHARD } else { msg_type::PUBLISH };
        let msg = self.message(t, Body::Publish { channel: channel.to_vec(), message: message.to_vec() }, env);
        if !shard {
            self.broadcast(msg);
            return;
        }
        let my_shard = self.me().shard_id;
        for name in self.sorted_names() {
            let n = &self.nodes[&name];
            if n.shard_id != my_shard || n.flags & (nf::MYSELF | nf::HANDSHAKE) != 0 {
                continue;
            }
            if let Some(l) = n.link {
                self.send(l, msg.clone());
            }
        }
    }

    /// Asks every primary for a vote (FAILOVER_AUTH_REQUEST), with
    /// FORCEACK during a manual failover.
    pub(crate) fn request_failover_auth(&mut self, env: &Env) {
        let mut msg = self.message(msg_type::FAILOVER_AUTH_REQUEST, Body::Empty, env);
        if self.mf.end != 0 {
            msg.header.mflags[0] |= mflags0::FORCEACK;
        }
        self.broadcast(msg);
    }

    /// Sends a message with an empty body (AUTH_ACK, MFSTART) to `node`.
    pub(crate) fn send_empty(&mut self, node: &NodeName, t: u16, env: &Env) {
        let Some(link) = self.nodes.get(node).and_then(|n| n.link) else { return };
        let msg = self.message(t, Body::Empty, env);
        self.send(link, msg);
    }
}
