"""Replication between densekv and Debian's redis-server 7.0 under a write load: after
the full sync, 100,000 writes of every type stream to the replica and a per-key
comparison (type, value, whether it has a TTL) finds no difference; then the link is
cut for a few seconds while writes go on, and it resumes with a partial sync, as the
primary's INFO shows.

Each test starts its own servers on free loopback ports and stops them by pid.
"""

from __future__ import annotations

import random
import shutil
import time

import pytest
import redis

from conftest import server_binary
from test_replication import client, contents, link_up, offsets_equal, populate, wait_for

REDIS_SERVER = shutil.which("redis-server")
WRITES = 100_000

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not installed")


def mixed_writes(r: redis.Redis, n: int, seed: int) -> None:
    """n writes over a few thousand keys of every type, pipelined 1,000 at a time."""
    rng = random.Random(seed)
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        k = rng.randrange(2000)
        op = rng.randrange(20)
        if op == 0:
            pipe.set(f"s:{k}", f"v{i}")
        elif op == 1:
            pipe.append(f"s:{k}", "x")
        elif op == 2:
            pipe.incrby(f"n:{k}", rng.randrange(-5, 100))
        elif op == 3:
            pipe.execute_command("SETEX", f"t:{k}", 1000 + rng.randrange(1000), i)
        elif op == 4:
            pipe.rpush(f"l:{k % 300}", *[f"e{i}-{j}" for j in range(rng.randrange(1, 4))])
        elif op == 5:
            pipe.lpop(f"l:{k % 300}")
        elif op == 6:
            pipe.ltrim(f"l:{k % 300}", 0, 200)
        elif op == 7:
            pipe.hset(f"h:{k % 400}", f"f{rng.randrange(300)}", i)
        elif op == 8:
            pipe.hdel(f"h:{k % 400}", f"f{rng.randrange(300)}")
        elif op == 9:
            pipe.hincrby(f"h:{k % 400}", "ctr", 1)
        elif op == 10:
            pipe.sadd(f"set:{k % 400}", rng.randrange(1000) if k % 2 else f"m{rng.randrange(1000)}")
        elif op == 11:
            pipe.srem(f"set:{k % 400}", f"m{rng.randrange(1000)}")
        elif op == 12:
            pipe.zadd(f"z:{k % 400}", {f"m{rng.randrange(500)}": rng.randrange(-1000, 1000) / 4})
        elif op == 13:
            pipe.zincrby(f"z:{k % 400}", 1.5, f"m{rng.randrange(500)}")
        elif op == 14:
            pipe.zrem(f"z:{k % 400}", f"m{rng.randrange(500)}")
        elif op == 15:
            pipe.xadd(f"x:{k % 50}", {"i": i, "k": k}, maxlen=500, approximate=False)
        elif op == 16:
            pipe.pfadd(f"hll:{k % 50}", f"e{rng.randrange(100000)}")
        elif op == 17:
            pipe.expire(f"s:{k}", 5000)
        elif op == 18:
            pipe.delete(f"s:{k}", f"n:{k}")
        else:
            pipe.persist(f"t:{k}")
        if len(pipe) >= 1000:
            pipe.execute(raise_on_error=False)
    pipe.execute(raise_on_error=False)


def check_under_load(primary: Server, replica: Server) -> None:
    pr = client(primary)
    populate(pr, "a")
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="full sync")
    wait_for(lambda: offsets_equal(primary, replica), what="offsets after sync")
    assert contents(replica) == contents(primary)

    mixed_writes(pr, WRITES, seed=1)
    wait_for(lambda: offsets_equal(primary, replica), timeout=60, what="offsets after the writes")
    want = contents(primary)
    assert len(want) > 2000
    assert contents(replica) == want

    # Cut the link for a few seconds while writes go on: a partial sync resumes it.
    before = pr.info("stats")["sync_partial_ok"]
    full_before = pr.info("stats")["sync_full"]
    client(replica).client_kill_filter(_type="master")
    deadline = time.monotonic() + 3
    seed = 2
    while time.monotonic() < deadline:
        mixed_writes(pr, 2000, seed=seed)
        seed += 1
    wait_for(lambda: link_up(replica), what="link back")
    wait_for(lambda: offsets_equal(primary, replica), timeout=60, what="offsets after resume")
    stats = pr.info("stats")
    assert stats["sync_partial_ok"] >= before + 1
    assert stats["sync_full"] == full_before
    assert contents(replica) == contents(primary)


@pytest.mark.timeout(240)
def test_densekv_follows_redis_under_load(servers):
    primary = servers(REDIS_SERVER, "--repl-backlog-size", "64mb")
    check_under_load(primary, servers(server_binary()))


@pytest.mark.timeout(240)
def test_redis_follows_densekv_under_load(servers):
    primary = servers(server_binary(), "--repl-backlog-size", "64mb")
    check_under_load(primary, servers(REDIS_SERVER))
