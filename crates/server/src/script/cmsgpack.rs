//! `cmsgpack`, the MessagePack library Redis bundles into its Lua
//! (lua-cmsgpack 0.4.0), rebuilt in Rust with the same bytes: integral
//! numbers as the smallest integer form, other numbers as float 32 when
//! that is exact and float 64 otherwise, strings as fixstr/str8/16/32,
//! tables as arrays when their keys are exactly 1..n and maps otherwise,
//! tables nested 16 deep packed as nil, anything else as nil. Unpacking
//! reads the forms packing writes (no bin/ext types, as the C library).

use mlua::{Lua, MultiValue, Table, Value};

use super::libutil::{arg_error, lib_error, lib_fn, number};

/// Tables deeper than this are packed as nil.
const MAX_NESTING: usize = 16;

/// Builds the `cmsgpack` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lib_fn(lua, |lua, args: MultiValue| {
            if args.is_empty() {
                return Err(arg_error(0, "pack", "MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                pack(v, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set("unpack", lib_fn(lua, |lua, args: MultiValue| unpack_full(lua, &args, 0, 0, "unpack"))?)?;
    t.set(
        "unpack_one",
        lib_fn(lua, |lua, args: MultiValue| {
            let offset = opt_int(&args, 1, "unpack_one")?;
            unpack_full(lua, &args, 1, offset, "unpack_one")
        })?,
    )?;
    t.set(
        "unpack_limit",
        lib_fn(lua, |lua, args: MultiValue| {
            let limit = match args.get(1).and_then(number) {
                Some(n) => n as i64,
                None => return Err(arg_error(2, "unpack_limit", "number expected, got no value")),
            };
            let offset = opt_int(&args, 2, "unpack_limit")?;
            unpack_full(lua, &args, limit, offset, "unpack_limit")
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

fn opt_int(args: &MultiValue, i: usize, name: &str) -> mlua::Result<i64> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(0),
        Some(v) => number(v).map(|n| n as i64).ok_or_else(|| arg_error(i + 1, name, "number expected")),
    }
}

fn pack_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_number(n: f64, out: &mut Vec<u8>) {
    // Integral values that an i64 holds go out as integers.
    let i64_range = -(2f64.powi(63))..2f64.powi(63);
    if n.fract() == 0.0 && i64_range.contains(&n) {
        pack_int(n as i64, out);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_len(n: usize, fix: u8, fix_max: usize, codes: [u8; 2], out: &mut Vec<u8>) {
    if n <= fix_max {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(codes[0]);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(codes[1]);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// True when the keys of `t` are exactly the integers 1..n.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0i64, 0i64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n.fract() != 0.0 || n > i32::MAX as f64 {
            return Ok(false);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(max == count)
}

fn pack(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n <= 0xff {
                out.extend_from_slice(&[0xd9, n as u8]);
            } else if n <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => pack_int(*i, out),
        Value::Number(n) => pack_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => {
            if is_array(t)? {
                let len = t.raw_len();
                pack_len(len, 0x90, 15, [0xdc, 0xdd], out);
                for i in 1..=len {
                    let item: Value = t.get(i)?;
                    pack(&item, level + 1, out)?;
                }
            } else {
                // Two walks, the pairs never held at once: every live Lua
                // value takes a slot of a stack that big maps would overflow.
                let mut len = 0;
                for pair in t.clone().pairs::<Value, Value>() {
                    pair?;
                    len += 1;
                }
                pack_len(len, 0x80, 15, [0xde, 0xdf], out);
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, item) = pair?;
                    pack(&k, level + 1, out)?;
                    pack(&item, level + 1, out)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

enum Fail {
    Eof,
    BadFormat,
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Fail> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len()).ok_or(Fail::Eof)?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> Result<u64, Fail> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }

    fn value(&mut self, lua: &Lua) -> Result<Value, Fail> {
        let c = self.take(1)?[0];
        let int = |n: i64| Value::Integer(n);
        Ok(match c {
            0xcc => int(self.be(1)? as i64),
            0xd0 => int(i64::from(self.be(1)? as u8 as i8)),
            0xcd => int(self.be(2)? as i64),
            0xd1 => int(i64::from(self.be(2)? as u16 as i16)),
            0xce => int(self.be(4)? as i64),
            0xd2 => int(i64::from(self.be(4)? as u32 as i32)),
            // uint 64 goes through a signed integer as in the C library.
            0xcf => Value::Number(self.be(8)? as i64 as f64),
            0xd3 => Value::Number(self.be(8)? as i64 as f64),
            0xc0 => Value::Nil,
            0xc3 => Value::Boolean(true),
            0xc2 => Value::Boolean(false),
            0xca => Value::Number(f64::from(f32::from_bits(self.be(4)? as u32))),
            0xcb => Value::Number(f64::from_bits(self.be(8)?)),
            0xd9..=0xdb => {
                let n = self.be(match c {
                    0xd9 => 1,
                    0xda => 2,
                    _ => 4,
                })? as usize;
                Value::String(lua.create_string(self.take(n)?)?)
            }
            0xdc | 0xdd => {
                let n = self.be(if c == 0xdc { 2 } else { 4 })? as usize;
                self.array(lua, n)?
            }
            0xde | 0xdf => {
                let n = self.be(if c == 0xde { 2 } else { 4 })? as usize;
                self.map(lua, n)?
            }
            _ if c & 0x80 == 0 => int(i64::from(c)),
            _ if c & 0xe0 == 0xe0 => int(i64::from(c as i8)),
            _ if c & 0xe0 == 0xa0 => {
                let n = usize::from(c & 0x1f);
                Value::String(lua.create_string(self.take(n)?)?)
            }
            _ if c & 0xf0 == 0x90 => self.array(lua, usize::from(c & 0xf))?,
            _ if c & 0xf0 == 0x80 => self.map(lua, usize::from(c & 0xf))?,
            _ => return Err(Fail::BadFormat),
        })
    }

    fn array(&mut self, lua: &Lua, n: usize) -> Result<Value, Fail> {
        let t = lua.create_table()?;
        for i in 1..=n {
            let v = self.value(lua)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> Result<Value, Fail> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if matches!(k, Value::Nil) {
                return Err(Fail::Lua(lib_error("table index is nil".into())));
            }
            t.raw_set(k, v)?;
        }
        Ok(Value::Table(t))
    }
}

fn unpack_full(lua: &Lua, args: &MultiValue, limit: i64, offset: i64, name: &str) -> mlua::Result<MultiValue> {
    let s = match args.front() {
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        Some(Value::Integer(i)) => i.to_string().into_bytes(),
        Some(Value::Number(n)) => super::libutil::fmt_g(*n, 14).into_bytes(),
        _ => return Err(arg_error(1, name, "string expected, got no value")),
    };
    let len = s.len() as i64;
    if offset < 0 || limit < 0 {
        return Err(lib_error(format!("Invalid request to unpack with offset of {offset} and limit of {len}.")));
    }
    if offset > len {
        return Err(lib_error(format!("Start offset {offset} greater than input length {len}.")));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor { b: &s, pos: offset as usize };
    let mut out = Vec::new();
    let mut count = 0;
    while c.pos < s.len() && count < limit {
        match c.value(lua) {
            Ok(v) => out.push(v),
            Err(Fail::Eof) => return Err(lib_error("Missing bytes in input.".into())),
            Err(Fail::BadFormat) => return Err(lib_error("Bad data format in input.".into())),
            Err(Fail::Lua(e)) => return Err(e),
        }
        count += 1;
    }
    if !decode_all {
        let next = if c.pos == s.len() { -1 } else { c.pos as i64 };
        out.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(out))
}
