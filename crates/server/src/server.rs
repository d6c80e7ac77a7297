//! Server state owned by the executor: databases, configuration, clients,
//! statistics, slow log, WATCH registrations, the Pub/Sub and blocking
//! registries. No sockets, no command table, no scripting engine: those
//! belong to the layers above, which lend them to dispatch
//! (`command::Host`). One value, no globals, so a process could later run
//! several executors side by side (DESIGN §2).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use storage::{Db, EvictionPool};

use crate::blocking::Blocking;
use crate::client::{Client, ClientId};
use crate::commandlog::CommandLog;
use crate::config::Config;
use crate::feed::Feed;
use crate::lazyfree::LazyFree;
use crate::pubsub::PubSub;
use crate::tracking::Tracking;

/// Distinct error codes INFO errorstats keeps before it stops adding.
pub const ERRORSTATS_MAX: usize = 128;

/// How the event loop spends its time (INFO stats `eventloop_*`, INFO
/// debug). A cycle is one pass of the loop: wake up, run cron when due,
/// serve the clients with events, write replies. Durations exclude the
/// time spent waiting in poll.
#[derive(Debug)]
pub struct EventLoopStats {
    /// Cycles since the last CONFIG RESETSTAT.
    pub cycles: u64,
    /// Nanoseconds spent in cycles.
    pub busy_ns: u64,
    /// Nanoseconds spent running commands.
    pub cmd_ns: u64,
    /// Nanoseconds spent in cron ticks.
    pub cron_ns: u64,
    /// Nanoseconds spent writing the AOF at the end of cycles.
    pub aof_ns: u64,
    /// Most commands run in one cycle.
    pub cmd_per_cycle_max: u64,
    /// Longest cycle, in microseconds.
    pub duration_max_us: u64,
    /// Cycles and their busy nanoseconds, never reset, for the
    /// instantaneous figures (`Rates`): CONFIG RESETSTAT does not disturb
    /// them.
    pub total_cycles: u64,
    pub total_busy_ns: u64,
}

/// Bytes read from and written to the network (INFO total_net_*): a
/// primary's stream (the image too) and what replicas are sent counted
/// apart from client traffic, as Redis splits them.
#[derive(Debug, Default, Clone, Copy)]
pub struct NetBytes {
    pub input: u64,
    pub output: u64,
    pub repl_input: u64,
    pub repl_output: u64,
}

impl NetBytes {
    /// `n` bytes read from a client with `role` (the primary's link is
    /// replication input).
    #[inline]
    pub fn read(&mut self, role: crate::client::ReplRole, n: u64) {
        if role == crate::client::ReplRole::Primary {
            self.repl_input += n;
        } else {
            self.input += n;
        }
    }

    /// `n` bytes written to a client with `role` (a replica's are
    /// replication output).
    #[inline]
    pub fn written(&mut self, role: crate::client::ReplRole, n: u64) {
        if role == crate::client::ReplRole::Replica {
            self.repl_output += n;
        } else {
            self.output += n;
        }
    }
}

/// INFO's instantaneous_* figures: per-second rates of a few counters,
/// one per interval of at least 100 ms (sampled by cron), averaged over
/// the last `RATE_SAMPLES` as Redis averages its instantaneous metrics.
#[derive(Debug)]
pub struct Rates {
    at: Instant,
    last: [u64; RATES],
    rates: [[f64; RATES]; RATE_SAMPLES],
    next: usize,
}

impl Default for Rates {
    fn default() -> Rates {
        Rates::new()
    }
}

/// The counters `Rates` follows, in order.
pub const RATES: usize = 7;
pub const RATE_OPS: usize = 0;
pub const RATE_NET_IN: usize = 1;
pub const RATE_NET_OUT: usize = 2;
pub const RATE_REPL_IN: usize = 3;
pub const RATE_REPL_OUT: usize = 4;
/// Event loop cycles, and the nanoseconds they were busy.
pub const RATE_CYCLES: usize = 5;
pub const RATE_BUSY_NS: usize = 6;

impl Rates {
    pub fn new() -> Rates {
        Rates { at: Instant::now(), last: [0; RATES], rates: [[0.0; RATES]; RATE_SAMPLES], next: 0 }
    }

    /// Takes a sample of the counters' `totals` once 100 ms have passed
    /// since the last. A counter that went down (CONFIG RESETSTAT) counts
    /// from zero.
    pub fn sample(&mut self, totals: [u64; RATES]) {
        let dt = self.at.elapsed().as_secs_f64();
        if dt < 0.1 {
            return;
        }
        for (i, (&now, last)) in totals.iter().zip(&self.last).enumerate() {
            let d = if now >= *last { now - last } else { now };
            self.rates[self.next][i] = d as f64 / dt;
        }
        self.next = (self.next + 1) % RATE_SAMPLES;
        self.last = totals;
        self.at = Instant::now();
    }

    /// Counter `i`'s mean rate per second over the last samples.
    pub fn get(&self, i: usize) -> f64 {
        self.rates.iter().map(|r| r[i]).sum::<f64>() / RATE_SAMPLES as f64
    }

    /// The mean over the last samples of counter `num`'s change per unit
    /// of counter `den`'s in each (0 for a sample where `den` did not
    /// move), each rounded up: the event loop's mean cycle in µs, where an
    /// idle loop's cycles take a few microseconds and 0 would say none.
    pub fn mean_per(&self, num: usize, den: usize, scale: f64) -> u64 {
        let per = |r: &[f64; RATES]| if r[den] > 0.0 { (r[num] / r[den] / scale).ceil() } else { 0.0 };
        (self.rates.iter().map(per).sum::<f64>() / RATE_SAMPLES as f64) as u64
    }
}

/// Rates kept for the instantaneous figures (1.6 s at one per 100 ms, as
/// Redis averages its instantaneous metrics).
const RATE_SAMPLES: usize = 16;

impl EventLoopStats {
    /// Everything zero.
    pub fn new() -> EventLoopStats {
        EventLoopStats {
            cycles: 0,
            busy_ns: 0,
            cmd_ns: 0,
            cron_ns: 0,
            aof_ns: 0,
            cmd_per_cycle_max: 0,
            duration_max_us: 0,
            total_cycles: 0,
            total_busy_ns: 0,
        }
    }

    /// Records one finished cycle that was busy for `busy` and ran `cmds`
    /// commands.
    pub fn cycle(&mut self, busy: std::time::Duration, cmds: u64) {
        let ns = busy.as_nanos() as u64;
        self.cycles += 1;
        self.busy_ns += ns;
        self.total_cycles += 1;
        self.total_busy_ns += ns;
        self.cmd_per_cycle_max = self.cmd_per_cycle_max.max(cmds);
        self.duration_max_us = self.duration_max_us.max(ns / 1000);
    }

    /// CONFIG RESETSTAT: the sums and maxima restart; the rates go on.
    pub fn reset(&mut self) {
        self.cycles = 0;
        self.busy_ns = 0;
        self.cmd_ns = 0;
        self.cron_ns = 0;
        self.aof_ns = 0;
        self.cmd_per_cycle_max = 0;
        self.duration_max_us = 0;
    }
}

impl Default for EventLoopStats {
    fn default() -> Self {
        Self::new()
    }
}

