//! Dispatch: look the command up, check arity once, queue it inside MULTI,
//! run it, then do the bookkeeping every command shares (stats, slow log,
//! MONITOR feed, reply suppression). Handlers never count arguments.

use std::time::Instant;

use crate::client::{Client, ReplyMode};
use crate::commands::{flags, CmdError, CommandMap, Ctx, Spec};
use crate::server::{unix_ms, unix_us, SlowEntry};
use crate::server::Server;

/// How a lookup went.
pub enum Lookup<'a> {
    /// Found (a subcommand's spec for container commands).
    Found(&'a Spec),
    /// Unknown command or subcommand, with the error to reply.
    Unknown(CmdError),
    /// Wrong number of arguments.
    BadArity(CmdError),
}

/// Finds the spec for `argv`, descending into subcommands, and checks arity.
pub fn lookup<'a>(table: &'a CommandMap, argv: &[Vec<u8>]) -> Lookup<'a> {
    // Lowercase into a stack buffer: no allocation on the hot path.
    let mut buf = [0u8; 32];
    let raw = &argv[0];
    let found = if raw.len() <= buf.len() {
        buf[..raw.len()].copy_from_slice(raw);
        buf[..raw.len()].make_ascii_lowercase();
        std::str::from_utf8(&buf[..raw.len()]).ok().and_then(|n| table.get(n))
    } else {
        None
    };
    let Some(spec) = found else {
        let mut msg = format!("ERR unknown command '{}', with args beginning with: ", trunc(&argv[0]));
        for a in &argv[1..] {
            if msg.len() >= 128 + 60 {
                break;
            }
            msg.push_str(&format!("'{}' ", trunc(a)));
        }
        return Lookup::Unknown(CmdError::Custom(msg));
    };
    if spec.subcommands.is_empty() {
        if !spec.arity_ok(argv.len()) {
            return Lookup::BadArity(CmdError::Arity(spec.full_name.into()));
        }
        return Lookup::Found(spec);
    }
    if argv.len() < 2 {
        // A container with its own arity (COMMAND) runs bare.
        if spec.arity_ok(argv.len()) && spec.arity != -2 {
            return Lookup::Found(spec);
        }
        return Lookup::BadArity(CmdError::Arity(spec.full_name.into()));
    }
    match spec.subcommand(&argv[1]) {
        Some(sub) => {
            if !sub.arity_ok(argv.len()) {
                return Lookup::BadArity(CmdError::Arity(sub.full_name.into()));
            }
            Lookup::Found(sub)
        }
        None => Lookup::Unknown(CmdError::Custom(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            trunc(&argv[1]),
            spec.name.to_ascii_uppercase()
        ))),
    }
}

fn trunc(a: &[u8]) -> String {
    let s = String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned();
    s.replace(['\r', '\n'], " ")
}

