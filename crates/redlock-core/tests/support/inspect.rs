//! An inspection's reads of the shared kinds' keys as bytes (lock/inspect.rs): what every
//! node is sent after `GET` and `PTTL` of the resource, and its answers when it holds none
//! of those keys.

/// The bytes of the shared kinds' reads of `resource`: `TIME`, `ZREVRANGE` and `ZCARD` of
/// the readers, `GET` and `PTTL` of the waiting mark, the same two of the permits, `GET` of
/// the permits' limit.
pub(crate) fn shared_reads(resource: &str) -> Vec<u8> {
    let key = |suffix: &str| format!("{resource}{suffix}");
    let (readers, mark, permits) = (key(":readers"), key(":writer-waiting"), key(":permits"));
    let limit = key(":permits:limit");
    let cap = (redlock_core::MAX_INSPECTED_HOLDERS - 1).to_string();
    let commands: [Vec<&str>; 8] = [
        vec!["TIME"],
        vec!["ZREVRANGE", &readers, "0", &cap, "WITHSCORES"],
        vec!["ZCARD", &readers],
        vec!["GET", &mark],
        vec!["PTTL", &mark],
        vec!["ZREVRANGE", &permits, "0", &cap, "WITHSCORES"],
        vec!["ZCARD", &permits],
        vec!["GET", &limit],
    ];
    let mut out = String::new();
    for args in commands {
        out += &format!("*{}\r\n", args.len());
        for arg in args {
            out += &format!("${}\r\n{arg}\r\n", arg.len());
        }
    }
    out.into_bytes()
}

/// A node's answers to [`shared_reads`] when it holds none of the keys: its clock
/// ([`NODE_SECS`](super::NODE_SECS)), no readers, no mark, no permits, no limit.
pub(crate) const NOTHING_SHARED: &[u8] =
    b"*2\r\n$10\r\n1795190400\r\n$1\r\n0\r\n*0\r\n:0\r\n$-1\r\n:-2\r\n*0\r\n:0\r\n$-1\r\n";
