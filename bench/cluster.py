#!/usr/bin/env python3
"""Redis Cluster benchmarks: densekv against Debian's redis-server, both run by this
script in the same run (one after the other) on free loopback port pairs (the client
port and its bus port, +10000), each node in a temporary directory of its own and
stopped by its PID at the end.

  bench/cluster.py memory     [-n N] [--workload sessions|intkeys|all] [--settle S]
  bench/cluster.py reshard    [-n N] [--slots 8192] [--cluster-pipeline 10]
  bench/cluster.py asm        [-n N] [--slots 8192] [--cluster-pipeline 10]
  bench/cluster.py throughput [-n N] [--tests set,get] [--clients 50] [--pipeline 1,16]
                              [--keyspace 100000] [--rounds R]
  bench/cluster.py failover   [--node-timeout 5000] [--keys 100000] [--rounds 3]

memory      INFO used_memory delta per key after loading N keys (default 1,000,000)
            into one server started with --cluster-enabled no, then into one started
            with --cluster-enabled yes holding all 16384 slots (a one-node cluster):
              sessions  seed 002's naive sessions, SETEX session:<40 hex> 2592000 <46-byte JSON>
              intkeys   SET key:<n> <n>
            bytes/key standalone and in cluster mode, the cluster's extra bytes/key
            (cluster minus standalone) for densekv and for Redis, and densekv/redis
reshard     a primary holding all slots and N keys (`SET key:<n> <n>`, default
            5,000,000) and a new empty primary; `redis-cli --cluster reshard` moves
            --slots slots to the new one (timed) while a probe client sends GET and SET
            of random loaded keys one at a time, following MOVED/ASK, and records every
            request's round trip: the largest one (the stall), p99, and the largest in
            2 s of probing before the reshard (the machine's own noise)
asm         the same set-up and probe: densekv moves slots 0..--slots-1 to the new
            primary with atomic slot migration (CLUSTER MIGRATION IMPORT on it, timed
            until both sides say completed), Redis 7.0 with the legacy `redis-cli
            --cluster reshard` of the same slots and data; time and stall side by side
throughput  `redis-benchmark --cluster -t set,get` (-n, -c, -P, -r) against a cluster
            of three primaries (slots split evenly, formed with CLUSTER ADDSLOTSRANGE
            and MEET); requests/s per test and depth, densekv/redis
failover    a 3-primary, 3-replica cluster (same --cluster-node-timeout for both), --keys
            keys loaded; a primary gets SIGKILL; from that moment: the first survivor
            to flag it `fail`, its replica calling itself primary, and every survivor
            saying cluster_state:ok with the replica as the primary of the dead one's
            slots (the failover time). A fresh cluster per round; medians

Options common to all: --densekv-bin (default $DENSEKV_BIN or target/release/densekv-server),
--redis-bin (default $REDIS_SERVER_BIN or redis-server). Pointing --densekv-bin at
redis-server checks the script itself. Needs redis-cli (and redis-benchmark for
`throughput`); standard library only (node handling from tests/clusterlib.py, workloads
and output from bench/compare.py). Output is Markdown.
"""

from __future__ import annotations

import argparse
import array
import csv
import io
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import clusterlib as cl  # noqa: E402
from compare import batches, header, ratio, table  # noqa: E402

HOST = cl.HOST


def servers(args) -> list[tuple[str, str]]:
    return [("densekv", args.densekv_bin), ("redis", args.redis_bin)]


def used_memory(node: cl.Node) -> int:
    return int(node.info("memory")["used_memory"])


def one_node_cluster(node: cl.Node) -> None:
    """Give `node` every slot and wait until it says cluster_state:ok."""
    node.call("CLUSTER", "ADDSLOTSRANGE", 0, cl.SLOTS - 1)
    cl.wait_for(lambda: node.cluster_info()["cluster_state"] == "ok", 30, f"{node} ok")


