//! Gossip sections: what a PING, PONG or MEET says about other nodes.
//!
//! The header's `count` sections follow it directly, 104 bytes each:
//!
//! ```text
//! offset  size  field          here
//! ------  ----  -------------  ------------------------------------
//!      0    40  nodename       Gossip::name
//!     40     4  ping_sent      Gossip::ping_sent (Unix seconds)
//!     44     4  pong_received  Gossip::pong_received (Unix seconds)
//!     48    46  ip             Gossip::ip, NUL-padded
//!     94     2  port           Gossip::port
//!     96     2  cport          Gossip::cport
//!     98     2  flags          Gossip::flags (node_flags)
//!    100     2  pport          Gossip::pport
//!    102     2  notused1       zero
//!    104
//! ```
//!
//! Redis copies the whole 46-byte IP field of its node record into a
//! section. The bytes after the NUL are zero in every frame captured for
//! the tests, but Redis does not promise it (one path fills the record from
//! a stack buffer it did not clear), and no receiver reads them. They are
//! not kept here: an IP is its text, up to 45 bytes, so such a frame would
//! decode, and encode again with zeros after the NUL.

use crate::wire::{get, get_u16, get_u32, put, text_before_nul};
use crate::{Gossip, GOSSIP_LEN, IP_LEN};

const NAME: usize = 0;
const PING_SENT: usize = 40;
const PONG_RECEIVED: usize = 44;
const IP: usize = 48;
const PORT: usize = 94;
const CPORT: usize = 96;
const FLAGS: usize = 98;
const PPORT: usize = 100;
const NOTUSED: usize = 102;

const _: () = {
    assert!(NAME + crate::NAME_LEN == PING_SENT && PING_SENT + 4 == PONG_RECEIVED);
    assert!(PONG_RECEIVED + 4 == IP && IP + IP_LEN == PORT && PORT + 2 == CPORT);
    assert!(CPORT + 2 == FLAGS && FLAGS + 2 == PPORT && PPORT + 2 == NOTUSED);
    assert!(NOTUSED + 2 == GOSSIP_LEN);
};

/// Reads one section from the first `GOSSIP_LEN` bytes of `b`.
///
/// Panics if `b` is shorter (the caller has checked the count against totlen).
pub(crate) fn read(b: &[u8]) -> Gossip {
    let b = &b[..GOSSIP_LEN];
    Gossip {
        name: get(b, NAME),
        ping_sent: get_u32(b, PING_SENT),
        pong_received: get_u32(b, PONG_RECEIVED),
        ip: text_before_nul(&b[IP..IP + IP_LEN], IP_LEN - 1).to_vec(),
        port: get_u16(b, PORT),
        cport: get_u16(b, CPORT),
        flags: get_u16(b, FLAGS),
        pport: get_u16(b, PPORT),
    }
}

/// Appends one section's `GOSSIP_LEN` bytes to `out`.
pub(crate) fn write(g: &Gossip, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + GOSSIP_LEN, 0);
    let b = &mut out[start..];
    put(b, NAME, &g.name);
    put(b, PING_SENT, &g.ping_sent.to_be_bytes());
    put(b, PONG_RECEIVED, &g.pong_received.to_be_bytes());
    put(b, IP, &g.ip);
    put(b, PORT, &g.port.to_be_bytes());
    put(b, CPORT, &g.cport.to_be_bytes());
    put(b, FLAGS, &g.flags.to_be_bytes());
    put(b, PPORT, &g.pport.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distinct() -> Gossip {
        Gossip {
            name: *b"0123456789abcdef0123456789abcdef01234567",
            ping_sent: 0x2829_2a2b,
            pong_received: 0x2c2d_2e2f,
            ip: b"192.168.100.200".to_vec(),
            port: 0x5e5f,
            cport: 0x6061,
            flags: 0x6263,
            pport: 0x6465,
        }
    }

    #[test]
    fn every_field_at_its_offset() {
        let mut out = Vec::new();
        write(&distinct(), &mut out);
        assert_eq!(out.len(), 104);
        assert_eq!(&out[0..40], b"0123456789abcdef0123456789abcdef01234567");
        assert_eq!(&out[40..44], &[0x28, 0x29, 0x2a, 0x2b]);
        assert_eq!(&out[44..48], &[0x2c, 0x2d, 0x2e, 0x2f]);
        assert_eq!(&out[48..63], b"192.168.100.200");
        assert_eq!(&out[63..94], &[0; 31]);
        assert_eq!(&out[94..96], &[0x5e, 0x5f]);
        assert_eq!(&out[96..98], &[0x60, 0x61]);
        assert_eq!(&out[98..100], &[0x62, 0x63]);
        assert_eq!(&out[100..102], &[0x64, 0x65]);
        assert_eq!(&out[102..104], &[0, 0]);
    }

    #[test]
    fn read_gives_back_what_write_wrote() {
        let mut out = vec![1, 2];
        write(&distinct(), &mut out);
        assert_eq!(read(&out[2..]), distinct());
    }

    #[test]
    fn ignored_bytes_are_ignored() {
        let mut out = Vec::new();
        write(&distinct(), &mut out);
        out[NOTUSED] = 0xff;
        out[63 + 5] = b'x'; // after the IP's NUL
        assert_eq!(read(&out), distinct());
        out[IP..IP + IP_LEN].fill(b'1');
        assert_eq!(read(&out).ip, vec![b'1'; IP_LEN - 1]);
    }
}
