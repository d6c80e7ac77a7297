//! The event loop: one thread, epoll readiness through `mio`.
//!
//! Each ready client is read until the socket would block, every complete
//! request in its buffer is parsed and executed in order, and the replies
//! are written straight away; what the socket does not take waits for a
//! WRITABLE event. The read/parse and write halves touch only the client,
//! so they can later move to I/O threads without touching command code.
//!
//! The loop also owns the listening sockets (every `bind` address, opened
//! the way Redis opens them: `listen`) and the shutdown signals, which
//! arrive as readiness events (signal-hook-mio) and are handed to
//! `shutdown::signal_received`.
//!
//! Replies wait for the AOF (a group commit, as Redis's beforeSleep): when
//! a turn ran writes the AOF logs, every reply of that turn is held until
//! `aof::flush` has written (and with appendfsync always, fsynced) them,
//! then sent; one fsync covers every client of the turn.
//!
//! Limits: a query buffer over client-query-buffer-limit closes the client;
//! a client whose unread replies exceed `OUTPUT_SOFT_LIMIT` is not read from
//! until it drains them (back-pressure instead of unbounded memory), and no
//! other client is affected either way.

use std::collections::HashSet;
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};
use resp::{Limits, Parsed};
use signal_hook::consts::{SIGALRM, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;

use crate::client::{Client, ClientId, ReplRole};
use crate::conn::Conn;
use crate::command::{CmdError, CommandMap, Host, Scripts, SpecAt};
use crate::registry::registry;
use crate::script::engine::Engine;
use crate::log::Log;
use crate::process::Signal;
use crate::server::Server;
use crate::{cron, dispatch, exec, persist, shutdown};

/// Tokens from here up are the loop's own; client ids stay below.
const SIGNALS: Token = Token(usize::MAX);
/// The link to this server's primary while it handshakes (`link.rs`).
const LINK: Token = Token(LISTENER0 - MAX_LISTENERS);
/// The metrics thread's waker: a scrape is waiting.
const METRICS: Token = Token(usize::MAX - 64);
/// The `unixsocket` listener.
const UNIX: Token = Token(usize::MAX - 65);
/// The I/O threads' waker: they sent requests or news.
const IO: Token = Token(usize::MAX - 66);
/// The first listener's token; the others count down from it.
const LISTENER0: usize = usize::MAX - 1;
/// At most this many listeners (Redis's limit on bind addresses).
const MAX_LISTENERS: usize = 16;
/// Read chunk size.
const READ_CHUNK: usize = 16 * 1024;
/// Largest shared query buffer kept between turns.
const MAX_READ: usize = 1024 * 1024;
/// Unread reply bytes above which we stop reading from a client.
const OUTPUT_SOFT_LIMIT: usize = 64 * 1024 * 1024;
/// Executor time per loop turn for MEMORY REPORT walks: small enough that
/// a client waits a few milliseconds at most behind one.
const REPORT_SLICE: Duration = Duration::from_millis(3);

/// The listening sockets with a handle on the poller's registry, so that
/// clients can be accepted while a timed-out script runs too.
pub struct Acceptor {
    listeners: Vec<TcpListener>,
    /// The `unixsocket` listener and its path.
    unix: Option<(UnixListener, String)>,
    /// `listeners` from this index on are tls-port's.
    tls_from: usize,
    registry: mio::Registry,
}

impl Acceptor {
    /// Serves `tcp` and then `tls` listeners in place of the current ones.
    ///
    /// Errors: registering a socket failed; the current ones stay.
    fn replace(&mut self, tcp: Vec<std::net::TcpListener>, tls: Vec<std::net::TcpListener>) -> io::Result<()> {
        let tls_from = tcp.len().min(MAX_LISTENERS);
        let mut fresh = Vec::new();
        for (i, l) in tcp.into_iter().chain(tls).take(MAX_LISTENERS).enumerate() {
            l.set_nonblocking(true)?;
            fresh.push((i, TcpListener::from_std(l)));
        }
        for l in &mut self.listeners {
            let _ = self.registry.deregister(l);
        }
        self.listeners.clear();
        for (i, mut l) in fresh {
            self.registry.register(&mut l, Token(LISTENER0 - i), Interest::READABLE)?;
            self.listeners.push(l);
        }
        self.tls_from = tls_from;
        Ok(())
    }
}

/// What the event loop lends to dispatch for every call (`command::Host`):
/// the command table, the scripting engine, and serving the other clients
/// while a script is busy, for which it holds the listener.
pub struct Shell {
    table: CommandMap,
    engine: Engine,
    acceptor: Acceptor,
    /// SIGTERM, SIGINT and SIGALRM, delivered as readiness on `SIGNALS`
    /// (read directly while the RDB file loads).
    signals: Signals,
    /// The cluster bus, in cluster mode (`bus.rs`). It lives beside the
    /// table so that a load or a busy script, which serve clients through
    /// the `Host`, keep answering the bus too (`serve_while_busy`).
    bus: Option<Box<crate::bus::Bus>>,
    /// The poller's registry for the bus's sockets, held apart from the
    /// acceptor's so that it can be lent while the Shell is the host.
    bus_registry: Option<mio::Registry>,
    /// The I/O threads' waker on `IO`, made when threads first start and
    /// kept: a poller takes one waker, and threads may start again after
    /// all of them ended (CONFIG SET io-threads).
    io_waker: Option<std::sync::Arc<mio::Waker>>,
    /// The table's names for the I/O threads to find commands by, made
    /// when threads first start and kept (the table does not change).
    io_names: Option<std::sync::Arc<crate::command::Names>>,
}

impl Shell {
    /// The I/O threads' waker (`io_waker`).
    ///
    /// Errors: the waker could not be registered.
    fn io_waker(&mut self) -> io::Result<std::sync::Arc<mio::Waker>> {
        if let Some(w) = &self.io_waker {
            return Ok(w.clone());
        }
        let w = std::sync::Arc::new(mio::Waker::new(&self.acceptor.registry, IO)?);
        self.io_waker = Some(w.clone());
        Ok(w)
    }

    /// Starts `n` I/O threads.
    fn start_io(&mut self, n: usize) -> io::Result<crate::iothread::IoThreads> {
        let waker = self.io_waker()?;
        let names = self.io_names.get_or_insert_with(|| std::sync::Arc::new(self.table.names())).clone();
        crate::iothread::IoThreads::start(n, waker, names)
    }

    /// Acts on the signals that came: SIGTERM and SIGINT schedule a
    /// shutdown; SIGALRM is logged and survived, as Redis does (crash.rs).
    fn take_signals(&mut self, srv: &mut Server) {
        for sig in self.signals.pending() {
            match sig {
                SIGALRM => srv.config.log.signal_line("Received SIGALRM"),
                SIGINT => shutdown::signal_received(srv, Signal::Int),
                _ => shutdown::signal_received(srv, Signal::Term),
            }
        }
    }
}

impl Host for Shell {
    fn table(&self) -> &CommandMap {
        &self.table
    }

    fn scripts(&mut self) -> &mut dyn Scripts {
        &mut self.engine
    }

    fn scripts_ref(&self) -> &dyn Scripts {
        &self.engine
    }

    fn serve_others(&mut self, srv: &mut Server) {
        serve_while_busy(srv, self);
    }

    fn sigint_pending(&mut self) -> bool {
        self.signals.pending().any(|sig| sig == SIGINT)
    }

    fn relisten(&mut self, srv: &mut Server, bind: &str, port: u16, tls_port: u16) -> Result<(), &'static str> {
        // Redis's reasons: a bind change that fails names the addresses,
        // a port change the port.
        let old_bind = srv.config.get("bind").unwrap_or("").to_string();
        let reason = if old_bind != bind { "Failed to bind to specified addresses." } else { "Unable to listen on this port. Check server logs." };
        let (old_port, old_tls) = (srv.config.port, srv.config.get("tls-port").and_then(|v| v.parse().ok()).unwrap_or(0));
        let opts = ListenOpts::from_config(&srv.config);
        let log = &srv.config.log;
        let open = |bind: &str, port: u16, tls_port: u16| Ok::<_, ListenFailed>((listen(bind, port, &opts, log)?, listen(bind, tls_port, &opts, log)?));
        // The current sockets close first, so that the new ones may take an
        // address they held; on failure they are opened again.
        self.acceptor.replace(Vec::new(), Vec::new()).map_err(|_| reason)?;
        match open(bind, port, tls_port) {
            Ok((tcp, tls)) => self.acceptor.replace(tcp, tls).map_err(|_| reason),
            Err(_) => {
                if let Ok((tcp, tls)) = open(&old_bind, old_port, old_tls) {
                    let _ = self.acceptor.replace(tcp, tls);
                }
                Err(reason)
            }
        }
    }

    fn set_io_threads(&mut self, srv: &mut Server, n: usize) -> Result<(), String> {
        let want = n.saturating_sub(1);
        let started = match srv.io.as_mut() {
            Some(io) => io.resize(want),
            None if want == 0 => Ok(()),
            None => self.start_io(want).map(|io| srv.io = Some(io)),
        };
        // The moves, and the end of retired threads (of threads started
        // just now too, if a later one failed), happen between commands.
        srv.io_rebalance = true;
        srv.io_moving = None;
        started.map_err(|e| format!("Failed creating the I/O threads: {}", crate::config::strerror(&e)))
    }

    fn serve_while_loading(&mut self, srv: &mut Server) -> bool {
        self.take_signals(srv);
        if srv.shutdown || srv.shutdown_signal.is_some() {
            return false;
        }
        serve_while_busy(srv, self);
        let dead: Vec<ClientId> = srv.clients.values().filter(|c| c.close_asap || (c.close_after_reply && c.out_settled())).map(|c| c.id).collect();
        for id in dead {
            close_client(srv, &self.acceptor.registry, id);
        }
        !srv.shutdown
    }
}

