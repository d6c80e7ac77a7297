//! Ping extensions: the typed, variable-length records a PING, PONG or MEET
//! carries after its gossip sections when `mflags[0]` has `EXT_DATA`.
//!
//! The header's `extensions` field counts them. Each is:
//!
//! ```text
//! offset  size          field
//! ------  ------------  ------------------------------------------------
//!      0             4  length: of the whole extension, these 8 bytes
//!                       included; a multiple of 8
//!      4             2  type (ext_type)
//!      6             2  unused, zero
//!      8  length - 8    payload, zero-padded to the length
//! ```
//!
//! Payloads, as Redis 7.x writes them:
//!
//! ```text
//! HOSTNAME (0), HUMAN_NODENAME (1)  the text, a NUL, zeros up to a multiple
//!                                   of 8: payload = (len + 1) rounded up to 8.
//!                                   The NUL is always there: a 7-byte name
//!                                   fills 8 bytes, an 8-byte one takes 16.
//!                                   Sent only when the text is not empty.
//! FORGOTTEN_NODE (2)                name[40], ttl u64 (seconds)  payload 48
//! SHARDID (3)                       shard_id[40]                 payload 40
//! ```
//!
//! Redis 7.0 sends only HOSTNAME; 7.2 added the other three and sends
//! SHARDID in every PING, PONG and MEET to a node that sent it extensions.
//!
//! Checking lengths: Redis checks that each length is a multiple of 8 and
//! no more than what totlen leaves, then that the lengths add up to totlen.
//! It reads the length into 16 bits, and it lets a length of 0 through (the
//! next extension then starts at the same place). This codec is stricter:
//! lengths are read whole, and one below 8 is refused. Redis's own writer
//! never produces either. A payload is then read by its type: a text must
//! hold its NUL (Redis would read past it otherwise), a FORGOTTEN_NODE or
//! SHARDID payload must hold its fields (bytes after them are ignored, as
//! Redis ignores them), and any other type is kept whole as
//! `Extension::Unknown`.

use crate::wire::{text_before_nul, Reader};
use crate::{ext_type, DecodeError, Extension, EXT_HEADER_LEN, NAME_LEN};

/// Payload bytes of FORGOTTEN_NODE: the name and the ttl.
const FORGOTTEN_NODE_LEN: usize = NAME_LEN + 8;
/// Payload bytes of SHARDID.
const SHARDID_LEN: usize = NAME_LEN;

/// Checks that `n` extensions fill `b` exactly, each length within what is
/// left, and returns nothing read: [`read_all`] then reads them knowing the
/// count is backed by bytes.
pub(crate) fn check_lengths(b: &[u8], n: u16) -> Result<(), DecodeError> {
    let mut r = Reader::new(b);
    for _ in 0..n {
        let len = r.u32("ping extension header past totlen")?;
        r.bytes(4, "ping extension header past totlen")?;
        if len % 8 != 0 {
            return Err(DecodeError::Malformed("ping extension length not a multiple of 8"));
        }
        if (len as usize) < EXT_HEADER_LEN {
            return Err(DecodeError::Malformed("ping extension shorter than its header"));
        }
        r.bytes(len as usize - EXT_HEADER_LEN, "ping extension past totlen")?;
    }
    if r.remaining() != 0 {
        return Err(DecodeError::Malformed("bytes after the last ping extension"));
    }
    Ok(())
}

/// Reads the `n` extensions that fill `b` (checked by [`check_lengths`]).
pub(crate) fn read_all(b: &[u8], n: u16) -> Result<Vec<Extension>, DecodeError> {
    check_lengths(b, n)?;
    let mut r = Reader::new(b);
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = r.u32("ping extension header past totlen")? as usize;
        let ty = r.u16("ping extension header past totlen")?;
        r.u16("ping extension header past totlen")?;
        let payload = r.bytes(len - EXT_HEADER_LEN, "ping extension past totlen")?;
        out.push(read_payload(ty, payload)?);
    }
    Ok(out)
}

fn read_payload(ty: u16, p: &[u8]) -> Result<Extension, DecodeError> {
    let text = |what| {
        if p.contains(&0) {
            Ok(text_before_nul(p, p.len()).to_vec())
        } else {
            Err(DecodeError::Malformed(what))
        }
    };
    Ok(match ty {
        ext_type::HOSTNAME => Extension::Hostname(text("hostname extension without its NUL")?),
        ext_type::HUMAN_NODENAME => Extension::HumanNodename(text("human nodename extension without its NUL")?),
        ext_type::FORGOTTEN_NODE => {
            let mut r = Reader::new(p);
            let what = "forgotten node extension shorter than a name and a ttl";
            Extension::ForgottenNode { name: r.array(what)?, ttl: r.u64(what)? }
        }
        ext_type::SHARDID => Extension::ShardId(Reader::new(p).array("shard id extension shorter than an id")?),
        _ => Extension::Unknown { ext_type: ty, data: p.to_vec() },
    })
}

