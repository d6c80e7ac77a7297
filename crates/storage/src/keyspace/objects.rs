//! What the object table holds: `Obj`, one collection (HASH, LIST, SET,
//! ZSET, STREAM) of a `Db`, with the per-type dispatch the keyspace needs.
//!
//! Collections live in an object table beside the slab: the key's blob
//! holds the 4-byte index of the object's slot (`Db::objs`, a
//! `Vec<Option<Obj>>`, 24 bytes a slot, freed slots reused through the free
//! list `Db::free_objs`). Compared with a pointer to a `Box<Hash>` this is
//! safe Rust and saves the box's 32-byte jemalloc block; it costs the
//! table's growth slack (up to 2x of 24 bytes a slot right after it
//! doubles) and a free-list entry per hole. The table's slots are managed
//! by the core (mod.rs: `obj`, `put_obj`, `take_obj`).
//!
//! This file imports nothing from the keyspace: `Obj` is the type of one of
//! `Db`'s fields, so mod.rs imports it, and a file mod.rs imports must not
//! import mod.rs back.

use crate::encoding::inline;
use crate::slab::jemalloc_size;
use crate::types::hash::Hash;
use crate::types::list::List;
use crate::types::set::Set;
use crate::types::stream::Stream;
use crate::types::zset::ZSet;
use crate::value::{Kind, Value, ValueMut, ValueRef};

/// A collection in the object table. Hashes sit in the slot itself; other
/// types are boxed so that a slot stays 24 bytes (`Option<Obj>` uses the
/// niche of the hash's buffer; a `Set` alone is 32 bytes); a boxed
/// collection pays one more jemalloc block. A new type adds a variant
/// here and an arm in each method below; hashes, sets and sorted sets have
/// field or member TTLs.
#[derive(Debug, Clone)]
pub(super) enum Obj {
    Hash(Hash),
    List(Box<List>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

const _: () = assert!(size_of::<Option<Obj>>() == 24);

impl Obj {
    /// The collection an owned value carries; None for a string.
    pub(super) fn from_value(v: Value) -> Option<Obj> {
        match v {
            Value::Hash(h) => Some(Obj::Hash(*h)),
            Value::List(l) => Some(Obj::List(l)),
            Value::Set(s) => Some(Obj::Set(s)),
            Value::ZSet(z) => Some(Obj::ZSet(z)),
            Value::Stream(s) => Some(Obj::Stream(s)),
            Value::Int(_) | Value::Bytes(_) => None,
        }
    }

    /// The collection a key's blob keeps inline (`encoding::inline`).
    pub(super) fn from_inline(bytes: &[u8]) -> Obj {
        if inline::is_zset(bytes[0]) {
            Obj::ZSet(Box::new(ZSet::from_inline(bytes)))
        } else {
            Obj::Hash(Hash::from_inline(bytes))
        }
    }

    pub(super) fn into_value(self) -> Value {
        match self {
            Obj::Hash(h) => Value::Hash(Box::new(h)),
            Obj::List(l) => Value::List(l),
            Obj::Set(s) => Value::Set(s),
            Obj::ZSet(z) => Value::ZSet(z),
            Obj::Stream(s) => Value::Stream(s),
        }
    }

    pub(super) fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Obj::Hash(h) => ValueRef::Hash(h),
            Obj::List(l) => ValueRef::List(l),
            Obj::Set(s) => ValueRef::Set(s),
            Obj::ZSet(z) => ValueRef::ZSet(z),
            Obj::Stream(s) => ValueRef::Stream(s),
        }
    }

    pub(super) fn as_mut(&mut self) -> ValueMut<'_> {
        match self {
            Obj::Hash(h) => ValueMut::Hash(h),
            Obj::List(l) => ValueMut::List(l),
            Obj::Set(s) => ValueMut::Set(s),
            Obj::ZSet(z) => ValueMut::ZSet(z),
            Obj::Stream(s) => ValueMut::Stream(s),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        match self {
            Obj::Hash(h) => h.is_empty(),
            Obj::List(l) => l.is_empty(),
            Obj::Set(s) => s.is_empty(),
            Obj::ZSet(z) => z.is_empty(),
            // An empty stream is still a key (XADD MAXLEN 0, XDEL of all).
            Obj::Stream(_) => false,
        }
    }

    /// Heap bytes owned, the box of a boxed type included.
    pub(super) fn mem_usage(&self) -> usize {
        match self {
            Obj::Hash(h) => h.mem_usage(),
            Obj::List(l) => jemalloc_size(size_of::<List>()) + l.mem_usage(),
            Obj::Set(s) => jemalloc_size(size_of::<Set>()) + s.mem_usage(),
            Obj::ZSet(z) => jemalloc_size(size_of::<ZSet>()) + z.mem_usage(),
            Obj::Stream(s) => jemalloc_size(size_of::<Stream>()) + s.mem_usage(),
        }
    }

    /// Earliest field or member deadline (hashes, sets and sorted sets
    /// have them).
    pub(super) fn min_deadline(&self) -> Option<i64> {
        match self {
            Obj::Hash(h) => h.min_deadline(),
            Obj::Set(s) => s.min_deadline(),
            Obj::ZSet(z) => z.min_deadline(),
            Obj::List(_) | Obj::Stream(_) => None,
        }
    }

    /// True for the types whose members past their deadline the keyspace
    /// removes as soon as the key is reached (sets and sorted sets; a
    /// hash's commands hide and reclaim expired fields themselves).
    pub(super) fn expires_on_access(&self) -> bool {
        matches!(self, Obj::Set(_) | Obj::ZSet(_))
    }

    /// The collection's type.
    pub(super) fn kind(&self) -> Kind {
        self.as_ref().kind()
    }

    /// Removes up to `max` fields or members whose deadline is before
    /// `now`, calling `f` with each; returns how many.
    pub(super) fn expire_due_with(&mut self, now: i64, max: usize, f: impl FnMut(&[u8])) -> usize {
        match self {
            Obj::Hash(h) => h.expire_due_with(now, max, f),
            Obj::Set(s) => s.expire_due_with(now, max, f),
            Obj::ZSet(z) => z.expire_due_with(now, max, f),
            Obj::List(_) | Obj::Stream(_) => 0,
        }
    }
}

/// Appends `v`'s inline form (`encoding::inline`) to `out` when it is a
/// hash or sorted set small enough to live in its key's blob; false (and
/// nothing appended) otherwise.
pub(super) fn encode_inline(v: &Value, out: &mut Vec<u8>) -> bool {
    match v {
        Value::Hash(h) => h.inline_encode(out),
        Value::ZSet(z) => z.inline_encode(out),
        Value::Int(_) | Value::Bytes(_) | Value::List(_) | Value::Set(_) | Value::Stream(_) => false,
    }
}
