//! Connection commands: PING ECHO QUIT RESET SELECT HELLO AUTH, and the
//! cluster client modes READONLY, READWRITE and ASKING (refused in
//! standalone mode; routing reads them, `redirect.rs`).

use crate::command::flags::*;
use crate::command::{arg_i64, is, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::acl::{Denied, LogContext};
use crate::client::ReplyMode;

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let conn: &[&str] = &["fast", "connection"];
    vec![
        spec("ping", -1, FAST, NO_KEYS, ping).acl(conn).group("connection").doc("Returns the server's liveliness response.", "1.0.0"),
        spec("echo", 2, FAST, NO_KEYS, echo).acl(conn).group("connection").doc("Returns the given string.", "1.0.0"),
        spec("quit", -1, ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH, NO_KEYS, quit)
            .acl(conn)
            .group("connection")
            .doc("Closes the connection.", "1.0.0"),
        spec("reset", 1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, NO_KEYS, reset)
            .acl(conn)
            .group("connection")
            .doc("Resets the connection.", "6.2.0"),
        spec("select", 2, LOADING | STALE | FAST, NO_KEYS, select).acl(conn).group("connection").doc("Changes the selected database.", "1.0.0"),
        spec("hello", -1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, NO_KEYS, hello)
            .acl(conn)
            .group("connection")
            .doc("Handshakes with the server.", "6.0.0"),
        spec("readonly", 1, LOADING | STALE | FAST, NO_KEYS, readonly)
            .acl(conn)
            .group("cluster")
            .doc("Enables read-only queries for a connection to a Redis Cluster replica node.", "3.0.0"),
        spec("readwrite", 1, LOADING | STALE | FAST, NO_KEYS, readwrite)
            .acl(conn)
            .group("cluster")
            .doc("Enables read-write queries for a connection to a Redis Cluster replica node.", "3.0.0"),
        spec("asking", 1, FAST, NO_KEYS, asking)
            .acl(conn)
            .group("cluster")
            .doc("Signals that a cluster client is following an -ASK redirect.", "3.0.0"),
        spec("auth", -2, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, NO_KEYS, auth)
            .acl(conn)
            .group("connection")
            .doc("Authenticates the connection.", "1.0.0"),
    ]
}

/// PING [message]
pub fn ping(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 2 {
        return Err(CmdError::Arity("ping".into()));
    }
    if ctx.client.pubsub.is_some() && !ctx.client.reply.resp3 {
        // RESP2 Pub/Sub mode answers in the shape of a message.
        let out = ctx.out();
        out.array(2);
        out.bulk(b"pong");
        out.bulk(args.get(1).map_or(&b""[..], |m| m));
        return Ok(());
    }
    match args.get(1) {
        Some(m) => ctx.out().bulk(m),
        None => ctx.out().simple("PONG"),
    }
    Ok(())
}

/// ECHO message
pub fn echo(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ctx.out().bulk(&args[1]);
    Ok(())
}

/// QUIT: replies OK, then the connection closes.
pub fn quit(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    ctx.out().ok();
    ctx.client.close_after_reply = true;
    Ok(())
}

/// RESET: back to a fresh connection's state.
pub fn reset(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    ctx.client.multi = None;
    ctx.client.multi_error = false;
    ctx.srv.unwatch_all(ctx.client);
    ctx.srv.pubsub.forget(ctx.client);
    if ctx.srv.tracking.disable(ctx.client) {
        ctx.srv.apply_notify_flags();
    }
    ctx.client.db = 0;
    ctx.client.reply.resp3 = false;
    ctx.client.reply_mode = ReplyMode::On;
    ctx.client.name = None;
    ctx.client.no_evict = false;
    ctx.client.no_touch = false;
    ctx.client.readonly = false;
    ctx.client.asking = false;
    if ctx.client.connected() {
        ctx.client.user = Some(ctx.srv.acl.default_user());
        ctx.client.authenticated = !ctx.srv.acl.auth_required();
    }
    if ctx.client.monitor {
        ctx.client.monitor = false;
        let id = ctx.client.id;
        ctx.srv.monitors.retain(|&m| m != id);
    }
    ctx.out().simple("RESET");
    Ok(())
}

/// The reply of the cluster client modes in standalone mode.
fn no_cluster() -> CmdError {
    CmdError::err("This instance has cluster support disabled")
}

/// READONLY: a replica serves this client's reads of its primary's slots.
/// Standalone, Redis refuses it; Valkey takes it from a client that
/// declared CLIENT CAPA redirect (its replica then serves its reads
/// instead of redirecting them), so densekv does so for such a client.
pub fn readonly(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.cluster.is_none() && !ctx.client.capa_redirect {
        return Err(no_cluster());
    }
    ctx.client.readonly = true;
    ctx.out().ok();
    Ok(())
}

