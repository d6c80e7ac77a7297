//! Command tips, as COMMAND INFO reports them (Redis 7's "tips"): which
//! replies vary between calls (`nondeterministic_output`, `..._order`), and,
//! for cluster clients that route by them, where a command goes
//! (`request_policy`) and how its replies combine (`response_policy`).

/// Each tip list and the commands (full names) that carry it.
const TIPS: &[(&[&str], &[&str])] = &[
    (&["nondeterministic_output"], &["cluster|bumpepoch", "cluster|count-failure-reports",
        "cluster|getkeysinslot", "cluster|info", "cluster|links", "cluster|myshardid", "cluster|nodes",
        "cluster|replicas", "cluster|shards", "cluster|slaves", "cluster|slots", "client|info",
        "client|list", "dump", "migrate", "object|encoding", "object|freq", "object|idletime",
        "object|refcount", "pttl", "ttl", "hpttl", "hrandfield", "hscan", "httl", "lastsave", "time",
        "spop", "srandmember", "sscan", "zrandmember", "zscan", "xadd", "xautoclaim", "xclaim",
        "xinfo|consumers", "xpending", "xtrim"]),
    (&["nondeterministic_output_order"], &["hgetall", "hkeys", "hvals", "function|list", "command|docs",
        "command|info", "command|list", "command", "module|list", "sdiff", "sinter", "smembers", "sunion"]),
    (&["request_policy:multi_shard"], &["mget"]),
    (&["request_policy:all_nodes", "nondeterministic_output"], &["slowlog|get"]),
    (&["request_policy:all_nodes", "response_policy:agg_sum"], &["latency|reset"]),
    (&["request_policy:all_nodes", "response_policy:all_succeeded"], &["client|setinfo", "client|setname",
        "script|flush", "script|load", "acl|deluser", "acl|save", "acl|setuser", "config|resetstat",
        "config|rewrite", "config|set", "slowlog|reset"]),
    (&["request_policy:all_shards", "nondeterministic_output_order"], &["keys"]),
    (&["request_policy:all_shards", "response_policy:agg_logical_and"], &["script|exists"]),
    (&["request_policy:all_shards", "response_policy:agg_min"], &["wait", "waitaof"]),
    (&["request_policy:all_shards", "response_policy:agg_sum"], &["dbsize"]),
    (&["request_policy:all_shards", "response_policy:all_succeeded"], &["ping", "function|delete",
        "function|flush", "function|load", "function|restore", "flushall", "flushdb", "memory|purge"]),
    (&["request_policy:all_shards", "response_policy:one_succeeded"], &["function|kill", "script|kill"]),
    (&["request_policy:multi_shard", "response_policy:agg_sum"], &["del", "exists", "touch", "unlink"]),
    (&["request_policy:multi_shard", "response_policy:all_succeeded"], &["mset"]),
    (&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"], &[
        "latency|doctor", "latency|graph", "latency|histogram", "latency|history", "latency|latest"]),
    (&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"], &[
        "function|stats", "info", "memory|doctor", "memory|malloc-stats", "memory|stats"]),
    (&["nondeterministic_output", "request_policy:special", "response_policy:special"], &["scan"]),
    (&["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"], &["slowlog|len"]),
    (&["request_policy:all_shards", "response_policy:special", "nondeterministic_output"], &["randomkey"]),
];

/// The tips of a command or subcommand (`config|set`); none for most.
pub fn tips(full_name: &str) -> &'static [&'static str] {
    TIPS.iter().find(|(_, names)| names.contains(&full_name)).map_or(&[], |(tips, _)| tips)
}

#[cfg(test)]
mod tests {
    use super::tips;

    #[test]
    fn each_command_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for (_, names) in super::TIPS {
            for n in *names {
                assert!(seen.insert(*n), "{n} listed twice");
            }
        }
        assert_eq!(tips("dbsize"), ["request_policy:all_shards", "response_policy:agg_sum"]);
        assert!(tips("get").is_empty());
    }
}
