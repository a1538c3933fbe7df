//! The clock-rate check (docs/safety.md, "Checking the clock rates"): from a node's `TIME` readings, whether its clock
//! runs at a rate within the drift allowance of the client's monotonic clock, and whether
//! it stepped.
//!
//! Redlock is safe only if the clocks of the client and the nodes run at rates that differ
//! by less than `drift_factor` (docs/safety.md, "Assumptions"): a node's key expires after
//! `ttl` on the node's clock, and the client counts the lock valid for `ttl - drift` on its
//! own. This module checks that assumption from samples the client takes anyway; it holds
//! no connection and reads no clock (the caller passes every time).
//!
//! # A sample and its error
//!
//! A sample is `([sent, received], T)`: the client queued `TIME` at `sent` and read its
//! reply at `received`, both on its monotonic clock, and the reply says the node's clock
//! read `T`. The node read its clock at some client time `c` in `[sent, received]` (queued
//! before it was written, read after it was answered), and truncated the reading to a
//! microsecond. Nothing narrower is known, so every bound below holds for any `c` in that
//! interval and any truncation: the round trip *is* the sampling error.
//!
//! # The rate over a window
//!
//! For two samples `i` before `j` (`TIME` is never in flight twice, so `sent_j >=
//! received_i`), the node's clock advanced by `dn = T_j - T_i` (within a microsecond each
//! way) while the client's advanced by `dc` in `[sent_j - received_i, received_j - sent_i]`.
//! A node clock running at constant rate `r` against the client's gives `dn = r * dc`, so
//! `r` lies in `[(dn - 1 µs) / dc_max, (dn + 1 µs) / dc_min]` (as [`rate_bounds`] computes,
//! signs included). The width of that interval is about the two round trips divided by the
//! window, so a window must be long for the bound to say anything: a window closes once it
//! spans at least [`MIN_WINDOW`] *and* its interval is narrower than `drift_factor`
//! (longer, if round trips are long). Then:
//! - The check reports a rate only when the *whole* interval lies outside
//!   `[1 - drift_factor, 1 + drift_factor]`. A clock within the allowance is never
//!   reported, whatever the jitter (the true rate is always inside the interval): no false
//!   alarm, by construction rather than by tuning.
//! - A clock off by `2 * drift_factor` or more is always reported at the window's close:
//!   its interval contains its true rate and is narrower than `drift_factor`, so it cannot
//!   reach the allowance. Between one and two times the allowance, it depends on the round
//!   trips.
//!
//! Comparing the window's first and last samples, rather than fitting a line through all of
//! them, keeps the bound exact (a least-squares fit needs a noise model; round trips are not
//! Gaussian) and the state to two samples. The next window starts at the last sample.
//!
//! # Steps
//!
//! A step is a jump of the node's clock (a wall clock set by hand, or by a time daemon
//! stepping instead of slewing). Each new sample is compared with the one before it: with
//! the rates the node's clock may have (the allowance, widened to the rate last measured,
//! so that a clock already reported as fast is not reported again as stepping every
//! sample), the node's clock should have advanced by between `r_min * dc_min - 1 µs` and
//! `r_max * dc_max + 1 µs`. Outside that, by more than those bounds explain, the clock
//! stepped: forward or back, by at least the distance to the nearer bound. A step smaller
//! than the sampling error plus the allowed drift over one sampling period cannot be told
//! from jitter; if it repeats, it shows in the rate. A step starts a new window (the jump
//! is not a rate). Before any rate is measured the rate of the current window stands in;
//! a step within the very first interval cannot be told from a rate, and shows as one.

use std::time::{Duration, Instant};

/// How often, at most, a node's clock is sampled: one `TIME` per node per period, written
/// with a request that goes to the node anyway.
pub(crate) const SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// The shortest window a rate is measured over. Long enough that a round trip of a few
/// milliseconds bounds the rate to well under the default allowance (1%), and that a time
/// daemon's slewing (at most 0.05% for ntpd and chrony) averages out.
pub(crate) const MIN_WINDOW: Duration = Duration::from_secs(5);

/// The resolution of `TIME` (microseconds), in nanoseconds: each reading may be truncated
/// by up to this much.
const RESOLUTION_NS: f64 = 1_000.0;

/// One `TIME` reading: when it was asked and answered on the client's clock, and what the
/// node said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    sent: Instant,
    received: Instant,
    node: Duration,
}

