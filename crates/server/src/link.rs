//! The socket to this server's primary until it is synchronized: a
//! non-blocking connect, the handshake Redis's replicas do (PING, AUTH
//! with masterauth/masteruser, REPLCONF listening-port, REPLCONF capa eof
//! capa psync2, PSYNC <replid> <offset+1>), and the RDB image in either
//! form (`$<len>` or `$EOF:<mark>` ... `<mark>`). Each step sends one
//! command and waits for its reply line as readiness events come; nothing
//! here blocks the executor. Once synchronized the socket becomes the
//! primary's client (`ReplRole::Primary`), served by the event loop like
//! any other, its replies suppressed (`net::process_input`). With
//! `tls-replication yes` the link speaks TLS from the connect on
//! (`tls::build_client`), and the primary's client keeps the session.

use std::io::{ErrorKind, Read, Write};
use std::net::ToSocketAddrs;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use crate::client::{Client, ClientId, ReplRole};
use crate::command::Host;
use crate::repl::{encode, LinkState, Step};
use crate::replication;
use crate::server::Server;

/// The link's socket and what it has read and must write.
#[derive(Default)]
pub struct Link {
    sock: Option<TcpStream>,
    /// The TLS session over `sock` (tls-replication).
    tls: Option<crate::tls::Session>,
    /// Read and not yet consumed.
    buf: Vec<u8>,
    /// To write.
    out: Vec<u8>,
    /// +FULLRESYNC's replication id and offset.
    full: Option<(String, i64)>,
    /// The image's size once its preamble came; -1 with an EOF mark.
    size: Option<i64>,
    mark: Vec<u8>,
    rdb: Vec<u8>,
    /// Reply lines still to ignore (REPLCONF ip-address's).
    skip: u8,
    last_attempt: Option<Instant>,
}

impl Link {
    fn reset(&mut self, registry: &Registry) {
        if let Some(mut s) = self.sock.take() {
            let _ = registry.deregister(&mut s);
        }
        let last = self.last_attempt;
        *self = Link { last_attempt: last, ..Link::default() };
    }

    fn send(&mut self, argv: &[&[u8]]) {
        let v: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
        encode(&v, &mut self.out);
    }
}

fn set_state(srv: &mut Server, state: LinkState) {
    if let Some(p) = srv.repl.primary.as_mut() {
        p.state = state;
    }
}

/// Drives the link as far as it goes without waiting: called on its
/// readiness events and from cron (connects, retries, timeouts). Returns
/// the primary's client id once synchronized, with input to process.
pub fn poll(srv: &mut Server, host: &mut dyn Host, registry: &Registry, link: &mut Link, token: Token) -> Option<ClientId> {
    let Some(p) = srv.repl.primary.as_ref() else {
        if link.sock.is_some() {
            link.reset(registry);
        }
        end_transfer_loading(srv);
        return None;
    };
    if p.state != LinkState::Transfer && srv.repl.transfer_loading.is_some() {
        end_transfer_loading(srv);
    }
    let p = srv.repl.primary.as_ref()?;
    match p.state {
        LinkState::Connected => {
            if link.sock.is_some() {
                link.reset(registry);
            }
            return None;
        }
        LinkState::Connect => {
            link.reset(registry);
            if link.last_attempt.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
                return None;
            }
            link.last_attempt = Some(Instant::now());
            let host = p.host.clone();
            let addr = (p.host.as_str(), p.port).to_socket_addrs().ok().and_then(|mut a| a.next());
            let Some(addr) = addr else {
                srv.config.log.warning(&format!("Unable to connect to MASTER: {}:{}", p.host, p.port));
                return None;
            };
            match connect(addr, srv.config.get("bind-source-addr").unwrap_or("")) {
                Ok(mut s) => {
                    if registry.register(&mut s, token, Interest::READABLE | Interest::WRITABLE).is_err() {
                        return None;
                    }
                    link.sock = Some(s);
                    if srv.config.flag("tls-replication") {
                        let cfg = crate::tls::build_client(&|k| srv.config.get(k).unwrap_or("").to_string());
                        match cfg.and_then(|c| crate::tls::Session::client(&c, &host).map_err(|e| e.to_string())) {
                            Ok(t) => link.tls = Some(t),
                            Err(e) => {
                                srv.config.log.warning(&format!("Unable to connect to MASTER: {e}"));
                                link.reset(registry);
                                return None;
                            }
                        }
                    }
                    if let Some(p) = srv.repl.primary.as_mut() {
                        p.state = LinkState::Connecting;
                        p.attempt_started = Instant::now();
                    }
                    srv.config.log.notice("MASTER <-> REPLICA sync started");
                }
                Err(e) => {
                    srv.config.log.warning(&format!("Unable to connect to MASTER: {e}"));
                    return None;
                }
            }
        }
        _ => {}
    }
    let timeout = Duration::from_secs(srv.config.get("repl-timeout").and_then(|v| v.parse().ok()).unwrap_or(60));
    let started = srv.repl.primary.as_ref().map(|p| if p.state == LinkState::Transfer { p.last_io } else { p.attempt_started });
    if started.is_some_and(|t| t.elapsed() > timeout) {
        srv.config.log.warning("Timeout connecting to the MASTER...");
        fail(srv, registry, link);
        return None;
    }
    match step(srv, host, registry, link) {
        Ok(id) => id,
        Err(why) => {
            srv.config.log.warning(&why);
            fail(srv, registry, link);
            None
        }
    }
}

