"""Passwords and ACL users: requirepass enforced on every way in (plain, pipelined,
MULTI, EVAL, SUBSCRIBE, HELLO), a restricted user refused directly, in a script and in
MULTI, the ACL log, and Redis's error strings byte for byte.

Every test runs its own server (start_server) so that users and passwords never leak
into the shared one."""

from __future__ import annotations

import pytest
import redis

from conftest import RawConn, ex

NOAUTH = b"-NOAUTH Authentication required.\r\n"
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"


@pytest.fixture
def locked(start_server):
    """A server started with --requirepass secret."""
    return start_server("--requirepass", "secret")


@pytest.fixture
def app_user(start_server):
    """A server with user `app` (password pw) limited to ~app:* and +@read, and a
    connected default-user client to administer it."""
    s = start_server()
    admin = redis.Redis(host=s.host, port=s.port)
    assert admin.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@read") == b"OK"
    admin.set("app:1", "v")
    admin.set("other", "x")
    return s, admin


def as_dict(reply) -> dict:
    """A map reply as a dict, whether the client parsed it or left it flat."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2]))


def auth_app(s) -> RawConn:
    c = RawConn(s.port)
    assert c.call("AUTH", "app", "pw") == b"+OK\r\n"
    return c


def test_requirepass_refuses_every_entry_path(locked):
    c = RawConn(locked.port)
    # Plain, and a command that does not exist is still "unknown" first (Redis's order).
    assert c.call("GET", "k") == NOAUTH
    # Pipelined: every request answered, none run.
    c.send(RawConn.encode("SET", "k", "v") + RawConn.encode("GET", "k") + RawConn.encode("PING"))
    assert [c.read_reply() for _ in range(3)] == [NOAUTH] * 3
    # MULTI itself is refused; a refused EXEC answers EXECABORT, as Redis does.
    assert c.call("MULTI") == NOAUTH
    assert c.call("EXEC") == b"-EXECABORT Transaction discarded because of: NOAUTH Authentication required.\r\n"
    # Scripts and Pub/Sub.
    assert c.call("EVAL", "return redis.call('set','k','v')", "0") == NOAUTH
    assert c.call("SUBSCRIBE", "ch") == NOAUTH
    assert c.call("PUBLISH", "ch", "m") == NOAUTH
    # HELLO without AUTH answers NOAUTH and leaves the protocol alone.
    assert c.call("HELLO", "3").startswith(b"-NOAUTH HELLO must be called with the client already authenticated")
    assert c.call("PING") == NOAUTH
    # Inline commands too.
    c.send(b"GET k\r\n")
    assert c.read_reply() == NOAUTH
    # Nothing ran.
    ok = RawConn(locked.port)
    assert ok.call("AUTH", "secret") == b"+OK\r\n"
    assert ok.call("EXISTS", "k") == b":0\r\n"


def test_auth_errors_and_success(locked, start_server):
    c = RawConn(locked.port)
    assert c.call("AUTH", "wrong") == WRONGPASS
    assert c.call("AUTH", "nobody", "secret") == WRONGPASS
    assert c.call("AUTH", "a", "b", "c") == b"-ERR syntax error\r\n"
    assert c.call("AUTH", "default", "secret") == b"+OK\r\n"
    assert c.call("SET", "k", "v") == b"+OK\r\n"
    assert c.call("ACL", "WHOAMI") == b"$7\r\ndefault\r\n"
    # HELLO 3 AUTH authenticates and switches protocol in one go.
    h = RawConn(locked.port)
    assert h.call("HELLO", "3", "AUTH", "default", "wrong") == WRONGPASS
    assert h.call("HELLO", "3", "AUTH", "default", "secret").startswith(b"%7\r\n")
    assert h.call("GET", "k") == b"$1\r\nv\r\n"
    # Without any password configured.
    open_srv = start_server()
    o = RawConn(open_srv.port)
    assert o.call("AUTH", "x") == (
        b"-ERR AUTH <password> called without any password configured for the default user. "
        b"Are you sure your configuration is correct?\r\n")


def test_config_set_requirepass_applies_to_new_connections(start_server):
    s = start_server()
    admin = RawConn(s.port)
    assert admin.call("CONFIG", "SET", "requirepass", "p2") == b"+OK\r\n"
    # The connection that set it stays authenticated, as in Redis.
    assert admin.call("PING") == b"+PONG\r\n"
    fresh = RawConn(s.port)
    assert fresh.call("PING") == NOAUTH
    assert fresh.call("AUTH", "p2") == b"+OK\r\n"
    # requirepass is the default user's password: its rules show it hashed, no nopass.
    flags = admin.call("ACL", "GETUSER", "default")
    assert b"nopass" not in flags
    assert admin.call("CONFIG", "SET", "requirepass", "") == b"+OK\r\n"
    assert RawConn(s.port).call("PING") == b"+PONG\r\n"


def test_unauthenticated_requests_are_kept_small(locked):
    c = RawConn(locked.port)
    c.send(b"*100\r\n")
    assert c.expect_closed() == b"-ERR Protocol error: unauthenticated multibulk length\r\n"


def test_restricted_user_direct(app_user):
    s, _ = app_user
    c = auth_app(s)
    assert c.call("GET", "app:1") == b"$1\r\nv\r\n"
    assert c.call("SET", "app:1", "w") == b"-NOPERM User app has no permissions to run the 'set' command\r\n"
    assert c.call("GET", "other") == b"-NOPERM No permissions to access a key\r\n"
    assert c.call("MGET", "app:1", "other") == b"-NOPERM No permissions to access a key\r\n"


def test_restricted_user_in_script(app_user):
    s, admin = app_user
    c = auth_app(s)
    # EVAL itself is not @read: allow it, keep the data rights as they are.
    admin.execute_command("ACL", "SETUSER", "app", "+eval")
    write = c.call("EVAL", "return redis.call('set', KEYS[1], 'w')", "1", "app:1")
    assert write.startswith(b"-ERR ACL failure in script: User app has no permissions to run the 'set' command")
    read_other = c.call("EVAL", "return redis.call('get', 'other')", "0")
    assert read_other.startswith(b"-ERR ACL failure in script: No permissions to access a key")
    assert c.call("EVAL", "return redis.call('get', 'app:1')", "0") == b"$1\r\nv\r\n"
    assert admin.get("app:1") == b"v"
    # redis.acl_check_cmd answers for the caller too.
    check = "return {redis.acl_check_cmd('get','app:1'), redis.acl_check_cmd('set','app:1','w'), redis.acl_check_cmd('get','other')}"
    assert c.call("EVAL", check, "0") == b"*3\r\n:1\r\n$-1\r\n$-1\r\n"
    assert admin.eval(check, 0) == [1, 1, 1]


def test_restricted_user_in_multi(app_user):
    s, admin = app_user
    c = auth_app(s)
    admin.execute_command("ACL", "SETUSER", "app", "+multi", "+exec")
    assert c.call("MULTI") == b"+OK\r\n"
    assert c.call("SET", "app:1", "w") == b"-NOPERM User app has no permissions to run the 'set' command\r\n"
    assert c.call("GET", "other") == b"-NOPERM No permissions to access a key\r\n"
    assert c.call("EXEC") == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    # Rights revoked between queueing and EXEC are checked again at EXEC.
    assert c.call("MULTI") == b"+OK\r\n"
    assert c.call("GET", "app:1") == b"+QUEUED\r\n"
    admin.execute_command("ACL", "SETUSER", "app", "-get")
    assert c.call("EXEC") == (
        b"*1\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the "
        b"EXEC call. This command is no longer allowed for the following reason: no permission to "
        b"execute the command or subcommand\r\n")
    assert admin.get("app:1") == b"v"


def test_channels(start_server):
    s = start_server()
    admin = redis.Redis(host=s.host, port=s.port)
    admin.execute_command("ACL", "SETUSER", "ps", "on", "nopass", "+@pubsub", "resetchannels", "&news.*")
    c = RawConn(s.port)
    assert c.call("AUTH", "ps", "x") == b"+OK\r\n"
    assert c.call("PUBLISH", "other", "m") == b"-NOPERM No permissions to access a channel\r\n"
    assert c.call("PUBLISH", "news.a", "m") == b":0\r\n"
    assert c.call("SUBSCRIBE", "other") == b"-NOPERM No permissions to access a channel\r\n"
    # A PSUBSCRIBE pattern must be granted literally.
    assert c.call("PSUBSCRIBE", "news.a*") == b"-NOPERM No permissions to access a channel\r\n"
    assert c.call("SUBSCRIBE", "news.a").startswith(b"*3\r\n$9\r\nsubscribe\r\n")
    # Revoking the channel disconnects the subscriber.
    admin.execute_command("ACL", "SETUSER", "ps", "resetchannels")
    c.expect_closed()


def test_acl_log_entries(app_user):
    s, admin = app_user
    admin.execute_command("ACL", "LOG", "RESET")
    c = auth_app(s)
    c.call("SET", "app:1", "w")
    c.call("GET", "other")
    c.call("GET", "other")
    bad = RawConn(s.port)
    bad.call("AUTH", "app", "nope")
    log = ex(admin)("ACL", "LOG")
    assert len(log) == 3
    entries = [as_dict(e) for e in log]
    auth, key, cmd = entries
    assert (auth[b"reason"], auth[b"context"], auth[b"object"], auth[b"username"]) == (b"auth", b"toplevel", b"AUTH", b"app")
    assert (key[b"reason"], key[b"object"], key[b"count"]) == (b"key", b"other", 2)
    assert (cmd[b"reason"], cmd[b"object"], cmd[b"username"]) == (b"command", b"set", b"app")
    assert b"cmd=set" in cmd[b"client-info"] and b"user=app" in cmd[b"client-info"]
    assert cmd[b"entry-id"] == 0 and key[b"entry-id"] == 1 and auth[b"entry-id"] == 2
    assert key[b"timestamp-last-updated"] >= key[b"timestamp-created"]
    assert set(cmd) == {b"count", b"reason", b"context", b"object", b"username", b"age-seconds",
                        b"client-info", b"entry-id", b"timestamp-created", b"timestamp-last-updated"}
    assert len(ex(admin)("ACL", "LOG", "1")) == 1
    info = admin.info("stats")
    assert (info["acl_access_denied_auth"], info["acl_access_denied_cmd"], info["acl_access_denied_key"]) == (1, 1, 2)


def test_user_management(start_server):
    s = start_server()
    admin = redis.Redis(host=s.host, port=s.port)
    admin.execute_command("ACL", "SETUSER", "bob", "on", ">pw", "~*", "+@all", "-@string", "+get")
    u = ex(admin)("ACL", "GETUSER", "bob")
    u = as_dict(u)
    assert u[b"commands"] == b"+@all -@string +get"
    assert u[b"keys"] == b"~*" and u[b"channels"] == b""
    assert admin.execute_command("ACL", "USERS") == [b"bob", b"default"]
    assert admin.execute_command("ACL", "DRYRUN", "bob", "set", "k", "v") == (
        b"User bob has no permissions to run the 'set' command")
    assert admin.execute_command("ACL", "DRYRUN", "bob", "get", "k") == b"OK"
    # Deleting a user disconnects its clients.
    c = RawConn(s.port)
    assert c.call("AUTH", "bob", "pw") == b"+OK\r\n"
    assert admin.execute_command("ACL", "DELUSER", "bob", "nobody") == 1
    c.expect_closed()
    with pytest.raises(redis.ResponseError, match="The 'default' user cannot be removed"):
        admin.execute_command("ACL", "DELUSER", "default")
    assert len(admin.execute_command("ACL", "GENPASS")) == 64
    assert len(admin.execute_command("ACL", "GENPASS", "5")) == 2


def test_aclfile_load_and_save(start_server, tmp_path):
    path = tmp_path / "users.acl"
    path.write_text("user alice on >pw ~a:* +get\n")
    s = start_server("--aclfile", str(path))
    admin = redis.Redis(host=s.host, port=s.port)
    assert admin.execute_command("ACL", "USERS") == [b"alice", b"default"]
    admin.execute_command("ACL", "SETUSER", "carol", "on", "nopass", "+ping")
    assert admin.execute_command("ACL", "SAVE") == b"OK"
    saved = path.read_text()
    assert "user carol on nopass sanitize-payload resetchannels -@all +ping" in saved
    path.write_text("user dave on nopass +@all\n")
    assert admin.execute_command("ACL", "LOAD") == b"OK"
    assert admin.execute_command("ACL", "USERS") == [b"dave", b"default"]


def test_secrets_are_redacted_in_slowlog_and_monitor(start_server):
    s = start_server()
    admin = RawConn(s.port)
    mon = RawConn(s.port)
    assert mon.call("MONITOR") == b"+OK\r\n"
    admin.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    admin.call("SLOWLOG", "RESET")
    admin.call("AUTH", "nobody", "hunter2")
    admin.call("ACL", "SETUSER", "eve", "on", ">hunter2")
    admin.call("CONFIG", "SET", "requirepass", "hunter2")
    log = admin.call("SLOWLOG", "GET", "-1")
    assert b"hunter2" not in log and b"eve" not in log
    assert b"$4\r\nAUTH\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n" in log
    assert b"$11\r\nrequirepass\r\n$10\r\n(redacted)\r\n" in log
    line = mon.read_line()
    assert b'"AUTH" "(redacted)" "(redacted)"' in line and b"hunter2" not in line
