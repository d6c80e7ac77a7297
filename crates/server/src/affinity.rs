//! Where the server's threads run, and transparent huge pages.
//!
//! - **CPU lists** (`server-cpulist`, `bio-cpulist`, `aof-rewrite-cpulist`,
//!   `bgsave-cpulist`): each thread pins itself when it starts, by its
//!   role: the executor and the I/O threads take the server's list; the
//!   freeing thread, the AOF fsync thread and the nodes.conf writer the
//!   background ("bio") list; a background save's writer the bgsave list,
//!   or the rewrite list when it writes an AOF rewrite's base. A role with
//!   no list keeps what it inherits, which is the server's list once the
//!   executor has pinned itself (threads inherit their creator's
//!   affinity), as in Redis. The list reads as taskset's and Redis's:
//!   `0-7:2,9,12-13`; one that does not parse (or names no CPU this
//!   machine has) is left unapplied, as Redis leaves it.
//!   Unlike Redis's, a save here is encoded by the executor in slices and
//!   written by a thread, so only the writing follows bgsave-cpulist.
//! - **`disable-thp yes`** (the default) turns transparent huge pages off
//!   for the process (prctl PR_SET_THP_DISABLE), so the kernel never backs
//!   the keyspace with 2 MB pages: a page copied or kept for one changed
//!   byte would cost 2 MB of memory. Redis asks only when the kernel's mode
//!   is `always`; in the other modes a process gets huge pages only where
//!   it asks with madvise, which nothing here does, so asking every time
//!   changes nothing else and makes the setting visible in
//!   /proc/<pid>/status (`THP_enabled: 0`).

use std::sync::OnceLock;

/// Whose list a thread takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The executor and the I/O threads (`server-cpulist`).
    Server,
    /// Background work: freeing, fsync, nodes.conf (`bio-cpulist`).
    Bio,
    /// An AOF rewrite's writer (`aof-rewrite-cpulist`).
    AofRewrite,
    /// A background save's writer (`bgsave-cpulist`).
    Bgsave,
}

/// The four lists, as configured at start (they cannot change after).
#[derive(Debug, Default)]
pub struct Lists {
    pub server: String,
    pub bio: String,
    pub aof_rewrite: String,
    pub bgsave: String,
}

static LISTS: OnceLock<Lists> = OnceLock::new();

/// Records the lists; once, at start-up, before the first thread.
pub fn configure(lists: Lists) {
    let _ = LISTS.set(lists);
}

/// Pins the calling thread to its role's list, if one is configured and
/// parses; otherwise leaves it where it is.
pub fn pin(role: Role) {
    let Some(lists) = LISTS.get() else { return };
    let text = match role {
        Role::Server => &lists.server,
        Role::Bio => &lists.bio,
        Role::AofRewrite => &lists.aof_rewrite,
        Role::Bgsave => &lists.bgsave,
    };
    if text.is_empty() {
        return;
    }
    let Some(cpus) = parse(text) else { return };
    let mut set = nix::sched::CpuSet::new();
    for cpu in cpus {
        if set.set(cpu).is_err() {
            return;
        }
    }
    // Pid 0: the calling thread. A set the kernel refuses (no CPU of it
    // online or allowed) leaves the thread as it was.
    let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
}

/// Parses a CPU list: comma-separated items, each `N`, `A-B` or `A-B:S`
/// (every S-th CPU from A to B). None for anything else, an empty range
/// (A > B) or a step of 0.
pub fn parse(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for item in text.split(',') {
        let (range, step) = match item.split_once(':') {
            Some((r, s)) => (r, s.parse::<usize>().ok().filter(|&s| s > 0)?),
            None => (item, 1),
        };
        let (a, b) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None if step == 1 && !item.contains(':') => (num(range)?, num(range)?),
            None => return None,
        };
        if a > b {
            return None;
        }
        out.extend((a..=b).step_by(step));
    }
    Some(out)
}

fn num(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&n| n < 1 << 16)
}

/// Applies `disable-thp` to the process. Returns the warning to log when
/// the kernel gives every process huge pages (`always`) and the process
/// could not opt out.
pub fn disable_thp(wanted: bool) -> Option<String> {
    if !wanted {
        return None;
    }
    let always = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").is_ok_and(|m| m.contains("[always]"));
    match nix::sys::prctl::set_thp_disable(true) {
        Err(e) if always => Some(format!(
            "WARNING Transparent Huge Pages (THP) are enabled in this kernel ('always') and could not be turned off for this process ({e}): expect latency spikes and higher memory use. Set the kernel's mode to 'madvise' or 'never' and restart densekv."
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn lists_read_as_taskset_reads_them() {
        assert_eq!(parse("0"), Some(vec![0]));
        assert_eq!(parse("0-7:2"), Some(vec![0, 2, 4, 6]));
        assert_eq!(parse("1,3"), Some(vec![1, 3]));
        assert_eq!(parse("1,10-11"), Some(vec![1, 10, 11]));
        assert_eq!(parse("8-11"), Some(vec![8, 9, 10, 11]));
        assert_eq!(parse("0-6:3,7"), Some(vec![0, 3, 6, 7]));
        for bad in ["", "a", "3-1", "0-7:0", "1,", "-1", "1-", "0-3:x", "2:2", "1 2", "0-7:2:3"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
