"""The primary's one replication buffer: the stream is kept once, the backlog
and every replica read it from their own positions (Redis 7's shared
replication buffer).

Replicas waiting for the same image do not double its memory; a replica that
holds old data makes repl_backlog_histlen grow past repl-backlog-size, and a
reconnecting replica may continue from there (+CONTINUE); the memory goes
when the slow replica is cut off by its output-buffer limit; a hard limit
below repl-backlog-size counts as that size.
"""

from __future__ import annotations

import os
import signal

import redis

from conftest import Server, free_port, server_binary
from test_replication import client, link_up, log_text, offsets_equal, wait_for

MB = 1024 * 1024


def write_mb(r: redis.Redis, prefix: str, mb: int = 1) -> None:
    """`mb` MiB of values, 1 KiB each, pipelined."""
    p = r.pipeline(transaction=False)
    for i in range(1024 * mb):
        p.set(f"{prefix}:{i}", b"v" * 1024)
    p.execute()


def info(s: Server, section: str) -> dict:
    return client(s).info(section)


def wait_bgsave_replicas(primary: Server, n: int) -> None:
    def ready():
        rep = info(primary, "replication")
        states = [rep[k]["state"] for k in rep if k.startswith("slave") and isinstance(rep[k], dict)]
        return info(primary, "persistence")["rdb_bgsave_in_progress"] == 1 and states.count("wait_bgsave") == n

    wait_for(ready, what=f"{n} replicas waiting for the image")


def slow_save_primary(servers, *args: str) -> tuple[Server, redis.Redis]:
    """A primary whose full-sync images take minutes (a second per key)."""
    primary = servers(server_binary(), "--repl-backlog-size", "16384", "--repl-diskless-sync", "no", *args)
    pr = client(primary)
    pr.config_set("client-output-buffer-limit", "replica 0 0 0")
    for i in range(60):
        pr.set(f"seed{i}", i)
    return primary, pr


def test_replicas_waiting_for_one_image_share_one_buffer(servers):
    primary, pr = slow_save_primary(servers)
    r1, r2 = servers(server_binary()), servers(server_binary())
    pr.config_set("rdb-key-save-delay", 1000000)
    client(r1).replicaof(primary.host, primary.port)
    wait_bgsave_replicas(primary, 1)
    client(r2).replicaof(primary.host, primary.port)
    wait_bgsave_replicas(primary, 2)
    write_mb(pr, "k")
    mem = info(primary, "memory")
    # One copy of the MiB of stream (and its encoding), not one per replica.
    assert MB < mem["mem_total_replication_buffers"] < 1.5 * MB
    assert mem["mem_replication_backlog"] == 16384
    assert info(primary, "replication")["repl_backlog_histlen"] > MB
    total = mem["mem_total_replication_buffers"]
    # The other replica still needs it all.
    client(r1).shutdown(nosave=True)
    wait_for(lambda: info(primary, "replication")["connected_slaves"] == 1, what="r1 gone")
    assert info(primary, "memory")["mem_total_replication_buffers"] == total
    # Nobody needs it: only the backlog's size (in 16 KiB blocks) stays.
    client(r2).shutdown(nosave=True)
    wait_for(lambda: info(primary, "replication")["connected_slaves"] == 0, what="r2 gone")
    assert info(primary, "memory")["mem_total_replication_buffers"] <= 2 * 16384
    assert 16384 <= info(primary, "replication")["repl_backlog_histlen"] < 2 * 16384


def test_a_slow_replica_grows_the_backlog_for_a_partial_resync_then_is_cut(servers):
    primary, pr = slow_save_primary(servers)
    fast, slow = servers(server_binary()), servers(server_binary())
    client(fast).replicaof(primary.host, primary.port)
    wait_for(lambda: offsets_equal(primary, fast), what="fast replica synced")
    pr.config_set("rdb-key-save-delay", 1000000)
    client(slow).replicaof(primary.host, primary.port)
    wait_bgsave_replicas(primary, 1)

    # Writes in database 9: the continued stream carries no SELECT.
    pr9 = client(primary, db=9)
    write_mb(pr9, "a")
    assert info(primary, "replication")["repl_backlog_histlen"] > MB
    wait_for(lambda: offsets_equal(primary, fast), what="fast replica caught up")

    # The fast replica leaves; more than repl-backlog-size is written; it
    # comes back and continues from the buffer the slow one holds.
    client(fast).replicaof("127.0.0.1", free_port())
    wait_for(lambda: info(primary, "replication")["connected_slaves"] == 1, what="fast replica gone")
    write_mb(pr9, "b")
    client(fast).replicaof(primary.host, primary.port)
    wait_for(lambda: offsets_equal(primary, fast), timeout=30, what="fast replica back")
    stats = info(primary, "stats")
    assert stats["sync_partial_ok"] == 1 and stats["sync_full"] == 2
    assert "Partial resynchronization request" in log_text(primary)
    f9 = client(fast, db=9)
    assert f9.dbsize() == pr9.dbsize() == 2048
    assert f9.get("b:1023") == b"v" * 1024
    assert info(primary, "replication")["repl_backlog_histlen"] > 2 * MB
    assert info(primary, "persistence")["rdb_bgsave_in_progress"] == 1

    # The slow replica passes a 128 KiB limit: it is cut off, and what it
    # alone held is released.
    os.kill(slow.proc.pid, signal.SIGSTOP)
    try:
        pr.config_set("client-output-buffer-limit", "replica 128kb 0 0")
        pr.set("trigger", "x" * 65536)
        wait_for(lambda: info(primary, "replication")["connected_slaves"] == 1, what="slow replica cut")
        wait_for(lambda: info(primary, "replication")["repl_backlog_histlen"] < 64 * 1024, what="backlog shrinks")
        assert info(primary, "memory")["mem_total_replication_buffers"] < 64 * 1024
        assert "overcoming of output buffer limits" in log_text(primary)
    finally:
        os.kill(slow.proc.pid, signal.SIGCONT)


