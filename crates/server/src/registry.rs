//! The whole command table: every family's rows plus scripting's, joined
//! once at start. Sits above `script/` (whose rows it adds) and below the
//! event loop, which owns the table and lends it to dispatch.

use crate::command::{build_table, CommandMap};

/// All commands, keyed by lowercase name.
pub fn registry() -> CommandMap {
    let mut all = crate::commands::table();
    all.extend(crate::script::table());
    build_table(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::flags;

    #[test]
    fn table_is_consistent() {
        let reg = registry();
        for (name, s) in reg.iter() {
            assert_eq!(name, &name.to_ascii_lowercase());
            assert!(!(s.has(flags::WRITE) && s.has(flags::READONLY)), "{name}: WRITE and READONLY");
            assert!(s.arity != 0, "{name}: arity 0");
            let mut seen = std::collections::HashSet::new();
            for sub in &s.subcommands {
                assert!(seen.insert(sub.name), "{name}|{} twice", sub.name);
                assert!(!(sub.has(flags::WRITE) && sub.has(flags::READONLY)));
            }
        }
    }

    /// The names an I/O thread finds commands by give the places the table
    /// itself gives, for every name in any case, after renames too (the
    /// executor runs the command at that place without looking again).
    #[test]
    fn names_find_what_the_table_finds() {
        let mut table = registry();
        let map = std::rc::Rc::make_mut(&mut table);
        let get = map.remove("get").expect("get");
        map.insert("fetch-renamed-to-a-name-longer-than-24".into(), get);
        let names = table.names();
        let mut probes: Vec<Vec<u8>> = vec![b"get".to_vec(), b"nosuchcommand".to_vec(), Vec::new(), b"FETCH-RENAMED-TO-A-NAME-LONGER-THAN-25".to_vec()];
        for (name, _) in table.iter() {
            probes.push(name.as_bytes().to_vec());
            probes.push(name.to_ascii_uppercase().into_bytes());
            probes.push(name.bytes().enumerate().map(|(i, b)| if i % 2 == 0 { b.to_ascii_uppercase() } else { b }).collect());
        }
        let mut found = 0;
        for p in &probes {
            let at = names.find_at(p);
            assert_eq!(at, table.find_at(p), "{}", String::from_utf8_lossy(p));
            if let Some(at) = at {
                assert!(std::ptr::eq(table.at(at).expect("a place in the table"), table.find(p).expect("found")));
                found += 1;
            }
        }
        assert_eq!(found, table.len() * 3);
        assert!(names.find_at(b"FETCH-RENAMED-TO-A-NAME-LONGER-THAN-24").is_some());
        assert!(names.find_at(b"get").is_none());
    }
}
