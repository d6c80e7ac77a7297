//! decode allocates in proportion to the bytes it is given, never to a
//! count or a length they declare: measured with a counting allocator.
//!
//! The bound is 8 times the frame's length: the worst case is a run of
//! 8-byte extensions, each of which becomes a 56-byte `Extension`; every
//! other part of a message takes less memory than wire bytes (a 104-byte
//! gossip section is an 80-byte `Gossip` and its IP).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use clusterbus::*;

mod common;
use common::fixtures;

struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// counter is a const-initialized thread-local, which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.with(|a| a.set(a.get() + layout.size()));
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.with(|a| a.set(a.get() + new_size));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes allocated while decoding `b` (frees not subtracted), and whether
/// it decoded.
fn measure(b: &[u8]) -> (usize, bool) {
    let before = ALLOCATED.with(Cell::get);
    let ok = decode(b).is_ok();
    (ALLOCATED.with(Cell::get) - before, ok)
}

fn frame(ty: u16, mflags0: u8, count: u16, extensions: u16, body: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN];
    b[..4].copy_from_slice(&SIG);
    b[offset::VER..offset::VER + 2].copy_from_slice(&PROTO_VER.to_be_bytes());
    b[offset::TYPE..offset::TYPE + 2].copy_from_slice(&ty.to_be_bytes());
    b[offset::COUNT..offset::COUNT + 2].copy_from_slice(&count.to_be_bytes());
    b[offset::EXTENSIONS..offset::EXTENSIONS + 2].copy_from_slice(&extensions.to_be_bytes());
    b[offset::MFLAGS] = mflags0;
    b.extend_from_slice(body);
    let n = b.len() as u32;
    b[4..8].copy_from_slice(&n.to_be_bytes());
    b
}

#[test]
fn decode_allocates_at_most_8_times_the_frame() {
    let mut cases: Vec<(String, Vec<u8>, bool)> =
        fixtures().iter().map(|(n, b)| (n.to_string(), b.clone(), true)).collect();

    // The worst accepted case: 65,535 extensions of 8 bytes, each an empty
    // Unknown.
    let ext8: Vec<u8> = [0, 0, 0, 8, 0x7f, 0xff, 0, 0].repeat(65535);
    cases.push(("65535 empty extensions".into(), frame(msg_type::PING, mflags0::EXT_DATA, 0, 65535, &ext8), true));
    // Counts and lengths that claim more than the frame holds.
    cases.push(("65535 extensions claimed, 1 there".into(), frame(msg_type::PING, mflags0::EXT_DATA, 0, 65535, &ext8[..8]), false));
    cases.push(("65535 gossip sections claimed".into(), frame(msg_type::PONG, 0, 65535, 0, &[0; 104]), false));
    let mut publish = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 9];
    publish.extend_from_slice(b"some text");
    cases.push(("PUBLISH channel of 4 GB claimed".into(), frame(msg_type::PUBLISH, 0, 0, 0, &publish), false));
    let mut module = vec![0; 8];
    module.extend_from_slice(&[0xff, 0xff, 0xff, 0xf0, 1]);
    cases.push(("MODULE payload of 4 GB claimed".into(), frame(msg_type::MODULE, 0, 0, 0, &module), false));
    let mut ext = vec![0xff, 0xff, 0xff, 0xf8, 0, 9, 0, 0];
    ext.extend_from_slice(&[0; 8]);
    cases.push(("extension of 4 GB claimed".into(), frame(msg_type::MEET, mflags0::EXT_DATA, 0, 1, &ext), false));
    cases.push(("unknown type with 1 MB after the header".into(), frame(999, 0, 65535, 65535, &vec![0xab; 1 << 20]), true));

    for (name, b, decodes) in cases {
        let (allocated, ok) = measure(&b);
        assert_eq!(ok, decodes, "{name}");
        assert!(allocated <= 8 * b.len(), "{name}: {allocated} bytes allocated for a frame of {}", b.len());
    }
}