/// Per-command counters for INFO commandstats.
#[derive(Debug, Default, Clone)]
pub struct CmdStat {
    /// Calls that ran.
    pub calls: u64,
    /// Total microseconds.
    pub usec: u64,
    /// Calls rejected before running (arity, unknown subcommand...).
    pub rejected: u64,
    /// Calls that ran and replied with an error.
    pub failed: u64,
    /// Calls by duration: bucket i counts calls of [2^i, 2^(i+1)) microseconds
    /// (LATENCY HISTOGRAM's buckets).
    pub histogram: [u64; 32],
    /// Calls by duration, finer, for INFO latencystats' percentiles: each
    /// power of two split in 16 (see `fine_bucket`), so a percentile is
    /// within 1/16 of the true duration rather than a factor of two off.
    /// Dense and allocated whole at a command's first call (4 KiB), so
    /// later calls never allocate: a map that grew a node when a slower
    /// call came made used_memory drift with the machine's load.
    pub fine: Vec<u64>,
}

/// Per-command counters, in slots indexed by the command table's ids
/// (`Spec::id`): counting a call is one index, not a hash of its name.
#[derive(Debug, Default)]
pub struct CmdStats {
    /// Boxed, so that a slot no command has used yet costs a pointer: the
    /// table has hundreds of ids, and a whole `CmdStat` each would be
    /// about 100 KiB allocated at the first call of a late id.
    slots: Vec<Option<Box<(&'static str, CmdStat)>>>,
}

impl CmdStats {
    /// The counters of the command with table id `id` and full name `name`,
    /// created at its first use.
    #[inline]
    pub fn entry(&mut self, id: usize, name: &'static str) -> &mut CmdStat {
        if id >= self.slots.len() {
            self.slots.resize_with(id + 1, || None);
        }
        &mut self.slots[id].get_or_insert_with(|| Box::new((name, CmdStat::default()))).1
    }

    /// Every command counted since the last reset, sorted by name.
    pub fn sorted(&self) -> Vec<(&'static str, &CmdStat)> {
        let mut v: Vec<(&'static str, &CmdStat)> = self.slots.iter().flatten().map(|b| (b.0, &b.1)).collect();
        v.sort_unstable_by_key(|(n, _)| *n);
        v
    }

    /// Forgets every counter (CONFIG RESETSTAT).
    pub fn clear(&mut self) {
        self.slots.clear();
    }
}

/// Fine buckets: durations up to 2^36 µs (19 hours) have their own; longer
/// ones share the last.
const FINE_BUCKETS: usize = 16 + 32 * 16;

/// The fine bucket of a duration in microseconds: durations below 16 have
/// their own; above, [2^k, 2^(k+1)) is split in 16 equal parts.
fn fine_bucket(usec: u64) -> u16 {
    let v = usec.max(1);
    let k = 63 - v.leading_zeros();
    if k < 4 {
        return v as u16;
    }
    (16 + (k - 4) * 16 + ((v >> (k - 4)) & 15) as u32) as u16
}

/// The largest duration in fine bucket `b`.
fn fine_bucket_top(b: u16) -> u64 {
    if b < 16 {
        return u64::from(b);
    }
    let (k, sub) = (u32::from(b - 16) / 16 + 4, u128::from(b - 16) % 16);
    // In u128: the top bucket's bound passes u64::MAX (it holds it).
    let top = ((16 + sub) << (k - 4)) + (1u128 << (k - 4)) - 1;
    u64::try_from(top).unwrap_or(u64::MAX)
}

impl CmdStat {
    /// Calls counted in the histograms (those made while latency-tracking
    /// was on): Redis's per-command histogram count, which LATENCY
    /// HISTOGRAM reports and INFO latencystats lists commands by.
    pub fn recorded(&self) -> u64 {
        self.histogram.iter().sum()
    }

    /// Counts one call of `usec` microseconds in both histograms.
    pub fn record(&mut self, usec: u64) {
        let bucket = (63 - usec.max(1).leading_zeros() as usize).min(self.histogram.len() - 1);
        self.histogram[bucket] += 1;
        if self.fine.is_empty() {
            self.fine = vec![0; FINE_BUCKETS];
        }
        self.fine[usize::from(fine_bucket(usec)).min(FINE_BUCKETS - 1)] += 1;
    }

