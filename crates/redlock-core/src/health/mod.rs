//! Node health: what the restart quarantine and the clock check know of each node, and
//! whether its votes for acquisitions count (docs/safety.md, "Restart quarantine: the
//! client checks this assumption", "Restarts and lost writes", "Checking the clock rates").
//!
//! [`NodeHealth`] is one node's: the process last seen on it and when, its quarantine, a
//! young node's first sight and the votes held meanwhile, the same-server mark, its clock
//! check. [`Health`] is the room over all nodes that the client calls once per session
//! answer ([`Health::on_session`]): it holds the quarantine window (set when the largest
//! ttl changes, and from the nodes' wall clocks for a client that fences), decides with the
//! pure rules of quarantine.rs, and builds the events the application is told.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::clock_rate::{Finding, RateCheck};
use crate::config::Config;
use crate::fencing::{self, NodeClock};
use crate::id::{OpId, RequestId};
use crate::identity::{Identity, Persistence};
use crate::io::{Event, NodeFault};
use crate::quarantine::Verdict;
use crate::quarantine::{self, FirstSight, Quarantine, QuarantineCause, QuarantineSkip, Seen};
use crate::resp::Reply;
use crate::session::Learned;
use crate::time;

mod window;

/// How long ahead a quarantine for being the same server as another node is said to last:
/// it lasts while the connection reports that run id, re-checked at each connection.
pub(crate) const SAME_SERVER_FOR: Duration = Duration::from_secs(86_400);

/// A vote held while its node's first sight was undecided, now to be counted: the lock,
/// the request, the reply, and the veto of the node's quarantine.
#[derive(Debug)]
pub(crate) struct HeldVote {
    pub(crate) op: OpId,
    pub(crate) id: RequestId,
    pub(crate) reply: Reply,
    pub(crate) veto: Option<NodeFault>,
}

/// What the restart quarantine and the clock check know of one node.
#[derive(Debug)]
pub(crate) struct NodeHealth {
    /// Whether a young node not known to have restarted is quarantined too
    /// (`ConfigBuilder::quarantine_young_nodes`).
    quarantine_young: bool,
    /// Negative control: the run id is forgotten at each reconnection.
    forget_run_id: bool,
    /// Negative control: a node is sighted only when a connection's `INFO` is read.
    sighting_at_connection: bool,
    /// What the current connection's `INFO` said, until its `CONFIG GET` reply is read.
    said: Option<Identity>,
    /// The node process last seen (its run id) and when it last answered, across
    /// connections.
    seen: Option<Seen>,
    /// Whether `seen` is the process behind the current connection (its `INFO` was read on
    /// it): each reply read then is a sighting of that process.
    identified: bool,
    /// The node's acquisition votes count as "no" until this ends (kept across
    /// connections).
    quarantine: Option<Quarantine>,
    /// A young node's first sight, until the other nodes' starts tell a restart from a new
    /// cluster (quarantine.rs, `first_sight`): its votes count as "no" meanwhile.
    first_sight: Option<Quarantine>,
    /// When the node's process started, as its last `INFO` said (`now - uptime`).
    started: Option<Instant>,
    /// Another node (by index) whose connection reported the same run id as this one's:
    /// one server named twice; its votes for acquisitions do not count meanwhile.
    same_as: Option<usize>,
    /// Its replies to acquisition attempts while its first sight is undecided: counted,
    /// or vetoed, once its peers have told.
    held_votes: Vec<(OpId, RequestId, Reply)>,
    /// The check of the node's clock rate, if it is on (clock_rate.rs).
    rate_check: Option<RateCheck>,
    /// What the last `TIME` reply showed about the node's clock, until it is reported.
    clock_finding: Option<Finding>,
    /// The last `TIME` reading on any connection (kept across them): how far the nodes'
    /// wall clocks are apart (fencing.rs, `wall_spread`).
    last_clock: Option<NodeClock>,
}

