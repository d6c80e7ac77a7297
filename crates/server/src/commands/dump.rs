//! DUMP, RESTORE and MIGRATE: a key's value as a Redis-format payload (RDB
//! value, RDB version, CRC-64), so values move between densekv and Redis in
//! both directions. The codec itself is `storage::rdb`.
//!
//! MIGRATE talks to the target synchronously, as Redis does, bounded by the
//! command's timeout: the executor waits for the target (the command is
//! documented as blocking), and no connection is cached between calls.

use crate::notify;
use crate::server::Server;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use storage::rdb;
use storage::Ttl;

use crate::command::flags::*;
use crate::command::{arg_i64, is, keys, range_spec, spec, Begin, CmdError, CmdResult, Ctx, Find, KeyFlags, KeySpec, Spec};

/// MIGRATE's key flags (Redis: RW ACCESS DELETE).
const MIGRATE_KEY: KeyFlags = &["RW", "access", "delete"];
/// The same for the KEYS form, which key specs cannot pin down.
const MIGRATE_KEYS: KeyFlags = &["RW", "access", "delete", "incomplete"];

/// The command table entries.
pub fn table() -> Vec<Spec> {
    let g = "generic";
    vec![
        spec("dump", 2, READONLY, keys(1, 1, 1), dump).acl(&["keyspace", "read", "slow"]).group(g).doc("Returns a serialized representation of the value stored at a key.", "2.6.0"),
        spec("migrate", -6, WRITE, keys(3, 3, 1), migrate)
            .key_specs(vec![
                range_spec(MIGRATE_KEY, 3, 0, 1),
                KeySpec { flags: MIGRATE_KEYS, begin: Begin::Keyword("KEYS", -2), find: Find::Range { lastkey: -1, keystep: 1, limit: 0 } },
            ])
            .getkeys(migrate_keys)
            .acl(&["keyspace", "write", "slow", "dangerous"])
            .group(g)
            .doc("Atomically transfers a key from one Redis instance to another.", "2.6.0"),
        spec("restore", -4, WRITE | DENYOOM, keys(1, 1, 1), restore).acl(&["keyspace", "write", "slow", "dangerous"]).group(g).doc("Creates a key from the serialized representation of a value.", "2.6.0"),
        // What MIGRATE sends in cluster mode: RESTORE that is served in a
        // slot being imported without ASKING (redirect.rs reads the name).
        spec("restore-asking", -4, WRITE | DENYOOM, keys(1, 1, 1), restore)
            .acl(&["keyspace", "write", "slow", "dangerous"])
            .group("server")
            .doc("An internal command for migrating keys in a cluster.", "3.0.0"),
    ]
}