def load(port: int, workload: str, n: int) -> float:
    """compare.py's workload over one pipelined connection; seconds taken."""
    t0 = time.perf_counter()
    with cl.Resp(port, timeout=600) as c:
        for data, count, reply in batches(workload, n):
            c.sock.sendall(data)
            for _ in range(count):
                got = c.reply()
                if reply == b"+OK\r\n" and got != b"OK" or reply == b":3\r\n" and got != 3:
                    raise RuntimeError(f"unexpected reply {got!r} while loading")
    return time.perf_counter() - t0


def load_cluster(nodes: list[cl.Node], n: int, batch: int = 5000) -> None:
    """SET key:<i> <i> for i < n, each on the primary of its slot, pipelined."""
    owners = [0] * cl.SLOTS
    for start, end, primary, *_ in nodes[0].call("CLUSTER", "SLOTS"):
        owners[start:end + 1] = [primary[1]] * (end - start + 1)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(owners[cl.key_slot(b"key:%d" % i)], []).append(i)
    for port, ids in groups.items():
        with cl.Resp(port, timeout=600) as c:
            for k in range(0, len(ids), batch):
                chunk = ids[k:k + batch]
                c.sock.sendall(b"".join(cl.encode("SET", b"key:%d" % i, b"%d" % i) for i in chunk))
                for _ in chunk:
                    if c.reply() != b"OK":
                        raise RuntimeError("SET failed while loading")


def check_keys(nodes: list[cl.Node], n: int) -> None:
    got = sum(x.call("DBSIZE") for x in nodes)
    if got != n:
        raise RuntimeError(f"{got:,} keys after loading {n:,}")


# ---------------------------------------------------------------- memory


def memory_run(binary: str, name: str, cluster: bool, workload: str, n: int,
               settle: float) -> tuple[int, int, float]:
    ns = cl.NodeSet(prefix=f"bench-cluster-{name}-")
    try:
        node = ns.start(binary, kind=name, cluster_enabled=cluster)
        if cluster:
            one_node_cluster(node)
        time.sleep(settle)
        before = used_memory(node)
        secs = load(node.port, workload, n)
        time.sleep(settle)
        after = used_memory(node)
        check_keys([node], n)
        return before, after, secs
    finally:
        ns.cleanup()


def cmd_memory(args) -> None:
    header("densekv vs redis: memory per key, cluster-enabled yes vs no", args)
    n = args.n or 1_000_000
    workloads = ["sessions", "intkeys"] if args.workload == "all" else [args.workload]
    for workload in workloads:
        per_key: dict[tuple[str, bool], float] = {}
        rows = []
        for name, binary in servers(args):
            for cluster in (False, True):
                before, after, secs = memory_run(binary, name, cluster, workload, n, args.settle)
                per_key[name, cluster] = (after - before) / n
                rows.append([name, "yes" if cluster else "no", f"{before:,}", f"{after:,}",
                             f"{(after - before) / n:.1f}", f"{secs:.1f}"])
        print(f"## {workload}, N={n:,}\n")
        table(["server", "cluster", "used_memory before", "used_memory after", "used B/key",
               "load s"], rows)
        extra = {name: per_key[name, True] - per_key[name, False] for name, _ in servers(args)}
        table(["", "standalone B/key", "cluster B/key", "cluster - standalone B/key"],
              [[name, f"{per_key[name, False]:.1f}", f"{per_key[name, True]:.1f}",
                f"{extra[name]:+.1f}"] for name, _ in servers(args)]
              + [["densekv/redis", ratio(per_key["densekv", False], per_key["redis", False]),
                  ratio(per_key["densekv", True], per_key["redis", True]), ""]])
        print(f"cluster mode costs densekv {extra['densekv']:+.1f} B/key and Redis "
              f"{extra['redis']:+.1f} B/key on this workload.\n", flush=True)


# ---------------------------------------------------------------- reshard


