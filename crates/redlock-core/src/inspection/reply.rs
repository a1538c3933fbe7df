//! An inspection's reads of the shared kinds' keys ([`SharedRead`]: `TIME`, `ZREVRANGE …
//! WITHSCORES`, `ZCARD`) and the reading of one node's answers (docs/kinds.md,
//! "Inspection"): the node's clock from `TIME`, a sorted set's live holders from
//! `ZREVRANGE` and `ZCARD`, the semaphore's k from `GET`. Every byte is
//! the node's: an answer that makes no sense is a [`NodeFault`] naming what was wrong, never
//! a panic. Which answers a node gave is `lock/inspect.rs`'s; what they add up to across
//! nodes, holders.rs's.

use std::time::Duration;

use bytes::Bytes;

use super::holders::{HolderSet, MAX_INSPECTED_HOLDERS, SlotHolder};
use crate::fault::NodeFault;
use crate::resp::Reply;

/// One read's answer: the node's reply, or why there is none.
pub(crate) type Answer<'a> = Result<&'a Reply, NodeFault>;

/// One of an inspection's plain reads beyond `GET` and `PTTL`, as a command
/// (command.rs, `CommandKind::Read`); its reply is a value, read by this file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SharedRead {
    /// `ZREVRANGE key 0 cap-1 WITHSCORES`: at most [`MAX_INSPECTED_HOLDERS`] members of a
    /// sorted set of holders, latest deadline first.
    Members,
    /// `ZCARD key`: how many members the set has.
    Count,
    /// `TIME`: the node's clock (no key).
    Time,
}

impl SharedRead {
    /// The command's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Members => "ZREVRANGE",
            Self::Count => "ZCARD",
            Self::Time => "TIME",
        }
    }

    /// Calls `f` with the command's arguments, name first, on `key`.
    pub(crate) fn with_args(self, key: &[u8], f: impl FnOnce(&[&[u8]])) {
        match self {
            Self::Members => {
                let last = (MAX_INSPECTED_HOLDERS - 1).to_string();
                f(&[b"ZREVRANGE", key, b"0", last.as_bytes(), b"WITHSCORES"]);
            }
            Self::Count => f(&[b"ZCARD", key]),
            Self::Time => f(&[b"TIME"]),
        }
    }

    /// Whether `reply` is of the type this read answers (an array, or a count for `ZCARD`):
    /// its contents are read by [`node_clock`] and [`holder_set`]; an error or another type
    /// is the node's fault.
    pub(crate) fn answers(self, reply: &Reply) -> bool {
        match self {
            Self::Members | Self::Time => matches!(reply, Reply::Array(_)),
            Self::Count => matches!(reply, Reply::Integer(_)),
        }
    }
}

/// The node's clock in milliseconds since the epoch, from its `TIME` answer, computed as
/// the kinds' scripts compute `now` (docs/kinds.md, "Node time"): seconds × 1000 + ⌊µs /
/// 1000⌋.
pub(crate) fn node_clock(time: Answer<'_>) -> Result<u64, NodeFault> {
    let not_a_clock = || {
        NodeFault::Protocol(
            "TIME answered something that is not a clock (seconds and microseconds)".into(),
        )
    };
    let [Reply::Bulk(secs), Reply::Bulk(micros)] = (match time? {
        Reply::Array(parts) => &parts[..],
        _ => return Err(not_a_clock()),
    }) else {
        return Err(not_a_clock());
    };
    let (secs, micros) = (decimal(secs), decimal(micros));
    match (secs, micros) {
        (Some(secs), Some(micros)) if micros < 1_000_000 => (secs.checked_mul(1000))
            .and_then(|ms| ms.checked_add(micros / 1000))
            .ok_or_else(not_a_clock),
        _ => Err(not_a_clock()),
    }
}

/// The live holders of the sorted set `set` (`readers`, `permits`) on a node, from its
/// answers to `ZREVRANGE set 0 cap-1 WITHSCORES` (`members`) and `ZCARD set` (`count`),
/// against its clock in ms (`clock`). A member whose score (its deadline, node ms) is at or
/// before the clock has expired and is left out.
pub(crate) fn holder_set(
    set: &'static str,
    clock: &Result<u64, NodeFault>,
    members: Answer<'_>,
    count: Answer<'_>,
) -> HolderSet {
    match read_set(set, clock, members, count) {
        Ok((holders, more)) => HolderSet::Read { holders, more },
        Err(fault) => HolderSet::Failed(fault),
    }
}

