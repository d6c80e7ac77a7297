//! Incremental request parser: RESP multibulk (`*N\r\n$len\r\n...`) and inline
//! commands (`SET k v\r\n`), the two request forms a Redis server accepts.
//!
//! The parser is resumable: when a request is incomplete it keeps what it has
//! learnt (argument count, the arguments already read, the pending bulk length)
//! and its position in the buffer, so a 1,000,000-argument request or a 512 MB
//! bulk arriving in many reads is scanned once, never re-parsed from its start.
//! It never allocates more than the bytes that have actually arrived, so a
//! client that merely *declares* a huge bulk costs nothing until it sends it.
//!
//! Errors carry Redis's exact protocol error text; the caller replies
//! `-ERR Protocol error: ...` and closes the connection.

use std::fmt;

/// Largest inline request or `*`/`$` header line accepted without its `\r\n`.
pub const INLINE_MAX: usize = 64 * 1024;
/// Largest argument count of one multibulk request.
pub const MULTIBULK_MAX: i64 = i32::MAX as i64;

/// A malformed request. The message is what follows `-ERR ` on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn perr(msg: &str) -> ProtocolError {
    ProtocolError(format!("Protocol error: {msg}"))
}

/// Limits applied while parsing.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// proto-max-bulk-len: the largest bulk argument accepted.
    pub max_bulk_len: i64,
    /// The client has yet to authenticate: requests stay small (at most
    /// `UNAUTH_MULTIBULK_MAX` arguments of `UNAUTH_BULK_MAX` bytes), so an
    /// unauthenticated peer cannot make the server buffer much.
    pub unauthenticated: bool,
}

/// Most arguments an unauthenticated request may have.
pub const UNAUTH_MULTIBULK_MAX: i64 = 10;
/// Largest argument an unauthenticated request may have.
pub const UNAUTH_BULK_MAX: i64 = 16384;

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk_len: 512 * 1024 * 1024, unauthenticated: false }
    }
}

/// Parser state that survives between reads of one connection.
#[derive(Debug, Default)]
pub struct Parser {
    /// Arguments still expected in the current multibulk, 0 when between requests.
    multibulk_left: i64,
    /// Length of the bulk being read, -1 when its `$` header is not read yet.
    bulk_len: i64,
    /// Arguments of the request being assembled.
    args: Vec<Vec<u8>>,
    /// Bytes of `args` so far (Redis's `argv_len_sum` of a half-read
    /// request), kept as they come so that asking costs nothing.
    args_len: usize,
    /// True while inside a multibulk request.
    in_multibulk: bool,
}

/// Outcome of one `Parser::parse` call.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A complete request; `args` may be empty (an empty inline line or `*0`),
    /// which the caller skips.
    Command(Vec<Vec<u8>>),
    /// More bytes are needed. `want` is a hint of how many bytes the pending
    /// bulk still needs, so the caller can reserve the buffer once.
    Incomplete { want: usize },
}

impl Parser {
    /// A parser between requests.
    pub fn new() -> Self {
        Parser { multibulk_left: 0, bulk_len: -1, args: Vec::new(), args_len: 0, in_multibulk: false }
    }

    /// Bytes of the arguments of a half-read request taken so far (what
    /// CLIENT LIST shows as `argv-mem` while a request is being read).
    pub fn pending_len(&self) -> usize {
        self.args_len
    }

    /// Memory those arguments hold: their bytes, one vector header each
    /// and the room reserved for the rest.
    pub fn pending_mem(&self) -> usize {
        self.args_len + self.args.capacity() * std::mem::size_of::<Vec<u8>>()
    }

    /// True when no request is half-read.
    pub fn is_idle(&self) -> bool {
        !self.in_multibulk
    }

    /// Parses one request from `buf[*pos..]`, advancing `*pos` past what it consumed.
    ///
    /// Errors: the protocol error to report; the connection must then be closed.
    pub fn parse(&mut self, buf: &[u8], pos: &mut usize, limits: &Limits) -> Result<Parsed, ProtocolError> {
        if !self.in_multibulk {
            if let Some(args) = parse_whole(buf, pos, limits) {
                return Ok(Parsed::Command(args));
            }
        }
        self.parse_general(buf, pos, limits)
    }

    /// `parse` without `parse_whole`: every form, resumable.
    fn parse_general(&mut self, buf: &[u8], pos: &mut usize, limits: &Limits) -> Result<Parsed, ProtocolError> {
        if !self.in_multibulk {
            if *pos >= buf.len() {
                return Ok(Parsed::Incomplete { want: 0 });
            }
            if buf[*pos] == b'*' {
                self.in_multibulk = true;
                self.multibulk_left = -1;
                self.bulk_len = -1;
            } else {
                return parse_inline(buf, pos);
            }
        }
        self.parse_multibulk(buf, pos, limits)
    }

