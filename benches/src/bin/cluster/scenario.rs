//! The scenarios (`serial`, `concurrent32`) and the two subjects they measure: the
//! redlock-tokio driver and the raw baseline. Subjects alternate in blocks within one run, so
//! load from elsewhere on the shared machine hits both alike. Timing is `std::time::Instant`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlock_tokio::{Redlock, ReleaseOutcome};
use tokio::task::JoinSet;

use crate::raw::RawClient;
use crate::stats::{Samples, Stopwatch};

/// How much each scenario runs; [`Plan::FULL`] by default, [`Plan::QUICK`] with `--quick`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Unmeasured cycles per subject before the first scenario.
    pub(crate) warmup: usize,
    /// Measured serial cycles per subject.
    pub(crate) serial_cycles: usize,
    /// Blocks the serial cycles are split into, alternating subjects.
    pub(crate) serial_blocks: usize,
    /// Tasks running cycles at once in `concurrent32`.
    pub(crate) workers: usize,
    /// Measured concurrent time per subject.
    pub(crate) concurrent_time: Duration,
    /// Rounds that time is split into, alternating subjects.
    pub(crate) concurrent_rounds: u32,
}

impl Plan {
    pub(crate) const FULL: Self = Self {
        warmup: 200,
        serial_cycles: 2_000,
        serial_blocks: 20,
        workers: 32,
        concurrent_time: Duration::from_secs(5),
        concurrent_rounds: 10,
    };

    pub(crate) const QUICK: Self = Self {
        warmup: 20,
        serial_cycles: 200,
        serial_blocks: 4,
        workers: 32,
        concurrent_time: Duration::from_secs(1),
        concurrent_rounds: 2,
    };
}

/// One implementation under test, with its own key space.
pub(crate) struct Subject {
    driver: Driver,
    name: &'static str,
    prefix: String,
    next_key: AtomicU64,
    /// False when `--subject` picked the other one: every scenario skips this one.
    pub(crate) enabled: bool,
}

enum Driver {
    Tokio(Redlock),
    Raw(RawClient),
}

impl Subject {
    pub(crate) fn tokio(redlock: Redlock, flavour: &str) -> Self {
        Self::new(Driver::Tokio(redlock), "tokio", flavour)
    }

    pub(crate) fn raw(raw: RawClient, flavour: &str) -> Self {
        Self::new(Driver::Raw(raw), "raw", flavour)
    }

    fn new(driver: Driver, name: &'static str, flavour: &str) -> Self {
        Self {
            driver,
            name,
            prefix: format!("bench:{}:{name}:{flavour}:", std::process::id()),
            next_key: AtomicU64::new(0),
            enabled: true,
        }
    }

    /// `tokio` or `raw`.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// A key no earlier cycle of this run used.
    fn fresh_key(&self) -> String {
        let n = self.next_key.fetch_add(1, Ordering::Relaxed);
        format!("{}{n}", self.prefix)
    }

    /// Acquires `key` and releases it; an error if either fails or takes over
    /// [`CYCLE_TIMEOUT`].
    async fn cycle(&self, key: String) -> Result<(), String> {
        let cycle = async {
            match &self.driver {
                Driver::Tokio(redlock) => {
                    let guard = redlock
                        .lock(key)
                        .await
                        .map_err(|e| format!("tokio: lock: {e}"))?;
                    let nodes = guard
                        .release()
                        .await
                        .map_err(|e| format!("tokio: release: {e}"))?;
                    if nodes.iter().all(|n| matches!(n, ReleaseOutcome::Released)) {
                        Ok(())
                    } else {
                        Err(format!("tokio: release: {nodes:?}"))
                    }
                }
                Driver::Raw(raw) => raw.cycle(key.as_bytes()).await,
            }
        };
        tokio::time::timeout(CYCLE_TIMEOUT, cycle)
            .await
            .map_err(|_| format!("a cycle took over {CYCLE_TIMEOUT:?}"))?
    }

    /// Runs `n` unmeasured cycles. Until the first succeeds, failures are retried for up to
    /// [`WARMUP_GRACE`]: the driver connects to the nodes in the background.
    pub(crate) async fn warm_up(&self, n: usize) -> Result<(), String> {
        let grace = Instant::now() + WARMUP_GRACE;
        let mut done = 0;
        while done < n {
            match self.cycle(self.fresh_key()).await {
                Ok(()) => done += 1,
                Err(_) if done == 0 && Instant::now() < grace => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(format!("warm-up: {e}")),
            }
        }
        Ok(())
    }
}

/// `serial`: one task, fresh key per cycle, cycles back to back. Returns the samples of
/// `subjects[0]` and `subjects[1]`.
pub(crate) async fn serial(
    subjects: &[Arc<Subject>; 2],
    plan: &Plan,
) -> Result<[Samples; 2], String> {
    let per_block = plan.serial_cycles.div_ceil(plan.serial_blocks);
    let mut out = [Samples::default(), Samples::default()];
    for block in 0..plan.serial_blocks {
        for i in order(block) {
            let subject = &subjects[i];
            if !subject.enabled {
                continue;
            }
            let mut samples = Samples::with_capacity(per_block);
            let start = Stopwatch::start();
            for _ in 0..per_block {
                let key = subject.fresh_key();
                let t0 = Instant::now();
                subject.cycle(key).await?;
                samples.push(t0.elapsed());
            }
            samples.add_block(&start);
            out[i].merge(samples);
        }
    }
    Ok(out)
}

/// `concurrent32`: `plan.workers` tasks, each running fresh-key cycles back to back until
/// the round's time is up. Cycles per second count every finished cycle over the wall time
/// from the first spawn to the last worker's end.
pub(crate) async fn concurrent(
    subjects: &[Arc<Subject>; 2],
    plan: &Plan,
) -> Result<[Samples; 2], String> {
    let slice = plan.concurrent_time / plan.concurrent_rounds;
    let mut out = [Samples::default(), Samples::default()];
    for round in 0..plan.concurrent_rounds as usize {
        for i in order(round) {
            if !subjects[i].enabled {
                continue;
            }
            let start = Stopwatch::start();
            let until = start.started() + slice;
            let mut workers = JoinSet::new();
            for _ in 0..plan.workers {
                workers.spawn(worker(Arc::clone(&subjects[i]), until));
            }
            let mut round_samples = Samples::default();
            while let Some(joined) = workers.join_next().await {
                let samples = joined.map_err(|e| format!("worker panicked: {e}"))??;
                round_samples.merge(samples);
            }
            round_samples.add_block(&start);
            out[i].merge(round_samples);
        }
    }
    Ok(out)
}

async fn worker(subject: Arc<Subject>, until: Instant) -> Result<Samples, String> {
    let mut samples = Samples::with_capacity(1024);
    while Instant::now() < until {
        let key = subject.fresh_key();
        let t0 = Instant::now();
        subject.cycle(key).await?;
        samples.push(t0.elapsed());
    }
    Ok(samples)
}

/// Which subject goes first in block `k`: they take turns.
fn order(k: usize) -> [usize; 2] {
    if k.is_multiple_of(2) { [0, 1] } else { [1, 0] }
}

/// One cycle taking longer means a node or the driver is stuck: stop the run.
const CYCLE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long warm-up waits for the first successful cycle.
const WARMUP_GRACE: Duration = Duration::from_secs(5);
