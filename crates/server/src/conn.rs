//! A client's socket: TCP (port, tls-port) or a Unix domain socket
//! (`unixsocket`). Both read, write and register with the poller the same
//! way; only the addresses CLIENT LIST prints and TCP_NODELAY differ.

use std::io::{self, Read, Write};

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};

/// A connected socket.
#[derive(Debug)]
pub enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    /// True for a Unix domain socket (CLIENT LIST's `U` flag).
    pub fn is_unix(&self) -> bool {
        matches!(self, Conn::Unix(_))
    }

    /// TCP_NODELAY on or off (nothing for a unix socket).
    pub fn set_nodelay(&self, on: bool) {
        if let Conn::Tcp(s) = self {
            let _ = s.set_nodelay(on);
        }
    }

    /// The socket's file descriptor (CLIENT LIST `fd`).
    pub fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// Turns on TCP keepalive probes for a client's socket, as Redis does
/// with `tcp-keepalive` seconds (0: off): the first probe after that long
/// idle, then one every third of it, the connection dropped after three
/// unanswered (so a peer that vanished without closing is found).
pub fn keepalive(sock: &TcpStream, secs: u64) {
    if secs == 0 {
        return;
    }
    let probes = socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(secs))
        .with_interval(std::time::Duration::from_secs((secs / 3).max(1)))
        .with_retries(3);
    let _ = socket2::SockRef::from(sock).set_tcp_keepalive(&probes);
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write_vectored(bufs),
            Conn::Unix(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Unix(s) => s.flush(),
        }
    }
}

impl Source for Conn {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.register(registry, token, interests),
            Conn::Unix(s) => s.register(registry, token, interests),
        }
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.reregister(registry, token, interests),
            Conn::Unix(s) => s.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.deregister(registry),
            Conn::Unix(s) => s.deregister(registry),
        }
    }
}

/// Seconds a MIGRATE connection is kept unused (Redis's
/// MIGRATE_SOCKET_CACHE_TTL).
const MIGRATE_CONN_TTL: std::time::Duration = std::time::Duration::from_secs(10);
/// Most MIGRATE connections kept (Redis's MIGRATE_SOCKET_CACHE_ITEMS).
const MIGRATE_CONN_MAX: usize = 64;

/// A blocking connection MIGRATE keeps to a target, as Redis's migrate
/// socket cache does: a reshard sends thousands of MIGRATEs to one node,
/// and a connection each (connect, accept, a new client on the target,
/// SELECT, TIME_WAIT) would cost more than the keys.
pub struct MigrateConn {
    rd: io::BufReader<MigrateStream>,
    /// The database the target's connection has selected (-1: none yet).
    db: i64,
    used: bool,
    last_use: std::time::Instant,
}

/// A MIGRATE connection's stream: plain, or TLS with tls-cluster (as
/// Redis's MIGRATE takes the cluster's connection type).
enum MigrateStream {
    Plain(std::net::TcpStream),
    Tls(Box<crate::tls::BlockingClient>),
}

impl MigrateStream {
    fn sock(&self) -> &std::net::TcpStream {
        match self {
            MigrateStream::Plain(s) => s,
            MigrateStream::Tls(t) => t.sock(),
        }
    }
}

impl Read for MigrateStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            MigrateStream::Plain(s) => s.read(buf),
            MigrateStream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for MigrateStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            MigrateStream::Plain(s) => s.write(buf),
            MigrateStream::Tls(t) => t.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            MigrateStream::Plain(s) => s.flush(),
            MigrateStream::Tls(t) => t.flush(),
        }
    }
}

/// What came back for one exchange: an error reply to AUTH or SELECT, one
/// line per key sent (fewer if the connection failed midway: `io_failed`
/// then says "writing" or "reading").
pub struct MigrateReplies {
    pub setup_error: Option<String>,
    pub lines: Vec<String>,
    pub io_failed: Option<&'static str>,
}

/// An exchange that failed: "writing" or "reading", and whether no reply
/// at all had come (the target may have closed an idle connection).
pub struct MigrateFailure {
    pub what: &'static str,
    pub none_read: bool,
}

