//! CLUSTER and its subcommands, with Redis's replies and error texts.
//!
//! Each subcommand is one handler. They parse arguments, ask the cluster
//! state machine (`crate::cluster`, in `Server::cluster`) to read or change
//! the view, and write the reply; what a change implies on the bus (a MEET,
//! PONGs, MFSTART, writing nodes.conf) is queued by the state machine as
//! actions that the event loop carries out at the end of the turn. Without
//! `cluster-enabled yes` (`Server::cluster` is None) every subcommand, and
//! READONLY/READWRITE (connection.rs), answer that cluster support is
//! disabled, as Redis does; the rows stay listed by COMMAND either way,
//! because clients probe for them.
//!
//! Keys by slot: COUNTKEYSINSLOT, GETKEYSINSLOT, SETSLOT NODE and
//! SLOT-STATS ask db 0 through `count_keys_in_slot` and `keys_in_slot`
//! below, the one place to switch to the keyspace's slot index.

use crate::cluster::{self, Cluster, Env, FailoverMode, NodeName, OpError, SLOTS};
use crate::command::flags::*;
use crate::command::{arg_i64, container, is, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};

/// The CLUSTER container and its rows, listed by COMMAND with Redis's
/// arity, flags and categories.
pub fn table() -> Vec<Spec> {
    vec![cluster()]
}

fn cluster() -> Spec {
    const SLOW: &[&str] = &["slow"];
    const ADM: &[&str] = &["admin", "slow", "dangerous"];
    let st = STALE;
    let adm = ADMIN | STALE;
    type Row = (&'static str, i32, u32, &'static str, &'static str, crate::command::Handler);
    let rows: [Row; 34] = [
        ("addslots", -3, adm, "Assigns new hash slots to a node.", "3.0.0", addslots),
        ("addslotsrange", -4, adm, "Assigns new hash slot ranges to a node.", "7.0.0", addslotsrange),
        ("cancelslotmigrations", 2, adm, "Cancel all current ongoing slot migration operations.", "9.0.0", cancelslotmigrations),
        ("bumpepoch", 2, adm, "Advances the cluster config epoch.", "3.0.0", bumpepoch),
        ("count-failure-reports", 3, adm, "Returns the number of active failure reports active for a node.", "3.0.0", count_failure_reports),
        ("countkeysinslot", 3, st, "Returns the number of keys in a hash slot.", "3.0.0", countkeysinslot),
        ("delslots", -3, adm, "Sets hash slots as unbound for a node.", "3.0.0", delslots),
        ("delslotsrange", -4, adm, "Sets hash slot ranges as unbound for a node.", "7.0.0", delslotsrange),
        ("failover", -2, adm, "Forces a replica to perform a manual failover of its master.", "3.0.0", failover),
        ("flushslots", 2, adm, "Deletes all slots information from a node.", "3.0.0", flushslots),
        ("forget", 3, adm, "Removes a node from the nodes table.", "3.0.0", forget),
        ("getslotmigrations", 2, adm, "Get the status of ongoing and recently finished slot import and export operations.", "9.0.0", getslotmigrations),
        ("getkeysinslot", 4, st, "Returns the key names in a hash slot.", "3.0.0", getkeysinslot),
        ("help", 2, LOADING | st, "Returns helpful text about the different subcommands.", "5.0.0", help),
        ("info", 2, st, "Returns information about the state of a node.", "3.0.0", info),
        ("keyslot", 3, st, "Returns the hash slot for a key.", "3.0.0", keyslot),
        ("links", 2, st, "Returns a list of all TCP links to and from peer nodes.", "7.0.0", links),
        ("meet", -4, adm, "Forces a node to handshake with another node.", "3.0.0", meet),
        ("migrateslots", -5, adm, "Migrate the given slots from this node to the specified node.", "9.0.0", migrateslots),
        ("migration", -4, adm, "Start, monitor, and cancel atomic slot migration tasks.", "8.4.0", migration),
        ("myid", 2, st, "Returns the ID of a node.", "3.0.0", myid),
        ("myshardid", 2, st, "Returns the shard ID of a node.", "7.2.0", myshardid),
        ("nodes", 2, st, "Returns the cluster configuration for a node.", "3.0.0", nodes),
        ("replicas", 3, adm, "Lists the replica nodes of a master node.", "5.0.0", replicas),
        ("replicate", 3, adm, "Configure a node as replica of a master node.", "3.0.0", replicate),
        ("reset", -2, adm | NOSCRIPT, "Resets a node.", "3.0.0", reset),
        ("saveconfig", 2, adm, "Forces a node to save the cluster configuration to disk.", "3.0.0", saveconfig),
        ("set-config-epoch", 3, adm, "Sets the configuration epoch for a new node.", "3.0.0", set_config_epoch),
        ("setslot", -4, adm, "Binds a hash slot to a node.", "3.0.0", setslot),
        ("shards", 2, LOADING | st, "Returns the mapping of cluster slots to shards.", "7.0.0", shards),
        ("slaves", 3, adm, "Lists the replica nodes of a master node.", "3.0.0", replicas),
        ("slot-stats", -4, LOADING | st, "Return an array of slot usage statistics for slots assigned to the current node.", "8.2.0", slot_stats),
        ("slots", 2, LOADING | st, "Returns the mapping of cluster slots to nodes.", "3.0.0", slots),
        ("syncslots", -3, adm, "An internal command for atomic slot migration.", "8.4.0", syncslots),
    ];
    let subs = rows
        .into_iter()
        .map(|(name, arity, flags, summary, since, handler)| {
            spec(name, arity, flags, NO_KEYS, handler).acl(if flags & ADMIN != 0 { ADM } else { SLOW }).doc(summary, since)
        })
        .collect();
    container("cluster", subs).group("cluster").doc("A container for Redis Cluster commands.", "3.0.0")
}

/// READONLY, READWRITE (and, without cluster support, every CLUSTER
/// subcommand): this instance runs standalone.
pub fn cluster_only(_ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    Err(disabled())
}

fn disabled() -> CmdError {
    CmdError::err("This instance has cluster support disabled")
}

/// The cluster state, or the "disabled" error.
fn state<'a>(ctx: &'a mut Ctx) -> Result<&'a mut Cluster, CmdError> {
    ctx.srv.cluster.as_deref_mut().ok_or_else(disabled)
}

