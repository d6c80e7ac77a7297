//! Fuzz target for the decoder of compressed list nodes (types/list.rs,
//! `list-compress-depth`): arbitrary bytes read as a packed node must give
//! whole listpack entries, as many as the header says, or be refused,
//! never panic; and a list built from the input's chunks with small nodes
//! and depth 1 reads back the same elements both ways.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::encoding::listpack;
use storage::types::list::{unpack, End, List, ListConfig};

fuzz_target!(|data: &[u8]| {
    if let Some(node) = unpack(data) {
        let count = u32::from_le_bytes(node[..4].try_into().expect("header")) as usize;
        assert_eq!(listpack::validate(&node, 4), Some(count));
    }
    let cfg = ListConfig { fill: 4, compress: 1 };
    let elems: Vec<&[u8]> = data.chunks(48).collect();
    let mut l = List::new();
    for (i, e) in elems.iter().enumerate() {
        l.push(if i % 3 == 0 { End::Head } else { End::Tail }, &[e], &cfg);
    }
    let fwd: Vec<Vec<u8>> = l.iter().map(|e| e.to_vec()).collect();
    assert_eq!(fwd.len(), elems.len());
    if !fwd.is_empty() {
        let mut rev: Vec<Vec<u8>> = l.rev_from(l.len() - 1).map(|e| e.to_vec()).collect();
        rev.reverse();
        assert_eq!(rev, fwd);
    }
});
