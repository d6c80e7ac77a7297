//! Keys grouped by pattern, and the memory report built from them: the
//! logic MEMORY REPORT (in the server) and `densekv memory-report` (the
//! command-line tool, against servers without that command) share, so both
//! name the same key the same way.
//!
//! A key's pattern replaces its variable parts by placeholders: a UUID
//! (8-4-4-4-12 hex digits) by `{uuid}`, an alphanumeric run made only of
//! hex digits, at least 8 long and holding both a digit and a letter, by
//! `{hexN}` (N its length), and every other run of decimal digits by `{n}`.
//! So `session:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b` is
//! `session:{hex40}` and `user:1042:cart` is `user:{n}:cart`. Any byte that
//! is not an ASCII letter or digit separates runs and is kept as is.
//!
//! [`Aggregate`] takes one key at a time (name, type, encoding, bytes,
//! TTL) and keeps per pattern: key and byte counts, the type and encoding
//! mix, how many keys have a TTL and their spread (exact minimum and
//! maximum, the median of a bounded reservoir sample), the largest keys;
//! and per type a histogram of key sizes in power-of-two buckets. Its
//! memory grows with the number of patterns, never with the number of keys.

use std::collections::HashMap;

/// Largest keys kept per pattern.
pub const TOP_KEYS: usize = 5;
/// TTLs sampled per pattern for the median.
const TTL_SAMPLES: usize = 1024;
/// Patterns tracked at most; keys of further patterns count under
/// [`OTHER`], so a keyspace of unpatterned random names stays bounded.
pub const MAX_PATTERNS: usize = 100_000;
/// Where keys of patterns past [`MAX_PATTERNS`] go.
pub const OTHER: &[u8] = b"{other}";

/// Writes the pattern of `key` into `out` (cleared first).
pub fn pattern_into(key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < key.len() {
        let b = key[i];
        if !b.is_ascii_alphanumeric() {
            out.push(b);
            i += 1;
            continue;
        }
        // A run starting at a separator boundary: a UUID, a hex id, or
        // letters and digits.
        if is_uuid_at(key, i) {
            out.extend_from_slice(b"{uuid}");
            i += 36;
            continue;
        }
        let end = key[i..].iter().position(|b| !b.is_ascii_alphanumeric()).map_or(key.len(), |p| i + p);
        let run = &key[i..end];
        if is_hex_id(run) {
            out.extend_from_slice(b"{hex");
            out.extend_from_slice(run.len().to_string().as_bytes());
            out.push(b'}');
        } else {
            let mut j = 0;
            while j < run.len() {
                if run[j].is_ascii_digit() {
                    while j < run.len() && run[j].is_ascii_digit() {
                        j += 1;
                    }
                    out.extend_from_slice(b"{n}");
                } else {
                    out.push(run[j]);
                    j += 1;
                }
            }
        }
        i = end;
    }
}

/// The pattern of `key`.
pub fn pattern(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len());
    pattern_into(key, &mut out);
    out
}

/// True if a UUID starts at `i` and is not followed by a letter or digit.
fn is_uuid_at(key: &[u8], i: usize) -> bool {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let Some(s) = key.get(i..i + 36) else { return false };
    if key.get(i + 36).is_some_and(|b| b.is_ascii_alphanumeric()) {
        return false;
    }
    let mut p = 0;
    for (g, &len) in GROUPS.iter().enumerate() {
        if !s[p..p + len].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        p += len;
        if g < 4 {
            if s[p] != b'-' {
                return false;
            }
            p += 1;
        }
    }
    true
}

/// True for a run that reads as a hex identifier rather than a word or a
/// number: only hex digits, at least 8, at least one digit and one letter.
fn is_hex_id(run: &[u8]) -> bool {
    run.len() >= 8
        && run.iter().all(u8::is_ascii_hexdigit)
        && run.iter().any(u8::is_ascii_digit)
        && run.iter().any(u8::is_ascii_alphabetic)
}

/// The power-of-two bucket of a size: bucket b holds sizes in
/// [2^b, 2^(b+1)), bucket 0 also holds 0.
pub fn bucket_of(bytes: u64) -> usize {
    if bytes <= 1 {
        0
    } else {
        63 - bytes.leading_zeros() as usize
    }
}

/// One key, as the report sees it.
#[derive(Debug, Clone, Copy)]
pub struct KeyInfo<'a> {
    pub key: &'a [u8],
    /// TYPE's name.
    pub kind: &'a str,
    /// OBJECT ENCODING's name.
    pub encoding: &'a str,
    /// MEMORY USAGE's figure.
    pub bytes: u64,
    /// Milliseconds to live, None without a TTL.
    pub ttl_ms: Option<i64>,
    /// For a string, the bytes of its key and value as clients send and
    /// read them (what `bytes` stores below its raw size, with
    /// value-compression and key-compression on); None for other types.
    pub raw: Option<u64>,
}