    fn parse_multibulk(&mut self, buf: &[u8], pos: &mut usize, limits: &Limits) -> Result<Parsed, ProtocolError> {
        if self.multibulk_left == -1 {
            let Some((line, next)) = read_line(buf, *pos + 1) else {
                if buf.len() - *pos > INLINE_MAX {
                    return Err(perr("too big mbulk count string"));
                }
                return Ok(Parsed::Incomplete { want: 0 });
            };
            let n = parse_len(line).filter(|&n| n <= MULTIBULK_MAX).ok_or_else(|| perr("invalid multibulk length"))?;
            if limits.unauthenticated && n > UNAUTH_MULTIBULK_MAX {
                return Err(perr("unauthenticated multibulk length"));
            }
            *pos = next;
            if n <= 0 {
                self.reset();
                return Ok(Parsed::Command(Vec::new()));
            }
            self.multibulk_left = n;
            // Reserve modestly: the count is untrusted until the arguments arrive.
            self.args = Vec::with_capacity((n as usize).min(1024));
            self.args_len = 0;
        }
        while self.multibulk_left > 0 {
            if self.bulk_len == -1 {
                if *pos >= buf.len() {
                    return Ok(Parsed::Incomplete { want: 0 });
                }
                if buf[*pos] != b'$' {
                    let got = buf[*pos] as char;
                    return Err(perr(&format!("expected '$', got '{got}'")));
                }
                let Some((line, next)) = read_line(buf, *pos + 1) else {
                    if buf.len() - *pos > INLINE_MAX {
                        return Err(perr("too big bulk count string"));
                    }
                    return Ok(Parsed::Incomplete { want: 0 });
                };
                let n = parse_len(line)
                    .filter(|&n| n >= 0 && n <= limits.max_bulk_len)
                    .ok_or_else(|| perr("invalid bulk length"))?;
                if limits.unauthenticated && n > UNAUTH_BULK_MAX {
                    return Err(perr("unauthenticated bulk length"));
                }
                *pos = next;
                self.bulk_len = n;
            }
            let need = self.bulk_len as usize + 2;
            let have = buf.len() - *pos;
            if have < need {
                return Ok(Parsed::Incomplete { want: need - have });
            }
            let start = *pos;
            let end = start + self.bulk_len as usize;
            if &buf[end..end + 2] != b"\r\n" {
                // Redis does not check the terminator byte values; neither do we,
                // but we still skip exactly two bytes.
            }
            self.args.push(buf[start..end].to_vec());
            self.args_len += end - start;
            *pos = end + 2;
            self.bulk_len = -1;
            self.multibulk_left -= 1;
        }
        let args = std::mem::take(&mut self.args);
        self.args_len = 0;
        self.reset();
        Ok(Parsed::Command(args))
    }

    fn reset(&mut self) {
        self.in_multibulk = false;
        self.multibulk_left = 0;
        self.bulk_len = -1;
    }
}

/// Most arguments a request may have for `parse_whole` to take it.
const WHOLE_MAX_ARGS: u64 = 1024;

/// The common case in one pass: a whole multibulk request of at most
/// `WHOLE_MAX_ARGS` arguments, already in `buf` at `*pos`, its lengths
/// plain decimals (no sign, no leading zero) each ended by `\r\n` and
/// within `limits`. None for anything else, leaving `*pos` alone: the
/// general parser then reads the request from its start and gives the
/// same arguments, or the error, or keeps the partial state. (What was
/// copied of a request that turns out incomplete is copied again: one
/// request a read at most, the one cut at the read's end.) The arguments
/// go into a vector the server gave back (`spare`) where there is one.
#[inline]
fn parse_whole(buf: &[u8], pos: &mut usize, limits: &Limits) -> Option<Vec<Vec<u8>>> {
    let mut p = *pos;
    if buf.get(p) != Some(&b'*') {
        return None;
    }
    let n = plain_len(buf, &mut p)?;
    if n == 0 || n > WHOLE_MAX_ARGS || (limits.unauthenticated && n > UNAUTH_MULTIBULK_MAX as u64) {
        return None;
    }
    let max = if limits.unauthenticated { limits.max_bulk_len.min(UNAUTH_BULK_MAX) } else { limits.max_bulk_len };
    // Given back to the spares if the request turns out not whole.
    let mut args = crate::spare::Filler::new(n as usize);
    for _ in 0..n {
        if buf.get(p) != Some(&b'$') {
            return None;
        }
        let len = plain_len(buf, &mut p)?;
        // (`plain_len` allows 18 digits: `len + 2` cannot overflow.)
        if len > max as u64 || buf.len() - p < len as usize + 2 {
            return None;
        }
        args.push(&buf[p..p + len as usize]);
        // As the general parser: the two bytes after a bulk are skipped
        // unread.
        p += len as usize + 2;
    }
    *pos = p;
    Some(args.finish())
}

