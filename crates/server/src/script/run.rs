//! Running a script: what EVAL and FCALL share. `run_script` runs a
//! compiled function with Redis's script rules: flags checked against *_RO
//! and OOM, `redis.call` through a script client and the same lookup and
//! `exec::run` as a client's request (so arity, statistics, keyspace
//! effects and WATCH invalidation are shared), busy handling past
//! busy-reply-threshold, and the reply or error written to the caller. The
//! run-scoped natives borrow the server through `mlua`'s scope, so no raw
//! pointers are kept.
//!
//! A script that runs past busy-reply-threshold (lua-time-limit) is "timed
//! out": a count hook, every 100,000 Lua instructions, then serves the other
//! clients between steps (`Host::serve_others`, lent by the event loop),
//! where everything but the allow-busy commands gets `-BUSY` (dispatch.rs),
//! and SCRIPT KILL or SHUTDOWN NOSAVE end a script that has not written yet.
//! Once killed, the hook fires on every line, so `pcall` cannot swallow the
//! kill.

use std::cell::RefCell;
use std::time::Instant;

use mlua::{MultiValue, Value};

use super::lua;
use crate::acl::LogContext;
use crate::client::Client;
use crate::command::flags::*;
use crate::command::{CmdError, CmdResult, CommandMap, Ctx, Host, Spec};
use crate::exec::{self, Lookup};
use crate::server::{ScriptRun, Server};

/// Script flags declared in a `#!lua flags=...` shebang.
pub mod script_flags {
    /// `no-writes`: the script never writes (runs under CLIENT PAUSE WRITE, EVAL_RO).
    pub const NO_WRITES: u32 = 1;
    /// `allow-oom`: may run when memory is over maxmemory.
    pub const ALLOW_OOM: u32 = 1 << 1;
    /// `allow-stale`: may run on a stale replica.
    pub const ALLOW_STALE: u32 = 1 << 2;
    /// `no-cluster`: refused in cluster mode.
    pub const NO_CLUSTER: u32 = 1 << 3;
    /// `allow-cross-slot-keys`.
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
    /// No shebang: the pre-7.0 rules apply.
    pub const COMPAT: u32 = 1 << 5;
    /// Names as the shebang spells them.
    pub const NAMES: &[(u32, &str)] = &[
        (NO_WRITES, "no-writes"),
        (ALLOW_OOM, "allow-oom"),
        (ALLOW_STALE, "allow-stale"),
        (NO_CLUSTER, "no-cluster"),
        (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];
}
use script_flags::*;

/// Lua instructions between two checks of the script's running time.
const HOOK_EVERY: u32 = 100_000;
/// The error a killed script ends with.
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
/// Registry name of the run-scoped native the hook calls once timed out.
const BUSY_FN: &str = "__densekv_busy";

/// A sandboxed interpreter whose `redis.acl_check_cmd` consults `commands`.
pub(crate) fn new_vm(commands: &CommandMap) -> lua::Vm {
    let commands = commands.clone();
    let acl = move |argv: &[Vec<u8>]| matches!(exec::lookup(&commands, argv), Lookup::Found(_));
    // Our own setup code: failing here is a broken invariant.
    lua::new_vm(acl).expect("scripting sandbox setup")
}

/// Lowercase hex SHA1, as script digests are written.
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Parses a `#!lua flags=a,b` first line. Returns the flags (COMPAT when
/// there is no shebang) and the length of the shebang line (without its
/// newline), or Redis's error text (without "ERR ").
pub fn parse_shebang(body: &[u8]) -> Result<(u32, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((COMPAT, 0));
    }
    let Some(len) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let parts = match resp::parse::split_args(&body[..len]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("Invalid engine in script shebang".into()),
    };
    if parts[0] != b"#!lua" {
        return Err(format!("Unexpected engine in script shebang: {}", String::from_utf8_lossy(&parts[0])));
    }
    let mut flags = 0;
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix(b"flags=") else {
            return Err(format!("Unknown lua shebang option: {}", String::from_utf8_lossy(p)));
        };
        if list.is_empty() {
            continue;
        }
        for f in list.split(|&b| b == b',') {
            match script_flags::NAMES.iter().find(|(_, n)| n.as_bytes() == f) {
                Some((bit, _)) => flags |= bit,
                None => return Err(format!("Unexpected flag in script shebang: {}", String::from_utf8_lossy(f))),
            }
        }
    }
    Ok((flags, len))
}