/// The semaphore's k from the node's `GET` of `R:permits:limit`: `None` without the key; a
/// value that is not a positive decimal is a fault (the scripts store k, at least 1).
pub(crate) fn permits_limit(value: Option<&Bytes>) -> Result<Option<u32>, NodeFault> {
    let Some(value) = value else {
        return Ok(None);
    };
    match decimal(value).and_then(|k| u32::try_from(k).ok()) {
        Some(k) if k > 0 => Ok(Some(k)),
        _ => Err(NodeFault::Protocol(format!(
            "the permits' limit holds \"{}\", not a number of permits",
            quoted(value)
        ))),
    }
}

/// [`holder_set`]'s holders and unread live members, or the fault.
fn read_set(
    set: &'static str,
    clock: &Result<u64, NodeFault>,
    members: Answer<'_>,
    count: Answer<'_>,
) -> Result<(Vec<SlotHolder>, u64), NodeFault> {
    let now = i128::from(clock.clone()?);
    let pairs = member_pairs(set, members?)?;
    let count = match count? {
        Reply::Integer(n) if *n >= 0 => n.unsigned_abs(),
        _ => return Err(protocol(format!("ZCARD of the {set} answered no count"))),
    };
    let mut holders = Vec::with_capacity(pairs.len());
    let mut last_expired = false;
    for (token, score) in &pairs {
        let deadline = deadline_ms(score).ok_or_else(|| {
            protocol(format!(
                "ZREVRANGE of the {set} answered a score that is not a deadline"
            ))
        })?;
        let left = deadline.saturating_sub(now);
        last_expired = left <= 0;
        if !last_expired {
            holders.push(SlotHolder {
                token: Bytes::clone(token),
                remaining: Duration::from_millis(u64::try_from(left).unwrap_or(u64::MAX)),
            });
        }
    }
    // Read latest deadline first: past an expired member, every unread one expired too.
    let read = u64::try_from(pairs.len()).unwrap_or(u64::MAX);
    let more = if last_expired {
        0
    } else {
        count.saturating_sub(read)
    };
    Ok((holders, more))
}

/// The (member, score) pairs of a `ZREVRANGE … WITHSCORES` answer: a flat array of member
/// and score (RESP2), or an array of two-element arrays (RESP3); at most
/// [`MAX_INSPECTED_HOLDERS`] of them, as asked.
fn member_pairs<'a>(set: &str, reply: &'a Reply) -> Result<Vec<(&'a Bytes, &'a Bytes)>, NodeFault> {
    let malformed = || protocol(format!("ZREVRANGE of the {set} answered no member list"));
    let Reply::Array(items) = reply else {
        return Err(malformed());
    };
    let nested = matches!(items.first(), Some(Reply::Array(_)));
    let pairs: Vec<&[Reply]> = match nested {
        true => (items.iter())
            .map(|item| match item {
                Reply::Array(pair) => Ok(&pair[..]),
                _ => Err(malformed()),
            })
            .collect::<Result<_, _>>()?,
        false if items.len() % 2 == 0 => items.chunks(2).collect(),
        false => return Err(malformed()),
    };
    if pairs.len() > MAX_INSPECTED_HOLDERS {
        return Err(protocol(format!(
            "ZREVRANGE of the {set} answered {} members, more than the {MAX_INSPECTED_HOLDERS} asked",
            pairs.len()
        )));
    }
    (pairs.into_iter())
        .map(|pair| match pair {
            [Reply::Bulk(member), Reply::Bulk(score)] => Ok((member, score)),
            _ => Err(malformed()),
        })
        .collect()
}

/// A score as a deadline in node ms: an integer, or a finite decimal (rounded down); `-inf`
/// is long past. `None` for anything else (text, NaN, `+inf`: no deadline a lock sets).
fn deadline_ms(score: &[u8]) -> Option<i128> {
    let text = std::str::from_utf8(score).ok()?;
    if let Ok(ms) = text.parse::<i64>() {
        return Some(i128::from(ms));
    }
    let ms = text.parse::<f64>().ok()?;
    match ms {
        _ if ms.is_nan() || ms == f64::INFINITY => None,
        // `as` saturates: -inf and anything below i128's range are long past.
        _ => Some(ms.floor() as i128),
    }
}

/// An unsigned decimal of at most 19 digits (no sign, no space), as a number.
fn decimal(bytes: &[u8]) -> Option<u64> {
    match bytes.len() {
        1..=19 if bytes.iter().all(u8::is_ascii_digit) => {
            std::str::from_utf8(bytes).ok()?.parse().ok()
        }
        _ => None,
    }
}

/// The start of a value the node sent, for a fault's message: escaped, at most 32 bytes.
fn quoted(value: &[u8]) -> String {
    let shown = &value[..value.len().min(32)];
    let more = if value.len() > 32 { "…" } else { "" };
    format!("{}{more}", shown.escape_ascii())
}

