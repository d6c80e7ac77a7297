"""DUMP and RESTORE: round trips inside densekv, exact errors, and payloads that move
between densekv and a real Redis (Debian's redis-server, which the test command
installs) in both directions, for every type and the encodings Redis picks."""

from __future__ import annotations

import os

import pytest

import redis


def content(c: redis.Redis, k):
    t = c.type(k)
    if t == b"string":
        return t, c.get(k)
    if t == b"list":
        return t, c.lrange(k, 0, -1)
    if t == b"set":
        return t, sorted(c.smembers(k))
    if t == b"zset":
        return t, c.zrange(k, 0, -1, withscores=True)
    if t == b"hash":
        return t, sorted(c.hgetall(k).items())
    return t, None


def fill(c: redis.Redis) -> list[str]:
    """One key per type and encoding Redis would pick."""
    c.set("str", "hello")
    c.set("int", 12345)
    c.set("neg", -7)
    c.set("i64", 1234567890123)
    c.set("long", "a" * 100)  # LZF-compressed when Redis dumps it
    c.set("bin", bytes(range(256)))
    c.rpush("list", "a", "b", 1, 1000, -70000)
    c.rpush("biglist", *[f"e{i}" for i in range(3000)], "x" * 10000)
    c.sadd("intset", 1, 2, 300, -5)
    c.sadd("smallset", "x", "y", "z")
    c.sadd("bigset", *[f"m{i}" for i in range(1000)])
    c.zadd("zsmall", {"a": 1.5, "b": 2, "c": float("inf"), "d": float("-inf")})
    c.zadd("zbig", {f"m{i}": i / 3 for i in range(500)})
    c.hset("hsmall", mapping={"f1": "v1", "f2": 2, "f3": "x" * 10})
    c.hset("hbig", mapping={f"f{i}": i for i in range(1000)})
    return ["str", "int", "neg", "i64", "long", "bin", "list", "biglist", "intset", "smallset",
            "bigset", "zsmall", "zbig", "hsmall", "hbig"]


def test_round_trip_every_type(r):
    for k in fill(r):
        before = content(r, k)
        enc = r.object("encoding", k)
        payload = r.dump(k)
        assert r.restore(k + "_copy", 0, payload) == b"OK"
        assert content(r, k + "_copy") == before, k
        assert r.object("encoding", k + "_copy") == enc, k
        assert r.ttl(k + "_copy") == -1


def test_redis_payloads_restore_here(r, real_redis):
    real_redis.flushall()
    for k in fill(real_redis):
        assert r.restore(k, 0, real_redis.dump(k)) == b"OK"
        assert content(r, k) == content(real_redis, k), k


def test_our_payloads_restore_in_redis(r, real_redis):
    real_redis.flushall()
    for k in fill(r):
        assert real_redis.restore(k, 0, r.dump(k)) == b"OK"
        assert content(real_redis, k) == content(r, k), k


def test_hash_field_ttls_survive(r):
    r.hset("h", mapping={"a": 1, "b": 2, "c": 3})
    r.execute_command("HPEXPIREAT", "h", 4102444800000, "FIELDS", 1, "a")
    r.execute_command("HPEXPIREAT", "h", 4102444800123, "FIELDS", 1, "b")
    payload = r.dump("h")
    assert r.restore("h2", 0, payload) == b"OK"
    assert r.execute_command("HPEXPIRETIME", "h2", "FIELDS", 3, "a", "b", "c") == [4102444800000, 4102444800123, -1]
    assert r.object("encoding", "h2") == b"listpackex"
    assert sorted(r.hgetall("h2").items()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]


def test_missing_key_dumps_nil(r):
    assert r.dump("nokey") is None


def test_restore_ttl_and_options(r):
    r.set("k", "v")
    p = r.dump("k")
    assert r.restore("t", 5000, p) == b"OK"
    assert 4000 < r.pttl("t") <= 5000
    now_ms = int(r.time()[0]) * 1000
    assert r.restore("abs", now_ms + 100_000, p, absttl=True) == b"OK"
    assert 90_000 < r.pttl("abs") <= 100_000
    # An absolute time in the past creates nothing, and still replies OK.
    assert r.restore("gone", 1, p, absttl=True) == b"OK"
    assert r.exists("gone") == 0
    # ...and with REPLACE it deletes the old key.
    r.set("old", "x")
    assert r.restore("old", 1, p, absttl=True, replace=True) == b"OK"
    assert r.exists("old") == 0
    assert r.restore("idle", 0, p, idletime=1000) == b"OK"
    assert 1000 <= r.object("idletime", "idle") <= 1002
    assert r.restore("fq", 0, p, frequency=10) == b"OK"
    assert r.get("fq") == b"v"


