"""Redis 8.x core commands outside streams: BITOP DIFF/DIFF1/ANDOR/ONE (8.2); SET
IFEQ/IFNE/IFDEQ/IFDNE, DIGEST, DELEX, MSETEX (8.4); the LRM eviction policies (8.6);
ZUNION/ZINTER(STORE) AGGREGATE COUNT (8.8); Valkey 9's DELIFEQ. Replies byte for
byte in RESP2 and RESP3, errors, keyspace events, and what reaches the AOF."""

import time

import pytest
import redis

from test_aof import aof_commands, incr_path, start, workdir  # noqa: F401 (fixture)
from test_keyspace_events import ev, events  # noqa: F401 (fixture)


def e(msg: str) -> bytes:
    return b"-" + msg.encode() + b"\r\n"


SYNTAX = e("ERR syntax error")
WRONGTYPE = e("WRONGTYPE Operation against a key holding the wrong kind of value")

# XXH3-64 (seed 0) of these values, as DIGEST prints them.
HELLO_WORLD = b"b6acb9d84a38ff74"  # "Hello world", the example of Redis's DIGEST page


def bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


# ---------------------------------------------------------------- BITOP (8.2)


def bits(r, key) -> str:
    v = r.get(key) or b""
    return "".join(f"{b:08b}" for b in v)


def test_bitop_new_operations(r, c):
    r.set("x", b"\xf0\x0f")  # 11110000 00001111
    r.set("y", b"\xcc")      # 11001100 (00000000)
    r.set("z", b"\xaa\xff")  # 10101010 11111111
    # DIFF: in X and in none of the others.
    assert c.call("BITOP", "DIFF", "d", "x", "y", "z") == b":2\r\n"
    assert bits(r, "d") == "00010000" + "00000000"
    # DIFF1: in one or more of the others and not in X.
    assert c.call("BITOP", "diff1", "d1", "x", "y", "z") == b":2\r\n"
    assert bits(r, "d1") == "00001110" + "11110000"
    # ANDOR: in X and in at least one of the others.
    assert c.call("BITOP", "AndOr", "a", "x", "y", "z") == b":2\r\n"
    assert bits(r, "a") == "11100000" + "00001111"
    # ONE: in exactly one source.
    assert c.call("BITOP", "ONE", "o", "x", "y", "z") == b":2\r\n"
    assert bits(r, "o") == "00010110" + "11110000"
    # ONE with one source copies it; with the same key twice nothing is left.
    assert c.call("BITOP", "ONE", "o1", "x") == b":2\r\n"
    assert r.get("o1") == b"\xf0\x0f"
    assert c.call("BITOP", "ONE", "o2", "x", "x") == b":2\r\n"
    assert r.get("o2") == b"\x00\x00"


def test_bitop_new_operations_missing_keys_and_errors(r, c):
    r.set("x", b"\xff")
    # Missing sources read as empty strings (zeros), X included.
    assert c.call("BITOP", "DIFF", "d", "x", "nosuch") == b":1\r\n"
    assert r.get("d") == b"\xff"
    assert c.call("BITOP", "DIFF1", "d", "nosuch", "x") == b":1\r\n"
    assert r.get("d") == b"\xff"
    assert c.call("BITOP", "ANDOR", "d", "nosuch", "x") == b":1\r\n"
    assert r.get("d") == b"\x00"
    # All sources missing: the destination is deleted.
    r.set("dest", "v")
    assert c.call("BITOP", "DIFF", "dest", "n1", "n2") == b":0\r\n"
    assert r.exists("dest") == 0
    for op in ("DIFF", "DIFF1", "ANDOR"):
        assert c.call("BITOP", op, "d", "x") == e(f"ERR BITOP {op} must be called with at least two source keys.")
    assert c.call("BITOP", "diff", "d", "x") == e("ERR BITOP DIFF must be called with at least two source keys.")
    assert c.call("BITOP", "NOT", "d", "x", "x") == e("ERR BITOP NOT must be called with a single source key.")
    assert c.call("BITOP", "NOPE", "d", "x") == SYNTAX
    r.lpush("l", 1)
    assert c.call("BITOP", "ONE", "d", "x", "l") == WRONGTYPE


