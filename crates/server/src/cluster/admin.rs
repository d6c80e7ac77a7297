//! What the CLUSTER subcommands change, with Redis's checks and error
//! texts: slot assignment (ADDSLOTS, DELSLOTS, their RANGE forms,
//! FLUSHSLOTS, SETSLOT), membership (FORGET, RESET), roles (REPLICATE,
//! FAILOVER) and epochs (BUMPEPOCH, SET-CONFIG-EPOCH).
//!
//! The command family (commands/cluster.rs) parses arguments and writes
//! replies; it calls these with what only it can know (whether the
//! keyspace holds keys, how many keys a slot holds). An error is the text
//! Redis replies after "-ERR ".

use clusterbus::msg_type;

use super::state::{consts, name_str, parse_name, todo, Action, Cluster, Env, NodeName, SLOTS};

/// A CLUSTER subcommand refused: Redis's message, without the "ERR ".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError(pub String);

fn err<T>(s: impl Into<String>) -> Result<T, OpError> {
    Err(OpError(s.into()))
}

/// CLUSTER FAILOVER's option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailoverMode {
    /// With the primary's agreement (it pauses writes first).
    Default,
    /// Without the primary (it may be down), with the votes.
    Force,
    /// Without the primary nor votes.
    Takeover,
}

impl Cluster {
    /// The node `name` names, if it is a valid name of a known node.
    pub fn lookup(&self, name: &[u8]) -> Option<NodeName> {
        parse_name(name).filter(|n| self.nodes.contains_key(n))
    }

    /// ADDSLOTS/DELSLOTS checks for `a..=b`, in argument order; `seen`
    /// (one entry a slot) gathers the slots to change and catches repeats.
    pub fn check_slots(&self, seen: &mut [u8], del: bool, a: u16, b: u16) -> Result<(), OpError> {
        for s in a..=b {
            let owned = self.slots[s as usize].is_some();
            if del && !owned {
                return err(format!("Slot {s} is already unassigned"));
            }
            if !del && owned {
                return err(format!("Slot {s} is already busy"));
            }
            seen[s as usize] += 1;
            if seen[s as usize] == 2 {
                return err(format!("Slot {s} specified multiple times"));
            }
        }
        Ok(())
    }

    /// Adds to this node (or deletes from their owners) the slots `seen`
    /// marks, after `check_slots`.
    pub fn apply_slots(&mut self, seen: &[u8], del: bool) {
        let me = self.myself;
        for s in 0..SLOTS as u16 {
            if seen[s as usize] == 0 {
                continue;
            }
            self.importing_from.remove(&s);
            if del {
                self.del_slot(s);
            } else {
                self.add_slot(&me, s);
            }
        }
        self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
    }

    /// CLUSTER FLUSHSLOTS (`db_empty`: db 0 holds no key).
    pub fn flush_slots(&mut self, db_empty: bool) -> Result<(), OpError> {
        if !db_empty {
            return err("DB must be empty to perform CLUSTER FLUSHSLOTS.");
        }
        let me = self.myself;
        self.del_node_slots(&me);
        self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
        Ok(())
    }

