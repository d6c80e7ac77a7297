//! What the log records when the server itself goes wrong, written to the
//! log the operator configured: standard error alone (where Rust reports a
//! panic) is often discarded by a daemon or a service manager.
//!
//! - **A panic** (a bug) writes a report to the log: the message and where
//!   it was raised, the thread, the command the executor was running (its
//!   name and argument count; the arguments are user data and stay out),
//!   and the stack trace. Then the panic goes on as before: the default
//!   hook's message on standard error, and a panic on the executor ends the
//!   process. With `use-exit-on-panic yes` the process exits with status 1
//!   right after the report, as Redis exits instead of aborting.
//! - **SIGALRM** is logged (`Received SIGALRM`) and survived, as Redis
//!   survives it; its default action would end the process. The event loop
//!   takes it with SIGTERM and SIGINT (`net.rs`), so no handler code of
//!   ours runs in signal context.
//! - **`watchdog-period`** (milliseconds, 0 off): a thread watches the event
//!   loop's heartbeat and logs `--- WATCHDOG TIMER EXPIRED ---` once per
//!   turn that runs longer than the period; when the command that held the
//!   loop returns, its name and time are logged too. Redis arms a timer
//!   signal and prints the stuck thread's stack from the handler; watching
//!   a heartbeat from a thread needs no signal handler (and no `unsafe`),
//!   and the command's name is what an operator acts on. As in Redis, a
//!   period under two cron intervals is raised to that.
//!
//! Not here: crash reports for fatal signals (SIGSEGV, SIGBUS, SIGILL,
//! SIGFPE, SIGABRT). Those come from memory errors, which safe Rust does
//! not make; catching them takes a signal handler that can only use
//! async-signal-safe calls, and the process dies by the signal as before.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::log::Log;

/// The log reports go to, kept in step with the configuration by
/// `configure` (start-up, then every cron tick).
static LOG: Mutex<Option<Log>> = Mutex::new(None);
/// `use-exit-on-panic`.
static EXIT_ON_PANIC: AtomicBool = AtomicBool::new(false);
/// `watchdog-period` in ms after the minimum is applied; 0: off.
static WATCHDOG_MS: AtomicU64 = AtomicU64::new(0);
/// When the event loop's current turn began, in ms since `epoch()` plus
/// one; 0 while it waits for events.
static TURN_SINCE: AtomicU64 = AtomicU64::new(0);
/// Set by the watchdog when it reported a stalled turn; the executor
/// takes it when the command that stalled returns.
static STALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The command this thread is running (the executor's), for a report.
    static RUNNING: Cell<Option<(&'static str, usize)>> = const { Cell::new(None) };
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64
}

fn log() -> Option<Log> {
    LOG.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Installs the panic report; once per process, before the first thread.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = epoch();
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(log) = log() {
                report_panic(&log, info);
            }
            if EXIT_ON_PANIC.load(Ordering::Relaxed) {
                std::process::exit(1);
            }
            default(info);
        }));
    });
}

/// Takes the settings reports depend on from `config`: the log
/// (`logfile`, `loglevel`; none with `crash-log-enabled no`),
/// `use-exit-on-panic` and `watchdog-period`. At start-up, on CONFIG SET,
/// and every cron tick (the log's role letter follows replication).
pub fn configure_from(config: &Config) {
    let log = config.flag("crash-log-enabled").then_some(&config.log);
    configure(log, config.flag("use-exit-on-panic"), config.get("watchdog-period").and_then(|v| v.parse().ok()).unwrap_or(0), config.hz);
}

/// `configure_from`'s work: `watchdog_ms` is raised to two cron intervals
/// at `hz`; the watchdog thread starts the first time it is on.
fn configure(log: Option<&Log>, exit_on_panic: bool, watchdog_ms: u64, hz: u64) {
    {
        let mut cur = LOG.lock().unwrap_or_else(|p| p.into_inner());
        if cur.as_ref() != log {
            *cur = log.cloned();
        }
    }
    EXIT_ON_PANIC.store(exit_on_panic, Ordering::Relaxed);
    let period = if watchdog_ms == 0 { 0 } else { watchdog_ms.max(2 * (1000 / hz.max(1))) };
    WATCHDOG_MS.store(period, Ordering::Relaxed);
    if period > 0 {
        static WATCHDOG: Once = Once::new();
        WATCHDOG.call_once(|| {
            let _ = std::thread::Builder::new().name("watchdog".into()).spawn(watch);
        });
    }
}

