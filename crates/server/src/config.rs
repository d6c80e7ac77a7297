//! Configuration: one table of parameters (name, aliases, kind, default,
//! mutability), read from a redis.conf-style text and served by CONFIG
//! GET/SET/REWRITE.
//!
//! The table holds every parameter Redis 7.4 knows, so that any redis.conf
//! (and the test suite's) loads unchanged. Every parameter acts as
//! Redis's does, or refuses the values whose effect densekv does not have
//! (`activedefrag yes`, a locale other than C's), at start-up as at
//! CONFIG SET: nothing is accepted and
//! ignored. A directive Redis does not know is refused with Redis's own
//! text, line number and exit status (`LoadError`), and so is
//! `loadmodule` (densekv loads no Redis modules) with a module's settings.
//!
//! A config text is read as Redis reads it: one directive per line, `#`
//! comments, quoted arguments; a parameter takes exactly one argument
//! unless it is a list (`save`, `bind`, `client-output-buffer-limit` ...);
//! `include`, `rename-command`, `user`, `loadmodule` and module settings
//! (`name.with.dot`) are directives of their own. Command-line options are
//! turned into lines appended after the file (`options_text`), so they are
//! checked, and reported, the same way.
//!
//! Values are kept as canonical strings (what CONFIG GET prints); the few
//! that the hot path reads are mirrored into typed fields by `refresh`.

use std::collections::BTreeMap;

use storage::rdb::Shapes;
use storage::types::hash::HashConfig;
use storage::types::list::ListConfig;
use storage::types::set::SetConfig;
use storage::types::stream::StreamConfig;
use storage::types::zset::ZsetConfig;

use crate::log::{Level, Log};

/// How a parameter's value is checked and printed.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// yes / no.
    Bool,
    /// An integer within bounds.
    Int(i64, i64),
    /// A byte count accepting k/kb/m/mb/g/gb suffixes; printed in bytes.
    Mem,
    /// Any string.
    Str,
    /// One of the listed words.
    Enum(&'static [&'static str]),
    /// A byte count, or a percentage of maxmemory written `N%`.
    MemOrPercent,
    /// An octal number up to the bound (unixsocketperm).
    Octal(i64),
    /// A list of the listed words, `default` for none (shutdown-on-sigterm).
    Flags(&'static [&'static str]),
    /// `save`: pairs of seconds and changes.
    Save,
    /// `bind`: up to 16 addresses.
    Bind,
    /// `client-output-buffer-limit`: class hard soft seconds, repeated.
    ObufLimits,
    /// `oom-score-adj-values`: three integers.
    OomValues,
    /// `replicaof`: host port, or `no one`.
    ReplicaOf,
    /// `latency-tracking-info-percentiles`: numbers in [0, 100].
    Percentiles,
    /// `dir`: the working directory; setting it changes directory.
    Dir,
}

impl Kind {
    /// True for parameters that take a list of arguments (Redis's
    /// MULTI_ARG configs); the others take exactly one.
    pub fn is_list(self) -> bool {
        matches!(self, Kind::Flags(_) | Kind::Save | Kind::Bind | Kind::ObufLimits | Kind::OomValues | Kind::ReplicaOf | Kind::Percentiles)
    }
}

/// One row of the parameter table.
pub struct Param {
    /// Canonical name.
    pub name: &'static str,
    /// Old names accepted as well (e.g. hash-max-ziplist-entries).
    pub aliases: &'static [&'static str],
    /// Value check.
    pub kind: Kind,
    /// Default, as CONFIG GET prints it.
    pub default: &'static str,
    /// False for parameters only settable at start-up.
    pub mutable: bool,
    /// Left out of CONFIG GET patterns; only named explicitly (Redis's hidden configs).
    pub hidden: bool,
    /// CONFIG SET needs enable-protected-configs (Redis's PROTECTED_CONFIG).
    pub protected: bool,
}

impl Param {
    const fn fixed(self) -> Param {
        Param { mutable: false, ..self }
    }
    const fn hidden(self) -> Param {
        Param { hidden: true, ..self }
    }
    const fn protected(self) -> Param {
        Param { protected: true, ..self }
    }
    const fn alias(self, aliases: &'static [&'static str]) -> Param {
        Param { aliases, ..self }
    }
}

const fn p(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, aliases: &[], kind, default, mutable: true, hidden: false, protected: false }
}

const U: Kind = Kind::Int(0, i64::MAX);
const INT_MAX: i64 = i32::MAX as i64;
const UI: Kind = Kind::Int(0, INT_MAX);
const B: Kind = Kind::Bool;
const S: Kind = Kind::Str;
const M: Kind = Kind::Mem;
const PORT: Kind = Kind::Int(0, 65535);

const POLICIES: &[&str] =
    &["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction", "volatile-lrm", "allkeys-lrm"];
const PROTECTED: &[&str] = &["no", "yes", "local"];
/// shutdown-on-sigint / shutdown-on-sigterm words, in the order CONFIG GET prints them.
pub const SHUTDOWN_FLAGS: &[&str] = &["save", "nosave", "now", "force"];

