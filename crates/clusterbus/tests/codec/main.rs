//! The codec against captured frames, random messages and random bytes,
//! in one test binary (each binary links the crate again). The allocation
//! bound has a binary of its own: it replaces the global allocator.

#[path = "../common/mod.rs"]
mod common;

mod fixtures;
mod robustness;
mod roundtrip;
