//! Fuzz target for nodes.conf: arbitrary bytes as the cluster config file
//! a node loads at start. Loading may refuse the text but never panic,
//! and a text it accepts is written back (`config_text`) as a file that
//! loads again and writes back the same, so what a node saves it can
//! always read after a restart.
#![no_main]

use libfuzzer_sys::fuzz_target;
use server::cluster::{Cluster, Settings};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(cluster) = Cluster::load(text, Settings::default(), 1) else { return };
    let saved = cluster.config_text();
    let again = Cluster::load(&saved, Settings::default(), 1).unwrap_or_else(|e| panic!("a saved nodes.conf does not load: {e}\n{saved}"));
    assert_eq!(again.config_text(), saved, "nodes.conf changed through a save and load");
});
