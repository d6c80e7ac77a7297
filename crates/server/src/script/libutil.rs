//! What the bundled Lua libraries (`cjson`, `cmsgpack`, `struct`) share:
//! how their functions raise errors, C's `%.*g` number format and
//! `strtod`'s number syntax, so that each library prints and reads numbers
//! and fails as the C ones do.

use mlua::{FromLuaMulti, IntoLuaMulti, Lua, Value};

/// An error a library function raised, as `luaL_error` words it: the
/// message, after the calling line (`user_script:1: `) when the caller is
/// Lua code. Scripts see it as that plain string (`unwrap` in `lua`), as
/// they would see a C library's error.
#[derive(Debug)]
pub struct LibError(pub String);

impl std::fmt::Display for LibError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LibError {}

/// An error a library function returns; `lib_fn` places and raises it.
pub fn lib_error(msg: String) -> mlua::Error {
    mlua::Error::RuntimeError(msg)
}

/// A library function: `f`, whose errors are raised as `LibError`s placed
/// at the caller's line as `luaL_error` places them (nowhere when the
/// caller is C, such as `pcall`).
pub fn lib_fn<A, R, F>(lua: &Lua, f: F) -> mlua::Result<mlua::Function>
where
    A: FromLuaMulti,
    R: IntoLuaMulti,
    F: Fn(&Lua, A) -> mlua::Result<R> + 'static,
{
    lua.create_function(move |lua, args: A| {
        f(lua, args).map_err(|e| {
            // Level 0 is this function, 1 its caller.
            let at = lua
                .inspect_stack(1)
                .filter(|d| d.curr_line() > 0)
                .map(|d| format!("{}:{}: ", d.source().short_src.unwrap_or_default(), d.curr_line()))
                .unwrap_or_default();
            let mut msg = root_message(&e);
            // luaL_argerror names the function as its caller called it.
            if let Some(name) = lua.inspect_stack(0).and_then(|d| d.names().name.map(|n| n.into_owned())) {
                if msg.starts_with("bad argument #") {
                    msg = msg.replacen(" to '?' ", &format!(" to '{name}' "), 1);
                }
            }
            mlua::Error::external(LibError(format!("{at}{msg}")))
        })
    })
}

/// `luaL_argerror`'s text: `bad argument #N to '?' (MSG)`; `lib_fn` puts
/// in the name the caller used, when Lua knows one (not under `pcall`).
pub fn arg_error(n: usize, _name: &str, msg: &str) -> mlua::Error {
    lib_error(format!("bad argument #{n} to '?' ({msg})"))
}

/// The message of a library error, however mlua wrapped it.
pub fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(s) => s.clone(),
        mlua::Error::WithContext { cause, .. } => root_message(cause),
        other => other.to_string(),
    }
}

/// A Lua number (or a string Lua would coerce to one), as `lua_tonumber`.
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => {
            let b = s.as_bytes();
            let t = std::str::from_utf8(&b).ok()?.trim();
            let (v, n) = strtod_prefix(t.as_bytes())?;
            (n == t.len()).then_some(v)
        }
        _ => None,
    }
}

