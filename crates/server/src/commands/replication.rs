//! Replication's commands: SYNC, PSYNC, REPLCONF, REPLICAOF (SLAVEOF),
//! FAILOVER, ROLE, WAIT and WAITAOF. The work is in `crate::replication`.
//!
//! WAIT answers at once when enough replicas acknowledged the offset of
//! the caller's last write, else blocks through the generic blocked-client
//! machinery (`crate::blocking`) until REPLCONF ACKs bring enough or its
//! timeout passes; it asks the replicas for acknowledgements (REPLCONF
//! GETACK). WAITAOF does the same with the offsets AOFs fsynced: this
//! server's own and those replicas report (REPLCONF ACK ... FACK).
//! Inside MULTI or a script neither blocks: they answer with the current
//! counts.

use crate::args::is;
use crate::client::ReplRole;
use crate::command::flags::*;
use crate::command::{arg_i64, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::replication;
use crate::args::parse_timeout_ms;
use crate::blocking::{BlockRequest, TimeoutReply};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let adm: &[&str] = &["admin", "slow", "dangerous"];
    vec![
        spec("sync", 1, ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING, NO_KEYS, sync).acl(adm).doc("An internal command used in replication.", "1.0.0"),
        spec("psync", -3, ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING, NO_KEYS, psync).acl(adm).doc("An internal command used in replication.", "2.8.0"),
        spec("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, NO_KEYS, replconf).acl(adm).doc("An internal command for configuring the replication stream.", "3.0.0"),
        spec("replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, NO_KEYS, replicaof).acl(adm).doc("Configures a server as replica of another, or promotes it to a master.", "5.0.0"),
        spec("slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, NO_KEYS, replicaof).acl(adm).doc("Sets a Redis server as a replica of another, or promotes it to being a master.", "1.0.0"),
        spec("failover", -1, ADMIN | NOSCRIPT | STALE, NO_KEYS, failover).acl(adm).group("server").doc("Starts a coordinated failover from a server to one of its replicas.", "6.2.0"),
        spec("role", 1, NOSCRIPT | LOADING | STALE | FAST, NO_KEYS, role).acl(&["admin", "fast", "dangerous"]).doc("Returns the replication role.", "2.8.12"),
        spec("wait", 3, BLOCKING, NO_KEYS, wait)
            .acl(&["slow", "connection", "blocking"])
            .doc("Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", "3.0.0"),
        spec("waitaof", 4, BLOCKING, NO_KEYS, waitaof)
            .acl(&["slow", "connection", "blocking"])
            .doc("Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.", "7.2.0"),
    ]
}

/// Never woken by a key: these wait for their deadline only.
fn never(_: Option<storage::ValueRef<'_>>) -> bool {
    false
}

/// SYNC: a full sync, without the +FULLRESYNC line (pre-PSYNC replicas).
pub fn sync(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    replication::sync_request(ctx.srv, ctx.host, ctx.client, None, false)
}

/// PSYNC replid offset [FAILOVER]: continues from `offset` when the
/// backlog holds it and `replid` is this stream's history, else a full
/// sync. FAILOVER: this server's primary hands over (FAILOVER on it).
pub fn psync(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let offset = arg_i64(&args[2]).inspect_err(|_| {
        let line = format!("Replica {} asks for synchronization but with a wrong offset", ctx.client.addr);
        ctx.srv.config.log.warning(&line);
    })?;
    let failover = args.len() > 3 && is(&args[3], "failover");
    replication::sync_request(ctx.srv, ctx.host, ctx.client, Some((args[1].clone(), offset)), failover)
}

/// REPLCONF option value ...: what a replica tells its primary (its port
/// and address, its capabilities, ACK <offset>), and GETACK from a primary.
pub fn replconf(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let id = ctx.client.id;
    let mut i = 1;
    while i + 1 < args.len() {
        let (opt, val) = (&args[i], &args[i + 1]);
        if is(opt, "ack") || is(opt, "fack") {
            // Never answered: the replica does not read replies.
            if is(opt, "ack") && ctx.client.repl_role == ReplRole::Replica {
                let num = |v: &[u8]| std::str::from_utf8(v).ok().and_then(|v| v.parse::<i64>().ok());
                let offset = num(val).unwrap_or(0);
                let fack = (args.len() > i + 3 && is(&args[i + 2], "fack")).then(|| num(&args[i + 3])).flatten();
                let table = ctx.host.table().clone();
                replication::on_ack(ctx.srv, &table, id, offset, fack);
            }
            return Ok(());
        } else if is(opt, "getack") {
            // Answered by the stream's reader (`net`), from a primary only.
            return Ok(());
        } else if is(opt, "listening-port") {
            let port = std::str::from_utf8(val).ok().and_then(|v| v.parse::<u16>().ok()).ok_or_else(|| CmdError::err("value is not an integer or out of range"))?;
            replication::announce(ctx.srv, id).port = port;
        } else if is(opt, "ip-address") {
            replication::announce(ctx.srv, id).ip = Some(String::from_utf8_lossy(val).into_owned());
        } else if is(opt, "capa") {
            let r = replication::announce(ctx.srv, id);
            if is(val, "eof") {
                r.capa_eof = true;
            } else if is(val, "psync2") {
                r.capa_psync2 = true;
            }
        } else if is(opt, "rdb-only") || is(opt, "rdb-filter-only") || is(opt, "rdb-channel") {
            // Accepted; densekv always sends the whole stream.
        } else {
            return Err(CmdError::err(format!("Unrecognized REPLCONF option: {}", String::from_utf8_lossy(opt))));
        }
        i += 2;
    }
    ctx.out().ok();
    Ok(())
}

/// REPLICAOF host port | NO ONE (and SLAVEOF).
pub fn replicaof(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.cluster.is_some() {
        return Err(CmdError::err("REPLICAOF not allowed in cluster mode."));
    }
    if ctx.srv.repl.failover.is_some() {
        return Err(CmdError::err("REPLICAOF not allowed while failing over."));
    }
    if is(&args[1], "no") && is(&args[2], "one") {
        if ctx.srv.repl.is_replica() {
            replication::promote(ctx.srv);
            let line = format!("MASTER MODE enabled (user request from '{}')", ctx.client.info_line(std::time::Instant::now()));
            ctx.srv.config.log.notice(&line);
        }
        ctx.out().ok();
        return Ok(());
    }
    if ctx.client.repl_role == ReplRole::Replica {
        return Err(CmdError::err("Command is not valid when client is a replica."));
    }
    // Redis answers the same for a port that is no integer and one out of range.
    let port = arg_i64(&args[2]).ok().filter(|p| (0..=65535).contains(p)).ok_or_else(|| CmdError::err("Invalid master port"))?;
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    if !replication::set_primary(ctx.srv, host.clone(), port as u16) {
        ctx.out().simple("OK Already connected to specified master");
        return Ok(());
    }
    let table = ctx.host.table().clone();
    replication::release_blocked(ctx.srv, &table);
    let line = format!("REPLICAOF {host}:{port} enabled (user request from '{}')", ctx.client.info_line(std::time::Instant::now()));
    ctx.srv.config.log.notice(&line);
    ctx.out().ok();
    Ok(())
}

/// FAILOVER [TO host port [FORCE]] [TIMEOUT ms] | ABORT: a coordinated
/// failover to a replica (`replication::failover_start`).
pub fn failover(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.cluster.is_some() {
        return Err(CmdError::err("FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead."));
    }
    if args.len() == 2 && is(&args[1], "abort") {
        if ctx.srv.repl.failover.is_none() {
            return Err(CmdError::err("No failover in progress."));
        }
        replication::failover_abort(ctx.srv, "Failover manually aborted");
        ctx.out().ok();
        return Ok(());
    }
    let (mut timeout, mut force, mut target) = (0i64, false, None::<(String, i64)>);
    let mut j = 1;
    while j < args.len() {
        if is(&args[j], "timeout") && j + 1 < args.len() && timeout == 0 {
            timeout = arg_i64(&args[j + 1])?;
            if timeout <= 0 {
                return Err(CmdError::err("FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if is(&args[j], "to") && j + 2 < args.len() && target.is_none() {
            let port = arg_i64(&args[j + 2])?;
            target = Some((String::from_utf8_lossy(&args[j + 1]).into_owned(), port));
            j += 3;
        } else if is(&args[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let srv = &mut *ctx.srv;
    if srv.repl.failover.is_some() {
        return Err(CmdError::err("FAILOVER already in progress."));
    }
    if srv.repl.is_replica() {
        return Err(CmdError::err("FAILOVER is not valid when server is a replica."));
    }
    if !srv.repl.replicas.keys().any(|id| srv.clients.get(id).is_some_and(|c| c.repl_role == ReplRole::Replica)) {
        return Err(CmdError::err("FAILOVER requires connected replicas."));
    }
    if force && (timeout == 0 || target.is_none()) {
        return Err(CmdError::err("FAILOVER with force option requires both a timeout and target HOST and IP."));
    }
    if let Some((host, port)) = &target {
        replication::failover_target_check(srv, host, *port)?;
    }
    let deadline = (timeout > 0).then(|| ctx.now.saturating_add(timeout));
    let target = target.map(|(h, p)| (h, p as u16));
    replication::failover_start(srv, crate::repl::Failover { target, deadline, force, in_progress: false });
    ctx.out().ok();
    Ok(())
}

/// ROLE
pub fn role(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let srv = &*ctx.srv;
    replication::role(srv, &mut ctx.client.reply);
    Ok(())
}

/// WAIT numreplicas timeout
pub fn wait(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.repl.is_replica() {
        return Err(CmdError::err("WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let numreplicas = arg_i64(&args[1])?;
    let deadline = parse_timeout_ms(&args[2], ctx.now)?;
    replication::drain(ctx.srv);
    let offset = ctx.client.woff;
    let acked = ctx.srv.repl.acked(offset);
    if acked >= numreplicas || !ctx.may_block() {
        ctx.out().int(acked);
        return Ok(());
    }
    ctx.block(BlockRequest { on_timeout: TimeoutReply::Int(acked), ..BlockRequest::on_keys(Vec::new(), deadline, never) });
    replication::wait_for(ctx.srv, ctx.client.id, offset, numreplicas, None);
    Ok(())
}

/// WAITAOF numlocal numreplicas timeout
pub fn waitaof(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let numlocal = arg_i64(&args[1])?;
    if !(0..=1).contains(&numlocal) {
        return Err(CmdError::err("value is out of range, value must between 0 and 1"));
    }
    let numreplicas = arg_i64(&args[2])?;
    if numreplicas < 0 {
        return Err(CmdError::err("value is out of range, must be positive"));
    }
    let deadline = parse_timeout_ms(&args[3], ctx.now)?;
    if ctx.srv.repl.is_replica() {
        return Err(CmdError::err("WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated."));
    }
    if numlocal > 0 && ctx.srv.repl.fsynced == -1 {
        return Err(CmdError::err(replication::WAITAOF_NO_AOF));
    }
    replication::drain(ctx.srv);
    let offset = ctx.client.woff;
    let acklocal = i64::from(ctx.srv.repl.fsynced >= offset);
    let acked = ctx.srv.repl.aof_acked(offset);
    if (acked >= numreplicas && acklocal >= numlocal) || !ctx.may_block() {
        let out = ctx.out();
        out.array(2);
        out.int(acklocal);
        out.int(acked);
        return Ok(());
    }
    ctx.block(BlockRequest { on_timeout: TimeoutReply::Pair(acklocal, acked), ..BlockRequest::on_keys(Vec::new(), deadline, never) });
    replication::wait_for(ctx.srv, ctx.client.id, offset, numreplicas, Some(numlocal));
    Ok(())
}
