//! `cjson`, the JSON library Redis bundles into its Lua (lua-cjson 2.1.0),
//! rebuilt in Rust with the same observable behaviour: the same output bytes
//! (numbers with `%.14g`, `/` escaped as `\/`, DEL as `\u007f`), the same
//! array detection (keys 1..n, "excessively sparse" past ratio 2 and safe
//! 10), the same nesting limits and error texts, and the same permissive
//! number decoding (`strtod`: hex, `inf`, `nan`, leading zeros, `+`).
//!
//! Settings (`encode_max_depth` and friends) live with the interpreter, as
//! they do in Redis, where they persist from one script to the next.
//! Errors are plain strings (the native functions' errors are turned into
//! `error(msg, 0)` by the prelude), so `pcall` sees Redis's messages.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::libutil::{arg_error, fmt_g, lib_error, lib_fn, number, strtod_prefix};

/// The settings one `cjson` table carries.
#[derive(Clone, Copy)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    decode_max_depth: i64,
    /// 0 off, 1 on, 2 "null".
    encode_invalid_numbers: u8,
    decode_invalid_numbers: bool,
    encode_keep_buffer: bool,
    precision: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
            encode_keep_buffer: true,
            precision: 14,
        }
    }
}

type Cfg = Rc<RefCell<Config>>;

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Builds a fresh `cjson` table with default settings.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Cfg = Rc::new(RefCell::new(Config::default()));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.set(
        "encode",
        lib_fn(lua, move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(arg_error(1, "encode", "expected 1 argument"));
            }
            let conf = *c.borrow();
            let mut out = Vec::new();
            encode(&conf, &args[0], 0, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode",
        lib_fn(lua, move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(arg_error(1, "decode", "expected 1 argument"));
            }
            let text = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => fmt_g(*n, 14).into_bytes(),
                v => return Err(arg_error(1, "decode", &format!("string expected, got {}", type_name(v)))),
            };
            let conf = *c.borrow();
            decode(lua, &conf, &text)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_sparse_array",
        lib_fn(lua, move |_, args: MultiValue| {
            check_count(&args, 3, "encode_sparse_array")?;
            let mut conf = c.borrow_mut();
            let convert = bool_option(&args, 0, "encode_sparse_array", &mut conf.sparse_convert)?;
            let ratio = int_option(&args, 1, "encode_sparse_array", 0, i32::MAX as i64, &mut conf.sparse_ratio)?;
            let safe = int_option(&args, 2, "encode_sparse_array", 0, i32::MAX as i64, &mut conf.sparse_safe)?;
            Ok((convert, ratio, safe))
        })?,
    )?;
    type Field = fn(&mut Config) -> &mut i64;
    let ints: [(&str, i64, Field); 3] = [
        ("encode_max_depth", 1, |c| &mut c.encode_max_depth),
        ("decode_max_depth", 1, |c| &mut c.decode_max_depth),
        ("encode_number_precision", 1, |c| &mut c.precision),
    ];
    for (name, min, field) in ints {
        let c = cfg.clone();
        let max = if name == "encode_number_precision" { 14 } else { i32::MAX as i64 };
        t.set(
            name,
            lib_fn(lua, move |_, args: MultiValue| {
                check_count(&args, 1, name)?;
                int_option(&args, 0, name, min, max, field(&mut c.borrow_mut()))
            })?,
        )?;
    }
    let c = cfg.clone();
    t.set(
        "encode_keep_buffer",
        lib_fn(lua, move |_, args: MultiValue| {
            check_count(&args, 1, "encode_keep_buffer")?;
            bool_option(&args, 0, "encode_keep_buffer", &mut c.borrow_mut().encode_keep_buffer)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode_invalid_numbers",
        lib_fn(lua, move |_, args: MultiValue| {
            check_count(&args, 1, "decode_invalid_numbers")?;
            bool_option(&args, 0, "decode_invalid_numbers", &mut c.borrow_mut().decode_invalid_numbers)
        })?,
    )?;
    let c = cfg;
    t.set(
        "encode_invalid_numbers",
        lib_fn(lua, move |lua, args: MultiValue| {
            check_count(&args, 1, "encode_invalid_numbers")?;
            let mut conf = c.borrow_mut();
            const NAMES: [&str; 3] = ["off", "on", "null"];
            match args.front() {
                None | Some(Value::Nil) => {}
                Some(Value::Boolean(b)) => conf.encode_invalid_numbers = u8::from(*b),
                Some(v) => conf.encode_invalid_numbers = check_option(v, "encode_invalid_numbers", &NAMES)? as u8,
            }
            Ok(match conf.encode_invalid_numbers {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                n => Value::String(lua.create_string(NAMES[n as usize])?),
            })
        })?,
    )?;
    let new = lib_fn(lua, |lua, ()| library(lua))?;
    t.set("new", new)?;
    t.set("null", null())?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

fn check_count(args: &MultiValue, max: usize, name: &str) -> mlua::Result<()> {
    if args.len() > max {
        return Err(arg_error(max + 1, name, "found too many arguments"));
    }
    Ok(())
}

fn int_option(args: &MultiValue, i: usize, name: &str, min: i64, max: i64, setting: &mut i64) -> mlua::Result<i64> {
    match args.get(i) {
        None | Some(Value::Nil) => {}
        Some(v) => {
            let Some(n) = number(v) else {
                return Err(arg_error(i + 1, name, &format!("number expected, got {}", type_name(v))));
            };
            let n = n as i64;
            if n < min || n > max {
                return Err(arg_error(1, name, &format!("expected integer between {min} and {max}")));
            }
            *setting = n;
        }
    }
    Ok(*setting)
}

fn check_option(v: &Value, name: &str, names: &[&str]) -> mlua::Result<usize> {
    let s = match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Integer(i) => i.to_string().into_bytes(),
        Value::Number(n) => fmt_g(*n, 14).into_bytes(),
        _ => return Err(arg_error(1, name, &format!("string expected, got {}", type_name(v)))),
    };
    names
        .iter()
        .position(|n| n.as_bytes() == s.as_slice())
        .ok_or_else(|| arg_error(1, name, &format!("invalid option '{}'", String::from_utf8_lossy(&s))))
}

fn bool_option(args: &MultiValue, i: usize, name: &str, setting: &mut bool) -> mlua::Result<bool> {
    match args.get(i) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = *b,
        Some(v) => *setting = check_option(v, name, &["off", "on"])? == 1,
    }
    Ok(*setting)
}

