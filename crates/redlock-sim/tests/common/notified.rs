//! Scenario families for release notifications (docs/design.md, "Release notifications"): contended workers that release
//! often, on nodes that speak RESP3 (and some that do not), with each fault on the way of a
//! notification: lost, doubled, held back past the waiter's next attempt or past its giving
//! up, or never subscribed. Network faults (cuts, pauses, crashes with a safe restart delay)
//! drop subscriptions with their connections.

use std::time::Duration;

use redlock_core::{Config, RetryPolicy};
use redlock_sim::{Dice, FaultKnobs, PushFaults, Resources, Scenario, ServerProfile};

use super::{ms, safe_restart};

/// Which notification fault a scenario injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notify {
    /// None: every notification arrives (after the network's delay).
    Clean,
    /// Nodes lose messages (some nodes, or all, some messages or all).
    Dropped,
    /// Nodes write messages twice.
    Duplicated,
    /// Nodes hold messages back by up to 400 ms: after replies written meanwhile, often
    /// after the waiter acquired, gave up or unsubscribed.
    Delayed,
    /// Messages stall their connections by up to 200 ms: the replies behind them wait too.
    Stalled,
    /// Nodes confirm `SUBSCRIBE` and register nothing.
    Ignored,
    /// Each node a random mix of the above, and some calls cancelled midway.
    Mixed,
}

/// How long a waiter may wait before it gives up: far longer than every other client's
/// work, so that a correct client never gives up in these families.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

/// Contended workers on one resource; waiters retry every 20-120 ms (the fallback) and
/// give up only after [`MAX_WAIT`]; the nodes inject `notify`.
pub fn notified(seed: u64, notify: Notify) -> Scenario {
    let retry = |d: &mut Dice| {
        let delay_min = d.millis(ms(20), ms(120));
        RetryPolicy {
            max_attempts: None,
            max_wait: Some(MAX_WAIT),
            delay_min,
            delay_max: delay_min + d.millis(ms(0), ms(100)),
        }
    };
    let mut s = contended(seed, notify, retry, (ms(200), ms(800)));
    s.workload.hold = (0.02, 0.15);
    s.time_limit = MAX_WAIT + ms(10_000);
    s
}

/// The same workers with the fallback out of reach: a waiter tries twice by its timer,
/// [`PATIENCE`] apart, then gives up, and the holders' keys would expire only after 30 s
/// (a waiter also tries then). In between, only notifications can start its attempts.
/// Every node speaks RESP3 and nothing else goes wrong: a pause or a cut can lose a
/// release's notification without any push fault (a native `DELIFEQ` whose reply comes
/// too late is never followed by its `PUBLISH`), which the fallback is there for.
pub fn notification_only(seed: u64, notify: Notify) -> Scenario {
    let retry = |_: &mut Dice| RetryPolicy {
        max_attempts: Some(2),
        max_wait: None,
        delay_min: PATIENCE,
        delay_max: PATIENCE,
    };
    let mut s = contended(seed, notify, retry, (ms(30_000), ms(30_000)));
    // Three holds per client of 30 to 150 ms out of a 30 s validity: all of them together
    // fit in one waiter's patience.
    s.workload.ops_per_client = 3;
    s.workload.hold = (0.001, 0.005);
    s.faults.every = None;
    for server in &mut s.servers {
        if *server == ServerProfile::REDIS_5_0 {
            *server = ServerProfile::REDIS_7_0;
        }
    }
    s.time_limit = ms(20_000);
    s
}

/// The retry delay of [`notification_only`]: longer than every hold of every client
/// together (at most 5 clients, 3 holds each of at most 150 ms), so that a waiter told of
/// each release never gives up, and one told of none tries again only once they are over.
pub const PATIENCE: Duration = Duration::from_secs(5);