impl NodeHealth {
    /// A node not seen yet, checked as `config` asks.
    pub(crate) fn new(config: &Config) -> Self {
        Self {
            quarantine_young: (config.restart_quarantine).is_some_and(|q| q.young_nodes),
            #[cfg(feature = "_mutants")]
            forget_run_id: config.mutant == Some(crate::mutant::Mutant::ForgetRunId),
            #[cfg(not(feature = "_mutants"))]
            forget_run_id: false,
            #[cfg(feature = "_mutants")]
            sighting_at_connection: config.mutant
                == Some(crate::mutant::Mutant::SightingAtConnection),
            #[cfg(not(feature = "_mutants"))]
            sighting_at_connection: false,
            said: None,
            seen: None,
            identified: false,
            quarantine: None,
            first_sight: None,
            started: None,
            same_as: None,
            held_votes: Vec::new(),
            rate_check: (config.clock_check).map(|_| RateCheck::new(config.timing.drift_factor)),
            clock_finding: None,
            last_clock: None,
        }
    }

    /// Why the node's vote for an acquisition does not count at `now`, if it is quarantined.
    #[inline]
    pub(crate) fn quarantined(&self, now: Instant) -> Option<NodeFault> {
        let fault = |q: Quarantine| NodeFault::Quarantined {
            until: q.until,
            cause: q.cause,
        };
        match (self.quarantine, self.first_sight) {
            _ if self.same_as.is_some() => Some(NodeFault::Quarantined {
                until: time::add(now, SAME_SERVER_FOR),
                cause: QuarantineCause::SameServer,
            }),
            (Some(q), _) if q.until > now => Some(fault(q)),
            (_, Some(q)) if q.until > now => Some(fault(q)),
            _ => None,
        }
    }

    /// A reply to an acquisition request (`is_attempt` says whether it is one) at `now`: held
    /// while the node is a young node seen for the first time, whose grant waits until its
    /// peers tell a restart from a new cluster (quarantine.rs, `first_sight`); otherwise
    /// given back with the veto of the node's quarantine, to be counted.
    #[inline]
    pub(crate) fn vote(
        &mut self,
        now: Instant,
        (op, id): (OpId, RequestId),
        reply: Reply,
        is_attempt: impl FnOnce() -> bool,
    ) -> Option<(Reply, Option<NodeFault>)> {
        if self.first_sight_pending(now).is_some() && is_attempt() {
            self.held_votes.push((op, id, reply));
            return None;
        }
        Some((reply, self.quarantined(now)))
    }

    /// A reply was read in full at `now`: the process behind the connection was alive until
    /// then, so a process that claims later to have started before `now` has a stepped
    /// uptime (quarantine.rs: the last reply is the sighting, not the connection's `INFO`).
    #[inline]
    pub(crate) fn sighted(&mut self, now: Instant) {
        if self.identified
            && !self.sighting_at_connection
            && let Some(seen) = &mut self.seen
        {
            seen.at = seen.at.max(now);
        }
    }

    /// A new connection is up: who is behind it is not known until its `INFO` is read.
    pub(crate) fn connected(&mut self) {
        self.said = None;
        self.identified = false;
    }

    /// The connection ended: as [`connected`](Self::connected), and the clock check's
    /// samples of it end too.
    pub(crate) fn disconnected(&mut self) {
        if let Some(check) = &mut self.rate_check {
            check.disconnected();
        }
        self.said = None;
        self.identified = false;
    }

    /// Whether the clock-rate check wants a `TIME` sample at `now`.
    #[inline]
    pub(crate) fn wants_sample(&self, now: Instant) -> bool {
        (self.rate_check.as_ref()).is_some_and(|c| c.wants_sample(now))
    }

    /// A `TIME` was asked at `now`: the rate check, if on, samples its reply.
    pub(crate) fn asked(&mut self, now: Instant) {
        if let Some(check) = &mut self.rate_check {
            check.asked(now);
        }
    }

    /// The node's `TIME` said `clock` at `now`: the reading for the wall clocks' spread,
    /// and what the rate check finds in it.
    fn clock_read(&mut self, now: Instant, clock: Option<Duration>) {
        if let Some(since_epoch) = clock {
            self.last_clock = Some(NodeClock {
                since_epoch,
                read_at: now,
            });
        }
        if let Some(check) = &mut self.rate_check {
            self.clock_finding = check.answered(now, clock);
        }
    }

