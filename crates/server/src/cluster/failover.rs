//! Failover, as Redis does it: role changes, replica elections, votes,
//! manual failover, replica migration and config epoch collisions.
//!
//! Election (replica side): once our primary is FAIL, wait 500 ms plus a
//! random 0-500 ms plus one second per replica of the same primary with a
//! fresher offset (the rank), then bump the current epoch and ask every
//! primary for a vote. A majority of the slot-serving primaries elects us:
//! we take the failover epoch as config epoch, take our primary's slots,
//! stop replicating (`Action::Promote`) and PONG everybody so the new
//! configuration spreads. An election expires after twice the node timeout
//! (at least 2 s) and is retried after twice that.
//!
//! Votes (primary side): one per epoch, only for a replica whose primary is
//! FAIL (or with FORCEACK, a manual failover), not twice for replicas of the
//! same primary within twice the node timeout, and never for slots we know
//! a newer config epoch of.
//!
//! Manual failover: the replica sends MFSTART; its primary pauses writes
//! (`Action::PauseWrites`) and pings with the PAUSED flag and its offset;
//! when the replica has processed that offset it runs the election at once
//! with FORCEACK. FORCE skips the primary; TAKEOVER skips the vote too and
//! bumps the config epoch on its own. All of it times out after 5 s.

use clusterbus::{msg_type, node_flags as nf, Header};

use super::state::{cant, consts, name_str, todo, Action, Cluster, Env, NodeName};

