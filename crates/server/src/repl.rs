//! Replication state: this server's replication id and offset, the
//! backlog, the replicas attached to it and the link to its own primary.
//! A registry like `blocking`: it knows which clients are replicas and
//! what each was sent, not how bytes reach them (`replication` moves the
//! stream into their output buffers, `link` drives the socket to a
//! primary, the event loop writes).
//!
//! The offset counts bytes of the RESP stream exactly as Redis does: every
//! byte that went (or, on a replica, came) down the replication stream,
//! SELECT, MULTI/EXEC and the primary's PINGs included. The feed's sink
//! (`StreamSink`) encodes each propagated command into `Repl::stream`;
//! `replication::drain` then moves those bytes into the backlog and the
//! replicas, advancing the offset by their length.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Instant;

use crate::client::ClientId;
use crate::feed::Sink;

/// Redis's reply to a write on a read-only replica.
pub const READONLY_ERROR: &str = "READONLY You can't write against a read only replica.";
/// Redis's reply while the link is down and stale data must not be served.
pub const MASTERDOWN_ERROR: &str = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// Redis's reply to a write when fewer good replicas than
/// min-replicas-to-write are attached.
pub const NOREPLICAS_ERROR: &str = "NOREPLICAS Not enough good replicas to write.";

/// Where a replica of this server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaState {
    /// Asked for a full sync; waits for a background save to start.
    WaitBgsaveStart,
    /// Got +FULLRESYNC; waits for the RDB image (the stream meanwhile
    /// stays in the shared buffer, from `Replica::pos` on).
    WaitBgsaveEnd,
    /// The image is on its way (`Client::bulk`); the stream waits in the
    /// shared buffer until it is through.
    SendBulk,
    /// Synchronized: the stream goes from the shared buffer to its socket.
    Online,
}

impl ReplicaState {
    /// The name INFO's `slaveN:state=` gives it.
    pub fn name(self) -> &'static str {
        match self {
            ReplicaState::WaitBgsaveStart | ReplicaState::WaitBgsaveEnd => "wait_bgsave",
            ReplicaState::SendBulk => "send_bulk",
            ReplicaState::Online => "online",
        }
    }
}

/// One replica of this server (a client that sent SYNC or PSYNC).
#[derive(Debug, Clone)]
pub struct Replica {
    /// Its place in the sync.
    pub state: ReplicaState,
    /// The offset it acknowledged last (REPLCONF ACK).
    pub ack_offset: i64,
    /// When it last acknowledged.
    pub ack_time: Instant,
    /// REPLCONF listening-port.
    pub port: u16,
    /// REPLCONF ip-address, else its peer address.
    pub ip: Option<String>,
    /// REPLCONF capa eof: it takes the EOF-marked RDB form.
    pub capa_eof: bool,
    /// REPLCONF capa psync2: +CONTINUE carries the replication id.
    pub capa_psync2: bool,
    /// Got an EOF-marked image: the stream waits for its first ACK, since
    /// the mark must be the last thing it reads before it loads.
    pub wait_ack: bool,
    /// It sent SYNC, not PSYNC: no +FULLRESYNC line, no ACKs expected.
    pub plain_sync: bool,
    /// Its position in the shared buffer (`Backlog`): the offset of the
    /// last stream byte copied into its output buffer. What follows is
    /// what it has not been sent yet; while it waits for its image this
    /// is the image's offset. Unused before +FULLRESYNC.
    pub pos: i64,
    /// When it began to wait for a full sync (repl-diskless-sync-delay).
    pub wait_since: Instant,
    /// The offset its AOF has fsynced (REPLCONF ACK ... FACK), -1 when it
    /// has not said (no AOF there).
    pub aof_ack: i64,
    /// It receives the running save's image as it is written (a diskless
    /// sync), not once the save ended.
    pub streamed: bool,
}

impl Replica {
    /// A replica that just connected.
    pub fn new() -> Replica {
        Replica {
            state: ReplicaState::WaitBgsaveStart,
            ack_offset: 0,
            ack_time: Instant::now(),
            port: 0,
            ip: None,
            capa_eof: false,
            capa_psync2: false,
            plain_sync: false,
            wait_ack: false,
            pos: 0,
            wait_since: Instant::now(),
            aof_ack: -1,
            streamed: false,
        }
    }
}

impl Default for Replica {
    fn default() -> Self {
        Replica::new()
    }
}

/// Bytes a block of the shared replication buffer holds: a longer write
/// spans blocks, so the buffer is released in steps of this size at most.
pub const BLOCK: usize = 16 * 1024;

