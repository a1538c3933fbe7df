//! A tiny blocking RESP2 client ([`Conn`]) behind [`Node::command`](crate::Node::command):
//! encode one command, read one reply. Test code only; the drivers speak RESP through
//! `redlock-core`, never through this.

use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::Error;

/// A blocking connection to a node (or a proxy) with one timeout for connect, each write
/// and each reply.
#[derive(Debug)]
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    /// Connects to `addr`; `timeout` bounds the connect and every later read and write.
    pub fn open(addr: SocketAddr, timeout: Duration) -> Result<Self, Error> {
        let context = || format!("connecting to {addr}");
        let stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|e| Error::io(context(), e))?;
        let conn = Self {
            reader: BufReader::new(stream),
        };
        conn.set_timeout(timeout)?;
        // Commands are single small writes; don't let Nagle hold them back.
        conn.stream()
            .set_nodelay(true)
            .map_err(|e| Error::io(context(), e))?;
        Ok(conn)
    }

    /// Sends one command and reads its reply. An `-ERR` reply is `Ok(Reply::Error(..))`;
    /// `Err` means the socket failed, timed out ([`Error::is_timeout`]) or was closed
    /// ([`Error::is_disconnect`]).
    pub fn command(&mut self, args: &[&str]) -> Result<Reply, Error> {
        self.send(args)?;
        self.recv()
    }

    /// Sends one command without waiting for its reply (pair it with [`Conn::recv`]).
    pub fn send(&mut self, args: &[&str]) -> Result<(), Error> {
        write_command(self.reader.get_mut(), args)
            .map_err(|e| Error::io(format!("sending {}", args.first().unwrap_or(&"")), e))
    }

    /// Reads the next reply.
    pub fn recv(&mut self) -> Result<Reply, Error> {
        read_reply(&mut self.reader)
    }

    /// Changes the read and write timeout (a zero duration is raised to 1 ms).
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), Error> {
        // A zero timeout means "block forever" to std; tests always want a bound.
        let timeout = Some(timeout.max(Duration::from_millis(1)));
        let stream = self.stream();
        stream
            .set_read_timeout(timeout)
            .and_then(|()| stream.set_write_timeout(timeout))
            .map_err(|e| Error::io("setting socket timeouts", e))
    }

    /// The underlying socket, e.g. to compare addresses or shut it down.
    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }
}

/// One RESP2 reply. Complete by definition for RESP2 (the kit never sends `HELLO 3`), so
/// tests may match it exhaustively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`, `+PONG`: a status line.
    Simple(String),
    /// `-ERR ...`, `-NOSCRIPT ...`: an error line, prefix included.
    Error(String),
    /// `:42`: a signed integer.
    Int(i64),
    /// `$3\r\nfoo`: a binary-safe string.
    Bulk(Vec<u8>),
    /// `$-1` or `*-1`: no value.
    Nil,
    /// `*2\r\n...`: nested replies.
    Array(Vec<Self>),
}

