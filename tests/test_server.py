"""Server, connection and introspection commands: INFO, CONFIG, CLIENT, COMMAND,
SLOWLOG, LATENCY, MONITOR, DEBUG, TIME, SELECT, FLUSH*, HELLO, with Redis's exact
replies and errors."""

import os
import re
import shutil
import socket
import subprocess
import time

import pytest
import redis

from conftest import err, free_port, ping, server_binary


def bulk_text(reply: bytes) -> str:
    """The payload of a raw bulk string reply."""
    head, _, rest = reply.partition(b"\r\n")
    assert head.startswith(b"$")
    return rest[:int(head[1:])].decode()


def test_info_sections_and_fields(r, raw):
    r.set(b"a", b"1")
    info = r.info()
    assert info["redis_version"] == "8.4.0"
    assert "densekv_version" in info
    for f in ("used_memory", "used_memory_rss", "used_memory_peak", "mem_fragmentation_ratio", "maxmemory",
              "connected_clients", "total_commands_processed", "role", "used_cpu_sys"):
        assert f in info, f
    assert info["used_memory"] > 0
    assert info["db0"] == {"keys": 1, "expires": 0, "avg_ttl": 0, "subexpiry": 0}
    c = raw()
    text = bulk_text(c.call("INFO", "server", "keyspace"))
    assert text.startswith("# Server\r\n")
    assert "\r\n\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0,subexpiry=0\r\n" in text
    assert "# Memory" not in text
    assert "# Commandstats" not in bulk_text(c.call("INFO"))
    everything = bulk_text(c.call("INFO", "everything"))
    for s in ("# Commandstats", "# Errorstats", "# Latencystats", "# Keyspace", "# CPU"):
        assert s in everything
    assert c.call("INFO", "nosuchsection") == b"$0\r\n\r\n"


def test_info_commandstats_errorstats(r, raw):
    r.config_resetstat()
    r.get(b"x")
    r.get(b"x")
    with pytest.raises(redis.ResponseError):
        r.execute_command("GET")
    with pytest.raises(redis.ResponseError):
        r.execute_command("NOSUCHCMD")
    text = bulk_text(raw().call("INFO", "commandstats", "errorstats"))
    assert "cmdstat_get:calls=2," in text
    assert "rejected_calls=1,failed_calls=0" in text
    assert "errorstat_ERR:count=2" in text


def test_config_get_set(r):
    assert r.config_get("maxmemory") == {"maxmemory": "0"}
    got = r.config_get("maxmemory*")
    assert "maxmemory-policy" in got and "maxmemory-samples" in got
    multi = r.execute_command("CONFIG", "GET", "maxmemory", "timeout", "hash-max-ziplist-entries")
    d = dict(zip(multi[::2], multi[1::2]))
    assert d[b"timeout"] == b"0" and d[b"hash-max-ziplist-entries"] == b"512"
    assert r.execute_command("CONFIG", "SET", "maxmemory", "10mb", "timeout", "5") == b"OK"
    assert r.config_get("maxmemory") == {"maxmemory": "10485760"}
    # atomic: one bad value sets nothing
    e = err(r.execute_command, "CONFIG", "SET", "maxmemory", "1", "timeout", "abc")
    assert e == "CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer"
    assert r.config_get("maxmemory") == {"maxmemory": "10485760"}
    assert err(r.execute_command, "CONFIG", "SET", "nosuch", "1") == "Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    assert err(r.execute_command, "CONFIG", "SET", "timeout", "1", "timeout", "2") == \
        "CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter"
    assert err(r.execute_command, "CONFIG", "SET", "databases", "3") == \
        "CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
    assert err(r.execute_command, "CONFIG", "SET", "appendonly", "maybe") == \
        "CONFIG SET failed (possibly related to argument 'appendonly') - argument must be 'yes' or 'no'"
    assert err(r.execute_command, "CONFIG", "SET", "maxmemory") == "wrong number of arguments for 'config|set' command"
    assert err(r.execute_command, "CONFIG", "SET", "maxmemory", "1", "timeout") == "syntax error"
    assert err(r.execute_command, "CONFIG", "REWRITE") == "The server is running without a config file"
    r.execute_command("CONFIG", "SET", "maxmemory", "0", "timeout", "0")
    help_ = r.execute_command("CONFIG", "HELP")
    assert help_[0] == b"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert help_[-2:] == [b"HELP", b"    Print this help."]
    assert err(r.execute_command, "CONFIG", "NOPE") == "unknown subcommand 'NOPE'. Try CONFIG HELP."


def test_client_commands(r, new_client):
    cid = r.client_id()
    assert isinstance(cid, int)
    assert r.client_getname() is None
    assert r.client_setname("worker-1") is True
    assert r.client_getname() in ("worker-1", b"worker-1")
    assert err(r.client_setname, "a b") == "Client names cannot contain spaces, newlines or special characters."
    info = r.execute_command("CLIENT", "INFO").decode()
    assert info.startswith(f"id={cid} addr=127.0.0.1:")
    assert " name=worker-1 " in info and " cmd=client|info " in info and info.endswith("\n")
    other = new_client()
    other.ping()
    lst = r.execute_command("CLIENT", "LIST").decode()
    assert len(lst.strip().split("\n")) >= 2
    only = r.execute_command("CLIENT", "LIST", "ID", cid).decode()
    assert only.startswith(f"id={cid} ") and only.count("\n") == 1
    assert err(r.execute_command, "CLIENT", "LIST", "TYPE", "bogus") == "Unknown client type 'bogus'"
    assert err(r.execute_command, "CLIENT", "LIST", "ID", "x") == "Invalid client ID"
    assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "mylib") == b"OK"
    assert " lib-name=mylib " in r.execute_command("CLIENT", "INFO").decode()
    assert err(r.execute_command, "CLIENT", "SETINFO", "foo", "x") == "Unrecognized option 'foo'"
    assert err(r.execute_command, "CLIENT", "SETINFO", "lib-ver", "a b") == "lib-ver cannot contain spaces, newlines or special characters."
    assert r.execute_command("CLIENT", "NO-EVICT", "on") == b"OK"
    assert err(r.execute_command, "CLIENT", "NO-EVICT", "maybe") == "syntax error"
    assert r.execute_command("CLIENT", "NO-TOUCH", "off") == b"OK"
    assert err(r.execute_command, "CLIENT", "PAUSE", "abc") == "timeout is not an integer or out of range"
    assert err(r.execute_command, "CLIENT", "PAUSE", "-1") == "timeout is negative"
    assert err(r.execute_command, "CLIENT", "NOSUCH") == "unknown subcommand 'NOSUCH'. Try CLIENT HELP."
    assert r.execute_command("CLIENT", "HELP")[0].startswith(b"CLIENT <subcommand>")


def test_client_kill(r, new_client, raw):
    victim = raw()
    vid = int(victim.call("CLIENT", "ID")[1:-2])
    assert r.execute_command("CLIENT", "KILL", "ID", vid) == 1
    victim.expect_closed()
    assert r.execute_command("CLIENT", "KILL", "ID", 999999) == 0
    assert err(r.execute_command, "CLIENT", "KILL", "ID", "0") == "client-id should be greater than 0"
    assert err(r.execute_command, "CLIENT", "KILL", "1.2.3.4:5") == "No such client"
    assert err(r.execute_command, "CLIENT", "KILL", "TYPE", "x") == "Unknown client type 'x'"
    assert err(r.execute_command, "CLIENT", "KILL", "MAXAGE", "0") == "maxage should be greater than 0"
    assert err(r.execute_command, "CLIENT", "KILL", "SKIPME", "maybe") == "syntax error"
    v2 = raw()
    v2.call("PING")
    addr = [l for l in r.execute_command("CLIENT", "LIST").decode().split("\n") if "cmd=ping" in l][0].split()[1][5:]
    assert r.execute_command("CLIENT", "KILL", addr) == b"OK"
    v2.expect_closed()
    # SKIPME yes (default) spares the caller
    assert r.execute_command("CLIENT", "KILL", "ID", r.client_id()) == 0
    assert r.ping() is True


