//! What a node says about itself at connect, for the restart quarantine (quarantine.rs):
//! which process it is and how long it has run (`INFO server`: `run_id`,
//! `uptime_in_seconds`), and whether it persists every write before answering
//! (`CONFIG GET append*`: `appendonly`, `appendfsync`).
//!
//! Everything here comes from the network: a reply of any shape decodes to "not said", never
//! to a panic, and a refusal (an ACL that denies `INFO` or `CONFIG`) is kept as such.

use std::time::Duration;

use bytes::Bytes;

use crate::resp::{self, ProtocolError, Reply};
use crate::session::decode;

/// The largest `INFO server` or `CONFIG GET` reply read (a Redis 7 `INFO server` is about
/// 1.5 KB), whatever [`max_reply_size`](crate::ConfigBuilder::max_reply_size) says: the
/// handshake must not fail on a node because lock replies are capped small. The read
/// buffer cap still applies.
pub(crate) const MAX_IDENTITY_REPLY: usize = 64 * 1024;

/// The smallest [`max_read_buffer`](crate::ConfigBuilder::max_read_buffer) the restart
/// quarantine accepts: an `INFO server` reply that arrives in parts is buffered whole.
pub(crate) const MIN_READ_BUFFER: usize = 16 * 1024;

/// A `run_id` longer than this is not one (Redis and Valkey send 40 hex digits).
const MAX_RUN_ID: usize = 64;

/// What `INFO server` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    /// The node answered; either field may be missing or unreadable.
    Said {
        /// The node process's random id, new at each start.
        run_id: Option<Bytes>,
        /// How long the process has run (whole seconds, rounded down by the server).
        uptime: Option<Duration>,
    },
    /// The node refused `INFO` (an ACL, a proxy); the server's message.
    Refused(String),
}

/// What `CONFIG GET append*` said about persistence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// `appendonly yes` and `appendfsync always`: every write is on disk before its reply,
    /// so a restart loses no key this client was told was set.
    EveryWrite,
    /// Anything else: a restart may lose keys.
    Lossy,
    /// Not known: `CONFIG` refused (an ACL, a managed service) or the reply unreadable.
    Unknown,
}

/// The `INFO server` command.
pub(crate) const INFO_SERVER: [&[u8]; 2] = [b"INFO", b"server"];

/// The `CONFIG GET` command: a pattern, so that a server before Redis 7 (one parameter per
/// `CONFIG GET`) answers both `appendonly` and `appendfsync` in one reply.
pub(crate) const CONFIG_GET_APPEND: [&[u8]; 3] = [b"CONFIG", b"GET", b"append*"];

/// Decodes an `INFO server` reply: `(identity, length)`, or `None` if incomplete.
pub(crate) fn decode_info(
    buf: &[u8],
    _max_reply: usize,
) -> Result<Option<(Identity, usize)>, ProtocolError> {
    let Some((reply, len)) = resp::decode(buf, MAX_IDENTITY_REPLY)? else {
        return Ok(None);
    };
    let identity = match reply {
        Reply::Bulk(text) | Reply::Status(text) => parse_info(&text),
        Reply::Error(message) => Identity::Refused(String::from_utf8_lossy(&message).into()),
        _ => Identity::Said {
            run_id: None,
            uptime: None,
        },
    };
    Ok(Some((identity, len)))
}

/// The `run_id` and `uptime_in_seconds` lines of an `INFO` text (`field:value`, lines ending
/// in `\r\n`; `#` lines are section titles).
fn parse_info(text: &[u8]) -> Identity {
    let mut run_id = None;
    let mut uptime = None;
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (field, value) = (&line[..colon], &line[colon + 1..]);
        match field {
            b"run_id" if !value.is_empty() && value.len() <= MAX_RUN_ID => {
                run_id = Some(Bytes::copy_from_slice(value));
            }
            b"uptime_in_seconds" => {
                uptime = (std::str::from_utf8(value).ok())
                    .and_then(|v| v.parse::<u64>().ok())
                    // Past any real uptime (and far from `Duration`'s limit): not one.
                    .filter(|&s| s < 1 << 40)
                    .map(Duration::from_secs);
            }
            _ => {}
        }
    }
    Identity::Said { run_id, uptime }
}

