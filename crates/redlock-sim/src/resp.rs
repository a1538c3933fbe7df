//! The server side of RESP for simulated nodes: take command arrays of bulk strings off a
//! byte stream (with `redlock_testkit::resp`, the parser every test shares), and encode
//! [`ServerReply`]s in the connection's protocol (RESP2, or RESP3 after `HELLO 3`).
//!
//! Only what clients send (arrays of bulk strings) is accepted; inline commands and nested
//! types are protocol errors, on which a node closes the connection as Redis does.

use bytes::{BufMut, Bytes, BytesMut};
use redlock_testkit::resp::{ProtocolError, parse_command};

use crate::keyspace::WrongType;

/// The protocol a connection speaks: RESP2 until a `HELLO 3` switches it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2: null is `$-1`, maps are flat arrays, pub/sub messages are arrays.
    #[default]
    Resp2,
    /// RESP3: null is `_`, doubles `,`, maps `%`, pub/sub messages push frames `>`.
    Resp3,
}

/// A reply a simulated node's command or script model gives, as a RESP2 connection reads
/// it; [`Frame`] is what the node writes, in either protocol.
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

/// What a node writes on a connection for one command, by meaning: [`Frame::encode`] writes
/// it in the connection's protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// `+OK`.
    Ok,
    /// Null: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// An integer `:n`.
    Int(i64),
    /// A bulk string.
    Bulk(Bytes),
    /// An error `-MESSAGE`, given without the leading `-`.
    Error(String),
    /// An array.
    Array(Vec<Self>),
    /// A double, as the server prints it (`ZINCRBY`, `ZSCORE`): a bulk string in RESP2,
    /// `,<text>` in RESP3.
    Double(String),
    /// A map (`HELLO`): a flat array of keys and values in RESP2, `%<pairs>` in RESP3.
    Map(Vec<(Self, Self)>),
    /// Out-of-band data (pub/sub): an array in RESP2, a push frame `>` in RESP3.
    Push(Vec<Self>),
    /// Several frames in a row (`SUBSCRIBE a b` answers one per channel); none at all is
    /// no reply.
    Frames(Vec<Self>),
}

impl ServerReply {
    /// An error reply from a message.
    pub fn error(message: impl Into<String>) -> Self {
        Self::Error(message.into())
    }

    /// Appends the RESP2 encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        Frame::from(self.clone()).encode(out, Protocol::Resp2);
    }
}

