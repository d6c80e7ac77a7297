//! ACL: users and their rights (SETUSER, GETUSER, DELUSER, USERS, LIST,
//! WHOAMI, CAT, GENPASS, LOG, DRYRUN, LOAD, SAVE). The users, rules and
//! checks are `acl.rs`; this file is the command surface and the effects on
//! connected clients: deleting a user, or revoking a channel its
//! subscribers use, disconnects them as Redis does.

use std::rc::Rc;

use crate::acl::{self, User, UserRef};
use crate::client::Client;
use crate::command::flags::*;
use crate::command::{arg_i64, container, is, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::exec::{self, Lookup};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    const ADM: &[&str] = &["admin", "slow", "dangerous"];
    const SLOW: &[&str] = &["slow"];
    let f = NOSCRIPT | LOADING | STALE;
    vec![container(
        "acl",
        vec![
            spec("cat", -2, f, NO_KEYS, cat).acl(SLOW).doc("Lists the ACL categories, or the commands inside a category.", "6.0.0"),
            spec("deluser", -3, ADMIN | f, NO_KEYS, deluser).acl(ADM).doc("Deletes ACL users, and terminates their connections.", "6.0.0"),
            spec("dryrun", -4, ADMIN | f, NO_KEYS, dryrun).acl(ADM).doc("Simulates the execution of a command by a user, without executing the command.", "7.0.0"),
            spec("genpass", -2, f, NO_KEYS, genpass).acl(SLOW).doc("Generates a pseudorandom, secure password that can be used to identify ACL users.", "6.0.0"),
            spec("getuser", 3, ADMIN | f, NO_KEYS, getuser).acl(ADM).doc("Lists the ACL rules of a user.", "6.0.0"),
            spec("list", 2, ADMIN | f, NO_KEYS, list).acl(ADM).doc("Dumps the effective rules in ACL file format.", "6.0.0"),
            spec("load", 2, ADMIN | f, NO_KEYS, load).acl(ADM).doc("Reloads the rules from the configured ACL file.", "6.0.0"),
            spec("log", -2, ADMIN | f, NO_KEYS, log).acl(ADM).doc("Lists recent security events generated due to ACL rules.", "6.0.0"),
            spec("save", 2, ADMIN | f, NO_KEYS, save).acl(ADM).doc("Saves the effective ACL rules in the configured ACL file.", "6.0.0"),
            spec("setuser", -3, ADMIN | f, NO_KEYS, setuser).acl(ADM).doc("Creates and modifies an ACL user and its rules.", "6.0.0"),
            spec("users", 2, ADMIN | f, NO_KEYS, users).acl(ADM).doc("Lists all ACL users.", "6.0.0"),
            spec("whoami", 2, f, NO_KEYS, whoami).acl(SLOW).doc("Returns the authenticated username of the current connection.", "6.0.0"),
            spec("help", 2, LOADING | STALE, NO_KEYS, help).acl(SLOW).doc("Returns helpful text about the different subcommands.", "6.0.0"),
        ],
    )
    .group("server")]
}


fn has_spaces(name: &[u8]) -> bool {
    name.iter().any(|&b| b == b' ' || b == 0)
}

/// True if `c`'s subscriptions are all still allowed to `u`.
fn subscriptions_allowed(c: &Client, u: &User) -> bool {
    let Some(subs) = c.pubsub.as_ref() else { return true };
    subs.channels.iter().chain(subs.shard.iter()).all(|ch| u.allows_channel(ch, false)) && subs.patterns.iter().all(|p| u.allows_channel(p, true))
}

/// Disconnects the clients `doomed` picks (the running one after its reply).
fn kill_clients(ctx: &mut Ctx, doomed: impl Fn(&Client) -> bool) {
    for c in ctx.srv.clients.values_mut() {
        if c.user.is_some() && doomed(c) {
            c.close_asap = true;
            ctx.srv.sweep_clients = true;
        }
    }
    if ctx.client.user.is_some() && doomed(ctx.client) {
        ctx.client.close_after_reply = true;
    }
}

fn same_user(c: &Client, u: &UserRef) -> bool {
    c.user.as_ref().is_some_and(|cu| Rc::ptr_eq(cu, u))
}

