//! Scenario families built to provoke one bug each (the mutants, the supplied-token bugs,
//! the drift allowance at its edge): the correct core must pass them, the broken one must
//! not. Each takes a seed and the knob (or core configuration tweak) under test.

use std::time::Duration;

use bytes::Bytes;
use redlock_core::{Config, ConfigBuilder, RetryPolicy};
use redlock_sim::script::millis_arg;
use redlock_sim::{
    ClockRates, Dice, FaultKnobs, Keys, Resources, Scenario, ServerReply, SuppliedToken,
};

use super::{ms, retry, safe_restart};

/// Many clients hammering one resource; holders keep the lock to about their deadline.
/// `tweak` sets the core configuration (the mutant, or nothing).
pub fn contention(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut d = Dice::new(seed ^ 0xc0_47e7);
    let nodes = [3, 5, 7][d.index(3)];
    let builder = Config::builder(nodes)
        .ttl(ms(200))
        .attempt_timeout(ms(20))
        .retry(retry(&mut d, 12, 3, 15));
    let mut s = Scenario::new(seed, tweak(builder).build().expect("valid config"));
    s.clients = d.range(3, 5) as usize;
    s.workload.ops_per_client = 3;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    s.network.latency_max = d.duration(ms(1), ms(4));
    s.workload.ttl = (ms(100), ms(300));
    s.workload.hold = (0.5, 1.1);
    s.workload.start_spread = ms(2);
    s.workload.think = (ms(0), ms(5));
    s.time_limit = ms(4_000);
    s
}

/// Clock rates up to 5% apart, holders that hold past their deadline and contenders that
/// retry every few milliseconds. `drift_factor` is the allowance the core is given.
pub fn skewed(seed: u64, drift_factor: f64, drift_floor: Duration) -> Scenario {
    let mut d = Dice::new(seed ^ 0xd1f7);
    let nodes = [3, 5][d.index(2)];
    let config = Config::builder(nodes)
        .ttl(ms(300))
        .attempt_timeout(ms(15))
        .drift_factor(drift_factor)
        .drift_floor(drift_floor)
        .retry(RetryPolicy {
            max_attempts: Some(40),
            max_wait: None,
            delay_min: ms(3),
            delay_max: ms(10),
        })
        .build()
        .expect("valid skewed config");
    let mut s = Scenario::new(seed, config);
    s.clients = 3;
    s.workload.ops_per_client = 2;
    s.resources = Resources::Shared(1);
    s.clock_skew = 0.05;
    s.network.latency_min = Duration::from_micros(100);
    s.network.latency_max = Duration::from_micros(800);
    s.workload.ttl = (ms(150), ms(300));
    s.workload.hold = (0.95, 1.5);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(3));
    s.time_limit = ms(5_000);
    s
}

/// Every clock (clients and nodes) at 0.495% fast or slow, so two rates differ by up to
/// 0.995%, just inside the default 1% drift allowance, which gets no floor here (a review's finding,
/// "Also"). Holders hold past their deadline and contenders retry every few milliseconds, so
/// a contender takes the lock as soon as the keys expire. `drift_factor` is the allowance.
pub fn clock_edge(seed: u64, drift_factor: f64) -> Scenario {
    let mut d = Dice::new(seed ^ 0xed6e);
    let nodes = [3, 5][d.index(2)];
    let config = Config::builder(nodes)
        .ttl(ms(300))
        .attempt_timeout(ms(15))
        .drift_factor(drift_factor)
        .drift_floor(Duration::ZERO)
        .retry(RetryPolicy {
            max_attempts: Some(60),
            max_wait: None,
            delay_min: ms(1),
            delay_max: ms(3),
        })
        .build()
        .expect("valid clock-edge config");
    let mut s = Scenario::new(seed, config);
    s.clients = d.range(3, 4) as usize;
    s.workload.ops_per_client = 3;
    s.resources = Resources::Shared(1);
    s.clock_skew = EDGE_SKEW;
    s.clock_rates = ClockRates::Edges;
    s.network.latency_min = Duration::from_micros(10);
    s.network.latency_max = Duration::from_micros(300);
    s.workload.ttl = (ms(150), ms(300));
    s.workload.hold = (0.95, 1.5);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(3));
    s.time_limit = ms(5_000);
    s
}

/// Frequent node crashes on a contended resource; `restart_delay` is the fault knob under
/// test (zero: the node rejoins empty at once), `tweak` sets the core configuration (the
/// restart quarantine off, a mutant, or nothing).
pub fn crashy(
    seed: u64,
    restart_delay: Option<Duration>,
    tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Scenario {
    let mut d = Dice::new(seed ^ 0xc2a5);
    let nodes = [3, 5][d.index(2)];
    let builder = Config::builder(nodes)
        .ttl(ms(300))
        .attempt_timeout(ms(15))
        .reconnect_backoff(ms(2), ms(20))
        .retry(retry(&mut d, 20, 3, 15));
    let config = tweak(builder).build().expect("valid crashy config");
    let mut s = Scenario::new(seed, config);
    s.clients = d.range(3, 5) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    s.workload.ttl = (ms(200), ms(300));
    s.workload.hold = (0.6, 1.1);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(5));
    let restart = restart_delay.unwrap_or_else(|| safe_restart(ms(300), s.clock_skew).0);
    s.faults = FaultKnobs {
        every: Some((ms(10), ms(60))),
        until: ms(3_000),
        pause_weight: 0,
        cut_weight: 0,
        crash_weight: 1,
        flush_weight: 0,
        restart_delay: (restart, restart),
        max_down: (nodes - 1) / 2,
        ..FaultKnobs::default()
    };
    s.time_limit = ms(5_000);
    s
}

