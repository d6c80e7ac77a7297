//! The STREAM command family: XADD ... XINFO, consumer groups included.
//!
//! Handlers parse every argument in Redis's order (options and IDs first,
//! then the key's type, except where Redis looks the key up first, as XACK
//! and XDEL do), so an error is always the only reply. The stream itself
//! (`storage::types::stream::Stream`) keeps entries, groups and the
//! bookkeeping (entries read, lag); handlers only decide what to reply.
//!
//! Blocking: XREAD/XREADGROUP with BLOCK that find nothing park the client
//! on their keys (`crate::blocking`); a signal on a key re-runs the whole
//! command, as Redis 7 does. XREAD's `$` is pinned to the stream's last ID
//! at block time (the re-run argv), else a re-run would never see data.
//! XREADGROUP also wakes when its key is deleted, changes type or loses
//! its group, and the re-run then answers NOGROUP or WRONGTYPE. Keyspace
//! notifications (class `notify::STREAM`) go out through `ctx.modified` and
//! `ctx.notify`. Writes are propagated as sent, except group reads, which
//! go out as Redis sends them: XCLAIM / XGROUP SETID / XGROUP
//! CREATECONSUMER (`propagate_group_read`).
//!
//! Redis 8.4's XREADGROUP ... CLAIM: a `>` read first takes over the
//! group's pending entries idle long enough (`Stream::claim_idle`), then
//! reads new ones; blocked, it also wakes when the next pending entry
//! becomes claimable (`BlockRequest::wake_at`).
//!
//! Redis 8.2's deletion policies: XDELEX and XACKDEL, and XADD/XTRIM's
//! KEEPREF / DELREF / ACKED, choose what a deleted entry does to the groups'
//! pending lists (`storage::types::stream::RefPolicy`). XDELEX and XACKDEL
//! parse their whole argument list (policy, `IDS numids id...`) before
//! looking at the key, and answer one code per ID, -1 for each when the key
//! (or XACKDEL's group) is missing.

use crate::notify;
use resp::Reply;
use storage::types::stream::{AddError, AddId, ClaimedEntry, Entry, Group, NackMode, RefPolicy, Retry, Stream, StreamId, Trim, INVALID_ENTRIES_READ, MAX_ENTRY_BYTES};
use storage::ValueRef;

use crate::access::Write;
use crate::command::flags::*;
use crate::commands::introspection::help_reply;
use crate::command::{arg_i64, is, keys, kf, range_spec, spec, Begin, CmdError, CmdResult, Ctx, Find, KeySpec, Spec, container};
use crate::args::parse_timeout_ms;
use crate::blocking::{BlockRequest, ReadyFn};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    const WF: &[&str] = &["write", "stream", "fast"];
    const WS: &[&str] = &["write", "stream", "slow"];
    const RF: &[&str] = &["read", "stream", "fast"];
    const RS: &[&str] = &["read", "stream", "slow"];
    const HS: &[&str] = &["stream", "slow"];
    let k1 = keys(1, 1, 1);
    let k2 = keys(2, 2, 1);
    let s = |name, arity, flags, k, h, acl, summary, since| spec(name, arity, flags, k, h).acl(acl).group("stream").doc(summary, since);
    let one = |f: crate::command::KeyFlags, at: i32| vec![range_spec(f, at, 0, 1)];
    let after_streams = |from: i32| {
        vec![KeySpec { flags: kf::RO_ACCESS, begin: Begin::Keyword("STREAMS", from), find: Find::Range { lastkey: -1, keystep: 1, limit: 2 } }]
    };
    const RW_INSERT: crate::command::KeyFlags = &["RW", "insert"];
    const RW_DELETE: crate::command::KeyFlags = &["RW", "delete"];
    vec![
        s("xadd", -5, WRITE | DENYOOM | FAST, k1, xadd, WF, "Appends a new message to a stream. Creates the key if it doesn't exist.", "5.0.0"),
        s("xlen", 2, READONLY | FAST, k1, xlen, RF, "Return the number of messages in a stream.", "5.0.0").key_specs(one(&["RO"], 1)),
        s("xrange", -4, READONLY, k1, xrange, RS, "Returns the messages from a stream within a range of IDs.", "5.0.0"),
        s("xrevrange", -4, READONLY, k1, xrevrange, RS, "Returns the messages from a stream within a range of IDs in reverse order.", "5.0.0"),
        s("xdel", -3, WRITE | FAST, k1, xdel, WF, "Returns the number of messages after removing them from a stream.", "5.0.0").key_specs(one(RW_DELETE, 1)),
        s("xtrim", -4, WRITE, k1, xtrim, WS, "Deletes messages from the beginning of a stream.", "5.0.0").key_specs(one(RW_DELETE, 1)),
        s("xread", -4, READONLY | BLOCKING, crate::command::NO_KEYS, xread, &["read", "stream", "slow", "blocking"], "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", "5.0.0")
            .key_specs(after_streams(1)),
        s("xreadgroup", -7, WRITE | BLOCKING, crate::command::NO_KEYS, xreadgroup, &["write", "stream", "slow", "blocking"], "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.", "5.0.0")
            .key_specs(after_streams(4)),
        s("xdelex", -5, WRITE | FAST, k1, xdelex, &["write", "stream", "fast"], "Deletes one or multiple entries from the stream, choosing what happens to the consumer groups' references to them.", "8.2.0")
            .key_specs(one(RW_DELETE, 1)),
        s("xackdel", -6, WRITE | FAST, k1, xackdel, WF, "Acknowledges and conditionally deletes one or multiple entries for a stream consumer group.", "8.2.0")
            .key_specs(one(&["RW", "update", "delete"], 1)),
        s("xnack", -7, WRITE | FAST, k1, xnack, WF, "Releases pending messages back to the group's PEL without acknowledging them, making them available for re-delivery.", "8.8.0")
            .key_specs(one(&["RW", "update"], 1)),
        s("xcfgset", -2, WRITE | FAST, k1, xcfgset, WF, "Sets the IDMP configuration parameters for a stream.", "8.6.0").key_specs(one(&["RW", "update"], 1)),
        s("xidmprecord", 5, WRITE | FAST, k1, xidmprecord, WF, "An internal command for replicating idempotent stream IDs.", "8.6.0").key_specs(one(&["RW", "update"], 1)),
        s("xack", -4, WRITE | FAST, k1, xack, WF, "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.", "5.0.0"),
        s("xpending", -3, READONLY, k1, xpending, RS, "Returns the information and entries from a stream consumer group's pending entries list.", "5.0.0"),
        s("xclaim", -6, WRITE | FAST, k1, xclaim, WF, "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.", "5.0.0"),
        s("xautoclaim", -6, WRITE | FAST, k1, xautoclaim, WF, "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.", "6.2.0").key_specs(one(RW_DELETE, 1)),
        s("xsetid", -3, WRITE | DENYOOM | FAST, k1, xsetid, WF, "An internal command for replicating stream values.", "5.0.0"),
        container(
            "xgroup",
            vec![
                s("create", -5, WRITE | DENYOOM, k2, xgroup_create, WS, "Creates a consumer group.", "5.0.0").key_specs(one(RW_INSERT, 2)),
                s("createconsumer", 5, WRITE | DENYOOM, k2, xgroup_createconsumer, WS, "Creates a consumer in a consumer group.", "6.2.0").key_specs(one(RW_INSERT, 2)),
                s("delconsumer", 5, WRITE, k2, xgroup_delconsumer, WS, "Deletes a consumer from a consumer group.", "5.0.0").key_specs(one(RW_DELETE, 2)),
                s("destroy", 4, WRITE, k2, xgroup_destroy, WS, "Destroys a consumer group.", "5.0.0").key_specs(one(RW_DELETE, 2)),
                s("setid", -5, WRITE, k2, xgroup_setid, WS, "Sets the last-delivered ID of a consumer group.", "5.0.0"),
                s("help", 2, LOADING | STALE, crate::command::NO_KEYS, xgroup_help, HS, "Returns helpful text about the different subcommands.", "5.0.0"),
            ],
        )
        .group("stream")
        .doc("A container for consumer groups commands.", "5.0.0"),
        container(
            "xinfo",
            vec![
                s("consumers", 4, READONLY, k2, xinfo_consumers, RS, "Returns a list of the consumers in a consumer group.", "5.0.0"),
                s("groups", 3, READONLY, k2, xinfo_groups, RS, "Returns a list of the consumer groups of a stream.", "5.0.0"),
                s("stream", -3, READONLY, k2, xinfo_stream, RS, "Returns information about a stream.", "5.0.0"),
                s("help", 2, LOADING | STALE, crate::command::NO_KEYS, xinfo_help, HS, "Returns helpful text about the different subcommands.", "5.0.0"),
            ],
        )
        .group("stream")
        .doc("A container for stream introspection commands.", "5.0.0"),
    ]
}