/// Reads the length after a `*` or `$` at `*p`: "0", or a digit 1-9 and at
/// most 17 more digits, then `\r\n`; moves `*p` past it. None for any
/// other form (the general parser decides what it is).
#[inline]
fn plain_len(buf: &[u8], p: &mut usize) -> Option<u64> {
    let mut i = *p + 1;
    let first = *buf.get(i)?;
    if !first.is_ascii_digit() {
        return None;
    }
    let mut v = u64::from(first - b'0');
    i += 1;
    loop {
        let b = *buf.get(i)?;
        if !b.is_ascii_digit() {
            break;
        }
        if v == 0 || i - *p > 18 {
            return None;
        }
        v = v * 10 + u64::from(b - b'0');
        i += 1;
    }
    if buf.get(i..i + 2)? != b"\r\n" {
        return None;
    }
    *p = i + 2;
    Some(v)
}

/// Parses `chunks` as successive reads of one connection, dropping the
/// consumed bytes after each as the server does. Returns the commands and
/// the protocol error that stopped parsing, if any. The fuzz target and the
/// tests use it to check that any split of a stream parses the same.
pub fn parse_chunks(chunks: &[&[u8]], limits: &Limits) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
    let mut p = Parser::new();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        let mut pos = 0;
        loop {
            match p.parse(&buf, &mut pos, limits) {
                Ok(Parsed::Command(a)) => out.push(a),
                Ok(Parsed::Incomplete { .. }) => break,
                Err(e) => return (out, Some(e.0)),
            }
            assert!(pos <= buf.len(), "parser ran past its input");
        }
        buf.drain(..pos);
    }
    (out, None)
}

/// Finds the `\n`-terminated line starting at `from`; returns it without `\r\n`
/// and the index after the `\n`.
fn read_line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rel = buf.get(from..)?.iter().position(|&b| b == b'\n')?;
    let mut line = &buf[from..from + rel];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    Some((line, from + rel + 1))
}

/// Parses a decimal length as Redis's `string2ll` would accept it.
fn parse_len(s: &[u8]) -> Option<i64> {
    crate::num::parse_i64(s)
}

