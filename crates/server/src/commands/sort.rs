//! SORT and SORT_RO: sort a list, set or sorted set, optionally by weights
//! or fields read from other keys, returning or STOREing (SORT only) the
//! result, possibly replaced by GET lookups.
//!
//! The elements are copied out of the source first, so the weight and GET
//! lookups (which read other keys) never hold a borrow of the source. Order
//! follows Redis exactly: numeric sort ties break on the element bytes; a
//! constant BY pattern (`nosort`) keeps a list's or sorted set's own order
//! (reversed by DESC) and a set's iteration order, except that a SET sorted
//! into a STORE destination or for a script is forced to ALPHA so replicas
//! see one order.
//! ALPHA compares bytes (Redis uses the C locale's strcoll, the same thing
//! under the C locale).

use crate::notify;
use std::cmp::Ordering;

use storage::types::list::{End, List};
use storage::types::hash::Hash;
use storage::types::zset::ZSet;
use storage::{Ttl, Value, ValueRef};

use crate::command::flags::*;
use crate::command::{arg_i64, is, keys, parse_c_double, kf, range_spec, spec, Begin, CmdError, CmdResult, Ctx, Find, KeyFlags, KeySpec, Spec};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    // BY/GET keys come from the data and STORE may be anywhere: unknown specs.
    let unknown = |flags| KeySpec { flags, begin: Begin::Unknown, find: Find::Unknown };
    vec![
        spec("sort", -2, WRITE | DENYOOM, keys(1, 1, 1), sort)
            .acl(&["write", "set", "sortedset", "list", "slow", "dangerous"])
            .group("generic")
            .doc("Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", "1.0.0")
            .key_specs(vec![range_spec(kf::RO_ACCESS, 1, 0, 1), unknown(kf::RO_ACCESS), unknown(kf::OW_UPDATE)])
            .getkeys(sort_keys),
        spec("sort_ro", -2, READONLY, keys(1, 1, 1), sort_ro)
            .acl(&["read", "set", "sortedset", "list", "slow", "dangerous"])
            .group("generic")
            .doc("Returns the sorted elements of a list, a set, or a sorted set.", "7.0.0")
            .key_specs(vec![range_spec(kf::RO_ACCESS, 1, 0, 1), unknown(kf::RO_ACCESS)])
            .getkeys(|_| vec![(1, kf::RO_ACCESS)]),
    ]
}

/// SORT's keys: the source, and the destination of the last STORE, found
/// by skipping the arguments of LIMIT, GET and BY as Redis does.
fn sort_keys(argv: &[Vec<u8>]) -> Vec<(usize, KeyFlags)> {
    let mut out = vec![(1, kf::RO_ACCESS)];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        if is(a, "limit") {
            i += 2;
        } else if is(a, "get") || is(a, "by") {
            i += 1;
        } else if is(a, "store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    out.extend(store.map(|i| (i, kf::OW_UPDATE)));
    out
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE destination]
pub fn sort(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    sort_generic(ctx, args, false)
}

/// SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
pub fn sort_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// The source's kind, as far as ordering cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A list or sorted set: elements come in a meaningful order.
    Ordered,
    /// A set: iteration order only.
    Set,
}

/// What an element is sorted by.
enum Weight {
    /// Numeric: the weight (0 when the BY key is missing).
    Num(f64),
    /// ALPHA by pattern: the looked-up bytes, None when missing.
    By(Option<Vec<u8>>),
    /// ALPHA on the element itself.
    Elem,
}

