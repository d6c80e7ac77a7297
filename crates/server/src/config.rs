//! Configuration: one table of parameters (name, aliases, kind, default,
//! mutability), read from a redis.conf-style file and `--name value` flags,
//! and served by CONFIG GET/SET/REWRITE.
//!
//! Values are kept as canonical strings (what CONFIG GET prints); the few
//! that the hot path reads are mirrored into typed fields by `refresh`.
//! Parameters that only steer a Redis heuristic we do not have are still
//! accepted and remembered, because clients and Redis's test suite set them.

use std::collections::BTreeMap;

use storage::rdb::Shapes;
use storage::types::hash::HashConfig;
use storage::types::list::ListConfig;
use storage::types::set::SetConfig;
use storage::types::stream::StreamConfig;
use storage::types::zset::ZsetConfig;

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
}

const fn p(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, aliases: &[], kind, default, mutable: true, hidden: false }
}
const fn hidden(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, aliases: &[], kind, default, mutable: true, hidden: true }
}
const fn fixed(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, aliases: &[], kind, default, mutable: false, hidden: false }
}
const fn alias(name: &'static str, aliases: &'static [&'static str], kind: Kind, default: &'static str) -> Param {
    Param { name, aliases, kind, default, mutable: true, hidden: false }
}

const I: Kind = Kind::Int(i64::MIN, i64::MAX);
const U: Kind = Kind::Int(0, i64::MAX);
const B: Kind = Kind::Bool;
const S: Kind = Kind::Str;
const M: Kind = Kind::Mem;

const POLICIES: &[&str] =
    &["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"];

/// Every parameter densekv knows.
pub static PARAMS: &[Param] = &[
    p("port", Kind::Int(0, 65535), "6379"),
    p("bind", S, "127.0.0.1"),
    alias("replicaof", &["slaveof"], S, ""),
    hidden("key-load-delay", I, "0"),
    hidden("rdb-key-save-delay", I, "0"),
    hidden("loading-process-events-interval-bytes", I, "2097152"),
    hidden("active-defrag-max-scan-fields", U, "1000"),
    fixed("databases", Kind::Int(1, i32::MAX as i64), "16"),
    fixed("daemonize", B, "no"),
    fixed("supervised", S, "no"),
    fixed("unixsocket", S, ""),
    fixed("unixsocketperm", U, "0"),
    p("protected-mode", B, "yes"),
    p("timeout", U, "0"),
    p("tcp-keepalive", U, "300"),
    fixed("tcp-backlog", U, "511"),
    p("maxclients", Kind::Int(1, i64::MAX), "10000"),
    p("maxmemory", M, "0"),
    p("maxmemory-policy", Kind::Enum(POLICIES), "noeviction"),
    p("maxmemory-samples", Kind::Int(1, 64), "5"),
    p("maxmemory-eviction-tenacity", Kind::Int(0, 100), "10"),
    p("maxmemory-clients", Kind::MemOrPercent, "0"),
    p("lfu-log-factor", U, "10"),
    p("lfu-decay-time", U, "1"),
    p("hz", Kind::Int(1, 500), "10"),
    p("dynamic-hz", B, "yes"),
    p("active-expire-effort", Kind::Int(1, 10), "1"),
    p("lazyfree-lazy-eviction", B, "no"),
    p("lazyfree-lazy-expire", B, "no"),
    p("lazyfree-lazy-server-del", B, "no"),
    p("lazyfree-lazy-user-del", B, "no"),
    p("lazyfree-lazy-user-flush", B, "no"),
    p("replica-lazy-flush", B, "no"),
    p("proto-max-bulk-len", Kind::Int(1024 * 1024, i64::MAX), "536870912"),
    p("client-query-buffer-limit", Kind::Int(1024 * 1024, i64::MAX), "1073741824"),
    p("client-output-buffer-limit", S, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    p("slowlog-log-slower-than", I, "10000"),
    p("slowlog-max-len", U, "128"),
    p("latency-monitor-threshold", U, "0"),
    p("latency-tracking", B, "yes"),
    p("latency-tracking-info-percentiles", S, "50 99 99.9"),
    p("notify-keyspace-events", S, ""),
    p("loglevel", Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]), "notice"),
    p("logfile", S, ""),
    p("syslog-enabled", B, "no"),
    p("save", S, ""),
    p("dbfilename", S, "dump.rdb"),
    p("dir", S, ""),
    p("appendonly", B, "no"),
    p("appendfilename", S, "appendonly.aof"),
    p("appenddirname", S, "appendonlydir"),
    p("appendfsync", Kind::Enum(&["always", "everysec", "no"]), "everysec"),
    p("no-appendfsync-on-rewrite", B, "no"),
    p("auto-aof-rewrite-percentage", U, "100"),
    p("auto-aof-rewrite-min-size", M, "67108864"),
    p("aof-load-truncated", B, "yes"),
    p("aof-use-rdb-preamble", B, "yes"),
    p("aof-timestamp-enabled", B, "no"),
    p("aof-rewrite-incremental-fsync", B, "yes"),
    p("rdb-save-incremental-fsync", B, "yes"),
    p("rdbcompression", B, "yes"),
    p("rdbchecksum", B, "yes"),
    p("rdb-del-sync-files", B, "no"),
    p("stop-writes-on-bgsave-error", B, "yes"),
    p("requirepass", S, ""),
    p("masterauth", S, ""),
    p("masteruser", S, ""),
    p("replica-read-only", B, "yes"),
    p("replica-serve-stale-data", B, "yes"),
    p("replica-priority", U, "100"),
    p("repl-backlog-size", M, "1048576"),
    p("repl-backlog-ttl", U, "3600"),
    p("repl-timeout", U, "60"),
    p("repl-ping-replica-period", U, "10"),
    p("repl-diskless-sync", B, "yes"),
    p("repl-diskless-sync-delay", U, "5"),
    p("repl-diskless-sync-max-replicas", U, "0"),
    p("repl-diskless-load", S, "disabled"),
    p("repl-disable-tcp-nodelay", B, "no"),
    p("min-replicas-to-write", U, "0"),
    p("min-replicas-max-lag", U, "10"),
    p("cluster-enabled", B, "no"),
    p("cluster-node-timeout", U, "15000"),
    alias("busy-reply-threshold", &["lua-time-limit"], U, "5000"),
    p("enable-debug-command", S, "local"),
    p("enable-protected-configs", S, "no"),
    p("enable-module-command", S, "no"),
    alias("hash-max-listpack-entries", &["hash-max-ziplist-entries"], U, "512"),
    alias("hash-max-listpack-value", &["hash-max-ziplist-value"], U, "64"),
    alias("zset-max-listpack-entries", &["zset-max-ziplist-entries"], U, "128"),
    alias("zset-max-listpack-value", &["zset-max-ziplist-value"], U, "64"),
    p("set-max-intset-entries", U, "512"),
    p("set-max-listpack-entries", U, "128"),
    p("set-max-listpack-value", U, "64"),
    alias("list-max-listpack-size", &["list-max-ziplist-size"], I, "-2"),
    p("list-compress-depth", U, "0"),
    p("stream-node-max-bytes", M, "4096"),
    p("stream-node-max-entries", U, "100"),
    p("hll-sparse-max-bytes", M, "3000"),
    p("activerehashing", B, "yes"),
    p("activedefrag", B, "no"),
    p("active-defrag-cycle-min", U, "1"),
    p("active-defrag-cycle-max", U, "25"),
    p("active-defrag-ignore-bytes", M, "104857600"),
    p("active-defrag-threshold-lower", U, "10"),
    p("active-defrag-threshold-upper", U, "100"),
    p("jemalloc-bg-thread", B, "yes"),
    p("io-threads", Kind::Int(1, 128), "1"),
    p("io-threads-do-reads", B, "no"),
    p("close-on-replica-write", B, "yes"),
    p("crash-log-enabled", B, "yes"),
    p("crash-memcheck-enabled", B, "yes"),
    p("set-proc-title", B, "yes"),
    p("proc-title-template", S, "{title} {listen-addr} {server-mode}"),
    p("oom-score-adj", S, "no"),
    p("oom-score-adj-values", S, "0 200 800"),
    p("disable-thp", B, "yes"),
    p("shutdown-timeout", U, "10"),
    p("shutdown-on-sigint", S, "default"),
    p("shutdown-on-sigterm", S, "default"),
    p("tracking-table-max-keys", U, "1000000"),
    p("acllog-max-len", U, "128"),
    p("aclfile", S, ""),
    p("lua-replicate-commands", B, "yes"),
    p("propagation-error-behavior", S, "ignore"),
    p("replica-ignore-disk-write-errors", B, "no"),
    p("replica-announced", B, "yes"),
    p("cluster-allow-reads-when-down", B, "no"),
    p("cluster-allow-pubsubshard-when-down", B, "yes"),
    p("always-show-logo", B, "no"),
    p("save-on-shutdown", B, "no"),
    p("max-new-connections-per-cycle", U, "10"),
    p("max-new-tls-connections-per-cycle", U, "1"),
    p("hide-user-data-from-log", B, "no"),
    p("locale-collate", S, ""),
    p("tls-port", U, "0"),
    p("pidfile", S, ""),
    p("rename-command", S, ""),
    p("ignore-warnings", S, ""),
    p("sanitize-dump-payload", S, "no"),
];

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

