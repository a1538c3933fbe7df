//! RESP in and out: node replies are decoded with the `redis-protocol` crate into the small
//! [`Reply`] enum under size caps; command arrays (our own, trusted bytes) are encoded by a
//! few lines checked against that crate's encoder.
//!
//! Node bytes are untrusted. Only the reply types our commands can produce are accepted
//! (simple string, error, integer, bulk string, nil, and the arrays of an inspection's reads:
//! [`Reply::Array`]); anything else, malformed input or a reply above the cap is a
//! [`ProtocolError`], never a panic. Arrays are read here, never by the parser, at most
//! [`MAX_ARRAY_DEPTH`] deep, so no nesting depth can exhaust the stack.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};
use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::types::RangeFrame;

/// One decoded reply from a node (RESP2).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// Any other simple string.
    Status(Bytes),
    /// An error reply, e.g. `-NOSCRIPT No matching script`. Kept as the server sent it.
    Error(Bytes),
    /// An integer reply (signed: `-1` is meaningful).
    Integer(i64),
    /// A bulk string.
    Bulk(Bytes),
    /// The null bulk string `$-1` (RESP2), e.g. `SET NX` on a held key.
    Nil,
    /// The replies to a request of several commands written together (the fenced
    /// pipeline), in order. Never decoded from a node: the client gathers each command's
    /// reply and hands them over as one.
    Replies(Vec<Self>),
    /// An array reply (`*N`), such as an inspection's `ZREVRANGE … WITHSCORES` or `TIME`:
    /// its elements, scalars or arrays of scalars (RESP3 sends a score pair as an array);
    /// `*-1` is an empty array.
    Array(Vec<Self>),
}

impl Reply {
    /// The error message, lossily as UTF-8, if this is an error reply.
    pub fn error_message(&self) -> Option<String> {
        match self {
            Self::Error(msg) => Some(String::from_utf8_lossy(msg).into_owned()),
            _ => None,
        }
    }

    /// Whether this is an error reply starting with `prefix` (e.g. `b"NOSCRIPT"`).
    pub fn is_error_with(&self, prefix: &[u8]) -> bool {
        matches!(self, Self::Error(msg) if msg.starts_with(prefix))
    }
}

/// The bytes from a node could not be read as a reply we accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub(crate) String);

impl ProtocolError {
    /// What was wrong, in words.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// Incremental reply decoder for one node's byte stream.
///
/// Push bytes as they arrive, in any split; pull whole replies. After an error the stream
/// cannot be resynchronised: the connection must be dropped.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    max_reply: usize,
    max_buffer: usize,
}

