//! The release watch: schedules, for each explicit release, a look at every node once the
//! release's deadline has passed, and records what [`Linger`] describes (the property and
//! what "reachable" means are in `linger.rs`).

use std::time::Instant;

use redlock_core::OpId;

use crate::clock::SimTime;
use crate::event::Ev;
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
        let Some(record) = (ops.iter().rev()).find(|r| r.client == c && r.op == op) else {
            return;
        };
        let (Some(stored), resource) = (record.stored.clone(), record.resource.clone()) else {
            return;
        };
        let since = SimTime::from_duration(deadline.since_start().saturating_sub(grace));
        for n in 0..self.nodes.len() {
            let node = &self.nodes[n];
            let link = self.net.link_ref(c, n);
            let reachable = node.state() == NodeState::Up
                && link.state == LinkState::Open
                && link.opened_at <= since;
            let held = (node.live_keys(self.now).iter()).any(|(_, key, value)| {
                key[..] == *resource.as_bytes() && value[..] == *stored.as_bytes()
            });
            if reachable && held {
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
