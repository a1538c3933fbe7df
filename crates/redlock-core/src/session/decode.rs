//! Decoders of the session's replies (session/mod.rs): `HELLO` (which server, which
//! protocol: docs/design.md, "Native commands: chosen per node, scripts as the floor") and
//! `TIME` (the node's clock, for the fencing floor and the clock-rate check), and the
//! element reader that `INFO`'s decoder (identity.rs) shares.

use std::time::Duration;

use bytes::Bytes;

use crate::resp::{self, ProtocolError, Reply};
use crate::server::{NodeCommands, ServerFamily, ServerVersion};

/// A node's answer to `HELLO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hello {
    /// An array reply: the server it names, if it names one we can read.
    Server(Option<ServerVersion>),
    /// A RESP3 map (the answer to `HELLO 3`): as `Server`, and the connection now speaks
    /// RESP3. Only a map says so: a server that answered `HELLO 3` with an array did not
    /// switch.
    Map(Option<ServerVersion>),
    /// An error reply (unknown command, `NOPERM`, `NOAUTH`, ...), as the server sent it.
    Refused(String),
}

impl Hello {
    /// The commands the node gets after this answer.
    pub(crate) fn commands(&self) -> NodeCommands {
        match self {
            Self::Server(Some(server)) | Self::Map(Some(server)) => {
                NodeCommands::for_server(*server)
            }
            Self::Server(None) | Self::Map(None) => NodeCommands::SCRIPTS,
            Self::Refused(_) => NodeCommands::probing(),
        }
    }
}

/// Reads a `TIME` reply from the start of `buf`: the node's clock since the epoch (`None`
/// for an error reply, a refusal by an ACL say, or a reply that is not two decimal numbers,
/// seconds below 2^32 and microseconds below a million), and the reply's length; `None` if `buf` holds only part
/// of it. A node without a clock reading gets the fenced script, never a guessed floor.
pub(crate) fn decode_time(
    buf: &[u8],
    max_reply: usize,
) -> Result<Option<(Option<Duration>, usize)>, ProtocolError> {
    if buf.first() != Some(&b'*') {
        // An error reply, or anything else that is not a clock.
        return Ok(resp::decode(buf, max_reply)?.map(|(_, len)| (None, len)));
    }
    let Some((count, mut pos)) = resp::aggregate_header(buf, 0, max_reply)? else {
        return Ok(None);
    };
    let mut parts = [None, None];
    for i in 0..count {
        if pos > max_reply {
            return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
        }
        let Some((value, next)) = element(buf, pos, max_reply)? else {
            return Ok(None);
        };
        pos = next;
        if let Some(part) = parts.get_mut(i) {
            *part = value.and_then(|v| std::str::from_utf8(&v).ok()?.parse::<u64>().ok());
        }
    }
    if pos > max_reply {
        return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
    }
    let clock = match (count, parts) {
        (2, [Some(secs), Some(micros)]) if secs < 1 << 32 && micros < 1_000_000 => {
            Some(Duration::from_secs(secs) + Duration::from_micros(micros))
        }
        _ => None,
    };
    Ok(Some((clock, pos)))
}

/// Reads a `HELLO` reply from the start of `buf`: the reply and its length, or `None` if
/// `buf` holds only part of it.
///
/// The reply is an array of field names and values (RESP2); values may themselves be
/// arrays (`modules`). Only the top level is read; nested arrays are skipped with a
/// counter, not recursion, so no nesting can exhaust the stack, and the whole reply is
/// held to `max_reply` bytes like any other.
pub(crate) fn decode_hello(
    buf: &[u8],
    max_reply: usize,
) -> Result<Option<(Hello, usize)>, ProtocolError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*' | b'%') => decode_array(buf, max_reply),
        Some(_) => Ok(resp::decode(buf, max_reply)?.map(|(reply, len)| {
            let hello = match reply.error_message() {
                Some(message) => Hello::Refused(message),
                None => Hello::Server(None),
            };
            (hello, len)
        })),
    }
}

