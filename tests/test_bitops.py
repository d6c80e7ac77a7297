"""Bitmap commands: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO."""

import pytest
import redis


def e(msg: str) -> bytes:
    return b"-" + msg.encode() + b"\r\n"


NOT_INT = e("ERR value is not an integer or out of range")
SYNTAX = e("ERR syntax error")
BAD_OFFSET = e("ERR bit offset is not an integer or out of range")
BAD_BIT = e("ERR bit is not an integer or out of range")
BAD_TYPE = e("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")


def test_setbit_getbit(r, c):
    assert r.setbit(b"b", 7, 1) == 0
    assert r.get(b"b") == b"\x01"
    assert r.setbit(b"b", 7, 0) == 1
    assert r.setbit(b"b", 0, 1) == 0
    assert r.get(b"b") == b"\x80"
    assert r.setbit(b"b", 17, 1) == 0
    assert r.get(b"b") == b"\x80\x00\x40"
    assert r.getbit(b"b", 0) == 1
    assert r.getbit(b"b", 1) == 0
    assert r.getbit(b"b", 17) == 1
    assert r.getbit(b"b", 10000) == 0
    assert r.getbit(b"nokey", 3) == 0
    r.set(b"n", b"1")  # "1" is 0x31 = 00110001
    assert [r.getbit(b"n", i) for i in range(8)] == [0, 0, 1, 1, 0, 0, 0, 1]
    assert r.setbit(b"n", 6, 1) == 0
    assert r.get(b"n") == b"3"
    assert c.call("SETBIT", "b", "-1", "1") == BAD_OFFSET
    assert c.call("SETBIT", "b", "x", "1") == BAD_OFFSET
    assert c.call("SETBIT", "b", str(512 * 1024 * 1024 * 8), "1") == BAD_OFFSET
    assert c.call("GETBIT", "b", str(512 * 1024 * 1024 * 8)) == BAD_OFFSET
    assert c.call("SETBIT", "b", "0", "2") == BAD_BIT
    assert c.call("SETBIT", "b", "0", "-1") == BAD_BIT
    assert c.call("SETBIT", "b", "0", "x") == BAD_BIT
    assert c.call("SETBIT", "b", "0") == e("ERR wrong number of arguments for 'setbit' command")


def test_bitcount(r, c):
    r.set(b"k", b"foobar")
    assert r.bitcount(b"k") == 26
    assert r.bitcount(b"k", 0, 0) == 4
    assert r.bitcount(b"k", 1, 1) == 6
    assert r.bitcount(b"k", -2, -1) == 7
    assert r.bitcount(b"k", 5, 30, "BIT") == 17
    assert r.bitcount(b"k", 1, 1, "bit") == 1
    assert r.bitcount(b"k", -1, -2) == 0
    assert r.bitcount(b"k", 3, 1) == 0
    assert r.bitcount(b"k", 0, 100) == 26
    assert r.bitcount(b"nokey") == 0
    assert r.bitcount(b"nokey", 0, 10, "BIT") == 0
    assert c.call("BITCOUNT", "k", "0") == SYNTAX
    assert c.call("BITCOUNT", "k", "0", "1", "BOOM") == SYNTAX
    assert c.call("BITCOUNT", "k", "0", "1", "BIT", "x") == SYNTAX
    assert c.call("BITCOUNT", "k", "a", "1") == NOT_INT
    assert c.call("BITCOUNT") == e("ERR wrong number of arguments for 'bitcount' command")
    r.set(b"n", b"-1")  # '-' 0x2d has 4 bits set, '1' 0x31 has 3
    assert r.bitcount(b"n") == 7


def test_bitpos(r, c):
    r.set(b"k", b"\xff\xf0\x00")
    assert r.bitpos(b"k", 0) == 12
    assert r.bitpos(b"k", 1) == 0
    assert r.bitpos(b"k", 1, 2) == -1
    assert r.bitpos(b"k", 0, 2) == 16
    assert r.bitpos(b"k", 1, 1, -1) == 8
    assert r.bitpos(b"k", 0, 0, 0) == -1  # end given: no clear bit in range
    assert r.bitpos(b"k", 1, 7, 15, "BIT") == 7
    assert r.bitpos(b"k", 0, 7, 15, "bit") == 12
    assert r.bitpos(b"k", 0, 0, 11, "bit") == -1
    r.set(b"ones", b"\xff\xff")
    assert r.bitpos(b"ones", 0) == 16  # open range: the first bit after the string
    assert r.bitpos(b"ones", 0, 0) == 16
    assert r.bitpos(b"ones", 0, 0, -1) == -1
    assert r.bitpos(b"nokey", 1) == -1
    assert r.bitpos(b"nokey", 0) == 0
    r.set(b"empty", b"")
    assert r.bitpos(b"empty", 0) == -1
    assert c.call("BITPOS", "k", "2") == e("ERR The bit argument must be 1 or 0.")
    assert c.call("BITPOS", "k", "x") == NOT_INT
    assert c.call("BITPOS", "k", "1", "0", "1", "BYTES") == SYNTAX
    assert c.call("BITPOS", "k", "1", "0", "1", "BIT", "x") == SYNTAX
    assert c.call("BITPOS", "k", "1", "a") == NOT_INT


