"""What Valkey users and clients expect from densekv beside Redis's own API.

The `server` scripting global (Valkey's name for `redis`, the same table): every
call form in EVAL and in function libraries, byte for byte against Redis 7.0's
replies to the same script written with `redis.` (Redis has no `server`), errors
included, RESP3 through `server.setresp`, `server.log` in the server's log, and
`server.set_repl` deciding what replicas get.
"""

from __future__ import annotations

import re
import time

import pytest
import redis

from conftest import RawConn, err, server_binary

SHA = re.compile(rb"[0-9a-f]{40}")


def norm(reply: bytes) -> bytes:
    """A reply with script digests blanked (bodies differ in `server.` / `redis.`)."""
    return SHA.sub(b"<sha>", reply)


def real_raw(real_redis) -> RawConn:
    return RawConn(real_redis.connection_pool.connection_kwargs["port"])


# Each script is run on densekv as written and on Redis 7.0 with `server.` read
# as `redis.`; the replies must agree byte for byte.
SCRIPTS = [
    "return server.call('set', KEYS[1], ARGV[1])",
    "server.call('set', KEYS[1], 'v'); return server.call('get', KEYS[1])",
    "return server.pcall('nosuchcommand')",
    "return server.call('nosuchcommand')",
    "return server.pcall('incr', 'k', 'extra')",
    "server.call('set', KEYS[1], 'x'); return server.pcall('incr', KEYS[1])",
    "server.call('set', KEYS[1], 'x'); return server.call('incr', KEYS[1])",
    "return server.call()",
    "return server.call({})",
    "return server.error_reply('MY error')",
    "return server.error_reply('-NOCODE')",
    "return server.error_reply()",
    "return server.status_reply('FINE')",
    "return server.status_reply(1, 2)",
    "return server.sha1hex('Pizza & Mandolino')",
    "local r = server.sha1hex() return r",
    # `return f()` is a tail call: the error still names the script's line.
    "return server.sha1hex()",
    "return server.log(1)",
    "return server.setresp(4)",
    "return server.set_repl(9)",
    "return server.acl_check_cmd('nosuchcommand')",
    "return setmetatable(_G, nil)",
    "return rawset(_G, 'x', 1)",
    "local ok, e = pcall(setmetatable, _G, nil) return e",
    "local ok, e = pcall(server.log, 1) return e",
    "return {server.LOG_DEBUG, server.LOG_VERBOSE, server.LOG_NOTICE, server.LOG_WARNING}",
    "return {server.REPL_NONE, server.REPL_AOF, server.REPL_SLAVE, server.REPL_REPLICA, server.REPL_ALL}",
    "server.log(server.LOG_DEBUG, 'quiet'); return 1",
    "server.log(server.LOG_WARNING)",
    "server.log('x', 'msg')",
    "server.setresp(4)",
    "server.setresp()",
    "server.set_repl(server.REPL_ALL); return 1",
    "server.set_repl(12345)",
    "return server.acl_check_cmd('set', 'k', 'v')",
    "local r = server.acl_check_cmd('nosuchcommand') return r",
    "local r = server.acl_check_cmd() return r",
    "return {server.breakpoint()}",
    "server.debug('x'); return 1",
    "return server.replicate_commands()",
    "return server.register_function('f', function() end)",
    "server.call = 1",
    "server.x = 1",
    "#!lua flags=no-writes\nreturn server.call('set', KEYS[1], 'v')",
    "#!lua flags=no-writes\nreturn server.call('get', KEYS[1])",
    "#!lua flags=bogus\nreturn 1",
    "#!lua name=x\nreturn 1",
    "#!lua\nreturn server.call('ping')",
    "local ok, e = pcall(server.call, 'nosuchcommand'); return e",
]


@pytest.mark.parametrize("body", SCRIPTS)
def test_server_api_as_redis_answers_redis_api(c, real_redis, body):
    ours = c.call("EVAL", body, "1", "vk:key", "val")
    real_redis.flushall()
    theirs = real_raw(real_redis).call("EVAL", body.replace("server.", "redis."), "1", "vk:key", "val")
    assert norm(ours) == norm(theirs), body


