"""Sorted-set commands end to end: replies, errors, both encodings, RESP2 and RESP3 shapes.

Each data-shaped test runs twice, once per Redis-visible encoding: "listpack" (a few short
members) and "skiplist" (more than zset-max-listpack-entries members), and asserts OBJECT
ENCODING so a test never silently runs on the wrong one.
"""

from __future__ import annotations

import pytest
import redis

from conftest import err, ex

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def fill(r, key, encoding, members):
    """Adds {member: score}; pads with filler members below every score for skiplist."""
    if encoding == "skiplist":
        r.zadd(key, {f"~pad{i:03}": -1000 - i for i in range(130)})
    r.zadd(key, members)
    assert r.object("encoding", key) == encoding.encode()
    return 130 if encoding == "skiplist" else 0


ENC = pytest.mark.parametrize("enc", ["listpack", "skiplist"])


@ENC
def test_zadd_zscore_zcard(r, enc):
    pad = fill(r, "z", enc, {"a": 1, "b": 2.5, "c": -3})
    assert r.zcard("z") == pad + 3
    assert r.zscore("z", "b") == 2.5
    assert ex(r)("ZSCORE", "z", "a") == b"1"
    assert ex(r)("ZSCORE", "z", "b") == b"2.5"
    assert r.zscore("z", "nope") is None
    assert ex(r)("ZADD", "z", "1", "a", "4", "d") == 1
    assert ex(r)("ZADD", "z", "CH", "5", "a", "4", "d", "6", "e") == 2
    assert ex(r)("ZMSCORE", "z", "a", "zz", "e") == [b"5", None, b"6"]
    assert ex(r)("ZMSCORE", "missing", "a") == [None]
    assert r.zcard("missing") == 0


@ENC
def test_zadd_flags(r, enc):
    pad = fill(r, "z", enc, {"a": 5})
    assert ex(r)("ZADD", "z", "NX", "1", "a", "1", "b") == 1
    assert r.zscore("z", "a") == 5
    assert ex(r)("ZADD", "z", "XX", "1", "a", "1", "c") == 0
    assert r.zscore("z", "a") == 1 and r.zscore("z", "c") is None
    assert ex(r)("ZADD", "z", "GT", "CH", "0", "a", "3", "b") == 1
    assert r.zscore("z", "a") == 1 and r.zscore("z", "b") == 3
    assert ex(r)("ZADD", "z", "LT", "CH", "0", "a", "9", "b", "7", "n") == 2
    assert r.zscore("z", "a") == 0 and r.zscore("z", "b") == 3
    assert ex(r)("ZADD", "z", "INCR", "2.5", "a") == b"2.5"
    assert ex(r)("ZADD", "z", "NX", "INCR", "1", "a") is None
    assert ex(r)("ZADD", "z", "XX", "INCR", "1", "zz") is None
    assert ex(r)("ZADD", "z", "GT", "INCR", "-1", "a") is None
    assert ex(r)("ZADD", "nokey", "XX", "1", "a") == 0
    assert r.exists("nokey") == 0
    assert r.zcard("z") == pad + 3


def test_zadd_errors(r):
    assert err(ex(r), "ZADD", "z", "1", "a", "2") == "syntax error"
    assert err(ex(r), "ZADD", "z", "NX", "1") == "syntax error"
    assert err(ex(r), "ZADD", "z", "NX", "XX", "1", "a") == "XX and NX options at the same time are not compatible"
    assert err(ex(r), "ZADD", "z", "GT", "LT", "1", "a") == "GT, LT, and/or NX options at the same time are not compatible"
    assert err(ex(r), "ZADD", "z", "NX", "GT", "1", "a") == "GT, LT, and/or NX options at the same time are not compatible"
    assert err(ex(r), "ZADD", "z", "INCR", "1", "a", "2", "b") == "INCR option supports a single increment-element pair"
    assert err(ex(r), "ZADD", "z", "x", "a") == "value is not a valid float"
    assert err(ex(r), "ZADD", "z", "nan", "a") == "value is not a valid float"
    assert err(ex(r), "ZADD", "z") == "wrong number of arguments for 'zadd' command"
    r.zadd("z", {"a": float("inf")})
    assert err(ex(r), "ZADD", "z", "INCR", "-inf", "a") == "resulting score is not a number (NaN)"
    assert err(ex(r), "ZINCRBY", "z", "-inf", "a") == "resulting score is not a number (NaN)"
    r.set("s", "x")
    assert err(ex(r), "ZADD", "s", "1", "a") == WRONGTYPE
    assert err(ex(r), "ZSCORE", "s", "a") == WRONGTYPE
    assert err(ex(r), "ZCARD", "s") == WRONGTYPE
    assert err(ex(r), "ZRANGE", "s", "0", "-1") == WRONGTYPE


