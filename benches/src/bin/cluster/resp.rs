//! Just enough RESP2 for the raw baseline: encode a command array into a buffer, and parse
//! the five reply types from the front of a buffer. It trusts the local benchmark nodes and
//! does none of the core's capping or fault mapping.

use std::fmt;

/// One reply, reduced to what the baseline looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `+OK`.
    Ok,
    /// Any other simple string.
    Status,
    /// `-...`, with its message.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$-1`.
    Nil,
    /// `$n` with its payload.
    Bulk(Vec<u8>),
}

/// Bytes that are not a reply this parser knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtocolError(pub(crate) &'static str);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad reply: {}", self.0)
    }
}

/// Appends `*N\r\n` and one `$len\r\narg\r\n` per argument.
pub(crate) fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    let len: usize = args.iter().map(|a| a.len() + 16).sum();
    out.reserve(len + 16);
    out.push(b'*');
    put_uint(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        put_uint(out, arg.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// The decimal digits of `n`, without allocating.
pub(crate) fn put_uint(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Parses one reply from the front of `buf`: `Ok(None)` if it is incomplete, else the reply
/// and how many bytes it took.
pub(crate) fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some(end) = line_end(buf) else {
        return Ok(None);
    };
    let line = &buf[1..end];
    let after = end + 2;
    let reply = match buf[0] {
        b'+' if line == b"OK" => Reply::Ok,
        b'+' => Reply::Status,
        b'-' => Reply::Error(String::from_utf8_lossy(line).into_owned()),
        b':' => Reply::Int(int(line)?),
        b'$' => {
            let len = int(line)?;
            if len < 0 {
                return Ok(Some((Reply::Nil, after)));
            }
            let len = usize::try_from(len).map_err(|_| ProtocolError("bulk length"))?;
            if buf.len() < after + len + 2 {
                return Ok(None);
            }
            let payload = buf[after..after + len].to_vec();
            return Ok(Some((Reply::Bulk(payload), after + len + 2)));
        }
        _ => return Err(ProtocolError("unexpected reply type")),
    };
    Ok(Some((reply, after)))
}

/// Index of the `\r` of the first `\r\n`, if the buffer holds one.
fn line_end(buf: &[u8]) -> Option<usize> {
    let nl = buf.iter().position(|&b| b == b'\n')?;
    (nl > 0 && buf[nl - 1] == b'\r').then_some(nl - 1)
}

fn int(digits: &[u8]) -> Result<i64, ProtocolError> {
    let (negative, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() || digits.len() > 18 {
        return Err(ProtocolError("integer"));
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(ProtocolError("integer"));
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Ok(if negative { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_a_set() {
        let mut out = Vec::new();
        encode(&mut out, &[b"SET", b"k", b"t", b"NX", b"PX", b"10000"]);
        assert_eq!(
            out,
            b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nt\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n"
        );
    }

    #[test]
    fn parses_each_reply_and_waits_for_partial_ones() {
        let buf = b"+OK\r\n$-1\r\n:1\r\n:-1\r\n-NOSCRIPT x\r\n$3\r\nabc\r\n+QUEUED\r\n";
        let mut at = 0;
        let mut seen = Vec::new();
        while let Some((reply, used)) = parse(&buf[at..]).unwrap() {
            seen.push(reply);
            at += used;
        }
        assert_eq!(at, buf.len());
        assert_eq!(
            seen,
            [
                Reply::Ok,
                Reply::Nil,
                Reply::Int(1),
                Reply::Int(-1),
                Reply::Error("NOSCRIPT x".into()),
                Reply::Bulk(b"abc".to_vec()),
                Reply::Status,
            ]
        );
        for cut in 0..buf.len() {
            // Any prefix parses to a whole first reply or to "incomplete", never an error.
            let first = parse(&buf[..cut]).unwrap();
            assert!(first.is_none() || first.unwrap().1 <= cut);
        }
        assert_eq!(parse(b"$3\r\nab").unwrap(), None);
        assert!(parse(b"*1\r\n").is_err());
    }
}
