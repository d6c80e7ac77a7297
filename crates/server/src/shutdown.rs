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
//! `prepare` starts the sequence. When replicas have not acknowledged the
//! whole stream (and neither NOW nor `shutdown-timeout 0` says otherwise)
//! it waits for them, as Redis does so that a shutdown loses no write:
//! they are asked for an acknowledgement, writes are held (expiry and
//! eviction too) and the server goes on serving, its replicas included;
//! SHUTDOWN callers stay blocked. Each cron tick checks whether every
//! replica caught up or `shutdown-timeout` seconds passed, and then
//! finishes. SHUTDOWN ABORT, or a finish that fails, cancels the wait:
//! the blocked callers are told `-Errors trying to SHUTDOWN. Check logs.`
//! (by dispatch, above this layer: the functions here return their ids).
//!
//! `finish` logs the replicas that lag, stops a background save (refusing
//! while the AOF's first rewrite is written, unless FORCE), saves through
//! the persistence seam when Redis would (save points and no NOSAVE, or
//! SAVE), removes the pid file, logs the bye-bye line and marks the server
//! done; the event loop then returns and the process exits 0. A failed save
//! refuses to exit unless FORCE is given.

use crate::client::{ClientId, ReplRole};
use crate::command::Host;
use crate::persist;
use crate::process::{self, Signal};
use crate::repl::ReplicaState;
use crate::server::{unix_ms, Server, ShutdownWait};

pub use crate::process::ShutdownFlags as Flags;

/// What a SHUTDOWN caller is told when the shutdown it waited for failed
/// or was aborted (and what a SHUTDOWN that fails at once replies).
pub const FAILED: &str = "Errors trying to SHUTDOWN. Check logs.";

/// SHUTDOWN ABORT found no shutdown to cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotPending;

/// The shutdown sequence stopped (saving failed without FORCE); logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

/// Where `prepare` left the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Done: the server is marked to exit.
    Exiting,
    /// Waiting for replicas (`Server::shutdown_wait`); cron finishes it.
    Waiting,
}

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

/// Cron's part: carries out a shutdown a signal scheduled, or finishes
/// one that waited for replicas once they caught up or its time is up.
/// Returns the SHUTDOWN callers to tell that it failed (it was cancelled).
pub fn on_cron(srv: &mut Server, host: &mut dyn Host) -> Vec<ClientId> {
    if let Some(w) = &srv.shutdown_wait {
        let flags = w.flags;
        if (unix_ms() >= w.deadline || replicas_in_sync(srv)) && finish(srv, host, flags).is_err() {
            return cancel(srv);
        }
        return Vec::new();
    }
    let Some(sig) = srv.shutdown_signal else { return Vec::new() };
    let key = match sig {
        Signal::Int => "shutdown-on-sigint",
        Signal::Term => "shutdown-on-sigterm",
    };
    let flags = Flags::from_words(srv.config.flags(key));
    // Still set while it runs: a SIGINT during its save means exit now
    // (`persist` asks the host), as does one while it waits for replicas.
    // A failure is logged and the server goes on, as in Redis.
    if prepare(srv, host, flags) != Ok(Progress::Waiting) {
        srv.shutdown_signal = None;
    }
    Vec::new()
}

/// SHUTDOWN ABORT: cancels a shutdown a signal scheduled or one waiting
/// for replicas. Returns the SHUTDOWN callers to tell it failed.
///
/// Errors: none was pending.
pub fn abort(srv: &mut Server) -> Result<Vec<ClientId>, NotPending> {
    let waiters = if srv.shutdown_wait.is_some() {
        cancel(srv)
    } else if srv.shutdown_signal.take().is_some() {
        Vec::new()
    } else {
        return Err(NotPending);
    };
    srv.config.log.notice("Shutdown manually aborted.");
    Ok(waiters)
}

/// Ends a shutdown that waited: writes go on, the signal is forgotten;
/// returns the blocked SHUTDOWN callers.
fn cancel(srv: &mut Server) -> Vec<ClientId> {
    srv.shutdown_signal = None;
    let w = srv.shutdown_wait.take();
    srv.apply_expire_mode();
    w.map(|w| w.clients).unwrap_or_default()
}

