//! Fuzz target for the cluster bus codec: arbitrary bytes must be framed
//! and decoded or refused, never panic; frame_len and decode must agree on
//! the prefix; whatever decodes must encode to bytes that decode to the
//! same message and encode to themselves.
//!
//! The first input byte picks the mode. Odd: the rest is laid out with
//! the sender's 2,048-byte slot bitmap left zero (the input's first 80
//! bytes are the header up to it, the bytes after them the header from
//! SLAVEOF on and then the body), zero-padded to a header's length if
//! shorter, and given a valid signature, version and totlen, so that
//! short inputs reach every field the decoder reads and the bodies (grown
//! from small inputs by mutation alone, no input reached 2,256 bytes and
//! coverage stayed at the framing checks). Even: the rest as it is.
#![no_main]

use clusterbus::{decode, encode, frame_len, offset, DecodeError, HEADER_LEN, PREFIX_LEN, PROTO_VER, SIG};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut frame = rest.to_vec();
    if mode & 1 == 1 {
        let (head, tail) = rest.split_at(rest.len().min(offset::MYSLOTS));
        frame = head.to_vec();
        frame.resize(offset::SLAVEOF, 0);
        frame.extend_from_slice(tail);
        if frame.len() < HEADER_LEN {
            frame.resize(HEADER_LEN, 0);
        }
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
