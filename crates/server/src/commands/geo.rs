//! Geospatial commands (GEOADD, GEOPOS, GEODIST, GEOHASH, GEORADIUS*,
//! GEOSEARCH, GEOSEARCHSTORE), layered on the sorted set.
//!
//! A position is stored as a sorted-set member whose score is a 52-bit
//! geohash: longitude and latitude are each scaled to 26 bits over
//! [-180, 180] and [-85.05112878, 85.05112878] (the Web Mercator limits)
//! and interleaved, latitude on the even bits. Scores, GEOHASH strings,
//! GEOPOS coordinates and distances therefore match Redis's to the printed
//! digit, and a geo set is an ordinary ZSET to every other command.
//!
//! An area search picks a geohash precision from the radius, then scans the
//! nine cells around the centre (each cell is one contiguous score range)
//! and keeps the points really inside the circle or box. GEOADD rewrites its
//! arguments into a ZADD call, so its options behave exactly as ZADD's.

use resp::Reply;
use storage::types::zset::ZSet;

use crate::command::flags::*;
use crate::commands::zset::store_result;
use crate::command::{arg_f64, arg_i64, is, keys, kf, range_spec, spec, Begin, CmdError, CmdResult, Ctx, Find, KeySpec, Spec};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    const R: &[&str] = &["read", "geo", "slow"];
    const W: &[&str] = &["write", "geo", "slow"];
    let k1 = keys(1, 1, 1);
    let s = |name, arity, flags, k, h, acl, summary, since| spec(name, arity, flags, k, h).acl(acl).group("geo").doc(summary, since);
    // STORE/STOREDIST are searched from the first optional argument.
    let store_kw = |word, from| KeySpec { flags: kf::OW_UPDATE, begin: Begin::Keyword(word, from), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } };
    let radius_specs = |from| vec![range_spec(kf::RO_ACCESS, 1, 0, 1), store_kw("STORE", from), store_kw("STOREDIST", from)];
    vec![
        s("geoadd", -5, WRITE | DENYOOM, k1, geoadd, W, "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", "3.2.0"),
        s("geodist", -4, READONLY, k1, geodist, R, "Returns the distance between two members of a geospatial index.", "3.2.0"),
        s("geohash", -2, READONLY, k1, geohash, R, "Returns members from a geospatial index as geohash strings.", "3.2.0"),
        s("geopos", -2, READONLY, k1, geopos, R, "Returns the longitude and latitude of members from a geospatial index.", "3.2.0"),
        s("georadius", -6, WRITE | DENYOOM, k1, georadius, W, "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", "3.2.0")
            .key_specs(radius_specs(6)),
        s("georadius_ro", -6, READONLY, k1, georadius_ro, R, "Returns members from a geospatial index that are within a distance from a coordinate.", "3.2.10"),
        s("georadiusbymember", -5, WRITE | DENYOOM, k1, georadiusbymember, W, "Queries a geospatial index for members within a distance from a member, optionally stores the result.", "3.2.0")
            .key_specs(radius_specs(5)),
        s("georadiusbymember_ro", -5, READONLY, k1, georadiusbymember_ro, R, "Returns members from a geospatial index that are within a distance from a member.", "3.2.10"),
        s("geosearch", -7, READONLY, k1, geosearch, R, "Queries a geospatial index for members inside an area of a box or a circle.", "6.2.0"),
        s("geosearchstore", -8, WRITE | DENYOOM, keys(1, 2, 1), geosearchstore, W, "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", "6.2.0")
            .key_specs(vec![range_spec(kf::OW_UPDATE, 1, 0, 1), range_spec(kf::RO_ACCESS, 2, 0, 1)]),
    ]
}

// ---- geohash ------------------------------------------------------------------

/// Bits per coordinate in a stored score (52 bits in all).
const STEP_MAX: u32 = 26;
const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
/// The coordinate ranges of stored scores: (longitude, latitude).
const WGS84: [(f64, f64); 2] = [(LON_MIN, LON_MAX), (LAT_MIN, LAT_MAX)];
/// Mean earth radius used for every distance, in meters.
const EARTH_RADIUS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