/// One block of the shared replication buffer.
#[derive(Debug)]
struct Block {
    /// Stream offset of the byte before its first one.
    at: i64,
    bytes: Vec<u8>,
}

/// The replication buffer: the stream, appended once, as a list of
/// blocks that the backlog and every replica share. The backlog is the
/// whole list (INFO repl_backlog_histlen); a replica is a position in it
/// (`Replica::pos`), not a copy. The oldest blocks are released only when
/// no replica still needs them and what stays holds at least the
/// configured `repl-backlog-size`, so a slow replica makes the backlog
/// grow past that size, and a PSYNC may continue from any offset still
/// held.
#[derive(Debug, Default)]
pub struct Backlog {
    blocks: VecDeque<Block>,
    /// Stream offset of the byte before the first one held.
    start: i64,
    /// Stream offset of the last byte held.
    end: i64,
    /// Configured size (repl-backlog-size).
    size: usize,
    /// Bytes the blocks allocated.
    mem: usize,
    /// Room a new block makes (`BLOCK`; 0 reads as `BLOCK`; tests use
    /// small blocks).
    block: usize,
    /// False until the first replica attaches (INFO repl_backlog_active).
    pub active: bool,
}

impl Backlog {
    /// An empty buffer keeping at least `size` bytes, whose next byte is
    /// at offset `end + 1` (Redis's offsets count from 1).
    pub fn reset(&mut self, size: usize, end: i64) {
        self.blocks.clear();
        self.mem = 0;
        self.size = size.max(1);
        self.start = end;
        self.end = end;
    }

    /// Sets the size to keep (CONFIG SET repl-backlog-size); `trim`
    /// releases what a smaller one no longer keeps.
    pub fn set_size(&mut self, size: usize) {
        self.size = size.max(1);
    }

    /// Appends stream bytes: into the room the newest block has left,
    /// the rest into new blocks.
    pub fn append(&mut self, bytes: &[u8]) {
        let mut at = self.end;
        self.end += bytes.len() as i64;
        let mut rest = bytes;
        if let Some(last) = self.blocks.back_mut() {
            let n = (last.bytes.capacity() - last.bytes.len()).min(rest.len());
            last.bytes.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            at += n as i64;
        }
        let block = self.block_size();
        while !rest.is_empty() {
            let n = rest.len().min(block);
            let mut b = Vec::with_capacity(block);
            b.extend_from_slice(&rest[..n]);
            self.mem += b.capacity();
            self.blocks.push_back(Block { at, bytes: b });
            rest = &rest[n..];
            at += n as i64;
        }
    }

    /// Releases the oldest blocks that no replica needs (`hold`: the
    /// lowest offset a replica was given up to; `i64::MAX` for none) and
    /// that the configured size does not keep: what stays holds at least
    /// `size` bytes, and at least one block.
    pub fn trim(&mut self, hold: i64) {
        while self.blocks.len() > 1 {
            let first = &self.blocks[0];
            let len = first.bytes.len() as i64;
            if self.histlen() - len < self.size as i64 || hold < first.at + len {
                break;
            }
            self.mem -= first.bytes.capacity();
            self.start += len;
            self.blocks.pop_front();
        }
    }

    /// Bytes held (INFO repl_backlog_histlen).
    pub fn histlen(&self) -> i64 {
        self.end - self.start
    }

    /// Offset of the oldest byte held (INFO repl_backlog_first_byte_offset).
    pub fn first_offset(&self) -> i64 {
        self.start + 1
    }

    /// Offset of the last byte held.
    pub fn end(&self) -> i64 {
        self.end
    }

    /// Configured size.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Room a new block makes.
    fn block_size(&self) -> usize {
        if self.block == 0 {
            BLOCK
        } else {
            self.block
        }
    }

    /// Bytes the blocks allocated (INFO mem_total_replication_buffers).
    pub fn memory(&self) -> usize {
        self.mem
    }

    /// The part of the buffer that replicas hold beyond what the backlog
    /// keeps: the blocks past the configured size, and the list of blocks
    /// past what that size needs (Redis's estimate of the same in
    /// freeMemoryGetNotCountedMemory). Eviction cannot shrink it.
    pub fn beyond_size(&self) -> usize {
        let entry = std::mem::size_of::<Block>();
        let block = self.block_size();
        let kept = self.size + (self.size / block + 1) * entry;
        (self.mem + self.blocks.capacity() * entry).saturating_sub(kept)
    }

    /// True if a replica can continue from offset `from` (the first byte
    /// it lacks): the bytes from there on are all held.
    pub fn holds(&self, from: i64) -> bool {
        self.active && from > self.start && from <= self.end + 1
    }