def test_server_is_redis_and_versions(r):
    assert r.eval("return server == redis", 0) == 1
    assert r.eval("return rawequal(server, redis)", 0) == 1
    info = r.info("server")
    assert r.eval("return server.SERVER_VERSION", 0).decode() == info["redis_version"]
    assert r.eval("return server.REDIS_VERSION", 0).decode() == info["redis_version"]
    assert r.eval("return server.SERVER_VERSION_NUM == server.REDIS_VERSION_NUM", 0) == 1
    assert r.eval("return server.REDIS_VERSION_NUM", 0) == 0x080400
    assert r.eval("return server.SERVER_NAME", 0) == b"redis"
    # densekv is not Valkey: scripts that test for it find nothing.
    assert r.eval("return type(server.VALKEY_VERSION)", 0) == b"nil"


def test_setresp3_through_server(r3):
    r3.hset("h", mapping={"a": "1"})
    body = "server.setresp(3); return server.call('hgetall', KEYS[1])"
    assert r3.eval(body, 1, "h") == {b"a": b"1"}
    body = "server.setresp(3); local m = server.call('hgetall', KEYS[1]); return m.map.a"
    assert r3.eval(body, 1, "h") == b"1"


def test_setresp3_bytes_match_redis(raw, r, real_redis):
    body = "server.setresp(3); return {server.call('hgetall', KEYS[1]), {double=1.5}, {big_number='12345678901234567890'}}"
    c = raw()
    c.call("HELLO", "3")
    c.call("HSET", "h", "a", "1")
    real = real_raw(real_redis)
    real.call("HELLO", "3")
    real.call("HSET", "h", "a", "1")
    assert c.call("EVAL", body, "1", "h") == real.call("EVAL", body.replace("server.", "redis."), "1", "h")


def test_server_log_reaches_the_log(r, server):
    mark = f"valkey-compat-{time.monotonic_ns()}"
    r.eval(f"server.log(server.LOG_WARNING, '{mark}', 42, {{}}, 'end')", 0)
    r.eval(f"server.log(server.LOG_DEBUG, '{mark}-debug')", 0)
    deadline = time.monotonic() + 5
    while mark not in server.log_tail(200) and time.monotonic() < deadline:
        time.sleep(0.05)
    tail = server.log_tail(200)
    assert f"# {mark} 42  end" in tail
    assert f"{mark}-debug" not in tail


def test_acl_check_cmd_for_the_calling_user(r, new_client):
    r.acl_setuser("vk-limited", enabled=True, nopass=True, commands=["+eval", "+get"], keys=["*"])
    try:
        u = new_client()
        u.execute_command("AUTH", "vk-limited", "x")
        assert u.eval("return server.acl_check_cmd('get', 'k')", 0) == 1
        assert u.eval("return server.acl_check_cmd('set', 'k', 'v')", 0) is None
        with pytest.raises(redis.ResponseError, match="ACL failure in script: User vk-limited has no permissions to run the 'set' command"):
            u.eval("return server.call('set', 'k', 'v')", 0)
    finally:
        r.acl_deluser("vk-limited")


LIB = """#!lua name=vklib
local function getter(keys, args) return server.call('get', keys[1]) end
server.register_function('vk_get', getter)
server.register_function{function_name='vk_set', callback=function(keys, args)
  return server.call('set', keys[1], args[1]) end, description='sets'}
server.register_function{function_name='vk_ro', callback=function(keys, args)
  return server.pcall('set', keys[1], 'x') end, flags={'no-writes'}}
server.log(server.LOG_DEBUG, 'loading vklib')
server.register_function('vk_info', function() return {server.SERVER_VERSION, server == redis, server.LOG_NOTICE} end)
"""


def test_function_library_with_server(r):
    r.function_flush()
    try:
        assert r.function_load(LIB) == b"vklib"
        assert r.fcall("vk_set", 1, "fk", "fv") == b"OK"
        assert r.fcall("vk_get", 1, "fk") == b"fv"
        with pytest.raises(redis.ResponseError) as err:
            r.fcall("vk_ro", 1, "fk")
        assert str(err.value) == "Write commands are not allowed from read-only scripts."
        assert r.fcall("vk_info", 0) == [r.info("server")["redis_version"].encode(), 1, 2]
        libs = r.function_list(library="vklib")
        names = sorted(f[b"name"] if isinstance(f, dict) else f[1] for f in libs[0][5])
        assert names == [b"vk_get", b"vk_info", b"vk_ro", b"vk_set"]
    finally:
        r.function_flush()


