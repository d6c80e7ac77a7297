//! The CLUSTER command family on a socketless server: replies and error
//! texts as Redis gives them, with cluster support on and off.

use server::client::Client;
use server::cluster::{Action, Cluster, Settings};
use server::config::Config;
use server::server::Server;

use super::{client, run, TestHost};

struct Node {
    srv: Server,
    host: TestHost,
    c: Client,
}

impl Node {
    fn new(cluster: bool) -> Node {
        let mut config = Config::default();
        // As a node started with cluster-enabled yes: db 0 in slot mode.
        config.set("cluster-enabled", if cluster { "yes" } else { "no" }, true).expect("cluster-enabled");
        let mut srv = Server::new(config);
        if cluster {
            let settings = Settings { port: 7000, bus_port: 17000, node_timeout: 5000, ..Settings::default() };
            srv.cluster = Some(Box::new(Cluster::new(settings, 42)));
        }
        Node { srv, host: TestHost::default(), c: client() }
    }

    /// Runs a command; returns its reply as text.
    fn run(&mut self, line: &[&str]) -> String {
        run(&mut self.srv, &mut self.host, &mut self.c, line)
    }

    fn cluster(&mut self) -> &mut Cluster {
        self.srv.cluster.as_deref_mut().unwrap()
    }
}

#[test]
fn without_cluster_support_every_subcommand_says_so() {
    let mut n = Node::new(false);
    for line in [&["CLUSTER", "INFO"][..], &["CLUSTER", "NODES"], &["CLUSTER", "KEYSLOT", "x"], &["CLUSTER", "HELP"], &["READONLY"]] {
        assert_eq!(n.run(line), "-ERR This instance has cluster support disabled\r\n", "{line:?}");
    }
}

#[test]
fn a_fresh_node_describes_itself() {
    let mut n = Node::new(true);
    let id = n.cluster().myself;
    let id = std::str::from_utf8(&id).unwrap().to_string();
    assert_eq!(n.run(&["CLUSTER", "MYID"]), format!("$40\r\n{id}\r\n"));
    let shard = std::str::from_utf8(&n.cluster().me().shard_id).unwrap().to_string();
    assert_eq!(n.run(&["CLUSTER", "MYSHARDID"]), format!("$40\r\n{shard}\r\n"));
    let line = format!("{id} :7000@17000 myself,master - 0 0 0 connected\n");
    assert_eq!(n.run(&["CLUSTER", "NODES"]), format!("${}\r\n{line}\r\n", line.len()));
    let info = n.run(&["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_state:fail\r\ncluster_slots_assigned:0\r\n"), "{info}");
    assert!(info.contains("cluster_known_nodes:1\r\ncluster_size:0\r\ncluster_current_epoch:0\r\ncluster_my_epoch:0\r\n"), "{info}");
    assert!(info.contains("cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"));
    assert_eq!(n.run(&["CLUSTER", "KEYSLOT", "foo"]), ":12182\r\n");
    assert_eq!(n.run(&["CLUSTER", "KEYSLOT", "{user1000}.following"]), n.run(&["CLUSTER", "KEYSLOT", "{user1000}.followers"]));
    assert_eq!(n.run(&["CLUSTER", "SLOTS"]), "*0\r\n");
    assert_eq!(n.run(&["CLUSTER", "LINKS"]), "*0\r\n");
    let help = n.run(&["CLUSTER", "HELP"]);
    assert!(help.starts_with("*71\r\n+CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+COUNTKEYSINSLOT <slot>\r\n"), "{help}");
    assert!(help.ends_with("+HELP\r\n+    Print this help.\r\n"));
    // Atomic slot migration: Redis 8.4's and Valkey 9's subcommands.
    for sub in ["+MIGRATION IMPORT <start-slot>", "+MIGRATION CANCEL <ID <task-id> | ALL>", "+MIGRATION STATUS [ID <task-id> | ALL]", "+MIGRATESLOTS SLOTSRANGE", "+GETSLOTMIGRATIONS\r\n", "+CANCELSLOTMIGRATIONS\r\n"] {
        assert!(help.contains(sub), "{sub}");
    }
    // CLUSTER INFO ends with Redis 8.4's atomic slot migration fields.
    assert!(info.ends_with(
        "total_cluster_links_buffer_limit_exceeded:0\r\ncluster_slot_migration_active_tasks:0\r\ncluster_slot_migration_active_trim_running:0\r\n\
         cluster_slot_migration_active_trim_current_job_keys:0\r\ncluster_slot_migration_active_trim_current_job_trimmed:0\r\n\
         cluster_slot_migration_stats_active_trim_started:0\r\ncluster_slot_migration_stats_active_trim_completed:0\r\n\
         cluster_slot_migration_stats_active_trim_cancelled:0\r\n\r\n"
    ), "{info}");
}

