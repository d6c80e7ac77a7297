"""Redis 7 functions: FUNCTION LOAD/DELETE/FLUSH/LIST/DUMP/RESTORE/STATS/KILL
and FCALL/FCALL_RO, checked against Redis's replies and error strings, over
RESP2 and RESP3."""

from __future__ import annotations

import threading
import time

import pytest
import redis

LIB = """#!lua name=mylib
local function echo(keys, args) return {keys[1], args[1]} end
redis.register_function('echo', echo)
redis.register_function{function_name='getter', callback=function(keys) return redis.call('get', keys[1]) end,
  flags={'no-writes'}, description='reads a key'}
redis.register_function('setter', function(keys, args) return redis.call('set', keys[1], args[1]) end)
"""

BAD_NAME = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"


def lib(name: str, fname: str, body: str = "return 1", flags: str = "") -> str:
    if flags:
        return (
            f"#!lua name={name}\nredis.register_function{{function_name='{fname}', "
            f"callback=function(KEYS, ARGV) {body} end, flags={{{flags}}}}}"
        )
    return f"#!lua name={name}\nredis.register_function('{fname}', function(KEYS, ARGV) {body} end)"


@pytest.fixture(autouse=True)
def _no_functions(r):
    r.execute_command("FUNCTION", "FLUSH")
    yield
    r.execute_command("FUNCTION", "FLUSH")


