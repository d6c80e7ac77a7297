//! Tests of the cluster state machine: nodes.conf, and whole clusters of
//! `Cluster`s wired together by a simulated network and clock (`Sim`), so
//! handshake, gossip, failure detection and failover run as they would
//! between processes, deterministically.

use std::collections::{HashMap, VecDeque};

use clusterbus::{node_flags as nf, Message};

use super::*;

const T0: u64 = 1_700_000_000_000;

fn settings(i: usize, node_timeout: u64) -> Settings {
    Settings { node_timeout, port: 30000 + i as u16, bus_port: 40000 + i as u16, ..Settings::default() }
}

/// What a node was told to do with replication.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Primary,
    ReplicaOf(u16),
}

/// N clusters, a network between them and a clock.
struct Sim {
    nodes: Vec<Option<Cluster>>,
    now: u64,
    next_link: u64,
    /// (node, its link) -> (peer node, the peer's link, the peer's side is inbound).
    peers: HashMap<(usize, LinkId), (usize, LinkId, bool)>,
    queue: VecDeque<(usize, LinkId, bool, Message)>,
    offsets: Vec<u64>,
    roles: Vec<Role>,
    saved: Vec<Option<String>>,
    died_at: Vec<u64>,
    seen: Vec<Vec<Action>>,
}

impl Sim {
    fn new(n: usize, node_timeout: u64) -> Sim {
        Sim {
            nodes: (0..n).map(|i| Some(Cluster::new(settings(i, node_timeout), 1000 + i as u64))).collect(),
            now: T0,
            next_link: 1,
            peers: HashMap::new(),
            queue: VecDeque::new(),
            offsets: vec![100; n],
            roles: vec![Role::Primary; n],
            saved: vec![None; n],
            died_at: vec![0; n],
            seen: vec![Vec::new(); n],
        }
    }

    fn c(&mut self, i: usize) -> &mut Cluster {
        self.nodes[i].as_mut().expect("alive")
    }

    fn name(&self, i: usize) -> NodeName {
        self.nodes[i].as_ref().expect("alive").myself
    }

    fn env(&self, i: usize) -> Env {
        let primary_alive = match self.roles[i] {
            Role::ReplicaOf(port) => self.nodes.iter().flatten().any(|c| c.settings.port == port),
            Role::Primary => true,
        };
        let down = if primary_alive { 0 } else { self.now - self.died_at.iter().copied().max().unwrap_or(self.now) };
        Env { now_ms: self.now, repl_offset: self.offsets[i], primary_link_up: primary_alive, primary_link_down_ms: down, has_keys: false }
    }

    /// Carries out node `i`'s actions.
    fn drain(&mut self, i: usize) {
        loop {
            let Some(c) = self.nodes[i].as_mut() else { return };
            let actions = std::mem::take(&mut c.actions);
            if actions.is_empty() {
                return;
            }
            for a in actions {
                self.seen[i].push(match &a {
                    Action::Send { .. } => Action::Log { level: 0, text: "send".into() },
                    other => other.clone(),
                });
                match a {
                    Action::Connect { node, cport, .. } => {
                        let env = self.env(i);
                        let dst = (0..self.nodes.len()).find(|&j| self.nodes[j].as_ref().is_some_and(|c| c.settings.bus_port == cport));
                        match dst {
                            None => self.c(i).link_failed(&node, &env),
                            Some(j) => {
                                let (out, inb) = (self.next_link, self.next_link + 1);
                                self.next_link += 2;
                                self.peers.insert((i, out), (j, inb, true));
                                self.peers.insert((j, inb), (i, out, false));
                                self.c(i).link_connected(&node, out, &env);
                            }
                        }
                    }
                    Action::Send { link, msg } => {
                        if let Some(&(j, l, inbound)) = self.peers.get(&(i, link)) {
                            self.queue.push_back((j, l, inbound, *msg));
                        }
                    }
                    Action::Close { link } => {
                        if let Some((j, l, _)) = self.peers.remove(&(i, link)) {
                            self.peers.remove(&(j, l));
                            let env = self.env(j);
                            if let Some(c) = self.nodes[j].as_mut() {
                                c.link_closed(l, &env);
                            }
                        }
                        let env = self.env(i);
                        self.c(i).link_closed(link, &env);
                    }
                    Action::Replicate { port, .. } => self.roles[i] = Role::ReplicaOf(port),
                    Action::Promote => self.roles[i] = Role::Primary,
                    Action::SaveConfig { .. } => {
                        let text = self.c(i).config_text();
                        self.saved[i] = Some(text);
                    }
                    _ => {}
                }
            }
        }
    }