def test_bitop_info_lists_the_operations(r, c):
    reply = c.call("COMMAND", "INFO", "bitop")
    assert reply.startswith(b"*1\r\n*10\r\n$5\r\nbitop\r\n:-4\r\n*2\r\n+write\r\n+denyoom\r\n:2\r\n:-1\r\n:1\r\n")


# ---------------------------------------------------------------- DIGEST (8.4)


def test_digest(r, c, r3):
    r.set("k", "Hello world")
    assert c.call("DIGEST", "k") == bulk(HELLO_WORLD)
    assert r3.execute_command("DIGEST", "k") == HELLO_WORLD
    assert c.call("DIGEST", "nosuch") == b"$-1\r\n"
    # Integers are digested as their decimal text.
    r.set("n", "12345")
    r.set("s", "12345 ")
    assert r.execute_command("DIGEST", "n") != r.execute_command("DIGEST", "s")
    r.set("t", "12345")
    assert r.execute_command("DIGEST", "n") == r.execute_command("DIGEST", "t")
    # 16 lowercase hex digits, zeros kept.
    for v in (b"", b"a", b"x" * 1000, b"\x00\xff"):
        r.set("v", v)
        d = r.execute_command("DIGEST", "v")
        assert len(d) == 16 and d == d.lower() and int(d, 16) >= 0
    r.lpush("l", 1)
    assert c.call("DIGEST", "l") == WRONGTYPE
    assert c.call("DIGEST") == e("ERR wrong number of arguments for 'digest' command")
    assert c.call("DIGEST", "a", "b") == e("ERR wrong number of arguments for 'digest' command")


def test_digest_resp3_null(raw):
    c = raw()
    c.call("HELLO", "3")
    assert c.call("DIGEST", "nosuch") == b"_\r\n"


# ---------------------------------------------------------------- SET IF* (8.4)


def test_set_ifeq_ifne(r, c):
    r.set("k", "v1")
    assert c.call("SET", "k", "v2", "IFEQ", "other") == b"$-1\r\n"
    assert r.get("k") == b"v1"
    assert c.call("SET", "k", "v2", "IFEQ", "v1") == b"+OK\r\n"
    assert r.get("k") == b"v2"
    assert c.call("SET", "k", "v3", "IFNE", "v2") == b"$-1\r\n"
    assert c.call("SET", "k", "v3", "ifne", "zz") == b"+OK\r\n"
    assert r.get("k") == b"v3"
    # A missing key: IFEQ does not create it, IFNE does.
    assert c.call("SET", "new", "x", "IFEQ", "x") == b"$-1\r\n"
    assert r.exists("new") == 0
    assert c.call("SET", "new", "x", "IFNE", "x") == b"+OK\r\n"
    assert r.get("new") == b"x"
    # Integer-encoded values compare as their text.
    r.set("n", 10)
    assert c.call("SET", "n", "11", "IFEQ", "10") == b"+OK\r\n"
    assert c.call("SET", "n", "12", "IFEQ", "010") == b"$-1\r\n"


def test_set_ifdeq_ifdne(r, c):
    r.set("k", "Hello world")
    assert c.call("SET", "k", "v", "IFDEQ", "0000000000000000") == b"$-1\r\n"
    assert c.call("SET", "k", "v", "IFDNE", HELLO_WORLD) == b"$-1\r\n"
    assert r.get("k") == b"Hello world"
    # Digests compare as hex, in either case.
    assert c.call("SET", "k", "v", "IFDEQ", HELLO_WORLD.upper()) == b"+OK\r\n"
    assert r.get("k") == b"v"
    d = r.execute_command("DIGEST", "k")
    assert c.call("SET", "k", "w", "IFDNE", HELLO_WORLD) == b"+OK\r\n"
    assert c.call("SET", "k", "x", "IFDEQ", d) == b"$-1\r\n"
    assert c.call("SET", "nosuch", "x", "IFDEQ", d) == b"$-1\r\n"
    assert r.exists("nosuch") == 0
    assert c.call("SET", "nosuch", "x", "IFDNE", d) == b"+OK\r\n"
    assert r.get("nosuch") == b"x"


