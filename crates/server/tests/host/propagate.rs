//! The propagation point: what dispatch sends down the write stream for a
//! client's commands, with a test host in the event loop's place.

use std::cell::RefCell;
use std::rc::Rc;

use server::config::Config;
use server::dispatch;
use server::feed::Sink;
use server::server::Server;

use super::{client, TestHost};

struct Log(Rc<RefCell<Vec<String>>>);

impl Sink for Log {
    fn feed(&mut self, argv: &[Vec<u8>]) {
        let words: Vec<String> = argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        self.0.borrow_mut().push(words.join(" "));
    }
}

#[test]
fn writes_leave_once_in_order_with_select_and_multi() {
    let mut host = TestHost::default();
    let mut srv = Server::new(Config::default());
    let log = Rc::new(RefCell::new(Vec::new()));
    srv.feed.attach(Box::new(Log(log.clone())));
    let mut c = client();
    let mut run = |line: &[&str]| {
        let argv = line.iter().map(|w| w.as_bytes().to_vec()).collect();
        assert!(dispatch::call(&mut srv, &mut host, &mut c, argv));
    };
    run(&["SET", "a", "1"]);
    run(&["GET", "a"]);
    run(&["DEL", "missing"]);
    run(&["MULTI"]);
    run(&["INCR", "x"]);
    run(&["INCR", "x"]);
    run(&["EXEC"]);
    run(&["MULTI"]);
    run(&["INCR", "y"]);
    run(&["EXEC"]);
    run(&["EVAL", "redis.call('set', 's', '1') redis.call('incr', 'n')", "0"]);
    run(&["EVAL", "return redis.call('get', 's')", "0"]);
    run(&["SELECT", "2"]);
    run(&["SET", "b", "1"]);
    assert_eq!(
        *log.borrow(),
        [
            "SELECT 0", "SET a 1", "MULTI", "INCR x", "INCR x", "EXEC", "INCR y", "MULTI", "set s 1", "incr n", "EXEC", "SELECT 2",
            "SET b 1",
        ]
    );
}