def test_client_reply(raw):
    c = raw()
    c.send(RawEnc("CLIENT", "REPLY", "OFF") + RawEnc("SET", "k", "1") + RawEnc("CLIENT", "REPLY", "ON"))
    assert c.read_reply() == b"+OK\r\n"
    c.send(RawEnc("CLIENT", "REPLY", "SKIP") + RawEnc("GET", "k") + RawEnc("PING"))
    assert c.read_reply() == b"+PONG\r\n"


def RawEnc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def test_client_pause(r, new_client):
    other = new_client()
    r.execute_command("CLIENT", "PAUSE", 300, "WRITE")
    t = time.monotonic()
    assert other.get(b"k") is None  # reads pass
    assert time.monotonic() - t < 0.2
    other.set(b"k", b"v")  # writes wait
    assert time.monotonic() - t >= 0.25
    r.execute_command("CLIENT", "PAUSE", 5000)
    r.execute_command("CLIENT", "UNPAUSE")
    t = time.monotonic()
    assert other.get(b"k") == b"v"
    assert time.monotonic() - t < 0.5


def test_command_introspection(r, raw):
    r.response_callbacks.pop("COMMAND", None)  # keep redis-py from reshaping replies
    n = int(raw().call("COMMAND", "COUNT")[1:-2])
    assert raw(timeout=10).call("COMMAND").startswith(b"*%d\r\n*10\r\n" % n)
    c = raw()
    assert c.call("COMMAND", "INFO", "get", "nosuch") == (
        b"*2\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
        b"*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n"
        b"$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n"
        b"$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n"
        # An unknown command's entry: Redis's addReplyNull, a null bulk string in RESP2.
        b"$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n$-1\r\n")
    assert c.call("COMMAND", "INFO", "config|get").startswith(b"*1\r\n*10\r\n$10\r\nconfig|get\r\n:-3\r\n")
    # RESP3: key specs are a set, and so are the subcommands of a command
    # without any; a container's subcommands are an array.
    c3 = raw()
    c3.call("HELLO", "3")
    get = c3.call("COMMAND", "INFO", "get")
    assert b"~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n" in get and get.endswith(b":0\r\n~0\r\n"), get
    config = c3.call("COMMAND", "INFO", "config")
    assert config.startswith(b"*1\r\n*10\r\n$6\r\nconfig\r\n:-2\r\n~0\r\n:0\r\n:0\r\n:0\r\n~1\r\n+@slow\r\n"
                             b"~0\r\n~0\r\n*"), config
    # Tips, for cluster clients that route by them.
    assert c.call("COMMAND", "INFO", "dbsize").endswith(
        b"*2\r\n$25\r\nrequest_policy:all_shards\r\n$23\r\nresponse_policy:agg_sum\r\n*0\r\n*0\r\n")
    assert b"*1\r\n$29\r\nnondeterministic_output_order\r\n" in c.call("COMMAND", "INFO", "smembers")
    assert b"$24\r\nrequest_policy:all_nodes\r\n$29\r\nresponse_policy:all_succeeded\r\n" in c.call(
        "COMMAND", "INFO", "config|set")
    assert b"config" in r.execute_command("ACL", "CAT", "slow"), "containers are @slow, as in Redis"
    assert b"$10\r\nconfig|get\r\n" in c.call("COMMAND", "INFO", "config")
    assert r.execute_command("COMMAND", "GETKEYS", "SET", "a", "b") == [b"a"]
    assert r.execute_command("COMMAND", "GETKEYS", "DEL", "a", "b", "c") == [b"a", b"b", b"c"]
    assert err(r.execute_command, "COMMAND", "GETKEYS", "PING") == "The command has no key arguments"
    assert err(r.execute_command, "COMMAND", "GETKEYS", "NOSUCH", "x") == "Invalid command specified"
    assert err(r.execute_command, "COMMAND", "GETKEYS", "GET") == "Invalid number of arguments specified for command"
    assert raw().call("COMMAND", "GETKEYSANDFLAGS", "GET", "k") == b"*1\r\n*2\r\n$1\r\nk\r\n*2\r\n+RO\r\n+access\r\n"
    names = r.execute_command("COMMAND", "LIST")
    assert b"get" in names and b"config|get" in names
    assert r.execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "conf*") [:1] == [b"config"]
    assert r.execute_command("COMMAND", "LIST", "FILTERBY", "MODULE", "x") == []
    assert b"get" in r.execute_command("COMMAND", "LIST", "FILTERBY", "ACLCAT", "read")
    assert err(r.execute_command, "COMMAND", "LIST", "bad") == "syntax error"
    assert raw().call("COMMAND", "DOCS", "get").startswith(b"*2\r\n$3\r\nget\r\n*6\r\n$7\r\nsummary\r\n")


def test_slowlog(r, raw):
    r.config_set("slowlog-log-slower-than", "0")
    r.execute_command("SLOWLOG", "RESET")
    r.set(b"slowkey", b"v")
    r.client_setname("slowpoke")
    rep = raw().call("SLOWLOG", "GET", "-1")
    r.config_set("slowlog-log-slower-than", "10000")
    assert rep.startswith(b"*")
    assert b"*6\r\n:" in rep
    assert b"*3\r\n$3\r\nSET\r\n$7\r\nslowkey\r\n$1\r\nv\r\n$15\r\n127.0.0.1:" in rep
    assert r.execute_command("SLOWLOG", "LEN") >= 2
    assert err(r.execute_command, "SLOWLOG", "GET", "-2") == "count should be greater than or equal to -1"
    assert r.execute_command("SLOWLOG", "RESET") == b"OK"
    assert r.execute_command("SLOWLOG", "LEN") == 0


def test_latency(r):
    assert r.execute_command("LATENCY", "LATEST") == []
    assert r.execute_command("LATENCY", "HISTORY", "command") == []
    r.config_set("latency-monitor-threshold", "100")
    r.execute_command("DEBUG", "SLEEP", "0.15")
    r.config_set("latency-monitor-threshold", "0")
    latest = r.execute_command("LATENCY", "LATEST")
    assert latest[0][0] == b"command" and latest[0][2] >= 100
    assert len(r.execute_command("LATENCY", "HISTORY", "command")) == 1
    assert b"command - high" in r.execute_command("LATENCY", "GRAPH", "command")
    assert err(r.execute_command, "LATENCY", "GRAPH", "nope") == "No samples available for event 'nope'"
    assert r.execute_command("LATENCY", "RESET") == 1
    r.config_resetstat()
    r.ping()
    h = r.execute_command("LATENCY", "HISTOGRAM", "ping")
    assert h[0] == b"ping" and h[1][:2] == [b"calls", 1]
    assert b"Dave" in r.execute_command("LATENCY", "DOCTOR")


def test_a_pipelined_command_is_timed_from_the_end_of_the_one_before(r, raw):
    """A request parsed ahead in a pipeline starts its clock where the
    command before it ended (one clock reading a command, not two): the
    slow command's time stays its own, in INFO commandstats and the slow
    log, and the commands after it are timed as fast as they are."""
    r.config_resetstat()
    r.execute_command("SLOWLOG", "RESET")
    r.config_set("slowlog-log-slower-than", "100000")
    try:
        c = raw()
        c.send(c.encode("DEBUG", "SLEEP", "0.2") + c.encode("INCR", "timed-counter") + c.encode("PING"))
        assert [c.read_reply(), c.read_reply(), c.read_reply()] == [b"+OK\r\n", b":1\r\n", b"+PONG\r\n"]
        stats = r.info("commandstats")
        assert stats["cmdstat_debug"]["usec"] >= 200000
        assert stats["cmdstat_incr"]["calls"] == 1 and stats["cmdstat_incr"]["usec"] < 100000
        assert stats["cmdstat_ping"]["calls"] == 1 and stats["cmdstat_ping"]["usec"] < 100000
        logged = [e[3][0] for e in r.execute_command("SLOWLOG", "GET", "-1")]
        assert logged == [b"DEBUG"]
    finally:
        r.config_set("slowlog-log-slower-than", "10000")