def test_a_hard_limit_below_the_backlog_size_counts_as_that_size(servers):
    primary = servers(server_binary(), "--repl-backlog-size", "64mb")
    replica = servers(server_binary())
    pr = client(primary)
    pr.config_set("client-output-buffer-limit", "replica 256kb 0 0")
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: offsets_equal(primary, replica), what="sync")
    os.kill(replica.proc.pid, signal.SIGSTOP)
    try:
        # More than the loopback socket's buffers take.
        write_mb(pr, "k", 16)
        lines = [line for line in pr.execute_command("CLIENT", "LIST", "TYPE", "replica").decode().splitlines() if line]
        assert len(lines) == 1
        fields = dict(f.split("=", 1) for f in lines[0].split())
        # What it was not sent is its output, held in the shared buffer.
        assert int(fields["omem"]) > MB and int(fields["tot-mem"]) > int(fields["omem"])
        assert info(primary, "replication")["connected_slaves"] == 1
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    wait_for(lambda: offsets_equal(primary, replica), timeout=30, what="caught up")
    stats = info(primary, "stats")
    assert stats["sync_full"] == 1 and stats["sync_partial_ok"] == 0
    assert client(replica).dbsize() == 16384
    assert link_up(replica)


def test_a_stalled_replicas_buffer_does_not_induce_eviction(servers):
    """The stream held for a replica that stopped reading is not counted
    against maxmemory (Redis's "replica buffer don't induce eviction"):
    with maxmemory 256 KB above what the data needs, megabytes of stream
    pile up for the stalled replica (30 MB are written: more than the
    kernel's socket buffers take) and no key is evicted."""
    primary = servers(server_binary())
    replica = servers(server_binary())
    pr = client(primary)
    pr.config_set("slowlog-log-slower-than", -1)
    for j in range(100):
        pr.setrange(f"key:{j}", 100_000, "asdf")
    pr.config_set("maxmemory-policy", "allkeys-random")
    pr.config_set("client-output-buffer-limit", "replica 100000000 100000000 300")
    pr.config_set("repl-backlog-size", 10 * 1024)
    client(replica).replicaof(primary.host, primary.port)
    wait_for(lambda: link_up(replica), what="replica synced")

    def overwrite(times: int) -> None:
        for _ in range(times):
            p = pr.pipeline(transaction=False)
            for _ in range(40):
                p.setrange("key:0", 0, "A" * 500)
            p.execute()

    # The stream's first block and the buffers a pipeline of writes uses
    # come with the first writes, whether a replica stalls or not: the
    # limit is set above them. What the writing client's buffers hold while
    # one of its 22 KB pipelines runs depends on how the kernel cut it (a
    # request left incomplete by a read is copied to a buffer of the
    # client's own; INFO taken inside a pipeline showed 33 KB of normal
    # clients' memory, against about nothing between pipelines), so the room
    # is 256 KB: an eighth of the 2 MB of stream asserted below, which would
    # be evicted for if it were counted.
    overwrite(20)
    wait_for(lambda: offsets_equal(primary, replica), what="replica caught up")
    mem = pr.info("memory")
    pr.config_set("maxmemory", mem["used_memory"] - mem["mem_not_counted_for_evict"] + 256 * 1024)
    os.kill(replica.proc.pid, signal.SIGSTOP)
    try:
        overwrite(1500)
        mem = info(primary, "memory")
        assert mem["mem_clients_slaves"] > 2 * MB, mem
        assert mem["mem_not_counted_for_evict"] > 2 * MB, mem
        assert info(primary, "stats")["evicted_keys"] == 0
        assert pr.dbsize() == 100
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
