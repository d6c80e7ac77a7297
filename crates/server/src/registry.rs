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
}
