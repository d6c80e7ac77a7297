//! One typed way for a handler to reach a key.
//!
//! Reads: `ctx.read::<Set>(key)?` is the set at `key`, `None` when absent,
//! `WRONGTYPE` when the key holds another type; `ctx.read_out::<Set>(key)?`
//! also lends the reply buffer, so a reply can be written straight from the
//! stored value; `ctx.read_str(key)?` is the same for strings.
//!
//! Writes go through a guard, so that the epilogue every write shares
//! cannot be forgotten or copied per family:
//!
//! ```ignore
//! let mut w = ctx.write_or_create::<Set>(key, notify::SET, Set::default)?;
//! let (set, out) = w.parts();
//! let added = members.iter().filter(|m| set.insert(m, &cfg)).count();
//! out.int(added as i64);
//! if added > 0 {
//!     w.changed("sadd");
//! }
//! // dropped: object synced; WATCH, blocked clients, dirty, "sadd", and
//! // "del" if the write emptied the key
//! ```
//!
//! When the guard drops it syncs the stored object with the keyspace (its
//! field-expiry index, a small hash lent out of its slot, and its removal
//! once empty: Redis never keeps an empty collection) and, if `changed` or
//! `added` was called, signals the modification (`Ctx::key_modified`) and
//! raises each event given, in order, then `del` when the write emptied the
//! key, as Redis does. A guard whose write changed nothing signals nothing.
//! The sync costs a key lookup, so it is skipped where it cannot matter: a
//! list, set, sorted set or stream that was not created and was only added
//! to (`added`, the push and insert paths).

use std::marker::PhantomData;

use resp::Reply;
use storage::types::hash::Hash;
use storage::types::list::List;
use storage::types::set::Set;
use storage::types::stream::Stream;
use storage::types::zset::ZSet;
use storage::{StrRef, Value, ValueMut, ValueRef};

use crate::command::{CmdError, Ctx};
use crate::notify;