/// A geohash of `step` bits per coordinate; step 0 marks a cell to skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cell {
    bits: u64,
    step: u32,
}

impl Cell {
    const NONE: Cell = Cell { bits: 0, step: 0 };

    /// The score range [min, max) holding every point of this cell.
    fn score_range(self) -> (f64, f64) {
        let shift = 52 - self.step * 2;
        ((self.bits << shift) as f64, ((self.bits + 1) << shift) as f64)
    }

    /// The neighbouring cell `dx` columns east and `dy` rows north,
    /// wrapping around at the edges.
    fn moved(self, dx: i8, dy: i8) -> Cell {
        let width = 64 - self.step * 2;
        let lon_mask = 0xaaaa_aaaa_aaaa_aaaa_u64 >> width;
        let lat_mask = 0x5555_5555_5555_5555_u64 >> width;
        let shift = |v: u64, other_mask: u64, mask: u64, d: i8| -> u64 {
            let r = match d {
                0 => return v,
                d if d > 0 => v.wrapping_add(other_mask.wrapping_add(1)),
                _ => (v | other_mask).wrapping_sub(other_mask.wrapping_add(1)),
            };
            r & mask
        };
        let lon = shift(self.bits & 0xaaaa_aaaa_aaaa_aaaa, lat_mask, lon_mask, dx);
        let lat = shift(self.bits & 0x5555_5555_5555_5555, lon_mask, lat_mask, dy);
        Cell { bits: lon | lat, step: self.step }
    }
}

/// Spreads the low 32 bits of `v` onto the even bits of the result.
fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `v` into a 32-bit value (inverse of `spread`).
fn gather(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    ((x | (x >> 16)) & 0xffff_ffff) as u32
}

/// The cell of `step` bits holding (lon, lat) over `ranges`; the caller has
/// checked the coordinates are inside them.
fn encode(ranges: [(f64, f64); 2], lon: f64, lat: f64, step: u32) -> Cell {
    let [(lon_min, lon_max), (lat_min, lat_max)] = ranges;
    let scale = (1u64 << step) as f64;
    // Truncating float-to-int casts, as the reference implementation does.
    let lat_off = ((lat - lat_min) / (lat_max - lat_min) * scale) as u32;
    let lon_off = ((lon - lon_min) / (lon_max - lon_min) * scale) as u32;
    Cell { bits: spread(lat_off) | (spread(lon_off) << 1), step }
}

/// A cell's bounds: ((lon_min, lon_max), (lat_min, lat_max)).
fn bounds_of(c: Cell) -> [(f64, f64); 2] {
    let scale = (1u64 << c.step) as f64;
    let lat_i = gather(c.bits) as f64;
    let lon_i = gather(c.bits >> 1) as f64;
    let span = |(min, max): (f64, f64), i: f64| (min + (i / scale) * (max - min), min + ((i + 1.0) / scale) * (max - min));
    [span(WGS84[0], lon_i), span(WGS84[1], lat_i)]
}

/// The 52-bit score of a (validated) position.
pub fn score_of(lon: f64, lat: f64) -> u64 {
    encode(WGS84, lon, lat, STEP_MAX).bits
}

/// The position a score stands for: the centre of its cell, clamped.
pub fn decode_score(score: f64) -> [f64; 2] {
    // Saturating cast: scores that no GEOADD wrote still decode somewhere.
    let [(lon0, lon1), (lat0, lat1)] = bounds_of(Cell { bits: score as u64, step: STEP_MAX });
    [((lon0 + lon1) / 2.0).clamp(LON_MIN, LON_MAX), ((lat0 + lat1) / 2.0).clamp(LAT_MIN, LAT_MAX)]
}

