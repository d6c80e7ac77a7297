//! Atomic slot migration, the server's side (docs/design/cluster.md,
//! "Atomic slot migration"): the source sends the keys of the slots and
//! then every write to them, the destination applies them without serving
//! the slots, and ownership changes in one step at the end. The tasks'
//! bookkeeping and the ownership switch are the state machine's
//! (`cluster::migrate`); the sockets are the event loop's (net.rs opens the
//! destination's connection and calls in here each turn).
//!
//! The stream, source to destination, on one client connection that the
//! destination opened: `CLUSTER SYNCSLOTS START <id> <dest> <a> <b> ...`
//! from the destination, then from the source RESTORE ... REPLACE [ABSTTL]
//! per key and the writes to slots already sent, in the order they ran,
//! then `CLUSTER SYNCSLOTS HANDOFF <id>`; the destination answers on the
//! same socket `CLUSTER SYNCSLOTS DONE <id>` once it owns the slots.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use crate::client::Client;
use crate::cluster::migrate::{BigKey, BigKind, Op, Task, TaskState};
use crate::cluster::Env;
use crate::command::{CmdError, CommandMap, Host};
use crate::exec::{self, Lookup};
use crate::feed::Sink;
use crate::server::Server;
use storage::ValueRef;

/// What a source adds to one destination's output per turn, at most (whole
/// slots, so a slot of many keys may go over). 64 KiB: measured against
/// 256 KiB with bench/cluster.py asm (docs/benchmarks.md), the probe's p99
/// during the move fell (3.2 vs 16.5 ms at 5,000,000 keys) and the move
/// took no longer; the serialization of a step is what a client waits
/// behind.
const STEP_BYTES: usize = 64 << 10;
/// A source does not add keys while this much is still unsent.
const OUTPUT_HIGH: usize = 16 << 20;
/// The destination is caught up when less than this is sent to it and not
/// yet applied there.
const CAUGHT_UP: u64 = 64 << 10;
/// A hash, set, sorted set or list with more elements than this is sent
/// in pieces of `PIECE` elements (HSET, SADD, ZADD, LPUSH), across turns,
/// instead of one RESTORE.
const BIG_ELEMENTS: usize = 8192;
const PIECE: usize = 1024;
/// Commands that change only the key's TTL: forwarded as they are to a key
/// sent in pieces, whatever its type (the first piece carries the TTL as
/// it is then).
const KEY_WISE: &[&[u8]] = &[b"expire", b"pexpire", b"expireat", b"pexpireat", b"persist"];
/// Per type, the commands forwarded as they are to a key in pieces,
/// because they compose with pieces still to come: they name the elements
/// they change, and an element not sent yet comes later as it is then
/// (hash fields, set members); for a list, they touch only the tail,
/// which is sent already (pieces go from the tail to the head). Any other
/// command on such a key sends the keys it touches whole instead.
const HASH_WISE: &[&[u8]] = &[b"hset", b"hmset", b"hsetnx", b"hdel", b"hincrby", b"hincrbyfloat", b"hexpire", b"hpexpire", b"hexpireat", b"hpexpireat", b"hpersist"];
const SET_WISE: &[&[u8]] = &[b"sadd", b"srem"];
const ZSET_WISE: &[&[u8]] = &[b"zrem"];
const LIST_WISE: &[&[u8]] = &[b"rpush", b"rpop"];
/// The name of the write stream's consumer that collects writes to
/// forward.
const SINK: &str = "slot-migration";

/// The feed's consumer for migrations: every propagated command, kept
/// until the end of the turn, when those of slots being migrated go to
/// their destinations.
struct Collect(Rc<RefCell<Vec<Vec<Vec<u8>>>>>);

impl Sink for Collect {
    fn feed(&mut self, argv: &[Vec<u8>]) {
        self.0.borrow_mut().push(argv.to_vec());
    }
    fn name(&self) -> &'static str {
        SINK
    }
}


fn now_ms() -> u64 {
    crate::server::unix_ms().max(0) as u64
}

fn env_of(srv: &Server) -> Env {
    let primary = srv.repl.primary.as_ref();
    let up = primary.is_some_and(|p| p.client.is_some());
    Env {
        now_ms: now_ms(),
        repl_offset: srv.repl.offset.max(0) as u64,
        primary_link_down_ms: 0,
        primary_link_up: up,
        has_keys: srv.dbs.first().is_some_and(|d| !d.is_empty()),
    }
}

/// A new task id: 40 hex characters.
fn new_id(srv: &mut Server) -> String {
    srv.migrations.counter += 1;
    let mut id = crate::repl::random_id();
    let tail = format!("{:08x}", srv.migrations.counter as u32);
    id.replace_range(32..40, &tail);
    id
}

/// Parses `start end [start end ...]` into ranges.
///
/// Errors: Redis's texts for a bad number or range.
pub fn parse_ranges(args: &[Vec<u8>]) -> Result<Vec<(u16, u16)>, CmdError> {
    if args.is_empty() || !args.len().is_multiple_of(2) {
        return Err(CmdError::err("wrong number of arguments for slot ranges"));
    }
    let mut out = Vec::new();
    for pair in args.chunks(2) {
        let a = slot_arg(&pair[0])?;
        let b = slot_arg(&pair[1])?;
        if a > b {
            return Err(CmdError::err(format!("start slot number {a} is greater than end slot number {b}")));
        }
        out.push((a, b));
    }
    Ok(out)
}

fn slot_arg(a: &[u8]) -> Result<u16, CmdError> {
    std::str::from_utf8(a).ok().and_then(|s| s.parse::<i64>().ok()).filter(|&n| (0..crate::cluster::SLOTS as i64).contains(&n)).map(|n| n as u16).ok_or_else(|| CmdError::err(format!("Invalid or out of range slot: {}", String::from_utf8_lossy(a))))
}

// ---------------------------------------------------------------------
// Destination
// ---------------------------------------------------------------------

