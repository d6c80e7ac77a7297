//! TTLs on the parts of a key: hash fields (HEXPIRE family, Redis 7.4) and,
//! as a densekv extension shaped like it, set members (SEXPIRE family) and
//! sorted-set members (ZEXPIRE family).
//!
//! One implementation serves the three families, so a user who knows
//! HEXPIRE knows the others: the same arguments (`key time [NX|XX|GT|LT]
//! FIELDS|MEMBERS numfields name...`), the same checks in the same order
//! (key type, then time, then the FIELDS/MEMBERS block), the same error
//! texts (only the keyword differs: "Mandatory argument MEMBERS is missing
//! ..."), the same per-name reply codes and the same replay: names whose
//! deadline was set go out as one `*PEXPIREAT` with the absolute deadline,
//! names a past deadline deleted as one `HDEL`/`SREM`/`ZREM` each, and the
//! command goes out not at all when it changed nothing.
//!
//! What differs per type is a row of constants and three calls on the
//! value (`SubExpire`). KeyDB's EXPIREMEMBER, EXPIREMEMBERAT and
//! PEXPIREMEMBERAT, which work on all three types, are here too, with
//! KeyDB's replies (1 set, 0 no such key or member) and errors. Fields and members past their deadline are
//! invisible to these commands in every family: hashes hide them, and the
//! keyspace removes due set and sorted-set members before a command
//! reaches the key.

use resp::Reply;
use storage::types::hash::{ExpireCond, Hash};
use storage::types::set::Set;
use storage::types::zset::ZSet;

use crate::access::Collection;
use crate::command::flags::*;
use crate::command::{arg_i64, is, keys, spec, CmdError, CmdResult, Ctx, Spec};
use crate::notify;
use crate::server::Server;

/// Largest field or member deadline accepted from a command: 2^46 - 1 ms
/// (Redis's limit for field TTLs).
pub const MAX_FIELD_MS: i64 = (1 << 46) - 1;

/// The error for a numfields that is not a positive integer (TTL queries
/// and PERSIST).
pub const NUMFIELDS_POSITIVE: &str = "Number of fields must be a positive integer";

/// The rows of KeyDB's member-expiry commands (the families' own rows are
/// in hash.rs, set.rs and zset.rs).
pub fn table() -> Vec<Spec> {
    const WF: &[&str] = &["write", "keyspace", "fast"];
    let s = |name, arity, h, summary| spec(name, arity, WRITE | FAST, keys(1, 1, 1), h).acl(WF).group("generic").doc(summary, "7.4.0");
    vec![
        s("expiremember", -4, expiremember, "Sets the TTL of one member of a hash, set or sorted set (KeyDB's EXPIREMEMBER)."),
        s("expirememberat", 4, expirememberat, "Sets the expiry of one member of a hash, set or sorted set as a Unix time in seconds (KeyDB's)."),
        s("pexpirememberat", 4, pexpirememberat, "Sets the expiry of one member of a hash, set or sorted set as a Unix time in ms (KeyDB's)."),
    ]
}

/// A collection whose parts can carry a TTL, with what its commands say.
pub trait SubExpire: Collection {
    /// The keyword before the count: "FIELDS" or "MEMBERS".
    const WORD: &'static str;
    /// Keyspace-event class of the family.
    const CLASS: u32;
    /// Events: a deadline set, a part deleted by a past deadline, a TTL
    /// removed.
    const EXPIRE_EVENT: &'static str;
    /// See `EXPIRE_EVENT`.
    const DEL_EVENT: &'static str;
    /// See `EXPIRE_EVENT`.
    const PERSIST_EVENT: &'static str;
    /// The commands a change is replayed as: delete one part, set an
    /// absolute deadline in ms.
    const DEL_CMD: &'static [u8];
    /// See `DEL_CMD`.
    const PEXPIREAT_CMD: &'static [u8];
    /// Configuration the value needs to change shape (a set's thresholds).
    type Cfg: Copy;
    /// That configuration, from the server's.
    fn cfg(srv: &Server) -> Self::Cfg;
    /// Sets the deadline of `name` under `cond`; the reply code (-2 no
    /// such part, 0 condition not met, 1 set, 2 deleted).
    fn set_expire(&mut self, name: &[u8], deadline: i64, cond: ExpireCond, now: i64, cfg: &Self::Cfg) -> i64;
    /// Removes the TTL of `name`: -2 no such part, -1 no TTL, 1 removed.
    fn persist(&mut self, name: &[u8], now: i64, cfg: &Self::Cfg) -> i64;
    /// `None`: no such live part; `Some(None)`: no TTL; else its deadline.
    fn expire_of(&self, name: &[u8], now: i64) -> Option<Option<i64>>;
}

