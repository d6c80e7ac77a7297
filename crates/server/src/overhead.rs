//! Memory outside the dataset, in the parts INFO's memory section and
//! MEMORY STATS both show (Redis's overhead breakdown), computed in one
//! place so the two agree.

use crate::client::{Client, ReplRole};
use crate::command::ScriptInfo;
use crate::server::Server;

/// Memory outside the dataset, in the parts INFO's memory section and
/// MEMORY STATS both show (Redis's overhead breakdown); `me` is the
/// running client, out of `srv.clients` while it runs.
pub struct Overhead {
    /// used_memory once the server was initialized.
    pub startup: u64,
    /// The replication stream held for replicas, counted once (the shared
    /// buffer), and the backlog's share of it.
    pub repl_buffers: u64,
    pub backlog: u64,
    /// The rest of the stream and what was copied into replicas' output
    /// buffers.
    pub replicas: u64,
    /// Every other client (buffers, MULTI queues, subscriptions).
    pub normal: u64,
    /// Cluster bus links' buffers, with messages queued this turn.
    pub links: u64,
    pub aof: u64,
    /// The EVAL script cache and functions' bookkeeping.
    pub lua: u64,
    pub functions: u64,
}

impl Overhead {
    pub fn of(srv: &Server, me: &Client, si: &ScriptInfo) -> Overhead {
        // As Redis splits the stream: the backlog's share is up to its
        // configured size while replicas are attached, the rest is theirs,
        // with the chunks copied into their output buffers.
        let shared = if srv.repl.backlog.active { srv.repl.backlog.memory() } else { 0 };
        let backlog = if srv.repl.replicas.is_empty() { shared } else { shared.min(srv.repl.backlog.size()) };
        let copied: usize = srv.repl.replicas.keys().filter_map(|id| srv.clients.get(id)).filter(|x| x.repl_role == ReplRole::Replica).map(|x| x.pending_out()).sum();
        let normal: usize = srv.clients.values().filter(|x| x.repl_role != ReplRole::Replica).map(|x| x.memory()).sum::<usize>() + me.memory();
        // Messages queued this turn (a PUBLISH in the same MULTI) are not
        // in the links' buffers yet; Redis counts them there at once.
        let queued: u64 = srv.cluster.as_deref().map_or(0, |c| {
            c.actions.iter().map(|a| if let crate::cluster::Action::Send { msg, .. } = a { msg.encoded_len() as u64 } else { 0 }).sum()
        });
        Overhead {
            startup: srv.used_memory_startup,
            repl_buffers: shared as u64,
            backlog: backlog as u64,
            replicas: (shared - backlog + copied) as u64,
            normal: normal as u64,
            links: srv.cluster_links_mem + queued,
            aof: srv.aof.buffered() as u64,
            lua: si.eval_cache as u64,
            functions: si.functions_overhead as u64,
        }
    }

    /// All of it (Redis's overhead_total).
    pub fn total(&self) -> u64 {
        self.startup + self.backlog + self.replicas + self.normal + self.links + self.aof + self.lua + self.functions
    }
}