/// CLUSTER MIGRATION IMPORT: checks that this primary may take `ranges`
/// (all owned by one other primary, none in a running task) and starts a
/// task; the event loop connects to the source. Returns the task id.
///
/// Errors: cluster mode off, a replica, a slot this node owns, slots of
/// several owners or of none, a slot already migrating.
pub fn import(srv: &mut Server, ranges: Vec<(u16, u16)>) -> Result<String, CmdError> {
    let Some(cluster) = srv.cluster.as_deref() else { return Err(CmdError::err("This instance has cluster support disabled")) };
    if cluster.is_replica() {
        return Err(CmdError::err("Slot migration can only be started on a master node"));
    }
    let me = cluster.myself;
    let probe = Task::new(String::new(), Op::Import, ranges.clone(), me, me, 0);
    for &s in &probe.slots {
        if cluster.slots[s as usize] == Some(me) {
            return Err(CmdError::err(format!("Slot {s} is already owned by this node")));
        }
        if srv.migrations.running_with_slot(s).is_some() {
            return Err(CmdError::err(format!("Slot {s} is already being migrated")));
        }
    }
    let source = cluster.single_owner(&probe.slots).map_err(CmdError::err)?;
    if cluster.client_addr(&source).is_none() {
        return Err(CmdError::err("The source node's address is not known"));
    }
    let id = new_id(srv);
    let task = Task::new(id.clone(), Op::Import, ranges, source, me, now_ms());
    // Keys of these slots left here (a migration that failed midway on a
    // node that died before dropping them) are not ours: the import
    // starts from nothing.
    drop_slots(srv, &task.slots);
    srv.config.log.notice(&format!("Slot migration {id}: importing slots {} from {}", task.slots_text(), crate::cluster::name_string(&source)));
    srv.migrations.tasks.push(task);
    srv.migrations.prune();
    Ok(id)
}

/// What the event loop needs to open the connection of an import task
/// waiting for one: (task id, host, port, the first bytes to send).
pub fn due_connection(srv: &mut Server) -> Option<(String, String, u16, Vec<u8>)> {
    let now = now_ms();
    let cluster = srv.cluster.as_deref()?;
    let me = cluster.myself;
    let t = srv.migrations.tasks.iter_mut().find(|t| t.op == Op::Import && t.state == TaskState::Connecting && t.client.is_none() && now >= t.since_ms)?;
    // The source is whoever owns the slots now (a failover may have
    // promoted its replica since the task began).
    match cluster.single_owner(&t.slots) {
        Ok(o) if o == me => {
            t.finish(TaskState::Completed, "", now);
            return None;
        }
        Ok(o) => t.source = o,
        Err(e) => {
            t.last_error = e;
            t.since_ms = now + 1000;
            return None;
        }
    }
    let Some((host, port)) = cluster.client_addr(&t.source) else {
        t.since_ms = now + 1000;
        return None;
    };
    t.since_ms = now + 1000;
    let mut hello = Vec::new();
    let pass = srv.config.get("masterauth").unwrap_or("").to_string();
    if !pass.is_empty() {
        let user = srv.config.get("masteruser").unwrap_or("").to_string();
        if user.is_empty() {
            crate::repl::encode(&[b"AUTH".to_vec(), pass.into_bytes()], &mut hello);
        } else {
            crate::repl::encode(&[b"AUTH".to_vec(), user.into_bytes(), pass.into_bytes()], &mut hello);
        }
    }
    let mut argv: Vec<Vec<u8>> = vec![b"CLUSTER".to_vec(), b"SYNCSLOTS".to_vec(), b"START".to_vec(), t.id.clone().into_bytes(), crate::cluster::name_string(&me).into_bytes()];
    for &(a, b) in &t.ranges {
        argv.push(a.to_string().into_bytes());
        argv.push(b.to_string().into_bytes());
    }
    crate::repl::encode(&argv, &mut hello);
    Some((t.id.clone(), host, port, hello))
}

/// The event loop opened connection `client` for task `id` (None: the
/// connect failed; the task tries again in a second). Returns false when
/// the task no longer wants it (cancelled, ended, or connected already):
/// the caller drops the socket.
pub fn connected(srv: &mut Server, id: &str, client: Option<u64>) -> bool {
    let Some(t) = srv.migrations.get_mut(id).filter(|t| t.state == TaskState::Connecting && t.client.is_none()) else { return false };
    match client {
        Some(c) => {
            let now = now_ms();
            t.client = Some(c);
            t.set_state(TaskState::Syncing, now);
            t.start_time = now;
            t.last_ack = now;
            t.keys = 0;
        }
        None => {
            t.last_error = "could not connect to the source".into();
            t.since_ms = now_ms() + 1000;
        }
    }
    true
}

/// Runs what the source sent on the destination's connection `c`:
/// replies of the source ('+' lines are ignored, a '-' line fails the
/// task), the hand-off, and otherwise the keys and writes, applied without
/// routing (this node does not serve the slots yet) and without reply.
/// Returns false when the command must wait.
pub fn apply_from_source(srv: &mut Server, host: &mut dyn Host, c: &mut Client, argv: Vec<Vec<u8>>) -> bool {
    let first = &argv[0];
    if first.first() == Some(&b'+') {
        return true;
    }
    if first.first() == Some(&b'-') {
        let text = argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ");
        lost_source(srv, c.id, &text[1..], true);
        c.close_asap = true;
        srv.sweep_clients = true;
        return true;
    }
    if argv.len() >= 4 && first.eq_ignore_ascii_case(b"cluster") && argv[1].eq_ignore_ascii_case(b"syncslots") {
        if argv[2].eq_ignore_ascii_case(b"handoff") {
            take_ownership(srv, c, &String::from_utf8_lossy(&argv[3]));
            return true;
        }
        if argv[2].eq_ignore_ascii_case(b"ackme") {
            // Everything before the mark is applied: say so (the source
            // hands off once the lag is small).
            let mut ack = Vec::new();
            crate::repl::encode(&[b"CLUSTER".to_vec(), b"SYNCSLOTS".to_vec(), b"ACK".to_vec(), argv[3].clone()], &mut ack);
            c.reply.raw(&ack);
            if let Some(t) = srv.migrations.by_client(c.id) {
                t.last_ack = now_ms();
            }
            srv.woken.push(c.id);
            return true;
        }
    }
    let mark = c.reply.buf.len();
    let ran = crate::dispatch::call(srv, host, c, argv);
    if ran {
        if c.reply.buf.get(mark.max(c.sent)) == Some(&b'-') {
            let rest = &c.reply.buf[mark.max(c.sent) + 1..];
            let end = rest.windows(2).position(|w| w == b"\r\n").unwrap_or(rest.len()).min(512);
            srv.config.log.warning(&format!("Slot migration: applying the source's command failed: {}", String::from_utf8_lossy(&rest[..end])));
        }
        c.reply.buf.truncate(mark.max(c.sent));
        if let Some(t) = srv.migrations.by_client(c.id) {
            t.keys += 1;
        }
    }
    ran
}

