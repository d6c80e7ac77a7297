"""Strings kept packed (value-compression yes): every reply byte for byte as
stored, through GET/GETRANGE/STRLEN/APPEND/SETRANGE/INCR, OBJECT ENCODING,
SCAN, DUMP/RESTORE, SAVE and restart, Redis 7.0 loading our RDB, MIGRATE to
Redis 7.0, a replica, and tables retrained while a client reads and writes.
The codecs: shapes (short records of one text with numbers in it), FSST
(other short values) and zstd (records of 200 bytes and more).
docs/design/compression.md explains the feature."""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
import time

import pytest
import redis

from conftest import HOST, Server, server_binary

REDIS_BIN = "/usr/bin/redis-server"


def session(rng: random.Random) -> bytes:
    return b'{"user_id":%d,"ts":%d,"role":"u"}' % (rng.randrange(1_000_000, 10_000_000),
                                                   1_700_000_000 + rng.randrange(2_592_000))


def fill(r: redis.Redis, n: int = 2000, seed: int = 1) -> dict[bytes, bytes]:
    rng = random.Random(seed)
    data = {b"session:%040x" % rng.getrandbits(160): session(rng) for _ in range(n)}
    p = r.pipeline(transaction=False)
    for k, v in data.items():
        p.set(k, v, ex=3600)
    p.execute()
    return data


def fill_numbers(r: redis.Redis, n: int = 3000) -> dict[bytes, bytes]:
    """`SET key:<i> <i>` (number keys: prefix id and varint in a blob under
    16 bytes), a few with a TTL, near misses (leading zeros, a second
    prefix) and a value too long for the small form."""
    data = {b"key:%d" % i: b"%d" % i for i in range(n)}
    data.update({b"n%d" % i: b"%d" % -i for i in range(0, n, 7)})
    data.update({b"key:%06d" % i: b"v" for i in range(0, n, 11)})
    data[b"key:18446744073709551615"] = b"big"
    data[b"key:99"] = b"a string value longer than the small form"
    p = r.pipeline(transaction=False)
    for i, (k, v) in enumerate(data.items()):
        p.set(k, v, ex=3600 if i % 5 == 0 else None)
    p.execute()
    return data


def record(rng: random.Random, i: int) -> bytes:
    """A JSON record of a few hundred to ~1,500 bytes, of one template (an
    API shape), as the zstd codec's workload."""
    members = {}
    for j in range(rng.randrange(2, 12)):
        what = rng.choice(["ID", "name", "state", "owner", "tags"])
        members[f"Field{j}"] = {"shape": rng.choice(["String", "Integer", "Boolean", "TagList"]),
                                "documentation": f"<p>The {what} of the resource {rng.randrange(10**6)}, "
                                                 "as the describe call returns it.</p>",
                                "locationName": f"field{j}"}
    return json.dumps({"name": f"Shape{i}", "type": "structure", "members": members},
                      separators=(",", ":")).encode()


def fill_records(r: redis.Redis, n: int = 600, seed: int = 4) -> dict[bytes, bytes]:
    """`SET shape:<hex>:<i> <record>`: values of 200 bytes and more, packed
    with zstd once the pattern's dictionary is trained; a few with a TTL."""
    rng = random.Random(seed)
    data = {b"shape:%08x:%d" % (rng.getrandbits(32), i): record(rng, i) for i in range(n)}
    p = r.pipeline(transaction=False)
    for i, (k, v) in enumerate(data.items()):
        p.set(k, v, ex=3600 if i % 3 == 0 else None)
    p.execute()
    return data


def compression(r: redis.Redis) -> dict:
    return r.info("compression")


def check_all(r: redis.Redis, data: dict[bytes, bytes]) -> None:
    keys = list(data)
    got = r.mget(keys)
    assert got == [data[k] for k in keys]


@pytest.fixture
def cr(start_server):
    s = start_server("--value-compression", "yes", "--key-compression", "yes")
    c = redis.Redis(host=HOST, port=s.port)
    yield c
    c.close()



def redis_on_rdb_of(wd: str, tmp_path) -> Server:
    """Redis 7.0 started on a copy of the dump.rdb densekv wrote in `wd`
    (the test is skipped where Debian's redis-server is missing)."""
    if not os.path.exists(REDIS_BIN):
        pytest.skip("no Debian redis-server")
    rd = str(tmp_path / "redis")
    os.mkdir(rd)
    shutil.copy(os.path.join(wd, "dump.rdb"), rd)
    return Server(REDIS_BIN, (), workdir=rd).start()