impl SubExpire for Hash {
    const WORD: &'static str = "FIELDS";
    const CLASS: u32 = notify::HASH;
    const EXPIRE_EVENT: &'static str = "hexpire";
    const DEL_EVENT: &'static str = "hdel";
    const PERSIST_EVENT: &'static str = "hpersist";
    const DEL_CMD: &'static [u8] = b"HDEL";
    const PEXPIREAT_CMD: &'static [u8] = b"HPEXPIREAT";
    type Cfg = ();
    fn cfg(_: &Server) {}
    fn set_expire(&mut self, name: &[u8], deadline: i64, cond: ExpireCond, now: i64, _: &()) -> i64 {
        Hash::set_expire(self, name, deadline, cond, now)
    }
    fn persist(&mut self, name: &[u8], now: i64, _: &()) -> i64 {
        Hash::persist(self, name, now)
    }
    fn expire_of(&self, name: &[u8], now: i64) -> Option<Option<i64>> {
        Hash::expire_of(self, name, now)
    }
}

/// A set or sorted set member's deadline as the TTL commands see it: one
/// past its deadline is no member (the keyspace removes such members
/// before a command runs; this only guards the rule).
fn live_member(d: Option<Option<i64>>, now: i64) -> Option<Option<i64>> {
    d.filter(|d| d.is_none_or(|t| t >= now))
}

impl SubExpire for Set {
    const WORD: &'static str = "MEMBERS";
    const CLASS: u32 = notify::SET;
    const EXPIRE_EVENT: &'static str = "sexpire";
    const DEL_EVENT: &'static str = "srem";
    const PERSIST_EVENT: &'static str = "spersist";
    const DEL_CMD: &'static [u8] = b"SREM";
    const PEXPIREAT_CMD: &'static [u8] = b"SPEXPIREAT";
    type Cfg = storage::types::set::SetConfig;
    fn cfg(srv: &Server) -> Self::Cfg {
        srv.config.set
    }
    fn set_expire(&mut self, name: &[u8], deadline: i64, cond: ExpireCond, now: i64, cfg: &Self::Cfg) -> i64 {
        Set::set_expire(self, name, deadline, cond, now, cfg)
    }
    fn persist(&mut self, name: &[u8], now: i64, cfg: &Self::Cfg) -> i64 {
        Set::persist(self, name, now, cfg)
    }
    fn expire_of(&self, name: &[u8], now: i64) -> Option<Option<i64>> {
        live_member(Set::expire_of(self, name), now)
    }
}

impl SubExpire for ZSet {
    const WORD: &'static str = "MEMBERS";
    const CLASS: u32 = notify::ZSET;
    const EXPIRE_EVENT: &'static str = "zexpire";
    const DEL_EVENT: &'static str = "zrem";
    const PERSIST_EVENT: &'static str = "zpersist";
    const DEL_CMD: &'static [u8] = b"ZREM";
    const PEXPIREAT_CMD: &'static [u8] = b"ZPEXPIREAT";
    type Cfg = ();
    fn cfg(_: &Server) {}
    fn set_expire(&mut self, name: &[u8], deadline: i64, cond: ExpireCond, now: i64, _: &()) -> i64 {
        ZSet::set_expire(self, name, deadline, cond, now)
    }
    fn persist(&mut self, name: &[u8], now: i64, _: &()) -> i64 {
        ZSet::persist(self, name, now)
    }
    fn expire_of(&self, name: &[u8], now: i64) -> Option<Option<i64>> {
        live_member(ZSet::expire_of(self, name), now)
    }
}

