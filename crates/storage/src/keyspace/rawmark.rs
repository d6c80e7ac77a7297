//! The "raw" mark of a string edited in place, which OBJECT ENCODING
//! reports as Redis does: APPEND, SETRANGE, SETBIT and BITFIELD leave Redis
//! a raw string (an sds of its own) whatever its length, where SET of the
//! same bytes makes an embstr. densekv stores both alike, so the editing
//! command marks the key's blob afterwards (`blob::mark_raw`, a flag bit)
//! and OBJECT ENCODING asks. A new value for the key (SET, RESTORE) drops
//! the mark; a new deadline (EXPIRE, PERSIST, GETEX) rewrites the blob but
//! keeps it, since the value is the same one.
//!
//! One concern's methods on `Db`, like the keyspace's other files: it
//! imports only mod.rs (for `Db`), never a sibling.

use super::Db;
use crate::blob;
use crate::segment::addr_of;

impl Db {
    /// Marks the live string at `key` as edited in place. Returns false
    /// when there is no such key or it does not hold bytes.
    pub fn mark_raw(&mut self, key: &[u8], now: i64) -> bool {
        let Some((si, pos)) = self.live(key, now) else { return false };
        let addr = addr_of(self.segs[si].slots[pos]);
        if !blob::is_kind_bytes(self.slab.bytes(addr)) {
            return false;
        }
        self.pre_write_slot(si, pos);
        blob::mark_raw(self.slab.bytes_mut(addr))
    }

    /// True if the string stored at `key` was marked by `mark_raw` since
    /// it was last stored anew. Reads no deadline and touches nothing.
    pub fn marked_raw(&self, key: &[u8]) -> bool {
        let (_, si, pos) = self.find(key);
        pos.is_some_and(|pos| blob::is_marked_raw(self.slab.bytes(addr_of(self.segs[si].slots[pos]))))
    }
}

#[cfg(test)]
mod tests {
    use crate::keyspace::{Db, Ttl};
    use crate::value::Value;

    #[test]
    fn the_mark_lasts_until_the_key_is_stored_anew() {
        let mut db = Db::new();
        db.insert(b"s", Value::string(b"foo"), Ttl::Clear, 0);
        db.insert(b"i", Value::string(b"12"), Ttl::Clear, 0);
        assert!(!db.marked_raw(b"s"));
        assert!(db.mark_raw(b"s", 0));
        assert!(db.marked_raw(b"s"));
        assert_eq!(db.get(b"s", 0).map(|v| v.to_owned()), Some(Value::string(b"foo")));
        assert!(!db.mark_raw(b"i", 0), "an integer is not bytes");
        assert!(!db.mark_raw(b"missing", 0));
        db.insert(b"s", Value::string(b"foo"), Ttl::Keep, 0);
        assert!(!db.marked_raw(b"s"));
    }

    #[test]
    fn a_new_deadline_keeps_the_mark() {
        let mut db = Db::new();
        db.insert(b"s", Value::string(b"foo"), Ttl::Clear, 0);
        assert!(db.mark_raw(b"s", 0));
        assert!(db.set_expire(b"s", Some(100_000), 0));
        assert!(db.marked_raw(b"s"));
        assert_eq!(db.expire_of(b"s", 0), Some(Some(100_000)));
        assert!(db.set_expire(b"s", None, 0));
        assert!(db.marked_raw(b"s"));
        assert_eq!(db.get(b"s", 0).map(|v| v.to_owned()), Some(Value::string(b"foo")));
    }
}