/// What a sample showed about the node's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Finding {
    /// Over a window of `over`, the node's clock ran at a rate (node seconds per client
    /// second) in `[low, high]`, all of it outside the allowance.
    Rate { low: f64, high: f64, over: Duration },
    /// Between two samples the node's clock jumped, forward or back, by at least `by`
    /// beyond what the allowed rates and the round trips explain.
    Step { forward: bool, by: Duration },
}

/// The clock-rate check of one node (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct RateCheck {
    drift_factor: f64,
    /// The first sample of the current window.
    anchor: Option<Sample>,
    /// The latest sample.
    last: Option<Sample>,
    /// The rate interval of the last window that closed.
    measured: Option<(f64, f64)>,
    /// When the `TIME` in flight for this check was queued, if one is.
    asked: Option<Instant>,
    /// When the last `TIME` for this check was queued.
    last_asked: Option<Instant>,
}

impl RateCheck {
    /// A check with no samples, reporting rates outside `[1 - drift_factor, 1 +
    /// drift_factor]`.
    pub(crate) fn new(drift_factor: f64) -> Self {
        Self {
            drift_factor,
            anchor: None,
            last: None,
            measured: None,
            asked: None,
            last_asked: None,
        }
    }

    /// Whether a `TIME` should go out with a request at `now`: none is in flight for the
    /// check, and the last went out at least [`SAMPLE_PERIOD`] ago.
    #[inline]
    pub(crate) fn wants_sample(&self, now: Instant) -> bool {
        self.asked.is_none()
            && self
                .last_asked
                .is_none_or(|t| now.saturating_duration_since(t) >= SAMPLE_PERIOD)
    }

    /// A `TIME` was queued at `now`; its reply is the next sample.
    pub(crate) fn asked(&mut self, now: Instant) {
        self.asked = Some(now);
        self.last_asked = Some(now);
    }

    /// The connection closed: the `TIME` in flight will never be answered. Samples already
    /// taken stay (the node's clock is the same across connections).
    pub(crate) fn disconnected(&mut self) {
        self.asked = None;
    }

    /// The reply to a `TIME` was read at `now`: the node's clock reads `node` (or could not
    /// be read). Returns what the sample shows, if anything is wrong.
    pub(crate) fn answered(&mut self, now: Instant, node: Option<Duration>) -> Option<Finding> {
        let sent = self.asked.take()?;
        let sample = Sample {
            sent,
            received: now.max(sent),
            node: node?,
        };
        let Some(last) = self.last.replace(sample) else {
            self.anchor = Some(sample);
            return None;
        };
        let anchor = *self.anchor.get_or_insert(last);
        // The rates the node's clock may have: the allowance, widened to what was measured
        // (the last window, or the current one until a window closes).
        // With nothing measured yet and one sample in the window, a jump cannot be told
        // from a rate: the window's rate will say.
        let measured = self.measured.or_else(|| rate_bounds(anchor, last));
        if measured.is_some() || anchor != last {
            let (low, high) = self.allowed(measured);
            if let Some(step) = step(last, sample, low, high) {
                self.anchor = Some(sample);
                return Some(step);
            }
        }
        let over = sample.sent.saturating_duration_since(anchor.received);
        let (low, high) = rate_bounds(anchor, sample)?;
        // Written so that a NaN (never expected) keeps the window open.
        let precise = high - low < self.drift_factor;
        if over < MIN_WINDOW || !precise {
            return None;
        }
        self.anchor = Some(sample);
        self.measured = Some((low, high));
        let d = self.drift_factor;
        (low > 1.0 + d || high < 1.0 - d).then_some(Finding::Rate { low, high, over })
    }

    /// The allowance `[1 - d, 1 + d]`, widened to `measured`.
    fn allowed(&self, measured: Option<(f64, f64)>) -> (f64, f64) {
        let (mut low, mut high) = (1.0 - self.drift_factor, 1.0 + self.drift_factor);
        if let Some((l, h)) = measured {
            low = low.min(l);
            high = high.max(h);
        }
        (low.max(0.0), high)
    }
}

/// Nanoseconds in `d`, as a float (exact to 2^53 ns, about 104 days; beyond, to a few parts
/// in 10^16).
fn nanos(d: Duration) -> f64 {
    d.as_nanos() as f64
}

/// The node's clock advance from `a` to `b` in nanoseconds (negative if it went back), and
/// the client's least and most advance between the two readings.
fn advances(a: Sample, b: Sample) -> (f64, f64, f64) {
    let dn = if b.node >= a.node {
        nanos(b.node - a.node)
    } else {
        -nanos(a.node - b.node)
    };
    let dc_min = nanos(b.sent.saturating_duration_since(a.received));
    let dc_max = nanos(b.received.saturating_duration_since(a.sent));
    (dn, dc_min, dc_max)
}

