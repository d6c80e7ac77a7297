"""Generic key commands: DEL UNLINK EXISTS TYPE RENAME RENAMENX COPY MOVE KEYS SCAN
RANDOMKEY TOUCH OBJECT MEMORY SWAPDB, with Redis 7.4's exact replies and errors."""

import random

import pytest
import redis


def arity(name):
    return b"-ERR wrong number of arguments for '%s' command\r\n" % name.encode()


NOT_INT = b"-ERR value is not an integer or out of range\r\n"
SYNTAX = b"-ERR syntax error\r\n"
SAME = b"-ERR source and destination objects are the same\r\n"
DB_RANGE = b"-ERR DB index is out of range\r\n"


def test_del_unlink_exists(r, c):
    for k in (b"a", b"b", b"c"):
        r.set(k, b"1")
    assert r.exists(b"a", b"b", b"a", b"zz") == 3
    assert r.delete(b"a", b"zz", b"a") == 1
    assert r.unlink(b"b", b"c", b"nope") == 2
    assert r.exists(b"a", b"b", b"c") == 0
    for cmd in ("del", "unlink", "exists"):
        assert c.call(cmd) == arity(cmd)


def test_type(r, c):
    r.set(b"s", b"x")
    assert c.call("TYPE", "s") == b"+string\r\n"
    assert c.call("TYPE", "missing") == b"+none\r\n"
    assert c.call("TYPE") == arity("type")
    assert c.call("TYPE", "a", "b") == arity("type")


def test_rename(r, c):
    r.set(b"a", b"v")
    r.pexpire(b"a", 100_000)
    assert c.call("RENAME", "a", "b") == b"+OK\r\n"
    assert r.get(b"b") == b"v" and r.exists(b"a") == 0
    assert 0 < r.pttl(b"b") <= 100_000  # the deadline moves with the value
    r.set(b"c", b"old")
    r.expire(b"c", 1000)
    assert c.call("RENAME", "b", "c") == b"+OK\r\n"
    assert r.get(b"c") == b"v" and 0 < r.pttl(b"c") <= 100_000
    r.persist(b"c")
    r.set(b"d", b"x")
    r.expire(b"d", 1000)
    assert c.call("RENAME", "c", "d") == b"+OK\r\n"
    assert r.ttl(b"d") == -1  # the destination's old TTL does not survive
    assert c.call("RENAME", "missing", "x") == b"-ERR no such key\r\n"
    assert c.call("RENAME", "d", "d") == b"+OK\r\n"
    assert c.call("RENAME", "missing", "missing") == b"-ERR no such key\r\n"
    assert c.call("RENAME", "a") == arity("rename")


def test_renamenx(r, c):
    r.set(b"a", b"1")
    r.set(b"b", b"2")
    assert c.call("RENAMENX", "a", "b") == b":0\r\n"
    assert c.call("RENAMENX", "a", "a") == b":0\r\n"
    assert c.call("RENAMENX", "a", "c") == b":1\r\n"
    assert r.get(b"c") == b"1" and r.get(b"a") is None
    assert c.call("RENAMENX", "missing", "x") == b"-ERR no such key\r\n"
    assert c.call("RENAMENX", "a", "b", "c") == arity("renamenx")