    /// The run id of the process behind the current connection, once its `INFO` was read.
    fn current_run_id(&self) -> Option<&Bytes> {
        self.seen
            .as_ref()
            .filter(|_| self.identified)
            .map(|s| &s.run_id)
    }

    /// The start of a young node seen for the first time whose peers have not told yet
    /// whether it restarted (quarantine.rs, `first_sight`).
    #[inline]
    fn first_sight_pending(&self, now: Instant) -> Option<Instant> {
        let q = self.first_sight.filter(|q| q.until > now)?;
        self.started.filter(|_| q.cause == QuarantineCause::Young)
    }

    /// The peers told what a young node's first sight means: `restart`, a quarantine (it
    /// restarted), or none (a new cluster).
    fn settle_first_sight(&mut self, restart: Option<Quarantine>) {
        self.first_sight = None;
        if let Some(q) = restart {
            self.quarantine = Some(quarantine::merge(self.quarantine.take(), q));
        }
    }

    /// Starts a quarantine `q`, or keeps the one running if it ends later; returns the one
    /// in force.
    fn quarantine_for(&mut self, q: Quarantine) -> Quarantine {
        let q = quarantine::merge(self.quarantine.take(), q);
        self.quarantine = Some(q);
        q
    }

    /// The restart quarantine's decision at `now`, from the `INFO` reply read before and
    /// the node's `persistence` (quarantine.rs); remembers the node's run id and starts a
    /// quarantine.
    fn decide(&mut self, now: Instant, window: Duration, persistence: Persistence) -> Verdict {
        let Some(said) = self.said.take() else {
            return Verdict::Unknown(None);
        };
        let seen = if self.forget_run_id {
            None
        } else {
            self.seen.take()
        };
        let young = self.quarantine_young;
        let verdict = quarantine::decide(now, window, seen.as_ref(), &said, persistence, young);
        if let Identity::Said {
            uptime: Some(uptime),
            ..
        } = said
        {
            self.started = now.checked_sub(uptime);
        }
        self.identified = matches!(
            said,
            Identity::Said {
                run_id: Some(_),
                ..
            }
        );
        self.seen = quarantine::remember(now, seen, &said);
        match verdict {
            Verdict::Quarantine(q) => Verdict::Quarantine(self.quarantine_for(q)),
            Verdict::FirstSight(q) => {
                self.first_sight = Some(q);
                Verdict::FirstSight(q)
            }
            other => other,
        }
    }

    /// The votes kept while the first sight was undecided, once it is (or has run out).
    fn take_held_votes(&mut self, now: Instant) -> Vec<(OpId, RequestId, Reply)> {
        if self.held_votes.is_empty() || self.first_sight_pending(now).is_some() {
            return Vec::new();
        }
        std::mem::take(&mut self.held_votes)
    }
}

/// The health of all nodes, as the client calls it: the restart quarantine's window, and
/// the decisions that compare nodes (the same server named twice, a young node's first
/// sight). The nodes' own health is reached through `AsMut<NodeHealth>`.
#[derive(Debug)]
pub(crate) struct Health {
    /// The largest ttl of any lock started, for the quarantine's window.
    largest_ttl: Duration,
    /// Whether any lock started was fenced: the window then also covers the fencing floor.
    fenced: bool,
    /// How far apart the nodes' wall clocks are, from their last `TIME` readings
    /// (fencing.rs, `wall_spread`; the same at any later time, each reading carried forward
    /// on our clock), kept while any lock or the configuration fences.
    spread: Duration,
    /// The restart quarantine's window (quarantine.rs), kept as the above change.
    window: Duration,
    /// The widest window so far: every restart quarantine lasts at least that long.
    widest: Duration,
    /// The nodes' wall clock in ms at an instant, from their last `TIME` readings: a waiter's
    /// ticket (waiters/mod.rs), kept here so that a lock started reads it without a sort.
    wall: Option<(Instant, u64)>,
}

