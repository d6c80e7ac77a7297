//! x87 extended precision (80-bit `long double`: sign, 15-bit exponent,
//! 64-bit mantissa), the type Redis computes INCRBYFLOAT and HINCRBYFLOAT
//! in. Rust has no such type, so the four operations those commands need
//! are done here exactly, on integers: reading a decimal (or hexadecimal)
//! string to the nearest value as `strtold` does, adding two values with
//! round-to-nearest-even, and printing with `%.17Lf`, trailing zeros cut, as
//! Redis's "human" long double format does. Clients parse the printed text,
//! so it must match Redis digit for digit (`0.1` three times is `0.3`, not
//! binary64's `0.30000000000000004`).
//!
//! A value is `m * 2^e` with `m < 2^64`. Normal values have the top bit of
//! `m` set; subnormals sit at the lowest exponent, `MIN_EXP`. Arithmetic
//! goes through a small unsigned big integer (`Big`): exact sums and
//! products first, one rounding at the end, so there is no double rounding.

use std::cmp::Ordering;

/// Exponent of the mantissa's lowest bit for the smallest normal and every
/// subnormal value (2^-16382 is the smallest normal, 63 bits above).
const MIN_EXP: i64 = -16382 - 63;
/// Exponent of the mantissa's lowest bit for the largest finite values.
const MAX_EXP: i64 = 16383 - 63;
/// Texts this long or longer are refused (Redis's long double buffer).
pub const MAX_CHARS: usize = 5 * 1024;
/// Longest digit run worth reading exactly: decimal values past 10^4940 are
/// infinite and those below 10^-4970 round to zero whatever their digits.
const DEC_LIMIT: i64 = 5000;

/// An 80-bit extended-precision value (NaN is never produced by parsing,
/// only by `inf + -inf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ext {
    /// `(-1)^neg * m * 2^e`; `m == 0` is a (signed) zero.
    Finite { neg: bool, m: u64, e: i64 },
    /// An infinity.
    Inf { neg: bool },
    /// Not a number.
    Nan,
}

impl Ext {
    /// The exact value of a 64-bit integer (every one fits a 64-bit
    /// mantissa).
    pub fn from_i64(v: i64) -> Ext {
        Ext::Finite { neg: v < 0, m: v.unsigned_abs(), e: 0 }
    }

    /// True unless infinite or NaN.
    pub fn is_finite(self) -> bool {
        matches!(self, Ext::Finite { .. })
    }

    /// Parses `s` as Redis's `string2ld` does: the whole text must be one
    /// `strtold` number (decimal or `0x` hexadecimal, optional sign, `inf`
    /// and `infinity` in any case), with no leading space; NaN, and values
    /// that overflow or underflow to zero, are refused.
    pub fn parse(s: &[u8]) -> Option<Ext> {
        if s.len() >= MAX_CHARS {
            return None;
        }
        let (neg, body) = match s.first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let lower = body.to_ascii_lowercase();
        if lower == b"inf" || lower == b"infinity" {
            return Some(Ext::Inf { neg });
        }
        let (mant, exp, binary) = if lower.starts_with(b"0x") { parse_digits(&body[2..], true)? } else { parse_digits(body, false)? };
        if mant.is_zero() {
            return Some(Ext::Finite { neg, m: 0, e: 0 });
        }
        let v = if binary { round(neg, mant, exp, false) } else { decimal_to_ext(neg, mant, exp) };
        match v {
            // Overflow (ERANGE with HUGE_VAL) and underflow to zero are
            // refused, as string2ld does.
            Ext::Inf { .. } | Ext::Finite { m: 0, .. } => None,
            _ => Some(v),
        }
    }

