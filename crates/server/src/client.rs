//! Per-connection state: socket, buffers, selected database, protocol
//! version, transaction state, and the bookkeeping CLIENT LIST shows.
//!
//! A `Client` does not know about the event loop; `net.rs` feeds its query
//! buffer and drains its reply buffer, `exec.rs` runs what it parsed.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use resp::{Parser, Reply};

use crate::acl::UserRef;
use crate::conn::Conn;

/// A vector's header (pointer, capacity, length).
const VEC: usize = std::mem::size_of::<Vec<u8>>();
/// What one name costs in a table beside its bytes and header: the node or
/// bucket holding it and the client id filed under it.
const TABLE_ENTRY: usize = 32;

/// A client's numeric id, unique for the life of the process.
pub type ClientId = u64;

/// CLIENT REPLY mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Replies are sent.
    On,
    /// No replies.
    Off,
    /// The next command's reply is dropped.
    SkipNext,
    /// The current command's reply is dropped (SkipNext moves here).
    Skip,
}

/// Which of the three namespaces a subscription lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE channels.
    Channel,
    /// PSUBSCRIBE glob patterns.
    Pattern,
    /// SSUBSCRIBE shard channels.
    Shard,
}

impl Kind {
    /// The reply word confirming a subscription of this kind.
    pub fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    /// The reply word confirming an unsubscription of this kind.
    pub fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// The names one client is subscribed to. Sorted sets, so that an
/// argument-less UNSUBSCRIBE confirms in a stable order.
#[derive(Debug, Default)]
pub struct Subscriptions {
    /// SUBSCRIBE channels.
    pub channels: BTreeSet<Vec<u8>>,
    /// PSUBSCRIBE patterns.
    pub patterns: BTreeSet<Vec<u8>>,
    /// SSUBSCRIBE shard channels.
    pub shard: BTreeSet<Vec<u8>>,
}

impl Subscriptions {
    pub(crate) fn set(&mut self, kind: Kind) -> &mut BTreeSet<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count a (un)subscribe confirmation carries: channels plus
    /// patterns for those two kinds, shard channels alone for shard ones.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }

    pub(crate) fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }
}

/// A client's CLIENT TRACKING state (Redis's CLIENT_TRACKING_* flags and
/// redirection); `Client::tracking` is Some while tracking is on. Boxed
/// there, so the many clients that never track pay one null pointer. The
/// server side (which keys a client may cache, the BCAST prefixes) is the
/// registry in `tracking.rs`.
#[derive(Debug, Default, Clone)]
pub struct ClientTracking {
    /// Client the invalidations go to; 0: this one.
    pub redirect: ClientId,
    /// BCAST: invalidations by prefix, no key table.
    pub bcast: bool,
    /// OPTIN: keys are remembered only after CLIENT CACHING YES.
    pub optin: bool,
    /// OPTOUT: keys are remembered unless CLIENT CACHING NO.
    pub optout: bool,
    /// NOLOOP: no invalidations for this client's own writes.
    pub noloop: bool,
    /// CLIENT CACHING was given for the next command (or transaction).
    pub caching: bool,
    /// The redirection client went away.
    pub broken_redirect: bool,
    /// BCAST prefixes, sorted as CLIENT TRACKINGINFO lists them.
    pub prefixes: BTreeSet<Vec<u8>>,
}

impl ClientTracking {
    /// True if the keys read by the next command are remembered, given the
    /// OPTIN/OPTOUT mode and CLIENT CACHING.
    pub fn remembers(&self) -> bool {
        let opted_in = !self.optin || self.caching;
        let opted_out = self.optout && self.caching;
        !self.bcast && opted_in && !opted_out
    }
}

/// A connection's part in replication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplRole {
    /// An ordinary client.
    None,
    /// A replica of this server (sent SYNC or PSYNC).
    Replica,
    /// This server's primary, whose stream it applies.
    Primary,
}

/// Unsent reply bytes a client holds before they count against its output
/// limit (Redis's fixed reply buffer; obuf.rs has the whole rule).
pub const REPLY_BUF_FREE: usize = 16 * 1024;

/// Bytes of a reply block past the fixed buffer.
const BLOCK: usize = 16 * 1024;

/// What one block counts: the usable size of its allocation (the 20 KiB
/// size class less the 16-byte header), the header, and a list node.
const BLOCK_COST: u64 = (20 * 1024 - 16) + 16 + 24;

/// Reply blocks holding `pending` unsent bytes beyond the fixed buffer
/// (CLIENT LIST `oll`).
pub fn reply_blocks(pending: usize) -> usize {
    pending.saturating_sub(REPLY_BUF_FREE).div_ceil(BLOCK)
}

