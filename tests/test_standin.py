"""densekv-server standing in for redis-server: started the way service units, containers
and Redis's own test suite start redis-server (a config file, --options, stdin), it must
accept every Redis directive, refuse unknown ones as Redis does, log Redis's lines in
Redis's order and format, keep a pid file, and shut down cleanly on SIGTERM, SIGINT and
SHUTDOWN.

Each test starts its own server process from the binary (a free loopback port, a fresh
directory) and stops it by the pid it started.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

from conftest import HOST, err, free_port, ping, server_binary

REDIS_VERSION = "8.4.0"
# pid:role dd Mon yyyy hh:mm:ss.mmm level-char message
LINE = re.compile(r"^(\d+):([CMS]) \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d\.\d{3} ([.\-*#]) (.*)$")


class Proc:
    """One server process: its arguments, working directory and captured stdout/stderr."""

    def __init__(self, args: list[str], workdir: Path, stdin: bytes | None = None):
        self.workdir = workdir
        self.out_path = workdir / "stdout.log"
        self.err_path = workdir / "stderr.log"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as errf:
            self.proc = subprocess.Popen([server_binary(), *args], cwd=workdir,
                                         stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                         stdout=out, stderr=errf)
        if stdin is not None:
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def messages(self) -> list[str]:
        """The message part of every regular log line on stdout."""
        return [m.group(4) for m in map(LINE.match, self.out().splitlines()) if m]

    def wait_log(self, needle: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.out():
                return
            time.sleep(0.02)
        raise AssertionError(f"{needle!r} not logged within {timeout}s:\n{self.out()}\n{self.err()}")

    def wait_ready(self, port: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode}:\n{self.out()}\n{self.err()}")
            if ping(port, timeout=0.5) is not None:
                return
            time.sleep(0.02)
        raise AssertionError(f"no PING reply on {port}:\n{self.out()}")

    def wait(self, timeout: float = 10.0) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workdir():
    d = Path(tempfile.mkdtemp(prefix="densekv-standin-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def start(workdir):
    """start(*args, stdin=None) -> Proc in the test's directory; killed after the test."""
    made: list[Proc] = []

    def make(*args: str, stdin: bytes | None = None) -> Proc:
        p = Proc(list(args), workdir, stdin)
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop()


def client(port: int) -> redis.Redis:
    return redis.Redis(host=HOST, port=port, socket_timeout=10, decode_responses=True)


def config_get(port: int, name: str) -> str:
    return client(port).config_get(name)[name]


def fatal_block(line_no: int, line: str, reason: str) -> str:
    return (f"\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***\n"
            f"Reading the configuration file, at line {line_no}\n>>> '{line}'\n{reason}\n")


# ---- config files and directives -------------------------------------------------------


