//! The scripting engine: the EVAL interpreter and its script cache, and the
//! function libraries with theirs. The event loop owns one and lends it to
//! dispatch as `command::Scripts` (through `Host`); the script layer gets
//! its own type back with [`engine`].
//!
//! One interpreter (`lua::Vm`) serves every client, as in Redis; compiled
//! scripts are cached by the SHA1 of their body.

use std::collections::{HashMap, VecDeque};

use mlua::ChunkMode;

use super::library::Functions;
use super::lua;
use super::run::script_flags::*;
use super::run::{new_vm, parse_shebang, sha1_hex};
use crate::command::flags::{DENYOOM, MAY_REPLICATE, STALE, WRITE};
use crate::command::{CmdError, CommandMap, Host, ScriptInfo, Scripts, Spec};

/// Scripts created by EVAL beyond this many are evicted oldest first
/// (SCRIPT LOAD'ed ones never are), as Redis does.
const EVAL_SCRIPTS_MAX: usize = 500;

pub(crate) const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// A cached script. Its compiled function lives in the Lua registry under
/// `f_<sha>` (as in Redis): an `mlua::Function` handle per script would
/// use a slot of mlua's bounded reference stack, and caches hold more
/// scripts than it has slots.
pub(crate) struct Script {
    pub(crate) body: Vec<u8>,
    pub(crate) flags: u32,
}

pub(crate) fn registry_name(sha: &str) -> String {
    format!("f_{sha}")
}

/// The interpreter and the script cache.
pub struct Engine {
    pub(crate) vm: lua::Vm,
    pub(crate) scripts: HashMap<String, Script>,
    /// SHA1s of scripts created by EVAL, least recently used first.
    pub(crate) lru: VecDeque<String>,
    /// Scripts evicted from the cache (INFO evicted_scripts).
    pub evicted: u64,
    /// Scripts compiled and runs done so far (paces garbage collection).
    gc_count: u64,
    /// The interpreter's bytes after its last full collection.
    gc_live: usize,
    /// Function libraries (FUNCTION, FCALL), in their own interpreter as
    /// in Redis, so SCRIPT FLUSH leaves them be.
    pub functions: Functions,
    /// Builds interpreters (its `redis.acl_check_cmd` knows the table).
    pub(crate) commands: CommandMap,
}

impl Engine {
    /// A fresh interpreter with an empty cache. `commands` answers
    /// `redis.acl_check_cmd`.
    pub fn new(commands: CommandMap) -> Engine {
        let functions = Functions::new(new_vm(&commands));
        Engine { vm: new_vm(&commands), scripts: HashMap::new(), lru: VecDeque::new(), evicted: 0, gc_count: 0, gc_live: 0, functions, commands }
    }

    /// A fresh interpreter for function libraries (FUNCTION FLUSH).
    pub fn function_vm(&self) -> lua::Vm {
        new_vm(&self.commands)
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
    pub(crate) fn create(&mut self, body: &[u8], from_eval: bool) -> Result<String, CmdError> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, skip) = parse_shebang(body).map_err(CmdError::err)?;
        // The shebang line is dropped but its newline kept, so line numbers hold.
        let env = self.vm.sandbox().map_err(|e| CmdError::err(format!("Error compiling script (new function): {e}")))?.env.clone();
        let func = self
            .vm
            .lua
            .load(&body[skip..])
            .set_name(lua::CHUNK_NAME)
            .set_mode(ChunkMode::Text)
            .set_environment(env)
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
        self.gc_tick();
        Ok(sha)
    }

    /// SCRIPT FLUSH: a fresh interpreter with no scripts.
    pub(crate) fn reset_scripts(&mut self) {
        self.vm = new_vm(&self.commands);
        self.scripts.clear();
        self.lru.clear();
        self.gc_live = 0;
    }

    /// Compiling and running leave garbage; a small collection step every
    /// 50 of them keeps the interpreter from growing in bursts, as Redis
    /// paces it. Our fresh interpreter is larger than Redis's, so the
    /// incremental steps alone can let it grow well past what lives before
    /// they catch up: a full collection brings it back once it holds
    /// `GC_SLACK` more than the larger of what lived after the last one and
    /// half that again (its cost is proportional to what lives, so
    /// amortized it is a constant per byte allocated, and a small heap
    /// stays small: a fresh interpreter under 100 KB, as Redis's tests
    /// expect after many EVALs).
    pub(crate) fn gc_tick(&mut self) {
        const GC_SLACK: usize = 24 << 10;
        self.gc_count += 1;
        if self.gc_count.is_multiple_of(50) {
            let _ = self.vm.lua.gc_step_kbytes(50);
            let live = self.gc_live;
            if self.vm.lua.used_memory() > (live + live / 2).max(live + GC_SLACK) {
                let _ = self.vm.lua.gc_collect();
                self.gc_live = self.vm.lua.used_memory();
            }
        }
    }

    /// Marks an EVAL-created script as just used.
    pub(crate) fn touch(&mut self, sha: &str) {
        if let Some(i) = self.lru.iter().position(|s| s == sha) {
            if let Some(s) = self.lru.remove(i) {
                self.lru.push_back(s);
            }
        }
    }
}

impl Scripts for Engine {
    fn command_flags(&self, spec: &Spec, argv: &[Vec<u8>]) -> u32 {
        command_flags(self, spec, argv)
    }

    fn info(&self) -> ScriptInfo {
        let f = &self.functions;
        ScriptInfo {
            eval_vm: self.vm_memory(),
            eval_cache: self.cache_memory(),
            cached_scripts: self.len(),
            evicted_scripts: self.evicted,
            functions_vm: f.vm_memory(),
            functions_overhead: f.overhead(),
            functions: f.functions(),
            libraries: f.libraries(),
        }
    }

    fn function_codes(&self) -> Vec<Vec<u8>> {
        self.functions.libraries.values().map(|l| l.code.clone()).collect()
    }

    fn load_functions(&mut self, codes: Vec<Vec<u8>>) -> Result<(), String> {
        self.functions = Functions::new(self.function_vm());
        for code in codes {
            self.functions.load(&code, false)?;
        }
        Ok(())
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The engine behind `host` (the event loop lends its own).
pub(crate) fn engine(host: &mut dyn Host) -> &mut Engine {
    // A broken invariant if not: the only `Scripts` there is is `Engine`.
    host.scripts().as_any().downcast_mut::<Engine>().expect("the scripting engine")
}

/// The flags dispatch should judge `argv` by (CLIENT PAUSE, OOM): for the
/// EVAL family, those implied by the script's shebang, as Redis derives
/// them; for anything else, the spec's own.
fn command_flags(e: &Engine, spec: &Spec, argv: &[Vec<u8>]) -> u32 {
    let evalsha = match spec.full_name {
        "eval" | "eval_ro" => false,
        "evalsha" | "evalsha_ro" => true,
        "fcall" | "fcall_ro" => {
            let found = argv.get(1).and_then(|name| e.functions.flags_of(name));
            return found.map_or(spec.flags, |f| script_cmd_flags(spec.flags, f));
        }
        _ => return spec.flags,
    };
    let Some(arg) = argv.get(1) else { return spec.flags };
    let sflags = if evalsha {
        if arg.len() != 40 {
            return spec.flags;
        }
        match e.scripts.get(&String::from_utf8_lossy(arg).to_ascii_lowercase()) {
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