/// The poller and the event loop's own state.
pub struct EventLoop {
    poll: Poll,
    /// The table, the scripting engine and the listener, lent to dispatch.
    shell: Shell,
    /// Clients with work left that no readiness event will announce.
    pending: rustc_hash::FxHashSet<ClientId>,
    /// A listener stopped at its connections-per-turn limit with more
    /// waiting: accept again next turn (no new edge will announce them).
    accept_more: bool,
    /// Query buffer lent to a client with none of its own for one read and
    /// its processing; only a request left incomplete is copied out into a
    /// private buffer (Redis's reusable query buffer). Idle clients thus hold
    /// no query buffer at all. Made at the size of one read and kept at
    /// least that, so the tot-mem of the client holding it does not
    /// depend on the sizes of the requests before.
    shared_qbuf: Vec<u8>,
    /// Where reads land before being appended to a query buffer.
    scratch: Box<[u8]>,
    /// Clients whose replies wait for this turn's AOF write.
    held: Vec<ClientId>,
    /// The socket to this server's primary until synchronized.
    link: crate::link::Link,
    /// The Prometheus endpoint, with metrics-port set.
    metrics: Option<crate::metrics::Endpoint>,
    /// Connections of import tasks still connecting to their source.
    dialing: Vec<Dialing>,
    /// The clients served in a turn, kept for its room between turns.
    ids: Vec<ClientId>,
}

/// A destination's connection to its source (atomic slot migration) while
/// the connect is in flight: registered under the client id it will have,
/// so that its readiness wakes the loop, and looked at each turn.
struct Dialing {
    task: String,
    sock: mio::net::TcpStream,
    cid: ClientId,
    hello: Vec<u8>,
    deadline: Instant,
}

/// How long a destination's connect to its source may take: cluster
/// nodes are near, and the task tries again a second later.
const DIAL_TIMEOUT: Duration = Duration::from_millis(1000);

impl EventLoop {
    /// Binds `addr`, and builds the command table and the scripting engine.
    ///
    /// Errors: the bind error (port busy, bad address).
    pub fn bind(addr: SocketAddr) -> io::Result<EventLoop> {
        EventLoop::new(vec![std::net::TcpListener::bind(addr)?], Vec::new(), None, &[])
    }

