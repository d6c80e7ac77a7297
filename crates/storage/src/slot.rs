//! Redis Cluster's hash slots: which of the 16,384 slots a key belongs to.
//!
//! A key's slot is CRC16 (XMODEM: polynomial 0x1021, initial value 0, no
//! reflection) of the key modulo 16,384, or of its hash tag when it has
//! one: the bytes between the first `{` and the first `}` after it, if
//! there is at least one byte between them. `{}` or an unclosed `{` make
//! no tag, and the whole key is hashed. Clients compute the same function
//! to route a request, so it must match Redis bit for bit (the test pins
//! values Redis answers to CLUSTER KEYSLOT).
//!
//! It lives in storage because the keyspace groups keys by slot in cluster
//! mode; the server uses it for redirections and CLUSTER KEYSLOT.

/// Number of hash slots in a cluster.
pub const SLOTS: usize = 16384;

/// CRC16-XMODEM lookup table, built at compile time.
const CRC16_TABLE: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut b = 0;
        while b < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            b += 1;
        }
        t[i] = crc;
        i += 1;
    }
    t
};

/// CRC16-XMODEM of `bytes`.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| (crc << 8) ^ CRC16_TABLE[(((crc >> 8) as u8) ^ b) as usize])
}

/// The part of `key` that decides its slot: its hash tag, or all of it.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key`, 0..16383.
pub fn key_hash_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The XMODEM check value of the standard test string.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_match_redis() {
        // Values Redis 7 answers to CLUSTER KEYSLOT.
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(key_hash_slot(b"bar"), 5061);
        assert_eq!(key_hash_slot(b"somekey"), 11058);
        assert_eq!(key_hash_slot(b"{user1000}.following"), key_hash_slot(b"user1000"));
        assert_eq!(key_hash_slot(b"foo{}{bar}"), key_hash_slot(b"foo{}{bar}"));
        assert_eq!(key_hash_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), key_hash_slot(b"{bar"));
        assert_eq!(key_hash_slot(b"foo{bar}{zap}"), key_hash_slot(b"bar"));
        assert_eq!(key_hash_slot(b""), 0);
        assert_eq!(key_hash_slot(b"{"), crc16(b"{") & 16383);
    }
}
