//! The half-close fault: a middlebox in front of a node holds what a client writes on one
//! connection, then the connection's client side dies (the client sees `Disconnected` and
//! reconnects on a new connection as usual) while its server side lives on as an orphan that
//! gets the held bytes late and runs them.
//!
//! An orphan is a node-side connection like any other: its own inbox and selected database,
//! run only while the node runs, gone when the node crashes. Its replies go nowhere. This is
//! how a command written on an old connection can run after one written later on a new one;
//! the links of `network.rs` never reorder anything within a connection.

use crate::event::Ev;
use crate::network::{LinkState, Orphan};
use crate::node::NodeState;
use crate::sim::Sim;

impl Sim {
    /// Starts a half-close of the open link between client `c` and node `n`: from now on the
    /// middlebox holds the bytes the client writes; after a random hold
    /// ([`FaultKnobs::half_close_hold`](crate::FaultKnobs)) the client side dies, and the held
    /// bytes reach the node a random time later
    /// ([`FaultKnobs::late_delivery`](crate::FaultKnobs)), on an orphaned connection.
    pub fn half_close(&mut self, c: usize, n: usize) {
        let link = self.net.link(c, n);
        if link.state != LinkState::Open || link.holding {
            return;
        }
        link.holding = true;
        let epoch = link.epoch;
        let (lo, hi) = self.scenario.faults.half_close_hold;
        let at = self.now.saturating_add(self.dice.duration(lo, hi));
        self.note(|| format!("link client {c} - node {n} held until {at}, then half-closed"));
        let ev = Ev::HalfClose {
            client: c,
            node: n,
            epoch,
        };
        self.schedule(at, ev);
    }

    pub(crate) fn half_close_random_link(&mut self) {
        let open: Vec<(usize, usize)> = self
            .net
            .open_links()
            .into_iter()
            .filter(|(c, n)| !self.net.link_ref(*c, *n).holding)
            .collect();
        if !open.is_empty() {
            let (c, n) = open[self.dice.index(open.len())];
            self.half_close(c, n);
        }
    }

    /// The client side of a held link dies now; its node side becomes an orphan.
    pub(crate) fn on_half_close(&mut self, c: usize, n: usize, epoch: u64) {
        let link = self.net.link(c, n);
        if !link.accepts(epoch) {
            // Cut (or the node crashed) while held: the held bytes died with the link.
            return;
        }
        let orphan = Orphan {
            client: c,
            node: n,
            epoch,
            session: std::mem::take(&mut link.session),
            inbox: std::mem::take(&mut link.inbox),
            held: std::mem::take(&mut link.held),
            delivered: false,
            dead: false,
        };
        let held = orphan.held.len();
        self.orphans.push(orphan);
        let id = self.orphans.len() - 1;
        let (lo, hi) = self.scenario.faults.late_delivery;
        let at = self.now.saturating_add(self.dice.duration(lo, hi));
        self.stats.half_closes += 1;
        self.note(|| {
            format!("link client {c} - node {n} half-closed: orphan {id}, {held} bytes at {at}")
        });
        self.schedule(at, Ev::LateDelivery { orphan: id });
        // The client's side of the link is gone: a plain cut from its point of view.
        self.cut(c, n);
    }

    /// The middlebox delivers what it held for `orphan`.
    pub(crate) fn on_late_delivery(&mut self, id: usize) {
        let orphan = &mut self.orphans[id];
        if orphan.dead {
            return;
        }
        orphan.delivered = true;
        let held = std::mem::take(&mut orphan.held);
        orphan.inbox.extend_from_slice(&held);
        self.process_orphan(id);
    }

    /// Bytes of a link generation that is no longer open: an orphan's if that generation was
    /// half-closed, else dropped (a plain cut).
    pub(crate) fn orphan_bytes(&mut self, c: usize, n: usize, epoch: u64, bytes: &[u8]) {
        let Some(id) = self
            .orphans
            .iter()
            .rposition(|o| (o.client, o.node, o.epoch) == (c, n, epoch) && !o.dead)
        else {
            return;
        };
        let orphan = &mut self.orphans[id];
        if orphan.delivered {
            orphan.inbox.extend_from_slice(bytes);
            self.process_orphan(id);
        } else {
            // FIFO: behind what the middlebox already holds.
            orphan.held.extend_from_slice(bytes);
        }
    }

    /// Runs the delivered inboxes of node `n`'s orphans (after a pause ends).
    pub(crate) fn process_orphans(&mut self, n: usize) {
        for id in 0..self.orphans.len() {
            let o = &self.orphans[id];
            if o.node == n && !o.dead && !o.inbox.is_empty() {
                self.process_orphan(id);
            }
        }
    }