    /// Delivers queued messages, with before_sleep after each, until the
    /// network is quiet.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            while let Some((j, l, inbound, msg)) = self.queue.pop_front() {
                let env = self.env(j);
                let addr = LinkAddr { peer_ip: "127.0.0.1".into(), local_ip: "127.0.0.1".into() };
                if let Some(c) = self.nodes[j].as_mut() {
                    c.on_message(l, inbound, &addr, msg, &env);
                    self.drain(j);
                }
            }
            for i in 0..self.nodes.len() {
                if self.nodes[i].is_some() {
                    let env = self.env(i);
                    self.c(i).before_sleep(&env);
                    self.drain(i);
                }
            }
            if self.queue.is_empty() {
                return;
            }
        }
        panic!("the network never went quiet");
    }

    /// Runs the clock `ms` forward in 100 ms ticks.
    fn run(&mut self, ms: u64) {
        for _ in 0..ms / 100 {
            self.now += 100;
            for i in 0..self.nodes.len() {
                if self.nodes[i].is_some() {
                    let env = self.env(i);
                    self.c(i).tick(&env);
                    self.drain(i);
                }
            }
            self.settle();
        }
    }

    /// Runs until `done` holds, for at most `max_ms`; returns the time taken.
    fn run_until(&mut self, max_ms: u64, mut done: impl FnMut(&Sim) -> bool) -> Option<u64> {
        let start = self.now;
        while self.now - start <= max_ms {
            if done(self) {
                return Some(self.now - start);
            }
            self.run(100);
        }
        None
    }

    /// Node `i` dies: its links drop, nothing reaches it any more.
    fn kill(&mut self, i: usize) -> Cluster {
        let keys: Vec<(usize, LinkId)> = self.peers.keys().filter(|(n, _)| *n == i).copied().collect();
        for k in keys {
            if let Some((j, l, _)) = self.peers.remove(&k) {
                self.peers.remove(&(j, l));
                let env = self.env(j);
                if let Some(c) = self.nodes[j].as_mut() {
                    c.link_closed(l, &env);
                }
            }
        }
        self.queue.retain(|(j, _, _, _)| *j != i);
        self.died_at[i] = self.now;
        self.nodes[i].take().expect("alive")
    }

    fn meet(&mut self, from: usize, to: usize) {
        let env = self.env(from);
        let (port, cport) = (30000 + to as i64, 40000 + to as i64);
        assert_eq!(self.c(from).start_handshake("127.0.0.1", port, cport, &env), Ok(true));
    }

    fn add_slots(&mut self, i: usize, a: u16, b: u16) {
        let mut seen = vec![0u8; SLOTS];
        let c = self.c(i);
        c.check_slots(&mut seen, false, a, b).expect("free slots");
        c.apply_slots(&seen, false);
    }

    /// Every live node knows every other live one by its name, none in
    /// handshake.
    fn all_know_each_other(&self) -> bool {
        let names: Vec<NodeName> = self.nodes.iter().flatten().map(|c| c.myself).collect();
        self.nodes.iter().flatten().all(|c| names.iter().all(|n| c.nodes.get(n).is_some_and(|n| !n.in_handshake())))
    }

    /// Every live node sees `owner` serving `slot`.
    fn all_see_owner(&self, slot: u16, owner: NodeName) -> bool {
        self.nodes.iter().flatten().all(|c| c.slots[slot as usize] == Some(owner))
    }

    fn all_ok(&self) -> bool {
        self.nodes.iter().flatten().all(|c| c.state_ok)
    }
}

/// Three primaries meet, share the slots and agree; returns the sim.
fn three_primaries(node_timeout: u64) -> Sim {
    let mut sim = Sim::new(3, node_timeout);
    sim.meet(0, 1);
    sim.meet(0, 2);
    sim.run_until(5000, |s| s.all_know_each_other()).expect("all nodes meet");
    sim.add_slots(0, 0, 5460);
    sim.add_slots(1, 5461, 10922);
    sim.add_slots(2, 10923, 16383);
    let (a, b, c) = (sim.name(0), sim.name(1), sim.name(2));
    sim.run_until(10_000, |s| s.all_see_owner(0, a) && s.all_see_owner(6000, b) && s.all_see_owner(16383, c) && s.all_ok())
        .expect("all nodes agree on the slots and the state");
    sim
}