class Probe(threading.Thread):
    """GET and SET (alternating) of random loaded keys `key:<n>` (n < keys), one at a
    time, each request timed from sending to its final reply, following MOVED (the
    slot map is updated) and ASK (ASKING, then the command on the target)."""

    def __init__(self, ports: list[int], keys: int):
        super().__init__(daemon=True)
        self.ports = ports
        self.keys = keys
        self.stop_flag = threading.Event()
        self.lat = array.array("d")
        self.redirects = {"MOVED": 0, "ASK": 0}
        self.errors: list[str] = []
        self.conns: dict[int, cl.Resp] = {}
        self.owner = [0] * cl.SLOTS
        for start, end, primary, *_ in cl.call(ports[0], "CLUSTER", "SLOTS"):
            self.owner[start:end + 1] = [primary[1]] * (end - start + 1)

    def conn(self, port: int) -> cl.Resp:
        if port not in self.conns:
            self.conns[port] = cl.Resp(port, timeout=120)
        return self.conns[port]

    def request(self, *args) -> None:
        key = args[1]
        slot = cl.key_slot(key)
        port, asking = self.owner[slot], False
        for _ in range(5):
            c = self.conn(port)
            try:
                if asking:
                    c.send("ASKING")
                    c.reply()
                c.call(*args)
                return
            except cl.ReplyError as e:
                kind, _, rest = str(e).partition(" ")
                if kind not in ("MOVED", "ASK"):
                    raise
                self.redirects[kind] += 1
                port = int(rest.split()[1].rsplit(":", 1)[1])
                if kind == "MOVED":
                    self.owner[slot] = port
                asking = kind == "ASK"
        raise RuntimeError(f"too many redirections for {args!r}")

    def run(self) -> None:
        rng = random.Random(11)
        i = 0
        try:
            while not self.stop_flag.is_set():
                n = rng.randrange(self.keys)
                key = b"key:%d" % n
                t0 = time.perf_counter()
                if i % 2:
                    self.request("SET", key, b"%d" % n)
                else:
                    self.request("GET", key)
                self.lat.append(time.perf_counter() - t0)
                i += 1
        except Exception as e:  # reported by the caller
            self.errors.append(repr(e))
        finally:
            for c in self.conns.values():
                c.close()

    def take(self) -> array.array:
        lat, self.lat = self.lat, array.array("d")
        return lat