def test_restore_errors(r):
    r.set("k", "v")
    p = r.dump("k")
    with pytest.raises(redis.ResponseError, match="^BUSYKEY Target key name already exists.$"):
        r.restore("k", 0, p)
    assert r.restore("k", 0, p, replace=True) == b"OK"
    with pytest.raises(redis.ResponseError, match="^Invalid TTL value, must be >= 0$"):
        r.restore("n", -1, p)
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.restore("n", "x", p)
    with pytest.raises(redis.ResponseError, match="^DUMP payload version or checksum are wrong$"):
        r.restore("n", 0, p[:-1] + bytes([p[-1] ^ 1]))
    with pytest.raises(redis.ResponseError, match="^DUMP payload version or checksum are wrong$"):
        r.restore("n", 0, b"short")
    newer = p[:-10] + bytes([13, 0]) + p[-8:]
    with pytest.raises(redis.ResponseError, match="^DUMP payload version or checksum are wrong$"):
        r.restore("n", 0, newer)
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("RESTORE", "n", 0, p, "BOGUS")
    with pytest.raises(redis.ResponseError, match="^Invalid IDLETIME value, must be >= 0$"):
        r.execute_command("RESTORE", "n", 0, p, "IDLETIME", -1)
    with pytest.raises(redis.ResponseError, match="^Invalid FREQ value, must be >= 0 and <= 255$"):
        r.execute_command("RESTORE", "n", 0, p, "FREQ", 256)
    with pytest.raises(redis.ResponseError, match="^syntax error$"):  # IDLETIME and FREQ exclude each other
        r.execute_command("RESTORE", "n", 0, p, "IDLETIME", 1, "FREQ", 1)
    with pytest.raises(redis.ResponseError, match="^wrong number of arguments for 'restore' command$"):
        r.execute_command("RESTORE", "n", 0)
    assert r.exists("n") == 0


def _with_crc(body: bytes) -> bytes:
    """A payload around `body` with a correct CRC, using DUMP's own CRC as an oracle-free
    check: the table-driven CRC-64/Jones (reflected 0x95ac9329ac4bc9b5)."""
    crc = 0
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x95AC9329AC4BC9B5 if c & 1 else c >> 1
        table.append(c)
    data = body + bytes([9, 0])
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return data + crc.to_bytes(8, "little")


def test_crc_matches_dump(r):
    r.set("k", "some value")
    p = r.dump("k")
    assert _with_crc(p[:-10]) == p


def test_corrupt_bodies_are_bad_data_format(r):
    for body in [
        bytes([2, 0x81]) + b"\xff" * 8,   # a set claiming 2^64-1 members
        bytes([2, 3, 1, 97, 1, 98]),       # three members declared, two present
        bytes([2, 2, 1, 97, 1, 97]),       # duplicate member
        bytes([0, 1, 97, 0xFF]),           # trailing byte
        bytes([0xFE]),                     # unknown type
        bytes([16, 3, 1, 2, 3]),           # listpack too short
    ]:
        with pytest.raises(redis.ResponseError, match="^Bad data format$"):
            r.restore("bad", 0, _with_crc(body))
    assert r.exists("bad") == 0
    assert r.ping()


def test_migrate_moves_keys_to_redis(r, real_redis):
    real_redis.flushall()
    r.set("a", "1")
    r.set("b", "2", px=100_000)
    r.hset("h", mapping={"f": "v"})
    port = real_redis.connection_pool.connection_kwargs["port"]
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "a", 3, 5000) == b"OK"
    assert r.exists("a") == 0
    other = redis.Redis(host="127.0.0.1", port=port, db=3)
    assert other.get("a") == b"1"
    # KEYS form, COPY keeps the source, TTL carried over.
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "", 3, 5000, "COPY", "KEYS", "b", "h", "nokey") == b"OK"
    assert r.get("b") == b"2" and r.hget("h", "f") == b"v"
    assert 90_000 < other.pttl("b") <= 100_000
    assert other.hgetall("h") == {b"f": b"v"}
    # The target refuses an existing key without REPLACE; the source keeps it.
    with pytest.raises(redis.ResponseError, match="^Target instance replied with error: BUSYKEY Target key name already exists.$"):
        r.execute_command("MIGRATE", "127.0.0.1", port, "b", 3, 5000)
    assert r.get("b") == b"2"
    r.set("b", "new")
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "b", 3, 5000, "REPLACE") == b"OK"
    assert other.get("b") == b"new" and r.exists("b") == 0
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "nokey", 3, 5000) == b"NOKEY"


