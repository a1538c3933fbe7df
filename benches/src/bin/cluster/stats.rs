//! Latency samples and their summary (p50, p99, cycles per second, CPU and context switches
//! per cycle), and the CPU time of the process and of the nodes, and the process's RSS. Plain nearest-rank
//! percentiles over every sample; no histograms, no outlier rejection.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Cycle latencies in nanoseconds, plus the wall time, the process's CPU time and the nodes'
/// CPU time they took together.
#[derive(Debug, Default, Clone)]
pub(crate) struct Samples {
    nanos: Vec<u64>,
    wall: Duration,
    cpu: Duration,
    server_cpu: Duration,
    /// Times this process's threads were switched onto a CPU.
    switches: u64,
}

/// What the report prints for one driver in one scenario.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Summary {
    pub(crate) cycles: usize,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) ops_per_s: f64,
    /// CPU time of this process (all threads: driver, workers, runtime) per cycle; the
    /// nodes' CPU is not in it.
    pub(crate) cpu_per_cycle: Duration,
    /// CPU time of the nodes' processes (all threads of all nodes, see [`watch_servers`])
    /// per cycle.
    pub(crate) server_cpu_per_cycle: Duration,
    /// Times a thread of this process was switched onto a CPU, per cycle: one per wake-up
    /// after a sleep (a parked runtime thread, a blocked caller) or a preemption.
    pub(crate) switches_per_cycle: f64,
    /// The latencies at fixed fractions, for the charts (`charts/cdf.rs`).
    pub(crate) cdf: Cdf,
}

/// Latencies at the fixed fractions [`Cdf::fraction`] of the sorted samples (nearest rank):
/// the shape of the whole distribution in [`CDF_POINTS`] numbers, however many samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cdf {
    /// Nanoseconds at each fraction; all zero when there were no samples.
    nanos: [u64; CDF_POINTS],
}

impl Cdf {
    /// The fraction of point `i`: 0, 0.01, ..., 0.99, then 0.995, 0.999 and 1 (the maximum),
    /// so the tail past p99 has points of its own.
    pub(crate) fn fraction(i: usize) -> f64 {
        match i {
            0..=99 => i as f64 / 100.0,
            100 => 0.995,
            101 => 0.999,
            _ => 1.0,
        }
    }

    /// (fraction, latency) at every point, or nothing when there were no samples.
    pub(crate) fn points(&self) -> impl Iterator<Item = (f64, Duration)> + '_ {
        let any = self.nanos[CDF_POINTS - 1] > 0;
        (self.nanos.iter().enumerate())
            .filter(move |_| any)
            .map(|(i, &n)| (Self::fraction(i), Duration::from_nanos(n)))
    }

    fn of(sorted: &[u64]) -> Self {
        let mut nanos = [0; CDF_POINTS];
        if !sorted.is_empty() {
            for (i, n) in nanos.iter_mut().enumerate() {
                // Nearest rank: the smallest sample with at least this fraction at or below it.
                let rank = (sorted.len() as f64 * Self::fraction(i)).ceil() as usize;
                *n = sorted[rank.clamp(1, sorted.len()) - 1];
            }
        }
        Self { nanos }
    }
}

impl Samples {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            nanos: Vec::with_capacity(n),
            wall: Duration::ZERO,
            cpu: Duration::ZERO,
            server_cpu: Duration::ZERO,
            switches: 0,
        }
    }

    pub(crate) fn push(&mut self, latency: Duration) {
        self.nanos
            .push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Adds another block's samples and wall time (blocks run one after the other).
    pub(crate) fn merge(&mut self, other: Self) {
        self.nanos.extend(other.nanos);
        self.wall += other.wall;
        self.cpu += other.cpu;
        self.server_cpu += other.server_cpu;
        self.switches += other.switches;
    }

    /// Adds the wall time and CPU time of a block, from `start` taken before it.
    pub(crate) fn add_block(&mut self, start: &Stopwatch) {
        self.wall += start.wall.elapsed();
        let (cpu, switches) = process_cpu();
        self.cpu += cpu.saturating_sub(start.cpu);
        self.switches += switches.saturating_sub(start.switches);
        self.server_cpu += server_cpu().saturating_sub(start.server_cpu);
    }

    pub(crate) fn len(&self) -> usize {
        self.nanos.len()
    }

    pub(crate) fn summary(mut self) -> Summary {
        self.nanos.sort_unstable();
        let secs = self.wall.as_secs_f64();
        let per_cycle = |d: Duration| {
            d.checked_div(u32::try_from(self.nanos.len()).unwrap_or(u32::MAX))
                .unwrap_or_default()
        };
        Summary {
            cycles: self.nanos.len(),
            p50: percentile(&self.nanos, 50),
            p99: percentile(&self.nanos, 99),
            ops_per_s: if secs > 0.0 {
                self.nanos.len() as f64 / secs
            } else {
                0.0
            },
            cpu_per_cycle: per_cycle(self.cpu),
            server_cpu_per_cycle: per_cycle(self.server_cpu),
            switches_per_cycle: if self.nanos.is_empty() {
                0.0
            } else {
                self.switches as f64 / self.nanos.len() as f64
            },
            cdf: Cdf::of(&self.nanos),
        }
    }
}

