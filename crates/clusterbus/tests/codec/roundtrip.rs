//! Random messages of every type (gossip counts 0..20, random extensions,
//! PUBLISH and MODULE payloads, unknown types) survive encode -> frame_len
//! -> decode, and encoding what was decoded gives the same bytes.

use clusterbus::*;
use proptest::prelude::*;

use crate::common::{as_decoded, message};

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn encode_then_decode_gives_the_message_back(m in message()) {
        prop_assert_eq!(m.encodable(), Ok(()));
        let mut out = vec![0xaa; 3];
        encode(&m, &mut out);
        let b = &out[3..];
        prop_assert_eq!(b.len(), m.encoded_len());
        prop_assert_eq!(frame_len(&b[..PREFIX_LEN], b.len()), Ok(Some(b.len())));
        prop_assert_eq!(frame_len(&b[..PREFIX_LEN], b.len() - 1), Err(DecodeError::BadLength(b.len() as u32)));
        let d = decode(b).unwrap();
        prop_assert_eq!(&d, &as_decoded(&m));
        let mut again = Vec::new();
        encode(&d, &mut again);
        prop_assert_eq!(&again[..], b);
    }

    #[test]
    fn count_and_extensions_fields_are_what_redis_sets(m in message()) {
        let mut b = Vec::new();
        encode(&m, &mut b);
        let field = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
        let (count, exts) = match &m.body {
            Body::Ping { gossip, extensions } => (gossip.len() as u16, extensions.len() as u16),
            _ => (0, 0),
        };
        prop_assert_eq!(field(offset::COUNT), count);
        prop_assert_eq!(field(offset::EXTENSIONS), exts);
        prop_assert_eq!(&b[offset::NOTUSED..offset::PPORT], &[0u8; 30][..]);
        prop_assert_eq!(b[offset::MFLAGS] & mflags0::EXT_DATA != 0,
            exts > 0 || m.header.mflags[0] & mflags0::EXT_DATA != 0);
        prop_assert_eq!(&b[offset::MFLAGS + 1..offset::BODY], &m.header.mflags[1..]);
    }

    /// Two frames back to back, read as the event loop reads them: 8 bytes,
    /// frame_len, the rest.
    #[test]
    fn frames_in_a_stream_are_found_by_their_prefix(a in message(), b in message()) {
        let mut stream = Vec::new();
        encode(&a, &mut stream);
        encode(&b, &mut stream);
        let mut got = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            prop_assert_eq!(frame_len(&stream[at..at + 7], usize::MAX), Ok(None));
            let n = frame_len(&stream[at..at + 8], usize::MAX).unwrap().unwrap();
            got.push(decode(&stream[at..at + n]).unwrap());
            at += n;
        }
        prop_assert_eq!(got, vec![as_decoded(&a), as_decoded(&b)]);
    }
}
