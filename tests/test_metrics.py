"""The Prometheus endpoint (metrics-port): /metrics parsed by the Prometheus
client library's text-format parser and checked against INFO; /health."""

import urllib.error
import urllib.request

import pytest
import redis

from conftest import HOST, free_port

parser = pytest.importorskip("prometheus_client.parser")


def get(port, path):
    with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=10) as resp:
        return resp.status, resp.headers.get("Content-Type"), resp.read().decode()


def scrape(port):
    status, ctype, body = get(port, "/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    fams = {f.name: f for f in parser.text_string_to_metric_families(body)}
    return fams, body


def value(fams, family, sample=None, **labels):
    f = fams[family]
    for s in f.samples:
        if (sample is None or s.name == sample) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError((family, sample, labels))


@pytest.fixture
def metrics_server(start_server):
    mport = free_port()
    srv = start_server("--metrics-port", str(mport))
    r = redis.Redis(host=HOST, port=srv.port)
    yield r, mport
    r.close()


def test_off_by_default(r):
    assert r.config_get("metrics-port") == {"metrics-port": "0"}
    assert r.config_get("metrics-bind") == {"metrics-bind": "127.0.0.1"}
    with pytest.raises(redis.ResponseError):
        r.config_set("metrics-port", "1234")
    assert "metrics-port" not in r.config_get("*")


def test_health_and_unknown_paths(metrics_server):
    _, mport = metrics_server
    assert get(mport, "/health")[::2] == (200, "OK")
    with pytest.raises(urllib.error.HTTPError) as e:
        get(mport, "/nope")
    assert e.value.code == 404


def test_metrics_match_info(metrics_server):
    r, mport = metrics_server
    for i in range(50):
        r.set(f"k{i}", i)
    r.set("t", 1, px=1)
    r.expire("k0", 1000)
    r.select(2)
    r.set("in2", 1)
    r.select(0)
    r.get("missing")
    with pytest.raises(redis.ResponseError):
        r.execute_command("INCR", "k1", "extra")
    with pytest.raises(redis.ResponseError):
        r.lpush("k2", "x")
    import time
    time.sleep(0.05)
    r.get("t")  # expired now: counted by expired_keys
    fams, body = scrape(mport)
    info = r.info("everything")
    # Every family has HELP and TYPE lines.
    assert body.count("# TYPE ") == body.count("# HELP ") == len(fams)
    ks = r.info("keyspace")
    assert value(fams, "densekv_db_keys", db="0") == ks["db0"]["keys"]
    assert value(fams, "densekv_db_expires", db="0") == ks["db0"]["expires"] == 1
    assert value(fams, "densekv_db_keys", db="2") == 1
    assert fams["densekv_db_keys"].type == "gauge"
    assert value(fams, "densekv_expired_keys", "densekv_expired_keys_total") == info["expired_keys"] == 1
    assert fams["densekv_expired_keys"].type == "counter"
    assert value(fams, "densekv_evicted_keys", "densekv_evicted_keys_total") == info["evicted_keys"]
    assert value(fams, "densekv_keyspace_misses", "densekv_keyspace_misses_total") == info["keyspace_misses"]
    # Counters that only grow: the scrape came before our INFO call.
    assert value(fams, "densekv_commands_processed", "densekv_commands_processed_total") <= info["total_commands_processed"]
    assert value(fams, "densekv_maxmemory") == info["maxmemory"]
    assert value(fams, "densekv_tcp_port") == info["tcp_port"]
    # The page is rendered for no connection: only the test's client counts.
    assert value(fams, "densekv_connected_clients") == info["connected_clients"] == 1
    # Per command.
    cs = r.info("commandstats")
    assert value(fams, "densekv_command_calls", "densekv_command_calls_total", cmd="set") == cs["cmdstat_set"]["calls"] == 52
    assert value(fams, "densekv_command_usec", "densekv_command_usec_total", cmd="set") == cs["cmdstat_set"]["usec"]
    assert value(fams, "densekv_command_rejected_calls", "densekv_command_rejected_calls_total", cmd="incr") == 1
    assert value(fams, "densekv_command_failed_calls", "densekv_command_failed_calls_total", cmd="lpush") == 1
    assert value(fams, "densekv_errors", "densekv_errors_total", error="WRONGTYPE") == 1
    # Latency histograms: cumulative, +Inf equal to the calls.
    h = fams["densekv_command_latency_seconds"]
    assert h.type == "histogram"
    buckets = [s for s in h.samples if s.name.endswith("_bucket") and s.labels["cmd"] == "set"]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf" and counts[-1] == 52
    assert value(fams, "densekv_command_latency_seconds", "densekv_command_latency_seconds_count", cmd="set") == 52
    assert float(buckets[0].labels["le"]) == 2e-6


def test_bind_failure_stops_start(start_server):
    taken = free_port()
    import socket
    with socket.socket() as s:
        s.bind((HOST, taken))
        s.listen()
        with pytest.raises(RuntimeError):
            start_server("--metrics-port", str(taken))


def test_scrapes_leave_used_memory_where_it_was(metrics_server):
    """Pages are rendered by the executor and copied by the HTTP thread;
    the executor frees them, so used_memory (which counts each thread's
    own allocations) does not move with the number of scrapes."""
    r, mport = metrics_server
    get(mport, "/metrics")
    before = r.info("memory")["used_memory"]
    for _ in range(300):
        assert get(mport, "/metrics")[0] == 200
    after = r.info("memory")["used_memory"]
    assert abs(after - before) < 32 * 1024, (before, after)