/// C's `printf("%.*g", prec, v)`.
pub fn fmt_g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let p = prec.max(1);
    let e_form = format!("{:.*e}", p - 1, v);
    let (mant, exp) = e_form.split_once('e').unwrap_or((&e_form, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if x < -4 || x >= p as i32 {
        let mant = trim_fraction(mant);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", x.unsigned_abs())
    } else {
        let fixed = format!("{:.*}", (p as i32 - 1 - x).max(0) as usize, v);
        trim_fraction(&fixed).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The longest prefix of `s` that C's `strtod` reads (after optional
/// leading white space): its value and length; None when none is a number.
/// Takes decimal and hexadecimal forms, `inf`, `infinity` and `nan`.
pub fn strtod_prefix(s: &[u8]) -> Option<(f64, usize)> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let start = i;
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    let rest = &s[i..];
    let lower: Vec<u8> = rest.iter().take(8).map(|c| c.to_ascii_lowercase()).collect();
    if lower.starts_with(b"infinity") {
        return Some((sign(f64::INFINITY), i + 8));
    }
    if lower.starts_with(b"inf") {
        return Some((sign(f64::INFINITY), i + 3));
    }
    if lower.starts_with(b"nan") {
        let mut n = i + 3;
        if s.get(n) == Some(&b'(') {
            if let Some(close) = s[n..].iter().position(|&c| c == b')') {
                if s[n + 1..n + close].iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') {
                    n += close + 1;
                }
            }
        }
        return Some((sign(f64::NAN), n));
    }
    if lower.starts_with(b"0x") {
        if let Some((v, n)) = hex_prefix(&rest[2..]) {
            return Some((sign(v), i + 2 + n));
        }
        // "0x" alone reads as the number 0, ending before the 'x'.
        return Some((sign(0.0), i + 1));
    }
    let mut j = i;
    let digits = |j: &mut usize| {
        let b = *j;
        while *j < s.len() && s[*j].is_ascii_digit() {
            *j += 1;
        }
        *j - b
    };
    let mut nd = digits(&mut j);
    if s.get(j) == Some(&b'.') {
        j += 1;
        nd += digits(&mut j);
        if nd == 0 {
            return None;
        }
    }
    if nd == 0 {
        return None;
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if digits(&mut k) > 0 {
            j = k;
        }
    }
    let text = std::str::from_utf8(&s[start..j]).ok()?;
    let text = text.strip_prefix('+').unwrap_or(text);
    Some((text.parse::<f64>().ok()?, j))
}

/// Hexadecimal digits with an optional fraction and binary exponent
/// (`1.8p3`), after the "0x": value and length read.
fn hex_prefix(s: &[u8]) -> Option<(f64, usize)> {
    let (mut mant, mut exp, mut any, mut j) = (0u64, 0i64, false, 0);
    let mut sticky = false;
    let mut seen_dot = false;
    while j < s.len() {
        let c = s[j];
        if c == b'.' && !seen_dot {
            seen_dot = true;
            j += 1;
            continue;
        }
        let Some(d) = char::from(c).to_digit(16) else { break };
        any = true;
        if mant >> 56 == 0 {
            mant = mant * 16 + u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_dot {
                exp += 4;
            }
        }
        j += 1;
    }
    if !any {
        return None;
    }
    if matches!(s.get(j), Some(b'p' | b'P')) {
        let mut k = j + 1;
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
        let b = k;
        let mut e: i64 = 0;
        while k < s.len() && s[k].is_ascii_digit() {
            e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 20);
            k += 1;
        }
        if k > b {
            exp += if neg { -e } else { e };
            j = k;
        }
    }
    let m = (mant | u64::from(sticky)) as f64;
    Some((m * 2f64.powi(exp.clamp(-2000, 2000) as i32), j))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format_matches_c() {
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(100.0, 14), "100");
        assert_eq!(fmt_g(1e14, 14), "1e+14");
        assert_eq!(fmt_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(0.00001, 14), "1e-05");
        assert_eq!(fmt_g(-5000.0, 14), "-5000");
        assert_eq!(fmt_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(fmt_g(f64::INFINITY, 14), "inf");
        assert_eq!(fmt_g(0.0, 14), "0");
        assert_eq!(fmt_g(-0.0, 14), "-0");
    }

    #[test]
    fn strtod_reads_c_forms() {
        assert_eq!(strtod_prefix(b"12abc"), Some((12.0, 2)));
        assert_eq!(strtod_prefix(b"-5e3,"), Some((-5000.0, 4)));
        assert_eq!(strtod_prefix(b"0.3e-3]"), Some((0.0003, 6)));
        assert_eq!(strtod_prefix(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod_prefix(b"0x10"), Some((16.0, 4)));
        assert_eq!(strtod_prefix(b"0x1.8p1"), Some((3.0, 7)));
        assert_eq!(strtod_prefix(b"Infinity"), Some((f64::INFINITY, 8)));
        assert_eq!(strtod_prefix(b"-inf"), Some((f64::NEG_INFINITY, 4)));
        assert!(strtod_prefix(b"nan").unwrap().0.is_nan());
        assert_eq!(strtod_prefix(b"-"), None);
        assert_eq!(strtod_prefix(b"."), None);
        assert_eq!(strtod_prefix(b"+1"), Some((1.0, 2)));
    }
}
