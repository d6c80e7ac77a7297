//! Fuzz target for the RESP request parser: arbitrary bytes fed whole and
//! split at an arbitrary point (with consumed bytes dropped in between, as
//! the server does) must never panic and must give the same commands or the
//! same protocol error either way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resp::parse::parse_chunks;
use resp::Limits;

fn run(chunks: &[&[u8]]) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
    parse_chunks(chunks, &Limits { max_bulk_len: 1 << 20, unauthenticated: false })
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
