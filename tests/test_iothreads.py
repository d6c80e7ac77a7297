"""I/O threads (io-threads N > 1): INFO and CLIENT LIST show them, CONFIG SET changes
their number at run time (clients move onto the live threads, retiring threads give
theirs back, a blocked client, a subscriber and a TLS client included), and a stress run.

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
import shutil
import socket
import time

import pytest
import redis

from conftest import RawConn
from test_tls import certs  # noqa: F401 (the fixture that makes certificates)

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
    # Changed at run time, as Valkey 9 allows: CONFIG GET says so at once,
    # the last thread retires and its clients move to the one left.
    assert r.config_set("io-threads", "2") is True
    assert r.config_get("io-threads") == {"io-threads": "2"}
    wait_for(lambda: sorted(r.info("threads")) == ["io_thread_0", "io_thread_1"], what="io_thread_2 ended")
    wait_for(lambda: r.info("threads")["io_thread_1"]["clients"] == 5, what="every client on io_thread_1")
    assert {c["io-thread"] for c in r.client_list()} == {"1"}
    assert r.info("server")["io_threads_active"] == 1
    # Still within 1..128.
    for bad in ("0", "129"):
        with pytest.raises(redis.ResponseError, match="io-threads"):
            r.config_set("io-threads", bad)
    assert r.config_get("io-threads") == {"io-threads": "2"}
    for o in others:
        o.close()
    wait_for(lambda: r.info("clients")["connected_clients"] == 1, what="clients closed")
    threads = r.info("threads")
    assert sum(v["clients"] for k, v in threads.items() if k != "io_thread_0") == 1


def _thread_clients(r: redis.Redis) -> dict[str, int]:
    return {k: v["clients"] for k, v in r.info("threads").items()}


def _check_replies(clients: list[RawConn], tag: str) -> None:
    """Pipelined SETs and GETs on every client, distinct keys per client; every
    reply checked, in order."""
    for i, c in enumerate(clients):
        reqs, want = [], []
        for j in range(20):
            v = f"v{i}.{j}".encode()
            reqs += [RawConn.encode("SET", f"{tag}:{i}:{j}", v), RawConn.encode("GET", f"{tag}:{i}:{j}")]
            want += [b"+OK\r\n", b"$%d\r\n%s\r\n" % (len(v), v)]
        reqs.append(RawConn.encode("GET", f"{tag}:{i}:missing"))
        want.append(b"$-1\r\n")
        c.send(b"".join(reqs))
        assert [c.read_reply() for _ in want] == want, (tag, i)


def test_threads_that_end_leave_nothing_in_used_memory(start_server):
    """Threads started and ended by CONFIG SET io-threads give back every byte they
    counted: used_memory after 20 more rounds of 1 -> 3 -> 1 is what it was after
    the first few (each ended thread had left 75 bytes: what std frees after the
    thread's last report, now reported from its exit)."""
    s = start_server("--io-threads", "1")
    r = redis.Redis(host=s.host, port=s.port, single_connection_client=True)

    def cycle():
        r.config_set("io-threads", "3")
        wait_for(lambda: len(r.info("threads")) == 3, what="two I/O threads")
        r.config_set("io-threads", "1")
        wait_for(lambda: len(r.info("threads")) == 1, what="the threads ended")

    for _ in range(5):
        cycle()
    # Once to give this client's reply buffer the room INFO memory takes.
    r.info("memory")
    before = r.info("memory")["used_memory"]
    for _ in range(20):
        cycle()
    after = r.info("memory")["used_memory"]
    # 40 threads ended: at 75 bytes each the old build drifted by 3,000.
    assert after == before, (before, after)


def test_a_pool_moves_to_new_threads_and_back(start_server):
    """io-threads 1 -> 3 -> 2 -> 1 under a pool of idle connections: each change
    moves every client (the one that sent CONFIG SET too, once its command ended)
    to the live threads, and replies stay right throughout."""
    s = start_server("--io-threads", "1")
    r = redis.Redis(host=s.host, port=s.port, single_connection_client=True)
    pool = [RawConn(s.port) for _ in range(8)]
    _check_replies(pool, "one")
    assert _thread_clients(r) == {"io_thread_0": 9}

    assert r.config_set("io-threads", "3") is True
    assert r.config_get("io-threads") == {"io-threads": "3"}
    assert r.info("server")["io_threads_active"] == 1

    def spread():
        t = _thread_clients(r)
        return sorted(t) == ["io_thread_0", "io_thread_1", "io_thread_2"] and t["io_thread_0"] == 0 \
            and t["io_thread_1"] + t["io_thread_2"] == 9

    wait_for(spread, what="all 9 clients on io_thread_1 and io_thread_2")
    t = _thread_clients(r)
    assert {t["io_thread_1"], t["io_thread_2"]} == {4, 5}, t
    listed = r.client_list()
    assert len(listed) == 9 and {c["io-thread"] for c in listed} == {"1", "2"}
    _check_replies(pool, "three")
    reads = r.info("stats")["io_threaded_reads_processed"]
    assert reads > 0

    assert r.config_set("io-threads", "2") is True
    assert r.config_get("io-threads") == {"io-threads": "2"}
    wait_for(lambda: _thread_clients(r) == {"io_thread_0": 0, "io_thread_1": 9}, what="io_thread_2 ended, all on 1")
    assert {c["io-thread"] for c in r.client_list()} == {"1"}
    _check_replies(pool, "two")
    assert r.info("stats")["io_threaded_reads_processed"] >= reads
    reads = r.info("stats")["io_threaded_reads_processed"]

    assert r.config_set("io-threads", "1") is True
    assert r.config_get("io-threads") == {"io-threads": "1"}
    assert r.info("server")["io_threads_active"] == 0
    wait_for(lambda: _thread_clients(r) == {"io_thread_0": 9}, what="every thread ended")
    assert {c["io-thread"] for c in r.client_list()} == {"0"}
    _check_replies(pool, "back")
    stats = r.info("stats")
    # Threads that ended still count.
    assert stats["io_threaded_reads_processed"] >= reads
    assert stats["io_threaded_writes_processed"] > 0
    assert r.info("clients")["connected_clients"] == 9


def test_io_threads_are_runtime_modifiable(start_server):
    """100 random changes of io-threads (1..5) while four connections keep
    sending pipelined INCRs: every reply comes in order, nothing is lost, and
    the threads end up as configured."""
    import random
    import threading

    s = start_server("--io-threads", "2", "--hz", "100")
    r = redis.Redis(host=s.host, port=s.port, single_connection_client=True)
    stop = threading.Event()
    counts = [0] * 4
    errors: list = []

    def incr(i: int) -> None:
        try:
            c = RawConn(s.port, timeout=10)
            while not stop.is_set():
                c.send(b"".join(RawConn.encode("INCR", f"rt:{i}") for _ in range(10)))
                for _ in range(10):
                    counts[i] += 1
                    got = c.read_reply()
                    assert got == b":%d\r\n" % counts[i], (i, counts[i], got)
            c.close()
        except Exception as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)

    workers = [threading.Thread(target=incr, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    rng = random.Random(9)
    try:
        for k in range(100):
            # The last change leaves I/O threads, so that the busy
            # connections are seen to move onto them below.
            n = rng.randint(2 if k == 99 else 1, 5)
            assert r.config_set("io-threads", str(n)) is True
            time.sleep(rng.random() * 0.03)
        # Nobody was dropped on the way, and while they go on, every
        # connection settles on the threads now configured.
        assert r.info("clients")["connected_clients"] == 5
        want = [f"io_thread_{i}" for i in range(n)]
        allowed = {str(i) for i in range(1, n)} or {"0"}
        wait_for(lambda: sorted(r.info("threads")) == want, what=f"exactly {n - 1} I/O threads")
        wait_for(lambda: {c["io-thread"] for c in r.client_list()} <= allowed, what=f"every client on {allowed}")
        time.sleep(0.2)
    finally:
        stop.set()
        for w in workers:
            w.join(30)
    assert not errors, errors
    assert all(not w.is_alive() for w in workers)
    assert all(x > 0 for x in counts)
    assert [int(r.get(f"rt:{i}")) for i in range(4)] == counts
    assert r.config_get("io-threads") == {"io-threads": str(n)}
    wait_for(lambda: r.info("clients")["connected_clients"] == 1, what="the workers closed")
    assert sorted(r.info("threads")) == want
    assert r.info("server")["io_threads_active"] == int(n > 1)
    assert r.ping() is True


def _on_thread(r: redis.Redis, cid: int) -> str:
    return next(c["io-thread"] for c in r.client_list() if int(c["id"]) == cid)


def test_a_blocked_client_and_a_subscriber_on_a_retiring_thread(start_server):
    """A client blocked in BLPOP and a Pub/Sub subscriber on the thread that
    retires: the first stays blocked and gets its element when it comes, the
    second keeps getting what is published."""
    s = start_server("--io-threads", "3")
    r = redis.Redis(host=s.host, port=s.port, single_connection_client=True)
    # New clients alternate between the two threads: some land on io_thread_2.
    conns = [RawConn(s.port) for _ in range(8)]
    ids = [int(c.call("CLIENT", "ID")[1:-2]) for c in conns]
    threads = {int(c["id"]): c["io-thread"] for c in r.client_list()}
    on2 = [c for c, i in zip(conns, ids) if threads[i] == "2"]
    assert len(on2) >= 2, r.client_list()
    blocker, sub = on2[:2]
    blocker_id = ids[conns.index(blocker)]
    sub_id = ids[conns.index(sub)]
    blocker.cmd("BLPOP", "q", "0")
    assert sub.call("SUBSCRIBE", "ch") == b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    wait_for(lambda: r.info("clients")["blocked_clients"] == 1, what="BLPOP blocked")

    assert r.config_set("io-threads", "2") is True
    wait_for(lambda: sorted(r.info("threads")) == ["io_thread_0", "io_thread_1"], what="io_thread_2 ended")
    # The subscriber moved on to the thread left; the blocked client waits on
    # the executor's loop until it is served.
    wait_for(lambda: _on_thread(r, sub_id) == "1", what="the subscriber on io_thread_1")
    blocked = next(c for c in r.client_list() if int(c["id"]) == blocker_id)
    assert "b" in blocked["flags"] and blocked["io-thread"] == "0"
    assert r.info("clients")["blocked_clients"] == 1
    for k in range(3):
        assert r.publish("ch", f"m{k}") == 1
        assert sub.read_reply() == b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm%d\r\n" % k
    time.sleep(0.2)
    assert r.rpush("q", "x") == 1
    assert blocker.read_reply() == b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n"
    # Served, it is quiet: it moves on too, and still answers.
    wait_for(lambda: _on_thread(r, blocker_id) == "1", what="the served client on io_thread_1")
    assert blocker.call("PING") == b"+PONG\r\n"
    assert r.publish("ch", "last") == 1
    assert sub.read_reply() == b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nlast\r\n"
    for c in conns:
        c.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_a_tls_client_across_grow_and_shrink(start_server, certs):
    """A tls-port client: its TLS session moves with its socket, to a thread and
    back to the executor."""
    from conftest import free_port
    from test_tls import tls_args, tls_client

    port = free_port()
    s = start_server("--io-threads", "1", *tls_args(certs, port))
    r = redis.Redis(host=s.host, port=s.port, single_connection_client=True)
    t = tls_client(certs, port)
    assert t.ping() is True
    cid = t.client_id()
    for n, thread in (("3", {"1", "2"}), ("1", {"0"}), ("2", {"1"})):
        assert r.config_set("io-threads", n) is True
        wait_for(lambda: _on_thread(r, cid) in thread, what=f"the TLS client on {thread}")
        assert t.client_id() == cid
        p = t.pipeline(transaction=False)
        for j in range(50):
            p.set(f"tls:{n}:{j}", "x" * j)
            p.get(f"tls:{n}:{j}")
        got = p.execute()
        assert got[1::2] == [b"x" * j for j in range(50)]
        big = os.urandom(1 << 20)
        assert t.set("big", big) is True and t.get("big") == big
    wait_for(lambda: sorted(r.info("threads")) == ["io_thread_0", "io_thread_1"], what="one I/O thread")
    t.close()


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


def test_parsed_requests_behind_a_blocked_client_count_in_its_memory(start_server):
    """Requests an I/O thread parsed for a client blocked in BLPOP wait as bytes in
    its query buffer and as the thread's parsed arguments: CLIENT LIST's tot-mem
    counts both (the parsed copies were missing from it, so client eviction and
    maxmemory-clients saw half of such a client)."""
    s = start_server("--io-threads", "2")
    r = redis.Redis(host=s.host, port=s.port)
    a = RawConn(s.port)
    a.cmd("CLIENT", "SETNAME", "blocked")
    assert a.read_reply() == b"+OK\r\n"
    a.cmd("BLPOP", "nothing", "0")
    wait_for(lambda: r.info("clients")["blocked_clients"] == 1, what="BLPOP blocks")
    value = b"v" * 1000
    behind = b"".join(RawConn.encode("SET", f"k{i}", value) for i in range(200))
    a.send(behind)

    def entry():
        return next(c for c in r.client_list() if c["name"] == "blocked")

    # The thread reads until the executor asks it to stop (the client cannot
    # run them): wait until the query buffer stops growing.
    seen = []

    def settled():
        seen.append(int(entry()["qbuf"]))
        time.sleep(0.1)
        return len(seen) > 2 and seen[-1] == seen[-3] and seen[-1] >= 16 * 1024

    wait_for(settled, what="the query buffer settled")
    e = entry()
    qbuf, mem = int(e["qbuf"]), int(e["tot-mem"])
    # The bytes once in the query buffer, once more as parsed arguments (all
    # but the last request, which may be unfinished).
    assert mem >= 2 * qbuf - 2 * len(value), (mem, qbuf)
    # Once they ran, the client holds neither.
    r.rpush("nothing", "x")
    assert a.read_reply() == b"*2\r\n$7\r\nnothing\r\n$1\r\nx\r\n"
    for _ in range(200):
        assert a.read_reply() == b"+OK\r\n"
    assert int(entry()["tot-mem"]) < len(behind) // 4


def test_replies_a_thread_holds_weigh_what_they_hold(start_server):
    """A Pub/Sub client that does not read leaves its messages with its I/O
    thread; what the client weighs (CLIENT LIST tot-mem, what client eviction
    counts) grows by the memory those replies hold, not by their bytes alone:
    the thread's buffers are allocated in size classes and a buffer half
    written still holds all of it."""
    s = start_server("--io-threads", "2")
    r = redis.Redis(host=s.host, port=s.port)
    subs = []
    for _ in range(10):
        sock = socket.socket()
        # A small window, so that the messages stay with the server.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((s.host, s.port))
        sock.sendall(_cmd("SUBSCRIBE", "ch"))
        subs.append(sock)
    wait_for(lambda: r.pubsub_numsub("ch")[0][1] == 10, what="subscribers")

    def weighed() -> tuple[int, int]:
        return r.info("memory")["used_memory"], sum(int(c["tot-mem"]) for c in r.client_list() if c["cmd"] == "subscribe")

    used0, subs0 = weighed()
    for _ in range(30):
        r.publish("ch", b"x" * 100_000)
    time.sleep(0.5)
    used1, subs1 = weighed()
    pending = sum(int(c["omem"]) for c in r.client_list() if c["cmd"] == "subscribe")
    assert pending > 10 * 100_000
    grew = used1 - used0
    assert 0.95 * grew <= subs1 - subs0 <= 1.05 * grew, (grew, subs1 - subs0)
    for sock in subs:
        sock.close()
