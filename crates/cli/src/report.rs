//! `densekv memory-report`: MEMORY REPORT on densekv; on a server without
//! it (Redis), SCAN with MEMORY USAGE, TYPE, OBJECT ENCODING and PTTL
//! pipelined per batch, grouped by the same `keyreport` code. Prints a table
//! and optionally writes one self-contained HTML file with inline SVG
//! charts (nothing fetched when it is viewed).

use std::fmt::Write as _;
use std::io;

use keyreport::{Aggregate, KeyInfo};

use crate::conn::{Conn, Val};

/// One pattern's figures, from either source.
#[derive(Debug, Clone, Default)]
pub struct Pat {
    pub name: String,
    pub keys: u64,
    pub bytes: u64,
    pub types: Vec<(String, u64)>,
    pub encodings: Vec<(String, u64)>,
    pub with_ttl: u64,
    pub ttl_median: Option<i64>,
    pub largest: Vec<(String, u64)>,
    /// The string keys' key and value bytes as clients see them, and
    /// what those keys cost stored (MEMORY USAGE).
    pub string_raw: u64,
    pub string_bytes: u64,
}

/// A size histogram's non-empty buckets: (low, high, keys, bytes).
pub type Buckets = Vec<(u64, u64, u64, u64)>;

/// A server's report.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// host:port, and how the figures were obtained.
    pub server: String,
    pub method: &'static str,
    pub keys: u64,
    pub bytes: u64,
    pub pattern_count: u64,
    pub patterns: Vec<Pat>,
    /// Per type: (low, high, keys, bytes) buckets.
    pub histograms: Vec<(String, Buckets)>,
}

pub struct Target<'a> {
    pub addr: String,
    pub password: Option<&'a str>,
    pub db: u32,
    pub prefix: Option<&'a str>,
    pub limit: usize,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn counts(v: Option<&Val>) -> Vec<(String, u64)> {
    v.map(|m| m.array().chunks(2).map(|p| (p[0].text(), p[1].int().unwrap_or(0) as u64)).collect()).unwrap_or_default()
}

/// Connects (and authenticates) to `t`.
pub fn connect(addr: &str, password: Option<&str>) -> io::Result<Conn> {
    let mut c = Conn::connect(addr).map_err(|e| io::Error::new(e.kind(), format!("{addr}: {e}")))?;
    if let Some(p) = password {
        c.ok(&[b"AUTH", p.as_bytes()])?;
    }
    Ok(c)
}

/// The report of one server.
pub fn collect(t: &Target) -> io::Result<Summary> {
    let mut c = connect(&t.addr, t.password)?;
    let db = t.db.to_string();
    let limit = t.limit.to_string();
    let mut args: Vec<&[u8]> = vec![b"MEMORY", b"REPORT", b"DB", db.as_bytes(), b"LIMIT", limit.as_bytes()];
    if let Some(p) = t.prefix {
        args.extend_from_slice(&[b"PREFIX", p.as_bytes()]);
    }
    match c.call(&args)? {
        Val::Err(e) if e.to_ascii_lowercase().contains("unknown") => scan(&mut c, t),
        Val::Err(e) => Err(io::Error::other(e)),
        v => Ok(from_reply(&t.addr, &v)),
    }
}