impl Decoder {
    /// A decoder that refuses replies above `max_reply` bytes and never buffers more than
    /// `max_buffer` undecoded bytes between pushes.
    pub fn new(max_reply: usize, max_buffer: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            max_reply,
            max_buffer: max_buffer.max(max_reply),
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Undecoded bytes held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Forgets everything buffered (the connection was replaced).
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Decodes the next complete reply, `Ok(None)` if more bytes are needed.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, ProtocolError> {
        let Some((reply, len)) = decode_reply(&self.buf, self.max_reply)? else {
            return Ok(None);
        };
        self.buf.advance(len);
        Ok(Some(reply))
    }

    /// Like [`push`](Self::push) then [`next_reply`](Self::next_reply), but reads straight
    /// from `input` while nothing is buffered, consuming what it decodes from `input`; only
    /// the bytes of an incomplete reply are copied into the buffer.
    ///
    /// Call until `Ok(None)` (or an error); `input` is then empty.
    #[inline]
    pub(crate) fn next_reply_in(
        &mut self,
        input: &mut &[u8],
    ) -> Result<Option<Reply>, ProtocolError> {
        if self.buf.is_empty() {
            // The usual cases, without a call: the end of a read, and a common reply.
            if input.is_empty() {
                return Ok(None);
            }
            if let Some((reply, len)) = common_reply(input) {
                *input = &input[len..];
                return Ok(Some(reply));
            }
        }
        self.decode_in(input)
    }

    /// [`next_reply_in`](Self::next_reply_in) past its inlined fast paths.
    fn decode_in(&mut self, input: &mut &[u8]) -> Result<Option<Reply>, ProtocolError> {
        if self.buf.is_empty()
            && let Some((reply, len)) = decode_reply(input, self.max_reply)?
        {
            *input = &input[len..];
            return Ok(Some(reply));
        }
        if !input.is_empty() {
            self.buf.extend_from_slice(input);
            *input = &[];
        }
        self.next_reply()
    }

    /// Like [`next_reply_in`](Self::next_reply_in), but the reply at the front is read by
    /// `decode` (which returns the value and its length, or `None` if incomplete): for a
    /// reply that is not one of the scalar replies, such as the `HELLO` array.
    pub(crate) fn next_in_with<T>(
        &mut self,
        input: &mut &[u8],
        decode: impl Fn(&[u8], usize) -> Result<Option<(T, usize)>, ProtocolError>,
    ) -> Result<Option<T>, ProtocolError> {
        if self.buf.is_empty()
            && let Some((value, len)) = decode(input, self.max_reply)?
        {
            *input = &input[len..];
            return Ok(Some(value));
        }
        if !input.is_empty() {
            self.buf.extend_from_slice(input);
            *input = &[];
        }
        let Some((value, len)) = decode(&self.buf, self.max_reply)? else {
            return Ok(None);
        };
        self.buf.advance(len);
        Ok(Some(value))
    }

    /// Whether the next frame, buffered or at the front of `input`, starts with `kind`.
    #[inline]
    pub(crate) fn next_is(&self, input: &[u8], kind: u8) -> bool {
        self.buf.first().or(input.first()) == Some(&kind)
    }

    /// Checks the buffer cap after all complete replies were taken.
    #[inline]
    pub fn check_buffer(&self) -> Result<(), ProtocolError> {
        if self.buf.len() > self.max_buffer {
            Err(ProtocolError(format!(
                "read buffer exceeds {} bytes",
                self.max_buffer
            )))
        } else {
            Ok(())
        }
    }
}

/// A reply that does not start with a RESP type byte: the node is not a Redis or Valkey
/// server (or not at this point of the stream). Says what it answered, escaped and cut to
/// [`QUOTED_ANSWER`] bytes, and what that looks like: these bytes are the remote's, never
/// ours, so quoting them shows no secret of this client.
fn not_resp(buf: &[u8]) -> ProtocolError {
    let shown = &buf[..buf.len().min(QUOTED_ANSWER)];
    let more = if buf.len() > QUOTED_ANSWER { "…" } else { "" };
    let quoted = format!("\"{}{more}\"", shown.escape_ascii());
    let upper = |prefix: &[u8]| {
        buf.len() >= prefix.len() && buf[..prefix.len()].eq_ignore_ascii_case(prefix)
    };
    let looks = if buf.starts_with(b"HTTP/") {
        "an HTTP server's answer"
    } else if buf.starts_with(b"<") {
        "HTML or XML (a web server?)"
    } else if buf.starts_with(b"SSH-") {
        "an SSH server's greeting"
    } else if matches!(buf, [0x15 | 0x16, 0x03, ..]) {
        "TLS (use rediss:// for a TLS port)"
    } else if buf.starts_with(b"{") || buf.starts_with(b"[") {
        "JSON"
    } else if upper(b"220 ") || upper(b"220-") {
        "an SMTP or FTP greeting"
    } else if shown
        .iter()
        .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        "text that is not RESP"
    } else {
        "binary data that is not RESP"
    };
    ProtocolError(format!(
        "the node does not speak RESP (no Redis or Valkey server at this address?): it \
         answered {quoted}, which looks like {looks}"
    ))
}

/// Decodes the reply at the start of `buf`: the reply and its length in bytes, or `None`
/// if `buf` holds only part of it.
pub(crate) fn decode(
    buf: &[u8],
    max_reply: usize,
) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    // The replies a lock cycle gets almost always, matched byte for byte; anything else
    // goes through the full parser.
    if let Some(common) = common_reply(buf) {
        return Ok(Some(common));
    }
    if matches!(kind, b'_' | b',' | b'#' | b'(' | b'=' | b'!') {
        return decode_resp3(buf, max_reply);
    }
    if !matches!(kind, b'+' | b'-' | b':' | b'$') {
        return Err(not_resp(buf));
    }
    let decoded = decode_range(buf)
        .map_err(|e| ProtocolError(format!("malformed reply: {}", e.details())))?;
    let Some((frame, len)) = decoded else {
        return if buf.len() > max_reply {
            Err(ProtocolError(format!("reply exceeds {max_reply} bytes")))
        } else {
            Ok(None)
        };
    };
    if len > max_reply {
        return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
    }
    let reply = match frame {
        RangeFrame::SimpleString((start, end)) => match &buf[start..end] {
            b"OK" => Reply::Ok,
            other => Reply::Status(Bytes::copy_from_slice(other)),
        },
        RangeFrame::Error((start, end)) => Reply::Error(Bytes::copy_from_slice(&buf[start..end])),
        RangeFrame::Integer(i) => Reply::Integer(i),
        RangeFrame::BulkString((start, end)) => {
            Reply::Bulk(Bytes::copy_from_slice(&buf[start..end]))
        }
        RangeFrame::Null => Reply::Nil,
        // `decode_reply` reads arrays; the parser never gets one (refused above).
        RangeFrame::Array(_) => {
            return Err(ProtocolError("unexpected array reply".into()));
        }
    };
    Ok(Some((reply, len)))
}

