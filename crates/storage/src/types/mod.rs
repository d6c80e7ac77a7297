//! Collection types with a std-like API. Each type picks and upgrades its
//! own encoding (from `crate::encoding`); callers never name one, except to
//! answer OBJECT ENCODING.

pub mod hash;
pub mod hll;
pub mod zset;
pub mod list;
pub mod set;
pub mod stream;
