//! The Prometheus endpoint (`metrics-port`, `metrics-bind`): `GET /metrics`
//! in the text exposition format, `GET /health`.
//!
//! An HTTP server (tiny_http) runs on a thread of its own and never touches
//! server state: for each scrape it queues a numbered request for the
//! executor and wakes the event loop (a mio `Waker`); the loop answers between
//! commands with [`answer`], which renders the whole page from the same
//! INFO text a client would get (so the two never disagree) plus the
//! per-command latency histograms. A scrape that finds the executor busy
//! (a long script, loading) gets 503 after a few seconds.
//!
//! Names: every numeric INFO field `f` becomes `densekv_f`; fields that
//! only grow (`total_*`, hits, misses, expired and evicted keys ...) are
//! counters, named `densekv_<f without total_>_total` (the HELP and TYPE
//! lines name the counter with its `_total`, as text format 0.0.4 does). Per command (label
//! `cmd`): `densekv_command_calls_total`, `..._usec_total`,
//! `..._rejected_calls_total`, `..._failed_calls_total` and the histogram
//! `densekv_command_latency_seconds` (LATENCY HISTOGRAM's power-of-two
//! buckets); per database (label `db`): `densekv_db_keys`,
//! `densekv_db_expires`, `densekv_db_avg_ttl_ms`; per error prefix (label
//! `error`): `densekv_errors_total`.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::command::{Ctx, Host};
use crate::commands::server::{info_text, wanted_sections};
use crate::server::Server;

/// How long a scrape waits for the executor.
const SCRAPE_WAIT: Duration = Duration::from_secs(5);

/// Scrapes that may wait for the executor at once; more get 503.
const QUEUED: usize = 16;

/// The executor's end: scrapes waiting for a page (by number), and where
/// pages go. Both channels are made once, with room for `QUEUED`: memory
/// one thread allocates and the other frees would go astray in
/// used_memory, which counts each thread's own allocations.
pub struct Endpoint {
    requests: Receiver<u64>,
    pages: SyncSender<(u64, Arc<str>)>,
    /// The last page, kept so that it is freed here when the next one
    /// replaces it: the HTTP thread copies a page and drops its share, and
    /// a page freed on that thread would stay in used_memory (the
    /// executor's count of its bytes would never hear of it).
    last: std::cell::Cell<Option<Arc<str>>>,
    /// Where the server listens (the port, when 0 was asked).
    pub addr: std::net::SocketAddr,
}

/// Binds `bind:port` and starts the HTTP thread; `wake` is called after
/// each scrape is queued.
pub fn start(bind: &str, port: u16, wake: Box<dyn Fn() + Send>) -> Result<Endpoint, String> {
    let http = tiny_http::Server::http((bind, port)).map_err(|e| e.to_string())?;
    let addr = http.server_addr().to_ip().ok_or("not an IP listener")?;
    let (tx, requests) = mpsc::sync_channel::<u64>(QUEUED);
    let (pages, rx) = mpsc::sync_channel::<(u64, Arc<str>)>(QUEUED);
    std::thread::Builder::new().name("metrics".into()).spawn(move || serve(http, tx, rx, wake)).map_err(|e| e.to_string())?;
    Ok(Endpoint { requests, pages, last: std::cell::Cell::new(None), addr })
}

/// The HTTP thread: routes requests; a /metrics page comes from the executor.
fn serve(http: tiny_http::Server, tx: SyncSender<u64>, pages: Receiver<(u64, Arc<str>)>, wake: Box<dyn Fn() + Send>) {
    let text = tiny_http::Header::from_bytes("Content-Type", "text/plain; version=0.0.4; charset=utf-8").expect("static header");
    let mut scrape = 0u64;
    for req in http.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("").to_string();
        let get = matches!(req.method(), tiny_http::Method::Get | tiny_http::Method::Head);
        let resp = match (get, path.as_str()) {
            (true, "/health") => tiny_http::Response::from_string("OK").with_status_code(200),
            (true, "/metrics") => {
                scrape += 1;
                match tx.try_send(scrape) {
                    Ok(()) => wake(),
                    Err(mpsc::TrySendError::Disconnected(_)) => return,
                    Err(mpsc::TrySendError::Full(_)) => {}
                }
                match page_for(&pages, scrape) {
                    Some(page) => tiny_http::Response::from_string(page).with_header(text.clone()),
                    None => tiny_http::Response::from_string("busy\n").with_status_code(503),
                }
            }
            (false, "/health" | "/metrics") => tiny_http::Response::from_string("method not allowed\n").with_status_code(405),
            _ => tiny_http::Response::from_string("not found\n").with_status_code(404),
        };
        let _ = req.respond(resp);
    }
}