def test_config_file_with_many_directives(start, workdir):
    port = free_port()
    (workdir / "extra.conf").write_text("maxmemory-policy allkeys-lru\nsave 60 10000\n")
    conf = workdir / "redis.conf"
    conf.write_text(f"""# a redis.conf with directives of every shape
port {port}
bind {HOST}
daemonize no
logfile ""
loglevel notice
save 3600 1
save 300 100
include {workdir}/extra.conf
client-output-buffer-limit replica 64mb 16mb 90
client-output-buffer-limit pubsub 32mb 8mb 60
oom-score-adj-values 0 100 900
latency-tracking-info-percentiles "50 99"
shutdown-on-sigterm nosave now
hash-max-ziplist-entries 64
slave-serve-stale-data yes
list-max-ziplist-entries 512
maxmemory 100mb
rename-command FLUSHALL ""
rename-command DEBUG DBG
enable-debug-command local
user default on nopass ~* +@all
io-threads 4
activedefrag no
active-defrag-cycle-max 50
lazyfree-lazy-eviction yes
lazyfree-lazy-expire yes
jemalloc-bg-thread yes
disable-thp no
tls-replication yes
cluster-node-timeout 5000
""")
    p = start(str(conf))
    p.wait_ready(port)
    c = client(port)
    cfg = c.config_get("*")
    assert cfg["save"] == "3600 1 300 100 60 10000"
    assert cfg["maxmemory-policy"] == "allkeys-lru"
    assert cfg["client-output-buffer-limit"] == (
        "normal 0 0 0 slave 67108864 16777216 90 pubsub 33554432 8388608 60")
    assert cfg["oom-score-adj-values"] == "0 100 900"
    assert cfg["latency-tracking-info-percentiles"] == "50 99"
    assert cfg["shutdown-on-sigterm"] == "nosave now"
    assert cfg["hash-max-listpack-entries"] == "64"
    assert cfg["replica-serve-stale-data"] == "yes"
    assert cfg["maxmemory"] == str(100 * 1024 * 1024)
    assert cfg["io-threads"] == "4"
    assert cfg["activedefrag"] == "no"
    assert cfg["active-defrag-cycle-max"] == "50"
    assert cfg["disable-thp"] == "no"
    assert cfg["tls-replication"] == "yes"
    assert cfg["cluster-node-timeout"] == "5000"
    assert cfg["dir"] == str(workdir.resolve())
    assert c.config_get("slave-serve-stale-data") == {"slave-serve-stale-data": "yes"}
    assert c.config_get("list-max-ziplist-entries") == {}, "deprecated: accepted, not a parameter"
    # rename-command took effect.
    assert "unknown command" in err(c.execute_command, "FLUSHALL")
    assert "unknown command" in err(c.execute_command, "DEBUG", "SLEEP", "0")
    assert c.execute_command("DBG", "SLEEP", "0") == "OK"
    assert c.info("server")["config_file"] == str(conf)
    # Every setting acts or is refused: none is accepted and ignored, so
    # there is no warning naming any.
    assert not [m for m in p.messages() if "ignored" in m], p.messages()
    assert c.execute_command("ACL", "LIST") == ["user default on nopass sanitize-payload ~* resetchannels +@all"]
    assert "Configuration loaded" in p.messages()


def test_unknown_directive_is_refused_as_redis_does(start, workdir):
    conf = workdir / "bad.conf"
    conf.write_text("port 0\n\n  nosuchdirective 1  \nmaxmemory 1mb\n")
    p = start(str(conf))
    assert p.wait() == 1
    assert p.err() == fatal_block(3, "nosuchdirective 1", "Bad directive or wrong number of arguments")


def test_bad_values_and_arity_are_refused(start, workdir):
    p = start("--port", "abc")
    assert p.wait() == 1
    assert p.err() == fatal_block(2, 'port "abc"', "argument couldn't be parsed into an integer")
    conf = workdir / "arity.conf"
    conf.write_text("maxmemory 1mb 2mb\n")
    p = start(str(conf))
    assert p.wait() == 1
    assert p.err() == fatal_block(1, "maxmemory 1mb 2mb", "wrong number of arguments")
    p = start("--save", "60")
    assert p.wait() == 1
    assert p.err() == fatal_block(2, 'save "60"', "Invalid save parameters")


def test_settings_without_their_mechanism_refuse_to_start(start, workdir):
    """What densekv cannot do is refused at start-up, as Redis refuses it
    where it lacks the mechanism, never accepted with a warning: active
    defragmentation (as a Redis built without jemalloc's support), a
    collation locale other than C's, a module (and a module's setting)."""
    cases = [
        ("activedefrag yes", "Active defragmentation cannot be enabled: densekv keeps small values in its own slab "
         "pages, which jemalloc's defragmentation does not move, and has no defragmenter of its own"),
        ("locale-collate en_US.UTF-8", 'Failed to configure LOCALE: densekv collates strings bytewise, as the C locale '
         'does; only "", C and POSIX are accepted'),
        ("loadmodule /opt/redis/rejson.so", "Can't load module from /opt/redis/rejson.so: densekv does not load Redis modules"),
        ("search.timeout 500", "Module Configuration detected without loadmodule directive or no ApplyConfig call: aborting"),
    ]
    for line, reason in cases:
        conf = workdir / "refused.conf"
        conf.write_text(f"port 0\n{line}\n")
        p = start(str(conf))
        assert p.wait() == 1
        assert p.err() == fatal_block(2, line, reason)
    # Held as in Redis: C's collation, and defragmentation's thresholds while
    # it is off.
    port = free_port()
    conf = workdir / "held.conf"
    conf.write_text(f"port {port}\nbind {HOST}\nlocale-collate C\nactive-defrag-threshold-lower 20\n")
    p = start(str(conf))
    p.wait_ready(port)
    assert config_get(port, "locale-collate") == "C"
    assert config_get(port, "active-defrag-threshold-lower") == "20"


