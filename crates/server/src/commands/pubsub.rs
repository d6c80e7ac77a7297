//! Pub/Sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH
//! and PUBSUB introspection.
//!
//! The bookkeeping and delivery live in `crate::pubsub`; this file only
//! turns arguments into calls and calls into Redis's replies. Shard
//! channels behave as plain channels of their own namespace: there is a
//! single shard (no cluster), so SPUBLISH reaches every SSUBSCRIBEr.

use crate::command::flags::*;
use crate::commands::introspection::help_reply;
use crate::command::{container, range_spec, spec, CmdError, CmdResult, Ctx, KeyFlags, Spec, NO_KEYS};
use crate::publish;
use crate::pubsub::{Kind, PubSub};

/// Shard channels are key-like (they hash to slots) but not keys.
const NOT_KEY: KeyFlags = &["not_key"];

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let slow: &[&str] = &["pubsub", "slow"];
    let fast: &[&str] = &["pubsub", "fast"];
    let sub = PUBSUB | NOSCRIPT | LOADING | STALE;
    let row = |s: Spec, acl: &'static [&'static str], summary: &'static str, since: &'static str| s.acl(acl).group("pubsub").doc(summary, since);
    vec![
        row(spec("subscribe", -2, sub, NO_KEYS, subscribe), slow, "Listens for messages published to channels.", "2.0.0"),
        row(spec("unsubscribe", -1, sub, NO_KEYS, unsubscribe), slow, "Stops listening to messages posted to channels.", "2.0.0"),
        row(spec("psubscribe", -2, sub, NO_KEYS, psubscribe), slow, "Listens for messages published to channels that match one or more patterns.", "2.0.0"),
        row(
            spec("punsubscribe", -1, sub, NO_KEYS, punsubscribe),
            slow,
            "Stops listening to messages published to channels that match one or more patterns.",
            "2.0.0",
        ),
        row(spec("ssubscribe", -2, sub, NO_KEYS, ssubscribe), slow, "Listens for messages published to shard channels.", "7.0.0")
            .key_specs(vec![range_spec(NOT_KEY, 1, -1, 1)]),
        row(spec("sunsubscribe", -1, sub, NO_KEYS, sunsubscribe), slow, "Stops listening to messages posted to shard channels.", "7.0.0")
            .key_specs(vec![range_spec(NOT_KEY, 1, -1, 1)]),
        row(spec("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, NO_KEYS, publish), fast, "Posts a message to a channel.", "2.0.0"),
        row(spec("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, NO_KEYS, spublish), fast, "Post a message to a shard channel", "7.0.0")
            .key_specs(vec![range_spec(NOT_KEY, 1, 0, 1)]),
        container(
            "pubsub",
            vec![
                row(spec("channels", -2, PUBSUB | LOADING | STALE, NO_KEYS, channels), slow, "Returns the active channels.", "2.8.0"),
                row(spec("numsub", -2, PUBSUB | LOADING | STALE, NO_KEYS, numsub), slow, "Returns a count of subscribers to channels.", "2.8.0"),
                row(spec("numpat", 2, PUBSUB | LOADING | STALE, NO_KEYS, numpat), slow, "Returns a count of unique pattern subscriptions.", "2.8.0"),
                row(spec("shardchannels", -2, PUBSUB | LOADING | STALE, NO_KEYS, shardchannels), slow, "Returns the active shard channels.", "7.0.0"),
                row(
                    spec("shardnumsub", -2, PUBSUB | LOADING | STALE, NO_KEYS, shardnumsub),
                    slow,
                    "Returns the count of subscribers of shard channels.",
                    "7.0.0",
                ),
                row(spec("help", 2, LOADING | STALE, NO_KEYS, help), slow, "Returns helpful text about the different subcommands.", "6.2.0"),
            ],
        )
        .group("pubsub")
        .doc("A container for Pub/Sub commands.", "2.8.0"),
    ]
}

/// Subscribes to every argument, confirming each, and enters Pub/Sub mode.
fn subscribe_all(ctx: &mut Ctx, kind: Kind, names: &[Vec<u8>]) -> CmdResult {
    ctx.srv.pubsub.mark(ctx.client);
    for name in names {
        ctx.srv.pubsub.subscribe(ctx.client, kind, name);
        let count = ctx.client.pubsub.as_ref().map_or(0, |s| s.count(kind));
        publish::confirm(ctx.srv, ctx.client, kind.subscribe_word(), Some(name), count);
    }
    Ok(())
}

/// Unsubscribes from the arguments (from everything of `kind` when there
/// are none), confirming each; with nothing to leave, one confirmation with
/// a null name. Leaves Pub/Sub mode when no subscription remains.
fn unsubscribe_all(ctx: &mut Ctx, kind: Kind, names: &[Vec<u8>]) -> CmdResult {
    let all;
    let names = if names.is_empty() {
        all = PubSub::names_of(ctx.client, kind);
        if all.is_empty() {
            let count = ctx.client.pubsub.as_ref().map_or(0, |s| s.count(kind));
            publish::confirm(ctx.srv, ctx.client, kind.unsubscribe_word(), None, count);
        }
        &all[..]
    } else {
        names
    };
    for name in names {
        ctx.srv.pubsub.unsubscribe(ctx.client, kind, name);
        let count = ctx.client.pubsub.as_ref().map_or(0, |s| s.count(kind));
        publish::confirm(ctx.srv, ctx.client, kind.unsubscribe_word(), Some(name), count);
    }
    ctx.srv.pubsub.unmark_if_idle(ctx.client);
    Ok(())
}

/// SUBSCRIBE channel [channel ...]
pub fn subscribe(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subscribe_all(ctx, Kind::Channel, &args[1..])
}

/// UNSUBSCRIBE [channel ...]
pub fn unsubscribe(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    unsubscribe_all(ctx, Kind::Channel, &args[1..])
}

/// PSUBSCRIBE pattern [pattern ...]
pub fn psubscribe(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subscribe_all(ctx, Kind::Pattern, &args[1..])
}

/// PUNSUBSCRIBE [pattern ...]
pub fn punsubscribe(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    unsubscribe_all(ctx, Kind::Pattern, &args[1..])
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
pub fn ssubscribe(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    subscribe_all(ctx, Kind::Shard, &args[1..])
}

/// SUNSUBSCRIBE [shardchannel ...]
pub fn sunsubscribe(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    unsubscribe_all(ctx, Kind::Shard, &args[1..])
}

/// PUBLISH channel message: the number of clients that received it.
pub fn publish(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = publish::publish(ctx.srv, ctx.client, &args[1], &args[2], false);
    to_bus(ctx, args, false);
    ctx.out().int(n as i64);
    Ok(())
}

/// In cluster mode, a published message also goes over the bus: to every
/// node (PUBLISH) or to the nodes of this shard (SPUBLISH). The reply
/// counts the local receivers only, as Redis's does.
fn to_bus(ctx: &mut Ctx, args: &[Vec<u8>], shard: bool) {
    if ctx.srv.cluster.is_none() {
        return;
    }
    let env = ctx.srv.cluster_env();
    if let Some(cl) = ctx.srv.cluster.as_deref_mut() {
        cl.publish(&args[1], &args[2], shard, &env);
    }
}

/// SPUBLISH shardchannel message
pub fn spublish(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = publish::publish(ctx.srv, ctx.client, &args[1], &args[2], true);
    to_bus(ctx, args, true);
    ctx.out().int(n as i64);
    Ok(())
}

fn list_active(ctx: &mut Ctx, kind: Kind, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::subcommand(args));
    }
    let names = ctx.srv.pubsub.active(kind, args.get(2).map(|p| &p[..]));
    let out = ctx.out();
    out.array(names.len());
    for n in &names {
        out.bulk(n);
    }
    Ok(())
}

fn count_each(ctx: &mut Ctx, kind: Kind, args: &[Vec<u8>]) -> CmdResult {
    let counts: Vec<usize> = args[2..].iter().map(|n| ctx.srv.pubsub.numsub(kind, n)).collect();
    let out = ctx.out();
    out.array(counts.len() * 2);
    for (name, n) in args[2..].iter().zip(counts) {
        out.bulk(name);
        out.int(n as i64);
    }
    Ok(())
}

/// PUBSUB CHANNELS [pattern]
pub fn channels(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    list_active(ctx, Kind::Channel, args)
}

/// PUBSUB SHARDCHANNELS [pattern]
pub fn shardchannels(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    list_active(ctx, Kind::Shard, args)
}

/// PUBSUB NUMSUB [channel ...]
pub fn numsub(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    count_each(ctx, Kind::Channel, args)
}

/// PUBSUB SHARDNUMSUB [shardchannel ...]
pub fn shardnumsub(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    count_each(ctx, Kind::Shard, args)
}

/// PUBSUB NUMPAT: distinct patterns with subscribers.
pub fn numpat(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let n = ctx.srv.pubsub.len(Kind::Pattern);
    ctx.out().int(n as i64);
    Ok(())
}

/// PUBSUB HELP
pub fn help(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    help_reply(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}
