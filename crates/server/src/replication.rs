//! Replication, both sides, over the state in `repl.rs`: moving the write
//! stream into the backlog and the replicas' output buffers, SYNC/PSYNC
//! (full sync from a background save, partial from the backlog), the
//! periodic work (PINGs to replicas, ACKs to the primary, timeouts), WAIT,
//! promotion, INFO's and ROLE's views. The socket to a primary and its
//! handshake are the event loop's (`link.rs`); once synchronized the
//! primary is an ordinary client whose commands run through dispatch
//! (`net::process_input` counts their bytes into the offset).
//!
//! The stream is kept once, in the shared buffer (`repl::Backlog`): the
//! backlog and every replica read it, each replica from its own position
//! (`Replica::pos`), copied into its output buffer a chunk at a time as
//! its socket takes it (`refill`).
//!
//! A full sync never forks nor blocks: the image is a background save
//! (`persist::repl_save_start`, the same snapshot BGSAVE uses) started at
//! a known offset; what is written meanwhile stays in the shared buffer,
//! held by each waiting replica's position, and follows the image.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::blocking::TimeoutReply;
use crate::client::{Bulk, BulkEnd, Client, ClientId, ReplRole};
use crate::command::{CmdError, CommandMap, Host};
use crate::repl::{encode, Failover, LinkState, Primary, Replica, ReplicaState, StreamSink, Waiter};
use crate::server::Server;


fn backlog_size(srv: &Server) -> usize {
    srv.config.get("repl-backlog-size").and_then(|v| v.parse().ok()).unwrap_or(1 << 20)
}

