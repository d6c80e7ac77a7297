//! ACL users, their rules and the permission checks, with Redis's
//! semantics: users with flags and hashed passwords, each holding a root
//! selector and any number of extra `(...)` selectors; a selector allows a
//! set of commands (a bitmap over the command table plus first-argument
//! exceptions such as `+select|0`), key patterns with read/write rights and
//! channel patterns. A command is allowed when one selector allows it whole.
//!
//! A leaf: it knows the command table only as a `Catalog` (names, categories,
//! subcommand links) built once from the table by the dispatch layer, and it
//! is handed key positions and channels already extracted, so it imports
//! nothing of the server. The ACL log lives here too.
//!
//! Rule strings are kept as Redis keeps them (`command_rules`): the ordered
//! `+cmd`/`-@cat` rules applied since the last `+@all`/`-@all`, with earlier
//! rules about the same command or category dropped, so that ACL GETUSER
//! and ACL LIST print back what recreates the same bitmap.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use crate::glob;
use crate::sha256;

/// Redis's command categories, in ACL CAT order.
pub const CATEGORIES: &[&str] = &[
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
    "blocking", "dangerous", "connection", "transaction", "scripting",
];

/// One command of the table as the ACL sees it.
#[derive(Debug, Clone)]
pub struct CatalogCmd {
    /// Full name: `get`, `config|get`.
    pub name: &'static str,
    /// ACL categories without '@'.
    pub cats: &'static [&'static str],
    /// The container's id, for a subcommand.
    pub parent: Option<usize>,
    /// Subcommand ids, for a container.
    pub subs: Vec<usize>,
    /// Runs before AUTH (AUTH, HELLO, QUIT ...): never refused by an ACL.
    pub no_auth: bool,
}

/// The command table as the ACL sees it: a command's id is its index.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Commands by id.
    pub cmds: Vec<CatalogCmd>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// A catalog of `cmds` (ids are their positions).
    pub fn new(cmds: Vec<CatalogCmd>) -> Catalog {
        let by_name = cmds.iter().enumerate().map(|(i, c)| (c.name.to_string(), i)).collect();
        Catalog { cmds, by_name }
    }

    /// The id of the command or `parent|sub` named `name` (any case).
    pub fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(&name.to_ascii_lowercase()).copied()
    }

    /// Full names of the commands and subcommands in category `cat`, in id order.
    pub fn in_category(&self, cat: &str) -> Vec<&'static str> {
        self.cmds.iter().filter(|c| c.cats.contains(&cat)).map(|c| c.name).collect()
    }
}

/// A key pattern grants reading.
pub const READ: u8 = 1;
/// A key pattern grants writing.
pub const WRITE: u8 = 2;

/// Why a command or an AUTH was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    /// The command itself.
    Cmd,
    /// A key, at this argument index.
    Key(usize),
    /// A channel, at this argument index.
    Channel(usize),
    /// A failed AUTH (log entries only).
    Auth,
}

impl Denied {
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Cmd => (0, 0),
            Denied::Key(i) => (1, i),
            Denied::Channel(i) => (2, i),
            Denied::Auth => (3, 0),
        }
    }

    /// The reason ACL LOG shows.
    pub fn reason(self) -> &'static str {
        match self {
            Denied::Cmd => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
            Denied::Auth => "auth",
        }
    }
}

/// The text after `-NOPERM ` for a refusal of `cmd` (full name) to `user`;
/// `verbose` names the key or channel (ACL DRYRUN).
pub fn denied_message(d: Denied, user: &str, cmd: &str, arg: &[u8], verbose: bool) -> String {
    let arg = String::from_utf8_lossy(arg);
    match d {
        Denied::Cmd | Denied::Auth => format!("User {user} has no permissions to run the '{cmd}' command"),
        Denied::Key(_) if verbose => format!("User {user} has no permissions to access the '{arg}' key"),
        Denied::Key(_) => "No permissions to access a key".into(),
        Denied::Channel(_) if verbose => format!("User {user} has no permissions to access the '{arg}' channel"),
        Denied::Channel(_) => "No permissions to access a channel".into(),
    }
}

