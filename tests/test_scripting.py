"""Lua scripting: EVAL/EVALSHA/EVAL_RO/EVALSHA_RO and SCRIPT, byte-exact where
Redis's replies are: conversions both ways in RESP2 and RESP3, error texts
with their script location, pcall, the sandbox, read-only scripts, shebang
flags, the script cache, key extraction, MULTI and CLIENT PAUSE."""

import hashlib
import time

import pytest
import redis


def sha(body: str) -> str:
    return hashlib.sha1(body.encode()).hexdigest()


def loc(body: str, line: int = 1) -> str:
    return f" script: {sha(body)}, on @user_script:{line}."


# ---------------------------------------------------------------- Lua -> reply


@pytest.mark.parametrize("body,expected", [
    ("return 'hello'", b"$5\r\nhello\r\n"),
    ("return 100.5", b":100\r\n"),
    ("return -3.9", b":-3\r\n"),
    ("return true", b":1\r\n"),
    ("return false", b"$-1\r\n"),
    ("return nil", b"$-1\r\n"),
    ("return {ok='fine'}", b"+fine\r\n"),
    ("return {ok='a\\r\\nb'}", b"+a  b\r\n"),
    ("return {err='ERR this is an error'}", b"-ERR this is an error\r\n"),
    ("return {1,2,3,'ciao',{1,2}}", b"*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n"),
    ("return {1,2,nil,4}", b"*2\r\n:1\r\n:2\r\n"),
    ("return {double=3.14}", b"$4\r\n3.14\r\n"),
    ("return {big_number='123'}", b"$3\r\n123\r\n"),
    ("return {map={a=1}}", b"*2\r\n$1\r\na\r\n:1\r\n"),
    ("return {set={a=true}}", b"*1\r\n$1\r\na\r\n"),
    ("return _G", b"*0\r\n"),
    ("local a = {}; setmetatable(a,{__index=function() foo() end}) return a", b"*0\r\n"),
])
def test_lua_to_resp2(c, body, expected):
    assert c.call("EVAL", body, "0") == expected


@pytest.mark.parametrize("body,expected", [
    ("redis.setresp(3); return true", b"#t\r\n"),
    ("redis.setresp(3); return false", b"#f\r\n"),
    ("return false", b"_\r\n"),
    ("return {double=3.14}", b",3.14\r\n"),
    ("return {big_number='1234567999999999999999999999999999999'}", b"(1234567999999999999999999999999999999\r\n"),
    ("return {map={a=1}}", b"%1\r\n$1\r\na\r\n:1\r\n"),
    ("return {set={a=true}}", b"~1\r\n$1\r\na\r\n"),
    ("return {verbatim_string={format='txt', string='hi'}}", b"=6\r\ntxt:hi\r\n"),
])
def test_lua_to_resp3(c, body, expected):
    c.call("HELLO", "3")
    assert c.call("EVAL", body, "0") == expected


def test_keys_and_argv(r):
    assert r.eval("return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}", 2, "a", "b", "c", "d") == [b"a", b"b", b"c", b"d"]
    assert r.eval("return #KEYS + #ARGV * 10", 0) == 0


# ---------------------------------------------------------------- reply -> Lua


def test_redis_replies_to_lua_types(r):
    r.set("x", "5")
    r.rpush("l", "a", "b")
    assert r.eval("local v = redis.call('incr', KEYS[1]); return type(v) .. v", 1, "x") == b"number6"
    assert r.eval("return type(redis.call('get', KEYS[1]))", 1, "x") == b"string"
    assert r.eval("return redis.call('lrange', KEYS[1], 0, -1)", 1, "l") == [b"a", b"b"]
    assert r.eval("return type(redis.call('ping'))", 0) == b"table"
    assert r.eval("return redis.call('ping')['ok']", 0) == b"PONG"
    assert r.eval("return tostring(redis.call('get', 'nokey'))", 0) == b"false"
    assert r.eval("return redis.pcall('incr', 'l')['err']", 0) == \
        b"WRONGTYPE Operation against a key holding the wrong kind of value"