fn parse_inline(buf: &[u8], pos: &mut usize) -> Result<Parsed, ProtocolError> {
    let Some(rel) = buf[*pos..].iter().position(|&b| b == b'\n') else {
        if buf.len() - *pos > INLINE_MAX {
            return Err(perr("too big inline request"));
        }
        return Ok(Parsed::Incomplete { want: 0 });
    };
    let mut line = &buf[*pos..*pos + rel];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    let args = split_args(line).ok_or_else(|| perr("unbalanced quotes in request"))?;
    *pos += rel + 1;
    Ok(Parsed::Command(args))
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Splits an inline request into arguments the way redis-cli and Redis do:
/// whitespace separates, "double quotes" take C escapes (`\n`, `\xHH`),
/// 'single quotes' take only `\'`. A closing quote must be followed by
/// whitespace or the end of the line.
///
/// Returns None on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex_val(line[i + 2]), hex_val(line[i + 3])) {
                        cur.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    let e = match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    };
                    cur.push(e);
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    cur.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
                i += 1;
            }
        }
        args.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut p = Parser::new();
        let mut pos = 0;
        let mut out = Vec::new();
        loop {
            match p.parse(input, &mut pos, &Limits::default())? {
                Parsed::Command(a) => out.push(a),
                Parsed::Incomplete { .. } => return Ok(out),
            }
        }
    }

    fn v(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_inline() {
        let got = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset a \"b c\"\r\n").unwrap();
        assert_eq!(got, vec![v(&["GET", "k"]), v(&["PING"]), v(&["set", "a", "b c"])]);
    }

    #[test]
    fn a_half_read_request_reports_the_arguments_it_holds() {
        let mut p = Parser::new();
        let mut pos = 0;
        let head = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$5\r\nwo";
        assert!(matches!(p.parse(head, &mut pos, &Limits::default()), Ok(Parsed::Incomplete { .. })));
        assert_eq!(p.pending_len(), 8);
        assert!(p.pending_mem() >= 8 + 3 * std::mem::size_of::<Vec<u8>>());
        let mut whole = head.to_vec();
        whole.extend_from_slice(b"rld\r\n");
        assert_eq!(p.parse(&whole, &mut pos, &Limits::default()), Ok(Parsed::Command(v(&["SET", "hello", "world"]))));
        assert_eq!((p.pending_len(), p.pending_mem()), (0, 0));
    }

    #[test]
    fn errors_match_redis() {
        assert_eq!(parse_all(b"*abc\r\n").unwrap_err().0, "Protocol error: invalid multibulk length");
        assert_eq!(parse_all(b"*1\r\nx").unwrap_err().0, "Protocol error: expected '$', got 'x'");
        assert_eq!(parse_all(b"*1\r\n$-5\r\n").unwrap_err().0, "Protocol error: invalid bulk length");
        assert_eq!(parse_all(b"*3000000000\r\n").unwrap_err().0, "Protocol error: invalid multibulk length");
        assert_eq!(parse_all(b"set \"a\r\n").unwrap_err().0, "Protocol error: unbalanced quotes in request");
        let big = vec![b'a'; INLINE_MAX + 10];
        assert_eq!(parse_all(&big).unwrap_err().0, "Protocol error: too big inline request");
    }

    #[test]
    fn declared_huge_bulk_allocates_nothing() {
        let mut p = Parser::new();
        let mut pos = 0;
        let r = p.parse(b"*1\r\n$2000000000\r\n", &mut pos, &Limits { max_bulk_len: 4_000_000_000, unauthenticated: false }).unwrap();
        assert_eq!(r, Parsed::Incomplete { want: 2_000_000_002 });
        assert!(p.args.capacity() <= 1);
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(split_args(b"a \"\\x41\\n\" 'it\\'s'").unwrap(), vec![b"a".to_vec(), b"A\n".to_vec(), b"it's".to_vec()]);
        assert!(split_args(b"\"a\"b").is_none());
        assert_eq!(split_args(b"   ").unwrap(), Vec::<Vec<u8>>::new());
    }

    fn encode(cmds: &[Vec<Vec<u8>>]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in cmds {
            out.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
            for a in c {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        out
    }

    proptest! {
        /// Any split of a valid stream into reads yields the same commands.
        #[test]
        fn resumable_across_any_split(cmds in prop::collection::vec(prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 1..5), 1..10), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
            let bytes = encode(&cmds);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.push(bytes.len());
            cuts.sort();
            let mut p = Parser::new();
            let mut got = Vec::new();
            let mut pos = 0;
            for end in cuts {
                while let Parsed::Command(a) = p.parse(&bytes[..end], &mut pos, &Limits::default()).unwrap() {
                    got.push(a);
                }
            }
            prop_assert_eq!(got, cmds);
        }

        /// Arbitrary bytes never panic and never make the parser claim more than it has.
        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let mut p = Parser::new();
            let mut pos = 0;
            while let Ok(Parsed::Command(_)) = p.parse(&bytes, &mut pos, &Limits::default()) {
                prop_assert!(pos <= bytes.len());
            }
            prop_assert!(pos <= bytes.len());
        }
    }
}

