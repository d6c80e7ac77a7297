//! What eviction under maxmemory ranks keys by, and the pool of the best
//! candidates seen across samples (`keyspace::Db::sample` takes the
//! samples). Kept apart from the keyspace because the pool outlives one
//! sample and spans databases: the server holds it.

/// How eviction ranks keys: the higher the score, the sooner a key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// Seconds since the last access (the access field holds an LRU clock).
    Lru,
    /// 255 minus the decayed LFU counter.
    Lfu,
    /// The nearer the deadline, the higher.
    Ttl,
    /// Every key scores 0.
    Random,
}

/// The best eviction candidates seen so far, across samples and databases:
/// at most `EvictionPool::SIZE`, by ascending score. Entries name keys,
/// not slots, so a key deleted or changed since it was sampled is found
/// out when it is looked up again.
#[derive(Debug, Default)]
pub struct EvictionPool {
    entries: Vec<(u64, usize, Box<[u8]>)>,
}

impl EvictionPool {
    /// Candidates kept.
    pub const SIZE: usize = 16;

    /// Offers `key` of database `db` with `score`; kept if the pool has
    /// room or it beats the worst entry. A key already there takes the
    /// new score.
    pub fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if let Some(i) = self.entries.iter().position(|(_, d, k)| *d == db && **k == *key) {
            self.entries.remove(i);
        } else if self.entries.len() == Self::SIZE && score <= self.entries[0].0 {
            return;
        }
        let at = self.entries.partition_point(|e| e.0 <= score);
        self.entries.insert(at, (score, db, key.into()));
        if self.entries.len() > Self::SIZE {
            self.entries.remove(0);
        }
    }

    /// Takes the best candidate out: (database, key).
    pub fn pop_best(&mut self) -> Option<(usize, Box<[u8]>)> {
        self.entries.pop().map(|(_, db, k)| (db, k))
    }

    /// Forgets every candidate (the policy changed, databases were flushed).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Number of candidates held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no candidate is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
