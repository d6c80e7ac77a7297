"""Protocol robustness: malformed input gets Redis's exact protocol error and the
connection closes; huge or unterminated requests and clients that never read their
replies hurt nobody else; big pipelines and multibulks work."""

import errno
import os
import random
import socket
import threading
import time


def test_protocol_errors_close_connection(raw):
    cases = [
        (b"*1\r\n$2000000000\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*3000000000\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\nfoo\r\n", b"-ERR Protocol error: expected '$', got 'f'\r\n"),
        (b"*1\r\n$-1\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$abc\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b'set "foo\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
        (b"set 'foo\"\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n"),
        (b"*1\r\n" + b"$" + b"1" * 70000, b"-ERR Protocol error: too big bulk count string\r\n"),
        (b"*" + b"1" * 70000, b"-ERR Protocol error: too big mbulk count string\r\n"),
        (b"x" * 70000, b"-ERR Protocol error: too big inline request\r\n"),
    ]
    for data, err in cases:
        c = raw()
        c.send(data)
        assert c.expect_closed() == err, data[:40]


def test_error_after_good_commands_in_same_packet(raw):
    c = raw()
    c.send(b"PING\r\n*1\r\n$4\r\nPING\r\n*x\r\n")
    assert c.expect_closed() == b"+PONG\r\n+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"


def test_random_garbage_never_hurts_server(raw, r):
    rng = random.Random(1234)
    for i in range(200):
        c = raw(timeout=2)
        blob = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 600)))
        if i % 3 == 0:
            blob = b"*" + blob
        elif i % 3 == 1:
            blob = b"*2\r\n$" + blob
        send_then_eof(c, blob)
        # The server must close: EOF or a reset within 2 s. A timeout raises
        # TimeoutError out of expect_closed and fails the test.
        c.expect_closed(timeout=2)
        c.close()
    assert r.ping() is True
    r.set(b"k", b"v")
    assert r.get(b"k") == b"v"


def send_then_eof(c, data: bytes) -> None:
    """Send data, then our FIN. The server may have closed already (a protocol
    error in an earlier chunk), which shows up here as a broken pipe, a reset,
    or ENOTCONN from shutdown; anything else, a timeout included, is raised."""
    try:
        c.send(data)
        c.sock.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        pass
    except OSError as e:
        if e.errno != errno.ENOTCONN:
            raise


def test_inline_commands_with_quotes(raw):
    c = raw()
    c.send(b'SET "my key" "a\\x41\\n\\"q\\""\r\n')
    assert c.read_reply() == b"+OK\r\n"
    c.send(b"GET 'my key'\r\n")
    assert c.read_reply() == b'$6\r\naA\n"q"\r\n'
    c.send(b"\r\n   \r\nPING\n")  # empty lines are skipped, bare \n ends a line
    assert c.read_reply() == b"+PONG\r\n"
    c.send(b"ECHO 'it\\'s'\r\n")
    assert c.read_reply() == b"$4\r\nit's\r\n"


def test_unterminated_multibulk_does_not_block_others(raw, r):
    c = raw()
    c.send(b"*10\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc")
    t = time.monotonic()
    assert r.ping() is True
    r.set(b"other", b"1")
    assert r.get(b"other") == b"1"
    assert time.monotonic() - t < 1.0
    c.close()
    assert r.ping() is True


def test_declared_huge_bulk_costs_nothing(raw, r):
    # 500 MB declared (under proto-max-bulk-len) but never sent.
    c = raw()
    c.send(b"*2\r\n$4\r\nECHO\r\n$500000000\r\nabc")
    time.sleep(0.2)
    rss = int(r.info("memory")["used_memory_rss"])
    assert rss < 400 * 1024 * 1024
    assert r.ping() is True
    c.close()


def test_million_argument_multibulk(raw, r):
    n = 1_000_000
    parts = [b"*%d\r\n$3\r\nDEL\r\n" % (n + 1)]
    parts.extend(b"$%d\r\nk%d\r\n" % (len(b"k%d" % i), i) for i in range(n))
    r.set(b"k5", b"x")
    r.set(b"k999999", b"x")
    c = raw(timeout=60)
    c.send(b"".join(parts))
    assert c.read_reply() == b":2\r\n"
    assert c.call("PING") == b"+PONG\r\n"


def test_big_pipeline_is_fast(raw):
    c = raw(timeout=30)
    n = 20000
    req = b"".join(RawEncode.set_cmd(i) for i in range(n))
    t = time.monotonic()
    c.send(req)
    out = b""
    expect = b"+OK\r\n" * n
    while len(out) < len(expect):
        chunk = c.sock.recv(1 << 20)
        assert chunk
        out += chunk
    assert out == expect
    assert time.monotonic() - t < 5.0
    c.send(b"".join(RawEncode.get_cmd(i) for i in range(n)))
    for i in (0, 1):
        v = b"v%d" % i
        assert c.read_reply() == b"$%d\r\n%s\r\n" % (len(v), v)


class RawEncode:
    @staticmethod
    def set_cmd(i):
        k, v = b"key:%d" % i, b"v%d" % i
        return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v)

    @staticmethod
    def get_cmd(i):
        k = b"key:%d" % i
        return b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k)


