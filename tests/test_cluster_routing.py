"""Cluster mode end to end: start-up (nodes.conf, its lock, Redis's lines), key routing
(-MOVED, -ASK, -CROSSSLOT, -TRYAGAIN, -CLUSTERDOWN), ASKING, READONLY on a replica,
transactions, scripts, the cluster-mode refusals, Pub/Sub over the bus.

Nodes are started on free loopback ports whose bus ports (+10000) are free too, in a
directory of their own, and stopped by the PIDs we started. A cluster is laid out by
writing each node's nodes.conf before it starts (Redis 7.0's format: every node, its
slots, migrating and importing slots), so the same layout runs on densekv and on
Debian's redis-server 7.0; the nodes then find each other over the bus. Replies are
compared byte for byte with Redis's, ports replaced by node names (skipped where
redis-server is not installed).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

import clusterlib as cl
from clusterlib import key_slot
from conftest import HOST, RawConn, ping, server_binary

BUS = cl.BUS_OFFSET
IDS = {"A": "a" * 40, "B": "b" * 40, "C": "c" * 40}


def key_in_slot(slot: int) -> str:
    for i in range(1_000_000):
        k = f"k{i}"
        if key_slot(k.encode()) == slot:
            return k
    raise RuntimeError(slot)


class Node:
    """One cluster node process we started."""

    def __init__(self, binary: str, name: str, port: int, workdir: str, extra: tuple[str, ...]):
        self.binary, self.name, self.port, self.workdir = binary, name, port, workdir
        self.extra = extra
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(workdir, "server.log")

    def args(self) -> list[str]:
        return [self.binary, "--port", str(self.port), "--bind", HOST, "--cluster-enabled", "yes",
                "--save", "", "--appendonly", "no", "--enable-debug-command", "yes",
                "--cluster-node-timeout", "5000", "--logfile", self.log_path, *self.extra]

    def start(self, wait: bool = True) -> "Node":
        self.proc = subprocess.Popen(self.args(), cwd=self.workdir, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait:
            deadline = time.monotonic() + 15
            while ping(self.port, 0.5) is None:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not start\n{self.log()}")
                time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def conn(self) -> RawConn:
        return RawConn(self.port, timeout=10)


def conf_text(layout: dict, ports: dict, me: str) -> str:
    """nodes.conf (Redis 7.0's format) for node `me` of `layout`."""
    lines = []
    epoch = 0
    for i, (name, spec) in enumerate(layout.items(), start=1):
        flags = ("myself," if name == me else "") + ("slave" if spec.get("replicaof") else "master")
        primary = IDS[spec["replicaof"]] if spec.get("replicaof") else "-"
        cfg_epoch = 0 if spec.get("replicaof") else i
        epoch = max(epoch, cfg_epoch)
        slots = [f"{a}-{b}" if a != b else str(a) for a, b in spec.get("slots", [])]
        if name == me:
            slots += [f"[{s}->-{IDS[t]}]" for s, t in spec.get("migrating", {}).items()]
            slots += [f"[{s}-<-{IDS[f]}]" for s, f in spec.get("importing", {}).items()]
        p = ports[name]
        lines.append(" ".join([IDS[name], f"{HOST}:{p}@{p + BUS}", flags, primary, "0", "0",
                               str(cfg_epoch), "connected", *slots]).rstrip())
    lines.append(f"vars currentEpoch {epoch} lastVoteEpoch 0")
    return "\n".join(lines) + "\n"


IMPLS = ["densekv", "redis"]


def binary_for(impl: str) -> str:
    if impl == "densekv":
        return server_binary()
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server not installed")
    return exe


@pytest.fixture
def cluster():
    """cluster(impl, layout, *extra) -> {name: Node}: one process per node of `layout`
    ({name: {"slots": [(a, b)], "replicaof": name, "migrating": {slot: to},
    "importing": {slot: from}}}), started from written nodes.conf files. Stopped
    (by our PIDs) and removed after the test."""
    made: list[tuple[Node, str]] = []

    def make(impl: str, layout: dict, *extra: str) -> dict[str, Node]:
        binary = binary_for(impl)
        taken: set[int] = set()
        ports = {}
        for name in layout:
            ports[name] = cl.free_port_pair(taken)
            taken |= {ports[name], ports[name] + BUS}
        nodes = {}
        for name in layout:
            d = tempfile.mkdtemp(prefix=f"densekv-cluster-{name}-")
            with open(os.path.join(d, "nodes.conf"), "w") as f:
                f.write(conf_text(layout, ports, name))
            n = Node(binary, name, ports[name], d, extra)
            made.append((n, d))
            nodes[name] = n.start()
        return nodes

    yield make
    for n, d in made:
        n.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fresh():
    """fresh(*impls) -> [Node]: new nodes (no nodes.conf), one per implementation
    named ("densekv" or "redis"), on free port pairs; stopped and removed after."""
    made: list[Node] = []

    def make(*impls: str) -> list[Node]:
        taken: set[int] = set()
        out = []
        for i, impl in enumerate(impls):
            port = cl.free_port_pair(taken)
            taken |= {port, port + BUS}
            n = Node(binary_for(impl), "ABCDEFG"[i], port, tempfile.mkdtemp(prefix="densekv-cluster-"), ())
            made.append(n)
            out.append(n.start())
        return out

    yield make
    for n in made:
        n.stop()
        shutil.rmtree(n.workdir, ignore_errors=True)


def cluster_ok(nodes: list[Node], timeout: float = 30.0) -> None:
    """Until every node says cluster_state:ok and knows every other node."""
    deadline = time.monotonic() + timeout
    for n in nodes:
        c = n.conn()
        while True:
            info = c.call("CLUSTER", "INFO")
            known = c.call("CLUSTER", "NODES").count(b"connected")
            if b"cluster_state:ok" in info and known == len(nodes):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{n.name}: {info!r}\n{c.call('CLUSTER', 'NODES')!r}\n{n.log()[-3000:]}")
            time.sleep(0.1)
        c.close()


def normalize(reply: bytes, nodes: dict[str, Node]) -> bytes:
    """A reply with each node's client port replaced by its name."""
    for name, n in nodes.items():
        reply = reply.replace(f"{HOST}:{n.port}".encode(), f"<{name}>".encode())
    return reply


def wait_serving(node: Node, key: str, timeout: float = 30.0) -> None:
    """Until `node` answers a read of `key` with something other than -CLUSTERDOWN."""
    c = node.conn()
    deadline = time.monotonic() + timeout
    try:
        while True:
            r = c.call("GET", key)
            if not r.startswith(b"-CLUSTERDOWN"):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{node.name} still answers {r!r}\n{node.log()[-3000:]}")
            time.sleep(0.1)
    finally:
        c.close()


def run_script(nodes: dict[str, Node], script: list[tuple]) -> list[bytes]:
    """Runs (node, *command) steps, one connection per node, in order."""
    conns = {}
    out = []
    try:
        for node, *cmd in script:
            c = conns.get(node) or conns.setdefault(node, nodes[node].conn())
            out.append(normalize(c.call(*cmd), nodes))
    finally:
        for c in conns.values():
            c.close()
    return out


def both(cluster, layout: dict, script: list[tuple], ready: list[tuple[str, str]], *extra: str) -> list[bytes]:
    """Runs `script` on densekv, then (if installed) on Redis 7, and checks that the
    replies are the same; returns densekv's."""
    results = {}
    for impl in IMPLS:
        if impl == "redis" and shutil.which("redis-server") is None:
            continue
        nodes = cluster(impl, layout, *extra)
        for node, key in ready:
            wait_serving(nodes[node], key)
        results[impl] = run_script(nodes, script)
        for n in nodes.values():
            n.stop()
    if "redis" in results:
        for step, d, r in zip(script, results["densekv"], results["redis"]):
            assert d == r, f"{step}: densekv {d!r} != redis {r!r}"
    return results["densekv"]


ALL = {"A": {"slots": [(0, 16383)]}}

# Keys and their slots: b 3300, c 7365, foo 12182.


# ---------------------------------------------------------------- start-up


def test_new_node_writes_and_locks_its_config(tmp_path):
    binary = server_binary()
    port = cl.free_port_pair(set())
    n = Node(binary, "A", port, str(tmp_path), ()).start()
    try:
        log = n.log()
        m = re.search(r"No cluster configuration found, I'm ([0-9a-f]{40})", log)
        assert m, log
        me = m.group(1)
        assert f"Running mode=cluster, port={port}." in log
        assert log.index("No cluster configuration found") < log.index("Running mode=cluster")
        conf = (tmp_path / "nodes.conf").read_text()
        assert conf.startswith(me) and "myself,master" in conf and "\nvars currentEpoch " in conf, conf
        # A second node on the same file refuses to start, with Redis's words.
        other = Node(binary, "B", cl.free_port_pair({port, port + BUS}), str(tmp_path), ())
        proc = subprocess.run(other.args()[:-2] + ["--logfile", ""], cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=15)
        assert proc.returncode == 1
        assert ("Sorry, the cluster configuration file nodes.conf is already used by a different "
                "Redis Cluster node. Please make sure that different nodes use different cluster "
                "configuration files.") in proc.stdout, proc.stdout
        c = n.conn()
        info = c.call("INFO", "server").decode() + c.call("INFO", "cluster").decode()
        assert "redis_mode:cluster" in info and "cluster_enabled:1" in info, info
        c.close()
    finally:
        n.stop()
    # Restarted, it is the same node.
    n = Node(binary, "A", port, str(tmp_path), ()).start()
    try:
        assert f"Node configuration loaded, I'm {me}" in n.log()
    finally:
        n.stop()


def test_corrupted_config_is_fatal(tmp_path):
    (tmp_path / "nodes.conf").write_text("this is not a cluster config\n")
    port = cl.free_port_pair(set())
    n = Node(server_binary(), "A", port, str(tmp_path), ())
    proc = subprocess.run(n.args(), cwd=str(tmp_path), capture_output=True, text=True, timeout=15)
    assert proc.returncode == 1
    assert "Unrecoverable error: corrupted cluster config file" in n.log(), n.log()


def test_tls_cluster_without_a_tls_port_is_refused(tmp_path):
    # The bus speaks TLS with the tls-port's certificates on that port +
    # 10000: a node with none must not start and gossip in the clear.
    # (The bus over TLS itself: test_tls.py.)
    port = cl.free_port_pair(set())
    n = Node(server_binary(), "A", port, str(tmp_path), ("--tls-cluster", "yes"))
    proc = subprocess.run(n.args() + ["--logfile", ""], cwd=str(tmp_path), capture_output=True, text=True, timeout=15)
    assert proc.returncode == 1
    assert "tls-cluster yes needs a tls-port" in proc.stdout + proc.stderr


def test_cluster_directives_take_effect(tmp_path):
    port = cl.free_port_pair(set())
    n = Node(server_binary(), "A", port, str(tmp_path), ("--cluster-announce-hostname", "node-a.example")).start()
    try:
        c = n.conn()
        assert c.call("CONFIG", "GET", "cluster-announce-hostname") == b"*2\r\n$25\r\ncluster-announce-hostname\r\n$14\r\nnode-a.example\r\n"
        assert c.call("CONFIG", "SET", "cluster-node-timeout", "7000") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "cluster-announce-hostname", "bad host") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'cluster-announce-hostname') - "
            b"Hostnames may only contain alphanumeric characters, hyphens or dots\r\n")
        assert c.call("CONFIG", "SET", "cluster-enabled", "no").startswith(b"-ERR CONFIG SET failed")
        assert c.call("REPLICAOF", "127.0.0.1", "1") == b"-ERR REPLICAOF not allowed in cluster mode.\r\n"
        # The bus listens where tls-cluster said at start-up.
        assert c.call("CONFIG", "SET", "tls-cluster", "yes") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'tls-cluster') - "
            b"tls-cluster is set at start-up on a cluster node: the bus listens on the port it chooses\r\n")
        assert c.call("CONFIG", "GET", "tls-cluster") == b"*2\r\n$11\r\ntls-cluster\r\n$2\r\nno\r\n"
        c.close()
    finally:
        n.stop()