    /// The `p`th percentile (0 to 100) of the recorded durations, in
    /// microseconds: the top of the fine bucket it falls in (as Redis's
    /// HDR histogram reports the highest value equivalent to it); 0 when
    /// nothing was recorded.
    pub fn percentile(&self, p: f64) -> f64 {
        let total: u64 = self.fine.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let target = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut cum = 0;
        for (b, &n) in self.fine.iter().enumerate() {
            cum += n;
            if cum >= target {
                return fine_bucket_top(b as u16) as f64;
            }
        }
        0.0
    }
}


/// One latency monitor event series.
#[derive(Debug, Clone, Default)]
pub struct LatencySeries {
    /// (unix seconds, milliseconds) samples, newest last, at most 160.
    pub samples: VecDeque<(i64, u64)>,
    /// Largest ever.
    pub max: u64,
}

/// CLIENT PAUSE state.
#[derive(Debug, Clone, Copy)]
pub struct Pause {
    /// Until when (Unix ms).
    pub until: i64,
    /// True for WRITE mode (only writes are held), false for ALL.
    pub write_only: bool,
}

/// A shutdown waiting for lagging replicas to catch up (Redis's
/// shutdown_mstime): writes are held meanwhile, and cron finishes it when
/// every replica acknowledged the offset or the deadline passed.
#[derive(Debug, Clone)]
pub struct ShutdownWait {
    /// When it goes ahead anyway (now + shutdown-timeout), Unix ms.
    pub deadline: i64,
    /// The flags it runs with (SHUTDOWN's, or shutdown-on-sig*'s).
    pub flags: crate::process::ShutdownFlags,
    /// Clients blocked in SHUTDOWN: told of a failure or an abort.
    pub clients: Vec<ClientId>,
}

/// The running script's state that other clients' commands can see
/// (SCRIPT KILL, FUNCTION KILL, -BUSY while it is timed out).
#[derive(Debug, Default, Clone, Copy)]
pub struct ScriptRun {
    /// Past busy-reply-threshold: other clients get -BUSY.
    pub timed_out: bool,
    /// The script already wrote: SCRIPT KILL refuses (UNKILLABLE).
    pub write_dirty: bool,
    /// SCRIPT KILL asked it to stop.
    pub killed: bool,
    /// It is an FCALL function (FUNCTION KILL ends it, not SCRIPT KILL).
    pub function: bool,
}

/// RDB bookkeeping INFO persistence shows.
#[derive(Debug, Clone, Copy)]
pub struct PersistStats {
    /// Successful saves (INFO rdb_saves).
    pub saves: u64,
    /// The last save succeeded (INFO rdb_last_bgsave_status).
    pub last_save_ok: bool,
    /// `Server::dirty` at the last save or load (INFO
    /// rdb_changes_since_last_save is the difference).
    pub dirty_at_save: u64,
    /// Keys the last load inserted.
    pub last_load_keys: u64,
    /// Keys the last load skipped as expired.
    pub last_load_expired: u64,
    /// When the running background save started, and `Server::dirty` then.
    pub bg_started: Option<Instant>,
    pub bg_dirty_at_start: u64,
    /// Keys in the databases when it started (INFO current_save_keys_total).
    pub bg_keys_total: u64,
    /// Seconds the last background save took (-1: none yet).
    pub last_bg_secs: i64,
    /// Unix seconds of the last background save's start (retries of a
    /// failed one wait 5 s, as Redis's CONFIG_BGSAVE_RETRY_DELAY).
    pub last_bg_try: i64,
    /// BGSAVE SCHEDULE is waiting for the running rewrite to end.
    pub bg_scheduled: bool,
    /// Set while the RDB file loads at start-up, with clients served
    /// meanwhile (-LOADING, INFO loading_*).
    pub loading: Option<Loading>,
}

/// A start-up load in progress, as INFO persistence reports it.
#[derive(Debug, Clone, Copy)]
pub struct Loading {
    /// Unix seconds when it began.
    pub start_secs: i64,
    /// The file's size.
    pub total_bytes: u64,
    /// Bytes read so far.
    pub loaded_bytes: u64,
    /// The memory the saving server used (the file's used-mem AUX field).
    pub rdb_used_mem: u64,
}

impl Default for PersistStats {
    fn default() -> Self {
        PersistStats {
            saves: 0,
            last_save_ok: true,
            dirty_at_save: 0,
            last_load_keys: 0,
            last_load_expired: 0,
            bg_started: None,
            bg_dirty_at_start: 0,
            bg_keys_total: 0,
            last_bg_secs: -1,
            last_bg_try: 0,
            bg_scheduled: false,
            loading: None,
        }
    }
}

/// Eviction's state kept between calls (`evict.rs`).
#[derive(Debug, Default)]
pub struct EvictState {
    /// The best candidates seen so far.
    pub pool: EvictionPool,
    /// The database the random policies look in next (round robin).
    pub next_db: usize,
    /// The last call stopped at its time limit with memory still over
    /// maxmemory: the event loop calls again soon (Redis's eviction timer).
    pub unfinished: bool,
    /// Since when memory has stayed over maxmemory (a call ended Running
    /// or Fail), and the microseconds of the spells that ended: INFO's
    /// current_ and total_eviction_exceeded_time.
    pub exceeded_since: Option<Instant>,
    pub exceeded_us: u64,
}

impl EvictState {
    /// Milliseconds of the spell over maxmemory going on now, and of all
    /// of them (this one included).
    pub fn exceeded_ms(&self) -> (u64, u64) {
        let current = self.exceeded_since.map_or(0, |t| t.elapsed().as_micros() as u64);
        (current / 1000, (self.exceeded_us + current) / 1000)
    }
}

/// Everything the executor owns.
pub struct Server {
    /// Databases, indexed by SELECT number.
    pub dbs: Vec<Db>,
    /// ACL users, the ACL log and its counters.
    pub acl: crate::acl::Acl,
    /// Configuration.
    pub config: Config,
    /// The TLS configuration new tls-port connections get (None while
    /// tls-port is 0); CONFIG SET of a tls-* setting replaces it.
    pub tls: Option<crate::tls::Config>,
    /// Connected clients, except the one currently executing.
    pub clients: crate::client::Clients,
    /// Next client id.
    pub next_client_id: ClientId,
    /// Changes since start (a proxy for Redis's dirty counter).
    pub dirty: u64,
    /// WATCHed keys: (db, key) -> clients watching.
    pub watched: HashMap<(usize, Vec<u8>), Vec<ClientId>>,
    /// Per-command statistics, keyed by full name (`config|get`).
    pub cmdstats: CmdStats,
    /// Error counts by error code (ERR, WRONGTYPE...); see `count_error`.
    pub errorstats: HashMap<String, u64>,
    /// False once `errorstats` reached `ERRORSTATS_MAX` codes: until CONFIG
    /// RESETSTAT only `ERRORSTATS_DISABLED` counts.
    pub errorstats_enabled: bool,
    /// The command logs, by `LogKind`: the slow log (SLOWLOG), then
    /// Valkey's large-request and large-reply logs (COMMANDLOG).
    pub commandlog: [CommandLog; 3],
    /// The HOTKEYS session, running or stopped with its results; None
    /// after HOTKEYS RESET or before any START.
    pub hotkeys: Option<Box<crate::hotkeys::HotKeys>>,
    /// Latency monitor series by event name.
    pub latency: HashMap<String, LatencySeries>,
    /// Clients in MONITOR mode.
    pub monitors: Vec<ClientId>,
    /// CLIENT PAUSE state.
    pub pause: Option<Pause>,
    /// Server start.
    pub started: Instant,
    /// Unix seconds at start.
    pub started_unix: i64,
    /// Total connections accepted.
    pub total_connections: u64,
    /// Connections refused by maxclients.
    pub rejected_connections: u64,
    /// Total commands processed.
    pub total_commands: u64,
    /// Keys reclaimed by expiry.
    pub expired_keys: u64,
    /// Hash fields reclaimed by field expiry (INFO expired_subkeys).
    pub expired_subkeys: u64,
    /// Keys evicted under maxmemory (INFO evicted_keys).
    pub evicted_keys: u64,
    /// Clients evicted under maxmemory-clients (INFO evicted_clients).
    pub evicted_clients: u64,
    /// The clients' memory client eviction compares with
    /// maxmemory-clients: the sum of every client's `mem_counted`.
    pub client_mem: usize,
    /// maxmemory-clients or maxmemory changed: every client is counted
    /// afresh (and the limit applied) when the running turn ends.
    pub client_mem_stale: bool,
    /// Eviction's state between calls (`evict.rs`).
    pub evict: EvictState,
    /// Microseconds spent in active expiry cycles (INFO
    /// expire_cycle_cpu_milliseconds, in ms there).
    pub expire_cycle_us: u64,
    /// Active expiry cycles that stopped at their time budget (INFO
    /// expired_time_cap_reached_count).
    pub expire_cap_reached: u64,
    /// Successful key lookups.
    pub keyspace_hits: u64,
    /// Failed key lookups.
    pub keyspace_misses: u64,
    /// Total error replies.
    pub total_error_replies: u64,
    /// Bytes read and written (INFO total_net_*).
    pub net: NetBytes,
    /// Active expiry enabled (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire_enabled: bool,
    /// The cluster state: Some only with cluster-enabled yes.
    pub cluster: Option<Box<crate::cluster::Cluster>>,
    /// Atomic slot migrations, as destination or source (migration.rs).
    pub migrations: crate::cluster::migrate::Migrations,
    /// The locked cluster config file (cluster mode only).
    pub nodes_conf: Option<crate::nodesconf::ConfWriter>,
    /// Writes held for a manual failover (the cluster's PauseWrites):
    /// until this Unix ms, 0 for none. Held as CLIENT PAUSE WRITE holds
    /// them, beside any CLIENT PAUSE.
    pub cluster_pause_until: i64,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: bus messages of this type are
    /// dropped on receipt (-1: none, -2: every type).
    pub cluster_drop_filter: i32,
    /// Each bus link's send buffer, as the event loop last measured it:
    /// (bytes allocated, bytes queued), for CLUSTER LINKS.
    pub cluster_link_buffers: HashMap<crate::cluster::LinkId, (u64, u64)>,
    /// MIGRATE's connections to its targets, kept for the next MIGRATE to
    /// the same address (`commands::dump::MigrateConn`); cron closes those
    /// idle for 10 s (INFO migrate_cached_sockets).
    pub migrate_conns: HashMap<String, crate::conn::MigrateConn>,
    /// Bytes the bus links hold in their buffers (INFO mem_cluster_links),
    /// as the event loop last counted them.
    pub cluster_links_mem: u64,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE payloads and RDB files
    /// are taken without checking their CRC-64.
    pub skip_checksum_validation: bool,
    /// Where the active expiry cycle continues: database index.
    pub expire_db_cursor: usize,
    /// The cron frequency in effect: `hz`, or with `dynamic-hz` a multiple
    /// of it while many clients are connected (`cron::update_hz`).
    pub hz: u64,
    /// Random state (xorshift).
    pub rng: u64,
    /// The shutdown sequence finished: the event loop returns and the
    /// process exits with status 0 (`shutdown::finish`).
    pub shutdown: bool,
    /// A SIGTERM or SIGINT scheduled a shutdown that the next cron tick
    /// carries out (SHUTDOWN ABORT can still cancel it).
    pub shutdown_signal: Option<crate::process::Signal>,
    /// A shutdown that waits for replicas (`ShutdownWait`).
    pub shutdown_wait: Option<ShutdownWait>,
    /// DEBUG PAUSE-CRON: periodic work, a signalled shutdown included, waits.
    pub cron_paused: bool,
    /// Started under systemd supervision (`supervised systemd`, or `auto`
    /// with NOTIFY_SOCKET set): state changes are reported to it.
    pub supervised_systemd: bool,
    /// Wall-clock reading paired with `clock_instant`, so a command's Unix
    /// time derives from the monotonic clock it reads anyway (one clock
    /// read per command instead of two). Rebased every cron tick. Kept in
    /// microseconds and truncated to milliseconds once, at the end: two
    /// truncations put a command up to 2 ms behind a client's clock, and a
    /// client that sets PXAT now+10000 then saw a PTTL of 10001.
    pub clock_unix_us: i64,
    /// See `clock_unix_us`.
    pub clock_instant: Instant,
    /// A command changed clients other than its own (CLIENT KILL, MONITOR
    /// feed): the event loop must look at every client, not just those it
    /// served.
    pub sweep_clients: bool,
    /// The I/O threads with `io-threads` above 1 (`iothread.rs`): the
    /// queues to them, filled during a turn and sent before the loop
    /// sleeps. None runs every socket on this thread.
    pub io: Option<crate::iothread::IoThreads>,
    /// CONFIG SET io-threads changed the threads: clients are still to
    /// move between the executor and the threads, or retired threads to
    /// end (the event loop's cron does it, `net::rebalance_io`).
    pub io_rebalance: bool,
    /// The clients `rebalance_io` is to look at again (not quiet yet, or
    /// on their way back from a retiring thread); None: every client (the
    /// first pass after a change).
    pub io_moving: Option<Vec<ClientId>>,
    /// Reads and writes counted by I/O threads that ended, so that
    /// io_threaded_reads_processed and io_threaded_writes_processed never
    /// go back.
    pub io_ended: (u64, u64),
    /// Peak of used_memory.
    pub peak_memory: u64,
    /// Unix seconds of the last successful save.
    pub last_save: i64,
    /// Process id.
    pub pid: u32,
    /// Clients killed by limits (qbuf, obuf).
    pub client_kills: u64,
    /// Error replies to links that expect none (INFO unexpected_error_replies).
    pub unexpected_error_replies: u64,
    /// When `note_write_despite_disk_error` last logged.
    pub disk_error_logged: Option<Instant>,
    /// lazyfree-lazy-server-del or lazyfree-lazy-expire is on: the
    /// databases may leave collections to free (`free_discarded`).
    discarding: bool,
    /// Share of the volatile keys active expiry looks at that are due,
    /// smoothed (INFO expired_stale_perc, as a fraction).
    pub expired_stale_perc: f64,
    /// The cron sizes reply buffers' room (DEBUG REPLYBUFFER RESIZING).
    pub reply_resizing: bool,
    /// How often a reply room's peak starts over; None: never (DEBUG
    /// REPLYBUFFER PEAK-RESET-TIME).
    pub reply_peak_reset: Option<Duration>,
    /// Reply rooms the cron shrank and expanded (INFO stats).
    pub reply_shrinks: u64,
    pub reply_expands: u64,
    /// Last unix time the stats were reset (CONFIG RESETSTAT).
    pub stat_reset: i64,
    /// 40 hex digits identifying this run (INFO run_id, master_replid).
    pub run_id: String,
    /// The background freeing thread (UNLINK, FLUSH* ASYNC).
    pub lazyfree: LazyFree,
    /// INFO's instantaneous rates (commands, network bytes).
    pub rates: Rates,
    /// used_memory once the server was initialized, before loading data
    /// (INFO used_memory_startup).
    pub used_memory_startup: u64,
    /// Socket reads done.
    pub net_reads: u64,
    /// Socket writes done.
    pub net_writes: u64,
    /// Event loop timings (INFO stats and debug).
    pub el: EventLoopStats,
    /// The clock as the last command finished (`exec::run`), for a
    /// pipelined request that follows it at once to start from
    /// (`net::process_input`) instead of reading the clock again.
    pub last_cmd_end: Option<Instant>,
    /// Clients closed for passing their output buffer hard limit.
    pub obuf_kills: u64,
    /// Pub/Sub subscriptions.
    pub pubsub: PubSub,
    /// CLIENT TRACKING: which clients may cache which keys.
    pub tracking: Tracking,
    /// Clients given output by another client's command (a published
    /// message): the event loop flushes them. See `wake`.
    pub woken: Vec<ClientId>,
    /// Push messages for the running client, appended after its reply
    /// (after the whole EXEC inside a transaction).
    pub pending_push: Vec<u8>,
    /// The script running now, if any, as other clients' commands see it.
    pub script: Option<ScriptRun>,
    /// The FCALL running now: function name, the caller's argv, start.
    pub running_function: Option<(String, Vec<Vec<u8>>, Instant)>,
    /// Clients blocked in BLPOP and friends.
    pub blocking: Blocking,
    /// MEMORY REPORT walks in progress, stepped by the event loop.
    pub reports: crate::memreport::Reports,
    /// The write stream AOF and replicas consume (`exec::propagate`).
    pub feed: Feed,
    /// RDB save and load counters.
    pub persist: PersistStats,
    /// The background save running now (`persist::bgsave`).
    pub bgsave: Option<crate::bgsave::Job>,
    /// How the last background AOF base ended, until the AOF takes it
    /// (`aof::rewrite_poll`).
    pub aof_base_done: Option<Result<crate::bgsave::Saved, String>>,
    /// The append-only file's running state (`aof/`).
    pub aof: crate::aofcore::state::AofState,
    /// Replication: id, offset, backlog, replicas, the primary link.
    pub repl: crate::repl::Repl,
    /// What `oom-score-adj` did to the process's OOM score.
    pub oom: crate::oom::OomAdj,
}

/// The link an error reply went to that expects none
/// (`Server::unexpected_error`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ErrorTo {
    /// A replica of this server, which sent a command with a reply.
    Replica,
    /// This replica's primary, whose stream held a command that failed.
    Primary,
    /// The AOF being loaded, which held a command that failed.
    AofLoader,
}

/// The error writes get while the last background save failed and
/// `stop-writes-on-bgsave-error` is on with save points set (Redis's
/// MISCONF), as Redis words it.
pub const MISCONF_RDB: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

impl Server {