    /// CLUSTER SETSLOT slot MIGRATING|IMPORTING|STABLE|NODE [node]: `args`
    /// are the words after the slot; `keys_in_slot` the keys we hold in it.
    pub fn set_slot(&mut self, slot: u16, args: &[&[u8]], keys_in_slot: u64, env: &Env) -> Result<(), OpError> {
        let me = self.myself;
        let action = args.first().map(|a| a.to_ascii_lowercase()).unwrap_or_default();
        let node_arg = args.get(1).map(|a| String::from_utf8_lossy(a).into_owned()).unwrap_or_default();
        let owner = self.slots[slot as usize];
        match (action.as_slice(), args.len()) {
            (b"migrating", 2) => {
                if owner != Some(me) {
                    return err(format!("I'm not the owner of hash slot {slot}"));
                }
                let Some(n) = self.lookup(args[1]) else { return err(format!("I don't know about node {node_arg}")) };
                if self.nodes[&n].is_replica() {
                    return err("Target node is not a master");
                }
                self.migrating_to.insert(slot, n);
            }
            (b"importing", 2) => {
                if owner == Some(me) {
                    return err(format!("I'm already the owner of hash slot {slot}"));
                }
                let Some(n) = self.lookup(args[1]) else { return err(format!("I don't know about node {node_arg}")) };
                if self.nodes[&n].is_replica() {
                    return err("Target node is not a master");
                }
                self.importing_from.insert(slot, n);
            }
            (b"stable", 1) => {
                self.importing_from.remove(&slot);
                self.migrating_to.remove(&slot);
            }
            (b"node", 2) => {
                let Some(n) = self.lookup(args[1]) else { return err(format!("Unknown node {node_arg}")) };
                if self.nodes[&n].is_replica() {
                    return err("Target node is not a master");
                }
                if owner == Some(me) && n != me && keys_in_slot != 0 {
                    return err(format!("Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."));
                }
                if keys_in_slot == 0 {
                    self.migrating_to.remove(&slot);
                }
                let was_mine = owner == Some(me);
                self.del_slot(slot);
                self.add_slot(&n, slot);
                if was_mine && n != me && self.me().numslots == 0 && self.settings.allow_replica_migration {
                    let text = format!(
                        "Configuration change detected. Reconfiguring myself as a replica of {} ({})",
                        name_str(&n),
                        self.nodes[&n].human_nodename
                    );
                    self.log(2, text);
                    self.set_my_primary(&n);
                    self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
                }
                if n == me && self.importing_from.contains_key(&slot) {
                    if self.bump_epoch_without_consensus() {
                        self.log(2, format!("configEpoch updated after importing slot {slot}"));
                    }
                    self.importing_from.remove(&slot);
                    self.broadcast_pong(false, env);
                }
            }
            _ => return err("Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"),
        }
        self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE);
        Ok(())
    }

    /// CLUSTER FORGET node.
    pub fn forget(&mut self, name: &[u8], env: &Env) -> Result<(), OpError> {
        let now_s = env.now_ms / 1000;
        let Some(n) = self.lookup(name) else {
            if let Some(n) = parse_name(name) {
                if self.blacklisted(&n, now_s) {
                    return Ok(());
                }
            }
            return err(format!("Unknown node {}", String::from_utf8_lossy(name)));
        };
        if n == self.myself {
            return err("I tried hard but I can't forget myself...");
        }
        if self.is_replica() && self.me().replicaof == Some(n) {
            return err("Can't forget my master!");
        }
        self.blacklist_add(&n, now_s);
        self.del_node(&n);
        self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
        Ok(())
    }

    /// CLUSTER REPLICATE node (`db_empty`: db 0 holds no key).
    pub fn replicate(&mut self, name: &[u8], db_empty: bool) -> Result<(), OpError> {
        let Some(n) = self.lookup(name) else { return err(format!("Unknown node {}", String::from_utf8_lossy(name))) };
        if n == self.myself {
            return err("Can't replicate myself");
        }
        if self.nodes[&n].is_replica() {
            return err("I can only replicate a master, not a replica.");
        }
        if self.i_am_primary() && (self.me().numslots != 0 || !db_empty) {
            return err("To set a master the node must be empty and without assigned slots.");
        }
        self.set_my_primary(&n);
        self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
        Ok(())
    }

    /// CLUSTER REPLICAS/SLAVES node: the replicas' names.
    pub fn replicas(&self, name: &[u8]) -> Result<Vec<NodeName>, OpError> {
        let Some(n) = self.lookup(name) else { return err(format!("Unknown node {}", String::from_utf8_lossy(name))) };
        if self.nodes[&n].is_replica() {
            return err("The specified node is not a master");
        }
        Ok(self.replicas_of(&n))
    }

    /// CLUSTER COUNT-FAILURE-REPORTS node.
    pub fn count_failure_reports(&mut self, name: &[u8], env: &Env) -> Result<usize, OpError> {
        let Some(n) = self.lookup(name) else { return err(format!("Unknown node {}", String::from_utf8_lossy(name))) };
        Ok(self.failure_reports_count(&n, env.now_ms))
    }

    /// CLUSTER FAILOVER [FORCE|TAKEOVER].
    pub fn failover(&mut self, mode: FailoverMode, env: &Env) -> Result<(), OpError> {
        if self.i_am_primary() {
            return err("You should send CLUSTER FAILOVER to a replica");
        }
        let Some(p) = self.me().replicaof.filter(|p| self.nodes.contains_key(p)) else {
            return err("I'm a replica but my master is unknown to me");
        };
        let pn = &self.nodes[&p];
        if mode == FailoverMode::Default && (pn.failed() || pn.link.is_none()) {
            return err("Master is down or failed, please use CLUSTER FAILOVER FORCE");
        }
        self.reset_manual_failover();
        self.mf.end = env.now_ms + consts::MF_TIMEOUT;
        match mode {
            FailoverMode::Takeover => {
                self.log(2, "Taking over the master (user request).".into());
                self.bump_epoch_without_consensus();
                self.replace_my_primary(env);
            }
            FailoverMode::Force => {
                self.log(2, "Forced failover user request accepted.".into());
                self.mf.can_start = true;
            }
            FailoverMode::Default => {
                self.log(2, "Manual failover user request accepted.".into());
                self.send_empty(&p, msg_type::MFSTART, env);
            }
        }
        Ok(())
    }

    /// CLUSTER SET-CONFIG-EPOCH epoch.
    pub fn set_config_epoch(&mut self, epoch: i64) -> Result<(), OpError> {
        if epoch < 0 {
            return err(format!("Invalid config epoch specified: {epoch}"));
        }
        if self.nodes.len() > 1 {
            return err("The user can assign a config epoch only when the node does not know any other node.");
        }
        if self.me().config_epoch != 0 {
            return err("Node config epoch is already non-zero");
        }
        let e = epoch as u64;
        self.me_mut().config_epoch = e;
        self.log(2, format!("configEpoch set to {e} via CLUSTER SET-CONFIG-EPOCH"));
        if self.current_epoch < e {
            self.current_epoch = e;
        }
        self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
        Ok(())
    }

    /// CLUSTER BUMPEPOCH: whether the epoch was bumped, and our config
    /// epoch now.
    pub fn bump_epoch(&mut self) -> (bool, u64) {
        let bumped = self.bump_epoch_without_consensus();
        (bumped, self.me().config_epoch)
    }

    /// CLUSTER RESET [HARD|SOFT] (`db_empty`: db 0 holds no key).
    pub fn reset(&mut self, hard: bool, db_empty: bool) -> Result<(), OpError> {
        if self.i_am_primary() && !db_empty {
            return err("CLUSTER RESET can't be called with master nodes containing keys");
        }
        let me = self.myself;
        if self.is_replica() {
            self.set_node_as_primary(&me);
            self.actions.push(Action::Promote);
            self.actions.push(Action::DropSlots((0..SLOTS as u16).collect()));
        }
        self.close_all_slots();
        self.reset_manual_failover();
        for s in 0..SLOTS as u16 {
            self.del_slot(s);
        }
        for n in self.sorted_names() {
            if n != me {
                self.del_node(&n);
            }
        }
        self.blacklist.clear();
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            self.me_mut().config_epoch = 0;
            self.log(2, "configEpoch set to 0 via CLUSTER RESET HARD".into());
            let name = self.random_name();
            let shard = self.random_name();
            self.rename_node(&me, name);
            self.myself = name;
            self.me_mut().shard_id = shard;
            self.log(2, format!("Node hard reset, now I'm {}", name_str(&name)));
        }
        self.later(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
        Ok(())
    }

    /// After loading the data at start (Redis's verifyClusterConfigWithData):
    /// a primary holding keys in `slots_with_keys` takes the slots nobody
    /// owns and marks as importing those another node owns, so the keys are
    /// neither served wrongly nor lost. Returns false when the check does
    /// not apply (a replica).
    pub fn verify_config_with_data(&mut self, slots_with_keys: impl IntoIterator<Item = u16>) -> bool {
        if self.is_replica() {
            return false;
        }
        let me = self.myself;
        let mut changed = false;
        for s in slots_with_keys {
            if s as usize >= SLOTS || self.slots[s as usize] == Some(me) || self.importing_from.contains_key(&s) {
                continue;
            }
            changed = true;
            match self.slots[s as usize] {
                None => {
                    self.log(2, format!("I have keys for unassigned slot {s}. Taking responsibility for it."));
                    self.add_slot(&me, s);
                }
                Some(owner) => {
                    self.log(2, format!("I have keys for slot {s}, but the slot is assigned to another node. Setting it to importing state."));
                    self.importing_from.insert(s, owner);
                }
            }
        }
        if changed {
            self.save_now();
        }
        true
    }
}