/// Every parameter Redis 7.4 knows, with densekv's defaults.
pub static PARAMS: &[Param] = &[
    // Network.
    p("port", PORT, "6379"),
    p("bind", Kind::Bind, "* -::*"),
    // densekv: the Prometheus endpoint (metrics.rs), off with port 0. Set
    // at start only, and hidden from CONFIG GET patterns as Redis hides its
    // own extras, so clients that walk `CONFIG GET *` and set each value
    // back (Redis's own suite does) meet only settings Redis has.
    p("metrics-port", PORT, "0").fixed().hidden(),
    p("metrics-bind", S, "127.0.0.1").fixed().hidden(),
    p("bind-source-addr", S, ""),
    p("protected-mode", B, "yes"),
    p("tcp-backlog", UI, "511").fixed(),
    p("tcp-keepalive", UI, "300"),
    p("socket-mark-id", Kind::Int(0, u32::MAX as i64), "0").fixed(),
    p("unixsocket", S, "").fixed(),
    p("unixsocketperm", Kind::Octal(0o777), "0").fixed(),
    p("timeout", UI, "0"),
    p("maxclients", Kind::Int(1, u32::MAX as i64), "10000"),
    p("max-new-connections-per-cycle", Kind::Int(1, 1000), "10"),
    p("max-new-tls-connections-per-cycle", Kind::Int(1, 1000), "1"),
    // Process.
    p("daemonize", B, "no").fixed(),
    p("supervised", Kind::Enum(&["upstart", "systemd", "auto", "no"]), "no").fixed(),
    p("pidfile", S, "").fixed(),
    p("loglevel", Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]), "notice"),
    p("logfile", S, "").fixed(),
    p("syslog-enabled", B, "no").fixed(),
    p("syslog-ident", S, "redis").fixed(),
    p("syslog-facility", Kind::Enum(&["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]), "local0").fixed(),
    p("crash-log-enabled", B, "yes"),
    // densekv's crash report runs no memory test, which is what `no` asks
    // for; `yes` (the default) asks for one where the build has it.
    p("crash-memcheck-enabled", B, "yes"),
    p("use-exit-on-panic", B, "no").hidden(),
    p("watchdog-period", UI, "0").hidden(),
    p("databases", Kind::Int(1, INT_MAX), "16").fixed(),
    p("always-show-logo", B, "no").fixed(),
    p("set-proc-title", B, "yes").fixed(),
    p("proc-title-template", S, "{title} {listen-addr} {server-mode}"),
    // Strings collate bytewise, as in the C locale: only that is accepted
    // (canonical).
    p("locale-collate", S, ""),
    p("ignore-warnings", S, ""),
    p("oom-score-adj", Kind::Enum(&["no", "yes", "relative", "absolute"]), "no"),
    p("oom-score-adj-values", Kind::OomValues, "0 200 800"),
    p("disable-thp", B, "yes").fixed(),
    p("server-cpulist", S, "").alias(&["server_cpulist"]).fixed(),
    p("bio-cpulist", S, "").alias(&["bio_cpulist"]).fixed(),
    p("aof-rewrite-cpulist", S, "").alias(&["aof_rewrite_cpulist"]).fixed(),
    p("bgsave-cpulist", S, "").alias(&["bgsave_cpulist"]).fixed(),
    // Changed at run time as Valkey 9 allows: threads start, or retire
    // once their clients moved back (net.rs).
    p("io-threads", Kind::Int(1, 128), "1"),
    // Redis 8 reads on its I/O threads whenever it has some, and keeps this
    // switch only so that old config files load; so does densekv.
    p("io-threads-do-reads", B, "no").fixed(),
    p("jemalloc-bg-thread", B, "yes"),
    p("shutdown-timeout", UI, "10"),
    p("shutdown-on-sigint", Kind::Flags(SHUTDOWN_FLAGS), "default"),
    p("shutdown-on-sigterm", Kind::Flags(SHUTDOWN_FLAGS), "default"),
    p("enable-protected-configs", Kind::Enum(PROTECTED), "no").fixed(),
    p("enable-debug-command", Kind::Enum(PROTECTED), "no").fixed(),
    p("enable-module-command", Kind::Enum(PROTECTED), "no").fixed(),
    p("hide-user-data-from-log", B, "no"),
    // Security.
    p("requirepass", S, ""),
    p("aclfile", S, "").fixed(),
    p("acllog-max-len", U, "128"),
    p("acl-pubsub-default", Kind::Enum(&["allchannels", "resetchannels"]), "resetchannels"),
    // Memory and eviction.
    p("maxmemory", M, "0"),
    p("maxmemory-policy", Kind::Enum(POLICIES), "noeviction"),
    p("maxmemory-samples", Kind::Int(1, 64), "5"),
    p("maxmemory-eviction-tenacity", Kind::Int(0, 100), "10"),
    p("maxmemory-clients", Kind::MemOrPercent, "0"),
    p("lfu-log-factor", UI, "10"),
    p("lfu-decay-time", UI, "1"),
    p("lazyfree-lazy-eviction", B, "no"),
    // densekv: strings kept packed with FSST tables trained per key
    // pattern (docs/design/compression.md). Hidden from CONFIG GET
    // patterns like the other extras; CONFIG SET at run time.
    p("value-compression", B, "no").hidden(),
    // densekv: keys of common shapes (prefix + hex/decimal/UUID) packed.
    p("key-compression", B, "no").hidden(),
    p("lazyfree-lazy-expire", B, "no"),
    p("lazyfree-lazy-server-del", B, "no"),
    p("lazyfree-lazy-user-del", B, "no"),
    p("lazyfree-lazy-user-flush", B, "no"),
    // Both values hold: a table here grows segment by segment as keys
    // arrive (extendible hashing) and never has a rehash left for the
    // cron to finish, which is what `yes` asks of it and `no` spares.
    p("activerehashing", B, "yes"),
    // No active defragmentation: `activedefrag yes` is refused as a Redis
    // built without jemalloc's defragmentation support refuses it
    // (canonical); its thresholds are kept for CONFIG GET and steer
    // nothing while it is off, as there.
    p("activedefrag", B, "no"),
    p("active-defrag-ignore-bytes", M, "104857600"),
    p("active-defrag-threshold-lower", Kind::Int(0, 1000), "10"),
    p("active-defrag-threshold-upper", Kind::Int(0, 1000), "100"),
    p("active-defrag-cycle-min", Kind::Int(1, 99), "1"),
    p("active-defrag-cycle-max", Kind::Int(1, 99), "25"),
    p("active-defrag-max-scan-fields", Kind::Int(1, i64::MAX), "1000"),
    // Clients and limits.
    p("proto-max-bulk-len", Kind::Int(1024 * 1024, i64::MAX), "536870912"),
    p("client-query-buffer-limit", Kind::Int(1024 * 1024, i64::MAX), "1073741824"),
    p("client-output-buffer-limit", Kind::ObufLimits, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    p("tracking-table-max-keys", U, "1000000"),
    p("hz", UI, "10"),
    p("dynamic-hz", B, "yes"),
    p("active-expire-effort", Kind::Int(1, 10), "1"),
    p("busy-reply-threshold", U, "5000").alias(&["lua-time-limit"]),
    // The command logs: Valkey 8.1 names the slow log's two parameters
    // commandlog-execution-slower-than and commandlog-slow-execution-max-len.
    p("slowlog-log-slower-than", Kind::Int(-1, i64::MAX), "10000").alias(&["commandlog-execution-slower-than"]),
    p("slowlog-max-len", U, "128").alias(&["commandlog-slow-execution-max-len"]),
    p("commandlog-request-larger-than", Kind::Int(-1, i64::MAX), "1048576"),
    p("commandlog-large-request-max-len", U, "128"),
    p("commandlog-reply-larger-than", Kind::Int(-1, i64::MAX), "1048576"),
    p("commandlog-large-reply-max-len", U, "128"),
    p("latency-monitor-threshold", U, "0"),
    p("latency-tracking", B, "yes"),
    p("latency-tracking-info-percentiles", Kind::Percentiles, "50 99 99.9"),
    p("notify-keyspace-events", S, ""),
    // Encodings.
    p("hash-max-listpack-entries", U, "512").alias(&["hash-max-ziplist-entries"]),
    p("hash-max-listpack-value", U, "64").alias(&["hash-max-ziplist-value"]),
    p("zset-max-listpack-entries", U, "128").alias(&["zset-max-ziplist-entries"]),
    p("zset-max-listpack-value", U, "64").alias(&["zset-max-ziplist-value"]),
    p("set-max-intset-entries", U, "512"),
    p("set-max-listpack-entries", U, "128"),
    p("set-max-listpack-value", U, "64"),
    p("list-max-listpack-size", Kind::Int(i32::MIN as i64, INT_MAX), "-2").alias(&["list-max-ziplist-size"]),
    p("list-compress-depth", UI, "0"),
    p("stream-node-max-bytes", M, "4096"),
    p("stream-node-max-entries", U, "100"),
    p("stream-idmp-duration", Kind::Int(1, 86400), "100"),
    p("stream-idmp-maxsize", Kind::Int(1, 10000), "100"),
    p("hll-sparse-max-bytes", M, "3000"),
    p("sanitize-dump-payload", Kind::Enum(&["no", "yes", "clients"]), "no"),
    // Snapshots.
    p("save", Kind::Save, "3600 1 300 100 60 10000"),
    p("dbfilename", S, "dump.rdb").protected(),
    p("dir", Kind::Dir, "").protected(),
    p("rdbcompression", B, "yes"),
    p("rdbchecksum", B, "yes").fixed(),
    // Holds whatever its value: a primary's image for a disk-based sync is
    // a temp file removed once the replicas have it open, and a replica
    // loads the image from memory, so no RDB file is left of a sync.
    p("rdb-del-sync-files", B, "no"),
    p("rdb-save-incremental-fsync", B, "yes"),
    p("stop-writes-on-bgsave-error", B, "yes"),
    p("rdb-key-save-delay", Kind::Int(i32::MIN as i64, INT_MAX), "0").hidden(),
    p("key-load-delay", Kind::Int(i32::MIN as i64, INT_MAX), "0").hidden(),
    p("loading-process-events-interval-bytes", Kind::Int(1024, INT_MAX), "2097152").hidden(),
    // Append-only file: not written yet.
    p("appendonly", B, "no"),
    p("appendfilename", S, "appendonly.aof").fixed(),
    p("appenddirname", S, "appendonlydir").fixed(),
    p("appendfsync", Kind::Enum(&["always", "everysec", "no"]), "everysec"),
    p("no-appendfsync-on-rewrite", B, "no"),
    p("auto-aof-rewrite-percentage", UI, "100"),
    p("auto-aof-rewrite-min-size", M, "67108864"),
    p("aof-load-truncated", B, "yes"),
    p("aof-use-rdb-preamble", B, "yes"),
    p("aof-timestamp-enabled", B, "no"),
    p("aof-rewrite-incremental-fsync", B, "yes"),
    p("aof-disable-auto-gc", B, "no").hidden(),
    // Replication (`repl`, `replication`, `link`).
    p("replicaof", Kind::ReplicaOf, "").alias(&["slaveof"]),
    p("masterauth", S, ""),
    p("masteruser", S, ""),
    p("replica-serve-stale-data", B, "yes").alias(&["slave-serve-stale-data"]),
    p("replica-read-only", B, "yes").alias(&["slave-read-only"]),
    p("replica-lazy-flush", B, "no").alias(&["slave-lazy-flush"]),
    p("replica-ignore-maxmemory", B, "yes").alias(&["slave-ignore-maxmemory"]),
    p("replica-priority", UI, "100").alias(&["slave-priority"]),
    p("replica-announce-ip", S, "").alias(&["slave-announce-ip"]),
    p("replica-announce-port", PORT, "0").alias(&["slave-announce-port"]),
    p("replica-announced", B, "yes"),
    p("replica-ignore-disk-write-errors", B, "no"),
    p("repl-diskless-sync", B, "yes"),
    // A diskless full sync waits this long for more replicas to share it
    // (`replication::sync_due`).
    p("repl-diskless-sync-delay", UI, "5"),
    p("repl-diskless-sync-max-replicas", UI, "0"),
    // The image is received whole into memory, then loaded: "swapdb"
    // loads it beside the old data, which stays if the load fails
    // (`persist::load_replica_image`).
    p("repl-diskless-load", Kind::Enum(&["disabled", "on-empty-db", "swapdb"]), "disabled"),
    p("repl-ping-replica-period", Kind::Int(1, INT_MAX), "10").alias(&["repl-ping-slave-period"]),
    p("repl-timeout", Kind::Int(1, INT_MAX), "60"),
    p("repl-disable-tcp-nodelay", B, "no"),
    p("repl-backlog-size", M, "1048576"),
    p("repl-backlog-ttl", U, "3600"),
    p("min-replicas-to-write", UI, "0").alias(&["min-slaves-to-write"]),
    p("min-replicas-max-lag", UI, "10").alias(&["min-slaves-max-lag"]),
    p("propagation-error-behavior", Kind::Enum(&["ignore", "panic", "panic-on-replicas"]), "ignore"),
    // Cluster (cluster/ is the state, bus.rs the links, redirect.rs the
    // routing): the mutable ones reach the running state through
    // `server::cluster_settings` after every CONFIG SET.
    p("cluster-enabled", B, "no").fixed(),
    p("cluster-config-file", S, "nodes.conf").fixed(),
    p("cluster-node-timeout", U, "15000"),
    p("cluster-port", PORT, "0").fixed(),
    p("cluster-replica-validity-factor", UI, "10").alias(&["cluster-slave-validity-factor"]),
    p("cluster-migration-barrier", UI, "1"),
    p("cluster-allow-replica-migration", B, "yes"),
    p("cluster-require-full-coverage", B, "yes"),
    p("cluster-replica-no-failover", B, "no").alias(&["cluster-slave-no-failover"]),
    p("cluster-allow-reads-when-down", B, "no"),
    p("cluster-allow-pubsubshard-when-down", B, "yes"),
    p("cluster-link-sendbuf-limit", M, "0"),
    p("cluster-announce-ip", S, ""),
    p("cluster-announce-hostname", S, ""),
    p("cluster-announce-human-nodename", S, ""),
    p("cluster-announce-port", PORT, "0"),
    p("cluster-announce-bus-port", PORT, "0"),
    p("cluster-announce-tls-port", PORT, "0"),
    p("cluster-preferred-endpoint-type", Kind::Enum(&["ip", "hostname", "unknown-endpoint"]), "ip"),
    p("cluster-ping-interval", U, "0").hidden(),
    // TLS (tls.rs): the server side; the client side (replication,
    // cluster) is stored only.
    p("tls-port", PORT, "0"),
    p("tls-cert-file", S, ""),
    p("tls-key-file", S, ""),
    p("tls-key-file-pass", S, ""),
    p("tls-client-cert-file", S, ""),
    p("tls-client-key-file", S, ""),
    p("tls-client-key-file-pass", S, ""),
    // Checked as Redis loads it (tls.rs); rustls offers no DHE suite, so
    // no key exchange would use it.
    p("tls-dh-params-file", S, ""),
    p("tls-ca-cert-file", S, ""),
    p("tls-ca-cert-dir", S, ""),
    p("tls-auth-clients", Kind::Enum(&["no", "yes", "optional"]), "yes"),
    p("tls-replication", B, "no"),
    // The cluster bus over TLS (bus.rs), and MIGRATE's connections (as
    // Redis's, in cluster mode or not); chosen at start-up on a cluster
    // node (`set`).
    p("tls-cluster", B, "no"),
    p("tls-protocols", S, ""),
    p("tls-ciphers", S, ""),
    p("tls-ciphersuites", S, ""),
    p("tls-prefer-server-ciphers", B, "no"),
    p("tls-session-caching", B, "yes"),
    p("tls-session-cache-size", UI, "20480"),
    p("tls-session-cache-timeout", UI, "300"),
];

/// Directives Redis still accepts in a config file, with exactly one
/// argument, and otherwise forgets (not CONFIG GET parameters any more).
const DEPRECATED: &[&str] = &["list-max-ziplist-entries", "list-max-ziplist-value", "lua-replicate-commands"];

/// Finds a parameter by name or alias (case-insensitive).
pub fn lookup(name: &str) -> Option<&'static Param> {
    let lower = name.to_ascii_lowercase();
    PARAMS.iter().find(|p| p.name == lower || p.aliases.contains(&lower.as_str()))
}

/// Parses a memory size such as `100mb`, `1gb`, `4096`; None if malformed.
pub fn parse_memory(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let units: [(&str, i64); 8] =
        [("kb", 1024), ("mb", 1 << 20), ("gb", 1 << 30), ("k", 1000), ("m", 1_000_000), ("g", 1_000_000_000), ("b", 1), ("", 1)];
    for (suffix, mul) in units {
        if let Some(num) = lower.strip_suffix(suffix) {
            if num.is_empty() {
                continue;
            }
            let v: i64 = resp::num::parse_i64(num.as_bytes())?;
            return v.checked_mul(mul);
        }
    }
    None
}

/// Kept here for its many callers; it lives with the log.
pub use crate::log::strerror;

/// Why `activedefrag yes` is refused (Redis's words for a build without
/// defragmentation, then densekv's reason).
const NO_DEFRAG: &str = "Active defragmentation cannot be enabled: densekv keeps small values in its own slab pages, which jemalloc's defragmentation does not move, and has no defragmenter of its own";

/// Why CONFIG SET does not change tls-cluster on a cluster node.
const TLS_CLUSTER_FIXED: &str = "tls-cluster is set at start-up on a cluster node: the bus listens on the port it chooses";

/// Why a locale-collate other than the C locale's is refused.
const NO_LOCALE: &str = "Failed to configure LOCALE: densekv collates strings bytewise, as the C locale does; only \"\", C and POSIX are accepted";

/// Checks `value` for `param` and returns its canonical form. List
/// parameters take their arguments separated by spaces.
///
/// Errors: a description of why the value is invalid (Redis's text).
pub fn canonical(param: &Param, value: &str) -> Result<String, String> {
    if param.name == "notify-keyspace-events" {
        return keyspace_events(value);
    }
    if param.name == "cluster-announce-hostname" {
        announced_hostname(value)?;
    }
    if param.name == "proc-title-template" {
        // As Redis checks it: expanded with an empty title, a listening
        // address and no server mode, it must leave something.
        let probe = crate::process::TitleVars { listen_addr: "*:6379".into(), config_file: "-".into(), ..Default::default() };
        if crate::process::expand_title(value, &probe).is_none_or(|t| t.is_empty()) {
            return Err("template format is invalid or contains unknown variables".into());
        }
    }
    if param.name == "activedefrag" && value.eq_ignore_ascii_case("yes") {
        return Err(NO_DEFRAG.into());
    }
    if param.name == "locale-collate" && !matches!(value, "" | "C" | "POSIX") {
        return Err(NO_LOCALE.into());
    }
    if param.name == "cluster-announce-human-nodename" && !value.bytes().all(aux_char) {
        return Err("Announced human node name contained invalid character".into());
    }
    let words: Vec<&str> = value.split_whitespace().collect();
    match param.kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int(lo, hi) => {
            let v = parse_memory(value).ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
            if v < lo || v > hi {
                return Err(format!("argument must be between {lo} and {hi} inclusive"));
            }
            Ok(v.to_string())
        }
        Kind::Octal(hi) => {
            let v = i64::from_str_radix(value, 8).map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if !(0..=hi).contains(&v) {
                return Err(format!("argument must be between 0 and {hi:o} inclusive"));
            }
            Ok(format!("{v:o}"))
        }
        Kind::Mem => {
            let v = parse_memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            if v < 0 {
                return Err("argument must be a memory value".into());
            }
            Ok(v.to_string())
        }
        Kind::Str => Ok(value.to_string()),
        Kind::MemOrPercent => match value.strip_suffix('%') {
            Some(pct) => {
                let v = resp::num::parse_i64(pct.as_bytes()).filter(|v| *v >= 0).ok_or_else(|| "argument must be a memory or percent value".to_string())?;
                if v > 100 {
                    return Err("percentage argument must be less or equal to 100".into());
                }
                Ok(format!("{v}%"))
            }
            None => canonical(&Param { kind: Kind::Mem, ..*param }, value),
        },
        Kind::Enum(names) => {
            let lower = value.to_ascii_lowercase();
            if names.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err("argument(s) must be one of the following: ".to_string() + &names.join(", "))
            }
        }
        Kind::Flags(names) => {
            if words.is_empty() {
                return Err("argument(s) must be one of the following: default, ".to_string() + &names.join(", "));
            }
            let mut set = vec![false; names.len()];
            for w in &words {
                let lower = w.to_ascii_lowercase();
                match names.iter().position(|n| *n == lower) {
                    Some(i) => set[i] = true,
                    None if lower == "default" => {}
                    None => return Err("argument(s) must be one of the following: default, ".to_string() + &names.join(", ")),
                }
            }
            let on: Vec<&str> = names.iter().zip(&set).filter(|(_, s)| **s).map(|(n, _)| *n).collect();
            if on.contains(&"save") && on.contains(&"nosave") {
                return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
            }
            Ok(if on.is_empty() { "default".into() } else { on.join(" ") })
        }
        Kind::Save => {
            let ok = words.len().is_multiple_of(2)
                && words.iter().enumerate().all(|(i, w)| w.parse::<i64>().is_ok_and(|v| if i % 2 == 0 { v >= 1 } else { v >= 0 }));
            if !ok {
                return Err("Invalid save parameters".into());
            }
            Ok(words.iter().map(|w| w.parse::<i64>().unwrap_or(0).to_string()).collect::<Vec<_>>().join(" "))
        }
        Kind::Bind => {
            if words.len() > 16 {
                return Err("Too many bind addresses specified.".into());
            }
            Ok(words.join(" "))
        }
        Kind::ObufLimits => obuf_limits(param.default, &words),
        Kind::OomValues => {
            if words.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            let mut out = Vec::new();
            for w in &words {
                match w.parse::<i64>() {
                    Ok(v) if (-2000..=2000).contains(&v) => out.push(v.to_string()),
                    _ => return Err("Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into()),
                }
            }
            Ok(out.join(" "))
        }
        Kind::ReplicaOf => {
            if words.is_empty() {
                return Ok(String::new());
            }
            if words.len() != 2 {
                return Err("wrong number of arguments".into());
            }
            if words[0].eq_ignore_ascii_case("no") && words[1].eq_ignore_ascii_case("one") {
                return Ok(String::new());
            }
            match words[1].parse::<i64>() {
                Ok(port) if (0..=65535).contains(&port) => Ok(format!("{} {port}", words[0])),
                _ => Err("Invalid master port".into()),
            }
        }
        Kind::Percentiles => {
            let mut out = Vec::new();
            for w in &words {
                let v: f64 = w.parse().map_err(|_| "Invalid latency-tracking-info-percentiles parameters".to_string())?;
                if !(0.0..=100.0).contains(&v) {
                    return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                }
                // Printed as Redis prints them: no trailing zeros ("50.0" -> "50").
                out.push(format!("{v}"));
            }
            Ok(out.join(" "))
        }
        Kind::Dir => {
            if words.len() != 1 {
                return Err("wrong number of arguments".into());
            }
            std::env::set_current_dir(value).map_err(|e| strerror(&e))?;
            Ok(current_dir())
        }
    }
}

/// cluster-announce-hostname's check, as Redis's: shorter than 256 bytes,
/// letters, digits, hyphens and dots only (it goes into the bus's ping
/// extensions and into -MOVED redirections).
fn announced_hostname(value: &str) -> Result<(), String> {
    if value.len() >= 256 {
        return Err("Hostnames must be less than 256 characters".into());
    }
    if !value.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
        return Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into());
    }
    Ok(())
}