/// Wall clock, process CPU time and the nodes' CPU time at the start of a block.
pub(crate) struct Stopwatch {
    wall: Instant,
    cpu: Duration,
    server_cpu: Duration,
    switches: u64,
}

impl Stopwatch {
    pub(crate) fn start() -> Self {
        let server_cpu = server_cpu();
        let (cpu, switches) = process_cpu();
        Self {
            server_cpu,
            cpu,
            switches,
            wall: Instant::now(),
        }
    }

    /// When the block started.
    pub(crate) fn started(&self) -> Instant {
        self.wall
    }
}

/// The node processes whose CPU time the blocks measure from now on (replacing any earlier
/// ones: each cluster sets its own when it starts).
static SERVER_PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Measures the CPU time of these node processes in every block from now on.
pub(crate) fn watch_servers(pids: impl IntoIterator<Item = u32>) {
    let mut watched = SERVER_PIDS.lock().unwrap_or_else(|e| e.into_inner());
    *watched = pids.into_iter().collect();
}

/// CPU time of every live thread of the watched node processes (see [`watch_servers`]):
/// `/proc/PID/task/*/schedstat`, nanoseconds, no tick rounding. Zero where unreadable.
fn server_cpu() -> Duration {
    let pids = SERVER_PIDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    pids.iter()
        .map(|pid| tasks_cpu(&format!("/proc/{pid}/task")).0)
        .sum()
}

/// CPU time of every live thread of this process and the times they were switched onto a
/// CPU, from `/proc/self/task/*/schedstat`; zero where that is unreadable, e.g. off Linux.
fn process_cpu() -> (Duration, u64) {
    tasks_cpu("/proc/self/task")
}

/// The summed first and third fields of `DIR/*/schedstat`: nanoseconds on CPU, and times
/// switched onto a CPU (the kernel's `pcount`, which counts every switch-in).
fn tasks_cpu(dir: &str) -> (Duration, u64) {
    let Ok(tasks) = std::fs::read_dir(dir) else {
        return (Duration::ZERO, 0);
    };
    let (nanos, switches) = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| {
            let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
            Some((fields.next()??, fields.nth(1)??))
        })
        .fold((0, 0), |(n, s), (cpu, runs)| (n + cpu, s + runs));
    (Duration::from_nanos(nanos), switches)
}

/// Resident set size of this process (`VmRSS` in `/proc/self/status`) in bytes; zero where
/// that is unreadable, e.g. off Linux.
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
            line.split_whitespace().next()?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Points in a [`Cdf`]: every hundredth, then 0.995, 0.999 and 1.
const CDF_POINTS: usize = 103;

/// Nearest-rank percentile of sorted samples; zero when there are none.
fn percentile(sorted: &[u64], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    Duration::from_nanos(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut s = Samples::with_capacity(100);
        for i in (1..=100).rev() {
            s.push(Duration::from_nanos(i));
        }
        s.wall = Duration::from_secs(2);
        let sum = s.summary();
        assert_eq!(sum.p50, Duration::from_nanos(50));
        assert_eq!(sum.p99, Duration::from_nanos(99));
        assert_eq!(sum.cycles, 100);
        assert!((sum.ops_per_s - 50.0).abs() < 1e-9);
        assert_eq!(Samples::default().summary().p99, Duration::ZERO);
        // The CDF agrees with the percentiles and ends at the maximum.
        let points: Vec<(f64, Duration)> = sum.cdf.points().collect();
        assert_eq!(points.len(), CDF_POINTS);
        assert_eq!(points[0], (0.0, Duration::from_nanos(1)));
        assert_eq!(points[50].1, sum.p50);
        assert_eq!(points[99].1, sum.p99);
        assert_eq!(points[CDF_POINTS - 1], (1.0, Duration::from_nanos(100)));
        assert!(
            points
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1)
        );
        assert_eq!(Samples::default().summary().cdf.points().count(), 0);
    }

    #[test]
    fn reads_rss_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(rss_bytes() > 0);
        }
    }
}
