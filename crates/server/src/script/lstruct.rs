//! `struct`, the binary packing library Redis bundles into its Lua
//! (Roberto Ierusalimschy's struct 0.2), rebuilt in Rust with the sizes and
//! alignment of Redis's 64-bit Linux build: `b`/`B` 1 byte, `h`/`H` 2,
//! `l`/`L` and `T` 8, `i`/`I` 4 unless given (`i3`, up to 32), `f` 4,
//! `d` 8, `cN` N bytes (`c0`: the length comes from the previous value),
//! `s` a zero-terminated string, `x` a pad byte, `<` `>` `=`... byte order
//! (native is little-endian), `!N` the maximum alignment (default 1; `!`
//! alone means 8).

use mlua::{Lua, MultiValue, Table, Value};

use super::libutil::{arg_error, fmt_g, lib_error, lib_fn, number};

const MAX_INT_SIZE: usize = 32;
/// The largest alignment `!` asks for by default (a double's on x86-64).
const MAX_ALIGN: usize = 8;

#[derive(Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header { little: true, align: 1 }
    }
}

/// Builds the `struct` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lib_fn(lua, pack)?)?;
    t.set("unpack", lib_fn(lua, unpack)?)?;
    t.set("size", lib_fn(lua, size)?)?;
    Ok(t)
}

fn get_num(fmt: &[u8], i: &mut usize, default: usize) -> mlua::Result<usize> {
    if !fmt.get(*i).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut a: usize = 0;
    while let Some(&d) = fmt.get(*i).filter(|d| d.is_ascii_digit()) {
        let d = usize::from(d - b'0');
        if a > (i32::MAX as usize) / 10 || a * 10 > i32::MAX as usize - d {
            return Err(lib_error("integral size overflow".into()));
        }
        a = a * 10 + d;
        *i += 1;
    }
    Ok(a)
}

fn opt_size(opt: u8, fmt: &[u8], i: &mut usize) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => get_num(fmt, i, 1)?,
        b'i' | b'I' => {
            let sz = get_num(fmt, i, 4)?;
            if sz > MAX_INT_SIZE {
                return Err(lib_error(format!("integral size {sz} is larger than limit of {MAX_INT_SIZE}")));
            }
            sz
        }
        _ => 0,
    })
}

fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn control(opt: u8, fmt: &[u8], i: &mut usize, h: &mut Header, fname: &str) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => h.little = false,
        b'<' => h.little = true,
        b'!' => {
            let a = get_num(fmt, i, MAX_ALIGN)?;
            if a == 0 || a & (a - 1) != 0 {
                return Err(lib_error(format!("alignment {a} is not a power of 2")));
            }
            h.align = a;
        }
        _ => return Err(arg_error(1, fname, &format!("invalid format option '{}'", char::from(opt)))),
    }
    Ok(())
}

fn fmt_arg(args: &MultiValue, fname: &str) -> mlua::Result<Vec<u8>> {
    string_arg(args, 0, fname)
}

fn string_arg(args: &MultiValue, i: usize, fname: &str) -> mlua::Result<Vec<u8>> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => Ok(n.to_string().into_bytes()),
        Some(Value::Number(n)) => Ok(fmt_g(*n, 14).into_bytes()),
        other => Err(arg_error(i + 1, fname, &format!("string expected, got {}", type_of(other)))),
    }
}

fn type_of(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::String(_)) => "string",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        _ => "userdata",
    }
}

fn num_arg(args: &MultiValue, i: usize, fname: &str) -> mlua::Result<f64> {
    args.get(i).and_then(number).ok_or_else(|| arg_error(i + 1, fname, &format!("number expected, got {}", type_of(args.get(i)))))
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    let fmt = fmt_arg(&args, "pack")?;
    let mut h = Header::default();
    let mut arg = 1;
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = opt_size(opt, &fmt, &mut i)?;
        let pad = to_align(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = num_arg(&args, arg, "pack")?;
                arg += 1;
                let mut v: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let mut bytes = vec![0u8; size];
                for k in 0..size {
                    let idx = if h.little { k } else { size - 1 - k };
                    bytes[idx] = v as u8;
                    v = v.checked_shr(8).unwrap_or(0);
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = num_arg(&args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little { f.to_le_bytes() } else { f.to_be_bytes() });
            }
            b'd' => {
                let d = num_arg(&args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.little { d.to_le_bytes() } else { d.to_be_bytes() });
            }
            b'c' | b's' => {
                let s = string_arg(&args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_error(arg + 1, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(opt, &fmt, &mut i, &mut h, "pack")?,
        }
    }
    lua.create_string(&out)
}

fn get_integer(b: &[u8], little: bool, signed: bool) -> f64 {
    let size = b.len();
    let mut l: u64 = 0;
    for k in 0..size {
        let byte = if little { b[size - 1 - k] } else { b[k] };
        l = (l << 8) | u64::from(byte);
    }
    if !signed {
        return l as f64;
    }
    if size < 8 {
        let mask = u64::MAX << (size * 8 - 1);
        if l & mask != 0 {
            l |= mask;
        }
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let fmt = fmt_arg(&args, "unpack")?;
    let data = string_arg(&args, 1, "unpack")?;
    let ld = data.len();
    let mut pos = match args.get(2) {
        None | Some(Value::Nil) => 1i64,
        Some(_) => num_arg(&args, 2, "unpack")? as i64,
    };
    if pos <= 0 {
        return Err(arg_error(3, "unpack", "offset must be 1 or greater"));
    }
    pos -= 1;
    let mut pos = pos as usize;
    let mut h = Header::default();
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    let short = || arg_error(2, "unpack", "data string too short");
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = opt_size(opt, &fmt, &mut i)?;
        pos += to_align(pos, &h, opt, size);
        if size > ld || pos > ld - size {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                out.push(Value::Number(get_integer(&data[pos..pos + size], h.little, opt.is_ascii_lowercase())));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().map_err(|_| short())?;
                let f = if h.little { f32::from_le_bytes(b) } else { f32::from_be_bytes(b) };
                out.push(Value::Number(f64::from(f)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().map_err(|_| short())?;
                out.push(Value::Number(if h.little { f64::from_le_bytes(b) } else { f64::from_be_bytes(b) }));
            }
            b'c' => {
                if size == 0 {
                    let prev = out.last().and_then(number);
                    let Some(n) = prev else { return Err(lib_error("format 'c0' needs a previous size".into())) };
                    out.pop();
                    size = n as usize;
                    if size > ld || pos > ld - size {
                        return Err(short());
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(lib_error("unfinished string in data".into()));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + e])?));
                size = e + 1;
            }
            _ => control(opt, &fmt, &mut i, &mut h, "unpack")?,
        }
        pos += size;
    }
    out.push(Value::Integer(pos as i64 + 1));
    Ok(MultiValue::from_iter(out))
}

fn size(_: &Lua, args: MultiValue) -> mlua::Result<i64> {
    let fmt = fmt_arg(&args, "size")?;
    let mut h = Header::default();
    let mut pos = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = opt_size(opt, &fmt, &mut i)?;
        pos += to_align(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(1, "size", "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_error(1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            control(opt, &fmt, &mut i, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(pos as i64)
}