    /// Appends to `out` up to `max` bytes that follow offset `pos` (a
    /// replica's position); returns how many. None if bytes after `pos`
    /// are no longer held.
    pub fn read(&self, pos: i64, max: usize, out: &mut Vec<u8>) -> Option<usize> {
        if pos < self.start || pos > self.end {
            return None;
        }
        let mut i = self.blocks.partition_point(|b| b.at + b.bytes.len() as i64 <= pos);
        let mut at = pos;
        let mut left = max;
        while left > 0 && i < self.blocks.len() {
            let b = &self.blocks[i];
            let from = (at - b.at) as usize;
            let n = (b.bytes.len() - from).min(left);
            out.extend_from_slice(&b.bytes[from..from + n]);
            at += n as i64;
            left -= n;
            i += 1;
        }
        Some((at - pos) as usize)
    }
}

/// Where the link to this server's primary stands (a replica's side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// To (re)connect at the next chance.
    Connect,
    /// TCP connect in progress.
    Connecting,
    /// Handshake: waiting for the reply to the step's command.
    Handshake(Step),
    /// Receiving the RDB image.
    Transfer,
    /// Synchronized: the primary's stream runs through its client.
    Connected,
}

/// Handshake steps, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Ping,
    Auth,
    Port,
    Capa,
    Psync,
}

/// This server's primary, when it is a replica.
#[derive(Debug)]
pub struct Primary {
    pub host: String,
    pub port: u16,
    pub state: LinkState,
    /// The primary's client once synchronized.
    pub client: Option<ClientId>,
    /// When the link last received anything (master_last_io_seconds_ago).
    pub last_io: Instant,
    /// When the link went down (master_link_down_since_seconds).
    pub down_since: Instant,
    /// When the current connection attempt began (repl-timeout).
    pub attempt_started: Instant,
    /// The size of the RDB being received (-1: EOF-marked) and what came.
    pub transfer_size: i64,
    pub transfer_read: u64,
}

impl Primary {
    /// A primary to connect to.
    pub fn new(host: String, port: u16) -> Primary {
        let now = Instant::now();
        Primary { host, port, state: LinkState::Connect, client: None, last_io: now, down_since: now, attempt_started: now, transfer_size: 0, transfer_read: 0 }
    }
}

/// The replication state of the server.
pub struct Repl {
    /// This server's replication id (INFO master_replid).
    pub replid: String,
    /// The id it had before (a promoted replica's old primary's).
    pub replid2: String,
    /// Last byte offset of the stream (INFO master_repl_offset).
    pub offset: i64,
    /// Up to where `replid2` is valid, +1 (INFO second_repl_offset).
    pub second_offset: i64,
    /// The backlog.
    pub backlog: Backlog,
    /// Replicas of this server, by client id: clients that sent SYNC or
    /// PSYNC.
    pub replicas: BTreeMap<ClientId, Replica>,
    /// What clients that have not sent SYNC or PSYNC yet announced with
    /// REPLCONF (listening-port, ip-address, capa): not replicas yet, so
    /// no full sync may pick them; moved to `replicas` when they ask.
    pub announced: BTreeMap<ClientId, Replica>,
    /// Stream bytes the feed wrote and `replication::drain` has not moved yet.
    pub stream: Rc<RefCell<Vec<u8>>>,
    /// The stream's sink is attached to the feed.
    pub sink_attached: bool,
    /// This server's primary, when it is a replica.
    pub primary: Option<Primary>,
    /// This server's id and offset are a history a primary may continue
    /// (PSYNC <replid> <offset+1>); false until it was a primary's replica
    /// or a primary itself was told REPLICAOF (a fresh start asks `? -1`).
    pub cached: bool,
    /// The database the primary's stream had selected when its link was
    /// lost: a partial resync continues the stream, which does not repeat
    /// the SELECT (Redis's cached master keeps it too).
    pub primary_db: usize,
    /// The id and offset came from the RDB file loaded at start-up: a
    /// replica continues that history, a primary starts its backlog there.
    pub restored: bool,
    /// Keys (database, key) that clients of this writable replica gave a
    /// TTL: the replica expires them itself.
    pub local_keys: std::collections::HashSet<(usize, Vec<u8>)>,
    /// Keys (database, key) a restarted primary found expired in its RDB
    /// file: its stream begins with their DELs.
    pub expired_at_load: Vec<(usize, Vec<u8>)>,
    /// min-replicas-to-write, kept here so the write path reads no string.
    pub min_replicas: usize,
    /// WAIT and WAITAOF callers, in the order they blocked.
    pub waiting: Vec<Waiter>,
    /// A WAIT wants fresh acknowledgements: REPLCONF GETACK goes out
    /// before the event loop sleeps.
    pub get_ack: bool,
    /// When the last PING went to the replicas.
    pub last_ping: Instant,
    /// When the last ACK went to the primary.
    pub last_ack: Instant,
    /// INFO sync_full, sync_partial_ok, sync_partial_err.
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// A full sync's RDB save finished: its file, or why it failed.
    pub rdb_done: Option<Result<std::path::PathBuf, String>>,
    /// The offset the running full-sync save's image is at.
    pub rdb_offset: i64,
    /// The file the running full-sync save writes.
    pub rdb_path: Option<std::path::PathBuf>,
    /// The coordinated failover running, if one is.
    pub failover: Option<Failover>,
    /// Since when no replica is attached (repl-backlog-ttl).
    pub no_replicas_since: Instant,
    /// A full sync's image is arriving for a diskless load
    /// (`repl-diskless-load` swapdb, or on-empty-db with no data):
    /// `Some(true)` while the old data is still served (swapdb continuing
    /// this replica's own history: INFO async_loading), `Some(false)`
    /// while clients are told -LOADING (INFO loading), as Redis's replica
    /// reports the load it does while reading the socket.
    pub transfer_loading: Option<bool>,
    /// The stream offset up to which the AOF is fsynced (Redis's
    /// fsynced_reploff): what WAITAOF counts locally and a replica
    /// acknowledges as FACK. -1 while the AOF is off.
    pub fsynced: i64,
}

