//! The densekv server: configuration, server state, dispatch, commands,
//! scripting and the event loop.
//!
//! Arrows go one way: this crate uses `resp` (wire format) and `storage`
//! (values and keyspace); neither knows about it. Inside the crate the
//! modules form a stack, each using only those below it (drawn in
//! docs/design/server.md and checked by `tests/layers.rs`), bottom up:
//!
//! 1. leaves: `glob`, `memory`, `lazyfree`, `notify` (event classes), `args`
//!    (command errors, argument parsers), `keyspec`, `log` (Redis-style log
//!    lines), `process` (pid file, signals, systemd, daemonizing),
//!    `check_rdb` (the redis-check-rdb tool), `bgsave` (a background
//!    save's image and its writer thread), `digest` (DEBUG DIGEST),
//!    `aofcore::manifest`, `aofcore::reader` (the AOF's file formats: bytes in, no
//!    server state), `acl` (users, rules, permission checks and the ACL log,
//!    over a command catalog dispatch hands it), `sha256` (password hashes),
//!    `tls` (rustls configuration from the tls-* settings, and
//!    one client's TLS session over a non-blocking socket), `ldouble` (the
//!    80-bit extended precision INCRBYFLOAT and HINCRBYFLOAT compute in),
//!    `iothread` (the I/O threads: sockets and queues, no server state)
//! 2. `config`, `client`, `aofcore::check` (redis-check-aof), `nodesconf`
//!    (the cluster config file's lock and atomic write)
//! 3. registries: `pubsub` (who listens to what), `blocking` (who waits on
//!    what), `memreport` (MEMORY REPORT's walks in progress, by client), `tracking` (which clients may cache which keys), `feed` (the write stream and its consumers), `aofcore::state`
//!    (the AOF's sink on the feed, its buffer and open file), `repl`
//!    (replication ids and offsets, the backlog, replicas, the primary),
//!    `cluster` (the cluster state machine, sans-IO)
//! 4. `server`: the state every command reads
//! 5. `publish` (message, keyspace-event and invalidation delivery), `cron`, `evict`
//!    (eviction under maxmemory), `clientevict` (client eviction under
//!    maxmemory-clients), `obuf` (client-output-buffer-limit)
//! 6. dispatch: `command` (the table's row type, `Ctx`, `Host`), `access`
//!    (typed key access and the write guard), `exec`, `redirect` (cluster
//!    key routing: MOVED, ASK, CROSSSLOT ...), `dispatch`, `persist`
//!    (RDB files on disk), `shutdown` (SHUTDOWN and signals, as Redis shuts
//!    down), `aof` (loading, appending, rewriting the AOF; replay runs
//!    through `exec`, the RDB base through `persist`), `replication`
//!    (the stream to replicas, SYNC/PSYNC, WAIT, promotion), `migration`
//!    (atomic slot migration: the slots' keys and writes, the hand-off)
//! 7. `commands/`: the command families
//! 8. `script/`: Lua scripting and functions
//! 9. `registry`: the whole table; `metrics` (the Prometheus endpoint: an
//!    HTTP thread, answered by the event loop from INFO's text)
//! 10. `link`: the socket to a primary, its handshake and the image; `bus`:
//!     the cluster bus's listeners and links, and the state machine's
//!     actions carried out
//! 11. `net`: the event loop, which owns the listener and the sockets

pub mod access;
pub mod affinity;
pub mod acl;
pub mod aof;
pub mod aofcore;
pub mod args;
pub mod bgsave;
pub mod blocking;
pub mod bus;
pub mod check_rdb;
pub mod client;
pub mod cmdname;
pub mod cluster;
pub mod clientevict;
pub mod command;
pub mod commandlog;
pub mod commands;
pub mod config;
pub mod crash;
pub mod oom;
pub mod conn;
pub mod cron;
pub mod digest;
pub mod dispatch;
pub mod evict;
pub mod exec;
pub mod feed;
pub mod glob;
pub mod hotkeys;
pub mod iothread;
pub mod keyspec;
pub mod lazyfree;
pub mod ldouble;
pub mod link;
pub mod log;
pub mod memory;
pub mod memreport;
pub mod metrics;
pub mod migration;
pub mod net;
pub mod nodesconf;
pub mod notify;
pub mod obuf;
pub mod overhead;
pub mod persist;
pub mod process;
pub mod publish;
pub mod pubsub;
pub mod redirect;
pub mod registry;
pub mod repl;
pub mod replication;
pub mod script;
pub mod server;
pub mod sha256;
pub mod shutdown;
pub mod tls;
pub mod tracking;

/// The Redis version whose command set densekv matches (INFO redis_version):
/// the newest release whose core commands (those of its command table,
/// modules aside) densekv all has: 8.4 (SET IFEQ/IFNE/IFDEQ/IFDNE, DIGEST,
/// DELEX, MSETEX, XREADGROUP ... CLAIM). 8.6 adds what densekv lacks yet
/// (XADD IDMP, XCFGSET, HOTKEYS).
pub const REDIS_VERSION: &str = "8.4.0";
