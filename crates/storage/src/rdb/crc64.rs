//! CRC-64 as RDB files and DUMP payloads carry it: the Jones polynomial
//! (0xad93d23594c935a9), reflected, initial value 0, no final xor.
//!
//! Slicing-by-8: eight tables, eight bytes per step (the register is
//! eight bytes wide, so a step consumes all of it), then one byte per step
//! for the tail. Whole RDB files go through it (SAVE, BGSAVE's writer
//! thread, the load's verification), where one byte per step cost about
//! a second per 300 MB.

/// The reflected form of the Jones polynomial.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

/// `TABLES[0]` is the classic byte table; `TABLES[k][b]` is the register
/// after byte `b` followed by `k` zero bytes.
static TABLES: [[u64; 256]; 8] = make_tables();

const fn make_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// Continues the checksum `crc` over `data` (start with 0).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let t = &TABLES;
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let x = crc ^ u64::from_le_bytes(block.try_into().expect("chunks_exact(8)"));
        crc = t[7][(x & 0xff) as usize]
            ^ t[6][((x >> 8) & 0xff) as usize]
            ^ t[5][((x >> 16) & 0xff) as usize]
            ^ t[4][((x >> 24) & 0xff) as usize]
            ^ t[3][((x >> 32) & 0xff) as usize]
            ^ t[2][((x >> 40) & 0xff) as usize]
            ^ t[1][((x >> 48) & 0xff) as usize]
            ^ t[0][(x >> 56) as usize];
    }
    bytewise(crc, blocks.remainder())
}

/// One byte per step: the reference the sliced loop must agree with.
fn bytewise(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = TABLES[0][((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The checksum of `a` followed by `b`, from `crc64(0, a)`, `crc64(0, b)`
/// and `b`'s length: for a file whose first bytes are settled last (a
/// background save writes the body, then learns the version its header
/// declares). O(log len_b).
pub fn crc64_combine(crc_a: u64, crc_b: u64, len_b: u64) -> u64 {
    // With initial value 0 and no final xor the CRC is linear over GF(2):
    // crc(a || b) = crc(a || zeros(len b)) ^ crc(b), and running the state
    // over n zero bytes is a 64x64 bit matrix raised to the n-th power.
    let mut state = crc_a;
    let mut op = zero_byte_operator();
    let mut n = len_b;
    while n > 0 {
        if n & 1 == 1 {
            state = apply(&op, state);
        }
        n >>= 1;
        if n > 0 {
            op = square(&op);
        }
    }
    state ^ crc_b
}

/// The matrix (column `i` is the image of bit `i`) of one zero byte's step.
fn zero_byte_operator() -> [u64; 64] {
    let mut m = [0u64; 64];
    for (i, col) in m.iter_mut().enumerate() {
        *col = crc64(1 << i, &[0]);
    }
    m
}

fn apply(m: &[u64; 64], mut v: u64) -> u64 {
    let mut out = 0;
    let mut i = 0;
    while v != 0 {
        if v & 1 == 1 {
            out ^= m[i];
        }
        v >>= 1;
        i += 1;
    }
    out
}

fn square(m: &[u64; 64]) -> [u64; 64] {
    let mut out = [0u64; 64];
    for (o, &col) in out.iter_mut().zip(m) {
        *o = apply(m, col);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_matches_one_pass() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for cut in [0, 1, 9, 100, 4095, 5000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(crc64_combine(crc64(0, a), crc64(0, b), b.len() as u64), crc64(0, &data), "cut {cut}");
        }
    }

    #[test]
    fn sliced_matches_bytewise() {
        // Every length 0..=64 at every start offset 0..8, then long runs
        // continued from a nonzero register.
        let data: Vec<u8> = (0..4200u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for start in 0..8 {
            for len in 0..=64 {
                let d = &data[start..start + len];
                assert_eq!(crc64(0, d), bytewise(0, d), "start {start} len {len}");
            }
        }
        for (seed, len) in [(0x1234_5678_9abc_def0u64, 4097), (u64::MAX, 4100), (1, 8)] {
            assert_eq!(crc64(seed, &data[..len]), bytewise(seed, &data[..len]), "len {len}");
        }
    }

    #[test]
    fn check_value() {
        // The check value of CRC-64/Jones as Redis's own self-test states it.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(crc64(0, b"1234"), b"56789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(0, b""), 0);
    }
}
