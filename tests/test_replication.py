"""Replication with Redis's protocol: densekv to densekv, densekv following Redis's
redis-server, Redis following densekv.

Each test starts its own servers on free loopback ports (and stops them by pid): a
full sync of a dataset of every type, writes of every type streamed after it, a
type-aware comparison of every key, then a link killed and resumed with a partial
sync (INFO sync_partial_ok on the primary). Also WAIT, the read-only replica's error,
ROLE and INFO replication.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest
import redis

from conftest import RawConn, Server, ping, server_binary

REDIS_SERVER = shutil.which("redis-server")


def wait_for(cond, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def client(s: Server, db: int = 0) -> redis.Redis:
    return redis.Redis(host=s.host, port=s.port, db=db, socket_timeout=10)


def populate(r: redis.Redis, p: str) -> None:
    """Keys of every type, some with a TTL, in db 0 and db 2."""
    r.set(f"{p}:str", "hello")
    r.set(f"{p}:int", 12345)
    r.set(f"{p}:ttl", "v", ex=1000)
    r.rpush(f"{p}:list", *[f"e{i}" for i in range(20)])
    r.rpush(f"{p}:biglist", *[("x" * 100) + str(i) for i in range(300)])
    r.hset(f"{p}:hash", mapping={f"f{i}": i for i in range(10)})
    r.hset(f"{p}:bighash", mapping={f"f{i}": "y" * 80 for i in range(200)})
    r.sadd(f"{p}:intset", *range(50))
    r.sadd(f"{p}:set", *[f"m{i}" for i in range(200)])
    r.zadd(f"{p}:zset", {f"z{i}": i * 1.5 for i in range(10)})
    r.zadd(f"{p}:bigzset", {f"z{i}": i for i in range(300)})
    r.xadd(f"{p}:stream", {"a": "1", "b": "2"})
    r.xadd(f"{p}:stream", {"c": "3"})
    r.xgroup_create(f"{p}:stream", "g", id="0")
    r.pfadd(f"{p}:hll", *[f"h{i}" for i in range(100)])
    r.expire(f"{p}:hash", 5000)
    r.execute_command("SELECT", 2)
    r.set(f"{p}:db2", "two")
    r.lpush(f"{p}:db2list", "a", "b")
    r.execute_command("SELECT", 0)


def stream_writes(r: redis.Redis, p: str) -> None:
    """Writes of every type after the sync, transactions and TTLs included."""
    r.append(f"{p}:str", " world")
    r.incrby(f"{p}:int", 7)
    r.incrbyfloat(f"{p}:float", 1.5)
    r.execute_command("SETEX", f"{p}:setex", 500, "v")
    r.set(f"{p}:px", "v", px=900000)
    r.lpush(f"{p}:list", "head")
    r.rpop(f"{p}:list")
    r.linsert(f"{p}:list", "BEFORE", "e5", "ins")
    r.hset(f"{p}:hash", "new", "v")
    r.hdel(f"{p}:hash", "f1")
    r.hincrby(f"{p}:hash", "f2", 10)
    r.sadd(f"{p}:set", "added")
    r.srem(f"{p}:set", "m1")
    r.spop(f"{p}:intset")
    r.zincrby(f"{p}:zset", 2.5, "z3")
    r.zrem(f"{p}:zset", "z4")
    r.xadd(f"{p}:stream", {"d": "4"})
    r.xreadgroup("g", "consumer", {f"{p}:stream": ">"}, count=1)
    r.pfadd(f"{p}:hll", "new1", "new2")
    r.delete(f"{p}:biglist")
    r.expire(f"{p}:bigzset", 3000)
    r.persist(f"{p}:hash")
    r.rename(f"{p}:bighash", f"{p}:renamed")
    r.copy(f"{p}:set", f"{p}:copied")
    pipe = r.pipeline(transaction=True)
    pipe.set(f"{p}:tx1", "a")
    pipe.incr(f"{p}:tx2")
    pipe.rpush(f"{p}:tx3", "x")
    pipe.execute()
    r.eval("redis.call('set', KEYS[1], 'lua'); redis.call('lpush', KEYS[2], 'l')", 2, f"{p}:lua1", f"{p}:lua2")
    r.execute_command("SELECT", 3)
    r.set(f"{p}:db3", "three")
    r.execute_command("SELECT", 0)
    r.set(f"{p}:last", "done")


def contents(s: Server) -> dict:
    """Every key of dbs 0-3, read by type, with whether it has a TTL."""
    out = {}
    for db in range(4):
        r = client(s, db)
        for key in sorted(r.keys("*")):
            t = r.type(key)
            if t == b"string":
                v = r.get(key)
            elif t == b"list":
                v = r.lrange(key, 0, -1)
            elif t == b"hash":
                v = sorted(r.hgetall(key).items())
            elif t == b"set":
                v = sorted(r.smembers(key))
            elif t == b"zset":
                v = r.zrange(key, 0, -1, withscores=True)
            elif t == b"stream":
                v = (r.xrange(key), [(g["name"], g["pending"], g["last-delivered-id"]) for g in r.xinfo_groups(key)])
            else:
                v = None
            out[(db, key)] = (t, v, r.pttl(key) > 0)
        r.close()
    return out


def offsets_equal(primary: Server, replica: Server) -> bool:
    p = client(primary).info("replication")
    r = client(replica).info("replication")
    return r.get("master_link_status") == "up" and p["master_repl_offset"] == r["slave_repl_offset"]


def link_up(replica: Server) -> bool:
    return client(replica).info("replication").get("master_link_status") == "up"


def check_pair(primary: Server, replica: Server) -> None:
    pr = client(primary)
    populate(pr, "a")
    client(replica).set("stale", "gone after the full sync")
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="full sync")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets after sync")
    assert contents(replica) == contents(primary)
    assert client(replica).get("stale") is None
    # Writes of every type, streamed.
    stream_writes(pr, "a")
    populate(pr, "b")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets after writes")
    assert contents(replica) == contents(primary)
    # Cut the link: it comes back with a partial sync.
    before = pr.info("stats")["sync_partial_ok"]
    # The stream is in db 2 when the link drops: it continues there.
    client(primary, 2).set("db2:before", "1")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets before the cut")
    client(replica).client_kill_filter(_type="master")
    client(primary, 2).set("db2:after", "1")
    pr.set("written:while:down", "1")
    pr.lpush("a:list", "more")
    wait_for(lambda: link_up(replica), what="link back")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets after resume")
    assert pr.info("stats")["sync_partial_ok"] == before + 1
    assert contents(replica) == contents(primary)
    assert client(replica).get("written:while:down") == b"1"


def test_densekv_to_densekv(servers):
    check_pair(servers(server_binary()), servers(server_binary()))


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not installed")
def test_densekv_follows_redis(servers):
    primary = servers(REDIS_SERVER, "--repl-diskless-sync-delay", "0")
    check_pair(primary, servers(server_binary()))


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not installed")
def test_redis_follows_densekv(servers):
    replica = servers(REDIS_SERVER)
    check_pair(servers(server_binary()), replica)


def test_disk_backed_transfer(servers):
    primary = servers(server_binary(), "--repl-diskless-sync", "no")
    replica = servers(server_binary())
    client(primary).set("k", "v")
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    client(primary).set("k2", "v2")
    wait_for(lambda: client(replica).get("k2") == b"v2", what="stream")
    assert client(replica).get("k") == b"v"


def test_wait_role_readonly_and_promotion(servers):
    primary = servers(server_binary())
    replica = servers(server_binary())
    pr, rr = client(primary), client(replica)
    assert pr.execute_command("ROLE") == [b"master", 0, []]
    assert pr.wait(0, 0) == 0
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.set("k", "v")
    assert pr.wait(1, 2000) == 1
    # Only one replica: WAIT 2 waits for its timeout and says 1.
    t = time.monotonic()
    assert pr.wait(2, 300) == 1
    assert time.monotonic() - t >= 0.25
    role = pr.execute_command("ROLE")
    assert role[0] == b"master" and len(role[2]) == 1
    assert role[2][0][1] == str(replica.port).encode()
    rrole = rr.execute_command("ROLE")
    assert rrole[:4] == [b"slave", primary.host.encode(), primary.port, b"connected"]
    with pytest.raises(redis.exceptions.ReadOnlyError, match="^You can't write against a read only replica.$"):
        rr.set("x", "1")
    raw = redis.Redis(host=replica.host, port=replica.port)
    with pytest.raises(redis.exceptions.ReadOnlyError):
        raw.incr("k")
    with pytest.raises(redis.ResponseError, match="WAIT cannot be used with replica instances"):
        rr.wait(1, 10)
    info = rr.info("replication")
    assert info["role"] == "slave" and info["master_port"] == primary.port and info["slave_read_only"] == 1
    pinfo = pr.info("replication")
    assert pinfo["connected_slaves"] == 1 and pinfo["slave0"]["state"] == "online"
    assert pinfo["repl_backlog_active"] == 1
    flags = [c["flags"] for c in rr.client_list() if "M" in c["flags"]]
    assert flags == ["M"]
    assert any(c["flags"] == "S" for c in pr.client_list())
    # Promotion: a new id, the old one second, writes accepted.
    old = pinfo["master_replid"]
    wait_for(lambda: offsets_equal(primary, replica), what="offsets")
    rr.replicaof("no", "one")
    info = rr.info("replication")
    assert info["role"] == "master"
    assert info["master_replid2"] == old and info["master_replid"] != old
    assert info["second_repl_offset"] == info["master_repl_offset"] + 1
    assert rr.set("x", "1")
    assert rr.get("k") == b"v"


def test_expiry_reaches_the_replica_as_del(servers):
    primary = servers(server_binary())
    replica = servers(server_binary())
    pr, rr = client(primary), client(replica)
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    pr.set("lazy", "v", px=50)
    wait_for(lambda: offsets_equal(primary, replica), what="stream")
    time.sleep(0.1)
    # Due on the replica: hidden from reads, kept until the primary says so.
    assert rr.get("lazy") is None
    assert rr.dbsize() == 1
    assert pr.get("lazy") is None  # lazily expired on the primary: DEL follows
    wait_for(lambda: rr.dbsize() == 0, what="DEL from the primary")
    pr.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    pr.set("active", "v", px=50)
    wait_for(lambda: rr.dbsize() == 1, what="stream")
    wait_for(lambda: rr.dbsize() == 0, what="active expiry's DEL")


def test_a_write_to_an_expired_key_reaches_the_replica_after_its_del(servers):
    """A write that finds its key expired (here SADD, whose keyspace event
    publishing used to swallow the lazy expiry) sends DEL first: the
    replica, which keeps due keys until told, must not add to the old key
    and keep its TTL."""
    primary = servers(server_binary(), "--notify-keyspace-events", "KEA")
    replica = servers(server_binary())
    pr, rr = client(primary), client(replica)
    for s in (pr, rr):
        s.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    for cmd in (("SADD", "s", "foo"), ("HSET", "h", "f", "v"), ("RPUSH", "l", "x"), ("ZADD", "z", "1", "m")):
        pr.execute_command(*cmd)
        pr.pexpire(cmd[1], 1)
        time.sleep(0.01)
        pr.execute_command(*cmd)
    assert pr.execute_command("WAIT", 1, 0) == 1
    for key, kind in (("s", b"set"), ("h", b"hash"), ("l", b"list"), ("z", b"zset")):
        assert rr.type(key) == kind, key
        assert rr.pttl(key) == -1, key


def test_a_past_deadline_deletes_on_the_replica_too(servers):
    """EXPIRE with a deadline already past (and GETEX EXAT/PXAT, RESTORE
    REPLACE with a past ABSTTL) deletes the key on the primary; the replica
    must get that DEL, not a past PEXPIREAT it would keep the key under,
    since a replica never expires keys itself and the primary, holding no
    such key any more, never sends one."""
    primary = servers(server_binary())
    replica = servers(server_binary())
    pr, rr = client(primary), client(replica)
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    for k in ("e0", "pe", "ea", "pea", "gx", "gpx", "rs", "kept"):
        pr.set(k, "v")
    payload = pr.dump("kept")
    pr.expire("e0", 0)
    pr.pexpire("pe", -5)
    pr.expireat("ea", 1)
    pr.pexpireat("pea", 1)
    assert pr.execute_command("GETEX", "gx", "EXAT", 1) == b"v"
    assert pr.execute_command("GETEX", "gpx", "PXAT", 1) == b"v"
    assert pr.execute_command("RESTORE", "rs", 1, payload, "REPLACE", "ABSTTL") == b"OK"
    assert pr.execute_command("RESTORE", "absent", 1, payload, "ABSTTL") == b"OK"
    assert pr.execute_command("WAIT", 1, 0) == 1
    assert pr.keys("*") == [b"kept"]
    assert rr.dbsize() == 1, "the replica holds keys the primary deleted"
    assert rr.info("keyspace")["db0"]["expires"] == 0


def test_appendonly_set_while_the_replica_loads_takes_effect_after(servers):
    """CONFIG SET appendonly during a replica's load only records the
    setting (the AOF restarts from the new data set once it is in); after
    the load the AOF follows it, on or off, as Redis's does."""
    primary = servers(server_binary())
    replica = servers(server_binary())
    pr, rr = client(primary), client(replica)
    pr.execute_command("DEBUG", "POPULATE", 10000)
    for want in ("yes", "no"):
        rr.replicaof("no", "one")
        rr.config_set("appendonly", "no" if want == "yes" else "yes")
        wait_for(lambda: rr.info("persistence")["aof_rewrite_in_progress"] == 0, what="rewrite")
        rr.config_set("key-load-delay", 100)
        rr.config_set("loading-process-events-interval-bytes", 1024)
        rr.replicaof(primary.host, primary.port)
        wait_for(lambda: rr.info("persistence")["loading"] == 1, what="loading")
        rr.config_set("appendonly", want)
        assert rr.info("persistence")["loading"] == 1
        rr.config_set("key-load-delay", 0)
        wait_for(lambda: rr.info("persistence")["loading"] == 0, what="load")
        # At once: the load's end restarts the AOF in the same turn.
        assert rr.info("persistence")["aof_enabled"] == (1 if want == "yes" else 0), want
        wait_for(lambda: link_up(replica), what="link")