fn op(e: OpError) -> CmdError {
    CmdError::err(e.0)
}

/// What the state machine needs to know of the server now.
fn env(ctx: &Ctx) -> Env {
    let primary = ctx.srv.repl.primary.as_ref();
    let up = primary.is_some_and(|p| p.client.is_some());
    let down_ms = match primary {
        Some(p) if !up => p.down_since.elapsed().as_millis() as u64,
        Some(p) => p.last_io.elapsed().as_millis() as u64,
        None => 0,
    };
    Env {
        now_ms: ctx.now.max(0) as u64,
        repl_offset: ctx.srv.repl.offset.max(0) as u64,
        primary_link_down_ms: down_ms,
        primary_link_up: up,
        has_keys: db_has_keys(ctx),
    }
}

fn db_has_keys(ctx: &Ctx) -> bool {
    ctx.srv.dbs.first().is_some_and(|d| !d.is_empty())
}


fn lossy(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

/// A slot argument, or "Invalid or out of range slot".
fn slot_arg(a: &[u8]) -> Result<u16, CmdError> {
    match arg_i64(a) {
        Ok(s) if (0..SLOTS as i64).contains(&s) => Ok(s as u16),
        _ => Err(CmdError::err("Invalid or out of range slot")),
    }
}

// ---------------------------------------------------------------- keys by slot

/// Keys of db 0 in `slot`, from the keyspace's slot index (db 0 of a
/// cluster node is in slot mode: `Server::new`). O(1).
fn count_keys_in_slot(ctx: &Ctx, slot: u16) -> u64 {
    ctx.srv.dbs.first().map_or(0, |db| db.count_keys_in_slot(slot))
}

/// Up to `count` keys of db 0 in `slot`, in time proportional to the keys
/// returned (the slot index).
fn keys_in_slot(ctx: &Ctx, slot: u16, count: usize) -> Vec<Vec<u8>> {
    ctx.srv.dbs.first().map_or_else(Vec::new, |db| db.keys_in_slot(slot, count))
}

/// Keys per slot for every slot (SLOT-STATS), from the slot index's counts.
fn keys_per_slot(ctx: &Ctx) -> Vec<u64> {
    let mut v = vec![0u64; SLOTS];
    if let Some(db) = ctx.srv.dbs.first() {
        for (slot, n) in db.slot_counts_nonzero() {
            v[slot as usize] = n;
        }
    }
    v
}

// ---------------------------------------------------------------- reading

/// CLUSTER HELP
fn help(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    crate::commands::introspection::help_reply(ctx, "cluster", HELP);
    Ok(())
}

const HELP: &[&str] = &[
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MYID",
    "    Return the node id.",
    "MYSHARDID",
    "    Return the node's shard id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
    "MIGRATION IMPORT <start-slot> <end-slot> [<start-slot> <end-slot> ...]",
    "    Import the slot ranges from the node owning them, by atomic slot migration.",
    "    Returns the task id.",
    "MIGRATION CANCEL <ID <task-id> | ALL>",
    "    Cancel the atomic slot migration task named, or all of them.",
    "MIGRATION STATUS [ID <task-id> | ALL]",
    "    Show the atomic slot migration task named, or all of them.",
    "MIGRATESLOTS SLOTSRANGE <start-slot> <end-slot> [<start-slot> <end-slot> ...] NODE <node-id> [SLOTSRANGE ... NODE <node-id> ...]",
    "    Migrate the slot ranges owned by this node to the nodes named, by atomic slot migration.",
    "GETSLOTMIGRATIONS",
    "    Show the atomic slot migrations in progress and recently finished.",
    "CANCELSLOTMIGRATIONS",
    "    Cancel every atomic slot migration this node runs.",
];

/// CLUSTER INFO
fn info(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let mut text = state(ctx)?.info_text();
    // Redis 8.4 follows with atomic slot migration's fields.
    text.push_str(&crate::migration::cluster_info(ctx.srv));
    ctx.out().verbatim(text.as_bytes());
    Ok(())
}

/// CLUSTER MYID
fn myid(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let id = state(ctx)?.myself;
    ctx.out().bulk(&id);
    Ok(())
}

/// CLUSTER MYSHARDID
fn myshardid(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let id = state(ctx)?.me().shard_id;
    ctx.out().bulk(&id);
    Ok(())
}

/// CLUSTER NODES
fn nodes(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let tls = ctx.client.is_tls();
    let text = state(ctx)?.nodes_text(tls);
    ctx.out().verbatim(text.as_bytes());
    Ok(())
}

/// CLUSTER REPLICAS|SLAVES node-id
fn replicas(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let tls = ctx.client.is_tls();
    let c = state(ctx)?;
    let lines: Vec<String> = c.replicas(&args[2]).map_err(op)?.iter().map(|r| c.node_line(&c.nodes[r], false, tls)).collect();
    let out = ctx.out();
    out.array(lines.len());
    for l in lines {
        out.bulk(l.as_bytes());
    }
    Ok(())
}

/// CLUSTER KEYSLOT key
fn keyslot(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    ctx.out().int(storage::slot::key_hash_slot(&args[2]) as i64);
    Ok(())
}

/// CLUSTER COUNTKEYSINSLOT slot
fn countkeysinslot(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    let slot = arg_i64(&args[2])?;
    if !(0..SLOTS as i64).contains(&slot) {
        return Err(CmdError::err("Invalid slot"));
    }
    let n = count_keys_in_slot(ctx, slot as u16);
    ctx.out().int(n as i64);
    Ok(())
}

/// CLUSTER GETKEYSINSLOT slot count
fn getkeysinslot(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    let slot = arg_i64(&args[2])?;
    let max = arg_i64(&args[3])?;
    if !(0..SLOTS as i64).contains(&slot) || max < 0 {
        return Err(CmdError::err("Invalid slot or number of keys"));
    }
    let keys = keys_in_slot(ctx, slot as u16, max.min(u32::MAX as i64) as usize);
    let out = ctx.out();
    out.array(keys.len());
    for k in keys {
        out.bulk(&k);
    }
    Ok(())
}

/// Whether CLUSTER SLOTS lists replica `n`: not failing, and it has
/// synchronized (a non-zero offset).
fn replica_listed(c: &Cluster, n: &cluster::Node, my_offset: u64) -> bool {
    if n.failed() {
        return false;
    }
    let off = if n.name == c.myself { my_offset } else { n.repl_offset };
    off != 0
}

/// One node of a CLUSTER SLOTS range: endpoint, port, id, metadata map.
fn slots_node(out: &mut resp::Reply, c: &Cluster, n: &cluster::Node, tls: bool) {
    let kind = c.settings.preferred_endpoint_type.as_str();
    out.array(4);
    match kind {
        "hostname" if n.hostname.is_empty() => out.bulk(b"?"),
        "hostname" => out.bulk(n.hostname.as_bytes()),
        "unknown-endpoint" => out.null(),
        _ => out.bulk(n.ip.as_bytes()),
    }
    out.int(if tls { n.tls_port } else { n.tcp_port } as i64);
    out.bulk(&n.name);
    let with_ip = kind != "ip";
    let with_host = kind != "hostname" && !n.hostname.is_empty();
    out.map(with_ip as usize + with_host as usize);
    if with_ip {
        out.bulk(b"ip");
        out.bulk(n.ip.as_bytes());
    }
    if with_host {
        out.bulk(b"hostname");
        out.bulk(n.hostname.as_bytes());
    }
}

/// CLUSTER SLOTS
fn slots(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let tls = ctx.client.is_tls();
    let my_offset = ctx.srv.repl.offset.max(0) as u64;
    let Some(c) = ctx.srv.cluster.as_deref() else { return Err(disabled()) };
    let out = &mut ctx.client.reply;
    let ranges = c.slot_ranges();
    out.array(ranges.len());
    for (a, b, owner) in ranges {
        let p = &c.nodes[&owner];
        let reps: Vec<&cluster::Node> =
            c.replicas_of(&owner).iter().map(|r| &c.nodes[r]).filter(|r| replica_listed(c, r, my_offset)).collect();
        out.array(3 + reps.len());
        out.int(a as i64);
        out.int(b as i64);
        slots_node(out, c, p, tls);
        for r in reps {
            slots_node(out, c, r, tls);
        }
    }
    Ok(())
}

/// CLUSTER SHARDS
fn shards(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let my_offset = ctx.srv.repl.offset.max(0) as u64;
    let Some(c) = ctx.srv.cluster.as_deref() else { return Err(disabled()) };
    let out = &mut ctx.client.reply;
    let shards = c.shards();
    out.array(shards.len());
    for (_, members) in shards {
        out.map(2);
        out.bulk(b"slots");
        let ranges = c.shard_primary(&members).map(|p| c.node_ranges(&p)).unwrap_or_default();
        out.array(ranges.len() * 2);
        for (a, b) in ranges {
            out.int(a as i64);
            out.int(b as i64);
        }
        out.bulk(b"nodes");
        out.array(members.len());
        for m in &members {
            let n = &c.nodes[m];
            let (host, _) = c.endpoint(n, false);
            let offset = if n.name == c.myself { my_offset } else { n.repl_offset };
            let mut fields = 6;
            fields += (n.tcp_port != 0) as usize + (n.tls_port != 0) as usize + (!n.hostname.is_empty()) as usize;
            out.map(fields);
            out.bulk(b"id");
            out.bulk(&n.name);
            if n.tcp_port != 0 {
                out.bulk(b"port");
                out.int(n.tcp_port as i64);
            }
            if n.tls_port != 0 {
                out.bulk(b"tls-port");
                out.int(n.tls_port as i64);
            }
            out.bulk(b"ip");
            out.bulk(n.ip.as_bytes());
            out.bulk(b"endpoint");
            out.bulk(host.as_bytes());
            if !n.hostname.is_empty() {
                out.bulk(b"hostname");
                out.bulk(n.hostname.as_bytes());
            }
            out.bulk(b"role");
            out.bulk(if n.is_replica() { b"replica" } else { b"master" });
            out.bulk(b"replication-offset");
            out.int(offset as i64);
            out.bulk(b"health");
            let health: &[u8] = if n.failed() {
                b"fail"
            } else if n.is_replica() && offset == 0 {
                b"loading"
            } else {
                b"online"
            };
            out.bulk(health);
        }
    }
    Ok(())
}

/// CLUSTER LINKS
/// A link's send buffer: (allocated, used) bytes.
type LinkBuffer = (u64, u64);

fn links(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let Some(c) = ctx.srv.cluster.as_deref() else { return Err(disabled()) };
    let mut rows: Vec<(&[u8], NodeName, u64, LinkBuffer)> = Vec::new();
    for name in c.sorted_names() {
        let n = &c.nodes[&name];
        for (l, dir) in [(n.link, &b"to"[..]), (n.inbound_link, &b"from"[..])] {
            if let Some((id, link)) = l.and_then(|l| c.links.get(&l).map(|link| (l, link))) {
                // The event loop keeps each link's send buffer (allocated, used).
                let buf = ctx.srv.cluster_link_buffers.get(&id).copied().unwrap_or((0, 0));
                rows.push((dir, name, link.ctime, buf));
            }
        }
    }
    let out = &mut ctx.client.reply;
    out.array(rows.len());
    for (dir, name, ctime, (allocated, used)) in rows {
        out.map(6);
        out.bulk(b"direction");
        out.bulk(dir);
        out.bulk(b"node");
        out.bulk(&name);
        out.bulk(b"create-time");
        out.int(ctime as i64);
        out.bulk(b"events");
        out.bulk(b"r");
        out.bulk(b"send-buffer-allocated");
        out.int(allocated as i64);
        out.bulk(b"send-buffer-used");
        out.int(used as i64);
    }
    Ok(())
}

/// CLUSTER SLOT-STATS SLOTSRANGE start end | ORDERBY metric [LIMIT n]
/// [ASC|DESC]: key-count per slot of this node's shard (the metric Redis
/// reports without cluster-slot-stats-enabled).
fn slot_stats(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // The slots of our shard: ours, or our primary's for a replica.
    let shard: Vec<bool> = {
        let c = state(ctx)?;
        let p = c.my_shard_primary();
        c.nodes.get(&p).map(|n| (0..SLOTS as u16).map(|s| n.slots.get(s)).collect()).unwrap_or_else(|| vec![false; SLOTS])
    };
    let chosen: Vec<u16> = if args.len() == 5 && is(&args[2], "slotsrange") {
        let a = slot_arg(&args[3])?;
        let b = slot_arg(&args[4])?;
        if a > b {
            return Err(CmdError::err(format!("Start slot number {a} is greater than end slot number {b}")));
        }
        (a..=b).filter(|&s| shard[s as usize]).collect()
    } else if args.len() >= 4 && is(&args[2], "orderby") {
        if !is(&args[3], "key-count") {
            return Err(CmdError::err("Unrecognized sort metric for ORDERBY."));
        }
        let (mut limit, mut desc) = (SLOTS as i64, true);
        let (mut limits, mut orders) = (0, 0);
        let mut i = 4;
        while i < args.len() {
            if is(&args[i], "limit") && i + 1 < args.len() {
                limit = match arg_i64(&args[i + 1]) {
                    Ok(l) if (1..=SLOTS as i64).contains(&l) => l,
                    _ => return Err(CmdError::err("Limit has to lie in between 1 and 16384 (maximum number of slots).")),
                };
                i += 1;
                limits += 1;
            } else if is(&args[i], "asc") {
                desc = false;
                orders += 1;
            } else if is(&args[i], "desc") {
                desc = true;
                orders += 1;
            } else {
                return Err(CmdError::Syntax);
            }
            if limits > 1 || orders > 1 {
                return Err(CmdError::err("Multiple filters of the same type are disallowed."));
            }
            i += 1;
        }
        let counts = keys_per_slot(ctx);
        let mut v: Vec<u16> = (0..SLOTS as u16).filter(|&s| shard[s as usize]).collect();
        v.sort_by(|&x, &y| {
            let o = counts[x as usize].cmp(&counts[y as usize]);
            (if desc { o.reverse() } else { o }).then(x.cmp(&y))
        });
        v.truncate(limit as usize);
        v
    } else {
        return Err(CmdError::subcommand(args));
    };
    let counts = keys_per_slot(ctx);
    let out = ctx.out();
    out.array(chosen.len());
    for s in chosen {
        out.array(2);
        out.int(s as i64);
        out.map(1);
        out.bulk(b"key-count");
        out.int(counts[s as usize] as i64);
    }
    Ok(())
}

// ---------------------------------------------------------------- changing

/// CLUSTER MEET ip port [cport]
fn meet(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    if args.len() > 5 {
        return Err(CmdError::subcommand(args));
    }
    let port = arg_i64(&args[3]).map_err(|_| CmdError::err(format!("Invalid base port specified: {}", lossy(&args[3]))))?;
    let cport = match args.get(4) {
        Some(c) => arg_i64(c).map_err(|_| CmdError::err(format!("Invalid bus port specified: {}", lossy(c))))?,
        None => port + 10000,
    };
    let env = env(ctx);
    let ip = lossy(&args[2]);
    if state(ctx)?.start_handshake(&ip, port, cport, &env).is_err() {
        return Err(CmdError::err(format!("Invalid node address specified: {ip}:{}", lossy(&args[3]))));
    }
    ctx.out().ok();
    Ok(())
}

/// CLUSTER FLUSHSLOTS
fn flushslots(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let empty = !db_has_keys(ctx);
    state(ctx)?.flush_slots(empty).map_err(op)?;
    ctx.out().ok();
    Ok(())
}

fn add_or_del_slots(ctx: &mut Ctx, args: &[Vec<u8>], del: bool) -> CmdResult {
    let c = state(ctx)?;
    let slots = args[2..].iter().map(|a| slot_arg(a)).collect::<Result<Vec<u16>, _>>()?;
    let mut seen = vec![0u8; SLOTS];
    for s in slots {
        c.check_slots(&mut seen, del, s, s).map_err(op)?;
    }
    c.apply_slots(&seen, del);
    ctx.out().ok();
    Ok(())
}

fn ranges(ctx: &mut Ctx, args: &[Vec<u8>], del: bool) -> CmdResult {
    let c = state(ctx)?;
    if args.len() % 2 == 1 {
        return Err(CmdError::Arity(format!("cluster|{}", lossy(&args[1]).to_ascii_lowercase())));
    }
    let mut seen = vec![0u8; SLOTS];
    for pair in args[2..].chunks(2) {
        let a = slot_arg(&pair[0])?;
        let b = slot_arg(&pair[1])?;
        if a > b {
            return Err(CmdError::err(format!("start slot number {a} is greater than end slot number {b}")));
        }
        c.check_slots(&mut seen, del, a, b).map_err(op)?;
    }
    c.apply_slots(&seen, del);
    ctx.out().ok();
    Ok(())
}

/// CLUSTER ADDSLOTS slot [slot ...]
fn addslots(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    add_or_del_slots(ctx, args, false)
}

/// CLUSTER DELSLOTS slot [slot ...]
fn delslots(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    add_or_del_slots(ctx, args, true)
}

/// CLUSTER ADDSLOTSRANGE start end [start end ...]
fn addslotsrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ranges(ctx, args, false)
}