# ---------------------------------------------------------------- one node


def test_single_node_serves_every_slot(cluster):
    script = [
        ("A", "SET", "b", "1"), ("A", "GET", "b"), ("A", "SET", "foo", "2"),
        ("A", "MSET", "b", "1", "c", "2"), ("A", "MSET", "{b}x", "1", "{b}y", "2"),
        ("A", "MGET", "b", "b"), ("A", "DEL", "b", "foo"),
        ("A", "SELECT", "1"), ("A", "SELECT", "0"), ("A", "SET", "b", "1"),
        ("A", "MOVE", "b", "1"), ("A", "SWAPDB", "0", "1"),
        ("A", "COPY", "b", "{b}c", "DB", "1"), ("A", "COPY", "b", "{b}c", "DB", "0"),
        ("A", "READONLY"), ("A", "READWRITE"), ("A", "ASKING"), ("A", "GET", "b"),
        ("A", "SSUBSCRIBE", "b", "c"),
        ("A", "SPUBLISH", "b", "hi"), ("A", "PUBLISH", "b", "hi"),
        ("A", "MULTI"), ("A", "SET", "b", "3"), ("A", "SET", "c", "4"), ("A", "EXEC"),
        ("A", "MULTI"), ("A", "SET", "b", "3"), ("A", "SET", "{b}x", "4"), ("A", "EXEC"),
        ("A", "EVAL", "return redis.call('get', KEYS[1])", "1", "b"),
        ("A", "EVAL", "return redis.call('get', KEYS[1])", "2", "b", "c"),
        ("A", "WATCH", "b", "c"),
        ("A", "REPLICAOF", "127.0.0.1", "1"), ("A", "FAILOVER"),
        ("A", "DBSIZE"),
    ]
    out = both(cluster, ALL, script, [("A", "b")])
    assert out[3] == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    assert out[7] == b"-ERR SELECT is not allowed in cluster mode\r\n"
    assert out[10] == b"-ERR MOVE is not allowed in cluster mode\r\n"
    assert out[11] == b"-ERR SWAPDB is not allowed in cluster mode\r\n"
    assert out[12] == b"-ERR Copying to another database is not allowed in cluster mode\r\n"
    assert out[24] == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    assert out[28] == b"*2\r\n+OK\r\n+OK\r\n"


