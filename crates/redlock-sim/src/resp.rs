//! The server side of RESP2 for simulated nodes: take command arrays of bulk strings off a
//! byte stream (with `redlock_testkit::resp`, the parser every test shares), and encode
//! [`ServerReply`]s.
//!
//! Only what clients send (arrays of bulk strings) is accepted; inline commands and nested
//! types are protocol errors, on which a node closes the connection as Redis does.

use bytes::{BufMut, Bytes, BytesMut};
use redlock_testkit::resp::{ProtocolError, parse_command};

use crate::keyspace::WrongType;

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
    /// An array of replies (`HELLO`'s map, as RESP2 sends it).
    Array(Vec<Self>),
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
            Self::Array(items) => {
                out.put_slice(format!("*{}\r\n", items.len()).as_bytes());
                for item in items {
                    item.encode(out);
                }
            }
        }
    }
}

impl From<WrongType> for ServerReply {
    /// Redis's exact `-WRONGTYPE` reply.
    fn from(_: WrongType) -> Self {
        Self::error("WRONGTYPE Operation against a key holding the wrong kind of value")
    }
}

/// Takes the next complete command off the front of `buf`, parsed by the test kit's shared
/// RESP2 codec; the arguments share the command's bytes.
///
/// `Ok(None)`: more bytes are needed and nothing was consumed. `Err`: the stream could not
/// be read as a command; the node answers with an error and closes.
pub(crate) fn next_command(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(command) = parse_command(buf)? else {
        return Ok(None);
    };
    let frame = buf.split_to(command.frame_len()).freeze();
    let args = command.arg_ranges().iter();
    Ok(Some(args.map(|r| frame.slice(r.clone())).collect()))
}

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
            ServerReply::Array(vec![ServerReply::Int(1), ServerReply::Array(Vec::new())]),
        ] {
            r.encode(&mut out);
        }
        assert_eq!(
            &out[..],
            b"+OK\r\n$-1\r\n:-1\r\n$1\r\nv\r\n-ERR x  y\r\n*2\r\n:1\r\n*0\r\n"
        );
    }
}
