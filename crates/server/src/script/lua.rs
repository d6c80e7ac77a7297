//! The Lua side of scripting: building the sandboxed interpreter, and the
//! conversions between RESP replies and Lua values that Redis documents.
//!
//! Conversions are byte-level on purpose: a command run from a script writes
//! its reply into the script client's buffer exactly as it would for a
//! socket, and `reply_to_lua` parses those bytes, so every command behaves
//! the same whoever calls it. The other way, `lua_to_reply` writes a Lua
//! value through the caller's `Reply`, which picks RESP2 or RESP3 forms.
//! Tables are read raw (no metamethods), as Redis does.

use mlua::{Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use std::cell::OnceCell;
use std::rc::Rc;
use resp::Reply;

/// Chunk name of user scripts; errors read `user_script:LINE: ...`.
pub const CHUNK_NAME: &str = "@user_script";
/// Chunk name of function libraries.
pub const FUNCTION_CHUNK_NAME: &str = "@user_function";

/// Nesting depth at which a returned table is cut with Redis's error (a
/// table that contains itself would otherwise recurse forever).
const MAX_DEPTH: usize = 1000;

/// The interpreter, and its sandbox once something needs it. Clones share
/// the interpreter.
///
/// The sandbox (the prelude, the natives, the `bit` library) is built on
/// first use, so an interpreter that nothing has loaded into holds only
/// Lua's own libraries: the functions interpreter after FUNCTION FLUSH,
/// and the EVAL one before the first script, cost about 24 KB, not 60.
#[derive(Clone)]
pub struct Vm {
    /// The interpreter.
    pub lua: Lua,
    /// The real globals table (KEYS and ARGV are written here).
    pub globals: Table,
    sandbox: Rc<OnceCell<Sandbox>>,
    acl_check: AclCheck,
}

/// `redis.acl_check_cmd`'s answer for an argv: true if the command exists.
type AclCheck = Rc<dyn Fn(&[Vec<u8>]) -> bool>;

/// What scripts run in: the environment they see, the table of run-scoped
/// native functions, and the runner that calls a compiled script under the
/// error handler.
pub struct Sandbox {
    /// The read-only proxy scripts see as their globals.
    pub env: Table,
    /// Run-scoped natives: `call`, `setresp`.
    pub state: Table,
    /// `run(f [, keys, args])`: xpcall with Redis's error handler;
    /// returns ok, value.
    pub runner: mlua::Function,
    /// The real `redis` table (call and pcall are set here per run).
    pub redis: Table,
    /// Globals of a function library's load run (set as `state.library`
    /// while it runs).
    pub library: Table,
}

impl Vm {
    /// The sandbox, built now if this is its first use.
    pub fn sandbox(&self) -> mlua::Result<&Sandbox> {
        if let Some(s) = self.sandbox.get() {
            return Ok(s);
        }
        let s = build_sandbox(&self.lua, &self.globals, self.acl_check.clone())?;
        // Setting up leaves garbage (the prelude's main chunk).
        self.lua.gc_collect()?;
        Ok(self.sandbox.get_or_init(|| s))
    }
}

/// An error `redis.call` raises: a Lua error table in Redis, a native
/// error object here (see `unwrap`), so that the raising frame is native.
#[derive(Debug)]
pub struct Raised {
    /// `CODE message`.
    pub msg: String,
    /// Already counted in the error statistics.
    pub ignore_stats: bool,
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Raised {}

/// Builds a fresh interpreter; its sandbox comes on first use
/// (`Vm::sandbox`). `acl_check` answers `redis.acl_check_cmd` for an argv
/// (true if the command exists).
pub fn new_vm(acl_check: impl Fn(&[Vec<u8>]) -> bool + 'static) -> mlua::Result<Vm> {
    let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS, LuaOptions::default())?;
    let globals = lua.globals();
    lua.gc_collect()?;
    Ok(Vm { lua, globals, sandbox: Rc::new(OnceCell::new()), acl_check: Rc::new(acl_check) })
}

/// Runs the prelude in `lua`: the sandboxed globals, the `redis` API.
fn build_sandbox(lua: &Lua, globals: &Table, acl_check: AclCheck) -> mlua::Result<Sandbox> {
    globals.set("bit", bit_library(lua)?)?;
    let native = lua.create_table()?;
    // The bundled libraries, built on a script's first use of each (the
    // prelude's `lazy`): an interpreter that never uses them stays small.
    native.set("cjson", lua.create_function(|lua, ()| super::cjson::library(lua))?)?;
    native.set("cmsgpack", lua.create_function(|lua, ()| super::cmsgpack::library(lua))?)?;
    native.set("struct", lua.create_function(|lua, ()| super::lstruct::library(lua))?)?;
    native.set(
        "sha1hex",
        lua.create_function(|_, v: Value| {
            let bytes = match &v {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => resp::num::format_f64_g17(*n).into_bytes(),
                _ => Vec::new(),
            };
            Ok(sha1_smol::Sha1::from(bytes).digest().to_string())
        })?,
    )?;
    native.set(
        "acl_check_cmd",
        lua.create_function(move |lua, args: MultiValue| match lua_args(&args) {
            Err(msg) => Ok((Value::Table(err_table(lua, msg, false)?), true)),
            Ok(argv) if acl_check(&argv) => Ok((Value::Boolean(true), false)),
            Ok(_) => Ok((Value::Table(err_table(lua, "ERR Invalid command passed to redis.acl_check_cmd()", false)?), true)),
        })?,
    )?;
    // A C function that runs a prelude function: `return f(...)` in a
    // script is a tail call, which drops the script's frame when `f` is Lua
    // but not when it is C (Lua 5.1 calls a C function before leaving the
    // caller), so that errors name the script's line as Redis's C API does.
    // `guarded` is `function(...) return pcall(impl, ...) end`: no Lua error
    // crosses into Rust, where an error table's fields would be lost.
    native.set(
        "cfunction",
        lua.create_function(|lua, guarded: mlua::Function| {
            lua.create_function(move |_, args: MultiValue| {
                let mut out = guarded.call::<MultiValue>(args)?;
                if matches!(out.pop_front(), Some(Value::Boolean(true))) {
                    return Ok(out);
                }
                let e = out.pop_front().unwrap_or(Value::Nil);
                if let Value::Error(e) = e {
                    return Err(*e);
                }
                if let Value::Table(t) = &e {
                    if let Ok(Value::String(m)) = t.raw_get::<Value>("err") {
                        return Err(mlua::Error::external(Raised { msg: m.to_string_lossy(), ignore_stats: false }));
                    }
                }
                // Anything else (a string, as luaL_error raises) is a plain message.
                let msg = e.to_string().ok().filter(|_| !matches!(e, Value::Table(_) | Value::Nil));
                Err(mlua::Error::external(super::libutil::LibError(msg.unwrap_or_else(|| "unknown error".into()))))
            })
        })?,
    )?;
    native.set(
        "where",
        lua.create_function(|lua, ()| {
            // Level 0 is this function, 1 the handler; the first frame
            // that is neither C nor the prelude is the user's.
            for level in 1..64 {
                let Some(d) = lua.inspect_stack(level) else { break };
                let src = d.source().source.map(|s| s.into_owned()).unwrap_or_default();
                if src == "=[C]" || src == "=redis" {
                    continue;
                }
                return Ok((Some(src), Some(d.curr_line().to_string())));
            }
            Ok((None, None))
        })?,
    )?;
    native.set(
        "unwrap",
        lua.create_function(|lua, v: Value| {
            let Value::Error(e) = v else { return Ok(v) };
            // A library's error is a plain message, as a C library's is.
            if let Some(l) = e.chain().find_map(|c| c.downcast_ref::<super::libutil::LibError>()) {
                return Ok(Value::String(lua.create_string(&l.0)?));
            }
            let t = match e.chain().find_map(|c| c.downcast_ref::<Raised>()) {
                Some(r) => err_table(lua, &r.msg, r.ignore_stats)?,
                None => err_table(lua, &format!("ERR {e}"), false)?,
            };
            Ok(Value::Table(t))
        })?,
    )?;
    native.set("version", crate::REDIS_VERSION)?;
    native.set("version_num", version_num(crate::REDIS_VERSION))?;
    let (env, state, runner, redis, library): (Table, Table, mlua::Function, Table, Table) =
        lua.load(include_str!("prelude.lua")).set_name("=redis").call((globals.clone(), native))?;
    Ok(Sandbox { env, state, runner, redis, library })
}

/// Lua BitOp's `bit` library, which Redis bundles: 32-bit operations on
/// numbers, results as signed 32-bit integers.
fn bit_library(lua: &Lua) -> mlua::Result<Table> {
    fn tobit(n: f64) -> i32 {
        if !n.is_finite() {
            return 0;
        }
        n.round_ties_even().rem_euclid(4_294_967_296.0) as u32 as i32
    }
    let t = lua.create_table()?;
    t.set("tobit", lua.create_function(|_, x: f64| Ok(tobit(x)))?)?;
    t.set("bnot", lua.create_function(|_, x: f64| Ok(!tobit(x)))?)?;
    t.set("bswap", lua.create_function(|_, x: f64| Ok(tobit(x).swap_bytes()))?)?;
    type Fold = fn(i32, i32) -> i32;
    for (name, op) in [("band", (|a, b| a & b) as Fold), ("bor", |a, b| a | b), ("bxor", |a, b| a ^ b)] {
        t.set(
            name,
            lua.create_function(move |_, (x, rest): (f64, mlua::Variadic<f64>)| Ok(rest.iter().fold(tobit(x), |a, &b| op(a, tobit(b)))))?,
        )?;
    }
    type Shift = fn(i32, u32) -> i32;
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |x, n| x.wrapping_shl(n)),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| x.rotate_left(n)),
        ("ror", |x, n| x.rotate_right(n)),
    ];
    for (name, op) in shifts {
        t.set(name, lua.create_function(move |_, (x, n): (f64, f64)| Ok(op(tobit(x), (tobit(n) & 31) as u32)))?)?;
    }
    t.set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| {
            let n = n.map_or(8, tobit);
            let (upper, width) = (n < 0, n.unsigned_abs().min(8) as usize);
            let v = (tobit(x) as u32 as u64) & ((1u64 << (4 * width)) - 1);
            Ok(if upper { format!("{v:0width$X}") } else { format!("{v:0width$x}") })
        })?,
    )?;
    Ok(t)
}

