//! The bus protocol's receiving side and the periodic work: what each
//! message does to our view (Redis's clusterProcessPacket), the handshake,
//! gossip sections and ping extensions, slot ownership by config epoch, the
//! events of links, and the tick (clusterCron) and end-of-turn work
//! (clusterBeforeSleep).
//!
//! Handshake: CLUSTER MEET adds a node in HANDSHAKE with a random name;
//! the tick connects to it and sends MEET; its PONG tells its real name and
//! the node is renamed. A node met this way learns of the others through
//! gossip sections, and connects to them in turn.
//!
//! Slots: the header of every PING/PONG carries the slots its sender (or
//! its primary) claims and the config epoch of that claim. A claim with a
//! larger epoch wins the slot; a claim with a smaller one gets an UPDATE
//! back telling the sender who owns it now. A primary that loses all its
//! slots to one node becomes that node's replica (this is how an old
//! primary rejoins after a failover).
//!
//! Timing follows Redis: every second PING the node with the oldest PONG
//! among five picked at random; PING any node whose PONG is older than
//! half the node timeout (or cluster-ping-interval); reconnect a link that
//! has been silent for half the node timeout; PFAIL after node_timeout
//! without an answer.

use clusterbus::{mflags0, msg_type, node_flags as nf, Body, Extension, Gossip, Header, Message};

use super::state::{name_str, parse_name, todo, valid_name, Action, Cluster, Env, Link, LinkAddr, LinkId, Node, NodeName, NULL_NAME, SLOTS};

/// The client ports (tcp, tls) a header or gossip section gives, as the
/// cluster's TLS setting decides which one is primary.
fn ports(tls_cluster: bool, port: u16, pport: u16) -> (u16, u16) {
    if tls_cluster {
        (pport, port)
    } else {
        (port, pport)
    }
}

fn text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Why CLUSTER MEET refused an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeetError {
    /// Not an IP address, or a port out of range.
    Invalid,
}

impl Cluster {
    /// Starts a handshake with the node at `ip:port@cport` (CLUSTER MEET).
    /// Returns Ok(false) when one with that address is already under way.
    pub fn start_handshake(&mut self, ip: &str, port: i64, cport: i64, env: &Env) -> Result<bool, MeetError> {
        let Ok(addr) = ip.parse::<std::net::IpAddr>() else { return Err(MeetError::Invalid) };
        if !(1..=65535).contains(&port) || !(1..=65535).contains(&cport) {
            return Err(MeetError::Invalid);
        }
        let (port, cport) = (port as u16, cport as u16);
        let norm = addr.to_string();
        let tls = self.settings.tls_cluster;
        let busy = self
            .nodes
            .values()
            .any(|n| n.in_handshake() && n.ip.eq_ignore_ascii_case(&norm) && n.default_port(tls) == port && n.cport == cport);
        if busy {
            return Ok(false);
        }
        let name = self.random_name();
        let shard = self.random_name();
        let mut n = Node::new(name, shard, nf::HANDSHAKE | nf::MEET, env.now_ms);
        n.ip = norm;
        if tls {
            n.tls_port = port;
        } else {
            n.tcp_port = port;
        }
        n.cport = cport;
        self.add_node(n);
        Ok(true)
    }

    /// The known sender of a message on `link` (Redis's
    /// getNodeFromLinkAndMsg): the link's node, or the node the header
    /// names, which then owns this inbound link.
    fn sender_of(&mut self, link: LinkId, name: &NodeName) -> Option<NodeName> {
        let l = self.links.get(&link)?;
        if let Some(n) = l.node.filter(|n| self.nodes.get(n).is_some_and(|n| !n.in_handshake())) {
            return Some(n);
        }
        // A message naming us as its sender is our own MEET come back
        // (CLUSTER MEET of our own address): not a peer.
        // Nor is a node still in handshake: its name is one we made up, so
        // only a confused peer could send it.
        if !valid_name(name) || *name == self.myself || self.nodes.get(name).is_none_or(|n| n.in_handshake()) {
            return None;
        }
        if l.node.is_none() && l.inbound {
            let old = self.nodes[name].inbound_link;
            if let Some(old) = old.filter(|&o| o != link) {
                self.close_link(old);
            }
            self.nodes.get_mut(name).expect("known").inbound_link = Some(link);
            self.links.get_mut(&link).expect("known").node = Some(*name);
        }
        Some(*name)
    }