/// What `set_selector` / `set_user` refuse, as Redis words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// Unknown command or category.
    NoEnt,
    /// Malformed rule.
    Syntax,
    /// A key pattern after allkeys.
    KeysAfterAll,
    /// A channel pattern after allchannels.
    ChannelsAfterAll,
    /// Removing a password the user lacks.
    NoPass,
    /// A malformed password hash.
    BadHash,
    /// `+cmd|sub|arg`.
    SubFirstArg,
    /// A selector whose inner rule failed (the inner error is reported).
    Inner(&'static str),
}

impl RuleError {
    /// Redis's description.
    pub fn message(self) -> &'static str {
        match self {
            RuleError::NoEnt => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeysAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelsAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoPass => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::SubFirstArg => "Allowing first-arg of a subcommand is not supported",
            RuleError::Inner(m) => m,
        }
    }
}

/// One set of permissions: commands, keys, channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    allowed: Vec<u64>,
    /// `+@all` was the last word on commands: future commands too.
    future: bool,
    /// Every command, no exception since `+@all`.
    all_commands: bool,
    firstargs: BTreeMap<usize, Vec<String>>,
    all_keys: bool,
    patterns: Vec<(Vec<u8>, u8)>,
    all_channels: bool,
    channels: Vec<Vec<u8>>,
    rules: String,
}

