//! Shutting down the way redis-server does, for SHUTDOWN and for SIGTERM /
//! SIGINT, with Redis's log lines (service managers and Redis's test suite
//! wait for them).
//!
//! A signal only schedules the shutdown (`signal_received`); the next cron
//! tick carries it out with the flags of shutdown-on-sigterm /
//! shutdown-on-sigint (`on_cron`), so SHUTDOWN ABORT can still cancel it
//! and DEBUG PAUSE-CRON holds it, as in Redis. A second SIGINT while one is
//! pending exits at once with status 1.
//!
//! `prepare` runs the sequence: save through the persistence seam when
//! Redis would (save points and no NOSAVE, or SAVE), remove the pid file,
//! log the bye-bye line and mark the server done; the event loop then
//! returns and the process exits 0. A failed save refuses to exit unless
//! FORCE is given. densekv has no replicas, so there is never a wait for
//! replicas to catch up: `shutdown-timeout` and NOW change nothing.

use crate::command::Host;
use crate::persist;
use crate::process::{self, Signal};
use crate::server::Server;

/// SHUTDOWN's modifiers, also the words of shutdown-on-sigterm/-sigint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    /// Save even without save points.
    pub save: bool,
    /// Do not save even with save points.
    pub nosave: bool,
    /// Do not wait for lagging replicas.
    pub now: bool,
    /// Exit even if saving failed.
    pub force: bool,
}

impl Flags {
    /// Flags from words (`save`, `nosave`, `now`, `force`; others ignored).
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Flags {
        let mut f = Flags::default();
        for w in words {
            match w.to_ascii_lowercase().as_str() {
                "save" => f.save = true,
                "nosave" => f.nosave = true,
                "now" => f.now = true,
                "force" => f.force = true,
                _ => {}
            }
        }
        f
    }

    /// True if any flag is set.
    pub fn any(self) -> bool {
        self.save || self.nosave || self.now || self.force
    }
}

/// SHUTDOWN ABORT found no shutdown to cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotPending;

/// The shutdown sequence stopped (saving failed without FORCE); logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

/// The event loop saw `sig`: log it as Redis's handler does and schedule
/// the shutdown; a second SIGINT while one is pending exits at once.
pub fn signal_received(srv: &mut Server, sig: Signal) {
    if sig == Signal::Int && srv.shutdown_signal.is_some() {
        srv.config.log.signal_line("You insist... exiting now.");
        std::process::exit(1);
    }
    srv.config.log.signal_line(&format!("Received {} scheduling shutdown...", sig.name()));
    srv.shutdown_signal = Some(sig);
}

/// Carries out a shutdown a signal scheduled (called by the event loop
/// after each cron tick).
pub fn on_cron(srv: &mut Server, host: &mut dyn Host) {
    let Some(sig) = srv.shutdown_signal else { return };
    let key = match sig {
        Signal::Int => "shutdown-on-sigint",
        Signal::Term => "shutdown-on-sigterm",
    };
    let flags = Flags::from_words(srv.config.flags(key));
    // Still set while it runs: a SIGINT during its save means exit now
    // (`persist` asks the host). A failure is logged and the server goes
    // on, as in Redis.
    let _ = prepare(srv, host, flags);
    srv.shutdown_signal = None;
}

/// SHUTDOWN ABORT: cancels a shutdown a signal scheduled.
///
/// Errors: none was pending.
pub fn abort(srv: &mut Server) -> Result<(), NotPending> {
    if srv.shutdown_signal.take().is_none() {
        return Err(NotPending);
    }
    srv.config.log.notice("Shutdown manually aborted.");
    Ok(())
}

/// Runs the shutdown sequence. On success the server is marked done
/// (`srv.shutdown`) and the caller must not serve anything more.
///
/// Errors: saving failed without FORCE; the failure is logged and the
/// server goes on.
pub fn prepare(srv: &mut Server, host: &mut dyn Host, flags: Flags) -> Result<(), Failed> {
    srv.config.log.notice("User requested shutdown...");
    if srv.supervised_systemd {
        process::notify_systemd("STOPPING=1\n");
    }
    finish(srv, host, flags)
}