/// Checks `value` for `param` and returns its canonical form.
///
/// Errors: a description of why the value is invalid.
pub fn canonical(param: &Param, value: &str) -> Result<String, String> {
    if param.name == "notify-keyspace-events" {
        return keyspace_events(value);
    }
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
        Kind::Enum(words) => {
            let lower = value.to_ascii_lowercase();
            if words.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err("argument(s) must be one of the following: ".to_string() + &words.join(", "))
            }
        }
    }
}

/// notify-keyspace-events: checks the class letters and prints them the
/// way Redis does (`A` for all classes, then `K`, `E`, `m`).
fn keyspace_events(value: &str) -> Result<String, String> {
    crate::notify::parse(value).map(crate::notify::format).ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
}

/// The running configuration.
#[derive(Debug, Clone)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
    /// Path of the config file given at start-up, for CONFIG REWRITE.
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
    /// Slow log threshold in microseconds (negative disables).
    pub slowlog_slower_than: i64,
    /// Slow log length.
    pub slowlog_max_len: usize,
    /// Latency monitor threshold in milliseconds (0 disables).
    pub latency_threshold: u64,
    /// maxmemory in bytes (0: unlimited).
    pub maxmemory: u64,
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
            slowlog_slower_than: 0,
            slowlog_max_len: 0,
            latency_threshold: 0,
            maxmemory: 0,
            hash: HashConfig::default(),
            list: ListConfig::default(),
            set: SetConfig::default(),
            zset: ZsetConfig::default(),
            stream: StreamConfig::default(),
            hll_sparse_max_bytes: 0,
            lfu_decay_time: 0,
            notify_flags: 0,
        };
        c.refresh();
        c
    }
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

    /// Sets a parameter, checking its value. `startup` allows immutable ones.
    ///
    /// Errors: Redis's CONFIG SET reason text.
    pub fn set(&mut self, name: &str, value: &str, startup: bool) -> Result<(), String> {
        let p = lookup(name).ok_or_else(|| "Unknown option or number of arguments for CONFIG SET - '".to_string() + name + "'")?;
        if !p.mutable && !startup {
            return Err("can't set immutable config".into());
        }
        let v = canonical(p, value)?;
        if !startup && (p.name == "port" || p.name == "bind") && self.values[p.name] != v {
            // The listener is bound once; a different address is refused the
            // way Redis refuses one it cannot bind.
            return Err(format!("Unable to listen on this {}: changing it at run time is not supported", p.name));
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
        self.slowlog_slower_than = self.num("slowlog-log-slower-than");
        self.slowlog_max_len = self.num("slowlog-max-len") as usize;
        self.latency_threshold = self.num("latency-monitor-threshold") as u64;
        self.maxmemory = self.num("maxmemory") as u64;
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
        let stream = StreamConfig { node_max_bytes: size("stream-node-max-bytes"), node_max_entries: size("stream-node-max-entries") };
        let list = ListConfig { fill: self.num("list-max-listpack-size") };
        let hll_sparse_max_bytes = size("hll-sparse-max-bytes");
        (self.hash, self.set, self.zset, self.stream, self.list) = (hash, set, zset, stream, list);
        self.hll_sparse_max_bytes = hll_sparse_max_bytes;
        self.lfu_decay_time = self.num("lfu-decay-time");
        self.notify_flags = self.get("notify-keyspace-events").and_then(crate::notify::parse).unwrap_or(0);
    }

    /// The encoding thresholds loaded values (RESTORE, RDB) are shaped by.
    pub fn shapes(&self) -> Shapes {
        Shapes { hash: self.hash, list: self.list, set: self.set, zset: self.zset }
    }

    /// Applies a redis.conf-style text: one `name value...` per line, `#` comments.
    ///
    /// Errors: the line number and reason for the first bad line.
    pub fn load_text(&mut self, text: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let args = resp::parse::split_args(line.as_bytes()).ok_or_else(|| format!("line {}: unbalanced quotes", i + 1))?;
            let args: Vec<String> = args.into_iter().map(|a| String::from_utf8_lossy(&a).into_owned()).collect();
            if args.is_empty() {
                continue;
            }
            let value = args[1..].join(" ");
            self.set(&args[0], &value, true).map_err(|e| format!("line {}: '{}': {e}", i + 1, line))?;
        }
        Ok(())
    }

    /// The non-default parameters, as config-file lines (CONFIG REWRITE).
    pub fn rewrite_text(&self) -> String {
        let mut out = String::new();
        for p in PARAMS {
            let v = &self.values[p.name];
            if v != p.default {
                out.push_str(p.name);
                out.push(' ');
                if v.is_empty() || v.contains(' ') {
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

    /// Parses the command line: `[config-file] [--name value ...]`.
    ///
    /// Errors: a message naming the bad argument.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut c = Config::default();
        let mut i = 0;
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                let text = std::fs::read_to_string(first).map_err(|e| format!("Fatal error, can't open config file '{first}': {e}"))?;
                c.load_text(&text)?;
                c.file = Some(first.clone());
                i = 1;
            }
        }
        while i < args.len() {
            let Some(name) = args[i].strip_prefix("--") else {
                return Err(format!("Invalid argument '{}': options start with --", args[i]));
            };
            let mut vals = Vec::new();
            i += 1;
            while i < args.len() && !args[i].starts_with("--") {
                vals.push(args[i].clone());
                i += 1;
            }
            let value = vals.join(" ");
            c.set(name, &value, true).map_err(|e| format!("Bad directive or wrong number of arguments: '--{name}': {e}"))?;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_and_aliases() {
        let args: Vec<String> = ["--port", "7000", "--save", "", "--hash-max-ziplist-entries", "64"].iter().map(|s| s.to_string()).collect();
        let c = Config::from_args(&args).unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.get("hash-max-listpack-entries"), Some("64"));
        assert_eq!(c.get("save"), Some(""));
        assert_eq!(c.hll_sparse_max_bytes, 3000);
        assert_eq!(c.lfu_decay_time, 1);
        assert!(Config::from_args(&["--nosuch".into(), "1".into()]).is_err());
        assert!(Config::from_args(&["--port".into(), "x".into()]).is_err());
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
        }
    }
}