def test_copy(r, c):
    r.set(b"src", b"hello")
    r.pexpire(b"src", 100_000)
    assert c.call("COPY", "src", "dst") == b":1\r\n"
    assert r.get(b"dst") == b"hello" and 0 < r.pttl(b"dst") <= 100_000
    assert r.get(b"src") == b"hello"
    assert c.call("COPY", "src", "dst") == b":0\r\n"
    r.set(b"src", b"new")
    assert c.call("COPY", "src", "dst", "REPLACE") == b":1\r\n"
    assert r.get(b"dst") == b"new" and r.ttl(b"dst") == -1
    assert c.call("COPY", "missing", "dst") == b":0\r\n"
    assert c.call("COPY", "src", "src") == SAME
    assert c.call("COPY", "src", "src", "DB", "0") == SAME
    assert c.call("COPY", "src", "src", "DB", "1") == b":1\r\n"
    assert c.call("SELECT", "1") == b"+OK\r\n"
    assert c.call("GET", "src") == b"$3\r\nnew\r\n"
    assert c.call("SELECT", "0") == b"+OK\r\n"
    assert c.call("COPY", "src", "x", "DB", "16") == DB_RANGE
    assert c.call("COPY", "src", "x", "DB", "-1") == DB_RANGE
    assert c.call("COPY", "src", "x", "DB", "abc") == NOT_INT
    assert c.call("COPY", "src", "x", "DB") == SYNTAX
    assert c.call("COPY", "src", "x", "FOO") == SYNTAX
    assert c.call("COPY", "src") == arity("copy")


def test_move(r, c):
    r.set(b"k", b"v")
    r.pexpire(b"k", 100_000)
    assert c.call("MOVE", "k", "1") == b":1\r\n"
    assert r.exists(b"k") == 0
    assert c.call("SELECT", "1") == b"+OK\r\n"
    assert c.call("GET", "k") == b"$1\r\nv\r\n"
    pttl = int(c.call("PTTL", "k")[1:-2])
    assert 0 < pttl <= 100_000
    assert c.call("MOVE", "k", "1") == SAME
    assert c.call("SELECT", "0") == b"+OK\r\n"
    r.set(b"k", b"other")
    assert c.call("MOVE", "k", "1") == b":0\r\n"  # taken in the target
    assert r.get(b"k") == b"other"
    assert c.call("MOVE", "missing", "1") == b":0\r\n"
    assert c.call("MOVE", "k", "16") == DB_RANGE
    assert c.call("MOVE", "k", "x") == NOT_INT
    assert c.call("MOVE", "k") == arity("move")


def test_keys_patterns(r, c):
    names = [b"hello", b"hallo", b"hxllo", b"hllo", b"heeeello", b"h*llo", b"foo"]
    for n in names:
        r.set(n, b"1")
    assert sorted(r.keys(b"*")) == sorted(names)
    assert sorted(r.keys(b"h?llo")) == [b"h*llo", b"hallo", b"hello", b"hxllo"]
    assert sorted(r.keys(b"h*llo")) == sorted(n for n in names if n != b"foo")
    assert sorted(r.keys(b"h[ae]llo")) == [b"hallo", b"hello"]
    assert sorted(r.keys(b"h[^e]llo")) == [b"h*llo", b"hallo", b"hxllo"]
    assert sorted(r.keys(b"h[a-b]llo")) == [b"hallo"]
    assert r.keys(b"h\\*llo") == [b"h*llo"]
    assert r.keys(b"nomatch*") == []
    # Redis gives up past 1000 nested '*' groups: such a pattern matches nothing.
    r.set(b"a" * 50_000, b"1")
    assert r.keys(b"*?" * 50_000) == []
    assert r.keys(b"*?" * 1000) == [b"a" * 50_000]
    assert c.call("KEYS") == arity("keys")


def test_keys_skips_expired(r):
    r.set(b"a", b"1")
    r.set(b"b", b"1", px=1)
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        import time
        time.sleep(0.02)
        assert r.keys(b"*") == [b"a"]
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def scan_all(r, **kw):
    cursor, seen = 0, []
    while True:
        cursor, keys = r.scan(cursor, **kw)
        seen.extend(keys)
        if cursor == 0:
            return seen


def test_scan_basic(r, c):
    assert r.scan(0) == (0, [])
    for i in range(1000):
        r.set(b"key:%d" % i, b"v")
    keys = scan_all(r)
    assert set(keys) == {b"key:%d" % i for i in range(1000)}
    got = set(scan_all(r, match=b"key:1??", count=100))
    assert got == {b"key:%d" % i for i in range(100, 200)}
    assert set(scan_all(r, _type=b"string")) == set(keys)
    assert scan_all(r, _type=b"list") == []
    assert set(scan_all(r, _type=b"STRING", match=b"key:99*")) == {b"key:99", b"key:990", b"key:991", b"key:992", b"key:993", b"key:994", b"key:995", b"key:996", b"key:997", b"key:998", b"key:999"}