/// The hand-off came: everything the source acknowledged is applied here,
/// and it holds the slots' commands. Take the slots (epoch bump, PONG to
/// all) and tell the source.
fn take_ownership(srv: &mut Server, c: &mut Client, id: &str) {
    let env = env_of(srv);
    let Some(t) = srv.migrations.by_client(c.id).filter(|t| t.id == id) else { return };
    let slots = t.slots.clone();
    t.finish(TaskState::Completed, "", env.now_ms);
    if let Some(cl) = srv.cluster.as_deref_mut() {
        cl.take_imported_slots(&slots, &env);
    }
    srv.config.log.notice(&format!("Slot migration {id}: this node owns the imported slots now"));
    // The socket's output goes to the source: the only thing this side
    // ever writes there besides the opening.
    let mut done = Vec::new();
    crate::repl::encode(&[b"CLUSTER".to_vec(), b"SYNCSLOTS".to_vec(), b"DONE".to_vec(), id.as_bytes().to_vec()], &mut done);
    c.reply.raw(&done);
    c.close_after_reply = true;
    srv.woken.push(c.id);
}

/// The destination lost its connection to the source before the hand-off
/// (or the source refused): what was imported goes, and the task connects
/// again in a second, as Redis's destination retries until cancelled.
/// `fatal` (the source refused) ends the task as failed instead.
fn lost_source(srv: &mut Server, client: u64, why: &str, fatal: bool) {
    let now = now_ms();
    let Some(t) = srv.migrations.by_client(client) else { return };
    let slots = t.slots.clone();
    t.client = None;
    t.last_error = why.to_string();
    if fatal {
        t.finish(TaskState::Failed, why, now);
    } else {
        t.set_state(TaskState::Connecting, now);
        t.retries += 1;
        t.since_ms = now + 1000;
    }
    let id = t.id.clone();
    srv.config.log.warning(&format!("Slot migration {id}: {why}; dropping the keys imported so far"));
    drop_slots(srv, &slots);
}

// ---------------------------------------------------------------------
// Source
// ---------------------------------------------------------------------

/// CLUSTER SYNCSLOTS START id dest a b [a b ...], from a destination on
/// client `c`: from now on this client receives the slots' keys and
/// writes.
///
/// Errors: a slot this node does not own or already migrates.
pub fn sync_start(srv: &mut Server, c: &mut Client, args: &[Vec<u8>]) -> Result<(), CmdError> {
    let Some(cluster) = srv.cluster.as_deref() else { return Err(CmdError::err("This instance has cluster support disabled")) };
    if args.len() < 4 {
        return Err(CmdError::err("wrong number of arguments for 'cluster|syncslots' command"));
    }
    let id = String::from_utf8_lossy(&args[0]).into_owned();
    let dest = cluster.lookup(&args[1]).ok_or_else(|| CmdError::err(format!("Unknown node {}", String::from_utf8_lossy(&args[1]))))?;
    let ranges = parse_ranges(&args[2..])?;
    let me = cluster.myself;
    let task = Task::new(id.clone(), Op::Migrate, ranges, me, dest, now_ms());
    for &s in &task.slots {
        if cluster.slots[s as usize] != Some(me) {
            return Err(CmdError::err(format!("I'm not the owner of hash slot {s}")));
        }
        if srv.migrations.running_with_slot(s).is_some() {
            return Err(CmdError::err(format!("Slot {s} is already being migrated")));
        }
    }
    let mut task = task;
    task.state = TaskState::Syncing;
    task.client = Some(c.id);
    c.slot_export = true;
    srv.config.log.notice(&format!("Slot migration {id}: sending slots {} to {}", task.slots_text(), crate::cluster::name_string(&dest)));
    srv.migrations.tasks.retain(|t| t.id != id);
    srv.migrations.tasks.push(task);
    srv.migrations.prune();
    if !srv.feed.has(SINK) {
        srv.migrations.queue.borrow_mut().clear();
        srv.feed.attach(Box::new(Collect(srv.migrations.queue.clone())));
    }
    Ok(())
}

/// CLUSTER SYNCSLOTS ACK bytes, from the destination on client `c`: it
/// applied that much of the stream.
pub fn sync_ack(srv: &mut Server, c: &Client, bytes: u64) {
    if let Some(t) = srv.migrations.by_client(c.id) {
        t.acked_bytes = t.acked_bytes.max(bytes);
        t.last_ack = now_ms();
    }
}

/// CLUSTER SYNCSLOTS DONE id, from the destination on client `c`: it owns
/// the slots. They become its in this node's view, their keys go (as DEL
/// to replicas and the AOF), and the held commands run, redirected.
pub fn sync_done(srv: &mut Server, c: &mut Client, id: &str) {
    let now = now_ms();
    if srv.migrations.by_client(c.id).is_none_or(|t| t.id != id) {
        return;
    }
    finish_export(srv, id, now);
    c.close_after_reply = true;
}

/// The source's end of a migration whose destination took the slots.
fn finish_export(srv: &mut Server, id: &str, now: u64) {
    let Some(t) = srv.migrations.get_mut(id) else { return };
    let slots = t.slots.clone();
    let dest = t.dest;
    if t.state == TaskState::Handoff {
        t.write_pause_ms = now.saturating_sub(t.since_ms);
    }
    t.finish(TaskState::Completed, "", now);
    if let Some(cl) = srv.cluster.as_deref_mut() {
        cl.give_migrated_slots(&slots, &dest);
    }
    // Their keys go a few thousand a turn (`trim_step`): they are not
    // served here any more, and deleting a million at once would stall.
    start_trim(srv);
    srv.migrations.unpause(&slots);
    srv.config.log.notice(&format!("Slot migration {id}: the destination owns the slots; their keys are deleted here"));
    detach_if_idle(srv);
}