/// The output of `pending` unsent reply bytes that counts against a
/// normal or Pub/Sub client's limit (CLIENT LIST `omem`).
pub fn reply_usage(pending: usize) -> u64 {
    reply_blocks(pending) as u64 * BLOCK_COST
}

/// Least room a reply buffer is cut back to (Redis's 1 KiB floor).
pub const REPLY_ROOM_MIN: usize = 1024;
/// Most room a reply buffer keeps (Redis's 16 KiB reply chunk).
pub const REPLY_ROOM_MAX: usize = 16 * 1024;
/// A new client's room. Redis allocates 16 KiB for each client up front;
/// densekv allocates as replies need and starts the room lower, so a
/// client that got one large reply keeps no more than 4 KiB of it.
pub const REPLY_ROOM_START: usize = 4 * 1024;
/// How often, by default, the peak a room is sized by starts over (ms).
pub const REPLY_PEAK_RESET_MS: u64 = 5000;

/// The room a client's reply buffer keeps once its replies are written
/// (CLIENT LIST `rbs`), and the most of that room the buffer used since
/// the peak last started over (`rbp`).
///
/// The buffer grows as a reply needs; once all of it is written, a
/// buffer larger than its room is cut back to the room (`net.rs`). The
/// cron sizes the room by the peak, as Redis sizes its per-client buffer:
/// a peak under half the room shrinks it to the peak (not under
/// `REPLY_ROOM_MIN`), a peak that filled it doubles it (up to
/// `REPLY_ROOM_MAX`); every reset period the peak starts over from what
/// the buffer holds then. So a client that goes idle gives back all but
/// a kilobyte or two, and one that keeps getting large replies keeps
/// 16 KiB instead of growing a buffer again for each.
#[derive(Debug, Clone, Copy)]
pub struct ReplyRoom {
    /// Bytes the buffer may keep between replies.
    pub size: usize,
    /// Most bytes it held since `peak_at`, at most `size`.
    pub peak: usize,
    /// When the peak last started over.
    pub peak_at: Instant,
}

/// What one cron visit did to a room (INFO's reply_buffer_shrinks and
/// reply_buffer_expands count them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resized {
    Same,
    Shrunk,
    Expanded,
}

impl ReplyRoom {
    pub fn new(now: Instant) -> ReplyRoom {
        ReplyRoom { size: REPLY_ROOM_START, peak: 0, peak_at: now }
    }

    /// Notes that the buffer holds `held` bytes.
    #[inline]
    pub fn note(&mut self, held: usize) {
        self.peak = self.peak.max(held.min(self.size));
    }

    /// One cron visit: resizes the room by its peak, then starts the peak
    /// over from `held` if `reset` (None: never) has passed since it last
    /// did.
    pub fn adapt(&mut self, now: Instant, reset: Option<Duration>, held: usize) -> Resized {
        let half = self.size / 2;
        let resized = if half >= REPLY_ROOM_MIN && self.peak < half {
            self.size = REPLY_ROOM_MIN.max(self.peak + 1);
            Resized::Shrunk
        } else if self.size < REPLY_ROOM_MAX && self.peak == self.size {
            self.size = REPLY_ROOM_MAX.min(self.size * 2);
            Resized::Expanded
        } else {
            Resized::Same
        };
        if reset.is_some_and(|r| now.duration_since(self.peak_at) >= r) {
            self.peak = held.min(self.size);
            self.peak_at = now;
        }
        resized
    }
}

