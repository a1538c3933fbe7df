//! Restart quarantine (docs/safety.md, "Node restarts"): a node that lost its keys must not
//! vote for an acquisition before every lock it held has expired. At each connection the
//! node says which process it is and how long it has run (identity.rs); this module decides,
//! from that and from what was remembered of the node, whether its acquisition votes count
//! as "no", and until when.
//!
//! The window is counted from the node's start, `now - uptime`. A node whose run id changed
//! since this client last saw it restarted, and is quarantined until `start + window`.
//!
//! A node this client had not seen before (a fresh client: every `redlock exec`, cron job
//! or new pod) and that started less than the window ago may have restarted empty just
//! before, or belong to a cluster started a moment ago; the handshakes tell them apart
//! ([`first_sight`]). Its acquisition votes count as "no" until they do: a node that
//! started more than a window after another node restarted (quarantined until `start +
//! window`); a node whose start is within a window of those of a quorum's other nodes is
//! part of a new cluster (trusted). With `quarantine_young_nodes`, any young node is
//! quarantined until `start + window`, whatever the others.
//!
//! The run id checks the uptime: a server counts its uptime on its wall clock, which can
//! be stepped, so a node whose run id changed since it was last seen answering, but whose
//! uptime says it started before that (impossible), is counted as started now. The last
//! reply read from the process is the sighting (health.rs, `NodeHealth::sighted`), not its
//! connection's `INFO`. A node that persists every write before answering loses no key in
//! a restart and is not quarantined.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::clock_rate::Finding;
use crate::identity::{Identity, Persistence};
use crate::time;

/// A node's acquisition votes count as "no" until `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quarantine {
    /// When the node's votes count again (the client's clock).
    pub(crate) until: Instant,
    /// Why.
    pub(crate) cause: QuarantineCause,
}

/// Why a node is quarantined ([`Event::NodeQuarantined`](crate::Event::NodeQuarantined)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuarantineCause {
    /// The node's `run_id` differs from the one it had when this client last connected: the
    /// process restarted, and may have lost its keys.
    Restarted,
    /// The node's process started less than the quarantine window ago
    /// (`uptime_in_seconds`); this client had not seen it before, or saw this very process
    /// before, when it was already young.
    Young,
    /// The clock check found the node's clock running at a rate outside the drift allowance
    /// ([`Event::ClockRate`](crate::Event::ClockRate); opt-in:
    /// [`ClockCheck::quarantine`](crate::ClockCheck::quarantine)).
    ClockRate,
    /// The clock check found the node's clock stepped
    /// ([`Event::ClockStep`](crate::Event::ClockStep); opt-in, as `ClockRate`).
    ClockStep,
    /// The node reported the same `run_id` as another node of the configuration: one
    /// server named twice (an alias, a unix socket and a port), which must not vote twice.
    /// It does not vote for acquisitions while its connection reports that run id.
    SameServer,
}

impl std::fmt::Display for QuarantineCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Restarted => "the node restarted (new run_id)",
            Self::Young => "the node started less than the quarantine window ago",
            Self::ClockRate => "the node's clock runs at a rate outside the drift allowance",
            Self::ClockStep => "the node's clock stepped",
            Self::SameServer => "the node is the same server as another node (the same run_id)",
        })
    }
}

/// Why a node was not quarantined ([`Event::QuarantineSkipped`](crate::Event::QuarantineSkipped)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuarantineSkip {
    /// It would have been quarantined for this cause, but it persists every write before
    /// answering (`appendonly yes`, `appendfsync always`), so a restart lost no key.
    Durable(QuarantineCause),
    /// It refused `INFO` (an ACL); the server's message. Nothing is known of its restarts:
    /// it votes as if the quarantine were off.
    InfoRefused(String),
    /// Its `INFO server` reply said neither `run_id` nor `uptime_in_seconds`.
    InfoUnreadable,
}

impl std::fmt::Display for QuarantineSkip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Durable(cause) => {
                write!(f, "{cause}, but it syncs every write (appendfsync always)")
            }
            Self::InfoRefused(message) => write!(f, "INFO was refused: {message}"),
            Self::InfoUnreadable => f.write_str("INFO said neither run_id nor uptime"),
        }
    }
}

