#!/usr/bin/env python3
"""Differential tester: the same seeded random command stream against densekv and Redis.

Each generated step (one command, or a few that belong together such as MULTI ... EXEC)
is sent to a densekv-server and to a redis-server over a small raw RESP client, and the
two raw replies are compared byte for byte, so that reply types (integer vs bulk, the
kinds of null, RESP3 maps and doubles) and error texts count. A few replies are random or
time-dependent by nature; they are compared in a normalised form (see Mode below).

For every differing command the tester prints both replies and a minimal reproduction:
the earlier steps on the same keys, replayed on a second pair of fresh servers and cut
down while the difference still shows.

Run by hand (it needs a Redis build, so it is not part of scripts/test):

    scripts/difftest.py --redis-bin PATH/redis-server --seed 1 --commands 5000

Exit status: 0 when the replies all agreed, 1 when there was a difference, 2 on a
setup error.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
KEYS = [f"k{i}" for i in range(8)]
KEYSET = {k.encode() for k in KEYS}


# ---------------------------------------------------------------------------
# RESP: read one complete reply, keeping its raw bytes and a parsed tree


class Incomplete(Exception):
    pass


@dataclass
class Node:
    kind: str  # the RESP type byte: + - : $ * % ~ > _ , # ( ! = |
    value: object  # bytes for simple types, list[Node] for aggregates, None for nulls
    raw: bytes


def _line(buf: bytes, pos: int) -> tuple[bytes, int]:
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Incomplete
    return buf[pos:end], end + 2


def parse(buf: bytes, pos: int = 0) -> tuple[Node, int]:
    """One reply starting at pos; raises Incomplete when buf does not hold all of it."""
    if pos >= len(buf):
        raise Incomplete
    kind = chr(buf[pos])
    line, after = _line(buf, pos + 1)
    if kind in "+-:,#(_":
        return Node(kind, None if kind == "_" else line, buf[pos:after]), after
    if kind in "$!=":
        n = int(line)
        if n < 0:
            return Node(kind, None, buf[pos:after]), after
        if len(buf) < after + n + 2:
            raise Incomplete
        return Node(kind, buf[after:after + n], buf[pos:after + n + 2]), after + n + 2
    if kind in "*~>%|":
        n = int(line)
        if n < 0:
            return Node(kind, None, buf[pos:after]), after
        items = []
        for _ in range(n * 2 if kind in "%|" else n):
            child, after = parse(buf, after)
            items.append(child)
        if kind == "|":  # an attribute precedes the reply it annotates
            reply, after = parse(buf, after)
            return Node(reply.kind, reply.value, buf[pos:after]), after
        return Node(kind, items, buf[pos:after]), after
    raise ValueError(f"bad reply type {kind!r} in {buf[pos:pos + 60]!r}")


def encode(args: list[bytes]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port: int, proto: int, timeout: float = 10.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        if proto == 3:
            hello = self.call([b"HELLO", b"3"])
            if hello.kind == "-":
                raise RuntimeError(f"HELLO 3 refused: {hello.raw!r}")

    def call(self, args: list[bytes]) -> Node:
        self.sock.sendall(encode(args))
        while True:
            try:
                node, end = parse(self.buf)
            except Incomplete:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionError("connection closed")
                self.buf += chunk
                continue
            self.buf = self.buf[end:]
            return node

    def close(self) -> None:
        self.sock.close()


# ---------------------------------------------------------------------------
# Servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    """A server process we started, stopped by its own pid only."""

    def __init__(self, name: str, argv: list[str]):
        self.name = name
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix=f"difftest-{name}-")
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        exe = shutil.which(argv[0]) or argv[0]  # the server runs in its own directory
        self.proc = subprocess.Popen(
            [os.path.abspath(exe)] + argv[1:] + ["--port", str(self.port), "--bind", HOST, "--save", "",
                    "--appendonly", "no", "--dir", self.dir],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.monotonic() + 20
        while True:
            try:
                c = Conn(self.port, 2, timeout=2)
                if c.call([b"PING"]).raw == b"+PONG\r\n":
                    c.close()
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} did not start; see {self.dir}/server.log")
            time.sleep(0.05)

    def conns(self) -> dict[int, Conn]:
        return {2: Conn(self.port, 2), 3: Conn(self.port, 3)}

    def stop(self) -> None:
        """Stops the server; its directory stays only when it had died (for its log)."""
        died = self.proc.poll() is not None
        if not died:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if died:
            print(f"{self.name} exited early; its log: {self.dir}/server.log", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


class Pair:
    """densekv and Redis side by side, each with a RESP2 and a RESP3 connection."""

    def __init__(self, densekv_bin: str, redis_bin: str):
        self.servers = [
            Server("densekv", [densekv_bin, "--enable-debug-command", "local"]),
            Server("redis", [redis_bin, "--enable-debug-command", "yes"]),
        ]
        self.conns = [s.conns() for s in self.servers]

    def flushall(self) -> None:
        for c in self.conns:
            c[2].call([b"FLUSHALL"])
            c[2].call([b"SELECT", b"0"])
            c[3].call([b"SELECT", b"0"])

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


# ---------------------------------------------------------------------------
# Comparison modes


class Mode:
    EXACT = "exact"  # raw bytes
    UNORDERED = "unordered"  # an aggregate whose order is the hash table's (SMEMBERS, KEYS)
    PAIRS = "pairs"  # the same, in field/value pairs (HGETALL)
    SIZE = "size"  # random picks (SRANDMEMBER, HRANDFIELD): reply type and count only
    APPROX = "approx"  # TTLs: positive integers within TOLERANCE of each other
    XPENDING = "xpending"  # XPENDING's extended form: the idle times are zeroed
    SCAN = "scan"  # a whole SCAN-family iteration, compared as a set
    LEX = "lex"  # a lex range: sent only when every score in the sorted set is equal
    XINFO = "xinfo"  # XINFO STREAM without the fields later Redis versions added
    ALPHA = "alpha"  # SORT ALPHA: strings equal up to a NUL byte tie, in no set order


# Fields of XINFO STREAM from Redis 8.6 (IDMP), past the reference snapshot.
XINFO_LATER = {b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked",
               b"iids-added", b"iids-duplicates"}


TOLERANCE = 2000  # ms; seconds differ by at most 1 between two servers a moment apart


def _shape(n: Node, mode: str):
    if n.kind == "-" or not isinstance(n.value, list):
        if mode == Mode.SIZE and n.kind in "$=" and n.value is not None:
            return (n.kind, "<bulk>")
        return n.raw
    if mode == Mode.SIZE:
        return (n.kind, len(n.value))
    if mode == Mode.UNORDERED:
        return (n.kind, sorted(c.raw for c in n.value))
    if mode == Mode.PAIRS:
        v = n.value
        return (n.kind, sorted(zip((c.raw for c in v[0::2]), (c.raw for c in v[1::2]))))
    if mode == Mode.ALPHA:  # strcoll sees C strings
        return (n.kind, [c.value.split(b"\0")[0] if c.kind == "$" and c.value else c.raw
                         for c in n.value])
    if mode == Mode.XINFO:
        v = n.value
        return (n.kind, [(k.raw, x.raw) for k, x in zip(v[0::2], v[1::2])
                         if k.value not in XINFO_LATER])
    if mode == Mode.XPENDING:
        out = []
        for c in n.value:
            if isinstance(c.value, list) and len(c.value) == 4:
                out.append([x.raw for x in c.value[:2]] + ["<idle>", c.value[3].raw])
            else:
                out.append(c.raw)
        return (n.kind, out)
    return n.raw


def _approx_equal(a: Node, b: Node) -> bool:
    if a.kind == b.kind == ":":
        x, y = int(a.value), int(b.value)
        return x == y or (x > 0 and y > 0 and abs(x - y) <= TOLERANCE)
    if isinstance(a.value, list) and isinstance(b.value, list) and a.kind == b.kind:
        return len(a.value) == len(b.value) and all(
            _approx_equal(x, y) for x, y in zip(a.value, b.value))
    return a.raw == b.raw


def same(a: Node, b: Node, mode: str) -> bool:
    if mode == Mode.EXACT:
        return a.raw == b.raw
    if mode == Mode.APPROX:
        return _approx_equal(a, b)
    return _shape(a, mode) == _shape(b, mode)


# ---------------------------------------------------------------------------
# Generation: each family is a function returning one Step


@dataclass
class Cmd:
    args: list[bytes]
    mode: str = Mode.EXACT
    other: bool = False  # sent on the step's other connection (another client)


@dataclass
class Step:
    family: str
    cmds: list[Cmd]
    proto: int = 2
    index: int = 0

    def keys(self) -> set[bytes]:
        return {a for c in self.cmds for a in c.args[1:] if a in KEYSET or a.startswith(b"k*")}


def b(*parts) -> list[bytes]:
    return [p if isinstance(p, bytes) else str(p).encode() for p in parts]


INTS = ["0", "1", "2", "3", "5", "-1", "-2", "10", "100"]
BAD_INTS = ["", "abc", "1.5", " 1", "0x10", "9223372036854775807", "-9223372036854775808",
            "9223372036854775808", "-9223372036854775809", "1e3", "+1", "01", "-0"]
FLOATS = ["1.5", "-0.5", "0", "3", "-2", "10.25", "1e2", ".5", "5.", "0.1", "0.2", "1e-5",
          "5e20", "-0", "1.7976931348623157e308", "3.0000000000000004", "123456789012345678"]
BAD_FLOATS = ["inf", "-inf", "+inf", "nan", "abc", "", "1e309", "0x1p3", "1.5 ", "1e-320"]
VALUES = ["a", "b", "c", "hello", "", "0", "1", "2", "3", "7", "-3", "3.5", "x y",
          "\x00\xff", "é", "abcdefghij" * 4, "10", "ab", " 1", "1e400", "2\x00x", "HYLL",
          "0.1"]


class Gen:
    """Random arguments, mostly valid, with an edge case now and then."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, seq):
        return self.r.choice(seq)

    def key(self) -> str:
        return self.pick(KEYS)

    def keys(self, lo: int = 1, hi: int = 3) -> list[str]:
        return [self.key() for _ in range(self.r.randint(lo, hi))]

    def val(self) -> str:
        return self.pick(VALUES)

    def vals(self, lo: int = 1, hi: int = 4) -> list[str]:
        return [self.val() for _ in range(self.r.randint(lo, hi))]

    def int(self, good=INTS) -> str:
        return self.pick(BAD_INTS) if self.chance(0.08) else self.pick(good)

    def float(self) -> str:
        return self.pick(BAD_FLOATS) if self.chance(0.08) else self.pick(FLOATS + INTS)

    def kw(self, word: str) -> str:
        """An option keyword, in mixed case now and then (Redis ignores the case)."""
        return word.lower() if self.chance(0.15) else word

    def opts(self, *groups) -> list[str]:
        """Each group is a list of option lists; pick at most one from each, in a shuffled
        order, and seldom two from one group (which Redis refuses)."""
        out: list[list[str]] = []
        for g in groups:
            if self.chance(0.5):
                out.append(self.pick(g))
                if self.chance(0.05):
                    out.append(self.pick(g))
        self.r.shuffle(out)
        return [self.kw(x) if i == 0 else x for o in out for i, x in enumerate(o)]

    def ttl_opt(self, s: str = "EX", ms: str = "PX") -> list[str]:
        """A relative or absolute expire that cannot lapse while the run compares."""
        return self.pick([
            [s, self.pick(["100", "1000", "0", "-5", "abc", "9223372036854775807"])],
            [ms, self.pick(["100000", "5000000", "0", "-1"])],
            [s + "AT", self.pick(["4102444800", "1", "4102444900"])],
            [ms + "AT", self.pick(["4102444800000", "1000"])],
        ])

    def score(self) -> str:
        return self.pick(["-inf", "+inf", "(1", "(2.5", "0", "1", "2", "3", "10", "abc", "(",
                          "(-inf", "1.5"])

    def lex(self) -> str:
        return self.pick(["-", "+", "[a", "(a", "[b", "(c", "[", "a", "[hello", "(x y"])

    def offset(self) -> str:
        """A sorted-set range's LIMIT offset. Not negative: the snapshot's skiplist walk
        (zslNthInRange) counts a negative one from the end while its own listpack walk and
        Redis 7 give nothing; an encoding-dependent quirk, not a reference."""
        if self.chance(0.08):
            return self.pick(["", "abc", "1.5", "9223372036854775807"])
        return self.pick(["0", "1", "2", "5", "100"])

    def count(self) -> str:
        return self.int(["0", "1", "2", "3", "10", "-1", "-3"])