/// Installs `new` as user `name`: in place for an existing user, so that
/// its clients see the change, after disconnecting its subscribers whose
/// channels are now refused.
fn install_user(ctx: &mut Ctx, name: &str, new: User) {
    match ctx.srv.acl.users.get(name).cloned() {
        Some(u) => {
            kill_clients(ctx, |c| same_user(c, &u) && !subscriptions_allowed(c, &new));
            *u.borrow_mut() = new;
        }
        None => {
            ctx.srv.acl.users.insert(name.to_string(), Rc::new(std::cell::RefCell::new(new)));
        }
    }
}

/// ACL SETUSER username [rule ...]
fn setuser(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if has_spaces(&args[2]) {
        return Err(CmdError::err("Usernames can't contain spaces or null characters"));
    }
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    let acl = &ctx.srv.acl;
    let base = acl.users.get(&name).map(|u| u.borrow().clone());
    let new = acl::build_user(&acl.catalog, base.as_ref(), &name, &args[3..], acl.pubsub_all).map_err(CmdError::err)?;
    install_user(ctx, &name, new);
    ctx.out().ok();
    Ok(())
}

/// ACL DELUSER username [username ...]
fn deluser(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args[2..].iter().any(|n| n == b"default") {
        return Err(CmdError::err("The 'default' user cannot be removed"));
    }
    let mut deleted = 0;
    for n in &args[2..] {
        let Ok(n) = std::str::from_utf8(n) else { continue };
        if let Some(u) = ctx.srv.acl.users.remove(n) {
            kill_clients(ctx, |c| same_user(c, &u));
            deleted += 1;
        }
    }
    ctx.out().int(deleted);
    Ok(())
}

/// ACL GETUSER username
fn getuser(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(u) = ctx.srv.acl.user(&args[2]) else {
        ctx.out().null();
        return Ok(());
    };
    let u = u.borrow();
    let out = &mut ctx.client.reply;
    out.map(6);
    out.bulk(b"flags");
    let flags = u.flag_names();
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(u.passwords.len());
    for p in &u.passwords {
        out.bulk(p.as_bytes());
    }
    for (k, v) in u.selectors[0].fields() {
        out.bulk(k.as_bytes());
        out.bulk(v.as_bytes());
    }
    out.bulk(b"selectors");
    out.array(u.selectors.len() - 1);
    for s in &u.selectors[1..] {
        out.map(3);
        for (k, v) in s.fields() {
            out.bulk(k.as_bytes());
            out.bulk(v.as_bytes());
        }
    }
    Ok(())
}

/// ACL LIST
fn list(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let lines: Vec<String> = ctx.srv.acl.users.iter().map(|(n, u)| format!("user {n} {}", u.borrow().describe())).collect();
    let out = ctx.out();
    out.array(lines.len());
    for l in lines {
        out.bulk(l.as_bytes());
    }
    Ok(())
}

/// ACL USERS
fn users(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let names: Vec<String> = ctx.srv.acl.users.keys().cloned().collect();
    let out = ctx.out();
    out.array(names.len());
    for n in names {
        out.bulk(n.as_bytes());
    }
    Ok(())
}

/// ACL WHOAMI
fn whoami(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let name = ctx.client.user_name();
    ctx.out().bulk(name.as_bytes());
    Ok(())
}

/// ACL CAT [category]
fn cat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match args.len() {
        2 => {
            let out = ctx.out();
            out.array(acl::CATEGORIES.len());
            for c in acl::CATEGORIES {
                out.bulk(c.as_bytes());
            }
        }
        3 => {
            let want = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
            let Some(c) = acl::CATEGORIES.iter().find(|c| **c == want) else {
                let shown: String = String::from_utf8_lossy(&args[2]).chars().take(128).collect();
                return Err(CmdError::err(format!("Unknown category '{shown}'")));
            };
            let names = ctx.srv.acl.catalog.in_category(c);
            let out = ctx.out();
            out.array(names.len());
            for n in names {
                out.bulk(n.as_bytes());
            }
        }
        _ => return Err(CmdError::subcommand(args)),
    }
    Ok(())
}

