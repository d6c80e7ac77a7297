//! Atomic slot migration's bookkeeping (Redis 8.4's CLUSTER MIGRATION,
//! Valkey 9's MIGRATESLOTS): the tasks this node runs as destination
//! (import) or source (migrate), their slots, states and times, and the
//! one change of ownership each side makes at the end. No socket, no
//! clock, no keyspace here: `migration.rs` carries the data and calls in
//! (docs/design/cluster.md, "Atomic slot migration").

use std::cell::RefCell;
use std::rc::Rc;

use super::state::{name_str, todo, Cluster, Env, NodeName, SLOTS};

/// Which side of a migration this node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The destination: it asked for the slots (CLUSTER MIGRATION IMPORT).
    Import,
    /// The source: it sends them (asked by a destination's SYNCSLOTS).
    Migrate,
}

/// Where a task is. Completed, Canceled and Failed are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// The destination is to connect (again) to the source.
    Connecting,
    /// Keys are sent, and the writes to the slots follow them.
    Syncing,
    /// Every key and write was sent; the source holds the slots' commands
    /// while the destination takes them.
    Handoff,
    Completed,
    Canceled,
    Failed,
}

impl TaskState {
    /// A short word for logs.
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Connecting => "connecting",
            TaskState::Syncing => "syncing",
            TaskState::Handoff => "handoff",
            TaskState::Completed => "completed",
            TaskState::Canceled => "canceled",
            TaskState::Failed => "failed",
        }
    }

    /// True once the task ended, one way or another.
    pub fn is_final(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Canceled | TaskState::Failed)
    }
}

/// The type of a big key sent in pieces, which decides the pieces'
/// commands and which writes compose with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BigKind {
    Hash,
    Set,
    ZSet,
    List,
}

/// A big key the source sends in pieces across turns.
#[derive(Debug, Clone)]
pub struct BigKey {
    pub key: Vec<u8>,
    pub kind: BigKind,
    /// Hash and set: the scan cursor. List: how many elements at the head
    /// are not sent yet (the pieces go from the tail towards the head).
    pub cursor: u64,
    /// Sorted set: the last (score, member) sent; pieces go in order.
    pub after: Option<(f64, Vec<u8>)>,
    /// Pieces sent so far.
    pub pieces: u64,
}

/// One migration of a set of slot ranges between two primaries.
#[derive(Debug, Clone)]
pub struct Task {
    /// 40 hex characters, the same on both sides.
    pub id: String,
    pub op: Op,
    /// The ranges as asked, inclusive.
    pub ranges: Vec<(u16, u16)>,
    /// Every slot of the ranges, ascending.
    pub slots: Vec<u16>,
    pub source: NodeName,
    pub dest: NodeName,
    pub state: TaskState,
    pub last_error: String,
    /// Times the destination connected again after losing the source.
    pub retries: u64,
    /// Unix ms.
    pub create_time: u64,
    pub start_time: u64,
    pub end_time: u64,
    /// Unix ms: the state last changed (Valkey's last_update_time), and
    /// the other side was last heard on the task's connection (its
    /// last_ack_time).
    pub last_update: u64,
    pub last_ack: u64,
    /// How long the source held the slots' commands for the switch, ms.
    pub write_pause_ms: u64,
    /// The connection carrying the task (the destination's to the source,
    /// or the source's client that the destination opened).
    pub client: Option<u64>,
    /// Source: the next index of `slots` to send.
    pub next: usize,
    /// Source: which slots went out already (their writes are forwarded).
    pub sent: Vec<bool>,
    /// Keys sent (source) or applied (destination) so far.
    pub keys: u64,
    /// Source: bytes of keys and writes sent, and the most the destination
    /// said it applied (its answers to the marks sent after each turn's
    /// bytes): the lag the hand-off waits to fall.
    pub sent_bytes: u64,
    pub acked_bytes: u64,
    /// Source: big keys being sent in pieces, the first in progress.
    pub big: Vec<BigKey>,
    /// Unix ms: the source's pause began (Handoff), or the destination may
    /// connect again (Connecting after a loss).
    pub since_ms: u64,
}

impl Task {
    /// A task over `ranges` (each start <= end < 16384).
    pub fn new(id: String, op: Op, ranges: Vec<(u16, u16)>, source: NodeName, dest: NodeName, now_ms: u64) -> Task {
        let mut sent = vec![false; SLOTS];
        let mut slots = Vec::new();
        for &(a, b) in &ranges {
            for s in a..=b {
                if !sent[s as usize] {
                    sent[s as usize] = true;
                    slots.push(s);
                }
            }
        }
        slots.sort_unstable();
        sent.fill(false);
        Task {
            id,
            op,
            ranges,
            slots,
            source,
            dest,
            state: TaskState::Connecting,
            last_error: String::new(),
            retries: 0,
            create_time: now_ms,
            start_time: now_ms,
            end_time: 0,
            last_update: now_ms,
            last_ack: now_ms,
            write_pause_ms: 0,
            client: None,
            next: 0,
            sent,
            keys: 0,
            sent_bytes: 0,
            acked_bytes: 0,
            big: Vec::new(),
            since_ms: 0,
        }
    }

