//! Frames captured from Redis 7.0.15 (tests/fixtures/README.md says how):
//! each decodes, says what the scenario that produced it says, and encodes
//! back to the same bytes. This is the proof that the layout in lib.rs is
//! Redis's.

use clusterbus::{decode, encode, frame_len, mflags0, msg_type, node_flags, Body, Extension, Message, NULL_NAME};

use crate::common::{fixtures as all, unhex};

/// frame_len on the prefix, decode, encode: the same bytes.
fn round_trip(name: &str, b: &[u8]) -> Message {
    assert_eq!(frame_len(&b[..8], 1 << 20), Ok(Some(b.len())), "{name}: frame_len");
    let m = decode(b).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut out = Vec::new();
    encode(&m, &mut out);
    assert!(out == b, "{name}: re-encoded bytes differ from Redis's, first at {:?}", out.iter().zip(b).position(|(x, y)| x != y));
    assert_eq!(m.encoded_len(), b.len());
    m
}

fn is_node_name(n: &[u8; 40]) -> bool {
    n.iter().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

fn ping_body(m: &Message) -> (&Vec<clusterbus::Gossip>, &Vec<Extension>) {
    match &m.body {
        Body::Ping { gossip, extensions } => (gossip, extensions),
        b => panic!("not a ping body: {b:?}"),
    }
}

#[test]
fn every_fixture_re_encodes_byte_for_byte() {
    for (name, b) in all() {
        let m = round_trip(name, b);
        assert!(is_node_name(&m.header.sender), "{name}: sender");
        // What Redis 7.0 sends, whatever the type.
        assert_eq!(&b[2216..2246], &[0; 30], "{name}: notused1");
        if !matches!(m.msg_type, msg_type::PING | msg_type::PONG | msg_type::MEET) {
            assert_eq!(&b[14..16], &[0, 0], "{name}: count of a non-ping type");
            assert_eq!(&b[2214..2216], &[0, 0], "{name}: extensions of a non-ping type");
        }
    }
}

#[test]
fn ping_pong_meet_fixtures_say_what_the_scenario_did() {
    let get = |n: &str| {
        let (name, b) = all().iter().find(|(f, _)| *f == n).unwrap();
        (round_trip(name, b), b.as_slice())
    };
    let hostname = |m: &Message| match ping_body(m).1.as_slice() {
        [Extension::Hostname(h)] => h.clone(),
        e => panic!("expected one hostname extension, got {e:?}"),
    };
    // The payload length after the gossip sections: Redis's padding.
    let ext_len = |m: &Message, b: &[u8]| {
        let at = 2256 + 104 * ping_body(m).0.len();
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    };

    let (m, b) = get("meet");
    assert_eq!(m.msg_type, msg_type::MEET);
    assert_eq!(hostname(&m), b"a.node7");
    assert_eq!(ext_len(&m, b), 16, "7 bytes and the NUL: no padding");
    assert_eq!(m.header.mflags[0], mflags0::EXT_DATA);
    assert_eq!(m.header.flags, node_flags::MASTER | node_flags::MYSELF);
    assert_eq!(m.header.myslots.iter().collect::<Vec<_>>(), (0..=5460).collect::<Vec<_>>());

    let (m, b) = get("ping_gossip_ext");
    assert_eq!(m.msg_type, msg_type::PING);
    assert!(ping_body(&m).0.len() >= 2);
    assert_eq!(hostname(&m), b"a.node7");
    assert_eq!(ext_len(&m, b), 16);
    for g in ping_body(&m).0 {
        assert!(is_node_name(&g.name) && g.name != m.header.sender);
        assert_eq!(g.ip, b"127.0.0.1");
    }

    let (m, b) = get("ping_hostname_18_myip");
    assert_eq!(m.header.myip, b"127.0.0.1");
    assert_eq!(hostname(&m), b"node-b.example.org");
    assert_eq!(ext_len(&m, b), 32, "18 bytes and the NUL, padded to 24");

    let (m, b) = get("pong_hostname_1");
    assert_eq!(m.msg_type, msg_type::PONG);
    assert_eq!(hostname(&m), b"d");
    assert_eq!(ext_len(&m, b), 16, "1 byte and the NUL, padded to 8");
    assert_eq!(m.header.myslots.count(), 0);

    let (m, _) = get("ping_no_ext");
    assert_eq!(m.header.mflags[0] & mflags0::EXT_DATA, 0, "Redis 7.0 sets EXT_DATA only with extensions");
    assert!(ping_body(&m).1.is_empty() && !ping_body(&m).0.is_empty());

    let (m, _) = get("ping_pfail");
    assert!(ping_body(&m).0.iter().any(|g| g.flags & node_flags::PFAIL != 0));

    let (m, _) = get("ping_paused");
    assert_ne!(m.header.mflags[0] & mflags0::PAUSED, 0);

    let (m, _) = get("pong_gossip_ext");
    assert_eq!(m.msg_type, msg_type::PONG);
    assert!(ping_body(&m).0.len() >= 2);

    let (m, _) = get("replica_ping");
    assert_ne!(m.header.flags & node_flags::SLAVE, 0);
    assert!(is_node_name(&m.header.replicaof));
    assert_eq!(hostname(&m), b"d");
}

#[test]
fn other_fixtures_say_what_the_scenario_did() {
    let get = |n: &str| {
        let (name, b) = all().iter().find(|(f, _)| *f == n).unwrap();
        round_trip(name, b)
    };
    let m = get("fail");
    let Body::Fail { node } = m.body else { panic!("{m:?}") };
    assert!(is_node_name(&node) && node != m.header.sender);

    // totlen 2280 = 2256 + 8 + 4 + 12: no padding after the message.
    let m = get("publish");
    assert_eq!(m.msg_type, msg_type::PUBLISH);
    assert_eq!(m.body, Body::Publish { channel: b"news".to_vec(), message: b"hello from B".to_vec() });
    assert_eq!(m.encoded_len(), 2280);
    let m = get("publishshard");
    assert_eq!(m.msg_type, msg_type::PUBLISHSHARD);
    assert_eq!(m.body, Body::Publish { channel: b"ch3".to_vec(), message: b"shard message".to_vec() });

    // CLUSTER FAILOVER on the replica: MFSTART to its primary, then a
    // request flagged FORCEACK, then the votes.
    let m = get("mfstart");
    assert_eq!((m.msg_type, &m.body), (msg_type::MFSTART, &Body::Empty));
    assert_ne!(m.header.replicaof, NULL_NAME);
    let m = get("failover_auth_request");
    assert_eq!((m.msg_type, &m.body), (msg_type::FAILOVER_AUTH_REQUEST, &Body::Empty));
    assert_eq!(m.header.mflags[0], mflags0::FORCEACK);
    let m = get("failover_auth_ack");
    assert_eq!((m.msg_type, &m.body), (msg_type::FAILOVER_AUTH_ACK, &Body::Empty));
    assert_ne!(m.header.flags & node_flags::MASTER, 0);

    // The new primary tells the old one, which still claims the slots, who
    // serves them now.
    let m = get("update");
    let Body::Update { config_epoch, node, slots } = &m.body else { panic!("{m:?}") };
    assert!(is_node_name(node));
    assert_eq!(slots.iter().collect::<Vec<_>>(), (0..=5460).collect::<Vec<_>>());
    assert!(*config_epoch > 0);
}

/// Every frame of a whole capture (`capture.py`'s all.jsonl), when
/// `CLUSTERBUS_CAPTURE` names one: too large to commit, but worth running
/// after a new capture.
#[test]
fn every_frame_of_a_capture_if_given() {
    let Ok(path) = std::env::var("CLUSTERBUS_CAPTURE") else { return };
    let text = std::fs::read_to_string(&path).expect("CLUSTERBUS_CAPTURE");
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        let hex = line.split("\"hex\": \"").nth(1).and_then(|s| s.split('"').next()).expect("a hex field");
        round_trip(&format!("{path} line {}", i + 1), &unhex(hex));
        n += 1;
    }
    eprintln!("{n} frames decoded and re-encoded byte for byte");
    assert!(n > 0);
}
