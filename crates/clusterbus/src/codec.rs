//! Whole frames: the prefix check, and decoding and encoding each type's
//! body after the header (bodies drawn in lib.rs).
//!
//! Decoding follows the order of Redis's own checks. On the first 8 bytes
//! (the read handler): the signature and `totlen >= HEADER_LEN`, which close
//! the link when they fail. On the whole frame (clusterProcessPacket): the
//! version, then the length each type expects, which drop the frame when
//! they fail. Every expected length is summed in u64 from at most u32 terms,
//! so nothing wraps (Redis sums PUBLISH's two lengths in u32, which can).
//! Only then are fields read, and a count becomes a capacity only once
//! the bytes it counts are known to be there.

use crate::wire::{get_u16, get_u32, Reader};
use crate::{
    ext, gossip, header, mflags0, msg_type, Body, DecodeError, Message, SlotBitmap, GOSSIP_LEN, HEADER_LEN,
    IP_LEN, PREFIX_LEN, PROTO_VER, SIG,
};
use header::Framing;

/// Fixed bytes of a PUBLISH body before the channel: channel_len, message_len.
const PUBLISH_FIXED: usize = 8;
/// Fixed bytes of a MODULE body before the payload: module_id, len, type.
const MODULE_FIXED: usize = 13;
/// Bytes of an UPDATE body: configEpoch, nodename, slots.
const UPDATE_LEN: usize = 8 + crate::NAME_LEN + crate::SLOT_BYTES;

/// The length of the frame that `prefix` starts: None until `PREFIX_LEN`
/// bytes are there, then `totlen`, checked against the signature, the
/// header's size and `max_len`. The event loop reads `PREFIX_LEN` bytes,
/// calls this, then reads the rest of the frame.
///
/// Errors: `BadSignature` or `BadLength`, on which Redis closes the link.
///
/// ```
/// use clusterbus::{decode, encode, frame_len, msg_type, Body, Header, Message, PREFIX_LEN};
///
/// let mut stream = Vec::new();
/// let ping = Message {
///     msg_type: msg_type::PING,
///     header: Header::default(),
///     body: Body::Ping { gossip: vec![], extensions: vec![] },
/// };
/// encode(&ping, &mut stream);
/// // The event loop: 8 bytes, then the rest of the frame.
/// assert_eq!(frame_len(&stream[..PREFIX_LEN - 1], 1 << 20), Ok(None));
/// let n = frame_len(&stream[..PREFIX_LEN], 1 << 20).unwrap().unwrap();
/// assert_eq!(n, 2256);
/// assert_eq!(decode(&stream[..n]), Ok(ping));
/// ```
pub fn frame_len(prefix: &[u8], max_len: usize) -> Result<Option<usize>, DecodeError> {
    let Some(prefix) = prefix.get(..PREFIX_LEN) else {
        return Ok(None);
    };
    if prefix[..4] != SIG {
        return Err(DecodeError::BadSignature);
    }
    let totlen = get_u32(prefix, 4);
    if (totlen as usize) < HEADER_LEN || totlen as usize > max_len {
        return Err(DecodeError::BadLength(totlen));
    }
    Ok(Some(totlen as usize))
}

/// Decodes one whole frame (exactly `totlen` bytes).
///
/// Errors: a bad signature or a totlen below the header (as in
/// [`frame_len`]), a frame that is not `totlen` bytes, a version other than
/// `PROTO_VER`, or a body whose lengths do not add up to totlen.
pub fn decode(frame: &[u8]) -> Result<Message, DecodeError> {
    let prefix = frame.get(..PREFIX_LEN).ok_or(DecodeError::Malformed("frame shorter than its 8-byte prefix"))?;
    let totlen = frame_len(prefix, usize::MAX)?.expect("8 bytes are a prefix");
    if frame.len() != totlen {
        return Err(DecodeError::Malformed("frame length is not totlen"));
    }
    let ver = get_u16(frame, crate::offset::VER);
    if ver != PROTO_VER {
        return Err(DecodeError::BadVersion(ver));
    }
    let (f, header) = header::read(frame);
    let body = decode_body(f, header.mflags[0], &frame[HEADER_LEN..])?;
    Ok(Message { msg_type: f.msg_type, header, body })
}

