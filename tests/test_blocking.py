"""Blocking commands: BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP BZPOPMIN BZPOPMAX BZMPOP,
CLIENT UNBLOCK, WAIT, WAITAOF.

Blocked clients are raw sockets (the command is sent, the reply read later); the
pushing side is the `r` fixture. Replies are compared byte for byte.
"""

import time

import pytest


def blocked(r) -> int:
    return r.info("clients")["blocked_clients"]


def wait_blocked(r, n: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while blocked(r) != n:
        if time.monotonic() > deadline:
            raise AssertionError(f"blocked_clients stayed {blocked(r)}, wanted {n}")
        time.sleep(0.005)


def cmdstat(r, name: str) -> dict:
    return r.info("commandstats").get(f"cmdstat_{name}", {})


# ---------------------------------------------------------------- immediate data


def test_immediate_data(r, raw):
    c = raw()
    r.rpush("l", "a", "b", "c")
    assert c.call("BLPOP", "none", "l", 0) == b"*2\r\n$1\r\nl\r\n$1\r\na\r\n"
    assert c.call("BRPOP", "l", 0) == b"*2\r\n$1\r\nl\r\n$1\r\nc\r\n"
    assert c.call("BRPOPLPUSH", "l", "d", 0) == b"$1\r\nb\r\n"
    assert r.exists("l") == 0
    assert c.call("BLMOVE", "d", "e", "LEFT", "RIGHT", 0) == b"$1\r\nb\r\n"
    r.rpush("m", 1, 2, 3)
    assert c.call("BLMPOP", 0, 2, "x", "m", "RIGHT", "COUNT", 2) == b"*2\r\n$1\r\nm\r\n*2\r\n$1\r\n3\r\n$1\r\n2\r\n"
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert c.call("BZPOPMIN", "z", 0) == b"*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert c.call("BZPOPMAX", "z", 0) == b"*3\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\n3\r\n"
    assert c.call("BZMPOP", 0, 1, "z", "MIN") == b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    assert r.exists("z") == 0


def test_resp3_shapes(r, raw):
    c = raw()
    assert c.call("HELLO", "3").startswith(b"%")
    r.zadd("z", {"a": 1.5})
    assert c.call("BZPOPMIN", "z", 0) == b"*3\r\n$1\r\nz\r\n$1\r\na\r\n,1.5\r\n"
    assert c.call("BLPOP", "nolist", "0.01") == b"_\r\n"
    assert c.call("BLMOVE", "nolist", "d", "LEFT", "LEFT", "0.01") == b"_\r\n"


# ---------------------------------------------------------------- timeouts and errors


def test_timeout_replies_null_array(r, raw):
    c = raw()
    t = time.monotonic()
    assert c.call("BLPOP", "l", "0.05") == b"*-1\r\n"
    assert time.monotonic() - t >= 0.045  # millisecond clock granularity
    assert c.call("BRPOPLPUSH", "l", "d", "0.01") == b"*-1\r\n"
    assert c.call("BLMOVE", "l", "d", "LEFT", "LEFT", "0.01") == b"*-1\r\n"
    assert c.call("BLMPOP", "0.01", 1, "l", "LEFT") == b"*-1\r\n"
    assert c.call("BZPOPMIN", "z", "0.01") == b"*-1\r\n"
    assert c.call("BZMPOP", "0.01", 1, "z", "MAX") == b"*-1\r\n"
    assert blocked(r) == 0
    assert r.info("clients")["clients_in_timeout_table"] == 0


def test_timeout_errors(raw):
    c = raw()
    assert c.call("BLPOP", "l", "-1") == b"-ERR timeout is negative\r\n"
    assert c.call("BLPOP", "l", "abc") == b"-ERR timeout is not a float or out of range\r\n"
    assert c.call("BLPOP", "l", "inf") == b"-ERR timeout is out of range\r\n"
    assert c.call("BRPOP", "l", "0x7FFFFFFFFFFFFF") == b"-ERR timeout is out of range\r\n"
    assert c.call("BRPOP", "l", "0x1g") == b"-ERR timeout is not a float or out of range\r\n"
    assert c.call("BZPOPMIN", "l", "9223372036854775") == b"-ERR timeout is out of range\r\n"
    assert c.call("BLMOVE", "a", "b", "UP", "LEFT", 0) == b"-ERR syntax error\r\n"
    assert c.call("BLMPOP", 0, 0, "l", "LEFT") == b"-ERR numkeys should be greater than 0\r\n"
    assert c.call("BLMPOP", 0, 1, "l", "LEFT", "COUNT", 0) == b"-ERR count should be greater than 0\r\n"
    assert c.call("BZMPOP", 0, 2, "l", "MIN") == b"-ERR syntax error\r\n"
    assert c.call("BLPOP", "l") == b"-ERR wrong number of arguments for 'blpop' command\r\n"


def test_wrongtype_immediate(r, raw):
    c = raw()
    r.set("s", "x")
    wt = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    assert c.call("BLPOP", "nolist", "s", 0) == wt
    assert c.call("BZPOPMIN", "s", 0) == wt
    assert c.call("BLMOVE", "s", "d", "LEFT", "LEFT", 0) == wt
    r.rpush("l", "a")
    assert c.call("BRPOPLPUSH", "l", "s", 0) == wt
    assert r.lrange("l", 0, -1) == [b"a"]


# ---------------------------------------------------------------- blocking then served


@pytest.mark.parametrize("cmd,push,reply", [
    (("BLPOP", "k", 0), ("RPUSH", "k", "a", "b"), b"*2\r\n$1\r\nk\r\n$1\r\na\r\n"),
    (("BRPOP", "k", 0), ("RPUSH", "k", "a", "b"), b"*2\r\n$1\r\nk\r\n$1\r\nb\r\n"),
    (("BRPOPLPUSH", "k", "dst", 0), ("RPUSH", "k", "a", "b"), b"$1\r\nb\r\n"),
    (("BLMOVE", "k", "dst", "LEFT", "RIGHT", 0), ("RPUSH", "k", "a", "b"), b"$1\r\na\r\n"),
    (("BLMPOP", 0, 1, "k", "LEFT", "COUNT", 5), ("RPUSH", "k", "a", "b"), b"*2\r\n$1\r\nk\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    (("BZPOPMIN", "k", 0), ("ZADD", "k", 1, "a", 2, "b"), b"*3\r\n$1\r\nk\r\n$1\r\na\r\n$1\r\n1\r\n"),
    (("BZPOPMAX", "k", 0), ("ZADD", "k", 1, "a", 2, "b"), b"*3\r\n$1\r\nk\r\n$1\r\nb\r\n$1\r\n2\r\n"),
    (("BZMPOP", 0, 1, "k", "MAX", "COUNT", 1), ("ZADD", "k", 1, "a", 2, "b"), b"*2\r\n$1\r\nk\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"),
])
def test_blocked_then_served(r, raw, cmd, push, reply):
    c = raw()
    c.cmd(*cmd)
    wait_blocked(r, 1)
    assert r.info("clients")["total_blocking_keys"] == 1
    assert [x["flags"] for x in r.client_list() if x["cmd"] == cmd[0].lower()] == ["b"]
    r.execute_command(*push)
    assert c.read_reply() == reply
    assert blocked(r) == 0
    assert r.info("clients")["total_blocking_keys"] == 0
    # The connection goes on normally.
    assert c.call("PING") == b"+PONG\r\n"


def test_pipelined_after_blocking_command_waits(r, raw):
    c = raw()
    c.send(c.encode("BLPOP", "k", 0) + c.encode("PING"))
    wait_blocked(r, 1)
    with pytest.raises(TimeoutError):
        c.read_reply(timeout=0.1)
    r.rpush("k", "v")
    assert c.read_reply() == b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n"
    assert c.read_reply() == b"+PONG\r\n"


def test_fifo_order_among_waiters(r, raw):
    clients = []
    for i in range(5):
        c = raw()
        c.cmd("BLPOP", "k", 0)
        wait_blocked(r, i + 1)
        clients.append(c)
    r.rpush("k", "0", "1", "2", "3", "4")
    for i, c in enumerate(clients):
        assert c.read_reply() == b"*2\r\n$1\r\nk\r\n$1\r\n%d\r\n" % i
    assert r.exists("k") == 0


def test_one_element_serves_one_waiter(r, raw):
    a, b = raw(), raw()
    a.cmd("BRPOP", "k", 0)
    wait_blocked(r, 1)
    b.cmd("BRPOP", "k", 0)
    wait_blocked(r, 2)
    r.lpush("k", "x")
    assert a.read_reply() == b"*2\r\n$1\r\nk\r\n$1\r\nx\r\n"
    assert blocked(r) == 1
    r.lpush("k", "y")
    assert b.read_reply() == b"*2\r\n$1\r\nk\r\n$1\r\ny\r\n"


def test_multiple_keys_first_ready_wins(r, raw):
    c = raw()
    c.cmd("BLPOP", "a", "b", "c", 0)
    wait_blocked(r, 1)
    assert r.info("clients")["total_blocking_keys"] == 3
    r.rpush("c", "1")
    assert c.read_reply() == b"*2\r\n$1\r\nc\r\n$1\r\n1\r\n"
    assert r.info("clients")["total_blocking_keys"] == 0


def test_served_by_multi_exec_and_sees_final_state(r, raw):
    c = raw()
    c.cmd("BLPOP", "k", 0)
    wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.rpush("k", "a").rpush("k", "b").lpop("k")
    p.execute()
    assert c.read_reply() == b"*2\r\n$1\r\nk\r\n$1\r\nb\r\n"


def test_push_and_delete_in_multi_does_not_wake(r, raw):
    c = raw()
    c.cmd("BLPOP", "k", 0)
    wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.rpush("k", "a").delete("k").set("k", "str")
    p.execute()
    time.sleep(0.05)
    assert blocked(r) == 1
    r.delete("k")
    r.rpush("k", "z")
    assert c.read_reply() == b"*2\r\n$1\r\nk\r\n$1\r\nz\r\n"


def test_blmove_chain_wakes_next_waiter(r, raw):
    a, b = raw(), raw()
    a.cmd("BLMOVE", "src", "mid", "LEFT", "LEFT", 0)
    wait_blocked(r, 1)
    b.cmd("BLPOP", "mid", 0)
    wait_blocked(r, 2)
    r.rpush("src", "v")
    assert a.read_reply() == b"$1\r\nv\r\n"
    assert b.read_reply() == b"*2\r\n$3\r\nmid\r\n$1\r\nv\r\n"
    assert r.exists("src", "mid") == 0


def test_blmove_same_source_and_destination(r, raw):
    c = raw()
    c.cmd("BLMOVE", "k", "k", "LEFT", "RIGHT", 0)
    wait_blocked(r, 1)
    r.rpush("k", "a", "b")
    assert c.read_reply() == b"$1\r\na\r\n"
    assert r.lrange("k", 0, -1) == [b"b", b"a"]


def test_brpoplpush_wrong_destination_type_when_served(r, raw):
    c = raw()
    r.set("dst", "x")
    c.cmd("BRPOPLPUSH", "src", "dst", 0)
    wait_blocked(r, 1)
    r.rpush("src", "v")
    assert c.read_reply() == b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    assert r.lrange("src", 0, -1) == [b"v"]
    assert blocked(r) == 0


def test_key_recreated_with_other_type_keeps_waiting(r, raw):
    c = raw()
    c.cmd("BLPOP", "k", 0)
    wait_blocked(r, 1)
    r.set("k", "string")
    r.zadd("z", {"m": 1})
    r.rename("z", "other")
    time.sleep(0.05)
    assert blocked(r) == 1
    r.delete("k")
    r.rpush("tmp", "moved")
    r.rename("tmp", "k")
    assert c.read_reply() == b"*2\r\n$1\r\nk\r\n$5\r\nmoved\r\n"


def test_move_and_swapdb_wake(r, raw):
    c = raw()
    assert c.call("SELECT", 1) == b"+OK\r\n"
    c.cmd("BLPOP", "k", 0)
    wait_blocked(r, 1)
    r.rpush("k", "from0")
    r.move("k", 1)
    assert c.read_reply() == b"*2\r\n$1\r\nk\r\n$5\r\nfrom0\r\n"
    c.cmd("BZPOPMIN", "z", 0)
    wait_blocked(r, 1)
    r.zadd("z", {"m": 3})
    r.swapdb(0, 1)
    assert c.read_reply() == b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n3\r\n"


# ---------------------------------------------------------------- MULTI, CLIENT UNBLOCK, disconnect


def test_inside_multi_does_not_block(r, raw):
    c = raw()
    assert c.call("MULTI") == b"+OK\r\n"
    for cmd in (("BLPOP", "k", 0), ("BLMOVE", "k", "d", "LEFT", "LEFT", 0), ("BRPOPLPUSH", "k", "d", 0),
                ("BZPOPMAX", "z", 0), ("BLMPOP", 0, 1, "k", "LEFT"), ("BZMPOP", 0, 1, "z", "MIN")):
        assert c.call(*cmd) == b"+QUEUED\r\n"
    assert c.call("EXEC") == b"*6\r\n*-1\r\n$-1\r\n$-1\r\n*-1\r\n*-1\r\n*-1\r\n"
    assert blocked(r) == 0


def test_client_unblock(r, raw):
    c = raw()
    cid = int(c.call("CLIENT", "ID")[1:-2])
    c.cmd("BLPOP", "k", 0)
    wait_blocked(r, 1)
    assert r.execute_command("CLIENT", "UNBLOCK", cid) == 1
    assert c.read_reply() == b"*-1\r\n"
    assert r.execute_command("CLIENT", "UNBLOCK", cid) == 0
    c.cmd("BZPOPMIN", "z", 0)
    wait_blocked(r, 1)
    assert r.execute_command("CLIENT", "UNBLOCK", cid, "ERROR") == 1
    assert c.read_reply() == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    c.cmd("BLPOP", "k", 0)
    wait_blocked(r, 1)
    assert r.execute_command("CLIENT", "UNBLOCK", cid, "TIMEOUT") == 1
    assert c.read_reply() == b"*-1\r\n"
    assert c.call("PING") == b"+PONG\r\n"
    d = raw()
    assert d.call("CLIENT", "UNBLOCK", cid, "NOW") == b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"
    assert d.call("CLIENT", "UNBLOCK", "x") == b"-ERR value is not an integer or out of range\r\n"
    assert d.call("CLIENT", "UNBLOCK", 999999) == b":0\r\n"
    assert r.info("errorstats")["errorstat_UNBLOCKED"]["count"] == 1


def test_disconnect_and_kill_clean_up(r, raw):
    a, b = raw(), raw()
    bid = int(b.call("CLIENT", "ID")[1:-2])
    a.cmd("BLPOP", "k", 0)
    b.cmd("BLPOP", "k", "100")
    wait_blocked(r, 2)
    a.close()
    wait_blocked(r, 1)
    assert r.execute_command("CLIENT", "KILL", "ID", bid) == 1
    wait_blocked(r, 0)
    info = r.info("clients")
    assert info["total_blocking_keys"] == 0 and info["clients_in_timeout_table"] == 0
    r.rpush("k", "v")
    assert r.lrange("k", 0, -1) == [b"v"]


# ---------------------------------------------------------------- accounting


def test_stats_count_once_when_served(r, raw):
    c = raw()
    r.config_resetstat()
    r.config_set("slowlog-log-slower-than", 0)
    r.slowlog_reset()
    try:
        c.cmd("BLPOP", "k", 0)
        wait_blocked(r, 1)
        assert cmdstat(r, "blpop") == {}
        assert not any(e["command"].startswith(b"BLPOP") for e in r.slowlog_get(100))
        r.rpush("k", "v")
        c.read_reply()
        assert cmdstat(r, "blpop")["calls"] == 1
        assert [e["command"] for e in r.slowlog_get(100) if e["command"].startswith(b"BLPOP")] == [b"BLPOP k 0"]
        assert cmdstat(r, "lpop") == {}
        c.call("BRPOP", "k", "0.01")
        assert cmdstat(r, "brpop")["calls"] == 1
    finally:
        r.config_set("slowlog-log-slower-than", 10000)


def test_command_info_flags(r, raw):
    blpop = r.execute_command("COMMAND", "INFO", "blpop")["blpop"]
    assert (blpop["arity"], blpop["flags"]) == (-3, ["write", "blocking"])
    assert blpop["acl_categories"] == ["@write", "@list", "@slow", "@blocking"]
    assert r.execute_command("COMMAND", "INFO", "blmpop")["blmpop"]["arity"] == -5
    c = raw()
    assert c.call("COMMAND", "GETKEYS", "BLPOP", "a", "b", "0") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert c.call("COMMAND", "GETKEYS", "BZMPOP", "0", "2", "a", "b", "MIN") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"


# ---------------------------------------------------------------- WAIT, WAITAOF


def test_wait_and_waitaof(r, raw):
    c = raw()
    assert c.call("WAIT", 0, 0) == b":0\r\n"
    t = time.monotonic()
    assert c.call("WAIT", 1, 50) == b":0\r\n"
    assert time.monotonic() - t >= 0.045
    assert c.call("WAIT", 1, -1) == b"-ERR timeout is negative\r\n"
    assert c.call("WAITAOF", 0, 0, 0) == b"*2\r\n:0\r\n:0\r\n"
    assert c.call("WAITAOF", 1, 0, 0) == b"-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
    assert c.call("WAITAOF", 2, 0, 0) == b"-ERR value is out of range, value must between 0 and 1\r\n"
    assert c.call("WAITAOF", 0, 1, 20) == b"*2\r\n:0\r\n:0\r\n"


# ---------------------------------------------------------------- scale


def test_thousand_blocked_clients(r, raw):
    n = 1000
    conns = []
    for i in range(n):
        c = raw()
        c.cmd("BLPOP", f"key{i}", "key-common", 0)
        conns.append(c)
    wait_blocked(r, n, timeout=20)
    assert r.info("clients")["total_blocking_keys"] == n + 1
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.rpush(f"key{i}", i)
    p.execute()
    for i, c in enumerate(conns):
        assert c.read_reply() == b"*2\r\n$%d\r\nkey%d\r\n$%d\r\n%d\r\n" % (len(str(i)) + 3, i, len(str(i)), i)
    wait_blocked(r, 0)
    assert r.info("clients")["total_blocking_keys"] == 0
    for c in conns:
        c.close()


def test_thousand_timeouts(r, raw):
    conns = []
    for i in range(1000):
        c = raw()
        c.cmd("BRPOP", "k", "0.%03d" % (100 + i % 100))
        conns.append(c)
    for c in conns:
        assert c.read_reply(timeout=10) == b"*-1\r\n"
    assert blocked(r) == 0
    for c in conns:
        c.close()


def test_idle_timeout_spares_blocked_clients(r, raw):
    c = raw()
    r.config_set("timeout", 1)
    try:
        c.cmd("BLPOP", "k", 0)
        wait_blocked(r, 1)
        time.sleep(2.3)
        assert blocked(r) == 1
        r.rpush("k", "late")
        assert c.read_reply() == b"*2\r\n$1\r\nk\r\n$4\r\nlate\r\n"
    finally:
        r.config_set("timeout", 0)


def test_wait_unblocked_by_client_unblock(r, raw):
    c = raw()
    cid = int(c.call("CLIENT", "ID")[1:-2])
    c.cmd("WAIT", 1, 0)
    wait_blocked(r, 1)
    assert r.info("clients")["total_blocking_keys"] == 0
    assert r.execute_command("CLIENT", "UNBLOCK", cid) == 1
    assert c.read_reply() == b":0\r\n"
    c.cmd("WAITAOF", 0, 1, 0)
    wait_blocked(r, 1)
    assert r.execute_command("CLIENT", "UNBLOCK", cid, "ERROR") == 1
    assert c.read_reply() == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"


def test_many_waiters_on_one_key(r, raw):
    conns = []
    for i in range(300):
        c = raw()
        c.cmd("BRPOP", "hot", 0)
        wait_blocked(r, i + 1)  # arrival order across connections is the test's FIFO order
        conns.append(c)
    for i in range(300):
        r.lpush("hot", i)
    for i, c in enumerate(conns):
        assert c.read_reply() == b"*2\r\n$3\r\nhot\r\n$%d\r\n%d\r\n" % (len(str(i)), i)
    assert r.exists("hot") == 0
    for c in conns:
        c.close()


def test_monitor_shows_blocking_command_once_when_first_run(r, raw):
    m, c = raw(), raw()
    assert m.call("MONITOR") == b"+OK\r\n"
    c.cmd("BLPOP", "k", 0)
    assert b'"BLPOP" "k" "0"' in m.read_line()
    r.rpush("k", "v")
    assert c.read_reply() == b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n"
    assert b'"RPUSH" "k" "v"' in m.read_line()
    r.rpush("k", "w")
    assert b'"RPUSH" "k" "w"' in m.read_line()


def test_unblock_error_counts_as_failed_call(r, raw):
    c = raw()
    cid = int(c.call("CLIENT", "ID")[1:-2])
    r.config_resetstat()
    c.cmd("BLPOP", "k", 0)
    wait_blocked(r, 1)
    r.execute_command("CLIENT", "UNBLOCK", cid, "ERROR")
    assert c.read_reply().startswith(b"-UNBLOCKED")
    st = cmdstat(r, "blpop")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (1, 0, 1)
    assert r.info("stats")["total_error_replies"] == 1


# ---------------------------------------------------------------- the connection goes away


def test_close_with_pipelined_blocking_command_is_noticed(r, raw):
    """A blocked client that pipelines another blocking command and closes at
    once (request and FIN in one readiness event) is forgotten: the end of the
    stream behind the request is read, not left for an event that never comes."""
    a, busy = raw(), raw()
    a.cmd("BLPOP", "k", 0)
    wait_blocked(r, 1)
    # While the server sleeps, the request and the close both arrive, so
    # one readiness event reports them together.
    busy.cmd("DEBUG", "SLEEP", "0.1")
    time.sleep(0.02)
    a.send(a.encode("BLPOP", "k", 0))
    a.sock.close()
    assert busy.read_reply() == b"+OK\r\n"
    wait_blocked(r, 0)
    r.rpush("k", "v")
    assert r.lrange("k", 0, -1) == [b"v"]
    assert r.info("clients")["total_blocking_keys"] == 0


def test_close_after_being_served_with_pipelined_blocking_command(r, raw):
    """Redis's "bug 593" sequence: the served client's next BRPOPLPUSH
    blocks again, then its connection closes; it must not stay blocked."""
    for _ in range(20):
        r.delete("a", "b", "c")
        one, two = raw(), raw()
        one.send(one.encode("BRPOPLPUSH", "a", "b", 0) + one.encode("BRPOPLPUSH", "a", "b", 0))
        wait_blocked(r, 1)
        two.cmd("BRPOPLPUSH", "b", "c", 0)
        wait_blocked(r, 2)
        r.lpush("a", "data")
        one.sock.close()
        two.sock.close()
        wait_blocked(r, 0)
        assert r.lrange("c", 0, -1) == [b"data"]


def test_requests_on_two_connections_run_in_arrival_order(r, raw):
    """An EXEC sent before another connection's write to a watched key runs
    first, as Redis serves readable clients in the order data arrived."""
    w, busy = raw(), raw()
    for i in range(20):
        r.set("k", "old")
        assert w.call("WATCH", "k") == b"+OK\r\n"
        assert w.call("MULTI") == b"+OK\r\n"
        assert w.call("GET", "k") == b"+QUEUED\r\n"
        # Both requests arrive while the server sleeps: one poll sees them.
        busy.cmd("DEBUG", "SLEEP", "0.02")
        time.sleep(0.005)
        w.cmd("EXEC")
        time.sleep(0.001)
        r.set("k", f"new{i}")
        assert busy.read_reply() == b"+OK\r\n"
        assert w.read_reply() == b"*1\r\n$3\r\nold\r\n"