def test_sessions_are_packed_and_read_back(cr):
    data = fill(cr)
    info = compression(cr)
    assert info["value_compression"] == "yes"
    assert info["compression_dictionaries"] == 1
    assert info["compressed_values"] > 1500
    # Seed 002's records share one text with two numbers in it: a shape.
    assert info["compression_shapes"] == 1
    assert info["compressed_values_shape"] > 1500
    assert info["compressed_bytes_after"] * 2 < info["compressed_bytes_before"]
    check_all(cr, data)
    k, v = list(data.items())[-1]
    assert cr.strlen(k) == len(v) == 46
    assert cr.getrange(k, 0, 9) == v[:10]
    assert cr.getrange(k, -5, -1) == v[-5:]
    # Redis's names by length: 46 bytes is raw, 44 or fewer embstr.
    assert cr.object("encoding", k) == b"raw"
    before = compression(cr)["compressed_values"]
    cr.set(b"session:short", v[:40])
    assert compression(cr)["compressed_values"] == before + 1
    assert cr.object("encoding", b"session:short") == b"embstr"
    assert cr.get(b"session:short") == v[:40]
    # MEMORY USAGE counts the packed blob: below what the raw one costs.
    plain = cr.memory_usage(k)
    assert plain is not None and plain < 16 + 48 + 46 + 8
    # SCAN and KEYS see the keys; TYPE is string.
    seen = set()
    for key in cr.scan_iter(match="session:*", count=500):
        seen.add(key)
    assert seen == set(data) | {b"session:short"}
    assert cr.type(k) == b"string"


def dated(rng: random.Random, i: int) -> bytes:
    """A short record with numbers in a fixed text, some zero-filled (a
    date): one shape for its pattern."""
    return b'{"id":%d,"day":"2024-%02d-%02d","n":%d}' % (
        100_000 + i * 7919 % 900_000, rng.randrange(1, 13), rng.randrange(1, 29), rng.randrange(1000))


def test_shape_values_come_back_exactly(cr, tmp_path):
    rng = random.Random(5)
    data = {b"evt:%d" % i: dated(rng, i) for i in range(600)}
    for k, v in data.items():
        cr.set(k, v)
    info = compression(cr)
    assert info["compression_shapes"] == 1, sorted(info.items())
    assert info["compressed_values_shape"] > 300, info
    shaped = info["compressed_values_shape"]
    # Values of the pattern near the shape and off it: leading zeros where
    # the shape writes none, a day not zero-filled, numbers below the
    # samples' least and past a hole's bytes, 19 and 20 digits, a minus
    # sign, text added or missing. Each comes back exactly, shape or not.
    odd = [
        b'{"id":123456,"day":"2024-01-02","n":5}',
        b'{"id":999999,"day":"2024-12-28","n":999}',
        b'{"id":0123456,"day":"2024-01-02","n":5}',
        b'{"id":123456,"day":"2024-1-02","n":5}',
        b'{"id":5,"day":"2024-01-02","n":5}',
        b'{"id":99999999999999,"day":"2024-01-02","n":5}',
        b'{"id":1234567890123456789,"day":"2024-01-02","n":5}',
        b'{"id":12345678901234567890,"day":"2024-01-02","n":5}',
        b'{"id":-123456,"day":"2024-01-02","n":5}',
        b'{"id":123456,"day":"2024-01-02","n":0}',
        b'{"id":123456,"day":"2024-01-02","n":5} ',
        b'{"id":123456,"day":"2024-01-02","n":}',
        b'{"id":123456,"day":"2024-01-02"}',
        b'{"id":123456,"day":"2024-00-00","n":999}',
    ]
    for i, v in enumerate(odd):
        data[b"evt:odd:%d" % i] = v
        cr.set(b"evt:odd:%d" % i, v)
    assert compression(cr)["compressed_values_shape"] >= shaped + 3
    check_all(cr, data)
    k = b"evt:7"
    v = data[k]
    assert cr.strlen(k) == len(v)
    assert cr.getrange(k, 3, 12) == v[3:13]
    assert cr.object("encoding", k) == (b"embstr" if len(v) <= 44 else b"raw")
    # In-place edits read the shape's bytes and store the result again.
    assert cr.append(k, b"!") == len(v) + 1
    assert cr.setrange(b"evt:8", 6, b"7") == len(data[b"evt:8"])
    data[k] = v + b"!"
    data[b"evt:8"] = data[b"evt:8"][:6] + b"7" + data[b"evt:8"][7:]
    assert cr.object("encoding", k) == b"raw"
    check_all(cr, data)
    # DUMP/RESTORE and a reload carry the original bytes.
    dumped = cr.dump(b"evt:9")
    cr.restore(b"evt:copy", 0, dumped)
    data[b"evt:copy"] = data[b"evt:9"]
    cr.execute_command("DEBUG", "RELOAD")
    check_all(cr, data)
    assert compression(cr)["compressed_values_shape"] > 300


def test_memory_report_shows_raw_and_stored_bytes(cr, start_server):
    data = fill(cr)
    plain = redis.Redis(host=HOST, port=start_server().port)
    for k, v in data.items():
        plain.set(k, v)
    raw = sum(len(k) + len(v) for k in data for v in [data[k]])

    def strings(r):
        rep = r.execute_command("MEMORY", "REPORT")
        rep = rep if isinstance(rep, dict) else dict(zip(rep[::2], rep[1::2]))
        for p in rep[b"patterns"]:
            p = p if isinstance(p, dict) else dict(zip(p[::2], p[1::2]))
            if p[b"pattern"] == b"session:{hex40}":
                return p[b"string-raw-bytes"], p[b"string-bytes"], p[b"bytes"]
        raise AssertionError("no session pattern")

    on, off = strings(cr), strings(plain)
    assert on[0] == off[0] == raw
    assert on[1] == on[2] and off[1] == off[2]
    # Packed: below the raw bytes (about half); plain: above them.
    assert on[1] < 0.7 * raw < raw < off[1], (on, off, raw)
    plain.close()


