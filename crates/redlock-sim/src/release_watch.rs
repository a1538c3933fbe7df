//! The release watch: schedules, for each explicit release, a look at every node once the
//! release's deadline has passed, and records what [`Linger`] describes (the property and
//! what "reachable" means are in `linger.rs`). What a release must have removed depends on
//! the lock's kind (docs/kinds.md, "Keys of a resource"): the key of a mutex, every key of
//! a multi-lock's set, a writer's key and the waiting mark it may have left where a node
//! refused it, a reader's slot in `R:readers`, a permit holder's in `R:permits`.

use std::time::Instant;

use bytes::Bytes;
use redlock_core::{OpId, Resource, Token};

use crate::checker::OpRecord;
use crate::clock::SimTime;
use crate::event::Ev;
use crate::holds::HoldKind;
use crate::linger::Linger;
use crate::network::LinkState;
use crate::node::NodeState;
use crate::sim::Sim;

impl Sim {
    /// Schedules the check of an explicit release of `op` by client `c`, called at `now`
    /// on the client's clock, if the scenario asks for it.
    pub(crate) fn watch_release(&mut self, c: usize, op: OpId, now: Instant) {
        if self.scenario.release_linger.is_none() {
            return;
        }
        let timeout = self.scenario.config.release_timeout();
        let clock = self.clients[c].clock;
        let Some(local) = now.checked_add(timeout) else {
            return;
        };
        let deadline = clock.true_time_of(local);
        // The last request leaves by the deadline and arrives within the longest delay (and
        // the scenario's extra delay, for replies that slow links hold back).
        let arrival = self.net.knobs().latency_max.saturating_mul(2);
        let at =
            (deadline.saturating_add(arrival)).saturating_add(self.scenario.release_check_delay);
        self.schedule(
            at,
            Ev::ReleaseCheck {
                client: c,
                op,
                deadline,
            },
        );
    }

    /// The release of `op` by client `c` is past its `deadline`: its key must be gone from
    /// every node the client could reach.
    pub(crate) fn on_release_check(&mut self, c: usize, op: OpId, deadline: SimTime) {
        let Some(grace) = self.scenario.release_linger else {
            return;
        };
        let ops = self.checker.ops();
        let Some(at) = ops.iter().rposition(|r| r.client == c && r.op == op) else {
            return;
        };
        let record = &ops[at];
        // A hold handed over to a later call of the client (docs/design.md, "Local
        // queueing") is that call's key now: the release of the call that ends the chain is
        // checked, not this one.
        let handed = (ops[at + 1..].iter())
            .any(|r| r.client == c && record.stored.is_some() && r.stored == record.stored);
        if handed {
            return;
        }
        let (Some(stored), resource) = (record.stored.clone(), record.resource.clone()) else {
            return;
        };
        let left = Left::of(record);
        let since = SimTime::from_duration(deadline.since_start().saturating_sub(grace));
        for n in 0..self.nodes.len() {
            let link = self.net.link_ref(c, n);
            let reachable = self.nodes[n].state() == NodeState::Up
                && link.state == LinkState::Open
                && link.opened_at <= since;
            if reachable && self.left_on(n, &left, &stored) {
                let linger = Linger {
                    seed: self.scenario.seed,
                    client: c,
                    op,
                    resource: resource.clone(),
                    node: n,
                    deadline,
                    checked: self.now,
                };
                self.note(|| format!("linger: {linger}"));
                self.checker.lingers.push(linger);
            }
        }
    }
}

/// What a release of one lock must have removed from every node, by the lock's kind.
enum Left {
    /// Each of these string keys holding the lock's value: a mutex's one resource, a
    /// multi-lock's set, a writer's resource and its waiting mark (`R:writer-waiting`).
    Keys(Vec<Resource>),
    /// The lock's member in this sorted set, with a deadline still ahead: a reader's
    /// (`R:readers`) or a permit holder's (`R:permits`) slot.
    Slot(Bytes),
}

impl Left {
    /// What the release of the operation `record` must have removed.
    fn of(record: &OpRecord) -> Self {
        let suffixed = |suffix: &[u8]| {
            let mut key = record.resource.as_bytes().to_vec();
            key.extend_from_slice(suffix);
            Self::Slot(Bytes::from(key))
        };
        match record.kind {
            HoldKind::Reader => suffixed(b":readers"),
            HoldKind::Permit(_) => suffixed(b":permits"),
            HoldKind::Exclusive => {
                let set = std::iter::once(&record.resource).chain(&record.more);
                Self::Keys(set.cloned().collect())
            }
            HoldKind::Writer => {
                let mut mark = record.resource.as_bytes().to_vec();
                mark.extend_from_slice(b":writer-waiting");
                Self::Keys(vec![record.resource.clone(), Resource::from(mark)])
            }
        }
    }
}

impl Sim {
    /// Whether node `n` still holds what `left` names, for the lock whose value is `stored`.
    fn left_on(&mut self, n: usize, left: &Left, stored: &Token) -> bool {
        let node = &mut self.nodes[n];
        match left {
            Left::Keys(set) => (node.live_keys(self.now).iter()).any(|(_, key, value)| {
                value[..] == *stored.as_bytes() && set.iter().any(|r| key[..] == *r.as_bytes())
            }),
            Left::Slot(key) => node.holds_slot(self.now, key, stored.as_bytes()),
        }
    }
}