/// A MEMORY REPORT reply (RESP2) as a summary.
fn from_reply(addr: &str, v: &Val) -> Summary {
    let n = |k: &str| v.get(k).and_then(Val::int).unwrap_or(0) as u64;
    let patterns = v
        .get("patterns")
        .map(|ps| {
            ps.array()
                .iter()
                .map(|p| Pat {
                    name: p.get("pattern").map(Val::text).unwrap_or_default(),
                    keys: p.get("keys").and_then(Val::int).unwrap_or(0) as u64,
                    bytes: p.get("bytes").and_then(Val::int).unwrap_or(0) as u64,
                    types: counts(p.get("types")),
                    encodings: counts(p.get("encodings")),
                    with_ttl: p.get("with-ttl").and_then(Val::int).unwrap_or(0) as u64,
                    ttl_median: p.get("ttl-median-ms").and_then(Val::int),
                    largest: p.get("largest").map(|l| l.array().iter().map(|e| (e.array()[0].text(), e.array()[1].int().unwrap_or(0) as u64)).collect()).unwrap_or_default(),
                    string_raw: p.get("string-raw-bytes").and_then(Val::int).unwrap_or(0) as u64,
                    string_bytes: p.get("string-bytes").and_then(Val::int).unwrap_or(0) as u64,
                })
                .collect()
        })
        .unwrap_or_default();
    let histograms = v
        .get("histograms")
        .map(|h| {
            h.array()
                .chunks(2)
                .map(|p| {
                    let rows = p[1].array().iter().map(|r| {
                        let x = |i: usize| r.array().get(i).and_then(Val::int).unwrap_or(0) as u64;
                        (x(0), x(1), x(2), x(3))
                    });
                    (p[0].text(), rows.collect())
                })
                .collect()
        })
        .unwrap_or_default();
    Summary { server: addr.to_string(), method: "MEMORY REPORT", keys: n("keys-scanned"), bytes: n("bytes"), pattern_count: n("patterns-total"), patterns, histograms }
}

/// Escapes glob characters for SCAN MATCH.
fn glob_escape(s: &str) -> String {
    let mut o = String::new();
    for ch in s.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            o.push('\\');
        }
        o.push(ch);
    }
    o
}

/// The fallback: SCAN, then per batch the four questions pipelined.
fn scan(c: &mut Conn, t: &Target) -> io::Result<Summary> {
    c.ok(&[b"SELECT", t.db.to_string().as_bytes()])?;
    let pattern = t.prefix.map(|p| format!("{}*", glob_escape(p)));
    let mut agg = Aggregate::new();
    let mut cursor = b"0".to_vec();
    loop {
        let mut args: Vec<&[u8]> = vec![b"SCAN", &cursor, b"COUNT", b"1000"];
        if let Some(p) = &pattern {
            args.extend_from_slice(&[b"MATCH", p.as_bytes()]);
        }
        let reply = c.ok(&args)?;
        let next = reply.array().first().and_then(Val::bytes).unwrap_or(b"0").to_vec();
        let keys: Vec<Vec<u8>> = reply.array().get(1).map(|k| k.array().iter().filter_map(|k| k.bytes().map(<[u8]>::to_vec)).collect()).unwrap_or_default();
        for k in &keys {
            c.send(&[b"MEMORY", b"USAGE", k, b"SAMPLES", b"0"])?;
            c.send(&[b"TYPE", k])?;
            c.send(&[b"OBJECT", b"ENCODING", k])?;
            c.send(&[b"PTTL", k])?;
            // An error for any other type: only a string's is used.
            c.send(&[b"STRLEN", k])?;
        }
        c.flush()?;
        for k in &keys {
            let (usage, kind, enc, pttl, len) = (c.read()?, c.read()?, c.read()?, c.read()?, c.read()?);
            // Gone between SCAN and the questions: not counted.
            let (Some(bytes), Val::Status(kind)) = (usage.int(), kind) else { continue };
            let ttl = pttl.int().filter(|&t| t >= 0);
            let raw = len.int().filter(|_| kind == "string").map(|n| (k.len() as i64 + n) as u64);
            agg.add(KeyInfo { key: k, kind: &kind, encoding: &enc.text(), bytes: bytes as u64, ttl_ms: ttl, raw });
        }
        cursor = next;
        if cursor == b"0" {
            break;
        }
    }
    let r = agg.finish(t.limit);
    let patterns = r
        .patterns
        .iter()
        .map(|(name, p)| Pat {
            name: lossy(name),
            keys: p.keys,
            bytes: p.bytes,
            types: p.types.clone(),
            encodings: p.encodings.clone(),
            with_ttl: p.with_ttl,
            ttl_median: p.ttl_median(),
            largest: p.largest.iter().map(|(k, b)| (lossy(k), *b)).collect(),
            string_raw: p.string_raw,
            string_bytes: p.string_bytes,
        })
        .collect();
    let histograms = r.histograms.iter().map(|h| (h.kind.clone(), h.rows())).collect();
    Ok(Summary { server: t.addr.clone(), method: "SCAN + MEMORY USAGE", keys: r.keys, bytes: r.bytes, pattern_count: r.pattern_count as u64, patterns, histograms })
}

