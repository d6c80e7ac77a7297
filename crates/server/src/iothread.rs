//! I/O threads (`io-threads N`, N > 1): N - 1 threads that own client
//! sockets, read them and write replies, so that the executor thread
//! spends its time running commands, not in system calls.
//!
//! The model is Redis 8's: each client belongs to one I/O thread (the one
//! holding the fewest clients when it connected, or when it moved); the
//! executor keeps the `Client` with all its command state. Every hand-off
//! is a batch: an I/O thread sends, at the end of its turn, everything it
//! read (one `Input` per client); the executor sends each thread, once per
//! loop turn, the replies of every client that got some (the reply buffer
//! itself, moved, not copied) and the control messages (close, stop/resume
//! reading, give the socket back). A batch wakes its reader only if the
//! reader sleeps (`Doorbell`). No lock is taken per command on either
//! side: the executor's queues to the threads are std's channels, which
//! push and pop without a lock; the threads' queue to the executor is a
//! vector under a lock taken once per batch (`Inbox`, which says why).
//!
//! The command itself stays on the executor: requests reach it as the
//! bytes that came, appended to the client's query buffer, so that every
//! rule that reads that buffer (CLIENT PAUSE rewinding a request, a
//! blocked client's later requests, the query buffer limit, a primary's
//! stream counted as it came) is the single-threaded one. With the bytes
//! go the requests the thread parsed in them (`Req`, positioned in the
//! stream), which the executor takes where its own parser would have
//! parsed the same bytes (`Index`).
//!
//! A client that needs the executor's own loop for its socket (a replica
//! being fed the replication stream or an image file, a slot-export link)
//! is moved back: `GiveBack` returns the socket with what was not yet
//! written, which goes out before anything the executor adds.
//!
//! The number of threads changes at run time (CONFIG SET io-threads):
//! threads are appended, or the last ones retire. A retiring thread gets
//! no new client and has its clients asked back (`GiveBack`, as above);
//! it ends once it holds none, and only from the end of the vector, so a
//! live thread's index, which clients hold, never changes. Growing again
//! makes retiring threads live before any is started. `end_retired` hands
//! the executor the counters of the threads it ended, which it adds to
//! its totals, so INFO's never go back.
//!
//! This module knows sockets and queues, nothing of the server.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mio::{Events, Interest, Poll, Token, Waker};

use crate::cmdname::{Names, SpecAt};
use crate::conn::Conn;
use crate::tls::Session;

/// A client's id (the executor's `ClientId`).
pub type Id = u64;

/// A thread's own waker token; client ids stay below.
const WAKE: Token = Token(usize::MAX);
/// Most bytes read from one client in one turn before the thread serves
/// its other clients (it comes back to this one in the next turn).
const READ_PER_TURN: usize = 64 * 1024;
/// Input bytes a thread hands over for one client before the executor
/// grants more (`ToIo::Grant`, sent when it has taken them in): without
/// this window a thread reads on while the executor is busy, and a client
/// that pipelines without reading its replies filled the query buffer with
/// a hundred megabytes before the executor could ask the thread to stop.
pub const READ_WINDOW: usize = 1024 * 1024;
/// Read chunk size.
const CHUNK: usize = 16 * 1024;
/// Most buffers one vectored write hands the kernel.
const MAX_IOV: usize = 64;

/// What the executor asks of an I/O thread.
pub enum ToIo {
    /// Serve this connection from now on; `queued` counts the reply bytes
    /// handed over and not yet written (the executor reads it for output
    /// limits, the thread lowers it as it writes).
    Adopt { id: Id, conn: Conn, tls: Option<Box<Session>>, queued: Arc<Queued> },
    /// Write these reply bytes after those handed over before; `class` is
    /// the buffer's allocation, counted in `IoThreads::in_transit`.
    Write { id: Id, buf: Vec<u8>, class: usize },
    /// Stop reading (false) or read again (true).
    Reading { id: Id, on: bool },
    /// The executor took in what was read: another `READ_WINDOW` may come.
    /// `idle_at`: the stream offset at which the executor's parser stands
    /// between requests with nothing buffered, or `u64::MAX`; a thread
    /// that stopped indexing this client's requests starts again there.
    Grant { id: Id, idle_at: u64 },
    /// Close the connection: after writing what is queued (`flush`), or at
    /// once, dropping it.
    Close { id: Id, flush: bool },
    /// Hand the socket back (`FromIo::Returned`).
    GiveBack { id: Id },
    /// Argument vectors of requests this thread parsed, run since: its
    /// parser fills them again (`resp::spare`). What a thread allocates it
    /// thus frees; the executor, freeing them, only ever freed memory that
    /// other threads allocated, and spent a tenth of its time at -P 16
    /// handing it back to their arenas.
    Spare { argvs: Vec<Vec<Vec<u8>>> },
    /// Write what can be written without waiting, then end the thread.
    Exit,
}

/// One client's reply bytes handed to its thread and not yet written, and
/// the memory of the buffers holding them: the executor adds to both as it
/// hands a buffer over (`net::hand_over`), the thread takes off the bytes
/// as the socket takes them and a buffer's allocation once it is written
/// out. The allocation is what the client weighs (`Client::memory`): a
/// buffer half written still holds all of it.
#[derive(Debug, Default)]
pub struct Queued {
    bytes: AtomicUsize,
    held: AtomicUsize,
}

