"""MULTI/EXEC/DISCARD/WATCH: queueing, EXECABORT, and WATCH races between clients."""

import pytest
import redis


def test_multi_exec_basic(raw):
    c = raw()
    assert c.call("MULTI") == b"+OK\r\n"
    assert c.call("SET", "a", "1") == b"+QUEUED\r\n"
    assert c.call("GET", "a") == b"+QUEUED\r\n"
    assert c.call("EXEC") == b"*2\r\n+OK\r\n$1\r\n1\r\n"
    assert c.call("EXEC") == b"-ERR EXEC without MULTI\r\n"
    assert c.call("DISCARD") == b"-ERR DISCARD without MULTI\r\n"
    c.call("MULTI")
    assert c.call("MULTI") == b"-ERR MULTI calls can not be nested\r\n"
    assert c.call("DISCARD") == b"+OK\r\n"


def test_execabort_on_queued_errors(raw):
    c = raw()
    c.call("MULTI")
    assert c.call("SET", "a") == b"-ERR wrong number of arguments for 'set' command\r\n"
    assert c.call("NOSUCH") == b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n"
    assert c.call("SET", "abort-key", "2") == b"+QUEUED\r\n"
    assert c.call("EXEC") == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    assert c.call("GET", "abort-key") == b"$-1\r\n"


def test_exec_with_arguments_aborts_the_transaction(raw):
    # Redis refuses EXEC's wrong arity as it refuses any EXEC before it runs:
    # EXECABORT quoting the error (without ERR), and the transaction is gone.
    c = raw()
    abort = b"-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"
    assert c.call("EXEC", "x") == abort
    assert c.call("MULTI") == b"+OK\r\n"
    assert c.call("SET", "exec-arity-key", "1") == b"+QUEUED\r\n"
    assert c.call("EXEC", "x") == abort
    assert c.call("EXEC") == b"-ERR EXEC without MULTI\r\n"
    assert c.call("GET", "exec-arity-key") == b"$-1\r\n"


def test_runtime_error_does_not_abort(raw):
    c = raw()
    c.call("MULTI")
    c.call("SET", "a", "1")
    c.call("CONFIG", "SET", "timeout", "x")
    c.call("GET", "a")
    rep = c.call("EXEC")
    assert rep.startswith(b"*3\r\n+OK\r\n-ERR CONFIG SET failed") and rep.endswith(b"$1\r\n1\r\n")


def test_watch_race(new_client):
    a, b = new_client(), new_client()
    a.set(b"w", b"1")
    assert a.execute_command("WATCH", "w") in (True, b"OK")
    b.set(b"w", b"2")
    a.execute_command("MULTI")
    a.execute_command("SET", "w", "3")
    assert a.execute_command("EXEC") is None
    assert a.get(b"w") == b"2"
    # Unmodified watch succeeds; UNWATCH forgets.
    a.execute_command("WATCH", "w")
    a.execute_command("MULTI")
    a.execute_command("SET", "w", "4")
    assert a.execute_command("EXEC") == [b"OK"]
    a.execute_command("WATCH", "w")
    b.set(b"w", b"5")
    a.execute_command("UNWATCH")
    a.execute_command("MULTI")
    a.execute_command("GET", "w")
    assert a.execute_command("EXEC") == [b"5"]


def test_watch_with_redis_py_pipeline(r, new_client):
    other = new_client()
    r.set(b"ctr", b"0")
    with r.pipeline() as p:
        p.watch(b"ctr")
        other.set(b"ctr", b"9")
        p.multi()
        p.set(b"ctr", b"1")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get(b"ctr") == b"9"


def test_watch_flushall(new_client):
    a, b = new_client(), new_client()
    a.set(b"w", b"1")
    a.execute_command("WATCH", "w")
    b.flushall()
    a.execute_command("MULTI")
    a.execute_command("PING")
    assert a.execute_command("EXEC") is None
    # FLUSHALL of a db where the watched key does not exist does not abort.
    a.execute_command("WATCH", "nokey")
    b.flushall()
    a.execute_command("MULTI")
    a.execute_command("PING")
    assert a.execute_command("EXEC") == [b"PONG"]


def test_watch_inside_multi_and_discard(raw):
    c = raw()
    c.call("MULTI")
    assert c.call("WATCH", "x") == b"-ERR WATCH inside MULTI is not allowed\r\n"
    assert c.call("DISCARD") == b"+OK\r\n"
    c.call("MULTI")
    assert c.call("MONITOR") == b"-ERR Command not allowed inside a transaction\r\n"
    assert c.call("EXEC") == b"-EXECABORT Transaction discarded because of previous errors.\r\n"


def test_oom_refuses_queueing_and_denyoom_exec(raw, r):
    """Over maxmemory: queueing and DENYOOM commands get -OOM, DISCARD and
    read-only EXEC still work, EXEC of a queued write aborts with EXECABORT."""
    oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    c = raw()
    r.set("x", "value")
    try:
        assert c.call("MULTI") == b"+OK\r\n"
        r.config_set("maxmemory", 1)
        assert c.call("SET", "x", "1") == oom
        assert c.call("DISCARD") == b"+OK\r\n"
        assert c.call("SET", "x", "2") == oom
        assert c.call("GET", "x") == b"$5\r\nvalue\r\n"
        r.config_set("maxmemory", 0)

        c.call("MULTI")
        c.call("GET", "x")
        c.call("PING")
        r.config_set("maxmemory", 1)
        assert c.call("EXEC") == b"*2\r\n$5\r\nvalue\r\n+PONG\r\n"
        r.config_set("maxmemory", 0)

        c.call("MULTI")
        c.call("SET", "x", "1")
        c.call("GET", "x")
        r.config_set("maxmemory", 1)
        assert c.call("EXEC") == (
            b"-EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.\r\n"
        )
        # The transaction is gone: the client is out of MULTI.
        assert c.call("PING") == b"+PONG\r\n"
    finally:
        r.config_set("maxmemory", 0)
    assert r.get("x") == b"value"


def test_save_and_shutdown_not_allowed_in_multi(raw, r):
    c = raw()
    for cmd in ("SAVE", "SHUTDOWN"):
        c.call("MULTI")
        assert c.call("SET", "foo", "bar") == b"+QUEUED\r\n"
        assert c.call(cmd) == b"-ERR Command not allowed inside a transaction\r\n"
        assert c.call("EXEC") == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    assert r.get("foo") is None