/// The `HELLO` reply's fields: an array of names and values (RESP2), or a map of them
/// (RESP3, after `HELLO 3`).
fn decode_array(buf: &[u8], max_reply: usize) -> Result<Option<(Hello, usize)>, ProtocolError> {
    let too_long = || ProtocolError(format!("reply exceeds {max_reply} bytes"));
    let Some((count, mut pos)) = resp::aggregate_header(buf, 0, max_reply)? else {
        return Ok(None);
    };
    let count = match buf[0] {
        b'%' => count.checked_mul(2).ok_or_else(too_long)?,
        _ => count,
    };
    let mut family = None;
    let mut version = None;
    // The field name the next top-level value belongs to.
    let mut field: Option<Bytes> = None;
    for index in 0..count {
        if pos > max_reply {
            return Err(too_long());
        }
        let value = match element(buf, pos, max_reply)? {
            None => return Ok(None),
            Some((value, next)) => {
                pos = next;
                value
            }
        };
        if index % 2 == 0 {
            field = value;
            continue;
        }
        match (field.as_deref(), value.as_deref()) {
            (Some(b"server"), Some(name)) => {
                family = Some(match name {
                    b"redis" => ServerFamily::Redis,
                    b"valkey" => ServerFamily::Valkey,
                    _ => ServerFamily::Other,
                });
            }
            (Some(b"version"), Some(v)) => version = parse_version(v),
            _ => {}
        }
    }
    if pos > max_reply {
        return Err(too_long());
    }
    let server = family
        .zip(version)
        .map(|(family, version)| ServerVersion { family, version });
    let hello = match buf[0] {
        b'%' => Hello::Map(server),
        _ => Hello::Server(server),
    };
    Ok(Some((hello, pos)))
}

/// One top-level element at `pos`: its text if it is a string (simple or bulk), `None` for
/// anything else, and where the next element starts. A nested aggregate (an array, or in
/// RESP3 a map or a set: each module of a RESP3 `HELLO` is a map) is skipped whole.
#[allow(clippy::type_complexity)]
pub(crate) fn element(
    buf: &[u8],
    pos: usize,
    max_reply: usize,
) -> Result<Option<(Option<Bytes>, usize)>, ProtocolError> {
    if !buf.get(pos).is_some_and(|&kind| is_aggregate(kind)) {
        let Some((reply, len)) = resp::decode(&buf[pos..], max_reply)? else {
            return Ok(None);
        };
        let text = match reply {
            Reply::Bulk(b) | Reply::Status(b) => Some(b),
            _ => None,
        };
        return Ok(Some((text, pos + len)));
    }
    // Elements still to skip; each nested array header adds its own.
    let mut left: usize = 1;
    let mut pos = pos;
    while left > 0 {
        if pos > max_reply {
            return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
        }
        left -= 1;
        if let Some(&kind) = buf.get(pos).filter(|&&kind| is_aggregate(kind)) {
            let Some((count, next)) = resp::aggregate_header(buf, pos, max_reply)? else {
                return Ok(None);
            };
            let count = if kind == b'%' {
                count.saturating_mul(2)
            } else {
                count
            };
            left = left.saturating_add(count);
            pos = next;
        } else {
            let Some((_, len)) = resp::decode(&buf[pos..], max_reply)? else {
                return Ok(None);
            };
            pos += len;
        }
    }
    Ok(Some((None, pos)))
}

/// An array, a RESP3 map or a RESP3 set.
fn is_aggregate(kind: u8) -> bool {
    matches!(kind, b'*' | b'%' | b'~')
}