/// One connection.
pub struct Client {
    /// Unique id.
    pub id: ClientId,
    /// The socket; None for the internal client used by tests and scripts.
    pub sock: Option<Conn>,
    /// The socket's file descriptor, kept while an I/O thread holds the
    /// socket; -1 for a client without one.
    pub fd: i32,
    /// The TLS session of a client that came through tls-port; None for a
    /// plain one.
    pub tls: Option<Box<crate::tls::Session>>,
    /// Peer address as `ip:port`.
    pub addr: String,
    /// Local address as `ip:port`.
    pub laddr: String,
    /// CLIENT SETNAME.
    pub name: Option<Vec<u8>>,
    /// CLIENT SETINFO lib-name.
    pub lib_name: Option<Vec<u8>>,
    /// CLIENT SETINFO lib-ver.
    pub lib_ver: Option<Vec<u8>>,
    /// Selected database.
    pub db: usize,
    /// Bytes received and not yet parsed.
    pub qbuf: Vec<u8>,
    /// Parse position in `qbuf`.
    pub qpos: usize,
    /// Request parser state.
    pub parser: Parser,
    /// Reply bytes not yet written; `reply.resp3` is the protocol version.
    pub reply: Reply,
    /// The room `reply.buf` keeps between replies.
    pub reply_room: ReplyRoom,
    /// Bytes of the arguments of the command it is blocked in (CLIENT
    /// LIST `argv-mem`; CLIENT LIST and INFO fill in their caller's own).
    pub argv_mem: usize,
    /// How much of `reply.buf` was already written.
    pub sent: usize,
    /// Commands queued by MULTI (None outside a transaction).
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// EXEC is running this client's queued commands.
    pub in_exec: bool,
    /// The client a script's `redis.call` runs as (Redis's CLIENT_SCRIPT).
    pub in_script: bool,
    /// A command queued in MULTI failed to queue: EXEC must abort.
    pub multi_error: bool,
    /// Keys watched by WATCH: (db, key, alive at WATCH time).
    pub watched: Vec<(usize, Vec<u8>, bool)>,
    /// A watched key was modified.
    pub dirty_cas: bool,
    /// Close after the pending replies are written.
    pub close_after_reply: bool,
    /// Close now (CLIENT KILL, limits).
    pub close_asap: bool,
    /// This client is in MONITOR mode.
    pub monitor: bool,
    /// CLIENT REPLY state.
    pub reply_mode: ReplyMode,
    /// CLIENT NO-EVICT.
    pub no_evict: bool,
    /// CLIENT NO-TOUCH.
    pub no_touch: bool,
    /// Creation time.
    pub created: Instant,
    /// Time of the last command.
    pub last_interaction: Instant,
    /// Name of the last command run, for CLIENT LIST `cmd=`.
    pub last_cmd: &'static str,
    /// Total bytes read.
    pub net_in: u64,
    /// Total bytes written.
    pub net_out: u64,
    /// Commands run.
    pub commands: u64,
    /// Largest query buffer seen since the last cron, for its resizing.
    pub qbuf_peak: usize,
    /// Room the query buffer needs from its position for a big argument
    /// being read (its whole length, allocated once its length is known,
    /// as Redis allocates it), 0 otherwise.
    pub qbuf_want: usize,
    /// This client's commands are on hold because of CLIENT PAUSE.
    pub paused: bool,
    /// The poller reported the peer's end closed (FIN or reset): the next
    /// read must go on to the end of the stream, since no further
    /// readiness event will come for it.
    pub peer_closed: bool,
    /// Waiting in a blocking command (see `blocking.rs`): no further
    /// requests are read until it is served, times out or is unblocked.
    pub blocked: bool,
    /// READONLY (cluster mode): reads of its primary's slots are served
    /// on a replica.
    pub readonly: bool,
    /// CLIENT CAPA redirect (Valkey): a replica answers this client's data
    /// commands with `-REDIRECT host:port` of its primary.
    pub capa_redirect: bool,
    /// ASKING (cluster mode): the next command may use an importing slot.
    /// One-shot, kept through a transaction until EXEC.
    pub asking: bool,
    /// Atomic slot migration: this connection carries a task's keys and
    /// writes (the destination's socket to the source: what comes in is
    /// applied, replies are not sent; on the source, the destination's
    /// client that the keys go to).
    pub slot_import: bool,
    pub slot_export: bool,
    /// Bytes of the request being executed, already consumed from `qbuf`
    /// (CLIENT LIST counts them in `qbuf=`, as Redis does).
    pub cur_cmd_len: usize,
    /// Pub/Sub subscriptions; Some while in Pub/Sub mode.
    pub pubsub: Option<Box<Subscriptions>>,
    /// CLIENT TRACKING state; Some while tracking is on.
    pub tracking: Option<Box<ClientTracking>>,
    /// The ACL user commands run as; None for internal clients, which may
    /// run anything (the AOF loader; a script's client takes its caller's).
    pub user: Option<UserRef>,
    /// AUTH succeeded, or the default user needed none when it connected.
    pub authenticated: bool,
    /// Replica of this server, its primary, or neither.
    pub repl_role: ReplRole,
    /// The primary's client: the raw bytes of the command being parsed
    /// (the parser consumes a large one over several reads), which count
    /// into the offset and go on to sub-replicas once it ran.
    pub repl_cmd: Vec<u8>,
    /// The replication stream's offset right after this client's last
    /// command that wrote to it (WAIT and WAITAOF wait for it).
    pub woff: i64,
    /// `qbuf` is the event loop's shared read buffer, lent for this
    /// serve: the client holds it only until its turn ends.
    pub qbuf_shared: bool,
    /// The memory this client was last counted at in the clients' total
    /// that client eviction (maxmemory-clients) compares with its limit;
    /// 0 while not counted.
    pub mem_counted: usize,
    /// When the unsent output first reached the soft output buffer limit
    /// (`obuf`); None while under it.
    pub obuf_soft_since: Option<std::time::Instant>,
    /// A file on its way to this client behind its reply (a full sync's
    /// image to a replica), read a slice at a time as the socket drains.
    pub bulk: Option<Bulk>,
    /// The I/O thread that owns this client's socket (`io-threads` > 1);
    /// `sock` is None then.
    pub io: Option<IoLink>,
}