impl Reply {
    /// The text of a `Simple` or UTF-8 `Bulk` reply, else `None`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Simple(s) => Some(s),
            Self::Bulk(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The value of an `Int` reply, else `None`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// Shorthand for a bulk reply holding `s`, for comparisons in tests.
    pub fn bulk(s: &str) -> Self {
        Self::Bulk(s.as_bytes().to_vec())
    }

    /// Shorthand for a status reply holding `s` (e.g. `Reply::simple("OK")`).
    pub fn simple(s: &str) -> Self {
        Self::Simple(s.to_owned())
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Simple(s) => write!(f, "+{s}"),
            Self::Error(s) => write!(f, "-{s}"),
            Self::Int(i) => write!(f, ":{i}"),
            Self::Bulk(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Self::Nil => f.write_str("(nil)"),
            Self::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// Writes `args` as one RESP2 array of bulk strings.
pub(crate) fn write_command(out: &mut impl Write, args: &[&str]) -> std::io::Result<()> {
    let mut buf = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        buf.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        buf.extend_from_slice(arg.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    out.write_all(&buf)
}

/// Reads exactly one reply; IO errors (timeouts included) pass through as [`Error::Io`].
pub(crate) fn read_reply(input: &mut impl BufRead) -> Result<Reply, Error> {
    read_depth(input, 0)
}

fn read_depth(input: &mut impl BufRead, depth: usize) -> Result<Reply, Error> {
    if depth > MAX_DEPTH {
        return Err(Error::Protocol(format!(
            "arrays nested deeper than {MAX_DEPTH}"
        )));
    }
    let line = read_line(input)?;
    let (kind, rest) = line.split_at_checked(1).unwrap_or(("", ""));
    match kind {
        "+" => Ok(Reply::Simple(rest.to_owned())),
        "-" => Ok(Reply::Error(rest.to_owned())),
        ":" => parse_int(rest).map(Reply::Int),
        "$" => match parse_len(rest)? {
            None => Ok(Reply::Nil),
            Some(len) => {
                let mut body = vec![0; len + 2];
                input
                    .read_exact(&mut body)
                    .map_err(|e| Error::io("reading a bulk reply", e))?;
                if !body.ends_with(b"\r\n") {
                    return Err(Error::Protocol("bulk string not ended by CRLF".to_owned()));
                }
                body.truncate(len);
                Ok(Reply::Bulk(body))
            }
        },
        "*" => match parse_len(rest)? {
            None => Ok(Reply::Nil),
            Some(len) => (0..len)
                .map(|_| read_depth(input, depth + 1))
                .collect::<Result<_, _>>()
                .map(Reply::Array),
        },
        _ => Err(Error::Protocol(format!("unknown reply line {line:?}"))),
    }
}

/// One CRLF-terminated line without its terminator; EOF before it is a disconnect.
fn read_line(input: &mut impl BufRead) -> Result<String, Error> {
    let mut line = Vec::new();
    let n = input
        .take(MAX_LINE as u64)
        .read_until(b'\n', &mut line)
        .map_err(|e| Error::io("reading a reply", e))?;
    if n == 0 {
        let eof = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        return Err(Error::io(
            "reading a reply: node closed the connection",
            eof,
        ));
    }
    if !line.ends_with(b"\r\n") {
        return Err(Error::Protocol("reply line not ended by CRLF".to_owned()));
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| Error::Protocol("reply line is not UTF-8".to_owned()))
}

fn parse_int(s: &str) -> Result<i64, Error> {
    s.parse()
        .map_err(|_| Error::Protocol(format!("bad integer {s:?}")))
}

/// A bulk or array length: `None` for -1 (nil), capped at [`MAX_LEN`].
fn parse_len(s: &str) -> Result<Option<usize>, Error> {
    match parse_int(s)? {
        -1 => Ok(None),
        n => usize::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_LEN)
            .map(Some)
            .ok_or_else(|| Error::Protocol(format!("length {n} out of range"))),
    }
}

/// Replies in tests are small; these caps only stop a confused stream from allocating wildly.
const MAX_LEN: usize = 64 << 20;
const MAX_LINE: usize = 64 << 10;
const MAX_DEPTH: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Reply, Error> {
        read_reply(&mut &bytes[..])
    }

    #[test]
    fn encodes_bulk_array() {
        let mut out = Vec::new();
        write_command(&mut out, &["SET", "k", ""]).unwrap();
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn decodes_every_kind() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Reply::simple("OK"));
        assert_eq!(
            parse(b"-NOSCRIPT x\r\n").unwrap(),
            Reply::Error("NOSCRIPT x".into())
        );
        assert_eq!(parse(b":-7\r\n").unwrap(), Reply::Int(-7));
        assert_eq!(parse(b"$3\r\na\rb\r\n").unwrap(), Reply::bulk("a\rb"));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Reply::Nil);
        assert_eq!(parse(b"*-1\r\n").unwrap(), Reply::Nil);
        assert_eq!(
            parse(b"*2\r\n$1\r\nk\r\n*1\r\n:1\r\n").unwrap(),
            Reply::Array(vec![Reply::bulk("k"), Reply::Array(vec![Reply::Int(1)])])
        );
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        for bad in [
            &b"?x\r\n"[..],
            b"+OK\n",
            b":x\r\n",
            b"$-2\r\n",
            b"$2\r\nabcd",
            b"\r\n",
        ] {
            assert!(matches!(parse(bad), Err(Error::Protocol(_))), "{bad:?}");
        }
        assert!(parse(b"").unwrap_err().is_disconnect());
        assert!(parse(b"$5\r\nab").unwrap_err().is_disconnect());
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 2);
        assert!(matches!(parse(&deep), Err(Error::Protocol(_))));
    }
}
