"""Helpers for Redis Cluster tests (tests/test_cluster.py) and benchmarks
(bench/cluster.py): cluster nodes started on free loopback port pairs (the client port
and its bus port, port + 10000) and stopped by the PIDs we started, a minimal RESP
client, CLUSTER NODES/INFO parsing, waits with deadlines, cluster formation (by
`redis-cli --cluster create` or by hand with ADDSLOTSRANGE/MEET/REPLICATE), the key hash
slot, and the cluster bus message header.

Standard library only (no pytest, no redis-py), so bench scripts can import it by path.
"""

from __future__ import annotations

import binascii
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

HOST = "127.0.0.1"
BUS_OFFSET = 10000
SLOTS = 16384
# Client ports are drawn from here, so that both they and their bus ports (+10000)
# stay below Linux's default ephemeral range (32768-60999), where outgoing
# connections could take them between our check and the server's bind.
PORT_LOW, PORT_HIGH = 11000, 22500

_rng = random.Random()


# ---------------------------------------------------------------- ports and waiting


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port_pair(taken: set[int] | None = None) -> int:
    """A client port that is free, whose bus port (+10000) is free too."""
    taken = taken or set()
    for _ in range(1000):
        p = _rng.randrange(PORT_LOW, PORT_HIGH)
        if p in taken or p + BUS_OFFSET in taken:
            continue
        if port_free(p) and port_free(p + BUS_OFFSET):
            return p
    raise RuntimeError("no free port pair found")


