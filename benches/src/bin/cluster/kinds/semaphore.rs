//! `kinds`' semaphore in use: [`CONTENDERS`] tasks share one handle and loop on one
//! semaphore of [`PERMITS`] permits (acquire with a wait, hold [`HOLD`], release). Each
//! contender logs when it starts to wait, gets a permit, leaves its section and has its
//! release answered; [`analyse`] turns the log into the permits in use, time-weighted, over
//! the time some contender waits (benches/README.md, "Lock kinds"). It measures the bench
//! process's view: a permit counts from the lock call's return to the release call.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_core::{LockKind, LockOptions, RetryPolicy};
use redlock_tokio::{LockError, Redlock};
use tokio::task::JoinSet;

use super::PERMITS;
use crate::held::{on_nodes, script_calls};
use crate::scenario::{Plan, all_released};
use crate::stats::Samples;

/// One semaphore run: its shape, what the contenders saw, and the permits in use.
#[derive(Debug, Clone)]
pub(crate) struct SemaphoreRow {
    pub(crate) permits: u32,
    pub(crate) contenders: usize,
    /// The measured window: from [`SETTLE`] after the start to the stop.
    pub(crate) window: Duration,
    pub(crate) in_use: InUse,
    /// Every lock call's wait, from the call to the permit.
    pub(crate) waits: Samples,
    /// Every section's length, from the permit to leaving (the hold, as slept).
    pub(crate) sections: Samples,
    /// Attempts per permit (`AcquireStats::attempts`), one entry per permit.
    pub(crate) attempts: Vec<u32>,
    /// Lock calls that ended without a permit (their wait ran out); the contender waits again.
    pub(crate) gave_up: u64,
    /// Why the first call that gave up did (`AcquireFailure`'s text).
    pub(crate) gave_up_reason: Option<String>,
    /// Permits each contender got, in contender order.
    pub(crate) per_contender: Vec<u64>,
    /// Scripts (`EVALSHA`, `EVAL`) the nodes ran during the run, all nodes together.
    pub(crate) node_scripts: u64,
}

/// What the log shows over the window (see [`analyse`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct InUse {
    /// Time of the window during which at least one contender waited.
    pub(crate) queued: Duration,
    /// Time-weighted mean of the contenders between a permit and leaving their section, over
    /// `queued`.
    pub(crate) in_section: f64,
    /// The same until their release call returned (the permit is on the nodes until then).
    pub(crate) held: f64,
    /// Permits granted within the window.
    pub(crate) acquired: u64,
    /// Most contenders in their section at once, over the whole run (at most k).
    pub(crate) most_in_section: u32,
}

/// One step of a contender, as the log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// A lock call started: one more waiter.
    Queued,
    /// The call returned a permit: one waiter less, one more holder in its section.
    Acquired,
    /// The call returned without a permit: one waiter less.
    GaveUp,
    /// The holder left its section and calls release.
    Left,
    /// The release call returned.
    Released,
}

/// Runs the contenders on `redlock` for `plan.contended_time` (after which each finishes
/// its cycle) and analyses their log; counts the scripts the nodes at `addrs` ran meanwhile.
pub(super) async fn run(
    redlock: &Redlock,
    addrs: &[SocketAddr],
    plan: &Plan,
) -> Result<SemaphoreRow, String> {
    let key = format!("bench:{}:kinds:semaphore", std::process::id());
    let retry = RetryPolicy {
        max_attempts: None,
        max_wait: Some(MAX_WAIT),
        ..RetryPolicy::default()
    };
    let options = LockOptions::default()
        .kind(LockKind::semaphore(PERMITS))
        .retry(retry);
    let scripts_before = on_nodes(addrs, script_calls).await?;
    let log = Arc::new(Log::new());
    let stop = log.start + plan.contended_time;
    let mut workers = JoinSet::new();
    for _ in 0..CONTENDERS {
        let contender = Contender {
            redlock: redlock.clone(),
            key: key.clone(),
            options: options.clone(),
            log: Arc::clone(&log),
        };
        workers.spawn(async move { contender.contend(stop).await });
    }
    let mut total = Tally::default();
    let joined = tokio::time::timeout(plan.contended_time + JOIN_BOUND, async {
        while let Some(joined) = workers.join_next().await {
            let tally = joined.map_err(|e| format!("kinds: semaphore: contender: {e}"))??;
            total.merge(tally);
        }
        Ok::<_, String>(())
    });
    joined.await.map_err(|_| {
        format!("kinds: semaphore: contenders not done within {JOIN_BOUND:?} of the stop")
    })??;
    let events = log.take();
    let scripts_after = on_nodes(addrs, script_calls).await?;
    let end = plan.contended_time;
    Ok(SemaphoreRow {
        permits: PERMITS,
        contenders: CONTENDERS,
        window: end.saturating_sub(SETTLE),
        in_use: analyse(&events, SETTLE, end),
        waits: total.waits,
        sections: total.sections,
        attempts: total.attempts,
        gave_up: total.gave_up,
        gave_up_reason: total.gave_up_reason,
        per_contender: total.per_contender,
        node_scripts: (scripts_after.iter().sum::<u64>())
            .saturating_sub(scripts_before.iter().sum()),
    })
}