    /// An error reply to a link that expects none (a primary's stream, a
    /// replica's commands, the AOF being loaded): logged as Redis logs it
    /// and counted in INFO unexpected_error_replies.
    ///
    /// The data has diverged then, and `propagation-error-behavior` says
    /// what follows, as in Redis: `ignore` goes on; `panic` ends the
    /// process when the error answers the AOF being loaded or, on a
    /// read-only replica, its primary's stream; `panic-on-replicas` only in
    /// the second case. A writable replica may hold data its primary does
    /// not know of, so its errors never end it. The panic is the
    /// executor's (crash.rs reports it to the log, and it ends the process).
    pub fn unexpected_error(&mut self, to: ErrorTo, err: &str, cmd: &str) {
        let (from, to_name) = match to {
            ErrorTo::Replica => ("master", "replica"),
            ErrorTo::Primary => ("replica", "master"),
            ErrorTo::AofLoader => ("server", "AOF-loading-client"),
        };
        self.config.log.warning(&format!("== CRITICAL == This {from} is sending an error to its {to_name}: '{err}' after processing the command '{cmd}'"));
        self.unexpected_error_replies += 1;
        let behavior = self.config.get("propagation-error-behavior").unwrap_or("ignore");
        let panics = match to {
            ErrorTo::Replica => false,
            ErrorTo::Primary => behavior != "ignore" && self.config.flag("replica-read-only"),
            ErrorTo::AofLoader => behavior == "panic",
        };
        if panics {
            panic!("This {from} panicked sending an error to its {to_name} after processing the command '{cmd}'");
        }
    }

