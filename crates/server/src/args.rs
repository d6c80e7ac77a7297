//! Command errors and argument parsing: the leaf every command layer shares.
//!
//! A handler that fails returns `Err(CmdError)` before writing anything;
//! dispatch renders the error to wire text in one place (`message`), with
//! Redis's wording byte for byte. The parsers here turn an argument into a
//! number or a deadline with the error Redis gives for a bad one.

/// A command failure, rendered to wire text in one place (`message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    /// WRONGTYPE.
    WrongType,
    /// ERR syntax error.
    Syntax,
    /// ERR value is not an integer or out of range.
    NotInt,
    /// ERR value is not a valid float.
    NotFloat,
    /// ERR increment or decrement would overflow.
    Overflow,
    /// ERR no such key.
    NoSuchKey,
    /// ERR DB index is out of range.
    DbIndex,
    /// ERR wrong number of arguments for '<name>' command.
    Arity(String),
    /// Any other error; the full text after '-', with its code (ERR, NOPERM, ...).
    Custom(String),
}

impl CmdError {
    /// The error line without '-' and CRLF.
    pub fn message(&self) -> String {
        match self {
            CmdError::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            CmdError::Syntax => "ERR syntax error".into(),
            CmdError::NotInt => "ERR value is not an integer or out of range".into(),
            CmdError::NotFloat => "ERR value is not a valid float".into(),
            CmdError::Overflow => "ERR increment or decrement would overflow".into(),
            CmdError::NoSuchKey => "ERR no such key".into(),
            CmdError::DbIndex => "ERR DB index is out of range".into(),
            CmdError::Arity(name) => format!("ERR wrong number of arguments for '{name}' command"),
            CmdError::Custom(s) => s.clone(),
        }
    }

    /// Redis's reply to a subcommand it does not know or that got a wrong
    /// number of arguments: the subcommand as the client spelled it (at most
    /// 128 bytes) and the container's name.
    pub fn subcommand(args: &[Vec<u8>]) -> CmdError {
        let lossy = String::from_utf8_lossy;
        CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
            lossy(&args[1][..args[1].len().min(128)]),
            lossy(&args[0]).to_ascii_uppercase()
        ))
    }

    /// An `ERR ...` error.
    pub fn err(msg: impl Into<String>) -> CmdError {
        CmdError::Custom(format!("ERR {}", msg.into()))
    }
}

/// Result of a handler.
pub type CmdResult = Result<(), CmdError>;

/// Parses an integer argument; NotInt on failure.
pub fn arg_i64(a: &[u8]) -> Result<i64, CmdError> {
    resp::num::parse_i64(a).ok_or(CmdError::NotInt)
}

/// Parses a float argument; NotFloat on failure.
pub fn arg_f64(a: &[u8]) -> Result<f64, CmdError> {
    resp::num::parse_f64(a).ok_or(CmdError::NotFloat)
}

/// An integer in `min..=i64::MAX`; `msg` (or Redis's range text) otherwise,
/// also for a non-integer when `msg` is given (Redis's getRangeLong...).
pub fn arg_range(a: &[u8], min: i64, msg: Option<&str>) -> Result<i64, CmdError> {
    let err = |m: Option<&str>| match m {
        Some(m) => CmdError::err(m),
        None => CmdError::err(format!(
            "value is out of range, value must between {min} and {}",
            i64::MAX
        )),
    };
    let v = match resp::num::parse_i64(a) {
        Some(v) => v,
        None if msg.is_some() => return Err(err(msg)),
        None => return Err(CmdError::NotInt),
    };
    if v < min {
        return Err(err(msg));
    }
    Ok(v)
}

/// A double as Redis reads a score bound or a SORT weight (fast_float over a
/// C string): only the bytes before a NUL count, and nothing before them is 0;
/// no spaces, no hexadecimal, no NaN; out-of-range values become infinite.
pub fn parse_c_double(a: &[u8]) -> Option<f64> {
    let s = a.split(|&c| c == 0).next().unwrap_or_default();
    if s.is_empty() {
        return Some(0.0);
    }
    resp::num::parse_f64(s)
}

/// Case-insensitive comparison of an argument with an ASCII word.
pub fn is(a: &[u8], word: &str) -> bool {
    a.eq_ignore_ascii_case(word.as_bytes())
}

/// Parses a blocking timeout in seconds (fractions allowed) into a Unix ms
/// deadline; 0 means none. Redis's errors and rounding (up to the next ms);
/// like Redis's long double parser it also takes hexadecimal integers.
pub fn parse_timeout_secs(a: &[u8], now: i64) -> Result<Option<i64>, CmdError> {
    let v = resp::num::parse_f64(a).or_else(|| parse_hex(a)).ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    let ms = v * 1000.0;
    if ms > i64::MAX as f64 {
        return Err(CmdError::err("timeout is out of range"));
    }
    deadline_from_ms(ms.ceil() as i64, now)
}

/// `[+-]0x<hex digits>` as a float.
fn parse_hex(a: &[u8]) -> Option<f64> {
    let (neg, rest) = match a.first()? {
        b'-' => (true, &a[1..]),
        b'+' => (false, &a[1..]),
        _ => (false, a),
    };
    let digits = rest.strip_prefix(b"0x").or_else(|| rest.strip_prefix(b"0X"))?;
    if digits.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for &d in digits {
        v = v * 16.0 + f64::from(char::from(d).to_digit(16)?);
    }
    Some(if neg { -v } else { v })
}

/// Parses a timeout in milliseconds (WAIT, WAITAOF) into a deadline.
pub fn parse_timeout_ms(a: &[u8], now: i64) -> Result<Option<i64>, CmdError> {
    let ms = resp::num::parse_i64(a).ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    deadline_from_ms(ms, now)
}

fn deadline_from_ms(ms: i64, now: i64) -> Result<Option<i64>, CmdError> {
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if ms == 0 {
        return Ok(None);
    }
    now.checked_add(ms).map(Some).ok_or_else(|| CmdError::err("timeout is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout_secs(b"0", 1000), Ok(None));
        assert_eq!(parse_timeout_secs(b"0.0001", 1000), Ok(Some(1001)));
        assert_eq!(parse_timeout_secs(b"1.5", 1000), Ok(Some(2500)));
        assert_eq!(parse_timeout_secs(b"-1", 0), Err(CmdError::err("timeout is negative")));
        assert_eq!(parse_timeout_secs(b"abc", 0), Err(CmdError::err("timeout is not a float or out of range")));
        assert_eq!(parse_timeout_secs(b"inf", 0), Err(CmdError::err("timeout is out of range")));
        assert_eq!(parse_timeout_secs(b"0x7FFFFFFFFFFFFF", 0), Err(CmdError::err("timeout is out of range")));
        assert_eq!(parse_timeout_secs(b"0x10", 0), Ok(Some(16_000)));
        assert_eq!(parse_timeout_secs(b"0x", 0), Err(CmdError::err("timeout is not a float or out of range")));
        assert_eq!(parse_timeout_secs(b"9223372036854775", 1000), Err(CmdError::err("timeout is out of range")));
        assert_eq!(parse_timeout_ms(b"1.5", 0), Err(CmdError::err("timeout is not an integer or out of range")));
        assert_eq!(parse_timeout_ms(b"100", 5), Ok(Some(105)));
    }
}