/// READWRITE: undoes READONLY.
pub fn readwrite(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.cluster.is_none() && !ctx.client.capa_redirect {
        return Err(no_cluster());
    }
    ctx.client.readonly = false;
    ctx.out().ok();
    Ok(())
}

/// ASKING: the next command (or transaction) may use a slot this node is
/// importing; dispatch clears the flag after it.
pub fn asking(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.cluster.is_none() {
        return Err(no_cluster());
    }
    ctx.client.asking = true;
    ctx.out().ok();
    Ok(())
}

/// SELECT index (only 0 in cluster mode)
pub fn select(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let i = arg_i64(&args[1]).map_err(|_| CmdError::NotInt)?;
    if ctx.srv.cluster.is_some() && i != 0 {
        return Err(CmdError::err("SELECT is not allowed in cluster mode"));
    }
    if i < 0 || i as usize >= ctx.srv.dbs.len() {
        return Err(CmdError::DbIndex);
    }
    ctx.client.db = i as usize;
    ctx.out().ok();
    Ok(())
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Authenticates the client as `user` with `pass`: on success it runs as
/// that user from now on. A failure is recorded in the ACL log, as
/// Redis records it (object: the command word as sent).
fn authenticate(ctx: &mut Ctx, cmd: &[u8], user: &[u8], pass: &[u8]) -> Result<(), CmdError> {
    let found = ctx.srv.acl.user(user).filter(|u| u.borrow().password_ok(pass));
    match found {
        Some(u) => {
            ctx.client.user = Some(u);
            ctx.client.authenticated = true;
            Ok(())
        }
        None => {
            let context = if ctx.client.multi.is_some() { LogContext::Multi } else { LogContext::Toplevel };
            let cinfo = ctx.client.info_line(std::time::Instant::now());
            let max = ctx.srv.config.get("acllog-max-len").and_then(|v| v.parse().ok()).unwrap_or(128);
            ctx.srv.acl.log_event(Denied::Auth, context, cmd.to_vec(), user.to_vec(), cinfo, ctx.now, max);
            Err(CmdError::Custom(WRONGPASS.into()))
        }
    }
}

/// AUTH [username] password
pub fn auth(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match args.len() {
        2 => {
            if ctx.srv.acl.default_user().borrow().nopass {
                return Err(CmdError::err(
                    "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ));
            }
            authenticate(ctx, &args[0], b"default", &args[1])?
        }
        3 => authenticate(ctx, &args[0], &args[1], &args[2])?,
        _ => return Err(CmdError::Syntax),
    }
    ctx.out().ok();
    Ok(())
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
pub fn hello(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut ver = None;
    let mut i = 1;
    if let Some(v) = args.get(1) {
        let v = arg_i64(v).map_err(|_| CmdError::Custom("ERR Protocol version is not an integer or out of range".into()))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::Custom("NOPROTO unsupported protocol version".into()));
        }
        ver = Some(v);
        i = 2;
    }
    let mut name = None;
    let mut creds = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(&args[i], "auth") && more >= 2 {
            creds = Some((i + 1, i + 2));
            i += 3;
        } else if is(&args[i], "setname") && more >= 1 {
            let n = &args[i + 1];
            if n.iter().any(|&b| b <= b' ' || b > b'~') {
                return Err(CmdError::err("Client names cannot contain spaces, newlines or special characters."));
            }
            name = Some(n.clone());
            i += 2;
        } else {
            return Err(CmdError::Custom(format!("ERR Syntax error in HELLO option '{}'", String::from_utf8_lossy(&args[i]))));
        }
    }
    if let Some((u, p)) = creds {
        authenticate(ctx, &args[0], &args[u], &args[p])?;
    }
    if !ctx.client.authenticated && ctx.srv.acl.auth_required() {
        return Err(CmdError::Custom(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into(),
        ));
    }
    if let Some(v) = ver {
        ctx.client.reply.resp3 = v == 3;
    }
    if let Some(n) = name {
        ctx.client.name = if n.is_empty() { None } else { Some(n) };
    }
    let proto = ctx.client.resp() as i64;
    let id = ctx.client.id as i64;
    let replica = ctx.srv.repl.is_replica();
    let out = ctx.out();
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(crate::REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(proto);
    out.bulk(b"id");
    out.int(id);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(if replica { b"replica" } else { b"master" });
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}
