//! The clock-rate check (docs/safety.md, "Checking the clock rates"), byte by byte: its
//! `TIME` goes out in the same write as a request, at most once a second per node, and the
//! node's readings over a few seconds are reported as a rate outside the drift allowance or
//! a step, or not at all.

mod support;

use std::time::Duration;

use redlock_core::{
    AcquireFailure, ClockCheck, Config, Event, NodeFault, NodeId, QuarantineCause, RetryPolicy,
};
use support::{Harness, NODE_SECS, set_nx_px};

const TIME: &str = "*1\r\n$4\r\nTIME\r\n";

fn harness() -> Harness {
    harness_with(false)
}

fn harness_with(clock_quarantine: bool) -> Harness {
    let config = Config::builder(1)
        .release_notifications(None)
        .restart_quarantine(None)
        .ttl(Duration::from_secs(10))
        .clock_check(Some(ClockCheck {
            quarantine: clock_quarantine,
        }))
        .retry(RetryPolicy::once())
        .build()
        .expect("valid config");
    assert!(config.clock_check().is_some(), "on by default");
    Harness::connected(config)
}

/// A `TIME` reply: `micros` microseconds since the epoch.
fn time_reply(micros: u64) -> Vec<u8> {
    let (s, u) = (
        (micros / 1_000_000).to_string(),
        (micros % 1_000_000).to_string(),
    );
    format!("*2\r\n${}\r\n{s}\r\n${}\r\n{u}\r\n", s.len(), u.len()).into_bytes()
}

/// Acquires `key` and answers its `SET` (and the `TIME` with it, if one went out) with the
/// node clock `micros` after `rtt`; returns whether a `TIME` went out, and the clock events.
fn cycle(h: &mut Harness, key: &'static str, rtt: Duration, micros: u64) -> (bool, Vec<Event>) {
    let (_, out) = h.acquire(key);
    let sent = support::mask_tokens(&out.sent_to(0));
    let request = set_nx_px(key, 10_000);
    let with_time = sent == format!("{request}{TIME}");
    assert!(with_time || sent == request, "{sent:?}");
    // Both in one write: the TIME rides with the request.
    assert_eq!(out.transmits.len(), 1);
    h.advance(rtt);
    let mut reply = b"+OK\r\n".to_vec();
    if with_time {
        reply.extend_from_slice(&time_reply(micros));
    }
    let out = h.reply(0, &reply);
    assert!(matches!(out.events.first(), Some(Event::Acquired(_))));
    let clock = (out.events.into_iter())
        .filter(|e| e.op().is_none())
        .collect();
    (with_time, clock)
}

/// Runs a cycle every `period` for `secs` seconds with a node clock at `rate` that steps by
/// `step` micros after `step_after` cycles; returns the clock events.
fn run(rate: f64, step: i64, step_after: usize) -> Vec<Event> {
    run_on(&mut harness(), rate, step, step_after, usize::MAX)
}

/// [`run`] on `h`, stopping after the cycle that brought the `stop`-th clock event.
fn run_on(h: &mut Harness, rate: f64, step: i64, step_after: usize, stop: usize) -> Vec<Event> {
    let start = h.now;
    let keys: Vec<&'static str> = (0..40)
        .map(|i| &*Box::leak(format!("k{i}").into_boxed_str()))
        .collect();
    let mut events = Vec::new();
    for (i, key) in keys.into_iter().enumerate() {
        let rtt = Duration::from_micros(300 + 700 * (i as u64 % 3));
        let elapsed = (h.now + rtt / 2 - start).as_micros() as f64;
        let mut micros = NODE_SECS as i64 * 1_000_000 + (elapsed * rate) as i64;
        if i >= step_after {
            micros += step;
        }
        let (timed, found) = cycle(h, key, rtt, micros as u64);
        assert!(timed, "a cycle a second samples every time");
        events.extend(found);
        if events.len() >= stop {
            break;
        }
        h.advance(Duration::from_secs(1));
    }
    events
}

#[test]
fn time_rides_with_a_request_at_most_once_a_second() {
    let mut h = harness();
    let node = NODE_SECS * 1_000_000;
    assert!(cycle(&mut h, "a", Duration::from_millis(1), node).0);
    h.advance(Duration::from_millis(500));
    assert!(!cycle(&mut h, "b", Duration::from_millis(1), 0).0);
    h.advance(Duration::from_millis(500));
    assert!(cycle(&mut h, "c", Duration::from_millis(1), node + 1_002_000).0);
}

#[test]
fn an_idle_client_samples_nothing() {
    let mut h = harness();
    h.advance(Duration::from_secs(60));
    let out = h.timeout();
    assert!(out.transmits.is_empty() && out.timeout.is_none(), "{out:?}");
}

