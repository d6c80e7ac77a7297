"""Keyspace notifications (notify-keyspace-events): flag parsing and the exact
channels, payloads and order of the events each write raises.

A subscriber listens on `__key*__:*` and on a `sync` channel; `take()`
publishes on `sync` and returns every keyspace message that arrived before
it, so each check sees exactly the events of the commands before it.
"""

from __future__ import annotations

import time

import pytest
import redis


class Events:
    def __init__(self, r: redis.Redis, p):
        self.r = r
        self.p = p

    def take(self) -> list[tuple[bytes, bytes]]:
        self.r.publish("sync", "x")
        got = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            m = self.p.get_message(timeout=1)
            if m is None or m["type"] not in ("message", "pmessage"):
                continue
            if m["channel"] == b"sync":
                return got
            got.append((m["channel"], m["data"]))
        raise AssertionError(f"sync message never came; got {got}")

    def wait_for(self, n: int, timeout: float = 5) -> list[tuple[bytes, bytes]]:
        """Messages published with no command of ours (active expiry)."""
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            m = self.p.get_message(timeout=0.5)
            if m is not None and m["type"] == "pmessage":
                got.append((m["channel"], m["data"]))
        return got


@pytest.fixture
def events(r, new_client):
    def make(flags: str = "KEA", protocol: int = 2) -> Events:
        r.config_set("notify-keyspace-events", flags)
        p = new_client(protocol=protocol).pubsub()
        p.psubscribe("__key*__:*")
        p.subscribe("sync")
        seen = 0
        while seen < 2:
            m = p.get_message(timeout=2)
            assert m is not None
            seen += m["type"] in ("psubscribe", "subscribe")
        return Events(r, p)

    yield make
    r.config_set("notify-keyspace-events", "")
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def ev(key: str, *events: str, db: int = 0) -> list[tuple[bytes, bytes]]:
    """Both messages of each event, keyspace first, as Redis sends them."""
    out = []
    for e in events:
        out.append((f"__keyspace@{db}__:{key}".encode(), e.encode()))
        out.append((f"__keyevent@{db}__:{e}".encode(), key.encode()))
    return out


# ---------------------------------------------------------------- flags


@pytest.mark.parametrize(
    "given, printed",
    [("KEA", "AKE"), ("", ""), ("Ex", "xE"), ("AKEm", "AKEm"), ("AnKE", "AKE"),
     ("n$gK", "g$nK"), ("Kzsh", "shzK"), ("g$lshzxetdKE", "AKE")],
)
def test_flags_round_trip_as_redis_prints_them(r, given, printed):
    try:
        assert r.config_set("notify-keyspace-events", given) is True
        assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": printed}
    finally:
        r.config_set("notify-keyspace-events", "")


def test_bad_flag_is_refused(r):
    with pytest.raises(redis.ResponseError, match="Invalid event class character"):
        r.config_set("notify-keyspace-events", "KEq")
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": ""}


def test_nothing_when_off_or_without_a_class(r, events):
    e = events("")
    r.set("a", 1)
    r.delete("a")
    assert e.take() == []
    r.config_set("notify-keyspace-events", "KE")
    r.set("a", 1)
    r.lpush("l", 1)
    assert e.take() == []
    r.config_set("notify-keyspace-events", "gK")  # class on, strings off
    r.set("a", 2)
    r.delete("a")
    assert e.take() == [(b"__keyspace@0__:a", b"del")]


def test_keyevent_only_and_other_db(r, events, new_client):
    e = events("E$")
    c = new_client()
    c.select(5)
    c.set("k", "v")
    assert e.take() == [(b"__keyevent@5__:set", b"k")]


def test_keymiss_is_raised_by_read_commands_that_find_no_key(r, events):
    """Class m: a read command's lookup that finds no key raises keymiss
    (not part of A, as in Redis); a hit, a write command's lookup and
    OBJECT's (Redis's LOOKUP_NONOTIFY) raise none."""
    r.set("here", "v")
    r.hset("h", "f", "v")
    e = events("KEA")
    r.get("gone")
    assert e.take() == []
    e = events("KEm")
    r.get("gone")
    r.get("here")
    r.hget("h2", "f")
    r.hget("h", "f")
    assert r.exists("gone", "here") == 1
    assert r.type("none") == b"none"
    assert r.ttl("ttl-gone") == -2
    assert r.object("encoding", "obj-gone") is None
    r.set("written", "v")
    r.incr("counter")
    assert e.take() == ev("gone", "keymiss") + ev("h2", "keymiss") + ev("gone", "keymiss") + \
        ev("none", "keymiss") + ev("ttl-gone", "keymiss")


# ---------------------------------------------------------------- families


