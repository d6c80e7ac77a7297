//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT
//! LOAD|EXISTS|FLUSH|KILL|HELP, with Redis 7.4's rules, and (in `function`)
//! Redis 7's functions. Bottom up: the libraries Redis bundles into its Lua
//! (`cjson`, `cmsgpack`, `lstruct` for `struct`, over `libutil`), `lua` (the
//! sandboxed interpreter), `run`
//! (what EVAL and FCALL share: `run_script`, the script rules, busy
//! handling), `library` (function libraries), `engine` (the interpreters and
//! caches the event loop owns), then the handlers: EVAL and SCRIPT here,
//! FUNCTION and FCALL in `function`.

pub mod cjson;
pub mod cmsgpack;
pub mod engine;
pub mod function;
pub mod library;
pub mod libutil;
pub mod lstruct;
pub mod lua;
pub mod run;

use engine::{engine, registry_name, NOSCRIPT_ERR};
use run::{check_numkeys, kill, run_script, Call};

use crate::command::flags::*;
use crate::command::{arg_i64, container, is, kf, spec, Begin, CmdError, CmdResult, Ctx, Find, KeyFlags, KeySpec, KeysFn, Spec, NO_KEYS};
use crate::exec;

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

fn eval_generic(ctx: &mut Ctx, args: &[Vec<u8>], name: &'static str, by_sha: bool, ro: bool) -> CmdResult {
    // EVAL skips the generic MONITOR feed so it shows before its commands.
    if !ctx.srv.monitors.is_empty() {
        exec::feed_monitors(ctx.srv, ctx.client, args);
    }
    if by_sha && args[1].len() != 40 {
        return Err(CmdError::Custom(NOSCRIPT_ERR.into()));
    }
    let numkeys = check_numkeys(arg_i64(&args[2])?, args)?;
    let engine = engine(ctx.host);
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
    let result = run_script(ctx, &vm, func, call);
    self::engine::engine(ctx.host).gc_tick();
    result
}

fn script_load(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let sha = engine(ctx.host).create(&args[2], false)?;
    ctx.out().bulk(sha.as_bytes());
    Ok(())
}

fn script_exists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let found: Vec<bool> = args[2..]
        .iter()
        .map(|a| engine(ctx.host).scripts.contains_key(&String::from_utf8_lossy(a).to_ascii_lowercase()))
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
    engine(ctx.host).reset_scripts();
    ctx.out().ok();
    Ok(())
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
    fn eval_keys_follow_numkeys() {
        let argv: Vec<Vec<u8>> = ["eval", "s", "2", "a", "b", "c"].iter().map(|s| s.as_bytes().to_vec()).collect();
        let keys: Vec<usize> = eval_keys(&argv, kf::RO_ACCESS).into_iter().map(|k| k.0).collect();
        assert_eq!(keys, [3, 4]);
        let mut bad = argv.clone();
        bad[2] = b"9".to_vec();
        assert!(eval_keys(&bad, kf::RO_ACCESS).is_empty());
    }
}