/// A byte nodes.conf's aux fields may hold (human node names go there):
/// printable, and not one that separates the file's fields.
fn aux_char(c: u8) -> bool {
    c.is_ascii_graphic() && !matches!(c, b',' | b'=' | b'@')
}

/// The working directory, as CONFIG GET dir prints it.
fn current_dir() -> String {
    std::env::current_dir().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default()
}

/// client-output-buffer-limit: merges `words` (class hard soft seconds,
/// repeated) into `current` and prints all three classes.
fn obuf_limits(current: &str, words: &[&str]) -> Result<String, String> {
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut classes: Vec<(String, [i64; 3])> = Vec::new();
    let cur: Vec<&str> = current.split_whitespace().collect();
    for c in cur.chunks(4) {
        if let [name, h, s, t] = c {
            classes.push((name.to_string(), [h.parse().unwrap_or(0), s.parse().unwrap_or(0), t.parse().unwrap_or(0)]));
        }
    }
    for c in words.chunks(4) {
        let class = match c[0].to_ascii_lowercase().as_str() {
            "normal" => "normal",
            "slave" | "replica" => "slave",
            "pubsub" => "pubsub",
            _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
        };
        let hard = parse_memory(c[1]).filter(|v| *v >= 0);
        let soft = parse_memory(c[2]).filter(|v| *v >= 0);
        let secs = c[3].parse::<i64>().ok().filter(|v| *v >= 0);
        let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs) else {
            return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into());
        };
        match classes.iter_mut().find(|(n, _)| n == class) {
            Some((_, v)) => *v = [hard, soft, secs],
            None => classes.push((class.to_string(), [hard, soft, secs])),
        }
    }
    Ok(classes.iter().map(|(n, [h, s, t])| format!("{n} {h} {s} {t}")).collect::<Vec<_>>().join(" "))
}

