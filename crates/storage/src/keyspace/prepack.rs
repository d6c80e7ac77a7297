//! Packing keys and values on another thread while an RDB file loads
//! (docs/design/compression.md, "Loading").
//!
//! With compression on, packing every key and value is most of what a load
//! adds; the loader (rdb/file/loader.rs) hands batches of parsed keys to a
//! thread that packs them with read-only copies of the keyspace's tables and
//! prefixes (`DbView`), then inserts them on its own thread with
//! `Db::insert_prepacked`. Tables and prefixes never change once made, so a
//! form made from a copy is the one the keyspace would make; the keyspace
//! takes it only if the table it was made with is still the pattern's
//! current one (`Tables::accept`) and packs the value itself otherwise, as
//! it does for keys and values the copy could not pack (a pattern trained
//! after the copy was taken, a prefix not known yet). So every stored byte,
//! every table and every counter is what a load on one thread gives.
//!
//! Nothing here touches the keyspace: the copies share the tables' encoders
//! (`Arc`), and the packing thread only writes into its own buffers.

use super::Db;
use crate::encoding::keypack::Prefixes;
use crate::encoding::packed::{PackView, Prepacked, ViewPacker};
use crate::Value;

/// What packing on another thread needs of one keyspace (`Db::pack_view`).
pub struct DbView {
    values: Option<PackView>,
    keys: Option<Prefixes>,
}

/// The forms made for one key: byte ranges in the batch's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepack {
    key: Option<(u32, u32)>,
    value: Prepacked,
    form: (u32, u32),
}

impl Prepack {
    /// Nothing made: the keyspace packs as it always does.
    pub const NONE: Prepack = Prepack { key: None, value: Prepacked::None, form: (0, 0) };
}

/// The packing thread's state: per database, its copy of the tables (with
/// its own zstd context) and prefixes.
#[derive(Default)]
pub struct Prepacker {
    dbs: Vec<Option<(ViewPacker, Option<Prefixes>)>>,
    key_buf: Vec<u8>,
    form_buf: Vec<u8>,
}

impl Prepacker {
    /// Packs the keys of database `db` with `view` from now on.
    pub fn set_view(&mut self, db: usize, view: DbView) {
        if self.dbs.len() <= db {
            self.dbs.resize_with(db + 1, || None);
        }
        // A database with value packing off gets an empty view: none of
        // its values is packed here.
        let mut values = ViewPacker::default();
        values.set_view(view.values.unwrap_or_default());
        self.dbs[db] = Some((values, view.keys));
    }

    /// The forms of `key` and its `value` in database `db`, appended to
    /// `buf` (the batch's buffer; ranges are u32, so a batch stays under 4
    /// GiB: the loader's are a few hundred KiB).
    pub fn pack(&mut self, db: usize, key: &[u8], value: &Value, buf: &mut Vec<u8>) -> Prepack {
        let Some(Some((values, keys))) = self.dbs.get_mut(db) else { return Prepack::NONE };
        let mut pre = Prepack::NONE;
        if let Some(p) = keys {
            if p.pack_known(key, &mut self.key_buf) {
                let at = buf.len() as u32;
                buf.extend_from_slice(&self.key_buf);
                pre.key = Some((at, buf.len() as u32));
            }
        }
        if let Value::Bytes(b) = value {
            pre.value = values.pack(key, b, &mut self.form_buf);
            if pre.value != Prepacked::None {
                let at = buf.len() as u32;
                buf.extend_from_slice(&self.form_buf);
                pre.form = (at, buf.len() as u32);
            }
        }
        pre
    }
}

fn range(buf: &[u8], (a, b): (u32, u32)) -> &[u8] {
    &buf[a as usize..b as usize]
}

impl Db {
    /// What a `DbView` of this keyspace would be taken at: None when
    /// neither switch is on (nothing to pack), else a value that changes
    /// whenever the tables or prefixes do, so the loader sends a new view
    /// only then.
    pub fn pack_view_version(&self) -> Option<(u64, usize)> {
        (self.value_compression || self.key_compression).then(|| (self.packs.version(), self.prefixes.len()))
    }

    /// A read-only copy of the current tables (value-compression on) and
    /// prefixes (key-compression on), for a `Prepacker`.
    pub fn pack_view(&self) -> DbView {
        DbView { values: self.value_compression.then(|| self.packs.view()), keys: self.key_compression.then(|| self.prefixes.clone()) }
    }

    /// `insert` of a key whose forms a `Prepacker` made (`pre`, ranges in
    /// `buf`): stores exactly what `insert` stores, using those forms where
    /// they are the ones `insert` would make.
    pub fn insert_prepacked(&mut self, key: &[u8], value: Value, ttl: super::Ttl, now: i64, pre: &Prepack, buf: &[u8]) -> bool {
        let hint = Hint { key: pre.key.map(|r| range(buf, r)), value: pre.value, form: range(buf, pre.form) };
        self.insert_with(key, super::NewValue::Owned(value), ttl, now, Some(hint))
    }
}

/// A `Prepack` resolved against its buffer, as `store` takes it.
#[derive(Clone, Copy)]
pub(super) struct Hint<'a> {
    pub(super) key: Option<&'a [u8]>,
    pub(super) value: Prepacked,
    pub(super) form: &'a [u8],
}