def test_resp3_replies_in_lua(r):
    r.hset("h", "f", "v")
    body = "redis.setresp(3); local m = redis.call('hgetall', KEYS[1]); return m['map']['f']"
    assert r.eval(body, 1, "h") == b"v"
    body = "redis.setresp(3); return tostring(redis.call('get', 'nokey'))"
    assert r.eval(body, 0) == b"nil"
    assert r.eval("redis.setresp(3); return redis.call('hgetall', KEYS[1])", 1, "h") == [b"f", b"v"]


def test_number_arguments_are_integers_or_shortest_floats(r):
    assert r.eval("redis.call('set', KEYS[1], 12345678901); return redis.call('get', KEYS[1])", 1, "k") == b"12345678901"
    assert r.eval("redis.call('set', KEYS[1], 1.5); return redis.call('get', KEYS[1])", 1, "k") == b"1.5"


# ---------------------------------------------------------------- errors


def test_error_texts_carry_script_location(c):
    for body, msg in [
        ("return a", "ERR user_script:1: Script attempted to access nonexistent global variable 'a'"),
        ("a = 10", "ERR user_script:1: Attempt to modify a readonly table"),
        ("return redis.call('nosuch')", "ERR Unknown Redis command called from script"),
        ("return redis.call('get')", "ERR Wrong number of args calling Redis command from script"),
        ("return redis.call('multi')", "ERR This Redis command is not allowed from script"),
        ("return redis.call()", "ERR Please specify at least one argument for this redis lib call"),
        ("return redis.call('get', {})", "ERR Lua redis lib command arguments must be strings or integers"),
        ("return redis.call('select', 99)", "ERR DB index is out of range"),
        ("error('boom')", "ERR user_script:1: boom"),
    ]:
        assert c.call("EVAL", body, "0") == f"-{msg}{loc(body)}\r\n".encode(), body
    body = "\n\nreturn redis.call('nosuch')"
    assert c.call("EVAL", body, "0") == f"-ERR Unknown Redis command called from script{loc(body, 3)}\r\n".encode()


def test_error_replies_and_pcall(c):
    assert c.call("EVAL", "return redis.error_reply('My Error')", "0") == b"-My Error\r\n"
    assert c.call("EVAL", "return redis.status_reply('fine')", "0") == b"+fine\r\n"
    assert c.call("EVAL", "return redis.pcall('select', 99)", "0") == b"-ERR DB index is out of range\r\n"
    assert c.call("EVAL", "local ok, e = pcall(redis.call, 'nosuch'); return {tostring(ok), e}", "0") == \
        b"*2\r\n$5\r\nfalse\r\n$44\r\nERR Unknown Redis command called from script\r\n"
    assert c.call("EVAL", "return pcall(function() return 1 end)", "0") == b":1\r\n"
    assert c.call("EVAL", "return 'x", "0") == \
        b"-ERR Error compiling script (new function): user_script:1: unfinished string near '<eof>'\r\n"


def test_numkeys_errors(c):
    assert c.call("EVAL", "return 1", "2", "a") == b"-ERR Number of keys can't be greater than number of args\r\n"
    assert c.call("EVAL", "return 1", "-1") == b"-ERR Number of keys can't be negative\r\n"
    assert c.call("EVAL", "return 1", "x") == b"-ERR value is not an integer or out of range\r\n"
    assert c.call("EVAL", "return 1") == b"-ERR wrong number of arguments for 'eval' command\r\n"


def test_error_stats(r):
    r.config_resetstat()
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.eval("return redis.call('select',99)", 0)
    assert r.info("errorstats")["errorstat_ERR"] == {"count": 1}
    stats = r.info("commandstats")
    assert stats["cmdstat_select"]["failed_calls"] == 1
    assert stats["cmdstat_eval"]["failed_calls"] == 1
    r.config_resetstat()
    assert r.eval("local t = redis.pcall('select',99); return t['err']", 0) == b"ERR DB index is out of range"
    stats = r.info("commandstats")
    assert stats["cmdstat_eval"]["failed_calls"] == 0
    assert r.info("stats")["total_error_replies"] == 1