#[test]
fn slot_assignment_and_its_errors() {
    let mut n = Node::new(true);
    assert_eq!(n.run(&["CLUSTER", "ADDSLOTS", "1", "2", "3"]), "+OK\r\n");
    assert_eq!(n.run(&["CLUSTER", "ADDSLOTS", "3"]), "-ERR Slot 3 is already busy\r\n");
    assert_eq!(n.run(&["CLUSTER", "ADDSLOTS", "5", "5"]), "-ERR Slot 5 specified multiple times\r\n");
    assert_eq!(n.run(&["CLUSTER", "ADDSLOTS", "16384"]), "-ERR Invalid or out of range slot\r\n");
    assert_eq!(n.run(&["CLUSTER", "ADDSLOTSRANGE", "10", "5"]), "-ERR start slot number 10 is greater than end slot number 5\r\n");
    assert_eq!(n.run(&["CLUSTER", "ADDSLOTSRANGE", "10", "20", "30"]), "-ERR wrong number of arguments for 'cluster|addslotsrange' command\r\n");
    assert_eq!(n.run(&["CLUSTER", "ADDSLOTSRANGE", "100", "16383"]), "+OK\r\n");
    assert_eq!(n.run(&["CLUSTER", "DELSLOTS", "50"]), "-ERR Slot 50 is already unassigned\r\n");
    assert_eq!(n.run(&["CLUSTER", "DELSLOTSRANGE", "200", "299"]), "+OK\r\n");
    let id = String::from_utf8(n.cluster().myself.to_vec()).unwrap();
    let nodes = n.run(&["CLUSTER", "NODES"]);
    assert!(nodes.contains(&format!("{id} :7000@17000 myself,master - 0 0 0 connected 1-3 100-199 300-16383\n")), "{nodes}");
    let slots = n.run(&["CLUSTER", "SLOTS"]);
    assert!(slots.starts_with(&format!("*3\r\n*3\r\n:1\r\n:3\r\n*4\r\n$0\r\n\r\n:7000\r\n$40\r\n{id}\r\n*0\r\n")), "{slots}");
    let shards = n.run(&["CLUSTER", "SHARDS"]);
    assert!(shards.starts_with("*1\r\n*4\r\n$5\r\nslots\r\n*6\r\n:1\r\n:3\r\n:100\r\n:199\r\n:300\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n"), "{shards}");
    assert!(shards.ends_with("$6\r\nhealth\r\n$6\r\nonline\r\n"), "{shards}");
    // Keys by slot. The cluster is down (slots 0, 4-99 and 200-299 have no
    // owner), so a SET would be refused: the keys go straight into db 0, as
    // a loaded RDB's would.
    for key in [&b"foo"[..], b"{foo}bar"] {
        assert!(!n.srv.dbs[0].insert(key, storage::Value::string(b"1"), storage::Ttl::Clear, 0));
    }
    assert_eq!(n.run(&["CLUSTER", "COUNTKEYSINSLOT", "12182"]), ":2\r\n");
    assert_eq!(n.run(&["CLUSTER", "COUNTKEYSINSLOT", "16384"]), "-ERR Invalid slot\r\n");
    assert_eq!(n.run(&["CLUSTER", "COUNTKEYSINSLOT", "x"]), "-ERR value is not an integer or out of range\r\n");
    assert_eq!(n.run(&["CLUSTER", "GETKEYSINSLOT", "12182", "1"]).matches('\n').count(), 3);
    assert_eq!(n.run(&["CLUSTER", "GETKEYSINSLOT", "12182", "-1"]), "-ERR Invalid slot or number of keys\r\n");
    assert_eq!(
        n.run(&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "LIMIT", "1"]),
        "*1\r\n*2\r\n:12182\r\n*2\r\n$9\r\nkey-count\r\n:2\r\n"
    );
    assert_eq!(
        n.run(&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "2"]),
        "*2\r\n*2\r\n:1\r\n*2\r\n$9\r\nkey-count\r\n:0\r\n*2\r\n:2\r\n*2\r\n$9\r\nkey-count\r\n:0\r\n"
    );
    assert_eq!(n.run(&["CLUSTER", "SLOT-STATS", "ORDERBY", "cpu"]), "-ERR Unrecognized sort metric for ORDERBY.\r\n");
    assert_eq!(n.run(&["CLUSTER", "FLUSHSLOTS"]), "-ERR DB must be empty to perform CLUSTER FLUSHSLOTS.\r\n");
    assert_eq!(n.run(&["CLUSTER", "RESET"]), "-ERR CLUSTER RESET can't be called with master nodes containing keys\r\n");
    assert_eq!(
        n.run(&["CLUSTER", "SETSLOT", "12182", "NODE", &"a".repeat(40)]),
        format!("-ERR Unknown node {}\r\n", "a".repeat(40))
    );
    assert_eq!(n.run(&["CLUSTER", "SETSLOT", "12182", "BOGUS"]), "-ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP\r\n");
    for key in [&b"foo"[..], b"{foo}bar"] {
        assert!(n.srv.dbs[0].remove(key, 0).is_some());
    }
    assert_eq!(n.run(&["CLUSTER", "FLUSHSLOTS"]), "+OK\r\n");
    assert_eq!(n.run(&["CLUSTER", "SLOTS"]), "*0\r\n");
}

