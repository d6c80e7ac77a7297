//! The AOF's running state, kept in `Server::aof`: the feed sink that
//! turns the write stream into AOF bytes, the bytes not yet written, the
//! open incremental file, the manifest, the everysec fsync thread, and
//! what INFO persistence reports.
//!
//! The sink only appends to a buffer it shares with this state (the feed
//! owns the sink, the server owns the state); the event loop writes the
//! buffer once per iteration, before any reply of that iteration leaves
//! (`aof::flush`, the group commit).

use std::cell::RefCell;
use std::fs::File;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::time::Instant;

use crate::aofcore::manifest::Manifest;
use crate::aofcore::reader::encode;
use crate::feed::Sink;

/// appendfsync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// Before any reply of the iteration leaves.
    Always,
    /// From a background thread, at most once a second.
    EverySec,
    /// Never asked; the OS flushes when it likes.
    No,
}

impl Fsync {
    /// The policy an `appendfsync` value names.
    pub fn parse(s: &str) -> Fsync {
        match s {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// What the sink appends to.
#[derive(Default)]
pub struct Pending {
    /// Encoded commands not yet written.
    pub buf: Vec<u8>,
    /// aof-timestamp-enabled.
    pub timestamps: bool,
    /// The Unix second of the last `#TS:` annotation.
    pub last_ts: i64,
}

impl Pending {
    /// Appends a `#TS:` annotation if the second changed since the last
    /// one (or always when `force`).
    pub fn timestamp(&mut self, force: bool) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        if force || now > self.last_ts {
            self.last_ts = now;
            self.buf.extend_from_slice(format!("#TS:{now}\r\n").as_bytes());
        }
    }
}

/// The write stream's AOF consumer: commands in RESP array form.
pub struct AofSink(pub Rc<RefCell<Pending>>);

impl Sink for AofSink {
    fn feed(&mut self, argv: &[Vec<u8>]) {
        let mut p = self.0.borrow_mut();
        if p.timestamps {
            p.timestamp(false);
        }
        encode(argv, &mut p.buf);
    }

    fn name(&self) -> &'static str {
        "aof"
    }
}

/// The background fsync thread of `appendfsync everysec`: it is handed a
/// clone of the file and syncs it; the event loop never waits for it.
pub struct Syncer {
    tx: Sender<File>,
    busy: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
    /// The failed fsync's OS error number.
    errno: Arc<AtomicI32>,
}

impl Syncer {
    /// Starts the thread.
    pub fn start() -> Syncer {
        let (tx, rx) = channel::<File>();
        let busy = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicBool::new(false));
        let errno = Arc::new(AtomicI32::new(0));
        let (b, f, n) = (busy.clone(), failed.clone(), errno.clone());
        let _ = std::thread::Builder::new().name("aof-fsync".into()).spawn(move || {
            crate::affinity::pin(crate::affinity::Role::Bio);
            while let Ok(file) = rx.recv() {
                let r = file.sync_data();
                if let Err(e) = &r {
                    n.store(e.raw_os_error().unwrap_or(0), Ordering::Relaxed);
                }
                f.store(r.is_err(), Ordering::Relaxed);
                b.store(false, Ordering::Release);
            }
        });
        Syncer { tx, busy, failed, errno }
    }

    /// Asks for an fsync of `file` unless one is still running. Returns
    /// true if one was started.
    pub fn request(&self, file: &File) -> bool {
        if self.busy.load(Ordering::Acquire) {
            return false;
        }
        let Ok(clone) = file.try_clone() else { return false };
        self.busy.store(true, Ordering::Release);
        if self.tx.send(clone).is_err() {
            self.busy.store(false, Ordering::Release);
            return false;
        }
        true
    }

    /// True while an fsync runs (INFO aof_pending_bio_fsync).
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// The last background fsync failed.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Why the last background fsync failed, if it did.
    pub fn error(&self) -> Option<std::io::Error> {
        self.failed().then(|| std::io::Error::from_raw_os_error(self.errno.load(Ordering::Relaxed)))
    }
}