fn detach_if_idle(srv: &mut Server) {
    if !srv.migrations.tasks.iter().any(|t| t.op == Op::Migrate && !t.state.is_final()) && srv.feed.has(SINK) {
        srv.feed.detach(SINK);
        srv.migrations.queue.borrow_mut().clear();
    }
}

/// Ends the source's task carried by `client` (lost, cancelled): the slots
/// stay here. In the hand-off the destination may have taken them: the
/// commands stay held until the cluster says who owns them, at most the
/// node timeout.
fn fail_export(srv: &mut Server, id: &str, why: &str) {
    let now = now_ms();
    let Some(t) = srv.migrations.get_mut(id) else { return };
    if t.state == TaskState::Handoff {
        // Wait for the bus: `after_turn` settles it.
        t.client = None;
        t.last_error = why.to_string();
        return;
    }
    let slots = t.slots.clone();
    t.finish(TaskState::Failed, why, now);
    srv.migrations.unpause(&slots);
    srv.config.log.warning(&format!("Slot migration {id}: {why}; the slots stay here"));
    detach_if_idle(srv);
}

/// The slot of a command's keys (the first key's: routing already
/// refused keys of several slots), or None without keys.
fn slot_of(table: &CommandMap, argv: &[Vec<u8>]) -> Option<Option<u16>> {
    let Lookup::Found(spec) = exec::lookup(table, argv) else { return None };
    let keys = spec.find_keys(argv);
    Some(keys.first().and_then(|&(i, _)| argv.get(i)).map(|k| storage::slot::key_hash_slot(k)))
}

/// The end of every event loop turn: each source's destination gets the
/// writes of this turn to slots it has, then more keys while its output
/// is short, then, caught up, the hand-off. A destination's task whose
/// connection dropped connects again (net.rs).
pub fn after_turn(srv: &mut Server, table: &CommandMap) {
    trim_step(srv);
    let exporting = srv.migrations.tasks.iter().any(|t| t.op == Op::Migrate && !t.state.is_final());
    if !exporting {
        return;
    }
    let forwarded = std::mem::take(&mut *srv.migrations.queue.borrow_mut());
    let ids: Vec<String> = srv.migrations.tasks.iter().filter(|t| t.op == Op::Migrate && !t.state.is_final()).map(|t| t.id.clone()).collect();
    for id in ids {
        step_export(srv, table, &id, &forwarded);
    }
}

fn step_export(srv: &mut Server, table: &CommandMap, id: &str, forwarded: &[Vec<Vec<u8>>]) {
    let now = now_ms();
    let me = srv.cluster.as_deref().map(|c| c.myself);
    let Some(t) = srv.migrations.get_mut(id) else { return };
    let Some(cid) = t.client else {
        // A hand-off whose destination went away: settled by the bus.
        let slots = t.slots.clone();
        let dest = t.dest;
        let since = t.since_ms;
        let owner_now = srv.cluster.as_deref().and_then(|c| c.slots[slots[0] as usize]);
        if owner_now == Some(dest) {
            finish_export(srv, id, now);
        } else if owner_now != me || now.saturating_sub(since) > node_timeout(srv) * 2 {
            let t = srv.migrations.get_mut(id).expect("found above");
            t.set_state(TaskState::Syncing, now);
            fail_export(srv, id, "the destination went away during the hand-off");
        }
        return;
    };
    let Some(mut c) = srv.clients.take(&cid) else {
        fail_export(srv, id, "the destination's connection closed");
        return;
    };
    let t = srv.migrations.get_mut(id).expect("found above");
    let mut fail = None;
    let before = c.reply.buf.len();
    // 1. This turn's writes to slots already sent, in order.
    for argv in forwarded {
        match slot_of(table, argv) {
            Some(Some(s)) if t.has_slot(s) && t.sent[s as usize] => {
                if t.big.is_empty() {
                    crate::repl::encode(argv, &mut c.reply.buf);
                } else {
                    forward_to_big(&mut srv.dbs[0], table, &mut t.big, argv, now as i64, &mut c.reply.buf);
                }
            }
            Some(None) => {
                let name = argv[0].to_ascii_lowercase();
                if name == b"flushall" || name == b"flushdb" {
                    fail = Some("the source was flushed");
                }
            }
            _ => {}
        }
    }
    // 2. More keys, whole slots at a time, while the output is short;
    // first the pieces of a big hash in progress.
    if t.state == TaskState::Syncing && fail.is_none() {
        let start = c.reply.buf.len();
        let db = &mut srv.dbs[0];
        while !t.big.is_empty() && c.reply.buf.len() - start < STEP_BYTES && c.pending_out() < OUTPUT_HIGH {
            send_piece(db, &mut t.big, now as i64, &mut c.reply.buf);
        }
        while t.big.is_empty() && t.next < t.slots.len() && c.reply.buf.len() - start < STEP_BYTES && c.pending_out() < OUTPUT_HIGH {
            let slot = t.slots[t.next];
            t.next += 1;
            t.sent[slot as usize] = true;
            let n = db.count_keys_in_slot(slot) as usize;
            if n == 0 {
                continue;
            }
            for key in db.keys_in_slot(slot, n) {
                if let Some(kind) = db.get(&key, now as i64).and_then(big_kind) {
                    // Whatever the destination had under the name goes;
                    // the elements follow in pieces.
                    crate::repl::encode(&[b"DEL".as_slice(), &key], &mut c.reply.buf);
                    let cursor = match db.get(&key, now as i64) {
                        Some(ValueRef::List(l)) => l.len() as u64,
                        _ => 0,
                    };
                    t.big.push(BigKey { key, kind, cursor, after: None, pieces: 0 });
                    t.keys += 1;
                    continue;
                }
                let Some(expire) = db.expire_of(&key, now as i64) else { continue };
                let Some(payload) = db.get(&key, now as i64).map(|v| storage::rdb::dump_payload(v, now as i64)) else { continue };
                crate::aofcore::reader::encode_restore(&key, &payload, expire, &mut c.reply.buf);
                t.keys += 1;
            }
        }
    }
    // A mark after this turn's bytes: the destination's answer tells how
    // far it applied.
    let added = c.reply.buf.len().saturating_sub(before) as u64;
    if added > 0 {
        t.sent_bytes += added;
        crate::repl::encode(&[b"CLUSTER".to_vec(), b"SYNCSLOTS".to_vec(), b"ACKME".to_vec(), t.sent_bytes.to_string().into_bytes()], &mut c.reply.buf);
    }
    if t.state == TaskState::Syncing && fail.is_none() {
        // 3. Caught up: hold the slots' commands and hand off.
        if t.next == t.slots.len() && t.big.is_empty() && t.sent_bytes.saturating_sub(t.acked_bytes) < CAUGHT_UP {
            t.set_state(TaskState::Handoff, now);
            t.since_ms = now;
            let slots = t.slots.clone();
            crate::repl::encode(&[b"CLUSTER".to_vec(), b"SYNCSLOTS".to_vec(), b"HANDOFF".to_vec(), id.as_bytes().to_vec()], &mut c.reply.buf);
            srv.migrations.pause(&slots);
        }
    }
    srv.woken.push(cid);
    srv.clients.put(cid, c);
    if let Some(why) = fail {
        if let Some(c) = srv.clients.get_mut(&cid) {
            c.close_asap = true;
            srv.sweep_clients = true;
        }
        fail_export(srv, id, why);
    }
}

