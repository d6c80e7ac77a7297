//! Function libraries in RDB form: the payload FUNCTION DUMP writes and
//! FUNCTION RESTORE reads.
//!
//! ```text
//! ( 0xF5 <library code as an RDB string> )*  <RDB version u16 LE>  <CRC-64 u64 LE>
//! ```
//!
//! 0xF5 is RDB_OPCODE_FUNCTION2; each library is kept as the full source
//! its FUNCTION LOAD was given (shebang included), so loading one runs it
//! again. The footer is the one DUMP payloads carry (`verify_payload`).
//! Redis 7.0's release candidates wrote 0xF6 with a different body, which
//! Redis refuses with its own message, as we do.

use super::crc64::crc64;
use super::primitives::{put_str, Reader, RDB_VERSION};

/// RDB_OPCODE_FUNCTION2: one library follows.
const FUNCTION2: u8 = 245;
/// RDB_OPCODE_FUNCTION_PRE_GA: 7.0-rc's layout, not supported.
const FUNCTION_PRE_GA: u8 = 246;

/// The FUNCTION DUMP payload for libraries with these codes.
pub fn function_payload<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(FUNCTION2);
        put_str(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The library codes of a verified payload body (`verify_payload`'s
/// result), or Redis's error text (without "ERR ").
pub fn function_codes(body: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    let mut r = Reader::new(body);
    let mut codes = Vec::new();
    while r.pos < body.len() {
        match r.u8().map_err(|_| "can not read data type")? {
            FUNCTION2 => codes.push(r.string().map_err(|_| "Failed loading library payload")?),
            FUNCTION_PRE_GA => return Err("Pre-GA function format not supported"),
            _ => return Err("given type is not a function"),
        }
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::super::verify_payload;
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let libs: [&[u8]; 2] = [b"#!lua name=a\nx", &[b'y'; 100]];
        let p = function_payload(libs);
        let body = verify_payload(&p, true).expect("valid");
        assert_eq!(function_codes(body), Ok(vec![libs[0].to_vec(), libs[1].to_vec()]));
        assert_eq!(function_codes(&[]), Ok(vec![]));
        assert_eq!(function_codes(&[0]), Err("given type is not a function"));
        assert_eq!(function_codes(&[246, 1, b'x']), Err("Pre-GA function format not supported"));
        assert_eq!(function_codes(&[245, 9, b'x']), Err("Failed loading library payload"));
    }
}