    /// A message arrived (clusterProcessPacket).
    pub(crate) fn process_message(&mut self, link: LinkId, inbound: bool, addr: &LinkAddr, msg: Message, env: &Env) {
        let now = env.now_ms;
        let t = msg.msg_type;
        if let Some(n) = self.stats_received.get_mut(t as usize) {
            *n += 1;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = self.links.entry(link) {
            if !inbound {
                return;
            }
            e.insert(Link { node: None, inbound: true, ctime: now });
        }
        let hdr = &msg.header;
        let sender = self.sender_of(link, &hdr.sender);
        let (mut sender_current, mut sender_config) = (0, 0);
        if let Some(s) = sender {
            let n = self.nodes.get_mut(&s).expect("known");
            if hdr.mflags[0] & mflags0::EXT_DATA != 0 {
                n.flags |= nf::EXTENSIONS_SUPPORTED;
            }
            n.data_received = now;
            if !n.in_handshake() {
                sender_current = hdr.current_epoch;
                sender_config = hdr.config_epoch;
                if sender_config > n.config_epoch {
                    n.config_epoch = sender_config;
                    self.todo |= todo::SAVE_CONFIG | todo::FSYNC_CONFIG;
                }
                n.repl_offset = hdr.offset;
                n.repl_offset_time = now;
                if sender_current > self.current_epoch {
                    self.current_epoch = sender_current;
                }
                let from_my_paused_primary = self.is_replica() && self.me().replicaof == Some(s) && hdr.mflags[0] & mflags0::PAUSED != 0;
                if self.mf.end != 0 && from_my_paused_primary && self.mf.primary_offset.is_none() {
                    self.mf.primary_offset = Some(hdr.offset);
                    self.later(todo::HANDLE_MANUALFAILOVER);
                    self.log(2, format!("Received replication offset for paused master manual failover: {}", hdr.offset));
                }
            }
        }
        match t {
            msg_type::PING | msg_type::PONG | msg_type::MEET => self.on_ping(link, inbound, addr, &msg, sender, sender_config, env),
            msg_type::FAIL => {
                let Body::Fail { node } = &msg.body else { return };
                let Some(s) = sender else {
                    let text = format!("Ignoring FAIL message from unknown node {} about {}", name_str(&hdr.sender), name_str(node));
                    self.log(2, text);
                    return;
                };
                let Some(f) = self.nodes.get_mut(node) else { return };
                if f.flags & (nf::FAIL | nf::MYSELF) != 0 {
                    return;
                }
                f.flags = (f.flags | nf::FAIL) & !nf::PFAIL;
                f.fail_time = now;
                let text = format!(
                    "FAIL message received from {} ({}) about {} ({})",
                    name_str(&s),
                    self.nodes[&s].human_nodename,
                    name_str(node),
                    self.nodes[node].human_nodename
                );
                self.log(2, text);
                self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE);
            }
            msg_type::PUBLISH | msg_type::PUBLISHSHARD => {
                if sender.is_none() {
                    return;
                }
                if let Body::Publish { channel, message } = msg.body {
                    self.actions.push(Action::Publish { channel, message, shard: t == msg_type::PUBLISHSHARD });
                }
            }
            msg_type::FAILOVER_AUTH_REQUEST => {
                if let Some(s) = sender {
                    self.vote_if_needed(&s, hdr, env);
                }
            }
            msg_type::FAILOVER_AUTH_ACK => {
                if let Some(s) = sender {
                    self.count_vote(&s, sender_current);
                }
            }
            msg_type::MFSTART => {
                let Some(s) = sender else { return };
                if self.nodes[&s].replicaof != Some(self.myself) {
                    return;
                }
                self.on_mfstart(&s, link, env);
            }
            msg_type::UPDATE => {
                let Body::Update { config_epoch, node, slots } = &msg.body else { return };
                if sender.is_none() {
                    return;
                }
                let Some(n) = self.nodes.get(node) else { return };
                if n.config_epoch >= *config_epoch {
                    return;
                }
                if n.is_replica() {
                    self.set_node_as_primary(node);
                }
                self.nodes.get_mut(node).expect("known").config_epoch = *config_epoch;
                self.later(todo::SAVE_CONFIG | todo::FSYNC_CONFIG);
                self.update_slots_config_with(node, *config_epoch, slots, env);
            }
            msg_type::MODULE => {}
            _ => self.log(3, format!("Received unknown packet type: {t}")),
        }
    }

