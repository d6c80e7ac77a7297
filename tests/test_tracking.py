"""Client-side caching: CLIENT TRACKING and its invalidation messages.

RESP3 clients get `invalidate` pushes (read through redis-py's invalidation
push handler, and byte for byte over a raw socket where order matters); RESP2
clients get them through a client subscribed to `__redis__:invalidate` they
redirect to. Covers the default mode, BCAST with prefixes, OPTIN/OPTOUT with
CLIENT CACHING, NOLOOP, flushes, expiry, MULTI/EXEC, the tracking table limit
and the introspection (CLIENT TRACKINGINFO, GETREDIR, LIST, INFO)."""

import time

import pytest
import redis


def tracker(new_client, *options):
    """A RESP3 client with tracking on; returns (client, list of pushes it got)."""
    c = new_client(protocol=3)
    got = []
    c.connection._parser.set_invalidation_push_handler(got.append)
    assert c.execute_command("CLIENT", "TRACKING", "ON", *options) in (b"OK", "OK", True)
    return c, got


def drain(c, got, want=1, timeout=3.0):
    """Reads until `want` pushes arrived (PING makes the parser read them)."""
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        c.ping()
        if len(got) < want:
            time.sleep(0.02)
    return got


def redirect_target(new_client):
    """A RESP2 client subscribed to __redis__:invalidate; returns (pubsub, its id)."""
    sub = new_client(protocol=2)
    p = sub.pubsub()
    p.subscribe("__redis__:invalidate")
    assert p.get_message(timeout=2)["type"] == "subscribe"
    # The Pub/Sub connection is its own: the newest subscribed client.
    cid = max(int(c["id"]) for c in sub.client_list(_type="pubsub"))
    return p, cid


def next_message(p, timeout=3.0):
    m = p.get_message(timeout=timeout)
    assert m is not None, "no invalidation message"
    assert m["type"] == "message" and m["channel"] == b"__redis__:invalidate"
    return m["data"]


def test_default_mode_invalidates_keys_read(r, new_client):
    c, got = tracker(new_client)
    r.set("a", 1)
    r.set("b", 1)
    assert c.get("a") == b"1"
    r.incr("b")  # never read: no message
    r.incr("a")
    assert drain(c, got) == [[b"invalidate", [b"a"]]]
    r.incr("a")  # the entry went with the first message
    c.ping()
    assert got == [[b"invalidate", [b"a"]]]
    info = r.info()
    assert info["tracking_clients"] == 1
    assert info["tracking_total_keys"] == 0


def test_resp2_redirect_through_pubsub(r, new_client):
    p, cid = redirect_target(new_client)
    r.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", cid)
    assert r.execute_command("CLIENT", "GETREDIR") == cid
    r.set("k", 1)
    r.mget("k", "x")
    w = new_client()
    w.set("k", 2)
    assert next_message(p) == [b"k"]
    assert "t" in r.client_info()["flags"]
    assert r.client_info()["redir"] == str(cid)


def test_own_write_invalidation_follows_the_reply(raw):
    c = raw()
    c.call("HELLO", "3")
    assert c.call("CLIENT", "TRACKING", "ON") == b"+OK\r\n"
    c.call("HSET", "h", "f", "1")
    assert c.call("HGET", "h", "f") == b"$1\r\n1\r\n"
    assert c.call("HDEL", "h", "f") == b":1\r\n"
    assert c.read_reply() == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nh\r\n"


def test_multi_invalidations_come_after_exec(raw):
    c = raw()
    c.call("HELLO", "3")
    c.call("CLIENT", "TRACKING", "ON")
    c.call("MSET", "a", "1", "b", "2")
    c.call("GET", "a")
    assert c.call("MULTI") == b"+OK\r\n"
    assert c.call("INCR", "a") == b"+QUEUED\r\n"
    assert c.call("GET", "b") == b"+QUEUED\r\n"
    assert c.call("EXEC") == b"*2\r\n:2\r\n$1\r\n2\r\n"
    assert c.read_reply() == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n"


def test_noloop_skips_own_writes(r, new_client):
    p, cid = redirect_target(new_client)
    r.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", cid, "NOLOOP")
    r.mget("mine", "theirs")
    other = new_client()
    r.set("mine", 1)
    other.set("theirs", 1)
    assert next_message(p) == [b"theirs"]
    assert p.get_message(timeout=0.3) is None