def test_edits_of_packed_strings(cr):
    data = fill(cr)
    keys = list(data)
    a, b, c, d = keys[-4:]
    assert cr.append(a, b"tail") == 50
    assert cr.get(a) == data[a] + b"tail"
    assert cr.object("encoding", a) == b"raw"
    assert cr.setrange(b, 2, b"USER") == 46
    assert cr.get(b) == data[b][:2] + b"USER" + data[b][6:]
    assert cr.object("encoding", b) == b"raw"
    with pytest.raises(redis.ResponseError, match="not an integer"):
        cr.incr(c)
    assert cr.get(c) == data[c]
    cr.set(d, b"00000000000000000000000000012")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        cr.incr(d)
    assert cr.getset(d, b"5") == b"00000000000000000000000000012"
    assert cr.incr(d) == 6
    assert 3000 < cr.ttl(c) <= 3600
    cr.persist(c)
    assert cr.get(c) == data[c] and cr.ttl(c) == -1
    assert cr.getdel(c) == data[c]
    assert cr.get(c) is None


def test_large_values_pack_with_zstd(cr):
    """Records of 200 bytes and more: a zstd dictionary is trained for their
    pattern from the same samples as its FSST table; every command sees
    the original bytes."""
    data = fill_records(cr)
    info = compression(cr)
    assert info["compression_zstd_dictionaries"] == 1, info
    assert info["compression_zstd_dictionary_bytes"] > 0, info
    assert info["compressed_values_zstd"] > 400, info
    assert info["compressed_bytes_after"] * 3 < info["compressed_bytes_before"], info
    check_all(cr, data)
    keys = list(data)
    k, v = keys[-1], data[keys[-1]]
    assert len(v) >= 200
    assert cr.strlen(k) == len(v)
    assert cr.getrange(k, 100, 180) == v[100:181]
    assert cr.getrange(k, -30, -1) == v[-30:]
    assert cr.object("encoding", k) == b"raw"
    # MEMORY USAGE is what the packed blob costs: well below the raw bytes.
    assert cr.memory_usage(k) < len(v)
    a, b, c = keys[-4:-1]
    assert cr.append(a, b"tail") == len(data[a]) + 4
    assert cr.get(a) == data[a] + b"tail"
    assert cr.setrange(b, 150, b"EDITED") == len(data[b])
    assert cr.get(b) == data[b][:150] + b"EDITED" + data[b][156:]
    assert cr.setrange(c, len(data[c]) + 3, b"x") == len(data[c]) + 4
    assert cr.get(c) == data[c] + b"\0\0\0x"
    with pytest.raises(redis.ResponseError, match="not an integer"):
        cr.incr(keys[0])
    # A short value of the same pattern goes through FSST, a value that
    # does not compress stays raw.
    cr.set(b"shape:short:1", data[keys[0]][:60])
    assert cr.get(b"shape:short:1") == data[keys[0]][:60]
    noise = random.Random(3).randbytes(700)
    before = compression(cr)["compressed_values"]
    cr.set(b"shape:noise:1", noise)
    assert cr.get(b"shape:noise:1") == noise
    assert compression(cr)["compressed_values"] == before
    payload = cr.dump(keys[1])
    assert data[keys[1]] in payload
    cr.restore(b"shape:copy:1", 0, payload)
    assert cr.get(b"shape:copy:1") == data[keys[1]]
    cr.delete(*keys, b"shape:copy:1")
    assert compression(cr)["compressed_values_zstd"] == 0


def test_dump_restore_and_config_set(cr):
    data = fill(cr)
    k = list(data)[-1]
    payload = cr.dump(k)
    # The payload carries the raw bytes: a server without compression
    # restores it, and so does this one.
    assert data[k] in payload
    cr.restore(b"copy", 0, payload)
    assert cr.get(b"copy") == data[k]
    assert cr.config_get("value-compression") == {"value-compression": "yes"}
    cr.config_set("value-compression", "no")
    assert compression(cr)["value_compression"] == "no"
    cr.set(b"session:new", data[k])
    assert cr.get(b"session:new") == data[k]
    before = compression(cr)["compressed_values"]
    cr.set(b"session:new2", data[k])
    assert compression(cr)["compressed_values"] == before, "no packing while off"
    check_all(cr, data)
    cr.flushall()
    assert compression(cr)["compressed_values"] == 0


