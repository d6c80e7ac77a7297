//! Running one looked-up command: the handler call and the bookkeeping
//! every command shares (stats, slow log, latency, MONITOR feed, reply
//! suppression, parking a client that asked to block), and the propagation
//! point where every write's effects leave as commands. Lookup lives here
//! too: scripts and EXEC look commands up the same way a client's request
//! is. The checks before a request runs are `dispatch.rs`, above this.

use std::time::Instant;

use crate::acl;
use crate::client::{Client, ReplyMode};
use crate::command::{flags, CmdError, CommandMap, Ctx, Host, Spec, SpecAt};
use crate::feed::Rewrite;
use crate::commandlog::{cut_args, LogKind};
use crate::server::{unix_ms, unix_us, Server};

/// How a lookup went.
pub enum Lookup<'a> {
    /// Found (a subcommand's spec for container commands).
    Found(&'a Spec),
    /// Unknown command or subcommand, with the error to reply.
    Unknown(CmdError),
    /// Wrong number of arguments.
    BadArity(CmdError),
}

/// Appends to `keys[n..]` the keys `argv` names by its command's legacy
/// key positions (first, last, step), as many as fit; returns the new
/// count, and where the command is in `table` (for `lookup_at`). For
/// prefetching only: an unknown command, a container or a wrong argument
/// count adds nothing, and nothing is checked or replied. `known` is
/// where an I/O thread found the command already, if it did.
pub fn key_args<'a>(table: &CommandMap, argv: &'a [Vec<u8>], known: Option<SpecAt>, keys: &mut [&'a [u8]], mut n: usize) -> (usize, Option<SpecAt>) {
    let Some(at) = known.or_else(|| argv.first().and_then(|raw| table.find_at(raw))) else { return (n, None) };
    let spec = table.at(at).expect("just found");
    let k = spec.keys;
    if k.first <= 0 || k.step <= 0 || !spec.subcommands.is_empty() {
        return (n, Some(at));
    }
    let last = if k.last < 0 { argv.len() as i32 + k.last } else { k.last.min(argv.len() as i32 - 1) };
    let mut i = k.first;
    while i <= last && n < keys.len() {
        keys[n] = &argv[i as usize];
        n += 1;
        i += k.step;
    }
    (n, Some(at))
}

/// Finds the spec for `argv`, descending into subcommands, and checks arity.
pub fn lookup<'a>(table: &'a CommandMap, argv: &[Vec<u8>]) -> Lookup<'a> {
    lookup_at(table, argv, None)
}

/// `lookup`, taking the command from `at` (where `key_args` found it)
/// when given.
pub fn lookup_at<'a>(table: &'a CommandMap, argv: &[Vec<u8>], at: Option<SpecAt>) -> Lookup<'a> {
    let found = match at {
        Some(at) => table.at(at),
        None => table.find(&argv[0]),
    };
    debug_assert!(found.map(|s| s as *const Spec) == table.find(&argv[0]).map(|s| s as *const Spec), "a stale SpecAt");
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

