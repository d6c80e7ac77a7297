//! Reading an AOF's command part: RESP arrays of bulk strings, one per
//! command, with `#...` annotation lines (`#TS:<unix>`) between them.
//!
//! Read as Redis's loader reads it: a line is at most `LINE_MAX` bytes, a
//! command starts with `*<argc>` (argc at least 1), each argument is
//! `$<len>`, the bytes, and two bytes that end it. Running out of bytes in
//! the middle of a command is `Truncated` (the tail may be cut off, see
//! aof-load-truncated); anything else unexpected is `Format`. Nothing is
//! allocated from a length before the bytes it announces are there, so a
//! hostile file cannot make the reader reserve memory it does not hold.

/// Longest line (annotation, `*n`, `$n`) read at once, as Redis's loader.
pub const LINE_MAX: usize = 1024;

/// What was found at an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item<'a> {
    /// A command's arguments.
    Command(Vec<Vec<u8>>),
    /// An annotation line's text after `#`, without the line end.
    Annotation(&'a [u8]),
}

/// Why reading stopped before the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The bytes ran out in the middle of a command.
    Truncated,
    /// Bytes that are not a command.
    Format,
}

/// A cursor over an AOF's bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from `start`.
    pub fn new(buf: &'a [u8], start: usize) -> Self {
        Reader { buf, pos: start.min(buf.len()) }
    }

    /// The offset of the next item.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// One line as fgets reads it: up to and including `\n`, at most
    /// LINE_MAX-1 bytes. None at the end of the bytes.
    fn line(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let max = rest.len().min(LINE_MAX - 1);
        let n = rest[..max].iter().position(|&b| b == b'\n').map_or(max, |p| p + 1);
        self.pos += n;
        Some(&rest[..n])
    }

    /// The next item; Ok(None) at a clean end.
    ///
    /// Errors: where it stopped is `pos()` no longer meaningful; the
    /// caller keeps the offset of the last complete item.
    pub fn next_item(&mut self) -> Result<Option<Item<'a>>, ReadError> {
        let Some(line) = self.line() else { return Ok(None) };
        if line[0] == b'#' {
            let text = &line[1..];
            let text = text.strip_suffix(b"\n").unwrap_or(text);
            return Ok(Some(Item::Annotation(text.strip_suffix(b"\r").unwrap_or(text))));
        }
        if line[0] != b'*' {
            return Err(ReadError::Format);
        }
        if line.len() == 1 {
            return Err(ReadError::Truncated);
        }
        let argc = atol(&line[1..]);
        if argc < 1 {
            return Err(ReadError::Format);
        }
        let mut argv = Vec::with_capacity((argc as usize).min(1024));
        for _ in 0..argc {
            let Some(line) = self.line() else { return Err(ReadError::Truncated) };
            if line[0] != b'$' {
                return Err(ReadError::Format);
            }
            let len = atol(&line[1..]);
            // strtol into an unsigned long: a negative length is huge.
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if self.buf.len() - self.pos < len {
                return Err(ReadError::Truncated);
            }
            argv.push(self.buf[self.pos..self.pos + len].to_vec());
            self.pos += len;
            if self.buf.len() - self.pos < 2 {
                self.pos = self.buf.len();
                return Err(ReadError::Truncated);
            }
            self.pos += 2;
        }
        Ok(Some(Item::Command(argv)))
    }
}

/// `atoi`/`strtol`: optional blanks and sign, then digits; 0 when none.
pub fn atol(b: &[u8]) -> i64 {
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let neg = i < b.len() && b[i] == b'-';
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let mut v: i64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        v = v.saturating_mul(10).saturating_add(i64::from(b[i] - b'0'));
        i += 1;
    }
    if neg {
        -v
    } else {
        v
    }
}

/// One key of a base of commands (`aof-use-rdb-preamble no`): `RESTORE
/// key ttl payload REPLACE`, with the absolute deadline and `ABSTTL` when
/// the key has one, so replaying later does not stretch its TTL.
pub fn encode_restore(key: &[u8], payload: &[u8], deadline: Option<i64>, out: &mut Vec<u8>) {
    let ttl = deadline.map_or_else(|| b"0".to_vec(), |t| t.to_string().into_bytes());
    let mut argv: Vec<&[u8]> = vec![b"RESTORE", key, &ttl, payload, b"REPLACE"];
    if deadline.is_some() {
        argv.push(b"ABSTTL");
    }
    encode(&argv, out);
}

/// One command in the form the AOF stores it.
pub fn encode<A: AsRef<[u8]>>(argv: &[A], out: &mut Vec<u8>) {
    out.push(b'*');
    out.extend_from_slice(argv.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in argv {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_commands_annotations_and_stops_where_redis_does() {
        let mut buf = b"#TS:1700000000\r\n".to_vec();
        encode(&[b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()], &mut buf);
        let mut r = Reader::new(&buf, 0);
        assert_eq!(r.next_item(), Ok(Some(Item::Annotation(b"TS:1700000000"))));
        assert_eq!(r.next_item(), Ok(Some(Item::Command(vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]))));
        assert_eq!(r.next_item(), Ok(None));
        for cut in 1..buf.len() - 16 {
            let mut r = Reader::new(&buf[..16 + cut], 16);
            assert_eq!(r.next_item(), Err(ReadError::Truncated), "cut at {cut}");
        }
        assert_eq!(Reader::new(b"garbage\r\n", 0).next_item(), Err(ReadError::Format));
        assert_eq!(Reader::new(b"*0\r\n", 0).next_item(), Err(ReadError::Format));
        assert_eq!(Reader::new(b"*1\r\n!3\r\n", 0).next_item(), Err(ReadError::Format));
        assert_eq!(Reader::new(b"*1\r\n$-1\r\n", 0).next_item(), Err(ReadError::Truncated));
    }
}
