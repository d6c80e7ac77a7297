"""SORT and SORT_RO end to end: numeric and ALPHA order, BY (keys, hash fields, constant),
GET (#, keys, fields, missing), LIMIT, STORE (list result, empty result deletes), the
source types (list, set, sorted set), errors and key extraction.

Expected values are Redis 7.4's replies for the same commands.
"""

from __future__ import annotations

import pytest
import redis

from conftest import err, ex

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def b(*items):
    return [i if i is None else str(i).encode() for i in items]


@pytest.fixture
def data(r):
    """A list of ids 3 1 2 10, weights w_<id>, hashes h_<id> with field f, names n_<id>."""
    r.rpush("ids", 3, 1, 2, 10)
    for i, w in {3: 30, 1: 20, 2: 10, 10: 40}.items():
        r.set(f"w_{i}", w)
        r.hset(f"h_{i}", "f", -w)
        r.set(f"n_{i}", f"name{i}")
    return ex(r)


def test_numeric_alpha_desc(r):
    x = ex(r)
    r.rpush("l", 3, 10, 1, "2.5", "-inf")
    assert x("SORT", "l") == b("-inf", 1, "2.5", 3, 10)
    assert x("SORT", "l", "DESC") == b(10, 3, "2.5", 1, "-inf")
    assert x("SORT", "l", "ALPHA") == b("-inf", 1, 10, "2.5", 3)
    assert x("SORT_RO", "l", "ALPHA", "DESC") == b(3, "2.5", 10, 1, "-inf")
    assert x("SORT", "missing") == []


def test_sources(r):
    x = ex(r)
    r.sadd("s", 5, 2, 9)
    assert x("SORT", "s") == b(2, 5, 9)
    r.zadd("z", {"b": 1, "a": 2, "c": 3})
    assert x("SORT", "z", "ALPHA") == b("a", "b", "c")
    # BY a constant keeps the sorted set's order (by score), DESC reverses it.
    assert x("SORT", "z", "BY", "nosort") == b("b", "a", "c")
    assert x("SORT", "z", "BY", "nosort", "DESC") == b("c", "a", "b")
    assert x("SORT", "z", "BY", "nosort", "LIMIT", 1, 5) == b("a", "c")
    assert x("SORT", "z", "BY", "nosort", "DESC", "LIMIT", 0, 2) == b("c", "a")
    r.rpush("l", 5, 3, 4, 1, 2)
    assert x("SORT", "l", "BY", "nosort") == b(5, 3, 4, 1, 2)
    assert x("SORT", "l", "BY", "nosort", "LIMIT", 0, 3) == b(5, 3, 4)
    assert x("SORT", "l", "BY", "nosort", "DESC") == b(2, 1, 4, 3, 5)
    # A set sorted BY a constant into STORE is sorted ALPHA, for determinism.
    r.sadd("words", "pear", "apple", "fig")
    assert x("SORT", "words", "BY", "nosort", "STORE", "dst") == 3
    assert x("LRANGE", "dst", 0, -1) == b("apple", "fig", "pear")


def test_by_and_get(data):
    x = data
    assert x("SORT", "ids", "BY", "w_*") == b(2, 1, 3, 10)
    assert x("SORT", "ids", "BY", "h_*->f") == b(10, 3, 1, 2)
    assert x("SORT", "ids", "BY", "w_*", "GET", "#", "GET", "n_*", "GET", "h_*->f") == b(
        2, "name2", -10, 1, "name1", -20, 3, "name3", -30, 10, "name10", -40
    )
    assert x("SORT", "ids", "BY", "w_*", "LIMIT", 1, 2, "GET", "n_*") == b("name1", "name3")
    # Missing lookups: weight 0 (ties by element), GET gives nil; no '*' gives nil.
    x("DEL", "w_10", "n_3")
    assert x("SORT", "ids", "BY", "w_*") == b(10, 2, 1, 3)
    assert x("SORT", "ids", "GET", "n_*", "GET", "const") == b("name1", None, "name2", None, None, None, "name10", None)
    # A pattern ending in "->" is a plain key name, not a hash field.
    x("SET", "h_1->", "plain")
    assert x("SORT", "ids", "GET", "h_*->", "LIMIT", 0, 1) == b("plain")
    # BY with ALPHA: missing weights sort first.
    x("SET", "w_3", "b")
    x("SET", "w_1", "a")
    assert x("SORT", "ids", "BY", "w_*", "ALPHA") == b(10, 2, 1, 3)
    # BY on a key of the wrong type counts as missing.
    x("DEL", "w_2")
    x("RPUSH", "w_2", "x")
    assert x("SORT", "ids", "BY", "w_*", "ALPHA", "GET", "w_*") == [None, None, b"a", b"b"]