# ---------------------------------------------------------------- sandbox


@pytest.mark.parametrize("body", [
    "setmetatable(_G, {})",
    "local g = getmetatable(_G); g.__index = {}",
    "redis = function() return 1 end",
    "_G = {}",
    "redis.call = function() return 1 end",
    "string.format = nil",
    "rawset(_G, 'x', 1)",
])
def test_readonly_tables(r, body):
    with pytest.raises(redis.ResponseError, match="Attempt to modify a readonly table"):
        r.eval(body, 0)


@pytest.mark.parametrize("name", ["loadfile", "dofile", "print", "io", "require", "debug", "package"])
def test_removed_globals(r, name):
    with pytest.raises(redis.ResponseError, match=f"nonexistent global variable '{name}'"):
        r.eval(f"return {name}", 0)


def test_os_has_only_clock_and_binary_chunks_refused(r):
    assert r.eval("local n = {} for k in pairs(os) do n[#n+1] = k end return n", 0) == [b"clock"]
    with pytest.raises(redis.ResponseError, match="attempt to call field 'execute'"):
        r.eval("os.execute()", 0)
    with pytest.raises(redis.ResponseError, match="attempt to call a nil value"):
        r.eval("return loadstring(string.dump(function() return 1 end))()", 0)
    assert r.eval("return loadstring('return 7')()", 0) == 7


def test_redis_helpers(r):
    assert r.eval("return redis.sha1hex('Pizza & Mandolino')", 0) == b"74822d82031af7493c20eefa13bd07ec4fada82f"
    assert r.eval("return redis.REDIS_VERSION", 0) == b"8.4.0"
    assert r.eval("return redis.REDIS_VERSION_NUM", 0) == 0x080400
    assert r.eval("redis.log(redis.LOG_WARNING, 'x'); redis.set_repl(redis.REPL_ALL); return redis.replicate_commands()", 0) == 1
    with pytest.raises(redis.ResponseError, match="RESP version must be 2 or 3"):
        r.eval("redis.setresp(4)", 0)
    with pytest.raises(redis.ResponseError, match="Invalid replication flags"):
        r.eval("redis.set_repl(12345)", 0)


# ---------------------------------------------------------------- read-only, shebang


def test_read_only_scripts(c):
    c.call("SET", "foo", "bar")
    assert c.call("EVAL_RO", "return redis.call('get', KEYS[1])", "1", "foo") == b"$3\r\nbar\r\n"
    body = "return redis.call('del', KEYS[1])"
    assert c.call("EVAL_RO", body, "1", "foo") == \
        f"-ERR Write commands are not allowed from read-only scripts.{loc(body)}\r\n".encode()
    body = "#!lua flags=no-writes\nreturn redis.call('set', 'x', 1)"
    assert c.call("EVAL", body, "0") == \
        f"-ERR Write commands are not allowed from read-only scripts.{loc(body, 2)}\r\n".encode()
    assert c.call("EVAL_RO", "#!lua\nreturn 1", "0") == \
        b"-ERR Can not execute a script with write flag using *_ro command.\r\n"
    assert c.call("EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0") == b":1\r\n"


def test_shebang_errors(c):
    assert c.call("EVAL", "#!lua flags=bad\nreturn 1", "0") == b"-ERR Unexpected flag in script shebang: bad\r\n"
    assert c.call("EVAL", "#!lua name=x\nreturn 1", "0") == b"-ERR Unknown lua shebang option: name=x\r\n"
    assert c.call("EVAL", "#!not-lua\nreturn 1", "0") == b"-ERR Unexpected engine in script shebang: #!not-lua\r\n"
    assert c.call("EVAL", "#!lua", "0") == b"-ERR Invalid script shebang\r\n"
    assert c.call("EVAL", "#!lua flags=no-writes,allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 1", "0") == b":1\r\n"


