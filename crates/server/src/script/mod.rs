//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT
//! LOAD|EXISTS|FLUSH|KILL|HELP, with Redis 7.4's rules; `run_script` is
//! shared with FCALL (`function`), whose libraries keep an interpreter of
//! their own.
//!
//! One interpreter (`lua::Vm`) serves every client, as in Redis; compiled
//! scripts are cached by the SHA1 of their body. A script's `redis.call`
//! runs the command through the same lookup and `exec::run` as a client's
//! request, on a script client that starts on the caller's database and
//! RESP2, so arity, statistics, keyspace effects and WATCH invalidation are
//! shared; only the script rules (noscript, read-only scripts, OOM before
//! the first write) are checked here. The run-scoped natives borrow the
//! server through `mlua`'s scope, so no raw pointers are kept.
//!
//! A script that runs past busy-reply-threshold (lua-time-limit) is "timed
//! out": a count hook, every 100,000 Lua instructions, then serves the other
//! clients between steps (`net::serve_while_busy`), where everything but
//! the allow-busy commands gets `-BUSY` (exec.rs), and SCRIPT KILL or
//! SHUTDOWN NOSAVE end a script that has not written yet. Once killed, the
//! hook fires on every line, so `pcall` cannot swallow the kill.

pub mod function;
pub mod lua;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use mlua::{ChunkMode, MultiValue, Value};

use crate::client::Client;
use crate::commands::flags::*;
use crate::commands::{arg_i64, container, is, kf, spec, Begin, CmdError, CmdResult, CommandMap, Ctx, Find, KeyFlags, KeySpec, KeysFn, Spec, NO_KEYS};
use crate::exec::{self, Lookup};
use crate::server::Server;

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

/// Scripts created by EVAL beyond this many are evicted oldest first
/// (SCRIPT LOAD'ed ones never are), as Redis does.
const EVAL_SCRIPTS_MAX: usize = 500;

const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// A cached script. Its compiled function lives in the Lua registry under
/// `f_<sha>` (as in Redis): an `mlua::Function` handle per script would
/// use a slot of mlua's bounded reference stack, and caches hold more
/// scripts than it has slots.
struct Script {
    body: Vec<u8>,
    flags: u32,
}

fn registry_name(sha: &str) -> String {
    format!("f_{sha}")
}

/// The interpreter and the script cache.
pub struct Engine {
    vm: lua::Vm,
    scripts: HashMap<String, Script>,
    /// SHA1s of scripts created by EVAL, least recently used first.
    lru: VecDeque<String>,
    /// Scripts evicted from the cache (INFO evicted_scripts).
    pub evicted: u64,
    /// Scripts compiled so far (paces garbage collection).
    created: u64,
    /// The script running now, if any (seen by SCRIPT KILL and dispatch
    /// while it is timed out).
    pub running: Option<Running>,
    /// Function libraries (FUNCTION, FCALL), in their own interpreter as
    /// in Redis, so SCRIPT FLUSH leaves them be.
    pub functions: function::Functions,
    /// Builds interpreters (its `redis.acl_check_cmd` knows the table).
    commands: CommandMap,
}

/// State of the running script that other clients' commands can see.
#[derive(Debug, Default, Clone, Copy)]
pub struct Running {
    /// Past busy-reply-threshold: other clients get -BUSY.
    pub timed_out: bool,
    /// The script already wrote: SCRIPT KILL refuses (UNKILLABLE).
    pub write_dirty: bool,
    /// SCRIPT KILL asked it to stop.
    pub killed: bool,
    /// It is an FCALL function (FUNCTION KILL ends it, not SCRIPT KILL).
    pub function: bool,
}

/// Lua instructions between two checks of the script's running time.
const HOOK_EVERY: u32 = 100_000;
/// The error a killed script ends with.
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
/// Registry name of the run-scoped native the hook calls once timed out.
const BUSY_FN: &str = "__densekv_busy";