def grow(g: Gen, family: str) -> Step | None:
    """Now and then a key of the family's type big enough for Redis's large encoding
    (quicklist, hashtable, skiplist), whose replies can differ from the small one's."""
    if not g.chance(0.03):
        return None
    k, n = g.key(), g.r.randint(129, 200)
    items = [f"m{i}" for i in range(n)]
    scores = [g.pick(FLOATS + INTS) for _ in range(n)]
    make = {
        "lists": lambda: ["RPUSH", k, *items],
        "sets": lambda: ["SADD", k, *items],
        "hashes": lambda: ["HSET", k, *[x for m in items for x in (m, m)]],
        "zsets": lambda: ["ZADD", k, *[x for m, s in zip(items, scores) for x in (s, m)]],
    }
    return step(family, make[family]()) if family in make else None


def step(family: str, *cmds) -> Step:
    return Step(family, [c if isinstance(c, Cmd) else Cmd(b(*c)) for c in cmds])


def cmd(*parts, mode: str = Mode.EXACT) -> Cmd:
    return Cmd(b(*parts), mode)


def gen_strings(g: Gen) -> Step:
    k = g.key()
    pick = g.r.randrange(20)
    if pick == 0:
        extra = g.opts([["NX"], ["XX"]], [["GET"]], [g.ttl_opt(), ["KEEPTTL"]])
        return step("strings", ["SET", k, g.val(), *extra])
    if pick == 1:
        extra = g.opts([g.ttl_opt(), ["PERSIST"]])
        return step("strings", ["GETEX", k, *extra])
    if pick == 2:
        return step("strings", [g.pick(["GETDEL", "GET", "STRLEN"]), k])
    if pick == 3:
        off = g.pick(["0", "1", "3", "20", "-1", "536870912", "abc"])  # none that builds 512MB
        return step("strings", ["SETRANGE", k, off, g.val()])
    if pick == 4:
        return step("strings", [g.pick(["GETRANGE", "SUBSTR"]), k, g.int(), g.int()])
    if pick == 5:
        return step("strings", ["APPEND", k, g.val()])
    if pick == 6:
        return step("strings", [g.pick(["INCR", "DECR"]), k])
    if pick == 7:
        return step("strings", [g.pick(["INCRBY", "DECRBY"]), k, g.int()])
    if pick == 8:
        return step("strings", ["INCRBYFLOAT", k, g.float()])
    if pick == 9:
        pairs = [x for kk in g.keys() for x in (kk, g.val())]
        return step("strings", [g.pick(["MSET", "MSETNX"]), *pairs])
    if pick == 10:
        extra = g.opts([["LEN"], ["IDX"]], [["MINMATCHLEN", g.int()]], [["WITHMATCHLEN"]])
        return step("strings", ["LCS", k, g.key(), *extra])
    if pick == 11:
        return step("strings", ["SET", k, g.pick(INTS + FLOATS + BAD_INTS)])
    if pick == 12:
        return step("strings", ["MGET", *g.keys()])
    if pick == 13:
        return step("strings", ["SETNX", k, g.val()])
    if pick == 14:
        return step("strings", [g.pick(["SETEX", "PSETEX"]),
                                k, g.pick(["100000", "0", "-1", "abc"]), g.val()])
    if pick == 15:
        return step("strings", ["GETSET", k, g.val()])
    if pick == 16:  # a value long enough for LCS and GETRANGE to have something to chew
        return step("strings", ["SET", k, "".join(g.pick("abcx") for _ in range(12))])
    return step("strings", ["GET", k])


