//! The field-expiry index: which hashes have fields with a TTL, in order of
//! their earliest one, so active field expiry never looks at a hash with
//! nothing due (docs/design/keyspace.md, "Field-expiry index").
//!
//! Two halves, by where the hash is stored:
//! - a hash in the object table is registered once in `Db::fexp`, under
//!   (earliest field deadline, object index), with `Db::fexp_at` to find its
//!   entry again; `reindex` brings one entry in step, and `take_obj`
//!   (mod.rs) drops it with the object;
//! - inline hashes (small ones, kept in their key's blob) are covered per
//!   segment in `Db::fexp_segs`, under a lower bound of their deadlines
//!   (`Segment::field_min`), so a field TTL on a small hash costs no index
//!   entry of its own.
//!
//! Every blob is written and freed through `store_blob` and `free_blob`,
//! here because they keep the inline half in step. An in-place edit of a
//! hash ends with `Db::sync_object` (mod.rs), which re-registers it.
//! `active_expire_fields` pops due hashes from the front of either half.

use super::{Db, Obj, Pending};
use crate::blob::{self, Blob, Body, BodyKind};
use crate::encoding::{inline, keypack};
use crate::segment::addr_of;
use crate::types::hash::Hash;
use crate::value::Kind;

/// Earliest field deadline of an inline hash body.
pub(super) fn inline_min(body: Body<'_>) -> Option<i64> {
    match body {
        Body::Inline(e) if !inline::is_zset(e[0]) => Hash::inline_min_deadline(e),
        Body::Inline(_) => None,
        Body::Str(_) | Body::Obj(_) | Body::Packed(_) => None,
    }
}

impl Db {
    /// Writes a blob in segment `si`, registering an inline hash's field
    /// TTLs in the field-expiry index. `old`: the address of the blob this
    /// one replaces, already released (`release_blob`), whose bytes it
    /// takes when it fits their class (`blob::store_over`).
    pub(super) fn store_blob(&mut self, si: usize, key: &[u8], body: Body<'_>, deadline: Option<i64>, old: Option<u64>) -> u64 {
        if let Some(t) = inline_min(body) {
            self.inline_ttl += 1;
            self.note_field_deadline(si, t);
        }
        let key_packed = std::mem::take(&mut self.key_packed);
        if self.key_compression {
            // A number key where the blob stays under 16 bytes (its prefix
            // gets an id only then), else keypack's form where it pays.
            // (The smallest number first: most values leave no room for
            // any, and then the key's digits need no parse.)
            let number = Some(key)
                .filter(|_| blob::number_key_fits(0, &body, deadline))
                .and_then(keypack::number_parts)
                .filter(|&(_, n)| blob::number_key_fits(n, &body, deadline))
                .and_then(|(prefix, n)| Some((self.prefixes.number_id(prefix)?, n)));
            let mut buf = std::mem::take(&mut self.key_buf);
            debug_assert!(!key_packed || { let mut again = Vec::new(); self.prefixes.pack(key, &mut again) && again == buf });
            let packed = (number.is_none() && (key_packed || self.prefixes.pack(key, &mut buf))).then_some(&buf[..]);
            let addr = blob::store_over(&mut self.slab, old, blob::KeyForm { raw: key, packed, number }, body, deadline);
            self.key_buf = buf;
            return addr;
        }
        blob::store_over(&mut self.slab, old, blob::KeyForm::raw(key), body, deadline)
    }

    /// Frees the blob of slot `s` (the object it points at is the caller's).
    pub(super) fn free_blob(&mut self, s: u64) {
        self.release_blob(s);
        self.slab.free(addr_of(s));
    }

    /// `free_blob` but for the bytes, which stay allocated: the blob's
    /// replacement is about to be written over them (`store_blob`'s `old`).
    pub(super) fn release_blob(&mut self, s: u64) {
        let bytes = self.slab.bytes(addr_of(s));
        // Only an inline collection or a packed string has more to undo.
        if matches!(blob::body_kind(bytes), BodyKind::Inline | BodyKind::Packed) {
            match Blob::parse(bytes).body() {
                b if inline_min(b).is_some() => self.inline_ttl -= 1,
                Body::Packed(p) => self.packs.release(p),
                _ => {}
            }
        }
    }

    /// Lowers segment `si`'s field-deadline bound to `t` and re-registers it.
    pub(super) fn note_field_deadline(&mut self, si: usize, t: i64) {
        let seg = &mut self.segs[si];
        if t < seg.field_min {
            if seg.field_min != i64::MAX {
                self.fexp_segs.remove(&(seg.field_min, si as u32));
            }
            seg.field_min = t;
            self.fexp_segs.insert((t, si as u32));
        }
    }

