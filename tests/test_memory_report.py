"""MEMORY REPORT (a densekv extension): keys grouped by pattern, per-pattern
bytes equal to the sum of MEMORY USAGE, TTL spread, largest keys, size
histograms; walked in slices so other clients keep being served."""

import socket
import threading
import time
import uuid

import pytest
import redis

from conftest import HOST, err, ex


def pairs(flat):
    """A RESP2 flat map as a dict (RESP3 maps come as dicts already)."""
    if isinstance(flat, dict):
        return flat
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def report(client, *args):
    """MEMORY REPORT as nested dicts, whatever the protocol."""
    rep = pairs(client.execute_command("MEMORY", "REPORT", *args))
    rep[b"patterns"] = [pairs(p) for p in rep[b"patterns"]]
    for p in rep[b"patterns"]:
        p[b"types"] = pairs(p[b"types"])
        p[b"encodings"] = pairs(p[b"encodings"])
    rep[b"histograms"] = pairs(rep[b"histograms"])
    return rep


def by_pattern(rep):
    return {p[b"pattern"]: p for p in rep[b"patterns"]}


def load_known(r):
    """Three patterns of known shape; returns {pattern: [keys]}."""
    keys = {b"user:{n}:cart": [], b"session:{hex40}": [], b"order:{uuid}": []}
    p = r.pipeline(transaction=False)
    for i in range(300):
        k = f"user:{i}:cart".encode()
        p.hset(k, mapping={f"item{j}": "x" * j for j in range(i % 20 + 1)})
        keys[b"user:{n}:cart"].append(k)
    for i in range(200):
        k = f"session:{i:040x}".encode()
        if i % 7 == 0:
            k = b"session:" + bytes(f"{i + 0xabcdef:040x}", "ascii")
        p.set(k, "v" * (i % 100), ex=1000 + i)
        keys[b"session:{hex40}"].append(k)
    for i in range(50):
        k = f"order:{uuid.UUID(int=i * 7919 + 1)}".encode()
        p.rpush(k, *[str(j) for j in range(i + 1)])
        keys[b"order:{uuid}"].append(k)
    p.execute()
    return keys


def usage(r, keys):
    p = r.pipeline(transaction=False)
    for k in keys:
        p.memory_usage(k)
    return p.execute()


@pytest.mark.parametrize("proto", [2, 3])
def test_known_patterns_match_memory_usage(new_client, proto):
    r = new_client(protocol=proto)
    r.flushall()
    keys = load_known(r)
    # Hex ids need a letter: the zero-padded all-digit ones are {n}.
    r.set(b"session:" + b"9" * 40, b"x")
    rep = report(r)
    pats = by_pattern(rep)
    assert rep[b"keys-scanned"] == rep[b"keys-in-db"] == 551
    assert rep[b"sampled"] == 0
    assert rep[b"db"] == 0
    for pat, ks in keys.items():
        # session ids that are all digits fall under {n}; count them apart.
        if pat == b"session:{hex40}":
            ks = [k for k in ks if any(c in b"abcdef" for c in k[8:])]
        sizes = usage(r, ks)
        p = pats[pat]
        assert p[b"keys"] == len(ks), pat
        assert p[b"bytes"] == sum(sizes), pat
        assert p[b"bytes-per-key"] == sum(sizes) // len(ks)
        top = sorted(sizes, reverse=True)[:5]
        assert [b for _, b in p[b"largest"]] == top
        for k, b in p[b"largest"]:
            assert r.memory_usage(k) == b
    assert sum(p[b"bytes"] for p in rep[b"patterns"]) == rep[b"bytes"]
    assert pats[b"user:{n}:cart"][b"types"] == {b"hash": 300}
    assert pats[b"order:{uuid}"][b"types"] == {b"list": 50}
    assert pats[b"order:{uuid}"][b"encodings"] == {b"listpack": 50}
    assert pats[b"user:{n}:cart"][b"with-ttl"] == 0
    assert pats[b"user:{n}:cart"][b"ttl-min-ms"] is None
    s = pats[b"session:{hex40}"]
    assert s[b"with-ttl"] == s[b"keys"]
    assert 900_000 < s[b"ttl-min-ms"] <= s[b"ttl-median-ms"] <= s[b"ttl-max-ms"] <= 1_199_000
    assert set(s[b"encodings"]) <= {b"embstr", b"raw", b"int"}
    # Strings: their key and value bytes as sent, and what they cost; other
    # types count in neither.
    hexes = [k for k in keys[b"session:{hex40}"] if any(c in b"abcdef" for c in k[8:])]
    assert s[b"string-raw-bytes"] == sum(len(k) + r.strlen(k) for k in hexes)
    assert s[b"string-bytes"] == s[b"bytes"]
    assert pats[b"user:{n}:cart"][b"string-raw-bytes"] == pats[b"user:{n}:cart"][b"string-bytes"] == 0
    digits = pats[b"session:{n}"]
    assert digits[b"keys"] == 200 - len([k for k in keys[b"session:{hex40}"] if any(c in b"abcdef" for c in k[8:])]) + 1
    # Histograms: per type, every key in one power-of-two bucket.
    hist = rep[b"histograms"]
    assert set(hist) == {b"hash", b"string", b"list"}
    assert sum(row[2] for row in hist[b"hash"]) == 300
    sizes = usage(r, keys[b"user:{n}:cart"])
    for lo, hi, n, nbytes in hist[b"hash"]:
        inside = [s for s in sizes if lo <= s < hi]
        assert (n, nbytes) == (len(inside), sum(inside))
    # Most bytes first.
    totals = [p[b"bytes"] for p in rep[b"patterns"]]
    assert totals == sorted(totals, reverse=True)