impl Queued {
    /// Counts a buffer handed over: `bytes` to write, `class` its
    /// allocation (`storage::encoding::alloc_size` of its capacity).
    pub fn add(&self, bytes: usize, class: usize) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.held.fetch_add(class, Ordering::Relaxed);
    }

    /// Bytes not yet written.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Bytes allocated for the buffers not yet written out.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    fn written(&self, n: usize) {
        self.bytes.fetch_sub(n, Ordering::Relaxed);
    }

    /// A buffer of capacity `room` is written out (and freed).
    fn freed(&self, room: usize) {
        self.held.fetch_sub(storage::encoding::alloc_size(room), Ordering::Relaxed);
    }

    fn clear(&self) {
        self.bytes.store(0, Ordering::Relaxed);
        self.held.store(0, Ordering::Relaxed);
    }
}

/// What an I/O thread tells the executor.
pub enum FromIo {
    /// Bytes the client sent, in order, with the complete requests the
    /// thread parsed in them (`Req`; maybe none).
    Input { id: Id, buf: Vec<u8>, reqs: Vec<Req> },
    /// The client closed its end: nothing more will be read.
    Eof { id: Id },
    /// The connection failed (reset, write error): it is to be closed.
    Failed { id: Id },
    /// Every reply byte handed over was written, after the socket had
    /// stopped taking them: the client may be served again (back-pressure
    /// lifted).
    Drained { id: Id },
    /// The socket, as asked by `GiveBack`, with the reply bytes not yet
    /// written.
    Returned { id: Id, conn: Conn, tls: Option<Box<Session>>, unwritten: Vec<u8> },
}

/// A request an I/O thread parsed: where it starts and ends in the
/// client's stream (bytes counted from the first one read), its
/// arguments and where its command is in the server's table. The executor
/// runs it in place of parsing those bytes itself when its own parser
/// stands, idle, at `start` (see `Index`).
#[derive(Debug)]
pub struct Req {
    /// Stream offset of its first byte.
    pub start: u64,
    /// Stream offset just past its last byte.
    pub end: u64,
    /// The arguments, as `resp::Parser` returns them.
    pub argv: Vec<Vec<u8>>,
    /// Its command's place in the table (`Names::find_at`), None for an
    /// unknown one: the executor does not look it up again.
    pub at: Option<SpecAt>,
}

/// Largest unfinished request (its bytes so far) a thread keeps to parse
/// once the rest comes; past it the thread stops indexing the client (the
/// executor parses, as always) until told where the executor's parser is
/// idle. A complete request is at most this plus one turn's read.
const TAIL_MAX: usize = 64 * 1024;

/// A thread's parser over one client's stream.
///
/// The executor remains the only judge of what a request is: a `Req` is
/// used only where its start is where the executor's own parser stands
/// between requests, so any error here (a request split oddly, a limit
/// the thread does not know) costs only the parsing it would have saved.
/// The thread parses with no limit but `TAIL_MAX` on what it buffers; the
/// executor checks a request against its own limits before using it.
#[derive(Debug, Default)]
struct Index {
    parser: resp::Parser,
    /// The unparsed end of the last input (an unfinished request).
    tail: Vec<u8>,
    /// Stream bytes handed over so far.
    read: u64,
    /// Stream offset where the request being parsed started.
    req_start: u64,
    /// False after a protocol error or an unfinished request past
    /// `TAIL_MAX`: the thread does not know where requests start.
    lost: bool,
}

const INDEX_LIMITS: resp::Limits = resp::Limits { max_bulk_len: i64::MAX, unauthenticated: false };

impl Index {
    /// Parses `got`, the next bytes of the stream, pushing the complete
    /// requests found to `reqs`.
    fn scan(&mut self, got: &[u8], reqs: &mut Vec<Req>, names: &Names) {
        let base = self.read - self.tail.len() as u64;
        self.read += got.len() as u64;
        if self.lost {
            return;
        }
        let mut joined = std::mem::take(&mut self.tail);
        let buf: &[u8] = if joined.is_empty() {
            got
        } else {
            joined.extend_from_slice(got);
            &joined
        };
        let mut pos = 0;
        loop {
            if self.parser.is_idle() {
                self.req_start = base + pos as u64;
            }
            match self.parser.parse(buf, &mut pos, &INDEX_LIMITS) {
                Ok(resp::Parsed::Command(argv)) => {
                    let at = argv.first().and_then(|name| names.find_at(name));
                    reqs.push(Req { start: self.req_start, end: base + pos as u64, argv, at });
                }
                // What the unfinished request holds so far (its arguments
                // read, in the parser, and the rest in `tail`) is bounded.
                Ok(resp::Parsed::Incomplete { .. }) if self.read - self.req_start <= TAIL_MAX as u64 => {
                    // A fresh buffer, never the joined one: it would keep
                    // a whole read's capacity for the client's life.
                    self.tail = buf[pos..].to_vec();
                    return;
                }
                _ => {
                    self.lose();
                    return;
                }
            }
        }
    }

    fn lose(&mut self) {
        self.lost = true;
        self.parser = resp::Parser::new();
        self.tail = Vec::new();
    }

    /// The executor's parser is idle at stream offset `at` with nothing
    /// left to parse: if nothing was read since, requests start here.
    fn found(&mut self, at: u64) {
        if self.lost && at == self.read {
            self.lost = false;
        }
    }
}

