//! Pub/sub messages on their way: after each command a node ran, the messages its
//! publications left ([`Delivery`]) are written to the receiving connections, each in that
//! connection's protocol, through the node's [`PushFaults`](crate::PushFaults): lost,
//! written twice, held back and written later (behind replies written meanwhile), or
//! stalling their connection (replies behind them wait too).
//!
//! A message for the connection that published it goes into that connection's output ahead
//! of the command's reply, as a server writes it; one for another client's connection goes
//! out on its link at once. A message for a half-closed connection (an orphan) is dropped
//! with everything else written there: nobody reads it.

use bytes::{Bytes, BytesMut};

use crate::clock::SimTime;
use crate::event::Ev;
use crate::network::{Direction, LinkState};
use crate::pubsub::{Delivery, Session};
use crate::sim::Sim;

impl Sim {
    /// Writes the messages node `n` left: for `session` (the connection that ran the
    /// command, client `current`'s link, or an orphan's when `None`) into `out`; for other
    /// connections onto their links.
    pub(crate) fn deliver(
        &mut self,
        n: usize,
        current: Option<usize>,
        session: &Session,
        out: &mut BytesMut,
    ) {
        for delivery in self.nodes[n].take_deliveries() {
            self.stats.messages += 1;
            let target = if delivery.session == session.id() {
                current.map(|c| (c, session.protocol))
            } else {
                (0..self.clients.len()).find_map(|c| {
                    let link = self.net.link_ref(c, n);
                    let open = link.state == LinkState::Open;
                    (open && link.session.id() == delivery.session)
                        .then_some((c, link.session.protocol))
                })
            };
            let Some((c, protocol)) = target else {
                continue;
            };
            let mut bytes = BytesMut::new();
            delivery.frame().encode(&mut bytes, protocol);
            let bytes = bytes.freeze();
            self.note(|| show(n, c, &delivery));
            for copy in self.copies(n) {
                if let Copy::Held(at) = copy {
                    let epoch = self.net.link_ref(c, n).epoch;
                    let (client, node, bytes) = (c, n, bytes.clone());
                    let channel = delivery.channel.clone();
                    let push = Ev::Push {
                        client,
                        node,
                        epoch,
                        channel,
                        bytes,
                    };
                    self.schedule(at, push);
                    continue;
                }
                if let Copy::Stalled(until) = copy {
                    self.net.stall(c, n, until);
                }
                if Some(c) == current {
                    out.extend_from_slice(&bytes);
                } else {
                    self.write_to_client(c, n, bytes.clone());
                }
            }
        }
    }

    /// A held-back message on `channel`'s time came: written to its connection (client
    /// `c`'s link to node `n`, generation `epoch`) if still open.
    pub(crate) fn on_held_push(
        &mut self,
        (c, n, epoch): (usize, usize, u64),
        channel: &Bytes,
        bytes: Bytes,
    ) {
        let link = self.net.link_ref(c, n);
        if !link.accepts(epoch) {
            return;
        }
        if !link.session.channels().any(|ch| ch == channel) {
            self.stats.messages_unwatched += 1;
        }
        self.note(|| format!("node {n} -> client {c}: a held-back message"));
        self.write_to_client(c, n, bytes);
    }

    /// Writes `bytes` on the open link from node `n` to client `c`, behind what it carries.
    pub(crate) fn write_to_client(&mut self, c: usize, n: usize, bytes: Bytes) {
        let epoch = self.net.link_ref(c, n).epoch;
        let plan = (self.net).plan(&mut self.dice, self.now, c, n, Direction::ToClient, bytes);
        for (at, bytes) in plan {
            let (client, node) = (c, n);
            self.schedule(
                at,
                Ev::ToClient {
                    client,
                    node,
                    epoch,
                    bytes,
                },
            );
        }
    }

