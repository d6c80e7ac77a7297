//! What a key holds: an owned `Value` to insert, and borrowed views of a
//! stored one (`ValueRef` to read, `ValueMut` to change a collection in place).
//!
//! Strings are handed out as `StrRef`: either an integer (when the stored
//! string is the canonical decimal form of an i64, which is how it is kept)
//! or raw bytes. The keyspace is free to store either form however it likes.
//! `StrRef` and the integer rules live in `strref`, below the collection
//! types, because encodings and types use them and this module holds the
//! types (`Value::Hash` etc.): it sits above them.
//!
//! Collections (HASH, LIST, SET, ZSET, STREAM) are owned objects: `Value::Hash`
//! etc. carry a boxed collection into `Db::insert` and out of `Db::remove`;
//! the keyspace keeps it in its object table and lends it as
//! `ValueRef::Hash` / `ValueMut::Hash` etc.

use crate::strref::{parse_canonical_i64, StrRef};
use crate::types::hash::Hash;
use crate::types::list::List;
use crate::types::set::Set;
use crate::types::stream::Stream;
use crate::types::zset::ZSet;

/// Redis's type names, as TYPE replies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// "string"
    Str,
    /// "hash"
    Hash,
    /// "zset"
    ZSet,
    /// "list"
    List,
    /// "set"
    Set,
    /// "stream"
    Stream,
}

impl Kind {
    /// The name TYPE replies.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Str => "string",
            Kind::Hash => "hash",
            Kind::ZSet => "zset",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::Stream => "stream",
        }
    }
}

/// An owned value, as passed to `Db::insert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string stored as an integer (its canonical decimal form).
    Int(i64),
    /// A string of arbitrary bytes.
    Bytes(Vec<u8>),
    /// A HASH.
    Hash(Box<Hash>),
    /// A sorted set.
    ZSet(Box<ZSet>),
    /// A LIST.
    List(Box<List>),
    /// A SET.
    Set(Box<Set>),
    /// A STREAM.
    Stream(Box<Stream>),
}

impl Value {
    /// A string value from bytes, kept as an integer when the bytes are the
    /// canonical decimal form of one (so `SET k 10` then `INCR k` needs no parse).
    pub fn string(bytes: &[u8]) -> Value {
        match Value::string_ref(bytes) {
            StrRef::Int(v) => Value::Int(v),
            StrRef::Bytes(b) => Value::Bytes(b.to_vec()),
        }
    }

    /// The form `string` gives `bytes`, borrowing them.
    pub fn string_ref(bytes: &[u8]) -> StrRef<'_> {
        if bytes.len() <= 20 {
            if let Some(v) = parse_canonical_i64(bytes) {
                return StrRef::Int(v);
            }
        }
        StrRef::Bytes(bytes)
    }

    /// A borrowed view of this value.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Int(v) => ValueRef::Str(StrRef::Int(*v)),
            Value::Bytes(b) => ValueRef::Str(StrRef::Bytes(b)),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::List(l) => ValueRef::List(l),
            Value::Set(s) => ValueRef::Set(s),
            Value::Stream(s) => ValueRef::Stream(s),
        }
    }
}

/// A borrowed view of a stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// A string.
    Str(StrRef<'a>),
    /// A HASH.
    Hash(&'a Hash),
    /// A sorted set.
    ZSet(&'a ZSet),
    /// A LIST.
    List(&'a List),
    /// A SET.
    Set(&'a Set),
    /// A STREAM.
    Stream(&'a Stream),
}

impl ValueRef<'_> {
    /// The value's type.
    pub fn kind(&self) -> Kind {
        match self {
            ValueRef::Str(_) => Kind::Str,
            ValueRef::Hash(_) => Kind::Hash,
            ValueRef::ZSet(_) => Kind::ZSet,
            ValueRef::List(_) => Kind::List,
            ValueRef::Set(_) => Kind::Set,
            ValueRef::Stream(_) => Kind::Stream,
        }
    }

    /// An owned copy.
    pub fn to_owned(&self) -> Value {
        match self {
            ValueRef::Str(StrRef::Int(v)) => Value::Int(*v),
            ValueRef::Str(StrRef::Bytes(b)) => Value::Bytes(b.to_vec()),
            ValueRef::Hash(h) => Value::Hash(Box::new((*h).clone())),
            ValueRef::ZSet(z) => Value::ZSet(Box::new((*z).clone())),
            ValueRef::List(l) => Value::List(Box::new((*l).clone())),
            ValueRef::Set(s) => Value::Set(Box::new((*s).clone())),
            ValueRef::Stream(s) => Value::Stream(Box::new((*s).clone())),
        }
    }
}

/// A mutable view of a stored value. Strings are replaced with
/// `Db::insert(.., Ttl::Keep)` rather than edited in place; collections
/// are edited through this view (then `Db::sync_object` re-indexes them).
#[derive(Debug, PartialEq, Eq)]
pub enum ValueMut<'a> {
    /// A string (read-only view; write back with insert).
    Str(StrRef<'a>),
    /// A HASH, edited in place.
    Hash(&'a mut Hash),
    /// A sorted set, edited in place.
    ZSet(&'a mut ZSet),
    /// A LIST, edited in place.
    List(&'a mut List),
    /// A SET, edited in place.
    Set(&'a mut Set),
    /// A STREAM, edited in place.
    Stream(&'a mut Stream),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strref::int_len;

    #[test]
    fn canonical_ints() {
        assert_eq!(Value::string(b"10"), Value::Int(10));
        assert_eq!(Value::string(b"-10"), Value::Int(-10));
        assert_eq!(Value::string(b"010"), Value::Bytes(b"010".to_vec()));
        assert_eq!(Value::string(b"-0"), Value::Bytes(b"-0".to_vec()));
        assert_eq!(Value::string(b"0"), Value::Int(0));
        assert_eq!(Value::string(b"9223372036854775808"), Value::Bytes(b"9223372036854775808".to_vec()));
        assert_eq!(int_len(-100), 4);
        assert_eq!(int_len(i64::MIN), 20);
    }
}