def err(c, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command(*args)
    return str(e.value)


def test_load_and_fcall_with_keys_and_args(r):
    assert r.execute_command("FUNCTION", "LOAD", LIB) == b"mylib"
    assert r.execute_command("FCALL", "echo", 1, "k", "a", "b") == [b"k", b"a"]
    assert r.execute_command("FCALL", "ECHO", 1, "k2", "a") == [b"k2", b"a"]
    assert r.execute_command("FCALL", "setter", 1, "k", "v") == b"OK"
    assert r.get("k") == b"v"
    assert r.execute_command("FCALL_RO", "getter", 1, "k") == b"v"
    assert r.execute_command("FCALL", "getter", 1, "k") == b"v"


def test_load_errors(r):
    r.execute_command("FUNCTION", "LOAD", LIB)
    assert err(r, "FUNCTION", "LOAD", LIB) == "Library 'mylib' already exists"
    assert err(r, "FUNCTION", "LOAD", "return 1") == "Missing library metadata"
    assert err(r, "FUNCTION", "LOAD", "#!lua name=x") == "Invalid library metadata"
    assert err(r, "FUNCTION", "LOAD", "#!lua name=x foo=bar\n") == "Invalid metadata value given: foo=bar"
    assert err(r, "FUNCTION", "LOAD", "#!lua\nx") == "Library name was not given"
    assert err(r, "FUNCTION", "LOAD", "#!lua name=a name=b\n") == "Invalid metadata value, name argument was given multiple times"
    assert err(r, "FUNCTION", "LOAD", lib("x", "f").replace("#!lua", "#!js")) == "Engine 'js' not found"
    assert err(r, "FUNCTION", "LOAD", lib("a-b", "f")) == BAD_NAME
    assert err(r, "FUNCTION", "LOAD", "#!lua name=e\nlocal a = 1") == "No functions registered"
    assert err(r, "FUNCTION", "LOAD", "foo", lib("x", "f")) == "Unknown option given: foo"
    assert err(r, "FUNCTION", "LOAD", lib("other", "echo")) == "Function echo already exists"
    assert err(r, "FUNCTION", "LOAD", "#!lua name=e\nbad code").startswith("Error compiling function: user_function:2:")
    assert (
        err(r, "FUNCTION", "LOAD", "#!lua name=e\nreturn math.random()")
        == "Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'math'"
    )
    assert "nonexistent global variable 'call'" in err(r, "FUNCTION", "LOAD", "#!lua name=e\nredis.call('ping')")
    assert "Attempt to modify a readonly table" in err(r, "FUNCTION", "LOAD", "#!lua name=e\na = 1")
    for code, msg in [
        ("redis.register_function()", "wrong number of arguments to redis.register_function"),
        ("redis.register_function('f')", "calling redis.register_function with a single argument is only applicable to Lua table"),
        ("redis.register_function(nil, function() end)", "first argument to redis.register_function must be a string"),
        ("redis.register_function('f', 'x')", "second argument to redis.register_function must be a function"),
        ("redis.register_function('a b', function() end)", BAD_NAME),
        ("redis.register_function{callback=function() end}", "redis.register_function must get a function name argument"),
        ("redis.register_function{function_name='f'}", "redis.register_function must get a callback argument"),
        ("redis.register_function{function_name='f', callback=function() end, flags={'bad'}}", "unknown flag given"),
        ("redis.register_function{function_name='f', callback=function() end, flags='x'}", "flags argument to redis.register_function must be a table"),
        ("redis.register_function{function_name='f', callback=function() end, x=1}", "unknown argument given to redis.register_function"),
        ("redis.register_function('f', function() end) redis.register_function('f', function() end)", "Function already exists in the library"),
    ]:
        e = err(r, "FUNCTION", "LOAD", "#!lua name=e\n" + code)
        assert e.startswith("Error registering functions: ERR " + msg), (code, e)
    # Failures change nothing.
    assert r.execute_command("FUNCTION", "STATS")[3] == [b"LUA", [b"libraries_count", 1, b"functions_count", 3]]


def test_replace_keeps_old_library_on_failure(r):
    r.execute_command("FUNCTION", "LOAD", lib("l", "f", "return 'one'"))
    assert err(r, "FUNCTION", "LOAD", "REPLACE", "#!lua name=l\nerror") .startswith("Error compiling function")
    assert r.execute_command("FCALL", "f", 0) == b"one"
    assert r.execute_command("FUNCTION", "LOAD", "REPLACE", lib("l", "g", "return 'two'")) == b"l"
    assert r.execute_command("FCALL", "g", 0) == b"two"
    assert err(r, "FCALL", "f", 0) == "Function not found"


def test_fcall_errors_and_flags(r):
    r.execute_command("FUNCTION", "LOAD", LIB)
    assert err(r, "FCALL", "nope", 0) == "Function not found"
    assert err(r, "FCALL", "echo", "x") == "Bad number of keys provided"
    assert err(r, "FCALL", "echo", 3, "a") == "Number of keys can't be greater than number of args"
    assert err(r, "FCALL", "echo", -1) == "Number of keys can't be negative"
    assert err(r, "FCALL_RO", "setter", 1, "k", "v") == "Can not execute a script with write flag using *_ro command."
    r.execute_command("FUNCTION", "LOAD", lib("ro", "ro_set", "return redis.call('set', KEYS[1], 1)", "'no-writes'"))
    e = err(r, "FCALL", "ro_set", 1, "k")
    assert e.startswith("Write commands are not allowed from read-only scripts.")
    assert e.endswith("script: ro_set, on @user_function:2.")
    assert r.exists("k") == 0
    r.execute_command("FUNCTION", "LOAD", lib("rt", "boom", "return redis.register_function('z', function() end)"))
    assert err(r, "FCALL", "boom", 0).endswith("attempt to call field 'register_function' (a nil value) script: boom, on @user_function:2.")


def test_allow_oom_and_deny_oom(r):
    r.execute_command("FUNCTION", "LOAD", lib("a", "w", "return redis.call('set', KEYS[1], 1)"))
    r.execute_command("FUNCTION", "LOAD", lib("b", "w_oom", "return redis.call('set', KEYS[1], 1)", "'allow-oom'"))
    r.execute_command("FUNCTION", "LOAD", lib("c", "nw", "return 'hi'", "'no-writes'"))
    r.config_set("maxmemory", 1)
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError, match="^command not allowed when used memory > 'maxmemory'.$"):
            r.execute_command("FCALL", "w", 1, "x")
        assert r.execute_command("FCALL", "w_oom", 1, "x") == b"OK"
        assert r.execute_command("FCALL", "nw", 1, "x") == b"hi"
        assert r.execute_command("FCALL_RO", "nw", 1, "x") == b"hi"
    finally:
        r.config_set("maxmemory", 0)


def test_list_shapes_resp2(r):
    r.execute_command("FUNCTION", "LOAD", LIB)
    r.execute_command("FUNCTION", "LOAD", lib("other", "o"))
    entry = [
        b"library_name", b"mylib", b"engine", b"LUA", b"functions",
        [
            [b"name", b"echo", b"description", None, b"flags", []],
            [b"name", b"getter", b"description", b"reads a key", b"flags", [b"no-writes"]],
            [b"name", b"setter", b"description", None, b"flags", []],
        ],
    ]
    assert r.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "my*") == [entry]
    assert r.execute_command("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "mylib") == [entry + [b"library_code", LIB.encode()]]
    assert len(r.execute_command("FUNCTION", "LIST")) == 2
    assert r.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "zz*") == []
    assert err(r, "FUNCTION", "LIST", "bad") == "Unknown argument bad"
    assert err(r, "FUNCTION", "LIST", "LIBRARYNAME") == "library name argument was not given"
    assert err(r, "FUNCTION", "LIST", "WITHCODE", "WITHCODE") == "Unknown argument WITHCODE"


