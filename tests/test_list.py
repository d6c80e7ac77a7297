"""LIST commands: replies, errors and OBJECT ENCODING for both encodings
(listpack and quicklist), RESP2 and RESP3 where the replies differ."""

import pytest
import redis

from conftest import err

BIG = b"x" * 9000  # larger than a node: forces quicklist at the default -2
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def enc(r, key):
    return r.object("encoding", key)


def make(r, key, kind, items):
    """A list of `items` in the given encoding (quicklist: built with small
    nodes, so it stays a quicklist of several nodes afterwards)."""
    r.delete(key)
    if kind == "quicklist":
        r.config_set("list-max-listpack-size", 2)
    try:
        r.rpush(key, *items)
    finally:
        r.config_set("list-max-listpack-size", -2)
    assert enc(r, key) == kind.encode()
    return key


def test_push_pop_and_encodings(r):
    assert r.lpush("l", "a", "b", "c") == 3
    assert r.rpush("l", 1, 2) == 5
    assert r.lrange("l", 0, -1) == [b"c", b"b", b"a", b"1", b"2"]
    assert enc(r, "l") == b"listpack"
    assert r.type("l") == b"list"
    assert r.rpush("l", BIG) == 6
    assert enc(r, "l") == b"quicklist"
    assert r.rpop("l") == BIG
    assert enc(r, "l") == b"listpack"
    assert r.lpop("l") == b"c"
    assert r.rpop("l", 2) == [b"2", b"1"]
    assert r.lpop("l", 10) == [b"b", b"a"]
    assert r.exists("l") == 0
    assert r.lpop("l") is None
    assert r.lpop("l", 2) is None
    r.rpush("l", "z")
    assert r.lpop("l", 0) == []
    assert err(r.lpop, "l", -1) == "value is out of range, must be positive"
    assert err(r.execute_command, "LPOP", "l", "1", "2") == "wrong number of arguments for 'lpop' command"
    assert err(r.execute_command, "RPUSH", "l") == "wrong number of arguments for 'rpush' command"


def test_pushx(r):
    assert r.lpushx("nx", "a") == 0
    assert r.rpushx("nx", "a") == 0
    assert r.exists("nx") == 0
    r.rpush("nx", "m")
    assert r.lpushx("nx", "a", "b") == 3
    assert r.rpushx("nx", "z") == 4
    assert r.lrange("nx", 0, -1) == [b"b", b"a", b"m", b"z"]


@pytest.mark.parametrize("kind", ["listpack", "quicklist"])
def test_index_range_set(r, kind):
    make(r, "l", kind, [str(i) for i in range(200)] + ["end"])
    assert r.llen("l") == 201
    assert r.lindex("l", 0) == b"0"
    assert r.lindex("l", -1) == b"end"
    assert r.lindex("l", 150) == b"150"
    assert r.lindex("l", 201) is None
    assert r.lindex("l", -202) is None
    assert r.lrange("l", 198, 1000) == [b"198", b"199", b"end"]
    assert r.lrange("l", -3, -2) == [b"198", b"199"]
    assert r.lrange("l", 5, 2) == []
    assert r.lrange("missing", 0, -1) == []
    assert r.lset("l", 100, "hundred") is True
    assert r.lindex("l", 100) == b"hundred"
    assert r.lset("l", -1, "last")
    assert r.lindex("l", 200) == b"last"
    assert err(r.lset, "l", 201, "x") == "index out of range"
    assert err(r.lset, "missing", 0, "x") == "no such key"
    assert err(r.lindex, "l", "x") == "value is not an integer or out of range"
    assert err(r.lrange, "l", "a", 1) == "value is not an integer or out of range"
    assert r.llen("missing") == 0