/// One class's client-output-buffer-limit: a client is closed once its
/// unsent output reaches `hard` bytes, or stays at or above `soft` bytes
/// for more than `soft_secs` seconds (0: that limit is off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObufLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

/// client-output-buffer-limit for the three client classes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObufConfig {
    pub normal: ObufLimit,
    pub replica: ObufLimit,
    pub pubsub: ObufLimit,
}

impl ObufConfig {
    /// Reads the canonical value (`normal h s t slave h s t pubsub h s t`).
    fn parse(value: &str) -> ObufConfig {
        let mut out = ObufConfig::default();
        let words: Vec<&str> = value.split_whitespace().collect();
        for c in words.chunks(4) {
            let [name, h, s, t] = c else { continue };
            let limit = ObufLimit { hard: h.parse().unwrap_or(0), soft: s.parse().unwrap_or(0), soft_secs: t.parse().unwrap_or(0) };
            match *name {
                "normal" => out.normal = limit,
                "slave" => out.replica = limit,
                "pubsub" => out.pubsub = limit,
                _ => {}
            }
        }
        out
    }
}

/// notify-keyspace-events: checks the class letters and prints them the
/// way Redis does (`A` for all classes, then `K`, `E`, `m`).
fn keyspace_events(value: &str) -> Result<String, String> {
    crate::notify::parse(value).map(crate::notify::format).ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
}

/// Why a configuration could not be loaded; `report` prints it the way
/// Redis does before exiting with status 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// A bad line: (line number, the line) when known, and the reason.
    Directive { at: Option<(usize, String)>, reason: String },
    /// A config file (or an included one) could not be read; Redis logs
    /// this as a warning rather than printing the error block.
    Open(String),
}

impl LoadError {
    /// The text for standard error (`Directive`) or for the log (`Open`).
    pub fn report(&self) -> String {
        match self {
            LoadError::Directive { at, reason } => {
                let mut s = format!("\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\n", crate::REDIS_VERSION);
                if let Some((n, line)) = at {
                    s.push_str(&format!("Reading the configuration file, at line {n}\n>>> '{line}'\n"));
                }
                s.push_str(reason);
                s.push('\n');
                s
            }
            LoadError::Open(msg) => msg.clone(),
        }
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.report().trim())
    }
}