fn finish(srv: &mut Server, host: &mut dyn Host, flags: Flags) -> Result<(), Failed> {
    // A background save stops here (its temp file goes with it), as
    // Redis kills its child.
    match persist::bgsave_running(srv) {
        Some(crate::bgsave::Purpose::Rdb | crate::bgsave::Purpose::Repl) => srv.config.log.warning("There is a child saving an .rdb. Killing it!"),
        Some(crate::bgsave::Purpose::AofBase) => srv.config.log.notice("There is a child rewriting the AOF. Killing it!"),
        None => {}
    }
    persist::bgsave_abort(srv);
    if (!srv.config.save_points().is_empty() && !flags.nosave) || flags.save {
        srv.config.log.notice("Saving the final RDB snapshot before exiting.");
        if srv.supervised_systemd {
            process::notify_systemd("STATUS=Saving the final RDB snapshot\n");
        }
        if let Err(e) = persist::save(srv, host) {
            srv.config.log.warning(&e);
            if flags.force {
                srv.config.log.warning("Error trying to save the DB. Exit anyway.");
            } else {
                srv.config.log.warning("Error trying to save the DB, can't exit.");
                if srv.supervised_systemd {
                    process::notify_systemd("STATUS=Error trying to save the DB, can't exit.\n");
                }
                srv.config.log.warning("Errors trying to shut down the server. Check the logs for more information.");
                return Err(Failed);
            }
        }
    }
    let pidfile = srv.config.get("pidfile").unwrap_or("").to_string();
    if !pidfile.is_empty() {
        srv.config.log.notice("Removing the pid file.");
        process::remove_pidfile(&pidfile);
    }
    srv.config.log.warning("Redis is now ready to exit, bye bye...");
    srv.shutdown = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{CommandMap, ScriptInfo, Scripts, Spec};
    use crate::config::Config;

    /// A host with no commands and no scripts: enough to save a dataset.
    struct Bare(CommandMap);

    impl Scripts for Bare {
        fn command_flags(&self, spec: &Spec, _: &[Vec<u8>]) -> u32 {
            spec.flags
        }
        fn info(&self) -> ScriptInfo {
            ScriptInfo::default()
        }
        fn function_codes(&self) -> Vec<Vec<u8>> {
            Vec::new()
        }
        fn load_functions(&mut self, _: Vec<Vec<u8>>) -> Result<(), String> {
            Ok(())
        }
        fn as_any(&mut self) -> &mut dyn std::any::Any {
            self
        }
    }

    impl Host for Bare {
        fn table(&self) -> &CommandMap {
            &self.0
        }
        fn scripts(&mut self) -> &mut dyn Scripts {
            self
        }
        fn scripts_ref(&self) -> &dyn Scripts {
            self
        }
        fn serve_others(&mut self, _: &mut Server) {}
    }

    /// A server that logs nothing and has no save points (a shutdown that
    /// saves is tested end to end, with a real data directory).
    fn quiet() -> (Server, Bare) {
        let mut c = Config::default();
        c.set("loglevel", "nothing", true).unwrap();
        c.set("save", "", true).unwrap();
        (Server::new(c), Bare(Default::default()))
    }

    #[test]
    fn abort_needs_a_pending_signal() {
        let (mut srv, mut host) = quiet();
        assert_eq!(abort(&mut srv), Err(NotPending));
        signal_received(&mut srv, Signal::Term);
        assert_eq!(srv.shutdown_signal, Some(Signal::Term));
        assert_eq!(abort(&mut srv), Ok(()));
        assert!(!srv.shutdown);
        on_cron(&mut srv, &mut host);
        assert!(!srv.shutdown, "an aborted shutdown does not happen");
    }

    #[test]
    fn signal_shuts_down_at_the_next_tick() {
        let (mut srv, mut host) = quiet();
        signal_received(&mut srv, Signal::Int);
        assert!(!srv.shutdown);
        on_cron(&mut srv, &mut host);
        assert!(srv.shutdown);
        assert_eq!(srv.shutdown_signal, None);
    }

    #[test]
    fn flag_words() {
        assert_eq!(Flags::from_words(["nosave", "NOW"]), Flags { nosave: true, now: true, ..Flags::default() });
        assert!(!Flags::from_words([]).any());
    }
}
