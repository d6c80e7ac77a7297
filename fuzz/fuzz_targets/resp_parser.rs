//! Fuzz target for the RESP request parser: arbitrary bytes fed whole and
//! split at an arbitrary point (with consumed bytes dropped in between, as
//! the server does) must never panic and must give the same commands or the
//! same protocol error either way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resp::{Limits, Parsed, Parser};

/// Parses `chunks` in order, draining what was consumed after each chunk.
fn run(chunks: &[&[u8]]) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
    let limits = Limits { max_bulk_len: 1 << 20 };
    let mut p = Parser::new();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        let mut pos = 0;
        loop {
            match p.parse(&buf, &mut pos, &limits) {
                Ok(Parsed::Command(a)) => out.push(a),
                Ok(Parsed::Incomplete { .. }) => break,
                Err(e) => return (out, Some(e.0)),
            }
            assert!(pos <= buf.len());
        }
        buf.drain(..pos);
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let cut = data[0] as usize * data.len() / 256;
    let body = &data[1..];
    let cut = cut.min(body.len());
    let whole = run(&[body]);
    let split = run(&[&body[..cut], &body[cut..]]);
    // A line-length error may depend on how much had arrived; otherwise equal.
    if whole.1.as_deref().is_none_or(|e| !e.contains("too big")) && split.1.as_deref().is_none_or(|e| !e.contains("too big")) {
        assert_eq!(whole, split);
    }
});
