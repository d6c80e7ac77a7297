"""SET commands end to end: every command over the three Redis encodings
(intset / listpack / hashtable as OBJECT ENCODING names them), RESP2 and
RESP3 reply shapes (RESP3 sets are `~`), Redis's exact error texts, and the
keyspace commands that move sets around (COPY, RENAME, MOVE, SCAN TYPE,
MEMORY USAGE, TYPE)."""

import pytest
import redis

WRONGTYPE = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
SYNTAX = b"-ERR syntax error\r\n"
NOT_INT = b"-ERR value is not an integer or out of range\r\n"


@pytest.fixture
def c(raw):
    """A raw connection: exact reply bytes, errors included."""
    return raw()


@pytest.fixture
def thresholds(r):
    """Restores the set-max-* parameters after a test that changes them."""
    names = ("set-max-intset-entries", "set-max-listpack-entries", "set-max-listpack-value")
    saved = {k: r.config_get(k)[k] for k in names}
    yield
    for k, v in saved.items():
        r.config_set(k, v)


def enc(r, key):
    return r.object("encoding", key)


def members(kind, n):
    """`n` members that keep a set in encoding `kind` (hashtable: past the
    listpack entry limit of 128)."""
    if kind == "intset":
        return [str(i) for i in range(n)]
    return [f"m{i}" for i in range(n)]


def make(r, key, kind, n=None):
    n = n if n is not None else (200 if kind == "hashtable" else 5)
    ms = members(kind, n)
    assert r.sadd(key, *ms) == n
    assert enc(r, key) == kind.encode()
    return {m.encode() for m in ms}


KINDS = ["intset", "listpack", "hashtable"]


# ---------------------------------------------------------------- basics

@pytest.mark.parametrize("kind", KINDS)
def test_sadd_srem_scard_members(r, kind):
    ms = make(r, "s", kind)
    assert r.type("s") == b"set"
    assert r.scard("s") == len(ms)
    assert set(r.smembers("s")) == ms
    first = sorted(ms)[0]
    assert r.sadd("s", first) == 0
    assert r.sismember("s", first) is True or r.sismember("s", first) == 1
    assert r.execute_command("SISMEMBER", "s", "nope") == 0
    assert r.execute_command("SMISMEMBER", "s", first, "nope", first) == [1, 0, 1]
    assert r.srem("s", first, "nope", first) == 1
    assert r.scard("s") == len(ms) - 1
    assert r.srem("s", *ms) == len(ms) - 1
    assert r.exists("s") == 0
    assert r.scard("s") == 0
    assert r.smembers("s") == set()
    assert r.execute_command("SMISMEMBER", "s", "a") == [0]
    assert r.srem("s", "a") == 0


def test_intset_order_and_types(r, c):
    r.sadd("s", 5, -3, 100, 0, 9223372036854775807, -9223372036854775808)
    assert enc(r, "s") == b"intset"
    # An intset answers in ascending order, as Redis does.
    assert c.call("SMEMBERS", "s") == (b"*6\r\n$20\r\n-9223372036854775808\r\n$2\r\n-3\r\n$1\r\n0\r\n"
                                     b"$1\r\n5\r\n$3\r\n100\r\n$19\r\n9223372036854775807\r\n")
    # Non-canonical integers are strings.
    r.sadd("t", "1", "01")
    assert enc(r, "t") == b"listpack"
    assert set(r.smembers("t")) == {b"1", b"01"}


def test_encoding_conversions(r, thresholds):
    r.sadd("s", *range(10))
    assert enc(r, "s") == b"intset"
    r.sadd("s", "x")
    assert enc(r, "s") == b"listpack"
    # Past set-max-intset-entries an intset becomes a hashtable.
    r.sadd("i", *range(512))
    assert enc(r, "i") == b"intset"
    r.sadd("i", 512)
    assert enc(r, "i") == b"hashtable"
    # Past set-max-listpack-entries or -value a listpack becomes a hashtable.
    r.sadd("l", *members("listpack", 128))
    assert enc(r, "l") == b"listpack"
    r.sadd("l", "one-more")
    assert enc(r, "l") == b"hashtable"
    r.sadd("v", "a")
    r.sadd("v", "x" * 65)
    assert enc(r, "v") == b"hashtable"
    # A big first SADD picks its final encoding at once.
    r.sadd("h", *members("listpack", 129))
    assert enc(r, "h") == b"hashtable"
    # The conversion is never undone by removal.
    r.srem("h", *members("listpack", 128))
    assert enc(r, "h") == b"hashtable"
    r.config_set("set-max-intset-entries", 4)
    r.config_set("set-max-listpack-entries", 2)
    r.sadd("a", 1, 2, 3, 4)
    assert enc(r, "a") == b"intset"
    r.sadd("a", 5)
    assert enc(r, "a") == b"hashtable"
    r.sadd("b", "x", "y")
    assert enc(r, "b") == b"listpack"
    r.sadd("b", "z")
    assert enc(r, "b") == b"hashtable"
    r.config_set("set-max-listpack-value", 3)
    r.sadd("c", "abcd")
    assert enc(r, "c") == b"hashtable"


