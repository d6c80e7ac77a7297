#!/usr/bin/env python3
"""Side-by-side benchmarks: densekv against Debian's redis-server, both started by this
script on free loopback ports in the same run and stopped by their PIDs at the end.

  bench/compare.py memory     [--workload sessions|intkeys|all] [-n N]
  bench/compare.py compression [-n N] [--records N] [--events N] [--cases sessions,hashsessions,intkeys,iso639,ec2shapes,events]
  bench/compare.py compression-cpu [-n N] [--rounds R] [--case sessions|ec2shapes]
  bench/compare.py compression-load [-n N] [--rounds R]
  bench/compare.py throughput [-n N] [--pipeline 1,16] [--clients 50] [--rounds R]
  bench/compare.py cpu        [-n N] [--pipeline 16] [--tests set,get,...] [--rounds R] [--pin]
  bench/compare.py floor      [-n N] [--pipeline 1] [--tests set,get] [--modes epoll,uring-defer,uring] [--rounds R]
  bench/compare.py instructions [-n N] [--pipeline 16] [--tests set,get,...] [--rounds R]
  bench/compare.py latency    [-n N] [--probe get|ping]
  bench/compare.py hash       [--sizes 100,511,...] [--no-ttl]
  bench/compare.py hash-expiry [-n N] [--ttl-ms 3000] [--rounds 3]
  bench/compare.py bgsave-memory [--keys 4000000] [--rounds R]
  bench/compare.py rdb        [-n N] [--rounds R]
  bench/compare.py save-throughput [--during bgsave|bgrewriteaof] [--keys 2000000] [--pipeline 16,1] [--rounds R]
  bench/compare.py cache      [--keys 2000000] [--maxmemory 64mb] [--zipf 1.0] [--workers 3] [--seconds 20]
  bench/compare.py tls        [-n N] [--pipeline 1,16] [--clients 50] [--rounds R]
  bench/compare.py io-threads [-n N] [--threads 1,2] [--pipeline 1,16] [--tests get,set] [--rounds R] [--tls] [--bench-threads B] [--plot PNG]
  bench/compare.py aggregate  [--keys 10000] [--days 365] [--inputs 5000] [--rounds 5]
  bench/compare.py seeds      [--cases partitioned,uuid16,chars24] [--sizes 100,1000,...]
  bench/compare.py repl       [-n N] [--pipeline 16,1] [--rounds 3]
  bench/compare.py member-ttl [-n N] [--ttl-ms 3000] [--rounds 3]

memory      bytes per key (INFO used_memory delta / N, INFO used_memory_rss and
            /proc/PID/status VmRSS deltas / N) after loading a workload:
              sessions  SETEX session:<40 hex> 2592000 <46-byte JSON>   (N=1,000,000)
              intkeys   SET key:<n> <n>                                  (N=1,000,000)
throughput  redis-benchmark -t set,get,incr,mset -c 50 -n 2000000 -r 1000000 -P {1,16},
            alternating between the servers; requests/s and the ratio densekv/redis
instructions  the server's user-space instructions per request under callgrind
            (valgrind), redis-benchmark -P 16 over -r 100,000: an A/B of two builds that
            a busy machine does not move (runs agree within a few percent), for few-percent questions
cpu         the server's main-thread CPU per request (/proc) under redis-benchmark -P 16,
            alternating servers: an A/B of two builds (old binary as --redis-bin) that
            a shared machine's noise does not swamp, as it does requests/s
floor       the same CPU figure at -P 1 for densekv, Redis and bench/syscall_floor, a server
            that answers GET/SET from a hash map and does nothing else, on epoll (the calls
            densekv and Redis make) and on io_uring: the least any server can cost there
latency     a separate process loads N=10,000,000 `SET key:<n> <n>` pipelined while this
            process sends one GET (or PING) at a time and records each round trip;
            reports p50/p99/p99.9/max for each server
hash        used_memory delta per field: HASHes of N random 24-char fields with value "1"
            (N in 100,511,512,513,1000,10000,50000,1000000; 200,000/N hashes side by
            side when N is small, so that used_memory's noise stays small); one HASH of 1,000,000 fields
            (8-byte field, value "x"); 1,000,000 HASHes of one field each (11-byte key,
            field "name", value "1"). Then the same workloads with HPEXPIRE on every
            field, on each server that has HPEXPIRE (Redis 7.4+; Debian's 7.0 has none).
hash-expiry N=1,000,000 fields get a 3 s TTL in one hash (each server with HPEXPIRE); a second
            connection polls HLEN every 100 ms (HLEN does not touch fields) and reports
            how long after the last deadline it reaches 0, while a pipelined writer fills
            another hash; the writer's throughput around the deadline is compared with
            the same run without TTLs
bgsave-memory  loads --keys `SET key:<12 digits> <100 bytes>`, then BGSAVE while
            redis-benchmark -t set -d 100 -r <keys> overwrites random keys; PSS
            (/proc/PID/smaps_rollup) of the server plus any child it forked, sampled every
            50 ms until the save ends: steady, peak and peak/steady for each server
            (a forking save's copy-on-write shows here)
rdb         N=10,000,000 keys, half `SET k:<n> <20 bytes>`, half `HSET h:<n> f1 v1 f2 v2 f3 v3`:
            SAVE time, file size, BGSAVE time (start to rdb_bgsave_in_progress:0), and the
            load on a restart (spawn to the first PING answered; the log's
            `DB loaded from disk` too); densekv, redis and the ratio
save-throughput  redis-benchmark SET (-d 100, -c 50, -P 16 and 1, -r over --keys loaded
            keys) without a save, then with --during bgsave (or bgrewriteaof) started again
            as soon as the last ends; SET/s with/without, redis-benchmark's max latency and
            a 1-per-ms SET probe's longest round trip. A server without the command
            (unknown command) is reported and skipped
cache       a cache under eviction: both servers with the same maxmemory and allkeys-lru;
            --workers client processes (bench/cache_driver.c, compiled with cc on the
            spot), one connection each, pipelining 200 commands: 90% GET
            of a Zipf(s)-distributed key id over --keys ids, 10% SET, and a SET of every
            key a GET missed (100-byte values). After a warm-up that fills memory
            (evicted_keys > 0, then --warmup seconds), --seconds of measurement: hit
            ratio, keys held, evicted keys, commands/s, and the server's main-thread
            CPU share over the window (near 1.0: the server, not the client, is the
            bottleneck) and its CPU per command; the servers run one after the other
io-threads  both servers started with each --io-threads value (and io-threads-do-reads
            yes, which Redis 7.0 needs to read on its threads); redis-benchmark -c 50 per
            test and pipeline depth, alternating servers: the executor thread's CPU per
            request (the main thread, /proc/PID/task/PID/stat: commands run there in both),
            the whole process's CPU per request, requests/s, and each value's executor CPU
            against io-threads 1 of the same server. --tls runs over a TLS port instead
tls         a throwaway CA and server certificate made with the openssl command; both
            servers get --tls-port (a free loopback port) with tls-auth-clients no, and
            keep a plaintext port only to be seen ready; redis-benchmark --tls --cacert
            -t get,set -c 50 -P {1,16} against the TLS port; requests/s and densekv/redis
aggregate   seed 003's time series: --keys ZSETs `agg:<i>` of --days (day, count) members
            (member the day number since 1970, score a random count 1..1000); used_memory delta per
            member; then ZUNIONSTORE and ZINTERSTORE of the same random --inputs keys with
            AGGREGATE SUM on both servers, alternating, --rounds times: median ms and ratio;
            and the longest round trip a concurrent 1-per-ms PING probe sees during them
seeds       used_memory delta per entry of the seeds' layouts: seed 002's iteration 4
            (1,000,000 sessions as HSET session:data:<4 hex> <18 bytes> <15-byte msgpack>
            plus ZADD session:expiry:<4 hex> <expiry> <18 bytes>, 65,536 partitions),
            seed 001 (one SET of 1,000,000 random 16-byte members) and seed 000 (SETs of
            N random 24-char members, 200,000/N sets side by side); each with its target
repl        N=10,000,000 keys (the rdb workload) in a primary, then a fresh replica of the same
            server: full sync time (REPLICAOF to master_link_status:up) and the primary's
            PSS peak (with any forked child) against its steady state; then a primary with
            two replicas attached under redis-benchmark -t set: requests/s and the ratio
member-ttl  densekv's member TTLs: one SET of N=1,000,000 members (8 bytes each); used_memory
            delta per member without TTLs and with a distinct SPEXPIREAT deadline on every
            member (Redis's plain SET alongside, for reference); then, with nobody touching
            the set, how long after the last deadline active expiry takes to reclaim it all
            (DBSIZE of its database polled every 50 ms: DBSIZE reads no key), while a
            redis-benchmark SET writer (-P 16, another database) runs across the deadline;
            its requests/s is compared with the same run without TTLs
Options common to all: --densekv-bin (default $DENSEKV_BIN or target/release/densekv-server),
--redis-bin (default $REDIS_SERVER_BIN or redis-server). Pointing --densekv-bin at
redis-server checks the script itself. Standard library only (plus cc for `cache`);
output is Markdown.
"""

from __future__ import annotations

import argparse
import array
import csv
import datetime
import gc
import io
import os
import platform
import random
import re
import resource
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
OK = b"+OK\r\n"


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    """A server process started by us on a free loopback port; stop() ends only that PID."""

    def __init__(self, name: str, argv_prefix: list[str]):
        self.name = name
        self.argv_prefix = argv_prefix
        self.dir = tempfile.mkdtemp(prefix=f"bench-{name}-")
        self.log = os.path.join(self.dir, "server.log")
        self.proc: subprocess.Popen | None = None
        self.port = 0
        # A command the server runs under (taskset, for --pin); it execs
        # the server, so the PID is the server's.
        self.wrap: list[str] = []

    def start(self, attempts: int = 5, ready_within: float = 15) -> "Server":
        """Start on a free port in self.dir (an RDB file there is loaded) and wait for the
        first PING answered (not -LOADING); self.ready_secs is the time from spawning."""
        for _ in range(attempts):
            self.port = free_port()
            argv = [*self.wrap, *self.argv()]
            t0 = time.perf_counter()
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(argv, cwd=self.dir, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + ready_within
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:  # a server still loading may hold the PING until it is done
                    with Conn(self.port, timeout=max(0.5, deadline - time.monotonic())) as c:
                        c.call("PING")
                    self.ready_secs = time.perf_counter() - t0
                    return self
                except OSError:
                    time.sleep(0.01)
                except RuntimeError as e:  # -LOADING: Redis answers while it loads
                    if not str(e).startswith("LOADING"):
                        raise
                    time.sleep(0.01)
            self.stop(keep_dir=True)
        raise SystemExit(f"{self.name}: could not start {argv[0]}; see {self.log}:\n"
                         + Path(self.log).read_text(errors="replace")[-2000:])

    def argv(self) -> list[str]:
        """The command line on self.port."""
        return [*self.argv_prefix[:1], "--port", str(self.port), "--bind", HOST,
                "--save", "", "--appendonly", "no", *self.argv_prefix[1:]]

    def stop(self, keep_dir: bool = False) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def pss(self) -> int:
        """Proportional set size of the server and every process it forked, in bytes:
        pages a forked child shares with its parent count once between them."""
        total = 0
        for pid in process_tree(self.proc.pid):
            try:
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
            except (FileNotFoundError, ProcessLookupError):
                pass  # a child that just exited
        return total

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise SystemExit(f"{self.name} exited with code {self.proc and self.proc.returncode}")

    def vmrss(self) -> int:
        """Resident set size from /proc/PID/status, in bytes."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def main_thread_cpu(self) -> float:
        """CPU seconds (user + system) of the main thread, the one that runs every command."""
        return sum(self.main_thread_user_sys())

    def main_thread_user_sys(self) -> tuple[float, float]:
        """The main thread's user and system CPU seconds."""
        f = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(f[11]) / os.sysconf("SC_CLK_TCK"), int(f[12]) / os.sysconf("SC_CLK_TCK")

    def main_thread_sleeps(self) -> int:
        """How many times the main thread has slept (voluntary context switches: waits in poll)."""
        text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/status").read_text()
        return int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", text, re.M).group(1))

    def info(self, section: str = "memory") -> dict[str, str]:
        with Conn(self.port) as c:
            text = c.call("INFO", section).decode()
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line
                    and not line.startswith("#"))


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (from /proc/PID/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                pass
    return out


def new_servers(args) -> list[Server]:
    """densekv and redis, not started yet."""
    return [Server("densekv", [args.densekv_bin]),
            Server("redis", [args.redis_bin, "--daemonize", "no"])]


def start_servers(args, wrap: list[str] | None = None) -> list[Server]:
    """Start densekv and redis (each under `wrap`, e.g. taskset, if given); both are
    stopped at exit (including SIGINT/SIGTERM)."""
    servers = new_servers(args)
    for s in servers:
        s.wrap = wrap or []
    try:
        for s in servers:
            s.start()
    except BaseException:
        stop_servers(servers)
        raise
    return servers


def stop_servers(servers: list[Server]) -> None:
    for s in servers:
        s.stop()


# ---------------------------------------------------------------- a minimal RESP client


def encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port: int, timeout: float = 60):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def _more(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def _line(self) -> bytes:
        while (i := self.buf.find(b"\r\n")) < 0:
            self._more()
        line = bytes(self.buf[:i])
        del self.buf[:i + 2]
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"-":
            raise RuntimeError(rest.decode(errors="replace"))
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._more()
            data = bytes(self.buf[:n])
            del self.buf[:n + 2]
            return data
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError(f"unexpected reply {line[:100]!r}")

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.reply()

    def send_counted(self, data: bytes, count: int) -> None:
        """Send `count` pipelined commands with any non-error replies; read them all."""
        self.sock.sendall(data)
        for _ in range(count):
            self.reply()

    def send_batch(self, data: bytes, count: int, reply: bytes = OK) -> None:
        """Send `count` pipelined commands that each answer `reply`; check every reply."""
        self.sock.sendall(data)
        need = len(reply) * count
        while len(self.buf) < need:
            before = len(self.buf)
            self._more()
            if b"-" in self.buf[before:]:
                while not self.buf.endswith(b"\r\n"):
                    self._more()
                err = self.buf[self.buf.find(b"-"):].split(b"\r\n", 1)[0]
                raise RuntimeError(f"command failed: {err.decode(errors='replace')}")
        if self.buf[:need] != reply * count:
            raise RuntimeError(f"unexpected replies: {bytes(self.buf[:100])!r}")
        del self.buf[:need]


# ---------------------------------------------------------------- workloads

SESSION_TTL = 2592000  # 30 days


def session_json(rng: random.Random) -> bytes:
    v = b'{"user_id":%d,"ts":%d,"role":"u"}' % (rng.randrange(1_000_000, 10_000_000),
                                                1_700_000_000 + rng.randrange(SESSION_TTL))
    assert len(v) == 46, v
    return v


WORKLOADS = ["sessions", "intkeys", "values100", "mixed"]
VALUE100 = b"v" * 100


def batches(workload: str, n: int, batch: int = 10_000, seed: int = 1):
    """Yield (resp_bytes, count, reply) chunks of the workload's commands, each of whose
    `count` commands answers `reply`.

      sessions   SETEX session:<40 hex> 2592000 <46-byte JSON>
      intkeys    SET key:<n> <n>
      values100  SET key:<n, 12 digits> <100 bytes>: redis-benchmark's `-t set -r N` keys
      mixed      SET k:<n> <20 bytes> for even n, HSET h:<n> f1 v1 f2 v2 f3 v3 for odd n
    """
    rng = random.Random(seed)
    for start in range(0, n, batch):
        stop = min(start + batch, n)
        if workload == "sessions":
            head = b"*4\r\n$5\r\nSETEX\r\n$48\r\nsession:"
            mid = b"\r\n$7\r\n%d\r\n$46\r\n" % SESSION_TTL
            yield b"".join(b"%s%040x%s%s\r\n" % (head, rng.getrandbits(160), mid, session_json(rng))
                           for _ in range(start, stop)), stop - start, OK
        elif workload == "intkeys":
            parts = []
            for i in range(start, stop):
                s = b"%d" % i
                parts.append(b"*3\r\n$3\r\nSET\r\n$%d\r\nkey:%s\r\n$%d\r\n%s\r\n"
                             % (len(s) + 4, s, len(s), s))
            yield b"".join(parts), stop - start, OK
        elif workload == "values100":
            tail = b"\r\n$100\r\n" + VALUE100 + b"\r\n"
            yield b"".join(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d%s" % (i, tail)
                           for i in range(start, stop)), stop - start, OK
        elif workload == "mixed":  # one batch of each kind, so each batch has one reply
            sets = range(start + start % 2, stop, 2)
            yield b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\nk:%s\r\n$20\r\nval:%016d\r\n"
                           % (len(k) + 2, k, i) for i in sets for k in (b"%d" % i,)), len(sets), OK
            hsets = range(start + 1 - start % 2, stop, 2)
            fields = b"$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n$2\r\nf3\r\n$2\r\nv3\r\n"
            yield (b"".join(b"*8\r\n$4\r\nHSET\r\n$%d\r\nh:%s\r\n%s" % (len(k) + 2, k, fields)
                            for i in hsets for k in (b"%d" % i,)), len(hsets), b":3\r\n")
        else:
            raise ValueError(workload)


