"""HOTKEYS (Redis 8.6): tracking sessions of the keys that take the most CPU time
and network bytes. Replies, field names and error texts as Redis 8.6 documents and
answers them; a load with one hot key must rank it first by both metrics; sampling,
DURATION, transactions and scripts count as Redis counts them; SLOTS in cluster mode.
"""

from __future__ import annotations

import time

import pytest
import redis

from conftest import err, ex, server_binary
from clusterlib import NodeSet


def hk_get(r) -> dict | None:
    """HOTKEYS GET as a dict (the one map of the array of one)."""
    reply = r.execute_command("HOTKEYS", "GET")
    if reply is None:
        return None
    assert isinstance(reply, list) and len(reply) == 1
    m = reply[0]
    if isinstance(m, dict):
        return m
    return dict(zip(m[::2], m[1::2]))


def pairs(flat: list) -> list[tuple[bytes, int]]:
    return list(zip(flat[::2], flat[1::2]))


@pytest.fixture
def hk(r):
    """r with no HOTKEYS session before and after the test."""
    r.execute_command("HOTKEYS", "STOP")
    r.execute_command("HOTKEYS", "RESET")
    yield r
    r.execute_command("HOTKEYS", "STOP")
    r.execute_command("HOTKEYS", "RESET")


def test_nothing_tracked_yet(hk):
    assert hk.execute_command("HOTKEYS", "GET") is None
    assert hk.execute_command("HOTKEYS", "STOP") is None
    assert hk.execute_command("HOTKEYS", "RESET") == b"OK"


def test_start_errors(hk):
    def e(*args):
        return err(hk.execute_command, "HOTKEYS", "START", *args)

    assert e() == "METRICS parameter is required"
    assert e("METRICS") == "METRICS parameter is required"
    assert e("COUNT", "1", "CPU") == "METRICS parameter is required"
    for bad in ("0", "3", "-1", "x"):
        assert e("METRICS", bad, "CPU") == "METRICS count must be > 0 and <= 2"
    assert e("METRICS", "2", "CPU") == "METRICS count does not match number of metric types provided"
    assert e("METRICS", "2", "CPU", "CPU") == "METRICS CPU defined more than once!"
    assert e("METRICS", "2", "NET", "net") == "METRICS NET defined more than once!"
    assert e("METRICS", "1", "DISK") == "METRICS no valid metrics passed. Supported: CPU|NET"
    for bad in ("0", "65", "x"):
        assert e("METRICS", "1", "CPU", "COUNT", bad) == "COUNT must be between 1 and 64"
    for bad in ("0", "1000001", "1.5"):
        assert e("METRICS", "1", "CPU", "DURATION", bad) == "DURATION must be between 1 and 1000000"
    for bad in ("0", "-3", "2147483648"):
        assert e("METRICS", "1", "CPU", "SAMPLE", bad) == "SAMPLE ratio must be positive"
    assert e("METRICS", "1", "CPU", "SLOTS", "1", "0") == "SLOTS parameter cannot be used in non-cluster mode"
    assert e("METRICS", "1", "CPU", "COUNT") == "syntax error"
    assert e("METRICS", "1", "CPU", "BOGUS", "1") == "syntax error"
    # A refused START starts nothing.
    assert hk.execute_command("HOTKEYS", "GET") is None


def test_session_errors_and_arity(hk):
    assert hk.execute_command("HOTKEYS", "START", "METRICS", "1", "CPU") == b"OK"
    assert err(hk.execute_command, "HOTKEYS", "START", "METRICS", "1", "NET") == \
        "hotkey tracking session already in progress"
    assert err(hk.execute_command, "HOTKEYS", "RESET") == \
        "hotkey tracking session in progress, stop tracking first"
    for sub in ("STOP", "GET", "RESET", "HELP"):
        assert err(hk.execute_command, "HOTKEYS", sub, "x") == \
            f"wrong number of arguments for 'hotkeys|{sub.lower()}' command"
    assert err(hk.execute_command, "HOTKEYS") == "wrong number of arguments for 'hotkeys' command"
    assert err(hk.execute_command, "HOTKEYS", "NOPE").startswith("unknown subcommand 'NOPE'. Try HOTKEYS HELP.")
    assert hk.execute_command("HOTKEYS", "STOP") == b"OK"
    assert hk.execute_command("HOTKEYS", "STOP") is None
    assert hk_get(hk)[b"tracking-active"] == 0
    assert hk.execute_command("HOTKEYS", "RESET") == b"OK"
    assert hk.execute_command("HOTKEYS", "GET") is None


