//! Scenario families shared by the simulation tests, each a function of a seed, and the
//! helpers that run a range of seeds. The mutant tests and the correct-core tests use the
//! same families; only the core configuration (or one fault knob) differs.

#![allow(dead_code, unreachable_pub)] // each test file uses a subset

use std::time::Duration;

use redlock_core::{AutoExtend, Config, NodeSettings, RetryPolicy};
use redlock_sim::{
    Dice, FaultKnobs, NetworkKnobs, Report, Resources, Scenario, ServerProfile, Sim, SuppliedToken,
};

mod adversarial;
mod defaults;
mod evidence;
mod kinds;
mod notified;
mod waiters;

#[allow(unused_imports)] // not every test file uses the adversarial families or the evidence
pub use adversarial::*;
#[allow(unused_imports)]
pub use defaults::*;
#[allow(unused_imports)]
pub use evidence::*;
#[allow(unused_imports)]
pub use kinds::*;
#[allow(unused_imports)]
pub use notified::*;
#[allow(unused_imports)]
pub use waiters::*;

/// Scenarios per run of the safety property; `REDLOCK_SIM_SCENARIOS` overrides.
pub fn scenario_count() -> u64 {
    std::env::var("REDLOCK_SIM_SCENARIOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000)
}

/// Seed budget of every mutant test.
pub const MUTANT_BUDGET: u64 = 200;

/// Seeds on which the correct core runs each mutant family: a fortieth of the safety count
/// (50 by default), at least 10.
pub fn family_count() -> u64 {
    (scenario_count() / 40).max(10)
}

/// Runs `scenario` and panics with the violation if property (S) broke.
pub fn assert_safe(scenario: Scenario) -> Report {
    let report = Sim::new(scenario).run();
    if let Some(v) = &report.violation {
        panic!("property (S) broken: {v}");
    }
    if let Some(r) = report.checker.validity_beyond_ttl() {
        panic!(
            "seed {}: validity above the ttl asked for: {r:?}",
            report.seed
        );
    }
    assert_eq!(
        report.stats.bad_requests, 0,
        "seed {}: malformed request",
        report.seed
    );
    report
}

/// The first seed in `0..budget` whose run breaks property (S).
pub fn first_violation(budget: u64, family: impl Fn(u64) -> Scenario) -> Option<Report> {
    (0..budget)
        .map(|seed| Sim::new(family(seed)).run())
        .find(|r| r.violation.is_some())
}

/// The server each node behaves as (all scripts, all native, all probed, or a mix: see
/// [`ServerProfile::draw`]) and whether the core may use native commands (nine seeds in
/// ten), drawn from dice of their own so that every other knob of a seed stays as it was.
pub(crate) fn servers(seed: u64, nodes: usize) -> (Vec<ServerProfile>, bool) {
    let mut d = Dice::new(seed ^ 0x05e4_ee45);
    (ServerProfile::draw(&mut d, nodes), d.chance(0.9))
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn retry(d: &mut Dice, attempts: u64, delay_lo: u64, delay_hi: u64) -> RetryPolicy {
    let delay_min = d.millis(ms(delay_lo), ms(delay_hi));
    RetryPolicy {
        max_attempts: Some(d.range(2, attempts) as u32),
        max_wait: None,
        delay_min,
        delay_max: delay_min + d.millis(ms(0), ms(delay_hi)),
    }
}

/// The restart delay that keeps a crash safe: the largest ttl on the slowest node clock.
pub(crate) fn safe_restart(ttl_max: Duration, skew: f64) -> (Duration, Duration) {
    let lo = ttl_max.mul_f64(1.0 / (1.0 - skew)) + ms(1);
    (lo, lo + ms(300))
}

/// (S): a random mix of 3/5/7 nodes of random servers (script, native, probed), 2-5 clients on 1-2 resources, pauses, cuts, crashes
/// with a safe restart delay, half-closes with late delivery, reordering and splitting, clock
/// skew within the drift allowance, short ttls, extensions, auto-extension, cancellation, and
/// supplied tokens (per call, or one per client reused by every call).
pub fn safety(seed: u64) -> Scenario {
    let mut d = Dice::new(seed ^ 0x5afe_5afe);
    let nodes = [3, 5, 7][d.index(3)];
    let ttl_max = d.millis(ms(100), ms(500));
    let (profiles, native) = servers(seed, nodes);
    let mut builder = Config::builder(nodes)
        .native_commands(native)
        .ttl(ttl_max)
        .attempt_timeout(d.millis(ms(5), ms(25)))
        .retry(retry(&mut d, 6, 5, 60))
        .reconnect_backoff(ms(5), ms(200))
        .preload_scripts(d.chance(0.5));
    if d.chance(0.3) {
        // Exercise the AUTH/SELECT handshake on some nodes.
        let settings = NodeSettings {
            username: None,
            password: Some("secret".into()),
            db: d.range(1, 15) as u32,
        };
        builder = builder.node(d.index(nodes), settings);
    }
    let config = builder.build().expect("valid safety config");
    let mut s = Scenario::new(seed, config);
    s.servers = profiles;
    s.clients = d.range(2, 5) as usize;
    s.resources = Resources::Shared(d.range(1, 2) as usize);
    s.clock_skew = d.float(0.0, 0.004);
    let latency_max = if d.chance(0.2) {
        d.millis(ms(5), ms(20))
    } else {
        d.duration(ms(1), ms(5))
    };
    s.network = NetworkKnobs {
        latency_min: d.duration(Duration::from_micros(50), ms(1)),
        latency_max,
        split_chance: d.float(0.0, 0.5),
        ..NetworkKnobs::default()
    };
    s.faults = FaultKnobs {
        every: Some((ms(10), d.millis(ms(50), ms(300)))),
        until: ms(3_000),
        pause_weight: d.range(0, 3) as u32,
        cut_weight: d.range(0, 3) as u32,
        crash_weight: d.range(0, 2) as u32,
        flush_weight: d.range(0, 2) as u32,
        pause: (ms(1), d.millis(ms(10), ms(400))),
        restart_delay: safe_restart(ttl_max, s.clock_skew),
        max_down: d.range(1, nodes as u64) as usize,
        down_at_start: 0,
        ..FaultKnobs::default()
    };
    s.workload.ops_per_client = d.range(2, 5) as u32;
    s.workload.ttl = (ms(50), ttl_max);
    s.workload.think = (ms(0), ms(30));
    s.workload.hold = (0.05, 1.3);
    s.workload.extend_chance = 0.3;
    s.workload.extend_at = (0.2, 1.2);
    s.workload.auto_extend_chance = 0.2;
    s.workload.auto_extend = AutoExtend {
        renew_below: d.float(0.3, 0.7),
        max_renewals: Some(d.range(1, 3) as u32),
        max_hold: None,
    };
    s.workload.cancel_chance = 0.1;
    s.workload.cancel_within = ms(60);
    s.workload.token_chance = 0.3;
    s.preload_scripts = d.chance(0.5);
    s.time_limit = ms(6_000);
    // Drawn last, so that every earlier knob of a seed stayed what it was before these.
    s.faults.half_close_weight = d.range(0, 3) as u32;
    s.faults.half_close_hold = (ms(10), d.millis(ms(30), ms(150)));
    s.faults.late_delivery = (ms(50), ms(300));
    s.workload.supplied_token = if d.chance(0.5) {
        SuppliedToken::PerClient
    } else {
        SuppliedToken::PerCall
    };
    s.push_faults = mixed_push_faults(seed, nodes);
    s
}

/// No faults and no contention: each client locks its own resource. `down` nodes are
/// crashed from the start (a minority, for the liveness property).
pub fn quiet(seed: u64, down: impl Fn(usize) -> usize) -> Scenario {
    let mut d = Dice::new(seed ^ 0x9e1e7);
    let nodes = [3, 5, 7][d.index(3)];
    let (profiles, native) = servers(seed, nodes);
    let config = Config::builder(nodes)
        .native_commands(native)
        .ttl(ms(2_000))
        .build()
        .expect("valid quiet config");
    let mut s = Scenario::new(seed, config);
    s.servers = profiles;
    s.clients = d.range(2, 6) as usize;
    s.resources = Resources::PerClient;
    s.clock_skew = d.float(0.0, 0.004);
    s.network.split_chance = 0.3;
    s.faults.down_at_start = down(nodes);
    s.workload.ops_per_client = d.range(3, 6) as u32;
    s.workload.ttl = (ms(300), ms(2_000));
    s.workload.hold = (0.05, 0.6);
    s.workload.extend_chance = 0.3;
    s.workload.extend_at = (0.1, 0.5);
    s.workload.auto_extend_chance = 0.2;
    s.workload.token_chance = 0.3;
    s.preload_scripts = d.chance(0.5);
    s.time_limit = ms(60_000);
    s
}

/// No faults, contention allowed, ttl 10 s and short holds: every key must be gone long
/// before it could expire. `cancel` is the chance that an acquisition is cancelled.
pub fn cleanup(seed: u64, cancel: f64) -> Scenario {
    let mut d = Dice::new(seed ^ 0xc1ea);
    let nodes = [3, 5, 7][d.index(3)];
    let (profiles, native) = servers(seed, nodes);
    let config = Config::builder(nodes)
        .native_commands(native)
        .ttl(ms(10_000))
        .attempt_timeout(ms(20))
        .retry(retry(&mut d, 5, 2, 20))
        .build()
        .expect("valid cleanup config");
    let mut s = Scenario::new(seed, config);
    s.servers = profiles;
    s.clients = d.range(2, 5) as usize;
    s.resources = Resources::Shared(d.range(1, 2) as usize);
    s.network.latency_max = d.duration(ms(1), ms(8));
    s.network.split_chance = 0.3;
    s.workload.ops_per_client = d.range(3, 6) as u32;
    s.workload.ttl = (ms(10_000), ms(10_000));
    s.workload.hold = (0.0005, 0.005);
    s.workload.think = (ms(0), ms(20));
    s.workload.cancel_chance = cancel;
    s.workload.cancel_within = ms(40);
    s.workload.token_chance = 1.0;
    s.preload_scripts = d.chance(0.5);
    s.time_limit = ms(9_000);
    s
}