/// The permits in use from `events` (time since the start, in the order they happened)
/// over `[from, to)`: between two events the counts are constant; each such interval, cut to
/// the window, counts if at least one contender waits in it, weighted by its length.
pub(crate) fn analyse(events: &[(Duration, Change)], from: Duration, to: Duration) -> InUse {
    let (mut waiting, mut in_section, mut held) = (0i64, 0i64, 0i64);
    let mut out = InUse {
        queued: Duration::ZERO,
        in_section: 0.0,
        held: 0.0,
        acquired: 0,
        most_in_section: 0,
    };
    let (mut section_time, mut held_time) = (0.0, 0.0);
    let mut since = Duration::ZERO;
    let ends = events.iter().map(|&(t, c)| (t, Some(c)));
    for (t, change) in ends.chain([(to, None)]) {
        let span = t.min(to).saturating_sub(since.max(from));
        if waiting > 0 && !span.is_zero() {
            out.queued += span;
            section_time += span.as_secs_f64() * in_section as f64;
            held_time += span.as_secs_f64() * held as f64;
        }
        since = since.max(t);
        let Some(change) = change else { break };
        match change {
            Change::Queued => waiting += 1,
            Change::Acquired => {
                waiting -= 1;
                in_section += 1;
                held += 1;
                out.acquired += u64::from((from..to).contains(&t));
            }
            Change::GaveUp => waiting -= 1,
            Change::Left => in_section -= 1,
            Change::Released => held -= 1,
        }
        out.most_in_section = out
            .most_in_section
            .max(u32::try_from(in_section).unwrap_or(0));
    }
    let queued = out.queued.as_secs_f64();
    if queued > 0.0 {
        out.in_section = section_time / queued;
        out.held = held_time / queued;
    }
    out
}

/// The contenders' shared log: each change with its time since the start, in the order
/// they happened (the time is read under the lock).
struct Log {
    start: Instant,
    events: Mutex<Vec<(Duration, Change)>>,
}

impl Log {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            events: Mutex::new(Vec::with_capacity(1 << 16)),
        }
    }

    fn record(&self, change: Change) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.push((self.start.elapsed(), change));
    }

    fn take(&self) -> Vec<(Duration, Change)> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One contender's numbers.
#[derive(Default)]
struct Tally {
    waits: Samples,
    sections: Samples,
    attempts: Vec<u32>,
    gave_up: u64,
    gave_up_reason: Option<String>,
    per_contender: Vec<u64>,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        self.per_contender.push(other.attempts.len() as u64);
        self.waits.merge(other.waits);
        self.sections.merge(other.sections);
        self.attempts.extend(other.attempts);
        self.gave_up += other.gave_up;
        self.gave_up_reason = self.gave_up_reason.take().or(other.gave_up_reason);
    }
}

/// One contender task's handle, resource, options and the shared log.
struct Contender {
    redlock: Redlock,
    key: String,
    options: LockOptions,
    log: Arc<Log>,
}