def test_scan_errors(r, c):
    assert c.call("SCAN", "x") == b"-ERR invalid cursor\r\n"
    assert c.call("SCAN", "-1") == b"-ERR invalid cursor\r\n"
    assert c.call("SCAN", "0", "COUNT", "0") == SYNTAX
    assert c.call("SCAN", "0", "COUNT", "x") == NOT_INT
    assert c.call("SCAN", "0", "COUNT") == SYNTAX
    assert c.call("SCAN", "0", "FOO", "bar") == SYNTAX
    assert c.call("SCAN", "0", "TYPE", "foo") == b"-ERR unknown type name 'foo'\r\n"
    assert c.call("SCAN", "0", "NOVALUES") == b"-ERR NOVALUES option can only be used in HSCAN\r\n"
    assert c.call("SCAN") == arity("scan")
    # A huge cursor is valid and simply ends the iteration.
    assert c.call("SCAN", "18446744073709551615") == b"*2\r\n$1\r\n0\r\n*0\r\n"


def test_scan_resp3(r3):
    r3.set(b"only", b"1")
    assert r3.scan(0) == (0, [b"only"])


def test_scan_guarantee_under_churn(r):
    """Every key present for the whole iteration is returned, with COUNT 10,
    while other keys are added and deleted between calls."""
    n = 10_000
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.set(b"stable:%d" % i, b"v")
    pipe.execute()
    rnd = random.Random(7)
    temp = 0
    live_temp = []
    cursor, seen, calls = 0, set(), 0
    while True:
        cursor, keys = r.scan(cursor, count=10)
        seen.update(keys)
        calls += 1
        pipe = r.pipeline(transaction=False)
        for _ in range(3):
            pipe.set(b"temp:%d" % temp, b"v")
            live_temp.append(temp)
            temp += 1
        for _ in range(2):
            if live_temp:
                pipe.delete(b"temp:%d" % live_temp.pop(rnd.randrange(len(live_temp))))
        pipe.execute()
        if cursor == 0:
            break
    assert {b"stable:%d" % i for i in range(n)} <= seen
    assert calls >= n // 10  # COUNT is honoured: no single call returned everything


def test_randomkey(r, c):
    assert c.call("RANDOMKEY") == b"$-1\r\n"
    for k in (b"a", b"b", b"c"):
        r.set(k, b"1")
    assert {r.randomkey() for _ in range(100)} == {b"a", b"b", b"c"}
    assert c.call("RANDOMKEY", "x") == arity("randomkey")


def test_randomkey_resp3_null(r3):
    assert r3.randomkey() is None


def test_touch(r, c):
    r.set(b"a", b"1")
    r.set(b"b", b"1")
    assert c.call("TOUCH", "a", "b", "c", "a") == b":3\r\n"
    assert c.call("TOUCH") == arity("touch")


def test_object_encoding(r, c):
    r.set(b"i", b"12345")
    r.set(b"neg", b"-9223372036854775808")
    r.set(b"big", b"9223372036854775808")
    r.set(b"lead0", b"0123")
    r.set(b"e44", b"x" * 44)
    r.set(b"r45", b"x" * 45)
    assert c.call("OBJECT", "ENCODING", "i") == b"$3\r\nint\r\n"
    assert c.call("OBJECT", "ENCODING", "neg") == b"$3\r\nint\r\n"
    assert c.call("OBJECT", "ENCODING", "big") == b"$6\r\nembstr\r\n"
    assert c.call("OBJECT", "ENCODING", "lead0") == b"$6\r\nembstr\r\n"
    assert c.call("OBJECT", "ENCODING", "e44") == b"$6\r\nembstr\r\n"
    assert c.call("OBJECT", "ENCODING", "r45") == b"$3\r\nraw\r\n"
    assert c.call("OBJECT", "ENCODING", "missing") == b"$-1\r\n"
    assert c.call("OBJECT", "ENCODING") == arity("object|encoding")
    assert c.call("OBJECT", "ENCODING", "a", "b") == arity("object|encoding")
    assert c.call("OBJECT", "FOO", "a") == b"-ERR unknown subcommand 'FOO'. Try OBJECT HELP.\r\n"
    assert c.call("OBJECT") == arity("object")