def test_migrate_keeps_its_connection(r, real_redis):
    # As Redis's migrate socket cache: one connection per target for many
    # MIGRATEs (a reshard sends thousands), SELECT sent when the database
    # changes, and a cached connection the target closed replaced at once.
    real_redis.flushall()
    port = real_redis.connection_pool.connection_kwargs["port"]
    # No connection of an earlier MIGRATE stays open on the target.
    real_redis.client_kill_filter(_type="normal", skipme=True)
    received = lambda: int(real_redis.info("stats")["total_connections_received"])
    before = received()
    for i in range(5):
        r.set(f"m{i}", i)
        assert r.execute_command("MIGRATE", "127.0.0.1", port, f"m{i}", 3 + i % 2, 5000) == b"OK"
    assert received() == before + 1
    assert int(r.info("stats")["migrate_cached_sockets"]) == 1
    db3, db4 = (redis.Redis(host="127.0.0.1", port=port, db=d) for d in (3, 4))
    assert [db3.get(f"m{i}") for i in (0, 2, 4)] == [b"0", b"2", b"4"]
    assert [db4.get(f"m{i}") for i in (1, 3)] == [b"1", b"3"]
    # The target drops every other client, ours included: the next MIGRATE
    # reconnects instead of failing.
    real_redis.client_kill_filter(_type="normal", skipme=True)
    r.set("after", "v")
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "after", 3, 5000) == b"OK"
    assert db3.get("after") == b"v" and r.exists("after") == 0
    assert int(r.info("stats")["migrate_cached_sockets"]) == 1


def test_migrate_propagates_as_del(start_server, real_redis):
    # The AOF (and replicas) get the keys that left as DEL, as Redis
    # translates MIGRATE: replayed, MIGRATE would send stale keys again.
    real_redis.flushall()
    port = real_redis.connection_pool.connection_kwargs["port"]
    s = start_server("--appendonly", "yes", "--appendfsync", "always")
    c = redis.Redis(host=s.host, port=s.port)
    c.set("gone", "1")
    c.set("kept", "2")
    assert c.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", "gone", "missing") == b"OK"
    assert c.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "COPY", "KEYS", "kept") == b"OK"
    incr = os.path.join(s.workdir, "appendonlydir", "appendonly.aof.1.incr.aof")
    aof = open(incr, "rb").read()
    assert b"MIGRATE" not in aof.upper()
    assert aof.endswith(b"*2\r\n$3\r\nDEL\r\n$4\r\ngone\r\n")
    assert real_redis.get("gone") == b"1" and real_redis.get("kept") == b"2"
    assert c.get("kept") == b"2" and c.exists("gone") == 0


def test_migrate_auth_on_a_kept_connection(r, start_server):
    # AUTH goes with every MIGRATE that names it, on the kept connection too;
    # a wrong password on a new connection fails the MIGRATE and keeps the key.
    t = start_server("--requirepass", "pw")
    tc = redis.Redis(host=t.host, port=t.port, password="pw")
    r.set("b", "1")
    with pytest.raises(redis.ResponseError, match="^Target instance replied with error: WRONGPASS"):
        r.execute_command("MIGRATE", t.host, t.port, "", 0, 5000, "AUTH", "nope", "KEYS", "b")
    assert r.get("b") == b"1" and tc.exists("b") == 0
    assert r.execute_command("MIGRATE", t.host, t.port, "", 0, 5000, "AUTH2", "default", "pw", "KEYS", "b") == b"OK"
    assert tc.get("b") == b"1" and r.exists("b") == 0
    for i in range(3):
        r.set(f"a{i}", i)
        assert r.execute_command("MIGRATE", t.host, t.port, "", 0, 5000, "AUTH", "pw", "KEYS", f"a{i}") == b"OK"
        assert tc.get(f"a{i}") == str(i).encode()


