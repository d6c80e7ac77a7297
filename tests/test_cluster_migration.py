"""Atomic slot migration between densekv primaries: Redis 8.4's CLUSTER MIGRATION
IMPORT / STATUS / CANCEL on the destination, Valkey 9's MIGRATESLOTS /
GETSLOTMIGRATIONS / CANCELSLOTMIGRATIONS on the source.

The main test moves a slot range holding one big hash and many small keys while a
client writes to those keys, following redirections as a cluster client does (MOVED,
ASK, TRYAGAIN); any other error, or an acknowledged write missing afterwards, fails it.
Sizes: DENSEKV_ASM_HASH_FIELDS (default 200,000; the issue's 1,000,000 is run by hand)
and DENSEKV_ASM_KEYS (default 100,000).

Nodes are started on free loopback port pairs and killed by PID (tests/clusterlib.py).
"""

from __future__ import annotations

import os
import threading
import time

import pytest

import clusterlib as cl
from clusterlib import HOST, ReplyError
from conftest import server_binary

HASH_FIELDS = int(os.environ.get("DENSEKV_ASM_HASH_FIELDS", "200000"))
SMALL_KEYS = int(os.environ.get("DENSEKV_ASM_KEYS", "100000"))
RANGE = (0, 999)  # the slots moved: the first primary's
COUNTERS = 200


@pytest.fixture
def cluster():
    ns = cl.NodeSet(prefix="densekv-asm-test-")
    yield ns
    try:
        print(ns.log_tails(30))
    finally:
        ns.cleanup()


def two_primaries(ns: cl.NodeSet, replicas: bool = False):
    """A (slots 0-8191) and B (8192-16383), each with a replica when asked."""
    binary = server_binary()
    a, b = ns.start(binary), ns.start(binary)
    reps = {}
    if replicas:
        reps = {ns.start(binary): a, ns.start(binary): b}
    cl.form_cluster([a, b], reps)
    return a, b, {p: r for r, p in reps.items()}


def pipeline(node, commands, batch: int = 2000) -> None:
    with node.conn(timeout=60) as c:
        for i in range(0, len(commands), batch):
            chunk = commands[i:i + batch]
            c.sock.sendall(b"".join(cl.encode(*cmd) for cmd in chunk))
            for _ in chunk:
                c.reply()


def small_key(i: int) -> str:
    slot = RANGE[0] + i % (RANGE[1] - RANGE[0] + 1)
    return "{%s}s:%d" % (cl.tag_for_slot(slot), i)


BIG = "{%s}big" % cl.tag_for_slot(7)


def load(node) -> None:
    """The big hash (in pieces) and the small keys, some with a TTL."""
    step = 10000
    cmds = []
    for f in range(0, HASH_FIELDS, step):
        args = ["HSET", BIG]
        for j in range(f, min(f + step, HASH_FIELDS)):
            args += [f"f{j}", f"v{j}"]
        cmds.append(args)
    pipeline(node, cmds, batch=4)
    cmds = []
    for i in range(SMALL_KEYS):
        if i % 10 == 0:
            cmds.append(["SET", small_key(i), f"val{i}", "EX", "3600"])
        else:
            cmds.append(["SET", small_key(i), f"val{i}"])
    pipeline(node, cmds)


