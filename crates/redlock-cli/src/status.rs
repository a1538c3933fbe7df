//! `redlock status` and `redlock release`: an operator's look at one resource on every node,
//! and letting go of one holder on purpose. Each prints a per-node report, as text or JSON.

use std::fmt::Write as _;

use redlock_tokio::{Inspection, KeyState, NodeFault, NodeName, Redlock, ReleaseOutcome, Token};

use crate::cli::{ReleaseArgs, StatusArgs};
use crate::exit::{self, Exit};
use crate::json;
use crate::out::say;
use crate::progress::{never_expires, seconds};

mod shared;

/// Runs `redlock status`: exits 0 when at least a quorum of nodes answered, else as
/// [`unusable`] says (the report is printed either way).
pub(crate) async fn status(args: StatusArgs) -> Exit {
    let redlock = match crate::connect(&args.nodes, args.ttl) {
        Ok(redlock) => redlock,
        Err(exit) => return exit,
    };
    let seen = match redlock.inspect(args.resource.as_str()).await {
        Ok(seen) => seen,
        Err(e) => return Exit::lock_error("status", &e),
    };
    let names = redlock.config().node_names();
    if args.json {
        say!("{}", status_json(&seen, names));
    } else {
        crate::out::stdout(format_args!("{}", status_text(&seen, names)));
    }
    match unusable(&seen, names) {
        None => Exit::code(0),
        Some(exit) => exit,
    }
}

/// Why no lock on `seen`'s resource can be decided or had, as `exec` and `status` both say
/// it: the key holds something that is not a lock on so many nodes that no quorum is left
/// (a usage error: another program uses the name), or fewer than a quorum of nodes
/// answered (a node error). `None` when neither.
pub(crate) fn unusable(seen: &Inspection, names: &[NodeName]) -> Option<Exit> {
    if let Some(message) = not_a_lock(seen, names) {
        return Some(Exit::with(exit::USAGE, message));
    }
    unreachable(seen, names).map(|message| Exit::with(exit::NODE_ERROR, message))
}

/// `RESOURCE holds something that is not a lock on …` when the nodes whose key is of
/// another type leave too few for a quorum; `None` otherwise.
pub(crate) fn not_a_lock(seen: &Inspection, names: &[NodeName]) -> Option<String> {
    let nodes: Vec<String> = (seen.nodes.iter().zip(names))
        .filter(|(state, _)| is_not_a_lock(state))
        .map(|(_, name)| name.to_string())
        .collect();
    if seen.nodes.len() - nodes.len() >= seen.quorum {
        return None;
    }
    Some(format!(
        "{} holds something that is not a lock on {} (a key of another type: WRONGTYPE): \
         another program uses this key name; give the lock another name",
        String::from_utf8_lossy(seen.resource.as_bytes()),
        nodes.join(", ")
    ))
}

/// Whether the node found the key to be of another type than a lock's (a string).
fn is_not_a_lock(state: &KeyState) -> bool {
    matches!(
        state,
        KeyState::Failed(NodeFault::Server { message, .. }) if message.starts_with("WRONGTYPE")
    )
}

/// Why fewer than a quorum of nodes answered `seen`, naming each failed node and its
/// fault; `None` when a quorum answered. A node whose key is not a lock answered.
fn unreachable(seen: &Inspection, names: &[NodeName]) -> Option<String> {
    let answered = (seen.nodes.iter())
        .filter(|n| !matches!(n, KeyState::Failed(_)) || is_not_a_lock(n))
        .count();
    if answered >= seen.quorum {
        return None;
    }
    let mut message = format!(
        "only {answered} of {} nodes answered (a quorum is {})",
        seen.nodes.len(),
        seen.quorum
    );
    for (state, name) in seen.nodes.iter().zip(names) {
        if let KeyState::Failed(fault) = state
            && !is_not_a_lock(state)
        {
            let _ = write!(message, "; {name}: {fault}");
        }
    }
    Some(message)
}

/// Runs `redlock release --token T`: exits 0 if some node released, "not acquired" if the
/// token held nothing where a quorum answered, the node-error code if fewer answered.
pub(crate) async fn release(args: ReleaseArgs) -> Exit {
    let token = args.token.as_deref().unwrap_or_default();
    let token = match Token::new(token.to_owned()) {
        Ok(token) => token,
        Err(e) => return Exit::usage(format!("bad --token: {e}")),
    };
    let redlock: Redlock = match crate::connect(&args.nodes, DEFAULT_TTL) {
        Ok(redlock) => redlock,
        Err(exit) => return exit,
    };
    let nodes = match redlock.release_token(args.resource.as_str(), token).await {
        Ok(nodes) => nodes,
        Err(e) => return Exit::lock_error("release", &e),
    };
    let names = redlock.config().node_names();
    if args.json {
        let items: Vec<String> = (names.iter().zip(&nodes))
            .map(|(name, o)| release_json(name, o))
            .collect();
        let fields = [
            ("resource", json::string(&args.resource)),
            ("nodes", json::array(&items)),
        ];
        say!("{}", json::object(&fields));
    } else {
        for (name, outcome) in names.iter().zip(&nodes) {
            say!("{name}: {outcome}");
        }
    }
    release_exit(&nodes, redlock.config().quorum())
}

