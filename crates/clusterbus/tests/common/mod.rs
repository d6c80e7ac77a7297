//! What the integration tests share: the captured fixtures, and proptest
//! strategies for messages of every type.
#![allow(dead_code)] // each test file uses part of it

use clusterbus::*;
use proptest::prelude::*;

/// A fixture's bytes (hex, whitespace ignored).
pub fn unhex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).expect("hex digit"))
        .collect()
}

macro_rules! fixture {
    ($name:literal) => {
        ($name, unhex(include_str!(concat!("../fixtures/", $name, ".hex"))))
    };
}

/// Every frame in tests/fixtures, by name (read once per test binary).
pub fn fixtures() -> &'static [(&'static str, Vec<u8>)] {
    static ALL: std::sync::OnceLock<Vec<(&'static str, Vec<u8>)>> = std::sync::OnceLock::new();
    ALL.get_or_init(read_fixtures)
}

fn read_fixtures() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        fixture!("meet"),
        fixture!("ping_gossip_ext"),
        fixture!("ping_hostname_18_myip"),
        fixture!("ping_no_ext"),
        fixture!("ping_pfail"),
        fixture!("ping_paused"),
        fixture!("pong_gossip_ext"),
        fixture!("pong_hostname_1"),
        fixture!("replica_ping"),
        fixture!("fail"),
        fixture!("publish"),
        fixture!("publishshard"),
        fixture!("failover_auth_request"),
        fixture!("failover_auth_ack"),
        fixture!("mfstart"),
        fixture!("update"),
    ]
}

/// What decode gives back for `m` once encoded: `m` with EXT_DATA set when
/// it has extensions (encode sets it, as Redis does).
pub fn as_decoded(m: &Message) -> Message {
    let mut m = m.clone();
    if let Body::Ping { extensions, .. } = &m.body {
        if !extensions.is_empty() {
            m.header.mflags[0] |= mflags0::EXT_DATA;
        }
    }
    m
}

pub fn name() -> impl Strategy<Value = NodeName> {
    prop_oneof![
        Just(NULL_NAME.to_vec()),
        prop::collection::vec(prop::sample::select(b"0123456789abcdef".to_vec()), NAME_LEN),
        prop::collection::vec(any::<u8>(), NAME_LEN),
    ]
    .prop_map(|v: Vec<u8>| v.try_into().unwrap())
}

/// An IP field's text: at most 45 bytes, no NUL.
pub fn ip() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}".prop_map(String::into_bytes),
        prop::collection::vec(1u8..=255, 0..IP_LEN),
    ]
}

pub fn slots() -> impl Strategy<Value = SlotBitmap> {
    prop_oneof![
        Just(SlotBitmap::default()),
        prop::collection::vec(0..SLOTS as u16, 0..64).prop_map(|v| {
            let mut b = SlotBitmap::default();
            v.into_iter().for_each(|s| b.set(s));
            b
        }),
        (0..SLOTS as u16, 0..SLOTS as u16).prop_map(|(a, z)| {
            let mut b = SlotBitmap::default();
            (a.min(z)..=a.max(z)).for_each(|s| b.set(s));
            b
        }),
        prop::collection::vec(any::<u8>(), SLOT_BYTES).prop_map(|v| SlotBitmap(v.into_boxed_slice().try_into().unwrap())),
    ]
}

pub fn header() -> impl Strategy<Value = Header> {
    (
        (any::<u16>(), any::<u64>(), any::<u64>(), any::<u64>(), name(), slots(), name()),
        (ip(), any::<u16>(), any::<u16>(), any::<u16>(), any::<u8>(), any::<[u8; 3]>()),
    )
        .prop_map(
            |((port, current_epoch, config_epoch, offset, sender, myslots, replicaof), (myip, pport, cport, flags, state, mflags))| {
                Header { port, current_epoch, config_epoch, offset, sender, myslots, replicaof, myip, pport, cport, flags, state, mflags }
            },
        )
}

pub fn gossip() -> impl Strategy<Value = Gossip> {
    (name(), any::<u32>(), any::<u32>(), ip(), any::<u16>(), any::<u16>(), any::<u16>(), any::<u16>()).prop_map(
        |(name, ping_sent, pong_received, ip, port, cport, flags, pport)| Gossip {
            name,
            ping_sent,
            pong_received,
            ip,
            port,
            cport,
            flags,
            pport,
        },
    )
}

/// Text with no NUL, of lengths around the 8-byte boundaries.
fn text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(1u8..=255, 0..40)
}

pub fn extension() -> impl Strategy<Value = Extension> {
    prop_oneof![
        text().prop_map(Extension::Hostname),
        text().prop_map(Extension::HumanNodename),
        (name(), any::<u64>()).prop_map(|(name, ttl)| Extension::ForgottenNode { name, ttl }),
        name().prop_map(Extension::ShardId),
        (ext_type::SHARDID + 1..=u16::MAX, 0..6usize, any::<u8>())
            .prop_map(|(ext_type, n, fill)| Extension::Unknown { ext_type, data: vec![fill; n * 8] }),
    ]
}

pub fn ping_body() -> impl Strategy<Value = Body> {
    (prop::collection::vec(gossip(), 0..20), prop::collection::vec(extension(), 0..6))
        .prop_map(|(gossip, extensions)| Body::Ping { gossip, extensions })
}

/// A message of any type, known or not, with the body that type carries.
pub fn message() -> impl Strategy<Value = Message> {
    let typed = prop_oneof![
        (prop::sample::select(vec![msg_type::PING, msg_type::PONG, msg_type::MEET]), ping_body()),
        name().prop_map(|node| (msg_type::FAIL, Body::Fail { node })),
        (
            prop::sample::select(vec![msg_type::PUBLISH, msg_type::PUBLISHSHARD]),
            prop::collection::vec(any::<u8>(), 0..64),
            prop::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(t, channel, message)| (t, Body::Publish { channel, message })),
        prop::sample::select(vec![msg_type::FAILOVER_AUTH_REQUEST, msg_type::FAILOVER_AUTH_ACK, msg_type::MFSTART])
            .prop_map(|t| (t, Body::Empty)),
        (any::<u64>(), name(), slots())
            .prop_map(|(config_epoch, node, slots)| (msg_type::UPDATE, Body::Update { config_epoch, node, slots })),
        (any::<u64>(), any::<u8>(), prop::collection::vec(any::<u8>(), 0..100)).prop_map(|(module_id, module_type, payload)| (
            msg_type::MODULE,
            Body::Module { module_id, module_type, payload }
        )),
        (msg_type::COUNT..=u16::MAX).prop_map(|t| (t, Body::Empty)),
    ];
    (typed, header()).prop_map(|((msg_type, body), header)| Message { msg_type, header, body })
}
