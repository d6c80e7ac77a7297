//! Values and keyspaces: the data densekv stores, with no knowledge of
//! sockets, clients or the wire protocol.
//!
//! `keyspace::Db` maps keys to values with optional deadlines; `value`
//! defines what a key holds. Command code (in the server crate) reads and
//! writes through these types only and never names an encoding.

mod blob;
pub mod encoding;
pub mod keyspace;
pub mod rdb;
mod segment;
mod slab;
pub mod types;
pub mod value;

pub use keyspace::{Db, IncrError, KeyEvent, Ttl};
pub use value::{StrRef, Value, ValueMut, ValueRef};