    /// Brings object `i`'s entry in the field-expiry index in step with its
    /// earliest field deadline.
    pub(super) fn reindex(&mut self, i: u32, key: &[u8]) {
        let want = self.obj(i).min_deadline();
        let have = self.fexp_at.get(&i).copied();
        if want == have {
            return;
        }
        let old_key = have.and_then(|t| self.fexp.remove(&(t, i)));
        if have.is_some() != want.is_some() && self.obj(i).expires_on_access() {
            if want.is_some() {
                self.member_ttl += 1;
            } else {
                self.member_ttl -= 1;
            }
        }
        match want {
            Some(t) => {
                self.fexp.insert((t, i), old_key.unwrap_or_else(|| key.into()));
                self.fexp_at.insert(i, t);
            }
            None => {
                self.fexp_at.remove(&i);
            }
        }
    }

    /// Number of hashes with at least one field TTL, and of sets and
    /// sorted sets with a member TTL (INFO's subexpiry).
    pub fn field_expiry_len(&self) -> usize {
        self.fexp.len() + self.inline_ttl
    }

    /// `active_expire_members` for callers that need not know the type:
    /// `on_field(key, field or member)`.
    pub fn active_expire_fields(&mut self, now: i64, max: usize, mut on_field: impl FnMut(&[u8], &[u8])) -> (usize, usize) {
        self.active_expire_members(now, max, |_, k, f| on_field(k, f))
    }

    /// Active field and member expiry: removes up to `max` due fields or
    /// members (deadline before `now`) from the hashes, sets and sorted
    /// sets at the front of the field-expiry index, calling
    /// `on_field(type, key, field or member)` for each, deletes those left
    /// empty and re-registers the others by their new earliest deadline.
    /// Returns (fields and members removed, keys deleted).
    pub fn active_expire_members(&mut self, now: i64, max: usize, mut on_field: impl FnMut(Kind, &[u8], &[u8])) -> (usize, usize) {
        self.flush();
        let (mut fields, mut keys) = (0, 0);
        while fields < max {
            // The earlier of the two fronts: a segment of inline hashes or
            // one hash in the object table.
            let seg_front = self.fexp_segs.first().copied().filter(|&(t, _)| t < now);
            let obj_front = self.fexp.first_key_value().filter(|(&(t, _), _)| t < now);
            let (i, key) = match (seg_front, obj_front) {
                (None, None) => break,
                (Some((ts, si)), o) if o.is_none_or(|(&(to, _), _)| ts <= to) => {
                    let (n, k) = self.expire_segment_fields(si as usize, now, max - fields, &mut |k: &[u8], f: &[u8]| on_field(Kind::Hash, k, f));
                    fields += n;
                    keys += k;
                    continue;
                }
                (_, Some((&(_, i), key))) => (i, key.clone()),
                (Some(_), None) => unreachable!("taken by the arm above"),
            };
            self.pre_write_key(&key);
            let obj = self.objs[i as usize].as_mut().expect("indexed objects are live");
            let kind = obj.kind();
            let n = obj.expire_due_with(now, max - fields, |f| on_field(kind, &key, f));
            fields += n;
            if self.sync_object(&key) {
                keys += 1;
            } else if n == 0 {
                // Nothing was due after all (cannot happen while the index
                // is in step); re-index and stop rather than spin.
                break;
            }
        }
        (fields, keys)
    }

    /// Active field expiry over the inline hashes of segment `si`: removes
    /// up to `max` due fields, then re-registers the segment by the
    /// earliest field deadline left in it. Returns (fields, keys deleted).
    fn expire_segment_fields(&mut self, si: usize, now: i64, max: usize, on_field: &mut impl FnMut(&[u8], &[u8])) -> (usize, usize) {
        self.pre_write(si);
        let seg = &mut self.segs[si];
        self.fexp_segs.remove(&(seg.field_min, si as u32));
        seg.field_min = i64::MAX;
        let (mut fields, mut keys) = (0, 0);
        for pos in 0..self.segs[si].slots.len() {
            let s = self.segs[si].slots[pos];
            if s == 0 {
                continue;
            }
            let Some(t) = inline_min(self.blob(s).body()) else { continue };
            if t >= now || fields >= max {
                self.note_field_deadline(si, t);
                continue;
            }
            let b = self.blob(s);
            let Body::Inline(e) = b.body() else { unreachable!("inline_min is only Some for a hash") };
            let (key, mut obj) = (self.raw_key(&b).into_owned(), Obj::from_inline(e));
            fields += obj.expire_due_with(now, max - fields, |f| on_field(&key, f));
            self.pending = Some(Pending { si, pos, slot: s, obj, dirty: true });
            keys += usize::from(self.flush());
        }
        (fields, keys)
    }
}