/// A copy of the page answering scrape `n`, if it comes within
/// `SCRAPE_WAIT`; pages of earlier scrapes that gave up are skipped.
fn page_for(pages: &Receiver<(u64, Arc<str>)>, n: u64) -> Option<String> {
    let deadline = Instant::now() + SCRAPE_WAIT;
    loop {
        let (m, page) = pages.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()?;
        if m == n {
            return Some(page.to_string());
        }
    }
}

/// Answers the scrapes waiting (called by the event loop when woken).
pub fn answer(ep: &Endpoint, srv: &mut Server, host: &mut dyn Host) {
    let mut page: Option<Arc<str>> = None;
    while let Ok(n) = ep.requests.try_recv() {
        let p = page.get_or_insert_with(|| Arc::from(render(srv, host)));
        let _ = ep.pages.try_send((n, p.clone()));
    }
    if page.is_some() {
        ep.last.set(page);
    }
}

/// The INFO fields that only grow.
fn is_counter(field: &str) -> bool {
    // total_* fields that are current counts, not running totals.
    if matches!(field, "total_watched_keys" | "total_blocking_keys" | "total_blocking_keys_on_nokey" | "total_system_memory") {
        return false;
    }
    field.starts_with("total_")
        || field.starts_with("acl_access_denied_")
        || field.starts_with("sync_")
        || field.starts_with("used_cpu_")
        || matches!(
            field,
            "expired_keys"
                | "expired_subkeys"
                | "evicted_keys"
                | "evicted_clients"
                | "evicted_scripts"
                | "keyspace_hits"
                | "keyspace_misses"
                | "rejected_connections"
                | "expired_time_cap_reached_count"
                | "expire_cycle_cpu_milliseconds"
                | "lazyfreed_objects"
                | "unexpected_error_replies"
                | "dump_payload_sanitizations"
                | "client_query_buffer_limit_disconnections"
                | "client_output_buffer_limit_disconnections"
                | "stat_reply_buffer_shrinks"
                | "stat_reply_buffer_expands"
                | "io_reads_processed"
                | "io_writes_processed"
                | "expired_stale_perc_total"
        )
}

/// A metric name from an INFO field: letters, digits and `_` only.
fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '_' }).collect()
}

/// A label value, escaped as the format wants.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Families in order of first appearance, each with its samples.
#[derive(Default)]
struct Page {
    order: Vec<String>,
    families: HashMap<String, (&'static str, String, Vec<String>)>,
}

impl Page {
    fn sample(&mut self, family: &str, kind: &'static str, help: &str, line: String) {
        if !self.families.contains_key(family) {
            self.order.push(family.to_string());
            self.families.insert(family.to_string(), (kind, help.to_string(), Vec::new()));
        }
        self.families.get_mut(family).expect("inserted").2.push(line);
    }

