//! The write stream: every write's effects, as the commands Redis would
//! propagate, in the order they happened. Dispatch feeds it from one place
//! (`exec::propagate`); the AOF writer and replicas will consume it as
//! [`Sink`]s, and no command writes to either directly (DESIGN §5).
//!
//! What it adds to the bare commands, as Redis does:
//! - `SELECT <db>` before a command whose database differs from the last
//!   one sent (each sink is told the database it starts in when it joins);
//! - `MULTI` ... `EXEC` around what one top-level command propagated when
//!   that is more than one command (EXEC of a transaction, a script or
//!   function, which propagate their effects, not themselves).
//!
//! - a script's `redis.set_repl` (`server.set_repl`): while it holds some
//!   targets back (`hold`), what it writes goes only to the others (the AOF
//!   or the replicas), as Redis marks each propagated op with its targets.
//!   Each sink remembers its own selected database, since the two may then
//!   have seen different SELECTs.
//!
//! With no sink attached the stream costs one branch per write.

/// A consumer of the write stream (the AOF writer, a replica link).
pub trait Sink {
    /// Receives one command to replay, in order.
    fn feed(&mut self, argv: &[Vec<u8>]);
    /// What kind of consumer it is, so it can be detached by name.
    fn name(&self) -> &'static str {
        ""
    }
}

/// The write stream and its consumers.
#[derive(Default)]
pub struct Feed {
    /// Each consumer with the database it last saw selected.
    sinks: Vec<(Box<dyn Sink>, Option<usize>)>,
    /// Nesting of `exec::run` calls (EXEC and scripts run commands inside).
    depth: u32,
    /// What the current top-level command propagated so far, each with the
    /// targets it was held back from.
    pending: Vec<(usize, Vec<Vec<u8>>, u8)>,
    /// Targets held back for now (`TO_AOF`, `TO_REPLICAS`): a script's
    /// `set_repl`.
    held: u8,
    /// Set by the running command when it is not to be replayed as sent
    /// (`replace_current`, `skip_current`); dispatch takes it after the call.
    rewrite: Option<Rewrite>,
}

/// How the running command is propagated instead of as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrite {
    /// Not at all (what it changed went out as other commands).
    Skip,
    /// As this command.
    As(Vec<Vec<u8>>),
}

/// The AOF as a target of the stream (Redis's PROPAGATE_AOF).
pub const TO_AOF: u8 = 1;
/// The replicas as a target of the stream (Redis's PROPAGATE_REPL).
pub const TO_REPLICAS: u8 = 2;

/// The target a sink is: the AOF writer, or a replication stream.
fn target_of(sink: &dyn Sink) -> u8 {
    if sink.name() == "aof" {
        TO_AOF
    } else {
        TO_REPLICAS
    }
}

impl Feed {
    /// True when nobody consumes the stream.
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    /// Attaches a consumer; the next command it gets is preceded by SELECT.
    pub fn attach(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push((sink, None));
        self.reselect();
    }

    /// The next command goes out after a SELECT (a replica starts from an
    /// image and must learn the database the stream is in).
    pub fn reselect(&mut self) {
        for (_, db) in &mut self.sinks {
            *db = None;
        }
    }

    /// The database the replication stream last saw selected (or, with no
    /// replication stream, any sink), if any.
    pub fn selected(&self) -> Option<usize> {
        let repl = self.sinks.iter().find(|(s, _)| target_of(s.as_ref()) == TO_REPLICAS);
        repl.or(self.sinks.first()).and_then(|(_, db)| *db)
    }

    /// True if a consumer called `name` is attached.
    pub fn has(&self, name: &str) -> bool {
        self.sinks.iter().any(|(s, _)| s.name() == name)
    }

    /// Detaches the consumers called `name` (the AOF when turned off or
    /// moved to a new file).
    pub fn detach(&mut self, name: &str) {
        self.sinks.retain(|(s, _)| s.name() != name);
    }

    /// Holds back the targets in `held` (`TO_AOF`, `TO_REPLICAS`, both, or
    /// none) from what is pushed from now on, until changed again; a script
    /// sets it through `set_repl` and clears it when it ends.
    pub fn hold(&mut self, held: u8) {
        self.held = held & (TO_AOF | TO_REPLICAS);
    }

    /// How many commands are running one inside the other (0 between
    /// commands, 1 in a plain command, more inside EXEC or a script).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// A command starts running (top level or nested).
    pub fn enter(&mut self) {
        self.depth += 1;
    }