/// CLUSTER DELSLOTSRANGE start end [start end ...]
fn delslotsrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ranges(ctx, args, true)
}

/// CLUSTER SETSLOT slot IMPORTING|MIGRATING|NODE node-id | STABLE
fn setslot(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if state(ctx)?.is_replica() {
        return Err(CmdError::err("Please use SETSLOT only with masters."));
    }
    let slot = slot_arg(&args[2])?;
    let keys = if args.len() == 5 && is(&args[3], "node") { count_keys_in_slot(ctx, slot) } else { 0 };
    let env = env(ctx);
    let words: Vec<&[u8]> = args[3..].iter().map(|a| a.as_slice()).collect();
    state(ctx)?.set_slot(slot, &words, keys, &env).map_err(op)?;
    ctx.out().ok();
    Ok(())
}

/// CLUSTER BUMPEPOCH
fn bumpepoch(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let (bumped, epoch) = state(ctx)?.bump_epoch();
    ctx.out().simple(&format!("{} {epoch}", if bumped { "BUMPED" } else { "STILL" }));
    Ok(())
}

/// CLUSTER SAVECONFIG: nodes.conf is written (and fsynced) by the event
/// loop before its next turn.
fn saveconfig(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?.actions.push(cluster::Action::SaveConfig { fsync: true });
    ctx.out().ok();
    Ok(())
}