def test_bcast_prefixes(r, new_client):
    p, cid = redirect_target(new_client)
    r.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", cid, "PREFIX", "a:", "PREFIX", "b:")
    w = new_client()
    pipe = w.pipeline(transaction=True)
    for k in ("a:1", "a:2", "b:1", "c:1"):
        pipe.incr(k)
    pipe.execute()
    keys = sorted(next_message(p) + next_message(p))
    assert keys == [b"a:1", b"a:2", b"b:1"]
    assert p.get_message(timeout=0.3) is None
    info = r.execute_command("CLIENT", "TRACKINGINFO")
    assert info == [b"flags", [b"on", b"bcast"], b"redirect", cid, b"prefixes", [b"a:", b"b:"]]
    assert r.info()["tracking_total_prefixes"] == 2
    assert "B" in r.client_info()["flags"]


def test_bcast_noloop_and_empty_prefix(new_client):
    c, got = tracker(new_client, "BCAST", "NOLOOP")
    other = new_client()
    c.set("own", 1)
    other.set("foreign", 1)
    drain(c, got)
    assert got == [[b"invalidate", [b"foreign"]]]


def test_prefix_errors(r):
    with pytest.raises(redis.ResponseError, match="^Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a single client must not overlap.$"):
        r.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO")
    r.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR")
    with pytest.raises(redis.ResponseError, match="^Prefix 'BARB' overlaps with an existing prefix 'BAR'"):
        r.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "BARB")
    with pytest.raises(redis.ResponseError, match="^You can't switch BCAST mode on/off"):
        r.execute_command("CLIENT", "TRACKING", "ON")
    r.execute_command("CLIENT", "TRACKING", "OFF")
    with pytest.raises(redis.ResponseError, match="^PREFIX option requires BCAST mode to be enabled$"):
        r.execute_command("CLIENT", "TRACKING", "ON", "PREFIX", "x")
    with pytest.raises(redis.ResponseError, match="^OPTIN and OPTOUT are not compatible with BCAST$"):
        r.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "OPTIN")
    with pytest.raises(redis.ResponseError, match="^The client ID you want redirect to does not exist$"):
        r.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", 999999)
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("CLIENT", "TRACKING", "MAYBE")
    with pytest.raises(redis.ResponseError, match="^CLIENT CACHING can be called only when the client is in tracking mode"):
        r.execute_command("CLIENT", "CACHING", "YES")


def test_optin_and_optout(r, new_client):
    c, got = tracker(new_client, "OPTIN")
    r.set("k1", 1)
    r.set("k2", 1)
    c.get("k1")  # not cached: no CLIENT CACHING YES
    assert c.execute_command("CLIENT", "CACHING", "YES") in (b"OK", "OK", True)
    c.get("k2")
    c.get("k1")  # CACHING lasts one command
    r.incr("k1")
    r.incr("k2")
    assert drain(c, got) == [[b"invalidate", [b"k2"]]]
    with pytest.raises(redis.ResponseError, match="^CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.$"):
        c.execute_command("CLIENT", "CACHING", "NO")
    with pytest.raises(redis.ResponseError, match="^You can't switch OPTIN/OPTOUT mode"):
        c.execute_command("CLIENT", "TRACKING", "ON", "OPTOUT")

    d, dgot = tracker(new_client, "OPTOUT")
    d.execute_command("CLIENT", "CACHING", "NO")
    d.get("k1")  # not cached
    d.get("k2")
    r.incr("k1")
    r.incr("k2")
    assert drain(d, dgot) == [[b"invalidate", [b"k2"]]]


def test_flushall_invalidates_everything_with_a_null(raw, new_client):
    p, cid = redirect_target(new_client)
    c = raw()
    c.call("HELLO", "3")
    c.call("CLIENT", "TRACKING", "ON")
    c.call("GET", "k")
    r2 = new_client()
    r2.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", cid)
    r2.get("k")
    assert new_client().info()["tracking_total_keys"] == 1
    new_client().flushall()
    assert c.read_reply() == b">2\r\n$10\r\ninvalidate\r\n_\r\n"
    assert next_message(p) is None
    assert new_client().info()["tracking_total_keys"] == 0
    # The flushing client itself hears after its reply (EXEC's here).
    c.call("MULTI")
    c.call("FLUSHDB")
    assert c.call("EXEC") == b"*1\r\n+OK\r\n"
    assert c.read_reply() == b">2\r\n$10\r\ninvalidate\r\n_\r\n"


def test_expired_keys_are_invalidated(r, new_client):
    c, got = tracker(new_client)
    r.set("gone", 1, px=50)
    c.get("gone")
    # Active expiry, with no command touching the key.
    drain(c, got, timeout=3)
    assert got == [[b"invalidate", [b"gone"]]]