def test_readonly_and_asking_show_as_redis_shows_them(cluster):
    nodes = cluster("densekv", ALL)
    c = nodes["A"].conn()
    assert c.call("READONLY") == b"+OK\r\n"
    assert b" flags=r " in c.call("CLIENT", "INFO")
    assert c.call("ASKING") == b"+OK\r\n"
    assert b" flags=r " in c.call("CLIENT", "INFO")
    assert c.call("RESET") == b"+RESET\r\n"
    assert b" flags=N " in c.call("CLIENT", "INFO")
    c.close()


def test_cluster_down(cluster):
    lonely = key_in_slot(16383)
    part = {"A": {"slots": [(0, 16382)]}}
    script = [("A", "GET", lonely), ("A", "GET", "b"), ("A", "SET", "b", "1"), ("A", "PING")]
    down = both(cluster, part, script, [])
    assert down[0] == b"-CLUSTERDOWN Hash slot not served\r\n"
    assert down[1] == b"-CLUSTERDOWN The cluster is down\r\n"
    reads = both(cluster, part, script, [], "--cluster-allow-reads-when-down", "yes")
    assert reads[1] == b"$-1\r\n"
    assert reads[2] == b"-CLUSTERDOWN The cluster is down and only accepts read commands\r\n"
    partial = both(cluster, part, script, [("A", "b")], "--cluster-require-full-coverage", "no")
    assert partial[0] == b"-CLUSTERDOWN Hash slot not served\r\n"
    assert partial[2] == b"+OK\r\n"