/// CLUSTER FORGET node-id
fn forget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let env = env(ctx);
    state(ctx)?.forget(&args[2], &env).map_err(op)?;
    ctx.out().ok();
    Ok(())
}

/// CLUSTER REPLICATE node-id
fn replicate(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let empty = !db_has_keys(ctx);
    state(ctx)?.replicate(&args[2], empty).map_err(op)?;
    ctx.out().ok();
    Ok(())
}

/// CLUSTER COUNT-FAILURE-REPORTS node-id
fn count_failure_reports(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let env = env(ctx);
    let n = state(ctx)?.count_failure_reports(&args[2], &env).map_err(op)?;
    ctx.out().int(n as i64);
    Ok(())
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER]
fn failover(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    let mode = match args.get(2) {
        _ if args.len() > 3 => return Err(CmdError::subcommand(args)),
        None => FailoverMode::Default,
        Some(a) if is(a, "force") => FailoverMode::Force,
        Some(a) if is(a, "takeover") => FailoverMode::Takeover,
        Some(_) => return Err(CmdError::Syntax),
    };
    let env = env(ctx);
    state(ctx)?.failover(mode, &env).map_err(op)?;
    ctx.out().ok();
    Ok(())
}

/// CLUSTER SET-CONFIG-EPOCH epoch
fn set_config_epoch(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    let epoch = arg_i64(&args[2])?;
    state(ctx)?.set_config_epoch(epoch).map_err(op)?;
    ctx.out().ok();
    Ok(())
}