    /// PING, PONG and MEET.
    #[allow(clippy::too_many_arguments)]
    fn on_ping(&mut self, link: LinkId, inbound: bool, addr: &LinkAddr, msg: &Message, sender: Option<NodeName>, sender_config: u64, env: &Env) {
        let now = env.now_ms;
        let t = msg.msg_type;
        let hdr = &msg.header;
        let (gossip, extensions): (&[Gossip], &[Extension]) = match &msg.body {
            Body::Ping { gossip, extensions } => (gossip, extensions),
            _ => (&[], &[]),
        };
        if t == msg_type::PING || t == msg_type::MEET {
            let learn = (t == msg_type::MEET || self.me().ip.is_empty()) && self.settings.announce_ip.is_empty();
            if learn && !addr.local_ip.is_empty() && addr.local_ip != self.me().ip {
                self.me_mut().ip = addr.local_ip.clone();
                self.log(2, format!("IP address for this node updated to {}", addr.local_ip));
                self.later(todo::SAVE_CONFIG);
            }
            if sender.is_none() && t == msg_type::MEET {
                let name = self.random_name();
                let shard = self.random_name();
                let mut n = Node::new(name, shard, nf::HANDSHAKE, now);
                n.ip = if hdr.myip.is_empty() { addr.peer_ip.clone() } else { text(&hdr.myip) };
                (n.tcp_port, n.tls_port) = ports(self.settings.tls_cluster, hdr.port, hdr.pport);
                n.cport = hdr.cport;
                self.add_node(n);
                self.later(todo::SAVE_CONFIG);
                self.process_gossip(link, hdr, gossip, env);
            }
            self.send_ping(link, msg_type::PONG, env);
        }

        if !inbound {
            let Some(ln) = self.link_node(link) else { return };
            if self.nodes.get(&ln).is_some_and(|n| n.in_handshake()) {
                if let Some(s) = sender {
                    self.log(1, format!("Handshake: we already know node {}, updating the address if needed.", name_str(&s)));
                    if self.update_address_if_needed(&s, link, hdr, addr) {
                        self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE);
                    }
                    self.del_node(&ln);
                    return;
                }
                if !valid_name(&hdr.sender) || hdr.sender == self.myself {
                    self.del_node(&ln);
                    return;
                }
                self.rename_node(&ln, hdr.sender);
                let n = self.nodes.get_mut(&hdr.sender).expect("renamed");
                n.flags &= !nf::HANDSHAKE;
                n.flags |= hdr.flags & (nf::MASTER | nf::SLAVE);
                self.log(0, format!("Handshake with node {} completed.", name_str(&hdr.sender)));
                self.later(todo::SAVE_CONFIG);
            } else if ln != hdr.sender {
                let n = self.nodes.get_mut(&ln).expect("linked");
                n.flags |= nf::NOADDR;
                n.ip.clear();
                n.tcp_port = 0;
                n.tls_port = 0;
                n.cport = 0;
                self.close_link(link);
                self.later(todo::SAVE_CONFIG);
                return;
            }
        }

