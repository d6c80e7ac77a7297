//! HyperLogLog in Redis's own string layout, so that a value written by
//! Redis reads here and GET returns the bytes Redis would.
//!
//! ```text
//! +------+---+-------+----------------+----------------------------+
//! | HYLL | E | 0 0 0 | card (8B, LE)  | registers                  |
//! +------+---+-------+----------------+----------------------------+
//!   E = 0 dense: 16384 registers of 6 bits, packed LSB first (12288 B)
//!   E = 1 sparse: run-length opcodes
//!       00xxxxxx           ZERO:  xxxxxx+1 zero registers (1..64)
//!       01xxxxxx yyyyyyyy  XZERO: 14-bit length+1 zero registers (1..16384)
//!       1vvvvvxx           VAL:   xx+1 registers of value vvvvv+1 (1..32)
//!   card: cached cardinality; its top bit set means "stale".
//! ```
//!
//! Elements hash with MurmurHash64A (seed 0xadc83b19): the low 14 bits
//! pick the register, the position of the first set bit in the rest is the
//! value. A sparse HLL turns dense when a value exceeds 32 or when it would
//! grow past `hll-sparse-max-bytes`. The sparse update splits one opcode
//! and then merges equal neighbouring VALs exactly as Redis does, because
//! the resulting bytes are visible to GET. The estimate is Ertl's improved
//! raw estimator, as in Redis 5+.
//!
//! Untrusted bytes (RESTORE, SET) are never indexed blindly: walks stop at
//! the end and report corruption instead of panicking.

/// Register count (2^14).
pub const REGISTERS: usize = 1 << 14;
/// Header size.
pub const HDR: usize = 16;
/// Size of a dense HLL.
pub const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
const P: u32 = 14;
const Q: u32 = 64 - P;
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;

/// The representation is broken (Redis's INVALIDOBJ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// True if `b` is a string Redis accepts as an HLL: magic, a known
/// encoding, and the exact size when dense.
pub fn is_hll(b: &[u8]) -> bool {
    b.len() >= HDR && &b[..4] == b"HYLL" && b[4] <= SPARSE && (b[4] != DENSE || b.len() == DENSE_SIZE)
}

/// An empty HLL: sparse, one XZERO covering every register.
pub fn new_sparse() -> Vec<u8> {
    let mut v = vec![0u8; HDR];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = SPARSE;
    push_xzero(&mut v, REGISTERS);
    v
}

/// The cached cardinality, if still valid.
pub fn cached_card(b: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(b[8..16].try_into().ok()?);
    (b[15] & 0x80 == 0).then_some(card)
}

/// Stores a freshly computed cardinality.
pub fn set_card(b: &mut [u8], card: u64) {
    b[8..16].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality stale.
pub fn invalidate(b: &mut [u8]) {
    b[15] |= 0x80;
}

/// MurmurHash64A, 64-bit little-endian variant.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// (register index, value) for an element.
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let bit = i * 6;
    let (byte, fb) = (bit / 8, bit % 8);
    let lo = regs[byte] >> fb;
    let hi = regs.get(byte + 1).map_or(0, |&b| ((b as u16) << (8 - fb)) as u8);
    (lo | hi) & 63
}

fn dense_set(regs: &mut [u8], i: usize, v: u8) {
    let bit = i * 6;
    let (byte, fb) = (bit / 8, bit % 8);
    regs[byte] &= !(63u8 << fb);
    regs[byte] |= v << fb;
    if let Some(b) = regs.get_mut(byte + 1) {
        let spill = 8 - fb;
        *b &= !((63u16 >> spill) as u8);
        *b |= ((v as u16) >> spill) as u8;
    }
}

fn push_xzero(v: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    v.push(0x40 | (l >> 8) as u8 & 0x3f);
    v.push((l & 0xff) as u8);
}

fn val_op(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len as u8 - 1)
}

