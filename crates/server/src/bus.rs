//! The cluster bus in the event loop: the listener on the bus port, one
//! link per TCP connection between two nodes, and the hand-over between
//! those sockets and the sans-IO state machine (`cluster/`).
//!
//! Bytes in: each link has a read buffer; `clusterbus::frame_len` says how
//! long the frame at its head is and `clusterbus::decode` turns a whole
//! frame into a `Message` for `Cluster::on_message`. A bad signature, a
//! length out of bounds or a frame that does not decode closes that link
//! only (Redis frees the link; the peer reconnects). Frames are bounded by
//! `max_frame` (PUBLISH carries a whole message: proto-max-bulk-len twice,
//! channel and message, plus the header).
//!
//! Bytes out: `Action::Send` encodes into the link's write queue and writes
//! what the socket takes; WRITABLE events write the rest. A queue above
//! cluster-link-sendbuf-limit frees the link at the next tick, counted, as
//! Redis's clusterCron does.
//!
//! Everything else the state machine asks (`Action`) is carried out here,
//! by the same code client commands use: REPLICAOF's `set_primary`, REPLICAOF
//! NO ONE's `promote`, DEL's propagation, PUBLISH's delivery, CLIENT PAUSE
//! WRITE's hold. `run_actions` drains the queue after every call into the
//! state machine, and after every client's turn (CLUSTER commands queue
//! actions too).
//!
//! With `tls-cluster yes` every link speaks TLS (`tls::Session`): an
//! inbound one as the tls-port's clients do (tls-auth-clients asks for a
//! certificate from the CA), an outbound one as the replica's link to its
//! primary does (the peer's chain checked against the CA, not its name,
//! and this node's client certificate offered). A peer that speaks plain
//! TCP, or TLS with a certificate from elsewhere, never gets a message
//! through, and no message leaves in the clear.
//!
//! Standalone, none of this exists: `EventLoop` holds no `Bus` and the
//! state is `None`.

use std::collections::{HashMap, HashSet};
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};

use crate::client::ClientId;
use crate::cluster::{Action, LinkAddr, LinkId, NodeName};
use crate::command::Host;
use crate::server::Server;

/// Tokens of bus listeners count down from here.
pub const LISTENER0: usize = usize::MAX - 128;
/// At most this many bus listeners (one per `bind` address).
pub const MAX_LISTENERS: usize = 16;
/// Link `id`'s token is `LINK0 + id`: far above any client id.
pub const LINK0: usize = 1 << 62;
/// How often the state machine's periodic work runs (Redis's clusterCron
/// runs ten times a second whatever `hz` says).
pub const TICK: Duration = Duration::from_millis(100);

/// True if `t` is one of the bus's tokens.
pub fn owns(t: Token) -> bool {
    (LINK0..=LISTENER0).contains(&t.0) || (t.0 <= LISTENER0 && t.0 > LISTENER0 - MAX_LISTENERS)
}

/// One link to another node.
struct Link {
    sock: TcpStream,
    /// The link's TLS session, with tls-cluster.
    tls: Option<Box<crate::tls::Session>>,
    /// The peer opened it.
    inbound: bool,
    /// The node an outbound link was opened for.
    node: Option<NodeName>,
    /// An outbound connect still in progress, and since when.
    connecting: Option<Instant>,
    addr: LinkAddr,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    sent: usize,
}

impl Link {
    fn queued(&self) -> usize {
        self.wbuf.len() - self.sent
    }