/// A collection type a key can hold (hash, list, set, sorted set, stream).
pub trait Collection: Sized {
    /// The value as this type, if it is one.
    fn of(v: ValueRef<'_>) -> Option<&Self>;
    /// The value as this type, to edit in place, if it is one.
    fn of_mut(v: ValueMut<'_>) -> Option<&mut Self>;
    /// A value to store.
    fn into_value(self) -> Value;
    /// True if every write must be synced with the keyspace, even one that
    /// only added (a hash: small ones are lent out of their slot and
    /// written back, and field TTLs are indexed by the keyspace).
    const ALWAYS_SYNC: bool = false;
}

macro_rules! collection {
    ($t:ty, $variant:ident) => {
        collection!($t, $variant, false);
    };
    ($t:ty, $variant:ident, $always_sync:expr) => {
        impl Collection for $t {
            const ALWAYS_SYNC: bool = $always_sync;

            fn of(v: ValueRef<'_>) -> Option<&Self> {
                match v {
                    ValueRef::$variant(x) => Some(x),
                    _ => None,
                }
            }

            fn of_mut(v: ValueMut<'_>) -> Option<&mut Self> {
                match v {
                    ValueMut::$variant(x) => Some(x),
                    _ => None,
                }
            }

            fn into_value(self) -> Value {
                Value::$variant(Box::new(self))
            }
        }
    };
}

collection!(Hash, Hash, true);
collection!(List, List);
collection!(Set, Set);
collection!(ZSet, ZSet);
collection!(Stream, Stream);

impl<'a> Ctx<'a> {
    /// The `T` at `key` of the selected database: None if absent,
    /// WRONGTYPE if the key holds another type.
    pub fn read<T: Collection>(&mut self, key: &[u8]) -> Result<Option<&T>, CmdError> {
        Ok(self.read_out::<T>(key)?.0)
    }

    /// `read` plus the reply buffer, borrowed together so that a reply can
    /// be written from the stored value.
    pub fn read_out<T: Collection>(&mut self, key: &[u8]) -> Result<(Option<&T>, &mut Reply), CmdError> {
        self.lookup_out(key, true)
    }

    /// Runs `f` with its lookups counted as reads (keyspace hits and
    /// misses, keymiss), for a write command that reads as GET does.
    pub fn counting_reads<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let was = std::mem::replace(&mut self.db().count_reads, true);
        let r = f(self);
        self.db().count_reads = was;
        r
    }

    /// `read_out` of a key this command has read already (it took the
    /// length first, say): not counted again as a keyspace hit or miss.
    pub fn read_again<T: Collection>(&mut self, key: &[u8]) -> Result<(Option<&T>, &mut Reply), CmdError> {
        self.lookup_out(key, false)
    }

    fn lookup_out<T: Collection>(&mut self, key: &[u8], counted: bool) -> Result<(Option<&T>, &mut Reply), CmdError> {
        let now = self.now;
        let db = &mut self.srv.dbs[self.client.db];
        let found = if counted { db.get_read(key, now) } else { db.get(key, now) };
        let v = match found {
            None => None,
            Some(v) => Some(T::of(v).ok_or(CmdError::WrongType)?),
        };
        Ok((v, &mut self.client.reply))
    }

    /// The string at `key` with the reply buffer: None if absent, WRONGTYPE
    /// if the key holds another type.
    pub fn read_str(&mut self, key: &[u8]) -> Result<(Option<StrRef<'_>>, &mut Reply), CmdError> {
        let now = self.now;
        let db = &mut self.srv.dbs[self.client.db];
        let v = match db.get_read(key, now) {
            None => None,
            Some(ValueRef::Str(s)) => Some(s),
            Some(_) => return Err(CmdError::WrongType),
        };
        Ok((v, &mut self.client.reply))
    }

    /// The value at `key` seen through `view`, for a command that accepts
    /// more than one type (SORT reads a list, set or sorted set): None if
    /// absent, WRONGTYPE if `view` refuses the value (returns None).
    pub fn read_with<R>(&mut self, key: &[u8], view: impl FnOnce(ValueRef<'_>) -> Option<R>) -> Result<Option<R>, CmdError> {
        let now = self.now;
        match self.srv.dbs[self.client.db].get_read(key, now) {
            None => Ok(None),
            Some(v) => view(v).map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// The values at many `keys` at once, for a command that combines
    /// thousands of them (ZUNIONSTORE) and holds them all borrowed
    /// together: each is looked up as `read_with` does (expired keys go,
    /// and read None), and WRONGTYPE is returned for the first whose value
    /// `accept` refuses. `accept` may admit only collections (not
    /// strings). Collections in the object table are read in place; a
    /// small one the keyspace keeps inline in its key is decoded into
    /// `held`, which the caller provides so that it outlives the views.
    pub fn read_many<'s>(
        &'s mut self,
        keys: &[Vec<u8>],
        held: &'s mut Vec<Value>,
        accept: impl Fn(&ValueRef<'_>) -> bool,
    ) -> Result<Vec<Option<ValueRef<'s>>>, CmdError> {
        let now = self.now;
        let db = &mut self.srv.dbs[self.client.db];
        // Where each key's view comes from: absent, the object table, or `held`.
        let mut from = Vec::with_capacity(keys.len());
        for k in keys {
            from.push(match db.get_read(k, now) {
                None => None,
                Some(v) if accept(&v) => match db.take_lent() {
                    None => Some(None),
                    Some(v) => {
                        held.push(v);
                        Some(Some(held.len() - 1))
                    }
                },
                Some(_) => return Err(CmdError::WrongType),
            });
        }
        let db = &self.srv.dbs[self.client.db];
        let held = &*held;
        Ok(keys
            .iter()
            .zip(from)
            .map(|(k, from)| match from? {
                None => Some(db.peek_object(k).expect("an object the first pass found")),
                Some(i) => Some(held[i].as_ref()),
            })
            .collect())
    }

    /// True if `key` exists and holds a `T`, false if absent; WRONGTYPE if
    /// it holds another type.
    pub fn holds<T: Collection>(&mut self, key: &[u8]) -> Result<bool, CmdError> {
        Ok(self.read::<T>(key)?.is_some())
    }

    /// The `T` at `key` to write, None if absent; WRONGTYPE if the key holds
    /// another type. Events raised through the guard are of `class`.
    pub fn write<'c, T: Collection>(&'c mut self, key: &'c [u8], class: u32) -> Result<Option<Write<'c, 'a, T>>, CmdError> {
        if !self.holds::<T>(key)? {
            return Ok(None);
        }
        Ok(Some(Write::new(self, key, class, false)))
    }

    /// The `T` at `key` to write, created with `make` when absent;
    /// WRONGTYPE if the key holds another type.
    pub fn write_or_create<'c, T: Collection>(
        &'c mut self,
        key: &'c [u8],
        class: u32,
        make: impl FnOnce() -> T,
    ) -> Result<Write<'c, 'a, T>, CmdError> {
        let created = !self.holds::<T>(key)?;
        if created {
            // A plain insert: `holds` found the key absent, and lending the
            // new value (as get_or_insert_with does) would have the next
            // lookup write back an empty inline hash, which deletes it.
            let now = self.now;
            self.db().insert(key, make().into_value(), storage::Ttl::Clear, now);
        }
        Ok(Write::new(self, key, class, created))
    }
}

/// Events one write raises at most, beyond `del`.
const MAX_EVENTS: usize = 3;

/// A key being written (see the module header): reach the value with
/// `get` or `parts`; dropping it runs the write epilogue.
pub struct Write<'c, 'a, T: Collection> {
    ctx: &'c mut Ctx<'a>,
    key: &'c [u8],
    class: u32,
    created: bool,
    modified: bool,
    /// Every change so far only added to the value (`added`), so it
    /// cannot have emptied it.
    only_added: bool,
    events: [&'static str; MAX_EVENTS],
    n_events: usize,
    _t: PhantomData<T>,
}

impl<'c, 'a, T: Collection> Write<'c, 'a, T> {
    fn new(ctx: &'c mut Ctx<'a>, key: &'c [u8], class: u32, created: bool) -> Self {
        Write { ctx, key, class, created, modified: false, only_added: true, events: [""; MAX_EVENTS], n_events: 0, _t: PhantomData }
    }

