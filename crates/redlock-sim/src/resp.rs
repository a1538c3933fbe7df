//! The server side of RESP2 for simulated nodes: split a byte stream into command arrays of
//! bulk strings, and encode [`ServerReply`]s.
//!
//! Only what clients send (arrays of bulk strings) is accepted; inline commands and nested
//! types are protocol errors, on which a node closes the connection as Redis does.

use bytes::{BufMut, Bytes, BytesMut};

/// A reply a simulated node sends, in RESP2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerReply {
    /// `+OK`.
    Ok,
    /// The null bulk string `$-1`.
    Nil,
    /// An integer `:n`.
    Int(i64),
    /// A bulk string.
    Bulk(Bytes),
    /// An error `-MESSAGE`, given without the leading `-`.
    Error(String),
}

impl ServerReply {
    /// An error reply from a message.
    pub fn error(message: impl Into<String>) -> Self {
        Self::Error(message.into())
    }

    /// Appends the RESP2 encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Self::Ok => out.put_slice(b"+OK\r\n"),
            Self::Nil => out.put_slice(b"$-1\r\n"),
            Self::Int(n) => out.put_slice(format!(":{n}\r\n").as_bytes()),
            Self::Bulk(b) => {
                out.put_slice(format!("${}\r\n", b.len()).as_bytes());
                out.put_slice(b);
                out.put_slice(b"\r\n");
            }
            Self::Error(msg) => {
                // A line break inside would end the reply early; Redis replaces them too.
                let msg = msg.replace(['\r', '\n'], " ");
                out.put_slice(format!("-{msg}\r\n").as_bytes());
            }
        }
    }
}

/// The stream could not be read as a command; the node answers with an error and closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestError(pub(crate) String);

/// Takes the next complete command off the front of `buf`.
///
/// `Ok(None)`: more bytes are needed and nothing was consumed.
pub(crate) fn next_command(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, RequestError> {
    let Some((count, mut pos)) = header(buf, 0, b'*')? else {
        return Ok(None);
    };
    if count > MAX_ARGS {
        return Err(RequestError(format!("invalid multibulk length {count}")));
    }
    let mut spans = Vec::with_capacity(count);
    for _ in 0..count {
        let Some((len, start)) = header(buf, pos, b'$')? else {
            return Ok(None);
        };
        if len > MAX_BULK {
            return Err(RequestError(format!("invalid bulk length {len}")));
        }
        let end = start + len;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(RequestError("bulk string not followed by CRLF".into()));
        }
        spans.push((start, end));
        pos = end + 2;
    }
    let frame = buf.split_to(pos).freeze();
    Ok(Some(
        spans.into_iter().map(|(s, e)| frame.slice(s..e)).collect(),
    ))
}

/// Reads `<kind><decimal>\r\n` at `pos`: the number and the position after the line.
fn header(buf: &[u8], pos: usize, kind: u8) -> Result<Option<(usize, usize)>, RequestError> {
    let Some(&first) = buf.get(pos) else {
        return Ok(None);
    };
    if first != kind {
        let what = if kind == b'*' { "array" } else { "bulk string" };
        return Err(RequestError(format!(
            "expected {what}, got byte 0x{first:02x}"
        )));
    }
    let Some(cr) = buf[pos..].iter().position(|&b| b == b'\r') else {
        if buf.len() - pos > MAX_HEADER {
            return Err(RequestError("header line too long".into()));
        }
        return Ok(None);
    };
    let line_end = pos + cr;
    let Some(&lf) = buf.get(line_end + 1) else {
        return Ok(None);
    };
    if lf != b'\n' {
        return Err(RequestError("CR not followed by LF".into()));
    }
    let digits = &buf[pos + 1..line_end];
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(RequestError("invalid length".into()));
    }
    let number = digits
        .iter()
        .fold(0usize, |n, d| n * 10 + usize::from(d - b'0'));
    Ok(Some((number, line_end + 2)))
}

/// Most arguments in one command (Redis allows far more; ours send at most six).
const MAX_ARGS: usize = 1024;
/// Largest bulk string accepted (Redis: 512 MB; scripts here are a few hundred bytes).
const MAX_BULK: usize = 1024 * 1024;
/// Longest header line before a protocol error.
const MAX_HEADER: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn commands_are_split_however_the_bytes_arrive() {
        let wire = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        for cut in 0..wire.len() {
            let mut buf = BytesMut::from(&wire[..cut]);
            let mut got = Vec::new();
            while let Some(cmd) = next_command(&mut buf).unwrap() {
                got.push(cmd);
            }
            buf.extend_from_slice(&wire[cut..]);
            while let Some(cmd) = next_command(&mut buf).unwrap() {
                got.push(cmd);
            }
            assert_eq!(got, vec![args(&["GET", "k"]), args(&["PING"])], "cut {cut}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn malformed_input_is_an_error_and_replies_encode() {
        assert!(next_command(&mut BytesMut::from(&b"GET k\r\n"[..])).is_err());
        assert!(next_command(&mut BytesMut::from(&b"*1\r\n:1\r\n"[..])).is_err());
        assert!(next_command(&mut BytesMut::from(&b"*x\r\n"[..])).is_err());
        assert!(next_command(&mut BytesMut::from(&b"*1\r\n$1\r\nab\r\n"[..])).is_err());
        let mut out = BytesMut::new();
        for r in [
            ServerReply::Ok,
            ServerReply::Nil,
            ServerReply::Int(-1),
            ServerReply::Bulk(Bytes::from_static(b"v")),
            ServerReply::error("ERR x\r\ny"),
        ] {
            r.encode(&mut out);
        }
        assert_eq!(&out[..], b"+OK\r\n$-1\r\n:-1\r\n$1\r\nv\r\n-ERR x  y\r\n");
    }
}
