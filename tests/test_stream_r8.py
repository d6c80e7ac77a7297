"""Stream options of Redis 8.4 and later: XREADGROUP ... CLAIM min-idle-time
(idle pending entries taken over before new ones are read, each entry
replied with its idle time and delivery count), its errors, blocking
(a blocked read wakes when an entry becomes claimable) and what a group
read propagates (XCLAIM / XGROUP SETID, never the read itself)."""

import glob
import os
import re
import threading
import time

import redis

from conftest import err

CLAIM_XREAD = "The CLAIM option is only supported by XREADGROUP. You called XREAD instead."
NOT_INT = "min-idle-time is not an integer"
NEGATIVE = "min-idle-time must be a positive integer"


def x(r, cmd, *args):
    """The reply as sent (a bytes name bypasses redis-py's reply callbacks)."""
    return r.execute_command(cmd.encode(), *args)


def setup(r, n=2, key="s"):
    for i in range(1, n + 1):
        x(r, "XADD", key, f"{i}-0", "f", f"v{i}")
    x(r, "XGROUP", "CREATE", key, "g", "0")


def pending(r, key="s"):
    """(id, consumer, deliveries) per pending entry."""
    return [(p[0], p[1], p[3]) for p in x(r, "XPENDING", key, "g", "-", "+", "100")]


def age(r, key, ids, ms, consumer=b"c1"):
    """Makes `ids` look delivered `ms` ago (XCLAIM ... TIME, count unchanged)."""
    now = int(time.time() * 1000)
    for i in ids:
        x(r, "XCLAIM", key, "g", consumer, "0", i, "TIME", now - ms, "JUSTID")


def test_claim_idle_pending_before_new_entries(r):
    setup(r, 3)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "s", ">")
    age(r, "s", ["1-0", "2-0"], 500)
    got = x(r, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "100", "STREAMS", "s", ">")
    assert got[0][0] == b"s"
    es = got[0][1]
    assert [e[0] for e in es] == [b"1-0", b"2-0", b"3-0"]
    assert [e[1] for e in es] == [[b"f", b"v1"], [b"f", b"v2"], [b"f", b"v3"]]
    # Claimed: idle before the claim (an integer) and deliveries before it.
    assert all(isinstance(e[2], int) and 500 <= e[2] < 5000 for e in es[:2])
    assert [e[3] for e in es[:2]] == [1, 1]
    # New entries: 0 and 0.
    assert es[2][2:] == [0, 0]
    # All three now pending for c2; the claimed ones counted twice.
    assert pending(r) == [(b"1-0", b"c2", 2), (b"2-0", b"c2", 2), (b"3-0", b"c2", 1)]


def test_claim_reply_bytes_resp2_and_resp3(raw, r):
    setup(r, 2)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">")
    age(r, "s", ["1-0"], 1000)
    c = raw()
    rep = c.call("XREADGROUP", "GROUP", "g", "c1", "CLAIM", "500", "STREAMS", "s", ">")
    assert re.fullmatch(
        rb"\*1\r\n\*2\r\n\$1\r\ns\r\n\*2\r\n"
        rb"\*4\r\n\$3\r\n1-0\r\n\*2\r\n\$1\r\nf\r\n\$2\r\nv1\r\n:1\d\d\d\r\n:1\r\n"
        rb"\*4\r\n\$3\r\n2-0\r\n\*2\r\n\$1\r\nf\r\n\$2\r\nv2\r\n:0\r\n:0\r\n",
        rep,
    ), rep
    age(r, "s", ["1-0"], 1000)
    c.call("HELLO", "3")
    rep = c.call("XREADGROUP", "GROUP", "g", "c1", "CLAIM", "500", "STREAMS", "s", ">")
    assert re.fullmatch(
        rb"%1\r\n\$1\r\ns\r\n\*1\r\n\*4\r\n\$3\r\n1-0\r\n\*2\r\n\$1\r\nf\r\n\$2\r\nv1\r\n:1\d\d\d\r\n:2\r\n", rep
    ), rep
    # Nothing idle enough and nothing new: the null reply.
    assert c.call("XREADGROUP", "GROUP", "g", "c1", "CLAIM", "500", "STREAMS", "s", ">") == b"_\r\n"
    assert x(r, "XREADGROUP", "GROUP", "g", "c1", "CLAIM", "500", "STREAMS", "s", ">") is None


