"""Geo commands end to end: scores, positions, hashes, distances, area searches, STORE,
errors, and the RESP2/RESP3 reply shapes (raw bytes where the shape is the point).

Expected values are Redis 7.4's replies for the same commands.
"""

from __future__ import annotations

import pytest
import redis

from conftest import err, ex

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def sicily(r):
    return ex(r)("GEOADD", "Sicily", 13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania")


def test_geoadd_scores_and_options(r):
    x = ex(r)
    assert sicily(r) == 2
    assert x("ZSCORE", "Sicily", "Palermo") == b"3479099956230698"
    assert x("ZSCORE", "Sicily", "Catania") == b"3479447370796909"
    assert x("TYPE", "Sicily") == b"zset"
    # Update: no new member, CH counts the change.
    assert x("GEOADD", "Sicily", 13.5, 38.1, "Palermo") == 0
    assert x("GEOADD", "Sicily", "CH", 13.6, 38.1, "Palermo") == 1
    assert x("GEOADD", "Sicily", "NX", 13.7, 38.1, "Palermo", 14, 37, "Enna") == 1
    assert x("GEOADD", "Sicily", "XX", "CH", 13.361389, 38.115556, "Palermo", 1, 1, "Nowhere") == 1
    assert x("ZSCORE", "Sicily", "Palermo") == b"3479099956230698"
    assert x("ZCARD", "Sicily") == 3
    assert x("GEOADD", "fresh", "XX", 1, 1, "a") == 0
    assert x("EXISTS", "fresh") == 0


def test_geoadd_errors(r):
    x = ex(r)
    assert err(x, "GEOADD", "k", 200, 100, "m") == "invalid longitude,latitude pair 200.000000,100.000000"
    assert err(x, "GEOADD", "k", 0, 85.06, "m") == "invalid longitude,latitude pair 0.000000,85.060000"
    assert err(x, "GEOADD", "k", "x", 1, "m") == "value is not a valid float"
    assert err(x, "GEOADD", "k", "NX", "XX", 1, 1, "m") == "syntax error"
    assert err(x, "GEOADD", "k", 1, 1, "m", 2) == "syntax error"
    assert err(x, "GEOADD", "k", "GT", 1, 1, "m") == "syntax error"
    assert err(x, "GEOADD", "k", "CH", "CH", "CH") == "syntax error"
    assert err(x, "GEOADD", "k", 1, 1) == "wrong number of arguments for 'geoadd' command"
    # Nothing is added when any pair is bad.
    assert err(x, "GEOADD", "k", 1, 1, "a", 1, 91, "b") == "invalid longitude,latitude pair 1.000000,91.000000"
    assert x("EXISTS", "k") == 0
    x("SET", "s", "v")
    assert err(x, "GEOADD", "s", 1, 1, "m") == WRONGTYPE


def test_geopos_geohash_geodist(r):
    x = ex(r)
    sicily(r)
    assert x("GEOPOS", "Sicily", "Palermo", "nope", "Catania") == [
        [b"13.361389338970184", b"38.1155563954963"],
        None,
        [b"15.087267458438873", b"37.50266842333162"],
    ]
    assert x("GEOPOS", "Sicily") == []
    assert x("GEOPOS", "missing", "a") == [None]
    assert x("GEOHASH", "Sicily", "Palermo", "Catania", "nope") == [b"sqc8b49rny0", b"sqdtr74hyu0", None]
    assert x("GEOHASH", "Sicily") == []
    assert x("GEODIST", "Sicily", "Palermo", "Catania") == b"166274.1516"
    assert x("GEODIST", "Sicily", "Palermo", "Catania", "km") == b"166.2742"
    assert x("GEODIST", "Sicily", "Palermo", "Catania", "MI") == b"103.3182"
    assert x("GEODIST", "Sicily", "Palermo", "Catania", "ft") == b"545518.8700"
    assert x("GEODIST", "Sicily", "Palermo", "Palermo") == b"0.0000"
    assert x("GEODIST", "Sicily", "Palermo", "nope") is None
    assert x("GEODIST", "missing", "a", "b") is None
    assert err(x, "GEODIST", "Sicily", "Palermo", "Catania", "yd") == "unsupported unit provided. please use M, KM, FT, MI"
    assert err(x, "GEODIST", "Sicily", "Palermo", "Catania", "km", "x") == "syntax error"
    x("SET", "s", "v")
    for cmd in (("GEOPOS", "s", "a"), ("GEOHASH", "s", "a"), ("GEODIST", "s", "a", "b")):
        assert err(x, *cmd) == WRONGTYPE


def test_geopos_wire_shapes(r, raw):
    sicily(r)
    c = raw()
    assert c.call("GEOPOS", "Sicily", "Palermo", "nope") == (
        b"*2\r\n*2\r\n$18\r\n13.361389338970184\r\n$16\r\n38.1155563954963\r\n*-1\r\n"
    )
    assert c.call("HELLO", "3").startswith(b"%")
    assert c.call("GEOPOS", "Sicily", "Palermo", "nope") == (
        b"*2\r\n*2\r\n,13.361389338970184\r\n,38.1155563954963\r\n_\r\n"
    )
    # Distances are bulk strings in both protocols.
    assert c.call("GEODIST", "Sicily", "Palermo", "Catania", "km") == b"$8\r\n166.2742\r\n"
    assert c.call("GEORADIUS", "Sicily", 15, 37, 200, "km", "WITHDIST", "WITHHASH", "ASC", "COUNT", 1) == (
        b"*1\r\n*3\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n"
    )


def test_georadius_and_options(r):
    x = ex(r)
    sicily(r)
    assert x("GEORADIUS", "Sicily", 15, 37, 200, "km", "ASC") == [b"Catania", b"Palermo"]
    assert x("GEORADIUS", "Sicily", 15, 37, 200, "km", "DESC") == [b"Palermo", b"Catania"]
    assert x("GEORADIUS_RO", "Sicily", 15, 37, 100, "km") == [b"Catania"]
    assert x("GEORADIUS", "Sicily", 15, 37, 200, "km", "WITHDIST", "WITHCOORD", "ASC") == [
        [b"Catania", b"56.4413", [b"15.087267458438873", b"37.50266842333162"]],
        [b"Palermo", b"190.4424", [b"13.361389338970184", b"38.1155563954963"]],
    ]
    assert x("GEORADIUS", "Sicily", 15, 37, 200, "km", "COUNT", 1) == [b"Catania"]
    assert x("GEORADIUS", "Sicily", 15, 37, 200, "km", "COUNT", 1, "DESC") == [b"Palermo"]
    assert len(x("GEORADIUS", "Sicily", 15, 37, 200, "km", "COUNT", 1, "ANY")) == 1
    assert x("GEORADIUSBYMEMBER", "Sicily", "Palermo", 200, "km", "ASC", "WITHDIST") == [
        [b"Palermo", b"0.0000"],
        [b"Catania", b"166.2742"],
    ]
    assert x("GEORADIUSBYMEMBER_RO", "Sicily", "Catania", 1, "m") == [b"Catania"]
    assert x("GEORADIUS", "Sicily", 0, 0, 1, "km") == []
    assert x("GEORADIUS", "missing", 15, 37, 200, "km") == []
    assert x("GEORADIUSBYMEMBER", "missing", "nobody", "x", "y") == []


def test_georadius_errors(r):
    x = ex(r)
    sicily(r)
    assert err(x, "GEORADIUS", "Sicily", 15, 37, -1, "km") == "radius cannot be negative"
    assert err(x, "GEORADIUS", "Sicily", 15, 37, "far", "km") == "need numeric radius"
    assert err(x, "GEORADIUS", "Sicily", 15, 37, 1, "yd") == "unsupported unit provided. please use M, KM, FT, MI"
    assert err(x, "GEORADIUS", "Sicily", 15, 37, 1, "km", "COUNT", 0) == "COUNT must be > 0"
    assert err(x, "GEORADIUS", "Sicily", 15, 37, 1, "km", "COUNT", "x") == "value is not an integer or out of range"
    assert err(x, "GEORADIUS", "Sicily", 15, 37, 1, "km", "COUNT") == "syntax error"
    assert err(x, "GEORADIUS", "Sicily", 15, 37, 1, "km", "ANY") == "the ANY argument requires COUNT argument"
    assert err(x, "GEORADIUS", "Sicily", 15, 37, 1, "km", "STORE", "d", "WITHDIST") == (
        "STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
    )
    assert err(x, "GEORADIUS_RO", "Sicily", 15, 37, 1, "km", "STORE", "d") == "syntax error"
    assert err(x, "GEORADIUSBYMEMBER", "Sicily", "nobody", 1, "km") == "could not decode requested zset member"
    x("SET", "s", "v")
    # The key's type is checked before anything else.
    assert err(x, "GEORADIUS", "s", 999, 999, -1, "yd") == WRONGTYPE


def test_geosearch(r):
    x = ex(r)
    sicily(r)
    x("GEOADD", "Sicily", 12.758489, 38.788135, "edge1", 17.241510, 38.788135, "edge2")
    assert x("GEOSEARCH", "Sicily", "FROMLONLAT", 15, 37, "BYRADIUS", 200, "km", "ASC") == [b"Catania", b"Palermo"]
    assert x("GEOSEARCH", "Sicily", "FROMLONLAT", 15, 37, "BYBOX", 400, 400, "km", "ASC") == [
        b"Catania", b"Palermo", b"edge2", b"edge1",
    ]
    assert x("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", 1, "km") == [b"Palermo"]
    assert x("GEOSEARCH", "Sicily", "FROMLONLAT", 15, 37, "BYBOX", 400, 400, "km", "ASC", "COUNT", 1, "WITHHASH") == [
        [b"Catania", 3479447370796909]
    ]
    assert x("GEOSEARCH", "missing", "FROMMEMBER", "a", "BYBOX", 1, 1, "km") == []
    no_from = "exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch"
    assert err(x, "geosearch", "Sicily", "BYRADIUS", 1, "km", "ASC", "DESC") == no_from
    assert err(x, "GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMLONLAT", 1, 1, "BYRADIUS", 1, "km") == "syntax error"
    assert err(x, "GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "COUNT", 1, "ASC") == (
        "exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH"
    )
    assert err(x, "GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", 1, "km", "BYBOX", 1, 1, "km") == "syntax error"
    assert err(x, "GEOSEARCH", "Sicily", "FROMLONLAT", 1, 1, "BYBOX", -1, 1, "km") == "height or width cannot be negative"
    assert err(x, "GEOSEARCH", "Sicily", "FROMLONLAT", 1, 1, "BYBOX", "w", 1, "km") == "need numeric width"
    assert err(x, "GEOSEARCH", "Sicily", "FROMLONLAT", 1, 1, "BYBOX", 1, "h", "km") == "need numeric height"
    assert err(x, "GEOSEARCH", "Sicily", "FROMMEMBER", "x", "BYBOX", 1, 1, "km") == "could not decode requested zset member"
    assert err(x, "GEOSEARCH", "Sicily", "FROMLONLAT", 1, 1, "BYRADIUS", 1, "km", "STORE", "d") == "syntax error"


def test_store_variants(r):
    x = ex(r)
    sicily(r)
    assert x("GEORADIUS", "Sicily", 15, 37, 200, "km", "STORE", "dst") == 2
    assert x("ZRANGE", "dst", 0, -1, "WITHSCORES") == [b"Palermo", b"3479099956230698", b"Catania", b"3479447370796909"]
    assert x("GEORADIUSBYMEMBER", "Sicily", "Palermo", 200, "km", "STOREDIST", "dst") == 2
    assert x("ZRANGE", "dst", 0, -1, "WITHSCORES") == [b"Palermo", b"0", b"Catania", b"166.27415156960032"]
    assert x("GEOSEARCHSTORE", "dst2", "Sicily", "FROMLONLAT", 15, 37, "BYRADIUS", 200, "km", "COUNT", 1, "STOREDIST") == 1
    assert x("ZRANGE", "dst2", 0, -1, "WITHSCORES") == [b"Catania", b"56.4412578701582"]
    # An empty result deletes the destination.
    assert x("GEOSEARCHSTORE", "dst2", "Sicily", "FROMLONLAT", 0, 0, "BYRADIUS", 1, "m") == 0
    assert x("EXISTS", "dst2") == 0
    assert x("GEORADIUS", "missing", 1, 1, 1, "km", "STORE", "dst") == 0
    assert x("EXISTS", "dst") == 0
    assert err(x, "GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", 15, 37, "BYRADIUS", 1, "km", "WITHCOORD") == (
        "GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
    )


def test_key_extraction(r):
    x = ex(r)
    assert x("COMMAND", "GETKEYS", "GEORADIUS", "src", 1, 1, 1, "km", "STORE", "d1") == [b"src", b"d1"]
    assert x("COMMAND", "GETKEYS", "GEORADIUSBYMEMBER", "src", "m", 1, "km", "STOREDIST", "d2") == [b"src", b"d2"]
    assert x("COMMAND", "GETKEYS", "GEOSEARCHSTORE", "d", "s", "FROMMEMBER", "m", "BYRADIUS", 1, "km") == [b"d", b"s"]
    flags = lambda name: x("COMMAND", "INFO", name)[0][2]  # noqa: E731
    assert b"movablekeys" in flags("georadius")
    assert b"movablekeys" in flags("georadiusbymember")
    assert b"movablekeys" not in flags("georadius_ro")
    assert b"movablekeys" not in flags("geosearchstore")


def test_many_points_wide_and_polar(r):
    """A grid of points: every search agrees with a brute-force distance filter."""
    x = ex(r)
    pts = []
    for i in range(-20, 21):
        for j in range(-20, 21):
            pts += [i * 0.5, 60 + j * 0.5, f"p{i}_{j}"]
    x("GEOADD", "grid", *pts)
    within = x("GEORADIUS", "grid", 0, 60, 300, "km")
    assert len(within) == len(set(within))
    dists = {m: float(x("GEODIST", "grid", "p0_0", m, "km")) for m in within}
    assert all(d <= 300.0001 for d in dists.values())
    everything = x("GEORADIUS", "grid", 0, 60, 20000, "km")
    assert len(everything) == 41 * 41
    outside = set(x("ZRANGE", "grid", 0, -1)) - set(within)
    assert all(float(x("GEODIST", "grid", "p0_0", m, "km")) > 299.99 for m in list(outside)[:200])