impl Selector {
    /// A selector allowing nothing (channels per acl-pubsub-default).
    pub fn new(ncmds: usize, all_channels: bool) -> Selector {
        Selector {
            allowed: vec![0; ncmds.div_ceil(64)],
            future: false,
            all_commands: false,
            firstargs: BTreeMap::new(),
            all_keys: false,
            patterns: Vec::new(),
            all_channels,
            channels: Vec::new(),
            rules: String::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if let Some(w) = self.allowed.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
            }
        }
        if !on {
            self.all_commands = false;
        }
    }

    fn change_perm(&mut self, cat: &Catalog, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.firstargs.remove(&id);
        for &s in &cat.cmds[id].subs {
            self.set_bit(s, allow);
        }
    }

    fn update_rules(&mut self, rule: &str, allow: bool) {
        let rule = rule.to_ascii_lowercase();
        let kept: Vec<&str> = self
            .rules
            .split(' ')
            .filter(|r| !r.is_empty())
            .filter(|r| {
                let body = &r[1..];
                !(body == rule || (body.len() > rule.len() && body.starts_with(rule.as_str()) && body.as_bytes()[rule.len()] == b'|'))
            })
            .collect();
        let mut s = kept.join(" ");
        if !s.is_empty() {
            s.push(' ');
        }
        s.push(if allow { '+' } else { '-' });
        s.push_str(&rule);
        self.rules = s;
    }

    /// Applies one selector rule (see Redis's ACL SETUSER documentation).
    pub fn apply(&mut self, cat: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.patterns.clear();
            }
            "resetkeys" => {
                self.all_keys = false;
                self.patterns.clear();
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channels.clear();
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            "allcommands" | "+@all" => {
                self.allowed.iter_mut().for_each(|w| *w = u64::MAX);
                self.all_commands = true;
                self.future = true;
                self.rules.clear();
                self.firstargs.clear();
            }
            "nocommands" | "-@all" => {
                self.allowed.iter_mut().for_each(|w| *w = 0);
                self.all_commands = false;
                self.future = false;
                self.rules.clear();
                self.firstargs.clear();
            }
            _ => return self.apply_other(cat, op, &lower),
        }
        Ok(())
    }

    fn apply_other(&mut self, cat: &Catalog, op: &[u8], lower: &str) -> Result<(), RuleError> {
        match op.first() {
            Some(b'~') | Some(b'%') => {
                if self.all_keys {
                    return Err(RuleError::KeysAfterAll);
                }
                let mut flags = 0;
                let mut off = 1;
                if op[0] == b'%' {
                    loop {
                        match op.get(off) {
                            Some(b'R' | b'r') if flags & READ == 0 => flags |= READ,
                            Some(b'W' | b'w') if flags & WRITE == 0 => flags |= WRITE,
                            Some(b'~') if flags != 0 => {
                                off += 1;
                                break;
                            }
                            _ => return Err(RuleError::Syntax),
                        }
                        off += 1;
                    }
                } else {
                    flags = READ | WRITE;
                }
                let pat = &op[off..];
                if pat.iter().any(|&b| b == b' ' || b == 0) {
                    return Err(RuleError::Syntax);
                }
                match self.patterns.iter_mut().find(|(p, _)| p == pat) {
                    Some(p) => p.1 |= flags,
                    None => self.patterns.push((pat.to_vec(), flags)),
                }
                self.all_keys = false;
            }
            Some(b'&') => {
                if self.all_channels {
                    return Err(RuleError::ChannelsAfterAll);
                }
                let pat = &op[1..];
                if pat.iter().any(|&b| b == b' ' || b == 0) {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == pat) {
                    self.channels.push(pat.to_vec());
                }
                self.all_channels = false;
            }
            Some(b'+') if op.get(1) != Some(&b'@') => {
                let name = &lower[1..];
                match name.rfind('|') {
                    None => {
                        let id = cat.find(name).ok_or(RuleError::NoEnt)?;
                        self.change_perm(cat, id, true);
                        self.update_rules(cat.cmds[id].name, true);
                    }
                    Some(bar) => {
                        let (base, sub) = (&name[..bar], &name[bar + 1..]);
                        let id = cat.find(base).ok_or(RuleError::NoEnt)?;
                        if cat.cmds[id].parent.is_some() {
                            return Err(RuleError::SubFirstArg);
                        }
                        if sub.is_empty() {
                            return Err(RuleError::Syntax);
                        }
                        if !cat.cmds[id].subs.is_empty() {
                            let sid = cat.find(name).ok_or(RuleError::NoEnt)?;
                            self.change_perm(cat, sid, true);
                        } else {
                            let list = self.firstargs.entry(id).or_default();
                            if !list.iter().any(|a| a == sub) {
                                list.push(sub.to_string());
                            }
                        }
                        self.update_rules(name, true);
                    }
                }
            }
            Some(b'-') if op.get(1) != Some(&b'@') => {
                let id = cat.find(&lower[1..]).ok_or(RuleError::NoEnt)?;
                self.change_perm(cat, id, false);
                self.update_rules(cat.cmds[id].name, false);
            }
            Some(b'+' | b'-') => {
                let allow = op[0] == b'+';
                let name = &lower[2..];
                if !CATEGORIES.contains(&name) {
                    return Err(RuleError::NoEnt);
                }
                self.update_rules(&lower[1..], allow);
                for id in 0..cat.cmds.len() {
                    if cat.cmds[id].cats.contains(&name) {
                        self.change_perm(cat, id, allow);
                    }
                }
            }
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    /// True if this selector lets `id` run with `argv`.
    fn allows_cmd(&self, cat: &Catalog, id: usize, argv: &[Vec<u8>]) -> bool {
        let c = &cat.cmds[id];
        if self.all_commands || c.no_auth || self.bit(id) {
            return true;
        }
        let idx = if c.parent.is_some() { 2 } else { 1 };
        match (self.firstargs.get(&id), argv.get(idx)) {
            (Some(list), Some(a)) if argv.len() >= 2 => list.iter().any(|s| s.as_bytes().eq_ignore_ascii_case(a)),
            _ => false,
        }
    }

    /// True if `key` may be used with the `need` rights (READ|WRITE bits).
    pub fn allows_key(&self, key: &[u8], need: u8) -> bool {
        self.all_keys || self.patterns.iter().any(|(p, f)| f & need == need && glob::matches(p, key, false))
    }

    /// True if `channel` may be used; a PSUBSCRIBE pattern must appear literally.
    pub fn allows_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels || self.channels.iter().any(|p| if is_pattern { p == channel } else { glob::matches(p, channel, false) })
    }

    fn check(&self, cat: &Catalog, id: usize, argv: &[Vec<u8>], keys: &[(usize, u8)], channels: &[(usize, bool)]) -> Result<(), Denied> {
        if !self.allows_cmd(cat, id, argv) {
            return Err(Denied::Cmd);
        }
        if !self.all_keys {
            for &(i, need) in keys {
                if !self.allows_key(&argv[i], need) {
                    return Err(Denied::Key(i));
                }
            }
        }
        if !self.all_channels {
            for &(i, pat) in channels {
                if !self.allows_channel(&argv[i], pat) {
                    return Err(Denied::Channel(i));
                }
            }
        }
        Ok(())
    }

    fn describe_patterns(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let pats: Vec<String> = self
            .patterns
            .iter()
            .map(|(p, f)| {
                let pre = match *f {
                    READ => "%R~",
                    WRITE => "%W~",
                    _ => "~",
                };
                format!("{pre}{}", String::from_utf8_lossy(p))
            })
            .collect();
        pats.join(" ")
    }

    fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let chans: Vec<String> = self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c))).collect();
        chans.join(" ")
    }

    /// The command rules: `+@all`/`-@all` then the kept rules.
    pub fn describe_commands(&self) -> String {
        let mut s = String::from(if self.future { "+@all" } else { "-@all" });
        if !self.rules.is_empty() {
            s.push(' ');
            s.push_str(&self.rules);
        }
        s
    }

    /// The selector in ACL LIST form.
    fn describe(&self) -> String {
        let mut s = String::new();
        let keys = self.describe_patterns();
        if !keys.is_empty() {
            s.push_str(&keys);
            s.push(' ');
        }
        if self.all_channels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            let ch = self.describe_channels();
            if !ch.is_empty() {
                s.push_str(&ch);
                s.push(' ');
            }
        }
        s.push_str(&self.describe_commands());
        s
    }

    /// (field, value) pairs ACL GETUSER shows for this selector.
    pub fn fields(&self) -> [(&'static str, String); 3] {
        [("commands", self.describe_commands()), ("keys", self.describe_patterns()), ("channels", self.describe_channels())]
    }

    /// True if `other` allows every channel this one allows (for deciding
    /// whether subscribers keep their subscriptions).
    pub fn channels_of(&self) -> (bool, &[Vec<u8>]) {
        (self.all_channels, &self.channels)
    }
}

