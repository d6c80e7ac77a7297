//! The cluster config file (`cluster-config-file`, nodes.conf) on disk:
//! the lock that keeps two processes from sharing one, and the atomic
//! write. What the file says is the cluster state machine's business
//! (`Cluster::load` and `Cluster::config_text`); this module moves its
//! text only.
//!
//! As Redis: the file is locked with flock (exclusive, non-blocking) for
//! the life of the process, so a second node started on the same file
//! exits with Redis's "already used" warning; a save writes a temporary
//! file beside it (`<file>.tmp-<pid>-<ms>`), fsyncs it when asked, and
//! renames it over the old one. A rename gives the file a new inode, which
//! the old lock does not cover, so the new file is locked again after each
//! save (Redis keeps its lock on the replaced inode only).
//!
//! Once the node runs, saves go through `ConfWriter`, a thread that writes
//! the latest text it was given: the event loop does not wait for a save
//! unless it asked for an fsync. Redis 7.0 writes the file in place, which
//! costs little; a temporary file, a rename and a new lock cost several
//! hundred microseconds, and `redis-cli --cluster reshard` asks for four
//! saves per slot it moves.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::log::Log;

/// The open, locked cluster config file.
#[derive(Debug)]
pub struct NodesConf {
    path: PathBuf,
    /// Holds the flock; never read or written.
    lock: File,
}

/// Why the file cannot be used; each carries Redis's log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// Another process holds the lock.
    Locked(String),
    /// It could not be opened, locked or read.
    Failed(String),
}

impl OpenError {
    /// The warning to log before exiting.
    pub fn message(&self) -> &str {
        match self {
            OpenError::Locked(m) | OpenError::Failed(m) => m,
        }
    }
}

/// Takes the lock on `path` (relative to the working directory, which is
/// `dir`), creating the file if missing.
fn lock(path: &Path) -> Result<File, OpenError> {
    let name = path.display();
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| OpenError::Failed(format!("Can't open {name} in order to acquire a lock: {}", crate::config::strerror(&e))))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(TryLockError::WouldBlock) => Err(OpenError::Locked(format!(
            "Sorry, the cluster configuration file {name} is already used by a different Redis Cluster node. Please make sure that different nodes use different cluster configuration files."
        ))),
        Err(TryLockError::Error(e)) => Err(OpenError::Failed(format!("Impossible to lock {name}: {}", crate::config::strerror(&e)))),
    }
}

impl NodesConf {
    /// Locks `path` and reads it: the text, or None when the file is new
    /// or empty (a fresh node, as Redis takes an empty file).
    ///
    /// Errors: locked by another process, or unreadable (Redis's lines).
    pub fn open(path: &str) -> Result<(NodesConf, Option<String>), OpenError> {
        let p = PathBuf::from(path);
        let lock = lock(&p)?;
        let text = match std::fs::read(&p) {
            Ok(b) if b.is_empty() => None,
            Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(OpenError::Failed(format!("Loading the cluster node config from {path}: {}", crate::config::strerror(&e)))),
        };
        Ok((NodesConf { path: p, lock }, text))
    }

    /// Replaces the file's content with `text` atomically: a temporary file
    /// in the same directory, written, fsynced when `fsync` (the directory
    /// too, after the rename), renamed over the file; then locked again.
    ///
    /// Returns the handle that locked the replaced file, for the caller to
    /// close off the event loop where it can: it is the replaced inode's
    /// last handle, and closing it frees the inode, which waits for that
    /// file's writeback to end (milliseconds on a busy disk).
    ///
    /// Errors: any step failed; the old file is left as it was.
    pub fn save(&mut self, text: &str, fsync: bool) -> std::io::Result<Option<File>> {
        let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        let mut tmp_name = self.path.clone().into_os_string();
        tmp_name.push(format!(".tmp-{}-{ms}", std::process::id()));
        let tmp = PathBuf::from(tmp_name);
        let written = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            if fsync {
                f.sync_all()?;
            }
            std::fs::rename(&tmp, &self.path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if fsync {
            let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            File::open(dir)?.sync_all()?;
        }
        // The new inode gets the lock; the old one goes with its handle.
        if let Ok(f) = OpenOptions::new().write(true).open(&self.path) {
            if f.try_lock().is_ok() {
                return Ok(Some(std::mem::replace(&mut self.lock, f)));
            }
        }
        Ok(None)
    }

    /// The file's path as configured.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A seed for a new node's name, from the system's entropy: /dev/urandom,
/// or std's randomly keyed hasher where it cannot be read.
pub fn entropy_seed() -> u64 {
    let mut b = [0u8; 8];
    if File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b)).is_ok() {
        return u64::from_le_bytes(b);
    }
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one((std::process::id(), std::time::SystemTime::now()))
}

/// The thread that saves nodes.conf for the event loop.
///
/// A save is queued and the loop goes on; saves queued before the thread
/// gets to them are folded into one write of the latest text, fsynced if
/// any of them asked for it. What Redis fsyncs before its next step (a
/// vote, an epoch) must be on disk before the node tells anybody: the bus
/// calls `wait_synced` before it writes its messages. A save that fails
/// logs Redis's lines and ends the process, as Redis's
/// clusterSaveConfigOrDie.
pub struct ConfWriter {
    shared: Arc<Shared>,
    path: PathBuf,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<Pending>,
    /// The thread waits here for work.
    work: Condvar,
    /// Callers wait here for `written` to reach their save.
    done: Condvar,
}

