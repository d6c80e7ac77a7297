"""HASH commands end to end: every command over both Redis encodings
(listpack / listpackex / hashtable as OBJECT ENCODING names them), RESP2 and
RESP3 reply shapes, Redis's exact error texts, and per-field expiry (lazy on
access, active without access, the key deleted with its last field)."""

import time

import pytest
import redis


@pytest.fixture
def c(raw):
    """A raw connection: exact reply bytes, errors included."""
    return raw()


@pytest.fixture
def thresholds(r):
    """Restores hash-max-listpack-* after a test that changes them."""
    saved = {k: r.config_get(k)[k] for k in ("hash-max-listpack-entries", "hash-max-listpack-value")}
    yield
    for k, v in saved.items():
        r.config_set(k, v)


def enc(r, key):
    return r.object("encoding", key)


def big(r, key, n=200):
    r.hset(key, mapping={f"f{i}": i for i in range(n)})


WRONGTYPE = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"


# ---------------------------------------------------------------- basics

@pytest.mark.parametrize("n,name", [(3, b"listpack"), (600, b"hashtable")])
def test_set_get_len_exists_strlen(r, n, name):
    assert r.hset("h", mapping={f"f{i}": f"v{i}" for i in range(n)}) == n
    assert enc(r, "h") == name
    assert r.hset("h", "f0", "new", mapping={"extra": "1"}) == 1
    assert r.hget("h", "f0") == b"new"
    assert r.hget("h", "nope") is None
    assert r.hget("missing", "f") is None
    assert r.hlen("h") == n + 1
    assert r.hlen("missing") == 0
    assert r.hexists("h", "f1") == 1 and r.hexists("h", "zz") == 0
    assert r.hstrlen("h", "f1") == 2 and r.hstrlen("h", "zz") == 0 and r.hstrlen("missing", "f") == 0
    assert r.hmget("h", "f1", "zz", "f2") == [b"v1", None, b"v2"]
    assert r.hmget("missing", "a", "b") == [None, None]
    assert r.type("h") == b"hash"


def test_hsetnx_hmset_hdel(r):
    assert r.hsetnx("h", "a", "1") == 1
    assert r.hsetnx("h", "a", "2") == 0
    assert r.hget("h", "a") == b"1"
    assert r.execute_command("HMSET", "h", "b", "2", "c", "3") is True
    assert r.hdel("h", "a", "zz", "b") == 2
    assert r.hdel("missing", "a") == 0
    assert r.hdel("h", "c") == 1
    assert r.exists("h") == 0, "the last HDEL deletes the key"


@pytest.mark.parametrize("n", [3, 300])
def test_getall_keys_vals(r, r3, n):
    data = {f"f{i}".encode(): str(i).encode() for i in range(n)}
    r.hset("h", mapping=data)
    assert r.hgetall("h") == data
    assert r3.hgetall("h") == data
    assert sorted(r.hkeys("h")) == sorted(data)
    assert sorted(r.hvals("h")) == sorted(data.values())
    assert r.hgetall("missing") == {} and r.hkeys("missing") == [] and r.hvals("missing") == []


def test_resp3_map_and_empty_shapes(c, r):
    r.hset("h", "a", "1")
    assert c.call("HELLO", "3").startswith(b"%")
    assert c.call("HGETALL", "h") == b"%1\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert c.call("HGETALL", "missing") == b"%0\r\n"
    assert c.call("HKEYS", "missing") == b"*0\r\n"
    assert c.call("HGET", "h", "x") == b"_\r\n"


def test_wrong_type_and_arity(r, c):
    r.set("s", "x")
    for cmd in (["HGET", "s", "f"], ["HSET", "s", "f", "v"], ["HLEN", "s"], ["HGETALL", "s"], ["HDEL", "s", "f"],
                ["HINCRBY", "s", "f", "1"], ["HRANDFIELD", "s"], ["HSCAN", "s", "0"], ["HMGET", "s", "f"],
                ["HTTL", "s", "FIELDS", "1", "f"], ["HEXPIRE", "s", "10", "FIELDS", "1", "f"],
                ["HGETDEL", "s", "FIELDS", "1", "f"], ["HSETEX", "s", "FIELDS", "1", "f", "v"]):
        assert c.call(*cmd) == WRONGTYPE, cmd
    r.hset("h", "f", "v")
    assert c.call("GET", "h") == WRONGTYPE
    assert c.call("APPEND", "h", "x") == WRONGTYPE
    assert c.call("HSET", "h", "f") == b"-ERR wrong number of arguments for 'hset' command\r\n"
    assert c.call("HSET", "h", "a", "1", "b") == b"-ERR wrong number of arguments for 'hset' command\r\n"
    assert c.call("HMSET", "h", "a", "1", "b") == b"-ERR wrong number of arguments for 'hmset' command\r\n"
    assert c.call("HGET", "h") == b"-ERR wrong number of arguments for 'hget' command\r\n"