fn protocol(message: String) -> NodeFault {
    NodeFault::Protocol(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn time(secs: &str, micros: &str) -> Reply {
        Reply::Array(vec![bulk(secs), bulk(micros)])
    }

    #[test]
    fn the_node_clock_is_read_as_the_scripts_read_it() {
        assert_eq!(
            node_clock(Ok(&time("1795190400", "999999"))),
            Ok(1_795_190_400_999)
        );
        for bad in [
            time("-1", "0"),
            time("1", "1000000"),
            time("x", "0"),
            time("99999999999999999", "0"),
            Reply::Array(vec![bulk("1")]),
            Reply::Integer(5),
        ] {
            assert!(
                matches!(node_clock(Ok(&bad)), Err(NodeFault::Protocol(_))),
                "{bad:?}"
            );
        }
        assert_eq!(node_clock(Err(NodeFault::Timeout)), Err(NodeFault::Timeout));
    }

    #[test]
    fn live_members_are_holders_and_expired_ones_nothing() {
        let flat = Reply::Array(vec![
            bulk("a"),
            bulk("1500"),
            bulk("b"),
            bulk("999.5"),
            bulk("c"),
            bulk("-inf"),
        ]);
        let set = holder_set("readers", &Ok(1000), Ok(&flat), Ok(&Reply::Integer(3)));
        let HolderSet::Read { holders, more } = set else {
            panic!("{set:?}");
        };
        assert_eq!(holders.len(), 1);
        assert_eq!(
            (&holders[0].token[..], holders[0].remaining),
            (&b"a"[..], Duration::from_millis(500))
        );
        assert_eq!(more, 0);
        // RESP3 pairs, and members left unread beyond a live last one.
        let pairs = Reply::Array(vec![Reply::Array(vec![bulk("a"), bulk("2000")])]);
        let set = holder_set("permits", &Ok(1000), Ok(&pairs), Ok(&Reply::Integer(7)));
        assert!(matches!(set, HolderSet::Read { ref holders, more: 6 } if holders.len() == 1));
    }

    #[test]
    fn nonsense_is_the_nodes_fault_naming_the_cause() {
        let clock = Ok(1000);
        let zero = Reply::Integer(0);
        let fails = |members: Reply, count: &Reply| match holder_set(
            "readers",
            &clock,
            Ok(&members),
            Ok(count),
        ) {
            HolderSet::Failed(NodeFault::Protocol(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(
            fails(Reply::Array(vec![bulk("a"), bulk("soon")]), &zero).contains("not a deadline")
        );
        assert!(
            fails(Reply::Array(vec![bulk("a"), bulk("inf")]), &zero).contains("not a deadline")
        );
        assert!(
            fails(Reply::Array(vec![bulk("a"), bulk("nan")]), &zero).contains("not a deadline")
        );
        assert!(fails(Reply::Array(vec![bulk("a")]), &zero).contains("no member list"));
        assert!(
            fails(Reply::Array(vec![bulk("a"), Reply::Integer(5)]), &zero)
                .contains("no member list")
        );
        assert!(fails(Reply::Integer(1), &zero).contains("no member list"));
        assert!(fails(Reply::Array(vec![]), &Reply::Integer(-1)).contains("no count"));
        let many: Vec<Reply> = (0..=MAX_INSPECTED_HOLDERS)
            .flat_map(|i| [bulk(&i.to_string()), bulk("5000")])
            .collect();
        assert!(fails(Reply::Array(many), &zero).contains("more than the 100 asked"));
        // No clock: the set cannot be read either.
        let set = holder_set(
            "readers",
            &Err(NodeFault::Timeout),
            Ok(&Reply::Array(vec![])),
            Ok(&zero),
        );
        assert_eq!(set, HolderSet::Failed(NodeFault::Timeout));
    }

    #[test]
    fn the_limit_is_a_positive_number_or_a_fault() {
        assert_eq!(permits_limit(None), Ok(None));
        assert_eq!(permits_limit(Some(&Bytes::from_static(b"3"))), Ok(Some(3)));
        for bad in [&b"0"[..], b"-2", b"x", b"99999999999", b""] {
            assert!(
                permits_limit(Some(&Bytes::copy_from_slice(bad))).is_err(),
                "{bad:?}"
            );
        }
        let long = Bytes::from(vec![b'\n'; 40]);
        let Err(NodeFault::Protocol(message)) = permits_limit(Some(&long)) else {
            panic!("a fault");
        };
        assert!(
            message.contains('…') && !message.contains('\n'),
            "{message}"
        );
    }
}
