"""The `densekv` command-line tool: memory-report against densekv and
against Debian's redis-server (SCAN + MEMORY USAGE fallback), its HTML
page, and import of CSV/JSONL/RESP with malformed lines, gzip, and the
staging-database-then-SWAPDB path."""

import gzip
import os
import shutil
import subprocess
import threading
import time

import pytest
import redis

from conftest import HOST, Server, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "target", "release", "densekv")
REDIS_SERVER = "/usr/bin/redis-server"


def cli(*args, input=None, timeout=120):
    return subprocess.run([CLI, *map(str, args)], input=input, capture_output=True, timeout=timeout)


def table(out: bytes):
    """Pattern rows of the terminal table: {pattern: (keys, bytes)}."""
    rows = {}
    lines = out.decode().splitlines()
    for line in lines[2:]:
        f = line.split()
        if len(f) >= 3 and f[1].isdigit() and f[2].isdigit():
            rows[f[0]] = (int(f[1]), int(f[2]))
    return rows


def load(r):
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.set(f"session:a{i:07d}", "v" * (i % 60))
        p.hset(f"user:{i}:profile", mapping={"name": f"n{i}", "age": i})
        p.sadd(f"tags:{i % 10}", *[f"t{j}" for j in range(i % 30 + 1)])
    p.execute()


def usage_by_pattern(r, patterns):
    """{pattern: (keys, sum of MEMORY USAGE SAMPLES 0)} by SCAN MATCH."""
    out = {}
    for pat, glob in patterns.items():
        keys = list(r.scan_iter(match=glob, count=1000))
        out[pat] = (len(keys), sum(r.memory_usage(k, samples=0) for k in keys))
    return out


PATTERNS = {"session:{hex8}": "session:*", "user:{n}:profile": "user:*", "tags:{n}": "tags:*"}


@pytest.fixture
def redis_server():
    if not os.path.exists(REDIS_SERVER):
        pytest.skip("Debian's redis-server is not installed")
    s = Server(REDIS_SERVER).start()
    yield s
    s.cleanup()


def test_help_and_exit_codes():
    out = cli("--help")
    assert out.returncode == 0 and b"memory-report" in out.stdout and b"import" in out.stdout
    out = cli("memory-report", "--help")
    assert out.returncode == 0 and b"--compare" in out.stdout and b"-h, --host" in out.stdout
    assert cli("import", "--help").returncode == 0
    assert cli("nope").returncode == 2
    assert cli("import", "x.csv").returncode == 2  # --format missing
    port = free_port()
    out = cli("memory-report", "-p", port)
    assert out.returncode == 1 and b"densekv:" in out.stderr


def test_report_against_densekv(server, r, tmp_path):
    load(r)
    html = tmp_path / "r.html"
    out = cli("memory-report", "-p", server.port, "--html", html)
    assert out.returncode == 0, out.stderr
    assert b"(MEMORY REPORT)" in out.stdout
    assert table(out.stdout) == usage_by_pattern(r, PATTERNS)
    page = html.read_text()
    for chart in ("chart-bytes", "chart-bytes-per-key", "chart-hist-hash", "chart-hist-set", "chart-hist-string"):
        assert f'id="{chart}"' in page
    assert "<script" not in page and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_report_against_redis_and_compare(server, r, redis_server, tmp_path):
    rr = redis.Redis(host=HOST, port=redis_server.port)
    load(rr)
    load(r)
    out = cli("memory-report", "-p", redis_server.port)
    assert out.returncode == 0, out.stderr
    assert b"(SCAN + MEMORY USAGE)" in out.stdout
    assert table(out.stdout) == usage_by_pattern(rr, PATTERNS)
    out = cli("memory-report", "-p", redis_server.port, "--prefix", "user:")
    assert list(table(out.stdout)) == ["user:{n}:profile"]
    html = tmp_path / "cmp.html"
    out = cli("memory-report", "-p", server.port, "--compare", f"{HOST}:{redis_server.port}", "--html", html)
    assert out.returncode == 0, out.stderr
    page = html.read_text()
    assert f"{HOST}:{server.port} (MEMORY REPORT)" in page and f"{HOST}:{redis_server.port} (SCAN + MEMORY USAGE)" in page
    # Two series: two bars per pattern in the bytes chart.
    chart = page.split('id="chart-bytes"')[1].split("</svg>")[0]
    assert chart.count('class="bar"') == 2 * 3
    rr.close()


def write(path, data: bytes, gz=False):
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


CSV = b"id,name,score\n1,ann,10\n2,bob,20\n3\n4,dan,40\n\"5,eve,50\n"


def test_import_csv_skip_and_abort(server, r, tmp_path):
    f = write(tmp_path / "in.csv", CSV.replace(b'"5,eve,50\n', b"5,eve,50\n"))
    out = cli("import", "-p", server.port, f, "--format", "csv", "--header",
              "--map", "HSET user:{id} name {name}", "--map", "ZADD scores {score} {id}", "--on-error", "skip")
    assert out.returncode == 0, out.stderr
    assert b"line 4: malformed record: no column name" in out.stderr
    assert b"imported 4 rows" in out.stderr and b"1 errors" in out.stderr
    assert r.hget("user:5", "name") == b"eve" and not r.exists("user:3")
    assert r.zrange("scores", 0, -1, withscores=True) == [(b"1", 10.0), (b"2", 20.0), (b"4", 40.0), (b"5", 50.0)]
    r.flushall()
    r.set("old", "kept")
    out = cli("import", "-p", server.port, f, "--format", "csv", "--header", "--map", "SET k{0} {1}",
              "--on-error", "abort", "--into-db", 5, "--swap-with", 0)
    assert out.returncode == 1
    assert b"line 4: malformed record: no column 1" in out.stderr and b"nothing swapped" in out.stderr
    assert r.keys() == [b"old"]