def test_hincrby_and_float(r, c):
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrby("h", "n", -7) == -2
    r.hset("h", "s", "abc", mapping={"big": str(2**63 - 2)})
    assert c.call("HINCRBY", "h", "s", "1") == b"-ERR hash value is not an integer\r\n"
    assert c.call("HINCRBY", "h", "big", "2") == b"-ERR increment or decrement would overflow\r\n"
    assert c.call("HINCRBY", "h", "n", "x") == b"-ERR value is not an integer or out of range\r\n"
    assert r.hincrbyfloat("h", "f", 10.5) == 10.5
    assert c.call("HINCRBYFLOAT", "h", "f", "0.1") == b"$4\r\n10.6\r\n"
    # Extended precision, as Redis computes it (binary64 would say 5010.6).
    assert c.call("HINCRBYFLOAT", "h", "f", "5.0e3") == b"$22\r\n5010.60000000000000009\r\n"
    assert c.call("HINCRBYFLOAT", "h", "s", "1") == b"-ERR hash value is not a float\r\n"
    assert c.call("HINCRBYFLOAT", "h", "f", "x") == b"-ERR value is not a valid float\r\n"
    assert c.call("HINCRBYFLOAT", "h", "f", "inf") == b"-ERR value is NaN or Infinity\r\n"
    # Past binary64's range is still finite in extended precision (Redis).
    r.hset("h", "m", "1.7e308")
    assert c.call("HINCRBYFLOAT", "h", "m", "1.7e308").startswith(b"$309\r\n34000000000000000")
    r.hset("h", "m", "1e4932")
    assert c.call("HINCRBYFLOAT", "h", "m", "1e4932") == b"-ERR increment would produce NaN or Infinity\r\n"
    assert r.exists("new") == 0
    assert c.call("HINCRBY", "new", "f", "x").startswith(b"-ERR")
    assert r.exists("new") == 0, "a failed command creates no key"


# ---------------------------------------------------------------- encodings

def test_encodings_follow_thresholds(r, thresholds):
    r.hset("small", mapping={"a": "1"})
    assert enc(r, "small") == b"listpack"
    big(r, "mid", 512)
    assert enc(r, "mid") == b"listpack", "Redis's default hash-max-listpack-entries is 512"
    big(r, "large", 513)
    assert enc(r, "large") == b"hashtable"
    r.hset("longval", "a", "x" * 65)
    assert enc(r, "longval") == b"hashtable"
    r.config_set("hash-max-listpack-entries", 4)
    r.hset("four", mapping={f"f{i}": i for i in range(5)})
    assert enc(r, "four") == b"hashtable"
    r.config_set("hash-max-ziplist-value", 100)
    assert r.config_get("hash-max-listpack-value") == {"hash-max-listpack-value": "100"}
    r.hset("longval2", "a", "x" * 90)
    assert enc(r, "longval2") == b"listpack"
    r.hpexpire("small", 100000, "a")
    assert enc(r, "small") == b"listpackex"
    r.hpersist("small", "a")
    assert enc(r, "small") == b"listpackex", "sticky, as in Redis"
    # Deleting fields never converts back.
    r.hdel("large", *[f"f{i}" for i in range(500)])
    assert enc(r, "large") == b"hashtable"
    assert r.memory_usage("large") > r.memory_usage("small") > 0