def test_save_restart_and_redis_loads_our_rdb(tmp_path):
    wd = str(tmp_path / "d")
    os.mkdir(wd)
    s = Server(server_binary(), ("--value-compression", "yes", "--key-compression", "yes"), workdir=wd).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        data = fill(r)
        assert compression(r)["compressed_values"] > 0
        data |= fill_numbers(r)
        data |= fill_records(r)
        assert compression(r)["compressed_values_zstd"] > 0
        assert r.save()
    finally:
        s.stop()
    s = Server(server_binary(), ("--value-compression", "yes", "--key-compression", "yes"), workdir=wd).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        check_all(r, data)
        assert compression(r)["compressed_values"] > 1000, "loading packs again"
        assert compression(r)["compressed_values_zstd"] > 0, "with both codecs"
    finally:
        s.stop()
    s = redis_on_rdb_of(wd, tmp_path)
    try:
        r = redis.Redis(host=HOST, port=s.port)
        check_all(r, data)
        assert r.dbsize() == len(data)
    finally:
        s.stop()


def test_migrate_to_redis_7(servers):
    """MIGRATE of packed keys and values (FSST and zstd) from densekv to
    Debian's Redis 7.0, with COPY and without: Redis gets the original
    bytes and TTLs."""
    if not os.path.exists(REDIS_BIN):
        pytest.skip("no Debian redis-server")
    src = servers(server_binary(), "--value-compression", "yes", "--key-compression", "yes")
    dst = servers(REDIS_BIN)
    sr = redis.Redis(host=HOST, port=src.port)
    dr = redis.Redis(host=HOST, port=dst.port)
    data = fill(sr, 500) | fill_numbers(sr, 500) | fill_records(sr, 400)
    info = compression(sr)
    assert info["compressed_values_zstd"] > 0 and info["compressed_values"] > info["compressed_values_zstd"], info
    keys = list(data)
    rng = random.Random(11)
    rng.shuffle(keys)
    copied, moved, single = keys[:600], keys[600:1200], keys[1200:1210]
    assert sr.execute_command("MIGRATE", HOST, dst.port, "", 0, 5000, "COPY", "KEYS", *copied) == b"OK"
    assert sr.execute_command("MIGRATE", HOST, dst.port, "", 0, 5000, "KEYS", *moved) == b"OK"
    for k in single:
        assert sr.execute_command("MIGRATE", HOST, dst.port, k, 0, 5000) == b"OK"
    check_all(dr, {k: data[k] for k in copied + moved + single})
    check_all(sr, {k: data[k] for k in copied + keys[1210:]})
    assert sr.exists(*moved, *single) == 0
    assert dr.dbsize() == 1210
    # TTLs travel too: the sessions and some records had one.
    for k in copied:
        assert (dr.ttl(k) > 0) == (sr.ttl(k) > 0), k
    assert all(0 < dr.ttl(k) <= 3600 for k in moved if k.startswith(b"session:"))


def test_replica_gets_original_bytes(servers):
    primary = servers(server_binary(), "--value-compression", "yes", "--key-compression", "yes")
    replica = servers(server_binary(), "--value-compression", "yes", "--key-compression", "yes")
    pr = redis.Redis(host=HOST, port=primary.port)
    rr = redis.Redis(host=HOST, port=replica.port)
    data = fill(pr, 1000, seed=2) | fill_numbers(pr, 1000) | fill_records(pr, 400, seed=5)
    assert compression(pr)["compressed_values_zstd"] > 0
    rr.replicaof(HOST, primary.port)
    wait = __import__("time")
    deadline = wait.time() + 20
    more = {}
    while wait.time() < deadline:
        rep = rr.info("replication")
        if rep.get("master_link_status") == "up":
            break
        wait.sleep(0.05)
    # Streamed writes after the full sync.
    more = fill(pr, 1000, seed=3)
    pr.append(list(more)[0], b"!")
    more[list(more)[0]] += b"!"
    while wait.time() < deadline:
        if pr.info("replication")["master_repl_offset"] == rr.info("replication")["slave_repl_offset"]:
            break
        wait.sleep(0.05)
    check_all(rr, data)
    check_all(rr, more)
    assert rr.dbsize() == pr.dbsize()
    assert compression(rr)["compressed_values"] > 0, "the replica trains its own tables"
    assert compression(rr)["compressed_values_zstd"] > 0, "zstd dictionaries too"