def test_bitop(r, c):
    r.set(b"a", b"\xff\x0f")
    r.set(b"b", b"\xf0")
    assert r.bitop("AND", b"d", b"a", b"b") == 2
    assert r.get(b"d") == b"\xf0\x00"
    assert r.bitop("or", b"d", b"a", b"b") == 2
    assert r.get(b"d") == b"\xff\x0f"
    assert r.bitop("XOR", b"d", b"a", b"b") == 2
    assert r.get(b"d") == b"\x0f\x0f"
    assert r.bitop("NOT", b"d", b"b") == 1
    assert r.get(b"d") == b"\x0f"
    assert r.bitop("AND", b"d", b"a", b"nokey") == 2
    assert r.get(b"d") == b"\x00\x00"
    # An empty result deletes the destination.
    assert r.bitop("OR", b"d", b"nokey", b"nokey2") == 0
    assert r.exists(b"d") == 0
    r.set(b"d", b"x", px=100000)
    assert r.bitop("OR", b"d", b"a") == 2
    assert r.get(b"d") == b"\xff\x0f"
    assert c.call("BITOP", "NOT", "d", "a", "b") == e("ERR BITOP NOT must be called with a single source key.")
    assert c.call("BITOP", "NAND", "d", "a") == SYNTAX
    assert c.call("BITOP", "AND", "d") == e("ERR wrong number of arguments for 'bitop' command")


def test_bitfield(r, c):
    assert r.bitfield(b"bf").set("u8", 0, 255).get("u8", 0).execute() == [0, 255]
    assert r.get(b"bf") == b"\xff"
    assert r.bitfield(b"bf").get("i8", 0).get("u4", 4).get("i4", "#1").execute() == [-1, 15, -1]
    assert r.bitfield(b"bf").incrby("u8", 0, 1).execute() == [0]  # WRAP by default
    assert r.bitfield(b"bf", default_overflow="SAT").incrby("u8", 0, -5).incrby("i8", 0, 200).execute() == [0, 127]
    assert r.bitfield(b"bf", default_overflow="FAIL").incrby("i8", 0, 1).execute() == [None]
    assert c.call("BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "1", "GET", "i8", "0") == \
        b"*2\r\n$-1\r\n:127\r\n"
    assert r.bitfield(b"bf").set("i64", 0, -1).get("i64", 0).get("u63", 1).execute() == [127 << 56, -1, (1 << 63) - 1]
    assert r.bitfield(b"bf").set("u8", "#2", 0xab).execute() == [255]
    assert r.strlen(b"bf") == 8
    assert r.bitfield(b"nokey").get("u8", 100).execute() == [0]
    assert r.exists(b"nokey") == 0
    assert c.call("BITFIELD", "bf") == b"*0\r\n"
    assert c.call("BITFIELD", "bf", "GET", "u64", "0") == BAD_TYPE
    assert c.call("BITFIELD", "bf", "GET", "i65", "0") == BAD_TYPE
    assert c.call("BITFIELD", "bf", "GET", "x8", "0") == BAD_TYPE
    assert c.call("BITFIELD", "bf", "GET", "i0", "0") == BAD_TYPE
    assert c.call("BITFIELD", "bf", "GET", "u8", "-1") == BAD_OFFSET
    assert c.call("BITFIELD", "bf", "GET", "u8", "#-1") == BAD_OFFSET
    assert c.call("BITFIELD", "bf", "SET", "u8", "0", "x") == NOT_INT
    assert c.call("BITFIELD", "bf", "SET", "u8", "0") == SYNTAX
    assert c.call("BITFIELD", "bf", "FOO") == SYNTAX
    assert c.call("BITFIELD", "bf", "OVERFLOW", "MAYBE") == e("ERR Invalid OVERFLOW type specified")
    assert c.call("BITFIELD", "bf", "SET", "u8", "4294967296", "1") == BAD_OFFSET


def test_bitfield_ro(r, c):
    r.set(b"k", b"\x0f")
    assert c.call("BITFIELD_RO", "k", "GET", "u4", "4", "GET", "i4", "4") == b"*2\r\n:15\r\n:-1\r\n"
    assert c.call("BITFIELD_RO", "k", "SET", "u4", "4", "1") == e("ERR BITFIELD_RO only supports the GET subcommand")
    assert c.call("BITFIELD_RO", "k", "INCRBY", "u4", "4", "1") == e("ERR BITFIELD_RO only supports the GET subcommand")
    assert c.call("BITFIELD_RO", "k", "GET", "u4") == SYNTAX
    assert c.call("BITFIELD_RO") == e("ERR wrong number of arguments for 'bitfield_ro' command")


def test_resp3_bitfield_fail_is_null(r3):
    assert r3.bitfield(b"k", default_overflow="FAIL").incrby("u2", 0, 5).execute() == [None]


def test_redis_cli(cli):
    assert cli("SETBIT", "clibits", "3", "1").strip() == "0"
    assert cli("BITCOUNT", "clibits").strip() == "1"
    assert cli("BITPOS", "clibits", "1").strip() == "3"
    assert cli("BITFIELD", "clibits", "GET", "u4", "0").strip() == "1"
