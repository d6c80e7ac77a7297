"""Core commands of Redis 8.6 and 8.8: XADD IDMP / IDMPAUTO with XCFGSET and
XIDMPRECORD (idempotent production), XNACK (releasing pending entries back
to the group) and INCREX (a bounded increment with an expiry in one step).
Replies in RESP2 and RESP3, the error strings, the effect on XPENDING and
XINFO, and what each write replays as (the AOF, then a restart from it)."""

import glob
import os
import time

import pytest
import redis

from conftest import err

NOT_INT = "value is not an integer or out of range"


def x(r, cmd, *args):
    """The reply as sent (a bytes name bypasses redis-py's reply callbacks)."""
    return r.execute_command(cmd.encode(), *args)


def info(r, key="s"):
    reply = x(r, "XINFO", "STREAM", key)
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2]))


def aof_text(s):
    (incr,) = glob.glob(os.path.join(s.workdir, "appendonlydir", "*.incr.aof"))
    with open(incr, "rb") as f:
        return f.read()


# ---- INCREX -----------------------------------------------------------------


def test_increx_defaults_and_byint(r):
    assert x(r, "INCREX", "k") == [1, 1]
    assert x(r, "INCREX", "k") == [2, 1]
    r.set("k", 100)
    assert x(r, "INCREX", "k", "BYINT", "5") == [105, 5]
    assert x(r, "INCREX", "k", "BYINT", "-10") == [95, -10]
    assert x(r, "INCREX", "k", "byint", "0") == [95, 0]
    assert x(r, "OBJECT", "ENCODING", "k") == b"int"


def test_increx_bounds_refuse_or_saturate(r):
    r.set("k", 10)
    # Out of range: refused, nothing changes.
    assert x(r, "INCREX", "k", "BYINT", "10", "UBOUND", "15") == [10, 0]
    assert r.get("k") == b"10"
    assert x(r, "INCREX", "k", "BYINT", "10", "UBOUND", "15", "SATURATE") == [15, 5]
    assert x(r, "INCREX", "k", "BYINT", "-20", "LBOUND", "5", "SATURATE") == [5, -10]
    assert x(r, "INCREX", "k", "BYINT", "5", "UBOUND", "10") == [10, 5]
    # A value already outside the range moves to the bound with SATURATE.
    r.set("k", 50)
    assert x(r, "INCREX", "k", "BYINT", "5", "UBOUND", "30") == [50, 0]
    assert x(r, "INCREX", "k", "BYINT", "5", "UBOUND", "30", "SATURATE") == [30, -20]
    assert x(r, "INCREX", "k", "BYINT", "-25", "UBOUND", "30") == [5, -25]
    # Options in any order.
    r.set("k", 5)
    assert x(r, "INCREX", "k", "LBOUND", "0", "BYINT", "100", "UBOUND", "10", "SATURATE") == [10, 5]
    # A missing key outside the range is not created.
    r.delete("k")
    assert x(r, "INCREX", "k", "BYINT", "5", "LBOUND", "10") == [0, 0]
    assert r.exists("k") == 0


def test_increx_integer_limits(r):
    big = 9223372036854775800
    r.set("k", big)
    assert x(r, "INCREX", "k", "BYINT", str(big)) == [big, 0]
    assert x(r, "INCREX", "k", "BYINT", str(big), "SATURATE") == [2**63 - 1, 7]
    r.set("k", -big)
    assert x(r, "INCREX", "k", "BYINT", str(-big), "SATURATE") == [-(2**63), -8]
    r.set("k", big)
    assert err(x, r, "INCREX", "k", "BYINT", "1", "SATURATE", "UBOUND", str(-(2**63))) == "applied increment would overflow"


def test_increx_byfloat_resp2_and_resp3(r, r3):
    r.set("f", "1.5")
    assert x(r, "INCREX", "f", "BYFLOAT", "0.25") == [b"1.75", b"0.25"]
    assert x(r, "INCREX", "f", "BYFLOAT", "100", "UBOUND", "42.5") == [b"1.75", b"0"]
    assert x(r, "INCREX", "f", "BYFLOAT", "100", "UBOUND", "42.5", "SATURATE") == [b"42.5", b"40.75"]
    assert r.get("f") == b"42.5"
    # Long double arithmetic, printed as INCRBYFLOAT prints.
    r.set("g", "0.1")
    x(r, "INCREX", "g", "BYFLOAT", "0.1")
    assert x(r, "INCREX", "g", "BYFLOAT", "0.1") == [b"0.3", b"0.1"]
    assert x(r3, "INCREX", "f", "BYFLOAT", "-2.5") == [40.0, -2.5]
    assert x(r3, "INCREX", "n", "BYINT", "3") == [3, 3]
    assert x(r3, "INCREX", "f", "BYFLOAT", "-100", "LBOUND", "-5.5", "SATURATE") == [-5.5, -45.5]