/// A client whose socket an I/O thread owns (`iothread.rs`), as the
/// executor sees it.
#[derive(Debug)]
pub struct IoLink {
    /// The thread's index.
    pub thread: usize,
    /// Reply bytes handed to the thread and not yet written, and the
    /// memory of their buffers.
    pub queued: std::sync::Arc<crate::iothread::Queued>,
    /// A Unix domain socket (CLIENT LIST's `U` flag).
    pub unix: bool,
    /// A tls-port client (the thread holds its TLS session).
    pub tls: bool,
    /// What the executor last asked: read (true) or not.
    pub reading: bool,
    /// The thread saw the end of the stream.
    pub eof: bool,
    /// The socket was asked back (`ToIo::GiveBack`) and has not come yet.
    pub returning: bool,
    /// Input bytes taken from the thread since the last `ToIo::Grant`; the
    /// thread stops reading at `iothread::READ_WINDOW` of them.
    pub delivered: usize,
    /// Requests the thread parsed, not yet run or passed by
    /// (`net::parse_one`).
    pub reqs: std::collections::VecDeque<crate::iothread::Req>,
    /// Stream offset of the query buffer's first byte (the stream counted
    /// from the first byte the thread read).
    pub qbase: u64,
    /// Heap bytes of the arguments in `reqs` (`Client::memory` counts them
    /// with the queue's room: a blocked client's parsed requests are its
    /// memory as much as the bytes they were parsed from).
    reqs_heap: usize,
}

impl IoLink {
    /// A link to thread `thread`.
    pub fn new(thread: usize, unix: bool) -> IoLink {
        IoLink { thread, queued: Default::default(), unix, tls: false, reading: true, eof: false, returning: false, delivered: 0, reqs: Default::default(), qbase: 0, reqs_heap: 0 }
    }

    /// Queues the requests the thread parsed in its last input.
    pub fn push_reqs(&mut self, reqs: Vec<crate::iothread::Req>) {
        self.reqs_heap += reqs.iter().map(Self::req_heap).sum::<usize>();
        if self.reqs.is_empty() {
            self.reqs = reqs.into();
        } else {
            self.reqs.extend(reqs);
        }
    }

    /// Takes the first queued request.
    pub fn pop_req(&mut self) -> Option<crate::iothread::Req> {
        let r = self.reqs.pop_front()?;
        self.reqs_heap -= Self::req_heap(&r);
        Some(r)
    }

    /// Bytes the queued requests hold: the queue's room and their arguments.
    pub fn reqs_mem(&self) -> usize {
        self.reqs.capacity() * std::mem::size_of::<crate::iothread::Req>() + self.reqs_heap
    }

    fn req_heap(r: &crate::iothread::Req) -> usize {
        r.argv.capacity() * std::mem::size_of::<Vec<u8>>() + r.argv.iter().map(Vec::capacity).sum::<usize>()
    }

    /// Reply bytes the thread holds.
    pub fn queued(&self) -> usize {
        self.queued.bytes()
    }
}

/// A file sent to a client in slices, so that it never sits in the reply
/// buffer whole: a replica's full-sync image can be far larger than the
/// replica output buffer limit, and a copy of it per replica would double
/// the primary's memory.
#[derive(Debug)]
pub struct Bulk {
    /// The open file (it may already be unlinked).
    pub file: std::fs::File,
    /// Bytes of it sent so far.
    pub read: u64,
    /// Where the file ends.
    pub end: BulkEnd,
    /// Bytes sent after the file (the EOF mark of a diskless transfer).
    pub suffix: Vec<u8>,
}

/// Where a bulk file ends.
#[derive(Debug)]
pub enum BulkEnd {
    /// A finished file of this many bytes.
    Size(u64),
    /// A file still being written (a diskless sync's image as the save
    /// produces it): the writer's progress bounds what may be read.
    Growing(std::sync::Arc<crate::bgsave::Progress>),
}

