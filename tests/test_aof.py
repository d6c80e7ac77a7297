"""The append-only file: Redis 7's multi-part layout (manifest, base, incremental files),
loading at start-up (truncated tails, corrupt files, an old single-file AOF), rewrites,
CONFIG SET appendonly, redis-check-aof, a Redis 7.0 AOF directory loaded by densekv,
and durability: with appendfsync always no acknowledged write is lost to SIGKILL, with
everysec at most the last two seconds."""

from __future__ import annotations

import os
import random
import shutil
import resource
import signal
import subprocess
import tempfile
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from conftest import HOST, Server, free_port, ping, server_binary
from test_persistence import fill, snapshot

AOF_DIR = "appendonlydir"
MANIFEST = os.path.join(AOF_DIR, "appendonly.aof.manifest")


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="densekv-aof-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start(workdir: str, *extra: str) -> Server:
    return Server(server_binary(), ("--appendonly", "yes", *extra), workdir=workdir).start()


def kill(s: Server) -> None:
    """SIGKILL: no shutdown, no final save; only what the AOF holds survives."""
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait()


def manifest(workdir: str) -> list[str]:
    with open(os.path.join(workdir, MANIFEST)) as f:
        return f.read().splitlines()


def incr_path(workdir: str) -> str:
    name = [l.split()[1] for l in manifest(workdir) if l.endswith("type i")][-1]
    return os.path.join(workdir, AOF_DIR, name)


def run_server(workdir: str, *extra: str) -> subprocess.CompletedProcess:
    """Start a server that is expected to refuse to start; its exit and output."""
    return subprocess.run([server_binary(), "--port", str(free_port()), "--bind", HOST, "--save", "",
                           "--appendonly", "yes", *extra], cwd=workdir, capture_output=True, timeout=30)


def test_every_type_survives_sigkill_and_restart(workdir):
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        fill(r)
        r.incrbyfloat("float", 1.5)
        with r.pipeline(transaction=True) as p:
            p.incr("counter").incr("counter").lpush("list:small", "tx")
            p.execute()
        r.expire("str", 1000)
        r.execute_command("SETEX", "setex", 1000, "v")
        r.set("gone", "x", px=1)
        time.sleep(0.01)
        expected = snapshot(r)
        ttl = r.pttl("str")
    finally:
        kill(s)
    assert manifest(workdir) == ["file appendonly.aof.1.base.rdb seq 1 type b",
                                 "file appendonly.aof.1.incr.aof seq 1 type i"]
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert snapshot(r) == expected
        # TTLs were logged as absolute times: a restart does not stretch them.
        assert 0 < r.pttl("str") <= ttl
        assert r.exists("gone") == 0
        assert "DB loaded from append only file" in open(s.log_path).read()
    finally:
        s.stop()


