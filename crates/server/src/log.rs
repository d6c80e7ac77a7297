//! The server log, written the way redis-server writes its own, because
//! Redis's test suite, service managers and log tooling wait for and grep
//! its lines.
//!
//! A line is `<pid>:<role> <dd> <Mon> <yyyy> <hh>:<mm>:<ss>.<mmm> <c> <message>`
//! in local time, where the role is `M` (a master) or `S` (a replica) and
//! `c` marks the level: `.` debug, `-` verbose, `*` notice, `#` warning.
//! `logfile ""` writes to standard output; a path is opened in append mode
//! for every line and closed again, as Redis does, so a log rotated away
//! (logrotate's move-and-create) is followed without a reopen signal.
//!
//! With `syslog-enabled yes` each message also goes to the system log
//! (the `/dev/log` socket, as the C library's syslog sends it): `<PRI>` for
//! `syslog-facility` and the level (debug, info, notice, warning), the
//! time, `syslog-ident[pid]: ` and the message.
//!
//! Write errors are ignored: losing a log line must never stop the server.

use std::fs::OpenOptions;
use std::io::Write;

/// How much is logged: `loglevel`. Ordered from most to least verbose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Lots of information, useful for development.
    Debug,
    /// Many rarely useful things, but not a mess like debug.
    Verbose,
    /// Moderately verbose, what production wants.
    Notice,
    /// Only very important or critical messages.
    Warning,
    /// Nothing at all (`loglevel nothing`); never passed to `log`.
    Nothing,
}

impl Level {
    /// The level named by a `loglevel` value; None for an unknown word.
    pub fn parse(name: &str) -> Option<Level> {
        Some(match name.to_ascii_lowercase().as_str() {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            "nothing" => Level::Nothing,
            _ => return None,
        })
    }

    /// The character a line of this level carries.
    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning | Level::Nothing => '#',
        }
    }
}

/// Where and how much to log; cheap to clone. The configuration keeps one
/// in step with `loglevel`, `logfile` and `replicaof`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    /// Lines below this level are dropped.
    pub level: Level,
    /// The log file; None for standard output.
    pub file: Option<String>,
    /// `M` for a master, `S` for a replica.
    pub role: char,
    /// Where the system log takes the messages too (`syslog-enabled`).
    pub syslog: Option<Syslog>,
}

/// `syslog-ident` and `syslog-facility`, as the system log names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Syslog {
    pub ident: String,
    /// The facility's code: user 1, local0 to local7 16 to 23.
    pub facility: u8,
}

impl Syslog {
    /// The facility code of a `syslog-facility` word.
    pub fn facility_code(name: &str) -> u8 {
        match name.strip_prefix("local").and_then(|n| n.parse::<u8>().ok()) {
            Some(n) if n <= 7 => 16 + n,
            _ => 1,
        }
    }

    /// One message as the system log's socket takes it.
    fn datagram(&self, level: Level, msg: &str) -> String {
        let severity = match level {
            Level::Debug => 7,
            Level::Verbose => 6,
            Level::Notice => 5,
            Level::Warning | Level::Nothing => 4,
        };
        let pri = u32::from(self.facility) * 8 + severity;
        let time = chrono::Local::now().format("%b %e %H:%M:%S");
        format!("<{pri}>{time} {}[{}]: {msg}", self.ident, std::process::id())
    }

    fn send(&self, level: Level, msg: &str) {
        // One unbound socket for the process's messages, made at the first.
        static SOCK: std::sync::OnceLock<Option<std::os::unix::net::UnixDatagram>> = std::sync::OnceLock::new();
        if let Some(sock) = SOCK.get_or_init(|| std::os::unix::net::UnixDatagram::unbound().ok()) {
            let _ = sock.send_to(self.datagram(level, msg).as_bytes(), "/dev/log");
        }
    }
}

impl Default for Log {
    fn default() -> Self {
        Log { level: Level::Notice, file: None, role: 'M', syslog: None }
    }
}

impl Log {
    /// True if a line of `level` would be written.
    pub fn enabled(&self, level: Level) -> bool {
        level != Level::Nothing && level >= self.level
    }