        if let Some(s) = sender {
            let n = self.nodes.get_mut(&s).expect("known");
            n.flags = (n.flags & !nf::NOFAILOVER) | (hdr.flags & nf::NOFAILOVER);
            if t == msg_type::PING && !n.in_handshake() && self.update_address_if_needed(&s, link, hdr, addr) {
                self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE);
            }
        }

        if !inbound && t == msg_type::PONG {
            if let Some(ln) = self.link_node(link) {
                let n = self.nodes.get_mut(&ln).expect("linked");
                n.pong_received = now;
                n.ping_sent = 0;
                if n.timed_out() {
                    n.flags &= !nf::PFAIL;
                    self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE);
                } else if n.failed() {
                    self.clear_failure_if_needed(&ln, now);
                }
            }
        }

        let Some(s) = sender else { return };
        if !self.nodes.contains_key(&s) {
            return;
        }
        self.update_role(&s, hdr, sender_config);

        // The slots the sender's shard claims, against our table.
        let sn = &self.nodes[&s];
        let sender_primary = if sn.is_primary() { Some(s) } else { sn.replicaof };
        let dirty = sender_primary.and_then(|p| self.nodes.get(&p)).is_some_and(|p| p.slots != hdr.myslots);
        if dirty && self.nodes[&s].is_primary() {
            self.update_slots_config_with(&s, sender_config, &hdr.myslots, env);
        }
        if dirty {
            for j in hdr.myslots.iter() {
                if self.slots[j as usize] == Some(s) || self.slot_unclaimed(j) {
                    continue;
                }
                let owner = self.slots[j as usize].expect("claimed");
                if self.nodes.get(&owner).is_some_and(|o| o.config_epoch > sender_config) {
                    let text = format!("Node {} has old slots configuration, sending an UPDATE message about {}", name_str(&s), name_str(&owner));
                    self.log(1, text);
                    let l = self.nodes.get(&s).and_then(|n| n.link);
                    self.send_update(l, &owner, env);
                    break;
                }
            }
        }

        if self.i_am_primary() && self.nodes.get(&s).is_some_and(|n| n.is_primary()) && sender_config == self.me().config_epoch {
            self.handle_config_epoch_collision(&s);
        }

        self.process_gossip(link, hdr, gossip, env);
        if self.nodes.contains_key(&s) {
            self.process_extensions(&s, extensions, env);
        }
    }

    /// The sender says whether it is a primary or whose replica it is.
    fn update_role(&mut self, s: &NodeName, hdr: &Header, sender_config: u64) {
        if hdr.replicaof == NULL_NAME {
            self.set_node_as_primary(s);
            return;
        }
        let primary = parse_name(&hdr.replicaof).filter(|p| self.nodes.contains_key(p) && p != s);
        if self.nodes[s].is_primary() {
            let (shard, epoch) = (self.nodes[s].shard_id, self.nodes[s].config_epoch);
            match primary {
                Some(p) if self.nodes[&p].shard_id == shard => {
                    if epoch > sender_config {
                        let text = format!(
                            "Ignore stale message from {} in shard {}; gossip config epoch: {sender_config}, current config epoch: {epoch}",
                            name_str(s),
                            name_str(&shard)
                        );
                        self.log(2, text);
                    } else {
                        let moved = self.move_node_slots(s, &p);
                        self.set_node_as_primary(&p);
                        self.nodes.get_mut(&p).expect("known").config_epoch = sender_config;
                        let text = format!(
                            "A failover occurred in shard {}; node {} lost {moved} slot(s) to node {} with a config epoch of {sender_config}",
                            name_str(&shard),
                            name_str(s),
                            name_str(&p)
                        );
                        self.log(2, text);
                    }
                }
                _ => {
                    let deleted = self.del_node_slots(s);
                    let text = format!("Node {} is no longer master of shard {}; removed all {deleted} slot(s) it used to own", name_str(s), name_str(&shard));
                    self.log(2, text);
                }
            }
            let n = self.nodes.get_mut(s).expect("known");
            n.flags = (n.flags & !(nf::MASTER | nf::MIGRATE_TO)) | nf::SLAVE;
            self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE);
        }
        if let Some(p) = primary {
            if self.nodes[s].replicaof != Some(p) {
                if let Some(old) = self.nodes[s].replicaof {
                    self.unlink_replica(s, &old);
                }
                self.link_replica(s, &p);
                let shard = self.nodes[&p].shard_id;
                self.update_shard_id(s, shard);
                self.later(todo::SAVE_CONFIG);
            }
        }
    }

    /// The sender's address as this message shows it, if it changed
    /// (nodeUpdateAddressIfNeeded). Returns whether it did.
    fn update_address_if_needed(&mut self, node: &NodeName, link: LinkId, hdr: &Header, addr: &LinkAddr) -> bool {
        let tls = self.settings.tls_cluster;
        let Some(n) = self.nodes.get(node) else { return false };
        if n.link == Some(link) {
            return false;
        }
        let ip = if hdr.myip.is_empty() { addr.peer_ip.clone() } else { text(&hdr.myip) };
        if ip.is_empty() {
            return false;
        }
        let (tcp, tls_port) = ports(tls, hdr.port, hdr.pport);
        if n.tcp_port == tcp && n.tls_port == tls_port && n.cport == hdr.cport && n.ip == ip {
            return false;
        }
        let old_link = n.link;
        let n = self.nodes.get_mut(node).expect("known");
        n.ip = ip.clone();
        n.tcp_port = tcp;
        n.tls_port = tls_port;
        n.cport = hdr.cport;
        n.flags &= !nf::NOADDR;
        let port = n.default_port(tls);
        let human = n.human_nodename.clone();
        if let Some(l) = old_link {
            self.close_link(l);
        }
        self.log(2, format!("Address updated for node {} ({human}), now {ip}:{port}", name_str(node)));
        if self.is_replica() && self.me().replicaof == Some(*node) {
            self.actions.push(Action::Replicate { ip, port });
        }
        true
    }

    /// A node's human nodename (empty if unknown), for log lines that
    /// name nodes as Redis does: "<id> (<human>)".
    fn human_of(&self, n: &NodeName) -> String {
        self.nodes.get(n).map(|x| x.human_nodename.clone()).unwrap_or_default()
    }

    /// What a message's gossip sections teach (clusterProcessGossipSection).
    fn process_gossip(&mut self, link: LinkId, hdr: &Header, gossip: &[Gossip], env: &Env) {
        let now = env.now_ms;
        let reporter = self.link_node(link).or_else(|| Some(hdr.sender).filter(|s| self.nodes.contains_key(s)));
        let invalid = gossip.iter().filter(|g| !valid_name(&g.name)).count();
        if invalid > 0 {
            let text = match reporter {
                Some(r) => format!("Node {} gossiped {invalid} nodes with invalid IDs.", name_str(&r)),
                None => format!("Unknown node gossiped {invalid} nodes with invalid IDs."),
            };
            self.log(3, text);
            return;
        }
        let tls = self.settings.tls_cluster;
        let reporter_primary = reporter.and_then(|r| self.nodes.get(&r)).is_some_and(|r| r.is_primary());
        for g in gossip {
            let (tcp, tls_port) = ports(tls, g.port, g.pport);
            let g_ip = text(&g.ip);
            let failing = g.flags & (nf::FAIL | nf::PFAIL) != 0;
            if self.nodes.contains_key(&g.name) {
                if g.name == self.myself {
                    continue;
                }
                if let Some(r) = reporter.filter(|_| reporter_primary) {
                    if failing {
                        if self.add_failure_report(&g.name, &r, now) {
                            let (rh, gh) = (self.human_of(&r), self.human_of(&g.name));
                            self.log(1, format!("Node {} ({rh}) reported node {} ({gh}) as not reachable.", name_str(&r), name_str(&g.name)));
                        }
                        self.mark_failing_if_needed(&g.name, env);
                    } else if self.del_failure_report(&g.name, &r, now) {
                        let (rh, gh) = (self.human_of(&r), self.human_of(&g.name));
                        self.log(1, format!("Node {} ({rh}) reported node {} ({gh}) is back online.", name_str(&r), name_str(&g.name)));
                    }
                }
                let reports = self.failure_reports_count(&g.name, now);
                let Some(n) = self.nodes.get_mut(&g.name) else { continue };
                if !failing && n.ping_sent == 0 && reports == 0 {
                    let pong = g.pong_received as u64 * 1000;
                    if pong <= now + 500 && pong > n.pong_received {
                        n.pong_received = pong;
                    }
                }
                let moved = n.ip != g_ip || n.tls_port != tls_port || n.tcp_port != tcp || n.cport != g.cport;
                if n.flags & (nf::FAIL | nf::PFAIL) != 0 && g.flags & nf::NOADDR == 0 && !failing && moved {
                    let old = n.link;
                    n.ip = g_ip;
                    n.tcp_port = tcp;
                    n.tls_port = tls_port;
                    n.cport = g.cport;
                    n.flags &= !nf::NOADDR;
                    if let Some(l) = old {
                        self.close_link(l);
                    }
                }
            } else if reporter.is_some() && g.flags & nf::NOADDR == 0 && !self.blacklisted(&g.name, now / 1000) {
                let shard = self.random_name();
                // Peers never gossip about themselves nor about nodes in
                // handshake: such flags from a confused peer are dropped.
                let mut n = Node::new(g.name, shard, g.flags & !(nf::MYSELF | nf::HANDSHAKE | nf::MEET), now);
                n.ip = g_ip;
                n.tcp_port = tcp;
                n.tls_port = tls_port;
                n.cport = g.cport;
                self.add_node(n);
            }
        }
    }

    /// What a message's ping extensions say of its sender
    /// (clusterProcessPingExtensions).
    fn process_extensions(&mut self, sender: &NodeName, extensions: &[Extension], env: &Env) {
        let (mut hostname, mut human, mut shard) = (None, None, None);
        let me = self.myself;
        for e in extensions {
            match e {
                Extension::Hostname(h) => hostname = Some(text(h)),
                Extension::HumanNodename(h) => human = Some(text(h)),
                Extension::ShardId(s) => shard = Some(*s),
                Extension::ForgottenNode { name, ttl } => {
                    let my_primary = self.is_replica() && self.me().replicaof == Some(*name);
                    if self.nodes.contains_key(name) && *name != me && !my_primary && name != sender {
                        self.blacklist.insert(*name, env.now_ms / 1000 + ttl);
                        self.del_node(name);
                        self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
                    }
                }
                Extension::Unknown { ext_type, .. } => self.log(3, format!("Received unknown extension type {ext_type}")),
            }
        }
        let Some(n) = self.nodes.get_mut(sender) else { return };
        let hostname = hostname.unwrap_or_default();
        let human = human.unwrap_or_default();
        if n.hostname != hostname || n.human_nodename != human {
            n.hostname = hostname;
            n.human_nodename = human;
            self.later(todo::SAVE_CONFIG);
        }
        let shard = shard.or_else(|| {
            let n = &self.nodes[sender];
            let p = n.replicaof.filter(|_| n.is_replica()).and_then(|p| self.nodes.get(&p)).unwrap_or(n);
            Some(p.shard_id)
        });
        if let Some(s) = shard.filter(valid_name_ref) {
            self.update_shard_id(sender, s);
        }
    }

    /// `sender` claims `slots` with `epoch`: take every slot it claims with
    /// a newer epoch than the owner's (clusterUpdateSlotsConfigWith), and
    /// follow it if it took all of our shard's slots.
    pub(crate) fn update_slots_config_with(&mut self, sender: &NodeName, epoch: u64, slots: &clusterbus::SlotBitmap, env: &Env) {
        if *sender == self.myself {
            self.log(2, "Discarding UPDATE message about myself.".into());
            return;
        }
        let cur_primary = if self.i_am_primary() { Some(self.myself) } else { self.me().replicaof };
        let mut new_primary = None;
        let mut dirty: Vec<u16> = Vec::new();
        let (mut sender_slots, mut migrated_ours) = (0, 0);
        for j in 0..SLOTS as u16 {
            let owner = self.slots[j as usize];
            if slots.get(j) {
                sender_slots += 1;
                if owner == Some(*sender) {
                    self.owner_not_claiming.clear(j);
                    continue;
                }
                if self.importing_from.contains_key(&j) {
                    continue;
                }
                let older = owner.and_then(|o| self.nodes.get(&o)).is_none_or(|o| o.config_epoch < epoch);
                if self.slot_unclaimed(j) || older {
                    if owner == Some(self.myself) && env.has_keys {
                        dirty.push(j);
                    }
                    if owner.is_some() && owner == cur_primary {
                        new_primary = Some(*sender);
                        migrated_ours += 1;
                    }
                    self.del_slot(j);
                    self.add_slot(sender, j);
                    self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
                }
            } else if owner == Some(*sender) {
                self.owner_not_claiming.set(j);
            }
        }
        let cur_empty = cur_primary.and_then(|p| self.nodes.get(&p)).is_some_and(|p| p.numslots == 0);
        let grand = self
            .me()
            .replicaof
            .and_then(|p| self.nodes.get(&p))
            .and_then(|p| p.replicaof)
            .filter(|g| *g != self.myself && self.nodes.contains_key(g));
        if new_primary.is_some() && cur_empty && (self.settings.allow_replica_migration || sender_slots == migrated_ours) {
            let text = format!(
                "Configuration change detected. Reconfiguring myself as a replica of {} ({})",
                name_str(sender),
                self.nodes[sender].human_nodename
            );
            self.log(2, text);
            self.set_my_primary(sender);
            self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
        } else if let Some(g) = grand {
            self.log(2, format!("I'm a sub-replica! Reconfiguring myself as a replica of grandmaster {}", name_str(&g)));
            self.set_my_primary(&g);
            self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
        } else if !dirty.is_empty() {
            self.actions.push(Action::DropSlots(dirty));
        }
    }

    /// Our outbound link to `node` is up: greet it (MEET or PING).
    pub(crate) fn on_link_connected(&mut self, node: &NodeName, link: LinkId, env: &Env) {
        let Some(n) = self.nodes.get_mut(node) else {
            self.actions.push(Action::Close { link });
            return;
        };
        n.connecting = false;
        let old = n.link.replace(link);
        let old_ping = n.ping_sent;
        let meet = n.flags & nf::MEET != 0;
        if let Some(old) = old {
            self.links.remove(&old);
            self.actions.push(Action::Close { link: old });
        }
        self.links.insert(link, Link { node: Some(*node), inbound: false, ctime: env.now_ms });
        self.send_ping(link, if meet { msg_type::MEET } else { msg_type::PING }, env);
        let n = self.nodes.get_mut(node).expect("known");
        if old_ping != 0 {
            n.ping_sent = old_ping;
        }
        n.flags &= !nf::MEET;
    }

    /// Connecting to `node` failed: count it as a PING unanswered.
    pub(crate) fn on_link_failed(&mut self, node: &NodeName, env: &Env) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.connecting = false;
            if n.ping_sent == 0 {
                n.ping_sent = env.now_ms;
            }
        }
    }

    /// `link` is gone.
    pub(crate) fn on_link_closed(&mut self, link: LinkId) {
        self.forget_link(link);
    }

    /// The periodic work (clusterCron).
    pub(crate) fn cron(&mut self, env: &Env) {
        let now = env.now_ms;
        self.iteration += 1;
        self.update_myself_from_settings();
        if self.replicate_pending {
            // A replica that does not replicate yet (loaded from nodes.conf,
            // or its primary's address was unknown): start once we know where.
            let p = self.me().replicaof.filter(|_| self.is_replica()).and_then(|p| self.nodes.get(&p));
            if let Some(p) = p.filter(|p| p.has_addr() && !p.ip.is_empty()) {
                let (ip, port) = (p.ip.clone(), p.default_port(self.settings.tls_cluster));
                self.actions.push(Action::Replicate { ip, port });
                self.replicate_pending = false;
            } else if !self.is_replica() {
                self.replicate_pending = false;
            }
        }
        let timeout = self.settings.node_timeout;
        let handshake_timeout = timeout.max(1000);
        self.pfail_nodes = 0;
        let my_primary = self.me().replicaof;
        let names = self.sorted_names();
        for name in &names {
            let Some(n) = self.nodes.get_mut(name) else { continue };
            if n.flags & (nf::MYSELF | nf::NOADDR) != 0 {
                continue;
            }
            if n.timed_out() {
                self.pfail_nodes += 1;
            }
            if n.in_handshake() && now.saturating_sub(n.ctime) > handshake_timeout && Some(*name) != my_primary {
                self.del_node(name);
                continue;
            }
            if n.link.is_none() && !n.connecting {
                n.connecting = true;
                let (ip, cport) = (n.ip.clone(), n.cport);
                self.actions.push(Action::Connect { node: *name, ip, cport });
            }
        }

        if self.iteration.is_multiple_of(10) {
            let names = self.sorted_names();
            let mut best: Option<(u64, NodeName)> = None;
            for _ in 0..5 {
                let name = names[(self.random() % names.len() as u64) as usize];
                let n = &self.nodes[&name];
                if n.link.is_none() || n.ping_sent != 0 || n.flags & (nf::MYSELF | nf::HANDSHAKE) != 0 {
                    continue;
                }
                if best.is_none_or(|(p, _)| p > n.pong_received) {
                    best = Some((n.pong_received, name));
                }
            }
            if let Some((_, name)) = best {
                let link = self.nodes[&name].link.expect("checked");
                self.send_ping(link, msg_type::PING, env);
            }
        }

        let (mut orphaned, mut max_replicas, mut my_replicas) = (0, 0, 0);
        let mut update = false;
        let i_am_replica = self.is_replica();
        let my_primary = self.me().replicaof;
        for name in self.sorted_names() {
            let Some(n) = self.nodes.get(&name) else { continue };
            if n.flags & (nf::MYSELF | nf::NOADDR | nf::HANDSHAKE) != 0 {
                continue;
            }
            if i_am_replica && n.is_primary() && !n.failed() {
                let ok = self.ok_replicas(&name);
                if ok == 0 && n.numslots > 0 && n.flags & nf::MIGRATE_TO != 0 {
                    orphaned += 1;
                }
                max_replicas = max_replicas.max(ok);
                if my_primary == Some(name) {
                    my_replicas = ok;
                }
            }
            let ping_delay = now.saturating_sub(n.ping_sent);
            let data_delay = now.saturating_sub(n.data_received);
            if let Some(l) = n.link {
                let age = self.links.get(&l).map_or(0, |l| now.saturating_sub(l.ctime));
                if age > timeout && n.ping_sent != 0 && ping_delay > timeout / 2 && data_delay > timeout / 2 {
                    self.close_link(l);
                }
            }
            let n = &self.nodes[&name];
            let interval = if self.settings.ping_interval != 0 { self.settings.ping_interval } else { timeout / 2 };
            if let Some(l) = n.link.filter(|_| n.ping_sent == 0 && now.saturating_sub(n.pong_received) > interval) {
                self.send_ping(l, msg_type::PING, env);
                continue;
            }
            if self.mf.end != 0 && self.i_am_primary() && self.mf.replica == Some(name) {
                if let Some(l) = n.link {
                    self.send_ping(l, msg_type::PING, env);
                    continue;
                }
            }
            if n.ping_sent == 0 {
                continue;
            }
            let delay = ping_delay.min(data_delay);
            if delay > timeout && n.flags & (nf::PFAIL | nf::FAIL) == 0 {
                self.nodes.get_mut(&name).expect("listed").flags |= nf::PFAIL;
                update = true;
                if self.i_am_primary() && self.size == 1 {
                    self.mark_failing_if_needed(&name, env);
                } else {
                    self.log(0, format!("*** NODE {} possibly failing", name_str(&name)));
                }
            }
        }

        self.manual_failover_check_timeout(now);
        if self.is_replica() {
            self.handle_manual_failover(env);
            self.handle_replica_failover(env);
            if orphaned > 0 && max_replicas >= 2 && my_replicas == max_replicas && self.settings.allow_replica_migration {
                self.handle_replica_migration(max_replicas, env);
            }
        }
        if update || !self.state_ok {
            self.update_state(now);
        }
    }

    /// The end-of-turn work (clusterBeforeSleep).
    pub(crate) fn sleep_work(&mut self, env: &Env) {
        let flags = self.todo;
        self.todo = 0;
        if flags & todo::HANDLE_MANUALFAILOVER != 0 {
            if self.is_replica() {
                self.handle_manual_failover(env);
                self.handle_replica_failover(env);
            }
        } else if flags & todo::HANDLE_FAILOVER != 0 {
            self.handle_replica_failover(env);
        }
        if flags & todo::UPDATE_STATE != 0 {
            self.update_state(env.now_ms);
        }
        if flags & todo::SAVE_CONFIG != 0 {
            self.actions.push(Action::SaveConfig { fsync: flags & todo::FSYNC_CONFIG != 0 });
        }
    }
}

fn valid_name_ref(n: &NodeName) -> bool {
    valid_name(n)
}