def test_claim_delivery_count_and_zero_min_idle(r):
    setup(r, 2)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">")
    # 0 claims everything pending at once, the reader's own entries too.
    es = x(r, "XREADGROUP", "GROUP", "g", "c1", "CLAIM", "0", "STREAMS", "s", ">")[0][1]
    assert [(e[0], e[3]) for e in es] == [(b"1-0", 1), (b"2-0", 0)]
    x(r, "XACK", "s", "g", "2-0")
    # Each claim reports the deliveries before it, whoever claims.
    for consumer, expected in (("c3", 2), ("c3", 3), ("c4", 4)):
        es = x(r, "XREADGROUP", "GROUP", "g", consumer, "CLAIM", "0", "STREAMS", "s", ">")[0][1]
        assert [(e[0], e[3]) for e in es] == [(b"1-0", expected)]
    assert pending(r) == [(b"1-0", b"c4", 5)]
    # The largest min-idle-time claims nothing.
    x(r, "XADD", "s", "3-0", "f", "v3")
    es = x(r, "XREADGROUP", "GROUP", "g", "c1", "CLAIM", str(2**63 - 1), "STREAMS", "s", ">")[0][1]
    assert [(e[0], e[2], e[3]) for e in es] == [(b"3-0", 0, 0)]


def test_claim_longest_idle_first_and_count(r):
    setup(r, 6)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    now = int(time.time() * 1000)
    for i, ago in zip(range(1, 7), (5000, 40000, 30000, 50000, 2000, 1000)):
        x(r, "XCLAIM", "s", "g", "c1", "0", f"{i}-0", "TIME", now - ago, "JUSTID")
    es = x(r, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "4000", "COUNT", "10", "STREAMS", "s", ">")[0][1]
    assert [e[0] for e in es] == [b"4-0", b"2-0", b"3-0", b"1-0"]
    # COUNT bounds claimed plus new; claimed come first.
    x(r, "XADD", "s", "7-0", "f", "v7")
    es = x(r, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "1500", "COUNT", "1", "STREAMS", "s", ">")[0][1]
    assert [e[0] for e in es] == [b"5-0"]
    es = x(r, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "500", "COUNT", "2", "STREAMS", "s", ">")[0][1]
    assert [(e[0], e[3]) for e in es] == [(b"6-0", 1), (b"7-0", 0)]


def test_claim_with_history_id_is_ignored(r):
    setup(r, 2)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    age(r, "s", ["1-0", "2-0"], 1000)
    got = x(r, "XREADGROUP", "GROUP", "g", "c1", "CLAIM", "10", "STREAMS", "s", "0")
    assert got == [[b"s", [[b"1-0", [b"f", b"v1"]], [b"2-0", [b"f", b"v2"]]]]]


def test_claim_noack_keeps_claimed_pending(r):
    setup(r, 2)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">")
    age(r, "s", ["1-0"], 1000)
    es = x(r, "XREADGROUP", "GROUP", "g", "c2", "NOACK", "CLAIM", "50", "STREAMS", "s", ">")[0][1]
    assert [e[0] for e in es] == [b"1-0", b"2-0"]
    # The claimed entry stays pending (now c2's); the new one never was.
    assert pending(r) == [(b"1-0", b"c2", 2)]