/// Whether a queue's reader sleeps in its poller, and how many batches
/// wait in the queue: a writer wakes the reader only when it sleeps. A
/// wake is a system call that also takes the reader's run-queue lock; at
/// pipeline depth 1 the executor's wakes of busy threads were about a
/// sixth of its busy time.
///
/// The reader announces the sleep, then looks at the count; a writer
/// counts its batch, then looks at the announcement (both sequentially
/// consistent): one of the two sees the other, so a batch never waits
/// behind a sleep.
#[derive(Debug, Default)]
pub struct Doorbell {
    asleep: AtomicBool,
    waiting: AtomicUsize,
}

impl Doorbell {
    /// A writer queued a batch: true if the reader is to be woken.
    pub fn rang(&self) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        self.asleep.load(Ordering::SeqCst)
    }

    /// The reader took a batch.
    pub fn took(&self) {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }

    /// The reader is about to sleep: false if a batch waits (poll without
    /// sleeping, and take it).
    pub fn park(&self) -> bool {
        self.asleep.store(true, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.asleep.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// The reader is awake again.
    pub fn unpark(&self) {
        self.asleep.store(false, Ordering::Relaxed);
    }
}

/// One thread's counters, for INFO (Redis 8's per-thread line).
#[derive(Debug, Default)]
pub struct Stats {
    /// Clients it serves.
    pub clients: AtomicUsize,
    /// Reads that returned data.
    pub reads: AtomicU64,
    /// Writes that took data.
    pub writes: AtomicU64,
}

struct Handle {
    tx: Sender<Vec<ToIo>>,
    waker: Arc<Waker>,
    bell: Arc<Doorbell>,
    stats: Arc<Stats>,
    batch: Vec<ToIo>,
    /// Argument vectors to go back with the next batch (`ToIo::Spare`).
    spare: Vec<Vec<Vec<u8>>>,
    join: Option<JoinHandle<()>>,
}

/// The I/O threads, as the executor holds them.
pub struct IoThreads {
    threads: Vec<Handle>,
    /// Clients given to each thread and not yet closed or given back, as
    /// the executor counts them (the threads' own counts lag behind).
    assigned: Vec<usize>,
    /// Threads below this index are live; the others retire (`resize`).
    live: usize,
    /// What every thread wakes the executor with, kept to start more.
    executor: Arc<Waker>,
    /// The command names every thread finds requests' commands by.
    names: Arc<Names>,
    inbox: Arc<Inbox>,
    /// The executor's side of `inbox`.
    bell: Arc<Doorbell>,
    /// The batches last taken from `inbox`, emptied as they are run; kept
    /// for its room, which goes back to the inbox in the next swap.
    taken: Vec<Vec<FromIo>>,
    /// Bytes allocated for the reply buffers handed over (`write`) that
    /// their thread has not yet tried to write (`in_transit`).
    transit: Arc<AtomicUsize>,
}

/// Batches the inbox and the executor's side of it have room for from the
/// start. The two vectors swap at each take, so their room grew with
/// however many batches happened to wait at once: used_memory then moved
/// by a few hundred bytes with the timing of a pipeline, not its data.
const INBOX_ROOM: usize = 64;

/// The threads' batches for the executor, in the order they came.
///
/// A vector under a lock, not a channel, because used_memory must be
/// exact when the executor reads it: a thread publishes its allocations
/// (`memory::publish_thread`) while it holds the lock it queued its batch
/// under, so the executor, which takes batches under the same lock, has
/// always seen what a thread allocated before the requests that followed.
/// A channel allocates its next block inside `send`, after the thread
/// published, and the executor frees the block before it: every 31st
/// batch, used_memory read 1 KiB low until that thread's next turn. The
/// lock is taken once per batch on each side and is rarely contended.
#[derive(Default)]
struct Inbox {
    batches: Mutex<Vec<Vec<FromIo>>>,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<FromIo>>> {
        // Nothing under the lock can panic halfway: a poisoned queue is whole.
        self.batches.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for IoThreads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IoThreads({})", self.threads.len())
    }
}

impl IoThreads {
    /// Starts `n` threads (named `io_thd_1` ...), each waking the executor
    /// through `executor` once per turn that had something for it and
    /// finding requests' commands in `names`.
    ///
    /// Errors: a poller, a waker or a thread could not be created.
    pub fn start(n: usize, executor: Arc<Waker>, names: Arc<Names>) -> io::Result<IoThreads> {
        let mut io = IoThreads { threads: Vec::with_capacity(n), assigned: Vec::with_capacity(n), live: 0, executor, names, inbox: Arc::new(Inbox { batches: Mutex::new(Vec::with_capacity(INBOX_ROOM)) }), bell: Arc::new(Doorbell::default()), taken: Vec::with_capacity(INBOX_ROOM), transit: Arc::default() };
        if let Err(e) = io.resize(n) {
            io.stop();
            return Err(e);
        }
        Ok(io)
    }

    /// Appends one thread, named after its index.
    fn spawn(&mut self) -> io::Result<()> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(Stats::default());
        let bell = Arc::new(Doorbell::default());
        let mut worker = Box::new(Worker { poll, rx, bell: bell.clone(), inbox: self.inbox.clone(), executor: self.executor.clone(), executor_bell: self.bell.clone(), stats: stats.clone(), names: self.names.clone(), peers: Default::default(), out: Vec::new(), scratch: vec![0; CHUNK].into_boxed_slice(), published: 0, transit: self.transit.clone(), tried: 0 });
        let join = std::thread::Builder::new().name(format!("io_thd_{}", self.threads.len() + 1)).spawn(move || {
            // First, so that its destructor runs after the others (std runs
            // them last registered first).
            crate::memory::publish_at_exit(0);
            crate::affinity::pin(crate::affinity::Role::Server);
            worker.run();
            // What it frees last (its buffers, its poller's, the closure
            // std frees after this) counts too: a thread can end while the
            // server runs on (CONFIG SET).
            let mut published = worker.published;
            drop(worker);
            crate::memory::publish_thread(&mut published);
            crate::memory::publish_at_exit(published);
        })?;
        self.threads.push(Handle { tx, waker, bell, stats, batch: Vec::new(), spare: Vec::new(), join: Some(join) });
        self.assigned.push(0);
        Ok(())
    }

    /// Makes `n` threads live: retiring ones live again first, then new
    /// ones; or, with fewer, retires the last ones (they take no new
    /// client; the caller asks their clients back, and `end_retired` ends
    /// them once empty).
    ///
    /// Errors: a thread could not be started; the live ones stay as they
    /// were (any started meanwhile retire at once, holding nobody).
    pub fn resize(&mut self, n: usize) -> io::Result<()> {
        let before = self.live;
        self.live = n.min(self.threads.len());
        while self.threads.len() < n {
            if let Err(e) = self.spawn() {
                self.live = before;
                return Err(e);
            }
            self.live = self.threads.len();
        }
        Ok(())
    }

    /// How many threads run, retiring ones included.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// True with no thread running.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// How many threads are live (take clients).
    pub fn live(&self) -> usize {
        self.live
    }

    /// True if thread `t` retires: its clients are to come back.
    pub fn retiring(&self, t: usize) -> bool {
        t >= self.live
    }

    /// The thread a new client goes to: the live one with the fewest
    /// clients (Redis 8's choice), the first of them on a tie; counted
    /// until `release`. None while no thread is live.
    pub fn assign(&mut self) -> Option<usize> {
        let t = (0..self.live).min_by_key(|&i| self.assigned[i])?;
        self.assigned[t] += 1;
        Some(t)
    }

    /// Ends the retiring threads at the end of the vector that hold no
    /// client (none counted here, none still flushing a closed one on the
    /// thread), after sending what is queued; returns the reads and
    /// writes they had counted. A retiring thread behind a busy one waits
    /// for it, so indices of those left never change.
    pub fn end_retired(&mut self) -> (u64, u64) {
        let mut ended = Vec::new();
        while self.threads.len() > self.live {
            let t = self.threads.len() - 1;
            if self.assigned[t] > 0 || self.threads[t].stats.clients.load(Ordering::Relaxed) > 0 {
                break;
            }
            let mut h = self.threads.pop().expect("a thread past live");
            self.assigned.pop();
            h.batch.push(ToIo::Exit);
            ended.push(h);
        }
        let (mut reads, mut writes) = (0, 0);
        for mut h in ended {
            let batch = std::mem::take(&mut h.batch);
            if h.tx.send(batch).is_ok() && h.bell.rang() {
                let _ = h.waker.wake();
            }
            if let Some(j) = h.join.take() {
                let _ = j.join();
            }
            reads += h.stats.reads.load(Ordering::Relaxed);
            writes += h.stats.writes.load(Ordering::Relaxed);
        }
        (reads, writes)
    }

    /// A client of thread `t` closed or came back to the executor.
    pub fn release(&mut self, t: usize) {
        self.assigned[t] = self.assigned[t].saturating_sub(1);
    }

    /// Queues `msg` for thread `t`; it leaves with the next `send`.
    pub fn push(&mut self, t: usize, msg: ToIo) {
        self.threads[t].batch.push(msg);
    }

    /// Hands thread `t` the `bytes` of reply in `buf` for client `id`
    /// (`ToIo::Write`), counting them and the buffer's allocation in the
    /// client's `queued` and the buffer in `in_transit`.
    pub fn write(&mut self, t: usize, id: Id, buf: Vec<u8>, bytes: usize, queued: &Queued) {
        let class = storage::encoding::alloc_size(buf.capacity());
        queued.add(bytes, class);
        self.transit.fetch_add(class, Ordering::Relaxed);
        self.push(t, ToIo::Write { id, buf, class });
    }

    /// Bytes allocated for the reply buffers handed over that no thread
    /// has tried to write yet (their size classes, as used_memory counts
    /// them). The event loop writes a reply before it reads the next
    /// request; here the next request can run before the reply's thread
    /// had its turn, and eviction, counting those buffers, would evict
    /// for memory that is on its way out (the invalidations an eviction
    /// sends to tracking clients would drive it on). Bytes a thread tried
    /// and the socket did not take stay counted, as the event loop's are.
    ///
    /// A thread lowers it after it published what it freed (`flush_out`),
    /// so a caller that reads this before used_memory never counts a
    /// buffer in both (it may leave one out of both, for that moment).
    pub fn in_transit(&self) -> usize {
        self.transit.load(Ordering::Acquire)
    }

    /// Gives thread `t` back the arguments of a request it parsed, with
    /// the next batch (`ToIo::Spare`).
    pub fn give_back(&mut self, t: usize, argv: Vec<Vec<u8>>) {
        match self.threads.get_mut(t) {
            Some(h) => h.spare.push(argv),
            None => resp::spare::recycle(argv),
        }
    }

    /// Sends every thread its queued batch and wakes it if it sleeps,
    /// once per thread.
    pub fn send(&mut self) {
        for h in &mut self.threads {
            if !h.spare.is_empty() {
                // Taken whole, leaving no room behind: room kept between
                // turns would make used_memory depend on how many
                // requests the last turn ran.
                let argvs = std::mem::take(&mut h.spare);
                h.batch.push(ToIo::Spare { argvs });
            }
            if !h.batch.is_empty() {
                let batch = std::mem::take(&mut h.batch);
                if h.tx.send(batch).is_ok() && h.bell.rang() {
                    let _ = h.waker.wake();
                }
            }
        }
    }

    /// Takes what the threads sent, in the order it came.
    pub fn recv(&mut self, mut f: impl FnMut(FromIo)) {
        loop {
            {
                let mut q = self.inbox.lock();
                if q.is_empty() {
                    return;
                }
                std::mem::swap(&mut *q, &mut self.taken);
            }
            for batch in self.taken.drain(..) {
                self.bell.took();
                for m in batch {
                    f(m);
                }
            }
        }
    }

    /// The executor is about to wait in its poller: false if news from a
    /// thread already waits (so it is not to wait). Until `unpark`, a
    /// thread that sends news wakes it.
    pub fn park(&self) -> bool {
        self.bell.park()
    }

    /// The executor's wait ended.
    pub fn unpark(&self) {
        self.bell.unpark();
    }

    /// Each thread's counters, in thread order.
    pub fn stats(&self) -> impl Iterator<Item = &Stats> {
        self.threads.iter().map(|h| &*h.stats)
    }

    /// Sends what is queued, asks every thread to write what it can and
    /// end, and waits for them.
    pub fn stop(&mut self) {
        for h in &mut self.threads {
            h.batch.push(ToIo::Exit);
        }
        self.send();
        for h in &mut self.threads {
            if let Some(j) = h.join.take() {
                let _ = j.join();
            }
        }
    }
}

