//! HyperLogLog commands: PFADD PFCOUNT PFMERGE.
//!
//! An HLL is a plain string in Redis's layout (`storage::types::hll`); these
//! handlers read it (`ctx.read_str`, checked to be an HLL), let the type
//! layer update a copy (merges included: `hll::Union`), and store it back
//! keeping the TTL. PFCOUNT on one key refreshes the cached cardinality in
//! the header, which is why Redis flags it may-replicate (and CLIENT PAUSE
//! WRITE holds it).

use crate::notify;
use storage::types::hll::{self, Corrupt, Union};
use storage::{StrRef, Ttl};

use crate::command::flags::*;
use crate::command::{keys, kf, range_spec, spec, CmdError, CmdResult, Ctx, Spec};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    let row = |s: Spec, acl: &'static [&'static str], summary: &'static str| s.acl(acl).group("hyperloglog").doc(summary, "2.8.9");
    vec![
        row(
            spec("pfadd", -2, WRITE | DENYOOM | FAST, keys(1, 1, 1), pfadd).key_specs(vec![range_spec(kf::RW_INSERT, 1, 0, 1)]),
            &["hyperloglog", "fast"],
            "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.",
        ),
        row(
            spec("pfcount", -2, READONLY | MAY_REPLICATE, keys(1, -1, 1), pfcount).key_specs(vec![range_spec(&["RW", "access"], 1, -1, 1)]),
            &["hyperloglog", "slow"],
            "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).",
        ),
        row(
            spec("pfmerge", -2, WRITE | DENYOOM, keys(1, -1, 1), pfmerge)
                .key_specs(vec![range_spec(&["RW", "access", "insert"], 1, 0, 1), range_spec(kf::RO_ACCESS, 2, -1, 1)]),
            &["hyperloglog", "slow"],
            "Merges one or more HyperLogLog values into a single key.",
        ),
    ]
}

fn corrupt(_: Corrupt) -> CmdError {
    CmdError::Custom("INVALIDOBJ Corrupted HLL object detected".into())
}

/// Reads `key` as an HLL: None when missing; WRONGTYPE for another type
/// and, in Redis's own words, for a string that is not an HLL.
fn read_hll(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    match ctx.read_str(key)?.0 {
        None => Ok(None),
        Some(StrRef::Bytes(b)) if hll::is_hll(b) => Ok(Some(b.to_vec())),
        Some(_) => Err(CmdError::Custom("WRONGTYPE Key is not a valid HyperLogLog string value.".into())),
    }
}

/// PFADD key [element ...]: 1 if the key was created or a register changed.
pub fn pfadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let max = ctx.srv.config.hll_sparse_max_bytes;
    let (mut h, mut updated) = match read_hll(ctx, key)? {
        Some(h) => (h, false),
        None => (hll::new_sparse(), true),
    };
    for e in &args[2..] {
        updated |= hll::add(&mut h, e, max).map_err(corrupt)?;
    }
    if updated {
        hll::invalidate(&mut h);
        ctx.set_str(key, &h, Ttl::Keep);
        ctx.notify(notify::STRING, "pfadd", key);
    }
    ctx.out().int(updated as i64);
    Ok(())
}

/// PFCOUNT key [key ...]: one key uses (and refreshes) the cached
/// cardinality; several are merged on the fly and nothing is written.
pub fn pfcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 2 {
        let mut union = Union::default();
        for key in &args[1..] {
            if let Some(h) = read_hll(ctx, key)? {
                union.add(&h).map_err(corrupt)?;
            }
        }
        ctx.out().int(union.estimate() as i64);
        return Ok(());
    }
    let key = &args[1];
    let Some(mut h) = read_hll(ctx, key)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let card = match hll::cached_card(&h) {
        Some(c) => c,
        None => {
            let c = hll::count(&h).map_err(corrupt)?;
            hll::set_card(&mut h, c);
            ctx.set_str(key, &h, Ttl::Keep);
            c
        }
    };
    ctx.out().int(card as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey ...]: the destination takes the register-wise
/// maximum of itself and the sources; dense if any input is dense.
pub fn pfmerge(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut union = Union::default();
    let mut dest = None;
    for (i, key) in args[1..].iter().enumerate() {
        if let Some(h) = read_hll(ctx, key)? {
            union.add(&h).map_err(corrupt)?;
            if i == 0 {
                dest = Some(h);
            }
        }
    }
    // Registers were validated by `add`; a failure here would be a broken
    // invariant of the type layer.
    let h = union.store_into(dest, ctx.srv.config.hll_sparse_max_bytes).map_err(corrupt)?;
    ctx.set_str(&args[1], &h, Ttl::Keep);
    // Redis names PFMERGE's event after PFADD.
    ctx.notify(notify::STRING, "pfadd", &args[1]);
    ctx.out().ok();
    Ok(())
}