/// `9.1.2` → (9, 1, 2); missing parts are 0; `None` if the first part is not a number.
fn parse_version(text: &[u8]) -> Option<(u16, u16, u16)> {
    let text = std::str::from_utf8(text).ok()?;
    let mut parts = text.split('.').map(|p| {
        let digits: &str = &p[..p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len())];
        digits.parse::<u16>().ok()
    });
    let major = parts.next().flatten()?;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALKEY: &[u8] = b"*14\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n9.1.2\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:7\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n";

    fn hello(family: ServerFamily, version: (u16, u16, u16)) -> Hello {
        Hello::Server(Some(ServerVersion { family, version }))
    }

    #[test]
    fn reads_the_server_and_version_of_a_hello_reply() {
        let (h, len) = decode_hello(VALKEY, 4096).unwrap().unwrap();
        assert_eq!(len, VALKEY.len());
        assert_eq!(h, hello(ServerFamily::Valkey, (9, 1, 2)));
        // Every split before the end is incomplete, never an error.
        for cut in 0..VALKEY.len() {
            assert_eq!(
                decode_hello(&VALKEY[..cut], 4096).unwrap(),
                None,
                "cut {cut}"
            );
        }
        // Followed by more replies: only the HELLO reply is taken.
        let mut more = VALKEY.to_vec();
        more.extend_from_slice(b"+OK\r\n");
        assert_eq!(decode_hello(&more, 4096).unwrap().unwrap().1, VALKEY.len());
    }

    #[test]
    fn nested_modules_are_skipped_without_recursion() {
        let redis = b"*6\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nmodules\r\n*1\r\n*4\r\n$4\r\nname\r\n$2\r\nft\r\n$3\r\nver\r\n:1\r\n$7\r\nversion\r\n+8.4.0\r\n";
        let (h, len) = decode_hello(redis, 4096).unwrap().unwrap();
        assert_eq!(len, redis.len());
        assert_eq!(h, hello(ServerFamily::Redis, (8, 4, 0)));
        // Deep nesting within the cap is read without recursion; beyond it, an error.
        let mut deep = b"*2\r\n$7\r\nmodules\r\n".to_vec();
        deep.extend(std::iter::repeat_n(b"*1\r\n".as_slice(), 10_000).flatten());
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(
            decode_hello(&deep, 64 * 1024).unwrap().unwrap().0,
            Hello::Server(None)
        );
        assert!(decode_hello(&deep, 1024).is_err());
    }

    #[test]
    fn a_resp3_hello_is_a_map_whose_modules_are_maps() {
        let reply: &[u8] = b"%7\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n9.1.2\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:5\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*1\r\n%2\r\n$4\r\nname\r\n$3\r\nbf1\r\n$3\r\nver\r\n:1\r\n";
        let (hello, len) = decode_hello(reply, 4096).unwrap().unwrap();
        assert_eq!(len, reply.len());
        assert_eq!(
            hello,
            Hello::Map(Some(ServerVersion {
                family: ServerFamily::Valkey,
                version: (9, 1, 2)
            }))
        );
        for cut in 0..reply.len() {
            assert_eq!(
                decode_hello(&reply[..cut], 4096).unwrap(),
                None,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn refusals_and_odd_replies() {
        let noperm = b"-NOPERM User u has no permissions to run the 'hello' command\r\n";
        let (h, _) = decode_hello(noperm, 4096).unwrap().unwrap();
        assert!(matches!(&h, Hello::Refused(m) if m.starts_with("NOPERM")));
        assert_eq!(h.commands(), NodeCommands::probing());
        assert_eq!(
            decode_hello(b"+OK\r\n", 4096).unwrap().unwrap().0,
            Hello::Server(None)
        );
        assert_eq!(
            decode_hello(b"*-1\r\n", 4096).unwrap().unwrap().0,
            Hello::Server(None)
        );
        for bad in [&b"*x\r\n"[..], b"*99999999\r\n", b"%x\r\n", b"*1\r\n&\r\n"] {
            assert!(decode_hello(bad, 4096).is_err(), "{bad:?}");
        }
        // A long header without CRLF is an error, not a wait.
        assert!(decode_hello(b"*111111111111111111111111", 4096).is_err());
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version(b"9.1.2"), Some((9, 1, 2)));
        assert_eq!(parse_version(b"8"), Some((8, 0, 0)));
        assert_eq!(parse_version(b"8.4.0-rc1"), Some((8, 4, 0)));
        assert_eq!(parse_version(b"x.1"), None);
        assert_eq!(parse_version(b"70000.1"), None);
    }
}