def test_min_replicas_to_write(servers):
    primary = servers(server_binary())
    replica = servers(server_binary())
    pr = client(primary)
    pr.config_set("min-replicas-to-write", 1)
    with pytest.raises(redis.ResponseError, match="^NOREPLICAS Not enough good replicas to write.$"):
        pr.set("k", "v")
    assert pr.get("k") is None
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    wait_for(lambda: pr.info("replication").get("slave0", {}).get("state") == "online", what="online")
    assert pr.set("k", "v")
    pr.config_set("min-replicas-to-write", 2)
    with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
        pr.set("k", "v2")
    pr.config_set("min-replicas-to-write", 0)


def test_replicas_share_a_running_full_sync(servers):
    primary = servers(server_binary())
    r1, r2 = servers(server_binary()), servers(server_binary())
    pr = client(primary)
    for i in range(100):
        pr.set(f"k{i}", i)
    pr.config_set("rdb-key-save-delay", 10000)  # about a second per image
    client(r1).replicaof(primary.host, primary.port)
    wait_for(lambda: pr.info("persistence")["rdb_bgsave_in_progress"] == 1, what="save")
    pr.set("during", "1")
    client(r2).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(r1) and link_up(r2), what="both synced")
    wait_for(lambda: offsets_equal(primary, r1) and offsets_equal(primary, r2), what="offsets")
    assert pr.info("stats")["sync_full"] == 2
    with open(primary.log_path) as f:
        assert f.read().count("Starting BGSAVE for SYNC") == 1
    for r in (r1, r2):
        assert client(r).dbsize() == 101 and client(r).get("during") == b"1"