def test_retraining_while_a_client_reads_and_writes(cr):
    """A pattern whose values drift gets a new table; values packed with
    the old one stay readable, and the old table goes once no value uses
    it. A second client reads and writes the same keys throughout."""
    data = fill(cr, 3000)
    stop = threading.Event()
    errors: list[str] = []
    keys = list(data)[:200]
    own = {k: data[k] for k in keys}

    def other_client():
        c = redis.Redis(host=HOST, port=cr.connection_pool.connection_kwargs["port"])
        rng = random.Random(9)
        while not stop.is_set():
            k = rng.choice(keys)
            if rng.random() < 0.5:
                v = own[k]
                got = c.get(k)
                if got != v:
                    errors.append(f"{k!r}: {got!r} != {v!r}")
            else:
                v = session(rng)
                c.set(k, v)
                own[k] = v
        c.close()

    t = threading.Thread(target=other_client)
    t.start()
    try:
        trained = compression(cr)["compression_dictionaries_trained"]
        rng = random.Random(5)
        # Values of another shape under the same pattern, until retrained.
        drift = {}
        for round_ in range(6):
            p = cr.pipeline(transaction=False)
            for i in range(3000):
                k = b"session:drift%d:%d" % (round_, i)
                v = b"<%s|%d|%s>" % (bytes(rng.choices(b"QWERTYUIOPASDFGHJKLZXCVBNM", k=30)), rng.getrandbits(40), b"xml-ish")
                drift[k] = v
                p.set(k, v)
            p.execute()
            if compression(cr)["compression_dictionaries_trained"] > trained:
                break
        assert compression(cr)["compression_dictionaries_trained"] > trained, compression(cr)
        check_all(cr, drift)
    finally:
        stop.set()
        t.join()
    assert not errors, errors[:3]
    rest = {k: v for k, v in data.items() if k not in own}
    check_all(cr, rest)
    check_all(cr, own)
    # Delete every key: the retired table is freed with its last value,
    # the current one stays for new writes.
    cr.delete(*data.keys(), *drift.keys())
    info = compression(cr)
    assert info["compression_dictionaries_freed"] >= 1, info
    assert info["compression_dictionaries"] == 1, info
    assert info["compressed_values"] == 0, info


def test_number_keys(cr):
    """`SET key:<n> <n>` keeps the key as its prefix id and the number:
    every command sees the original key, INCR widens the value, and
    MEMORY USAGE is the small blob plus its slot share."""
    data = fill_numbers(cr)
    check_all(cr, data)
    assert sorted(cr.keys("key:12*")) == sorted(k for k in data if k.startswith(b"key:12"))
    assert sorted(cr.scan_iter(match="n7*", count=100)) == sorted(k for k in data if k.startswith(b"n7"))
    assert cr.exists(b"key:0123", b"key:1", b"key:01") == 1
    # A 7-byte blob (flags, the number's 3-byte varint, the integer's 3
    # bytes) against 15 with the key raw; the slot's share is the same.
    cr.set(b"key:123456", 123456)
    cr.config_set("key-compression", "no")
    cr.set(b"key:123457", 123457)
    cr.config_set("key-compression", "yes")
    assert cr.memory_usage(b"key:123457") - cr.memory_usage(b"key:123456") == 8
    for width in (126, 127, 128, 32767, 32768, 1 << 40):
        cr.set(b"key:77", width - 1)
        assert cr.incr(b"key:77") == width
        assert cr.get(b"key:77") == b"%d" % width
    assert cr.incrby(b"key:77", -(1 << 40) - 5) == -5
    assert cr.object("encoding", b"key:77") == b"int"
    assert cr.append(b"key:78", b"12") == len(data[b"key:78"]) + 2
    assert cr.get(b"key:78") == data[b"key:78"] + b"12"
    cr.expire(b"key:79", 100)
    assert 0 < cr.ttl(b"key:79") <= 100 and cr.get(b"key:79") == b"79"
    cr.persist(b"key:79")
    assert cr.ttl(b"key:79") == -1
    assert cr.rename(b"key:80", b"key:800000")
    assert cr.get(b"key:800000") == b"80" and cr.get(b"key:80") is None
    payload = cr.dump(b"key:81")
    cr.restore(b"key:810000", 0, payload)
    assert cr.get(b"key:810000") == b"81"
    assert cr.getdel(b"key:82") == b"82" and cr.exists(b"key:82") == 0
    cr.hset(b"key:9000083", b"f", b"v")
    assert cr.hgetall(b"key:9000083") == {b"f": b"v"}
    assert cr.type(b"key:9000083") == b"hash"