/// Decodes a `CONFIG GET append*` reply (names and values, as an array in RESP2 or a map in
/// RESP3): `(persistence, length)`, or `None` if incomplete.
pub(crate) fn decode_config(
    buf: &[u8],
    _max_reply: usize,
) -> Result<Option<(Persistence, usize)>, ProtocolError> {
    let max = MAX_IDENTITY_REPLY;
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    if kind != b'*' && kind != b'%' {
        // An error (refused), or anything else: not known.
        return Ok(resp::decode(buf, max)?.map(|(_, len)| (Persistence::Unknown, len)));
    }
    let Some((count, mut pos)) = resp::aggregate_header(buf, 0, max)? else {
        return Ok(None);
    };
    let count = if kind == b'%' {
        count.saturating_mul(2)
    } else {
        count
    };
    let (mut aof, mut fsync) = (None, None);
    let mut field: Option<Bytes> = None;
    for index in 0..count {
        if pos > max {
            return Err(ProtocolError(format!("reply exceeds {max} bytes")));
        }
        let Some((value, next)) = decode::element(buf, pos, max)? else {
            return Ok(None);
        };
        pos = next;
        if index % 2 == 0 {
            field = value;
            continue;
        }
        let value = value.map(|v| v.to_ascii_lowercase());
        match field.as_deref() {
            Some(b"appendonly") => aof = value,
            Some(b"appendfsync") => fsync = value,
            _ => {}
        }
    }
    if pos > max {
        return Err(ProtocolError(format!("reply exceeds {max} bytes")));
    }
    let persistence = match (aof.as_deref(), fsync.as_deref()) {
        (Some(b"yes"), Some(b"always")) => Persistence::EveryWrite,
        (Some(_), Some(_)) => Persistence::Lossy,
        _ => Persistence::Unknown,
    };
    Ok(Some((persistence, pos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(text: &str) -> Identity {
        let wire = format!("${}\r\n{text}\r\n", text.len());
        let (identity, len) = decode_info(wire.as_bytes(), 64).unwrap().unwrap();
        assert_eq!(len, wire.len());
        identity
    }

    #[test]
    fn info_server_gives_run_id_and_uptime() {
        let text = "# Server\r\nredis_version:7.0.15\r\nrun_id:7f3a9c\r\n\
                    uptime_in_seconds:42\r\nuptime_in_days:0\r\n";
        assert_eq!(
            info(text),
            Identity::Said {
                run_id: Some(Bytes::from_static(b"7f3a9c")),
                uptime: Some(Duration::from_secs(42)),
            }
        );
        // RESP3's verbatim string reads the same; bare `\n` line ends too.
        let body = "txt:run_id:ab\nuptime_in_seconds:3\n";
        let wire = format!("={}\r\n{body}\r\n", body.len());
        let (identity, _) = decode_info(wire.as_bytes(), 64).unwrap().unwrap();
        assert_eq!(
            identity,
            Identity::Said {
                run_id: Some(Bytes::from_static(b"ab")),
                uptime: Some(Duration::from_secs(3)),
            }
        );
    }

    #[test]
    fn hostile_info_replies_say_nothing_and_never_panic() {
        let none = Identity::Said {
            run_id: None,
            uptime: None,
        };
        for text in [
            "",
            "uptime_in_seconds:-1\r\nrun_id:",
            "uptime_in_seconds:99999999999999999999999\r\n",
            "uptime_in_seconds:1e3\r\nrun_id\r\n",
            &format!("run_id:{}\r\n", "a".repeat(65)),
            ":::\r\n\r\n\n\r",
        ] {
            assert_eq!(info(text), none, "{text:?}");
        }
        let (refused, _) = decode_info(b"-NOPERM no info for you\r\n", 64)
            .unwrap()
            .unwrap();
        assert_eq!(refused, Identity::Refused("NOPERM no info for you".into()));
        assert_eq!(decode_info(b":1\r\n", 64).unwrap().unwrap().0, none);
        assert_eq!(decode_info(b"$10\r\nrun_", 64).unwrap(), None);
        assert!(decode_info(b"*1\r\n:1\r\n", 64).is_err());
    }

    #[test]
    fn config_get_says_whether_every_write_is_synced() {
        let cases: [(&[u8], Persistence); 6] = [
            (
                b"*4\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n",
                Persistence::EveryWrite,
            ),
            (
                b"%2\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n",
                Persistence::EveryWrite,
            ),
            (
                b"*4\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n",
                Persistence::Lossy,
            ),
            (
                b"*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n",
                Persistence::Lossy,
            ),
            (b"*0\r\n", Persistence::Unknown),
            (b"-NOPERM no config\r\n", Persistence::Unknown),
        ];
        for (wire, expected) in cases {
            let (got, len) = decode_config(wire, 64).unwrap().unwrap();
            assert_eq!((got, len), (expected, wire.len()), "{wire:?}");
        }
        // Incomplete, nested and hostile shapes.
        assert_eq!(
            decode_config(b"*4\r\n$10\r\nappendonly\r\n", 64).unwrap(),
            None
        );
        let nested = b"*2\r\n*1\r\n:1\r\n$3\r\nyes\r\n";
        assert_eq!(
            decode_config(nested, 64).unwrap().unwrap().0,
            Persistence::Unknown
        );
        assert!(decode_config(b"*99999999999999\r\n", 64).is_err());
    }
}
