//! The Redis Cluster bus message format (Redis 7's protocol version 1), as a
//! codec with no server state: the peer of `resp` for the bus port.
//!
//! A message is one frame: a fixed 2,256-byte header, then a body whose shape
//! the header's `type` chooses. All integers are big-endian, text fields are
//! NUL-padded, and there is no padding between fields.
//!
//! # The header
//!
//! ```text
//! offset  size  field         here
//! ------  ----  ------------  ---------------------------------------------------
//!      0     4  sig           "RCmb" (SIG)
//!      4     4  totlen        bytes of the whole frame, header included
//!      8     2  ver           1 (PROTO_VER)
//!     10     2  port          Header::port
//!     12     2  type          Message::msg_type
//!     14     2  count         gossip sections of PING, PONG, MEET; 0 otherwise
//!     16     8  currentEpoch  Header::current_epoch
//!     24     8  configEpoch   Header::config_epoch
//!     32     8  offset        Header::offset
//!     40    40  sender        Header::sender
//!     80  2048  myslots       Header::myslots
//!   2128    40  slaveof       Header::replicaof (all zero: none)
//!   2168    46  myip          Header::myip, NUL-padded (all zero: none)
//!   2214     2  extensions    ping extensions of PING, PONG, MEET; 0 otherwise
//!   2216    30  notused1      zero
//!   2246     2  pport         Header::pport
//!   2248     2  cport         Header::cport
//!   2250     2  flags         Header::flags (node_flags)
//!   2252     1  state         Header::state
//!   2253     3  mflags        Header::mflags (mflags0 for byte 0)
//!   2256        body
//! ```
//!
//! [`offset`] names each of these. The tests pin them (as Redis pins its
//! `clusterMsg` with static_asserts), and decode frames captured from Redis
//! 7.0 and encode them again byte for byte (`tests/fixtures/`).
//!
//! # Bodies
//!
//! ```text
//! PING, PONG, MEET  count gossip sections of 104 bytes (gossip.rs), then, when
//!                   mflags[0] has EXT_DATA, `extensions` ping extensions, each an
//!                   8-byte header and a payload padded to 8 bytes (ext.rs)
//! FAIL              nodename[40]                                  totlen 2296
//! PUBLISH,          channel_len u32, message_len u32, channel, message
//! PUBLISHSHARD                      totlen 2264 + channel_len + message_len
//! FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART
//!                   nothing                                       totlen 2256
//! UPDATE            configEpoch u64, nodename[40], slots[2048]    totlen 4352
//! MODULE            module_id u64, len u32, type u8, payload[len]
//!                                                   totlen 2269 + len
//! 11 and above      anything: Redis takes any totlen, uses the header as it
//!                   uses every message's (epochs, replication offset) and
//!                   ignores the rest; decoded as Body::Empty, the bytes after
//!                   the header dropped
//! ```
//!
//! PUBLISH has no padding: Redis's struct declares an 8-byte placeholder for
//! the channel and message, and subtracts it again when it computes totlen.
//!
//! # Invariants and limits
//!
//! - Framing: the reader takes [`PREFIX_LEN`] bytes, then [`frame_len`] checks
//!   the signature and `HEADER_LEN <= totlen <= max_len` and says how long the
//!   frame is. Redis makes the same two checks at the same point and closes
//!   the link when they fail; the upper limit is ours (Redis has none).
//! - [`decode`] takes exactly one frame and checks every length before it
//!   reads: totlen must be what the type, the gossip count, the extension
//!   lengths or the PUBLISH / MODULE lengths add up to, summed without
//!   overflow (Redis sums them in u32). It never panics and allocates in
//!   proportion to the bytes it was given, never to a count or length they
//!   declare: at most 8 times the frame's length (an 8-byte extension becomes
//!   a 56-byte [`Extension`]; `tests/alloc.rs` measures it).
//! - Redis drops a frame whose version is not 1 or whose lengths do not add
//!   up, and keeps the link: the frame was whole, so the stream is still in
//!   step. [`DecodeError::closes_link`] says which errors close it.
//! - What Redis ignores is ignored: `count` and `extensions` of the other
//!   types, notused bytes, bytes after the NUL of an IP or a hostname, the
//!   body of an unknown type. Encoding writes them as Redis does (zero), so
//!   decoding and encoding again is byte-exact for what Redis sends (every
//!   captured frame; gossip.rs names the one field where Redis could leave
//!   stray bytes), and encoding then decoding gives the message back (with
//!   EXT_DATA in `mflags[0]` if it has extensions).
//! - Stricter than Redis where Redis would read past what it checked:
//!   refused are an extension length below 8 (Redis lets 0 by), a text
//!   extension without its NUL, a FORGOTTEN_NODE or SHARDID payload too
//!   short for its fields, extensions counted without EXT_DATA, and PUBLISH
//!   or MODULE lengths whose u32 sum wraps; and an extension length is read
//!   whole (Redis checks only its low 16 bits). Redis's own writer produces
//!   none of these.
//! - [`encode`] writes what Redis writes for the same content: count = the
//!   gossip sections, extensions = their number, totlen computed, EXT_DATA
//!   set when there are extensions and otherwise kept as given (Redis 7.0 sets
//!   it only then; 7.2 and later set it on every message they build). It
//!   panics on a message no bytes can carry ([`Message::encodable`]).
//!
//! Not here: I/O, node state, deciding what to send. The server's cluster
//! state machine does that with these types and never touches bytes.