def test_claim_skips_deleted_entries_and_several_streams(r):
    setup(r, 2, "a")
    setup(r, 2, "b")
    x(r, "XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "a", "b", ">", ">")
    age(r, "a", ["1-0"], 1000)
    age(r, "b", ["1-0"], 1000)
    x(r, "XDEL", "b", "1-0")
    got = x(r, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "100", "STREAMS", "a", "b", ">", ">")
    assert [(k, [(e[0], e[3]) for e in es]) for k, es in got] == [
        (b"a", [(b"1-0", 1), (b"2-0", 0)]),
        (b"b", [(b"2-0", 0)]),
    ]


def test_claim_errors(r):
    setup(r, 2)
    for bad in ("test", "5.5", "10e", "+10", "-0", "-5.5", " 1", "", "99999999999999999999"):
        assert err(x, r, "XREADGROUP", "GROUP", "g", "c", "CLAIM", bad, "STREAMS", "s", ">") == NOT_INT, bad
    for neg in ("-1", "-42"):
        assert err(x, r, "XREADGROUP", "GROUP", "g", "c", "CLAIM", neg, "STREAMS", "s", ">") == NEGATIVE
    # The next word is taken as the value, whatever it is.
    assert err(x, r, "XREADGROUP", "GROUP", "g", "c", "CLAIM", "STREAMS", "s", ">") == NOT_INT
    assert err(x, r, "XREADGROUP", "CLAIM", "GROUP", "g", "c", "STREAMS", "s", ">") == NOT_INT
    assert err(x, r, "XREADGROUP", "GROUP", "g", "c", "CLAIM", "10", "CLAIM", "COUNT", "1", "STREAMS", "s", ">") == NOT_INT
    assert err(x, r, "XREADGROUP", "GROUP", "g", "CLAIM", "50", "c", "STREAMS", "s", ">") == "syntax error"
    assert err(x, r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">", "CLAIM").startswith("Unbalanced")
    # XREAD refuses the option, before looking at its value.
    assert err(x, r, "XREAD", "COUNT", "2", "CLAIM", "10", "STREAMS", "s", "0-0") == CLAIM_XREAD
    # A missing group is still NOGROUP.
    assert err(x, r, "XREADGROUP", "GROUP", "nog", "c", "CLAIM", "5", "STREAMS", "s", ">").startswith("NOGROUP")


def test_claim_option_anywhere_last_one_wins(r):
    setup(r, 2)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">")
    age(r, "s", ["1-0"], 1000)
    es = x(r, "XREADGROUP", "CLAIM", "50000", "GROUP", "g", "c1", "CLAIM", "50", "COUNT", "1", "STREAMS", "s", ">")[0][1]
    assert [(e[0], e[3]) for e in es] == [(b"1-0", 1)]


def test_blocked_claim_wakes_when_entry_becomes_claimable(r, new_client):
    setup(r, 1)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    other = new_client()
    t0 = time.monotonic()
    got = x(other, "XREADGROUP", "GROUP", "g", "c2", "BLOCK", "5000", "CLAIM", "400", "STREAMS", "s", ">")
    took = time.monotonic() - t0
    assert 0.3 <= took < 2.0, took
    assert [(e[0], e[3]) for e in got[0][1]] == [(b"1-0", 1)]
    assert pending(r) == [(b"1-0", b"c2", 2)]


def test_blocked_claim_times_out_before_claimable(r, new_client):
    setup(r, 1)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    t0 = time.monotonic()
    assert x(r, "XREADGROUP", "GROUP", "g", "c2", "BLOCK", "150", "CLAIM", "1000", "STREAMS", "s", ">") is None
    assert 0.1 <= time.monotonic() - t0 < 0.9
    assert pending(r) == [(b"1-0", b"c1", 1)]
    info = r.info("clients")
    assert info["blocked_clients"] == 0 and info["clients_in_timeout_table"] == 0


