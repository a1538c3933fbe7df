//! [`Script`]: a Lua script run on the nodes, sent as `EVALSHA` by its SHA1 and as `EVAL`
//! once after `-NOSCRIPT` (algorithm.md §12). The scripts themselves are in command.rs
//! (release, extension) and fencing.rs (the fenced acquire and its write-back).

/// A Lua script we run on the nodes, with its SHA1 for `EVALSHA`.
#[derive(Debug, PartialEq, Eq)]
pub struct Script {
    /// The script's source, sent with `EVAL` after a `-NOSCRIPT` reply.
    pub body: &'static str,
    /// The lowercase hex SHA1 of `body`, sent with `EVALSHA`.
    pub sha1: &'static str,
}