#[test]
fn three_nodes_meet_agree_on_slots_and_resolve_epoch_collisions() {
    let mut sim = three_primaries(2000);
    // All started at config epoch 0: collisions moved them apart.
    sim.run_until(10_000, |s| {
        let mut e: Vec<u64> = (0..3).map(|i| s.nodes[i].as_ref().unwrap().me().config_epoch).collect();
        e.sort();
        e.dedup();
        e.len() == 3
    })
    .expect("config epochs become distinct");
    // Every node has the same view of every node's epoch and the same
    // current epoch.
    sim.run(3000);
    let views: Vec<Vec<(NodeName, u64)>> = (0..3)
        .map(|i| {
            let c = sim.nodes[i].as_ref().unwrap();
            c.sorted_names().into_iter().map(|n| (n, c.nodes[&n].config_epoch)).collect()
        })
        .collect();
    assert_eq!(views[0], views[1]);
    assert_eq!(views[1], views[2]);
    let cur: Vec<u64> = (0..3).map(|i| sim.c(i).current_epoch).collect();
    assert!(cur.iter().all(|&e| e == cur[0]), "{cur:?}");
    let info = sim.c(0).info_text();
    assert!(info.starts_with("cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n"), "{info}");
    assert!(info.contains("cluster_known_nodes:3\r\ncluster_size:3\r\n"), "{info}");
    assert!(info.contains("cluster_stats_messages_ping_sent:"), "{info}");
    assert!(info.contains("cluster_stats_messages_meet_sent:2\r\n"), "{info}");
    // CLUSTER NODES shows every node connected, one line each.
    let nodes = sim.c(1).nodes_text(false);
    assert_eq!(nodes.lines().count(), 3);
    assert!(nodes.lines().all(|l| l.contains(" connected")), "{nodes}");
    assert_eq!(nodes.lines().filter(|l| l.contains("myself,master")).count(), 1);
}

#[test]
fn explicit_config_epoch_collision_is_resolved() {
    let mut sim = Sim::new(2, 2000);
    sim.c(0).set_config_epoch(7).unwrap();
    sim.c(1).set_config_epoch(7).unwrap();
    sim.meet(0, 1);
    sim.run_until(10_000, |s| {
        let a = s.nodes[0].as_ref().unwrap().me().config_epoch;
        let b = s.nodes[1].as_ref().unwrap().me().config_epoch;
        s.all_know_each_other() && a != b
    })
    .expect("the collision is resolved");
    // The node with the larger name stayed at 7 and the other moved on.
    let (a, b) = (sim.name(0), sim.name(1));
    let loser = if a < b { 0 } else { 1 };
    assert_eq!(sim.c(loser).me().config_epoch, 8);
    assert_eq!(sim.c(1 - loser).me().config_epoch, 7);
}

/// Three primaries with one replica each (replica i+3 of primary i).
fn six_nodes(node_timeout: u64) -> Sim {
    let mut sim = three_primaries(node_timeout);
    let mut more = Sim::new(6, node_timeout);
    // Move the three running nodes into a six-node sim.
    for i in 0..3 {
        more.nodes[i] = sim.nodes[i].take();
    }
    more.now = sim.now;
    more.next_link = sim.next_link;
    more.peers = sim.peers;
    let mut sim = more;
    for i in 3..6 {
        sim.meet(i, 0);
    }
    sim.run_until(10_000, |s| s.all_know_each_other()).expect("replicas join");
    for i in 3..6 {
        let p = sim.name(i - 3);
        sim.c(i).replicate(&p, true).expect("replicate");
    }
    sim.run_until(10_000, |s| {
        (3..6).all(|i| {
            let r = s.nodes[i].as_ref().unwrap().myself;
            s.nodes.iter().flatten().all(|c| c.nodes[&r].replicaof == Some(s.nodes[i - 3].as_ref().unwrap().myself))
        }) && s.all_ok()
    })
    .expect("everybody sees the replicas");
    assert_eq!(sim.roles[3], Role::ReplicaOf(30000));
    sim
}

#[test]
fn killed_primary_fails_over_to_its_replica_and_rejoins_as_replica() {
    let timeout = 2000;
    let mut sim = six_nodes(timeout);
    let old = sim.name(0);
    let replica = sim.name(3);
    let dead = sim.kill(0);
    let conf = sim.saved[0].clone().expect("node 0 saved its config");

    // PFAIL after the node timeout, FAIL once a majority agrees.
    let t_fail = sim
        .run_until(4 * timeout, |s| s.nodes.iter().flatten().all(|c| c.nodes[&old].flags & nf::FAIL != 0))
        .expect("the dead primary is flagged FAIL everywhere");
    assert!(t_fail >= timeout, "FAIL after {t_fail} ms, before the node timeout");
    // The replica wins the election and takes the slots: Redis needs
    // 500-1000 ms after FAIL (rank 0), plus the time to gather votes.
    let t_over = sim
        .run_until(4 * timeout, |s| s.all_see_owner(0, replica) && s.all_see_owner(5460, replica) && s.all_ok())
        .expect("the replica took over");
    assert!(t_over <= 2000, "took {t_over} ms after FAIL");
    assert_eq!(sim.roles[3], Role::Primary);
    assert!(sim.c(3).me().is_primary());
    assert!(sim.c(3).me().config_epoch > dead.me().config_epoch);
    assert!(sim.seen[3].contains(&Action::Promote));

    // The old primary restarts from its nodes.conf: same name, and it
    // becomes a replica of the node that took its slots.
    let back = Cluster::load(&conf, settings(0, timeout), 77).expect("its config loads");
    assert_eq!(back.myself, old);
    sim.nodes[0] = Some(back);
    sim.run_until(10 * timeout, |s| {
        let c = s.nodes[0].as_ref().unwrap();
        c.is_replica() && c.me().replicaof == Some(replica) && s.nodes.iter().flatten().all(|c| c.nodes[&old].flags & nf::FAIL == 0)
    })
    .expect("the old primary rejoins as a replica");
    assert_eq!(sim.roles[0], Role::ReplicaOf(30003));
    assert_eq!(sim.c(0).me().numslots, 0);
    // It learnt of the newer configuration through an UPDATE, and its
    // shard channels' subscribers were told the slots moved.
    assert!(sim.c(0).stats_received[clusterbus::msg_type::UPDATE as usize] > 0);
    assert!(sim.seen[0].iter().any(|a| matches!(a, Action::ShardChannelsMoved(v) if v.len() == 5461)));
    // Everybody agrees on the shard of the old primary: its new primary's.
    let shard = sim.c(3).me().shard_id;
    assert!(sim.nodes.iter().flatten().all(|c| c.nodes[&old].shard_id == shard));
}

