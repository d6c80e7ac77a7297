//! Process chores of a server that stands in for redis-server: the pid
//! file, the shutdown signals, reporting readiness to systemd, and running
//! in the background (`daemonize yes`).
//!
//! Everything here is safe std code. Daemonizing does not fork (forking a
//! process that may already run threads needs `unsafe`): the server starts
//! a copy of itself with the same arguments, detached (its own process
//! group, standard streams on /dev/null), and the first process exits 0 as
//! soon as the copy is started, which is what `daemonize yes` promises a
//! caller. The copy knows it is the daemon by `DAEMON_ENV`.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Set in the environment of the background copy started by `daemonize`.
pub const DAEMON_ENV: &str = "DENSEKV_DAEMONIZED";

/// Where Redis puts the pid file of a daemon that names none.
pub const DEFAULT_PIDFILE: &str = "/var/run/redis.pid";

/// SHUTDOWN's modifiers, also the words of shutdown-on-sigterm/-sigint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownFlags {
    /// Save even without save points.
    pub save: bool,
    /// Do not save even with save points.
    pub nosave: bool,
    /// Do not wait for lagging replicas.
    pub now: bool,
    /// Exit even if saving failed.
    pub force: bool,
}

impl ShutdownFlags {
    /// Flags from words (`save`, `nosave`, `now`, `force`; others ignored).
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> ShutdownFlags {
        let mut f = ShutdownFlags::default();
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

/// A signal that asks the server to shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C); a second one while the first is pending exits at once.
    Int,
    /// SIGTERM (service managers, `kill`).
    Term,
}

impl Signal {
    /// The signal's name as Redis logs it.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }
}

/// Writes our pid and a newline to `path`.
///
/// Errors: the file could not be written (Redis logs it and goes on).
pub fn write_pidfile(path: &str) -> std::io::Result<()> {
    std::fs::write(path, format!("{}\n", std::process::id()))
}

/// Removes the pid file; a missing file is not an error worth reporting.
pub fn remove_pidfile(path: &str) {
    let _ = std::fs::remove_file(path);
}

/// True if this process is the background copy `daemonize` started.
pub fn is_daemon_copy() -> bool {
    std::env::var_os(DAEMON_ENV).is_some()
}

/// Starts the background copy of this server (same program, arguments and
/// starting directory; `stdin_text`, the config read from standard input,
/// is handed to it on its standard input) and returns once it runs.
///
/// Errors: the copy could not be started.
pub fn daemonize(start_dir: &std::path::Path, stdin_text: Option<&str>) -> std::io::Result<()> {
    let mut argv = std::env::args_os();
    let argv0 = argv.next().unwrap_or_default();
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg0(argv0)
        .args(argv)
        .env(DAEMON_ENV, "1")
        .current_dir(start_dir)
        .stdin(if stdin_text.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    if let (Some(text), Some(mut pipe)) = (stdin_text, child.stdin.take()) {
        pipe.write_all(text.as_bytes())?;
    }
    Ok(())
}

/// Decides whether systemd supervises us, as Redis does for `supervised`:
/// `systemd` or `auto` with NOTIFY_SOCKET set. Returns (supervised, a
/// warning to log when `systemd` was asked for without NOTIFY_SOCKET).
pub fn systemd_supervision(mode: &str) -> (bool, Option<&'static str>) {
    let socket = std::env::var_os("NOTIFY_SOCKET").is_some_and(|s| !s.is_empty());
    match mode {
        "systemd" if !socket => (false, Some("systemd supervision requested or auto-detected, but NOTIFY_SOCKET environment variable not found!")),
        "systemd" => (true, None),
        "auto" => (socket, None),
        _ => (false, None),
    }
}

/// Sends `state` (e.g. `READY=1\n`) to systemd's notification socket, as
/// sd_notify does. Returns false if there is no socket or sending failed.
pub fn notify_systemd(state: &str) -> bool {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return false };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else { return false };
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        // An abstract socket name.
        use std::os::linux::net::SocketAddrExt;
        let Ok(addr) = std::os::unix::net::SocketAddr::from_abstract_name(name) else { return false };
        sock.send_to_addr(state.as_bytes(), &addr).is_ok()
    } else {
        sock.send_to(state.as_bytes(), path).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pidfile_round_trip() {
        let path = std::env::temp_dir().join(format!("densekv-pid-{}", std::process::id()));
        let p = path.to_string_lossy().into_owned();
        write_pidfile(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{}\n", std::process::id()));
        remove_pidfile(&p);
        assert!(!path.exists());
        remove_pidfile(&p);
    }

    #[test]
    fn notify_reaches_a_socket() {
        let dir = std::env::temp_dir().join(format!("densekv-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        // No environment edits in tests (they run in parallel): send directly.
        let sock = std::os::unix::net::UnixDatagram::unbound().unwrap();
        sock.send_to(b"READY=1\n", &path).unwrap();
        let mut buf = [0u8; 32];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(systemd_supervision("no"), (false, None));
    }
}

/// argv[0] as the server was started: the title's `{title}`.
static EXEC_NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records argv[0], once, before the command line is written over.
pub fn remember_exec_name(argv0: &str) {
    let _ = EXEC_NAME.set(argv0.to_string());
}

/// argv[0] as the server was started.
pub fn exec_name() -> &'static str {
    EXEC_NAME.get().map_or("densekv-server", String::as_str)
}

/// What `proc-title-template`'s variables stand for.
#[derive(Debug, Default, Clone)]
pub struct TitleVars {
    /// The program as it was started (argv[0]).
    pub title: String,
    /// `<first bind address or *>:<port, or tls-port>`, or
    /// `unixsocket:<path>` when the server listens on neither port.
    pub listen_addr: String,
    /// `[cluster]` on a cluster node, else empty.
    pub server_mode: String,
    /// The config file's path, `-` without one.
    pub config_file: String,
    pub port: u16,
    pub tls_port: u16,
    pub unixsocket: String,
}

/// Expands `template` as Redis does: `{name}` is a variable (`title`,
/// `listen-addr`, `server-mode`, `config-file`, `port`, `tls-port`,
/// `unixsocket`), `{{` and `}}` are literal braces, and the result is
/// trimmed of spaces. None for an unknown variable or a lone brace.
pub fn expand_title(template: &str, v: &TitleVars) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return None;
        }
        let end = tail.find('}')?;
        let value = match &tail[1..end] {
            "title" => v.title.clone(),
            "listen-addr" => v.listen_addr.clone(),
            "server-mode" => v.server_mode.clone(),
            "config-file" => v.config_file.clone(),
            "port" => v.port.to_string(),
            "tls-port" => v.tls_port.to_string(),
            "unixsocket" => v.unixsocket.clone(),
            _ => return None,
        };
        out.push_str(&value);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Some(out.trim_matches(' ').to_string())
}

/// Writes `title` over the process's command line, which `ps` and
/// /proc/<pid>/cmdline show (`set-proc-title`). The bytes written are the
/// command line's own (found through /proc/self/stat and written through
/// /proc/self/mem, no `unsafe`), so a title longer than the command line
/// is cut to its length; Redis moves the environment away to make room.
///
/// Errors: the kernel did not say where the command line is, or refused
/// the write.
pub fn set_title(title: &str) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind, Seek, SeekFrom};
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The fields after the command name's closing parenthesis start at
    // field 3 (the state); arg_start and arg_end are fields 48 and 49.
    let after = stat.rfind(')').map(|i| &stat[i + 1..]).ok_or_else(|| Error::from(ErrorKind::InvalidData))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok()).ok_or_else(|| Error::from(ErrorKind::InvalidData));
    let (start, end) = (field(48)?, field(49)?);
    if end <= start {
        return Err(ErrorKind::InvalidData.into());
    }
    let mut bytes = vec![0u8; (end - start) as usize];
    let n = title.len().min(bytes.len() - 1);
    bytes[..n].copy_from_slice(&title.as_bytes()[..n]);
    let mut mem = std::fs::OpenOptions::new().write(true).open("/proc/self/mem")?;
    mem.seek(SeekFrom::Start(start))?;
    mem.write_all(&bytes)
}

#[cfg(test)]
mod title_tests {
    use super::*;

    #[test]
    fn templates_expand_as_redis_expands_them() {
        let v = TitleVars { title: "/bin/densekv-server".into(), listen_addr: "*:6379".into(), port: 6379, config_file: "-".into(), ..TitleVars::default() };
        assert_eq!(expand_title("{title} {listen-addr} {server-mode}", &v).as_deref(), Some("/bin/densekv-server *:6379"));
        assert_eq!(expand_title("x {{port}} {port} {tls-port} {config-file}", &v).as_deref(), Some("x {port} 6379 0 -"));
        for bad in ["{nope}", "{title", "title}", "{"] {
            assert_eq!(expand_title(bad, &v), None, "{bad}");
        }
    }
}