/// One ACL user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Name.
    pub name: String,
    /// `on`: may authenticate.
    pub enabled: bool,
    /// Any password works.
    pub nopass: bool,
    /// `skip-sanitize-payload`.
    pub skip_sanitize: bool,
    /// SHA-256 hex digests of the passwords.
    pub passwords: Vec<String>,
    /// The root selector first, then the `(...)` ones.
    pub selectors: Vec<Selector>,
    /// Everything allowed everywhere: the one-branch fast path.
    pub unrestricted: bool,
}

impl User {
    /// A new user as Redis creates one: off, no password, nothing allowed.
    pub fn new(name: &str, ncmds: usize, pubsub_all: bool) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            passwords: Vec::new(),
            selectors: vec![Selector::new(ncmds, pubsub_all)],
            unrestricted: false,
        }
    }

    fn refresh(&mut self) {
        let r = &self.selectors[0];
        self.unrestricted = r.all_commands && r.all_keys && r.all_channels;
    }

    /// Applies one user rule.
    pub fn apply(&mut self, cat: &Catalog, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        let res = self.apply_inner(cat, op, pubsub_all);
        self.refresh();
        res
    }

    fn apply_inner(&mut self, cat: &Catalog, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => self.skip_sanitize = true,
            "sanitize-payload" => self.skip_sanitize = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.truncate(1),
            "reset" => {
                self.nopass = false;
                self.passwords.clear();
                let root = &mut self.selectors[0];
                root.apply(cat, b"resetkeys")?;
                root.apply(cat, b"resetchannels")?;
                if pubsub_all {
                    root.apply(cat, b"allchannels")?;
                }
                self.enabled = false;
                self.skip_sanitize = false;
                self.selectors.truncate(1);
                self.selectors[0].apply(cat, b"-@all")?;
            }
            _ => match op[0] {
                b'>' | b'#' => {
                    let h = if op[0] == b'>' { sha256::hex(&op[1..]) } else { valid_hash(&op[1..])? };
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let h = if op[0] == b'<' { sha256::hex(&op[1..]) } else { valid_hash(&op[1..])? };
                    let at = self.passwords.iter().position(|p| *p == h).ok_or(RuleError::NoPass)?;
                    self.passwords.remove(at);
                }
                b'(' if op.ends_with(b")") => {
                    let mut s = Selector::new(cat.cmds.len(), pubsub_all);
                    let inner = &op[1..op.len() - 1];
                    let words = resp::parse::split_args(inner).ok_or(RuleError::Syntax)?;
                    for w in words {
                        s.apply(cat, &w).map_err(|e| RuleError::Inner(e.message()))?;
                    }
                    self.selectors.push(s);
                }
                _ => self.selectors[0].apply(cat, op)?,
            },
        }
        Ok(())
    }

    /// True if `password` authenticates this user (enabled ones only).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = sha256::hex(password);
        // Every stored hash is compared, each in constant time.
        self.passwords.iter().fold(false, |ok, p| sha256::same(p.as_bytes(), h.as_bytes()) | ok)
    }

    /// Checks `id` with `argv` against every selector. `keys` are (index,
    /// READ|WRITE needed) pairs, `channels` (index, is a pattern).
    ///
    /// Errors: when no selector allows it, the refusal Redis reports: the
    /// command if no selector allows the command, else the last key or
    /// channel no selector could match.
    pub fn check(&self, cat: &Catalog, id: usize, argv: &[Vec<u8>], keys: &[(usize, u8)], channels: &[(usize, bool)]) -> Result<(), Denied> {
        if self.unrestricted {
            return Ok(());
        }
        let mut worst = Denied::Cmd;
        for s in &self.selectors {
            match s.check(cat, id, argv, keys, channels) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// True if one selector allows `id` with `argv` and grants `need` on
    /// every key (`~*`, `%R~*` ...): SORT's BY and GET need that.
    pub fn allows_cmd_with_all_keys(&self, cat: &Catalog, id: usize, argv: &[Vec<u8>], need: u8) -> bool {
        self.selectors.iter().any(|s| {
            s.allows_cmd(cat, id, argv) && (s.all_keys || s.patterns.iter().any(|(p, f)| f & need == need && p.as_slice() == b"*"))
        })
    }

    /// True if some selector allows `channel` (PUBLISH-like use, or a
    /// PSUBSCRIBE pattern when `is_pattern`).
    pub fn allows_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors.iter().any(|s| s.allows_channel(channel, is_pattern))
    }

    /// Flags in ACL GETUSER order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f.push(if self.skip_sanitize { "skip-sanitize-payload" } else { "sanitize-payload" });
        f
    }

    /// The user's rules as ACL LIST and ACL files write them (after the name).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for f in self.flag_names() {
            s.push_str(f);
            s.push(' ');
        }
        for p in &self.passwords {
            s.push('#');
            s.push_str(p);
            s.push(' ');
        }
        s.push_str(&self.selectors[0].describe());
        for sel in &self.selectors[1..] {
            s.push_str(" (");
            s.push_str(&sel.describe());
            s.push(')');
        }
        s
    }
}