def test_copy_rename_move(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.hpexpire("h", 100000, "a")
    assert r.copy("h", "h2") is True
    r.hset("h", "a", "changed")
    assert r.hgetall("h2") == {b"a": b"1", b"b": b"2"}
    assert r.hpttl("h2", "a")[0] > 90000
    r.rename("h2", "h3")
    assert r.hpttl("h3", "a")[0] > 90000
    assert r.move("h3", 1) is True
    r1 = redis.Redis(host=r.connection_pool.connection_kwargs["host"], port=r.connection_pool.connection_kwargs["port"], db=1)
    assert r1.hgetall("h3") == {b"a": b"1", b"b": b"2"}
    assert r1.type("h3") == b"hash"
    r1.flushdb()
    assert [k for k in r.scan_iter(_type="hash")] == [b"h"]
    r.set("s", "1")
    assert [k for k in r.scan_iter(_type="string")] == [b"s"]


# ---------------------------------------------------------------- HRANDFIELD

@pytest.mark.parametrize("n", [5, 300])
def test_hrandfield(r, r3, c, n):
    data = {f"f{i}".encode(): str(i).encode() for i in range(n)}
    r.hset("h", mapping=data)
    assert r.hrandfield("h") in data
    assert r.hrandfield("missing") is None
    assert r.hrandfield("missing", 3) == []
    assert r.hrandfield("h", 0) == []
    got = r.hrandfield("h", 3)
    assert len(got) == 3 and len(set(got)) == 3 and set(got) <= set(data)
    assert sorted(r.hrandfield("h", n + 10)) == sorted(data)
    rep = r.hrandfield("h", -(n + 10))
    assert len(rep) == n + 10 and set(rep) <= set(data)
    flat = r.hrandfield("h", 2, withvalues=True)
    assert len(flat) == 4 and data[flat[0]] == flat[1]
    nested = r3.hrandfield("h", -4, withvalues=True)
    assert len(nested) == 4 and all(len(p) == 2 and data[p[0]] == p[1] for p in nested)
    assert c.call("HRANDFIELD", "h", "1", "x") == b"-ERR syntax error\r\n"
    # Redis parses the count in -LONG_MAX..LONG_MAX and names that range when it is out.
    assert c.call("HRANDFIELD", "h", "-9223372036854775808") == (
        b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n")
    assert c.call("HRANDFIELD", "h", "-9223372036854770000", "WITHVALUES") == b"-ERR value is out of range\r\n"
    assert c.call("HRANDFIELD", "h", "x") == b"-ERR value is not an integer or out of range\r\n"


# ---------------------------------------------------------------- HSCAN

@pytest.mark.parametrize("n", [5, 1000])
def test_hscan(r, c, n):
    data = {f"f{i}".encode(): str(i).encode() for i in range(n)}
    r.hset("h", mapping=data)
    seen = {}
    cursor = 0
    while True:
        cursor, part = r.hscan("h", cursor, count=50)
        seen.update(part)
        if cursor == 0:
            break
    assert seen == data
    keys = list(r.hscan_iter("h", match="f1*", no_values=True))
    assert sorted(keys) == sorted(k for k in data if k.startswith(b"f1"))
    assert r.hscan("missing", 0) == (0, {})
    assert c.call("HSCAN", "h", "0", "COUNT", "0") == b"-ERR syntax error\r\n"
    assert c.call("HSCAN", "h", "0", "BOGUS") == b"-ERR syntax error\r\n"
    assert c.call("HSCAN", "h", "x") == b"-ERR invalid cursor\r\n"
    assert c.call("HSCAN", "h", "0", "COUNT", "x") == b"-ERR value is not an integer or out of range\r\n"


# ---------------------------------------------------------------- field TTLs

def test_hexpire_replies_and_conditions(r, c):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.execute_command("HEXPIRE", "h", 100, "FIELDS", 2, "a", "zz") == [1, -2]
    assert r.execute_command("HEXPIRE", "h", 200, "NX", "FIELDS", 2, "a", "b") == [0, 1]
    assert r.execute_command("HEXPIRE", "h", 300, "XX", "FIELDS", 2, "a", "c") == [1, 0]
    assert r.execute_command("HEXPIRE", "h", 50, "GT", "FIELDS", 2, "a", "c") == [0, 0]
    assert r.execute_command("HEXPIRE", "h", 50, "LT", "FIELDS", 2, "a", "c") == [1, 1]
    assert r.execute_command("HTTL", "h", "FIELDS", 4, "a", "b", "c", "zz") == [50, 200, 50, -2]
    ms = r.execute_command("HPTTL", "h", "FIELDS", 1, "a")[0]
    assert 49000 < ms <= 50000
    now = int(time.time())
    at = r.execute_command("HEXPIRETIME", "h", "FIELDS", 1, "a")[0]
    assert now + 49 <= at <= now + 51
    assert r.execute_command("HPEXPIREAT", "h", (now + 1000) * 1000, "FIELDS", 1, "b") == [1]
    assert r.execute_command("HPEXPIRETIME", "h", "FIELDS", 1, "b") == [(now + 1000) * 1000]
    assert r.execute_command("HEXPIREAT", "h", now + 2000, "FIELDS", 1, "b") == [1]
    assert r.execute_command("HEXPIRETIME", "h", "FIELDS", 1, "b") == [now + 2000]
    assert r.execute_command("HPERSIST", "h", "FIELDS", 3, "a", "zz", "a") == [1, -2, -1]
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "a") == [-1]
    # A time in the past deletes the field (2), and the key with its last field.
    assert r.execute_command("HPEXPIREAT", "h", 1, "FIELDS", 1, "a") == [2]
    assert r.hlen("h") == 2
    assert r.execute_command("HEXPIREAT", "h", 1, "FIELDS", 2, "b", "c") == [2, 2]
    assert r.exists("h") == 0
    # Missing keys answer per field.
    assert r.execute_command("HEXPIRE", "missing", 10, "FIELDS", 2, "a", "b") == [-2, -2]
    assert r.execute_command("HTTL", "missing", "FIELDS", 1, "a") == [-2]
    assert r.execute_command("HPERSIST", "missing", "FIELDS", 1, "a") == [-2]


def test_field_ttl_errors(r, c):
    r.hset("h", "a", "1")
    e = lambda *a: c.call(*a)
    assert e("HEXPIRE", "h", "10", "FIELDS", "0", "a") == b"-ERR Parameter `numFields` should be greater than 0\r\n"
    assert e("HEXPIRE", "h", "10", "FIELDS", "x", "a") == b"-ERR Parameter `numFields` should be greater than 0\r\n"
    assert e("HEXPIRE", "h", "10", "FIELDS", "2", "a") == b"-ERR The `numfields` parameter must match the number of arguments\r\n"
    assert e("HEXPIRE", "h", "10", "NX", "FIELDS", "1", "a", "b") == b"-ERR The `numfields` parameter must match the number of arguments\r\n"
    assert e("HEXPIRE", "h", "10", "XYZ", "1", "a") == b"-ERR Mandatory argument FIELDS is missing or not at the right position\r\n"
    assert e("HEXPIRE", "h", "-1", "FIELDS", "1", "a") == b"-ERR invalid expire time, must be >= 0\r\n"
    assert e("HEXPIRE", "h", "x", "FIELDS", "1", "a") == b"-ERR value is not an integer or out of range\r\n"
    assert e("HPEXPIRE", "h", str(2**46), "FIELDS", "1", "a") == b"-ERR invalid expire time in 'hpexpire' command\r\n"
    assert e("HEXPIREAT", "h", str(2**46 // 1000 + 1), "FIELDS", "1", "a") == b"-ERR invalid expire time in 'hexpireat' command\r\n"
    assert e("HPEXPIREAT", "h", str(2**46 - 1), "FIELDS", "1", "a") == b"*1\r\n:1\r\n"
    assert e("HTTL", "h", "FIELDS", "0", "a") == b"-ERR Number of fields must be a positive integer\r\n"
    assert e("HTTL", "h", "FIELDS", "2", "a") == b"-ERR The `numfields` parameter must match the number of arguments\r\n"
    assert e("HPERSIST", "h", "XFIELDS", "1", "a") == b"-ERR Mandatory argument FIELDS is missing or not at the right position\r\n"
    assert e("HTTL", "h", "FIELDS", "1") == b"-ERR wrong number of arguments for 'httl' command\r\n"
    assert e("HEXPIRE", "h", "1", "FIELDS", "1") == b"-ERR wrong number of arguments for 'hexpire' command\r\n"


@pytest.mark.parametrize("n", [3, 200])
def test_lazy_field_expiry(r, n):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    try:
        big(r, "h", n)
        r.execute_command("HPEXPIRE", "h", 100, "FIELDS", 3, "f0", "f1", "f2")
        time.sleep(0.2)
        assert r.hlen("h") == n, "HLEN counts expired fields not yet reclaimed"
        assert r.hget("h", "f0") is None
        assert r.hlen("h") == n - 1, "naming an expired field deletes it"
        assert r.hexists("h", "f1") == 0 and r.hstrlen("h", "f2") == 0
        assert r.hlen("h") == n - 3
        assert int(r.info("stats")["expired_subkeys"]) >= 3
        if n == 3:
            assert r.exists("h") == 0, "the key goes with its last field"
        else:
            assert b"f0" not in r.hgetall("h") and len(r.hkeys("h")) == n - 3
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 1)


def test_expired_fields_hidden_from_reads(r):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    try:
        r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
        r.execute_command("HPEXPIRE", "h", 50, "FIELDS", 2, "a", "b")
        time.sleep(0.1)
        assert r.hgetall("h") == {b"c": b"3"}
        assert r.hkeys("h") == [b"c"] and r.hvals("h") == [b"3"]
        assert r.hscan("h", 0) == (0, {b"c": b"3"})
        assert r.hlen("h") == 3
        assert r.execute_command("HTTL", "h", "FIELDS", 2, "a", "c") == [-2, -1]
        # HINCRBY on an expired field starts from 0; HRANDFIELD reclaims all.
        r.hset("h", "n", "5")
        r.execute_command("HPEXPIRE", "h", 50, "FIELDS", 1, "n")
        time.sleep(0.1)
        assert r.hincrby("h", "n", 1) == 1
        assert r.hrandfield("h", 10) and r.hlen("h") == 2
        r.execute_command("HPEXPIRE", "h", 10, "FIELDS", 2, "c", "n")
        time.sleep(0.05)
        assert r.hrandfield("h") is None
        assert r.exists("h") == 0
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 1)


def test_overwrite_discards_ttl_and_hincrby_keeps_it(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.execute_command("HEXPIRE", "h", 100, "FIELDS", 2, "a", "b")
    r.hset("h", "a", "x")
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "a") == [-1]
    r.hincrby("h", "b", 3)
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "b") == [100]
    r.hincrbyfloat("h", "b", 0.5)
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "b") == [100]
    assert r.hget("h", "b") == b"5.5"