#![warn(missing_docs)]

mod codec;
mod ext;
mod gossip;
mod header;
mod wire;

pub use codec::{decode, encode, frame_len};

/// Signature at the start of every bus message ("Redis Cluster message bus").
pub const SIG: [u8; 4] = *b"RCmb";
/// The bus protocol version this codec speaks.
pub const PROTO_VER: u16 = 1;
/// Bytes of the fixed header that starts every message.
pub const HEADER_LEN: usize = 2256;
/// Number of hash slots.
pub const SLOTS: usize = 16384;
/// Bytes of a slot bitmap.
pub const SLOT_BYTES: usize = SLOTS / 8;
/// Bytes of a node name (40 lowercase hex digits).
pub const NAME_LEN: usize = 40;
/// Bytes of an IP field (NUL-padded text).
pub const IP_LEN: usize = 46;
/// Bytes of one gossip section of PING, PONG and MEET.
pub const GOSSIP_LEN: usize = 104;
/// Bytes a reader takes before it knows a frame's length: the signature and
/// `totlen` (Redis's read handler reads these 8 bytes first).
pub const PREFIX_LEN: usize = 8;
/// Bytes of a ping extension's own header (length u32, type u16, unused u16).
pub const EXT_HEADER_LEN: usize = 8;

/// Where each field of the header starts (see the drawing above). The
/// fields follow each other with no gaps; the asserts below check that the
/// offsets and the sizes agree, and the tests pin them against encoded bytes.
pub mod offset {
    /// `sig`, 4 bytes.
    pub const SIG: usize = 0;
    /// `totlen`, u32.
    pub const TOTLEN: usize = 4;
    /// `ver`, u16.
    pub const VER: usize = 8;
    /// `port`, u16.
    pub const PORT: usize = 10;
    /// `type`, u16.
    pub const TYPE: usize = 12;
    /// `count`, u16.
    pub const COUNT: usize = 14;
    /// `currentEpoch`, u64.
    pub const CURRENT_EPOCH: usize = 16;
    /// `configEpoch`, u64.
    pub const CONFIG_EPOCH: usize = 24;
    /// `offset` (replication offset), u64.
    pub const OFFSET: usize = 32;
    /// `sender`, 40 bytes.
    pub const SENDER: usize = 40;
    /// `myslots`, 2,048 bytes.
    pub const MYSLOTS: usize = 80;
    /// `slaveof`, 40 bytes.
    pub const SLAVEOF: usize = 2128;
    /// `myip`, 46 bytes.
    pub const MYIP: usize = 2168;
    /// `extensions`, u16.
    pub const EXTENSIONS: usize = 2214;
    /// `notused1`, 30 zero bytes.
    pub const NOTUSED: usize = 2216;
    /// `pport`, u16.
    pub const PPORT: usize = 2246;
    /// `cport`, u16.
    pub const CPORT: usize = 2248;
    /// `flags`, u16.
    pub const FLAGS: usize = 2250;
    /// `state`, u8.
    pub const STATE: usize = 2252;
    /// `mflags`, 3 bytes.
    pub const MFLAGS: usize = 2253;
    /// The body.
    pub const BODY: usize = 2256;
}