fn decode_body(f: Framing, mflags0: u8, b: &[u8]) -> Result<Body, DecodeError> {
    // What `b` must hold, given the fixed fields: checked before any read.
    let expect = |len: u64, what| if b.len() as u64 == len { Ok(()) } else { Err(DecodeError::Malformed(what)) };
    let mut r = Reader::new(b);
    Ok(match f.msg_type {
        msg_type::PING | msg_type::PONG | msg_type::MEET => {
            let gossip_bytes = f.count as usize * GOSSIP_LEN;
            let (sections, exts) =
                b.split_at_checked(gossip_bytes).ok_or(DecodeError::Malformed("gossip count past totlen"))?;
            let extensions = if mflags0 & mflags0::EXT_DATA != 0 {
                ext::read_all(exts, f.extensions)?
            } else if f.extensions != 0 {
                // Redis would then walk extensions it has not checked.
                return Err(DecodeError::Malformed("extensions counted without EXT_DATA"));
            } else if !exts.is_empty() {
                return Err(DecodeError::Malformed("totlen is not the header and the gossip sections"));
            } else {
                Vec::new()
            };
            Body::Ping { gossip: sections.chunks_exact(GOSSIP_LEN).map(gossip::read).collect(), extensions }
        }
        msg_type::FAIL => {
            expect(crate::NAME_LEN as u64, "FAIL totlen is not the header and a name")?;
            Body::Fail { node: r.array("FAIL name")? }
        }
        msg_type::PUBLISH | msg_type::PUBLISHSHARD => {
            let channel_len = r.u32("PUBLISH shorter than its two lengths")?;
            let message_len = r.u32("PUBLISH shorter than its two lengths")?;
            expect(
                PUBLISH_FIXED as u64 + channel_len as u64 + message_len as u64,
                "PUBLISH totlen is not the header, the lengths, the channel and the message",
            )?;
            let channel = r.bytes(channel_len as usize, "PUBLISH channel")?.to_vec();
            let message = r.bytes(message_len as usize, "PUBLISH message")?.to_vec();
            Body::Publish { channel, message }
        }
        msg_type::FAILOVER_AUTH_REQUEST | msg_type::FAILOVER_AUTH_ACK | msg_type::MFSTART => {
            expect(0, "totlen of a header-only type is not the header's")?;
            Body::Empty
        }
        msg_type::UPDATE => {
            expect(UPDATE_LEN as u64, "UPDATE totlen is not the header and an UPDATE body")?;
            let config_epoch = r.u64("UPDATE config epoch")?;
            let node = r.array("UPDATE name")?;
            let mut slots = SlotBitmap::default();
            slots.0.copy_from_slice(r.bytes(crate::SLOT_BYTES, "UPDATE slots")?);
            Body::Update { config_epoch, node, slots }
        }
        msg_type::MODULE => {
            let module_id = r.u64("MODULE shorter than its fixed fields")?;
            let len = r.u32("MODULE shorter than its fixed fields")?;
            let module_type = r.u8("MODULE shorter than its fixed fields")?;
            expect(MODULE_FIXED as u64 + len as u64, "MODULE totlen is not the header, the fixed fields and the payload")?;
            Body::Module { module_id, module_type, payload: r.bytes(len as usize, "MODULE payload")?.to_vec() }
        }
        // Redis takes any length for a type it does not know, and ignores
        // all but the header.
        _ => Body::Empty,
    })
}

