//! CONFIG SET io-threads through the `Host`: the new count reaches the
//! host before the change is kept, and a refusal leaves everything as it
//! was (the answer names the parameter and the host's reason).

use server::config::Config;
use server::server::Server;

use super::{client, TestHost};

fn run(srv: &mut Server, host: &mut TestHost, line: &[&str]) -> String {
    super::run(srv, host, &mut client(), line)
}

fn host(accept: bool) -> TestHost {
    TestHost { accept, ..TestHost::default() }
}

#[test]
fn a_new_count_goes_to_the_host_and_an_unchanged_one_does_not() {
    let mut srv = Server::new(Config::default());
    let mut h = host(true);
    assert_eq!(run(&mut srv, &mut h, &["CONFIG", "SET", "io-threads", "4"]), "+OK\r\n");
    assert_eq!(run(&mut srv, &mut h, &["CONFIG", "GET", "io-threads"]), "*2\r\n$10\r\nio-threads\r\n$1\r\n4\r\n");
    assert_eq!(run(&mut srv, &mut h, &["CONFIG", "SET", "io-threads", "4"]), "+OK\r\n");
    assert_eq!(run(&mut srv, &mut h, &["CONFIG", "SET", "io-threads", "1"]), "+OK\r\n");
    assert_eq!(h.asked, [4, 1]);
    assert!(run(&mut srv, &mut h, &["CONFIG", "SET", "io-threads", "129"]).starts_with("-ERR CONFIG SET failed (possibly related to argument 'io-threads')"));
    assert_eq!(h.asked, [4, 1]);
}

#[test]
fn a_refusal_rolls_the_config_back() {
    let mut srv = Server::new(Config::default());
    let mut h = host(false);
    let got = run(&mut srv, &mut h, &["CONFIG", "SET", "maxmemory-samples", "7", "io-threads", "3"]);
    assert_eq!(got, "-ERR CONFIG SET failed (possibly related to argument 'io-threads') - no threads today\r\n");
    assert_eq!(srv.config.get("io-threads"), Some("1"));
    assert_eq!(srv.config.get("maxmemory-samples"), Some("5"));
    assert_eq!(h.asked, [3]);
}

#[test]
fn a_failed_relisten_takes_the_new_threads_back() {
    // The test host cannot listen: the port change fails after the threads
    // changed, and they go back to the old count.
    let mut srv = Server::new(Config::default());
    let mut h = host(true);
    let got = run(&mut srv, &mut h, &["CONFIG", "SET", "io-threads", "3", "port", "7001"]);
    assert!(got.starts_with("-ERR CONFIG SET failed (possibly related to argument 'port')"), "{got}");
    assert_eq!(srv.config.get("io-threads"), Some("1"));
    assert_eq!(h.asked, [3, 1]);
}