/// One sparse opcode at `p`: (registers covered, opcode bytes, value).
fn opcode(b: &[u8], p: usize) -> (usize, usize, u8) {
    let op = b[p];
    match op & 0xc0 {
        0x00 => ((op & 0x3f) as usize + 1, 1, 0),
        0x40 => ((((op & 0x3f) as usize) << 8 | *b.get(p + 1).unwrap_or(&0) as usize) + 1, 2, 0),
        _ => ((op & 3) as usize + 1, 1, ((op >> 2) & 0x1f) + 1),
    }
}

/// Every register as a byte, for both encodings. A sparse run of values
/// past the last register is where Redis's merge and dense conversion stop
/// walking (`lenient`: what follows is ignored, and the HLL is whole if the
/// registers were all covered), while its PFCOUNT counts on and finds it
/// corrupt.
fn registers(b: &[u8], lenient: bool) -> Result<Vec<u8>, Corrupt> {
    let mut out = vec![0u8; REGISTERS];
    if b[4] == DENSE {
        for (i, r) in out.iter_mut().enumerate() {
            *r = dense_get(&b[HDR..], i);
        }
        return Ok(out);
    }
    let (mut p, mut idx) = (HDR, 0usize);
    while p < b.len() {
        let (span, oplen, val) = opcode(b, p);
        if val > 0 {
            if idx + span > REGISTERS {
                if lenient {
                    break;
                }
                return Err(Corrupt);
            }
            out[idx..idx + span].fill(val);
        }
        idx += span;
        p += oplen;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(out)
}

/// Raises each of `max`'s registers to `b`'s (PFMERGE, multi-key PFCOUNT).
pub fn merge_into(max: &mut [u8], b: &[u8]) -> Result<(), Corrupt> {
    for (m, r) in max.iter_mut().zip(registers(b, true)?) {
        *m = (*m).max(r);
    }
    Ok(())
}

/// The union of several HLLs (multi-key PFCOUNT, PFMERGE): the
/// register-wise maximum, and whether any input was dense (Redis stores a
/// merge dense then).
#[derive(Debug, Clone)]
pub struct Union {
    max: Vec<u8>,
    dense: bool,
}

impl Default for Union {
    fn default() -> Self {
        Union { max: vec![0; REGISTERS], dense: false }
    }
}

impl Union {
    /// Adds the HLL `b` (checked with `is_hll`) to the union.
    pub fn add(&mut self, b: &[u8]) -> Result<(), Corrupt> {
        self.dense |= b[4] == DENSE;
        merge_into(&mut self.max, b)
    }

    /// The union's cardinality estimate.
    pub fn estimate(&self) -> u64 {
        estimate(&self.max)
    }

    /// PFMERGE's result: `dest` (a new sparse HLL when None) raised to the
    /// union's registers, dense if any input was, cached cardinality stale.
    pub fn store_into(&self, dest: Option<Vec<u8>>, sparse_max: usize) -> Result<Vec<u8>, Corrupt> {
        let mut h = dest.unwrap_or_else(new_sparse);
        if self.dense {
            to_dense(&mut h)?;
        }
        for (i, &v) in self.max.iter().enumerate() {
            if v != 0 {
                set_register(&mut h, i, v, sparse_max)?;
            }
        }
        invalidate(&mut h);
        Ok(h)
    }
}

/// Turns a sparse HLL dense (no-op when dense already); the header,
/// cached cardinality included, is kept.
pub fn to_dense(b: &mut Vec<u8>) -> Result<(), Corrupt> {
    if b[4] == DENSE {
        return Ok(());
    }
    let regs = registers(b, true)?;
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&b[..HDR]);
    d[4] = DENSE;
    for (i, &r) in regs.iter().enumerate() {
        if r != 0 {
            dense_set(&mut d[HDR..], i, r);
        }
    }
    *b = d;
    Ok(())
}

