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