fn contended(
    seed: u64,
    notify: Notify,
    retry: impl FnOnce(&mut Dice) -> RetryPolicy,
    ttl: (Duration, Duration),
) -> Scenario {
    let mut d = Dice::new(seed ^ 0x0071_f1ed);
    let nodes = [3, 5][d.index(2)];
    let resp3 = [
        ServerProfile::REDIS_7_0,
        ServerProfile::VALKEY_9_1,
        ServerProfile::REDIS_8_4,
    ];
    // One seed in five has a Redis 5 node (no RESP3: polled).
    let old = d.chance(0.2);
    let servers: Vec<ServerProfile> = (0..nodes)
        .map(|i| match i {
            0 if old => ServerProfile::REDIS_5_0,
            _ => resp3[d.index(resp3.len())],
        })
        .collect();
    let ttl_max = d.millis(ttl.0, ttl.1);
    let retry = retry(&mut d);
    let config = Config::builder(nodes)
        .native_commands(d.chance(0.7))
        .ttl(ttl_max)
        .attempt_timeout(d.millis(ms(10), ms(30)))
        .retry(retry)
        .build()
        .expect("valid notified config");
    let mut s = Scenario::new(seed, config);
    s.servers = servers;
    s.clients = d.range(3, 5) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    s.network.latency_max = d.duration(ms(1), ms(4));
    s.network.split_chance = 0.2;
    s.faults = FaultKnobs {
        every: Some((ms(30), ms(300))),
        until: ms(3_000),
        pause_weight: 1,
        cut_weight: 2,
        crash_weight: d.range(0, 1) as u32,
        flush_weight: 0,
        pause: (ms(1), ms(100)),
        restart_delay: safe_restart(ttl_max, s.clock_skew),
        max_down: (nodes - 1) / 2,
        ..FaultKnobs::default()
    };
    s.workload.ops_per_client = d.range(4, 8) as u32;
    s.workload.ttl = (ttl_max / 2, ttl_max);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(5));
    s.push_faults = (0..nodes).map(|_| push_faults(&mut d, notify)).collect();
    if notify == Notify::Mixed {
        s.workload.cancel_chance = 0.1;
        s.workload.cancel_within = ms(200);
    }
    s
}

/// Per-node notification faults for the safety family: half the seeds have none, the rest
/// a random mix on each node, drawn from dice of their own (so that every other knob of a
/// seed stays as it was).
pub fn mixed_push_faults(seed: u64, nodes: usize) -> Vec<PushFaults> {
    let mut d = Dice::new(seed ^ 0x9054_fa17);
    if d.chance(0.5) {
        return Vec::new();
    }
    (0..nodes)
        .map(|_| push_faults(&mut d, Notify::Mixed))
        .collect()
}

/// One node's faults for `notify`: a node in four is spared where only some are hit.
fn push_faults(d: &mut Dice, notify: Notify) -> PushFaults {
    let hit = d.chance(0.75);
    let none = PushFaults::default();
    let delay_by = (ms(5), ms(400));
    match notify {
        Notify::Clean => none,
        _ if !hit => none,
        Notify::Dropped => PushFaults {
            drop: [0.3, 1.0][d.index(2)],
            ..none
        },
        Notify::Duplicated => PushFaults {
            duplicate: d.float(0.5, 1.0),
            ..none
        },
        Notify::Delayed => PushFaults {
            delay: d.float(0.5, 1.0),
            delay_by,
            ..none
        },
        Notify::Stalled => PushFaults {
            stall: d.float(0.5, 1.0),
            stall_by: (ms(5), ms(200)),
            ..none
        },
        Notify::Ignored => PushFaults {
            ignore_subscribe: true,
            ..none
        },
        Notify::Mixed => PushFaults {
            drop: d.float(0.0, 0.5),
            duplicate: d.float(0.0, 0.5),
            delay: d.float(0.0, 0.5),
            delay_by,
            stall: d.float(0.0, 0.3),
            stall_by: (ms(5), ms(200)),
            ignore_subscribe: d.chance(0.2),
        },
    }
}
