//! Redis 7 functions: FUNCTION LOAD|DELETE|FLUSH|LIST|DUMP|RESTORE|STATS|
//! KILL|HELP and FCALL / FCALL_RO.
//!
//! A library is Lua source with a `#!lua name=<lib>` first line. Loading
//! runs it once in the functions' own interpreter with only the library
//! API visible (`redis.register_function`, `redis.log`, the version), which
//! the prelude swaps in through `state.library`; each registered callback
//! is kept in the Lua registry (`RegistryKey`, not a handle on mlua's
//! bounded stack). FCALL then runs a callback through the same
//! `run_script` as EVAL, so script rules, busy handling and replies are
//! shared; only KEYS and ARGV arrive as parameters instead of globals.
//!
//! Libraries are kept by name (case-sensitive, as Redis), functions by
//! lowercased name (FCALL is case-insensitive). A load builds the whole
//! library before linking it, so a failed load or restore changes nothing.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use mlua::{ChunkMode, MultiValue, RegistryKey, Value};

use super::script_flags::NAMES;
use super::{check_numkeys, lua, run_script, Call};
use crate::commands::flags::*;
use crate::commands::{container as cmd_container, is, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};

/// The one engine, as FUNCTION LIST and STATS name it.
const ENGINE: &str = "LUA";
/// How long a library's load run may take.
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);
const BAD_NAME: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// A registered function.
struct Function {
    name: String,
    desc: Option<Vec<u8>>,
    flags: u32,
    callback: RegistryKey,
}

/// A loaded library.
struct Library {
    /// The whole source FUNCTION LOAD got, shebang included.
    code: Vec<u8>,
    /// In registration order.
    functions: Vec<Function>,
}

/// The libraries and their interpreter.
pub struct Functions {
    vm: lua::Vm,
    libraries: BTreeMap<String, Library>,
    /// Lowercased function name -> library name.
    index: HashMap<String, String>,
    /// The function running now: name, caller's command, start (FUNCTION STATS).
    pub running: Option<(String, Vec<Vec<u8>>, Instant)>,
}

impl Functions {
    /// No libraries, in interpreter `vm`.
    pub fn new(vm: lua::Vm) -> Functions {
        Functions { vm, libraries: BTreeMap::new(), index: HashMap::new(), running: None }
    }

    /// Number of libraries.
    pub fn libraries(&self) -> usize {
        self.libraries.len()
    }

    /// Number of functions.
    pub fn functions(&self) -> usize {
        self.index.len()
    }

    /// Bytes the interpreter holds (INFO used_memory_vm_functions).
    pub fn vm_memory(&self) -> usize {
        self.vm.lua.used_memory()
    }

    /// Bytes of bookkeeping: names, descriptions, codes (INFO
    /// used_memory_functions).
    pub fn overhead(&self) -> usize {
        self.libraries
            .iter()
            .map(|(n, l)| {
                n.len() + l.code.len() + 64 + l.functions.iter().map(|f| f.name.len() + f.desc.as_ref().map_or(0, Vec::len) + 64).sum::<usize>()
            })
            .sum()
    }

    /// The script flags of function `name`, if it exists.
    pub fn flags_of(&self, name: &[u8]) -> Option<u32> {
        self.lookup(name).map(|f| f.flags)
    }

    fn lookup(&self, name: &[u8]) -> Option<&Function> {
        let key = String::from_utf8_lossy(name).to_ascii_lowercase();
        let lib = self.libraries.get(self.index.get(&key)?)?;
        lib.functions.iter().find(|f| f.name.eq_ignore_ascii_case(&key))
    }

    fn unlink(&mut self, name: &str) -> Option<Library> {
        let lib = self.libraries.remove(name)?;
        for f in &lib.functions {
            self.index.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    fn link(&mut self, name: String, lib: Library) {
        for f in &lib.functions {
            self.index.insert(f.name.to_ascii_lowercase(), name.clone());
        }
        self.libraries.insert(name, lib);
    }

    /// The first function of `lib` whose name is taken, if any.
    fn collision<'a>(&self, lib: &'a Library) -> Option<&'a str> {
        lib.functions.iter().find(|f| self.index.contains_key(&f.name.to_ascii_lowercase())).map(|f| f.name.as_str())
    }

