//! The 2,256-byte header every message starts with, read from and written
//! to the offsets `crate::offset` names (drawn in lib.rs).
//!
//! The header splits in two: what the sender says about itself ([`Header`]),
//! and what frames the message: `sig` and `ver`, which are constants, and
//! `totlen`, `type`, `count` and `extensions`, which the codec derives from
//! the message when it encodes and checks when it decodes ([`Framing`]
//! carries those four between this file and codec.rs). `notused1` is
//! written as zero and never read, as Redis does.

use crate::offset as at;
use crate::wire::{get, get_u16, get_u32, get_u64, put, text_before_nul};
use crate::{Header, SlotBitmap, HEADER_LEN, IP_LEN, PROTO_VER, SIG, SLOT_BYTES};

/// The header's fields that frame the message rather than describe the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framing {
    pub totlen: u32,
    pub msg_type: u16,
    pub count: u16,
    pub extensions: u16,
}

/// Reads a header from the first `HEADER_LEN` bytes of `b`.
///
/// Panics if `b` is shorter (the caller has checked totlen first).
pub(crate) fn read(b: &[u8]) -> (Framing, Header) {
    let b = &b[..HEADER_LEN];
    let framing = Framing {
        totlen: get_u32(b, at::TOTLEN),
        msg_type: get_u16(b, at::TYPE),
        count: get_u16(b, at::COUNT),
        extensions: get_u16(b, at::EXTENSIONS),
    };
    let mut myslots = SlotBitmap::default();
    myslots.0.copy_from_slice(&b[at::MYSLOTS..at::MYSLOTS + SLOT_BYTES]);
    let header = Header {
        port: get_u16(b, at::PORT),
        current_epoch: get_u64(b, at::CURRENT_EPOCH),
        config_epoch: get_u64(b, at::CONFIG_EPOCH),
        offset: get_u64(b, at::OFFSET),
        sender: get(b, at::SENDER),
        myslots,
        replicaof: get(b, at::SLAVEOF),
        // Redis uses the field only when its first byte is not NUL, and
        // forces its last byte to NUL first.
        myip: text_before_nul(&b[at::MYIP..at::MYIP + IP_LEN], IP_LEN - 1).to_vec(),
        pport: get_u16(b, at::PPORT),
        cport: get_u16(b, at::CPORT),
        flags: get_u16(b, at::FLAGS),
        state: b[at::STATE],
        mflags: get(b, at::MFLAGS),
    };
    (framing, header)
}