/// What the report keeps of one pattern.
#[derive(Debug, Clone, Default)]
pub struct PatternStats {
    pub keys: u64,
    pub bytes: u64,
    /// (type, keys), in order of first appearance.
    pub types: Vec<(String, u64)>,
    /// (encoding, keys), in order of first appearance.
    pub encodings: Vec<(String, u64)>,
    /// Keys with a TTL.
    pub with_ttl: u64,
    pub ttl_min: i64,
    pub ttl_max: i64,
    /// A uniform sample of the TTLs seen (reservoir), for the median.
    ttl_sample: Vec<i64>,
    /// The largest keys, largest first: (key, bytes).
    pub largest: Vec<(Vec<u8>, u64)>,
    /// The string keys' raw bytes (`KeyInfo::raw`) and MEMORY USAGE.
    pub string_raw: u64,
    pub string_bytes: u64,
}

impl PatternStats {
    /// Median TTL in ms of the sample (exact up to 1024 keys with a TTL).
    pub fn ttl_median(&self) -> Option<i64> {
        if self.ttl_sample.is_empty() {
            return None;
        }
        let mut s = self.ttl_sample.clone();
        s.sort_unstable();
        Some(s[s.len() / 2])
    }

    /// Bytes per key, rounded down.
    pub fn bytes_per_key(&self) -> u64 {
        self.bytes.checked_div(self.keys).unwrap_or(0)
    }
}

/// Per type: (keys, bytes) in each power-of-two size bucket.
#[derive(Debug, Clone)]
pub struct Histogram {
    pub kind: String,
    pub buckets: [(u64, u64); 64],
}

impl Histogram {
    /// The non-empty buckets: (low bound, high bound exclusive, keys, bytes).
    pub fn rows(&self) -> Vec<(u64, u64, u64, u64)> {
        (0..64)
            .filter(|&b| self.buckets[b].0 > 0)
            .map(|b| {
                let lo = if b == 0 { 0 } else { 1u64 << b };
                let hi = if b == 63 { u64::MAX } else { 1u64 << (b + 1) };
                (lo, hi, self.buckets[b].0, self.buckets[b].1)
            })
            .collect()
    }
}

/// Counts `name` in a small (name, count) list.
fn count_in(list: &mut Vec<(String, u64)>, name: &str) {
    match list.iter_mut().find(|(n, _)| n == name) {
        Some((_, c)) => *c += 1,
        None => list.push((name.to_string(), 1)),
    }
}

/// The report being built: add keys, then [`Aggregate::finish`].
#[derive(Debug, Default)]
pub struct Aggregate {
    patterns: HashMap<Vec<u8>, PatternStats>,
    histograms: Vec<Histogram>,
    pub keys: u64,
    pub bytes: u64,
    scratch: Vec<u8>,
    /// State of the reservoir sampler's random numbers.
    rng: u64,
}

impl Aggregate {
    pub fn new() -> Aggregate {
        Aggregate { rng: 0x9E37_79B9_7F4A_7C15, ..Default::default() }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64: the sample need not be cryptographic, only spread.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Counts one key.
    pub fn add(&mut self, k: KeyInfo<'_>) {
        self.keys += 1;
        self.bytes += k.bytes;
        let mut pat = std::mem::take(&mut self.scratch);
        pattern_into(k.key, &mut pat);
        if !self.patterns.contains_key(&pat) {
            if self.patterns.len() >= MAX_PATTERNS {
                pat.clear();
                pat.extend_from_slice(OTHER);
            }
            if !self.patterns.contains_key(&pat) {
                self.patterns.insert(pat.clone(), PatternStats::default());
            }
        }
        let r = self.next_random();
        let p = self.patterns.get_mut(&pat).expect("inserted above");
        self.scratch = pat;
        p.keys += 1;
        p.bytes += k.bytes;
        count_in(&mut p.types, k.kind);
        count_in(&mut p.encodings, k.encoding);
        if let Some(raw) = k.raw {
            p.string_raw += raw;
            p.string_bytes += k.bytes;
        }
        if let Some(ttl) = k.ttl_ms {
            if p.with_ttl == 0 {
                p.ttl_min = ttl;
                p.ttl_max = ttl;
            } else {
                p.ttl_min = p.ttl_min.min(ttl);
                p.ttl_max = p.ttl_max.max(ttl);
            }
            p.with_ttl += 1;
            if p.ttl_sample.len() < TTL_SAMPLES {
                p.ttl_sample.push(ttl);
            } else {
                let j = (r % p.with_ttl) as usize;
                if j < TTL_SAMPLES {
                    p.ttl_sample[j] = ttl;
                }
            }
        }
        if p.largest.len() < TOP_KEYS || p.largest.last().is_some_and(|l| l.1 < k.bytes) {
            let at = p.largest.iter().position(|l| l.1 < k.bytes).unwrap_or(p.largest.len());
            p.largest.insert(at, (k.key.to_vec(), k.bytes));
            p.largest.truncate(TOP_KEYS);
        }
        let h = match self.histograms.iter().position(|h| h.kind == k.kind) {
            Some(i) => &mut self.histograms[i],
            None => {
                self.histograms.push(Histogram { kind: k.kind.to_string(), buckets: [(0, 0); 64] });
                self.histograms.last_mut().expect("pushed")
            }
        };
        let b = &mut h.buckets[bucket_of(k.bytes)];
        b.0 += 1;
        b.1 += k.bytes;
    }

    /// Patterns counted so far.
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// The report: the `limit` patterns with the most bytes (ties by
    /// name), the histograms by type name.
    pub fn finish(self, limit: usize) -> Report {
        let pattern_count = self.patterns.len();
        let mut patterns: Vec<(Vec<u8>, PatternStats)> = self.patterns.into_iter().collect();
        patterns.sort_unstable_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
        patterns.truncate(limit);
        let mut histograms = self.histograms;
        histograms.sort_by(|a, b| a.kind.cmp(&b.kind));
        Report { keys: self.keys, bytes: self.bytes, pattern_count, patterns, histograms }
    }
}

/// A finished report.
#[derive(Debug, Clone)]
pub struct Report {
    /// Keys and bytes counted.
    pub keys: u64,
    pub bytes: u64,
    /// Patterns found, including those cut by the limit.
    pub pattern_count: usize,
    /// The patterns reported, most bytes first.
    pub patterns: Vec<(Vec<u8>, PatternStats)>,
    /// Per type, by type name.
    pub histograms: Vec<Histogram>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(k: &str) -> String {
        String::from_utf8(pattern(k.as_bytes())).unwrap()
    }