@pytest.mark.parametrize("n", [1, 17, 300])
def test_active_field_expiry_deletes_hash(r, n):
    big(r, "h", n)
    r.set("other", "1")
    before = r.dbsize()
    r.execute_command("HPEXPIRE", "h", 100, "FIELDS", n, *[f"f{i}" for i in range(n)])
    assert r.info("keyspace")["db0"]["subexpiry"] == 1
    deadline = time.time() + 3
    while r.exists("h") and time.time() < deadline:
        time.sleep(0.05)
    assert r.exists("h") == 0
    assert r.dbsize() == before - 1
    assert r.type("h") == b"none"
    assert [k for k in r.scan_iter()] == [b"other"]
    assert r.info("keyspace")["db0"].get("subexpiry", 0) == 0


def test_active_field_expiry_keeps_other_fields(r):
    big(r, "h", 300)
    r.execute_command("HPEXPIRE", "h", 100, "FIELDS", 2, "f1", "f2")
    deadline = time.time() + 3
    while r.hlen("h") > 298 and time.time() < deadline:
        time.sleep(0.05)
    assert r.hlen("h") == 298
    assert r.hget("h", "f3") == b"3"
    assert r.hexists("h", "f1") == 0


def test_active_expiry_cycle_time_is_reported(r):
    """Active expiry's time shows in INFO expire_cycle_cpu_milliseconds and,
    past the threshold, as LATENCY's expire-cycle event; CONFIG RESETSTAT
    clears both counters."""
    n = 200_000
    fields = [f"f{i}" for i in range(n)]
    for i in range(0, n, 20_000):
        r.hset("h", mapping={f: "v" for f in fields[i:i + 20_000]})
    r.config_set("latency-monitor-threshold", 1)
    r.config_resetstat()
    r.execute_command("LATENCY", "RESET")
    assert r.execute_command("HPEXPIRE", "h", 10, "FIELDS", n, *fields) == [1] * n
    deadline = time.time() + 5
    while r.exists("h") and time.time() < deadline:
        time.sleep(0.05)
    assert r.exists("h") == 0
    stats = r.info("stats")
    assert stats["expired_subkeys"] == n
    assert stats["expire_cycle_cpu_milliseconds"] >= 1
    events = [e[0] for e in r.execute_command("LATENCY", "LATEST")]
    r.config_set("latency-monitor-threshold", 0)
    r.execute_command("LATENCY", "RESET")  # the server is shared with later tests
    assert b"expire-cycle" in events
    r.config_resetstat()
    stats = r.info("stats")
    assert stats["expire_cycle_cpu_milliseconds"] == 0 and stats["expired_time_cap_reached_count"] == 0