/// Decodes the reply to a request at the start of `buf`, as [`decode`] does, or an array
/// reply (an inspection's reads: [`Reply::Array`]); the session's and push decoders read
/// their own arrays and keep [`decode`], which refuses them.
fn decode_reply(buf: &[u8], max_reply: usize) -> Result<Option<(Reply, usize)>, ProtocolError> {
    match buf.first() {
        // An incomplete array that already holds more than the cap (all of `buf` is its) is
        // refused now, as an incomplete scalar is: what waits for more never exceeds the cap.
        Some(b'*') => match decode_array(buf, 0, max_reply, MAX_ARRAY_DEPTH)? {
            None if buf.len() > max_reply => {
                Err(ProtocolError(format!("reply exceeds {max_reply} bytes")))
            }
            decoded => Ok(decoded),
        },
        _ => decode(buf, max_reply),
    }
}

/// How deep arrays may nest in a reply: an array of arrays of scalars (RESP3's
/// `WITHSCORES` pairs) and no deeper; a deeper one is a [`ProtocolError`].
pub(crate) const MAX_ARRAY_DEPTH: u8 = 2;

/// The array reply at `pos` of `buf`, up to `depth` levels deep, and where it ends; `None`
/// if `buf` holds only part of it. Every element is held to what is left of `max_reply`.
fn decode_array(
    buf: &[u8],
    pos: usize,
    max_reply: usize,
    depth: u8,
) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let too_long = || ProtocolError(format!("reply exceeds {max_reply} bytes"));
    let Some((count, mut at)) = aggregate_header(buf, pos, max_reply)? else {
        return Ok(None);
    };
    // `count` is at most a third of the cap (aggregate_header); the rest grows as read.
    let mut items = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let left = max_reply.checked_sub(at).ok_or_else(too_long)?;
        let element = match buf.get(at) {
            None => return Ok(None),
            Some(b'*') if depth > 1 => {
                decode_array(buf, at, max_reply, depth - 1)?.map(|(r, end)| (r, end - at))
            }
            Some(b'*') => return Err(ProtocolError("array reply nested too deep".into())),
            Some(_) => decode(&buf[at..], left)?,
        };
        let Some((item, len)) = element else {
            return Ok(None);
        };
        items.push(item);
        at += len;
    }
    if at > max_reply {
        return Err(too_long());
    }
    Ok(Some((Reply::Array(items), at)))
}

/// An aggregate's header at `pos` (`*N\r\n`, or RESP3's `%N` map, whose N counts pairs, or
/// `>N` push): N (0 for the null array `*-1`) and where the first element starts. The type
/// byte is the caller's to check.
pub(crate) fn aggregate_header(
    buf: &[u8],
    pos: usize,
    max_reply: usize,
) -> Result<Option<(usize, usize)>, ProtocolError> {
    let rest = &buf[pos + 1..];
    let Some(end) = rest.windows(2).position(|w| w == b"\r\n") else {
        return if rest.len() > 21 {
            Err(ProtocolError("malformed array length".into()))
        } else {
            Ok(None)
        };
    };
    // As long as an incomplete header may grow (20 digits, the most a `usize` has, and its
    // `\r`): whether a header is refused must not depend on where the input was split.
    if end > 20 {
        return Err(ProtocolError("malformed array length".into()));
    }
    let digits = &rest[..end];
    let next = pos + 1 + end + 2;
    if digits == b"-1" {
        return Ok(Some((0, next)));
    }
    let count = std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .ok_or_else(|| ProtocolError("malformed array length".into()))?;
    // Every element takes at least 3 bytes (`:0\r\n` is 4): a count that cannot fit is an
    // error now rather than a long wait for bytes that will never be accepted.
    if count > max_reply / 3 {
        return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
    }
    Ok(Some((count, next)))
}