#[test]
fn reset_forgets_the_cluster() {
    let mut sim = six_nodes(2000);
    let old = sim.name(5);
    assert_eq!(
        sim.c(0).reset(false, false),
        Err(OpError("CLUSTER RESET can't be called with master nodes containing keys".into()))
    );
    sim.c(5).reset(true, true).expect("a replica resets");
    assert!(sim.c(5).me().is_primary());
    assert_ne!(sim.name(5), old, "a hard reset takes a new name");
    assert_eq!(sim.c(5).nodes.len(), 1);
    assert_eq!((sim.c(5).current_epoch, sim.c(5).me().config_epoch), (0, 0));
    sim.drain(5);
    assert_eq!(sim.roles[5], Role::Primary);
    assert!(sim.seen[5].iter().any(|a| matches!(a, Action::DropSlots(v) if v.len() == SLOTS)));
}

#[test]
fn manual_failover_swaps_primary_and_replica() {
    let mut sim = six_nodes(2000);
    let (primary, replica) = (sim.name(1), sim.name(4));
    let env = sim.env(4);
    assert_eq!(sim.c(1).failover(FailoverMode::Default, &env), Err(OpError("You should send CLUSTER FAILOVER to a replica".into())));
    sim.c(4).failover(FailoverMode::Default, &env).expect("accepted");
    sim.drain(4);
    sim.run_until(3000, |s| {
        s.all_see_owner(6000, replica)
            && s.nodes[1].as_ref().unwrap().me().replicaof == Some(replica)
            && s.nodes.iter().flatten().all(|c| c.nodes[&primary].is_replica())
    })
    .expect("the replica took over and the old primary follows it");
    assert!(sim.seen[1].iter().any(|a| matches!(a, Action::PauseWrites { .. })));
    assert!(sim.seen[1].contains(&Action::UnpauseWrites));
    assert_eq!(sim.roles[1], Role::ReplicaOf(30004));
    assert_eq!(sim.roles[4], Role::Primary);
}

#[test]
fn takeover_needs_no_votes() {
    let mut sim = six_nodes(2000);
    let replica = sim.name(5);
    let env = sim.env(5);
    sim.c(5).failover(FailoverMode::Takeover, &env).expect("accepted");
    sim.drain(5);
    assert!(sim.c(5).me().is_primary());
    sim.run_until(3000, |s| s.all_see_owner(16383, replica)).expect("everybody sees the takeover");
}

#[test]
fn forced_failover_runs_an_election_without_the_primary() {
    let mut sim = six_nodes(2000);
    let replica = sim.name(5);
    sim.kill(2);
    let env = sim.env(5);
    sim.c(5).failover(FailoverMode::Force, &env).expect("accepted");
    sim.drain(5);
    // No need to wait for FAIL: the election runs at once with FORCEACK.
    sim.run_until(1500, |s| s.all_see_owner(16383, replica)).expect("the replica won");
    assert_eq!(sim.roles[5], Role::Primary);
}

#[test]
fn a_replica_migrates_to_an_orphaned_primary() {
    let mut sim = six_nodes(2000);
    let (p0, p2) = (sim.name(0), sim.name(2));
    // Node 4 moves from primary 1 to primary 0, which now has two.
    sim.c(4).replicate(&p0, true).expect("replicate");
    sim.run_until(5000, |s| s.nodes.iter().flatten().all(|c| c.ok_replicas(&p0) == 2)).expect("everybody sees it");
    // Primary 2 loses its only replica: one of primary 0's moves there.
    sim.kill(5);
    let t = sim
        .run_until(20_000, |s| (3..5).any(|i| s.nodes[i].as_ref().unwrap().me().replicaof == Some(p2)))
        .expect("a replica migrated");
    assert!(t > 5000, "waited the migration delay: {t} ms");
    let moved = if sim.c(3).me().replicaof == Some(p2) { 3 } else { 4 };
    let stayed = 7 - moved;
    assert_eq!(sim.c(stayed).me().replicaof, Some(p0));
    assert_eq!(sim.roles[moved], Role::ReplicaOf(30002));
    assert!(sim.name(moved) < sim.name(stayed), "the smaller name moves");
}