# ---------------------------------------------------------------- cache


def test_evalsha_and_script_commands(c):
    body = "return redis.call('get',KEYS[1])"
    digest = sha(body)
    c.call("SET", "mykey", "myval")
    assert c.call("SCRIPT", "LOAD", body) == f"$40\r\n{digest}\r\n".encode()
    assert c.call("EVALSHA", digest, "1", "mykey") == b"$5\r\nmyval\r\n"
    assert c.call("EVALSHA", digest.upper(), "1", "mykey") == b"$5\r\nmyval\r\n"
    assert c.call("EVALSHA_RO", digest, "1", "mykey") == b"$5\r\nmyval\r\n"
    assert c.call("EVALSHA", "NotValidShaSUM", "0") == b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    assert c.call("SCRIPT", "EXISTS", digest, "ffd632c7d33e571e9f24556ebed26c3479a87130") == b"*2\r\n:1\r\n:0\r\n"
    assert c.call("SCRIPT", "FLUSH", "BAD") == b"-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"
    assert c.call("SCRIPT", "FLUSH", "ASYNC") == b"+OK\r\n"
    assert c.call("EVALSHA", digest, "1", "mykey") == b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    assert c.call("SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
    assert c.call("SCRIPT", "LOAD", "return 'x") .startswith(b"-ERR Error compiling script (new function): ")
    help_reply = c.call("SCRIPT", "HELP")
    assert help_reply.startswith(b"*17\r\n+SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n")


def test_cache_in_info(r):
    r.script_flush()
    for i in range(10):
        r.script_load(f"return {i}")
    mem = r.info("memory")
    assert mem["number_of_cached_scripts"] == 10
    assert mem["used_memory_lua"] > 0 and mem["used_memory_scripts"] > 0
    r.script_flush()
    assert r.info("memory")["number_of_cached_scripts"] == 0


def test_many_loaded_scripts(r):
    pipe = r.pipeline(transaction=False)
    for i in range(12000):
        pipe.script_load(f"return {i}")
    pipe.execute()
    assert r.evalsha(sha("return 11999"), 0) == 11999
    r.script_flush()


# ---------------------------------------------------------------- dispatch


def test_select_inside_script_is_local_and_commandstats(r):
    r.config_resetstat()
    r.set("k", "db0")
    assert r.eval("redis.call('select', 9); redis.call('set', KEYS[1], 'db9'); return redis.call('get', KEYS[1])", 1, "k") == b"db9"
    assert r.get("k") == b"db0"
    stats = r.info("commandstats")
    assert stats["cmdstat_set"]["calls"] == 2 and stats["cmdstat_eval"]["calls"] == 1
    r.execute_command("SELECT", 9)
    assert r.get("k") == b"db9"
    r.flushall()


def test_getkeys_and_movablekeys(c):
    assert c.call("COMMAND", "GETKEYS", "EVAL", "return 1", "2", "a", "b", "c") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert c.call("COMMAND", "GETKEYS", "EVAL_RO", "return 1", "0") == b"*0\r\n"
    info = c.call("COMMAND", "INFO", "eval")
    assert b"+movablekeys\r\n" in info and b"+noscript\r\n" in info


def test_eval_in_multi_and_watch(new_client):
    a, b = new_client(), new_client()
    a.flushall()
    p = a.pipeline()
    p.eval("return redis.call('incr', KEYS[1])", 1, "n")
    p.eval("return redis.call('incr', KEYS[1])", 1, "n")
    assert p.execute() == [1, 2]
    # A script's write invalidates a WATCH, the caller's own included.
    a.execute_command("WATCH", "n")
    a.eval("return redis.call('incr', KEYS[1])", 1, "n")
    a.execute_command("MULTI")
    a.execute_command("GET", "n")
    assert a.execute_command("EXEC") is None


def test_pause_write_holds_write_scripts_only(new_client):
    admin, ro, rw = new_client(), new_client(), new_client(socket_timeout=5)
    admin.set("x", "y")
    admin.execute_command("CLIENT", "PAUSE", "60000", "WRITE")
    try:
        assert ro.execute_command("EVAL", "#!lua flags=no-writes\nreturn 'unique'", 0) == b"unique"
        assert ro.execute_command("EVAL_RO", "return redis.call('GeT', 'x')", 1, "x") == b"y"
        with pytest.raises(redis.ResponseError, match="Write commands are not allowed from read-only scripts"):
            ro.execute_command("EVAL_RO", "return redis.call('set', 'x', 'z')", 0)
        conn = rw.connection
        conn.send_command("EVAL", "return 1", 0)
        assert not conn.can_read(timeout=0.3)
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
    assert conn.read_response() == 1


def test_oom_refuses_writes_inside_scripts(c):
    c.call("CONFIG", "SET", "maxmemory", "1")
    try:
        body = "redis.call('set', 'x', 1)"
        assert c.call("EVAL", body, "0") == \
            f"-OOM command not allowed when used memory > 'maxmemory'.{loc(body)}\r\n".encode()
        assert c.call("EVAL", "return redis.call('get', 'x')", "0") == b"$-1\r\n"
        assert c.call("EVAL", "#!lua\nreturn 1", "0") == b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
        assert c.call("EVAL", "#!lua flags=allow-oom\nreturn 1", "0") == b":1\r\n"
        assert c.call("EVAL", "#!lua flags=no-writes\nreturn 1", "0") == b":1\r\n"
    finally:
        c.call("CONFIG", "SET", "maxmemory", "0")


def test_recursive_table_is_cut(server):
    import socket
    s = socket.create_connection((server.host, server.port), timeout=5)
    body = b"local a = {}; local b = {a}; a[1] = b; return a"
    s.sendall(b"*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (len(body), body))
    buf = b""
    while not buf.endswith(b"-ERR reached lua stack limit\r\n"):
        chunk = s.recv(65536)
        assert chunk, buf[-100:]
        buf += chunk
    assert set(buf[: -len(b"-ERR reached lua stack limit\r\n")].split(b"\r\n")) == {b"*1", b""}
    s.sendall(b"PING\r\n")
    assert s.recv(100) == b"+PONG\r\n"
    s.close()


# ---- timed-out scripts: BUSY, SCRIPT KILL, SHUTDOWN NOSAVE ------------------

import threading as _threading


def _run_async(new_client, script, *args):
    """Run EVAL on its own connection in a thread; returns (thread, result dict)."""
    out = {}
    c = new_client()

    def go():
        try:
            out["reply"] = c.eval(script, *args)
        except redis.ResponseError as e:
            out["error"] = str(e)

    t = _threading.Thread(target=go)
    t.start()
    return t, out


def _wait_busy(c, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c.ping()
        except redis.ResponseError as e:
            assert str(e) == "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
            return
        time.sleep(0.02)
    raise AssertionError("script never became busy")


def test_timed_out_script_replies_busy_and_can_be_killed(r, new_client):
    r.config_set("lua-time-limit", 10)
    assert r.config_get("busy-reply-threshold") == {"busy-reply-threshold": "10"}
    t, out = _run_async(new_client, "while true do end", 0)
    _wait_busy(r)
    # A connection opened while the script runs is served too.
    late = new_client()
    with pytest.raises(redis.ResponseError, match="^BUSY "):
        late.get("x")
    assert late.script_kill() is True
    t.join(5)
    assert not t.is_alive()
    assert out["error"].startswith("Script killed by user with SCRIPT KILL...")
    assert r.ping() is True
    with pytest.raises(redis.ResponseError, match="^NOTBUSY No scripts in execution right now.$"):
        r.script_kill()


def test_kill_is_not_swallowed_by_pcall(r, new_client):
    r.config_set("lua-time-limit", 10)
    t, out = _run_async(new_client, "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end", 0)
    _wait_busy(r)
    assert r.script_kill() is True
    t.join(5)
    assert "killed by user" in out["error"]


def test_script_that_wrote_is_unkillable(r, new_client):
    r.config_set("lua-time-limit", 10)
    script = """
        redis.call('set', KEYS[1], 'v')
        local start = tonumber(redis.call('time')[1])
        while tonumber(redis.call('time')[1]) < start + 2 do end
        return 'done'
    """
    t, out = _run_async(new_client, script, 1, "wrote")
    _wait_busy(r)
    with pytest.raises(redis.ResponseError, match="^UNKILLABLE Sorry the script already executed write commands"):
        r.script_kill()
    t.join(10)
    assert out["reply"] == b"done"
    assert r.get("wrote") == b"v"


def test_transaction_touched_by_busy_is_aborted(r, new_client):
    r.set("xx", 1)
    r2 = new_client()
    r2.ping()
    r.config_set("lua-time-limit", 10)
    t, out = _run_async(new_client, "while true do end", 0)
    _wait_busy(r)
    assert r2.execute_command("MULTI") == b"OK"  # MULTI may run while busy
    with pytest.raises(redis.ResponseError, match="^BUSY "):
        r2.execute_command("INCR", "xx")
    assert r.script_kill() is True
    t.join(5)
    with pytest.raises(redis.exceptions.ExecAbortError, match="^Transaction discarded because of previous errors.$"):
        r2.execute_command("EXEC")
    assert r.get("xx") == b"1"
    assert r2.ping() is True


def test_lua_numbers_reply_as_redis_converts_them(raw):
    # Redis replies (long long) of the double: truncated toward zero, and
    # LLONG_MIN for NaN, the infinities and anything out of range (x86-64).
    c = raw()
    for script, want in [("return 3.99", b":3\r\n"), ("return -3.99", b":-3\r\n"),
                         ("return 2^62", b":4611686018427387904\r\n"),
                         ("return -2^63", b":-9223372036854775808\r\n"),
                         ("return 2^63", b":-9223372036854775808\r\n"),
                         ("return 1/0", b":-9223372036854775808\r\n"),
                         ("return -1/0", b":-9223372036854775808\r\n"),
                         ("return 0/0", b":-9223372036854775808\r\n"),
                         ("return {1.5, 2^64}", b"*2\r\n:1\r\n:-9223372036854775808\r\n")]:
        assert c.call("EVAL", script, "0") == want, script


def test_errors_of_the_redis_api_name_the_line_in_tail_calls(r):
    # `return redis.log(1)` is a Lua tail call; as Redis's C functions do,
    # densekv's still report the script's line, and the sandbox's
    # setmetatable/rawset refusals carry no position of their own.
    for body, msg in [("return redis.log(1)", "redis.log() requires two arguments or more."),
                      ("return redis.setresp(4)", "RESP version must be 2 or 3."),
                      ("return redis.set_repl(9)",
                       "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."),
                      ("return redis.sha1hex()", "wrong number of arguments"),
                      ("return redis.acl_check_cmd('nosuch')", "Invalid command passed to redis.acl_check_cmd()"),
                      ("\nreturn setmetatable(_G, nil)", "Attempt to modify a readonly table"),
                      ("return rawset(_G, 'x', 1)", "Attempt to modify a readonly table")]:
        sha = hashlib.sha1(body.encode()).hexdigest()
        line = body.count("\n") + 1
        with pytest.raises(redis.ResponseError) as e:
            r.eval(body, 0)
        assert str(e.value) == f"{msg} script: {sha}, on @user_script:{line}.", body
    assert r.eval("local ok, e = pcall(setmetatable, _G, nil) return e", 0) == b"Attempt to modify a readonly table"
    assert r.eval("local ok, e = pcall(redis.log, 1) return e", 0) == b"ERR redis.log() requires two arguments or more."
    assert r.eval("return rawset({}, 'a', 1).a", 0) == 1
