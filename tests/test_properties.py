"""Property tests (Hypothesis) against the running server.

Each property draws many small inputs and compares the server's byte-exact reply
with a model computed in Python. Example counts are bounded and each example has a
deadline, so the file runs in a few seconds; a failure prints the shrunk input.

  * binary keys and values survive SET/GET byte for byte, including values that
    look like integers but are not in canonical form (densekv stores canonical
    integers compactly, so "007", "-0", "+1" or 2**63 must not be normalised);
  * INCRBY/DECRBY agree with Python's unbounded ints, and refuse exactly the
    steps that leave the signed 64-bit range, leaving the value unchanged.
"""

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

I64_MIN, I64_MAX = -(2**63), 2**63 - 1

# Per-example deadline: generous for a few loopback round trips on a busy machine,
# short enough that a stalled reply fails fast (the socket timeout is 5 s).
FAST = settings(max_examples=150, deadline=timedelta(seconds=2))


def bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


# Strings an integer encoding could be tempted to rewrite: canonical integers
# (incl. the i64 bounds and just beyond them) and non-canonical spellings.
int_like = st.one_of(
    st.integers(min_value=I64_MIN - 2, max_value=I64_MAX + 2).map(lambda n: str(n).encode()),
    st.integers(min_value=-(10**6), max_value=10**6).flatmap(
        lambda n: st.sampled_from([b"0%d" % abs(n), b"+%d" % n, b" %d" % n, b"%d " % n,
                                   b"-0", b"-00", b"%d.0" % n, b"%de0" % n])),
)
values = st.one_of(st.binary(max_size=4096), int_like)
keys = st.binary(min_size=0, max_size=64)


@FAST
@given(key=keys, value=values)
def test_set_get_round_trip_is_byte_exact(c, key, value):
    assert c.call("SET", key, value) == b"+OK\r\n"
    assert c.call("GET", key) == bulk(value)
    assert c.call("STRLEN", key) == b":%d\r\n" % len(value)
    assert c.call("EXISTS", key) == b":1\r\n"
    assert c.call("DEL", key) == b":1\r\n"
    assert c.call("GET", key) == b"$-1\r\n"


# A step is a command and either a plain delta or ("edge", k): the delta that
# lands k past the bound the command moves towards (k = 0 lands exactly on it),
# so the overflow boundary is hit on purpose rather than by luck.
deltas = st.one_of(st.integers(min_value=I64_MIN, max_value=I64_MAX),
                   st.tuples(st.just("edge"), st.integers(min_value=-2, max_value=2)))
steps = st.lists(st.tuples(st.sampled_from(["INCRBY", "DECRBY"]), deltas), max_size=12)


@FAST
@given(start=st.integers(min_value=I64_MIN, max_value=I64_MAX), steps=steps)
def test_incrby_decrby_match_python_ints(c, start, steps):
    assert c.call("SET", "n", start) == b"+OK\r\n"
    model = start
    for cmd, by in steps:
        if isinstance(by, tuple):
            by = I64_MAX - model + by[1] if cmd == "INCRBY" else model - I64_MIN + by[1]
        reply = c.call(cmd, "n", by)
        if not I64_MIN <= by <= I64_MAX:
            assert reply == b"-ERR value is not an integer or out of range\r\n", (cmd, by)
            continue
        if cmd == "DECRBY" and by == I64_MIN:
            # -(-2**63) does not fit, whatever the current value.
            assert reply == b"-ERR decrement would overflow\r\n"
            continue
        want = model + by if cmd == "INCRBY" else model - by
        if I64_MIN <= want <= I64_MAX:
            assert reply == b":%d\r\n" % want, (cmd, model, by)
            model = want
        else:
            assert reply == b"-ERR increment or decrement would overflow\r\n", (cmd, model, by)
    assert c.call("GET", "n") == bulk(b"%d" % model)