/// Quotes an argument the way Redis's `sdscatrepr` does, so the loader's
/// argument splitter reads it back unchanged.
fn repr(arg: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in arg {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => s.push(b as char),
            b => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// What the command line asks to load, in Redis's order: a config file,
/// then standard input (`-`), then the options as config lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// The config file named first, as given.
    pub file: Option<String>,
    /// `-` was given: append standard input to the file's text.
    pub stdin: bool,
    /// `--name value ...` options, one config line each.
    pub options: String,
}

/// Splits the arguments after the program name the way redis-server does:
/// a first argument not starting with `-` names the config file, `-`
/// first or last reads standard input, and `--name v1 v2` becomes the line
/// `name "v1" "v2"` (an option name with no value before the next option
/// is allowed only for `--save`, meaning `save ""`).
pub fn options_text(args: &[String]) -> Sources {
    let mut src = Sources::default();
    let mut j = 0;
    if let Some(first) = args.first() {
        if !first.starts_with('-') {
            src.file = Some(first.clone());
            j = 1;
        }
    }
    let n = args.len();
    let mut last_has_value = true;
    while j < n {
        let a = &args[j];
        if a == "-" && (j == 0 || j == n - 1) {
            src.stdin = true;
        } else if last_has_value && a.starts_with("--") {
            if !src.options.is_empty() {
                src.options.push('\n');
            }
            src.options.push_str(&a[2..]);
            src.options.push(' ');
            let words = resp::parse::split_args(a.as_bytes()).map_or(0, |w| w.len());
            if words == 1 {
                last_has_value = false;
                let next_is_option = j + 1 < n && args[j + 1].starts_with("--");
                if a.eq_ignore_ascii_case("--save") && (next_is_option || j == n - 1) {
                    src.options.push_str("\"\"");
                    last_has_value = next_is_option;
                } else if a.eq_ignore_ascii_case("--sentinel") && next_is_option {
                    last_has_value = true;
                }
            } else {
                last_has_value = true;
            }
        } else {
            src.options.push_str(&repr(a.as_bytes()));
            src.options.push(' ');
            last_has_value = true;
        }
        j += 1;
    }
    src
}

/// The running configuration.
#[derive(Debug, Clone)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
    /// Path of the config file given at start-up (absolute), for CONFIG
    /// REWRITE and INFO.
    pub file: Option<String>,
    /// Listening port.
    pub port: u16,
    /// Number of databases.
    pub databases: usize,
    /// Largest accepted bulk argument.
    pub proto_max_bulk_len: i64,
    /// Largest query buffer before the client is closed.
    pub query_buffer_limit: usize,
    /// Idle seconds before a client is closed (0: never).
    pub timeout: u64,
    /// Maximum simultaneous clients.
    pub maxclients: usize,
    /// Cron frequency.
    pub hz: u64,
    /// Active expiry effort 1..10.
    pub active_expire_effort: u64,
    /// Each command log's threshold, by `LogKind` (microseconds for the
    /// slow log, bytes for the others; negative disables).
    pub commandlog_threshold: [i64; 3],
    /// Each command log's length, by `LogKind` (0 disables).
    pub commandlog_max_len: [usize; 3],
    /// Latency monitor threshold in milliseconds (0 disables).
    pub latency_threshold: u64,
    /// latency-tracking: per-command latency histograms (INFO
    /// latencystats, LATENCY HISTOGRAM) are kept only while it is on.
    pub latency_tracking: bool,
    /// maxmemory in bytes (0: unlimited).
    pub maxmemory: u64,
    /// maxmemory-clients in bytes, a percentage already applied to
    /// maxmemory (0: no client eviction).
    pub maxmemory_clients: u64,
    /// maxmemory-policy and the settings eviction reads on every command.
    pub eviction: Eviction,
    /// client-output-buffer-limit, per client class.
    pub obuf: ObufConfig,
    /// Hash encoding thresholds (hash-max-listpack-entries/-value).
    pub hash: HashConfig,
    /// List node fill (list-max-listpack-size).
    pub list: ListConfig,
    /// Set encoding thresholds (set-max-intset-entries, set-max-listpack-*).
    pub set: SetConfig,
    /// Sorted-set encoding thresholds (zset-max-listpack-*).
    pub zset: ZsetConfig,
    /// Stream node limits (stream-node-max-bytes/-entries).
    pub stream: StreamConfig,
    /// Largest sparse HyperLogLog before it turns dense (hll-sparse-max-bytes).
    pub hll_sparse_max_bytes: usize,
    /// Minutes of idleness per step of LFU counter decay (lfu-decay-time).
    pub lfu_decay_time: i64,
    /// notify-keyspace-events as `notify::*` flag bits.
    pub notify_flags: u32,
    /// Where and how much to log (loglevel, logfile, replicaof).
    pub log: Log,
    /// `rename-command from to` directives in order (`to` empty: removed),
    /// for whoever builds the command table.
    pub renames: Vec<(String, String)>,
    /// `user name rules...` directives, each split into words, in order.
    pub users: Vec<Vec<Vec<u8>>>,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = Config {
            values: PARAMS.iter().map(|p| (p.name, p.default.to_string())).collect(),
            file: None,
            port: 6379,
            databases: 16,
            proto_max_bulk_len: 0,
            query_buffer_limit: 0,
            timeout: 0,
            maxclients: 0,
            hz: 10,
            active_expire_effort: 1,
            commandlog_threshold: [0; 3],
            commandlog_max_len: [0; 3],
            latency_threshold: 0,
            latency_tracking: true,
            maxmemory: 0,
            maxmemory_clients: 0,
            eviction: Eviction::default(),
            obuf: ObufConfig::default(),
            hash: HashConfig::default(),
            list: ListConfig::default(),
            set: SetConfig::default(),
            zset: ZsetConfig::default(),
            stream: StreamConfig::default(),
            hll_sparse_max_bytes: 0,
            lfu_decay_time: 0,
            notify_flags: 0,
            log: Log::default(),
            renames: Vec::new(),
            users: Vec::new(),
        };
        c.values.insert("dir", current_dir());
        c.refresh();
        c
    }
}

/// maxmemory-policy: what goes when memory is over maxmemory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Nothing: commands that may grow memory are refused.
    #[default]
    NoEviction,
    /// Any key, least recently used first.
    AllkeysLru,
    /// Any key, least frequently used first.
    AllkeysLfu,
    /// Any key, at random.
    AllkeysRandom,
    /// Keys with a TTL, least recently used first.
    VolatileLru,
    /// Keys with a TTL, least frequently used first.
    VolatileLfu,
    /// Keys with a TTL, at random.
    VolatileRandom,
    /// Keys with a TTL, nearest deadline first.
    VolatileTtl,
    /// Any key, least recently modified first (Redis 8.6).
    AllkeysLrm,
    /// Keys with a TTL, least recently modified first (Redis 8.6).
    VolatileLrm,
}

impl Policy {
    /// The policy named `s` (one of `POLICIES`; anything else: noeviction).
    pub fn parse(s: &str) -> Policy {
        match s {
            "allkeys-lru" => Policy::AllkeysLru,
            "allkeys-lfu" => Policy::AllkeysLfu,
            "allkeys-random" => Policy::AllkeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            "allkeys-lrm" => Policy::AllkeysLrm,
            "volatile-lrm" => Policy::VolatileLrm,
            _ => Policy::NoEviction,
        }
    }

    /// True for the volatile-* policies (only keys with a TTL go).
    pub fn volatile(self) -> bool {
        matches!(self, Policy::VolatileLru | Policy::VolatileLfu | Policy::VolatileRandom | Policy::VolatileTtl | Policy::VolatileLrm)
    }

    /// True for the LRM policies (keys' access bits hold the last write).
    pub fn lrm(self) -> bool {
        matches!(self, Policy::AllkeysLrm | Policy::VolatileLrm)
    }

    /// True for the LFU policies (keys' access bits count accesses).
    pub fn lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }

    /// How candidates are ranked; None for noeviction.
    pub fn rank(self) -> Option<storage::Rank> {
        Some(match self {
            Policy::NoEviction => return None,
            // The idle time of the clock, which LRM sets on writes only.
            Policy::AllkeysLru | Policy::VolatileLru | Policy::AllkeysLrm | Policy::VolatileLrm => storage::Rank::Lru,
            Policy::AllkeysLfu | Policy::VolatileLfu => storage::Rank::Lfu,
            Policy::AllkeysRandom | Policy::VolatileRandom => storage::Rank::Random,
            Policy::VolatileTtl => storage::Rank::Ttl,
        })
    }
}

/// The eviction settings, mirrored from their parameters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Eviction {
    /// maxmemory-policy.
    pub policy: Policy,
    /// maxmemory-samples: keys sampled per database per round.
    pub samples: usize,
    /// maxmemory-eviction-tenacity (0..=100).
    pub tenacity: u32,
    /// lfu-log-factor.
    pub lfu_log_factor: u32,
    /// lazyfree-lazy-eviction: free evicted values on the freeing thread.
    pub lazy: bool,
}

/// State of one load: `save` lines accumulate within it.
#[derive(Default)]
struct LoadState {
    save_seen: bool,
}