/// One connection as its thread holds it.
struct Peer {
    conn: Conn,
    /// The TLS session of a tls-port client: this thread decrypts,
    /// encrypts and does the handshake.
    tls: Option<Box<Session>>,
    /// Reply buffers in order; `off` bytes of the first are written.
    out: VecDeque<Vec<u8>>,
    off: usize,
    queued: Arc<Queued>,
    /// False while the executor asked not to read.
    reading: bool,
    /// A read was due while not reading: do it on resume.
    missed: bool,
    /// Bytes handed over since the executor's last grant.
    window: usize,
    /// The poller said the peer's end closed: read to the end.
    hup: bool,
    /// The end of the stream (or an error) was seen: no more reads.
    done: bool,
    /// A write would have blocked: tell the executor once it drains.
    stalled: bool,
    /// Close once `out` is written.
    closing: bool,
    /// The requests parsed in what was read.
    index: Index,
}

struct Worker {
    poll: Poll,
    rx: Receiver<Vec<ToIo>>,
    /// This thread's side of `rx`.
    bell: Arc<Doorbell>,
    inbox: Arc<Inbox>,
    executor: Arc<Waker>,
    executor_bell: Arc<Doorbell>,
    stats: Arc<Stats>,
    /// The server's command names, to find each request's command by.
    names: Arc<Names>,
    peers: rustc_hash::FxHashMap<Id, Peer>,
    out: Vec<FromIo>,
    scratch: Box<[u8]>,
    /// Net bytes last published to used_memory.
    published: i64,
    /// `IoThreads::transit`, lowered by `tried` once this turn's writes
    /// and frees are published.
    transit: Arc<AtomicUsize>,
    /// Bytes allocated for the reply buffers taken this turn.
    tried: usize,
}