    /// The copies of one message node `n` writes: none if lost, two if doubled, each now,
    /// held back, or stalling its connection. Dice are drawn only for faults above zero.
    fn copies(&mut self, n: usize) -> Vec<Copy> {
        let faults = self.scenario.push_faults(n);
        if faults.drop > 0.0 && self.dice.chance(faults.drop) {
            self.stats.messages_dropped += 1;
            self.note(|| format!("node {n}: a message lost"));
            return Vec::new();
        }
        let mut timing = Copy::Now;
        if faults.delay > 0.0 && self.dice.chance(faults.delay) {
            self.stats.messages_delayed += 1;
            let (lo, hi) = faults.delay_by;
            timing = Copy::Held(self.now.saturating_add(self.dice.duration(lo, hi)));
        } else if faults.stall > 0.0 && self.dice.chance(faults.stall) {
            self.stats.messages_stalled += 1;
            let (lo, hi) = faults.stall_by;
            timing = Copy::Stalled(self.now.saturating_add(self.dice.duration(lo, hi)));
        }
        if faults.duplicate > 0.0 && self.dice.chance(faults.duplicate) {
            self.stats.messages_duplicated += 1;
            return vec![timing, timing];
        }
        vec![timing]
    }
}

/// When one copy of a message is written.
#[derive(Debug, Clone, Copy)]
enum Copy {
    /// Now, behind what the connection already carries.
    Now,
    /// At this time, behind what the connection carries then.
    Held(SimTime),
    /// Now, and nothing behind it arrives before this time.
    Stalled(SimTime),
}

