//! Redis 7 functions: FUNCTION LOAD|DELETE|FLUSH|LIST|DUMP|RESTORE|STATS|
//! KILL|HELP and FCALL / FCALL_RO.
//!
//! The libraries live in `library.rs`; FCALL runs a registered callback
//! through the same `run_script` as EVAL, so script rules, busy handling and
//! replies are shared; only KEYS and ARGV arrive as parameters instead of
//! globals.

use super::engine::engine;
use super::library::{join, Functions, Library, ENGINE};
use super::run::script_flags::NAMES;
use super::run::{check_numkeys, kill, run_script, Call};
use crate::command::flags::*;
use crate::command::{container as cmd_container, is, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};

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
    let fns = &engine(ctx.host).functions;
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
    let log = ctx.srv.config.log.clone();
    let name = engine(ctx.host).functions.load_logging(&args[code_at], replace, log).map_err(CmdError::err)?;
    ctx.srv.dirty += 1;
    ctx.out().bulk(name.as_bytes());
    Ok(())
}

fn function_delete(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    if engine(ctx.host).functions.unlink(&name).is_none() {
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
    let e = engine(ctx.host);
    let vm = e.function_vm();
    let old = std::mem::replace(&mut e.functions, Functions::new(vm));
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
    let fns = &engine(ctx.host).functions;
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
    let fns = &engine(ctx.host).functions;
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
    let engine = engine(ctx.host);
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
fn function_stats(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.script.is_some_and(|r| !r.function) {
        return Err(CmdError::Custom(ctx.srv.busy_error().into()));
    }
    let running = ctx.srv.running_function.clone();
    let fns = &engine(ctx.host).functions;
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
    kill(ctx, true)
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