/// Lends `log` to `redis.log` (`server.log`) until lent again; None takes
/// it back, and the calls log nothing. Levels 0-3 are Redis's LOG_DEBUG ..
/// LOG_WARNING (checked by the prelude).
pub fn lend_log(vm: &Vm, log: Option<crate::log::Log>) -> mlua::Result<()> {
    use crate::log::Level;
    let Some(log) = log else {
        // Taking the log back: an interpreter whose sandbox was never built
        // has none to take.
        return vm.sandbox.get().map_or(Ok(()), |sb| sb.state.raw_set("log", Value::Nil));
    };
    let state = &vm.sandbox()?.state;
    let f = vm.lua.create_function(move |_, (level, msg): (i64, mlua::String)| {
        let level = match level {
            0 => Level::Debug,
            1 => Level::Verbose,
            2 => Level::Notice,
            _ => Level::Warning,
        };
        log.log(level, &msg.to_string_lossy());
        Ok(())
    })?;
    state.raw_set("log", f)
}

fn version_num(v: &str) -> i64 {
    v.split('.').take(3).fold(0, |acc, p| acc * 256 + p.parse::<i64>().unwrap_or(0))
}

/// An error table `{err = "CODE msg"}`; `ignore_stats` marks errors whose
/// statistics were already counted when the command replied.
pub fn err_table(lua: &Lua, msg: &str, ignore_stats: bool) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", msg.trim_matches(['\r', '\n']))?;
    if ignore_stats {
        t.raw_set("ignore_error_stats_update", true)?;
    }
    Ok(t)
}