# ---------------------------------------------------------------- several nodes

TWO = {
    "A": {"slots": [(0, 8191)], "migrating": {3300: "B"}},
    "B": {"slots": [(8192, 16383)], "importing": {3300: "A"}},
}


def test_moved_ask_tryagain(cluster):
    script = [
        ("A", "DEBUG", "POPULATE", "1", "{b}"),  # {b}:0, in migrating slot 3300
        ("A", "GET", "foo"), ("A", "SET", "foo", "1"), ("B", "GET", "c"),
        ("A", "MSET", "c", "1", "foo", "2"),
        ("A", "EXISTS", "{b}:0"), ("A", "GET", "{b}:1"),
        ("A", "MGET", "{b}:0", "{b}:1"), ("A", "MGET", "{b}:1", "{b}:2"),
        ("B", "GET", "{b}:1"), ("B", "ASKING"), ("B", "GET", "{b}:1"), ("B", "GET", "{b}:1"),
        ("B", "ASKING"), ("B", "MGET", "{b}:1", "{b}:2"),
        ("B", "ASKING"), ("B", "MULTI"), ("B", "SET", "{b}:1", "x"), ("B", "GET", "{b}:1"), ("B", "EXEC"),
        ("A", "MULTI"), ("A", "SET", "c", "1"), ("A", "SET", "foo", "1"), ("A", "EXEC"),
        ("A", "EVAL", "return redis.call('get', KEYS[1])", "1", "foo"),
        ("A", "EVAL", "return redis.call('get', 'c')", "0"),
    ]
    out = both(cluster, TWO, script, [("A", "c"), ("B", "foo")])
    assert out[1] == b"-MOVED 12182 <B>\r\n"
    assert out[3] == b"-MOVED 7365 <A>\r\n"
    assert out[4] == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    assert out[5] == b":1\r\n"
    assert out[6] == b"-ASK 3300 <B>\r\n"
    assert out[7] == b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
    assert out[8] == b"-ASK 3300 <B>\r\n"
    assert out[9] == b"-MOVED 3300 <A>\r\n"
    assert out[11] == b"$-1\r\n"
    assert out[12] == b"-MOVED 3300 <A>\r\n"
    assert out[14] == b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
    assert out[19] == b"*2\r\n+OK\r\n$1\r\nx\r\n"
    assert out[22] == b"-MOVED 12182 <B>\r\n"
    assert out[23] == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    assert out[24] == b"-MOVED 12182 <B>\r\n"


