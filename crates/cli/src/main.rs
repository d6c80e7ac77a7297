//! `densekv`: tools around a densekv (or Redis) server.
//!
//! - `densekv memory-report`: memory by key pattern, as a table and an HTML
//!   page with charts (MEMORY REPORT on densekv, SCAN + MEMORY USAGE on
//!   Redis), optionally two servers side by side.
//! - `densekv import`: CSV, JSONL or RESP into a server, pipelined, with a
//!   progress bar, optionally into a staging database swapped in at the end.
//!
//! Exit codes: 0 done, 1 failed (connection, server error, an aborted
//! import), 2 usage error (clap's).

mod conn;
mod import;
mod report;

use std::process::ExitCode;

use clap::{ArgAction, Args, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "densekv", version, about = "Tools for densekv and Redis servers: memory report by key pattern, bulk import")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// Where the server is (redis-cli's -h -p -a).
#[derive(Args, Clone)]
struct ServerArgs {
    /// Server host.
    #[arg(short = 'h', long = "host", default_value = "127.0.0.1")]
    host: String,
    /// Server port.
    #[arg(short = 'p', long = "port", default_value_t = 6379)]
    port: u16,
    /// Password (AUTH).
    #[arg(short = 'a', long = "password")]
    password: Option<String>,
    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,
}

impl ServerArgs {
    fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Memory by key pattern: a table, and an HTML page with charts.
    #[command(disable_help_flag = true)]
    MemoryReport {
        #[command(flatten)]
        server: ServerArgs,
        /// Database to report on.
        #[arg(long, default_value_t = 0)]
        db: u32,
        /// Only keys starting with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Patterns shown at most.
        #[arg(long, default_value_t = 30)]
        limit: usize,
        /// Write a self-contained HTML page with charts here.
        #[arg(long, value_name = "FILE")]
        html: Option<String>,
        /// A second server (host:port) to report beside the first.
        #[arg(long, value_name = "HOST:PORT")]
        compare: Option<String>,
    },
    /// Load CSV, JSONL or RESP records, pipelined.
    #[command(disable_help_flag = true)]
    Import {
        #[command(flatten)]
        server: ServerArgs,
        /// Input file, `-` for standard input.
        file: String,
        /// Input format.
        #[arg(long, value_enum)]
        format: import::Format,
        /// Gzipped input: auto looks at the name (.gz) and the magic bytes.
        #[arg(long, value_enum, default_value = "auto")]
        gzip: import::Gzip,
        /// A command per record, e.g. 'SET {0} {1}' or 'HSET user:{id} name {name}'
        /// (repeatable). {N}: CSV column N (from 0); {name}: CSV header or JSON field.
        #[arg(long = "map", value_name = "TEMPLATE")]
        maps: Vec<String>,
        /// The CSV input's first row names the columns.
        #[arg(long)]
        header: bool,
        /// EXPIRE each written key after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
        /// Database to write to (without --into-db).
        #[arg(long, default_value_t = 0)]
        db: u32,
        /// Load into this database, emptied first (a staging database).
        #[arg(long, value_name = "N")]
        into_db: Option<u32>,
        /// After a complete load, SWAPDB the staging database with this one.
        #[arg(long, value_name = "M", requires = "into_db")]
        swap_with: Option<u32>,
        /// On a malformed record or an error reply: report it and go on, or stop.
        #[arg(long, value_enum, default_value = "skip")]
        on_error: import::OnError,
        /// Commands in flight at most (client memory stays bounded).
        #[arg(long, default_value_t = 1000)]
        window: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("densekv: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<bool, String> {
    match cli.cmd {
        Cmd::MemoryReport { server, db, prefix, limit, html, compare } => {
            let mut addrs = vec![server.addr()];
            addrs.extend(compare);
            let mut sums = Vec::new();
            for addr in addrs {
                let t = report::Target { addr, password: server.password.as_deref(), db, prefix: prefix.as_deref(), limit };
                let s = report::collect(&t).map_err(|e| e.to_string())?;
                print!("{}", report::table(&s));
                sums.push(s);
            }
            if let Some(path) = html {
                std::fs::write(&path, report::html(&sums)).map_err(|e| format!("{path}: {e}"))?;
                eprintln!("wrote {path}");
            }
            Ok(true)
        }
        Cmd::Import { server, file, format, gzip, maps, header, ttl, db, into_db, swap_with, on_error, window } => {
            let conn = report::connect(&server.addr(), server.password.as_deref()).map_err(|e| e.to_string())?;
            let o = import::Opts { file, format, gzip, maps, header, ttl, db, into_db, swap_with, on_error, window };
            import::run(&o, conn)
        }
    }
}