impl Worker {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        let mut again: Vec<Id> = Vec::new();
        // This turn's clients to read and to write, and a set to keep each
        // once: kept from turn to turn, so a turn allocates nothing.
        let mut readable: Vec<Id> = Vec::new();
        let mut writable: Vec<Id> = Vec::new();
        let mut seen: rustc_hash::FxHashSet<Id> = Default::default();
        loop {
            let timeout = if again.is_empty() && self.bell.park() { None } else { Some(std::time::Duration::ZERO) };
            let polled = self.poll.poll(&mut events, timeout);
            self.bell.unpark();
            match polled {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
            readable.clear();
            readable.append(&mut again);
            writable.clear();
            for ev in events.iter() {
                if ev.token() == WAKE {
                    continue;
                }
                let id = ev.token().0 as Id;
                if ev.is_read_closed() || ev.is_error() {
                    if let Some(p) = self.peers.get_mut(&id) {
                        p.hup = true;
                    }
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    readable.push(id);
                }
                if ev.is_writable() {
                    writable.push(id);
                }
            }
            while let Ok(batch) = self.rx.try_recv() {
                self.bell.took();
                for m in batch {
                    match m {
                        ToIo::Adopt { id, mut conn, tls, queued } => {
                            if self.poll.registry().register(&mut conn, Token(id as usize), Interest::READABLE | Interest::WRITABLE).is_err() {
                                self.out.push(FromIo::Failed { id });
                                continue;
                            }
                            self.stats.clients.fetch_add(1, Ordering::Relaxed);
                            self.peers.insert(id, Peer { conn, tls, out: VecDeque::new(), off: 0, queued, reading: true, missed: false, window: 0, hup: false, done: false, stalled: false, closing: false, index: Index::default() });
                        }
                        ToIo::Write { id, buf, class } => {
                            self.tried += class;
                            if let Some(p) = self.peers.get_mut(&id) {
                                p.out.push_back(buf);
                                writable.push(id);
                            }
                        }
                        ToIo::Reading { id, on } => {
                            if let Some(p) = self.peers.get_mut(&id) {
                                p.reading = on;
                                if on && std::mem::take(&mut p.missed) {
                                    readable.push(id);
                                }
                            }
                        }
                        ToIo::Grant { id, idle_at } => {
                            if let Some(p) = self.peers.get_mut(&id) {
                                p.window = 0;
                                p.index.found(idle_at);
                                if p.reading && std::mem::take(&mut p.missed) {
                                    readable.push(id);
                                }
                            }
                        }
                        ToIo::Close { id, flush } => {
                            if flush {
                                if let Some(p) = self.peers.get_mut(&id) {
                                    p.closing = true;
                                    p.reading = false;
                                    writable.push(id);
                                }
                            } else {
                                self.drop_peer(id);
                            }
                        }
                        ToIo::GiveBack { id } => {
                            if let Some(mut p) = self.peers.remove(&id) {
                                let _ = self.poll.registry().deregister(&mut p.conn);
                                self.stats.clients.fetch_sub(1, Ordering::Relaxed);
                                let mut unwritten = Vec::new();
                                for (i, b) in p.out.iter().enumerate() {
                                    unwritten.extend_from_slice(if i == 0 { &b[p.off..] } else { b });
                                }
                                p.queued.clear();
                                self.out.push(FromIo::Returned { id, conn: p.conn, tls: p.tls, unwritten });
                            }
                        }
                        ToIo::Spare { argvs } => {
                            for argv in argvs {
                                resp::spare::recycle(argv);
                            }
                        }
                        ToIo::Exit => {
                            let ids: Vec<Id> = self.peers.keys().copied().collect();
                            for id in ids {
                                self.write(id);
                            }
                            self.flush_out();
                            return;
                        }
                    }
                }
            }
            // In the order the poller reported them (arrival order, which the
            // executor keeps), each client once.
            seen.clear();
            readable.retain(|id| seen.insert(*id));
            for &id in &readable {
                if self.read(id) {
                    again.push(id);
                }
            }
            writable.sort_unstable();
            writable.dedup();
            for &id in &writable {
                self.write(id);
            }
            self.flush_out();
        }
    }