def gen_bits(g: Gen) -> Step:
    k = g.key()
    pick = g.r.randrange(8)
    if pick == 0:
        off = g.int(["0", "1", "7", "8", "15", "33", "100", "4294967296", "-1"])
        return step("bits", ["SETBIT", k, off, g.pick(["0", "1", "1", "2", "-1", "a"])])
    if pick == 1:
        return step("bits", ["GETBIT", k, g.int(["0", "1", "7", "64", "100", "-1"])])
    if pick == 2:
        rng = g.pick([[], [g.int(), g.int()], [g.int(), g.int(), g.kw(g.pick(["BIT", "BYTE"]))],
                      [g.int()]])
        return step("bits", ["BITCOUNT", k, *rng])
    if pick == 3:
        rng = g.pick([[], [g.int()], [g.int(), g.int()],
                      [g.int(), g.int(), g.kw(g.pick(["BIT", "BYTE", "BAD"]))]])
        return step("bits", ["BITPOS", k, g.pick(["0", "1", "1", "2"]), *rng])
    if pick == 4:
        op = g.kw(g.pick(["AND", "OR", "XOR", "NOT", "NAND"]))  # DIFF, ANDOR, ONE: 8.2, past the snapshot
        srcs = g.keys(1, 3)
        return step("bits", ["BITOP", op, g.key(), *srcs])
    if pick in (5, 6):
        name = "BITFIELD_RO" if pick == 6 else "BITFIELD"
        ops = []
        for _ in range(g.r.randint(1, 3)):
            ty = g.pick(["u8", "i8", "u1", "i16", "u63", "i64", "u64", "i65", "x8", "u0"])
            off = g.pick(["0", "1", "#1", "8", "100", "-1", "#-1", "4294967296"])
            sub = g.pick(["GET", "GET"] if pick == 6 else ["GET", "SET", "INCRBY", "OVERFLOW"])
            if sub == "OVERFLOW":
                ops += [g.kw("OVERFLOW"), g.pick(["WRAP", "SAT", "FAIL", "BAD"])]
            elif sub == "GET":
                ops += [g.kw("GET"), ty, off]
            else:
                ops += [g.kw(sub), ty, off, g.int(INTS + ["127", "-128", "300"])]
        return step("bits", [name, k, *ops])
    return step("bits", ["GET", k])


