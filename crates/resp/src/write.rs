//! Reply writer: one API for RESP2 and RESP3.
//!
//! Handlers call `map`, `set`, `double`, `null`, `boolean` ...; the writer
//! renders each in the form the client negotiated with HELLO. RESP2 clients
//! see maps and sets as flat arrays, doubles as bulk strings, booleans as
//! integers, and `null` as `$-1` (or `*-1` for `null_array`).

use crate::{dtoa, num};

/// An output buffer that knows the client's protocol version.
#[derive(Debug, Default)]
pub struct Reply {
    /// Rendered reply bytes not yet written to the socket.
    pub buf: Vec<u8>,
    /// True when the client speaks RESP3.
    pub resp3: bool,
}

impl Reply {
    /// An empty RESP2 buffer.
    pub fn new() -> Self {
        Reply::default()
    }

    fn header(&mut self, c: u8, n: i64) {
        self.buf.push(c);
        num::write_i64(&mut self.buf, n);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A status reply, `+s`. `s` must not contain CR or LF.
    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error reply; `msg` is the full text after `-`, e.g. `ERR syntax error`.
    /// Newlines are replaced by spaces, as Redis does.
    pub fn error(&mut self, msg: &str) {
        self.buf.push(b'-');
        for b in msg.bytes() {
            self.buf.push(if b == b'\r' || b == b'\n' { b' ' } else { b });
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer reply.
    pub fn int(&mut self, v: i64) {
        self.header(b':', v);
    }

    /// A bulk string.
    pub fn bulk(&mut self, s: &[u8]) {
        self.header(b'$', s.len() as i64);
        // Room for the string and its CRLF at once: growing for the string
        // alone and then for the CRLF doubled the buffer, a 100 KB value
        // taking a 200 KB buffer.
        self.buf.reserve(s.len() + 2);
        self.buf.extend_from_slice(s);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer rendered as a bulk string.
    pub fn bulk_i64(&mut self, v: i64) {
        let mut tmp = Vec::with_capacity(20);
        num::write_i64(&mut tmp, v);
        self.bulk(&tmp);
    }

    /// Null bulk: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// Null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    /// Array header of `n` elements.
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as i64);
    }

    /// Map header of `n` key/value pairs (`2n` elements in RESP2).
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            self.header(b'%', n as i64);
        } else {
            self.header(b'*', 2 * n as i64);
        }
    }

    /// Header of an array of `n` pairs (ZRANGE WITHSCORES, HRANDFIELD
    /// WITHVALUES): in RESP3 an array of `n` elements, each pair then opened
    /// with [`Reply::pair`]; in RESP2 one flat array of `2n` elements.
    pub fn pairs(&mut self, n: usize) {
        self.array(if self.resp3 { n } else { 2 * n });
    }

    /// Opens one pair of a [`Reply::pairs`] array: a two-element array in
    /// RESP3, nothing in RESP2.
    pub fn pair(&mut self) {
        if self.resp3 {
            self.array(2);
        }
    }

    /// Header of `n` keyed entries (XREAD's streams): a map in RESP3; in
    /// RESP2 an array of `n` two-element arrays, each opened with
    /// [`Reply::keyed_entry`].
    pub fn keyed(&mut self, n: usize) {
        if self.resp3 {
            self.map(n);
        } else {
            self.array(n);
        }
    }

    /// Opens one entry of a [`Reply::keyed`] reply: nothing in RESP3 (a map
    /// key follows), a two-element array in RESP2.
    pub fn keyed_entry(&mut self) {
        if !self.resp3 {
            self.array(2);
        }
    }

    /// Set header of `n` elements (an array in RESP2).
    pub fn set(&mut self, n: usize) {
        self.header(if self.resp3 { b'~' } else { b'*' }, n as i64);
    }

    /// Push header (RESP3 `>`, array in RESP2).
    pub fn push(&mut self, n: usize) {
        self.header(if self.resp3 { b'>' } else { b'*' }, n as i64);
    }

    /// A double: `,v` in RESP3, a bulk string in RESP2, printed as Redis's
    /// replies print it (`dtoa`).
    pub fn double(&mut self, v: f64) {
        let s = dtoa::format_f64_reply(v);
        if self.resp3 {
            self.buf.push(b',');
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }

    /// A double already printed as text (a long double's human form):
    /// `,text` in RESP3, a bulk string in RESP2.
    pub fn double_text(&mut self, s: &[u8]) {
        if self.resp3 {
            self.buf.push(b',');
            self.buf.extend_from_slice(s);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s);
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, b: bool) {
        if self.resp3 {
            self.buf.extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.int(b as i64);
        }
    }

    /// Verbatim string (`=len\r\ntxt:...` in RESP3, bulk in RESP2).
    pub fn verbatim(&mut self, s: &[u8]) {
        if self.resp3 {
            self.header(b'=', s.len() as i64 + 4);
            self.buf.reserve(s.len() + 6);
            self.buf.extend_from_slice(b"txt:");
            self.buf.extend_from_slice(s);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s);
        }
    }

    /// Appends already-encoded RESP bytes.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_string_grows_the_buffer_once_to_its_size() {
        let value = vec![b'x'; 100_000];
        for resp3 in [false, true] {
            let mut r = Reply { resp3, ..Reply::default() };
            r.bulk(&value);
            assert_eq!(r.buf.len(), 100_000 + 11);
            assert_eq!(r.buf.capacity(), r.buf.len(), "resp3 {resp3}");
            let mut r = Reply { resp3, ..Reply::default() };
            r.verbatim(&value);
            assert_eq!(r.buf.capacity(), r.buf.len(), "resp3 {resp3}");
        }
    }

    #[test]
    fn resp2_and_resp3_forms() {
        let mut r = Reply::new();
        r.map(1);
        r.bulk(b"a");
        r.double(1.5);
        r.null();
        r.boolean(true);
        assert_eq!(r.buf, b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n$-1\r\n:1\r\n");
        let mut r = Reply { resp3: true, ..Reply::default() };
        r.map(1);
        r.bulk(b"a");
        r.double(1.5);
        r.null();
        r.boolean(true);
        assert_eq!(r.buf, b"%1\r\n$1\r\na\r\n,1.5\r\n_\r\n#t\r\n");
    }

    #[test]
    fn pairs_nest_in_resp3_and_flatten_in_resp2() {
        let write = |r: &mut Reply| {
            r.pairs(1);
            r.pair();
            r.bulk(b"m");
            r.int(1);
            r.keyed(1);
            r.keyed_entry();
            r.bulk(b"k");
            r.int(2);
        };
        let mut r = Reply::new();
        write(&mut r);
        assert_eq!(r.buf, b"*2\r\n$1\r\nm\r\n:1\r\n*1\r\n*2\r\n$1\r\nk\r\n:2\r\n");
        let mut r = Reply { resp3: true, ..Reply::default() };
        write(&mut r);
        assert_eq!(r.buf, b"*1\r\n*2\r\n$1\r\nm\r\n:1\r\n%1\r\n$1\r\nk\r\n:2\r\n");
    }

    #[test]
    fn errors_are_single_line() {
        let mut r = Reply::new();
        r.error("ERR a\nb");
        assert_eq!(r.buf, b"-ERR a b\r\n");
    }
}