def wait_for(cond, timeout: float = 30.0, what: str = "condition", interval: float = 0.05):
    """Poll cond() until it returns a true value (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = cond()
            if v:
                return v
            last_exc = None
        except (OSError, ReplyError, ValueError, KeyError) as e:
            last_exc = e
        if time.monotonic() >= deadline:
            extra = f" (last error: {last_exc!r})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}{extra}")
        time.sleep(interval)


# ---------------------------------------------------------------- a minimal RESP client


class ReplyError(Exception):
    """An error reply; str() is its text without the leading '-'."""


def encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif not isinstance(a, (bytes, bytearray)):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Resp:
    """One connection; call(*args) returns the parsed reply (bytes, int, list, None)
    and raises ReplyError on an error reply. RESP2 only."""

    def __init__(self, port: int, timeout: float = 10.0, host: str = HOST):
        self.port = port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _more(self) -> None:
        chunk = self.sock.recv(1 << 16)
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
        """One reply; an error reply is returned as a ReplyError (not raised) inside
        arrays, raised at the top level."""
        r = self._reply()
        if isinstance(r, ReplyError):
            raise r
        return r

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"-":
            return ReplyError(rest.decode(errors="replace"))
        if kind == b"+":
            return rest
        if kind == b":":
            return int(rest)
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
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError(f"unexpected reply {line[:100]!r}")

    def send(self, *args) -> None:
        self.sock.sendall(encode(*args))

    def call(self, *args):
        self.send(*args)
        return self.reply()


def call(port: int, *args, timeout: float = 10.0):
    """One command on a fresh connection."""
    with Resp(port, timeout) as c:
        return c.call(*args)


def ping(port: int, timeout: float = 1.0) -> bool:
    try:
        return call(port, "PING", timeout=timeout) == b"PONG"
    except (OSError, ReplyError, ValueError):
        return False


# ---------------------------------------------------------------- key hash slot


def key_slot(key: bytes | str) -> int:
    """Redis Cluster's hash slot: CRC16 (XMODEM) of the key's hash tag, or of the
    whole key when it has no non-empty {...}, modulo 16384."""
    if isinstance(key, str):
        key = key.encode()
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return binascii.crc_hqx(key, 0) % SLOTS


_slot_tags: dict[int, str] | None = None


def tag_for_slot(slot: int) -> str:
    """A short string whose hash slot is `slot`: use it as a hash tag, `{tag}name`."""
    global _slot_tags
    if _slot_tags is None:
        tags: dict[int, str] = {}
        i = 0
        while len(tags) < SLOTS:
            t = str(i)
            tags.setdefault(binascii.crc_hqx(t.encode(), 0) % SLOTS, t)
            i += 1
        _slot_tags = tags
    return _slot_tags[slot]


def key_in_slot(slot: int, name: str = "k") -> str:
    return "{%s}%s" % (tag_for_slot(slot), name)


# ---------------------------------------------------------------- nodes


class Node:
    """One cluster-enabled server process that we started, in a directory of its own
    (its nodes-<port>.conf, log and any RDB a full sync writes), stopped by its PID."""

    def __init__(self, binary: str, basedir: str, node_timeout_ms: int = 3000,
                 extra_args: tuple[str, ...] = (), kind: str | None = None,
                 cluster_enabled: bool = True):
        self.binary = binary
        self.cluster_enabled = cluster_enabled
        self.basedir = basedir
        self.node_timeout_ms = node_timeout_ms
        self.extra_args = tuple(extra_args)
        self.kind = kind or Path(binary).name
        self.port = 0
        self.dir = ""
        self.proc: subprocess.Popen | None = None
        self.log_path = ""

    def __repr__(self) -> str:
        pid = self.proc.pid if self.proc else None
        return f"Node({self.kind} {HOST}:{self.port}, pid={pid})"

    @property
    def addr(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def bus_port(self) -> int:
        return self.port + BUS_OFFSET

    @property
    def conf_path(self) -> str:
        return os.path.join(self.dir, f"nodes-{self.port}.conf")

    def argv(self) -> list[str]:
        """The command line; with cluster_enabled=False the same one without the
        cluster options (a standalone server, for comparisons)."""
        cluster = (["--cluster-enabled", "yes", "--cluster-config-file", self.conf_path,
                    "--cluster-node-timeout", str(self.node_timeout_ms)]
                   if self.cluster_enabled else [])
        return [self.binary, "--port", str(self.port), "--bind", HOST, *cluster,
                "--dir", self.dir, "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--repl-diskless-sync-delay", "0", "--enable-debug-command", "local",
                *self.extra_args]

    def start(self, taken: set[int] | None = None, attempts: int = 5,
              ready_within: float = 15.0) -> "Node":
        """Start on a free port pair (retrying on another one if the start fails)."""
        last = ""
        for _ in range(attempts):
            self.port = free_port_pair(taken)
            self.dir = os.path.join(self.basedir, f"node-{self.port}")
            os.makedirs(self.dir, exist_ok=True)
            self.log_path = os.path.join(self.dir, "server.log")
            if self._spawn(ready_within):
                return self
            last = f"exit code {self.proc.returncode}"
        raise RuntimeError(f"{self.binary} failed to start ({last})\n{self.log_tail()}")

    def restart(self, ready_within: float = 15.0) -> "Node":
        """Start again on the same port, in the same directory (same nodes.conf)."""
        assert not self.alive(), "restart() of a running node"
        if not self._spawn(ready_within):
            raise RuntimeError(f"{self} failed to restart (exit code "
                               f"{self.proc.returncode})\n{self.log_tail()}")
        return self

    def _spawn(self, ready_within: float) -> bool:
        argv = self.argv()
        with open(self.log_path, "ab") as log:
            log.write(f"--- {' '.join(argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(argv, cwd=self.dir, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + ready_within
        while time.monotonic() < deadline and self.proc.poll() is None:
            if ping(self.port, timeout=0.5):
                return True
            time.sleep(0.05)
        if self.proc.poll() is None:
            self.kill()
            raise RuntimeError(f"{self} did not answer PING within {ready_within}s\n"
                               f"{self.log_tail()}")
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL, wait: float = 10.0) -> None:
        """Send sig to the process we started (only that PID) and wait for it to exit
        (SIGKILL if it has not after `wait` seconds)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def call(self, *args, timeout: float = 10.0):
        return call(self.port, *args, timeout=timeout)

    def conn(self, timeout: float = 10.0) -> Resp:
        return Resp(self.port, timeout)

    def myid(self) -> str:
        return self.call("CLUSTER", "MYID").decode()

    def info(self, section: str = "") -> dict[str, str]:
        text = (self.call("INFO", section) if section else self.call("INFO")).decode()
        return parse_info(text)

    def cluster_info(self) -> dict[str, str]:
        return parse_info(self.call("CLUSTER", "INFO").decode())

    def nodes(self) -> list[dict]:
        return parse_nodes(self.call("CLUSTER", "NODES").decode())

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace").splitlines()
        except OSError:
            return f"{self}: (no log)"
        return f"{self} log tail:\n" + "\n".join(text[-lines:])