def test_set_conditions_with_get_and_expiry(r, c, raw):
    r.set("k", "old", ex=1000)
    # GET replies with the old value whether or not the condition holds.
    assert c.call("SET", "k", "new", "IFEQ", "nope", "GET") == bulk(b"old")
    assert r.get("k") == b"old" and r.ttl("k") > 900
    assert c.call("SET", "k", "new", "GET", "IFEQ", "old", "PX", "50000") == bulk(b"old")
    assert r.get("k") == b"new" and 40 < r.ttl("k") <= 50
    assert c.call("SET", "k", "newer", "IFNE", "x", "KEEPTTL") == b"+OK\r\n"
    assert 40 < r.ttl("k") <= 50
    assert c.call("SET", "k", "v", "IFNE", "x") == b"+OK\r\n"
    assert r.ttl("k") == -1
    assert c.call("SET", "missing", "v", "IFEQ", "x", "GET") == b"$-1\r\n"
    c3 = raw()
    c3.call("HELLO", "3")
    assert c3.call("SET", "k", "w", "IFEQ", "nope") == b"_\r\n"
    assert c3.call("SET", "k", "w", "IFEQ", "nope", "GET") == bulk(b"v")
    assert c3.call("SET", "k", "w", "IFDEQ", r.execute_command("DIGEST", "k")) == b"+OK\r\n"


def test_set_conditions_syntax_and_types(r, c):
    for a, b in (("NX", "IFEQ"), ("XX", "IFNE"), ("IFEQ", "NX"), ("IFDEQ", "XX"), ("IFEQ", "IFNE"), ("IFDNE", "IFDEQ")):
        first = [a] if a in ("NX", "XX") else [a, "v"]
        second = [b] if b in ("NX", "XX") else [b, "v"]
        assert c.call("SET", "k", "x", *first, *second) == SYNTAX, (a, b)
    assert c.call("SET", "k", "x", "IFEQ") == SYNTAX
    assert c.call("SET", "k", "x", "IFEQ", "v", "IFEQ", "v") == SYNTAX
    r.lpush("l", 1)
    for cond in ("IFEQ", "IFNE", "IFDEQ", "IFDNE"):
        assert c.call("SET", "l", "x", cond, "1") == WRONGTYPE
        assert c.call("SET", "l", "x", cond, "1", "GET") == WRONGTYPE
    assert r.type("l") == b"list"
    # A bad expire is reported before the type.
    assert c.call("SET", "l", "x", "IFEQ", "1", "EX", "0") == e("ERR invalid expire time in 'set' command")