def test_monitor(r, raw):
    m = raw()
    assert m.call("MONITOR") == b"+OK\r\n"
    r.set(b"mk", b"a b")
    line = m.read_line()
    assert line.endswith(b'"SET" "mk" "a b"\r\n') and line.startswith(b"+"), line
    assert b"[0 127.0.0.1:" in line


def test_debug(r):
    r.set(b"k", b"12")
    line = r.execute_command("DEBUG", "OBJECT", "k").decode()
    assert line.startswith("Value at:0x") and "encoding:int" in line and "refcount:1" in line
    r.set(b"s", b"x" * 100)
    assert "encoding:raw" in r.execute_command("DEBUG", "OBJECT", "s").decode()
    assert err(r.execute_command, "DEBUG", "OBJECT", "nokey") == "no such key"
    assert r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1") == b"OK"
    t = time.monotonic()
    assert r.execute_command("DEBUG", "SLEEP", "0.1") == b"OK"
    assert time.monotonic() - t >= 0.1
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert r.get(b"k") == b"12" and r.get(b"s") == b"x" * 100
    assert err(r.execute_command, "DEBUG", "NOPE") == "unknown subcommand or wrong number of arguments for 'NOPE'. Try DEBUG HELP."


def test_debug_listpack_and_quicklist(server, c):
    """DEBUG LISTPACK/QUICKLIST print the structure on stdout (the server log) in
    lpRepr's layout, minus addresses and raw bytes, and reply Redis's status;
    other encodings and missing keys get Redis's errors."""

    def printed(call):
        with open(server.log_path, "rb") as f:
            f.seek(0, 2)
            start = f.tell()
            reply = call()
            f.seek(start)
            return reply, f.read().decode(errors="replace")

    assert c.call("RPUSH", "l", "a", "12", "b" * 70) == b":3\r\n"
    reply, out = printed(lambda: c.call("DEBUG", "LISTPACK", "l"))
    assert reply == b"+Listpack structure printed on stdout\r\n"
    # 6-byte header + "a" (3) + 12 as an integer (2) + 70-byte string (73) + end byte.
    assert out.startswith("{total bytes 85} {num entries 3}\n"), out
    assert ("{\n\tindex:  2,\n\toffset: 11,\n\thdr+entrylen+backlen: 73,\n\thdrlen:   2,\n"
            "\tbacklen:  1,\n\tpayload: 70\n\t[str]" + "b" * 40 + "...\n}\n{end}\n") in out, out
    assert "\tindex:  1,\n\toffset: 9,\n\thdr+entrylen+backlen:  2,\n\thdrlen:   1,\n" in out, out

    c.call("HSET", "h", "f", "v")
    c.call("ZADD", "z", "1.5", "m")
    for key in ("h", "z"):
        assert c.call("DEBUG", "LISTPACK", key) == b"+Listpack structure printed on stdout\r\n"
    c.call("SET", "s", "x")
    c.call("SADD", "ints", "1", "2")
    for key in ("s", "ints"):
        assert c.call("DEBUG", "LISTPACK", key) == b"-ERR Not a listpack encoded object.\r\n"
    assert c.call("DEBUG", "LISTPACK", "nokey") == b"-ERR no such key\r\n"

    c.call("RPUSH", "q", *[b"%03d" % i + b"x" * 97 for i in range(200)])
    assert c.call("OBJECT", "ENCODING", "q") == b"$9\r\nquicklist\r\n"
    assert c.call("DEBUG", "LISTPACK", "q") == b"-ERR Not a listpack encoded object.\r\n"
    reply, out = printed(lambda: c.call("DEBUG", "QUICKLIST", "q"))
    assert reply == b"+Quicklist structure printed on stdout\r\n"
    assert out.startswith("{count : 200}\n"), out
    assert c.call("DEBUG", "QUICKLIST", "l") == b"-ERR Not a quicklist encoded object.\r\n"
    assert c.call("DEBUG", "QUICKLIST", "nokey") == b"-ERR no such key\r\n"


def test_debug_help_lists_only_what_debug_does(r):
    lines = [l.decode() for l in r.execute_command("DEBUG", "HELP")]
    listed = {l.split()[0] for l in lines[1:] if not l.startswith(" ")}
    assert {"LISTPACK", "OBJECT", "PROTOCOL", "SET-ACTIVE-EXPIRE", "SLEEP", "HELP"} <= listed
    # Accepted as no-ops (Redis's own tests call them) but not what Redis's
    # HELP promises: densekv has no replication IDs, no packed-node threshold
    # and no stringmatchlen fuzzer, so HELP does not offer them.
    assert not listed & {"CHANGE-REPL-ID", "QUICKLIST-PACKED-THRESHOLD", "STRINGMATCH-LEN"}
    assert "    Show low level info about the listpack encoding of <key>." in lines


def test_time_lastsave(r):
    sec, usec = r.execute_command("TIME")
    assert abs(int(sec) - time.time()) < 5 and 0 <= int(usec) < 1_000_000
    assert abs(r.lastsave().timestamp() - time.time()) < 3600 * 24


def test_select_and_flush(r):
    assert err(r.execute_command, "SELECT", "100") == "DB index is out of range"
    assert err(r.execute_command, "SELECT", "x") == "value is not an integer or out of range"
    r.set(b"a", b"1")
    assert r.execute_command("SELECT", 1) in (True, b"OK")
    r.set(b"b", b"1")
    assert r.dbsize() == 1
    assert r.execute_command("FLUSHDB", "ASYNC") in (True, b"OK")
    assert r.dbsize() == 0
    r.execute_command("SELECT", 0)
    assert r.dbsize() == 1
    assert err(r.execute_command, "FLUSHALL", "LATER") == "syntax error"
    assert r.execute_command("FLUSHALL", "SYNC") in (True, b"OK")
    assert r.dbsize() == 0


def test_function_stubs(r):
    assert r.execute_command("FUNCTION", "FLUSH") == b"OK"
    assert r.execute_command("FUNCTION", "FLUSH", "ASYNC") == b"OK"
    assert r.execute_command("FUNCTION", "LIST") == []
    assert err(r.execute_command, "FUNCTION", "FLUSH", "X") == "FUNCTION FLUSH only supports SYNC|ASYNC option"


def test_hello(raw):
    c = raw()
    rep = c.call("HELLO", "3")
    assert rep.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n8.4.0\r\n$5\r\nproto\r\n:3\r\n")
    assert c.call("CONFIG", "GET", "timeout") == b"%1\r\n$7\r\ntimeout\r\n$1\r\n0\r\n"
    assert c.call("HELLO", "4") == b"-NOPROTO unsupported protocol version\r\n"
    assert c.call("HELLO", "x") == b"-ERR Protocol version is not an integer or out of range\r\n"
    rep2 = c.call("HELLO", "2", "SETNAME", "hn")
    assert rep2.startswith(b"*14\r\n")
    assert c.call("CLIENT", "GETNAME") == b"$2\r\nhn\r\n"
    assert c.call("AUTH", "x") == (b"-ERR AUTH <password> called without any password configured for the default user. "
                                   b"Are you sure your configuration is correct?\r\n")


def test_resp3_info_is_verbatim(r3):
    raw = r3.execute_command("CLIENT", "INFO")
    assert b"id=" in (raw if isinstance(raw, bytes) else str(raw).encode())


