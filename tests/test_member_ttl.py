"""Per-member TTLs on sets and sorted sets (densekv extension): the SEXPIRE and
ZEXPIRE families (shaped like HEXPIRE), Dragonfly's SADDEX, KeyDB's
EXPIREMEMBER family; lazy expiry (a due member is invisible to every command),
active expiry (reclaimed with nobody touching the key), both shapes of each
type, DUMP/RESTORE, DEBUG RELOAD, AOF restart and rewrite, keyspace events."""

import os
import shutil
import tempfile
import time

import pytest
import redis

from conftest import Server, server_binary

WRONGTYPE = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"

# (type, add members, prefix of the commands)
SET = "set"
ZSET = "zset"


def add(r, kind, key, members):
    if kind == SET:
        r.sadd(key, *members)
    else:
        r.zadd(key, {m: i for i, m in enumerate(members)})


def card(r, kind, key):
    return r.scard(key) if kind == SET else r.zcard(key)


def members_of(r, kind, key):
    if kind == SET:
        return set(r.smembers(key))
    return set(r.zrange(key, 0, -1))


def cmd(kind, name):
    """SEXPIRE / ZEXPIRE ... from the suffix after the type letter."""
    return ("S" if kind == SET else "Z") + name


@pytest.fixture
def c(raw):
    return raw()


@pytest.fixture
def no_active_expiry(r):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    yield
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


@pytest.fixture
def events(r):
    saved = r.config_get("notify-keyspace-events")["notify-keyspace-events"]
    r.config_set("notify-keyspace-events", "KEA")
    yield
    r.config_set("notify-keyspace-events", saved)


def names(n):
    return [f"m{i}".encode() for i in range(n)]


# ---------------------------------------------------------------- replies

@pytest.mark.parametrize("kind", [SET, ZSET])
@pytest.mark.parametrize("n", [3, 300])
def test_expire_replies_and_conditions(r, kind, n):
    add(r, kind, "k", names(n))
    E = lambda c, *a: r.execute_command(cmd(kind, c), "k", *a)
    assert E("EXPIRE", 100, "MEMBERS", 2, "m0", "zz") == [1, -2]
    assert E("EXPIRE", 200, "NX", "MEMBERS", 2, "m0", "m1") == [0, 1]
    assert E("EXPIRE", 300, "XX", "MEMBERS", 2, "m0", "m2") == [1, 0]
    assert E("EXPIRE", 50, "GT", "MEMBERS", 2, "m0", "m2") == [0, 0]
    assert E("EXPIRE", 50, "LT", "MEMBERS", 2, "m0", "m2") == [1, 1]
    assert E("TTL", "MEMBERS", 4, "m0", "m1", "m2", "zz") == [50, 200, 50, -2]
    ms = E("PTTL", "MEMBERS", 1, "m0")[0]
    assert 49000 < ms <= 50000
    now = int(time.time())
    at = E("EXPIRETIME", "MEMBERS", 1, "m0")[0]
    assert now + 49 <= at <= now + 51
    assert E("PEXPIREAT", (now + 1000) * 1000, "MEMBERS", 1, "m1") == [1]
    assert E("PEXPIRETIME", "MEMBERS", 1, "m1") == [(now + 1000) * 1000]
    assert E("EXPIREAT", now + 2000, "MEMBERS", 1, "m1") == [1]
    assert E("EXPIRETIME", "MEMBERS", 1, "m1") == [now + 2000]
    assert E("PEXPIRE", 5000, "MEMBERS", 1, "m2") == [1]
    assert 4000 < E("PTTL", "MEMBERS", 1, "m2")[0] <= 5000
    assert E("PERSIST", "MEMBERS", 3, "m0", "zz", "m0") == [1, -2, -1]
    assert E("TTL", "MEMBERS", 1, "m0") == [-1]
    assert card(r, kind, "k") == n
    # A time in the past deletes the member (2), the key with its last one.
    assert E("PEXPIREAT", 1, "MEMBERS", 1, "m0") == [2]
    assert card(r, kind, "k") == n - 1
    assert b"m0" not in members_of(r, kind, "k")
    rest = [f"m{i}" for i in range(1, n)]
    assert E("EXPIREAT", 1, "MEMBERS", len(rest), *rest) == [2] * len(rest)
    assert r.exists("k") == 0
    # Missing keys answer per member.
    assert E("EXPIRE", 10, "MEMBERS", 2, "a", "b") == [-2, -2]
    assert E("TTL", "MEMBERS", 1, "a") == [-2]
    assert E("PERSIST", "MEMBERS", 1, "a") == [-2]
    assert r.exists("k") == 0