impl Bulk {
    /// `file`, sent from its first byte up to `end`, then `suffix`.
    pub fn new(file: std::fs::File, end: BulkEnd, suffix: Vec<u8>) -> Bulk {
        Bulk { file, read: 0, end, suffix }
    }

    /// True while the file is still being written.
    pub fn growing(&self) -> bool {
        matches!(self.end, BulkEnd::Growing(_))
    }
}

/// Bytes of a bulk file read into the reply buffer at a time.
const BULK_SLICE: usize = 256 * 1024;

impl Client {
    /// Tops the reply buffer up from `bulk` once all of it was written:
    /// one slice of the file, or the suffix once the file is through
    /// (then `bulk` ends). Returns false when there was nothing to add.
    ///
    /// Errors: reading the file failed or it ended early.
    pub fn refill_bulk(&mut self) -> std::io::Result<bool> {
        use std::io::Read;
        if self.sent < self.reply.buf.len() {
            return Ok(false);
        }
        let Some(b) = self.bulk.as_mut() else { return Ok(false) };
        let avail = match &b.end {
            BulkEnd::Size(size) => size - b.read,
            BulkEnd::Growing(p) => match p.get() {
                (written, _) if written > b.read => written - b.read,
                (_, true) => 0,
                // Caught up with the writer: more comes later.
                (_, false) => return Ok(false),
            },
        };
        if avail == 0 {
            let suffix = std::mem::take(&mut b.suffix);
            self.reply.raw(&suffix);
            self.bulk = None;
            return Ok(!suffix.is_empty());
        }
        let want = (avail as usize).min(BULK_SLICE);
        let start = self.reply.buf.len();
        self.reply.buf.resize(start + want, 0);
        let got = b.file.read(&mut self.reply.buf[start..]);
        let n = match got {
            Ok(0) => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file ended early")),
            Ok(n) => Ok(n),
            Err(e) => Err(e),
        };
        self.reply.buf.truncate(start + *n.as_ref().unwrap_or(&0));
        let n = n?;
        b.read += n as u64;
        Ok(true)
    }

    /// A fresh connection.
    pub fn new(id: ClientId, sock: Option<Conn>, addr: String, laddr: String) -> Client {
        let now = Instant::now();
        Client {
            id,
            fd: sock.as_ref().map_or(-1, Conn::raw_fd),
            sock,
            tls: None,
            addr,
            laddr,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            qbuf: Vec::new(),
            qpos: 0,
            parser: Parser::new(),
            reply: Reply::new(),
            reply_room: ReplyRoom::new(now),
            argv_mem: 0,
            sent: 0,
            multi: None,
            multi_error: false,
            in_exec: false,
            in_script: false,
            watched: Vec::new(),
            dirty_cas: false,
            close_after_reply: false,
            close_asap: false,
            monitor: false,
            reply_mode: ReplyMode::On,
            no_evict: false,
            no_touch: false,
            created: now,
            last_interaction: now,
            last_cmd: "NULL",
            net_in: 0,
            net_out: 0,
            commands: 0,
            qbuf_peak: 0,
            qbuf_want: 0,
            paused: false,
            peer_closed: false,
            blocked: false,
            readonly: false,
            capa_redirect: false,
            asking: false,
            slot_import: false,
            slot_export: false,
            cur_cmd_len: 0,
            pubsub: None,
            tracking: None,
            user: None,
            authenticated: true,
            repl_role: ReplRole::None,
            repl_cmd: Vec::new(),
            woff: 0,
            qbuf_shared: false,
            mem_counted: 0,
            obuf_soft_since: None,
            bulk: None,
            io: None,
        }
    }

    /// True for a client with a connection (its own socket or one an I/O
    /// thread holds); false for internal clients (scripts, AOF loading).
    pub fn connected(&self) -> bool {
        self.sock.is_some() || self.io.is_some()
    }