fn valid_hash(h: &[u8]) -> Result<String, RuleError> {
    if h.len() != 64 || !h.iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)) {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// Joins `(`...`)` selector words split by the client back into one rule.
///
/// Errors: the index of a `(` never closed.
pub fn merge_selector_args(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, a) in args.iter().enumerate() {
        if let Some((_, cur)) = open.as_mut() {
            cur.push(b' ');
            cur.extend_from_slice(a);
            if a.last() == Some(&b')') {
                out.push(open.take().expect("open").1);
            }
            continue;
        }
        if a.first() == Some(&b'(') && a.last() != Some(&b')') {
            open = Some((i, a.clone()));
            continue;
        }
        out.push(a.clone());
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(out),
    }
}

/// Applies `args` (ACL SETUSER's rules) to a copy of `base` (or a new user
/// named `name`) and returns it; nothing changes on error.
///
/// Errors: Redis's full error text, without `ERR `.
pub fn build_user(cat: &Catalog, base: Option<&User>, name: &str, args: &[Vec<u8>], pubsub_all: bool) -> Result<User, String> {
    let merged = merge_selector_args(args)
        .map_err(|i| format!("Unmatched parenthesis in acl selector starting at '{}'.", String::from_utf8_lossy(&args[i])))?;
    let mut u = base.cloned().unwrap_or_else(|| User::new(name, cat.cmds.len(), pubsub_all));
    for op in &merged {
        u.apply(cat, op, pubsub_all)
            .map_err(|e| format!("Error in ACL SETUSER modifier '{}': {}", String::from_utf8_lossy(op), e.message()))?;
    }
    Ok(u)
}