/// The interval of rates (node seconds per client second) consistent with samples `a` then
/// `b`, if the client's clock surely advanced between them: `x / y` for every node advance
/// `x` in `dn ± 1 µs` and client advance `y` in `[dc_min, dc_max]`, `y > 0`. The least is
/// the lowest `x` over the largest `y` if that `x` is positive, over the smallest if not;
/// the most likewise.
fn rate_bounds(a: Sample, b: Sample) -> Option<(f64, f64)> {
    let (dn, dc_min, dc_max) = advances(a, b);
    if dc_min <= 0.0 {
        return None;
    }
    let (x0, x1) = (dn - RESOLUTION_NS, dn + RESOLUTION_NS);
    let low = if x0 >= 0.0 { x0 / dc_max } else { x0 / dc_min };
    let high = if x1 >= 0.0 { x1 / dc_min } else { x1 / dc_max };
    Some((low, high))
}

/// Whether the node's clock jumped between samples `a` and `b`, given that its rate lies in
/// `[low, high]` (`low >= 0`): its advance must lie in `[low * dc_min - 1 µs, high * dc_max
/// + 1 µs]`.
fn step(a: Sample, b: Sample, low: f64, high: f64) -> Option<Finding> {
    let (dn, dc_min, dc_max) = advances(a, b);
    let least = low * dc_min - RESOLUTION_NS;
    let most = high * dc_max + RESOLUTION_NS;
    let (forward, by) = if dn > most {
        (true, dn - most)
    } else if dn < least {
        (false, least - dn)
    } else {
        return None;
    };
    // `as` saturates: a reading of any size gives a (huge) step, never a panic.
    Some(Finding::Step {
        forward,
        by: Duration::from_nanos(by as u64),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const D: f64 = 0.01;
    const EPOCH_SECS: u64 = 1_700_000_000;

    /// A node clock: `rate` node seconds per client second, plus `step` from `step_at` on.
    struct NodeClock {
        rate: f64,
        step_at: Duration,
        step: i64,
    }

    impl NodeClock {
        fn with_rate(rate: f64) -> Self {
            Self {
                rate,
                step_at: Duration::MAX,
                step: 0,
            }
        }
        /// The reading at client time `t` since the start, truncated to microseconds.
        fn read(&self, t: Duration) -> Duration {
            let mut us = (t.as_micros() as f64 * self.rate) as i64 + EPOCH_SECS as i64 * 1_000_000;
            if t >= self.step_at {
                us += self.step;
            }
            Duration::from_micros(us.max(0) as u64)
        }
    }

    /// Samples `clock` every second for `secs` seconds: the read happens `fwd` after the
    /// ask, the reply is read `back` after that (each from `delays`, cycled). Returns the
    /// findings.
    fn run(clock: &NodeClock, secs: u64, delays: &[(u64, u64)]) -> Vec<Finding> {
        let start = crate::test_epoch::epoch();
        let mut check = RateCheck::new(D);
        let mut found = Vec::new();
        for i in 0..secs {
            let (fwd, back) = delays[i as usize % delays.len()];
            let asked = Duration::from_secs(i);
            let read = asked + Duration::from_micros(fwd);
            let answered = read + Duration::from_micros(back);
            assert!(check.wants_sample(start + asked));
            check.asked(start + asked);
            assert!(!check.wants_sample(start + asked));
            found.extend(check.answered(start + answered, Some(clock.read(read))));
        }
        found
    }

    fn rates(found: &[Finding]) -> usize {
        found
            .iter()
            .filter(|f| matches!(f, Finding::Rate { .. }))
            .count()
    }

    fn steps(found: &[Finding]) -> Vec<(bool, Duration)> {
        (found.iter())
            .filter_map(|f| match *f {
                Finding::Step { forward, by } => Some((forward, by)),
                Finding::Rate { .. } => None,
            })
            .collect()
    }

    const JITTER: &[(u64, u64)] = &[(100, 900), (4_000, 200), (50, 50), (2_500, 7_000)];

    #[test]
    fn good_clocks_and_half_the_allowance_are_quiet() {
        for rate in [1.0, 1.0 + D / 2.0, 1.0 - D / 2.0, 1.0 + 0.9 * D] {
            let found = run(&NodeClock::with_rate(rate), 120, JITTER);
            assert!(found.is_empty(), "rate {rate}: {found:?}");
        }
    }

    #[test]
    fn twice_and_ten_times_the_allowance_are_reported() {
        for rate in [1.0 + 2.0 * D, 1.0 - 2.0 * D, 1.0 + 10.0 * D, 1.0 - 10.0 * D] {
            let found = run(&NodeClock::with_rate(rate), 30, JITTER);
            assert!(rates(&found) >= 1, "rate {rate}: {found:?}");
            assert!(steps(&found).is_empty(), "rate {rate}: {found:?}");
            let Finding::Rate { low, high, over } = found[0] else {
                unreachable!()
            };
            assert!(
                low <= rate && rate <= high && over >= MIN_WINDOW,
                "{found:?}"
            );
        }
    }

    #[test]
    fn steps_either_way_are_reported_once() {
        for step in [200_000, -200_000, 50_000_000, -50_000_000] {
            let clock = NodeClock {
                rate: 1.0,
                step_at: Duration::from_millis(20_500),
                step,
            };
            let found = run(&clock, 60, JITTER);
            assert_eq!(rates(&found), 0, "{found:?}");
            let steps = steps(&found);
            assert_eq!(steps.len(), 1, "{found:?}");
            let (forward, by) = steps[0];
            assert_eq!(forward, step > 0);
            // At least the step less the error bars (the allowance over a second, round
            // trips), at most the step.
            let size = Duration::from_micros(step.unsigned_abs());
            assert!(
                by <= size && by + Duration::from_millis(30) >= size,
                "{by:?}"
            );
        }
    }

    #[test]
    fn a_step_within_the_allowance_over_a_period_is_not_one() {
        let clock = NodeClock {
            rate: 1.0,
            step_at: Duration::from_millis(20_500),
            step: 5_000,
        };
        assert!(run(&clock, 60, &[(10, 10)]).is_empty());
    }

    #[test]
    fn a_fast_clock_is_not_also_a_stepping_one() {
        // After its rate is measured, each second's extra 100 ms is the rate, not a step.
        let found = run(&NodeClock::with_rate(1.1), 60, JITTER);
        assert!(steps(&found).is_empty() && rates(&found) >= 5, "{found:?}");
    }

    #[test]
    fn garbage_readings_never_panic() {
        let start = crate::test_epoch::epoch();
        let mut check = RateCheck::new(D);
        let readings = [
            Some(Duration::ZERO),
            Some(Duration::from_secs(u64::from(u32::MAX))),
            None,
            Some(Duration::ZERO),
            Some(Duration::from_micros(1)),
            Some(Duration::from_secs(u64::from(u32::MAX))),
        ];
        for (i, reading) in readings.iter().cycle().take(60).enumerate() {
            let now = start + Duration::from_secs(i as u64);
            check.asked(now);
            // Answered at the same instant, and later.
            let _ = check.answered(now, *reading);
            check.asked(now);
            let _ = check.answered(now + Duration::from_millis(3), *reading);
        }
        // A reply without an ask is no sample.
        assert_eq!(check.answered(start, Some(Duration::ZERO)), None);
    }

    #[test]
    fn a_lost_reply_is_no_sample() {
        let start = crate::test_epoch::epoch();
        let mut check = RateCheck::new(D);
        check.asked(start);
        check.disconnected();
        assert!(check.wants_sample(start + SAMPLE_PERIOD));
        assert!(!check.wants_sample(start + SAMPLE_PERIOD / 2));
        assert_eq!(check.answered(start, Some(Duration::ZERO)), None);
        assert_eq!(check.last, None);
    }

    proptest! {
        /// A clock whose rate is within the allowance is never reported, whatever the
        /// round trips (up to 50 ms each way) and the gaps between samples.
        #[test]
        fn a_clock_within_the_allowance_never_triggers(
            rate in (1.0 - D)..(1.0 + D),
            samples in proptest::collection::vec(
                (0u64..50_000, 0u64..50_000, 0u64..3_000_000), 2..80),
        ) {
            let clock = NodeClock::with_rate(rate);
            let start = crate::test_epoch::epoch();
            let mut check = RateCheck::new(D);
            let mut t = Duration::ZERO;
            for (fwd, back, gap) in samples {
                let read = t + Duration::from_micros(fwd);
                let answered = read + Duration::from_micros(back);
                check.asked(start + t);
                let found = check.answered(start + answered, Some(clock.read(read)));
                prop_assert_eq!(found, None);
                t = answered + Duration::from_micros(gap);
            }
        }
    }
}