// ---- shared helpers ---------------------------------------------------------

fn invalid_id() -> CmdError {
    CmdError::err("Invalid stream ID specified as stream command argument")
}

/// Redis's string2ull: an unsigned decimal, optionally after blanks and a
/// '+' (strtoull's leniency); no sign otherwise.
fn parse_u64(s: &[u8]) -> Option<u64> {
    let t = s.iter().position(|c| !c.is_ascii_whitespace()).map_or(&s[s.len()..], |i| &s[i..]);
    let t = t.strip_prefix(b"+").unwrap_or(t);
    if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
        return None;
    }
    t.iter().try_fold(0u64, |v, &c| v.checked_mul(10)?.checked_add(u64::from(c - b'0')))
}

/// Parsed ID text: `ms` and, unless it was `ms-*`, the sequence.
fn parse_id_parts(a: &[u8], missing_seq: u64, strict: bool, allow_star: bool) -> Result<(u64, Option<u64>), CmdError> {
    if a.len() > 127 {
        return Err(invalid_id());
    }
    match a {
        b"-" | b"+" if strict => Err(invalid_id()),
        b"-" => Ok((0, Some(0))),
        b"+" => Ok((u64::MAX, Some(u64::MAX))),
        _ => {
            let (ms, seq) = match a.iter().position(|&c| c == b'-') {
                Some(d) => (&a[..d], Some(&a[d + 1..])),
                None => (a, None),
            };
            let ms = parse_u64(ms).ok_or_else(invalid_id)?;
            let seq = match seq {
                None => Some(missing_seq),
                Some(b"*") if allow_star => None,
                Some(s) => Some(parse_u64(s).ok_or_else(invalid_id)?),
            };
            Ok((ms, seq))
        }
    }
}

/// An ID argument; `-` and `+` are the extremes.
fn arg_id(a: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    let (ms, seq) = parse_id_parts(a, missing_seq, false, false)?;
    Ok(StreamId::new(ms, seq.unwrap_or(0)))
}

/// An ID argument where `-` and `+` are refused.
fn arg_strict_id(a: &[u8]) -> Result<StreamId, CmdError> {
    let (ms, seq) = parse_id_parts(a, 0, true, false)?;
    Ok(StreamId::new(ms, seq.unwrap_or(0)))
}

/// A range bound: an ID, `-`/`+`, or `(ID` (exclusive, moved one step
/// inwards; `start` tells which way).
fn arg_bound(a: &[u8], start: bool) -> Result<StreamId, CmdError> {
    let missing = if start { 0 } else { u64::MAX };
    if a.len() > 1 && a[0] == b'(' {
        let id = parse_id_parts(&a[1..], missing, true, false).map(|(ms, seq)| StreamId::new(ms, seq.unwrap_or(0)))?;
        return if start {
            id.incr().ok_or_else(|| CmdError::err("invalid start ID for the interval"))
        } else {
            id.decr().ok_or_else(|| CmdError::err("invalid end ID for the interval"))
        };
    }
    arg_id(a, missing)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn no_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::Custom(format!("NOGROUP No such key '{}' or consumer group '{}'", lossy(key), lossy(group)))
}

fn no_group_for_key(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::Custom(format!("NOGROUP No such consumer group '{}' for key name '{}'", lossy(group), lossy(key)))
}


fn reply_id(out: &mut Reply, id: StreamId) {
    out.bulk(id.to_string().as_bytes());
}

fn reply_entry(out: &mut Reply, e: &Entry) {
    out.array(2);
    reply_id(out, e.id);
    out.array(e.fields.len());
    for f in &e.fields {
        out.bulk(f);
    }
}

fn reply_entries(out: &mut Reply, es: &[Entry]) {
    out.array(es.len());
    for e in es {
        reply_entry(out, e);
    }
}

fn reply_opt_int(out: &mut Reply, v: Option<i64>) {
    match v {
        Some(v) => out.int(v),
        None => out.null(),
    }
}

// ---- XADD, XTRIM ------------------------------------------------------------

/// Trim options shared by XADD and XTRIM (and XADD's own options).
#[derive(Default)]
struct AddTrim {
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// What trimming does about group references (KEEPREF by default).
    policy: RefPolicy,
    /// XADD's ID (None: `*`) and the index of the first field.
    id: Option<AddId>,
    /// XADD IDMP producer-id idempotent-id (Some) or IDMPAUTO producer-id
    /// (None), with the argv range the option took.
    idmp: Option<IdmpArg>,
    fields_at: usize,
}

/// XADD's IDMP option: producer ID, idempotent ID (None for IDMPAUTO) and
/// the argv range it took.
type IdmpArg = (Vec<u8>, Option<Vec<u8>>, std::ops::Range<usize>);