/// A coordinated failover (FAILOVER) in progress on a primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failover {
    /// The replica to fail over to (host, port); None: the first that
    /// catches up.
    pub target: Option<(String, u16)>,
    /// When to give up, or with `force` to fail over anyway (Unix ms).
    pub deadline: Option<i64>,
    /// FORCE: fail over at the deadline even if the target lags.
    pub force: bool,
    /// False while waiting for a replica to acknowledge the whole stream
    /// (writes held); true once this server asked the target to take over
    /// (PSYNC ... FAILOVER), as its replica.
    pub in_progress: bool,
}

impl Failover {
    /// INFO's master_failover_state.
    pub fn state_name(f: Option<&Failover>) -> &'static str {
        match f {
            None => "no-failover",
            Some(f) if f.in_progress => "failover-in-progress",
            Some(_) => "waiting-for-sync",
        }
    }
}

/// A client blocked in WAIT or WAITAOF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiter {
    /// The blocked client.
    pub client: ClientId,
    /// The stream offset of its last write.
    pub offset: i64,
    /// Replicas it waits for.
    pub replicas: i64,
    /// WAITAOF's numlocal (0 or 1); None for WAIT.
    pub aof_local: Option<i64>,
}

impl Repl {
    /// Fresh state with a new random replication id.
    pub fn new() -> Repl {
        let now = Instant::now();
        Repl {
            replid: random_id(),
            replid2: "0".repeat(40),
            offset: 0,
            second_offset: -1,
            backlog: Backlog::default(),
            replicas: BTreeMap::new(),
            announced: BTreeMap::new(),
            stream: Rc::new(RefCell::new(Vec::new())),
            sink_attached: false,
            primary: None,
            cached: false,
            restored: false,
            expired_at_load: Vec::new(),
            local_keys: std::collections::HashSet::new(),
            min_replicas: 0,
            primary_db: 0,
            waiting: Vec::new(),
            get_ack: false,
            last_ping: now,
            last_ack: now,
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            rdb_done: None,
            rdb_offset: 0,
            rdb_path: None,
            no_replicas_since: now,
            transfer_loading: None,
            failover: None,
            fsynced: -1,
        }
    }

    /// True when this server replicates another.
    pub fn is_replica(&self) -> bool {
        self.primary.is_some()
    }

    /// The primary's client id, when synchronized.
    pub fn primary_client(&self) -> Option<ClientId> {
        self.primary.as_ref().and_then(|p| p.client)
    }

    /// Replicas that acknowledged `offset` or later.
    pub fn acked(&self, offset: i64) -> i64 {
        self.replicas.values().filter(|r| r.state == ReplicaState::Online && r.ack_offset >= offset).count() as i64
    }

    /// Replicas whose AOF fsynced `offset` or later (REPLCONF FACK).
    pub fn aof_acked(&self, offset: i64) -> i64 {
        self.replicas.values().filter(|r| r.state == ReplicaState::Online && r.aof_ack >= offset).count() as i64
    }