/// The event loop starts a turn (its poll returned). Only a watchdog
/// reads the time, so without one the clock is not read.
pub fn turn_started() {
    if WATCHDOG_MS.load(Ordering::Relaxed) != 0 {
        TURN_SINCE.store(now_ms() + 1, Ordering::Relaxed);
    }
}

/// The event loop ends a turn (it is about to wait for events). A stall
/// no command took the blame for (cron, say) is forgotten with its turn.
pub fn turn_ended() {
    TURN_SINCE.store(0, Ordering::Relaxed);
    STALLED.store(false, Ordering::Relaxed);
}

/// The command a thread is running: its name and argument count.
pub type Running = Option<(&'static str, usize)>;

/// The executor starts `name` with `argc` arguments (name included).
/// Returns the command it ran in (EXEC, a script), for `returned`.
pub fn running(name: &'static str, argc: usize) -> Running {
    RUNNING.with(|r| r.replace(Some((name, argc))))
}

/// The executor's command returned after `took`, back in `outer`. It is
/// named in the log when the watchdog reported a stall in its turn and it
/// took at least the period itself.
pub fn returned(outer: Running, took: Duration) {
    let cmd = RUNNING.with(|r| r.replace(outer));
    if STALLED.load(Ordering::Relaxed) && took.as_millis() as u64 >= WATCHDOG_MS.load(Ordering::Relaxed) && STALLED.swap(false, Ordering::Relaxed) {
        if let (Some(log), Some((name, _))) = (log(), cmd) {
            log.warning(&format!("Watchdog: the command that held the event loop was {name}, for {} ms", took.as_millis()));
        }
    }
}

/// The watchdog thread: checks the heartbeat a few times per period.
fn watch() {
    let mut reported = 0;
    loop {
        let period = WATCHDOG_MS.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(if period == 0 { 100 } else { (period / 4).clamp(1, 50) }));
        if period == 0 {
            continue;
        }
        let since = TURN_SINCE.load(Ordering::Relaxed);
        if since == 0 || since == reported {
            continue;
        }
        let busy = now_ms().saturating_sub(since - 1);
        if busy < period {
            continue;
        }
        reported = since;
        if let Some(log) = log() {
            log.warning("--- WATCHDOG TIMER EXPIRED ---");
            log.warning(&format!("The event loop has been busy for {busy} ms (watchdog-period {period} ms)."));
        }
        STALLED.store(true, Ordering::Relaxed);
    }
}

/// The report of a panic, in the log's line format.
fn report_panic(log: &Log, info: &std::panic::PanicHookInfo<'_>) {
    let msg = info.payload().downcast_ref::<&str>().copied().or_else(|| info.payload().downcast_ref::<String>().map(String::as_str)).unwrap_or("(a panic without a message)");
    let place = info.location().map_or_else(String::new, |l| format!(" #{}:{}", l.file(), l.line()));
    let thread = std::thread::current();
    let mut lines = vec![
        "=== DENSEKV BUG REPORT START: Cut & paste starting from here ===".to_string(),
        format!("Guru Meditation: {msg}{place}"),
        format!("Panicked in thread '{}'", thread.name().unwrap_or("unnamed")),
    ];
    if let Some((name, argc)) = RUNNING.with(Cell::get) {
        lines.push(format!("While running the command {name} ({argc} arguments; their values are not logged)"));
    }
    for l in &lines {
        log.warning(l);
    }
    let trace = std::backtrace::Backtrace::force_capture();
    log.raw(&format!("\n------ STACK TRACE ------\n{trace}\n------ STACK TRACE DONE ------\n\n"));
    log.warning("=== DENSEKV BUG REPORT END. Make sure to include from START to END. ===");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_period_is_at_least_two_cron_intervals() {
        configure(None, false, 50, 10);
        assert_eq!(WATCHDOG_MS.load(Ordering::Relaxed), 200);
        configure(None, false, 500, 10);
        assert_eq!(WATCHDOG_MS.load(Ordering::Relaxed), 500);
        configure(None, false, 0, 10);
        assert_eq!(WATCHDOG_MS.load(Ordering::Relaxed), 0);
    }
}