/// Parses `FIELDS numfields field...` (`word` is FIELDS or MEMBERS) where
/// `args[at]` should be the keyword; returns the names. `bad_count` is the
/// command's text for a numfields that is not a positive integer.
pub fn fields_arg<'a>(args: &'a [Vec<u8>], at: usize, bad_count: &str, word: &str) -> Result<&'a [Vec<u8>], CmdError> {
    if at >= args.len() || !is(&args[at], word) {
        return Err(CmdError::err(format!("Mandatory argument {word} is missing or not at the right position")));
    }
    let n = args.get(at + 1).and_then(|a| resp::num::parse_i64(a)).filter(|&n| n >= 1).ok_or_else(|| CmdError::err(bad_count))?;
    let rest = &args[at + 2..];
    if usize::try_from(n).ok() != Some(rest.len()) {
        return Err(CmdError::err("The `numfields` parameter must match the number of arguments"));
    }
    Ok(rest)
}

/// A deadline from a command argument: `secs` scales by 1000, `base` is
/// added (now for relative forms, 0 for absolute ones). Errors as Redis's
/// HEXPIRE gives them, with `name` (the command, lower case) in the text.
pub fn parse_deadline(name: &str, arg: &[u8], secs: bool, base: i64) -> Result<i64, CmdError> {
    let v = arg_i64(arg)?;
    if v < 0 {
        return Err(CmdError::err("invalid expire time, must be >= 0"));
    }
    let bad = || CmdError::err(format!("invalid expire time in '{name}' command"));
    let ms = if secs {
        if v > MAX_FIELD_MS / 1000 {
            return Err(bad());
        }
        v * 1000
    } else {
        v
    };
    if ms > MAX_FIELD_MS - base {
        return Err(bad());
    }
    Ok(ms + base)
}

/// Lower-case command name for error texts.
pub fn name_of(args: &[Vec<u8>]) -> String {
    String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
}

/// Replies with one integer code per name.
pub fn reply_codes(out: &mut Reply, codes: &[i64]) {
    out.array(codes.len());
    codes.iter().for_each(|&c| out.int(c));
}

/// Propagates the deletion of `names` of `key` (past-deadline parts): one
/// `T::DEL_CMD` per name, as Redis replays field expiry with HDELs.
pub fn propagate_dels<T: SubExpire, F: AsRef<[u8]>>(ctx: &mut Ctx, key: &[u8], names: impl IntoIterator<Item = F>) {
    if ctx.srv.feed.is_empty() {
        return;
    }
    let db = ctx.client.db;
    for f in names {
        ctx.srv.feed.push(db, vec![T::DEL_CMD.to_vec(), key.to_vec(), f.as_ref().to_vec()]);
    }
}

/// The EXPIRE commands of a family: `key time [NX|XX|GT|LT] WORD
/// numfields name...`; `secs` scales the time, `relative` adds now.
pub fn expire_generic<T: SubExpire>(ctx: &mut Ctx, args: &[Vec<u8>], secs: bool, relative: bool) -> CmdResult {
    let now = ctx.now;
    let cfg = T::cfg(ctx.srv);
    let (codes, at, deadline) = {
        // The key's type is checked before the arguments, as in Redis.
        let w = ctx.write::<T>(&args[1], T::CLASS)?;
        let deadline = parse_deadline(&name_of(args), &args[2], secs, if relative { now } else { 0 })?;
        let cond = [("nx", ExpireCond::Nx), ("xx", ExpireCond::Xx), ("gt", ExpireCond::Gt), ("lt", ExpireCond::Lt)]
            .into_iter()
            .find(|(w, _)| is(&args[3], w))
            .map(|(_, c)| c);
        let at = if cond.is_some() { 4 } else { 3 };
        let names = fields_arg(args, at, "Parameter `numFields` should be greater than 0", T::WORD)?;
        let codes = match w {
            None => vec![-2; names.len()],
            Some(mut w) => {
                let v = w.get();
                let codes: Vec<i64> = names.iter().map(|f| v.set_expire(f, deadline, cond.unwrap_or(ExpireCond::Always), now, &cfg)).collect();
                // A deadline in the past deletes the parts (code 2).
                if codes.contains(&2) {
                    w.changed(T::DEL_EVENT);
                } else if codes.contains(&1) {
                    w.changed(T::EXPIRE_EVENT);
                }
                codes
            }
        };
        (codes, at, deadline)
    };
    if codes.iter().any(|&c| c == 1 || c == 2) {
        propagate_expire::<T>(ctx, args, at, &codes, deadline);
    }
    reply_codes(ctx.out(), &codes);
    Ok(())
}