/// The keys `argv` names.
fn keys_of(table: &CommandMap, argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let Lookup::Found(spec) = exec::lookup(table, argv) else { return Vec::new() };
    spec.find_keys(argv).iter().filter_map(|&(i, _)| argv.get(i).cloned()).collect()
}

/// `key` as it is now, whole: RESTORE ... REPLACE, or DEL when absent.
fn send_whole(db: &mut storage::Db, key: &[u8], now: i64, out: &mut Vec<u8>) {
    let expire = db.expire_of(key, now);
    match (expire, db.get(key, now).map(|v| storage::rdb::dump_payload(v, now))) {
        (Some(expire), Some(payload)) => crate::aofcore::reader::encode_restore(key, &payload, expire, out),
        _ => crate::repl::encode(&[b"DEL".as_slice(), key], out),
    }
}

/// Whether `v` goes in pieces, and as what: a hash, set, sorted set or
/// list of more than `BIG_ELEMENTS` (a set or sorted set with member TTLs
/// goes whole: its pieces would have to carry them).
fn big_kind(v: ValueRef<'_>) -> Option<BigKind> {
    match v {
        ValueRef::Hash(h) if h.len() > BIG_ELEMENTS => Some(BigKind::Hash),
        ValueRef::Set(x) if x.len() > BIG_ELEMENTS && x.min_deadline().is_none() => Some(BigKind::Set),
        ValueRef::ZSet(z) if z.len() > BIG_ELEMENTS && z.min_deadline().is_none() => Some(BigKind::ZSet),
        ValueRef::List(l) if l.len() > BIG_ELEMENTS => Some(BigKind::List),
        _ => None,
    }
}

/// Forwards `argv`, a write to a slot already sent while some keys are in
/// pieces: as it is when it touches none of them, or only their TTL, or
/// composes with their pieces (`HASH_WISE` ...); a DEL or UNLINK of one
/// also ends its pieces (a key made anew under the name comes by its
/// writes). ZADD and ZINCRBY on a sorted set in pieces go as the members
/// named are now (ZADD of the score, or ZREM): the pieces go in score
/// order, so a member moved below them would otherwise never come. RPUSHX
/// goes as RPUSH (the destination may not hold the list yet). Any other
/// write sends the keys it touches whole, as they are now, and their
/// pieces stop.
fn forward_to_big(db: &mut storage::Db, table: &CommandMap, big: &mut Vec<BigKey>, argv: &[Vec<u8>], now: i64, out: &mut Vec<u8>) {
    let keys = keys_of(table, argv);
    let hit: Vec<BigKind> = big.iter().filter(|b| keys.contains(&b.key)).map(|b| b.kind).collect();
    if hit.is_empty() {
        crate::repl::encode(argv, out);
        return;
    }
    let name = argv[0].to_ascii_lowercase();
    let name = name.as_slice();
    if KEY_WISE.contains(&name) {
        crate::repl::encode(argv, out);
        return;
    }
    if name == b"del" || name == b"unlink" {
        crate::repl::encode(argv, out);
        big.retain(|b| !keys.contains(&b.key));
        return;
    }
    if keys.len() == 1 {
        let key = &keys[0];
        match (hit[0], name) {
            (BigKind::Hash, n) if HASH_WISE.contains(&n) => return crate::repl::encode(argv, out),
            (BigKind::Set, n) if SET_WISE.contains(&n) => return crate::repl::encode(argv, out),
            (BigKind::ZSet, n) if ZSET_WISE.contains(&n) => return crate::repl::encode(argv, out),
            (BigKind::List, n) if LIST_WISE.contains(&n) => return crate::repl::encode(argv, out),
            (BigKind::List, b"rpushx") if argv.len() > 2 => {
                let mut a = argv.to_vec();
                a[0] = b"RPUSH".to_vec();
                return crate::repl::encode(&a, out);
            }
            (BigKind::ZSet, b"zincrby") if argv.len() == 4 => return send_members(db, key, &argv[3..], now, out),
            (BigKind::ZSet, b"zadd") => {
                let mut i = 2;
                while i < argv.len() && matches!(argv[i].to_ascii_lowercase().as_slice(), b"nx" | b"xx" | b"gt" | b"lt" | b"ch" | b"incr") {
                    i += 1;
                }
                let members: Vec<Vec<u8>> = argv[i..].iter().skip(1).step_by(2).cloned().collect();
                return send_members(db, key, &members, now, out);
            }
            _ => {}
        }
    }
    big.retain(|b| !keys.contains(&b.key));
    for k in &keys {
        send_whole(db, k, now, out);
    }
}