    /// FUNCTION LOAD's work: parses, runs and links `code`; returns the
    /// library name, or Redis's error text (without "ERR ").
    fn load(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let (name, engine, body) = parse_metadata(code)?;
        if !valid_name(&name) {
            return Err(BAD_NAME.into());
        }
        if !engine.eq_ignore_ascii_case(ENGINE) {
            return Err(format!("Engine '{engine}' not found"));
        }
        if self.libraries.contains_key(&name) && !replace {
            return Err(format!("Library '{name}' already exists"));
        }
        let functions = register(&self.vm, body)?;
        let lib = Library { code: code.to_vec(), functions };
        let old = self.unlink(&name);
        if let Some(f) = self.collision(&lib) {
            let err = format!("Function {f} already exists");
            if let Some(old) = old {
                self.link(name, old);
            }
            return Err(err);
        }
        self.link(name.clone(), lib);
        Ok(name)
    }
}

/// Splits `#!<engine> name=<lib>` off `code`: returns the name, the engine
/// and the code after the shebang (its newline kept, so lines hold).
fn parse_metadata(code: &[u8]) -> Result<(String, String, &[u8]), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let parts = match resp::parse::split_args(&code[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("Invalid library metadata".into()),
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let engine = text(parts[0].get(2..).unwrap_or_default());
    let mut name = None;
    for p in &parts[1..] {
        match p.get(..5) {
            Some(k) if k.eq_ignore_ascii_case(b"name=") => {
                if name.is_some() {
                    return Err("Invalid metadata value, name argument was given multiple times".into());
                }
                name = Some(text(&p[5..]));
            }
            _ => return Err(format!("Invalid metadata value given: {}", text(p))),
        }
    }
    let name = name.ok_or("Library name was not given")?;
    Ok((name, engine, &code[end..]))
}

/// Library and function names: `[A-Za-z0-9_]+`.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn raise(msg: &str) -> mlua::Error {
    mlua::Error::external(lua::Raised { msg: format!("ERR {msg}"), ignore_stats: false })
}

/// Compiles `body` and runs it with the library API; returns the
/// functions it registered, or Redis's error text.
fn register(vm: &lua::Vm, body: &[u8]) -> Result<Vec<Function>, String> {
    let lua = &vm.lua;
    let chunk = lua
        .load(body)
        .set_name(lua::FUNCTION_CHUNK_NAME)
        .set_mode(ChunkMode::Text)
        .set_environment(vm.env.clone())
        .into_function()
        .map_err(|e| {
            let msg = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                e => e.to_string(),
            };
            format!("Error compiling function: {msg}")
        })?;
    let registered: RefCell<Vec<Function>> = RefCell::new(Vec::new());
    let started = Instant::now();
    let result = lua.scope(|scope| {
        let reg = scope.create_function(|lua, args: MultiValue| {
            let f = register_args(lua, &args)?;
            if !valid_name(&f.name) {
                return Err(raise(BAD_NAME));
            }
            let mut list = registered.try_borrow_mut().map_err(|_| mlua::Error::RecursiveMutCallback)?;
            if list.iter().any(|g| g.name == f.name) {
                return Err(raise("Function already exists in the library"));
            }
            list.push(f);
            Ok(())
        })?;
        vm.state.raw_set("register", reg)?;
        vm.state.raw_set("library", vm.library.clone())?;
        lua.set_hook(mlua::HookTriggers::new().every_nth_instruction(100_000), move |lua, _| {
            if started.elapsed() <= LOAD_TIMEOUT {
                return Ok(mlua::VmState::Continue);
            }
            lua.set_hook(mlua::HookTriggers::new().every_line(), |_, _| Err(raise("FUNCTION LOAD timeout")));
            Err(raise("FUNCTION LOAD timeout"))
        });
        let out = vm.runner.call::<(bool, Value)>(chunk);
        lua.remove_hook();
        vm.state.raw_set("register", Value::Nil)?;
        vm.state.raw_set("library", Value::Nil)?;
        out
    });
    let msg = match result {
        Ok((true, _)) => {
            let functions = registered.into_inner();
            if functions.is_empty() {
                return Err("No functions registered".into());
            }
            return Ok(functions);
        }
        Ok((false, Value::Table(t))) => lua::error_info(&t).msg,
        Ok((false, v)) => format!("ERR {}", v.to_string().unwrap_or_default()),
        Err(e) => format!("ERR {e}"),
    };
    Err(format!("Error registering functions: {msg}"))
}