def test_resp3_replies_are_arrays_of_integers(r3):
    r3.sadd("s", "a", "b")
    r3.zadd("z", {"a": 1})
    assert r3.execute_command("SEXPIRE", "s", 100, "MEMBERS", 2, "a", "x") == [1, -2]
    assert r3.execute_command("STTL", "s", "MEMBERS", 2, "a", "b") == [100, -1]
    assert r3.execute_command("ZEXPIRE", "z", 100, "MEMBERS", 1, "a") == [1]
    assert r3.execute_command("ZPERSIST", "z", "MEMBERS", 1, "a") == [1]


@pytest.mark.parametrize("kind", [SET, ZSET])
def test_argument_errors_mirror_hexpire(r, c, kind):
    add(r, kind, "k", names(2))
    r.set("str", "x")
    p = "S" if kind == SET else "Z"
    e = lambda *a: c.call(*a)
    assert e(p + "EXPIRE", "k", "10", "MEMBERS", "0", "m0") == b"-ERR Parameter `numFields` should be greater than 0\r\n"
    assert e(p + "EXPIRE", "k", "10", "MEMBERS", "x", "m0") == b"-ERR Parameter `numFields` should be greater than 0\r\n"
    assert e(p + "EXPIRE", "k", "10", "MEMBERS", "2", "m0") == b"-ERR The `numfields` parameter must match the number of arguments\r\n"
    assert e(p + "EXPIRE", "k", "10", "FIELDS", "1", "m0") == b"-ERR Mandatory argument MEMBERS is missing or not at the right position\r\n"
    assert e(p + "EXPIRE", "k", "10", "XX", "1", "m0") == b"-ERR Mandatory argument MEMBERS is missing or not at the right position\r\n"
    assert e(p + "EXPIRE", "k", "-1", "MEMBERS", "1", "m0") == b"-ERR invalid expire time, must be >= 0\r\n"
    assert e(p + "EXPIRE", "k", "x", "MEMBERS", "1", "m0") == b"-ERR value is not an integer or out of range\r\n"
    assert e(p + "PEXPIREAT", "k", str(1 << 46), "MEMBERS", "1", "m0") == f"-ERR invalid expire time in '{p.lower()}pexpireat' command\r\n".encode()
    assert e(p + "TTL", "k", "MEMBERS", "0", "m0") == b"-ERR Number of fields must be a positive integer\r\n"
    assert e(p + "PERSIST", "k", "MEMBER", "1", "m0") == b"-ERR Mandatory argument MEMBERS is missing or not at the right position\r\n"
    assert e(p + "TTL", "k", "MEMBERS") == f"-ERR wrong number of arguments for '{p.lower()}ttl' command\r\n".encode()
    # The key's type is checked first, as HEXPIRE does.
    assert e(p + "EXPIRE", "str", "x", "MEMBERS", "0", "m0") == WRONGTYPE
    assert e(p + "TTL", "str", "MEMBERS", "1", "m0") == WRONGTYPE
    assert e(p + "PERSIST", "str", "MEMBERS", "1", "m0") == WRONGTYPE
    other = "z" if kind == SET else "s"
    add(r, ZSET if kind == SET else SET, other, names(1))
    assert e(p + "EXPIRE", other, "10", "MEMBERS", "1", "m0") == WRONGTYPE
    # Nothing was changed by the refused commands.
    assert r.execute_command(p + "TTL", "k", "MEMBERS", 2, "m0", "m1") == [-1, -1]


# ---------------------------------------------------------------- encodings