def test_blocked_claim_wakes_on_new_entry_first(r, new_client):
    setup(r, 1)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    other = new_client()
    out = {}
    t = threading.Thread(target=lambda: out.setdefault(
        "r", x(other, "XREADGROUP", "GROUP", "g", "c2", "BLOCK", "5000", "CLAIM", "3000", "STREAMS", "s", ">")))
    t.start()
    for _ in range(100):
        if r.info("clients")["blocked_clients"] == 1:
            break
        time.sleep(0.01)
    x(r, "XADD", "s", "2-0", "f", "v2")
    t.join(2)
    assert [(e[0], e[2], e[3]) for e in out["r"][0][1]] == [(b"2-0", 0, 0)]


def test_claim_in_multi_does_not_block(r):
    setup(r, 1)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    p = r.pipeline(transaction=True)
    p.execute_command(b"XREADGROUP", "GROUP", "g", "c2", "BLOCK", "0", "CLAIM", "1000", "STREAMS", "s", ">")
    p.execute_command(b"XREADGROUP", "GROUP", "g", "c2", "BLOCK", "0", "CLAIM", "0", "STREAMS", "s", ">")
    a, b = p.execute()
    assert a is None and [(e[0], e[3]) for e in b[0][1]] == [(b"1-0", 1)]


