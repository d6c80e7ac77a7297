//! HOTKEYS START|STOP|GET|RESET|HELP (Redis 8.6): tracking sessions of the
//! keys that take the most CPU time and network bytes. The session and its
//! top-K structures are `crate::hotkeys`; `exec::account` feeds them, the
//! cron ends a session whose DURATION has passed. Replies and error texts
//! are Redis's.

use crate::command::flags::*;
use crate::command::{arg_i64, container, is, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::commands::introspection::help_reply;
use crate::hotkeys::{ranges, HotKeys, Start};
use crate::server::unix_ms;

const ADM: &[&str] = &["admin", "slow", "dangerous"];

/// Most metrics a session tracks (CPU and NET).
const METRICS: i64 = 2;

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let f = ADMIN | NOSCRIPT;
    vec![container(
        "hotkeys",
        vec![
            spec("start", -2, f, NO_KEYS, start).acl(ADM).doc("Starts hotkeys tracking.", "8.6.0"),
            spec("stop", 2, f, NO_KEYS, stop).acl(ADM).doc("Stops hotkeys tracking.", "8.6.0"),
            spec("get", 2, f, NO_KEYS, get).acl(ADM).doc("Returns lists of top K hotkeys depending on metrics chosen in HOTKEYS START command.", "8.6.0"),
            spec("reset", 2, f, NO_KEYS, reset).acl(ADM).doc("Release the resources used for hotkey tracking.", "8.6.0"),
            spec("help", 2, LOADING | STALE, NO_KEYS, help).acl(&["slow"]).doc("Return helpful text about HOTKEYS command parameters.", "8.6.1"),
        ],
    )
    .acl(&["slow"])
    .doc("A container for hotkeys tracking commands.", "8.6.0")]
}

/// An integer argument in `lo..=hi`, or `msg` (also for a non-integer), as
/// Redis's range checks answer.
fn ranged(a: &[u8], lo: i64, hi: i64, msg: &str) -> Result<i64, CmdError> {
    match arg_i64(a) {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(CmdError::err(msg)),
    }
}