/// Client `id` (blocked in SHUTDOWN) waits for the shutdown in progress;
/// false if none waits for replicas.
pub fn join(srv: &mut Server, id: ClientId) -> bool {
    let Some(w) = srv.shutdown_wait.as_mut() else { return false };
    w.clients.push(id);
    true
}

/// INFO's shutdown_in_milliseconds: what is left of the wait, if one runs.
pub fn remaining_ms(srv: &Server) -> Option<i64> {
    srv.shutdown_wait.as_ref().map(|w| (w.deadline - unix_ms()).max(0))
}

/// Replicas of this server (clients that sent SYNC or PSYNC), with their
/// state; REPLCONF alone makes none.
fn replicas(srv: &Server) -> impl Iterator<Item = (&ClientId, &crate::repl::Replica)> {
    srv.repl.replicas.iter().filter(|(id, _)| srv.clients.get(id).is_none_or(|c| c.repl_role == ReplRole::Replica))
}

/// True when every replica acknowledged the whole stream.
fn replicas_in_sync(srv: &Server) -> bool {
    replicas(srv).all(|(_, r)| r.ack_offset == srv.repl.offset)
}

/// Runs the shutdown sequence: at once (`Progress::Exiting`: the server is
/// marked done and the caller must not serve anything more), or, when
/// replicas lag, by starting to wait for them (`Progress::Waiting`).
///
/// Errors: saving failed without FORCE; the failure is logged and the
/// server goes on.
pub fn prepare(srv: &mut Server, host: &mut dyn Host, mut flags: Flags) -> Result<Progress, Failed> {
    if srv.persist.loading.is_some() {
        // The databases are half loaded: never save them (as Redis).
        (flags.save, flags.nosave) = (false, true);
    }
    srv.config.log.notice("User requested shutdown...");
    if srv.supervised_systemd {
        process::notify_systemd("STOPPING=1\n");
    }
    let timeout: i64 = srv.config.get("shutdown-timeout").and_then(|v| v.parse().ok()).unwrap_or(10);
    if !flags.now && timeout != 0 && !replicas_in_sync(srv) {
        // Ask for acknowledgements now rather than at the replicas' next
        // periodic one, unless CLIENT PAUSE already holds the stream.
        if srv.pause.is_none_or(|p| p.until <= unix_ms()) {
            srv.repl.get_ack = true;
        }
        srv.shutdown_wait = Some(ShutdownWait { deadline: unix_ms().saturating_add(timeout.saturating_mul(1000)), flags, clients: Vec::new() });
        srv.apply_expire_mode();
        srv.config.log.notice("Waiting for replicas before shutting down.");
        return Ok(Progress::Waiting);
    }
    finish(srv, host, flags).map(|()| Progress::Exiting)
}

/// Logs each replica that has not acknowledged the whole stream, then how
/// many are in sync, in Redis's words.
fn log_replicas(srv: &Server) {
    let (mut total, mut lagging) = (0, 0);
    for (id, r) in replicas(srv) {
        total += 1;
        if r.ack_offset == srv.repl.offset {
            continue;
        }
        lagging += 1;
        let ip = r.ip.clone().or_else(|| srv.clients.get(id).map(|c| c.addr.rsplit_once(':').map_or(c.addr.clone(), |(h, _)| h.to_string())));
        let name = match ip {
            Some(ip) if r.port == 0 => format!("{ip}:<unknown-replica-port>"),
            Some(ip) if ip.contains(':') => format!("[{ip}]:{}", r.port),
            Some(ip) => format!("{ip}:{}", r.port),
            None => format!("client id #{id}"),
        };
        let lag = if r.state == ReplicaState::Online { r.ack_time.elapsed().as_secs() } else { 0 };
        srv.config.log.notice(&format!("Lagging replica {name} reported offset {} behind master, lag={lag}, state={}.", srv.repl.offset - r.ack_offset, r.state.name()));
    }
    if total > 0 {
        srv.config.log.notice(&format!("{} of {total} replicas are in sync when shutting down.", total - lagging));
    }
}

