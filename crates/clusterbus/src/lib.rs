//! The Redis Cluster bus message format (Redis 7's protocol version 1), as a
//! codec with no server state: the peer of `resp` for the bus port.
//!
//! Every message starts with the same 2,256-byte header; what follows it
//! depends on the type. All integers are big-endian on the wire.
//!
//! This file declares the message types the server's cluster state machine
//! works with. Nothing here knows about nodes, links or time: decoding takes
//! the bytes of one whole frame and checks every length before reading.

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

/// Why bytes are not a valid message. The receiver closes that link.
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

/// The length of the frame that `prefix` starts: None until 8 bytes are
/// there, then `totlen`, checked against the signature, the header's size
/// and `max_len`.
pub fn frame_len(prefix: &[u8], max_len: usize) -> Result<Option<usize>, DecodeError> {
    let _ = (prefix, max_len);
    unimplemented!("bus codec: frame_len")
}

/// Decodes one whole frame (exactly `totlen` bytes).
pub fn decode(frame: &[u8]) -> Result<Message, DecodeError> {
    let _ = frame;
    unimplemented!("bus codec: decode")
}

/// Appends `msg`'s bytes to `out`, with `totlen`, `count`, `extensions` and
/// `mflags0::EXT_DATA` derived from the message.
pub fn encode(msg: &Message, out: &mut Vec<u8>) {
    let _ = (msg, out);
    unimplemented!("bus codec: encode")
}