/// HOTKEYS START METRICS count [CPU] [NET] [COUNT k] [DURATION seconds]
/// [SAMPLE ratio] [SLOTS count slot ...]
fn start(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.hotkeys.as_ref().is_some_and(|h| h.active) {
        return Err(CmdError::err("hotkey tracking session already in progress"));
    }
    if args.len() < 4 || !is(&args[2], "metrics") {
        return Err(CmdError::err("METRICS parameter is required"));
    }
    let n = ranged(&args[3], 1, METRICS, &format!("METRICS count must be > 0 and <= {METRICS}"))? as usize;
    // The `n` words after the count name the metrics; an unknown word
    // counts as one but names none.
    let (mut cpu, mut net) = (false, false);
    let mut j = 4;
    while j < args.len() && j - 4 < n {
        if is(&args[j], "cpu") {
            if cpu {
                return Err(CmdError::err("METRICS CPU defined more than once!"));
            }
            cpu = true;
        } else if is(&args[j], "net") {
            if net {
                return Err(CmdError::err("METRICS NET defined more than once!"));
            }
            net = true;
        }
        j += 1;
    }
    if j - 4 != n {
        return Err(CmdError::err("METRICS count does not match number of metric types provided"));
    }
    if !cpu && !net {
        return Err(CmdError::err("METRICS no valid metrics passed. Supported: CPU|NET"));
    }
    let mut s = Start { cpu, net, count: 10, duration_ms: 0, sample_ratio: 1, slots: None };
    while j < args.len() {
        let more = j + 1 < args.len();
        if more && is(&args[j], "count") {
            s.count = ranged(&args[j + 1], 1, 64, "COUNT must be between 1 and 64")? as usize;
            j += 2;
        } else if more && is(&args[j], "duration") {
            s.duration_ms = ranged(&args[j + 1], 1, 1_000_000, "DURATION must be between 1 and 1000000")? * 1000;
            j += 2;
        } else if more && is(&args[j], "sample") {
            s.sample_ratio = ranged(&args[j + 1], 1, i32::MAX as i64, "SAMPLE ratio must be positive")? as u64;
            j += 2;
        } else if more && is(&args[j], "slots") {
            let Some(cluster) = ctx.srv.cluster.as_deref() else {
                return Err(CmdError::err("SLOTS parameter cannot be used in non-cluster mode"));
            };
            if s.slots.is_some() {
                return Err(CmdError::err("SLOTS parameter already specified"));
            }
            let total = crate::cluster::SLOTS as i64;
            let count = ranged(&args[j + 1], 1, total, &format!("SLOTS count must be between 1 and {total}"))? as usize;
            if j + 1 + count >= args.len() {
                return Err(CmdError::err("not enough slot numbers provided"));
            }
            let mine = &cluster.me().slots;
            let mut slots = Vec::with_capacity(count);
            for a in &args[j + 2..j + 2 + count] {
                let slot = ranged(a, 0, total - 1, "Invalid or out of range slot")? as u16;
                if !mine.get(slot) {
                    return Err(CmdError::err(format!("slot {slot} not handled by this node")));
                }
                slots.push(slot);
            }
            slots.sort_unstable();
            if slots.windows(2).any(|w| w[0] == w[1]) {
                return Err(CmdError::err("duplicate slot number"));
            }
            s.slots = Some(ranges(&slots));
            j += 2 + count;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    ctx.srv.hotkeys = Some(Box::new(HotKeys::new(s, unix_ms(), crate::commands::server::cpu_times())));
    ctx.out().ok();
    Ok(())
}

/// HOTKEYS STOP: OK, or null when no session runs.
fn stop(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    match ctx.srv.hotkeys.as_deref_mut() {
        Some(h) if h.active => {
            h.stop(unix_ms());
            ctx.out().ok();
        }
        _ => ctx.out().null(),
    }
    Ok(())
}

/// HOTKEYS RESET: drops the results of a stopped session.
fn reset(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    if ctx.srv.hotkeys.as_ref().is_some_and(|h| h.active) {
        return Err(CmdError::err("hotkey tracking session in progress, stop tracking first"));
    }
    ctx.srv.hotkeys = None;
    ctx.out().ok();
    Ok(())
}

/// Slot ranges as GET shows them: a lone slot as a one-element array.
fn slot_ranges(ctx: &mut Ctx, r: &[(u16, u16)]) {
    let out = ctx.out();
    out.array(r.len());
    for &(a, b) in r {
        if a == b {
            out.array(1);
            out.int(a as i64);
        } else {
            out.array(2);
            out.int(a as i64);
            out.int(b as i64);
        }
    }
}

/// HOTKEYS GET: one map of the session's settings, totals and top keys
/// (in an array of one, so that a cluster client can join the nodes'), or
/// null when there is no session.
fn get(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let now = unix_ms();
    let Some(h) = ctx.srv.hotkeys.as_deref() else {
        ctx.out().null();
        return Ok(());
    };
    // The node's own slots when none were chosen: all of them standalone.
    let shown = match (&h.slots, ctx.srv.cluster.as_deref()) {
        (Some(r), _) => r.clone(),
        (None, Some(c)) => c.me().slots.ranges(),
        (None, None) => vec![(0, crate::cluster::SLOTS as u16 - 1)],
    };
    let (selected, sampling) = (h.slots.is_some(), h.sample_ratio > 1);
    let cpu_used = h.cpu.as_ref().map(|_| {
        let (u, s) = crate::commands::server::cpu_times();
        (((u - h.start_cpu.0) * 1000.0).round().max(0.0) as i64, ((s - h.start_cpu.1) * 1000.0).round().max(0.0) as i64)
    });
    let by_cpu: Option<Vec<(Vec<u8>, u64)>> = h.cpu.as_ref().map(|t| t.list(h.count).into_iter().map(|(k, v)| (k.to_vec(), v)).collect());
    let by_net: Option<Vec<(Vec<u8>, u64)>> = h.net.as_ref().map(|t| t.list(h.count).into_iter().map(|(k, v)| (k.to_vec(), v)).collect());
    let net_total = h.net.as_ref().map(|t| t.total);
    let (t, active, ratio, start, elapsed) = (h.totals, h.active, h.sample_ratio, h.start_ms, h.elapsed_ms(now));
    // Pairs: 7 always; 2 with SLOTS, 2 more when also sampling; CPU's two
    // totals and list; NET's total and list.
    let len = 7 + 2 * usize::from(selected) + 2 * usize::from(selected && sampling) + 3 * usize::from(cpu_used.is_some()) + 2 * usize::from(net_total.is_some());
    let out = ctx.out();
    out.array(1);
    out.map(len);
    out.bulk(b"tracking-active");
    out.int(i64::from(active));
    out.bulk(b"sample-ratio");
    out.int(ratio as i64);
    out.bulk(b"selected-slots");
    slot_ranges(ctx, &shown);
    let out = ctx.out();
    if selected && sampling {
        out.bulk(b"sampled-commands-selected-slots-us");
        out.int(t.us_sampled_selected as i64);
    }
    if selected {
        out.bulk(b"all-commands-selected-slots-us");
        out.int(t.us_selected as i64);
    }
    out.bulk(b"all-commands-all-slots-us");
    out.int(t.us_all as i64);
    if selected && sampling {
        out.bulk(b"net-bytes-sampled-commands-selected-slots");
        out.int(t.net_sampled_selected as i64);
    }
    if selected {
        out.bulk(b"net-bytes-all-commands-selected-slots");
        out.int(t.net_selected as i64);
    }
    out.bulk(b"net-bytes-all-commands-all-slots");
    out.int(t.net_all as i64);
    out.bulk(b"collection-start-time-unix-ms");
    out.int(start);
    out.bulk(b"collection-duration-ms");
    out.int(elapsed);
    if let Some((u, s)) = cpu_used {
        out.bulk(b"total-cpu-time-user-ms");
        out.int(u);
        out.bulk(b"total-cpu-time-sys-ms");
        out.int(s);
    }
    if let Some(n) = net_total {
        out.bulk(b"total-net-bytes");
        out.int(n as i64);
    }
    for (name, list) in [(&b"by-cpu-time-us"[..], by_cpu), (&b"by-net-bytes"[..], by_net)] {
        if let Some(list) = list {
            out.bulk(name);
            out.array(2 * list.len());
            for (k, v) in list {
                out.bulk(&k);
                out.int(v as i64);
            }
        }
    }
    Ok(())
}

/// HOTKEYS HELP
fn help(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "hotkeys",
        &[
            "START METRICS <count> [CPU] [NET] [COUNT <k>] [DURATION <seconds>] [SAMPLE <ratio>] [SLOTS <count> <slot> ...]",
            "    Start a tracking session of the keys that take the most CPU time (CPU)",
            "    and network bytes (NET); <count> is how many of the two follow.",
            "    COUNT: how many top keys to report per metric, 1 to 64 (default 10).",
            "    DURATION: stop by itself after <seconds> (default: run until STOP).",
            "    SAMPLE: track each command with probability 1/<ratio> (default 1: all).",
            "    SLOTS: track only keys of these slots (cluster mode only; default: all).",
            "STOP",
            "    Stop tracking; the results stay readable with GET.",
            "GET",
            "    Return the session's settings, totals and top keys.",
            "RESET",
            "    Drop the results of a stopped session.",
        ],
    );
    Ok(())
}