def test_reset(r):
    r.execute_command("SELECT", 2)
    r.client_setname("x")
    assert r.execute_command("RESET") in ("RESET", b"RESET")
    assert r.client_getname() is None
    assert r.execute_command("CLIENT", "INFO").decode().split(" db=")[1].startswith("0 ")


def test_shutdown(start_server):
    srv = start_server()
    c = redis.Redis(host=srv.host, port=srv.port)
    assert err(c.execute_command, "SHUTDOWN", "ABORT") == "No shutdown in progress."
    assert err(c.execute_command, "SHUTDOWN", "BOGUS") == "syntax error"
    with pytest.raises(redis.ConnectionError):
        c.execute_command("SHUTDOWN", "NOSAVE")
    srv.proc.wait(timeout=5)
    assert srv.proc.returncode == 0


def test_command_getkeys_and_flags(r, raw):
    c = raw()
    assert c.call("COMMAND", "GETKEYS", "GET", "key") == b"*1\r\n$3\r\nkey\r\n"
    assert c.call("COMMAND", "GETKEYSANDFLAGS", "SET", "k1", "v1") == b"*1\r\n*2\r\n$2\r\nk1\r\n*2\r\n+OW\r\n+update\r\n"
    assert c.call("COMMAND", "GETKEYSANDFLAGS", "SET", "k1", "v1", "GET") == (
        b"*1\r\n*2\r\n$2\r\nk1\r\n*3\r\n+RW\r\n+access\r\n+update\r\n"
    )
    assert c.call("COMMAND", "GETKEYSANDFLAGS", "MSET", "k1", "v1", "k2", "v2") == (
        b"*2\r\n*2\r\n$2\r\nk1\r\n*2\r\n+OW\r\n+update\r\n*2\r\n$2\r\nk2\r\n*2\r\n+OW\r\n+update\r\n"
    )
    assert c.call("COMMAND", "GETKEYS", "MEMORY", "USAGE", "key") == b"*1\r\n$3\r\nkey\r\n"
    assert c.call("COMMAND", "GETKEYS", "NOSUCH", "x") == b"-ERR Invalid command specified\r\n"
    assert c.call("COMMAND", "GETKEYS", "CONFIG", "NOSUCH") == b"-ERR Invalid command specified\r\n"
    assert c.call("COMMAND", "GETKEYS", "PING") == b"-ERR The command has no key arguments\r\n"
    assert c.call("COMMAND", "GETKEYS", "GET") == b"-ERR Invalid number of arguments specified for command\r\n"


def test_command_info_flags_and_key_specs(r):
    r.response_callbacks.pop("COMMAND", None)  # keep redis-py from reshaping replies
    (info,) = r.execute_command("COMMAND", "INFO", "SET")
    assert info[2] == [b"write", b"denyoom"]
    (spec,) = info[8]
    assert spec[:2] == [b"flags", [b"RW", b"access", b"update", b"variable_flags"]]
    assert spec[2:4] == [b"begin_search", [b"type", b"index", b"spec", [b"index", 1]]]
    assert spec[4:] == [b"find_keys", [b"type", b"range", b"spec", [b"lastkey", 0, b"keystep", 1, b"limit", 0]]]
    # may_replicate is hidden, as in Redis; nothing here has movable keys.
    for name in (b"set", b"get", b"mset", b"ping", b"memory"):
        (info,) = r.execute_command("COMMAND", "INFO", name)
        assert b"movablekeys" not in info[2] and b"may_replicate" not in info[2]
    assert r.execute_command("COMMAND", "INFO", "get|key") == [None]
    assert r.execute_command("COMMAND", "INFO", "config|get|key") == [None]


def test_help_of_function_and_module(r):
    assert r.execute_command("FUNCTION", "HELP")[0].startswith(b"FUNCTION <subcommand> ")
    assert r.execute_command("MODULE", "HELP")[0].startswith(b"MODULE <subcommand> ")
    assert r.execute_command("MODULE", "LIST") == []


def test_sync_flush_counts_as_lazyfree_outside_multi(r):
    """Redis runs FLUSHALL/FLUSHDB SYNC as a blocking lazy free, except inside
    MULTI; lazyfreed_objects shows which one ran."""
    r.config_resetstat()
    r.mset({"a": 1, "b": 2})
    r.flushall()
    assert r.info("memory")["lazyfreed_objects"] == 2
    r.config_resetstat()
    r.mset({"a": 1, "b": 2})
    p = r.pipeline(transaction=True)
    p.flushall()
    p.execute()
    assert r.info("memory")["lazyfreed_objects"] == 0
    assert r.dbsize() == 0