    /// A command finished; when it was the top-level one, what it
    /// propagated goes out, wrapped in MULTI/EXEC when more than one.
    pub fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 && !self.pending.is_empty() {
            self.flush();
        }
    }

    /// The running command is to be replayed as `argv` (Redis rewrites,
    /// e.g. HEXPIRE to HPEXPIREAT with only the fields it changed).
    pub fn replace_current(&mut self, argv: Vec<Vec<u8>>) {
        self.rewrite = Some(Rewrite::As(argv));
    }

    /// The running command is not to be replayed: what it did went out
    /// as other commands (`push`), or nothing needs replaying.
    pub fn skip_current(&mut self) {
        self.rewrite = Some(Rewrite::Skip);
    }

    /// The rewrite the command that just ran asked for, if any (cleared).
    pub fn take_rewrite(&mut self) -> Option<Rewrite> {
        self.rewrite.take()
    }

    /// Records a write of database `db` to propagate as `argv`.
    pub fn push(&mut self, db: usize, argv: Vec<Vec<u8>>) {
        if self.sinks.is_empty() || self.held == TO_AOF | TO_REPLICAS {
            return;
        }
        self.pending.push((db, argv, self.held));
        if self.depth == 0 {
            // Outside any command (active expiry, cron): out at once.
            self.flush();
        }
    }

    fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let wrap = pending.len() > 1;
        // As in Redis, MULTI and EXEC go to every target even when some of
        // what they wrap was held back from one.
        if wrap {
            self.send(&[b"MULTI".to_vec()], 0, None);
        }
        for (db, argv, held) in &pending {
            self.send(argv, *held, Some(*db));
        }
        if wrap {
            self.send(&[b"EXEC".to_vec()], 0, None);
        }
    }

    /// Sends `argv` to every sink not in `held`, after a SELECT of `db`
    /// to those that last saw another database.
    fn send(&mut self, argv: &[Vec<u8>], held: u8, db: Option<usize>) {
        for (s, selected) in &mut self.sinks {
            if target_of(s.as_ref()) & held != 0 {
                continue;
            }
            if let Some(db) = db {
                if *selected != Some(db) {
                    s.feed(&[b"SELECT".to_vec(), db.to_string().into_bytes()]);
                    *selected = Some(db);
                }
            }
            s.feed(argv);
        }
    }
}