def test_append_and_setrange_leave_integers_raw(r, c):
    # Redis turns the result of APPEND or SETRANGE on an existing string
    # into a raw string even when it reads as an integer; SET makes it int.
    r.set(b"foo", b"1")
    assert c.call("OBJECT", "ENCODING", "foo") == b"$3\r\nint\r\n"
    assert r.append(b"foo", b"2") == 2
    assert r.get(b"foo") == b"12"
    assert c.call("OBJECT", "ENCODING", "foo") == b"$3\r\nraw\r\n"
    assert r.incr(b"foo") == 13
    assert c.call("OBJECT", "ENCODING", "foo") == b"$3\r\nint\r\n"
    r.set(b"n", b"1234")
    assert r.setrange(b"n", 0, b"2") == 4
    assert r.get(b"n") == b"2234"
    assert c.call("OBJECT", "ENCODING", "n") == b"$3\r\nraw\r\n"
    # APPEND to a missing key stores the argument as SET would.
    assert r.append(b"new", b"5") == 1
    assert c.call("OBJECT", "ENCODING", "new") == b"$3\r\nint\r\n"


def test_raw_mark_survives_ttl_changes(r, c):
    # Redis keeps the same object when only the TTL changes, so a string
    # edited in place stays raw through EXPIRE, PERSIST and GETEX; a new
    # value (SET, even with KEEPTTL) is stored anew as embstr.
    r.set(b"s", b"abc")
    r.append(b"s", b"d")
    assert c.call("OBJECT", "ENCODING", "s") == b"$3\r\nraw\r\n"
    for cmd in (("EXPIRE", "s", "100"), ("PERSIST", "s"), ("PEXPIREAT", "s", "99999999999999"),
                ("GETEX", "s", "EX", "50"), ("GETEX", "s", "PERSIST"), ("EXPIRE", "s", "100")):
        c.call(*cmd)
        assert c.call("OBJECT", "ENCODING", "s") == b"$3\r\nraw\r\n", cmd
    assert r.get(b"s") == b"abcd"
    assert 0 < r.ttl(b"s") <= 100
    r.setrange(b"n", 0, b"xy")
    r.setbit(b"b", 3, 1)
    for k in (b"n", b"b"):
        r.expire(k, 100)
        assert c.call("OBJECT", "ENCODING", k) == b"$3\r\nraw\r\n"
    r.set(b"s", b"abcd", keepttl=True)
    assert c.call("OBJECT", "ENCODING", "s") == b"$6\r\nembstr\r\n"
    assert 0 < r.ttl(b"s") <= 100


def test_object_refcount(r, c):
    r.set(b"small", b"1")
    r.set(b"large", b"10000")
    r.set(b"s", b"hello")
    # Redis shares the integers 0..9999 and reports INT_MAX for them.
    assert c.call("OBJECT", "REFCOUNT", "small") == b":2147483647\r\n"
    assert c.call("OBJECT", "REFCOUNT", "large") == b":1\r\n"
    assert c.call("OBJECT", "REFCOUNT", "s") == b":1\r\n"
    assert c.call("OBJECT", "REFCOUNT", "missing") == b"$-1\r\n"