def test_missing_config_file(start, workdir):
    p = start(str(workdir / "none.conf"))
    assert p.wait() == 1
    (msg,) = p.messages()
    assert msg == f"Fatal error, can't open config file '{workdir / 'none.conf'}': No such file or directory"


def test_config_from_stdin(start):
    port = free_port()
    p = start("-", stdin=f"port {port}\nbind {HOST}\nmaxmemory 2mb\n".encode())
    p.wait_ready(port)
    assert config_get(port, "maxmemory") == str(2 * 1024 * 1024)
    assert "Reading config from stdin" in p.messages()


# ---- logging ----------------------------------------------------------------------------


def test_startup_lines_in_redis_order(start):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST, "--logfile", "")
    p.wait_ready(port)
    p.wait_log("Ready to accept connections tcp")
    lines = [LINE.match(l) for l in p.out().splitlines()]
    assert all(lines), p.out()
    assert {m.group(1) for m in lines} == {str(p.pid)}
    msgs = [m.group(4) for m in lines]
    order = [
        "oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo",
        f"Redis version={REDIS_VERSION}, bits=64, commit=00000000, modified=0, pid={p.pid}, just started",
        "Configuration loaded",
        f"Running mode=standalone, port={port}.",
        f" PID: {p.pid}",
        "Server initialized",
        "Ready to accept connections tcp",
    ]
    at = [next(i for i, m in enumerate(msgs) if want in m) for want in order]
    assert at == sorted(at), msgs
    # Before the server is initialised the role is C, as in Redis; then M, at notice level.
    by_msg = {m.group(4): m for m in lines}
    assert by_msg["Configuration loaded"].group(2) == "C"
    assert by_msg["Server initialized"].group(2) == "M"
    assert by_msg["Server initialized"].group(3) == "*"
    assert any(m.startswith("densekv version=") for m in msgs)


def test_logfile_and_loglevel(start, workdir):
    port = free_port()
    log = workdir / "server.log"
    p = start("--port", str(port), "--bind", HOST, "--logfile", str(log), "--loglevel", "warning")
    p.wait_ready(port)
    assert p.out() == ""
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait() == 0
    text = log.read_text()
    marks = [LINE.match(l).group(3) for l in text.splitlines() if LINE.match(l)]
    assert marks and set(marks) == {"#"}, text
    assert "Redis is now ready to exit, bye bye..." in text
    assert "Server initialized" not in text


# ---- crash reports, SIGALRM, watchdog ---------------------------------------------------


def crash(start, workdir, debug_sub: str, *args: str) -> tuple[int, str]:
    """Starts a server logging to a file with `args`, sends DEBUG `debug_sub` (which
    ends it), and returns its exit status and the log."""
    port = free_port()
    log = workdir / "server.log"
    p = start("--port", str(port), "--bind", HOST, "--save", "", "--logfile", str(log),
              "--enable-debug-command", "local", *args)
    p.wait_ready(port)
    with pytest.raises(redis.ConnectionError):
        client(port).execute_command("DEBUG", debug_sub)
    return p.wait(), log.read_text()


def test_a_panic_is_reported_in_the_log_file(start, workdir):
    # Standard error may go nowhere under a service manager: the report goes
    # to the configured log, with the message, the command and a stack trace.
    status, text = crash(start, workdir, "PANIC")
    assert status not in (0, 1)
    assert re.search(r"# Guru Meditation: DEBUG PANIC called at Unix time \d+ #\S+introspection\.rs:\d+$", text, re.M), text
    assert "While running the command debug (2 arguments; their values are not logged)" in text
    trace = text[text.index("------ STACK TRACE ------"):text.index("------ STACK TRACE DONE ------")]
    assert "server::commands::introspection::debug" in trace, trace
    assert "DENSEKV BUG REPORT END" in text


