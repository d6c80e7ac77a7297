//! DEBUG DIGEST and DEBUG DIGEST-VALUE: a 20-byte fingerprint of the
//! dataset (or of single values), equal on two servers that hold the same
//! data whatever the encodings, so tests can check that a dataset survived
//! a reload, a restart or replication.
//!
//! Two ways of folding a string `s` into a digest `d`, both SHA1-based:
//! - `xor_in`: `d ^= SHA1(s)`, which is commutative, for what has no order
//!   (the keys of a database, a set's members, a hash's fields, a sorted
//!   set's members, which are ordered by score anyway);
//! - `mix_in`: `d = SHA1(d ^ SHA1(s))`, which depends on order, for what
//!   has one (a list's elements, a stream's entries, the parts of one
//!   key-value pair).
//!
//! The fold follows Redis's DEBUG DIGEST step for step (type tag, value,
//! an "has a TTL" marker that ignores the deadline itself, the database
//! number mixed before its keys), so a digest taken on Redis equals ours
//! for the same data. Sorted-set scores are written as Redis's shortest
//! round-trip form (`%.17g`-like), the one its replies use. Logically
//! expired keys and due hash fields are included: the digest is of what
//! is stored, not of what a read would see.

use sha1_smol::Sha1;
use storage::{Db, ValueRef};

/// A digest: 20 bytes, shown as 40 hex digits.
pub type Digest = [u8; 20];

fn sha1(data: &[u8]) -> Digest {
    Sha1::from(data).digest().bytes()
}

/// `d ^= SHA1(data)`: the order of calls does not matter.
fn xor_in(d: &mut Digest, data: &[u8]) {
    for (a, b) in d.iter_mut().zip(sha1(data)) {
        *a ^= b;
    }
}

/// `d = SHA1(d ^ SHA1(data))`: the order of calls matters.
fn mix_in(d: &mut Digest, data: &[u8]) {
    xor_in(d, data);
    *d = sha1(d);
}

/// Redis's type numbers (OBJ_STRING ...), mixed in first so that a list
/// and a set of the same elements differ.
fn type_tag(v: &ValueRef<'_>) -> u32 {
    match v {
        ValueRef::Str(_) => 0,
        ValueRef::List(_) => 1,
        ValueRef::Set(_) => 2,
        ValueRef::ZSet(_) => 3,
        ValueRef::Hash(_) => 4,
        ValueRef::Stream(_) => 6,
    }
}

/// Folds one value, and whether its key has a deadline, into `d`.
pub fn fold_value(d: &mut Digest, v: ValueRef<'_>, has_deadline: bool) {
    mix_in(d, &type_tag(&v).to_be_bytes());
    match v {
        ValueRef::Str(s) => mix_in(d, &s.to_vec()),
        ValueRef::List(l) => l.iter().for_each(|e| mix_in(d, &e.to_vec())),
        ValueRef::Set(s) => s.iter().for_each(|m| xor_in(d, &m.to_vec())),
        ValueRef::ZSet(z) => {
            for (m, score) in z.iter() {
                let mut e = Digest::default();
                mix_in(&mut e, m);
                mix_in(&mut e, resp::num::format_f64_g17(score).as_bytes());
                xor_in(d, &e);
            }
        }
        ValueRef::Hash(h) => {
            // i64::MIN as "now": every stored field, due or not.
            for (f, val) in h.iter(i64::MIN) {
                let mut e = Digest::default();
                mix_in(&mut e, f);
                mix_in(&mut e, &val.to_vec());
                if h.expire_of(f, i64::MIN).flatten().is_some() {
                    xor_in(&mut e, b"!!hexpire!!");
                }
                xor_in(d, &e);
            }
        }
        ValueRef::Stream(s) => {
            use storage::types::stream::StreamId;
            let all = s.range(StreamId { ms: 0, seq: 0 }, StreamId { ms: u64::MAX, seq: u64::MAX }, false, usize::MAX);
            for entry in all {
                mix_in(d, format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes());
                entry.fields.iter().for_each(|x| mix_in(d, x));
            }
        }
    }
    if has_deadline {
        xor_in(d, b"!!expire!!");
    }
}

/// The digest of every database: all zeros when they are all empty.
pub fn dataset(dbs: &[Db]) -> Digest {
    let mut out = Digest::default();
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        // The same keys in another database give another digest.
        mix_in(&mut out, &(i as u32).to_be_bytes());
        db.for_each(|k, v, deadline| {
            let mut kd = Digest::default();
            mix_in(&mut kd, k);
            fold_value(&mut kd, v, deadline.is_some());
            xor_in(&mut out, &kd);
        });
    }
    out
}

/// The digest of one value alone (DEBUG DIGEST-VALUE).
pub fn value(v: ValueRef<'_>, has_deadline: bool) -> Digest {
    let mut d = Digest::default();
    fold_value(&mut d, v, has_deadline);
    d
}

/// 40 lowercase hex digits.
pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::Ttl;
    use storage::Value;

    #[test]
    fn empty_is_zero() {
        assert_eq!(hex(&dataset(&[Db::new(), Db::new()])), "0".repeat(40));
    }

    #[test]
    fn key_order_does_not_matter_but_db_and_ttl_do() {
        let (mut a, mut b) = (Db::new(), Db::new());
        for k in ["x", "y", "z"] {
            a.insert(k.as_bytes(), Value::string(k.as_bytes()), Ttl::Clear, 0);
        }
        for k in ["z", "x", "y"] {
            b.insert(k.as_bytes(), Value::string(k.as_bytes()), Ttl::Clear, 0);
        }
        let da = dataset(std::slice::from_ref(&a));
        assert_eq!(da, dataset(std::slice::from_ref(&b)));
        assert_ne!(da, [0; 20]);
        assert_ne!(da, dataset(&[Db::new(), a]));
        b.set_expire(b"x", Some(1 << 40), 0);
        assert_ne!(da, dataset(&[b]));
    }
}
