//! The command logs: the slow log (SLOWLOG, and Valkey's COMMANDLOG ...
//! slow) and Valkey 8.1's two others, of commands whose request or reply
//! was large (COMMANDLOG ... large-request | large-reply). All three keep
//! the same entry (id, time, a measured value, the arguments cut short as
//! Redis cuts them, the client's address and name), newest first, each
//! with its own ids, threshold and length (`commandlog-*` config, the
//! `slowlog-*` names standing for the slow one).
//!
//! A leaf: it knows nothing of clients or the server; `exec::account`
//! measures a command and offers it to each log.

use std::collections::VecDeque;

/// The kinds of command log, in Valkey's order (the index into
/// `Server::commandlog` and the config arrays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// Execution time in microseconds (the slow log).
    Slow = 0,
    /// Bytes of the request as the client sent it.
    LargeRequest = 1,
    /// Bytes of the reply the command produced.
    LargeReply = 2,
}

impl LogKind {
    /// All kinds, by index.
    pub const ALL: [LogKind; 3] = [LogKind::Slow, LogKind::LargeRequest, LogKind::LargeReply];

    /// The kind named by a COMMANDLOG argument (any case).
    pub fn parse(name: &[u8]) -> Option<LogKind> {
        let n = name.to_ascii_lowercase();
        match n.as_slice() {
            b"slow" => Some(LogKind::Slow),
            b"large-request" => Some(LogKind::LargeRequest),
            b"large-reply" => Some(LogKind::LargeReply),
            _ => None,
        }
    }
}

/// One logged command.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Entry id, counted per log from 0.
    pub id: u64,
    /// Unix time in seconds.
    pub time: i64,
    /// What the log measures: microseconds, or bytes.
    pub value: u64,
    /// The arguments, cut short as Redis does (`cut_args`).
    pub argv: Vec<Vec<u8>>,
    /// Client address.
    pub addr: String,
    /// Client name.
    pub name: Vec<u8>,
}

/// One log, newest entry first.
#[derive(Debug, Default)]
pub struct CommandLog {
    /// The entries, newest first.
    pub entries: VecDeque<Entry>,
    /// The id the next entry gets.
    pub next_id: u64,
}

/// At most this many arguments are kept; the last kept one says how many
/// more there were.
const MAX_ARGS: usize = 32;
/// At most this many bytes of an argument are kept.
const MAX_ARG_BYTES: usize = 128;

/// `argv` as a log keeps it: 32 arguments at most (the last saying how
/// many more there were), each cut at 128 bytes (saying how many more).
pub fn cut_args(argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut args = Vec::with_capacity(argv.len().min(MAX_ARGS));
    for (i, a) in argv.iter().enumerate() {
        if i == MAX_ARGS - 1 && argv.len() > MAX_ARGS {
            args.push(format!("... ({} more arguments)", argv.len() - MAX_ARGS + 1).into_bytes());
            break;
        }
        if a.len() > MAX_ARG_BYTES {
            let mut t = a[..MAX_ARG_BYTES].to_vec();
            t.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes());
            args.push(t);
        } else {
            args.push(a.clone());
        }
    }
    args
}

impl CommandLog {
    /// Adds an entry (the caller checked the threshold), then drops the
    /// oldest ones beyond `max_len`.
    pub fn push(&mut self, argv: Vec<Vec<u8>>, value: u64, time: i64, addr: &str, name: &[u8], max_len: usize) {
        let entry = Entry { id: self.next_id, time, value, argv, addr: addr.to_string(), name: name.to_vec() };
        self.next_id += 1;
        self.entries.push_front(entry);
        self.entries.truncate(max_len);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes every entry (ids go on from where they were, as in Redis).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_in_any_case() {
        assert_eq!(LogKind::parse(b"SLOW"), Some(LogKind::Slow));
        assert_eq!(LogKind::parse(b"Large-Request"), Some(LogKind::LargeRequest));
        assert_eq!(LogKind::parse(b"large-reply"), Some(LogKind::LargeReply));
        assert_eq!(LogKind::parse(b"large"), None);
    }

    #[test]
    fn push_keeps_the_newest_and_counts_ids() {
        let mut log = CommandLog::default();
        for i in 0..5 {
            log.push(vec![b"get".to_vec()], i, 0, "127.0.0.1:1", b"", 3);
        }
        assert_eq!(log.len(), 3);
        assert_eq!(log.entries.iter().map(|e| e.id).collect::<Vec<_>>(), [4, 3, 2]);
        log.clear();
        log.push(vec![], 9, 0, "", b"", 3);
        assert_eq!(log.entries[0].id, 5);
    }

    #[test]
    fn long_commands_are_cut() {
        let argv: Vec<Vec<u8>> = (0..40).map(|i| vec![b'a'; if i == 1 { 130 } else { 1 }]).collect();
        let cut = cut_args(&argv);
        assert_eq!(cut.len(), 32);
        assert_eq!(cut[1], [vec![b'a'; 128], b"... (2 more bytes)".to_vec()].concat());
        assert_eq!(cut[31], b"... (9 more arguments)".to_vec());
    }
}