    /// True for a client that came through tls-port, whichever thread
    /// holds its session.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some() || self.io.as_ref().is_some_and(|l| l.tls)
    }

    /// True once nothing of the reply waits on the executor's side: for a
    /// client on an I/O thread, what was handed over is the thread's to
    /// write before it closes the socket.
    pub fn out_settled(&self) -> bool {
        match &self.io {
            Some(_) => self.reply.buf.len() == self.sent,
            None => self.pending_out() == 0,
        }
    }

    /// Bytes held by the commands MULTI queued (CLIENT LIST `multi-mem`):
    /// each argument with its vector header, each command's vector.
    pub fn multi_mem(&self) -> usize {
        self.multi.as_ref().map_or(0, |queued| queued.iter().map(|argv| VEC + argv.iter().map(|a| VEC + a.capacity()).sum::<usize>()).sum())
    }

    /// The memory this connection holds (CLIENT LIST `tot-mem`, what
    /// maxmemory-clients limits): the client itself, its query buffer's
    /// allocation (the shared read buffer's while it holds it), the
    /// arguments of a half-read request or of the command it is blocked
    /// in, its reply buffer, the
    /// commands MULTI queued, and its share of the WATCH, Pub/Sub and
    /// tracking-prefix tables (the name and one entry on each side).
    pub fn memory(&self) -> usize {
        self.memory_with_qbuf(self.qbuf.capacity())
    }

    /// `memory` as it stands once the running client's turn ends: the
    /// shared read buffer goes back to the event loop and the client keeps
    /// only a copy of an unfinished request (what eviction counts, as Redis
    /// counts a client after its command, not while it holds the buffer).
    pub fn memory_kept(&self) -> usize {
        let qbuf = if self.qbuf_shared {
            self.qbuf.len().saturating_sub(self.qpos).max(self.qbuf_want)
        } else if self.qbuf.len() == self.qpos && self.parser.is_idle() {
            // Drained: the event loop drops it after the turn (an I/O
            // thread's client is handed a new buffer with each input).
            0
        } else {
            self.qbuf.capacity()
        };
        self.memory_with_qbuf(qbuf)
    }

    /// The reply's share of `memory`: the reply buffer's allocation, or,
    /// for a client of an I/O thread, the allocation of the buffers the
    /// thread is still writing (a buffer half written holds all of it)
    /// and the bytes not yet handed over, when that is more. The buffer
    /// handed over is replaced by one as large, so counting both would
    /// make the client weigh more while its thread writes, and a cron
    /// recount in that moment evict one client too many. Both are counted
    /// as the allocator's size classes: the room counted as its capacity
    /// weighed less than the same buffer held by the thread (a 2,088-byte
    /// buffer is a 2,560-byte class), and a recount while the thread held
    /// it evicted one client too many.
    fn reply_mem(&self) -> usize {
        let room = storage::encoding::alloc_size(self.reply.buf.capacity());
        match &self.io {
            Some(l) => room.max(l.queued.held() + self.reply.buf.len() - self.sent),
            None => room,
        }
    }

    fn memory_with_qbuf(&self, qbuf: usize) -> usize {
        let entry = |name: &Vec<u8>| 2 * (VEC + name.len()) + TABLE_ENTRY;
        let watched: usize = self.watched.iter().map(|(_, k, _)| entry(k)).sum();
        let subs: usize = self.pubsub.as_deref().map_or(0, |s| s.channels.iter().chain(&s.patterns).chain(&s.shard).map(entry).sum::<usize>() + std::mem::size_of::<Subscriptions>());
        let prefixes: usize = self.tracking.as_deref().map_or(0, |t| t.prefixes.iter().map(entry).sum::<usize>() + std::mem::size_of::<ClientTracking>());
        std::mem::size_of::<Client>()
            + qbuf
            + self.parser.pending_mem()
            + self.argv_mem
            + self.reply_mem()
            + self.io.as_ref().map_or(0, IoLink::reqs_mem)
            + self.multi_mem()
            + watched
            + subs
            + prefixes
    }

    /// Bytes of reply not yet written; a TLS client whose session still
    /// holds ciphertext, or one with a bulk file still to send, counts one
    /// more, so that it is not closed before that leaves.
    pub fn pending_out(&self) -> usize {
        self.reply.buf.len() - self.sent + self.io.as_ref().map_or(0, IoLink::queued) + usize::from(self.tls.as_ref().is_some_and(|t| t.wants_write())) + usize::from(self.bulk.is_some())
    }

    /// The RESP version (2 or 3).
    pub fn resp(&self) -> u8 {
        if self.reply.resp3 {
            3
        } else {
            2
        }
    }

    /// The ACL user's name (`default` for internal clients).
    pub fn user_name(&self) -> String {
        self.user.as_ref().map_or_else(|| "default".to_string(), |u| u.borrow().name.clone())
    }

    /// Client flags as CLIENT LIST prints them.
    pub fn flags(&self) -> String {
        let mut f = String::new();
        match self.repl_role {
            ReplRole::Replica => f.push('S'),
            ReplRole::Primary => f.push('M'),
            ReplRole::None => {}
        }
        // Redis 8.4: the connections of atomic slot migration, migrating
        // (the source's end) and importing (the destination's).
        if self.slot_export {
            f.push('g');
        }
        if self.slot_import {
            f.push('o');
        }
        if self.pubsub.is_some() {
            f.push('P');
        }
        if self.multi.is_some() {
            f.push('x');
        }
        if self.blocked {
            f.push('b');
        }
        if let Some(t) = self.tracking.as_deref() {
            f.push('t');
            if t.broken_redirect {
                f.push('R');
            }
            if t.bcast {
                f.push('B');
            }
        }
        if !self.watched.is_empty() {
            f.push('w');
        }
        if self.dirty_cas {
            f.push('d');
        }
        if self.monitor {
            f.push('O');
        }
        if self.close_after_reply {
            f.push('c');
        }
        // Redis's order from here: U, r, e, T.
        if self.sock.as_ref().is_some_and(Conn::is_unix) || self.io.as_ref().is_some_and(|l| l.unix) {
            f.push('U');
        }
        if self.readonly {
            f.push('r');
        }
        if self.no_evict {
            f.push('e');
        }
        if self.no_touch {
            f.push('T');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }

    /// One CLIENT LIST / CLIENT INFO line (without the trailing newline).
    pub fn info_line(&self, now: Instant) -> String {
        self.info_line_with(now, 0)
    }

    /// `info_line` for a replica with `stream` bytes of the replication
    /// stream not sent yet: they count in its `omem` and `tot-mem`, as the
    /// shared buffer holds them for it.
    pub fn info_line_with(&self, now: Instant, stream: u64) -> String {
        let stream = stream as usize;
        let name = self.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        let lib_name = self.lib_name.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        let lib_ver = self.lib_ver.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        let multi = self.multi.as_ref().map(|m| m.len() as i64).unwrap_or(-1);
        let qbuf = self.qbuf.len() - self.qpos + self.cur_cmd_len;
        let pending = self.reply.buf.len() - self.sent + self.io.as_ref().map_or(0, IoLink::queued);
        // A normal or Pub/Sub client's output as its limit counts it
        // (obuf.rs); a replica's is the stream held for it.
        let (obl, oll, omem) = if self.repl_role == ReplRole::None {
            (pending.min(REPLY_BUF_FREE), reply_blocks(pending), reply_usage(pending) as usize)
        } else {
            (0, 0, pending + stream)
        };
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} watch={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={} io-thread={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            name,
            now.duration_since(self.created).as_secs(),
            now.duration_since(self.last_interaction).as_secs(),
            self.flags(),
            self.db,
            self.pubsub.as_ref().map_or(0, |s| s.channels.len()),
            self.pubsub.as_ref().map_or(0, |s| s.patterns.len()),
            self.pubsub.as_ref().map_or(0, |s| s.shard.len()),
            multi,
            self.watched.len(),
            qbuf,
            self.qbuf.capacity() - self.qbuf.len(),
            self.argv_mem + self.parser.pending_len(),
            self.multi_mem(),
            self.reply_room.size,
            self.reply_room.peak,
            obl,
            oll,
            omem,
            self.memory() + stream,
            self.last_cmd,
            self.user_name(),
            self.tracking.as_ref().map_or(-1, |t| t.redirect as i64),
            self.resp(),
            lib_name,
            lib_ver,
            self.io.as_ref().map_or(0, |l| l.thread + 1)
        )
    }
}