fn finish(srv: &mut Server, host: &mut dyn Host, flags: Flags) -> Result<(), Failed> {
    log_replicas(srv);
    // A background save stops here (its temp file goes with it), as
    // Redis kills its child; but not the first rewrite of an AOF turned
    // on at run time: no file holds the data set yet.
    match persist::bgsave_running(srv) {
        Some(crate::bgsave::Purpose::Rdb | crate::bgsave::Purpose::Repl) => srv.config.log.warning("There is a child saving an .rdb. Killing it!"),
        Some(crate::bgsave::Purpose::AofBase) => {
            if srv.aof.wait_rewrite {
                if flags.force {
                    srv.config.log.warning("Writing initial AOF. Exit anyway.");
                } else {
                    srv.config.log.warning("Writing initial AOF, can't exit.");
                    if srv.supervised_systemd {
                        process::notify_systemd("STATUS=Writing initial AOF, can't exit.\n");
                    }
                    srv.config.log.warning("Errors trying to shut down the server. Check the logs for more information.");
                    return Err(Failed);
                }
            }
            srv.config.log.warning("There is a child rewriting the AOF. Killing it!");
        }
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
        assert_eq!(abort(&mut srv), Ok(Vec::new()));
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
    fn lagging_replica_makes_it_wait_until_acked() {
        let (mut srv, mut host) = quiet();
        srv.repl.offset = 100;
        srv.repl.replicas.insert(7, crate::repl::Replica { state: ReplicaState::Online, ack_offset: 90, ..Default::default() });
        assert_eq!(prepare(&mut srv, &mut host, Flags::default()), Ok(Progress::Waiting));
        assert!(!srv.shutdown);
        assert!(srv.repl.get_ack, "replicas are asked to acknowledge");
        assert_eq!(srv.paused_at(unix_ms()), Some(true), "writes are held");
        assert!(join(&mut srv, 3));
        assert!(on_cron(&mut srv, &mut host).is_empty());
        assert!(!srv.shutdown, "still lagging");
        srv.repl.replicas.get_mut(&7).unwrap().ack_offset = 100;
        assert!(on_cron(&mut srv, &mut host).is_empty());
        assert!(srv.shutdown);
    }

    #[test]
    fn abort_answers_those_waiting_and_resumes_writes() {
        let (mut srv, mut host) = quiet();
        srv.repl.offset = 100;
        srv.repl.replicas.insert(7, crate::repl::Replica::default());
        assert_eq!(prepare(&mut srv, &mut host, Flags::default()), Ok(Progress::Waiting));
        assert!(remaining_ms(&srv).is_some_and(|ms| ms > 9000));
        assert!(join(&mut srv, 3));
        assert_eq!(abort(&mut srv), Ok(vec![3]));
        assert_eq!(srv.paused_at(unix_ms()), None);
        assert_eq!(remaining_ms(&srv), None);
        assert!(!join(&mut srv, 4));
    }

    #[test]
    fn now_or_a_zero_timeout_does_not_wait() {
        let (mut srv, mut host) = quiet();
        srv.repl.offset = 100;
        srv.repl.replicas.insert(7, crate::repl::Replica::default());
        assert_eq!(prepare(&mut srv, &mut host, Flags { now: true, ..Flags::default() }), Ok(Progress::Exiting));
        let (mut srv, mut host) = quiet();
        srv.config.set("shutdown-timeout", "0", true).unwrap();
        srv.repl.offset = 100;
        srv.repl.replicas.insert(7, crate::repl::Replica::default());
        assert_eq!(prepare(&mut srv, &mut host, Flags::default()), Ok(Progress::Exiting));
    }

    #[test]
    fn flag_words() {
        assert_eq!(Flags::from_words(["nosave", "NOW"]), Flags { nosave: true, now: true, ..Flags::default() });
        assert!(!Flags::from_words([]).any());
    }
}
