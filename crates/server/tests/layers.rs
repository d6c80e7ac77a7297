//! The module stacks of the server and storage crates, checked.
//!
//! Each crate's modules form a stack (drawn in docs/design/server.md and
//! docs/design/keyspace.md): a source file may use files of its own layer
//! or of layers below it, never one above, and no two files may use each
//! other through any chain. This test reads every source file's paths into
//! the crate (`use crate::...`, inline `crate::x::y`, `super::...`, and a
//! module's own children), resolves each to the file that defines it, and
//! fails on an arrow that runs up or on a cycle. A file's `#[cfg(test)]`
//! module and `tests.rs` files are left out: tests may reach anywhere.
//!
//! When a new module is added, put it in the stack below; the test fails
//! until it has a place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The server crate, bottom up. A module path names that module and,
/// for a directory, every file under it.
const SERVER: &[&[&str]] = &[
    &["affinity", "cmdname", "conn", "iothread", "glob", "memory", "lazyfree", "notify", "args", "keyspec", "log", "process", "oom", "check_rdb", "bgsave", "digest", "aofcore::manifest", "aofcore::reader", "acl", "sha256", "tls", "ldouble", "commandlog", "hotkeys"],
    &["config", "client", "aofcore::check", "crash", "nodesconf"],
    &["pubsub", "blocking", "memreport", "tracking", "feed", "aofcore::state", "aofcore", "repl", "cluster"],
    &["server"],
    &["publish", "obuf", "cron", "evict", "clientevict"],
    &["command", "access", "exec", "redirect", "dispatch", "persist", "shutdown", "aof", "replication", "migration", "overhead"],
    &["commands"],
    &["script"],
    &["registry", "metrics"],
    &["link", "bus"],
    &["net"],
    &["main", "crate"],
];

/// The storage crate, bottom up.
const STORAGE: &[&[&str]] = &[
    &["strref", "slab", "segment", "access", "eviction", "slot"],
    &["encoding"],
    &["types"],
    &["value"],
    &["blob"],
    &["keyspace"],
    &["rdb"],
    &["crate"],
];

/// A source file: its module path (`a::b`, `crate` for lib.rs) and text
/// without its test module.
struct File {
    module: String,
    text: String,
}

fn collect(dir: &Path, root: &Path, out: &mut Vec<File>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).expect("read source dir").map(|e| e.expect("dir entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, root, out);
            continue;
        }
        if p.extension().is_none_or(|e| e != "rs") || p.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let rel = p.strip_prefix(root).expect("under root").with_extension("");
        let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|l| l == "mod") {
            parts.pop();
        }
        let module = match parts.join("::").as_str() {
            "lib" => "crate".to_string(),
            m => m.to_string(),
        };
        let text = std::fs::read_to_string(&p).expect("read source");
        out.push(File { module, text: strip(&text) });
    }
}

/// The text without comments, string literals and the test module.
fn strip(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") || is_mod_decl(t) {
            continue;
        }
        // Visibility is not a use: `pub(super) fn`, `pub(crate) struct`.
        out.push_str(&line.replace("pub(super)", "pub").replace("pub(crate)", "pub"));
        out.push('\n');
    }
    // Drop string literals, so a path quoted in a message is not an arrow.
    let mut clean = String::with_capacity(out.len());
    let mut in_str = false;
    let mut prev = ' ';
    for ch in out.chars() {
        if ch == '"' && prev != '\\' && prev != '\'' {
            in_str = !in_str;
        } else if !in_str {
            clean.push(ch);
        }
        prev = if prev == '\\' && ch == '\\' { ' ' } else { ch };
    }
    clean
}

/// True for `mod x;` / `pub mod x;` / `pub(crate) mod x;`: declaring a
/// child is not using it.
fn is_mod_decl(line: &str) -> bool {
    let rest = line.strip_prefix("pub(crate) ").or_else(|| line.strip_prefix("pub ")).unwrap_or(line);
    rest.strip_prefix("mod ").is_some_and(|r| r.trim_end().ends_with(';'))
}

/// The module paths (relative to the crate root) that `f` names.
fn paths(f: &File, modules: &BTreeSet<String>) -> Vec<Vec<String>> {
    let text = &f.text;
    let mut found = Vec::new();
    let parent: Vec<String> = if f.module == "crate" { Vec::new() } else { f.module.split("::").map(String::from).collect() };
    let is_dir_module = modules.iter().any(|m| m.starts_with(&format!("{}::", f.module))) || f.module == "crate";
    // Where `super::` points: the parent of a file module; for a directory's
    // mod.rs the parent directory's module.
    let super_of: Vec<String> = parent[..parent.len().saturating_sub(1)].to_vec();
    let bytes = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !ident(bytes[i - 1]) && bytes[i - 1] != b':';
        if !starts_word || !ident(bytes[i]) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len() && ident(bytes[j]) {
            j += 1;
        }
        let head = &text[i..j];
        let base: Option<Vec<String>> = match head {
            "crate" => Some(Vec::new()),
            "super" => Some(super_of.clone()),
            "self" => Some(parent.clone()),
            _ if is_dir_module => {
                let mut child = parent.clone();
                child.push(head.to_string());
                modules.contains(&child.join("::")).then_some(parent.clone())
            }
            _ => None,
        };
        let Some(base) = base else {
            i = j;
            continue;
        };
        let mut start = if matches!(head, "crate" | "super" | "self") { j } else { i };
        let mut base = base;
        if head == "super" {
            // `super::super::x`: one level up per `super`.
            while text[start..].starts_with("::super") && !text[start + 7..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                base.pop();
                start += 7;
            }
        }
        for tail in expand(&text[start..]) {
            let mut p = base.clone();
            p.extend(tail);
            found.push(p);
        }
        i = j;
    }
    found
}