def test_hash_per_session_and_extreme_deadlines(cr):
    """Seed 002's hash per session (a 40-byte blob: 6-byte deadline, packed
    key with no length byte, integers with no tags) reads back through the
    hash and TTL commands, DUMP/RESTORE and a restart; deadlines of any
    size (past 2^48 ms up to i64::MAX, which take 14 bytes) come back
    exactly, and the hash stays listpack whatever its values."""
    rng = random.Random(7)
    now_ms = int(time.time() * 1000)
    sessions = {}
    for _ in range(300):
        key = b"session:%040x" % rng.getrandbits(160)
        i, x = rng.randrange(1_000_000, 10_000_000), 1_700_000_000 + rng.randrange(2_592_000)
        assert cr.hset(key, mapping={b"i": i, b"x": x}) == 2
        assert cr.expire(key, 2_592_000)
        sessions[key] = {b"i": b"%d" % i, b"x": b"%d" % x}
    key = next(iter(sessions))
    assert cr.object("encoding", key) == b"listpack"
    # One packed key, one deadline and the inline hash: the 40-byte class;
    # raw (key-compression off when it is written) it takes 72.
    cr.config_set("key-compression", "no")
    cr.hset(b"session:" + b"0" * 40, mapping={b"i": 1234567, b"x": 1700000000})
    cr.expire(b"session:" + b"0" * 40, 2_592_000)
    cr.config_set("key-compression", "yes")
    assert cr.memory_usage(b"session:" + b"0" * 40) - cr.memory_usage(key) == 72 - 40
    for k, v in sessions.items():
        assert cr.hgetall(k) == v
        assert 2_591_990 <= cr.ttl(k) <= 2_592_000
    assert cr.hincrby(key, b"i", 1) == int(sessions[key][b"i"]) + 1
    assert cr.hincrby(key, b"i", -1) == int(sessions[key][b"i"])
    assert cr.hset(key, b"x", -(1 << 62)) == 0
    assert cr.hget(key, b"x") == b"%d" % -(1 << 62)
    assert cr.object("encoding", key) == b"listpack"
    assert cr.hset(key, b"x", sessions[key][b"x"]) == 0
    # Deadlines: short (6 bytes) up to 2^48 - 2 ms, long (14) beyond.
    edges = [now_ms + 10_000_000, (1 << 48) - 2, (1 << 48) - 1, 1 << 48, (1 << 62) + 3, (1 << 63) - 1]
    for n, at in enumerate(edges):
        for k in (key, b"key:%d" % (900 + n), b"plain%d" % n):
            if k != key:
                cr.set(k, 7)
            assert cr.pexpireat(k, at)
            assert cr.pexpiretime(k) == at, (k, at)
            assert cr.ttl(k) > 0
            assert cr.pexpireat(k, at + 1, gt=True) if at < (1 << 63) - 1 else not cr.pexpireat(k, at, gt=True)
            assert cr.pexpireat(k, at, lt=True) if at < (1 << 63) - 1 else True
            assert cr.pexpiretime(k) == at
            payload = cr.dump(k)
            cr.restore(b"copy", at, payload, replace=True, absttl=True)
            assert cr.pexpiretime(b"copy") == at and cr.dump(b"copy") == payload
        assert cr.hgetall(key) == sessions[key]
    assert cr.persist(key) and cr.ttl(key) == -1 and cr.hgetall(key) == sessions[key]
    assert cr.expire(key, 100, nx=True) and not cr.expire(key, 200, nx=True)
    assert cr.expire(key, 50, xx=True) and 0 < cr.ttl(key) <= 50
    assert cr.pexpireat(key, (1 << 63) - 1)
    # A restart through the RDB file keeps every deadline and value.
    expected = {k: (cr.hgetall(k), cr.pexpiretime(k)) for k in sessions}
    expected |= {b"key:%d" % (900 + n): ({}, cr.pexpiretime(b"key:%d" % (900 + n))) for n in range(len(edges))}
    cr.execute_command("DEBUG", "RELOAD")
    for k, (v, at) in expected.items():
        if v:
            assert cr.hgetall(k) == v
        else:
            assert cr.get(k) == b"7"
        assert cr.pexpiretime(k) == at, k
    assert cr.object("encoding", key) == b"listpack"


def test_aof_rewrite_keeps_packed_keys_and_values(tmp_path):
    wd = str(tmp_path / "d")
    os.mkdir(wd)
    args = ("--value-compression", "yes", "--key-compression", "yes", "--appendonly", "yes")
    s = Server(server_binary(), args, workdir=wd).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        data = fill(r, 1000) | fill_numbers(r, 2000) | fill_records(r, 300)
        assert compression(r)["compressed_values_zstd"] > 0
        r.bgrewriteaof()
        deadline = time.monotonic() + 20
        while r.info("persistence")["aof_rewrite_in_progress"] or r.info("persistence")["aof_rewrites"] == 0:
            assert time.monotonic() < deadline, "the rewrite did not end"
            time.sleep(0.02)
        r.set(b"key:5000", 5000)
        data[b"key:5000"] = b"5000"
    finally:
        s.stop()
    s = Server(server_binary(), args, workdir=wd).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        check_all(r, data)
        assert r.dbsize() == len(data)
    finally:
        s.stop()


def test_packed_keys_come_back_exactly(cr):
    """Keys of every packed shape (and near misses) through SET/GET, KEYS,
    SCAN MATCH, RENAME, EXISTS, DUMP/RESTORE and MEMORY USAGE."""
    keys = [b"session:" + b"0123456789abcdef" * 2 + b"01234567",
            b"key:123456", b"key:000123", b"key:12345", b"key:0",
            b"u:550e8400-e29b-41d4-a716-446655440000", b"U:550E8400-E29B-41D4-A716-446655440000",
            b"h:DEADBEEF00", b"mixed:DEADbeef", b"user:1000:cart", b"k1", b"", b"cafe",
            b"key:0123", b"key:123", b"KEY:123"]
    for i, k in enumerate(keys):
        cr.set(k, b"value %d" % i)
    for i, k in enumerate(keys):
        assert cr.get(k) == b"value %d" % i, k
    assert sorted(cr.keys("*")) == sorted(keys)
    assert sorted(cr.keys("key:*")) == sorted(k for k in keys if k.startswith(b"key:"))
    assert sorted(cr.scan_iter(match="key:0*")) == [b"key:0", b"key:000123", b"key:0123"]
    assert cr.exists(b"key:00123") == 0
    assert cr.rename(b"key:123456", b"key:654321")
    assert cr.get(b"key:654321") == b"value 1" and cr.get(b"key:123456") is None
    payload = cr.dump(keys[0])
    cr.restore(b"session:" + b"f" * 40, 0, payload)
    assert cr.get(b"session:" + b"f" * 40) == b"value 0"
    assert cr.memory_usage(keys[0]) < cr.memory_usage(b"user:1000:cart") + 40
    assert compression(cr)["key_compression"] == "yes"