def test_encodings_are_kept(r):
    r.sadd("lp", "a", "b")
    r.execute_command("SEXPIRE", "lp", 100, "MEMBERS", 1, "a")
    assert r.object("encoding", "lp") == b"listpack"
    r.sadd("ht", *names(300))
    r.execute_command("SEXPIRE", "ht", 100, "MEMBERS", 1, "m5")
    assert r.object("encoding", "ht") == b"hashtable"
    # An intset cannot hold a deadline: the set becomes a listpack.
    r.sadd("ints", 1, 2, 3)
    assert r.object("encoding", "ints") == b"intset"
    assert r.execute_command("SEXPIRE", "ints", 100, "MEMBERS", 2, "2", "9") == [1, -2]
    assert r.object("encoding", "ints") == b"listpack"
    assert r.smembers("ints") == {b"1", b"2", b"3"}
    assert r.execute_command("STTL", "ints", "MEMBERS", 2, "2", "1") == [100, -1]
    r.zadd("zl", {"a": 1})
    r.execute_command("ZEXPIRE", "zl", 100, "MEMBERS", 1, "a")
    assert r.object("encoding", "zl") == b"listpack"
    r.zadd("zs", {f"m{i}": i for i in range(300)})
    r.execute_command("ZEXPIRE", "zs", 100, "MEMBERS", 1, "m7")
    assert r.object("encoding", "zs") == b"skiplist"


@pytest.mark.parametrize("kind", [SET, ZSET])
def test_member_ttl_costs_at_most_eight_bytes(r, kind):
    n = 2000
    add(r, kind, "plain", names(n))
    add(r, kind, "timed", names(n))
    for i in range(0, n, 500):
        chunk = [f"m{j}" for j in range(i, i + 500)]
        r.execute_command(cmd(kind, "EXPIRE"), "timed", 10_000, "MEMBERS", len(chunk), *chunk)
    extra = (r.memory_usage("timed") - r.memory_usage("plain")) / n
    assert 0 < extra <= 8, extra


# ---------------------------------------------------------------- expiry

@pytest.mark.parametrize("kind", [SET, ZSET])
@pytest.mark.parametrize("n", [5, 400])
def test_due_members_are_invisible_at_once(r, no_active_expiry, kind, n):
    add(r, kind, "k", names(n))
    gone = [f"m{i}" for i in range(0, n, 2)]
    assert r.execute_command(cmd(kind, "PEXPIRE"), "k", 50, "MEMBERS", len(gone), *gone) == [1] * len(gone)
    before = int(r.info("stats")["expired_subkeys"])
    time.sleep(0.1)
    live = {f"m{i}".encode() for i in range(1, n, 2)}
    assert card(r, kind, "k") == len(live)
    assert members_of(r, kind, "k") == live
    assert int(r.info("stats")["expired_subkeys"]) - before == len(gone)
    if kind == SET:
        assert r.sismember("k", "m0") == 0
        assert r.sismember("k", "m1") == 1
        assert set(r.srandmember("k", -50)) <= live
        assert r.sinter("k", "k") == live
        assert r.execute_command("SCARD", "k") == len(live)
    else:
        assert r.zrank("k", "m0") is None
        assert r.zrank("k", "m1") == 0
        assert r.zscore("k", "m0") is None
        assert r.zrangebyscore("k", 0, 3) == [b"m1", b"m3"]
        assert r.zcount("k", "-inf", "+inf") == len(live)
    # The last member going takes the key with it.
    rest = [m.decode() for m in live]
    r.execute_command(cmd(kind, "PEXPIRE"), "k", 20, "MEMBERS", len(rest), *rest)
    time.sleep(0.05)
    assert r.type("k") == b"none"
    assert r.dbsize() == 0


@pytest.mark.parametrize("kind", [SET, ZSET])
@pytest.mark.parametrize("n", [10, 3000])
def test_active_expiry_reclaims_without_access(r, kind, n):
    add(r, kind, "k", names(n))
    add(r, kind, "keep", names(3))
    ms = [f"m{i}" for i in range(n)]
    # "keep" first: its member is due by the time the whole of "k" is.
    r.execute_command(cmd(kind, "PEXPIRE"), "keep", 100, "MEMBERS", 1, "m0")
    r.execute_command(cmd(kind, "PEXPIRE"), "k", 100, "MEMBERS", n, *ms)
    deadline = time.time() + 5
    # DBSIZE neither reads nor expires keys: only active expiry can delete.
    while r.dbsize() != 1 and time.time() < deadline:
        time.sleep(0.05)
    assert r.dbsize() == 1
    assert card(r, kind, "keep") == 2


