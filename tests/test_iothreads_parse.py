"""Requests parsed ahead: by an I/O thread (io-threads > 1), and by the executor for a
pipeline's batch whose keys it prefetches.

Whatever parsed a request first, the executor's rules over the query buffer decide what
runs and when: these tests send pipelines split across reads, inline commands, big
arguments (past what a thread keeps of an unfinished request), requests held by CLIENT
PAUSE or behind a blocked command, and limits that change with AUTH mid-pipeline, and
check every reply in order. Each runs at io-threads 4 and 1.
"""

from __future__ import annotations

import socket
import time

import pytest
import redis

from conftest import RawConn

THREADS = ["4", "1"]


cmd = RawConn.encode


class Conn:
    """A raw connection reading RESP2 replies."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.s.sendall(data)

    def _fill(self) -> None:
        got = self.s.recv(1 << 20)
        if not got:
            raise EOFError("connection closed")
        self.buf += got

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            return line
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise AssertionError(f"unexpected reply line {line!r}")

    def nothing_for(self, seconds: float) -> bool:
        """True if no reply byte arrives within `seconds`."""
        if self.buf:
            return False
        self.s.settimeout(seconds)
        try:
            got = self.s.recv(1 << 16)
        except socket.timeout:
            return True
        finally:
            self.s.settimeout(10)
        self.buf += got
        return False

    def closed(self) -> bool:
        self.s.settimeout(5)
        try:
            return self.s.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.s.close()


@pytest.fixture(params=THREADS, ids=[f"io-threads-{t}" for t in THREADS])
def server(request, start_server):
    return start_server("--io-threads", request.param)


def test_pipeline_split_across_reads_at_every_byte(server):
    c = Conn(server.port)
    reqs = [cmd("SET", f"k{i}", "v" * i) for i in range(40)] + [cmd("GET", f"k{i}") for i in range(40)]
    data = b"".join(reqs)
    # Pieces of 1 to 13 bytes, each in its own read: headers, bulks and CRLFs cut
    # everywhere.
    at, step = 0, 1
    while at < len(data):
        c.send(data[at:at + step])
        time.sleep(0.002)
        at += step
        step = step % 13 + 1
    for i in range(40):
        assert c.reply() == b"+OK"
    for i in range(40):
        assert c.reply() == b"v" * i
    c.close()


def test_inline_and_multibulk_mixed(server):
    c = Conn(server.port)
    c.send(b"SET a 1\r\n" + cmd("INCR", "a") + b"set b \"x y\"\r\n\r\n" + cmd("GET", "b") + b"INCRBY a 5\nGET a\r\n")
    assert [c.reply() for _ in range(5)] == [b"+OK", 2, b"+OK", b"x y", 7]
    assert c.reply() == b"7"
    # An inline request split across reads.
    c.send(b"APPE")
    time.sleep(0.05)
    c.send(b"ND a 8\r")
    time.sleep(0.05)
    c.send(b"\nGET a\r\n")
    assert c.reply() == 2
    assert c.reply() == b"78"
    c.close()


def test_big_arguments_between_small_requests(server):
    c = Conn(server.port)
    r = redis.Redis(host="127.0.0.1", port=server.port)
    # 200 KB: past what an I/O thread keeps of an unfinished request, so the thread
    # stops parsing this client; 3 MB: more than a read window; the small requests
    # behind them, and after them once the thread parses again, run in order.
    big1, big2 = b"a" * 200_000, bytes(range(256)) * 12_000
    for _ in range(3):
        c.send(cmd("SET", "big1", big1) + cmd("INCR", "n") + cmd("SET", "big2", big2) + cmd("INCR", "n")
               + b"".join(cmd("RPUSH", "l", i) for i in range(100)) + cmd("STRLEN", "big2"))
        assert c.reply() == b"+OK"
        n = c.reply()
        assert c.reply() == b"+OK"
        assert c.reply() == n + 1
        replies = [c.reply() for _ in range(100)]
        assert replies == list(range(replies[0], replies[0] + 100))
        assert c.reply() == len(big2)
    c.send(b"".join(cmd("INCR", "after") for _ in range(500)))
    assert [c.reply() for _ in range(500)] == list(range(1, 501))
    assert r.get("big1") == big1 and r.get("big2") == big2
    assert r.lrange("l", 0, -1) == [str(i).encode() for i in range(100)] * 3
    c.close()


def test_client_pause_holds_pipelined_requests_in_order(server):
    r = redis.Redis(host="127.0.0.1", port=server.port)
    c = Conn(server.port)
    r.client_pause(10_000, all=False)
    c.send(cmd("GET", "k") + cmd("SET", "k", "1") + cmd("INCR", "k") + cmd("GET", "k")
           + b"".join(cmd("INCR", "n") for _ in range(30)))
    # The read runs; the first write is held, and everything behind it waits.
    assert c.reply() is None
    assert c.nothing_for(0.5)
    assert r.get("k") is None and r.get("n") is None
    r.client_unpause()
    assert [c.reply() for _ in range(3)] == [b"+OK", 2, b"2"]
    assert [c.reply() for _ in range(30)] == list(range(1, 31))
    c.close()


def test_blocked_client_with_pipelined_requests_behind(server):
    r = redis.Redis(host="127.0.0.1", port=server.port)
    c = Conn(server.port)
    c.send(cmd("SET", "before", "1") + cmd("BLPOP", "q", "0") + cmd("SET", "after", "1")
           + b"".join(cmd("INCR", "n") for _ in range(20)) + cmd("GET", "after"))
    assert c.reply() == b"+OK"
    assert c.nothing_for(0.3)
    assert r.get("after") is None and r.get("n") is None
    r.lpush("q", "x")
    assert c.reply() == [b"q", b"x"]
    assert c.reply() == b"+OK"
    assert [c.reply() for _ in range(20)] == list(range(1, 21))
    assert c.reply() == b"1"
    c.close()


def test_protocol_error_behind_valid_requests(server):
    c = Conn(server.port)
    c.send(cmd("SET", "a", "1") + cmd("INCR", "a") + b"*2\r\n$3\r\nGET\r\nxyz\r\n" + cmd("INCR", "a"))
    assert c.reply() == b"+OK"
    assert c.reply() == 2
    assert c.reply() == b"-ERR Protocol error: expected '$', got 'x'"
    assert c.closed()
    assert redis.Redis(host="127.0.0.1", port=server.port).get("a") == b"2"


def test_unauthenticated_limits_change_with_auth_mid_pipeline(server):
    r = redis.Redis(host="127.0.0.1", port=server.port)
    r.config_set("requirepass", "pw")
    many = cmd("MSET", *[x for i in range(10) for x in (f"m{i}", i)])  # 21 arguments
    # After AUTH in the same pipeline, the request past the unauthenticated limits runs.
    c = Conn(server.port)
    c.send(cmd("AUTH", "pw") + many + cmd("GET", "m9"))
    assert [c.reply() for _ in range(3)] == [b"+OK", b"+OK", b"9"]
    c.close()
    # Without it, the same request is refused as Redis refuses it, and the
    # connection closes.
    c = Conn(server.port)
    c.send(cmd("PING") + many)
    assert c.reply().startswith(b"-NOAUTH")
    assert c.reply() == b"-ERR Protocol error: unauthenticated multibulk length"
    assert c.closed()
    # A big argument before AUTH, as well.
    c = Conn(server.port)
    c.send(cmd("ECHO", "x" * 20_000))
    assert c.reply() == b"-ERR Protocol error: unauthenticated bulk length"
    assert c.closed()


def test_pipelines_of_many_clients_over_a_large_keyspace(server):
    """The executor prefetches each batch's keys: every reply is still its own."""
    r = redis.Redis(host="127.0.0.1", port=server.port)
    r.execute_command("DEBUG", "POPULATE", 200_000, "key")
    conns = [Conn(server.port) for _ in range(8)]
    for rnd in range(5):
        for j, c in enumerate(conns):
            keys = [(j * 7919 + rnd * 104729 + i * 31) % 200_000 for i in range(64)]
            c.send(b"".join(cmd("GET", f"key:{k}") + cmd("SELECT", 1) + cmd("SET", f"w{j}", k) + cmd("SELECT", 0)
                            for k in keys))
            c.keys = keys
        for j, c in enumerate(conns):
            for k in c.keys:
                assert c.reply() == b"value:%d" % k
                assert c.reply() == b"+OK"
                assert c.reply() == b"+OK"
                assert c.reply() == b"+OK"
    assert {redis.Redis(host="127.0.0.1", port=server.port, db=1).get(f"w{j}") for j in range(8)} == {str(c.keys[-1]).encode() for c in conns}
    for c in conns:
        c.close()