def test_use_exit_on_panic_exits_1_after_the_report(start, workdir):
    status, text = crash(start, workdir, "ASSERT", "--use-exit-on-panic", "yes")
    assert status == 1
    assert "Guru Meditation: DEBUG ASSERT: an assertion that fails, on request" in text


def test_crash_log_enabled_no_leaves_the_report_out(start, workdir):
    status, text = crash(start, workdir, "PANIC", "--crash-log-enabled", "no")
    assert status != 0
    assert "Ready to accept connections" in text and "Guru Meditation" not in text and "STACK TRACE" not in text


def test_sigalrm_is_logged_and_survived(start, workdir):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST, "--save", "")
    p.wait_ready(port)
    os.kill(p.pid, signal.SIGALRM)
    p.wait_log("Received SIGALRM")
    assert re.search(rf"^{p.pid}:signal-handler \(\d+\) Received SIGALRM$", p.out(), re.M), p.out()
    assert client(port).ping() is True


def test_the_watchdog_names_a_stall_and_its_command(start, workdir):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST, "--save", "", "--enable-debug-command", "local")
    p.wait_ready(port)
    c = client(port)
    c.execute_command("DEBUG", "SLEEP", "0.5")
    assert "WATCHDOG" not in p.out()  # off by default
    assert c.config_set("watchdog-period", "200") is True
    c.execute_command("DEBUG", "SLEEP", "1")
    p.wait_log("Watchdog: the command that held the event loop was debug, for")
    msgs = p.messages()
    assert "--- WATCHDOG TIMER EXPIRED ---" in msgs
    busy = [m for m in msgs if m.startswith("The event loop has been busy for")]
    assert len(busy) == 1 and busy[0].endswith("ms (watchdog-period 200 ms)."), msgs
    assert c.ping() is True
    # A quick command after a stall is not reported again.
    c.execute_command("DEBUG", "SLEEP", "0")
    time.sleep(0.3)
    assert p.out().count("WATCHDOG TIMER EXPIRED") == 1
    # Inside EXEC, the command named is the one that held the loop.
    tx = c.pipeline(transaction=True)
    tx.ping().execute_command("DEBUG", "SLEEP", "0.6")
    assert tx.execute() == [True, "OK"]
    deadline = time.monotonic() + 5
    while p.out().count("the command that held the event loop was") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    held = [m for m in p.messages() if m.startswith("Watchdog: the command that held the event loop was")]
    assert len(held) == 2 and all(" was debug, for " in m for m in held), held


# ---- pid file, signals, shutdown -------------------------------------------------------


def test_pidfile_and_sigterm(start, workdir):
    port = free_port()
    pidfile = workdir / "densekv.pid"
    p = start("--port", str(port), "--bind", HOST, "--pidfile", str(pidfile), "--save", "")
    p.wait_ready(port)
    assert pidfile.read_text() == f"{p.pid}\n"
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait() == 0
    assert not pidfile.exists()
    out = p.out()
    assert re.search(rf"^{p.pid}:signal-handler \(\d+\) Received SIGTERM scheduling shutdown\.\.\.$", out, re.M), out
    msgs = p.messages()
    tail = ["User requested shutdown...", "Removing the pid file.", "Redis is now ready to exit, bye bye..."]
    assert [m for m in msgs if m in tail] == tail
    assert "Saving the final RDB snapshot before exiting." not in msgs, "no save points, no save"


def test_default_save_points_and_protected_settings(start):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST)
    p.wait_ready(port)
    c = client(port)
    assert config_get(port, "save") == "3600 1 300 100 60 10000", "Redis's default"
    assert err(c.config_set, "dir", "/") == (
        "CONFIG SET failed (possibly related to argument 'dir') - can't set protected config")
    assert err(c.execute_command, "DEBUG", "HELP").startswith(
        "DEBUG command not allowed. If the enable-debug-command option is set to \"local\"")
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait() == 0
    assert "Saving the final RDB snapshot before exiting." in p.messages()


def test_sigint(start):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST)
    p.wait_ready(port)
    os.kill(p.pid, signal.SIGINT)
    assert p.wait() == 0
    assert "Received SIGINT scheduling shutdown..." in p.out()
    assert p.messages()[-1] == "Redis is now ready to exit, bye bye..."