    /// Sends this turn's news to the executor and wakes it if it sleeps,
    /// once; publishes this thread's allocations (used_memory counts them:
    /// the executor frees the input buffers this thread fills, and this
    /// thread frees the reply buffers the executor filled), under the
    /// inbox's lock when there is news (`Inbox` says why).
    fn flush_out(&mut self) {
        if self.out.is_empty() {
            crate::memory::publish_thread(&mut self.published);
            self.transit.fetch_sub(std::mem::take(&mut self.tried), Ordering::Release);
            return;
        }
        let batch = std::mem::take(&mut self.out);
        {
            let mut q = self.inbox.lock();
            q.push(batch);
            crate::memory::publish_thread(&mut self.published);
        }
        self.transit.fetch_sub(std::mem::take(&mut self.tried), Ordering::Release);
        if self.executor_bell.rang() {
            let _ = self.executor.wake();
        }
    }

    fn drop_peer(&mut self, id: Id) {
        if let Some(mut p) = self.peers.remove(&id) {
            if let Some(t) = p.tls.as_mut() {
                t.close(&mut p.conn);
            }
            let _ = self.poll.registry().deregister(&mut p.conn);
            self.stats.clients.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Reads what client `id` sent, up to `READ_PER_TURN`; returns true if
    /// it stopped there (the socket may hold more: edge-triggered, so no
    /// event will say so).
    fn read(&mut self, id: Id) -> bool {
        let Some(p) = self.peers.get_mut(&id) else { return false };
        if p.done || p.closing {
            return false;
        }
        if !p.reading || p.window >= READ_WINDOW {
            p.missed = true;
            return false;
        }
        let mut got: Vec<u8> = Vec::new();
        let mut more = false;
        let mut end = None;
        let mut handshake = false;
        if let Some(t) = p.tls.as_mut() {
            match t.read(&mut p.conn, &mut self.scratch, &mut got, READ_PER_TURN, p.hup) {
                Ok(r) => {
                    if r.net_bytes > 0 {
                        self.stats.reads.fetch_add(1, Ordering::Relaxed);
                    }
                    more = r.unread;
                    if r.eof {
                        end = Some(FromIo::Eof { id });
                    }
                }
                Err(_) => end = Some(FromIo::Failed { id }),
            }
            // Handshake messages rustls queued go out now, replies or not.
            handshake = t.wants_write();
        } else {
            more = self.read_plain(id, &mut got, &mut end);
        }
        let Some(p) = self.peers.get_mut(&id) else { return false };
        if !got.is_empty() {
            p.window += got.len();
            let mut reqs = Vec::new();
            p.index.scan(&got, &mut reqs, &self.names);
            self.out.push(FromIo::Input { id, buf: got, reqs });
        }
        if let Some(e) = end {
            p.done = true;
            self.out.push(e);
            return false;
        }
        if handshake {
            self.write(id);
        }
        more
    }

    /// `read` of a plain socket: appends to `got`, sets `end` at the end of
    /// the stream or on a failure; returns true if it stopped at
    /// `READ_PER_TURN`.
    fn read_plain(&mut self, id: Id, got: &mut Vec<u8>, end: &mut Option<FromIo>) -> bool {
        let Some(p) = self.peers.get_mut(&id) else { return false };
        let mut more = false;
        loop {
            match p.conn.read(&mut self.scratch) {
                Ok(0) => {
                    *end = Some(FromIo::Eof { id });
                    break;
                }
                Ok(n) => {
                    self.stats.reads.fetch_add(1, Ordering::Relaxed);
                    got.extend_from_slice(&self.scratch[..n]);
                    if got.len() >= READ_PER_TURN {
                        more = true;
                        break;
                    }
                    // A short read took what the socket held; new data
                    // raises a new edge. Once the peer's end closed, that
                    // edge is spent: read on to the end of the stream.
                    if n < self.scratch.len() && !p.hup {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    *end = Some(FromIo::Failed { id });
                    break;
                }
            }
        }
        more
    }

    /// Writes what client `id` has queued, as far as the socket takes it.
    fn write(&mut self, id: Id) {
        let Some(p) = self.peers.get_mut(&id) else { return };
        let mut failed = false;
        if let Some(t) = p.tls.as_mut() {
            loop {
                let buf: &[u8] = p.out.front().map_or(&[], |b| &b[p.off..]);
                match t.write(&mut p.conn, buf) {
                    Ok((taken, sent)) => {
                        if sent > 0 {
                            self.stats.writes.fetch_add(1, Ordering::Relaxed);
                        }
                        p.queued.written(taken);
                        if taken == buf.len() && !buf.is_empty() {
                            if let Some(b) = p.out.pop_front() {
                                p.queued.freed(b.capacity());
                            }
                            p.off = 0;
                            continue;
                        }
                        p.off += taken;
                        if t.wants_write() || !p.out.is_empty() {
                            p.stalled = true;
                        }
                        break;
                    }
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
        } else {
            failed = self.write_plain(id);
        }
        let Some(p) = self.peers.get_mut(&id) else { return };
        if failed {
            p.out.clear();
            p.queued.clear();
            if p.closing {
                self.drop_peer(id);
            } else if !p.done {
                p.done = true;
                self.out.push(FromIo::Failed { id });
            }
            return;
        }
        let held = p.tls.as_ref().is_some_and(|t| t.wants_write());
        if p.out.is_empty() && !held {
            p.off = 0;
            if p.closing {
                self.drop_peer(id);
            } else if std::mem::take(&mut p.stalled) {
                self.out.push(FromIo::Drained { id });
            }
        }
    }

    /// `write` for a plain socket; returns true if the socket failed.
    fn write_plain(&mut self, id: Id) -> bool {
        let Some(p) = self.peers.get_mut(&id) else { return false };
        let mut failed = false;
        while !p.out.is_empty() {
            let mut slices = [IoSlice::new(&[]); MAX_IOV];
            let mut k = 0;
            for (i, b) in p.out.iter().take(MAX_IOV).enumerate() {
                slices[i] = IoSlice::new(if i == 0 { &b[p.off..] } else { b });
                k = i + 1;
            }
            match p.conn.write_vectored(&slices[..k]) {
                Ok(0) => break,
                Ok(mut n) => {
                    self.stats.writes.fetch_add(1, Ordering::Relaxed);
                    p.queued.written(n);
                    while n > 0 {
                        let left = p.out[0].len() - p.off;
                        if n >= left {
                            n -= left;
                            if let Some(b) = p.out.pop_front() {
                                p.queued.freed(b.capacity());
                            }
                            p.off = 0;
                        } else {
                            p.off += n;
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    p.stalled = true;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    /// Feeds `stream` in pieces cut at `cuts`; returns the requests found.
    fn scan_in_pieces(stream: &[u8], cuts: &[usize]) -> (Vec<Req>, Index) {
        let mut ix = Index::default();
        let mut reqs = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().chain([&stream.len()]) {
            ix.scan(&stream[at..c], &mut reqs, &Names::default());
            at = c;
        }
        (reqs, ix)
    }

    #[test]
    fn requests_and_their_offsets_whatever_the_split() {
        let parts: Vec<Vec<u8>> = vec![cmd(&[b"SET", b"k", b"v"]), b"PING\r\n".to_vec(), cmd(&[b"GET", b"k"]), b"set a \"b c\"\n".to_vec(), cmd(&[])];
        let stream: Vec<u8> = parts.concat();
        let mut want = Vec::new();
        let mut at = 0u64;
        for p in &parts {
            want.push((at, at + p.len() as u64));
            at += p.len() as u64;
        }
        for a in 0..=stream.len() {
            for b in a..=stream.len() {
                let (reqs, ix) = scan_in_pieces(&stream, &[a, b]);
                let got: Vec<(u64, u64)> = reqs.iter().map(|r| (r.start, r.end)).collect();
                assert_eq!(got, want, "cut at {a}, {b}");
                assert_eq!(reqs[3].argv, vec![b"set".to_vec(), b"a".to_vec(), b"b c".to_vec()]);
                assert!(ix.tail.is_empty() && !ix.lost);
            }
        }
    }

    #[test]
    fn a_big_unfinished_request_stops_the_index_until_the_executor_says_where_it_is() {
        let big = vec![b'x'; TAIL_MAX + 10];
        let first = cmd(&[b"SET", b"k", &big]);
        let mut ix = Index::default();
        let mut reqs = Vec::new();
        ix.scan(&first[..first.len() - 5], &mut reqs, &Names::default());
        assert!(ix.lost && ix.tail.is_empty() && reqs.is_empty());
        ix.scan(&first[first.len() - 5..], &mut reqs, &Names::default());
        let next = cmd(&[b"GET", b"k"]);
        ix.scan(&next, &mut reqs, &Names::default());
        assert!(reqs.is_empty(), "lost: nothing is parsed");
        // The executor, idle somewhere before the end: nothing changes.
        ix.found(first.len() as u64);
        assert!(ix.lost);
        ix.found((first.len() + next.len()) as u64);
        assert!(!ix.lost);
        ix.scan(&next, &mut reqs, &Names::default());
        let at = (first.len() + next.len()) as u64;
        assert_eq!(reqs.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(), vec![(at, at + next.len() as u64)]);
    }

    #[test]
    fn a_doorbell_wakes_only_a_sleeper_and_never_lets_a_batch_wait() {
        let bell = Doorbell::default();
        // Awake reader: a batch needs no wake, and the reader may not sleep
        // while it waits.
        assert!(!bell.rang());
        assert!(!bell.park());
        bell.took();
        // Nothing waits: the reader sleeps, and the next batch wakes it.
        assert!(bell.park());
        assert!(bell.rang());
        bell.unpark();
        bell.took();
        assert!(bell.park());
        bell.unpark();
        assert!(!bell.rang());
    }

    #[test]
    fn a_doorbell_between_threads_loses_no_batch() {
        // A reader that sleeps (a condition variable standing for the
        // poller's eventfd: a wake before the sleep is kept) only when `park`
        // allows, and a writer that wakes it only when `rang` says so and
        // pauses now and then, so that the reader catches up and sleeps:
        // every batch is taken, none waits behind a sleep.
        use std::sync::{Condvar, Mutex};
        const BATCHES: usize = 3_000;
        let bell = Arc::new(Doorbell::default());
        let (tx, rx) = mpsc::channel::<usize>();
        let wake = Arc::new((Mutex::new(false), Condvar::new()));
        let reader = {
            let (bell, wake) = (bell.clone(), wake.clone());
            std::thread::spawn(move || {
                let (mut got, mut slept) = (0, 0);
                while got < BATCHES {
                    if bell.park() {
                        slept += 1;
                        let (lock, cv) = &*wake;
                        let mut woken = lock.lock().unwrap();
                        while !*woken {
                            let (w, t) = cv.wait_timeout(woken, std::time::Duration::from_secs(10)).unwrap();
                            assert!(!t.timed_out(), "batch {got} waited behind a sleep");
                            woken = w;
                        }
                        *woken = false;
                    }
                    bell.unpark();
                    while let Ok(n) = rx.try_recv() {
                        bell.took();
                        assert_eq!(n, got);
                        got += 1;
                    }
                }
                slept
            })
        };
        for n in 0..BATCHES {
            tx.send(n).unwrap();
            if bell.rang() {
                let (lock, cv) = &*wake;
                *lock.lock().unwrap() = true;
                cv.notify_one();
            }
            if n % 3 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        assert!(reader.join().unwrap() > 0, "the reader never slept: the test proved nothing");
    }

    #[test]
    fn threads_retire_from_the_end_once_empty_and_come_back_live() {
        let poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), Token(0)).unwrap());
        let mut io = IoThreads::start(2, waker, Arc::default()).unwrap();
        assert_eq!((io.assign(), io.assign(), io.assign()), (Some(0), Some(1), Some(0)));
        io.resize(1).unwrap();
        assert_eq!((io.live(), io.len()), (1, 2));
        assert!(io.retiring(1) && !io.retiring(0));
        // New clients go to live threads only.
        assert_eq!(io.assign(), Some(0));
        // Thread 1 still counts a client: it stays.
        assert_eq!(io.end_retired(), (0, 0));
        assert_eq!(io.len(), 2);
        // Growing makes it live again before starting any.
        io.resize(3).unwrap();
        assert_eq!((io.live(), io.len()), (3, 3));
        assert_eq!(io.assign(), Some(2));
        io.resize(1).unwrap();
        // Thread 2 holds a client, thread 1 too: neither ends; once the
        // last is empty it ends, and the one before it once empty too.
        io.release(2);
        io.end_retired();
        assert_eq!(io.len(), 2);
        io.release(1);
        io.end_retired();
        assert_eq!(io.len(), 1);
        // None live: no thread takes a client.
        io.resize(0).unwrap();
        assert_eq!(io.assign(), None);
        for _ in 0..3 {
            io.release(0);
        }
        io.end_retired();
        assert!(io.is_empty());
    }

    #[test]
    fn a_protocol_error_stops_the_index() {
        let mut ix = Index::default();
        let mut reqs = Vec::new();
        ix.scan(b"*1\r\n$4\r\nPING\r\n*1\r\nx\r\n*1\r\n$4\r\nPING\r\n", &mut reqs, &Names::default());
        assert_eq!(reqs.len(), 1);
        assert!(ix.lost);
    }
}