/// The string Lua sees in a value (strings and numbers), as `lua_tostring`.
fn lua_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Number(n) => Some(resp::num::format_f64_g17(*n)),
        _ => None,
    }
}

/// Reads `redis.register_function`'s arguments: `(name, callback)` or one
/// table with function_name, callback, description, flags.
fn register_args(lua: &mlua::Lua, args: &MultiValue) -> mlua::Result<Function> {
    let store = |f: &mlua::Function| lua.create_registry_value(f.clone());
    match args.len() {
        2 => {
            let name = lua_text(&args[0]).ok_or_else(|| raise("first argument to redis.register_function must be a string"))?;
            let Value::Function(f) = &args[1] else {
                return Err(raise("second argument to redis.register_function must be a function"));
            };
            Ok(Function { name, desc: None, flags: 0, callback: store(f)? })
        }
        1 => {
            let Value::Table(t) = &args[0] else {
                return Err(raise(
                    "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
                ));
            };
            let (mut name, mut desc, mut callback, mut flags) = (None, None, None, 0);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let key = lua_text(&k).ok_or_else(|| raise("named argument key given to redis.register_function is not a string"))?;
                match key.to_ascii_lowercase().as_str() {
                    "function_name" => {
                        name = Some(lua_text(&v).ok_or_else(|| raise("function_name argument given to redis.register_function must be a string"))?)
                    }
                    "description" => {
                        let d = lua_text(&v).ok_or_else(|| raise("description argument given to redis.register_function must be a string"))?;
                        desc = Some(d.into_bytes());
                    }
                    "callback" => match &v {
                        Value::Function(f) => callback = Some(store(f)?),
                        _ => return Err(raise("callback argument given to redis.register_function must be a function")),
                    },
                    "flags" => {
                        let Value::Table(list) = &v else {
                            return Err(raise("flags argument to redis.register_function must be a table representing function flags"));
                        };
                        for i in 1.. {
                            let item: Value = list.raw_get(i)?;
                            if item.is_nil() {
                                break;
                            }
                            let bit = lua_text(&item).and_then(|s| NAMES.iter().find(|(_, n)| n.eq_ignore_ascii_case(&s)).map(|(b, _)| *b));
                            flags |= bit.ok_or_else(|| raise("unknown flag given"))?;
                        }
                    }
                    _ => return Err(raise("unknown argument given to redis.register_function")),
                }
            }
            let name = name.ok_or_else(|| raise("redis.register_function must get a function name argument"))?;
            let callback = callback.ok_or_else(|| raise("redis.register_function must get a callback argument"))?;
            Ok(Function { name, desc, flags, callback })
        }
        _ => Err(raise("wrong number of arguments to redis.register_function")),
    }
}

/// FCALL.
pub fn fcall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    fcall_generic(ctx, args, "fcall", false)
}

/// FCALL_RO.
pub fn fcall_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    fcall_generic(ctx, args, "fcall_ro", true)
}

