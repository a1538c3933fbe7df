//! The kinds family: clients that take every lock kind of docs/kinds.md (multi-resource
//! locks over overlapping subsets of a small pool, readers and writers of one resource,
//! permit holders of semaphores with one k each) under the usual faults: crashes with a safe
//! restart delay, link cuts, node pauses, clock rates within the drift allowance, reordering
//! and splitting. [`kinds`] is one function of a seed and a [`Stress`]; [`late_readers`]
//! is the family whose readers extend past their deadline.
//!
//! Every scenario registers the models of the kinds' mutant scripts
//! (`redlock_sim::kinds::MUTANT_MODELS`): the correct core never sends them, a mutant core
//! does (the negative controls of tests/kinds.rs).

use std::time::Duration;

use redlock_core::{AutoExtend, Config, ConfigBuilder};
use redlock_sim::{Dice, FaultKnobs, KindMix, NetworkKnobs, Resources, Scenario};

use super::{ms, retry, safe_restart};

/// Which lock kinds a scenario of the family takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stress {
    /// Multi-locks of 2 or 3 of 3 or 4 resources, and mutexes of one of them.
    Multi,
    /// Readers and writers of one resource.
    ReadWrite,
    /// Permit holders of one or two semaphores of 2 or 3 permits, more contenders than k.
    Semaphore,
    /// Every kind at once, each on its own pool.
    Mixed,
}

impl Stress {
    /// Every stress, in the order the tests take them.
    pub const ALL: [Self; 4] = [Self::Multi, Self::ReadWrite, Self::Semaphore, Self::Mixed];
}

/// Scenario `seed` of the family with `stress`; `tweak` sets the core configuration (a
/// mutant, or nothing). 3 or 5 nodes, 3-6 clients, ttl 300 ms, holds of 30% to 110% of
/// the validity, retries every few milliseconds.
pub fn kinds(
    seed: u64,
    stress: Stress,
    tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Scenario {
    let mut d = Dice::new(seed ^ 0x0c1d_5000);
    let nodes = [3, 5][d.index(2)];
    let ttl_max = ms(300);
    let builder = Config::builder(nodes)
        .ttl(ttl_max)
        .attempt_timeout(ms(15))
        .reconnect_backoff(ms(2), ms(20))
        .retry(retry(&mut d, 20, 3, 15));
    let config = tweak(builder).build().expect("valid kinds config");
    let mut s = Scenario::new(seed, config);
    s.scripts.register_all(redlock_sim::kinds::MUTANT_MODELS);
    s.clients = d.range(3, 6) as usize;
    s.clock_skew = d.float(0.0, 0.004);
    s.network = NetworkKnobs {
        latency_min: Duration::from_micros(100),
        latency_max: d.duration(ms(1), ms(4)),
        split_chance: d.float(0.0, 0.3),
        ..NetworkKnobs::default()
    };
    s.faults = FaultKnobs {
        every: Some((ms(10), d.millis(ms(40), ms(200)))),
        until: ms(3_000),
        pause_weight: d.range(0, 2) as u32,
        cut_weight: d.range(0, 2) as u32,
        crash_weight: d.range(0, 2) as u32,
        flush_weight: d.range(0, 1) as u32,
        pause: (ms(1), ms(100)),
        restart_delay: safe_restart(ttl_max, s.clock_skew),
        max_down: (nodes - 1) / 2,
        ..FaultKnobs::default()
    };
    s.workload.ops_per_client = 4;
    s.workload.ttl = (ms(150), ttl_max);
    s.workload.hold = (0.3, 1.1);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(5));
    s.workload.extend_chance = 0.3;
    s.workload.extend_at = (0.3, 0.9);
    s.workload.auto_extend_chance = 0.1;
    s.workload.auto_extend = AutoExtend {
        renew_below: 0.5,
        max_renewals: Some(2),
        max_hold: None,
    };
    s.workload.cancel_chance = 0.05;
    s.workload.token_chance = 0.2;
    s.time_limit = ms(5_000);
    let (resources, mix) = mix(&mut d, stress);
    s.resources = resources;
    s.workload.kinds = mix;
    s
}

/// The mix of `stress`, and the resources mutexes and multi-locks share.
fn mix(d: &mut Dice, stress: Stress) -> (Resources, KindMix) {
    let none = KindMix {
        mutex: 0,
        rw_resources: 1,
        semaphores: d.range(1, 2) as usize,
        permits: d.range(2, 3) as u32,
        ..KindMix::default()
    };
    let pool = Resources::Shared(d.range(3, 4) as usize);
    let mix = match stress {
        Stress::Multi => KindMix {
            mutex: 1,
            multi: 3,
            ..none
        },
        Stress::ReadWrite => KindMix {
            read: 3,
            write: 2,
            ..none
        },
        Stress::Semaphore => KindMix { permit: 1, ..none },
        Stress::Mixed => KindMix {
            mutex: 1,
            multi: 2,
            read: 2,
            write: 1,
            permit: 2,
            ..none
        },
    };
    (pool, mix)
}

/// [`kinds`] with readers and writers only, whose holders hold and extend past their
/// deadline (as tests/mutants.rs's `late_extend` does for the mutex): a reader's late
/// extension finds its slot pruned, and a writer is let in as soon as it expires.
pub fn late_readers(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut s = kinds(seed, Stress::ReadWrite, tweak);
    let mut d = Dice::new(seed ^ 0x1a7e_4ead);
    s.faults.every = None;
    s.workload.kinds.read = 2;
    s.workload.kinds.write = 1;
    s.workload.hold = (0.05, 3.0);
    s.workload.extend_chance = 0.9;
    s.workload.extend_at = (0.9, 2.5);
    s.workload.max_extends = 3;
    s.workload.auto_extend_chance = 0.0;
    s.workload.cancel_chance = 0.0;
    s.clients = d.range(3, 4) as usize;
    s
}