def test_script_reaching_a_key_elsewhere(cluster):
    nodes = cluster("densekv", TWO)
    wait_serving(nodes["A"], "c")
    wait_serving(nodes["B"], "foo")
    c = nodes["A"].conn()
    r = c.call("EVAL", "return redis.call('get', 'foo')", "0")
    # Redis 7.0 ends the sentence at "node"; 7.2 and later add " script".
    assert r.startswith(b"-ERR Script attempted to access a non local key in a cluster node"), r
    r = c.call("EVAL", "return redis.call('get', 'c')", "1", "{c}x")
    assert r == b"$-1\r\n"
    # A key of this node, in another slot than the declared one: refused to
    # a script with a shebang, allowed to an old-style one (Redis 7.0's
    # scriptPrepareForRun sets SCRIPT_ALLOW_CROSS_SLOT in compat mode).
    other = key_in_slot(100)
    r = c.call("EVAL", f"#!lua\nreturn redis.call('get', '{other}')", "1", "c")
    assert r.startswith(b"-ERR Script attempted to access keys that do not hash to the same slot"), r
    r = c.call("EVAL", f"return redis.call('get', '{other}')", "1", "c")
    assert r == b"$-1\r\n", r
    far = key_in_slot(200)
    r = c.call("EVAL", f"redis.call('set', 'c', '1'); return redis.call('set', '{far}', '2')", "0")
    assert r == b"+OK\r\n", r
    r = c.call("EVAL", f"#!lua flags=allow-cross-slot-keys\nreturn redis.call('get', '{other}')", "1", "c")
    assert r == b"$-1\r\n"
    r = c.call("EVAL", "#!lua flags=no-cluster\nreturn 1", "0")
    assert r == b"-ERR Can not run script on cluster, 'no-cluster' flag is set.\r\n"
    c.close()


def test_readonly_reads_on_a_replica(cluster):
    layout = {"A": {"slots": [(0, 16383)]}, "C": {"replicaof": "A"}}
    script = [
        ("A", "SET", "b", "1"), ("A", "WAIT", "1", "5000"),
        ("C", "GET", "b"), ("C", "READONLY"), ("C", "GET", "b"), ("C", "SET", "b", "2"),
        ("C", "READWRITE"), ("C", "GET", "b"),
    ]
    out = both(cluster, layout, script, [("A", "b")])
    assert out[1] == b":1\r\n"
    assert out[2] == b"-MOVED 3300 <A>\r\n"
    assert out[4] == b"$1\r\n1\r\n"
    assert out[5] == b"-MOVED 3300 <A>\r\n"
    assert out[7] == b"-MOVED 3300 <A>\r\n"