def pct(values, q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def reshard_run(args, name: str, binary: str, n: int) -> dict:
    ns = cl.NodeSet(prefix=f"bench-cluster-{name}-")
    try:
        a = ns.start(binary, kind=name, node_timeout_ms=args.node_timeout)
        one_node_cluster(a)
        load_secs = load(a.port, "intkeys", n)
        check_keys([a], n)
        b = ns.start(binary, kind=name, node_timeout_ms=args.node_timeout)
        b.call("CLUSTER", "MEET", HOST, a.port)
        cl.wait_cluster_ok([a, b], timeout=120)
        ida, idb = a.myid(), b.myid()

        probe = Probe([a.port, b.port], n)
        probe.start()
        time.sleep(2.0)
        idle = probe.take()
        t0 = time.perf_counter()
        out = cl.cluster_cli("reshard", a.addr, "--cluster-from", ida, "--cluster-to", idb,
                             "--cluster-slots", args.slots, "--cluster-yes",
                             "--cluster-pipeline", args.cluster_pipeline,
                             "--cluster-timeout", 60000, timeout=args.timeout)
        secs = time.perf_counter() - t0
        busy = probe.take()
        probe.stop_flag.set()
        probe.join(120)
        if probe.errors:
            raise RuntimeError(f"{name}: probe failed: {probe.errors[0]}")
        cl.wait_cluster_ok([a, b], timeout=120)
        moved = b.call("DBSIZE")
        check_keys([a, b], n)
        if "[ERR]" in out:
            raise RuntimeError(f"{name}: reshard reported errors:\n{out[-2000:]}")
        return {"load": load_secs, "secs": secs, "moved": moved, "requests": len(busy),
                "max": max(busy, default=float("nan")), "p99": pct(busy, 0.99),
                "idle_max": max(idle, default=float("nan")), "ask": probe.redirects["ASK"],
                "moved_redirects": probe.redirects["MOVED"]}
    finally:
        ns.cleanup()


def asm_run(args, binary: str, n: int) -> dict:
    ns = cl.NodeSet(prefix="bench-cluster-asm-")
    try:
        a = ns.start(binary, kind="densekv", node_timeout_ms=args.node_timeout)
        one_node_cluster(a)
        load_secs = load(a.port, "intkeys", n)
        check_keys([a], n)
        b = ns.start(binary, kind="densekv", node_timeout_ms=args.node_timeout)
        b.call("CLUSTER", "MEET", HOST, a.port)
        cl.wait_cluster_ok([a, b], timeout=120)

        probe = Probe([a.port, b.port], n)
        probe.start()
        time.sleep(2.0)
        idle = probe.take()
        t0 = time.perf_counter()
        task = b.call("CLUSTER", "MIGRATION", "IMPORT", 0, args.slots - 1).decode()

        def state(node):
            got = node.call("CLUSTER", "MIGRATION", "STATUS", "ID", task)
            if not got:  # the source hears of it when the destination connects
                return {b"state": b"pending", b"write_pause_ms": b"0"}
            return dict(zip(got[0][::2], got[0][1::2]))
        while True:
            sd, ss = state(b), state(a)
            if sd[b"state"] == b"completed" and ss[b"state"] == b"completed":
                break
            if b"failed" in (sd[b"state"], ss[b"state"]) or time.perf_counter() - t0 > args.timeout:
                raise RuntimeError(f"asm: {sd} {ss}")
            time.sleep(0.01)
        secs = time.perf_counter() - t0
        # The source deletes what left a few thousand keys a turn, after the
        # switch: counted apart (the data is served by the new owner by then).
        while a.call("DBSIZE") > n - b.call("DBSIZE"):
            time.sleep(0.01)
        trim = time.perf_counter() - t0 - secs
        busy = probe.take()
        probe.stop_flag.set()
        probe.join(120)
        if probe.errors:
            raise RuntimeError(f"asm: probe failed: {probe.errors[0]}")
        cl.wait_cluster_ok([a, b], timeout=120)
        moved = b.call("DBSIZE")
        check_keys([a, b], n)
        return {"load": load_secs, "secs": secs, "trim": trim, "moved": moved,
                "requests": len(busy), "max": max(busy, default=float("nan")),
                "p99": pct(busy, 0.99), "idle_max": max(idle, default=float("nan")),
                "ask": probe.redirects["ASK"], "moved_redirects": probe.redirects["MOVED"],
                "write_pause_ms": int(ss[b"write_pause_ms"])}
    finally:
        ns.cleanup()


def cmd_asm(args) -> None:
    header("densekv atomic slot migration vs redis legacy reshard, under a GET/SET probe", args)
    n = args.n or 5_000_000
    d = asm_run(args, args.densekv_bin, n)
    r = reshard_run(args, "redis", args.redis_bin, n)
    print(f"## move {args.slots:,} of 16,384 slots to a new primary, N={n:,} keys "
          f"`SET key:<n> <n>`; redis-cli --cluster-pipeline {args.cluster_pipeline}\n")
    rows = [["densekv (CLUSTER MIGRATION)", f"{d['secs']:.2f}", f"{d['moved']:,}",
             f"{d['moved'] / d['secs']:,.0f}", f"{d['requests']:,}", f"{d['max'] * 1000:.1f}",
             f"{d['p99'] * 1000:.2f}", f"{d['idle_max'] * 1000:.1f}", f"{d['ask']:,}",
             f"{d['moved_redirects']:,}"],
            ["redis (redis-cli reshard)", f"{r['secs']:.2f}", f"{r['moved']:,}",
             f"{r['moved'] / r['secs']:,.0f}", f"{r['requests']:,}", f"{r['max'] * 1000:.1f}",
             f"{r['p99'] * 1000:.2f}", f"{r['idle_max'] * 1000:.1f}", f"{r['ask']:,}",
             f"{r['moved_redirects']:,}"],
            ["densekv/redis", ratio(d["secs"], r["secs"]), "", "", "", ratio(d["max"], r["max"]),
             ratio(d["p99"], r["p99"]), "", "", ""]]
    table(["server", "move s", "keys moved", "keys/s", "probe requests", "stall (max) ms",
           "p99 ms", "idle max ms", "ASK", "MOVED"], rows)
    print(f"densekv: commands on the moved slots held {d['write_pause_ms']} ms for the switch; "
          f"the source deleted the moved keys in {d['trim']:.2f} s after it (not in 'move s'). "
          "stall: the probe's largest single round trip during the move; idle max: the same "
          "over 2 s before it.\n", flush=True)


def cmd_reshard(args) -> None:
    header("densekv vs redis: redis-cli --cluster reshard under a GET/SET probe", args)
    n = args.n or 5_000_000
    res = {name: reshard_run(args, name, binary, n) for name, binary in servers(args)}
    print(f"## reshard {args.slots:,} of 16,384 slots, N={n:,} keys `SET key:<n> <n>`, "
          f"--cluster-pipeline {args.cluster_pipeline}\n")
    rows = [[name, f"{r['secs']:.1f}", f"{r['moved']:,}", f"{r['moved'] / r['secs']:,.0f}",
             f"{r['requests']:,}", f"{r['max'] * 1000:.1f}", f"{r['p99'] * 1000:.2f}",
             f"{r['idle_max'] * 1000:.1f}", f"{r['ask']:,}", f"{r['moved_redirects']:,}"]
            for name, r in res.items()]
    d, r = res["densekv"], res["redis"]
    rows.append(["densekv/redis", ratio(d["secs"], r["secs"]), "", "", "",
                 ratio(d["max"], r["max"]), ratio(d["p99"], r["p99"]), "", "", ""])
    table(["server", "reshard s", "keys moved", "keys/s", "probe requests", "stall (max) ms",
           "p99 ms", "idle max ms", "ASK", "MOVED"], rows)
    print("stall: the probe's largest single round trip during the reshard (a request "
          "redirected counts whole); idle max: the same over 2 s before it.\n", flush=True)


# ---------------------------------------------------------------- throughput


def bench_once(args, port: int, pipeline: int) -> dict[str, float]:
    exe = shutil.which("redis-benchmark") or "redis-benchmark"
    argv = [exe, "--cluster", "-h", HOST, "-p", str(port), "-t", args.tests,
            "-n", str(args.n or 1_000_000), "-c", str(args.clients), "-P", str(pipeline),
            "-r", str(args.keyspace), "--csv"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError(f"redis-benchmark exited {p.returncode}: {p.stderr[-2000:]}")
    out = {}
    for row in csv.reader(io.StringIO(p.stdout)):
        if len(row) >= 2 and row[0] != "test":
            try:
                out[row[0]] = float(row[1])
            except ValueError:
                continue
    want = {t.upper() for t in args.tests.split(",")}
    if not want <= set(out):
        raise RuntimeError(f"redis-benchmark output lacks {want - set(out)}:\n{p.stdout[-2000:]}")
    return out


def cmd_throughput(args) -> None:
    header("densekv vs redis: redis-benchmark --cluster on three primaries", args)
    results: dict[str, dict[int, dict[str, list[float]]]] = {}
    for name, binary in servers(args):
        ns = cl.NodeSet(prefix=f"bench-cluster-{name}-")
        try:
            nodes = [ns.start(binary, kind=name, node_timeout_ms=args.node_timeout)
                     for _ in range(3)]
            cl.form_cluster(nodes)
            per = results[name] = {}
            for pipeline in args.pipeline:
                runs: dict[str, list[float]] = {}
                for _ in range(args.rounds):
                    for test, rps in bench_once(args, nodes[0].port, pipeline).items():
                        runs.setdefault(test, []).append(rps)
                per[pipeline] = runs
        finally:
            ns.cleanup()
    print(f"## -n {args.n or 1_000_000:,} -c {args.clients} -r {args.keyspace:,}, "
          f"median of {args.rounds}\n")
    rows = []
    for pipeline in args.pipeline:
        for test in results["densekv"][pipeline]:
            d = statistics.median(results["densekv"][pipeline][test])
            r = statistics.median(results["redis"][pipeline][test])
            rows.append([test, pipeline, f"{d:,.0f}", f"{r:,.0f}", ratio(d, r)])
    table(["test", "-P", "densekv req/s", "redis req/s", "densekv/redis"], rows)


# ---------------------------------------------------------------- failover


def failover_run(args, name: str, binary: str) -> dict:
    ns = cl.NodeSet(prefix=f"bench-cluster-{name}-")
    try:
        nodes = [ns.start(binary, kind=name, node_timeout_ms=args.node_timeout) for _ in range(6)]
        primaries, reps = nodes[:3], nodes[3:]
        cl.form_cluster(primaries, dict(zip(reps, primaries)), timeout=120)
        if args.keys:
            load_cluster(nodes, args.keys)
            for p in primaries:
                if p.call("WAIT", 1, 30000) < 1:
                    raise RuntimeError(f"{name}: the replica of {p} did not catch up")
        dead, heir = primaries[0], reps[0]
        dead_id = dead.myid()
        slots = next(x["slots"] for x in heir.nodes() if x["id"] == dead_id)
        survivors = [x for x in nodes if x is not dead]
        t0 = time.monotonic()
        dead.kill(signal.SIGKILL)
        detect = promoted = None
        deadline = t0 + args.give_up
        while time.monotonic() < deadline:
            now = time.monotonic() - t0
            views = {}
            for x in survivors:
                try:
                    views[x.port] = (x.cluster_info()["cluster_state"], x.nodes())
                except (OSError, cl.ReplyError):
                    views[x.port] = ("?", [])
            if detect is None and any("fail" in n["flags"] for _, listed in views.values()
                                      for n in listed if n["id"] == dead_id):
                detect = now
            if promoted is None and any("master" in n["flags"] and "myself" in n["flags"]
                                        for n in views[heir.port][1]):
                promoted = now
            if all(state == "ok" and any(n["port"] == heir.port and "master" in n["flags"]
                                         and n["slots"] == slots for n in listed)
                   for state, listed in views.values()):
                return {"detect": detect, "promoted": promoted, "ok": now}
            time.sleep(0.01)
        raise RuntimeError(f"{name}: no failover within {args.give_up}s")
    finally:
        ns.cleanup()


def cmd_failover(args) -> None:
    header("densekv vs redis: failover after SIGKILL of a primary (3 primaries, 3 replicas)",
           args)
    res = {name: [failover_run(args, name, binary) for _ in range(args.rounds)]
           for name, binary in servers(args)}
    print(f"## cluster-node-timeout {args.node_timeout} ms, {args.keys:,} keys, "
          f"median of {args.rounds}\n")
    med = {name: {k: statistics.median(r[k] for r in runs) for k in ("detect", "promoted", "ok")}
           for name, runs in res.items()}
    rows = [[name, f"{m['detect']:.2f}", f"{m['promoted']:.2f}", f"{m['ok']:.2f}",
             " ".join(f"{r['ok']:.2f}" for r in res[name])] for name, m in med.items()]
    rows.append(["densekv/redis", ratio(med["densekv"]["detect"], med["redis"]["detect"]),
                 ratio(med["densekv"]["promoted"], med["redis"]["promoted"]),
                 ratio(med["densekv"]["ok"], med["redis"]["ok"]), ""])
    table(["server", "flagged fail s", "replica primary s", "all ok s", "all ok s per round"],
          rows)
    print("Seconds from the SIGKILL: the first survivor to flag the primary `fail`, its "
          "replica calling itself primary, and every survivor at cluster_state:ok with the "
          "replica holding the dead primary's slots.\n", flush=True)


# ---------------------------------------------------------------- main


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run `finally`: stop nodes
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--densekv-bin", default=os.environ.get("DENSEKV_BIN")
                        or str(ROOT / "target" / "release" / "densekv-server"))
    common.add_argument("--redis-bin", default=os.environ.get("REDIS_SERVER_BIN", "redis-server"))
    common.add_argument("-n", "--n", type=int, default=0, help="number of keys/requests")
    common.add_argument("--node-timeout", type=int, default=5000,
                        help="cluster-node-timeout in ms for every node")
    common.add_argument("--timeout", type=float, default=3600,
                        help="seconds allowed for one redis-cli or redis-benchmark run")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("memory", parents=[common], help="bytes per key, cluster mode vs not")
    p.add_argument("--workload", choices=["sessions", "intkeys", "all"], default="all")
    p.add_argument("--settle", type=float, default=1.0, help="seconds before each sample")
    p.set_defaults(func=cmd_memory)

    p = sub.add_parser("reshard", parents=[common], help="redis-cli reshard time and stall")
    p.add_argument("--slots", type=int, default=8192, help="slots moved to the new node")
    p.add_argument("--cluster-pipeline", type=int, default=10,
                   help="keys per MIGRATE (redis-cli's --cluster-pipeline; its default is 10)")
    p.set_defaults(func=cmd_reshard)

    p = sub.add_parser("asm", parents=[common], help="atomic slot migration vs legacy reshard")
    p.add_argument("--slots", type=int, default=8192, help="slots moved to the new node")
    p.add_argument("--cluster-pipeline", type=int, default=10,
                   help="keys per MIGRATE for Redis's reshard (redis-cli's default is 10)")
    p.set_defaults(func=cmd_asm)

    p = sub.add_parser("throughput", parents=[common], help="redis-benchmark --cluster")
    p.add_argument("--tests", default="set,get")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--pipeline", type=lambda v: [int(x) for x in v.split(",")], default=[1, 16],
                   help="pipeline depths, comma-separated (default 1,16)")
    p.add_argument("--keyspace", type=int, default=100_000, help="redis-benchmark -r")
    p.add_argument("--rounds", type=int, default=1, help="runs per server and depth (median)")
    p.set_defaults(func=cmd_throughput)

    p = sub.add_parser("failover", parents=[common], help="time to fail over a killed primary")
    p.add_argument("--keys", type=int, default=100_000, help="keys loaded before the kill")
    p.add_argument("--rounds", type=int, default=3, help="fresh clusters per server (median)")
    p.add_argument("--give-up", type=float, default=120.0, help="seconds to wait for a failover")
    p.set_defaults(func=cmd_failover)

    args = ap.parse_args()
    for attr in ("densekv_bin", "redis_bin"):
        exe = shutil.which(getattr(args, attr))
        if exe is None:
            ap.error(f"{getattr(args, attr)} not found (build with `cargo build --release`, "
                     "install redis-server with apt-get)")
        setattr(args, attr, exe)
    if cl.redis_cli_path() is None:
        ap.error("redis-cli not found (apt-get install redis-tools)")
    try:
        args.func(args)
    except (RuntimeError, OSError, TimeoutError) as e:
        sys.exit(f"{Path(sys.argv[0]).name}: {e}")


if __name__ == "__main__":
    main()