/// DUMP key
pub fn dump(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    match ctx.db().get(&args[1], now).map(|v| rdb::dump_payload(v, now)) {
        Some(p) => ctx.out().bulk(&p),
        None => ctx.out().null(),
    }
    Ok(())
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
///
/// Checks run in Redis's order: options, then an existing key (BUSYKEY),
/// then the TTL, then the payload. IDLETIME is kept under an LRU policy,
/// FREQ under an LFU one, as Redis does (the key's access bits hold one).
pub fn restore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, None, None);
    let mut i = 4;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "absttl") {
            absttl = true;
        } else if is(&args[i], "idletime") && more && freq.is_none() {
            let v = arg_i64(&args[i + 1])?;
            if v < 0 {
                return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            i += 1;
        } else if is(&args[i], "freq") && more && idle.is_none() {
            let v = arg_i64(&args[i + 1])?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(v);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let key = &args[1];
    let now = ctx.now;
    if !replace && ctx.db().contains(key, now) {
        return Err(CmdError::Custom("BUSYKEY Target key name already exists.".into()));
    }
    let ttl = arg_i64(&args[2])?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let check_crc = !ctx.srv.skip_checksum_validation;
    let body = rdb::verify_payload(&args[3], check_crc).map_err(|_| CmdError::err("DUMP payload version or checksum are wrong"))?;
    let value = rdb::restore_value(body, &ctx.srv.config.shapes(), now).map_err(|e| {
        // As Redis, the reason goes to the log at verbose level only: a
        // client sending bad payloads cannot flood a production log.
        ctx.srv.config.log.verbose(&format!("Bad data format in a RESTORE payload: {e}"));
        CmdError::err("Bad data format")
    })?;
    let deadline = match ttl {
        0 => None,
        t if absttl => Some(t),
        t => Some(t.saturating_add(now)),
    };
    let lfu = ctx.srv.config.eviction.policy.lfu();
    let past = deadline.is_some_and(|t| ctx.already_expired(t));
    let db = ctx.db();
    let deleted = replace && db.remove(key, now).is_some();
    if past {
        // Already expired: nothing is created (an old key was still replaced).
        if deleted {
            ctx.modified(key, notify::GENERIC, "del");
        }
        ctx.out().ok();
        return Ok(());
    }
    db.insert(key, value, deadline.map_or(Ttl::Clear, Ttl::At), now);
    match (idle, freq) {
        (Some(secs), _) if !lfu => {
            db.set_idle_secs(key, secs, now);
        }
        (_, Some(f)) if lfu => {
            db.set_freq(key, f as u8, now);
        }
        _ => {}
    }
    ctx.modified(key, notify::GENERIC, "restore");
    ctx.out().ok();
    Ok(())
}

/// MIGRATE's keys: the one at index 3, or all after KEYS when it is given
/// (with an empty key argument).
fn migrate_keys(argv: &[Vec<u8>]) -> Vec<(usize, KeyFlags)> {
    // Options before KEYS; AUTH's and AUTH2's arguments are never the word KEYS.
    let mut i = 6;
    let mut keys_at = None;
    while i < argv.len() {
        if is(&argv[i], "auth") {
            i += 1;
        } else if is(&argv[i], "auth2") {
            i += 2;
        } else if is(&argv[i], "keys") {
            keys_at = Some(i);
            break;
        }
        i += 1;
    }
    match keys_at {
        Some(i) if argv[3].is_empty() => (i + 1..argv.len()).map(|k| (k, MIGRATE_KEY)).collect(),
        Some(_) => Vec::new(),
        None => vec![(3, MIGRATE_KEY)],
    }
}

fn put_bulk(out: &mut Vec<u8>, a: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

fn put_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        put_bulk(out, a);
    }
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key [key ...]]
pub fn migrate(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut copy, mut replace, mut auth): (bool, bool, Option<Vec<&[u8]>>) = (false, false, None);
    let (mut first, mut count) = (3, 1);
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "copy") {
            copy = true;
        } else if is(&args[j], "replace") {
            replace = true;
        } else if is(&args[j], "auth") && more >= 1 {
            auth = Some(vec![&args[j + 1]]);
            j += 1;
        } else if is(&args[j], "auth2") && more >= 2 {
            auth = Some(vec![&args[j + 1], &args[j + 2]]);
            j += 2;
        } else if is(&args[j], "keys") {
            if !args[3].is_empty() {
                return Err(CmdError::err("When using MIGRATE KEYS option, the key argument must be set to the empty string"));
            }
            first = j + 1;
            count = args.len() - j - 1;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let timeout = arg_i64(&args[5])?;
    let dbid = arg_i64(&args[4])?;
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let now = ctx.now;

    // Serialize every live key with its remaining TTL.
    let mut cmd = Vec::new();
    if let Some(a) = &auth {
        let mut v: Vec<&[u8]> = vec![b"AUTH"];
        v.extend(a.iter().copied());
        put_command(&mut cmd, &v);
    }
    let mut sent = Vec::new();
    for key in &args[first..first + count] {
        let db = ctx.db();
        let Some(expire) = db.expire_of(key, now) else { continue };
        let Some(payload) = db.get(key, now).map(|v| rdb::dump_payload(v, now)) else { continue };
        let ttl = expire.map_or(0, |t| (t - now).max(1));
        let ttl = ttl.to_string();
        // A cluster node's target may be importing the slot: RESTORE-ASKING
        // is served there as Redis's is.
        let restore: &[u8] = if ctx.srv.cluster.is_some() { b"RESTORE-ASKING" } else { b"RESTORE" };
        let mut v: Vec<&[u8]> = vec![restore, key, ttl.as_bytes(), &payload];
        if replace {
            v.push(b"REPLACE");
        }
        put_command(&mut cmd, &v);
        sent.push(key);
    }
    if sent.is_empty() {
        ctx.out().simple("NOKEY");
        return Ok(());
    }

    let target = format!("{}:{}", String::from_utf8_lossy(&args[1]), String::from_utf8_lossy(&args[2]));
    // A cached connection that broke before any reply (the target closed
    // it while idle) is retried once on a new one, as Redis retries.
    let mut retried = false;
    let replies = loop {
        let mut conn = match ctx.srv.migrate_conns.remove(&target) {
            Some(c) => c,
            None => MigrateConn::open(&target, timeout)?,
        };
        let reused = conn.used;
        match conn.exchange(&auth, dbid, &cmd, sent.len(), timeout) {
            Ok(replies) => {
                // A connection that failed midway is not kept.
                if replies.io_error.is_none() {
                    conn.used = true;
                    conn.last_use = std::time::Instant::now();
                    ctx.srv.migrate_conns.insert(target.clone(), conn);
                }
                break replies;
            }
            Err((none_read, _)) if none_read && reused && !retried => retried = true,
            Err((_, e)) => return Err(e),
        }
    };
    // AUTH and SELECT replies first. An error there fails every key; else
    // each key stands alone, and the first error is what the client sees.
    let mut target_err: Option<String> = replies.setup_error;
    let setup_failed = target_err.is_some();
    // Replicas and the AOF see the keys that left as a DEL, as Redis
    // translates MIGRATE: replaying MIGRATE itself would send the keys again.
    let mut gone: Vec<Vec<u8>> = vec![b"DEL".to_vec()];
    for (key, l) in sent.into_iter().zip(replies.lines.iter()) {
        if setup_failed || l.starts_with('-') {
            target_err.get_or_insert_with(|| l.clone());
        } else if !copy && ctx.db().remove(key, now).is_some() {
            ctx.modified(key, notify::GENERIC, "del");
            gone.push(key.clone());
        }
    }
    if gone.len() > 1 {
        ctx.srv.feed.replace_current(gone);
    } else {
        ctx.srv.feed.skip_current();
    }
    if let Some(e) = replies.io_error.filter(|_| target_err.is_none()) {
        return Err(e);
    }
    match target_err {
        Some(e) => Err(CmdError::Custom(format!("ERR Target instance replied with error: {}", &e[1..]))),
        None => {
            ctx.out().ok();
            Ok(())
        }
    }
}