def test_flushall_and_del_drop_pending_fields(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.execute_command("HPEXPIRE", "h", 100000, "FIELDS", 1, "a")
    r.delete("h")
    assert r.info("keyspace").get("db0", {}).get("subexpiry", 0) == 0
    r.hset("h", mapping={"a": "1"})
    r.execute_command("HPEXPIRE", "h", 100000, "FIELDS", 1, "a")
    r.flushall()
    assert r.info("keyspace") == {}


def test_key_ttl_and_field_ttl_together(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.execute_command("HPEXPIRE", "h", 100000, "FIELDS", 1, "a")
    r.pexpire("h", 100)
    time.sleep(0.2)
    assert r.exists("h") == 0
    assert r.info("keyspace").get("db0", {}).get("subexpiry", 0) == 0


# ---------------------------------------------------------------- Redis 8

def test_hgetdel(r, c):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.execute_command("HGETDEL", "h", "FIELDS", 3, "a", "zz", "a") == [b"1", None, None]
    assert r.hlen("h") == 2
    assert r.execute_command("HGETDEL", "h", "FIELDS", 2, "b", "c") == [b"2", b"3"]
    assert r.exists("h") == 0
    assert r.execute_command("HGETDEL", "missing", "FIELDS", 1, "a") == [None]
    assert c.call("HGETDEL", "h", "FIELDS", "0", "a") == b"-ERR Number of fields must be a positive integer\r\n"
    assert c.call("HGETDEL", "h", "FIELDS", "2", "a") == b"-ERR The `numfields` parameter must match the number of arguments\r\n"
    assert c.call("HGETDEL", "h", "FIELD", "1", "a") == b"-ERR Mandatory argument FIELDS is missing or not at the right position\r\n"


def test_hgetex(r, c):
    r.hset("h", mapping={"a": "1", "b": "2"})
    assert r.execute_command("HGETEX", "h", "FIELDS", 2, "a", "zz") == [b"1", None]
    assert r.execute_command("HGETEX", "h", "EX", 100, "FIELDS", 1, "a") == [b"1"]
    assert r.execute_command("HTTL", "h", "FIELDS", 2, "a", "b") == [100, -1]
    assert r.execute_command("HGETEX", "h", "PX", 50000, "FIELDS", 1, "b") == [b"2"]
    assert 49000 < r.execute_command("HPTTL", "h", "FIELDS", 1, "b")[0] <= 50000
    now = int(time.time())
    r.execute_command("HGETEX", "h", "EXAT", now + 500, "FIELDS", 1, "a")
    assert r.execute_command("HEXPIRETIME", "h", "FIELDS", 1, "a") == [now + 500]
    r.execute_command("HGETEX", "h", "PXAT", (now + 600) * 1000, "FIELDS", 1, "a")
    assert r.execute_command("HPEXPIRETIME", "h", "FIELDS", 1, "a") == [(now + 600) * 1000]
    assert r.execute_command("HGETEX", "h", "PERSIST", "FIELDS", 1, "a") == [b"1"]
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "a") == [-1]
    assert r.execute_command("HGETEX", "h", "PXAT", 1, "FIELDS", 2, "a", "b") == [b"1", b"2"]
    assert r.exists("h") == 0, "a deadline in the past deletes the fields, then the key"
    assert r.execute_command("HGETEX", "missing", "EX", 10, "FIELDS", 1, "a") == [None]
    r.hset("h", "a", "1")
    assert c.call("HGETEX", "h", "EX", "-1", "FIELDS", "1", "a") == b"-ERR invalid expire time, must be >= 0\r\n"
    assert c.call("HGETEX", "h", "BOGUS", "FIELDS", "1", "a") == b"-ERR Mandatory argument FIELDS is missing or not at the right position\r\n"
    assert c.call("HGETEX", "h", "EX", "10", "FIELDS", "2", "a") == b"-ERR The `numfields` parameter must match the number of arguments\r\n"


def test_hsetex(r, c):
    assert r.execute_command("HSETEX", "h", "FIELDS", 2, "a", "1", "b", "2") == 1
    assert r.execute_command("HSETEX", "h", "FNX", "EX", 100, "FIELDS", 1, "a", "x") == 0
    assert r.execute_command("HSETEX", "h", "FNX", "EX", 100, "FIELDS", 1, "c", "3") == 1
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "c") == [100]
    assert r.execute_command("HSETEX", "h", "FXX", "PX", 5000, "FIELDS", 2, "a", "y", "zz", "1") == 0
    assert r.execute_command("HSETEX", "h", "FXX", "PX", 50000, "FIELDS", 1, "a", "y") == 1
    assert r.hget("h", "a") == b"y"
    assert r.execute_command("HSETEX", "h", "KEEPTTL", "FIELDS", 1, "a", "z") == 1
    assert 49000 < r.execute_command("HPTTL", "h", "FIELDS", 1, "a")[0] <= 50000
    assert r.execute_command("HSETEX", "h", "FIELDS", 1, "a", "w") == 1
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "a") == [-1]
    assert r.execute_command("HSETEX", "missing", "FXX", "FIELDS", 1, "a", "1") == 0
    assert r.exists("missing") == 0
    assert r.execute_command("HSETEX", "h2", "PXAT", 1, "FIELDS", 1, "a", "1") == 1
    assert r.exists("h2") == 0
    errs = {
        ("HSETEX", "h", "EX", "10", "PX", "10", "FIELDS", "1", "a", "1"):
            b"-ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified\r\n",
        ("HSETEX", "h", "FNX", "FXX", "FIELDS", "1", "a", "1"): b"-ERR Only one of FXX or FNX arguments can be specified\r\n",
        ("HSETEX", "h", "BOGUS", "FIELDS", "1", "a", "1"): b"-ERR unknown argument: BOGUS\r\n",
        ("HSETEX", "h", "FIELDS", "0", "a", "1"): b"-ERR invalid number of fields\r\n",
        ("HSETEX", "h", "FIELDS", "2", "a", "1"): b"-ERR wrong number of arguments for 'hsetex' command\r\n",
        ("HSETEX", "h", "FIELDS", "1", "a", "1", "b"): b"-ERR wrong number of arguments for 'hsetex' command\r\n",
        ("HSETEX", "h", "EX", "-5", "FIELDS", "1", "a", "1"): b"-ERR invalid expire time, must be >= 0\r\n",
        ("HSETEX", "h", "EX", str(2**46), "FIELDS", "1", "a", "1"): b"-ERR invalid expire time in 'hsetex' command\r\n",
    }
    for cmd, want in errs.items():
        assert c.call(*cmd) == want, cmd


