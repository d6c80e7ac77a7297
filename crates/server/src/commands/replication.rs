//! WAIT and WAITAOF for a server without replicas.
//!
//! No replica ever acknowledges, so both answer at once when what they ask
//! for is already true (zero replicas; the local AOF) and otherwise block
//! until their timeout, as Redis does on a master with no replicas, through
//! the generic blocked-client machinery (`crate::blocking`). Inside MULTI or
//! a script they never block and answer with the current counts.

use crate::command::flags::*;
use crate::command::{arg_i64, spec, CmdError, CmdResult, Ctx, Spec, NO_KEYS};
use crate::args::parse_timeout_ms;
use crate::blocking::{BlockRequest, TimeoutReply};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    vec![
        spec("wait", 3, BLOCKING, NO_KEYS, wait)
            .acl(&["slow", "connection", "blocking"])
            .doc("Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", "3.0.0"),
        spec("waitaof", 4, BLOCKING, NO_KEYS, waitaof)
            .acl(&["slow", "connection", "blocking"])
            .doc("Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.", "7.2.0"),
    ]
}

/// Never woken by a key: these wait for their deadline only.
fn never(_: Option<storage::ValueRef<'_>>) -> bool {
    false
}

/// WAIT numreplicas timeout
pub fn wait(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let numreplicas = arg_i64(&args[1])?;
    let deadline = parse_timeout_ms(&args[2], ctx.now)?;
    let acked = 0;
    if acked >= numreplicas || !ctx.may_block() {
        ctx.out().int(acked);
        return Ok(());
    }
    ctx.block(BlockRequest { on_timeout: TimeoutReply::Int(acked), ..BlockRequest::on_keys(Vec::new(), deadline, never) });
    Ok(())
}

/// WAITAOF numlocal numreplicas timeout
pub fn waitaof(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let numlocal = arg_i64(&args[1])?;
    if !(0..=1).contains(&numlocal) {
        return Err(CmdError::err("value is out of range, value must between 0 and 1"));
    }
    let numreplicas = arg_i64(&args[2])?;
    if numreplicas < 0 {
        return Err(CmdError::err("value is out of range, must be positive"));
    }
    let deadline = parse_timeout_ms(&args[3], ctx.now)?;
    let aof = ctx.srv.config.get("appendonly") == Some("yes");
    if numlocal > 0 && !aof {
        return Err(CmdError::err("WAITAOF cannot be used when numlocal is set but appendonly is disabled."));
    }
    // Every write is in the AOF by the time the next command runs.
    let acklocal = i64::from(aof);
    if (acklocal >= numlocal && numreplicas == 0) || !ctx.may_block() {
        let out = ctx.out();
        out.array(2);
        out.int(acklocal);
        out.int(0);
        return Ok(());
    }
    ctx.block(BlockRequest { on_timeout: TimeoutReply::Pair(acklocal, 0), ..BlockRequest::on_keys(Vec::new(), deadline, never) });
    Ok(())
}