impl Engine {
    /// A fresh interpreter with an empty cache. `commands` answers
    /// `redis.acl_check_cmd`.
    pub fn new(commands: CommandMap) -> Engine {
        let functions = function::Functions::new(new_vm(&commands));
        Engine { vm: new_vm(&commands), scripts: HashMap::new(), lru: VecDeque::new(), evicted: 0, created: 0, running: None, functions, commands }
    }

    /// A fresh interpreter for function libraries (FUNCTION FLUSH).
    pub fn function_vm(&self) -> lua::Vm {
        new_vm(&self.commands)
    }

    /// The -BUSY reply other clients get while the running script is timed
    /// out: it names the command that can kill it.
    pub fn busy_error(&self) -> &'static str {
        if self.running.is_some_and(|r| r.function) {
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        } else {
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        }
    }

    /// Number of cached scripts.
    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    /// True if no script is cached.
    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// Bytes the interpreter holds (INFO used_memory_lua).
    pub fn vm_memory(&self) -> usize {
        self.vm.lua.used_memory()
    }

    /// Bytes of the cache: bodies, digests and per-entry overhead (INFO
    /// used_memory_scripts).
    pub fn cache_memory(&self) -> usize {
        self.scripts.values().map(|s| s.body.len() + 40 + 64).sum::<usize>() + self.lru.len() * 40
    }

    /// Compiles and caches `body` unless cached; returns its SHA1.
    fn create(&mut self, body: &[u8], from_eval: bool) -> Result<String, CmdError> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, skip) = parse_shebang(body).map_err(CmdError::err)?;
        // The shebang line is dropped but its newline kept, so line numbers hold.
        let func = self
            .vm
            .lua
            .load(&body[skip..])
            .set_name(lua::CHUNK_NAME)
            .set_mode(ChunkMode::Text)
            .set_environment(self.vm.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    e => e.to_string(),
                };
                CmdError::err(format!("Error compiling script (new function): {msg}"))
            })?;
        if from_eval {
            while self.lru.len() >= EVAL_SCRIPTS_MAX {
                if let Some(old) = self.lru.pop_front() {
                    self.scripts.remove(&old);
                    // Only fails on allocation failure; the entry is gone either way.
                    let _ = self.vm.lua.unset_named_registry_value(&registry_name(&old));
                    self.evicted += 1;
                }
            }
            self.lru.push_back(sha.clone());
        }
        self.vm
            .lua
            .set_named_registry_value(&registry_name(&sha), func)
            .map_err(|e| CmdError::err(format!("Error compiling script (new function): {e}")))?;
        self.scripts.insert(sha.clone(), Script { body: body.to_vec(), flags });
        // Compiling leaves garbage; a small collection step every few
        // scripts keeps the interpreter from growing in bursts, as Redis does.
        self.created += 1;
        if self.created.is_multiple_of(50) {
            let _ = self.vm.lua.gc_step_kbytes(50);
        }
        Ok(sha)
    }

    /// Marks an EVAL-created script as just used.
    fn touch(&mut self, sha: &str) {
        if let Some(i) = self.lru.iter().position(|s| s == sha) {
            if let Some(s) = self.lru.remove(i) {
                self.lru.push_back(s);
            }
        }
    }
}