def _wait_lazyfree(r, freed, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = r.info("memory")
        if m["lazyfree_pending_objects"] == 0 and m["lazyfreed_objects"] == freed:
            return m
        time.sleep(0.02)
    raise AssertionError(f"lazyfree never reached {freed}: {r.info('memory')}")


def test_unlink_frees_big_values_in_the_background(r):
    r.config_resetstat()
    r.sadd("big", *range(100_000))
    r.set("small", "x")
    r.hset("smallhash", mapping={"a": 1})
    before = r.info("memory")["used_memory"]
    assert r.unlink("small", "smallhash") == 2
    assert r.info("memory")["lazyfreed_objects"] == 0  # cheap values are freed inline
    assert r.unlink("big", "nokey") == 1
    assert r.exists("big") == 0
    after = _wait_lazyfree(r, 1)["used_memory"]
    assert after < before - 500_000


def test_del_frees_as_unlink_with_lazyfree_lazy_user_del(start_server):
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    assert r.config_get("lazyfree-lazy-user-del") == {"lazyfree-lazy-user-del": "no"}
    r.sadd("big", *range(100_000))
    assert r.delete("big") == 1
    assert r.info("memory")["lazyfreed_objects"] == 0  # freed inline
    r.config_set("lazyfree-lazy-user-del", "yes")
    r.sadd("big", *range(100_000))
    r.set("small", "x")
    assert r.delete("big", "small", "nokey") == 2
    assert r.exists("big", "small") == 0
    _wait_lazyfree(r, 1)  # the set on the freeing thread, the string inline


def test_lazyfree_lazy_server_del_frees_what_overwrites_replace(start_server):
    """lazyfree-lazy-server-del: the collection SET, RENAME or a *STORE
    replaces is freed on the freeing thread (lazyfreed_objects counts it),
    as UNLINK frees; off, inline. Overwrites go out as before."""
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    assert r.config_get("lazyfree-lazy-server-del") == {"lazyfree-lazy-server-del": "no"}
    r.sadd("big", *range(100_000))
    r.set("big", "v")
    assert r.info("memory")["lazyfreed_objects"] == 0  # freed inline
    r.config_set("lazyfree-lazy-server-del", "yes")
    r.sadd("big2", *range(100_000))
    before = r.info("memory")["used_memory"]
    assert r.set("big2", "v") is True
    after = _wait_lazyfree(r, 1)["used_memory"]
    assert after < before - 500_000
    r.sadd("big3", *range(100_000))
    r.set("s", "x")
    assert r.rename("s", "big3") is True and r.get("big3") == b"x"
    r.zadd("z", {f"m{i}": i for i in range(1000)})
    r.zadd("dst", {f"m{i}": i for i in range(1000)})
    r.zunionstore("dst", ["z"])
    _wait_lazyfree(r, 3)
    r.sadd("small", "a")
    r.set("small", "v")  # cheap: freed inline, not counted
    _wait_lazyfree(r, 3)
    assert r.zcard("dst") == 1000 and r.get("big2") == b"v"


def test_lazyfree_lazy_expire_frees_expired_collections_in_the_background(start_server):
    """lazyfree-lazy-expire: a big collection that expires (active expiry
    or a read that finds it due) is freed on the freeing thread."""
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    r.config_set("lazyfree-lazy-expire", "yes")
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    r.sadd("a", *range(100_000))
    r.sadd("b", *range(100_000))
    r.pexpire("a", 50)
    r.pexpire("b", 50)
    time.sleep(0.1)
    assert r.exists("a") == 0  # found due on access
    _wait_lazyfree(r, 1)
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    _wait_lazyfree(r, 2)  # the active cycle
    assert r.info("stats")["expired_keys"] == 2
    r.config_set("lazyfree-lazy-expire", "no")
    r.sadd("c", *range(100_000))
    r.pexpire("c", 10)
    time.sleep(0.05)
    assert r.exists("c") == 0
    assert r.info("memory")["lazyfreed_objects"] == 2


def test_flush_async_frees_in_the_background(r):
    r.config_resetstat()
    for db in (0, 1):
        r.execute_command("SELECT", db)
        r.mset({f"k{i}": i for i in range(1000)})
    r.execute_command("SELECT", 0)
    assert r.flushall(asynchronous=True) is True
    assert r.dbsize() == 0
    _wait_lazyfree(r, 2000)
    r.mset({f"k{i}": i for i in range(10)})
    assert r.flushdb(asynchronous=True) is True
    _wait_lazyfree(r, 2010)
    assert r.set("after", 1) is True and r.dbsize() == 1


def test_used_memory_is_exact_across_a_background_free(r):
    """used_memory counts live bytes exactly (no allocator-cache lag): a hash
    built and then unlinked, freed on the background thread, leaves it where
    it was. The first round also grows buffers that stay (the connection's
    query buffer), so the second round is the one compared."""
    r.config_resetstat()
    # A command slower than the slowlog threshold (a loaded machine) would
    # keep an entry: that memory is not the hash's.
    r.config_set("slowlog-log-slower-than", -1)
    # The cron resizes clients' reply buffers to their use (giving back a
    # kilobyte or two at a time): not the memory measured here, so held
    # still meanwhile, as Redis's own tests do where client memory must.
    r.execute_command("DEBUG", "REPLYBUFFER", "RESIZING", "0")
    try:
        for round in (1, 2):
            before = r.info("memory")["used_memory"]
            p = r.pipeline(transaction=False)
            for i in range(0, 20_000, 500):
                p.hset("h", mapping={f"field:{j}": j for j in range(i, i + 500)})
            p.execute()
            grown = r.info("memory")["used_memory"] - before
            assert 20_000 * 10 < grown < 20_000 * 40
            assert r.unlink("h") == 1
            after = _wait_lazyfree(r, round)["used_memory"]
    finally:
        r.execute_command("DEBUG", "REPLYBUFFER", "RESIZING", "1")
    r.config_set("slowlog-log-slower-than", 10000)
    assert abs(after - before) < 256, (before, after)


def test_used_memory_holds_still_across_idle_reads(r):
    """Nothing changes between two INFO calls of an idle client, so neither
    does used_memory: with I/O threads, what a thread allocated to hand a
    request over is counted before the executor runs it (a queue that
    allocated its next block after the thread published read 1 KiB low
    once every 31 requests). Enough reads to cross many such blocks."""
    r.config_set("slowlog-log-slower-than", -1)
    r.execute_command("DEBUG", "REPLYBUFFER", "RESIZING", "0")
    try:
        for _ in range(20):  # buffers that a first INFO grows stay
            r.info("memory")
        seen = [r.info("memory")["used_memory"] for _ in range(200)]
    finally:
        r.execute_command("DEBUG", "REPLYBUFFER", "RESIZING", "1")
        r.config_set("slowlog-log-slower-than", 10000)
    assert max(seen) - min(seen) < 256, sorted(set(seen))


def test_keyspace_hits_and_misses_count_read_lookups(r):
    """INFO keyspace_hits and keyspace_misses count each key a read command
    looks up, found or not (a cache's hit rate); write commands' lookups
    are not counted, as Redis counts them; CONFIG RESETSTAT zeroes both."""
    r.set("a", 1)
    r.hset("h", "f", 1)
    r.config_resetstat()
    r.get("a")
    r.get("missing")
    r.mget("a", "h", "missing")  # a string, another type (nil, found), absent
    r.exists("a", "missing")
    r.hget("h", "f")
    r.hget("nohash", "f")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.hget("a", "f")  # found, then the wrong type
    r.type("missing")
    r.ttl("a")
    r.set("b", 2)
    r.incr("n")
    r.delete("a")
    stats = r.info("stats")
    assert (stats["keyspace_hits"], stats["keyspace_misses"]) == (7, 5)
    # The write commands that read as GET does count their read too.
    assert r.set("b", 3, get=True) == b"2"
    assert r.getdel("b") == b"3"
    assert r.getex("b", ex=10) is None
    assert r.getset("c", 1) is None
    stats = r.info("stats")
    assert (stats["keyspace_hits"], stats["keyspace_misses"]) == (9, 7)
    r.config_resetstat()
    stats = r.info("stats")
    assert (stats["keyspace_hits"], stats["keyspace_misses"]) == (0, 0)


def test_errorstats_stop_at_128_codes_until_resetstat(start_server):
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    script = "return redis.error_reply(ARGV[1] .. ' made-up error')"
    for j in range(200):
        with pytest.raises(redis.ResponseError):
            r.eval(script, 0, f"E{j}")
    stats = r.info("errorstats")
    # The 129th distinct code turned the table off: only the marker counts.
    assert stats == {"errorstat_ERRORSTATS_DISABLED": {"count": 1}}
    log = open(s.log_path, errors="replace").read()
    assert log.count("Errorstats stopped adding new errors") == 1
    assert "Current errors code list: E0, E1, E10," in log
    r.config_resetstat()
    with pytest.raises(redis.ResponseError):
        r.execute_command("NOSUCHCMD")
    assert r.info("errorstats") == {"errorstat_ERR": {"count": 1}}


def test_eventloop_metrics_count_cycles_and_time(r):
    before = r.info("stats")
    time.sleep(0.25)
    after = r.info("stats")
    # An idle server wakes hz (10) times a second for cron.
    assert 1 < after["eventloop_cycles"] - before["eventloop_cycles"] < 20
    assert after["eventloop_duration_sum"] > before["eventloop_duration_sum"]
    assert after["eventloop_duration_cmd_sum"] > before["eventloop_duration_cmd_sum"]
    time.sleep(1.7)
    stats = r.info("stats")
    assert 5 <= stats["instantaneous_eventloop_cycles_per_sec"] <= 30
    assert 0 < stats["instantaneous_eventloop_duration_usec"] < 100_000


def test_info_debug_is_shown_only_when_named(r):
    assert "eventloop_duration_cron_sum" not in r.info("everything")
    first = r.info("debug")
    assert first["eventloop_duration_aof_sum"] >= 0
    assert first["eventloop_cmd_per_cycle_max"] >= 1
    assert first["eventloop_duration_max"] > 0
    time.sleep(0.25)
    assert r.info("debug")["eventloop_duration_cron_sum"] > first["eventloop_duration_cron_sum"]


def test_output_buffer_hard_limit_closes_a_normal_client(start_server):
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    r.set("big", "a" * 100_000)
    r.set("small", "b" * 100)
    r.config_set("client-output-buffer-limit", "normal 1000 0 0")
    victim = socket.create_connection((s.host, s.port), timeout=5)
    victim.sendall(b"GET small\r\n")
    assert victim.recv(1000) == b"$100\r\n" + b"b" * 100 + b"\r\n"
    # The reply passes the limit: the client is dropped, the reply unsent.
    victim.sendall(b"GET big\r\n")
    assert victim.recv(1000) == b""
    stats = r.info("stats")
    assert stats["client_output_buffer_limit_disconnections"] == 1
    assert stats["client_query_buffer_limit_disconnections"] == 0
    assert "for overcoming of output buffer limits" in open(s.log_path, errors="replace").read()


def test_cluster_without_cluster_support(r, raw):
    # Listed like Redis's (clients probe COMMAND for it), every subcommand
    # answering that cluster support is disabled; arity checked first.
    r.response_callbacks.pop("COMMAND", None)  # keep redis-py from reshaping replies
    c = raw()
    for argv in (["CLUSTER", "INFO"], ["CLUSTER", "HELP"], ["CLUSTER", "MYID"], ["CLUSTER", "KEYSLOT", "k"],
                 ["CLUSTER", "COUNTKEYSINSLOT", "1"], ["CLUSTER", "GETKEYSINSLOT", "1", "10"], ["CLUSTER", "NODES"]):
        assert c.call(*argv) == b"-ERR This instance has cluster support disabled\r\n"
    assert c.call("CLUSTER", "KEYSLOT") == b"-ERR wrong number of arguments for 'cluster|keyslot' command\r\n"
    assert c.call("CLUSTER", "NOPE").startswith(b"-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.")
    names = r.execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "cl*help")
    assert b"cluster|help" in names and b"client|help" in names
    info = r.execute_command("COMMAND", "INFO", "cluster|reset")[0]
    assert info[1] == -2 and b"noscript" in info[2] and b"admin" in info[2]
    assert set(info[6]) == {b"@admin", b"@slow", b"@dangerous"}
    with pytest.raises(redis.ResponseError, match="command is not allowed"):
        r.eval("redis.call('cluster', 'reset', 'hard')", 0)