/// A RESP3 scalar (a connection after `HELLO 3`) as the RESP2 reply it stands for, so that
/// a vote reads the same on either protocol: null `_` is [`Reply::Nil`]; a double `,` (a
/// sorted set's score) and a big number `(` are their text, as RESP2 sends them in a bulk
/// string; a boolean `#` is what a Lua boolean gives in RESP2 (`#t` 1, `#f` nil); a
/// verbatim string `=` is its text without the `txt:` format; a blob error `!` an error.
fn decode_resp3(buf: &[u8], max_reply: usize) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let malformed = |what: &str| ProtocolError(format!("malformed {what} reply"));
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() > max_reply {
            Err(ProtocolError(format!("reply exceeds {max_reply} bytes")))
        } else {
            Ok(None)
        };
    };
    let line = &buf[1..end];
    let after_line = end + 2;
    let reply = match buf[0] {
        b'_' if line.is_empty() => Reply::Nil,
        b',' | b'(' if !line.is_empty() => Reply::Bulk(Bytes::copy_from_slice(line)),
        b'#' => match line {
            b"t" => Reply::Integer(1),
            b"f" => Reply::Nil,
            _ => return Err(malformed("boolean")),
        },
        b'=' | b'!' => return decode_blob(buf, line, after_line, max_reply),
        _ => return Err(malformed("RESP3")),
    };
    if after_line > max_reply {
        return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
    }
    Ok(Some((reply, after_line)))
}

/// The rest of a RESP3 blob (`=` verbatim string, `!` blob error) whose length line is
/// `line`, its payload starting at `start`.
fn decode_blob(
    buf: &[u8],
    line: &[u8],
    start: usize,
    max_reply: usize,
) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let len = std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .ok_or_else(|| ProtocolError("malformed blob length".into()))?;
    let total = start.saturating_add(len).saturating_add(2);
    if total > max_reply {
        return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
    }
    if buf.len() < total {
        return Ok(None);
    }
    if &buf[start + len..total] != b"\r\n" {
        return Err(ProtocolError("malformed blob reply".into()));
    }
    let payload = &buf[start..start + len];
    let reply = if buf[0] == b'!' {
        // An error is one line, as RESP2 sends it: a line break inside is not a message.
        if payload.iter().any(|b| matches!(b, b'\r' | b'\n')) {
            return Err(ProtocolError("malformed blob error".into()));
        }
        Reply::Error(Bytes::copy_from_slice(payload))
    } else {
        // `txt:` or `mkd:`: three letters and a colon, then the text.
        match payload.get(3) {
            Some(b':') => Reply::Bulk(Bytes::copy_from_slice(&payload[4..])),
            _ => return Err(ProtocolError("malformed verbatim string".into())),
        }
    };
    Ok(Some((reply, total)))
}

/// The commonest replies, matched as exact byte strings: `+OK`, `:1`, `$-1` (RESP3 `_`),
/// `:0`, `:-1`.
#[inline]
fn common_reply(buf: &[u8]) -> Option<(Reply, usize)> {
    match buf {
        [b'+', b'O', b'K', b'\r', b'\n', ..] => Some((Reply::Ok, 5)),
        [b':', b'1', b'\r', b'\n', ..] => Some((Reply::Integer(1), 4)),
        [b'$', b'-', b'1', b'\r', b'\n', ..] => Some((Reply::Nil, 5)),
        [b'_', b'\r', b'\n', ..] => Some((Reply::Nil, 3)),
        [b':', b'0', b'\r', b'\n', ..] => Some((Reply::Integer(0), 4)),
        [b':', b'-', b'1', b'\r', b'\n', ..] => Some((Reply::Integer(-1), 5)),
        _ => None,
    }
}