/// How an EXPIRE-family command is replayed, as Redis replays HEXPIRE:
/// names it deleted (a deadline in the past) as deletions, the names whose
/// deadline it set as one `*PEXPIREAT` with the absolute deadline in ms
/// (keeping the NX/XX/GT/LT word), names it left alone not at all, so a
/// replay never depends on the state or the clock it meets.
fn propagate_expire<T: SubExpire>(ctx: &mut Ctx, args: &[Vec<u8>], word_at: usize, codes: &[i64], deadline: i64) {
    if ctx.srv.feed.is_empty() {
        return;
    }
    let names = &args[word_at + 2..];
    propagate_dels::<T, _>(ctx, &args[1], names.iter().zip(codes).filter(|(_, &c)| c == 2).map(|(f, _)| f));
    let set: Vec<&Vec<u8>> = names.iter().zip(codes).filter(|(_, &c)| c == 1).map(|(f, _)| f).collect();
    if set.is_empty() {
        ctx.srv.feed.skip_current();
        return;
    }
    let mut argv = vec![T::PEXPIREAT_CMD.to_vec(), args[1].clone(), deadline.to_string().into_bytes()];
    // The condition word, if any, sits between the time and the keyword.
    argv.extend(args[3..word_at].iter().cloned());
    argv.push(T::WORD.as_bytes().to_vec());
    argv.push(set.len().to_string().into_bytes());
    argv.extend(set.into_iter().cloned());
    ctx.srv.feed.replace_current(argv);
}

/// The TTL queries of a family (`key WORD numfields name...`): remaining
/// time (`relative`) or deadline, in seconds (rounded up, as Redis) or ms;
/// -2 no such part, -1 no TTL.
pub fn ttl_generic<T: SubExpire>(ctx: &mut Ctx, args: &[Vec<u8>], secs: bool, relative: bool) -> CmdResult {
    let now = ctx.now;
    let (v, out) = ctx.read_out::<T>(&args[1])?;
    let names = fields_arg(args, 2, NUMFIELDS_POSITIVE, T::WORD)?;
    let base = if relative { now } else { 0 };
    out.array(names.len());
    for f in names {
        out.int(match v.and_then(|v| v.expire_of(f, now)) {
            None => -2,
            Some(None) => -1,
            Some(Some(d)) if d <= now => -2,
            Some(Some(d)) if secs => (d + 999 - base) / 1000,
            Some(Some(d)) => d - base,
        });
    }
    Ok(())
}

/// The PERSIST command of a family: `key WORD numfields name...`.
pub fn persist_generic<T: SubExpire>(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let cfg = T::cfg(ctx.srv);
    let codes = {
        let w = ctx.write::<T>(&args[1], T::CLASS)?;
        let names = fields_arg(args, 2, NUMFIELDS_POSITIVE, T::WORD)?;
        match w {
            None => vec![-2; names.len()],
            Some(mut w) => {
                let v = w.get();
                let codes: Vec<i64> = names.iter().map(|f| v.persist(f, now, &cfg)).collect();
                if codes.contains(&1) {
                    w.changed(T::PERSIST_EVENT);
                }
                codes
            }
        }
    };
    reply_codes(ctx.out(), &codes);
    Ok(())
}

/// EXPIREMEMBER key member delay [s|ms] (KeyDB's; seconds by default).
pub fn expiremember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let v = arg_i64(&args[3])?;
    if args.len() > 5 {
        return Err(CmdError::err("Invalid number of arguments"));
    }
    let unit = match args.get(4) {
        None => 1000,
        Some(u) if is(u, "s") => 1000,
        Some(u) if is(u, "ms") => 1,
        Some(_) => return Err(CmdError::err("Invalid unit arg")),
    };
    let now = ctx.now;
    member_expire_at(ctx, args, v.saturating_mul(unit).saturating_add(now))
}

/// EXPIREMEMBERAT key member unix-seconds (KeyDB's).
pub fn expirememberat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let v = arg_i64(&args[3])?;
    member_expire_at(ctx, args, v.saturating_mul(1000))
}

/// PEXPIREMEMBERAT key member unix-ms (KeyDB's).
pub fn pexpirememberat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let v = arg_i64(&args[3])?;
    member_expire_at(ctx, args, v)
}

