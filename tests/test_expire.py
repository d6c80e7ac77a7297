"""Expiry: EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT), TTL PTTL EXPIRETIME
PEXPIRETIME PERSIST, lazy expiry on access, and the active expiry cycle."""

import time

import pytest


def arity(name):
    return b"-ERR wrong number of arguments for '%s' command\r\n" % name.encode()


def num(reply: bytes) -> int:
    assert reply.startswith(b":"), reply
    return int(reply[1:-2])


@pytest.fixture
def active_expire_restored(r):
    yield
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_expire_and_ttl(r, c):
    r.set(b"k", b"v")
    assert c.call("TTL", "k") == b":-1\r\n"
    assert c.call("PTTL", "k") == b":-1\r\n"
    assert c.call("EXPIRETIME", "k") == b":-1\r\n"
    assert c.call("PEXPIRETIME", "k") == b":-1\r\n"
    assert c.call("TTL", "missing") == b":-2\r\n"
    assert c.call("PTTL", "missing") == b":-2\r\n"
    assert c.call("EXPIRETIME", "missing") == b":-2\r\n"
    assert c.call("PEXPIRETIME", "missing") == b":-2\r\n"
    assert c.call("EXPIRE", "k", "100") == b":1\r\n"
    assert c.call("TTL", "k") == b":100\r\n"
    assert 99_000 < num(c.call("PTTL", "k")) <= 100_000
    now = time.time()
    assert abs(num(c.call("EXPIRETIME", "k")) - (now + 100)) <= 2
    assert abs(num(c.call("PEXPIRETIME", "k")) - (now + 100) * 1000) <= 2000
    assert c.call("PEXPIRE", "k", "50000") == b":1\r\n"
    assert c.call("TTL", "k") == b":50\r\n"
    assert c.call("EXPIRE", "missing", "100") == b":0\r\n"
    assert c.call("PEXPIRE", "missing", "100") == b":0\r\n"


def test_expireat(r, c):
    r.set(b"k", b"v")
    at = int(time.time()) + 1000
    assert c.call("EXPIREAT", "k", str(at)) == b":1\r\n"
    assert c.call("EXPIRETIME", "k") == b":%d\r\n" % at
    assert c.call("PEXPIREAT", "k", str(at * 1000 + 123)) == b":1\r\n"
    assert c.call("PEXPIRETIME", "k") == b":%d\r\n" % (at * 1000 + 123)
    assert c.call("EXPIRETIME", "k") == b":%d\r\n" % at  # truncated, not rounded
    assert c.call("EXPIREAT", "missing", str(at)) == b":0\r\n"


def test_ttl_rounds_to_nearest_second(r, c):
    r.set(b"k", b"v")
    c.call("PEXPIRE", "k", "1600")
    assert c.call("TTL", "k") == b":2\r\n"
    c.call("PEXPIRE", "k", "1400")
    assert c.call("TTL", "k") == b":1\r\n"


def test_past_deadline_deletes(r, c):
    info = lambda: r.info("stats").get("expired_keys")
    before = info()
    for cmd, arg in (("EXPIRE", "-1"), ("PEXPIRE", "0"), ("EXPIREAT", "1"), ("PEXPIREAT", "1000")):
        r.set(b"k", b"v")
        assert c.call(cmd, "k", arg) == b":1\r\n"
        assert c.call("EXISTS", "k") == b":0\r\n"
    # Redis turns these into a DEL: they are not counted as expired keys.
    assert info() == before