/// [`crashy`] with restarts without delay, after each of which the node's wall clock is
/// stepped an hour forward: its `INFO` uptime says it has run for an hour, and only its new
/// run id shows that it restarted empty.
pub fn crashy_stepped(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut s = crashy(seed, Some(Duration::ZERO), tweak);
    s.faults.restart_clock_ahead = Duration::from_secs(3600);
    s
}

/// Holders that call `extend` late (often after their deadline) and hold long, while
/// contenders grab the lock in between.
pub fn late_extend(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut d = Dice::new(seed ^ 0x1a7e);
    let nodes = [3, 5][d.index(2)];
    let builder = Config::builder(nodes)
        .ttl(ms(150))
        .attempt_timeout(ms(10))
        .retry(retry(&mut d, 40, 2, 10));
    let mut s = Scenario::new(seed, tweak(builder).build().expect("valid config"));
    // Only the resurrecting mutant sends it; the correct core never does.
    s.scripts.register(
        redlock_core::RESURRECTING_EXTEND_SCRIPT.body,
        resurrecting_extend,
    );
    s.clients = d.range(3, 4) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    s.workload.ttl = (ms(80), ms(150));
    s.workload.hold = (0.05, 3.0);
    s.workload.extend_chance = 0.9;
    s.workload.extend_at = (0.9, 2.5);
    s.workload.max_extends = 3;
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(10));
    s.time_limit = ms(5_000);
    s
}

/// A slow network (tens of ms one way) with a long attempt timeout, so that
/// `t_quorum - t0` is large next to the drift allowance; holders hold to their deadline.
pub fn slow_network(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut d = Dice::new(seed ^ 0x510e);
    let nodes = [3, 5][d.index(2)];
    let builder = Config::builder(nodes)
        .ttl(ms(400))
        .attempt_timeout(ms(150))
        .retry(retry(&mut d, 40, 1, 10));
    let mut s = Scenario::new(seed, tweak(builder).build().expect("valid config"));
    s.clients = d.range(3, 5) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    s.network.latency_min = ms(5);
    s.network.latency_max = ms(50);
    s.workload.ops_per_client = 3;
    s.workload.ttl = (ms(250), ms(400));
    s.workload.hold = (0.9, 1.2);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(5));
    s.time_limit = ms(6_000);
    s
}

/// Caller-supplied tokens (one per acquisition, reused by its retries), script caches that
/// keep being flushed and no preloading, so that a failed attempt's release goes out as
/// `EVALSHA`, meets `-NOSCRIPT`, and is resent as `EVAL` behind the next attempt's `SET`.
/// Retries come faster than a round trip; holders release quickly.
pub fn reorder(seed: u64, supplied_tokens: bool) -> Scenario {
    let mut d = Dice::new(seed ^ 0x2e02de2);
    let nodes = [3, 5][d.index(2)];
    let config = Config::builder(nodes)
        .ttl(ms(300))
        .attempt_timeout(ms(30))
        .preload_scripts(false)
        .retry(RetryPolicy {
            max_attempts: Some(20),
            max_wait: None,
            delay_min: ms(1),
            delay_max: ms(4),
        })
        .build()
        .expect("valid reorder config");
    let mut s = Scenario::new(seed, config);
    s.clients = d.range(3, 5) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    s.network.latency_min = ms(1);
    s.network.latency_max = ms(8);
    s.faults = FaultKnobs {
        every: Some((ms(2), ms(15))),
        until: ms(4_000),
        pause_weight: 1,
        cut_weight: 0,
        crash_weight: 0,
        flush_weight: 4,
        pause: (ms(2), ms(30)),
        ..FaultKnobs::default()
    };
    s.workload.ttl = (ms(200), ms(300));
    s.workload.hold = (0.02, 0.3);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(5));
    s.workload.token_chance = if supplied_tokens { 1.0 } else { 0.0 };
    s.time_limit = ms(5_000);
    s
}
/// Contenders with many quick retries on one resource while links keep being half-closed: a
/// middlebox holds what a client writes on a link for up to 80 ms, the client side dies (the
/// client reconnects), and the held bytes reach the node 50-300 ms later, so an earlier
/// attempt's `SET` and cleanup release can run after a later attempt's `SET` (issues 17 S1
/// and 18). `tokens`: what each lock call supplies (`None`: the core generates a token per
/// attempt). `tweak` sets the core configuration (the mutant, or nothing).
pub fn late_delivery(
    seed: u64,
    tokens: Option<SuppliedToken>,
    tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Scenario {
    let mut d = Dice::new(seed ^ 0x1a7e_de11);
    let nodes = [3, 5][d.index(2)];
    let builder = Config::builder(nodes)
        .ttl(ms(300))
        .attempt_timeout(ms(20))
        .retry(RetryPolicy {
            max_attempts: Some(20),
            max_wait: None,
            delay_min: ms(2),
            delay_max: ms(10),
        });
    let mut s = Scenario::new(seed, tweak(builder).build().expect("valid config"));
    s.clients = d.range(4, 6) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    s.network.latency_max = d.duration(ms(1), ms(4));
    s.faults = FaultKnobs {
        every: Some((ms(5), ms(40))),
        until: ms(3_000),
        pause_weight: 0,
        cut_weight: 0,
        crash_weight: 0,
        flush_weight: 0,
        half_close_weight: 1,
        half_close_hold: (ms(0), ms(80)),
        late_delivery: (ms(50), ms(300)),
        ..FaultKnobs::default()
    };
    s.workload.ops_per_client = 4;
    s.workload.ttl = (ms(200), ms(400));
    s.workload.hold = (0.1, 1.0);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(10));
    s.workload.token_chance = if tokens.is_some() { 1.0 } else { 0.0 };
    s.workload.supplied_token = tokens.unwrap_or(SuppliedToken::PerCall);
    s.time_limit = ms(5_000);
    s
}