fn fcall_generic(ctx: &mut Ctx, args: &[Vec<u8>], cmd: &'static str, ro: bool) -> CmdResult {
    // Fed here, so it shows before the commands the function runs.
    if !ctx.srv.monitors.is_empty() {
        crate::exec::feed_monitors(ctx.srv, ctx.client, args);
    }
    let fns = &ctx.srv.scripting.functions;
    let Some(f) = fns.lookup(&args[1]) else {
        return Err(CmdError::err("Function not found"));
    };
    let numkeys = resp::num::parse_i64(&args[2]).ok_or_else(|| CmdError::err("Bad number of keys provided"))?;
    let numkeys = check_numkeys(numkeys, args)?;
    let vm = fns.vm.clone();
    let func: mlua::Function = vm.lua.registry_value(&f.callback).map_err(|_| CmdError::err("Function not found"))?;
    let call = Call { cmd, label: f.name.clone(), flags: f.flags, ro, argv: args, numkeys, function: true };
    run_script(ctx, &vm, func, call)
}

/// The FUNCTION container.
pub fn container() -> Spec {
    let acl: &'static [&'static str] = &["slow", "scripting"];
    let wacl: &'static [&'static str] = &["write", "slow", "scripting"];
    cmd_container(
        "function",
        vec![
            spec("load", -3, NOSCRIPT | WRITE | DENYOOM, NO_KEYS, function_load).acl(wacl).doc("Creates a library.", "7.0.0"),
            spec("delete", 3, NOSCRIPT | WRITE, NO_KEYS, function_delete).acl(wacl).doc("Deletes a library and its functions.", "7.0.0"),
            spec("flush", -2, NOSCRIPT | WRITE, NO_KEYS, function_flush).acl(wacl).doc("Deletes all libraries and functions.", "7.0.0"),
            spec("list", -2, NOSCRIPT, NO_KEYS, function_list).acl(acl).doc("Returns information about all libraries.", "7.0.0"),
            spec("dump", 2, NOSCRIPT, NO_KEYS, function_dump).acl(acl).doc("Dumps all libraries into a serialized binary payload.", "7.0.0"),
            spec("restore", -3, NOSCRIPT | WRITE | DENYOOM, NO_KEYS, function_restore)
                .acl(wacl)
                .doc("Restores all libraries from a payload.", "7.0.0"),
            spec("stats", 2, NOSCRIPT | ALLOW_BUSY, NO_KEYS, function_stats)
                .acl(acl)
                .doc("Returns information about a function during execution.", "7.0.0"),
            spec("kill", 2, NOSCRIPT | ALLOW_BUSY, NO_KEYS, function_kill).acl(acl).doc("Terminates a function during execution.", "7.0.0"),
            spec("help", 2, LOADING | STALE, NO_KEYS, function_help).acl(acl).doc("Returns helpful text about the different subcommands.", "7.0.0"),
        ],
    )
    .group("scripting")
    .doc("A container for function commands.", "7.0.0")
}

fn function_load(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut replace = false;
    let code_at = args.len() - 1;
    for a in &args[2..code_at] {
        if !is(a, "replace") {
            return Err(CmdError::err(format!("Unknown option given: {}", String::from_utf8_lossy(a))));
        }
        replace = true;
    }
    let name = ctx.srv.scripting.functions.load(&args[code_at], replace).map_err(CmdError::err)?;
    ctx.srv.dirty += 1;
    ctx.out().bulk(name.as_bytes());
    Ok(())
}

fn function_delete(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    if ctx.srv.scripting.functions.unlink(&name).is_none() {
        return Err(CmdError::err("Library not found"));
    }
    ctx.srv.dirty += 1;
    ctx.out().ok();
    Ok(())
}

fn function_flush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let lazy = match args.get(2) {
        None => ctx.srv.config.get("lazyfree-lazy-user-flush") == Some("yes"),
        Some(_) if args.len() > 3 => return Err(subcommand_syntax("flush")),
        Some(a) if is(a, "async") => true,
        Some(a) if is(a, "sync") => false,
        _ => return Err(CmdError::err("FUNCTION FLUSH only supports SYNC|ASYNC option")),
    };
    // A fresh interpreter frees everything the libraries left behind. The
    // old one is not Send, so it is dropped here; a flush Redis would hand
    // to its freeing thread is still counted as one (functions + engine).
    let vm = ctx.srv.scripting.function_vm();
    let old = std::mem::replace(&mut ctx.srv.scripting.functions, Functions::new(vm));
    if lazy && old.functions() > crate::lazyfree::THRESHOLD {
        ctx.srv.lazyfree.count_freed(old.functions() as u64 + 1);
    }
    drop(old);
    ctx.srv.dirty += 1;
    ctx.out().ok();
    Ok(())
}

