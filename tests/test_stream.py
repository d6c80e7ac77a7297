"""STREAM commands: XADD ... XINFO with consumer groups, and Redis 8.2's
XDELEX / XACKDEL / KEEPREF-DELREF-ACKED. Replies and error strings as Redis
gives them, RESP2 and RESP3 shapes where they differ
(XREAD/XREADGROUP and XINFO answer maps in RESP3), checked on raw bytes
where redis-py would reshape them."""

import time

import pytest
import redis

from conftest import err, ex

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
BAD_ID = "Invalid stream ID specified as stream command argument"


def x(r, cmd, *args):
    """The reply as sent, unshaped: redis-py looks up its reply callbacks by
    a str command name, so a bytes name bypasses them."""
    return r.execute_command(cmd.encode(), *args)


def fill(r, key, n, start=1):
    for i in range(start, start + n):
        r.xadd(key, {"f": i}, id=f"{i}-0")


# ---- XADD / XLEN / XRANGE ---------------------------------------------------


def test_xadd_ids_and_xlen(r):
    auto = r.xadd("s", {"a": 1})
    ms, seq = auto.split(b"-")
    assert int(ms) > 1_600_000_000_000 and seq == b"0"
    assert x(r, "XADD", "t", "5-1", "a", "1") == b"5-1"
    assert x(r, "XADD", "t", "5-*", "a", "2") == b"5-2"
    assert x(r, "XADD", "t", "7-*", "a", "3") == b"7-0"
    # A bare ms is ms-0, not ms-*.
    assert err(x, r, "XADD", "t", "7", "a", "4") == "The ID specified in XADD is equal or smaller than the target stream top item"
    assert x(r, "XADD", "t", "8", "a", "4") == b"8-0"
    assert r.xlen("t") == 4
    assert r.xlen("nokey") == 0
    assert x(r, "XADD", "u", "0-*", "a", "1") == b"0-1"


