//! Key specs: where a command's key arguments are and how it uses them.
//!
//! The legacy first/last/step triple (`Keys`) that COMMAND INFO still shows,
//! and Redis 7's key specs (`KeySpec`: a begin-search and a find-keys step,
//! plus access flags) from which COMMAND GETKEYS, COMMAND INFO and, later,
//! ACL key checks and cluster slots are all derived. Pure data and the one
//! function that applies a spec to an argv; the command table (`command.rs`)
//! holds a spec per row.

use crate::args::is;

/// Key positions: first, last (negative counts from the end), step. (0,0,0): no keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys {
    /// Index of the first key.
    pub first: i32,
    /// Index of the last key; -1 is the last argument.
    pub last: i32,
    /// Distance between keys.
    pub step: i32,
}

/// Key positions helper.
pub const fn keys(first: i32, last: i32, step: i32) -> Keys {
    Keys { first, last, step }
}

/// No key arguments.
pub const NO_KEYS: Keys = keys(0, 0, 0);

/// Access flags of a key argument, as COMMAND INFO and COMMAND
/// GETKEYSANDFLAGS name them: one of RW/RO/OW/RM, then lowercase details
/// (access, update, insert, delete, not_key, incomplete, variable_flags).
pub type KeyFlags = &'static [&'static str];

/// Common key flag sets.
pub mod kf {
    use super::KeyFlags;
    /// Read only, without using the value (EXISTS, TYPE, STRLEN): either
    /// read or write rights let an ACL user name the key.
    pub const RO: KeyFlags = &["RO"];
    /// Read only, the value is returned or used.
    pub const RO_ACCESS: KeyFlags = &["RO", "access"];
    /// Read and modified in place.
    pub const RW_UPDATE: KeyFlags = &["RW", "update"];
    /// Read, returned and modified (GETSET, LPOP...).
    pub const RW_ACCESS_UPDATE: KeyFlags = &["RW", "access", "update"];
    /// Read, returned and possibly removed (LMOVE's source).
    pub const RW_ACCESS_DELETE: KeyFlags = &["RW", "access", "delete"];
    /// Elements are added (LMOVE's destination).
    pub const RW_INSERT: KeyFlags = &["RW", "insert"];
    /// Overwritten whatever it held (SET, a STORE destination).
    pub const OW_UPDATE: KeyFlags = &["OW", "update"];
    /// Written only if missing (RENAMENX's destination).
    pub const OW_INSERT: KeyFlags = &["OW", "insert"];
    /// BITFIELD: read and updated, or only read (GET alone): resolved per
    /// call by its key function.
    pub const RW_ACCESS_UPDATE_VAR: KeyFlags = &["RW", "access", "update", "variable_flags"];
    /// Removed (DEL).
    pub const RM_DELETE: KeyFlags = &["RM", "delete"];
}

/// Where a key spec starts looking for keys (Redis's `begin_search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// At this argument index.
    Index(i32),
    /// Just after `keyword`, searched from argument `startfrom` onwards, or
    /// backwards from the end when `startfrom` is negative.
    Keyword(&'static str, i32),
    /// Not expressible: `Spec::getkeys` finds these keys.
    Unknown,
}

/// How a key spec finds its keys from where it began (Redis's `find_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Find {
    /// `lastkey` (relative to the start; -1: the last argument), `keystep`,
    /// `limit` (when > 0 with lastkey -1: only the first 1/limit of the rest).
    Range { lastkey: i32, keystep: i32, limit: i32 },
    /// The key count is at `keynumidx` (relative to the start), the keys
    /// begin at `firstkey` (relative to the start), every `keystep`.
    Keynum { keynumidx: i32, firstkey: i32, keystep: i32 },
    /// Not expressible: `Spec::getkeys` finds these keys.
    Unknown,
}

/// One key spec: a group of key arguments sharing the same access flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    /// Access flags of these keys.
    pub flags: KeyFlags,
    /// Where the search starts.
    pub begin: Begin,
    /// How keys are found from there.
    pub find: Find,
}

/// A key spec over a fixed range: keys from `index` to `lastkey` (relative
/// to `index`, or -1 for the last argument), every `step`.
pub const fn range_spec(flags: KeyFlags, index: i32, lastkey: i32, step: i32) -> KeySpec {
    KeySpec {
        flags,
        begin: Begin::Index(index),
        find: Find::Range {
            lastkey,
            keystep: step,
            limit: 0,
        },
    }
}

/// Extracts keys where the key specs cannot (a spec with `Begin::Unknown`
/// or the `incomplete` flag, like SORT's STORE or MIGRATE's KEYS) or where
/// the flags depend on the arguments (`variable_flags`, like SET ... GET):
/// (argument index, flags) pairs, in order. Returning nothing means
/// "invalid arguments" unless the command has `NO_MANDATORY_KEYS`.
pub type KeysFn = fn(&[Vec<u8>]) -> Vec<(usize, KeyFlags)>;

/// Applies key specs to `argv` as Redis does; None when a spec cannot
/// answer (unknown or incomplete spec, bad numkeys, out of bounds), so the
/// caller falls back to `Spec::getkeys`.
pub fn keys_from_specs(specs: &[KeySpec], argv: &[Vec<u8>]) -> Option<Vec<(usize, KeyFlags)>> {
    let argc = argv.len() as i64;
    let mut out = Vec::new();
    for ks in specs {
        let first = match ks.begin {
            Begin::Index(i) => i as i64,
            Begin::Unknown => return None,
            Begin::Keyword(word, from) => {
                // Redis's bounds: forwards up to the last argument
                // excluded, backwards down to argument 2.
                let hit = if from > 0 {
                    (from as i64..argc - 1).find(|&i| is(&argv[i as usize], word))
                } else {
                    (2..(argc + from as i64 + 1).min(argc)).rev().find(|&i| is(&argv[i as usize], word))
                };
                match hit {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
        };
        let (first, last, step) = match ks.find {
            Find::Range { lastkey, keystep, limit } => {
                let last = if lastkey >= 0 {
                    first + lastkey as i64
                } else if limit <= 0 {
                    argc + lastkey as i64
                } else {
                    first + (argc - first) / limit as i64 + lastkey as i64
                };
                (first, last, keystep.max(1) as i64)
            }
            Find::Unknown => return None,
            Find::Keynum { keynumidx, firstkey, keystep } => {
                let at = first + keynumidx as i64;
                let n = argv.get(at as usize).and_then(|a| resp::num::parse_i64(a)).filter(|n| *n >= 0);
                let n = n?;
                let first = first + firstkey as i64;
                // n keys, `keystep` apart (MSETEX's keys alternate with values).
                let step = keystep.max(1) as i64;
                (first, first.saturating_add((n - 1).saturating_mul(step)), step)
            }
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            out.push((i as usize, ks.flags));
            i += step;
        }
        if ks.flags.contains(&"incomplete") {
            return None;
        }
    }
    Some(out)
}