impl Config {
    /// The canonical value of a parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        let p = lookup(name)?;
        self.values.get(p.name).map(|s| s.as_str())
    }

    fn num(&self, name: &str) -> i64 {
        self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// True if a yes/no parameter is yes.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name) == Some("yes")
    }

    /// `tcp-keepalive` in seconds (0: off), read when a connection is made.
    pub fn tcp_keepalive(&self) -> u64 {
        self.get("tcp-keepalive").and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Whether an action guarded by `setting` (enable-protected-configs,
    /// enable-debug-command, enable-module-command) is allowed for a client
    /// connected from `addr`: `yes`, or `local` and a loopback peer.
    pub fn allows(&self, setting: &str, addr: &str) -> bool {
        match self.get(setting) {
            Some("yes") => true,
            Some("local") => {
                let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
                host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) || host.is_empty()
            }
            _ => false,
        }
    }

    /// The save points: (seconds, changes) pairs; empty when snapshots are off.
    pub fn save_points(&self) -> Vec<(i64, i64)> {
        let w: Vec<i64> = self.get("save").unwrap_or("").split_whitespace().filter_map(|w| w.parse().ok()).collect();
        w.chunks(2).filter(|c| c.len() == 2).map(|c| (c[0], c[1])).collect()
    }

    /// The words of a flags parameter (shutdown-on-sigterm ...); empty for `default`.
    pub fn flags(&self, name: &str) -> Vec<&str> {
        self.get(name).unwrap_or("").split_whitespace().filter(|w| *w != "default").collect()
    }

    /// Sets a parameter, checking its value. `startup` allows immutable ones.
    ///
    /// Errors: Redis's CONFIG SET reason text.
    pub fn set(&mut self, name: &str, value: &str, startup: bool) -> Result<(), String> {
        let p = lookup(name).ok_or_else(|| "Unknown option or number of arguments for CONFIG SET - '".to_string() + name + "'")?;
        if !p.mutable && !startup {
            return Err("can't set immutable config".into());
        }
        let mut v = match p.kind {
            Kind::ObufLimits => obuf_limits(&self.values[p.name], &value.split_whitespace().collect::<Vec<_>>())?,
            _ => canonical(p, value)?,
        };
        if p.name == "hz" {
            // Redis clamps an out-of-range hz rather than refusing it.
            v = v.parse::<i64>().map_or(v, |hz| hz.clamp(1, 500).to_string());
        }
        if !startup && p.name == "tls-cluster" && self.flag("cluster-enabled") && self.values[p.name] != v {
            return Err(TLS_CLUSTER_FIXED.into());
        }
        self.values.insert(p.name, v);
        self.refresh();
        Ok(())
    }

    /// All (name, value) pairs matching a glob, with aliases matched too.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for p in PARAMS {
            let v = &self.values[p.name];
            let hidden_ok = !p.hidden || p.name.as_bytes().eq_ignore_ascii_case(pattern);
            if hidden_ok && crate::glob::matches(pattern, p.name.as_bytes(), true) && !out.iter().any(|(n, _)| *n == p.name) {
                out.push((p.name, v.clone()));
            }
            for a in p.aliases {
                if crate::glob::matches(pattern, a.as_bytes(), true) && !out.iter().any(|(n, _)| n == a) {
                    out.push((a, v.clone()));
                }
            }
        }
        out
    }

    /// Mirrors hot values into typed fields.
    pub fn refresh(&mut self) {
        self.port = self.num("port") as u16;
        self.databases = self.num("databases") as usize;
        self.proto_max_bulk_len = self.num("proto-max-bulk-len");
        self.query_buffer_limit = self.num("client-query-buffer-limit") as usize;
        self.timeout = self.num("timeout") as u64;
        self.maxclients = self.num("maxclients") as usize;
        self.hz = self.num("hz").max(1) as u64;
        self.active_expire_effort = self.num("active-expire-effort").clamp(1, 10) as u64;
        self.commandlog_threshold = [
            self.num("slowlog-log-slower-than"),
            self.num("commandlog-request-larger-than"),
            self.num("commandlog-reply-larger-than"),
        ];
        self.commandlog_max_len = [
            self.num("slowlog-max-len") as usize,
            self.num("commandlog-large-request-max-len") as usize,
            self.num("commandlog-large-reply-max-len") as usize,
        ];
        self.latency_threshold = self.num("latency-monitor-threshold") as u64;
        self.latency_tracking = self.flag("latency-tracking");
        self.maxmemory = self.num("maxmemory") as u64;
        self.obuf = ObufConfig::parse(self.get("client-output-buffer-limit").unwrap_or(""));
        self.maxmemory_clients = match self.get("maxmemory-clients").unwrap_or("0").strip_suffix('%') {
            Some(pct) => self.maxmemory * pct.parse::<u64>().unwrap_or(0) / 100,
            None => parse_memory(self.get("maxmemory-clients").unwrap_or("0")).unwrap_or(0).max(0) as u64,
        };
        self.eviction = Eviction {
            policy: Policy::parse(self.get("maxmemory-policy").unwrap_or("noeviction")),
            samples: self.num("maxmemory-samples").clamp(1, 64) as usize,
            tenacity: self.num("maxmemory-eviction-tenacity").clamp(0, 100) as u32,
            lfu_log_factor: self.num("lfu-log-factor").clamp(0, u32::MAX as i64) as u32,
            lazy: self.get("lazyfree-lazy-eviction") == Some("yes"),
        };
        let size = |name: &str| self.num(name).max(0) as usize;
        let hash = HashConfig {
            max_listpack_entries: size("hash-max-listpack-entries"),
            max_listpack_value: size("hash-max-listpack-value"),
            ..HashConfig::default()
        };
        let set = SetConfig {
            max_intset_entries: size("set-max-intset-entries"),
            max_listpack_entries: size("set-max-listpack-entries"),
            max_listpack_value: size("set-max-listpack-value"),
            ..SetConfig::default()
        };
        let zset = ZsetConfig {
            max_listpack_entries: size("zset-max-listpack-entries"),
            max_listpack_value: size("zset-max-listpack-value"),
            ..ZsetConfig::default()
        };
        let stream = StreamConfig {
            node_max_bytes: size("stream-node-max-bytes"),
            node_max_entries: size("stream-node-max-entries"),
            idmp_duration: size("stream-idmp-duration") as u64,
            idmp_maxsize: size("stream-idmp-maxsize") as u64,
        };
        // value-compression implies Redis's lightest list compression (the
        // ends plain, the interior nodes compressed) when list-compress-depth
        // asks for none; an explicit depth wins (docs/design/compression.md).
        let list_compress_depth = match self.num("list-compress-depth").max(0) as usize {
            0 if self.flag("value-compression") => 1,
            d => d,
        };
        let list = ListConfig {
            fill: self.num("list-max-listpack-size"),
            compress: list_compress_depth,
        };
        let hll_sparse_max_bytes = size("hll-sparse-max-bytes");
        (self.hash, self.set, self.zset, self.stream, self.list) = (hash, set, zset, stream, list);
        self.hll_sparse_max_bytes = hll_sparse_max_bytes;
        self.lfu_decay_time = self.num("lfu-decay-time");
        self.notify_flags = self.get("notify-keyspace-events").and_then(crate::notify::parse).unwrap_or(0);
        let file = self.get("logfile").unwrap_or("");
        self.log = Log {
            level: Level::parse(self.get("loglevel").unwrap_or("notice")).unwrap_or(Level::Notice),
            file: (!file.is_empty()).then(|| file.to_string()),
            role: if self.get("replicaof").unwrap_or("").is_empty() { 'M' } else { 'S' },
            syslog: self.flag("syslog-enabled").then(|| crate::log::Syslog {
                ident: self.get("syslog-ident").unwrap_or("redis").to_string(),
                facility: crate::log::Syslog::facility_code(self.get("syslog-facility").unwrap_or("local0")),
            }),
        };
    }

    /// The encoding thresholds loaded values (RESTORE, RDB) are shaped by.
    pub fn shapes(&self) -> Shapes {
        Shapes { hash: self.hash, list: self.list, set: self.set, zset: self.zset }
    }

    /// Applies a redis.conf-style text, then checks the whole (the log file
    /// can be opened, no replicaof in cluster mode). `is_command` tells
    /// whether a command exists, for `rename-command`.
    ///
    /// Errors: the first bad line, as Redis reports it.
    pub fn load(&mut self, text: &str, is_command: &dyn Fn(&str) -> bool) -> Result<(), LoadError> {
        let mut state = LoadState::default();
        self.load_lines(text, is_command, &mut state, 0)?;
        let bad = |reason: String| LoadError::Directive { at: None, reason };
        if let Some(path) = self.log.file.clone() {
            std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(|e| bad(format!("Can't open the log file: {}", strerror(&e))))?;
        }
        if self.flag("cluster-enabled") && !self.get("replicaof").unwrap_or("").is_empty() {
            return Err(bad("replicaof directive not allowed in cluster mode".into()));
        }
        // The bus listens on tls-port + 10000 (or cluster-port) and speaks
        // TLS with the tls-port's certificates.
        if self.flag("cluster-enabled") && self.flag("tls-cluster") && self.get("tls-port").is_none_or(|p| p == "0") {
            return Err(bad("tls-cluster yes needs a tls-port: the cluster bus speaks TLS with its certificates".into()));
        }
        Ok(())
    }

    /// Applies a config text with the commands densekv has, for tests and
    /// callers without a command table: every `rename-command` source is
    /// taken to exist.
    ///
    /// Errors: the first bad line, as text.
    pub fn load_text(&mut self, text: &str) -> Result<(), String> {
        self.load(text, &|_| true).map_err(|e| e.to_string())
    }

    fn load_lines(&mut self, text: &str, is_command: &dyn Fn(&str) -> bool, state: &mut LoadState, depth: usize) -> Result<(), LoadError> {
        for (i, raw) in text.split('\n').enumerate() {
            let line = raw.trim_matches([' ', '\t', '\r', '\n']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |reason: &str| LoadError::Directive { at: Some((i + 1, line.to_string())), reason: reason.to_string() };
            let Some(args) = resp::parse::split_args(line.as_bytes()) else {
                return Err(fail("Unbalanced quotes in configuration line"));
            };
            let args: Vec<String> = args.into_iter().map(|a| String::from_utf8_lossy(&a).into_owned()).collect();
            if args.is_empty() {
                continue;
            }
            let name = args[0].to_ascii_lowercase();
            if let Some(p) = lookup(&name) {
                if !p.kind.is_list() && args.len() != 2 {
                    return Err(fail("wrong number of arguments"));
                }
                let mut value = if p.kind.is_list() { args[1..].join(" ") } else { args[1].clone() };
                if matches!(p.kind, Kind::Save) {
                    // Within one load, save lines add up; `save ""` clears.
                    let cur = self.values[p.name].clone();
                    if state.save_seen && !value.trim().is_empty() && !cur.is_empty() {
                        value = format!("{cur} {value}");
                    }
                    state.save_seen = true;
                }
                self.set(p.name, &value, true).map_err(|e| fail(&e))?;
                continue;
            }
            if DEPRECATED.contains(&name.as_str()) && args.len() == 2 {
                continue;
            }
            match name.as_str() {
                "include" if args.len() == 2 => self.include(&args[1], is_command, state, depth)?,
                "rename-command" if args.len() == 3 => {
                    let exists = |n: &str| {
                        let n = n.to_ascii_lowercase();
                        let renamed_away = self.renames.iter().any(|(f, _)| *f == n);
                        let renamed_to = self.renames.iter().any(|(_, t)| *t == n);
                        renamed_to || (is_command(&n) && !renamed_away)
                    };
                    if !exists(&args[1]) {
                        return Err(fail("No such command in rename-command"));
                    }
                    if !args[2].is_empty() && exists(&args[2]) {
                        return Err(fail("Target command name already exists"));
                    }
                    self.renames.push((args[1].to_ascii_lowercase(), args[2].to_ascii_lowercase()));
                }
                "user" if args.len() >= 2 => self.users.push(args.iter().map(|a| a.as_bytes().to_vec()).collect()),
                "loadmodule" if args.len() >= 2 => {
                    return Err(fail(&format!("Can't load module from {}: densekv does not load Redis modules", args[1])));
                }
                "sentinel" => {
                    if args.len() != 1 {
                        return Err(fail("sentinel directive while not in sentinel mode"));
                    }
                }
                _ if name.contains('.') => {
                    if args.len() < 2 {
                        return Err(fail("Module config specified without value"));
                    }
                    // No module is ever loaded to take it (Redis's text).
                    return Err(fail("Module Configuration detected without loadmodule directive or no ApplyConfig call: aborting"));
                }
                _ => return Err(fail("Bad directive or wrong number of arguments")),
            }
        }
        Ok(())
    }

    /// `include path`: loads another file in place (a glob pattern may
    /// match no file at all).
    fn include(&mut self, pattern: &str, is_command: &dyn Fn(&str) -> bool, state: &mut LoadState, depth: usize) -> Result<(), LoadError> {
        if depth > 32 {
            return Err(LoadError::Open(format!("Fatal error, can't open config file '{pattern}': Too many levels of include")));
        }
        let files = if pattern.contains(['*', '?', '[']) { glob_files(pattern) } else { vec![pattern.to_string()] };
        for f in files {
            let text = read_config_file(&f)?;
            self.load_lines(&text, is_command, state, depth + 1)?;
        }
        Ok(())
    }

    /// The non-default parameters, as config-file lines (CONFIG REWRITE);
    /// with `all`, every parameter that has a value to write.
    pub fn rewrite_text(&self, all: bool) -> String {
        let mut out = String::new();
        // A cluster node's primary is nodes.conf's to say: Redis writes no
        // replicaof into a cluster node's config file (it would refuse it).
        let cluster = self.flag("cluster-enabled");
        for p in PARAMS {
            let v = &self.values[p.name];
            // An empty list at its default (no primary) has no line to
            // write; one set empty (`bind ""`, `save ""`) is written.
            let nothing = all && v.is_empty() && p.kind.is_list() && *v == p.default;
            if (all || v != p.default) && !nothing && !(cluster && p.name == "replicaof") {
                out.push_str(p.name);
                out.push(' ');
                if v.is_empty() || (v.contains(' ') && !p.kind.is_list()) {
                    out.push('"');
                    out.push_str(v);
                    out.push('"');
                } else {
                    out.push_str(v);
                }
                out.push('\n');
            }
        }
        out
    }

    /// Parses the command line after the program name: `[config-file]
    /// [--name value ...]`, reading the file (standard input is not read:
    /// see `Sources` for callers that support `-`).
    ///
    /// Errors: Redis's error text for the first bad line or unreadable file.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let src = options_text(args);
        let mut text = String::new();
        let mut c = Config::default();
        if let Some(f) = &src.file {
            text = read_config_file(f).map_err(|e| e.to_string())?;
            c.file = Some(f.clone());
        }
        text.push('\n');
        text.push_str(&src.options);
        c.load_text(&text)?;
        Ok(c)
    }
}

