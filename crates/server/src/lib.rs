//! The densekv server: networking, dispatch, commands, configuration.
//!
//! Arrows go one way: this crate uses `resp` (wire format) and `storage`
//! (values and keyspace); neither knows about it.

pub mod blocking;
pub mod client;
pub mod commands;
pub mod config;
pub mod cron;
pub mod exec;
pub mod glob;
pub mod lazyfree;
pub mod memory;
pub mod net;
pub mod notify;
pub mod pubsub;
pub mod script;
pub mod server;

/// The Redis version whose command set densekv matches (INFO redis_version).
pub const REDIS_VERSION: &str = "7.4.0";