class Writer(threading.Thread):
    """Writes INCR to counters and HSET to the big hash, following MOVED (updating its
    slot map), ASK (ASKING then the command) and TRYAGAIN (again after a pause), as a
    cluster client does. Anything else is a failure. Keeps what was acknowledged."""

    def __init__(self, nodes):
        super().__init__(daemon=True)
        self.ports = {n.port for n in nodes}
        self.owner = {}  # slot -> port
        self.conns = {}
        self.default = nodes[0].port
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.redirects = {"MOVED": 0, "ASK": 0, "TRYAGAIN": 0}
        self.counters: dict[str, int] = {}
        self.fields: list[str] = []
        self.max_latency = 0.0
        self.n = 0

    def conn(self, port):
        if port not in self.conns:
            self.conns[port] = cl.Resp(port, timeout=30)
        return self.conns[port]

    def call(self, *args):
        slot = cl.key_slot(args[1])
        port = self.owner.get(slot, self.default)
        asking = False
        for _ in range(50):
            c = self.conn(port)
            try:
                if asking:
                    c.call("ASKING")
                return c.call(*args)
            except ReplyError as e:
                text = str(e)
                word = text.split()[0]
                if word == "MOVED":
                    self.redirects["MOVED"] += 1
                    port = int(text.split()[2].rsplit(":", 1)[1])
                    self.owner[slot] = port
                    asking = False
                elif word == "ASK":
                    self.redirects["ASK"] += 1
                    port = int(text.split()[2].rsplit(":", 1)[1])
                    asking = True
                elif word == "TRYAGAIN":
                    self.redirects["TRYAGAIN"] += 1
                    time.sleep(0.01)
                else:
                    raise
        raise RuntimeError(f"too many redirections for {args}")

    def run(self):
        try:
            while not self.stop.is_set():
                i = self.n
                self.n += 1
                t0 = time.monotonic()
                if i % 2 == 0:
                    key = small_key((i // 2) % COUNTERS) + ":ctr"
                    v = self.call("INCR", key)
                    self.counters[key] = v
                else:
                    field = f"w{i}"
                    self.call("HSET", BIG, field, i)
                    self.fields.append(field)
                self.max_latency = max(self.max_latency, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - any failure is the test's finding
            self.errors.append(repr(e))


def status(node, task_id: str) -> dict:
    reply = node.call("CLUSTER", "MIGRATION", "STATUS", "ID", task_id)
    assert len(reply) == 1, reply
    flat = reply[0]
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def wait_state(node, task_id: str, want: str, timeout: float = 45.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        st = status(node, task_id)
        if st["state"].decode() == want:
            return st
        assert st["state"].decode() not in ("failed", "canceled") or want in ("failed", "canceled"), st
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task_id} not {want}: {st}")
        time.sleep(0.05)


def owner_port(observer, slot: int) -> int:
    for n in observer.nodes():
        if slot in n["slots"] and "master" in n["flags"]:
            return n["port"]
    return -1


def keys_in_range(node) -> int:
    total = 0
    for s in range(RANGE[0], RANGE[1] + 1):
        total += node.call("CLUSTER", "COUNTKEYSINSLOT", s)
    return total


def check_data(node, writer: Writer | None) -> None:
    """Every loaded key and every acknowledged write is on `node`."""
    assert node.call("HLEN", BIG) == HASH_FIELDS + (len(writer.fields) if writer else 0)
    with node.conn(timeout=60) as c:
        step = 5000
        for f in range(0, SMALL_KEYS, step):
            keys = [small_key(i) for i in range(f, min(f + step, SMALL_KEYS))]
            vals = c.call("MGET", *keys) if len({cl.key_slot(k) for k in keys}) == 1 else None
            if vals is None:
                c.sock.sendall(b"".join(cl.encode("GET", k) for k in keys))
                vals = [c.reply() for _ in keys]
            for i, v in zip(range(f, f + len(keys)), vals):
                assert v == f"val{i}".encode(), (small_key(i), v)
        assert c.call("TTL", small_key(0)) > 3000
        assert c.call("TTL", small_key(1)) == -1
        if writer:
            for key, v in writer.counters.items():
                assert int(c.call("GET", key)) == v, key
            for field in writer.fields[-1000:]:
                assert c.call("HEXISTS", BIG, field) == 1, field


def test_import_under_writes(cluster):
    a, b, _ = two_primaries(cluster)
    t0 = time.monotonic()
    load(a)
    loaded = time.monotonic() - t0
    expected_keys = keys_in_range(a)
    assert expected_keys == SMALL_KEYS + 1
    w = Writer([a, b])
    w.start()
    time.sleep(0.3)
    t1 = time.monotonic()
    task = b.call("CLUSTER", "MIGRATION", "IMPORT", RANGE[0], RANGE[1])
    assert isinstance(task, bytes) and len(task) == 40
    st = wait_state(b, task.decode(), "completed")
    took = time.monotonic() - t1
    time.sleep(0.3)  # writes go on, to the new owner
    w.stop.set()
    w.join(30)
    assert not w.errors, w.errors
    assert w.n > 100
    print(f"loaded in {loaded:.1f}s; migrated {HASH_FIELDS}-field hash + {SMALL_KEYS} keys in "
          f"{took:.2f}s; writes {w.n}, redirects {w.redirects}, max write latency "
          f"{w.max_latency * 1000:.0f} ms")
    # STATUS on both sides, Redis 8.4's fields.
    assert set(st) == {"id", "slots", "source", "dest", "operation", "state", "last_error",
                       "retries", "create_time", "start_time", "end_time", "write_pause_ms"}
    assert st["operation"] == b"import" and st["slots"] == b"0-999"
    assert st["source"].decode() == a.myid() and st["dest"].decode() == b.myid()
    src = status(a, task.decode())
    assert src["operation"] == b"migrate" and src["state"] == b"completed"
    # Ownership: both nodes say B; A holds no key of the range any more.
    cl.wait_for(lambda: owner_port(a, 0) == b.port and owner_port(b, 999) == b.port, 10, "ownership")
    assert owner_port(a, 1000) == a.port
    assert keys_in_range(a) == 0
    assert keys_in_range(b) == expected_keys + COUNTERS
    check_data(b, w)
    with pytest.raises(ReplyError, match="MOVED 7 "):
        a.call("GET", BIG)
    info = cl.parse_info(b.call("INFO", "cluster").decode())
    assert info["cluster_slot_migration_stats_import_completed"] == "1"