def test_string_events(r, events):
    e = events()
    r.set("s", "v", ex=100)
    r.setrange("s", 1, "xx")
    r.append("s", "z")
    r.incr("n")
    r.decrby("n", 3)
    r.incrbyfloat("n", 1.5)
    r.getex("s", persist=True)
    r.getset("s", "w")
    r.mset({"m1": 1, "m2": 2})
    r.getdel("s")
    r.set("nx", 1, nx=True)
    r.set("nx", 2, nx=True)  # not set: no event
    assert e.take() == (
        ev("s", "set", "expire", "setrange", "append") + ev("n", "incrby", "incrby", "incrbyfloat")
        + ev("s", "persist", "set") + ev("m1", "set") + ev("m2", "set") + ev("s", "del") + ev("nx", "set")
    )


def test_bit_and_hll_events(r, events):
    e = events()
    r.setbit("b", 3, 1)
    r.setbit("b", 3, 1)  # unchanged: no event
    r.bitfield("bf").set("u8", 0, 7).execute()
    r.set("x", "a")
    r.bitop("AND", "dst", "x", "x")
    r.bitop("AND", "dst", "nokey")
    r.pfadd("h", "a")
    r.pfadd("h", "a")  # unchanged
    r.pfmerge("h2", "h")
    assert e.take() == (
        ev("b", "setbit") + ev("bf", "setbit") + ev("x", "set") + ev("dst", "set", "del")
        + ev("h", "pfadd") + ev("h2", "pfadd")
    )


def test_generic_events(r, events):
    e = events()
    r.set("a", 1)
    r.expire("a", 100)
    r.persist("a")
    r.rename("a", "b")
    r.copy("b", "c")
    r.move("c", 9)
    dump = r.dump("b")
    r.restore("r", 0, dump)
    r.pexpireat("r", 1)  # in the past: deleted, a del not an expire
    r.delete("b", "missing")
    r.unlink("c")
    got = e.take()
    assert got == (
        ev("a", "set", "expire", "persist", "rename_from") + ev("b", "rename_to") + ev("c", "copy_to")
        + ev("c", "move_from") + ev("c", "move_to", db=9) + ev("r", "restore", "del") + ev("b", "del")
    )
    r.select(9)
    r.flushdb()
    r.select(0)


def test_list_events(r, events):
    e = events()
    r.rpush("l", "a", "b", "c")
    r.lpush("l", "z")
    r.linsert("l", "before", "a", "y")
    r.lset("l", 0, "q")
    r.lrem("l", 1, "y")
    r.ltrim("l", 0, 2)
    r.lmove("l", "l2", "LEFT", "RIGHT")
    r.rpop("l")
    r.lpop("l")  # empties it
    r.lpushx("nolist", "a")  # nothing
    assert e.take() == (
        ev("l", "rpush", "lpush", "linsert", "lset", "lrem", "ltrim") + ev("l2", "rpush")
        + ev("l", "lpop", "rpop", "lpop", "del")
    )


def test_blocking_pop_served_raises_pop_events(r, events, new_client):
    e = events()
    waiter = new_client()
    waiter_conn = waiter.connection
    waiter_conn.send_command("BLPOP", "bl", "5")
    time.sleep(0.2)
    r.rpush("bl", "x")
    assert waiter_conn.read_response() == [b"bl", b"x"]
    assert e.take() == ev("bl", "rpush", "lpop", "del")


def test_set_events(r, events):
    e = events()
    r.sadd("s", "a", "b", "c")
    r.sadd("s", "a")  # nothing added
    r.srem("s", "a")
    r.smove("s", "t", "b")
    r.spop("s")  # the last one
    r.sadd("u", 1, 2)
    r.sinterstore("d", "u", "t")  # empty result, d absent: nothing
    r.sunionstore("d", "u", "t")
    r.sdiffstore("d", "nokey")  # empty: d deleted
    assert e.take() == (
        ev("s", "sadd", "srem", "srem") + ev("t", "sadd") + ev("s", "spop", "del") + ev("u", "sadd")
        + ev("d", "sunionstore", "del")
    )


def test_zset_and_geo_events(r, events):
    e = events()
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    r.zadd("z", {"a": 1})  # unchanged
    r.zincrby("z", 2, "a")
    r.zrem("z", "b")
    r.zremrangebyscore("z", 0, 3.5)
    r.zunionstore("u", ["z"])
    r.zrangestore("rs", "u", 0, -1)
    r.zpopmin("z")
    r.geoadd("g", [13.36, 38.11, "p"])
    r.geosearchstore("gs", "g", longitude=13.36, latitude=38.11, radius=10, unit="km")
    assert e.take() == (
        ev("z", "zadd", "zincr", "zrem", "zremrangebyscore") + ev("u", "zunionstore") + ev("rs", "zrangestore")
        + ev("z", "zpopmin", "del") + ev("g", "zadd") + ev("gs", "geosearchstore")
    )