/// What a running script's natives share.
struct Run<'a> {
    srv: &'a mut Server,
    /// The event loop's lending: the table, serving others while busy.
    host: &'a mut dyn Host,
    /// The client commands from the script run as.
    sc: Client,
    /// The caller's CLIENT LIST line, for ACL LOG entries.
    caller_info: String,
    read_only: bool,
    allow_oom: bool,
    /// Memory was over maxmemory when the script started.
    oom: bool,
    /// A write command already ran: later ones cannot be refused for OOM.
    write_dirty: bool,
    now: i64,
    /// Cluster mode, for a caller that is not this node's primary: each
    /// `redis.call` is routed as a client's command would be.
    route: bool,
    /// `allow-cross-slot-keys`: keys the script did not declare may be
    /// of other slots (still served here).
    cross_slot: bool,
    /// The slot the script's keys are in so far (the declared keys'
    /// first), as Redis's caller slot.
    slot: Option<u16>,
}

impl Run<'_> {
    /// Runs one `redis.call`; returns the raw reply bytes.
    fn call(&mut self, argv: Vec<Vec<u8>>) -> Vec<u8> {
        let table = self.host.table().clone();
        let spec = match exec::lookup(&table, &argv) {
            Lookup::Found(s) => s,
            Lookup::Unknown(_) => return self.reject(None, "ERR Unknown Redis command called from script"),
            Lookup::BadArity(_) => return self.reject(table.find(&argv[0]), "ERR Wrong number of args calling Redis command from script"),
        };
        if spec.has(NOSCRIPT) {
            return self.reject(Some(spec), "ERR This Redis command is not allowed from script");
        }
        if self.sc.user.as_ref().is_some_and(|u| !u.borrow().unrestricted) {
            if let Some((_, msg)) = exec::acl_refuse(self.srv, &self.sc, spec, &argv, LogContext::Lua, Some(self.caller_info.clone())) {
                return self.reject(Some(spec), &format!("ERR ACL failure in script: {msg}"));
            }
        }
        // May-replicate counts as a write, so read-only scripts can run
        // during CLIENT PAUSE WRITE.
        if self.read_only && spec.flags & (WRITE | MAY_REPLICATE) != 0 {
            return self.reject(Some(spec), "ERR Write commands are not allowed from read-only scripts.");
        }
        if !self.allow_oom && self.oom && !self.write_dirty && spec.has(DENYOOM) {
            return self.reject(Some(spec), exec::OOM_ERROR);
        }
        if spec.has(WRITE) {
            if let Some(e) = self.srv.disk_error().or_else(|| self.srv.replicas_error().map(std::borrow::Cow::Borrowed)) {
                return self.reject(Some(spec), &e);
            }
        }
        if self.route {
            if let Some(e) = self.cluster_refusal(&table, spec, &argv) {
                return self.reject(Some(spec), &e);
            }
        }
        if spec.has(WRITE) {
            self.write_dirty = true;
        }
        exec::run(self.srv, &mut *self.host, &mut self.sc, spec, &argv, self.now, Instant::now());
        std::mem::take(&mut self.sc.reply.buf)
    }

    /// Why a command of the script may not run on this cluster node (its
    /// keys are served elsewhere, the cluster is down, they leave the
    /// script's slot), as Redis words it for scripts.
    fn cluster_refusal(&mut self, table: &crate::command::CommandMap, spec: &Spec, argv: &[Vec<u8>]) -> Option<String> {
        if let Err(r) = crate::redirect::check(self.srv, table, &self.sc, spec, argv, spec.has(WRITE), self.now) {
            return Some(r.script_message(spec.full_name));
        }
        if self.cross_slot {
            return None;
        }
        let req = crate::redirect::Request {
            commands: &[(spec, argv)],
            write: false,
            pubsubshard: false,
            asking: false,
            readonly: false,
            tls: false,
            migrate: false,
        };
        match (crate::redirect::request_slot(&req), self.slot) {
            (Ok(Some(s)), None) => self.slot = Some(s),
            (Ok(Some(s)), Some(mine)) if s != mine => return Some("ERR Script attempted to access keys that do not hash to the same slot".into()),
            _ => {}
        }
        None
    }

    /// A command refused before running: counted as Redis counts it.
    fn reject(&mut self, spec: Option<&Spec>, msg: &str) -> Vec<u8> {
        if let Some(s) = spec {
            self.srv.cmdstats.entry(s.id, s.full_name).rejected += 1;
        }
        exec::reply_error(self.srv, &mut self.sc, &CmdError::Custom(msg.into()));
        std::mem::take(&mut self.sc.reply.buf)
    }
}