fn fail(srv: &mut Server, registry: &Registry, link: &mut Link) {
    if srv.repl.transfer_loading.is_some() {
        // A diskless load whose image broke off: a short read of the RDB,
        // worded so that operators grepping for Redis's line find it.
        srv.config.log.warning(&format!("Internal error in RDB reading: the image from MASTER ended after {} bytes, before its end (short read)", link.rdb.len()));
        srv.config.log.warning("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
    }
    link.reset(registry);
    end_transfer_loading(srv);
    set_state(srv, LinkState::Connect);
}

/// The image's preamble came: a diskless load reports loading (or, for
/// swapdb continuing this replica's history, async loading) until the
/// image is loaded or the transfer fails.
fn begin_transfer_loading(srv: &mut Server, link: &Link, size: i64) {
    let mode = srv.config.get("repl-diskless-load").unwrap_or("disabled");
    let diskless = mode == "swapdb" || (mode == "on-empty-db" && srv.dbs.iter().all(|d| d.is_empty()));
    if !diskless || srv.repl.transfer_loading.is_some() || srv.persist.loading.is_some() {
        return;
    }
    let same_history = mode == "swapdb" && link.full.as_ref().is_some_and(|(id, _)| *id == srv.repl.replid);
    if !same_history {
        let start_secs = crate::server::unix_ms() / 1000;
        srv.persist.loading = Some(crate::server::Loading { start_secs, total_bytes: size.max(0) as u64, loaded_bytes: 0, rdb_used_mem: 0 });
    }
    srv.repl.transfer_loading = Some(same_history);
    srv.config.log.notice("MASTER <-> REPLICA sync: Loading DB in memory");
}

/// Ends what `begin_transfer_loading` reported.
fn end_transfer_loading(srv: &mut Server) {
    if srv.repl.transfer_loading.take() == Some(false) {
        srv.persist.loading = None;
    }
}

/// One round: connect completion, writes, reads, and every reply line or
/// image byte that came.
fn step(srv: &mut Server, host: &mut dyn Host, registry: &Registry, link: &mut Link) -> Result<Option<ClientId>, String> {
    let state = srv.repl.primary.as_ref().map_or(LinkState::Connect, |p| p.state);
    let Some(sock) = link.sock.as_mut() else { return Ok(None) };
    if state == LinkState::Connecting {
        if let Ok(Some(e)) | Err(e) = sock.take_error() {
            return Err(format!("Error condition on socket for SYNC: {e}"));
        }
        match sock.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotConnected => return Ok(None),
            Err(e) => return Err(format!("Error condition on socket for SYNC: {e}")),
        }
        srv.config.log.notice("Non blocking connect for SYNC fired the event.");
        link.send(&[b"PING"]);
        set_state(srv, LinkState::Handshake(Step::Ping));
    }
    let mut eof = false;
    flush_out(link)?;
    let mut chunk = [0u8; 64 * 1024];
    if let (Some(sock), Some(t)) = (link.sock.as_mut(), link.tls.as_mut()) {
        let r = t.read(sock, &mut chunk, &mut link.buf, usize::MAX, false).map_err(|e| format!("Error reading from MASTER: {e}"))?;
        srv.net.repl_input += r.net_bytes as u64;
        if r.net_bytes > 0 {
            if let Some(p) = srv.repl.primary.as_mut() {
                p.last_io = Instant::now();
            }
        }
        eof = r.eof;
        // The handshake's answers, queued by the read.
        flush_out(link)?;
    } else {
        let sock = link.sock.as_mut().expect("checked");
        loop {
            match sock.read(&mut chunk) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    link.buf.extend_from_slice(&chunk[..n]);
                    srv.net.repl_input += n as u64;
                    if let Some(p) = srv.repl.primary.as_mut() {
                        p.last_io = Instant::now();
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("Error reading from MASTER: {e}")),
            }
        }
    }
    loop {
        let state = srv.repl.primary.as_ref().map_or(LinkState::Connect, |p| p.state);
        match state {
            LinkState::Handshake(s) => {
                let Some(line) = take_line(&mut link.buf) else { break };
                if let Some(id) = handshake(srv, host, registry, link, s, &line)? {
                    return Ok(Some(id));
                }
            }
            LinkState::Transfer => {
                if let Some(id) = transfer(srv, host, registry, link)? {
                    return Ok(Some(id));
                }
                break;
            }
            _ => break,
        }
        // Replies the new step sent go out now.
        if !link.out.is_empty() {
            let _ = flush_out(link);
        }
    }
    if eof {
        return Err("MASTER aborted replication: connection lost".into());
    }
    Ok(None)
}