def test_import_by_index_ttl_gzip_and_stdin(server, r, tmp_path):
    f = write(tmp_path / "in.csv.gz", b"a,1\nb,2\n", gz=True)
    out = cli("import", "-p", server.port, f, "--format", "csv", "--map", "SET {0} {1}", "--ttl", 100)
    assert out.returncode == 0, out.stderr
    assert r.get("a") == b"1" and 0 < r.ttl("b") <= 100
    out = cli("import", "-p", server.port, "-", "--format", "csv", "--map", "RPUSH l {0}", "--map", "SADD s {1}",
              "--db", 2, input=gzip.compress(b"x,1\ny,1\n"))
    assert out.returncode == 0, out.stderr
    r2 = redis.Redis(host=HOST, port=server.port, db=2)
    assert r2.lrange("l", 0, -1) == [b"x", b"y"] and r2.smembers("s") == {b"1"}
    r2.close()


def test_import_jsonl(server, r, tmp_path):
    data = b'{"id": 1, "name": "ann"}\n{"id": 2, "name": "bob"}\n{"id": 3, oops}\n\n{"id": 4}\n[1]\n{"id": 5, "name": "eve"}\n'
    f = write(tmp_path / "in.jsonl", data)
    out = cli("import", "-p", server.port, f, "--format", "jsonl", "--map", "HSET user:{id} name {name}")
    assert out.returncode == 0, out.stderr
    err = out.stderr.decode()
    assert "line 3: malformed JSON" in err and "line 5: malformed record: no field name" in err
    assert "line 6: malformed record: not a JSON object" in err
    assert sorted(r.keys()) == [b"user:1", b"user:2", b"user:5"]
    r.flushall()
    out = cli("import", "-p", server.port, f, "--format", "jsonl", "--map", "HSET user:{id} name {name}", "--on-error", "abort")
    assert out.returncode == 1 and "line 3" in out.stderr.decode()
    assert sorted(r.keys()) == [b"user:1", b"user:2"]


def test_import_resp(server, r, tmp_path):
    good = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"
    bad = b"*2\r\n$3\r\nGET\r\nxx\r\n"
    wrongtype = b"*3\r\n$5\r\nLPUSH\r\n$1\r\na\r\n$1\r\nx\r\n"
    last = b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n"
    f = write(tmp_path / "in.resp", good + bad + wrongtype + last)
    out = cli("import", "-p", server.port, f, "--format", "resp")
    err = out.stderr.decode()
    assert out.returncode == 0, err
    assert "line 11: malformed RESP: expected $<length>" in err
    assert "line 12: server replied: WRONGTYPE" in err
    assert r.get("a") == b"1" and r.get("b") == b"2"
    assert cli("import", "-p", server.port, f, "--format", "resp", "--map", "SET {0} {1}").returncode == 1


def test_staging_then_swapdb_never_partial(server, r, tmp_path):
    n_old, n_new = 1000, 200_000
    p = r.pipeline(transaction=False)
    for i in range(n_old):
        p.set(f"old:{i}", "1")
    p.execute()
    f = tmp_path / "big.csv"
    with open(f, "w") as out:
        for i in range(n_new):
            out.write(f"new:{i},{i}\n")
    seen = set()
    stop = threading.Event()

    def reader():
        c = redis.Redis(host=HOST, port=server.port)
        while not stop.is_set():
            seen.add(c.dbsize())
        c.close()

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.05)
    out = cli("import", "-p", server.port, f, "--format", "csv", "--map", "SET {0} {1}",
              "--into-db", 9, "--swap-with", 0, timeout=300)
    time.sleep(0.05)
    stop.set()
    t.join()
    assert out.returncode == 0, out.stderr
    assert b"db 9 swapped with db 0" in out.stderr
    assert seen <= {n_old, n_new} and n_old in seen, seen
    assert r.dbsize() == n_new and r.get("new:123") == b"123"
    r9 = redis.Redis(host=HOST, port=server.port, db=9)
    assert r9.dbsize() == n_old
    r9.close()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_html_renders_in_headless_chromium(server, r, tmp_path):
    load(r)
    html = tmp_path / "report.html"
    assert cli("memory-report", "-p", server.port, "--html", html).returncode == 0
    prof = tmp_path / "profile"
    base = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={prof}"]
    dom = subprocess.run([*base, "--dump-dom", html.as_uri()], capture_output=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout.decode()
    for chart in ("chart-bytes", "chart-bytes-per-key", "chart-hist-hash"):
        assert f'id="{chart}"' in page
    assert page.count("<rect") > 10
    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1000,1400", html.as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 5000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