/// A sandboxed interpreter whose `redis.acl_check_cmd` consults `commands`.
fn new_vm(commands: &CommandMap) -> lua::Vm {
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

/// The flags dispatch should judge `argv` by (CLIENT PAUSE, OOM): for the
/// EVAL family, those implied by the script's shebang, as Redis derives
/// them; for anything else, the spec's own.
pub fn command_flags(srv: &Server, spec: &Spec, argv: &[Vec<u8>]) -> u32 {
    let evalsha = match spec.full_name {
        "eval" | "eval_ro" => false,
        "evalsha" | "evalsha_ro" => true,
        "fcall" | "fcall_ro" => {
            let found = argv.get(1).and_then(|name| srv.scripting.functions.flags_of(name));
            return found.map_or(spec.flags, |f| script_cmd_flags(spec.flags, f));
        }
        _ => return spec.flags,
    };
    let Some(arg) = argv.get(1) else { return spec.flags };
    let sflags = if evalsha {
        if arg.len() != 40 {
            return spec.flags;
        }
        match srv.scripting.scripts.get(&String::from_utf8_lossy(arg).to_ascii_lowercase()) {
            Some(s) => s.flags,
            None => return spec.flags,
        }
    } else {
        match parse_shebang(arg) {
            Ok((f, _)) => f,
            Err(_) => return spec.flags,
        }
    };
    script_cmd_flags(spec.flags, sflags)
}

/// A command's flags as a script with `sflags` changes them.
fn script_cmd_flags(flags: u32, sflags: u32) -> u32 {
    if sflags & COMPAT != 0 {
        return flags;
    }
    let mut f = flags & !(STALE | DENYOOM | WRITE | MAY_REPLICATE);
    if sflags & (ALLOW_OOM | NO_WRITES) == 0 {
        f |= DENYOOM;
    }
    if sflags & NO_WRITES == 0 {
        f |= WRITE;
    }
    if sflags & ALLOW_STALE != 0 {
        f |= STALE;
    }
    f
}

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let acl: &[&str] = &["slow", "scripting"];
    let keyspec = |flags: KeyFlags| {
        vec![KeySpec { flags, begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } }]
    };
    let base = NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE;
    // The four EVAL rows differ in name, handler, read-only-ness and text.
    let row = |name, handler, ro: bool, summary, since| {
        let (flags, keys, getkeys): (u32, KeyFlags, KeysFn) =
            if ro { (READONLY, kf::RO_ACCESS, |a| eval_keys(a, kf::RO_ACCESS)) } else { (MAY_REPLICATE, kf::RW_ACCESS_UPDATE, |a| eval_keys(a, kf::RW_ACCESS_UPDATE)) };
        spec(name, -3, base | flags, NO_KEYS, handler).key_specs(keyspec(keys)).getkeys(getkeys).acl(acl).group("scripting").doc(summary, since)
    };
    vec![
        row("eval", eval, false, "Executes a server-side Lua script.", "2.6.0"),
        row("evalsha", evalsha, false, "Executes a server-side Lua script by SHA1 digest.", "2.6.0"),
        row("eval_ro", eval_ro, true, "Executes a read-only server-side Lua script.", "7.0.0"),
        row("evalsha_ro", evalsha_ro, true, "Executes a read-only server-side Lua script by SHA1 digest.", "7.0.0"),
        row("fcall", function::fcall, false, "Invokes a function.", "7.0.0"),
        row("fcall_ro", function::fcall_ro, true, "Invokes a read-only function.", "7.0.0"),
        function::container(),
        container(
            "script",
            vec![
                spec("load", 3, NOSCRIPT | STALE, NO_KEYS, script_load)
                    .acl(acl)
                    .doc("Loads a server-side Lua script to the script cache.", "2.6.0"),
                spec("exists", -3, NOSCRIPT, NO_KEYS, script_exists)
                    .acl(acl)
                    .doc("Determines whether server-side Lua scripts exist in the script cache.", "2.6.0"),
                spec("flush", -2, NOSCRIPT, NO_KEYS, script_flush)
                    .acl(acl)
                    .doc("Removes all server-side Lua scripts from the script cache.", "2.6.0"),
                spec("kill", 2, NOSCRIPT | ALLOW_BUSY, NO_KEYS, script_kill)
                    .acl(acl)
                    .doc("Terminates a server-side Lua script during execution.", "2.6.0"),
                spec("help", 2, LOADING | STALE, NO_KEYS, script_help)
                    .acl(acl)
                    .doc("Returns helpful text about the different subcommands.", "5.0.0"),
            ],
        )
        .group("scripting")
        .doc("A container for Lua scripts management commands.", "2.6.0"),
    ]
}

/// Keys of EVAL-like argv: numkeys at 2, then that many keys. Empty when
/// numkeys is bad (or zero, which NO_MANDATORY_KEYS makes valid).
fn eval_keys(argv: &[Vec<u8>], flags: KeyFlags) -> Vec<(usize, KeyFlags)> {
    let n = argv.get(2).and_then(|a| resp::num::parse_i64(a)).unwrap_or(-1);
    if n < 0 || n > argv.len() as i64 - 3 {
        return Vec::new();
    }
    (3..3 + n as usize).map(|i| (i, flags)).collect()
}