/// A shared user: clients authenticated as it see its changes at once.
pub type UserRef = Rc<RefCell<User>>;

/// Where a refusal happened, for ACL LOG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogContext {
    /// A client's own command.
    Toplevel,
    /// Inside MULTI/EXEC.
    Multi,
    /// A script's `redis.call`.
    Lua,
}

impl LogContext {
    fn name(self) -> &'static str {
        match self {
            LogContext::Toplevel => "toplevel",
            LogContext::Multi => "multi",
            LogContext::Lua => "lua",
        }
    }
}

/// One ACL LOG entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// Similar events merged into it.
    pub count: u64,
    /// What was refused.
    pub reason: &'static str,
    /// Where.
    pub context: &'static str,
    /// The command, key, channel or AUTH word.
    pub object: Vec<u8>,
    /// Who.
    pub username: Vec<u8>,
    /// Last occurrence, Unix ms.
    pub ctime: i64,
    /// The client's CLIENT LIST line at the last occurrence.
    pub cinfo: String,
    /// Unique id.
    pub entry_id: u64,
    /// First occurrence, Unix ms.
    pub created: i64,
}

/// Merge window for similar log entries (ms).
const LOG_GROUPING_MS: i64 = 60_000;

/// All users, the ACL log and its counters.
pub struct Acl {
    /// Users by name (byte order, as ACL USERS lists them).
    pub users: BTreeMap<String, UserRef>,
    /// The command table as the ACL sees it.
    pub catalog: Rc<Catalog>,
    /// Newest first.
    pub log: VecDeque<LogEntry>,
    /// Next entry id.
    pub log_next_id: u64,
    /// INFO's acl_access_denied_auth, _cmd, _key, _channel.
    pub denied: [u64; 4],
    /// acl-pubsub-default is allchannels.
    pub pubsub_all: bool,
}

impl Default for Acl {
    fn default() -> Self {
        Acl::new(Rc::new(Catalog::default()))
    }
}

impl Acl {
    /// Every user as an ACL file (or config file) line.
    pub fn file_text(&self) -> String {
        self.users.iter().map(|(n, u)| format!("user {n} {}\n", u.borrow().describe())).collect()
    }

    /// The users a fresh server has: just `default`, allowed everything.
    pub fn new(catalog: Rc<Catalog>) -> Acl {
        let mut acl = Acl { users: BTreeMap::new(), catalog, log: VecDeque::new(), log_next_id: 0, denied: [0; 4], pubsub_all: false };
        let d = acl.default_user_fresh();
        acl.users.insert("default".into(), Rc::new(RefCell::new(d)));
        acl
    }