# ---------------------------------------------------------------- lists: list-compress-depth


def event(rng: random.Random, i: int) -> bytes:
    kind = rng.choice([b"page_view", b"click", b"add_to_cart", b"search"])
    return (b'{"event":"%s","ts":%d,"user_id":%d,"session_id":"%016x","page":"/products/%d",'
            b'"device":"mobile","country":"DE"}' % (kind, 1_764_000_000_000 + 37 * i,
                                                   rng.randrange(100_000, 150_000), rng.getrandbits(64),
                                                   rng.randrange(1000, 99999)))


def ql(r: redis.Redis, key: bytes) -> dict[str, str]:
    """DEBUG OBJECT's fields as a dict."""
    line = r.execute_command("DEBUG", "OBJECT", key)
    line = line.decode() if isinstance(line, bytes) else line
    return dict(f.split(":", 1) for f in line.split() if ":" in f)


@pytest.mark.parametrize("args", [("--list-compress-depth", "1"), ("--list-compress-depth", "2"),
                                  ("--value-compression", "yes")])
def test_compressed_list_commands_match_a_model(start_server, args):
    """Interior nodes compressed (by list-compress-depth, or implied by
    value-compression): every list command replies as on a plain list, and
    MEMORY USAGE counts the compressed bytes."""
    s = start_server(*args, "--enable-debug-command", "yes")
    p = start_server("--enable-debug-command", "yes")
    r, plain = redis.Redis(host=HOST, port=s.port), redis.Redis(host=HOST, port=p.port)
    rng = random.Random(7)
    model = [event(rng, i) for i in range(6000)]
    for c in (r, plain):
        for k in range(0, len(model), 500):
            c.rpush(b"ev", *model[k:k + 500])
    f = ql(r, b"ev")
    assert r.object("encoding", b"ev") == b"quicklist"
    assert int(f["ql_compressed_nodes"]) >= int(f["ql_nodes"]) - 4 > 0
    assert f["ql_compressed"] == "1"
    assert f["ql_uncompressed_size"] == ql(plain, b"ev")["ql_uncompressed_size"]
    assert ql(plain, b"ev")["ql_compressed_nodes"] == "0"
    assert r.memory_usage(b"ev") * 2 < plain.memory_usage(b"ev")
    assert r.lrange(b"ev", 0, -1) == model
    for i in list(range(0, len(model), 211)) + [-1, -2, -len(model)]:
        assert r.lindex(b"ev", i) == model[i]
    assert r.lrange(b"ev", 2500, 2600) == model[2500:2601]
    assert r.lpos(b"ev", model[3333]) == 3333
    assert r.lpos(b"ev", model[3333], rank=-1) == 3333
    # Writes in the interior: LSET, LINSERT, LREM, LTRIM, and the ends.
    r.lset(b"ev", 3000, b"replaced")
    model[3000] = b"replaced"
    assert r.linsert(b"ev", "AFTER", model[4000], b"inserted") == len(model) + 1
    model.insert(4001, b"inserted")
    r.rpush(b"ev", b"replaced")
    model.append(b"replaced")
    assert r.lrem(b"ev", 0, b"replaced") == 2
    model = [e for e in model if e != b"replaced"]
    assert r.lrange(b"ev", 0, -1) == model
    assert r.ltrim(b"ev", 100, 5000)
    model = model[100:5001]
    assert r.lpop(b"ev", 50) == model[:50]
    assert r.rpop(b"ev", 50) == model[-50:][::-1]
    model = model[50:-50]
    assert r.lrange(b"ev", 0, -1) == model
    assert int(ql(r, b"ev")["ql_compressed_nodes"]) > 0
    # DUMP carries the elements (Redis's forms), RESTORE compresses again.
    r.restore(b"ev2", 0, r.dump(b"ev"))
    assert r.lrange(b"ev2", 0, -1) == model
    assert int(ql(r, b"ev2")["ql_compressed_nodes"]) > 0
    plain.restore(b"ev3", 0, r.dump(b"ev"))
    assert plain.lrange(b"ev3", 0, -1) == model


def test_list_compress_depth_config_set(start_server):
    s = start_server("--enable-debug-command", "yes")
    r = redis.Redis(host=HOST, port=s.port)
    rng = random.Random(3)
    model = [event(rng, i) for i in range(3000)]
    r.rpush(b"a", *model)
    assert ql(r, b"a")["ql_compressed_nodes"] == "0"
    assert r.config_set("list-compress-depth", 1)
    assert r.config_get("list-compress-depth") == {"list-compress-depth": "1"}
    r.rpush(b"b", *model)
    assert int(ql(r, b"b")["ql_compressed_nodes"]) > 0
    assert r.config_set("list-compress-depth", 0)
    r.rpush(b"b", b"more")
    assert r.lrange(b"b", 0, -1) == model + [b"more"]


