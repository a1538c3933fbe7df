//! The shared kinds in `redlock status` (docs/kinds.md, "Inspection"): readers, a waiting
//! writer's mark, permit holders and the semaphore's k, per node and what a quorum agrees
//! on, as text or JSON. Only the sections that exist are printed, so a plain mutex's status
//! reads as it always did.

use std::fmt::Write as _;

use redlock_tokio::{Agreed, HolderSet, Inspection, KeyState, NodeName};

use crate::json;
use crate::progress::seconds;

/// Appends the sections that exist to the text report.
pub(super) fn text(out: &mut String, seen: &Inspection, names: &[NodeName]) {
    let shared = &seen.shared;
    let n = shared.nodes.len();
    if has_readers(seen) {
        let lines = shared.nodes.iter().map(|node| set_text(&node.readers));
        let agreed = agreed_text(&shared.readers, n);
        let summary = format!("readers on a quorum ({} of {n}): {agreed}", seen.quorum);
        section(out, "readers", names.iter().zip(lines), Some(summary));
    }
    if has_mark(seen) {
        let lines = (shared.nodes.iter()).map(|node| mark_text(&node.writer_waiting));
        let summary = shared.writer_waiting.as_ref().map(|mark| {
            let (token, on) = (token(&mark.token), mark.nodes);
            format!("writer waiting: {token} on {on} of {n} nodes (no new reader gets in there)")
        });
        section(out, "writer waiting", names.iter().zip(lines), summary);
    }
    if has_permits(seen) {
        let k = (shared.permits_limit).map_or("k unknown".to_owned(), |k| format!("k = {k}"));
        let lines = shared.nodes.iter().map(|node| set_text(&node.permits));
        let (q, agreed) = (shared.permits_quorum, agreed_text(&shared.permits, n));
        let summary = format!("permits on the semaphore's quorum ({q} of {n}): {agreed}");
        section(
            out,
            &format!("permits ({k})"),
            names.iter().zip(lines),
            Some(summary),
        );
    }
}

/// One section of the text report: its title, a line per node, and what the nodes add up
/// to, if anything.
fn section<'a>(
    out: &mut String,
    title: &str,
    nodes: impl Iterator<Item = (&'a NodeName, String)>,
    summary: Option<String>,
) {
    let _ = writeln!(out, "{title}:");
    for (name, line) in nodes {
        let _ = writeln!(out, "  {name}: {line}");
    }
    if let Some(summary) = summary {
        let _ = writeln!(out, "{summary}");
    }
}

/// The JSON fields of the sections that exist: `readers`, `writer_waiting`, `permits`.
pub(super) fn json_fields(seen: &Inspection, names: &[NodeName]) -> Vec<(&'static str, String)> {
    let shared = &seen.shared;
    let mut fields = Vec::new();
    if has_readers(seen) {
        let nodes: Vec<_> = (names.iter().zip(&shared.nodes))
            .map(|(name, node)| set_json(name, &node.readers))
            .collect();
        let section = [
            ("quorum", seen.quorum.to_string()),
            ("holders", agreed_json(&shared.readers)),
            ("nodes", json::array(&nodes)),
        ];
        fields.push(("readers", json::object(&section)));
    }
    if has_mark(seen) {
        let nodes: Vec<_> = (names.iter().zip(&shared.nodes))
            .map(|(name, node)| super::node_json(name, &node.writer_waiting))
            .collect();
        let mark = shared.writer_waiting.as_ref().map(one_agreed_json);
        let section = [
            ("mark", mark.unwrap_or_else(|| "null".into())),
            ("nodes", json::array(&nodes)),
        ];
        fields.push(("writer_waiting", json::object(&section)));
    }
    if has_permits(seen) {
        let nodes: Vec<_> = (names.iter().zip(&shared.nodes))
            .map(|(name, node)| set_json(name, &node.permits))
            .collect();
        let section = [
            (
                "limit",
                json::number_or_null(shared.permits_limit.map(u128::from)),
            ),
            ("quorum", shared.permits_quorum.to_string()),
            ("holders", agreed_json(&shared.permits)),
            ("nodes", json::array(&nodes)),
        ];
        fields.push(("permits", json::object(&section)));
    }
    fields
}

