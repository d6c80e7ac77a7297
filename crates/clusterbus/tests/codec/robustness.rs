//! Whatever the bytes, decode returns: no panic, and a message it accepts
//! is one that encodes and decodes to itself. Inputs: the captured fixtures
//! flipped bit by bit, cut at every length, and changed at random, and
//! random bytes behind a valid prefix.

use clusterbus::*;
use proptest::prelude::*;

use crate::common::{fixtures, message};

/// Decodes `b`; if it is a message, it must be stable through encode.
fn check(b: &[u8]) -> Result<Message, DecodeError> {
    let r = decode(b);
    if let Ok(m) = &r {
        let mut out = Vec::new();
        encode(m, &mut out);
        assert_eq!(decode(&out).as_ref(), Ok(m), "decode(encode(decode(b))) != decode(b)");
        assert_eq!(frame_len(&out[..8], out.len()), Ok(Some(out.len())));
    }
    r
}

#[test]
fn every_bit_flip_of_every_fixture() {
    let mut accepted = 0;
    let mut rejected = 0;
    for (_, frame) in fixtures() {
        // Any value of the slot bitmap is a message: a few of its bytes are
        // enough there.
        let bits = (0..frame.len() * 8).filter(|&bit| !(offset::MYSLOTS + 4..offset::SLAVEOF).contains(&(bit / 8)));
        for bit in bits {
            let mut b = frame.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            match check(&b) {
                Ok(_) => accepted += 1,
                Err(_) => rejected += 1,
            }
        }
    }
    // Most bits are fields any value of which is a message; the signature,
    // totlen, version, type, count and lengths are not.
    assert!(accepted > 0 && rejected > 0, "{accepted} accepted, {rejected} rejected");
}

#[test]
fn every_truncation_of_every_fixture_is_refused() {
    for &(name, ref frame) in fixtures() {
        for n in 0..frame.len() {
            let e = check(&frame[..n]).expect_err(name);
            // The frame is shorter than its totlen.
            let want = if n < 8 { "frame shorter than its 8-byte prefix" } else { "frame length is not totlen" };
            assert_eq!(e, DecodeError::Malformed(want), "{name} cut at {n}");
        }
    }
}

#[test]
fn fixtures_cut_and_relabelled_as_every_type() {
    // A captured body under another type's header, with totlen made to fit:
    // every pairing of body bytes and type must be handled.
    for (_, frame) in fixtures() {
        for ty in (0..=12u16).chain([u16::MAX]) {
            for cut in [2256, 2264, 2269, 2296, 2360, 2368, 4352, frame.len()] {
                let mut b = frame[..cut.min(frame.len())].to_vec();
                b[12..14].copy_from_slice(&ty.to_be_bytes());
                let n = b.len() as u32;
                b[4..8].copy_from_slice(&n.to_be_bytes());
                let _ = check(&b);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn fixtures_changed_at_random(
        which in 0..16usize,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        keep_totlen in any::<bool>(),
    ) {
        let mut b = fixtures()[which % fixtures().len()].1.clone();
        for (at, v) in edits {
            let i = at.index(b.len());
            b[i] = v;
        }
        if keep_totlen {
            let n = b.len() as u32;
            b[4..8].copy_from_slice(&n.to_be_bytes());
        }
        let _ = check(&b);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_behind_a_valid_prefix(
        ty in prop_oneof![0..=11u16, any::<u16>()],
        mflags in any::<u8>(),
        count in prop_oneof![0..4u16, any::<u16>()],
        exts in prop_oneof![0..4u16, any::<u16>()],
        body in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut b = vec![0u8; HEADER_LEN];
        b[..4].copy_from_slice(&SIG);
        b[8..10].copy_from_slice(&PROTO_VER.to_be_bytes());
        b[12..14].copy_from_slice(&ty.to_be_bytes());
        b[14..16].copy_from_slice(&count.to_be_bytes());
        b[2214..2216].copy_from_slice(&exts.to_be_bytes());
        b[2253] = mflags;
        b.extend_from_slice(&body);
        let n = b.len() as u32;
        b[4..8].copy_from_slice(&n.to_be_bytes());
        let _ = check(&b);
    }

    #[test]
    fn random_messages_changed_at_random(
        m in message(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut b = Vec::new();
        encode(&m, &mut b);
        for (at, v) in edits {
            let i = at.index(b.len());
            b[i] = v;
        }
        let _ = check(&b);
    }

    #[test]
    fn arbitrary_bytes(b in prop::collection::vec(any::<u8>(), 0..3000)) {
        let _ = frame_len(&b, 1 << 20);
        let _ = check(&b);
    }
}
