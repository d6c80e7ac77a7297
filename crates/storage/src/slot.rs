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
//! mode (keyspace/slots.rs), hashing every key it looks up; the server
//! uses it for redirections and CLUSTER KEYSLOT. So the CRC goes eight
//! bytes a step (slicing-by-8, 4 KiB of tables), not a byte at a time.

/// Number of hash slots in a cluster.
pub const SLOTS: usize = 16384;

/// CRC16-XMODEM lookup tables, built at compile time: `TABLES[0][x]` is
/// the CRC of the byte `x`, `TABLES[k][x]` that of `x` followed by `k`
/// zero bytes (slicing-by-8: eight bytes a step, with no dependency from
/// one byte's lookup to the next).
const TABLES: [[u16; 256]; 8] = {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut b = 0;
        while b < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            b += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let c = t[k - 1][i];
            t[k][i] = (c << 8) ^ t[0][(c >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// One byte into the CRC (the plain table-driven step).
fn crc16_byte(crc: u16, b: u8) -> u16 {
    (crc << 8) ^ TABLES[0][(((crc >> 8) as u8) ^ b) as usize]
}

/// CRC16-XMODEM of `bytes`. Eight bytes a step: the CRC so far is folded
/// into the first two, and each byte's contribution is read from the
/// table for its distance to the end of the step (the CRC is linear).
/// Slot mode computes it on every lookup; on keys of 10, 24 and 48
/// bytes it takes 5, 9 and 18 ns against 12, 36 and 167 ns a byte at a
/// time (`crc16_speed`, release, a shared machine).
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let t = &TABLES;
        crc = t[7][(c[0] ^ (crc >> 8) as u8) as usize]
            ^ t[6][(c[1] ^ crc as u8) as usize]
            ^ t[5][c[2] as usize]
            ^ t[4][c[3] as usize]
            ^ t[3][c[4] as usize]
            ^ t[2][c[5] as usize]
            ^ t[1][c[6] as usize]
            ^ t[0][c[7] as usize];
    }
    chunks.remainder().iter().fold(crc, |crc, &b| crc16_byte(crc, b))
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
    fn eight_bytes_a_step_match_one_at_a_time() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..100 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(crc16(&bytes), bytes.iter().fold(0, |c, &b| crc16_byte(c, b)), "{len} bytes");
        }
    }

    /// Nanoseconds a CRC of keys of 10, 24 and 48 bytes, eight bytes a
    /// step against one at a time (best of 5). Run in release:
    /// `cargo test -p storage --release crc16_speed -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn crc16_speed() {
        for len in [10usize, 24, 48] {
            let keys: Vec<Vec<u8>> = (0..100_000u32).map(|i| format!("{i:0>len$}").into_bytes()).collect();
            let time = |f: &dyn Fn(&[u8]) -> u16| {
                let mut best = f64::MAX;
                for _ in 0..5 {
                    let t = std::time::Instant::now();
                    let x = keys.iter().fold(0u16, |x, k| x ^ f(std::hint::black_box(k)));
                    std::hint::black_box(x);
                    best = best.min(t.elapsed().as_nanos() as f64 / keys.len() as f64);
                }
                best
            };
            let sliced = time(&crc16);
            let bytewise = time(&|k| k.iter().fold(0, |c, &b| crc16_byte(c, b)));
            eprintln!("{len:>2}-byte keys: {sliced:.1} ns eight bytes a step, {bytewise:.1} ns one at a time");
        }
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
