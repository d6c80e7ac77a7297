"""HyperLogLog: PFADD/PFCOUNT/PFMERGE over Redis's own string layout. The
bytes GET returns are compared with those of a real redis-server when one
is installed, and with layouts derived from the format otherwise."""

import time

import pytest

EMPTY = b"HYLL\x01" + b"\0" * 11 + b"\x7f\xff"
# As PFADD leaves a new key: cached cardinality marked stale.
STALE_EMPTY = EMPTY[:15] + b"\x80" + EMPTY[16:]
WRONG_HLL = "WRONGTYPE Key is not a valid HyperLogLog string value."


def test_empty_and_small_exact(r):
    assert r.pfadd("h") == 1
    assert r.get("h") == STALE_EMPTY
    assert r.pfadd("h") == 0
    assert r.pfcount("h") == 0
    assert r.get("h") == EMPTY
    assert r.type("h") == b"string"
    assert r.pfadd("h", "a", "b", "c") == 1
    assert r.pfadd("h", "a") == 0
    for n in (3, 10, 100):
        r.delete("s")
        r.pfadd("s", *[f"el{i}" for i in range(n)])
        assert r.pfcount("s") == n
    assert r.pfcount("nokey") == 0


def test_cardinality_cache_in_header(r):
    r.pfadd("h", "a", "b", "c")
    raw = r.get("h")
    assert raw[15] & 0x80  # stale after PFADD
    assert r.pfcount("h") == 3
    raw = r.get("h")
    assert raw[8:16] == (3).to_bytes(8, "little")
    # A write that changes nothing keeps the cache.
    assert r.pfadd("h", "a") == 0
    assert r.get("h")[8:16] == (3).to_bytes(8, "little")


def test_large_error_within_two_percent(r):
    n = 100_000
    pipe = r.pipeline(transaction=False)
    for i in range(0, n, 1000):
        pipe.pfadd("big", *[f"k{j}" for j in range(i, i + 1000)])
    pipe.execute()
    c = r.pfcount("big")
    assert abs(c - n) / n < 0.02, c
    assert len(r.get("big")) == 16 + 12288  # dense


def test_sparse_to_dense_promotion(r):
    r.config_set("hll-sparse-max-bytes", 3000)
    r.pfadd("p", *[f"x{i}" for i in range(100)])
    assert r.get("p")[4] == 1
    r.pfadd("p", *[f"x{i}" for i in range(100, 3000)])
    assert r.get("p")[4] == 0 and len(r.get("p")) == 12304
    r.config_set("hll-sparse-max-bytes", 30)
    r.pfadd("q", *[f"y{i}" for i in range(20)])
    assert r.get("q")[4] == 0
    r.config_set("hll-sparse-max-bytes", 3000)


def test_pfmerge(r):
    r.pfadd("a", *[f"a{i}" for i in range(100)], "common")
    r.pfadd("b", *[f"b{i}" for i in range(50)], "common")
    assert r.pfmerge("m", "a", "b") is True
    assert r.pfcount("m") == r.pfcount("a", "b")
    assert abs(r.pfcount("m") - 151) <= 3
    assert r.pfmerge("empty") is True
    assert r.get("empty") == STALE_EMPTY
    # The destination counts as a source.
    assert r.pfmerge("a", "b") is True
    assert r.pfcount("a") == r.pfcount("m")


def test_errors(r, raw):
    r.set("str", "hello world, not an hll")
    r.lpush("list", "x")
    c = raw()
    assert c.call("PFADD", "str", "x") == b"-" + WRONG_HLL.encode() + b"\r\n"
    assert c.call("PFCOUNT", "str") == b"-" + WRONG_HLL.encode() + b"\r\n"
    assert c.call("PFMERGE", "d", "str") == b"-" + WRONG_HLL.encode() + b"\r\n"
    assert c.call("PFADD", "list", "x").startswith(b"-WRONGTYPE Operation against a key holding")
    assert c.call("PFADD") == b"-ERR wrong number of arguments for 'pfadd' command\r\n"
    # A dense header of the wrong size is not an HLL.
    r.set("bad", b"HYLL\x00" + b"\0" * 20)
    assert c.call("PFCOUNT", "bad") == b"-" + WRONG_HLL.encode() + b"\r\n"
    # A sparse body covering too many registers is corrupt.
    r.set("corrupt", STALE_EMPTY + b"\x00")
    assert c.call("PFCOUNT", "corrupt") == b"-INVALIDOBJ Corrupted HLL object detected\r\n"
    assert c.call("PFMERGE", "d", "corrupt") == b"-INVALIDOBJ Corrupted HLL object detected\r\n"


def test_pfcount_is_paused_by_client_pause_write(r, new_client):
    r.pfadd("ph", "x")
    r.execute_command("CLIENT", "PAUSE", "100000", "WRITE")
    try:
        c = new_client()
        c.connection.send_command("PFCOUNT", "ph")
        deadline = time.monotonic() + 5
        while r.info("clients")["blocked_clients"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
    assert c.connection.read_response() == 1


@pytest.mark.parametrize("n", [1, 7, 250, 1200, 5000, 40000])
def test_bytes_match_redis(r, real_redis, n):
    real_redis.flushall()
    for c in (r, real_redis):
        for i in range(0, n, 100):
            c.pfadd("h", *[f"m{j}" for j in range(i, min(n, i + 100))])
    assert r.get("h") == real_redis.get("h")
    assert r.pfcount("h") == real_redis.pfcount("h")
    assert r.get("h") == real_redis.get("h")
    for c in (r, real_redis):
        c.pfadd("o", *[f"o{j}" for j in range(300)])
        c.pfmerge("m", "o", "h")
    assert r.get("m") == real_redis.get("m")
    assert r.pfcount("h", "o") == real_redis.pfcount("h", "o")


def test_redis_written_hll_is_readable(r, real_redis):
    real_redis.flushall()
    real_redis.pfadd("w", *[f"w{i}" for i in range(777)])
    r.set("w", real_redis.get("w"))
    assert r.pfcount("w") == real_redis.pfcount("w")
    assert r.pfadd("w", "w1") == 0


def test_sparse_run_past_the_last_register(c):
    """Found by scripts/difftest.py: Redis's merge (PFMERGE, PFCOUNT of several keys) and
    its dense conversion stop walking a sparse HLL at a value run past the last register,
    so registers all covered before it make the HLL whole; its one-key PFCOUNT counts on
    and finds it corrupt."""
    header = b"HYLL\x01\x00\x00\x00" + b"\x00" * 7 + b"\x80"  # sparse, cached count stale
    hll = header + b"\x7f\xff" + b"\x80\x84"  # every register zero, then runs past the end
    assert c.call("SET", "h", hll) == b"+OK\r\n"
    assert c.call("PFCOUNT", "h") == b"-INVALIDOBJ Corrupted HLL object detected\r\n"
    assert c.call("PFMERGE", "d", "h") == b"+OK\r\n"
    assert c.call("PFCOUNT", "d") == b":0\r\n"
    assert c.call("PFCOUNT", "h", "d") == b":0\r\n"
    assert c.call("PFMERGE", "h") == b"+OK\r\n"
    # Stopped short of the last register, it is corrupt to every command.
    short = header + b"\x7f\xfd" + b"\x84\x87"  # 16382 zero, one 2, then four 2s
    assert c.call("SET", "s", short) == b"+OK\r\n"
    assert c.call("PFMERGE", "d", "s") == b"-INVALIDOBJ Corrupted HLL object detected\r\n"
    assert c.call("PFCOUNT", "s", "d") == b"-INVALIDOBJ Corrupted HLL object detected\r\n"