def test_increx_errors(r):
    r.rpush("l", "a")
    assert err(x, r, "INCREX") == "wrong number of arguments for 'increx' command"
    assert err(x, r, "INCREX", "l").startswith("WRONGTYPE")
    for bad in (["FOO"], ["BYINT", "1", "FOO"], ["BYINT", "1", "BYFLOAT", "1"], ["BYINT", "1", "BYINT", "2"],
                ["EX", "10", "PX", "5000"], ["EX", "10", "PERSIST"], ["PERSIST", "EX", "10"], ["PERSIST", "ENX"],
                ["ENX", "PERSIST"], ["SATURATE", "SATURATE"], ["LBOUND", "0", "LBOUND", "1"], ["BYINT"]):
        assert err(x, r, "INCREX", "k", *bad) == "syntax error", bad
    assert err(x, r, "INCREX", "k", "ENX") == "ENX flag requires an expiration option (EX, PX, EXAT or PXAT)"
    assert err(x, r, "INCREX", "k", "BYINT", "1.5") == "Increment is not an integer"
    assert err(x, r, "INCREX", "k", "BYFLOAT", "abc") == "Increment is not a valid float"
    assert err(x, r, "INCREX", "k", "BYFLOAT", "+inf") == "BYFLOAT increment cannot be Infinity"
    assert err(x, r, "INCREX", "k", "BYINT", "1", "LBOUND", "10", "UBOUND", "5") == "LBOUND can't be greater than UBOUND"
    assert err(x, r, "INCREX", "k", "BYFLOAT", "1", "LBOUND", "10.5", "UBOUND", "1.5") == "LBOUND can't be greater than UBOUND"
    assert err(x, r, "INCREX", "k", "BYINT", "1", "LBOUND", "x") == "LBOUND is not an integer"
    assert err(x, r, "INCREX", "k", "BYFLOAT", "1", "UBOUND", "x") == "UBOUND is not a valid float"
    assert err(x, r, "INCREX", "k", "EX", "0") == "invalid expire time in 'increx' command"
    r.set("s", "hello")
    assert err(x, r, "INCREX", "s", "BYINT", "1") == NOT_INT
    assert err(x, r, "INCREX", "s", "BYFLOAT", "1") == "value is not a valid float"
    r.set("i", "inf")
    assert err(x, r, "INCREX", "i", "BYFLOAT", "1") == "value cannot be Infinity"
    assert r.get("i") == b"inf" and r.exists("k") == 0


def test_increx_expiry(r):
    x(r, "INCREX", "k", "EX", "100")
    assert 0 < r.ttl("k") <= 100
    r.set("k", 5, ex=1000)
    x(r, "INCREX", "k")
    assert r.ttl("k") > 990
    # ENX keeps an existing TTL, sets one where there is none.
    x(r, "INCREX", "k", "EX", "10", "ENX")
    assert r.ttl("k") > 990
    x(r, "INCREX", "k", "PERSIST")
    assert r.ttl("k") == -1
    x(r, "INCREX", "k", "PX", "100000", "ENX")
    assert 0 < r.pttl("k") <= 100000
    # Refused: neither the value nor the TTL changes.
    r.set("k", 10)
    assert x(r, "INCREX", "k", "BYINT", "100", "UBOUND", "15", "EX", "100") == [10, 0]
    assert r.ttl("k") == -1
    # A deadline already past deletes the key (not with ENX on a TTL'd key).
    assert x(r, "INCREX", "k", "EXAT", "1") == [11, 1]
    assert r.exists("k") == 0
    r.set("k", 10, ex=500)
    x(r, "INCREX", "k", "EXAT", "1", "ENX")
    assert r.get("k") == b"11" and r.ttl("k") > 100


