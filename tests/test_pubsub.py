"""Pub/Sub: SUBSCRIBE family, PUBLISH/SPUBLISH, PUBSUB introspection, RESP2
subscribed-mode restrictions, RESP3 push frames, and cleanup on disconnect.
Replies are checked byte for byte against what Redis 7.4 sends."""

import time

import pytest


def bulk(s: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(s), s)


def frame(kind: bytes, *parts) -> bytes:
    out = kind + b"%d\r\n" % len(parts)
    for p in parts:
        if isinstance(p, int):
            out += b":%d\r\n" % p
        elif p is None:
            out += b"$-1\r\n" if kind == b"*" else b"_\r\n"
        else:
            out += bulk(p)
    return out


def a(*parts) -> bytes:
    return frame(b"*", *parts)


def push(*parts) -> bytes:
    return frame(b">", *parts)


def wait_numsub(r, channel: bytes, n: int) -> None:
    deadline = time.monotonic() + 5
    while r.pubsub_numsub(channel)[0][1] != n:
        assert time.monotonic() < deadline, "subscriber count never reached"
        time.sleep(0.01)


def test_subscribe_counts_and_messages_resp2(r, raw):
    s = raw()
    s.cmd("SUBSCRIBE", "a", "b", "a")
    assert s.read_reply() == a(b"subscribe", b"a", 1)
    assert s.read_reply() == a(b"subscribe", b"b", 2)
    assert s.read_reply() == a(b"subscribe", b"a", 2)
    assert s.call("PSUBSCRIBE", "h?llo") == a(b"psubscribe", b"h?llo", 3)
    assert r.publish("a", "hi") == 1
    assert s.read_reply() == a(b"message", b"a", b"hi")
    assert r.publish("hello", b"x\r\ny") == 1
    assert s.read_reply() == a(b"pmessage", b"h?llo", b"hello", b"x\r\ny")
    assert r.publish("nobody", "x") == 0
    assert s.call("UNSUBSCRIBE", "b", "zz") == a(b"unsubscribe", b"b", 2)
    assert s.read_reply() == a(b"unsubscribe", b"zz", 2)
    s.cmd("UNSUBSCRIBE")
    assert s.read_reply() == a(b"unsubscribe", b"a", 1)
    assert s.call("PUNSUBSCRIBE") == a(b"punsubscribe", b"h?llo", 0)
    # Out of Pub/Sub mode: ordinary commands work again.
    assert s.call("PING") == b"+PONG\r\n"


def test_unsubscribe_with_nothing_subscribed(raw):
    s = raw()
    assert s.call("UNSUBSCRIBE") == b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
    assert s.call("PUNSUBSCRIBE") == b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n"
    assert s.call("SUNSUBSCRIBE") == b"*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n"
    s.cmd("PUNSUBSCRIBE", "foo.*", "bar.*")
    assert s.read_reply() == a(b"punsubscribe", b"foo.*", 0)
    assert s.read_reply() == a(b"punsubscribe", b"bar.*", 0)
    # Never subscribed: still a normal client.
    assert s.call("SET", "k", "v") == b"+OK\r\n"


def test_resp2_subscribed_mode_restrictions(r, raw):
    s = raw()
    s.call("SUBSCRIBE", "ch")
    assert s.call("GET", "k") == (
        b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET"
        b" are allowed in this context\r\n"
    )
    assert s.call("CONFIG", "GET", "x").startswith(b"-ERR Can't execute 'config|get': only")
    assert s.call("PING") == b'*2\r\n$4\r\npong\r\n$0\r\n\r\n'
    assert s.call("PING", "foo") == a(b"pong", b"foo")
    assert s.call("SSUBSCRIBE", "sh") == a(b"ssubscribe", b"sh", 1)
    # RESET leaves Pub/Sub mode and drops every subscription.
    assert s.call("RESET") == b"+RESET\r\n"
    assert s.call("GET", "k") == b"$-1\r\n"
    assert r.pubsub_numsub("ch") == [(b"ch", 0)]
    assert r.execute_command("PUBSUB", "SHARDNUMSUB", "sh") == [b"sh", 0]
    assert s.call("QUIT") == b"+OK\r\n"