def test_re_adding_drops_the_ttl_as_hset_does(r):
    r.sadd("s", "a", "b")
    r.execute_command("SEXPIRE", "s", 100, "MEMBERS", 2, "a", "b")
    assert r.sadd("s", "a", "c") == 1
    assert r.execute_command("STTL", "s", "MEMBERS", 3, "a", "b", "c") == [-1, 100, -1]
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    r.execute_command("ZEXPIRE", "z", 100, "MEMBERS", 3, "a", "b", "c")
    r.zadd("z", {"a": 5})             # new score: TTL dropped
    r.zadd("z", {"b": 2})             # same score: TTL dropped too (HSET drops it for the same value)
    r.zadd("z", {"c": 0}, nx=True)    # not touched
    r.zincrby("z", 1, "c")            # as HINCRBY: the TTL stays
    assert r.execute_command("ZTTL", "z", "MEMBERS", 3, "a", "b", "c") == [-1, -1, 100]
    assert r.zscore("z", "c") == 4.0


def test_moved_renamed_and_copied_sets_keep_member_ttls(r, no_active_expiry):
    r.sadd("s", "a", "b")
    r.execute_command("SPEXPIRE", "s", 50, "MEMBERS", 1, "a")
    r.rename("s", "t")
    r.copy("t", "u")
    assert r.execute_command("SPTTL", "u", "MEMBERS", 1, "a")[0] > 0
    time.sleep(0.1)
    assert r.smembers("t") == {b"b"}
    assert r.smembers("u") == {b"b"}


# ---------------------------------------------------------------- aliases

def test_saddex(r, c):
    assert r.execute_command("SADDEX", "s", 100, "a", "b") == 2
    assert r.execute_command("STTL", "s", "MEMBERS", 2, "a", "b") == [100, 100]
    r.sadd("s", "c")
    assert r.execute_command("SADDEX", "s", 200, "a", "c", "d") == 1
    assert r.execute_command("STTL", "s", "MEMBERS", 4, "a", "b", "c", "d") == [200, 100, 200, 200]
    r.sadd("s", "e")
    assert r.execute_command("SADDEX", "s", "KEEPTTL", 300, "a", "e", "f") == 1
    assert r.execute_command("STTL", "s", "MEMBERS", 3, "a", "e", "f") == [200, -1, 300]
    assert c.call("SADDEX", "s", "0", "x") == b"-ERR invalid expire time in 'saddex' command\r\n"
    assert c.call("SADDEX", "s", "KEEPTTL", "10") == b"-ERR wrong number of arguments for 'saddex' command\r\n"
    r.set("str", 1)
    assert c.call("SADDEX", "str", "10", "a") == WRONGTYPE


def test_keydb_expiremember_family(r, c, no_active_expiry):
    r.sadd("s", "a", "b")
    r.hset("h", mapping={"f": 1, "g": 2})
    r.zadd("z", {"a": 1})
    assert r.execute_command("EXPIREMEMBER", "s", "a", 100) == 1
    assert r.execute_command("STTL", "s", "MEMBERS", 1, "a") == [100]
    assert r.execute_command("EXPIREMEMBER", "s", "b", 5000, "ms") == 1
    assert 4000 < r.execute_command("SPTTL", "s", "MEMBERS", 1, "b")[0] <= 5000
    assert r.execute_command("EXPIREMEMBER", "h", "f", 100, "s") == 1
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "f") == [100]
    now = int(time.time())
    assert r.execute_command("EXPIREMEMBERAT", "z", "a", now + 100) == 1
    assert r.execute_command("ZEXPIRETIME", "z", "MEMBERS", 1, "a") == [now + 100]
    assert r.execute_command("PEXPIREMEMBERAT", "h", "g", (now + 50) * 1000) == 1
    assert r.execute_command("HPEXPIRETIME", "h", "FIELDS", 1, "g") == [(now + 50) * 1000]
    assert r.execute_command("EXPIREMEMBER", "s", "nope", 10) == 0
    assert r.execute_command("EXPIREMEMBER", "missing", "a", 10) == 0
    # A past time deletes the member at once.
    assert r.execute_command("PEXPIREMEMBERAT", "s", "a", 1) == 1
    assert r.smembers("s") == {b"b"}
    r.set("str", "x")
    assert c.call("EXPIREMEMBER", "str", "a", "10") == b"-ERR object type is unsupported\r\n"
    assert c.call("EXPIREMEMBER", "s", "b", "10", "h") == b"-ERR Invalid unit arg\r\n"
    assert c.call("EXPIREMEMBER", "s", "b", "10", "s", "x") == b"-ERR Invalid number of arguments\r\n"
    assert c.call("EXPIREMEMBER", "s", "b", "x") == b"-ERR value is not an integer or out of range\r\n"