// Each field ends where the next begins, and the header is HEADER_LEN bytes.
const _: () = {
    use offset::*;
    assert!(SIG + 4 == TOTLEN && TOTLEN + 4 == VER && VER + 2 == PORT && PORT + 2 == TYPE);
    assert!(TYPE + 2 == COUNT && COUNT + 2 == CURRENT_EPOCH && CURRENT_EPOCH + 8 == CONFIG_EPOCH);
    assert!(CONFIG_EPOCH + 8 == OFFSET && OFFSET + 8 == SENDER && SENDER + NAME_LEN == MYSLOTS);
    assert!(MYSLOTS + SLOT_BYTES == SLAVEOF && SLAVEOF + NAME_LEN == MYIP && MYIP + IP_LEN == EXTENSIONS);
    assert!(EXTENSIONS + 2 == NOTUSED && NOTUSED + 30 == PPORT && PPORT + 2 == CPORT);
    assert!(CPORT + 2 == FLAGS && FLAGS + 2 == STATE && STATE + 1 == MFLAGS && MFLAGS + 3 == BODY);
    assert!(BODY == HEADER_LEN);
};

/// A node name: 40 hex digits, or all zero for "none".
pub type NodeName = [u8; NAME_LEN];
/// The all-zero name: no node (a primary's `replicaof`).
pub const NULL_NAME: NodeName = [0; NAME_LEN];

/// Message types (the header's `type`).
pub mod msg_type {
    /// Ping.
    pub const PING: u16 = 0;
    /// Reply to PING or MEET.
    pub const PONG: u16 = 1;
    /// A PING that makes the receiver add the sender.
    pub const MEET: u16 = 2;
    /// Marks a node as failing.
    pub const FAIL: u16 = 3;
    /// PUBLISH to every node.
    pub const PUBLISH: u16 = 4;
    /// A replica asks primaries for a vote.
    pub const FAILOVER_AUTH_REQUEST: u16 = 5;
    /// A primary's vote.
    pub const FAILOVER_AUTH_ACK: u16 = 6;
    /// Another node's slot configuration.
    pub const UPDATE: u16 = 7;
    /// A replica asks its primary to pause for a manual failover.
    pub const MFSTART: u16 = 8;
    /// A module's message.
    pub const MODULE: u16 = 9;
    /// SPUBLISH within a shard.
    pub const PUBLISHSHARD: u16 = 10;
    /// Number of known types; higher ones are ignored by receivers.
    pub const COUNT: u16 = 11;
}

/// Node flags (the header's `flags` and each gossip section's).
pub mod node_flags {
    /// A primary.
    pub const MASTER: u16 = 1;
    /// A replica.
    pub const SLAVE: u16 = 2;
    /// Possibly failing (no answer within the node timeout).
    pub const PFAIL: u16 = 4;
    /// Failing, as agreed by a majority of primaries.
    pub const FAIL: u16 = 8;
    /// This node (never sent meaningfully on the wire).
    pub const MYSELF: u16 = 16;
    /// First PING not yet exchanged.
    pub const HANDSHAKE: u16 = 32;
    /// Address unknown.
    pub const NOADDR: u16 = 64;
    /// Send a MEET.
    pub const MEET: u16 = 128;
    /// Primary eligible for replica migration.
    pub const MIGRATE_TO: u16 = 256;
    /// Replica that will not fail over.
    pub const NOFAILOVER: u16 = 512;
    /// The node understands ping extensions.
    pub const EXTENSIONS_SUPPORTED: u16 = 1024;
}

/// Message flags, first byte (`mflags[0]`).
pub mod mflags0 {
    /// The primary is paused for a manual failover.
    pub const PAUSED: u8 = 1;
    /// Grant the vote even though the primary is up (manual failover).
    pub const FORCEACK: u8 = 2;
    /// The message carries ping extensions.
    pub const EXT_DATA: u8 = 4;
}

/// Ping extension types.
pub mod ext_type {
    /// The announced hostname.
    pub const HOSTNAME: u16 = 0;
    /// The announced human-readable node name.
    pub const HUMAN_NODENAME: u16 = 1;
    /// A node the sender forgot (CLUSTER FORGET), with a time to live.
    pub const FORGOTTEN_NODE: u16 = 2;
    /// The sender's shard id.
    pub const SHARDID: u16 = 3;
}

/// The 16,384-bit slot bitmap of the header and of UPDATE. Slot `s` is bit
/// `s % 8` of byte `s / 8`.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotBitmap(pub Box<[u8; SLOT_BYTES]>);

impl Default for SlotBitmap {
    fn default() -> Self {
        SlotBitmap(Box::new([0; SLOT_BYTES]))
    }
}

impl std::fmt::Debug for SlotBitmap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlotBitmap({} slots)", self.count())
    }
}