def test_watch_sees_field_writes(r, new_client):
    r.hset("h", "a", "1")
    p = r.pipeline()
    p.watch("h")
    new_client().execute_command("HPEXPIRE", "h", 100000, "FIELDS", 1, "a")
    p.multi()
    p.hget("h", "a")
    with pytest.raises(redis.WatchError):
        p.execute()


def test_commands_in_table(c):
    assert c.call("COMMAND", "INFO", "hsetex").startswith(b"*1\r\n*10\r\n$6\r\nhsetex\r\n:-6\r\n")
    assert c.call("COMMAND", "INFO", "hgetall").startswith(b"*1\r\n*10\r\n$7\r\nhgetall\r\n:2\r\n")


# ---------------------------------------------------------------- scenarios after Redis's hash-field-expire suite

def test_subexpiry_counts_hashes_with_field_ttls(r):
    def subexpiry():
        return r.info("keyspace").get("db0", {}).get("subexpiry", 0)
    r.hset("h1", mapping={f"f{i}": "v" for i in range(5)})
    r.execute_command("HPEXPIRE", "h1", 150, "FIELDS", 3, "f1", "f2", "f3")
    assert subexpiry() == 1
    r.hset("h2", mapping={f"f{i}": "v" for i in range(5)})
    assert subexpiry() == 1, "a hash without field TTLs is not indexed"
    r.execute_command("HPEXPIRE", "h2", 100, "FIELDS", 3, "f1", "f2", "f3")
    assert subexpiry() == 2
    r.hset("h3", mapping={"a": "1", "b": "2"})
    r.execute_command("HPEXPIRE", "h3", 100000, "FIELDS", 1, "b")
    assert subexpiry() == 3
    r.hdel("h3", "b")
    assert subexpiry() == 2, "deleting the last field with a TTL unregisters the hash"
    deadline = time.time() + 3
    while subexpiry() and time.time() < deadline:
        time.sleep(0.05)
    assert subexpiry() == 0
    assert r.hlen("h1") == 2 and r.hlen("h2") == 2