def test_increx_replays_as_set(start_server):
    s = start_server("--appendonly", "yes", "--appendfsync", "always")
    r = redis.Redis(host="127.0.0.1", port=s.port)
    r.set("k", 10)
    x(r, "INCREX", "k", "BYINT", "5")
    x(r, "INCREX", "k", "BYINT", "100", "UBOUND", "80", "SATURATE")
    x(r, "INCREX", "k", "BYINT", "100", "UBOUND", "80")  # refused: not replayed
    x(r, "INCREX", "f", "BYFLOAT", "0.1")
    x(r, "INCREX", "f", "BYFLOAT", "0.2", "EX", "1000")
    x(r, "INCREX", "f", "PERSIST", "BYFLOAT", "1")
    r.set("gone", 1)
    x(r, "INCREX", "gone", "PXAT", "1")
    x(r, "INCREX", "never", "PXAT", "1")
    aof = aof_text(s)
    assert b"never" not in aof
    assert b"INCREX" not in aof
    assert b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n15\r\n$7\r\nKEEPTTL\r\n" in aof
    assert b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n80\r\n$7\r\nKEEPTTL\r\n" in aof
    assert aof.count(b"$1\r\nk\r\n") == 3
    assert b"*4\r\n$3\r\nSET\r\n$1\r\nf\r\n$3\r\n0.1\r\n$7\r\nKEEPTTL\r\n" in aof
    assert b"*5\r\n$3\r\nSET\r\n$1\r\nf\r\n$3\r\n0.3\r\n$4\r\nPXAT\r\n" in aof
    assert b"*3\r\n$3\r\nSET\r\n$1\r\nf\r\n$3\r\n1.3\r\n" in aof
    assert b"*2\r\n$3\r\nDEL\r\n$4\r\ngone\r\n" in aof
    s.stop()
    s.start()
    r = redis.Redis(host="127.0.0.1", port=s.port)
    assert r.get("k") == b"80" and r.get("f") == b"1.3" and r.ttl("f") == -1 and r.exists("gone") == 0


def test_increx_command_info(r):
    (doc,) = x(r, "COMMAND", "INFO", "increx")
    assert doc[0] == b"increx" and doc[1] == -2
    assert set(doc[2]) == {b"write", b"denyoom", b"fast"}
    assert set(doc[6]) == {b"@write", b"@string", b"@fast"}


# ---- XADD IDMP / IDMPAUTO, XCFGSET -------------------------------------------


def test_xadd_idmp_dedupes(r):
    a = x(r, "XADD", "s", "IDMP", "p1", "pay-1", "*", "amount", "100")
    assert x(r, "XADD", "s", "IDMP", "p1", "pay-1", "*", "amount", "200") == a
    b = x(r, "XADD", "s", "IDMP", "p2", "pay-1", "*", "amount", "100")
    assert b != a
    c = x(r, "XADD", "s", "MAXLEN", "~", "100", "IDMP", "p1", "pay-2", "*", "f", "v")
    assert x(r, "XADD", "s", "IDMP", "p1", "pay-2", "KEEPREF", "*", "f", "w") == c
    assert r.xlen("s") == 3
    assert x(r, "XRANGE", "s", "-", "+")[0][1] == [b"amount", b"100"]
    i = info(r)
    assert (i[b"pids-tracked"], i[b"iids-tracked"], i[b"iids-added"], i[b"iids-duplicates"]) == (2, 3, 3, 2)
    assert (i[b"idmp-duration"], i[b"idmp-maxsize"]) == (100, 100)
    # NOMKSTREAM on a missing key.
    assert x(r, "XADD", "t", "NOMKSTREAM", "IDMP", "p", "i", "*", "f", "v") is None


def test_xadd_idmpauto_hashes_the_fields(r):
    a = x(r, "XADD", "s", "IDMPAUTO", "p1", "*", "f1", "a", "f2", "b")
    assert x(r, "XADD", "s", "IDMPAUTO", "p1", "*", "f2", "b", "f1", "a") == a
    assert x(r, "XADD", "s", "IDMPAUTO", "p1", "*", "f1", "a", "f2", "c") != a
    assert x(r, "XADD", "s", "IDMPAUTO", "p2", "*", "f1", "a", "f2", "b") != a
    assert r.xlen("s") == 3


