"""RDB persistence: SAVE, loading at start-up, DEBUG RELOAD, bad files, and the
way in and out with a real Redis (Debian's redis-server 7.0) in the same test."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import redis

from conftest import HOST, Server, free_port, ping, server_binary


def fill(r: redis.Redis, streams: bool = True) -> None:
    """A dataset over every type and the encodings each has, with TTLs."""
    r.set("str", "hello")
    r.set("int", 12345)
    r.set("long", "x" * 300)
    r.set("ttl", "v", px=3_600_000)
    r.rpush("list:small", *range(5))
    r.rpush("list:big", *(f"element-{i}" for i in range(2000)))
    r.sadd("set:int", *range(10))
    r.sadd("set:small", "a", "b", "c")
    r.sadd("set:big", *(f"member-{i}" for i in range(1000)))
    r.zadd("zset:small", {"a": 1, "b": 2.5})
    r.zadd("zset:big", {f"m{i}": i / 3 for i in range(500)})
    r.hset("hash:small", mapping={"f": "v", "n": 1})
    r.hset("hash:big", mapping={f"field-{i}": i for i in range(1000)})
    r.expire("hash:big", 7200)
    if streams:
        r.xadd("stream", {"a": 1}, id="1-1")
        r.xadd("stream", {"b": 2}, id="2-1")
        r.xgroup_create("stream", "g", id="0")
        r.xreadgroup("g", "c", {"stream": ">"}, count=1)
    r.select(3)
    r.set("db3", "three")
    r.select(0)


def snapshot(r: redis.Redis, dbs=(0, 3)) -> dict:
    """Every key of `dbs` as (type, value, has TTL), comparable across servers.
    Each SCAN batch is read in two pipelines (types, then values and TTLs):
    one round trip per command made the larger datasets take most of a
    minute in the client alone."""
    readers = {
        "string": lambda p, k: p.get(k),
        "list": lambda p, k: p.lrange(k, 0, -1),
        "set": lambda p, k: p.smembers(k),
        "zset": lambda p, k: p.zrange(k, 0, -1, withscores=True),
        "hash": lambda p, k: p.hgetall(k),
        "stream": lambda p, k: p.xrange(k),
    }
    out = {}
    for db in dbs:
        r.select(db)
        cursor = None
        while cursor != 0:
            cursor, keys = r.scan(cursor or 0, count=1000)
            p = r.pipeline(transaction=False)
            for k in keys:
                p.type(k)
            types = [t.decode() for t in p.execute()]
            p = r.pipeline(transaction=False)
            for k, t in zip(keys, types):
                readers.get(t, lambda p, k: p.exists(k))(p, k)
                p.pttl(k)
            got = p.execute()
            for i, (k, t) in enumerate(zip(keys, types)):
                v, pttl = got[2 * i], got[2 * i + 1]
                if t == "set":
                    v = sorted(v)
                elif t == "hash":
                    v = sorted(v.items())
                elif t == "stream":
                    v = (v, [(g["name"], g["pending"]) for g in r.xinfo_groups(k)])
                elif t not in readers:
                    v = None
                out[(db, k)] = (t, v, pttl > 0)
    r.select(0)
    return out


def start(binary: str, workdir: str, *extra: str) -> Server:
    s = Server(binary, extra, workdir=workdir)
    return s.start()


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="densekv-persist-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_save_and_restart_keep_every_type(workdir):
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        fill(r)
        r.function_load("#!lua name=lib\nredis.register_function('f', function() return 7 end)")
        before = snapshot(r)
        assert r.info("persistence")["rdb_changes_since_last_save"] > 0
        assert r.save() is True
        info = r.info("persistence")
        assert info["rdb_changes_since_last_save"] == 0
        assert info["rdb_saves"] == 1
        assert info["rdb_last_bgsave_status"] == "ok"
        assert os.path.exists(os.path.join(workdir, "dump.rdb"))
    finally:
        s.stop()
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert snapshot(r) == before
        assert 3_000_000 < r.pttl("ttl") <= 3_600_000
        assert r.fcall("f", 0) == 7
        assert r.info("persistence")["rdb_last_load_keys_loaded"] == len(before)
        with open(s.log_path, "rb") as f:
            assert b"DB loaded from disk" in f.read()
    finally:
        s.stop()


def test_sigterm_with_save_points_saves_and_restart_restores(workdir):
    s = start(server_binary(), workdir, "--save", "3600 1")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        fill(r, streams=False)
        before = snapshot(r)
    finally:
        s.stop()  # SIGTERM, as a service manager stops it
    with open(s.log_path, "rb") as f:
        log = f.read()
    assert b"Saving the final RDB snapshot before exiting." in log
    assert b"ready to exit, bye bye" in log
    assert os.path.exists(os.path.join(workdir, "dump.rdb"))
    s = start(server_binary(), workdir, "--save", "")
    try:
        assert snapshot(redis.Redis(host=HOST, port=s.port)) == before
    finally:
        s.stop()


def test_debug_reload_round_trips(r):
    fill(r)
    before = snapshot(r)
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert snapshot(r) == before
    with pytest.raises(redis.ResponseError, match="only supports the MERGE, NOFLUSH and NOSAVE"):
        r.execute_command("DEBUG", "RELOAD", "BOGUS")
    r.flushall()


def test_expired_keys_are_not_loaded(workdir):
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("short", "v", px=300)
        r.set("stays", "v")
        r.save()
    finally:
        s.stop()
    time.sleep(0.4)
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.keys("*") == [b"stays"]
        info = r.info("persistence")
        assert (info["rdb_last_load_keys_loaded"], info["rdb_last_load_keys_expired"]) == (1, 1)
    finally:
        s.stop()


def test_corrupt_file_is_refused_naming_file_and_offset(workdir):
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        fill(r, streams=False)
        r.save()
    finally:
        s.stop()
    path = os.path.join(workdir, "dump.rdb")
    data = bytearray(open(path, "rb").read())
    for cut in (len(data) // 2, len(data) - 3):
        with open(path, "wb") as f:
            f.write(data[:cut])
        proc = subprocess.run([server_binary(), "--port", str(free_port()), "--bind", HOST, "--save", ""],
                              cwd=workdir, capture_output=True, timeout=30)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1, out
        assert b"offset" in out and b"dump.rdb" in out, out
    # A flipped byte inside: the checksum catches what the parser does not.
    data[len(data) // 2] ^= 0x55
    with open(path, "wb") as f:
        f.write(data)
    proc = subprocess.run([server_binary(), "--port", str(free_port()), "--bind", HOST, "--save", ""],
                          cwd=workdir, capture_output=True, timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_wrong_checksum_is_reported_as_redis_does(workdir):
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("k", "v")
        r.save()
    finally:
        s.stop()
    path = os.path.join(workdir, "dump.rdb")
    with open(path, "r+b") as f:
        f.seek(-8, os.SEEK_END)
        f.write(b"foobar00")
    proc = subprocess.run([server_binary(), "--port", str(free_port()), "--bind", HOST, "--save", ""],
                          cwd=workdir, capture_output=True, timeout=30)
    out = (proc.stdout + proc.stderr).decode()
    assert proc.returncode == 1, out
    got = int.from_bytes(b"foobar00", "little")
    assert "Wrong RDB checksum expected: (" in out and f") but got ({got:x}). Aborting now." in out, out
    # Redis's test looks for it in the last ten lines.
    assert "RDB CRC error" in "\n".join(out.splitlines()[-10:]), out
    assert out.rstrip().endswith("Terminating server after rdb file reading failure."), out


def redis_server() -> str | None:
    return shutil.which("redis-server")


def start_redis(workdir: str, *extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([redis_server(), "--port", str(port), "--bind", HOST, "--save", "",
                             "--appendonly", "no", "--dir", workdir, "--daemonize", "no", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while ping(port, timeout=0.5) is None:
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)
    return proc, port


def stop_redis(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(redis_server() is None, reason="redis-server not installed")
def test_interop_with_redis_both_ways(workdir):
    # Redis writes, densekv loads.
    proc, port = start_redis(workdir)
    try:
        r = redis.Redis(host=HOST, port=port)
        fill(r)
        expected = snapshot(r)
        r.save()
    finally:
        stop_redis(proc)
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert snapshot(r) == expected
        # densekv writes, Redis loads: the file is version 10 (Redis 7.0
        # reads up to 10), streams in the 7.0 layout, one of them made here.
        r.xadd("stream:dk", {"f": "v"}, id="5-1")
        r.xgroup_create("stream:dk", "g", id="0")
        r.xreadgroup("g", "c", {"stream:dk": ">"})
        expected = snapshot(r)
        r.save()
    finally:
        s.stop()
    proc, port = start_redis(workdir)
    try:
        r = redis.Redis(host=HOST, port=port)
        assert snapshot(r) == expected
    finally:
        stop_redis(proc)


def wait_for(cond, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def bgsave_done(r: redis.Redis) -> bool:
    return r.info("persistence")["rdb_bgsave_in_progress"] == 0


def test_bgsave_is_the_image_at_its_start_while_writes_go_on(workdir):
    """Writes that land while a background save runs (overwrites, deletes,
    new keys, collection edits, FLUSHDB) are not in the file: it holds the
    dataset as it was when BGSAVE ran, and the server holds the new one."""
    s = start(server_binary(), workdir, "--save", "")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        p = r.pipeline(transaction=False)
        for i in range(60_000):
            p.set(f"k:{i}", f"old-{i}")
        p.execute()
        fill(r)
        r.select(5)
        r.mset({f"five:{i}": i for i in range(5000)})
        r.select(0)
        before = snapshot(r, dbs=(0, 3, 5))
        assert r.bgsave() is True
        assert r.info("persistence")["rdb_bgsave_in_progress"] == 1
        # Straight after, while the save is still stepping: change a bit of
        # everything, in the same pipeline so it interleaves with the steps.
        p = r.pipeline(transaction=False)
        for i in range(0, 60_000, 3):
            p.set(f"k:{i}", "new")
        for i in range(1, 60_000, 7):
            p.delete(f"k:{i}")
        for i in range(2000):
            p.set(f"added:{i}", "x")
        p.rpush("list:big", "pushed")
        p.sadd("set:big", "new-member")
        p.hset("hash:big", "field-0", "changed")
        p.zadd("zset:big", {"m0": 1000})
        p.execute()
        r.select(5)
        r.flushdb()
        r.select(0)
        wait_for(lambda: bgsave_done(r), what="BGSAVE")
        info = r.info("persistence")
        assert info["rdb_last_bgsave_status"] == "ok"
        assert info["rdb_saves"] == 1
        assert r.get("k:0") == b"new"
    finally:
        s.stop()
    s = start(server_binary(), workdir, "--save", "")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert snapshot(r, dbs=(0, 3, 5)) == before
        with open(s.log_path, "rb") as f:
            log = f.read()
    finally:
        s.stop()
    assert b"DB loaded from disk" in log


def test_flushall_with_save_points_leaves_no_unsaved_change(workdir):
    """FLUSHALL saves at once where save points are set, so no change is
    left unsaved (rdb_changes_since_last_save 0), and it still goes to the
    AOF; without save points its change stays counted."""
    s = start(server_binary(), workdir, "--save", "3600 1", "--appendonly", "yes")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("key", "value")
        assert r.flushall() is True
        assert r.info("persistence")["rdb_changes_since_last_save"] == 0
        r.config_set("save", "")
        r.set("key", "value")
        r.flushall()
        assert r.info("persistence")["rdb_changes_since_last_save"] == 2
        aof = os.path.join(workdir, "appendonlydir")
        text = b"".join(open(os.path.join(aof, f), "rb").read() for f in os.listdir(aof) if f.endswith(".incr.aof"))
        assert text.lower().count(b"flushall") == 2
    finally:
        s.stop()


def test_bgsave_info_errors_and_change_counter(workdir):
    s = start(server_binary(), workdir, "--save", "", "--rdb-key-save-delay", "2000")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.mset({f"k{i}": i for i in range(1000)})
        assert r.info("persistence")["rdb_changes_since_last_save"] >= 1
        with socket.create_connection((HOST, s.port)) as sock:
            sock.sendall(b"BGSAVE\r\n")
            assert sock.recv(100) == b"+Background saving started\r\n"
        info = r.info("persistence")
        assert info["rdb_bgsave_in_progress"] == 1
        assert info["current_save_keys_total"] == 1000
        assert info["rdb_current_bgsave_time_sec"] >= 0
        with pytest.raises(redis.ResponseError, match="^Background save already in progress$"):
            r.execute_command("BGSAVE")
        with pytest.raises(redis.ResponseError, match="^Background save already in progress$"):
            r.save()
        with pytest.raises(redis.ResponseError, match="syntax error"):
            r.execute_command("BGSAVE", "NOW")
        # Writes during the save count towards the next one.
        r.set("during", "1")
        # 1000 keys at 2 ms each: about 2 s.
        wait_for(lambda: bgsave_done(r), timeout=20, what="BGSAVE")
        info = r.info("persistence")
        assert info["rdb_changes_since_last_save"] == 1
        assert info["rdb_last_bgsave_time_sec"] >= 1
        assert info["rdb_last_bgsave_status"] == "ok"
        assert r.lastsave().timestamp() > time.time() - 60
        assert not [f for f in os.listdir(workdir) if f.startswith("temp-")]
        with open(s.log_path, "rb") as f:
            log = f.read()
        assert b"Background saving started" in log
        assert b"Background saving terminated with success" in log
    finally:
        s.stop()


def test_lowering_the_key_save_delay_speeds_up_a_running_save(workdir):
    """A save slowed by rdb-key-save-delay reads the setting as it goes:
    lowering it ends a 100-seconds-per-key save at once, the file is whole,
    and an AOF rewrite scheduled behind it then runs (Redis's suite slows a
    save this way and then kills its child; densekv has none to kill)."""
    s = start(server_binary(), workdir, "--save", "", "--appendonly", "no")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("x", "y")
        r.config_set("rdb-key-save-delay", "100000000")
        r.bgsave()
        assert r.info("persistence")["rdb_bgsave_in_progress"] == 1
        r.config_set("appendonly", "yes")
        assert r.info("persistence")["aof_rewrite_scheduled"] == 1
        time.sleep(0.3)
        assert r.info("persistence")["rdb_bgsave_in_progress"] == 1
        started = time.monotonic()
        r.config_set("rdb-key-save-delay", "0")
        wait_for(lambda: bgsave_done(r), timeout=5, what="the slowed BGSAVE to finish")
        assert time.monotonic() - started < 5
        assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
        wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0
                 and r.info("persistence")["aof_rewrite_scheduled"] == 0, timeout=10, what="the AOF rewrite")
        assert r.execute_command("WAITAOF", 1, 0, 1000) == [1, 0]
        r.execute_command("DEBUG", "RELOAD")
        assert r.get("x") == b"y"
    finally:
        s.stop()


def test_flushall_aborts_bgsave(workdir):
    s = start(server_binary(), workdir, "--save", "", "--rdb-key-save-delay", "1000")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.mset({f"k{i}": i for i in range(5000)})
        changes = r.info("persistence")["rdb_changes_since_last_save"]
        r.bgsave()
        assert r.info("persistence")["rdb_bgsave_in_progress"] == 1
        r.flushall()
        info = r.info("persistence")
        assert info["rdb_bgsave_in_progress"] == 0
        assert info["rdb_changes_since_last_save"] >= changes
        assert info["rdb_last_bgsave_status"] == "ok"
        assert r.set("x", "y")
        time.sleep(0.1)
        assert not os.path.exists(os.path.join(workdir, "dump.rdb"))
        assert not [f for f in os.listdir(workdir) if f.startswith("temp-")]
        # At once another save: the aborted one's thread, stopping, must not
        # take the new one's file away (Redis's "bgsave resets the change
        # counter" runs this way).
        for _ in range(20):
            r.mset({f"k{i}": i for i in range(2000)})
            r.config_set("rdb-key-save-delay", "1000")
            r.bgsave()
            r.flushall()
            r.set("x", "y")
            r.config_set("rdb-key-save-delay", "0")
            r.bgsave()
            wait_for(lambda: bgsave_done(r), what="BGSAVE")
            info = r.info("persistence")
            assert (info["rdb_last_bgsave_status"], info["rdb_changes_since_last_save"]) == ("ok", 0)
    finally:
        s.stop()


def test_save_points_start_background_saves(workdir):
    s = start(server_binary(), workdir, "--save", "1 3")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("a", 1)
        r.set("b", 2)
        time.sleep(1.5)
        assert r.info("persistence")["rdb_saves"] == 0, "2 changes are under the save point's 3"
        r.set("c", 3)
        wait_for(lambda: r.info("persistence")["rdb_saves"] == 1, timeout=5, what="a save point's BGSAVE")
        assert r.info("persistence")["rdb_changes_since_last_save"] == 0
        with open(s.log_path, "rb") as f:
            assert b"3 changes in 1 seconds. Saving..." in f.read()
    finally:
        s.stop()
    s = start(server_binary(), workdir, "--save", "")
    try:
        assert sorted(redis.Redis(host=HOST, port=s.port).keys()) == [b"a", b"b", b"c"]
    finally:
        s.stop()


def test_failed_bgsave_stops_writes_with_misconf(workdir):
    sub = os.path.join(workdir, "gone")
    os.mkdir(sub)
    s = start(server_binary(), workdir, "--save", "3600 1", "--dir", sub)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("x", "x")
        os.rmdir(sub)  # the save cannot create its file
        r.bgsave()
        wait_for(lambda: bgsave_done(r), what="BGSAVE")
        assert r.info("persistence")["rdb_last_bgsave_status"] == "err"
        assert r.get("x") == b"x"
        with pytest.raises(redis.ResponseError, match="^MISCONF Redis is configured to save RDB snapshots"):
            r.set("x", "y")
        with pytest.raises(redis.ResponseError, match="MISCONF"):
            r.eval("return redis.call('set', 'x', 1)", 1, "x")
        assert r.eval("return redis.call('get', 'x')", 1, "x") == b"x"
        r.config_set("stop-writes-on-bgsave-error", "no")
        assert r.set("x", "z")
        r.config_set("stop-writes-on-bgsave-error", "yes")
        os.mkdir(sub)
        r.bgsave()
        wait_for(lambda: bgsave_done(r), what="BGSAVE")
        assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
        assert r.set("x", "y")
    finally:
        s.stop()


@pytest.mark.skipif(redis_server() is None, reason="redis-server not installed")
def test_redis_loads_a_background_save(workdir):
    s = start(server_binary(), workdir, "--save", "")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        fill(r)
        r.function_load("#!lua name=lib\nredis.register_function('f', function() return 7 end)")
        expected = snapshot(r)
        r.bgsave()
        wait_for(lambda: bgsave_done(r), what="BGSAVE")
    finally:
        s.stop()
    with open(os.path.join(workdir, "dump.rdb"), "rb") as f:
        assert f.read(9) == b"REDIS0010", "functions need 10; nothing here needs more"
    proc, port = start_redis(workdir)
    try:
        r = redis.Redis(host=HOST, port=port)
        assert snapshot(r) == expected
        assert r.fcall("f", 0) == 7
    finally:
        stop_redis(proc)


def digest(r: redis.Redis) -> str:
    return r.execute_command("DEBUG", "DIGEST").decode()


def test_debug_digest_survives_reload_and_restart(workdir):
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert digest(r) == "0" * 40
        assert r.execute_command("DEBUG", "DIGEST-VALUE", "nokey") == [b"0" * 40]
        fill(r)
        r.hset("hash:ttl", mapping={"a": 1, "b": 2})
        r.hpexpire("hash:ttl", 3_600_000, "a")
        before = digest(r)
        assert len(before) == 40 and before != "0" * 40
        values = r.execute_command("DEBUG", "DIGEST-VALUE", "str", "list:big", "hash:ttl", "stream")
        assert r.execute_command("DEBUG", "RELOAD") == b"OK"
        assert digest(r) == before
        assert r.execute_command("DEBUG", "DIGEST-VALUE", "str", "list:big", "hash:ttl", "stream") == values
        # Changes that keep the keys but not the data show.
        r.lset("list:big", 0, "other")
        assert digest(r) != before
        r.lset("list:big", 0, "element-0")
        r.persist("ttl")
        assert digest(r) != before
        r.pexpire("ttl", 3_600_000)
        assert digest(r) == before
        r.save()
    finally:
        s.stop()
    s = start(server_binary(), workdir)
    try:
        assert digest(redis.Redis(host=HOST, port=s.port)) == before
    finally:
        s.stop()


def test_debug_digest_ignores_encodings_and_insertion_order(workdir):
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.sadd("s", *range(10))
        r.hset("h", mapping={f"f{i}": i for i in range(10)})
        r.zadd("z", {f"m{i}": i / 2 for i in range(10)})
        small = digest(r)
        r.flushall()
        r.config_set("set-max-intset-entries", 0)
        r.config_set("set-max-listpack-entries", 0)
        r.config_set("hash-max-listpack-entries", 0)
        r.config_set("zset-max-listpack-entries", 0)
        r.zadd("z", {f"m{i}": i / 2 for i in reversed(range(10))})
        r.hset("h", mapping={f"f{i}": i for i in reversed(range(10))})
        r.sadd("s", *reversed(range(10)))
        assert r.object("encoding", "s") == b"hashtable"
        assert digest(r) == small
    finally:
        s.stop()


@pytest.mark.skipif(redis_server() is None, reason="redis-server not installed")
def test_debug_digest_equals_redis(workdir):
    def load(r: redis.Redis) -> None:
        r.set("s", "hello")
        r.set("n", 12345)
        r.set("e", "v", ex=1000)
        r.rpush("l", "a", "b", "c", 1, 2)
        r.sadd("st", "x", "y", 3)
        r.zadd("z", {"a": 1, "b": 2.5, "c": 1e20})
        r.hset("h", mapping={"f1": "v1", "f2": "v2"})
        r.xadd("strm", {"a": "b", "c": "d"}, id="1-1")
        r.select(3)
        r.set("s", "hello")
        r.select(0)
        r.execute_command("DEBUG", "POPULATE", 20, "p", 12)

    keys = ("s", "n", "e", "l", "st", "z", "h", "strm", "p:3", "none")
    proc, port = start_redis(workdir, "--enable-debug-command", "yes")
    try:
        r = redis.Redis(host=HOST, port=port)
        load(r)
        expected = (digest(r), r.execute_command("DEBUG", "DIGEST-VALUE", *keys))
    finally:
        stop_redis(proc)
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        load(r)
        assert (digest(r), r.execute_command("DEBUG", "DIGEST-VALUE", *keys)) == expected
    finally:
        s.stop()


def test_debug_populate(r):
    r.flushall()
    r.set("key:1", "mine")
    assert r.execute_command("DEBUG", "POPULATE", 3) == b"OK"
    assert sorted(r.keys("*")) == [b"key:0", b"key:1", b"key:2"]
    assert (r.get("key:0"), r.get("key:1")) == (b"value:0", b"mine")
    r.execute_command("DEBUG", "POPULATE", 2, "p", 10)
    assert r.get("p:1") == b"value:1\0\0\0"
    r.execute_command("DEBUG", "POPULATE", 2, "q", 3)
    assert r.get("q:1") == b"val"
    with pytest.raises(redis.ResponseError, match="^value is out of range, must be positive"):
        r.execute_command("DEBUG", "POPULATE", -1)
    r.flushall()


def test_hash_fields_due_at_load_are_loaded_then_expired(workdir):
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.hset("all", mapping={"a": 1, "b": 2})
        r.hpexpire("all", 100, "a", "b")
        r.hset("some", mapping={"a": 1, "b": 2, "c": 3})
        r.hpexpire("some", 100, "a")
        r.hexpire("some", 3600, "b")
        r.save()
    finally:
        s.stop()
    time.sleep(0.2)
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        # As Redis: no field is dropped while loading, so both keys count as
        # loaded; field expiry removes the due ones afterwards.
        assert r.info("persistence")["rdb_last_load_keys_loaded"] == 2
        wait_for(lambda: r.info("stats")["expired_subkeys"] == 3, what="field expiry")
        assert r.exists("all") == 0
        assert sorted(r.hgetall("some").items()) == [(b"b", b"2"), (b"c", b"3")]
    finally:
        s.stop()


def test_clients_are_served_with_loading_while_the_file_loads(workdir):
    s = start(server_binary(), workdir, "--rdbcompression", "no")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.execute_command("DEBUG", "POPULATE", 20000, "key", 200)
        r.save()
        expected = digest(r)
    finally:
        s.stop()
    s = Server(server_binary(), ("--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024"), workdir=workdir)
    s.start()  # PING answers (with -LOADING) as soon as the socket listens
    try:
        r = redis.Redis(host=HOST, port=s.port)
        info = r.info("persistence")
        assert info["loading"] == 1
        assert info["loading_total_bytes"] == os.path.getsize(os.path.join(workdir, "dump.rdb"))
        assert 0 <= info["loading_loaded_bytes"] <= info["loading_total_bytes"]
        # A raw socket: redis-py retries on LOADING.
        with socket.create_connection((HOST, s.port), timeout=5) as raw:
            f = raw.makefile("rb")
            for cmd in (("PING",), ("GET", "key:1"), ("SET", "x", "y"), ("DEBUG", "POPULATE", "5"), ("DEBUG", "LOG", "during load")):
                raw.sendall(f"*{len(cmd)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in cmd))
                want = b"+OK\r\n" if cmd[1:2] == ("LOG",) else b"-LOADING Redis is loading the dataset in memory\r\n"
                assert f.readline() == want, cmd
            # Settings the load depends on wait for it; others apply.
            for cmd, want in ((("CONFIG", "SET", "repl-diskless-load", "swapdb"), b"-LOADING Redis is loading the dataset in memory\r\n"),
                              (("CONFIG", "SET", "loglevel", "debug"), b"+OK\r\n")):
                raw.sendall(f"*{len(cmd)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in cmd))
                assert f.readline() == want, cmd
            f.close()
        # Clients that leave during the load are freed.
        extra = [redis.Redis(host=HOST, port=s.port) for _ in range(5)]
        for c in extra:
            c.info("server")
            c.close()
        wait_for(lambda: r.info("clients")["connected_clients"] == 1, what=f"clients freed: {r.client_list()}")
        wait_for(lambda: r.info("persistence")["loading"] == 0, timeout=30, what="the load")
        assert r.dbsize() == 20000 and digest(r) == expected
        with open(s.log_path, "rb") as f:
            log = f.read()
        assert b"Loading RDB produced by version" in log and b"RDB age" in log
        assert b"Done loading RDB, keys loaded: 20000, keys expired: 0." in log
    finally:
        s.stop()


def test_sigterm_while_loading_exits_without_saving(workdir):
    s = start(server_binary(), workdir, "--rdbcompression", "no")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.execute_command("DEBUG", "POPULATE", 20000, "key", 200)
        r.save()
    finally:
        s.stop()
    path = os.path.join(workdir, "dump.rdb")
    before = open(path, "rb").read()
    s = Server(server_binary(), ("--save", "900 1", "--key-load-delay", "200", "--loading-process-events-interval-bytes", "1024"),
               workdir=workdir)
    s.start()
    assert redis.Redis(host=HOST, port=s.port).info("persistence")["loading"] == 1
    s.proc.terminate()
    assert s.proc.wait(10) == 0
    assert open(path, "rb").read() == before


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
FAR = 4102444800000  # 2100-01-01T00:00:00Z in ms: the fixture's deadlines


def test_loads_an_rdb_written_by_redis_8(workdir):
    """An RDB (version 12) written by a Redis built from source after 7.4
    (tests/fixtures/make_redis_fixtures.py): hash field TTLs in both
    encodings, listpack sets, a stream with groups, consumers and pending
    entries; every value, key deadline and field deadline as Redis wrote it."""
    shutil.copy(os.path.join(FIXTURES, "redis8-types.rdb"), os.path.join(workdir, "dump.rdb"))
    s = start(server_binary(), workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.get("str:ttl") == b"v" and r.pexpiretime("str:ttl") == FAR
        small = "hash:fttl:small"
        assert r.hgetall(small) == {b"f1": b"v1", b"f2": b"v2", b"f3": b"3"}
        assert r.execute_command("HPEXPIRETIME", small, "FIELDS", 3, "f1", "f2", "f3") == [FAR, -1, FAR + 1234]
        assert r.object("encoding", small) == b"listpackex"
        big = "hash:fttl:big"
        assert r.hlen(big) == 600 and r.hget(big, "field-599") == b"value-599"
        fields = [f"field-{i}" for i in range(600)]
        times = r.execute_command("HPEXPIRETIME", big, "FIELDS", 600, *fields)
        assert times == [FAR + i if i % 50 == 0 else -1 for i in range(600)]
        assert r.pexpiretime(big) == FAR + 99
        # A field that was due before this load: gone for every reader.
        assert r.hgetall("hash:fttl:past") == {b"stay": b"1"}
        assert r.hgetall("hash:plain") == {b"a": b"1", b"b": b"two"}
        assert r.smembers("set:listpack") == {b"apple", b"banana", b"cherry"}
        assert r.object("encoding", "set:listpack") == b"listpack"
        assert r.smembers("set:intset") == {b"1", b"2", b"3", b"-7"}
        assert r.object("encoding", "set:intset") == b"intset"
        assert r.scard("set:big") == 300 and r.sismember("set:big", "member-299")
        assert r.zrange("zset:listpack", 0, -1, withscores=True) == [(b"c", -3.0), (b"a", 1.0), (b"b", 2.5)]
        assert r.zcard("zset:skiplist") == 200 and r.zscore("zset:skiplist", "m199") == 49.75
        assert r.lrange("list:small", 0, -1) == [b"x", b"y", b"z", b"42"]
        assert r.llen("list:big") == 1000 and r.lindex("list:big", 999) == b"element-999"
        st = "stream:groups"
        assert [e[0] for e in r.xrange(st)] == [b"1-1", b"2-1", b"4-1", b"5-1"]
        assert r.xrange(st, "4-1", "4-1") == [(b"4-1", {b"n": b"4", b"s": b"entry-4"})]
        info = r.xinfo_stream(st)
        assert (info["length"], info["last-generated-id"], info["max-deleted-entry-id"], info["entries-added"]) == (4, b"5-1", b"3-1", 5)
        groups = {g["name"]: g for g in r.xinfo_groups(st)}
        assert (groups[b"g1"]["consumers"], groups[b"g1"]["pending"], groups[b"g1"]["last-delivered-id"]) == (2, 2, b"4-1")
        assert (groups[b"g2"]["consumers"], groups[b"g2"]["pending"], groups[b"g2"]["last-delivered-id"]) == (1, 2, b"5-1")
        assert (groups[b"g1"]["entries-read"], groups[b"g1"]["lag"]) == (None, None)
        assert (groups[b"g2"]["entries-read"], groups[b"g2"]["lag"]) == (5, 0)
        pending = r.xpending_range(st, "g1", "-", "+", 10)
        assert [(p["message_id"], p["consumer"], p["times_delivered"]) for p in pending] == [(b"2-1", b"alice", 1), (b"4-1", b"bob", 1)]
        assert {c["name"]: c["pending"] for c in r.xinfo_consumers(st, "g1")} == {b"alice": 1, b"bob": 1}
        assert [p["message_id"] for p in r.xpending_range(st, "g2", "-", "+", 10)] == [b"4-1", b"5-1"]
        r.select(2)
        assert r.get("db2:key") == b"in db 2"
    finally:
        s.stop()


def test_failed_save_on_shutdown_keeps_serving_writes(workdir):
    s = start(server_binary(), workdir, "--save", "900 1")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("x", "1")
        # A directory named like the dump: the final rename fails.
        os.mkdir(os.path.join(workdir, "dump.rdb"))
        with pytest.raises(redis.ResponseError, match="^Errors trying to SHUTDOWN"):
            r.shutdown()
        with pytest.raises(redis.ResponseError):
            r.save()
        # Only a background save's failure stops writes (MISCONF).
        assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
        assert r.set("x", "2")
        assert r.ping()
        os.rmdir(os.path.join(workdir, "dump.rdb"))
        assert r.save()
    finally:
        s.stop()


def test_second_sigint_during_the_shutdown_save_exits_without_temp_file(workdir):
    s = start(server_binary(), workdir, "--save", "900 1")
    r = redis.Redis(host=HOST, port=s.port)
    r.mset({f"k{i}": i for i in range(20)})
    # 100 ms a key: the final save takes about 2 s.
    r.config_set("rdb-key-save-delay", 100_000)
    temp = os.path.join(workdir, f"temp-{s.proc.pid}.rdb")
    s.proc.send_signal(signal.SIGINT)
    wait_for(lambda: os.path.exists(temp), timeout=5, what="the shutdown's save")
    s.proc.send_signal(signal.SIGINT)
    assert s.proc.wait(5) == 1
    assert not os.path.exists(temp)
    assert not os.path.exists(os.path.join(workdir, "dump.rdb"))
    assert "You insist... exiting now." in open(s.log_path, errors="replace").read()


def test_used_memory_is_the_same_after_a_background_save(workdir):
    """The save's chunks are made by the executor and freed by the writer
    thread; used_memory counts that freeing: saves in a row leave it where
    it was (it rose by the dataset's size with each BGSAVE before)."""
    s = start(server_binary(), workdir, "--save", "")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        p = r.pipeline(transaction=False)
        for i in range(10_000):
            p.set(f"k:{i}", b"v" * 1000)
        p.execute()
        before = r.info("memory")["used_memory"]
        for _ in range(3):
            assert r.bgsave() is True
            deadline = time.monotonic() + 30
            while r.info("persistence")["rdb_bgsave_in_progress"] == 1:
                assert time.monotonic() < deadline, "save did not end"
                time.sleep(0.02)
        after = r.info("memory")["used_memory"]
        assert abs(after - before) < 64 * 1024, (before, after)
    finally:
        s.stop()
