//! Fuzz target for the RDB value loader behind RESTORE: arbitrary bytes
//! must load or be refused, never panic; whatever loads must dump again
//! and load back to the same value. "The same" is the same dump bytes,
//! except for a set, whose members are compared sorted: a set has no
//! member order, and one left with only integers (its other members
//! gone with their TTLs) is kept as a listpack in arrival order, while
//! the set loaded from its dump (type 2, which Redis 7.0 reads) is an
//! intset in numeric order; and a set kept as a hash table lists its
//! members in the order of its slots, which a reload may change.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::rdb::{dump_payload, restore_value, verify_payload, Shapes};
use storage::value::ValueRef;

fn sorted_members(v: ValueRef<'_>) -> Option<Vec<Vec<u8>>> {
    let ValueRef::Set(s) = v else { return None };
    let mut m: Vec<Vec<u8>> = s.iter().map(|e| e.to_vec()).collect();
    m.sort();
    Some(m)
}

fuzz_target!(|data: &[u8]| {
    let shapes = Shapes::default();
    if let Ok(v) = restore_value(data, &shapes, 0) {
        let p = dump_payload(v.as_ref(), 0);
        let body = verify_payload(&p, true).expect("own payload verifies");
        let again = restore_value(body, &shapes, 0).expect("own payload loads");
        match sorted_members(v.as_ref()) {
            Some(members) => assert_eq!(sorted_members(again.as_ref()), Some(members)),
            None => assert_eq!(dump_payload(again.as_ref(), 0), p),
        }
    }
});