/// The paths after `::` at the start of `s` (or starting at `s` for a
/// child module), expanding one level of `{a, b::c}` groups.
fn expand(s: &str) -> Vec<Vec<String>> {
    let s = s.strip_prefix("::").unwrap_or(s);
    let mut segs = Vec::new();
    let mut rest = s;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut end = 0;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end = k;
                    break;
                }
            }
            let mut out = Vec::new();
            for item in split_top(&group[..end]) {
                for tail in expand(item.trim()) {
                    let mut p = segs.clone();
                    p.extend(tail);
                    out.push(p);
                }
            }
            return out;
        }
        let n = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if n == 0 {
            break;
        }
        segs.push(rest[..n].to_string());
        rest = &rest[n..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => return vec![segs],
        }
    }
    vec![segs]
}

fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut from) = (0, 0);
    for (k, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    out.push(&s[from..]);
    out
}

/// The file (module) a path lands in: its longest prefix that is a module.
fn resolve(path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    (1..=path.len()).rev().map(|k| path[..k].join("::")).find(|m| modules.contains(m)).or_else(|| Some("crate".into()))
}

fn layer_of(module: &str, stack: &[&[&str]]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, layer) in stack.iter().enumerate() {
        for &m in layer.iter() {
            let hit = module == m || module.starts_with(&format!("{m}::"));
            if hit && best.is_none_or(|(len, _)| m.len() > len) {
                best = Some((m.len(), i));
            }
        }
    }
    best.map(|b| b.1)
}

/// Checks one crate; returns the problems found.
fn check(src: &Path, stack: &[&[&str]]) -> Vec<String> {
    let mut files = Vec::new();
    collect(src, src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| f.module.clone()).collect();
    let mut problems = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let Some(from) = layer_of(&f.module, stack) else {
            problems.push(format!("{}: not in the documented stack", f.module));
            continue;
        };
        let out = edges.entry(f.module.clone()).or_default();
        for p in paths(f, &modules) {
            let Some(to) = resolve(&p, &modules) else { continue };
            // A directory's mod.rs declaring its children is not a use; an
            // import of an ancestor module's own items is (crate root: none).
            if to == f.module || to == "crate" {
                continue;
            }
            out.insert(to.clone());
            if let Some(l) = layer_of(&to, stack) {
                if l > from {
                    problems.push(format!("{} (layer {}) uses {} (layer {}): an arrow up", f.module, from + 1, to, l + 1));
                }
            }
        }
    }
    // Cycles: a depth-first search over the file graph.
    let mut state: BTreeMap<&str, u8> = BTreeMap::new();
    let mut stack_path: Vec<&str> = Vec::new();
    fn visit<'a>(
        m: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
        problems: &mut Vec<String>,
    ) {
        state.insert(m, 1);
        path.push(m);
        for to in edges.get(m).into_iter().flatten() {
            match state.get(to.as_str()) {
                Some(1) => {
                    let at = path.iter().position(|p| *p == to).unwrap_or(0);
                    let mut cycle: Vec<&str> = path[at..].to_vec();
                    cycle.push(to);
                    problems.push(format!("cycle: {}", cycle.join(" -> ")));
                }
                Some(_) => {}
                None => visit(to, edges, state, path, problems),
            }
        }
        path.pop();
        state.insert(m, 2);
    }
    for m in edges.keys() {
        if !state.contains_key(m.as_str()) {
            visit(m, &edges, &mut state, &mut stack_path, &mut problems);
        }
    }
    problems
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name).join("src")
}

#[test]
fn server_modules_form_a_stack() {
    let problems = check(&crate_src("server"), SERVER);
    assert!(problems.is_empty(), "crates/server/src:\n{}", problems.join("\n"));
}

#[test]
fn storage_modules_form_a_stack() {
    let problems = check(&crate_src("storage"), STORAGE);
    assert!(problems.is_empty(), "crates/storage/src:\n{}", problems.join("\n"));
}

#[test]
fn the_check_sees_arrows_up_and_cycles() {
    let dir = std::env::temp_dir().join(format!("densekv-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("d")).expect("mkdir");
    let write = |p: &str, s: &str| std::fs::write(dir.join(p), s).expect("write");
    write("lib.rs", "pub mod a;\npub mod b;\npub mod d;\n");
    write("a.rs", "use crate::b::X;\nuse super::{d::g};\n");
    write("b.rs", "pub struct X;\nfn f() { crate::d::g(); }\n");
    write("d/mod.rs", "pub mod e;\nmod f;\nuse e::Y;\npub fn g() {}\n");
    write("d/f.rs", "use super::g;\npub(super) fn h() {}\n");
    write("d/e2.rs", "use super::super::{d::e::Y};\n");
    write("d/e.rs", "use super::g;\npub struct Y;\n#[cfg(test)]\nmod tests { use crate::a; }\n");
    let stack: &[&[&str]] = &[&["a"], &["b"], &["d"], &["crate"]];
    let problems = check(&dir, stack);
    assert!(problems.iter().any(|p| p.starts_with("a (layer 1) uses b (layer 2)")), "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("b (layer 2) uses d (layer 3)")), "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("a (layer 1) uses d (layer 3)")), "a group after super:: resolves: {problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("cycle: d -> d::e -> d") || p.starts_with("cycle: d::e -> d -> d::e")), "{problems:?}");
    assert!(!problems.iter().any(|p| p.contains("d::e (layer 3) uses a")), "test modules are left out: {problems:?}");
    assert!(problems.iter().filter(|p| p.contains("d::f")).count() == 0, "declaring a module or a visibility is not a use: {problems:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