fn show(n: usize, c: usize, delivery: &Delivery) -> String {
    let channel = String::from_utf8_lossy(&delivery.channel);
    format!("node {n} -> client {c}: message on {channel}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::{BufMut, BytesMut};
    use redlock_core::Config;

    use crate::network::LinkState;
    use crate::{PushFaults, Scenario, Sim};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Three clients that never lock, their links to node 0 opened by hand, node 0 with
    /// `faults`.
    fn bench(faults: PushFaults) -> Sim {
        let mut s = Scenario::new(1, Config::builder(3).build().expect("valid"));
        s.workload.ops_per_client = 0;
        s.push_faults = vec![faults, PushFaults::default()];
        let mut sim = Sim::new(s);
        for c in 0..3 {
            let session = sim.nodes[0].accept();
            sim.net.link(c, 0).open(sim.now, session);
        }
        sim
    }

    /// Client `c` writes `args` to node 0 now, then the simulation runs for `run` ms.
    fn send(sim: &mut Sim, c: usize, args: &[&str], run: u64) {
        let mut wire = BytesMut::new();
        wire.put_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            wire.put_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        sim.send_to_node(c, 0, wire.freeze());
        let until = sim.now().since_start() + ms(run);
        sim.run_until(until, 100_000);
    }

    /// What client `c` read from node 0, as text.
    fn read(sim: &Sim, c: usize) -> String {
        let chunks = sim.tap.iter().filter(|(to, n, _)| (*to, *n) == (c, 0));
        let bytes: Vec<u8> = chunks.flat_map(|(_, _, b)| b.iter().copied()).collect();
        String::from_utf8(bytes).expect("text")
    }

    const MESSAGE: &str = ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n";

    /// Clients 0 and 1 subscribe to `ch` in RESP3 (client 1 in RESP2 when `resp2`), then
    /// client 2 publishes `x` there `times` times, 10 ms apart.
    fn publish(faults: PushFaults, times: usize) -> Sim {
        let mut sim = bench(faults);
        send(&mut sim, 0, &["HELLO", "3"], 10);
        send(&mut sim, 0, &["SUBSCRIBE", "ch"], 10);
        send(&mut sim, 1, &["SUBSCRIBE", "ch"], 10);
        for _ in 0..times {
            send(&mut sim, 2, &["PUBLISH", "ch", "x"], 10);
        }
        sim
    }

    #[test]
    fn messages_reach_every_subscriber_in_its_protocol() {
        let sim = publish(PushFaults::default(), 3);
        assert_eq!(read(&sim, 0).matches(MESSAGE).count(), 3);
        let resp2 = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n";
        assert_eq!(read(&sim, 1).matches(resp2).count(), 3, "{}", read(&sim, 1));
        assert_eq!(read(&sim, 2), ":2\r\n:2\r\n:2\r\n");
        assert_eq!(sim.stats.messages, 6);
    }

    #[test]
    fn a_node_loses_or_doubles_messages() {
        let lost = publish(
            PushFaults {
                drop: 1.0,
                ..PushFaults::default()
            },
            3,
        );
        assert_eq!(read(&lost, 0).matches(MESSAGE).count(), 0);
        assert_eq!(lost.stats.messages_dropped, 6);
        assert_eq!(
            read(&lost, 2),
            ":2\r\n:2\r\n:2\r\n",
            "the publisher is not told"
        );
        let some = publish(
            PushFaults {
                drop: 0.5,
                ..PushFaults::default()
            },
            20,
        );
        let got = read(&some, 0).matches(MESSAGE).count();
        assert!(got > 0 && got < 20, "{got} of 20");
        let doubled = publish(
            PushFaults {
                duplicate: 1.0,
                ..PushFaults::default()
            },
            3,
        );
        assert_eq!(read(&doubled, 0).matches(MESSAGE).count(), 6);
        assert_eq!(doubled.stats.messages_duplicated, 6);
    }

    /// Held back, a message arrives after the reply to a command the subscriber wrote
    /// after it was published, and even after it unsubscribed; without the fault it arrives
    /// first.
    #[test]
    fn a_held_back_message_arrives_after_later_replies() {
        let held = PushFaults {
            delay: 1.0,
            delay_by: (ms(50), ms(50)),
            ..PushFaults::default()
        };
        for (faults, late) in [(PushFaults::default(), false), (held, true)] {
            let mut sim = publish(faults, 0);
            send(&mut sim, 2, &["PUBLISH", "ch", "x"], 5);
            send(&mut sim, 0, &["UNSUBSCRIBE", "ch"], 0);
            send(&mut sim, 0, &["PTTL", "k"], 100);
            let text = read(&sim, 0);
            let message = text.find(MESSAGE).expect("delivered");
            let reply = text.find(":-2\r\n").expect("PTTL answered");
            assert_eq!(message > reply, late, "{text:?}");
            assert_eq!(
                sim.stats.messages_unwatched,
                u32::from(late),
                "after UNSUBSCRIBE"
            );
        }
    }

    /// A stalled message holds back the replies behind it: they arrive after the stall,
    /// still in order.
    #[test]
    fn a_stalled_message_delays_what_follows_it() {
        let stalled = PushFaults {
            stall: 1.0,
            stall_by: (ms(50), ms(50)),
            ..PushFaults::default()
        };
        let mut sim = publish(stalled, 0);
        send(&mut sim, 2, &["PUBLISH", "ch", "x"], 5);
        send(&mut sim, 0, &["PTTL", "k"], 30);
        assert!(
            !read(&sim, 0).contains(":-2"),
            "the reply waits behind the stall"
        );
        send(&mut sim, 0, &["PTTL", "k"], 100);
        let text = read(&sim, 0);
        let (message, reply) = (text.find(MESSAGE), text.find(":-2\r\n:-2\r\n"));
        assert!(
            message.is_some() && reply.is_some() && message < reply,
            "{text:?}"
        );
        assert_eq!(sim.stats.messages_stalled, 2);
    }

    /// An ignored `SUBSCRIBE` is confirmed and never tells; a closed connection, or one on a
    /// node that restarted, is told nothing more.
    #[test]
    fn ignored_subscriptions_and_closed_connections_hear_nothing() {
        let ignored = PushFaults {
            ignore_subscribe: true,
            ..PushFaults::default()
        };
        let sim = publish(ignored, 2);
        assert!(read(&sim, 0).contains(">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"));
        assert_eq!(read(&sim, 0).matches(MESSAGE).count(), 0);
        assert_eq!(read(&sim, 2), ":0\r\n:0\r\n");

        let mut sim = publish(PushFaults::default(), 0);
        sim.cut(0, 0);
        send(&mut sim, 2, &["PUBLISH", "ch", "x"], 10);
        assert_eq!(read(&sim, 2), ":1\r\n", "client 1 only");
        sim.crash_node(0);
        sim.on_restart(0);
        assert_eq!(sim.net.link_ref(2, 0).state, LinkState::Closed);
        let session = sim.nodes[0].accept();
        sim.net.link(2, 0).open(sim.now, session);
        send(&mut sim, 2, &["PUBLISH", "ch", "x"], 10);
        assert!(
            read(&sim, 2).ends_with(":1\r\n:0\r\n"),
            "{:?}",
            read(&sim, 2)
        );
    }

    /// A subscriber that publishes on its own channel reads the message before the reply.
    #[test]
    fn a_message_to_the_publisher_comes_before_its_reply() {
        let mut sim = publish(PushFaults::default(), 0);
        send(&mut sim, 0, &["PUBLISH", "ch", "x"], 10);
        assert!(read(&sim, 0).ends_with(&format!("{MESSAGE}:2\r\n")));
    }
}