/// Writes what the link has to send, through TLS when it has a session
/// (which also sends its handshake), as far as the socket takes it.
fn flush_out(link: &mut Link) -> Result<(), String> {
    let Some(sock) = link.sock.as_mut() else { return Ok(()) };
    if let Some(t) = link.tls.as_mut() {
        let (taken, _) = t.write(sock, &link.out).map_err(|e| format!("Error writing to MASTER: {e}"))?;
        link.out.drain(..taken);
        return Ok(());
    }
    while !link.out.is_empty() {
        match sock.write(&link.out) {
            Ok(0) => break,
            Ok(n) => {
                link.out.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("Error writing to MASTER: {e}")),
        }
    }
    Ok(())
}

/// The next reply line (without CRLF), skipping the newlines a primary
/// sends to keep the link alive.
fn take_line(buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let skip = buf.iter().take_while(|&&b| b == b'\n').count();
    buf.drain(..skip);
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = buf[..end].to_vec();
    buf.drain(..end + 2);
    Some(line)
}

fn handshake(srv: &mut Server, host: &mut dyn Host, registry: &Registry, link: &mut Link, s: Step, line: &[u8]) -> Result<Option<ClientId>, String> {
    let text = String::from_utf8_lossy(line).into_owned();
    let err = line.first() == Some(&b'-');
    match s {
        Step::Ping => {
            if err && !(text.starts_with("-NOAUTH") || text.starts_with("-NOPERM") || text.starts_with("-ERR operation not permitted")) {
                return Err(format!("Error reply to PING from master: '{text}'"));
            }
            srv.config.log.notice("Master replied to PING, replication can continue...");
            let pass = srv.config.get("masterauth").unwrap_or("").to_string();
            if !pass.is_empty() {
                let user = srv.config.get("masteruser").unwrap_or("").to_string();
                if user.is_empty() {
                    link.send(&[b"AUTH", pass.as_bytes()]);
                } else {
                    link.send(&[b"AUTH", user.as_bytes(), pass.as_bytes()]);
                }
                set_state(srv, LinkState::Handshake(Step::Auth));
            } else {
                send_port(srv, link);
            }
        }
        Step::Auth => {
            if err {
                return Err(format!("Unable to AUTH to MASTER: {text}"));
            }
            send_port(srv, link);
        }
        Step::Port if link.skip > 0 => link.skip -= 1,
        Step::Port => {
            link.send(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]);
            set_state(srv, LinkState::Handshake(Step::Capa));
        }
        Step::Capa => {
            let (id, off) = if srv.repl.cached { (srv.repl.replid.clone(), (srv.repl.offset + 1).to_string()) } else { ("?".to_string(), "-1".to_string()) };
            if id == "?" {
                srv.config.log.notice("Partial resynchronization not possible (no cached master)");
            } else {
                srv.config.log.notice(&format!("Trying a partial resynchronization (request {id}:{off})."));
            }
            // A primary failing over to this link's end asks it to take over.
            if replication::failover_in_progress(srv) {
                link.send(&[b"PSYNC", id.as_bytes(), off.as_bytes(), b"FAILOVER"]);
            } else {
                link.send(&[b"PSYNC", id.as_bytes(), off.as_bytes()]);
            }
            set_state(srv, LinkState::Handshake(Step::Psync));
        }
        Step::Psync => {
            if replication::failover_in_progress(srv) {
                if text.starts_with("+FULLRESYNC") || text.starts_with("+CONTINUE") {
                    replication::failover_done(srv);
                } else {
                    replication::failover_abort(srv, "Failover target rejected psync request");
                    link.reset(registry);
                    return Ok(None);
                }
            }
            if let Some(rest) = text.strip_prefix("+FULLRESYNC") {
                let mut w = rest.split_whitespace();
                let id = w.next().unwrap_or("").to_string();
                let off = w.next().and_then(|o| o.parse().ok()).unwrap_or(-1);
                srv.config.log.notice(&format!("Full resync from master: {id}:{off}"));
                link.full = Some((id, off));
                if let Some(p) = srv.repl.primary.as_mut() {
                    p.state = LinkState::Transfer;
                    p.transfer_size = -1;
                    p.transfer_read = 0;
                    p.last_io = Instant::now();
                }
            } else if let Some(rest) = text.strip_prefix("+CONTINUE") {
                let new_id = rest.trim();
                srv.config.log.notice("Successful partial resynchronization with master.");
                if !new_id.is_empty() && new_id != srv.repl.replid {
                    // The primary's history continues under a new id: ours
                    // stays valid as the second one, up to here.
                    srv.repl.replid2 = std::mem::replace(&mut srv.repl.replid, new_id.to_string());
                    srv.repl.second_offset = srv.repl.offset + 1;
                    replication::disconnect_replicas(srv);
                }
                replication::ensure_stream(srv);
                let db = srv.repl.primary_db;
                let id = become_client(srv, registry, link);
                if let Some(c) = srv.clients.get_mut(&id) {
                    c.db = db;
                }
                return Ok(Some(id));
            } else if text.starts_with("-NOMASTERLINK") || text.starts_with("-LOADING") {
                return Err(format!("Master is currently unable to PSYNC but should be in the future: {text}"));
            } else {
                return Err(format!("Unexpected reply to PSYNC from master: {text}"));
            }
        }
    }
    let _ = host;
    Ok(None)
}

