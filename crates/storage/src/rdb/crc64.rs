//! CRC-64 as RDB files and DUMP payloads carry it: the Jones polynomial
//! (0xad93d23594c935a9), reflected, initial value 0, no final xor.
//!
//! Table-driven, one byte per step: payloads are checksummed once per
//! DUMP/RESTORE, so the simple table is fast enough.

/// The reflected form of the Jones polynomial.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

const TABLE: [u64; 256] = make_table();

const fn make_table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// Continues the checksum `crc` over `data` (start with 0).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = TABLE[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        // The check value of CRC-64/Jones as Redis's own self-test states it.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(crc64(0, b"1234"), b"56789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(0, b""), 0);
    }
}