/// The sorted set `key`'s `members` as they are now: one ZADD of those
/// present with their scores, one ZREM of those gone.
fn send_members(db: &mut storage::Db, key: &[u8], members: &[Vec<u8>], now: i64, out: &mut Vec<u8>) {
    let z = match db.get(key, now) {
        Some(ValueRef::ZSet(z)) => Some(z),
        _ => None,
    };
    let mut add: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), key.to_vec()];
    let mut rem: Vec<Vec<u8>> = vec![b"ZREM".to_vec(), key.to_vec()];
    for m in members {
        match z.and_then(|z| z.score(m)) {
            Some(sc) => {
                add.push(score_text(sc).into_bytes());
                add.push(m.clone());
            }
            None => rem.push(m.clone()),
        }
    }
    if add.len() > 2 {
        crate::repl::encode(&add, out);
    }
    if rem.len() > 2 {
        crate::repl::encode(&rem, out);
    }
}

/// A score as ZADD reads it back bit for bit.
fn score_text(s: f64) -> String {
    if s.is_infinite() {
        return if s > 0.0 { "+inf".into() } else { "-inf".into() };
    }
    format!("{s:?}")
}

/// The next piece of the first big key in `big`: up to `PIECE` elements
/// (HSET with HPEXPIREAT for fields with a TTL; SADD; ZADD in score order
/// after the last sent; LPUSH of the elements before the head part sent,
/// the tail first), the key's TTL after the first piece. The key leaves
/// the queue when its pieces end, or when it is no longer of its type
/// (what became of it went as forwarded writes).
fn send_piece(db: &mut storage::Db, big: &mut Vec<BigKey>, now: i64, out: &mut Vec<u8>) {
    let b = &mut big[0];
    let expire = db.expire_of(&b.key, now);
    let key = b.key.clone();
    let mut argv: Vec<Vec<u8>>;
    let mut ttls: Vec<(Vec<u8>, i64)> = Vec::new();
    let done = match (b.kind, db.get(&key, now)) {
        (BigKind::Hash, Some(ValueRef::Hash(h))) => {
            argv = vec![b"HSET".to_vec(), key.clone()];
            let mut next = b.cursor;
            while argv.len() < 2 + 2 * PIECE {
                next = h.scan(next, PIECE, now, |f, v| {
                    argv.push(f.to_vec());
                    argv.push(v.to_vec());
                });
                if next == 0 {
                    break;
                }
            }
            for f in argv[2..].iter().step_by(2) {
                if let Some(Some(d)) = h.expire_of(f, now) {
                    ttls.push((f.clone(), d));
                }
            }
            b.cursor = next;
            next == 0
        }
        (BigKind::Set, Some(ValueRef::Set(x))) => {
            argv = vec![b"SADD".to_vec(), key.clone()];
            let mut next = b.cursor;
            while argv.len() < 2 + PIECE {
                next = x.scan(next, PIECE, |m| argv.push(m.to_vec()));
                if next == 0 {
                    break;
                }
            }
            b.cursor = next;
            next == 0
        }
        (BigKind::ZSet, Some(ValueRef::ZSet(z))) => {
            argv = vec![b"ZADD".to_vec(), key.clone()];
            let from = match &b.after {
                None => 0,
                Some((ls, lm)) => z.partition(|sc, m| sc < *ls || (sc == *ls && m <= lm.as_slice())),
            };
            let mut last = None;
            for (m, sc) in z.iter_from(from).take(PIECE) {
                argv.push(score_text(sc).into_bytes());
                argv.push(m.to_vec());
                last = Some((sc, m.to_vec()));
            }
            let done = last.is_none() || from + PIECE >= z.len();
            if last.is_some() {
                b.after = last;
            }
            done
        }
        (BigKind::List, Some(ValueRef::List(l))) => {
            let head = (b.cursor as usize).min(l.len());
            let n = head.min(PIECE);
            argv = vec![b"LPUSH".to_vec(), key.clone()];
            let mut elems: Vec<Vec<u8>> = l.iter_from(head - n).take(n).map(|e| e.to_vec()).collect();
            elems.reverse();
            argv.extend(elems);
            b.cursor = (head - n) as u64;
            b.cursor == 0
        }
        _ => {
            big.remove(0);
            return;
        }
    };
    if argv.len() > 2 {
        crate::repl::encode(&argv, out);
    }
    for (f, d) in ttls {
        crate::repl::encode(&[b"HPEXPIREAT".to_vec(), key.clone(), d.to_string().into_bytes(), b"FIELDS".to_vec(), b"1".to_vec(), f], out);
    }
    let b = &mut big[0];
    if b.pieces == 0 {
        if let Some(Some(d)) = expire {
            crate::repl::encode(&[b"PEXPIREAT".to_vec(), key.clone(), d.to_string().into_bytes()], out);
        }
    }
    b.pieces += 1;
    if done {
        big.remove(0);
    }
}

fn node_timeout(srv: &Server) -> u64 {
    srv.config.get("cluster-node-timeout").and_then(|v| v.parse().ok()).unwrap_or(15000)
}

/// A client closed: the task it carried, on either side, lost its
/// connection.
pub fn client_closed(srv: &mut Server, c: &Client) {
    if !c.slot_import && !c.slot_export {
        return;
    }
    let Some(t) = srv.migrations.by_client(c.id) else { return };
    let id = t.id.clone();
    match t.op {
        Op::Import => lost_source(srv, c.id, "the connection to the source closed", false),
        Op::Migrate => fail_export(srv, &id, "the destination's connection closed"),
    }
}