    /// The sum, rounded to nearest, ties to even.
    pub fn plus(self, other: Ext) -> Ext {
        match (self, other) {
            (Ext::Nan, _) | (_, Ext::Nan) => Ext::Nan,
            (Ext::Inf { neg: a }, Ext::Inf { neg: b }) => {
                if a == b {
                    Ext::Inf { neg: a }
                } else {
                    Ext::Nan
                }
            }
            (Ext::Inf { neg }, _) | (_, Ext::Inf { neg }) => Ext::Inf { neg },
            (Ext::Finite { neg: n1, m: m1, e: e1 }, Ext::Finite { neg: n2, m: m2, e: e2 }) => {
                if m1 == 0 && m2 == 0 {
                    return Ext::Finite { neg: n1 && n2, m: 0, e: 0 };
                }
                if m1 == 0 {
                    return other;
                }
                if m2 == 0 {
                    return self;
                }
                let base = e1.min(e2);
                let a = Big::from_u64(m1).shl((e1 - base) as usize);
                let b = Big::from_u64(m2).shl((e2 - base) as usize);
                if n1 == n2 {
                    return round(n1, a.add(&b), base, false);
                }
                match a.cmp(&b) {
                    Ordering::Equal => Ext::Finite { neg: false, m: 0, e: 0 },
                    Ordering::Greater => round(n1, a.sub(&b), base, false),
                    Ordering::Less => round(n2, b.sub(&a), base, false),
                }
            }
        }
    }

    /// The value with its sign flipped.
    pub fn negated(self) -> Ext {
        match self {
            Ext::Nan => Ext::Nan,
            Ext::Inf { neg } => Ext::Inf { neg: !neg },
            Ext::Finite { neg, m, e } => Ext::Finite { neg: !neg && m != 0, m, e },
        }
    }

    /// `self - other`, rounded as `plus` rounds.
    pub fn minus(self, other: Ext) -> Ext {
        self.plus(other.negated())
    }

    /// Orders two values that are not NaN (None if either is).
    pub fn compare(self, other: Ext) -> Option<Ordering> {
        match self.minus(other) {
            Ext::Nan => None,
            Ext::Finite { m: 0, .. } => Some(Ordering::Equal),
            Ext::Inf { neg } | Ext::Finite { neg, .. } => Some(if neg { Ordering::Less } else { Ordering::Greater }),
        }
    }

    /// Redis's human format: `%.17Lf` (17 digits after the point, rounded
    /// to nearest even), then trailing zeros and a bare point removed, and
    /// `-0` written `0`. Infinities print as `inf`/`-inf`, NaN as `nan`.
    pub fn to_human(self) -> String {
        let (neg, m, e) = match self {
            Ext::Nan => return "nan".into(),
            Ext::Inf { neg } => return if neg { "-inf".into() } else { "inf".into() },
            Ext::Finite { neg, m, e } => (neg, m, e),
        };
        const FRAC: usize = 17;
        let scaled = Big::from_u64(m).mul_pow10(FRAC as u32);
        let q = if e >= 0 {
            scaled.shl(e as usize)
        } else {
            let sh = (-e) as usize;
            let mut q = scaled.shr(sh);
            if scaled.bit(sh - 1) && (scaled.any_below(sh - 1) || q.bit(0)) {
                q = q.add(&Big::from_u64(1));
            }
            q
        };
        let mut digits = q.to_decimal();
        if digits.len() <= FRAC {
            digits = format!("{}{digits}", "0".repeat(FRAC + 1 - digits.len()));
        }
        let (int, frac) = digits.split_at(digits.len() - FRAC);
        let frac = frac.trim_end_matches('0');
        let mut out = String::with_capacity(digits.len() + 2);
        if neg {
            out.push('-');
        }
        out.push_str(int);
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        if out == "-0" {
            out = "0".into();
        }
        out
    }
}

/// An exponent's optional sign and decimal digits at `s[at..]`, its
/// magnitude capped at `cap`: (exponent, index past it); None without a
/// digit.
pub(crate) fn parse_exponent(s: &[u8], at: usize, cap: i64) -> Option<(i64, usize)> {
    let mut k = at;
    let neg = match s.get(k) {
        Some(b'-') => {
            k += 1;
            true
        }
        Some(b'+') => {
            k += 1;
            false
        }
        _ => false,
    };
    let first = k;
    let mut e: i64 = 0;
    while k < s.len() && s[k].is_ascii_digit() {
        e = (e * 10 + i64::from(s[k] - b'0')).min(cap);
        k += 1;
    }
    (k > first).then_some((if neg { -e } else { e }, k))
}

