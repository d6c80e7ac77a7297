"""I/O threads (io-threads N > 1): INFO and CLIENT LIST show them, and a stress run.

The stress run drives 1,000 connections at once at io-threads 4: writers sending
pipelined batches, blocking poppers, Pub/Sub subscribers, and clients that disconnect
in the middle of a request. Every reply each connection gets is checked in order (a
per-connection counter, a per-connection list, FIFO queues with one producer, each
publisher's messages in order), no client is left behind once they all closed, and the
dataset (DEBUG DIGEST) equals the one the same command stream leaves at io-threads 1.
STRESS_ROUNDS scales it (rounds per writer; default sized to about a minute for the
file on a 2-core machine).
"""

from __future__ import annotations

import asyncio
import os
import resource
import time

import pytest
import redis

from conftest import RawConn

HOST = "127.0.0.1"
ROUNDS = int(os.environ.get("STRESS_ROUNDS", "200"))
WRITERS, POPPERS, SUBSCRIBERS, QUITTERS = 600, 100, 150, 150
CHANNELS = 30
# Writers with i % 5 == 0 publish, to channel (i // 5) % CHANNELS.
PUBLISHERS_PER_CHANNEL = (WRITERS // 5) // CHANNELS


def wait_for(pred, timeout=10.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_info_and_client_list_show_the_threads(start_server):
    s = start_server("--io-threads", "3")
    r = redis.Redis(host=s.host, port=s.port)
    others = [redis.Redis(host=s.host, port=s.port) for _ in range(4)]
    for o in others:
        o.ping()
    assert r.info("server")["io_threads_active"] == 1
    threads = r.info("threads")
    # io_thread_0 is the executor; two I/O threads share the five clients.
    assert sorted(threads) == ["io_thread_0", "io_thread_1", "io_thread_2"]
    assert sum(threads[f"io_thread_{i}"]["clients"] for i in (1, 2)) == 5
    assert {threads[f"io_thread_{i}"]["clients"] for i in (1, 2)} == {2, 3}
    assert threads["io_thread_0"]["clients"] == 0
    assert {c["io-thread"] for c in r.client_list()} == {"1", "2"}
    # Fixed at start, as in Redis.
    with pytest.raises(redis.ResponseError, match="immutable"):
        r.config_set("io-threads", "2")
    assert r.config_get("io-threads") == {"io-threads": "3"}
    for o in others:
        o.close()
    wait_for(lambda: r.info("clients")["connected_clients"] == 1, what="clients closed")
    threads = r.info("threads")
    assert sum(threads[f"io_thread_{i}"]["clients"] for i in (1, 2)) == 1


def test_io_threads_1_has_none(start_server):
    s = start_server("--io-threads", "1", "--io-threads-do-reads", "yes")
    r = redis.Redis(host=s.host, port=s.port)
    assert r.info("server")["io_threads_active"] == 0
    assert list(r.info("threads")) == ["io_thread_0"]
    assert {c["io-thread"] for c in r.client_list()} == {"0"}


def test_large_values_and_slow_reader_on_io_threads(start_server):
    """A reply far larger than the socket buffer, to a client that reads it
    slowly, arrives whole; a 20 MB argument is taken whole."""
    s = start_server("--io-threads", "2")
    r = redis.Redis(host=s.host, port=s.port)
    big = os.urandom(20 << 20)
    r.set("big", big)
    assert r.strlen("big") == len(big)
    c = redis.Redis(host=s.host, port=s.port)
    assert c.get("big") == big
    p = c.pipeline(transaction=False)
    for _ in range(5):
        p.get("big")
    assert all(v == big for v in p.execute())


async def _reply(reader: asyncio.StreamReader):
    line = await reader.readline()
    if not line:
        raise ConnectionError("closed")
    t, rest = line[:1], line[1:-2]
    if t in (b"+", b"-"):
        return rest if t == b"+" else RuntimeError(rest.decode())
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = await reader.readexactly(n + 2)
        return data[:-2]
    if t == b"*":
        n = int(rest)
        if n < 0:
            return None
        return [await _reply(reader) for _ in range(n)]
    raise AssertionError(f"unexpected reply {line!r}")


_cmd = RawConn.encode


async def _writer(port: int, i: int, rounds: int, start: asyncio.Event):
    reader, writer = await asyncio.open_connection(HOST, port)
    await start.wait()
    for rnd in range(rounds):
        batch = [_cmd("INCR", f"w:{i}:n"), _cmd("RPUSH", f"w:{i}:l", f"v{rnd}"), _cmd("INCRBY", f"shared:{rnd % 10}", 1),
                 _cmd("SADD", "shared:set", f"m{i}:{rnd}"), _cmd("HSET", f"w:{i}:h", f"f{rnd % 7}", rnd)]
        if i < POPPERS:
            batch.append(_cmd("RPUSH", f"q:{i}", f"item{rnd}"))
        if i % 5 == 0:
            batch.append(_cmd("PUBLISH", f"ch:{(i // 5) % CHANNELS}", f"{i}:{rnd}"))
        writer.write(b"".join(batch))
        await writer.drain()
        got = [await _reply(reader) for _ in batch]
        assert got[0] == rnd + 1, (i, rnd, got)
        assert got[1] == rnd + 1, (i, rnd, got)
        assert isinstance(got[2], int) and got[3] == 1, (i, rnd, got)
        assert got[4] in (0, 1), (i, rnd, got)
        if i < POPPERS:
            assert isinstance(got[5], int)
    writer.close()
    await writer.wait_closed()


async def _popper(port: int, j: int, rounds: int, start: asyncio.Event):
    reader, writer = await asyncio.open_connection(HOST, port)
    await start.wait()
    for rnd in range(rounds):
        writer.write(_cmd("BLPOP", f"q:{j}", 30))
        got = await _reply(reader)
        assert got == [f"q:{j}".encode(), f"item{rnd}".encode()], (j, rnd, got)
    writer.close()
    await writer.wait_closed()


async def _subscriber(port: int, k: int, rounds: int, ready: list):
    reader, writer = await asyncio.open_connection(HOST, port)
    ch = f"ch:{k % CHANNELS}"
    writer.write(_cmd("SUBSCRIBE", ch))
    assert await _reply(reader) == [b"subscribe", ch.encode(), 1]
    ready.append(k)
    last: dict[int, int] = {}
    for _ in range(rounds * PUBLISHERS_PER_CHANNEL):
        msg = await _reply(reader)
        assert msg[:2] == [b"message", ch.encode()], msg
        pub, rnd = (int(x) for x in msg[2].split(b":"))
        # Each publisher's messages arrive all, in order.
        assert rnd == last.get(pub, -1) + 1, (k, pub, rnd, last.get(pub))
        last[pub] = rnd
    assert len(last) == PUBLISHERS_PER_CHANNEL and all(v == rounds - 1 for v in last.values())
    writer.close()
    await writer.wait_closed()


async def _quitter(port: int, q: int, rounds: int, start: asyncio.Event):
    await start.wait()
    for rnd in range(max(1, rounds // 6)):
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(_cmd("SET", f"d:{q}:{rnd}", "x"))
        assert await _reply(reader) == b"OK"
        # Half a request, then gone: it must never run.
        writer.write(_cmd("SET", f"never:{q}", "y")[:-5])
        await writer.drain()
        writer.close()
        await writer.wait_closed()


async def _run(port: int, rounds: int):
    start = asyncio.Event()
    ready: list = []
    subs = [asyncio.create_task(_subscriber(port, k, rounds, ready)) for k in range(SUBSCRIBERS)]
    while len(ready) < SUBSCRIBERS:
        await asyncio.sleep(0.05)
        for t in subs:
            if t.done() and t.exception():
                raise t.exception()
    tasks = [asyncio.create_task(_writer(port, i, rounds, start)) for i in range(WRITERS)]
    tasks += [asyncio.create_task(_popper(port, j, rounds, start)) for j in range(POPPERS)]
    tasks += [asyncio.create_task(_quitter(port, q, rounds, start)) for q in range(QUITTERS)]
    await asyncio.sleep(0.5)
    start.set()
    await asyncio.wait_for(asyncio.gather(*tasks, *subs), timeout=300)


def _stress(port: int, rounds: int) -> tuple[bytes, int]:
    asyncio.run(_run(port, rounds))
    r = redis.Redis(host=HOST, port=port)
    # No client left behind: only this one.
    wait_for(lambda: r.info("clients")["connected_clients"] == 1, timeout=15, what="every stress client closed")
    threads = r.info("threads")
    assert sum(v["clients"] for v in threads.values()) == 1, threads
    assert r.keys("never:*") == []
    return r.execute_command("DEBUG", "DIGEST"), r.dbsize()


def test_stress_thousand_clients_io_threads_4_against_1(start_server):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 2200:
        pytest.skip("not enough file descriptors for 1,000 clients")
    four = start_server("--io-threads", "4", "--save", "")
    one = start_server("--io-threads", "1", "--save", "")
    t0 = time.monotonic()
    digest4, keys4 = _stress(four.port, ROUNDS)
    t4 = time.monotonic() - t0
    digest1, keys1 = _stress(one.port, ROUNDS)
    assert keys4 == keys1 > WRITERS
    assert digest4 == digest1
    print(f"stress: {ROUNDS} rounds, io-threads 4 {t4:.1f}s, then io-threads 1 {time.monotonic() - t0 - t4:.1f}s")
