//! Function libraries: the data behind FUNCTION and FCALL.
//!
//! A library is Lua source with a `#!lua name=<lib>` first line. Loading
//! runs it once in the functions' own interpreter with only the library
//! API visible (`redis.register_function`, `redis.log`, the version), which
//! the prelude swaps in through `state.library`; each registered callback
//! is kept in the Lua registry (`RegistryKey`, not a handle on mlua's
//! bounded stack).
//!
//! Libraries are kept by name (case-sensitive, as Redis), functions by
//! lowercased name (FCALL is case-insensitive). A load builds the whole
//! library before linking it, so a failed load or restore changes nothing.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use mlua::{ChunkMode, MultiValue, RegistryKey, Value};

use super::lua;
use super::run::script_flags::NAMES;

/// The one engine, as FUNCTION LIST and STATS name it.
pub(crate) const ENGINE: &str = "LUA";
/// How long a library's load run may take.
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);
pub(crate) const BAD_NAME: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// A registered function.
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) desc: Option<Vec<u8>>,
    pub(crate) flags: u32,
    pub(crate) callback: RegistryKey,
}

/// A loaded library.
pub(crate) struct Library {
    /// The whole source FUNCTION LOAD got, shebang included.
    pub(crate) code: Vec<u8>,
    /// In registration order.
    pub(crate) functions: Vec<Function>,
}

/// The libraries and their interpreter.
pub struct Functions {
    pub(crate) vm: lua::Vm,
    pub(crate) libraries: BTreeMap<String, Library>,
    /// Lowercased function name -> library name.
    index: HashMap<String, String>,
    /// Libraries compiled so far (paces garbage collection).
    loads: u64,
}

impl Functions {
    /// No libraries, in interpreter `vm`.
    pub fn new(vm: lua::Vm) -> Functions {
        Functions { vm, libraries: BTreeMap::new(), index: HashMap::new(), loads: 0 }
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

    pub(crate) fn lookup(&self, name: &[u8]) -> Option<&Function> {
        let key = String::from_utf8_lossy(name).to_ascii_lowercase();
        let lib = self.libraries.get(self.index.get(&key)?)?;
        lib.functions.iter().find(|f| f.name.eq_ignore_ascii_case(&key))
    }

    pub(crate) fn unlink(&mut self, name: &str) -> Option<Library> {
        let lib = self.libraries.remove(name)?;
        for f in &lib.functions {
            self.index.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    pub(crate) fn link(&mut self, name: String, lib: Library) {
        for f in &lib.functions {
            self.index.insert(f.name.to_ascii_lowercase(), name.clone());
        }
        self.libraries.insert(name, lib);
    }

    /// The first function of `lib` whose name is taken, if any.
    fn collision<'a>(&self, lib: &'a Library) -> Option<&'a str> {
        lib.functions.iter().find(|f| self.index.contains_key(&f.name.to_ascii_lowercase())).map(|f| f.name.as_str())
    }

    /// `load` with `redis.log` (`server.log`) writing to `log` while the
    /// library's code runs, as FUNCTION LOAD does.
    pub(crate) fn load_logging(&mut self, code: &[u8], replace: bool, log: crate::log::Log) -> Result<String, String> {
        lua::lend_log(&self.vm, Some(log)).map_err(|e| e.to_string())?;
        let out = self.load(code, replace);
        let _ = lua::lend_log(&self.vm, None);
        out
    }

    /// FUNCTION LOAD's work: parses, runs and links `code`; returns the
    /// library name, or Redis's error text (without "ERR ").
    pub(crate) fn load(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
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
        let functions = register(&self.vm, body);
        // Loading leaves garbage (the chunk, its prototype, the load-time
        // closures and hook); a collection step every few loads keeps the
        // interpreter from growing with it (more often than for scripts:
        // a load leaves more behind than a script's compilation).
        self.loads += 1;
        if self.loads.is_multiple_of(10) {
            let _ = self.vm.lua.gc_step_kbytes(50);
        }
        let functions = functions?;
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
    let sb = vm.sandbox().map_err(|e| format!("Error compiling function: {e}"))?;
    let chunk = lua
        .load(body)
        .set_name(lua::FUNCTION_CHUNK_NAME)
        .set_mode(ChunkMode::Text)
        .set_environment(sb.env.clone())
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
        sb.state.raw_set("register", reg)?;
        sb.state.raw_set("library", sb.library.clone())?;
        lua.set_hook(mlua::HookTriggers::new().every_nth_instruction(100_000), move |lua, _| {
            if started.elapsed() <= LOAD_TIMEOUT {
                return Ok(mlua::VmState::Continue);
            }
            lua.set_hook(mlua::HookTriggers::new().every_line(), |_, _| Err(raise("FUNCTION LOAD timeout")));
            Err(raise("FUNCTION LOAD timeout"))
        });
        let out = sb.runner.call::<(bool, Value)>(chunk);
        lua.remove_hook();
        sb.state.raw_set("register", Value::Nil)?;
        sb.state.raw_set("library", Value::Nil)?;
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

pub(crate) fn join(dst: &mut Functions, src: Functions, replace: bool) -> Result<(), String> {
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
        assert_eq!(f.flags_of(b"f2"), Some(super::super::run::script_flags::NO_WRITES));
        assert_eq!(f.load(code, false), Err("Library 'lib' already exists".into()));
        assert_eq!(f.load(b"#!lua name=other\nredis.register_function('f1', function() end)", false), Err("Function f1 already exists".into()));
        assert_eq!(f.load(b"#!lua name=e\nlocal x = 1", false), Err("No functions registered".into()));
        // Valkey's `server` global is the same load-time API.
        assert_eq!(f.load(b"#!lua name=v\nlocal same = server == redis or server.differ.x\nserver.register_function{function_name='v1', callback=function() return 1 end}", false), Ok("v".into()));
        let e = f.load(b"#!lua name=e\nserver.call('ping')", false).unwrap_err();
        assert!(e.contains("attempt to call field 'call'") || e.contains("nonexistent"), "{e}");
        let e = f.load(b"#!lua name=e\nredis.call('ping')", false).unwrap_err();
        assert!(e.contains("Script attempted to access nonexistent global variable 'call'"), "{e}");
        let e = f.load(b"#!lua name=e\nredis.register_function('a b', function() end)", false).unwrap_err();
        assert_eq!(e, format!("Error registering functions: ERR {BAD_NAME}"));
        // A failed replace keeps the old library.
        assert!(f.load(b"#!lua name=lib\nbad code", true).unwrap_err().starts_with("Error compiling function"));
        assert_eq!(f.functions(), 3, "lib's two and v's one");
    }
}