# Shutting down a primary whose replicas lag: Redis waits (up to
# shutdown-timeout) for them to acknowledge the whole stream, holding writes
# meanwhile, and blocks SHUTDOWN's callers.

def stopped_replica(servers, *primary_args: str):
    """A primary with k=1 and a synced replica, then the replica stopped
    (SIGSTOP) and k incremented: the replica cannot acknowledge the INCR."""
    primary = servers(server_binary(), *primary_args)
    replica = servers(server_binary())
    pr = client(primary)
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.set("k", "1")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets")
    os.kill(replica.proc.pid, signal.SIGSTOP)
    pr.incr("k")
    return primary, replica


def log_text(s: Server) -> str:
    with open(s.log_path, "rb") as f:
        return f.read().decode(errors="replace")


def test_shutdown_waits_for_a_lagging_replica(servers):
    primary, replica = stopped_replica(servers)
    pr = client(primary)
    try:
        # A stopped replica's stream accumulates in its output buffer.
        i = 0
        while pr.info("memory")["mem_total_replication_buffers"] < 2 << 20 and i < 64:
            pr.set(f"junk{i}", "x" * (1 << 20))
            i += 1
        assert pr.info("memory")["mem_total_replication_buffers"] >= 2 << 20
        pr.incr("k")
        caller = RawConn(primary.port)
        caller.cmd("SHUTDOWN")
        wait_for(lambda: pr.info("server").get("shutdown_in_milliseconds", 0) > 0, what="shutdown waiting")
        clients = pr.info("clients")
        assert clients["blocked_clients"] == 1
        # The replica is not a client there; the test client and the caller are.
        assert clients["connected_clients"] == 2
        # Writes are held while it waits; reads are served.
        assert pr.get("k") == b"3"
        writer = RawConn(primary.port)
        writer.cmd("SET", "late", "1")
        with pytest.raises(Exception):
            writer.read_reply(timeout=0.5)
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    primary.proc.wait(timeout=20)
    assert primary.proc.returncode == 0
    assert client(replica).get("k") == b"3"
    assert client(replica).get("late") is None
    text = log_text(primary)
    assert "Waiting for replicas before shutting down." in text
    assert "1 of 1 replicas are in sync when shutting down." in text
    assert "Lagging replica" not in text


def test_shutdown_gives_up_on_a_replica_after_shutdown_timeout(servers):
    primary, replica = stopped_replica(servers, "--shutdown-timeout", "1")
    try:
        started = time.monotonic()
        os.kill(primary.proc.pid, signal.SIGTERM)
        primary.proc.wait(timeout=10)
        assert primary.proc.returncode == 0
        assert time.monotonic() - started >= 0.9
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    text = log_text(primary)
    assert re.search(r"Lagging replica 127\.0\.0\.1:\d+ reported offset \d+ behind master, lag=\d+, state=online\.", text), text
    assert "0 of 1 replicas are in sync when shutting down." in text


def test_shutdown_abort_answers_the_waiting_callers(servers):
    primary, replica = stopped_replica(servers)
    pr = client(primary)
    try:
        callers = [RawConn(primary.port) for _ in range(2)]
        for c in callers:
            c.cmd("SHUTDOWN")
        wait_for(lambda: pr.info("clients")["blocked_clients"] == 2, what="both callers blocked")
        assert pr.execute_command("SHUTDOWN", "ABORT") is True
        for c in callers:
            assert c.read_reply() == b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
        assert "shutdown_in_milliseconds" not in pr.info("server")
        assert pr.set("after", "1")
        with pytest.raises(redis.ResponseError, match="No shutdown in progress"):
            pr.execute_command("SHUTDOWN", "ABORT")
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    assert primary.alive()
    assert "Shutdown manually aborted." in log_text(primary)
    wait_for(lambda: client(replica).get("after") == b"1", what="writes stream again")
    # With NOW it does not wait.
    try:
        pr.execute_command("SHUTDOWN", "NOW")
    except redis.ConnectionError:
        pass
    primary.proc.wait(timeout=10)


@pytest.mark.parametrize("diskless", ["no", "yes"])
def test_an_image_larger_than_the_replica_output_limit_still_syncs(servers, diskless):
    """The image goes out from the file as the socket drains, not through the
    replica's output buffer: a dataset whose RDB is far past the replica class's
    client-output-buffer-limit still syncs, in one full sync, while writes the
    replica gets after it stay within the limit."""
    primary = servers(server_binary(), "--repl-diskless-sync", diskless,
                      "--client-output-buffer-limit", "replica 1mb 0 0", "--rdbcompression", "no")
    replica = servers(server_binary())
    pr = client(primary)
    pipe = pr.pipeline(transaction=False)
    for i in range(20_000):
        pipe.set(f"big:{i}", f"{i:08d}" + "x" * 392)
    pipe.execute()
    # A writer keeps the stream going while the image is on its way, so the
    # limit is checked while most of the image is unsent.
    stop = threading.Event()

    def write():
        w = client(primary)
        i = 0
        while not stop.is_set():
            w.set(f"w:{i % 100}", i)
            i += 1
            time.sleep(0.001)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        client(replica).replicaof(primary.host, primary.port)
        wait_for(lambda: link_up(replica), timeout=30, what="full sync of an 8 MB image")
        time.sleep(0.5)
    finally:
        stop.set()
        writer.join()
    pr.set("after", "1")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets after the sync")
    assert client(replica).dbsize() == pr.dbsize() == 20_101
    assert client(replica).get("big:19999") == b"00019999" + b"x" * 392
    assert pr.info("stats")["sync_full"] == 1
    names = [f"big:{i}" for i in range(20_000)] + [f"w:{i}" for i in range(100)]
    assert client(replica).mget(names) == pr.mget(names)
    line = pr.info("replication")["slave0"]
    assert line["state"] == "online"


# Full syncs: the diskless delay, the image's load, the backlog's TTL.