    /// The default user's initial rules.
    pub fn default_user_fresh(&self) -> User {
        let cat = &self.catalog;
        let mut u = User::new("default", cat.cmds.len(), false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            u.apply(cat, op.as_bytes(), false).expect("default user rules");
        }
        u
    }

    /// Installs the command table and rebuilds the users' bitmaps from
    /// their rules (users created before it allowed nothing concrete).
    pub fn set_catalog(&mut self, catalog: Rc<Catalog>) {
        self.catalog = catalog;
        for u in self.users.values() {
            let old = u.borrow().clone();
            let fresh = User::new(&old.name, self.catalog.cmds.len(), self.pubsub_all);
            if let Some(r) = rebuild(&self.catalog, fresh, &old.describe(), self.pubsub_all) {
                *u.borrow_mut() = r;
            }
        }
    }

    /// The default user.
    pub fn default_user(&self) -> UserRef {
        self.users["default"].clone()
    }

    /// A user by name.
    pub fn user(&self, name: &[u8]) -> Option<UserRef> {
        std::str::from_utf8(name).ok().and_then(|n| self.users.get(n)).cloned()
    }

    /// True if new connections must AUTH first.
    pub fn auth_required(&self) -> bool {
        let d = self.users["default"].borrow();
        !d.nopass || !d.enabled
    }

    /// requirepass: sets the default user's only password, or nopass.
    pub fn set_requirepass(&mut self, pass: &[u8]) {
        let cat = self.catalog.clone();
        let d = self.default_user();
        let mut d = d.borrow_mut();
        d.apply(&cat, b"resetpass", false).expect("resetpass");
        if pass.is_empty() {
            d.apply(&cat, b"nopass", false).expect("nopass");
        } else {
            let mut op = b">".to_vec();
            op.extend_from_slice(pass);
            d.apply(&cat, &op, false).expect("password");
        }
    }

    /// Records a refusal in the log (merging it with a similar recent one)
    /// and the INFO counters; `max_len` is acllog-max-len.
    #[allow(clippy::too_many_arguments)]
    pub fn log_event(&mut self, d: Denied, ctx: LogContext, object: Vec<u8>, username: Vec<u8>, cinfo: String, now: i64, max_len: usize) {
        self.denied[match d {
            Denied::Auth => 0,
            Denied::Cmd => 1,
            Denied::Key(_) => 2,
            Denied::Channel(_) => 3,
        }] += 1;
        if max_len == 0 {
            self.log.clear();
            return;
        }
        let reason = d.reason();
        let context = ctx.name();
        let hit = self.log.iter().take(10).position(|e| {
            e.reason == reason && e.context == context && (e.ctime - now).abs() <= LOG_GROUPING_MS && e.object == object && e.username == username
        });
        if let Some(i) = hit {
            let mut e = self.log.remove(i).expect("found");
            e.cinfo = cinfo;
            e.ctime = now;
            e.count += 1;
            self.log.push_front(e);
            return;
        }
        let entry_id = self.log_next_id;
        self.log_next_id += 1;
        self.log.push_front(LogEntry { count: 1, reason, context, object, username, ctime: now, cinfo, entry_id, created: now });
        self.log.truncate(max_len);
    }
}

/// Re-applies `rules` (a `describe` string) to `fresh`.
fn rebuild(cat: &Catalog, fresh: User, rules: &str, pubsub_all: bool) -> Option<User> {
    let words: Vec<Vec<u8>> = resp::parse::split_args(rules.as_bytes())?;
    build_user(cat, Some(&fresh), &fresh.name, &words, pubsub_all).ok()
}