def test_options(r):
    for i in range(100):
        r.set(f"a:{i}", i)
        r.set(f"b:x{i}", "y" * 50)
    rep = report(r, "PREFIX", "b:")
    assert [p[b"pattern"] for p in rep[b"patterns"]] == [b"b:x{n}"]
    assert rep[b"keys-scanned"] == 100
    rep = report(r, "LIMIT", "1")
    assert rep[b"patterns-total"] == 2 and len(rep[b"patterns"]) == 1
    assert rep[b"patterns"][0][b"pattern"] == b"b:x{n}"
    rep = report(r, "SAMPLES", "10")
    assert rep[b"keys-scanned"] == 10 and rep[b"sampled"] == 1
    r.execute_command("SELECT", 0)
    other = redis.Redis(host=HOST, port=r.connection_pool.connection_kwargs["port"], db=3)
    other.set("in3:1", "v")
    rep = report(r, "DB", "3")
    assert rep[b"db"] == 3 and [p[b"pattern"] for p in rep[b"patterns"]] == [b"in{n}:{n}"]
    other.close()
    assert err(r.execute_command, "MEMORY", "REPORT", "DB", "99") == "DB index is out of range"
    assert err(r.execute_command, "MEMORY", "REPORT", "LIMIT", "0") == "LIMIT must be positive"
    assert err(r.execute_command, "MEMORY", "REPORT", "SAMPLES", "x") == "value is not an integer or out of range"
    assert err(r.execute_command, "MEMORY", "REPORT", "LIMIT") == "syntax error"
    assert err(r.execute_command, "MEMORY", "REPORT", "BOGUS", "1") == "syntax error"


def test_in_multi_and_empty_db(r):
    rep = report(r)
    assert rep[b"keys-scanned"] == 0 and rep[b"patterns"] == [] and rep[b"histograms"] == {}
    r.set("k:1", "v")
    p = r.pipeline(transaction=True)
    p.execute_command("MEMORY", "REPORT")
    p.set("k:2", "v")
    out = p.execute()
    assert pairs(out[0])[b"keys-scanned"] == 1


def test_command_docs_and_help(r):
    run = ex(r)
    docs = run("COMMAND", "DOCS", "MEMORY|REPORT")
    assert docs[0] == b"memory|report"
    assert b"densekv extension" in pairs(docs[1])[b"summary"]
    info = run("COMMAND", "INFO", "MEMORY|REPORT")
    assert info[0][0] == b"memory|report" and info[0][1] == -2
    assert b"blocking" in info[0][2] and b"readonly" in info[0][2]
    assert any(b"REPORT" in line for line in run("MEMORY", "HELP"))


def test_walks_in_slices_while_others_write(server, new_client):
    """A large report does not stall other clients; keys present throughout
    are counted exactly once while others write."""
    r = new_client()
    r.flushall()
    n = 300_000
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set(f"stable:{i}", "v")
        if i % 10_000 == 9_999:
            p.execute()
    p.execute()
    stop = threading.Event()
    stalls = []
    written = [0]

    def probe():
        c = new_client()
        while not stop.is_set():
            t = time.perf_counter()
            c.ping()
            stalls.append(time.perf_counter() - t)

    def writer():
        c = new_client()
        i = 0
        while not stop.is_set():
            c.set(f"new:{i}", "v")
            c.delete(f"new:{i - 5}")
            i += 1
        written[0] = i

    threads = [threading.Thread(target=probe), threading.Thread(target=writer)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    t0 = time.perf_counter()
    rep = report(r)
    took = time.perf_counter() - t0
    stop.set()
    for t in threads:
        t.join()
    pats = by_pattern(rep)
    assert pats[b"stable:{n}"][b"keys"] == n
    assert pats.get(b"new:{n}", {b"keys": 0})[b"keys"] <= written[0]
    # The walk took many turns, and the probe was served all along.
    during = stalls[len(stalls) // 4:]
    assert len(stalls) > 20, (took, len(stalls))
    assert max(during) < 0.1, (took, max(during))


def test_client_leaving_mid_report(server, new_client):
    r = new_client()
    r.flushall()
    p = r.pipeline(transaction=False)
    for i in range(100_000):
        p.set(f"k:{i}", "v")
    p.execute()
    s = socket.create_connection((HOST, server.port))
    s.sendall(b"MEMORY REPORT\r\n")
    s.close()
    assert r.ping()
    rep = report(r)
    assert rep[b"keys-scanned"] == 100_000