def test_big_bulk_arrives_in_pieces(raw, r):
    val = os.urandom(1024) * (8 * 1024)  # 8 MB
    c = raw(timeout=30)
    data = RawConnEncode(b"SET", b"big", val)
    for i in range(0, len(data), 100_000):
        c.send(data[i:i + 100_000])
    assert c.read_reply() == b"+OK\r\n"
    assert r.get(b"big") == val


def RawConnEncode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def test_client_that_never_reads_does_not_grow_memory(server, r, new_client):
    value = os.urandom(100 * 1024)
    r.set(b"big", value)
    base = int(r.info("memory")["used_memory"])
    sock = socket.create_connection((server.host, server.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    get = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n"
    chunk = get * 10000
    total = 200 * 1024 * 1024
    sent = [0]
    stop = threading.Event()

    def writer():
        sock.settimeout(2.0)
        try:
            while sent[0] < total and not stop.is_set():
                sock.sendall(chunk)
                sent[0] += len(chunk)
        except OSError:
            pass

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    other = new_client()
    for _ in range(20):
        t = time.monotonic()
        assert other.get(b"big") == value
        assert time.monotonic() - t < 1.0
        time.sleep(0.1)
    used = int(other.info("memory")["used_memory"])
    assert used - base < 150 * 1024 * 1024, (base, used)
    stop.set()
    sock.close()
    th.join(5)
    assert other.get(b"big") == value
    assert other.ping() is True


def test_query_buffer_limit_closes_client(new_client, raw):
    admin = new_client()
    admin.config_set("client-query-buffer-limit", "1048576")
    try:
        c = raw()
        c.send(b"*2\r\n$4\r\nECHO\r\n$3000000\r\n")
        try:
            for _ in range(40):
                c.send(b"x" * 100_000)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still sending; a send timeout fails the test
        # Redis closes such a client without a reply. EOF or a reset must come
        # within 5 s: expect_closed raises TimeoutError (a failure) otherwise.
        assert c.expect_closed(timeout=5) == b""
    finally:
        admin.config_set("client-query-buffer-limit", "1073741824")
    assert admin.ping() is True


def test_maxclients(new_client, raw):
    admin = new_client()
    n = int(admin.info("clients")["connected_clients"])
    admin.config_set("maxclients", str(n))
    try:
        c = raw()
        assert c.expect_closed() == b"-ERR max number of clients reached\r\n"
    finally:
        admin.config_set("maxclients", "10000")
    assert raw().call("PING") == b"+PONG\r\n"


def test_idle_timeout(new_client, raw):
    admin = new_client()
    admin.config_set("timeout", "1")
    try:
        c = raw(timeout=5)
        assert c.call("PING") == b"+PONG\r\n"
        t = time.monotonic()
        assert c.expect_closed(timeout=5) == b""
        assert time.monotonic() - t >= 0.9
    finally:
        admin.config_set("timeout", "0")


def test_quit_closes_after_reply(raw):
    c = raw()
    c.send(b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n")
    assert c.expect_closed() == b"+OK\r\n"


DEBUG_PROTOCOL_RESP2 = {
    "string": b"$11\r\nHello World\r\n",
    "integer": b":12345\r\n",
    "double": b"$5\r\n3.141\r\n",
    "bignum": b"$37\r\n1234567999999999999999999999999999999\r\n",
    "null": b"$-1\r\n",
    "array": b"*3\r\n:0\r\n:1\r\n:2\r\n",
    "set": b"*3\r\n:0\r\n:1\r\n:2\r\n",
    "map": b"*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n",
    "attrib": b"$39\r\nSome real reply following the attribute\r\n",
    "true": b":1\r\n",
    "false": b":0\r\n",
    "verbatim": b"$25\r\nThis is a verbatim\nstring\r\n",
}

DEBUG_PROTOCOL_RESP3 = {
    "string": b"$11\r\nHello World\r\n",
    "integer": b":12345\r\n",
    "double": b",3.141\r\n",
    "bignum": b"(1234567999999999999999999999999999999\r\n",
    "null": b"_\r\n",
    "array": b"*3\r\n:0\r\n:1\r\n:2\r\n",
    "set": b"~3\r\n:0\r\n:1\r\n:2\r\n",
    "map": b"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n",
    "attrib": b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n"
    b"$39\r\nSome real reply following the attribute\r\n",
    "true": b"#t\r\n",
    "false": b"#f\r\n",
    "verbatim": b"=29\r\ntxt:This is a verbatim\nstring\r\n",
}


def test_debug_protocol_resp2_and_resp3(raw):
    c = raw()
    for kind, want in DEBUG_PROTOCOL_RESP2.items():
        assert c.call("DEBUG", "PROTOCOL", kind) == want, kind
    assert c.call("DEBUG", "PROTOCOL", "push") == b"-ERR RESP2 is not supported by this command\r\n"
    assert c.call("DEBUG", "PROTOCOL", "nope") == (
        b"-ERR Wrong protocol type name. Please use one of the following: "
        b"string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false\r\n"
    )
    c.call("HELLO", "3")
    for kind, want in DEBUG_PROTOCOL_RESP3.items():
        assert c.call("DEBUG", "PROTOCOL", kind) == want, kind
    # A push frame, then the real reply.
    c.cmd("DEBUG", "PROTOCOL", "push")
    assert c.read_reply() == b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"
    assert c.read_reply() == b"$40\r\nSome real reply following the push reply\r\n"