/// The run id of the node process last seen, and when it was seen answering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) run_id: Bytes,
    pub(crate) at: Instant,
}

/// What to do with a node after its connection's identity was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Quarantine the node.
    Quarantine(Quarantine),
    /// A young node seen for the first time: its votes count as "no" (this quarantine,
    /// unannounced) until [`first_sight`] tells a restart from a new cluster.
    FirstSight(Quarantine),
    /// The node would be quarantined for `cause`, but it persists every write: not needed.
    Durable(QuarantineCause),
    /// Nothing to do: the node started more than the window ago.
    Clear,
    /// Nothing can be decided: the node refused `INFO` (its message), or said neither its run
    /// id nor its uptime (`None`).
    Unknown(Option<String>),
}

/// Decides at `now` what the node's identity `said` and `persistence` mean, given the
/// process last `seen` on it (`None` before its first readable `INFO`) and the quarantine
/// `window` (the longest ttl a lock on the node may have, plus its drift allowance);
/// `young_nodes`: whether a young node not known to have restarted is quarantined too.
pub(crate) fn decide(
    now: Instant,
    window: Duration,
    seen: Option<&Seen>,
    said: &Identity,
    persistence: Persistence,
    young_nodes: bool,
) -> Verdict {
    let (run_id, uptime) = match said {
        Identity::Refused(message) => return Verdict::Unknown(Some(message.clone())),
        Identity::Said { run_id, uptime } => (run_id.as_ref(), *uptime),
    };
    // A run id gone missing after one was seen counts as changed.
    let restarted = seen.is_some_and(|s| run_id != Some(&s.run_id));
    if !restarted && !young_nodes {
        // Not known to have restarted. Seen before as this process: trusted (its first
        // sight decided). Seen for the first time and young: the handshakes of the other
        // nodes decide (`first_sight`).
        let young = uptime
            .and_then(|u| now.checked_sub(u))
            .map(|s| time::add(s, window));
        return match (run_id, uptime, young) {
            (None, None, _) => Verdict::Unknown(None),
            (_, _, Some(until)) if seen.is_none() && until > now => {
                if persistence == Persistence::EveryWrite {
                    return Verdict::Durable(QuarantineCause::Young);
                }
                let cause = QuarantineCause::Young;
                Verdict::FirstSight(Quarantine { until, cause })
            }
            _ => Verdict::Clear,
        };
    }
    let started = match (uptime, seen) {
        // Rounded down by the server: the start this gives is at or after the true one, so
        // the window ends no earlier than it should.
        (Some(uptime), Some(seen)) if restarted => {
            let started = now.checked_sub(uptime);
            // The new process cannot have started before the old one was last seen: its
            // uptime (wall clock) was stepped. Count from now, the latest it can have been.
            started.filter(|&s| s > seen.at).unwrap_or(now)
        }
        (Some(uptime), _) => now.checked_sub(uptime).unwrap_or(now),
        (None, _) if restarted => now,
        (None, _) if run_id.is_none() => return Verdict::Unknown(None),
        // The same process as before, or a first one whose age is not known: nothing new.
        (None, _) => return Verdict::Clear,
    };
    let until = time::add(started, window);
    if until <= now {
        return Verdict::Clear;
    }
    let cause = if restarted {
        QuarantineCause::Restarted
    } else {
        QuarantineCause::Young
    };
    if persistence == Persistence::EveryWrite {
        return Verdict::Durable(cause);
    }
    Verdict::Quarantine(Quarantine { until, cause })
}

/// How a young node seen for the first time, started at `started`, compares with the starts
/// of the other nodes known so far (`peers`), given the quarantine `window` and the
/// `quorum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstSight {
    /// Another node started more than a window before it: it restarted (a cluster's nodes
    /// start within moments of each other), and may have lost a lock's key.
    Restarted,
    /// It started within a window of a quorum's other nodes: a cluster started together.
    NewCluster,
    /// Too few other nodes known yet to tell.
    Undecided,
}