/// Bytes of a text payload: the text, its NUL, zeros up to a multiple of 8.
fn text_payload_len(text: &[u8]) -> usize {
    (text.len() + 1).next_multiple_of(8)
}

impl Extension {
    /// The extension's type on the wire (`ext_type`).
    pub fn ext_type(&self) -> u16 {
        match self {
            Extension::Hostname(_) => ext_type::HOSTNAME,
            Extension::HumanNodename(_) => ext_type::HUMAN_NODENAME,
            Extension::ForgottenNode { .. } => ext_type::FORGOTTEN_NODE,
            Extension::ShardId(_) => ext_type::SHARDID,
            Extension::Unknown { ext_type, .. } => *ext_type,
        }
    }

    /// Bytes it takes on the wire, its 8-byte header included (its
    /// `length` field).
    pub fn encoded_len(&self) -> usize {
        EXT_HEADER_LEN
            + match self {
                Extension::Hostname(t) | Extension::HumanNodename(t) => text_payload_len(t),
                Extension::ForgottenNode { .. } => FORGOTTEN_NODE_LEN,
                Extension::ShardId(_) => SHARDID_LEN,
                Extension::Unknown { data, .. } => data.len(),
            }
    }

    /// Why encoding this extension would not give it back, if it would not.
    pub(crate) fn encodable(&self) -> Result<(), &'static str> {
        match self {
            Extension::Hostname(t) | Extension::HumanNodename(t) if t.contains(&0) => {
                Err("a hostname or human nodename extension holds a NUL")
            }
            Extension::Unknown { ext_type: ty, .. } if *ty <= ext_type::SHARDID => {
                Err("an Unknown extension has the type of a known one")
            }
            Extension::Unknown { data, .. } if data.len() % 8 != 0 => {
                Err("an Unknown extension's data is not a multiple of 8 bytes")
            }
            _ if self.encoded_len() > u32::MAX as usize => Err("an extension longer than a u32 can say"),
            _ => Ok(()),
        }
    }
}

