//! The command families, one file each: string, list, hash, set, zset,
//! keys, server, ... Each exports `table() -> Vec<Spec>` with its rows (see
//! `command.rs` for the row type and the handler's `Ctx`); `table` here
//! joins them. The scripting commands sit above the families (`script/`)
//! and add their rows in `registry.rs`.

pub mod acl;
pub mod bitops;
pub mod cluster;
pub mod connection;
pub mod dump;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod hotkeys;
pub mod introspection;
pub mod keys;
pub mod list;
pub mod lolwut;
pub mod members;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod subexpire;
pub mod tips;
pub mod transaction;
pub mod zset;

use crate::command::Spec;

/// Every family's rows, in no particular order (`build_table` keys them).
pub fn table() -> Vec<Spec> {
    let mut all = Vec::new();
    all.extend(acl::table());
    all.extend(bitops::table());
    all.extend(cluster::table());
    all.extend(connection::table());
    all.extend(geo::table());
    all.extend(hash::table());
    all.extend(hll::table());
    all.extend(hotkeys::table());
    all.extend(introspection::table());
    all.extend(keys::table());
    all.extend(dump::table());
    all.extend(list::table());
    all.extend(lolwut::table());
    all.extend(pubsub::table());
    all.extend(replication::table());
    all.extend(set::table());
    all.extend(sort::table());
    all.extend(stream::table());
    all.extend(server::table());
    all.extend(string::table());
    all.extend(subexpire::table());
    all.extend(transaction::table());
    all.extend(zset::table());
    all
}