def test_resp3_shapes(c, r):
    r.sadd("s", "a")
    r.sadd("i", 7)
    assert c.call("HELLO", "3").startswith(b"%")
    assert c.call("SMEMBERS", "s") == b"~1\r\n$1\r\na\r\n"
    assert c.call("SMEMBERS", "i") == b"~1\r\n$1\r\n7\r\n"
    assert c.call("SMEMBERS", "missing") == b"~0\r\n"
    assert c.call("SINTER", "s", "missing") == b"~0\r\n"
    assert c.call("SUNION", "s", "missing") == b"~1\r\n$1\r\na\r\n"
    assert c.call("SDIFF", "s", "missing") == b"~1\r\n$1\r\na\r\n"
    assert c.call("SISMEMBER", "s", "a") == b":1\r\n"
    assert c.call("SMISMEMBER", "s", "a", "b") == b"*2\r\n:1\r\n:0\r\n"
    assert c.call("SRANDMEMBER", "missing") == b"_\r\n"
    assert c.call("SRANDMEMBER", "missing", "3") == b"*0\r\n"
    assert c.call("SRANDMEMBER", "s", "3") == b"*1\r\n$1\r\na\r\n"
    assert c.call("SRANDMEMBER", "s", "-2") == b"*2\r\n$1\r\na\r\n$1\r\na\r\n"
    assert c.call("SPOP", "missing") == b"_\r\n"
    assert c.call("SPOP", "missing", "2") == b"~0\r\n"
    assert c.call("SPOP", "s", "0") == b"~0\r\n"
    assert c.call("SPOP", "s", "5") == b"~1\r\n$1\r\na\r\n"
    assert c.call("SPOP", "i") == b"$1\r\n7\r\n"
    assert c.call("SSCAN", "missing", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"


def test_resp2_shapes(c, r):
    r.sadd("s", "a")
    assert c.call("SMEMBERS", "s") == b"*1\r\n$1\r\na\r\n"
    assert c.call("SMEMBERS", "missing") == b"*0\r\n"
    assert c.call("SRANDMEMBER", "missing") == b"$-1\r\n"
    assert c.call("SPOP", "missing") == b"$-1\r\n"
    assert c.call("SPOP", "missing", "2") == b"*0\r\n"
    assert c.call("SPOP", "s", "3") == b"*1\r\n$1\r\na\r\n"
    assert c.call("EXISTS", "s") == b":0\r\n"


# ---------------------------------------------------------------- random members

@pytest.mark.parametrize("kind", KINDS)
def test_srandmember(r, kind):
    ms = make(r, "s", kind)
    assert r.srandmember("s") in ms
    assert r.srandmember("s", 0) == []
    got = r.srandmember("s", 3)
    assert len(got) == 3 and len(set(got)) == 3 and set(got) <= ms
    assert set(r.srandmember("s", len(ms) + 10)) == ms
    assert len(r.srandmember("s", len(ms) + 10)) == len(ms)
    neg = r.srandmember("s", -(len(ms) * 2))
    assert len(neg) == len(ms) * 2 and set(neg) <= ms
    assert r.scard("s") == len(ms)


@pytest.mark.parametrize("kind", KINDS)
def test_spop(r, kind):
    ms = make(r, "s", kind)
    one = r.spop("s")
    assert one in ms
    assert r.sismember("s", one) == 0
    left = ms - {one}
    two = r.spop("s", 2)
    assert len(two) == 2 and set(two) <= left
    left -= set(two)
    assert r.scard("s") == len(left)
    assert r.spop("s", 0) == []
    rest = r.spop("s", len(left) + 5)
    assert set(rest) == left and len(rest) == len(left)
    assert r.exists("s") == 0


def test_spop_most_members(r):
    ms = make(r, "s", "hashtable", 300)
    popped = r.spop("s", 290)
    assert len(set(popped)) == 290
    left = set(r.smembers("s"))
    assert len(left) == 10 and left | set(popped) == ms and not left & set(popped)


def test_random_errors(c, r):
    r.sadd("s", "a")
    assert c.call("SPOP", "s", "-1") == b"-ERR value is out of range, must be positive\r\n"
    assert c.call("SPOP", "s", "x") == b"-ERR value is out of range, must be positive\r\n"
    assert c.call("SPOP", "s", "1", "2") == SYNTAX
    assert c.call("SRANDMEMBER", "s", "x") == NOT_INT
    assert c.call("SRANDMEMBER", "s", "1", "2") == SYNTAX
    assert c.call("SRANDMEMBER", "s", "-9223372036854775808") == (
        b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n")
    assert c.call("SCARD", "s") == b":1\r\n"


# ---------------------------------------------------------------- SMOVE

def test_smove(r, c):
    r.sadd("a", 1, 2, "x")
    r.sadd("b", 3)
    assert r.smove("a", "b", "x") == 1
    assert set(r.smembers("a")) == {b"1", b"2"}
    assert set(r.smembers("b")) == {b"3", b"x"}
    assert enc(r, "b") == b"listpack"
    assert r.smove("a", "b", "nope") == 0
    assert r.smove("missing", "b", "x") == 0
    assert r.smove("a", "new", 1) == 1
    assert r.smembers("new") == {b"1"}
    assert enc(r, "new") == b"intset"
    assert r.smove("a", "a", 2) == 1
    assert r.smove("a", "a", 9) == 0
    assert r.smove("a", "b", 2) == 1
    assert r.exists("a") == 0
    # Moving a member the destination already has removes it from the source.
    r.sadd("a", 3)
    assert r.smove("a", "b", 3) == 1
    assert r.exists("a") == 0 and r.scard("b") == 3
    r.set("str", "v")
    assert c.call("SMOVE", "str", "b", "3") == WRONGTYPE
    assert c.call("SMOVE", "b", "str", "3") == WRONGTYPE
    assert c.call("SMOVE", "missing", "str", "3") == b":0\r\n"
    assert c.call("SMOVE", "b", "str", "nope") == WRONGTYPE
    assert c.call("SMOVE", "b", "c") == b"-ERR wrong number of arguments for 'smove' command\r\n"


# ---------------------------------------------------------------- algebra

@pytest.mark.parametrize("kind", KINDS)
def test_sinter_sunion_sdiff(r, kind):
    a = make(r, "a", kind, 150 if kind == "hashtable" else 6)
    ms = sorted(a)
    r.sadd("b", *ms[2:], "extra")
    b = set(ms[2:]) | {b"extra"}
    assert set(r.sinter("a", "b")) == a & b
    assert set(r.sunion("a", "b")) == a | b
    assert set(r.sdiff("a", "b")) == a - b
    assert set(r.sdiff("b", "a")) == {b"extra"}
    assert r.sinter("a", "missing") == set()
    assert set(r.sunion("a", "missing")) == a
    assert set(r.sdiff("a", "missing")) == a
    assert r.sdiff("missing", "a") == set()
    assert set(r.sinter("a")) == a
    assert r.sinterstore("d", "a", "b") == len(a & b)
    assert set(r.smembers("d")) == a & b
    assert r.sunionstore("d", "a", "b") == len(a | b)
    assert set(r.smembers("d")) == a | b
    assert r.sdiffstore("d", "a", "b") == 2
    assert set(r.smembers("d")) == a - b
    assert r.sdiffstore("d", "a", "a") == 0
    assert r.exists("d") == 0


def test_store_encodings_and_overwrite(r):
    r.sadd("i1", 1, 2, 3)
    r.sadd("i2", 2, 3, 4)
    r.sadd("l", "x", 2, 3)
    assert r.sinterstore("d", "i1", "i2") == 2
    assert enc(r, "d") == b"intset"
    assert r.sunionstore("d", "i1", "l") == 4
    assert enc(r, "d") == b"listpack"
    # An intersection of a listpack and an intset that holds only integers
    # is stored as an intset.
    assert r.sinterstore("d", "l", "i1") == 2
    assert enc(r, "d") == b"intset"
    # STORE overwrites any type and clears the TTL; an empty result deletes.
    r.set("str", "v", ex=100)
    assert r.sunionstore("str", "i1") == 3
    assert r.type("str") == b"set" and r.ttl("str") == -1
    assert r.sinterstore("str", "i1", "missing") == 0
    assert r.exists("str") == 0


def test_sintercard(r, c):
    r.sadd("a", *range(10))
    r.sadd("b", *range(5, 20))
    assert r.execute_command("SINTERCARD", 2, "a", "b") == 5
    assert r.execute_command("SINTERCARD", 2, "a", "b", "LIMIT", 3) == 3
    assert r.execute_command("SINTERCARD", 2, "a", "b", "limit", 0) == 5
    assert r.execute_command("SINTERCARD", 1, "a") == 10
    assert r.execute_command("SINTERCARD", 2, "a", "missing") == 0
    assert c.call("SINTERCARD", "0", "a") == b"-ERR numkeys should be greater than 0\r\n"
    assert c.call("SINTERCARD", "x", "a") == b"-ERR numkeys should be greater than 0\r\n"
    assert c.call("SINTERCARD", "3", "a", "b") == b"-ERR Number of keys can't be greater than number of args\r\n"
    assert c.call("SINTERCARD", "1", "a", "LIMIT", "-1") == b"-ERR LIMIT can't be negative\r\n"
    assert c.call("SINTERCARD", "1", "a", "LIMIT", "x") == b"-ERR LIMIT can't be negative\r\n"
    assert c.call("SINTERCARD", "1", "a", "LIMIT") == SYNTAX
    assert c.call("SINTERCARD", "1", "a", "FOO", "1") == SYNTAX
    assert c.call("SINTERCARD", "1") == b"-ERR wrong number of arguments for 'sintercard' command\r\n"


# ---------------------------------------------------------------- SSCAN

@pytest.mark.parametrize("kind", KINDS)
def test_sscan(r, kind):
    ms = make(r, "s", kind, 300 if kind == "hashtable" else 20)
    seen, cursor = set(), 0
    while True:
        cursor, batch = r.sscan("s", cursor, count=7)
        seen |= set(batch)
        if cursor == 0:
            break
    assert seen == ms
    prefix = b"1" if kind == "intset" else b"m1"
    matched = set()
    for m in r.sscan_iter("s", match=prefix.decode() + "*"):
        matched.add(m)
    assert matched == {m for m in ms if m.startswith(prefix)}


def test_sscan_errors(c, r):
    r.sadd("s", "a")
    assert c.call("SSCAN", "s", "x") == b"-ERR invalid cursor\r\n"
    assert c.call("SSCAN", "s", "0", "COUNT", "0") == SYNTAX
    assert c.call("SSCAN", "s", "0", "COUNT", "x") == NOT_INT
    assert c.call("SSCAN", "s", "0", "COUNT") == SYNTAX
    assert c.call("SSCAN", "s", "0", "FOO", "1") == SYNTAX
    assert c.call("SSCAN", "s", "0", "NOVALUES") == b"-ERR NOVALUES option can only be used in HSCAN\r\n"
    assert c.call("SSCAN", "s", "0", "MATCH", "a") == b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n"


# ---------------------------------------------------------------- errors

def test_wrong_type_and_arity(r, c):
    r.set("str", "x")
    for cmd in (["SADD", "str", "a"], ["SREM", "str", "a"], ["SMEMBERS", "str"], ["SISMEMBER", "str", "a"],
                ["SMISMEMBER", "str", "a"], ["SCARD", "str"], ["SSCAN", "str", "0"], ["SRANDMEMBER", "str"],
                ["SPOP", "str"], ["SINTER", "str"], ["SINTERCARD", "1", "str"], ["SINTERSTORE", "d", "str"],
                ["SUNION", "str"], ["SUNIONSTORE", "d", "str"], ["SDIFF", "str"], ["SDIFFSTORE", "d", "str"]):
        assert c.call(*cmd) == WRONGTYPE, cmd
    r.sadd("s", "a")
    for cmd in (["GET", "s"], ["APPEND", "s", "x"], ["INCR", "s"], ["STRLEN", "s"], ["SETRANGE", "s", "0", "x"],
                ["HGET", "s", "f"], ["LPUSH", "s", "x"], ["SUNION", "s", "str"], ["SDIFF", "s", "str"]):
        assert c.call(*cmd) == WRONGTYPE, cmd
    # A wrong-typed key fails the command even after an empty intersection.
    assert c.call("SINTER", "missing", "str") == WRONGTYPE
    for name, args in (("sadd", ["s"]), ("srem", ["s"]), ("smembers", []), ("sismember", ["s"]),
                       ("smismember", ["s"]), ("scard", []), ("sscan", ["s"]), ("srandmember", []),
                       ("spop", []), ("sinter", []), ("sinterstore", ["d"]), ("sunion", []),
                       ("sunionstore", ["d"]), ("sdiff", []), ("sdiffstore", ["d"])):
        assert c.call(name.upper(), *args) == f"-ERR wrong number of arguments for '{name}' command\r\n".encode()
    assert c.call("SMEMBERS", "s", "x") == b"-ERR wrong number of arguments for 'smembers' command\r\n"


# ---------------------------------------------------------------- keyspace

@pytest.mark.parametrize("kind", KINDS)
def test_copy_rename_move_type_scan(r, kind):
    ms = make(r, "s", kind)
    r.expire("s", 100)
    assert r.copy("s", "c") == 1
    assert set(r.smembers("c")) == ms and enc(r, "c") == kind.encode()
    r.sadd("c", "new")
    assert r.scard("s") == len(ms)
    assert r.rename("s", "t") is True
    assert set(r.smembers("t")) == ms and 0 < r.ttl("t") <= 100
    assert r.move("t", 1) == 1
    assert r.exists("t") == 0
    r.execute_command("SELECT", 1)
    try:
        assert set(r.smembers("t")) == ms
        assert r.type("t") == b"set"
        r.delete("t")
    finally:
        r.execute_command("SELECT", 0)
    r.set("str", "v")
    r.rpush("list", "v")
    r.hset("hash", "f", "v")
    assert r.scan(0, _type="set", count=1000) == (0, [b"c"])
    assert set(r.scan(0, _type="string", count=1000)[1]) == {b"str"}
    assert r.type("list") == b"list" and r.type("hash") == b"hash"


@pytest.mark.parametrize("kind", KINDS)
def test_memory_usage_and_debug_object(r, kind):
    make(r, "s", kind)
    small = r.memory_usage("s")
    assert small > 0
    r.sadd("big", *members(kind, 500 if kind != "listpack" else 100))
    assert r.memory_usage("big") > small
    line = r.execute_command("DEBUG", "OBJECT", "s")
    assert f"encoding:{kind}" in str(line)


def test_object_encoding_and_del(r):
    r.sadd("s", 1)
    assert enc(r, "s") == b"intset"
    assert r.delete("s") == 1
    assert r.object("encoding", "s") is None


def test_watch_sees_set_writes(r, new_client):
    r.sadd("s", "a")
    other = new_client()
    p = r.pipeline()
    p.watch("s")
    assert other.sadd("s", "a") == 0  # no change: WATCH still holds
    p.multi()
    p.scard("s")
    assert p.execute() == [1]
    p = r.pipeline()
    p.watch("s")
    assert other.srem("s", "a") == 1
    p.multi()
    p.scard("s")
    with pytest.raises(redis.WatchError):
        p.execute()


def test_getkeys(c):
    assert c.call("COMMAND", "GETKEYS", "SINTERCARD", "2", "a", "b", "LIMIT", "1") == (
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n")
    assert c.call("COMMAND", "GETKEYS", "SMOVE", "a", "b", "m") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert c.call("COMMAND", "GETKEYS", "SINTERSTORE", "d", "a", "b") == (
        b"*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nb\r\n")
    assert c.call("COMMAND", "GETKEYSANDFLAGS", "SMOVE", "a", "b", "m") == (
        b"*2\r\n*2\r\n$1\r\na\r\n*3\r\n+RW\r\n+access\r\n+delete\r\n"
        b"*2\r\n$1\r\nb\r\n*2\r\n+RW\r\n+insert\r\n")
    assert c.call("COMMAND", "GETKEYSANDFLAGS", "SUNIONSTORE", "d", "a") == (
        b"*2\r\n*2\r\n$1\r\nd\r\n*2\r\n+OW\r\n+update\r\n"
        b"*2\r\n$1\r\na\r\n*2\r\n+RO\r\n+access\r\n")
    info = c.call("COMMAND", "INFO", "SINTERCARD")
    assert info.startswith(b"*1\r\n*10\r\n$10\r\nsintercard\r\n:-3\r\n*2\r\n+readonly\r\n+movablekeys\r\n"
                           b":0\r\n:0\r\n:0\r\n")


def test_srandmember_count_range_text(c):
    assert c.call("SRANDMEMBER", "s", "-9223372036854775808") == (
        b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n")