def load(port: int, workload: str, n: int) -> float:
    """Load the workload over one pipelined connection; return seconds taken."""
    t0 = time.perf_counter()
    with Conn(port) as c:
        for data, count, reply in batches(workload, n):
            c.send_batch(data, count, reply)
    return time.perf_counter() - t0


# ---------------------------------------------------------------- output helpers


def run_text(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (p.stdout or p.stderr).strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable ({e})"


def header(title: str, args) -> None:
    rev = run_text(["git", "-C", str(ROOT), "describe", "--always", "--dirty"])
    print(f"# {title}\n")
    print(f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC")
    print(f"- machine: {platform.machine()}, nproc {len(os.sched_getaffinity(0))}, "
          f"kernel {platform.release()}")
    print(f"- redis: {run_text([args.redis_bin, '--version'])}")
    binary = Path(args.densekv_bin).resolve()
    shown = binary.relative_to(ROOT) if binary.is_relative_to(ROOT) else args.densekv_bin
    print(f"- densekv: {shown} (git {rev})")
    print(f"- command: {' '.join([Path(sys.argv[0]).name, *sys.argv[1:]])}\n", flush=True)


def table(head: list[str], rows: list[list]) -> None:
    cells = [head] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    for k, row in enumerate(cells):
        print("| " + " | ".join(c.rjust(w) if k and i else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(row, widths))) + " |")
        if k == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print(flush=True)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


# ---------------------------------------------------------------- memory


def memory_sample(s: Server, settle: float = 1.0) -> tuple[int, int, int]:
    # Let the server's periodic RSS sampling catch up and, after a load, let
    # the allocator's decay return the load's transient buffers (query and
    # reply buffers) to the OS, so RSS shows what the data itself holds.
    time.sleep(settle)
    info = s.info("memory")
    return int(info["used_memory"]), int(info["used_memory_rss"]), s.vmrss()


def cmd_memory(args) -> None:
    header("densekv vs redis: memory per key", args)
    workloads = ["sessions", "intkeys"] if args.workload == "all" else [args.workload]
    n = args.n or 1_000_000
    for workload in workloads:
        servers = start_servers(args)
        try:
            results = {}
            for s in servers:
                before = memory_sample(s)
                secs = load(s.port, workload, n)
                after = memory_sample(s, args.settle)
                check_dbsize(s, n)
                results[s.name] = (before, after, secs)
        finally:
            stop_servers(servers)
        print(f"## {workload}, N={n:,}\n")
        rows = []
        per_key = {}
        for name, (before, after, secs) in results.items():
            d = [a - b for a, b in zip(after, before)]
            per_key[name] = [x / n for x in d]
            rows.append([name, f"{before[0]:,}", f"{after[0]:,}", f"{d[0] / n:.1f}",
                         f"{d[1] / n:.1f}", f"{d[2] / n:.1f}",
                         f"{100 * d[0] / d[2]:.0f}%" if d[2] else "n/a", f"{secs:.1f}"])
        rows.append(["densekv/redis", "", "", *(ratio(a, b) for a, b in
                                                  zip(per_key["densekv"], per_key["redis"])),
                     "", ""])
        table(["server", "used_memory before", "used_memory after", "used B/key",
               "rss(INFO) B/key", "VmRSS B/key", "used/VmRSS", "load s"], rows)
        d_used, _, d_rss = (x * n for x in per_key["densekv"])
        print(f"densekv used_memory delta vs VmRSS delta: {ratio(100 * d_used, d_rss)}% "
              f"(100% = INFO memory accounts for all resident growth)\n", flush=True)


# ---------------------------------------------------------------- hashes

HASH_SIZES = [100, 511, 512, 513, 1000, 10000, 50000, 1000000]
HASH_TTL_MS = 3_600_000  # long enough that nothing expires while measuring


def hash_fields(workload: str, n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    if workload == "fields24":
        alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
        return [bytes(rng.choices(alphabet, k=24)) for _ in range(n)]
    if workload == "short8":
        return [b"f%07d" % i for i in range(n)]
    raise ValueError(workload)


def hash_copies(n: int) -> int:
    """Hashes of N fields loaded side by side, so that small N is measured over
    about 200,000 fields (one hash's few KB are below used_memory's noise)."""
    return max(1, 200_000 // n)


def hash_commands(workload: str, n: int, ttl: bool, per_cmd: int = 200):
    """Yield (resp_bytes, count) chunks loading the workload (and its TTLs)."""
    if workload == "onefield":
        for start in range(0, n, 10_000):
            stop = min(start + 10_000, n)
            cmds = [encode("HSET", b"h%010d" % i, "name", "1") for i in range(start, stop)]
            if ttl:
                cmds += [encode("HPEXPIRE", b"h%010d" % i, HASH_TTL_MS, "FIELDS", 1, "name")
                         for i in range(start, stop)]
            yield b"".join(cmds), len(cmds)
        return
    value = b"1" if workload == "fields24" else b"x"
    for copy in range(hash_copies(n)):
        key = b"h%d" % copy
        fields = hash_fields(workload, n, seed=copy + 1)
        for i in range(0, n, per_cmd * 50):
            cmds = []
            for j in range(i, min(i + per_cmd * 50, n), per_cmd):
                chunk = fields[j:j + per_cmd]
                cmds.append(encode("HSET", key, *[x for f in chunk for x in (f, value)]))
                if ttl:
                    cmds.append(encode("HPEXPIRE", key, HASH_TTL_MS, "FIELDS", len(chunk), *chunk))
            yield b"".join(cmds), len(cmds)


def measure_hash(s: Server, workload: str, n: int, ttl: bool) -> tuple[float, float, str]:
    """(used_memory delta per field, load seconds, OBJECT ENCODING) on a flushed server;
    per field includes each hash's key cost shared among its N fields."""
    copies = 1 if workload == "onefield" else hash_copies(n)
    with Conn(s.port) as c:
        c.call("FLUSHALL")
        c.call("SET", "seed", "1")  # first-key costs (table, first slab page) are not the hash's
    time.sleep(0.3)
    before = int(s.info("memory")["used_memory"])
    t0 = time.perf_counter()
    with Conn(s.port) as c:  # closed before measuring: its buffers are not data
        for data, count in hash_commands(workload, n, ttl):
            c.send_counted(data, count)
    secs = time.perf_counter() - t0
    time.sleep(0.3)
    after = int(s.info("memory")["used_memory"])
    with Conn(s.port) as c:
        key = "h0000000000" if workload == "onefield" else "h0"
        enc = c.call("OBJECT", "ENCODING", key).decode()
        size = int(c.call("DBSIZE")) - 1 if workload == "onefield" else int(c.call("HLEN", "h0"))
        if size != n or (workload != "onefield" and int(c.call("DBSIZE")) - 1 != copies):
            raise SystemExit(f"{s.name}: {workload} holds {size}, expected {n}")
        c.call("FLUSHALL")
    return (after - before) / (n * copies), secs, enc


def cmd_hash(args) -> None:
    header("densekv vs redis: HASH memory per field", args)
    cases = [("fields24", n) for n in args.sizes] + [("short8", 1_000_000), ("onefield", 1_000_000)]
    servers = start_servers(args)
    try:
        rows = []
        for workload, n in cases:
            got = {s.name: measure_hash(s, workload, n, False) for s in servers}
            d, r = got["densekv"], got["redis"]
            rows.append([workload, f"{n:,}", hash_copies(n) if workload != "onefield" else n,
                         f"{d[0]:.1f}", d[2], f"{r[0]:.1f}", r[2],
                         ratio(d[0], r[0]), f"{d[1]:.1f}", f"{r[1]:.1f}"])
        print("## Without TTL (used_memory delta / N; onefield: per key)\n")
        table(["workload", "N", "hashes", "densekv B/field", "densekv enc", "redis B/field", "redis enc",
               "densekv/redis", "densekv load s", "redis load s"], rows)
        if not args.no_ttl:
            rows = []
            for workload, n in ([("fields24", x) for x in args.sizes]
                                + [("short8", 1_000_000), ("onefield", 1_000_000)]):
                row = [workload, f"{n:,}", hash_copies(n) if workload != "onefield" else n]
                for s in servers:
                    if not has_command(s, "hpexpire"):
                        row += ["-", "-", "-", "-"]
                        continue
                    plain = measure_hash(s, workload, n, False)[0]
                    with_ttl, _, enc = measure_hash(s, workload, n, True)
                    row += [f"{plain:.1f}", f"{with_ttl:.1f}", f"{with_ttl - plain:.1f}", enc]
                rows.append(row)
            print("## With HPEXPIRE on every field (`-`: that server has no HPEXPIRE; "
                  "use --redis-bin with Redis 7.4 or later to compare)\n")
            table(["workload", "N", "hashes", "densekv no TTL", "densekv TTL", "densekv TTL cost", "densekv enc",
                   "redis no TTL", "redis TTL", "redis TTL cost", "redis enc"], rows)
    finally:
        stop_servers(servers)


def has_command(s: Server, name: str) -> bool:
    with Conn(s.port) as c:
        info = c.call("COMMAND", "INFO", name)
    return bool(info) and info[0] is not None


WRITER_FIELDS = 100_000  # distinct fields per writer hash; then it moves to the next hash


def hash_writer(port: int, stop, log: list) -> None:
    """Pipelined one-field HSETs, 500 per batch, until `stop` is set; log (end time, count,
    secs). Commands are encoded before the clock starts and replies are checked as one
    block, so that the server, not this client, sets the pace: each hash `writer<k>`
    gets WRITER_FIELDS new fields, then the writer moves on to the next hash."""
    fields = [b"$8\r\nw%07d\r\n$1\r\nv\r\n" % i for i in range(WRITER_FIELDS)]
    batch = 500
    with Conn(port) as c:
        lap = 0
        while not stop.is_set():
            key = b"writer%d" % lap
            head = b"*4\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n" % (len(key), key)
            for j in range(0, WRITER_FIELDS, batch):
                if stop.is_set():
                    break
                data = b"".join([head + f for f in fields[j:j + batch]])
                t0 = time.perf_counter()
                c.send_batch(data, batch, b":1\r\n")
                t1 = time.perf_counter()
                log.append((t1, batch, t1 - t0))
            lap += 1


def expiry_run(args, s: Server, expire: bool) -> dict:
    n = args.n or 1_000_000
    ttl = args.ttl_ms / 1000
    with Conn(s.port) as c:
        c.call("FLUSHALL")
        base = int(s.info("memory")["used_memory"])
        fields = hash_fields("short8", n)
        for i in range(0, n, 50_000):
            part = fields[i:i + 50_000]
            cmds = [encode("HSET", "exp", *[x for f in part[j:j + 500] for x in (f, b"x")])
                    for j in range(0, len(part), 500)]
            c.send_counted(b"".join(cmds), len(cmds))
        loaded = int(s.info("memory")["used_memory"])
        last_deadline = None
        if expire:
            for i in range(0, n, 50_000):
                part = fields[i:i + 50_000]
                cmds = [encode("HPEXPIRE", "exp", args.ttl_ms, "FIELDS", len(part[j:j + 500]),
                               *part[j:j + 500]) for j in range(0, len(part), 500)]
                c.send_counted(b"".join(cmds), len(cmds))
            last_deadline = time.perf_counter() + ttl  # the last HPEXPIRE ran before now
        else:
            last_deadline = time.perf_counter() + ttl
    stop, log, cpu = threading.Event(), [], []

    def sample_cpu():  # main-thread CPU and expiry-cycle time at both ends of the window
        for at in (last_deadline - 0.2, last_deadline + 1.5):
            time.sleep(max(0.0, at - time.perf_counter()))
            cycle_ms = int(s.info("stats")["expire_cycle_cpu_milliseconds"])
            cpu.append((time.perf_counter(), s.main_thread_cpu(), cycle_ms))

    writer = threading.Thread(target=hash_writer, args=(s.port, stop, log))
    sampler = threading.Thread(target=sample_cpu)
    writer.start()
    sampler.start()
    zero_at = None
    try:
        with Conn(s.port) as poll:
            while expire and time.perf_counter() < last_deadline + args.give_up:
                if int(poll.call("HLEN", "exp")) == 0:
                    zero_at = time.perf_counter()
                    break
                time.sleep(0.1)
            while time.perf_counter() < last_deadline + 1.5:  # same writer window in both runs
                time.sleep(0.1)
            exists = int(poll.call("EXISTS", "exp"))
    finally:
        stop.set()
        writer.join()
        sampler.join()
    (t0, c0, e0), (t1, c1, e1) = cpu
    window = [x for x in log if t0 <= x[0] <= t1]
    secs = (window[-1][0] - window[0][0]) if len(window) > 1 else 0
    ops = sum(x[1] for x in window[1:])
    with Conn(s.port) as c:  # the writer's hashes are not what expiry should give back
        writer_bytes = sum(int(c.call("MEMORY", "USAGE", k, "SAMPLES", "0")) for k in c.call("KEYS", "writer*"))
    return {"lag": None if zero_at is None else zero_at - last_deadline,
            "exists": exists, "loaded": loaded - base,
            "after": int(s.info("memory")["used_memory"]) - base - writer_bytes,
            "rate": ops / secs if secs else 0,
            "busy": (c1 - c0) / (t1 - t0),  # share of the window the main thread was on a CPU
            "cycle": (e1 - e0) / 1000 / (t1 - t0),  # share of the window in active expiry cycles
            "per_cpu": sum(x[1] for x in window) / max(c1 - c0, 1e-9),  # writer HSETs per CPU second
            "worst": max((x[2] for x in window), default=0)}


def cmd_hash_expiry(args) -> None:
    header("densekv vs redis: active expiry of hash fields", args)
    servers = start_servers(args)
    rows, kept = [], {}
    try:
        for rnd in range(1, args.rounds + 1):
            for s in servers:
                if not has_command(s, "hpexpire"):
                    if rnd == 1:
                        rows.append([s.name, "-", "no HPEXPIRE"] + ["-"] * 11)
                    continue
                got = {}
                for label, expire in (("with TTL", True), ("without TTL", False)):
                    r = got[label] = expiry_run(args, s, expire)
                    lag = "-" if not expire else "never" if r["lag"] is None else f"{max(r['lag'], 0) * 1000:.0f} ms"
                    rows.append([s.name, rnd, label, lag, r["exists"], f"{r['loaded']:,}", f"{r['after']:,}",
                                 f"{r['rate']:,.0f}", f"{r['worst'] * 1000:.1f}", f"{r['busy']:.0%}", f"{r['cycle']:.1%}",
                                 f"{r['per_cpu']:,.0f}", "-", "-"])
                w, wo = got["with TTL"], got["without TTL"]
                kept.setdefault(s.name, []).append((w["rate"] / max(wo["rate"], 1), w["per_cpu"] / max(wo["per_cpu"], 1)))
                rows[-2][-2:] = [f"{kept[s.name][-1][0]:.0%}", f"{kept[s.name][-1][1]:.0%}"]
    finally:
        stop_servers(servers)
    n = args.n or 1_000_000
    print(f"{n:,} fields (8-byte names, value x) in one hash, HPEXPIRE {args.ttl_ms} ms on each; "
          "HLEN polled every 100 ms from another connection.\n")
    table(["server", "round", "run", "HLEN 0 after last deadline", "key exists after", "used_memory loaded",
           "used_memory after, less writer's", "writer HSET/s", "writer worst batch ms", "main thread busy", "in expiry cycles",
           "writer HSET per CPU s", "writer kept (wall)", "writer kept (CPU)"], rows)
    for name, ks in kept.items():
        for i, how in ((0, "HSET/s"), (1, "HSETs per main-thread CPU second")):
            print(f"- {name}: writer kept {statistics.median(k[i] for k in ks):.0%} of its {how} "
                  f"(median of {len(ks)} round{'s' if len(ks) > 1 else ''}: "
                  f"{', '.join(f'{k[i]:.0%}' for k in ks)})")
    print("\nWriter: one connection, 500 pipelined one-field HSETs per batch into other hashes, "
          "encoded ahead so the server sets the pace; measured from 0.2 s before the last "
          "deadline to 1.5 s after it in both runs of a round. `kept (wall)` compares HSET/s, "
          "which on a shared machine swings by tens of percent between runs; `kept (CPU)` "
          "compares HSETs per CPU second of the server's main thread (from /proc), i.e. the "
          "share of that thread's work that went to the writer rather than to expiry, which "
          "is what a saturated server would keep, but it swings with the machine too. "
          "`in expiry cycles` is the server's own expire_cycle_cpu_milliseconds (INFO stats) "
          "over the window: the share of it the active expiry cycle ran, field expiry "
          "included, on both servers; the writer keeps at least the rest. The last deadline "
          "is taken as 3 s after the last HPEXPIRE was acknowledged (an upper bound, so the lag "
          "is not understated; HLEN polling adds up to 100 ms). used_memory columns are deltas "
          "from the empty server, `loaded` before any TTL was set; `after` less the "
          "writer's hashes (MEMORY USAGE ... SAMPLES 0). Redis needs 7.4 or later (--redis-bin); Debian's 7.0 has no HPEXPIRE.\n",
          flush=True)


# ---------------------------------------------------------------- throughput


def bench_argv(s: Server, tests: str, clients: int, n: int, keyspace: int, pipeline: int,
               *extra: str) -> list[str]:
    return ["redis-benchmark", "-h", HOST, "-p", str(s.port), "-t", tests, "-c", str(clients),
            "-n", str(n), "-r", str(keyspace), "-P", str(pipeline), *extra]


def run_benchmark(argv: list[str], s: Server, timeout: float) -> dict[str, list[str]]:
    """Run redis-benchmark with --csv; {test: [rps, avg, min, p50, p95, p99, max (ms)]}."""
    # redis-benchmark spins forever when the server is gone, hence the timeout.
    p = subprocess.run([*argv, "--csv", "-q"], capture_output=True, text=True, timeout=timeout)
    s.check_alive()
    if p.returncode != 0:
        raise SystemExit(f"redis-benchmark failed against {s.name}: {p.stderr}")
    rows = [r for r in csv.reader(io.StringIO(p.stdout)) if len(r) >= 2]
    return {r[0]: r[1:] for r in rows if r[0] != "test"}


def benchmark(args, s: Server, pipeline: int) -> dict[str, float]:
    argv = bench_argv(s, args.tests, args.clients, args.n or 2_000_000, 1_000_000, pipeline)
    if getattr(args, "pin", False):
        argv = ["taskset", "-c", "1", *argv]
    return {test: float(r[0]) for test, r in run_benchmark(argv, s, args.timeout).items()}


def cmd_throughput(args) -> None:
    header("densekv vs redis: throughput (redis-benchmark)", args)
    print(f"- redis-benchmark: {run_text(['redis-benchmark', '--version'])}\n")
    if args.pin:
        # Server on CPU 0, load generator on CPU 1: neither build shares
        # a core with the benchmark or migrates, which on a 2-core
        # machine moved single rounds by up to 30%.
        print("- pinned: server on CPU 0, redis-benchmark on CPU 1\n")
    servers = start_servers(args, ["taskset", "-c", "0"] if args.pin else None)
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        for pipeline in args.pipeline:
            for rnd in range(args.rounds):
                # Alternate, so drift hits both alike, and swap which goes
                # first each round: the second of a pair ran measurably
                # faster here (about 7% for SET at -P 16 in an A/B of two
                # builds), so a fixed order biased every ratio one way.
                for s in servers if rnd % 2 == 0 else servers[::-1]:
                    results.setdefault((s.name, pipeline), []).append(
                        benchmark(args, s, pipeline))
    finally:
        stop_servers(servers)
    rows = []
    for pipeline in args.pipeline:
        dk, rd = results[("densekv", pipeline)], results[("redis", pipeline)]
        for test in dk[0]:
            a = statistics.median(r.get(test, 0.0) for r in dk)
            b = statistics.median(r.get(test, 0.0) for r in rd)
            # Each round's two runs are back to back, so a slow spell of a
            # shared machine hits both: the median of the rounds' own
            # ratios is steadier than the ratio of the two medians.
            per_round = sorted(x.get(test, 0.0) / y[test] for x, y in zip(dk, rd) if y.get(test))
            paired = statistics.median(per_round) if per_round else 0.0
            spread = f"{per_round[0]:.2f}-{per_round[-1]:.2f}" if per_round else "-"
            rows.append([test, pipeline, f"{a:,.0f}", f"{b:,.0f}", ratio(a, b), f"{paired:.2f}", spread])
    table(["test", "-P", "densekv req/s", "redis req/s", "densekv/redis", "paired", "rounds"], rows)
    if args.rounds > 1:
        print(f"(req/s: median of {args.rounds} rounds; paired: median of the rounds' own "
              "densekv/redis ratios, the two runs of a round back to back; rounds: their range)\n")


# ---------------------------------------------------------------- TLS


def make_tls_files(d: str) -> dict[str, str]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it, in `d`."""
    def run(*argv: str) -> None:
        subprocess.run(argv, cwd=d, check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("openssl", "req", "-x509", "-new", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=bench-ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=bench")
    Path(d, "server.ext").write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                                     "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext")
    return {k: os.path.join(d, f) for k, f in (("ca", "ca.crt"), ("cert", "server.crt"), ("key", "server.key"))}


def cmd_tls(args) -> None:
    """redis-benchmark over TLS, densekv beside redis, at each --io-threads
    value (given to both servers); with more than one value, densekv's
    throughput at each is also shown against its first."""
    header("densekv vs redis: throughput over TLS (redis-benchmark --tls)", args)
    print(f"- redis-benchmark: {run_text(['redis-benchmark', '--version'])}\n")
    certdir = tempfile.mkdtemp(prefix="bench-tls-")
    files = make_tls_files(certdir)
    results: dict[tuple[str, int, int], list[dict[str, float]]] = {}
    try:
        for threads in args.io_threads:
            servers = new_servers(args)
            tls_ports = {}
            for s in servers:
                tls_ports[s.name] = free_port()
                s.argv_prefix = [*s.argv_prefix, "--tls-port", str(tls_ports[s.name]), "--tls-cert-file", files["cert"],
                                 "--tls-key-file", files["key"], "--tls-ca-cert-file", files["ca"],
                                 "--tls-auth-clients", "no", "--io-threads", str(threads)]
            try:
                for s in servers:
                    s.start()
                for pipeline in args.pipeline:
                    for rnd in range(args.rounds):
                        for s in servers if rnd % 2 == 0 else servers[::-1]:
                            argv = ["redis-benchmark", "-h", HOST, "-p", str(tls_ports[s.name]), "--tls",
                                    "--cacert", files["ca"], "-t", args.tests, "-c", str(args.clients),
                                    "-n", str(args.n or 1_000_000), "-r", "1000000", "-P", str(pipeline)]
                            if args.bench_threads > 1:
                                argv += ["--threads", str(args.bench_threads)]
                            got = {t: float(r[0]) for t, r in run_benchmark(argv, s, args.timeout).items()}
                            results.setdefault((s.name, threads, pipeline), []).append(got)
            finally:
                stop_servers(servers)
    finally:
        shutil.rmtree(certdir, ignore_errors=True)
    rows = []
    base = args.io_threads[0]
    for threads in args.io_threads:
        for pipeline in args.pipeline:
            dk, rd = results[("densekv", threads, pipeline)], results[("redis", threads, pipeline)]
            for test in dk[0]:
                a = statistics.median(r.get(test, 0.0) for r in dk)
                b = statistics.median(r.get(test, 0.0) for r in rd)
                a0 = statistics.median(r.get(test, 0.0) for r in results[("densekv", base, pipeline)])
                rows.append([test, threads, pipeline, f"{a:,.0f}", f"{b:,.0f}", ratio(a, b), ratio(a, a0)])
    table(["test", "io-threads", "-P", "densekv req/s", "redis req/s", "densekv/redis", f"densekv/io-threads {base}"], rows)
    if args.rounds > 1:
        print(f"(median of {args.rounds} rounds)\n")


# ---------------------------------------------------------------- io-threads


def process_cpu(s: Server) -> float:
    """CPU seconds (user + system) of the whole server process, every thread."""
    f = Path(f"/proc/{s.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """CPU seconds (user + system) of this script's finished child processes."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cmd_io_threads(args) -> None:
    """Executor CPU per request with each io-threads value, both servers."""
    header("densekv vs redis: io-threads, executor CPU per request (redis-benchmark)", args)
    print(f"- redis-benchmark: {run_text(['redis-benchmark', '--version'])}\n")
    n = args.n or 300_000
    certdir = tempfile.mkdtemp(prefix="bench-tls-") if args.tls else None
    files = make_tls_files(certdir) if certdir else {}
    # (server, threads, test, pipeline) -> [(executor ns/req, process ns/req, req/s, executor busy,
    # redis-benchmark's ns/req)]
    samples: dict[tuple, list[tuple[float, float, float, float, float]]] = {}
    try:
        for threads in args.threads:
            servers = new_servers(args)
            tls_ports = {}
            for s in servers:
                if args.server_cpus:
                    s.wrap = ["taskset", "-c", args.server_cpus]
                s.argv_prefix = [*s.argv_prefix, "--io-threads", str(threads), "--io-threads-do-reads", "yes"]
                if files:
                    tls_ports[s.name] = free_port()
                    s.argv_prefix += ["--tls-port", str(tls_ports[s.name]), "--tls-cert-file", files["cert"],
                                      "--tls-key-file", files["key"], "--tls-ca-cert-file", files["ca"],
                                      "--tls-auth-clients", "no"]
            try:
                for s in servers:
                    s.start()
                for rnd in range(args.rounds):
                    for pipeline in args.pipeline:
                        for test in args.tests.split(","):
                            for s in servers if rnd % 2 == 0 else servers[::-1]:
                                port = tls_ports.get(s.name, s.port)
                                extra = ["--tls", "--cacert", files["ca"]] if files else []
                                argv = ["redis-benchmark", "-h", HOST, "-p", str(port), *extra, "-t", test,
                                        "-c", str(args.clients), "-n", str(n), "-r", "100000", "-P", str(pipeline)]
                                if args.client_cpus:
                                    argv = ["taskset", "-c", args.client_cpus, *argv]
                                if args.bench_threads > 1:
                                    argv += ["--threads", str(args.bench_threads)]
                                exe0, all0, cl0, t0 = s.main_thread_cpu(), process_cpu(s), children_cpu(), time.perf_counter()
                                got = run_benchmark(argv, s, args.timeout)
                                exe1, all1, cl1, wall = s.main_thread_cpu(), process_cpu(s), children_cpu(), time.perf_counter() - t0
                                rps = float(next(iter(got.values()))[0]) if got else n / wall
                                samples.setdefault((s.name, threads, test, pipeline), []).append(
                                    ((exe1 - exe0) / n * 1e9, (all1 - all0) / n * 1e9, rps, (exe1 - exe0) / wall,
                                     (cl1 - cl0) / n * 1e9))
            finally:
                stop_servers(servers)
    finally:
        if certdir:
            shutil.rmtree(certdir, ignore_errors=True)
    rows = []
    for name in ("densekv", "redis"):
        for pipeline in args.pipeline:
            for test in args.tests.split(","):
                base = statistics.median(x[0] for x in samples[(name, args.threads[0], test, pipeline)])
                for threads in args.threads:
                    got = samples[(name, threads, test, pipeline)]
                    exe = statistics.median(x[0] for x in got)
                    rows.append([name, test, pipeline, threads, f"{exe:,.0f}",
                                 f"{statistics.median(x[1] for x in got):,.0f}",
                                 f"{statistics.median(x[2] for x in got):,.0f}",
                                 f"{statistics.median(x[3] for x in got):.2f}",
                                 f"{statistics.median(x[4] for x in got):,.0f}", ratio(exe, base)])
    table(["server", "test", "-P", "io-threads", "executor ns/req", "process ns/req", "req/s",
           "executor busy", "client ns/req", f"executor vs io-threads {args.threads[0]}"], rows)
    tick = 1e9 / os.sysconf("SC_CLK_TCK") / n
    print(f"(median of {args.rounds} rounds; -c {args.clients}, -n {n}, redis-benchmark --threads "
          f"{args.bench_threads}; CPU is read in clock ticks: resolution {tick:.0f} ns/req; executor busy: "
          f"the executor thread's CPU seconds over the run's wall seconds, near 1.00 when it is the "
          f"bottleneck; client ns/req: redis-benchmark's own CPU per request, all its threads: "
          f"{os.cpu_count()} cores / (process + client ns/req) bounds the req/s one machine can hold"
          + (f"; servers on CPUs {args.server_cpus}" if args.server_cpus else "")
          + (f", redis-benchmark on CPUs {args.client_cpus}" if args.client_cpus else "") + ")\n")
    if args.plot:
        plot_io_threads(args, samples, args.plot)


def plot_io_threads(args, samples: dict, path: str) -> None:
    """requests/s against io-threads, a line per server, test and depth (matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no plot: matplotlib is not installed; {path} not written)\n")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, style in (("densekv", "-o"), ("redis", "--s")):
        for pipeline in args.pipeline:
            for test in args.tests.split(","):
                ys = [statistics.median(x[2] for x in samples[(name, t, test, pipeline)]) / 1e6
                      for t in args.threads]
                ax.plot(args.threads, ys, style, label=f"{name} {test.upper()} -P {pipeline}")
    ax.set_xlabel("io-threads")
    ax.set_ylabel("million requests/s")
    ax.set_xticks(args.threads)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(f"redis-benchmark --threads {args.bench_threads}, -c {args.clients}, "
                 f"{os.cpu_count()} cores")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"(plot: {path})\n")


# ---------------------------------------------------------------- cpu per request


def cmd_cpu(args) -> None:
    """Server main-thread CPU per request under redis-benchmark, alternating servers.

    Throughput on a shared 2-core machine mostly measures who got the cores;
    the server's own CPU time per request does not depend on the client's
    share, so an A/B of two builds (old binary as --redis-bin) resolves a few
    percent where requests/s cannot."""
    header("densekv vs redis: main-thread CPU per request (redis-benchmark)", args)
    servers = start_servers(args, ["taskset", "-c", "0"] if args.pin else None)
    n = args.n or 300_000
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        for rnd in range(args.rounds):
            for test in args.tests.split(","):
                order = servers if rnd % 2 == 0 else servers[::-1]
                for s in order:
                    before = s.main_thread_cpu()
                    argv = ["redis-benchmark", "-h", HOST, "-p", str(s.port), "-t", test, "-c", str(args.clients),
                            "-n", str(n), "-r", "100000", "-P", str(args.pipeline), "-q"]
                    if args.pin:
                        argv = ["taskset", "-c", "1", *argv]
                    subprocess.run(argv, capture_output=True, timeout=args.timeout, check=True)
                    s.check_alive()
                    samples.setdefault((s.name, test), []).append((s.main_thread_cpu() - before) / n * 1e9)
    finally:
        stop_servers(servers)
    rows = []
    for test in args.tests.split(","):
        a = statistics.median(samples[("densekv", test)])
        b = statistics.median(samples[("redis", test)])
        rows.append([test, args.pipeline, f"{a:,.0f}", f"{b:,.0f}", ratio(a, b)])
    table(["test", "-P", "densekv ns/req", "redis ns/req", "densekv/redis"], rows)
    tick = 1e9 / os.sysconf("SC_CLK_TCK") / n
    print(f"(median of {args.rounds} rounds; CPU is read in clock ticks: resolution {tick:.0f} ns/req)\n")


FLOOR_CRATE = ROOT / "bench" / "syscall_floor"


class FloorServer(Server):
    """bench/syscall_floor in one of its modes: GET/SET from a hash map and nothing else."""

    def __init__(self, exe: str, mode: str):
        super().__init__(f"floor-{mode}", [exe])
        self.mode = mode

    def argv(self) -> list[str]:
        return [self.argv_prefix[0], self.mode, str(self.port)]


def cmd_floor(args) -> None:
    """The floor under a server's CPU per request: densekv and Redis beside a server that
    does nothing but a hash-map GET/SET (bench/syscall_floor), on epoll and on io_uring.

    At -P 1 nearly all of a server's CPU is the kernel's (a recv and a send per request),
    so what the floor costs on epoll is about what any server on the same calls costs;
    the io_uring modes show whether batching the calls into one io_uring_enter a turn
    lowers it."""
    header("densekv, redis and the syscall floor: main-thread CPU per request", args)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(FLOOR_CRATE / "Cargo.toml")],
                   check=True)
    exe = str(FLOOR_CRATE / "target" / "release" / "syscall-floor")
    servers = start_servers(args)
    try:
        for mode in args.modes.split(","):
            servers.append(FloorServer(exe, mode).start())
        n = args.n or 200_000
        samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for rnd in range(args.rounds):
            for test in args.tests.split(","):
                order = servers if rnd % 2 == 0 else servers[::-1]
                for s in order:
                    u0, s0, w0 = *s.main_thread_user_sys(), s.main_thread_sleeps()
                    argv = ["redis-benchmark", "-h", HOST, "-p", str(s.port), "-t", test, "-c", str(args.clients),
                            "-n", str(n), "-r", "100000", "-P", str(args.pipeline), "-q"]
                    subprocess.run(argv, capture_output=True, timeout=args.timeout, check=True)
                    s.check_alive()
                    u1, s1, w1 = *s.main_thread_user_sys(), s.main_thread_sleeps()
                    samples.setdefault((s.name, test), []).append(((u1 - u0) / n * 1e9, (s1 - s0) / n * 1e9,
                                                                   (w1 - w0) / n))
    finally:
        stop_servers(servers)
    rows = []
    for test in args.tests.split(","):
        redis_ns = statistics.median(x[0] + x[1] for x in samples[("redis", test)])
        epoll_ns = (statistics.median(x[0] + x[1] for x in samples[("floor-epoll", test)])
                    if ("floor-epoll", test) in samples else None)
        for s in servers:
            got = samples[(s.name, test)]
            total = statistics.median(x[0] + x[1] for x in got)
            rows.append([test, s.name, f"{total:,.0f}", f"{statistics.median(x[0] for x in got):,.0f}",
                         f"{statistics.median(x[1] for x in got):,.0f}", f"{statistics.median(x[2] for x in got):.3f}",
                         ratio(total, redis_ns), ratio(total, epoll_ns) if epoll_ns else "-"])
    table(["test", "server", "ns/req", "user", "system", "sleeps/req", "/redis", "/floor-epoll"], rows)
    tick = 1e9 / os.sysconf("SC_CLK_TCK") / n
    print(f"(-P {args.pipeline}, -c {args.clients}; median of {args.rounds} rounds; CPU is read in clock ticks: "
          f"resolution {tick:.0f} ns/req; sleeps/req: the main thread's voluntary context switches, "
          f"its waits in poll, per request)\n")


def callgrind_per_request(binary: str, test: str, n: int, clients: int, pipeline: int, timeout: float) -> float:
    """User-space instructions per request of `binary` (Redis or densekv) under
    redis-benchmark, counted by callgrind over `n` requests after a warm-up;
    the counters are zeroed after start-up and the warm-up, then dumped."""
    port = free_port()
    d = tempfile.mkdtemp(prefix="bench-callgrind-")
    out = os.path.join(d, "cg.out")
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
            "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(argv, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:
            try:
                with socket.create_connection((HOST, port), timeout=2) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit(f"{binary} did not start under valgrind")
            time.sleep(0.3)
        bench = ["redis-benchmark", "-h", HOST, "-p", str(port), "-t", test, "-c", str(clients),
                 "-r", "100000", "-P", str(pipeline), "-q"]
        subprocess.run([*bench, "-n", str(max(n // 5, 1000))], capture_output=True, timeout=timeout, check=True)
        # vgdb by pid: callgrind_control finds a run by its command line,
        # which the server's process title ("*:PORT") has replaced.
        subprocess.run(["vgdb", f"--pid={proc.pid}", "zero"], capture_output=True, check=True)
        subprocess.run([*bench, "-n", str(n)], capture_output=True, timeout=timeout, check=True)
        subprocess.run(["vgdb", f"--pid={proc.pid}", "dump"], capture_output=True, check=True)
        for name in sorted(os.listdir(d)):
            text = Path(d, name).read_text(errors="replace") if name.startswith("cg.out.") else ""
            if "Trigger: dump" in text:
                m = re.search(r"^summary: (\d+)", text, re.M)
                if m:
                    return int(m.group(1)) / n
        raise SystemExit(f"no callgrind dump for {binary}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def cmd_instructions(args) -> None:
    """Instructions per request, an A/B of two builds (old binary as
    --redis-bin) that no noise of a shared machine moves: callgrind counts
    the server's user-space instructions exactly; what varies between runs
    is how requests batch into event-loop turns and how many keys are new
    (a few percent; take the median of --rounds). System
    calls are the kernel's and the same for both, so this measures the
    server's own code per request, not requests/s."""
    header("densekv vs other build: user-space instructions per request (callgrind)", args)
    n = args.n or 100_000
    rows = []
    for test in args.tests.split(","):
        per: dict[str, list[float]] = {"densekv": [], "redis": []}
        for _ in range(args.rounds):
            per["densekv"].append(callgrind_per_request(args.densekv_bin, test, n, args.clients, args.pipeline, args.timeout))
            per["redis"].append(callgrind_per_request(args.redis_bin, test, n, args.clients, args.pipeline, args.timeout))
        a, b = statistics.median(per["densekv"]), statistics.median(per["redis"])
        rows.append([test, args.pipeline, f"{a:,.0f}", f"{b:,.0f}", ratio(a, b)])
    table(["test", "-P", "densekv instr/req", "other instr/req", "densekv/other"], rows)
    print(f"(median of {args.rounds} runs of {n:,} requests each, after a warm-up of {max(n // 5, 1000):,}; "
          "needs valgrind)\n")


# ---------------------------------------------------------------- latency


def probe_while_loading(args, s: Server, n: int):
    cmd = encode("GET", "key:1") if args.probe == "get" else encode("PING")
    loader = subprocess.Popen([sys.executable, __file__, "_load", "--port", str(s.port),
                               "--workload", "intkeys", "-n", str(n)],
                              stdout=subprocess.PIPE, text=True)
    samples = array.array("q")
    try:
        with Conn(s.port) as c:
            sock, buf = c.sock, c.buf
            gc.disable()
            try:
                while loader.poll() is None:
                    t0 = time.perf_counter_ns()
                    sock.sendall(cmd)
                    # One reply per probe: a bulk string, nil, or +PONG; wait for its end.
                    while True:
                        buf += sock.recv(65536)
                        if buf.endswith(b"\r\n") and (buf[:1] != b"$" or buf.count(b"\r\n") >= 2
                                                       or buf.startswith(b"$-1")):
                            break
                    samples.append(time.perf_counter_ns() - t0)
                    del buf[:]
            finally:
                gc.enable()
    finally:
        out, _ = loader.communicate(timeout=args.timeout)
    if loader.returncode != 0:
        raise SystemExit(f"loader failed against {s.name}")
    check_dbsize(s, n)
    return float(out.split()[-1]), sorted(samples)


def cmd_latency(args) -> None:
    header(f"densekv vs redis: {args.probe.upper()} latency during a bulk load", args)
    n = args.n or 10_000_000
    servers = start_servers(args)
    stats = {}
    try:
        for s in servers:
            secs, lat = probe_while_loading(args, s, n)
            if not lat:
                raise SystemExit(f"{s.name}: no probe completed")

            def q(p, lat=lat):
                return lat[min(len(lat) - 1, int(p * len(lat)))] / 1000

            stats[s.name] = (secs, len(lat), q(0.5), q(0.99), q(0.999), lat[-1] / 1000)
            s.stop()  # free its memory before the next server loads
    finally:
        stop_servers(servers)
    rows = [[name, f"{secs:.1f}", f"{n / secs:,.0f}", f"{cnt:,}", f"{p50:.0f}", f"{p99:.0f}",
             f"{p999:.0f}", f"{mx / 1000:.2f}"]
            for name, (secs, cnt, p50, p99, p999, mx) in stats.items()]
    dk, rd = stats["densekv"], stats["redis"]
    rows.append(["densekv/redis", ratio(dk[0], rd[0]), "", "", ratio(dk[2], rd[2]),
                 ratio(dk[3], rd[3]), ratio(dk[4], rd[4]), ratio(dk[5], rd[5])])
    print(f"N={n:,} `SET key:<n> <n>` loaded by one pipelined connection from another "
          f"process; one {args.probe.upper()} at a time on a second connection.\n")
    table(["server", "load s", "keys/s", "probes", "p50 µs", "p99 µs", "p99.9 µs", "max ms"],
          rows)


def cmd_load(args) -> None:
    """Internal: the loader process of `latency`; prints the seconds it took."""
    print(f"{load(args.port, args.workload, args.n):.3f}", flush=True)


# ---------------------------------------------------------------- persistence

# The background job each --during names, and the INFO persistence field set while it runs.
BACKGROUND_JOBS = {"bgsave": "rdb_bgsave_in_progress", "bgrewriteaof": "aof_rewrite_in_progress"}


def persistence(s: Server, field: str) -> str:
    return s.info("persistence")[field]


def wait_job(s: Server, job: str, poll: float = 0.01) -> float:
    """Wait until the background `job` (bgsave, bgrewriteaof) is over; seconds waited."""
    t0 = time.perf_counter()
    while True:
        if persistence(s, BACKGROUND_JOBS[job]) == "0":
            return time.perf_counter() - t0
        time.sleep(poll)


def check_dbsize(s: Server, n: int) -> None:
    with Conn(s.port) as c:
        keys = int(c.call("DBSIZE"))
    if keys != n:
        raise SystemExit(f"{s.name}: DBSIZE {keys}, expected {n}")


def load_checked(s: Server, workload: str, n: int) -> float:
    secs = load(s.port, workload, n)
    check_dbsize(s, n)
    return secs


def one_at_a_time(args):
    """Yield each server started, and stop it before the next starts, so that one's
    dataset does not squeeze the other's memory."""
    for s in new_servers(args):
        try:
            yield s.start()
        finally:
            s.stop()


def pss_samples(s: Server, count: int, gap: float = 0.05) -> list[int]:
    out = []
    for _ in range(count):
        out.append(s.pss())
        time.sleep(gap)
    return out


def pss_sampler(s: Server, stop, got: list, gap: float = 0.05) -> None:
    """PSS every `gap` seconds until `stop` is set, and once more then; independent of
    how fast the server answers."""
    while not stop.is_set():
        got.append(s.pss())
        stop.wait(gap)
    got.append(s.pss())


def cmd_bgsave_memory(args) -> None:
    header("densekv vs redis: memory during BGSAVE under writes", args)
    n = args.keys
    rows, summary = [], {}
    for s in one_at_a_time(args):
        secs = load_checked(s, "values100", n)
        for rnd in range(1, args.rounds + 1):
            time.sleep(args.settle)
            steady = int(statistics.median(pss_samples(s, 5)))
            writer = subprocess.Popen(bench_argv(s, "set", args.clients, 2_000_000_000, n, args.pipeline, "-d", "100", "-q"),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(1.0)  # the writer is at full speed before the save starts
                writing = max(pss_samples(s, 10))
                stop, got = threading.Event(), []
                sampler = threading.Thread(target=pss_sampler, args=(s, stop, got))
                sampler.start()
                try:
                    save_secs = run_job(s, "bgsave", poll=0.05)
                finally:
                    stop.set()
                    sampler.join()
                peak, samples = max(got), len(got)
            finally:
                writer.terminate()
                writer.wait()
            s.check_alive()
            if persistence(s, "rdb_last_bgsave_status") != "ok":
                raise SystemExit(f"{s.name}: BGSAVE failed; see {s.log}")
            summary.setdefault(s.name, []).append(peak / steady)
            rows.append([s.name, rnd, f"{secs:.1f}", f"{steady / 2**20:,.0f}", f"{writing / 2**20:,.0f}",
                         f"{peak / 2**20:,.0f}", f"{peak / steady:.2f}", f"{save_secs:.2f}", samples])
    print(f"N={n:,} `SET key:<12 digits> <100 bytes>`; then redis-benchmark -t set -d 100 -r {n:,} "
          f"-c {args.clients} -P {args.pipeline} overwrites random keys while BGSAVE runs. PSS from "
          "/proc/PID/smaps_rollup, of the server plus any child it forked, sampled every 50 ms "
          "until rdb_bgsave_in_progress is 0; steady: idle, before the writer starts. "
          "One server at a time.\n")
    table(["server", "round", "load s", "steady MiB", "writing MiB", "peak MiB", "peak/steady",
           "BGSAVE s", "samples"], rows)
    dk, rd = (statistics.median(summary[k]) for k in ("densekv", "redis"))
    print(f"peak/steady (median of rounds): densekv {dk:.2f}, redis {rd:.2f}, "
          f"densekv/redis {dk / rd:.2f}\n", flush=True)


def logged_load_secs(s: Server) -> float | None:
    """The last `DB loaded from disk: X seconds` in the server's log."""
    found = None
    for line in Path(s.log).read_text(errors="replace").splitlines():
        if "DB loaded from disk:" in line:
            found = float(line.split("DB loaded from disk:")[1].split()[0])
    return found


def cmd_rdb(args) -> None:
    header("densekv vs redis: RDB save and load", args)
    n = args.n or 10_000_000
    got = {}
    for s in one_at_a_time(args):
        load_checked(s, "mixed", n)
        r = got[s.name] = {"save": [], "bgsave": [], "ready": [], "logged": []}
        for _ in range(args.rounds):
            with Conn(s.port, timeout=args.timeout) as c:
                t0 = time.perf_counter()
                c.call("SAVE")
                r["save"].append(time.perf_counter() - t0)
        r["size"] = os.path.getsize(os.path.join(s.dir, "dump.rdb"))
        r["bgsave"] = [run_job(s, "bgsave") for _ in range(args.rounds)]
        for _ in range(args.rounds):
            s.stop(keep_dir=True)
            s.start(ready_within=args.timeout)
            r["ready"].append(s.ready_secs)
            r["logged"].append(logged_load_secs(s))
            check_dbsize(s, n)
    rows = []
    for what, key, unit in (("SAVE", "save", "s"), ("BGSAVE (to rdb_bgsave_in_progress:0)", "bgsave", "s"),
                            ("load: start to first PING", "ready", "s"),
                            ("load: log's `DB loaded from disk`", "logged", "s"), ("file size", "size", "MiB")):
        a, b = got["densekv"][key], got["redis"][key]
        if unit == "MiB":
            a, b = a / 2**20, b / 2**20
        else:
            a, b = (statistics.median(x) if None not in x else 0 for x in (a, b))
        rows.append([what, f"{a:,.2f} {unit}", f"{b:,.2f} {unit}", ratio(a, b)])
    print(f"N={n:,}: `SET k:<n> <20 bytes>` for even n, `HSET h:<n> f1 v1 f2 v2 f3 v3` for odd n; "
          "rdbcompression and rdbchecksum on (defaults); one server at a time; "
          f"median of {args.rounds} round{'s' if args.rounds > 1 else ''}.\n")
    table(["", "densekv", "redis", "densekv/redis"], rows)


def run_job(s: Server, job: str, poll: float = 0.01) -> float:
    """Start the background `job` and wait for its end; seconds from start to end."""
    t0 = time.perf_counter()
    with Conn(s.port) as c:
        c.call(job.upper())
    wait_job(s, job, poll)
    return time.perf_counter() - t0


def has_job(s: Server, job: str) -> bool:
    """Whether the server runs `job` (one run, which also warms it up)."""
    try:
        run_job(s, job)
    except RuntimeError as e:
        if "unknown command" in str(e).lower():
            return False
        raise
    return True


def save_runner(s: Server, job: str, stop, done: list) -> None:
    """Start `job` back to back until `stop` is set; append each one's seconds to `done`,
    or the exception that stopped it."""
    try:
        while not stop.is_set():
            done.append(run_job(s, job))
    except Exception as e:  # reported by the caller, not lost with the thread
        done.append(e)


def latency_probe(port: int, stop, worst: list) -> None:
    """One SET every millisecond on its own connection; worst[0] is the longest round trip."""
    cmd = encode("SET", "probe", "1")
    with Conn(port) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            c.sock.sendall(cmd)
            c.reply()
            worst[0] = max(worst[0], time.perf_counter() - t0)
            time.sleep(0.001)


def throughput_run(args, s: Server, pipeline: int, job: str | None) -> dict:
    stop, done, worst = threading.Event(), [], [0.0]
    threads = [threading.Thread(target=latency_probe, args=(s.port, stop, worst))]
    if job:
        threads.append(threading.Thread(target=save_runner, args=(s, job, stop, done)))
    for t in threads:
        t.start()
    try:
        time.sleep(0.2)  # the first save is under way
        n = args.n or (2_000_000 if pipeline > 1 else 300_000)
        r = run_benchmark(bench_argv(s, "set", args.clients, n, args.keys, pipeline, "-d", "100"),
                          s, args.timeout)["SET"]
    finally:
        stop.set()
        for t in threads:
            t.join()
    if job:
        wait_job(s, job)  # the last one ends before the next run
        for e in done:
            if isinstance(e, Exception):
                raise RuntimeError(f"{s.name}: {job.upper()} failed during the run: {e}")
    return {"rps": float(r[0]), "max": float(r[-1]), "probe": worst[0] * 1000, "jobs": len(done)}


def cmd_save_throughput(args) -> None:
    job = args.during
    header(f"densekv vs redis: SET throughput while {job.upper()} runs", args)
    print(f"- redis-benchmark: {run_text(['redis-benchmark', '--version'])}\n")
    servers = start_servers(args)
    got: dict[tuple[str, int], list[tuple[dict, dict]]] = {}
    missing = []
    try:
        for s in servers:
            load_checked(s, "values100", args.keys)
            if not has_job(s, job):
                missing.append(s.name)
        for rnd in range(args.rounds):
            for pipeline in args.pipeline:
                for s in servers if rnd % 2 == 0 else servers[::-1]:
                    if s.name not in missing:
                        got.setdefault((s.name, pipeline), []).append(
                            (throughput_run(args, s, pipeline, None), throughput_run(args, s, pipeline, job)))
    finally:
        stop_servers(servers)
    for name in missing:
        print(f"**{name} has no {job.upper()} (unknown command): not measured.**\n")
    rows = []
    for (name, pipeline), runs in got.items():
        for i, (without, during) in enumerate(runs, 1):
            rows.append([name, pipeline, i, f"{without['rps']:,.0f}", f"{during['rps']:,.0f}",
                         f"{during['rps'] / without['rps']:.2f}", f"{without['max']:.1f}", f"{during['max']:.1f}",
                         f"{without['probe']:.1f}", f"{during['probe']:.1f}", during["jobs"]])
        if len(runs) > 1:
            rows.append([name, pipeline, "median", "", "",
                         f"{statistics.median(d['rps'] / w['rps'] for w, d in runs):.2f}", "",
                         f"{statistics.median(d['max'] for _, d in runs):.1f}", "",
                         f"{statistics.median(d['probe'] for _, d in runs):.1f}", ""])
    print(f"Dataset: {args.keys:,} keys `SET key:<12 digits> <100 bytes>`; redis-benchmark -t set -d 100 "
          f"-r {args.keys:,} -c {args.clients}; each run without a save, then with {job.upper()} started "
          "again as soon as the last one ends (INFO persistence polled every 10 ms). A probe "
          "connection sends one SET every millisecond throughout and records its longest round trip.\n")
    table(["server", "-P", "round", "SET/s without", f"SET/s during {job}", "during/without",
           "bench max ms without", "bench max ms during", "probe max ms without", "probe max ms during",
           f"{job}s done"], rows)


# ---------------------------------------------------------------- cache

CACHE_BATCH = 200
CACHE_DRIVER = ROOT / "bench" / "cache_driver.c"


def build_cache_driver(dest: str) -> str:
    """Compiles the cache workload's client (C, so that it keeps up with the servers)."""
    exe = os.path.join(dest, "cache_driver")
    subprocess.run(["cc", "-O2", "-o", exe, str(CACHE_DRIVER), "-lm"], check=True)
    return exe


def cache_run(args, s: Server, driver: str) -> dict:
    def launch(measure_at: float, end: float) -> list[subprocess.Popen]:
        return [subprocess.Popen([driver, str(s.port), str(args.keys), str(args.zipf), str(CACHE_BATCH),
                                  str(w + 1), f"{measure_at:.3f}", f"{end:.3f}"],
                                 stdout=subprocess.PIPE, text=True) for w in range(args.workers)]

    # Fill: the same workload, unmeasured, until the server starts evicting.
    fill_end = time.monotonic() + args.fill_limit
    procs = launch(fill_end, fill_end)
    while time.monotonic() < fill_end and int(s.info("stats").get("evicted_keys", "0")) == 0:
        time.sleep(0.2)
    for p in procs:
        p.terminate()
        p.wait()
    t0 = time.monotonic()
    warm_until, end = t0 + args.warmup, t0 + args.warmup + args.seconds
    procs = launch(warm_until, end)
    time.sleep(max(0.0, warm_until - time.monotonic()))
    cpu0, ev0 = s.main_thread_cpu(), int(s.info("stats")["evicted_keys"])
    time.sleep(max(0.0, end - time.monotonic()))
    cpu1, ev1 = s.main_thread_cpu(), int(s.info("stats")["evicted_keys"])
    got = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        if p.returncode != 0:
            raise SystemExit(f"cache driver failed against {s.name} (exit {p.returncode})")
        got.append([int(x) for x in out.split()])
    cmds, gets, hits = (sum(g[i] for g in got) for i in range(3))
    mem = s.info("memory")
    keys = int(s.info("keyspace").get("db0", "keys=0").split(",")[0].split("=")[1])
    return {"ops": cmds / args.seconds, "hit": hits / max(gets, 1), "keys": keys,
            "evicted": ev1 - ev0, "cpu": (cpu1 - cpu0) / args.seconds,
            "used": int(mem["used_memory"])}


# ---------------------------------------------------------------- aggregation (seed 003)


def agg_days(days: int) -> list[bytes]:
    first = (datetime.date(2025, 1, 1) - datetime.date(1970, 1, 1)).days
    return [b"%d" % (first + d) for d in range(days)]


def agg_load(s: Server, keys: int, days: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    members = agg_days(days)
    with Conn(s.port) as c:
        for lo in range(0, keys, 100):
            cmds = []
            for i in range(lo, min(keys, lo + 100)):
                args = [b"ZADD", b"agg:%d" % i]
                for m in members:
                    args += [b"%d" % rng.randint(1, 1000), m]
                cmds.append(encode(*args))
            c.send_counted(b"".join(cmds), len(cmds))


def probe_pings(port: int, stop, worst: list) -> None:
    """One PING per ms until `stop`; the longest round trip (s) goes into worst[0]."""
    with Conn(port) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            c.call("PING")
            worst[0] = max(worst[0], time.perf_counter() - t0)
            time.sleep(0.001)


def cmd_aggregate(args) -> None:
    header("densekv vs redis: ZUNIONSTORE / ZINTERSTORE over many sorted sets (seed 003)", args)
    servers = start_servers(args)
    try:
        per_member = {}
        for s in servers:
            before = memory_sample(s, 0.2)[0]
            t0 = time.perf_counter()
            agg_load(s, args.keys, args.days)
            load_s = time.perf_counter() - t0
            after = memory_sample(s)[0]
            per_member[s.name] = ((after - before) / (args.keys * args.days), load_s)
        rows = [["used_memory B/member", f"{per_member['densekv'][0]:.1f}", f"{per_member['redis'][0]:.1f}",
                 ratio(per_member['densekv'][0], per_member['redis'][0]), "", ""]]
        rng = random.Random(7)
        picks = [rng.sample(range(args.keys), min(args.inputs, args.keys)) for _ in range(args.rounds)]
        for op in ("ZUNIONSTORE", "ZINTERSTORE"):
            times = {s.name: [] for s in servers}
            stalls = {s.name: 0.0 for s in servers}
            cards = {}
            for pick in picks:
                for s in servers:
                    stop, worst = threading.Event(), [0.0]
                    probe = threading.Thread(target=probe_pings, args=(s.port, stop, worst))
                    probe.start()
                    time.sleep(0.02)
                    with Conn(s.port) as c:
                        call = [op, "agg:out", len(pick), *[b"agg:%d" % i for i in pick], "AGGREGATE", "SUM"]
                        t0 = time.perf_counter()
                        n = c.call(*call)
                        times[s.name].append(time.perf_counter() - t0)
                        cards.setdefault(s.name, int(n))
                    stop.set()
                    probe.join()
                    stalls[s.name] = max(stalls[s.name], worst[0])
            if cards["densekv"] != cards["redis"]:
                raise RuntimeError(f"{op}: densekv stored {cards['densekv']} members, redis {cards['redis']}")
            d, r = (statistics.median(times[k]) * 1000 for k in ("densekv", "redis"))
            rows.append([f"{op} {len(picks[0])} keys, median ms", f"{d:.1f}", f"{r:.1f}", ratio(d, r),
                         f"{stalls['densekv'] * 1000:.1f}", f"{stalls['redis'] * 1000:.1f}"])
        print(f"{args.keys:,} ZSETs of {args.days} members; load {per_member['densekv'][1]:.1f} s (densekv), "
              f"{per_member['redis'][1]:.1f} s (redis); {args.rounds} rounds\n")
        table(["measure", "densekv", "redis", "densekv/redis", "densekv max PING ms", "redis max PING ms"], rows)
    finally:
        stop_servers(servers)


# ---------------------------------------------------------------- seed memory layouts

SEED_SESSIONS = 1_000_000
SEED_SET_SIZES = [100, 1000, 10000, 100000, 1000000]


def msgpack_uint(n: int) -> bytes:
    """MessagePack's shortest encoding of a non-negative integer."""
    if n < 0x80:
        return bytes([n])
    if n < 0x100:
        return b"\xcc" + n.to_bytes(1, "big")
    if n < 0x10000:
        return b"\xcd" + n.to_bytes(2, "big")
    return b"\xce" + n.to_bytes(4, "big")


def partitioned_session_commands(n: int, seed: int = 2):
    """Seed 002's iteration 4: a session id of 40 random hex digits; its first 4 digits
    name the partition (65,536 of them); HSET session:data:<p> <the other 36 digits as
    18 bytes> <msgpack {i: identity_id, x: expires_at}> and ZADD session:expiry:<p>
    <expires_at> <the same 18 bytes>. Sessions are created over time, each expiring 30
    days after its creation."""
    rng = random.Random(seed)
    start = 1_800_000_000
    for lo in range(0, n, 5_000):
        cmds = []
        for i in range(lo, min(n, lo + 5_000)):
            sid = rng.getrandbits(160).to_bytes(20, "big").hex()
            expires = start + 30 * 86_400 + i // 10
            sub = bytes.fromhex(sid[4:])
            data = b"\x82\xa1i" + msgpack_uint(i) + b"\xa1x" + msgpack_uint(expires)
            cmds.append(encode("HSET", "session:data:" + sid[:4], sub, data))
            cmds.append(encode("ZADD", "session:expiry:" + sid[:4], expires, sub))
        yield b"".join(cmds), len(cmds)


def set_member_commands(kind: str, n: int, copies: int, per_cmd: int = 500):
    """SADD of n members into each of `copies` sets: kind "uuid16" is 16 random bytes
    (seed 001's binary UUIDs), "chars24" 24 random characters of [a-z0-9] (seed 000)."""
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
    for copy in range(copies):
        rng = random.Random(copy + 1)
        key = b"s%d" % copy
        for lo in range(0, n, per_cmd * 20):
            cmds = []
            for j in range(lo, min(n, lo + per_cmd * 20), per_cmd):
                m = min(per_cmd, n - j)
                if kind == "uuid16":
                    members = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(m)]
                else:
                    members = [bytes(rng.choices(alphabet, k=24)) for _ in range(m)]
                cmds.append(encode("SADD", key, *members))
            yield b"".join(cmds), len(cmds)


def measure_load(s: Server, commands, entries: int, check) -> tuple[float, str]:
    """used_memory delta per entry of loading `commands` into a flushed server, and
    what `check(conn)` returns (it raises when the data is not what was meant)."""
    with Conn(s.port) as c:
        c.call("FLUSHALL")
        c.call("SET", "seed", "1")  # first-key costs are not the workload's
    time.sleep(0.3)
    before = int(s.info("memory")["used_memory"])
    with Conn(s.port) as c:  # closed before measuring: its buffers are not data
        for data, count in commands:
            c.send_counted(data, count)
    time.sleep(0.3)
    after = int(s.info("memory")["used_memory"])
    with Conn(s.port) as c:
        note = check(c)
        c.call("FLUSHALL")
    return (after - before) / entries, note


def cmd_seeds(args) -> None:
    header("densekv vs redis: the seeds' own layouts, used_memory delta per entry", args)
    cases = []
    if "partitioned" in args.cases:
        n = args.n or SEED_SESSIONS

        def check_sessions(c):
            keys = int(c.call("DBSIZE")) - 1
            zcard = sum(int(c.call("ZCARD", b"session:expiry:%04x" % p)) for p in range(0, 65536, 4096))
            if keys != 2 * 65536 or zcard == 0:
                raise SystemExit(f"{keys} partition keys, expected {2 * 65536}")
            h = c.call("OBJECT", "ENCODING", "session:data:0000").decode()
            z = c.call("OBJECT", "ENCODING", "session:expiry:0000").decode()
            return f"{keys:,} keys, {h} + {z}"
        cases.append((f"seed 002 partitioned sessions (HASH + ZSET per partition), per session", n,
                      lambda n=n: partitioned_session_commands(n), check_sessions, 60.0))
    for kind, sizes, bar in (("uuid16", [1_000_000], 18.0), ("chars24", args.sizes, 28.0)):
        if kind not in args.cases:
            continue
        for size in sizes:
            copies = max(1, 200_000 // size)

            def check_set(c, size=size, copies=copies):
                got = int(c.call("SCARD", "s0"))
                if got != size or int(c.call("DBSIZE")) - 1 != copies:
                    raise SystemExit(f"set holds {got}, expected {size}")
                return c.call("OBJECT", "ENCODING", "s0").decode()
            label = ("seed 001 one SET of 16-byte members" if kind == "uuid16"
                     else f"seed 000 SETs of 24-char members ({copies:,} sets)")
            cases.append((label + ", per member", size * copies,
                          lambda kind=kind, size=size, copies=copies: set_member_commands(kind, size, copies),
                          check_set, bar))
    servers = start_servers(args)
    try:
        rows = []
        for label, entries, commands, check, bar in cases:
            got = {s.name: measure_load(s, commands(), entries, check) for s in servers}
            d, r = got["densekv"], got["redis"]
            rows.append([label, f"{entries:,}", f"{d[0]:.1f}", d[1], f"{r[0]:.1f}", r[1],
                         ratio(d[0], r[0]), f"{bar:.0f}", "met" if d[0] <= bar else "not met"])
            print(f"- {label}: densekv {d[0]:.1f}, redis {r[0]:.1f}", flush=True)
        print()
        table(["workload", "entries", "densekv B", "densekv layout", "redis B", "redis layout",
               "densekv/redis", "target B", ""], rows)
    finally:
        stop_servers(servers)


# ---------------------------------------------------------------- value compression


def public_records() -> dict[str, list[tuple[bytes, bytes]]]:
    """(key suffix, compact JSON) records of public data sets that packages on
    this machine ship, by name; a set whose package is missing is left out.

      iso639     Debian's iso-codes: ISO 639-3 languages, ~66 bytes a record
      ec2shapes  botocore (AWS SDK data): the EC2 API's structure shapes of
                 200-4096 bytes, ~700 bytes a record
    """
    import gzip
    import importlib.util
    import json
    out = {}
    compact = lambda r: json.dumps(r, separators=(",", ":")).encode()
    try:
        with open("/usr/share/iso-codes/json/iso_639-3.json") as f:
            recs = json.load(f)["639-3"]
        out["iso639"] = [(r["alpha_3"].encode(), compact(r)) for r in recs]
    except OSError:
        pass
    spec = importlib.util.find_spec("botocore")
    if spec and spec.origin:
        found = sorted(Path(spec.origin).parent.glob("data/ec2/*/service-2.json*"))
        if found:
            opener = gzip.open if found[-1].suffix == ".gz" else open
            with opener(found[-1], "rt") as f:
                shapes = json.load(f)["shapes"]
            recs = [(k.encode(), compact(dict(name=k, **v))) for k, v in shapes.items()
                    if v.get("type") == "structure"]
            out["ec2shapes"] = [(k, v) for k, v in recs if 200 <= len(v) <= 4096]
    return out


def record_commands(prefix: bytes, records: list[tuple[bytes, bytes]], n: int, batch: int = 5000):
    """SET <prefix>:<record key>:<copy> <record>, cycling through the records
    until n keys; yields (resp bytes, count). `record_raw` gives the raw
    key+value bytes per key of the same keys."""
    parts = []
    for i in range(n):
        k, v = records[i % len(records)]
        key = b"%s:%s:%d" % (prefix, k, i // len(records))
        parts.append(encode(b"SET", key, v))
        if len(parts) == batch:
            yield b"".join(parts), len(parts)
            parts = []
    if parts:
        yield b"".join(parts), len(parts)


def record_raw(prefix: bytes, records: list[tuple[bytes, bytes]], n: int) -> float:
    total = 0
    for i in range(n):
        k, v = records[i % len(records)]
        total += len(b"%s:%s:%d" % (prefix, k, i // len(records))) + len(v)
    return total / n


EVENT_KINDS = [(b"page_view", 60), (b"click", 20), (b"add_to_cart", 8), (b"search", 7),
               (b"checkout", 3), (b"purchase", 2)]
EVENT_PAGES = [b"/", b"/products/%d", b"/category/%s", b"/search", b"/cart", b"/checkout", b"/account"]
EVENT_CATEGORIES = [b"shoes", b"books", b"garden", b"toys", b"kitchen", b"audio", b"sports"]
EVENT_REFERRERS = [b"https://www.google.com/", b"https://www.bing.com/", b"https://t.co/", b"",
                   b"https://www.facebook.com/", b"https://duckduckgo.com/"]
EVENT_DEVICES = [(b"mobile", b"Android 14"), (b"mobile", b"iOS 17.5"), (b"desktop", b"Windows 11"),
                 (b"desktop", b"macOS 14.5"), (b"tablet", b"iPadOS 17.5"), (b"desktop", b"Linux")]
EVENT_COUNTRIES = [b"US", b"DE", b"GB", b"FR", b"IN", b"BR", b"JP", b"NL", b"ES", b"CA"]


def event_records(n: int, seed: int = 1):
    """n web-shop analytics events as an event pipeline emits them (one JSON
    object each, 180-260 bytes): a millisecond timestamp that grows, one of
    ~50,000 users with a session id of 16 random hex digits kept for a
    while, the kind of event by a skewed choice, its page, referrer, device,
    country, and a product and price for cart events. Written for this
    benchmark (no public event stream of this size ships with a package)."""
    rng = random.Random(seed)
    kinds = [k for k, w in EVENT_KINDS for _ in range(w)]
    ts = 1_764_000_000_000
    sessions = {}
    for i in range(n):
        ts += rng.randrange(1, 120)
        user = rng.randrange(100_000, 150_000)
        sid = sessions.get(user)
        if sid is None or rng.random() < 0.05:
            sid = sessions[user] = b"%016x" % rng.getrandbits(64)
        kind = rng.choice(kinds)
        page = rng.choice(EVENT_PAGES)
        if b"%d" in page:
            page = page % rng.randrange(1000, 99999)
        elif b"%s" in page:
            page = page % rng.choice(EVENT_CATEGORIES)
        device, os_ = rng.choice(EVENT_DEVICES)
        rec = (b'{"event":"%s","ts":%d,"user_id":%d,"session_id":"%s","page":"%s","referrer":"%s",'
               b'"device":"%s","os":"%s","country":"%s"' % (kind, ts, user, sid, page, rng.choice(EVENT_REFERRERS),
                                                         device, os_, rng.choice(EVENT_COUNTRIES)))
        if kind in (b"add_to_cart", b"checkout", b"purchase"):
            rec += b',"product_id":%d,"price":%d.%02d,"currency":"EUR"' % (
                rng.randrange(1000, 99999), rng.randrange(1, 300), rng.randrange(100))
        yield rec + b"}"


def event_commands(key: bytes, n: int, per_cmd: int = 100, batch: int = 100):
    """RPUSH <key> with `per_cmd` event records a command, `batch` commands a
    yield: (resp bytes, count)."""
    parts, elems = [], []
    for rec in event_records(n):
        elems.append(rec)
        if len(elems) == per_cmd:
            parts.append(encode(b"RPUSH", key, *elems))
            elems = []
            if len(parts) == batch:
                yield b"".join(parts), len(parts)
                parts = []
    if elems:
        parts.append(encode(b"RPUSH", key, *elems))
    if parts:
        yield b"".join(parts), len(parts)


def hash_session_commands(n: int, batch: int = 5000):
    """Seed 002's hash-per-session layout: HSET session:<40 hex> i <7-digit
    user id> x <10-digit timestamp>, then EXPIRE it 30 days; (resp bytes,
    count) with both commands counted."""
    rng = random.Random(1)
    parts = []
    for _ in range(n):
        key = b"session:%040x" % rng.getrandbits(160)
        parts.append(encode(b"HSET", key, b"i", b"%d" % rng.randrange(1_000_000, 10_000_000),
                            b"x", b"%d" % (1_700_000_000 + rng.randrange(SESSION_TTL))))
        parts.append(encode(b"EXPIRE", key, SESSION_TTL))
        if len(parts) == 2 * batch:
            yield b"".join(parts), len(parts)
            parts = []
    if parts:
        yield b"".join(parts), len(parts)


def workload_commands(workload: str, n: int):
    for data, count, _reply in batches(workload, n):
        yield data, count


def cmd_compression(args) -> None:
    header("densekv value-compression and key-compression on vs off vs redis: used_memory delta per entry", args)
    n = args.n or 1_000_000
    cases = []  # (label, entries, commands factory, raw bytes per entry, bar as a ratio of raw or bytes)
    if "sessions" in args.cases:
        cases.append(("seed 002 SETEX session:<40 hex> <46-byte JSON>", n,
                      lambda: workload_commands("sessions", n), 48 + 46, ("B", 60.0)))
    if "hashsessions" in args.cases:
        # key, two one-byte field names, 7 + 10 digits of values
        cases.append(("seed 002 HSET session:<40 hex> i <n> x <ts> + EXPIRE", n,
                      lambda: hash_session_commands(n), 48 + 2 + 7 + 10, ("B", 50.0)))
    if "intkeys" in args.cases:
        raw = sum(2 * len(b"%d" % i) + 4 for i in range(n)) / n
        cases.append(("SET key:<n> <n>", n, lambda: workload_commands("intkeys", n), raw, ("B", 16.0)))
    if "events" in args.cases:
        m = args.events
        raw = sum(len(r) for r in event_records(m)) / m
        cases.append((f"RPUSH of {m:,} JSON events (~{raw:.0f} B) into one list", m,
                      lambda: event_commands(b"events", m), raw, ("x raw", 0.4)))
    records = public_records()
    for name, bar in (("iso639", 0.8), ("ec2shapes", 0.5)):
        if name not in args.cases:
            continue
        if name not in records:
            print(f"- {name}: data set not installed, skipped", flush=True)
            continue
        recs = records[name]
        m = args.records
        avg = sum(len(v) for _, v in recs) / len(recs)
        cases.append((f"{name}: {len(recs):,} public JSON records (avg {avg:.0f} B), cycled",
                      m, lambda recs=recs, m=m, name=name: record_commands(name.encode(), recs, m),
                      record_raw(name.encode(), recs, m), ("x raw", bar)))
    servers = [Server("densekv off", [args.densekv_bin]),
               Server("densekv on", [args.densekv_bin, "--value-compression", "yes", "--key-compression", "yes"]),
               Server("redis", [args.redis_bin, "--daemonize", "no"])]
    try:
        for s in servers:
            s.start()
        rows = []
        for label, entries, commands, raw, (unit, bar) in cases:
            got = {s.name: measure_load(s, commands(), entries, lambda c: c.call("DBSIZE"))[0]
                   for s in servers}
            on = got["densekv on"]
            met = on <= bar if unit == "B" else on / raw <= bar
            rows.append([label, f"{entries:,}", f"{raw:.1f}", f"{got['densekv off']:.1f}", f"{on:.1f}",
                         f"{got['redis']:.1f}", ratio(on, raw), ratio(on, got["densekv off"]),
                         f"{bar:g} {unit}", "met" if met else "not met"])
            print(f"- {label}: off {got['densekv off']:.1f}, on {on:.1f}, redis {got['redis']:.1f}, "
                  f"raw {raw:.1f}", flush=True)
        print()
        table(["workload", "entries", "raw B", "densekv off B", "densekv on B", "redis B",
               "on/raw", "on/off", "target", ""], rows)
    finally:
        stop_servers(servers)


def cmd_compression_load(args) -> None:
    """Load time of one RDB file of seed 002's sessions: densekv with
    compression off, densekv with both switches on (it trains and packs
    while it loads), and redis, one server at a time, alternating."""
    header("densekv compression off vs on vs redis: RDB load of seed 002 sessions", args)
    n = args.n or 10_000_000
    maker = Server("densekv maker", [args.densekv_bin])
    try:
        maker.start()
        load_checked(maker, "sessions", n)
        with Conn(maker.port, timeout=args.timeout) as c:
            c.call("SAVE")
        rdb = os.path.join(maker.dir, "dump.rdb")
        size = os.path.getsize(rdb)
        maker.stop(keep_dir=True)
        servers = [Server("densekv off", [args.densekv_bin]),
                   Server("densekv on", [args.densekv_bin, "--value-compression", "yes", "--key-compression", "yes"]),
                   Server("redis", [args.redis_bin, "--daemonize", "no"])]
        got: dict[str, dict[str, list[float]]] = {s.name: {"ready": [], "logged": [], "mem": [], "user": [], "sys": []}
                                                  for s in servers}
        try:
            for rnd in range(args.rounds):
                for s in servers if rnd % 2 == 0 else servers[::-1]:
                    shutil.copy(rdb, os.path.join(s.dir, "dump.rdb"))
                    s.start(ready_within=args.timeout)
                    got[s.name]["ready"].append(s.ready_secs)
                    got[s.name]["logged"].append(logged_load_secs(s) or 0.0)
                    check_dbsize(s, n)
                    with Conn(s.port) as c:
                        info = c.call("INFO", "memory").decode()
                    got[s.name]["mem"].append(int(info.split("used_memory:")[1].split()[0]) / n)
                    f = Path(f"/proc/{s.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                    got[s.name]["user"].append(int(f[11]) / os.sysconf("SC_CLK_TCK"))
                    got[s.name]["sys"].append(int(f[12]) / os.sysconf("SC_CLK_TCK"))
                    s.stop(keep_dir=True)
        finally:
            stop_servers(servers)
    finally:
        maker.stop()
    med = {name: {k: statistics.median(v) for k, v in d.items()} for name, d in got.items()}
    off = med["densekv off"]
    fastest = {name: min(d["ready"]) for name, d in got.items()}
    rows = [[name, f"{m['ready']:.2f} s", f"{m['logged']:.2f} s", ratio(m["ready"], off["ready"]),
             f"{fastest[name]:.2f} s", ratio(fastest[name], fastest["densekv off"]),
             f"{m['user']:.2f} s", f"{m['sys']:.2f} s", f"{m['mem']:.1f}"]
            for name, m in med.items()]
    print(f"N={n:,} sessions (`SETEX session:<40 hex> <ttl> <46-byte JSON>`), one RDB file of "
          f"{size / 2**20:,.1f} MiB written by densekv; median of {args.rounds} round{'s' if args.rounds > 1 else ''}.\n")
    table(["server", "start to first PING", "log's `DB loaded`", "ready / densekv off", "fastest", "fastest / densekv off",
           "user CPU", "system CPU", "used_memory B/session"], rows)
    print("(the kernel's page-fault time, system CPU, swings by seconds between identical loads of millions "
          "of keys on a small machine: the fastest round and user CPU are the steadier figures)\n")


def send_spread(port: int, cmds: list[bytes], clients: int, depth: int, reply_len: int) -> None:
    """Sends `cmds` over `clients` connections, each with at most `depth` requests in
    flight (as redis-benchmark's -c and -P do), every reply `reply_len` bytes; reads them
    all and checks none is an error."""
    shares = [cmds[i::clients] for i in range(clients)]
    sel = selectors.DefaultSelector()
    conns = []
    for share in shares:
        if not share:
            continue
        sock = socket.create_connection((HOST, port), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        state = {"sock": sock, "share": share, "at": 0, "due": 0, "first": b""}
        conns.append(state)
        sel.register(sock, selectors.EVENT_READ, state)

    def send_next(st) -> bool:
        part = st["share"][st["at"]:st["at"] + depth]
        if not part:
            return False
        st["at"] += len(part)
        st["due"] = len(part) * reply_len
        st["sock"].sendall(b"".join(part))
        return True

    live = sum(send_next(st) for st in conns)
    try:
        while live:
            ready = sel.select(timeout=60)
            if not ready:
                raise RuntimeError("no reply for 60 s (a reply of another length?)")
            for key, _ in ready:
                st = key.data
                data = st["sock"].recv(1 << 16)
                if not data:
                    raise ConnectionError("server closed the connection")
                if not st["first"]:
                    st["first"] = data[:1]
                    if data[:1] == b"-":
                        raise RuntimeError(f"command failed: {data[:100]!r}")
                st["due"] -= len(data)
                if st["due"] < 0:
                    raise RuntimeError(f"unexpected replies: {data[:100]!r}")
                if st["due"] == 0:
                    st["first"] = b""
                    if not send_next(st):
                        live -= 1
    finally:
        for st in conns:
            st["sock"].close()
        sel.close()


def cmd_compression_cpu(args) -> None:
    """Server main-thread CPU per GET and per SETEX on seed 002's sessions
    (or SET on the EC2 API shape records, zstd's workload), with
    compression off and on (keys and values), alternating, beside redis."""
    rng = random.Random(7)
    if args.case == "ec2shapes":
        header("densekv compression off vs on vs redis: main-thread CPU per request, ec2shapes records (zstd)", args)
        recs = public_records().get("ec2shapes")
        if not recs:
            raise SystemExit("ec2shapes: botocore is not installed")
        n = args.n or 100_000
        keys = [b"ec2shapes:%s:%d" % (recs[i % len(recs)][0], i // len(recs)) for i in range(n)]
        value = lambda i: recs[(i * 7 + 3) % len(recs)][1]
        load_data = [encode(b"SET", k, recs[i % len(recs)][1]) for i, k in enumerate(keys)]
        order = keys[:]
        rng.shuffle(order)
        gets = [encode(b"GET", k) for k in order]
        sets = [encode(b"SET", k, value(i)) for i, k in enumerate(order)]
        set_name = "SET"
    else:
        header("densekv compression off vs on vs redis: main-thread CPU per request, seed 002 sessions", args)
        n = args.n or 300_000
        keys = [b"session:%040x" % rng.getrandbits(160) for _ in range(n)]
        load_data = [encode(b"SETEX", k, SESSION_TTL, session_json(rng)) for k in keys]
        order = keys[:]
        rng.shuffle(order)
        gets = [encode(b"GET", k) for k in order]
        sets = [encode(b"SETEX", k, SESSION_TTL, session_json(rng)) for k in order]
        set_name = "SETEX"
    servers = [Server("densekv off", [args.densekv_bin]),
               Server("densekv on", [args.densekv_bin, "--value-compression", "yes", "--key-compression", "yes"]),
               Server("redis", [args.redis_bin, "--daemonize", "no"])]
    chunk = args.pipeline
    if args.clients > 1 and args.case != "sessions":
        raise SystemExit("--clients: sessions only (their replies have one length)")
    # Every session value is 46 bytes: a GET answers "$46\r\n<value>\r\n".
    reply_len = {"GET": 53, "SETEX": 5}

    def send_all(s: Server, cmds: list[bytes], test: str) -> float:
        before = s.main_thread_cpu()
        if args.clients == 1:
            with Conn(s.port) as c:
                for i in range(0, len(cmds), chunk):
                    part = cmds[i:i + chunk]
                    c.send_counted(b"".join(part), len(part))
        else:
            send_spread(s.port, cmds, args.clients, chunk, reply_len[test])
        return (s.main_thread_cpu() - before) / len(cmds) * 1e9

    samples: dict[tuple[str, str], list[float]] = {}
    try:
        for s in servers:
            s.start()
            with Conn(s.port) as c:
                for i in range(0, len(load_data), 1000):
                    c.send_counted(b"".join(load_data[i:i + 1000]), len(load_data[i:i + 1000]))
        for rnd in range(args.rounds):
            for test, cmds in (("GET", gets), (set_name, sets)):
                for s in (servers if rnd % 2 == 0 else servers[::-1]):
                    samples.setdefault((s.name, test), []).append(send_all(s, cmds, test))
        info = servers[1].info("compression")
    finally:
        stop_servers(servers)
    rows = []
    for test in ("GET", set_name):
        off, on, red = (statistics.median(samples[(name, test)]) for name in ("densekv off", "densekv on", "redis"))
        rows.append([test, f"{off:,.0f}", f"{on:,.0f}", f"{red:,.0f}", ratio(on, off), ratio(on, red)])
    table(["command", "densekv off ns/req", "densekv on ns/req", "redis ns/req", "on/off", "on/redis"], rows)
    print(f"(median of {args.rounds} rounds of {n:,} requests; pipelined {chunk} deep over {args.clients} "
          f"connection{'s' if args.clients > 1 else ''}; "
          f"compressed values {info.get('compressed_values')} of {n:,}, zstd {info.get('compressed_values_zstd')})\n", flush=True)


# ---------------------------------------------------------------- replication


def link_status(s: Server) -> str:
    return s.info("replication").get("master_link_status", "")


def cmd_repl(args) -> None:
    header("densekv vs redis: full sync to a fresh replica, and SET throughput with two replicas", args)
    n = args.n or 10_000_000
    sync_args = ["--repl-diskless-sync-delay", "0"]
    rows = []
    for name, binary in (("densekv", args.densekv_bin), ("redis", args.redis_bin)):
        extra = [] if name == "densekv" else ["--daemonize", "no"]
        primary = Server(name, [binary, *extra, *sync_args]).start()
        replica = Server(name + "-replica", [binary, *extra, *sync_args])
        try:
            load_checked(primary, "mixed", n)
            time.sleep(args.settle)
            steady = int(statistics.median(pss_samples(primary, 5)))
            replica.start()
            stop, got = threading.Event(), []
            sampler = threading.Thread(target=pss_sampler, args=(primary, stop, got))
            sampler.start()
            try:
                t0 = time.perf_counter()
                with Conn(replica.port) as c:
                    c.call("REPLICAOF", HOST, str(primary.port))
                while link_status(replica) != "up":
                    if time.perf_counter() - t0 > args.timeout:
                        raise SystemExit(f"{name}: no sync within {args.timeout} s; see {replica.log}")
                    time.sleep(0.01)
                secs = time.perf_counter() - t0
            finally:
                stop.set()
                sampler.join()
            check_dbsize(replica, n)
            peak = max(got)
            rows.append([name, f"{secs:.2f}", f"{steady / 2**20:,.0f}", f"{peak / 2**20:,.0f}", f"{peak / steady:.2f}"])
        finally:
            replica.stop()
            primary.stop()
    print(f"N={n:,} keys (`SET k:<n> <20 bytes>` / `HSET h:<n>` with 3 fields), loaded into the primary; "
          "then REPLICAOF on a fresh replica of the same server, timed until master_link_status:up "
          "(the replica has loaded the image); the primary's PSS, with any child it forked, sampled "
          "every 50 ms meanwhile. repl-diskless-sync-delay 0 on both, other settings their defaults. "
          "One server pair at a time.\n")
    table(["server", "full sync s", "primary steady MiB", "primary peak MiB", "peak/steady"], rows)
    d, r = float(rows[0][1]), float(rows[1][1])
    print(f"full sync time densekv/redis: {ratio(d, r)} (target <= 1.0); "
          f"densekv peak/steady {rows[0][4]} (target <= 1.10)\n", flush=True)

    # Throughput of the primary with two replicas attached.
    groups = []
    try:
        for name, binary in (("densekv", args.densekv_bin), ("redis", args.redis_bin)):
            extra = [] if name == "densekv" else ["--daemonize", "no"]
            group = [Server(name, [binary, *extra, *sync_args]).start()]
            groups.append(group)
            for i in range(2):
                rep = Server(f"{name}-replica{i}", [binary, *extra, *sync_args]).start()
                group.append(rep)
                with Conn(rep.port) as c:
                    c.call("REPLICAOF", HOST, str(group[0].port))
            for rep in group[1:]:
                while link_status(rep) != "up":
                    time.sleep(0.05)
        results: dict[tuple[str, int], list[float]] = {}
        for pipeline in args.pipeline:
            for rnd in range(args.rounds):
                for group in groups if rnd % 2 == 0 else groups[::-1]:
                    p = group[0]
                    count = 2_000_000 if pipeline > 1 else 300_000
                    r = run_benchmark(bench_argv(p, "set", args.clients, count, 1_000_000, pipeline, "-d", "100"),
                                      p, args.timeout)["SET"]
                    results.setdefault((p.name, pipeline), []).append(float(r[0]))
        trows = []
        for pipeline in args.pipeline:
            a = statistics.median(results[("densekv", pipeline)])
            b = statistics.median(results[("redis", pipeline)])
            trows.append(["SET -d 100", pipeline, f"{a:,.0f}", f"{b:,.0f}", ratio(a, b)])
        print(f"redis-benchmark -t set -d 100 -r 1,000,000 -c {args.clients} against a primary with two "
              f"replicas attached; servers alternating, median of {args.rounds} rounds (target >= 0.9)\n")
        table(["test", "-P", "densekv req/s", "redis req/s", "densekv/redis"], trows)
    finally:
        for group in groups:
            stop_servers(group)


def cmd_cache(args) -> None:
    header("Cache under eviction: Zipf keys, GET / SET on miss, allkeys-lru", args)
    print(f"- keys ids {args.keys:,}, Zipf s={args.zipf}, maxmemory {args.maxmemory}, "
          f"{args.workers} workers x pipeline {CACHE_BATCH}, warm-up {args.warmup}s, "
          f"measured {args.seconds}s\n", flush=True)
    tmp = tempfile.mkdtemp(prefix="bench-cache-")
    driver = build_cache_driver(tmp)
    extra = ["--maxmemory", args.maxmemory, "--maxmemory-policy", "allkeys-lru"]
    servers = [Server("densekv", [args.densekv_bin, *extra]),
               Server("redis", [args.redis_bin, "--daemonize", "no", *extra])]
    res = {}
    try:
        for s in servers:
            s.start()
            res[s.name] = cache_run(args, s, driver)
            s.stop()
    finally:
        stop_servers(servers)
        shutil.rmtree(tmp, ignore_errors=True)
    d, r = res["densekv"], res["redis"]
    table(["", "densekv", "redis", "densekv/redis"], [
        ["hit ratio", f"{d['hit']:.4f}", f"{r['hit']:.4f}", ratio(d["hit"], r["hit"])],
        ["keys held", f"{d['keys']:,}", f"{r['keys']:,}", ratio(d["keys"], r["keys"])],
        ["used_memory", f"{d['used']:,}", f"{r['used']:,}", ratio(d["used"], r["used"])],
        ["commands/s", f"{d['ops']:,.0f}", f"{r['ops']:,.0f}", ratio(d["ops"], r["ops"])],
        ["evicted/s", f"{d['evicted'] / args.seconds:,.0f}", f"{r['evicted'] / args.seconds:,.0f}",
         ratio(d["evicted"], r["evicted"])],
        ["server main-thread CPU (cores)", f"{d['cpu']:.2f}", f"{r['cpu']:.2f}", ""],
        ["server CPU µs per command", f"{1e6 * d['cpu'] / d['ops']:.2f}", f"{1e6 * r['cpu'] / r['ops']:.2f}",
         ratio(d["cpu"] / d["ops"], r["cpu"] / r["ops"])],
    ])
    print("Where the CPU share is well below 1.0 the clients, not the server, set the rate;\n"
          "CPU per command is then the server's cost.\n", flush=True)


# ---------------------------------------------------------------- main


# ---------------------------------------------------------------- member TTLs


def member_names(n: int) -> list[bytes]:
    return [b"m%07d" % i for i in range(n)]


def load_set(c: Conn, key: str, members: list[bytes]) -> None:
    for i in range(0, len(members), 50_000):
        part = members[i:i + 50_000]
        cmds = [encode("SADD", key, *part[j:j + 500]) for j in range(0, len(part), 500)]
        c.send_counted(b"".join(cmds), len(cmds))


def member_ttl_run(args, s: Server, expire: bool) -> dict:
    """Loads the set (with a TTL on each member if `expire`); runs the writer across the
    last deadline; returns bytes per member, reclaim lag and the writer's requests/s."""
    n = args.n or 1_000_000
    members = member_names(n)
    with Conn(s.port) as c:
        c.call("FLUSHALL")
        time.sleep(0.2)
        base = int(s.info("memory")["used_memory"])
        load_set(c, "ttlset", members)
        plain = int(s.info("memory")["used_memory"]) - base
        timed = None
        if expire:
            def set_deadlines(end_ms: int) -> float:
                """SPEXPIREAT on each member, its own deadline spread over the second
                before end_ms; returns the seconds it took."""
                t0 = time.time()
                for i in range(0, n, 50_000):
                    cmds = [encode("SPEXPIREAT", "ttlset", end_ms - 1000 + (i + j) * 1000 // n,
                                   "MEMBERS", 1, members[i + j]) for j in range(min(50_000, n - i))]
                    c.send_counted(b"".join(cmds), len(cmds))
                return time.time() - t0

            # First far deadlines, to measure memory with every TTL in place; then
            # the real ones, with room for the pass itself (twice the first one's
            # time), so that no deadline passes before the last one is set.
            took = set_deadlines(int(time.time() * 1000) + 3_600_000)
            timed = int(s.info("memory")["used_memory"]) - base
            end_ms = int((time.time() + 2 * took) * 1000) + args.ttl_ms
            set_deadlines(end_ms)
            last_deadline = end_ms / 1000
        else:
            last_deadline = time.time() + args.ttl_ms / 1000
    # The writer starts shortly before the last deadline and runs about 3 s.
    time.sleep(max(0.0, last_deadline - 0.3 - time.time()))
    argv = bench_argv(s, "set", 4, args.writer_n, 100_000, 16, "--dbnum", "1")
    result: dict = {}
    writer = threading.Thread(target=lambda: result.update(run_benchmark(argv, s, args.timeout)))
    writer.start()
    zero_at = None
    with Conn(s.port) as poll:
        while expire and time.time() < last_deadline + args.give_up:
            if int(poll.call("DBSIZE")) == 0:
                zero_at = time.time()
                break
            time.sleep(0.05)
    writer.join()
    return {"plain": plain / n, "timed": None if timed is None else timed / n,
            "lag": None if zero_at is None else zero_at - last_deadline,
            "rate": float(result.get("SET", ["0"])[0])}


def cmd_member_ttl(args) -> None:
    header("densekv: per-member TTLs on a SET", args)
    servers = start_servers(args)
    rows, kept, redis_plain = [], [], None
    n = args.n or 1_000_000
    try:
        dk, rd = servers
        with Conn(rd.port) as c:
            c.call("FLUSHALL")
            time.sleep(0.2)
            base = int(rd.info("memory")["used_memory"])
            load_set(c, "ttlset", member_names(n))
            redis_plain = (int(rd.info("memory")["used_memory"]) - base) / n
        rd.stop()
        for rnd in range(1, args.rounds + 1):
            got = {}
            for label, expire in (("with TTLs", True), ("without TTLs", False)):
                r = got[label] = member_ttl_run(args, dk, expire)
                lag = "-" if not expire else "never" if r["lag"] is None else f"{max(r['lag'], 0) * 1000:.0f} ms"
                rows.append([rnd, label, f"{r['plain']:.1f}", "-" if r["timed"] is None else f"{r['timed']:.1f}",
                             "-" if r["timed"] is None else f"{r['timed'] - r['plain']:.1f}", lag, f"{r['rate']:,.0f}"])
            kept.append(got["with TTLs"]["rate"] / max(got["without TTLs"]["rate"], 1))
    finally:
        stop_servers(servers)
    print(f"{n:,} members of 8 bytes in one SET; with TTLs, SPEXPIREAT gives each member its own "
          f"deadline (first an hour away, to measure memory; then spread over the second before "
          f"the end of a window of twice that pass's time plus {args.ttl_ms} ms); "
          f"Redis 7's plain SET for reference: {redis_plain:.1f} bytes/member.\n")
    table(["round", "run", "B/member plain", "B/member with TTLs", "TTL cost B/member",
           "DBSIZE 0 after last deadline", "writer SET/s"], rows)
    print(f"- writer kept {statistics.median(kept):.0%} of its SET/s during reclamation "
          f"(median of {len(kept)}: {', '.join(f'{k:.0%}' for k in kept)})")
    print("\nWriter: redis-benchmark -t set -P 16 -c 4 -r 100000 --dbnum 1, started 0.3 s before "
          "the last deadline (the same moment in the run without TTLs). The set's database is "
          "polled with DBSIZE every 50 ms, so the lag includes up to 50 ms of polling.\n", flush=True)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run `finally`: stop servers
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--densekv-bin", default=os.environ.get("DENSEKV_BIN")
                        or str(ROOT / "target" / "release" / "densekv-server"))
    common.add_argument("--redis-bin", default=os.environ.get("REDIS_SERVER_BIN", "redis-server"))
    common.add_argument("-n", "--n", type=int, default=0, help="number of keys/requests")
    common.add_argument("--timeout", type=float, default=3600,
                        help="seconds allowed for one redis-benchmark or load run")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("floor", parents=[common], help="CPU per request beside a do-nothing server")
    p.add_argument("--pipeline", type=int, default=1)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--tests", default="set,get")
    p.add_argument("--modes", default="epoll,uring-defer,uring", help="syscall-floor modes to run")
    p.add_argument("--rounds", type=int, default=5, help="runs per server and test (median)")
    p.set_defaults(func=cmd_floor)

    p = sub.add_parser("memory", parents=[common], help="bytes per key")
    p.add_argument("--workload", choices=["sessions", "intkeys", "all"], default="all")
    p.add_argument("--settle", type=float, default=12.0,
                   help="seconds to wait after a load before sampling (allocator decay)")
    p.set_defaults(func=cmd_memory)

    p = sub.add_parser("seeds", parents=[common], help="the seeds' layouts, bytes per entry")
    p.add_argument("--cases", type=lambda v: v.split(","), default=["partitioned", "uuid16", "chars24"],
                   help="partitioned,uuid16,chars24")
    p.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=SEED_SET_SIZES,
                   help="members per SET for chars24")
    p.set_defaults(func=cmd_seeds)

    p = sub.add_parser("repl", parents=[common], help="full sync and throughput with replicas")
    p.add_argument("--settle", type=float, default=3.0)
    p.add_argument("--pipeline", type=lambda v: [int(x) for x in v.split(",")], default=[16, 1])
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.set_defaults(func=cmd_repl)

    p = sub.add_parser("throughput", parents=[common], help="redis-benchmark requests/s")
    p.add_argument("--pipeline", type=lambda v: [int(x) for x in v.split(",")],
                   default=[1, 16], help="pipeline depths, comma-separated (default 1,16)")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--tests", default="set,get,incr,mset")
    p.add_argument("--rounds", type=int, default=1, help="runs per server and depth (median)")
    p.add_argument("--pin", action="store_true",
                   help="server on CPU 0 and redis-benchmark on CPU 1 (taskset; needs 2 CPUs)")
    p.set_defaults(func=cmd_throughput)

    p = sub.add_parser("instructions", parents=[common],
                       help="user-space instructions per request under callgrind (A/B of builds)")
    p.add_argument("--pipeline", type=int, default=16)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--tests", default="set,get,incr,mset")
    p.add_argument("--rounds", type=int, default=1, help="runs per server and test (median)")
    p.set_defaults(func=cmd_instructions)

    p = sub.add_parser("cpu", parents=[common], help="server CPU per request (A/B of builds)")
    p.add_argument("--pipeline", type=int, default=16)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--tests", default="set,get,incr,mset,lpush,lpop,sadd,hset")
    p.add_argument("--rounds", type=int, default=5, help="runs per server and test (median)")
    p.add_argument("--pin", action="store_true",
                   help="servers on CPU 0 and redis-benchmark on CPU 1 (taskset; needs 2 CPUs)")
    p.set_defaults(func=cmd_cpu)

    p = sub.add_parser("latency", parents=[common], help="latency during a bulk load")
    p.add_argument("--probe", choices=["get", "ping"], default="get")
    p.set_defaults(func=cmd_latency)

    p = sub.add_parser("hash", parents=[common], help="HASH bytes per field")
    p.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=HASH_SIZES,
                   help="field counts of the 24-char-field workload, comma-separated")
    p.add_argument("--no-ttl", action="store_true", help="skip the tables with HPEXPIRE on every field")
    p.set_defaults(func=cmd_hash)

    p = sub.add_parser("hash-expiry", parents=[common], help="active expiry of 1M hash fields")
    p.add_argument("--ttl-ms", type=int, default=3000)
    p.add_argument("--give-up", type=float, default=30, help="seconds after the deadline")
    p.add_argument("--rounds", type=int, default=3, help="with/without-TTL pairs per server (median)")
    p.set_defaults(func=cmd_hash_expiry)

    p = sub.add_parser("bgsave-memory", parents=[common], help="PSS peak during BGSAVE under writes")
    p.add_argument("--keys", type=int, default=4_000_000, help="keys loaded (100-byte values)")
    p.add_argument("--pipeline", type=int, default=16, help="the writer's -P")
    p.add_argument("--clients", type=int, default=50, help="the writer's -c")
    p.add_argument("--settle", type=float, default=3.0, help="seconds idle before the steady sample")
    p.add_argument("--rounds", type=int, default=1, help="BGSAVEs per server (median)")
    p.set_defaults(func=cmd_bgsave_memory)

    p = sub.add_parser("rdb", parents=[common], help="SAVE, BGSAVE and load times, file size")
    p.add_argument("--rounds", type=int, default=1, help="saves and restarts per server (median)")
    p.set_defaults(func=cmd_rdb)

    p = sub.add_parser("save-throughput", parents=[common], help="SET/s and latency during saves")
    p.add_argument("--during", choices=sorted(BACKGROUND_JOBS), default="bgsave")
    p.add_argument("--keys", type=int, default=2_000_000, help="keys loaded; redis-benchmark's -r")
    p.add_argument("--pipeline", type=lambda v: [int(x) for x in v.split(",")],
                   default=[16, 1], help="pipeline depths, comma-separated (default 16,1)")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--rounds", type=int, default=1, help="with/without pairs per server and depth")
    p.set_defaults(func=cmd_save_throughput)

    p = sub.add_parser("cache", parents=[common], help="hit ratio and throughput under eviction")
    p.add_argument("--keys", type=int, default=2_000_000, help="key ids the Zipf draw ranges over")
    p.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent s")
    p.add_argument("--maxmemory", default="64mb")
    p.add_argument("--workers", type=int, default=3, help="client processes, one connection each")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds after eviction starts")
    p.add_argument("--seconds", type=float, default=20.0, help="measured seconds")
    p.add_argument("--fill-limit", type=float, default=180.0,
                   help="most seconds to wait for eviction to start")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("aggregate", parents=[common], help="ZUNIONSTORE/ZINTERSTORE over many ZSETs")
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--inputs", type=int, default=5_000, help="input keys per ZUNIONSTORE/ZINTERSTORE")
    p.add_argument("--rounds", type=int, default=5)
    p.set_defaults(func=cmd_aggregate)

    p = sub.add_parser("member-ttl", parents=[common], help="per-member TTLs on a 1M-member SET")
    p.add_argument("--ttl-ms", type=int, default=3000)
    p.add_argument("--give-up", type=float, default=30, help="seconds after the deadline")
    p.add_argument("--writer-n", type=int, default=1_000_000, help="the writer's redis-benchmark -n")
    p.add_argument("--rounds", type=int, default=3, help="with/without-TTL pairs (median)")
    p.set_defaults(func=cmd_member_ttl)

    p = sub.add_parser("compression", parents=[common],
                       help="memory per entry with value-compression on and off, beside redis")
    p.add_argument("--cases", type=lambda v: v.split(","),
                   default=["sessions", "hashsessions", "intkeys", "iso639", "ec2shapes", "events"],
                   help="comma-separated: sessions,hashsessions,intkeys,iso639,ec2shapes,events")
    p.add_argument("--records", type=int, default=200_000, help="keys per public-records case")
    p.add_argument("--events", type=int, default=1_000_000, help="list elements in the events case")
    p.set_defaults(func=cmd_compression)

    p = sub.add_parser("compression-cpu", parents=[common],
                       help="main-thread CPU per GET/SETEX on sessions, compression off vs on")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--case", choices=["sessions", "ec2shapes"], default="sessions",
                   help="sessions: SETEX/GET of seed 002 (FSST); ec2shapes: SET/GET of the EC2 "
                        "API shape records, 200-4096 bytes (zstd)")
    p.add_argument("--pipeline", type=int, default=1000, help="requests in flight per connection")
    p.add_argument("--clients", type=int, default=1,
                   help="connections (sessions only); with 50 and --pipeline 1, redis-benchmark's defaults")
    p.set_defaults(func=cmd_compression_cpu)
    p = sub.add_parser("compression-load", parents=[common],
                       help="RDB load time of seed 002's sessions, compression off vs on vs redis")
    p.add_argument("--rounds", type=int, default=3)
    p.set_defaults(func=cmd_compression_load)

    p = sub.add_parser("tls", parents=[common], help="redis-benchmark requests/s over TLS")
    p.add_argument("--pipeline", type=lambda v: [int(x) for x in v.split(",")],
                   default=[1, 16], help="pipeline depths, comma-separated (default 1,16)")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--tests", default="get,set")
    p.add_argument("--rounds", type=int, default=1, help="runs per server and depth (median)")
    p.add_argument("--io-threads", type=lambda v: [int(x) for x in v.split(",")], default=[1],
                   help="io-threads values, comma-separated, given to both servers (default 1)")
    p.add_argument("--bench-threads", type=int, default=1,
                   help="redis-benchmark --threads, the same for every io-threads value (default 1)")
    p.set_defaults(func=cmd_tls)

    p = sub.add_parser("io-threads", parents=[common], help="executor CPU per request by io-threads")
    p.add_argument("--threads", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2],
                   help="io-threads values, comma-separated; the first is the base (default 1,2)")
    p.add_argument("--pipeline", type=lambda v: [int(x) for x in v.split(",")], default=[1, 16])
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--tests", default="get,set")
    p.add_argument("--rounds", type=int, default=3, help="runs per server, test and depth (median)")
    p.add_argument("--tls", action="store_true", help="over a TLS port (redis-benchmark --tls)")
    p.add_argument("--bench-threads", type=int, default=1,
                   help="redis-benchmark --threads, the same for every io-threads value (default 1)")
    p.add_argument("--plot", metavar="PNG", help="also draw requests/s by io-threads into this file")
    p.add_argument("--server-cpus", metavar="LIST",
                   help="run both servers on these CPUs (taskset -c LIST, e.g. 0-7)")
    p.add_argument("--client-cpus", metavar="LIST",
                   help="run redis-benchmark on these CPUs (taskset -c LIST, e.g. 8-15), apart from the servers")
    p.set_defaults(func=cmd_io_threads)

    p = sub.add_parser("_load", parents=[common])  # internal, used by latency
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workload", choices=WORKLOADS, default="intkeys")
    p.set_defaults(func=cmd_load)

    args = ap.parse_args()
    if args.cmd != "_load":
        for exe in (args.densekv_bin, args.redis_bin):
            if shutil.which(exe) is None:
                ap.error(f"{exe} not found (build with `cargo build --release`, "
                         "install redis-server with apt-get)")
    try:
        args.func(args)
    except (RuntimeError, OSError) as e:
        sys.exit(f"{Path(sys.argv[0]).name}: {e}")


if __name__ == "__main__":
    main()
