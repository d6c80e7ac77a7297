"""Fixtures for densekv's end-to-end tests.

One densekv-server per test session is started on a free loopback port from the release
binary (override with DENSEKV_BIN, e.g. DENSEKV_BIN=redis-server to check a test against
real Redis). It is stopped by the PID we started, and only that PID. After every test we
check that it is still alive and answering, so a crash fails the test that caused it; the
next test then gets a freshly started server.

Fixtures:
  server        the shared Server (.host, .port, .proc, .alive(), .check_alive(), .log_tail())
  r             redis.Redis, RESP2, bytes replies, one connection; FLUSHALL before the test
  r3            the same with protocol=3 (HELLO 3); FLUSHALL before the test
  new_client    factory: new_client(protocol=2, **redis_kwargs) -> another redis.Redis
  raw           factory: raw() -> RawConn, a plain socket speaking bytes (see RawConn)
  cli           cli(*args, input=None, check=True, timeout=10) -> redis-cli stdout (str)
  start_server  factory: start_server(*extra_args) -> a separate Server for this test
                (for config, persistence or shutdown tests that must not touch the shared one)
  real_redis    redis.Redis on a Debian redis-server of the test module's own (skipped when
                none is installed): for replies compared with Redis's byte for byte
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
DEFAULT_BIN = ROOT / "target" / "release" / "densekv-server"

try:  # Network round-trips make per-example timing meaningless; keep no example database.
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "densekv",
        deadline=None,
        database=None,
        max_examples=50,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "densekv"))
except ImportError:  # pragma: no cover
    pass


def server_binary() -> str:
    """The server executable: $DENSEKV_BIN (a path or a name on PATH) or the release build."""
    env = os.environ.get("DENSEKV_BIN")
    if env:
        found = shutil.which(env)
        if found is None:
            pytest.exit(f"DENSEKV_BIN={env!r} is not an executable", returncode=2)
        return found
    if not DEFAULT_BIN.is_file():
        pytest.exit(f"{DEFAULT_BIN} not found: run `cargo build --release` first", returncode=2)
    return str(DEFAULT_BIN)


def free_port() -> int:
    """A loopback port that was free a moment ago (the caller retries if it is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def ping(port: int, timeout: float = 1.0) -> bytes | None:
    """Send one PING; return the first reply line, or None when nothing answers."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            buf = b""
            while not buf.endswith(b"\r\n"):
                chunk = s.recv(4096)
                if not chunk:
                    return None
                buf += chunk
            return buf
    except OSError:
        return None


class Server:
    """One server process we started, on HOST:port, with its output in a log file."""

    START_TIMEOUT = 15.0
    STOP_TIMEOUT = 10.0

    def __init__(self, binary: str, extra_args: tuple[str, ...] = (), workdir: str | None = None):
        self.binary = binary
        self.extra_args = tuple(extra_args)
        self.host = HOST
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.workdir = workdir or tempfile.mkdtemp(prefix="densekv-test-")
        self.log_path = os.path.join(self.workdir, "server.log")
        # Run in the child before the server starts (limits, signals).
        self.preexec_fn = None

    def __repr__(self) -> str:
        pid = self.proc.pid if self.proc else None
        return f"Server({self.host}:{self.port}, pid={pid})"

    def start(self, attempts: int = 5) -> "Server":
        """Start on a free port, retrying on another port if it fails; wait for PING."""
        last = ""
        for _ in range(attempts):
            self.port = free_port()
            # DEBUG is off by default, as in Redis; the tests use it from loopback.
            args = [self.binary, "--port", str(self.port), "--bind", HOST,
                    "--save", "", "--appendonly", "no", "--enable-debug-command", "local", *self.extra_args]
            with open(self.log_path, "ab") as log:
                log.write(f"--- {' '.join(args)}\n".encode())
                log.flush()
                self.proc = subprocess.Popen(args, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT, preexec_fn=self.preexec_fn)
            deadline = time.monotonic() + self.START_TIMEOUT
            while time.monotonic() < deadline and self.proc.poll() is None:
                reply = ping(self.port, timeout=0.5)
                if reply is not None:
                    return self
                time.sleep(0.05)
            if self.proc.poll() is None:  # alive but never answered: do not retry forever
                self.stop()
                raise RuntimeError(f"{self.binary} did not answer PING on port {self.port} "
                                   f"within {self.START_TIMEOUT}s\n{self.log_tail()}")
            last = f"exit code {self.proc.returncode}"
        raise RuntimeError(f"{self.binary} failed to start ({last})\n{self.log_tail()}")

    def stop(self) -> None:
        """Terminate our process (SIGTERM, then SIGKILL after STOP_TIMEOUT)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(self.STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self, timeout: float = 10.0) -> None:
        """Fail unless the process runs and answers a PING (any reply, even -NOAUTH)."""
        if not self.alive():
            code = self.proc.returncode if self.proc else None
            pytest.fail(f"server {self} died (exit code {code})\n{self.log_tail()}",
                        pytrace=False)
        if ping(self.port, timeout=timeout) is None:
            pytest.fail(f"server {self} is running but did not answer PING within "
                        f"{timeout}s\n{self.log_tail()}", pytrace=False)

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "server log tail:\n" + "\n".join(text[-lines:])

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


class RawConn:
    """A plain TCP connection for byte-exact protocol tests.

    send(b"...") writes bytes as they are; cmd("SET", "k", b"v") writes one RESP array;
    read_reply() returns the exact bytes of one complete RESP2/RESP3 reply; call(*args)
    is cmd + read_reply; read_line() one CRLF-terminated line; expect_closed() waits for
    the server to close the connection.
    """

    def __init__(self, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""

    @staticmethod
    def encode(*args) -> bytes:
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, (int, float)):
                a = str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(parts)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def cmd(self, *args) -> None:
        self.send(self.encode(*args))

    def call(self, *args, timeout: float | None = None) -> bytes:
        self.cmd(*args)
        return self.read_reply(timeout)

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no complete reply; have {self.buf[:200]!r}")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError(f"no complete reply; have {self.buf[:200]!r}") from None
        if not chunk:
            raise ConnectionError(f"connection closed; have {self.buf[:200]!r}")
        self.buf += chunk

    def _line_end(self, start: int, deadline: float) -> int:
        while True:
            i = self.buf.find(b"\r\n", start)
            if i >= 0:
                return i
            self._fill(deadline)

    def _frame(self, pos: int, deadline: float) -> int:
        """Return the offset just past the reply starting at pos, reading as needed."""
        while len(self.buf) <= pos:
            self._fill(deadline)
        kind = self.buf[pos:pos + 1]
        end = self._line_end(pos, deadline)
        head = self.buf[pos + 1:end]
        pos = end + 2
        if kind in b"+-:_,#(":
            return pos
        if kind in b"$=!":  # bulk string, verbatim string, bulk error
            n = int(head)
            if n < 0:
                return pos
            while len(self.buf) < pos + n + 2:
                self._fill(deadline)
            return pos + n + 2
        if kind in b"*~>%|":  # array, set, push, map, attribute
            n = int(head)
            if n < 0:
                return pos
            if kind in b"%|":
                n *= 2
            for _ in range(n):
                pos = self._frame(pos, deadline)
            if kind == b"|":  # an attribute precedes the actual reply
                pos = self._frame(pos, deadline)
            return pos
        raise ValueError(f"not a RESP reply: {kind + head!r}")

    def read_reply(self, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        end = self._frame(0, deadline)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply

    def read_line(self, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        end = self._line_end(0, deadline)
        line, self.buf = self.buf[:end + 2], self.buf[end + 2:]
        return line

    def expect_closed(self, timeout: float | None = None) -> bytes:
        """Wait until the server closes the connection; return what it sent before that."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            try:
                self._fill(deadline)
            except TimeoutError:
                raise
            except OSError:  # closed cleanly (ConnectionError) or reset
                break
        data, self.buf = self.buf, b""
        return data

    def close(self) -> None:
        self.sock.close()


# ---------------------------------------------------------------- server lifecycle


@pytest.fixture(scope="session")
def _server_holder():
    holder = {"server": Server(server_binary()).start()}
    yield holder
    holder["server"].cleanup()


@pytest.fixture(scope="module")
def real_redis():
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server not installed")
    s = Server(exe).start()
    yield redis.Redis(port=s.port)
    s.cleanup()


@pytest.fixture(scope="session")
def server(_server_holder) -> Server:
    """The shared server. Its port can change if a crash forced a restart."""
    return _server_holder["server"]


@pytest.fixture(autouse=True)
def _server_health(request, _server_holder):
    """Restart the shared server if an earlier test killed it; after the test, fail
    it if the server died or stopped answering (teardown runs after client fixtures
    have closed their connections, so a crash on disconnect is caught too)."""
    srv = _server_holder["server"]
    if not srv.alive():
        srv.port = 0
        srv.start()
    yield
    srv.check_alive()


# ---------------------------------------------------------------- clients


@pytest.fixture
def new_client(server):
    """Factory for extra redis.Redis clients; each is one connection, closed after the test."""
    made = []

    def make(protocol: int = 2, **kwargs) -> redis.Redis:
        kwargs.setdefault("decode_responses", False)
        kwargs.setdefault("socket_timeout", 10)
        kwargs.setdefault("single_connection_client", True)
        c = redis.Redis(host=server.host, port=server.port, protocol=protocol, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        try:
            c.close()
        except Exception:
            pass


@pytest.fixture
def r(new_client) -> redis.Redis:
    """RESP2 client with bytes replies on an empty server (FLUSHALL runs first)."""
    c = new_client(protocol=2)
    c.flushall()
    return c


@pytest.fixture
def r3(new_client) -> redis.Redis:
    """RESP3 client (HELLO 3) with bytes replies on an empty server (FLUSHALL runs first)."""
    c = new_client(protocol=3)
    c.flushall()
    return c


@pytest.fixture
def raw(server):
    """Factory for RawConn sockets to the shared server; closed after the test."""
    made = []

    def make(timeout: float = 5.0) -> RawConn:
        c = RawConn(server.port, timeout)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def c(raw, r):
    """A raw connection on a freshly flushed server (`r` flushes before the
    test), for byte-exact replies."""
    return raw()


@pytest.fixture
def cli(server):
    """Run `redis-cli -h 127.0.0.1 -p PORT *args`; return stdout as str.

    input= feeds stdin (e.g. for -x or piped commands); check=True raises on a non-zero
    exit status. Note that redis-cli exits 0 even when the reply is an error.
    """
    exe = shutil.which("redis-cli")
    if exe is None:
        pytest.skip("redis-cli not installed (apt-get install redis-tools)")

    def run(*args, input: str | bytes | None = None, check: bool = True,
            timeout: float = 10) -> str:
        if isinstance(input, str):
            input = input.encode()
        p = subprocess.run([exe, "-h", server.host, "-p", str(server.port), *map(str, args)],
                           input=input, stdin=None if input is not None else subprocess.DEVNULL,
                           capture_output=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"redis-cli {args} exited {p.returncode}: "
                                 f"{p.stderr.decode(errors='replace')}")
        return p.stdout.decode(errors="replace")

    return run


def err(fn, *args, **kw) -> str:
    """The message of the redis.ResponseError that fn(*args, **kw) raises."""
    with pytest.raises(redis.ResponseError) as e:
        fn(*args, **kw)
    return str(e.value)


def ex(client: redis.Redis):
    """A command runner returning replies as parsed from the wire, without redis-py's
    per-command conversions (so scores stay bytes in RESP2)."""

    def run(*args):
        conn = client.connection_pool.get_connection()
        try:
            conn.send_command(*args)
            return conn.read_response()
        finally:
            client.connection_pool.release(conn)

    return run


@pytest.fixture
def start_server():
    """Factory for a separate server with extra arguments, stopped after the test."""
    made = []

    def make(*extra_args: str) -> Server:
        s = Server(server_binary(), tuple(extra_args))
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.cleanup()


@pytest.fixture
def servers():
    """Starts servers of any binary on free ports (`servers(binary, *args)`); stops
    them all at the end of the test."""
    made = []

    def make(binary: str, *args: str) -> Server:
        # As Redis's own test servers: a diskless sync starts at once
        # unless a test asks for the delay.
        s = Server(binary, ("--repl-diskless-sync-delay", "0") + tuple(args))
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.cleanup()