impl Health {
    /// Before any lock and any clock reading.
    pub(crate) fn new(config: &Config) -> Self {
        let mut health = Self {
            largest_ttl: Duration::ZERO,
            fenced: false,
            spread: Duration::ZERO,
            window: Duration::ZERO,
            widest: Duration::ZERO,
            wall: None,
        };
        health.window = health.window(config);
        health.widest = health.window;
        health
    }

    /// The nodes' wall clock in ms at an instant, as their last `TIME` readings estimate it
    /// (`None` before any): a waiter's ticket (waiters/mod.rs).
    pub(crate) fn wall(&self) -> Option<(Instant, u64)> {
        self.wall
    }

    /// The session of node `i` (of `nodes`) answered at `now` with `learned` (session.rs):
    /// its clock, its identity, or its persistence, which decides its quarantine. Pushes
    /// what the application is told to `events`, and returns the votes held for a first
    /// sight that are now to be counted.
    pub(crate) fn on_session<N: AsMut<NodeHealth> + AsRef<NodeHealth>>(
        &mut self,
        now: Instant,
        config: &Config,
        (nodes, i): (&mut [N], usize),
        learned: Learned,
        events: &mut VecDeque<Event>,
    ) -> Vec<HeldVote> {
        match learned {
            Learned::Clock(clock) => {
                nodes[i].as_mut().clock_read(now, clock);
                self.wall = wall_ticket(nodes, now).map(|ms| (now, ms));
                self.report_clock(now, config, nodes[i].as_mut(), i, events);
                // After the report: its quarantine took the window as it was before. Only the
                // fenced window depends on the clocks.
                if self.fenced || config.fencing.by_default {
                    self.spread = spread(nodes, now);
                    self.set_window(config, nodes, now, events);
                }
            }
            Learned::Identity(said) => nodes[i].as_mut().said = Some(said),
            Learned::Persistence(persistence) => {
                let verdict = nodes[i].as_mut().decide(now, self.window, persistence);
                events.extend(verdict_event(config, i, verdict));
                find_same_servers(now, config, nodes, events);
                return self.settle_first_sights(now, config, nodes, events);
            }
            // The node's own (node/mod.rs).
            Learned::Hello(_) => {}
        }
        Vec::new()
    }

    /// Reports what the node's last `TIME` reply showed about its clock, if anything, and
    /// quarantines the node for it if asked to ([`ClockCheck::quarantine`](crate::ClockCheck)).
    fn report_clock(
        &self,
        now: Instant,
        config: &Config,
        health: &mut NodeHealth,
        i: usize,
        events: &mut VecDeque<Event>,
    ) {
        let Some(finding) = health.clock_finding.take() else {
            return;
        };
        let node = crate::round::name(&config.names, i);
        let quarantine = (config.clock_check)
            .is_some_and(|c| c.quarantine)
            .then(|| quarantine::for_clock(now, self.window, &finding));
        events.push_back(match finding {
            Finding::Rate { low, high, over } => Event::ClockRate {
                node: node.clone(),
                low,
                high,
                over,
            },
            Finding::Step { forward, by } => Event::ClockStep {
                node: node.clone(),
                forward,
                by,
            },
        });
        if let Some(q) = quarantine {
            let q = health.quarantine_for(q);
            events.push_back(Event::NodeQuarantined {
                node,
                until: q.until,
                cause: q.cause,
            });
        }
    }