/// CLUSTER MIGRATION CANCEL (and CANCELSLOTMIGRATIONS): ends the running
/// tasks named (`id`, or all), on either side. A destination drops what it
/// imported; a source keeps the slots. Returns how many were cancelled.
pub fn cancel(srv: &mut Server, id: Option<&str>) -> usize {
    let now = now_ms();
    let picked: Vec<Task> = srv.migrations.tasks.iter().filter(|t| !t.state.is_final() && id.is_none_or(|i| t.id == i)).cloned().collect();
    let mut n = 0;
    for Task { id: tid, op, client, slots, state, .. } in picked {
        // A source in its hand-off cannot take it back: the destination
        // may own the slots already.
        if op == Op::Migrate && state == TaskState::Handoff {
            continue;
        }
        n += 1;
        if let Some(t) = srv.migrations.get_mut(&tid) {
            t.finish(TaskState::Canceled, "canceled", now);
        }
        if let Some(cid) = client {
            if let Some(c) = srv.clients.get_mut(&cid) {
                c.close_asap = true;
                srv.sweep_clients = true;
            }
        }
        match op {
            Op::Import => drop_slots(srv, &slots),
            Op::Migrate => srv.migrations.unpause(&slots),
        }
        srv.config.log.notice(&format!("Slot migration {tid} canceled"));
    }
    detach_if_idle(srv);
    n
}

/// Deletes every key of `slots` as deletions go (WATCH, tracking, blocked
/// clients, a `del` event, DEL to replicas and the AOF), as Redis's
/// delKeysInSlot: a slot that moved away, an import dropped.
pub fn drop_slots(srv: &mut Server, slots: &[u16]) {
    for &slot in slots {
        drop_keys(srv, slot, usize::MAX);
    }
}

/// Deletes up to `max` keys of `slot` as `drop_slots` does; returns how
/// many were there to delete (at most `max`).
fn drop_keys(srv: &mut Server, slot: u16, max: usize) -> usize {
    let now = srv.unix_ms_at(Instant::now());
    let n = (srv.dbs[0].count_keys_in_slot(slot) as usize).min(max);
    if n == 0 {
        return 0;
    }
    for key in srv.dbs[0].keys_in_slot(slot, n) {
        let Some(v) = srv.dbs[0].remove(&key, now) else {
            srv.expired_keys += srv.dbs[0].take_lazy_expired();
            crate::publish::flush_db_log(srv, None, 0);
            continue;
        };
        // A big value is freed on the freeing thread, as UNLINK frees it.
        crate::lazyfree::drop_value(&srv.lazyfree, v);
        {
            srv.dirty += 1;
            srv.touch_watched_all(0, &key);
            srv.blocking.signal(0, &key);
            if srv.tracking.clients > 0 {
                crate::publish::invalidate_key(srv, None, None, &key, true);
            }
            crate::publish::emit(srv, None, 0, crate::notify::GENERIC, "del", &key);
            if !srv.feed.is_empty() {
                srv.feed.push(0, vec![b"DEL".to_vec(), key]);
            }
        }
    }
    n
}

/// Keys a primary deletes per turn from slots it holds keys of but no
/// longer owns.
const TRIM_STEP: usize = 2000;

/// The slots this primary holds keys of that another node owns, leaving
/// out slots being imported (legacy IMPORTING or a running task) or
/// migrated: what active trimming deletes.
fn foreign_slots(srv: &Server) -> Vec<u16> {
    let Some(cluster) = srv.cluster.as_deref() else { return Vec::new() };
    let me = cluster.myself;
    srv.dbs[0]
        .slot_counts_nonzero()
        .map(|(s, _)| s)
        .filter(|&s| {
            cluster.slots[s as usize].is_some_and(|o| o != me) && !cluster.importing_from.contains_key(&s) && !cluster.migrating_to.contains_key(&s) && srv.migrations.running_with_slot(s).is_none()
        })
        .collect()
}

/// Starts a trim job (or widens the running one) over every foreign
/// slot's keys.
fn start_trim(srv: &mut Server) {
    let remaining: u64 = foreign_slots(srv).iter().map(|&s| srv.dbs[0].count_keys_in_slot(s)).sum();
    let m = &mut srv.migrations;
    if !m.trim {
        m.trim = true;
        m.trim_started += 1;
        m.trim_job_trimmed = 0;
    }
    m.trim_job_keys = m.trim_job_trimmed + remaining;
}

/// Active trimming: a primary deletes, a few thousand keys a turn, the
/// keys of slots another node owns (a source after its slots left, or a
/// destination's replica promoted after an import it never finished),
/// except slots being imported or migrated (`foreign_slots`). Returns
/// true while there is more to delete.
pub fn trim_step(srv: &mut Server) -> bool {
    if !srv.migrations.trim {
        return false;
    }
    let Some(cluster) = srv.cluster.as_deref() else { return false };
    if cluster.is_replica() || srv.repl.is_replica() {
        // A replica deletes what its primary deletes.
        srv.migrations.trim = false;
        srv.migrations.trim_cancelled += 1;
        return false;
    }
    let mut budget = TRIM_STEP;
    for s in foreign_slots(srv) {
        if budget == 0 {
            return true;
        }
        let n = drop_keys(srv, s, budget);
        srv.migrations.trim_job_trimmed += n as u64;
        budget -= n;
    }
    if budget > 0 {
        srv.migrations.trim = false;
        srv.migrations.trim_completed += 1;
    }
    srv.migrations.trim
}

/// CLUSTER INFO's lines of atomic slot migration, Redis 8.4's fields in
/// its order: running tasks (both sides), and the trim jobs.
pub fn cluster_info(srv: &Server) -> String {
    let m = &srv.migrations;
    let active = m.tasks.iter().filter(|t| !t.state.is_final()).count();
    let (keys, trimmed) = if m.trim { (m.trim_job_keys, m.trim_job_trimmed) } else { (0, 0) };
    format!(
        "cluster_slot_migration_active_tasks:{active}\r\n\
         cluster_slot_migration_active_trim_running:{}\r\n\
         cluster_slot_migration_active_trim_current_job_keys:{keys}\r\n\
         cluster_slot_migration_active_trim_current_job_trimmed:{trimmed}\r\n\
         cluster_slot_migration_stats_active_trim_started:{}\r\n\
         cluster_slot_migration_stats_active_trim_completed:{}\r\n\
         cluster_slot_migration_stats_active_trim_cancelled:{}\r\n",
        u8::from(m.trim),
        m.trim_started,
        m.trim_completed,
        m.trim_cancelled,
    )
}

