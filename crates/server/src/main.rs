//! densekv-server: a Redis-compatible in-memory data store.
//!
//! Started exactly like redis-server, so it can replace it in service
//! units, containers and Redis's own test suite:
//! `densekv-server [/path/to/redis.conf] [--name value ...] [-]`, plus
//! `-v`/`--version` and `-h`/`--help`. Start-up follows Redis's order and
//! log lines (`Configuration loaded` ... ` PID: ` ... `Server initialized`,
//! `Ready to accept connections tcp`), which tools wait for; a bad config
//! or a busy port exits with status 1 and Redis's messages.

use std::io::Read;
use std::process::ExitCode;

use server::config::{self, Config, LoadError};
use server::log::Log;
use server::net::{self, EventLoop};
use server::process;
use server::server::Server;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// densekv's own version.
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let prog = argv.first().cloned().unwrap_or_else(|| "densekv-server".into());
    process::remember_exec_name(&prog);
    let args = &argv[1.min(argv.len())..];
    // One binary, several tools, chosen by the name it runs under (as Redis's).
    let exec_name = prog.rsplit('/').next().unwrap_or(&prog);
    match exec_name {
        n if n.ends_with("redis-check-rdb") => return ExitCode::from(server::check_rdb::main(&prog, args)),
        n if n.ends_with("redis-check-aof") => return ExitCode::from(server::aofcore::check::main(&prog, args)),
        _ => {}
    }
    if exec_name.contains("redis-sentinel") || args.iter().any(|a| a == "--sentinel") {
        eprintln!("Sentinel mode is not supported by densekv.");
        return ExitCode::from(1);
    }
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            println!("{}", version_line());
            return ExitCode::SUCCESS;
        }
        Some("-h" | "--help") => {
            usage();
            return ExitCode::from(1);
        }
        Some("--test-memory") => {
            eprintln!("--test-memory is not supported by densekv; use a dedicated memory tester (memtester).");
            return ExitCode::from(1);
        }
        Some("--check-system") => {
            println!("densekv runs no system checks.");
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    match run(&prog, args) {
        Ok(()) => {
            // As Redis's exit(0): the dataset is not freed piece by piece.
            std::process::exit(0);
        }
        Err(code) => ExitCode::from(code),
    }
}

/// `redis-server --version`'s line, with densekv's version after it.
fn version_line() -> String {
    let jemalloc = tikv_jemalloc_ctl::version::read().ok().and_then(|v| v.split('-').next().map(str::to_string)).unwrap_or_else(|| "5.3.0".into());
    // A build id in Redis's form (hex), derived from what identifies this build.
    let build = format!("{VERSION} {}", std::env::consts::ARCH).bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("Redis server v={} sha=00000000:0 malloc=jemalloc-{jemalloc} bits=64 build={build:x} densekv={VERSION}", server::REDIS_VERSION)
}

/// Redis's usage text, on standard error.
fn usage() {
    eprint!(
        "Usage: ./redis-server [/path/to/redis.conf] [options] [-]
       ./redis-server - (read config from stdin)
       ./redis-server -v or --version
       ./redis-server -h or --help
       ./redis-server --test-memory <megabytes>
       ./redis-server --check-system

Examples:
       ./redis-server (run the server with default conf)
       echo 'maxmemory 128mb' | ./redis-server -
       ./redis-server /etc/redis/6379.conf
       ./redis-server --port 7777
       ./redis-server --port 7777 --replicaof 127.0.0.1 8888
       ./redis-server /etc/myredis.conf --loglevel verbose -
       ./redis-server /etc/myredis.conf --loglevel verbose

Sentinel mode is not supported by densekv.
"
    );
}

