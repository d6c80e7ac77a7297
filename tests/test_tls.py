"""TLS on tls-port: certificates made here with the openssl command line (a throwaway CA,
a server certificate and client certificates), clients through redis-py and redis-cli."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

import clusterlib
from conftest import HOST, free_port, server_binary

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


def _ca(d: Path, name: str) -> None:
    _run("openssl", "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _leaf(d: Path, name: str, ca: str, usage: str) -> None:
    _run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage={usage}\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
         "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    _ca(d, "ca")
    _ca(d, "otherca")
    _leaf(d, "server", "ca", "serverAuth")
    _leaf(d, "server2", "ca", "serverAuth")
    _leaf(d, "client", "ca", "clientAuth")
    _leaf(d, "stranger", "otherca", "clientAuth")
    (d / "garbage.pem").write_text("not a certificate\n")
    return d


def tls_args(d: Path, port: int, *extra: str) -> list[str]:
    return ["--tls-port", str(port), "--tls-cert-file", str(d / "server.crt"), "--tls-key-file", str(d / "server.key"),
            "--tls-ca-cert-file", str(d / "ca.crt"), *extra]


def tls_client(d: Path, port: int, cert: str | None = "client") -> redis.Redis:
    kw = {}
    if cert is not None:
        kw = {"ssl_certfile": str(d / f"{cert}.crt"), "ssl_keyfile": str(d / f"{cert}.key")}
    return redis.Redis(host=HOST, port=port, ssl=True, ssl_ca_certs=str(d / "ca.crt"), socket_timeout=5, **kw)


def refused(c: redis.Redis) -> bool:
    try:
        c.ping()
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return True
    finally:
        c.close()
    return False


def started(start_server, d: Path, *extra: str):
    port = free_port()
    s = start_server(*tls_args(d, port, *extra))
    return s, port


def test_auth_clients_yes_needs_a_certificate_from_the_ca(start_server, certs):
    s, port = started(start_server, certs)
    c = tls_client(certs, port)
    assert c.ping() is True
    c.set("k", "v")
    assert c.get("k") == b"v"
    c.close()
    assert refused(tls_client(certs, port, cert=None))
    assert refused(tls_client(certs, port, cert="stranger"))
    # The server is unharmed by refused handshakes, on both ports.
    assert redis.Redis(host=HOST, port=s.port).get("k") == b"v"
    c = tls_client(certs, port)
    assert c.get("k") == b"v"
    c.close()


def test_auth_clients_no_and_optional(start_server, certs):
    _, port = started(start_server, certs, "--tls-auth-clients", "no")
    assert tls_client(certs, port, cert=None).ping() is True
    _, port = started(start_server, certs, "--tls-auth-clients", "optional")
    assert tls_client(certs, port, cert=None).ping() is True
    assert tls_client(certs, port).ping() is True
    assert refused(tls_client(certs, port, cert="stranger"))


def test_large_values_and_pipelining(start_server, certs):
    s, port = started(start_server, certs)
    c = tls_client(certs, port)
    big = bytes(range(256)) * 4096  # 1 MiB
    assert c.set("big", big) is True
    assert c.get("big") == big
    p = c.pipeline(transaction=False)
    for i in range(2000):
        p.set(f"key:{i}", f"value:{i}" * 10)
        p.get(f"key:{i}")
    out = p.execute()
    assert out[1::2] == [f"value:{i}".encode() * 10 for i in range(2000)]
    # Several big replies in one pipeline (writes that block midway).
    p = c.pipeline(transaction=False)
    for _ in range(8):
        p.get("big")
    assert p.execute() == [big] * 8
    plain = redis.Redis(host=HOST, port=s.port)
    assert plain.get("big") == big
    assert plain.dbsize() == 2001
    c.close()


def test_redis_cli_over_tls(start_server, certs):
    if shutil.which("redis-cli") is None:
        pytest.skip("needs redis-cli")
    _, port = started(start_server, certs)
    base = ["redis-cli", "-h", HOST, "-p", str(port), "--tls", "--cacert", str(certs / "ca.crt")]
    auth = ["--cert", str(certs / "client.crt"), "--key", str(certs / "client.key")]
    out = subprocess.run([*base, *auth, "SET", "cli", "hello"], capture_output=True, text=True, timeout=10)
    assert out.stdout.strip() == "OK"
    out = subprocess.run([*base, *auth, "GET", "cli"], capture_output=True, text=True, timeout=10)
    assert out.stdout.strip() == "hello"
    out = subprocess.run([*base, "PING"], capture_output=True, text=True, timeout=10)
    assert "PONG" not in out.stdout


def test_config_set_reloads_certificates(start_server, certs):
    s, port = started(start_server, certs)
    r = redis.Redis(host=HOST, port=s.port)
    with pytest.raises(redis.ResponseError) as e:
        r.config_set("tls-cert-file", str(certs / "garbage.pem"))
    assert str(e.value) == ("CONFIG SET failed (possibly related to argument 'tls-cert-file') - "
                            "Unable to update TLS configuration. Check server logs.")
    assert r.config_get("tls-cert-file")["tls-cert-file"] == str(certs / "server.crt")
    assert tls_client(certs, port).ping() is True
    before = tls_client(certs, port)
    before.ping()
    assert r.config_set("tls-cert-file", str(certs / "server2.crt"), "tls-key-file", str(certs / "server2.key")) is True
    conn = tls_client(certs, port).connection_pool.get_connection()
    conn.send_command("PING")
    assert conn.read_response() == b"PONG"
    assert conn._sock.getpeercert()["subject"] == ((("commonName", "server2"),),)
    # A connection made before the change keeps working.
    assert before.ping() is True
    assert r.info("server")["tcp_port"] == s.port


def test_tls_only_and_bad_files_at_start(certs, tmp_path):
    port = free_port()
    log = tmp_path / "log"
    args = [server_binary(), "--port", "0", "--bind", HOST, "--save", "", "--logfile", str(log), *tls_args(certs, port)]
    proc = subprocess.Popen(args, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        c = tls_client(certs, port)
        while refused(c):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        assert c.ping() is True
        assert c.info("server")["tcp_port"] == port
        c.close()
    finally:
        proc.terminate()
        proc.wait(10)
    bad = [server_binary(), "--port", "0", "--bind", HOST, "--save", "", "--logfile", str(log),
           *tls_args(certs, free_port(), "--tls-cert-file", str(certs / "garbage.pem"))]
    assert subprocess.run(bad, cwd=tmp_path, timeout=10).returncode == 1
    text = log.read_text()
    assert f"Failed to load certificate: {certs / 'garbage.pem'}: " in text
    assert "Failed to configure TLS. Check logs for more info." in text
    no_ca = [server_binary(), "--port", "0", "--bind", HOST, "--save", "", "--logfile", str(log),
             "--tls-port", str(free_port()), "--tls-cert-file", str(certs / "server.crt"),
             "--tls-key-file", str(certs / "server.key")]
    assert subprocess.run(no_ca, cwd=tmp_path, timeout=10).returncode == 1
    assert "Either tls-ca-cert-file or tls-ca-cert-dir must be specified" in log.read_text()


def test_protocols_ciphersuites_and_ca_dir(start_server, certs, tmp_path):
    cadir = tmp_path / "cas"
    cadir.mkdir()
    # Named by subject hash, as OpenSSL looks CAs up in a directory.
    h = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in", str(certs / "ca.crt")],
                       capture_output=True, text=True, check=True).stdout.strip()
    shutil.copy(certs / "ca.crt", cadir / f"{h}.0")
    port = free_port()
    start_server("--tls-port", str(port), "--tls-cert-file", str(certs / "server.crt"),
                 "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-dir", str(cadir),
                 "--tls-protocols", "TLSv1.2", "--tls-ciphers", "ECDHE-ECDSA-CHACHA20-POLY1305")
    conn = tls_client(certs, port).connection_pool.get_connection()
    conn.send_command("PING")
    assert conn.read_response() == b"PONG"
    assert conn._sock.version() == "TLSv1.2"
    assert conn._sock.cipher()[0] == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert refused(tls_client(certs, port, cert=None))
    port = free_port()
    start_server(*tls_args(certs, port, "--tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"))
    conn = tls_client(certs, port).connection_pool.get_connection()
    conn.send_command("PING")
    assert conn.read_response() == b"PONG"
    assert conn._sock.version() == "TLSv1.3"
    assert conn._sock.cipher()[0] == "TLS_CHACHA20_POLY1305_SHA256"


def test_key_file_pass_decrypts_an_encrypted_key(start_server, certs, tmp_path):
    # The server key, encrypted with a passphrase (PKCS#8, PBES2 with AES-256).
    enc = tmp_path / "server-enc.key"
    _run("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", str(certs / "server.key"),
         "-out", str(enc), "-passout", "pass:s3cret", cwd=tmp_path)
    assert "ENCRYPTED PRIVATE KEY" in enc.read_text()
    s, port = started(start_server, certs, "--tls-key-file", str(enc), "--tls-key-file-pass", "s3cret")
    c = tls_client(certs, port)
    assert c.ping() is True
    c.close()
    # A wrong passphrase, or none, is refused at start with the file named.
    log = tmp_path / "log"
    for extra in (["--tls-key-file-pass", "wrong"], []):
        args = [server_binary(), "--port", "0", "--bind", HOST, "--save", "", "--logfile", str(log),
                *tls_args(certs, free_port(), "--tls-key-file", str(enc), *extra)]
        assert subprocess.run(args, cwd=tmp_path, timeout=10).returncode == 1
        assert f"Failed to load private key: {enc}: " in log.read_text()
        log.unlink()


def _link_up(c: redis.Redis) -> bool:
    return c.info("replication").get("master_link_status") == "up"


def test_tls_replication_syncs_and_streams_over_tls(start_server, certs):
    """tls-replication yes: the replica's link to a primary's TLS port speaks
    TLS (the primary's certificate checked against the CA, the replica's
    own shown for tls-auth-clients), through the full sync and the stream
    after it. A replica whose certificate another CA signed, or one that
    speaks plain TCP to the TLS port, never gets the link up."""
    port = free_port()
    primary = start_server(*tls_args(certs, port))
    pc = tls_client(certs, port)
    pc.set("before", "sync")
    replica = start_server("--tls-replication", "yes", "--tls-ca-cert-file", str(certs / "ca.crt"),
                           "--tls-client-cert-file", str(certs / "client.crt"),
                           "--tls-client-key-file", str(certs / "client.key"))
    rc = redis.Redis(host=replica.host, port=replica.port)
    assert rc.config_get("tls-replication") == {"tls-replication": "yes"}
    rc.replicaof(HOST, port)
    deadline = time.monotonic() + 15
    while not _link_up(rc):
        assert time.monotonic() < deadline, open(replica.log_path).read()[-2000:]
        time.sleep(0.05)
    assert rc.get("before") == b"sync"
    pc.set("after", "x" * 100_000)
    pc.incr("n")
    deadline = time.monotonic() + 10
    while rc.get("n") != b"1":
        assert time.monotonic() < deadline, "the stream did not arrive"
        time.sleep(0.02)
    assert rc.get("after") == b"x" * 100_000
    assert pc.info("replication")["connected_slaves"] == 1
    assert pc.execute_command("WAIT", 1, 2000) == 1
    pc.close()

    for extra in (("--tls-replication", "yes", "--tls-ca-cert-file", str(certs / "ca.crt"),
                   "--tls-client-cert-file", str(certs / "stranger.crt"), "--tls-client-key-file", str(certs / "stranger.key")),
                  ()):
        other = start_server(*extra)
        oc = redis.Redis(host=other.host, port=other.port)
        oc.replicaof(HOST, port)
        time.sleep(1.5)
        assert not _link_up(oc)
        assert tls_client(certs, port).info("replication")["connected_slaves"] == 1


def test_session_cache_timeout_ends_resumption(start_server, certs):
    """A session is resumed within tls-session-cache-timeout seconds and
    not after (a full handshake then); CONFIG SET changes it for new
    sessions. tls-session-caching no resumes none."""
    import socket
    import ssl

    s, port = started(start_server, certs, "--tls-auth-clients", "no", "--tls-session-cache-timeout", "2")
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))

    def connect(session=None):
        raw = socket.create_connection((HOST, port), timeout=5)
        t = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
        t.sendall(b"PING\r\n")
        assert t.recv(64) == b"+PONG\r\n"  # the session ticket came with it
        return t

    # A resumed session is used up (TLS 1.3): each connection's own new
    # session is the one resumed next.
    session = None
    for reused in (False, True, True):
        t = connect(session)
        assert t.session_reused == reused
        session = t.session
        t.close()
    time.sleep(2.5)
    late = connect(session)
    assert not late.session_reused
    late.close()
    c = tls_client(certs, port, cert=None)
    c.config_set("tls-session-caching", "no")
    first = connect()
    session = first.session
    first.close()
    again = connect(session)
    assert not again.session_reused
    again.close()


def _tls_cluster_ports(n: int, taken: set[int]) -> list[int]:
    """n TLS ports whose bus ports (+10000) are free, added to `taken`."""
    ports = []
    for _ in range(n):
        ports.append(clusterlib.free_port_pair(taken))
        taken.update({ports[-1], ports[-1] + clusterlib.BUS_OFFSET})
    return ports


def _tls_cluster_args(certs: Path) -> tuple[str, ...]:
    """A cluster node's settings with the bus and replication over TLS."""
    return ("--cluster-enabled", "yes", "--cluster-node-timeout", "3000", "--tls-cluster", "yes",
            "--tls-replication", "yes", "--tls-client-cert-file", str(certs / "client.crt"),
            "--tls-client-key-file", str(certs / "client.key"))