def test_set_condition_key_flags(r):
    r.response_callbacks.pop("COMMAND", None)  # keep redis-py from reshaping replies
    assert r.execute_command("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "IFEQ", "x") == [[b"k", [b"RW", b"access", b"update"]]]
    assert r.execute_command("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v") == [[b"k", [b"OW", b"update"]]]


# ---------------------------------------------------------------- DELEX (8.4)


def test_delex(r, c):
    r.set("k", "v")
    assert c.call("DELEX", "k", "IFEQ", "w") == b":0\r\n"
    assert c.call("DELEX", "k", "IFNE", "v") == b":0\r\n"
    assert c.call("DELEX", "k", "IFDNE", r.execute_command("DIGEST", "k")) == b":0\r\n"
    assert r.get("k") == b"v"
    assert c.call("DELEX", "k", "IFEQ", "v") == b":1\r\n"
    assert r.exists("k") == 0
    r.set("k", "v")
    assert c.call("DELEX", "k", "ifne", "w") == b":1\r\n"
    r.set("k", "Hello world")
    assert c.call("DELEX", "k", "IFDEQ", HELLO_WORLD) == b":1\r\n"
    r.set("k", "v")
    assert c.call("DELEX", "k", "IFDNE", HELLO_WORLD) == b":1\r\n"
    # A missing key is never deleted, whatever the condition.
    for cond in ("IFEQ", "IFNE", "IFDEQ", "IFDNE"):
        assert c.call("DELEX", "nosuch", cond, "x") == b":0\r\n"
    # Without a condition it is DEL of one key, of any type.
    r.lpush("l", 1)
    assert c.call("DELEX", "l") == b":1\r\n"
    assert c.call("DELEX", "l") == b":0\r\n"


def test_delex_errors(r, c):
    r.response_callbacks.pop("COMMAND", None)
    r.lpush("l", 1)
    for cond in ("IFEQ", "IFNE", "IFDEQ", "IFDNE"):
        assert c.call("DELEX", "l", cond, "1") == WRONGTYPE
    assert r.exists("l") == 1
    assert c.call("DELEX", "l", "IFEQ") == SYNTAX
    assert c.call("DELEX", "l", "IFEQ", "1", "IFNE", "2") == SYNTAX
    assert c.call("DELEX", "l", "NOPE", "1") == SYNTAX
    assert c.call("DELEX") == e("ERR wrong number of arguments for 'delex' command")
    assert r.execute_command("COMMAND", "GETKEYSANDFLAGS", "DELEX", "k") == [[b"k", [b"RM", b"delete"]]]
    assert r.execute_command("COMMAND", "GETKEYSANDFLAGS", "DELEX", "k", "IFEQ", "v") == [[b"k", [b"RW", b"access", b"delete"]]]


# ---------------------------------------------------------------- DELIFEQ (Valkey 9)


def test_delifeq(r, c):
    r.set("k", "v")
    assert c.call("DELIFEQ", "k", "w") == b":0\r\n"
    assert c.call("DELIFEQ", "k", "v") == b":1\r\n"
    assert r.exists("k") == 0
    assert c.call("DELIFEQ", "k", "v") == b":0\r\n"
    r.set("n", 7)
    assert c.call("DELIFEQ", "n", "7") == b":1\r\n"
    r.lpush("l", 1)
    assert c.call("DELIFEQ", "l", "1") == WRONGTYPE
    assert c.call("DELIFEQ", "k") == e("ERR wrong number of arguments for 'delifeq' command")


# ---------------------------------------------------------------- MSETEX (8.4)


def test_msetex(r, c):
    assert c.call("MSETEX", "2", "a", "1", "b", "2") == b":1\r\n"
    assert r.mget("a", "b") == [b"1", b"2"] and r.ttl("a") == -1
    assert c.call("MSETEX", "2", "a", "3", "c", "4", "EX", "100") == b":1\r\n"
    assert r.mget("a", "c") == [b"3", b"4"]
    assert 90 < r.ttl("a") <= 100 and 90 < r.ttl("c") <= 100 and r.ttl("b") == -1
    # NX: only when no key exists; XX: only when all do. Nothing is set otherwise.
    assert c.call("MSETEX", "2", "a", "x", "z", "y", "NX") == b":0\r\n"
    assert r.get("a") == b"3" and r.exists("z") == 0
    assert c.call("MSETEX", "2", "y", "1", "z", "2", "NX", "PX", "100000") == b":1\r\n"
    assert 90_000 < r.pttl("y") <= 100_000
    assert c.call("MSETEX", "2", "a", "x", "nosuch", "y", "XX") == b":0\r\n"
    assert r.get("a") == b"3"
    # Options come in any order; KEEPTTL keeps each key's own TTL.
    assert c.call("MSETEX", "2", "a", "5", "b", "6", "KEEPTTL", "XX") == b":1\r\n"
    assert r.mget("a", "b") == [b"5", b"6"] and 90 < r.ttl("a") <= 100 and r.ttl("b") == -1
    at = int(time.time()) + 500
    assert c.call("MSETEX", "1", "a", "7", "EXAT", str(at)) == b":1\r\n"
    assert 490 < r.ttl("a") <= 500
    # Values of any old type are overwritten.
    r.lpush("l", 1)
    assert c.call("MSETEX", "1", "l", "s") == b":1\r\n"
    assert r.get("l") == b"s"


def test_msetex_errors(r, c):
    r.response_callbacks.pop("COMMAND", None)
    bad = e("ERR invalid numkeys value")
    assert c.call("MSETEX", "0", "a", "1") == bad
    assert c.call("MSETEX", "-1", "a", "1") == bad
    assert c.call("MSETEX", "x", "a", "1") == bad
    assert c.call("MSETEX", "2", "a", "1") == bad
    assert c.call("MSETEX", "2", "a", "1", "b") == bad
    assert c.call("MSETEX", "1", "a", "1", "b") == SYNTAX
    assert c.call("MSETEX", "1", "a", "1", "NX", "XX") == SYNTAX
    assert c.call("MSETEX", "1", "a", "1", "EX", "10", "PX", "10") == SYNTAX
    assert c.call("MSETEX", "1", "a", "1", "EX", "10", "KEEPTTL") == SYNTAX
    assert c.call("MSETEX", "1", "a", "1", "KEEPTTL", "EX", "10") == SYNTAX
    assert c.call("MSETEX", "1", "a", "1", "EX") == SYNTAX
    assert c.call("MSETEX", "1", "a", "1", "EX", "0") == e("ERR invalid expire time in 'msetex' command")
    assert c.call("MSETEX", "1", "a", "1", "PX", "x") == e("ERR value is not an integer or out of range")
    assert c.call("MSETEX", "1", "a") == e("ERR wrong number of arguments for 'msetex' command")
    assert r.exists("a") == 0
    assert r.execute_command("COMMAND", "GETKEYS", "MSETEX", "2", "a", "1", "b", "2", "EX", "1") == [b"a", b"b"]


# ---------------------------------------------------------------- AGGREGATE COUNT (8.8)


def test_zset_aggregate_count(r):
    r.zadd("s1", {"one": 1, "two": 2})
    r.zadd("s2", {"one": 99, "three": 50})
    r.sadd("plain", "one")
    assert r.execute_command("ZUNIONSTORE", "out", 3, "s1", "s2", "plain", "AGGREGATE", "COUNT") == 3
    assert r.zrange("out", 0, -1, withscores=True) == [(b"three", 1.0), (b"two", 1.0), (b"one", 3.0)]
    assert r.execute_command("ZUNION", 2, "s1", "s2", "WEIGHTS", 2, 5, "AGGREGATE", "count", "WITHSCORES") == [
        b"two", b"2", b"three", b"5", b"one", b"7"]
    assert r.execute_command("ZINTER", 2, "s1", "s2", "AGGREGATE", "COUNT", "WITHSCORES") == [b"one", b"2"]
    assert r.execute_command("ZINTERSTORE", "i", 2, "s1", "s2", "WEIGHTS", 1, 0.5, "AGGREGATE", "COUNT") == 1
    assert r.zscore("i", "one") == 1.5
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("ZUNION", 1, "s1", "AGGREGATE", "AVG")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("ZDIFF", 1, "s1", "AGGREGATE", "COUNT")


def test_zset_aggregate_count_resp3(r3):
    r3.zadd("s1", {"a": 5})
    r3.zadd("s2", {"a": 7, "b": 1})
    assert r3.execute_command("ZUNION", 2, "s1", "s2", "AGGREGATE", "COUNT", "WITHSCORES") == [[b"b", 1.0], [b"a", 2.0]]


# ---------------------------------------------------------------- COMMAND INFO / DOCS


def test_command_info_of_new_commands(r, c):
    r.response_callbacks.pop("COMMAND", None)
    assert c.call("COMMAND", "INFO", "digest").startswith(
        b"*1\r\n*10\r\n$6\r\ndigest\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
        b"*3\r\n+@read\r\n+@string\r\n+@fast\r\n")
    assert c.call("COMMAND", "INFO", "delex").startswith(
        b"*1\r\n*10\r\n$5\r\ndelex\r\n:-2\r\n*2\r\n+write\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
        b"*3\r\n+@write\r\n+@string\r\n+@fast\r\n")
    assert c.call("COMMAND", "INFO", "msetex").startswith(
        b"*1\r\n*10\r\n$6\r\nmsetex\r\n:-4\r\n*3\r\n+write\r\n+denyoom\r\n+movablekeys\r\n:0\r\n:0\r\n:0\r\n"
        b"*3\r\n+@write\r\n+@string\r\n+@slow\r\n")
    msetex = c.call("COMMAND", "INFO", "msetex")
    assert b"$6\r\nkeynum\r\n$4\r\nspec\r\n*6\r\n$9\r\nkeynumidx\r\n:0\r\n$8\r\nfirstkey\r\n:1\r\n$7\r\nkeystep\r\n:2\r\n" in msetex
    assert c.call("COMMAND", "INFO", "delifeq").startswith(b"*1\r\n*10\r\n$7\r\ndelifeq\r\n:3\r\n*1\r\n+write\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@string\r\n+@slow\r\n")
    docs = r.execute_command("COMMAND", "DOCS", "digest", "delex", "msetex")
    names = docs[0::2]
    assert names == [b"digest", b"delex", b"msetex"]
    for d in docs[1::2]:
        d = dict(zip(d[0::2], d[1::2]))
        assert d[b"since"] == b"8.4.0" and d[b"group"] == b"string"
    cats = r.execute_command("COMMAND", "LIST", "FILTERBY", "ACLCAT", "string")
    for name in (b"digest", b"delex", b"msetex", b"delifeq"):
        assert name in cats


# ---------------------------------------------------------------- keyspace events


def test_keyspace_events_of_new_commands(r, events):
    ev_ = events()
    r.set("k", "v")
    r.execute_command("SET", "k", "w", "IFEQ", "nope")   # not set: no event
    r.execute_command("SET", "k", "w", "IFEQ", "v", "EX", "100")
    r.execute_command("DELEX", "k", "IFEQ", "nope")       # not deleted: no event
    r.execute_command("DELEX", "k", "IFEQ", "w")
    r.execute_command("MSETEX", 2, "a", 1, "b", 2, "PX", 10000)
    r.execute_command("MSETEX", 1, "a", 1, "NX")          # not set: no event
    r.execute_command("DELIFEQ", "a", "1")
    r.execute_command("DELEX", "b")
    r.set("x", b"\xff")
    r.execute_command("BITOP", "DIFF", "d", "x", "nosuch")
    assert ev_.take() == (ev("k", "set") + ev("k", "set", "expire") + ev("k", "del")
                          + ev("a", "set", "expire") + ev("b", "set", "expire")
                          + ev("a", "del") + ev("b", "del") + ev("x", "set") + ev("d", "set"))


# ---------------------------------------------------------------- AOF


def test_new_commands_reach_the_aof_as_redis_propagates_them(workdir):  # noqa: F811
    s = start(workdir, "--appendfsync", "always")
    try:
        r = redis.Redis(host=s.host, port=s.port)
        r.set("k", "v")
        assert r.execute_command("SET", "k", "w", "IFEQ", "nope") is None      # no write: nothing
        assert r.execute_command("SET", "k", "w", "IFEQ", "v") is True
        before = int(time.time() * 1000)
        assert r.execute_command("SET", "k", "x", "IFNE", "v", "EX", "100") is True
        assert r.execute_command("DELEX", "k", "IFEQ", "nope") == 0            # nothing
        assert r.execute_command("DELEX", "k", "IFDEQ", r.execute_command("DIGEST", "k")) == 1
        assert r.execute_command("MSETEX", 2, "a", 1, "b", 2, "NX", "EX", 100) == 1
        assert r.execute_command("MSETEX", 1, "a", 1, "NX") == 0               # nothing
        assert r.execute_command("MSETEX", 1, "c", 3, "PXAT", 99999999999999) == 1
        assert r.execute_command("DELIFEQ", "c", "3") == 1
        assert r.execute_command("DELIFEQ", "c", "3") == 0                     # nothing
        assert r.execute_command("DELEX", "b") == 1
        r.set("x", b"\x0f")
        assert r.execute_command("BITOP", "ONE", "d", "x", "nosuch") == 1
        cmds = [c for c in aof_commands(incr_path(workdir)) if c[0].upper() != "SELECT"]
        after = int(time.time() * 1000)
        at_set, at_mset = int(cmds[2][6]), int(cmds[4][8])
        assert before + 100_000 <= at_set <= after + 100_000
        assert before + 100_000 <= at_mset <= after + 100_000
        assert cmds == [
            ["SET", "k", "v"],
            ["SET", "k", "w", "IFEQ", "v"],
            ["SET", "k", "x", "IFNE", "v", "PXAT", str(at_set)],
            ["DEL", "k"],
            ["MSETEX", "2", "a", "1", "b", "2", "NX", "PXAT", str(at_mset)],
            ["MSETEX", "1", "c", "3", "PXAT", "99999999999999"],
            ["DEL", "c"],
            ["DELEX", "b"],
            ["SET", "x", "\x0f"],
            ["BITOP", "ONE", "d", "x", "nosuch"],
        ]
    finally:
        s.stop()


# ---------------------------------------------------------------- LRM eviction (8.6)


def test_lrm_policies_are_accepted(r):
    try:
        for p in ("allkeys-lrm", "volatile-lrm"):
            assert r.config_set("maxmemory-policy", p) is True
            assert r.config_get("maxmemory-policy") == {"maxmemory-policy": p}
    finally:
        r.config_set("maxmemory-policy", "noeviction")


def test_lrm_clock_counts_writes_not_reads(r):
    try:
        r.config_set("maxmemory-policy", "allkeys-lrm")
        r.set("k", "v")
        r.set("other", "v")
        time.sleep(2.1)
        assert r.get("k") == b"v"  # a read leaves the clock
        assert r.object("idletime", "k") >= 2
        r.append("other", "w")     # a write sets it
        assert r.object("idletime", "other") == 0
        r.config_set("maxmemory-policy", "allkeys-lru")
        r.set("k2", "v")
        time.sleep(1.1)
        r.get("k2")
        assert r.object("idletime", "k2") == 0
    finally:
        r.config_set("maxmemory-policy", "noeviction")


def test_lrm_evicts_the_least_recently_written(start_server):
    s = start_server("--maxmemory-policy", "allkeys-lrm", "--maxmemory-samples", "64")
    r = redis.Redis(host=s.host, port=s.port)
    blob = b"x" * 10_000
    for i in range(100):
        r.set(f"old:{i}", blob)
    time.sleep(2.1)
    for i in range(100):
        r.set(f"new:{i}", blob)
        r.get(f"old:{i}")  # reads do not save the old keys
    used = r.info("memory")["used_memory"]
    r.config_set("maxmemory", used - 600_000)
    r.set("trigger", "1")
    old = sum(r.exists(f"old:{i}") for i in range(100))
    new = sum(r.exists(f"new:{i}") for i in range(100))
    assert new == 100 and old < 100, (old, new)