def test_second_sigint_exits_at_once(start):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST, "--enable-debug-command", "local")
    p.wait_ready(port)
    c = client(port)
    assert c.execute_command("DEBUG", "PAUSE-CRON", "1") == "OK"
    os.kill(p.pid, signal.SIGINT)
    p.wait_log("Received SIGINT scheduling shutdown...")
    os.kill(p.pid, signal.SIGINT)
    assert p.wait() == 1
    assert "You insist... exiting now." in p.out()


def test_signal_with_save_points_goes_through_the_save_seam(start):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST, "--save", "900 1")
    p.wait_ready(port)
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait() == 0
    msgs = p.messages()
    at = msgs.index("Saving the final RDB snapshot before exiting.")
    assert msgs.index("Redis is now ready to exit, bye bye...") > at


def test_shutdown_on_sigterm_nosave(start):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST, "--save", "900 1", "--shutdown-on-sigterm", "nosave")
    p.wait_ready(port)
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait() == 0
    assert "Saving the final RDB snapshot before exiting." not in p.messages()


def test_shutdown_abort_cancels_a_signal(start):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST, "--save", "900 1", "--enable-debug-command", "local")
    p.wait_ready(port)
    c = client(port)
    assert err(c.execute_command, "SHUTDOWN", "ABORT") == "No shutdown in progress."
    assert err(c.execute_command, "SHUTDOWN", "NOSAVE", "ABORT") == "syntax error"
    assert err(c.execute_command, "SHUTDOWN", "SAVE", "NOSAVE") == "syntax error"
    c.execute_command("DEBUG", "PAUSE-CRON", "1")
    os.kill(p.pid, signal.SIGTERM)
    p.wait_log("Received SIGTERM scheduling shutdown...")
    assert c.execute_command("SHUTDOWN", "ABORT") is True  # redis-py turns +OK into True
    p.wait_log("Shutdown manually aborted.")
    c.execute_command("DEBUG", "PAUSE-CRON", "0")
    time.sleep(0.3)
    assert c.ping() is True
    assert p.proc.poll() is None


def test_shutdown_command_and_redis_cli(start, workdir):
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("redis-cli not installed")
    port = free_port()
    pidfile = workdir / "x.pid"
    p = start("--port", str(port), "--bind", HOST, "--pidfile", str(pidfile))
    p.wait_ready(port)
    r = subprocess.run([cli, "-h", HOST, "-p", str(port), "shutdown"], capture_output=True, timeout=10)
    assert r.returncode == 0, r
    assert p.wait() == 0
    assert not pidfile.exists()
    msgs = p.messages()
    assert "User requested shutdown..." in msgs and msgs[-1] == "Redis is now ready to exit, bye bye..."


def test_shutdown_save_uses_the_seam(start):
    port = free_port()
    p = start("--port", str(port), "--bind", HOST)
    p.wait_ready(port)
    with pytest.raises(redis.ConnectionError):
        client(port).execute_command("SHUTDOWN", "SAVE")
    assert p.wait() == 0
    assert "Saving the final RDB snapshot before exiting." in p.messages()


def test_port_in_use(start):
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen()
        port = s.getsockname()[1]
        p = start("--port", str(port), "--bind", HOST)
        assert p.wait() == 1
    msgs = p.messages()
    assert msgs[-1] == f"Failed listening on port {port} (tcp), aborting."
    assert f"Warning: Could not create server TCP listening socket {HOST}:{port}: bind: Address already in use" in msgs
    # The suite waits for " PID: " and then for this line: the PID line comes first.
    assert any(f" PID: {p.pid}" in m for m in msgs[:-1])


def test_version_and_help(start):
    p = start("--version")
    assert p.wait() == 0
    line = p.out().strip()
    assert re.fullmatch(rf"Redis server v={re.escape(REDIS_VERSION)} sha=00000000:0 malloc=jemalloc-[\d.]+ bits=64 "
                        r"build=[0-9a-f]+ densekv=\d+\.\d+\.\d+", line), line
    p = start("-v")
    assert p.wait() == 0 and p.out().startswith("Redis server v=")
    p = start("--help")
    assert p.wait() == 1
    assert p.err().startswith("Usage: ./redis-server [/path/to/redis.conf] [options] [-]\n")
    p = start("--port", "0", "--sentinel")
    assert p.wait() == 1
    assert "Sentinel mode is not supported" in p.err()


