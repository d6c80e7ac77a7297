"""Smoke tests: the server starts, speaks RESP2/RESP3, pipelines, and redis-cli reaches it."""


def test_ping(r):
    assert r.ping() is True


def test_ping_raw(raw):
    c = raw()
    assert c.call("PING") == b"+PONG\r\n"
    assert c.call("PING", "hello") == b"$5\r\nhello\r\n"
    c.send(b"PING\r\n")  # inline command
    assert c.read_reply() == b"+PONG\r\n"


def test_echo(r):
    assert r.echo(b"hello world") == b"hello world"
    assert r.echo(b"") == b""
    assert r.echo(b"\x00\xff\r\n") == b"\x00\xff\r\n"


def test_set_get(r):
    assert r.get(b"k") is None
    assert r.set(b"k", b"v") is True
    assert r.get(b"k") == b"v"
    assert r.set(b"k", b"v2") is True
    assert r.get(b"k") == b"v2"


def test_set_get_resp3(r3):
    assert r3.set(b"k", b"v") is True
    assert r3.get(b"k") == b"v"
    assert r3.get(b"missing") is None


def test_pipeline_10000(r):
    n = 10_000
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.set(b"key:%d" % i, b"value:%d" % i)
    assert pipe.execute() == [True] * n
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.get(b"key:%d" % i)
    assert pipe.execute() == [b"value:%d" % i for i in range(n)]
    assert r.dbsize() == n


def test_redis_cli_ping(cli):
    assert cli("PING").strip() == "PONG"


def test_pipelined_batches_one_connection(raw):
    # Several large batches on one socket: each one is more than the server reads
    # in one go, so it must come back for the rest without a new readiness event.
    c = raw(timeout=10)
    n = 10_000
    for batch in range(5):
        c.send(b"".join(c.encode("SET", f"key:{i}", i) for i in range(batch * n, (batch + 1) * n)))
        for _ in range(n):
            assert c.read_reply() == b"+OK\r\n"
    assert c.call("DBSIZE") == b":%d\r\n" % (5 * n)