/// Random bytes from the system's generator.
fn random_bytes(n: usize) -> Vec<u8> {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).is_err() {
        // No /dev/urandom: derive bytes from the clock (never expected on Linux).
        let mut x = crate::server::unix_us() as u64 | 1;
        for b in &mut buf {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
    buf
}

/// ACL GENPASS [bits]
fn genpass(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    const MAX_BITS: i64 = 4096;
    let bits = match args.len() {
        2 => 256,
        3 => arg_i64(&args[2]).map_err(|_| CmdError::NotInt)?,
        _ => return Err(CmdError::subcommand(args)),
    };
    if bits <= 0 || bits > MAX_BITS {
        return Err(CmdError::err(format!(
            "ACL GENPASS argument must be the number of bits for the output password, a positive number up to {MAX_BITS}"
        )));
    }
    let chars = ((bits + 3) / 4) as usize;
    let hex: String = random_bytes(chars.div_ceil(2)).iter().map(|b| format!("{b:02x}")).collect();
    ctx.out().bulk(&hex.as_bytes()[..chars]);
    Ok(())
}

/// ACL LOG [count | RESET]
fn log(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut count = 10i64;
    match args.len() {
        2 => {}
        3 if is(&args[2], "reset") => {
            ctx.srv.acl.log.clear();
            ctx.out().ok();
            return Ok(());
        }
        3 => count = arg_i64(&args[2]).map_err(|_| CmdError::NotInt)?.max(0),
        _ => return Err(CmdError::subcommand(args)),
    }
    let now = ctx.now;
    let entries: Vec<acl::LogEntry> = ctx.srv.acl.log.iter().take(count as usize).cloned().collect();
    let out = ctx.out();
    out.array(entries.len());
    for e in entries {
        out.map(10);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.as_bytes());
        out.bulk(b"object");
        out.bulk(&e.object);
        out.bulk(b"username");
        out.bulk(&e.username);
        out.bulk(b"age-seconds");
        out.double((now - e.ctime) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.cinfo.as_bytes());
        out.bulk(b"entry-id");
        out.int(e.entry_id as i64);
        out.bulk(b"timestamp-created");
        out.int(e.created);
        out.bulk(b"timestamp-last-updated");
        out.int(e.ctime);
    }
    Ok(())
}

/// ACL DRYRUN username command [arg ...]
fn dryrun(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(u) = ctx.srv.acl.user(&args[2]) else {
        return Err(CmdError::err(format!("User '{}' not found", String::from_utf8_lossy(&args[2]))));
    };
    let table = ctx.host.table().clone();
    let argv = &args[3..];
    let spec = match exec::lookup(&table, argv) {
        Lookup::Found(s) => s,
        Lookup::Unknown(_) => return Err(CmdError::err(format!("Command '{}' not found", String::from_utf8_lossy(&argv[0])))),
        Lookup::BadArity(CmdError::Arity(name)) => return Err(CmdError::err(format!("wrong number of arguments for '{name}' command"))),
        Lookup::BadArity(e) => return Err(e),
    };
    let u = u.borrow();
    match exec::acl_check(ctx.srv, &u, spec, argv) {
        Ok(()) => ctx.out().ok(),
        Err(d) => {
            let arg = match d {
                acl::Denied::Key(i) | acl::Denied::Channel(i) => argv[i].clone(),
                _ => Vec::new(),
            };
            let msg = acl::denied_message(d, &u.name, spec.full_name, &arg, true);
            ctx.out().bulk(msg.as_bytes());
        }
    }
    Ok(())
}

fn aclfile(ctx: &Ctx) -> Result<String, CmdError> {
    let f = ctx.srv.config.get("aclfile").unwrap_or("").to_string();
    if f.is_empty() {
        return Err(CmdError::err("This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."));
    }
    Ok(f)
}

/// Reads and checks the ACL file `path`: every user it defines, or the
/// errors Redis would report (nothing is applied on error).
pub fn read_aclfile(srv: &crate::server::Server, path: &str) -> Result<Vec<User>, String> {
    let text = std::fs::read(path).map_err(|e| format!("Error loading ACLs, opening file '{path}': {}", crate::config::strerror(&e)))?;
    let mut errors = String::new();
    let mut users: Vec<User> = Vec::new();
    let cat = srv.acl.catalog.clone();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = raw.trim_ascii();
        let n = i + 1;
        if line.is_empty() {
            continue;
        }
        let words: Vec<Vec<u8>> = line.split(|&b| b == b' ').filter(|w| !w.is_empty()).map(|w| w.to_vec()).collect();
        if words.is_empty() {
            continue;
        }
        if words[0] != b"user" || words.len() < 2 {
            errors.push_str(&format!("{path}:{n} should start with user keyword followed by the username. "));
            continue;
        }
        let name = String::from_utf8_lossy(&words[1]).into_owned();
        if has_spaces(&words[1]) {
            errors.push_str(&format!("'{path}:{n}: username '{name}' contains invalid characters. "));
            continue;
        }
        if users.iter().any(|u| u.name == name) {
            errors.push_str(&format!("WARNING: Duplicate user '{name}' found on line {n}. "));
            continue;
        }
        let Ok(merged) = acl::merge_selector_args(&words[2..]) else {
            errors.push_str(&format!("{path}:{n}: Unmatched parenthesis in selector definition."));
            continue;
        };
        let mut u = User::new(&name, cat.cmds.len(), srv.acl.pubsub_all);
        let mut syntax_seen = false;
        for op in &merged {
            if let Err(e) = u.apply(&cat, op, srv.acl.pubsub_all) {
                if e == acl::RuleError::NoEnt {
                    errors.push_str(&format!("{path}:{n}: Error in applying operation '{}': {}. ", String::from_utf8_lossy(op), e.message()));
                } else if !syntax_seen {
                    errors.push_str(&format!("{path}:{n}: {}. ", e.message()));
                    syntax_seen = true;
                }
            }
        }
        users.push(u);
    }
    if !errors.is_empty() {
        errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
        return Err(errors);
    }
    Ok(users)
}

