"""Redis Sentinel managing a densekv group: Debian's redis-server in sentinel mode
monitors a densekv primary with two densekv replicas, sees the primary die and promotes
a replica; a client that asks Sentinel for the primary and writes through it loses no
write that WAIT 1 acknowledged.

Every process is started here on a free loopback port and stopped by its pid.
"""

from __future__ import annotations

import os
import shutil
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

REDIS_SERVER = shutil.which("redis-server")
GROUP = "densekv-group"

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not installed")


def wait_for(cond, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Sentinel:
    """redis-server --sentinel with a config file of its own (Sentinel rewrites it)."""

    def __init__(self, primary_port: int):
        self.dir = tempfile.mkdtemp(prefix="densekv-sentinel-")
        self.port = free_port()
        conf = os.path.join(self.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {self.port}\nbind {HOST}\ndir {self.dir}\n"
                    f"sentinel monitor {GROUP} {HOST} {primary_port} 1\n"
                    f"sentinel down-after-milliseconds {GROUP} 1000\n"
                    f"sentinel failover-timeout {GROUP} 10000\n"
                    f"sentinel parallel-syncs {GROUP} 2\n")
        self.log = open(os.path.join(self.dir, "sentinel.log"), "wb")
        self.proc = subprocess.Popen([REDIS_SERVER, conf, "--sentinel"], cwd=self.dir,
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_for(lambda: ping(self.port, timeout=0.5) is not None, what="sentinel up")
        self.client = redis.Redis(host=HOST, port=self.port, socket_timeout=5, decode_responses=True)

    def primary_port(self) -> int:
        return int(self.client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", GROUP)[1])

    def replica_ports(self) -> set[int]:
        out = set()
        for r in self.client.execute_command("SENTINEL", "REPLICAS", GROUP):
            fields = dict(zip(r[::2], r[1::2])) if isinstance(r, list) else r
            if "s_down" not in fields.get("flags", ""):
                out.add(int(fields["port"]))
        return out

    def log_tail(self) -> str:
        with open(os.path.join(self.dir, "sentinel.log"), "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Writer(threading.Thread):
    """Writes k:<i> = i through whatever Sentinel names the primary, one key at a
    time, each followed by WAIT 1; a key counts as acknowledged only when WAIT says a
    replica has it. Errors (the primary gone, a replica's READONLY) send it back to
    Sentinel and the write is retried under a new number."""

    def __init__(self, sentinel: Sentinel):
        super().__init__(daemon=True)
        self.sentinel = sentinel
        self.stop_flag = threading.Event()
        self.acked: list[int] = []
        self.failed = 0
        self.ports_seen: set[int] = set()

    def run(self) -> None:
        i, conn, port = 0, None, None
        while not self.stop_flag.is_set():
            try:
                if conn is None:
                    port = self.sentinel.primary_port()
                    conn = redis.Redis(host=HOST, port=port, socket_timeout=2,
                                       retry=Retry(NoBackoff(), 0))
                conn.set(f"k:{i}", i)
                if conn.execute_command("WAIT", 1, 1000) >= 1:
                    self.acked.append(i)
                    self.ports_seen.add(port)
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                self.failed += 1
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
            i += 1
        if conn is not None:
            conn.close()


def test_sentinel_fails_over_a_densekv_primary_without_losing_acknowledged_writes():
    servers = [Server(server_binary()).start() for _ in range(3)]
    sentinel = None
    try:
        primary, replicas = servers[0], servers[1:]
        for s in replicas:
            redis.Redis(host=HOST, port=s.port).replicaof(HOST, primary.port)
        sentinel = Sentinel(primary.port)
        # Sentinel learns the replicas from the primary's INFO (every 10 s).
        wait_for(lambda: sentinel.replica_ports() == {s.port for s in replicas}, timeout=30,
                 what="Sentinel to see both replicas")
        writer = Writer(sentinel)
        writer.start()
        wait_for(lambda: len(writer.acked) >= 200, what="writes acknowledged before the failure")
        before = len(writer.acked)
        os.kill(primary.proc.pid, signal.SIGKILL)
        primary.proc.wait()
        wait_for(lambda: sentinel.primary_port() != primary.port, timeout=30,
                 what=f"Sentinel to promote a replica\n{sentinel.log_tail()}")
        new_port = sentinel.primary_port()
        assert new_port in {s.port for s in replicas}
        wait_for(lambda: len(writer.ports_seen) == 2 and len(writer.acked) >= before + 200,
                 what="writes acknowledged through the new primary")
        writer.stop_flag.set()
        writer.join(10)

        new_primary = redis.Redis(host=HOST, port=new_port, socket_timeout=5)
        assert new_primary.execute_command("ROLE")[0] == b"master"
        keys = {int(k.split(b":")[1]) for k in new_primary.keys("k:*")}
        lost = [i for i in writer.acked if i not in keys]
        assert lost == [], f"{len(lost)} acknowledged writes lost, e.g. {lost[:10]}"
        for i in writer.acked[:: max(1, len(writer.acked) // 50)]:
            assert new_primary.get(f"k:{i}") == str(i).encode()

        # The other replica now follows the new primary and holds the same keys.
        other = next(s for s in replicas if s.port != new_port)
        oc = redis.Redis(host=HOST, port=other.port, socket_timeout=5)
        wait_for(lambda: oc.info("replication").get("master_port") == new_port
                 and oc.info("replication").get("master_link_status") == "up",
                 what="the other replica to follow the new primary")
        wait_for(lambda: oc.dbsize() == new_primary.dbsize(), what="the other replica to catch up")
        assert {int(k.split(b":")[1]) for k in oc.keys("k:*")} == keys
    finally:
        if sentinel is not None:
            sentinel.stop()
        for s in servers:
            s.cleanup()
