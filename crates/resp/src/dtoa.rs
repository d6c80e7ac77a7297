//! Doubles as Redis prints them in replies (its `d2string`): an integral
//! value within +-2^62 as an integer, any other finite value by Grisu2 (the
//! digits Florian Loitsch's algorithm produces, which are not always the
//! shortest: 5e22 prints as 49999999999999996000000) laid out in plain or
//! scientific notation by Redis's rules for its `fpconv` library.

/// 10^k for k = -348, -340, ..., 340 as a 64-bit significand (rounded to
/// nearest, top bit set) and a binary exponent: 10^k ~ f * 2^e.
const POW10: [(u64, i32); 87] = [
    (0xfa8fd5a0081c0288, -1220),
    (0xbaaee17fa23ebf76, -1193),
    (0x8b16fb203055ac76, -1166),
    (0xcf42894a5dce35ea, -1140),
    (0x9a6bb0aa55653b2d, -1113),
    (0xe61acf033d1a45df, -1087),
    (0xab70fe17c79ac6ca, -1060),
    (0xff77b1fcbebcdc4f, -1034),
    (0xbe5691ef416bd60c, -1007),
    (0x8dd01fad907ffc3c, -980),
    (0xd3515c2831559a83, -954),
    (0x9d71ac8fada6c9b5, -927),
    (0xea9c227723ee8bcb, -901),
    (0xaecc49914078536d, -874),
    (0x823c12795db6ce57, -847),
    (0xc21094364dfb5637, -821),
    (0x9096ea6f3848984f, -794),
    (0xd77485cb25823ac7, -768),
    (0xa086cfcd97bf97f4, -741),
    (0xef340a98172aace5, -715),
    (0xb23867fb2a35b28e, -688),
    (0x84c8d4dfd2c63f3b, -661),
    (0xc5dd44271ad3cdba, -635),
    (0x936b9fcebb25c996, -608),
    (0xdbac6c247d62a584, -582),
    (0xa3ab66580d5fdaf6, -555),
    (0xf3e2f893dec3f126, -529),
    (0xb5b5ada8aaff80b8, -502),
    (0x87625f056c7c4a8b, -475),
    (0xc9bcff6034c13053, -449),
    (0x964e858c91ba2655, -422),
    (0xdff9772470297ebd, -396),
    (0xa6dfbd9fb8e5b88f, -369),
    (0xf8a95fcf88747d94, -343),
    (0xb94470938fa89bcf, -316),
    (0x8a08f0f8bf0f156b, -289),
    (0xcdb02555653131b6, -263),
    (0x993fe2c6d07b7fac, -236),
    (0xe45c10c42a2b3b06, -210),
    (0xaa242499697392d3, -183),
    (0xfd87b5f28300ca0e, -157),
    (0xbce5086492111aeb, -130),
    (0x8cbccc096f5088cc, -103),
    (0xd1b71758e219652c, -77),
    (0x9c40000000000000, -50),
    (0xe8d4a51000000000, -24),
    (0xad78ebc5ac620000, 3),
    (0x813f3978f8940984, 30),
    (0xc097ce7bc90715b3, 56),
    (0x8f7e32ce7bea5c70, 83),
    (0xd5d238a4abe98068, 109),
    (0x9f4f2726179a2245, 136),
    (0xed63a231d4c4fb27, 162),
    (0xb0de65388cc8ada8, 189),
    (0x83c7088e1aab65db, 216),
    (0xc45d1df942711d9a, 242),
    (0x924d692ca61be758, 269),
    (0xda01ee641a708dea, 295),
    (0xa26da3999aef774a, 322),
    (0xf209787bb47d6b85, 348),
    (0xb454e4a179dd1877, 375),
    (0x865b86925b9bc5c2, 402),
    (0xc83553c5c8965d3d, 428),
    (0x952ab45cfa97a0b3, 455),
    (0xde469fbd99a05fe3, 481),
    (0xa59bc234db398c25, 508),
    (0xf6c69a72a3989f5c, 534),
    (0xb7dcbf5354e9bece, 561),
    (0x88fcf317f22241e2, 588),
    (0xcc20ce9bd35c78a5, 614),
    (0x98165af37b2153df, 641),
    (0xe2a0b5dc971f303a, 667),
    (0xa8d9d1535ce3b396, 694),
    (0xfb9b7cd9a4a7443c, 720),
    (0xbb764c4ca7a44410, 747),
    (0x8bab8eefb6409c1a, 774),
    (0xd01fef10a657842c, 800),
    (0x9b10a4e5e9913129, 827),
    (0xe7109bfba19c0c9d, 853),
    (0xac2820d9623bf429, 880),
    (0x80444b5e7aa7cf85, 907),
    (0xbf21e44003acdd2d, 933),
    (0x8e679c2f5e44ff8f, 960),
    (0xd433179d9c8cb841, 986),
    (0x9e19db92b4e31ba9, 1013),
    (0xeb96bf6ebadf77d9, 1039),
    (0xaf87023b9bf0ee6b, 1066),
];
const FIRST_POW10: i32 = -348;
const POW10_STEP: i32 = 8;
/// The scaled upper boundary's binary exponent must land in this window.
const ALPHA: i32 = -60;
const GAMMA: i32 = -32;