/// Digits (decimal, or hexadecimal after the "0x" when `hex`) with an
/// optional fraction and exponent (`e` decimal, `p` binary): (digits as an
/// integer, exponent, `hex`). None unless the whole text is read.
fn parse_digits(s: &[u8], hex: bool) -> Option<(Big, i64, bool)> {
    let (radix, per_digit, marks): (u32, i64, &[u8]) = if hex { (16, 4, b"pP") } else { (10, 1, b"eE") };
    let mut i = 0;
    let mut mant = Big::zero();
    let (mut nd, mut frac) = (0usize, 0i64);
    let mut seen_dot = false;
    while i < s.len() {
        match char::from(s[i]).to_digit(radix) {
            Some(d) => {
                nd += 1;
                if !mant.is_zero() || d != 0 {
                    mant = mant.mul_small(radix).add(&Big::from_u64(u64::from(d)));
                }
                if seen_dot {
                    frac += per_digit;
                }
            }
            None if s[i] == b'.' && !seen_dot => seen_dot = true,
            None => break,
        }
        i += 1;
    }
    if nd == 0 {
        return None;
    }
    let mut exp: i64 = 0;
    if i < s.len() && marks.contains(&s[i]) {
        (exp, i) = parse_exponent(s, i + 1, 1_000_000_000)?;
    }
    if i != s.len() {
        return None;
    }
    Some((mant, exp - frac, hex))
}

/// The nearest value to `d * 10^k` (d nonzero).
fn decimal_to_ext(neg: bool, d: Big, k: i64) -> Ext {
    let mag = d.decimal_digits_estimate() + k;
    if mag > DEC_LIMIT {
        return Ext::Inf { neg };
    }
    if mag < -DEC_LIMIT {
        return Ext::Finite { neg, m: 0, e: 0 };
    }
    if k >= 0 {
        return round(neg, d.mul_pow10(k as u32), 0, false);
    }
    let den = Big::from_u64(1).mul_pow10((-k) as u32);
    let s = (den.bits() as i64 - d.bits() as i64 + 66).max(0) as usize;
    let num = d.shl(s);
    let (q, rem) = num.div_small_quotient(&den);
    round(neg, Big::from_u128(q), -(s as i64), rem)
}

/// Rounds `(n + a sticky fraction) * 2^e` to the nearest extended value,
/// ties to even; past the largest finite value gives infinity.
fn round(neg: bool, n: Big, e: i64, sticky: bool) -> Ext {
    if n.is_zero() {
        return Ext::Finite { neg, m: 0, e: 0 };
    }
    let len = n.bits() as i64;
    let shift = (len - 64).max(MIN_EXP - e);
    let (mut m, mut exp) = if shift <= 0 {
        (n.shl((-shift) as usize).low_u64(), e + shift)
    } else {
        let sh = shift as usize;
        (n.shr(sh).low_u64(), e + shift)
    };
    if shift > 0 {
        let sh = shift as usize;
        let half = n.bit(sh - 1);
        let rest = sticky || n.any_below(sh - 1);
        if half && (rest || m & 1 == 1) {
            if m == u64::MAX {
                // The carry leaves 64 bits: 2^64 is 2^63 one exponent up.
                m = 1 << 63;
                exp += 1;
            } else {
                m += 1;
            }
        }
    }
    if m == 0 {
        return Ext::Finite { neg, m: 0, e: 0 };
    }
    if exp > MAX_EXP {
        return Ext::Inf { neg };
    }
    Ext::Finite { neg, m, e: exp }
}