class NodeSet:
    """The nodes one test (or one benchmark run) started, in one temporary directory;
    cleanup() kills every one by its PID and removes the directory."""

    def __init__(self, prefix: str = "densekv-cluster-"):
        self.basedir = tempfile.mkdtemp(prefix=prefix)
        self.nodes: list[Node] = []

    def start(self, binary: str, node_timeout_ms: int = 3000, extra_args=(),
              kind: str | None = None, cluster_enabled: bool = True) -> Node:
        taken = set()
        for n in self.nodes:
            taken |= {n.port, n.bus_port}
        node = Node(binary, self.basedir, node_timeout_ms, tuple(extra_args), kind,
                    cluster_enabled)
        self.nodes.append(node)
        return node.start(taken)

    def start_many(self, count: int, binary: str, **kw) -> list[Node]:
        return [self.start(binary, **kw) for _ in range(count)]

    def log_tails(self, lines: int = 20) -> str:
        return "\n\n".join(n.log_tail(lines) for n in self.nodes)

    def cleanup(self, keep_dir: bool = False) -> None:
        for n in self.nodes:
            n.kill(signal.SIGKILL)
        if not keep_dir:
            shutil.rmtree(self.basedir, ignore_errors=True)


# ---------------------------------------------------------------- parsing


def parse_info(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


def parse_nodes(text: str) -> list[dict]:
    """CLUSTER NODES lines as dicts: id, addr (ip:port@cport[,hostname]), ip, port, cport,
    flags (set), master ('-' or an id), ping_sent, pong_recv, epoch, link,
    slots (set of ints), migrating ({slot: id}), importing ({slot: id})."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = line.split()
        if len(f) < 8:
            raise ValueError(f"CLUSTER NODES line with {len(f)} fields: {line!r}")
        addr = f[1]
        hostport = addr.split(",", 1)[0]
        ipport, _, cport = hostport.partition("@")
        ip, _, port = ipport.rpartition(":")
        slots: set[int] = set()
        migrating: dict[int, str] = {}
        importing: dict[int, str] = {}
        for s in f[8:]:
            if s.startswith("["):
                body = s[1:-1]
                if "->-" in body:
                    slot, dst = body.split("->-")
                    migrating[int(slot)] = dst
                elif "-<-" in body:
                    slot, src = body.split("-<-")
                    importing[int(slot)] = src
                else:
                    raise ValueError(f"bad slot entry {s!r} in {line!r}")
            elif "-" in s:
                a, b = s.split("-")
                slots.update(range(int(a), int(b) + 1))
            else:
                slots.add(int(s))
        out.append({"id": f[0], "addr": addr, "ip": ip, "port": int(port or 0),
                    "cport": int(cport or 0), "flags": set(f[2].split(",")),
                    "master": f[3], "ping_sent": int(f[4]), "pong_recv": int(f[5]),
                    "epoch": int(f[6]), "link": f[7], "slots": slots,
                    "migrating": migrating, "importing": importing, "line": line})
    return out


BAD_FLAGS = {"fail", "fail?", "handshake", "noaddr"}


def topology_entry(n: dict) -> tuple:
    """(role, primary id or '-', frozenset of slots) of one parse_nodes() entry."""
    role = "master" if "master" in n["flags"] else "slave" if "slave" in n["flags"] else "?"
    return (role, n["master"], frozenset(n["slots"]))


def cluster_problems(nodes: list[Node], full_coverage: bool = True) -> list[str]:
    """Why `nodes` are not (yet) one healthy cluster in agreement; [] when they are:
    every node says cluster_state:ok, knows exactly these nodes, flags none of them
    fail/pfail/handshake/noaddr, has a connected link to each, and all agree on every
    node's role, primary and slots (with all 16384 slots assigned when full_coverage)."""
    problems = []
    ports = {n.port for n in nodes}
    views = {}
    for node in nodes:
        try:
            info = node.cluster_info()
            listed = node.nodes()
        except (OSError, ReplyError, ValueError) as e:
            problems.append(f"{node}: {e!r}")
            continue
        if info.get("cluster_state") != "ok":
            problems.append(f"{node}: cluster_state:{info.get('cluster_state')}")
        if int(info.get("cluster_known_nodes", -1)) != len(nodes):
            problems.append(f"{node}: cluster_known_nodes:{info.get('cluster_known_nodes')}")
        for n in listed:
            if n["flags"] & BAD_FLAGS:
                problems.append(f"{node} sees {n['addr']} {','.join(sorted(n['flags']))}")
            if "myself" not in n["flags"] and n["link"] != "connected":
                problems.append(f"{node} sees {n['addr']} link {n['link']}")
        if {n["port"] for n in listed} != ports:
            problems.append(f"{node} lists ports {sorted(n['port'] for n in listed)}")
        views[node.port] = {n["id"]: (n["port"], *topology_entry(n)) for n in listed}
    distinct = {tuple(sorted(v.items())) for v in views.values()}
    if len(distinct) > 1:
        problems.append(f"nodes disagree on the topology ({len(distinct)} views)")
    if full_coverage and views:
        covered = set()
        for _port, role, _master, slots in next(iter(views.values())).values():
            covered |= slots
        if len(covered) != SLOTS:
            problems.append(f"{len(covered)} slots assigned")
    return problems


def wait_cluster_ok(nodes: list[Node], timeout: float = 60.0, full_coverage: bool = True) -> None:
    """Wait until cluster_problems(nodes) is empty; the timeout error names the problems."""
    deadline = time.monotonic() + timeout
    while True:
        problems = cluster_problems(nodes, full_coverage)
        if not problems:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"cluster not ok after {timeout}s:\n  " + "\n  ".join(problems[:20]))
        time.sleep(0.1)