fn subcommand_syntax(sub: &str) -> CmdError {
    CmdError::err(format!("unknown subcommand or wrong number of arguments for '{sub}'. Try FUNCTION HELP."))
}

fn function_list(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut with_code, mut pattern) = (false, None);
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if !with_code && is(a, "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(a, "libraryname") {
            i += 1;
            pattern = Some(args.get(i).ok_or_else(|| CmdError::err("library name argument was not given"))?);
        } else {
            return Err(CmdError::err(format!("Unknown argument {}", String::from_utf8_lossy(a))));
        }
        i += 1;
    }
    let fns = &ctx.srv.scripting.functions;
    let libs: Vec<(&String, &Library)> =
        fns.libraries.iter().filter(|(n, _)| pattern.is_none_or(|p| crate::glob::matches(p, n.as_bytes(), true))).collect();
    let out = &mut ctx.client.reply;
    out.array(libs.len());
    for (name, lib) in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(name.as_bytes());
        out.bulk(b"engine");
        out.bulk(ENGINE.as_bytes());
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for f in &lib.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.desc {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names: Vec<&str> = NAMES.iter().filter(|(b, _)| f.flags & b != 0).map(|(_, n)| *n).collect();
            out.set(names.len());
            for n in names {
                out.simple(n);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}

fn function_dump(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let fns = &ctx.srv.scripting.functions;
    let payload = storage::rdb::function_payload(fns.libraries.values().map(|l| l.code.as_slice()));
    ctx.out().bulk(&payload);
    Ok(())
}

fn function_restore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 4 {
        return Err(subcommand_syntax("restore"));
    }
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy = match args.get(3) {
        None => Policy::Append,
        Some(a) if is(a, "append") => Policy::Append,
        Some(a) if is(a, "replace") => Policy::Replace,
        Some(a) if is(a, "flush") => Policy::Flush,
        Some(_) => return Err(CmdError::err("Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")),
    };
    let check_crc = ctx.srv.config.get("skip-checksum-validation").is_none_or(|v| v != "yes");
    let body = storage::rdb::verify_payload(&args[2], check_crc).map_err(|_| CmdError::err("DUMP payload version or checksum are wrong"))?;
    let codes = storage::rdb::function_codes(body).map_err(CmdError::err)?;
    let engine = &mut ctx.srv.scripting;
    // The payload's libraries load into a set of their own first (in the
    // interpreter they will run in), then join the current ones.
    let vm = if policy == Policy::Flush { engine.function_vm() } else { engine.functions.vm.clone() };
    let mut staged = Functions::new(vm);
    for code in &codes {
        staged.load(code, false).map_err(CmdError::err)?;
    }
    if policy == Policy::Flush {
        engine.functions = staged;
    } else {
        join(&mut engine.functions, staged, policy == Policy::Replace).map_err(CmdError::err)?;
    }
    ctx.srv.dirty += 1;
    ctx.out().ok();
    Ok(())
}

/// Moves `src`'s libraries into `dst`. A name already in `dst` is an error
/// unless `replace`, which drops the old library; a function name that
/// stays taken is an error. On error `dst` is as it was.
fn join(dst: &mut Functions, src: Functions, replace: bool) -> Result<(), String> {
    let mut old = Vec::new();
    let mut result = Ok(());
    for name in src.libraries.keys() {
        if dst.libraries.contains_key(name) {
            if !replace {
                result = Err(format!("Library {name} already exists"));
                break;
            }
            if let Some(lib) = dst.unlink(name) {
                old.push((name.clone(), lib));
            }
        }
    }
    if result.is_ok() {
        if let Some(f) = src.libraries.values().find_map(|l| dst.collision(l)) {
            result = Err(format!("Function {f} already exists"));
        }
    }
    if result.is_err() {
        for (name, lib) in old {
            dst.link(name, lib);
        }
        return result;
    }
    for (name, lib) in src.libraries {
        dst.link(name, lib);
    }
    Ok(())
}

