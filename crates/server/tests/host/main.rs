//! Dispatch on a socketless server: a test host stands in the event loop's
//! place, so command replies, propagation and CONFIG SET's hand-offs to the
//! host are checked without a network. One test binary for all of them:
//! each integration test binary links the whole server again.

mod cluster_commands;
mod config_io_threads;
mod propagate;

use server::client::Client;
use server::command::{CommandMap, Host, Scripts};
use server::dispatch;
use server::registry::registry;
use server::script::engine::Engine;
use server::server::Server;

/// The event loop's part without sockets: nobody else to serve. A new
/// I/O thread count is taken when `accept` says so (otherwise refused with
/// a reason), and every count asked for is kept in `asked`.
pub struct TestHost {
    table: CommandMap,
    engine: Engine,
    pub accept: bool,
    pub asked: Vec<usize>,
}

impl Default for TestHost {
    fn default() -> TestHost {
        let table = registry();
        TestHost { engine: Engine::new(table.clone()), table, accept: true, asked: Vec::new() }
    }
}

impl Host for TestHost {
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

    fn set_io_threads(&mut self, _srv: &mut Server, n: usize) -> Result<(), String> {
        self.asked.push(n);
        if self.accept {
            Ok(())
        } else {
            Err("no threads today".into())
        }
    }
}

/// A client of its own for tests that keep no connection state.
pub fn client() -> Client {
    Client::new(1, None, "test".into(), String::new())
}

/// Runs `line` for `c` and returns the reply it took, as text.
pub fn run(srv: &mut Server, host: &mut TestHost, c: &mut Client, line: &[&str]) -> String {
    let argv = line.iter().map(|w| w.as_bytes().to_vec()).collect();
    assert!(dispatch::call(srv, host, c, argv), "{line:?}");
    String::from_utf8_lossy(&std::mem::take(&mut c.reply.buf)).into_owned()
}