/// Checks numkeys (already parsed) against the arguments EVAL and FCALL
/// got; returns it as a count.
pub(crate) fn check_numkeys(numkeys: i64, args: &[Vec<u8>]) -> Result<usize, CmdError> {
    if numkeys > args.len() as i64 - 3 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    Ok(numkeys as usize)
}

/// What differs between running an EVAL script and an FCALL function.
pub(crate) struct Call<'a> {
    /// The command its failures are counted under.
    pub cmd: &'static str,
    /// The script's SHA1 or the function's name, as error replies cite it.
    pub label: String,
    /// Script flags (shebang or register_function's).
    pub flags: u32,
    /// Called as a *_RO command.
    pub ro: bool,
    /// The caller's command: name, script or function, numkeys, keys, args.
    pub argv: &'a [Vec<u8>],
    /// Keys among `argv[3..]`.
    pub numkeys: usize,
    /// A function: KEYS and ARGV are its parameters (EVAL sets globals),
    /// and FUNCTION STATS / FUNCTION KILL see it.
    pub function: bool,
}

/// Runs `func` (compiled in `vm`) for the client, with Redis's script
/// rules: flags checked against *_RO and OOM, `redis.call` through the
/// script client, busy handling past busy-reply-threshold, and the reply
/// or error written to the caller.
pub(crate) fn run_script(ctx: &mut Ctx, vm: &lua::Vm, func: mlua::Function, call: Call) -> CmdResult {
    let Call { cmd, label, flags, ro, argv, numkeys: n, function } = call;
    let sb = vm.sandbox().map_err(|e| CmdError::err(format!("Error running script: {e}")))?;
    let (lua, globals, state, runner, redis) = (&vm.lua, &vm.globals, &sb.state, &sb.runner, &sb.redis);
    let compat = flags & COMPAT != 0;
    if !compat && flags & NO_CLUSTER != 0 && ctx.srv.cluster.is_some() {
        return Err(CmdError::err("Can not run script on cluster, 'no-cluster' flag is set."));
    }
    let maxmem = ctx.srv.config.maxmemory;
    let oom = maxmem != 0 && crate::evict::over_limit(ctx.srv);
    if !compat {
        if flags & NO_WRITES == 0 && ro {
            return Err(CmdError::err("Can not execute a script with write flag using *_ro command."));
        }
        if oom && flags & (ALLOW_OOM | NO_WRITES) == 0 {
            return Err(CmdError::Custom(
                "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".into(),
            ));
        }
    }

    let array = |items: &[Vec<u8>]| -> mlua::Result<mlua::Table> {
        let t = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, a) in items.iter().enumerate() {
            t.raw_set(i + 1, lua.create_string(a)?)?;
        }
        Ok(t)
    };
    let params = match (array(&argv[3..3 + n]), array(&argv[3 + n..])) {
        (Ok(k), Ok(a)) if function => Ok(Some((k, a))),
        (Ok(k), Ok(a)) => globals.raw_set("KEYS", k).and_then(|_| globals.raw_set("ARGV", a)).map(|_| None),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let params = match params {
        Ok(p) => p,
        Err(e) => return Err(CmdError::err(format!("Error running script {label}, {e}"))),
    };

    if let Err(e) = lua::lend_log(vm, Some(ctx.srv.config.log.clone())) {
        return Err(CmdError::err(format!("Error running script {label}, {e}")));
    }
    let started = std::time::Instant::now();
    let threshold = std::time::Duration::from_millis(ctx.srv.config.get("busy-reply-threshold").and_then(|v| v.parse().ok()).unwrap_or(5000));
    let running = ScriptRun { function, ..ScriptRun::default() };
    ctx.srv.script = Some(running);
    if function {
        ctx.srv.running_function = Some((label.clone(), argv.to_vec(), started));
    }
    let mut sc = Client::new(ctx.client.id, None, "lua".into(), String::new());
    sc.db = ctx.client.db;
    // Keys its read commands fetch are remembered for the caller, in the
    // caller's CLIENT TRACKING mode.
    sc.tracking = ctx.client.tracking.clone();
    // redis.call runs with the caller's rights; the ACL log shows the caller.
    sc.user = ctx.client.user.clone();
    let restricted = sc.user.as_ref().is_some_and(|u| !u.borrow().unrestricted);
    let caller_info = if restricted { ctx.client.info_line(Instant::now()) } else { String::new() };
    // Blocking commands must not block here: they see what EXEC's see.
    sc.in_exec = true;
    sc.in_script = true;
    // Routing of its commands sees the caller's cluster modes.
    sc.readonly = ctx.client.readonly;
    sc.asking = ctx.client.asking;
    let route = ctx.srv.cluster.is_some() && ctx.client.repl_role != crate::client::ReplRole::Primary;
    let slot = argv[3..3 + n].first().map(|k| storage::slot::key_hash_slot(k));
    let run = RefCell::new(Run {
        srv: &mut *ctx.srv,
        host: &mut *ctx.host,
        sc,
        caller_info,
        read_only: ro || (!compat && flags & NO_WRITES != 0),
        allow_oom: !compat && flags & ALLOW_OOM != 0,
        oom,
        write_dirty: false,
        now: ctx.now,
        route,
        // Redis (scriptPrepareForRun) lets old-style EVAL scripts, without
        // a shebang, reach keys of several slots, as before 7.0.
        cross_slot: compat || flags & ALLOW_CROSS_SLOT != 0,
        slot,
    });
    // redis.call and redis.pcall: the same call; call raises error replies.
    let call_with = |lua: &mlua::Lua, args: MultiValue, raise: bool| -> mlua::Result<Value> {
        let reply = match lua::lua_args(&args) {
            Ok(argv) => run.try_borrow_mut().map_err(|_| mlua::Error::RecursiveMutCallback)?.call(argv),
            Err(msg) if raise => return Err(mlua::Error::external(lua::Raised { msg: msg.into(), ignore_stats: false })),
            Err(msg) => return Ok(Value::Table(lua::err_table(lua, msg, false)?)),
        };
        if raise && reply.first() == Some(&b'-') {
            let line = reply.split(|&b| b == b'\r').next().unwrap_or_default();
            let msg = String::from_utf8_lossy(&line[1..]).into_owned();
            return Err(mlua::Error::external(lua::Raised { msg, ignore_stats: true }));
        }
        Ok(lua::reply_to_lua(lua, &reply, &mut 0).unwrap_or(Value::Nil))
    };
    let result = lua.scope(|scope| {
        let call = scope.create_function(|lua, args: MultiValue| call_with(lua, args, true))?;
        let pcall = scope.create_function(|lua, args: MultiValue| call_with(lua, args, false))?;
        redis.raw_set("call", call)?;
        redis.raw_set("pcall", pcall)?;
        let setresp = scope.create_function(|_, v: i64| {
            run.try_borrow_mut().map_err(|_| mlua::Error::RecursiveMutCallback)?.sc.reply.resp3 = v == 3;
            Ok(())
        })?;
        state.raw_set("setresp", setresp)?;
        // redis.set_repl: what the script writes from now on skips the
        // targets it leaves out (bit 1 AOF, bit 2 replicas, as REPL_*).
        let set_repl = scope.create_function(|_, v: i64| {
            let held = crate::feed::TO_AOF | crate::feed::TO_REPLICAS;
            run.try_borrow_mut().map_err(|_| mlua::Error::RecursiveMutCallback)?.srv.feed.hold(held & !(v as u8));
            Ok(())
        })?;
        state.raw_set("set_repl", set_repl)?;
        // redis.acl_check_cmd answers for the caller's user.
        let acl_check = scope.create_function(|lua, args: MultiValue| {
            let argv = match lua::lua_args(&args) {
                Ok(a) => a,
                Err(msg) => return Ok((Value::Table(lua::err_table(lua, msg, false)?), true)),
            };
            let r = run.try_borrow().map_err(|_| mlua::Error::RecursiveMutCallback)?;
            let table = r.host.table().clone();
            let Lookup::Found(spec) = exec::lookup(&table, &argv) else {
                return Ok((Value::Table(lua::err_table(lua, "ERR Invalid command passed to redis.acl_check_cmd()", false)?), true));
            };
            let allowed = r.sc.user.as_ref().is_none_or(|u| exec::acl_check(r.srv, &u.borrow(), spec, &argv).is_ok());
            Ok((Value::Boolean(allowed), false))
        })?;
        state.raw_set("acl_check", acl_check)?;
        // Once timed out, the hook lends the server to the other clients.
        let busy = scope.create_function(|_, ()| {
            let mut r = run.try_borrow_mut().map_err(|_| mlua::Error::RecursiveMutCallback)?;
            let write_dirty = r.write_dirty;
            let Run { srv, host, .. } = &mut *r;
            let st = srv.script.get_or_insert(running);
            st.write_dirty = write_dirty;
            if !st.timed_out {
                st.timed_out = true;
                // Once per run, as Redis logs it, so a stuck server says why.
                let kill = if function { "FUNCTION KILL" } else { "SCRIPT KILL" };
                srv.config.log.warning(&format!(
                    "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the {kill} command. Script name is: {label}.",
                    started.elapsed().as_millis()
                ));
            }
            host.serve_others(srv);
            Ok(srv.shutdown || srv.script.is_some_and(|s| s.killed))
        })?;
        lua.set_named_registry_value(BUSY_FN, busy)?;
        lua.set_hook(mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |lua, _| {
            if started.elapsed() < threshold {
                return Ok(mlua::VmState::Continue);
            }
            let busy: mlua::Function = lua.named_registry_value(BUSY_FN)?;
            if !busy.call::<bool>(())? {
                return Ok(mlua::VmState::Continue);
            }
            lua.set_hook(mlua::HookTriggers::new().every_line(), |_, _| Err(killed_error()));
            Err(killed_error())
        });
        let out = match params {
            Some(p) => runner.call::<(bool, Value)>((func, p.0, p.1)),
            None => runner.call::<(bool, Value)>(func),
        };
        lua.remove_hook();
        lua.unset_named_registry_value(BUSY_FN)?;
        state.raw_set("acl_check", Value::Nil)?;
        out
    });
    let Run { sc, .. } = run.into_inner();
    // What the script held back from the AOF or replicas ends with it.
    ctx.srv.feed.hold(0);
    let _ = lua::lend_log(vm, None);
    ctx.srv.script = None;
    ctx.srv.running_function = None;
    let script_resp3 = sc.reply.resp3;
    if sc.dirty_cas {
        ctx.client.dirty_cas = true;
    }
    let err = match result {
        Ok((true, v)) => lua::lua_to_reply(&v, &mut ctx.client.reply, script_resp3),
        Ok((false, Value::Table(t))) => {
            let mut e = lua::error_info(&t);
            if let (Some(src), Some(line)) = (&e.source, &e.line) {
                e.msg = format!("{} script: {label}, on {src}:{line}.", e.msg);
            }
            Some(e)
        }
        Ok((false, v)) => Some(lua::ScriptError {
            msg: format!("ERR Error running script {label}, {:.100}", v.to_string().unwrap_or_default()),
            source: None,
            line: None,
            ignore_stats: false,
        }),
        Err(e) => Some(lua::ScriptError {
            msg: format!("ERR Error running script {label}, {:.100}", e.to_string()),
            source: None,
            line: None,
            ignore_stats: false,
        }),
    };
    if let Some(e) = err {
        if e.ignore_stats {
            ctx.out().error(&e.msg);
        } else {
            exec::reply_error(ctx.srv, ctx.client, &CmdError::Custom(e.msg));
        }
        if let Some(s) = ctx.host.table().get(cmd) {
            ctx.srv.cmdstats.entry(s.id, s.full_name).failed += 1;
        }
    }
    Ok(())
}