def test_get_fields_and_exact_bytes(hk):
    hk.execute_command("HOTKEYS", "START", "METRICS", "2", "NET", "CPU")
    hk.set("k", "v")  # 27 request bytes (*3 $3 SET $1 k $1 v) + 5 reply bytes (+OK)
    hk.ping()  # no keys: counts nowhere
    g = hk_get(hk)
    assert list(g) == [b"tracking-active", b"sample-ratio", b"selected-slots",
                       b"all-commands-all-slots-us", b"net-bytes-all-commands-all-slots",
                       b"collection-start-time-unix-ms", b"collection-duration-ms",
                       b"total-cpu-time-user-ms", b"total-cpu-time-sys-ms", b"total-net-bytes",
                       b"by-cpu-time-us", b"by-net-bytes"]
    assert g[b"tracking-active"] == 1
    assert g[b"sample-ratio"] == 1
    assert g[b"selected-slots"] == [[0, 16383]]
    assert g[b"net-bytes-all-commands-all-slots"] == 32
    assert g[b"total-net-bytes"] == 32
    assert pairs(g[b"by-net-bytes"]) == [(b"k", 32)]
    assert abs(g[b"collection-start-time-unix-ms"] - time.time() * 1000) < 10_000
    assert 0 <= g[b"collection-duration-ms"] < 10_000
    # Bytes of a multi-key command are shared by its keys and add up.
    hk.mset({"a": "1", "b": "2"})  # 42 + 5
    g = hk_get(hk)
    net = dict(pairs(g[b"by-net-bytes"]))
    assert net[b"a"] + net[b"b"] == 47
    assert abs(net[b"a"] - net[b"b"]) <= 1
    assert g[b"total-net-bytes"] == 79


def test_only_requested_metric_is_reported(hk):
    hk.execute_command("HOTKEYS", "START", "METRICS", "1", "NET")
    hk.set("x", "1")
    g = hk_get(hk)
    assert b"by-cpu-time-us" not in g and b"total-cpu-time-user-ms" not in g
    assert b"by-net-bytes" in g and b"total-net-bytes" in g
    hk.execute_command("HOTKEYS", "STOP")
    hk.execute_command("HOTKEYS", "START", "METRICS", "1", "CPU")
    g = hk_get(hk)
    assert b"by-net-bytes" not in g and b"total-net-bytes" not in g
    assert g[b"by-cpu-time-us"] == []


def test_hot_key_first_by_cpu_and_net(hk):
    # The hot key is a 2,000-element list read whole: tens of microseconds and
    # ~20 KB of reply per read, beside small GETs of 200 cold keys.
    hk.rpush("hot", *[f"element-{i}" for i in range(2000)])
    for i in range(200):
        hk.set(f"cold:{i}", "v")
    hk.execute_command("HOTKEYS", "START", "METRICS", "2", "CPU", "NET", "COUNT", "5")
    for _ in range(10):
        p = hk.pipeline(transaction=False)
        for i in range(200):
            p.get(f"cold:{i}")
            if i % 10 == 0:
                p.lrange("hot", 0, -1)
        p.execute()
    g = hk_get(hk)
    cpu = pairs(g[b"by-cpu-time-us"])
    net = pairs(g[b"by-net-bytes"])
    assert cpu[0][0] == b"hot", cpu
    assert net[0][0] == b"hot", net
    assert len(cpu) <= 5 and len(net) == 5
    assert [v for _, v in net] == sorted((v for _, v in net), reverse=True)
    # 200 LRANGEs of ~20 KB each.
    assert net[0][1] > 200 * 20_000
    assert g[b"all-commands-all-slots-us"] >= cpu[0][1]
    assert g[b"net-bytes-all-commands-all-slots"] >= g[b"total-net-bytes"] >= net[0][1]