/// INFO memory's three fields of atomic slot migration (Redis 8.4):
/// bytes waiting in the sources' connections to their destinations,
/// bytes a destination received and has not applied yet, and the most
/// of those seen.
pub fn memory_info(srv: &Server) -> (usize, usize, usize) {
    let mut output = 0;
    let mut input = 0;
    for t in srv.migrations.tasks.iter().filter(|t| !t.state.is_final()) {
        let Some(c) = t.client.and_then(|id| srv.clients.get(&id)) else { continue };
        match t.op {
            Op::Migrate => output += c.pending_out(),
            Op::Import => input += c.qbuf.len(),
        }
    }
    (output, input, srv.migrations.input_peak.max(input))
}

/// Every cron tick: whether some slot this primary holds keys of belongs
/// to another node now (a failover, an import that never finished), so
/// that `trim_step` deletes them; and the peak of the destinations'
/// unapplied input.
pub fn cron(srv: &mut Server) {
    let (_, input, peak) = memory_info(srv);
    srv.migrations.input_peak = peak.max(input);
    let Some(cluster) = srv.cluster.as_deref() else { return };
    if srv.migrations.trim || cluster.is_replica() || srv.repl.is_replica() {
        return;
    }
    if !foreign_slots(srv).is_empty() {
        start_trim(srv);
    }
}

/// CLUSTER MIGRATESLOTS SLOTSRANGE a b [a b ...] NODE id [SLOTSRANGE ...
/// NODE id ...] (Valkey 9, on the source): checks every job, then asks
/// each destination, on a connection of a helper thread (which touches
/// nothing of the server), to import them as CLUSTER MIGRATION IMPORT
/// does; the destination connects back and the job runs as any other.
///
/// Errors: a syntax error, an unknown or replica target, a slot this node
/// does not own or already migrates; then no job starts.
pub fn migrate_slots(srv: &mut Server, args: &[Vec<u8>]) -> Result<(), CmdError> {
    let Some(cluster) = srv.cluster.as_deref() else { return Err(CmdError::err("This instance has cluster support disabled")) };
    let me = cluster.myself;
    let mut jobs: Vec<(crate::cluster::NodeName, Vec<(u16, u16)>)> = Vec::new();
    let mut i = 0;
    let mut seen = vec![false; crate::cluster::SLOTS];
    while i < args.len() {
        if !args[i].eq_ignore_ascii_case(b"slotsrange") {
            return Err(CmdError::Syntax);
        }
        i += 1;
        let start = i;
        while i < args.len() && !args[i].eq_ignore_ascii_case(b"node") {
            i += 1;
        }
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        let ranges = parse_ranges(&args[start..i])?;
        let target = cluster.lookup(&args[i + 1]).ok_or_else(|| CmdError::err(format!("Unknown node {}", String::from_utf8_lossy(&args[i + 1]))))?;
        if target == me {
            return Err(CmdError::err("Target node is this node"));
        }
        if cluster.nodes.get(&target).is_some_and(|n| n.is_replica()) {
            return Err(CmdError::err("Target node is not a primary"));
        }
        for &(a, b) in &ranges {
            for s in a..=b {
                if cluster.slots[s as usize] != Some(me) {
                    return Err(CmdError::err(format!("I'm not the owner of hash slot {s}")));
                }
                if seen[s as usize] || srv.migrations.running_with_slot(s).is_some() {
                    return Err(CmdError::err(format!("Slot {s} is already being migrated")));
                }
                seen[s as usize] = true;
            }
        }
        jobs.push((target, ranges));
        i += 2;
    }
    if jobs.is_empty() {
        return Err(CmdError::Syntax);
    }
    let pass = srv.config.get("masterauth").unwrap_or("").to_string();
    let user = srv.config.get("masteruser").unwrap_or("").to_string();
    for (target, ranges) in jobs {
        let Some((host, port)) = cluster.client_addr(&target) else { return Err(CmdError::err("The target node's address is not known")) };
        let mut req = Vec::new();
        if !pass.is_empty() {
            let mut a = vec![b"AUTH".to_vec()];
            if !user.is_empty() {
                a.push(user.clone().into_bytes());
            }
            a.push(pass.clone().into_bytes());
            crate::repl::encode(&a, &mut req);
        }
        let mut argv = vec![b"CLUSTER".to_vec(), b"MIGRATION".to_vec(), b"IMPORT".to_vec()];
        for (a, b) in ranges {
            argv.push(a.to_string().into_bytes());
            argv.push(b.to_string().into_bytes());
        }
        crate::repl::encode(&argv, &mut req);
        let log = srv.config.log.clone();
        std::thread::spawn(move || {
            // `host`, `req` and `log` came from the executor and go with
            // the closure, after the thread's last line: its exit says so.
            crate::memory::publish_at_exit(0);
            ask_import(&host, port, &req, &log);
        });
    }
    Ok(())
}

/// The helper thread's errand: one request to a destination, its reply
/// line logged when it is an error.
fn ask_import(host: &str, port: u16, req: &[u8], log: &crate::log::Log) {
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(5);
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port)).ok().and_then(|mut a| a.next());
    let Some(mut s) = addr.and_then(|a| std::net::TcpStream::connect_timeout(&a, timeout).ok()) else {
        log.warning(&format!("Slot migration: could not connect to the target {host}:{port}"));
        return;
    };
    let _ = s.set_read_timeout(Some(timeout));
    if s.write_all(req).is_err() {
        return;
    }
    let want = 1 + usize::from(req.starts_with(b"*2\r\n$4\r\nAUTH") || req.starts_with(b"*3\r\n$4\r\nAUTH"));
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while replies(&got) < want {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    if let Some(line) = got.split(|&b| b == b'\n').find(|l| l.starts_with(b"-")) {
        log.warning(&format!("Slot migration: the target {host}:{port} refused: {}", String::from_utf8_lossy(line).trim_end()));
    }
}

/// How many whole replies (simple lines, or bulk strings) `buf` holds.
fn replies(buf: &[u8]) -> usize {
    let mut n = 0;
    let mut lines = buf.split(|&b| b == b'\n').filter(|l| l.ends_with(b"\r"));
    while let Some(l) = lines.next() {
        if l.starts_with(b"$") && !l.starts_with(b"$-1") && lines.next().is_none() {
            break;
        }
        n += 1;
    }
    n
}