    #[test]
    fn placeholders() {
        assert_eq!(pat("user:1042:cart"), "user:{n}:cart");
        assert_eq!(pat("session:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"), "session:{hex40}");
        assert_eq!(pat("order:123e4567-e89b-12d3-a456-426614174000:items"), "order:{uuid}:items");
        assert_eq!(pat("item42:v2"), "item{n}:v{n}");
        assert_eq!(pat("deadbeef:cafebabe"), "deadbeef:cafebabe");
        assert_eq!(pat("k:ab12"), "k:ab{n}");
        assert_eq!(pat("k:12345678"), "k:{n}");
        assert_eq!(pat("a1b2c3d4"), "{hex8}");
        assert_eq!(pat(""), "");
        assert_eq!(pat("::"), "::");
        // Not a UUID when glued to more alphanumerics.
        assert_eq!(pat("123e4567-e89b-12d3-a456-426614174000x"), "{hex8}-e{n}b-{n}d{n}-a{n}-{n}x");
        assert_eq!(pattern(b"bin\xff7"), b"bin\xff{n}".to_vec());
    }

    #[test]
    fn buckets() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(2), 1);
        assert_eq!(bucket_of(3), 1);
        assert_eq!(bucket_of(64), 6);
        assert_eq!(bucket_of(127), 6);
        assert_eq!(bucket_of(u64::MAX), 63);
    }

    #[test]
    fn aggregates_per_pattern() {
        let mut a = Aggregate::new();
        for i in 0..100u64 {
            let key = format!("user:{i}");
            a.add(KeyInfo { key: key.as_bytes(), kind: "string", encoding: "embstr", bytes: 50 + i, ttl_ms: (i % 2 == 0).then_some(i as i64 * 1000), raw: Some(20) });
        }
        a.add(KeyInfo { key: b"h:1", kind: "hash", encoding: "listpack", bytes: 10_000, ttl_ms: None, raw: None });
        let r = a.finish(10);
        assert_eq!(r.keys, 101);
        assert_eq!(r.pattern_count, 2);
        assert_eq!(r.patterns[0].0, b"h:{n}");
        let (_, u) = &r.patterns[1];
        assert_eq!(u.keys, 100);
        assert_eq!(u.bytes, (50..150).sum::<u64>());
        assert_eq!(u.with_ttl, 50);
        assert_eq!((u.ttl_min, u.ttl_max), (0, 98_000));
        assert_eq!(u.ttl_median(), Some(50_000));
        assert_eq!(u.largest.iter().map(|l| l.1).collect::<Vec<_>>(), vec![149, 148, 147, 146, 145]);
        assert_eq!(u.types, vec![("string".to_string(), 100)]);
        assert_eq!((u.string_raw, u.string_bytes), (2_000, u.bytes));
        assert_eq!((r.patterns[0].1.string_raw, r.patterns[0].1.string_bytes), (0, 0), "a hash is no string");
        let strings = r.histograms.iter().find(|h| h.kind == "string").unwrap();
        assert_eq!(strings.rows().iter().map(|r| r.2).sum::<u64>(), 100);
        assert_eq!(strings.rows()[0], (32, 64, 14, (50..64).sum()));
    }

    #[test]
    fn bounded_patterns_and_limit() {
        let mut a = Aggregate::new();
        a.add(KeyInfo { key: b"a", kind: "string", encoding: "int", bytes: 1, ttl_ms: None, raw: None });
        a.add(KeyInfo { key: b"b", kind: "string", encoding: "int", bytes: 2, ttl_ms: None, raw: None });
        let r = a.finish(1);
        assert_eq!(r.pattern_count, 2);
        assert_eq!(r.patterns.len(), 1);
        assert_eq!(r.patterns[0].0, b"b");
    }
}