    /// Writes what the socket takes (through TLS, with what the handshake
    /// has to send). Errors: the link is broken.
    fn flush(&mut self) -> io::Result<()> {
        if self.connecting.is_some() {
            return Ok(());
        }
        if let Some(t) = self.tls.as_mut() {
            // Stops at WouldBlock; the socket's next WRITABLE edge resumes.
            let (taken, _) = t.write(&mut self.sock, &self.wbuf[self.sent..])?;
            self.sent += taken;
        }
        while self.tls.is_none() && self.sent < self.wbuf.len() {
            match self.sock.write(&self.wbuf[self.sent..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.sent == self.wbuf.len() {
            self.wbuf.clear();
            self.sent = 0;
            if self.wbuf.capacity() > 1 << 20 {
                self.wbuf.shrink_to(64 * 1024);
            }
        } else if self.sent > 1 << 20 {
            self.wbuf.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
    }
}

/// The bus: listeners and links.
pub struct Bus {
    listeners: Vec<TcpListener>,
    links: HashMap<LinkId, Link>,
    next_id: LinkId,
    /// When the state machine's next tick is due.
    pub next_tick: Instant,
    scratch: Box<[u8]>,
    /// Links with messages queued this turn, written at the start of the
    /// loop's next turn (`flush_queued`), as Redis writes the bus from the
    /// next event loop iteration: the replies of a turn leave before the
    /// messages it caused (a `CLUSTER SETSLOT NODE`'s +OK before its PONG).
    queued: Vec<LinkId>,
}

/// The largest frame accepted: a PUBLISH of the largest channel and
/// message a client may send, with the header.
fn max_frame(srv: &Server) -> usize {
    let bulk = usize::try_from(srv.config.proto_max_bulk_len).unwrap_or(usize::MAX);
    bulk.saturating_mul(2).saturating_add(clusterbus::HEADER_LEN + 64).clamp(1 << 20, u32::MAX as usize)
}

/// Calls into the state machine with the server's `Env`; nothing when
/// standalone.
fn with_cluster(srv: &mut Server, f: impl FnOnce(&mut crate::cluster::Cluster, &crate::cluster::Env)) {
    if srv.cluster.is_none() {
        return;
    }
    let env = srv.cluster_env();
    if let Some(c) = srv.cluster.as_deref_mut() {
        f(c, &env);
    }
}

/// IP text of a socket address, as the state machine keeps addresses.
fn ip_of(a: io::Result<SocketAddr>) -> String {
    a.map(|a| a.ip().to_canonical().to_string()).unwrap_or_default()
}

impl Bus {
    /// Serves `listeners` (the bus port on every `bind` address).
    ///
    /// Errors: registering a socket failed.
    pub fn new(listeners: Vec<std::net::TcpListener>, registry: &Registry) -> io::Result<Bus> {
        let mut ours = Vec::new();
        for (i, l) in listeners.into_iter().take(MAX_LISTENERS).enumerate() {
            l.set_nonblocking(true)?;
            let mut l = TcpListener::from_std(l);
            registry.register(&mut l, Token(LISTENER0 - i), Interest::READABLE)?;
            ours.push(l);
        }
        Ok(Bus { listeners: ours, links: HashMap::new(), next_id: 1, next_tick: Instant::now(), scratch: vec![0; 64 * 1024].into_boxed_slice(), queued: Vec::new() })
    }

    /// Number of open links (inbound and outbound).
    pub fn links(&self) -> usize {
        self.links.len()
    }

    fn add(&mut self, registry: &Registry, mut sock: TcpStream, tls: Option<Box<crate::tls::Session>>, inbound: bool, node: Option<NodeName>) -> Option<LinkId> {
        let id = self.next_id;
        self.next_id += 1;
        registry.register(&mut sock, Token(LINK0 + id as usize), Interest::READABLE | Interest::WRITABLE).ok()?;
        let addr = LinkAddr { peer_ip: ip_of(sock.peer_addr()), local_ip: ip_of(sock.local_addr()) };
        let connecting = (!inbound).then(Instant::now);
        self.links.insert(id, Link { sock, tls, inbound, node, connecting, addr, rbuf: Vec::new(), wbuf: Vec::new(), sent: 0 });
        Some(id)
    }

    /// Handles readiness of a bus token: new inbound links on a listener,
    /// or a link's connect, input or output.
    pub fn ready(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry, ev: &mio::event::Event) {
        let t = ev.token().0;
        if !(LINK0..=LISTENER0 - MAX_LISTENERS).contains(&t) {
            self.accept(srv, registry);
            return;
        }
        let id = (t - LINK0) as LinkId;
        let Some(link) = self.links.get_mut(&id) else { return };
        if link.connecting.is_some() {
            if !(ev.is_writable() || ev.is_error() || ev.is_write_closed()) {
                return;
            }
            let node = link.node.unwrap_or(crate::cluster::NULL_NAME);
            let failed = matches!(link.sock.take_error(), Ok(Some(_)) | Err(_)) || link.sock.peer_addr().is_err();
            if failed {
                self.drop_link(registry, id);
                with_cluster(srv, |c, env| c.link_failed(&node, env));
                self.run_actions(srv, host, registry);
                return;
            }
            link.connecting = None;
            link.addr = LinkAddr { peer_ip: ip_of(link.sock.peer_addr()), local_ip: ip_of(link.sock.local_addr()) };
            if srv.config.flag("tls-cluster") {
                match client_session(srv, &link.addr.peer_ip) {
                    Ok(t) => link.tls = Some(Box::new(t)),
                    Err(e) => {
                        srv.config.log.warning(&format!("Unable to open a TLS cluster bus link to {}: {e}", link.addr.peer_ip));
                        self.drop_link(registry, id);
                        with_cluster(srv, |c, env| c.link_failed(&node, env));
                        self.run_actions(srv, host, registry);
                        return;
                    }
                }
            }
            with_cluster(srv, |c, env| c.link_connected(&node, id, env));
            self.run_actions(srv, host, registry);
        }
        self.service(srv, host, registry, id);
    }

    /// Whether messages wait for `flush_queued`: the loop then polls
    /// without sleeping.
    pub fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    /// Writes the messages queued since the last call; a link the write
    /// finds broken is closed.
    pub fn flush_queued(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry) {
        if self.queued.is_empty() {
            return;
        }
        wait_config_synced(srv);
        for id in std::mem::take(&mut self.queued) {
            if self.links.get_mut(&id).is_some_and(|l| l.flush().is_err()) {
                self.close(srv, host, registry, id);
            }
        }
    }

    /// Serves the bus once without readiness events, while the loop is
    /// held by a load or a busy script: inbound links accepted, every
    /// connected link written and read to the end of what it holds (the
    /// sockets are edge-triggered, so nothing is left unannounced), and the
    /// end-of-turn work. Links still connecting wait for the loop.
    pub fn pump(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry) {
        wait_config_synced(srv);
        self.queued.clear();
        self.accept(srv, registry);
        let ids: Vec<LinkId> = self.links.iter().filter(|(_, l)| l.connecting.is_none()).map(|(&id, _)| id).collect();
        for id in ids {
            self.service(srv, host, registry, id);
        }
        self.before_sleep(srv, host, registry);
    }

    /// Accepts every inbound link waiting on the listeners; with
    /// tls-cluster, each starts a TLS session as a tls-port client's does.
    fn accept(&mut self, srv: &Server, registry: &Registry) {
        let tls_cluster = srv.config.flag("tls-cluster");
        let mut got = Vec::new();
        for l in &self.listeners {
            loop {
                match l.accept() {
                    Ok((sock, _)) => got.push(sock),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
        }
        for sock in got {
            let _ = sock.set_nodelay(true);
            // No link of a TLS bus goes without a session.
            let session = match (tls_cluster, srv.tls.as_ref().map(crate::tls::Session::new)) {
                (false, _) => None,
                (true, Some(Ok(t))) => Some(Box::new(t)),
                (true, _) => continue,
            };
            self.add(registry, sock, session, true, None);
        }
    }

    /// Writes and reads link `id`, handing every whole message to the state
    /// machine.
    fn service(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry, id: LinkId) {
        let Some(link) = self.links.get_mut(&id) else { return };
        if link.queued() > 0 {
            wait_config_synced(srv);
        }
        if link.flush().is_err() {
            self.close(srv, host, registry, id);
            return;
        }
        let mut eof = false;
        if let Some(t) = link.tls.as_mut() {
            match t.read(&mut link.sock, &mut self.scratch, &mut link.rbuf, usize::MAX, false) {
                Ok(r) => eof = r.eof,
                Err(e) => {
                    srv.config.log.verbose(&format!("Closing the cluster bus link from {}: TLS: {e}", link.addr.peer_ip));
                    eof = true;
                }
            }
        }
        // What the handshake answers goes out now.
        if !eof && link.tls.as_ref().is_some_and(|t| t.wants_write()) && link.flush().is_err() {
            eof = true;
        }
        while link.tls.is_none() {
            match link.sock.read(&mut self.scratch) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => link.rbuf.extend_from_slice(&self.scratch[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    eof = true;
                    break;
                }
            }
        }
        let max = max_frame(srv);
        let mut pos = 0;
        let mut bad = false;
        let (inbound, addr) = (link.inbound, link.addr.clone());
        let mut messages = Vec::new();
        loop {
            match clusterbus::frame_len(&link.rbuf[pos..], max) {
                Ok(Some(n)) if link.rbuf.len() - pos >= n => {
                    match clusterbus::decode(&link.rbuf[pos..pos + n]) {
                        Ok(m) => messages.push(m),
                        Err(e) => {
                            srv.config.log.verbose(&format!("Closing the cluster bus link from {}: bad message ({e:?})", addr.peer_ip));
                            bad = true;
                            break;
                        }
                    }
                    pos += n;
                }
                Ok(_) => break,
                Err(e) => {
                    srv.config.log.verbose(&format!("Closing the cluster bus link from {}: bad frame ({e:?})", addr.peer_ip));
                    bad = true;
                    break;
                }
            }
        }
        link.rbuf.drain(..pos);
        if link.rbuf.capacity() > 1 << 20 && link.rbuf.len() < 64 * 1024 {
            link.rbuf.shrink_to(64 * 1024);
        }
        for m in messages {
            let filter = srv.cluster_drop_filter;
            if filter == -2 || i64::from(m.msg_type) == i64::from(filter) {
                srv.config.log.warning("Dropping packet that matches debug drop filter");
                continue;
            }
            with_cluster(srv, |c, env| c.on_message(id, inbound, &addr, m, env));
            self.run_actions(srv, host, registry);
            if !self.links.contains_key(&id) {
                return;
            }
        }
        if bad || eof {
            self.close(srv, host, registry, id);
        }
    }

    /// Forgets link `id` without telling the state machine.
    fn drop_link(&mut self, registry: &Registry, id: LinkId) -> bool {
        match self.links.remove(&id) {
            Some(mut l) => {
                let _ = registry.deregister(&mut l.sock);
                true
            }
            None => false,
        }
    }

    /// Closes link `id` and tells the state machine.
    fn close(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry, id: LinkId) {
        if self.drop_link(registry, id) {
            with_cluster(srv, |c, env| c.link_closed(id, env));
            self.run_actions(srv, host, registry);
        }
    }

    /// The periodic work, every `TICK`: the state machine's tick, links
    /// over cluster-link-sendbuf-limit and connects past the node timeout
    /// freed, a manual failover's pause ended, blocked clients whose slot
    /// went elsewhere redirected.
    pub fn tick(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry) {
        let now = Instant::now();
        self.next_tick = now + TICK;
        let Some(settings) = srv.cluster.as_deref().map(|c| c.settings.clone()) else { return };
        let limit = settings.link_sendbuf_limit as usize;
        let timeout = Duration::from_millis(settings.node_timeout.max(1));
        let mut over = Vec::new();
        let mut failed = Vec::new();
        let mut mem = 0u64;
        srv.cluster_link_buffers.clear();
        for (&id, l) in &self.links {
            mem += (l.rbuf.capacity() + l.wbuf.capacity()) as u64;
            srv.cluster_link_buffers.insert(id, (l.wbuf.capacity() as u64, l.queued() as u64));
            if limit != 0 && l.queued() > limit {
                over.push(id);
            } else if l.connecting.is_some_and(|t| now.duration_since(t) > timeout) {
                failed.push((id, l.node.unwrap_or(crate::cluster::NULL_NAME)));
            }
        }
        srv.cluster_links_mem = mem;
        for id in over {
            if let Some(c) = srv.cluster.as_deref_mut() {
                c.links_buffer_limit_exceeded += 1;
            }
            srv.config.log.warning(&format!("Freeing cluster link ({} queued bytes), over cluster-link-sendbuf-limit", self.links.get(&id).map_or(0, Link::queued)));
            self.close(srv, host, registry, id);
        }
        for (id, node) in failed {
            self.drop_link(registry, id);
            with_cluster(srv, |c, env| c.link_failed(&node, env));
        }
        with_cluster(srv, |c, env| c.tick(env));
        self.run_actions(srv, host, registry);
        if srv.cluster_pause_until != 0 && srv.unix_ms_at(now) >= srv.cluster_pause_until {
            unpause(srv);
        }
        redirect_blocked(srv, host);
    }

    /// The end of a loop turn (Redis's clusterBeforeSleep), then what is
    /// left queued goes out.
    pub fn before_sleep(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry) {
        with_cluster(srv, |c, env| c.before_sleep(env));
        self.run_actions(srv, host, registry);
    }

    /// Carries out what the state machine asked, until it asks no more.
    pub fn run_actions(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry) {
        loop {
            let Some(c) = srv.cluster.as_deref_mut() else { return };
            if c.actions.is_empty() {
                return;
            }
            let actions = std::mem::take(&mut c.actions);
            for a in actions {
                self.act(srv, host, registry, a);
            }
        }
    }

    fn act(&mut self, srv: &mut Server, host: &mut dyn Host, registry: &Registry, a: Action) {
        match a {
            Action::Connect { node, ip, cport } => self.connect(srv, registry, node, &ip, cport),
            Action::Send { link, msg } => {
                if let Some(l) = self.links.get_mut(&link) {
                    if l.queued() == 0 {
                        self.queued.push(link);
                    }
                    clusterbus::encode(&msg, &mut l.wbuf);
                }
            }
            Action::Close { link } => self.close(srv, host, registry, link),
            Action::Replicate { ip, port } => {
                if crate::replication::set_primary(srv, ip, port) {
                    let table = host.table().clone();
                    crate::replication::release_blocked(srv, &table);
                }
            }
            Action::Promote => crate::replication::promote(srv),
            Action::DropSlots(slots) => crate::migration::drop_slots(srv, &slots),
            Action::Publish { channel, message, shard } => {
                crate::publish::publish_from(srv, None, &channel, &message, shard);
            }
            Action::ShardChannelsMoved(slots) => unsubscribe_shard_slots(srv, &slots),
            Action::PauseWrites { until_ms } => {
                srv.cluster_pause_until = until_ms.min(i64::MAX as u64) as i64;
                srv.apply_expire_mode();
            }
            Action::UnpauseWrites => unpause(srv),
            Action::SaveConfig { fsync } => save_config(srv, fsync),
            Action::Log { level, text } => match level {
                0 => srv.config.log.debug(&text),
                1 => srv.config.log.verbose(&text),
                2 => srv.config.log.notice(&text),
                _ => srv.config.log.warning(&text),
            },
        }
    }

    /// Opens an outbound link to `node` at `ip:cport` without blocking; the
    /// state machine hears `link_connected` or `link_failed` later (at
    /// once when the address is not even valid).
    fn connect(&mut self, srv: &mut Server, registry: &Registry, node: NodeName, ip: &str, cport: u16) {
        let addr = ip.parse::<std::net::IpAddr>().map(|a| SocketAddr::new(a, cport)).ok().or_else(|| std::net::ToSocketAddrs::to_socket_addrs(&(ip, cport)).ok().and_then(|mut a| a.next()));
        let opened = addr.and_then(|a| TcpStream::connect(a).ok()).and_then(|s| {
            let _ = s.set_nodelay(true);
            self.add(registry, s, None, false, Some(node))
        });
        if opened.is_none() {
            with_cluster(srv, |c, env| c.link_failed(&node, env));
        }
    }
}

/// The TLS session of an outbound link to `ip` (tls-cluster): the
/// replication link's client configuration, rebuilt from the tls-*
/// settings for each link, so a CONFIG SET of them reaches the next one.
fn client_session(srv: &Server, ip: &str) -> Result<crate::tls::Session, String> {
    let cfg = crate::tls::build_client(&|k| srv.config.get(k).unwrap_or("").to_string())?;
    crate::tls::Session::client(&cfg, ip).map_err(|e| e.to_string())
}

/// Ends a manual failover's hold on writes; clients it held run at the
/// loop's next turn.
fn unpause(srv: &mut Server) {
    srv.cluster_pause_until = 0;
    srv.apply_expire_mode();
    srv.sweep_clients = true;
}

/// Hands nodes.conf's new text to its writer (`nodesconf::ConfWriter`),
/// which writes it off the loop. A node that cannot record its
/// configuration must not go on (it could forget an epoch it voted in): as
/// Redis's clusterSaveConfigOrDie, the writer ends the process.
fn save_config(srv: &mut Server, fsync: bool) {
    let Some(text) = srv.cluster.as_deref().map(|c| c.config_text()) else { return };
    if let Some(w) = srv.nodes_conf.as_ref() {
        w.save(text, fsync, &srv.config.log);
    }
}

/// Waits until what Redis fsyncs before going on (a vote, a new epoch) is
/// on disk: called before the bus writes, so no peer hears of a vote or
/// an epoch the node could forget.
fn wait_config_synced(srv: &Server) {
    if let Some(w) = srv.nodes_conf.as_ref() {
        w.wait_synced();
    }
}

/// The keys of db 0 in `slots`, from the keyspace's slot index (db 0 of a
/// cluster node is in slot mode): time proportional to the keys, not to
/// the keyspace.
pub fn keys_in_slots(db: &storage::Db, slots: &HashSet<u16>) -> Vec<Vec<u8>> {
    let mut sorted: Vec<u16> = slots.iter().copied().collect();
    sorted.sort_unstable();
    sorted.into_iter().flat_map(|slot| db.keys_in_slot(slot, db.count_keys_in_slot(slot) as usize)).collect()
}

/// Unsubscribes every client from the shard channels of `slots`, each
/// told with an `sunsubscribe` push, as Redis does when a slot leaves.
fn unsubscribe_shard_slots(srv: &mut Server, slots: &[u16]) {
    let set: HashSet<u16> = slots.iter().copied().collect();
    let channels: Vec<Vec<u8>> = srv.pubsub.active(crate::client::Kind::Shard, None).into_iter().filter(|ch| set.contains(&storage::slot::key_hash_slot(ch))).collect();
    for ch in channels {
        let ids: Vec<ClientId> = srv.pubsub.map_ref(crate::client::Kind::Shard).get(&ch).cloned().unwrap_or_default();
        for id in ids {
            let Some(mut c) = srv.clients.take(&id) else { continue };
            if srv.pubsub.unsubscribe(&mut c, crate::client::Kind::Shard, &ch) {
                let count = c.pubsub.as_ref().map_or(0, |s| s.total());
                let mut out = resp::Reply::new();
                out.resp3 = c.reply.resp3;
                out.push(3);
                out.bulk(b"sunsubscribe");
                out.bulk(&ch);
                out.int(count as i64);
                c.reply.raw(&out.buf);
                srv.pubsub.unmark_if_idle(&mut c);
                srv.woken.push(id);
            }
            srv.clients.put(id, c);
        }
    }
}

/// Blocked clients whose key's slot is no longer served here (or the
/// cluster went down) get the redirection and are released, as Redis
/// checks them from its clients' cron; their client follows it and asks
/// the new owner.
fn redirect_blocked(srv: &mut Server, host: &mut dyn Host) {
    let Some(cluster) = srv.cluster.as_deref() else { return };
    if srv.blocking.clients() == 0 {
        return;
    }
    let table = host.table().clone();
    let mut moved = Vec::new();
    for id in srv.blocking.parked_ids() {
        let Some(p) = srv.blocking.parked(id) else { continue };
        let Some(key) = p.req.keys.first() else { continue };
        let Some(c) = srv.clients.get(&id) else { continue };
        let write = matches!(crate::exec::lookup(&table, &p.argv), crate::exec::Lookup::Found(s) if s.has(crate::command::flags::WRITE));
        if let Some(r) = crate::redirect::blocked_elsewhere(cluster, key, write, c.readonly, c.is_tls()) {
            moved.push((id, r.message()));
        }
    }
    for (id, msg) in moved {
        crate::dispatch::release(srv, &table, id, crate::dispatch::Release::Redirected(msg));
    }
}
