//! The least a GET/SET server on loopback TCP can cost per request.
//!
//! `syscall-floor MODE PORT` serves GET, SET and PING from a hash map, with
//! nothing else a real server does (no expiry, no statistics, no command
//! table, no replication stream), so that what it costs per request at
//! pipeline depth 1 is about all the kernel's: the floor under any server
//! on the same socket calls. MODE is one of
//!
//! - `epoll`: mio, edge-triggered, one recv and one send per request: the
//!   same calls densekv's executor and Redis make;
//! - `uring`: io_uring, plain (task work run at once by interrupts);
//! - `uring-defer`: io_uring with `SINGLE_ISSUER | DEFER_TASKRUN` (task
//!   work runs only when the server asks for completions), the setup
//!   io_uring's authors advise for a single-threaded server.
//!
//! The io_uring modes take connections with one multishot accept, read
//! with one multishot recv per connection from a ring of provided buffers
//! (no re-arming per request), and queue every send of a turn for a
//! single `io_uring_enter` that also waits for the next completions: the
//! fewest system calls per request io_uring allows.
//!
//! bench/syscall_floor.py runs it beside densekv and Redis and prints the
//! ratios. Bad input is answered with an error, never a panic, but this is
//! a measuring tool: nothing in densekv uses it.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};

type Db = HashMap<Vec<u8>, Vec<u8>>;

/// Runs every whole request in `inb`, appends the replies to `out`, and
/// drops what it ran from `inb`. A malformed request gets an error and
/// the rest of the input is dropped.
fn process(db: &mut Db, inb: &mut Vec<u8>, out: &mut Vec<u8>) {
    let mut pos = 0;
    loop {
        let args = match parse(&inb[pos..]) {
            Parsed::Whole(args, used) => {
                pos += used;
                args
            }
            Parsed::Partial => break,
            Parsed::Bad => {
                out.extend_from_slice(b"-ERR Protocol error\r\n");
                pos = inb.len();
                break;
            }
        };
        let name = args.first().map(|a| a.to_ascii_uppercase()).unwrap_or_default();
        match (name.as_slice(), args.len()) {
            (b"GET", 2) => match db.get(&args[1]) {
                Some(v) => {
                    out.extend_from_slice(format!("${}\r\n", v.len()).as_bytes());
                    out.extend_from_slice(v);
                    out.extend_from_slice(b"\r\n");
                }
                None => out.extend_from_slice(b"$-1\r\n"),
            },
            (b"SET", 3) => {
                let mut args = args;
                let v = args.pop().unwrap_or_default();
                let k = args.pop().unwrap_or_default();
                db.insert(k, v);
                out.extend_from_slice(b"+OK\r\n");
            }
            (b"PING", 1) => out.extend_from_slice(b"+PONG\r\n"),
            // Anything else (redis-benchmark's CONFIG GET at its start
            // included) is refused: the tool does nothing else.
            _ => out.extend_from_slice(b"-ERR unknown command or wrong number of arguments\r\n"),
        }
    }
    inb.drain(..pos);
}

enum Parsed {
    Whole(Vec<Vec<u8>>, usize),
    Partial,
    Bad,
}

/// One RESP array of bulk strings from the front of `b`.
fn parse(b: &[u8]) -> Parsed {
    /// The number after `b[at]`'s type byte and the offset past its CRLF.
    fn line(b: &[u8], at: usize, kind: u8) -> Result<Option<(usize, usize)>, ()> {
        let Some(end) = b[at..].windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
        let end = end + at;
        if b[at] != kind {
            return Err(());
        }
        let n = std::str::from_utf8(&b[at + 1..end]).ok().and_then(|s| s.parse::<usize>().ok()).filter(|&n| n <= 1 << 20).ok_or(())?;
        Ok(Some((n, end + 2)))
    }
    if b.is_empty() {
        return Parsed::Partial;
    }
    let (n, mut at) = match line(b, 0, b'*') {
        Ok(Some(v)) => v,
        Ok(None) => return Parsed::Partial,
        Err(()) => return Parsed::Bad,
    };
    let mut args = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        if at >= b.len() {
            return Parsed::Partial;
        }
        let (len, start) = match line(b, at, b'$') {
            Ok(Some(v)) => v,
            Ok(None) => return Parsed::Partial,
            Err(()) => return Parsed::Bad,
        };
        let end = start + len;
        if end + 2 > b.len() {
            return Parsed::Partial;
        }
        args.push(b[start..end].to_vec());
        at = end + 2;
    }
    Parsed::Whole(args, at)
}