/// Appends `msg`'s bytes to `out`, with `totlen`, `count`, `extensions` and
/// `mflags0::EXT_DATA` derived from the message.
///
/// `count` and `extensions` are 0 for bodies other than PING/PONG/MEET, as
/// Redis leaves them; EXT_DATA is added when there are extensions and
/// otherwise left as `header.mflags` has it.
///
/// Panics if `msg` is not [`Message::encodable`]: a caller's broken
/// invariant, not something the peer sent.
pub fn encode(msg: &Message, out: &mut Vec<u8>) {
    if let Err(why) = msg.encodable() {
        panic!("clusterbus::encode: {why}");
    }
    let totlen = msg.encoded_len();
    out.reserve(totlen);
    let start = out.len();
    let (count, extensions) = match &msg.body {
        Body::Ping { gossip, extensions } => (gossip.len() as u16, extensions.len() as u16),
        _ => (0, 0),
    };
    let framing = Framing { totlen: totlen as u32, msg_type: msg.msg_type, count, extensions };
    header::write(framing, &msg.header, out);
    match &msg.body {
        Body::Ping { gossip, extensions } => {
            if !extensions.is_empty() {
                out[start + crate::offset::MFLAGS] |= mflags0::EXT_DATA;
            }
            for g in gossip {
                gossip::write(g, out);
            }
            for e in extensions {
                ext::write(e, out);
            }
        }
        Body::Fail { node } => out.extend_from_slice(node),
        Body::Publish { channel, message } => {
            out.extend_from_slice(&(channel.len() as u32).to_be_bytes());
            out.extend_from_slice(&(message.len() as u32).to_be_bytes());
            out.extend_from_slice(channel);
            out.extend_from_slice(message);
        }
        Body::Empty => {}
        Body::Update { config_epoch, node, slots } => {
            out.extend_from_slice(&config_epoch.to_be_bytes());
            out.extend_from_slice(node);
            out.extend_from_slice(&slots.0[..]);
        }
        Body::Module { module_id, module_type, payload } => {
            out.extend_from_slice(&module_id.to_be_bytes());
            out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            out.push(*module_type);
            out.extend_from_slice(payload);
        }
    }
    debug_assert_eq!(out.len() - start, totlen);
}

impl Body {
    /// Whether this body is the one `msg_type` carries (`Empty` for the
    /// header-only types and for every type at or above `msg_type::COUNT`).
    pub fn fits_type(&self, ty: u16) -> bool {
        match self {
            Body::Ping { .. } => matches!(ty, msg_type::PING | msg_type::PONG | msg_type::MEET),
            Body::Fail { .. } => ty == msg_type::FAIL,
            Body::Publish { .. } => matches!(ty, msg_type::PUBLISH | msg_type::PUBLISHSHARD),
            Body::Update { .. } => ty == msg_type::UPDATE,
            Body::Module { .. } => ty == msg_type::MODULE,
            Body::Empty => {
                matches!(ty, msg_type::FAILOVER_AUTH_REQUEST | msg_type::FAILOVER_AUTH_ACK | msg_type::MFSTART)
                    || ty >= msg_type::COUNT
            }
        }
    }
}