/// The standard 11-character geohash of a score (latitude over ±90).
fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [lon, lat] = decode_score(score);
    let c = encode([(-180.0, 180.0), (-90.0, 90.0)], lon, lat, STEP_MAX);
    let mut out = [b'0'; 11];
    for (i, ch) in out.iter_mut().enumerate().take(10) {
        *ch = ALPHABET[((c.bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

fn rad(deg: f64) -> f64 {
    deg * (std::f64::consts::PI / 180.0)
}

/// Meters between two latitudes on one meridian.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (rad(lat2) - rad(lat1)).abs()
}

/// Great-circle distance in meters (haversine).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((rad(lon2) - rad(lon1)) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (rad(lat1), rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

/// A distance as Redis prints it: rounded (half to even) to 4 decimals.
fn format_distance(d: f64) -> String {
    let v = (d * 10000.0).round_ties_even();
    if !v.is_finite() || v.abs() >= 9.2e18 {
        return format!("{d:.4}");
    }
    let v = v as i64;
    let sign = if v < 0 { "-" } else { "" };
    let a = v.unsigned_abs();
    format!("{sign}{}.{:04}", a / 10000, a % 10000)
}

// ---- search areas -------------------------------------------------------------

/// What a search covers.
#[derive(Debug, Clone, Copy)]
enum Area {
    /// A circle of this radius (in the request's unit).
    Radius(f64),
    /// A box of this width and height (in the request's unit).
    Box(f64, f64),
}

/// A search: its centre, area and unit (meters per unit).
#[derive(Debug, Clone, Copy)]
struct Shape {
    center: [f64; 2],
    area: Area,
    unit: f64,
}

impl Shape {
    /// The distance from the centre to the point a score stands for, when
    /// the point is inside the area; and the point.
    fn contains(&self, score: f64) -> Option<([f64; 2], f64)> {
        let p = decode_score(score);
        let [x, y] = self.center;
        match self.area {
            Area::Radius(r) => {
                let d = distance(x, y, p[0], p[1]);
                (d <= r * self.unit).then_some((p, d))
            }
            Area::Box(w, h) => {
                if lat_distance(p[1], y) > h * self.unit / 2.0 || distance(p[0], p[1], x, p[1]) > w * self.unit / 2.0 {
                    return None;
                }
                Some((p, distance(x, y, p[0], p[1])))
            }
        }
    }

    /// The bounding box: (lon_min, lat_min, lon_max, lat_max).
    fn bounding_box(&self) -> [f64; 4] {
        let [lon, lat] = self.center;
        let (h, w) = match self.area {
            Area::Radius(r) => (r * self.unit, r * self.unit),
            Area::Box(w, h) => (h * self.unit / 2.0, w * self.unit / 2.0),
        };
        let lat_delta = (h / EARTH_RADIUS).to_degrees_exact();
        let top = (w / EARTH_RADIUS / rad(lat + lat_delta).cos()).to_degrees_exact();
        let bottom = (w / EARTH_RADIUS / rad(lat - lat_delta).cos()).to_degrees_exact();
        // Hemispheres bulge opposite ways: take the wider edge.
        let lon_delta = if lat < 0.0 { bottom } else { top };
        [lon - lon_delta, lat - lat_delta, lon + lon_delta, lat + lat_delta]
    }

    /// The cells to scan: the centre cell and its eight neighbours, with
    /// those that cannot hold a match set to `Cell::NONE`.
    fn cells(&self) -> [Cell; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let [lon, lat] = self.center;
        let radius = match self.area {
            Area::Radius(r) => r,
            Area::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
        } * self.unit;
        let mut step = estimate_step(radius, lat);
        let neighbours = |c: Cell| {
            [c, c.moved(0, 1), c.moved(0, -1), c.moved(1, 0), c.moved(-1, 0), c.moved(1, 1), c.moved(-1, 1), c.moved(1, -1), c.moved(-1, -1)]
        };
        let mut n = neighbours(encode(WGS84, lon, lat, step));
        // Near a cell edge the estimated step can be too fine: coarsen once.
        let [north, south, east, west] = [bounds_of(n[1]), bounds_of(n[2]), bounds_of(n[3]), bounds_of(n[4])];
        if step > 1 && (north[1].1 < max_lat || south[1].0 > min_lat || east[0].1 < max_lon || west[0].0 > min_lon) {
            step -= 1;
            n = neighbours(encode(WGS84, lon, lat, step));
        }
        if step >= 2 {
            let [(a_lon0, a_lon1), (a_lat0, a_lat1)] = bounds_of(n[0]);
            // Indexes: 1 N, 2 S, 3 E, 4 W, 5 NE, 6 NW, 7 SE, 8 SW.
            let mut drop = |idx: [usize; 3]| idx.iter().for_each(|&i| n[i] = Cell::NONE);
            if a_lat0 < min_lat {
                drop([2, 8, 7]);
            }
            if a_lat1 > max_lat {
                drop([1, 5, 6]);
            }
            if a_lon0 < min_lon {
                drop([4, 8, 6]);
            }
            if a_lon1 > max_lon {
                drop([3, 7, 5]);
            }
        }
        n
    }
}

/// Degrees from radians the way the reference divides (not multiplies).
trait ToDegrees {
    fn to_degrees_exact(self) -> f64;
}

impl ToDegrees for f64 {
    fn to_degrees_exact(self) -> f64 {
        self / (std::f64::consts::PI / 180.0)
    }
}

/// The geohash precision whose cells cover `radius` meters at `lat`.
fn estimate_step(mut radius: f64, lat: f64) -> u32 {
    if radius == 0.0 {
        return STEP_MAX;
    }
    let mut step: i32 = 1;
    while radius < MERCATOR_MAX {
        radius *= 2.0;
        step += 1;
    }
    step -= 2;
    if lat.abs() > 66.0 {
        step -= 1;
        if lat.abs() > 80.0 {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u32
}

/// One match: member, position, distance in meters, score.
struct Hit {
    member: Vec<u8>,
    pos: [f64; 2],
    dist: f64,
    score: f64,
}

/// The points of `z` inside `shape`, in scan order; stops once `limit`
/// (0: none) points are found.
fn search(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Hit> {
    let cells = shape.cells();
    let mut hits = Vec::new();
    let mut last: Option<Cell> = None;
    for (i, c) in cells.into_iter().enumerate() {
        if c == Cell::NONE {
            continue;
        }
        // Huge areas make neighbours coincide: scan each range once.
        if last == Some(c) {
            continue;
        }
        if limit > 0 && hits.len() >= limit {
            break;
        }
        let (min, max) = c.score_range();
        for (m, s) in z.iter_from(z.partition(|s, _| s < min)) {
            if s >= max {
                break;
            }
            if let Some((pos, dist)) = shape.contains(s) {
                hits.push(Hit { member: m.to_vec(), pos, dist, score: s });
            }
            if limit > 0 && hits.len() >= limit {
                break;
            }
        }
        // The centre cell is never compared against: only neighbours can coincide.
        if i > 0 {
            last = Some(c);
        }
    }
    hits
}

// ---- argument parsing -----------------------------------------------------------

/// Meters per unit; Redis's error for an unknown unit.
fn unit(a: &[u8]) -> Result<f64, CmdError> {
    let u = a.to_ascii_lowercase();
    Ok(match u.as_slice() {
        b"m" => 1.0,
        b"km" => 1000.0,
        b"ft" => 0.3048,
        b"mi" => 1609.34,
        _ => return Err(CmdError::err("unsupported unit provided. please use M, KM, FT, MI")),
    })
}

/// A longitude and latitude pair, range-checked.
fn lonlat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], CmdError> {
    let (x, y) = (arg_f64(lon)?, arg_f64(lat)?);
    if !(LON_MIN..=LON_MAX).contains(&x) || !(LAT_MIN..=LAT_MAX).contains(&y) {
        return Err(CmdError::err(format!("invalid longitude,latitude pair {x:.6},{y:.6}")));
    }
    Ok([x, y])
}

/// A float argument with its own error text (`need numeric radius`).
fn num(a: &[u8], what: &str) -> Result<f64, CmdError> {
    resp::num::parse_f64(a).ok_or_else(|| CmdError::err(format!("need numeric {what}")))
}

/// `radius unit`: (radius, meters per unit).
fn radius_arg(args: &[Vec<u8>]) -> Result<(f64, f64), CmdError> {
    let r = num(&args[0], "radius")?;
    if r < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((r, unit(&args[1])?))
}

/// `width height unit`: (width, height, meters per unit).
fn box_arg(args: &[Vec<u8>]) -> Result<(f64, f64, f64), CmdError> {
    let w = num(&args[0], "width")?;
    let h = num(&args[1], "height")?;
    if w < 0.0 || h < 0.0 {
        return Err(CmdError::err("height or width cannot be negative"));
    }
    Ok((w, h, unit(&args[2])?))
}

/// The position of `member` in `z`.
fn member_pos(z: &ZSet, member: &[u8]) -> Result<[f64; 2], CmdError> {
    z.score(member).map(decode_score).ok_or_else(|| CmdError::err("could not decode requested zset member"))
}

// ---- handlers --------------------------------------------------------------------

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]
pub fn geoadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut first = 2;
    let (mut nx, mut xx) = (false, false);
    while first < args.len() {
        let a = &args[first];
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if !is(a, "ch") {
            break;
        }
        first += 1;
    }
    let rest = &args[first..];
    if !rest.len().is_multiple_of(3) || (nx && xx) {
        return Err(CmdError::Syntax);
    }
    let mut zargs: Vec<Vec<u8>> = Vec::with_capacity(first + rest.len() / 3 * 2);
    zargs.push(b"zadd".to_vec());
    zargs.extend_from_slice(&args[1..first]);
    for t in rest.chunks(3) {
        let [x, y] = lonlat(&t[0], &t[1])?;
        zargs.push(score_of(x, y).to_string().into_bytes());
        zargs.push(t[2].clone());
    }
    crate::commands::zset::zadd(ctx, &zargs)
}

/// GEODIST key member1 member2 [M|KM|FT|MI]
pub fn geodist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => unit(&args[4])?,
        _ => return Err(CmdError::Syntax),
    };
    let (z, out) = ctx.read_out::<ZSet>(&args[1])?;
    let pair = z.and_then(|z| Some((z.score(&args[2])?, z.score(&args[3])?)));
    match pair {
        Some((a, b)) => {
            let ([x1, y1], [x2, y2]) = (decode_score(a), decode_score(b));
            out.bulk(format_distance(distance(x1, y1, x2, y2) / to_meters).as_bytes());
        }
        None => out.null(),
    }
    Ok(())
}

/// GEOHASH key [member ...]
pub fn geohash(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (z, out) = ctx.read_out::<ZSet>(&args[1])?;
    out.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => out.bulk(&geohash_string(s)),
            None => out.null(),
        }
    }
    Ok(())
}