/// Appends `args` as a RESP command.
pub fn put_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl MigrateConn {
    /// Connects to `target` ("host:port") within `timeout`, through TLS
    /// with `tls` (the handshake happens with the first exchange, within
    /// its timeout).
    ///
    /// Errors: the address does not resolve, or the connect failed.
    pub fn open(target: &str, timeout: std::time::Duration, tls: Option<&crate::tls::ClientCfg>) -> io::Result<MigrateConn> {
        use std::net::ToSocketAddrs;
        let addr = target.to_socket_addrs()?.next().ok_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable))?;
        let sock = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        let _ = sock.set_nodelay(true);
        let stream = match tls {
            Some(cfg) => MigrateStream::Tls(Box::new(crate::tls::BlockingClient::new(cfg, &addr.ip().to_string(), sock)?)),
            None => MigrateStream::Plain(sock),
        };
        Ok(MigrateConn { rd: io::BufReader::new(stream), db: -1, used: false, last_use: std::time::Instant::now() })
    }

    /// Whether an exchange went through on it before.
    pub fn reused(&self) -> bool {
        self.used
    }

    /// Marks a whole exchange done (the connection may be kept).
    pub fn done(&mut self) {
        self.used = true;
        self.last_use = std::time::Instant::now();
    }

    /// Sends AUTH (when given), SELECT (when the database differs from the
    /// last one) and `cmd` (the RESTOREs of `keys` keys), and reads their
    /// replies.
    ///
    /// Errors: the write failed, or a read before any key's reply.
    pub fn exchange(&mut self, auth: Option<&[&[u8]]>, db: i64, cmd: &[u8], keys: usize, timeout: std::time::Duration) -> Result<MigrateReplies, MigrateFailure> {
        use std::io::BufRead;
        let mut out = Vec::with_capacity(cmd.len() + 64);
        if let Some(a) = auth {
            let mut v: Vec<&[u8]> = vec![b"AUTH"];
            v.extend(a.iter().copied());
            put_command(&mut out, &v);
        }
        let select = self.db != db;
        if select {
            put_command(&mut out, &[b"SELECT", db.to_string().as_bytes()]);
        }
        out.extend_from_slice(cmd);
        let stream = self.rd.get_mut();
        let sock = stream.sock();
        if sock.set_write_timeout(Some(timeout)).is_err() || sock.set_read_timeout(Some(timeout)).is_err() || stream.write_all(&out).and_then(|()| stream.flush()).is_err() {
            return Err(MigrateFailure { what: "writing", none_read: true });
        }
        let mut line = || -> Option<String> {
            let mut l = String::new();
            match self.rd.read_line(&mut l) {
                Ok(n) if n > 0 && l.ends_with("\r\n") => Some(l.trim_end().to_string()),
                _ => None,
            }
        };
        let mut setup_error = None;
        let mut first = true;
        for _ in 0..usize::from(auth.is_some()) + usize::from(select) {
            let l = line().ok_or(MigrateFailure { what: "reading", none_read: first })?;
            first = false;
            if l.starts_with('-') {
                setup_error.get_or_insert(l);
            }
        }
        let mut lines = Vec::with_capacity(keys);
        for _ in 0..keys {
            match line() {
                Some(l) => lines.push(l),
                None if first => return Err(MigrateFailure { what: "reading", none_read: true }),
                None => return Ok(MigrateReplies { setup_error, lines, io_failed: Some("reading") }),
            }
            first = false;
        }
        if select {
            self.db = db;
        }
        if setup_error.is_some() || lines.iter().any(|l| l.starts_with('-')) {
            // After an error the target's database is not assumed (Redis's
            // last_dbid = -1): the next exchange selects again.
            self.db = -1;
        }
        Ok(MigrateReplies { setup_error, lines, io_failed: None })
    }
}

/// Closes MIGRATE connections unused for 10 s, and the oldest beyond 64
/// (cron).
pub fn close_idle_migrate_conns(conns: &mut std::collections::HashMap<String, MigrateConn>) {
    conns.retain(|_, c| c.last_use.elapsed() < MIGRATE_CONN_TTL);
    while conns.len() > MIGRATE_CONN_MAX {
        let Some(oldest) = conns.iter().min_by_key(|(_, c)| c.last_use).map(|(k, _)| k.clone()) else { break };
        conns.remove(&oldest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodelay_and_keepalive_reach_the_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let conn = Conn::Tcp(TcpStream::from_std(server));
        let Conn::Tcp(s) = &conn else { unreachable!() };
        conn.set_nodelay(true);
        assert!(s.nodelay().expect("nodelay"));
        conn.set_nodelay(false);
        assert!(!s.nodelay().expect("nodelay"));
        let sock = socket2::SockRef::from(s);
        assert!(!sock.keepalive().expect("keepalive"));
        keepalive(s, 0);
        assert!(!sock.keepalive().expect("keepalive"));
        keepalive(s, 60);
        assert!(sock.keepalive().expect("keepalive"));
        assert_eq!(sock.tcp_keepalive_time().expect("idle"), std::time::Duration::from_secs(60));
        assert_eq!(sock.tcp_keepalive_interval().expect("interval"), std::time::Duration::from_secs(20));
        assert_eq!(sock.tcp_keepalive_retries().expect("count"), 3);
        drop(client);
    }
}
