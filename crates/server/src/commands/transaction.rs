//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH.
//!
//! Queued commands run back to back inside EXEC; the executor is single
//! threaded, so nothing interleaves. WATCH registers (db, key) in the server
//! and every write marks the watchers dirty (`Ctx::key_modified`).

use crate::acl::{Denied, LogContext};
use crate::command::flags::*;
use crate::command::{keys, kf, range_spec, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::exec::{self, Lookup};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let tx: &[&str] = &["fast", "transaction"];
    vec![
        spec("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, multi)
            .acl(tx)
            .group("transactions")
            .doc("Starts a transaction.", "1.2.0"),
        spec("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG, NO_KEYS, exec)
            .acl(&["slow", "transaction"])
            .group("transactions")
            .doc("Executes all commands in a transaction.", "1.2.0"),
        spec("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, discard)
            .acl(tx)
            .group("transactions")
            .doc("Discards a transaction.", "2.0.0"),
        spec("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, keys(1, -1, 1), watch)
            .acl(tx)
            .group("transactions")
            .doc("Monitors changes to keys to determine the execution of a transaction.", "2.2.0")
            .key_specs(vec![range_spec(kf::RO, 1, -1, 1)]),
        spec("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, unwatch)
            .acl(tx)
            .group("transactions")
            .doc("Forgets about watched keys of a transaction.", "2.2.0"),
    ]
}

/// MULTI
pub fn multi(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_error = false;
    ctx.out().ok();
    Ok(())
}

/// DISCARD
pub fn discard(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.client.multi = None;
    ctx.client.multi_error = false;
    ctx.srv.unwatch_all(ctx.client);
    ctx.out().ok();
    Ok(())
}

/// True if a key watched while alive has since expired.
fn watched_key_expired(ctx: &mut Ctx) -> bool {
    let now = ctx.now;
    let watched = ctx.client.watched.clone();
    watched.iter().any(|(db, key, alive)| *alive && !ctx.srv.dbs[*db].contains(key, now))
}

/// EXEC
pub fn exec(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let Some(queue) = ctx.client.multi.take() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    if ctx.client.multi_error {
        ctx.client.multi_error = false;
        ctx.srv.unwatch_all(ctx.client);
        return Err(CmdError::Custom("EXECABORT Transaction discarded because of previous errors.".into()));
    }
    if ctx.client.dirty_cas || watched_key_expired(ctx) {
        ctx.srv.unwatch_all(ctx.client);
        ctx.out().null_array();
        return Ok(());
    }
    ctx.srv.unwatch_all(ctx.client);
    ctx.out().array(queue.len());
    let table = ctx.host.table().clone();
    ctx.client.in_exec = true;
    for argv in queue {
        match exec::lookup(&table, &argv) {
            Lookup::Found(spec) => {
                // Rights are checked again: they may have changed since queueing.
                if ctx.client.user.as_ref().is_some_and(|u| !u.borrow().unrestricted) {
                    if let Some((d, _)) = exec::acl_refuse(ctx.srv, ctx.client, spec, &argv, LogContext::Multi, None) {
                        let reason = match d {
                            Denied::Key(_) => "no permission to touch the specified keys",
                            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
                            _ => "no permission to execute the command or subcommand",
                        };
                        let msg = format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}");
                        exec::reply_error(ctx.srv, ctx.client, &CmdError::Custom(msg));
                        continue;
                    }
                }
                exec::run(ctx.srv, &mut *ctx.host, ctx.client, spec, &argv, ctx.now, std::time::Instant::now());
            }
            Lookup::Unknown(e) | Lookup::BadArity(e) => exec::reply_error(ctx.srv, ctx.client, &e),
        }
    }
    ctx.client.in_exec = false;
    Ok(())
}

/// WATCH key [key ...]
pub fn watch(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    let db = ctx.client.db;
    let now = ctx.now;
    for key in &args[1..] {
        if ctx.client.watched.iter().any(|(d, k, _)| *d == db && k == key) {
            continue;
        }
        let alive = ctx.srv.dbs[db].contains(key, now);
        ctx.client.watched.push((db, key.clone(), alive));
        ctx.srv.watched.entry((db, key.clone())).or_default().push(ctx.client.id);
    }
    ctx.out().ok();
    Ok(())
}

/// UNWATCH
pub fn unwatch(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    ctx.srv.unwatch_all(ctx.client);
    ctx.out().ok();
    Ok(())
}
