//! Values and keyspaces: the data densekv stores, with no knowledge of
//! sockets, clients or the wire protocol.
//!
//! `keyspace::Db` maps keys to values with optional deadlines; `value`
//! defines what a key holds. Command code (in the server crate) reads and
//! writes through these types only and never names an encoding.
//!
//! The modules form a one-way stack; a file imports only from its own layer
//! or below, never above, so no two files depend on each other. Bottom up:
//!
//! 1. leaf helpers: `strref` (strings and integer rules), `slab`, `segment`,
//!    `access` (a key's LRU clock or LFU counter), `eviction` (ranks, pool),
//!    `slot` (Redis Cluster's hash slot of a key)
//! 2. `encoding`: compact byte layouts
//! 3. `types`: the collections, each over its encodings
//! 4. `value`: what a key holds (`Value` owns the collections)
//! 5. `blob`: one key's bytes in the slab
//! 6. `keyspace`: `Db`
//! 7. `rdb`: dump and restore

pub mod access;
mod blob;
pub mod encoding;
pub mod eviction;
pub mod keyspace;
pub mod rdb;
mod segment;
mod slab;
pub mod slot;
pub mod strref;
pub mod types;
pub mod value;

pub use access::Access;
pub use eviction::{EvictionPool, Rank};
pub use keyspace::{Db, IncrError, KeyEvent, MemberExpiry, SnapshotSink, Ttl};
pub use strref::StrRef;
pub use value::{Value, ValueMut, ValueRef};