impl Contender {
    /// Cycles until `stop` (at most [`MAX_CALLS`] lock calls): wait for a permit, hold it
    /// [`HOLD`], release it. A call without a permit counts as given up and waits again.
    async fn contend(self, stop: Instant) -> Result<Tally, String> {
        let mut tally = Tally::default();
        for _ in 0..MAX_CALLS {
            if Instant::now() >= stop {
                break;
            }
            self.log.record(Change::Queued);
            let t0 = Instant::now();
            let call = self
                .redlock
                .lock_with(self.key.clone(), self.options.clone());
            let guard = match tokio::time::timeout(CALL_BOUND, call).await {
                Ok(Ok(guard)) => guard,
                Ok(Err(LockError::Acquire { reason, .. })) => {
                    self.log.record(Change::GaveUp);
                    tally.gave_up += 1;
                    tally
                        .gave_up_reason
                        .get_or_insert_with(|| reason.to_string());
                    continue;
                }
                Ok(Err(e)) => return Err(format!("kinds: semaphore: lock: {e}")),
                Err(_) => return Err(format!("kinds: semaphore: a lock call over {CALL_BOUND:?}")),
            };
            self.log.record(Change::Acquired);
            let acquired = Instant::now();
            tally.waits.push(acquired - t0);
            tally.attempts.push(guard.stats().attempts);
            tokio::time::sleep(HOLD).await;
            tally.sections.push(acquired.elapsed());
            self.log.record(Change::Left);
            let release = tokio::time::timeout(CALL_BOUND, guard.release());
            let nodes = (release.await)
                .map_err(|_| format!("kinds: semaphore: a release over {CALL_BOUND:?}"))?
                .map_err(|e| format!("kinds: semaphore: release: {e}"))?;
            self.log.record(Change::Released);
            all_released("kinds: semaphore", &nodes)?;
        }
        Ok(tally)
    }
}

/// Contenders for the [`PERMITS`] permits: twice as many, so half of them wait.
pub(crate) const CONTENDERS: usize = 16;

/// How long a contender holds its permit (`tokio::time::sleep`: 20 to 21 ms, its timer
/// counts whole milliseconds).
pub(crate) const HOLD: Duration = Duration::from_millis(20);

/// The start of the run left out of the window: the first permits go out in one burst.
pub(crate) const SETTLE: Duration = Duration::from_millis(200);

/// A lock call's wait: no limit on attempts, this much in all (the default delays between
/// attempts; a release notification starts the next one early).
const MAX_WAIT: Duration = Duration::from_secs(2);

/// A lock or release call taking longer means a node or the driver is stuck.
const CALL_BOUND: Duration = Duration::from_secs(5);

/// How long after the stop the contenders may take to finish their cycle.
const JOIN_BOUND: Duration = Duration::from_secs(10);

/// Lock calls per contender at most, whatever the time.
const MAX_CALLS: usize = 100_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn counts_only_time_with_a_waiter_inside_the_window() {
        use Change::*;
        // Two contenders, one permit's worth each: A holds 0–10, B waits 2–10 then holds
        // 10–20 while nobody waits; A's release answers at 12.
        let events = [
            (ms(0), Queued),
            (ms(0), Acquired),
            (ms(2), Queued),
            (ms(10), Left),
            (ms(10), Acquired),
            (ms(12), Released),
            (ms(20), Left),
        ];
        let a = analyse(&events, ms(1), ms(30));
        // Queued from 2 to 10 only, with A in its section the whole time.
        assert_eq!(a.queued, ms(8));
        assert!((a.in_section - 1.0).abs() < 1e-9);
        assert!((a.held - 1.0).abs() < 1e-9);
        assert_eq!((a.acquired, a.most_in_section), (1, 1));
        // A window that starts at 6: half of the queued time left.
        let b = analyse(&events, ms(6), ms(30));
        assert_eq!(b.queued, ms(4));
    }

    #[test]
    fn a_gap_between_holders_lowers_the_mean() {
        use Change::*;
        // One waiter throughout; the one holder leaves at 10, the next gets in at 12.
        let events = [
            (ms(0), Queued),
            (ms(0), Queued),
            (ms(0), Acquired),
            (ms(10), Left),
            (ms(11), Released),
            (ms(12), Acquired),
            (ms(12), Queued),
        ];
        let a = analyse(&events, ms(0), ms(20));
        assert_eq!(a.queued, ms(20));
        // In section 18 of 20 ms; held (until the release returned) 19 of 20.
        assert!((a.in_section - 0.9).abs() < 1e-9, "{a:?}");
        assert!((a.held - 0.95).abs() < 1e-9, "{a:?}");
        assert_eq!(analyse(&[], ms(0), ms(5)).queued, Duration::ZERO);
    }
}