    /// Decides each young node seen for the first time whose peers' starts now tell a
    /// restart (quarantined, and told) from a new cluster (trusted): quarantine.rs,
    /// `first_sight`. Returns the votes kept meanwhile, to count now as the nodes'
    /// quarantines say.
    fn settle_first_sights<N: AsMut<NodeHealth> + AsRef<NodeHealth>>(
        &self,
        now: Instant,
        config: &Config,
        nodes: &mut [N],
        events: &mut VecDeque<Event>,
    ) -> Vec<HeldVote> {
        let (window, quorum) = (self.window, config.quorum());
        for i in 0..nodes.len() {
            let Some(started) = nodes[i].as_ref().first_sight_pending(now) else {
                continue;
            };
            let peers = (nodes.iter().enumerate())
                .filter(|&(j, _)| j != i)
                .filter_map(|(_, n)| n.as_ref().started);
            let restart = match quarantine::first_sight(started, peers, window, quorum) {
                FirstSight::Undecided => continue,
                FirstSight::NewCluster => None,
                FirstSight::Restarted => Some(Quarantine {
                    until: time::add(started, window),
                    cause: QuarantineCause::Restarted,
                }),
            };
            nodes[i].as_mut().settle_first_sight(restart);
            if let Some(q) = restart {
                events.push_back(Event::NodeQuarantined {
                    node: crate::round::name(&config.names, i),
                    until: q.until,
                    cause: q.cause,
                });
            }
        }
        let mut held = Vec::new();
        for node in nodes.iter_mut() {
            let node = node.as_mut();
            for (op, id, reply) in node.take_held_votes(now) {
                let veto = node.quarantined(now);
                held.push(HeldVote {
                    op,
                    id,
                    reply,
                    veto,
                });
            }
        }
        held
    }
}

/// How far apart the `nodes`' wall clocks are, from their last `TIME` readings (fencing.rs,
/// `wall_spread`).
/// A waiter's ticket at `now` from the nodes' last `TIME` readings (waiters/mod.rs, `ticket`).
fn wall_ticket<N: AsRef<NodeHealth>>(nodes: &[N], now: Instant) -> Option<u64> {
    let readings = (nodes.iter()).filter_map(|n| n.as_ref().last_clock);
    crate::waiters::ticket(readings.map(|c| (c.since_epoch, c.read_at)), now)
}

fn spread<N: AsRef<NodeHealth>>(nodes: &[N], now: Instant) -> Duration {
    let readings = nodes.iter().filter_map(|n| n.as_ref().last_clock);
    fencing::wall_spread(readings, now)
}

/// Marks each node whose connection reported the run id of a node before it in the
/// configuration as the same server (it must not vote twice), and clears the mark of one
/// that no longer does; tells the application of each new mark.
fn find_same_servers<N: AsMut<NodeHealth> + AsRef<NodeHealth>>(
    now: Instant,
    config: &Config,
    nodes: &mut [N],
    events: &mut VecDeque<Event>,
) {
    for k in 1..nodes.len() {
        let same = nodes[k]
            .as_ref()
            .current_run_id()
            .and_then(|id| (0..k).find(|&j| nodes[j].as_ref().current_run_id() == Some(id)));
        let before = std::mem::replace(&mut nodes[k].as_mut().same_as, same);
        if same.is_some() && before.is_none() {
            events.push_back(Event::NodeQuarantined {
                node: crate::round::name(&config.names, k),
                until: time::add(now, SAME_SERVER_FOR),
                cause: QuarantineCause::SameServer,
            });
        }
    }
}