/// What a release's per-node report adds up to: released somewhere (0); nothing held the
/// token where a quorum answered (not acquired); or too few answered to know (node error).
fn release_exit(nodes: &[ReleaseOutcome], quorum: usize) -> Exit {
    let released = (nodes.iter())
        .filter(|o| **o == ReleaseOutcome::Released)
        .count();
    let answered = (nodes.iter())
        .filter(|o| !matches!(o, ReleaseOutcome::Failed(_)))
        .count();
    if released > 0 {
        Exit::code(0)
    } else if answered < quorum {
        let message = format!(
            "only {answered} of {} nodes answered (a quorum is {quorum}): whether the token \
             holds the lock is unknown; nothing released",
            nodes.len()
        );
        Exit::with(exit::NODE_ERROR, message)
    } else {
        let message = "the token held nothing; nothing released";
        Exit::with(exit::NOT_ACQUIRED, message)
    }
}

fn status_text(seen: &Inspection, names: &[NodeName]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "resource: {}",
        String::from_utf8_lossy(seen.resource.as_bytes())
    );
    for (name, node) in names.iter().zip(&seen.nodes) {
        let state = match node {
            KeyState::Free => "free".to_owned(),
            KeyState::Held { value, ttl } => format!(
                "held by {} ({})",
                String::from_utf8_lossy(value),
                ttl.map_or_else(|| "no expiry".into(), |t| format!("ttl {}", seconds(t)))
            ),
            KeyState::Failed(fault) if is_not_a_lock(node) => format!("not a lock: {fault}"),
            KeyState::Failed(fault) => format!("failed: {fault}"),
            _ => "unknown".to_owned(),
        };
        let _ = writeln!(out, "  {name}: {state}");
    }
    let n = seen.nodes.len();
    let _ = match &seen.holder {
        Some(holder) => writeln!(
            out,
            "quorum: {} of {n} nodes agree on {} (quorum {})",
            seen.agreeing,
            String::from_utf8_lossy(holder),
            seen.quorum
        ),
        None => writeln!(
            out,
            "quorum: none (at most {} of {n} nodes agree; quorum {})",
            seen.agreeing, seen.quorum
        ),
    };
    let _ = match (seen.holder.is_some(), seen.validity) {
        (true, _) if never_expires(seen) => writeln!(
            out,
            "validity: none known: the key has no expiry on a quorum (not set by a Redlock \
             client?)"
        ),
        (true, Some(v)) => writeln!(out, "validity: {}", seconds(v)),
        (true, None) => writeln!(out, "validity: none left"),
        (false, _) => writeln!(out, "validity: -"),
    };
    shared::text(&mut out, seen, names);
    out
}

fn status_json(seen: &Inspection, names: &[NodeName]) -> String {
    let nodes: Vec<String> = (names.iter().zip(&seen.nodes))
        .map(|(name, node)| node_json(name, node))
        .collect();
    let mut fields = vec![
        (
            "resource",
            json::bytes_or_null(Some(seen.resource.as_bytes())),
        ),
        ("quorum", seen.quorum.to_string()),
        ("agreeing", seen.agreeing.to_string()),
        ("holder", json::bytes_or_null(seen.holder.as_deref())),
        (
            "validity_ms",
            json::number_or_null(
                (seen.validity)
                    .filter(|_| !never_expires(seen))
                    .map(|v| v.as_millis()),
            ),
        ),
        ("no_expiry", never_expires(seen).to_string()),
        ("nodes", json::array(&nodes)),
    ];
    fields.extend(shared::json_fields(seen, names));
    json::object(&fields)
}

/// One node's string key (`R`, or `R:writer-waiting`) as JSON: free, held (token and
/// ttl), not a lock, or failed.
fn node_json(name: &NodeName, node: &KeyState) -> String {
    let node_name = ("node", json::string(&name.to_string()));
    match node {
        KeyState::Free => json::object(&[node_name, ("state", json::string("free"))]),
        KeyState::Held { value, ttl } => json::object(&[
            node_name,
            ("state", json::string("held")),
            ("token", json::bytes_or_null(Some(value))),
            ("ttl_ms", json::number_or_null(ttl.map(|t| t.as_millis()))),
        ]),
        KeyState::Failed(fault) => json::object(&[
            node_name,
            (
                "state",
                json::string(match is_not_a_lock(node) {
                    true => "not_a_lock",
                    false => "failed",
                }),
            ),
            ("error", json::string(&fault.to_string())),
        ]),
        _ => json::object(&[node_name, ("state", json::string("unknown"))]),
    }
}

fn release_json(name: &NodeName, outcome: &ReleaseOutcome) -> String {
    let result = match outcome {
        ReleaseOutcome::Released => "released",
        ReleaseOutcome::NotHeld => "not_held",
        ReleaseOutcome::AlreadyExpired => "already_expired",
        ReleaseOutcome::NotHeldOrExpired => "not_held_or_expired",
        ReleaseOutcome::Failed(_) => "failed",
        _ => "unknown",
    };
    json::object(&[
        ("node", json::string(&name.to_string())),
        ("result", json::string(result)),
        ("detail", json::string(&outcome.to_string())),
    ])
}

/// The ttl a release needs to build a configuration; nothing is locked with it.
const DEFAULT_TTL: std::time::Duration = std::time::Duration::from_secs(30);