#[cfg(test)]
mod drain_tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn run(chunks: &[&[u8]]) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
        parse_chunks(chunks, &Limits { max_bulk_len: 1 << 20, unauthenticated: false })
    }


    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Arbitrary bytes (biased towards RESP framing) give the same result
        /// whole or split at any point, with consumed bytes dropped between.
        #[test]
        fn arbitrary_bytes_split_consistently(
            parts in proptest::collection::vec(proptest::prop_oneof![
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
                proptest::prelude::Just(b"*2\r\n".to_vec()),
                proptest::prelude::Just(b"$3\r\n".to_vec()),
                proptest::prelude::Just(b"abc\r\n".to_vec()),
                proptest::prelude::Just(b"\"a b\" 'c'\n".to_vec()),
            ], 0..20),
            cut in proptest::prelude::any::<usize>(),
        ) {
            let body: Vec<u8> = parts.concat();
            let cut = cut % (body.len() + 1);
            let whole = run(&[&body]);
            let split = run(&[&body[..cut], &body[cut..]]);
            proptest::prop_assert_eq!(whole, split);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        /// A stream parsed as the server parses it (`parse_whole` takes
        /// what it can) gives what the general parser alone gives: the same
        /// arguments, or the same error, under any limits. The framing
        /// pieces are the forms `parse_whole` must leave to the general
        /// parser: signs, leading zeros, a bare `\n`, 19 digits, lengths
        /// over the limits, more than 1,024 or 10 arguments. And the same
        /// again with each request's vector given back for reuse.
        #[test]
        fn parse_whole_agrees_with_the_general_parser(
            parts in proptest::collection::vec(proptest::prop_oneof![
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..6),
                // Over the unauthenticated limit by one byte.
                proptest::prelude::Just([&b"$16385\r\n"[..], &[b'a'; 16385], b"\r\n"].concat()),
                proptest::sample::select(vec![
                    &b"*1\r\n"[..], b"*2\r\n", b"*3\r\n", b"*11\r\n", b"*17\r\n", b"*1025\r\n", b"*0\r\n", b"*-1\r\n", b"*02\r\n", b"*2\n",
                    b"$0\r\n", b"$1\r\n", b"$3\r\n", b"$03\r\n", b"$+3\r\n", b"$-0\r\n", b"$3\n", b"$1000000000000000000\r\n",
                    b"$17000\r\n", b"abc\r\n", b"x\r\n", b"\r\n", b"PING\r\n",
                ]).prop_map(|b: &[u8]| b.to_vec()),
            ], 0..24),
            max_bulk_len in proptest::prop_oneof![proptest::prelude::Just(1i64 << 20), 0i64..5],
            unauthenticated in proptest::prelude::any::<bool>(),
        ) {
            let body: Vec<u8> = parts.concat();
            let limits = Limits { max_bulk_len, unauthenticated };
            let whole = parse_chunks(&[&body], &limits);
            let mut general = (Vec::new(), None);
            let (mut p, mut pos) = (Parser::new(), 0);
            loop {
                match p.parse_general(&body, &mut pos, &limits) {
                    Ok(Parsed::Command(a)) => general.0.push(a),
                    Ok(Parsed::Incomplete { .. }) => break,
                    Err(e) => {
                        general.1 = Some(e.0);
                        break;
                    }
                }
            }
            proptest::prop_assert_eq!(&whole, &general);
            // As the server runs: each request's vector handed back once it
            // ran, so the next one is parsed into reused buffers.
            let mut recycled = (Vec::new(), None);
            let (mut p, mut pos) = (Parser::new(), 0);
            loop {
                match p.parse(&body, &mut pos, &limits) {
                    Ok(Parsed::Command(a)) => {
                        recycled.0.push(a.clone());
                        crate::spare::recycle(a);
                    }
                    Ok(Parsed::Incomplete { .. }) => break,
                    Err(e) => {
                        recycled.1 = Some(e.0);
                        break;
                    }
                }
            }
            proptest::prop_assert_eq!(recycled, general);
        }
    }

    #[test]
    fn common_requests_are_taken_whole() {
        let limits = Limits::default();
        let mut pos = 0;
        let buf = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000012345\r\n$0\r\n\r\n*1";
        let got = parse_whole(buf, &mut pos, &limits).expect("taken");
        assert_eq!(got, vec![b"SET".to_vec(), b"key:000000012345".to_vec(), Vec::new()]);
        assert_eq!(&buf[pos..], b"*1");
        // Incomplete, or outside the plain forms: left to the general parser.
        for buf in [&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r"[..], b"*1\r\n$04\r\nPING\r\n", b"*1\n$4\r\nPING\r\n", b"PING\r\n"] {
            let mut pos = 0;
            assert!(parse_whole(buf, &mut pos, &limits).is_none());
            assert_eq!(pos, 0);
        }
    }

    /// Feeding a stream in chunks and dropping consumed bytes after each
    /// batch (as the server does) yields the same commands.
    #[test]
    fn chunked_with_drain() {
        let n = 200_000;
        let mut bytes = format!("*{}\r\n$3\r\nDEL\r\n", n + 1).into_bytes();
        for i in 0..n {
            let k = format!("k{i}");
            bytes.extend_from_slice(format!("${}\r\n{k}\r\n", k.len()).as_bytes());
        }
        for chunk in [1, 7, 4096, 16384, 65536 + 3] {
            let mut p = Parser::new();
            let mut buf: Vec<u8> = Vec::new();
            let mut pos = 0;
            let mut got = None;
            for piece in bytes.chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Parsed::Command(a) = p.parse(&buf, &mut pos, &Limits::default()).unwrap() {
                    got = Some(a);
                }
                buf.drain(..pos);
                pos = 0;
            }
            let got = got.expect("command parsed");
            assert_eq!(got.len(), n + 1, "chunk {chunk}");
            assert_eq!(got[n], format!("k{}", n - 1).into_bytes());
        }
    }
}