def test_announce_port_shows_at_once(cluster):
    nodes = cluster("densekv", ALL)
    wait_serving(nodes["A"], "b")
    c = nodes["A"].conn()
    assert c.call("CONFIG", "SET", "cluster-announce-port", "12345") == b"+OK\r\n"
    mine = [line for line in c.call("CLUSTER", "NODES").split(b"\n") if b"myself" in line]
    assert b":12345@" in mine[0], mine
    c.close()


def test_transaction_with_spublish_runs_on_a_replica(cluster):
    """EXEC routes as Redis's getNodeByQuery with pubsubshard_included: a queued
    SPUBLISH lets the transaction run on a replica of the slot's primary. Redis
    7.2 and later do so; 7.0 sends EXEC -MOVED, so densekv only."""
    layout = {"A": {"slots": [(0, 16383)]}, "C": {"replicaof": "A"}}
    script = [
        ("A", "SET", "b", "1"), ("A", "WAIT", "1", "5000"),
        ("C", "MULTI"), ("C", "SPUBLISH", "b", "hello"), ("C", "EXEC"),
        ("C", "MULTI"), ("C", "SPUBLISH", "b", "hi"), ("C", "GET", "foo"), ("C", "EXEC"),
    ]
    nodes = cluster("densekv", layout)
    wait_serving(nodes["A"], "b")
    out = run_script(nodes, script)
    assert out[1] == b":1\r\n"
    assert out[4] == b"*1\r\n:0\r\n"
    assert out[8] == b"-EXECABORT Transaction discarded because of previous errors.\r\n"


def test_expired_key_in_a_migrating_slot_is_asked_for(cluster):
    script = [
        ("A", "DEBUG", "SET-ACTIVE-EXPIRE", "0"),
        ("A", "SET", "{b}x", "BAR", "PX", "10"), ("A", "DEBUG", "SLEEP", "0.05"),
        ("A", "GET", "{b}x"),
    ]
    out = both(cluster, TWO, script, [("A", "c"), ("B", "foo")])
    assert out[3] == b"-ASK 3300 <B>\r\n"


def test_info_counts_bus_messages_queued_in_a_transaction(cluster):
    nodes = cluster("densekv", {"A": {"slots": [(0, 8191)]}, "B": {"slots": [(8192, 16383)]}})
    wait_serving(nodes["A"], "c")
    wait_serving(nodes["B"], "foo")
    c = nodes["A"].conn()
    assert c.call("MULTI") == b"+OK\r\n"
    c.call("INFO", "memory")
    for _ in range(10):
        c.call("PUBLISH", "x", "y" * 10_000)
    c.call("INFO", "memory")
    r = c.call("EXEC")
    mem = [int(m) for m in re.findall(rb"mem_cluster_links:(\d+)", r)]
    assert len(mem) == 2 and mem[1] >= mem[0] + 100_000, mem
    c.close()


def test_publish_reaches_other_nodes(cluster):
    nodes = cluster("densekv", {"A": {"slots": [(0, 8191)]}, "B": {"slots": [(8192, 16383)]}})
    wait_serving(nodes["A"], "c")
    wait_serving(nodes["B"], "foo")
    sub = nodes["B"].conn()
    assert sub.call("SUBSCRIBE", "news") == b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
    pub = nodes["A"].conn()
    assert pub.call("PUBLISH", "news", "hello") == b":0\r\n"
    assert sub.read_reply(timeout=10) == b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    sub.close()
    pub.close()


def test_bad_bus_bytes_close_only_that_link(cluster):
    nodes = cluster("densekv", ALL)
    wait_serving(nodes["A"], "b")
    with socket.create_connection((HOST, nodes["A"].port + BUS), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 3000)
        s.settimeout(5)
        assert s.recv(100) == b"", "a bad frame closes the link"
    c = nodes["A"].conn()
    assert c.call("SET", "b", "1") == b"+OK\r\n"
    c.close()


# ---------------------------------------------------------------- formed by commands


def test_one_node_with_every_slot_serves_everything(fresh):
    (a,) = fresh("densekv")
    c = a.conn()
    assert c.call("GET", "b") == b"-CLUSTERDOWN Hash slot not served\r\n"
    assert c.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383") == b"+OK\r\n"
    cluster_ok([a])
    for k in ("b", "c", "foo", "{foo}x"):
        assert c.call("SET", k, "v") == b"+OK\r\n"
    assert c.call("MGET", "{foo}x", "foo") == b"*2\r\n$1\r\nv\r\n$1\r\nv\r\n"
    assert c.call("DBSIZE") == b":4\r\n"
    c.close()


