"""The sorted-set operations (ZUNION/ZINTER/ZDIFF, their STORE forms and ZINTERCARD)
read their inputs in place and accumulate in a table keyed by member bytes. Their
results are compared with a real redis-server's over random inputs: sorted sets and
plain SETs (integer and string members, so both of the SET's forms), weights, the
three aggregates, infinite scores and absent keys. Scores are binary fractions, whose
shortest form is also the 17-digit one: Debian's Redis 7.0 formats doubles with %.17g,
where 7.2 and later (and densekv, which answers as 7.4) give the shortest round trip."""

import random

import pytest

from conftest import RawConn

OPS = ("ZUNION", "ZINTER", "ZDIFF")


def load(c, rng, nkeys):
    c.flushall()
    for i in range(nkeys):
        key = f"k{i}"
        n = rng.choice([0, 1, 3, 20, 150, 600])
        # Mostly a shared universe so that operations overlap; some long members.
        pool = [str(rng.randrange(800)) for _ in range(n)] + [f"member:{rng.randrange(300):05d}" for _ in range(n // 4)]
        if rng.random() < 0.25:
            if pool:
                c.sadd(key, *pool)
        else:
            scores = {}
            for m in pool:
                scores[m] = rng.choice([rng.randrange(-50, 50), rng.randrange(-8000, 8000) / 8, float("inf"), float("-inf"), 0.125])
            if scores:
                c.zadd(key, scores)


@pytest.mark.parametrize("seed", range(6))
def test_set_operations_match_redis(r, real_redis, server, seed):
    rng = random.Random(seed)
    nkeys = 12
    for c in (r, real_redis):
        load(c, random.Random(seed), nkeys)
    conns = [RawConn(server.port), RawConn(real_redis.connection_pool.connection_kwargs["port"])]

    def both(*args):
        got = [c.call(*args) for c in conns]
        assert got[0] == got[1], args
        return got[0]

    try:
        for _ in range(40):
            op = rng.choice(OPS)
            keys = [f"k{rng.randrange(nkeys + 2)}" for _ in range(rng.randint(1, 5))]  # k12, k13 absent
            args = [len(keys), *keys]
            if op != "ZDIFF":
                if rng.random() < 0.5:
                    args += ["WEIGHTS", *[rng.choice([1, 2, -1, 0, 0.5]) for _ in keys]]
                args += ["AGGREGATE", rng.choice(["SUM", "MIN", "MAX"])]
            both(op, *args, "WITHSCORES")
            both(op + "STORE", "dst", *args)
            both("ZRANGE", "dst", 0, -1, "WITHSCORES")
            both("OBJECT", "ENCODING", "dst")
            if op == "ZINTER":
                both("ZINTERCARD", len(keys), *keys, "LIMIT", rng.choice([0, 1, 5]))
    finally:
        for c in conns:
            c.close()


def test_wrongtype_is_reported_before_any_work(r):
    r.zadd("z", {"a": 1})
    r.set("s", "x")
    for op in ("ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"):
        with pytest.raises(Exception, match="WRONGTYPE"):
            r.execute_command(op, "dst", 2, "z", "s")
    assert not r.exists("dst")


def test_union_of_thousands_of_keys_sums_every_count(r):
    days = [str(20089 + d) for d in range(30)]
    expect = dict.fromkeys(days, 0)
    p = r.pipeline(transaction=False)
    for i in range(2000):
        counts = {d: (i * 7 + j) % 11 + 1 for j, d in enumerate(days)}
        for d, c in counts.items():
            expect[d] += c
        p.zadd(f"user:{i}", counts)
    p.execute()
    keys = [f"user:{i}" for i in range(2000)]
    assert r.zunionstore("out", keys) == len(days)
    assert dict((m.decode(), s) for m, s in r.zrange("out", 0, -1, withscores=True)) == {d: float(v) for d, v in expect.items()}
    assert r.zinterstore("both", keys, aggregate="MIN") == len(days)