/// Reads a config file.
///
/// Errors: Redis's "Fatal error, can't open config file" text.
pub fn read_config_file(path: &str) -> Result<String, LoadError> {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| LoadError::Open(format!("Fatal error, can't open config file '{path}': {}", strerror(&e))))
}

/// The files a glob pattern names, sorted; only the last path component
/// may hold wildcards (as in `include /etc/redis/conf.d/*.conf`).
fn glob_files(pattern: &str) -> Vec<String> {
    let path = std::path::Path::new(pattern);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let Some(name) = path.file_name() else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| crate::glob::matches(name.as_encoded_bytes(), e.file_name().as_encoded_bytes(), false))
        .map(|e| dir.join(e.file_name()).to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn args_and_aliases() {
        let c = Config::from_args(&args(&["--port", "7000", "--save", "", "--hash-max-ziplist-entries", "64"])).unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.get("hash-max-listpack-entries"), Some("64"));
        assert_eq!(c.get("save"), Some(""));
        assert_eq!(c.hll_sparse_max_bytes, 3000);
        assert_eq!(c.lfu_decay_time, 1);
        assert!(Config::from_args(&args(&["--nosuch", "1"])).is_err());
        assert!(Config::from_args(&args(&["--port", "x"])).is_err());
    }

    #[test]
    fn command_line_becomes_config_lines() {
        let s = options_text(&args(&["/etc/r.conf", "--port", "7000", "--save", "--loglevel", "verbose", "-"]));
        assert_eq!(s.file.as_deref(), Some("/etc/r.conf"));
        assert!(s.stdin);
        assert_eq!(s.options, "port \"7000\" \nsave \"\"\nloglevel \"verbose\" ");
        let s = options_text(&args(&["--save", "900", "1", "--bind", "a b"]));
        assert_eq!(s.options, "save \"900\" \"1\" \nbind \"a b\" ");
        assert_eq!(options_text(&args(&["--save"])).options, "save \"\"");
        assert_eq!(repr(b"a\"b\\\n\x01"), "\"a\\\"b\\\\\\n\\x01\"");
    }

    #[test]
    fn errors_read_as_redis_prints_them() {
        let mut c = Config::default();
        let e = c.load("port 7000\n\n  foo bar  \n", &|_| true).unwrap_err();
        assert_eq!(
            e.report(),
            format!("\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\nReading the configuration file, at line 3\n>>> 'foo bar'\nBad directive or wrong number of arguments\n", crate::REDIS_VERSION)
        );
        let e = Config::default().load("port", &|_| true).unwrap_err();
        assert!(e.report().ends_with(">>> 'port'\nwrong number of arguments\n"), "{}", e.report());
        let e = Config::default().load("\nport \"abc\" ", &|_| true).unwrap_err();
        assert!(e.report().contains("at line 2\n>>> 'port \"abc\"'\nargument couldn't be parsed into an integer\n"), "{}", e.report());
        let e = Config::default().load("bind \"127.0.0.1", &|_| true).unwrap_err();
        assert!(e.report().ends_with("Unbalanced quotes in configuration line\n"));
    }

    #[test]
    fn list_parameters() {
        let mut c = Config::default();
        assert_eq!(c.get("save"), Some("3600 1 300 100 60 10000"), "Redis's default save points");
        c.load("save 900 1\nsave 300 10\nclient-output-buffer-limit replica 1mb 2mb 3\nbind 127.0.0.1 -::1\nshutdown-on-sigterm now nosave\noom-score-adj-values 0 100 900\n", &|_| true).unwrap();
        assert_eq!(c.get("save"), Some("900 1 300 10"));
        assert_eq!(c.save_points(), vec![(900, 1), (300, 10)]);
        assert_eq!(c.get("client-output-buffer-limit"), Some("normal 0 0 0 slave 1048576 2097152 3 pubsub 33554432 8388608 60"));
        assert_eq!(c.get("bind"), Some("127.0.0.1 -::1"));
        assert_eq!(c.get("shutdown-on-sigterm"), Some("nosave now"));
        assert_eq!(c.flags("shutdown-on-sigint"), Vec::<&str>::new());
        assert_eq!(c.get("oom-score-adj-values"), Some("0 100 900"));
        c.set("latency-tracking-info-percentiles", "0.0 50.0 99.90 100", false).unwrap();
        assert_eq!(c.get("latency-tracking-info-percentiles"), Some("0 50 99.9 100"));
        // A new load (CONFIG SET) replaces the save points.
        c.set("save", "60 5", false).unwrap();
        assert_eq!(c.get("save"), Some("60 5"));
        assert_eq!(c.set("save", "60", false), Err("Invalid save parameters".into()));
        assert!(c.set("shutdown-on-sigint", "save nosave", false).unwrap_err().contains("SAVE and NOSAVE"));
        assert!(c.set("shutdown-on-sigint", "", false).unwrap_err().starts_with("argument(s) must be one of the following"));
        // DEBUG is off by default, as in Redis; `local` lets loopback clients use it.
        assert!(!c.allows("enable-debug-command", "127.0.0.1:5000"));
        c.set("enable-debug-command", "local", true).unwrap();
        assert!(c.allows("enable-debug-command", "127.0.0.1:5000") && c.allows("enable-debug-command", "[::1]:5000"));
        assert!(!c.allows("enable-debug-command", "10.0.0.1:5000") && !c.allows("enable-protected-configs", "127.0.0.1:1"));
        c.load("save 1 1\nsave \"\"\n", &|_| true).unwrap();
        assert_eq!(c.get("save"), Some(""));
        c.load("save 3600 1 300 100\n", &|_| true).unwrap();
        assert_eq!(c.get("save"), Some("3600 1 300 100"));
    }

    #[test]
    fn special_directives() {
        let mut c = Config::default();
        let known = |n: &str| ["flushall", "config", "get"].contains(&n);
        c.load("rename-command FLUSHALL \"\"\nrename-command config cfg\nuser default on nopass ~* +@all\nlua-replicate-commands yes\nsentinel\n", &known).unwrap();
        assert_eq!(c.renames, vec![("flushall".into(), "".into()), ("config".into(), "cfg".into())]);
        // No module is loaded, so neither its settings (as Redis with no
        // module to take them).
        assert!(c.load("loadmodule /x.so", &known).unwrap_err().report().contains("Can't load module from /x.so"));
        assert!(c.load("search.timeout 5", &known).unwrap_err().report().contains("Module Configuration detected without loadmodule directive"));
        assert_eq!(c.users, vec![["user", "default", "on", "nopass", "~*", "+@all"].map(|w| w.as_bytes().to_vec()).to_vec()]);
        assert!(c.load("rename-command nosuch x", &known).unwrap_err().report().contains("No such command in rename-command"));
        assert!(c.load("rename-command get cfg", &known).unwrap_err().report().contains("Target command name already exists"));
        assert!(c.load("search.timeout", &known).unwrap_err().report().contains("Module config specified without value"));
        assert!(c.load("include", &known).unwrap_err().report().contains("Bad directive"));
    }

    #[test]
    fn rewrite_writes_lists_set_empty_and_every_setting_with_all() {
        let mut c = Config::default();
        c.load("bind \"\"\nsave \"\"\n", &|_| true).unwrap();
        let text = c.rewrite_text(false);
        assert!(text.lines().any(|l| l == "bind \"\""), "{text}");
        assert!(text.lines().any(|l| l == "save \"\""), "{text}");
        assert!(!text.contains("replicaof"));
        let all = c.rewrite_text(true);
        assert!(all.lines().any(|l| l == "hz 10") && all.lines().any(|l| l == "bind \"\""));
        assert!(!all.contains("replicaof"), "no primary: no line");
        let mut back = Config::default();
        back.load(&all, &|_| true).unwrap();
        assert_eq!(back.rewrite_text(true), all);
    }

    #[test]
    fn settings_without_their_mechanism_refuse_all_but_what_holds() {
        let mut c = Config::default();
        // Held: defragmentation's thresholds while it is off, the C locale,
        // tls-cluster outside cluster mode (all as in Redis).
        c.load("activedefrag no\nactive-defrag-cycle-max 50\nlocale-collate C\ntls-cluster yes\n", &|_| true).unwrap();
        assert_eq!(c.get("active-defrag-cycle-max"), Some("50"));
        c.set("active-defrag-threshold-lower", "20", false).unwrap();
        c.set("locale-collate", "POSIX", false).unwrap();
        c.set("tls-cluster", "no", false).unwrap();
        // Refused at start-up and at CONFIG SET alike.
        assert!(c.load("activedefrag yes", &|_| true).unwrap_err().report().contains("Active defragmentation cannot be enabled"));
        assert!(c.set("activedefrag", "yes", false).unwrap_err().starts_with("Active defragmentation cannot be enabled"));
        assert_eq!(c.get("activedefrag"), Some("no"));
        assert!(c.load("locale-collate en_US.UTF-8", &|_| true).unwrap_err().report().contains("collates strings bytewise"));
        assert!(c.set("locale-collate", "de_DE", false).is_err());
        assert_eq!(c.get("locale-collate"), Some("POSIX"));
        let mut node = Config::default();
        assert!(node.load("cluster-enabled yes\ntls-cluster yes\n", &|_| true).unwrap_err().report().contains("tls-cluster yes needs a tls-port"));
        let mut node = Config::default();
        node.load("cluster-enabled yes\n", &|_| true).unwrap();
        assert!(node.set("tls-cluster", "yes", false).unwrap_err().contains("set at start-up on a cluster node"));
        node.set("tls-cluster", "no", false).unwrap();
    }

    #[test]
    fn include_loads_in_place() {
        let dir = std::env::temp_dir().join(format!("densekv-conf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(dir.join("conf.d/a.conf"), "maxclients 77\n").unwrap();
        std::fs::write(dir.join("conf.d/b.conf"), "maxclients 88\nsave 10 1\n").unwrap();
        let mut c = Config::default();
        c.load(&format!("save 20 2\ninclude {}/conf.d/*.conf\n", dir.display()), &|_| true).unwrap();
        assert_eq!(c.maxclients, 88);
        assert_eq!(c.get("save"), Some("20 2 10 1"));
        let e = c.load(&format!("include {}/none.conf", dir.display()), &|_| true).unwrap_err();
        assert!(matches!(e, LoadError::Open(ref m) if m.starts_with("Fatal error, can't open config file") && m.ends_with("No such file or directory")), "{e:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn logging_follows_config() {
        let mut c = Config::default();
        c.load("loglevel warning\nlogfile \"\"\n", &|_| true).unwrap();
        assert_eq!(c.log, Log { level: Level::Warning, file: None, role: 'M', syslog: None });
        let e = c.load("logfile /nonexistent-dir/x.log", &|_| true).unwrap_err();
        assert_eq!(e, LoadError::Directive { at: None, reason: "Can't open the log file: No such file or directory".into() });
    }

    #[test]
    fn keyspace_event_flags() {
        assert_eq!(keyspace_events("KEA").as_deref(), Ok("AKE"));
        assert_eq!(keyspace_events("Ex$l").as_deref(), Ok("$lxE"));
        assert_eq!(keyspace_events("An").as_deref(), Ok("A"));
        assert_eq!(keyspace_events("").as_deref(), Ok(""));
        assert!(keyspace_events("KEQ").is_err());
    }

    #[test]
    fn memory_values() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("x"), None);
    }

    #[test]
    fn table_names_unique() {
        let mut seen = std::collections::HashSet::new();
        for p in PARAMS {
            for n in std::iter::once(&p.name).chain(p.aliases.iter()) {
                assert!(seen.insert(*n), "duplicate {n}");
            }
            if !matches!(p.kind, Kind::Dir) {
                assert_eq!(canonical(p, p.default).as_deref(), Ok(p.default), "{}: the default is not canonical", p.name);
            }
        }
    }
}
