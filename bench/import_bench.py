#!/usr/bin/env python3
"""Bulk import and MEMORY REPORT benchmarks against the release densekv.

1. Import: N CSV rows shaped like seed 003's load (user attributes kept as
   sets of user ids for intersection: `user_id,attribute`), loaded into one
   densekv twice: by `densekv import --map 'SADD attr:{1} {0}'`, and by
   Python generating RESP for the same commands piped through
   `redis-cli --pipe` (what the seed's author did before writing a C
   module). Prints both times, their ratio and the importer's peak RSS.
2. MEMORY REPORT over N keys (DEBUG POPULATE) while a probe client sends
   PING in a loop: the report's time and the probe's largest wait.

Usage: bench/import_bench.py [--rows 10000000] [--keys 10000000]
"""

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "target", "release", "densekv-server")
CLI = os.path.join(ROOT, "target", "release", "densekv")
WINDOW = os.environ.get("WINDOW", "").split() and ["--window", os.environ["WINDOW"]] or []
ATTRS = [f"{k}:{v}" for k in ("age", "region", "network", "genre", "device") for v in range(40)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *map(str, args)], capture_output=True, check=True)
    return out.stdout.decode().strip()


def write_csv(path, rows):
    rnd = random.Random(3)
    with open(path, "w") as f:
        for start in range(0, rows, 100_000):
            f.write("".join(f"{i},{rnd.choice(ATTRS)}\n" for i in range(start, min(rows, start + 100_000))))


def run_timed(args, **kw):
    """Runs args; returns (seconds, peak RSS in KiB of that child)."""
    t = time.perf_counter()
    p = subprocess.Popen(args, **kw)
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{args[0]} failed with {p.returncode}")
    return secs, ru.ru_maxrss


def python_resp(path, port):
    """Python generating RESP, streamed into redis-cli --pipe."""
    t = time.perf_counter()
    p = subprocess.Popen(["redis-cli", "-p", str(port), "--pipe"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    out = p.stdin
    buf = []
    with open(path) as f:
        for line in f:
            uid, attr = line.rstrip("\n").split(",")
            key = "attr:" + attr
            buf.append(f"*3\r\n$4\r\nSADD\r\n${len(key)}\r\n{key}\r\n${len(uid)}\r\n{uid}\r\n")
            if len(buf) >= 10_000:
                out.write("".join(buf).encode())
                buf.clear()
    out.write("".join(buf).encode())
    out.close()
    if p.wait() != 0:
        sys.exit("redis-cli --pipe failed")
    return time.perf_counter() - t


def members(port):
    return sum(int(cmd(port, "SCARD", f"attr:{a}")) for a in ATTRS)


def report_bench(port, keys):
    cmd(port, "FLUSHALL")
    for start in range(0, keys, 1_000_000):
        cmd(port, "DEBUG", "POPULATE", min(1_000_000, keys - start), f"key:{start // 1_000_000}:", 16)
    stop = threading.Event()
    worst = [0.0]
    pings = [0]

    def probe():
        s = socket.create_connection(("127.0.0.1", port))
        while not stop.is_set():
            t = time.perf_counter()
            s.sendall(b"PING\r\n")
            s.recv(64)
            worst[0] = max(worst[0], time.perf_counter() - t)
            pings[0] += 1
        s.close()

    th = threading.Thread(target=probe)
    th.start()
    # The probe alone first: the machine's own noise, to read the rest against.
    time.sleep(3)
    idle = worst[0]
    worst[0] = 0.0
    pings[0] = 0
    t = time.perf_counter()
    out = subprocess.run(["redis-cli", "-p", str(port), "MEMORY", "REPORT", "LIMIT", "5"], capture_output=True, check=True)
    secs = time.perf_counter() - t
    stop.set()
    th.join()
    scanned = out.stdout.decode().split("\n")[5]
    return secs, worst[0], pings[0], scanned, idle


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=10_000_000)
    a = ap.parse_args()
    port = free_port()
    work = tempfile.mkdtemp(prefix="densekv-bench-")
    srv = subprocess.Popen([SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                            "--enable-debug-command", "local"],
                           cwd=work, stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                cmd(port, "PING")
                break
            except subprocess.CalledProcessError:
                time.sleep(0.05)
        if a.rows:
            path = os.path.join(work, "rows.csv")
            write_csv(path, a.rows)
            secs_imp, rss = run_timed([CLI, "import", "-p", str(port), path, "--format", "csv", "--map", "SADD attr:{1} {0}", *WINDOW],
                                      stderr=subprocess.DEVNULL)
            n_imp = members(port)
            cmd(port, "FLUSHALL")
            secs_py = python_resp(path, port)
            n_py = members(port)
            assert n_imp == n_py == a.rows, (n_imp, n_py)
            print(f"import of {a.rows:,} CSV rows ({os.path.getsize(path) / 1e6:.0f} MB):")
            print(f"  densekv import                      {secs_imp:7.2f} s  {a.rows / secs_imp:12,.0f} rows/s  peak RSS {rss / 1024:.1f} MiB")
            print(f"  Python RESP | redis-cli --pipe      {secs_py:7.2f} s  {a.rows / secs_py:12,.0f} rows/s")
            print(f"  ratio (Python / importer)           {secs_py / secs_imp:7.2f}x")
            os.unlink(path)
        if a.keys:
            secs, worst, pings, scanned, idle = report_bench(port, a.keys)
            print(f"MEMORY REPORT over {a.keys:,} keys: {secs:.2f} s ({scanned} keys scanned); "
                  f"probe: {pings:,} PINGs, largest wait {worst * 1000:.1f} ms "
                  f"(3 s of the probe alone before: largest wait {idle * 1000:.1f} ms)")
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()