    /// True if `slot` is one of the task's.
    pub fn has_slot(&self, slot: u16) -> bool {
        self.slots.binary_search(&slot).is_ok()
    }

    /// The ranges as STATUS shows them: `a-b` joined by spaces.
    pub fn slots_text(&self) -> String {
        self.ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(" ")
    }

    /// Moves the task to `state` at `now_ms`.
    pub fn set_state(&mut self, state: TaskState, now_ms: u64) {
        if self.state != state {
            self.state = state;
            self.last_update = now_ms;
        }
    }

    /// True while the source still has keys to send (slots not reached,
    /// or a big key in pieces); after that only writes follow.
    pub fn sending_keys(&self) -> bool {
        self.next < self.slots.len() || !self.big.is_empty()
    }

    /// The state as Redis 8.4's CLUSTER MIGRATION STATUS names it: its
    /// words for the step each of ours matches (the destination applies
    /// the stream as it comes, so it waits for the end of the stream from
    /// the start; the source sends keys and writes, then writes only,
    /// then hands off).
    pub fn redis_state(&self) -> &'static str {
        match (self.op, self.state) {
            (_, TaskState::Connecting) => "connecting",
            (Op::Import, TaskState::Syncing) => "wait-stream-eof",
            (Op::Import, TaskState::Handoff) => "takeover",
            (Op::Migrate, TaskState::Syncing) if self.sending_keys() => "send-bulk-and-stream",
            (Op::Migrate, TaskState::Syncing) => "send-stream",
            (Op::Migrate, TaskState::Handoff) => "handoff",
            (_, TaskState::Completed) => "completed",
            (_, TaskState::Canceled) => "canceled",
            (_, TaskState::Failed) => "failed",
        }
    }

    /// The state as Valkey 9's CLUSTER GETSLOTMIGRATIONS names it: its
    /// three documented final words, and for a running job its word for
    /// the matching step.
    pub fn valkey_state(&self) -> &'static str {
        match (self.op, self.state) {
            (_, TaskState::Connecting) => "connecting",
            (Op::Import, TaskState::Syncing) => "receiving-snapshot",
            (Op::Import, TaskState::Handoff) => "failover-requested",
            (Op::Migrate, TaskState::Syncing) if self.sending_keys() => "snapshotting",
            (Op::Migrate, TaskState::Syncing) => "replicating",
            (Op::Migrate, TaskState::Handoff) => "failover-paused",
            (_, TaskState::Completed) => "success",
            (_, TaskState::Canceled) => "cancelled",
            (_, TaskState::Failed) => "failed",
        }
    }

    /// Ends the task in `state` at `now_ms`.
    pub fn finish(&mut self, state: TaskState, why: &str, now_ms: u64) {
        self.set_state(state, now_ms);
        if !why.is_empty() {
            self.last_error = why.to_string();
        }
        self.end_time = now_ms;
        self.client = None;
    }
}

/// Every task this node knows, running or ended (ended ones are kept for
/// STATUS, the newest `KEEP_ENDED`).
#[derive(Debug, Default)]
pub struct Migrations {
    pub tasks: Vec<Task>,
    /// Slots whose commands wait (the source during a handoff); empty
    /// almost always, so dispatch pays one branch.
    pub paused: Vec<u16>,
    /// A pause just ended: the event loop runs the held clients again.
    pub unpaused: bool,
    /// Keys of slots owned elsewhere wait to be deleted (`trim_step`):
    /// one trim job at a time, covering every such slot.
    pub trim: bool,
    /// The running trim job: keys it set out to delete (more join when
    /// another migration ends meanwhile) and deleted so far.
    pub trim_job_keys: u64,
    pub trim_job_trimmed: u64,
    /// Trim jobs started, completed and cancelled (this node became a
    /// replica) since start.
    pub trim_started: u64,
    pub trim_completed: u64,
    pub trim_cancelled: u64,
    /// The most input a destination's connection held unapplied
    /// (INFO's mem_cluster_slot_migration_input_buffer_peak).
    pub input_peak: usize,
    /// Draws for task ids.
    pub counter: u64,
    /// Writes the source collected this turn (the write stream's consumer
    /// fills it), forwarded by slot at the end of the turn.
    pub queue: Rc<RefCell<Vec<Vec<Vec<u8>>>>>,
}

