//! Failure detection and the cluster state, as Redis does them.
//!
//! A node that has not answered a PING within node_timeout is PFAIL in our
//! eyes alone (the tick decides that, in gossip.rs). Primaries gossip what
//! they see; each PFAIL/FAIL a primary reports about a node is a failure
//! report, valid for twice the node timeout. When the reports plus our own
//! view reach a majority of the primaries that serve slots, the node is
//! FAIL and we tell everybody (a FAIL message), which makes a replica of
//! it start an election. A FAIL replica, or primary without slots, is
//! cleared as soon as it answers; a primary with slots only after twice
//! the node timeout (its replicas had their chance to take over).
//!
//! The cluster state (cluster_state:ok/fail) needs every slot served by a
//! non-failing node (unless cluster-require-full-coverage is no) and a
//! majority of the slot-serving primaries reachable; a primary that was in
//! the minority waits a rejoin delay before it takes writes again.

use super::state::{consts, todo, Cluster, Env, NodeName, SLOTS};

impl Cluster {
    /// Records that primary `sender` sees `failing` as failing. Returns
    /// whether the report is new.
    pub(crate) fn add_failure_report(&mut self, failing: &NodeName, sender: &NodeName, now: u64) -> bool {
        let Some(n) = self.nodes.get_mut(failing) else { return false };
        if let Some(r) = n.fail_reports.iter_mut().find(|(s, _)| s == sender) {
            r.1 = now;
            return false;
        }
        n.fail_reports.push((*sender, now));
        true
    }

    /// Drops expired failure reports about `node`.
    fn cleanup_failure_reports(&mut self, node: &NodeName, now: u64) {
        let max = self.settings.node_timeout * consts::FAIL_REPORT_VALIDITY_MULT;
        if let Some(n) = self.nodes.get_mut(node) {
            n.fail_reports.retain(|&(_, t)| now.saturating_sub(t) <= max);
        }
    }

    /// Removes `sender`'s report about `node`. Returns whether there was one.
    pub(crate) fn del_failure_report(&mut self, node: &NodeName, sender: &NodeName, now: u64) -> bool {
        let Some(n) = self.nodes.get_mut(node) else { return false };
        let before = n.fail_reports.len();
        n.fail_reports.retain(|(s, _)| s != sender);
        let removed = n.fail_reports.len() != before;
        if removed {
            self.cleanup_failure_reports(node, now);
        }
        removed
    }

    /// The valid failure reports about `node` (CLUSTER
    /// COUNT-FAILURE-REPORTS).
    pub fn failure_reports_count(&mut self, node: &NodeName, now: u64) -> usize {
        self.cleanup_failure_reports(node, now);
        self.nodes.get(node).map_or(0, |n| n.fail_reports.len())
    }

    /// Flags `node` FAIL if it is PFAIL to us and a majority of primaries
    /// agree, and tells every node.
    pub(crate) fn mark_failing_if_needed(&mut self, node: &NodeName, env: &Env) {
        let needed = self.size / 2 + 1;
        let Some(n) = self.nodes.get(node) else { return };
        if !n.timed_out() || n.failed() {
            return;
        }
        let mut failures = self.failure_reports_count(node, env.now_ms);
        if self.i_am_primary() {
            failures += 1;
        }
        if failures < needed {
            return;
        }
        let n = self.nodes.get_mut(node).expect("checked");
        n.flags = (n.flags & !clusterbus::node_flags::PFAIL) | clusterbus::node_flags::FAIL;
        n.fail_time = env.now_ms;
        let text = format!("Marking node {} ({}) as failing (quorum reached).", super::state::name_str(node), n.human_nodename);
        self.log(2, text);
        self.send_fail(node, env);
        self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
    }

    /// Clears FAIL from `node`, which answers again, when Redis would.
    pub(crate) fn clear_failure_if_needed(&mut self, node: &NodeName, now: u64) {
        let timeout = self.settings.node_timeout;
        let Some(n) = self.nodes.get_mut(node) else { return };
        if !n.failed() {
            return;
        }
        let name = super::state::name_str(node).to_string();
        if n.is_replica() || n.numslots == 0 {
            n.flags &= !clusterbus::node_flags::FAIL;
            let what = if n.is_replica() { "replica" } else { "master without slots" };
            let text = format!("Clear FAIL state for node {name} ({}):{what} is reachable again.", n.human_nodename);
            self.log(2, text);
            self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
            return;
        }
        if n.is_primary() && now.saturating_sub(n.fail_time) > timeout * consts::FAIL_UNDO_TIME_MULT {
            n.flags &= !clusterbus::node_flags::FAIL;
            let text = format!(
                "Clear FAIL state for node {name} ({}): is reachable again and nobody is serving its slots after some time.",
                n.human_nodename
            );
            self.log(2, text);
            self.later(todo::UPDATE_STATE | todo::SAVE_CONFIG);
        }
    }

    /// Recomputes cluster_state and cluster_size (clusterUpdateState).
    pub(crate) fn update_state(&mut self, now: u64) {
        self.todo &= !todo::UPDATE_STATE;
        if self.first_state_time == 0 {
            self.first_state_time = now;
        }
        if self.i_am_primary() && !self.state_ok && now.saturating_sub(self.first_state_time) < consts::WRITABLE_DELAY {
            return;
        }
        let mut ok = true;
        if self.settings.require_full_coverage {
            // Every slot has an owner that has not failed: a node's
            // numslots counts exactly the slots `slots` gives it, so the
            // slots of the nodes not failed must add up to all of them.
            let served: usize = self.nodes.values().filter(|n| !n.failed()).map(|n| n.numslots).sum();
            ok = served == SLOTS;
        }
        let mut size = 0;
        let mut reachable = 0;
        for n in self.nodes.values() {
            if n.is_primary() && n.numslots > 0 {
                size += 1;
                if !n.failed() && !n.timed_out() {
                    reachable += 1;
                }
            }
        }
        self.size = size;
        if reachable < size / 2 + 1 {
            ok = false;
            self.among_minority_time = now;
        }
        if ok != self.state_ok {
            let rejoin = self.settings.node_timeout.clamp(consts::MIN_REJOIN_DELAY, consts::MAX_REJOIN_DELAY);
            if ok && self.i_am_primary() && now.saturating_sub(self.among_minority_time) < rejoin {
                return;
            }
            self.log(if ok { 2 } else { 3 }, format!("Cluster state changed: {}", if ok { "ok" } else { "fail" }));
            self.state_ok = ok;
        }
    }
}