/// CLUSTER RESET [HARD|SOFT]
fn reset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    let hard = match args.get(2) {
        _ if args.len() > 3 => return Err(CmdError::subcommand(args)),
        None => false,
        Some(a) if is(a, "hard") => true,
        Some(a) if is(a, "soft") => false,
        Some(_) => return Err(CmdError::Syntax),
    };
    let empty = ctx.srv.dbs.get(ctx.client.db).is_none_or(|d| d.is_empty());
    state(ctx)?.reset(hard, empty).map_err(op)?;
    ctx.out().ok();
    Ok(())
}

/// CLUSTER MIGRATION IMPORT start end [start end ...] | STATUS [ID id |
/// ALL] | CANCEL ID id | ALL (Redis 8.4's atomic slot migration, run on
/// the destination; migration.rs does the work).
fn migration(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    let sub = args[2].to_ascii_lowercase();
    match sub.as_slice() {
        b"import" => {
            let ranges = crate::migration::parse_ranges(&args[3..])?;
            let id = crate::migration::import(ctx.srv, ranges)?;
            ctx.out().bulk(id.as_bytes());
            Ok(())
        }
        b"status" => {
            let which = match args.len() {
                4 if is(&args[3], "all") => None,
                5 if is(&args[3], "id") => Some(lossy(&args[4])),
                _ => return Err(CmdError::subcommand(args)),
            };
            migration_status(ctx, which.as_deref());
            Ok(())
        }
        b"cancel" => {
            let which = match args.len() {
                4 if is(&args[3], "all") => None,
                5 if is(&args[3], "id") => Some(lossy(&args[4])),
                _ => return Err(CmdError::subcommand(args)),
            };
            let n = crate::migration::cancel(ctx.srv, which.as_deref());
            ctx.out().int(n as i64);
            Ok(())
        }
        _ => Err(CmdError::subcommand(args)),
    }
}

