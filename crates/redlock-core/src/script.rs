//! [`Script`]: a Lua script run on the nodes, named by its SHA1 (algorithm.md §6; the
//! scripts themselves are in command.rs and, for fencing, fencing.rs).

/// A Lua script we run on the nodes, with its SHA1 for `EVALSHA`.
#[derive(Debug, PartialEq, Eq)]
pub struct Script {
    /// The script's source, sent with `EVAL` after a `-NOSCRIPT` reply.
    pub body: &'static str,
    /// The lowercase hex SHA1 of `body`, sent with `EVALSHA`.
    pub sha1: &'static str,
}
