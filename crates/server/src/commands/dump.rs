//! DUMP, RESTORE and MIGRATE: a key's value as a Redis-format payload (RDB
//! value, RDB version, CRC-64), so values move between densekv and Redis in
//! both directions. The codec itself is `storage::rdb`.
//!
//! MIGRATE talks to the target synchronously, as Redis does, bounded by the
//! command's timeout: the executor waits for the target (the command is
//! documented as blocking), and no connection is cached between calls.

use crate::conn::{put_command, MigrateConn};
use crate::notify;
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
    match ctx.db().get_read(&args[1], now).map(|v| rdb::dump_payload(v, now)) {
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
        // Already expired: nothing is created (an old key was still
        // replaced). Replicas and the AOF get the DEL, as Redis rewrites
        // it, not a RESTORE they would keep with its past deadline.
        if deleted {
            ctx.modified(key, notify::GENERIC, "del");
            ctx.srv.feed.replace_current(vec![b"DEL".to_vec(), key.clone()]);
        } else {
            ctx.srv.feed.skip_current();
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

    // Serialize every live key with its remaining TTL (AUTH and SELECT
    // go first, from `MigrateConn::exchange`).
    let mut cmd = Vec::new();
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
    // With tls-cluster, MIGRATE speaks TLS, as Redis's takes the cluster's
    // connection type; a cached connection of the other kind is not used.
    let tls = ctx.srv.config.flag("tls-cluster");
    let target = if tls { format!("{target} tls") } else { target };
    // A cached connection that broke before any reply (the target closed
    // it while idle) is retried once on a new one, as Redis retries.
    let mut retried = false;
    let ioerr = |what: &str| CmdError::Custom(format!("IOERR error or timeout {what} to target instance"));
    let replies = loop {
        let mut conn = match ctx.srv.migrate_conns.remove(&target) {
            Some(c) => c,
            None => {
                let cfg = match tls {
                    true => Some(crate::tls::build_client(&|k| ctx.srv.config.get(k).unwrap_or("").to_string()).map_err(|e| CmdError::Custom(format!("IOERR error or timeout connecting to the client: {e}")))?),
                    false => None,
                };
                MigrateConn::open(target.trim_end_matches(" tls"), timeout, cfg.as_ref()).map_err(|_| CmdError::Custom("IOERR error or timeout connecting to the client".into()))?
            }
        };
        let reused = conn.reused();
        match conn.exchange(auth.as_deref(), dbid, &cmd, sent.len(), timeout) {
            Ok(replies) => {
                // A connection that failed midway is not kept.
                if replies.io_failed.is_none() {
                    conn.done();
                    ctx.srv.migrate_conns.insert(target.clone(), conn);
                }
                break replies;
            }
            Err(f) if f.none_read && reused && !retried => retried = true,
            Err(f) => return Err(ioerr(f.what)),
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
    if let Some(what) = replies.io_failed.filter(|_| target_err.is_none()) {
        return Err(ioerr(what));
    }
    match target_err {
        Some(e) => Err(CmdError::Custom(format!("ERR Target instance replied with error: {}", &e[1..]))),
        None => {
            ctx.out().ok();
            Ok(())
        }
    }
}