/// Cluster mode's start: the bus port's bound checked, the cluster config
/// file locked and loaded (or a new node made and saved), with Redis's
/// lines.
///
/// Errors: the warning to log before exiting 1.
fn start_cluster(srv: &mut Server) -> Result<(), String> {
    let settings = server::server::cluster_settings(&srv.config);
    let given_bus_port = srv.config.get("cluster-port").is_some_and(|p| p != "0");
    if !given_bus_port && settings.port > 55535 {
        return Err("Redis port number too high. Cluster communication port is 10,000 port numbers higher than your Redis port. Your Redis port number must be 55535 or less.".into());
    }
    let file = srv.config.get("cluster-config-file").unwrap_or("nodes.conf").to_string();
    let (mut conf, text) = server::nodesconf::NodesConf::open(&file).map_err(|e| e.message().to_string())?;
    let seed = server::nodesconf::entropy_seed();
    let log = srv.config.log.clone();
    let mut cluster = match text {
        Some(text) => server::cluster::Cluster::load(&text, settings, seed).map_err(|e| format!("Unrecoverable error: corrupted cluster config file \"{e}\"."))?,
        None => server::cluster::Cluster::new(settings, seed),
    };
    // Its first lines (the node's name) go out now, in Redis's order, and a
    // new node's file is written at once; the rest waits for the loop.
    let mut rest = Vec::new();
    for a in std::mem::take(&mut cluster.actions) {
        match a {
            server::cluster::Action::Log { level, text } => match level {
                0 => log.debug(&text),
                1 => log.verbose(&text),
                2 => log.notice(&text),
                _ => log.warning(&text),
            },
            server::cluster::Action::SaveConfig { fsync } => {
                conf.save(&cluster.config_text(), fsync).map_err(|_| "Fatal: can't update cluster config file.".to_string())?;
            }
            other => rest.push(other),
        }
    }
    cluster.actions = rest;
    srv.cluster = Some(Box::new(cluster));
    srv.nodes_conf = Some(server::nodesconf::ConfWriter::start(conf).map_err(|e| format!("Can't start the cluster config writer: {}", config::strerror(&e)))?);
    Ok(())
}

/// After loading the data, as Redis's verifyClusterConfigWithData: keys
/// outside db 0 end the start; slots holding keys that nobody serves become
/// this node's, and those another node serves become importing
/// (`Cluster::verify_config_with_data`).
///
/// Errors: the warning to log before exiting 1.
fn verify_cluster_data(srv: &mut Server) -> Result<(), String> {
    if srv.dbs.iter().skip(1).any(|d| !d.is_empty()) {
        return Err("You can't have keys in a DB different than DB 0 when in Cluster mode. Exiting.".into());
    }
    let mut slots = std::collections::BTreeSet::new();
    srv.dbs[0].for_each(|k, _, _| {
        slots.insert(storage::slot::key_hash_slot(k));
    });
    if let Some(c) = srv.cluster.as_deref_mut() {
        c.verify_config_with_data(slots);
    }
    Ok(())
}