/// The restart quarantine's decision for node `i` (quarantine.rs), as the application is
/// told it: none for a clear node or a first sight (told once its peers decide).
fn verdict_event(config: &Config, i: usize, verdict: Verdict) -> Option<Event> {
    let node = crate::round::name(&config.names, i);
    Some(match verdict {
        Verdict::Quarantine(q) => Event::NodeQuarantined {
            node,
            until: q.until,
            cause: q.cause,
        },
        Verdict::Durable(cause) => Event::QuarantineSkipped {
            node,
            reason: QuarantineSkip::Durable(cause),
        },
        Verdict::Unknown(Some(message)) => Event::QuarantineSkipped {
            node,
            reason: QuarantineSkip::InfoRefused(message),
        },
        Verdict::Unknown(None) => Event::QuarantineSkipped {
            node,
            reason: QuarantineSkip::InfoUnreadable,
        },
        Verdict::Clear | Verdict::FirstSight(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node as the room sees it: its health alone.
    struct Node(NodeHealth);

    impl AsRef<NodeHealth> for Node {
        fn as_ref(&self) -> &NodeHealth {
            &self.0
        }
    }

    impl AsMut<NodeHealth> for Node {
        fn as_mut(&mut self) -> &mut NodeHealth {
            &mut self.0
        }
    }

    /// Node `i` of `nodes` answers `TIME` with `secs` at `now`.
    fn time(
        health: &mut Health,
        (config, now): (&Config, Instant),
        nodes: &mut [Node],
        i: usize,
        secs: u64,
    ) {
        let clock = Learned::Clock(Some(Duration::from_secs(secs)));
        let mut events = VecDeque::new();
        let held = health.on_session(now, config, (nodes, i), clock, &mut events);
        assert!(held.is_empty() && events.is_empty());
    }

    #[test]
    fn the_window_is_set_by_the_largest_ttl_and_for_fencing_by_the_clocks_spread() {
        let config = Config::builder(3).build().expect("default config");
        let now = crate::test_epoch::epoch();
        let mut nodes: Vec<Node> = (0..3).map(|_| Node(NodeHealth::new(&config))).collect();
        let mut health = Health::new(&config);
        assert_eq!(health.window, config.quarantine_window(Duration::ZERO));
        // Unfenced, the clocks' spread does not count.
        time(&mut health, (&config, now), &mut nodes, 0, 100);
        time(&mut health, (&config, now), &mut nodes, 1, 200);
        assert_eq!(health.window, config.quarantine_window(Duration::ZERO));
        let ttl = Duration::from_secs(40);
        health.lock_started(
            (&config, &mut nodes),
            now,
            (ttl, false),
            &mut VecDeque::new(),
        );
        assert_eq!(health.window, config.quarantine_window(ttl));
        // The first fenced lock: the floor must pass the node 100 s ahead.
        health.lock_started(
            (&config, &mut nodes),
            now,
            (Duration::from_secs(1), true),
            &mut VecDeque::new(),
        );
        let fenced = |spread| config.fence_window(Duration::from_secs(spread)).unwrap();
        assert!(fenced(100) > config.quarantine_window(ttl));
        assert_eq!(health.window, fenced(100));
        // And from then on each reading counts.
        time(&mut health, (&config, now), &mut nodes, 2, 400);
        assert_eq!(health.window, fenced(300));
    }

    #[test]
    fn a_wider_window_puts_back_a_restart_quarantine_the_narrower_one_ended() {
        // Short locks: their window is shorter than the fencing floor's.
        let ttl = Duration::from_millis(100);
        let config = Config::builder(3).ttl(ttl).build().expect("valid config");
        let now = crate::test_epoch::epoch();
        let mut nodes: Vec<Node> = (0..3).map(|_| Node(NodeHealth::new(&config))).collect();
        let mut health = Health::new(&config);
        let ms = Duration::from_millis;
        let restarted = Quarantine {
            until: now + ms(100),
            cause: QuarantineCause::Restarted,
        };
        nodes[1].0.quarantine = Some(restarted);
        let later = now + ms(200);
        assert!(nodes[1].0.quarantined(later).is_none());
        // The client's first fenced lock: the window now covers the fencing floor (over a
        // second), and so does the restart found before.
        let mut events = VecDeque::new();
        let first_fenced = (Duration::from_millis(100), true);
        health.lock_started((&config, &mut nodes), later, first_fenced, &mut events);
        let grown = health
            .window
            .saturating_sub(config.quarantine_window(Duration::ZERO));
        let until = restarted.until + grown;
        assert!(until > later + ms(500), "{grown:?}");
        assert_eq!(
            nodes[1].0.quarantined(later),
            Some(NodeFault::Quarantined {
                until,
                cause: QuarantineCause::Restarted
            })
        );
        assert_eq!(events.len(), 1);
        assert!(matches!(&events[0], Event::NodeQuarantined { until: u, .. } if *u == until));
        // The window grows no further: nothing is lengthened again.
        health.lock_started((&config, &mut nodes), later, first_fenced, &mut events);
        assert_eq!(events.len(), 1);
        assert!(nodes[0].0.quarantined(later).is_none());
    }
}