/// Appends `args` as one RESP command array of bulk strings to `buf`.
///
/// Written by hand rather than through `redis_protocol`'s encoder, which sizes every length
/// prefix with `f64::log10`; a test checks the bytes against that encoder. Our own output is trusted, so there is nothing to validate. The
/// exact length is reserved once and filled in place, so the small pieces (type bytes,
/// length digits, CRLFs) cost no call each.
pub(crate) fn encode(buf: &mut BytesMut, args: &[&[u8]]) {
    let header = |n: usize| 1 + decimal_len(n) + 2;
    let len = header(args.len())
        + args
            .iter()
            .map(|a| header(a.len()) + a.len() + 2)
            .sum::<usize>();
    let start = buf.len();
    buf.resize(start + len, 0);
    let mut out = &mut buf[start..];
    put_header(&mut out, b'*', args.len());
    for arg in args {
        put_header(&mut out, b'$', arg.len());
        put(&mut out, arg);
        put(&mut out, b"\r\n");
    }
    debug_assert!(out.is_empty(), "the length was computed exactly");
}

/// `*3\r\n` / `$5\r\n`: a type byte, a decimal length, CRLF.
fn put_header(out: &mut &mut [u8], kind: u8, n: usize) {
    // Most lengths in our commands have one or two digits: fixed-size writes.
    if n < 10 {
        let (head, tail) = std::mem::take(out).split_at_mut(4);
        head.copy_from_slice(&[kind, b'0' + n as u8, b'\r', b'\n']);
        *out = tail;
        return;
    }
    if n < 100 {
        let (head, tail) = std::mem::take(out).split_at_mut(5);
        let (tens, ones) = (b'0' + (n / 10) as u8, b'0' + (n % 10) as u8);
        head.copy_from_slice(&[kind, tens, ones, b'\r', b'\n']);
        *out = tail;
        return;
    }
    let digits = decimal_len(n);
    let (head, tail) = std::mem::take(out).split_at_mut(1 + digits + 2);
    head[0] = kind;
    let mut n = n;
    for d in head[1..=digits].iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    head[1 + digits] = b'\r';
    head[2 + digits] = b'\n';
    *out = tail;
}

/// Copies `bytes` to the front of `out` and moves `out` past them.
fn put(out: &mut &mut [u8], bytes: &[u8]) {
    let (head, tail) = std::mem::take(out).split_at_mut(bytes.len());
    head.copy_from_slice(bytes);
    *out = tail;
}