fn send_port(srv: &mut Server, link: &mut Link) {
    let port = srv.config.get("replica-announce-port").filter(|p| *p != "0").or(srv.config.get("port")).unwrap_or("6379").to_string();
    link.send(&[b"REPLCONF", b"listening-port", port.as_bytes()]);
    let ip = srv.config.get("replica-announce-ip").unwrap_or("").to_string();
    if !ip.is_empty() {
        // Its reply is read and ignored with the port's (one more line).
        link.send(&[b"REPLCONF", b"ip-address", ip.as_bytes()]);
        link.skip = 1;
    }
    set_state(srv, LinkState::Handshake(Step::Port));
}

/// Receives the image; once complete, loads it and becomes the client.
fn transfer(srv: &mut Server, host: &mut dyn Host, registry: &Registry, link: &mut Link) -> Result<Option<ClientId>, String> {
    if link.size.is_none() {
        let Some(line) = take_line(&mut link.buf) else { return Ok(None) };
        if line.first() == Some(&b'-') {
            return Err(format!("MASTER aborted replication with an error: {}", String::from_utf8_lossy(&line)));
        }
        if line.is_empty() {
            return Ok(None);
        }
        if let Some(mark) = line.strip_prefix(b"$EOF:") {
            link.mark = mark.to_vec();
            link.size = Some(-1);
        } else {
            let n = std::str::from_utf8(&line[1..]).ok().and_then(|s| s.parse::<i64>().ok()).filter(|_| line[0] == b'$').ok_or_else(|| format!("Bad protocol from MASTER, the first byte is not '$' (we received '{}')", String::from_utf8_lossy(&line)))?;
            link.size = Some(n);
            link.rdb.reserve(n as usize);
        }
        if let Some(p) = srv.repl.primary.as_mut() {
            p.transfer_size = link.size.unwrap_or(-1);
        }
        srv.config.log.notice("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk");
        begin_transfer_loading(srv, link, link.size.unwrap_or(-1));
    }
    let size = link.size.unwrap_or(-1);
    let done = if size >= 0 {
        let need = size as usize - link.rdb.len();
        let take = need.min(link.buf.len());
        link.rdb.extend(link.buf.drain(..take));
        link.rdb.len() == size as usize
    } else {
        let from = link.rdb.len().saturating_sub(link.mark.len());
        link.rdb.append(&mut link.buf);
        let m = link.mark.len();
        match link.rdb[from..].windows(m).position(|w| w == link.mark.as_slice()) {
            Some(i) => {
                let at = from + i;
                link.buf = link.rdb[at + m..].to_vec();
                link.rdb.truncate(at);
                true
            }
            None => false,
        }
    };
    if let Some(p) = srv.repl.primary.as_mut() {
        p.transfer_read = link.rdb.len() as u64;
    }
    if let (Some(false), Some(l)) = (srv.repl.transfer_loading, srv.persist.loading.as_mut()) {
        l.loaded_bytes = link.rdb.len() as u64;
    }
    if !done {
        return Ok(None);
    }
    let rdb = std::mem::take(&mut link.rdb);
    let loaded = crate::persist::load_replica_image(srv, host, &rdb);
    end_transfer_loading(srv);
    loaded.map_err(|e| format!("Failed trying to load the MASTER synchronization DB from socket: {e}"))?;
    let (id, off) = link.full.take().unwrap_or_default();
    srv.repl.replid = id;
    srv.repl.offset = off;
    srv.repl.clear_replid2();
    replication::ensure_stream(srv);
    let size = srv.repl.backlog.size();
    srv.repl.backlog.reset(size, off);
    srv.repl.stream.borrow_mut().clear();
    srv.repl.primary_db = 0;
    replication::disconnect_replicas(srv);
    srv.config.log.notice("MASTER <-> REPLICA sync: Finished with success");
    if let Err(e) = crate::aof::restart_after_sync(srv, host) {
        srv.config.log.warning(&format!("Failed enabling the AOF after successful master synchronization! {e}"));
    }
    let id = become_client(srv, registry, link);
    // Right away: a primary that sent the EOF form waits for it.
    replication::send_ack(srv);
    Ok(Some(id))
}

