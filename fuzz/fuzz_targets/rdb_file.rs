//! Fuzz target for the RDB file loader: arbitrary bytes must load or be
//! refused with an offset inside the input, never panic; whatever loads
//! must write again with `RdbWriter` and load back to the same keys.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::rdb::{dump_payload, load, min_file_version, value_version, LoadOptions, LoadedEntry, RdbVisitor, RdbWriter, WriteOptions};
use storage::ValueRef;

/// A value in a form that does not depend on how it was built: sets and
/// hashes iterate in an order that follows their insertion history, so
/// they compare as sorted elements; everything else as its DUMP payload.
fn canonical(v: ValueRef) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = match v {
        ValueRef::Set(s) => s.iter().map(|m| m.to_vec()).collect(),
        ValueRef::Hash(h) => h.iter(0).map(|(f, x)| [f, &x.to_vec()[..], format!("{:?}", h.expire_of(f, 0)).as_bytes()].join(&0u8)).collect(),
        _ => return vec![dump_payload(v, 0)],
    };
    out.sort();
    out
}

#[derive(Default)]
struct Collect {
    entries: Vec<LoadedEntry>,
    functions: Vec<Vec<u8>>,
}

impl RdbVisitor for Collect {
    fn function(&mut self, code: Vec<u8>) -> Result<(), String> {
        self.functions.push(code);
        Ok(())
    }
    fn entry(&mut self, e: LoadedEntry) -> Result<(), String> {
        self.entries.push(e);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    // Fuzzed inputs rarely carry a valid CRC-64: skip verification so the
    // fuzzer reaches the opcodes and values.
    let opts = LoadOptions { verify_checksum: false, ..LoadOptions::new(0) };
    let mut first = Collect::default();
    match load(data, &opts, &mut first) {
        Err(e) => assert!(e.offset <= data.len(), "{e}"),
        Ok(sum) => {
            assert!(sum.end <= data.len());
            let needed = first.entries.iter().map(|e| value_version(e.value.as_ref())).max().unwrap_or(0);
            let version = min_file_version(needed, !first.functions.is_empty());
            let mut w = RdbWriter::new(Vec::new(), version, WriteOptions::default()).expect("a version we write");
            w.functions(first.functions.iter().map(Vec::as_slice)).expect("functions fit the version");
            let mut db = None;
            for e in &first.entries {
                if db != Some(e.db) {
                    w.select_db(e.db, 0, 0).expect("in memory");
                    db = Some(e.db);
                }
                w.entry(&e.key, e.value.as_ref(), e.expire_ms, 0).expect("value fits the version");
            }
            let (bytes, _) = w.finish().expect("in memory");
            let mut again = Collect::default();
            load(&bytes, &LoadOptions::new(0), &mut again).expect("own file loads");
            assert_eq!(again.functions, first.functions);
            assert_eq!(again.entries.len(), first.entries.len());
            for (a, b) in again.entries.iter().zip(&first.entries) {
                assert_eq!((a.db, &a.key, a.expire_ms), (b.db, &b.key, b.expire_ms));
                assert_eq!(canonical(a.value.as_ref()), canonical(b.value.as_ref()));
            }
        }
    }
});