/// Decimal digits of `n`.
fn decimal_len(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// How many bytes of a non-RESP answer an error quotes.
const QUOTED_ANSWER: usize = 40;

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Result<Vec<Reply>, ProtocolError> {
        let mut d = Decoder::new(1024, 4096);
        let mut out = Vec::new();
        for chunk in chunks {
            d.push(chunk);
            while let Some(r) = d.next_reply()? {
                out.push(r);
            }
            d.check_buffer()?;
        }
        Ok(out)
    }

    /// An answer that is not RESP is quoted (escaped, cut) and named by what it looks like.
    #[test]
    fn a_node_that_does_not_speak_resp_is_named_by_its_answer() {
        let say = |bytes: &[u8]| decode(bytes, 1024).unwrap_err().to_string();
        let start = "the node does not speak RESP (no Redis or Valkey server at this address?): \
                     it answered ";
        for (bytes, quoted, looks) in [
            (
                &b"HTTP/1.0 400 Bad Request\r\n"[..],
                r#""HTTP/1.0 400 Bad Request\r\n""#,
                "an HTTP server's answer",
            ),
            (b"<html>", r#""<html>""#, "HTML or XML (a web server?)"),
            (
                b"SSH-2.0-OpenSSH_9.2\r\n",
                r#""SSH-2.0-OpenSSH_9.2\r\n""#,
                "an SSH server's greeting",
            ),
            (
                b"\x16\x03\x03\x00",
                r#""\x16\x03\x03\x00""#,
                "TLS (use rediss:// for a TLS port)",
            ),
            (b"{\"error\":1}", r#""{\"error\":1}""#, "JSON"),
            (
                b"220 mail ESMTP",
                r#""220 mail ESMTP""#,
                "an SMTP or FTP greeting",
            ),
            (b"hello", r#""hello""#, "text that is not RESP"),
            (b"\x00\xff", r#""\x00\xff""#, "binary data that is not RESP"),
        ] {
            assert_eq!(
                say(bytes),
                format!("{start}{quoted}, which looks like {looks}")
            );
        }
        let long = say(&[b'<'; 100]);
        assert!(long.contains(&format!("\"{}…\"", "<".repeat(40))), "{long}");
    }

    #[test]
    fn decodes_every_reply_our_commands_get() {
        let got = decode_all(&[b"+OK\r\n$-1\r\n:1\r\n:-1\r\n:0\r\n-NOSCRIPT No matching script. Please use EVAL.\r\n$3\r\nabc\r\n+QUEUED\r\n"]).unwrap();
        assert_eq!(
            got,
            vec![
                Reply::Ok,
                Reply::Nil,
                Reply::Integer(1),
                Reply::Integer(-1),
                Reply::Integer(0),
                Reply::Error(Bytes::from_static(
                    b"NOSCRIPT No matching script. Please use EVAL."
                )),
                Reply::Bulk(Bytes::from_static(b"abc")),
                Reply::Status(Bytes::from_static(b"QUEUED")),
            ]
        );
        assert!(got[5].is_error_with(b"NOSCRIPT"));
    }

    #[test]
    fn resp3_scalars_read_as_their_resp2_forms() {
        let got = decode_all(&[b"_\r\n,5\r\n,inf\r\n(123456789012345678901234567890\r\n#t\r\n#f\r\n=8\r\ntxt:a\r\nb\r\n!7\r\nERR x y\r\n"]).unwrap();
        assert_eq!(
            got,
            vec![
                Reply::Nil,
                Reply::Bulk(Bytes::from_static(b"5")),
                Reply::Bulk(Bytes::from_static(b"inf")),
                Reply::Bulk(Bytes::from_static(b"123456789012345678901234567890")),
                Reply::Integer(1),
                Reply::Nil,
                Reply::Bulk(Bytes::from_static(b"a\r\nb")),
                Reply::Error(Bytes::from_static(b"ERR x y")),
            ]
        );
        // Split anywhere, each waits for the rest.
        let stream: &[u8] = b"_\r\n,1.5\r\n=6\r\ntxt:ab\r\n!3\r\nERR\r\n#t\r\n";
        let whole = decode_all(&[stream]).unwrap();
        for split in 0..stream.len() {
            assert_eq!(
                decode_all(&[&stream[..split], &stream[split..]]).unwrap(),
                whole
            );
        }
        for bad in [
            &b"_x\r\n"[..],
            b",\r\n",
            b"#x\r\n",
            b"=3\r\nabc\r\n",
            b"=x\r\n",
            b"!2\r\nabcd",
            b"!8\r\nERR x\r\ny\r\n",
            b"=99999\r\n",
            b"%1\r\n:1\r\n:1\r\n",
            b">1\r\n:1\r\n",
        ] {
            assert!(decode_all(&[bad]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn split_input_waits_for_the_rest() {
        assert_eq!(
            decode_all(&[b"+O", b"K\r", b"\n:4", b"2\r\n"]).unwrap(),
            vec![Reply::Ok, Reply::Integer(42)]
        );
        assert_eq!(decode_all(&[b"$5\r\nab"]).unwrap(), vec![]);
    }

    #[test]
    fn reading_from_the_input_matches_pushing_it() {
        let stream: &[u8] =
            b"+OK\r\n:1\r\n$-1\r\n-NOSCRIPT x\r\n$3\r\nabc\r\n:-1\r\n:0\r\n+QUEUED\r\n";
        let whole = decode_all(&[stream]).unwrap();
        for split in 0..stream.len() {
            for second in split..stream.len() {
                let parts = [&stream[..split], &stream[split..second], &stream[second..]];
                let mut d = Decoder::new(1024, 4096);
                let mut got = Vec::new();
                for part in parts {
                    let mut input = part;
                    while let Some(r) = d.next_reply_in(&mut input).unwrap() {
                        got.push(r);
                    }
                    assert!(input.is_empty());
                }
                assert_eq!(got, whole, "split at {split} and {second}");
                assert_eq!(d.buffered(), 0);
            }
        }
        // Caps apply the same way to bytes read straight from the input.
        let mut d = Decoder::new(8, 16);
        let mut input: &[u8] = b"+OK\r\n+0123456789";
        assert_eq!(d.next_reply_in(&mut input), Ok(Some(Reply::Ok)));
        assert!(d.next_reply_in(&mut input).is_err());
    }

    #[test]
    fn arrays_are_read_two_levels_deep_and_no_deeper() {
        let bulk = |s: &'static [u8]| Reply::Bulk(Bytes::from_static(s));
        let time = b"*2\r\n$10\r\n1795190400\r\n$6\r\n000017\r\n";
        let want = Reply::Array(vec![bulk(b"1795190400"), bulk(b"000017")]);
        assert_eq!(decode_all(&[time]), Ok(vec![want.clone()]));
        // Split anywhere, read the same.
        for cut in 1..time.len() {
            assert_eq!(
                decode_all(&[&time[..cut], &time[cut..]]),
                Ok(vec![want.clone()])
            );
        }
        let pairs = b"*1\r\n*2\r\n$1\r\na\r\n,1.5\r\n";
        let want = Reply::Array(vec![Reply::Array(vec![bulk(b"a"), bulk(b"1.5")])]);
        assert_eq!(decode_all(&[pairs]), Ok(vec![want]));
        assert_eq!(
            decode_all(&[b"*0\r\n*-1\r\n"]),
            Ok(vec![Reply::Array(vec![]); 2])
        );
        assert!(
            decode_all(&[b"*1\r\n*1\r\n*1\r\n:1\r\n"]).is_err(),
            "three deep"
        );
        assert!(decode_all(&[b"*1\r\n%1\r\n"]).is_err(), "a map inside");
        assert!(
            decode_all(&[b"*2\r\n:1\r\n"]).is_ok_and(|r| r.is_empty()),
            "incomplete"
        );
        // Far more elements than the cap can hold, and a long array cut at the cap.
        assert!(decode_all(&[b"*99999\r\n"]).is_err());
        // An incomplete array past the cap is refused at once, whole or split, not kept
        // waiting for more (fuzz/fuzz_targets/resp_decode.rs: a tail never exceeds the cap).
        // A header refused whole is refused split, and one read whole is read split
        // (leading zeros count: the fuzzer's split-invariance check).
        let zeros = b"*00000000000000000000000000000000005\r\n";
        assert!(decode_all(&[zeros]).is_err());
        let split: Vec<&[u8]> = zeros.chunks(1).collect();
        assert!(decode_all(&split).is_err());
        let longest = b"*00000000000000000001\r\n:1\r\n";
        let split: Vec<&[u8]> = longest.chunks(1).collect();
        assert_eq!(decode_all(&[longest]), decode_all(&split));
        assert!(decode_all(&[longest]).is_ok_and(|r| r.len() == 1));
        for tail in [&b"*2\r\n:1\r\n:2345678901"[..], b"*12345678901234567"] {
            let mut small = Decoder::new(16, 1 << 20);
            small.push(tail);
            assert!(
                small.next_reply().is_err(),
                "an incomplete array above the cap"
            );
        }
        let long: Vec<u8> = (0..400).flat_map(|_| *b":1\r\n").collect();
        assert!(decode_all(&[b"*400\r\n", &long]).is_err());
    }

    #[test]
    fn hostile_input_is_an_error_not_a_panic() {
        assert!(decode_all(&[b"*1\r\n*1\r\n*1\r\n:1\r\n"]).is_err());
        assert!(decode_all(&[b"HTTP/1.1 200 OK\r\n"]).is_err());
        assert!(decode_all(&[b":99999999999999999999999\r\n"]).is_err());
        assert!(decode_all(&[b"$-7\r\n"]).is_err());
        // A reply that never ends is cut off at the cap.
        let long = vec![b'a'; 2000];
        assert!(decode_all(&[b"+", &long]).is_err());
        let bulk = decode_all(&[b"$100000\r\n", &long]);
        assert!(bulk.is_err());
    }

    #[test]
    fn encoding_matches_redis_protocol() {
        use redis_protocol::resp2::encode::extend_encode_borrowed;
        use redis_protocol::resp2::types::BorrowedFrame;
        let long = vec![b'x'; 12_345];
        let cases: [&[&[u8]]; 4] = [
            &[b"SET", b"k", b"v", b"NX", b"PX", b"100"],
            &[b"EVALSHA", b"abc", b"1", b"", &long],
            &[],
            &[b"\r\n\x00binary"],
        ];
        for args in cases {
            let mut ours = BytesMut::new();
            encode(&mut ours, args);
            let frames: Vec<BorrowedFrame<'_>> =
                args.iter().map(|a| BorrowedFrame::BulkString(a)).collect();
            let mut theirs = BytesMut::new();
            extend_encode_borrowed(&mut theirs, &BorrowedFrame::Array(&frames), true).unwrap();
            assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn encodes_commands_as_bulk_string_arrays() {
        let mut buf = BytesMut::new();
        encode(&mut buf, &[b"SET", b"k", b"v", b"NX", b"PX", b"100"]);
        assert_eq!(
            &buf[..],
            b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$3\r\n100\r\n"
        );
    }
}
