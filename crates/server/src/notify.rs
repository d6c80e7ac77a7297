//! Keyspace notification classes (`notify-keyspace-events`): the flag bits
//! as Redis numbers them, their letters, parsing and printing. A leaf: the
//! config parses the flag word with it, commands name their event's class
//! with it, and `publish.rs` (which delivers events) reads the word.
//!
//! Every write calls `Ctx::notify(class, event, key)` once per event at the
//! point of change, with Redis's event names (`sadd`, `del`, `rename_from`,
//! ...). The call is one branch on the cached flag word when the class is
//! off, so a server with notifications off pays nothing more.
//!
//! Two kinds of event happen inside storage, where no server code runs:
//! lazy expiry (a key found due on access) and key creation (class `n`).
//! The database records them when [`db_log_bits`] asks it to.
//!
//! `keymiss` (class `m`) is recorded by storage too, at a read command's
//! lookup that finds no key (`Db::note_read`).

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: expired keys.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: evicted keys.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events.
pub const MODULE: u32 = 1 << 13;
/// `n`: new keys (not part of `A`).
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Class letters in the order Redis prints them.
const LETTERS: [(u8, u32); 11] = [
    (b'g', GENERIC),
    (b'$', STRING),
    (b'l', LIST),
    (b's', SET),
    (b'h', HASH),
    (b'z', ZSET),
    (b'x', EXPIRED),
    (b'e', EVICTED),
    (b't', STREAM),
    (b'd', MODULE),
    (b'n', NEW),
];

/// Parses a `notify-keyspace-events` value; None on an unknown letter.
pub fn parse(s: &str) -> Option<u32> {
    let mut flags = 0;
    for b in s.bytes() {
        flags |= match b {
            b'A' => ALL,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b'm' => KEY_MISS,
            _ => LETTERS.iter().find(|(l, _)| *l == b)?.1,
        };
    }
    Some(flags)
}

/// Prints flags as Redis does: `A` when every class of `A` is on (then `n`
/// is not printed), else the class letters; then `K`, `E`, `m`.
pub fn format(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        out.extend(LETTERS.iter().filter(|(_, f)| flags & f != 0).map(|&(l, _)| l as char));
    }
    out.extend([(b'K', KEYSPACE), (b'E', KEYEVENT), (b'm', KEY_MISS)].iter().filter(|(_, f)| flags & f != 0).map(|&(l, _)| l as char));
    out
}

/// True if events of `class` are published at all: the class is on and at
/// least one of `K`/`E` says where.
#[inline]
pub fn wanted(flags: u32, class: u32) -> bool {
    flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
}

/// The `Db::log_events` bits the flags call for.
pub fn db_log_bits(flags: u32) -> u8 {
    let mut bits = 0;
    if wanted(flags, EXPIRED) {
        bits |= storage::keyspace::LOG_EXPIRED;
    }
    if wanted(flags, NEW) {
        bits |= storage::keyspace::LOG_NEW;
    }
    if wanted(flags, SET | ZSET | GENERIC) {
        bits |= storage::keyspace::LOG_MEMBERS;
    }
    if wanted(flags, KEY_MISS) {
        bits |= storage::keyspace::LOG_MISS;
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_round_trip_as_redis() {
        assert_eq!(parse("KEA").map(format).as_deref(), Some("AKE"));
        assert_eq!(parse("").map(format).as_deref(), Some(""));
        assert_eq!(parse("Ex").map(format).as_deref(), Some("xE"));
        assert_eq!(parse("AnKm").map(format).as_deref(), Some("AKm"));
        assert_eq!(parse("n$gK").map(format).as_deref(), Some("g$nK"));
        assert_eq!(parse("KEAz"), parse("AKE"));
        assert_eq!(parse("Kq"), None);
        assert!(!wanted(parse("KE").unwrap_or(0), GENERIC));
        assert!(!wanted(parse("g").unwrap_or(0), GENERIC));
        assert!(wanted(parse("gK").unwrap_or(0), GENERIC));
        assert!(!wanted(parse("AKE").unwrap_or(0), NEW | KEY_MISS));
    }
}
