//! Fuzz target for the RESP request parser: arbitrary bytes fed whole and
//! split at an arbitrary point (with consumed bytes dropped in between, as
//! the server does) must never panic and must give the same commands or the
//! same protocol error either way. Between the runs the server's reuse of
//! argument vectors is played too: each run's commands are handed back
//! (`resp::spare::recycle`), so the next run parses into buffers that
//! still hold other arguments, and must give the same result.
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
    // The tail alone: other arguments, handed back for `whole` to reuse.
    for argv in run(&[&body[cut..]]).0 {
        resp::spare::recycle(argv);
    }
    let whole = run(&[body]);
    for argv in whole.0.clone() {
        resp::spare::recycle(argv);
    }
    let split = run(&[&body[..cut], &body[cut..]]);
    // A line-length error may depend on how much had arrived; otherwise equal.
    if whole.1.as_deref().is_none_or(|e| !e.contains("too big")) && split.1.as_deref().is_none_or(|e| !e.contains("too big")) {
        assert_eq!(whole, split);
    }
    for argv in split.0 {
        resp::spare::recycle(argv);
    }
});