/// Everything the AOF keeps between iterations.
pub struct AofState {
    /// The AOF is on: writes are logged (Redis's AOF_ON).
    pub on: bool,
    /// Turned on at run time and its first rewrite not complete yet
    /// (Redis's AOF_WAIT_REWRITE): writes go to a temporary incremental
    /// file that the manifest names only once the base is written. A
    /// shutdown now would lose the data set, so it is refused.
    pub wait_rewrite: bool,
    /// Shared with the attached sink.
    pub pending: Rc<RefCell<Pending>>,
    /// The incremental file being appended to.
    pub file: Option<File>,
    /// The AOF directory (dir + appenddirname).
    pub dir: PathBuf,
    /// The manifest as last written.
    pub manifest: Manifest,
    /// appendfsync.
    pub fsync: Fsync,
    /// no-appendfsync-on-rewrite: no fsync while a background save or
    /// rewrite writes its own file.
    pub no_fsync_on_rewrite: bool,
    /// When the last fsync was asked for.
    pub last_fsync: Instant,
    /// Bytes written but not yet fsynced.
    pub unsynced: bool,
    /// The everysec thread, started on first use.
    pub syncer: Option<Syncer>,
    /// The stream offset the data handed to the everysec thread reaches,
    /// while its fsync runs.
    pub fsync_inflight: Option<i64>,
    /// The stream offset up to which the file is known fsynced; it
    /// becomes `Repl::fsynced` once no first rewrite is pending.
    pub synced_off: i64,
    /// Size of base + incremental files (INFO aof_current_size).
    pub current_size: u64,
    /// Size at the last rewrite (INFO aof_base_size).
    pub base_size: u64,
    /// A rewrite waits for the next cron tick (INFO aof_rewrite_scheduled).
    pub rewrite_scheduled: bool,
    /// The base a background rewrite is writing, and when it started.
    pub rewrite_base: Option<String>,
    pub rewrite_started: Option<std::time::Instant>,
    /// Rewrites done (INFO aof_rewrites).
    pub rewrites: u64,
    /// Rewrites that failed in a row.
    pub rewrite_failures: u64,
    /// Seconds the last rewrite took, -1 before any.
    pub last_rewrite_secs: i64,
    /// The last rewrite succeeded.
    pub last_rewrite_ok: bool,
    /// The last write (and fsync) succeeded.
    pub last_write_ok: bool,
    /// Why the last write or fsync failed (its errno's text), for the
    /// MISCONF error writes get until one succeeds again.
    pub last_write_error: Option<String>,
    /// When a failed write was last logged.
    pub write_error_logged: Option<Instant>,
    /// Commands replayed by the last load (a fake client's calls).
    pub loaded_commands: u64,
    /// DEBUG AOF-FLUSH-SLEEP: microseconds to wait before each write of
    /// buffered commands, so tests can widen the window between the write
    /// and the replies it holds back.
    pub flush_sleep_us: u64,
}

impl Default for AofState {
    fn default() -> Self {
        AofState {
            on: false,
            wait_rewrite: false,
            pending: Rc::default(),
            file: None,
            dir: PathBuf::new(),
            manifest: Manifest::default(),
            fsync: Fsync::EverySec,
            no_fsync_on_rewrite: false,
            last_fsync: Instant::now(),
            unsynced: false,
            syncer: None,
            fsync_inflight: None,
            synced_off: 0,
            current_size: 0,
            base_size: 0,
            rewrite_scheduled: false,
            rewrite_base: None,
            rewrite_started: None,
            rewrites: 0,
            rewrite_failures: 0,
            last_rewrite_secs: -1,
            last_rewrite_ok: true,
            last_write_ok: true,
            last_write_error: None,
            write_error_logged: None,
            loaded_commands: 0,
            flush_sleep_us: 0,
        }
    }
}

impl AofState {
    /// True if bytes wait to be written: replies of this iteration must
    /// wait for them (the group commit).
    pub fn has_pending(&self) -> bool {
        self.on && !self.pending.borrow().buf.is_empty()
    }

    /// Bytes buffered (INFO aof_buffer_length).
    pub fn buffered(&self) -> usize {
        self.pending.borrow().buf.len()
    }
}