/// An unsigned integer of any size: little-endian 32-bit limbs, no
/// trailing zero limbs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn zero() -> Big {
        Big(Vec::new())
    }

    fn from_u64(v: u64) -> Big {
        Big::from_u128(u128::from(v))
    }

    fn from_u128(mut v: u128) -> Big {
        let mut l = Vec::new();
        while v != 0 {
            l.push(v as u32);
            v >>= 32;
        }
        Big(l)
    }

    fn trim(mut self) -> Big {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        self
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> usize {
        match self.0.last() {
            None => 0,
            Some(&top) => self.0.len() * 32 - top.leading_zeros() as usize,
        }
    }

    fn bit(&self, i: usize) -> bool {
        self.0.get(i / 32).is_some_and(|l| l >> (i % 32) & 1 == 1)
    }

    /// True if any bit below `i` is set.
    fn any_below(&self, i: usize) -> bool {
        let (w, b) = (i / 32, i % 32);
        self.0.iter().take(w).any(|&l| l != 0) || (b > 0 && self.0.get(w).is_some_and(|&l| l & ((1u32 << b) - 1) != 0))
    }

    fn low_u64(&self) -> u64 {
        let lo = u64::from(self.0.first().copied().unwrap_or(0));
        let hi = u64::from(self.0.get(1).copied().unwrap_or(0));
        lo | hi << 32
    }

    fn mul_small(&self, k: u32) -> Big {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        let mut carry = 0u64;
        for &l in &self.0 {
            let v = u64::from(l) * u64::from(k) + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry != 0 {
            out.push(carry as u32);
        }
        Big(out).trim()
    }

    fn mul_pow10(&self, mut k: u32) -> Big {
        let mut v = self.clone();
        while k >= 9 {
            v = v.mul_small(1_000_000_000);
            k -= 9;
        }
        v.mul_small(10u32.pow(k))
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let v = u64::from(self.0.get(i).copied().unwrap_or(0)) + u64::from(o.0.get(i).copied().unwrap_or(0)) + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry != 0 {
            out.push(carry as u32);
        }
        Big(out).trim()
    }

    /// `self - o`; `o` must not be larger.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut v = i64::from(self.0[i]) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            out.push(v as u32);
        }
        debug_assert_eq!(borrow, 0);
        Big(out).trim()
    }

    fn shl(&self, n: usize) -> Big {
        if self.is_zero() {
            return Big::zero();
        }
        let (w, b) = (n / 32, n % 32);
        let mut out = vec![0u32; w];
        if b == 0 {
            out.extend_from_slice(&self.0);
        } else {
            let mut carry = 0u32;
            for &l in &self.0 {
                out.push(l << b | carry);
                carry = l >> (32 - b);
            }
            out.push(carry);
        }
        Big(out).trim()
    }

    fn shr(&self, n: usize) -> Big {
        let (w, b) = (n / 32, n % 32);
        if w >= self.0.len() {
            return Big::zero();
        }
        let src = &self.0[w..];
        let mut out = Vec::with_capacity(src.len());
        for i in 0..src.len() {
            let lo = src[i] >> b;
            let hi = if b == 0 { 0 } else { src.get(i + 1).map_or(0, |&h| h << (32 - b)) };
            out.push(lo | hi);
        }
        Big(out).trim()
    }

    /// `self / den` for a quotient known to fit 128 bits: the quotient
    /// and whether a remainder is left.
    fn div_small_quotient(&self, den: &Big) -> (u128, bool) {
        if self.cmp(den) == Ordering::Less {
            return (0, !self.is_zero());
        }
        let t = self.bits() - den.bits();
        debug_assert!(t < 127);
        let mut r = self.shr(t);
        let mut q: u128 = 0;
        for i in (0..=t).rev() {
            if i != t {
                r = r.shl(1);
                if self.bit(i) {
                    r = r.add(&Big::from_u64(1));
                }
            }
            q <<= 1;
            if r.cmp(den) != Ordering::Less {
                r = r.sub(den);
                q |= 1;
            }
        }
        (q, !r.is_zero())
    }

    /// A lower bound on the number of decimal digits (within one).
    fn decimal_digits_estimate(&self) -> i64 {
        (self.bits() as f64 * std::f64::consts::LOG10_2) as i64 + 1
    }

    fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut chunks = Vec::new();
        let mut v = self.0.clone();
        while !v.is_empty() {
            let mut rem = 0u64;
            for l in v.iter_mut().rev() {
                let cur = rem << 32 | u64::from(*l);
                *l = (cur / 1_000_000_000) as u32;
                rem = cur % 1_000_000_000;
            }
            while v.last() == Some(&0) {
                v.pop();
            }
            chunks.push(rem as u32);
        }
        let mut s = chunks.pop().map(|c| c.to_string()).unwrap_or_default();
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