#[test]
fn a_replica_moved_to_another_shard_drops_the_other_slots_channels() {
    let mut sim = six_nodes(2000);
    let p0 = sim.name(0);
    sim.c(4).actions.clear();
    // Node 4 replicated primary 1 (slots 5461..=10922); it moves to primary 0.
    sim.c(4).replicate(&p0, true).expect("replicate");
    let gone: Vec<u16> = sim.c(4).actions.iter().filter_map(|a| if let Action::ShardChannelsMoved(v) = a { Some(v.clone()) } else { None }).flatten().collect();
    assert_eq!(gone.len(), 16384 - 5461);
    assert!(gone.iter().all(|&s| s > 5460));
    assert!(gone.contains(&5461) && gone.contains(&16383));
}

#[test]
fn failure_reports_are_logged_with_human_nodenames() {
    let mut sim = three_primaries(2000);
    for i in 0..3 {
        sim.c(i).settings.announce_human_nodename = format!("nodename-{i}");
    }
    sim.run(3000);
    let (a, b, c) = (sim.name(0), sim.name(1), sim.name(2));
    sim.kill(2);
    // As Redis 7.2 words it (human-announced-nodename.tcl greps for it).
    let by_b = format!("Node {} (nodename-1) reported node {} (nodename-2) as not reachable.", state::name_str(&b), state::name_str(&c));
    let by_a = format!("Node {} (nodename-0) reported node {} (nodename-2) as not reachable.", state::name_str(&a), state::name_str(&c));
    let logged = |s: &Sim, i: usize, want: &str| s.seen[i].iter().any(|x| matches!(x, Action::Log { text, .. } if text == want));
    sim.run_until(20_000, |s| logged(s, 0, &by_b) || logged(s, 1, &by_a)).expect("a failure report is logged");
}

#[test]
fn meeting_ourselves_comes_to_nothing() {
    let mut sim = Sim::new(1, 2000);
    sim.meet(0, 0);
    sim.run(5000);
    assert_eq!(sim.c(0).nodes.len(), 1);
}

#[test]
fn publish_reaches_every_node_and_shard_publish_only_the_shard() {
    let mut sim = six_nodes(2000);
    let env = sim.env(0);
    sim.c(0).publish(b"ch", b"hello", false, &env);
    sim.drain(0);
    sim.c(0).publish(b"sch", b"hi", true, &env);
    sim.drain(0);
    sim.settle();
    let got = |s: &Sim, i: usize, shard: bool| {
        s.seen[i].iter().any(|a| matches!(a, Action::Publish { shard: sh, .. } if *sh == shard))
    };
    for i in 1..6 {
        assert!(got(&sim, i, false), "node {i} got PUBLISH");
        assert_eq!(got(&sim, i, true), i == 3, "node {i} and PUBLISHSHARD");
    }
}

#[test]
fn forget_blacklists_and_spreads() {
    let mut sim = three_primaries(2000);
    let gone = sim.name(2);
    sim.kill(2);
    let env = sim.env(0);
    sim.c(0).forget(&gone, &env).unwrap();
    assert!(!sim.c(0).nodes.contains_key(&gone));
    // The forgotten node extension makes node 1 forget it too.
    sim.run_until(5000, |s| !s.nodes[1].as_ref().unwrap().nodes.contains_key(&gone)).expect("node 1 forgets it too");
    let env = sim.env(0);
    assert_eq!(sim.c(0).forget(&gone, &env), Ok(()), "a blacklisted node is forgotten already");
    let me = sim.name(0);
    assert_eq!(sim.c(0).forget(&me, &env), Err(OpError("I tried hard but I can't forget myself...".into())));
}