/// How much later than the true one a start read from `uptime_in_seconds` may be: the
/// server rounds its uptime down to whole seconds.
const UPTIME_STEP: Duration = Duration::from_secs(1);

/// Tells a young node's restart from a new cluster by its peers' starts (module docs).
/// Starts are `now - uptime`, each up to [`UPTIME_STEP`] late: a peer counts as started
/// before the node only if it did whatever the rounding.
pub(crate) fn first_sight(
    started: Instant,
    peers: impl Iterator<Item = Instant>,
    window: Duration,
    quorum: usize,
) -> FirstSight {
    let mut together = 1;
    for peer in peers {
        if time::add(peer, window.saturating_add(UPTIME_STEP)) < started {
            return FirstSight::Restarted;
        }
        together += 1;
    }
    if together >= quorum {
        FirstSight::NewCluster
    } else {
        FirstSight::Undecided
    }
}

/// What the node is remembered as after its identity was read at `now`: this process, if it
/// said its run id (otherwise what was remembered before).
pub(crate) fn remember(now: Instant, seen: Option<Seen>, said: &Identity) -> Option<Seen> {
    match said {
        Identity::Said {
            run_id: Some(run_id),
            ..
        } => Some(Seen {
            run_id: run_id.clone(),
            at: now,
        }),
        _ => seen,
    }
}

/// The quarantine of a node whose clock the check found misbehaving at `now` (opt-in):
/// after a rate outside the allowance, two of the windows it was measured over, so that the
/// clock must behave through a whole window of the check before the node votes again (each
/// new report extends it); after a step, the restart quarantine's `window`, since any key
/// on the node may have expired early (or live on past its lock).
pub(crate) fn for_clock(now: Instant, window: Duration, finding: &Finding) -> Quarantine {
    let (cause, length) = match *finding {
        Finding::Rate { over, .. } => (QuarantineCause::ClockRate, over.saturating_mul(2)),
        Finding::Step { .. } => (QuarantineCause::ClockStep, window),
    };
    Quarantine {
        until: time::add(now, length),
        cause,
    }
}