def test_min_replicas_to_write_refuses_writes_without_replicas(r):
    r.set("x", "some value")
    r.config_set("min-replicas-to-write", 1)
    try:
        with pytest.raises(redis.ResponseError, match=r"^NOREPLICAS Not enough good replicas to write\.$"):
            r.set("x", "other")
        assert r.get("x") == b"some value"
        # Scripts that may write are refused; reads and no-writes run.
        assert r.eval("#!lua flags=no-writes\nreturn redis.call('get','x')", 1, "x") == b"some value"
        assert r.eval("return redis.call('get','x')", 1, "x") == b"some value"
        with pytest.raises(redis.ResponseError, match="Not enough good replicas"):
            r.eval("#!lua\nreturn redis.call('get','x')", 1, "x")
        with pytest.raises(redis.ResponseError, match="Not enough good replicas"):
            r.eval("return redis.call('set','x', 1)", 1, "x")
        # A lag limit of 0 turns the check off, as in Redis.
        r.config_set("min-replicas-max-lag", 0)
        assert r.set("x", "lagless")
    finally:
        r.config_set("min-replicas-to-write", 0)
        r.config_set("min-replicas-max-lag", 10)
    assert r.set("x", "v")


def test_dynamic_hz_raises_the_effective_hz_with_many_clients(start_server):
    """With dynamic-hz (the default) the configured hz is a baseline: while
    more than 200 clients per tick are connected the effective hz doubles
    (INFO hz), configured_hz stays; with dynamic-hz no it stays put."""
    s = start_server("--hz", "1")
    r = redis.Redis(host=s.host, port=s.port)
    info = r.info("server")
    assert info["hz"] == 1 and info["configured_hz"] == 1
    socks = [socket.create_connection((s.host, s.port)) for _ in range(450)]
    try:
        deadline = time.monotonic() + 5
        while r.info("server")["hz"] != 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        info = r.info("server")
        assert info["hz"] == 4 and info["configured_hz"] == 1
        r.config_set("dynamic-hz", "no")
        assert r.config_get("dynamic-hz") == {"dynamic-hz": "no"}
        info = r.info("server")
        assert info["hz"] == 1 and info["configured_hz"] == 1
        r.config_set("dynamic-hz", "yes")
        assert r.info("server")["hz"] == 4
    finally:
        for c in socks:
            c.close()


def test_lolwut(r, r3, raw):
    # Redis answers a verbatim string (a bulk string in RESP2) of art that
    # ends with the line naming the server's version.
    ver = r.info("server")["redis_version"]
    out = r.lolwut().decode()
    assert out.endswith("Redis ver. %s\n" % ver)
    out = r.execute_command("LOLWUT", "VERSION", "5").decode()
    assert out.endswith("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. %s\n" % ver)
    art = out.split("\n\n")[0].split("\n")
    # 66 columns by default, 8 squares per row, 12 down.
    assert len(art) > 10 and all(len(line) == 66 for line in art)
    out = r.execute_command("LOLWUT", "VERSION", "5", "20", "2", "3").decode()
    assert all(len(line) == 20 for line in out.split("\n\n")[0].split("\n"))
    out = r.execute_command("LOLWUT", "VERSION", "6", "30", "5").decode()
    lines = out.split("\n")
    assert len(lines[0]) == 30 and lines[4] != "" and lines[5] == ""
    assert out.endswith(" Redis ver. %s\n" % ver)
    # The piece's own sizes are clamped, never refused, unless not numbers.
    assert r.execute_command("LOLWUT", "VERSION", "5", "0", "-3", "999999").decode().endswith(ver + "\n")
    assert r.execute_command("LOLWUT", "VERSION", "4").decode() == "Redis ver. %s\n" % ver
    assert r.execute_command("LOLWUT", "VERSION", "-1").decode() == "Redis ver. %s\n" % ver
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("LOLWUT", "VERSION", "five")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("LOLWUT", "VERSION", "5", "wide")
    # "VERSION" without a number is an argument of the default piece.
    assert r.execute_command("LOLWUT", "VERSION").decode().endswith(ver + "\n")
    c = raw()
    c.call("HELLO", "3")
    assert c.call("LOLWUT") == b"=%d\r\ntxt:Redis ver. %s\n\r\n" % (len(ver) + 16, ver.encode())
    c.call("HELLO", "2")
    assert c.call("LOLWUT") == b"$%d\r\nRedis ver. %s\n\r\n" % (len(ver) + 12, ver.encode())
    assert r3.lolwut().endswith(b"Redis ver. " + ver.encode() + b"\n")
    info = c.call("COMMAND", "INFO", "lolwut")
    assert info.startswith(b"*1\r\n*10\r\n$6\r\nlolwut\r\n:-1\r\n*2\r\n+readonly\r\n+fast\r\n:0\r\n:0\r\n:0\r\n")
    assert b"*2\r\n+@read\r\n+@fast\r\n" in info
    docs = c.call("COMMAND", "DOCS", "lolwut")
    assert b"$5\r\ngroup\r\n$6\r\nserver\r\n" in docs and b"$5\r\nsince\r\n$5\r\n5.0.0\r\n" in docs