    /// How a key that expired leaves the write stream: DEL, or UNLINK with
    /// lazyfree-lazy-expire, as Redis propagates it.
    pub fn expire_cmd(&self) -> &'static [u8] {
        if self.config.flag("lazyfree-lazy-expire") {
            b"UNLINK"
        } else {
            b"DEL"
        }
    }

    /// Sets the process title from proc-title-template, with
    /// set-proc-title yes (process::set_title); a refused write leaves the
    /// command line as it was.
    pub fn apply_proc_title(&self) {
        if !self.config.flag("set-proc-title") {
            return;
        }
        let c = &self.config;
        let tls_port: u16 = c.get("tls-port").and_then(|v| v.parse().ok()).unwrap_or(0);
        let unixsocket = c.get("unixsocket").unwrap_or("").to_string();
        let first_bind = c.get("bind").unwrap_or("").split_whitespace().next().unwrap_or("*").to_string();
        let listen_addr = if c.port != 0 || tls_port != 0 {
            format!("{first_bind}:{}", if c.port != 0 { c.port } else { tls_port })
        } else {
            format!("unixsocket:{unixsocket}")
        };
        let vars = crate::process::TitleVars {
            title: crate::process::exec_name().to_string(),
            listen_addr,
            server_mode: if c.flag("cluster-enabled") { "[cluster]".into() } else { String::new() },
            config_file: c.file.clone().unwrap_or_else(|| "-".into()),
            port: c.port,
            tls_port,
            unixsocket,
        };
        if let Some(title) = crate::process::expand_title(c.get("proc-title-template").unwrap_or(""), &vars) {
            let _ = crate::process::set_title(&title);
        }
    }

    /// Writes the config file as CONFIG REWRITE does: the file's lines that
    /// name no known setting kept, every setting that differs from its
    /// default (with `all`, every setting: DEBUG CONFIG-REWRITE-FORCE-ALL)
    /// after them, then the ACL users unless an ACL file holds them.
    ///
    /// Errors: no config file, or it could not be written.
    pub fn rewrite_config(&self, all: bool) -> Result<(), String> {
        let Some(path) = self.config.file.as_deref() else {
            return Err("The server is running without a config file".into());
        };
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut text: String = old
            .lines()
            .filter(|l| {
                let name = l.split_whitespace().next().unwrap_or("");
                name.starts_with('#') || (crate::config::lookup(name).is_none() && !name.eq_ignore_ascii_case("user"))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        text.push_str(&self.config.rewrite_text(all));
        if self.config.get("aclfile").unwrap_or("").is_empty() {
            text.push_str(&self.acl.file_text());
        }
        std::fs::write(path, text).map_err(|e| format!("Rewriting config file: {e}"))
    }

    /// Why writes are refused for a disk error, if they are (MISCONF): the
    /// last background save failed (with stop-writes-on-bgsave-error and
    /// save points), or the AOF's last write or fsync did, until one
    /// succeeds again, as Redis refuses them.
    #[inline]
    pub fn disk_error(&self) -> Option<std::borrow::Cow<'static, str>> {
        let rdb_failed = !self.persist.last_save_ok && self.config.flag("stop-writes-on-bgsave-error") && !self.config.save_points().is_empty();
        if rdb_failed {
            return Some(std::borrow::Cow::Borrowed(MISCONF_RDB));
        }
        if self.aof.on && (!self.aof.last_write_ok || self.aof.syncer.as_ref().is_some_and(crate::aofcore::state::Syncer::failed)) {
            let why = match self.aof.syncer.as_ref().and_then(crate::aofcore::state::Syncer::error) {
                Some(e) => crate::config::strerror(&e),
                None => self.aof.last_write_error.clone().unwrap_or_default(),
            };
            return Some(std::borrow::Cow::Owned(format!("MISCONF Errors writing to the AOF file: {why}")));
        }
        None
    }

    /// A replica applies its primary's write although its own disk write
    /// failed (`replica-ignore-disk-write-errors yes`): logged once per 10
    /// seconds at most, as Redis logs it.
    pub fn note_write_despite_disk_error(&mut self) {
        if self.disk_error_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            self.disk_error_logged = Some(Instant::now());
            self.config.log.warning("Replica is applying a command even though it is unable to write to disk.");
        }
    }