def test_xadd_idmp_errors(r):
    assert err(x, r, "XADD", "s", "IDMP", "p1", "*", "f", "v") == "Invalid stream ID specified as stream command argument"
    assert err(x, r, "XADD", "s", "IDMP", "p1", "i1", "1-1", "f", "v") == "IDMP/IDMPAUTO can be used only with auto-generated IDs"
    assert err(x, r, "XADD", "s", "IDMPAUTO", "p1", "1-*", "f", "v") == "IDMP/IDMPAUTO can be used only with auto-generated IDs"
    assert err(x, r, "XADD", "s", "IDMP", "p1", "a", "IDMP", "p2", "b", "*", "f", "v") == "IDMP/IDMPAUTO specified multiple times"
    assert err(x, r, "XADD", "s", "IDMPAUTO", "p1", "IDMP", "p2", "b", "*", "f", "v") == "IDMP/IDMPAUTO specified multiple times"
    assert err(x, r, "XADD", "s", "IDMP", "", "i", "*", "f", "v") == "IDMP requires a non-empty producer ID"
    assert err(x, r, "XADD", "s", "IDMP", "p", "", "*", "f", "v") == "IDMP requires a non-empty idempotent ID"
    assert err(x, r, "XADD", "s", "IDMPAUTO", "", "*", "f", "v") == "IDMPAUTO requires a non-empty producer ID"
    assert r.exists("s") == 0


def test_xcfgset(r, r3):
    assert err(x, r, "XCFGSET", "s", "IDMP-DURATION", "5") == "no such key"
    x(r, "XADD", "s", "IDMP", "p1", "a", "*", "f", "v")
    x(r, "XADD", "s", "IDMP", "p1", "b", "*", "f", "v")
    assert x(r, "XCFGSET", "s", "IDMP-DURATION", "100") == b"OK"  # unchanged: history kept
    assert info(r)[b"iids-tracked"] == 2
    assert x(r, "XCFGSET", "s", "IDMP-DURATION", "60", "IDMP-MAXSIZE", "3") == b"OK"
    i = info(r3)
    assert (i[b"idmp-duration"], i[b"idmp-maxsize"], i[b"pids-tracked"], i[b"iids-tracked"], i[b"iids-added"]) == (60, 3, 0, 0, 2)
    ids = [x(r, "XADD", "s", "IDMP", "p1", f"r{n}", "*", "f", "v") for n in range(4)]
    assert x(r, "XADD", "s", "IDMP", "p1", "r0", "*", "f", "v") not in ids  # evicted by MAXSIZE 3
    assert x(r, "XADD", "s", "IDMP", "p1", "r3", "*", "f", "v") == ids[3]
    assert err(x, r, "XCFGSET", "s") == "At least one parameter (IDMP-DURATION or IDMP-MAXSIZE) is required"
    assert err(x, r, "XCFGSET", "s", "IDMP-DURATION") == "syntax error"
    assert err(x, r, "XCFGSET", "s", "INVALID") == "syntax error"
    assert err(x, r, "XCFGSET", "s", "IDMP-DURATION", "3.14") == NOT_INT
    assert err(x, r, "XCFGSET", "s", "IDMP-MAXSIZE", "INVALID", "IDMP-DURATION") == NOT_INT
    assert err(x, r, "XCFGSET", "s", "IDMP-DURATION", "86401") == "IDMP-DURATION must be between 1 and 86400 seconds"
    assert err(x, r, "XCFGSET", "s", "IDMP-DURATION", "0") == "IDMP-DURATION must be between 1 and 86400 seconds"
    assert err(x, r, "XCFGSET", "s", "IDMP-MAXSIZE", "10001") == "IDMP-MAXSIZE must be between 1 and 10000 entries"
    assert info(r)[b"idmp-maxsize"] == 3
    r.set("str", "x")
    assert err(x, r, "XCFGSET", "str", "IDMP-MAXSIZE", "5").startswith("WRONGTYPE")


def test_idmp_duration_expires_ids(r):
    a = x(r, "XADD", "s", "IDMP", "p1", "r", "*", "f", "v")
    x(r, "XCFGSET", "s", "IDMP-DURATION", "1")
    a = x(r, "XADD", "s", "IDMP", "p1", "r", "*", "f", "v")
    assert x(r, "XADD", "s", "IDMP", "p1", "r", "*", "f", "v") == a
    time.sleep(1.2)
    assert info(r)[b"iids-tracked"] == 0
    assert x(r, "XADD", "s", "IDMP", "p1", "r", "*", "f", "v") != a