/// Raises register `index` to `count`. Returns whether it changed; may turn
/// the HLL dense (value over 32, or size over `sparse_max`).
pub fn set_register(b: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, Corrupt> {
    if b[4] == DENSE {
        if count > dense_get(&b[HDR..], index) {
            dense_set(&mut b[HDR..], index, count);
            return Ok(true);
        }
        return Ok(false);
    }
    if count > VAL_MAX_VALUE {
        return promote(b, index, count);
    }
    // Find the opcode covering `index`.
    let (mut p, mut first, mut span, mut oplen, mut val) = (HDR, 0usize, 0usize, 1usize, 0u8);
    let mut prev = None;
    while p < b.len() {
        (span, oplen, val) = opcode(b, p);
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p + oplen > b.len() {
        return Err(Corrupt);
    }
    let is_val = b[p] & 0x80 != 0;
    let in_place = if is_val {
        if val >= count {
            return Ok(false);
        }
        span == 1
    } else {
        oplen == 1 && span == 1
    };
    if in_place {
        b[p] = val_op(count, 1);
    } else {
        // Split into up to three opcodes: left run, our register, right run.
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        let run = |seq: &mut Vec<u8>, len: usize| {
            if is_val {
                seq.push(val_op(val, len));
            } else if len > ZERO_MAX_LEN {
                push_xzero(seq, len);
            } else {
                seq.push((len - 1) as u8);
            }
        };
        if index != first {
            run(&mut seq, index - first);
        }
        seq.push(val_op(count, 1));
        if index != last {
            run(&mut seq, last - index);
        }
        if seq.len() > oplen && b.len() + seq.len() - oplen > sparse_max {
            return promote(b, index, count);
        }
        b.splice(p..p + oplen, seq);
    }
    // Merge equal adjacent VALs, scanning up to five opcodes from `prev`.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < b.len() && scan > 0 {
        scan -= 1;
        match b[p] & 0xc0 {
            0x40 => {
                p += 2;
                continue;
            }
            0x00 => {
                p += 1;
                continue;
            }
            _ => {}
        }
        if p + 1 < b.len() && b[p + 1] & 0x80 != 0 {
            let (l1, _, v1) = opcode(b, p);
            let (l2, _, v2) = opcode(b, p + 1);
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                b[p + 1] = val_op(v1, l1 + l2);
                b.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate(b);
    Ok(true)
}

fn promote(b: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense(b)?;
    dense_set(&mut b[HDR..], index, count);
    Ok(true)
}

/// Adds an element. Returns whether a register changed.
pub fn add(b: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(ele);
    set_register(b, index, count, sparse_max)
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate of registers given one byte each.
pub fn estimate(regs: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[(r & 63) as usize] += 1;
    }
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histo[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    (0.721_347_520_444_481_7 * m * m / z).round() as u64
}

/// The cardinality of an HLL, recomputed from its registers.
pub fn count(b: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&registers(b, false)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_layout_matches_redis() {
        let h = new_sparse();
        assert_eq!(h, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert!(is_hll(&h));
        assert_eq!(count(&h), Ok(0));
    }

    #[test]
    fn murmur_of_nothing_is_zero() {
        // With seed 0 and no input every mixing step keeps zero; the byte
        // layout against Redis itself is checked by the integration tests.
        assert_eq!(murmur64a(b"", 0), 0);
        assert_ne!(murmur64a(b"a", 0xadc8_3b19), murmur64a(b"b", 0xadc8_3b19));
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut s = new_sparse();
        let mut d = new_sparse();
        to_dense(&mut d).unwrap();
        for i in 0..2000u32 {
            let e = i.to_string();
            assert_eq!(add(&mut s, e.as_bytes(), 1 << 20).unwrap(), add(&mut d, e.as_bytes(), 1 << 20).unwrap());
        }
        assert_eq!(s[4], SPARSE);
        assert_eq!(registers(&s, false).unwrap(), registers(&d, false).unwrap());
        let c = count(&s).unwrap();
        assert!((1960..=2040).contains(&c), "{c}");
        let mut t = s.clone();
        to_dense(&mut t).unwrap();
        assert_eq!(&t[HDR..], &d[HDR..]);
    }

    #[test]
    fn corrupt_sparse_is_reported() {
        let mut h = new_sparse();
        h.push(0x00); // one register too many
        assert_eq!(count(&h), Err(Corrupt));
        let mut h = new_sparse();
        h.truncate(HDR + 1);
        assert!(count(&h).is_err());
        assert!(add(&mut h, b"x", 3000).is_err() || count(&h).is_err());
    }
}
