//! Fuzz target for the RDB value loader behind RESTORE: arbitrary bytes
//! must load or be refused, never panic; whatever loads must dump again
//! and load back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::rdb::{dump_payload, restore_value, verify_payload, Shapes};

fuzz_target!(|data: &[u8]| {
    let shapes = Shapes::default();
    if let Ok(v) = restore_value(data, &shapes, 0) {
        let p = dump_payload(v.as_ref(), 0);
        let body = verify_payload(&p, true).expect("own payload verifies");
        let again = restore_value(body, &shapes, 0).expect("own payload loads");
        assert_eq!(dump_payload(again.as_ref(), 0), p);
    }
});