def test_diskless_sync_waits_for_more_replicas(servers):
    """repl-diskless-sync-delay holds a diskless sync so that replicas arriving
    within it share one image; repl-diskless-sync-max-replicas starts it as soon
    as that many wait."""
    primary = servers(server_binary(), "--repl-diskless-sync-delay", "2")
    r1, r2 = servers(server_binary()), servers(server_binary())
    pr = client(primary)
    pr.set("k", "v")
    started = time.monotonic()
    client(r1).replicaof(primary.host, primary.port)
    wait_for(lambda: "slave0" in pr.info("replication"), what="first replica waiting")
    assert pr.info("replication")["slave0"]["state"] == "wait_bgsave"
    client(r2).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(r1) and link_up(r2), what="both synced")
    assert time.monotonic() - started >= 1.9
    assert log_text(primary).count("Starting BGSAVE for SYNC") == 1
    assert "Delay next BGSAVE for diskless SYNC" in log_text(primary)
    # Enough replicas waiting: no delay.
    pr.config_set("repl-diskless-sync-delay", 60)
    pr.config_set("repl-diskless-sync-max-replicas", 2)
    client(r1).replicaof("no", "one")
    client(r2).replicaof("no", "one")
    client(r1).flushall()
    client(r2).flushall()
    client(r1).replicaof(primary.host, primary.port)
    client(r2).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(r1) and link_up(r2), timeout=10, what="both synced again")
    assert client(r1).get("k") == b"v" and client(r2).get("k") == b"v"
    # A disk-based sync never waits.
    pr.config_set("repl-diskless-sync", "no")
    client(r1).replicaof("no", "one")
    client(r1).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(r1), timeout=10, what="disk-based sync")


class FakePrimary:
    """A primary that answers a replica's handshake and sends `image` as its
    RDB; with `hold`, it sends the EOF-marked preamble and `image` and then
    nothing more until `release()`, when it drops the connection."""

    def __init__(self, image: bytes, replid: bytes = b"a" * 40, hold: bool = False):
        self.image = image
        self.replid = replid
        self.hold = hold
        self.released = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        conn, _ = self.sock.accept()
        # The replica sends one handshake command at a time and waits for
        # its reply: PING, REPLCONF ..., PSYNC.
        while True:
            data = conn.recv(4096)
            if not data or b"PSYNC" in data:
                break
            conn.sendall(b"+PONG\r\n" if b"PING" in data else b"+OK\r\n")
        conn.sendall(b"+FULLRESYNC " + self.replid + b" 0\r\n")
        if self.hold:
            conn.sendall(b"$EOF:" + b"m" * 40 + b"\r\n" + self.image)
            self.released.wait(30)
        else:
            conn.sendall(b"$%d\r\n" % len(self.image) + self.image)
            time.sleep(2)
        conn.close()

    def release(self) -> None:
        self.released.set()


@pytest.mark.parametrize("mode,kept", [("disabled", False), ("on-empty-db", False), ("swapdb", True)])
def test_diskless_load_swapdb_keeps_the_data_when_the_image_fails(servers, mode, kept):
    """With swapdb the image loads beside the old data, which stays when the
    image is refused; otherwise the old data is flushed before the load."""
    replica = servers(server_binary(), "--repl-diskless-load", mode)
    rr = client(replica)
    rr.set("old", "data")
    fake = FakePrimary(b"REDIS0011 this is not an RDB image")
    rr.replicaof("127.0.0.1", fake.port)
    wait_for(lambda: "Failed trying to load the MASTER synchronization DB" in log_text(replica), what="refused image")
    rr.replicaof("no", "one")
    assert (rr.get("old") == b"data") == kept


@pytest.mark.parametrize("same_history", [False, True])
def test_a_diskless_load_reports_loading_while_the_image_arrives(servers, same_history):
    """While a swapdb replica receives an image it reports loading and
    answers -LOADING; when the image continues its own history it keeps
    serving the old data instead (async_loading) and refuses only what
    must not run meanwhile (REPLICAOF). A transfer that breaks off ends
    either state and leaves the old data."""
    replica = servers(server_binary(), "--repl-diskless-load", "swapdb")
    rr = client(replica)
    rr.set("old", "data")
    replid = rr.info("replication")["master_replid"].encode() if same_history else b"a" * 40
    fake = FakePrimary(b"REDIS0011", replid=replid, hold=True)
    rr.replicaof("127.0.0.1", fake.port)
    flag = "async_loading" if same_history else "loading"
    wait_for(lambda: rr.info("persistence")[flag] == 1, what=flag)
    info = rr.info("persistence")
    assert info["loading" if same_history else "async_loading"] == 0
    if same_history:
        assert rr.get("old") == b"data"
        with pytest.raises(redis.exceptions.BusyLoadingError):
            rr.replicaof("no", "one")
    else:
        with pytest.raises(redis.exceptions.BusyLoadingError):
            rr.get("old")
    fake.release()
    wait_for(lambda: (lambda i: i["loading"] == 0 and i["async_loading"] == 0)(rr.info("persistence")), what="the load to end")
    rr.replicaof("no", "one")
    assert rr.get("old") == b"data" and rr.dbsize() == 1


def test_swapdb_load_replaces_the_data_on_success(servers):
    primary = servers(server_binary())
    replica = servers(server_binary(), "--repl-diskless-load", "swapdb")
    client(primary).set("new", "1")
    client(replica).set("old", "1")
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    assert client(replica).get("new") == b"1" and client(replica).get("old") is None


@pytest.mark.parametrize("load", ["disabled", "swapdb"])
def test_replica_lazy_flush_frees_the_old_data_on_the_freeing_thread(servers, load):
    """With replica-lazy-flush the data a full sync replaces is freed in
    the background and counted in lazyfreed_objects; without it, it is
    freed in place and not counted."""
    primary = servers(server_binary())
    client(primary).set("new", "1")
    for lazy, counted in (("yes", 1000), ("no", 0)):
        replica = servers(server_binary(), "--repl-diskless-load", load, "--replica-lazy-flush", lazy)
        rr = client(replica)
        rr.execute_command("DEBUG", "POPULATE", 1000)
        rr.replicaof(primary.host, primary.port)
        wait_for(lambda: link_up(replica), what="sync")
        wait_for(lambda: rr.info("memory")["lazyfree_pending_objects"] == 0, what="the freeing thread")
        assert rr.info("memory")["lazyfreed_objects"] == counted
        assert rr.dbsize() == 1 and rr.get("new") == b"1"


def test_backlog_is_freed_after_repl_backlog_ttl(servers):
    """A primary without replicas frees its backlog after repl-backlog-ttl
    seconds and takes a new id: a returning replica syncs in full."""
    primary, replica = servers(server_binary()), servers(server_binary())
    pr, rr = client(primary), client(replica)
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.set("k", "v")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets")
    old_id = pr.info("replication")["master_replid"]
    pr.config_set("repl-backlog-ttl", 1)
    rr.replicaof("no", "one")
    wait_for(lambda: pr.info("replication")["repl_backlog_active"] == 0, timeout=10, what="backlog freed")
    info = pr.info("replication")
    # redis-py reads forty zeros as the number 0.
    assert info["master_replid"] != old_id and info["master_replid2"] in (0, "0" * 40)
    assert "Replication backlog freed after 1 seconds without connected replicas." in log_text(primary)
    full = pr.info("stats")["sync_full"]
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync again")
    assert pr.info("stats")["sync_full"] == full + 1
    assert pr.info("replication")["repl_backlog_active"] == 1


# Changes of role: promotion, REPLICAOF, a restart, FAILOVER.