/// Bytes as people read them.
pub fn human(n: u64) -> String {
    let units = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (d, u) in units {
        if n >= d {
            return format!("{:.1} {u}", n as f64 / d as f64);
        }
    }
    format!("{n} B")
}

fn mix(list: &[(String, u64)]) -> String {
    list.iter().map(|(n, c)| format!("{n}:{c}")).collect::<Vec<_>>().join(" ")
}

/// The terminal table.
pub fn table(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} ({}): {} keys, {}, {} patterns", s.server, s.method, s.keys, human(s.bytes), s.pattern_count);
    let w = s.patterns.iter().map(|p| p.name.chars().count()).max().unwrap_or(7).clamp(7, 60);
    let _ = writeln!(o, "{:<w$}  {:>10}  {:>11}  {:>9}  {:>11}  {:>6}  {:>10}  types / encodings", "pattern", "keys", "bytes", "bytes/key", "strings/raw", "ttl%", "ttl median");
    for p in &s.patterns {
        let ttl_pct = if p.keys == 0 { 0.0 } else { 100.0 * p.with_ttl as f64 / p.keys as f64 };
        let med = p.ttl_median.map_or("-".to_string(), |m| format!("{:.1}s", m as f64 / 1000.0));
        // What the string keys cost against their raw key and value bytes.
        let stored = if p.string_raw == 0 { "-".to_string() } else { format!("{:.2}x", p.string_bytes as f64 / p.string_raw as f64) };
        let _ = writeln!(
            o,
            "{:<w$}  {:>10}  {:>11}  {:>9}  {:>11}  {:>5.1}%  {:>10}  {} / {}",
            p.name,
            p.keys,
            p.bytes,
            p.bytes.checked_div(p.keys).unwrap_or(0),
            stored,
            ttl_pct,
            med,
            mix(&p.types),
            mix(&p.encodings)
        );
        if let Some((k, b)) = p.largest.first() {
            let _ = writeln!(o, "{:<w$}  largest: {k} ({})", "", human(*b));
        }
    }
    o
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const COLORS: [&str; 2] = ["#3b7dd8", "#e07b39"];