fn secs(srv: &Server, name: &str, default: u64) -> Duration {
    Duration::from_secs(srv.config.get(name).and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// Takes in the replication settings after a config load or CONFIG SET:
/// min-replicas-to-write, repl-backlog-size.
pub fn config_changed(srv: &mut Server) {
    srv.repl.min_replicas = srv.config.get("min-replicas-to-write").and_then(|v| v.parse().ok()).unwrap_or(0);
    let size = backlog_size(srv);
    if srv.repl.backlog.active && srv.repl.backlog.size() != size {
        srv.repl.backlog.set_size(size);
        trim(srv);
    }
}

/// Attaches the stream's sink and activates the backlog, once: from then
/// on every write is encoded for replicas (as Redis keeps its backlog
/// after the last replica left).
pub fn ensure_stream(srv: &mut Server) {
    ensure_sink(srv);
    if !srv.repl.backlog.active {
        let (size, end) = (backlog_size(srv), srv.repl.offset);
        srv.repl.backlog.reset(size, end);
        srv.repl.backlog.active = true;
    }
}

/// A primary restarted from an RDB file that carried its replication
/// history: its backlog starts at the saved offset, and the keys the file
/// held that expired meanwhile go out as DELs (UNLINK under
/// lazyfree-lazy-expire) first, as Redis feeds them while it loads, so
/// replicas that continue by PSYNC drop them too.
pub fn start_restored(srv: &mut Server) {
    ensure_stream(srv);
    let cmd: &[u8] = if srv.config.flag("lazyfree-lazy-expire") { b"UNLINK" } else { b"DEL" };
    for (db, key) in std::mem::take(&mut srv.repl.expired_at_load) {
        srv.feed.push(db, vec![cmd.to_vec(), key]);
    }
    drain(srv);
}

/// Attaches the stream's sink, once, without a backlog: the offset then
/// counts every write, which WAITAOF needs with the AOF on even when no
/// replica ever attached (Redis counts its offset for the AOF then too).
pub fn ensure_sink(srv: &mut Server) {
    if !srv.repl.sink_attached {
        srv.feed.attach(Box::new(StreamSink(srv.repl.stream.clone())));
        srv.repl.sink_attached = true;
        srv.apply_notify_flags();
    }
}

/// Moves what the feed encoded since the last call into the stream. On a
/// replica that is nothing: its stream is its primary's, passed on as it
/// is applied (`feed_raw`).
pub fn drain(srv: &mut Server) {
    if !srv.repl.sink_attached || srv.repl.stream.borrow().is_empty() {
        return;
    }
    let bytes = std::mem::take(&mut *srv.repl.stream.borrow_mut());
    if srv.repl.is_replica() {
        return;
    }
    feed_raw(srv, &bytes);
}

/// DEBUG REPLICATE: `argv` goes to the replicas (and the backlog) only,
/// not to the AOF and not run here, so tests can make a replica diverge.
/// A replica, whose stream is its primary's, sends nothing.
pub fn replicate_only(srv: &mut Server, argv: &[Vec<u8>]) {
    if srv.repl.is_replica() {
        return;
    }
    drain(srv);
    let mut v = Vec::new();
    encode(argv, &mut v);
    feed_raw(srv, &v);
}

/// Appends `bytes` to the stream: the offset and the shared buffer, which
/// every replica reads from its position (online ones now, the others
/// after their image).
pub fn feed_raw(srv: &mut Server, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    srv.repl.offset += bytes.len() as i64;
    if srv.repl.backlog.active {
        srv.repl.backlog.append(bytes);
    }
    if srv.repl.replicas.is_empty() {
        trim(srv);
        return;
    }
    deliver(srv);
}

/// Stream bytes copied into a replica's output buffer at a time: the rest
/// stays in the shared buffer until its socket took these.
pub const REFILL: usize = 64 * 1024;

/// True for a replica whose position holds the shared buffer: it got
/// +FULLRESYNC or +CONTINUE.
fn holds(r: &Replica) -> bool {
    r.state != ReplicaState::WaitBgsaveStart
}

/// The stream bytes `r` has not been given yet.
fn unsent(repl: &crate::repl::Repl, r: &Replica) -> u64 {
    if holds(r) {
        (repl.backlog.end() - r.pos).max(0) as u64
    } else {
        0
    }
}

/// What counts against replica `id`'s client-output-buffer-limit, and
/// what CLIENT LIST adds to its `omem`: the stream it was not sent yet,
/// beyond its output buffer.
pub fn replica_unsent(srv: &Server, id: ClientId) -> u64 {
    srv.repl.replicas.get(&id).map_or(0, |r| unsent(&srv.repl, r))
}

/// The `replica` class's limit as it applies: a hard limit below
/// repl-backlog-size counts as that size, as in Redis, since a replica
/// may be sent that much at once by a partial resync (and the bytes are
/// the backlog's anyway).
fn replica_limit(srv: &Server) -> crate::config::ObufLimit {
    let mut l = srv.config.obuf.replica;
    let size = srv.repl.backlog.size() as u64;
    if l.hard > 0 && l.hard < size {
        l.hard = size;
    }
    l
}

/// Gives online replicas with an empty output buffer the next chunk of
/// the stream (a replica that is the running client gets it when its
/// reply is written). A replica whose unsent stream and output pass the
/// `replica` class's client-output-buffer-limit (hard, or soft for too
/// long) is cut off, as Redis cuts it: it resyncs. Then releases the
/// blocks nobody needs.
pub fn deliver(srv: &mut Server) {
    let limit = replica_limit(srv);
    let Server { repl, clients, woken, config, obuf_kills, sweep_clients, .. } = srv;
    let end = repl.backlog.end();
    for (id, r) in repl.replicas.iter_mut() {
        if !holds(r) {
            continue;
        }
        let Some(c) = clients.get_mut(id) else { continue };
        if c.close_asap {
            continue;
        }
        let left = (end - r.pos).max(0) as u64;
        if left == 0 && c.obuf_soft_since.is_none() {
            continue;
        }
        if crate::obuf::over(limit, left + c.pending_out() as u64, &mut c.obuf_soft_since) {
            config.log.warning(&format!("Client {} scheduled to be closed ASAP for overcoming of output buffer limits.", c.info_line_with(Instant::now(), left)));
            c.close_asap = true;
            *obuf_kills += 1;
            *sweep_clients = true;
            continue;
        }
        if left == 0 || r.state != ReplicaState::Online || r.wait_ack || c.bulk.is_some() || c.pending_out() > 0 {
            continue;
        }
        match repl.backlog.read(r.pos, REFILL, &mut c.reply.buf) {
            Some(n) => r.pos += n as i64,
            None => lost_position(config, c, sweep_clients),
        }
        woken.push(*id);
    }
    trim(srv);
}

/// A replica whose position fell out of the shared buffer (it was reset
/// under it) cannot be continued: it is closed, and resyncs.
fn lost_position(config: &crate::config::Config, c: &mut Client, sweep: &mut bool) {
    config.log.warning(&format!("Replica {} lost its place in the replication buffer; closing it", c.addr));
    c.close_asap = true;
    *sweep = true;
}

/// From `flush`, once replica `c`'s output buffer is written: copies up
/// to `max` more bytes of the stream it has not been given into it.
/// Returns how many.
pub fn refill(srv: &mut Server, c: &mut Client, max: usize) -> usize {
    if c.repl_role != ReplRole::Replica || c.bulk.is_some() || c.close_asap {
        return 0;
    }
    let Some(r) = srv.repl.replicas.get_mut(&c.id) else { return 0 };
    if r.state != ReplicaState::Online || r.wait_ack || r.pos >= srv.repl.backlog.end() {
        return 0;
    }
    match srv.repl.backlog.read(r.pos, max, &mut c.reply.buf) {
        Some(n) => {
            r.pos += n as i64;
            n
        }
        None => {
            lost_position(&srv.config, c, &mut srv.sweep_clients);
            0
        }
    }
}

/// Releases the shared buffer's oldest blocks that no replica needs and
/// the configured backlog size does not keep. A replica being closed no
/// longer holds anything.
pub fn trim(srv: &mut Server) {
    let hold = srv.repl.replicas.iter().filter(|(id, r)| holds(r) && srv.clients.get(id).is_none_or(|c| !c.close_asap)).map(|(_, r)| r.pos).min().unwrap_or(i64::MAX);
    srv.repl.backlog.trim(hold);
}

/// A full sync's save that ended (`Repl::rdb_done`) goes to its replicas
/// now: the image to those waiting for it, online for those that received
/// it as it was written.
pub fn save_ended(srv: &mut Server, host: &mut dyn Host) {
    if srv.repl.rdb_done.is_some() {
        finish_full_sync(srv, host);
    }
}

/// The work after each event loop turn: the stream reaches the replicas;
/// a WAIT asks them for acknowledgements.
pub fn after_turn(srv: &mut Server) {
    if !srv.repl.sink_attached {
        return;
    }
    if srv.bgsave.as_ref().is_some_and(|j| j.purpose == crate::bgsave::Purpose::Repl) {
        wake_streaming(srv);
    }
    if srv.repl.replicas.values().any(|r| r.state == ReplicaState::SendBulk) {
        bulk_sent(srv);
    }
    // Not while writes are held (CLIENT PAUSE WRITE/ALL): a GETACK moves
    // the offset; it goes out once the pause ends.
    if srv.repl.get_ack && !srv.repl.is_replica() && srv.paused_at(crate::server::unix_ms()).is_none() {
        srv.repl.get_ack = false;
        drain(srv);
        let mut v = Vec::new();
        encode(&[b"REPLCONF".to_vec(), b"GETACK".to_vec(), b"*".to_vec()], &mut v);
        feed_raw(srv, &v);
    }
    drain(srv);
    deliver(srv);
}

/// Client `id` asked for a sync: its entry as a replica, with what it
/// announced before.
fn replica_entry(srv: &mut Server, id: ClientId) -> &mut Replica {
    let announced = srv.repl.announced.remove(&id);
    srv.repl.replicas.entry(id).or_insert_with(|| announced.unwrap_or_default())
}

/// Where REPLCONF keeps what client `id` announces: its replica entry
/// once it asked for a sync, else apart (a connection that has only
/// announced itself is no replica yet: a full sync starting now must not
/// send it +FULLRESYNC and an image it did not ask for).
pub fn announce(srv: &mut Server, id: ClientId) -> &mut Replica {
    match srv.repl.replicas.entry(id) {
        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::btree_map::Entry::Vacant(_) => srv.repl.announced.entry(id).or_default(),
    }
}

/// SYNC or PSYNC from `c`: `psync` is (replid, offset) for PSYNC.
/// Answers +CONTINUE with the backlog's bytes when they are there, else
/// starts (or waits for) a full sync. `failover` (PSYNC ... FAILOVER) is
/// this server's primary handing over in a coordinated failover: it is
/// promoted first, when the id is its own, and the old primary continues
/// as its replica.
///
/// Errors: this server is a replica whose own link is down, is failing
/// over itself, or a FAILOVER request that does not fit.
pub fn sync_request(srv: &mut Server, host: &mut dyn Host, c: &mut Client, psync: Option<(Vec<u8>, i64)>, failover: bool) -> Result<(), CmdError> {
    if c.repl_role == ReplRole::Replica {
        return Ok(());
    }
    if let (true, Some((replid, _))) = (failover, &psync) {
        srv.config.log.notice(&format!("Failover request received for replid {}.", String::from_utf8_lossy(replid)));
        if !srv.repl.is_replica() {
            return Err(CmdError::err("PSYNC FAILOVER can't be sent to a master."));
        }
        if *replid != srv.repl.replid.as_bytes() {
            return Err(CmdError::err("PSYNC FAILOVER replid must match my replid."));
        }
        promote(srv);
        srv.config.log.notice(&format!("MASTER MODE enabled (failover request from '{}')", c.info_line(Instant::now())));
    }
    if srv.repl.failover.is_some() {
        return Err(CmdError::Custom("NOMASTERLINK Can't SYNC while failing over".into()));
    }
    if srv.repl.primary.as_ref().is_some_and(|p| p.state != LinkState::Connected) {
        return Err(CmdError::Custom("NOMASTERLINK Can't SYNC while not connected with my master".into()));
    }
    ensure_stream(srv);
    drain(srv);
    let id = c.id;
    if let Some((replid, offset)) = &psync {
        let ours = *replid == srv.repl.replid.as_bytes() || (*replid == srv.repl.replid2.as_bytes() && *offset <= srv.repl.second_offset);
        if ours && srv.repl.backlog.holds(*offset) {
            // It continues from its offset in the shared buffer: the
            // bytes follow +CONTINUE as its socket takes them.
            c.repl_role = ReplRole::Replica;
            let r = replica_entry(srv, id);
            r.state = ReplicaState::Online;
            r.pos = *offset - 1;
            r.ack_time = Instant::now();
            let line = if r.capa_psync2 { format!("+CONTINUE {}\r\n", srv.repl.replid) } else { "+CONTINUE\r\n".to_string() };
            c.reply.raw(line.as_bytes());
            srv.repl.sync_partial_ok += 1;
            let len = srv.repl.backlog.end() - (*offset - 1);
            srv.config.log.notice(&format!("Partial resynchronization request from {} accepted. Sending {len} bytes of backlog starting from offset {offset}.", c.addr));
            return Ok(());
        }
        if replid.as_slice() != b"?" {
            srv.repl.sync_partial_err += 1;
        }
    }
    c.repl_role = ReplRole::Replica;
    // repl-disable-tcp-nodelay: fewer, larger packets to the replica. A
    // socket an I/O thread holds gets it when given back (net.rs).
    if srv.config.flag("repl-disable-tcp-nodelay") {
        if let Some(sock) = c.sock.as_ref() {
            sock.set_nodelay(false);
        }
    }
    let r = replica_entry(srv, id);
    r.state = ReplicaState::WaitBgsaveStart;
    r.plain_sync = psync.is_none();
    r.wait_since = Instant::now();
    srv.repl.sync_full += 1;
    srv.config.log.notice(&format!("Replica {} asks for synchronization", c.addr));
    if srv.bgsave.is_none() && !sync_due(srv) {
        srv.config.log.notice("Delay next BGSAVE for diskless SYNC");
    }
    start_full_sync(srv, host, Some(c));
    Ok(())
}

/// Starts a background save for the replicas waiting for one, when none
/// runs; each is told +FULLRESYNC with the offset the image is at. `cur`
/// is the running client (not in `srv.clients`), if it is one of them.
fn start_full_sync(srv: &mut Server, host: &mut dyn Host, cur: Option<&mut Client>) {
    if !srv.repl.replicas.values().any(|r| r.state == ReplicaState::WaitBgsaveStart) {
        return;
    }
    if srv.bgsave.is_some() {
        attach_to_running(srv, cur);
        return;
    }
    // A save that ended and was not reported yet is reported first: its
    // replicas' flags and its result must not meet the next save's.
    finish_full_sync(srv, host);
    if !sync_due(srv) {
        return;
    }
    drain(srv);
    // Diskless: the image goes out EOF-marked as the save writes it.
    let stream = srv.config.flag("repl-diskless-sync") && srv.repl.replicas.values().filter(|r| r.state == ReplicaState::WaitBgsaveStart).all(|r| r.capa_eof);
    if let Err(e) = crate::persist::repl_save_start(srv, host, stream) {
        srv.config.log.warning(&format!("BGSAVE for replication failed: {e}"));
        return;
    }
    // Everything the feed encodes from here is after the image.
    srv.feed.reselect();
    srv.repl.rdb_offset = srv.repl.offset;
    let line = format!("+FULLRESYNC {} {}\r\n", srv.repl.replid, srv.repl.offset);
    let at = srv.repl.offset;
    await_image(srv, cur, &line, at);
}

/// Moves the replicas waiting for a save to waiting for its image, each
/// at position `at` (the image's offset: the stream after it follows the
/// image), and tells them `line` (+FULLRESYNC; not a plain SYNC's). When
/// the save streams its image (a diskless sync), a replica that takes the
/// EOF-marked form starts receiving it now, from the file's first byte,
/// and follows the writer (`BulkEnd::Growing`).
fn await_image(srv: &mut Server, mut cur: Option<&mut Client>, line: &str, at: i64) {
    let stream = srv.bgsave.as_ref().and_then(|j| j.stream());
    let ids: Vec<ClientId> = srv.repl.replicas.iter().filter(|(_, r)| r.state == ReplicaState::WaitBgsaveStart).map(|(&id, _)| id).collect();
    for id in ids {
        let Some(r) = srv.repl.replicas.get_mut(&id) else { continue };
        r.state = ReplicaState::WaitBgsaveEnd;
        r.pos = at;
        let plain = r.plain_sync;
        let eof = r.capa_eof && stream.is_some();
        // A streamed image's end may reach the replica, and its ACK come
        // back, before this server notices the save ended: the stream after
        // the image waits for that ACK from now on.
        r.wait_ack = eof;
        r.streamed = false;
        let c = match cur.as_deref_mut().filter(|c| c.id == id) {
            Some(c) => Some(c),
            None => srv.clients.get_mut(&id),
        };
        if let Some(c) = c {
            if !plain {
                c.reply.raw(line.as_bytes());
            }
            if let (Some((path, progress)), true) = (&stream, eof) {
                match std::fs::File::open(path) {
                    Ok(file) => {
                        send_eof_marked(c, file, BulkEnd::Growing(progress.clone()));
                        if let Some(r) = srv.repl.replicas.get_mut(&id) {
                            r.streamed = true;
                        }
                        srv.config.log.notice(&format!("Streamed RDB transfer with replica {} started", c.addr));
                    }
                    Err(e) => {
                        srv.config.log.warning(&format!("Can't open the image being written for replica {}: {e}", c.addr));
                        c.close_asap = true;
                        srv.sweep_clients = true;
                    }
                }
            }
            srv.woken.push(id);
        }
    }
}

/// Starts sending image `file` in the EOF-marked form (`$EOF:<mark>`, the
/// file up to `end`, the mark again), for a replica that announced
/// `capa eof`.
fn send_eof_marked(c: &mut Client, file: std::fs::File, end: BulkEnd) {
    let mark = crate::repl::random_id();
    c.reply.raw(format!("$EOF:{mark}\r\n").as_bytes());
    c.bulk = Some(Bulk::new(file, end, mark.into_bytes()));
}

/// Replicas receiving an image as the save writes it that caught up with
/// the writer are looked at again each turn, for what it wrote since.
fn wake_streaming(srv: &mut Server) {
    let Server { repl, clients, woken, .. } = srv;
    for (id, r) in repl.replicas.iter() {
        if r.state != ReplicaState::WaitBgsaveEnd {
            continue;
        }
        if let Some(c) = clients.get(id) {
            if c.bulk.as_ref().is_some_and(Bulk::growing) && c.sent == c.reply.buf.len() {
                woken.push(*id);
            }
        }
    }
}

/// Whether the replicas waiting for a full sync get it now. A disk-based
/// sync starts at once. A diskless one (repl-diskless-sync, and every
/// waiting replica takes the EOF-marked form) waits, as Redis's does, until
/// the first of them has waited repl-diskless-sync-delay seconds, or
/// repl-diskless-sync-max-replicas (when not 0) are waiting, so that
/// replicas arriving together share one image.
fn sync_due(srv: &Server) -> bool {
    let waiting: Vec<&Replica> = srv.repl.replicas.values().filter(|r| r.state == ReplicaState::WaitBgsaveStart).collect();
    if waiting.is_empty() || !srv.config.flag("repl-diskless-sync") || !waiting.iter().all(|r| r.capa_eof) {
        return true;
    }
    let max: usize = srv.config.get("repl-diskless-sync-max-replicas").and_then(|v| v.parse().ok()).unwrap_or(0);
    if max > 0 && waiting.len() >= max {
        return true;
    }
    let delay = secs(srv, "repl-diskless-sync-delay", 5);
    waiting.iter().map(|r| r.wait_since.elapsed()).max().is_some_and(|idle| idle >= delay)
}

/// Replicas asking for a full sync while a full sync's save runs share its
/// image: they start from its offset, whose stream a replica already
/// waiting for it keeps in the shared buffer.
fn attach_to_running(srv: &mut Server, cur: Option<&mut Client>) {
    if crate::persist::bgsave_running(srv) != Some(crate::bgsave::Purpose::Repl) {
        return;
    }
    let at = srv.repl.rdb_offset;
    if !srv.repl.replicas.values().any(|r| r.state == ReplicaState::WaitBgsaveEnd) || !srv.repl.backlog.holds(at + 1) {
        return;
    }
    let line = format!("+FULLRESYNC {} {}\r\n", srv.repl.replid, at);
    await_image(srv, cur, &line, at);
}

/// A full sync's image is ready (or failed): each waiting replica gets it
/// streamed from the file as its socket drains (`Client::bulk`: never
/// whole in memory, and not counted against its output buffer limit, as
/// Redis sends it), then what was written meanwhile, and goes online.
fn finish_full_sync(srv: &mut Server, host: &mut dyn Host) {
    let Some(done) = srv.repl.rdb_done.take() else { return };
    // Those that received the image as it was written (some may have
    // loaded it and gone online on their first ACK already).
    let streaming: Vec<ClientId> = srv.repl.replicas.iter().filter(|(_, r)| r.streamed).map(|(&id, _)| id).collect();
    let waiting: Vec<ClientId> = srv.repl.replicas.iter().filter(|(_, r)| r.state == ReplicaState::WaitBgsaveEnd && !r.streamed).map(|(&id, _)| id).collect();
    if !streaming.is_empty() && done.is_ok() {
        // Redis's wording, which the suite and operators wait for.
        srv.config.log.notice(&format!("Diskless rdb transfer, done reading from pipe, {} replicas still up.", streaming.len()));
    }
    for id in streaming {
        let Some(r) = srv.repl.replicas.get_mut(&id) else { continue };
        r.streamed = false;
        if r.state != ReplicaState::WaitBgsaveEnd {
            continue;
        }
        let Some(c) = srv.clients.get_mut(&id) else { continue };
        if let Err(e) = &done {
            // Its transfer breaks off: the image will not be complete.
            srv.config.log.warning(&format!("Background transfer error for replica {}: {e}", c.addr));
            c.close_asap = true;
            srv.sweep_clients = true;
            srv.repl.replicas.remove(&id);
            continue;
        }
        // Its stream goes out once it acknowledged the image (`wait_ack`
        // was set when it began).
        r.state = ReplicaState::Online;
        r.ack_time = Instant::now();
        srv.config.log.notice(&format!("Synchronization with replica {} succeeded", c.addr));
        srv.woken.push(id);
    }
    if done.is_ok() {
        deliver(srv);
    }
    let opened = done.and_then(|path| {
        // One handle per replica; the file itself goes at once (open
        // handles keep its bytes until the last transfer ends).
        let files: Result<Vec<std::fs::File>, String> = waiting.iter().map(|_| std::fs::File::open(&path).map_err(|e| e.to_string())).collect();
        let size = std::fs::metadata(&path).map(|m| m.len()).map_err(|e| e.to_string());
        let _ = std::fs::remove_file(&path);
        Ok((files?, size?))
    });
    let (files, size) = match opened {
        Ok(f) => f,
        Err(e) => {
            srv.config.log.warning(&format!("Background transfer error: {e}"));
            for id in waiting {
                srv.repl.replicas.remove(&id);
                if let Some(c) = srv.clients.get_mut(&id) {
                    c.close_asap = true;
                }
                srv.sweep_clients = true;
            }
            return;
        }
    };
    srv.config.log.notice("Background RDB transfer terminated with success");
    let diskless = srv.config.flag("repl-diskless-sync");
    for (id, file) in waiting.into_iter().zip(files) {
        let Some(r) = srv.repl.replicas.get_mut(&id) else { continue };
        let Some(c) = srv.clients.get_mut(&id) else { continue };
        if diskless && r.capa_eof {
            send_eof_marked(c, file, BulkEnd::Size(size));
            // Online once it acknowledges the image it loaded.
            r.state = ReplicaState::Online;
            r.wait_ack = true;
            srv.config.log.notice(&format!("Synchronization with replica {} succeeded", c.addr));
        } else {
            c.reply.raw(format!("${size}\r\n").as_bytes());
            c.bulk = Some(Bulk::new(file, BulkEnd::Size(size), Vec::new()));
            r.state = ReplicaState::SendBulk;
        }
        r.ack_time = Instant::now();
        srv.woken.push(id);
    }
    start_full_sync(srv, host, None);
}

/// Replicas whose image went out in full go online: what was written
/// meanwhile follows it.
fn bulk_sent(srv: &mut Server) {
    let sent: Vec<ClientId> = srv.repl.replicas.iter().filter(|(id, r)| r.state == ReplicaState::SendBulk && srv.clients.get(id).is_none_or(|c| c.bulk.is_none())).map(|(&id, _)| id).collect();
    for id in sent {
        let Some(r) = srv.repl.replicas.get_mut(&id) else { continue };
        r.state = ReplicaState::Online;
        r.ack_time = Instant::now();
        if let Some(c) = srv.clients.get(&id) {
            srv.config.log.notice(&format!("Synchronization with replica {} succeeded", c.addr));
        }
    }
    deliver(srv);
}

/// Periodic work, `hz` times a second: full syncs to start or finish,
/// PINGs to replicas every repl-ping-replica-period, replicas silent past
/// repl-timeout cut off; on a replica, an ACK to the primary every second.
pub fn cron(srv: &mut Server, host: &mut dyn Host) {
    failover_cron(srv, host);
    finish_full_sync(srv, host);
    start_full_sync(srv, host, None);
    let now = Instant::now();
    let timeout = secs(srv, "repl-timeout", 60);
    // No PING while writes are held (CLIENT PAUSE WRITE/ALL, a shutdown
    // waiting for replicas): the offset stays where replicas can reach it.
    let held = srv.paused_at(crate::server::unix_ms()).is_some();
    if !srv.repl.replicas.is_empty() && !srv.repl.is_replica() && !held && now.duration_since(srv.repl.last_ping) >= secs(srv, "repl-ping-replica-period", 10) {
        srv.repl.last_ping = now;
        drain(srv);
        let mut v = Vec::new();
        encode(&[b"PING".to_vec()], &mut v);
        feed_raw(srv, &v);
    }
    expire_backlog(srv);
    let late: Vec<ClientId> = srv.repl.replicas.iter().filter(|(_, r)| r.state == ReplicaState::Online && !r.plain_sync && now.duration_since(r.ack_time) > timeout).map(|(&id, _)| id).collect();
    for id in late {
        if let Some(c) = srv.clients.get_mut(&id) {
            srv.config.log.warning(&format!("Disconnecting timedout replica (streaming sync): {}", c.addr));
            c.close_asap = true;
            srv.sweep_clients = true;
        }
    }
    if let Some(p) = srv.repl.primary.as_ref() {
        if let Some(id) = p.client {
            if now.duration_since(p.last_io) > timeout {
                srv.config.log.warning("MASTER timeout: no data nor PING received...");
                if let Some(c) = srv.clients.get_mut(&id) {
                    c.close_asap = true;
                    srv.sweep_clients = true;
                }
            } else if now.duration_since(srv.repl.last_ack) >= Duration::from_secs(1) {
                send_ack(srv);
            }
        }
    }
}

/// A primary without replicas frees its backlog after repl-backlog-ttl
/// seconds (0: never), as Redis does, and takes a new replication id with
/// no second one: writes it takes from now on are in no backlog, so no
/// replica may continue its history by PSYNC. A replica keeps its backlog
/// (it may be promoted and asked to continue).
fn expire_backlog(srv: &mut Server) {
    let ttl: u64 = srv.config.get("repl-backlog-ttl").and_then(|v| v.parse().ok()).unwrap_or(3600);
    if ttl == 0 || !srv.repl.backlog.active || srv.repl.is_replica() || !srv.repl.replicas.is_empty() {
        return;
    }
    if srv.repl.no_replicas_since.elapsed().as_secs() <= ttl {
        return;
    }
    srv.repl.replid = crate::repl::random_id();
    srv.repl.clear_replid2();
    let size = srv.repl.backlog.size();
    srv.repl.backlog.reset(size, srv.repl.offset);
    srv.repl.backlog.active = false;
    srv.config.log.notice(&format!("Replication backlog freed after {ttl} seconds without connected replicas."));
}

/// REPLCONF ACK <offset> [FACK <aof offset>] to the primary: FACK when
/// the AOF is on, the offset up to which it is fsynced (WAITAOF).
pub fn send_ack(srv: &mut Server) {
    srv.repl.last_ack = Instant::now();
    let Some(id) = srv.repl.primary_client() else { return };
    let bytes = ack_command(srv.repl.offset, srv.repl.fsynced);
    if let Some(c) = srv.clients.get_mut(&id) {
        c.reply.raw(&bytes);
        srv.woken.push(id);
    }
}

/// The bytes of REPLCONF ACK <offset>, with FACK <fsynced> unless
/// `fsynced` is -1 (no AOF).
pub fn ack_command(offset: i64, fsynced: i64) -> Vec<u8> {
    let mut argv = vec![b"REPLCONF".to_vec(), b"ACK".to_vec(), offset.to_string().into_bytes()];
    if fsynced != -1 {
        argv.push(b"FACK".to_vec());
        argv.push(fsynced.to_string().into_bytes());
    }
    let mut v = Vec::new();
    encode(&argv, &mut v);
    v
}

/// REPLCONF ACK from replica `id` (with its AOF's FACK, if it sent one):
/// WAIT and WAITAOF callers it satisfies are answered.
pub fn on_ack(srv: &mut Server, table: &CommandMap, id: ClientId, offset: i64, fack: Option<i64>) {
    if let Some(r) = srv.repl.replicas.get_mut(&id) {
        r.ack_offset = r.ack_offset.max(offset);
        if let Some(f) = fack {
            r.aof_ack = r.aof_ack.max(f);
        }
        r.ack_time = Instant::now();
        if r.streamed && r.state == ReplicaState::WaitBgsaveEnd {
            // It loaded a streamed image, so it read the end mark, which
            // goes out only once the file is complete: it is online,
            // whether or not this server has seen the save end yet
            // (which clears `streamed`).
            r.state = ReplicaState::Online;
            if let Some(c) = srv.clients.get(&id) {
                srv.config.log.notice(&format!("Synchronization with replica {} succeeded", c.addr));
            }
        }
        let Some(r) = srv.repl.replicas.get_mut(&id) else { return };
        if r.wait_ack {
            r.wait_ack = false;
            deliver(srv);
        }
    }
    check_waiting(srv, table);
}

/// Answers the WAIT and WAITAOF callers whose replicas (and, for
/// WAITAOF, local AOF) caught up; the others' timeout reply is brought up
/// to date. A WAITAOF that counts the local AOF fails once the AOF is off.
pub fn check_waiting(srv: &mut Server, table: &CommandMap) {
    if srv.repl.waiting.is_empty() {
        return;
    }
    let waiting = std::mem::take(&mut srv.repl.waiting);
    for w in waiting {
        if !srv.blocking.is_blocked(w.client) {
            continue;
        }
        let done = match w.aof_local {
            None => {
                let acked = srv.repl.acked(w.offset);
                srv.blocking.set_timeout_reply(w.client, TimeoutReply::Int(acked));
                acked >= w.replicas
            }
            Some(local) if local > 0 && srv.repl.fsynced == -1 => {
                crate::dispatch::release(srv, table, w.client, crate::dispatch::Release::Failed(WAITAOF_NO_AOF));
                continue;
            }
            Some(local) => {
                let acked = srv.repl.aof_acked(w.offset);
                let here = i64::from(srv.repl.fsynced >= w.offset);
                srv.blocking.set_timeout_reply(w.client, TimeoutReply::Pair(here, acked));
                acked >= w.replicas && here >= local
            }
        };
        if done {
            crate::dispatch::release(srv, table, w.client, crate::dispatch::Release::Timeout);
        } else {
            srv.repl.waiting.push(w);
        }
    }
}

/// WAITAOF's error when it counts the local AOF and there is none.
pub const WAITAOF_NO_AOF: &str = "WAITAOF cannot be used when numlocal is set but appendonly is disabled.";

/// Blocks the running client in WAIT (`aof_local` None) or WAITAOF until
/// `replicas` replicas (and the local AOF) reached `offset`, and asks the
/// replicas for acknowledgements.
pub fn wait_for(srv: &mut Server, client: ClientId, offset: i64, replicas: i64, aof_local: Option<i64>) {
    srv.repl.waiting.push(Waiter { client, offset, replicas, aof_local });
    srv.repl.get_ack = true;
}

/// After the AOF was written (and maybe fsynced): WAITAOF callers that the
/// fsynced offset satisfies now are answered.
pub fn aof_progress(srv: &mut Server, table: &CommandMap) {
    if srv.repl.waiting.iter().any(|w| w.aof_local.is_some()) {
        check_waiting(srv, table);
    }
}

/// A client is closing: forget it as a replica, or, when it was the
/// primary, go back to connecting (PSYNC will ask to continue from the
/// offset reached).
pub fn client_closed(srv: &mut Server, c: &Client) {
    srv.repl.announced.remove(&c.id);
    if srv.repl.replicas.remove(&c.id).is_some() {
        if srv.repl.replicas.is_empty() {
            srv.repl.no_replicas_since = Instant::now();
        }
        // What it alone held goes.
        trim(srv);
        abandon_streamed_save(srv);
    }
    if c.repl_role == ReplRole::Primary {
        primary_link_lost(srv, c.id, c.db);
    }
}

/// The link to the primary (client `id`, last in database `db`) is gone:
/// the primary is cached for a partial resync and the link counts as down
/// from now. CLIENT KILL calls it at once, as Redis frees the primary's
/// client inside the command: the down time (which gates a cluster
/// replica's failover) starts then, not when the loop next sweeps clients.
/// A second call for the same link does nothing.
pub fn primary_link_lost(srv: &mut Server, id: u64, db: usize) {
    if let Some(p) = srv.repl.primary.as_mut().filter(|p| p.client == Some(id)) {
        p.client = None;
        p.state = LinkState::Connect;
        p.down_since = Instant::now();
        srv.repl.cached = true;
        srv.repl.primary_db = db;
        srv.config.log.notice("Connection with master lost.");
    }
}

/// A diskless sync's save that no replica receives any more is stopped,
/// as Redis kills the child of a diskless transfer once its last replica
/// dropped: its image is for the sockets alone, and a replica coming back
/// gets a new one at once instead of waiting for this one to end.
fn abandon_streamed_save(srv: &mut Server) {
    let streamed = srv.bgsave.as_ref().is_some_and(|j| j.purpose == crate::bgsave::Purpose::Repl && j.stream().is_some());
    if streamed && !srv.repl.replicas.values().any(|r| r.streamed || r.state == ReplicaState::WaitBgsaveEnd) {
        // Redis's wording, which the suite and operators wait for (there
        // is no child here: the save's snapshot and thread stop).
        srv.config.log.warning("Diskless rdb transfer, last replica dropped, killing fork child.");
        crate::persist::bgsave_abort(srv);
    }
}

/// A server becoming a replica (REPLICAOF) releases its blocked clients
/// (WAIT, blocking pops ...) with an error and closes them after it, as
/// Redis does: what they wait for may never happen on a replica.
pub fn release_blocked(srv: &mut Server, table: &CommandMap) {
    for id in srv.blocking.parked_ids() {
        if crate::dispatch::release(srv, table, id, crate::dispatch::Release::Unblocked(UNBLOCKED_ROLE)) {
            if let Some(c) = srv.clients.get_mut(&id) {
                c.close_after_reply = true;
            }
        }
    }
    srv.repl.waiting.clear();
}

/// REPLICAOF host port: becomes (or moves to be) a replica of host:port.
/// Returns false if it already replicates that primary.
pub fn set_primary(srv: &mut Server, host: String, port: u16) -> bool {
    if srv.repl.primary.as_ref().is_some_and(|p| p.host == host && p.port == port) {
        return false;
    }
    if let Some(id) = srv.repl.primary_client() {
        if let Some(c) = srv.clients.get_mut(&id) {
            c.close_asap = true;
            c.repl_role = ReplRole::None;
            srv.sweep_clients = true;
            // A partial resync (with this primary again, or one that
            // continues its history) continues the stream where it was,
            // in the database it had selected, as Redis's cached master
            // keeps it.
            srv.repl.primary_db = c.db;
        }
    }
    drain(srv);
    // It continues from its own history (PSYNC2): its id and offset.
    srv.repl.cached = true;
    srv.config.log.notice(&format!("Connecting to MASTER {host}:{port}"));
    // CONFIG GET and CONFIG REWRITE show the primary REPLICAOF set, as
    // Redis's replicaof reads the server's state.
    let _ = srv.config.set("replicaof", &format!("{host} {port}"), true);
    srv.repl.primary = Some(Primary::new(host, port));
    srv.config.log.role = 'S';
    srv.apply_expire_mode();
    true
}

/// REPLICAOF NO ONE: promoted, with a new replication id; the old one
/// stays valid up to here, so the old primary's other replicas can
/// continue from this one.
pub fn promote(srv: &mut Server) {
    let Some(p) = srv.repl.primary.take() else { return };
    if let Some(id) = p.client {
        if let Some(c) = srv.clients.get_mut(&id) {
            c.close_asap = true;
            c.repl_role = ReplRole::None;
            srv.sweep_clients = true;
        }
    }
    // Anything the feed encoded while a replica is not part of the stream.
    srv.repl.stream.borrow_mut().clear();
    srv.repl.shift_replid();
    srv.feed.reselect();
    // Its replicas must learn the new id: they reconnect and continue by
    // PSYNC (+CONTINUE <new id>), as Redis disconnects them.
    disconnect_replicas(srv);
    srv.repl.no_replicas_since = Instant::now();
    let _ = srv.config.set("replicaof", "", true);
    srv.config.log.role = 'M';
    srv.apply_expire_mode();
}

/// Where replica `id` listens, as FAILOVER TO and ROLE name it: the
/// address it announced, else its connection's, and its listening port.
fn replica_addr(srv: &Server, id: ClientId, r: &Replica) -> (String, u16) {
    let ip = r.ip.clone().or_else(|| srv.clients.get(&id).map(|c| c.addr.rsplit_once(':').map_or(c.addr.clone(), |(h, _)| h.to_string()))).unwrap_or_default();
    (ip, r.port)
}

/// FAILOVER's checks of its target: Ok when `host:port` is an online
/// replica of this server.
///
/// Errors: Redis's words for a target that is not a replica, or not online.
pub fn failover_target_check(srv: &Server, host: &str, port: i64) -> Result<(), CmdError> {
    let found = srv.repl.replicas.iter().find(|(id, r)| {
        let (ip, p) = replica_addr(srv, **id, r);
        srv.clients.get(id).is_some_and(|c| c.repl_role == ReplRole::Replica) && ip.eq_ignore_ascii_case(host) && i64::from(p) == port
    });
    match found {
        None => Err(CmdError::err("FAILOVER target HOST and PORT is not a replica.")),
        Some((_, r)) if r.state != ReplicaState::Online => Err(CmdError::err("FAILOVER target replica is not online.")),
        Some(_) => Ok(()),
    }
}

/// Starts a coordinated failover: writes are held until a replica (the
/// target, or any) acknowledged the whole stream, then this server
/// becomes its replica and asks it to take over (`failover_cron`).
pub fn failover_start(srv: &mut Server, f: Failover) {
    match &f.target {
        Some((h, p)) => srv.config.log.notice(&format!("FAILOVER requested to {h}:{p}.")),
        None => srv.config.log.notice("FAILOVER requested to any replica."),
    }
    srv.repl.failover = Some(f);
    srv.apply_expire_mode();
}

/// Ends a failover that failed or was aborted: a server that already
/// became its target's replica is a primary again (with a new id, as
/// after REPLICAOF NO ONE), and writes go on.
pub fn failover_abort(srv: &mut Server, why: &str) {
    let Some(f) = srv.repl.failover.take() else { return };
    match &f.target {
        Some((h, p)) => srv.config.log.notice(&format!("FAILOVER to {h}:{p} aborted: {why}")),
        None => srv.config.log.notice(&format!("FAILOVER to any replica aborted: {why}")),
    }
    if f.in_progress {
        promote(srv);
    }
    srv.apply_expire_mode();
}

/// The target accepted (or answered PSYNC ... FAILOVER with a full sync):
/// the failover is over and this server goes on as its replica.
pub fn failover_done(srv: &mut Server) {
    if srv.repl.failover.take().is_some() {
        srv.apply_expire_mode();
    }
}

/// True while this server, failing over, asks its target to take over.
pub fn failover_in_progress(srv: &Server) -> bool {
    srv.repl.failover.as_ref().is_some_and(|f| f.in_progress)
}

/// The failover's periodic check: its timeout (abort, or with FORCE fail
/// over anyway), else whether the target (or any replica) acknowledged
/// the whole stream, in which case this server becomes its replica and
/// the link sends PSYNC ... FAILOVER.
fn failover_cron(srv: &mut Server, host: &mut dyn Host) {
    let Some(f) = srv.repl.failover.clone() else { return };
    if f.in_progress {
        return;
    }
    if f.deadline.is_some_and(|d| d <= crate::server::unix_ms()) {
        match (f.force, f.target) {
            (true, Some((h, p))) => {
                srv.config.log.notice(&format!("FAILOVER to {h}:{p} time out exceeded, failing over."));
                failover_begin(srv, host, h, p);
            }
            _ => failover_abort(srv, "Replica never caught up before timeout"),
        }
        return;
    }
    drain(srv);
    let offset = srv.repl.offset;
    let synced = srv.repl.replicas.iter().filter(|(id, r)| r.state == ReplicaState::Online && r.ack_offset == offset && srv.clients.contains_key(id)).map(|(id, r)| replica_addr(srv, *id, r)).find(|(ip, p)| f.target.as_ref().is_none_or(|(h, tp)| h.eq_ignore_ascii_case(ip) && tp == p));
    if let Some((h, p)) = synced {
        srv.config.log.notice(&format!("Failover target {h}:{p} is synced, failing over."));
        failover_begin(srv, host, h, p);
    }
}

fn failover_begin(srv: &mut Server, host: &mut dyn Host, h: String, p: u16) {
    if let Some(f) = srv.repl.failover.as_mut() {
        f.in_progress = true;
        f.target = Some((h.clone(), p));
    }
    set_primary(srv, h, p);
    let table = host.table().clone();
    release_blocked(srv, &table);
}

/// The error a client blocked on a server that becomes a replica gets.
pub const UNBLOCKED_ROLE: &str = "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

/// Closes the connections of this server's replicas: the history they
/// follow changed (a promotion, a new primary's different history), so
/// they reconnect and ask again.
pub fn disconnect_replicas(srv: &mut Server) {
    let ids: Vec<ClientId> = srv.repl.replicas.keys().copied().collect();
    for id in ids {
        if let Some(c) = srv.clients.get_mut(&id) {
            if c.repl_role == ReplRole::Replica {
                c.close_asap = true;
                srv.sweep_clients = true;
            }
        }
    }
}

/// The link's state as INFO's master_link_status and ROLE name it.
fn link_words(state: LinkState) -> (&'static str, &'static str) {
    match state {
        LinkState::Connected => ("up", "connected"),
        LinkState::Connect => ("down", "connect"),
        LinkState::Connecting => ("down", "connecting"),
        LinkState::Handshake(_) => ("down", "handshake"),
        LinkState::Transfer => ("down", "sync"),
    }
}

/// INFO's Replication section body.
pub fn info(srv: &Server) -> String {
    let mut s = String::new();
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(s, "{k}:{v}\r\n");
    };
    let r = &srv.repl;
    match &r.primary {
        None => line("role", &"master"),
        Some(p) => {
            line("role", &"slave");
            line("master_host", &p.host);
            line("master_port", &p.port);
            line("master_link_status", &link_words(p.state).0);
            let io = if p.client.is_some() { p.last_io.elapsed().as_secs() as i64 } else { -1 };
            line("master_last_io_seconds_ago", &io);
            line("master_sync_in_progress", &u8::from(p.state == LinkState::Transfer));
            line("slave_read_repl_offset", &r.offset);
            line("slave_repl_offset", &r.offset);
            if p.state == LinkState::Transfer {
                line("master_sync_total_bytes", &p.transfer_size);
                line("master_sync_read_bytes", &p.transfer_read);
                line("master_sync_left_bytes", &(p.transfer_size - p.transfer_read as i64));
                line("master_sync_perc", &"0.00");
                line("master_sync_last_io_seconds_ago", &p.last_io.elapsed().as_secs());
            }
            if p.state != LinkState::Connected {
                line("master_link_down_since_seconds", &p.down_since.elapsed().as_secs());
            }
            line("slave_priority", &srv.config.get("replica-priority").unwrap_or("100"));
            line("slave_read_only", &u8::from(srv.config.flag("replica-read-only")));
            line("replica_announced", &u8::from(srv.config.flag("replica-announced")));
        }
    }
    // REPLCONF makes an entry; SYNC or PSYNC makes a replica.
    let attached: Vec<(&ClientId, &Replica)> = r.replicas.iter().filter(|(id, _)| srv.clients.get(id).is_none_or(|c| c.repl_role == ReplRole::Replica)).collect();
    line("connected_slaves", &attached.len());
    for (i, (id, x)) in attached.iter().enumerate() {
        let ip = x.ip.clone().or_else(|| srv.clients.get(id).map(|c| c.addr.rsplit_once(':').map_or(c.addr.clone(), |(h, _)| h.to_string()))).unwrap_or_default();
        line(&format!("slave{i}"), &format!("ip={ip},port={},state={},offset={},lag={}", x.port, x.state.name(), x.ack_offset, x.ack_time.elapsed().as_secs()));
    }
    line("master_failover_state", &Failover::state_name(r.failover.as_ref()));
    line("master_replid", &r.replid);
    line("master_replid2", &r.replid2);
    line("master_repl_offset", &r.offset);
    line("second_repl_offset", &r.second_offset);
    line("repl_backlog_active", &u8::from(r.backlog.active));
    line("repl_backlog_size", &backlog_size(srv));
    line("repl_backlog_first_byte_offset", &if r.backlog.active { r.backlog.first_offset() } else { 0 });
    line("repl_backlog_histlen", &r.backlog.histlen());
    s
}

/// ROLE's reply.
pub fn role(srv: &Server, out: &mut resp::Reply) {
    let r = &srv.repl;
    match &r.primary {
        None => {
            out.array(3);
            out.bulk(b"master");
            out.int(r.offset);
            let online: Vec<(&ClientId, &Replica)> = r.replicas.iter().filter(|(id, x)| x.state == ReplicaState::Online && srv.clients.get(id).is_none_or(|c| c.repl_role == ReplRole::Replica)).collect();
            out.array(online.len());
            for (id, x) in online {
                let ip = x.ip.clone().or_else(|| srv.clients.get(id).map(|c| c.addr.rsplit_once(':').map_or(c.addr.clone(), |(h, _)| h.to_string()))).unwrap_or_default();
                out.array(3);
                out.bulk(ip.as_bytes());
                out.bulk(x.port.to_string().as_bytes());
                out.bulk(x.ack_offset.to_string().as_bytes());
            }
        }
        Some(p) => {
            out.array(5);
            out.bulk(b"slave");
            out.bulk(p.host.as_bytes());
            out.int(i64::from(p.port));
            out.bulk(link_words(p.state).1.as_bytes());
            out.int(if p.client.is_some() { r.offset } else { -1 });
        }
    }
}
