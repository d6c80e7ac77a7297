//! `oom-score-adj`: the kernel's OOM-killer score of this process, set from
//! `oom-score-adj-values` by the server's role, as Redis sets it.
//!
//! `no` leaves the score alone; `yes`/`relative` adds the role's value to
//! the score the process had before the server first changed it (the
//! base); `absolute` writes the value itself. The result is clamped to the
//! kernel's -1000..=1000. Turning it off writes the base back, once. The
//! three values are for a primary, a replica and a background child;
//! densekv saves and rewrites on threads, never in a child process, so the
//! third value is kept and shown but has no process to apply to.
//!
//! Only the file `/proc/self/oom_score_adj` is touched; a kernel without it,
//! or a write the kernel refuses (lowering the score needs privileges),
//! is an error the caller reports.

use std::path::PathBuf;

/// Which of `oom-score-adj-values` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Primary = 0,
    Replica = 1,
}

/// What the server did to the score so far.
#[derive(Debug)]
pub struct OomAdj {
    /// The score file (a test may point it elsewhere).
    path: PathBuf,
    /// The score before the server first changed it, while it has.
    base: Option<i64>,
    /// The class last applied, so a role change re-applies.
    pub class: Option<Class>,
}

impl Default for OomAdj {
    fn default() -> Self {
        OomAdj { path: PathBuf::from("/proc/self/oom_score_adj"), base: None, class: None }
    }
}

impl OomAdj {
    /// Sets the score for `mode` (`no`, `yes`, `relative`, `absolute`),
    /// `values` (the oom-score-adj-values text) and `class`.
    ///
    /// Errors: why the score file could not be read or written.
    pub fn apply(&mut self, mode: &str, values: &str, class: Class) -> Result<(), String> {
        self.class = Some(class);
        let val = if mode == "no" {
            match self.base.take() {
                Some(b) => b,
                None => return Ok(()),
            }
        } else {
            let base = match self.base {
                Some(b) => b,
                None => {
                    let text = std::fs::read_to_string(&self.path).map_err(|e| format!("Unable to read oom_score_adj: {e}"))?;
                    let b = text.trim().parse().unwrap_or(0);
                    self.base = Some(b);
                    b
                }
            };
            let v: i64 = values.split_whitespace().nth(class as usize).and_then(|v| v.parse().ok()).unwrap_or(0);
            let v = if mode == "absolute" { v } else { v + base };
            v.clamp(-1000, 1000)
        };
        std::fs::write(&self.path, format!("{val}\n")).map_err(|e| format!("Unable to write oom_score_adj: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in score file holding `score`, removed when `Scratch` drops.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn at(score: i64, tag: &str) -> (OomAdj, Scratch) {
        let path = std::env::temp_dir().join(format!("densekv-oom-{tag}-{}", std::process::id()));
        std::fs::write(&path, format!("{score}\n")).unwrap();
        (OomAdj { path: path.clone(), base: None, class: None }, Scratch(path))
    }

    fn read(o: &OomAdj) -> i64 {
        std::fs::read_to_string(&o.path).unwrap().trim().parse().unwrap()
    }

    #[test]
    fn relative_adds_to_the_score_before_and_off_restores_it() {
        let (mut o, _d) = at(7, "rel");
        o.apply("no", "10 20 30", Class::Primary).unwrap();
        assert_eq!(read(&o), 7, "off and never on: untouched");
        o.apply("yes", "10 20 30", Class::Primary).unwrap();
        assert_eq!(read(&o), 17);
        o.apply("relative", "15 20 30", Class::Replica).unwrap();
        assert_eq!(read(&o), 27, "the base is the score before the first change");
        o.apply("absolute", "15 20 30", Class::Replica).unwrap();
        assert_eq!(read(&o), 20);
        o.apply("no", "15 20 30", Class::Replica).unwrap();
        assert_eq!(read(&o), 7);
        std::fs::write(&o.path, "3\n").unwrap();
        o.apply("no", "15 20 30", Class::Replica).unwrap();
        assert_eq!(read(&o), 3, "off again: left alone");
    }

    #[test]
    fn clamped_to_the_kernels_range() {
        let (mut o, _d) = at(900, "clamp");
        o.apply("yes", "2000 0 0", Class::Primary).unwrap();
        assert_eq!(read(&o), 1000);
        o.apply("absolute", "-2000 0 0", Class::Primary).unwrap();
        assert_eq!(read(&o), -1000);
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let mut o = OomAdj { path: PathBuf::from("/nonexistent-dir/oom_score_adj"), base: None, class: None };
        assert!(o.apply("yes", "1 2 3", Class::Primary).is_err());
        assert!(o.apply("no", "1 2 3", Class::Primary).is_ok(), "never changed: nothing to restore");
    }
}