def test_ttl_counts_down_then_field_vanishes(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.execute_command("HPEXPIRE", "h", 1500, "FIELDS", 1, "a")
    first = r.execute_command("HPTTL", "h", "FIELDS", 1, "a")[0]
    time.sleep(0.3)
    second = r.execute_command("HPTTL", "h", "FIELDS", 1, "a")[0]
    assert 0 < second < first <= 1500
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "a") == [2]  # rounded up, as Redis
    time.sleep(1.4)
    assert r.execute_command("HPTTL", "h", "FIELDS", 1, "a") == [-2]
    assert r.hgetall("h") == {b"b": b"2"}


def test_hscan_of_mostly_expired_hash(r):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    try:
        for n in (5, 700):
            r.delete("h")
            big(r, "h", n)
            r.execute_command("HPEXPIRE", "h", 1, "FIELDS", n - 1, *[f"f{i}" for i in range(1, n)])
            time.sleep(0.05)
            seen, cursor = {}, 0
            while True:
                cursor, part = r.hscan("h", cursor, count=10)
                seen.update(part)
                if cursor == 0:
                    break
            assert seen == {b"f0": b"0"}
            assert r.hlen("h") == n
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 1)


def test_conversion_keeps_field_ttls_and_active_expiry(r, thresholds):
    r.config_set("hash-max-listpack-entries", 4)
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.execute_command("HPEXPIRE", "h", 100, "FIELDS", 1, "a")
    assert enc(r, "h") == b"listpackex"
    r.hset("h", mapping={f"x{i}": i for i in range(10)})
    assert enc(r, "h") == b"hashtable"
    assert 0 < r.execute_command("HPTTL", "h", "FIELDS", 1, "a")[0] <= 100
    deadline = time.time() + 3
    while r.hlen("h") == 12 and time.time() < deadline:
        time.sleep(0.05)
    assert r.hlen("h") == 11 and r.hexists("h", "a") == 0


