//! Strict integer and float parsing and formatting with Redis's rules:
//! no spaces, no `+`, no leading zeros, no overflow.

/// Parses a signed 64-bit integer exactly as Redis's `string2ll` accepts it.
///
/// Returns None for empty input, signs without digits, leading zeros,
/// spaces, any non-digit, or overflow.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Parses a double the way Redis's `string2ld`/`strtold` checks accept it:
/// no surrounding spaces, no NaN; `inf`/`-inf` accepted.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() || s[s.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let t = std::str::from_utf8(s).ok()?;
    let lower = t.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            if lower.contains("nan") || lower.contains("inf") || lower.starts_with("0x") || lower.starts_with("-0x") {
                return None;
            }
            t.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        return None;
    }
    Some(v)
}

/// Appends the decimal form of `v` to `out`.
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// Formats a double in plain notation, no exponent: the shortest decimal
/// that round-trips, trailing zeros trimmed (the fixed-point half of
/// `format_f64_g17`). INCRBYFLOAT computes in extended precision instead
/// (the server's `ldouble`).
pub fn format_f64_human(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return "0".into();
    }
    // Rust's Display prints the shortest round-trip digits without exponent.
    let s = format!("{v}");
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.');
        t.to_string()
    } else {
        s
    }
}

/// Formats a double like Redis's RESP2 double reply (`%.17g`), used by
/// ZSCORE and friends: shortest round-trip form, exponent for large or tiny.
pub fn format_f64_g17(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v.is_nan() {
        return "nan".into();
    }
    if v == 0.0 && v.is_sign_negative() {
        return "-0".into();
    }
    let exp = if v == 0.0 { 0 } else { v.abs().log10().floor() as i32 };
    if (-5..17).contains(&exp) {
        format_f64_human(v)
    } else {
        let s = format!("{v:e}");
        // Rust gives "1e20" / "1.5e-7"; C gives "1e+20" / "1.5e-07".
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = if let Some(d) = e.strip_prefix('-') { ('-', d) } else { ('+', e) };
        let digits = if digits.len() < 2 { format!("0{digits}") } else { digits.to_string() };
        format!("{mant}e{sign}{digits}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [&b"9223372036854775808"[..], b"-0", b"01", b"+1", b" 1", b"1 ", b"", b"-", b"1a"] {
            assert_eq!(parse_i64(bad), None, "{:?}", std::str::from_utf8(bad));
        }
    }

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(format_f64_human(10.5), "10.5");
        assert_eq!(format_f64_human(3.0), "3");
        assert_eq!(format_f64_human(5.0e3), "5000");
        assert_eq!(format_f64_g17(1.5), "1.5");
        assert_eq!(format_f64_g17(1e20), "1e+20");
        assert_eq!(format_f64_g17(-0.0), "-0");
        assert_eq!(format_f64_g17(0.0), "0");
    }

    #[test]
    fn write_ints() {
        let mut v = Vec::new();
        write_i64(&mut v, i64::MIN);
        assert_eq!(v, b"-9223372036854775808");
    }
}