/// GEOPOS key [member ...]
pub fn geopos(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (z, out) = ctx.read_out::<ZSet>(&args[1])?;
    out.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => {
                let [x, y] = decode_score(s);
                out.array(2);
                out.double(x);
                out.double(y);
            }
            None => out.null_array(),
        }
    }
    Ok(())
}

/// The keyspace event of a search that stores: Redis names it after the
/// command family.
fn store_event(form: Form) -> &'static str {
    if form == Form::Search { "geosearchstore" } else { "georadiusstore" }
}

/// The form of an area search command.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS[_RO]: centre and radius are positional.
    Coords,
    /// GEORADIUSBYMEMBER[_RO]: centre member and radius are positional.
    Member,
    /// GEOSEARCH / GEOSEARCHSTORE: everything is an option.
    Search,
}

/// GEORADIUS key longitude latitude radius unit [options]
pub fn georadius(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    radius_generic(ctx, args, Form::Coords, true)
}

/// GEORADIUS_RO key longitude latitude radius unit [options]
pub fn georadius_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    radius_generic(ctx, args, Form::Coords, false)
}

/// GEORADIUSBYMEMBER key member radius unit [options]
pub fn georadiusbymember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    radius_generic(ctx, args, Form::Member, true)
}

/// GEORADIUSBYMEMBER_RO key member radius unit [options]
pub fn georadiusbymember_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    radius_generic(ctx, args, Form::Member, false)
}

