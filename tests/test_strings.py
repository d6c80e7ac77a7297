"""String commands: replies and error strings byte for byte as Redis 7.4 gives them."""

import time

import pytest
import redis


def e(msg: str) -> bytes:
    return b"-" + msg.encode() + b"\r\n"


NOT_INT = e("ERR value is not an integer or out of range")
SYNTAX = e("ERR syntax error")


def test_get_set_basic(r, c):
    assert r.get(b"k") is None
    assert r.set(b"k", b"\x00bin\xff") is True
    assert r.get(b"k") == b"\x00bin\xff"
    assert c.call("GET", "missing") == b"$-1\r\n"
    assert c.call("SET", "n", "123") == b"+OK\r\n"
    assert c.call("GET", "n") == b"$3\r\n123\r\n"
    assert c.call("GET") == e("ERR wrong number of arguments for 'get' command")
    assert c.call("SET", "k") == e("ERR wrong number of arguments for 'set' command")


def test_set_options(r, c):
    assert r.set(b"k", b"1", nx=True) is True
    assert r.set(b"k", b"2", nx=True) is None
    assert r.set(b"k", b"3", xx=True) is True
    assert r.set(b"nokey", b"3", xx=True) is None
    assert r.get(b"k") == b"3"
    assert r.set(b"k", b"4", get=True) == b"3"
    assert r.set(b"new", b"x", get=True) is None
    assert r.set(b"new", b"y", nx=True, get=True) == b"x"
    assert r.get(b"new") == b"x"
    assert c.call("SET", "k", "v", "NX", "XX") == SYNTAX
    assert c.call("SET", "k", "v", "EX", "10", "PX", "100") == SYNTAX
    assert c.call("SET", "k", "v", "KEEPTTL", "EX", "10") == SYNTAX
    assert c.call("SET", "k", "v", "EX") == SYNTAX
    assert c.call("SET", "k", "v", "FOO") == SYNTAX
    # The same expire option may repeat; syntax is checked before values.
    assert c.call("SET", "k", "v", "EX", "10", "EX", "20") == b"+OK\r\n"
    assert c.call("SET", "k", "v", "EX", "abc", "FOO") == SYNTAX
    assert c.call("SET", "k", "v", "EX", "abc") == NOT_INT
    for bad in ("0", "-1"):
        assert c.call("SET", "k", "v", "EX", bad) == e("ERR invalid expire time in 'set' command")
    assert c.call("SET", "k", "v", "EX", "9223372036854775807") == e("ERR invalid expire time in 'set' command")
    assert c.call("SET", "k", "v", "PX", "9223372036854775807") == e("ERR invalid expire time in 'set' command")
    assert c.call("SET", "k", "v", "pxat", "9223372036854775807") == b"+OK\r\n"


def test_set_expiry_and_keepttl(r):
    assert r.set(b"k", b"v", px=150) is True
    assert r.set(b"k", b"v2", keepttl=True) is True
    assert r.set(b"other", b"v", px=150) is True
    assert r.set(b"other", b"v2") is True  # plain SET clears the TTL
    time.sleep(0.3)
    assert r.get(b"k") is None
    assert r.get(b"other") == b"v2"
    now_ms = int(time.time() * 1000)
    assert r.set(b"a", b"1", pxat=now_ms + 150) is True
    assert r.set(b"b", b"1", exat=int(time.time()) + 100) is True
    time.sleep(0.3)
    assert r.exists(b"a", b"b") == 1


def test_setnx_setex_psetex(r, c):
    assert c.call("SETNX", "k", "1") == b":1\r\n"
    assert c.call("SETNX", "k", "2") == b":0\r\n"
    assert r.get(b"k") == b"1"
    assert c.call("SETEX", "k", "100", "v") == b"+OK\r\n"
    assert r.get(b"k") == b"v"
    assert c.call("SETEX", "k", "0", "v") == e("ERR invalid expire time in 'setex' command")
    assert c.call("SETEX", "k", "x", "v") == NOT_INT
    assert c.call("PSETEX", "k", "-5", "v") == e("ERR invalid expire time in 'psetex' command")
    assert c.call("PSETEX", "p", "100", "v") == b"+OK\r\n"
    time.sleep(0.25)
    assert r.get(b"p") is None
    assert c.call("SETEX", "k", "1") == e("ERR wrong number of arguments for 'setex' command")


def test_mget_mset_msetnx(r, r3, c):
    assert r.mset({b"a": b"1", b"b": b"2"}) is True
    assert r.mget(b"a", b"nope", b"b") == [b"1", None, b"2"]
    assert c.call("MGET", "a", "nope") == b"*2\r\n$1\r\n1\r\n$-1\r\n"
    assert r3.mget(b"a", b"nope") == [b"1", None]
    assert c.call("MSET", "a", "1", "b") == e("ERR wrong number of arguments for 'mset' command")
    assert c.call("MSETNX", "a", "1", "b") == e("ERR wrong number of arguments for 'msetnx' command")
    assert c.call("MSETNX", "x", "1", "a", "9") == b":0\r\n"
    assert r.get(b"x") is None and r.get(b"a") == b"1"
    assert c.call("MSETNX", "x", "1", "y", "2") == b":1\r\n"
    assert r.mget(b"x", b"y") == [b"1", b"2"]
    # The same key twice: the last value wins.
    assert c.call("MSETNX", "z", "1", "z", "2") == b":1\r\n"
    assert r.get(b"z") == b"2"