def test_promotion_makes_replicas_continue_under_the_new_id(servers):
    """A replica promoted with REPLICAOF NO ONE disconnects its own replicas;
    they come back by PSYNC and take its new id, without a full sync."""
    a, b, c = servers(server_binary()), servers(server_binary()), servers(server_binary())
    client(b).replicaof(a.host, a.port)
    wait_for(lambda: link_up(b), what="b synced")
    client(c).replicaof(b.host, b.port)
    wait_for(lambda: link_up(c), what="c synced")
    client(a).set("x", "1")
    wait_for(lambda: client(c).get("x") == b"1", what="chain")
    full = client(b).info("stats")["sync_full"]
    partial = client(b).info("stats")["sync_partial_ok"]
    client(b).replicaof("no", "one")
    new_id = client(b).info("replication")["master_replid"]
    wait_for(lambda: link_up(c) and client(c).info("replication")["master_replid"] == new_id, what="c took the new id")
    assert client(b).info("stats")["sync_full"] == full
    assert client(b).info("stats")["sync_partial_ok"] == partial + 1
    client(b).set("y", "2")
    wait_for(lambda: client(c).get("y") == b"2", what="stream from the new primary")


def test_config_resetstat_resets_the_sync_counters(servers):
    primary, replica = servers(server_binary()), servers(server_binary())
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr = client(primary)
    assert pr.info("stats")["sync_full"] == 1
    pr.config_resetstat()
    stats = pr.info("stats")
    assert (stats["sync_full"], stats["sync_partial_ok"], stats["sync_partial_err"]) == (0, 0, 0)


def test_becoming_a_replica_releases_blocked_clients(servers):
    primary, other = servers(server_binary()), servers(server_binary())
    blocked = RawConn(other.port)
    blocked.cmd("BLPOP", "list", "0")
    wait_for(lambda: client(other).info("clients")["blocked_clients"] == 1, what="blocked")
    client(other).replicaof(primary.host, primary.port)
    assert blocked.read_reply() == b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n"
    blocked.expect_closed()