/// Seconds a MIGRATE connection is kept unused (Redis's
/// MIGRATE_SOCKET_CACHE_TTL).
const MIGRATE_CONN_TTL: Duration = Duration::from_secs(10);
/// Most MIGRATE connections kept (Redis's MIGRATE_SOCKET_CACHE_ITEMS).
const MIGRATE_CONN_MAX: usize = 64;

/// A connection MIGRATE keeps to a target, as Redis's migrate socket
/// cache does: a reshard sends thousands of MIGRATEs to one node, and a
/// connection each (connect, accept, a new client, SELECT, TIME_WAIT)
/// would cost more than the keys.
pub struct MigrateConn {
    rd: BufReader<TcpStream>,
    /// The database the target's connection has selected (-1: none yet).
    db: i64,
    used: bool,
    last_use: std::time::Instant,
}

/// What came back for one MIGRATE: an error of AUTH or SELECT, one line
/// per key sent (fewer if the connection failed, with `io_error`).
struct MigrateReplies {
    setup_error: Option<String>,
    lines: Vec<String>,
    io_error: Option<CmdError>,
}

impl MigrateConn {
    fn open(target: &str, timeout: Duration) -> Result<MigrateConn, CmdError> {
        let refused = || CmdError::Custom("IOERR error or timeout connecting to the client".into());
        let addr = target.to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or_else(refused)?;
        let sock = TcpStream::connect_timeout(&addr, timeout).map_err(|_| refused())?;
        let _ = sock.set_nodelay(true);
        Ok(MigrateConn { rd: BufReader::new(sock), db: -1, used: false, last_use: std::time::Instant::now() })
    }

    /// Sends AUTH (when given), SELECT (when the database differs from
    /// the last one) and `cmd` (the RESTOREs of `keys` keys), and reads
    /// their replies. Errors: (whether no reply was read, the error); the
    /// connection is then dropped.
    fn exchange(&mut self, auth: &Option<Vec<&[u8]>>, db: i64, cmd: &[u8], keys: usize, timeout: Duration) -> Result<MigrateReplies, (bool, CmdError)> {
        let ioerr = |what: &str| CmdError::Custom(format!("IOERR error or timeout {what} to target instance"));
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
        let sock = self.rd.get_mut();
        if sock.set_write_timeout(Some(timeout)).is_err() || sock.set_read_timeout(Some(timeout)).is_err() || sock.write_all(&out).is_err() {
            return Err((true, ioerr("writing")));
        }
        let mut line = || -> Result<String, CmdError> {
            let mut l = String::new();
            match self.rd.read_line(&mut l) {
                Ok(n) if n > 0 && l.ends_with("\r\n") => Ok(l.trim_end().to_string()),
                _ => Err(ioerr("reading")),
            }
        };
        let mut setup_error = None;
        let mut first = true;
        for _ in 0..usize::from(auth.is_some()) + usize::from(select) {
            let l = line().map_err(|e| (first, e))?;
            first = false;
            if l.starts_with('-') {
                setup_error.get_or_insert(l);
            }
        }
        let mut lines = Vec::with_capacity(keys);
        for _ in 0..keys {
            match line() {
                Ok(l) => lines.push(l),
                Err(e) if first => return Err((true, e)),
                Err(e) => return Ok(MigrateReplies { setup_error, lines, io_error: Some(e) }),
            }
            first = false;
        }
        if select {
            // A refused SELECT leaves the target where it was.
            self.db = if setup_error.is_none() { db } else { -1 };
        }
        Ok(MigrateReplies { setup_error, lines, io_error: None })
    }
}

/// Closes MIGRATE connections unused for `MIGRATE_CONN_TTL`, and the
/// oldest beyond `MIGRATE_CONN_MAX` (cron).
pub fn close_idle_migrate_conns(srv: &mut Server) {
    srv.migrate_conns.retain(|_, c| c.last_use.elapsed() < MIGRATE_CONN_TTL);
    while srv.migrate_conns.len() > MIGRATE_CONN_MAX {
        let Some(oldest) = srv.migrate_conns.iter().min_by_key(|(_, c)| c.last_use).map(|(k, _)| k.clone()) else { break };
        srv.migrate_conns.remove(&oldest);
    }
}