const HIDDEN: u64 = 1 << 52;
const FRAC_MASK: u64 = HIDDEN - 1;

/// A do-it-yourself float: frac * 2^exp.
#[derive(Clone, Copy)]
struct Fp {
    frac: u64,
    exp: i32,
}

impl Fp {
    fn of(v: f64) -> Fp {
        let bits = v.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & FRAC_MASK;
        if biased == 0 {
            Fp { frac, exp: -1074 }
        } else {
            Fp { frac: frac | HIDDEN, exp: biased - 1075 }
        }
    }

    /// Shifted left until bit 63 is set.
    fn normalized(self) -> Fp {
        let shift = self.frac.leading_zeros() as i32;
        Fp { frac: self.frac << shift, exp: self.exp - shift }
    }

    /// The product's top 64 bits, rounded half up on the bits below.
    fn times(self, o: Fp) -> Fp {
        let p = u128::from(self.frac) * u128::from(o.frac) + (1u128 << 63);
        Fp { frac: (p >> 64) as u64, exp: self.exp + o.exp + 64 }
    }
}

/// The cached power of ten that brings binary exponent `exp` into
/// [ALPHA, GAMMA], and its decimal exponent.
fn cached_pow10(exp: i32) -> (Fp, i32) {
    const LOG10_2: f64 = 0.30102999566398114;
    let approx = (-f64::from(exp + 87) * LOG10_2) as i32;
    let mut i = (approx - FIRST_POW10) / POW10_STEP;
    loop {
        let (frac, e) = POW10[i as usize];
        let scaled = exp + e + 64;
        if scaled < ALPHA {
            i += 1;
        } else if scaled > GAMMA {
            i -= 1;
        } else {
            return (Fp { frac, exp: e }, FIRST_POW10 + i * POW10_STEP);
        }
    }
}

/// Moves the last digit down while that brings it closer to the value
/// (Grisu's "weed" step, in the variant Redis's library uses).
fn round_last(digits: &mut [u8], delta: u64, mut rest: u64, ten_kappa: u64, dist: u64) {
    let last = digits.len() - 1;
    while rest < dist
        && delta - rest >= ten_kappa
        && (rest + ten_kappa < dist || dist - rest > rest + ten_kappa - dist)
    {
        digits[last] -= 1;
        rest += ten_kappa;
    }
}

/// Grisu2: the decimal digits of finite, positive `v` and the power of ten
/// of the last one (v ~ digits * 10^k).
fn grisu2(v: f64) -> (Vec<u8>, i32) {
    let w = Fp::of(v);
    // The boundaries halfway to the neighbouring doubles; the lower one is
    // nearer when the significand is a power of two (the exponent steps).
    let upper = Fp { frac: (w.frac << 1) + 1, exp: w.exp - 1 }.normalized();
    let lshift = if w.frac == HIDDEN { 2 } else { 1 };
    let lower = Fp { frac: ((w.frac << lshift) - 1) << (w.exp - lshift - upper.exp), exp: upper.exp };
    let (cached, k) = cached_pow10(upper.exp);
    let w = w.normalized().times(cached);
    let mut upper = upper.times(cached);
    let mut lower = lower.times(cached);
    lower.frac += 1;
    upper.frac -= 1;
    let mut k = -k;

    let dist = upper.frac - w.frac;
    let mut delta = upper.frac - lower.frac;
    let shift = -upper.exp;
    let one = 1u64 << shift;
    let mut whole = upper.frac >> shift;
    let mut fraction = upper.frac & (one - 1);
    let mut digits = Vec::with_capacity(18);
    // Integral part, from 10^9 down.
    let mut div = 1_000_000_000u64;
    for kappa in (0..10).rev() {
        let d = whole / div;
        if d != 0 || !digits.is_empty() {
            digits.push(b'0' + d as u8);
        }
        whole -= d * div;
        let rest = (whole << shift) + fraction;
        if rest <= delta {
            k += kappa;
            round_last(&mut digits, delta, rest, div << shift, dist);
            return (digits, k);
        }
        div /= 10;
    }
    // Fractional part, one digit at a time.
    let mut unit = 10u64;
    let mut kappa = 0;
    loop {
        fraction *= 10;
        delta *= 10;
        kappa -= 1;
        let d = fraction >> shift;
        if d != 0 || !digits.is_empty() {
            digits.push(b'0' + d as u8);
        }
        fraction &= one - 1;
        if fraction < delta {
            k += kappa;
            round_last(&mut digits, delta, fraction, one, dist.wrapping_mul(unit));
            return (digits, k);
        }
        unit = unit.wrapping_mul(10);
    }
}

