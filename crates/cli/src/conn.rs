//! A small RESP2 client over one TCP connection: commands written into a
//! buffer (so many can be pipelined before one flush), replies read one at
//! a time. Enough for the tool; no RESP3, no cluster.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;

/// A reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Status(String),
    Err(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Val>),
}

impl Val {
    pub fn int(&self) -> Option<i64> {
        match self {
            Val::Int(n) => Some(*n),
            Val::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Val::Bulk(b) => Some(b),
            Val::Status(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    pub fn text(&self) -> String {
        self.bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()
    }

    pub fn array(&self) -> &[Val] {
        match self {
            Val::Array(a) => a,
            _ => &[],
        }
    }

    /// A RESP2 flat map: the value after `key`.
    pub fn get(&self, key: &str) -> Option<&Val> {
        self.array().chunks(2).find(|p| p[0].bytes() == Some(key.as_bytes())).and_then(|p| p.get(1))
    }
}

pub struct Conn {
    r: BufReader<TcpStream>,
    w: BufWriter<TcpStream>,
}

/// Appends a command in RESP to `out`.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Conn {
    pub fn connect(addr: &str) -> io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Ok(Conn { r: BufReader::with_capacity(1 << 16, s.try_clone()?), w: BufWriter::with_capacity(1 << 16, s) })
    }

    /// Queues a command (written at the next flush or when the buffer fills).
    pub fn send(&mut self, args: &[&[u8]]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(64);
        encode(&mut buf, args);
        self.w.write_all(&buf)
    }

    /// Queues bytes already in RESP.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.w.write_all(bytes)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> io::Result<Val> {
        self.send(args)?;
        self.flush()?;
        self.read()
    }

    /// Like `call`, an error reply turned into an io::Error.
    pub fn ok(&mut self, args: &[&[u8]]) -> io::Result<Val> {
        match self.call(args)? {
            Val::Err(e) => Err(io::Error::other(e)),
            v => Ok(v),
        }
    }

    fn line(&mut self) -> io::Result<Vec<u8>> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l)?;
        if !l.ends_with(b"\r\n") {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    /// Reads one reply.
    pub fn read(&mut self) -> io::Result<Val> {
        let l = self.line()?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "bad reply");
        let (&t, rest) = l.split_first().ok_or_else(bad)?;
        let text = String::from_utf8_lossy(rest).into_owned();
        let num = || text.parse::<i64>().map_err(|_| bad());
        Ok(match t {
            b'+' => Val::Status(text),
            b'-' => Val::Err(text),
            b':' => Val::Int(num()?),
            b'$' => {
                let n = num()?;
                if n < 0 {
                    return Ok(Val::Nil);
                }
                let mut b = vec![0; n as usize + 2];
                self.r.read_exact(&mut b)?;
                b.truncate(n as usize);
                Val::Bulk(b)
            }
            b'*' => {
                let n = num()?;
                if n < 0 {
                    return Ok(Val::Nil);
                }
                let mut a = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    a.push(self.read()?);
                }
                Val::Array(a)
            }
            _ => return Err(bad()),
        })
    }
}
