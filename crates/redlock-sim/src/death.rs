//! Clients that die ([`ClientDeath`](crate::scenario::ClientDeath)): at its time a client
//! process stops for good. Every connection of it closes (the nodes drop its subscriptions,
//! as a server does on a closed connection), the driver never feeds its core again
//! (`driver.rs` skips a dead client) and its workload ends.
//!
//! Nothing of the client's is undone: a call in flight never finishes, a key it set stays
//! on the nodes until it expires, a place it took in a waiters' queue stays until the node
//! prunes it. The checker is told ([`Checker::died`](crate::Checker::died)), so that its
//! unfinished calls are not taken for starving waiters. No die is cast here.

use std::time::Duration;

use crate::clock::SimTime;
use crate::event::Ev;
use crate::network::LinkState;
use crate::scenario::DEATH_LOOKOUT;
use crate::sim::Sim;

impl Sim {
    /// Schedules each of the scenario's deaths at its time (called once, by `Sim::new`).
    pub(crate) fn schedule_deaths(&mut self) {
        for (death, d) in self.scenario.client_deaths.clone().into_iter().enumerate() {
            self.schedule(SimTime::from_duration(d.at), Ev::Death { death });
        }
    }

    /// Death number `death` is due: the client dies now, unless it waits for a waiting call
    /// that has not come yet (then the check runs again a millisecond later).
    pub(crate) fn on_death(&mut self, death: usize) {
        let d = self.scenario.client_deaths[death];
        if d.client >= self.clients.len() || self.clients[d.client].dead {
            return;
        }
        let late = SimTime::from_duration(d.at.saturating_add(DEATH_LOOKOUT));
        if let Some(waited) = d.waiting_for
            && !self.waits_for(d.client, waited)
            && self.now < late
        {
            let next = self.now.saturating_add(LOOK_EVERY);
            self.schedule(next, Ev::Death { death });
            return;
        }
        self.kill_client(d.client);
    }

    /// Client `c` dies now: its links close (the nodes close their sides), its timer is
    /// disarmed, and the checker records the death.
    pub fn kill_client(&mut self, c: usize) {
        if self.clients[c].dead {
            return;
        }
        for n in 0..self.nodes.len() {
            self.reset_link(c, n, LinkState::Closed);
        }
        let client = &mut self.clients[c];
        client.dead = true;
        client.wake = None;
        // A wake already on the heap finds another generation and does nothing.
        client.wake_epoch += 1;
        self.checker.died(c, self.now);
        self.note(|| format!("client {c} died"));
    }

    /// Whether a lock call of client `c` has been waiting at least `waited` (true time)
    /// without acquiring, failing or being cancelled.
    fn waits_for(&self, c: usize, waited: Duration) -> bool {
        (self.checker.ops().iter())
            .filter(|r| r.client == c && r.acquired_after.is_none())
            .filter(|r| r.failed.is_none() && !r.cancelled)
            .any(|r| self.now.saturating_sub(r.started_at) >= waited)
    }
}

/// How often a death that waits for a waiting call looks again.
const LOOK_EVERY: Duration = Duration::from_millis(1);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redlock_core::{Config, RetryPolicy};

    use crate::scenario::ClientDeath;
    use crate::{Resources, Scenario, Sim, SimTime};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Client 0 locks at once and holds for most of its validity; client 1 comes at 50 ms.
    fn scenario(death: Option<ClientDeath>) -> Scenario {
        let retry = RetryPolicy {
            max_attempts: None,
            max_wait: Some(ms(5_000)),
            ..RetryPolicy::default()
        };
        let config = Config::builder(3).ttl(ms(500)).retry(retry).build();
        let mut s = Scenario::new(5, config.expect("valid"));
        s.clients = 1;
        s.late_clients = vec![ms(50)];
        s.resources = Resources::Shared(1);
        s.workload.ops_per_client = 2;
        s.workload.start_spread = ms(0);
        s.workload.ttl = (ms(500), ms(500));
        s.workload.hold = (0.9, 0.9);
        s.client_deaths = death.into_iter().collect();
        s
    }

    #[test]
    fn a_dead_holders_lock_lasts_until_its_deadline_and_its_calls_never_finish() {
        let death = ClientDeath {
            client: 0,
            at: ms(30),
            waiting_for: None,
        };
        let report = Sim::new(scenario(Some(death))).run();
        assert!(report.violation.is_none(), "{:?}", report.violation);
        let checker = &report.checker;
        assert_eq!(checker.deaths(), [(0, SimTime::from_duration(ms(30)))]);
        let dead = (checker.intervals().iter()).find(|iv| iv.client == 0);
        let dead = dead.expect("client 0 held when it died");
        assert!(
            dead.end > SimTime::from_duration(ms(400)),
            "held to its deadline: {dead:?}"
        );
        // Its second call never began; client 1 acquired once the key had expired, twice.
        assert_eq!(checker.ops().iter().filter(|r| r.client == 0).count(), 1);
        let live = (checker.intervals().iter()).filter(|iv| iv.client == 1);
        assert!(live.clone().count() == 2 && live.clone().all(|iv| iv.start >= dead.end));
        assert!(report.workloads_done, "a dead client counts as done");
        assert!(checker.starvation(report.end).is_none());
    }

    #[test]
    fn a_death_that_waits_for_a_waiting_call_comes_while_one_waits() {
        let death = ClientDeath {
            client: 1,
            at: ms(0),
            waiting_for: Some(ms(20)),
        };
        let report = Sim::new(scenario(Some(death))).run();
        let checker = &report.checker;
        let (_, at) = checker.deaths()[0];
        let waiting = (checker.ops().iter()).find(|r| r.client == 1);
        let waiting = waiting.expect("client 1 called");
        assert!(
            at >= waiting.started_at.saturating_add(ms(20)),
            "{at} {waiting:?}"
        );
        assert!(checker.cut_short(waiting) && waiting.acquired_after.is_none());
        // Client 0 does its work alone: the dead waiter never took the lock.
        assert!(checker.intervals().iter().all(|iv| iv.client == 0));
        assert!(report.violation.is_none() && report.workloads_done);
        // Without the death the two clients take turns, a run of its own.
        let plain = Sim::new(scenario(None)).run();
        assert!(plain.checker.intervals().iter().any(|iv| iv.client == 1));
        assert!(plain.checker.deaths().is_empty());
    }
}