def test_lazy_expiry_in_bcast_mode(r, new_client):
    p, cid = redirect_target(new_client)
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        r.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", cid, "NOLOOP")
        r.set("lazy", 1, px=1)
        time.sleep(0.05)
        assert r.get("lazy") is None  # found due on access: an expiry, not r's own write
        assert next_message(p) == [b"lazy"]
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_redirect_broken(raw, new_client):
    target = new_client()
    tid = target.client_id()
    c = raw()
    c.call("HELLO", "3")
    c.call("CLIENT", "TRACKING", "ON", "REDIRECT", tid)
    c.call("GET", "k")
    target.close()
    w = new_client()
    deadline = time.monotonic() + 3
    while b"id=%d " % tid in w.execute_command("CLIENT", "LIST") and time.monotonic() < deadline:
        time.sleep(0.02)
    w.set("k", 1)
    assert c.read_reply() == b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % tid
    info = c.call("CLIENT", "TRACKINGINFO")
    assert b"broken_redirect" in info
    assert b"flags=tR " in c.call("CLIENT", "INFO")


def test_trackinginfo_and_getredir(r):
    assert r.execute_command("CLIENT", "GETREDIR") == -1
    assert r.execute_command("CLIENT", "TRACKINGINFO") == [b"flags", [b"off"], b"redirect", -1, b"prefixes", []]
    r.execute_command("CLIENT", "TRACKING", "ON", "OPTIN", "NOLOOP")
    r.execute_command("CLIENT", "CACHING", "YES")
    assert r.execute_command("CLIENT", "TRACKINGINFO") == [b"flags", [b"on", b"optin", b"caching-yes", b"noloop"], b"redirect", 0, b"prefixes", []]
    assert r.execute_command("CLIENT", "GETREDIR") == 0
    assert r.client_info()["redir"] == "0"
    r.execute_command("CLIENT", "TRACKING", "OFF")
    assert r.client_info()["redir"] == "-1"
    assert r.info()["tracking_clients"] == 0


def test_table_limit_evicts_with_invalidations(r, new_client):
    p, cid = redirect_target(new_client)
    r.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", cid)
    for i in range(150):
        r.get(f"key{i}")
    assert r.info()["tracking_total_keys"] == 150
    try:
        r.config_set("tracking-table-max-keys", 1)
        seen = [next_message(p) for _ in range(149)]
        assert all(len(m) == 1 for m in seen)
        assert p.get_message(timeout=0.3) is None
        assert r.info()["tracking_total_keys"] == 1
    finally:
        r.config_set("tracking-table-max-keys", 1000000)


def test_script_reads_are_tracked_for_the_caller(r, new_client):
    c, got = tracker(new_client)
    c.eval("redis.call('set', KEYS[1], 'x')", 1, "written")
    c.eval("return redis.call('get', KEYS[1])", 1, "read")
    r.set("written", 2)
    r.set("read", 2)
    assert drain(c, got) == [[b"invalidate", [b"read"]]]


def test_disconnect_and_reset_stop_tracking(r, new_client):
    c, _ = tracker(new_client, "BCAST", "PREFIX", "p:")
    assert r.info()["tracking_clients"] == 1
    c.execute_command("RESET")
    assert r.info()["tracking_clients"] == 0
    assert r.info()["tracking_total_prefixes"] == 0
    d, _ = tracker(new_client)
    d.get("x")
    d.close()
    deadline = time.monotonic() + 3
    while r.info()["tracking_clients"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert r.info()["tracking_clients"] == 0


def test_unblocked_command_gets_its_invalidation_after_the_reply(raw, r):
    r.rpush("dst", "a")
    c = raw()
    c.call("HELLO", "3")
    c.call("CLIENT", "TRACKING", "ON")
    assert c.call("LRANGE", "dst", "0", "-1") == b"*1\r\n$1\r\na\r\n"
    c.cmd("BLMOVE", "src", "dst", "LEFT", "LEFT", "0")
    deadline = time.monotonic() + 3
    while r.info()["blocked_clients"] != 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    r.rpush("src", "foo")
    assert c.read_reply() == b"$3\r\nfoo\r\n"
    assert c.read_reply() == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\ndst\r\n"


def test_table_limit_message_comes_before_the_next_reply(raw, r):
    c = raw()
    c.call("HELLO", "3")
    c.call("CLIENT", "TRACKING", "ON")
    c.call("MGET", "x", "y")
    assert c.call("MULTI") == b"+OK\r\n"
    r.execute_command("DEBUG", "PAUSE-CRON", "1")
    try:
        r.config_set("tracking-table-max-keys", 1)
        c.cmd("PING")
        first = c.read_reply()
        assert first in (b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nx\r\n", b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ny\r\n")
        assert c.read_reply() == b"+QUEUED\r\n"
        assert c.call("EXEC") == b"*1\r\n+PONG\r\n"
    finally:
        r.execute_command("DEBUG", "PAUSE-CRON", "0")
        r.config_set("tracking-table-max-keys", 1000000)
