//! densekv-server: a Redis-compatible in-memory data store.
//!
//! `densekv-server [config-file] [--name value ...]`, like redis-server.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use server::config::Config;
use server::net::EventLoop;
use server::server::Server;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-v" || a == "--version") {
        println!("densekv-server v={} (Redis {} compatible)", env!("CARGO_PKG_VERSION"), server::REDIS_VERSION);
        return ExitCode::SUCCESS;
    }
    let config = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("*** FATAL CONFIG ERROR *** {e}");
            return ExitCode::from(1);
        }
    };
    let bind = config.get("bind").unwrap_or("127.0.0.1").split_whitespace().next().unwrap_or("127.0.0.1").to_string();
    let bind = bind.trim_start_matches('-');
    let ip: IpAddr = match bind.parse() {
        Ok(ip) => ip,
        Err(_) => {
            eprintln!("*** FATAL CONFIG ERROR *** bad bind address '{bind}'");
            return ExitCode::from(1);
        }
    };
    let addr = SocketAddr::new(ip, config.port);
    let mut ev = match EventLoop::bind(addr) {
        Ok(ev) => ev,
        Err(e) => {
            eprintln!("Warning: Could not create server TCP listening socket {addr}: {e}");
            eprintln!("Failed listening on port {} (tcp), aborting.", config.port);
            return ExitCode::from(1);
        }
    };
    if config.flag("jemalloc-bg-thread") {
        // As Redis does: a background thread returns freed pages to the OS on
        // jemalloc's decay schedule even while the server is idle, so RSS
        // follows used_memory down after a load's transient buffers are freed.
        let _ = tikv_jemalloc_ctl::max_background_threads::write(1);
        let _ = tikv_jemalloc_ctl::background_thread::write(true);
    }
    let mut srv = Server::new(config);
    let started = std::time::Instant::now();
    match ev.load(&mut srv) {
        Ok(Some((keys, expired))) => {
            println!("Done loading RDB, keys loaded: {keys}, keys expired: {expired}.");
            println!("DB loaded from disk: {:.3} seconds", started.elapsed().as_secs_f64());
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("{e}");
            eprintln!("Fatal error loading the DB, check server logs. Exiting.");
            return ExitCode::from(1);
        }
    }
    println!("densekv {} (Redis {} compatible) pid {} listening on {addr}", env!("CARGO_PKG_VERSION"), server::REDIS_VERSION, std::process::id());
    println!("Ready to accept connections tcp");
    match ev.run(&mut srv) {
        Ok(()) => {
            println!("densekv is now ready to exit, bye bye...");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("event loop failed: {e}");
            ExitCode::from(1)
        }
    }
}