fn sort_generic(ctx: &mut Ctx, args: &[Vec<u8>], readonly: bool) -> CmdResult {
    let (mut desc, mut alpha) = (false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut store: Option<&[u8]> = None;
    let mut by: Option<&[u8]> = None;
    let mut dontsort = false;
    let mut gets: Vec<&[u8]> = Vec::new();
    // BY and GET patterns name keys no ACL check saw: they need read
    // rights on every key (Redis's rule).
    let full_read = ctx.client.user.as_ref().is_none_or(|u| {
        let u = u.borrow();
        let cat = &ctx.srv.acl.catalog;
        u.unrestricted || cat.find(ctx.client.last_cmd).is_some_and(|id| u.allows_cmd_with_all_keys(cat, id, args, crate::acl::READ))
    });
    let mut j = 2;
    while j < args.len() {
        let a = &args[j];
        let left = args.len() - j - 1;
        if is(a, "asc") {
            desc = false;
        } else if is(a, "desc") {
            desc = true;
        } else if is(a, "alpha") {
            alpha = true;
        } else if is(a, "limit") && left >= 2 {
            limit_start = arg_i64(&args[j + 1])?;
            limit_count = arg_i64(&args[j + 2])?;
            j += 2;
        } else if !readonly && is(a, "store") && left >= 1 {
            store = Some(&args[j + 1]);
            j += 1;
        } else if is(a, "by") && left >= 1 {
            by = Some(&args[j + 1]);
            // A pattern without '*' names no per-element key: nothing to sort by.
            dontsort = !args[j + 1].contains(&b'*');
            if !dontsort && !full_read {
                return Err(CmdError::err("BY option of SORT denied due to insufficient ACL permissions."));
            }
            j += 1;
        } else if is(a, "get") && left >= 1 {
            if !full_read {
                return Err(CmdError::err("GET option of SORT denied due to insufficient ACL permissions."));
            }
            gets.push(&args[j + 1]);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }

    let now = ctx.now;
    let elems = ctx.read_with(&args[1], |v| match v {
        ValueRef::List(l) => Some((l.iter().map(|e| e.to_vec()).collect(), Source::Ordered, false)),
        ValueRef::ZSet(z) => Some((z.iter().map(|(m, _)| m.to_vec()).collect(), Source::Ordered, true)),
        ValueRef::Set(s) => Some((s.iter().map(|e| e.to_vec()).collect(), Source::Set, false)),
        _ => None,
    })?;
    let (elems, source, zset): (Vec<Vec<u8>>, _, _) = elems.unwrap_or((Vec::new(), Source::Ordered, false));
    // Redis turns a sorted set it sorts into a skiplist for good (OBJECT
    // ENCODING and ZSCAN's score text show it), even for SORT_RO; it is no
    // write: nothing is signalled.
    if zset {
        if let Some(mut w) = ctx.write::<ZSet>(&args[1], notify::ZSET)? {
            w.get().to_skiplist();
        }
    }
    // A set has no order of its own: stored or seen by a script, it is
    // sorted alphabetically so that replicas and replays agree (Redis).
    if dontsort && source == Source::Set && (store.is_some() || ctx.client.in_script) {
        dontsort = false;
        alpha = true;
        by = None;
    }

    // LIMIT, clamped to the element count as Redis does (end < start: nothing).
    let n = elems.len() as i64;
    let mut start = limit_start.max(0).min(n);
    let count = limit_count.max(-1).min(n);
    let mut end = if count < 0 { n - 1 } else { start + count - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    end = end.min(n - 1);

    let mut elems = elems;
    if dontsort {
        if desc && source == Source::Ordered {
            elems.reverse();
        }
    } else {
        let mut keyed = Vec::with_capacity(elems.len());
        let mut bad = false;
        for e in elems {
            let looked = by.map(|p| lookup(ctx, p, &e));
            let w = if alpha {
                match looked {
                    Some(v) => Weight::By(v),
                    None => Weight::Elem,
                }
            } else {
                match looked {
                    Some(None) => Weight::Num(0.0),
                    Some(Some(v)) => sort_score(&v).unwrap_or_else(|| { bad = true; Weight::Num(0.0) }),
                    None => sort_score(&e).unwrap_or_else(|| { bad = true; Weight::Num(0.0) }),
                }
            };
            keyed.push((w, e));
        }
        if bad {
            return Err(CmdError::err("One or more scores can't be converted into double"));
        }
        keyed.sort_by(|(wa, a), (wb, b)| {
            let c = match (wa, wb) {
                (Weight::Num(x), Weight::Num(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal).then_with(|| a.cmp(b)),
                (Weight::By(x), Weight::By(y)) => x.cmp(y),
                _ => a.cmp(b),
            };
            if desc { c.reverse() } else { c }
        });
        elems = keyed.into_iter().map(|(_, e)| e).collect();
    }

    let picked: &[Vec<u8>] = if end >= start { &elems[start as usize..=end as usize] } else { &[] };
    let outputlen = picked.len() * gets.len().max(1);
    let mut results: Vec<Option<Vec<u8>>> = Vec::with_capacity(outputlen);
    for e in picked {
        if gets.is_empty() {
            results.push(Some(e.clone()));
        }
        for g in &gets {
            results.push(lookup(ctx, g, e));
        }
    }
    match store {
        None => {
            let out = ctx.out();
            out.array(results.len());
            for r in &results {
                match r {
                    Some(v) => out.bulk(v),
                    None => out.null(),
                }
            }
        }
        Some(dst) => {
            if results.is_empty() {
                if ctx.db().remove(dst, now).is_some() {
                    ctx.modified(dst, notify::GENERIC, "del");
                }
            } else {
                let cfg = ctx.srv.config.list;
                let mut l = List::new();
                let vals: Vec<Vec<u8>> = results.into_iter().map(Option::unwrap_or_default).collect();
                l.push(End::Tail, &vals, &cfg);
                ctx.set_value(dst, Value::List(Box::new(l)), Ttl::Clear);
                ctx.notify(notify::LIST, "sortstore", dst);
            }
            ctx.out().int(outputlen as i64);
        }
    }
    Ok(())
}

/// A numeric weight as Redis's SORT reads it (an element, or what BY names):
/// a score as `parse_c_double` reads one; NaN is an error.
fn sort_score(b: &[u8]) -> Option<Weight> {
    parse_c_double(b).map(Weight::Num)
}

/// The value a GET/BY pattern names for element `subst`: `#` is the element
/// itself; the first `*` is replaced by it; `key->field` reads a hash field.
/// None when the pattern has no `*`, or the key is missing or of the wrong
/// type (not an error here, as in Redis).
fn lookup(ctx: &mut Ctx, pattern: &[u8], subst: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(subst.to_vec());
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let (tail, field) = match after.windows(2).position(|w| w == b"->") {
        Some(f) if f + 2 < after.len() => (&after[..f], Some(&after[f + 2..])),
        _ => (after, None),
    };
    let mut key = Vec::with_capacity(star + subst.len() + tail.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(tail);
    let now = ctx.now;
    match field {
        None => ctx.read_str(&key).ok()?.0.map(|s| s.to_vec()),
        Some(f) => ctx.read::<Hash>(&key).ok()??.get(f, now).map(|v| v.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &str) -> Vec<Vec<u8>> {
        words.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn store_key_extraction() {
        let pos = |s: &str| sort_keys(&argv(s)).into_iter().map(|k| k.0).collect::<Vec<_>>();
        assert_eq!(pos("sort abc store def"), [1, 3]);
        assert_eq!(pos("sort abc store invalid store stillbad store def"), [1, 7]);
        assert_eq!(pos("sort abc get store by store limit store store 1 store"), [1]);
        assert_eq!(pos("sort abc store"), [1]);
    }

    #[test]
    fn score_parsing() {
        let num = |s: &str| match sort_score(s.as_bytes()) {
            Some(Weight::Num(v)) => Some(v),
            _ => None,
        };
        assert_eq!(num(""), Some(0.0));
        assert_eq!(num("1.5"), Some(1.5));
        assert_eq!(num("-inf"), Some(f64::NEG_INFINITY));
        // fast_float, which Redis reads weights with, gives an infinity
        // for a value past the range, and no error.
        assert_eq!(num("1e500"), Some(f64::INFINITY));
        assert_eq!(num("1\0junk"), Some(1.0));
        assert_eq!(num("nan"), None);
        assert_eq!(num("12abc"), None);
        assert_eq!(num(" "), None);
    }
}
