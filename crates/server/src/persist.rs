//! The persistence seam: where the server writes its dataset to disk.
//!
//! Shutdown calls `save` when Redis would save before exiting (save points
//! configured and no NOSAVE, or SHUTDOWN SAVE / a SAVE flag in
//! shutdown-on-sigterm), so the decision of *when* to save is already made
//! as Redis makes it; *how* belongs to the RDB writer
//! (`storage::rdb`), which this module will call once it exists.

use crate::server::Server;

/// Writes the dataset to `dir`/`dbfilename` as an RDB snapshot, as SAVE
/// does.
///
/// densekv cannot write RDB files yet, so this saves nothing and says so
/// in the log (a warning: the data of this run is not on disk); it returns
/// Ok because there is nothing that failed. Saving arrives with RDB
/// support, behind this same signature.
///
/// Errors: the reason saving failed, which the caller logs (shutdown then
/// refuses to exit unless forced).
pub fn save(srv: &mut Server) -> Result<(), String> {
    srv.config.log.warning("densekv cannot write RDB files yet: the dataset was not saved to disk.");
    Ok(())
}
