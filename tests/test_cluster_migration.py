"""Atomic slot migration between densekv primaries: Redis 8.4's CLUSTER MIGRATION
IMPORT / STATUS / CANCEL on the destination, Valkey 9's MIGRATESLOTS /
GETSLOTMIGRATIONS / CANCELSLOTMIGRATIONS on the source.

The main test moves a slot range holding one big hash and many small keys while a
client writes to those keys, following redirections as a cluster client does (MOVED,
ASK, TRYAGAIN); any other error, or an acknowledged write missing afterwards, fails it.
Sizes: DENSEKV_ASM_HASH_FIELDS (default 1,000,000 fields in the big hash) and
DENSEKV_ASM_KEYS (default 100,000 small keys); smaller values make a quicker run.

Nodes are started on free loopback port pairs and killed by PID (tests/clusterlib.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import clusterlib as cl
from clusterlib import HOST, ReplyError
from conftest import server_binary

HASH_FIELDS = int(os.environ.get("DENSEKV_ASM_HASH_FIELDS", "1000000"))
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
# Big enough to go in pieces, with a TTL and field TTLs that must arrive too.
BIG2 = "{%s}big2" % cl.tag_for_slot(8)


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
    args = ["HSET", BIG2]
    for j in range(10000):
        args += [f"f{j}", f"v{j}"]
    pipeline(node, [args, ["EXPIRE", BIG2, 3600], ["HEXPIRE", BIG2, 3600, "FIELDS", 1, "f0"]])
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
        assert c.call("HLEN", BIG2) == 10000 and c.call("TTL", BIG2) > 3000
        assert c.call("HTTL", BIG2, "FIELDS", 2, "f0", "f1")[0] > 3000
        assert c.call("HTTL", BIG2, "FIELDS", 2, "f0", "f1")[1] == -1
        assert c.call("TTL", small_key(1)) == -1
        if writer:
            for key, v in writer.counters.items():
                assert int(c.call("GET", key)) == v, key
            for field in writer.fields[-1000:]:
                assert c.call("HEXISTS", BIG, field) == 1, field


def start_redis_syntax(src, dst) -> callable:
    task = dst.call("CLUSTER", "MIGRATION", "IMPORT", RANGE[0], RANGE[1])
    assert isinstance(task, bytes) and len(task) == 40
    return lambda: wait_state(dst, task.decode(), "completed")


def start_valkey_syntax(src, dst) -> callable:
    assert src.call("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", RANGE[0], RANGE[1], "NODE",
                    dst.myid()) == b"OK"

    def done():
        deadline = time.monotonic() + 45
        while True:
            jobs = [{j[i].decode(): j[i + 1] for i in range(0, len(j), 2)}
                    for j in src.call("CLUSTER", "GETSLOTMIGRATIONS")]
            if jobs and jobs[-1]["state"] == b"success":
                return jobs[-1]
            assert not jobs or jobs[-1]["state"] not in (b"failed", b"cancelled"), jobs
            assert time.monotonic() < deadline, jobs
            time.sleep(0.05)
    return done


def migrate_under_writes(cluster, replicas: bool, start) -> tuple:
    a, b, reps = two_primaries(cluster, replicas)
    t0 = time.monotonic()
    load(a)
    loaded = time.monotonic() - t0
    expected_keys = keys_in_range(a)
    assert expected_keys == SMALL_KEYS + 2
    w = Writer([a, b])
    w.start()
    time.sleep(0.3)
    t1 = time.monotonic()
    st = start(a, b)()
    took = time.monotonic() - t1
    time.sleep(0.3)  # writes go on, to the new owner
    w.stop.set()
    w.join(30)
    assert not w.errors, w.errors
    assert w.n > 100
    print(f"loaded in {loaded:.1f}s; migrated {HASH_FIELDS}-field hash + {SMALL_KEYS} keys in "
          f"{took:.2f}s; writes {w.n}, redirects {w.redirects}, max write latency "
          f"{w.max_latency * 1000:.0f} ms")
    # Ownership: both nodes say B; A holds no key of the range any more.
    cl.wait_for(lambda: owner_port(a, 0) == b.port and owner_port(b, 999) == b.port, 10, "ownership")
    assert owner_port(a, 1000) == a.port
    cl.wait_for(lambda: keys_in_range(a) == 0, 20, "the source to delete the moved keys")
    assert keys_in_range(b) == expected_keys + COUNTERS
    check_data(b, w)
    with pytest.raises(ReplyError, match="MOVED 7 "):
        a.call("GET", BIG)
    return a, b, reps, st, w, expected_keys


def test_import_under_writes(cluster):
    a, b, _, st, _, _ = migrate_under_writes(cluster, False, start_redis_syntax)
    task = st["id"].decode()
    # STATUS on both sides, Redis 8.4's fields.
    assert set(st) == {"id", "slots", "source", "dest", "operation", "state", "last_error",
                       "retries", "create_time", "start_time", "end_time", "write_pause_ms"}
    assert st["operation"] == b"import" and st["slots"] == b"0-999"
    assert st["source"].decode() == a.myid() and st["dest"].decode() == b.myid()
    src = status(a, task)
    assert src["operation"] == b"migrate" and src["state"] == b"completed"
    # CLUSTER INFO ends with Redis 8.4's fields, in its order; the source's
    # one trim job deleted the keys that left.
    lines = b.call("CLUSTER", "INFO").decode().split("\r\n")
    names = [ln.split(":")[0] for ln in lines if ln]
    assert names[-8:] == ["total_cluster_links_buffer_limit_exceeded"] + ASM_INFO, names
    cl.wait_for(lambda: cluster_info(a)["cluster_slot_migration_stats_active_trim_completed"] == "1",
                10, "the trim job to complete")
    ia, ib = cluster_info(a), cluster_info(b)
    assert ia["cluster_slot_migration_active_tasks"] == ib["cluster_slot_migration_active_tasks"] == "0"
    assert ia["cluster_slot_migration_stats_active_trim_started"] == "1"
    assert ia["cluster_slot_migration_active_trim_running"] == "0"
    assert ia["cluster_slot_migration_stats_active_trim_cancelled"] == "0"
    assert ib["cluster_slot_migration_stats_active_trim_started"] == "0"
    # INFO: the cluster section is cluster_enabled alone; memory has the three
    # buffers, empty once the task ended.
    assert list(cl.parse_info(b.call("INFO", "cluster").decode())) == ["cluster_enabled"]
    mem = cl.parse_info(b.call("INFO", "memory").decode())
    assert [mem[k] for k in ("mem_cluster_slot_migration_output_buffer",
                             "mem_cluster_slot_migration_input_buffer")] == ["0", "0"]
    assert int(mem["mem_cluster_slot_migration_input_buffer_peak"]) >= 0
    assert b.call("CLUSTER", "MIGRATION", "CANCEL", "ID", task) == 0
    assert len(b.call("CLUSTER", "MIGRATION", "STATUS", "ALL")) == 1
    with pytest.raises(ReplyError, match="already owned"):
        b.call("CLUSTER", "MIGRATION", "IMPORT", 0, 10)


ASM_INFO = ["cluster_slot_migration_active_tasks", "cluster_slot_migration_active_trim_running",
            "cluster_slot_migration_active_trim_current_job_keys",
            "cluster_slot_migration_active_trim_current_job_trimmed",
            "cluster_slot_migration_stats_active_trim_started",
            "cluster_slot_migration_stats_active_trim_completed",
            "cluster_slot_migration_stats_active_trim_cancelled"]


def cluster_info(node) -> dict:
    return cl.parse_info(node.call("CLUSTER", "INFO").decode())


def client_flags(node) -> list[str]:
    return [dict(kv.split("=", 1) for kv in ln.split(" ") if "=" in kv)["flags"]
            for ln in node.call("CLIENT", "LIST").decode().splitlines()]


def replica_matches(primary, replica) -> bool:
    return (replica.call("DBSIZE") == primary.call("DBSIZE")
            and primary.info("replication").get("master_repl_offset")
            == replica.info("replication").get("slave_repl_offset"))


def test_import_with_replicas_keeps_them_consistent(cluster):
    a, b, reps, _, w, expected = migrate_under_writes(cluster, True, start_redis_syntax)
    for prim, rep in reps.items():
        cl.wait_for(lambda p=prim, r=rep: replica_matches(p, r), 20, f"{rep} to catch up")
    assert keys_in_range(reps[a]) == 0
    assert keys_in_range(reps[b]) == expected + COUNTERS
    with reps[b].conn() as c:
        c.call("READONLY")
        assert c.call("HLEN", BIG) == HASH_FIELDS + len(w.fields)
        key = next(iter(w.counters))
        assert int(c.call("GET", key)) == w.counters[key]


def test_valkey_migrateslots(cluster):
    a, b, _, job, _, _ = migrate_under_writes(cluster, False, start_valkey_syntax)
    assert list(job) == ["name", "operation", "slot_ranges", "target_node", "source_node",
                         "create_time", "last_update_time", "last_ack_time", "state",
                         "message", "cow_size"]
    assert job["operation"] == b"EXPORT" and job["slot_ranges"] == b"0-999"
    assert job["target_node"].decode() == b.myid() and job["source_node"].decode() == a.myid()
    assert job["create_time"] <= job["last_update_time"] <= time.time() + 1
    assert job["create_time"] <= job["last_ack_time"] <= time.time() + 1
    assert job["message"] == b"" and job["cow_size"] == 0, job
    imported = b.call("CLUSTER", "GETSLOTMIGRATIONS")[-1]
    assert imported[3] == b"IMPORT" and imported[17] == b"success"
    assert a.call("CLUSTER", "CANCELSLOTMIGRATIONS") == b"OK"
    with pytest.raises(ReplyError, match="not the owner"):
        a.call("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 10, "NODE", b.myid())
    with pytest.raises(ReplyError, match="syntax"):
        a.call("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 2000, 2010)


def wait_midway(dst) -> None:
    """Until the destination holds some of the keys (it imports; its own slots hold none)."""
    cl.wait_for(lambda: dst.call("DBSIZE") > 0, 20, "the import to begin", interval=0.002)


def test_cancel_midway_leaves_the_source_owning_everything(cluster):
    a, b, _ = two_primaries(cluster)
    load(a)
    expected = keys_in_range(a)
    w = Writer([a, b])
    w.start()
    task = b.call("CLUSTER", "MIGRATION", "IMPORT", RANGE[0], RANGE[1]).decode()
    wait_midway(b)
    # Running: Redis 8.4's words for the step, its count of tasks, and its
    # flags on the two ends of the connection (o importing, g migrating).
    assert status(b, task)["state"] == b"wait-stream-eof"
    assert status(a, task)["state"] in (b"send-bulk-and-stream", b"send-stream", b"handoff")
    jobs = a.call("CLUSTER", "GETSLOTMIGRATIONS")
    assert jobs[-1][17] in (b"snapshotting", b"replicating", b"failover-paused"), jobs
    assert cluster_info(b)["cluster_slot_migration_active_tasks"] == "1"
    assert cluster_info(a)["cluster_slot_migration_active_tasks"] == "1"
    assert any("o" in f for f in client_flags(b)) and any("g" in f for f in client_flags(a))
    a.proc.send_signal(signal.SIGSTOP)
    try:
        assert b.call("CLUSTER", "MIGRATION", "CANCEL", "ID", task) == 1
        assert b.call("DBSIZE") == 0
    finally:
        a.proc.send_signal(signal.SIGCONT)
    assert status(b, task)["state"] == b"canceled"
    assert cluster_info(b)["cluster_slot_migration_active_tasks"] == "0"
    assert not any("o" in f for f in client_flags(b))
    wait_state(a, task, "failed")
    time.sleep(0.3)
    w.stop.set()
    w.join(30)
    assert not w.errors, w.errors
    assert w.redirects["MOVED"] == 0
    assert owner_port(a, 0) == a.port and owner_port(b, 0) == a.port
    assert keys_in_range(a) == expected + len(w.counters)
    assert keys_in_range(b) == 0
    check_data(a, w)
    # A second attempt completes.
    again = b.call("CLUSTER", "MIGRATION", "IMPORT", RANGE[0], RANGE[1]).decode()
    wait_state(b, again, "completed")
    check_data(b, w)


COLL = int(os.environ.get("DENSEKV_ASM_COLL", "200000"))
BIGSET = "{%s}bigset" % cl.tag_for_slot(9)
BIGZ = "{%s}bigz" % cl.tag_for_slot(10)
BIGL = "{%s}bigl" % cl.tag_for_slot(11)


class CollWriter(Writer):
    """Writes to a big set, sorted set and list (those that compose with the pieces,
    and sorted set moves below what was sent, and a list head push that makes the list
    go whole), keeping an exact model of what was acknowledged."""

    def __init__(self, nodes, members, scores, items):
        super().__init__(nodes)
        self.members, self.scores, self.items = members, scores, items

    def run(self):
        import random
        rnd = random.Random(7)
        try:
            while not self.stop.is_set():
                i = self.n
                self.n += 1
                t0 = time.monotonic()
                op = i % 9
                if op == 0:
                    self.call("SADD", BIGSET, f"w{i}")
                    self.members.add(f"w{i}")
                elif op == 1:
                    m = f"m{rnd.randrange(COLL)}"
                    self.call("SREM", BIGSET, m)
                    self.members.discard(m)
                elif op == 2:
                    # An existing member moved to the lowest scores, below the pieces sent.
                    m = f"m{rnd.randrange(COLL)}"
                    self.call("ZADD", BIGZ, -1 - i, m)
                    self.scores[m] = float(-1 - i)
                elif op == 3:
                    m = f"m{rnd.randrange(COLL)}"
                    v = float(self.call("ZINCRBY", BIGZ, -2 * COLL, m))
                    self.scores[m] = v
                elif op == 4:
                    m = f"m{rnd.randrange(COLL)}"
                    self.call("ZREM", BIGZ, m)
                    self.scores.pop(m, None)
                elif op == 5:
                    m = f"m{rnd.randrange(COLL)}"
                    self.call("ZADD", BIGZ, "XX", "GT", 10 * COLL + i, m)
                    v = self.call("ZSCORE", BIGZ, m)
                    assert (v is None) == (m not in self.scores), (m, v)
                    if v is not None:
                        self.scores[m] = float(v)
                elif op in (6, 7):
                    self.call("RPUSH", BIGL, f"x{i}")
                    self.items.append(f"x{i}")
                else:
                    v = self.call("RPOP", BIGL)
                    assert v == self.items.pop().encode(), v
                if i == 5001:
                    self.call("LPUSH", BIGL, "head")
                    self.items.insert(0, "head")
                self.max_latency = max(self.max_latency, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - any failure is the test's finding
            self.errors.append(repr(e))


def test_big_set_zset_list_move_in_pieces_under_writes(cluster):
    a, b, _ = two_primaries(cluster)
    step = 10000
    cmds = []
    for f in range(0, COLL, step):
        r = range(f, min(f + step, COLL))
        cmds.append(["SADD", BIGSET] + [f"m{j}" for j in r])
        cmds.append(["ZADD", BIGZ] + [x for j in r for x in (j, f"m{j}")])
        cmds.append(["RPUSH", BIGL] + [f"e{j}" for j in r])
    pipeline(a, cmds + [["EXPIRE", BIGZ, 3600]], batch=6)
    members = {f"m{j}" for j in range(COLL)}
    scores = {f"m{j}": float(j) for j in range(COLL)}
    items = [f"e{j}" for j in range(COLL)]
    w = CollWriter([a, b], members, scores, items)
    w.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    task = b.call("CLUSTER", "MIGRATION", "IMPORT", RANGE[0], RANGE[1]).decode()
    wait_state(b, task, "completed")
    took = time.monotonic() - t0
    time.sleep(0.3)
    w.stop.set()
    w.join(30)
    assert not w.errors, w.errors
    print(f"moved a {COLL}-member set, sorted set and list in {took:.2f}s; writes {w.n}, "
          f"max write latency {w.max_latency * 1000:.0f} ms")
    assert w.n > 100
    assert owner_port(b, 9) == b.port and owner_port(a, 11) == b.port
    with b.conn(timeout=60) as c:
        assert {m.decode() for m in c.call("SMEMBERS", BIGSET)} == w.members
        got = c.call("ZRANGE", BIGZ, 0, -1, "WITHSCORES")
        assert {got[i].decode(): float(got[i + 1]) for i in range(0, len(got), 2)} == w.scores
        assert [x.decode() for x in c.call("LRANGE", BIGL, 0, -1)] == w.items
        assert c.call("TTL", BIGZ) > 3000 and c.call("TTL", BIGSET) == -1
    cl.wait_for(lambda: keys_in_range(a) == 0, 20, "the source to delete the moved keys")


def three_with_replicas(ns):
    binary = server_binary()
    a, b, c = ns.start(binary), ns.start(binary), ns.start(binary)
    ra, rb = ns.start(binary), ns.start(binary)
    cl.form_cluster([a, b, c], {ra: a, rb: b})
    return a, b, c, ra, rb


def owned_once(live, expected: int) -> None:
    """Every slot of the range is owned by one live primary, which holds all `expected`
    keys of the range, and no other live primary holds any."""
    def settled():
        owners = {owner_port(n, s) for n in live for s in (RANGE[0], RANGE[1])}
        if len(owners) != 1:
            return False
        port = owners.pop()
        counts = {n.port: keys_in_range(n) for n in live
                  if n.info("replication").get("role") == "master"}
        return counts.get(port) == expected and all(v == 0 for p, v in counts.items() if p != port)
    cl.wait_for(settled, 40, "every key of the range owned exactly once")


def test_destination_killed_midway(cluster):
    a, b, c, ra, rb = three_with_replicas(cluster)
    load(a)
    cl.wait_for(lambda: replica_matches(a, ra), 20, "replica of the source")
    expected = keys_in_range(a)
    b.call("CLUSTER", "MIGRATION", "IMPORT", RANGE[0], RANGE[1])
    wait_midway(b)
    b.kill()
    # B's replica takes over B's own slots, and drops what B had imported.
    cl.wait_for(lambda: rb.info("replication").get("role") == "master", 30, "failover")
    owned_once([a, c, rb, ra], expected)
    assert owner_port(rb, 0) == a.port


def test_source_killed_midway(cluster):
    a, b, c, ra, rb = three_with_replicas(cluster)
    load(a)
    cl.wait_for(lambda: replica_matches(a, ra), 20, "replica of the source")
    expected = keys_in_range(a)
    task = b.call("CLUSTER", "MIGRATION", "IMPORT", RANGE[0], RANGE[1]).decode()
    wait_midway(b)
    a.kill()
    cl.wait_for(lambda: ra.info("replication").get("role") == "master", 30, "failover")
    # The destination starts again from the promoted replica.
    st = wait_state(b, task, "completed", timeout=40)
    assert st["retries"] >= 1
    owned_once([b, c, ra, rb], expected)
    assert owner_port(ra, 0) == b.port