#[test]
fn good_clocks_within_the_allowance_are_quiet() {
    // Also just inside the allowance, where the error bars cross its edge.
    for rate in [1.0, 1.005, 0.995, 1.0098, 0.9902] {
        assert_eq!(run(rate, 0, usize::MAX), [], "rate {rate}");
    }
}

#[test]
fn twice_and_ten_times_the_allowance_are_reported() {
    for rate in [1.02, 0.98, 1.1, 0.9] {
        let events = run(rate, 0, usize::MAX);
        assert!(!events.is_empty(), "rate {rate}");
        for event in events {
            let Event::ClockRate {
                node, low, high, ..
            } = event
            else {
                panic!("rate {rate}: {event:?}");
            };
            assert_eq!(node.id(), NodeId::new(0));
            assert!(low <= rate && rate <= high, "rate {rate}: [{low}, {high}]");
        }
    }
}

#[test]
fn a_step_is_reported_once() {
    for step in [300_000, -300_000] {
        let events = run(1.0, step, 20);
        let [Event::ClockStep { node, forward, by }] = &events[..] else {
            panic!("step {step}: {events:?}");
        };
        let (forward, by) = (*forward, *by);
        assert_eq!((node.id(), forward), (NodeId::new(0), step > 0));
        assert!(by <= Duration::from_micros(step.unsigned_abs()), "{by:?}");
    }
}

#[test]
fn a_refused_or_garbled_time_is_no_sample() {
    let mut h = harness();
    for (i, reply) in [
        b"-NOPERM no time for you\r\n".to_vec(),
        b"*2\r\n$3\r\nabc\r\n$1\r\n0\r\n".to_vec(),
        b"*1\r\n:0\r\n".to_vec(),
    ]
    .into_iter()
    .enumerate()
    {
        let key: &'static str = ["x", "y", "z"][i];
        let (_, out) = h.acquire(key);
        assert!(out.sent_to(0).ends_with(TIME.as_bytes()));
        let mut bytes = b"+OK\r\n".to_vec();
        bytes.extend_from_slice(&reply);
        let out = h.reply(0, &bytes);
        assert!(matches!(out.events[..], [Event::Acquired(_)]), "{out:?}");
        assert!(h.client.is_up(NodeId::new(0)));
        h.advance(Duration::from_secs(1));
    }
}

#[test]
fn a_misbehaving_clock_quarantines_its_node_when_asked() {
    // A rate 10× the allowance off: the report, then the quarantine for two windows.
    let mut h = harness_with(true);
    let events = run_on(&mut h, 1.1, 0, usize::MAX, 2);
    let [
        Event::ClockRate { over, .. },
        Event::NodeQuarantined { node, until, cause },
    ] = &events[..]
    else {
        panic!("{events:?}");
    };
    assert_eq!(
        (node.id(), *cause, *until),
        (
            NodeId::new(0),
            QuarantineCause::ClockRate,
            h.now + *over * 2
        )
    );
    // Its vote does not count: the single node's grant decides nothing.
    let (_, _) = h.acquire("after");
    let out = h.reply(0, b"+OK\r\n");
    let [Event::AcquireFailed { reason, .. }] = &out.events[..] else {
        panic!("{out:?}");
    };
    let AcquireFailure::QuorumUnreachable { errors } = reason else {
        panic!("{reason:?}");
    };
    let fault = NodeFault::Quarantined {
        until: *until,
        cause: QuarantineCause::ClockRate,
    };
    assert_eq!(errors[..], [(node.clone(), fault)], "{errors:?}");

    // A step: quarantined for the restart window (ttl 10 s and its drift, 1 % and 2 ms).
    let mut h = harness_with(true);
    let events = run_on(&mut h, 1.0, 300_000, 20, 2);
    let [
        Event::ClockStep { .. },
        Event::NodeQuarantined { until, cause, .. },
    ] = &events[..]
    else {
        panic!("{events:?}");
    };
    let window = Duration::from_millis(10_102);
    assert_eq!(
        (*cause, *until),
        (QuarantineCause::ClockStep, h.now + window)
    );
    // Off (the default): reported, never quarantined.
    let events = run(1.1, 0, usize::MAX);
    assert!(!events.is_empty());
    assert!(
        (events.iter()).all(|e| matches!(e, Event::ClockRate { .. })),
        "{events:?}"
    );
}

/// The clock check is on by default, without the quarantine; the quarantine is a setting
/// of the check, so it cannot be asked for with the check off.
#[test]
fn the_clock_quarantine_is_part_of_the_check() {
    let config = Config::builder(1).build().expect("the defaults");
    assert_eq!(
        config.clock_check(),
        Some(&ClockCheck { quarantine: false })
    );
    let config = Config::builder(1).clock_check(None).build().expect("off");
    assert_eq!(config.clock_check(), None);
}