def test_object_idletime_and_freq(r, c):
    r.set(b"k", b"v")
    assert c.call("OBJECT", "IDLETIME", "k") == b":0\r\n"
    assert c.call("OBJECT", "IDLETIME", "missing") == b"$-1\r\n"
    assert c.call("OBJECT", "FREQ", "k") == (
        b"-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that "
        b"when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n"
    )
    assert c.call("OBJECT", "FREQ", "missing") == b"$-1\r\n"
    r.config_set("maxmemory-policy", "allkeys-lfu")
    try:
        assert c.call("OBJECT", "IDLETIME", "k") == (
            b"-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when "
            b"switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n"
        )
        freq = c.call("OBJECT", "FREQ", "k")
        assert freq.startswith(b":") and int(freq[1:-2]) >= 0
    finally:
        r.config_set("maxmemory-policy", "noeviction")


def test_object_help_resp3(r3, raw):
    help_lines = r3.execute_command("OBJECT", "HELP")
    assert help_lines[0] == b"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert help_lines[-2:] == [b"HELP", b"    Print this help."]
    assert len(help_lines) == 15
    c = raw()
    assert c.call("OBJECT", "HELP", "x") == arity("object|help")


def test_memory_usage(r, c):
    r.set(b"k", b"v" * 100)
    usage = r.memory_usage(b"k")
    assert isinstance(usage, int) and usage >= 101
    assert r.memory_usage(b"k", samples=0) == usage
    assert c.call("MEMORY", "USAGE", "missing") == b"$-1\r\n"
    assert c.call("MEMORY", "USAGE", "k", "SAMPLES", "-1") == SYNTAX
    assert c.call("MEMORY", "USAGE", "k", "SAMPLES", "x") == NOT_INT
    assert c.call("MEMORY", "USAGE", "k", "SAMPLES") == SYNTAX
    assert c.call("MEMORY", "USAGE", "k", "FOO", "1") == SYNTAX
    assert c.call("MEMORY", "USAGE") == arity("memory|usage")


def test_memory_other(r, r3, c):
    stats = r3.execute_command("MEMORY", "STATS")
    assert isinstance(stats, dict)
    for field in (b"peak.allocated", b"total.allocated", b"keys.count", b"dataset.bytes", b"fragmentation"):
        assert field in stats
    flat = r.execute_command("MEMORY", "STATS")
    assert isinstance(flat, list) and len(flat) == 2 * len(stats)
    assert r.execute_command("MEMORY", "DOCTOR").startswith(b"Hi Sam")
    assert r.execute_command("MEMORY", "PURGE") == b"OK"
    assert isinstance(r.execute_command("MEMORY", "MALLOC-STATS"), bytes)
    help_lines = r.execute_command("MEMORY", "HELP")
    assert help_lines[0] == b"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert b"USAGE <key> [SAMPLES <count>]" in help_lines
    assert c.call("MEMORY", "STATS", "x") == arity("memory|stats")
    assert c.call("MEMORY", "NOPE") == b"-ERR unknown subcommand 'NOPE'. Try MEMORY HELP.\r\n"


def test_swapdb(r, c):
    r.set(b"in0", b"a")
    assert c.call("SELECT", "1") == b"+OK\r\n"
    assert c.call("SET", "in1", "b") == b"+OK\r\n"
    assert c.call("SWAPDB", "0", "1") == b"+OK\r\n"
    assert c.call("GET", "in0") == b"$1\r\na\r\n"  # connection c is still on db 1
    assert r.get(b"in1") == b"b" and r.get(b"in0") is None
    assert c.call("SWAPDB", "0", "0") == b"+OK\r\n"
    assert c.call("SWAPDB", "x", "0") == b"-ERR invalid first DB index\r\n"
    assert c.call("SWAPDB", "0", "x") == b"-ERR invalid second DB index\r\n"
    assert c.call("SWAPDB", "0", "16") == DB_RANGE
    assert c.call("SWAPDB", "-1", "0") == DB_RANGE
    assert c.call("SWAPDB", "0") == arity("swapdb")