impl SlotBitmap {
    /// Whether slot `s` is set.
    pub fn get(&self, s: u16) -> bool {
        self.0[s as usize / 8] & (1 << (s % 8)) != 0
    }
    /// Sets slot `s`.
    pub fn set(&mut self, s: u16) {
        self.0[s as usize / 8] |= 1 << (s % 8);
    }
    /// Clears slot `s`.
    pub fn clear(&mut self, s: u16) {
        self.0[s as usize / 8] &= !(1 << (s % 8));
    }
    /// Number of slots set.
    pub fn count(&self) -> usize {
        self.0.iter().map(|b| b.count_ones() as usize).sum()
    }
    /// The slots set, in order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..SLOTS as u16).filter(move |&s| self.get(s))
    }
    /// The runs of consecutive slots set, as (first, last), in order. Reads
    /// the map 64 slots at a time, so a sparse or a full map costs 256 word
    /// reads rather than 16,384 bit tests.
    pub fn ranges(&self) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        let mut open: Option<u16> = None;
        for (w, chunk) in self.0.chunks_exact(8).enumerate() {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            let base = (w * 64) as u16;
            if word == 0 || word == u64::MAX {
                match (open, word == 0) {
                    (Some(start), true) => {
                        out.push((start, base - 1));
                        open = None;
                    }
                    (None, false) => open = Some(base),
                    _ => {}
                }
                continue;
            }
            for bit in 0..64u16 {
                let set = word & (1 << bit) != 0;
                match (open, set) {
                    (None, true) => open = Some(base + bit),
                    (Some(start), false) => {
                        out.push((start, base + bit - 1));
                        open = None;
                    }
                    _ => {}
                }
            }
        }
        if let Some(start) = open {
            out.push((start, (SLOTS - 1) as u16));
        }
        out
    }
}

/// The fixed header every message starts with. `sig`, `totlen`, `ver`,
/// `type`, `count` and `extensions` are derived from the message when it is
/// encoded and checked when it is decoded, so they are not fields here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The sender's client port (TCP, or TLS when tls-cluster is on).
    pub port: u16,
    /// The sender's current epoch.
    pub current_epoch: u64,
    /// The sender's config epoch (its primary's, for a replica).
    pub config_epoch: u64,
    /// The sender's replication offset.
    pub offset: u64,
    /// The sender's name.
    pub sender: NodeName,
    /// Slots the sender (or, for a replica, its primary) serves.
    pub myslots: SlotBitmap,
    /// The sender's primary, or `NULL_NAME`.
    pub replicaof: NodeName,
    /// The sender's IP as it announces it; empty when all zero (the receiver
    /// then uses the link's peer address). At most `IP_LEN - 1` bytes.
    pub myip: Vec<u8>,
    /// The sender's secondary client port (TLS when `port` is TCP, or the
    /// reverse).
    pub pport: u16,
    /// The sender's bus port.
    pub cport: u16,
    /// The sender's node flags (`node_flags`).
    pub flags: u16,
    /// The cluster state as the sender sees it: 0 ok, 1 fail.
    pub state: u8,
    /// Message flags (`mflags0` for the first byte).
    pub mflags: [u8; 3],
}

impl Default for Header {
    fn default() -> Self {
        Header {
            port: 0,
            current_epoch: 0,
            config_epoch: 0,
            offset: 0,
            sender: NULL_NAME,
            myslots: SlotBitmap::default(),
            replicaof: NULL_NAME,
            myip: Vec::new(),
            pport: 0,
            cport: 0,
            flags: 0,
            state: 0,
            mflags: [0; 3],
        }
    }
}

/// One gossip section: what the sender knows of another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gossip {
    /// The node's name.
    pub name: NodeName,
    /// When the sender last pinged it (Unix seconds, truncated).
    pub ping_sent: u32,
    /// When the sender last had its PONG (Unix seconds, truncated).
    pub pong_received: u32,
    /// Its IP, without the NUL padding (at most `IP_LEN - 1` bytes).
    pub ip: Vec<u8>,
    /// Its client port.
    pub port: u16,
    /// Its bus port.
    pub cport: u16,
    /// Its flags as the sender sees them.
    pub flags: u16,
    /// Its secondary client port.
    pub pport: u16,
}