/// The connected clients by id, but for the ones taken out to be served.
///
/// A client is served out of the map (the server and the client are
/// borrowed apart); `take` and `put` leave its entry in place, empty
/// meanwhile, so that serving a request costs two lookups instead of a
/// removal and an insertion (about 80 instructions a GET at pipeline
/// depth 1). An empty entry is as absent to every other method. Every
/// `take` is followed by a `put` of the same client; a client that leaves
/// for good goes through `remove`.
#[derive(Default)]
pub struct Clients {
    map: rustc_hash::FxHashMap<ClientId, Option<Box<Client>>>,
    /// Entries that hold a client.
    present: usize,
}

impl Clients {
    pub fn get(&self, id: &ClientId) -> Option<&Client> {
        self.map.get(id)?.as_deref()
    }

    pub fn get_mut(&mut self, id: &ClientId) -> Option<&mut Client> {
        self.map.get_mut(id)?.as_deref_mut()
    }

    pub fn contains_key(&self, id: &ClientId) -> bool {
        self.get(id).is_some()
    }

    /// Adds `c` as `id`; returns the client it replaces.
    pub fn insert(&mut self, id: ClientId, c: Box<Client>) -> Option<Box<Client>> {
        let old = self.map.insert(id, Some(c)).flatten();
        if old.is_none() {
            self.present += 1;
        }
        old
    }