def test_list_and_stats_resp3(r3, raw):
    r3.execute_command("FUNCTION", "LOAD", lib("l", "f", "return 1", "'no-writes', 'allow-stale'"))
    c = raw()
    c.call("HELLO", 3)
    assert c.call("FUNCTION", "LIST") == (
        b"*1\r\n%3\r\n$12\r\nlibrary_name\r\n$1\r\nl\r\n$6\r\nengine\r\n$3\r\nLUA\r\n"
        b"$9\r\nfunctions\r\n*1\r\n%3\r\n$4\r\nname\r\n$1\r\nf\r\n$11\r\ndescription\r\n_\r\n"
        b"$5\r\nflags\r\n~2\r\n+no-writes\r\n+allow-stale\r\n"
    )
    assert c.call("FUNCTION", "STATS") == (
        b"%2\r\n$14\r\nrunning_script\r\n_\r\n$7\r\nengines\r\n%1\r\n$3\r\nLUA\r\n"
        b"%2\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"
    )
    assert r3.execute_command("FCALL", "f", 0) == 1
    assert r3.execute_command("FCALL_RO", "f", 0) == 1


def test_delete_and_flush(r):
    r.execute_command("FUNCTION", "LOAD", LIB)
    assert err(r, "FUNCTION", "DELETE", "nope") == "Library not found"
    assert r.execute_command("FUNCTION", "DELETE", "mylib") == b"OK"
    assert err(r, "FCALL", "echo", 0) == "Function not found"
    for mode in ([], ["ASYNC"], ["SYNC"]):
        r.execute_command("FUNCTION", "LOAD", LIB)
        assert r.execute_command("FUNCTION", "FLUSH", *mode) == b"OK"
        assert r.execute_command("FUNCTION", "LIST") == []
    assert err(r, "FUNCTION", "FLUSH", "bad") == "FUNCTION FLUSH only supports SYNC|ASYNC option"
    assert err(r, "FUNCTION", "FLUSH", "sync", "x") == "unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP."
    # FLUSHALL and SCRIPT FLUSH leave functions alone.
    r.execute_command("FUNCTION", "LOAD", LIB)
    r.flushall()
    r.script_flush()
    assert r.execute_command("FCALL", "echo", 1, "k", "a") == [b"k", b"a"]
    info = r.info("memory")
    assert info["number_of_functions"] == 3
    assert info["number_of_libraries"] == 1


def test_dump_restore_policies(r):
    r.execute_command("FUNCTION", "LOAD", lib("l1", "f1", "return 'old'"))
    payload = r.execute_command("FUNCTION", "DUMP")
    assert payload[0] == 245
    # APPEND (default): a library already there is an error.
    assert err(r, "FUNCTION", "RESTORE", payload) == "Library l1 already exists"
    assert err(r, "FUNCTION", "RESTORE", payload, "APPEND") == "Library l1 already exists"
    r.execute_command("FUNCTION", "DELETE", "l1")
    r.execute_command("FUNCTION", "LOAD", lib("l2", "f2"))
    assert r.execute_command("FUNCTION", "RESTORE", payload) == b"OK"
    assert r.execute_command("FCALL", "f1", 0) == b"old"
    assert r.execute_command("FCALL", "f2", 0) == 1
    # REPLACE: replaces same-named libraries, keeps the rest.
    r.execute_command("FUNCTION", "LOAD", "REPLACE", lib("l1", "f1", "return 'new'"))
    assert r.execute_command("FUNCTION", "RESTORE", payload, "REPLACE") == b"OK"
    assert r.execute_command("FCALL", "f1", 0) == b"old"
    assert r.execute_command("FCALL", "f2", 0) == 1
    # A function name taken by another library fails and changes nothing.
    r.execute_command("FUNCTION", "DELETE", "l1")
    r.execute_command("FUNCTION", "LOAD", lib("l3", "f1", "return 'l3'"))
    assert err(r, "FUNCTION", "RESTORE", payload, "REPLACE") == "Function f1 already exists"
    assert r.execute_command("FCALL", "f1", 0) == b"l3"
    # FLUSH: only the payload's libraries remain.
    assert r.execute_command("FUNCTION", "RESTORE", payload, "FLUSH") == b"OK"
    assert [e[1] for e in r.execute_command("FUNCTION", "LIST")] == [b"l1"]
    assert r.execute_command("FCALL", "f1", 0) == b"old"