# FUNCTION LOAD error texts: those of Redis 7.0 for the same library with `redis.`.
BAD_LIBS = [
    "#!lua name=bad\nserver.register_function('f')",
    "#!lua name=bad\nserver.register_function(1, function() end)",
    "#!lua name=bad\nserver.register_function{function_name='f'}",
    "#!lua name=bad\nserver.register_function{callback=function() end}",
    "#!lua name=bad\nserver.register_function{function_name='f', callback=function() end, flags='x'}",
    "#!lua name=bad\nserver.register_function{function_name='f', callback=function() end, bogus=1}",
    "#!lua name=bad\nserver.call('ping')",
    "#!lua name=bad\nserver.setresp(3)",
    "#!lua name=bad\nlocal x = 1",
    "#!lua name=bad\nserver.register_function('f', function() end)\nserver.register_function('f', function() end)",
]


@pytest.mark.parametrize("code", BAD_LIBS)
def test_function_load_errors_as_redis(c, real_redis, code):
    ours = c.call("FUNCTION", "LOAD", code)
    theirs = real_raw(real_redis).call("FUNCTION", "LOAD", code.replace("server.", "redis."))
    assert ours == theirs, code


def test_texts_of_redis_8(c):
    # Redis 7.2 reworded these two; densekv answers as Redis 8.4 (so does Valkey,
    # with its own product name, which densekv does not take).
    assert c.call("EVAL", "server.log(7, 'msg')", "0").startswith(b"-ERR Invalid log level.")
    assert c.call("EVAL", "server.set_repl()", "0").startswith(b"-ERR redis.set_repl() requires one argument.")