def test_xadd_errors(r):
    x(r, "XADD", "s", "5-5", "a", "1")
    assert err(x, r, "XADD", "s", "5-5", "a", "1") == "The ID specified in XADD is equal or smaller than the target stream top item"
    assert err(x, r, "XADD", "s", "4-*", "a", "1") == "The ID specified in XADD is equal or smaller than the target stream top item"
    assert err(x, r, "XADD", "s", "0-0", "a", "1") == "The ID specified in XADD must be greater than 0-0"
    assert err(x, r, "XADD", "s", "0", "a", "1") == "The ID specified in XADD must be greater than 0-0"
    assert err(x, r, "XADD", "s", "abc", "a", "1") == BAD_ID
    assert err(x, r, "XADD", "s", "1-abc", "a", "1") == BAD_ID
    assert err(x, r, "XADD", "s", "-", "a", "1") == BAD_ID
    assert err(x, r, "XADD", "s", "*", "a") == "wrong number of arguments for 'xadd' command"
    assert err(x, r, "XADD", "s", "*", "a", "1", "b") == "wrong number of arguments for 'xadd' command"
    assert err(x, r, "XADD", "s", "MAXLEN", "-1", "*", "a", "1") == "The MAXLEN argument must be >= 0."
    assert err(x, r, "XADD", "s", "MAXLEN", "x", "*", "a", "1") == "value is not an integer or out of range"
    assert err(x, r, "XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "a", "1") == "syntax error, MAXLEN and MINID options at the same time are not compatible"
    assert err(x, r, "XADD", "s", "LIMIT", "10", "*", "a", "1") == "syntax error, LIMIT cannot be used without specifying a trimming strategy"
    assert err(x, r, "XADD", "s", "MAXLEN", "5", "LIMIT", "10", "*", "a", "1") == "syntax error, LIMIT cannot be used without the special ~ option"
    assert err(x, r, "XADD", "s", "MAXLEN", "~", "5", "LIMIT", "-1", "*", "a", "1") == "The LIMIT argument must be >= 0."
    x(r, "XSETID", "s", "18446744073709551615-18446744073709551615")
    assert err(x, r, "XADD", "s", "*", "a", "1") == "The stream has exhausted the last possible ID, unable to add more items"
    r.set("str", "v")
    assert err(x, r, "XADD", "str", "*", "a", "1") == WRONGTYPE


def test_xadd_nomkstream_and_trim(r):
    assert x(r, "XADD", "s", "NOMKSTREAM", "*", "a", "1") is None
    assert r.exists("s") == 0
    for i in range(1, 11):
        x(r, "XADD", "s", "MAXLEN", "=", "3", f"{i}-0", "f", str(i))
    assert r.xlen("s") == 3
    assert [e[0] for e in r.xrange("s")] == [b"8-0", b"9-0", b"10-0"]
    x(r, "XADD", "s", "MINID", "10", "11-0", "f", "11")
    assert [e[0] for e in r.xrange("s")] == [b"10-0", b"11-0"]
    # MAXLEN 0 leaves an empty stream that still exists.
    x(r, "XADD", "s", "MAXLEN", "0", "12-0", "f", "12")
    assert r.xlen("s") == 0 and r.exists("s") == 1 and r.type("s") == b"stream"


def test_approx_trim_removes_whole_nodes(r):
    r.config_set("stream-node-max-entries", 10)
    try:
        fill(r, "s", 100)
        assert x(r, "XTRIM", "s", "MAXLEN", "~", "55") == 40
        assert r.xlen("s") == 60
        assert x(r, "XTRIM", "s", "MAXLEN", "55") == 5
        assert x(r, "XTRIM", "s", "MINID", "~", "72") == 25
        assert x(r, "XTRIM", "s", "MINID", "72") == 1
        assert x(r, "XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "10") == 9
        assert r.xlen("s") == 20
    finally:
        r.config_set("stream-node-max-entries", 100)
    assert x(r, "XTRIM", "nokey", "MAXLEN", "0") == 0
    assert err(x, r, "XTRIM", "s", "FOO", "1") == "syntax error"
    assert err(x, r, "XTRIM", "s", "LIMIT", "1", "MAXLEN", "~", "1", "x") == "syntax error"
    assert err(x, r, "XTRIM", "s", "LIMIT", "x", "MAXLEN", "1") == "value is not an integer or out of range"


def test_xrange_and_xrevrange(r):
    fill(r, "s", 5)
    x(r, "XADD", "s", "6-0", "a", "1", "b", "2")
    assert r.xrange("s", "-", "+", count=2) == [(b"1-0", {b"f": b"1"}), (b"2-0", {b"f": b"2"})]
    assert [e[0] for e in r.xrange("s", "(2-0", "(5-0")] == [b"3-0", b"4-0"]
    assert [e[0] for e in r.xrevrange("s", "+", "-", count=3)] == [b"6-0", b"5-0", b"4-0"]
    # "(5" is exclusive of 5-18446744073709551615, so 5-0 is in.
    assert [e[0] for e in r.xrevrange("s", "(5", "3")] == [b"5-0", b"4-0", b"3-0"]
    assert [e[0] for e in r.xrevrange("s", "(5-0", "3")] == [b"4-0", b"3-0"]
    assert [e[0] for e in r.xrange("s", "2", "3")] == [b"2-0", b"3-0"]  # end seq defaults to max
    assert r.xrange("s", "4", "2") == []
    assert r.xrange("nokey", "-", "+") == []
    assert x(r, "XRANGE", "s", "-", "+", "COUNT", "0") is None
    assert x(r, "XRANGE", "s", "-", "+", "COUNT", "-5") is None
    assert x(r, "XRANGE", "s", "6", "6") == [[b"6-0", [b"a", b"1", b"b", b"2"]]]
    assert err(x, r, "XRANGE", "s", "(-", "+") == BAD_ID
    assert err(x, r, "XRANGE", "s", "(18446744073709551615-18446744073709551615", "+") == "invalid start ID for the interval"
    assert err(x, r, "XRANGE", "s", "-", "(0-0") == "invalid end ID for the interval"
    assert err(x, r, "XRANGE", "s", "-", "+", "COUNT") == "syntax error"
    assert err(x, r, "XRANGE", "s", "-", "+", "COUNT", "x") == "value is not an integer or out of range"
    assert err(x, r, "XRANGE", "s", "x", "+") == BAD_ID
    r.set("str", "v")
    assert err(x, r, "XRANGE", "str", "-", "+") == WRONGTYPE


def test_raw_xrange_bytes(raw, r):
    x(r, "XADD", "s", "1-1", "k", "v")
    c = raw()
    assert c.call("XRANGE", "s", "-", "+") == b"*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n"
    assert c.call("XRANGE", "s", "-", "+", "COUNT", "0") == b"*-1\r\n"


def test_xdel_and_first_id(r):
    fill(r, "s", 5)
    assert x(r, "XDEL", "s", "1-0", "3-0", "9-0") == 2
    assert x(r, "XDEL", "nokey", "1-0") == 0
    assert err(x, r, "XDEL", "s", "bad") == BAD_ID
    info = r.xinfo_stream("s")
    assert info["length"] == 3
    assert info["max-deleted-entry-id"] == b"3-0"
    assert info["recorded-first-entry-id"] == b"2-0"
    assert info["entries-added"] == 5
    assert x(r, "XDEL", "s", "2-0", "4-0", "5-0") == 3
    assert r.exists("s") == 1 and r.xlen("s") == 0
    assert r.xinfo_stream("s")["recorded-first-entry-id"] == b"0-0"


# ---- keyspace integration ---------------------------------------------------


def test_type_encoding_scan_copy_rename(r):
    fill(r, "s", 3)
    x(r, "XGROUP", "CREATE", "s", "g", "0")
    r.set("str", "v")
    assert r.type("s") == b"stream"
    assert r.object("encoding", "s") == b"stream"
    assert sorted(r.scan(0, _type="stream")[1]) == [b"s"]
    assert r.copy("s", "c") == 1
    x(r, "XADD", "c", "9-0", "a", "b")
    assert r.xlen("s") == 3 and r.xlen("c") == 4
    assert r.xinfo_groups("c")[0]["name"] == b"g"
    r.rename("c", "d")
    assert r.xlen("d") == 4
    assert r.move("d", 1) == 1
    assert r.exists("d") == 0
    assert r.memory_usage("s") > 0
    assert r.delete("s") == 1
    assert x(r, "COMMAND", "GETKEYS", "XGROUP", "CREATE", "k", "g", "$") == [b"k"]
    assert x(r, "COMMAND", "GETKEYS", "XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0") == [b"a", b"b"]
    assert x(r, "COMMAND", "GETKEYS", "XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", ">") == [b"a"]
    info = x(r, "COMMAND", "INFO", "xread")[0]
    assert info[1] == -4 and b"movablekeys" in info[2] and info[3:6] == [0, 0, 0]


def test_memory_density(r):
    # Same-shaped entries pack their values only: well under Redis's ~15
    # bytes per entry for a one-field numeric stream.
    p = r.pipeline(transaction=False)
    for i in range(1, 10001):
        p.execute_command("XADD", "s", f"{i}-0", "v", str(i))
    p.execute()
    assert r.memory_usage("s", samples=0) < 10 * 10000
    r.config_set("stream-node-max-entries", 5)
    try:
        for i in range(1, 21):
            x(r, "XADD", "t", f"{i}-0", "v", "1")
    finally:
        r.config_set("stream-node-max-entries", 100)
    assert x(r, "XINFO", "STREAM", "t")[3] == 4  # radix-tree-keys: one per node


# ---- XREAD --------------------------------------------------------------------


def test_xread(r):
    fill(r, "a", 3)
    fill(r, "b", 2)
    assert x(r, "XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "1-0") == [
        [b"a", [[b"1-0", [b"f", b"1"]], [b"2-0", [b"f", b"2"]]]],
        [b"b", [[b"2-0", [b"f", b"2"]]]],
    ]
    assert x(r, "XREAD", "STREAMS", "a", "$") is None
    assert x(r, "XREAD", "STREAMS", "a", "+") == [[b"a", [[b"3-0", [b"f", b"3"]]]]]
    assert x(r, "XREAD", "STREAMS", "nokey", "0") is None
    # Nothing to read: BLOCK waits, then answers with its timeout reply.
    assert x(r, "XREAD", "BLOCK", "10", "STREAMS", "a", "$") is None
    assert err(x, r, "XREAD", "STREAMS", "a", "b", "0") == "Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified."
    assert err(x, r, "XREAD", "COUNT", "1", "a", "0") == "syntax error"
    assert err(x, r, "XREAD", "GROUP", "g", "c", "STREAMS", "a", "0") == "The GROUP option is only supported by XREADGROUP. You called XREAD instead."
    assert err(x, r, "XREAD", "NOACK", "STREAMS", "a", "0") == "The NOACK option is only supported by XREADGROUP. You called XREAD instead."
    assert err(x, r, "XREAD", "STREAMS", "a", ">") == "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."
    assert err(x, r, "XREAD", "BLOCK", "-1", "STREAMS", "a", "0") == "timeout is negative"
    assert err(x, r, "XREAD", "BLOCK", "x", "STREAMS", "a", "0") == "timeout is not an integer or out of range"
    assert err(x, r, "XREAD", "STREAMS", "a", "zz") == BAD_ID
    r.set("str", "v")
    assert err(x, r, "XREAD", "STREAMS", "str", "0") == WRONGTYPE
    x(r, "XGROUP", "CREATE", "e", "g", "$", "MKSTREAM")
    assert err(x, r, "XREAD", "STREAMS", "e", "+") == "the stream last element ID is 0-0"


def test_xread_resp3_is_a_map(raw, r):
    x(r, "XADD", "a", "1-0", "f", "v")
    c = raw()
    c.call("HELLO", "3")
    assert c.call("XREAD", "STREAMS", "a", "0") == b"%1\r\n$1\r\na\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert c.call("XREAD", "STREAMS", "a", "$") == b"_\r\n"


# ---- consumer groups --------------------------------------------------------


def test_xgroup_lifecycle(r):
    assert err(x, r, "XGROUP", "CREATE", "s", "g", "$") == (
        "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."
    )
    assert x(r, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM") == b"OK"
    assert r.type("s") == b"stream" and r.xlen("s") == 0
    assert err(x, r, "XGROUP", "CREATE", "s", "g", "$") == "BUSYGROUP Consumer Group name already exists"
    assert x(r, "XGROUP", "CREATECONSUMER", "s", "g", "alice") == 1
    assert x(r, "XGROUP", "CREATECONSUMER", "s", "g", "alice") == 0
    assert err(x, r, "XGROUP", "CREATECONSUMER", "s", "nog", "alice") == "NOGROUP No such consumer group 'nog' for key name 's'"
    # Redis 8 caps ENTRIESREAD at the entries ever added (none here).
    assert x(r, "XGROUP", "SETID", "s", "g", "5-0", "ENTRIESREAD", "3") == b"OK"
    g = r.xinfo_groups("s")[0]
    assert g["last-delivered-id"] == b"5-0" and g["entries-read"] == 0
    assert err(x, r, "XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "-5") == "value for ENTRIESREAD must be positive or -1"
    assert err(x, r, "XGROUP", "CREATE", "s", "g2", "0", "FOO") == "unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."
    assert err(x, r, "XGROUP", "SETID", "s", "g", "0", "MKSTREAM") == "unknown subcommand or wrong number of arguments for 'SETID'. Try XGROUP HELP."
    assert err(x, r, "XGROUP", "CREATE", "s", "g2", "-") == BAD_ID
    assert err(x, r, "XGROUP", "DESTROY", "s") == "wrong number of arguments for 'xgroup|destroy' command"
    assert err(x, r, "XGROUP", "FOO") == "unknown subcommand 'FOO'. Try XGROUP HELP."
    assert x(r, "XGROUP", "DELCONSUMER", "s", "g", "alice") == 0
    assert x(r, "XGROUP", "DESTROY", "s", "g") == 1
    assert x(r, "XGROUP", "DESTROY", "s", "g") == 0
    help_lines = x(r, "XGROUP", "HELP")
    assert help_lines[0] == b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert help_lines[-2:] == [b"HELP", b"    Print this help."]
    r.set("str", "v")
    assert err(x, r, "XGROUP", "CREATE", "str", "g", "$") == WRONGTYPE


def test_xreadgroup_pel_ack_and_history(r):
    fill(r, "s", 4)
    x(r, "XGROUP", "CREATE", "s", "g", "0")
    got = x(r, "XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">")
    assert got == [[b"s", [[b"1-0", [b"f", b"1"]], [b"2-0", [b"f", b"2"]]]]]
    assert x(r, "XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">") == [[b"s", [[b"3-0", [b"f", b"3"]], [b"4-0", [b"f", b"4"]]]]]
    assert x(r, "XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">") is None
    # History: only this consumer's pending entries, after the given ID.
    assert x(r, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0") == [[b"s", [[b"1-0", [b"f", b"1"]], [b"2-0", [b"f", b"2"]]]]]
    assert x(r, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "1-0") == [[b"s", [[b"2-0", [b"f", b"2"]]]]]
    x(r, "XDEL", "s", "2-0")
    assert x(r, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0") == [[b"s", [[b"1-0", [b"f", b"1"]], [b"2-0", None]]]]
    assert x(r, "XPENDING", "s", "g") == [4, b"1-0", b"4-0", [[b"alice", b"2"], [b"bob", b"2"]]]
    assert x(r, "XACK", "s", "g", "1-0", "2-0", "9-9") == 2
    assert x(r, "XACK", "s", "nog", "1-0") == 0
    assert x(r, "XACK", "nokey", "g", "1-0") == 0
    assert err(x, r, "XACK", "s", "g", "bad") == BAD_ID
    assert x(r, "XPENDING", "s", "g") == [2, b"3-0", b"4-0", [[b"bob", b"2"]]]
    rows = x(r, "XPENDING", "s", "g", "-", "+", "10", "bob")
    assert [(row[0], row[1], row[3]) for row in rows] == [(b"3-0", b"bob", 1), (b"4-0", b"bob", 1)]
    assert x(r, "XPENDING", "s", "g", "IDLE", "100000", "-", "+", "10") == []
    assert x(r, "XPENDING", "s", "g", "-", "+", "10", "nobody") == []
    assert x(r, "XPENDING", "s", "g", "(3-0", "+", "10")[0][0] == b"4-0"
    # NOACK delivers without a PEL entry.
    fill(r, "s", 1, start=5)
    x(r, "XREADGROUP", "GROUP", "g", "carol", "NOACK", "STREAMS", "s", ">")
    assert x(r, "XPENDING", "s", "g")[0] == 2
    x(r, "XACK", "s", "g", "3-0", "4-0")
    assert x(r, "XPENDING", "s", "g") == [0, None, None, None]


def test_xreadgroup_errors(r):
    fill(r, "s", 1)
    x(r, "XGROUP", "CREATE", "s", "g", "0")
    assert err(x, r, "XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">") == "NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"
    assert err(x, r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "nokey", ">") == "NOGROUP No such key 'nokey' or consumer group 'g' in XREADGROUP with GROUP option"
    assert err(x, r, "XREADGROUP", "COUNT", "1", "STREAMS", "s", ">", "x") == "Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."
    assert err(x, r, "XREADGROUP", "COUNT", "1", "NOACK", "STREAMS", "s", ">") == "Missing GROUP option for XREADGROUP"
    assert err(x, r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$").startswith("The $ ID is meaningless in the context of XREADGROUP")
    assert err(x, r, "XPENDING", "s", "nog") == "NOGROUP No such key 's' or consumer group 'nog'"
    assert err(x, r, "XPENDING", "s", "g", "-", "+") == "syntax error"
    assert err(x, r, "XPENDING", "s", "g", "IDLE", "10", "-", "+") == "syntax error"
    assert err(x, r, "XPENDING", "s", "g", "-", "+", "x") == "value is not an integer or out of range"


def test_xclaim_and_xautoclaim(r):
    fill(r, "s", 4)
    x(r, "XGROUP", "CREATE", "s", "g", "0")
    x(r, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    assert x(r, "XCLAIM", "s", "g", "bob", "0", "1-0") == [[b"1-0", [b"f", b"1"]]]
    assert x(r, "XCLAIM", "s", "g", "bob", "3600000", "2-0") == []
    assert x(r, "XCLAIM", "s", "g", "bob", "0", "2-0", "JUSTID", "RETRYCOUNT", "7") == [b"2-0"]
    rows = {row[0]: row for row in x(r, "XPENDING", "s", "g", "-", "+", "10")}
    assert rows[b"1-0"][1] == b"bob" and rows[b"1-0"][3] == 2
    assert rows[b"2-0"][3] == 7
    # A deleted entry is dropped from the PEL instead of claimed.
    x(r, "XDEL", "s", "3-0")
    assert x(r, "XCLAIM", "s", "g", "bob", "0", "3-0") == []
    assert x(r, "XPENDING", "s", "g")[0] == 3
    # FORCE creates a PEL entry for a delivered-to-nobody entry.
    x(r, "XGROUP", "CREATE", "s", "g2", "$")
    assert x(r, "XCLAIM", "s", "g2", "zed", "0", "4-0", "FORCE", "JUSTID", "LASTID", "4-0") == [b"4-0"]
    assert r.xinfo_groups("s")[1]["last-delivered-id"] == b"4-0"
    assert err(x, r, "XCLAIM", "s", "nog", "bob", "0", "1-0") == "NOGROUP No such key 's' or consumer group 'nog'"
    assert err(x, r, "XCLAIM", "s", "g", "bob", "x", "1-0") == "Invalid min-idle-time argument for XCLAIM"
    assert err(x, r, "XCLAIM", "s", "g", "bob", "0", "1-0", "IDLE", "x") == "Invalid IDLE option argument for XCLAIM"
    assert err(x, r, "XCLAIM", "s", "g", "bob", "0", "1-0", "TIME", "x") == "Invalid TIME option argument for XCLAIM"
    assert err(x, r, "XCLAIM", "s", "g", "bob", "0", "1-0", "RETRYCOUNT", "x") == "Invalid RETRYCOUNT option argument for XCLAIM"
    assert err(x, r, "XCLAIM", "s", "g", "bob", "0", "1-0", "FOO") == "Unrecognized XCLAIM option 'FOO'"
    # XAUTOCLAIM walks the PEL; deleted entries are reported apart.
    x(r, "XDEL", "s", "4-0")
    assert x(r, "XAUTOCLAIM", "s", "g", "carol", "0", "0", "COUNT", "1") == [b"2-0", [[b"1-0", [b"f", b"1"]]], []]
    assert x(r, "XAUTOCLAIM", "s", "g", "carol", "0", "2-0", "JUSTID") == [b"0-0", [b"2-0"], [b"4-0"]]
    assert err(x, r, "XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "0") == "COUNT must be > 0"
    assert err(x, r, "XAUTOCLAIM", "s", "g", "c", "x", "0") == "Invalid min-idle-time argument for XAUTOCLAIM"
    assert err(x, r, "XAUTOCLAIM", "s", "nog", "c", "0", "0") == "NOGROUP No such key 's' or consumer group 'nog'"
    assert err(x, r, "XAUTOCLAIM", "s", "g", "c", "0", "0", "FOO") == "syntax error"


def test_lag_and_entries_read(r):
    fill(r, "s", 5)
    x(r, "XGROUP", "CREATE", "s", "g", "0")
    g = r.xinfo_groups("s")[0]
    assert g["entries-read"] is None and g["lag"] == 5
    x(r, "XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    g = r.xinfo_groups("s")[0]
    assert g["entries-read"] == 2 and g["lag"] == 3
    x(r, "XDEL", "s", "4-0")
    assert r.xinfo_groups("s")[0]["lag"] is None
    x(r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    g = r.xinfo_groups("s")[0]
    assert g["entries-read"] == 5 and g["lag"] == 0


def test_xsetid(r):
    fill(r, "s", 3)
    assert x(r, "XSETID", "s", "10-0", "ENTRIESADDED", "20", "MAXDELETEDID", "5-0") == b"OK"
    info = r.xinfo_stream("s")
    assert (info["last-generated-id"], info["entries-added"], info["max-deleted-entry-id"]) == (b"10-0", 20, b"5-0")
    assert err(x, r, "XSETID", "s", "2-0") == "The ID specified in XSETID is smaller than current max_deleted_entry_id"
    assert err(x, r, "XSETID", "nokey", "1-0") == "no such key"
    assert err(x, r, "XSETID", "s", "1-0", "MAXDELETEDID", "2-0") == "The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
    assert err(x, r, "XSETID", "s", "1-0", "ENTRIESADDED", "-1") == "entries_added must be positive"
    assert err(x, r, "XSETID", "s", "1-0", "FOO", "1") == "syntax error"
    x(r, "XADD", "u", "5-0", "a", "b")
    assert err(x, r, "XSETID", "u", "4-0") == "The ID specified in XSETID is smaller than the target stream top item"
    assert err(x, r, "XSETID", "u", "6-0", "ENTRIESADDED", "0") == "The entries_added specified in XSETID is smaller than the target stream length"
    assert err(x, r, "XSETID", "u", "+") == BAD_ID


# ---- XINFO --------------------------------------------------------------------


def test_xinfo_resp2(r):
    fill(r, "s", 3)
    x(r, "XGROUP", "CREATE", "s", "g", "0")
    x(r, "XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">")
    info = x(r, "XINFO", "STREAM", "s")
    keys = info[0::2]
    assert keys == [b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id", b"max-deleted-entry-id",
                    b"entries-added", b"recorded-first-entry-id", b"idmp-duration", b"idmp-maxsize", b"pids-tracked",
                    b"iids-tracked", b"iids-added", b"iids-duplicates", b"groups", b"first-entry", b"last-entry"]
    d = dict(zip(info[0::2], info[1::2]))
    assert d[b"length"] == 3 and d[b"groups"] == 1
    assert d[b"first-entry"] == [b"1-0", [b"f", b"1"]] and d[b"last-entry"] == [b"3-0", [b"f", b"3"]]
    full = x(r, "XINFO", "STREAM", "s", "FULL", "COUNT", "2")
    d = dict(zip(full[0::2], full[1::2]))
    assert list(d)[-2:] == [b"entries", b"groups"]
    assert len(d[b"entries"]) == 2
    g = dict(zip(d[b"groups"][0][0::2], d[b"groups"][0][1::2]))
    assert list(g) == [b"name", b"last-delivered-id", b"entries-read", b"lag", b"pel-count", b"pending", b"consumers"]
    assert g[b"pel-count"] == 1 and g[b"pending"][0][0:2] == [b"1-0", b"alice"]
    c = dict(zip(g[b"consumers"][0][0::2], g[b"consumers"][0][1::2]))
    assert list(c) == [b"name", b"seen-time", b"active-time", b"pel-count", b"pending"]
    assert c[b"pending"][0][0] == b"1-0" and c[b"pending"][0][2] == 1
    cons = x(r, "XINFO", "CONSUMERS", "s", "g")
    assert cons[0][0::2] == [b"name", b"pending", b"idle", b"inactive"]
    assert err(x, r, "XINFO", "CONSUMERS", "s", "nog") == "NOGROUP No such consumer group 'nog' for key name 's'"
    assert err(x, r, "XINFO", "STREAM", "nokey") == "no such key"
    assert err(x, r, "XINFO", "STREAM", "s", "FOO") == "unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP."
    assert err(x, r, "XINFO", "STREAM", "s", "FULL", "COUNT", "x") == "value is not an integer or out of range"
    r.set("str", "v")
    assert err(x, r, "XINFO", "GROUPS", "str") == WRONGTYPE
    x(r, "XGROUP", "CREATE", "e", "g", "$", "MKSTREAM")
    d = dict(zip(*[iter(x(r, "XINFO", "STREAM", "e"))] * 2))
    assert d[b"first-entry"] is None and d[b"last-entry"] is None


def test_xinfo_resp3_maps(raw, r):
    x(r, "XADD", "s", "1-0", "f", "v")
    x(r, "XGROUP", "CREATE", "s", "g", "$")
    c = raw()
    c.call("HELLO", "3")
    groups = c.call("XINFO", "GROUPS", "s")
    assert groups.startswith(b"*1\r\n%6\r\n$4\r\nname\r\n$1\r\ng\r\n")
    assert groups.endswith(b"$12\r\nentries-read\r\n_\r\n$3\r\nlag\r\n:0\r\n")
    assert c.call("XINFO", "STREAM", "s").startswith(b"%16\r\n$6\r\nlength\r\n:1\r\n")
    assert c.call("XINFO", "STREAM", "s", "FULL").startswith(b"%15\r\n")


def test_xinfo_resp3_client(r3):
    r3.xadd("s", {"f": "v"}, id="1-0")
    info = x(r3, "XINFO", "STREAM", "s")
    assert info[b"length"] == 1 and info[b"first-entry"] == [b"1-0", [b"f", b"v"]]
    assert x(r3, "XREAD", "STREAMS", "s", "0") == {b"s": [[b"1-0", [b"f", b"v"]]]}


# ---- blocking XREAD / XREADGROUP ----------------------------------------------
# The blocked side is a raw socket (command sent, reply read later), the
# writing side the `r` fixture; replies are compared byte for byte.

NOGROUP_S_G = b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n"
S_2_0 = b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"


def wait_blocked(r, n, timeout=5.0):
    deadline = time.monotonic() + timeout
    while r.info("clients")["blocked_clients"] != n:
        if time.monotonic() > deadline:
            raise AssertionError(f"blocked_clients stayed {r.info('clients')['blocked_clients']}, wanted {n}")
        time.sleep(0.005)


def test_xread_block_served_by_xadd(raw, r):
    x(r, "XADD", "s", "1-0", "f", "old")
    d = raw()
    # `$` is the last ID when the client blocks: 1-0 is never served, and
    # the re-run after XADD must not re-read `$` as 2-0.
    d.cmd("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(r, 1)
    x(r, "XADD", "s", "2-0", "f", "v")
    assert d.read_reply() == S_2_0
    wait_blocked(r, 0)
    assert r.info("clients")["total_blocking_keys"] == 0


def test_xread_block_dollar_on_missing_key_and_several_streams(raw, r):
    x(r, "XADD", "a", "5-0", "f", "a")
    d = raw()
    d.cmd("XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", "a", "s", "$", "$")
    wait_blocked(r, 1)
    x(r, "XADD", "s", "2-0", "f", "v")
    # Only the stream that got data is in the reply.
    assert d.read_reply() == S_2_0


def test_xread_block_rerun_keeps_waiting_without_new_data(raw, r):
    x(r, "XADD", "s", "1-0", "f", "old")
    d = raw()
    d.cmd("XREAD", "BLOCK", "0", "STREAMS", "s", "1-0")
    wait_blocked(r, 1)
    # A signal with nothing past 1-0: the re-run blocks again.
    x(r, "XTRIM", "s", "MAXLEN", "0")
    x(r, "XGROUP", "CREATE", "s", "g", "$")
    time.sleep(0.05)
    assert r.info("clients")["blocked_clients"] == 1
    x(r, "XADD", "s", "2-0", "f", "v")
    assert d.read_reply() == S_2_0


def test_xread_block_plus_serves_last_entry_of_a_new_stream(raw, r):
    d = raw()
    d.cmd("XREAD", "BLOCK", "0", "STREAMS", "s", "+")
    wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.execute_command("XADD", "s", "1-0", "f", "x")
    p.execute_command("XADD", "s", "2-0", "f", "v")
    p.execute()
    assert d.read_reply() == S_2_0


def test_xread_block_not_woken_by_deletion_or_other_type(raw, r):
    d = raw()
    d.cmd("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.execute_command("XADD", "s", "1-0", "f", "x")
    p.delete("s")
    p.execute()
    r.lpush("s", "e")
    time.sleep(0.05)
    assert r.info("clients")["blocked_clients"] == 1
    r.delete("s")
    x(r, "XADD", "s", "2-0", "f", "v")
    assert d.read_reply() == S_2_0


def test_xread_block_timeout_replies_null(raw, r):
    d = raw()
    t = time.monotonic()
    assert d.call("XREAD", "BLOCK", "100", "STREAMS", "s", "$") == b"*-1\r\n"
    assert time.monotonic() - t >= 0.09
    d3 = raw()
    d3.call("HELLO", "3")
    assert d3.call("XREADGROUP", "GROUP", "g", "c", "BLOCK", "50", "STREAMS", "s", ">").startswith(b"-NOGROUP")
    x(r, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    assert d3.call("XREAD", "BLOCK", "50", "STREAMS", "s", "$") == b"_\r\n"
    assert d3.call("XREADGROUP", "GROUP", "g", "c", "BLOCK", "50", "STREAMS", "s", ">") == b"_\r\n"
    assert r.info("clients")["blocked_clients"] == 0
    assert err(x, r, "XREAD", "BLOCK", "9223372036854775807", "STREAMS", "s", "$") == "timeout is out of range"


def test_xread_block_resp3_reply_is_a_map(raw, r):
    d = raw()
    d.call("HELLO", "3")
    d.cmd("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(r, 1)
    x(r, "XADD", "s", "2-0", "f", "v")
    assert d.read_reply() == b"%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"


def test_xreadgroup_block_served_by_xadd(raw, r):
    x(r, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    d = raw()
    d.cmd("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(r, 1)
    assert r.info("clients")["total_blocking_keys_on_nokey"] == 1
    x(r, "XADD", "s", "2-0", "f", "v")
    assert d.read_reply() == S_2_0
    assert x(r, "XPENDING", "s", "g")[:3] == [1, b"2-0", b"2-0"]
    # NOACK: served, nothing pending.
    d.cmd("XREADGROUP", "GROUP", "g", "bob", "NOACK", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(r, 1)
    x(r, "XADD", "s", "3-0", "f", "v")
    assert d.read_reply() == S_2_0.replace(b"2-0", b"3-0")
    assert x(r, "XPENDING", "s", "g")[0] == 1
    # A history ID never blocks, even with nothing pending.
    assert d.call("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0", "STREAMS", "s", "0") == b"*1\r\n*2\r\n$1\r\ns\r\n*0\r\n"


def test_xreadgroup_block_fifo_and_one_entry_each(raw, r):
    x(r, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    d1, d2 = raw(), raw()
    d1.cmd("XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(r, 1)
    d2.cmd("XREADGROUP", "GROUP", "g", "c2", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(r, 2)
    x(r, "XADD", "s", "2-0", "f", "v")
    # The first waiter takes the entry; the second finds nothing new and waits on.
    assert d1.read_reply() == S_2_0
    time.sleep(0.05)
    assert r.info("clients")["blocked_clients"] == 1
    x(r, "XADD", "s", "3-0", "f", "v")
    assert d2.read_reply() == S_2_0.replace(b"2-0", b"3-0")


def block_group_reader(raw, r):
    x(r, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    d = raw()
    d.cmd("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(r, 1)
    return d


def test_xreadgroup_block_woken_by_deletion(raw, r):
    d = block_group_reader(raw, r)
    r.delete("s")
    assert d.read_reply() == NOGROUP_S_G
    assert r.info("clients")["total_blocking_keys_on_nokey"] == 0


def test_xreadgroup_block_woken_by_group_destroy(raw, r):
    d = block_group_reader(raw, r)
    r.config_resetstat()
    assert x(r, "XGROUP", "DESTROY", "s", "g") == 1
    assert d.read_reply() == NOGROUP_S_G
    stat = r.info("commandstats")["cmdstat_xreadgroup"]
    assert (stat["calls"], stat["failed_calls"]) == (1, 1)
    assert r.info("errorstats")["errorstat_NOGROUP"]["count"] == 1


def test_xreadgroup_block_woken_by_type_change(raw, r):
    d = block_group_reader(raw, r)
    r.set("s", "v")
    assert d.read_reply() == b"-" + WRONGTYPE.encode() + b"\r\n"
    r.delete("s")
    d = block_group_reader(raw, r)
    p = r.pipeline(transaction=True)
    p.delete("s")
    p.sadd("s", "m")
    p.execute()
    assert d.read_reply() == b"-" + WRONGTYPE.encode() + b"\r\n"


def test_xreadgroup_block_woken_by_flushdb_and_rename(raw, r):
    d = block_group_reader(raw, r)
    r.flushdb()
    assert d.read_reply() == NOGROUP_S_G
    d = block_group_reader(raw, r)
    x(r, "XADD", "t", "1-0", "f", "v")
    r.rename("t", "s")
    assert d.read_reply() == NOGROUP_S_G
    # Renamed onto the key with a group of the same name: data.
    r.delete("s")
    d = block_group_reader(raw, r)
    x(r, "XGROUP", "CREATE", "t", "g", "0", "MKSTREAM")
    x(r, "XADD", "t", "2-0", "f", "v")
    r.rename("t", "s")
    assert d.read_reply() == S_2_0


def test_no_blocking_in_multi_or_script(r):
    x(r, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    p = r.pipeline(transaction=True)
    p.execute_command(b"XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    p.execute_command(b"XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    assert p.execute() == [None, None]
    assert r.eval("return redis.call('XREAD', 'BLOCK', '0', 'STREAMS', 's', '$')", 0) is None
    assert r.eval("return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', '0', 'STREAMS', 's', '>')", 0) is None
    assert r.info("clients")["blocked_clients"] == 0


# ---- Redis 8.2: XDELEX, XACKDEL, KEEPREF / DELREF / ACKED --------------------


def two_groups_read_all(r, key="s", n=2):
    """Entries 1-0..n-0, groups g1 and g2 each delivered all of them."""
    fill(r, key, n)
    for g, c in (("g1", "c1"), ("g2", "c2")):
        x(r, "XGROUP", "CREATE", key, g, "0")
        x(r, "XREADGROUP", "GROUP", g, c, "STREAMS", key, ">")


def pending(r, key, group):
    return x(r, "XPENDING", key, group)[0]


def test_xdelex_missing_key_and_codes(r):
    assert x(r, "XDELEX", "s", "IDS", "2", "1-0", "2-0") == [-1, -1]
    assert not r.exists("s")
    fill(r, "s", 3)
    assert x(r, "XDELEX", "s", "IDS", "3", "1-0", "9-0", "3-0") == [1, -1, 1]
    assert r.xlen("s") == 1
    # XDEL's tombstone bookkeeping: the largest deleted ID is recorded.
    assert r.xinfo_stream("s")["max-deleted-entry-id"] == b"3-0"
    # Options in any case, the policy before or after the IDS block.
    assert x(r, "XDELEX", "s", "IDS", "1", "2-0", "keepref") == [1]
    assert r.xlen("s") == 0 and r.exists("s")


def test_xdelex_errors(r):
    fill(r, "s", 1)
    assert err(x, r, "XDELEX", "s") == "wrong number of arguments for 'xdelex' command"
    assert err(x, r, "XDELEX", "s", "IDS", "1") == "wrong number of arguments for 'xdelex' command"
    for n in ("0", "-5", "abc"):
        assert err(x, r, "XDELEX", "s", "IDS", n, "1-0") == "Number of IDs must be a positive integer"
    assert err(x, r, "XDELEX", "s", "IDS", "3", "1-0", "2-0") == "The `numids` parameter must match the number of arguments"
    assert err(x, r, "XDELEX", "s", "IDS", "1", "1-0", "2-0") == "syntax error"
    for a, b in (("KEEPREF", "DELREF"), ("KEEPREF", "ACKED"), ("DELREF", "ACKED"), ("ACKED", "ACKED")):
        assert err(x, r, "XDELEX", "s", a, b, "IDS", "1", "1-0") == "syntax error"
    assert err(x, r, "XDELEX", "s", "KEEPREF", "1-0", "2-0") == "syntax error"
    assert err(x, r, "XDELEX", "s", "IDS", "1", "+") == BAD_ID
    assert err(x, r, "XDELEX", "s", "IDS", "2", "1-0", "bad") == BAD_ID
    assert r.xlen("s") == 1  # nothing deleted when an ID is bad
    r.set("str", "v")
    assert err(x, r, "XDELEX", "str", "IDS", "1", "1-0") == WRONGTYPE


def test_xdelex_policies(r):
    two_groups_read_all(r, n=3)
    # KEEPREF: gone from the stream, still pending in both groups.
    assert x(r, "XDELEX", "s", "KEEPREF", "IDS", "1", "1-0") == [1]
    assert (pending(r, "s", "g1"), pending(r, "s", "g2")) == (3, 3)
    # DELREF: gone from the stream and from every pending list.
    assert x(r, "XDELEX", "s", "DELREF", "IDS", "1", "2-0") == [1]
    assert (pending(r, "s", "g1"), pending(r, "s", "g2")) == (2, 2)
    # DELREF on an ID no longer stored still drops its dangling references.
    assert x(r, "XDELEX", "s", "DELREF", "IDS", "1", "1-0") == [-1]
    assert (pending(r, "s", "g1"), pending(r, "s", "g2")) == (1, 1)
    # ACKED: kept while a group has it pending.
    assert x(r, "XDELEX", "s", "ACKED", "IDS", "1", "3-0") == [2]
    x(r, "XACK", "s", "g1", "3-0")
    assert x(r, "XDELEX", "s", "ACKED", "IDS", "1", "3-0") == [2]
    x(r, "XACK", "s", "g2", "3-0")
    assert x(r, "XDELEX", "s", "ACKED", "IDS", "1", "3-0") == [1]
    assert r.xlen("s") == 0


def test_xdelex_acked_waits_for_every_group_to_be_delivered(r):
    fill(r, "s", 5)
    x(r, "XGROUP", "CREATE", "s", "g1", "1-0")
    x(r, "XGROUP", "CREATE", "s", "g2", "3-0")
    # At or below every group's last delivered ID and pending nowhere.
    assert x(r, "XDELEX", "s", "ACKED", "IDS", "1", "1-0") == [1]
    # 2-0 is beyond g1's last delivered ID: g1 may still read it.
    assert x(r, "XDELEX", "s", "ACKED", "IDS", "2", "2-0", "4-0") == [2, 2]
    x(r, "XGROUP", "DESTROY", "s", "g1")
    assert x(r, "XDELEX", "s", "ACKED", "IDS", "2", "2-0", "4-0") == [1, 2]
    # A new group created at 0 needs everything again.
    x(r, "XGROUP", "CREATE", "s", "g3", "0")
    assert x(r, "XDELEX", "s", "ACKED", "IDS", "1", "3-0") == [2]
    # With no group at all, ACKED deletes like KEEPREF.
    r.delete("t")
    fill(r, "t", 2)
    assert x(r, "XDELEX", "t", "ACKED", "IDS", "1", "1-0") == [1]


def test_xdelex_notifies_and_counts(r):
    fill(r, "s", 3)
    dirty = r.info("persistence")["rdb_changes_since_last_save"]
    p = r.pubsub()
    r.config_set("notify-keyspace-events", "Et")
    try:
        p.psubscribe("__keyevent@*__:*")
        p.get_message(timeout=1)
        assert x(r, "XDELEX", "s", "IDS", "3", "1-0", "2-0", "7-0") == [1, 1, -1]
        m = p.get_message(timeout=1)
        assert m["channel"] == b"__keyevent@0__:xdel" and m["data"] == b"s"
        assert x(r, "XDELEX", "s", "IDS", "1", "7-0") == [-1]
        assert p.get_message(timeout=0.2) is None
    finally:
        r.config_set("notify-keyspace-events", "")
        p.close()
    assert r.info("persistence")["rdb_changes_since_last_save"] == dirty + 2


def test_xackdel(r):
    assert x(r, "XACKDEL", "s", "g", "IDS", "2", "1-0", "2-0") == [-1, -1]
    fill(r, "s", 1)
    assert x(r, "XACKDEL", "s", "g", "IDS", "2", "1-0", "2-0") == [-1, -1]
    r.delete("s")
    two_groups_read_all(r)
    # DELREF: acknowledged here, deleted, dropped from g2's pending list too.
    assert x(r, "XACKDEL", "s", "g1", "DELREF", "IDS", "2", "1-0", "2-0") == [1, 1]
    assert r.xlen("s") == 0
    assert (pending(r, "s", "g1"), pending(r, "s", "g2")) == (0, 0)
    assert x(r, "XACKDEL", "s", "g2", "DELREF", "IDS", "2", "1-0", "2-0") == [-1, -1]


def test_xackdel_acked_and_keepref(r):
    two_groups_read_all(r)
    # ACKED: acknowledged in g1 but kept while g2 has them pending.
    assert x(r, "XACKDEL", "s", "g1", "ACKED", "IDS", "2", "1-0", "2-0") == [2, 2]
    assert r.xlen("s") == 2
    assert x(r, "XPENDING", "s", "g2") == [2, b"1-0", b"2-0", [[b"c2", b"2"]]]
    assert x(r, "XACKDEL", "s", "g2", "ACKED", "IDS", "2", "1-0", "2-0") == [1, 1]
    assert r.xlen("s") == 0
    r.delete("s")
    two_groups_read_all(r)
    # KEEPREF (the default): deleted, g2 keeps its references...
    assert x(r, "XACKDEL", "s", "g1", "IDS", "2", "1-0", "2-0") == [1, 1]
    assert r.xlen("s") == 0 and pending(r, "s", "g2") == 2
    # ... which XACKDEL still acknowledges although the entries are gone.
    assert x(r, "XACKDEL", "s", "g2", "KEEPREF", "IDS", "2", "1-0", "2-0") == [1, 1]
    assert pending(r, "s", "g2") == 0
    # Not pending in the group (never delivered): -1, entry untouched.
    fill(r, "s", 1, start=5)
    assert x(r, "XACKDEL", "s", "g1", "IDS", "1", "5-0") == [-1]
    assert r.xlen("s") == 1


def test_xackdel_errors_and_many_ids(r):
    assert err(x, r, "XACKDEL", "s", "g") == "wrong number of arguments for 'xackdel' command"
    assert err(x, r, "XACKDEL", "s", "g", "IDS", "0", "1-0") == "Number of IDs must be a positive integer"
    assert err(x, r, "XACKDEL", "s", "g", "IDS", "3", "1-0", "2-0") == "The `numids` parameter must match the number of arguments"
    assert err(x, r, "XACKDEL", "s", "g", "IDS", "1", "1-0", "2-0") == "syntax error"
    assert err(x, r, "XACKDEL", "s", "g", "DELREF", "ACKED", "IDS", "1", "1-0") == "syntax error"
    x(r, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    ids = [f"{i}-1" for i in range(50)]
    assert x(r, "XACKDEL", "s", "g", "IDS", "50", *ids) == [-1] * 50
    r.set("str", "v")
    assert err(x, r, "XACKDEL", "str", "g", "IDS", "1", "1-0") == WRONGTYPE


def test_xackdel_resp3(r3):
    fill(r3, "s", 1)
    x(r3, "XGROUP", "CREATE", "s", "g", "0")
    x(r3, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert x(r3, "XACKDEL", "s", "g", "IDS", "2", "1-0", "2-0") == [1, -1]
    assert x(r3, "XDELEX", "s", "IDS", "1", "1-0") == [-1]


def test_xtrim_and_xadd_reference_policies(r):
    # KEEPREF (default): trimmed entries stay pending.
    two_groups_read_all(r, n=4)
    assert x(r, "XTRIM", "s", "MAXLEN", "2", "KEEPREF") == 2
    assert pending(r, "s", "g1") == 4
    # DELREF: the trimmed entries leave every pending list.
    r.delete("s")
    two_groups_read_all(r, n=4)
    assert x(r, "XTRIM", "s", "MINID", "3-0", "DELREF") == 2
    assert x(r, "XPENDING", "s", "g1")[:3] == [2, b"3-0", b"4-0"]
    assert x(r, "XPENDING", "s", "g2")[:3] == [2, b"3-0", b"4-0"]
    # ACKED: entries a group still needs are skipped, the others trimmed.
    r.delete("s")
    fill(r, "s", 5)
    x(r, "XGROUP", "CREATE", "s", "g", "2-0")
    assert x(r, "XTRIM", "s", "MAXLEN", "0", "ACKED") == 2
    assert [e[0] for e in r.xrange("s")] == [b"3-0", b"4-0", b"5-0"]
    x(r, "XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">")
    x(r, "XACK", "s", "g", "3-0")
    # XADD's trim honours the policy too.
    assert x(r, "XADD", "s", "MAXLEN", "1", "ACKED", "6-0", "f", "v") == b"6-0"
    assert [e[0] for e in r.xrange("s")] == [b"4-0", b"5-0", b"6-0"]
    assert x(r, "XADD", "s", "DELREF", "MAXLEN", "=", "1", "7-0", "f", "v") == b"7-0"
    assert [e[0] for e in r.xrange("s")] == [b"7-0"]
    # One policy at most; XADD then reads the second word as the ID.
    assert err(x, r, "XTRIM", "s", "MAXLEN", "0", "ACKED", "DELREF") == "syntax error"
    assert err(x, r, "XADD", "s", "KEEPREF", "DELREF", "*", "f", "v") == BAD_ID
    assert err(x, r, "XTRIM", "s", "ACKED", "LIMIT", "5") == "syntax error, LIMIT cannot be used without specifying a trimming strategy"


def test_new_commands_in_command_table(r):
    run = ex(r)
    info = run("COMMAND", "INFO", "xdelex", "xackdel")
    assert info[0][:6] == [b"xdelex", -5, [b"write", b"fast"], 1, 1, 1]
    assert info[1][:6] == [b"xackdel", -6, [b"write", b"fast"], 1, 1, 1]
    assert sorted(info[0][6]) == [b"@fast", b"@stream", b"@write"]
    assert sorted(info[1][6]) == [b"@fast", b"@stream", b"@write"]
    assert info[0][8][0][1] == [b"RW", b"delete"]
    assert info[1][8][0][1] == [b"RW", b"update", b"delete"]
    docs = run("COMMAND", "DOCS", "xackdel")
    d = dict(zip(docs[1][::2], docs[1][1::2]))
    assert (d[b"since"], d[b"group"]) == (b"8.2.0", b"stream")
    assert run("COMMAND", "GETKEYS", "XACKDEL", "s", "g", "IDS", "1", "1-0") == [b"s"]
    names = run("COMMAND", "LIST", "FILTERBY", "ACLCAT", "stream")
    assert b"xdelex" in names and b"xackdel" in names