@pytest.mark.parametrize("mix", [("densekv", "densekv", "densekv"), ("densekv", "redis", "densekv")])
def test_nodes_meet_and_redirect(fresh, mix):
    """Three primaries formed by ADDSLOTSRANGE and MEET: densekv only, and densekv
    beside a Redis 7 node (the bus speaks Redis's format)."""
    if "redis" in mix and shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    nodes = fresh(*mix)
    ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")]
    for n, (lo, hi) in zip(nodes, ranges):
        c = n.conn()
        assert c.call("CLUSTER", "ADDSLOTSRANGE", lo, hi) == b"+OK\r\n"
        c.close()
    a = nodes[0].conn()
    for n in nodes[1:]:
        assert a.call("CLUSTER", "MEET", HOST, str(n.port)) == b"+OK\r\n"
    cluster_ok(nodes)
    named = {n.name: n for n in nodes}
    # b: slot 3300 (A); c: 7365 (B); foo: 12182 (C).
    for n in nodes:
        c = n.conn()
        for key, owner in (("b", "A"), ("c", "B"), ("foo", "C")):
            r = normalize(c.call("SET", key, n.name), named)
            if owner == n.name:
                assert r == b"+OK\r\n", (n.name, key, r)
            else:
                assert r == f"-MOVED {key_slot(key.encode())} <{owner}>\r\n".encode(), (n.name, key, r)
        c.close()
    # A message published anywhere reaches subscribers everywhere.
    subs = []
    for n in nodes:
        s = n.conn()
        assert s.call("SUBSCRIBE", "news") == b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
        subs.append(s)
    assert a.call("PUBLISH", "news", "hi") == b":1\r\n"
    for s in subs:
        assert s.read_reply(timeout=10) == b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        s.close()
    a.close()


def two_primaries(fresh, impl: str) -> tuple[list[Node], dict[str, str]]:
    """A (slots 0-8191) and B (8192-16383) of `impl`, met and ok; their node ids."""
    if impl == "redis" and shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    nodes = fresh(impl, impl)
    ids = {}
    for n, (lo, hi) in zip(nodes, [("0", "8191"), ("8192", "16383")]):
        c = n.conn()
        assert c.call("CLUSTER", "ADDSLOTSRANGE", lo, hi) == b"+OK\r\n"
        ids[n.name] = c.call("CLUSTER", "MYID").split(b"\r\n")[1].decode()
        c.close()
    a = nodes[0].conn()
    assert a.call("CLUSTER", "MEET", HOST, str(nodes[1].port)) == b"+OK\r\n"
    a.close()
    cluster_ok(nodes)
    return nodes, ids


@pytest.mark.parametrize("impl", IMPLS)
def test_blocked_client_follows_its_slot(fresh, impl):
    nodes, ids = two_primaries(fresh, impl)
    a, b = nodes
    blocked = a.conn()
    blocked.cmd("BLPOP", "b", "0")  # slot 3300, A's
    time.sleep(0.3)
    for n in (b, a):
        c = n.conn()
        assert c.call("CLUSTER", "SETSLOT", "3300", "NODE", ids["B"]) == b"+OK\r\n"
        c.close()
    r = normalize(blocked.read_reply(timeout=10), {"A": a, "B": b})
    assert r == b"-MOVED 3300 <B>\r\n"
    blocked.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_debug_cluster_links(fresh, impl):
    nodes, ids = two_primaries(fresh, impl)
    a, b = nodes
    c = a.conn()
    assert c.call("DEBUG", "CLUSTERLINK", "KILL", "all", "f" * 40) == b"-ERR Unknown node " + b"f" * 40 + b"\r\n"
    assert c.call("DEBUG", "CLUSTERLINK", "KILL", "all", ids["B"]) == b"+OK\r\n"
    # The links come back, and the cluster stays ok.
    deadline = time.monotonic() + 20
    while c.call("CLUSTER", "LINKS").count(b"direction") < 2:
        assert time.monotonic() < deadline, c.call("CLUSTER", "LINKS")
        time.sleep(0.1)
    cluster_ok(nodes)
    # Dropped PUBLISH messages never reach B's subscribers.
    sub = b.conn()
    sub.call("SUBSCRIBE", "news")
    d = b.conn()
    assert d.call("DEBUG", "DROP-CLUSTER-PACKET-FILTER", "4") == b"+OK\r\n"
    c.call("PUBLISH", "news", "lost")
    with pytest.raises(TimeoutError):
        sub.read_reply(timeout=1.5)
    assert d.call("DEBUG", "DROP-CLUSTER-PACKET-FILTER", "-1") == b"+OK\r\n"
    c.call("PUBLISH", "news", "found")
    assert sub.read_reply(timeout=10) == b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nfound\r\n"
    for x in (c, sub, d):
        x.close()


