//! What each node's server is sent, so that scenarios expect the answers of the commands it
//! really runs: the core's table ([`NodeCommands::for_server`]) applied to the binary the
//! test kit started, and the server's own count of the commands it ran (`INFO
//! commandstats`) to check that table from the servers' side.

use redlock_core::{ExtendCommand, NodeCommands, ReleaseCommand, ServerFamily, ServerVersion};
use redlock_testkit::{Node, ServerBin, ServerKind};

use crate::ReleaseOutcome;

/// The commands the core picks for a node of `bin` (native commands on, `HELLO` allowed).
pub fn commands(bin: &ServerBin) -> NodeCommands {
    let family = match bin.kind() {
        ServerKind::Redis => ServerFamily::Redis,
        ServerKind::Valkey => ServerFamily::Valkey,
        _ => ServerFamily::Other,
    };
    let mut parts = bin
        .version()
        .split('.')
        .map(|p| p.parse::<u16>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    let version = (next(), next(), next());
    NodeCommands::for_server(ServerVersion { family, version })
}

/// The command a release sends to a node of `bin`, as the core names it in a refusal.
pub fn release_command(bin: &ServerBin) -> &'static str {
    match commands(bin).release {
        ReleaseCommand::DelIfEq => "DELIFEQ",
        ReleaseCommand::DelExIfEq => "DELEX",
        _ => "EVALSHA",
    }
}

/// The command an extension sends to a node of `bin`, as the core names it in a refusal.
pub fn extend_command(bin: &ServerBin) -> &'static str {
    match commands(bin).extend {
        ExtendCommand::SetIfEq => "SET",
        _ => "EVALSHA",
    }
}

/// True when a release on `bin` is a native compare-and-delete, which answers 0 alike for a
/// key of another token and a missing key.
pub fn native_release(bin: &ServerBin) -> bool {
    commands(bin).release != ReleaseCommand::Script
}

/// What a release reports for a node whose key holds another token: `NotHeld` from the
/// script, `NotHeldOrExpired` from a native command, which cannot tell the two apart.
pub fn not_held(bin: &ServerBin) -> ReleaseOutcome {
    if native_release(bin) {
        ReleaseOutcome::NotHeldOrExpired
    } else {
        ReleaseOutcome::NotHeld
    }
}

/// What a release reports for a node whose key is gone: `AlreadyExpired` from the script,
/// `NotHeldOrExpired` from a native command.
pub fn expired(bin: &ServerBin) -> ReleaseOutcome {
    if native_release(bin) {
        ReleaseOutcome::NotHeldOrExpired
    } else {
        ReleaseOutcome::AlreadyExpired
    }
}

/// How many times `node` ran `command` (lowercase, e.g. `delifeq`) since it started or its
/// last [`reset_stats`], by its `INFO commandstats`; 0 if it never did.
pub fn calls(node: &Node, command: &str) -> u64 {
    let info = node.command(&["INFO", "commandstats"]).expect("INFO");
    let info = info.as_str().expect("INFO is text");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|rest| {
            let digits = rest.split(',').next().unwrap_or_default();
            digits.trim().parse().expect("a call count")
        })
        .unwrap_or(0)
}

/// Zeroes `node`'s command counts (`CONFIG RESETSTAT`).
pub fn reset_stats(node: &Node) {
    let reply = node
        .command(&["CONFIG", "RESETSTAT"])
        .expect("CONFIG RESETSTAT");
    assert_eq!(reply, redlock_testkit::Reply::simple("OK"));
}