def slot_owner(nodes: list[Node], slot: int, ask: Node | None = None) -> Node:
    """The node whose client port serves `slot`, as `ask` (default nodes[0]) sees it."""
    ask = ask or nodes[0]
    by_port = {n.port: n for n in nodes}
    for n in ask.nodes():
        if slot in n["slots"]:
            return by_port[n["port"]]
    raise KeyError(f"slot {slot} is not assigned")


def replication_up(node: Node) -> bool:
    info = node.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


# ---------------------------------------------------------------- forming clusters


def slot_ranges(count: int) -> list[tuple[int, int]]:
    """16384 slots split into `count` contiguous ranges as redis-cli does."""
    per = SLOTS / count
    out, first = [], 0
    for i in range(count):
        last = SLOTS - 1 if i == count - 1 else int(round((i + 1) * per)) - 1
        out.append((first, last))
        first = last + 1
    return out


def form_cluster(primaries: list[Node], replicas: dict[Node, Node] | None = None,
                 timeout: float = 60.0) -> None:
    """Form a cluster by hand (no redis-cli): each primary gets a contiguous slot range
    and a distinct config epoch, all meet the first, each replica (a node -> its
    primary) replicates its primary; returns once wait_cluster_ok holds."""
    replicas = replicas or {}
    for node, (a, b) in zip(primaries, slot_ranges(len(primaries))):
        node.call("CLUSTER", "ADDSLOTSRANGE", a, b)
    for i, node in enumerate([*primaries, *replicas]):
        node.call("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
    first = primaries[0]
    for node in [*primaries[1:], *replicas]:
        node.call("CLUSTER", "MEET", HOST, first.port)
    everyone = [*primaries, *replicas]
    if replicas:
        ids = {p.port: p.myid() for p in primaries}
        for rep, prim in replicas.items():
            # The replica must know the primary before it can replicate it.
            wait_for(lambda rep=rep, prim=prim: any(n["id"] == ids[prim.port] for n in rep.nodes()),
                     timeout, f"{rep} to learn of {prim}")
            wait_for(lambda rep=rep, prim=prim: _replicate(rep, ids[prim.port]),
                     timeout, f"{rep} to replicate {prim}")
    wait_cluster_ok(everyone, timeout)
    for rep in replicas:
        wait_for(lambda rep=rep: replication_up(rep), timeout, f"{rep} replication link up")


def _replicate(rep: Node, primary_id: str) -> bool:
    try:
        return rep.call("CLUSTER", "REPLICATE", primary_id) == b"OK"
    except ReplyError as e:  # e.g. "Unknown node" while the handshake completes
        if "Unknown node" in str(e):
            return False
        raise


# ---------------------------------------------------------------- redis-cli


ANSI = re.compile(r"\x1b\[[0-9;]*m")  # redis-cli --cluster colours its lines


def redis_cli_path() -> str | None:
    return shutil.which("redis-cli")


def cluster_cli(*args, timeout: float = 120.0, check: bool = True) -> str:
    """`redis-cli --cluster <args>`; stdout and stderr together. check=True raises
    unless the exit status is 0."""
    argv = [redis_cli_path() or "redis-cli", "--cluster", *map(str, args)]
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    out = ANSI.sub("", (p.stdout + p.stderr).decode(errors="replace"))
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[1:])} exited {p.returncode}:\n{out[-4000:]}")
    return out