    fn text(&self) -> String {
        let mut s = String::new();
        for f in &self.order {
            let (kind, help, lines) = &self.families[f];
            let _ = writeln!(s, "# HELP {f} {help}");
            let _ = writeln!(s, "# TYPE {f} {kind}");
            for l in lines {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }
}

/// `a=1,b=2` pairs.
fn fields(v: &str) -> impl Iterator<Item = (&str, &str)> {
    v.split(',').filter_map(|kv| kv.split_once('='))
}

/// The whole page: INFO everything, then the latency histograms.
pub fn render(srv: &mut Server, host: &mut dyn Host) -> String {
    let want = wanted_sections(&[b"info".to_vec(), b"everything".to_vec()]);
    let mut client = Client::new(0, None, String::new(), String::new());
    let now = srv.unix_ms_at(Instant::now());
    let info = {
        let mut ctx = Ctx { host, srv: &mut *srv, client: &mut client, now };
        info_text(&mut ctx, &want)
    };
    let mut page = Page::default();
    let mut section = String::new();
    for line in info.lines() {
        if let Some(t) = line.strip_prefix("# ") {
            section = t.to_ascii_lowercase();
            continue;
        }
        let Some((k, v)) = line.split_once(':') else { continue };
        if let Some(cmd) = k.strip_prefix("cmdstat_") {
            for (name, val) in fields(v) {
                let (family, help) = match name {
                    "calls" => ("densekv_command_calls_total", "Calls of the command that ran."),
                    "usec" => ("densekv_command_usec_total", "Microseconds spent in the command."),
                    "rejected_calls" => ("densekv_command_rejected_calls_total", "Calls refused before running."),
                    "failed_calls" => ("densekv_command_failed_calls_total", "Calls that ran and replied with an error."),
                    _ => continue,
                };
                page.sample(family, "counter", help, format!("{family}{{cmd=\"{}\"}} {val}", label(cmd)));
            }
        } else if let Some(e) = k.strip_prefix("errorstat_") {
            if let Some((_, n)) = fields(v).find(|(n, _)| *n == "count") {
                page.sample("densekv_errors_total", "counter", "Error replies by their first word.", format!("densekv_errors_total{{error=\"{}\"}} {n}", label(e)));
            }
        } else if section == "keyspace" {
            let db = k.trim_start_matches("db");
            for (name, val) in fields(v) {
                let (family, help) = match name {
                    "keys" => ("densekv_db_keys", "Keys in the database."),
                    "expires" => ("densekv_db_expires", "Keys with a TTL in the database."),
                    "avg_ttl" => ("densekv_db_avg_ttl_ms", "Average TTL of the keys with one, ms (estimate)."),
                    _ => continue,
                };
                page.sample(family, "gauge", help, format!("{family}{{db=\"{db}\"}} {val}"));
            }
        } else if let Ok(x) = v.trim().parse::<f64>() {
            // Hex identifiers that happen to be all digits are not numbers.
            if !x.is_finite() || k.ends_with("sha1") || k.ends_with("build_id") || k == "run_id" {
                continue;
            }
            let f = clean(k);
            let help = format!("INFO {section} field {k}.");
            if is_counter(k) {
                let base = format!("densekv_{}", f.strip_prefix("total_").unwrap_or(&f));
                let name = format!("{}_total", base.strip_suffix("_total").unwrap_or(&base));
                page.sample(&name, "counter", &help, format!("{name} {}", v.trim()));
            } else {
                let name = format!("densekv_{f}");
                page.sample(&name, "gauge", &help, format!("{name} {}", v.trim()));
            }
        }
    }
    // Per-command latency: LATENCY HISTOGRAM's buckets, [2^i, 2^(i+1)) µs.
    let fam = "densekv_command_latency_seconds";
    let help = "Command latency (LATENCY HISTOGRAM's power-of-two microsecond buckets).";
    for (n, st) in srv.cmdstats.sorted() {
        let count: u64 = st.histogram.iter().sum();
        if count == 0 {
            continue;
        }
        let cmd = label(n);
        let mut cum = 0;
        for (i, c) in st.histogram.iter().enumerate() {
            cum += c;
            let le = (1u64 << (i + 1)) as f64 / 1e6;
            page.sample(fam, "histogram", help, format!("{fam}_bucket{{cmd=\"{cmd}\",le=\"{le}\"}} {cum}"));
        }
        page.sample(fam, "histogram", help, format!("{fam}_bucket{{cmd=\"{cmd}\",le=\"+Inf\"}} {count}"));
        page.sample(fam, "histogram", help, format!("{fam}_sum{{cmd=\"{cmd}\"}} {}", st.usec as f64 / 1e6));
        page.sample(fam, "histogram", help, format!("{fam}_count{{cmd=\"{cmd}\"}} {count}"));
    }
    page.text()
}

/// Wakes the event loop from another thread.
pub fn waker(w: Arc<mio::Waker>) -> Box<dyn Fn() + Send> {
    Box::new(move || {
        let _ = w.wake();
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_names() {
        assert!(is_counter("total_commands_processed"));
        assert!(is_counter("expired_keys"));
        assert!(!is_counter("used_memory"));
        assert!(!is_counter("total_system_memory"));
        assert_eq!(clean("used_memory.x"), "used_memory_x");
        assert_eq!(label("a\"b\\"), "a\\\"b\\\\");
        let mut p = Page::default();
        p.sample("x", "gauge", "h", "x 1".into());
        p.sample("y", "counter", "h", "y_total 1".into());
        p.sample("x", "gauge", "h", "x{a=\"b\"} 2".into());
        assert_eq!(p.text(), "# HELP x h\n# TYPE x gauge\nx 1\nx{a=\"b\"} 2\n# HELP y h\n# TYPE y counter\ny_total 1\n");
    }
}