def test_idmp_config_defaults(r):
    try:
        assert r.config_get("stream-idmp-*") == {"stream-idmp-duration": "100", "stream-idmp-maxsize": "100"}
        assert err(r.config_set, "stream-idmp-duration", "86401").startswith("CONFIG SET failed")
        r.config_set("stream-idmp-maxsize", "7")
        x(r, "XADD", "s", "*", "f", "v")
        assert info(r)[b"idmp-maxsize"] == 7
    finally:
        r.config_set("stream-idmp-maxsize", "100")


def test_idmp_replays_as_xadd_and_xidmprecord(start_server):
    s = start_server("--appendonly", "yes", "--appendfsync", "always")
    r = redis.Redis(host="127.0.0.1", port=s.port)
    a = x(r, "XADD", "s", "IDMP", "p1", "req", "MAXLEN", "100", "*", "f", "v")
    assert x(r, "XADD", "s", "IDMP", "p1", "req", "*", "f", "w") == a
    x(r, "XCFGSET", "s", "IDMP-MAXSIZE", "50")  # forgets p1's "req"
    b = x(r, "XADD", "s", "IDMPAUTO", "p2", "*", "f", "v")
    c = x(r, "XADD", "s", "IDMP", "p1", "req2", "*", "f", "v")
    aof = aof_text(s)
    assert b"IDMPAUTO" not in aof and b"$4\r\nIDMP\r\n" not in aof
    assert b"$11\r\nXIDMPRECORD\r\n$1\r\ns\r\n$2\r\np1\r\n$3\r\nreq\r\n$%d\r\n%s\r\n" % (len(a), a) in aof
    assert aof.count(b"XIDMPRECORD") == 3
    assert aof.count(b"$4\r\nXADD\r\n") == 3
    s.stop()
    s.start()
    r = redis.Redis(host="127.0.0.1", port=s.port)
    assert r.xlen("s") == 3
    assert x(r, "XADD", "s", "IDMP", "p1", "req2", "*", "f", "x") == c
    assert x(r, "XADD", "s", "IDMPAUTO", "p2", "*", "f", "v") == b
    i = info(r)
    assert (i[b"idmp-maxsize"], i[b"pids-tracked"], i[b"iids-tracked"]) == (50, 2, 2)
    assert r.xlen("s") == 3
    assert x(r, "XADD", "s", "IDMP", "p1", "req", "*", "f", "x") != a
    assert r.xlen("s") == 4


# ---- XNACK ------------------------------------------------------------------