impl PartialOrd for Big {
    fn partial_cmp(&self, o: &Big) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Big {
    fn cmp(&self, o: &Big) -> Ordering {
        self.0.len().cmp(&o.0.len()).then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Ext {
        Ext::parse(s.as_bytes()).unwrap_or_else(|| panic!("parse {s}"))
    }

    fn sum(parts: &[&str]) -> String {
        parts.iter().map(|s| p(s)).reduce(Ext::plus).unwrap().to_human()
    }

    #[test]
    fn redis_documented_results() {
        assert_eq!(sum(&["0", "0.1", "0.1", "0.1"]), "0.3");
        assert_eq!(sum(&["10.5", "0.1", "-5000"]), "-4989.39999999999999991");
        assert_eq!(sum(&["10.50", "0.1"]), "10.6");
        assert_eq!(sum(&["5.0e3", "2.0e2"]), "5200");
        assert_eq!(sum(&["10", "1.5"]), "11.5");
        assert_eq!(sum(&["3.0e3", "1.5"]), "3001.5");
        assert_eq!(sum(&["1", "-1"]), "0");
        assert_eq!(sum(&["-0.5", "0.5"]), "0");
    }

    #[test]
    fn parse_like_strtold() {
        for bad in ["", " 1", "1 ", "abc", "1e", "nan", "NaN", "1e5000", "-1e5000", "1e-5000", "0x", ".", "1..2", "--1", "1e+"] {
            assert!(Ext::parse(bad.as_bytes()).is_none(), "{bad:?}");
        }
        for good in ["1", "+1", "-1", "1.", ".5", "0e-9999", "1e400", "1E4000", "0x10", "0x1p-2", "inf", "-Infinity", "1e-4940"] {
            assert!(Ext::parse(good.as_bytes()).is_some(), "{good:?}");
        }
        assert_eq!(p("0x10").to_human(), "16");
        assert_eq!(p("0x1.8p1").to_human(), "3");
        assert_eq!(p("1e400").plus(p("-1e400")).to_human(), "0");
        assert!(!p("1e4932").plus(p("1e4932")).is_finite());
        assert_eq!(p("inf"), Ext::Inf { neg: false });
    }

    #[test]
    fn extended_precision_values() {
        // 0.1 in extended precision prints with 17 decimals as 0.1.
        assert_eq!(p("0.1").to_human(), "0.1");
        assert_eq!(p("1.1").to_human(), "1.1");
        // Integers up to 2^64 are exact.
        assert_eq!(Ext::from_i64(i64::MAX).plus(Ext::from_i64(1)).to_human(), "9223372036854775808");
        assert_eq!(Ext::from_i64(i64::MIN).to_human(), "-9223372036854775808");
        assert_eq!(p("12345678901234567890").to_human(), "12345678901234567890");
        // 2^64 + 1 rounds to 2^64 (ties to even).
        assert_eq!(p("18446744073709551617").to_human(), "18446744073709551616");
        assert_eq!(p("1e20").to_human(), "100000000000000000000");
        assert_eq!(p("0.00000000000000001").to_human(), "0.00000000000000001");
        assert_eq!(p("0.000000000000000001").to_human(), "0");
        assert_eq!(p("-0.000000000000000001").to_human(), "0");
    }

    #[test]
    fn rounding_carry_and_limits() {
        // Largest finite value: (2^64-1) * 2^16320.
        let max = Ext::Finite { neg: false, m: u64::MAX, e: MAX_EXP };
        assert!(max.is_finite());
        let ulp_half = Ext::Finite { neg: false, m: 1 << 63, e: MAX_EXP - 64 };
        assert!(!max.plus(ulp_half).is_finite());
        // Subnormals survive parsing; a true underflow does not.
        let tiny = Ext::Finite { neg: false, m: 1, e: MIN_EXP };
        assert_eq!(tiny.plus(tiny), Ext::Finite { neg: false, m: 2, e: MIN_EXP });
        // (2^64 - 1) + 0.5 rounds to even: 2^64.
        let a = Ext::Finite { neg: false, m: u64::MAX, e: 0 };
        let half = Ext::Finite { neg: false, m: 1, e: -1 };
        assert_eq!(a.plus(half), Ext::Finite { neg: false, m: 1 << 63, e: 1 });
    }
}