impl Frame {
    /// A bulk string from text.
    pub fn text(s: &str) -> Self {
        Self::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// A sorted-set command's reply, whose bulk strings are all scores: those become
    /// doubles.
    pub fn score(reply: ServerReply) -> Self {
        match reply {
            ServerReply::Bulk(text) => Self::Double(String::from_utf8_lossy(&text).into_owned()),
            other => other.into(),
        }
    }

    /// Appends the encoding in `protocol` to `out`.
    pub fn encode(&self, out: &mut BytesMut, protocol: Protocol) {
        let resp3 = protocol == Protocol::Resp3;
        match self {
            Self::Ok => out.put_slice(b"+OK\r\n"),
            Self::Nil if resp3 => out.put_slice(b"_\r\n"),
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
            Self::Array(items) => aggregate(out, b'*', items, protocol),
            Self::Push(items) => aggregate(out, if resp3 { b'>' } else { b'*' }, items, protocol),
            Self::Double(text) if resp3 => out.put_slice(format!(",{text}\r\n").as_bytes()),
            Self::Double(text) => Self::text(text).encode(out, protocol),
            Self::Map(pairs) => {
                let (head, n) = if resp3 { ('%', 1) } else { ('*', 2) };
                out.put_slice(format!("{head}{}\r\n", pairs.len() * n).as_bytes());
                for (key, value) in pairs {
                    key.encode(out, protocol);
                    value.encode(out, protocol);
                }
            }
            Self::Frames(frames) => {
                for frame in frames {
                    frame.encode(out, protocol);
                }
            }
        }
    }

    /// The frame as a RESP2 reader reads it: doubles as bulk strings, maps and pushes as
    /// arrays, several frames as an array of them, none as nil.
    pub fn into_resp2(self) -> ServerReply {
        let all = |items: Vec<Self>| items.into_iter().map(Self::into_resp2).collect();
        match self {
            Self::Ok => ServerReply::Ok,
            Self::Nil => ServerReply::Nil,
            Self::Int(n) => ServerReply::Int(n),
            Self::Bulk(b) => ServerReply::Bulk(b),
            Self::Error(e) => ServerReply::Error(e),
            Self::Double(text) => ServerReply::Bulk(Bytes::from(text)),
            Self::Array(items) | Self::Push(items) => ServerReply::Array(all(items)),
            Self::Map(pairs) => {
                let flat = pairs.into_iter().flat_map(|(k, v)| [k, v]);
                ServerReply::Array(flat.map(Self::into_resp2).collect())
            }
            Self::Frames(mut frames) if frames.len() == 1 => frames.remove(0).into_resp2(),
            Self::Frames(frames) if frames.is_empty() => ServerReply::Nil,
            Self::Frames(frames) => ServerReply::Array(all(frames)),
        }
    }
}

impl From<ServerReply> for Frame {
    fn from(reply: ServerReply) -> Self {
        match reply {
            ServerReply::Ok => Self::Ok,
            ServerReply::Nil => Self::Nil,
            ServerReply::Int(n) => Self::Int(n),
            ServerReply::Bulk(b) => Self::Bulk(b),
            ServerReply::Error(e) => Self::Error(e),
            ServerReply::Array(items) => Self::Array(items.into_iter().map(Self::from).collect()),
        }
    }
}

/// An aggregate of `items` under the type byte `head`.
fn aggregate(out: &mut BytesMut, head: u8, items: &[Frame], protocol: Protocol) {
    out.put_slice(format!("{}{}\r\n", char::from(head), items.len()).as_bytes());
    for item in items {
        item.encode(out, protocol);
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

    /// Each reply in both protocols, as redis-server 7.0.15 wrote it (captured with a raw
    /// socket after `HELLO 3`, and on a connection that never sent it).
    #[test]
    fn replies_encode_in_either_protocol() {
        let t = Frame::text;
        let message = Frame::Push(vec![t("message"), t("ch1"), t("")]);
        let cases: [(Frame, &[u8], &[u8]); 6] = [
            (Frame::Nil, b"$-1\r\n", b"_\r\n"),
            (Frame::Double("1.5".into()), b"$3\r\n1.5\r\n", b",1.5\r\n"),
            (
                message,
                b"*3\r\n$7\r\nmessage\r\n$3\r\nch1\r\n$0\r\n\r\n",
                b">3\r\n$7\r\nmessage\r\n$3\r\nch1\r\n$0\r\n\r\n",
            ),
            (
                Frame::Map(vec![(t("proto"), Frame::Int(3))]),
                b"*2\r\n$5\r\nproto\r\n:3\r\n",
                b"%1\r\n$5\r\nproto\r\n:3\r\n",
            ),
            (
                Frame::Array(vec![t("1"), Frame::Nil]),
                b"*2\r\n$1\r\n1\r\n$-1\r\n",
                b"*2\r\n$1\r\n1\r\n_\r\n",
            ),
            (
                Frame::Frames(vec![Frame::Int(1), Frame::Ok]),
                b":1\r\n+OK\r\n",
                b":1\r\n+OK\r\n",
            ),
        ];
        for (reply, resp2, resp3) in cases {
            let mut out = BytesMut::new();
            reply.encode(&mut out, Protocol::Resp2);
            assert_eq!(&out[..], resp2, "{reply:?}");
            let mut out = BytesMut::new();
            reply.encode(&mut out, Protocol::Resp3);
            assert_eq!(&out[..], resp3, "{reply:?}");
        }
        let mut out = BytesMut::new();
        Frame::Frames(Vec::new()).encode(&mut out, Protocol::Resp3);
        assert!(out.is_empty(), "no frames, no bytes");
    }
}