def gen_keys(g: Gen) -> Step:
    k = g.key()
    pick = g.r.randrange(14)
    if pick == 0:
        return step("keys", [g.pick(["DEL", "UNLINK", "EXISTS", "TOUCH"]), *g.keys()])
    if pick == 1:
        return step("keys", ["TYPE", k])
    if pick == 2:
        return step("keys", [g.pick(["RENAME", "RENAMENX"]), k, g.key()])
    if pick == 3:
        extra = g.opts([["REPLACE"]], [["DB", g.pick(["0", "1", "abc", "99"])]])
        return step("keys", ["COPY", k, g.key(), *extra])
    if pick in (4, 5):
        name = g.pick(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])
        t = {"EXPIRE": ["100", "200", "0", "-1", "abc", "9223372036854775807"],
             "PEXPIRE": ["100000", "200000", "0", "-1", "9223372036854775807"],
             "EXPIREAT": ["4102444800", "4102444900", "1", "9223372036854775807"],
             "PEXPIREAT": ["4102444800000", "4102444900000", "1"]}[name]
        extra = g.opts([["NX"], ["XX"], ["GT"], ["LT"]])
        return step("keys", [name, k, g.pick(t), *extra])
    if pick == 6:
        return step("keys", cmd(g.pick(["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]), k,
                                mode=Mode.APPROX))
    if pick == 7:
        return step("keys", ["PERSIST", k])
    if pick == 8:
        return step("keys", ["DBSIZE"])
    if pick == 9:
        return step("keys", cmd("KEYS", g.pick(["*", "k[1-3]", "k?", "x*", "k\\1"]),
                                mode=Mode.UNORDERED))
    if pick == 10:
        extra = g.opts([["MATCH", g.pick(["k*", "k[0-4]", "*1"])]],
                       [["COUNT", g.pick(["1", "3", "100"])]],
                       [["TYPE", g.pick(["string", "list", "hash", "zset", "set", "stream"])]])
        return step("keys", cmd("SCAN", "0", *extra, mode=Mode.SCAN))
    if pick == 11:
        return step("keys", ["SCAN", g.pick(["abc", "-1", "18446744073709551616"])])
    if pick == 12:
        return step("keys", ["MOVE", k, g.pick(["1", "0", "abc"])])
    return step("keys", ["EXISTS", k])


def gen_lists(g: Gen) -> Step:
    k = g.key()
    pick = g.r.randrange(16)
    if pick in (0, 1):
        return step("lists", [g.pick(["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), k, *g.vals()])
    if pick == 2:
        return step("lists", [g.pick(["LPOP", "RPOP"]), k, *g.pick([[], [g.count()]])])
    if pick == 3:
        return step("lists", [g.pick(["LLEN", "LINDEX"]), k, *([g.int()] if g.chance(.5) else [])])
    if pick == 4:
        return step("lists", ["LRANGE", k, g.int(), g.int()])
    if pick == 5:
        return step("lists", ["LSET", k, g.int(), g.val()])
    if pick == 6:
        return step("lists", ["LINSERT", k, g.kw(g.pick(["BEFORE", "AFTER", "MIDDLE"])),
                              g.val(), g.val()])
    if pick == 7:
        return step("lists", ["LREM", k, g.int(), g.val()])
    if pick == 8:
        return step("lists", ["LTRIM", k, g.int(), g.int()])
    if pick == 9:
        extra = g.opts([["RANK", g.int(["1", "2", "-1", "-2", "0", "-9223372036854775808"])]],
                       [["COUNT", g.count()]],
                       [["MAXLEN", g.count()]])
        return step("lists", ["LPOS", k, g.val(), *extra])
    if pick == 10:
        ks = g.keys()
        extra = g.opts([["COUNT", g.count()]])
        return step("lists", ["LMPOP", str(len(ks)) if g.chance(.9) else g.int(), *ks,
                              g.kw(g.pick(["LEFT", "RIGHT", "UP"])), *extra])
    if pick == 11:
        side = ["LEFT", "RIGHT"]
        return step("lists", ["LMOVE", k, g.key(), g.kw(g.pick(side)), g.kw(g.pick(side))])
    if pick == 12:
        return step("lists", ["RPOPLPUSH", k, g.key()])
    if pick == 13:
        return step("lists", ["LPOP", k, "0"])
    return step("lists", ["LRANGE", k, "0", "-1"])


def gen_hashes(g: Gen) -> Step:
    k = g.key()
    fields = ["f1", "f2", "f3", "a", "", "0"]
    f = g.pick(fields)
    pick = g.r.randrange(16)
    if pick in (0, 1):
        pairs = [x for _ in range(g.r.randint(1, 3)) for x in (g.pick(fields), g.val())]
        return step("hashes", [g.pick(["HSET", "HMSET"]), k, *pairs])
    if pick == 2:
        return step("hashes", ["HSETNX", k, f, g.val()])
    if pick == 3:
        return step("hashes", [g.pick(["HGET", "HEXISTS", "HSTRLEN"]), k, f])
    if pick == 4:
        return step("hashes", [g.pick(["HMGET", "HDEL"]), k, *[g.pick(fields) for _ in range(2)]])
    if pick == 5:
        return step("hashes", ["HLEN", k])
    if pick == 6:
        return step("hashes", ["HINCRBY", k, f, g.int()])
    if pick == 7:
        return step("hashes", ["HINCRBYFLOAT", k, f, g.float()])
    if pick == 8:
        name = g.pick(["HKEYS", "HVALS", "HGETALL"])
        return step("hashes", cmd(name, k, mode=Mode.PAIRS if name == "HGETALL" else Mode.UNORDERED))
    if pick == 9:
        extra = [g.count()] + (["WITHVALUES"] if g.chance(.4) else []) if g.chance(.8) else []
        return step("hashes", cmd("HRANDFIELD", k, *extra, mode=Mode.SIZE))
    if pick == 10:
        extra = g.opts([["MATCH", g.pick(["f*", "*", "a"])]], [["COUNT", "2"]], [["NOVALUES"]])
        return step("hashes", cmd("HSCAN", k, "0", *extra, mode=Mode.SCAN))
    if pick in (11, 12):
        name = g.pick(["HEXPIRE", "HPEXPIRE", "HEXPIREAT", "HPEXPIREAT"])
        t = {"HEXPIRE": ["100", "0", "-1", "abc"], "HPEXPIRE": ["100000", "0"],
             "HEXPIREAT": ["4102444800", "1"], "HPEXPIREAT": ["4102444800000", "1"]}[name]
        fs = [g.pick(fields) for _ in range(g.r.randint(1, 2))]
        cond = g.opts([["NX"], ["XX"], ["GT"], ["LT"]])
        n = str(len(fs)) if g.chance(.9) else g.int()
        return step("hashes", [name, k, g.pick(t), *cond, "FIELDS", n, *fs])
    if pick == 13:
        name = g.pick(["HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME", "HPERSIST"])
        fs = [g.pick(fields) for _ in range(g.r.randint(1, 2))]
        n = str(len(fs)) if g.chance(.9) else g.int()
        return step("hashes", cmd(name, k, "FIELDS", n, *fs, mode=Mode.APPROX))
    return step("hashes", ["HGET", k, f])


def gen_sets(g: Gen) -> Step:
    k = g.key()
    pick = g.r.randrange(14)
    if pick in (0, 1):
        return step("sets", [g.pick(["SADD", "SREM"]), k, *g.vals()])
    if pick == 2:
        return step("sets", [g.pick(["SCARD"]), k])
    if pick == 3:
        return step("sets", [g.pick(["SISMEMBER"]), k, g.val()])
    if pick == 4:
        return step("sets", ["SMISMEMBER", k, *g.vals()])
    if pick == 5:
        return step("sets", cmd("SMEMBERS", k, mode=Mode.UNORDERED))
    if pick == 6:
        return step("sets", cmd(g.pick(["SINTER", "SUNION", "SDIFF"]), *g.keys(),
                                mode=Mode.UNORDERED))
    if pick == 7:
        return step("sets", [g.pick(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), k, *g.keys()])
    if pick == 8:
        ks = g.keys()
        extra = g.opts([["LIMIT", g.count()]])
        return step("sets", ["SINTERCARD", str(len(ks)) if g.chance(.9) else g.int(), *ks, *extra])
    if pick == 9:
        return step("sets", ["SMOVE", k, g.key(), g.val()])
    if pick == 10:  # SPOP picks at random: compare its size, then drop the key on both sides
        extra = [g.count()] if g.chance(.6) else []
        return step("sets", cmd("SPOP", k, *extra, mode=Mode.SIZE), cmd("DEL", k))
    if pick == 11:
        extra = [g.count()] if g.chance(.7) else []
        return step("sets", cmd("SRANDMEMBER", k, *extra, mode=Mode.SIZE))
    if pick == 12:
        extra = g.opts([["MATCH", g.pick(["a*", "*", "1"])]], [["COUNT", "2"]])
        return step("sets", cmd("SSCAN", k, "0", *extra, mode=Mode.SCAN))
    return step("sets", ["SADD", k, *[g.pick(INTS) for _ in range(3)]])


def gen_zsets(g: Gen) -> Step:
    k = g.key()
    pick = g.r.randrange(22)
    if pick in (0, 1):
        flags = g.opts([["NX"], ["XX"]], [["GT"], ["LT"]], [["CH"]], [["INCR"]])
        same = g.chance(.3)  # all scores equal: a set the lex ranges are defined on
        pairs = [x for _ in range(g.r.randint(1, 3))
                 for x in ("0" if same else g.float(), g.val())]
        return step("zsets", ["ZADD", k, *flags, *pairs])
    if pick == 2:
        return step("zsets", ["ZINCRBY", k, g.float(), g.val()])
    if pick == 3:
        return step("zsets", [g.pick(["ZSCORE", "ZRANK", "ZREVRANK"]), k, g.val(),
                              *(["WITHSCORE"] if g.chance(.2) else [])])
    if pick == 4:
        return step("zsets", ["ZMSCORE", k, *g.vals()])
    if pick == 5:
        return step("zsets", [g.pick(["ZCARD"]), k])
    if pick == 6:
        return step("zsets", ["ZCOUNT", k, g.score(), g.score()])
    if pick == 7:
        return step("zsets", cmd("ZLEXCOUNT", k, g.lex(), g.lex(), mode=Mode.LEX))
    if pick in (8, 9):
        by = g.pick([None, "BYSCORE", "BYLEX"])
        lo, hi = {None: (g.int, g.int), "BYSCORE": (g.score, g.score), "BYLEX": (g.lex, g.lex)}[by]
        extra = g.opts([["REV"]], [["LIMIT", g.offset(), g.count()]], [["WITHSCORES"]])
        if by:
            extra.insert(g.r.randint(0, len(extra)), g.kw(by))
        name = g.pick(["ZRANGE", "ZRANGE", "ZRANGESTORE"])
        dst = [g.key()] if name == "ZRANGESTORE" else []
        mode = Mode.LEX if by == "BYLEX" else Mode.EXACT
        return step("zsets", cmd(name, *dst, k, lo(), hi(), *extra, mode=mode))
    if pick == 10:
        name = g.pick(["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"])
        extra = g.opts([["WITHSCORES"]], [["LIMIT", g.offset(), g.count()]])
        return step("zsets", [name, k, g.score(), g.score(), *extra])
    if pick == 11:
        name = g.pick(["ZRANGEBYLEX", "ZREVRANGEBYLEX"])
        extra = g.opts([["LIMIT", g.offset(), g.count()]])
        return step("zsets", cmd(name, k, g.lex(), g.lex(), *extra, mode=Mode.LEX))
    if pick == 12:
        return step("zsets", ["ZREVRANGE", k, g.int(), g.int(), *g.opts([["WITHSCORES"]])])
    if pick == 13:
        return step("zsets", ["ZREM", k, *g.vals()])
    if pick == 14:
        name = g.pick(["ZREMRANGEBYRANK", "ZREMRANGEBYSCORE", "ZREMRANGEBYLEX"])
        bound = {"ZREMRANGEBYRANK": g.int, "ZREMRANGEBYSCORE": g.score,
                 "ZREMRANGEBYLEX": g.lex}[name]
        mode = Mode.LEX if name == "ZREMRANGEBYLEX" else Mode.EXACT
        return step("zsets", cmd(name, k, bound(), bound(), mode=mode))
    if pick == 15:
        return step("zsets", [g.pick(["ZPOPMIN", "ZPOPMAX"]), k, *g.pick([[], [g.count()]])])
    if pick == 16:
        ks = g.keys()
        extra = g.opts([["COUNT", g.count()]])
        return step("zsets", ["ZMPOP", str(len(ks)) if g.chance(.9) else g.int(), *ks,
                              g.kw(g.pick(["MIN", "MAX", "MID"])), *extra])
    if pick in (17, 18):
        name = g.pick(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE",
                       "ZINTERCARD"])
        ks = g.keys()
        n = str(len(ks)) if g.chance(.9) else g.int()
        groups = [[["WEIGHTS", *[g.float() for _ in range(len(ks) + g.pick([0, 0, 0, 1, -1]))]]],
                  [["AGGREGATE", g.pick(["SUM", "MIN", "MAX", "AVG"])]]]
        if name == "ZINTERCARD":
            groups = [[["LIMIT", g.count()]]]
        elif not name.endswith("STORE"):
            groups.append([["WITHSCORES"]])
        if name.startswith("ZDIFF") and g.chance(.8):
            groups = groups[2:]
        dst = [g.key()] if name.endswith("STORE") else []
        return step("zsets", [name, *dst, n, *ks, *g.opts(*groups)])
    if pick == 19:
        extra = [g.count()] + (["WITHSCORES"] if g.chance(.4) else []) if g.chance(.8) else []
        return step("zsets", cmd("ZRANDMEMBER", k, *extra, mode=Mode.SIZE))
    if pick == 20:
        extra = g.opts([["MATCH", g.pick(["a*", "*", "1"])]], [["COUNT", "2"]])
        return step("zsets", cmd("ZSCAN", k, "0", *extra, mode=Mode.SCAN))
    return step("zsets", ["ZRANGE", k, "0", "-1", "WITHSCORES"])


def gen_hll(g: Gen) -> Step:
    k = g.key()
    pick = g.r.randrange(4)
    if pick == 0:
        return step("hll", ["PFADD", k, *g.vals(0, 5)])
    if pick == 1:
        return step("hll", ["PFCOUNT", *g.keys()])
    if pick == 2:
        return step("hll", ["PFMERGE", k, *g.keys(0, 3)])
    return step("hll", ["PFADD", k, *[f"e{g.r.randrange(500)}" for _ in range(30)]])


def gen_streams(g: Gen) -> Step:
    k = g.key()

    def sid() -> str:
        return g.pick(["1-1", "1-2", "2-0", "2-*", "3-1", "5", "0-0", "0-1", "10-*", "-", "+",
                       "1-18446744073709551615", "1-*", "0-*",
                       "(1-1", "18446744073709551615-18446744073709551615", "abc", "1-"])

    # A valid ENTRIESREAD is left out: Redis 8.x (and densekv) caps it at the entries added
    # and counts a group behind the first entry from that entry, the snapshot does neither.
    reads = ["-1", "-2", "abc"]
    group = g.pick(["g1", "g2"])
    consumer = g.pick(["c1", "c2"])
    pick = g.r.randrange(16)
    if pick in (0, 1, 2):
        trim = g.opts([["NOMKSTREAM"]], [[g.pick(["MAXLEN", "MINID"]),
                                          *g.pick([[], ["="], ["~"]]), g.pick(["2", "0", "1-1"])]])
        fields = [x for _ in range(g.r.randint(1, 2)) for x in (g.pick(["f", "g"]), g.val())]
        return step("streams", ["XADD", k, *trim, sid(), *fields])
    if pick == 3:
        extra = g.opts([["COUNT", g.count()]])
        return step("streams", [g.pick(["XRANGE", "XREVRANGE"]), k, sid(), sid(), *extra])
    if pick == 4:
        if g.chance(.5):
            return step("streams", ["XLEN", k])
        extra = g.opts([["ENTRIESADDED", g.pick(["0", "5", "-1"])]],
                       [["MAXDELETEDID", g.pick(["0-0", "3-0", "99-0"])]])
        return step("streams", ["XSETID", k, g.pick(["5-0", "0-0", "99-1", "abc"]), *extra])
    if pick == 5:
        return step("streams", ["XDEL", k, sid(), *g.pick([[], [sid()]])])
    if pick == 6:
        limit = ["LIMIT", g.pick(["0", "10", "-1"])] if g.chance(.2) else []
        return step("streams", ["XTRIM", k, g.pick(["MAXLEN", "MINID"]),
                                *g.pick([[], ["="], ["~"]]), g.pick(["1", "0", "2-0", "-1"]), *limit])
    if pick == 7:
        sub = g.pick(["CREATE", "CREATE", "SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER"])
        args = {"CREATE": [k, group, g.pick(["0", "$", "1-1", "abc"]),
                           *g.opts([["MKSTREAM"]], [["ENTRIESREAD", g.pick(reads)]])],
                "SETID": [k, group, g.pick(["0", "$", "2-0"]),
                          *g.opts([["ENTRIESREAD", g.pick(reads)]])],
                "DESTROY": [k, group],
                "CREATECONSUMER": [k, group, consumer],
                "DELCONSUMER": [k, group, consumer]}[sub]
        return step("streams", ["XGROUP", g.kw(sub), *args])
    if pick in (8, 9):
        extra = g.opts([["COUNT", g.count()]], [["NOACK"]])
        return step("streams", ["XREADGROUP", "GROUP", group, consumer, *extra, "STREAMS", k,
                                g.pick([">", ">", "0", "1-1"])])
    if pick == 10:
        extra = g.opts([["COUNT", g.count()]])
        return step("streams", ["XREAD", *extra, "STREAMS", k, g.pick(["0", "1-1", "$"])])
    if pick == 11:
        return step("streams", ["XACK", k, group, sid(), *g.pick([[], [sid()]])])
    if pick == 12:
        if g.chance(.5):
            return step("streams", ["XPENDING", k, group])
        extra = [consumer] if g.chance(.5) else []
        idle = ["IDLE", "0"] if g.chance(.2) else []
        return step("streams", cmd("XPENDING", k, group, *idle, "-", "+", g.count(), *extra,
                                   mode=Mode.XPENDING))
    if pick == 13:
        ids = [sid() for _ in range(g.r.randint(1, 2))]
        extra = g.opts([["JUSTID"]], [["FORCE"]], [["RETRYCOUNT", g.int()]],
                       [["LASTID", g.pick(["5-0", "0"])]])
        return step("streams", ["XCLAIM", k, group, consumer, "0", *ids, *extra])
    if pick == 14:
        extra = g.opts([["COUNT", g.count()]], [["JUSTID"]])
        return step("streams", ["XAUTOCLAIM", k, group, consumer, "0",
                                g.pick(["0", "0-0", "1-2"]), *extra])
    if g.chance(.5):
        return step("streams", cmd("XINFO", "STREAM", k, mode=Mode.XINFO))
    return step("streams", ["XINFO", "GROUPS", k])


def gen_sort(g: Gen) -> Step:
    k = g.key()
    if g.chance(.3):  # something to sort, with members that name keys for BY and GET
        return step("sort", [g.pick(["RPUSH", "SADD"]), k,
                             *[g.pick(["0", "1", "2", "3", "5", "7", "a", "10"])
                               for _ in range(3)]])
    if g.chance(.15):
        return step("sort", ["HSET", k, "w", g.pick(INTS + ["x"]), "n", g.val()])
    extra = g.opts([["BY", g.pick(["k*", "nosort", "k*->w", "nokey*", "k*->n"])]],
                   [["LIMIT", g.int(), g.count()]],
                   [["GET", g.pick(["#", "k*", "k*->n"])], ["GET", "#", "GET", "k*->w"]],
                   [["ASC"], ["DESC"]], [["ALPHA"]], [["STORE", g.key()]])
    name = "SORT_RO" if g.chance(.2) else "SORT"
    mode = sort_mode(extra)  # before extra is used: it may drop STORE
    return step("sort", cmd(name, k, *extra, mode=mode))


def sort_mode(extra: list[str]) -> str:
    """Redis leaves some SORT orders to its input (a set's hash table order) or to its
    unstable quicksort: BY nosort without STORE, and ALPHA by a pattern, whose ties are not
    broken. Those compare as sets, or by size when LIMIT keeps an arbitrary part."""
    words = [w.upper() for w in extra]
    by = words[words.index("BY") + 1] if "BY" in words else None
    loose = (by == "NOSORT" and "STORE" not in words) or (
        by not in (None, "NOSORT") and "ALPHA" in words)
    if not loose:
        # Without STORE, ALPHA compares with strcoll, which stops at a NUL byte.
        return Mode.ALPHA if "ALPHA" in words and "STORE" not in words else Mode.EXACT
    while "STORE" in words:  # an arbitrary order stored would spread to later reads
        i = words.index("STORE")
        del extra[i:i + 2], words[i:i + 2]
    return Mode.SIZE if "LIMIT" in words else Mode.UNORDERED


FAMILIES = {
    "strings": gen_strings,
    "bits": gen_bits,
    "keys": gen_keys,
    "lists": gen_lists,
    "hashes": gen_hashes,
    "sets": gen_sets,
    "zsets": gen_zsets,
    "hll": gen_hll,
    "streams": gen_streams,
    "sort": gen_sort,
}


def gen_transaction(g: Gen, families: list[str]) -> Step:
    """MULTI ... EXEC (or DISCARD) around deterministic commands, sometimes with a queued
    command Redis refuses, a runtime error inside, or a WATCH the step itself breaks."""
    inner: list[Cmd] = []
    for _ in range(g.r.randint(1, 4)):
        while True:
            s = FAMILIES[g.pick(families)](g)
            if all(c.mode == Mode.EXACT for c in s.cmds):
                break
        inner += s.cmds
    if g.chance(.15):
        inner.insert(g.r.randrange(len(inner) + 1),
                     cmd(*g.pick([["GET"], ["NOSUCHCMD", "x"], ["SET", "k0"], ["MULTI"],
                                  ["WATCH", "k1"]])))
    pre: list[Cmd] = []
    if g.chance(.3):
        w = g.key()
        pre.append(cmd("WATCH", w))
        if g.chance(.5):  # touched by this client or another, before MULTI or while queued
            touch = cmd(g.pick(["SET", "APPEND"]), w, "touched")
            touch.other = g.chance(.5)
            if g.chance(.5):
                pre.append(touch)
            else:
                inner.insert(g.r.randrange(len(inner) + 1), Cmd(touch.args, other=True))
    end = cmd(g.pick(["EXEC", "EXEC", "EXEC", "DISCARD"]))
    post = [cmd("UNWATCH")] if pre else []
    if g.chance(.05):  # EXEC or DISCARD with no MULTI
        return step("multi", *pre, end, *post)
    return step("multi", *pre, cmd("MULTI"), *inner, end, *post)


def mutate(g: Gen, s: Step) -> None:
    """Now and then drop or add an argument: arity and syntax errors."""
    c = s.cmds[0]
    if len(s.cmds) == 1 and c.mode != Mode.SCAN and g.chance(0.04):
        if len(c.args) > 1 and g.chance(.6):
            del c.args[g.r.randrange(1, len(c.args)):]
        else:
            c.args.append(g.pick([b"x", b"1", b"EXTRA"]))


def generate(seed: int, n: int, families: list[str], resp: str) -> list[Step]:
    g = Gen(random.Random(seed))
    plain = [f for f in families if f != "multi"]
    steps: list[Step] = []
    ncmds = 0
    while ncmds < n:
        fam = g.pick(families)
        if fam == "multi":
            s = gen_transaction(g, plain or list(FAMILIES))
        else:
            s = grow(g, fam) or FAMILIES[fam](g)
        mutate(g, s)
        s.proto = {"2": 2, "3": 3}.get(resp) or g.pick([2, 3])
        s.index = len(steps)
        steps.append(s)
        ncmds += len(s.cmds)
    return steps


# ---------------------------------------------------------------------------
# Running and comparing


def run_scan(conn: Conn, args: list[bytes], mode_pairs: bool) -> Node:
    """A whole iteration from cursor 0, as one aggregate of what it returned (or the first
    reply when that is not a cursor and a batch)."""
    cursor, seen = b"0", []
    for _ in range(10000):
        a = list(args)
        pos = 1 if a[0].upper() == b"SCAN" else 2
        a[pos] = cursor
        reply = conn.call(a)
        if reply.kind != "*" or len(reply.value or []) != 2:
            return reply
        cursor = reply.value[0].value
        seen += reply.value[1].value
        if cursor == b"0":
            break
    if mode_pairs:
        items = sorted(set(zip((c.raw for c in seen[0::2]), (c.raw for c in seen[1::2]))))
        flat = [x for p in items for x in p]
    else:
        flat = sorted(set(c.raw for c in seen))
    raw = b"*%d\r\n" % len(flat) + b"".join(flat)
    return Node("*", [parse(x)[0] for x in flat], raw)


def call(conn: Conn, c: Cmd) -> Node:
    if c.mode == Mode.SCAN:
        pairs = c.args[0].upper() in (b"HSCAN", b"ZSCAN") and b"NOVALUES" not in (
            a.upper() for a in c.args)
        return run_scan(conn, c.args, pairs)
    return conn.call(c.args)


SKIPPED = Node("+", b"skipped", b"+skipped\r\n")


def lex_defined(conn: Conn, c: Cmd) -> bool:
    """Whether a lex range on c's sorted set is defined: Redis leaves it unspecified
    unless all scores are equal (its first and last score on the reference)."""
    words = [a.upper() for a in c.args]
    at = 2 if words[0] == b"ZRANGESTORE" else 1
    if len(c.args) <= at:
        return True  # an arity error
    key = c.args[at]
    ends = [conn.call([b"ZRANGE", key, i, i, b"WITHSCORES"]) for i in (b"0", b"-1")]
    if any(e.kind != "*" or len(e.value) != 2 for e in ends):
        return True  # no such key or not a sorted set: the reply is defined
    return ends[0].value[1].raw == ends[1].value[1].raw


def run_step(pair: Pair, s: Step) -> list[tuple[Node, Node]]:
    out = []
    for c in s.cmds:
        if c.mode == Mode.LEX and not lex_defined(pair.conns[1][2], c):
            out.append((SKIPPED, SKIPPED))  # not sent at all: it may write
            continue
        proto = 5 - s.proto if c.other else s.proto  # RESP2 <-> RESP3
        out.append(tuple(call(conns[proto], c) for conns in pair.conns))
    return out


def differs(s: Step, replies: list[tuple[Node, Node]]) -> list[int]:
    return [i for i, (c, (d, r)) in enumerate(zip(s.cmds, replies))
            if not same(d, r, Mode.EXACT if c.mode == Mode.SCAN else c.mode)]


def related(steps: list[Step], upto: int) -> list[Step]:
    """The steps before `upto` that touched its keys, or keys those touched (transitively)."""
    keys = set(steps[upto].keys())
    out = []
    for s in reversed(steps[:upto]):
        ks = s.keys()
        if ks & keys or any(k.startswith(b"k*") for k in ks | keys):
            keys |= ks
            out.append(s)
    return out[::-1]


def reproduces(scratch: Pair, history: list[Step], target: Step) -> bool:
    scratch.flushall()
    for s in history:
        run_step(scratch, s)
    return bool(differs(target, run_step(scratch, target)))


def minimise(scratch: Pair, history: list[Step], target: Step, budget: int = 300) -> list[Step] | None:
    if not reproduces(scratch, history, target):
        return None
    # Drop chunks of halving size (the whole history first), down to single steps.
    tries, chunk = 0, max(1, len(history))
    while tries < budget:
        i = 0
        while i < len(history) and tries < budget:
            cand = history[:i] + history[i + chunk:]
            tries += 1
            if reproduces(scratch, cand, target):
                history = cand
            else:
                i += chunk
        if chunk == 1:
            break
        chunk = max(1, chunk // 2)
    return history


def show(args: list[bytes]) -> str:
    def q(a: bytes) -> str:
        s = a.decode("utf-8", "backslashreplace")
        return s if s and all(c.isprintable() and c not in " '\"\\" for c in s) else repr(a)[1:]
    return " ".join(q(a) for a in args)


def show_step(s: Step) -> str:
    cmds = "; ".join(("(other client) " if c.other else "") + show(c.args) for c in s.cmds)
    return f"    [#{s.index} RESP{s.proto}] {cmds}"


@dataclass
class Stats:
    commands: collections.Counter = field(default_factory=collections.Counter)
    diffs: collections.Counter = field(default_factory=collections.Counter)
    seen: dict = field(default_factory=dict)
    skipped: int = 0


def report(stats: Stats, scratch_fn, steps: list[Step], s: Step, i: int,
           d: Node, r: Node, seed: int) -> None:
    c = s.cmds[i]
    name = c.args[0].upper().decode("utf-8", "replace")
    sig = (name, d.raw[:1], r.raw[:1], d.raw[:40] if d.kind == "-" else b"",
           r.raw[:40] if r.kind == "-" else b"")
    stats.diffs[s.family] += 1
    if sig in stats.seen:
        stats.seen[sig] += 1
        return
    stats.seen[sig] = 1
    print(f"DIFF seed={seed} step=#{s.index} family={s.family} RESP{s.proto} ({c.mode})")
    print(f"  command: {show(c.args)}")
    print(f"  densekv: {d.raw!r}")
    print(f"  redis:   {r.raw!r}")
    history = related(steps, s.index)
    minimal = minimise(scratch_fn(), history, s)
    if minimal is None:
        print("  (not reproduced on fresh servers; the related earlier steps:)")
        minimal = history[-20:]
    else:
        print("  minimal reproduction (fresh servers, in order):")
    for h in minimal + [s]:
        print(show_step(h))
    print(flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commands", type=int, default=2000)
    ap.add_argument("--families", default=",".join(list(FAMILIES) + ["multi"]),
                    help="comma-separated: " + ", ".join(list(FAMILIES) + ["multi"]))
    ap.add_argument("--densekv-bin", default=str(ROOT / "target" / "release" / "densekv-server"))
    ap.add_argument("--redis-bin", default="redis-server")
    ap.add_argument("--resp", choices=["2", "3", "both"], default="both")
    ap.add_argument("--keep-going", action="store_true",
                    help="go on after a difference (the keys it touched are dropped on both)")
    args = ap.parse_args()

    families = [f for f in args.families.split(",") if f]
    unknown = set(families) - set(FAMILIES) - {"multi"}
    if unknown:
        print(f"unknown families: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    steps = generate(args.seed, args.commands, families, args.resp)

    try:
        pair = Pair(args.densekv_bin, args.redis_bin)
    except (RuntimeError, OSError) as e:
        print(f"setup: {e}", file=sys.stderr)
        return 2
    scratch: list[Pair] = []

    def scratch_fn() -> Pair:
        if not scratch:
            scratch.append(Pair(args.densekv_bin, args.redis_bin))
        return scratch[0]

    stats = Stats()
    try:
        pair.flushall()
        for s in steps:
            stats.commands[s.family] += len(s.cmds)
            try:
                replies = run_step(pair, s)
            except (OSError, ConnectionError, ValueError) as e:
                print(f"ABORT at step #{s.index} ({show_step(s).strip()}): {e}")
                stats.diffs[s.family] += 1
                break
            stats.skipped += sum(d is SKIPPED for d, _ in replies)
            bad = differs(s, replies)
            for i in bad:
                report(stats, scratch_fn, steps, s, i, *replies[i], args.seed)
            if bad:
                if not args.keep_going:
                    break
                ks = sorted(s.keys() & KEYSET)
                for conns in pair.conns:
                    if ks:
                        conns[2].call([b"DEL", *ks])
                    conns[2].call([b"DISCARD"])  # in case the step left a MULTI open
    finally:
        pair.stop()
        for p in scratch:
            p.stop()

    total_c, total_d = sum(stats.commands.values()), sum(stats.diffs.values())
    print(f"seed {args.seed}: {total_c} commands, {total_d} differing replies "
          f"({len(stats.seen)} distinct); {stats.skipped} lex ranges not sent (mixed scores)")
    for fam in sorted(stats.commands):
        print(f"  {fam:8} {stats.commands[fam]:7} commands {stats.diffs[fam]:5} diffs")
    return 1 if total_d else 0


if __name__ == "__main__":
    sys.exit(main())
