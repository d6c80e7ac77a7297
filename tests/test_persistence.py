"""RDB persistence: SAVE, loading at start-up, DEBUG RELOAD, bad files, and the
way in and out with a real Redis (Debian's redis-server 7.0) in the same test."""

from __future__ import annotations

import os
import shutil
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
    """Every key of `dbs` as (type, value, has TTL), comparable across servers."""
    out = {}
    for db in dbs:
        r.select(db)
        for k in r.scan_iter(count=1000):
            t = r.type(k).decode()
            if t == "string":
                v = r.get(k)
            elif t == "list":
                v = r.lrange(k, 0, -1)
            elif t == "set":
                v = sorted(r.smembers(k))
            elif t == "zset":
                v = r.zrange(k, 0, -1, withscores=True)
            elif t == "hash":
                v = sorted(r.hgetall(k).items())
            elif t == "stream":
                v = (r.xrange(k), [(g["name"], g["pending"]) for g in r.xinfo_groups(k)])
            else:
                v = None
            out[(db, k)] = (t, v, r.pttl(k) > 0)
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


def redis_server() -> str | None:
    return shutil.which("redis-server")


def start_redis(workdir: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([redis_server(), "--port", str(port), "--bind", HOST, "--save", "",
                             "--appendonly", "no", "--dir", workdir, "--daemonize", "no"],
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