#[test]
fn nodes_conf_round_trip_is_identical() {
    let mut sim = six_nodes(2000);
    {
        let env = sim.env(0);
        let c = sim.c(0);
        let other = c.sorted_names().into_iter().find(|n| *n != c.myself && c.nodes[n].is_primary()).unwrap();
        c.set_slot(100, &[b"migrating", &other[..]], 0, &env).unwrap();
    }
    let env = sim.env(1);
    let zero = sim.name(0);
    sim.c(1).set_slot(200, &[b"importing", &zero[..]], 0, &env).unwrap();
    for i in 0..6 {
        let c = sim.nodes[i].as_ref().unwrap();
        let live = c.config_text();
        let back = Cluster::load(&live, c.settings.clone(), 5).expect("loads");
        // A loaded node has no link yet: only the link column differs.
        let text = back.config_text();
        let expect: String = live
            .lines()
            .map(|l| if l.contains("myself") { format!("{l}\n") } else { format!("{}\n", l.replace(" connected", " disconnected")) })
            .collect();
        assert_eq!(text, expect, "node {i}");
        let again = Cluster::load(&text, c.settings.clone(), 6).expect("loads again");
        assert_eq!(again.config_text(), text, "node {i}");
        assert_eq!(back.myself, c.myself);
        assert_eq!(back.current_epoch, c.current_epoch);
        assert_eq!(back.is_replica(), c.is_replica());
        assert_eq!(back.me().replicaof, c.me().replicaof);
        assert_eq!(back.slots, c.slots);
    }
    let text = sim.c(0).config_text();
    assert!(text.contains("[100->-"), "{text}");
    // CLUSTER NODES shows them too (redis-cli finds open slots there).
    assert!(sim.c(0).nodes_text(false).contains("[100->-"));
    assert!(sim.c(1).nodes_text(false).contains("[200-<-"));
    let (cur, vote) = (sim.c(0).current_epoch, sim.c(0).last_vote_epoch);
    assert!(text.ends_with(&format!("vars currentEpoch {cur} lastVoteEpoch {vote}\n")));
    assert!(sim.c(1).config_text().contains("[200-<-"));
}

const REDIS_72_CONF: &str = "\
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001,,tls-port=0,shard-id=a8dd1d5b8e1f2a6e1bcfb2a5ec11fd41a7e4e0cf myself,master - 0 1426238316232 1 connected 0-5460 [5461-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002,host-b,tls-port=0,nodename=bee,shard-id=0b1f1b5ad1e73d4a2b8f7f1c1e2f3a4b5c6d7e8f master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@40003,,tls-port=0,shard-id=0b1f1b5ad1e73d4a2b8f7f1c1e2f3a4b5c6d7e8f slave 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238317239 2 connected
vars currentEpoch 6 lastVoteEpoch 0
";

#[test]
fn loads_redis_7_and_8_nodes_conf() {
    let c = Cluster::load(REDIS_72_CONF, settings(1, 15000), 1).expect("loads");
    let me = c.me();
    assert_eq!(name_of(&c.myself), "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca");
    assert_eq!(me.numslots, 5461);
    assert_eq!(c.current_epoch, 6);
    let b = &c.nodes[&parse("67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1")];
    assert_eq!((b.hostname.as_str(), b.human_nodename.as_str(), b.tcp_port, b.cport), ("host-b", "bee", 30002, 40002));
    let r = &c.nodes[&parse("292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f")];
    assert_eq!(r.replicaof, Some(b.name));
    assert_eq!(r.shard_id, b.shard_id);
    assert_eq!(c.importing_from.get(&5461), Some(&b.name));
    // Redis 7.0: no aux fields, and an old line without @cport.
    let old = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 10.0.0.1:7000@17000 myself,master - 0 0 3 connected 0-100 200\n\
               67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 10.0.0.2:7001 master - 0 0 4 disconnected 101-199\n\
               vars currentEpoch 4 lastVoteEpoch 2\n";
    let c = Cluster::load(old, settings(0, 15000), 1).expect("loads");
    assert_eq!(c.me().numslots, 102);
    assert_eq!(c.nodes[&parse("67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1")].cport, 17001);
    assert_eq!(c.last_vote_epoch, 2);
    // Valkey-style unknown aux fields are skipped.
    let newer = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 10.0.0.1:7000@17000,,tls-port=0,availability-zone=z1,shard-id=a8dd1d5b8e1f2a6e1bcfb2a5ec11fd41a7e4e0cf myself,master - 0 0 3 connected\n";
    assert!(Cluster::load(newer, settings(0, 15000), 1).is_ok());
}

fn parse(s: &str) -> NodeName {
    s.as_bytes().try_into().unwrap()
}

fn name_of(n: &NodeName) -> &str {
    std::str::from_utf8(n).unwrap()
}