/// STATUS's reply: one map per task (all, or the one named).
fn migration_status(ctx: &mut Ctx, id: Option<&str>) {
    let tasks: Vec<crate::cluster::migrate::Task> = ctx.srv.migrations.tasks.iter().filter(|t| id.is_none_or(|i| t.id == i)).cloned().collect();
    let out = ctx.out();
    out.array(tasks.len());
    for t in &tasks {
        out.map(12);
        out.bulk(b"id");
        out.bulk(t.id.as_bytes());
        out.bulk(b"slots");
        out.bulk(t.slots_text().as_bytes());
        out.bulk(b"source");
        out.bulk(cluster::name_string(&t.source).as_bytes());
        out.bulk(b"dest");
        out.bulk(cluster::name_string(&t.dest).as_bytes());
        out.bulk(b"operation");
        out.bulk(if t.op == crate::cluster::migrate::Op::Import { b"import" } else { b"migrate" });
        out.bulk(b"state");
        out.bulk(t.redis_state().as_bytes());
        out.bulk(b"last_error");
        out.bulk(t.last_error.as_bytes());
        out.bulk(b"retries");
        out.int(t.retries as i64);
        out.bulk(b"create_time");
        out.int(t.create_time as i64);
        out.bulk(b"start_time");
        out.int(t.start_time as i64);
        out.bulk(b"end_time");
        out.int(t.end_time as i64);
        out.bulk(b"write_pause_ms");
        out.int(t.write_pause_ms as i64);
    }
}