/// Commands that run immediately even inside MULTI.
fn runs_in_multi(name: &str) -> bool {
    matches!(name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset")
}

/// True if `argv` (looked up as `spec`) must wait because of CLIENT PAUSE.
pub fn is_paused(srv: &Server, spec: &Spec, argv: &[Vec<u8>], now: i64) -> bool {
    let Some(p) = srv.pause else { return false };
    if now >= p.until {
        return false;
    }
    if !p.write_only {
        return true;
    }
    // WRITE mode holds writes and commands that may write; EXEC of a
    // transaction is judged by what it queued (done by the caller); a
    // script by the flags its shebang declares; PUBLISH and PFCOUNT may
    // replicate, so they wait too.
    let f = crate::script::command_flags(srv, spec, argv);
    f & flags::WRITE != 0 || f & flags::MAY_REPLICATE != 0
}

/// Runs one request from `c`. Returns false if the client must wait (paused).
pub fn call(srv: &mut Server, c: &mut Client, argv: Vec<Vec<u8>>) -> bool {
    let start = Instant::now();
    let now = srv.unix_ms_at(start);
    let table = srv.commands.clone();
    let spec = match lookup(&table, &argv) {
        Lookup::Found(s) => s,
        Lookup::Unknown(e) | Lookup::BadArity(e) => {
            if c.multi.is_some() {
                c.multi_error = true;
            }
            if let Some(n) = argv.first() {
                let full = String::from_utf8_lossy(n).to_ascii_lowercase();
                if let Some(s) = table.get(&full) {
                    srv.cmdstats.entry(s.full_name).or_default().rejected += 1;
                }
            }
            reply_error(srv, c, &e);
            return true;
        }
    };
    let name = spec.full_name;
    if srv.scripting.running.is_some_and(|r| r.timed_out) && !spec.has(flags::ALLOW_BUSY) {
        reject(srv, c, spec, &CmdError::Custom(srv.scripting.busy_error().into()));
        return true;
    }
    if c.multi.is_some() && !runs_in_multi(name) && spec.has(flags::NO_MULTI) {
        reject(srv, c, spec, &CmdError::err("Command not allowed inside a transaction"));
        return true;
    }
    if srv.config.maxmemory != 0 && oom_sensitive(srv, &table, c, spec, &argv) && crate::memory::allocated() > srv.config.maxmemory {
        reject(srv, c, spec, &CmdError::Custom(OOM_ERROR.into()));
        return true;
    }
    if c.pubsub.is_some() && !c.reply.resp3 && !allowed_in_pubsub(name) {
        let msg = format!("Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context");
        reject(srv, c, spec, &CmdError::err(msg));
        return true;
    }
    if c.multi.is_some() && !runs_in_multi(name) {
        c.multi.as_mut().expect("in multi").push(argv);
        c.reply.simple("QUEUED");
        return true;
    }
    let paused = if name == "exec" {
        srv.pause.is_some_and(|p| now < p.until)
            && c.multi.as_ref().is_some_and(|q| {
                q.iter().any(|a| matches!(lookup(&table, a), Lookup::Found(s) if is_paused(srv, s, a, now)))
            })
    } else {
        is_paused(srv, spec, &argv, now)
    };
    if paused {
        return false;
    }
    run(srv, c, spec, &argv, now, start);
    // Clients blocked on keys this command (or EXEC) made ready; not in the
    // middle of a timed-out script, whose writes must stay atomic.
    if srv.scripting.running.is_none() {
        crate::blocking::serve_ready(srv);
    }
    true
}

/// Commands a RESP2 client in Pub/Sub mode may run.
fn allowed_in_pubsub(name: &str) -> bool {
    matches!(name, "subscribe" | "ssubscribe" | "psubscribe" | "unsubscribe" | "sunsubscribe" | "punsubscribe" | "ping" | "quit" | "reset")
}

/// The reply to a command refused because memory is over `maxmemory`.
pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// True if `spec` must be refused while memory is over `maxmemory`: commands
/// that may grow memory, EXEC of a transaction that queued one, and anything
/// that would be queued (a queue grows without bound), but never EXEC,
/// DISCARD, QUIT or RESET themselves.
fn oom_sensitive(srv: &Server, table: &CommandMap, c: &Client, spec: &Spec, argv: &[Vec<u8>]) -> bool {
    match spec.full_name {
        "exec" => c.multi.as_ref().is_some_and(|q| {
            q.iter().any(|a| matches!(lookup(table, a), Lookup::Found(s) if s.has(flags::DENYOOM)))
        }),
        "discard" | "quit" | "reset" => false,
        _ => crate::script::command_flags(srv, spec, argv) & flags::DENYOOM != 0 || c.multi.is_some(),
    }
}

/// Refuses a command before it runs: counts it as rejected, flags an open
/// transaction, and for EXEC discards the transaction with EXECABORT.
fn reject(srv: &mut Server, c: &mut Client, spec: &Spec, e: &CmdError) {
    srv.cmdstats.entry(spec.full_name).or_default().rejected += 1;
    if spec.full_name == "exec" && c.multi.is_some() {
        c.multi = None;
        c.multi_error = false;
        srv.unwatch_all(c);
        let msg = format!("EXECABORT Transaction discarded because of: {}", e.message());
        reply_error(srv, c, &CmdError::Custom(msg));
        return;
    }
    if c.multi.is_some() {
        c.multi_error = true;
    }
    reply_error(srv, c, e);
}

/// Runs a looked-up command and does the shared bookkeeping.
/// `start` is when the command began (for its duration); `now` the Unix ms
/// time it sees.
pub fn run(srv: &mut Server, c: &mut Client, spec: &Spec, argv: &[Vec<u8>], now: i64, start: Instant) {
    let name = spec.full_name;
    if c.reply_mode == ReplyMode::SkipNext {
        c.reply_mode = ReplyMode::Skip;
    }
    let mark = c.reply.buf.len();
    c.last_cmd = name;
    let db = c.db;
    srv.dbs[db].no_touch = c.no_touch && name != "touch";
    let result = {
        let mut ctx = Ctx { srv, client: c, now };
        (spec.handler)(&mut ctx, argv)
    };
    let end = Instant::now();
    let usec = end.duration_since(start).as_micros() as u64;
    // Keys the command found expired and deleted count as expired (INFO expired_keys).
    srv.expired_keys += srv.dbs[db].take_lazy_expired();
    if c.db != db {
        srv.expired_keys += srv.dbs[c.db].take_lazy_expired();
    }
    // Lazy expiry and key creation recorded after the command's last event.
    for d in [db, c.db] {
        if srv.dbs[d].has_events() {
            crate::notify::flush_db_log(srv, Some(&mut *c), d);
        }
    }
    c.last_interaction = end;
    // Fed after the call, as Redis does: EXEC shows after what it ran. A
    // blocking command shows once, when first run, not when re-run.
    if !srv.monitors.is_empty() && !spec.has(flags::SKIP_MONITOR) && !spec.has(flags::ADMIN) && !srv.blocking.rerunning() {
        feed_monitors(srv, c, argv);
    }
    // A blocked command is accounted once, when it finally replies.
    if crate::blocking::park_if_requested(srv, c, argv, usec, result.is_ok()) {
        return;
    }
    let usec = usec + srv.blocking.take_carried_us();
    if let Err(e) = &result {
        reply_error(srv, c, e);
    }
    account(srv, c, spec, argv, usec, result.is_err());
    match c.reply_mode {
        ReplyMode::Off => c.reply.buf.truncate(mark.max(c.sent)),
        ReplyMode::Skip => {
            c.reply.buf.truncate(mark.max(c.sent));
            c.reply_mode = ReplyMode::On;
        }
        _ => {}
    }
    // Push messages to this client follow its reply (the whole EXEC's).
    if !c.in_exec && !srv.pending_push.is_empty() {
        c.reply.raw(&srv.pending_push);
        srv.pending_push.clear();
    }
}

/// Counts a command that replied: commandstats, the slow log, the latency
/// monitor. `usec` is its execution time.
pub fn account(srv: &mut Server, c: &mut Client, spec: &Spec, argv: &[Vec<u8>], usec: u64, failed: bool) {
    srv.total_commands += 1;
    c.commands += 1;
    let st = srv.cmdstats.entry(spec.full_name).or_default();
    st.calls += 1;
    st.usec += usec;
    let bucket = (64 - usec.max(1).leading_zeros() as usize - 1).min(st.histogram.len() - 1);
    st.histogram[bucket] += 1;
    if failed {
        st.failed += 1;
    }
    if !spec.has(flags::SKIP_SLOWLOG) {
        slowlog_push(srv, c, argv, usec);
    }
    srv.latency_sample("command", usec / 1000);
}

/// Writes an error reply and counts it in errorstats.
pub fn reply_error(srv: &mut Server, c: &mut Client, e: &CmdError) {
    let msg = e.message();
    let code = msg.split(' ').next().unwrap_or("ERR").to_string();
    *srv.errorstats.entry(code).or_default() += 1;
    srv.total_error_replies += 1;
    c.reply.error(&msg);
}

fn slowlog_push(srv: &mut Server, c: &Client, argv: &[Vec<u8>], usec: u64) {
    let threshold = srv.config.slowlog_slower_than;
    if threshold < 0 || (usec as i64) < threshold {
        return;
    }
    let mut args: Vec<Vec<u8>> = Vec::new();
    let max_args = 32;
    for (i, a) in argv.iter().enumerate() {
        if i == max_args - 1 && argv.len() > max_args {
            args.push(format!("... ({} more arguments)", argv.len() - max_args + 1).into_bytes());
            break;
        }
        if a.len() > 128 {
            let mut t = a[..128].to_vec();
            t.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
            args.push(t);
        } else {
            args.push(a.clone());
        }
    }
    let entry = SlowEntry {
        id: srv.slowlog_next_id,
        time: unix_ms() / 1000,
        usec,
        argv: args,
        addr: c.addr.clone(),
        name: c.name.clone().unwrap_or_default(),
    };
    srv.slowlog_next_id += 1;
    srv.slowlog.push_front(entry);
    while srv.slowlog.len() > srv.config.slowlog_max_len {
        srv.slowlog.pop_back();
    }
}

/// Sends `argv` to every MONITOR client (EVAL calls it itself, before the
/// commands its script runs).
pub fn feed_monitors(srv: &mut Server, c: &Client, argv: &[Vec<u8>]) {
    let us = unix_us();
    let mut line = format!("{}.{:06} [{} {}]", us / 1_000_000, us % 1_000_000, c.db, c.addr);
    for a in argv {
        line.push_str(" \"");
        for &b in a {
            match b {
                b'\\' => line.push_str("\\\\"),
                b'"' => line.push_str("\\\""),
                b'\n' => line.push_str("\\n"),
                b'\r' => line.push_str("\\r"),
                b'\t' => line.push_str("\\t"),
                7 => line.push_str("\\a"),
                8 => line.push_str("\\b"),
                0x20..=0x7e => line.push(b as char),
                _ => line.push_str(&format!("\\x{b:02x}")),
            }
        }
        line.push('"');
    }
    let ids = srv.monitors.clone();
    for id in ids {
        if id == c.id {
            continue;
        }
        srv.sweep_clients = true;
        if let Some(m) = srv.clients.get_mut(&id) {
            m.reply.simple(&line);
        }
    }
}