/// Whether any node holds a reader, or failed to say while it answered for the key `R` (a
/// node that failed altogether is reported once, on the key's line).
fn has_readers(seen: &Inspection) -> bool {
    let nodes = seen.shared.nodes.iter().zip(&seen.nodes);
    nodes
        .into_iter()
        .any(|(node, key)| shows(&node.readers, key))
}

/// Whether any node holds a waiting writer's mark.
fn has_mark(seen: &Inspection) -> bool {
    (seen.shared.nodes.iter()).any(|node| matches!(node.writer_waiting, KeyState::Held { .. }))
}

/// Whether any node holds a permit or the semaphore's k, or failed to say as for readers.
fn has_permits(seen: &Inspection) -> bool {
    let nodes = seen.shared.nodes.iter().zip(&seen.nodes);
    nodes
        .into_iter()
        .any(|(node, key)| node.permits_limit.is_some() || shows(&node.permits, key))
}

/// Whether a node's set is worth a line: it has holders, or it failed while the node's key
/// `R` was read.
fn shows(set: &HolderSet, key: &KeyState) -> bool {
    match set {
        HolderSet::Failed(_) => !matches!(key, KeyState::Failed(_)),
        set => !set.is_empty(),
    }
}

/// One node's set: its live holders, latest deadline first, with what is left of each.
fn set_text(set: &HolderSet) -> String {
    let (holders, more) = match set {
        HolderSet::Read { holders, more } => (holders, *more),
        HolderSet::Failed(fault) => return format!("failed: {fault}"),
        _ => return "unknown".to_owned(),
    };
    if holders.is_empty() && more == 0 {
        return "none".to_owned();
    }
    let mut text: Vec<String> = (holders.iter())
        .map(|h| format!("{} (ttl {})", token(&h.token), seconds(h.remaining)))
        .collect();
    if more > 0 {
        text.push(format!("and {more} more not read"));
    }
    text.join(", ")
}

/// One node's waiting mark.
fn mark_text(mark: &KeyState) -> String {
    match mark {
        KeyState::Free => "none".to_owned(),
        KeyState::Held { value, ttl } => format!(
            "{} ({})",
            token(value),
            ttl.map_or_else(|| "no expiry".into(), |t| format!("ttl {}", seconds(t)))
        ),
        KeyState::Failed(fault) => format!("failed: {fault}"),
        _ => "unknown".to_owned(),
    }
}

/// The holders a quorum agrees on, each with on how many nodes and its validity.
fn agreed_text(agreed: &[Agreed], n: usize) -> String {
    if agreed.is_empty() {
        return "none".to_owned();
    }
    let each = agreed.iter().map(|a| {
        let validity = a.validity.map_or("none left".to_owned(), seconds);
        format!(
            "{} on {} of {n} nodes (validity {validity})",
            token(&a.token),
            a.nodes
        )
    });
    each.collect::<Vec<_>>().join(", ")
}

fn set_json(name: &NodeName, set: &HolderSet) -> String {
    let node = ("node", json::string(&name.to_string()));
    match set {
        HolderSet::Read { holders, more } => {
            let holders: Vec<String> = (holders.iter())
                .map(|h| {
                    json::object(&[
                        ("token", json::bytes_or_null(Some(&h.token))),
                        ("ttl_ms", h.remaining.as_millis().to_string()),
                    ])
                })
                .collect();
            json::object(&[
                node,
                ("state", json::string("read")),
                ("holders", json::array(&holders)),
                ("more", more.to_string()),
            ])
        }
        HolderSet::Failed(fault) => json::object(&[
            node,
            ("state", json::string("failed")),
            ("error", json::string(&fault.to_string())),
        ]),
        _ => json::object(&[node, ("state", json::string("unknown"))]),
    }
}

fn agreed_json(agreed: &[Agreed]) -> String {
    json::array(&agreed.iter().map(one_agreed_json).collect::<Vec<_>>())
}

fn one_agreed_json(agreed: &Agreed) -> String {
    json::object(&[
        ("token", json::bytes_or_null(Some(&agreed.token))),
        ("nodes", agreed.nodes.to_string()),
        (
            "validity_ms",
            json::number_or_null(agreed.validity.map(|v| v.as_millis())),
        ),
    ])
}

/// A token as the report shows it (lossy UTF-8, as the exclusive holder's).
fn token(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