def test_compressed_list_save_restart_and_redis_loads_it(tmp_path):
    wd = str(tmp_path / "d")
    os.mkdir(wd)
    args = ("--list-compress-depth", "1", "--enable-debug-command", "yes")
    rng = random.Random(5)
    model = [event(rng, i) for i in range(5000)]
    s = Server(server_binary(), args, workdir=wd).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        r.rpush(b"ev", *model)
        assert int(ql(r, b"ev")["ql_compressed_nodes"]) > 0
        assert r.save()
    finally:
        s.stop()
    s = Server(server_binary(), args, workdir=wd).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        assert r.lrange(b"ev", 0, -1) == model
        assert int(ql(r, b"ev")["ql_compressed_nodes"]) > 0, "loading compresses again"
    finally:
        s.stop()
    s = redis_on_rdb_of(wd, tmp_path)
    try:
        assert redis.Redis(host=HOST, port=s.port).lrange(b"ev", 0, -1) == model
    finally:
        s.stop()


def snapshot_of(r: redis.Redis, usage: bool) -> dict:
    """Every key of database 0 and 1 with its value, its deadline (PEXPIRETIME)
    and, with `usage`, its MEMORY USAGE; and DBSIZE."""
    out = {}
    for db in (0, 1):
        r.execute_command("SELECT", db)
        keys = sorted(r.scan_iter(count=10_000))
        p = r.pipeline(transaction=False)
        for k in keys:
            p.get(k)
            p.execute_command("PEXPIRETIME", k)
            if usage:
                p.memory_usage(k)
        got = p.execute()
        step = 3 if usage else 2
        out[db] = (r.dbsize(), {k: tuple(got[i * step:(i + 1) * step]) for i, k in enumerate(keys)})
    r.execute_command("SELECT", 0)
    return out


def test_rdb_load_packs_what_was_saved(tmp_path):
    """An RDB of 150,000 sessions (and number keys, zstd records, keys in a
    second database) loads with compression on to exactly the keys, values
    and deadlines it loads with compression off; two loads with it on (keys
    and values packed on a second thread as the file loads) store the same
    bytes and counters."""
    wd = str(tmp_path / "d")
    os.mkdir(wd)
    s = Server(server_binary(), (), workdir=wd).start()
    try:
        r = redis.Redis(host=HOST, port=s.port)
        data = fill(r, n=150_000, seed=9)
        data |= fill_numbers(r)
        data |= fill_records(r)
        r.persist(next(iter(data)))
        r.select(1)
        fill(r, n=5_000, seed=10)
        r.select(0)
        assert r.save()
    finally:
        s.stop()
    on = ("--value-compression", "yes", "--key-compression", "yes")
    seen = []
    for args in ((), on, on):
        s = Server(server_binary(), args, workdir=wd).start()
        try:
            r = redis.Redis(host=HOST, port=s.port)
            snap = snapshot_of(r, usage=bool(args))
            seen.append((snap, compression(r)))
        finally:
            s.stop()
    off, (on1, c1), (on2, c2) = seen[0][0], seen[1], seen[2]
    assert off[0][0] == len(data) and off[1][0] == 5_000
    assert {k: v[0] for k, v in off[0][1].items()} == data
    # Values and deadlines as with compression off, byte for byte.
    for db in (0, 1):
        assert on1[db][0] == off[db][0]
        assert {k: v[:2] for k, v in on1[db][1].items()} == off[db][1]
    # Two loads store the same bytes (MEMORY USAGE) and count the same.
    assert on1 == on2
    counters = [k for k in c1 if k.startswith("compress")]
    assert {k: c1[k] for k in counters} == {k: c2[k] for k in counters}
    assert c1["compressed_values"] > 140_000 and c1["compressed_values_zstd"] > 0


def test_used_memory_stays_exact_across_a_packing_load(start_server):
    """With compression on, a load packs keys and values on a second thread,
    which allocates the buffers the loading thread later keeps or frees:
    used_memory must count that thread's allocations, or it ends the load
    megabytes short. Emptied after the reload, the server is back where the
    same emptying left it before."""
    s = start_server("--value-compression", "yes", "--key-compression", "yes", "--enable-debug-command", "yes")
    r = redis.Redis(host=HOST, port=s.port)
    data = fill(r, 100_000)
    r.save()
    r.flushall()
    before = r.info("memory")["used_memory"]
    assert r.execute_command("DEBUG", "RELOAD", "NOSAVE") == b"OK"
    assert r.dbsize() == len(data)
    k = next(iter(data))
    assert r.get(k) == data[k]
    assert compression(r)["compressed_values"] > 90_000
    r.flushall()
    after = r.info("memory")["used_memory"]
    assert abs(after - before) < 64 * 1024, (before, after)