/// Loads the configuration, starts listening and serves until shutdown.
///
/// Errors: the exit status (1) after the reason was printed or logged.
fn run(prog: &str, args: &[String]) -> Result<(), u8> {
    server::crash::install();
    let start_dir = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let src = config::options_text(args);
    let early = Log { role: 'C', ..Log::default() };
    let mut config = Config::default();
    let mut text = String::new();
    if let Some(f) = &src.file {
        text = config::read_config_file(f).map_err(|e| {
            early.warning(&e.report());
            1
        })?;
        config.file = Some(std::path::absolute(f).map_or_else(|_| f.clone(), |p| p.to_string_lossy().into_owned()));
    }
    let mut stdin_text = None;
    if src.stdin {
        early.notice("Reading config from stdin");
        let mut input = String::new();
        let _ = std::io::stdin().read_to_string(&mut input);
        text.push_str(&input);
        stdin_text = Some(input);
    }
    if !args.is_empty() {
        text.push('\n');
        text.push_str(&src.options);
    }
    let table = server::registry::registry();
    if let Err(e) = config.load(&text, &|name| table.contains_key(name)) {
        match e {
            LoadError::Directive { .. } => eprint!("{}", e.report()),
            LoadError::Open(msg) => early.warning(&msg),
        }
        return Err(1);
    }
    drop(table);

    let (systemd, systemd_warning) = process::systemd_supervision(config.get("supervised").unwrap_or("no"));
    let background = config.flag("daemonize") && !systemd;
    if background && !process::is_daemon_copy() {
        // The copy does everything below; this process only starts it.
        return process::daemonize(&start_dir, stdin_text.as_deref()).map_err(|e| {
            eprintln!("Can't daemonize: {}", config::strerror(&e));
            1
        });
    }
    if background && config.get("pidfile").unwrap_or("").is_empty() {
        let _ = config.set("pidfile", process::DEFAULT_PIDFILE, true);
    }

    let pid = std::process::id();
    let early = Log { role: 'C', ..config.log.clone() };
    if let Some(w) = systemd_warning {
        early.warning(w);
    } else if systemd {
        early.notice("supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit.");
    }
    early.notice("oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo");
    early.notice(&format!("Redis version={}, bits=64, commit=00000000, modified=0, pid={pid}, just started", server::REDIS_VERSION));
    early.notice(&format!("densekv version={VERSION}: a Redis-compatible server; the Redis version above is the one it follows"));
    if args.is_empty() {
        early.warning(&format!(
            "Warning: no config file specified, using the default config. In order to specify a config file use {prog} /path/to/redis.conf"
        ));
    } else {
        early.notice("Configuration loaded");
    }

    let log = config.log.clone();
    server::crash::configure_from(&config);
    log.notice("monotonic clock: POSIX clock_gettime");
    // Threads take their CPU lists as they start; the executor first, so
    // the threads it starts inherit the server's list (affinity.rs).
    let list = |name: &str| config.get(name).unwrap_or("").to_string();
    server::affinity::configure(server::affinity::Lists {
        server: list("server-cpulist"),
        bio: list("bio-cpulist"),
        aof_rewrite: list("aof-rewrite-cpulist"),
        bgsave: list("bgsave-cpulist"),
    });
    server::affinity::pin(server::affinity::Role::Server);
    if let Some(warning) = server::affinity::disable_thp(config.flag("disable-thp")) {
        log.warning(&warning);
    }
    if config.flag("jemalloc-bg-thread") {
        // As Redis does: a background thread returns freed pages to the OS on
        // jemalloc's decay schedule even while the server is idle, so RSS
        // follows used_memory down after a load's transient buffers are freed.
        let _ = tikv_jemalloc_ctl::max_background_threads::write(1);
        let _ = tikv_jemalloc_ctl::background_thread::write(true);
    }
    let port = config.port;
    let tls_port: u16 = config.get("tls-port").and_then(|v| v.parse().ok()).unwrap_or(0);
    let bind = config.get("bind").unwrap_or("").to_string();
    let listen_opts = net::ListenOpts::from_config(&config);
    let unixsocket = config.get("unixsocket").unwrap_or("").to_string();
    let unixperm = config.get("unixsocketperm").and_then(|v| u32::from_str_radix(v, 8).ok()).unwrap_or(0);
    let renames = config.renames.clone();
    let pidfile = config.get("pidfile").unwrap_or("").to_string();
    let metrics_port: u16 = config.get("metrics-port").and_then(|v| v.parse().ok()).unwrap_or(0);
    let metrics_bind = config.get("metrics-bind").unwrap_or("127.0.0.1").to_string();
    let mut srv = Server::new(config);
    srv.supervised_systemd = systemd;
    if !pidfile.is_empty() {
        if let Err(e) = process::write_pidfile(&pidfile) {
            log.warning(&format!("Failed to write PID file: {}", config::strerror(&e)));
        }
    }
    let fail = |msg: &str| {
        log.warning(msg);
        if !pidfile.is_empty() {
            process::remove_pidfile(&pidfile);
        }
        1
    };
    let cluster = srv.config.flag("cluster-enabled");
    if cluster {
        start_cluster(&mut srv).map_err(|e| fail(&e))?;
    }
    let mode = if cluster { "cluster" } else { "standalone" };
    log.notice(&format!("Running mode={mode}, port={port}."));
    log.notice(&format!("densekv {VERSION} {mode}, port {port}, PID: {pid}"));
    // The AOF loader and opener log their own reasons, as Redis does.
    let fail_quiet = || {
        if !pidfile.is_empty() {
            process::remove_pidfile(&pidfile);
        }
        1
    };
    if tls_port != 0 {
        match srv.build_tls() {
            Ok(cfg) => srv.tls = Some(cfg),
            Err(e) => {
                log.warning(&e);
                return Err(fail("Failed to configure TLS. Check logs for more info."));
            }
        }
    }
    let listeners = net::listen(&bind, port, &listen_opts, &log).map_err(|_| fail(&format!("Failed listening on port {port} (tcp), aborting.")))?;
    let tls_listeners = net::listen(&bind, tls_port, &listen_opts, &log).map_err(|_| fail(&format!("Failed listening on port {tls_port} (tls), aborting.")))?;
    let unix = if unixsocket.is_empty() {
        None
    } else {
        match net::listen_unix(&unixsocket, unixperm) {
            Ok(l) => Some((l, unixsocket.clone())),
            Err(e) => return Err(fail(&format!("Failed opening Unix socket: {}", config::strerror(&e)))),
        }
    };
    if listeners.is_empty() && tls_listeners.is_empty() && unix.is_none() {
        return Err(fail("Configured to not listen anywhere, exiting."));
    }
    let mut ev = EventLoop::new(listeners, tls_listeners, unix, &renames).map_err(|e| fail(&format!("Failed creating the event loop. Error message: '{}'", config::strerror(&e))))?;
    if let Some(bus_port) = srv.cluster.as_deref().map(|c| c.settings.bus_port) {
        // The bus listens on the same addresses as clients, as Redis's.
        let bus = net::listen(&bind, bus_port, &listen_opts, &log).map_err(|_| fail(&format!("Failed listening on port {bus_port} (cluster), aborting.")))?;
        ev.serve_bus(bus).map_err(|e| fail(&format!("Failed creating the event loop. Error message: '{}'", config::strerror(&e))))?;
    }
    // ACL rules name commands as the table defines them, whatever
    // rename-command did (Redis works from its original table too).
    let io_threads: usize = srv.config.get("io-threads").and_then(|v| v.parse().ok()).unwrap_or(1);
    ev.start_io_threads(&mut srv, io_threads).map_err(|e| fail(&format!("Failed creating the I/O threads: {}", config::strerror(&e))))?;
    if metrics_port != 0 {
        match ev.serve_metrics(&metrics_bind, metrics_port) {
            Ok(addr) => log.notice(&format!("Serving metrics on http://{addr}/metrics")),
            Err(e) => return Err(fail(&format!("Failed serving metrics on {metrics_bind}:{metrics_port}: {e}"))),
        }
    }
    let catalog = server::command::catalog(&server::registry::registry());
    if let Err(e) = server::commands::acl::load_at_startup(&mut srv, catalog) {
        return Err(fail(&e));
    }
    srv.apply_proc_title();
    log.notice("Server initialized");
    srv.used_memory_startup = srv.used_memory();
    let started = std::time::Instant::now();
    match ev.load(&mut srv) {
        Ok(Some(st)) => {
            if st.empty > 0 {
                log.notice(&format!("Done loading RDB, keys loaded: {}, keys expired: {}, empty keys skipped: {}.", st.keys, st.expired, st.empty));
            } else {
                log.notice(&format!("Done loading RDB, keys loaded: {}, keys expired: {}.", st.keys, st.expired));
            }
            log.notice(&format!("DB loaded from disk: {:.3} seconds", started.elapsed().as_secs_f64()));
        }
        Ok(None) => {}
        // A shutdown signal or SHUTDOWN while loading: shut down, unsaved.
        Err(server::persist::LoadError::Interrupted) => return Ok(()),
        Err(e @ server::persist::LoadError::Corrupt(..)) => {
            // As Redis: the reason, then what the RDB checker finds in the
            // file, then exit.
            log.warning(&e.to_string());
            if let server::persist::LoadError::Corrupt(path, _) = &e {
                let verify = srv.config.flag("rdbchecksum") && !srv.skip_checksum_validation;
                server::check_rdb::print_lines(&server::check_rdb::check(&path.to_string_lossy(), verify).0);
            }
            return Err(fail("Terminating server after rdb file reading failure."));
        }
        Err(server::persist::LoadError::Logged) => return Err(fail_quiet()),
        Err(e) => {
            log.warning(&e.to_string());
            return Err(fail("Fatal error loading the DB, check server logs. Exiting."));
        }
    }
    if ev.open_aof(&mut srv).is_err() {
        return Err(fail_quiet());
    }
    if srv.cluster.is_some() {
        verify_cluster_data(&mut srv).map_err(|e| fail(&e))?;
    }
    server::replication::config_changed(&mut srv);
    server::cron::update_hz(&mut srv);
    // `replicaof` in the config file: the link starts with the loop; it
    // continues the history the RDB file carried, if it did.
    let primary = srv.config.get("replicaof").unwrap_or("").to_string();
    if let Some((host, p)) = primary.split_once(' ') {
        if let Ok(p) = p.parse::<u16>() {
            server::replication::set_primary(&mut srv, host.to_string(), p);
            srv.repl.cached = srv.repl.restored;
        }
    }
    srv.apply_expire_mode();
    let _ = srv.apply_oom_score();
    if srv.repl.restored && !srv.is_replica_node() {
        // Replicas of this primary before its restart continue by PSYNC.
        server::replication::start_restored(&mut srv);
    }
    if port != 0 {
        log.notice("Ready to accept connections tcp");
    }
    if tls_port != 0 {
        log.notice("Ready to accept connections tls");
    }
    if !unixsocket.is_empty() {
        log.notice("Ready to accept connections unix");
    }
    if systemd {
        process::notify_systemd("STATUS=Ready to accept connections\n");
        process::notify_systemd("READY=1\n");
    }
    let ran = ev.run(&mut srv).map_err(|e| {
        log.warning(&format!("Event loop failed: {}", config::strerror(&e)));
        1
    });
    // The last nodes.conf saves reach the file before the process ends.
    if let Some(w) = srv.nodes_conf.as_ref() {
        w.flush();
    }
    if !unixsocket.is_empty() {
        log.notice("Removing the unix socket file.");
        let _ = std::fs::remove_file(&unixsocket);
    }
    ran
}
