//! The test side of RESP2, shared by every test that plays a node or reads a node's replies:
//! the simulated nodes (`redlock-sim`), the kit's own [`Conn`](crate::Conn), the
//! `client_inputs` fuzz target and the cluster bench's raw baseline. It splits a byte stream
//! into commands ([`parse_command`], what a server reads), encodes commands
//! ([`encode_command`]), and parses and encodes replies ([`parse_reply`], [`Reply::encode`]).
//!
//! Every parser works on the front of a buffer, httparse-style: `Ok(None)` means more bytes
//! are needed and nothing was taken. Input is untrusted: lengths are capped before anything
//! is allocated, and no input panics. The drivers' codec is `redlock-core`'s, never this.

use std::fmt;
use std::ops::Range;

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

/// Bytes that are not RESP2 of the expected kind, or that break a cap; a server answers
/// with `-ERR Protocol error: ..` and closes, a client drops the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// A complete command at the front of a buffer, as byte ranges into that buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    args: Vec<Range<usize>>,
    frame_len: usize,
}

/// Parses the command (an array of bulk strings) at the front of `buf`.
///
/// Inline commands, other types and nesting are errors, as is an array of more than
/// [`MAX_ARGS`] arguments or an argument over [`MAX_BULK`] bytes.
pub fn parse_command(buf: &[u8]) -> Result<Option<Command>, ProtocolError> {
    let Some((count, mut pos)) = header(buf, 0, b'*')? else {
        return Ok(None);
    };
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= MAX_ARGS)
        .ok_or_else(|| error(format!("invalid multibulk length {count}")))?;
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let Some((len, start)) = header(buf, pos, b'$')? else {
            return Ok(None);
        };
        let len = usize::try_from(len)
            .ok()
            .filter(|&n| n <= MAX_BULK)
            .ok_or_else(|| error(format!("invalid bulk length {len}")))?;
        let Some(end) = body(buf, start, len)? else {
            return Ok(None);
        };
        args.push(start..end);
        pos = end + 2;
    }
    Ok(Some(Command {
        args,
        frame_len: pos,
    }))
}

/// Parses the reply at the front of `buf`: the reply and how many bytes it took.
///
/// Bulk strings are capped at [`MAX_BULK`], arrays at [`MAX_ARGS`] elements and
/// [`MAX_DEPTH`] levels of nesting.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    reply_at(buf, 0, 0)
}

/// Appends `args` as one RESP2 array of bulk strings.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    let len: usize = args.iter().map(|a| a.as_ref().len() + 16).sum();
    out.reserve(len + 16);
    out.push(b'*');
    put_uint(out, args.len());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        let arg = arg.as_ref();
        out.push(b'$');
        put_uint(out, arg.len());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

impl Command {
    /// How many bytes of the buffer the command takes.
    pub fn frame_len(&self) -> usize {
        self.frame_len
    }

    /// Where each argument is in the buffer it was parsed from.
    pub fn arg_ranges(&self) -> &[Range<usize>] {
        &self.args
    }

    /// The arguments, read from `buf`, the buffer the command was parsed from.
    ///
    /// # Panics
    /// If `buf` is shorter than the command: it is not the buffer the command came from.
    pub fn args<'b>(&self, buf: &'b [u8]) -> impl Iterator<Item = &'b [u8]> {
        self.args.iter().map(move |r| &buf[r.clone()])
    }
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

    /// Appends the RESP2 encoding; line breaks inside a status or error line become spaces
    /// (they would end the line early), as Redis does.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let line = |out: &mut Vec<u8>, kind: u8, text: &str| {
            out.push(kind);
            out.extend(
                text.bytes()
                    .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
            out.extend_from_slice(b"\r\n");
        };
        match self {
            Self::Simple(s) => line(out, b'+', s),
            Self::Error(s) => line(out, b'-', s),
            Self::Int(i) => line(out, b':', &i.to_string()),
            Self::Nil => out.extend_from_slice(b"$-1\r\n"),
            Self::Bulk(b) => {
                line(out, b'$', &b.len().to_string());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Self::Array(items) => {
                line(out, b'*', &items.len().to_string());
                items.iter().for_each(|item| item.encode(out));
            }
        }
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

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn reply_at(buf: &[u8], pos: usize, depth: usize) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    if !matches!(kind, b'+' | b'-' | b':' | b'$' | b'*') {
        return Err(error(format!("unknown reply type byte 0x{kind:02x}")));
    }
    let Some((text, next)) = line(buf, pos)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(text);
    let reply = match kind {
        b'+' => Reply::Simple(text.into_owned()),
        b'-' => Reply::Error(text.into_owned()),
        b':' => Reply::Int(integer(text.as_bytes())?),
        b'$' => return bulk_reply(buf, next, integer(text.as_bytes())?),
        _ => return array_reply(buf, next, integer(text.as_bytes())?, depth),
    };
    Ok(Some((reply, next)))
}