#[test]
fn epochs_membership_and_roles() {
    let mut n = Node::new(true);
    assert_eq!(n.run(&["CLUSTER", "BUMPEPOCH"]), "+BUMPED 1\r\n");
    assert_eq!(n.run(&["CLUSTER", "BUMPEPOCH"]), "+STILL 1\r\n");
    assert_eq!(n.run(&["CLUSTER", "SET-CONFIG-EPOCH", "5"]), "-ERR Node config epoch is already non-zero\r\n");
    assert_eq!(n.run(&["CLUSTER", "SET-CONFIG-EPOCH", "-1"]), "-ERR Invalid config epoch specified: -1\r\n");
    assert_eq!(n.run(&["CLUSTER", "RESET", "HARD"]), "+OK\r\n");
    assert_eq!(n.run(&["CLUSTER", "SET-CONFIG-EPOCH", "5"]), "+OK\r\n");
    assert!(n.run(&["CLUSTER", "INFO"]).contains("cluster_current_epoch:5\r\ncluster_my_epoch:5\r\n"));
    assert_eq!(n.run(&["CLUSTER", "MEET", "not-an-ip", "7001"]), "-ERR Invalid node address specified: not-an-ip:7001\r\n");
    assert_eq!(n.run(&["CLUSTER", "MEET", "127.0.0.1", "x"]), "-ERR Invalid base port specified: x\r\n");
    assert_eq!(n.run(&["CLUSTER", "MEET", "127.0.0.1", "7001", "y"]), "-ERR Invalid bus port specified: y\r\n");
    assert_eq!(n.run(&["CLUSTER", "MEET", "127.0.0.1", "7001"]), "+OK\r\n");
    assert_eq!(n.run(&["CLUSTER", "MEET", "127.0.0.1", "7001"]), "+OK\r\n");
    let nodes = n.run(&["CLUSTER", "NODES"]);
    assert_eq!(nodes.matches("handshake").count(), 1, "{nodes}");
    assert!(nodes.contains(" 127.0.0.1:7001@17001 handshake,meet") || nodes.contains(" 127.0.0.1:7001@17001 handshake "), "{nodes}");
    assert_eq!(n.run(&["CLUSTER", "SET-CONFIG-EPOCH", "6"]), "-ERR The user can assign a config epoch only when the node does not know any other node.\r\n");
    let me = String::from_utf8(n.cluster().myself.to_vec()).unwrap();
    assert_eq!(n.run(&["CLUSTER", "FORGET", &me]), "-ERR I tried hard but I can't forget myself...\r\n");
    assert_eq!(n.run(&["CLUSTER", "FORGET", "nobody"]), "-ERR Unknown node nobody\r\n");
    assert_eq!(n.run(&["CLUSTER", "REPLICATE", &me]), "-ERR Can't replicate myself\r\n");
    assert_eq!(n.run(&["CLUSTER", "REPLICAS", &me]), "*0\r\n");
    assert_eq!(n.run(&["CLUSTER", "COUNT-FAILURE-REPORTS", &me]), ":0\r\n");
    assert_eq!(n.run(&["CLUSTER", "FAILOVER"]), "-ERR You should send CLUSTER FAILOVER to a replica\r\n");
    assert_eq!(n.run(&["CLUSTER", "FAILOVER", "SOON"]), "-ERR syntax error\r\n");
    assert_eq!(n.run(&["CLUSTER", "SAVECONFIG"]), "+OK\r\n");
    assert!(n.cluster().actions.contains(&Action::SaveConfig { fsync: true }));
}