fn function_stats(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let engine = &ctx.srv.scripting;
    if engine.running.is_some_and(|r| !r.function) {
        return Err(CmdError::Custom(engine.busy_error().into()));
    }
    let fns = &engine.functions;
    let running = fns.running.clone();
    let (libs, count) = (fns.libraries(), fns.functions());
    let out = &mut ctx.client.reply;
    out.map(2);
    out.bulk(b"running_script");
    match running {
        None => out.null(),
        Some((name, argv, started)) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(name.as_bytes());
            out.bulk(b"command");
            out.array(argv.len());
            for a in &argv {
                out.bulk(a);
            }
            out.bulk(b"duration_ms");
            out.int(started.elapsed().as_millis() as i64);
        }
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(ENGINE.as_bytes());
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libs as i64);
    out.bulk(b"functions_count");
    out.int(count as i64);
    Ok(())
}

fn function_kill(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    super::kill(ctx, true)
}

fn function_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    crate::commands::introspection::help_reply(
        ctx,
        "function",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fns() -> Functions {
        Functions::new(lua::new_vm(|_| true).expect("vm"))
    }

    #[test]
    fn metadata_errors() {
        assert_eq!(parse_metadata(b"return 1").err().as_deref(), Some("Missing library metadata"));
        assert_eq!(parse_metadata(b"#!lua name=x").err().as_deref(), Some("Invalid library metadata"));
        assert_eq!(parse_metadata(b"#!lua name=x foo=bar\n").err().as_deref(), Some("Invalid metadata value given: foo=bar"));
        assert_eq!(parse_metadata(b"#!lua\n").err().as_deref(), Some("Library name was not given"));
        assert_eq!(
            parse_metadata(b"#!lua name=a NAME=b\n").err().as_deref(),
            Some("Invalid metadata value, name argument was given multiple times")
        );
        let (name, engine, body) = parse_metadata(b"#!lua name=\"foo\"\nx").expect("ok");
        assert_eq!((name.as_str(), engine.as_str(), body), ("foo", "lua", &b"\nx"[..]));
    }

    #[test]
    fn load_registers_and_rejects() {
        let mut f = fns();
        let code = b"#!lua name=lib\nredis.register_function('f1', function() return 1 end)\nredis.register_function{function_name='F2', callback=function() return 2 end, flags={'no-writes'}}";
        assert_eq!(f.load(code, false), Ok("lib".into()));
        assert_eq!((f.libraries(), f.functions()), (1, 2));
        assert_eq!(f.flags_of(b"f2"), Some(super::super::script_flags::NO_WRITES));
        assert_eq!(f.load(code, false), Err("Library 'lib' already exists".into()));
        assert_eq!(f.load(b"#!lua name=other\nredis.register_function('f1', function() end)", false), Err("Function f1 already exists".into()));
        assert_eq!(f.load(b"#!lua name=e\nlocal x = 1", false), Err("No functions registered".into()));
        let e = f.load(b"#!lua name=e\nredis.call('ping')", false).unwrap_err();
        assert!(e.contains("Script attempted to access nonexistent global variable 'call'"), "{e}");
        let e = f.load(b"#!lua name=e\nredis.register_function('a b', function() end)", false).unwrap_err();
        assert_eq!(e, format!("Error registering functions: ERR {BAD_NAME}"));
        // A failed replace keeps the old library.
        assert!(f.load(b"#!lua name=lib\nbad code", true).unwrap_err().starts_with("Error compiling function"));
        assert_eq!(f.functions(), 2);
    }
}
