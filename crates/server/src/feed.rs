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
    sinks: Vec<Box<dyn Sink>>,
    /// The database the sinks last saw selected.
    db: Option<usize>,
    /// Nesting of `exec::run` calls (EXEC and scripts run commands inside).
    depth: u32,
    /// What the current top-level command propagated so far.
    pending: Vec<(usize, Vec<Vec<u8>>)>,
}

impl Feed {
    /// True when nobody consumes the stream.
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    /// Attaches a consumer; the next command it gets is preceded by SELECT.
    pub fn attach(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push(sink);
        self.db = None;
    }

    /// Detaches the consumers called `name` (the AOF when turned off or
    /// moved to a new file).
    pub fn detach(&mut self, name: &str) {
        self.sinks.retain(|s| s.name() != name);
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

    /// Records a write of database `db` to propagate as `argv`.
    pub fn push(&mut self, db: usize, argv: Vec<Vec<u8>>) {
        if self.sinks.is_empty() {
            return;
        }
        self.pending.push((db, argv));
        if self.depth == 0 {
            // Outside any command (active expiry, cron): out at once.
            self.flush();
        }
    }

    fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let wrap = pending.len() > 1;
        if wrap {
            self.send(&[b"MULTI".to_vec()]);
        }
        for (db, argv) in &pending {
            if self.db != Some(*db) {
                self.send(&[b"SELECT".to_vec(), db.to_string().into_bytes()]);
                self.db = Some(*db);
            }
            self.send(argv);
        }
        if wrap {
            self.send(&[b"EXEC".to_vec()]);
        }
    }

    fn send(&mut self, argv: &[Vec<u8>]) {
        for s in &mut self.sinks {
            s.feed(argv);
        }
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
}