/// Replaces every user with `users` (a fresh default user when they hold
/// none). Users kept by name are updated in place; returns the users that
/// are gone, whose clients must be disconnected.
pub fn replace_users(srv: &mut crate::server::Server, users: Vec<User>) -> Vec<UserRef> {
    let mut old = std::mem::take(&mut srv.acl.users);
    let mut users = users;
    if !users.iter().any(|u| u.name == "default") {
        users.push(srv.acl.default_user_fresh());
    }
    for u in users {
        let name = u.name.clone();
        let r = match old.remove(&name) {
            Some(r) => {
                *r.borrow_mut() = u;
                r
            }
            None => Rc::new(std::cell::RefCell::new(u)),
        };
        srv.acl.users.insert(name, r);
    }
    old.into_values().collect()
}

/// ACL LOAD
fn load(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let path = aclfile(ctx)?;
    let users = read_aclfile(ctx.srv, &path).map_err(CmdError::err)?;
    let gone = replace_users(ctx.srv, users);
    kill_clients(ctx, |c| {
        gone.iter().any(|g| same_user(c, g)) || c.user.as_ref().is_some_and(|u| !subscriptions_allowed(c, &u.borrow()))
    });
    ctx.out().ok();
    Ok(())
}

/// ACL SAVE
fn save(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let path = aclfile(ctx)?;
    let tmp = format!("{path}.tmp-{}", std::process::id());
    let ok = std::fs::write(&tmp, ctx.srv.acl.file_text()).and_then(|_| std::fs::rename(&tmp, &path)).is_ok();
    if !ok {
        let _ = std::fs::remove_file(&tmp);
        return Err(CmdError::err("There was an error trying to save the ACLs. Please check the server logs for more information"));
    }
    ctx.out().ok();
    Ok(())
}

/// ACL HELP
fn help(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    crate::commands::introspection::help_reply(
        ctx,
        "acl",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}

/// Sets up users at start-up, after the command table exists: requirepass,
/// then the `user` directives or the ACL file (not both, as Redis refuses).
///
/// Errors: the text to log before exiting.
pub fn load_at_startup(srv: &mut crate::server::Server, catalog: acl::Catalog) -> Result<(), String> {
    srv.acl.pubsub_all = srv.config.get("acl-pubsub-default") == Some("allchannels");
    srv.acl.set_catalog(Rc::new(catalog));
    let pass = srv.config.get("requirepass").unwrap_or("").as_bytes().to_vec();
    srv.acl.set_requirepass(&pass);
    let file = srv.config.get("aclfile").unwrap_or("").to_string();
    let lines = srv.config.users.clone();
    if !file.is_empty() && !lines.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    if !lines.is_empty() {
        let mut users: Vec<User> = Vec::new();
        for words in &lines {
            let name = String::from_utf8_lossy(&words[1]).into_owned();
            if has_spaces(&words[1]) {
                return Err("Spaces not allowed in ACL usernames".into());
            }
            if users.iter().any(|u| u.name == name) {
                return Err(format!("Duplicate user '{name}' found"));
            }
            // A `user default` line starts from a reset user, as in Redis.
            let u = acl::build_user(&srv.acl.catalog, None, &name, &words[2..], srv.acl.pubsub_all)?;
            users.push(u);
        }
        if !users.iter().any(|u| u.name == "default") {
            users.push(srv.acl.default_user().borrow().clone());
        }
        replace_users(srv, users);
    } else if !file.is_empty() {
        let users = read_aclfile(srv, &file)?;
        replace_users(srv, users);
    }
    Ok(())
}