# ---------------------------------------------------------------- persistence

def ttl_state(r):
    return {
        "s": (sorted(r.smembers("s")), r.execute_command("SPEXPIRETIME", "s", "MEMBERS", 3, "m0", "m1", "m2")),
        "big": (r.scard("big"), r.execute_command("SPEXPIRETIME", "big", "MEMBERS", 2, "m0", "m1")),
        "z": (r.zrange("z", 0, -1, withscores=True), r.execute_command("ZPEXPIRETIME", "z", "MEMBERS", 3, "m0", "m1", "m2")),
        "bigz": (r.zcard("bigz"), r.execute_command("ZPEXPIRETIME", "bigz", "MEMBERS", 2, "m0", "m1")),
    }


def fill_ttls(r):
    at = (int(time.time()) + 1000) * 1000
    r.sadd("s", *names(3))
    r.execute_command("SPEXPIREAT", "s", at, "MEMBERS", 2, "m0", "m2")
    r.sadd("big", *names(500))
    r.execute_command("SPEXPIREAT", "big", at + 1, "MEMBERS", 1, "m0")
    r.zadd("z", {"m0": 1.5, "m1": 2, "m2": -3})
    r.execute_command("ZPEXPIREAT", "z", at + 2, "MEMBERS", 1, "m1")
    r.zadd("bigz", {f"m{i}": i for i in range(500)})
    r.execute_command("ZPEXPIREAT", "bigz", at + 3, "MEMBERS", 1, "m1")
    return ttl_state(r)


def test_dump_restore_round_trip(r):
    want = fill_ttls(r)
    for k in ("s", "big", "z", "bigz"):
        payload = r.dump(k)
        r.restore(k + "2", 0, payload)
        r.rename(k + "2", k)  # overwrite the original
    assert ttl_state(r) == want
    # A member due by RESTORE time is left out.
    r.sadd("soon", "a", "b")
    r.execute_command("SPEXPIRE", "soon", 30, "MEMBERS", 1, "a")
    payload = r.dump("soon")
    time.sleep(0.06)
    r.restore("back", 0, payload)
    assert r.smembers("back") == {b"b"}
    # A set without member TTLs keeps Redis's own layout (type byte 2, 11 or 20).
    r.sadd("plain", "x", "y")
    assert r.dump("plain")[0] in (2, 11, 20)
    assert r.dump("s")[0] == 224 and r.dump("z")[0] == 225


def test_debug_reload_keeps_member_ttls(r):
    want = fill_ttls(r)
    r.execute_command("DEBUG", "RELOAD")
    assert ttl_state(r) == want


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="densekv-mttl-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_aof_restart_and_rewrite_keep_member_ttls(workdir, preamble):
    s = Server(server_binary(), ("--appendonly", "yes", "--aof-use-rdb-preamble", preamble), workdir=workdir).start()
    try:
        r = redis.Redis(port=s.port)
        want = fill_ttls(r)
        # Lazy and active expiry go to the AOF as SREM / ZREM.
        r.sadd("lazy", "a", "b")
        r.execute_command("SPEXPIRE", "lazy", 30, "MEMBERS", 1, "a")
        r.zadd("lz", {"a": 1, "b": 2})
        r.execute_command("ZPEXPIRE", "lz", 30, "MEMBERS", 1, "a")
        time.sleep(0.06)
        assert r.smembers("lazy") == {b"b"}
        r.close()
        s.stop()
        s.start()
        r = redis.Redis(port=s.port)
        assert ttl_state(r) == want
        assert r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"OK"
        assert r.smembers("lazy") == {b"b"}
        assert r.zrange("lz", 0, -1) == [b"b"]
        r.bgrewriteaof()
        deadline = time.time() + 10
        while int(r.info("persistence")["aof_rewrite_in_progress"]) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        r.close()
        s.stop()
        s.start()
        r = redis.Redis(port=s.port)
        assert ttl_state(r) == want
        r.close()
    finally:
        s.cleanup()