/// Appends one extension (checked by `encodable`) to `out`.
pub(crate) fn write(e: &Extension, out: &mut Vec<u8>) {
    let start = out.len();
    let len = e.encoded_len();
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&e.ext_type().to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    match e {
        Extension::Hostname(t) | Extension::HumanNodename(t) => out.extend_from_slice(t),
        Extension::ForgottenNode { name, ttl } => {
            out.extend_from_slice(name);
            out.extend_from_slice(&ttl.to_be_bytes());
        }
        Extension::ShardId(id) => out.extend_from_slice(id),
        Extension::Unknown { data, .. } => out.extend_from_slice(data),
    }
    // The NUL and the padding of a text.
    out.resize(start + len, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(e: &Extension) -> Vec<u8> {
        let mut out = Vec::new();
        write(e, &mut out);
        assert_eq!(out.len(), e.encoded_len());
        out
    }

    fn decode_one(b: &[u8]) -> Result<Extension, DecodeError> {
        read_all(b, 1).map(|mut v| v.pop().unwrap())
    }

    #[test]
    fn text_is_nul_terminated_and_padded_to_8() {
        // As Redis 7.0 and 7.2 write them: payload = (len + 1) rounded up to 8.
        for (text, payload) in [(&b""[..], 8), (b"d", 8), (b"a.node7", 8), (b"node-b.x", 16), (b"node-b.example.org", 24)] {
            let e = Extension::Hostname(text.to_vec());
            let b = bytes(&e);
            assert_eq!(b.len(), 8 + payload, "{text:?}");
            assert_eq!(&b[0..4], &(8 + payload as u32).to_be_bytes());
            assert_eq!(&b[4..8], &[0, 0, 0, 0]);
            assert_eq!(&b[8..8 + text.len()], text);
            assert!(b[8 + text.len()..].iter().all(|&c| c == 0), "NUL and zero padding");
            assert_eq!(decode_one(&b), Ok(e));
        }
        let b = bytes(&Extension::HumanNodename(b"primary-1".to_vec()));
        assert_eq!(&b[..8], &[0, 0, 0, 24, 0, 1, 0, 0]);
    }

    #[test]
    fn fixed_payloads_at_their_offsets() {
        let name = *b"0123456789abcdef0123456789abcdef01234567";
        let b = bytes(&Extension::ForgottenNode { name, ttl: 0x0102_0304_0506_0708 });
        assert_eq!(&b[..8], &[0, 0, 0, 56, 0, 2, 0, 0]);
        assert_eq!(&b[8..48], &name);
        assert_eq!(&b[48..56], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let b = bytes(&Extension::ShardId(name));
        assert_eq!(&b[..8], &[0, 0, 0, 48, 0, 3, 0, 0]);
        assert_eq!(&b[8..48], &name);
        let b = bytes(&Extension::Unknown { ext_type: 0xabcd, data: vec![7; 16] });
        assert_eq!(&b[..8], &[0, 0, 0, 24, 0xab, 0xcd, 0, 0]);
        assert_eq!(&b[8..], &[7; 16]);
    }

    #[test]
    fn every_kind_reads_back() {
        let name = *b"fedcba9876543210fedcba9876543210fedcba98";
        let all = vec![
            Extension::Hostname(b"h".to_vec()),
            Extension::HumanNodename(b"human".to_vec()),
            Extension::ForgottenNode { name, ttl: 60 },
            Extension::ShardId(name),
            Extension::Unknown { ext_type: 4, data: vec![] },
            Extension::Unknown { ext_type: 65535, data: vec![1; 8] },
        ];
        let mut b = Vec::new();
        for e in &all {
            write(e, &mut b);
        }
        assert_eq!(read_all(&b, all.len() as u16), Ok(all));
    }

    #[test]
    fn lengths_are_checked() {
        let m = |s| Err(DecodeError::Malformed(s));
        let ok = bytes(&Extension::ShardId([b'1'; 40]));
        assert_eq!(check_lengths(&ok, 1), Ok(()));
        assert_eq!(check_lengths(&[], 0), Ok(()));
        // Fewer bytes than the count says.
        assert_eq!(check_lengths(&ok, 2), m("ping extension header past totlen"));
        assert_eq!(check_lengths(&ok[..4], 1), m("ping extension header past totlen"));
        assert_eq!(check_lengths(&ok[..47], 1), m("ping extension past totlen"));
        // More bytes than the count says.
        assert_eq!(check_lengths(&ok, 0), m("bytes after the last ping extension"));
        // A length not a multiple of 8, or below the header (Redis lets 0 by).
        let mut bad = ok.clone();
        bad[3] = 47;
        assert_eq!(check_lengths(&bad, 1), m("ping extension length not a multiple of 8"));
        bad[3] = 0;
        assert_eq!(check_lengths(&bad, 1), m("ping extension shorter than its header"));
        // A length past what is there, also one Redis would read as 16 bits.
        bad[..4].copy_from_slice(&(65536u32 + 48).to_be_bytes());
        assert_eq!(check_lengths(&bad, 1), m("ping extension past totlen"));
        bad[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(check_lengths(&bad, 1), m("ping extension length not a multiple of 8"));
        bad[..4].copy_from_slice(&(u32::MAX - 7).to_be_bytes());
        assert_eq!(check_lengths(&bad, 1), m("ping extension past totlen"));
    }

    #[test]
    fn payloads_are_checked() {
        let m = |s| Err(DecodeError::Malformed(s));
        // A text with no NUL in its payload.
        let b = [0, 0, 0, 16, 0, 0, 0, 0, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h'];
        assert_eq!(decode_one(&b), m("hostname extension without its NUL"));
        let mut h = b;
        h[5] = 1;
        assert_eq!(decode_one(&h), m("human nodename extension without its NUL"));
        assert_eq!(decode_one(&[0, 0, 0, 8, 0, 0, 0, 0]), m("hostname extension without its NUL"));
        // Fixed payloads too short.
        let mut f = bytes(&Extension::ShardId([b'1'; 40]));
        f[5] = ext_type::FORGOTTEN_NODE as u8;
        assert_eq!(decode_one(&f), m("forgotten node extension shorter than a name and a ttl"));
        let s = [0, 0, 0, 40, 0, 3, 0, 0].iter().chain(&[b'1'; 32]).copied().collect::<Vec<_>>();
        assert_eq!(decode_one(&s), m("shard id extension shorter than an id"));
    }

    #[test]
    fn what_redis_ignores_is_ignored() {
        // Bytes after a text's NUL, the unused field, bytes after fixed fields.
        let mut b = bytes(&Extension::Hostname(b"abc".to_vec()));
        b[6] = 0xff;
        b[8 + 5] = b'z';
        assert_eq!(decode_one(&b), Ok(Extension::Hostname(b"abc".to_vec())));
        let mut b = bytes(&Extension::ShardId([b'2'; 40]));
        b[3] = 56;
        b.extend_from_slice(&[9; 8]);
        assert_eq!(decode_one(&b), Ok(Extension::ShardId([b'2'; 40])));
    }

    #[test]
    fn what_cannot_be_encoded_is_named() {
        assert!(Extension::Hostname(b"a\0b".to_vec()).encodable().is_err());
        assert!(Extension::HumanNodename(b"\0".to_vec()).encodable().is_err());
        assert!(Extension::Unknown { ext_type: 2, data: vec![] }.encodable().is_err());
        assert!(Extension::Unknown { ext_type: 9, data: vec![0; 5] }.encodable().is_err());
        assert!(Extension::Unknown { ext_type: 9, data: vec![0; 40] }.encodable().is_ok());
        assert!(Extension::Hostname(vec![b'h'; 300]).encodable().is_ok());
    }
}
