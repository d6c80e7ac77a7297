//! Glob matching with Redis's rules, for KEYS, SCAN MATCH, CONFIG GET and
//! friends: `*`, `?`, `[abc]`, `[^a-z]`, and `\` escapes.
//!
//! The matcher backtracks only to the most recent `*`, so its cost is
//! O(pattern x string) even for patterns like `*a*a*a*a*b` that make naive
//! recursive matchers exponential.

/// Redis's matcher recurses once per `*` group and gives up (no match) past
/// this depth; we match its answers, so a pattern with more `*` groups
/// followed by something else matches nothing.
const MAX_STAR_NESTING: usize = 1000;

/// True if `s` matches `pat`; `nocase` folds ASCII case.
pub fn matches(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    // Each such group needs at least two pattern bytes, so short patterns skip the count.
    if pat.len() > 2 * MAX_STAR_NESTING && inner_star_groups(pat) > MAX_STAR_NESTING {
        return false;
    }
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    while p < pat.len() && pat[p] == b'*' {
                        p += 1;
                    }
                    if p == pat.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(pat, p, s[i], nocase) {
                        if hit {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pat.len() => {
                    if eq(pat[p + 1], s[i]) {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, s[i]) {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

/// Number of runs of `*` followed by more pattern (escapes and classes skipped).
fn inner_star_groups(pat: &[u8]) -> usize {
    let (mut p, mut n) = (0, 0);
    while p < pat.len() {
        match pat[p] {
            b'*' => {
                while p < pat.len() && pat[p] == b'*' {
                    p += 1;
                }
                if p < pat.len() {
                    n += 1;
                }
            }
            b'\\' => p += 2,
            b'[' => p = class(pat, p, 0, false).map_or(pat.len(), |(_, next)| next),
            _ => p += 1,
        }
    }
    n
}

/// Matches `c` against the class starting at `pat[p] == '['`; returns
/// (matched, index after the class). An unterminated class runs to the end
/// of the pattern, as in Redis.
fn class(pat: &[u8], mut p: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    p += 1;
    let not = p < pat.len() && pat[p] == b'^';
    if not {
        p += 1;
    }
    let fold = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    let c = fold(c);
    let mut hit = false;
    loop {
        if p >= pat.len() {
            // Redis treats a missing ']' as the end of the class.
            break;
        }
        if pat[p] == b']' {
            p += 1;
            break;
        }
        if pat[p] == b'\\' && p + 1 < pat.len() {
            p += 1;
            if fold(pat[p]) == c {
                hit = true;
            }
            p += 1;
        } else if p + 2 < pat.len() && pat[p + 1] == b'-' {
            let (mut lo, mut hi) = (fold(pat[p]), fold(pat[p + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            if c >= lo && c <= hi {
                hit = true;
            }
            p += 3;
        } else {
            if fold(pat[p]) == c {
                hit = true;
            }
            p += 1;
        }
    }
    Some((hit != not, p))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn basics() {
        assert!(matches(b"*", b"anything", false));
        assert!(matches(b"h?llo", b"hello", false));
        assert!(matches(b"h[ae]llo", b"hallo", false));
        assert!(!matches(b"h[^e]llo", b"hello", false));
        assert!(matches(b"h[a-b]llo", b"hbllo", false));
        assert!(matches(b"h\\*llo", b"h*llo", false));
        assert!(!matches(b"foo*", b"fo", false));
        assert!(matches(b"*o*", b"foo", false));
        assert!(matches(b"MAXMEM*", b"maxmemory", true));
        assert!(!matches(b"a*b", b"aaac", false));
    }

    #[test]
    fn pathological_is_fast() {
        let s = vec![b'a'; 10_000];
        let p = b"*a*a*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!matches(p, &s, false));
    }

    #[test]
    fn redis_nesting_limit() {
        let s = vec![b'a'; 5000];
        assert!(!matches(&b"*?".repeat(1001), &s, false));
        assert!(matches(&b"*?".repeat(1000), &s, false));
        assert!(matches(&[b"*?".repeat(1000), b"*".to_vec()].concat(), &s, false));
        assert!(matches(&b"\\*".repeat(1001), &b"*".repeat(1001), false));
    }
}