def test_options(r, c):
    r.set(b"k", b"v")
    assert c.call("EXPIRE", "k", "100", "XX") == b":0\r\n"
    assert c.call("EXPIRE", "k", "100", "GT") == b":0\r\n"  # no TTL counts as infinite
    assert c.call("EXPIRE", "k", "100", "NX") == b":1\r\n"
    assert c.call("EXPIRE", "k", "200", "NX") == b":0\r\n"
    assert c.call("EXPIRE", "k", "200", "XX") == b":1\r\n"
    assert c.call("EXPIRE", "k", "100", "GT") == b":0\r\n"
    assert c.call("EXPIRE", "k", "300", "gt") == b":1\r\n"
    assert c.call("EXPIRE", "k", "400", "LT") == b":0\r\n"
    assert c.call("EXPIRE", "k", "50", "lt") == b":1\r\n"
    assert c.call("TTL", "k") == b":50\r\n"
    assert c.call("EXPIRE", "k", "60", "XX", "GT") == b":1\r\n"
    assert c.call("EXPIRE", "k", "40", "XX", "LT") == b":1\r\n"
    r.persist(b"k")
    assert c.call("EXPIRE", "k", "40", "LT") == b":1\r\n"  # no TTL: LT applies
    assert c.call("TTL", "k") == b":40\r\n"
    assert c.call("EXPIRE", "missing", "10", "NX") == b":0\r\n"


def test_option_errors(c):
    nx_err = b"-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"
    for opts in (("NX", "XX"), ("NX", "GT"), ("NX", "LT"), ("XX", "NX")):
        assert c.call("EXPIRE", "k", "10", *opts) == nx_err
    assert c.call("EXPIRE", "k", "10", "GT", "LT") == b"-ERR GT and LT options at the same time are not compatible\r\n"
    assert c.call("PEXPIRE", "k", "10", "LT", "GT") == b"-ERR GT and LT options at the same time are not compatible\r\n"
    assert c.call("EXPIRE", "k", "10", "FOO") == b"-ERR Unsupported option FOO\r\n"
    # Options are checked before the time argument.
    assert c.call("EXPIRE", "k", "abc", "FOO") == b"-ERR Unsupported option FOO\r\n"
    assert c.call("EXPIRE", "k", "abc") == b"-ERR value is not an integer or out of range\r\n"
    assert c.call("PEXPIREAT", "k", "1.5") == b"-ERR value is not an integer or out of range\r\n"
    for cmd in ("expire", "pexpire", "expireat", "pexpireat"):
        assert c.call(cmd.upper(), "k") == arity(cmd)
    for cmd in ("ttl", "pttl", "expiretime", "pexpiretime", "persist"):
        assert c.call(cmd.upper()) == arity(cmd)
        assert c.call(cmd.upper(), "a", "b") == arity(cmd)


def test_overflow(r, c):
    r.set(b"k", b"v")
    big = "9223372036854775807"
    assert c.call("EXPIRE", "k", big) == b"-ERR invalid expire time in 'expire' command\r\n"
    assert c.call("EXPIRE", "k", "-9223372036854775808") == b"-ERR invalid expire time in 'expire' command\r\n"
    assert c.call("PEXPIRE", "k", big) == b"-ERR invalid expire time in 'pexpire' command\r\n"
    assert c.call("EXPIREAT", "k", big) == b"-ERR invalid expire time in 'expireat' command\r\n"
    # PEXPIREAT takes the value as is: no conversion, no base time.
    assert c.call("PEXPIREAT", "k", big) == b":1\r\n"
    assert c.call("PEXPIRETIME", "k") == b":%s\r\n" % big.encode()
    assert c.call("SET", "k", "v", "EX", big) == b"-ERR invalid expire time in 'set' command\r\n"


def test_persist(r, c):
    r.set(b"k", b"v")
    assert c.call("PERSIST", "k") == b":0\r\n"
    r.expire(b"k", 100)
    assert c.call("PERSIST", "k") == b":1\r\n"
    assert c.call("TTL", "k") == b":-1\r\n"
    assert c.call("PERSIST", "missing") == b":0\r\n"


def test_set_clears_ttl(r, c):
    r.set(b"k", b"v", ex=100)
    r.set(b"k", b"w")
    assert c.call("TTL", "k") == b":-1\r\n"


def test_resp3_integers(r3):
    r3.set(b"k", b"v")
    assert r3.ttl(b"k") == -1
    assert r3.expire(b"k", 10) is True
    assert r3.ttl(b"missing") == -2


