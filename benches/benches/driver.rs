//! The driver layer's share of a lock cycle, without sockets: a `Handle`'s `lock()` and
//! `release()` futures, through `Waiters` (and its `Observer`) and the core, on 5 nodes that
//! the bench plays, with the loop's hooks called exactly as `IoLoop` and the blocking
//! driver call them.
//!
//! Built plain, with `--features tracing` (and no subscriber) or with `--features metrics`
//! (and no recorder), the difference is what observation costs when nobody listens; see
//! README.md, "Observability". `REDLOCK_DRIVER_BENCH_CYCLES=N` runs N cycles and exits
//! instead of running criterion, for callgrind.

use redlock_benches::own_run_id;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use redlock_core::{
    Client, ConnId, EXTEND_SCRIPT, Input, Output, QUEUE_ACQUIRE_SCRIPT, QUEUE_LEAVE_SCRIPT,
    QUEUE_RELEASE_SCRIPT, RELEASE_SCRIPT, ReleaseOutcome,
};
use redlock_driver::{DriverParts, DriverRng, Handle, Setup, Waiters};

fn main() {
    let mut bench = Bench::connected();
    let lock = bench.cycle(RESOURCES[0]);
    // A release reports at its quorum: later nodes may still be pending.
    let released = lock
        .iter()
        .filter(|o| **o == ReleaseOutcome::Released)
        .count();
    assert!(
        released > NODES / 2
            && (lock.iter())
                .all(|o| matches!(o, ReleaseOutcome::Released | ReleaseOutcome::Pending)),
        "one whole cycle: {lock:?}"
    );
    if let Some(n) = std::env::var_os("REDLOCK_DRIVER_BENCH_CYCLES") {
        let n: usize = n.to_string_lossy().parse().expect("a cycle count");
        for k in 0..n {
            black_box(bench.cycle(RESOURCES[k % RESOURCES.len()]));
        }
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("driver_cycle_5_nodes");
    group.throughput(Throughput::Elements(1));
    let mut k = 0;
    group.bench_function(FEATURES, |b| {
        b.iter(|| {
            k = (k + 1) % RESOURCES.len();
            black_box(bench.cycle(RESOURCES[k]))
        });
    });
    group.finish();
    c.final_summary();
}

/// The bench's name: which features the driver layer was built with.
const FEATURES: &str = match (cfg!(feature = "tracing"), cfg!(feature = "metrics")) {
    (false, false) => "acquire_release",
    (true, false) => "acquire_release_tracing",
    (false, true) => "acquire_release_metrics",
    (true, true) => "acquire_release_tracing_metrics",
};

/// A handle, and the loop it sends to.
struct Bench {
    handle: Handle,
    driver: Loop,
}

/// The loop's parts, and the 5 connections, all up and idle.
struct Loop {
    parts: DriverParts,
    waiters: Waiters,
    conns: Vec<ConnId>,
    now: Instant,
}

impl Bench {
    /// Connects the 5 nodes, answering each one's `HELLO` (as Redis 7) and script loads.
    fn connected() -> Self {
        let urls = (0..NODES).map(|i| format!("127.0.0.1:{}", 7001 + i));
        // The nodes answer a scripted cycle: no clock-rate samples (see the core bench for
        // their cost).
        let (handle, parts) = (Setup::from_urls(urls).expect("urls"))
            .config(|c| c.clock_check(None))
            .build(Instant::now)
            .expect("a valid configuration");
        let mut driver = Loop {
            parts,
            waiters: Waiters::new(),
            conns: Vec::new(),
            now: Instant::now(),
        };
        driver.drain();
        assert_eq!(driver.conns.len(), NODES, "a connection asked for per node");
        for conn in driver.conns.clone() {
            let now = driver.tick();
            driver.feed(Input::Connected { now, conn });
            // The release and extend scripts, and the waiters' queue's three (on by default).
            let loads = [
                own_run_id(HELLO_REDIS7, conn.node().index()),
                sha(&RELEASE_SCRIPT),
                sha(&EXTEND_SCRIPT),
                sha(&QUEUE_ACQUIRE_SCRIPT),
                sha(&QUEUE_LEAVE_SCRIPT),
                sha(&QUEUE_RELEASE_SCRIPT),
            ];
            for reply in loads {
                let now = driver.tick();
                driver.feed(Input::Received {
                    now,
                    conn,
                    bytes: &reply,
                });
            }
        }
        Self { handle, driver }
    }

    /// One `lock()` and `release()`: each future sends its request, the loop feeds it to
    /// the core, every node answers, and the future resolves.
    fn cycle(&mut self, resource: &'static str) -> Vec<ReleaseOutcome> {
        let lock = self.handle.lock(resource);
        let guard = self.driver.run(lock, b"+OK\r\n").expect("locked");
        self.driver
            .run(guard.release(), b":1\r\n")
            .expect("released")
    }
}

impl Loop {
    /// Polls `request` (it sends its command), runs the loop on that command and on
    /// `reply` from every node, and polls it again for its answer.
    fn run<T>(&mut self, request: impl Future<Output = T>, reply: &[u8]) -> T {
        let mut request = pin!(request);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            request.as_mut().poll(&mut cx).is_pending(),
            "answered at once"
        );
        let cmd = self.parts.commands.try_recv().expect("a command");
        let now = self.tick();
        self.waiters.command(now, &mut self.parts.client, cmd);
        self.drain();
        for conn in self.conns.clone() {
            let now = self.tick();
            self.feed(Input::Received {
                now,
                conn,
                bytes: reply,
            });
        }
        match request.as_mut().poll(&mut cx) {
            Poll::Ready(answer) => answer,
            Poll::Pending => panic!("no answer after every node replied"),
        }
    }

    /// Feeds one input, observed first, then drains: the drivers' `feed`.
    fn feed(&mut self, input: Input<'_>) {
        let client = &mut self.parts.client;
        self.waiters.observer().input(client, &input);
        client.handle_input(input).expect("drained");
        self.drain();
    }

    /// Acts on every output, each observed first: the drivers' `drain`, writing nowhere.
    fn drain(&mut self) {
        let client: &mut Client<DriverRng> = &mut self.parts.client;
        loop {
            let output = client.poll_output();
            self.waiters.observer().output(client, &output);
            match output {
                Output::Transmit(t) => drop(black_box(t)),
                Output::Connect(conn) => self.conns.push(conn),
                Output::Disconnect(conn) => panic!("{conn} closed"),
                Output::Event(event) => self.waiters.dispatch(event),
                Output::Timeout(_) | Output::Idle => break,
            }
        }
    }

    /// The loop's clock: a few µs per input.
    fn tick(&mut self) -> Instant {
        self.now += STEP;
        self.now
    }
}

/// A script load's reply: the script's SHA1.
fn sha(script: &redlock_core::Script) -> Vec<u8> {
    format!("${}\r\n{}\r\n", script.sha1.len(), script.sha1).into_bytes()
}

const NODES: usize = 5;
const STEP: Duration = Duration::from_micros(3);
/// The `HELLO` reply of a Redis 7 (trimmed to what the client reads), its `TIME`, and the
/// restart quarantine's `INFO server` and `CONFIG GET` (a node up for a day: no quarantine).
const HELLO_REDIS7: &[u8] = b"*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n\
    7.0.15\r\n*2\r\n$10\r\n1795190400\r\n$1\r\n0\r\n\
    $37\r\nrun_id:abc\r\nuptime_in_seconds:86400\r\n\r\n*0\r\n";

const RESOURCES: [&str; 8] = [
    "bench:0", "bench:1", "bench:2", "bench:3", "bench:4", "bench:5", "bench:6", "bench:7",
];