    /// Takes the client out for good.
    pub fn remove(&mut self, id: &ClientId) -> Option<Box<Client>> {
        let c = self.map.remove(id).flatten();
        if c.is_some() {
            self.present -= 1;
        }
        c
    }

    /// Takes the client out to serve it, leaving its entry for `put`.
    pub fn take(&mut self, id: &ClientId) -> Option<Box<Client>> {
        let c = self.map.get_mut(id)?.take();
        if c.is_some() {
            self.present -= 1;
        }
        c
    }

    /// Puts back a client `take` gave (its entry may be gone since).
    pub fn put(&mut self, id: ClientId, c: Box<Client>) {
        match self.map.get_mut(&id) {
            Some(slot @ None) => {
                *slot = Some(c);
                self.present += 1;
            }
            _ => {
                self.insert(id, c);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.present
    }

    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    pub fn keys(&self) -> impl Iterator<Item = &ClientId> {
        self.map.iter().filter(|(_, c)| c.is_some()).map(|(id, _)| id)
    }

    pub fn values(&self) -> impl Iterator<Item = &Client> {
        self.map.values().filter_map(|c| c.as_deref())
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Client> {
        self.map.values_mut().filter_map(|c| c.as_deref_mut())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ClientId, &Client)> {
        self.map.iter().filter_map(|(id, c)| Some((id, c.as_deref()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: ClientId) -> Box<Client> {
        Box::new(Client::new(id, None, String::new(), String::new()))
    }

    fn ids(cs: &Clients) -> Vec<ClientId> {
        let mut v: Vec<ClientId> = cs.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// A client taken out to be served is absent to every method until
    /// put back, as one removed would be; putting back one whose entry was
    /// removed meanwhile (closed while served) inserts it again.
    #[test]
    fn a_taken_client_is_absent_until_put_back() {
        let mut cs = Clients::default();
        for id in 1..=3 {
            assert!(cs.insert(id, client(id)).is_none());
        }
        let c = cs.take(&2).expect("present");
        assert_eq!(c.id, 2);
        assert!(cs.take(&2).is_none() && cs.get(&2).is_none() && cs.get_mut(&2).is_none() && !cs.contains_key(&2));
        assert_eq!((cs.len(), ids(&cs)), (2, vec![1, 3]));
        assert_eq!(cs.values().count() + cs.iter().count() + cs.values_mut().count(), 6);
        cs.put(2, c);
        assert_eq!((cs.len(), ids(&cs)), (3, vec![1, 2, 3]));
        assert_eq!(cs.get(&2).map(|c| c.id), Some(2));

        let c = cs.take(&3).expect("present");
        assert!(cs.remove(&3).is_none(), "the empty entry holds no client");
        assert_eq!(cs.len(), 2);
        cs.put(3, c);
        assert_eq!((cs.len(), ids(&cs)), (3, vec![1, 2, 3]));

        assert_eq!(cs.remove(&1).map(|c| c.id), Some(1));
        assert!(cs.take(&1).is_none() && cs.remove(&1).is_none());
        assert_eq!((cs.len(), ids(&cs), cs.is_empty()), (2, vec![2, 3], false));
    }

    /// A client of an I/O thread whose reply buffer keeps its room
    /// (DEBUG REPLYBUFFER RESIZING 0) weighs the same with its reply in
    /// its own buffer, with the buffer handed to the thread (and one as
    /// large in its place), and once the thread freed it, whatever the
    /// buffer's capacity: the room and the buffer held are both weighed
    /// as the size class the allocator gives them.
    #[test]
    fn a_reply_weighs_the_same_before_during_and_after_its_hand_over() {
        for room in [16, 100, 2088, 16 * 1024, 70_001] {
            let mut c = client(1);
            c.io = Some(IoLink::new(0, false));
            c.reply.buf = Vec::with_capacity(room);
            c.reply.buf.extend(std::iter::repeat_n(b'x', room / 2));
            let before = c.memory();
            let buf = std::mem::replace(&mut c.reply.buf, Vec::with_capacity(room));
            let link = c.io.as_ref().expect("link");
            link.queued.add(buf.len(), storage::encoding::alloc_size(buf.capacity()));
            let during = c.memory();
            c.io.as_mut().expect("link").queued = Default::default();
            let after = c.memory();
            assert_eq!((before, during, after), (before, before, before), "room {room}");
        }
    }
}