def test_limit_edges(r):
    x = ex(r)
    r.rpush("l", 4, 2, 3, 1)
    assert x("SORT", "l", "LIMIT", 0, 0) == []
    assert x("SORT", "l", "LIMIT", -5, 2) == b(1, 2)
    assert x("SORT", "l", "LIMIT", 2, -1) == b(3, 4)
    assert x("SORT", "l", "LIMIT", 3, 100) == b(4)
    assert x("SORT", "l", "LIMIT", 4, 1) == []
    assert x("SORT", "l", "LIMIT", 9223372036854775807, 9223372036854775807) == []
    assert x("SORT", "l", "LIMIT", 1, 2, "DESC") == b(3, 2)


def test_store(r):
    x = ex(r)
    r.rpush("l", 3, 1, 2)
    assert x("SORT", "l", "STORE", "dst") == 3
    assert x("TYPE", "dst") == b"list"
    assert x("LRANGE", "dst", 0, -1) == b(1, 2, 3)
    assert x("SORT", "l", "GET", "#", "GET", "nokey_*", "STORE", "dst") == 6
    assert x("LRANGE", "dst", 0, -1) == b(1, "", 2, "", 3, "")
    # An empty result deletes the destination and stores nothing.
    assert x("SORT", "missing", "STORE", "dst") == 0
    assert x("EXISTS", "dst") == 0
    assert x("SORT", "l", "LIMIT", 5, 1, "STORE", "dst2") == 0
    assert x("EXISTS", "dst2") == 0
    # STORE replaces a key of another type and drops its TTL.
    x("SET", "dst", "v", "EX", 100)
    assert x("SORT", "l", "STORE", "dst") == 3
    assert x("TTL", "dst") == -1


def test_errors(r):
    x = ex(r)
    r.rpush("l", 1, "x", 2)
    assert err(x, "SORT", "l") == "One or more scores can't be converted into double"
    assert x("SORT", "l", "ALPHA") == b(1, 2, "x")
    r.rpush("l2", 1, 2)
    r.set("w_1", "1.5abc")
    assert err(x, "SORT", "l2", "BY", "w_*") == "One or more scores can't be converted into double"
    r.set("w_1", "nan")
    assert err(x, "SORT", "l2", "BY", "w_*") == "One or more scores can't be converted into double"
    assert err(x, "SORT", "l2", "LIMIT", 1) == "syntax error"
    assert err(x, "SORT", "l2", "LIMIT", "a", 1) == "value is not an integer or out of range"
    assert err(x, "SORT", "l2", "BOGUS") == "syntax error"
    assert err(x, "SORT", "l2", "GET") == "syntax error"
    assert err(x, "SORT_RO", "l2", "STORE", "d") == "syntax error"
    assert err(x, "SORT") == "wrong number of arguments for 'sort' command"
    r.set("str", "v")
    assert err(x, "SORT", "str") == WRONGTYPE
    r.hset("h", "a", 1)
    assert err(x, "SORT_RO", "h") == WRONGTYPE
    # Option errors come before the type check.
    assert err(x, "SORT", "str", "BOGUS") == "syntax error"


def test_resp3_shape(raw, r):
    r.rpush("l", 2, 1)
    c = raw()
    assert c.call("HELLO", "3").startswith(b"%")
    assert c.call("SORT", "l", "GET", "#", "GET", "nope_*") == b"*4\r\n$1\r\n1\r\n_\r\n$1\r\n2\r\n_\r\n"
    c2 = raw()
    assert c2.call("SORT", "l", "GET", "nope_*") == b"*2\r\n$-1\r\n$-1\r\n"