def test_transaction_counts_each_command_script_counts_as_itself(hk):
    hk.execute_command("HOTKEYS", "START", "METRICS", "1", "NET")
    p = hk.pipeline(transaction=True)
    p.set("t1", "a")
    p.set("t2", "b")
    p.execute()
    hk.eval("redis.call('set', KEYS[1], 'x'); redis.call('set', 'inner', 'y'); return 1", 1, "s1")
    keys = {k for k, _ in pairs(hk_get(hk)[b"by-net-bytes"])}
    assert keys == {b"t1", b"t2", b"s1"}


def test_sample_ratio(hk):
    hk.execute_command("HOTKEYS", "START", "METRICS", "1", "NET", "SAMPLE", "1000000000")
    for i in range(200):
        hk.set(f"s{i}", "v")
    g = hk_get(hk)
    assert g[b"sample-ratio"] == 1000000000
    # Every command counts in the totals; hardly any reaches the top-K.
    assert g[b"net-bytes-all-commands-all-slots"] > 200 * 30
    assert len(g[b"by-net-bytes"]) <= 2
    assert b"sampled-commands-selected-slots-us" not in g  # only with SLOTS
    hk.execute_command("HOTKEYS", "STOP")
    hk.execute_command("HOTKEYS", "START", "METRICS", "1", "NET", "SAMPLE", "2")
    for i in range(400):
        hk.set(f"s{i}", "v")
    n = len(pairs(hk_get(hk)[b"by-net-bytes"]))
    assert n == 10  # K of the ~200 sampled keys


def test_duration_stops_by_itself(hk):
    hk.execute_command("HOTKEYS", "START", "METRICS", "1", "NET", "DURATION", "1")
    hk.set("before", "1")
    time.sleep(1.4)
    g = hk_get(hk)
    assert g[b"tracking-active"] == 0
    assert 1000 <= g[b"collection-duration-ms"] < 1400
    hk.set("after", "1")
    g = hk_get(hk)
    assert [k for k, _ in pairs(g[b"by-net-bytes"])] == [b"before"]
    assert hk.execute_command("HOTKEYS", "STOP") is None
    # A stopped session's results stay until a new START replaces them.
    assert hk.execute_command("HOTKEYS", "START", "METRICS", "1", "CPU") == b"OK"
    assert hk_get(hk)[b"tracking-active"] == 1


def test_resp3_map(r3):
    r3.execute_command("HOTKEYS", "STOP")
    r3.execute_command("HOTKEYS", "RESET")
    try:
        r3.execute_command("HOTKEYS", "START", "METRICS", "1", "NET")
        r3.set("m", "1")
        reply = r3.execute_command("HOTKEYS", "GET")
        assert isinstance(reply, list) and isinstance(reply[0], dict)
        assert reply[0][b"by-net-bytes"][0] == b"m"
    finally:
        r3.execute_command("HOTKEYS", "STOP")
        r3.execute_command("HOTKEYS", "RESET")


def test_command_table_and_acl(hk, new_client):
    info = ex(hk)("COMMAND", "INFO", "HOTKEYS")[0]
    assert info[0] == b"hotkeys" and info[1] == -2
    subs = {s[0]: s for s in info[9]}
    assert set(subs) == {b"hotkeys|start", b"hotkeys|stop", b"hotkeys|get", b"hotkeys|reset", b"hotkeys|help"}
    assert subs[b"hotkeys|start"][1] == -2
    for name in (b"hotkeys|start", b"hotkeys|stop", b"hotkeys|get", b"hotkeys|reset"):
        s = subs[name]
        assert set(s[2]) == {b"admin", b"noscript"}
        assert s[6] == [b"@admin", b"@slow", b"@dangerous"]
    assert subs[b"hotkeys|get"][1] == 2
    assert set(subs[b"hotkeys|help"][2]) == {b"loading", b"stale"}
    assert subs[b"hotkeys|help"][6] == [b"@slow"]
    docs = ex(hk)("COMMAND", "DOCS", "HOTKEYS")
    d = dict(zip(docs[0::2], docs[1::2]))[b"hotkeys"]
    d = dict(zip(d[0::2], d[1::2]))
    assert d[b"since"] == b"8.6.0" and d[b"group"] == b"server"
    help_lines = hk.execute_command("HOTKEYS", "HELP")
    assert help_lines[0].startswith(b"HOTKEYS <subcommand>")
    assert any(line.startswith(b"START") for line in help_lines)
    # ACL: @admin guards the session, HELP stays open.
    hk.execute_command("ACL", "SETUSER", "hkuser", "on", ">pw", "+@all", "-@admin")
    try:
        c = new_client()
        c.execute_command("AUTH", "hkuser", "pw")
        assert err(c.execute_command, "HOTKEYS", "START", "METRICS", "1", "CPU").startswith(
            "User hkuser has no permissions to run the 'hotkeys|start' command")
        assert c.execute_command("HOTKEYS", "HELP")
        c.close()
    finally:
        hk.execute_command("ACL", "DELUSER", "hkuser")
    assert err(hk.eval, "return redis.call('hotkeys', 'get')", 0).startswith(
        "This Redis command is not allowed from script")