def config_file_server(path: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([server_binary(), path], cwd=os.path.dirname(path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while ping(port, timeout=0.5) is None:
        assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    return proc


def test_config_rewrite_and_rewrite_of_every_setting(tmp_path):
    """CONFIG REWRITE keeps the file's own lines and writes what differs
    from the defaults; DEBUG CONFIG-REWRITE-FORCE-ALL writes every setting,
    and a server started from that file has the same configuration."""
    port = free_port()
    path = tmp_path / "densekv.conf"
    path.write_text(f"# kept\nport {port}\nbind 127.0.0.1\nsave \"\"\nenable-debug-command yes\n"
                    "propagation-error-behavior panic\n")
    proc = config_file_server(str(path), port)
    try:
        c = redis.Redis(port=port)
        c.config_set("maxmemory-policy", "allkeys-lru")
        assert c.execute_command("CONFIG", "REWRITE") == b"OK"
        lines = path.read_text().splitlines()
        assert lines[0] == "# kept"
        assert "maxmemory-policy allkeys-lru" in lines and "propagation-error-behavior panic" in lines
        assert "hz 10" not in lines, "defaults are left out"
        before = dict(zip(*[iter(c.execute_command("CONFIG", "GET", "*"))] * 2))
        assert c.execute_command("DEBUG", "CONFIG-REWRITE-FORCE-ALL") == b"OK"
        lines = path.read_text().splitlines()
        assert "hz 10" in lines and "maxmemory-policy allkeys-lru" in lines
        c.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    finally:
        proc.wait(10)
    proc = config_file_server(str(path), port)
    try:
        c = redis.Redis(port=port)
        after = dict(zip(*[iter(c.execute_command("CONFIG", "GET", "*"))] * 2))
        assert after == before
    finally:
        proc.terminate()
        proc.wait(10)


def test_config_set_rolls_back_what_it_applied(start_server):
    """A CONFIG SET that fails on a later setting (a port in use) puts back
    the earlier ones, those already applied (the OOM score) included."""
    srv = start_server()
    c = redis.Redis(host=srv.host, port=srv.port)
    score = oom_score_of(c)
    base = score()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        used = taken.getsockname()[1]
        with pytest.raises(redis.ResponseError, match="possibly related to argument 'port'"):
            c.execute_command("CONFIG", "SET", "oom-score-adj", "yes", "oom-score-adj-values", "1 1 1",
                              "maxmemory", "10000001", "port", used)
    assert score() == base
    assert c.config_get("oom-score-adj") == {"oom-score-adj": "no"}
    assert c.config_get("maxmemory") == {"maxmemory": "0"}
    assert c.ping()


def thread_cpus(pid: int) -> dict[str, str]:
    """Each thread's name and the CPUs it may run on (the last of a name)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                line = next(l for l in f if l.startswith("Cpus_allowed_list:"))
        except (OSError, StopIteration):
            continue  # a thread that ended meanwhile
        out[name] = line.split(":", 1)[1].strip()
    return out


def test_cpu_lists_pin_each_thread_to_its_role(start_server):
    """server-cpulist pins the executor and the I/O threads, bio-cpulist the
    background threads, bgsave-cpulist a save's writer, as taskset lists
    them; a list that does not parse is left unapplied."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to tell the lists apart")
    a, b = str(cpus[0]), str(cpus[-1])
    srv = start_server("--server-cpulist", a, "--bio-cpulist", b, "--bgsave-cpulist", f"{b}-{b}:1",
                       "--io-threads", "2")
    c = redis.Redis(host=srv.host, port=srv.port)
    pid = c.info("server")["process_id"]
    threads = thread_cpus(pid)
    assert threads["io_thd_1"] == a and threads["lazyfree"] == b
    assert [cpus for name, cpus in threads.items() if name.startswith("densekv")] == [a]
    assert c.config_get("server-cpulist") == {"server-cpulist": a}
    c.execute_command("DEBUG", "POPULATE", 1000)
    c.config_set("rdb-key-save-delay", 10_000)
    c.bgsave()
    deadline = time.monotonic() + 10
    while "bgsave" not in thread_cpus(pid):
        assert time.monotonic() < deadline, "no save thread"
        time.sleep(0.01)
    assert thread_cpus(pid)["bgsave"] == b
    c.config_set("rdb-key-save-delay", 0)
    plain = start_server("--server-cpulist", "3-1", "--bio-cpulist", "x")
    with open("/proc/self/status") as f:
        mine = next(l for l in f if l.startswith("Cpus_allowed_list:")).split(":", 1)[1].strip()
    pid = redis.Redis(host=plain.host, port=plain.port).info("server")["process_id"]
    assert set(thread_cpus(pid).values()) == {mine}, "unparsed lists leave threads where they were"


def test_disable_thp_turns_huge_pages_off_for_the_process(start_server):
    def thp(srv) -> str:
        pid = redis.Redis(host=srv.host, port=srv.port).info("server")["process_id"]
        with open(f"/proc/{pid}/status") as f:
            lines = [l for l in f if l.startswith("THP_enabled:")]
        if not lines:
            pytest.skip("the kernel does not report THP_enabled (before Linux 5.0)")
        return lines[0].split()[1]

    assert thp(start_server()) == "0", "on by default, as Redis's"
    assert thp(start_server("--disable-thp", "no")) == "1"


def oom_score_of(c: redis.Redis):
    """A reader of the server's OOM score adjustment."""
    # The server's pid, also when DENSEKV_BIN is a wrapper that execs it.
    pid = c.info("server")["process_id"]

    def score() -> int:
        with open(f"/proc/{pid}/oom_score_adj") as f:
            return int(f.read())
    return score


def test_oom_score_adj_follows_the_role(start_server):
    srv = start_server()
    c = redis.Redis(host=srv.host, port=srv.port)
    score = oom_score_of(c)
    base = score()
    c.config_set("oom-score-adj-values", "10 20 30")
    assert score() == base, "off: the score is left alone"
    c.config_set("oom-score-adj", "yes")
    assert score() == base + 10
    c.config_set("oom-score-adj-values", "15 20 30")
    assert score() == base + 15
    c.execute_command("REPLICAOF", "127.0.0.1", "1")
    assert score() == base + 20, "a replica takes the second value"
    c.execute_command("REPLICAOF", "NO", "ONE")
    assert score() == base + 15
    c.execute_command("CONFIG", "SET", "oom-score-adj-values", f"{base + 3} 0 0", "oom-score-adj", "absolute")
    assert score() == base + 3
    c.config_set("oom-score-adj", "no")
    assert score() == base, "off again: the score from before"
    assert err(c.execute_command, "CONFIG", "SET", "oom-score-adj-values", "2001 0 0") == \
        "CONFIG SET failed (possibly related to argument 'oom-score-adj-values') - " \
        "Invalid oom-score-adj-values, elements must be between -2000 and 2000."


def test_instantaneous_rates_follow_commands_and_bytes(start_server):
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    idle = r.info("stats")
    value = "v" * 10_000
    t = time.monotonic()
    pipe = r.pipeline(transaction=False)
    while time.monotonic() - t < 0.6:
        for i in range(50):
            pipe.set(f"k{i}", value)
        pipe.execute()
    stats = r.info("stats")
    assert stats["instantaneous_ops_per_sec"] > 100
    # 50 SETs of 10 KB a round trip: well over a megabyte a second in.
    assert float(stats["instantaneous_input_kbps"]) > 1000
    assert float(stats["instantaneous_output_kbps"]) > 0
    assert float(stats["instantaneous_input_kbps"]) > float(stats["instantaneous_output_kbps"])
    assert stats["total_net_repl_input_bytes"] == 0 == stats["total_net_repl_output_bytes"]
    assert float(idle["instantaneous_input_kbps"]) < 100
    # Idle again: the rates fall back within their 1.6 s window.
    deadline = time.monotonic() + 5
    while r.info("stats")["instantaneous_ops_per_sec"] >= 20:
        assert time.monotonic() < deadline, "the rate did not fall back"
        time.sleep(0.1)


def test_used_memory_startup_and_dataset_share(start_server):
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    mem = r.info("memory")
    startup = mem["used_memory_startup"]
    assert 0 < startup <= mem["used_memory"]
    assert mem["used_memory_overhead"] >= startup
    r.execute_command("DEBUG", "POPULATE", "100000", "key", "100")
    mem = r.info("memory")
    assert mem["used_memory_startup"] == startup
    dataset = mem["used_memory_dataset"]
    assert dataset == mem["used_memory"] - mem["used_memory_overhead"]
    perc = float(mem["used_memory_dataset_perc"].rstrip("%"))
    assert abs(perc - dataset * 100 / (mem["used_memory"] - startup)) < 0.01
    assert 50 < perc <= 100
    assert r.memory_stats()["startup.allocated"] == startup


def test_memory_stats_shows_the_overhead_info_shows(start_server):
    """MEMORY STATS and INFO memory give the same parts, and the overhead
    is their sum (Redis's overhead_total)."""
    s = start_server("--appendonly", "yes")
    r = redis.Redis(host=s.host, port=s.port)
    r.script_load("return 1")
    r.function_load("#!lua name=lib\nredis.register_function('f', function() return 1 end)")
    r.set("k", "v")
    stats, mem = r.memory_stats(), r.info("memory")
    parts = {
        "startup.allocated": "used_memory_startup",
        "replication.backlog": "mem_replication_backlog",
        "clients.slaves": "mem_clients_slaves",
        "cluster.links": "mem_cluster_links",
        "aof.buffer": "mem_aof_buffer",
        "lua.caches": "used_memory_scripts_eval",
        "functions.caches": "used_memory_functions",
    }
    for field, key in parts.items():
        assert stats[field] == mem[key], (field, stats[field], mem[key])
    assert stats["lua.caches"] > 0 and stats["functions.caches"] > 0
    # The caller's own buffers differ by a reply between the two calls.
    assert abs(stats["clients.normal"] - mem["mem_clients_normal"]) < 16 * 1024
    total = sum(stats[f] for f in parts if f != "cluster.links") + stats["cluster.links"] + stats["clients.normal"]
    assert stats["overhead.total"] == total
    assert abs(stats["overhead.total"] - mem["used_memory_overhead"]) < 16 * 1024
    assert stats["dataset.bytes"] == stats["total.allocated"] - stats["overhead.total"]
    assert abs(stats["total.allocated"] - mem["used_memory"]) < 64 * 1024


def test_expired_stale_perc_follows_active_expiry(start_server):
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    assert r.info("stats")["expired_stale_perc"] == 0
    pipe = r.pipeline(transaction=False)
    for i in range(5000):
        pipe.set(f"k{i}", "v", px=50)
    pipe.execute()
    deadline = time.monotonic() + 10
    while r.info("stats")["expired_keys"] < 5000:
        assert time.monotonic() < deadline, "keys did not expire"
        time.sleep(0.05)
    # Every volatile key a cycle looked at was due: each such cycle moves
    # the smoothed share 5% of the way to 100%.
    assert 0 < float(r.info("stats")["expired_stale_perc"]) <= 100


def test_eviction_exceeded_time_counts_while_memory_stays_over(start_server):
    s = start_server()
    r = redis.Redis(host=s.host, port=s.port)
    stats = r.info("stats")
    assert (stats["total_eviction_exceeded_time"], stats["current_eviction_exceeded_time"]) == (0, 0)
    r.execute_command("DEBUG", "POPULATE", "20000", "key", "100")
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1024 * 1024)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        r.set("more", "x")
    time.sleep(0.3)
    stats = r.info("stats")
    assert stats["current_eviction_exceeded_time"] >= 250
    assert stats["total_eviction_exceeded_time"] >= stats["current_eviction_exceeded_time"]
    r.config_set("maxmemory", 0)
    r.set("more", "x")
    stats = r.info("stats")
    assert stats["current_eviction_exceeded_time"] == 0
    assert stats["total_eviction_exceeded_time"] >= 250
    r.config_resetstat()
    assert r.info("stats")["total_eviction_exceeded_time"] == 0


def test_syslog_enabled_sends_the_log_to_the_system_log(tmp_path):
    """syslog-enabled: each log message also goes to /dev/log with the
    facility and level as PRI, then syslog-ident[pid]. The server runs in a
    mount namespace whose /dev/log is this test's socket."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    if subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs none /dev"], capture_output=True).returncode != 0:
        pytest.skip("mount namespaces are not allowed here")
    path = str(tmp_path / "log")
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind(path)
    rx.settimeout(10)
    port = free_port()
    cmd = (f"mount -t tmpfs none /dev && ln -s {path} /dev/log && exec {server_binary()} --port {port} "
           "--bind 127.0.0.1 --save '' --syslog-enabled yes --syslog-ident dk-test --syslog-facility local3 --enable-debug-command local")
    proc = subprocess.Popen(["unshare", "-m", "sh", "-c", cmd], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while ping(port, timeout=0.5) is None:
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        c = redis.Redis(port=port)
        assert c.config_get("syslog-*") == {"syslog-enabled": "yes", "syslog-ident": "dk-test", "syslog-facility": "local3"}
        c.execute_command("DEBUG", "LOG", "hello syslog")
        got = []
        while not any("hello syslog" in g for g in got):
            got.append(rx.recv(65536).decode())
        stamp = r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
        # local3 is facility 19: warning 19*8+4, notice 19*8+5.
        assert re.fullmatch(rf"<156>{stamp} dk-test\[{proc.pid}\]: DEBUG LOG: hello syslog", got[-1]), got[-1]
        assert any(re.fullmatch(rf"<157>{stamp} dk-test\[{proc.pid}\]: Ready to accept connections tcp", g) for g in got), got
        c.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        rx.close()


def test_proc_title_shows_the_listening_address(start_server):
    """set-proc-title yes (the default): ps and /proc/<pid>/cmdline show
    proc-title-template, `{title} {listen-addr} {server-mode}`, as Redis's
    do; CONFIG SET changes it and refuses an unknown variable. Off, the
    command line stays as started."""
    def cmdline(c) -> str:
        pid = c.info("server")["process_id"]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().rstrip(b"\0").decode()

    srv = start_server()
    c = redis.Redis(host=srv.host, port=srv.port)
    title = cmdline(c)
    program = title.split(" ")[0]
    assert "densekv" in os.path.basename(program) and title == f"{program} 127.0.0.1:{srv.port}"
    assert c.config_set("proc-title-template", "TEST {title} {port} {tls-port} {config-file} {{x}}")
    assert cmdline(c) == f"TEST {program} {srv.port} 0 - {{x}}"
    for bad in ("{nope}", "{title}", "{server-mode} "):
        with pytest.raises(redis.ResponseError, match="template format is invalid or contains unknown variables"):
            c.config_set("proc-title-template", bad)
    c.config_set("proc-title-template", "{title} {listen-addr} {server-mode}")  # the default, set back
    assert cmdline(c) == title
    c.config_set("proc-title-template", "TEST {title} {port} {tls-port} {config-file} {{x}}")
    assert c.config_get("proc-title-template")["proc-title-template"].startswith("TEST")
    off = start_server("--set-proc-title", "no")
    assert f"--port {off.port}" in cmdline(redis.Redis(host=off.host, port=off.port)).replace("\0", " ")


def test_admin_replies_as_redis_gives_them(raw):
    """Replies a differential run against Redis found different."""
    c = raw()
    # hz is a hint: Redis takes any value from 0 to INT_MAX and caps it to 1..500.
    try:
        assert c.call("CONFIG", "SET", "hz", "1000") == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "hz") == b"*2\r\n$2\r\nhz\r\n$3\r\n500\r\n"
        assert c.call("CONFIG", "SET", "hz", "0") == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "hz") == b"*2\r\n$2\r\nhz\r\n$1\r\n1\r\n"
        assert c.call("CONFIG", "SET", "hz", "-1") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'hz') - "
            b"argument must be between 0 and 2147483647 inclusive\r\n")
    finally:
        c.call("CONFIG", "SET", "hz", "10")
    # An unknown command's COMMAND INFO entry is a null bulk string in RESP2.
    assert c.call("COMMAND", "INFO", "no-such-command") == b"*1\r\n$-1\r\n"
    # REPLICAOF answers the same for a port that is no number and one out of range.
    assert c.call("REPLICAOF", "127.0.0.1", "x") == b"-ERR Invalid master port\r\n"
    assert c.call("REPLICAOF", "127.0.0.1", "65536") == b"-ERR Invalid master port\r\n"
    # CLIENT PAUSE checks its mode first, then the timeout; more arguments
    # are a subcommand syntax error naming the subcommand as typed.
    assert c.call("CLIENT", "PAUSE", "x", "XX") == b"-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"
    assert c.call("CLIENT", "PAUSE", "100", "WRITE", "x") == (
        b"-ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.\r\n")
    assert c.call("client", "pause", "x") == b"-ERR timeout is not an integer or out of range\r\n"