def test_key_extraction_and_flags(r):
    x = ex(r)
    assert x("COMMAND", "GETKEYS", "SORT", "abc", "STORE", "def") == [b"abc", b"def"]
    assert x("COMMAND", "GETKEYS", "SORT", "abc", "STORE", "a", "STORE", "b") == [b"abc", b"b"]
    assert x("COMMAND", "GETKEYS", "SORT", "abc", "GET", "store", "BY", "x") == [b"abc"]
    assert x("COMMAND", "GETKEYS", "SORT_RO", "abc", "STORE", "def") == [b"abc"]
    assert x("COMMAND", "GETKEYSANDFLAGS", "SORT", "k1", "STORE", "k2") == [
        [b"k1", [b"RO", b"access"]],
        [b"k2", [b"OW", b"update"]],
    ]
    sort_flags = x("COMMAND", "INFO", "sort")[0][2]
    assert b"write" in sort_flags and b"movablekeys" in sort_flags
    ro_flags = x("COMMAND", "INFO", "sort_ro")[0][2]
    assert b"readonly" in ro_flags and b"movablekeys" in ro_flags


def test_constant_by_sorts_a_set_for_scripts(r):
    # A set has no order of its own: under a script (as with STORE) SORT BY a
    # constant sorts it alphabetically, so replicas and replays agree.
    r.sadd("myset", *"a b c d e f g h i l m n o p q r s t u v z aa aaa azz".split())
    got = r.eval("return redis.call('sort', KEYS[1], 'by', '_')", 1, "myset")
    assert got == sorted(m.encode() for m in "a b c d e f g h i l m n o p q r s t u v z aa aaa azz".split())
    r.sadd("s3", "a", "b", "c")
    got = r.eval("return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', '_:*')", 1, "s3")
    assert got == [b"a", None, b"b", None, b"c", None]
    # Lists keep their own order.
    r.rpush("l", "b", "a", "c")
    assert r.eval("return redis.call('sort', KEYS[1], 'by', '_')", 1, "l") == [b"b", b"a", b"c"]


def test_numeric_weights_as_redis_reads_them(c):
    """Found by scripts/difftest.py: Redis reads SORT's numbers with fast_float over a C
    string, so a value counts up to its first NUL byte (nothing before it is 0),
    leading spaces are refused and an overflowing exponent is infinity."""
    c.call("RPUSH", "l", "3", "\x00x", "1\x00z", "")
    assert c.call("SORT", "l") == b"*4\r\n$0\r\n\r\n$2\r\n\x00x\r\n$3\r\n1\x00z\r\n$1\r\n3\r\n"
    c.call("RPUSH", "big", "1e400", "-1e400", "5")
    assert c.call("SORT", "big") == b"*3\r\n$6\r\n-1e400\r\n$1\r\n5\r\n$5\r\n1e400\r\n"
    c.call("RPUSH", "sp", " 1")
    assert c.call("SORT", "sp") == b"-ERR One or more scores can't be converted into double\r\n"
    # The same for what BY names.
    c.call("RPUSH", "ids", "a", "b")
    c.call("SET", "w_a", "2\x00junk")
    c.call("SET", "w_b", "\x00")
    assert c.call("SORT", "ids", "BY", "w_*") == b"*2\r\n$1\r\nb\r\n$1\r\na\r\n"
    c.call("SET", "w_b", "\t1")
    assert c.call("SORT", "ids", "BY", "w_*") == (
        b"-ERR One or more scores can't be converted into double\r\n")


@pytest.mark.parametrize("cmd", ["SORT", "SORT_RO"])
def test_sorting_a_sorted_set_makes_it_a_skiplist(r, c, cmd):
    """Found by scripts/difftest.py: Redis converts a sorted set it sorts to its skiplist
    encoding for good, which shows in OBJECT ENCODING and in ZSCAN's score text."""
    r.zadd("z", {"-3": 0.1})
    assert r.object("encoding", "z") == b"listpack"
    assert c.call(cmd, "z", "ALPHA") == b"*1\r\n$2\r\n-3\r\n"
    assert r.object("encoding", "z") == b"skiplist"
    assert c.call("ZSCAN", "z", "0") == b"*2\r\n$1\r\n0\r\n*2\r\n$2\r\n-3\r\n$19\r\n0.10000000000000001\r\n"