/// The KeyDB commands once the deadline is known: 0 for a missing key or
/// member, 1 once the deadline is set (a deadline already past deletes the
/// member, as KeyDB's expiry would at once), "object type is unsupported"
/// for other types, as KeyDB says.
fn member_expire_at(ctx: &mut Ctx, args: &[Vec<u8>], deadline: i64) -> CmdResult {
    if deadline > MAX_FIELD_MS {
        return Err(CmdError::err(format!("invalid expire time in '{}' command", name_of(args))));
    }
    let kind = ctx.read_with(&args[1], |v| Some(v.kind()))?;
    match kind {
        None => {
            ctx.out().int(0);
            Ok(())
        }
        Some(storage::value::Kind::Hash) => expire_one::<Hash>(ctx, &args[1], &args[2], deadline),
        Some(storage::value::Kind::Set) => expire_one::<Set>(ctx, &args[1], &args[2], deadline),
        Some(storage::value::Kind::ZSet) => expire_one::<ZSet>(ctx, &args[1], &args[2], deadline),
        Some(_) => Err(CmdError::err("object type is unsupported")),
    }
}

/// Sets the deadline of one part of the `T` at `key`; replays it as the
/// family's own commands.
fn expire_one<T: SubExpire>(ctx: &mut Ctx, key: &[u8], name: &[u8], deadline: i64) -> CmdResult {
    let now = ctx.now;
    let cfg = T::cfg(ctx.srv);
    let code = match ctx.write::<T>(key, T::CLASS)? {
        None => -2,
        Some(mut w) => {
            let code = w.get().set_expire(name, deadline.max(0), ExpireCond::Always, now, &cfg);
            match code {
                2 => w.changed(T::DEL_EVENT),
                1 => w.changed(T::EXPIRE_EVENT),
                _ => {}
            }
            code
        }
    };
    if !ctx.srv.feed.is_empty() {
        match code {
            2 => {
                propagate_dels::<T, _>(ctx, key, [name]);
                ctx.srv.feed.skip_current();
            }
            1 => {
                let argv = vec![T::PEXPIREAT_CMD.to_vec(), key.to_vec(), deadline.to_string().into_bytes(), T::WORD.as_bytes().to_vec(), b"1".to_vec(), name.to_vec()];
                ctx.srv.feed.replace_current(argv);
            }
            _ => ctx.srv.feed.skip_current(),
        }
    }
    ctx.out().int(i64::from(code > 0));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn fields_argument_errors() {
        let a = argv("httl k FIELDS 2 a b");
        assert_eq!(fields_arg(&a, 2, NUMFIELDS_POSITIVE, "FIELDS").unwrap().len(), 2);
        let e = |s: &str, w: &str| fields_arg(&argv(s), 2, NUMFIELDS_POSITIVE, w).unwrap_err().message();
        assert_eq!(e("httl k FIELDS 3 a b", "FIELDS"), "ERR The `numfields` parameter must match the number of arguments");
        assert_eq!(e("httl k FIELDS 0 a", "FIELDS"), "ERR Number of fields must be a positive integer");
        assert_eq!(e("httl k FIELDS x a", "FIELDS"), "ERR Number of fields must be a positive integer");
        assert_eq!(e("httl k FIELD 1 a", "FIELDS"), "ERR Mandatory argument FIELDS is missing or not at the right position");
        assert_eq!(e("sttl k FIELDS 1 a", "MEMBERS"), "ERR Mandatory argument MEMBERS is missing or not at the right position");
        assert_eq!(fields_arg(&argv("sttl k members 1 a"), 2, NUMFIELDS_POSITIVE, "MEMBERS").unwrap().len(), 1);
    }

    #[test]
    fn deadlines_are_bounded() {
        assert_eq!(parse_deadline("hexpire", b"10", true, 5), Ok(10_005));
        assert_eq!(parse_deadline("hpexpire", b"-1", false, 0).unwrap_err().message(), "ERR invalid expire time, must be >= 0");
        assert_eq!(
            parse_deadline("hexpire", b"70368744177", true, 1000).unwrap_err().message(),
            "ERR invalid expire time in 'hexpire' command"
        );
        assert_eq!(parse_deadline("hpexpireat", b"70368744177663", false, 0), Ok(MAX_FIELD_MS));
        assert_eq!(parse_deadline("hexpire", b"x", true, 0), Err(CmdError::NotInt));
    }
}