def test_spublish_reaches_the_shard(cluster):
    nodes = cluster("densekv", {"A": {"slots": [(0, 16383)]}, "C": {"replicaof": "A"}})
    wait_serving(nodes["A"], "b")
    sub = nodes["C"].conn()
    deadline = time.monotonic() + 20
    # The replica serves shard channels of its primary's slots, READONLY or not.
    while (r := sub.call("SSUBSCRIBE", "b")) != b"*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:1\r\n":
        assert time.monotonic() < deadline, r
        time.sleep(0.2)
    pub = nodes["A"].conn()
    assert pub.call("SPUBLISH", "b", "hi") == b":0\r\n"
    assert sub.read_reply(timeout=10) == b"*3\r\n$8\r\nsmessage\r\n$1\r\nb\r\n$2\r\nhi\r\n"
    sub.close()
    pub.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_slot_taken_over_drops_its_keys(fresh, impl):
    """A node whose slot another claims with a newer epoch deletes the keys it
    kept there (Redis's dirty slots), and sends their clients on."""
    if impl == "redis" and shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    a, b = fresh(impl, impl)
    ca, cb = a.conn(), b.conn()
    assert ca.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383") == b"+OK\r\n"
    ida = ca.call("CLUSTER", "MYID").split(b"\r\n")[1].decode()
    idb = cb.call("CLUSTER", "MYID").split(b"\r\n")[1].decode()
    assert ca.call("CLUSTER", "MEET", HOST, str(b.port)) == b"+OK\r\n"
    cluster_ok([a, b])
    for k in ("b", "{b}2", "c"):
        assert ca.call("SET", k, "v") == b"+OK\r\n"
    assert cb.call("CLUSTER", "SETSLOT", "3300", "IMPORTING", ida) == b"+OK\r\n"
    assert cb.call("CLUSTER", "SETSLOT", "3300", "NODE", idb) == b"+OK\r\n"
    deadline = time.monotonic() + 20
    while ca.call("DBSIZE") != b":1\r\n":
        assert time.monotonic() < deadline, ca.call("DBSIZE")
        time.sleep(0.1)
    assert normalize(ca.call("GET", "b"), {"B": b}) == b"-MOVED 3300 <B>\r\n"
    assert ca.call("GET", "c") == b"$1\r\nv\r\n"
    ca.close()
    cb.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_link_over_sendbuf_limit_is_freed(fresh, impl):
    """A peer that stops reading: the link's queue passes cluster-link-sendbuf-limit,
    the link is freed and counted (CLUSTER INFO), and comes back once the peer reads."""
    import signal
    nodes, ids = two_primaries(fresh, impl)
    a, b = nodes
    c = a.conn()
    assert c.call("CONFIG", "SET", "cluster-link-sendbuf-limit", str(1 << 20)) == b"+OK\r\n"
    b.proc.send_signal(signal.SIGSTOP)
    try:
        big = "x" * (1 << 20)
        deadline = time.monotonic() + 20
        while b"total_cluster_links_buffer_limit_exceeded:0\r\n" in c.call("CLUSTER", "INFO"):
            assert time.monotonic() < deadline, c.call("CLUSTER", "INFO")
            c.call("PUBLISH", "ch", big)
            time.sleep(0.05)
    finally:
        b.proc.send_signal(signal.SIGCONT)
    assert c.call("PING") == b"+PONG\r\n"
    cluster_ok(nodes)
    c.close()