def setup_group(r, n=3):
    for i in range(1, n + 1):
        x(r, "XADD", "s", f"{i}-0", "f", f"v{i}")
    x(r, "XGROUP", "CREATE", "s", "g", "0")
    x(r, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")


def test_xnack_modes(r, r3):
    setup_group(r)
    x(r, "XCLAIM", "s", "g", "c1", "0", "1-0", "2-0", "3-0", "RETRYCOUNT", "3")
    assert x(r, "XNACK", "s", "g", "FAIL", "IDS", "1", "1-0") == 1
    assert x(r3, "XNACK", "s", "g", "SILENT", "IDS", "2", "2-0", "9-0") == 1
    assert x(r, "XNACK", "s", "g", "FATAL", "IDS", "1", "3-0") == 1
    rows = x(r, "XPENDING", "s", "g", "-", "+", "10")
    assert rows == [[b"1-0", b"", -1, 3], [b"2-0", b"", -1, 2], [b"3-0", b"", -1, 2**63 - 1]]
    # Summary: released entries belong to no consumer.
    assert x(r, "XPENDING", "s", "g") == [3, b"1-0", b"3-0", []]
    assert r.xinfo_consumers("s", "g")[0]["pending"] == 0
    # RETRYCOUNT sets the count; an entry not pending is not counted.
    x(r, "XACK", "s", "g", "3-0")
    assert x(r, "XNACK", "s", "g", "FAIL", "IDS", "2", "1-0", "3-0", "RETRYCOUNT", "7") == 1
    assert x(r, "XPENDING", "s", "g", "-", "+", "10")[0][3] == 7
    # FORCE creates unowned entries for stored IDs only.
    assert x(r, "XNACK", "s", "g", "FATAL", "IDS", "2", "3-0", "8-0", "FORCE") == 1
    assert x(r, "XPENDING", "s", "g", "3-0", "3-0", "1")[0][1:] == [b"", -1, 2**63 - 1]


def test_xnack_entries_are_claimed_first(r):
    setup_group(r)
    x(r, "XNACK", "s", "g", "SILENT", "IDS", "1", "3-0")
    # A CLAIM read with a long min-idle-time takes the released entry at once.
    reply = x(r, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "100000", "STREAMS", "s", ">")
    assert [e[0] for e in reply[0][1]] == [b"3-0"]
    assert x(r, "XPENDING", "s", "g", "3-0", "3-0", "1")[0][1] == b"c2"
    x(r, "XNACK", "s", "g", "FAIL", "IDS", "1", "2-0")
    nxt, claimed, _ = x(r, "XAUTOCLAIM", "s", "g", "c3", "3600000", "0", "JUSTID")
    assert claimed == [b"2-0"]


def test_xnack_errors(r):
    assert err(x, r, "XNACK", "s", "g", "FAIL", "IDS", "1") == "wrong number of arguments for 'xnack' command"
    assert err(x, r, "XNACK", "s", "g", "FAIL", "IDS", "1", "1-0") == "NOGROUP No such key 's' or consumer group 'g'"
    setup_group(r, 1)
    assert err(x, r, "XNACK", "s", "nog", "FAIL", "IDS", "1", "1-0") == "NOGROUP No such key 's' or consumer group 'nog'"
    assert err(x, r, "XNACK", "s", "g", "LOUD", "IDS", "1", "1-0") == "syntax error"
    assert err(x, r, "XNACK", "s", "g", "FAIL", "ID", "1", "1-0") == "syntax error"
    assert err(x, r, "XNACK", "s", "g", "FAIL", "IDS", "0", "1-0") == "Number of IDs must be a positive integer"
    assert err(x, r, "XNACK", "s", "g", "FAIL", "IDS", "2", "1-0") == "The `numids` parameter must match the number of arguments"
    assert err(x, r, "XNACK", "s", "g", "FAIL", "IDS", "1", "1-0", "FORCE", "FORCE") == "syntax error"
    assert err(x, r, "XNACK", "s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "-1") == "Invalid RETRYCOUNT option argument for XNACK"
    assert err(x, r, "XNACK", "s", "g", "FAIL", "IDS", "1", "bad") == "Invalid stream ID specified as stream command argument"
    r.set("str", "x")
    assert err(x, r, "XNACK", "str", "g", "FAIL", "IDS", "1", "1-0").startswith("WRONGTYPE")
    # Nothing was released by the failed calls.
    assert x(r, "XPENDING", "s", "g", "-", "+", "10")[0][1] == b"c1"


def test_xnack_replays_from_aof(start_server):
    s = start_server("--appendonly", "yes", "--appendfsync", "always")
    r = redis.Redis(host="127.0.0.1", port=s.port)
    setup_group(r)
    x(r, "XNACK", "s", "g", "SILENT", "IDS", "2", "1-0", "2-0")
    x(r, "XNACK", "s", "g", "FATAL", "IDS", "1", "3-0", "RETRYCOUNT", "5")
    before = x(r, "XPENDING", "s", "g", "-", "+", "10")
    assert b"$5\r\nXNACK\r\n" in aof_text(s)
    s.stop()
    s.start()
    r = redis.Redis(host="127.0.0.1", port=s.port)
    assert x(r, "XPENDING", "s", "g", "-", "+", "10") == before == [[b"1-0", b"", -1, 0], [b"2-0", b"", -1, 0], [b"3-0", b"", -1, 5]]


@pytest.mark.parametrize("argv", [
    ["XNACK", "k", "g", "FAIL", "IDS", "1", "1-0"],
    ["XCFGSET", "k", "IDMP-MAXSIZE", "5"],
    ["XIDMPRECORD", "k", "p", "i", "1-0"],
    ["INCREX", "k", "BYINT", "1"],
])
def test_commands_in_the_table(r, argv):
    assert argv[0].lower().encode() in x(r, "COMMAND", "LIST")
    assert x(r, "COMMAND", "GETKEYS", *argv) == [b"k"]
    (doc,) = x(r, "COMMAND", "INFO", argv[0])
    assert b"@write" in doc[6] and (b"@stream" in doc[6] or b"@string" in doc[6])