fn eval(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    eval_generic(ctx, args, "eval", false, false)
}

fn evalsha(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    eval_generic(ctx, args, "evalsha", true, false)
}

fn eval_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    eval_generic(ctx, args, "eval_ro", false, true)
}

fn evalsha_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    eval_generic(ctx, args, "evalsha_ro", true, true)
}

/// What a running script's natives share.
struct Run<'a> {
    srv: &'a mut Server,
    /// The client commands from the script run as.
    sc: Client,
    read_only: bool,
    allow_oom: bool,
    /// Memory was over maxmemory when the script started.
    oom: bool,
    /// A write command already ran: later ones cannot be refused for OOM.
    write_dirty: bool,
    now: i64,
}

impl Run<'_> {
    /// Runs one `redis.call`; returns the raw reply bytes.
    fn call(&mut self, argv: Vec<Vec<u8>>) -> Vec<u8> {
        let table = self.srv.commands.clone();
        let spec = match exec::lookup(&table, &argv) {
            Lookup::Found(s) => s,
            Lookup::Unknown(_) => return self.reject(None, "ERR Unknown Redis command called from script"),
            Lookup::BadArity(_) => {
                let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
                return self.reject(table.get(&name), "ERR Wrong number of args calling Redis command from script");
            }
        };
        if spec.has(NOSCRIPT) {
            return self.reject(Some(spec), "ERR This Redis command is not allowed from script");
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
            self.write_dirty = true;
        }
        exec::run(self.srv, &mut self.sc, spec, &argv, self.now, Instant::now());
        std::mem::take(&mut self.sc.reply.buf)
    }

    /// A command refused before running: counted as Redis counts it.
    fn reject(&mut self, spec: Option<&Spec>, msg: &str) -> Vec<u8> {
        if let Some(s) = spec {
            self.srv.cmdstats.entry(s.full_name).or_default().rejected += 1;
        }
        exec::reply_error(self.srv, &mut self.sc, &CmdError::Custom(msg.into()));
        std::mem::take(&mut self.sc.reply.buf)
    }
}