/// A ping extension (PING, PONG and MEET carry them after the gossip).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extension {
    /// The sender's announced hostname (no NUL; may be empty).
    Hostname(Vec<u8>),
    /// The sender's announced human-readable node name (no NUL).
    HumanNodename(Vec<u8>),
    /// A node the sender forgot, not to be re-added for `ttl` seconds.
    ForgottenNode {
        /// The forgotten node.
        name: NodeName,
        /// Seconds left before it may be re-added.
        ttl: u64,
    },
    /// The sender's shard id.
    ShardId(NodeName),
    /// A type this codec does not know: kept as its payload, ignored by the
    /// state machine, as Redis ignores it.
    Unknown {
        /// The extension type.
        ext_type: u16,
        /// The payload after the 8-byte extension header, padding included.
        data: Vec<u8>,
    },
}

/// What follows the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG or MEET (`Message::msg_type` tells which).
    Ping {
        /// Gossip sections.
        gossip: Vec<Gossip>,
        /// Ping extensions (sent with `mflags0::EXT_DATA`).
        extensions: Vec<Extension>,
    },
    /// FAIL: `node` is failing.
    Fail {
        /// The failing node.
        node: NodeName,
    },
    /// PUBLISH or PUBLISHSHARD.
    Publish {
        /// The channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
    },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART, and any type at or
    /// above `msg_type::COUNT`: the header says everything.
    Empty,
    /// UPDATE: `node` serves `slots` with `config_epoch`.
    Update {
        /// The config epoch of `node`.
        config_epoch: u64,
        /// The slots' owner.
        node: NodeName,
        /// Its slots.
        slots: SlotBitmap,
    },
    /// MODULE: a module's message (relayed to no module here: densekv has
    /// no modules; decoded so that the length is checked).
    Module {
        /// The sender module's id.
        module_id: u64,
        /// The module's message type.
        module_type: u8,
        /// The payload.
        payload: Vec<u8>,
    },
}

/// One bus message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The header's `type` (`msg_type`).
    pub msg_type: u16,
    /// The header.
    pub header: Header,
    /// What follows the header.
    pub body: Body,
}

/// Why bytes are not a valid message. [`DecodeError::closes_link`] says
/// whether the receiver closes the link or drops just the frame, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The first four bytes are not "RCmb".
    BadSignature,
    /// `totlen` is below the header's size or above the limit given.
    BadLength(u32),
    /// The version is not `PROTO_VER`.
    BadVersion(u16),
    /// The body does not fit `totlen` (gossip count, extension lengths,
    /// PUBLISH lengths ...); the text says what.
    Malformed(&'static str),
}

impl DecodeError {
    /// Whether the receiver must close the link. True for a bad signature or
    /// length: the stream is not a bus stream, or the frame cannot be read.
    /// False for a wrong version or a body that does not fit its totlen:
    /// Redis drops that frame and goes on reading the link, which is still
    /// in step since the frame was whole.
    pub fn closes_link(&self) -> bool {
        matches!(self, DecodeError::BadSignature | DecodeError::BadLength(_))
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::BadSignature => f.write_str("bad message signature on the cluster bus"),
            DecodeError::BadLength(n) => write!(f, "bad message length {n} on the cluster bus"),
            DecodeError::BadVersion(v) => write!(f, "cluster bus protocol version {v}, not {PROTO_VER}"),
            DecodeError::Malformed(what) => write!(f, "malformed cluster bus message: {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs read bit by bit, to check `ranges` against.
    fn ranges_bit_by_bit(m: &SlotBitmap) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for s in m.iter() {
            match out.last_mut() {
                Some((_, end)) if *end + 1 == s => *end = s,
                _ => out.push((s, s)),
            }
        }
        out
    }

    #[test]
    fn ranges_match_the_bits() {
        let mut maps = vec![SlotBitmap::default()];
        let mut full = SlotBitmap::default();
        (0..SLOTS as u16).for_each(|s| full.set(s));
        maps.push(full);
        for (a, b) in [(0, 0), (16383, 16383), (63, 64), (0, 8191), (8192, 16383), (100, 5000), (64, 127)] {
            let mut m = SlotBitmap::default();
            (a..=b).for_each(|s| m.set(s));
            maps.push(m);
        }
        // Pseudo-random maps of every density.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for density in [1u64, 8, 32, 56, 63] {
            let mut m = SlotBitmap::default();
            for s in 0..SLOTS as u16 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 64 < density {
                    m.set(s);
                }
            }
            maps.push(m);
        }
        for m in &maps {
            assert_eq!(m.ranges(), ranges_bit_by_bit(m), "{m:?}");
        }
        assert_eq!(maps[1].ranges(), vec![(0, 16383)]);
        assert_eq!(maps[0].ranges(), vec![]);
    }
}