/// The quarantine in force at `now`: the later of the one running and a new one (a
/// reconnection that finds the same young process does not shorten it).
pub(crate) fn merge(running: Option<Quarantine>, new: Quarantine) -> Quarantine {
    match running {
        Some(q) if q.until > new.until => q,
        _ => new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(10);

    fn said(run_id: Option<&'static str>, uptime: Option<u64>) -> Identity {
        Identity::Said {
            run_id: run_id.map(|r| Bytes::from_static(r.as_bytes())),
            uptime: uptime.map(Duration::from_secs),
        }
    }

    fn seen(run_id: &'static str, at: Instant) -> Seen {
        Seen {
            run_id: Bytes::from_static(run_id.as_bytes()),
            at,
        }
    }

    fn quarantined(until: Instant, cause: QuarantineCause) -> Verdict {
        Verdict::Quarantine(Quarantine { until, cause })
    }

    #[test]
    fn a_first_sight_of_a_young_node_waits_for_its_peers() {
        let t = crate::test_epoch::epoch() + Duration::from_secs(100);
        let s = Duration::from_secs;
        let young = said(Some("a"), Some(3));
        let until = t - s(3) + WINDOW;
        assert_eq!(
            decide(t, WINDOW, None, &young, Persistence::Lossy, false),
            Verdict::FirstSight(Quarantine {
                until,
                cause: QuarantineCause::Young
            })
        );
        assert_eq!(
            decide(t, WINDOW, None, &young, Persistence::EveryWrite, false),
            Verdict::Durable(QuarantineCause::Young)
        );
        // An old node on first sight: trusted.
        let old = said(Some("a"), Some(100));
        let v = decide(t, WINDOW, None, &old, Persistence::Lossy, false);
        assert_eq!(v, Verdict::Clear);
        // Its peers decide: one that started more than a window before it, a restart;
        // a quorum started together, a new cluster; fewer, not yet.
        let started = t - s(3);
        let peer = |ago: u64| t - s(ago);
        let sight = |peers: &[u64]| first_sight(started, peers.iter().map(|&a| peer(a)), WINDOW, 3);
        assert_eq!(sight(&[]), FirstSight::Undecided);
        assert_eq!(sight(&[4]), FirstSight::Undecided);
        assert_eq!(sight(&[4, 2]), FirstSight::NewCluster);
        assert_eq!(sight(&[4, 100]), FirstSight::Restarted);
        assert_eq!(sight(&[100]), FirstSight::Restarted);
        // A window and a second apart (uptimes are whole seconds, rounded down) is still
        // together; a moment more is not.
        let apart = WINDOW + s(1);
        let sight_at = |gap| first_sight(started, [started - gap].into_iter(), WINDOW, 2);
        assert_eq!(sight_at(apart), FirstSight::NewCluster);
        assert_eq!(
            sight_at(apart + Duration::from_millis(1)),
            FirstSight::Restarted
        );
    }

    #[test]
    fn a_young_node_not_known_to_have_restarted_is_trusted_unless_asked() {
        let t = crate::test_epoch::epoch() + Duration::from_secs(100);
        let lossy = Persistence::Lossy;
        let young = said(Some("a"), Some(3));
        let before = seen("a", t - Duration::from_secs(5));
        let v = decide(t, WINDOW, Some(&before), &young, lossy, false);
        assert_eq!(v, Verdict::Clear);
        // A restart (3 s ago, after it was last seen) still counts.
        let v = decide(
            t,
            WINDOW,
            Some(&before),
            &said(Some("b"), Some(3)),
            lossy,
            false,
        );
        let until = t - Duration::from_secs(3) + WINDOW;
        assert_eq!(v, quarantined(until, QuarantineCause::Restarted));
        // Nothing said: nothing known.
        let v = decide(t, WINDOW, None, &said(None, None), lossy, false);
        assert_eq!(v, Verdict::Unknown(None));
    }

    #[test]
    fn a_young_node_is_quarantined_until_the_window_has_passed_since_its_start() {
        let t = crate::test_epoch::epoch() + Duration::from_secs(100);
        let lossy = Persistence::Lossy;
        let s = Duration::from_secs;
        // First sight: young, or old enough.
        let v = decide(t, WINDOW, None, &said(Some("a"), Some(3)), lossy, true);
        assert_eq!(v, quarantined(t - s(3) + WINDOW, QuarantineCause::Young));
        let v = decide(t, WINDOW, None, &said(Some("a"), Some(10)), lossy, true);
        assert_eq!(v, Verdict::Clear);
        // The same process again: the same end.
        let before = seen("a", t - s(1));
        let v = decide(
            t,
            WINDOW,
            Some(&before),
            &said(Some("a"), Some(3)),
            lossy,
            true,
        );
        assert_eq!(v, quarantined(t - s(3) + WINDOW, QuarantineCause::Young));
        // Unknown persistence is not durable.
        let v = decide(
            t,
            WINDOW,
            None,
            &said(None, Some(0)),
            Persistence::Unknown,
            true,
        );
        assert_eq!(v, quarantined(t + WINDOW, QuarantineCause::Young));
    }

    #[test]
    fn a_new_run_id_is_a_restart_counted_from_its_uptime_if_that_is_possible() {
        let t = crate::test_epoch::epoch() + Duration::from_secs(100);
        let lossy = Persistence::Lossy;
        let s = Duration::from_secs;
        let old = seen("a", t - s(5));
        // Restarted 2 s ago, after it was last seen 5 s ago.
        let v = decide(
            t,
            WINDOW,
            Some(&old),
            &said(Some("b"), Some(2)),
            lossy,
            true,
        );
        assert_eq!(
            v,
            quarantined(t - s(2) + WINDOW, QuarantineCause::Restarted)
        );
        // An uptime that starts it before it was last seen: its wall clock was stepped.
        // Counted from now; without the run id it would end earlier, or not start.
        for (uptime, forgetful) in [
            (5, quarantined(t + s(5), QuarantineCause::Young)),
            (3600, Verdict::Clear),
        ] {
            let v = decide(
                t,
                WINDOW,
                Some(&old),
                &said(Some("b"), Some(uptime)),
                lossy,
                true,
            );
            assert_eq!(v, quarantined(t + WINDOW, QuarantineCause::Restarted));
            let v = decide(t, WINDOW, None, &said(Some("b"), Some(uptime)), lossy, true);
            assert_eq!(v, forgetful);
        }
        // No uptime, or no run id any more: from now.
        for identity in [said(Some("b"), None), said(None, None), said(None, Some(1))] {
            let v = decide(t, WINDOW, Some(&old), &identity, lossy, true);
            let until = match identity {
                Identity::Said {
                    uptime: Some(u), ..
                } => t - u + WINDOW,
                _ => t + WINDOW,
            };
            assert_eq!(
                v,
                quarantined(until, QuarantineCause::Restarted),
                "{identity:?}"
            );
        }
        // A restart long after it was last seen, long enough ago: clear.
        let long_ago = seen("a", t - s(100));
        let v = decide(
            t,
            WINDOW,
            Some(&long_ago),
            &said(Some("b"), Some(50)),
            lossy,
            true,
        );
        assert_eq!(v, Verdict::Clear);
    }

    #[test]
    fn durable_nodes_and_silent_ones_are_not_quarantined() {
        let t = crate::test_epoch::epoch() + Duration::from_secs(100);
        let every = Persistence::EveryWrite;
        let old = seen("a", t - Duration::from_secs(5));
        let v = decide(
            t,
            WINDOW,
            Some(&old),
            &said(Some("b"), Some(1)),
            every,
            true,
        );
        assert_eq!(v, Verdict::Durable(QuarantineCause::Restarted));
        let v = decide(t, WINDOW, None, &said(Some("b"), Some(1)), every, true);
        assert_eq!(v, Verdict::Durable(QuarantineCause::Young));
        let refused = Identity::Refused("NOPERM".into());
        let v = decide(t, WINDOW, Some(&old), &refused, Persistence::Lossy, true);
        assert_eq!(v, Verdict::Unknown(Some("NOPERM".into())));
        let v = decide(t, WINDOW, None, &said(None, None), Persistence::Lossy, true);
        assert_eq!(v, Verdict::Unknown(None));
        // A run id without uptime on first sight: remembered, nothing decided.
        let v = decide(
            t,
            WINDOW,
            None,
            &said(Some("a"), None),
            Persistence::Lossy,
            true,
        );
        assert_eq!(v, Verdict::Clear);
    }

    #[test]
    fn an_uptime_beyond_the_clients_clock_never_panics() {
        let t = crate::test_epoch::epoch();
        // Whether the platform's `Instant` reaches that far back or not, no panic: a start
        // it cannot hold is counted as now.
        let v = decide(
            t,
            WINDOW,
            None,
            &said(Some("a"), Some(1 << 39)),
            Persistence::Lossy,
            true,
        );
        assert!(
            matches!(v, Verdict::Clear | Verdict::Quarantine(_)),
            "{v:?}"
        );
        let v = decide(
            t,
            Duration::MAX,
            None,
            &said(Some("a"), Some(1)),
            Persistence::Lossy,
            true,
        );
        assert!(matches!(v, Verdict::Quarantine(q) if q.until > t));
    }

    #[test]
    fn remembering_and_merging() {
        let t = crate::test_epoch::epoch();
        let old = Some(seen("a", t));
        let later = t + Duration::from_secs(1);
        assert_eq!(
            remember(later, old.clone(), &said(Some("b"), None)),
            Some(seen("b", later))
        );
        assert_eq!(remember(later, old.clone(), &said(None, Some(1))), old);
        let q = |s: u64| Quarantine {
            until: t + Duration::from_secs(s),
            cause: QuarantineCause::Young,
        };
        assert_eq!(merge(Some(q(5)), q(3)), q(5));
        assert_eq!(merge(Some(q(3)), q(5)), q(5));
        assert_eq!(merge(None, q(3)), q(3));
    }
}