def test_migrate_errors(r, server, raw):
    r.set("k", "v")
    with pytest.raises(redis.ResponseError, match="^When using MIGRATE KEYS option, the key argument must be set to the empty string$"):
        r.execute_command("MIGRATE", "127.0.0.1", 1, "k", 0, 100, "KEYS", "k")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("MIGRATE", "127.0.0.1", 1, "k", 0, 100, "BOGUS")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("MIGRATE", "127.0.0.1", 1, "k", "x", 100)
    # Nothing listens on a port we just freed: connecting fails.
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    with pytest.raises(redis.ResponseError, match="^IOERR error or timeout connecting to the client$"):
        r.execute_command("MIGRATE", "127.0.0.1", dead, "k", 0, 500)
    assert r.get("k") == b"v"
    # Migrating to ourselves waits on our own (busy) executor until the timeout,
    # as in Redis; the key stays.
    with pytest.raises(redis.ResponseError, match="^IOERR error or timeout reading to target instance$"):
        r.execute_command("MIGRATE", "127.0.0.1", server.port, "k", 0, 300)
    assert r.get("k") == b"v"
    conn = raw()
    assert conn.call("COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "b") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert conn.call("COMMAND", "GETKEYS", "MIGRATE", "h", "1", "k", "0", "5") == b"*1\r\n$1\r\nk\r\n"
    assert b"+movablekeys\r\n" in conn.call("COMMAND", "INFO", "migrate")


def pairs(flat) -> dict:
    """A reply map, whether redis-py already paired it or left it flat."""
    return dict(flat) if isinstance(flat, dict) else dict(zip(flat[::2], flat[1::2]))


def xinfo_full(c: redis.Redis, k) -> dict:
    """XINFO STREAM FULL as nested dicts, without what Redis 7.0 does not
    report (consumers' active-time, 8.6's idempotency fields) or counts its
    radix tree differently."""
    d = pairs(c.execute_command("XINFO", "STREAM", k, "FULL"))
    d.pop(b"radix-tree-nodes")
    for f in (b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked", b"iids-added", b"iids-duplicates"):
        d.pop(f, None)
    groups = []
    for g in d[b"groups"]:
        g = pairs(g)
        consumers = []
        for cons in g[b"consumers"]:
            cons = pairs(cons)
            cons.pop(b"active-time", None)
            consumers.append(cons)
        g[b"consumers"] = consumers
        groups.append(g)
    d[b"groups"] = groups
    return d


def stream_content(c: redis.Redis, k):
    return c.xrange(k), xinfo_full(c, k)


def busy_stream(c: redis.Redis, k="s"):
    """Entries with and without the first entry's fields, a deletion, two
    groups, pending entries for two consumers and an acknowledgement."""
    c.xadd(k, {"f": "v"}, id="1-1")
    c.xadd(k, {"f": 12}, id="1-2")
    c.xadd(k, {"a": "b", "c": "d"}, id="2-0")
    c.xadd(k, {"f": 300}, id="3-5")
    c.xadd(k, {"f": "x" * 300}, id="4-0")
    c.xdel(k, "1-2")
    c.xgroup_create(k, "g1", id="0")
    c.xgroup_create(k, "g2", id="$")
    c.xreadgroup("g1", "alice", {k: ">"}, count=2)
    c.xreadgroup("g1", "bob", {k: ">"}, count=2)
    c.xack(k, "g1", "3-5")


def test_stream_payloads_from_redis_restore_here(r, real_redis):
    real_redis.flushall()
    busy_stream(real_redis)
    real_redis.xgroup_createconsumer("s", "g2", "carol")
    assert r.restore("s", 0, real_redis.dump("s")) == b"OK"
    assert stream_content(r, "s") == stream_content(real_redis, "s")
    # 7.0 keeps no active time: loading takes the seen time for it.
    (consumer,) = r.xinfo_consumers("s", "g2")
    assert consumer["inactive"] == consumer["idle"]
    # And back again, as type 19 (Redis 7.0's layout).
    payload = r.dump("s")
    assert payload[0] == 19
    assert real_redis.restore("s2", 0, payload) == b"OK"
    assert stream_content(real_redis, "s2") == stream_content(real_redis, "s")


def test_our_stream_payloads_restore_in_redis(r, real_redis):
    real_redis.flushall()
    busy_stream(r)
    payload = r.dump("s")
    assert payload[0] == 19 and payload[-10:-8] == b"\x0a\x00"
    assert real_redis.restore("s", 0, payload) == b"OK"
    assert stream_content(real_redis, "s") == stream_content(r, "s")
    real_redis.xadd("s", {"f": "new"})
    assert real_redis.xlen("s") == r.xlen("s") + 1


def test_stream_round_trip_keeps_active_times(r):
    busy_stream(r)
    r.xgroup_createconsumer("s", "g2", "idle")  # never active: type 21
    r.xadd("e", {"a": 1}, id="7-7")
    r.xdel("e", "7-7")
    for k in ["s", "e"]:
        payload = r.dump(k)
        assert r.restore(k + "_copy", 0, payload) == b"OK"
        full = r.execute_command("XINFO", "STREAM", k, "FULL")
        assert r.execute_command("XINFO", "STREAM", k + "_copy", "FULL") == full
        assert r.xrange(k + "_copy") == r.xrange(k)
    assert r.dump("s")[0] == 21 and r.dump("s")[-10:-8] == b"\x0b\x00"
    assert r.dump("e")[0] == 19


def test_corrupt_stream_payloads_are_refused(r):
    busy_stream(r)
    good = r.dump("s")
    body = good[:-10]
    for cut in range(1, len(body)):
        with pytest.raises(redis.ResponseError, match="Bad data format"):
            r.restore("t", 0, _with_crc(body[:cut]))
    assert r.exists("t") == 0
    assert r.ping()


def test_skip_checksum_validation(r):
    """DEBUG SET-SKIP-CHECKSUM-VALIDATION 1 lets a payload with a wrong CRC through (Redis's
    corrupt-dump tests use it); 0 checks again."""
    r.set("k", "v")
    p = r.dump("k")
    wrong = p[:-8] + bytes(8)
    with pytest.raises(redis.ResponseError, match="checksum are wrong"):
        r.restore("k2", 0, wrong)
    assert r.execute_command("DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1") == b"OK"
    try:
        assert r.restore("k2", 0, wrong) == b"OK"
        assert r.get("k2") == b"v"
        # A bad body is still refused: only the checksum is skipped.
        with pytest.raises(redis.ResponseError, match="^Bad data format$"):
            r.restore("k3", 0, bytes([2, 2, 1, 97, 1, 97]) + b"\x0a\x00" + bytes(8))
    finally:
        r.execute_command("DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0")
    with pytest.raises(redis.ResponseError, match="checksum are wrong"):
        r.restore("k4", 0, wrong)


# A hash ziplist whose second entry's prevlen (0x04) is not the first entry's length (3): the
# payload of Redis's "valid zipped hash header, invalid entry len" family, built here.
def _ziplist(entries: list[bytes], tail_fix: int = 0) -> bytes:
    body = b"".join(entries)
    tail = 10 + len(body) - len(entries[-1]) + tail_fix
    return (10 + len(body) + 1).to_bytes(4, "little") + tail.to_bytes(4, "little") + \
        len(entries).to_bytes(2, "little") + body + b"\xff"


def test_ziplist_and_zipmap_checks(r):
    good = _ziplist([b"\x00\x01a", b"\x03\x01b"])
    blob = lambda b: bytes([len(b)]) + b  # noqa: E731  (an RDB string under 64 bytes)
    assert r.restore("h", 0, _with_crc(bytes([13]) + blob(good))) == b"OK"
    assert r.hgetall("h") == {b"a": b"b"}
    for bad in [
        _ziplist([b"\x00\x01a", b"\x04\x01b"]),      # prevlen says 4, the entry before is 3
        _ziplist([b"\x01\x01a", b"\x03\x01b"]),      # the first entry's prevlen is not 0
        _ziplist([b"\x00\x01a", b"\x03\x01b"], 1),   # tail offset past the last entry
    ]:
        with pytest.raises(redis.ResponseError, match="^Bad data format$"):
            r.restore("bad", 0, _with_crc(bytes([13]) + blob(bad)), replace=True)
    # A zipmap (hashes of Redis 2.4): count, then <len>field<len><free>value..., 0xff.
    zipmap = b"\x02\x01a\x01\x00x\x02bb\x02\x01yz\x00\xff"
    assert r.restore("zm", 0, _with_crc(bytes([9]) + blob(zipmap))) == b"OK"
    assert r.hgetall("zm") == {b"a": b"x", b"bb": b"yz"}
    for bad in [b"\x03" + zipmap[1:], zipmap[:-1], b"\x02\x01a\x01\x00x\x01a\x01\x00y\xff"]:
        with pytest.raises(redis.ResponseError, match="^Bad data format$"):
            r.restore("bad", 0, _with_crc(bytes([9]) + blob(bad)), replace=True)
    assert r.exists("bad") == 0