/// The ACL file / `user` directive form: `user NAME rules...` lines parsed
/// into users. Errors: Redis-like text naming the line.
pub fn parse_users(cat: &Catalog, lines: &[Vec<Vec<u8>>], pubsub_all: bool) -> Result<BTreeMap<String, User>, String> {
    let mut users: BTreeMap<String, User> = BTreeMap::new();
    for (i, words) in lines.iter().enumerate() {
        if words.len() < 2 || !words[0].eq_ignore_ascii_case(b"user") {
            return Err(format!("/line {}: should start with user keyword", i + 1));
        }
        let name = String::from_utf8_lossy(&words[1]).into_owned();
        if name.contains(' ') || name.contains('\0') {
            return Err(format!("/line {}: Usernames can't contain spaces or null characters", i + 1));
        }
        if users.contains_key(&name) {
            return Err(format!("/line {}: Duplicate user '{name}' found", i + 1));
        }
        let u = build_user(cat, None, &name, &words[2..], pubsub_all).map_err(|e| format!("/line {}: {e}", i + 1))?;
        users.insert(name, u);
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let mk = |name, cats, parent, subs: Vec<usize>| CatalogCmd { name, cats, parent, subs, no_auth: false };
        Catalog::new(vec![
            mk("get", &["read", "string", "fast"], None, vec![]),
            mk("set", &["write", "string", "slow"], None, vec![]),
            mk("config", &[], None, vec![3, 4]),
            mk("config|get", &["admin", "slow"], Some(2), vec![]),
            mk("config|set", &["admin", "slow"], Some(2), vec![]),
            mk("select", &["fast", "connection"], None, vec![]),
        ])
    }

    fn user(rules: &str) -> User {
        let cat = catalog();
        let args: Vec<Vec<u8>> = rules.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        build_user(&cat, None, "u", &args, false).unwrap()
    }

    fn argv(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn rules_compact_as_redis_describes_them() {
        let u = user("+@all -@string +get -@string");
        assert_eq!(u.selectors[0].describe_commands(), "+@all +get -@string");
        let u = user("-@all +config|get +config -config|set");
        assert_eq!(u.selectors[0].describe_commands(), "-@all +config -config|set");
        let u = user("on >pw ~app:* +@read");
        assert_eq!(u.describe(), format!("on sanitize-payload #{} ~app:* resetchannels -@all +@read", sha256::hex(b"pw")));
    }

    #[test]
    fn checks_commands_keys_and_first_args() {
        let cat = catalog();
        let u = user("~app:* +@read +select|0");
        assert_eq!(u.check(&cat, 0, &argv("get app:1"), &[(1, READ)], &[]), Ok(()));
        assert_eq!(u.check(&cat, 0, &argv("get other"), &[(1, READ)], &[]), Err(Denied::Key(1)));
        assert_eq!(u.check(&cat, 1, &argv("set app:1 v"), &[(1, WRITE)], &[]), Err(Denied::Cmd));
        assert_eq!(u.check(&cat, 5, &argv("select 0"), &[], &[]), Ok(()));
        assert_eq!(u.check(&cat, 5, &argv("select 1"), &[], &[]), Err(Denied::Cmd));
        let r = user("%R~r:* +@all");
        assert_eq!(r.check(&cat, 1, &argv("set r:1 v"), &[(1, WRITE)], &[]), Err(Denied::Key(1)));
        let e = build_user(&cat, None, "u", &argv("+config|get|x"), false).unwrap_err();
        assert!(e.ends_with("Allowing first-arg of a subcommand is not supported"), "{e}");
    }

    #[test]
    fn passwords_and_selectors() {
        let u = user("on >a >b <a");
        assert!(!u.password_ok(b"a") && u.password_ok(b"b"));
        let cat = catalog();
        let args = argv("+get ~a (+set ~b)");
        let u = build_user(&cat, None, "u", &args, false).unwrap();
        assert_eq!(u.selectors.len(), 2);
        assert_eq!(u.check(&cat, 1, &argv("set b v"), &[(1, WRITE)], &[]), Ok(()));
        assert_eq!(u.check(&cat, 1, &argv("set a v"), &[(1, WRITE)], &[]), Err(Denied::Key(1)));
        assert!(build_user(&cat, None, "u", &argv("(+get"), false).is_err());
    }
}