/// Appends the header's `HEADER_LEN` bytes to `out`, with this codec's
/// `sig` and `ver` (decode checks those before it reads the header).
pub(crate) fn write(framing: Framing, h: &Header, out: &mut Vec<u8>) {
    let start = out.len();
    // Zero first: notused1 and the padding of myip stay zero.
    out.resize(start + HEADER_LEN, 0);
    let b = &mut out[start..];
    put(b, at::SIG, &SIG);
    put(b, at::TOTLEN, &framing.totlen.to_be_bytes());
    put(b, at::VER, &PROTO_VER.to_be_bytes());
    put(b, at::PORT, &h.port.to_be_bytes());
    put(b, at::TYPE, &framing.msg_type.to_be_bytes());
    put(b, at::COUNT, &framing.count.to_be_bytes());
    put(b, at::CURRENT_EPOCH, &h.current_epoch.to_be_bytes());
    put(b, at::CONFIG_EPOCH, &h.config_epoch.to_be_bytes());
    put(b, at::OFFSET, &h.offset.to_be_bytes());
    put(b, at::SENDER, &h.sender);
    put(b, at::MYSLOTS, &h.myslots.0[..]);
    put(b, at::SLAVEOF, &h.replicaof);
    put(b, at::MYIP, &h.myip);
    put(b, at::EXTENSIONS, &framing.extensions.to_be_bytes());
    put(b, at::PPORT, &h.pport.to_be_bytes());
    put(b, at::CPORT, &h.cport.to_be_bytes());
    put(b, at::FLAGS, &h.flags.to_be_bytes());
    b[at::STATE] = h.state;
    put(b, at::MFLAGS, &h.mflags);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header with a different value in every field, so that two fields
    /// written at the same place would show.
    fn distinct_header() -> Header {
        let mut myslots = SlotBitmap::default();
        myslots.set(0);
        myslots.set(9);
        myslots.set(16383);
        Header {
            port: 0x0a0b,
            current_epoch: 0x1011_1213_1415_1617,
            config_epoch: 0x1819_1a1b_1c1d_1e1f,
            offset: 0x2021_2223_2425_2627,
            sender: *b"0123456789abcdef0123456789abcdef01234567",
            myslots,
            replicaof: *b"fedcba9876543210fedcba9876543210fedcba98",
            // The longest text an IP field holds: 45 bytes and the NUL.
            myip: b"0000:0000:0000:0000:0000:ffff:255.255.255.255".to_vec(),
            pport: 0x2a2b,
            cport: 0x2c2d,
            flags: 0x2e2f,
            state: 0x31,
            mflags: [0x32, 0x33, 0x34],
        }
    }

    fn framing() -> Framing {
        Framing { totlen: 0x0405_0607, msg_type: 0x0c0d, count: 0x0e0f, extensions: 0x2627 }
    }

    /// Every field at its documented offset, as Redis's static_asserts pin
    /// `clusterMsg`; the offsets are written out here, not taken from
    /// `crate::offset`, so that a change there fails this test.
    #[test]
    fn every_field_at_its_offset() {
        let h = distinct_header();
        let mut out = Vec::new();
        write(framing(), &h, &mut out);
        assert_eq!(out.len(), 2256);
        assert_eq!(&out[0..4], b"RCmb");
        assert_eq!(&out[4..8], &[0x04, 0x05, 0x06, 0x07]);
        assert_eq!(&out[8..10], &[0, 1]);
        assert_eq!(&out[10..12], &[0x0a, 0x0b]);
        assert_eq!(&out[12..14], &[0x0c, 0x0d]);
        assert_eq!(&out[14..16], &[0x0e, 0x0f]);
        assert_eq!(&out[16..24], &[0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17]);
        assert_eq!(&out[24..32], &[0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f]);
        assert_eq!(&out[32..40], &[0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27]);
        assert_eq!(&out[40..80], b"0123456789abcdef0123456789abcdef01234567");
        // Slot s is bit s % 8 of byte s / 8.
        assert_eq!(out[80], 0b0000_0001);
        assert_eq!(out[81], 0b0000_0010);
        assert_eq!(out[80 + 2047], 0b1000_0000);
        assert_eq!(out[82..80 + 2047].iter().filter(|&&b| b != 0).count(), 0);
        assert_eq!(&out[2128..2168], b"fedcba9876543210fedcba9876543210fedcba98");
        assert_eq!(&out[2168..2213], &h.myip[..]);
        assert_eq!(out[2213], 0, "myip keeps a NUL at its end");
        assert_eq!(&out[2214..2216], &[0x26, 0x27]);
        assert_eq!(&out[2216..2246], &[0; 30]);
        assert_eq!(&out[2246..2248], &[0x2a, 0x2b]);
        assert_eq!(&out[2248..2250], &[0x2c, 0x2d]);
        assert_eq!(&out[2250..2252], &[0x2e, 0x2f]);
        assert_eq!(out[2252], 0x31);
        assert_eq!(&out[2253..2256], &[0x32, 0x33, 0x34]);
    }

    #[test]
    fn read_gives_back_what_write_wrote() {
        let h = distinct_header();
        let mut out = vec![0xee; 3]; // write appends
        write(framing(), &h, &mut out);
        assert_eq!(read(&out[3..]), (framing(), h));
    }

    #[test]
    fn short_myip_is_nul_padded_and_read_without_the_padding() {
        let h = Header { myip: b"10.0.0.1".to_vec(), ..Header::default() };
        let mut out = Vec::new();
        write(framing(), &h, &mut out);
        assert_eq!(&out[2168..2176], b"10.0.0.1");
        assert_eq!(&out[2176..2214], &[0; 38]);
        assert_eq!(read(&out).1.myip, b"10.0.0.1");
    }

    #[test]
    fn myip_read_as_redis_reads_it() {
        let mut out = Vec::new();
        write(framing(), &Header::default(), &mut out);
        // No NUL in 46 bytes: Redis forces the 46th to NUL.
        out[2168..2214].fill(b'9');
        assert_eq!(read(&out).1.myip, vec![b'9'; 45]);
        // A NUL first: no address announced, whatever follows.
        out[2168] = 0;
        assert_eq!(read(&out).1.myip, b"");
    }
}