def test_zincrby_and_score_format(r, r3):
    assert ex(r)("ZINCRBY", "z", "1", "a") == b"1"
    assert ex(r)("ZINCRBY", "z", "0.5", "a") == b"1.5"
    assert ex(r)("ZINCRBY", "z", "inf", "b") == b"inf"
    assert ex(r)("ZINCRBY", "z", "-inf", "c") == b"-inf"
    assert err(ex(r), "ZINCRBY", "z", "abc", "a") == "value is not a valid float"
    assert ex(r3)("ZSCORE", "z", "a") == 1.5
    assert ex(r3)("ZSCORE", "z", "b") == float("inf")


@ENC
def test_zrem(r, enc):
    pad = fill(r, "z", enc, {"a": 1, "b": 2, "c": 3})
    assert r.zrem("z", "a", "x", "b") == 2
    assert r.zcard("z") == pad + 1
    assert r.zrem("missing", "a") == 0
    r.delete("z")
    r.zadd("z", {"a": 1})
    assert r.zrem("z", "a") == 1
    assert r.exists("z") == 0


@ENC
def test_zrange_by_rank(r, r3, enc):
    pad = fill(r, "z", enc, {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zrange("z", pad, pad + 1) == [b"a", b"b"]
    assert r.zrange("z", -2, -1) == [b"c", b"d"]
    assert r.zrange("z", 0, 1, desc=True) == [b"d", b"c"]
    assert ex(r)("ZRANGE", "z", "-1", "-1", "WITHSCORES") == [b"d", b"4"]
    assert ex(r)("ZREVRANGE", "z", "0", "1", "WITHSCORES") == [b"d", b"4", b"c", b"3"]
    assert ex(r)("ZRANGE", "z", "0", "0", "REV") == [b"d"]
    assert r.zrange("z", 5000, 6000) == []
    assert r.zrange("z", 3, 1) == []
    assert r.zrange("missing", 0, -1) == []
    assert ex(r3)("ZRANGE", "z", "-1", "-1", "WITHSCORES") == [[b"d", 4.0]]
    assert err(ex(r), "ZRANGE", "z", "a", "1") == "value is not an integer or out of range"
    assert err(ex(r), "ZRANGE", "z", "0", "1", "LIMIT", "0", "1") == "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    assert err(ex(r), "ZRANGE", "z", "0", "1", "FOO") == "syntax error"


@ENC
def test_zrange_by_score(r, r3, enc):
    fill(r, "z", enc, {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert ex(r)("ZRANGEBYSCORE", "z", "2", "4") == [b"b", b"c", b"d"]
    assert ex(r)("ZRANGEBYSCORE", "z", "(2", "(4") == [b"c"]
    assert ex(r)("ZRANGEBYSCORE", "z", "4", "+inf", "WITHSCORES") == [b"d", b"4", b"e", b"5"]
    assert ex(r)("ZRANGEBYSCORE", "z", "0", "10", "LIMIT", "1", "2") == [b"b", b"c"]
    assert ex(r)("ZRANGEBYSCORE", "z", "0", "10", "LIMIT", "-1", "2") == []
    assert ex(r)("ZRANGEBYSCORE", "z", "0", "10", "LIMIT", "3", "-1") == [b"d", b"e"]
    assert ex(r)("ZREVRANGEBYSCORE", "z", "4", "2") == [b"d", b"c", b"b"]
    assert ex(r)("ZREVRANGEBYSCORE", "z", "+inf", "0", "LIMIT", "1", "2") == [b"d", b"c"]
    assert ex(r)("ZRANGE", "z", "(5", "3", "BYSCORE", "REV") == [b"d", b"c"]
    assert ex(r)("ZRANGE", "z", "5", "0", "BYSCORE") == []
    assert ex(r3)("ZRANGEBYSCORE", "z", "5", "5", "WITHSCORES") == [[b"e", 5.0]]
    assert err(ex(r), "ZRANGEBYSCORE", "z", "x", "1") == "min or max is not a float"
    assert err(ex(r), "ZRANGEBYSCORE", "z", "1", "(x") == "min or max is not a float"
    assert err(ex(r), "ZRANGEBYSCORE", "z", "1", "2", "REV") == "syntax error"
    assert r.zcount("z", "2", "(4") == 2
    assert r.zcount("z", "-inf", "+inf") == r.zcard("z")
    assert err(ex(r), "ZCOUNT", "z", "a", "1") == "min or max is not a float"


@ENC
def test_zrange_by_lex(r, enc):
    members = {m: 0 for m in "abcdefg"}
    if enc == "skiplist":
        members.update({f"h{i:03}": 0 for i in range(130)})
    r.zadd("z", members)
    assert r.object("encoding", "z") == enc.encode()
    assert ex(r)("ZRANGEBYLEX", "z", "[b", "(e") == [b"b", b"c", b"d"]
    assert ex(r)("ZRANGEBYLEX", "z", "-", "[b") == [b"a", b"b"]
    assert ex(r)("ZRANGEBYLEX", "z", "(f", "(h") == [b"g"]
    assert ex(r)("ZRANGEBYLEX", "z", "-", "+", "LIMIT", "2", "2") == [b"c", b"d"]
    assert ex(r)("ZREVRANGEBYLEX", "z", "[c", "-") == [b"c", b"b", b"a"]
    assert ex(r)("ZRANGE", "z", "(c", "[a", "BYLEX", "REV") == [b"b", b"a"]
    assert ex(r)("ZRANGEBYLEX", "z", "+", "-") == []
    assert r.zlexcount("z", "[b", "[d") == 3
    assert err(ex(r), "ZRANGEBYLEX", "z", "b", "+") == "min or max not valid string range item"
    assert err(ex(r), "ZLEXCOUNT", "z", "-", "x") == "min or max not valid string range item"
    assert err(ex(r), "ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES") == "syntax error, WITHSCORES not supported in combination with BYLEX"
    assert r.zremrangebylex("z", "[a", "(c") == 2
    assert r.zrangebylex("z", "-", "(e") == [b"c", b"d"]


@ENC
def test_zrank(r, r3, enc):
    pad = fill(r, "z", enc, {"a": 1, "b": 2, "c": 3})
    assert r.zrank("z", "a") == pad
    assert r.zrevrank("z", "a") == 2
    assert r.zrank("z", "x") is None
    assert r.zrank("missing", "x") is None


def test_zrank_withscore(r, r3):
    r.zadd("z", {"a": 1, "b": 2.5})
    if r.info("server")["redis_version"] < "7.2":
        pytest.skip("WITHSCORE needs Redis 7.2")
    assert ex(r)("ZRANK", "z", "b", "WITHSCORE") == [1, b"2.5"]
    assert ex(r)("ZREVRANK", "z", "b", "WITHSCORE") == [0, b"2.5"]
    assert ex(r)("ZRANK", "z", "x", "WITHSCORE") is None
    assert ex(r3)("ZRANK", "z", "b", "WITHSCORE") == [1, 2.5]


@ENC
def test_zremrange(r, enc):
    pad = fill(r, "z", enc, {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zremrangebyscore("z", "(1", "3") == 2
    assert r.zrange("z", pad, -1) == [b"a", b"d"]
    assert r.zremrangebyrank("z", -1, -1) == 1
    assert r.zremrangebyrank("z", 5000, 6000) == 0
    assert r.zremrangebyrank("missing", 0, -1) == 0
    assert r.zremrangebyrank("z", 0, -1) == pad + 1
    assert r.exists("z") == 0
    assert err(ex(r), "ZREMRANGEBYRANK", "z", "x", "1") == "value is not an integer or out of range"
    assert err(ex(r), "ZREMRANGEBYSCORE", "z", "x", "1") == "min or max is not a float"


@ENC
def test_zpop(r, r3, enc):
    pad = fill(r, "z", enc, {"a": 1, "b": 2, "c": 3})
    assert ex(r)("ZPOPMAX", "z") == [b"c", b"3"]
    assert ex(r)("ZPOPMAX", "z", "2") == [b"b", b"2", b"a", b"1"]
    assert ex(r)("ZPOPMIN", "z", "0") == []
    assert ex(r)("ZPOPMIN", "missing") == []
    r.zadd("y", {"a": 1, "b": 2})
    assert ex(r3)("ZPOPMIN", "y", "1") == [[b"a", 1.0]]
    assert ex(r3)("ZPOPMIN", "y") == [b"b", 2.0]
    assert r.exists("y") == 0
    assert err(ex(r), "ZPOPMIN", "z", "-1") == "value is out of range, must be positive"
    assert err(ex(r), "ZPOPMIN", "z", "1", "2") == "syntax error"
    assert r.zcard("z") == pad


def test_zmpop(r, r3):
    r.zadd("b", {"x": 1, "y": 2, "z": 3})
    assert ex(r)("ZMPOP", "2", "a", "b", "MIN") == [b"b", [[b"x", b"1"]]]
    assert ex(r)("ZMPOP", "1", "b", "MAX", "COUNT", "5") == [b"b", [[b"z", b"3"], [b"y", b"2"]]]
    assert ex(r)("ZMPOP", "1", "b", "MAX") is None
    r.zadd("c", {"q": 1})
    assert ex(r3)("ZMPOP", "1", "c", "MIN") == [b"c", [[b"q", 1.0]]]
    assert err(ex(r), "ZMPOP", "0", "a", "MIN") == "numkeys should be greater than 0"
    assert err(ex(r), "ZMPOP", "2", "a", "MIN") == "syntax error"
    assert err(ex(r), "ZMPOP", "1", "a", "FOO") == "syntax error"
    assert err(ex(r), "ZMPOP", "1", "a", "MIN", "COUNT", "0") == "count should be greater than 0"
    assert ex(r)("COMMAND", "GETKEYS", "ZMPOP", "2", "a", "b", "MIN") == [b"a", b"b"]


@ENC
def test_zrandmember(r, r3, enc):
    pad = fill(r, "z", enc, {"a": 1, "b": 2, "c": 3})
    n = pad + 3
    assert r.zrandmember("z") in set(r.zrange("z", 0, -1))
    assert len(r.zrandmember("z", 2)) == 2
    assert len(set(r.zrandmember("z", n + 10))) == n
    assert len(r.zrandmember("z", -(n + 10))) == n + 10
    got = ex(r)("ZRANDMEMBER", "z", "-3", "WITHSCORES")
    assert len(got) == 6
    assert ex(r3)("ZRANDMEMBER", "z", "1", "WITHSCORES")[0][1] in {1.0, 2.0, 3.0} | {float(-1000 - i) for i in range(130)}
    assert r.zrandmember("missing") is None
    assert r.zrandmember("missing", 5) == []
    assert r.zrandmember("z", 0) == []
    assert err(ex(r), "ZRANDMEMBER", "z", "1", "FOO") == "syntax error"
    assert err(ex(r), "ZRANDMEMBER", "z", "x") == "value is not an integer or out of range"


@ENC
def test_zscan(r, enc):
    pad = fill(r, "z", enc, {"a": 1, "b": 2.5})
    seen = {}
    cursor = 0
    while True:
        cursor, items = ex(r)("ZSCAN", "z", cursor, "COUNT", "7")
        cursor = int(cursor)
        for i in range(0, len(items), 2):
            seen[items[i]] = items[i + 1]
        if cursor == 0:
            break
    assert len(seen) == pad + 2
    assert seen[b"b"] == b"2.5"
    cursor, items = ex(r)("ZSCAN", "z", 0, "MATCH", "a", "COUNT", "1000")
    assert items == [b"a", b"1"]
    assert err(ex(r), "ZSCAN", "z", "x") == "invalid cursor"
    assert ex(r)("ZSCAN", "missing", 0) == [b"0", []]


def test_set_operations(r, r3):
    r.zadd("a", {"x": 1, "y": 2, "z": 3})
    r.zadd("b", {"y": 10, "z": 20, "w": 30})
    assert ex(r)("ZUNION", "2", "a", "b", "WITHSCORES") == [b"x", b"1", b"y", b"12", b"z", b"23", b"w", b"30"]
    assert ex(r)("ZINTER", "2", "a", "b", "WEIGHTS", "2", "1", "AGGREGATE", "MAX") == [b"y", b"z"]
    assert ex(r)("ZINTER", "2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES") == [b"y", b"2", b"z", b"3"]
    assert ex(r)("ZDIFF", "2", "a", "b", "WITHSCORES") == [b"x", b"1"]
    assert ex(r)("ZUNION", "2", "a", "missing") == [b"x", b"y", b"z"]
    assert ex(r)("ZINTERCARD", "2", "a", "b") == 2
    assert ex(r)("ZINTERCARD", "2", "a", "b", "LIMIT", "1") == 1
    assert ex(r)("ZUNIONSTORE", "d", "2", "a", "b") == 4
    assert r.zrange("d", 0, -1, withscores=True) == [(b"x", 1), (b"y", 12), (b"z", 23), (b"w", 30)]
    assert r.object("encoding", "d") == b"listpack"
    assert ex(r)("ZINTERSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "0") == 2
    assert r.zrange("d", 0, -1, withscores=True) == [(b"y", 2), (b"z", 3)]
    assert ex(r)("ZDIFFSTORE", "d", "2", "a", "a") == 0
    assert r.exists("d") == 0
    assert ex(r3)("ZDIFF", "2", "a", "b", "WITHSCORES") == [[b"x", 1.0]]
    assert err(ex(r), "ZUNION", "0", "a") == "at least 1 input key is needed for 'zunion' command"
    assert err(ex(r), "ZUNIONSTORE", "d", "0", "a") == "at least 1 input key is needed for 'zunionstore' command"
    assert err(ex(r), "ZUNION", "3", "a", "b") == "syntax error"
    assert err(ex(r), "ZUNION", "2", "a", "b", "WEIGHTS", "1", "x") == "weight value is not a float"
    assert err(ex(r), "ZUNION", "2", "a", "b", "AGGREGATE", "avg") == "syntax error"
    assert err(ex(r), "ZDIFF", "2", "a", "b", "WEIGHTS", "1", "1") == "syntax error"
    assert err(ex(r), "ZINTERCARD", "2", "a", "b", "LIMIT", "-1") == "LIMIT can't be negative"
    r.set("s", "x")
    assert err(ex(r), "ZUNION", "2", "a", "s") == WRONGTYPE
    assert ex(r)("COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2") == [b"d", b"a", b"b"]
    assert ex(r)("COMMAND", "GETKEYS", "ZINTER", "2", "a", "b") == [b"a", b"b"]


def test_union_inf_weights(r):
    r.zadd("a", {"x": float("inf")})
    r.zadd("b", {"x": float("-inf")})
    assert ex(r)("ZUNION", "2", "a", "b", "WITHSCORES") == [b"x", b"0"]
    assert ex(r)("ZUNION", "1", "a", "WEIGHTS", "0", "WITHSCORES") == [b"x", b"0"]


def test_zrangestore(r):
    r.zadd("src", {f"m{i:03}": i for i in range(200)})
    assert r.object("encoding", "src") == b"skiplist"
    assert ex(r)("ZRANGESTORE", "dst", "src", "0", "9") == 10
    assert r.object("encoding", "dst") == b"listpack"
    assert r.zrange("dst", 0, 0) == [b"m000"]
    assert ex(r)("ZRANGESTORE", "dst", "src", "(5", "7", "BYSCORE", "REV", "LIMIT", "0", "1") == 0
    assert ex(r)("ZRANGESTORE", "dst", "src", "7", "(5", "BYSCORE", "REV", "LIMIT", "0", "1") == 1
    assert r.zrange("dst", 0, -1) == [b"m007"]
    assert ex(r)("ZRANGESTORE", "dst", "src", "0", "-1") == 200
    assert r.object("encoding", "dst") == b"skiplist"
    assert ex(r)("ZRANGESTORE", "dst", "missing", "0", "-1") == 0
    assert r.exists("dst") == 0
    assert err(ex(r), "ZRANGESTORE", "dst", "src", "0", "1", "WITHSCORES") == "syntax error"


def test_encodings_follow_config(r):
    r.zadd("z", {f"m{i}": i for i in range(128)})
    assert r.object("encoding", "z") == b"listpack"
    r.zadd("z", {"one-more": 1000})
    assert r.object("encoding", "z") == b"skiplist"
    r.zadd("long", {"x" * 65: 1})
    assert r.object("encoding", "long") == b"skiplist"
    r.zadd("big", {f"m{i}": i for i in range(129)})
    assert r.object("encoding", "big") == b"skiplist"
    try:
        r.config_set("zset-max-listpack-entries", 4)
        r.zadd("small", {f"m{i}": i for i in range(5)})
        assert r.object("encoding", "small") == b"skiplist"
    finally:
        r.config_set("zset-max-listpack-entries", 128)


def test_type_and_keyspace(r):
    r.zadd("z", {"a": 1})
    assert r.type("z") == b"zset"
    assert ex(r)("SCAN", "0", "TYPE", "zset") == [b"0", [b"z"]]
    assert r.copy("z", "z2")
    assert r.zrange("z2", 0, -1, withscores=True) == [(b"a", 1.0)]
    assert r.memory_usage("z") > 0
    assert err(r.get, "z") == WRONGTYPE


def test_set_operations_take_plain_sets_with_score_one(r):
    r.sadd("s", "a", "b", "c")
    r.zadd("z", {"a": 2, "d": 5})
    assert r.zunionstore("u", {"s": 3, "z": 1}) == 4
    assert r.zrange("u", 0, -1, withscores=True) == [(b"b", 3.0), (b"c", 3.0), (b"a", 5.0), (b"d", 5.0)]
    assert r.zinter(["s", "z"], withscores=True) == [(b"a", 3.0)]
    assert r.zdiff(["s", "z"]) == [b"b", b"c"]
    assert r.zintercard(2, ["s", "z"]) == 1
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.zunionstore("u", ["s", "str"])


# ---- found by scripts/difftest.py: Redis's order of checks and its error texts ----


def test_setop_key_types_checked_before_options(c):
    """ZUNION/ZINTER/ZDIFF(STORE) and ZINTERCARD look their keys up before parsing the
    options, so a wrong-type key beats a bad WEIGHTS, AGGREGATE or LIMIT."""
    wrongtype = b"-" + WRONGTYPE.encode() + b"\r\n"
    assert c.call("RPUSH", "l", "a") == b":1\r\n"
    assert c.call("ZUNION", "2", "z", "l", "WEIGHTS", "0", "AGGREGATE", "MIN") == wrongtype
    assert c.call("ZUNION", "2", "z", "l", "AGGREGATE", "AVG") == wrongtype
    assert c.call("ZINTER", "2", "l", "z", "WEIGHTS", "nan", "1") == wrongtype
    assert c.call("ZUNIONSTORE", "d", "2", "z", "l", "AGGREGATE", "AVG") == wrongtype
    assert c.call("ZDIFF", "1", "l", "WITHSCORES", "WEIGHTS", "1") == wrongtype
    assert c.call("ZINTERCARD", "2", "z", "l", "LIMIT", "-1") == wrongtype
    # With no wrong-type key the option errors stay as they were.
    assert c.call("ZUNION", "2", "z", "y", "WEIGHTS", "0", "AGGREGATE", "MIN") == (
        b"-ERR weight value is not a float\r\n")
    assert c.call("ZINTERCARD", "1", "z", "LIMIT", "-1") == b"-ERR LIMIT can't be negative\r\n"
    # numkeys is still checked first.
    assert c.call("ZUNION", "3", "l", "z") == b"-ERR syntax error\r\n"


def test_zrange_option_repeats_and_limit_minus_one(c):
    c.call("ZADD", "z", "1", "a", "2", "b", "3", "c")
    # A second REV is a syntax error, like a second BYSCORE, before any range parsing.
    assert c.call("ZRANGE", "z", "0", "-1", "REV", "REV") == b"-ERR syntax error\r\n"
    assert c.call("ZRANGE", "z", "1", "0", "BYSCORE", "REV", "REV") == b"-ERR syntax error\r\n"
    assert c.call("ZRANGE", "z", "+", "[b", "BYLEX", "WITHSCORES", "REV", "REV") == (
        b"-ERR syntax error\r\n")
    assert c.call("ZRANGESTORE", "d", "z", "(-inf", "abc", "REV", "BYSCORE", "REV") == (
        b"-ERR syntax error\r\n")
    # A LIMIT count of -1 means "no LIMIT" to Redis, so a rank range takes it.
    assert c.call("ZRANGE", "z", "0", "-1", "LIMIT", "10", "-1") == (
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n")
    assert c.call("ZRANGESTORE", "d", "z", "0", "0", "LIMIT", "100", "-1", "REV") == b":1\r\n"
    assert c.call("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1") == (
        b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n")
    assert c.call("ZRANGE", "z", "10", "", "REV", "LIMIT", "-2", "-1") == (
        b"-ERR value is not an integer or out of range\r\n")


def test_zpop_count_not_an_integer(c):
    """ZPOPMIN/ZPOPMAX parse the count as a positive long: a non-integer gets the range
    text, not the integer one."""
    positive = b"-ERR value is out of range, must be positive\r\n"
    for count in ("", "0x10", "+1", "abc", "-1"):
        assert c.call("ZPOPMIN", "z", count) == positive
        assert c.call("ZPOPMAX", "z", count) == positive


def test_zrandmember_count_range_text(c):
    assert c.call("ZRANDMEMBER", "z", "-9223372036854775808") == (
        b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n")


def test_score_bounds_stop_at_nul(c):
    """Found by scripts/difftest.py: a score bound is read as a C string, so bytes from a
    NUL on do not count."""
    c.call("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert c.call("ZRANGEBYSCORE", "z", "1\x00abc", "2") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert c.call("ZCOUNT", "z", "(1\x00", "+inf") == b":2\r\n"
    assert c.call("ZCOUNT", "z", "\x001", "3") == b":3\r\n"
    assert c.call("ZCOUNT", "z", " 1", "3") == b"-ERR min or max is not a float\r\n"


@pytest.mark.parametrize("score,text", [
    ("123456789012345678", b"123456789012345680"),  # integral: printed as an integer
    ("1e17", b"100000000000000000"),
    ("5e22", b"49999999999999996000000"),  # Grisu2's digits, not the shortest
    ("6.500000000000001e-5", b"6.500000000000001e-5"),  # no zero padding in the exponent
    ("0.00001", b"0.00001"),
    ("1.5e21", b"1.5e+21"),
    ("-1.5e-300", b"-1.5e-300"),
    ("0.1", b"0.1"),
])
def test_score_text_as_redis_prints_doubles(c, raw, score, text):
    """Found by scripts/difftest.py: Redis prints a double reply with its d2string
    (integers as integers, else Grisu2 digits in its fpconv layout), in RESP2 and RESP3."""
    assert c.call("ZADD", "z", score, "m") == b":1\r\n"
    assert c.call("ZSCORE", "z", "m") == b"$%d\r\n%s\r\n" % (len(text), text)
    c3 = raw()
    assert c3.call("HELLO", "3").startswith(b"%")
    assert c3.call("ZSCORE", "z", "m") == b",%s\r\n" % text


@ENC
def test_zscan_score_text_by_encoding(r, c, enc):
    """Redis's ZSCAN gives a listpack's scores as the listpack holds them (the double
    reply text) and a skiplist's with %.17g."""
    pad = fill(r, "z", enc, {"a": 0.1, "b": 123456789012345678, "c": 1e-5, "d": 5e22})
    reply = c.call("ZSCAN", "z", "0", "COUNT", "1000", "MATCH", "[abcd]")
    if enc == "listpack":
        texts = [b"0.00001", b"0.1", b"123456789012345680", b"49999999999999996000000"]
    else:
        texts = [b"1.0000000000000001e-05", b"0.10000000000000001", b"1.2345678901234568e+17",
                 b"4.9999999999999996e+22"]
    for t in texts:
        assert b"\r\n$%d\r\n%s\r\n" % (len(t), t) in reply
    assert pad in (0, 130)