def test_daemonize(start, workdir):
    port = free_port()
    pidfile = workdir / "d.pid"
    log = workdir / "d.log"
    p = start("--port", str(port), "--bind", HOST, "--daemonize", "yes", "--pidfile", str(pidfile),
              "--logfile", str(log))
    assert p.wait() == 0, "the starting process returns once the daemon runs"
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.02)
    daemon = int(pidfile.read_text())
    try:
        assert daemon != p.pid
        deadline = time.monotonic() + 10
        while ping(port) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert config_get(port, "daemonize") == "yes"
        os.kill(daemon, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pidfile.exists()
        assert "Redis is now ready to exit, bye bye..." in log.read_text()
    finally:
        try:
            os.kill(daemon, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_debian_redis_conf(start, workdir):
    conf = Path("/etc/redis/redis.conf")
    if not conf.is_file():
        pytest.skip("Debian's redis-server package is not installed")
    port = free_port()
    pidfile = workdir / "debian.pid"
    p = start(str(conf), "--port", str(port), "--dir", str(workdir), "--daemonize", "no",
              "--pidfile", str(pidfile), "--logfile", "", "--supervised", "no")
    p.wait_ready(port)
    c = client(port)
    assert c.ping() is True
    assert config_get(port, "dir") == str(workdir.resolve())
    assert c.set("k", "v") and c.get("k") == "v"
    assert pidfile.read_text() == f"{p.pid}\n"
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait() == 0


DENIED = (
    "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set "
    "for the default user. In this mode connections are only accepted from the loopback interface. If you "
    "want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just "
    "disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by "
    "connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly "
    "accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively "
    "you can just disable the protected mode by editing the Redis configuration file, and setting the protected "
    "mode option to 'no', and then restarting the server. 3) If you started the server manually just for "
    "testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the "
    "default user. NOTE: You only need to do one of the above things in order for the server to start "
    "accepting connections from the outside.\r\n"
).encode()


def non_loopback_ipv4() -> str | None:
    """An address of this host that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_default_bind_with_protected_mode(start):
    """Redis's defaults: every interface (`bind * -::*`), but with no password only loopback
    clients are served; the others get Redis's DENIED explanation."""
    port = free_port()
    p = start("--port", str(port))
    p.wait_ready(port)
    assert config_get(port, "bind") == "* -::*"
    ip = non_loopback_ipv4()
    if ip is None:
        pytest.skip("this host has no non-loopback IPv4 address")
    with socket.create_connection((ip, port), timeout=5) as s:
        s.sendall(b"PING\r\n")
        got = b""
        while not got.endswith(b"\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    assert got == DENIED
    client(port).config_set("protected-mode", "no")
    assert ping(port) is not None
    with socket.create_connection((ip, port), timeout=5) as s:
        s.sendall(b"PING\r\n")
        assert s.recv(100) == b"+PONG\r\n"


# ---- corrupt RDB files and redis-check-rdb ----------------------------------------------

# An RDB file (version 11, no checksum) holding key "k" as a hash ziplist whose blob is junk.
CORRUPT_RDB = b"REDIS0011\xfe\x00\x0d\x01k\x05abcde\xff" + bytes(8)
# The same with a valid ziplist hash {"a": "b"}, and an empty set "e" that must be skipped.
ZIPLIST = (17).to_bytes(4, "little") + (13).to_bytes(4, "little") + (2).to_bytes(2, "little") + \
    b"\x00\x01a" + b"\x03\x01b" + b"\xff"
GOOD_RDB = b"REDIS0011\xfe\x00\x0d\x01k" + bytes([len(ZIPLIST)]) + ZIPLIST + b"\x02\x01e\x00\xff" + bytes(8)


def test_corrupt_rdb_stops_the_server_with_redis_lines(start, workdir):
    (workdir / "dump.rdb").write_bytes(CORRUPT_RDB)
    p = start("--port", str(free_port()))
    assert p.wait() == 1
    out = p.out()
    assert "Hash ziplist integrity check failed" in out
    assert "--- RDB ERROR DETECTED ---" in out
    assert out.count("integrity check failed") >= 2, out
    assert "Terminating server after rdb file reading failure." in p.messages()


def test_empty_keys_are_skipped_and_logged(start, workdir):
    (workdir / "dump.rdb").write_bytes(GOOD_RDB)
    port = free_port()
    p = start("--port", str(port))
    p.wait_ready(port)
    assert client(port).hgetall("k") == {"a": "b"}
    assert client(port).exists("e") == 0
    msgs = p.messages()
    assert "rdbLoadObject skipping empty key: e" in msgs
    assert "Done loading RDB, keys loaded: 1, keys expired: 0, empty keys skipped: 1." in msgs


def test_redis_check_rdb_mode(workdir):
    tool = workdir / "redis-check-rdb"
    tool.symlink_to(os.path.abspath(server_binary()))
    (workdir / "good.rdb").write_bytes(GOOD_RDB)
    (workdir / "bad.rdb").write_bytes(CORRUPT_RDB)
    ok = subprocess.run([str(tool), str(workdir / "good.rdb")], capture_output=True, text=True, timeout=10)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "\\o/ RDB looks OK! \\o/" in ok.stdout and "[info] 1 keys read" in ok.stdout
    bad = subprocess.run([str(tool), str(workdir / "bad.rdb")], capture_output=True, text=True, timeout=10)
    assert bad.returncode == 1
    assert "--- RDB ERROR DETECTED ---" in bad.stdout and "integrity check failed" in bad.stdout
    usage = subprocess.run([str(tool)], capture_output=True, text=True, timeout=10)
    assert usage.returncode == 1 and "Usage:" in usage.stderr


def test_module_load_fails_as_a_module_that_cannot_load(start):
    """densekv loads no Redis modules: MODULE LOAD and LOADEX fail as a
    module that cannot load fails in Redis (its error, a warning in the
    log), UNLOAD finds none; all three are refused first where
    enable-module-command does not allow them, as Redis refuses them."""
    for allowed in ("no", "yes"):
        port = free_port()
        p = start("--port", str(port), "--bind", HOST, "--enable-module-command", allowed)
        p.wait_ready(port)
        c = client(port)
        assert c.execute_command("MODULE", "LIST") == []
        for cmd in (("MODULE", "LOAD", "/opt/rejson.so"), ("MODULE", "LOADEX", "/opt/rejson.so", "ARGS", "x"),
                    ("MODULE", "UNLOAD", "ReJSON")):
            if allowed == "no":
                assert err(c.execute_command, *cmd) == (
                    "MODULE command not allowed. If the enable-module-command option is set to \"local\", you can "
                    "run it from a local connection, otherwise you need to set this option in the configuration "
                    "file, and then restart the server.")
            elif cmd[1] == "UNLOAD":
                assert err(c.execute_command, *cmd) == "Error unloading module: no such module with that name"
            else:
                assert err(c.execute_command, *cmd) == "Error loading the extension. Please check the server logs."
        if allowed == "yes":
            p.wait_log("Module /opt/rejson.so failed to load")


def test_config_set_refuses_what_it_would_ignore(r):
    """A setting for a mechanism densekv lacks answers OK only where that
    changes nothing (as in a Redis without the mechanism); any other value
    is refused rather than accepted and ignored."""
    assert r.config_set("activedefrag", "no")
    with pytest.raises(redis.ResponseError, match="Active defragmentation cannot be enabled"):
        r.config_set("activedefrag", "yes")
    assert r.config_get("activedefrag") == {"activedefrag": "no"}
    with pytest.raises(redis.ResponseError, match="densekv collates strings bytewise"):
        r.config_set("locale-collate", "en_US.UTF-8")
    assert r.config_set("locale-collate", "C")
    assert r.config_set("locale-collate", "")
    assert r.config_set("active-defrag-cycle-max", "30")
    assert r.config_get("active-defrag-cycle-max") == {"active-defrag-cycle-max": "30"}
    assert r.config_set("active-defrag-cycle-max", "25")