#[derive(Default)]
struct Pending {
    /// The latest text not yet taken by the thread.
    text: Option<String>,
    /// Whether any save folded into `text` asked for an fsync.
    fsync: bool,
    /// Saves queued, and saves written (both count every save, folded or not).
    queued: u64,
    written: u64,
    /// The number of the last save that asked for an fsync.
    sync_upto: u64,
    /// The log to write a failure to (the latest the loop gave).
    log: Log,
    stop: bool,
}

impl ConfWriter {
    /// Starts the thread, which owns `conf` (and its lock) from now on.
    ///
    /// Errors: the thread could not be started.
    pub fn start(conf: NodesConf) -> std::io::Result<ConfWriter> {
        let shared = Arc::new(Shared { state: Mutex::new(Pending::default()), work: Condvar::new(), done: Condvar::new() });
        let path = conf.path().to_path_buf();
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name("nodes-conf".into()).spawn(move || {
            crate::affinity::pin(crate::affinity::Role::Bio);
            crate::memory::publish_at_exit(0);
            let mut published = 0;
            write_loop(conf, &theirs, &mut published);
            crate::memory::publish_at_exit(published);
        })?;
        Ok(ConfWriter { shared, path, thread: Some(thread) })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues `text` as the file's new content, to be fsynced when `fsync`.
    pub fn save(&self, text: String, fsync: bool, log: &Log) {
        let mut st = lock_state(&self.shared);
        st.text = Some(text);
        st.fsync |= fsync;
        st.queued += 1;
        if fsync {
            st.sync_upto = st.queued;
        }
        if st.log != *log {
            st.log = log.clone();
        }
        self.shared.work.notify_one();
    }

    /// Returns once every save that asked for an fsync is on disk.
    pub fn wait_synced(&self) {
        let mut st = lock_state(&self.shared);
        while st.written < st.sync_upto {
            st = self.shared.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Returns once every queued save is written.
    pub fn flush(&self) {
        let mut st = lock_state(&self.shared);
        while st.written < st.queued {
            st = self.shared.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for ConfWriter {
    fn drop(&mut self) {
        lock_state(&self.shared).stop = true;
        self.shared.work.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock_state(shared: &Shared) -> MutexGuard<'_, Pending> {
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The writer thread: takes the latest text, writes it, tells waiters.
fn write_loop(mut conf: NodesConf, shared: &Shared, published: &mut i64) {
    loop {
        // The texts it writes were made by the executor and are freed
        // here: used_memory hears of it before the thread waits again.
        crate::memory::publish_thread(published);
        let (text, fsync, upto, log) = {
            let mut st = lock_state(shared);
            while st.text.is_none() && !st.stop {
                st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            let Some(text) = st.text.take() else { return };
            (text, std::mem::take(&mut st.fsync), st.queued, st.log.clone())
        };
        // The replaced file's lock handle is dropped here, off the loop:
        // closing it frees that inode, which waits for its writeback.
        if let Err(e) = conf.save(&text, fsync) {
            log.warning(&format!("Could not save the cluster config file {}: {}", conf.path().display(), crate::config::strerror(&e)));
            log.warning("Fatal: can't update cluster config file.");
            std::process::exit(1);
        }
        lock_state(shared).written = upto;
        shared.done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("densekv-nodesconf-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    #[test]
    fn a_second_opener_is_refused_before_and_after_a_save() {
        let d = temp_dir("lock");
        let path = d.join("nodes.conf");
        let p = path.to_str().expect("utf-8 path");
        let (mut first, text) = NodesConf::open(p).expect("first open");
        assert_eq!(text, None, "a new file reads as none");
        let refused = NodesConf::open(p).expect_err("locked");
        assert!(matches!(&refused, OpenError::Locked(m) if m.starts_with("Sorry, the cluster configuration file ") && m.contains("is already used by a different Redis Cluster node")), "{refused:?}");
        let replaced = first.save("abc myself\nvars currentEpoch 0 lastVoteEpoch 0\n", true).expect("save");
        assert!(replaced.is_some(), "the replaced file's lock handle comes back to be closed");
        drop(replaced);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "abc myself\nvars currentEpoch 0 lastVoteEpoch 0\n");
        assert!(matches!(NodesConf::open(p), Err(OpenError::Locked(_))), "the renamed file is locked too");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(&d).expect("dir").count(), 1);
        drop(first);
        let (_again, text) = NodesConf::open(p).expect("free once the holder is gone");
        assert_eq!(text.as_deref(), Some("abc myself\nvars currentEpoch 0 lastVoteEpoch 0\n"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_writer_folds_saves_and_waits_for_an_fsync() {
        let d = temp_dir("writer");
        let path = d.join("nodes.conf");
        let (conf, _) = NodesConf::open(path.to_str().expect("utf-8 path")).expect("open");
        let w = ConfWriter::start(conf).expect("thread");
        let log = Log::default();
        for i in 0..100 {
            w.save(format!("line {i}\n"), false, &log);
        }
        w.flush();
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "line 99\n", "the latest text wins");
        w.save("synced\n".into(), true, &log);
        w.save("later\n".into(), false, &log);
        w.wait_synced();
        let now = std::fs::read_to_string(&path).expect("read");
        assert!(now == "synced\n" || now == "later\n", "the fsynced save or a later one is on disk: {now:?}");
        w.flush();
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "later\n");
        assert!(matches!(NodesConf::open(path.to_str().expect("utf-8")), Err(OpenError::Locked(_))), "the writer holds the lock");
        drop(w);
        assert!(NodesConf::open(path.to_str().expect("utf-8")).is_ok(), "dropping the writer releases the lock");
        assert_eq!(std::fs::read_dir(&d).expect("dir").count(), 1, "no temporary file left");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn seeds_differ() {
        assert_ne!(entropy_seed(), entropy_seed());
    }
}
