//! Fuzz target for the cluster bus codec: arbitrary bytes must be framed
//! and decoded or refused, never panic; frame_len and decode must agree on
//! the prefix; whatever decodes must encode to bytes that decode to the
//! same message and encode to themselves.
//!
//! The first input byte picks the mode: odd, the rest is given a valid
//! signature, version and totlen (when it is at least a header long), so
//! the fuzzer spends its time in the bodies; even, the rest is used as is.
#![no_main]

use clusterbus::{decode, encode, frame_len, offset, DecodeError, HEADER_LEN, PREFIX_LEN, PROTO_VER, SIG};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut frame = rest.to_vec();
    if mode & 1 == 1 && frame.len() >= HEADER_LEN {
        frame[..4].copy_from_slice(&SIG);
        let n = frame.len() as u32;
        frame[offset::TOTLEN..offset::TOTLEN + 4].copy_from_slice(&n.to_be_bytes());
        frame[offset::VER..offset::VER + 2].copy_from_slice(&PROTO_VER.to_be_bytes());
    }

    let framed = frame_len(&frame, usize::MAX);
    let decoded = decode(&frame);
    if frame.len() >= PREFIX_LEN {
        match framed {
            Err(e) => assert_eq!(decoded.as_ref().err(), Some(&e), "decode must refuse what frame_len refuses"),
            Ok(Some(n)) if n == frame.len() => {
                assert!(!matches!(decoded, Err(DecodeError::BadSignature | DecodeError::BadLength(_))))
            }
            Ok(_) => assert!(decoded.is_err(), "a frame of the wrong length must be refused"),
        }
    } else {
        assert_eq!(framed, Ok(None));
        assert!(decoded.is_err());
    }

    if let Ok(m) = decoded {
        let mut b = Vec::new();
        encode(&m, &mut b);
        assert_eq!(b.len(), m.encoded_len());
        assert_eq!(frame_len(&b[..PREFIX_LEN], usize::MAX), Ok(Some(b.len())));
        let again = decode(&b).expect("own encoding decodes");
        assert_eq!(again, m);
        let mut b2 = Vec::new();
        encode(&again, &mut b2);
        assert_eq!(b2, b);
    }
});
