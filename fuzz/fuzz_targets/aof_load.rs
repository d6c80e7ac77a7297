//! Fuzz target for the AOF loader: arbitrary bytes as an AOF image (an
//! optional RDB preamble, then commands) are replayed through the command
//! table with the loader's fake client, and as a manifest's text are
//! parsed; neither may panic. Commands that stop, sleep, touch the
//! process or allocate what the input merely names (SETRANGE 512 MB) are
//! skipped: they are the commands' business, not the loader's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use server::aof::load::replay_image;
use server::aofcore::manifest::Manifest;
use server::command::{CommandMap, Host, Scripts};
use server::config::Config;
use server::registry::registry;
use server::script::engine::Engine;
use server::server::Server;

struct FuzzHost {
    table: CommandMap,
    engine: Engine,
}

impl Host for FuzzHost {
    fn table(&self) -> &CommandMap {
        &self.table
    }
    fn scripts(&mut self) -> &mut dyn Scripts {
        &mut self.engine
    }
    fn scripts_ref(&self) -> &dyn Scripts {
        &self.engine
    }
    fn serve_others(&mut self, _srv: &mut Server) {}
}

const SKIPPED: &[&str] = &[
    "debug", "shutdown", "save", "bgrewriteaof", "config", "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "function", "script",
    "client", "monitor", "setrange", "setbit", "bitfield", "bitfield_ro", "sync", "psync", "replicaof", "slaveof", "failover", "wait", "waitaof",
    "acl", "module", "migrate",
];

fn allow(argv: &[Vec<u8>]) -> bool {
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
    !SKIPPED.contains(&name.as_str())
}

thread_local! {
    // Built once: the table's names live for the whole process.
    static HOST: std::cell::RefCell<FuzzHost> = std::cell::RefCell::new({
        let table = registry();
        FuzzHost { engine: Engine::new(table.clone()), table }
    });
}

fuzz_target!(|data: &[u8]| {
    let _ = Manifest::parse(data);
    let mut config = Config::default();
    let _ = config.set("loglevel", "warning", true);
    let _ = config.set("logfile", "/dev/null", true);
    config.refresh();
    let mut srv = Server::new(config);
    HOST.with(|h| {
        let _ = replay_image(&mut srv, &mut *h.borrow_mut(), data, &allow);
    });
});