def test_getset_getdel_getex(r, c):
    assert r.getset(b"k", b"a") is None
    assert r.getset(b"k", b"b") == b"a"
    assert r.getdel(b"k") == b"b"
    assert r.exists(b"k") == 0
    assert r.getdel(b"k") is None
    assert c.call("GETEX", "nokey") == b"$-1\r\n"
    assert c.call("GETEX", "nokey", "EX", "abc") == b"$-1\r\n"  # value checked only for a live key
    r.set(b"k", b"v")
    assert c.call("GETEX", "k", "EX", "abc") == NOT_INT
    assert c.call("GETEX", "k", "EX", "0") == e("ERR invalid expire time in 'getex' command")
    assert c.call("GETEX", "k", "EX", "10", "PERSIST") == SYNTAX
    assert c.call("GETEX", "k", "PERSIST", "PX", "10") == SYNTAX
    assert c.call("GETEX", "k", "KEEPTTL") == SYNTAX
    assert c.call("GETEX", "k", "PX", "150") == b"$1\r\nv\r\n"
    assert c.call("GETEX", "k") == b"$1\r\nv\r\n"
    time.sleep(0.3)
    assert r.get(b"k") is None
    r.set(b"k", b"v", px=150)
    assert r.getex(b"k", persist=True) == b"v"
    time.sleep(0.3)
    assert r.get(b"k") == b"v"
    # An absolute time in the past deletes the key after replying.
    assert r.getex(b"k", pxat=1) == b"v"
    assert r.exists(b"k") == 0
    r.set(b"k", b"v")
    assert r.getex(b"k", exat=int(time.time()) + 100) == b"v"
    assert r.get(b"k") == b"v"


def test_append_strlen(r, c):
    assert r.append(b"k", b"12") == 2
    assert r.append(b"k", b"34") == 4
    assert r.get(b"k") == b"1234"
    assert r.incr(b"k") == 1235  # appended digits stay a usable integer
    assert r.strlen(b"k") == 4
    assert r.strlen(b"nokey") == 0
    r.set(b"neg", b"-100")
    assert r.strlen(b"neg") == 4
    assert c.call("APPEND", "k") == e("ERR wrong number of arguments for 'append' command")


def test_incr_decr(r, c):
    assert r.incr(b"n") == 1
    assert r.incrby(b"n", 10) == 11
    assert r.decr(b"n") == 10
    assert r.decrby(b"n", 20) == -10
    assert c.call("INCRBY", "n", "abc") == NOT_INT
    r.set(b"s", b"hello")
    assert c.call("INCR", "s") == NOT_INT
    for bad in (b" 1", b"1 ", b"01", b"+1", b"1.5", b"", b"99999999999999999999"):
        r.set(b"s", bad)
        assert c.call("INCR", "s") == NOT_INT, bad
    r.set(b"big", b"9223372036854775807")
    assert c.call("INCR", "big") == e("ERR increment or decrement would overflow")
    r.set(b"small", b"-9223372036854775808")
    assert c.call("DECR", "small") == e("ERR increment or decrement would overflow")
    assert c.call("DECRBY", "n", "-9223372036854775808") == e("ERR decrement would overflow")
    assert c.call("INCRBY", "n", "9223372036854775808") == NOT_INT
    assert c.call("INCR", "n", "1") == e("ERR wrong number of arguments for 'incr' command")
    # INCR keeps the TTL.
    r.set(b"t", b"1", px=150)
    assert r.incr(b"t") == 2
    time.sleep(0.3)
    assert r.get(b"t") is None


def test_incrbyfloat(r, r3, c):
    assert c.call("INCRBYFLOAT", "f", "10.5") == b"$4\r\n10.5\r\n"
    assert r.incrbyfloat(b"f", 0.1) == 10.6
    assert r.get(b"f") == b"10.6"
    assert c.call("INCRBYFLOAT", "f", "-10.6") == b"$1\r\n0\r\n"
    assert c.call("INCRBYFLOAT", "f", "5.0e3") == b"$4\r\n5000\r\n"
    assert c.call("INCRBYFLOAT", "f", "abc") == e("ERR value is not a valid float")
    assert c.call("INCRBYFLOAT", "f", "nan") == e("ERR value is not a valid float")
    assert c.call("INCRBYFLOAT", "f", "inf") == e("ERR increment would produce NaN or Infinity")
    r.set(b"f", b"-inf")
    assert c.call("INCRBYFLOAT", "f", "1") == e("ERR increment would produce NaN or Infinity")
    r.set(b"s", b"1.5x")
    assert c.call("INCRBYFLOAT", "s", "1") == e("ERR value is not a valid float")
    r.set(b"i", b"3")
    assert c.call("INCRBYFLOAT", "i", "1.25") == b"$4\r\n4.25\r\n"
    # RESP3 replies a bulk string too.
    r3.set(b"g", b"1")
    assert r3.incrbyfloat(b"g", 1.5) == 2.5
    r3c = r3.connection_pool.get_connection()
    r3c.send_command("INCRBYFLOAT", "g", "0.5")
    assert r3c.read_response() == b"3"
    r3.connection_pool.release(r3c)