def test_swapdb_carries_field_ttls(r, new_client):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.execute_command("HPEXPIRE", "h", 100, "FIELDS", 1, "a")
    r.swapdb(0, 1)
    r1 = new_client(db=1)
    assert r1.hlen("h") == 2
    deadline = time.time() + 3
    while r1.hlen("h") == 2 and time.time() < deadline:
        time.sleep(0.05)
    assert r1.hgetall("h") == {b"b": b"2"}
    r1.flushdb()


def test_expired_fields_of_renamed_and_moved_hashes_still_expire(r, new_client):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.execute_command("HPEXPIRE", "h", 100, "FIELDS", 1, "a")
    r.rename("h", "h2")
    r.move("h2", 2)
    r2 = new_client(db=2)
    deadline = time.time() + 3
    while r2.hlen("h2") == 2 and time.time() < deadline:
        time.sleep(0.05)
    assert r2.hgetall("h2") == {b"b": b"2"}
    r2.flushdb()


def test_many_small_hashes_expire_fields_actively(r):
    """Small hashes are stored inline in their keys; their field TTLs are
    still found by active expiry without any access, and a hash that grows
    past the inline bound keeps its fields, TTLs and encoding name."""
    pipe = r.pipeline(transaction=False)
    # TTLs long enough to outlive the load and the checks below on a loaded machine.
    for i in range(2000):
        pipe.hset(f"one:{i}", "name", "1")
        pipe.execute_command("HPEXPIRE", f"one:{i}", 1000 + i % 50, "FIELDS", 1, "name")
        pipe.hset(f"three:{i}", mapping={"a": "1", "b": "x" * 10, "c": "3"})
        pipe.execute_command("HPEXPIRE", f"three:{i}", 1500, "FIELDS", 1, "b")
    pipe.execute()
    assert enc(r, "one:7") == b"listpackex"
    assert r.info("keyspace")["db0"]["subexpiry"] == 4000
    grow = {f"field:{i}": "v" * 8 for i in range(20)}
    r.hset("three:0", mapping=grow)
    assert r.execute_command("HPTTL", "three:0", "FIELDS", 2, "b", "a")[1] == -1
    assert r.execute_command("HPTTL", "three:0", "FIELDS", 1, "b")[0] > 0
    deadline = time.time() + 8
    while (r.dbsize() > 2000 or r.info("keyspace")["db0"].get("subexpiry", 0)) and time.time() < deadline:
        time.sleep(0.05)
    assert r.dbsize() == 2000
    assert r.info("keyspace")["db0"].get("subexpiry", 0) == 0
    assert r.hgetall("three:5") == {b"a": b"1", b"c": b"3"}
    assert r.hlen("three:0") == 22 and r.hget("three:0", "field:19") == b"v" * 8
    assert enc(r, "three:5") == b"listpackex"
    r.hset("plain", "f", "v")
    assert enc(r, "plain") == b"listpack"