def test_hash_events(r, events):
    e = events()
    r.hset("h", mapping={"a": 1, "b": 2})
    r.hsetnx("h", "c", 3)
    r.hincrby("h", "a", 1)
    r.hincrbyfloat("h", "a", 0.5)
    r.hexpire("h", 100, "b")
    r.hpersist("h", "b")
    r.execute_command("HGETDEL", "h", "FIELDS", 1, "c")
    r.hdel("h", "a", "b")
    assert e.take() == ev("h", "hset", "hset", "hincrby", "hincrbyfloat", "hexpire", "hpersist", "hdel", "hdel", "del")


def test_stream_events(r, events):
    e = events()
    r.xadd("x", {"f": "v"}, id="1-0")
    r.xadd("x", {"f": "v"}, id="2-0", maxlen=1, approximate=False)
    r.xgroup_create("x", "g", id="0")
    r.xreadgroup("g", "alice", {"x": ">"})
    r.xgroup_setid("x", "g", id="0")
    r.xgroup_delconsumer("x", "g", "alice")
    r.xgroup_destroy("x", "g")
    r.xdel("x", "2-0")
    r.xadd("x", {"f": "v"}, id="3-0")
    r.xtrim("x", maxlen=0, approximate=False)
    r.execute_command("XSETID", "x", "5-0")
    assert e.take() == ev(
        "x", "xadd", "xadd", "xtrim", "xgroup-create", "xgroup-createconsumer", "xgroup-setid",
        "xgroup-delconsumer", "xgroup-destroy", "xdel", "xadd", "xtrim", "xsetid",
    )


def test_sort_store_events(r, events):
    e = events()
    r.rpush("src", 3, 1, 2)
    r.sort("src", store="dst")
    r.sort("nokey", store="dst")
    assert e.take() == ev("src", "rpush") + ev("dst", "sortstore", "del")


# ---------------------------------------------------------------- expiry, new keys


def test_expired_from_lazy_expiry(r, events):
    e = events()
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    r.set("k", "v", px=1)
    time.sleep(0.05)
    assert r.get("k") is None
    r.set("k2", "v", px=1)
    time.sleep(0.05)
    r.set("k2", "w")  # the old one expires first, then the set
    assert e.take() == ev("k", "set", "expire", "expired") + ev("k2", "set", "expire", "expired", "set")


def test_expired_from_active_expiry(r, events):
    e = events("Ex")
    r.set("ak", "v", px=50)
    assert e.wait_for(1) == [(b"__keyevent@0__:expired", b"ak")]


def test_hexpired_from_field_expiry(r, events):
    e = events()
    r.hset("fh", mapping={"a": 1, "b": 2})
    r.hpexpire("fh", 50, "a")
    assert e.take() == ev("fh", "hset", "hexpire")
    assert e.wait_for(2) == ev("fh", "hexpired")
    r.hpexpire("fh", 50, "b")
    assert e.take() == ev("fh", "hexpire")
    assert e.wait_for(4) == ev("fh", "hexpired", "del")


def test_hexpired_from_lazy_field_expiry(r, events):
    e = events()
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    r.hset("lh", mapping={"a": 1, "b": 2})
    r.hpexpire("lh", 1, "a", "b")
    time.sleep(0.05)
    assert r.hmget("lh", "a", "b") == [None, None]
    assert e.take() == ev("lh", "hset", "hexpire", "hexpired", "del")


def test_new_key_events(r, events):
    e = events("KEn$")
    r.set("nk", 1)
    r.set("nk", 2)  # overwrite: no new
    r.incr("nk2")
    assert e.take() == ev("nk", "new", "set", "set") + ev("nk2", "new", "incrby")


def test_events_inside_multi_and_eval(r, events):
    e = events()
    p = r.pipeline(transaction=True)
    p.set("t", 1).lpush("tl", "a").delete("t")
    p.execute()
    r.eval("redis.call('sadd', KEYS[1], 'm'); redis.call('del', KEYS[1])", 1, "ts")
    assert e.take() == ev("t", "set") + ev("tl", "lpush") + ev("t", "del") + ev("ts", "sadd", "del")


def test_resp3_subscriber_gets_events(r, events):
    e = events("KEA", protocol=3)
    r.sadd("r3", "a")
    r.delete("r3")
    assert e.take() == ev("r3", "sadd", "del")


def test_resp3_client_sees_its_own_events_after_the_reply(new_client, r):
    c = new_client(protocol=3)
    try:
        r.config_set("notify-keyspace-events", "KE$")
        p = c.pubsub()
        p.subscribe("__keyevent@0__:set")
        assert p.get_message(timeout=2)["type"] == "subscribe"
        # Same connection: the push comes after SET's reply.
        conn = p.connection
        conn.send_command("SET", "self", "1")
        assert conn.read_response() == b"OK"
        m = p.get_message(timeout=2)
        assert (m["channel"], m["data"]) == (b"__keyevent@0__:set", b"self")
    finally:
        r.config_set("notify-keyspace-events", "")