// ---- encoding ----

fn encode_error(v: &Value, reason: &str) -> mlua::Error {
    lib_error(format!("Cannot serialise {}: {}", type_name(v), reason))
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

fn encode_number(conf: &Config, v: &Value, n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    match conf.encode_invalid_numbers {
        0 if !n.is_finite() => return Err(encode_error(v, "must not be NaN or Inf")),
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(fmt_g(n, conf.precision as usize).as_bytes());
    Ok(())
}

/// The length of `t` as a JSON array, or None when it must be an object.
fn array_length(conf: &Config, t: &Table, v: &Value) -> mlua::Result<Option<i64>> {
    let (mut max, mut items) = (0i64, 0i64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        match number(&k) {
            Some(k) if k.floor() == k && k >= 1.0 => {
                max = max.max(k.min(i32::MAX as f64) as i64);
                items += 1;
            }
            _ => return Ok(None),
        }
    }
    if conf.sparse_ratio > 0 && max > items * conf.sparse_ratio && max > conf.sparse_safe {
        if !conf.sparse_convert {
            return Err(encode_error(v, "excessively sparse array"));
        }
        return Ok(None);
    }
    Ok(Some(max))
}

fn encode(conf: &Config, v: &Value, depth: i64, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Integer(i) => encode_number(conf, v, *i as f64, out)?,
        Value::Number(n) => encode_number(conf, v, *n, out)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > conf.encode_max_depth {
                return Err(lib_error(format!("Cannot serialise, excessive nesting ({depth})")));
            }
            match array_length(conf, t, v)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = t.raw_get(i)?;
                        encode(conf, &item, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.clone().pairs::<Value, Value>() {
                        let (k, item) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::Integer(_) | Value::Number(_) => {
                                out.push(b'"');
                                encode_number(conf, &k, number(&k).unwrap_or(0.0), out)?;
                                out.extend_from_slice(b"\":");
                            }
                            Value::String(s) => {
                                encode_string(&s.as_bytes(), out);
                                out.push(b':');
                            }
                            _ => return Err(encode_error(&k, "table key must be a number or string")),
                        }
                        encode(conf, &item, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        _ => return Err(encode_error(v, "type not supported")),
    }
    Ok(())
}

// ---- decoding ----

#[derive(Debug)]
enum Token {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    /// A token error: what was found.
    Error(&'static str),
}

impl Token {
    fn name(&self) -> &'static str {
        match self {
            Token::ObjBegin => "T_OBJ_BEGIN",
            Token::ObjEnd => "T_OBJ_END",
            Token::ArrBegin => "T_ARR_BEGIN",
            Token::ArrEnd => "T_ARR_END",
            Token::Str(_) => "T_STRING",
            Token::Num(_) => "T_NUMBER",
            Token::Bool(_) => "T_BOOLEAN",
            Token::Null => "T_NULL",
            Token::Colon => "T_COLON",
            Token::Comma => "T_COMMA",
            Token::End => "T_END",
            Token::Error(e) => e,
        }
    }
}

struct Parser<'a> {
    /// The text up to its first NUL (the C parser stops there).
    data: &'a [u8],
    pos: usize,
    depth: i64,
    conf: Config,
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    /// The next token and the index where it starts.
    fn next(&mut self) -> (Token, usize) {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let c = self.at(start);
        let single = match c {
            b'{' => Some(Token::ObjBegin),
            b'}' => Some(Token::ObjEnd),
            b'[' => Some(Token::ArrBegin),
            b']' => Some(Token::ArrEnd),
            b',' => Some(Token::Comma),
            b':' => Some(Token::Colon),
            _ => None,
        };
        if let Some(t) = single {
            self.pos += 1;
            return (t, start);
        }
        if c == 0 {
            return (Token::End, start);
        }
        let rest = &self.data[start..];
        let tok = if c == b'"' {
            self.string()
        } else if c == b'-' || c.is_ascii_digit() {
            if !self.conf.decode_invalid_numbers && self.invalid_number() {
                Token::Error("invalid number")
            } else {
                self.number()
            }
        } else if rest.starts_with(b"true") {
            self.pos += 4;
            Token::Bool(true)
        } else if rest.starts_with(b"false") {
            self.pos += 5;
            Token::Bool(false)
        } else if rest.starts_with(b"null") {
            self.pos += 4;
            Token::Null
        } else if matches!(c, b'i' | b'I' | b'n' | b'N' | b'+') && self.conf.decode_invalid_numbers && self.invalid_number() {
            self.number()
        } else {
            Token::Error("invalid token")
        };
        // A token error points at where the scan stopped.
        let at = if matches!(tok, Token::Error(_)) { self.pos } else { start };
        (tok, at)
    }

    /// Numbers strict JSON refuses but strtod takes: a leading '+', hex,
    /// leading zeros, inf and nan.
    fn invalid_number(&self) -> bool {
        let mut p = self.pos;
        match self.at(p) {
            b'+' => return true,
            b'-' => p += 1,
            _ => {}
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let word = self.data.get(p..p + 3).unwrap_or_default().to_ascii_lowercase();
        word == b"inf" || word == b"nan"
    }

    fn number(&mut self) -> Token {
        match strtod_prefix(&self.data[self.pos..]) {
            Some((v, n)) => {
                self.pos += n;
                Token::Num(v)
            }
            None => Token::Error("invalid number"),
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            v = v * 16 + char::from(self.at(at + i)).to_digit(16)?;
        }
        Some(v)
    }

    fn string(&mut self) -> Token {
        self.pos += 1;
        let mut s = Vec::new();
        loop {
            let c = self.at(self.pos);
            match c {
                b'"' => break,
                0 => return Token::Error("unexpected end of string"),
                b'\\' => {
                    let e = self.at(self.pos + 1);
                    let ch = match e {
                        b'"' | b'\\' | b'/' => e,
                        b'b' => 0x08,
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => 0x0c,
                        b'r' => b'\r',
                        b'u' => {
                            if !self.unicode_escape(&mut s) {
                                return Token::Error("invalid unicode escape code");
                            }
                            continue;
                        }
                        _ => return Token::Error("invalid escape code"),
                    };
                    s.push(ch);
                    self.pos += 2;
                }
                _ => {
                    s.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        Token::Str(s)
    }

    /// Decodes `\uXXXX` (with a following low surrogate when it is a high
    /// one) at `pos` into UTF-8; false on a malformed escape.
    fn unicode_escape(&mut self, s: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else { return false };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else { return false };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let mut buf = [0u8; 4];
        let n = match cp {
            0..=0x7F => {
                buf[0] = cp as u8;
                1
            }
            0x80..=0x7FF => {
                buf[0] = (cp >> 6) as u8 | 0xC0;
                buf[1] = (cp & 0x3F) as u8 | 0x80;
                2
            }
            0x800..=0xFFFF => {
                buf[0] = (cp >> 12) as u8 | 0xE0;
                buf[1] = ((cp >> 6) & 0x3F) as u8 | 0x80;
                buf[2] = (cp & 0x3F) as u8 | 0x80;
                3
            }
            _ => {
                buf[0] = (cp >> 18) as u8 | 0xF0;
                buf[1] = ((cp >> 12) & 0x3F) as u8 | 0x80;
                buf[2] = ((cp >> 6) & 0x3F) as u8 | 0x80;
                buf[3] = (cp & 0x3F) as u8 | 0x80;
                4
            }
        };
        s.extend_from_slice(&buf[..n]);
        self.pos += len;
        true
    }

    fn expected(&self, what: &str, tok: &Token, at: usize) -> mlua::Error {
        lib_error(format!("Expected {what} but found {} at character {}", tok.name(), at + 1))
    }

    fn descend(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.conf.decode_max_depth {
            return Err(lib_error(format!("Found too many nested data structures ({}) at character {}", self.depth, self.pos)));
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua, tok: Token, at: usize) -> mlua::Result<Value> {
        Ok(match tok {
            Token::Str(s) => Value::String(lua.create_string(&s)?),
            Token::Num(n) => Value::Number(n),
            Token::Bool(b) => Value::Boolean(b),
            Token::Null => null(),
            Token::ObjBegin => {
                self.descend()?;
                let t = lua.create_table()?;
                let (mut tok, mut at) = self.next();
                if matches!(tok, Token::ObjEnd) {
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    let Token::Str(key) = tok else { return Err(self.expected("object key string", &tok, at)) };
                    let (colon, cat) = self.next();
                    if !matches!(colon, Token::Colon) {
                        return Err(self.expected("colon", &colon, cat));
                    }
                    let (vt, vat) = self.next();
                    let v = self.value(lua, vt, vat)?;
                    t.raw_set(lua.create_string(&key)?, v)?;
                    let (sep, sat) = self.next();
                    match sep {
                        Token::ObjEnd => break,
                        Token::Comma => {}
                        _ => return Err(self.expected("comma or object end", &sep, sat)),
                    }
                    (tok, at) = self.next();
                }
                self.depth -= 1;
                Value::Table(t)
            }
            Token::ArrBegin => {
                self.descend()?;
                let t = lua.create_table()?;
                let (mut tok, mut at) = self.next();
                if matches!(tok, Token::ArrEnd) {
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                let mut i = 1i64;
                loop {
                    let v = self.value(lua, tok, at)?;
                    t.raw_set(i, v)?;
                    i += 1;
                    let (sep, sat) = self.next();
                    match sep {
                        Token::ArrEnd => break,
                        Token::Comma => {}
                        _ => return Err(self.expected("comma or array end", &sep, sat)),
                    }
                    (tok, at) = self.next();
                }
                self.depth -= 1;
                Value::Table(t)
            }
            other => return Err(self.expected("value", &other, at)),
        })
    }
}

fn decode(lua: &Lua, conf: &Config, text: &[u8]) -> mlua::Result<Value> {
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err(lib_error("JSON parser does not support UTF-16 or UTF-32".into()));
    }
    let end = text.iter().position(|&c| c == 0).unwrap_or(text.len());
    let mut p = Parser { data: &text[..end], pos: 0, depth: 0, conf: *conf };
    let (tok, at) = p.next();
    let v = p.value(lua, tok, at)?;
    let (tok, at) = p.next();
    if !matches!(tok, Token::End) {
        return Err(p.expected("the end", &tok, at));
    }
    Ok(v)
}