/// Lays out `digits` * 10^k as Redis's library does: plain integers while
/// the trailing zeros stay few, plain decimals for small negative k, and
/// otherwise d.ddde[+-]x with an exponent of as few digits as it takes.
fn layout(out: &mut String, digits: &[u8], k: i32, neg: bool) {
    let n = digits.len() as i32;
    let exp = (k + n - 1).abs();
    let text = |d: &[u8]| std::str::from_utf8(d).expect("ascii digits").to_string();
    if k >= 0 && exp < n + 7 {
        out.push_str(&text(digits));
        out.extend(std::iter::repeat_n('0', k as usize));
        return;
    }
    if k < 0 && (k > -7 || exp < 4) {
        let point = n + k;
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&text(digits));
        } else {
            out.push_str(&text(&digits[..point as usize]));
            out.push('.');
            out.push_str(&text(&digits[point as usize..]));
        }
        return;
    }
    // At most 17 digits (16 after a minus sign) in scientific form.
    let n = n.min(if neg { 17 } else { 18 });
    out.push(char::from(digits[0]));
    if n > 1 {
        out.push('.');
        out.push_str(&text(&digits[1..n as usize]));
    }
    out.push('e');
    out.push(if k + n - 1 < 0 { '-' } else { '+' });
    out.push_str(&exp.to_string());
}

/// NaN, the infinities and the zeros, as both of Redis's forms print them.
fn special(v: f64) -> Option<&'static str> {
    if v.is_nan() {
        Some("nan")
    } else if v.is_infinite() {
        Some(if v > 0.0 { "inf" } else { "-inf" })
    } else if v == 0.0 {
        Some(if v.is_sign_negative() { "-0" } else { "0" })
    } else {
        None
    }
}

/// `v` as Redis's double replies print it (RESP2 bulk and RESP3 `,`).
pub fn format_f64_reply(v: f64) -> String {
    if let Some(t) = special(v) {
        return t.into();
    }
    // Integral values within +-(2^62 - 1) print as integers.
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if (-LIMIT..=LIMIT).contains(&v) && v.fract() == 0.0 {
        return (v as i64).to_string();
    }
    let mut out = String::with_capacity(24);
    if v.is_sign_negative() {
        out.push('-');
    }
    let (digits, k) = grisu2(v.abs());
    layout(&mut out, &digits, k, v < 0.0);
    out
}

/// `v` as C's `printf("%.17g")` prints it: 17 significant digits with the
/// trailing zeros dropped, in exponent form (two exponent digits at least)
/// below 1e-4 or from 1e17 on. Redis's ZSCAN gives a skiplist's scores so.
pub fn format_f64_printf17(v: f64) -> String {
    if let Some(t) = special(v) {
        return t.into();
    }
    let sci = format!("{v:.16e}");
    let (mant, exp) = sci.split_once('e').expect("an exponent");
    let exp: i32 = exp.parse().expect("a decimal exponent");
    let trim = |t: &str| t.trim_end_matches('0').trim_end_matches('.').to_string();
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim(mant), exp.abs());
    }
    trim(&format!("{v:.*}", (16 - exp) as usize))
}

#[cfg(test)]
mod tests {
    use super::format_f64_reply as f;

    #[test]
    fn printf17() {
        use super::format_f64_printf17 as g;
        assert_eq!(g(0.1), "0.10000000000000001");
        assert_eq!(g(2.5), "2.5");
        assert_eq!(g(3.0), "3");
        assert_eq!(g(1e15), "1000000000000000");
        assert_eq!(g(1e17), "1e+17");
        assert_eq!(g(1e-5), "1.0000000000000001e-05");
        assert_eq!(g(-1.5e-300), "-1.5000000000000001e-300");
        assert_eq!(g(5e22), "4.9999999999999996e+22");
        assert_eq!(g(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(-0.0), "-0");
    }

    #[test]
    fn integers_and_specials() {
        assert_eq!(f(0.0), "0");
        assert_eq!(f(-0.0), "-0");
        assert_eq!(f(1.0), "1");
        assert_eq!(f(-3.0), "-3");
        assert_eq!(f(f64::INFINITY), "inf");
        assert_eq!(f(f64::NEG_INFINITY), "-inf");
        assert_eq!(f(123456789012345678.0), "123456789012345680");
        assert_eq!(f(1e17), "100000000000000000");
        assert_eq!(f(-246913578024691360.0), "-246913578024691360");
    }

    #[test]
    fn grisu_digits_and_layout() {
        // Replies of Redis at the reference snapshot.
        assert_eq!(f(0.1), "0.1");
        assert_eq!(f(1.5), "1.5");
        assert_eq!(f(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(f(6.500000000000001e-5), "6.500000000000001e-5");
        assert_eq!(f(3.0000000000000004e-5), "3.0000000000000004e-5");
        assert_eq!(f(1e-5), "0.00001");
        assert_eq!(f(1.5e21), "1.5e+21");
        assert_eq!(f(5e22), "49999999999999996000000");
        assert_eq!(f(1.2345678901234568e38), "1.2345678901234568e+38");
        assert_eq!(f(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(f(-1.5e-300), "-1.5e-300");
        assert_eq!(f(5e-324), "5e-324");
    }
}