@pytest.mark.parametrize("kind", ["listpack", "quicklist"])
def test_lrem_ltrim_linsert(r, kind):
    make(r, "l", kind, ["a", "b", "a", "c", "a", "1", "01", "tail", "tail2"])
    r.rpop("l", 2)
    assert r.lrem("l", 1, "a") == 1
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"c", b"a", b"1", b"01"]
    assert r.lrem("l", -1, "a") == 1
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"c", b"1", b"01"]
    assert r.lrem("l", 0, "1") == 1
    assert r.lrem("l", 0, "nope") == 0
    assert r.lrem("missing", 0, "a") == 0
    assert r.linsert("l", "BEFORE", "c", "X") == 5
    assert r.linsert("l", "after", "c", "Y") == 6
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"X", b"c", b"Y", b"01"]
    assert r.linsert("l", "before", "zz", "Q") == -1
    assert r.linsert("missing", "before", "a", "Q") == 0
    assert err(r.execute_command, "LINSERT", "l", "middle", "a", "b") == "syntax error"
    assert r.ltrim("l", 1, -2) is True
    assert r.lrange("l", 0, -1) == [b"a", b"X", b"c", b"Y"]
    assert r.ltrim("l", 5, 10)
    assert r.exists("l") == 0
    assert r.ltrim("missing", 0, 1)
    assert err(r.lrem, "l", "x", "a") == "value is not an integer or out of range"
    r.rpush("l", "a")
    assert err(r.execute_command, "LREM", "l", "-9223372036854775808", "a") == (
        "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    )


def test_lpos(r, r3):
    r.rpush("l", "a", "b", "c", "1", "2", "3", "c", "c")
    assert r.lpos("l", "c") == 2
    assert r.lpos("l", "c", rank=2) == 6
    assert r.lpos("l", "c", rank=-1) == 7
    assert r.lpos("l", "c", count=0) == [2, 6, 7]
    assert r.lpos("l", "c", count=2, rank=-1) == [7, 6]
    assert r.lpos("l", "c", count=0, maxlen=7) == [2, 6]
    assert r.lpos("l", "c", rank=-1, maxlen=1) == 7
    assert r.lpos("l", "x") is None
    assert r.lpos("l", "x", count=1) == []
    assert r.lpos("missing", "x") is None
    assert r.lpos("missing", "x", count=1) == []
    assert r3.lpos("l", "x") is None
    assert err(r.lpos, "l", "c", 0) == (
        "RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
        "or use negative to start from the end of the list"
    )
    assert err(r.execute_command, "LPOS", "l", "c", "COUNT", "-1") == "COUNT can't be negative"
    assert err(r.execute_command, "LPOS", "l", "c", "COUNT", "x") == "COUNT can't be negative"
    assert err(r.execute_command, "LPOS", "l", "c", "MAXLEN", "-1") == "MAXLEN can't be negative"
    assert err(r.execute_command, "LPOS", "l", "c", "RANK") == "syntax error"
    assert err(r.execute_command, "LPOS", "l", "c", "RANK", "x") == "value is not an integer or out of range"


@pytest.mark.parametrize("kind", ["listpack", "quicklist"])
def test_lmove_rpoplpush(r, kind):
    make(r, "src{t}", kind, ["a", "b", "c"])
    assert r.rpoplpush("src{t}", "dst{t}") == b"c"
    assert r.lmove("src{t}", "dst{t}", "LEFT", "RIGHT") == b"a"
    assert r.lrange("dst{t}", 0, -1) == [b"c", b"a"]
    assert r.lmove("src{t}", "src{t}", "LEFT", "RIGHT") == b"b"
    assert r.lmove("src{t}", "dst{t}", "RIGHT", "LEFT") == b"b"
    assert r.exists("src{t}") == 0
    assert r.rpoplpush("src{t}", "dst{t}") is None
    assert err(r.execute_command, "LMOVE", "dst{t}", "x{t}", "UP", "LEFT") == "syntax error"
    r.set("str{t}", "v")
    assert err(r.rpoplpush, "dst{t}", "str{t}") == WRONGTYPE
    assert r.lrange("dst{t}", 0, -1) == [b"b", b"c", b"a"]
    # Moving a big element converts the destination like Redis does.
    r.rpush("big{t}", BIG)
    r.rpush("small{t}", "s")
    r.lmove("big{t}", "small{t}", "LEFT", "RIGHT")
    assert enc(r, "small{t}") == b"quicklist"


def test_lmpop(r, r3):
    r.rpush("b{t}", "1", "2", "3")
    assert r.lmpop(2, "a{t}", "b{t}", direction="LEFT") == [b"b{t}", [b"1"]]
    assert r.lmpop(2, "a{t}", "b{t}", direction="RIGHT", count=5) == [b"b{t}", [b"3", b"2"]]
    assert r.exists("b{t}") == 0
    assert r.lmpop(2, "a{t}", "b{t}", direction="LEFT") is None
    assert r3.lmpop(1, "a{t}", direction="LEFT") is None
    r.rpush("c{t}", "x")
    assert r3.lmpop(1, "c{t}", direction="LEFT") == [b"c{t}", [b"x"]]
    assert err(r.execute_command, "LMPOP", "0", "a{t}", "LEFT") == "numkeys should be greater than 0"
    assert err(r.execute_command, "LMPOP", "x", "a{t}", "LEFT") == "numkeys should be greater than 0"
    assert err(r.execute_command, "LMPOP", "5", "a{t}", "LEFT") == "syntax error"
    assert err(r.execute_command, "LMPOP", "1", "a{t}", "UP") == "syntax error"
    assert err(r.execute_command, "LMPOP", "1", "a{t}", "LEFT", "COUNT", "0") == "count should be greater than 0"
    assert err(r.execute_command, "LMPOP", "1", "a{t}", "LEFT", "COUNT", "1", "COUNT", "1") == "syntax error"


def test_wrongtype_everywhere(r):
    r.set("s", "v")
    for cmd in (
        ("LPUSH", "s", "a"), ("RPUSH", "s", "a"), ("LPUSHX", "s", "a"), ("RPUSHX", "s", "a"),
        ("LPOP", "s"), ("RPOP", "s", "1"), ("LLEN", "s"), ("LRANGE", "s", "0", "1"),
        ("LINDEX", "s", "0"), ("LSET", "s", "0", "a"), ("LREM", "s", "0", "a"), ("LTRIM", "s", "0", "1"),
        ("LINSERT", "s", "BEFORE", "a", "b"), ("LPOS", "s", "a"), ("LMOVE", "s", "d", "LEFT", "LEFT"),
        ("RPOPLPUSH", "s", "d"), ("LMPOP", "1", "s", "LEFT"),
    ):
        assert err(r.execute_command, *cmd) == WRONGTYPE, cmd
    r.rpush("l", "a")
    assert err(r.get, "l") == WRONGTYPE


def test_encoding_thresholds(r):
    r.config_set("list-max-listpack-size", 3)
    try:
        r.rpush("l", "a", "b", "c")
        assert enc(r, "l") == b"listpack"
        r.rpush("l", "d")
        assert enc(r, "l") == b"quicklist"
        r.rpop("l", 3)
        assert enc(r, "l") == b"listpack"
        r.delete("l")
        r.rpush("l", "a", "a", "a", "d")
        r.lrem("l", 3, "a")
        assert enc(r, "l") == b"listpack"
        r.config_set("list-max-listpack-size", 0)
        r.delete("l")
        r.rpush("l", "a")
        assert enc(r, "l") == b"listpack"
        r.rpush("l", "b")
        assert enc(r, "l") == b"quicklist"
    finally:
        r.config_set("list-max-listpack-size", -2)


def test_memory_usage_and_copy(r):
    r.rpush("l{t}", *[f"item:{i:05}" for i in range(1000)])
    small = r.memory_usage("l{t}")
    assert 12_000 <= small <= 16_000
    assert r.copy("l{t}", "c{t}")
    assert r.lrange("c{t}", 0, -1) == r.lrange("l{t}", 0, -1)
    assert list(r.scan_iter(_type="list")) != []


def test_lindex_lset_look_the_key_up_first(c):
    """Found by scripts/difftest.py: LINDEX and LSET check the key before the index (the
    other list commands parse their numbers first)."""
    assert c.call("LINDEX", "missing", " 1") == b"$-1\r\n"
    assert c.call("LSET", "missing", "abc", "x") == b"-ERR no such key\r\n"
    c.call("SET", "s", "v")
    wrongtype = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    assert c.call("LINDEX", "s", "01") == wrongtype
    assert c.call("LSET", "s", "01", "x") == wrongtype
    c.call("RPUSH", "l", "a", "b")
    assert c.call("LINDEX", "l", "01") == b"-ERR value is not an integer or out of range\r\n"
    assert c.call("LSET", "l", "01", "x") == b"-ERR value is not an integer or out of range\r\n"


@pytest.mark.parametrize("kind", ["listpack", "quicklist"])
def test_lset_index_keeps_low_32_bits(r, c, kind):
    """Redis passes LSET's index on as a C int: 9223372036854775807 is -1 (the last
    element) and 4294967296 is 0."""
    make(r, "l", kind, ["a", "b", "c"])
    assert c.call("LSET", "l", "9223372036854775807", "last") == b"+OK\r\n"
    assert c.call("LSET", "l", "4294967296", "first") == b"+OK\r\n"
    assert r.lrange("l", 0, -1) == [b"first", b"b", b"last"]
    assert c.call("LSET", "l", "2147483648", "x") == b"-ERR index out of range\r\n"