/// GEOSEARCH key FROMMEMBER m|FROMLONLAT x y BYRADIUS r u|BYBOX w h u [options]
pub fn geosearch(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    radius_generic(ctx, args, Form::Search, false)
}

/// GEOSEARCHSTORE dst src FROMMEMBER ...|FROMLONLAT ... BYRADIUS ...|BYBOX ... [STOREDIST]
pub fn geosearchstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    radius_generic(ctx, args, Form::Search, true)
}

/// Every area search. `store_ok`: GEORADIUS* accept STORE/STOREDIST;
/// for GEOSEARCH it means GEOSEARCHSTORE. Checks run in Redis's order: the
/// key's type, the positional centre and radius, then the options.
fn radius_generic(ctx: &mut Ctx, args: &[Vec<u8>], form: Form, store_ok: bool) -> CmdResult {
    let search_store = form == Form::Search && store_ok;
    let src = if search_store { &args[2] } else { &args[1] };
    let z = ctx.read::<ZSet>(src)?;
    let mut center = None;
    let mut area = None;
    let mut unit_m = 1.0;
    let base = match form {
        Form::Coords => {
            center = Some(lonlat(&args[2], &args[3])?);
            let (r, u) = radius_arg(&args[4..6])?;
            (area, unit_m) = (Some(Area::Radius(r)), u);
            6
        }
        Form::Member => {
            if let Some(z) = z {
                center = Some(member_pos(z, &args[2])?);
                let (r, u) = radius_arg(&args[3..5])?;
                (area, unit_m) = (Some(Area::Radius(r)), u);
            }
            5
        }
        Form::Search => {
            if search_store {
                3
            } else {
                2
            }
        }
    };
    let mut store: Option<&[u8]> = if search_store { Some(&args[1]) } else { None };
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc) = (false, false);
    let mut storedist = false;
    let mut desc: Option<bool> = None;
    let mut count: i64 = 0;
    let mut i = base;
    while i < args.len() {
        let a = &args[i];
        let left = args.len() - i - 1;
        if is(a, "withdist") {
            withdist = true;
        } else if is(a, "withhash") {
            withhash = true;
        } else if is(a, "withcoord") {
            withcoord = true;
        } else if is(a, "any") {
            any = true;
        } else if is(a, "asc") {
            desc = Some(false);
        } else if is(a, "desc") {
            desc = Some(true);
        } else if is(a, "count") && left >= 1 {
            count = arg_i64(&args[i + 1])?;
            if count <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            i += 1;
        } else if (is(a, "store") || is(a, "storedist")) && left >= 1 && store_ok && form != Form::Search {
            store = Some(&args[i + 1]);
            storedist = is(a, "storedist");
            i += 1;
        } else if is(a, "storedist") && search_store {
            storedist = true;
        } else if is(a, "frommember") && left >= 1 && form == Form::Search && !fromloc {
            if let Some(z) = z {
                center = Some(member_pos(z, &args[i + 1])?);
            }
            frommember = true;
            i += 1;
        } else if is(a, "fromlonlat") && left >= 2 && form == Form::Search && !frommember {
            center = Some(lonlat(&args[i + 1], &args[i + 2])?);
            fromloc = true;
            i += 2;
        } else if is(a, "byradius") && left >= 2 && form == Form::Search && !matches!(area, Some(Area::Box(..))) {
            let (r, u) = radius_arg(&args[i + 1..i + 3])?;
            (area, unit_m) = (Some(Area::Radius(r)), u);
            i += 2;
        } else if is(a, "bybox") && left >= 3 && form == Form::Search && !matches!(area, Some(Area::Radius(..))) {
            let (w, h, u) = box_arg(&args[i + 1..i + 4])?;
            (area, unit_m) = (Some(Area::Box(w, h)), u);
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        let who = if search_store { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(CmdError::err(format!("{who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")));
    }
    let name = String::from_utf8_lossy(&args[0]);
    if form == Form::Search && !(frommember || fromloc) {
        return Err(CmdError::err(format!("exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}")));
    }
    if form == Form::Search && area.is_none() {
        return Err(CmdError::err(format!("exactly one of BYRADIUS and BYBOX can be specified for {name}")));
    }
    if any && count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }
    let (Some(z), Some(center), Some(area)) = (z, center, area) else {
        // No source key (the only way center or area stays unset here).
        match store {
            Some(dst) => store_result(ctx, dst, &[], store_event(form)),
            None => ctx.out().array(0),
        }
        return Ok(());
    };
    // COUNT means "the nearest N" unless ANY says "any N".
    let desc = desc.or((count > 0 && !any).then_some(false));
    let shape = Shape { center, area, unit: unit_m };
    let limit = if any { usize::try_from(count).unwrap_or(usize::MAX) } else { 0 };
    let mut hits = search(z, &shape, limit);
    if let Some(desc) = desc {
        // Stable, with ties kept in scan order both ways.
        hits.sort_by(|a, b| {
            let c = a.dist.partial_cmp(&b.dist).unwrap_or(std::cmp::Ordering::Equal);
            if desc { c.reverse() } else { c }
        });
    }
    if count > 0 {
        hits.truncate(usize::try_from(count).unwrap_or(usize::MAX));
    }
    match store {
        None => reply_hits(ctx.out(), &hits, unit_m, withdist, withhash, withcoord),
        Some(dst) => {
            let items: Vec<(Vec<u8>, f64)> =
                hits.into_iter().map(|h| (h.member, if storedist { h.dist / unit_m } else { h.score })).collect();
            let dst = dst.to_vec();
            store_result(ctx, &dst, &items, store_event(form));
        }
    }
    Ok(())
}