def test_restore_errors(r):
    r.execute_command("FUNCTION", "LOAD", LIB)
    payload = r.execute_command("FUNCTION", "DUMP")
    assert err(r, "FUNCTION", "RESTORE", "bad_payload") == "DUMP payload version or checksum are wrong"
    corrupt = bytearray(payload)
    corrupt[3] ^= 0xFF
    assert err(r, "FUNCTION", "RESTORE", bytes(corrupt)) == "DUMP payload version or checksum are wrong"
    assert err(r, "FUNCTION", "RESTORE", payload, "bad") == "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
    assert err(r, "FUNCTION", "RESTORE", "a", "b", "c") == "unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP."
    # Another key type's DUMP payload is not a function.
    r.set("s", "x")
    assert err(r, "FUNCTION", "RESTORE", r.dump("s")) == "given type is not a function"
    assert len(r.execute_command("FUNCTION", "LIST")) == 1


def test_command_info_and_getkeys(raw):
    info = raw().call("COMMAND", "INFO", "FCALL")
    assert info.startswith(
        b"*1\r\n*10\r\n$5\r\nfcall\r\n:-3\r\n*5\r\n+noscript\r\n+stale\r\n+skip_monitor\r\n"
        b"+no_mandatory_keys\r\n+movablekeys\r\n:0\r\n:0\r\n:0\r\n"
    )
    c = raw()
    assert c.call("COMMAND", "GETKEYS", "FCALL", "f", 2, "a", "b", "c") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert c.call("COMMAND", "GETKEYS", "FCALL_RO", "f", 1, "x", "y") == b"*1\r\n$1\r\nx\r\n"


def _run_async(new_client, *args):
    out = {}
    c = new_client()

    def go():
        try:
            out["reply"] = c.execute_command(*args)
        except redis.ResponseError as e:
            out["error"] = str(e)

    t = threading.Thread(target=go)
    t.start()
    return t, out


def _wait_busy(c, msg, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c.ping()
        except redis.ResponseError as e:
            assert str(e) == msg
            return
        time.sleep(0.02)
    raise AssertionError("never became busy")


FN_BUSY = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
EVAL_BUSY = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."


def test_kill_busy_function(r, new_client):
    assert err(r, "FUNCTION", "KILL") == "NOTBUSY No scripts in execution right now."
    r.config_set("busy-reply-threshold", 10)
    try:
        r.execute_command("FUNCTION", "LOAD", lib("spin", "spin", "local a = 1 while true do a = a + 1 end"))
        t, out = _run_async(new_client, "FCALL", "spin", 0)
        _wait_busy(r, FN_BUSY)
        stats = r.execute_command("FUNCTION", "STATS")
        running = stats[1]
        assert running[:4] == [b"name", b"spin", b"command", [b"FCALL", b"spin", b"0"]]
        assert running[4] == b"duration_ms" and running[5] >= 0
        assert err(r, "SCRIPT", "KILL") == FN_BUSY
        assert r.execute_command("FUNCTION", "KILL") == b"OK"
        t.join(5)
        assert not t.is_alive()
        assert out["error"].startswith("Script killed by user with SCRIPT KILL...")
        assert r.ping() is True
        # And FUNCTION KILL does not end an EVAL script.
        t, out = _run_async(new_client, "EVAL", "while true do end", 0)
        _wait_busy(r, EVAL_BUSY)
        assert err(r, "FUNCTION", "KILL") == EVAL_BUSY
        assert err(r, "FUNCTION", "STATS") == EVAL_BUSY
        assert r.script_kill() is True
        t.join(5)
        assert not t.is_alive()
    finally:
        r.config_set("busy-reply-threshold", 5000)


def test_load_timeout(r):
    e = err(r, "FUNCTION", "LOAD", "#!lua name=t\nlocal a = 1 while 1 do a = a + 1 end")
    assert e == "Error registering functions: ERR FUNCTION LOAD timeout"


def test_client_pause_write_lets_read_only_functions_through(r, new_client):
    r.execute_command("FUNCTION", "LOAD", LIB)
    r.set("k", "v")
    r.execute_command("CLIENT", "PAUSE", 100000, "WRITE")
    try:
        c = new_client()
        assert c.execute_command("FCALL_RO", "getter", 1, "k") == b"v"
        assert c.execute_command("FCALL", "getter", 1, "k") == b"v"
    finally:
        r.execute_command("CLIENT", "UNPAUSE")


def test_monitor_shows_function_commands(r, new_client):
    r.execute_command("FUNCTION", "LOAD", LIB)
    c = new_client()
    with c.monitor() as m:
        r.execute_command("FCALL", "setter", 1, "mk", "mv")
        first = m.next_command()["command"]
        second = m.next_command()["command"]
    assert first == "FCALL setter 1 mk mv"
    assert second == "set mk mv"
