//! Finding a command by the name a request gives, in any case: the index
//! of the command table's names (`command::Commands` keeps its specs in
//! the same places) and the `SpecAt` a lookup returns. Apart from the
//! table so that an I/O thread can hold a copy and look each request's
//! command up as it parses it: the executor then runs it from that place
//! without hashing its name again.

/// Where a command is in the table its `Names` index (`Commands::at`
/// gives the spec back). Good for the table that made it: the server's
/// table does not change once it runs (renames are made before it is
/// shared, and before I/O threads copy its names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecAt(u16);

impl SpecAt {
    /// The index in the table's specs.
    #[inline]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// The names of a command table, found from a request's raw first argument
/// with no copy, lowercasing or UTF-8 check. A name of up to 24 bytes is
/// read as three words; the index is open addressing over a hash of those
/// words with ASCII case folded (each byte's 0x20 bit set, which maps A-Z
/// to a-z, so names differing only in case hash alike); each name keeps
/// its lowercase words and the 0x20 bits of its letters, and a request's
/// name matches when its words, with those bits set, equal the name's
/// (only an uppercase letter differs from its lowercase in that bit
/// alone). Longer names (only a rename-command can make one) compare byte
/// by byte.
#[derive(Clone, Debug, Default)]
pub struct Names {
    keys: Vec<NameKey>,
    /// 1 + an index into `keys`, 0 where empty; a power of two, at most
    /// half full.
    slots: Vec<u16>,
}

/// What finding a command by name compares.
#[derive(Clone, Debug)]
struct NameKey {
    /// As registered or renamed to.
    name: String,
    /// The name's words, lowercase.
    lower: NameWords,
    /// The 0x20 bits of its letters.
    letters: NameWords,
}

/// A name's first 24 bytes as little-endian words, zero past its end.
#[derive(Clone, Copy, Debug)]
struct NameWords([u64; 3]);

/// Each byte's 0x20 bit.
const CASE_BITS: u64 = 0x2020_2020_2020_2020;

impl NameWords {
    #[inline]
    fn of(name: &[u8]) -> NameWords {
        let mut w = [0u64; 3];
        for (i, &b) in name.iter().take(24).enumerate() {
            w[i / 8] |= u64::from(b) << (8 * (i % 8));
        }
        NameWords(w)
    }

    /// Where a name of `len` bytes starts its probe in `slots` slots: a
    /// hash that ignores ASCII case (FxHash's step over each word with its
    /// 0x20 bits set), its top bits (a multiplicative hash's low bits
    /// depend on its input's low bits only).
    #[inline]
    fn slot(&self, len: usize, slots: usize) -> usize {
        let h = self.0.iter().fold(len as u64, |h, &w| (h.rotate_left(5) ^ (w | CASE_BITS)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95));
        (h >> (64 - slots.trailing_zeros())) as usize
    }
}

impl NameKey {
    fn new(name: String) -> NameKey {
        let lower = NameWords::of(name.to_ascii_lowercase().as_bytes());
        let letters = NameWords(lower.0.map(|w| {
            let bytes = w.to_le_bytes().map(|b| if b.is_ascii_lowercase() { 0x20 } else { 0 });
            u64::from_le_bytes(bytes)
        }));
        NameKey { name, lower, letters }
    }

    #[inline]
    fn is(&self, name: &[u8], words: &NameWords) -> bool {
        self.name.len() == name.len()
            && (0..3).all(|k| words.0[k] | self.letters.0[k] == self.lower.0[k])
            && (name.len() <= 24 || self.name.as_bytes().eq_ignore_ascii_case(name))
    }
}

impl Names {
    /// Where the command named `name` (any case) is.
    #[inline]
    pub fn find_at(&self, name: &[u8]) -> Option<SpecAt> {
        if self.slots.is_empty() {
            return None;
        }
        let words = NameWords::of(name);
        let mask = self.slots.len() - 1;
        let mut i = words.slot(name.len(), self.slots.len());
        loop {
            let e = self.slots[i] as usize;
            if e == 0 {
                return None;
            }
            if self.keys[e - 1].is(name, &words) {
                return Some(SpecAt((e - 1) as u16));
            }
            i = (i + 1) & mask;
        }
    }

    /// Every name, in the order of their places.
    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.keys.iter().map(|k| &k.name)
    }

    /// Adds `name` at the next place (the caller makes sure no name equal
    /// to it in any case is there).
    pub fn push(&mut self, name: String) {
        assert!(self.keys.len() + 1 < u16::MAX as usize, "command table too large");
        self.keys.push(NameKey::new(name));
        if self.keys.len() * 2 > self.slots.len() {
            self.reindex();
        } else {
            let k = self.keys.len() - 1;
            self.place(k);
        }
    }

    /// Takes out the name at `i`; the last one takes its place (as
    /// `Vec::swap_remove` moves the table's specs).
    pub fn swap_remove(&mut self, i: usize) {
        self.keys.swap_remove(i);
        self.reindex();
    }

    fn reindex(&mut self) {
        let size = (self.keys.len() * 2).next_power_of_two().max(16);
        self.slots = vec![0; size];
        for k in 0..self.keys.len() {
            self.place(k);
        }
    }

    fn place(&mut self, k: usize) {
        let size = self.slots.len();
        let name = &self.keys[k].name;
        let mut i = NameWords::of(name.as_bytes()).slot(name.len(), size);
        while self.slots[i] != 0 {
            i = (i + 1) & (size - 1);
        }
        self.slots[i] = k as u16 + 1;
    }
}