def test_getrange_substr_setrange(r, c):
    r.set(b"k", b"Hello World")
    assert r.getrange(b"k", 0, 4) == b"Hello"
    assert r.getrange(b"k", -5, -1) == b"World"
    assert r.getrange(b"k", 5, 3) == b""
    assert r.getrange(b"k", 0, -100) == b""  # Redis 8: an end before the string is empty (7.x gave "H")
    assert r.getrange(b"k", -100, -99) == b""
    assert r.getrange(b"k", -1, -100) == b""
    assert r.getrange(b"k", -100, 100) == b"Hello World"
    assert c.call("SUBSTR", "k", "0", "0") == b"$1\r\nH\r\n"
    assert c.call("GETRANGE", "nokey", "0", "-1") == b"$0\r\n\r\n"
    assert c.call("GETRANGE", "k", "a", "1") == NOT_INT
    r.set(b"n", b"1234")
    assert r.getrange(b"n", 1, 2) == b"23"
    assert r.setrange(b"k", 6, b"Redis") == 11
    assert r.get(b"k") == b"Hello Redis"
    assert r.setrange(b"z", 3, b"ab") == 5
    assert r.get(b"z") == b"\x00\x00\x00ab"
    assert r.setrange(b"nokey", 10, b"") == 0
    assert r.exists(b"nokey") == 0
    assert r.setrange(b"k", 100, b"") == 11
    assert c.call("SETRANGE", "k", "-1", "x") == e("ERR offset is out of range")
    assert c.call("SETRANGE", "k", "x", "x") == NOT_INT
    big = e("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    assert c.call("SETRANGE", "k", "536870911", "xx") == big
    assert c.call("SETRANGE", "new", "9223372036854775807", "x") == big
    assert r.exists(b"new") == 0
    assert r.setrange(b"n", 0, b"9") == 4
    assert r.incr(b"n") == 9235


def test_lcs(r, r3, c):
    r.mset({b"a": b"ohmytext", b"b": b"mynewtext"})
    assert c.call("LCS", "a", "b") == b"$6\r\nmytext\r\n"
    assert c.call("LCS", "a", "b", "LEN") == b":6\r\n"
    assert c.call("LCS", "a", "nokey") == b"$0\r\n\r\n"
    idx = c.call("LCS", "a", "b", "IDX")
    assert idx == (b"*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n"
                   b"*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n")
    assert r.lcs(b"a", b"b", idx=True, minmatchlen=4, withmatchlen=True) == [
        b"matches", [[[4, 7], [5, 8], 4]], b"len", 6]
    assert r3.lcs(b"a", b"b", idx=True, withmatchlen=True) == {
        b"matches": [[[4, 7], [5, 8], 4], [[2, 3], [0, 1], 2]], b"len": 6}
    assert c.call("LCS", "a", "b", "LEN", "IDX") == e(
        "ERR If you want both the length and indexes, please just use IDX.")
    assert c.call("LCS", "a", "b", "FOO") == SYNTAX
    assert c.call("LCS", "a", "b", "MINMATCHLEN") == SYNTAX
    assert c.call("LCS", "a", "b", "MINMATCHLEN", "x") == NOT_INT
    assert c.call("LCS", "a") == e("ERR wrong number of arguments for 'lcs' command")


def test_resp3_get(r3):
    assert r3.get(b"nope") is None
    r3.set(b"k", b"v")
    assert r3.get(b"k") == b"v"
    assert r3.set(b"k", b"w", nx=True) is None


def test_resp3_null_bytes(raw, r):
    c = raw()
    assert c.call("HELLO", "3").startswith(b"%")
    assert c.call("GET", "nope") == b"_\r\n"
    assert c.call("MGET", "nope") == b"*1\r\n_\r\n"


def test_integers_are_canonical(r):
    for v in (b"0", b"-1", b"9223372036854775807", b"-9223372036854775808", b"007", b"-0", b"1e3"):
        r.set(b"k", v)
        assert r.get(b"k") == v
        assert r.strlen(b"k") == len(v)
        assert r.append(b"k", b"") == len(v)


def test_redis_cli(cli):
    assert cli("SET", "clik", "41").strip() == "OK"
    assert cli("INCR", "clik").strip() == "42"
    assert cli("INCRBYFLOAT", "clik", "0.5").strip() == "42.5"
    assert cli("GET", "nokey").strip() == ""
    assert cli("INCR", "clik").strip() == "ERR value is not an integer or out of range"
    assert cli("MGET", "clik", "nokey").splitlines() == ["42.5", ""]