fn killed_error() -> mlua::Error {
    mlua::Error::external(lua::Raised { msg: KILLED.into(), ignore_stats: false })
}

/// SCRIPT KILL and FUNCTION KILL: only reachable while a script is timed
/// out (everything else waits for the script), only for a script that has
/// not written, and each only for its own kind.
pub(crate) fn kill(ctx: &mut Ctx, function: bool) -> CmdResult {
    let busy_msg = ctx.srv.busy_error();
    match ctx.srv.script.as_mut() {
        None => Err(CmdError::Custom("NOTBUSY No scripts in execution right now.".into())),
        Some(r) if r.write_dirty => Err(CmdError::Custom(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
                .into(),
        )),
        Some(r) if r.function != function => Err(CmdError::Custom(busy_msg.into())),
        Some(r) => {
            r.killed = true;
            ctx.out().ok();
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_flags_and_errors() {
        assert_eq!(parse_shebang(b"return 1"), Ok((COMPAT, 0)));
        assert_eq!(parse_shebang(b"#!lua\nreturn 1"), Ok((0, 5)));
        assert_eq!(parse_shebang(b"#!lua flags=no-writes,allow-oom\n"), Ok((NO_WRITES | ALLOW_OOM, 31)));
        assert_eq!(parse_shebang(b"#!lua flags=\n"), Ok((0, 12)));
        assert_eq!(parse_shebang(b"#!lua"), Err("Invalid script shebang".into()));
        assert_eq!(parse_shebang(b"#!foo\n"), Err("Unexpected engine in script shebang: #!foo".into()));
        assert_eq!(parse_shebang(b"#!lua flags=bad\n"), Err("Unexpected flag in script shebang: bad".into()));
        assert_eq!(parse_shebang(b"#!lua name=x\n"), Err("Unknown lua shebang option: name=x".into()));
    }
}