def check_problems(output: str) -> list[str]:
    """The lines of `redis-cli --cluster check` output that say something is wrong."""
    return [line for line in output.splitlines() if line.startswith(("[ERR]", "[WARNING]"))]


def create_cluster_cli(nodes: list[Node], replicas: int = 0, timeout: float = 120.0) -> str:
    """`redis-cli --cluster create ... --cluster-replicas N --cluster-yes`."""
    return cluster_cli("create", *[n.addr for n in nodes], "--cluster-replicas", replicas,
                       "--cluster-yes", timeout=timeout)


# ---------------------------------------------------------------- cluster bus messages

BUS_SIG = b"RCmb"
BUS_HEADER_LEN = 2256     # every message starts with this fixed header
BUS_GOSSIP_LEN = 104      # one gossip entry in PING/PONG/MEET
BUS_PING, BUS_PONG, BUS_MEET, BUS_FAIL = 0, 1, 2, 3
BUS_PUBLISH, BUS_AUTH_REQUEST, BUS_AUTH_ACK, BUS_UPDATE = 4, 5, 6, 7


def bus_header(msg_type: int = BUS_PING, totlen: int | None = None, count: int = 0,
               sender: bytes | None = None, port: int = 0, cport: int = 0,
               flags: int = 1, current_epoch: int = 0, config_epoch: int = 0,
               myslots: bytes = b"", ver: int = 1, sig: bytes = BUS_SIG) -> bytes:
    """A cluster bus message header (2256 bytes), big-endian fields at their fixed
    offsets: sig 0, totlen 4, ver 8, port 10, type 12, count 14, currentEpoch 16,
    configEpoch 24, offset 32, sender 40 (40 hex chars), myslots 80 (2048 bytes),
    slaveof 2128, myip 2168 (46), extensions 2214, pport 2246, cport 2248,
    flags 2250, state 2252, mflags 2253."""
    if totlen is None:
        totlen = BUS_HEADER_LEN + count * BUS_GOSSIP_LEN
    if sender is None:
        sender = os.urandom(20).hex().encode()
    h = bytearray(BUS_HEADER_LEN)
    h[0:4] = sig
    struct.pack_into(">IHHHHQQQ", h, 4, totlen & 0xFFFFFFFF, ver, port, msg_type, count,
                     current_epoch, config_epoch, 0)
    h[40:80] = sender[:40].ljust(40, b"0")
    h[80:80 + len(myslots)] = myslots[:2048]
    h[2128:2168] = b"\0" * 40     # slaveof: none
    struct.pack_into(">HHH", h, 2246, 0, cport, flags)
    h[2252] = 0                   # state: ok from the sender's point of view
    return bytes(h)


def bus_gossip(node_id: bytes, ip: str = HOST, port: int = 0, cport: int = 0,
               flags: int = 1) -> bytes:
    g = bytearray(BUS_GOSSIP_LEN)
    g[0:40] = node_id[:40].ljust(40, b"0")
    ipb = ip.encode()
    g[48:48 + len(ipb)] = ipb
    struct.pack_into(">HHHH", g, 94, port, cport, flags, 0)
    return bytes(g)


def parse_bus_header(data: bytes) -> dict:
    sig = data[0:4]
    totlen, ver, port, msg_type, count = struct.unpack_from(">IHHHH", data, 4)
    return {"sig": sig, "totlen": totlen, "ver": ver, "port": port, "type": msg_type,
            "count": count, "sender": data[40:80].rstrip(b"\0")}