def restart_on_same_port(s: Server) -> None:
    """SHUTDOWN NOW SAVE `s` (NOW: no GETACK moves the offset first) and
    start it again on its port, in its directory."""
    try:
        client(s).execute_command("SHUTDOWN", "NOW", "SAVE")
    except redis.ConnectionError:
        pass
    s.proc.wait(timeout=10)
    args = [s.binary, "--port", str(s.port), "--bind", s.host, "--appendonly", "no",
            "--enable-debug-command", "local", *s.extra_args,
            "--save", "3600 1"]
    with open(s.log_path, "ab") as log:
        s.proc = subprocess.Popen(args, cwd=s.workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    wait_for(lambda: (ping(s.port) or b"").startswith(b"+PONG"), what="restart")


def test_restarted_primary_continues_its_history(servers):
    """A primary saves its replication id and offset in the RDB file (AUX
    fields); restarted from it, it keeps them as its second id, so its
    replica continues by PSYNC."""
    primary, replica = servers(server_binary()), servers(server_binary())
    pr = client(primary)
    pr.config_set("save", "3600 1")
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    for i in range(50):
        pr.set(f"k{i}", i)
    wait_for(lambda: offsets_equal(primary, replica), what="offsets")
    before = pr.info("replication")
    restart_on_same_port(primary)
    pr = client(primary)
    info = pr.info("replication")
    assert info["master_replid2"] == before["master_replid"]
    assert info["master_replid"] != before["master_replid"]
    assert info["master_repl_offset"] == before["master_repl_offset"]
    assert info["second_repl_offset"] == before["master_repl_offset"] + 1
    assert info["repl_backlog_active"] == 1 and info["repl_backlog_histlen"] == 0
    wait_for(lambda: link_up(replica), timeout=20, what="replica back")
    assert pr.info("stats")["sync_partial_ok"] == 1 and pr.info("stats")["sync_full"] == 0
    pr.set("after", "1")
    wait_for(lambda: client(replica).get("after") == b"1", what="stream after restart")


def test_restarted_replica_continues_its_history(servers):
    primary, replica = servers(server_binary()), servers(server_binary())
    pr, rr = client(primary), client(replica)
    rr.config_set("save", "3600 1")
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.set("k", "v")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets")
    # The replica's config file names its primary, as CONFIG REWRITE would.
    replica.extra_args = replica.extra_args + ("--replicaof", primary.host, str(primary.port))
    restart_on_same_port(replica)
    wait_for(lambda: link_up(replica), timeout=20, what="replica back")
    assert pr.info("stats")["sync_partial_ok"] == 1 and pr.info("stats")["sync_full"] == 1
    assert client(replica).get("k") == b"v"


def test_failover_hands_the_primary_role_to_a_replica(servers):
    a, b = servers(server_binary()), servers(server_binary())
    ar, br = client(a), client(b)
    with pytest.raises(redis.ResponseError, match="FAILOVER requires connected replicas."):
        ar.execute_command("FAILOVER")
    br.replicaof(a.host, a.port)
    wait_for(lambda: link_up(b), what="sync")
    wait_for(lambda: ar.info("replication").get("slave0", {}).get("state") == "online", what="online")
    with pytest.raises(redis.ResponseError, match="FAILOVER target HOST and PORT is not a replica."):
        ar.execute_command("FAILOVER", "TO", "nohost", b.port)
    with pytest.raises(redis.ResponseError, match="FAILOVER with force option requires both a timeout and target HOST and IP."):
        ar.execute_command("FAILOVER", "TO", b.host, b.port, "FORCE")
    with pytest.raises(redis.ResponseError, match="FAILOVER is not valid when server is a replica."):
        br.execute_command("FAILOVER")
    with pytest.raises(redis.ResponseError, match="No failover in progress."):
        ar.execute_command("FAILOVER", "ABORT")
    ar.set("k", "1")
    assert ar.execute_command("FAILOVER", "TO", b.host, b.port) in (True, b"OK")
    wait_for(lambda: ar.info("replication")["master_failover_state"] == "no-failover", what="failover done")
    wait_for(lambda: link_up(a), what="old primary follows")
    assert ar.info("replication")["role"] == "slave" and br.info("replication")["role"] == "master"
    assert br.info("stats")["sync_partial_ok"] == 1 and br.info("stats")["sync_full"] == 0
    br.set("k", "2")
    wait_for(lambda: ar.get("k") == b"2", what="stream from the new primary")
    # A failover that times out is aborted; writes go on.
    stopped = servers(server_binary())
    client(stopped).replicaof(b.host, b.port)
    wait_for(lambda: link_up(stopped), what="sync")
    os.kill(stopped.proc.pid, signal.SIGSTOP)
    try:
        ar.replicaof("no", "one")
        br.set("lag", "1")
        assert br.execute_command("FAILOVER", "TO", stopped.host, stopped.port, "TIMEOUT", 300) in (True, b"OK")
        assert br.info("replication")["master_failover_state"] == "waiting-for-sync"
        wait_for(lambda: br.info("replication")["master_failover_state"] == "no-failover", what="timed out")
        assert "Replica never caught up before timeout" in log_text(b)
        assert br.set("after", "1")
    finally:
        os.kill(stopped.proc.pid, signal.SIGCONT)


# WAITAOF: the local AOF's fsynced offset and the replicas' (REPLCONF ACK ... FACK).

def test_waitaof_counts_fsynced_aofs(servers):
    primary = servers(server_binary(), "--appendonly", "yes", "--appendfsync", "always")
    pr = client(primary)
    wait_for(lambda: pr.info("persistence")["aof_rewrite_in_progress"] == 0, what="initial rewrite")
    with pytest.raises(redis.ResponseError, match="numlocal is set but appendonly is disabled"):
        client(servers(server_binary())).execute_command("WAITAOF", 1, 0, 0)
    pr.incr("foo")
    assert pr.execute_command("WAITAOF", 1, 0, 0) == [1, 0]
    pr.config_set("appendfsync", "no")
    pr.incr("foo")
    assert pr.execute_command("WAITAOF", 1, 0, 50) == [0, 0]
    pr.config_set("appendfsync", "everysec")
    assert pr.execute_command("WAITAOF", 1, 0, 0) == [1, 0]
    # A replica with an AOF acknowledges what it fsynced.
    replica = servers(server_binary(), "--appendonly", "yes", "--appendfsync", "always")
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.incr("foo")
    assert pr.execute_command("WAITAOF", 1, 1, 5000) == [1, 1]
    # Its AOF turned off: it acknowledges nothing.
    client(replica).config_set("appendonly", "no")
    pr.incr("foo")
    assert pr.execute_command("WAITAOF", 0, 1, 300)[1] == 0
    # A blocked WAITAOF that counts the local AOF fails when it is turned off.
    waiter = RawConn(primary.port)
    pr.config_set("appendfsync", "no")
    waiter.call("INCR", "foo")
    waiter.cmd("WAITAOF", 1, 0, 0)
    wait_for(lambda: pr.info("clients")["blocked_clients"] == 1, what="blocked")
    pr.config_set("appendonly", "no")
    assert waiter.read_reply() == b"-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"


def test_wait_counts_the_callers_last_write(servers):
    """WAIT waits for the offset of the caller's own last write: a client
    that wrote nothing is answered at once."""
    primary, replica = servers(server_binary()), servers(server_binary())
    pr = client(primary)
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    os.kill(replica.proc.pid, signal.SIGSTOP)
    try:
        pr.set("k", "v")
        assert pr.wait(1, 200) == 0
        reader = client(primary)
        assert reader.wait(1, 0) == 1
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    assert pr.wait(1, 5000) == 1


# What a replica does with keys and with its primary's stream.

def test_writable_replica_expires_the_keys_its_clients_gave_a_ttl(servers):
    primary, replica = servers(server_binary()), servers(server_binary())
    rr = client(replica, 5)
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    rr.config_set("replica-read-only", "no")
    rr.set("local", "1", px=200)
    rr.set("kept", "1")
    assert rr.dbsize() == 2
    wait_for(lambda: rr.dbsize() == 1, timeout=5, what="the local key expired")
    assert rr.get("kept") == b"1"


def test_primary_stream_sees_keys_the_replica_finds_due(servers):
    """A key due on the replica but not yet deleted by its primary is live to
    the primary's commands (the primary decides, as Redis's replica treats
    keys): INCR arriving late keeps the key and its TTL."""
    primary, replica = servers(server_binary()), servers(server_binary())
    pr, rr = client(primary), client(replica)
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    pr.set("k", "1", px=300)
    wait_for(lambda: offsets_equal(primary, replica), what="offsets")
    os.kill(replica.proc.pid, signal.SIGSTOP)
    try:
        assert pr.incr("k") == 2
        time.sleep(0.4)
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    wait_for(lambda: offsets_equal(primary, replica), what="offsets after INCR")
    assert rr.exists("k") == 0
    assert rr.dbsize() == 1
    assert rr.execute_command("DEBUG", "OBJECT", "k")


def test_spop_with_count_replays_as_srem_batches_of_1024(servers):
    primary, replica = servers(server_binary()), servers(server_binary())
    pr, rr = client(primary), client(replica)
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.sadd("s", *range(4000))
    for n in (1023, 1024, 1025):
        pr.spop("s", n)
    wait_for(lambda: offsets_equal(primary, replica), what="offsets")
    assert rr.scard("s") == 928 and sorted(rr.smembers("s")) == sorted(pr.smembers("s"))
    assert rr.info("commandstats")["cmdstat_srem"]["calls"] == 4


def test_replica_logs_an_error_its_primary_stream_caused(servers):
    primary, replica = servers(server_binary()), servers(server_binary())
    pr = client(primary)
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pr.execute_command("DEBUG", "REPLICATE", "fake-command-1")
    pr.set("after", "1")
    wait_for(lambda: client(replica).get("after") == b"1", what="stream goes on")
    text = log_text(replica)
    assert text.count("== CRITICAL ==") == 1
    assert "This replica is sending an error to its master: 'ERR unknown command 'fake-command-1'" in text
    assert pr.get("fake-command-1") is None


def test_a_replica_that_sends_a_command_with_a_reply_is_disconnected(servers):
    """A replica's connection carries the stream: a command of its that
    replies (or touches the keyspace, which it may not) closes it."""
    primary = servers(server_binary())
    pr = client(primary)
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        pr.execute_command("PSYNC", "replicationid", "offset_str")
    assert "asks for synchronization but with a wrong offset" in log_text(primary)
    assert pr.ping()
    c = RawConn(primary.port)
    c.cmd("PSYNC", "replicationid", "-1")
    assert c.read_line().startswith(b"+FULLRESYNC ")
    c.cmd("GET", "foo")
    c.expect_closed(timeout=10)
    text = log_text(primary)
    assert "== CRITICAL == This master is sending an error to its replica: 'ERR Replica can't interact with the keyspace' after processing the command 'get'" in text
    assert "Replica generated a reply to command 'get', disconnecting it: " in text
    assert pr.ping()


def replica_of(servers, *replica_args: str):
    primary, replica = servers(server_binary()), servers(server_binary(), *replica_args)
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    return primary, replica


def test_propagation_error_behavior_panic_ends_a_read_only_replica(servers):
    """With `panic` (Redis's suite runs every server so), an error from the
    primary's stream ends a read-only replica with Redis's panic line
    rather than leave its data diverged."""
    primary, replica = replica_of(servers, "--propagation-error-behavior", "panic")
    pr = client(primary)
    pr.set("before", "1")
    wait_for(lambda: client(replica).get("before") == b"1", what="stream")
    pr.execute_command("DEBUG", "REPLICATE", "fake-command-1")
    wait_for(lambda: not replica.alive(), what="the replica to end")
    text = log_text(replica)
    assert "This replica is sending an error to its master: 'ERR unknown command 'fake-command-1'" in text
    assert "Guru Meditation: This replica panicked sending an error to its master after processing the command '<unknown>'" in text
    assert pr.ping()


@pytest.mark.parametrize("behavior,read_only", [("panic-on-replicas", "yes"), ("panic", "no")])
def test_propagation_error_behavior_on_replicas(servers, behavior, read_only):
    """`panic-on-replicas` ends a read-only replica as `panic` does; a
    writable replica may hold keys its primary does not know of, so an
    error never ends it. CONFIG SET changes it at run time."""
    primary, replica = replica_of(servers)
    rr = client(replica)
    assert rr.config_get("propagation-error-behavior") == {"propagation-error-behavior": "ignore"}
    rr.config_set("propagation-error-behavior", behavior)
    rr.config_set("replica-read-only", read_only)
    assert rr.config_get("propagation-error-behavior") == {"propagation-error-behavior": behavior}
    pr = client(primary)
    if read_only == "no":
        rr.set("n", "text")
    pr.incr("n")
    pr.set("after", "1")
    if read_only == "yes":
        # The stream's INCR and the replica's copy agree: nothing fails.
        wait_for(lambda: rr.get("after") == b"1", what="stream")
        assert rr.get("n") == b"1"
        pr.execute_command("DEBUG", "REPLICATE", "fake-command-1")
        wait_for(lambda: not replica.alive(), what="the replica to end")
        assert "Guru Meditation: This replica panicked" in log_text(replica)
    else:
        wait_for(lambda: rr.get("after") == b"1", what="stream goes on")
        assert rr.get("n") == b"text"
        text = log_text(replica)
        assert "'ERR value is not an integer or out of range' after processing the command 'incrby'" in text
        assert "Guru Meditation" not in text
        replica.check_alive()


def test_propagation_error_behavior_panic_refuses_a_failing_aof(servers):
    """An AOF whose command fails on load: `panic` stops the start with
    Redis's panic line; `panic-on-replicas` (and `ignore`) log it and load
    the rest."""
    s = servers(server_binary(), "--appendonly", "yes")
    r = client(s)
    r.set("s", "text")
    r.set("n", "5")
    r.config_set("appendfsync", "always")
    aof_dir = os.path.join(s.workdir, "appendonlydir")
    s.stop()
    incr = os.path.join(aof_dir, sorted(f for f in os.listdir(aof_dir) if f.endswith(".incr.aof"))[-1])
    with open(incr, "ab") as f:
        f.write(b"*2\r\n$4\r\nINCR\r\n$1\r\ns\r\n*3\r\n$3\r\nSET\r\n$4\r\nlast\r\n$1\r\n1\r\n")
    for behavior, starts in (("panic", False), ("panic-on-replicas", True)):
        again = Server(server_binary(), ("--appendonly", "yes", "--propagation-error-behavior", behavior), workdir=s.workdir)
        try:
            if starts:
                again.start()
                assert client(again).get("last") == b"1" and client(again).get("n") == b"5"
            else:
                with pytest.raises(RuntimeError, match="failed to start"):
                    again.start(attempts=1)
                assert "Guru Meditation: This server panicked sending an error to its AOF-loading-client after processing the command 'incr'" in log_text(again)
        finally:
            again.stop()


@pytest.mark.parametrize("setting", ["no", "yes"])
def test_a_sync_leaves_no_rdb_file_without_persistence(servers, setting):
    """rdb-del-sync-files: a persistence-less primary and replica keep no
    RDB file of a disk-based sync. Here that holds whatever the setting:
    the primary's image is a temp file that goes once the replicas have
    it open, and the replica loads the image from memory."""
    args = ("--repl-diskless-sync", "no", "--repl-diskless-load", "disabled", "--rdb-del-sync-files", setting)
    primary, replica = servers(server_binary(), *args), servers(server_binary(), *args)
    pr = client(primary)
    pr.set("k", "v")
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    assert client(replica).get("k") == b"v"
    assert "with target: disk" in log_text(primary)
    wait_for(lambda: not [f for s in (primary, replica) for f in os.listdir(s.workdir) if f.endswith(".rdb")],
             what="no RDB file left")


def test_a_busy_script_on_the_replica_holds_the_primary_stream(servers):
    """While a script on the replica runs past its time limit, the
    primary's stream waits (Redis's replica holds it rather than answer
    -BUSY); once the script ends every write is applied, in order, and
    none is reported as diverged."""
    primary, replica = replica_of(servers, "--propagation-error-behavior", "panic", "--lua-time-limit", "100")
    pr, rr = client(primary), client(replica)
    script = ("local function now() local t = redis.call('TIME') return t[1] * 1000000 + t[2] end "
              "local start = now() while now() - start < 1500000 do end return 1")
    done = []
    runner = threading.Thread(target=lambda: done.append(client(replica).eval(script, 0)))
    runner.start()
    time.sleep(0.3)
    for i in range(100):
        pr.rpush("list", i)
    pr.set("last", "1")
    runner.join(10)
    assert done == [1]
    wait_for(lambda: rr.get("last") == b"1", what="the held stream")
    assert rr.lrange("list", 0, -1) == [str(i).encode() for i in range(100)]
    assert replica.alive() and "== CRITICAL ==" not in log_text(replica)


def test_a_diskless_load_cut_short_logs_an_rdb_error(servers):
    """A diskless load whose image breaks off mid-way is a short read of the
    RDB: the replica logs it with Redis's "Internal error in RDB" wording
    (operators grep for it), leaves loading at once and keeps its data."""
    replica = servers(server_binary(), "--repl-diskless-load", "swapdb")
    rr = client(replica)
    rr.set("old", "data")
    fake = FakePrimary(b"REDIS0011", replid=b"b" * 40, hold=True)
    rr.replicaof("127.0.0.1", fake.port)
    wait_for(lambda: rr.info("persistence")["loading"] == 1, what="loading")
    assert "Loading DB in memory" in log_text(replica)
    fake.release()
    wait_for(lambda: "Internal error in RDB" in log_text(replica), what="the short read logged")
    info = rr.info("persistence")
    assert info["loading"] == 0 and info["async_loading"] == 0
    rr.replicaof("no", "one")
    assert rr.get("old") == b"data"


@pytest.mark.parametrize("same_history", [False, True])
def test_a_diskless_primary_streams_its_image_while_the_save_runs(servers, same_history):
    """A densekv primary doing a diskless sync sends the EOF-marked image as
    its save writes it: with rdb-key-save-delay slowing the save, the
    replica is already loading (or async loading, when the sync continues
    its history) while the primary's save is still in progress, and the
    finished image loads whole."""
    primary = servers(server_binary(), "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
    replica = servers(server_binary(), "--repl-diskless-load", "swapdb")
    pr, rr = client(primary), client(replica)
    if same_history:
        rr.replicaof(primary.host, primary.port)
        wait_for(lambda: link_up(replica), what="first sync")
    pr.execute_command("DEBUG", "POPULATE", 200, "key", 1000)
    pr.config_set("rdbcompression", "no")
    pr.config_set("rdb-key-save-delay", 10000)  # 200 keys: about 2 s
    if same_history:
        full = pr.info("stats")["sync_full"]
        # The replica reconnects past what the backlog holds: a full sync.
        tx = pr.pipeline(transaction=True)
        tx.execute_command("CLIENT", "KILL", "TYPE", "replica")
        tx.config_set("repl-backlog-size", 16384)
        for i in range(10):
            tx.set(f"fill{i}", "A" * 16384)
        tx.execute()
        wait_for(lambda: pr.info("stats")["sync_full"] > full, what="a second full sync")
    else:
        rr.replicaof(primary.host, primary.port)
    flag = "async_loading" if same_history else "loading"
    wait_for(lambda: rr.info("persistence")[flag] == 1, timeout=10, what=flag)
    assert pr.info("persistence")["rdb_bgsave_in_progress"] == 1
    pr.config_set("rdb-key-save-delay", 0)
    wait_for(lambda: link_up(replica) and rr.dbsize() == pr.dbsize(), what="the sync to finish")
    info = rr.info("persistence")
    assert info["loading"] == 0 and info["async_loading"] == 0
    assert rr.execute_command("DEBUG", "DIGEST") == pr.execute_command("DEBUG", "DIGEST")
    # The line Redis's suite and operators wait for at the image's end.
    wait_for(lambda: "Diskless rdb transfer, done reading from pipe, 1 replicas still up" in log_text(primary), what="the end logged")


def streamed_image_header(s: Server) -> bytes:
    """Asks `s` for a full sync as a replica that takes the EOF-marked form
    would, and returns the image's first nine bytes (magic and version)."""
    sock = socket.create_connection((s.host, s.port), timeout=10)
    try:
        sock.sendall(b"REPLCONF capa eof capa psync2\r\nPSYNC ? -1\r\n")
        f = sock.makefile("rb")
        while not (line := f.readline().lstrip(b"\n")).startswith(b"$EOF:"):
            assert line, "closed before the image"  # +OK, +FULLRESYNC ...
        return f.read(9)
    finally:
        sock.close()


def test_a_streamed_image_declares_the_version_its_data_needs(servers):
    """A diskless sync's header goes out before its keys, so its version is
    settled from what the data holds: 9 for strings and plain collections
    (Redis 6 and 7.0 replicas load it), 10 with a stream, 12 with a field
    TTL."""
    primary = servers(server_binary(), "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
    pr = client(primary)
    pr.execute_command("DEBUG", "POPULATE", 1000, "key", 10)
    pr.hset("h", mapping={"a": 1, "b": 2})
    pr.sadd("s", "x", "y")
    assert streamed_image_header(primary) == b"REDIS0009"
    pr.xadd("st", {"f": "v"})
    assert streamed_image_header(primary) == b"REDIS0010"
    pr.execute_command("HEXPIRE", "h", 1000, "FIELDS", 1, "a")
    assert streamed_image_header(primary) == b"REDIS0012"


def test_replconf_alone_does_not_make_a_replica(servers):
    """A replica sends REPLCONF listening-port and capa before PSYNC. Until
    PSYNC it is no replica: a full sync starting meanwhile (here the cron's,
    with no delay) must not send it +FULLRESYNC and an image it did not ask
    for. One that did left the real PSYNC's +FULLRESYNC line in the link
    after the image loaded, where the replica read it as a command from its
    primary (Redis's suite: "diskless loading short read", with the
    primary's hz at 500)."""
    primary = servers(server_binary(), "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", "--hz", "500")
    pr = client(primary)
    pr.set("k", "v")
    early = RawConn(primary.port, timeout=0.5)
    early.cmd("REPLCONF", "listening-port", "6380")
    early.cmd("REPLCONF", "capa", "eof", "capa", "psync2")
    assert early.read_line() == b"+OK\r\n"
    assert early.read_line() == b"+OK\r\n"
    # A real replica asks meanwhile: its sync starts, and must not take in
    # the connection that only announced itself.
    assert streamed_image_header(primary).startswith(b"REDIS")
    time.sleep(0.3)
    assert early.buf == b""
    with pytest.raises(socket.timeout):
        early.sock.recv(100)
    assert pr.info("replication")["connected_slaves"] == 0
    early.cmd("PSYNC", "?", "-1")
    assert early.read_line().startswith(b"+FULLRESYNC ")
    early.sock.close()


def test_a_streamed_save_stops_when_its_last_replica_drops(servers):
    """A diskless sync's save serves only the sockets receiving it: when the
    last of them closes the save stops at once (as Redis kills the child),
    and the next replica gets a fresh image instead of waiting for the
    abandoned one."""
    primary = servers(server_binary(), "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
    pr = client(primary)
    pr.execute_command("DEBUG", "POPULATE", 200, "key", 1000)
    pr.config_set("rdbcompression", "no")
    pr.config_set("rdb-key-save-delay", 100000)  # 200 keys: 20 s
    assert streamed_image_header(primary) == b"REDIS0009"  # and closes
    wait_for(lambda: pr.info("persistence")["rdb_bgsave_in_progress"] == 0, timeout=5, what="the save to stop")
    assert "last replica dropped" in log_text(primary)
    pr.config_set("rdb-key-save-delay", 0)
    replica = servers(server_binary())
    rr = client(replica)
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica) and rr.dbsize() == 200, what="a fresh sync")


def test_replication_bytes_are_counted_apart_from_clients(servers):
    """INFO total_net_repl_input/output_bytes count the replication link
    (the image and the stream) and total_net_input/output_bytes do not;
    the instantaneous repl rates follow them."""
    primary = servers(server_binary())
    replica = servers(server_binary(), "--replica-read-only", "no")
    pr, rr = client(primary), client(replica)
    pr.set("big", os.urandom(200_000))  # the image's LZF cannot shrink it
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    synced_in = rr.info("stats")["total_net_repl_input_bytes"]
    assert synced_in > 200_000  # the image carried the value
    client_in = rr.info("stats")["total_net_input_bytes"]
    value = "y" * 100_000
    for i in range(20):
        pr.set(f"k{i}", value)
    assert pr.wait(1, 5000) == 1
    p_stats, r_stats = pr.info("stats"), rr.info("stats")
    assert r_stats["total_net_repl_input_bytes"] - synced_in >= 20 * 100_000
    assert p_stats["total_net_repl_output_bytes"] >= 20 * 100_000 + 200_000
    # The stream is not client input on the replica, nor client output on
    # the primary (whose clients only got +OK and the WAIT reply).
    assert r_stats["total_net_input_bytes"] - client_in < 10_000
    assert p_stats["total_net_output_bytes"] < 10_000
    # The rates come from cron's 100 ms samples: the next one shows them.
    wait_for(lambda: float(rr.info("stats")["instantaneous_input_repl_kbps"]) > 0, timeout=2, what="replica's repl rate")
    wait_for(lambda: float(pr.info("stats")["instantaneous_output_repl_kbps"]) > 0, timeout=2, what="primary's repl rate")
    # A writable replica tracks the TTLs of keys written on it.
    rr.set("local", "v", ex=100)
    assert rr.info("stats")["slave_expires_tracked_keys"] == 1
    assert pr.info("stats")["slave_expires_tracked_keys"] == 0


def test_a_replica_leaves_eviction_to_its_primary(servers):
    """replica-ignore-maxmemory yes (the default): a replica over its
    maxmemory evicts nothing and refuses nothing, keeping what its primary
    sent; with no, it evicts on its own as a primary would."""
    primary = servers(server_binary())
    replica = servers(server_binary(), "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
    pr, rr = client(primary), client(replica)
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    pipe = pr.pipeline(transaction=False)
    for i in range(40_000):
        pipe.set(f"k{i}", "v" * 100)
    pipe.execute()
    assert pr.wait(1, 10_000) == 1
    assert rr.info("memory")["used_memory"] > 2 * 1024 * 1024
    for i in range(50):
        rr.get(f"k{i}")
    assert rr.dbsize() == 40_000
    assert rr.info("stats")["evicted_keys"] == 0
    assert rr.config_get("replica-ignore-maxmemory") == {"replica-ignore-maxmemory": "yes"}
    rr.config_set("replica-ignore-maxmemory", "no")
    rr.get("k0")
    assert rr.info("stats")["evicted_keys"] > 0
    assert rr.dbsize() < 40_000


def test_repl_disable_tcp_nodelay_still_replicates(servers):
    """repl-disable-tcp-nodelay yes (fewer, larger packets to replicas):
    the full sync and the stream after it arrive whole."""
    primary = servers(server_binary(), "--repl-disable-tcp-nodelay", "yes")
    replica = servers(server_binary())
    pr, rr = client(primary), client(replica)
    assert pr.config_get("repl-disable-tcp-nodelay") == {"repl-disable-tcp-nodelay": "yes"}
    pr.set("before", "1")
    rr.replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="sync")
    for i in range(100):
        pr.set(f"k{i}", i)
    assert pr.wait(1, 5000) == 1
    assert rr.get("before") == b"1" and rr.get("k99") == b"99"