/// Writes search results: bare members, or per member an array with the
/// requested extras (distance, hash, coordinates), in that order.
fn reply_hits(out: &mut Reply, hits: &[Hit], unit: f64, withdist: bool, withhash: bool, withcoord: bool) {
    let extras = withdist as usize + withhash as usize + withcoord as usize;
    out.array(hits.len());
    for h in hits {
        if extras > 0 {
            out.array(extras + 1);
        }
        out.bulk(&h.member);
        if withdist {
            out.bulk(format_distance(h.dist / unit).as_bytes());
        }
        if withhash {
            out.int(h.score as i64);
        }
        if withcoord {
            out.array(2);
            out.double(h.pos[0]);
            out.double(h.pos[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_match_redis() {
        // Values printed by Redis 7.4 for the documentation's examples.
        assert_eq!(score_of(13.361389, 38.115556), 3479099956230698);
        assert_eq!(score_of(15.087269, 37.502669), 3479447370796909);
        let [x, y] = decode_score(3479099956230698.0);
        assert_eq!(resp::num::format_f64_g17(x), "13.361389338970184");
        assert_eq!(resp::num::format_f64_g17(y), "38.1155563954963");
        assert_eq!(&geohash_string(3479099956230698.0), b"sqc8b49rny0");
        assert_eq!(&geohash_string(3479447370796909.0), b"sqdtr74hyu0");
    }

    #[test]
    fn distances() {
        let [a, b] = [decode_score(3479099956230698.0), decode_score(3479447370796909.0)];
        assert_eq!(format_distance(distance(a[0], a[1], b[0], b[1])), "166274.1516");
        assert_eq!(format_distance(distance(a[0], a[1], b[0], b[1]) / 1000.0), "166.2742");
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(0.00004), "0.0000");
        assert_eq!(format_distance(0.77506), "0.7751");
    }

    #[test]
    fn interleave_roundtrip_and_moves() {
        for v in [0u32, 1, 0x3ff_ffff, 0xdead_beef, u32::MAX] {
            assert_eq!(gather(spread(v)), v);
            assert_eq!(gather(spread(v) << 1 >> 1), v);
        }
        let c = encode(WGS84, 13.0, 38.0, 10);
        assert_eq!(c.moved(1, 0).moved(-1, 0), c);
        assert_eq!(c.moved(0, 1).moved(0, -1), c);
        let [(lon0, _), _] = bounds_of(c);
        let [(_, lon1e), _] = bounds_of(c.moved(-1, 0));
        assert!((lon0 - lon1e).abs() < 1e-9);
    }

    #[test]
    fn step_estimate() {
        assert_eq!(estimate_step(0.0, 0.0), 26);
        assert_eq!(estimate_step(f64::INFINITY, 0.0), 1);
        assert_eq!(estimate_step(1000.0, 0.0), 14);
        assert_eq!(estimate_step(1000.0, 70.0), 13);
        assert_eq!(estimate_step(1000.0, -85.0), 12);
    }
}