/// CLUSTER SYNCSLOTS START id dest-id start end [start end ...] | ACK
/// bytes | DONE id:
/// the internal half of atomic slot migration, sent by a destination on
/// the connection it opened to the source.
fn syncslots(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    let sub = args[2].to_ascii_lowercase();
    match sub.as_slice() {
        b"start" => {
            crate::migration::sync_start(ctx.srv, ctx.client, &args[3..])?;
            ctx.out().ok();
            Ok(())
        }
        b"ack" if args.len() == 4 => {
            let n = std::str::from_utf8(&args[3]).ok().and_then(|v| v.parse().ok()).ok_or(CmdError::Syntax)?;
            crate::migration::sync_ack(ctx.srv, ctx.client, n);
            // No reply: the destination's connection carries the stream.
            Ok(())
        }
        b"done" if args.len() == 4 => {
            let id = lossy(&args[3]);
            crate::migration::sync_done(ctx.srv, ctx.client, &id);
            ctx.out().ok();
            Ok(())
        }
        _ => Err(CmdError::subcommand(args)),
    }
}

/// CLUSTER MIGRATESLOTS SLOTSRANGE start end [start end ...] NODE id [...]
/// (Valkey 9, on the source): +OK once every job is asked for.
fn migrateslots(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    crate::migration::migrate_slots(ctx.srv, &args[2..])?;
    ctx.out().ok();
    Ok(())
}

