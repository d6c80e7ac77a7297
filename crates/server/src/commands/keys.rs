//! Generic key commands.

use super::flags::*;
use super::{keys, spec, CmdResult, Ctx, Spec};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    vec![
        spec("del", -2, WRITE, keys(1, -1, 1), del).acl(&["keyspace", "write", "slow"]).group("generic").doc("Deletes one or more keys.", "1.0.0"),
        spec("exists", -2, READONLY | FAST, keys(1, -1, 1), exists)
            .acl(&["keyspace", "read", "fast"])
            .group("generic")
            .doc("Determines whether one or more keys exist.", "1.0.0"),
    ]
}

/// DEL key [key ...]
pub fn del(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let mut n = 0;
    for k in &args[1..] {
        if ctx.db().remove(k, now).is_some() {
            ctx.key_modified(k);
            n += 1;
        }
    }
    ctx.out().int(n);
    Ok(())
}

/// EXISTS key [key ...]
pub fn exists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.now;
    let n = args[1..].iter().filter(|k| ctx.srv.dbs[ctx.client.db].contains(k, now)).count();
    ctx.out().int(n as i64);
    Ok(())
}