/// Converts `redis.call` arguments to an argv: strings as they are,
/// numbers as integers when integral (else shortest round-trip form).
/// Errors carry Redis's message.
pub fn lua_args(args: &MultiValue) -> Result<Vec<Vec<u8>>, &'static str> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(i) => Ok(i.to_string().into_bytes()),
            Value::Number(n) => Ok(number_arg(*n)),
            _ => Err("ERR Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// A Lua number returned by a script, as Redis replies it: `(long long)` of
/// the double, truncated toward zero, and i64::MIN for NaN, the infinities
/// and numbers out of range, which is what that conversion gives on x86-64.
fn reply_integer(n: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if (-LIMIT..LIMIT).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

fn number_arg(n: f64) -> Vec<u8> {
    // Redis prints integers exactly when they fit comfortably in a long long.
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if n.fract() == 0.0 && (-LIMIT..=LIMIT).contains(&n) {
        (n as i64).to_string().into_bytes()
    } else {
        resp::num::format_f64_g17(n).into_bytes()
    }
}

/// Parses one RESP reply from `buf` at `*pos` into the Lua value Redis
/// documents: integers to numbers, bulk to strings, nil bulk/array to
/// false (RESP2) or nil (RESP3 null), status to `{ok=}`, error to `{err=}`,
/// RESP3 map/set/double/bool/big number/verbatim to their tables.
pub fn reply_to_lua(lua: &Lua, buf: &[u8], pos: &mut usize) -> mlua::Result<Value> {
    let bad = || mlua::Error::runtime("malformed reply");
    let start = *pos;
    let nl = buf.get(start..).ok_or_else(bad)?.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)? + start;
    let kind = *buf.get(start).ok_or_else(bad)?;
    let line = &buf[start + 1..nl];
    *pos = nl + 2;
    let num = |l: &[u8]| resp::num::parse_i64(l).ok_or_else(bad);
    let text = |l: &[u8]| lua.create_string(l);
    Ok(match kind {
        b'+' => {
            let t = lua.create_table()?;
            t.raw_set("ok", text(line)?)?;
            Value::Table(t)
        }
        b'-' => Value::Table(err_table(lua, &String::from_utf8_lossy(line), true)?),
        b':' => Value::Number(num(line)? as f64),
        b'$' | b'=' => {
            let n = num(line)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let end = pos.checked_add(n as usize).ok_or_else(bad)?;
            let body = buf.get(*pos..end).ok_or_else(bad)?;
            *pos = end + 2;
            if kind == b'$' {
                Value::String(text(body)?)
            } else {
                let (fmt, s) = (body.get(..3).ok_or_else(bad)?, body.get(4..).unwrap_or_default());
                let inner = lua.create_table()?;
                inner.raw_set("string", text(s)?)?;
                inner.raw_set("format", text(fmt)?)?;
                let t = lua.create_table()?;
                t.raw_set("verbatim_string", inner)?;
                Value::Table(t)
            }
        }
        b'*' | b'~' | b'%' | b'>' | b'|' => {
            let n = num(line)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table()?;
            match kind {
                b'~' => {
                    for _ in 0..n {
                        let k = reply_to_lua(lua, buf, pos)?;
                        t.raw_set(k, true)?;
                    }
                    wrap(lua, "set", t)?
                }
                b'%' => {
                    for _ in 0..n {
                        let k = reply_to_lua(lua, buf, pos)?;
                        let v = reply_to_lua(lua, buf, pos)?;
                        t.raw_set(k, v)?;
                    }
                    wrap(lua, "map", t)?
                }
                b'|' => {
                    // Attributes are not shown to scripts: skip them, then
                    // the value they annotate.
                    for _ in 0..2 * n {
                        reply_to_lua(lua, buf, pos)?;
                    }
                    return reply_to_lua(lua, buf, pos);
                }
                _ => {
                    for i in 1..=n {
                        t.raw_set(i, reply_to_lua(lua, buf, pos)?)?;
                    }
                    Value::Table(t)
                }
            }
        }
        b'_' => Value::Nil,
        b'#' => Value::Boolean(line == b"t"),
        b',' => {
            let s = std::str::from_utf8(line).map_err(|_| bad())?;
            let d = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => s.parse::<f64>().map_err(|_| bad())?,
            };
            let t = lua.create_table()?;
            t.raw_set("double", d)?;
            Value::Table(t)
        }
        b'(' => {
            let t = lua.create_table()?;
            t.raw_set("big_number", text(line)?)?;
            Value::Table(t)
        }
        _ => return Err(bad()),
    })
}