/// A horizontal bar chart: one row per label, one bar per series.
fn bars(id: &str, title: &str, labels: &[String], series: &[(&str, Vec<f64>)], unit: &dyn Fn(f64) -> String) -> String {
    let row_h = 14 * series.len() as u32 + 8;
    let (left, width) = (320u32, 880u32);
    let plot = width - left - 110;
    let height = 40 + row_h * labels.len() as u32 + 10;
    let max = series.iter().flat_map(|s| s.1.iter().copied()).fold(0.0f64, f64::max).max(1.0);
    let mut o = String::new();
    let _ = write!(o, r#"<figure><figcaption>{}</figcaption><svg class="chart" id="{id}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{}">"#, esc(title), esc(title));
    for (si, (name, _)) in series.iter().enumerate() {
        let x = 20 + si as u32 * 420;
        let _ = write!(o, r#"<rect class="legend" x="{x}" y="8" width="12" height="12" fill="{}"/><text x="{}" y="18" font-size="12">{}</text>"#, COLORS[si % 2], x + 16, esc(name));
    }
    for (i, l) in labels.iter().enumerate() {
        let y = 36 + i as u32 * row_h;
        let _ = write!(o, r#"<text x="{}" y="{}" font-size="12" text-anchor="end" font-family="monospace">{}</text>"#, left - 6, y + row_h / 2 + 2, esc(l));
        for (si, (_, vals)) in series.iter().enumerate() {
            let v = vals.get(i).copied().unwrap_or(0.0);
            let w = (v / max * plot as f64).max(if v > 0.0 { 1.0 } else { 0.0 });
            let by = y + 4 + si as u32 * 14;
            let _ = write!(o, r#"<rect class="bar" x="{left}" y="{by}" width="{w:.1}" height="12" fill="{}"><title>{}: {}</title></rect><text x="{:.1}" y="{}" font-size="11">{}</text>"#, COLORS[si % 2], esc(l), unit(v), left as f64 + w + 4.0, by + 10, unit(v));
        }
    }
    o.push_str("</svg></figure>\n");
    o
}

/// The HTML page: bytes by pattern, bytes per key by pattern, size
/// histograms per type; with two summaries, both side by side.
pub fn html(sums: &[Summary]) -> String {
    let mut labels: Vec<String> = Vec::new();
    for s in sums {
        for p in &s.patterns {
            if !labels.contains(&p.name) {
                labels.push(p.name.clone());
            }
        }
    }
    labels.truncate(40);
    let get = |s: &Summary, l: &str, f: &dyn Fn(&Pat) -> f64| s.patterns.iter().find(|p| p.name == l).map_or(0.0, f);
    let names: Vec<String> = sums.iter().map(|s| format!("{} ({})", s.server, s.method)).collect();
    let series = |f: &dyn Fn(&Pat) -> f64| -> Vec<(&str, Vec<f64>)> { sums.iter().zip(&names).map(|(s, n)| (n.as_str(), labels.iter().map(|l| get(s, l, f)).collect())).collect() };
    let mut body = String::new();
    let _ = writeln!(body, "<h1>Memory by key pattern</h1>");
    body.push_str("<table><tr><th>server</th><th>keys</th><th>bytes</th><th>patterns</th></tr>");
    for s in sums {
        let _ = write!(body, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&format!("{} ({})", s.server, s.method)), s.keys, human(s.bytes), s.pattern_count);
    }
    body.push_str("</table>\n");
    body.push_str("<table id=\"patterns\"><tr><th>server</th><th>pattern</th><th>keys</th><th>bytes</th><th>bytes/key</th><th>with TTL</th><th>largest key</th></tr>");
    for s in sums {
        for p in &s.patterns {
            let (lk, lb) = p.largest.first().cloned().unwrap_or_default();
            let _ = write!(body, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td></tr>", esc(&s.server), esc(&p.name), p.keys, human(p.bytes), p.bytes.checked_div(p.keys).unwrap_or(0), p.with_ttl, esc(&lk), human(lb));
        }
    }
    body.push_str("</table>\n");
    body.push_str(&bars("chart-bytes", "Bytes by pattern", &labels, &series(&|p| p.bytes as f64), &|v| human(v as u64)));
    body.push_str(&bars("chart-bytes-per-key", "Bytes per key by pattern", &labels, &series(&|p| if p.keys == 0 { 0.0 } else { p.bytes as f64 / p.keys as f64 }), &|v| format!("{v:.0} B")));
    let mut kinds: Vec<String> = Vec::new();
    for s in sums {
        for (k, _) in &s.histograms {
            if !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
    }
    kinds.sort();
    for k in kinds {
        let mut buckets: Vec<(u64, u64)> = Vec::new();
        for s in sums {
            for (kk, rows) in &s.histograms {
                if *kk == k {
                    for r in rows {
                        if !buckets.contains(&(r.0, r.1)) {
                            buckets.push((r.0, r.1));
                        }
                    }
                }
            }
        }
        buckets.sort();
        let labels: Vec<String> = buckets.iter().map(|(lo, hi)| format!("{} .. {}", human(*lo), human(*hi))).collect();
        let ser: Vec<(&str, Vec<f64>)> = sums
            .iter()
            .zip(&names)
            .map(|(s, n)| {
                let rows = s.histograms.iter().find(|h| h.0 == k).map(|h| h.1.clone()).unwrap_or_default();
                (n.as_str(), buckets.iter().map(|b| rows.iter().find(|r| (r.0, r.1) == *b).map_or(0.0, |r| r.2 as f64)).collect())
            })
            .collect();
        body.push_str(&bars(&format!("chart-hist-{}", esc(&k)), &format!("Key sizes: {k} (keys per size bucket)"), &labels, &ser, &|v| format!("{v:.0}")));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>densekv memory report</title>\n<style>body{{font-family:sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;margin-bottom:16px}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right;white-space:nowrap}}td:nth-child(2),td:last-child{{text-align:left}}figure{{margin:16px 0}}figcaption{{font-weight:bold;margin-bottom:4px}}</style>\n</head><body>\n{body}</body></html>\n"
    )
}
