//! Fuzz target for the config file reader: arbitrary bytes as a
//! redis.conf. Reading may refuse a line but never panic, and a config it
//! accepts is written back whole (CONFIG REWRITE's text, every setting)
//! as a file that reads again to the same text.
//!
//! Directives that act on the file system as they are read (`include`
//! reads the files it names, `dir` changes directory, `logfile` creates
//! the file) are left out: they would read /dev/zero or scatter files,
//! the file system's business, not the reader's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use server::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lower = text.to_ascii_lowercase();
    if ["include", "dir", "logfile"].iter().any(|d| lower.contains(d)) {
        return;
    }
    let mut c = Config::default();
    if c.load(text, &|_| true).is_err() {
        return;
    }
    let all = c.rewrite_text(true);
    let mut back = Config::default();
    back.load(&all, &|_| true).unwrap_or_else(|e| panic!("a rewritten config does not load: {}\n{all}", e.report()));
    assert_eq!(back.rewrite_text(true), all, "the config changed through a rewrite and load");
});