def test_swapdb_touches_watch(r, new_client):
    r.set(b"w", b"1")
    other = new_client()
    other.execute_command("SELECT", "1")
    pipe = r.pipeline(transaction=True)
    pipe.watch(b"w")
    other.swapdb(0, 1)
    pipe.multi()
    pipe.set(b"w", b"2")
    with pytest.raises(redis.WatchError):
        pipe.execute()


def test_watch_sees_rename(r, new_client):
    r.set(b"a", b"1")
    pipe = r.pipeline(transaction=True)
    pipe.watch(b"b")
    new_client().rename(b"a", b"b")
    pipe.multi()
    pipe.get(b"b")
    with pytest.raises(redis.WatchError):
        pipe.execute()


# Write commands, some of which only read some of their keys (the sources
# of the STORE commands, BITOP, COPY, PFMERGE), run in this order.
WRITES = [["SINTERSTORE", "d1", "st", "st2", "nope"], ["SUNIONSTORE", "d2", "st", "nope"],
          ["SDIFFSTORE", "d3", "st", "st2"], ["ZUNIONSTORE", "d4", 2, "z", "nope"],
          ["ZINTERSTORE", "d5", 1, "z"], ["ZDIFFSTORE", "d6", 1, "z"], ["ZRANGESTORE", "d7", "z", 0, -1],
          ["SORT", "l", "STORE", "d8"],
          ["GEOSEARCHSTORE", "d9", "g", "FROMMEMBER", "p", "BYRADIUS", 10, "km"],
          ["BITOP", "AND", "d10", "bits", "nope"], ["PFMERGE", "d11", "hll", "nope"], ["COPY", "s", "d12"],
          ["SMOVE", "st", "st3", 1], ["RPOPLPUSH", "l", "l2"], ["LMOVE", "l", "l3", "LEFT", "RIGHT"],
          ["APPEND", "s", "x"], ["INCR", "n"], ["SET", "s", "v"], ["DEL", "s"], ["HSET", "h", "c", 1],
          ["HINCRBY", "h", "a", 1], ["LPUSH", "l", 1], ["SADD", "st", 5], ["ZADD", "z", 2, "b"],
          ["XADD", "x", "*", "f", "v"], ["EXPIRE", "h", 100], ["RENAME", "h", "h9"],
          ["SETRANGE", "q", 0, "a"], ["GETDEL", "nope"], ["LPOP", "l"], ["SPOP", "st"], ["ZPOPMIN", "z"],
          ["HDEL", "h9", "a"], ["PFADD", "hll", "b"], ["SETBIT", "bits", 1, 1], ["PERSIST", "h9"],
          ["UNLINK", "d1"], ["MSET", "a", 1, "b", 2], ["HGETDEL", "h9", "FIELDS", 1, "b"],
          ["LMPOP", 1, "l", "LEFT"], ["XTRIM", "x", "MAXLEN", 0]]