/// CLUSTER CANCELSLOTMIGRATIONS (Valkey 9): cancels every running job.
fn cancelslotmigrations(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    state(ctx)?;
    crate::migration::cancel(ctx.srv, None);
    ctx.out().ok();
    Ok(())
}

/// CLUSTER GETSLOTMIGRATIONS (Valkey 9): one map per job, Valkey's fields
/// (times in Unix seconds; cow_size is 0: nothing is forked).
fn getslotmigrations(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    use crate::cluster::migrate::Op;
    state(ctx)?;
    let tasks: Vec<crate::cluster::migrate::Task> = ctx.srv.migrations.tasks.clone();
    let out = ctx.out();
    out.array(tasks.len());
    for t in &tasks {
        out.map(11);
        out.bulk(b"name");
        out.bulk(t.id.as_bytes());
        out.bulk(b"operation");
        out.bulk(if t.op == Op::Import { b"IMPORT" } else { b"EXPORT" });
        out.bulk(b"slot_ranges");
        out.bulk(t.slots_text().as_bytes());
        out.bulk(b"target_node");
        out.bulk(cluster::name_string(&t.dest).as_bytes());
        out.bulk(b"source_node");
        out.bulk(cluster::name_string(&t.source).as_bytes());
        out.bulk(b"create_time");
        out.int((t.create_time / 1000) as i64);
        out.bulk(b"last_update_time");
        out.int((t.last_update / 1000) as i64);
        out.bulk(b"last_ack_time");
        out.int((t.last_ack / 1000) as i64);
        out.bulk(b"state");
        out.bulk(t.valkey_state().as_bytes());
        out.bulk(b"message");
        // A finished job's message is its outcome's: none for a success
        // (an attempt that failed on the way is STATUS's last_error).
        out.bulk(if t.state == crate::cluster::migrate::TaskState::Completed { b"".as_slice() } else { t.last_error.as_bytes() });
        out.bulk(b"cow_size");
        out.int(0);
    }
    Ok(())
}
