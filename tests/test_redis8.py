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