def test_resp3_push_frames_and_any_command(r, raw):
    s = raw()
    s.call("HELLO", "3")
    assert s.call("SUBSCRIBE", "ch") == push(b"subscribe", b"ch", 1)
    assert s.call("SET", "k", "v") == b"+OK\r\n"
    assert s.call("PING") == b"+PONG\r\n"
    assert r.publish("ch", "m") == 1
    assert s.read_reply() == push(b"message", b"ch", b"m")
    assert s.call("UNSUBSCRIBE") == push(b"unsubscribe", b"ch", 0)
    assert s.call("UNSUBSCRIBE") == b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"


def test_resp3_publish_to_self_follows_reply(raw):
    s = raw()
    s.call("HELLO", "3")
    s.call("SUBSCRIBE", "foo")
    assert s.call("PUBLISH", "foo", "bar") == b":1\r\n"
    assert s.read_reply() == push(b"message", b"foo", b"bar")
    # Inside MULTI the messages come after the whole EXEC reply.
    assert s.call("MULTI") == b"+OK\r\n"
    s.call("PING", "abc")
    s.call("PUBLISH", "foo", "x")
    s.call("PUBLISH", "foo", "y")
    assert s.call("EXEC") == b"*3\r\n$3\r\nabc\r\n:1\r\n:1\r\n"
    assert s.read_reply() == push(b"message", b"foo", b"x")
    assert s.read_reply() == push(b"message", b"foo", b"y")


def test_subscribe_replies_survive_client_reply_off(r, raw):
    s = raw()
    s.call("HELLO", "3")
    s.cmd("CLIENT", "REPLY", "OFF")
    assert s.call("SUBSCRIBE", "channel") == push(b"subscribe", b"channel", 1)
    assert r.publish("channel", "hello") == 1
    assert s.read_reply() == push(b"message", b"channel", b"hello")


def test_several_subscribers_and_patterns(r, raw):
    subs = [raw() for _ in range(3)]
    for s in subs:
        s.call("SUBSCRIBE", "news")
    p = raw()
    p.cmd("PSUBSCRIBE", "n*", "*s")
    p.read_reply()
    p.read_reply()
    # 3 direct subscribers + 2 matching patterns of one client.
    assert r.publish("news", "x") == 5
    for s in subs:
        assert s.read_reply() == a(b"message", b"news", b"x")
    got = sorted([p.read_reply(), p.read_reply()])
    assert got == sorted([a(b"pmessage", b"n*", b"news", b"x"), a(b"pmessage", b"*s", b"news", b"x")])
    assert r.execute_command("PUBSUB", "NUMPAT") == 2
    q = raw()
    q.call("PSUBSCRIBE", "n*")
    assert r.execute_command("PUBSUB", "NUMPAT") == 2  # unique patterns


def test_sharded_pubsub(r, raw):
    s = raw()
    assert s.call("SSUBSCRIBE", "{u}a") == a(b"ssubscribe", b"{u}a", 1)
    # Shard counts are separate from channel/pattern counts.
    assert s.call("SUBSCRIBE", "plain") == a(b"subscribe", b"plain", 1)
    assert r.execute_command("SPUBLISH", "{u}a", "m") == 1
    assert s.read_reply() == a(b"smessage", b"{u}a", b"m")
    # PUBLISH does not reach shard subscribers, nor SPUBLISH channel ones.
    assert r.publish("{u}a", "m") == 0
    assert r.execute_command("SPUBLISH", "plain", "m") == 0
    assert r.execute_command("PUBSUB", "SHARDCHANNELS") == [b"{u}a"]
    assert r.execute_command("PUBSUB", "SHARDCHANNELS", "x*") == []
    assert r.execute_command("PUBSUB", "SHARDNUMSUB", "{u}a", "no") == [b"{u}a", 1, b"no", 0]
    assert s.call("SUNSUBSCRIBE") == a(b"sunsubscribe", b"{u}a", 0)
    assert s.call("UNSUBSCRIBE") == a(b"unsubscribe", b"plain", 0)