def _read_counts(r: redis.Redis, writes: bool = False) -> list[tuple[str, int, int]]:
    """Each read command of a list (or each of WRITES) run once on a fixed
    dataset: the keyspace hits and misses it counted."""
    r.flushall()
    r.set("s", "hello")
    r.hset("h", mapping={"a": 1, "b": 2})
    r.rpush("l", 1, 2, 3)
    r.sadd("st", 1, 2)
    r.sadd("st2", 2, 3)
    r.zadd("z", {"a": 1})
    r.xadd("x", {"f": "v"})
    r.pfadd("hll", "a")
    r.setbit("bits", 3, 1)
    r.geoadd("g", (13.36, 38.11, "p"))
    cmds = [["HGETALL", "h"], ["HGETALL", "nope"], ["LRANGE", "l", 0, -1], ["SMEMBERS", "st"],
            ["ZRANGE", "z", 0, -1], ["XRANGE", "x", "-", "+"], ["STRLEN", "s"], ["GETRANGE", "s", 0, 1],
            ["HLEN", "h"], ["SCARD", "st"], ["ZSCORE", "z", "a"], ["LLEN", "l"], ["SISMEMBER", "st", 1],
            ["HEXISTS", "h", "a"], ["ZCARD", "z"], ["BITCOUNT", "bits"], ["XLEN", "x"],
            ["OBJECT", "ENCODING", "s"], ["DUMP", "s"], ["SORT_RO", "l"], ["ZUNION", 2, "z", "nope"],
            ["SINTER", "st", "st2"], ["SUNION", "st", "nope"], ["LINDEX", "l", 0], ["HMGET", "h", "a", "b"],
            ["ZRANK", "z", "a"], ["GEOPOS", "g", "p"], ["GEODIST", "g", "p", "p"], ["LPOS", "l", 1],
            ["HRANDFIELD", "h"], ["SRANDMEMBER", "st"], ["ZRANDMEMBER", "z"], ["HSCAN", "h", 0],
            ["SSCAN", "st", 0], ["ZSCAN", "z", 0], ["GETBIT", "bits", 3], ["BITPOS", "bits", 1],
            ["LCS", "s", "s"], ["XINFO", "STREAM", "x"], ["TOUCH", "s", "nope"], ["SMISMEMBER", "st", 1, 2],
            ["ZMSCORE", "z", "a"], ["HSTRLEN", "h", "a"], ["MEMORY", "USAGE", "s"], ["PFCOUNT", "hll"],
            ["SINTERCARD", 2, "st", "st2"], ["ZINTERCARD", 1, "z"], ["EXISTS", "s", "s"],
            ["LRANGE", "nope", 0, -1], ["STRLEN", "nope"], ["ZRANDMEMBER", "nope"], ["HRANDFIELD", "nope"],
            ["XINFO", "STREAM", "nope"], ["SMEMBERS", "nope"], ["GETRANGE", "nope", 0, 1],
            ["LINDEX", "nope", 0], ["SRANDMEMBER", "nope"], ["ZSCORE", "nope", "a"], ["HGET", "s", "a"],
            ["SUNION", "nope", "nope2"], ["DUMP", "nope"], ["OBJECT", "ENCODING", "nope"], ["TTL", "nope"],
            ["PTTL", "s"], ["ZRANGEBYSCORE", "z", 0, 10], ["XREAD", "STREAMS", "x", "0"],
            ["XREVRANGE", "x", "+", "-"], ["GEOSEARCH", "g", "FROMMEMBER", "p", "BYRADIUS", 10, "km"],
            ["BITFIELD_RO", "bits", "GET", "u4", 0], ["HVALS", "h"], ["HKEYS", "h"], ["ZCOUNT", "z", 0, 10],
            ["ZLEXCOUNT", "z", "-", "+"], ["LCS", "nope", "s"], ["SDIFF", "st", "st2"],
            ["ZDIFF", 2, "z", "nope"], ["MGET", "s", "nope", "h"], ["RANDOMKEY"], ["SCAN", 0]]
    out = []
    for c in WRITES if writes else cmds:
        r.config_resetstat()
        try:
            r.execute_command(*c)
        except redis.ResponseError:
            pass
        st = r.info("stats")
        out.append((" ".join(map(str, c)), st["keyspace_hits"], st["keyspace_misses"]))
    return out


def test_read_commands_count_keyspace_hits_and_misses_as_redis(r, real_redis):
    """79 read commands on keys present, absent and of another type: each
    counts the same keyspace hits and misses as Redis 7.0 (one per key it
    looks up, not per internal lookup)."""
    assert _read_counts(r) == _read_counts(real_redis)


def test_write_commands_count_the_keys_they_only_read_as_redis(r, real_redis):
    """41 write commands: the keys one only reads (SINTERSTORE's sources,
    COPY's source ...) count as keyspace hits and misses, the keys it writes
    do not, with Redis 7.0's figures."""
    assert _read_counts(r, writes=True) == _read_counts(real_redis, writes=True)