/// The form a command is replayed in when it differs from what the client
/// sent, as Redis rewrites it before propagating: relative and second
/// TTLs become absolute milliseconds at `now` (EXPIRE, PEXPIRE, EXPIREAT
/// -> PEXPIREAT; SETEX, PSETEX, SET EX/PX/EXAT -> SET PXAT; GETEX ->
/// PEXPIREAT or PERSIST), so a replay later does not stretch them; the
/// blocking moves and GETSET replay as the plain command (BRPOPLPUSH ->
/// RPOPLPUSH, BLMOVE -> LMOVE, GETSET -> SET), as Redis sends them. None:
/// replay `argv` as it is.
pub fn replay_form(argv: &[Vec<u8>], now: i64) -> Option<Vec<Vec<u8>>> {
    let name = argv.first()?;
    if name.len() < 3 || !matches!(name[0] | 0x20, b'e' | b'p' | b's' | b'g' | b'b') {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<i64>().ok();
    let at = |v: i64, unit: i64, relative: bool| -> Option<Vec<u8>> {
        let ms = v.checked_mul(unit)?;
        Some((if relative { ms.checked_add(now)? } else { ms }).to_string().into_bytes())
    };
    let pexpireat = |key: &[u8], when: Vec<u8>, rest: &[Vec<u8>]| {
        let mut v = vec![b"PEXPIREAT".to_vec(), key.to_vec(), when];
        v.extend_from_slice(rest);
        v
    };
    match lower.as_slice() {
        b"brpoplpush" if argv.len() == 4 => Some(vec![b"RPOPLPUSH".to_vec(), argv[1].clone(), argv[2].clone()]),
        b"blmove" if argv.len() == 6 => {
            let mut v = vec![b"LMOVE".to_vec()];
            v.extend_from_slice(&argv[1..5]);
            Some(v)
        }
        b"getset" if argv.len() == 3 => Some(vec![b"SET".to_vec(), argv[1].clone(), argv[2].clone()]),
        b"expire" | b"pexpire" | b"expireat" if argv.len() >= 3 => {
            let (unit, rel) = match lower.as_slice() {
                b"expire" => (1000, true),
                b"pexpire" => (1, true),
                _ => (1000, false),
            };
            Some(pexpireat(&argv[1], at(num(&argv[2])?, unit, rel)?, &argv[3..]))
        }
        b"setex" | b"psetex" if argv.len() == 4 => {
            let unit = if lower == b"setex" { 1000 } else { 1 };
            Some(vec![b"SET".to_vec(), argv[1].clone(), argv[3].clone(), b"PXAT".to_vec(), at(num(&argv[2])?, unit, true)?])
        }
        b"set" if argv.len() >= 5 => {
            let mut out = argv.to_vec();
            let mut i = 3;
            while i < out.len() {
                let opt = out[i].to_ascii_lowercase();
                let conv = match opt.as_slice() {
                    b"ex" => Some((1000, true)),
                    b"px" => Some((1, true)),
                    b"exat" => Some((1000, false)),
                    _ => None,
                };
                if let (Some((unit, rel)), Some(v)) = (conv, out.get(i + 1)) {
                    let when = at(num(v)?, unit, rel)?;
                    out[i] = b"PXAT".to_vec();
                    out[i + 1] = when;
                    return Some(out);
                }
                i += 1;
            }
            None
        }
        b"getex" if argv.len() >= 3 => {
            let opt = argv[2].to_ascii_lowercase();
            match opt.as_slice() {
                b"persist" => Some(vec![b"PERSIST".to_vec(), argv[1].clone()]),
                b"ex" | b"px" | b"exat" | b"pxat" if argv.len() == 4 => {
                    let (unit, rel) = match opt.as_slice() {
                        b"ex" => (1000, true),
                        b"px" => (1, true),
                        b"exat" => (1000, false),
                        _ => (1, false),
                    };
                    Some(pexpireat(&argv[1], at(num(&argv[3])?, unit, rel)?, &[]))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    struct Log(Rc<RefCell<Vec<String>>>);

    impl Sink for Log {
        fn feed(&mut self, argv: &[Vec<u8>]) {
            let words: Vec<String> = argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            self.0.borrow_mut().push(words.join(" "));
        }
    }

    fn cmd(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn relative_ttls_replay_as_absolute() {
        let f = |s: &str| replay_form(&cmd(s), 1_000).map(|v| v.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" "));
        assert_eq!(f("EXPIRE k 10 NX").as_deref(), Some("PEXPIREAT k 11000 NX"));
        assert_eq!(f("pexpire k 10").as_deref(), Some("PEXPIREAT k 1010"));
        assert_eq!(f("EXPIREAT k 5").as_deref(), Some("PEXPIREAT k 5000"));
        assert_eq!(f("SETEX k 2 v").as_deref(), Some("SET k v PXAT 3000"));
        assert_eq!(f("SET k v NX EX 1").as_deref(), Some("SET k v NX PXAT 2000"));
        assert_eq!(f("GETEX k PERSIST").as_deref(), Some("PERSIST k"));
        assert_eq!(f("BRPOPLPUSH a b 0").as_deref(), Some("RPOPLPUSH a b"));
        assert_eq!(f("BLMOVE a b LEFT RIGHT 1.5").as_deref(), Some("LMOVE a b LEFT RIGHT"));
        assert_eq!(f("GETSET k v").as_deref(), Some("SET k v"));
        assert_eq!(f("SET k v"), None);
        assert_eq!(f("SADD k v"), None);
    }

    #[test]
    fn select_once_and_wrap_multi_command_units() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut f = Feed::default();
        f.push(0, cmd("SET a 1"));
        assert!(f.pending.is_empty(), "no sink: nothing kept");
        f.attach(Box::new(Log(log.clone())));
        f.enter();
        f.push(0, cmd("SET a 1"));
        f.leave();
        f.enter();
        f.push(0, cmd("SET b 2"));
        f.leave();
        // A transaction: EXEC runs two commands inside it, in db 1.
        f.enter();
        for c in ["INCR x", "DEL y"] {
            f.enter();
            f.push(1, cmd(c));
            f.leave();
        }
        f.leave();
        // Active expiry: outside any command.
        f.push(1, cmd("DEL z"));
        assert_eq!(*log.borrow(), ["SELECT 0", "SET a 1", "SET b 2", "MULTI", "SELECT 1", "INCR x", "DEL y", "EXEC", "DEL z"]);
    }

    struct Aof(Rc<RefCell<Vec<String>>>);

    impl Sink for Aof {
        fn feed(&mut self, argv: &[Vec<u8>]) {
            Log(self.0.clone()).feed(argv);
        }
        fn name(&self) -> &'static str {
            "aof"
        }
    }

    #[test]
    fn held_targets_miss_what_is_pushed_meanwhile() {
        let (repl, aof) = (Rc::new(RefCell::new(Vec::new())), Rc::new(RefCell::new(Vec::new())));
        let mut f = Feed::default();
        f.attach(Box::new(Log(repl.clone())));
        f.attach(Box::new(Aof(aof.clone())));
        // A script: one write to both, one held from replicas (in db 2),
        // one held from both, one to replicas only.
        f.enter();
        f.push(0, cmd("SET a 1"));
        f.hold(TO_REPLICAS);
        f.push(2, cmd("SET b 2"));
        f.hold(TO_AOF | TO_REPLICAS);
        f.push(0, cmd("SET c 3"));
        f.hold(TO_AOF);
        f.push(0, cmd("SET d 4"));
        f.hold(0);
        f.leave();
        assert_eq!(*repl.borrow(), ["MULTI", "SELECT 0", "SET a 1", "SET d 4", "EXEC"]);
        assert_eq!(*aof.borrow(), ["MULTI", "SELECT 0", "SET a 1", "SELECT 2", "SET b 2", "EXEC"]);
        // Each sink selects again where it last saw another database.
        f.push(0, cmd("DEL z"));
        assert_eq!(repl.borrow().last().map(String::as_str), Some("DEL z"));
        assert_eq!(aof.borrow()[6..], ["SELECT 0", "DEL z"]);
        assert_eq!(f.selected(), Some(0));
    }
}