@pytest.fixture
def cluster_node():
    ns = NodeSet(prefix="densekv-hotkeys-")
    try:
        node = ns.start(server_binary(), extra_args=("--cluster-require-full-coverage", "no"))
        node.call("CLUSTER", "ADDSLOTSRANGE", "0", "8191")
        c = redis.Redis(host="127.0.0.1", port=node.port)
        deadline = time.monotonic() + 10
        while c.execute_command("CLUSTER", "INFO").find(b"cluster_state:ok") < 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        yield c
        c.close()
    finally:
        ns.cleanup()


def key_in_slot(c, slot: int, prefix: str) -> str:
    for i in range(200_000):
        k = f"{prefix}{i}"
        if c.execute_command("CLUSTER", "KEYSLOT", k) == slot:
            return k
    raise AssertionError(slot)


def test_slots_in_cluster_mode(cluster_node):
    c = cluster_node

    def e(*args):
        return err(c.execute_command, "HOTKEYS", "START", "METRICS", "1", "NET", *args)

    assert e("SLOTS", "0", "1") == "SLOTS count must be between 1 and 16384"
    assert e("SLOTS", "16385", "1") == "SLOTS count must be between 1 and 16384"
    assert e("SLOTS", "2", "1") == "not enough slot numbers provided"
    assert e("SLOTS", "1", "x") == "Invalid or out of range slot"
    assert e("SLOTS", "1", "16384") == "Invalid or out of range slot"
    assert e("SLOTS", "1", "9000") == "slot 9000 not handled by this node"
    assert e("SLOTS", "2", "5", "5") == "duplicate slot number"
    assert e("SLOTS", "1", "5", "SLOTS", "1", "6") == "SLOTS parameter already specified"
    assert c.execute_command("HOTKEYS", "GET") is None

    # Without SLOTS the node's own ranges are shown.
    c.execute_command("HOTKEYS", "START", "METRICS", "1", "CPU")
    assert hk_get(c)[b"selected-slots"] == [[0, 8191]]
    c.execute_command("HOTKEYS", "STOP")

    tracked, other = key_in_slot(c, 100, "t"), key_in_slot(c, 200, "o")
    c.execute_command("HOTKEYS", "START", "METRICS", "1", "NET",
                      "SLOTS", "3", "101", "100", "7")
    c.set(tracked, "1")
    c.set(other, "1")
    g = hk_get(c)
    assert g[b"selected-slots"] == [[7], [100, 101]]
    assert [k for k, _ in pairs(g[b"by-net-bytes"])] == [tracked.encode()]
    mine = dict(pairs(g[b"by-net-bytes"]))[tracked.encode()]
    assert g[b"net-bytes-all-commands-selected-slots"] == mine
    assert g[b"net-bytes-all-commands-all-slots"] > mine
    assert b"all-commands-selected-slots-us" in g
    assert b"sampled-commands-selected-slots-us" not in g
    c.execute_command("HOTKEYS", "STOP")
    c.execute_command("HOTKEYS", "START", "METRICS", "1", "CPU", "SAMPLE", "2", "SLOTS", "1", "100")
    g = hk_get(c)
    assert list(g)[3:6] == [b"sampled-commands-selected-slots-us", b"all-commands-selected-slots-us",
                            b"all-commands-all-slots-us"]
    assert list(g)[6:9] == [b"net-bytes-sampled-commands-selected-slots",
                            b"net-bytes-all-commands-selected-slots", b"net-bytes-all-commands-all-slots"]