    /// Why writes are refused for want of replicas, if they are: on a
    /// primary with `min-replicas-to-write` and `min-replicas-max-lag`
    /// both set, fewer good replicas (online, acknowledged within the lag)
    /// than asked for stop writes, as Redis's NOREPLICAS does.
    #[inline]
    pub fn replicas_error(&self) -> Option<&'static str> {
        if self.repl.min_replicas == 0 {
            return None;
        }
        self.replicas_short()
    }

    #[cold]
    fn replicas_short(&self) -> Option<&'static str> {
        let min = self.repl.min_replicas;
        if self.repl.is_replica() {
            return None;
        }
        let max_lag = self.config.get("min-replicas-max-lag").and_then(|v| v.parse::<u64>().ok()).unwrap_or(10);
        (max_lag > 0 && self.repl.good_replicas(max_lag) < min).then_some(crate::repl::NOREPLICAS_ERROR)
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Microseconds since the Unix epoch.
pub fn unix_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// The cluster state machine's settings, from the cluster-* directives
/// (and port, tls-port): built at start and again after every CONFIG SET.
pub fn cluster_settings(config: &Config) -> crate::cluster::Settings {
    let num = |name: &str| config.get(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let text = |name: &str| config.get(name).unwrap_or("").to_string();
    let tls_cluster = config.flag("tls-cluster");
    let (tcp, tls) = (config.port, num("tls-port") as u16);
    // The bus speaks on the client port of the protocol it uses + 10000,
    // unless cluster-port says otherwise.
    let (port, pport) = if tls_cluster { (tls, tcp) } else { (tcp, tls) };
    let bus_port = match num("cluster-port") as u16 {
        0 => port.wrapping_add(10000),
        p => p,
    };
    crate::cluster::Settings {
        node_timeout: num("cluster-node-timeout"),
        port,
        pport,
        bus_port,
        announce_ip: text("cluster-announce-ip"),
        announce_port: num("cluster-announce-port") as u16,
        announce_tls_port: num("cluster-announce-tls-port") as u16,
        announce_bus_port: num("cluster-announce-bus-port") as u16,
        announce_hostname: text("cluster-announce-hostname"),
        announce_human_nodename: text("cluster-announce-human-nodename"),
        preferred_endpoint_type: text("cluster-preferred-endpoint-type"),
        require_full_coverage: config.flag("cluster-require-full-coverage"),
        replica_validity_factor: num("cluster-replica-validity-factor"),
        migration_barrier: num("cluster-migration-barrier"),
        allow_replica_migration: config.flag("cluster-allow-replica-migration"),
        replica_no_failover: config.flag("cluster-replica-no-failover"),
        allow_reads_when_down: config.flag("cluster-allow-reads-when-down"),
        allow_pubsubshard_when_down: config.flag("cluster-allow-pubsubshard-when-down"),
        link_sendbuf_limit: num("cluster-link-sendbuf-limit"),
        ping_interval: num("cluster-ping-interval"),
        tls_cluster,
        repl_ping_period_ms: num("repl-ping-replica-period").saturating_mul(1000),
    }
}

impl Server {
    /// What the cluster state machine needs of the rest of the server now
    /// (`cluster::Env`): the clock, the replication offset, the link to
    /// the primary and its data age, whether db 0 holds keys.
    pub fn cluster_env(&self) -> crate::cluster::Env {
        let now = Instant::now();
        let (up, age) = match &self.repl.primary {
            None => (false, 0),
            // Redis's data age: since the last byte from the primary while
            // linked, since the link went down otherwise.
            Some(p) if p.state == crate::repl::LinkState::Connected => (true, now.saturating_duration_since(p.last_io).as_millis() as u64),
            Some(p) => (false, now.saturating_duration_since(p.down_since).as_millis() as u64),
        };
        crate::cluster::Env {
            now_ms: self.unix_ms_at(now).max(0) as u64,
            repl_offset: self.cluster_repl_offset(),
            primary_link_down_ms: age,
            primary_link_up: up,
            has_keys: self.dbs.first().is_some_and(|d| !d.is_empty()),
        }
    }

    /// Whether this server is a replica (Redis's `!iAmMaster()`): it
    /// replicates a primary, or it is a cluster node nodes.conf calls a
    /// replica, which it is from its start, before its link to the primary
    /// begins. A replica expires nothing on its own (its primary's DELs
    /// do), keeps the keys that expired while it was down when it loads,
    /// and takes its file's replication history as its own.
    pub fn is_replica_node(&self) -> bool {
        self.repl.is_replica() || self.cluster.as_deref().is_some_and(crate::cluster::Cluster::is_replica)
    }

    /// The replication offset this node announces on the bus: a
    /// primary's own; a replica's as Redis's replicationGetSlaveOffset
    /// gives it, 0 while it has neither a synchronized nor a cached
    /// primary, which is the whole of a full sync (its transfer and its
    /// load). Peers hide a replica announcing 0 from CLUSTER SLOTS and
    /// SHARDS, and rank it last in an election.
    fn cluster_repl_offset(&self) -> u64 {
        let offset = self.repl.end_offset().max(0) as u64;
        match &self.repl.primary {
            None => offset,
            Some(p) if p.state == crate::repl::LinkState::Connected => offset,
            Some(p) if p.state == crate::repl::LinkState::Transfer || !self.repl.cached => 0,
            Some(_) => offset,
        }
    }

    /// Copies the cluster-* settings into the running cluster state
    /// (after CONFIG SET); nothing in standalone mode.
    pub fn apply_cluster_settings(&mut self) {
        let settings = cluster_settings(&self.config);
        if let Some(c) = self.cluster.as_deref_mut() {
            c.settings = settings;
            // Like Redis's config setters (clusterUpdateMyselfAnnouncedPorts,
            // clusterUpdateMyselfHostname): our own entry shows the new
            // announce-* values at once, not at the next cron tick.
            c.update_myself_from_settings();
        }
    }

    /// A server with `config`, empty databases and no clients.
    pub fn new(config: Config) -> Server {
        // A cluster node keeps db 0 (its only one) in slot mode, so that it
        // can count and list each hash slot's keys (CLUSTER COUNTKEYSINSLOT,
        // GETKEYSINSLOT, dropping a lost slot's keys) without a walk.
        let clustered = config.flag("cluster-enabled");
        let dbs = (0..config.databases).map(|i| if clustered && i == 0 { Db::with_slots() } else { Db::new() }).collect();
        let seed = unix_us() as u64 ^ (std::process::id() as u64) << 32;
        let mut srv = Server {
            dbs,
            acl: crate::acl::Acl::default(),
            config,
            tls: None,
            script: None,
            running_function: None,
            clients: Default::default(),
            next_client_id: 1,
            dirty: 0,
            watched: HashMap::new(),
            cmdstats: CmdStats::default(),
            errorstats: HashMap::new(),
            errorstats_enabled: true,
            commandlog: Default::default(),
            hotkeys: None,
            latency: HashMap::new(),
            monitors: Vec::new(),
            pause: None,
            started: Instant::now(),
            started_unix: unix_ms() / 1000,
            total_connections: 0,
            rejected_connections: 0,
            total_commands: 0,
            expired_keys: 0,
            expired_subkeys: 0,
            evicted_keys: 0,
            evicted_clients: 0,
            client_mem: 0,
            client_mem_stale: false,
            evict: EvictState::default(),
            expire_cycle_us: 0,
            expire_cap_reached: 0,
            keyspace_hits: 0,
            keyspace_misses: 0,
            total_error_replies: 0,
            net: NetBytes::default(),
            active_expire_enabled: true,
            cluster: None,
            migrations: Default::default(),
            nodes_conf: None,
            cluster_pause_until: 0,
            cluster_drop_filter: -1,
            cluster_link_buffers: HashMap::new(),
            migrate_conns: HashMap::new(),
            cluster_links_mem: 0,
            skip_checksum_validation: false,
            expire_db_cursor: 0,
            hz: 10,
            rng: seed | 1,
            shutdown: false,
            shutdown_signal: None,
            shutdown_wait: None,
            cron_paused: false,
            supervised_systemd: false,
            peak_memory: 0,
            sweep_clients: false,
            io: None,
            io_rebalance: false,
            io_moving: None,
            io_ended: (0, 0),
            clock_unix_us: unix_us(),
            clock_instant: Instant::now(),
            last_save: unix_ms() / 1000,
            pid: std::process::id(),
            client_kills: 0,
            expired_stale_perc: 0.0,
            unexpected_error_replies: 0,
            disk_error_logged: None,
            discarding: false,
            reply_resizing: true,
            reply_peak_reset: Some(Duration::from_millis(crate::client::REPLY_PEAK_RESET_MS)),
            reply_shrinks: 0,
            reply_expands: 0,
            stat_reset: unix_ms() / 1000,
            run_id: (0..5).map(|i| format!("{:08x}", (seed.rotate_left(i * 13) ^ (seed >> i)) as u32)).collect(),
            lazyfree: LazyFree::new(),
            rates: Rates::new(),
            used_memory_startup: 0,
            net_reads: 0,
            net_writes: 0,
            el: EventLoopStats::new(),
            last_cmd_end: None,
            obuf_kills: 0,
            pubsub: PubSub::default(),
            tracking: Tracking::default(),
            woken: Vec::new(),
            pending_push: Vec::new(),
            blocking: Default::default(),
            reports: Default::default(),
            feed: Feed::default(),
            persist: PersistStats::default(),
            bgsave: None,
            aof_base_done: None,
            aof: Default::default(),
            repl: crate::repl::Repl::new(),
            oom: crate::oom::OomAdj::default(),
        };
        srv.apply_db_settings();
        srv
    }

    /// Applies the settings each database keeps a copy of: its event log
    /// (`notify-keyspace-events`) and what its keys' access bits count
    /// (LFU under an LFU maxmemory-policy, else the LRU clock). Called at
    /// start, after CONFIG SET and when loaded databases replace the old.
    pub fn apply_db_settings(&mut self) {
        self.apply_notify_flags();
        let ev = self.config.eviction;
        let access = if ev.policy.lfu() {
            storage::Access::Lfu { log_factor: ev.lfu_log_factor, decay_minutes: self.config.lfu_decay_time.clamp(0, u32::MAX as i64) as u32 }
        } else if ev.policy.lrm() {
            storage::Access::Lrm
        } else {
            storage::Access::Lru
        };
        if self.dbs.first().is_some_and(|d| d.access != access) {
            // Ranks from the old policy mean nothing under the new one.
            self.evict.pool.clear();
        }
        let compress = self.config.flag("value-compression");
        let keys = self.config.flag("key-compression");
        let lazy_server_del = self.config.flag("lazyfree-lazy-server-del");
        let lazy_expire = self.config.flag("lazyfree-lazy-expire");
        for db in &mut self.dbs {
            db.access = access;
            db.value_compression = compress;
            db.key_compression = keys;
            db.lazy_server_del = lazy_server_del;
            db.lazy_expire = lazy_expire;
        }
        // Whatever was left before the settings changed goes now.
        self.drain_discarded();
        self.discarding = lazy_server_del || lazy_expire;
    }

    /// Frees what overwrites and expiries left in the databases under
    /// lazyfree-lazy-server-del / lazyfree-lazy-expire: big collections on
    /// the freeing thread, the rest here. Once per event-loop turn and
    /// after each active-expiry pass; one branch while both are off.
    #[inline]
    pub fn free_discarded(&mut self) {
        if self.discarding {
            self.drain_discarded();
        }
    }

    fn drain_discarded(&mut self) {
        for db in &mut self.dbs {
            if db.has_discarded() {
                for v in db.take_discarded() {
                    crate::lazyfree::drop_value(&self.lazyfree, v);
                }
            }
        }
    }

    /// Used memory as INFO's used_memory and maxmemory count it: bytes
    /// allocated, less the slab bytes no key uses (free slots inside the
    /// keyspace's pages, which the next keys reuse; an allocator's own
    /// free lists are not counted as used either).
    pub fn used_memory(&self) -> u64 {
        let slack: usize = self.dbs.iter().map(Db::slack_bytes).sum();
        crate::memory::allocated().saturating_sub(slack as u64)
    }

    /// Memory not counted against maxmemory (INFO
    /// mem_not_counted_for_evict): the AOF buffer, the replication buffer
    /// beyond the backlog's size, and replicas' output buffers, which
    /// carry copies of the stream (Redis's replicas read the shared buffer
    /// in place, so it has no such copy to count; their whole buffer is
    /// left out, so that the room cron gives it does not move the count),
    /// as Redis leaves them out: eviction cannot shrink them. Also reply
    /// buffers on their way to an I/O thread (`IoThreads::in_transit`).
    pub fn mem_not_counted_for_evict(&self) -> u64 {
        let aof = if self.aof.on { self.aof.buffered() } else { 0 };
        let transit = self.io.as_ref().map_or(0, crate::iothread::IoThreads::in_transit);
        if !self.repl.backlog.active {
            return (aof + transit) as u64;
        }
        let copied: usize = self
            .repl
            .replicas
            .keys()
            .filter_map(|id| self.clients.get(id))
            .map(|c| c.reply.buf.capacity())
            .sum();
        (aof + transit + self.repl.backlog.beyond_size() + copied) as u64
    }

    /// The TLS configuration the tls-* settings describe.
    ///
    /// Errors: the line Redis logs for what is wrong.
    pub fn build_tls(&self) -> Result<crate::tls::Config, String> {
        crate::tls::build(&|k| self.config.get(k).unwrap_or("").to_string())
    }

    /// Rebuilds the TLS configuration from the tls-* settings when tls-port
    /// is set (new connections get it; open ones keep theirs).
    ///
    /// Errors: the reason, also logged as Redis logs it.
    pub fn reload_tls(&mut self) -> Result<(), String> {
        if self.config.get("tls-port").is_none_or(|p| p == "0") {
            return Ok(());
        }
        match self.build_tls() {
            Ok(cfg) => {
                self.tls = Some(cfg);
                Ok(())
            }
            Err(e) => {
                self.config.log.warning(&e);
                Err(e)
            }
        }
    }

    /// Points every database's event log at what `notify-keyspace-events`
    /// asks for (at start and after CONFIG SET), plus lazy expiry while a
    /// client tracks keys (an expired key is invalidated). Events already
    /// recorded are kept.
    pub fn apply_notify_flags(&mut self) {
        let mut bits = crate::notify::db_log_bits(self.config.notify_flags);
        // Lazily expired keys are also replayed as DEL to the AOF and replicas.
        if self.tracking.clients > 0 || !self.feed.is_empty() {
            bits |= storage::keyspace::LOG_EXPIRED;
        }
        for db in &mut self.dbs {
            db.log_events = bits;
        }
    }

    /// Unix milliseconds at monotonic instant `t`.
    pub fn unix_ms_at(&self, t: Instant) -> i64 {
        (self.clock_unix_us + t.saturating_duration_since(self.clock_instant).as_micros() as i64) / 1000
    }

    /// Re-reads the wall clock (called by cron), so clock adjustments show
    /// within one tick.
    pub fn rebase_clock(&mut self) {
        self.clock_instant = Instant::now();
        self.clock_unix_us = unix_us();
    }

    /// Next pseudo-random number (xorshift64*).
    pub fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Marks every client watching (db, key) as dirty; `current` is the
    /// client running the command (not in `clients` while it runs).
    #[inline(always)]
    pub fn touch_watched(&mut self, db: usize, key: &[u8], current: &mut Client) {
        if !self.watched.is_empty() {
            self.touch_watchers(db, key, current);
        }
    }

    #[inline(never)]
    fn touch_watchers(&mut self, db: usize, key: &[u8], current: &mut Client) {
        if let Some(ids) = self.watched.get(&(db, key.to_vec())) {
            for id in ids {
                if *id == current.id {
                    current.dirty_cas = true;
                } else if let Some(c) = self.clients.get_mut(id) {
                    c.dirty_cas = true;
                }
            }
        }
    }

    /// Marks every client watching (db, key) as dirty when no command is
    /// running (eviction from the event loop).
    pub fn touch_watched_all(&mut self, db: usize, key: &[u8]) {
        if self.watched.is_empty() {
            return;
        }
        if let Some(ids) = self.watched.get(&(db, key.to_vec())) {
            for id in ids {
                if let Some(c) = self.clients.get_mut(id) {
                    c.dirty_cas = true;
                }
            }
        }
    }

    /// Marks every client watching any key of `db` (all dbs if None) as dirty,
    /// for FLUSHDB/FLUSHALL/SWAPDB. Only keys that exist count, as in Redis.
    pub fn touch_all_watched(&mut self, db: Option<usize>, current: &mut Client) {
        if self.watched.is_empty() {
            return;
        }
        let now = unix_ms();
        let keys: Vec<(usize, Vec<u8>)> = self.watched.keys().filter(|(d, _)| db.is_none_or(|x| x == *d)).cloned().collect();
        for (d, k) in keys {
            if self.dbs[d].contains(&k, now) {
                self.touch_watched(d, &k, current);
            }
        }
    }

    /// Removes all of a client's WATCH registrations.
    pub fn unwatch_all(&mut self, c: &mut Client) {
        for (db, key, _) in c.watched.drain(..) {
            let k = (db, key);
            if let Some(ids) = self.watched.get_mut(&k) {
                ids.retain(|&id| id != c.id);
                if ids.is_empty() {
                    self.watched.remove(&k);
                }
            }
        }
        c.dirty_cas = false;
    }

    /// Records a latency sample if it crosses the monitor threshold.
    #[inline]
    pub fn latency_sample(&mut self, event: &str, ms: u64) {
        let threshold = self.config.latency_threshold;
        if threshold == 0 || ms < threshold {
            return;
        }
        self.latency_record(event, ms);
    }

    #[cold]
    fn latency_record(&mut self, event: &str, ms: u64) {
        let now = unix_ms() / 1000;
        let s = self.latency.entry(event.to_string()).or_default();
        if let Some(last) = s.samples.back_mut() {
            if last.0 == now {
                last.1 = last.1.max(ms);
                s.max = s.max.max(ms);
                return;
            }
        }
        s.samples.push_back((now, ms));
        if s.samples.len() > 160 {
            s.samples.pop_front();
        }
        s.max = s.max.max(ms);
    }

    /// Counts one error reply with code `code` (INFO errorstats). A client
    /// can make up any number of codes (a script's error_reply), so the
    /// table stops at `ERRORSTATS_MAX` distinct codes, as Redis's does:
    /// the codes seen are logged, the table is freed in the background and
    /// only `ERRORSTATS_DISABLED` counts until CONFIG RESETSTAT.
    pub fn count_error(&mut self, code: &str) {
        if !self.errorstats_enabled {
            return;
        }
        if let Some(n) = self.errorstats.get_mut(code) {
            *n += 1;
            return;
        }
        if self.errorstats.len() >= ERRORSTATS_MAX {
            let mut codes: Vec<&String> = self.errorstats.keys().collect();
            codes.sort();
            let list = codes.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
            self.config.log.warning(
                "Errorstats stopped adding new errors because the number of errors reached the limit, \
                 may be misuse of lua error_reply, please check INFO ERRORSTATS, this can be re-enabled via CONFIG RESETSTAT.",
            );
            self.config.log.warning(&format!("Current errors code list: {list}"));
            let old = std::mem::take(&mut self.errorstats);
            let n = old.len() as u64;
            self.lazyfree.free(Box::new(old), n);
            self.errorstats.insert("ERRORSTATS_DISABLED".into(), 1);
            self.errorstats_enabled = false;
            return;
        }
        self.errorstats.insert(code.to_string(), 1);
    }

    /// CONFIG RESETSTAT: zeroes the counters INFO stats/commandstats/errorstats show.
    pub fn reset_stats(&mut self) {
        self.acl.denied = [0; 4];
        self.cmdstats.clear();
        self.errorstats.clear();
        self.errorstats_enabled = true;
        self.total_commands = 0;
        self.total_connections = 0;
        self.rejected_connections = 0;
        self.expired_keys = 0;
        self.evicted_keys = 0;
        self.evicted_clients = 0;
        self.expired_subkeys = 0;
        self.expire_cycle_us = 0;
        self.expire_cap_reached = 0;
        self.keyspace_hits = 0;
        self.keyspace_misses = 0;
        self.total_error_replies = 0;
        self.net = NetBytes::default();
        self.client_kills = 0;
        self.unexpected_error_replies = 0;
        self.evict.exceeded_us = 0;
        self.evict.exceeded_since = None;
        self.reply_shrinks = 0;
        self.reply_expands = 0;
        self.lazyfree.reset_stats();
        self.net_reads = 0;
        self.net_writes = 0;
        self.el.reset();
        self.obuf_kills = 0;
        // INFO's sync_full, sync_partial_ok, sync_partial_err, as Redis resets them.
        self.repl.sync_full = 0;
        self.repl.sync_partial_ok = 0;
        self.repl.sync_partial_err = 0;
        self.peak_memory = self.used_memory();
        self.stat_reset = unix_ms() / 1000;
    }

    /// Tells the event loop that client `id` (not the running one) has
    /// output to write or must be closed.
    pub fn wake(&mut self, id: ClientId) {
        self.woken.push(id);
    }

    /// The id for a new client.
    pub fn new_client_id(&mut self) -> ClientId {
        let id = self.next_client_id;
        self.next_client_id += 1;
        id
    }
}

impl Server {
    /// The -BUSY reply other clients get while the running script is timed
    /// out: it names the command that can kill it.
    pub fn busy_error(&self) -> &'static str {
        if self.script.is_some_and(|r| r.function) {
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        } else {
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        }
    }

    /// Starts, extends or (None) ends CLIENT PAUSE. While a pause holds,
    /// expiry is held too: due keys read as absent but stay stored, so the
    /// data set does not change until the pause ends.
    pub fn set_pause(&mut self, p: Option<Pause>) {
        self.pause = p;
        self.apply_expire_mode();
    }

    /// The pause holding commands at `now` (Unix ms): CLIENT PAUSE's, and
    /// a shutdown waiting for replicas, which holds writes (Redis pauses
    /// for both purposes at once and holds what either holds). Some(true)
    /// when only writes wait.
    #[inline]
    pub fn paused_at(&self, now: i64) -> Option<bool> {
        let client = self.pause.filter(|p| now < p.until).map(|p| p.write_only);
        // A shutdown waiting for replicas, a coordinated failover and a
        // cluster manual failover hold writes, as Redis pauses them.
        let held = self.shutdown_wait.is_some() || self.repl.failover.is_some() || now < self.cluster_pause_until;
        match (client, held) {
            (Some(write_only), _) => Some(write_only),
            (None, true) => Some(true),
            (None, false) => None,
        }
    }

    /// Due keys read as absent but stay stored while a pause holds (a
    /// shutdown's included) and on a replica (which waits for its
    /// primary's DEL, as Redis's does).
    pub fn apply_expire_mode(&mut self) {
        let keep = self.pause.is_some() || self.shutdown_wait.is_some() || self.repl.failover.is_some() || self.cluster_pause_until != 0 || self.is_replica_node();
        for db in &mut self.dbs {
            db.keep_expired = keep;
        }
        // Every role change passes here: the OOM score follows the role.
        if self.oom.class.is_some_and(|c| c != self.oom_class()) {
            let _ = self.apply_oom_score();
        }
    }

    /// The oom-score-adj-values entry of this server's role.
    fn oom_class(&self) -> crate::oom::Class {
        if self.is_replica_node() {
            crate::oom::Class::Replica
        } else {
            crate::oom::Class::Primary
        }
    }

    /// Sets the process's OOM score from `oom-score-adj` for the current
    /// role, as Redis's setOOMScoreAdj does; a failure is logged.
    ///
    /// Errors: the reason, already logged.
    pub fn apply_oom_score(&mut self) -> Result<(), String> {
        let class = self.oom_class();
        let mode = self.config.get("oom-score-adj").unwrap_or("no").to_string();
        let values = self.config.get("oom-score-adj-values").unwrap_or("0 200 800").to_string();
        self.oom.apply(&mode, &values, class).inspect_err(|e| self.config.log.warning(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fine_buckets_cover_every_duration_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 40) + 12345, u64::MAX]) {
            let b = fine_bucket(v);
            assert!(fine_bucket_top(b) >= v.max(1), "{v} above its bucket's top");
            assert!(b >= last || v > 5000);
            last = b;
            // within 1/16 above the true value
            assert!(fine_bucket_top(b) - v.max(1) <= v.max(1) / 16, "{v}: top {}", fine_bucket_top(b));
        }
    }

    #[test]
    fn percentiles_are_close_to_the_durations() {
        let mut st = CmdStat::default();
        st.record(50_123);
        let p50 = st.percentile(50.0);
        assert!((50_123.0..=50_123.0 * 1.07).contains(&p50), "{p50}");
        for _ in 0..99 {
            st.record(10);
        }
        assert_eq!(st.percentile(50.0), 10.0);
        assert!(st.percentile(100.0) >= 50_123.0);
        assert_eq!(CmdStat::default().percentile(99.0), 0.0);
    }
}