    /// Serves `listeners` (and `tls_listeners`, whose clients speak TLS
    /// with `Server::tls`), builds the command table (with `renames` applied:
    /// rename-command from to, `to` empty removing the command) and the
    /// scripting engine, and takes over SIGTERM, SIGINT and SIGALRM.
    ///
    /// Errors: registering a socket or the signal handlers failed.
    pub fn new(listeners: Vec<std::net::TcpListener>, tls_listeners: Vec<std::net::TcpListener>, unix: Option<(std::os::unix::net::UnixListener, String)>, renames: &[(String, String)]) -> io::Result<EventLoop> {
        let poll = Poll::new()?;
        let mut ours = Vec::new();
        let tls_from = listeners.len().min(MAX_LISTENERS);
        for (i, l) in listeners.into_iter().chain(tls_listeners).take(MAX_LISTENERS).enumerate() {
            l.set_nonblocking(true)?;
            let mut l = TcpListener::from_std(l);
            poll.registry().register(&mut l, Token(LISTENER0 - i), Interest::READABLE)?;
            ours.push(l);
        }
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGALRM])?;
        poll.registry().register(&mut signals, SIGNALS, Interest::READABLE)?;
        let unix = match unix {
            Some((l, path)) => {
                l.set_nonblocking(true)?;
                let mut l = UnixListener::from_std(l);
                poll.registry().register(&mut l, UNIX, Interest::READABLE)?;
                Some((l, path))
            }
            None => None,
        };
        let acceptor = Acceptor { listeners: ours, unix, tls_from, registry: poll.registry().try_clone()? };
        let mut table = registry();
        if !renames.is_empty() {
            let map = std::rc::Rc::make_mut(&mut table);
            for (from, to) in renames {
                if let Some(spec) = map.remove(from) {
                    if !to.is_empty() {
                        map.insert(to.clone(), spec);
                    }
                }
            }
        }
        let shell = Shell { engine: Engine::new(table.clone()), table, acceptor, signals, bus: None, bus_registry: None, io_waker: None, io_names: None };
        Ok(EventLoop { poll, shell, link: Default::default(), metrics: None, dialing: Vec::new(), ids: Vec::new(), held: Vec::new(), pending: Default::default(), accept_more: false, shared_qbuf: Vec::with_capacity(READ_CHUNK), scratch: vec![0; READ_CHUNK].into_boxed_slice() })
    }

    /// Serves the cluster bus on `listeners` (the bus port on every `bind`
    /// address): cluster mode only.
    ///
    /// Errors: registering a socket failed.
    pub fn serve_bus(&mut self, listeners: Vec<std::net::TcpListener>) -> io::Result<()> {
        self.shell.bus = Some(Box::new(crate::bus::Bus::new(listeners, self.poll.registry())?));
        self.shell.bus_registry = Some(self.poll.registry().try_clone()?);
        Ok(())
    }

    /// The cluster's periodic work when due, every 100 ms whatever `hz`
    /// says; returns when it is next due (None standalone).
    fn bus_cron(&mut self, srv: &mut Server, now: Instant) -> Option<Instant> {
        let mut bus = self.shell.bus.take()?;
        if now >= bus.next_tick && !srv.cron_paused {
            bus.tick(srv, &mut self.shell, self.poll.registry());
        }
        let due = bus.next_tick;
        self.shell.bus = Some(bus);
        Some(due)
    }

    /// Starts `n - 1` I/O threads (io-threads counts this one, as Redis's
    /// does); with `n` 1 nothing changes: every socket stays on this
    /// thread.
    ///
    /// Errors: a thread or its poller could not be created.
    pub fn start_io_threads(&mut self, srv: &mut Server, n: usize) -> io::Result<()> {
        if n > 1 {
            srv.io = Some(self.shell.start_io(n - 1)?);
        }
        Ok(())
    }

    /// Serves `GET /metrics` and `GET /health` on `bind:port` (metrics.rs);
    /// returns the address bound.
    pub fn serve_metrics(&mut self, bind: &str, port: u16) -> Result<SocketAddr, String> {
        let waker = std::sync::Arc::new(mio::Waker::new(self.poll.registry(), METRICS).map_err(|e| e.to_string())?);
        let ep = crate::metrics::start(bind, port, crate::metrics::waker(waker))?;
        let addr = ep.addr;
        self.metrics = Some(ep);
        Ok(addr)
    }

    /// Loads the data before serving: the AOF with appendonly yes (which
    /// logs what it did itself: Ok(None)), else the RDB file, if there is
    /// one, serving clients meanwhile with -LOADING (`persist::load_serving`).
    ///
    /// Errors: why the file was refused (`Logged` when the AOF loader
    /// already logged it), or `Interrupted`: a shutdown signal (or
    /// SHUTDOWN) came, and the server shut down without saving, as Redis
    /// does while loading.
    pub fn load(&mut self, srv: &mut Server) -> Result<Option<crate::persist::LoadStats>, crate::persist::LoadError> {
        if srv.config.flag("appendonly") {
            return crate::aof::load_at_start(srv, &mut self.shell).map(|()| None).map_err(|_| crate::persist::LoadError::Logged);
        }
        let r = crate::persist::load_serving(srv, &mut self.shell);
        if matches!(r, Err(crate::persist::LoadError::Interrupted)) && !srv.shutdown {
            srv.shutdown_signal = None;
            // The process exits after this whatever happens: no waiting
            // for replicas.
            let flags = shutdown::Flags { nosave: true, now: true, ..shutdown::Flags::default() };
            let _ = shutdown::prepare(srv, &mut self.shell, flags);
        }
        r
    }

    /// Opens the AOF for appending after loading (`aof::open_at_start`).
    ///
    /// Errors: it could not be opened (logged).
    pub fn open_aof(&mut self, srv: &mut Server) -> Result<(), crate::aof::files::Logged> {
        crate::aof::open_at_start(srv, &mut self.shell)
    }

    /// Runs until SHUTDOWN.
    pub fn run(&mut self, srv: &mut Server) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut next_cron = Instant::now();
        let mut served = Duration::ZERO;
        // The last pass, recorded when the next turn reads the clock: when
        // its poll returned, its time before that poll, the commands run
        // before it and whether it served anyone. The loop reads the clock
        // three times a turn (here, before the poll and after it), more
        // only for cron, AOF writes and dials: at pipeline 1 a turn serves
        // a few requests, and a reading costs about a GET's lookup.
        let mut last: Option<(Instant, Duration, u64, bool)> = None;
        loop {
            let now = Instant::now();
            if let Some((woke, before_poll, commands_before, served_some)) = last.take() {
                let this_pass = now.saturating_duration_since(woke);
                served = if served_some { this_pass } else { Duration::ZERO };
                srv.el.cycle(before_poll + this_pass, srv.total_commands.saturating_sub(commands_before));
            }
            // The latest clock reading, for what this turn does before the poll.
            let mut clock = now;
            if now >= next_cron && !srv.cron_paused {
                cron::tick(srv);
                crate::obuf::cron(srv);
                crate::clientevict::recount(srv, None);
                if srv.tracking.has_broadcast() {
                    crate::publish::broadcast_invalidations(srv);
                }
                persist::on_cron(srv, &mut self.shell);
                for id in shutdown::on_cron(srv, &mut self.shell) {
                    dispatch::release(srv, &self.shell.table, id, dispatch::Release::Failed(shutdown::FAILED));
                }
                crate::aof::cron(srv, &mut self.shell);
                crate::replication::aof_progress(srv, &self.shell.table);
                crate::replication::cron(srv, &mut self.shell);
                self.poll_link(srv);
                crate::replication::after_turn(srv);
                crate::migration::cron(srv);
                self.connect_imports(srv);
                if srv.io_rebalance {
                    rebalance_io(srv, self.poll.registry());
                }
                self.close_marked(srv, None);
                crate::cron::update_hz(srv);
                crate::crash::configure_from(&srv.config);
                next_cron = now + Duration::from_millis(1000 / srv.hz.max(1));
                clock = Instant::now();
                srv.el.cron_ns += clock.saturating_duration_since(now).as_nanos() as u64;
                self.pending.extend(
                    srv.clients
                        .values()
                        .filter(|c| c.paused && srv.pause.is_none() && srv.shutdown_wait.is_none() && srv.repl.failover.is_none() && srv.cluster_pause_until == 0)
                        .map(|c| c.id),
                );
            }
            let bus_due = self.bus_cron(srv, clock);
            if srv.shutdown {
                crate::aof::shutdown(srv);
                if let Some(io) = srv.io.as_mut() {
                    io.stop();
                }
                return Ok(());
            }
            // Blocked clients: answer those past their deadline, wake those served.
            let now_ms = srv.unix_ms_at(clock);
            dispatch::expire_blocked(srv, &self.shell.table, now_ms);
            dispatch::wake_due(srv, &mut self.shell, now_ms);
            self.pending.extend(srv.blocking.take_woken());
            let runnable = self.pending.iter().any(|id| srv.clients.get(id).is_some_and(|c| !c.paused));
            // Eviction that stopped at its time limit goes on between
            // turns (Redis's eviction timer), polling without waiting.
            if srv.evict.unfinished {
                crate::evict::perform(srv, None, now_ms);
                // What it told clients caching the keys leaves now, as
                // Redis's replies leave before it sleeps: held here until
                // the end of the next turn, those messages would count as
                // memory over the limit to that turn's first command.
                self.close_marked(srv, Some(&[]));
            }
            // MEMORY REPORT walks advance a slice per turn; a client whose
            // report is done runs its command again, which replies.
            if srv.reports.busy() {
                let Server { reports, dbs, blocking, .. } = &mut *srv;
                for id in reports.step(dbs, now_ms, REPORT_SLICE, |id| blocking.is_blocked(id)) {
                    dispatch::resume(srv, &mut self.shell, id);
                    srv.reports.forget(id);
                }
                self.pending.extend(srv.blocking.take_woken());
            }
            let work_left = runnable || self.accept_more || srv.evict.unfinished || srv.reports.busy() || srv.migrations.busy();
            let mut timeout = if work_left { Duration::ZERO } else { next_cron.saturating_duration_since(clock) };
            if let Some(d) = self.dialing.iter().map(|d| d.deadline).min() {
                timeout = timeout.min(d.saturating_duration_since(clock));
            }
            // A background save runs in slices between commands: a share
            // of the time clients just took, all of it when they took none.
            if let Some(wait) = persist::bgsave_step(srv, served) {
                timeout = timeout.min(wait);
            }
            // A full sync's save that just ended is reported in the same
            // turn: no client sees it ended before its replicas do.
            crate::replication::save_ended(srv, &mut self.shell);
            crate::aof::rewrite_poll(srv);
            if let Some(at) = srv.blocking.next_deadline() {
                timeout = timeout.min(Duration::from_millis(at.saturating_sub(now_ms).max(0) as u64));
            }
            if let Some(at) = bus_due {
                timeout = timeout.min(at.saturating_duration_since(clock));
            }
            if self.shell.bus.as_ref().is_some_and(|b| b.has_queued()) {
                timeout = Duration::ZERO;
            }
            // This turn's replies and control messages go to the I/O
            // threads, one batch per thread, which is woken if it sleeps;
            // news from them already waiting means no wait here.
            if let Some(io) = srv.io.as_mut() {
                io.send();
                if !timeout.is_zero() && !io.park() {
                    timeout = Duration::ZERO;
                }
            }
            let before_poll = now.elapsed();
            crate::crash::turn_ended();
            let polled = self.poll.poll(&mut events, Some(timeout));
            let woke = Instant::now();
            if let Some(io) = srv.io.as_ref() {
                io.unpark();
            }
            match polled {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            crate::crash::turn_started();
            // The bus messages of the last turn leave now, after its replies.
            if let Some(mut bus) = self.shell.bus.take() {
                bus.flush_queued(srv, &mut self.shell, self.poll.registry());
                self.shell.bus = Some(bus);
            }
            // Clients left from the last turn (woken, paused, unfinished)
            // first, then those with new input in the order the poller saw
            // it arrive, as Redis serves them: a request sent before
            // another on a second connection runs first (an EXEC before a
            // write that would have aborted it).
            let mut ids = std::mem::take(&mut self.ids);
            ids.clear();
            ids.extend(self.pending.drain());
            ids.sort_unstable();
            let carried = ids.len();
            let mut accept_now = std::mem::take(&mut self.accept_more);
            for ev in events.iter() {
                if ev.token() == LINK {
                    self.poll_link(srv);
                } else if ev.token() == METRICS {
                    if let Some(ep) = &self.metrics {
                        crate::metrics::answer(ep, srv, &mut self.shell);
                    }
                } else if ev.token() == SIGNALS {
                    self.shell.take_signals(srv);
                } else if ev.token() == IO {
                    // Taken below, every turn.
                } else if ev.token() == UNIX {
                    accept_now = true;
                } else if crate::bus::owns(ev.token()) {
                    if let Some(mut bus) = self.shell.bus.take() {
                        bus.ready(srv, &mut self.shell, self.poll.registry(), ev);
                        self.shell.bus = Some(bus);
                    }
                } else if ev.token().0 > LISTENER0 - MAX_LISTENERS {
                    accept_now = true;
                } else {
                    let id = ev.token().0 as ClientId;
                    if ev.is_read_closed() || ev.is_error() {
                        if let Some(c) = srv.clients.get_mut(&id) {
                            c.peer_closed = true;
                        }
                    }
                    // The poller reports a socket once a poll: only the
                    // clients left from the last turn can repeat here.
                    if ids[..carried].binary_search(&id).is_err() {
                        ids.push(id);
                    }
                }
            }
            if accept_now {
                self.accept_more = accept(srv, &self.shell.acceptor);
            }
            // What the I/O threads read, in the order it came, after the
            // clients of the executor's own sockets.
            if srv.io.is_some() {
                let evicted_before = srv.evicted_clients;
                let pending = &mut self.pending;
                take_io(srv, self.poll.registry(), &mut |id| {
                    if pending.insert(id) && ids[..carried].binary_search(&id).is_err() {
                        ids.push(id);
                    }
                });
                if srv.evicted_clients != evicted_before {
                    self.close_evicted(srv);
                }
                prefetch_first(srv, &self.shell.table, &ids);
            }
            self.pending.clear();
            if !self.dialing.is_empty() {
                for id in self.poll_dialing(srv) {
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
            let commands_before = srv.total_commands;
            for &id in &ids {
                if srv.shutdown {
                    break;
                }
                let evicted_before = srv.evicted_clients;
                self.serve(srv, id);
                if srv.evicted_clients != evicted_before {
                    // Redis frees a client it evicts at once: no later
                    // command of this turn (a CLIENT LIST) sees it.
                    self.close_evicted(srv);
                }
            }
            self.pending.extend(srv.blocking.take_woken());
            // The cluster's end of turn (Redis's clusterBeforeSleep), and
            // what this turn's commands asked of the bus.
            if let Some(mut bus) = self.shell.bus.take() {
                bus.before_sleep(srv, &mut self.shell, self.poll.registry());
                self.shell.bus = Some(bus);
                self.pending.extend(srv.blocking.take_woken());
            }
            crate::replication::after_turn(srv);
            // Atomic slot migration: the sources' keys and forwarded
            // writes of this turn; commands a hand-off held run again.
            crate::migration::after_turn(srv, &self.shell.table);
            if std::mem::take(&mut srv.migrations.unpaused) {
                self.pending.extend(srv.clients.values().filter(|c| c.paused).map(|c| c.id));
            }
            // BCAST clients hear of this turn's changes once, as Redis
            // tells them before it sleeps.
            if srv.tracking.has_broadcast() {
                crate::publish::broadcast_invalidations(srv);
            }
            srv.free_discarded();
            // The group commit: this turn's AOF bytes reach the file (and
            // the disk, with appendfsync always) before its replies leave.
            if srv.aof.on {
                let aof_start = Instant::now();
                crate::aof::flush(srv);
                srv.el.aof_ns += aof_start.elapsed().as_nanos() as u64;
            }
            crate::replication::aof_progress(srv, &self.shell.table);
            self.pending.extend(srv.blocking.take_woken());
            for id in std::mem::take(&mut self.held) {
                if let Some(mut c) = srv.clients.take(&id) {
                    flush(srv, &mut c);
                    srv.clients.put(id, c);
                }
            }
            self.close_marked(srv, Some(&ids));
            last = Some((woke, before_poll, commands_before, !ids.is_empty()));
            self.ids = ids;
        }
    }

    /// Moves the link to the primary on; once synchronized, the primary's
    /// client is served at once (the stream may have come with the image).
    fn poll_link(&mut self, srv: &mut Server) {
        if let Some(id) = crate::link::poll(srv, &mut self.shell, self.poll.registry(), &mut self.link, LINK) {
            self.pending.insert(id);
        }
    }

    /// Opens the connections of import tasks that wait for one (atomic
    /// slot migration): a non-blocking connect to the source's client
    /// port, finished by `poll_dialing`; nothing here waits.
    fn connect_imports(&mut self, srv: &mut Server) {
        self.poll_dialing(srv);
        while let Some((id, host, port, hello)) = crate::migration::due_connection(srv) {
            if self.dialing.iter().any(|d| d.task == id) {
                continue;
            }
            let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port)).ok().and_then(|mut a| a.next());
            let Some(mut sock) = addr.and_then(|a| mio::net::TcpStream::connect(a).ok()) else {
                crate::migration::connected(srv, &id, None);
                continue;
            };
            let cid = srv.new_client_id();
            if self.poll.registry().register(&mut sock, Token(cid as usize), Interest::READABLE | Interest::WRITABLE).is_err() {
                crate::migration::connected(srv, &id, None);
                continue;
            }
            self.dialing.push(Dialing { task: id, sock, cid, hello, deadline: Instant::now() + DIAL_TIMEOUT });
        }
    }

    /// Looks at the connects in flight: one that completed becomes a
    /// client like an accepted one, whose first output is the request for
    /// the slots; one refused or past `DIAL_TIMEOUT` fails its attempt (the
    /// task tries again a second later). Returns the new clients, to be
    /// served this turn.
    fn poll_dialing(&mut self, srv: &mut Server) -> Vec<ClientId> {
        let mut ready = Vec::new();
        let now = Instant::now();
        for mut d in std::mem::take(&mut self.dialing) {
            let outcome = match d.sock.take_error() {
                Ok(Some(e)) | Err(e) => Err(e.to_string()),
                Ok(None) => match d.sock.peer_addr() {
                    Ok(peer) => Ok(peer),
                    Err(e) if e.kind() == ErrorKind::NotConnected && now < d.deadline => {
                        self.dialing.push(d);
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::NotConnected => Err("connect timed out".to_string()),
                    Err(e) => Err(e.to_string()),
                },
            };
            let peer = match outcome {
                Ok(peer) => peer,
                Err(why) => {
                    let _ = self.poll.registry().deregister(&mut d.sock);
                    srv.config.log.warning(&format!("Slot migration {}: could not connect to the source: {why}", d.task));
                    crate::migration::connected(srv, &d.task, None);
                    continue;
                }
            };
            // With tls-cluster the source's port speaks TLS, as the bus does.
            let session = match srv.config.flag("tls-cluster") {
                true => match crate::tls::build_client(&|k| srv.config.get(k).unwrap_or("").to_string()).and_then(|cfg| crate::tls::Session::client(&cfg, &peer.ip().to_string()).map_err(|e| e.to_string())) {
                    Ok(t) => Some(Box::new(t)),
                    Err(why) => {
                        let _ = self.poll.registry().deregister(&mut d.sock);
                        srv.config.log.warning(&format!("Slot migration {}: could not connect to the source: {why}", d.task));
                        crate::migration::connected(srv, &d.task, None);
                        continue;
                    }
                },
                false => None,
            };
            if !crate::migration::connected(srv, &d.task, Some(d.cid)) {
                // Cancelled or ended while connecting.
                let _ = self.poll.registry().deregister(&mut d.sock);
                continue;
            }
            let _ = d.sock.set_nodelay(true);
            crate::conn::keepalive(&d.sock, srv.config.tcp_keepalive());
            let laddr = d.sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
            let mut c = Client::new(d.cid, Some(Conn::Tcp(d.sock)), peer.to_string(), laddr);
            c.user = Some(srv.acl.default_user());
            c.authenticated = true;
            c.slot_import = true;
            c.tls = session;
            c.reply.raw(&d.hello);
            srv.clients.insert(d.cid, Box::new(c));
            srv.woken.push(d.cid);
            ready.push(d.cid);
        }
        ready
    }

    /// Reads, runs and writes for one client.
    fn serve(&mut self, srv: &mut Server, id: ClientId) {
        let Some(mut c) = srv.clients.take(&id) else { return };
        let borrowed = c.qbuf.capacity() == 0;
        if borrowed {
            std::mem::swap(&mut c.qbuf, &mut self.shared_qbuf);
            c.qbuf_shared = true;
        }
        let more = self.serve_client(srv, &mut c);
        if borrowed {
            c.qbuf_shared = false;
            // process_input drained what ran; keep only a leftover,
            // privately, with the room a big argument being read needs.
            let rest = if c.qbuf.is_empty() && c.qbuf_want == 0 {
                Vec::new()
            } else {
                let mut rest = Vec::with_capacity(c.qbuf.len().max(c.qbuf_want));
                rest.extend_from_slice(&c.qbuf);
                rest
            };
            c.qbuf.clear();
            std::mem::swap(&mut c.qbuf, &mut self.shared_qbuf);
            if self.shared_qbuf.capacity() > MAX_READ {
                self.shared_qbuf = Vec::with_capacity(READ_CHUNK);
            }
            c.qbuf = rest;
        } else if c.qbuf.is_empty() && c.parser.is_idle() {
            // A private buffer that emptied goes back to using the shared one.
            c.qbuf = Vec::new();
        }
        if more {
            self.pending.insert(id);
        }
        srv.clients.put(id, c);
    }

    /// Returns true if the client has work left that no event will announce.
    fn serve_client(&mut self, srv: &mut Server, c: &mut Client) -> bool {
        if c.close_asap {
            return false;
        }
        flush(srv, c);
        if c.pending_out() > OUTPUT_SOFT_LIMIT {
            // Wait for WRITABLE; unread input stays in the socket (on an
            // I/O thread: its thread is asked to stop reading, and says
            // when the replies drained).
            steer_reading(srv, c);
            return false;
        }
        let mut eof = c.io.as_ref().is_some_and(|l| l.eof);
        let mut unread = false;
        if c.io.is_some() {
            // The I/O thread reads; its bytes are in the query buffer.
        } else if c.tls.is_some() && !c.close_after_reply && !c.paused {
            match read_tls_client(srv, c, &mut self.scratch) {
                Some((e, u)) => (eof, unread) = (e, u),
                None => return false,
            }
        } else if !c.close_after_reply && !c.paused {
            let limit = srv.config.query_buffer_limit;
            // Read into the zeroed scratch buffer and copy what came:
            // zero-filling the query buffer's spare room before every read
            // cost a 16 KiB memset per request at pipeline depth 1.
            while let Some(sock) = c.sock.as_mut() {
                let room = self.scratch.len();
                let r = sock.read(&mut self.scratch[..]);
                if let Ok(n) = r {
                    c.qbuf.extend_from_slice(&self.scratch[..n]);
                }
                match r {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => {
                        srv.net_reads += 1;
                        c.net_in += n as u64;
                        srv.net.read(c.repl_role, n as u64);
                        if c.qbuf.len() - c.qpos > limit {
                            c.close_asap = true;
                            srv.client_kills += 1;
                            return false;
                        }
                        c.qbuf_peak = c.qbuf_peak.max(c.qbuf.len());
                        if c.qbuf.len() - c.qpos >= READ_CHUNK {
                            // Run what we have before reading more, so a fast
                            // writer cannot grow the buffer without bound. The
                            // socket was not drained: epoll is edge-triggered,
                            // so no event will say so; come back ourselves.
                            unread = true;
                            break;
                        }
                        if n < room && !c.peer_closed {
                            // A short read took everything the socket held;
                            // data arriving later raises a new edge, so the
                            // extra read that would only say WouldBlock (one
                            // syscall per request at pipeline depth 1) is
                            // skipped. Not so once the peer has closed: the
                            // edge that said so is spent, and the end of the
                            // stream (or the reset) behind the last request
                            // must be read now, or a client that pipelined
                            // a blocking command before closing would stay
                            // blocked, unseen, forever.
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => {
                        c.close_asap = true;
                        return false;
                    }
                }
            }
        }
        let ran_all = process_input(srv, &mut self.shell, c);
        if crate::obuf::enforce(srv, c) {
            // The replies never leave: the client is dropped, as Redis
            // drops one whose output passes its limit.
            return false;
        }
        if crate::clientevict::after_turn(srv, c) {
            return false;
        }
        if srv.aof.has_pending() {
            self.held.push(c.id);
        } else {
            flush(srv, c);
        }
        if eof && c.pending_out() == 0 {
            c.close_asap = true;
            return false;
        }
        if eof {
            c.close_after_reply = true;
        }
        if c.io.is_some() {
            steer_reading(srv, c);
            // New input comes as events; a client that stopped early is
            // served again when the reason goes (unpaused, woken, drained).
            return false;
        }
        // More to do if input is waiting (read stopped early or paused
        // commands) and output is not backed up.
        let input_left = c.qbuf.len() > c.qpos;
        !c.close_asap && !eof && (input_left || unread || !ran_all) && c.pending_out() <= OUTPUT_SOFT_LIMIT && !c.paused && !c.blocked
    }

    /// Closes clients marked for closing and flushes replies pushed to them
    /// by others. Looks only at `served` unless a command touched other
    /// clients (or `served` is None, as after cron): scanning every client
    /// each turn cost O(clients) per turn at pipeline depth 1.
    fn close_marked(&mut self, srv: &mut Server, served: Option<&[ClientId]>) {
        let all: Vec<ClientId>;
        let woken = std::mem::take(&mut srv.woken);
        let ids = match served {
            Some(ids) if !srv.sweep_clients && woken.is_empty() => ids,
            Some(ids) if !srv.sweep_clients => {
                all = ids.iter().chain(&woken).copied().collect::<HashSet<_>>().into_iter().collect();
                &all
            }
            _ => {
                srv.sweep_clients = false;
                all = srv.clients.keys().copied().collect();
                &all
            }
        };
        // Clients that got replies pushed by others (MONITOR, Pub/Sub) need a
        // write. Not a client of an I/O thread whose replies are all handed
        // over: recounting it while its thread writes would weigh that reply
        // twice (in flight and in the buffer its turn counted). One look at
        // each client finds both kinds; closing a client can push replies
        // to others, so after a close they are looked for again.
        let (mut dead, mut flush_ids) = (Vec::new(), Vec::new());
        for c in ids.iter().filter_map(|id| srv.clients.get(id)) {
            if c.close_asap || (c.close_after_reply && c.out_settled()) {
                dead.push(c.id);
            } else if !c.out_settled() {
                flush_ids.push(c.id);
            }
        }
        if !dead.is_empty() {
            for id in dead {
                close_client(srv, self.poll.registry(), id);
            }
            flush_ids = ids.iter().filter(|id| srv.clients.get(id).is_some_and(|c| !c.out_settled())).copied().collect();
        }
        let evicted_before = srv.evicted_clients;
        for id in flush_ids {
            if let Some(mut c) = srv.clients.take(&id) {
                flush(srv, &mut c);
                srv.clients.put(id, c);
            }
            crate::clientevict::after_push(srv, id);
        }
        // Clients that eviction chose just now go at once, as Redis frees
        // them before it sleeps: CLIENT LIST never lists them afterwards.
        if srv.evicted_clients != evicted_before {
            self.close_evicted(srv);
        }
    }

    /// Closes the clients marked for closing, after an eviction chose
    /// some (the running one, out of the registry, goes when its turn ends).
    fn close_evicted(&mut self, srv: &mut Server) {
        let evicted: Vec<ClientId> = srv.clients.values().filter(|c| c.close_asap).map(|c| c.id).collect();
        for id in evicted {
            close_client(srv, self.poll.registry(), id);
        }
    }
}

/// Reads and decrypts what a TLS client sent into its query buffer.
/// Returns (end of stream, socket not drained), or None when the client
/// was marked for closing (TLS failure, query buffer limit).
fn read_tls_client(srv: &mut Server, c: &mut Client, scratch: &mut [u8]) -> Option<(bool, bool)> {
    let (Some(sock), Some(t)) = (c.sock.as_mut(), c.tls.as_mut()) else { return Some((false, false)) };
    let r = match t.read(sock, scratch, &mut c.qbuf, READ_CHUNK, c.peer_closed) {
        Ok(r) => r,
        Err(_) => {
            c.close_asap = true;
            return None;
        }
    };
    if r.net_bytes > 0 {
        srv.net_reads += 1;
        c.net_in += r.net_bytes as u64;
        srv.net.read(c.repl_role, r.net_bytes as u64);
    }
    if c.qbuf.len() - c.qpos > srv.config.query_buffer_limit {
        c.close_asap = true;
        srv.client_kills += 1;
        return None;
    }
    c.qbuf_peak = c.qbuf_peak.max(c.qbuf.len());
    // Handshake messages rustls queued go out now, replies or not.
    if t.wants_write() {
        flush(srv, c);
    }
    Some((r.eof, r.unread))
}

/// Closes client `id` and forgets it everywhere.
fn close_client(srv: &mut Server, registry: &mio::Registry, id: ClientId) {
    if let Some(mut c) = srv.clients.remove(&id) {
        if let (Some(link), Some(io)) = (c.io.as_ref(), srv.io.as_mut()) {
            // The thread writes what it holds first unless the client is
            // dropped (killed, over a limit, failed).
            io.push(link.thread, crate::iothread::ToIo::Close { id, flush: !c.close_asap });
            io.release(link.thread);
        }
        if let (Some(t), Some(s)) = (c.tls.as_mut(), c.sock.as_mut()) {
            t.close(s);
        }
        if let Some(mut s) = c.sock.take() {
            let _ = registry.deregister(&mut s);
        }
        crate::clientevict::forget(srv, &mut c);
        srv.unwatch_all(&mut c);
        srv.pubsub.forget(&mut c);
        if srv.tracking.disable(&mut c) {
            srv.apply_notify_flags();
        }
        srv.monitors.retain(|&m| m != id);
        srv.blocking.forget(id);
        crate::replication::client_closed(srv, &c);
        crate::migration::client_closed(srv, &c);
        srv.reports.forget(id);
    }
}

/// Parses and runs every complete request in the client's buffer.
/// Returns false if it stopped early (paused, or output backed up).
pub fn process_input(srv: &mut Server, host: &mut dyn Host, c: &mut Client) -> bool {
    let mut limits = Limits { max_bulk_len: srv.config.proto_max_bulk_len, unauthenticated: false };
    let mut all = true;
    c.paused = false;
    // Requests parsed ahead of the one running (see `parse_ahead`); the
    // query buffer's position stays that of the request running, so every
    // rule below sees the buffer as if requests were parsed one at a time.
    let mut ahead = Ahead::new();
    c.qbuf_want = 0;
    loop {
        // A blocked client's later requests wait until it is answered;
        // after a shutdown nothing more runs (Redis has exited by then).
        if c.close_after_reply || c.close_asap || c.blocked || srv.shutdown {
            break;
        }
        if c.pending_out() > OUTPUT_SOFT_LIMIT {
            all = false;
            break;
        }
        limits.unauthenticated = !c.authenticated && srv.acl.auth_required();
        if ahead.unauthenticated != limits.unauthenticated {
            // AUTH, HELLO or RESET changed the limits the rest was parsed
            // under: parse it again under the new ones.
            ahead.rewind(c);
        }
        // A request parsed ahead follows the command before it with
        // nothing in between but this loop: it starts where that one ended
        // (a clock reading costs about as much as a GET's lookup).
        let ended = srv.last_cmd_end.take();
        let (start, parsed, at, clock) = match ahead.reqs.pop_front() {
            Some(q) => {
                c.qpos = q.end;
                (q.start, q.parsed, q.at, ended)
            }
            None => {
                let (start, parsed, at) = parse_ahead(srv, host, c, &limits, &mut ahead);
                (start, parsed, at, None)
            }
        };
        if c.repl_role == ReplRole::Primary {
            c.repl_cmd.extend_from_slice(&c.qbuf[start..c.qpos]);
        }
        match parsed {
            Ok(Parsed::Command(argv)) => {
                if argv.is_empty() {
                    if c.repl_role == ReplRole::Primary {
                        let bytes = std::mem::take(&mut c.repl_cmd);
                        crate::replication::feed_raw(srv, &bytes);
                    }
                    continue;
                }
                c.cur_cmd_len = c.qpos - start;
                let ran = match c.repl_role {
                    ReplRole::Primary => apply_from_primary(srv, host, c, argv),
                    ReplRole::Replica => from_replica(srv, host, c, argv),
                    ReplRole::None if c.slot_import => crate::migration::apply_from_source(srv, host, c, argv),
                    ReplRole::None => dispatch::call_at(srv, host, c, argv, at, clock),
                };
                c.cur_cmd_len = 0;
                if !ran {
                    // Paused: rewind so the request runs again later.
                    c.repl_cmd.clear();
                    ahead.reqs.clear();
                    c.qpos = start;
                    c.parser = resp::Parser::new();
                    c.paused = true;
                    all = false;
                    break;
                }
            }
            Ok(Parsed::Incomplete { want }) => {
                if want > READ_CHUNK {
                    c.qbuf_want = c.qbuf.len() - c.qpos + want;
                    // A borrowed shared buffer is not grown: its leftover
                    // goes to a private buffer of this room as the turn
                    // ends (`serve`).
                    if !c.qbuf_shared {
                        c.qbuf.reserve_exact(want);
                    }
                }
                break;
            }
            Err(e) => {
                let msg = format!("ERR {e}");
                exec::reply_error(srv, c, &CmdError::Custom(msg));
                c.close_after_reply = true;
                break;
            }
        }
    }
    ahead.rewind(c);
    if let Some(l) = c.io.as_mut().filter(|l| l.reqs.is_empty() && l.reqs.capacity() > 0) {
        // Keep no room between inputs (each comes with its own, moved in),
        // so used_memory does not depend on how the last pipeline was cut.
        l.reqs = Default::default();
    }
    if c.qpos > 0 {
        if let Some(l) = c.io.as_mut() {
            l.qbase = l.qbase.wrapping_add(c.qpos as u64);
        }
        c.qbuf.drain(..c.qpos);
        c.qpos = 0;
    }
    all
}

/// Parses the request at the query buffer's position, advancing it. For
/// a client of an I/O thread, the request the thread parsed there, when
/// there is one: the executor's parser is idle here (between requests),
/// the thread's request starts at this very byte, and it is within the
/// limits this client has now (the thread parses with none). Otherwise,
/// and for every byte the thread did not parse, the executor's parser, so
/// whatever consumes or rewinds the query buffer stays the one rule.
fn parse_one(c: &mut Client, limits: &Limits) -> (Result<Parsed, resp::ProtocolError>, Option<SpecAt>) {
    if let Some(l) = c.io.as_mut().filter(|l| !l.reqs.is_empty()) {
        if c.parser.is_idle() {
            let at = l.qbase.wrapping_add(c.qpos as u64);
            // Requests this position is past (run, or parsed here).
            while l.reqs.front().is_some_and(|r| (at.wrapping_sub(r.start) as i64) > 0) {
                l.pop_req();
            }
            let fits = |r: &crate::iothread::Req| {
                r.start == at
                    && (r.end - r.start) as usize <= c.qbuf.len() - c.qpos
                    && (!limits.unauthenticated
                        || (r.argv.len() as i64 <= resp::parse::UNAUTH_MULTIBULK_MAX && r.argv.iter().all(|a| a.len() as i64 <= resp::parse::UNAUTH_BULK_MAX)))
                    && r.argv.iter().all(|a| a.len() as i64 <= limits.max_bulk_len)
            };
            if l.reqs.front().is_some_and(fits) {
                let r = l.pop_req().expect("front checked");
                c.qpos += (r.end - r.start) as usize;
                return (Ok(Parsed::Command(r.argv)), r.at);
            }
        }
    }
    (c.parser.parse(&c.qbuf, &mut c.qpos, limits), None)
}

/// Most requests `parse_ahead` parses past the one about to run.
const AHEAD_MAX: usize = 15;

/// Requests parsed ahead of the running one.
struct Ahead {
    reqs: std::collections::VecDeque<Queued>,
    /// The unauthenticated limits they were parsed under.
    unauthenticated: bool,
}

/// A request parsed ahead: where it starts and ends in the query buffer,
/// what the parser said (a command, or the incomplete request or protocol
/// error that ended the batch) and where the prefetch found its command in
/// the table.
struct Queued {
    start: usize,
    end: usize,
    parsed: Result<Parsed, resp::ProtocolError>,
    at: Option<SpecAt>,
}

thread_local! {
    /// The queue of the last `Ahead` that held requests on this thread,
    /// empty, kept for the next: a pipelined batch otherwise grew a new one
    /// (three reallocations to 16 entries, about 75 instructions a request
    /// at -P 16). Taken only once a request is parsed ahead: at pipeline
    /// depth 1 none is, and taking and giving it back cost about 50
    /// instructions a request.
    static AHEAD_SPARE: std::cell::Cell<std::collections::VecDeque<Queued>> = const { std::cell::Cell::new(std::collections::VecDeque::new()) };
}

impl Drop for Ahead {
    fn drop(&mut self) {
        if self.reqs.capacity() > 0 {
            self.reqs.clear();
            AHEAD_SPARE.set(std::mem::take(&mut self.reqs));
        }
    }
}

impl Ahead {
    fn new() -> Ahead {
        Ahead { reqs: std::collections::VecDeque::new(), unauthenticated: false }
    }

    /// Queues a request parsed ahead.
    fn push(&mut self, q: Queued) {
        if self.reqs.capacity() == 0 {
            self.reqs = AHEAD_SPARE.take();
        }
        self.reqs.push_back(q);
    }

    /// Forgets the requests parsed ahead that did not run: the query
    /// buffer goes back to the first of them, which starts between two
    /// requests, so the parser starts afresh there (whatever it had read
    /// of a later, incomplete one is read again).
    fn rewind(&mut self, c: &mut Client) {
        if let Some(&Queued { start, .. }) = self.reqs.front() {
            c.qpos = start;
            c.parser = resp::Parser::new();
            self.reqs.clear();
        }
    }
}

/// Parses the next request at the query buffer's position and returns
/// where it starts and what it is. When it is a command and more bytes
/// follow (a pipeline), parses up to `AHEAD_MAX` more into `ahead` and
/// prefetches the table slots and values of the keys they name, so that
/// the cache misses of a batch overlap instead of each command waiting
/// for its own in turn (Valkey 8's batched prefetch). The query buffer's
/// position is left at the end of the returned request. Also returns
/// where the prefetch found the request's command, if it looked.
fn parse_ahead(srv: &Server, host: &dyn Host, c: &mut Client, limits: &Limits, ahead: &mut Ahead) -> (usize, Result<Parsed, resp::ProtocolError>, Option<SpecAt>) {
    let start = c.qpos;
    let (first, first_at) = parse_one(c, limits);
    let Ok(Parsed::Command(argv)) = &first else { return (start, first, None) };
    if c.qpos >= c.qbuf.len() {
        return (start, first, first_at);
    }
    let first_end = c.qpos;
    ahead.unauthenticated = limits.unauthenticated;
    while ahead.reqs.len() < AHEAD_MAX && c.qpos < c.qbuf.len() {
        let from = c.qpos;
        let (parsed, at) = parse_one(c, limits);
        let more = matches!(parsed, Ok(Parsed::Command(_)));
        ahead.push(Queued { start: from, end: c.qpos, parsed, at });
        if !more {
            break;
        }
    }
    let Some(db) = srv.dbs.get(c.db) else {
        c.qpos = first_end;
        return (start, first, first_at);
    };
    let mut keys: [&[u8]; storage::keyspace::PREFETCH_MAX] = [&[]; storage::keyspace::PREFETCH_MAX];
    let mut found = [None; AHEAD_MAX + 1];
    found[0] = first_at;
    for (f, q) in found[1..].iter_mut().zip(&ahead.reqs) {
        *f = q.at;
    }
    let mut n = 0;
    let table = host.table();
    let argvs = ahead.reqs.iter().map(|q| match &q.parsed {
        Ok(Parsed::Command(a)) => Some(a),
        _ => None,
    });
    for (argv, at) in std::iter::once(Some(argv)).chain(argvs).zip(found.iter_mut()) {
        if let Some(argv) = argv {
            (n, *at) = exec::key_args(table, argv, *at, &mut keys, n);
        }
    }
    db.prefetch(&keys[..n]);
    for (req, at) in ahead.reqs.iter_mut().zip(&found[1..]) {
        req.at = *at;
    }
    c.qpos = first_end;
    (start, first, found[0])
}

/// Prefetches the keys of the request of each of `ids` that has exactly
/// one from its I/O thread, before any of them runs. At pipeline depth 1
/// every client of a turn sends one request, so `parse_ahead` has no batch
/// to prefetch within a client; across the turn's clients the lookups'
/// cache misses overlap instead (Valkey 8's batch prefetch over its I/O
/// threads' jobs). A client with more is left to `parse_ahead`, which
/// prefetches its first request with the ones behind it.
fn prefetch_first(srv: &Server, table: &CommandMap, ids: &[ClientId]) {
    const MAX: usize = storage::keyspace::PREFETCH_MAX;
    let mut keys: [&[u8]; MAX] = [&[]; MAX];
    let (mut n, mut db) = (0, 0);
    for id in ids {
        let Some(c) = srv.clients.get(id) else { continue };
        let Some(req) = c.io.as_ref().filter(|l| l.reqs.len() == 1).and_then(|l| l.reqs.front()) else { continue };
        if n == MAX || (n > 0 && c.db != db) {
            srv.dbs[db].prefetch(&keys[..n]);
            n = 0;
        }
        db = c.db;
        n = exec::key_args(table, &req.argv, req.at, &mut keys, n).0;
    }
    if n > 0 {
        srv.dbs[db].prefetch(&keys[..n]);
    }
}

/// Runs a command a replica of this server sent. Its connection carries
/// the stream, so a command that replies (anything but REPLCONF) gets the
/// replica disconnected, with Redis's warnings; the reply is dropped.
fn from_replica(srv: &mut Server, host: &mut dyn Host, c: &mut Client, argv: Vec<Vec<u8>>) -> bool {
    let mark = c.reply.buf.len().max(c.sent);
    let name = match exec::lookup(host.table(), &argv) {
        exec::Lookup::Found(spec) => spec.full_name,
        _ => "<unknown>",
    };
    let ran = dispatch::call(srv, host, c, argv);
    if c.reply.buf.len() <= mark {
        return ran;
    }
    let text = crate::log::first_line(&c.reply.buf[mark..]);
    if let Some(err) = text.strip_prefix('-') {
        srv.unexpected_error(crate::server::ErrorTo::Replica, err, name);
    }
    srv.config.log.warning(&format!("Replica generated a reply to command '{name}', disconnecting it: {text}"));
    c.reply.buf.truncate(mark);
    c.close_asap = true;
    srv.sweep_clients = true;
    ran
}

/// Runs one command of the primary's stream: no reply goes back (but
/// REPLCONF GETACK's ACK), due keys are live to it (the primary decides
/// when a key expires and sends a DEL then, as Redis's replica treats
/// keys for its primary), and the command's bytes count into the offset
/// and go on to this server's backlog and replicas, as they came.
fn apply_from_primary(srv: &mut Server, host: &mut dyn Host, c: &mut Client, argv: Vec<Vec<u8>>) -> bool {
    // A script past its time limit holds the primary's stream, as Redis's
    // replica holds it: the commands wait in the query buffer and run, in
    // order, once the script ends, rather than being answered -BUSY and
    // lost.
    if srv.script.is_some_and(|r| r.timed_out) {
        return false;
    }
    let mark = c.reply.buf.len();
    let offset_before = srv.repl.offset;
    for db in &mut srv.dbs {
        db.ignore_deadlines = true;
    }
    let getack = argv.len() >= 2 && argv[0].eq_ignore_ascii_case(b"replconf") && argv[1].eq_ignore_ascii_case(b"getack");
    let name = match exec::lookup(host.table(), &argv) {
        exec::Lookup::Found(spec) => spec.full_name,
        _ => "<unknown>",
    };
    let ran = if getack { true } else { dispatch::call(srv, host, c, argv) };
    for db in &mut srv.dbs {
        db.ignore_deadlines = false;
    }
    if !ran {
        return false;
    }
    // An error in reply to the primary's stream means the data diverged:
    // logged, and fatal where propagation-error-behavior says so.
    let start = mark.max(c.sent);
    if c.reply.buf.get(start) == Some(&b'-') {
        let text = crate::log::first_line(&c.reply.buf[start + 1..]);
        srv.unexpected_error(crate::server::ErrorTo::Primary, &text, name);
    }
    c.reply.buf.truncate(start);
    if getack {
        c.reply.raw(&crate::replication::ack_command(offset_before, srv.repl.fsynced));
    }
    crate::replication::drain(srv);
    let bytes = std::mem::take(&mut c.repl_cmd);
    crate::replication::feed_raw(srv, &bytes);
    if let Some(p) = srv.repl.primary.as_mut() {
        p.last_io = Instant::now();
    }
    true
}

/// Most bytes of a bulk file one flush reads into a reply: the socket
/// normally stops taking them well before; past this the client is woken
/// for the next turn, so one fast reader cannot hold the event loop.
const BULK_PER_FLUSH: usize = 32 << 20;

/// Writes as much pending reply as the socket takes, then as much of a
/// bulk file (`Client::bulk`) or, for a replica, of the replication
/// stream it has not been sent (`replication::refill`) as it goes on
/// taking.
pub fn flush(srv: &mut Server, c: &mut Client) {
    c.reply_room.note(c.reply.buf.len());
    if c.io.is_some() {
        hand_over(srv, c);
        return;
    }
    let mut budget = BULK_PER_FLUSH;
    let mut streamed = false;
    loop {
        if c.tls.is_some() {
            flush_tls(srv, c);
        } else {
            flush_plain(srv, c);
        }
        if c.close_asap || c.sent < c.reply.buf.len() {
            break;
        }
        if c.bulk.is_none() {
            if c.repl_role != ReplRole::Replica {
                return;
            }
            // A replica: the next chunk of the stream, from the shared
            // buffer. Past the budget it waits in the output buffer, and
            // the client is woken to write it.
            let n = crate::replication::refill(srv, c, crate::replication::REFILL);
            if n == 0 {
                break;
            }
            streamed = true;
            if budget <= n {
                srv.woken.push(c.id);
                break;
            }
            budget -= n;
            continue;
        }
        if budget == 0 {
            srv.woken.push(c.id);
            return;
        }
        let before = c.reply.buf.len();
        match c.refill_bulk() {
            Ok(true) => budget = budget.saturating_sub(c.reply.buf.len() - before),
            Ok(false) => return,
            Err(e) => {
                srv.config.log.warning(&format!("Failed to send the image to client {}: {e}", c.addr));
                c.bulk = None;
                c.close_asap = true;
                srv.sweep_clients = true;
                return;
            }
        }
    }
    if streamed {
        // The blocks it was the last to need go.
        crate::replication::trim(srv);
    }
}

/// `flush` for a client on an I/O thread: its pending reply goes to the
/// thread (the buffer itself when nothing of it was written here), to
/// leave with this turn's batch. A client that now needs this thread's
/// loop for its socket (a replica, a bulk file, a slot export) asks for
/// the socket back instead and keeps its reply until it comes.
fn hand_over(srv: &mut Server, c: &mut Client) {
    let Some(link) = c.io.as_mut() else { return };
    if link.returning {
        return;
    }
    // With DEBUG REPLYBUFFER RESIZING 0 the client keeps a buffer as large
    // as the one handed over (within its room), as the event loop's own
    // clients keep theirs: its weight does not move with each reply.
    let fresh = if srv.reply_resizing { REPLY_FRESH } else { c.reply.buf.capacity().min(c.reply_room.size) };
    let Some(io) = srv.io.as_mut() else { return };
    if c.repl_role != ReplRole::None || c.bulk.is_some() || c.slot_export {
        link.returning = true;
        io.push(link.thread, crate::iothread::ToIo::GiveBack { id: c.id });
        return;
    }
    let n = c.reply.buf.len() - c.sent;
    if n == 0 {
        return;
    }
    let buf = if c.sent == 0 {
        // The next reply starts in a buffer with room for a small one:
        // growing an empty one took two or three reallocations per request
        // at pipeline depth 1. Always the same room, so that a client's
        // memory between its commands does not depend on its last reply.
        std::mem::replace(&mut c.reply.buf, Vec::with_capacity(fresh))
    } else {
        let rest = c.reply.buf[c.sent..].to_vec();
        c.reply.buf.clear();
        rest
    };
    c.sent = 0;
    io.write(link.thread, c.id, buf, n, &link.queued);
    srv.net_writes += 1;
    c.net_out += n as u64;
    srv.net.written(c.repl_role, n as u64);
}

/// Asks a client's I/O thread to stop reading it while it cannot run what
/// it sent (paused, blocked, replies backed up, closing) and a chunk of
/// input already waits, so that the socket, not the query buffer, holds
/// the rest (back-pressure); and to read again once it can.
fn steer_reading(srv: &mut Server, c: &mut Client) {
    let Some(link) = c.io.as_mut() else { return };
    let stuck = c.paused || c.blocked || c.close_after_reply || c.reply.buf.len() - c.sent + link.queued() > OUTPUT_SOFT_LIMIT;
    let want = !(stuck && c.qbuf.len() - c.qpos >= READ_CHUNK);
    if want != link.reading {
        link.reading = want;
        if let Some(io) = srv.io.as_mut() {
            io.push(link.thread, crate::iothread::ToIo::Reading { id: c.id, on: want });
        }
    }
    // The thread stopped at its window: more input may come once what it
    // sent has been taken in (whatever is left is one unfinished request).
    if !stuck && link.delivered >= crate::iothread::READ_WINDOW {
        link.delivered = 0;
        // Where the thread may parse again, if it stopped (a big request).
        let idle_at = if c.qpos == c.qbuf.len() && c.parser.is_idle() { link.qbase.wrapping_add(c.qpos as u64) } else { u64::MAX };
        if let Some(io) = srv.io.as_mut() {
            io.push(link.thread, crate::iothread::ToIo::Grant { id: c.id, idle_at });
        }
    }
}

/// Takes what the I/O threads sent: input appended to query buffers (the
/// query buffer limit checked as a read here checks it), ends of streams,
/// failures, drained outputs, and sockets given back (registered with
/// this loop's `registry`, their unwritten replies first). `ready` gets
/// each client to serve, in the order the news came.
fn take_io(srv: &mut Server, registry: &mio::Registry, ready: &mut dyn FnMut(ClientId)) {
    use crate::iothread::FromIo;
    let Some(mut io) = srv.io.take() else { return };
    let mut back = Vec::new();
    let counting = crate::clientevict::enabled(srv);
    io.recv(|m| match m {
        FromIo::Input { id, buf, reqs } => {
            let Some(c) = srv.clients.get_mut(&id) else { return };
            // Bytes past the last whole request the thread parsed: what the
            // client will still hold once this turn has run its requests.
            let mut tail = buf.len();
            if let Some(l) = c.io.as_mut() {
                let start = l.delivered as u64;
                l.delivered += buf.len();
                if let Some(r) = reqs.last() {
                    tail -= (r.end.max(start) - start).min(buf.len() as u64) as usize;
                }
                l.push_reqs(reqs);
            }
            if counting {
                srv.client_mem += crate::clientevict::arrived(c, tail);
            }
            srv.net_reads += 1;
            c.net_in += buf.len() as u64;
            srv.net.read(c.repl_role, buf.len() as u64);
            if c.qbuf.is_empty() {
                c.qbuf = buf;
            } else {
                // Exact room, as for a big argument (`process_input`):
                // doubling would leave a client holding one argument with
                // up to twice its size, and so weigh more than another
                // holding the same (what maxmemory-clients compares). A
                // thread sends at most READ_WINDOW before the executor
                // parses, so the copies stay bounded.
                c.qbuf.reserve_exact(buf.len());
                c.qbuf.extend_from_slice(&buf);
            }
            if c.qbuf.len() - c.qpos > srv.config.query_buffer_limit && !c.close_asap {
                c.close_asap = true;
                srv.client_kills += 1;
            }
            c.qbuf_peak = c.qbuf_peak.max(c.qbuf.len());
            ready(id);
        }
        FromIo::Eof { id } => {
            if let Some(c) = srv.clients.get_mut(&id) {
                c.peer_closed = true;
                if let Some(l) = c.io.as_mut() {
                    l.eof = true;
                }
                ready(id);
            }
        }
        FromIo::Failed { id } => {
            if let Some(c) = srv.clients.get_mut(&id) {
                c.close_asap = true;
                ready(id);
            }
        }
        FromIo::Drained { id } => {
            if srv.clients.contains_key(&id) {
                ready(id);
            }
        }
        FromIo::Returned { id, mut conn, tls, unwritten } => {
            let Some(c) = srv.clients.get_mut(&id) else { return };
            if registry.register(&mut conn, Token(id as usize), Interest::READABLE | Interest::WRITABLE).is_err() {
                c.close_asap = true;
                if let Some(l) = c.io.take() {
                    back.push(l.thread);
                }
                ready(id);
                return;
            }
            let eof = c.io.as_ref().is_some_and(|l| l.eof);
            if let Some(l) = c.io.take() {
                back.push(l.thread);
            }
            c.peer_closed |= eof;
            if c.repl_role == ReplRole::Replica && srv.config.flag("repl-disable-tcp-nodelay") {
                conn.set_nodelay(false);
            }
            let mut out = unwritten;
            out.extend_from_slice(&c.reply.buf[c.sent..]);
            c.reply.buf = out;
            c.sent = 0;
            c.sock = Some(conn);
            c.tls = tls;
            ready(id);
        }
    });
    for t in back {
        io.release(t);
    }
    srv.io = Some(io);
    if counting {
        crate::clientevict::evict_now(srv);
    }
}

/// Whether a client on this thread's own socket can move to an I/O
/// thread (`rebalance_io`).
#[derive(Debug, PartialEq, Eq)]
enum Move {
    /// It is quiet: nothing unread, unparsed or unwritten, nothing waited
    /// for, so its stream starts afresh on the thread.
    Now,
    /// Not yet: its state needs this thread's loop for now.
    Later,
    /// It never moves: a replica, the primary, a slot migration's link,
    /// or no socket at all.
    Never,
}

fn movable(c: &Client) -> Move {
    if c.sock.is_none() || c.repl_role != ReplRole::None || c.slot_export || c.slot_import {
        return Move::Never;
    }
    let quiet = c.bulk.is_none()
        && !c.close_asap
        && !c.close_after_reply
        && !c.peer_closed
        && !c.blocked
        && !c.paused
        && c.sent == c.reply.buf.len()
        && !c.tls.as_ref().is_some_and(|t| t.wants_write())
        && c.qpos == c.qbuf.len()
        && c.parser.is_idle()
        && c.repl_cmd.is_empty();
    if quiet {
        Move::Now
    } else {
        Move::Later
    }
}

/// After CONFIG SET io-threads, between commands (the cron's, while
/// `srv.io_rebalance`): asks the clients of retiring threads back (as
/// `hand_over` does for a replica; `take_io` registers them here); moves
/// each quiet client of this thread's own sockets, those that came back
/// included, to the live thread with the fewest clients, so that a pool
/// of long-lived connections uses the new threads; and ends the retired
/// threads that hold nobody (with none left, `srv.io` goes, and
/// io-threads 1 costs what it always did). Stays due while a client that
/// may move is not quiet yet or a thread still retires; after its first
/// pass over every client it looks only at those (`srv.io_moving`).
fn rebalance_io(srv: &mut Server, registry: &mio::Registry) {
    let Some(mut io) = srv.io.take() else {
        srv.io_rebalance = false;
        srv.io_moving = None;
        return;
    };
    let ids = srv.io_moving.take().unwrap_or_else(|| srv.clients.keys().copied().collect());
    let mut again = Vec::new();
    for id in ids {
        let Some(c) = srv.clients.get_mut(&id) else { continue };
        match c.io.as_mut() {
            Some(l) if io.retiring(l.thread) => {
                if !l.returning {
                    l.returning = true;
                    io.push(l.thread, crate::iothread::ToIo::GiveBack { id });
                }
                // Once back, it moves on to a live thread.
                again.push(id);
            }
            Some(_) => {}
            None if io.live() == 0 => {}
            None => match movable(c) {
                Move::Never => {}
                Move::Later => again.push(id),
                Move::Now => {
                    // Neither fails: a thread is live, a movable client has
                    // a socket.
                    let Some(t) = io.assign() else { continue };
                    let Some(mut conn) = c.sock.take() else {
                        io.release(t);
                        continue;
                    };
                    let _ = registry.deregister(&mut conn);
                    let mut l = crate::client::IoLink::new(t, conn.is_unix());
                    l.tls = c.tls.is_some();
                    io.push(t, crate::iothread::ToIo::Adopt { id: c.id, conn, tls: c.tls.take(), queued: l.queued.clone() });
                    // The thread counts the stream from its first read.
                    c.qbuf = Vec::new();
                    c.qpos = 0;
                    c.io = Some(l);
                }
            },
        }
    }
    let (reads, writes) = io.end_retired();
    srv.io_ended.0 += reads;
    srv.io_ended.1 += writes;
    srv.io_rebalance = !again.is_empty() || io.len() > io.live();
    srv.io_moving = Some(again);
    if !io.is_empty() {
        srv.io = Some(io);
    }
}

fn flush_plain(srv: &mut Server, c: &mut Client) {
    let Some(sock) = c.sock.as_mut() else { return };
    while c.sent < c.reply.buf.len() {
        match write_some(sock, &c.reply.buf[c.sent..]) {
            Ok(0) => break,
            Ok(n) => {
                srv.net_writes += 1;
                c.sent += n;
                c.net_out += n as u64;
                srv.net.written(c.repl_role, n as u64);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                c.close_asap = true;
                break;
            }
        }
    }
    settle_reply(c);
}

/// Room of the reply buffer a client of an I/O thread gets when its last
/// one was handed over: a status, an integer or a short bulk reply fits.
const REPLY_FRESH: usize = 64;

/// Drops what was written from the reply buffer (all of it, or a large
/// written head), cutting a buffer a big reply grew back to the client's
/// room (`ReplyRoom`), so used_memory does not keep the largest reply
/// each client ever had.
fn settle_reply(c: &mut Client) {
    if c.sent == c.reply.buf.len() {
        c.sent = 0;
        if c.reply.buf.capacity() > c.reply_room.size {
            c.reply.buf = Vec::with_capacity(c.reply_room.size);
        } else {
            c.reply.buf.clear();
        }
    } else if c.sent > 1 << 20 {
        c.reply.buf.drain(..c.sent);
        c.sent = 0;
    }
}

/// `flush` for a TLS client: what rustls holds goes first, then as much of
/// the reply as it takes; what neither the session nor the socket took
/// waits for WRITABLE.
fn flush_tls(srv: &mut Server, c: &mut Client) {
    let (Some(sock), Some(t)) = (c.sock.as_mut(), c.tls.as_mut()) else { return };
    match t.write(sock, &c.reply.buf[c.sent..]) {
        Ok((taken, sent)) => {
            c.sent += taken;
            if sent > 0 {
                srv.net_writes += 1;
                c.net_out += sent as u64;
                srv.net.written(c.repl_role, sent as u64);
            }
        }
        Err(_) => c.close_asap = true,
    }
    settle_reply(c);
}

fn write_some(sock: &mut Conn, buf: &[u8]) -> io::Result<usize> {
    sock.write(buf)
}

/// A `bind` address could not be listened on (the reason is logged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenFailed;

/// Opens a listening socket on `port` for every address of `bind` (a
/// `bind` value: `*` is every IPv4 address, `::*` every IPv6 one, a leading
/// `-` marks an address that may be unavailable), as Redis does: IPv6
/// sockets are IPv6-only, `backlog` is tcp-backlog, and each failure is
/// logged with Redis's warning. Port 0 opens none.
///
/// Errors: an address could not be bound (already logged); the caller
/// logs Redis's "Failed listening" line and exits.
/// How listening sockets are made: `tcp-backlog`, and `socket-mark-id`
/// (SO_MARK, for firewall and routing rules; 0 none), which Redis sets on
/// its listening sockets and accepted connections take from them. Setting
/// a mark needs CAP_NET_ADMIN: without it the socket stays unmarked, as
/// Redis leaves it.
pub struct ListenOpts {
    pub backlog: i32,
    pub mark: u32,
}

impl ListenOpts {
    pub fn from_config(config: &crate::config::Config) -> ListenOpts {
        ListenOpts {
            backlog: config.get("tcp-backlog").and_then(|v| v.parse().ok()).unwrap_or(511),
            mark: config.get("socket-mark-id").and_then(|v| v.parse().ok()).unwrap_or(0),
        }
    }
}

pub fn listen(bind: &str, port: u16, opts: &ListenOpts, log: &Log) -> Result<Vec<std::net::TcpListener>, ListenFailed> {
    use socket2::{Domain, Socket, Type};
    // Linux errno values that make Redis skip an address instead of failing.
    const ENOPROTOOPT: i32 = 92;
    const EPROTONOSUPPORT: i32 = 93;
    const ESOCKTNOSUPPORT: i32 = 94;
    const EPFNOSUPPORT: i32 = 96;
    const EAFNOSUPPORT: i32 = 97;
    const EADDRNOTAVAIL: i32 = 99;
    let mut out = Vec::new();
    if port == 0 {
        return Ok(out);
    }
    for item in bind.split_whitespace() {
        let optional = item.starts_with('-');
        let host = item.trim_start_matches('-');
        let open = || -> Result<std::net::TcpListener, (&'static str, io::Error)> {
            let addr = match host {
                "*" => SocketAddr::from(([0, 0, 0, 0], port)),
                "::*" => SocketAddr::from(([0u16; 8], port)),
                h => match h.parse::<std::net::IpAddr>() {
                    Ok(ip) => SocketAddr::new(ip, port),
                    Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(h, port))
                        .map_err(|e| ("getaddrinfo", e))?
                        .next()
                        .ok_or(("getaddrinfo", io::Error::from(ErrorKind::AddrNotAvailable)))?,
                },
            };
            let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(|e| ("socket", e))?;
            let _ = sock.set_reuse_address(true);
            if addr.is_ipv6() {
                sock.set_only_v6(true).map_err(|e| ("setsockopt", e))?;
            }
            if opts.mark > 0 {
                let _ = sock.set_mark(opts.mark);
            }
            sock.bind(&addr.into()).map_err(|e| ("bind", e))?;
            sock.listen(opts.backlog).map_err(|e| ("listen", e))?;
            Ok(sock.into())
        };
        match open() {
            Ok(l) => out.push(l),
            Err((call, e)) => {
                log.warning(&format!("Warning: Could not create server TCP listening socket {host}:{port}: {call}: {}", crate::config::strerror(&e)));
                match e.raw_os_error() {
                    Some(EADDRNOTAVAIL) if optional => continue,
                    Some(ENOPROTOOPT | EPROTONOSUPPORT | ESOCKTNOSUPPORT | EPFNOSUPPORT | EAFNOSUPPORT) => continue,
                    _ => return Err(ListenFailed),
                }
            }
        }
    }
    Ok(out)
}

/// What a non-loopback client gets in protected mode (Redis's text).
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. \
In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: \
1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, \
however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. \
2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. \
3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. \
4) Set up an authentication password for the default user. \
NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Accepts every pending connection (turning away non-loopback clients in
/// protected mode, as Redis does).
///
/// Each listener takes at most max-new-connections-per-cycle connections
/// a call (max-new-tls-connections-per-cycle for TLS ones, whose
/// handshakes cost more), as Redis does, so a burst of connections does
/// not hold up the clients already served. Returns true if a listener
/// stopped at its limit: the caller calls again next turn.
pub fn accept(srv: &mut Server, a: &Acceptor) -> bool {
    let per_turn = |name: &str| srv.config.get(name).and_then(|v| v.parse().ok()).unwrap_or(10usize);
    let (plain, tls) = (per_turn("max-new-connections-per-cycle"), per_turn("max-new-tls-connections-per-cycle"));
    let mut more = false;
    for (i, listener) in a.listeners.iter().enumerate() {
        let is_tls = i >= a.tls_from;
        more |= accept_from(srv, listener, &a.registry, is_tls, if is_tls { tls } else { plain });
    }
    more | accept_unix(srv, a, plain)
}

/// Accepts what waits on the `unixsocket` listener. Such clients are
/// local: protected mode does not apply; their address is the path.
/// At most `max` of them; true if it stopped there.
fn accept_unix(srv: &mut Server, a: &Acceptor, max: usize) -> bool {
    let Some((listener, path)) = &a.unix else { return false };
    let mut taken = 0;
    while taken < max {
        match listener.accept() {
            Ok((sock, _)) => {
                taken += 1;
                let addr = format!("{path}:0");
                admit(srv, &a.registry, Conn::Unix(sock), addr.clone(), addr, None);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    true
}

/// Opens the `unixsocket` listener at `path` (a stale socket file there is
/// removed first, as Redis does) and gives it mode `perm` when not 0.
///
/// Errors: the bind or the chmod failed.
pub fn listen_unix(path: &str, perm: u32) -> io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
    let l = std::os::unix::net::UnixListener::bind(path)?;
    if perm != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(l)
}

/// Accepts at most `max` connections of `listener`; true if it stopped
/// there (more may wait).
fn accept_from(srv: &mut Server, listener: &TcpListener, registry: &mio::Registry, tls: bool, max: usize) -> bool {
    let mut taken = 0;
    while taken < max {
        match listener.accept() {
            Ok((mut sock, peer)) => {
                taken += 1;
                if srv.config.flag("protected-mode") && srv.acl.default_user().borrow().nopass && !peer.ip().is_loopback() {
                    // Protected mode: with no password, only loopback clients.
                    let _ = sock.write_all(PROTECTED_MODE_DENIED);
                    srv.rejected_connections += 1;
                    continue;
                }
                let session = match (tls, &srv.tls) {
                    (false, _) => None,
                    (true, Some(cfg)) => match crate::tls::Session::new(cfg) {
                        Ok(s) => Some(Box::new(s)),
                        Err(_) => continue,
                    },
                    (true, None) => continue,
                };
                let _ = sock.set_nodelay(true);
                crate::conn::keepalive(&sock, srv.config.tcp_keepalive());
                let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
                admit(srv, registry, Conn::Tcp(sock), peer.to_string(), laddr, session);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    true
}

/// Makes an accepted connection a client (with its TLS `session`, if any),
/// or refuses it with Redis's error once maxclients are connected.
fn admit(srv: &mut Server, registry: &mio::Registry, mut conn: Conn, addr: String, laddr: String, session: Option<Box<crate::tls::Session>>) {
    if srv.clients.len() >= srv.config.maxclients {
        let _ = conn.write_all(b"-ERR max number of clients reached\r\n");
        srv.rejected_connections += 1;
        return;
    }
    let id = srv.new_client_id();
    // With I/O threads, the socket (and its TLS session) goes to the
    // thread serving the fewest clients.
    let mut link = None;
    let mut sock = None;
    let mut session = session;
    let fd = conn.raw_fd();
    // While every thread retires (CONFIG SET io-threads 1), none takes it.
    match srv.io.as_mut().and_then(|io| io.assign().map(|t| (io, t))) {
        Some((io, t)) => {
            let mut l = crate::client::IoLink::new(t, conn.is_unix());
            l.tls = session.is_some();
            io.push(t, crate::iothread::ToIo::Adopt { id, conn, tls: session.take(), queued: l.queued.clone() });
            link = Some(l);
        }
        None => {
            if registry.register(&mut conn, Token(id as usize), Interest::READABLE | Interest::WRITABLE).is_err() {
                return;
            }
            sock = Some(conn);
        }
    }
    srv.total_connections += 1;
    let mut c = Client::new(id, sock, addr, laddr);
    c.fd = fd;
    c.io = link;
    c.user = Some(srv.acl.default_user());
    c.authenticated = !srv.acl.auth_required();
    c.tls = session;
    srv.clients.insert(id, Box::new(c));
}

/// Serves every other client once while a script is timed out: reads what
/// their sockets hold, runs it (dispatch answers -BUSY to all but the
/// allow-busy commands) and writes the replies. New connections are
/// accepted first, so a user can still connect to send SCRIPT KILL. The
/// client running the script is not in `srv.clients` at this point.
pub fn serve_while_busy(srv: &mut Server, shell: &mut Shell) {
    let _ = accept(srv, &shell.acceptor);
    crate::aof::flush(srv);
    take_io(srv, &shell.acceptor.registry, &mut |_| {});
    let ids: Vec<ClientId> = srv.clients.keys().copied().collect();
    let mut buf = [0u8; 16 * 1024];
    for id in ids {
        if srv.shutdown {
            break;
        }
        let Some(mut c) = srv.clients.take(&id) else { continue };
        if !c.close_asap && !c.close_after_reply {
            if c.tls.is_some() {
                if let Some((true, _)) = read_tls_client(srv, &mut c, &mut buf) {
                    c.close_asap = true;
                }
            } else if let Some(sock) = c.sock.as_mut() {
                loop {
                    match sock.read(&mut buf) {
                        Ok(0) => {
                            c.close_asap = true;
                            break;
                        }
                        Ok(n) => {
                            c.qbuf.extend_from_slice(&buf[..n]);
                            if c.qbuf.len() - c.qpos > srv.config.query_buffer_limit {
                                c.close_asap = true;
                                break;
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
            }
            if !c.close_asap {
                process_input(srv, shell, &mut c);
                flush(srv, &mut c);
            }
        }
        srv.clients.put(id, c);
    }
    if let Some(io) = srv.io.as_mut() {
        io.send();
    }
    // The cluster bus too, as Redis's processEventsWhileBlocked serves
    // it: peers get their PONGs (a loading replica's carry offset 0, which
    // hides it from CLUSTER SLOTS) and do not count this node as failing.
    // The periodic tick waits for the loop, as Redis's clusterCron does.
    if let (Some(mut bus), Some(registry)) = (shell.bus.take(), shell.bus_registry.take()) {
        bus.pump(srv, shell, &registry);
        shell.bus = Some(bus);
        shell.bus_registry = Some(registry);
    }
    // Whatever they left (closes, pending output) the event loop finishes
    // after the script: it will see their sockets' next events.
    srv.sweep_clients = true;
}