def test_aof_replays_expire_as_absolute_pexpireat(workdir):
    s = Server(server_binary(), ("--appendonly", "yes"), workdir=workdir).start()
    try:
        r = redis.Redis(port=s.port)
        r.sadd("s", "a", "b")
        r.execute_command("SEXPIRE", "s", 100, "MEMBERS", 2, "a", "x")
        r.execute_command("SEXPIRE", "s", 100, "NX", "MEMBERS", 1, "a")  # changes nothing: not logged
        r.execute_command("SPEXPIREAT", "s", 1, "MEMBERS", 1, "b")
        time.sleep(0.3)  # appendfsync everysec: the writes reach the file within a loop turn
        aof = os.path.join(workdir, "appendonlydir")
        text = b"".join(open(os.path.join(aof, f), "rb").read() for f in sorted(os.listdir(aof)) if f.endswith(".incr.aof"))
        assert b"SPEXPIREAT" in text and b"SEXPIRE\r\n" not in text
        assert text.count(b"SPEXPIREAT") == 1
        assert b"SREM\r\n$1\r\ns\r\n$1\r\nb" in text
        r.close()
    finally:
        s.cleanup()


# ---------------------------------------------------------------- events

def drain(p, timeout=1.0):
    out = []
    end = time.time() + timeout
    while time.time() < end:
        m = p.get_message(timeout=0.05)
        if m and m["type"] == "pmessage":
            out.append((m["channel"].split(b":", 1)[1], m["data"]))
    return out


def test_keyspace_events(r, new_client, events, no_active_expiry):
    sub = new_client().pubsub()
    sub.psubscribe("__keyevent@0__:*")
    drain(sub, 0.2)
    r.sadd("s", "a", "b")
    r.execute_command("SPEXPIRE", "s", 30, "MEMBERS", 1, "a")
    r.execute_command("SPERSIST", "s", "MEMBERS", 1, "a")
    r.execute_command("SPEXPIRE", "s", 30, "MEMBERS", 2, "a", "b")
    time.sleep(0.06)
    assert r.scard("s") == 0
    got = drain(sub)
    assert [e for e, _ in got] == [b"sadd", b"sexpire", b"spersist", b"sexpire", b"sexpired", b"del"]
    r.zadd("z", {"a": 1, "b": 2})
    r.execute_command("ZPEXPIREAT", "z", 1, "MEMBERS", 1, "a")
    r.execute_command("ZPEXPIRE", "z", 30, "MEMBERS", 1, "b")
    time.sleep(0.06)
    assert r.zcard("z") == 0
    assert [e for e, _ in drain(sub)] == [b"zadd", b"zrem", b"zexpire", b"zexpired", b"del"]


def test_active_expiry_raises_events(r, new_client, events):
    sub = new_client().pubsub()
    sub.psubscribe("__keyevent@0__:*")
    drain(sub, 0.2)
    r.sadd("s", "a", "b")
    r.execute_command("SPEXPIRE", "s", 50, "MEMBERS", 1, "a")
    deadline = time.time() + 3
    got = []
    while time.time() < deadline and (b"sexpired", b"s") not in got:
        got += drain(sub, 0.1)
    assert (b"sexpired", b"s") in got
    assert r.smembers("s") == {b"b"}


def test_redis_refuses_payloads_with_member_ttls_and_loads_plain_ones(r, real_redis):
    r.sadd("s", "a", "b")
    r.execute_command("SEXPIRE", "s", 100, "MEMBERS", 1, "a")
    r.zadd("z", {"a": 1})
    r.execute_command("ZEXPIRE", "z", 100, "MEMBERS", 1, "a")
    for k in ("s", "z"):
        with pytest.raises(redis.ResponseError, match="payload version|Bad data format"):
            real_redis.restore(k, 0, r.dump(k), replace=True)
        assert real_redis.exists(k) == 0
    # Without member TTLs the payload is Redis's own and loads there.
    r.execute_command("SPERSIST", "s", "MEMBERS", 1, "a")
    r.execute_command("ZPERSIST", "z", "MEMBERS", 1, "a")
    real_redis.restore("s", 0, r.dump("s"), replace=True)
    real_redis.restore("z", 0, r.dump("z"), replace=True)
    assert real_redis.smembers("s") == {b"a", b"b"}
    assert real_redis.zrange("z", 0, -1, withscores=True) == [(b"a", 1.0)]