def test_lazy_expiry_counts(r, active_expire_restored):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    for i in range(10):
        r.set(b"k%d" % i, b"v", px=100)
    r.set(b"keep", b"v")
    time.sleep(0.25)
    assert r.dbsize() == 11  # not reclaimed yet: nobody touched them
    stats = r.info("stats")
    before = stats.get("expired_keys")
    assert r.get(b"k0") is None
    assert r.exists(b"k1") == 0
    assert r.ttl(b"k2") == -2
    assert r.dbsize() == 8
    if before is not None:
        assert r.info("stats")["expired_keys"] == before + 3


def test_expire_with_active_expire_off(r, active_expire_restored):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(b"k%d" % i, b"v", px=100)
    pipe.execute()
    time.sleep(0.6)
    assert r.dbsize() == 1000
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    deadline = time.time() + 2
    while r.dbsize() and time.time() < deadline:
        time.sleep(0.05)
    assert r.dbsize() == 0


def test_active_expiry_100k(r, new_client):
    """100,000 keys expiring at the same millisecond are all reclaimed within
    2 s of that deadline by the active cycle alone (the watcher only calls
    DBSIZE and INFO, which touch no key)."""
    n = 100_000
    stats = r.info("stats")
    before = stats.get("expired_keys")
    # One absolute deadline for all keys, far enough ahead that a slow load
    # still finishes before it; the keys are written server-side by a script,
    # so the load does not depend on how fast this client can encode.
    deadline_ms = int(time.time() * 1000) + 4000
    load = "for i = 0, tonumber(ARGV[1]) - 1 do redis.call('SET', 'exp:' .. i, 'v', 'PXAT', ARGV[2]) end"
    new_client().eval(load, 0, n, deadline_ms)
    assert time.time() * 1000 < deadline_ms, "load took longer than the deadline"
    assert r.dbsize() == n
    last_deadline = deadline_ms / 1000
    while r.dbsize() > 0 and time.time() < last_deadline + 2.0:
        time.sleep(0.05)
    assert r.dbsize() == 0, f"{r.dbsize()} keys left 2 s after the deadline"
    if before is not None:
        assert r.info("stats")["expired_keys"] == before + n


def test_expired_key_in_pipeline_is_gone(r):
    r.set(b"k", b"v", px=50)
    time.sleep(0.1)
    assert r.get(b"k") is None
    assert r.dbsize() == 0


def test_active_expiry_few_among_many(r):
    """A few due keys behind many persistent ones are still reclaimed promptly
    (the cycle must not give up after one poor batch per tick)."""
    pipe = r.pipeline(transaction=False)
    for i in range(100_000):
        pipe.set(b"keep:%d" % i, b"v")
    pipe.execute()
    pipe = r.pipeline(transaction=False)
    for i in range(2000):
        pipe.set(b"exp:%d" % i, b"v", px=300)
    pipe.execute()
    deadline = time.time() + 0.3
    while r.dbsize() > 100_000 and time.time() < deadline + 2.5:
        time.sleep(0.05)
    assert r.dbsize() == 100_000


def test_expiry_is_held_during_client_pause(r):
    before = r.info("stats")["expired_keys"]
    p = r.pipeline(transaction=True)
    p.set("foo", "bar", px=10)
    p.set("bar", "foo", px=10)
    p.execute_command("CLIENT", "PAUSE", 50000, "WRITE")
    p.execute()
    time.sleep(0.3)  # several cron ticks past both deadlines
    assert r.get("foo") is None and r.get("bar") is None
    assert r.exists("foo", "bar") == 0
    assert r.dbsize() == 2  # logically expired, still stored
    assert r.info("stats")["expired_keys"] == before
    r.execute_command("CLIENT", "UNPAUSE")
    assert r.get("foo") is None and r.get("bar") is None
    assert r.info("stats")["expired_keys"] == before + 2
    assert r.dbsize() == 0


def test_command_time_never_lags_the_wall_clock(r):
    # A client that sets a deadline 10 s from its own clock must never read
    # a TTL above 10 s back: the server's command time may not run behind
    # the wall clock (it did by up to 2 ms when it was truncated twice).
    r.set("k", "v")
    for _ in range(300):
        deadline = int(time.time() * 1000) + 10_000
        r.pexpireat("k", deadline)
        assert r.pttl("k") <= 10_000