def test_group_reads_propagate_as_xclaim_and_setid(start_server):
    s = start_server("--appendonly", "yes", "--appendfsync", "always")
    r = redis.Redis(host="127.0.0.1", port=s.port)
    setup(r, 3)
    x(r, "XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">")
    x(r, "XREADGROUP", "GROUP", "g", "c2", "NOACK", "COUNT", "1", "STREAMS", "s", ">")
    x(r, "XREADGROUP", "GROUP", "g", "c3", "CLAIM", "0", "STREAMS", "s", ">")
    # A NOACK read that finds nothing (and times out) still created its consumer.
    assert x(r, "XREADGROUP", "GROUP", "g", "c9", "BLOCK", "10", "NOACK", "STREAMS", "s", ">") is None
    before = pending(r)
    info = x(r, "XINFO", "GROUPS", "s")
    (incr,) = glob.glob(os.path.join(s.workdir, "appendonlydir", "*.incr.aof"))
    with open(incr, "rb") as f:
        aof = f.read()
    assert b"XREADGROUP" not in aof
    # c1's read: one XCLAIM of 1-0 and the group's position.
    assert re.search(rb"\$6\r\nXCLAIM\r\n\$1\r\ns\r\n\$1\r\ng\r\n\$2\r\nc1\r\n\$1\r\n0\r\n\$3\r\n1-0\r\n\$4\r\nTIME\r\n\$13\r\n\d{13}\r\n"
                     rb"\$10\r\nRETRYCOUNT\r\n\$1\r\n1\r\n\$5\r\nFORCE\r\n\$6\r\nJUSTID\r\n\$6\r\nLASTID\r\n\$3\r\n1-0\r\n", aof)
    assert b"$6\r\nXGROUP\r\n$5\r\nSETID\r\n$1\r\ns\r\n$1\r\ng\r\n$3\r\n1-0\r\n$11\r\nENTRIESREAD\r\n$1\r\n1\r\n" in aof
    # The NOACK read: the consumer's creation and the position only.
    assert b"$6\r\nXGROUP\r\n$14\r\nCREATECONSUMER\r\n$1\r\ns\r\n$1\r\ng\r\n$2\r\nc2\r\n" in aof
    assert b"$3\r\n2-0\r\n$11\r\nENTRIESREAD\r\n$1\r\n2\r\n" in aof
    # The CLAIM read: 1-0 taken over (second delivery), 3-0 new.
    assert re.search(rb"\$2\r\nc3\r\n\$1\r\n0\r\n\$3\r\n1-0\r\n\$4\r\nTIME\r\n\$13\r\n\d{13}\r\n\$10\r\nRETRYCOUNT\r\n\$1\r\n2\r\n"
                     rb"\$5\r\nFORCE\r\n\$6\r\nJUSTID\r\n\$6\r\nLASTID\r\n\$3\r\n2-0\r\n", aof)
    assert re.search(rb"\$2\r\nc3\r\n\$1\r\n0\r\n\$3\r\n3-0\r\n.*?LASTID\r\n\$3\r\n3-0\r\n", aof, re.S)
    assert b"$6\r\nXGROUP\r\n$14\r\nCREATECONSUMER\r\n$1\r\ns\r\n$1\r\ng\r\n$2\r\nc9\r\n" in aof
    # A restart from the AOF rebuilds the same group.
    s.stop()
    s.start()
    r = redis.Redis(host="127.0.0.1", port=s.port)
    assert pending(r) == before
    assert x(r, "XINFO", "GROUPS", "s") == info
    assert [ci["name"] for ci in r.xinfo_consumers("s", "g")] == [b"c1", b"c2", b"c3", b"c9"]


def groups(r, key):
    return {g["name"]: (g["entries-read"], g["lag"]) for g in r.xinfo_groups(key)}


def test_entries_read_capped_at_entries_added(r):
    # Redis 8 caps a group's ENTRIESREAD at the stream's entries_added, so
    # the lag is never negative (Redis 7 answered entries-read 100, lag -99).
    r.xadd("s", {"f": "v"}, id="1-0")
    r.xgroup_create("s", "g", "$", entries_read=100)
    r.xgroup_create("s", "g0", "$", entries_read=0)
    assert groups(r, "s") == {b"g": (1, 0), b"g0": (0, 1)}
    r.xgroup_setid("s", "g", "1-0", entries_read=2)
    assert groups(r, "s")[b"g"] == (1, 0)
    # -1 (unknown) is kept as it is: the lag is then estimated from the ID.
    r.xgroup_setid("s", "g", "1-0", entries_read=-1)
    assert groups(r, "s")[b"g"] == (None, 0)
    r.xadd("s", {"f": "v"}, id="2-0")
    assert groups(r, "s")[b"g"] == (None, 1)
    r.xgroup_setid("s", "g0", "2-0", entries_read=5)
    full = r.xinfo_stream("s", full=True)
    assert full["entries-added"] == 2
    assert {g["name"]: g["entries-read"] for g in full["groups"]}[b"g0"] == 2
    assert groups(r, "s")[b"g0"] == (2, 0)
    msg = err(r.execute_command, "XGROUP", "CREATE", "s", "bad", "$", "ENTRIESREAD", "-3")
    assert msg == "value for ENTRIESREAD must be positive or -1"


def test_capped_group_behind_the_first_entry_counts_from_the_entry(r):
    # A counter set beyond what was added, on a group whose last ID lies
    # before the first entry: the lag is the stream's length, and reading
    # counts from the entry's own position, not from the capped counter.
    for i in (1, 2, 3):
        r.xadd("s", {"f": "v"}, id="%d-0" % i)
    r.xgroup_create("s", "g", "0", entries_read=1000)
    assert groups(r, "s") == {b"g": (3, 3)}
    r.xreadgroup("g", "c", {"s": ">"}, count=1)
    assert groups(r, "s") == {b"g": (1, 2)}
    r.xreadgroup("g", "c", {"s": ">"})
    assert groups(r, "s") == {b"g": (3, 0)}
    r.xgroup_setid("s", "g", "0", entries_read=7)
    assert groups(r, "s") == {b"g": (3, 3)}
    # A trim moves the first entry past the group's last ID.
    r.xgroup_setid("s", "g", "1-0", entries_read=1)
    r.xtrim("s", maxlen=1, approximate=False)
    r.xadd("s", {"f": "v"}, id="4-0")
    assert groups(r, "s") == {b"g": (1, 2)}
    r.xreadgroup("g", "c", {"s": ">"}, count=1)
    assert groups(r, "s") == {b"g": (3, 1)}
