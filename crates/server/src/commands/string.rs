//! String commands.

use storage::{Ttl, Value};

use super::flags::*;
use super::{arg_i64, is, keys, spec, CmdError, CmdResult, Ctx, Spec};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let rs: &[&str] = &["read", "string", "fast"];
    vec![
        spec("get", 2, READONLY | FAST, keys(1, 1, 1), get).acl(rs).group("string").doc("Returns the string value of a key.", "1.0.0"),
        spec("set", -3, WRITE | DENYOOM, keys(1, 1, 1), set)
            .acl(&["write", "string", "slow"])
            .group("string")
            .doc("Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", "1.0.0"),
    ]
}

/// GET key
pub fn get(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match ctx.get_str(&args[1])? {
        Some(v) => ctx.out().bulk(&v),
        None => ctx.out().null(),
    }
    Ok(())
}

/// Parses an expire time option value into an absolute Unix ms deadline.
/// `unit_ms` is 1000 for seconds; `absolute` for EXAT/PXAT.
pub fn parse_expire(cmd: &str, arg: &[u8], unit_ms: i64, absolute: bool, now: i64) -> Result<i64, CmdError> {
    let v = arg_i64(arg)?;
    if v <= 0 {
        return Err(CmdError::err(format!("invalid expire time in '{cmd}' command")));
    }
    let ms = v.checked_mul(unit_ms).ok_or_else(|| CmdError::err(format!("invalid expire time in '{cmd}' command")))?;
    if absolute {
        Ok(ms)
    } else {
        now.checked_add(ms).ok_or_else(|| CmdError::err(format!("invalid expire time in '{cmd}' command")))
    }
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT ts | PXAT ts | KEEPTTL]
pub fn set(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    let mut expire: Option<i64> = None;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let has_next = i + 1 < args.len();
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "get") {
            get = true;
        } else if is(a, "keepttl") && expire.is_none() {
            keepttl = true;
        } else if has_next && expire.is_none() && !keepttl && (is(a, "ex") || is(a, "px") || is(a, "exat") || is(a, "pxat")) {
            let unit = if is(a, "ex") || is(a, "exat") { 1000 } else { 1 };
            let abs = is(a, "exat") || is(a, "pxat");
            expire = Some(parse_expire("set", &args[i + 1], unit, abs, ctx.now)?);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let key = &args[1];
    let old = if get { ctx.get_str(key)? } else { None };
    let now = ctx.now;
    let exists = if get { old.is_some() } else { ctx.db().contains(key, now) };
    if (nx && exists) || (xx && !exists) {
        if get {
            match old {
                Some(v) => ctx.out().bulk(&v),
                None => ctx.out().null(),
            }
        } else {
            ctx.out().null();
        }
        return Ok(());
    }
    let ttl = match (expire, keepttl) {
        (Some(t), _) => Ttl::At(t),
        (None, true) => Ttl::Keep,
        (None, false) => Ttl::Clear,
    };
    ctx.set_value(key, Value::string(&args[2]), ttl);
    if get {
        match old {
            Some(v) => ctx.out().bulk(&v),
            None => ctx.out().null(),
        }
    } else {
        ctx.out().ok();
    }
    Ok(())
}