fn wrap(lua: &Lua, field: &str, inner: Table) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, inner)?;
    Ok(Value::Table(t))
}

/// An error a script returned or raised, as Redis extracts it.
pub struct ScriptError {
    /// `CODE message`, without the leading '-'.
    pub msg: String,
    /// Where it was raised (`@user_script`), if known.
    pub source: Option<String>,
    /// Line number, if known.
    pub line: Option<String>,
    /// The error was already counted in the error statistics.
    pub ignore_stats: bool,
}

/// Reads an error table (`err`, `source`, `line`, `ignore_error_stats_update`).
pub fn error_info(t: &Table) -> ScriptError {
    let s = |k: &str| match t.raw_get::<Value>(k) {
        Ok(Value::String(s)) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Ok(Value::Integer(i)) => Some(i.to_string()),
        Ok(Value::Number(n)) => Some(number_string(n)),
        _ => None,
    };
    ScriptError {
        msg: s("err").unwrap_or_default(),
        source: s("source"),
        line: s("line"),
        ignore_stats: matches!(t.raw_get::<Value>("ignore_error_stats_update"), Ok(Value::Boolean(true))),
    }
}

fn number_string(n: f64) -> String {
    String::from_utf8_lossy(&number_arg(n)).into_owned()
}

/// Writes the Lua value `v` as the script's reply. `script_resp3` is the
/// version the script selected with `redis.setresp` (it decides how
/// booleans are sent). An error table is not written: it is returned, for
/// the caller to reply with and count.
pub fn lua_to_reply(v: &Value, out: &mut Reply, script_resp3: bool) -> Option<ScriptError> {
    let mut first_err = None;
    write_value(v, out, script_resp3, 0, &mut first_err);
    first_err
}