impl Message {
    /// The frame's length once encoded: its `totlen`.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN
            + match &self.body {
                Body::Ping { gossip, extensions } => {
                    gossip.len() * GOSSIP_LEN + extensions.iter().map(|e| e.encoded_len()).sum::<usize>()
                }
                Body::Fail { .. } => crate::NAME_LEN,
                Body::Publish { channel, message } => PUBLISH_FIXED + channel.len() + message.len(),
                Body::Empty => 0,
                Body::Update { .. } => UPDATE_LEN,
                Body::Module { payload, .. } => MODULE_FIXED + payload.len(),
            }
    }

    /// Ok when [`encode`] can write this message so that [`decode`] gives
    /// it back (but for EXT_DATA, which encode sets when there are
    /// extensions); otherwise what stands in the way: a body that does not
    /// fit the type, more than 65,535 gossip sections or extensions, a
    /// frame or a PUBLISH/MODULE length beyond u32, an IP longer than 45
    /// bytes or holding a NUL, a NUL in a hostname or human nodename, or an
    /// `Extension::Unknown` that a decoder would read otherwise.
    pub fn encodable(&self) -> Result<(), &'static str> {
        if !self.body.fits_type(self.msg_type) {
            return Err("the body does not fit the message type");
        }
        let ip_ok = |ip: &[u8]| ip.len() < IP_LEN && !ip.contains(&0);
        if !ip_ok(&self.header.myip) {
            return Err("myip is longer than 45 bytes or holds a NUL");
        }
        match &self.body {
            Body::Ping { gossip, extensions } => {
                if gossip.len() > u16::MAX as usize || extensions.len() > u16::MAX as usize {
                    return Err("more than 65535 gossip sections or extensions");
                }
                if !gossip.iter().all(|g| ip_ok(&g.ip)) {
                    return Err("a gossip IP is longer than 45 bytes or holds a NUL");
                }
                extensions.iter().try_for_each(|e| e.encodable())?;
            }
            Body::Publish { channel, message } if channel.len() > u32::MAX as usize || message.len() > u32::MAX as usize => {
                return Err("a PUBLISH channel or message longer than a u32 can say");
            }
            Body::Module { payload, .. } if payload.len() > u32::MAX as usize => {
                return Err("a MODULE payload longer than a u32 can say");
            }
            _ => {}
        }
        if self.encoded_len() > u32::MAX as usize {
            return Err("the frame is longer than a u32 can say");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ext_type, node_flags, Extension, Gossip, Header};

    const A: [u8; 40] = *b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: [u8; 40] = *b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn header() -> Header {
        Header {
            port: 7000,
            current_epoch: 3,
            config_epoch: 2,
            offset: 1234,
            sender: A,
            myip: b"10.1.2.3".to_vec(),
            cport: 17000,
            flags: node_flags::MASTER,
            ..Header::default()
        }
    }

    fn gossip(i: u8) -> Gossip {
        Gossip {
            name: [b'0' + i; 40],
            ping_sent: 1_700_000_000 + i as u32,
            pong_received: 1_700_000_001,
            ip: format!("10.0.0.{i}").into_bytes(),
            port: 7000 + i as u16,
            cport: 17000 + i as u16,
            flags: node_flags::MASTER | node_flags::PFAIL,
            pport: 0,
        }
    }

    fn msg(msg_type: u16, body: Body) -> Message {
        Message { msg_type, header: header(), body }
    }

    fn enc(m: &Message) -> Vec<u8> {
        let mut out = Vec::new();
        encode(m, &mut out);
        out
    }

    /// A PING as Redis builds one: EXT_DATA set when it has extensions.
    fn ping(gossip_n: u8, extensions: Vec<Extension>) -> Message {
        let mut m = msg(msg_type::PING, Body::Ping { gossip: vec![], extensions: vec![] });
        if !extensions.is_empty() {
            m.header.mflags[0] = mflags0::EXT_DATA;
        }
        m.body = Body::Ping { gossip: (0..gossip_n).map(gossip).collect(), extensions };
        m
    }

    fn malformed(s: &'static str) -> Result<Message, DecodeError> {
        Err(DecodeError::Malformed(s))
    }

    /// Sets a big-endian u32 at `at`.
    fn set32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    #[test]
    fn each_type_has_redis_totlen_and_count() {
        // (message, totlen Redis computes for it, count)
        let cases = [
            (ping(0, vec![]), 2256, 0),
            (ping(3, vec![]), 2256 + 3 * 104, 3),
            (ping(2, vec![Extension::Hostname(b"a.node7".to_vec())]), 2256 + 208 + 16, 2),
            (msg(msg_type::FAIL, Body::Fail { node: B }), 2296, 0),
            // sizeof(clusterMsgDataPublish) - 8 + channel + message: no padding.
            (msg(msg_type::PUBLISH, Body::Publish { channel: b"news".to_vec(), message: b"hello from B".to_vec() }), 2280, 0),
            (msg(msg_type::PUBLISHSHARD, Body::Publish { channel: vec![], message: vec![] }), 2264, 0),
            (msg(msg_type::FAILOVER_AUTH_REQUEST, Body::Empty), 2256, 0),
            (msg(msg_type::FAILOVER_AUTH_ACK, Body::Empty), 2256, 0),
            (msg(msg_type::MFSTART, Body::Empty), 2256, 0),
            (msg(msg_type::UPDATE, Body::Update { config_epoch: 9, node: B, slots: SlotBitmap::default() }), 4352, 0),
            // sizeof(clusterMsgModule) - 3 + len.
            (msg(msg_type::MODULE, Body::Module { module_id: 1, module_type: 2, payload: vec![5; 3] }), 2272, 0),
            (msg(11, Body::Empty), 2256, 0),
        ];
        for (m, totlen, count) in cases {
            let b = enc(&m);
            assert_eq!(b.len(), totlen, "{m:?}");
            assert_eq!(m.encoded_len(), totlen);
            assert_eq!(get_u32(&b, 4), totlen as u32);
            assert_eq!(get_u16(&b, 14), count);
            assert_eq!(frame_len(&b[..8], 1 << 20), Ok(Some(totlen)));
            assert_eq!(decode(&b), Ok(m));
        }
    }

    #[test]
    fn bodies_at_their_offsets() {
        let b = enc(&msg(msg_type::PUBLISH, Body::Publish { channel: b"ch".to_vec(), message: b"msg".to_vec() }));
        assert_eq!(&b[2256..], b"\0\0\0\x02\0\0\0\x03chmsg");
        let mut slots = SlotBitmap::default();
        slots.set(8);
        let b = enc(&msg(msg_type::UPDATE, Body::Update { config_epoch: 0x0102030405060708, node: B, slots }));
        assert_eq!(&b[2256..2264], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[2264..2304], &B);
        assert_eq!(b[2305], 1);
        let b = enc(&msg(msg_type::MODULE, Body::Module { module_id: 0x1112131415161718, module_type: 0x42, payload: b"xyz".to_vec() }));
        assert_eq!(&b[2256..], b"\x11\x12\x13\x14\x15\x16\x17\x18\0\0\0\x03\x42xyz");
        let b = enc(&msg(msg_type::FAIL, Body::Fail { node: B }));
        assert_eq!(&b[2256..], &B);
        let b = enc(&ping(1, vec![Extension::ShardId(B)]));
        assert_eq!(&b[2256..2296], &[b'0'; 40]);
        assert_eq!(&b[2360..2368], &[0, 0, 0, 48, 0, 3, 0, 0]);
        assert_eq!(get_u16(&b, crate::offset::EXTENSIONS), 1);
    }

    #[test]
    fn ext_data_is_set_with_extensions_and_otherwise_kept() {
        let with = enc(&ping(0, vec![Extension::ShardId(B)]));
        assert_eq!(with[2253], mflags0::EXT_DATA);
        // Redis 7.2 sets EXT_DATA on every message, extensions or not: kept.
        let mut m = ping(0, vec![]);
        m.header.mflags = [mflags0::EXT_DATA | mflags0::PAUSED, 0, 0];
        let b = enc(&m);
        assert_eq!(b[2253], mflags0::EXT_DATA | mflags0::PAUSED);
        assert_eq!(decode(&b), Ok(m));
        let mut f = msg(msg_type::FAIL, Body::Fail { node: B });
        f.header.mflags[0] = mflags0::EXT_DATA;
        assert_eq!(decode(&enc(&f)), Ok(f));
        // Redis 7.0 sets it only with extensions.
        assert_eq!(enc(&ping(2, vec![]))[2253], 0);
        // The other bits are kept.
        let mut m = ping(0, vec![Extension::Hostname(b"h".to_vec())]);
        m.header.mflags = [mflags0::FORCEACK, 0xaa, 0x55];
        assert_eq!(&enc(&m)[2253..2256], &[mflags0::FORCEACK | mflags0::EXT_DATA, 0xaa, 0x55]);
    }

    #[test]
    fn encode_appends() {
        let mut out = b"keep".to_vec();
        encode(&msg(msg_type::MFSTART, Body::Empty), &mut out);
        assert_eq!(&out[..4], b"keep");
        assert_eq!(decode(&out[4..]).map(|m| m.msg_type), Ok(msg_type::MFSTART));
    }

    #[test]
    fn frame_len_mirrors_redis_first_read() {
        let b = enc(&ping(1, vec![]));
        for n in 0..8 {
            assert_eq!(frame_len(&b[..n], 1 << 20), Ok(None));
        }
        assert_eq!(frame_len(&b[..8], 1 << 20), Ok(Some(2360)));
        assert_eq!(frame_len(&b, 1 << 20), Ok(Some(2360)));
        assert_eq!(frame_len(&b[..8], 2360), Ok(Some(2360)));
        assert_eq!(frame_len(&b[..8], 2359), Err(DecodeError::BadLength(2360)));
        let mut p = b[..8].to_vec();
        p[3] = b'B';
        assert_eq!(frame_len(&p, 1 << 20), Err(DecodeError::BadSignature));
        // Below the header: Redis's CLUSTERMSG_MIN_LEN check.
        let mut p = b[..8].to_vec();
        for totlen in [0, 8, 16, 2255] {
            set32(&mut p, 4, totlen);
            assert_eq!(frame_len(&p, 1 << 20), Err(DecodeError::BadLength(totlen)));
        }
        // No upper limit but the caller's.
        set32(&mut p, 4, u32::MAX);
        assert_eq!(frame_len(&p, usize::MAX), Ok(Some(u32::MAX as usize)));
        assert_eq!(frame_len(&p, 1 << 20), Err(DecodeError::BadLength(u32::MAX)));
    }

    #[test]
    fn every_decode_error() {
        let good = enc(&ping(2, vec![Extension::Hostname(b"x".to_vec())]));
        assert!(decode(&good).is_ok());
        // The prefix.
        assert_eq!(decode(&good[..7]), malformed("frame shorter than its 8-byte prefix"));
        assert_eq!(decode(&[]), malformed("frame shorter than its 8-byte prefix"));
        let mut b = good.clone();
        b[0] = b'r';
        assert_eq!(decode(&b), Err(DecodeError::BadSignature));
        let mut b = good.clone();
        set32(&mut b, 4, 2255);
        assert_eq!(decode(&b), Err(DecodeError::BadLength(2255)));
        // The frame is not totlen bytes.
        assert_eq!(decode(&good[..good.len() - 1]), malformed("frame length is not totlen"));
        let mut b = good.clone();
        b.push(0);
        assert_eq!(decode(&b), malformed("frame length is not totlen"));
        // The version: Redis drops such frames.
        for v in [0u16, 2, 0x0100] {
            let mut b = good.clone();
            b[8..10].copy_from_slice(&v.to_be_bytes());
            assert_eq!(decode(&b), Err(DecodeError::BadVersion(v)));
        }
    }

    /// Rewrites the frame's totlen to its length after `f` changed it.
    fn edit(m: &Message, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut b = enc(m);
        f(&mut b);
        let n = b.len() as u32;
        set32(&mut b, 4, n);
        b
    }

    #[test]
    fn ping_lengths_must_add_up() {
        let m = ping(2, vec![]);
        // count says more or fewer sections than totlen holds.
        let b = edit(&m, |b| b[15] = 3);
        assert_eq!(decode(&b), malformed("gossip count past totlen"));
        let b = edit(&m, |b| b[14..16].copy_from_slice(&u16::MAX.to_be_bytes()));
        assert_eq!(decode(&b), malformed("gossip count past totlen"));
        let b = edit(&m, |b| b[15] = 1);
        assert_eq!(decode(&b), malformed("totlen is not the header and the gossip sections"));
        let b = edit(&m, |b| b.extend_from_slice(&[0; 8]));
        assert_eq!(decode(&b), malformed("totlen is not the header and the gossip sections"));
        // Extensions counted, but EXT_DATA not set.
        let b = edit(&m, |b| b[2215] = 1);
        assert_eq!(decode(&b), malformed("extensions counted without EXT_DATA"));
        // With EXT_DATA, trailing bytes that no extension accounts for.
        let m = ping(1, vec![Extension::ShardId(B)]);
        let b = edit(&m, |b| b.extend_from_slice(&[0; 8]));
        assert_eq!(decode(&b), malformed("bytes after the last ping extension"));
        let b = edit(&m, |b| b[2215] = 2);
        assert_eq!(decode(&b), malformed("ping extension header past totlen"));
        let b = edit(&m, |b| b[2360 + 3] = 56);
        assert_eq!(decode(&b), malformed("ping extension past totlen"));
        let b = edit(&m, |b| b[2360 + 3] = 44);
        assert_eq!(decode(&b), malformed("ping extension length not a multiple of 8"));
        let b = edit(&m, |b| b[2360 + 3] = 0);
        assert_eq!(decode(&b), malformed("ping extension shorter than its header"));
        // A payload check reaches decode too.
        let b = edit(&m, |b| b[2360 + 5] = ext_type::HOSTNAME as u8);
        assert_eq!(decode(&b), malformed("hostname extension without its NUL"));
    }

    #[test]
    fn other_lengths_must_add_up() {
        let fail = msg(msg_type::FAIL, Body::Fail { node: B });
        assert_eq!(decode(&edit(&fail, |b| b.push(0))), malformed("FAIL totlen is not the header and a name"));
        assert_eq!(decode(&edit(&fail, |b| b.truncate(2256))), malformed("FAIL totlen is not the header and a name"));

        let publish = msg(msg_type::PUBLISH, Body::Publish { channel: b"c".to_vec(), message: b"m".to_vec() });
        let p = "PUBLISH totlen is not the header, the lengths, the channel and the message";
        assert_eq!(decode(&edit(&publish, |b| b.truncate(2256 + 7))), malformed("PUBLISH shorter than its two lengths"));
        assert_eq!(decode(&edit(&publish, |b| b.truncate(2256))), malformed("PUBLISH shorter than its two lengths"));
        assert_eq!(decode(&edit(&publish, |b| b.push(0))), malformed(p));
        assert_eq!(decode(&edit(&publish, |b| b[2259] = 2)), malformed(p));
        // Lengths whose u32 sum wraps to what totlen holds: Redis would take
        // that frame; here the sum does not wrap.
        let wrap = edit(&publish, |b| {
            set32(b, 2256, u32::MAX);
            set32(b, 2260, 3); // u32::MAX + 3 == 2 (mod 2^32)
        });
        assert_eq!(decode(&wrap), malformed(p));
        for ty in [msg_type::FAILOVER_AUTH_REQUEST, msg_type::FAILOVER_AUTH_ACK, msg_type::MFSTART] {
            let b = edit(&msg(ty, Body::Empty), |b| b.push(0));
            assert_eq!(decode(&b), malformed("totlen of a header-only type is not the header's"));
        }
        let update = msg(msg_type::UPDATE, Body::Update { config_epoch: 1, node: B, slots: SlotBitmap::default() });
        let u = "UPDATE totlen is not the header and an UPDATE body";
        assert_eq!(decode(&edit(&update, |b| b.push(0))), malformed(u));
        assert_eq!(decode(&edit(&update, |b| b.truncate(4351))), malformed(u));

        let module = msg(msg_type::MODULE, Body::Module { module_id: 7, module_type: 1, payload: vec![1, 2] });
        let mo = "MODULE totlen is not the header, the fixed fields and the payload";
        assert_eq!(decode(&edit(&module, |b| b.truncate(2256 + 12))), malformed("MODULE shorter than its fixed fields"));
        assert_eq!(decode(&edit(&module, |b| b.push(0))), malformed(mo));
        assert_eq!(decode(&edit(&module, |b| set32(b, 2264, u32::MAX))), malformed(mo));
    }

    #[test]
    fn what_redis_ignores_is_ignored() {
        // count and extensions on other types, notused1, trailing bytes of
        // unknown types: decoded as if zero or absent.
        let fail = msg(msg_type::FAIL, Body::Fail { node: B });
        let b = edit(&fail, |b| {
            b[14..16].copy_from_slice(&[1, 2]);
            b[2214..2216].copy_from_slice(&[3, 4]);
            b[2216..2246].fill(0xff);
        });
        assert_eq!(decode(&b), Ok(fail));
        for ty in [msg_type::COUNT, 12, u16::MAX] {
            let m = msg(ty, Body::Empty);
            let b = edit(&m, |b| b.extend_from_slice(b"whatever a later version sends"));
            assert_eq!(decode(&b), Ok(m.clone()));
            assert_eq!(enc(&m).len(), 2256);
        }
        // Gossip sections' notused1.
        let m = ping(1, vec![]);
        assert_eq!(decode(&edit(&m, |b| b[2256 + 103] = 9)), Ok(m));
    }

    #[test]
    fn closes_link_only_for_prefix_errors() {
        assert!(DecodeError::BadSignature.closes_link());
        assert!(DecodeError::BadLength(3).closes_link());
        assert!(!DecodeError::BadVersion(2).closes_link());
        assert!(!DecodeError::Malformed("x").closes_link());
        assert_eq!(DecodeError::BadVersion(2).to_string(), "cluster bus protocol version 2, not 1");
    }

    #[test]
    fn body_fits_type() {
        let all = [
            Body::Ping { gossip: vec![], extensions: vec![] },
            Body::Fail { node: B },
            Body::Publish { channel: vec![], message: vec![] },
            Body::Empty,
            Body::Update { config_epoch: 0, node: B, slots: SlotBitmap::default() },
            Body::Module { module_id: 0, module_type: 0, payload: vec![] },
        ];
        for ty in 0..=20u16 {
            let fits: Vec<usize> = (0..all.len()).filter(|&i| all[i].fits_type(ty)).collect();
            assert_eq!(fits.len(), 1, "exactly one body per type {ty}");
            let m = Message { msg_type: ty, header: header(), body: all[fits[0]].clone() };
            assert_eq!(decode(&enc(&m)), Ok(m));
        }
    }

    #[test]
    fn what_cannot_be_encoded_is_named() {
        let bad = |m: Message| m.encodable().unwrap_err();
        assert_eq!(bad(msg(msg_type::PING, Body::Empty)), "the body does not fit the message type");
        assert_eq!(bad(msg(20, Body::Fail { node: B })), "the body does not fit the message type");
        let mut m = ping(0, vec![]);
        m.header.myip = vec![b'1'; 46];
        assert_eq!(bad(m), "myip is longer than 45 bytes or holds a NUL");
        let mut m = ping(1, vec![]);
        m.header.myip = b"1.2.3.4\0".to_vec();
        assert_eq!(bad(m), "myip is longer than 45 bytes or holds a NUL");
        let mut m = ping(1, vec![]);
        if let Body::Ping { gossip, .. } = &mut m.body {
            gossip[0].ip = vec![b'1'; 46];
        }
        assert_eq!(bad(m), "a gossip IP is longer than 45 bytes or holds a NUL");
        let m = msg(msg_type::PING, Body::Ping { gossip: vec![gossip(0); 65536], extensions: vec![] });
        assert_eq!(bad(m), "more than 65535 gossip sections or extensions");
        let m = ping(0, vec![Extension::Hostname(b"a\0".to_vec())]);
        assert_eq!(bad(m), "a hostname or human nodename extension holds a NUL");
        // 45 bytes is the most an IP field holds.
        let mut m = ping(0, vec![]);
        m.header.myip = vec![b'1'; 45];
        assert_eq!(m.encodable(), Ok(()));
    }

    #[test]
    #[should_panic(expected = "clusterbus::encode: the body does not fit the message type")]
    fn encode_panics_on_what_cannot_be_encoded() {
        enc(&msg(msg_type::UPDATE, Body::Empty));
    }
}