/// Ended tasks kept for STATUS.
const KEEP_ENDED: usize = 32;

impl Migrations {
    /// True while some task has work for the event loop.
    pub fn busy(&self) -> bool {
        self.trim || self.tasks.iter().any(|t| t.op == Op::Migrate && t.state == TaskState::Syncing)
    }

    /// True if a task is running (not ended).
    pub fn running(&self) -> bool {
        self.tasks.iter().any(|t| !t.state.is_final())
    }

    /// The running task holding `slot`, if any.
    pub fn running_with_slot(&self, slot: u16) -> Option<&Task> {
        self.tasks.iter().find(|t| !t.state.is_final() && t.has_slot(slot))
    }

    /// The task with this id.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    /// The running task carried by connection `client`.
    pub fn by_client(&mut self, client: u64) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|t| t.client == Some(client) && !t.state.is_final())
    }

    /// True if `slot`'s commands must wait now.
    #[inline]
    pub fn is_paused(&self, slot: u16) -> bool {
        !self.paused.is_empty() && self.paused.binary_search(&slot).is_ok()
    }

    /// Holds the commands of `slots` (sorted) until `unpause`.
    pub fn pause(&mut self, slots: &[u16]) {
        self.paused.extend_from_slice(slots);
        self.paused.sort_unstable();
        self.paused.dedup();
    }

    /// Lets the commands of `slots` run again.
    pub fn unpause(&mut self, slots: &[u16]) {
        let before = self.paused.len();
        self.paused.retain(|s| slots.binary_search(s).is_err());
        if self.paused.len() != before {
            self.unpaused = true;
        }
    }

    /// Forgets the oldest ended tasks beyond those kept.
    pub fn prune(&mut self) {
        let ended = self.tasks.iter().filter(|t| t.state.is_final()).count();
        let mut drop = ended.saturating_sub(KEEP_ENDED);
        self.tasks.retain(|t| {
            if drop > 0 && t.state.is_final() {
                drop -= 1;
                return false;
            }
            true
        });
    }
}

impl Cluster {
    /// The destination's switch: `slots` become this node's, under a
    /// config epoch newer than any other (bumped without consensus, as
    /// SETSLOT NODE closing an import does), told to every node at once
    /// with a PONG, and saved with fsync.
    pub fn take_imported_slots(&mut self, slots: &[u16], env: &Env) {
        let me = self.myself;
        for &s in slots {
            self.del_slot(s);
            self.add_slot(&me, s);
            self.importing_from.remove(&s);
        }
        if self.bump_epoch_without_consensus() {
            self.log(2, format!("configEpoch updated after importing {} slots by atomic slot migration", slots.len()));
        }
        self.broadcast_pong(false, env);
        self.later(todo::SAVE_CONFIG | todo::FSYNC_CONFIG | todo::UPDATE_STATE);
    }

    /// The source's switch, once the destination said it took `slots`:
    /// they are `dest`'s in this node's view at once (its PONG with the
    /// newer epoch confirms it), so their commands are redirected there.
    pub fn give_migrated_slots(&mut self, slots: &[u16], dest: &NodeName) {
        if !self.nodes.contains_key(dest) {
            return;
        }
        for &s in slots {
            if self.slots[s as usize] == Some(self.myself) {
                self.del_slot(s);
                self.add_slot(dest, s);
            }
            self.migrating_to.remove(&s);
        }
        self.log(2, format!("{} slots migrated to {} by atomic slot migration", slots.len(), name_str(dest)));
        self.later(todo::SAVE_CONFIG | todo::FSYNC_CONFIG | todo::UPDATE_STATE);
    }

    /// The one primary owning every slot of `slots`, when there is one.
    pub fn single_owner(&self, slots: &[u16]) -> Result<NodeName, String> {
        let mut owner = None;
        for &s in slots {
            let Some(o) = self.slots[s as usize] else { return Err(format!("Slot {s} has no owner")) };
            match owner {
                None => owner = Some(o),
                Some(x) if x != o => return Err("Slots belong to different source nodes".into()),
                _ => {}
            }
        }
        owner.ok_or_else(|| "No slots".to_string())
    }

    /// The client address (ip, port) of node `n`: its TLS port with
    /// tls-cluster, as the bus and the import connection speak TLS then.
    pub fn client_addr(&self, n: &NodeName) -> Option<(String, u16)> {
        let tls = self.settings.tls_cluster;
        self.nodes.get(n).filter(|x| !x.ip.is_empty() && x.default_port(tls) != 0).map(|x| (x.ip.clone(), x.default_port(tls)))
    }
}