fn bulk_reply(buf: &[u8], start: usize, len: i64) -> Result<Option<(Reply, usize)>, ProtocolError> {
    if len == -1 {
        return Ok(Some((Reply::Nil, start)));
    }
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n <= MAX_BULK)
        .ok_or_else(|| error(format!("invalid bulk length {len}")))?;
    Ok(body(buf, start, len)?.map(|end| (Reply::Bulk(buf[start..end].to_vec()), end + 2)))
}

fn array_reply(
    buf: &[u8],
    mut pos: usize,
    len: i64,
    depth: usize,
) -> Result<Option<(Reply, usize)>, ProtocolError> {
    if len == -1 {
        return Ok(Some((Reply::Nil, pos)));
    }
    if depth >= MAX_DEPTH {
        return Err(error(format!("arrays nested deeper than {MAX_DEPTH}")));
    }
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n <= MAX_ARGS)
        .ok_or_else(|| error(format!("invalid multibulk length {len}")))?;
    // Not `with_capacity(len)`: the elements may never come.
    let mut items = Vec::new();
    for _ in 0..len {
        let Some((item, next)) = reply_at(buf, pos, depth + 1)? else {
            return Ok(None);
        };
        items.push(item);
        pos = next;
    }
    Ok(Some((Reply::Array(items), pos)))
}

/// Reads `<kind><integer>\r\n` at `pos`: the integer and the position after the line.
fn header(buf: &[u8], pos: usize, kind: u8) -> Result<Option<(i64, usize)>, ProtocolError> {
    let Some(&first) = buf.get(pos) else {
        return Ok(None);
    };
    if first != kind {
        let what = if kind == b'*' { "array" } else { "bulk string" };
        return Err(error(format!("expected {what}, got byte 0x{first:02x}")));
    }
    let Some((digits, next)) = line(buf, pos)? else {
        return Ok(None);
    };
    Ok(Some((integer(digits)?, next)))
}

/// The line at `pos` without its type byte and CRLF, and the position after it.
fn line(buf: &[u8], pos: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let rest = &buf[pos..];
    let Some(cr) = rest.iter().take(MAX_LINE).position(|&b| b == b'\r') else {
        if rest.len() > MAX_LINE {
            return Err(error("line too long".into()));
        }
        return Ok(None);
    };
    match rest.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((&rest[1..cr], pos + cr + 2))),
        Some(_) => Err(error("CR not followed by LF".into())),
    }
}

/// `len` payload bytes at `start`, then CRLF: the payload's end, once all of it is there.
fn body(buf: &[u8], start: usize, len: usize) -> Result<Option<usize>, ProtocolError> {
    let end = start + len;
    match buf.get(end..end + 2) {
        None => Ok(None),
        Some(b"\r\n") => Ok(Some(end)),
        Some(_) => Err(error("bulk string not followed by CRLF".into())),
    }
}

/// A signed decimal of at most 18 digits (no `+`, no spaces), so it cannot overflow.
fn integer(digits: &[u8]) -> Result<i64, ProtocolError> {
    let (negative, magnitude) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if magnitude.is_empty() || magnitude.len() > 18 || !magnitude.iter().all(u8::is_ascii_digit) {
        return Err(error(format!(
            "invalid integer {:?}",
            String::from_utf8_lossy(digits)
        )));
    }
    let n = magnitude
        .iter()
        .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
    Ok(if negative { -n } else { n })
}

/// The decimal digits of `n`, without allocating.
fn put_uint(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        // `n % 10` is a single digit.
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

fn error(message: String) -> ProtocolError {
    ProtocolError(message)
}

/// Most arguments in a command, and elements in an array reply. Redis allows far more; the
/// core sends at most six and reads no arrays.
pub const MAX_ARGS: usize = 1024;
/// Largest bulk string accepted (Redis: 512 MB; scripts here are a few hundred bytes).
pub const MAX_BULK: usize = 1 << 20;
/// Deepest nesting of array replies.
pub const MAX_DEPTH: usize = 16;
/// Longest header or status line, CRLF included.
const MAX_LINE: usize = 64 << 10;

#[cfg(test)]
#[path = "resp_tests.rs"]
mod tests;