/// Connections cut again and again while replies are in flight, and a driver that keeps
/// reading a replaced connection (`stale_reads`): every reply that reaches a connection the
/// client gave up on is fed to it under that connection's name. Credited to the new
/// connection, an old `+OK` would answer the new connection's first request.
pub fn stale_reads(seed: u64, as_current: bool) -> Scenario {
    let mut d = Dice::new(seed ^ 0x57a1e);
    let nodes = [3, 5][d.index(2)];
    // No script preloads, no `HELLO`, no clock-check `TIME` and no restart quarantine
    // (`INFO`, `CONFIG GET`): the first reply on a new connection answers a lock request,
    // not one of those (whose bulk or array reply, read by the next request after a
    // misplaced `+OK`, is a protocol error that drops the connection and so hides the
    // misplacement). No waiters' queue either: a waiter's attempt answers an array, which
    // a misplaced `+OK` cannot pass for, so the attempts it reads are plain `SET`s. No
    // release notifications: a waiter's announcement (`PUBLISH`, notify.rs) is answered with
    // a number, and a misplaced `+OK` read for it is a protocol error too.
    let builder = Config::builder(nodes)
        .clock_check(None)
        .waiter_queue(None)
        .release_notifications(None)
        .restart_quarantine(None)
        .ttl(ms(300))
        .attempt_timeout(ms(60))
        .reconnect_backoff(ms(1), ms(2))
        .preload_scripts(false)
        .native_commands(false)
        .retry(RetryPolicy {
            max_attempts: Some(20),
            max_wait: None,
            delay_min: ms(2),
            delay_max: ms(10),
        });
    let mut s = Scenario::new(seed, builder.build().expect("valid config"));
    s.clients = d.range(3, 5) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    // Replies in flight longer than a reconnection takes, so old ones still arrive once the
    // new connection is up.
    s.network.latency_min = ms(2);
    s.network.latency_max = d.duration(ms(6), ms(20));
    s.network.stale_reads = 1.0;
    s.network.stale_reads_as_current = as_current;
    s.faults = FaultKnobs {
        every: Some((ms(2), ms(20))),
        until: ms(3_000),
        pause_weight: 0,
        cut_weight: 1,
        crash_weight: 0,
        flush_weight: 0,
        ..FaultKnobs::default()
    };
    s.workload.ops_per_client = 4;
    s.workload.ttl = (ms(200), ms(300));
    s.workload.hold = (0.1, 1.0);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(10));
    s.time_limit = ms(5_000);
    s
}

/// The clock skew of [`clock_edge`]: rates `1 ± s` differ by `2s / (1 - s)` = 0.995% at most.
pub const EDGE_SKEW: f64 = 0.004_95;

/// The RedLock.net extension bug, natively: `GET == token` → `PEXPIRE` → 1; missing → `SET
/// token PX ttl` → 1 (resurrected); another token → 0.
fn resurrecting_extend(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let (Some(key), Some(token), Some(ttl)) = (k.first(), argv.first(), argv.get(1)) else {
        return ServerReply::error("ERR missing KEYS or ARGV");
    };
    let ttl = match millis_arg(ttl) {
        Ok(ttl) => ttl,
        Err(e) => return e,
    };
    match keys.get(key) {
        Ok(Some(v)) if v == token => ServerReply::Int(i64::from(keys.pexpire(key, ttl))),
        Ok(Some(_)) => ServerReply::Int(0),
        Ok(None) => {
            keys.set(key, token.clone(), Some(ttl));
            ServerReply::Int(1)
        }
        Err(e) => e.into(),
    }
}