    /// Writes one line at `level`, if the configured level lets it through.
    pub fn log(&self, level: Level, msg: &str) {
        if !self.enabled(level) {
            return;
        }
        self.raw(&line(std::process::id(), self.role, &stamp(), level.mark(), msg));
        if let Some(s) = &self.syslog {
            s.send(level, msg);
        }
    }

    /// A debug line.
    pub fn debug(&self, msg: &str) {
        self.log(Level::Debug, msg);
    }

    /// A verbose line.
    pub fn verbose(&self, msg: &str) {
        self.log(Level::Verbose, msg);
    }

    /// A notice line.
    pub fn notice(&self, msg: &str) {
        self.log(Level::Notice, msg);
    }

    /// A warning line.
    pub fn warning(&self, msg: &str) {
        self.log(Level::Warning, msg);
    }

    /// A warning in the form Redis uses for what its signal handler logs:
    /// `<pid>:signal-handler (<unix seconds>) <message>`.
    pub fn signal_line(&self, msg: &str) {
        if !self.enabled(Level::Warning) {
            return;
        }
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.raw(&format!("{}:signal-handler ({secs}) {msg}\n", std::process::id()));
    }

    /// Writes `text` as it is (it carries its own newlines).
    pub fn raw(&self, text: &str) {
        match &self.file {
            None => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            }
            Some(path) => {
                if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
                    let _ = f.write_all(text.as_bytes());
                }
            }
        }
    }
}

/// The time part of a line, local time to the millisecond:
/// `14 Mar 2025 09:26:53.123`.
fn stamp() -> String {
    chrono::Local::now().format("%d %b %Y %H:%M:%S%.3f").to_string()
}

/// One formatted line, newline included.
fn line(pid: u32, role: char, stamp: &str, mark: char, msg: &str) -> String {
    format!("{pid}:{role} {stamp} {mark} {msg}\n")
}

/// The first line of `reply` (at most 4096 bytes of it), for a log line.
pub fn first_line(reply: &[u8]) -> String {
    let end = reply.windows(2).position(|w| w == b"\r\n").unwrap_or(reply.len()).min(4096);
    String::from_utf8_lossy(&reply[..end]).into_owned()
}

/// An I/O error's text without Rust's ` (os error N)` suffix, as C's
/// strerror prints it (Redis shows that text in its errors and logs).
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(at) => s[..at].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format_matches_redis() {
        assert_eq!(line(42, 'M', "01 Jan 2025 00:00:00.007", '*', "Server initialized"), "42:M 01 Jan 2025 00:00:00.007 * Server initialized\n");
        let s = stamp();
        // dd Mon yyyy hh:mm:ss.mmm
        assert_eq!(s.len(), 24, "{s}");
        assert_eq!(&s[2..3], " ");
        assert_eq!(&s[20..21], ".");
    }

    #[test]
    fn levels_filter() {
        let log = Log { level: Level::Notice, ..Log::default() };
        assert!(log.enabled(Level::Warning) && log.enabled(Level::Notice));
        assert!(!log.enabled(Level::Verbose) && !log.enabled(Level::Debug));
        let none = Log { level: Level::Nothing, ..Log::default() };
        assert!(!none.enabled(Level::Warning));
        assert_eq!(Level::parse("VERBOSE"), Some(Level::Verbose));
        assert_eq!(Level::parse("loud"), None);
        assert_eq!([Level::Debug, Level::Verbose, Level::Notice, Level::Warning].map(Level::mark), ['.', '-', '*', '#']);
    }

    #[test]
    fn file_lines_append() {
        let path = std::env::temp_dir().join(format!("densekv-log-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let log = Log { file: Some(path.to_string_lossy().into_owned()), ..Log::default() };
        log.notice("one");
        log.verbose("dropped");
        log.warning("two");
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].ends_with(" * one") && lines[1].ends_with(" # two"), "{text}");
        assert!(lines[0].starts_with(&format!("{}:M ", std::process::id())));
    }
}