fn run_epoll(port: u16) -> std::io::Result<()> {
    use mio::net::{TcpListener, TcpStream};
    use mio::{Events, Interest, Poll, Token};
    let mut poll = Poll::new()?;
    let mut listener = TcpListener::bind(([127, 0, 0, 1], port).into())?;
    poll.registry().register(&mut listener, Token(0), Interest::READABLE)?;
    let mut conns: HashMap<usize, (TcpStream, Vec<u8>, Vec<u8>)> = HashMap::new();
    let mut db = Db::new();
    let mut events = Events::with_capacity(1024);
    let mut scratch = vec![0u8; 16384];
    let mut next = 1;
    loop {
        poll.poll(&mut events, None)?;
        for ev in events.iter() {
            if ev.token() == Token(0) {
                while let Ok((mut s, _)) = listener.accept() {
                    s.set_nodelay(true)?;
                    poll.registry().register(&mut s, Token(next), Interest::READABLE | Interest::WRITABLE)?;
                    conns.insert(next, (s, Vec::new(), Vec::new()));
                    next += 1;
                }
                continue;
            }
            let id = ev.token().0;
            let Some((s, inb, out)) = conns.get_mut(&id) else { continue };
            let mut dead = false;
            if ev.is_readable() {
                loop {
                    match s.read(&mut scratch) {
                        Ok(0) => {
                            dead = true;
                            break;
                        }
                        Ok(n) => {
                            inb.extend_from_slice(&scratch[..n]);
                            if n < scratch.len() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => {
                            dead = true;
                            break;
                        }
                    }
                }
                process(&mut db, inb, out);
            }
            if !out.is_empty() {
                match s.write(out) {
                    Ok(n) => {
                        out.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => dead = true,
                }
            }
            if dead {
                conns.remove(&id);
            }
        }
    }
}

/// The provided buffers multishot recvs fill: a ring of `NBUF` entries
/// the kernel takes from, over `NBUF` buffers of `BSZ` bytes.
struct BufRing {
    entries: *mut io_uring::types::BufRingEntry,
    bufs: Box<[u8]>,
    tail: u16,
}

const NBUF: u16 = 1024;
const BSZ: usize = 4096;
const BGID: u16 = 7;

impl BufRing {
    fn new(ring: &io_uring::IoUring) -> std::io::Result<BufRing> {
        let bytes = NBUF as usize * std::mem::size_of::<io_uring::types::BufRingEntry>();
        // SAFETY: an anonymous private mapping: no file, no aliasing; the
        // result is checked before use.
        let mem = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_ANONYMOUS | libc::MAP_PRIVATE, -1, 0) };
        if mem == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let mut br = BufRing { entries: mem.cast(), bufs: vec![0u8; NBUF as usize * BSZ].into_boxed_slice(), tail: 0 };
        for bid in 0..NBUF {
            br.give(bid);
        }
        // SAFETY: `entries` is a page-aligned mapping of NBUF entries that
        // lives as long as the process (it is never unmapped), as the
        // kernel requires of a registered buffer ring.
        unsafe { ring.submitter().register_buf_ring_with_flags(br.entries as u64, NBUF, BGID, 0)? };
        Ok(br)
    }

    /// Hands buffer `bid` (back) to the kernel.
    fn give(&mut self, bid: u16) {
        let addr = self.bufs[bid as usize * BSZ..].as_ptr() as u64;
        // SAFETY: the index is masked into the NBUF entries of the mapping;
        // the kernel reads an entry only once the tail below passes it.
        let e = unsafe { &mut *self.entries.add((self.tail & (NBUF - 1)) as usize) };
        e.set_addr(addr);
        e.set_len(BSZ as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: the tail is a u16 inside the ring's first entry, which the
        // kernel reads; the fence above orders the entry's fields first.
        unsafe { std::ptr::write_volatile(io_uring::types::BufRingEntry::tail(self.entries) as *mut u16, self.tail) };
    }

    fn data(&self, bid: u16, len: usize) -> &[u8] {
        &self.bufs[bid as usize * BSZ..bid as usize * BSZ + len.min(BSZ)]
    }
}

/// An io_uring connection: input, replies being built, the replies whose
/// send is in flight, and whether its stream ended.
#[derive(Default)]
struct Conn {
    inb: Vec<u8>,
    out: Vec<u8>,
    sending: Vec<u8>,
    ended: bool,
}

fn run_uring(port: u16, defer: bool) -> std::io::Result<()> {
    use io_uring::{cqueue, opcode, squeue, types, IoUring};
    use std::os::fd::AsRawFd;
    const ACCEPT: u64 = u64::MAX;
    const RECV: u64 = 1 << 32;
    const SEND: u64 = 2 << 32;
    let mut builder = IoUring::<squeue::Entry, cqueue::Entry>::builder();
    if defer {
        builder.setup_single_issuer().setup_defer_taskrun();
    }
    let mut ring = builder.build(1024)?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
    let lfd = listener.as_raw_fd();
    let mut bufs = BufRing::new(&ring)?;
    fn push(ring: &mut IoUring, e: squeue::Entry) -> std::io::Result<()> {
        // SAFETY: every buffer an entry points at (a connection's `sending`
        // vector) stays put until its completion arrives.
        while unsafe { ring.submission().push(&e) }.is_err() {
            ring.submit()?;
        }
        Ok(())
    }
    let send = |fd: i32, buf: &[u8]| opcode::Send::new(types::Fd(fd), buf.as_ptr(), buf.len() as u32).build().user_data(SEND | fd as u64);
    let recv = |fd: i32| opcode::RecvMulti::new(types::Fd(fd), BGID).build().user_data(RECV | fd as u64);
    push(&mut ring, opcode::AcceptMulti::new(types::Fd(lfd)).build().user_data(ACCEPT))?;
    let mut conns: HashMap<i32, Conn> = HashMap::new();
    fn close(fd: i32) {
        // SAFETY: closing a descriptor this loop accepted and owns, once
        // no operation on it is in flight.
        unsafe { libc::close(fd) };
    }
    let mut db = Db::new();
    let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
    loop {
        ring.submit_and_wait(1)?;
        done.clear();
        done.extend(ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
        for &(ud, res, flags) in &done {
            if ud == ACCEPT {
                if res >= 0 {
                    let one: libc::c_int = 1;
                    // SAFETY: a plain setsockopt on the descriptor accept gave.
                    unsafe { libc::setsockopt(res, libc::IPPROTO_TCP, libc::TCP_NODELAY, (&one as *const libc::c_int).cast(), 4) };
                    conns.insert(res, Conn::default());
                    push(&mut ring, recv(res))?;
                }
                if !cqueue::more(flags) {
                    push(&mut ring, opcode::AcceptMulti::new(types::Fd(lfd)).build().user_data(ACCEPT))?;
                }
                continue;
            }
            let fd = (ud & 0xffff_ffff) as i32;
            if ud & !0xffff_ffff == RECV {
                if res == -libc::ENOBUFS {
                    push(&mut ring, recv(fd))?;
                    continue;
                }
                if res <= 0 {
                    // The end of the stream or an error: the connection goes
                    // now, or once its send in flight completes (the kernel
                    // reads that buffer until then).
                    if let Some(c) = conns.get_mut(&fd) {
                        c.ended = true;
                        if c.sending.is_empty() {
                            conns.remove(&fd);
                            close(fd);
                        }
                    }
                    continue;
                }
                let Some(bid) = cqueue::buffer_select(flags) else { continue };
                let Some(Conn { inb, out, sending, .. }) = conns.get_mut(&fd) else {
                    bufs.give(bid);
                    continue;
                };
                inb.extend_from_slice(bufs.data(bid, res as usize));
                bufs.give(bid);
                process(&mut db, inb, out);
                if sending.is_empty() && !out.is_empty() {
                    std::mem::swap(sending, out);
                    push(&mut ring, send(fd, sending))?;
                }
                if !cqueue::more(flags) {
                    push(&mut ring, recv(fd))?;
                }
            } else {
                let Some(Conn { out, sending, ended, .. }) = conns.get_mut(&fd) else { continue };
                if *ended || res < 0 {
                    conns.remove(&fd);
                    close(fd);
                    continue;
                }
                sending.drain(..res as usize);
                if sending.is_empty() {
                    std::mem::swap(sending, out);
                }
                if !sending.is_empty() {
                    push(&mut ring, send(fd, sending))?;
                }
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(port)) = (args.get(1), args.get(2).and_then(|p| p.parse::<u16>().ok())) else {
        eprintln!("usage: syscall-floor epoll|uring|uring-defer PORT");
        std::process::exit(2);
    };
    let r = match mode.as_str() {
        "epoll" => run_epoll(port),
        "uring" => run_uring(port, false),
        "uring-defer" => run_uring(port, true),
        _ => {
            eprintln!("unknown mode {mode}");
            std::process::exit(2);
        }
    };
    if let Err(e) = r {
        eprintln!("syscall-floor: {e}");
        std::process::exit(1);
    }
}