    /// The value, to edit in place.
    pub fn get(&mut self) -> &mut T {
        self.parts().0
    }

    /// The value and the reply buffer together.
    pub fn parts(&mut self) -> (&mut T, &mut Reply) {
        let now = self.ctx.now;
        let db = &mut self.ctx.srv.dbs[self.ctx.client.db];
        // The guard was made for a key holding a T, and nothing else runs
        // while it lives: anything else is a broken invariant.
        let v = db.get_mut(self.key, now).and_then(T::of_mut).expect("a write guard's key holds its type");
        (v, &mut self.ctx.client.reply)
    }

    /// The reply buffer.
    pub fn out(&mut self) -> &mut Reply {
        &mut self.ctx.client.reply
    }

    /// The command's context (configuration, time, other keys).
    pub fn ctx(&mut self) -> &mut Ctx<'a> {
        self.ctx
    }

    /// True if the key was absent and this guard created it.
    pub fn created(&self) -> bool {
        self.created
    }

    /// Records that the write changed the value: on drop the change is
    /// signalled and `event` raised (in the order of the calls).
    pub fn changed(&mut self, event: &'static str) {
        self.only_added = false;
        self.added(event);
    }

    /// `changed` for a write that only added to the value (a push, an
    /// insert): it cannot have emptied the key, so a list, set, sorted set
    /// or stream is not synced with the keyspace afterwards (a hash still
    /// is). Use `changed` when anything may have been removed.
    pub fn added(&mut self, event: &'static str) {
        self.modified = true;
        if self.n_events < MAX_EVENTS && !event.is_empty() {
            self.events[self.n_events] = event;
            self.n_events += 1;
        }
    }

    /// Records a change that raises no event of its own.
    pub fn touched(&mut self) {
        self.modified = true;
        self.only_added = false;
    }
}

impl<T: Collection> Drop for Write<'_, '_, T> {
    fn drop(&mut self) {
        // A value only added to is bigger than it was: unless it was just
        // created (and may still be empty) or is a hash, the keyspace's
        // sync (which removes an emptied key) has nothing to do.
        let sync = T::ALWAYS_SYNC || self.created || !(self.modified && self.only_added);
        let gone = sync && self.ctx.db().sync_object(self.key);
        if !self.modified {
            return;
        }
        self.ctx.key_modified(self.key);
        for i in 0..self.n_events {
            let e = self.events[i];
            self.ctx.notify(self.class, e, self.key);
        }
        if gone {
            self.ctx.notify(notify::GENERIC, "del", self.key);
        }
    }
}