impl Cluster {
    /// Makes `n` a primary in our table (clusterSetNodeAsMaster).
    pub(crate) fn set_node_as_primary(&mut self, n: &NodeName) {
        let Some(node) = self.nodes.get(n) else { return };
        if node.is_primary() {
            return;
        }
        if let Some(p) = node.replicaof {
            self.unlink_replica(n, &p);
            if *n != self.myself {
                self.nodes.get_mut(n).expect("known").flags |= nf::MIGRATE_TO;
            }
        }
        let node = self.nodes.get_mut(n).expect("known");
        node.flags = (node.flags & !nf::SLAVE) | nf::MASTER;
        node.replicaof = None;
        self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE);
    }

    /// Makes this node a replica of `primary` (clusterSetMaster). We must
    /// serve no slot.
    pub(crate) fn set_my_primary(&mut self, primary: &NodeName) {
        assert!(*primary != self.myself, "a node cannot replicate itself");
        let me = self.myself;
        if self.i_am_primary() {
            let m = self.me_mut();
            m.flags = (m.flags & !(nf::MASTER | nf::MIGRATE_TO)) | nf::SLAVE;
            self.close_all_slots();
        } else if let Some(old) = self.me().replicaof {
            self.unlink_replica(&me, &old);
        }
        self.link_replica(&me, primary);
        let (shard, ip, port) = {
            let p = &self.nodes[primary];
            (p.shard_id, p.ip.clone(), p.default_port(self.settings.tls_cluster))
        };
        self.update_shard_id(&me, shard);
        if ip.is_empty() || port == 0 {
            self.replicate_pending = true;
        } else {
            self.actions.push(Action::Replicate { ip, port });
        }
        // Redis's removeAllNotOwnedShardChannelSubscriptions: subscribers of
        // shard channels our new shard does not serve are told to go.
        let gone: Vec<u16> = (0..clusterbus::SLOTS as u16).filter(|&s| self.slots[s as usize] != Some(*primary)).collect();
        if !gone.is_empty() {
            self.actions.push(Action::ShardChannelsMoved(gone));
        }
        self.reset_manual_failover();
    }

    /// Takes over our primary: its slots become ours and we stop
    /// replicating (clusterFailoverReplaceYourMaster).
    pub(crate) fn replace_my_primary(&mut self, env: &Env) {
        let Some(old) = self.me().replicaof else { return };
        if self.i_am_primary() {
            return;
        }
        let me = self.myself;
        self.set_node_as_primary(&me);
        self.actions.push(Action::Promote);
        let slots: Vec<u16> = self.nodes.get(&old).map(|n| n.slots.iter().collect()).unwrap_or_default();
        for s in slots {
            self.del_slot(s);
            self.add_slot(&me, s);
        }
        self.update_state(env.now_ms);
        self.save_now();
        self.broadcast_pong(false, env);
        self.reset_manual_failover();
    }

    /// Writes nodes.conf now, fsynced (clusterSaveConfigOrDie).
    pub(crate) fn save_now(&mut self) {
        self.todo &= !(todo::SAVE_CONFIG | todo::FSYNC_CONFIG);
        self.actions.push(Action::SaveConfig { fsync: true });
    }

    /// Takes a new config epoch without asking anyone, when ours is zero
    /// or not the largest known. Returns whether it did.
    pub fn bump_epoch_without_consensus(&mut self) -> bool {
        let max = self.max_epoch();
        let mine = self.me().config_epoch;
        if mine != 0 && mine == max {
            return false;
        }
        self.current_epoch += 1;
        let e = self.current_epoch;
        self.me_mut().config_epoch = e;
        self.later(todo::SAVE_CONFIG | todo::FSYNC_CONFIG);
        self.log(2, format!("New configEpoch set to {e}"));
        true
    }

    /// Two primaries with one config epoch: the one with the smaller name
    /// moves on to a new epoch.
    pub(crate) fn handle_config_epoch_collision(&mut self, sender: &NodeName) {
        let Some(s) = self.nodes.get(sender) else { return };
        if s.config_epoch != self.me().config_epoch || !s.is_primary() || !self.i_am_primary() {
            return;
        }
        if *sender <= self.myself {
            return;
        }
        self.current_epoch += 1;
        let e = self.current_epoch;
        self.me_mut().config_epoch = e;
        self.save_now();
        let human = self.nodes[sender].human_nodename.clone();
        self.log(1, format!("WARNING: configEpoch collision with node {} ({human}). configEpoch set to {e}", name_str(sender)));
    }

    /// Our rank among the replicas of our primary: how many that may fail
    /// over have a larger offset.
    fn replica_rank(&self, env: &Env) -> u64 {
        let Some(p) = self.me().replicaof else { return 0 };
        self.replicas_of(&p)
            .iter()
            .filter(|r| **r != self.myself)
            .filter_map(|r| self.nodes.get(r))
            .filter(|r| r.flags & nf::NOFAILOVER == 0 && r.repl_offset > env.repl_offset)
            .count() as u64
    }

    /// Logs why we cannot fail over, not too often.
    fn log_cant_failover(&mut self, reason: u8, env: &Env) {
        let now_s = env.now_ms / 1000;
        if reason == self.election.cant_reason && now_s.saturating_sub(self.election.cant_logged_s) < consts::CANT_FAILOVER_RELOG_PERIOD {
            return;
        }
        self.election.cant_reason = reason;
        let quiet = self.settings.node_timeout + 5000;
        if let Some(p) = self.me().replicaof.and_then(|p| self.nodes.get(&p)) {
            if p.failed() && env.now_ms.saturating_sub(p.fail_time) < quiet {
                return;
            }
        }
        let msg = match reason {
            cant::DATA_AGE => "Disconnected from master for longer than allowed. Please check the 'cluster-replica-validity-factor' configuration option.",
            cant::WAITING_DELAY => "Waiting the delay before I can start a new failover.",
            cant::EXPIRED => "Failover attempt expired.",
            cant::WAITING_VOTES => "Waiting for votes, but majority still not reached.",
            _ => "Unknown reason code.",
        };
        self.election.cant_logged_s = now_s;
        self.log(2, format!("Currently unable to failover: {msg}"));
        if reason == cant::WAITING_VOTES || reason == cant::EXPIRED {
            let text = format!("Needed quorum: {}. Number of votes received so far: {}", self.size / 2 + 1, self.election.auth_count);
            self.log(2, text);
        }
    }

    /// One step of a replica's election (clusterHandleSlaveFailover).
    pub(crate) fn handle_replica_failover(&mut self, env: &Env) {
        let now = env.now_ms as i64;
        let auth_age = now - self.election.auth_time as i64;
        let needed = self.size / 2 + 1;
        let manual = self.mf.end != 0 && self.mf.can_start;
        self.todo &= !todo::HANDLE_FAILOVER;
        let auth_timeout = (self.settings.node_timeout * 2).max(2000) as i64;
        let auth_retry = auth_timeout * 2;

        let primary = self.me().replicaof.and_then(|p| self.nodes.get(&p));
        let can_try = match primary {
            Some(p) => {
                !self.i_am_primary()
                    && (p.failed() || manual)
                    && (!self.settings.replica_no_failover || manual)
                    && p.numslots > 0
            }
            None => false,
        };
        if !can_try {
            self.election.cant_reason = cant::NONE;
            return;
        }

        let mut data_age = env.primary_link_down_ms;
        if data_age > self.settings.node_timeout {
            data_age -= self.settings.node_timeout;
        }
        let factor = self.settings.replica_validity_factor;
        if factor != 0 && data_age > self.settings.repl_ping_period_ms + self.settings.node_timeout * factor && !manual {
            self.log_cant_failover(cant::DATA_AGE, env);
            return;
        }

        if auth_age > auth_retry {
            let jitter = self.random() % 500;
            self.election.auth_time = env.now_ms + 500 + jitter;
            self.election.auth_count = 0;
            self.election.auth_sent = false;
            self.election.auth_rank = self.replica_rank(env);
            self.election.auth_time += self.election.auth_rank * 1000;
            if self.mf.end != 0 {
                self.election.auth_time = env.now_ms;
                self.election.auth_rank = 0;
                self.later(todo::HANDLE_FAILOVER);
            }
            let text = format!(
                "Start of election delayed for {} milliseconds (rank #{}, offset {}).",
                self.election.auth_time as i64 - now,
                self.election.auth_rank,
                env.repl_offset
            );
            self.log(2, text);
            self.broadcast_pong(true, env);
            return;
        }

        if !self.election.auth_sent && self.mf.end == 0 {
            let rank = self.replica_rank(env);
            if rank > self.election.auth_rank {
                let added = (rank - self.election.auth_rank) * 1000;
                self.election.auth_time += added;
                self.election.auth_rank = rank;
                self.log(2, format!("Replica rank updated to #{rank}, added {added} milliseconds of delay."));
            }
        }

        if env.now_ms < self.election.auth_time {
            self.log_cant_failover(cant::WAITING_DELAY, env);
            return;
        }
        if auth_age > auth_timeout {
            self.log_cant_failover(cant::EXPIRED, env);
            return;
        }

        if !self.election.auth_sent {
            self.current_epoch += 1;
            self.election.auth_epoch = self.current_epoch;
            self.log(2, format!("Starting a failover election for epoch {}.", self.current_epoch));
            self.request_failover_auth(env);
            self.election.auth_sent = true;
            self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
            return;
        }

        if self.election.auth_count >= needed {
            self.log(2, "Failover election won: I'm the new master.".into());
            if self.me().config_epoch < self.election.auth_epoch {
                let e = self.election.auth_epoch;
                self.me_mut().config_epoch = e;
                self.log(2, format!("configEpoch set to {e} after successful failover"));
            }
            self.replace_my_primary(env);
        } else {
            self.log_cant_failover(cant::WAITING_VOTES, env);
        }
    }

    /// A vote was received from `sender` for the epoch `sender_epoch`.
    pub(crate) fn count_vote(&mut self, sender: &NodeName, sender_current_epoch: u64) {
        let Some(s) = self.nodes.get(sender) else { return };
        if s.is_primary() && s.numslots > 0 && sender_current_epoch >= self.election.auth_epoch {
            self.election.auth_count += 1;
            self.later(todo::HANDLE_FAILOVER);
        }
    }

    /// Votes for replica `node`, whose request carried `req`, if Redis's
    /// rules allow it (clusterSendFailoverAuthIfNeeded).
    pub(crate) fn vote_if_needed(&mut self, node: &NodeName, req: &Header, env: &Env) {
        if self.is_replica() || self.me().numslots == 0 {
            return;
        }
        let Some(n) = self.nodes.get(node) else { return };
        let who = format!("{} ({})", name_str(node), n.human_nodename);
        let primary = n.replicaof;
        let force_ack = req.mflags[0] & clusterbus::mflags0::FORCEACK != 0;
        if req.current_epoch < self.current_epoch {
            let text = format!("Failover auth denied to {who}: reqEpoch ({}) < curEpoch({})", req.current_epoch, self.current_epoch);
            self.log(3, text);
            return;
        }
        if self.last_vote_epoch == self.current_epoch {
            self.log(3, format!("Failover auth denied to {who}: already voted for epoch {}", self.current_epoch));
            return;
        }
        let p = primary.and_then(|p| self.nodes.get(&p));
        if n.is_primary() {
            self.log(3, format!("Failover auth denied to {who}: it is a master node"));
            return;
        }
        let Some(p) = p else {
            self.log(3, format!("Failover auth denied to {who}: I don't know its master"));
            return;
        };
        if !p.failed() && !force_ack {
            self.log(3, format!("Failover auth denied to {who}: its master is up"));
            return;
        }
        let wait = self.settings.node_timeout * 2;
        let since = env.now_ms.saturating_sub(p.voted_time);
        if since < wait {
            let text = format!("Failover auth denied to {} {}: can't vote about this master before {} milliseconds", name_str(node), n.human_nodename, wait - since);
            self.log(3, text);
            return;
        }
        let pname = p.name;
        for s in req.myslots.iter() {
            if self.slot_unclaimed(s) {
                continue;
            }
            let Some(owner) = self.slots[s as usize].and_then(|o| self.nodes.get(&o)) else { continue };
            if owner.config_epoch <= req.config_epoch {
                continue;
            }
            let text = format!("Failover auth denied to {who}: slot {s} epoch ({}) > reqEpoch ({})", owner.config_epoch, req.config_epoch);
            self.log(3, text);
            return;
        }
        self.last_vote_epoch = self.current_epoch;
        self.nodes.get_mut(&pname).expect("known").voted_time = env.now_ms;
        self.later(todo::SAVE_CONFIG | todo::FSYNC_CONFIG);
        self.send_empty(node, msg_type::FAILOVER_AUTH_ACK, env);
        self.log(2, format!("Failover auth granted to {who} for epoch {}", self.current_epoch));
    }

    /// Moves this replica to an orphaned primary when ours has more than
    /// cluster-migration-barrier working replicas and we are the one
    /// picked (the smallest name among the replicas of the best-served
    /// primaries).
    pub(crate) fn handle_replica_migration(&mut self, max_replicas: usize, env: &Env) {
        if !self.state_ok {
            return;
        }
        let Some(mine) = self.me().replicaof else { return };
        if self.ok_replicas(&mine) as u64 <= self.settings.migration_barrier {
            return;
        }
        let mut candidate = self.myself;
        let mut target = None;
        for name in self.sorted_names() {
            let n = &self.nodes[&name];
            let mut orphaned = !(n.is_replica() || n.failed()) && n.flags & nf::MIGRATE_TO != 0;
            let ok = if n.is_primary() { self.ok_replicas(&name) } else { 0 };
            if ok > 0 {
                orphaned = false;
            }
            if orphaned {
                if target.is_none() && n.numslots > 0 {
                    target = Some(name);
                }
                let n = self.nodes.get_mut(&name).expect("listed");
                if n.orphaned_time == 0 {
                    n.orphaned_time = env.now_ms;
                }
            } else {
                self.nodes.get_mut(&name).expect("listed").orphaned_time = 0;
            }
            if ok == max_replicas {
                for r in self.replicas_of(&name) {
                    if r < candidate {
                        candidate = r;
                    }
                }
            }
        }
        if let Some(t) = target {
            let since = env.now_ms.saturating_sub(self.nodes[&t].orphaned_time);
            if candidate == self.myself && since > consts::REPLICA_MIGRATION_DELAY {
                self.log(2, format!("Migrating to orphaned master {}", name_str(&t)));
                self.set_my_primary(&t);
            }
        }
    }

    /// Ends any manual failover (and a primary's write pause).
    pub(crate) fn reset_manual_failover(&mut self) {
        if self.mf.replica.is_some() {
            self.actions.push(Action::UnpauseWrites);
        }
        self.mf = Default::default();
    }

    /// Gives up a manual failover past its time.
    pub(crate) fn manual_failover_check_timeout(&mut self, now: u64) {
        if self.mf.end != 0 && self.mf.end < now {
            self.log(3, "Manual failover timed out.".into());
            self.reset_manual_failover();
        }
    }

    /// Replica side: once our offset reaches the paused primary's, the
    /// election may start.
    pub(crate) fn handle_manual_failover(&mut self, env: &Env) {
        if self.mf.end == 0 || self.mf.can_start {
            return;
        }
        let Some(off) = self.mf.primary_offset else { return };
        if off == env.repl_offset {
            self.mf.can_start = true;
            self.log(2, "All master replication stream processed, manual failover can start.".into());
            self.later(todo::HANDLE_FAILOVER);
            return;
        }
        self.later(todo::HANDLE_MANUALFAILOVER);
    }

    /// Primary side: replica `sender` asked for a manual failover.
    pub(crate) fn on_mfstart(&mut self, sender: &NodeName, link: u64, env: &Env) {
        self.reset_manual_failover();
        self.mf.end = env.now_ms + consts::MF_TIMEOUT;
        self.mf.replica = Some(*sender);
        self.actions.push(Action::PauseWrites { until_ms: env.now_ms + consts::MF_TIMEOUT * consts::MF_PAUSE_MULT });
        let human = self.nodes.get(sender).map(|n| n.human_nodename.clone()).unwrap_or_default();
        self.log(2, format!("Manual failover requested by replica {} ({human}).", name_str(sender)));
        self.send_ping(link, msg_type::PING, env);
    }
}