/// Parses XADD's (`xadd`) or XTRIM's options, as Redis does.
fn parse_add_trim(args: &[Vec<u8>], xadd: bool, node_max_entries: usize) -> Result<AddTrim, CmdError> {
    let mut o = AddTrim::default();
    let mut limit_given = false;
    let mut policy_given = false;
    let mut i = 2;
    let both = || CmdError::err("syntax error, MAXLEN and MINID options at the same time are not compatible");
    while i < args.len() {
        let more = args.len() - 1 - i;
        let a = &args[i];
        if xadd && a.as_slice() == b"*" {
            break;
        } else if (is(a, "maxlen") || is(a, "minid")) && more > 0 {
            if o.trim.is_some() {
                return Err(both());
            }
            o.approx = false;
            let next = args[i + 1].as_slice();
            if more >= 2 && (next == b"~" || next == b"=") {
                o.approx = next == b"~";
                i += 1;
            }
            let v = &args[i + 1];
            o.trim = Some(if is(a, "maxlen") {
                let n = arg_i64(v)?;
                if n < 0 {
                    return Err(CmdError::err("The MAXLEN argument must be >= 0."));
                }
                Trim::MaxLen(n as u64)
            } else {
                Trim::MinId(arg_strict_id(v)?)
            });
            i += 1;
        } else if is(a, "limit") && more > 0 {
            let n = arg_i64(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            o.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if let Some(p) = ref_policy(a).filter(|_| !policy_given) {
            o.policy = p;
            policy_given = true;
        } else if xadd && is(a, "nomkstream") {
            o.nomkstream = true;
        } else if xadd && ((is(a, "idmp") && more >= 2) || (is(a, "idmpauto") && more >= 1)) {
            if o.idmp.is_some() {
                return Err(CmdError::err("IDMP/IDMPAUTO specified multiple times"));
            }
            let auto = is(a, "idmpauto");
            let pid = args[i + 1].clone();
            let name = if auto { "IDMPAUTO" } else { "IDMP" };
            if pid.is_empty() {
                return Err(CmdError::err(format!("{name} requires a non-empty producer ID")));
            }
            let iid = if auto { None } else { Some(args[i + 2].clone()) };
            if iid.as_ref().is_some_and(Vec::is_empty) {
                return Err(CmdError::err("IDMP requires a non-empty idempotent ID"));
            }
            let took = if auto { 2 } else { 3 };
            o.idmp = Some((pid, iid, i..i + took));
            i += took - 1;
        } else if xadd {
            let (ms, seq) = parse_id_parts(a, 0, true, true)?;
            o.id = Some(match seq {
                Some(seq) => AddId::Exact(StreamId::new(ms, seq)),
                None => AddId::Ms(ms),
            });
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    o.fields_at = i + 1;
    if o.idmp.is_some() && o.id.is_some() {
        return Err(CmdError::err("IDMP/IDMPAUTO can be used only with auto-generated IDs"));
    }
    if o.limit != 0 && o.trim.is_none() {
        return Err(CmdError::err("syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && o.trim.is_none() {
        return Err(CmdError::err("syntax error, XTRIM must be called with a trimming strategy"));
    }
    if limit_given {
        if !o.approx {
            return Err(CmdError::err("syntax error, LIMIT cannot be used without the special ~ option"));
        }
    } else if o.approx {
        o.limit = (100 * node_max_entries as u64).clamp(1, 1_000_000);
        if node_max_entries == 0 {
            o.limit = 10_000;
        }
    } else {
        o.limit = 0;
    }
    Ok(o)
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]
pub fn xadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let cfg = ctx.srv.config.stream;
    let o = parse_add_trim(args, true, cfg.node_max_entries)?;
    let pairs = args.get(o.fields_at..).unwrap_or(&[]);
    if pairs.len() < 2 || pairs.len() % 2 == 1 {
        return Err(CmdError::Arity("xadd".into()));
    }
    if o.id == Some(AddId::Exact(StreamId::MIN)) {
        return Err(CmdError::err("The ID specified in XADD must be greater than 0-0"));
    }
    let key = &args[1];
    let Some(w) = ctx.write::<Stream>(key, notify::STREAM)? else {
        if o.nomkstream {
            ctx.out().null();
            return Ok(());
        }
        // An empty stream is a key: check what can fail before creating
        // one (a new stream takes any ID but 0-0, refused above).
        check_entry_size(pairs)?;
        return append(ctx.write_or_create(key, notify::STREAM, Stream::new)?, &o, pairs, args);
    };
    append(w, &o, pairs, args)
}

/// Refuses an entry whose fields and values are too large to store.
fn check_entry_size(pairs: &[Vec<u8>]) -> CmdResult {
    if pairs.iter().map(Vec::len).sum::<usize>() > MAX_ENTRY_BYTES {
        return Err(CmdError::err("Elements are too large to be stored"));
    }
    Ok(())
}

/// XADD's write: appends `pairs` to the stream under `w` with the ID and
/// trimming `o` asks for, and replies the new entry's ID.
fn append(mut w: Write<Stream>, o: &AddTrim, pairs: &[Vec<u8>], args: &[Vec<u8>]) -> CmdResult {
    let (cfg, now) = (w.ctx().srv.config.stream, w.ctx().now);
    let (s, out) = w.parts();
    let idmp = o.idmp.as_ref().map(|(pid, iid, _)| (pid, iid.clone().unwrap_or_else(|| auto_iid(pairs))));
    if let Some((pid, iid)) = &idmp {
        if let Some(id) = s.idmp.lookup(pid, iid, now, &cfg) {
            // Sent before: the entry it made, and nothing changes.
            reply_id(out, id);
            w.ctx().srv.feed.skip_current();
            return Ok(());
        }
    }
    let id = s.next_id(o.id.unwrap_or(AddId::Auto), now.max(0) as u64).map_err(|e| match e {
        AddError::Exhausted => CmdError::err("The stream has exhausted the last possible ID, unable to add more items"),
        AddError::NotGreater => CmdError::err("The ID specified in XADD is equal or smaller than the target stream top item"),
    })?;
    check_entry_size(pairs)?;
    s.append(id, pairs, &cfg);
    if let Some((pid, iid)) = &idmp {
        s.idmp.record(pid, iid, id, now, &cfg);
    }
    let trimmed = o.trim.map_or(0, |t| s.trim_with(t, o.approx, o.limit, o.policy));
    reply_id(out, id);
    w.changed("xadd");
    if trimmed > 0 {
        w.changed("xtrim");
    }
    // Replayed with the ID it got, as Redis rewrites `*` and `ms-*`.
    // With IDMP, as the plain XADD and an XIDMPRECORD of what it made
    // (IDMPAUTO's ID is computed once, here).
    if !w.ctx().srv.feed.is_empty() {
        let mut argv = args.to_vec();
        argv[o.fields_at - 1] = id.to_string().into_bytes();
        match (&o.idmp, idmp) {
            (Some((_, _, took)), Some((pid, iid))) => {
                argv.drain(took.clone());
                let record = vec![b"XIDMPRECORD".to_vec(), args[1].clone(), pid.clone(), iid, id.to_string().into_bytes()];
                let c = w.ctx();
                let db = c.client.db;
                c.srv.feed.skip_current();
                c.srv.feed.push(db, argv);
                c.srv.feed.push(db, record);
            }
            _ => w.ctx().srv.feed.replace_current(argv),
        }
    }
    Ok(())
}

/// IDMPAUTO's idempotent ID: a hash of the entry's field-value pairs that
/// does not depend on their order.
fn auto_iid(pairs: &[Vec<u8>]) -> Vec<u8> {
    let mut kv: Vec<(&[u8], &[u8])> = pairs.chunks(2).map(|c| (c[0].as_slice(), c[1].as_slice())).collect();
    kv.sort_unstable();
    let mut buf = Vec::new();
    for (k, v) in kv {
        buf.extend_from_slice(&(k.len() as u64).to_le_bytes());
        buf.extend_from_slice(k);
        buf.extend_from_slice(&(v.len() as u64).to_le_bytes());
        buf.extend_from_slice(v);
    }
    xxhash_rust::xxh3::xxh3_128(&buf).to_be_bytes().to_vec()
}

/// XCFGSET key [IDMP-DURATION seconds] [IDMP-MAXSIZE count] (Redis 8.6):
/// the stream's idempotency settings; changing either forgets the IDs
/// remembered so far.
pub fn xcfgset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() == 2 {
        return Err(CmdError::err("At least one parameter (IDMP-DURATION or IDMP-MAXSIZE) is required"));
    }
    let (mut duration, mut maxsize) = (None, None);
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        let Some(v) = args.get(i + 1).filter(|_| is(a, "idmp-duration") || is(a, "idmp-maxsize")) else { return Err(CmdError::Syntax) };
        let n = arg_i64(v)?;
        if is(a, "idmp-duration") {
            if !(1..=86400).contains(&n) {
                return Err(CmdError::err("IDMP-DURATION must be between 1 and 86400 seconds"));
            }
            duration = Some(n as u64);
        } else {
            if !(1..=10000).contains(&n) {
                return Err(CmdError::err("IDMP-MAXSIZE must be between 1 and 10000 entries"));
            }
            maxsize = Some(n as u64);
        }
        i += 2;
    }
    let cfg = ctx.srv.config.stream;
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else { return Err(CmdError::err("no such key")) };
    let (s, out) = w.parts();
    s.idmp.configure(duration, maxsize, &cfg);
    out.ok();
    w.ctx().srv.dirty += 1;
    Ok(())
}

/// XIDMPRECORD key producer-id idempotent-id id: records that the
/// producer's idempotent ID made entry `id` (how XADD IDMP is replayed).
pub fn xidmprecord(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let id = arg_strict_id(&args[4])?;
    let (cfg, now) = (ctx.srv.config.stream, ctx.now);
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else { return Err(CmdError::err("no such key")) };
    let (s, out) = w.parts();
    s.idmp.record(&args[2], &args[3], id, now, &cfg);
    out.ok();
    w.ctx().srv.dirty += 1;
    Ok(())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
pub fn xtrim(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let cfg = ctx.srv.config.stream;
    let o = parse_add_trim(args, false, cfg.node_max_entries)?;
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let (s, out) = w.parts();
    let n = o.trim.map_or(0, |t| s.trim_with(t, o.approx, o.limit, o.policy));
    out.int(n as i64);
    if n > 0 {
        w.changed("xtrim");
    }
    Ok(())
}

/// XDEL key id [id ...]
pub fn xdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // The key's type before the IDs, as Redis checks them.
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let ids = args[2..].iter().map(|a| arg_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let (s, out) = w.parts();
    let n = ids.into_iter().filter(|id| s.remove(*id)).count();
    out.int(n as i64);
    if n > 0 {
        w.changed("xdel");
    }
    Ok(())
}

/// KEEPREF, DELREF or ACKED, in any case.
fn ref_policy(a: &[u8]) -> Option<RefPolicy> {
    if is(a, "keepref") {
        Some(RefPolicy::KeepRef)
    } else if is(a, "delref") {
        Some(RefPolicy::DelRef)
    } else if is(a, "acked") {
        Some(RefPolicy::Acked)
    } else {
        None
    }
}

/// The options XDELEX and XACKDEL share, from `args[from..]`: at most one
/// of KEEPREF / DELREF / ACKED (KEEPREF if none) and the `IDS numids id
/// ...` block, the IDs checked before anything changes.
fn parse_ids_block(args: &[Vec<u8>], from: usize) -> Result<(RefPolicy, Vec<StreamId>), CmdError> {
    let mut policy = None;
    let mut ids: Option<&[Vec<u8>]> = None;
    let mut j = from;
    while j < args.len() {
        let a = &args[j];
        if let Some(p) = ref_policy(a).filter(|_| policy.is_none()) {
            policy = Some(p);
            j += 1;
        } else if is(a, "ids") && j + 1 < args.len() && ids.is_none() {
            let n = arg_i64(&args[j + 1])
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| CmdError::err("Number of IDs must be a positive integer"))?;
            let start = j + 2;
            if n as u64 > (args.len() - start) as u64 {
                return Err(CmdError::err("The `numids` parameter must match the number of arguments"));
            }
            ids = Some(&args[start..start + n as usize]);
            j = start + n as usize;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(ids) = ids else { return Err(CmdError::Syntax) };
    let ids = ids.iter().map(|a| arg_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    Ok((policy.unwrap_or_default(), ids))
}

/// Replies `-1` for every ID: the answer when the key or group is missing.
fn reply_all_missing(out: &mut Reply, n: usize) {
    out.array(n);
    for _ in 0..n {
        out.int(-1);
    }
}

/// XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
///
/// One code per ID: -1 not in the stream, 1 deleted, 2 kept because a
/// group still needs it (ACKED).
pub fn xdelex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (policy, ids) = parse_ids_block(args, 2)?;
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else {
        reply_all_missing(ctx.out(), ids.len());
        return Ok(());
    };
    let (s, out) = w.parts();
    out.array(ids.len());
    let mut deleted = 0u64;
    let mut unref = false;
    for id in ids {
        if policy == RefPolicy::DelRef && !s.contains(id) {
            unref |= s.unref_all(id);
        }
        let code = match s.remove_with(id, policy) {
            None => -1,
            Some(true) => {
                deleted += 1;
                1
            }
            Some(false) => 2,
        };
        out.int(code);
    }
    if deleted > 0 {
        w.ctx().srv.dirty += deleted - 1;
        w.changed("xdel");
    } else if unref {
        w.ctx().srv.dirty += 1;
    }
    Ok(())
}

/// XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
///
/// One code per ID: -1 not pending in the group, 1 acknowledged (and
/// deleted if stored), 2 acknowledged but kept because another group
/// still needs it (ACKED).
pub fn xackdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (policy, ids) = parse_ids_block(args, 3)?;
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else {
        reply_all_missing(ctx.out(), ids.len());
        return Ok(());
    };
    let (s, out) = w.parts();
    if s.group(&args[2]).is_none() {
        reply_all_missing(out, ids.len());
        return Ok(());
    }
    out.array(ids.len());
    let (mut acked, mut deleted) = (0u64, 0u64);
    for id in ids {
        let Some(g) = s.group_mut(&args[2]) else { break };
        if !g.ack(id) {
            out.int(-1);
            continue;
        }
        acked += 1;
        let code = match s.remove_with(id, policy) {
            None => 1,
            Some(true) => {
                deleted += 1;
                1
            }
            Some(false) => 2,
        };
        out.int(code);
    }
    let srv = &mut w.ctx().srv;
    srv.dirty += acked;
    if deleted > 0 {
        srv.dirty += deleted - 1;
        w.changed("xdel");
    }
    Ok(())
}

/// XNACK key group SILENT|FAIL|FATAL IDS numids id [id ...] [RETRYCOUNT n]
/// [FORCE] (Redis 8.8): releases pending entries back to the group
/// unowned and at once claimable; replies how many were released.
/// Replayed as sent: the result depends on the group's state only.
pub fn xnack(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mode = if is(&args[3], "silent") {
        NackMode::Silent
    } else if is(&args[3], "fail") {
        NackMode::Fail
    } else if is(&args[3], "fatal") {
        NackMode::Fatal
    } else {
        return Err(CmdError::Syntax);
    };
    if !is(&args[4], "ids") {
        return Err(CmdError::Syntax);
    }
    let n = arg_i64(&args[5]).ok().filter(|n| *n > 0).ok_or_else(|| CmdError::err("Number of IDs must be a positive integer"))?;
    if n as u64 > (args.len() - 6) as u64 {
        return Err(CmdError::err("The `numids` parameter must match the number of arguments"));
    }
    let ids_end = 6 + n as usize;
    let (mut retry, mut force) = (None, false);
    let mut j = ids_end;
    while j < args.len() {
        if is(&args[j], "retrycount") && j + 1 < args.len() && retry.is_none() {
            let c = arg_i64_msg(&args[j + 1], "Invalid RETRYCOUNT option argument for XNACK")?;
            if c < 0 {
                return Err(CmdError::err("Invalid RETRYCOUNT option argument for XNACK"));
            }
            retry = Some(c as u64);
            j += 2;
        } else if is(&args[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let ids = args[6..ids_end].iter().map(|a| arg_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let (key, group) = (&args[1], &args[2]);
    let Some(mut w) = ctx.write::<Stream>(key, notify::STREAM)? else { return Err(no_group(key, group)) };
    let (s, out) = w.parts();
    if s.group(group).is_none() {
        return Err(no_group(key, group));
    }
    let mut released = 0i64;
    for id in ids {
        let create = force && s.contains(id);
        if s.group_mut(group).is_some_and(|g| g.release(id, mode, retry, create)) {
            released += 1;
        }
    }
    out.int(released);
    if released > 0 {
        // Released entries are claimable now: a blocked XREADGROUP ...
        // CLAIM on the key re-runs.
        let c = w.ctx();
        c.srv.dirty += released as u64;
        let db = c.client.db;
        c.srv.blocking.signal(db, key);
    }
    Ok(())
}

/// XLEN key
pub fn xlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = ctx.read::<Stream>(&args[1])?.map_or(0, |s| s.len());
    ctx.out().int(n as i64);
    Ok(())
}

// ---- XRANGE, XREVRANGE ------------------------------------------------------

fn range_generic(ctx: &mut Ctx, args: &[Vec<u8>], rev: bool) -> CmdResult {
    let (sa, ea) = if rev { (&args[3], &args[2]) } else { (&args[2], &args[3]) };
    let start = arg_bound(sa, true)?;
    let end = arg_bound(ea, false)?;
    let mut count: Option<usize> = None;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            count = Some(arg_i64(&args[j + 1])?.max(0) as usize);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let (s, out) = ctx.read_out::<Stream>(&args[1])?;
    let Some(s) = s else {
        out.array(0);
        return Ok(());
    };
    if count == Some(0) {
        out.null_array();
        return Ok(());
    }
    let es = s.range(start, end, rev, count.unwrap_or(0));
    reply_entries(out, &es);
    Ok(())
}

/// XRANGE key start end [COUNT count]
pub fn xrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, false)
}

/// XREVRANGE key end start [COUNT count]
pub fn xrevrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, true)
}

// ---- XREAD, XREADGROUP ------------------------------------------------------

/// A parsed XREAD / XREADGROUP.
struct ReadReq<'a> {
    count: usize,
    /// BLOCK's deadline (Unix ms; None: forever), if BLOCK was given.
    block: Option<Option<i64>>,
    noack: bool,
    /// CLAIM's min-idle-time (XREADGROUP only).
    claim: Option<i64>,
    group: Option<(&'a [u8], &'a [u8])>,
    keys: &'a [Vec<u8>],
    ids: &'a [Vec<u8>],
}

/// What one stream contributes to a read reply.
enum Served {
    /// Entries (XREAD, or new entries for a group).
    Entries(Vec<Entry>),
    /// A consumer's history: pending IDs with their entry, if still stored.
    History(Vec<(StreamId, Option<Entry>)>),
    /// A `>` read with CLAIM: idle pending entries taken over, then new
    /// ones; every entry is replied with its idle time and delivery count
    /// (0 and 0 for new entries).
    /// The third field is the group's last ID before the new entries.
    Claimed(Vec<ClaimedEntry>, Vec<Entry>, StreamId),
}

fn parse_read(args: &[Vec<u8>], xreadgroup: bool, now: i64) -> Result<ReadReq<'_>, CmdError> {
    let mut r = ReadReq { count: 0, block: None, noack: false, claim: None, group: None, keys: &[], ids: &[] };
    let mut streams_at = None;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let a = &args[i];
        if is(a, "block") && more > 0 {
            i += 1;
            r.block = Some(parse_timeout_ms(&args[i], now)?);
        } else if is(a, "count") && more > 0 {
            i += 1;
            r.count = arg_i64(&args[i])?.max(0) as usize;
        } else if is(a, "streams") && more > 0 {
            let rest = args.len() - (i + 1);
            if !rest.is_multiple_of(2) {
                // The wording of Redis after 7.4, which also names XREAD's '+'.
                let (name, sym) = if xreadgroup { ("xreadgroup", "ID or '>'") } else { ("xread", "ID, '+', or '$'") };
                return Err(CmdError::err(format!("Unbalanced '{name}' list of streams: for each stream key an {sym} must be specified.")));
            }
            streams_at = Some(i + 1);
            break;
        } else if is(a, "group") && more >= 2 {
            if !xreadgroup {
                return Err(CmdError::err("The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
            }
            r.group = Some((&args[i + 1], &args[i + 2]));
            i += 2;
        } else if is(a, "noack") {
            if !xreadgroup {
                return Err(CmdError::err("The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
            }
            r.noack = true;
        } else if is(a, "claim") && more > 0 {
            if !xreadgroup {
                return Err(CmdError::err("The CLAIM option is only supported by XREADGROUP. You called XREAD instead."));
            }
            i += 1;
            // The next argument is taken as the value whatever it is (a
            // keyword included), as Redis does; the last CLAIM wins.
            let ms = resp::num::parse_i64(&args[i]).ok_or_else(|| CmdError::err("min-idle-time is not an integer"))?;
            if ms < 0 {
                return Err(CmdError::err("min-idle-time must be a positive integer"));
            }
            r.claim = Some(ms);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let Some(at) = streams_at else { return Err(CmdError::Syntax) };
    if xreadgroup && r.group.is_none() {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }
    let n = (args.len() - at) / 2;
    r.keys = &args[at..at + n];
    r.ids = &args[at + n..];
    Ok(r)
}

/// Resolves each stream's ID argument ("greater than this"; MAX stands for
/// `>`), checking types and groups first, as Redis does.
fn resolve_ids(ctx: &mut Ctx, r: &ReadReq) -> Result<Vec<StreamId>, CmdError> {
    let history_only = |sym: &str| {
        CmdError::err(format!(
            "The {sym} ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The {sym} ID would just return an empty result set."
        ))
    };
    let mut out = Vec::with_capacity(r.keys.len());
    for (key, a) in r.keys.iter().zip(r.ids) {
        let s = ctx.read::<Stream>(key)?;
        if let Some((g, _)) = r.group {
            if s.and_then(|s| s.group(g)).is_none() {
                return Err(CmdError::Custom(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    lossy(key),
                    lossy(g)
                )));
            }
        }
        let id = match a.as_slice() {
            b"$" if r.group.is_some() => return Err(history_only("$")),
            b"$" => s.map_or(StreamId::MIN, |s| s.last_id()),
            b"+" if r.group.is_some() => return Err(history_only("+")),
            b"+" => match s {
                Some(s) => s.last_id().decr().ok_or_else(|| CmdError::err("the stream last element ID is 0-0"))?,
                None => StreamId::MIN,
            },
            b">" if r.group.is_none() => {
                return Err(CmdError::err("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."))
            }
            b">" => StreamId::MAX,
            _ => arg_strict_id(a)?,
        };
        out.push(id);
    }
    Ok(out)
}

/// Serves a parsed read: per stream with something to give, its key and
/// what it gives. Group reads create the consumer and update the group.
/// Also returns the dirty-counter increment, as Redis counts it: one per
/// consumer created and per stream whose group advanced (a history
/// re-read only touches delivery metadata and counts nothing), and the
/// indexes of the keys where a consumer was created.
///
/// A group read changes only the group's bookkeeping (consumers, pending
/// entries, last ID), which Redis signals to no WATCH and no blocked
/// client: its guard records no change, and the caller counts and raises
/// what the read did.
type ReadResult = (Vec<(usize, Served)>, u64, Vec<usize>);
fn read_streams(ctx: &mut Ctx, r: &ReadReq, ids: &[StreamId]) -> Result<ReadResult, CmdError> {
    let now = ctx.now;
    let mut out = Vec::new();
    let mut changed = 0;
    let mut created = Vec::new();
    for (i, (key, gt)) in r.keys.iter().zip(ids).enumerate() {
        let start = gt.incr().unwrap_or(StreamId::MIN);
        let Some((g, c)) = r.group else {
            if let Some(s) = ctx.read::<Stream>(key)? {
                if !s.is_empty() && s.last_entry_id() > *gt {
                    out.push((i, Served::Entries(s.range(start, StreamId::MAX, false, r.count))));
                }
            }
            continue;
        };
        let Some(mut w) = ctx.write::<Stream>(key, notify::STREAM)? else { continue };
        let s = w.get();
        let (last_entry, len) = (s.last_entry_id(), s.len());
        let Some(group) = s.group_mut(g) else { continue };
        if group.create_consumer(c, now) {
            changed += 1;
            created.push(i);
        }
        if let Some(cons) = group.consumer_mut(c) {
            cons.seen_time = now;
        }
        let (has_new, prior_last) = (len > 0 && last_entry > group.last_id, group.last_id);
        if *gt != StreamId::MAX {
            out.push((i, Served::History(s.read_history(g, c, start, r.count, now))));
        } else if let Some(min_idle) = r.claim {
            // Idle pending entries first; new ones fill what COUNT leaves.
            let claimed = s.claim_idle(g, c, min_idle, r.count, now);
            let left = if r.count == 0 { 0 } else { r.count - claimed.len() };
            let fresh = if has_new && (r.count == 0 || left > 0) { s.read_group(g, c, left, r.noack, now) } else { Vec::new() };
            changed += u64::from(!claimed.is_empty()) + u64::from(!fresh.is_empty());
            if !claimed.is_empty() || !fresh.is_empty() {
                out.push((i, Served::Claimed(claimed, fresh, prior_last)));
            }
        } else if has_new {
            let es = s.read_group(g, c, r.count, r.noack, now);
            changed += u64::from(!es.is_empty());
            out.push((i, Served::Entries(es)));
        }
    }
    Ok((out, changed, created))
}

/// The write stream's form of a group read, as Redis propagates it (the
/// read itself is never replayed: it depends on the clock and on what the
/// group held): per stream, `XGROUP CREATECONSUMER` for a consumer created
/// by a NOACK read (first, for every stream), one `XCLAIM key group consumer 0 id TIME t RETRYCOUNT n
/// FORCE JUSTID LASTID last` per entry made or kept pending (claimed ones
/// first), and `XGROUP SETID key group last ENTRIESREAD n` when new entries
/// advanced the group.
fn propagate_group_read(ctx: &mut Ctx, r: &ReadReq, served: &[(usize, Served)], created: &[usize]) {
    let Some((g, c)) = r.group else { return };
    if ctx.srv.feed.is_empty() {
        return;
    }
    ctx.srv.feed.skip_current();
    let db = ctx.client.db;
    let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
    // Consumers are created while the keys are looked up, before any read
    // (and also by a read that then blocks).
    if r.noack {
        for &i in created {
            cmds.push(vec![b"XGROUP".to_vec(), b"CREATECONSUMER".to_vec(), r.keys[i].clone(), g.to_vec(), c.to_vec()]);
        }
    }
    for &(i, ref what) in served {
        let key = &r.keys[i];
        let (claimed, fresh, prior_last): (&[ClaimedEntry], &[Entry], StreamId) = match what {
            Served::Entries(es) => (&[], es, StreamId::MIN),
            Served::Claimed(cl, es, last) => (cl, es, *last),
            Served::History(_) => continue,
        };
        let Ok(Some(s)) = ctx.read::<Stream>(key) else { continue };
        let Some(group) = s.group(g) else { continue };
        let xclaim = |id: StreamId, last: StreamId| -> Option<Vec<Vec<u8>>> {
            let n = group.nack(id)?;
            Some(vec![
                b"XCLAIM".to_vec(),
                key.clone(),
                g.to_vec(),
                c.to_vec(),
                b"0".to_vec(),
                id.to_string().into_bytes(),
                b"TIME".to_vec(),
                n.delivery_time.to_string().into_bytes(),
                b"RETRYCOUNT".to_vec(),
                n.delivery_count.to_string().into_bytes(),
                b"FORCE".to_vec(),
                b"JUSTID".to_vec(),
                b"LASTID".to_vec(),
                last.to_string().into_bytes(),
            ])
        };
        for ce in claimed {
            cmds.extend(xclaim(ce.entry.id, prior_last));
        }
        if !r.noack {
            for e in fresh {
                cmds.extend(xclaim(e.id, e.id));
            }
        }
        if !fresh.is_empty() {
            cmds.push(vec![
                b"XGROUP".to_vec(),
                b"SETID".to_vec(),
                key.clone(),
                g.to_vec(),
                group.last_id.to_string().into_bytes(),
                b"ENTRIESREAD".to_vec(),
                group.entries_read.to_string().into_bytes(),
            ]);
        }
    }
    for argv in cmds {
        ctx.srv.feed.push(db, argv);
    }
}

fn read_generic(ctx: &mut Ctx, args: &[Vec<u8>], xreadgroup: bool) -> CmdResult {
    let now = ctx.now;
    let r = parse_read(args, xreadgroup, now)?;
    let ids = resolve_ids(ctx, &r)?;
    let (served, changed, created) = read_streams(ctx, &r, &ids)?;
    ctx.srv.dirty += changed;
    if changed > 0 {
        propagate_group_read(ctx, &r, &served, &created);
    }
    for i in created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", &r.keys[i]);
    }
    if served.is_empty() {
        match r.block {
            Some(deadline) if ctx.may_block() => block_read(ctx, args, &r, &ids, deadline),
            // No BLOCK, or blocking not allowed (MULTI, scripts): the
            // timeout's reply at once, even for BLOCK 0.
            _ => ctx.out().null_array(),
        }
        return Ok(());
    }
    // Per stream, its key and what it gives: a map in RESP3, an array of
    // two-element arrays in RESP2.
    let out = ctx.out();
    out.keyed(served.len());
    for (i, what) in &served {
        out.keyed_entry();
        out.bulk(&r.keys[*i]);
        match what {
            Served::Entries(es) => reply_entries(out, es),
            Served::Claimed(claimed, fresh, _) => {
                out.array(claimed.len() + fresh.len());
                let with_meta = |out: &mut Reply, e: &Entry, idle: i64, count: u64| {
                    out.array(4);
                    reply_id(out, e.id);
                    out.array(e.fields.len());
                    for f in &e.fields {
                        out.bulk(f);
                    }
                    out.int(idle);
                    out.int(count as i64);
                };
                for ce in claimed {
                    with_meta(out, &ce.entry, ce.idle, ce.delivery_count);
                }
                for e in fresh {
                    with_meta(out, e, 0, 0);
                }
            }
            Served::History(h) => {
                out.array(h.len());
                for (id, e) in h {
                    match e {
                        Some(e) => reply_entry(out, e),
                        None => {
                            out.array(2);
                            reply_id(out, *id);
                            out.null_array();
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Parks the client on the read's keys. XREAD wakes when a key holds a
/// stream (a type change or deletion leaves it waiting); XREADGROUP wakes
/// on any signal, deletion included, so that its re-run reports a lost
/// key or group. `$` IDs are pinned to what they resolved to now.
fn block_read(ctx: &mut Ctx, args: &[Vec<u8>], r: &ReadReq, ids: &[StreamId], deadline: Option<i64>) {
    fn holds_stream(v: Option<ValueRef<'_>>) -> bool {
        matches!(v, Some(ValueRef::Stream(_)))
    }
    fn any(_: Option<ValueRef<'_>>) -> bool {
        true
    }
    let group = r.group.is_some();
    let first_id = args.len() - r.ids.len();
    let rerun_argv = r.ids.iter().any(|a| a.as_slice() == b"$").then(|| {
        let mut argv = args.to_vec();
        for (i, id) in ids.iter().enumerate() {
            if r.ids[i].as_slice() == b"$" {
                argv[first_id + i] = id.to_string().into_bytes();
            }
        }
        argv
    });
    let ready: ReadyFn = if group { any } else { holds_stream };
    // With CLAIM, also wake when the first pending entry of a `>` stream
    // becomes idle enough to claim (no write signals that).
    let wake_at = match (r.claim, r.group) {
        (Some(min_idle), Some((g, _))) => r
            .keys
            .iter()
            .zip(ids)
            .filter(|(_, id)| **id == StreamId::MAX)
            .filter_map(|(k, _)| ctx.read::<Stream>(k).ok().flatten().and_then(|s| s.next_claimable(g, min_idle)))
            .min()
            .filter(|&at| deadline.is_none_or(|d| at < d)),
        _ => None,
    };
    ctx.block(BlockRequest { on_nokey: group, rerun_argv, wake_at, ..BlockRequest::on_keys(r.keys.to_vec(), deadline, ready) });
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
pub fn xread(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    read_generic(ctx, args, false)
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [CLAIM min-idle-time] [NOACK] STREAMS key [key ...] id [id ...]
pub fn xreadgroup(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    read_generic(ctx, args, true)
}

// ---- XGROUP -----------------------------------------------------------------

/// What XGROUP's subcommands share: option parsing, key and group checks.
struct GroupArgs {
    mkstream: bool,
    entries_read: i64,
}

fn xgroup_common(ctx: &mut Ctx, args: &[Vec<u8>], need_group: bool) -> Result<GroupArgs, CmdError> {
    let create = is(&args[1], "create");
    let setid = is(&args[1], "setid");
    let mut g = GroupArgs { mkstream: false, entries_read: INVALID_ENTRIES_READ };
    let mut i = 5;
    while i < args.len() {
        if create && is(&args[i], "mkstream") {
            g.mkstream = true;
            i += 1;
        } else if (create || setid) && is(&args[i], "entriesread") && i + 1 < args.len() {
            let n = arg_i64(&args[i + 1])?;
            if n < 0 && n != INVALID_ENTRIES_READ {
                return Err(CmdError::err("value for ENTRIESREAD must be positive or -1"));
            }
            g.entries_read = n;
            i += 2;
        } else {
            return Err(CmdError::subcommand(args));
        }
    }
    let s = ctx.read::<Stream>(&args[2])?;
    if !g.mkstream {
        let Some(s) = s else {
            return Err(CmdError::err(
                "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ));
        };
        if need_group && s.group(&args[3]).is_none() {
            return Err(no_group_for_key(&args[2], &args[3]));
        }
    }
    Ok(g)
}

/// The stream of an XGROUP subcommand, to edit its groups: it exists
/// (xgroup_common checked). Group bookkeeping is signalled to no WATCH and
/// no blocked client, as in Redis: the guard records no change, and the
/// handlers count the change and raise their event themselves.
fn group_stream<'c, 'a>(ctx: &'c mut Ctx<'a>, args: &'c [Vec<u8>]) -> Result<Write<'c, 'a, Stream>, CmdError> {
    Ok(ctx.write::<Stream>(&args[2], notify::STREAM)?.expect("checked by xgroup_common"))
}

/// The group `args[3]` of the stream under `w` (xgroup_common checked it).
fn group_mut<'w>(w: &'w mut Write<Stream>, args: &[Vec<u8>]) -> &'w mut Group {
    w.get().group_mut(&args[3]).expect("checked by xgroup_common")
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]
pub fn xgroup_create(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let g = xgroup_common(ctx, args, false)?;
    if args.len() > 8 {
        return Err(CmdError::subcommand(args));
    }
    // None: `$`, the stream's last ID.
    let id = if args[4].as_slice() == b"$" { None } else { Some(arg_strict_id(&args[4])?) };
    let mut w = ctx.write_or_create(&args[2], notify::STREAM, Stream::new)?;
    if w.created() {
        // MKSTREAM: a new key is a change to signal and count.
        w.touched();
    }
    let s = w.get();
    let id = id.unwrap_or_else(|| s.last_id());
    if !s.create_group(&args[3], id, s.capped_entries_read(g.entries_read)) {
        return Err(CmdError::Custom("BUSYGROUP Consumer Group name already exists".into()));
    }
    drop(w);
    ctx.srv.dirty += 1;
    ctx.notify(notify::STREAM, "xgroup-create", &args[2]);
    ctx.out().ok();
    Ok(())
}

/// XGROUP SETID key group id|$ [ENTRIESREAD entries-read]
pub fn xgroup_setid(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let g = xgroup_common(ctx, args, true)?;
    if args.len() != 5 && args.len() != 7 {
        return Err(CmdError::subcommand(args));
    }
    // None: `$`, the stream's last ID.
    let id = if args[4].as_slice() == b"$" { None } else { Some(arg_id(&args[4], 0)?) };
    let mut w = group_stream(ctx, args)?;
    let id = id.unwrap_or_else(|| w.get().last_id());
    let entries_read = w.get().capped_entries_read(g.entries_read);
    let grp = group_mut(&mut w, args);
    grp.last_id = id;
    grp.entries_read = entries_read;
    drop(w);
    ctx.srv.dirty += 1;
    ctx.notify(notify::STREAM, "xgroup-setid", &args[2]);
    ctx.out().ok();
    Ok(())
}

/// XGROUP DESTROY key group
pub fn xgroup_destroy(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    xgroup_common(ctx, args, false)?;
    let gone = group_stream(ctx, args)?.get().destroy_group(&args[3]);
    if gone {
        ctx.srv.dirty += 1;
        // Wakes its blocked readers, whose re-run answers NOGROUP (Redis
        // signals the key without touching WATCH).
        let db = ctx.client.db;
        ctx.srv.blocking.signal(db, &args[2]);
        ctx.notify(notify::STREAM, "xgroup-destroy", &args[2]);
    }
    ctx.out().int(gone as i64);
    Ok(())
}

/// XGROUP CREATECONSUMER key group consumer
pub fn xgroup_createconsumer(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    xgroup_common(ctx, args, true)?;
    let now = ctx.now;
    let created = group_mut(&mut group_stream(ctx, args)?, args).create_consumer(&args[4], now);
    if created {
        ctx.srv.dirty += 1;
        ctx.notify(notify::STREAM, "xgroup-createconsumer", &args[2]);
    }
    ctx.out().int(created as i64);
    Ok(())
}

/// XGROUP DELCONSUMER key group consumer
pub fn xgroup_delconsumer(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    xgroup_common(ctx, args, true)?;
    let pending = group_mut(&mut group_stream(ctx, args)?, args).delete_consumer(&args[4]);
    if pending.is_some() {
        ctx.srv.dirty += 1;
        ctx.notify(notify::STREAM, "xgroup-delconsumer", &args[2]);
    }
    ctx.out().int(pending.unwrap_or(0) as i64);
    Ok(())
}

/// XGROUP HELP
pub fn xgroup_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
    Ok(())
}

// ---- XSETID -----------------------------------------------------------------

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
pub fn xsetid(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let id = arg_strict_id(&args[2])?;
    let (mut added, mut max_del) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(&args[i], "entriesadded") && more > 0 {
            let n = arg_i64(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("entries_added must be positive"));
            }
            added = Some(n as u64);
        } else if is(&args[i], "maxdeletedid") && more > 0 {
            let m = arg_strict_id(&args[i + 1])?;
            if id < m {
                return Err(CmdError::err("The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
            max_del = Some(m);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    // Only the stream's IDs change: counted and raised, signalled to no
    // WATCH and no blocked client, as in Redis.
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else { return Err(CmdError::NoSuchKey) };
    let s = w.get();
    if id < s.max_deleted_id() {
        return Err(CmdError::err("The ID specified in XSETID is smaller than current max_deleted_entry_id"));
    }
    if !s.is_empty() {
        if id < s.last_entry_id() {
            return Err(CmdError::err("The ID specified in XSETID is smaller than the target stream top item"));
        }
        if added.is_some_and(|n| s.len() > n) {
            return Err(CmdError::err("The entries_added specified in XSETID is smaller than the target stream length"));
        }
    }
    s.set_ids(id, added, max_del.filter(|m| !m.is_zero()));
    drop(w);
    ctx.srv.dirty += 1;
    ctx.notify(notify::STREAM, "xsetid", &args[1]);
    ctx.out().ok();
    Ok(())
}

// ---- XACK, XPENDING ---------------------------------------------------------

/// XACK key group id [id ...]
pub fn xack(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // Acks change only the group's pending entries: counted, signalled to
    // no WATCH and no blocked client, no event, as in Redis.
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let (s, out) = w.parts();
    let Some(g) = s.group_mut(&args[2]) else {
        out.int(0);
        return Ok(());
    };
    let ids = args[3..].iter().map(|a| arg_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let n = ids.into_iter().filter(|id| g.ack(*id)).count();
    out.int(n as i64);
    w.ctx().srv.dirty += n as u64;
    Ok(())
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut ext = None;
    if argc >= 6 {
        let mut at = 3;
        let mut min_idle = 0;
        if is(&args[3], "idle") {
            min_idle = arg_i64(&args[4])?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = arg_i64(&args[at + 2])?.max(0) as usize;
        let start = arg_bound(&args[at], true)?;
        let end = arg_bound(&args[at + 1], false)?;
        ext = Some((min_idle, start, end, count, args.get(at + 3)));
    }
    let now = ctx.now;
    let (s, out) = ctx.read_out::<Stream>(&args[1])?;
    let Some(g) = s.and_then(|s| s.group(&args[2])) else { return Err(no_group(&args[1], &args[2])) };
    let pel = g.pending();
    match ext {
        None => {
            out.array(4);
            out.int(pel.len() as i64);
            match (pel.first(), pel.last()) {
                (Some(first), Some(last)) => {
                    reply_id(out, first.0);
                    reply_id(out, last.0);
                    let owners: Vec<_> = g.consumers().iter().filter(|c| !c.pending().is_empty()).collect();
                    out.array(owners.len());
                    for c in owners {
                        out.array(2);
                        out.bulk(c.name());
                        out.bulk_i64(c.pending().len() as i64);
                    }
                }
                _ => {
                    out.null();
                    out.null();
                    out.null_array();
                }
            }
        }
        Some((min_idle, start, end, count, consumer)) => {
            let ids: Vec<StreamId> = match consumer {
                Some(c) => match g.consumer(c) {
                    Some(c) => c.pending().to_vec(),
                    None => Vec::new(),
                },
                None => pel.iter().map(|(id, _)| *id).collect(),
            };
            let mut rows = Vec::new();
            for id in ids.into_iter().filter(|id| *id >= start && *id <= end) {
                if rows.len() >= count {
                    break;
                }
                let Some(n) = g.nack(id) else { continue };
                // Released by XNACK: never delivered since; shown idle -1.
                let idle = if n.delivery_time == 0 { -1 } else { (now - n.delivery_time).max(0) };
                if min_idle != 0 && idle != -1 && idle < min_idle {
                    continue;
                }
                rows.push((id, n.consumer.clone().unwrap_or_default(), idle, n.delivery_count));
            }
            out.array(rows.len());
            for (id, c, idle, n) in rows {
                out.array(4);
                reply_id(out, id);
                out.bulk(&c);
                out.int(idle);
                out.int(n as i64);
            }
        }
    }
    Ok(())
}

// ---- XCLAIM, XAUTOCLAIM -----------------------------------------------------

fn arg_i64_msg(a: &[u8], msg: &str) -> Result<i64, CmdError> {
    resp::num::parse_i64(a).ok_or_else(|| CmdError::err(msg))
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
pub fn xclaim(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    // The key and group before the options, as Redis checks them. A claim
    // changes only group bookkeeping: counted and raised below, signalled
    // to no WATCH and no blocked client, as in Redis.
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else { return Err(no_group(&args[1], &args[2])) };
    let (s, out) = w.parts();
    if s.group(&args[2]).is_none() {
        return Err(no_group(&args[1], &args[2]));
    }
    let min_idle = arg_i64_msg(&args[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match arg_strict_id(&args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let (mut force, mut justid, mut retry, mut delivery, mut last_id) = (false, false, None, None, StreamId::MIN);
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = &args[j];
        if is(a, "force") {
            force = true;
        } else if is(a, "justid") {
            justid = true;
        } else if is(a, "idle") && more > 0 {
            j += 1;
            delivery = Some(now.saturating_sub(arg_i64_msg(&args[j], "Invalid IDLE option argument for XCLAIM")?));
        } else if is(a, "time") && more > 0 {
            j += 1;
            delivery = Some(arg_i64_msg(&args[j], "Invalid TIME option argument for XCLAIM")?);
        } else if is(a, "retrycount") && more > 0 {
            j += 1;
            retry = Some(arg_i64_msg(&args[j], "Invalid RETRYCOUNT option argument for XCLAIM")?);
        } else if is(a, "lastid") && more > 0 {
            j += 1;
            last_id = arg_strict_id(&args[j])?;
        } else {
            return Err(CmdError::err(format!("Unrecognized XCLAIM option '{}'", lossy(a))));
        }
        j += 1;
    }
    let delivery = match delivery {
        Some(t) if t >= 0 && t <= now => t,
        _ => now,
    };
    let retry = match retry {
        Some(n) if n >= 0 => Retry::Set(n as u64),
        _ if justid => Retry::Keep,
        _ => Retry::Incr,
    };
    let consumer = args[3].as_slice();
    let mut claimed: Vec<Result<Entry, StreamId>> = Vec::new();
    let mut dirty = 0;
    let created;
    {
        let exists: Vec<bool> = ids.iter().map(|id| s.contains(*id)).collect();
        let g = s.group_mut(&args[2]).expect("checked above");
        let advanced = last_id > g.last_id;
        if advanced {
            g.last_id = last_id;
        }
        created = g.create_consumer(consumer, now);
        dirty += u64::from(created);
        if let Some(c) = g.consumer_mut(consumer) {
            c.seen_time = now;
        }
        for (id, exists) in ids.iter().zip(exists) {
            if !exists {
                dirty += u64::from(g.ack(*id));
                continue;
            }
            if force && g.nack(*id).is_none() {
                g.force_pending(*id, now);
            }
            let Some(n) = g.nack(*id) else { continue };
            if n.consumer.is_some() && min_idle != 0 && now - n.delivery_time < min_idle {
                continue;
            }
            g.claim(*id, consumer, delivery, retry);
            if let Some(c) = g.consumer_mut(consumer) {
                c.active_time = now;
            }
            claimed.push(Err(*id));
            dirty += 1;
        }
        if advanced && claimed.is_empty() {
            dirty += 1;
        }
    }
    if !justid {
        for c in &mut claimed {
            if let Err(id) = *c {
                *c = s.get(id).ok_or(id);
            }
        }
    }
    out.array(claimed.len());
    for c in &claimed {
        match c {
            Ok(e) => reply_entry(out, e),
            Err(id) => reply_id(out, *id),
        }
    }
    drop(w);
    ctx.srv.dirty += dirty;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", &args[1]);
    }
    Ok(())
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
pub fn xautoclaim(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let min_idle = arg_i64_msg(&args[4], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = arg_bound(&args[5], true)?;
    let (mut count, mut justid) = (100usize, false);
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "count") && more > 0 {
            let n = resp::num::parse_i64(&args[j + 1]).filter(|n| (1..=i64::MAX / 16).contains(n));
            count = n.ok_or_else(|| CmdError::err("COUNT must be > 0"))? as usize;
            j += 1;
        } else if is(&args[j], "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = ctx.now;
    // As XCLAIM: group bookkeeping, counted and raised below.
    let Some(mut w) = ctx.write::<Stream>(&args[1], notify::STREAM)? else { return Err(no_group(&args[1], &args[2])) };
    let (s, out) = w.parts();
    if s.group(&args[2]).is_none() {
        return Err(no_group(&args[1], &args[2]));
    }
    let consumer = args[3].as_slice();
    let mut attempts = count.saturating_mul(10);
    let g = s.group(&args[2]).expect("checked above");
    let from = g.pending_from(start);
    let cand: Vec<StreamId> = g.pending()[from..].iter().take(attempts.saturating_add(1)).map(|(id, _)| *id).collect();
    let exists: Vec<bool> = cand.iter().map(|id| s.contains(*id)).collect();
    let g = s.group_mut(&args[2]).expect("checked above");
    let created = g.create_consumer(consumer, now);
    if let Some(c) = g.consumer_mut(consumer) {
        c.seen_time = now;
    }
    let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
    let mut i = 0;
    while attempts > 0 && count > 0 && i < cand.len() {
        attempts -= 1;
        let id = cand[i];
        i += 1;
        if !exists[i - 1] {
            g.ack(id);
            deleted.push(id);
            count -= 1;
            continue;
        }
        let Some(n) = g.nack(id) else { continue };
        if min_idle != 0 && now - n.delivery_time < min_idle {
            continue;
        }
        g.claim(id, consumer, now, if justid { Retry::Keep } else { Retry::Incr });
        if let Some(c) = g.consumer_mut(consumer) {
            c.active_time = now;
        }
        claimed.push(id);
        count -= 1;
    }
    let next = cand.get(i).copied().unwrap_or(StreamId::MIN);
    let entries: Vec<Entry> = if justid { Vec::new() } else { claimed.iter().filter_map(|id| s.get(*id)).collect() };
    out.array(3);
    reply_id(out, next);
    if justid {
        out.array(claimed.len());
        for id in &claimed {
            reply_id(out, *id);
        }
    } else {
        reply_entries(out, &entries);
    }
    out.array(deleted.len());
    for id in &deleted {
        reply_id(out, *id);
    }
    drop(w);
    ctx.srv.dirty += u64::from(created) + (claimed.len() + deleted.len()) as u64;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", &args[1]);
    }
    Ok(())
}

// ---- XINFO ------------------------------------------------------------------

/// The stream for XINFO and the reply buffer: "no such key" when absent.
fn info_target<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<(&'c Stream, &'c mut Reply), CmdError> {
    let (s, out) = ctx.read_out::<Stream>(key)?;
    Ok((s.ok_or(CmdError::NoSuchKey)?, out))
}

/// `info_target` of a stream this command has looked up already (not
/// counted as a second read).
fn info_target_again<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<(&'c Stream, &'c mut Reply), CmdError> {
    let (s, out) = ctx.read_again::<Stream>(key)?;
    Ok((s.ok_or(CmdError::NoSuchKey)?, out))
}

/// XINFO STREAM key [FULL [COUNT count]]
pub fn xinfo_stream(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    info_target(ctx, &args[2])?;
    let opts = &args[3..];
    let mut full = None;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !is(&opts[0], "full") || (opts.len() == 3 && !is(&opts[1], "count")) {
            return Err(CmdError::subcommand(args));
        }
        let n = if opts.len() == 3 { arg_i64(&opts[2])? } else { 10 };
        full = Some(if n < 0 { 10 } else { n as usize });
    }
    let (cfg, now) = (ctx.srv.config.stream, ctx.now);
    let (s, out) = info_target_again(ctx, &args[2])?;
    out.map(if full.is_some() { 15 } else { 16 });
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(s.node_count() as i64 + 1);
    out.bulk(b"last-generated-id");
    reply_id(out, s.last_id());
    out.bulk(b"max-deleted-entry-id");
    reply_id(out, s.max_deleted_id());
    out.bulk(b"entries-added");
    out.int(s.entries_added() as i64);
    out.bulk(b"recorded-first-entry-id");
    reply_id(out, s.first_id());
    // Redis 8.6's idempotent production.
    let (ttl, max) = s.idmp.limits(&cfg);
    let (pids, iids) = s.idmp.tracked(now, &cfg);
    for (name, v) in [
        (b"idmp-duration".as_slice(), ttl / 1000),
        (b"idmp-maxsize", max as i64),
        (b"pids-tracked", pids as i64),
        (b"iids-tracked", iids as i64),
        (b"iids-added", s.idmp.iids_added as i64),
        (b"iids-duplicates", s.idmp.iids_duplicates as i64),
    ] {
        out.bulk(name);
        out.int(v);
    }
    match full {
        None => {
            out.bulk(b"groups");
            out.int(s.groups().len() as i64);
            for (name, rev) in [(b"first-entry".as_slice(), false), (b"last-entry", true)] {
                out.bulk(name);
                match s.range(StreamId::MIN, StreamId::MAX, rev, 1).first() {
                    Some(e) => reply_entry(out, e),
                    None => out.null(),
                }
            }
        }
        Some(count) => {
            let limit = if count == 0 { usize::MAX } else { count };
            out.bulk(b"entries");
            reply_entries(out, &s.range(StreamId::MIN, StreamId::MAX, false, count));
            out.bulk(b"groups");
            out.array(s.groups().len());
            for g in s.groups() {
                out.map(7);
                out.bulk(b"name");
                out.bulk(g.name());
                out.bulk(b"last-delivered-id");
                reply_id(out, g.last_id);
                out.bulk(b"entries-read");
                reply_opt_int(out, (g.entries_read != INVALID_ENTRIES_READ).then_some(g.entries_read));
                out.bulk(b"lag");
                reply_opt_int(out, s.group_lag(g));
                out.bulk(b"pel-count");
                out.int(g.pending().len() as i64);
                out.bulk(b"pending");
                let pel = &g.pending()[..g.pending().len().min(limit)];
                out.array(pel.len());
                for (id, n) in pel {
                    out.array(4);
                    reply_id(out, *id);
                    out.bulk(n.consumer.as_deref().unwrap_or_default());
                    out.int(n.delivery_time);
                    out.int(n.delivery_count as i64);
                }
                out.bulk(b"consumers");
                out.array(g.consumers().len());
                for c in g.consumers() {
                    out.map(5);
                    out.bulk(b"name");
                    out.bulk(c.name());
                    out.bulk(b"seen-time");
                    out.int(c.seen_time);
                    out.bulk(b"active-time");
                    out.int(c.active_time);
                    out.bulk(b"pel-count");
                    out.int(c.pending().len() as i64);
                    out.bulk(b"pending");
                    let pel = &c.pending()[..c.pending().len().min(limit)];
                    out.array(pel.len());
                    for id in pel {
                        let n = g.nack(*id);
                        out.array(3);
                        reply_id(out, *id);
                        out.int(n.map_or(0, |n| n.delivery_time));
                        out.int(n.map_or(0, |n| n.delivery_count as i64));
                    }
                }
            }
        }
    }
    Ok(())
}

/// XINFO GROUPS key
pub fn xinfo_groups(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (s, out) = info_target(ctx, &args[2])?;
    out.array(s.groups().len());
    for g in s.groups() {
        out.map(6);
        out.bulk(b"name");
        out.bulk(g.name());
        out.bulk(b"consumers");
        out.int(g.consumers().len() as i64);
        out.bulk(b"pending");
        out.int(g.pending().len() as i64);
        out.bulk(b"last-delivered-id");
        reply_id(out, g.last_id);
        out.bulk(b"entries-read");
        reply_opt_int(out, (g.entries_read != INVALID_ENTRIES_READ).then_some(g.entries_read));
        out.bulk(b"lag");
        reply_opt_int(out, s.group_lag(g));
    }
    Ok(())
}

/// XINFO CONSUMERS key group
pub fn xinfo_consumers(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let (s, out) = info_target(ctx, &args[2])?;
    let Some(g) = s.group(&args[3]) else { return Err(no_group_for_key(&args[2], &args[3])) };
    out.array(g.consumers().len());
    for c in g.consumers() {
        out.map(4);
        out.bulk(b"name");
        out.bulk(c.name());
        out.bulk(b"pending");
        out.int(c.pending().len() as i64);
        out.bulk(b"idle");
        out.int((now - c.seen_time).max(0));
        out.bulk(b"inactive");
        out.int(if c.active_time != -1 { now - c.active_time } else { -1 });
    }
    Ok(())
}

/// XINFO HELP
pub fn xinfo_help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
    Ok(())
}