    /// Node `n` crashed: its orphaned connections are gone with it (and their
    /// subscriptions, with the node's registry).
    pub(crate) fn kill_orphans(&mut self, n: usize) {
        for o in self.orphans.iter_mut().filter(|o| o.node == n) {
            o.dead = true;
            o.inbox.clear();
            o.held.clear();
        }
    }

    /// Runs every complete command in the orphan's inbox, if its node runs; the replies are
    /// dropped, as nobody reads that connection any more.
    fn process_orphan(&mut self, id: usize) {
        let (c, n) = (self.orphans[id].client, self.orphans[id].node);
        if self.nodes[n].state() != NodeState::Up {
            return;
        }
        let mut inbox = std::mem::take(&mut self.orphans[id].inbox);
        let mut session = std::mem::take(&mut self.orphans[id].session);
        let before = self.nodes[n].commands();
        let (_replies, broken) = self.execute_stream(n, c, Some(id), &mut inbox, &mut session);
        self.stats.orphan_commands += self.nodes[n].commands() - before;
        if broken {
            // Redis closes the connection after a protocol error.
            self.stats.bad_requests += 1;
            self.nodes[n].close(&session);
            self.orphans[id].dead = true;
        }
        let orphan = &mut self.orphans[id];
        orphan.inbox = inbox;
        orphan.session = session;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redlock_core::Config;

    use crate::network::LinkState;
    use crate::{Scenario, Sim};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// One client, one lock call at once; its link to node 0 is held from the moment it
    /// opens for 30 ms, and the held bytes (handshake, `SET`) reach node 0 100 ms later.
    fn held_while_locking() -> Sim {
        let config = Config::builder(3).build().expect("valid");
        let mut s = Scenario::new(1, config);
        s.clients = 1;
        s.workload.ops_per_client = 1;
        s.workload.start_spread = ms(0);
        s.workload.ttl = (ms(500), ms(500));
        s.workload.hold = (0.9, 0.9);
        s.faults.half_close_hold = (ms(30), ms(30));
        s.faults.late_delivery = (ms(100), ms(100));
        let mut sim = Sim::new(s);
        sim.enable_log();
        for _ in 0..1_000 {
            if sim.net.link_ref(0, 0).state == LinkState::Open {
                break;
            }
            assert!(sim.step(), "the link never opened");
        }
        sim.half_close(0, 0);
        sim
    }

    /// True times (in ms) of the commands node 0 ran for an orphan.
    fn orphan_commands(sim: &Sim) -> Vec<f64> {
        sim.log()
            .iter()
            .filter(|l| l.contains("node 0 <- orphan 0 of client 0: "))
            .filter_map(|l| l.split("ms ").next()?.parse().ok())
            .collect()
    }

    #[test]
    fn held_bytes_run_late_on_the_orphan_and_the_client_reconnects() {
        let mut sim = held_while_locking();
        sim.run_until(ms(3_000), 1_000_000);
        let late = orphan_commands(&sim);
        assert_eq!(sim.stats.half_closes, 1);
        assert!(!late.is_empty(), "nothing ran late: {:#?}", sim.log());
        assert!(late.iter().all(|t| *t >= 130.0), "{late:?}");
        assert_eq!(sim.stats.orphan_commands, late.len() as u64);
        let ops = sim.checker().ops();
        assert!(ops.iter().all(|op| op.acquired_after.is_some()), "{ops:?}");
        assert!(
            sim.log()
                .iter()
                .any(|l| l.contains("node 0 <- client 0: EVALSHA")),
            "the client never used node 0 again"
        );
    }

    #[test]
    fn a_paused_node_runs_late_bytes_when_resumed_and_a_crash_loses_them() {
        let mut paused = held_while_locking();
        paused.scenario.faults.pause = (ms(200), ms(200));
        paused.run_until(ms(100), 100_000);
        let resume = paused.now().since_start() + ms(200);
        paused.pause_node(0);
        paused.run_until(ms(3_000), 1_000_000);
        let late = orphan_commands(&paused);
        let resume = resume.as_secs_f64() * 1e3;
        assert!(resume > 130.0, "the pause covers the late delivery");
        assert!(
            !late.is_empty() && late.iter().all(|t| *t >= resume),
            "{late:?}"
        );

        let mut crashed = held_while_locking();
        crashed.run_until(ms(100), 100_000);
        crashed.crash_node(0);
        crashed.run_until(ms(3_000), 1_000_000);
        assert_eq!(orphan_commands(&crashed), Vec::<f64>::new());
        assert_eq!(crashed.stats.orphan_commands, 0);
    }
}