    /// The offset the stream will be at once what the feed encoded so far
    /// is drained: on a primary the stream's pending bytes count, on a
    /// replica (whose stream is its primary's) they do not.
    #[inline]
    pub fn end_offset(&self) -> i64 {
        if self.primary.is_some() {
            self.offset
        } else {
            self.offset + self.stream.borrow().len() as i64
        }
    }

    /// Online replicas that acknowledged within `max_lag` seconds.
    pub fn good_replicas(&self, max_lag: u64) -> usize {
        self.replicas.values().filter(|r| r.state == ReplicaState::Online && r.ack_time.elapsed().as_secs() <= max_lag).count()
    }

    /// Forgets the id the stream had before (a full sync from a primary).
    pub fn clear_replid2(&mut self) {
        self.replid2 = "0".repeat(40);
        self.second_offset = -1;
    }

    /// Takes a new id, keeping the current one as the second (promotion,
    /// or a replica cut from its primary: PSYNC2).
    pub fn shift_replid(&mut self) {
        self.replid2 = std::mem::replace(&mut self.replid, random_id());
        self.second_offset = self.offset + 1;
    }
}

impl Default for Repl {
    fn default() -> Self {
        Repl::new()
    }
}

/// 40 random hex digits.
pub fn random_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(40);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    for i in 0..3u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(t);
        h.write_u64(i);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// Encodes `argv` as a RESP array of bulk strings, as the stream carries
/// it: the AOF's own form.
pub use crate::aofcore::reader::encode;

/// The replication stream's consumer on the feed: encodes each command
/// into `Repl::stream`.
pub struct StreamSink(pub Rc<RefCell<Vec<u8>>>);

impl Sink for StreamSink {
    fn feed(&mut self, argv: &[Vec<u8>]) {
        encode(argv, &mut self.0.borrow_mut());
    }

    fn name(&self) -> &'static str {
        "replication"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(b: &Backlog, pos: i64) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        b.read(pos, usize::MAX, &mut out).map(|_| out)
    }

    #[test]
    fn backlog_keeps_the_newest_blocks_and_their_offsets() {
        let mut b = Backlog { block: 4, ..Backlog::default() };
        b.reset(8, 0);
        b.active = true;
        assert_eq!(b.first_offset(), 1);
        b.append(b"abcde");
        assert_eq!((b.first_offset(), b.histlen()), (1, 5));
        assert!(b.holds(3) && b.holds(6) && !b.holds(7) && !b.holds(0));
        assert_eq!(read_all(&b, 2).as_deref(), Some(&b"cde"[..]));
        assert_eq!(read_all(&b, 5).as_deref(), Some(&b""[..]));
        assert_eq!(read_all(&b, 6), None);
        let mut two = Vec::new();
        assert_eq!(b.read(1, 2, &mut two), Some(2));
        assert_eq!(two, b"bc");
        b.append(b"fghij");
        b.trim(i64::MAX);
        // Dropping the first block would leave fewer than 8 bytes.
        assert_eq!((b.first_offset(), b.histlen()), (1, 10));
        assert_eq!(read_all(&b, 8).as_deref(), Some(&b"ij"[..]));
        b.append(b"0123456789");
        b.trim(i64::MAX);
        assert_eq!((b.first_offset(), b.histlen()), (13, 8));
        assert_eq!(read_all(&b, 12).as_deref(), Some(&b"23456789"[..]));
        assert!(!b.holds(12) && b.holds(13));
        assert_eq!(read_all(&b, 11), None);
        assert_eq!(b.memory(), 8);
    }

    #[test]
    fn a_replica_position_holds_blocks_past_the_size() {
        let mut b = Backlog { block: 4, ..Backlog::default() };
        b.reset(4, 100);
        b.active = true;
        for _ in 0..10 {
            b.append(b"wxyz");
            // A replica was given nothing past offset 102.
            b.trim(102);
        }
        assert_eq!((b.first_offset(), b.histlen(), b.memory()), (101, 40, 40));
        assert!(b.holds(103));
        assert_eq!(read_all(&b, 102).map(|v| v.len()), Some(38));
        // It moved on: only the configured size stays.
        b.trim(140);
        assert_eq!((b.first_offset(), b.histlen(), b.memory()), (137, 4, 4));
        b.set_size(100);
        b.append(&[b'x'; 10]);
        b.trim(i64::MAX);
        assert_eq!((b.histlen(), b.memory()), (14, 16));
    }

    #[test]
    fn stream_encoding() {
        let mut v = Vec::new();
        encode(&[b"SELECT".to_vec(), b"0".to_vec()], &mut v);
        assert_eq!(v, b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n");
        assert_eq!(random_id().len(), 40);
    }
}