fn write_value(v: &Value, out: &mut Reply, script_resp3: bool, depth: usize, top_err: &mut Option<ScriptError>) {
    if depth > MAX_DEPTH {
        out.error("ERR reached lua stack limit");
        return;
    }
    match v {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if script_resp3 {
                out.boolean(*b);
            } else if *b {
                out.int(1);
            } else {
                out.null();
            }
        }
        Value::Integer(i) => out.int(*i),
        Value::Number(n) => out.int(reply_integer(*n)),
        Value::Table(t) => write_table(t, out, script_resp3, depth, top_err),
        _ => out.null(),
    }
}

fn write_table(t: &Table, out: &mut Reply, script_resp3: bool, depth: usize, top_err: &mut Option<ScriptError>) {
    let field = |k: &str| t.raw_get::<Value>(k).unwrap_or(Value::Nil);
    if let Value::String(_) = field("err") {
        let e = error_info(t);
        if depth == 0 {
            *top_err = Some(e);
        } else {
            // Nested errors are plain error replies.
            out.error(&e.msg);
        }
        return;
    }
    if let Value::String(s) = field("ok") {
        out.simple(&String::from_utf8_lossy(&s.as_bytes()).replace(['\r', '\n'], " "));
        return;
    }
    if let Value::Number(_) | Value::Integer(_) = field("double") {
        let d = match field("double") {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => 0.0,
        };
        out.double(d);
        return;
    }
    if let Value::String(s) = field("big_number") {
        let b: Vec<u8> = s.as_bytes().iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect();
        if out.resp3 {
            out.raw(b"(");
            out.raw(&b);
            out.raw(b"\r\n");
        } else {
            out.bulk(&b);
        }
        return;
    }
    if let Value::Table(vt) = field("verbatim_string") {
        if let (Ok(Value::String(f)), Ok(Value::String(s))) = (vt.raw_get::<Value>("format"), vt.raw_get::<Value>("string")) {
            let (f, s) = (f.as_bytes(), s.as_bytes());
            if out.resp3 {
                out.raw(format!("={}\r\n", s.len() + 4).as_bytes());
                out.raw(&f[..f.len().min(3)]);
                out.raw(b":");
                out.raw(&s);
                out.raw(b"\r\n");
            } else {
                out.bulk(&s);
            }
            return;
        }
    }
    if let Value::Table(m) = field("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        out.map(pairs.len());
        for (k, v) in &pairs {
            write_value(k, out, script_resp3, depth + 1, top_err);
            write_value(v, out, script_resp3, depth + 1, top_err);
        }
        return;
    }
    if let Value::Table(s) = field("set") {
        let keys: Vec<Value> = s.pairs::<Value, Value>().filter_map(|p| p.ok().map(|p| p.0)).collect();
        out.set(keys.len());
        for k in &keys {
            write_value(k, out, script_resp3, depth + 1, top_err);
        }
        return;
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    out.array(items.len());
    for v in &items {
        write_value(v, out, script_resp3, depth + 1, top_err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm() -> Vm {
        new_vm(|_| true).expect("vm")
    }

    #[test]
    fn the_sandbox_is_built_on_first_use_and_shared_by_clones() {
        let vm = vm();
        let fresh = vm.lua.used_memory();
        // Redis's suite bounds a flushed functions interpreter at 40,000
        // bytes; Lua's own libraries are most of what is left.
        assert!(fresh < 30_000, "fresh interpreter: {fresh} bytes");
        let copy = vm.clone();
        let (ok, v) = eval(&copy, "return bit.band(7, 3)");
        assert!(ok && (matches!(v, Value::Integer(3)) || matches!(v, Value::Number(n) if n == 3.0)), "{v:?}");
        let built = vm.lua.used_memory();
        assert!(built > fresh + 10_000, "the prelude ran: {fresh} -> {built}");
        // The clone built it for both: the same environment table.
        assert_eq!(vm.sandbox().expect("sandbox").env, copy.sandbox().expect("sandbox").env);
        assert_eq!(vm.lua.used_memory(), built);
    }

    fn eval(vm: &Vm, src: &str) -> (bool, Value) {
        let sb = vm.sandbox().expect("sandbox");
        let f = vm.lua.load(src).set_name(CHUNK_NAME).set_environment(sb.env.clone()).into_function().expect("compile");
        sb.runner.call::<(bool, Value)>(f).expect("run")
    }

    fn err_msg(v: &Value) -> String {
        match v {
            Value::Table(t) => {
                let e = error_info(t);
                format!("{} {:?}:{:?}", e.msg, e.source, e.line)
            }
            _ => panic!("not a table"),
        }
    }

    #[test]
    fn bit_library_matches_lua_bitop() {
        let vm = vm();
        let (ok, v) = eval(&vm, "return {bit.band(0xff, 0x0f), bit.rshift(-1, 28), bit.arshift(-16, 2), bit.tohex(255), bit.tohex(-1, -4), bit.tobit(2^32 + 5), bit.bnot(0), bit.bor(1, 2, 4)}");
        assert!(ok);
        let mut out = Reply::new();
        lua_to_reply(&v, &mut out, false);
        assert_eq!(out.buf, b"*8\r\n:15\r\n:15\r\n:-4\r\n$8\r\n000000ff\r\n$4\r\nFFFF\r\n:5\r\n:-1\r\n:7\r\n");
    }

    #[test]
    fn sandbox_globals_are_protected() {
        let vm = vm();
        let (ok, e) = eval(&vm, "return a");
        assert!(!ok);
        assert_eq!(err_msg(&e), "ERR user_script:1: Script attempted to access nonexistent global variable 'a' Some(\"@user_script\"):Some(\"1\")");
        let (ok, e) = eval(&vm, "\nx = 1");
        assert!(!ok);
        assert_eq!(err_msg(&e), "ERR user_script:2: Attempt to modify a readonly table Some(\"@user_script\"):Some(\"2\")");
        for src in ["redis.call = 1", "setmetatable(_G, {})", "getmetatable(_G).__index = {}", "_G = {}", "string.x = 1"] {
            let (ok, e) = eval(&vm, src);
            assert!(!ok, "{src}");
            assert!(err_msg(&e).contains("Attempt to modify a readonly table"), "{src}: {}", err_msg(&e));
        }
        for name in ["print", "dofile", "loadfile", "io", "require"] {
            let (ok, e) = eval(&vm, &format!("return {name}"));
            assert!(!ok);
            assert!(err_msg(&e).contains(&format!("nonexistent global variable '{name}'")));
        }
        let (ok, v) = eval(&vm, "local n = 0 for k in pairs(os) do n = n + 1 end return n");
        assert!(ok);
        assert_eq!(v, Value::Integer(1));
    }

    #[test]
    fn server_is_valkeys_name_for_redis() {
        let vm = vm();
        let (ok, v) = eval(&vm, "return {server == redis, server.SERVER_NAME, server.SERVER_VERSION == redis.REDIS_VERSION, server.SERVER_VERSION_NUM == server.REDIS_VERSION_NUM, type(server.VALKEY_VERSION), server.LOG_WARNING, server.REPL_REPLICA}");
        assert!(ok);
        let mut out = Reply::new();
        lua_to_reply(&v, &mut out, false);
        assert_eq!(out.buf, b"*7\r\n:1\r\n$5\r\nredis\r\n:1\r\n:1\r\n$3\r\nnil\r\n:3\r\n:2\r\n");
        let (ok, e) = eval(&vm, "server.call = 1");
        assert!(!ok);
        assert!(err_msg(&e).contains("Attempt to modify a readonly table"));
        let (_, v) = eval(&vm, "return server.error_reply('My Error')");
        assert_eq!(err_msg(&v), "My Error None:None");
    }

    #[test]
    fn log_writes_through_the_lent_log() {
        let vm = vm();
        let path = std::env::temp_dir().join(format!("densekv-lua-log-{}", std::process::id()));
        let log = crate::log::Log { level: crate::log::Level::Verbose, file: Some(path.to_string_lossy().into_owned()), role: 'M', syslog: None };
        lend_log(&vm, Some(log)).expect("lend");
        let (ok, _) = eval(&vm, "server.log(server.LOG_WARNING, 'a', 1, {}, 'b'); redis.log(redis.LOG_DEBUG, 'hidden'); redis.log(1, 'verbose')");
        assert!(ok);
        lend_log(&vm, None).expect("take back");
        let (ok, _) = eval(&vm, "server.log(server.LOG_WARNING, 'not lent')");
        assert!(ok);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].ends_with(" # a 1  b"), "{text}");
        assert!(lines[1].ends_with(" - verbose"), "{text}");
        let (ok, e) = eval(&vm, "server.log(9, 'x')");
        assert!(!ok);
        assert!(err_msg(&e).starts_with("ERR Invalid log level."));
    }

    #[test]
    fn error_reply_helpers() {
        let vm = vm();
        let (_, v) = eval(&vm, "return redis.error_reply('My Error')");
        assert_eq!(err_msg(&v), "My Error None:None");
        let (_, v) = eval(&vm, "return redis.error_reply('-NOPE')");
        assert_eq!(err_msg(&v), "ERR NOPE None:None");
        let (_, v) = eval(&vm, "return redis.sha1hex('Pizza & Mandolino')");
        assert_eq!(v.as_str().map(|s| s.to_string()), Some("74822d82031af7493c20eefa13bd07ec4fada82f".to_string()));
        let (ok, e) = eval(&vm, "redis.sha1hex()");
        assert!(!ok);
        assert_eq!(err_msg(&e), "ERR wrong number of arguments Some(\"@user_script\"):Some(\"1\")");
    }

    #[test]
    fn resp_round_trip() {
        let vm = vm();
        let buf = b"*4\r\n:1\r\n$3\r\nfoo\r\n$-1\r\n+OK\r\n";
        let mut pos = 0;
        let v = reply_to_lua(&vm.lua, buf, &mut pos).expect("parse");
        assert_eq!(pos, buf.len());
        let mut out = Reply::new();
        assert!(lua_to_reply(&v, &mut out, false).is_none());
        // nil turned false, which truncates nothing but replies null.
        assert_eq!(out.buf, b"*4\r\n:1\r\n$3\r\nfoo\r\n$-1\r\n+OK\r\n");
        let mut pos = 0;
        let v = reply_to_lua(&vm.lua, b"%1\r\n$1\r\na\r\n,1.5\r\n", &mut pos).expect("parse");
        let mut out = Reply { resp3: true, ..Reply::new() };
        lua_to_reply(&v, &mut out, true);
        assert_eq!(out.buf, b"%1\r\n$1\r\na\r\n,1.5\r\n");
    }
}