def wait_rewrite(r: redis.Redis, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while r.info("persistence")["aof_rewrite_in_progress"]:
        assert time.monotonic() < deadline, "the rewrite did not end"
        time.sleep(0.02)


def test_rewrite_switches_files_and_keeps_data(workdir):
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        fill(r)
        assert r.bgrewriteaof() in (True, b"Background append only file rewriting started")
        wait_rewrite(r)
        assert manifest(workdir) == ["file appendonly.aof.2.base.rdb seq 2 type b",
                                     "file appendonly.aof.2.incr.aof seq 2 type i"]
        assert sorted(os.listdir(os.path.join(workdir, AOF_DIR))) == [
            "appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"]
        r.set("after", "rewrite")
        info = r.info("persistence")
        assert info["aof_enabled"] == 1 and info["aof_rewrites"] == 1
        assert info["aof_last_bgrewrite_status"] == "ok" and info["aof_last_write_status"] == "ok"
        assert info["aof_base_size"] > 0 and info["aof_current_size"] > info["aof_base_size"]
        # A base of commands instead of an RDB image.
        r.config_set("aof-use-rdb-preamble", "no")
        r.bgrewriteaof()
        wait_rewrite(r)  # in the background too, from a snapshot
        assert manifest(workdir)[0] == "file appendonly.aof.3.base.aof seq 3 type b"
        assert open(os.path.join(workdir, AOF_DIR, "appendonly.aof.3.base.aof"), "rb").read(2) == b"*2"
        r.set("after2", "x")
        expected = snapshot(r)
    finally:
        kill(s)
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert snapshot(r) == expected
        r.set("more", "1")
        assert r.execute_command("DEBUG", "LOADAOF") == b"OK"
        expected["more"] = None
        assert r.get("more") == b"1" and r.get("after2") == b"x"
    finally:
        s.stop()


def test_a_write_to_an_expired_key_replays_onto_a_fresh_key(workdir):
    """The AOF gets the DEL of a key a write found expired before the write
    itself, so replaying it does not add to the old key and its past
    deadline (which would lose the new value at load)."""
    s = start(workdir, "--appendfsync", "always")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        r.sadd("s", "old")
        r.pexpire("s", 1)
        time.sleep(0.01)
        r.sadd("s", "new")
        assert r.execute_command("DEBUG", "LOADAOF") == b"OK"
        assert r.smembers("s") == {b"new"}
        assert r.pttl("s") == -1
    finally:
        s.stop()


def test_nothing_expires_while_the_aof_replays(workdir):
    """As in Redis, a PEXPIREAT already past sets the deadline during the
    replay instead of deleting the key, so a later RPUSH appends to it;
    once loaded, the key is expired, elements and all."""
    write_some(workdir)
    cmds = [["RPUSH", "list", "foo"], ["PEXPIREAT", "list", "1000"], ["RPUSH", "list", "bar"],
            ["SET", "kept", "1"], ["PEXPIREAT", "kept", "1000"], ["PERSIST", "kept"]]
    with open(incr_path(workdir), "ab") as f:
        for c in cmds:
            f.write(f"*{len(c)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in c))
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.llen("list") == 0 and r.exists("list") == 0
        # Deadline set, then removed: the key lives.
        assert r.get("kept") == b"1" and r.ttl("kept") == -1
    finally:
        s.stop()


def test_config_set_appendonly_turns_it_on_and_off(workdir):
    s = Server(server_binary(), (), workdir=workdir).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("before", "1")
        assert r.info("persistence")["aof_enabled"] == 0
        r.config_set("appendonly", "yes")
        assert r.info("persistence")["aof_enabled"] == 1
        # The first rewrite runs in the background; the manifest names the
        # files once it is complete.
        wait_rewrite(r)
        assert os.path.exists(os.path.join(workdir, MANIFEST))
        r.set("during", "2")
        r.config_set("appendonly", "no")
        r.set("after", "3")
        assert r.info("persistence")["aof_enabled"] == 0
    finally:
        kill(s)
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.get("before") == b"1" and r.get("during") == b"2" and r.get("after") is None
    finally:
        s.stop()


def write_some(workdir: str, *extra: str) -> dict:
    s = start(workdir, *extra)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        for i in range(20):
            r.set(f"k{i}", i)
        return snapshot(r, dbs=(0,))
    finally:
        kill(s)


def test_truncated_tail_loads_with_aof_load_truncated_yes_only(workdir):
    expected = write_some(workdir)
    path = incr_path(workdir)
    good = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(b"*3\r\n$3\r\nSET\r\n$2\r\nzz\r\n$5\r\nhal")
    proc = run_server(workdir, "--aof-load-truncated", "no")
    assert proc.returncode == 1
    assert b"Unexpected end of file reading the append only file appendonly.aof.1.incr.aof" in proc.stdout
    s = start(workdir, "--aof-load-truncated", "yes")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert snapshot(r, dbs=(0,)) == expected
        log = open(s.log_path).read()
        assert "!!! Warning: short read while loading the AOF file appendonly.aof.1.incr.aof!!!" in log
        assert f"!!! Truncating the AOF appendonly.aof.1.incr.aof at offset {good} !!!" in log
        r.set("next", "1")
    finally:
        kill(s)
    s = start(workdir)
    try:
        assert redis.Redis(host=HOST, port=s.port).get("next") == b"1"
    finally:
        s.stop()


def test_incomplete_transaction_is_reverted(workdir):
    expected = write_some(workdir)
    with open(incr_path(workdir), "ab") as f:
        f.write(b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$2\r\nzz\r\n$1\r\n1\r\n")
    s = start(workdir)
    try:
        assert snapshot(redis.Redis(host=HOST, port=s.port), dbs=(0,)) == expected
        assert "Revert incomplete MULTI/EXEC transaction in AOF file" in open(s.log_path).read()
    finally:
        s.stop()


def test_corrupt_files_are_refused(workdir):
    write_some(workdir)
    path = incr_path(workdir)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:40] + b"garbage\r\n" + data[40:])
    proc = run_server(workdir)
    assert proc.returncode == 1
    assert b"Bad file format reading the append only file appendonly.aof.1.incr.aof" in proc.stdout
    assert b"offset" in proc.stdout
    with open(path, "wb") as f:
        f.write(data + b"*2\r\n$3\r\nBLA\r\n$1\r\nx\r\n")
    proc = run_server(workdir)
    assert proc.returncode == 1
    assert b"Unknown command 'BLA' reading the append only file appendonly.aof.1.incr.aof" in proc.stdout
    # A broken RDB base and a bad manifest.
    with open(path, "wb") as f:
        f.write(data)
    base = os.path.join(workdir, AOF_DIR, "appendonly.aof.1.base.rdb")
    b = open(base, "rb").read()
    with open(base, "wb") as f:
        f.write(b[: len(b) // 2])
    proc = run_server(workdir)
    assert proc.returncode == 1
    assert b"Error reading the RDB base file appendonly.aof.1.base.rdb, AOF loading aborted" in proc.stdout
    with open(os.path.join(workdir, MANIFEST), "w") as f:
        f.write("file x seq 1\n")
    proc = run_server(workdir)
    assert proc.returncode == 1
    assert b"Invalid AOF manifest file format" in proc.stdout


def test_old_single_file_aof_is_upgraded(workdir):
    with open(os.path.join(workdir, "appendonly.aof"), "wb") as f:
        f.write(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$3\r\nold\r\n$5\r\nstyle\r\n")
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.get("old") == b"style"
        assert manifest(workdir) == ["file appendonly.aof seq 1 type b", "file appendonly.aof.1.incr.aof seq 1 type i"]
        assert not os.path.exists(os.path.join(workdir, "appendonly.aof"))
        assert "Successfully migrated an old-style AOF file (appendonly.aof) into the AOF directory (appendonlydir)." in open(s.log_path).read()
    finally:
        s.stop()


def test_timestamps_and_redis_check_aof(workdir):
    s = start(workdir, "--aof-timestamp-enabled", "yes")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.set("a", "1")
    finally:
        kill(s)
    assert open(incr_path(workdir), "rb").read().startswith(b"#TS:")
    tool = os.path.join(workdir, "redis-check-aof")
    os.symlink(server_binary(), tool)
    out = subprocess.run([tool, os.path.join(workdir, MANIFEST)], capture_output=True, text=True)
    assert out.returncode == 0
    assert "Start checking Multi Part AOF" in out.stdout and "All AOF files and manifest are valid" in out.stdout
    with open(incr_path(workdir), "ab") as f:
        f.write(b"*2\r\n$3\r\nGET")
    out = subprocess.run([tool, os.path.join(workdir, MANIFEST)], capture_output=True, text=True)
    assert out.returncode == 1 and "is not valid. Use the --fix option to try fixing it." in out.stdout
    out = subprocess.run([tool, "--fix", os.path.join(workdir, MANIFEST)], input="y\n", capture_output=True, text=True)
    assert out.returncode == 0 and "Successfully truncated AOF" in out.stdout


# Interop: Redis 7.0 writes an AOF directory, densekv loads it.

def redis_server() -> str | None:
    return shutil.which("redis-server")


def mixed_workload(r: redis.Redis) -> None:
    fill(r)
    r.incrbyfloat("float", 2.25)
    r.spop("set:small")
    r.expire("str", 5000)
    r.set("ex", "v", ex=5000)
    r.lmove("list:small", "list:moved", "LEFT", "RIGHT")
    r.zincrby("zset:small", 3, "a")
    r.hincrby("hash:small", "n", 5)
    r.pfadd("hll", "a", "b", "c")
    r.setbit("bits", 100, 1)
    r.xadd("stream", {"c": 3}, id="3-1")
    r.xack("stream", "g", "1-1")
    r.xgroup_create("stream", "g2", id="$")
    with r.pipeline(transaction=True) as p:
        p.incr("tx").rpush("list:small", "t").sadd("set:int", 99)
        p.execute()
    r.eval("redis.call('set', KEYS[1], ARGV[1]); redis.call('incr', KEYS[2])", 2, "lua", "n", "v")
    r.delete("long")
    r.select(5)
    r.set("db5", "five")
    r.select(0)


@pytest.mark.skipif(redis_server() is None, reason="redis-server not installed")
@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_redis_70_aof_loads_in_densekv(workdir, preamble):
    port = free_port()
    proc = subprocess.Popen([redis_server(), "--port", str(port), "--bind", HOST, "--save", "", "--dir", workdir,
                             "--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", preamble,
                             "--daemonize", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while ping(port, timeout=0.5) is None:
            assert time.monotonic() < deadline and proc.poll() is None, "redis-server did not start"
            time.sleep(0.05)
        r = redis.Redis(host=HOST, port=port)
        mixed_workload(r)
        # Half before a rewrite (into the base), half after (the incr file).
        r.bgrewriteaof()
        deadline = time.monotonic() + 20
        while r.info("persistence")["aof_rewrite_in_progress"] or r.info("persistence")["aof_rewrite_scheduled"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.2)
        r.rpush("list:after", "x")
        r.hset("hash:small", "after", "rewrite")
        expected = snapshot(r, dbs=(0, 3, 5))
        ttls = {k: r.pttl(k) for k in (b"str", b"ex", b"ttl")}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert snapshot(r, dbs=(0, 3, 5)) == expected
        for k, t in ttls.items():
            assert 0 < r.pttl(k) <= t
    finally:
        s.stop()


# Durability.

def writer(port: int, acked: list, stop: threading.Event, prefix: str) -> None:
    try:
        # No retries: a retried SET after the kill would reconnect with backoff.
        r = redis.Redis(host=HOST, port=port, socket_timeout=5, retry=Retry(NoBackoff(), 0))
        i = 0
        while not stop.is_set():
            r.set(f"{prefix}:{i}", i)
            acked.append((f"{prefix}:{i}", time.monotonic()))
            i += 1
    except (redis.ConnectionError, redis.TimeoutError, ConnectionResetError):
        pass


def kill_while_writing(workdir: str, seconds: float, *extra: str) -> tuple[list, float]:
    s = start(workdir, *extra)
    acked: list = []
    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(s.port, acked, stop, f"w{n}:{s.port}")) for n in range(2)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    killed_at = time.monotonic()
    kill(s)
    stop.set()
    for t in threads:
        t.join()
    return acked, killed_at


def absent(r: redis.Redis, keys: list) -> list:
    """The keys of `keys` that do not exist, asked in batches."""
    out = []
    for i in range(0, len(keys), 1000):
        batch = keys[i:i + 1000]
        out.extend(k for k, v in zip(batch, r.mget(batch)) if v is None)
    return out


def test_appendfsync_always_loses_no_acknowledged_write(workdir):
    rng = random.Random(7)
    everything: list = []
    for _ in range(20):
        acked, _ = kill_while_writing(workdir, rng.uniform(0.02, 0.25), "--appendfsync", "always")
        everything.extend(k for k, _ in acked)
    assert len(everything) > 100
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert absent(r, everything) == []
    finally:
        s.stop()


@pytest.mark.parametrize("setting", ["no", "yes"])
def test_no_appendfsync_on_rewrite_holds_fsyncs_while_a_save_runs(workdir, setting):
    """no-appendfsync-on-rewrite yes: while a background save writes its
    file, the AOF is written but not fsynced (WAITAOF counts no local
    fsync), and the fsync comes once the save ends; with no, appendfsync
    always fsyncs every write as before."""
    s = start(workdir, "--appendfsync", "always", "--no-appendfsync-on-rewrite", setting)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.config_get("no-appendfsync-on-rewrite") == {"no-appendfsync-on-rewrite": setting}
        for i in range(20):
            r.set(f"k{i}", i)
        r.config_set("rdb-key-save-delay", 100_000)
        r.bgsave()
        r.set("during", "save")
        local = r.execute_command("WAITAOF", 1, 0, 300)[0]
        assert r.info("persistence")["rdb_bgsave_in_progress"] == 1
        assert local == (0 if setting == "yes" else 1)
        r.config_set("rdb-key-save-delay", 0)
        wait_for_save = time.monotonic() + 20
        while r.info("persistence")["rdb_bgsave_in_progress"]:
            assert time.monotonic() < wait_for_save, "the save did not end"
            time.sleep(0.02)
        assert r.execute_command("WAITAOF", 1, 0, 5000)[0] == 1
    finally:
        s.stop()


class LimitedServer(Server):
    """A server whose files may not grow past `limit` bytes (RLIMIT_FSIZE;
    SIGXFSZ ignored, so a write past it fails with EFBIG): a disk that
    fills up, for this process only. `unlimit()` lifts it while it runs."""

    def __init__(self, limit: int, *args, **kw):
        super().__init__(*args, **kw)

        def limited():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        self.preexec_fn = limited

    def unlimit(self) -> None:
        resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def fill_until_refused(r: redis.Redis) -> tuple[int, str]:
    """Writes 1 KB values until one is refused; returns how many went in
    and the error."""
    for i in range(10_000):
        try:
            r.set(f"k{i}", "x" * 1000)
        except redis.ResponseError as e:
            return i, str(e)
        time.sleep(0.001)
    raise AssertionError("no write was refused")


def test_writes_are_refused_while_the_aof_cannot_be_written(workdir):
    """appendfsync everysec: once a write to the AOF fails (here the file
    may not grow), writes get Redis's MISCONF error and reads go on; when
    the disk takes the bytes again, the kept bytes are written (a partial
    write cut off first) and writes are accepted. The file then replays
    to exactly the acknowledged writes."""
    s = LimitedServer(64 * 1024, server_binary(), ("--appendonly", "yes", "--appendfsync", "everysec"), workdir=workdir)
    s.start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        n, error = fill_until_refused(r)
        assert error == "MISCONF Errors writing to the AOF file: File too large"
        assert n > 10
        assert r.get("k0") == b"x" * 1000
        with pytest.raises(redis.ResponseError, match="MISCONF"):
            r.ping()  # refused as Redis refuses it: a health check sees the disk error
        assert r.info("persistence")["aof_last_write_status"] == "err"
        with pytest.raises(redis.ResponseError, match="MISCONF"):
            r.set("again", "1")
        s.unlimit()
        deadline = time.monotonic() + 10
        while r.info("persistence")["aof_last_write_status"] != "ok":
            assert time.monotonic() < deadline, "the write was not retried"
            time.sleep(0.05)
        r.set("after", "1")
        expected = {f"k{i}".encode() for i in range(n)} | {b"after"}
        assert set(r.keys("*")) == expected
        log = open(s.log_path).read()
        assert log.count("Error writing to the AOF file: File too large") == 1, "rate limited"
        assert "AOF write error looks solved" in log
    finally:
        s.stop()
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert set(r.keys("*")) == expected
        assert r.get(f"k{n - 1}") == b"x" * 1000
    finally:
        s.stop()


@pytest.mark.parametrize("ignore", ["no", "yes"])
def test_a_replica_that_cannot_write_its_aof(workdir, ignore):
    """A replica whose AOF write failed stops on its primary's next write
    (replica-ignore-disk-write-errors no, Redis's default) rather than
    fall behind it, or with yes applies it and logs that it did."""
    primary = Server(server_binary(), (), workdir=tempfile.mkdtemp(prefix="densekv-aof-")).start()
    replica = LimitedServer(64 * 1024, server_binary(),
                            ("--appendonly", "yes", "--replica-ignore-disk-write-errors", ignore), workdir=workdir)
    replica.start()
    try:
        pr, rr = redis.Redis(host=HOST, port=primary.port), redis.Redis(host=HOST, port=replica.port)
        rr.replicaof(HOST, primary.port)
        deadline = time.monotonic() + 15
        while rr.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "no sync"
            time.sleep(0.05)
        for i in range(200):
            pr.set(f"k{i}", "x" * 1000)
            if not replica.alive():
                break
            time.sleep(0.002)
        pr.set("last", "1")
        time.sleep(0.5)
        log = open(replica.log_path).read()
        assert "Error writing to the AOF file: File too large" in log
        if ignore == "no":
            assert not replica.alive()
            assert "Guru Meditation: Replica was unable to write command to disk." in log
        else:
            assert replica.alive() and rr.get("last") == b"1" and rr.dbsize() == 201
            assert log.count("Replica is applying a command even though it is unable to write to disk.") == 1
    finally:
        replica.stop()
        primary.cleanup()


def test_appendfsync_everysec_loses_at_most_two_seconds(workdir):
    acked, killed_at = kill_while_writing(workdir, 2.5, "--appendfsync", "everysec")
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        when = dict(acked)
        lost = [(k, when[k]) for k in absent(r, [k for k, _ in acked])]
        assert all(killed_at - t <= 2.0 for _, t in lost), lost[:3]
    finally:
        s.stop()


def test_background_rewrite_keeps_writes_made_while_it_runs(workdir):
    """The base is the image at BGREWRITEAOF; writes after it go to the new
    incremental file, which the manifest lists from the start, so neither a
    SIGKILL mid-rewrite nor the switch at its end loses one. While it runs,
    BGSAVE is refused (or scheduled) and a second rewrite refused."""
    s = start(workdir, "--rdb-key-save-delay", "1000")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.mset({f"k{i}": i for i in range(5000)})
        assert r.bgrewriteaof()
        info = r.info("persistence")
        assert info["aof_rewrite_in_progress"] == 1 and info["rdb_bgsave_in_progress"] == 0
        assert manifest(workdir) == ["file appendonly.aof.1.base.rdb seq 1 type b",
                                     "file appendonly.aof.1.incr.aof seq 1 type i",
                                     "file appendonly.aof.2.incr.aof seq 2 type i"]
        with pytest.raises(redis.ResponseError, match="^Background append only file rewriting already in progress$"):
            r.bgrewriteaof()
        with pytest.raises(redis.ResponseError, match="^Another child process is active"):
            r.execute_command("BGSAVE")
        assert r.execute_command("BGSAVE", "SCHEDULE") in (True, b"Background saving scheduled")
        r.set("during", "rewrite")
        r.delete("k0")
        r.incr("k1")
        digest = r.execute_command("DEBUG", "DIGEST")
        assert r.info("persistence")["aof_rewrite_in_progress"] == 1, "the kill must land mid-rewrite"
    finally:
        kill(s)
    # Killed mid-rewrite: the old base and both incremental files hold it all.
    left = set(os.listdir(os.path.join(workdir, AOF_DIR)))
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.execute_command("DEBUG", "DIGEST") == digest
        assert r.get("during") == b"rewrite" and r.get("k0") is None and r.get("k1") == b"2"
        assert r.bgrewriteaof()
        r.set("during2", "x")
        wait_rewrite(r)
        assert r.info("persistence")["aof_rewrites"] == 1
        m = manifest(workdir)
        assert len(m) == 2 and m[0].endswith("type b") and m[1].endswith("type i"), m
        # The rewrite leaves no temp file of its own (the killed server's stays, as Redis's would).
        assert not [f for f in set(os.listdir(os.path.join(workdir, AOF_DIR))) - left if f.startswith("temp-")]
        digest = r.execute_command("DEBUG", "DIGEST")
    finally:
        kill(s)
    s = start(workdir)
    try:
        assert redis.Redis(host=HOST, port=s.port).execute_command("DEBUG", "DIGEST") == digest
    finally:
        s.stop()


def test_scheduled_bgsave_runs_after_the_rewrite(workdir):
    s = start(workdir, "--rdb-key-save-delay", "100")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.mset({f"k{i}": i for i in range(3000)})
        r.bgrewriteaof()
        assert r.execute_command("BGSAVE", "SCHEDULE") in (True, b"Background saving scheduled")
        r.config_set("rdb-key-save-delay", "0")
        wait_rewrite(r)
        deadline = time.monotonic() + 10
        while r.info("persistence")["rdb_saves"] < 1:
            assert time.monotonic() < deadline, "the scheduled BGSAVE did not run"
            time.sleep(0.05)
        assert os.path.exists(os.path.join(workdir, "dump.rdb"))
    finally:
        s.stop()


def aof_commands(path: str) -> list[list[str]]:
    """The commands an AOF file of commands holds, each as a list of words
    (binary ones, such as RESTORE payloads, decoded with replacements);
    `#TS:` annotation lines are skipped."""
    data = open(path, "rb").read()
    out, i = [], 0
    while i < len(data):
        if data[i:i + 1] == b"#":
            i = data.index(b"\r\n", i) + 2
            continue
        assert data[i:i + 1] == b"*", data[i:i + 20]
        end = data.index(b"\r\n", i)
        n, i = int(data[i + 1:end]), end + 2
        words = []
        for _ in range(n):
            end = data.index(b"\r\n", i)
            ln = int(data[i + 1:end])
            words.append(data[end + 2:end + 2 + ln].decode(errors="replace"))
            i = end + 2 + ln + 2
        out.append(words)
    return out


def test_hash_field_ttls_are_replayed_as_absolute_and_expiry_as_hdel(workdir):
    s = start(workdir, "--appendfsync", "always")
    try:
        r = redis.Redis(host=s.host, port=s.port)
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        r.hset("h", mapping={"f1": "v1", "f2": "v2", "f3": "v3"})
        before = int(time.time() * 1000)
        # f3 has no TTL, so NX sets f1 and f2; "nope" does not exist.
        assert r.execute_command("HEXPIRE", "h", 100, "NX", "FIELDS", 3, "f1", "f2", "nope") == [1, 1, -2]
        # Nothing changes (NX fails for both): nothing is replayed.
        assert r.execute_command("HPEXPIRE", "h", 5000, "NX", "FIELDS", 2, "f1", "f2") == [0, 0]
        # A time in the past deletes the fields: replayed as HDELs only.
        r.hset("g", mapping={"a": "1", "b": "2"})
        assert r.execute_command("HEXPIREAT", "g", 1, "FIELDS", 2, "a", "b") == [2, 2]
        # Lazy expiry of a field a command names is replayed as HDEL.
        r.execute_command("HPEXPIRE", "h", 1, "FIELDS", 1, "f3")
        time.sleep(0.01)
        assert r.hget("h", "f3") is None
        # Active expiry too, one HDEL per field.
        r.hset("k", mapping={"x": "1", "y": "2"})
        r.execute_command("HPEXPIRE", "k", 1, "FIELDS", 2, "x", "y")
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        deadline = time.time() + 5
        while r.exists("k") and time.time() < deadline:
            time.sleep(0.05)
        assert not r.exists("k")
        cmds = [c for c in aof_commands(incr_path(workdir)) if c[0].upper() not in ("SELECT", "DEBUG")]
        names = [" ".join(c if c[0] != "HPEXPIREAT" else c[:2] + ["T"] + c[3:]) for c in cmds]
        assert names == [
            "HSET h f1 v1 f2 v2 f3 v3",
            "HPEXPIREAT h T NX FIELDS 2 f1 f2",
            "HSET g a 1 b 2",
            "MULTI", "HDEL g a", "HDEL g b", "EXEC",
            "HPEXPIREAT h T FIELDS 1 f3",
            "HDEL h f3",
            "HSET k x 1 y 2",
            "HPEXPIREAT k T FIELDS 2 x y",
            "HDEL k x", "HDEL k y",
        ]
        at = int(cmds[1][2])
        assert before + 100_000 <= at <= int(time.time() * 1000) + 100_000
        # The replay rebuilds the same absolute deadlines.
        ttl = r.execute_command("HPEXPIRETIME", "h", "FIELDS", 2, "f1", "f2")
        r.execute_command("DEBUG", "LOADAOF")
        assert r.execute_command("HPEXPIRETIME", "h", "FIELDS", 2, "f1", "f2") == ttl == [at, at]
        assert r.hgetall("g") == {}
    finally:
        s.cleanup()


def test_turning_aof_off_ends_a_running_rewrite(workdir):
    s = start(workdir)
    try:
        r = redis.Redis(host=s.host, port=s.port)
        r.set("k", "v")
        r.config_set("rdb-key-save-delay", 10_000_000)
        assert r.bgrewriteaof() in (True, b"Background append only file rewriting started")
        assert r.info("persistence")["aof_rewrite_in_progress"] == 1
        with pytest.raises(redis.ResponseError, match="already in progress"):
            r.bgrewriteaof()
        before = manifest(workdir)
        r.config_set("appendonly", "no")
        info = r.info("persistence")
        assert info["aof_rewrite_in_progress"] == 0 and info["aof_enabled"] == 0
        assert "Killing running AOF rewrite child" in open(s.log_path, errors="replace").read()
        # The base it was writing is gone; the manifest still holds the data.
        assert manifest(workdir) == before
        names = os.listdir(os.path.join(workdir, AOF_DIR))
        assert [n for n in names if "base" in n] == [l.split()[1] for l in before if l.endswith("type b")]
        r.config_set("rdb-key-save-delay", 0)
        assert r.get("k") == b"v"
    finally:
        s.cleanup()


def test_debug_aof_flush_sleep_delays_writes_not_their_order(workdir):
    s = start(workdir, "--appendfsync", "always")
    try:
        r = redis.Redis(host=s.host, port=s.port)
        r.set("warm", "1")
        r.execute_command("DEBUG", "AOF-FLUSH-SLEEP", 200_000)
        size = os.path.getsize(incr_path(workdir))
        t0 = time.monotonic()
        assert r.incr("n") == 1
        # The reply waited for the write, which waited for the sleep.
        assert time.monotonic() - t0 >= 0.2
        assert os.path.getsize(incr_path(workdir)) > size
        # Reads write nothing, so they do not wait.
        t0 = time.monotonic()
        assert r.get("n") == b"1"
        assert time.monotonic() - t0 < 0.15
        r.execute_command("DEBUG", "AOF-FLUSH-SLEEP", 0)
    finally:
        s.cleanup()


def test_clients_are_served_while_the_aof_loads(workdir):
    s = start(workdir, "--aof-use-rdb-preamble", "no")
    r = redis.Redis(host=s.host, port=s.port)
    pipe = r.pipeline(transaction=False)
    for i in range(3000):
        pipe.set(f"k{i}", i)
    pipe.execute()
    s.stop()
    s = Server(server_binary(), ("--appendonly", "yes", "--key-load-delay", "500", "--loading-process-events-interval-bytes", "1024"), workdir=workdir)
    s.start()
    try:
        r = redis.Redis(host=s.host, port=s.port, retry=Retry(NoBackoff(), 0))
        assert r.info("persistence")["loading"] == 1
        with pytest.raises(redis.exceptions.BusyLoadingError):
            r.get("k1")
        # Turning the AOF off while it loads: it stays off once loaded.
        r.config_set("appendonly", "no")
        r.config_set("key-load-delay", 0)
        deadline = time.time() + 20
        while r.info("persistence")["loading"] == 1 and time.time() < deadline:
            time.sleep(0.05)
        assert r.dbsize() == 3000
        assert r.info("persistence")["aof_enabled"] == 0
    finally:
        s.cleanup()


def test_debug_loadaof_with_a_slow_script_answers_loading(workdir):
    s = start(workdir, "--aof-use-rdb-preamble", "no", "--busy-reply-threshold", "10")
    try:
        r = redis.Redis(host=s.host, port=s.port, retry=Retry(NoBackoff(), 0))
        # A script in the AOF as itself (as Redis 6 and older wrote them):
        # replayed, it runs again, slowly.
        script = "redis.call('set', KEYS[1], 'y') for i = 1, 3000000 do redis.call('ping') end return 1"
        with open(incr_path(workdir), "ab") as f:
            for cmd in (["SELECT", "0"], ["EVAL", script, "1", "x"]):
                f.write(f"*{len(cmd)}\r\n".encode() + b"".join(f"${len(w)}\r\n{w}\r\n".encode() for w in cmd))
        # The load runs the script for seconds on a busy machine: the loader
        # waits for it (redis-py's default timeout would resend DEBUG LOADAOF,
        # which then meets the running script's -BUSY).
        loader = redis.Redis(host=s.host, port=s.port, socket_timeout=120, retry=Retry(NoBackoff(), 0))
        done = []
        t = threading.Thread(target=lambda: done.append(loader.execute_command("DEBUG", "LOADAOF")))
        t.start()
        try:
            deadline = time.time() + 10
            while time.time() < deadline:
                try:
                    r.ping()
                except redis.exceptions.BusyLoadingError:
                    break
                time.sleep(0.01)
            else:
                pytest.fail("no -LOADING while the AOF's script ran")
        finally:
            t.join(30)
        assert done == [b"OK"]
        assert r.get("x") == b"y"
        assert "Slow script detected: still in execution after" in open(s.log_path, errors="replace").read()
    finally:
        s.cleanup()


def test_bgrewriteaof_with_the_aof_off_writes_a_base_in_the_background(workdir):
    """With appendonly no, BGREWRITEAOF still writes a base (as Redis does),
    from a snapshot while clients are served: the image at the command,
    named alone by the manifest once complete; a server started with the
    AOF on then loads it. Turning the AOF on mid-rewrite restarts it."""
    s = Server(server_binary(), ("--appendonly", "no", "--rdb-key-save-delay", "200"), workdir=workdir).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.mset({f"k{i}": i for i in range(3000)})
        assert r.bgrewriteaof()
        assert r.info("persistence")["aof_rewrite_in_progress"] == 1
        r.set("after", "later")
        r.delete("k0")
        assert r.ping(), "served while the base is written"
        wait_rewrite(r)
        assert manifest(workdir) == ["file appendonly.aof.1.base.rdb seq 1 type b"]
        assert r.info("persistence")["aof_rewrites"] == 1
        # Turned on mid-rewrite: that rewrite stops, one with an incremental file runs.
        assert r.bgrewriteaof()
        r.config_set("appendonly", "yes")
        wait_rewrite(r)
        m = manifest(workdir)
        assert len(m) == 2 and m[0].endswith("type b") and m[1].endswith("type i"), m
    finally:
        s.stop()
    s = Server(server_binary(), ("--appendonly", "yes"), workdir=workdir).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.dbsize() == 3000 and r.get("after") == b"later" and r.get("k0") is None
    finally:
        s.stop()


def test_a_base_of_commands_is_written_in_the_background_too(workdir):
    """aof-use-rdb-preamble no: the base is RESTORE commands (after SELECT
    and FUNCTION LOAD), written from a snapshot while clients are served,
    not on the executor in one go; keys keep absolute TTLs, keys already
    expired are left out, and what was written during it is replayed
    from the new incremental file."""
    s = start(workdir, "--aof-use-rdb-preamble", "no", "--aof-timestamp-enabled", "yes")
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.function_load("#!lua name=lib\nredis.register_function('f', function() return 7 end)")
        r.mset({f"k{i}": i for i in range(2000)})
        r.set("ttl", "v", px=60_000)
        r.hset("h", mapping={"a": "1", "b": "2"})
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        r.set("gone", "x", px=1)
        time.sleep(0.01)
        r.config_set("rdb-key-save-delay", 200)
        assert r.bgrewriteaof()
        assert r.info("persistence")["aof_rewrite_in_progress"] == 1
        r.set("during", "the rewrite")
        r.delete("k1")
        assert r.ping(), "served while the base is written"
        r.config_set("rdb-key-save-delay", 0)
        wait_rewrite(r)
        assert r.info("persistence")["aof_last_bgrewrite_status"] == "ok"
        base = [l for l in manifest(workdir) if l.endswith("type b")][0].split()[1]
        assert base.endswith(".base.aof"), base
        cmds = aof_commands(os.path.join(workdir, AOF_DIR, base))
        assert cmds[0][:2] == ["FUNCTION", "LOAD"] and cmds[1] == ["SELECT", "0"], cmds[:2]
        restored = {c[1]: c for c in cmds if c[0] == "RESTORE"}
        assert "gone" not in restored and "during" not in restored and "k1" in restored
        assert restored["ttl"][4:] == ["REPLACE", "ABSTTL"] and int(restored["ttl"][2]) > time.time() * 1000
        assert restored["k2"][2:3] == ["0"] and restored["k2"][4:] == ["REPLACE"]
        assert open(os.path.join(workdir, AOF_DIR, base), "rb").read(4) == b"#TS:"
        pttl = r.pttl("ttl")
    finally:
        kill(s)
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.dbsize() == 2002 and r.get("k1") is None and r.get("during") == b"the rewrite"
        assert r.hgetall("h") == {b"a": b"1", b"b": b"2"} and 0 < r.pttl("ttl") <= pttl
        assert r.fcall("f", 0) == 7
    finally:
        s.stop()


def test_appendonly_yes_at_run_time_rewrites_in_the_background(workdir):
    """As Redis's AOF_WAIT_REWRITE: the first rewrite is a background one;
    writes meanwhile go to a temporary incremental file that becomes the
    first incremental file when the base is complete."""
    s = Server(server_binary(), (), workdir=workdir).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        for i in range(3):
            r.set(f"k{i}", i)
        r.config_set("rdb-key-save-delay", 300_000)
        assert r.config_set("appendonly", "yes")
        info = r.info("persistence")
        assert info["aof_enabled"] == 1 and info["aof_rewrite_in_progress"] == 1
        temp = os.path.join(workdir, AOF_DIR, "temp-appendonly.aof.incr")
        assert os.path.exists(temp)
        assert not os.path.exists(os.path.join(workdir, MANIFEST))
        r.set("during", "the rewrite")
        with open(temp, "rb") as f:
            assert b"during" in f.read()
        wait_rewrite(r)
        assert manifest(workdir) == ["file appendonly.aof.1.base.rdb seq 1 type b",
                                     "file appendonly.aof.1.incr.aof seq 1 type i"]
        assert not os.path.exists(temp)
        log = open(s.log_path, errors="replace").read()
        assert "Creating AOF incr file temp-appendonly.aof.incr on background rewrite" in log
        assert "Successfully renamed the temporary AOF incr file temp-appendonly.aof.incr into appendonly.aof.1.incr.aof" in log
        r.set("after", "it")
    finally:
        kill(s)
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert [r.get(f"k{i}") for i in range(3)] == [b"0", b"1", b"2"]
        assert r.get("during") == b"the rewrite" and r.get("after") == b"it"
    finally:
        s.stop()


def test_shutdown_is_refused_while_the_first_aof_rewrite_runs(workdir):
    """No file holds the data set until that rewrite completes: SIGTERM and
    SHUTDOWN fail (FORCE goes ahead), as in Redis."""
    s = Server(server_binary(), (), workdir=workdir).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        for i in range(10):
            r.set(f"k{i}", i)
        r.config_set("rdb-key-save-delay", 1_000_000)
        r.config_set("appendonly", "yes")
        assert r.info("persistence")["aof_rewrite_in_progress"] == 1
        s.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while "Writing initial AOF, can't exit." not in open(s.log_path, errors="replace").read():
            assert time.monotonic() < deadline, "no refusal logged"
            time.sleep(0.05)
        assert r.ping()
        with pytest.raises(redis.ResponseError, match="Errors trying to SHUTDOWN. Check logs."):
            r.shutdown()
        assert r.ping()
        try:
            r.shutdown(nosave=True, force=True)
        except redis.ConnectionError:
            pass
        s.proc.wait(timeout=10)
        assert s.proc.returncode == 0
        assert "Writing initial AOF. Exit anyway." in open(s.log_path, errors="replace").read()
    finally:
        s.cleanup()


def test_an_error_while_loading_is_logged_and_counted(workdir):
    """A command of the file that fails (here INCR of a non-number) is
    logged as Redis logs it and counted in unexpected_error_replies."""
    with open(os.path.join(workdir, "appendonly.aof"), "wb") as f:
        f.write(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nabc\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n"
                b"*3\r\n$3\r\nSET\r\n$1\r\nj\r\n$1\r\n1\r\n")
    s = start(workdir)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.get("k") == b"abc" and r.get("j") == b"1"
        assert r.info("stats")["unexpected_error_replies"] == 1
        assert ("== CRITICAL == This server is sending an error to its AOF-loading-client: "
                "'ERR value is not an integer or out of range' after processing the command 'incr'") in open(s.log_path).read()
        r.config_resetstat()
        assert r.info("stats")["unexpected_error_replies"] == 0
    finally:
        s.stop()