def test_pubsub_introspection_and_errors(r, raw):
    s = raw()
    s.cmd("SUBSCRIBE", "c1", "c2", "x")
    for _ in range(3):
        s.read_reply()
    assert sorted(r.execute_command("PUBSUB", "CHANNELS")) == [b"c1", b"c2", b"x"]
    assert sorted(r.execute_command("PUBSUB", "CHANNELS", "c*")) == [b"c1", b"c2"]
    assert r.execute_command("PUBSUB", "NUMSUB", "c1", "nope") == [b"c1", 1, b"nope", 0]
    assert r.execute_command("PUBSUB", "NUMSUB") == []
    assert r.execute_command("PUBSUB", "NUMPAT") == 0
    help_lines = r.execute_command("PUBSUB", "HELP")
    assert help_lines[0] == b"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert help_lines[-2:] == [b"HELP", b"    Print this help."]
    c = raw()
    assert c.call("PUBSUB", "CHANNELS", "a", "b") == (
        b"-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n")
    assert c.call("PUBSUB", "NUMPAT", "x") == b"-ERR wrong number of arguments for 'pubsub|numpat' command\r\n"
    assert c.call("PUBSUB", "FOO") == b"-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n"
    assert c.call("SUBSCRIBE") == b"-ERR wrong number of arguments for 'subscribe' command\r\n"
    assert c.call("PUBLISH", "a") == b"-ERR wrong number of arguments for 'publish' command\r\n"
    info = r.info("stats")
    assert info["pubsub_channels"] == 3
    assert info["pubsub_patterns"] == 0
    assert info["pubsubshard_channels"] == 0
    assert r.info("clients")["pubsub_clients"] >= 1


def test_client_list_fields_and_type(r, raw):
    s = raw()
    s.call("CLIENT", "SETNAME", "subber")
    s.cmd("SUBSCRIBE", "a", "b")
    s.read_reply()
    s.read_reply()
    s.call("PSUBSCRIBE", "p*")
    s.call("SSUBSCRIBE", "s")
    line = r.execute_command("CLIENT", "LIST", "TYPE", "pubsub").decode()
    assert "name=subber" in line
    assert " flags=P " in line and " sub=2 psub=1 ssub=1 " in line
    assert "name=subber" not in r.execute_command("CLIENT", "LIST", "TYPE", "normal").decode()


def test_disconnect_and_kill_clean_subscriptions(r, raw):
    s = raw()
    s.call("SUBSCRIBE", "gone")
    s.call("PSUBSCRIBE", "g*")
    s.close()
    deadline = time.monotonic() + 5
    while r.pubsub_numsub("gone")[0][1] or r.execute_command("PUBSUB", "NUMPAT"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert r.publish("gone", "x") == 0
    t = raw()
    t.call("CLIENT", "SETNAME", "victim")
    t.call("SUBSCRIBE", "k")
    assert r.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 1
    wait_numsub(r, b"k", 0)
    assert r.info("clients")["pubsub_clients"] == 0


def test_redis_py_pubsub_object(r, new_client):
    p = new_client().pubsub()
    p.subscribe("rp")
    assert p.get_message(timeout=2)["type"] == "subscribe"
    assert r.publish("rp", "v") == 1
    m = p.get_message(timeout=2)
    assert m["channel"] == b"rp" and m["data"] == b"v"
    p.close()


def test_slow_subscriber_hits_pubsub_output_limit(r, raw):
    s = raw()
    s.call("SUBSCRIBE", "flood")
    r.config_set("client-output-buffer-limit", "pubsub 100000 0 0")
    try:
        payload = b"x" * 10000
        # The subscriber never reads: its output grows until the hard limit closes it.
        for _ in range(2000):
            if r.publish("flood", payload) == 0:
                break
        wait_numsub(r, b"flood", 0)
    finally:
        r.config_set("client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")


def test_notify_keyspace_events_config(r):
    r.config_set("notify-keyspace-events", "KEA")
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": "AKE"}
    r.config_set("notify-keyspace-events", "Ex$l")
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": "$lxE"}
    with pytest.raises(Exception, match="Invalid event class character"):
        r.config_set("notify-keyspace-events", "KEQ")
    r.config_set("notify-keyspace-events", "")


def test_publish_paused_by_client_pause_write(r, new_client):
    r.execute_command("CLIENT", "PAUSE", "100000", "WRITE")
    try:
        c = new_client()
        c.connection.send_command("PUBLISH", "foo", "bar")
        deadline = time.monotonic() + 5
        while r.info("clients")["blocked_clients"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
    assert c.connection.read_response() == 0