fn eval_generic(ctx: &mut Ctx, args: &[Vec<u8>], name: &'static str, by_sha: bool, ro: bool) -> CmdResult {
    // EVAL skips the generic MONITOR feed so it shows before its commands.
    if !ctx.srv.monitors.is_empty() {
        exec::feed_monitors(ctx.srv, ctx.client, args);
    }
    if by_sha && args[1].len() != 40 {
        return Err(CmdError::Custom(NOSCRIPT_ERR.into()));
    }
    let numkeys = check_numkeys(arg_i64(&args[2])?, args)?;
    let engine = &mut ctx.srv.scripting;
    let sha = if by_sha {
        let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        if !engine.scripts.contains_key(&sha) {
            return Err(CmdError::Custom(NOSCRIPT_ERR.into()));
        }
        sha
    } else {
        engine.create(&args[1], true)?
    };
    engine.touch(&sha);
    let Some(script) = engine.scripts.get(&sha) else {
        return Err(CmdError::Custom(NOSCRIPT_ERR.into()));
    };
    let flags = script.flags;
    let vm = engine.vm.clone();
    let Ok(func) = vm.lua.named_registry_value::<mlua::Function>(&registry_name(&sha)) else {
        return Err(CmdError::Custom(NOSCRIPT_ERR.into()));
    };
    let call = Call { cmd: name, label: sha, flags, ro, argv: args, numkeys, function: false };
    run_script(ctx, &vm, func, call)
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
    let (lua, globals, state, runner, redis) = (&vm.lua, &vm.globals, &vm.state, &vm.runner, &vm.redis);
    let compat = flags & COMPAT != 0;
    let maxmem = ctx.srv.config.maxmemory;
    let oom = maxmem != 0 && crate::memory::allocated() > maxmem;
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

    let started = std::time::Instant::now();
    let threshold = std::time::Duration::from_millis(ctx.srv.config.get("busy-reply-threshold").and_then(|v| v.parse().ok()).unwrap_or(5000));
    let running = Running { function, ..Running::default() };
    ctx.srv.scripting.running = Some(running);
    if function {
        ctx.srv.scripting.functions.running = Some((label.clone(), argv.to_vec(), started));
    }
    let mut sc = Client::new(ctx.client.id, None, "lua".into(), String::new());
    sc.db = ctx.client.db;
    // Blocking commands must not block here: they see what EXEC's see.
    sc.in_exec = true;
    let run = RefCell::new(Run {
        srv: &mut *ctx.srv,
        sc,
        read_only: ro || (!compat && flags & NO_WRITES != 0),
        allow_oom: !compat && flags & ALLOW_OOM != 0,
        oom,
        write_dirty: false,
        now: ctx.now,
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
        // Once timed out, the hook lends the server to the other clients.
        let busy = scope.create_function(|_, ()| {
            let mut r = run.try_borrow_mut().map_err(|_| mlua::Error::RecursiveMutCallback)?;
            let write_dirty = r.write_dirty;
            let srv = &mut *r.srv;
            let st = srv.scripting.running.get_or_insert(running);
            st.write_dirty = write_dirty;
            st.timed_out = true;
            crate::net::serve_while_busy(srv);
            Ok(srv.shutdown || srv.scripting.running.is_some_and(|s| s.killed))
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
        out
    });
    let Run { sc, .. } = run.into_inner();
    ctx.srv.scripting.running = None;
    ctx.srv.scripting.functions.running = None;
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
        ctx.srv.cmdstats.entry(cmd).or_default().failed += 1;
    }
    Ok(())
}

fn script_load(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let sha = ctx.srv.scripting.create(&args[2], false)?;
    ctx.out().bulk(sha.as_bytes());
    Ok(())
}

fn script_exists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let found: Vec<bool> = args[2..]
        .iter()
        .map(|a| ctx.srv.scripting.scripts.contains_key(&String::from_utf8_lossy(a).to_ascii_lowercase()))
        .collect();
    let out = ctx.out();
    out.array(found.len());
    for f in found {
        out.int(f as i64);
    }
    Ok(())
}

fn script_flush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ok = match args.len() {
        2 => true,
        3 => is(&args[2], "sync") || is(&args[2], "async"),
        _ => false,
    };
    if !ok {
        return Err(CmdError::err("SCRIPT FLUSH only support SYNC|ASYNC option"));
    }
    // Redis resets the whole interpreter, globals and all; functions have
    // their own.
    let e = &mut ctx.srv.scripting;
    e.vm = new_vm(&e.commands);
    e.scripts.clear();
    e.lru.clear();
    ctx.out().ok();
    Ok(())
}

fn killed_error() -> mlua::Error {
    mlua::Error::external(lua::Raised { msg: KILLED.into(), ignore_stats: false })
}

/// SCRIPT KILL and FUNCTION KILL: only reachable while a script is timed
/// out (everything else waits for the script), only for a script that has
/// not written, and each only for its own kind.
pub(crate) fn kill(ctx: &mut Ctx, function: bool) -> CmdResult {
    let busy_msg = ctx.srv.scripting.busy_error();
    match ctx.srv.scripting.running.as_mut() {
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

fn script_kill(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    kill(ctx, false)
}

fn script_help(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    crate::commands::introspection::help_reply(
        ctx,
        "script",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
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

    #[test]
    fn eval_keys_follow_numkeys() {
        let argv: Vec<Vec<u8>> = ["eval", "s", "2", "a", "b", "c"].iter().map(|s| s.as_bytes().to_vec()).collect();
        let keys: Vec<usize> = eval_keys(&argv, kf::RO_ACCESS).into_iter().map(|k| k.0).collect();
        assert_eq!(keys, [3, 4]);
        let mut bad = argv.clone();
        bad[2] = b"9".to_vec();
        assert!(eval_keys(&bad, kf::RO_ACCESS).is_empty());
    }
}