/// The channel arguments of `spec` with `argv` that ACLs check: (index,
/// is a PSUBSCRIBE pattern). UNSUBSCRIBE and friends are never refused.
fn acl_channels(spec: &Spec, argv: &[Vec<u8>]) -> Vec<(usize, bool)> {
    match spec.full_name {
        "publish" | "spublish" => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..argv.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..argv.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// The ACL check of `argv` (looked up as `spec`) for `user`, keys and
/// channels included. One branch for a user allowed everything.
///
/// Errors: what was refused (see `acl::User::check`).
#[inline]
pub fn acl_check(srv: &Server, user: &acl::User, spec: &Spec, argv: &[Vec<u8>]) -> Result<(), acl::Denied> {
    if user.unrestricted {
        return Ok(());
    }
    let keys: Vec<(usize, u8)> = if spec.has_keys() {
        spec.find_keys(argv)
            .into_iter()
            .filter(|(_, f)| !f.contains(&"not_key"))
            .map(|(i, f)| {
                let mut need = 0;
                if f.contains(&"access") {
                    need |= acl::READ;
                }
                if f.iter().any(|w| matches!(*w, "insert" | "delete" | "update")) {
                    need |= acl::WRITE;
                }
                (i, need)
            })
            .collect()
    } else {
        Vec::new()
    };
    user.check(&srv.acl.catalog, spec.id, argv, &keys, &acl_channels(spec, argv))
}

/// Checks the client's permission for `argv`; on refusal logs it in the
/// ACL log (in `ctx`, with `cinfo` as the client line, the client's own
/// when None) and returns the refusal and the text after `-NOPERM `.
pub fn acl_refuse(srv: &mut Server, c: &Client, spec: &Spec, argv: &[Vec<u8>], ctx: acl::LogContext, cinfo: Option<String>) -> Option<(acl::Denied, String)> {
    let user = c.user.as_ref()?;
    let user = user.borrow();
    let d = acl_check(srv, &user, spec, argv).err()?;
    let (object, arg) = match d {
        acl::Denied::Key(i) | acl::Denied::Channel(i) => (argv[i].clone(), argv[i].clone()),
        _ => (spec.full_name.as_bytes().to_vec(), Vec::new()),
    };
    let msg = acl::denied_message(d, &user.name, spec.full_name, &arg, false);
    let cinfo = cinfo.unwrap_or_else(|| c.info_line(Instant::now()));
    let max = srv.config.get("acllog-max-len").and_then(|v| v.parse().ok()).unwrap_or(128);
    srv.acl.log_event(d, ctx, object, user.name.as_bytes().to_vec(), cinfo, unix_ms(), max);
    Some((d, msg))
}

/// The reply to a command refused because memory is over `maxmemory`.
pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The keys a write command only reads (read-only in its key specs: the
/// sources of the STORE commands, BITOP and COPY, SORT's key) count as
/// keyspace hits and misses, and raise keymiss, as Redis's lookupKeyRead
/// of them does; PFMERGE reads its destination that way too. One pass
/// over the declared specs, and nothing more, for a write without such a
/// key (SET, INCR ...).
fn count_source_reads(srv: &mut Server, db: usize, spec: &Spec, argv: &[Vec<u8>], now: i64) {
    let pfmerge = spec.full_name == "pfmerge";
    if !pfmerge && !spec.key_specs.iter().any(|k| k.flags.first() == Some(&"RO")) {
        return;
    }
    let d = &mut srv.dbs[db];
    d.count_reads = true;
    for (i, f) in spec.find_keys(argv) {
        if pfmerge || f.first() == Some(&"RO") {
            let found = d.contains(&argv[i], now);
            d.note_read(&argv[i], found, true);
        }
    }
    d.count_reads = false;
}

/// Runs a looked-up command and does the shared bookkeeping.
/// `start` is when the command began (for its duration); `now` the Unix ms
/// time it sees.
pub fn run(srv: &mut Server, host: &mut dyn Host, c: &mut Client, spec: &Spec, argv: &[Vec<u8>], now: i64, start: Instant) {
    let name = spec.full_name;
    if c.reply_mode == ReplyMode::SkipNext {
        c.reply_mode = ReplyMode::Skip;
    }
    let mark = c.reply.buf.len();
    c.last_cmd = name;
    let db = c.db;
    srv.dbs[db].no_touch = c.no_touch && name != "touch";
    // A read command's lookups count as keyspace hits and misses, as
    // Redis's lookupKeyRead counts them; a write command's do not, but for
    // the keys it only reads.
    srv.dbs[db].count_reads = !spec.has(flags::WRITE);
    if spec.has(flags::WRITE) {
        count_source_reads(srv, db, spec, argv, now);
    }
    let dirty_before = srv.dirty;
    srv.feed.enter();
    let outer = crate::crash::running(name, argv.len());
    let result = {
        let mut ctx = Ctx { srv, host, client: c, now };
        (spec.handler)(&mut ctx, argv)
    };
    let rewrite = srv.feed.take_rewrite();
    let (hits, misses) = srv.dbs[db].take_read_counts();
    srv.keyspace_hits += hits;
    srv.keyspace_misses += misses;
    if srv.dbs[db].has_member_expiry() {
        crate::publish::member_expiry(srv, Some(&mut *c), db);
    }
    if c.db != db && srv.dbs[c.db].has_member_expiry() {
        let d = c.db;
        crate::publish::member_expiry(srv, Some(&mut *c), d);
    }
    // Lazy expiry and key creation recorded after the command's last event
    // are published, and keys it found expired go out as DEL ahead of the
    // command itself, as Redis propagates them the moment they expire.
    for d in [db, c.db] {
        if srv.dbs[d].has_events() {
            crate::publish::flush_db_log(srv, Some(&mut *c), d);
        }
    }
    if srv.dirty != dirty_before && spec.has(flags::WRITE) && !srv.feed.is_empty() {
        match (rewrite, crate::feed::replay_form(argv, now)) {
            (Some(Rewrite::Skip), _) => {}
            (Some(Rewrite::As(replay)), _) | (None, Some(replay)) => propagate(srv, db, &replay),
            (None, None) => propagate(srv, db, argv),
        }
    }
    srv.feed.leave();
    let end = Instant::now();
    srv.last_cmd_end = Some(end);
    let took = end.duration_since(start);
    crate::crash::returned(outer, took);
    let usec = took.as_micros() as u64;
    if srv.feed.depth() == 0 {
        // Top level only: EXEC and scripts include what they ran.
        srv.el.cmd_ns += took.as_nanos() as u64;
    }
    // Keys the command found expired and deleted count as expired (INFO expired_keys).
    srv.expired_keys += srv.dbs[db].take_lazy_expired();
    if c.db != db {
        srv.expired_keys += srv.dbs[c.db].take_lazy_expired();
    }
    c.last_interaction = end;
    // Fed after the call, as Redis does: EXEC shows after what it ran. A
    // blocking command shows once, when first run, not when re-run.
    if !srv.monitors.is_empty() && !spec.has(flags::SKIP_MONITOR) && !spec.has(flags::ADMIN) && !srv.blocking.rerunning() {
        match redacted(spec, argv) {
            Some(r) => feed_monitors(srv, c, &r),
            None => feed_monitors(srv, c, argv),
        }
    }
    // A blocked command is accounted once, when it finally replies.
    if srv.blocking.park_if_requested(c, argv, usec, result.is_ok()) {
        return;
    }
    let usec = usec + srv.blocking.take_carried_us();
    if let Err(e) = &result {
        reply_error(srv, c, e);
    }
    let reply_bytes = c.reply.buf.len().saturating_sub(mark);
    account(srv, c, spec, argv, usec, reply_bytes, result.is_err());
    match c.reply_mode {
        ReplyMode::Off => c.reply.buf.truncate(mark.max(c.sent)),
        ReplyMode::Skip => {
            c.reply.buf.truncate(mark.max(c.sent));
            c.reply_mode = ReplyMode::On;
        }
        _ => {}
    }
    // Invalidations, then other push messages, follow this client's reply
    // (the whole EXEC's). One branch while no client tracks.
    if srv.tracking.clients > 0 {
        track(srv, c, spec, argv);
    }
    if !c.in_exec && !srv.pending_push.is_empty() {
        c.reply.raw(&srv.pending_push);
        srv.pending_push.clear();
    }
}

/// CLIENT TRACKING's part of a command, while some client tracks: the
/// invalidations the running client is owed are sent after its reply
/// (after the whole EXEC or script), and, if it tracks, a read-only
/// command's keys are remembered as cached by it (a read-only script's are
/// not: the commands it runs are, as Redis does) unless its OPTIN/OPTOUT
/// mode and CLIENT CACHING say otherwise; CLIENT CACHING lasts one command,
/// or one transaction.
fn track(srv: &mut Server, c: &mut Client, spec: &Spec, argv: &[Vec<u8>]) {
    if c.tracking.is_some() {
        remember_keys(srv, c, spec, argv);
    }
    if !c.in_exec && !srv.tracking.pending.is_empty() {
        crate::publish::flush_invalidations(srv, c);
    }
}

fn remember_keys(srv: &mut Server, c: &mut Client, spec: &Spec, argv: &[Vec<u8>]) {
    let Some(t) = c.tracking.as_deref_mut() else { return };
    let scripted = matches!(spec.full_name, "eval_ro" | "evalsha_ro" | "fcall_ro");
    if spec.has(flags::READONLY) && !spec.has(flags::PUBSUB) && !scripted && t.remembers() {
        let keys = spec.find_keys(argv);
        srv.tracking.remember(c.id, keys.iter().map(|&(i, _)| &argv[i][..]));
    }
    if !c.in_exec && c.multi.is_none() && !spec.full_name.starts_with("client|") {
        t.caching = false;
    }
}

/// The propagation point: a write command that changed data leaves here,
/// as the command to replay, for the AOF writer and replicas (`feed.rs`).
/// EXEC, scripts and functions are not write commands themselves: the
/// writes they run come through here one by one and the feed wraps them in
/// MULTI/EXEC. Relative TTLs are made absolute first (`feed::replay_form`);
/// commands with random or float results ask for their effect instead
/// (`Feed::replace_current`: XADD's ID, SPOP as SREM, INCRBYFLOAT as SET);
/// expired keys go out as DEL (UNLINK under lazyfree-lazy-expire) from the
/// databases' event logs.
pub fn propagate(srv: &mut Server, db: usize, argv: &[Vec<u8>]) {
    if srv.feed.is_empty() {
        return;
    }
    srv.feed.push(db, argv.to_vec());
}

/// Counts a command that replied: commandstats, the command logs, the
/// latency monitor. `usec` is its execution time, `reply_bytes` the size
/// of the reply it produced.
pub fn account(srv: &mut Server, c: &mut Client, spec: &Spec, argv: &[Vec<u8>], usec: u64, reply_bytes: usize, failed: bool) {
    srv.total_commands += 1;
    c.commands += 1;
    let st = srv.cmdstats.entry(spec.id, spec.full_name);
    st.calls += 1;
    st.usec += usec;
    // As Redis: with latency-tracking off no histogram is kept (nor
    // allocated: a command's first recorded call allocates its 4 KiB).
    if srv.config.latency_tracking {
        st.record(usec);
    }
    if failed {
        st.failed += 1;
    }
    if !spec.has(flags::SKIP_SLOWLOG) {
        // The request as the client sent it in RESP (an inline command
        // counts as its RESP form).
        let request = || request_bytes(argv);
        let t = &srv.config.commandlog_threshold;
        let due = [
            t[0] >= 0 && usec as i64 >= t[0],
            // The exact size only when a bound (every length taken as 20
            // digits) reaches the threshold.
            t[1] >= 0 && request_bytes_at_most(argv) as i64 >= t[1] && request() as i64 >= t[1],
            t[2] >= 0 && reply_bytes as i64 >= t[2],
        ];
        if due.iter().any(|&d| d) {
            commandlog_push(srv, c, spec, argv, [usec, request() as u64, reply_bytes as u64], due);
        }
        // A log whose length was lowered is cut at the next command, logged
        // or not (a disabled one keeps what it has), as Valkey does.
        for k in 0..3 {
            let max_len = srv.config.commandlog_max_len[k];
            let entries = &mut srv.commandlog[k].entries;
            if srv.config.commandlog_threshold[k] >= 0 && max_len > 0 && entries.len() > max_len {
                entries.truncate(max_len);
            }
        }
    }
    srv.latency_sample("command", usec / 1000);
    // One test while no HOTKEYS session runs. A script's commands count as
    // the script; a transaction's one by one, as Redis counts them.
    if srv.hotkeys.as_ref().is_some_and(|h| h.active) && (srv.feed.depth() == 0 || (c.in_exec && !c.in_script)) {
        hotkeys_record(srv, spec, argv, usec, reply_bytes);
    }
}

/// Bytes of `argv` as a RESP request (an inline command counts as its
/// RESP form).
fn request_bytes(argv: &[Vec<u8>]) -> usize {
    argv.iter().map(|a| 1 + digits(a.len()) + 2 + a.len() + 2).sum::<usize>() + 1 + digits(argv.len()) + 2
}

/// An upper bound of `request_bytes`, at less cost.
fn request_bytes_at_most(argv: &[Vec<u8>]) -> usize {
    argv.iter().map(|a| a.len() + 25).sum::<usize>() + 23
}

/// Gives a command's time and bytes (request and reply) to its keys in the
/// running HOTKEYS session; a command without keys counts nowhere.
#[cold]
fn hotkeys_record(srv: &mut Server, spec: &Spec, argv: &[Vec<u8>], usec: u64, reply_bytes: usize) {
    let now = unix_ms();
    let draw = srv.random();
    let Some(h) = srv.hotkeys.as_deref_mut() else { return };
    if h.expire(now) || !spec.has_keys() {
        return;
    }
    let keys: Vec<&[u8]> = spec.find_keys(argv).into_iter().filter(|(_, f)| !f.contains(&"not_key")).map(|(i, _)| &argv[i][..]).collect();
    if keys.is_empty() {
        return;
    }
    // All of a command's keys share one slot in cluster mode.
    let selected = h.slots.is_none() || h.selects(storage::slot::key_hash_slot(keys[0]));
    let sampled = h.sample_ratio <= 1 || draw.is_multiple_of(h.sample_ratio);
    let bytes = (request_bytes(argv) + reply_bytes) as u64;
    h.record(&keys, selected, sampled, usec, bytes, (draw >> 32) as usize);
}

/// Writes an error reply and counts it in errorstats.
pub fn reply_error(srv: &mut Server, c: &mut Client, e: &CmdError) {
    let msg = e.message();
    let code = msg.split(' ').next().unwrap_or("ERR").to_string();
    srv.count_error(&code);
    srv.total_error_replies += 1;
    c.reply.error(&msg);
}

/// Parameters whose values CONFIG SET must not show in SLOWLOG or MONITOR.
const SECRET_PARAMS: &[&str] = &["masteruser", "masterauth", "requirepass", "tls-key-file-pass", "tls-client-key-file-pass"];

/// `argv` with its secrets (passwords, user definitions) replaced by
/// `(redacted)`, for SLOWLOG and MONITOR; None when it holds none.
pub fn redacted(spec: &Spec, argv: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    let hide: Vec<usize> = match spec.full_name {
        "auth" => (1..argv.len()).collect(),
        "acl|setuser" | "acl|deluser" | "acl|getuser" => (2..argv.len()).collect(),
        "hello" => argv.iter().enumerate().filter(|(_, a)| crate::args::is(a, "auth")).flat_map(|(i, _)| [i + 1, i + 2]).collect(),
        "migrate" => {
            let mut v = Vec::new();
            for (i, a) in argv.iter().enumerate().skip(6) {
                if crate::args::is(a, "keys") {
                    break;
                } else if crate::args::is(a, "auth") {
                    v.push(i + 1);
                } else if crate::args::is(a, "auth2") {
                    v.extend([i + 1, i + 2]);
                }
            }
            v
        }
        "config|set" => (2..argv.len())
            .step_by(2)
            .filter(|&i| SECRET_PARAMS.iter().any(|p| p.as_bytes().eq_ignore_ascii_case(&argv[i])))
            .map(|i| i + 1)
            .collect(),
        _ => return None,
    };
    let hide: Vec<usize> = hide.into_iter().filter(|&i| i < argv.len()).collect();
    if hide.is_empty() {
        return None;
    }
    let mut out = argv.to_vec();
    for i in hide {
        out[i] = b"(redacted)".to_vec();
    }
    Some(out)
}

/// Decimal digits of `n` (a RESP length prefix).
fn digits(n: usize) -> usize {
    n.checked_ilog10().unwrap_or(0) as usize + 1
}

/// Adds the command to each log it is `due` in (the caller checked the
/// thresholds), with that log's measure from `values`.
#[cold]
fn commandlog_push(srv: &mut Server, c: &Client, spec: &Spec, argv: &[Vec<u8>], values: [u64; 3], due: [bool; 3]) {
    let args = match redacted(spec, argv) {
        Some(r) => cut_args(&r),
        None => cut_args(argv),
    };
    let time = unix_ms() / 1000;
    let name = c.name.as_deref().unwrap_or_default();
    for kind in LogKind::ALL {
        let k = kind as usize;
        let max_len = srv.config.commandlog_max_len[k];
        if due[k] && max_len > 0 {
            srv.commandlog[k].push(args.clone(), values[k], time, &c.addr, name, max_len);
        }
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