#[test]
fn garbage_nodes_conf_is_an_error_naming_the_line() {
    let good = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-10\n";
    let bad_lines = [
        "vars currentEpoch",
        "vars currentEpoch x lastVoteEpoch 0",
        "short line",
        "NOTAHEXNAME0000000000000000000000000000 127.0.0.1:1@2 master - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1 master - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:99999@1 master - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master,bogus - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master - x 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master - 0 0 -1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master - 0 0 1 connected 16384",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master - 0 0 1 connected 5-x",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master - 0 0 1 connected [5->-zz]",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master - 0 0 1 connected [5-?-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master - 0 0 1 connected [99999->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2,,shard-id=short master - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2,,noequals master - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2,,a=b=c master - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2,,tls-port=x master - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 master 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 0 1 connected",
        "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001 myself,master - 0 0 1 connected",
        "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:1@2 myself,master - 0 0 1 connected",
    ];
    for bad in bad_lines {
        let text = format!("{good}{bad}\n");
        match Cluster::load(&text, settings(0, 15000), 1) {
            Err(e) => assert!(e.contains("line 2") || e.contains("myself"), "{bad}: {e}"),
            Ok(_) => panic!("accepted: {bad}"),
        }
    }
    // Whole files that are wrong.
    for bad in ["", "\n\n", "vars currentEpoch 1 lastVoteEpoch 1\n", "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 1.2.3.4:1@2 noflags,myself - 0 0 0 connected\n"] {
        assert!(Cluster::load(bad, settings(0, 15000), 1).is_err(), "{bad:?}");
    }
    // Random bytes never panic.
    let mut r = 12345u64;
    for _ in 0..2000 {
        let mut line = good.as_bytes().to_vec();
        for _ in 0..4 {
            r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = (r >> 33) as usize % line.len();
            line[at] = (r >> 13) as u8 % 128;
        }
        let _ = Cluster::load(&String::from_utf8_lossy(&line), settings(0, 15000), 1);
    }
}

#[test]
fn new_node_is_a_lone_primary_that_saves_its_config() {
    let c = Cluster::new(settings(0, 15000), 9);
    assert!(valid_name(&c.myself));
    assert!(c.me().is_primary() && c.me().flags & nf::MYSELF != 0);
    assert!(c.actions.contains(&Action::SaveConfig { fsync: true }));
    assert_ne!(Cluster::new(settings(0, 15000), 10).myself, c.myself);
    let line = c.nodes_text(false);
    assert!(line.ends_with(" :30000@40000 myself,master - 0 0 0 connected\n"), "{line}");
}

/// The table's invariants: one myself, the slot table and the nodes'
/// bitmaps agree, links and replica links point at known nodes, and the
/// config written loads back.
fn check_invariants(c: &Cluster) {
    assert!(c.nodes.contains_key(&c.myself));
    assert_eq!(c.nodes.values().filter(|n| n.flags & nf::MYSELF != 0).count(), 1, "one myself");
    for (s, owner) in c.slots.iter().enumerate() {
        if let Some(o) = owner {
            assert!(c.nodes[o].slots.get(s as u16), "slot {s} in its owner's bitmap");
        }
    }
    for n in c.nodes.values() {
        assert_eq!(n.numslots, n.slots.count());
        for s in n.slots.iter() {
            assert_eq!(c.slots[s as usize], Some(n.name), "bitmap slot {s} in the table");
        }
        if let Some(p) = n.replicaof {
            assert!(c.nodes.contains_key(&p) && p != n.name, "replicaof a known other node");
        }
        if let Some(l) = n.link {
            assert!(c.links.get(&l).is_some_and(|l| l.node == Some(n.name) && !l.inbound));
        }
        if let Some(l) = n.inbound_link {
            assert!(c.links.get(&l).is_some_and(|l| l.node == Some(n.name) && l.inbound));
        }
    }
    for (id, l) in &c.links {
        if let Some(n) = l.node {
            let n = &c.nodes[&n];
            assert!(n.link == Some(*id) || n.inbound_link == Some(*id), "link {id} attached");
        }
    }
    let text = c.config_text();
    if let Err(e) = Cluster::load(&text, c.settings.clone(), 1) {
        panic!("config does not load back: {e}\n{text}");
    }
}

/// A tiny generator for the random tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 17
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A message a hostile or confused peer could send: every field random,
/// names drawn from the known nodes, fresh ones and invalid bytes.
fn random_message(r: &mut Rng, names: &[NodeName]) -> Message {
    use clusterbus::{Body, Extension, Gossip, Header, SlotBitmap};
    let pick = |r: &mut Rng| -> NodeName {
        match r.below(4) {
            0 => NULL_NAME,
            1 => {
                let mut n = *b"0000000000000000000000000000000000000000";
                for b in n.iter_mut() {
                    *b = b"0123456789abcdef"[r.below(16) as usize];
                }
                n
            }
            2 => [b'Z'; 40],
            _ => names[r.below(names.len() as u64) as usize],
        }
    };
    let mut slots = SlotBitmap::default();
    for _ in 0..r.below(4) {
        let a = r.below(16384) as u16;
        for s in a..(a + r.below(300) as u16).min(16383) {
            slots.set(s);
        }
    }
    let header = Header {
        port: r.below(65536) as u16,
        current_epoch: r.below(12),
        config_epoch: r.below(12),
        offset: r.below(200),
        sender: pick(r),
        myslots: slots.clone(),
        replicaof: pick(r),
        myip: if r.below(2) == 0 { Vec::new() } else { b"10.0.0.9".to_vec() },
        pport: 0,
        cport: r.below(65536) as u16,
        flags: r.below(2048) as u16,
        state: r.below(2) as u8,
        mflags: [r.below(8) as u8, 0, 0],
    };
    let t = r.below(12) as u16;
    let body = match t {
        0..=2 => {
            let gossip = (0..r.below(5))
                .map(|_| Gossip {
                    name: pick(r),
                    ping_sent: r.below(2) as u32,
                    pong_received: (T0 / 1000) as u32 + r.below(100) as u32,
                    ip: b"10.0.0.7".to_vec(),
                    port: r.below(65536) as u16,
                    cport: r.below(65536) as u16,
                    flags: r.below(2048) as u16,
                    pport: 0,
                })
                .collect();
            let extensions = (0..r.below(4))
                .map(|_| match r.below(5) {
                    0 => Extension::Hostname(b"h\0x".to_vec()),
                    1 => Extension::HumanNodename(vec![0xff, 0xfe]),
                    2 => Extension::ForgottenNode { name: pick(r), ttl: r.below(100) },
                    3 => Extension::ShardId(pick(r)),
                    _ => Extension::Unknown { ext_type: 99, data: vec![0; 8] },
                })
                .collect();
            Body::Ping { gossip, extensions }
        }
        3 => Body::Fail { node: pick(r) },
        4 | 10 => Body::Publish { channel: b"c".to_vec(), message: b"m".to_vec() },
        7 => Body::Update { config_epoch: r.below(14), node: pick(r), slots },
        9 => Body::Module { module_id: 1, module_type: 2, payload: Vec::new() },
        _ => Body::Empty,
    };
    Message { msg_type: t, header, body }
}

#[test]
fn random_messages_never_break_the_table() {
    for seed in [7, 8, 9] {
        random_messages(seed, 500);
    }
}

fn random_messages(seed: u64, rounds: usize) {
    let mut sim = six_nodes(2000);
    let mut r = Rng(seed);
    let addr = LinkAddr { peer_ip: "10.0.0.8".into(), local_ip: "127.0.0.1".into() };
    for round in 0..rounds {
        let i = r.below(6) as usize;
        let names: Vec<NodeName> = sim.nodes[i].as_ref().unwrap().sorted_names();
        let msg = random_message(&mut r, &names);
        let mut known: Vec<LinkId> = sim.nodes[i].as_ref().unwrap().links.keys().copied().collect();
        known.sort_unstable();
        let (link, inbound) = match r.below(3) {
            0 if !known.is_empty() => {
                let l = known[r.below(known.len() as u64) as usize];
                (l, sim.nodes[i].as_ref().unwrap().links[&l].inbound)
            }
            1 => (1_000_000 + r.below(50), true),
            _ => (2_000_000 + r.below(50), false),
        };
        let env = sim.env(i);
        sim.c(i).on_message(link, inbound, &addr, msg, &env);
        sim.drain(i);
        if round % 100 == 0 {
            sim.run(100);
            for c in sim.nodes.iter().flatten() {
                check_invariants(c);
            }
        }
    }
    sim.run(3000);
    for c in sim.nodes.iter().flatten() {
        check_invariants(c);
    }
}

#[test]
fn random_kills_restarts_and_failovers_keep_the_table_sound() {
    let mut sim = six_nodes(1000);
    let mut r = Rng(11);
    let mut dead: Vec<usize> = Vec::new();
    for _ in 0..20 {
        match r.below(5) {
            0 if dead.len() < 2 => {
                let i = r.below(6) as usize;
                if sim.nodes[i].is_some() {
                    sim.kill(i);
                    dead.push(i);
                }
            }
            1 if !dead.is_empty() => {
                let i = dead.remove(r.below(dead.len() as u64) as usize);
                let conf = sim.saved[i].clone().expect("saved");
                sim.nodes[i] = Some(Cluster::load(&conf, settings(i, 1000), r.next()).expect("loads"));
            }
            2 => {
                let i = r.below(6) as usize;
                if sim.nodes[i].is_some() {
                    let env = sim.env(i);
                    let mode = [FailoverMode::Default, FailoverMode::Force, FailoverMode::Takeover][r.below(3) as usize];
                    let _ = sim.c(i).failover(mode, &env);
                    sim.drain(i);
                }
            }
            _ => {}
        }
        sim.run(500 + r.below(3000));
        for c in sim.nodes.iter().flatten() {
            check_invariants(c);
        }
    }
    // Everybody back: the cluster converges to one view with every slot served.
    for i in dead {
        let conf = sim.saved[i].clone().expect("saved");
        sim.nodes[i] = Some(Cluster::load(&conf, settings(i, 1000), 3).expect("loads"));
    }
    sim.run_until(30_000, |s| {
        let a = s.nodes[0].as_ref().unwrap();
        s.all_ok() && s.nodes.iter().flatten().all(|c| c.slots == a.slots) && a.slots.iter().all(|o| o.is_some())
    })
    .expect("the cluster converges");
    for c in sim.nodes.iter().flatten() {
        check_invariants(c);
    }
}