def _wait(cond, what, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_set_repl_decides_what_replicas_get(servers, tmp_path):
    primary = servers(server_binary(), "--appendonly", "yes", "--dir", str(tmp_path))
    replica = servers(server_binary())
    p = redis.Redis(host=primary.host, port=primary.port)
    rr = redis.Redis(host=replica.host, port=replica.port)
    rr.replicaof(primary.host, primary.port)
    _wait(lambda: rr.info("replication").get("master_link_status") == "up", "sync")
    body = """
server.call('set', 'all1', '1')
server.set_repl(server.REPL_NONE)
server.call('set', 'none', '1')
server.set_repl(server.REPL_AOF)
server.call('set', 'aofonly', '1')
server.set_repl(server.REPL_REPLICA)
server.call('set', 'replonly', '1')
server.set_repl(server.REPL_ALL)
server.call('set', 'all2', '1')
return 1
"""
    assert p.eval(body, 0) == 1
    # A later plain write: the replica has everything before it once it has this.
    p.set("after", "1")
    _wait(lambda: rr.get("after") == b"1", "the stream")
    assert sorted(rr.keys("*")) == sorted([b"after", b"all1", b"all2", b"replonly"])
    assert sorted(p.keys("*")) == sorted([b"after", b"aofonly", b"all1", b"all2", b"none", b"replonly"])
    # The AOF: what was not held from it.
    p.execute_command("CONFIG", "SET", "appendfsync", "always")
    p.set("flush", "1")
    aof = b"".join(f.read_bytes() for f in sorted(tmp_path.rglob("*.aof")) if ".incr." in f.name)
    for key in (b"all1", b"aofonly", b"all2"):
        assert b"\r\n" + key + b"\r\n" in aof, key
    for key in (b"none", b"replonly"):
        assert b"\r\n" + key + b"\r\n" not in aof, key
    # The hold ends with the script: the next one replicates as usual.
    p.eval("server.set_repl(server.REPL_NONE)", 0)
    p.eval("return server.call('set', 'later', '1')", 0)
    _wait(lambda: rr.get("later") == b"1", "a write after a held script")


# ---------------------------------------------------------------- string encodings


# Each case: commands run on a fresh key `e`, then OBJECT ENCODING e, which
# must be what Redis 7.0 answers after the same commands.
ENCODING_CASES = [
    [("SET", "e", "foo")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar")],
    [("APPEND", "e", "bar")],
    [("APPEND", "e", "12")],
    [("SET", "e", "12"), ("APPEND", "e", "3")],
    [("SET", "e", "foo"), ("APPEND", "e", "")],
    [("SET", "e", "x" * 40), ("APPEND", "e", "y" * 10)],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("SET", "e", "foobar")],
    [("SET", "e", "foo"), ("SETRANGE", "e", "1", "xy")],
    [("SETRANGE", "e", "2", "ab")],
    [("SET", "e", "foo"), ("SETRANGE", "e", "0", "")],
    [("SET", "e", "foo"), ("SETBIT", "e", "1", "1")],
    [("SET", "e", "foo"), ("SETBIT", "e", "1", "1"), ("SETBIT", "e", "1", "1")],
    [("SETBIT", "e", "7", "1")],
    [("SET", "e", "foo"), ("BITFIELD", "e", "SET", "u8", "0", "65")],
    [("SET", "e", "foo"), ("BITFIELD", "e", "GET", "u8", "0")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("GETRANGE", "e", "0", "1")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("RENAME", "e", "e2"), ("RENAME", "e2", "e")],
    [("SET", "e", "1.5"), ("APPEND", "e", "0"), ("INCRBYFLOAT", "e", "1")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("COPY", "e", "e2"), ("DEL", "e"), ("RENAME", "e2", "e")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("MOVE", "e", "1"), ("SELECT", "1"), ("MOVE", "e", "0"), ("SELECT", "0")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("GETSET", "e", "baz")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("EXPIRE", "e", "100")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("EXPIRE", "e", "100"), ("PERSIST", "e")],
    [("SET", "e", "foo", "EX", "100"), ("SETRANGE", "e", "0", "b"), ("PEXPIRE", "e", "50000")],
    [("SET", "e", "foo"), ("SETBIT", "e", "1", "1"), ("GETEX", "e", "EX", "100")],
    [("SET", "e", "foo"), ("APPEND", "e", "bar"), ("EXPIRE", "e", "100"), ("SET", "e", "foo", "KEEPTTL")],
]


@pytest.mark.parametrize("cmds", ENCODING_CASES, ids=lambda cmds: " ; ".join(" ".join(c) for c in cmds))
def test_string_encoding_as_redis(r, real_redis, cmds):
    real_redis.flushall()
    for c in cmds:
        ours_err = theirs_err = None
        try:
            r.execute_command(*c)
        except redis.ResponseError as e:
            ours_err = str(e)
        try:
            real_redis.execute_command(*c)
        except redis.ResponseError as e:
            theirs_err = str(e)
        assert ours_err == theirs_err, c
    assert r.object("encoding", "e") == real_redis.object("encoding", "e")


# ---------------------------------------------------------------- COMMANDLOG

COMMANDLOG_DEFAULTS = {
    "slowlog-log-slower-than": "10000",
    "slowlog-max-len": "128",
    "commandlog-request-larger-than": "1048576",
    "commandlog-large-request-max-len": "128",
    "commandlog-reply-larger-than": "1048576",
    "commandlog-large-reply-max-len": "128",
}


@pytest.fixture
def commandlog(r):
    """Command logs empty, thresholds back to their defaults afterwards."""
    for t in ("slow", "large-request", "large-reply"):
        r.execute_command("COMMANDLOG", "RESET", t)
    yield r
    for k, v in COMMANDLOG_DEFAULTS.items():
        r.config_set(k, v)


def resp_len(*args):
    return len(RawConn.encode(*args))


def test_commandlog_defaults_and_slowlog_aliases(commandlog):
    r = commandlog
    for k, v in COMMANDLOG_DEFAULTS.items():
        assert r.config_get(k) == {k: v}
    # Valkey's names for the slow log's two parameters are the same values.
    assert r.config_get("commandlog-execution-slower-than") == {"commandlog-execution-slower-than": "10000"}
    assert r.config_get("commandlog-slow-execution-max-len") == {"commandlog-slow-execution-max-len": "128"}
    r.config_set("commandlog-execution-slower-than", "0")
    assert r.config_get("slowlog-log-slower-than") == {"slowlog-log-slower-than": "0"}
    r.config_set("commandlog-slow-execution-max-len", "2")
    assert r.config_get("slowlog-max-len") == {"slowlog-max-len": "2"}


def test_commandlog_slow_is_the_slow_log(commandlog):
    r = commandlog
    r.config_set("slowlog-log-slower-than", "0")
    r.set("a", "1")
    r.get("a")
    slow = r.execute_command("COMMANDLOG", "GET", "-1", "slow")
    assert [e[3] for e in slow[:2]] == [[b"GET", b"a"], [b"SET", b"a", b"1"]]
    first = slow[0]
    assert first[4].startswith(b"127.0.0.1:") and first[5] == b"" and first[2] >= 0
    r.config_set("slowlog-log-slower-than", "-1")
    assert r.execute_command("COMMANDLOG", "LEN", "slow") == r.slowlog_len() == len(slow) + 1
    assert [e["id"] for e in r.slowlog_get(3)][2] == slow[1][0]
    # Nothing of the slow log's traffic went to the other two logs.
    assert r.execute_command("COMMANDLOG", "LEN", "large-request") == 0
    assert r.execute_command("COMMANDLOG", "LEN", "large-reply") == 0
    r.execute_command("COMMANDLOG", "RESET", "slow")
    r.get("a")
    assert r.execute_command("COMMANDLOG", "LEN", "slow") == 0
    assert r.slowlog_len() == 0


def test_commandlog_large_request_and_reply(commandlog, new_client):
    r = commandlog
    r.config_set("commandlog-request-larger-than", "1000")
    r.config_set("commandlog-reply-larger-than", "1000")
    big = "x" * 2000
    named = new_client()
    named.client_setname("loader")
    named.set("k", big)
    named.set("small", "y")
    named.get("small")
    named.get("k")
    req = r.execute_command("COMMANDLOG", "GET", "-1", "large-request")
    assert len(req) == 1
    e = req[0]
    assert e[2] == resp_len("SET", "k", big) == 2029
    assert e[3] == [b"SET", b"k", b"x" * 128 + b"... (1872 more bytes)"]
    assert e[5] == b"loader"
    rep = r.execute_command("COMMANDLOG", "GET", "10", "large-reply")
    assert len(rep) == 1
    assert rep[0][2] == len(b"$2000\r\n" + big.encode() + b"\r\n") and rep[0][3] == [b"GET", b"k"]
    # A threshold is inclusive; -1 disables, and so does a max-len of 0
    # (which keeps what is there, as Valkey does); a lower max-len applies
    # at the next command.
    r.config_set("commandlog-reply-larger-than", str(len(b"$1\r\ny\r\n")))
    r.get("small")
    assert r.execute_command("COMMANDLOG", "LEN", "large-reply") == 2
    r.config_set("commandlog-large-reply-max-len", "0")
    r.get("small")
    assert r.execute_command("COMMANDLOG", "LEN", "large-reply") == 2
    r.config_set("commandlog-reply-larger-than", "-1")
    r.config_set("commandlog-large-reply-max-len", "1")
    r.get("k")
    assert r.execute_command("COMMANDLOG", "LEN", "large-reply") == 2
    r.config_set("commandlog-reply-larger-than", "100000")
    r.get("k")
    assert r.execute_command("COMMANDLOG", "LEN", "large-reply") == 1
    # RESET clears one log only; ids go on counting.
    r.config_set("commandlog-request-larger-than", "0")
    r.ping()
    n = r.execute_command("COMMANDLOG", "LEN", "large-request")
    assert n >= 2
    assert r.execute_command("COMMANDLOG", "RESET", "large-reply") == b"OK"
    assert r.execute_command("COMMANDLOG", "LEN", "large-request") >= n
    last_id = r.execute_command("COMMANDLOG", "GET", "1", "large-request")[0][0]
    assert r.execute_command("COMMANDLOG", "RESET", "large-request") == b"OK"
    r.ping()
    assert r.execute_command("COMMANDLOG", "GET", "1", "large-request")[0][0] > last_id
    r.config_set("commandlog-large-request-max-len", "3")
    for _ in range(5):
        r.ping()
    assert r.execute_command("COMMANDLOG", "LEN", "large-request") == 3


def test_commandlog_redacts_secrets(commandlog, raw):
    r = commandlog
    r.config_set("commandlog-request-larger-than", "0")
    assert raw().call("AUTH", "nobody", "secret").startswith(b"-WRONGPASS")
    logged = [e[3] for e in r.execute_command("COMMANDLOG", "GET", "-1", "large-request")]
    assert [b"AUTH", b"(redacted)", b"(redacted)"] in logged
    assert not any(b"secret" in a for argv in logged for a in argv)


def test_commandlog_errors_and_table(commandlog, raw):
    r = commandlog
    bad_type = "type should be one of the following: slow, large-request, large-reply"
    for cmd in (("GET", "1", "slowest"), ("LEN", "nope"), ("RESET", "")):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("COMMANDLOG", *cmd)
        assert str(e.value) == bad_type
    for count in ("-2", "x"):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("COMMANDLOG", "GET", count, "slow")
        assert str(e.value) == "count should be greater than or equal to -1"
    c = raw()
    assert c.call("COMMANDLOG", "GET", "1") == b"-ERR wrong number of arguments for 'commandlog|get' command\r\n"
    assert c.call("COMMANDLOG", "LEN") == b"-ERR wrong number of arguments for 'commandlog|len' command\r\n"
    assert c.call("COMMANDLOG", "FOO").startswith(b"-ERR unknown subcommand 'FOO'. Try COMMANDLOG HELP.")
    help_lines = r.execute_command("COMMANDLOG", "HELP")
    assert help_lines[0].startswith(b"COMMANDLOG <subcommand>") and help_lines[-2] == b"HELP"
    info = c.call("COMMAND", "INFO", "commandlog")
    for sub in (b"commandlog|get", b"commandlog|len", b"commandlog|reset", b"commandlog|help"):
        assert sub in info
    assert b"+@admin\r\n" in info and b"+@dangerous\r\n" in info
    assert b"commandlog" in c.call("COMMAND", "DOCS", "commandlog")


# ---------------------------------------------------------------- CLIENT CAPA / filters


def test_client_capa_redirect_on_a_replica(servers):
    # Valkey's replica-redirect behaviour: a client that declared CAPA
    # redirect is sent to the primary for reads and writes; others are not.
    primary = servers(server_binary())
    replica = servers(server_binary())
    rr = redis.Redis(host=replica.host, port=replica.port)
    queued = redis.Redis(host=replica.host, port=replica.port, single_connection_client=True)
    assert queued.execute_command("CLIENT", "CAPA", "redirect") == b"OK"
    queued.execute_command("MULTI")
    assert queued.execute_command(b"SET", "foo", "bar") == b"QUEUED"
    rr.replicaof(primary.host, primary.port)
    _wait(lambda: rr.info("replication").get("master_link_status") == "up", "sync")
    target = "REDIRECT %s:%d" % (primary.host, primary.port)
    # EXEC of a queued write: the transaction is discarded, the answer is REDIRECT.
    with pytest.raises(redis.ResponseError, match="^" + target + "$"):
        queued.execute_command("EXEC")
    with pytest.raises(redis.ResponseError, match="^EXEC without MULTI$"):
        queued.execute_command("EXEC")
    # A write refused inside MULTI flags the transaction.
    queued.execute_command("MULTI")
    with pytest.raises(redis.ResponseError, match="^" + target + "$"):
        queued.execute_command("SET", "foo", "bar")
    with pytest.raises(redis.exceptions.ExecAbortError):
        queued.execute_command("EXEC")
    # Without the capability: reads served, writes refused as read-only.
    assert rr.get("foo") is None
    with pytest.raises(redis.exceptions.ReadOnlyError):
        rr.set("foo", "bar")
    c = redis.Redis(host=replica.host, port=replica.port, single_connection_client=True)
    assert c.execute_command("CLIENT", "CAPA", "REDIRECT", "something-new") == b"OK"
    for cmd in (("SET", "foo", "bar"), ("GET", "foo")):
        with pytest.raises(redis.ResponseError, match="^" + target + "$"):
            c.execute_command(*cmd)
    assert c.ping() is True and c.echo("x") == b"x"
    # READONLY (accepted standalone from such a client) keeps reads here.
    assert c.execute_command(b"READONLY") == b"OK"
    assert c.get("foo") is None
    with pytest.raises(redis.ResponseError, match="^" + target + "$"):
        c.set("foo", "bar")
    assert c.execute_command(b"READWRITE") == b"OK"
    with pytest.raises(redis.ResponseError, match="^" + target + "$"):
        c.get("foo")
    # A client without the capability still gets Redis's answer to READONLY.
    with pytest.raises(redis.ResponseError, match="^This instance has cluster support disabled$"):
        rr.execute_command("READONLY")
    # On the primary nothing is redirected.
    p = redis.Redis(host=primary.host, port=primary.port, single_connection_client=True)
    p.execute_command("CLIENT", "CAPA", "redirect")
    assert p.set("foo", "bar") is True and p.get("foo") == b"bar"
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'client|capa'"):
        p.execute_command("CLIENT", "CAPA")


def listed(r, *filters):
    return sorted(int(line.split(" ")[0][3:]) for line in r.execute_command("CLIENT", "LIST", *filters).decode().splitlines())


def _named_clients(r, new_client):
    """The caller's id and two more clients: one named `alpha` with library
    `mylib` 1.2 in db 3, one with CAPA redirect. The clients stay open as
    long as the test's fixture keeps them."""
    a = new_client()
    a.client_setname("alpha")
    a.client_setinfo("LIB-NAME", "mylib")
    a.client_setinfo("LIB-VER", "1.2")
    a.select(3)
    b = new_client()
    b.execute_command("CLIENT", "CAPA", "redirect")
    return r.client_id(), a.client_id(), b.client_id()


def test_client_list_and_kill_filters_of_valkey(r, new_client):
    me, a_id, b_id = _named_clients(r, new_client)
    everyone = listed(r)
    assert {me, a_id, b_id} <= set(everyone)
    assert listed(r, "NAME", "alpha") == [a_id]
    assert listed(r, "LIB-NAME", "mylib") == [a_id]
    assert listed(r, "LIB-VER", "1.2", "LIB-NAME", "mylib") == [a_id]
    assert listed(r, "LIB-VER", "1.3") == []
    assert listed(r, "DB", "3") == [a_id]
    assert listed(r, "CAPA", "r") == [b_id]
    assert listed(r, "IP", "127.0.0.1") == everyone
    assert listed(r, "IP", "127.0.0") == []
    assert listed(r, "FLAGS", "N", "ID", str(a_id), str(b_id)) == sorted([a_id, b_id])
    assert listed(r, "ID", str(me), str(a_id), "NAME", "alpha") == [a_id]
    assert listed(r, "SKIPME", "yes", "ID", str(me), str(a_id)) == [a_id]
    assert listed(r, "TYPE", "normal", "DB", "3") == [a_id]
    assert listed(r, "IDLE", "1000") == []
    time.sleep(1.1)
    r.ping()
    assert me not in listed(r, "IDLE", "1") and a_id in listed(r, "IDLE", "1")
    ps = new_client()
    ps_p = ps.pubsub()
    ps_p.subscribe("ch")
    ps_p.get_message(timeout=1)
    assert len(listed(r, "FLAGS", "P")) == 1
    for filters, msg in (
        (("IDLE", "0"), "idle should be greater than 0"),
        (("IDLE", "x"), "idle is not an integer or out of range"),
        (("FLAGS", "Nz"), "Unknown flags found in the provided filter: Nz"),
        (("CAPA", "x"), "Unknown capa found in the provided filter: x"),
        (("DB", "99"), "DB number should be between 0 and 15"),
        (("DB", "x"), "DB is not an integer or out of range"),
        (("ID", "x"), "Invalid client ID"),
        (("NAME",), "syntax error"),
        (("BOGUS", "1"), "syntax error"),
    ):
        assert err(r.execute_command, "CLIENT", "LIST", *filters) == msg, filters
    # KILL takes the same filters (SKIPME yes by default).
    assert r.execute_command("CLIENT", "KILL", "NAME", "nobody") == 0
    assert r.execute_command("CLIENT", "KILL", "LIB-NAME", "mylib", "DB", "3") == 1
    assert r.execute_command("CLIENT", "KILL", "CAPA", "r") == 1
    assert r.execute_command("CLIENT", "KILL", "ID", str(me)) == 0
    assert err(r.execute_command, "CLIENT", "KILL", "ID", "x") == "client-id should be greater than 0"
    _wait(lambda: a_id not in listed(r) and b_id not in listed(r), "killed clients gone")
    ps_p.close()


def test_client_list_and_kill_not_filters_of_valkey9(r, new_client):
    # Valkey 9's NOT- forms: each one leaves out the clients its plain form
    # would select; several combine with each other and with plain filters.
    me, a_id, b_id = _named_clients(r, new_client)
    r.execute_command("ACL", "SETUSER", "notuser", "on", ">pw", "+@all", "~*")
    try:
        u = new_client()
        u.execute_command("AUTH", "notuser", "pw")
        u_id = u.client_id()
        ours = [me, a_id, b_id, u_id]

        def mine(*filters):
            return [i for i in listed(r, *filters) if i in ours]

        assert mine() == sorted(ours)
        assert mine("NOT-ID", str(a_id)) == sorted([me, b_id, u_id])
        assert mine("NOT-ID", str(a_id), str(b_id)) == sorted([me, u_id])
        assert mine("NOT-NAME", "alpha") == sorted([me, b_id, u_id])
        assert mine("NOT-LIB-NAME", "mylib") == sorted([me, b_id, u_id])
        assert mine("NOT-LIB-VER", "1.2") == sorted([me, b_id, u_id])
        assert mine("NOT-DB", "0") == [a_id]
        assert mine("NOT-CAPA", "r") == sorted([me, a_id, u_id])
        assert mine("NOT-USER", "default") == [u_id]
        assert mine("NOT-TYPE", "normal") == []
        assert mine("NOT-TYPE", "pubsub") == sorted(ours)
        assert mine("NOT-IP", "127.0.0.1") == []
        assert mine("NOT-IP", "10.0.0.1") == sorted(ours)
        me_addr = r.client_info()["addr"]
        me_laddr = r.client_info()["laddr"]
        assert mine("NOT-ADDR", me_addr) == sorted([a_id, b_id, u_id])
        assert mine("NOT-LADDR", me_laddr) == []
        assert mine("NOT-FLAGS", "N") == []
        assert mine("NOT-FLAGS", "P") == sorted(ours)
        # NOT- beside plain filters and beside each other.
        assert mine("DB", "0", "NOT-ID", str(me), "NOT-CAPA", "r") == [u_id]
        assert mine("NOT-NAME", "alpha", "NOT-USER", "notuser", "SKIPME", "yes") == [b_id]
        for filters, msg in (
            (("NOT-FLAGS", "Nz"), "Unknown flags found in the NOT-FLAGS filter: Nz"),
            (("NOT-CAPA", "x"), "Unknown capa found in the NOT-CAPA filter: x"),
            (("NOT-DB", "99"), "DB number should be between 0 and 15"),
            (("NOT-DB", "x"), "DB is not an integer or out of range"),
            (("NOT-ID", "x"), "Invalid client ID"),
            (("NOT-ID", "0"), "client-id should be greater than 0"),
            (("NOT-TYPE", "bogus"), "Unknown client type 'bogus'"),
            (("NOT-USER", "nosuchuser"), "No such user 'nosuchuser'"),
            (("NOT-SKIPME", "yes"), "syntax error"),
            (("NOT-MAXAGE", "5"), "syntax error"),
            (("NOT-IDLE", "5"), "syntax error"),
            (("NOT-NAME",), "syntax error"),
        ):
            assert err(r.execute_command, "CLIENT", "LIST", *filters) == msg, filters
        # KILL: everyone of ours but the caller (SKIPME) and the spared ones.
        assert err(r.execute_command, "CLIENT", "KILL", "NOT-ID", "x") == "client-id should be greater than 0"
        assert r.execute_command("CLIENT", "KILL", "ID", str(a_id), str(b_id), str(u_id), "NOT-NAME", "alpha",
                                 "NOT-USER", "notuser") == 1
        _wait(lambda: b_id not in listed(r), "killed client gone")
        assert a_id in listed(r) and u_id in listed(r)
        assert r.execute_command("CLIENT", "KILL", "ID", str(a_id), str(u_id), "NOT-LIB-VER", "1.2") == 1
        _wait(lambda: u_id not in listed(r), "killed client gone")
        assert a_id in listed(r)
        help_text = b"\n".join(r.execute_command("CLIENT", "HELP"))
        assert b"NOT-<option>" in help_text and b"CAPA <capability>" in help_text
    finally:
        r.execute_command("ACL", "DELUSER", "notuser")