def test_cluster_bus_speaks_tls_with_tls_cluster(start_server, certs):
    """tls-cluster yes: the bus listens on tls-port + 10000 and every link
    speaks TLS (the peer's chain checked against the CA, each node showing
    its client certificate); nodes announce their TLS port, and a replica
    in the cluster syncs over TLS (tls-replication). A node whose bus speaks
    plain TCP never joins: neither side gets a message through."""
    taken: set[int] = set()
    ports = _tls_cluster_ports(4, taken)
    common = _tls_cluster_args(certs)
    nodes = [start_server(*tls_args(certs, p, *common)) for p in ports]
    cs = [redis.Redis(host=HOST, port=n.port, decode_responses=True) for n in nodes]
    ids = [c.execute_command("CLUSTER", "MYID") for c in cs]
    for p in ports[1:]:
        assert cs[0].execute_command("CLUSTER", "MEET", HOST, p) in (True, "OK")
    for c, (lo, hi) in zip(cs, [(0, 5460), (5461, 10922), (10923, 16383)]):
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
    clusterlib.wait_for(lambda: all(int(c.cluster("INFO")["cluster_known_nodes"]) == 4 for c in cs), 30, "the nodes to meet over TLS")
    cs[3].execute_command("CLUSTER", "REPLICATE", ids[0])
    clusterlib.wait_for(lambda: all(c.cluster("INFO")["cluster_state"] == "ok" for c in cs), 30, "cluster_state ok")
    # Each node's bus is at its TLS port + 10000; a TLS client is shown the
    # TLS ports, a plain one the plain ports (as Redis answers either).
    over_tls = tls_client(certs, ports[1])
    line = next(l for l in over_tls.execute_command("CLUSTER", "NODES").decode().splitlines() if l.startswith(ids[2]))
    assert f"{HOST}:{ports[2]}@{ports[2] + clusterlib.BUS_OFFSET}" in line, line
    over_tls.close()
    line = next(l for l in cs[1].execute_command("CLUSTER", "NODES").splitlines() if l.startswith(ids[2]))
    assert f"{HOST}:{nodes[2].port}@{ports[2] + clusterlib.BUS_OFFSET}" in line, line
    # Writes on the primary reach its replica through the TLS link.
    key = next(k for k in (f"k{i}" for i in range(100000)) if clusterlib.key_slot(k.encode()) <= 5460)
    primary = tls_client(certs, ports[0])
    assert primary.set(key, "over-tls") is True
    assert primary.execute_command("WAIT", 1, 5000) == 1
    assert cs[3].execute_command("READONLY") in (True, "OK") and cs[3].get(key) == "over-tls"
    assert cs[3].info("replication")["master_port"] == ports[0]
    primary.close()

    # Atomic slot migration: the destination's connection to the source's
    # port speaks TLS too.
    moved = [k for k in (f"m{i}" for i in range(20000)) if clusterlib.key_slot(k.encode()) < 100][:50]
    src = tls_client(certs, ports[0])
    for k in moved:
        src.set(k, k)
    task = cs[1].execute_command("CLUSTER", "MIGRATION", "IMPORT", 0, 99)

    def migrated():
        (st,) = cs[1].execute_command("CLUSTER", "MIGRATION", "STATUS", "ID", task)
        st = st if isinstance(st, dict) else dict(zip(st[::2], st[1::2]))
        return st["state"] == "completed"
    clusterlib.wait_for(migrated, 30, "the slot migration over TLS")
    dst = tls_client(certs, ports[1])
    assert [dst.get(k) for k in moved] == [k.encode() for k in moved]
    # MIGRATE takes the cluster's connection type: TLS, to a TLS port.
    target_port = free_port()
    start_server(*tls_args(certs, target_port))
    target = tls_client(certs, target_port)
    assert dst.execute_command("MIGRATE", HOST, target_port, moved[0], 0, 5000) in (True, b"OK")
    assert target.get(moved[0]) == moved[0].encode() and dst.exists(moved[0]) == 0
    for c in (src, dst, target):
        c.close()

    # A node with a plain bus (on a free port pair's bus port) is met but
    # never joins.
    plain_bus = clusterlib.free_port_pair(taken) + clusterlib.BUS_OFFSET
    plain = start_server("--cluster-enabled", "yes", "--cluster-node-timeout", "3000", "--cluster-port", str(plain_bus))
    pc = redis.Redis(host=HOST, port=plain.port, decode_responses=True)
    assert pc.execute_command("CLUSTER", "MEET", HOST, ports[0]) in (True, "OK")
    assert cs[0].execute_command("CLUSTER", "MEET", HOST, plain.port, plain_bus) in (True, "OK")
    time.sleep(3)
    # Each side has at most a node in handshake for the other, never one
    # that completed it.
    for c, bus in ((pc, ports[0] + clusterlib.BUS_OFFSET), (cs[0], plain_bus)):
        met = [l for l in c.execute_command("CLUSTER", "NODES").splitlines() if f"@{bus}" in l]
        assert all("handshake" in l.split()[2] for l in met), met
    assert int(cs[0].cluster("INFO")["cluster_known_nodes"]) in (4, 5)
    assert cs[0].cluster("INFO")["cluster_state"] == "ok"


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")
def test_tls_cluster_bus_works_with_redis_nodes(servers, certs):
    """A cluster of a densekv node and a Redis node, both with tls-cluster:
    each side's TLS (certificates, client certificates, the port + 10000
    bus on the TLS port) is what the other expects, so they meet, agree on
    the slots, and a Redis replica of the densekv primary syncs over TLS."""
    taken: set[int] = set()
    ports = _tls_cluster_ports(3, taken)
    common = _tls_cluster_args(certs)
    ours = servers(server_binary(), *tls_args(certs, ports[0], *common))
    theirs = servers(shutil.which("redis-server"), *tls_args(certs, ports[1], *common))
    replica = servers(shutil.which("redis-server"), *tls_args(certs, ports[2], *common))
    cs = [redis.Redis(host=HOST, port=s.port, decode_responses=True) for s in (ours, theirs, replica)]
    cs[0].execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 8191)
    cs[1].execute_command("CLUSTER", "ADDSLOTSRANGE", 8192, 16383)
    cs[0].execute_command("CLUSTER", "MEET", HOST, ports[1])
    cs[2].execute_command("CLUSTER", "MEET", HOST, ports[0])
    clusterlib.wait_for(lambda: all(int(c.cluster("INFO")["cluster_known_nodes"]) == 3 for c in cs), 30, "the nodes to meet")
    cs[2].execute_command("CLUSTER", "REPLICATE", cs[0].execute_command("CLUSTER", "MYID"))
    clusterlib.wait_for(lambda: all(c.cluster("INFO")["cluster_state"] == "ok" for c in cs), 30, "cluster_state ok")
    # Redis shows a TLS client the densekv node's TLS port and bus.
    over_tls = tls_client(certs, ports[1])
    line = next(l for l in over_tls.execute_command("CLUSTER", "NODES").decode().splitlines() if "myself" not in l
                and f"@{ports[0] + clusterlib.BUS_OFFSET}" in l)
    assert f"{HOST}:{ports[0]}@" in line and "master" in line.split()[2], line
    over_tls.close()
    key = next(k for k in (f"k{i}" for i in range(100000)) if clusterlib.key_slot(k.encode()) <= 8191)
    primary = tls_client(certs, ports[0])
    assert primary.set(key, "v") is True
    assert primary.execute_command("WAIT", 1, 5000) == 1
    primary.close()
    cs[2].execute_command("READONLY")
    assert cs[2].get(key) == "v"
    # A plain client of the Redis node is sent to the densekv node's plain
    # port (redis-py drops the MOVED word from the message).
    with pytest.raises(redis.ResponseError, match=f"^{clusterlib.key_slot(key.encode())} {HOST}:{ours.port}$"):
        cs[1].get(key)