/// The socket becomes the primary's client; what came after the image is
/// its first input.
fn become_client(srv: &mut Server, registry: &Registry, link: &mut Link) -> ClientId {
    let mut sock = link.sock.take().expect("connected");
    let id = srv.new_client_id();
    let _ = registry.reregister(&mut sock, Token(id as usize), Interest::READABLE | Interest::WRITABLE);
    let addr = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    // The primary's link is a client like any other (Redis's createClient).
    crate::conn::keepalive(&sock, srv.config.tcp_keepalive());
    let mut c = Client::new(id, Some(crate::conn::Conn::Tcp(sock)), addr, laddr);
    c.tls = link.tls.take().map(Box::new);
    c.repl_role = ReplRole::Primary;
    c.authenticated = true;
    c.qbuf = std::mem::take(&mut link.buf);
    srv.clients.insert(id, Box::new(c));
    srv.repl.cached = true;
    if let Some(p) = srv.repl.primary.as_mut() {
        p.client = Some(id);
        p.state = LinkState::Connected;
        p.last_io = Instant::now();
    }
    link.reset(registry);
    id
}

/// Starts a non-blocking connection to `addr`, from `source` (bind-source-addr,
/// an IP address; empty: the system chooses) when set.
///
/// Errors: the socket, the bind to `source`, or the connect failed.
fn connect(addr: std::net::SocketAddr, source: &str) -> std::io::Result<TcpStream> {
    if source.is_empty() {
        return TcpStream::connect(addr);
    }
    use socket2::{Domain, Socket, Type};
    let ip: std::net::IpAddr = source.parse().map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    sock.bind(&std::net::SocketAddr::new(ip, 0).into())?;
    sock.set_nonblocking(true)?;
    match sock.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(115) || e.kind() == std::io::ErrorKind::WouldBlock => {} // EINPROGRESS
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(sock.into()))
}
