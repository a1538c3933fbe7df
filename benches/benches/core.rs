//! Benchmarks of the sans-IO core alone: one acquire + release cycle on 5 nodes through
//! [`Client`], and the reply [`Decoder`] on pipelined input, each with its allocation count.
//!
//! No sockets and no nodes: the bench plays the driver and the nodes, so the numbers are the
//! core's own cost. Network round trips, which dominate a real lock, are not measured here.

// Only for the counting allocator below: `GlobalAlloc` is an unsafe trait.
#![allow(unsafe_code)]

use redlock_benches::own_run_id;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chacha20::ChaCha20Rng;
use criterion::{Criterion, Throughput};
use rand_core::SeedableRng;
use redlock_core::{
    AcquireOutcome, Client, ClockCheck, Config, ConnId, DEFAULT_MAX_READ_BUFFER,
    DEFAULT_MAX_REPLY_SIZE, Decoder, EXTEND_SCRIPT, Event, Input, NodeId, OpId, Output,
    RELEASE_SCRIPT, ReleaseOutcome, Resource,
};

/// Counts every allocation (and reallocation) made by this process, then defers to `System`.
struct CountingAlloc;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counters are plain atomics and never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_alloc(layout.size());
        // SAFETY: same contract as ours, passed through.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_alloc(layout.size());
        // SAFETY: same contract as ours, passed through.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_alloc(new_size);
        // SAFETY: same contract as ours, passed through.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours, passed through.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn main() {
    report_allocations();
    let mut c = Criterion::default().configure_from_args();
    bench_cycle(&mut c);
    bench_decode(&mut c);
    c.final_summary();
}

/// The servers the bench's nodes claim to be, by their `HELLO` replies.
#[derive(Debug, Clone, Copy)]
enum Server {
    /// Redis 7: releases by the release script (`EVALSHA`).
    Redis7,
    /// Valkey 9: releases by `DELIFEQ`.
    Valkey9,
}

impl Server {
    /// The `acquire_release` benchmark's name for these nodes.
    fn bench_name(self) -> &'static str {
        match self {
            Self::Redis7 => "acquire_release",
            Self::Valkey9 => "acquire_release_native",
        }
    }

    /// The node's `HELLO` reply (RESP2), trimmed to the fields the client reads, its reply
    /// to the `TIME` that follows `HELLO`, and to the restart quarantine's `INFO server`
    /// and `CONFIG GET` (a node up for a day, no persistence: no quarantine).
    fn hello(self) -> &'static [u8] {
        match self {
            Self::Redis7 => {
                b"*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n\
                  *2\r\n$10\r\n1795190400\r\n$1\r\n0\r\n\
                  $37\r\nrun_id:abc\r\nuptime_in_seconds:86400\r\n\r\n*0\r\n"
            }
            Self::Valkey9 => {
                b"*4\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n9.1.2\r\n\
                  *2\r\n$10\r\n1795190400\r\n$1\r\n0\r\n\
                  $37\r\nrun_id:abc\r\nuptime_in_seconds:86400\r\n\r\n*0\r\n"
            }
        }
    }
}

/// Whether the client checks the nodes' clock rates, and how often its `TIME` samples go
/// out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sampling {
    /// The check is off (the baseline, and the numbers of earlier runs).
    Off,
    /// On, with the bench's clock moving a few µs per input: one `TIME` per node per
    /// second of that clock, about one cycle in 28,000.
    Natural,
    /// On, with the clock moving a second per cycle: every acquisition carries a `TIME` to
    /// every node (the worst case, a client doing one lock a second).
    EveryCycle,
}

impl Sampling {
    /// The benchmark's name on Redis 7 nodes.
    fn bench_name(self) -> &'static str {
        match self {
            Self::Off => "acquire_release",
            Self::Natural => "acquire_release_clock_check",
            Self::EveryCycle => "acquire_release_clock_sampled",
        }
    }
}

/// `cycle_5_nodes`: acquire then release one lock, every node answering at once; on Redis 7
/// nodes (scripts) and on Valkey 9 nodes (native release); on Redis 7 also with the
/// clock-rate check on, its samples as rare as a busy client sends them or with every cycle.
fn bench_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("cycle_5_nodes");
    group.throughput(Throughput::Elements(1));
    let runs = [
        (Server::Redis7, Sampling::Off),
        (Server::Valkey9, Sampling::Off),
        (Server::Redis7, Sampling::Natural),
        (Server::Redis7, Sampling::EveryCycle),
    ];
    for (server, sampling) in runs {
        let (mut client, mut clock, conns) = connected_client(server, sampling);
        let name = match sampling {
            Sampling::Off => server.bench_name(),
            _ => sampling.bench_name(),
        };
        let mut k = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                k = (k + 1) % RESOURCES.len();
                let mut trace = Trace::default();
                cycle(
                    server,
                    &mut client,
                    &mut clock,
                    &conns,
                    Resource::from_static(RESOURCES[k]),
                    &mut trace,
                );
                black_box(trace)
            });
        });
    }
    group.finish();
}

/// `decode_pipelined`: [`PIPELINED`] replies pushed in mixed chunk sizes, or in one push.
fn bench_decode(c: &mut Criterion) {
    let stream = pipelined_stream();
    let mut group = c.benchmark_group("decode_pipelined");
    group.throughput(Throughput::Elements(PIPELINED as u64));
    let mut decoder = new_decoder();
    group.bench_function("mixed_chunks", |b| {
        b.iter(|| decode(&mut decoder, chunks(&stream)));
    });
    group.bench_function("one_push", |b| {
        b.iter(|| decode(&mut decoder, std::iter::once(&stream[..])));
    });
    group.finish();
}

/// Prints allocations per cycle and per decoded reply, once, before criterion starts.
fn report_allocations() {
    const RUNS: u64 = 1_000;

    for (server, sampling) in [
        (Server::Redis7, Sampling::Off),
        (Server::Valkey9, Sampling::Off),
        (Server::Redis7, Sampling::EveryCycle),
    ] {
        let (mut client, mut clock, conns) = connected_client(server, sampling);
        check_one_cycle(server, &mut client, &mut clock, &conns);
        // Warm up so buffers that are kept across cycles have grown.
        let mut trace = Trace::default();
        for name in RESOURCES {
            cycle(
                server,
                &mut client,
                &mut clock,
                &conns,
                Resource::from_static(name),
                &mut trace,
            );
        }
        let (allocs, bytes) = allocations(|| {
            for k in 0..RUNS as usize {
                let resource = Resource::from_static(RESOURCES[k % RESOURCES.len()]);
                cycle(
                    server,
                    &mut client,
                    &mut clock,
                    &conns,
                    resource,
                    &mut Trace::default(),
                );
            }
        });
        println!(
            "allocations per cycle (5 nodes, acquire + release, {server:?}, clock check \
             {sampling:?}): {:.2} ({:.0} bytes)",
            allocs as f64 / RUNS as f64,
            bytes as f64 / RUNS as f64
        );
    }

    let stream = pipelined_stream();
    let mut decoder = new_decoder();
    decode(&mut decoder, chunks(&stream));
    let replies = RUNS * PIPELINED as u64;
    for (name, one_push) in [("mixed chunks", false), ("one push", true)] {
        let (allocs, bytes) = allocations(|| {
            for _ in 0..RUNS {
                if one_push {
                    decode(&mut decoder, std::iter::once(&stream[..]));
                } else {
                    decode(&mut decoder, chunks(&stream));
                }
            }
        });
        println!(
            "allocations per decoded reply ({name}): {:.3} ({:.1} bytes)",
            allocs as f64 / replies as f64,
            bytes as f64 / replies as f64
        );
    }
}

/// Checks once, outside any timing, that a cycle really locks and unlocks.
fn check_one_cycle(
    server: Server,
    client: &mut Client<ChaCha20Rng>,
    clock: &mut Clock,
    conns: &[ConnId],
) {
    let mut trace = Trace::default();
    cycle(
        server,
        client,
        clock,
        conns,
        Resource::from_static(RESOURCES[0]),
        &mut trace,
    );
    // The release script announces the release itself; a native release is written with
    // its announcement (`PUBLISH`).
    assert_eq!(
        trace.transmits,
        2 * NODES,
        "one SET and one release per node (a native release with its PUBLISH); a clock \
         sample rides in the SET's write"
    );
    let expected = if clock.per_cycle.is_zero() { 0 } else { NODES };
    assert_eq!(trace.samples, expected, "clock samples: {trace:?}");
    assert!(trace.acquired.is_some(), "no Acquired event: {trace:?}");
    assert_eq!(
        trace.acquired, trace.released,
        "released another op: {trace:?}"
    );
    assert_eq!(
        trace.locked, 3,
        "Acquired is reported at the quorum of 5 nodes"
    );
    assert_eq!(
        trace.unlocked, 3,
        "Released is reported at the quorum of 5 nodes: {trace:?}"
    );
    assert_eq!(
        client.active_ops(),
        0,
        "the operation is over once every node has answered"
    );
}

/// Allocations and bytes allocated while `f` runs (the process is single-threaded here).
fn allocations(f: impl FnOnce()) -> (u64, u64) {
    let (a0, b0) = (snapshot(&ALLOCATIONS), snapshot(&ALLOCATED_BYTES));
    f();
    (snapshot(&ALLOCATIONS) - a0, snapshot(&ALLOCATED_BYTES) - b0)
}

// ---- the cycle ----

/// What the driver saw during a cycle; checked once, black-boxed in the timed loop.
#[derive(Debug, Default)]
struct Trace {
    transmits: usize,
    bytes: usize,
    acquired: Option<OpId>,
    released: Option<OpId>,
    /// Nodes reported `Locked` in `Acquired`.
    locked: usize,
    /// Nodes reported `Released` in `Released`.
    unlocked: usize,
    /// `TIME`s sent (clock-rate samples).
    samples: usize,
    /// Whether each node's last write ended with a `TIME`, not yet answered.
    timed: [bool; NODES],
}

/// The bench's stand-in for the driver's clock: strictly increasing, a few µs per step
/// (and `per_cycle` more at the start of each cycle). The nodes' clocks read
/// [`NODE_SECS`] at `origin` and run at the same rate.
struct Clock {
    now: Instant,
    origin: Instant,
    per_cycle: Duration,
    /// A reply followed by a `TIME` reply, reused.
    buf: Vec<u8>,
}

impl Clock {
    fn tick(&mut self) -> Instant {
        self.now += STEP;
        self.now
    }

    /// Appends a node's reply to `TIME` at `now` to `out` (no allocation once `out` has
    /// grown: the bench's own cost stays out of the allocation count).
    fn time_reply(&self, now: Instant, out: &mut Vec<u8>) {
        let since = now - self.origin;
        let secs = NODE_SECS + since.as_secs();
        let micros = since.subsec_micros();
        let digits = |n: u64| n.checked_ilog10().unwrap_or(0) + 1;
        let (s, m) = (digits(secs), digits(u64::from(micros)));
        write!(out, "*2\r\n${s}\r\n{secs}\r\n${m}\r\n{micros}\r\n").expect("a Vec");
    }
}

/// A client whose 5 connections are up, with nothing in flight, and those connections' ids
/// (a driver keeps each with its socket, to name the input it reads).
///
/// Each new connection opens with `HELLO` and `SCRIPT LOAD` of the release and extend scripts
/// (defaults of the core); the nodes answer them here, as `server`, so the timed cycle starts
/// on idle connections.
fn connected_client(
    server: Server,
    sampling: Sampling,
) -> (Client<ChaCha20Rng>, Clock, Vec<ConnId>) {
    let config = Config::builder(NODES)
        .clock_check((sampling != Sampling::Off).then(ClockCheck::default))
        .build()
        .expect("default config is valid");
    let mut client = Client::new(config, ChaCha20Rng::seed_from_u64(42));
    let origin = Instant::now();
    let per_cycle = match sampling {
        Sampling::EveryCycle => Duration::from_secs(1),
        Sampling::Off | Sampling::Natural => Duration::ZERO,
    };
    let mut clock = Clock {
        now: origin,
        origin,
        per_cycle,
        buf: Vec::new(),
    };
    let mut conns = Vec::with_capacity(NODES);
    for i in 0..NODES {
        match client.poll_output() {
            Output::Connect(conn) => {
                assert_eq!(conn, ConnId::new(NodeId::new(i), 0));
                conns.push(conn);
            }
            other => panic!("expected Connect({i}), got {other:?}"),
        }
    }
    assert!(matches!(client.poll_output(), Output::Idle));
    for &conn in &conns {
        let now = clock.tick();
        client
            .handle_input(Input::Connected { now, conn })
            .expect("drained");
        let mut sent = Vec::new();
        loop {
            match client.poll_output() {
                Output::Transmit(t) => sent.extend_from_slice(&t.bytes),
                Output::Timeout(_) | Output::Idle => break,
                other => panic!("unexpected output on connect: {other:?}"),
            }
        }
        assert!(sent.windows(HELLO.len()).any(|w| w == HELLO), "no HELLO");
        let input = Input::Received {
            now: clock.tick(),
            conn,
            bytes: &own_run_id(server.hello(), conn.node().index()),
        };
        client.handle_input(input).expect("drained");
        let mut trace = Trace::default();
        drain(&mut client, &mut trace);
        assert_eq!(trace.transmits, 0, "a HELLO reply asks for nothing");
        let loads = sent.windows(LOAD.len()).filter(|w| *w == LOAD).count();
        // The replies are the scripts' SHA1s, in the order the loads were sent.
        for script in [&RELEASE_SCRIPT, &EXTEND_SCRIPT]
            .into_iter()
            .cycle()
            .take(loads)
        {
            let reply = format!("${}\r\n{}\r\n", script.sha1.len(), script.sha1);
            let input = Input::Received {
                now: clock.tick(),
                conn,
                bytes: reply.as_bytes(),
            };
            client.handle_input(input).expect("drained");
            let mut trace = Trace::default();
            drain(&mut client, &mut trace);
            assert_eq!(trace.transmits, 0, "a script load reply asks for nothing");
        }
    }
    (client, clock, conns)
}

/// One acquire + release of `resource`, every node replying at once, as a driver would.
fn cycle(
    server: Server,
    client: &mut Client<ChaCha20Rng>,
    clock: &mut Clock,
    conns: &[ConnId],
    resource: Resource,
    t: &mut Trace,
) {
    clock.now += clock.per_cycle;
    let op = client.acquire(clock.tick(), resource).expect("drained");
    drain(client, t);
    reply_from_all(client, clock, conns, b"+OK\r\n", t);
    client.release(clock.tick(), op).expect("the lock is held");
    drain(client, t);
    let released: &[u8] = match server {
        Server::Redis7 => b":1\r\n",
        // The native release and its announcement's `PUBLISH` (no subscriber here).
        Server::Valkey9 => b":1\r\n:0\r\n",
    };
    reply_from_all(client, clock, conns, released, t);
}

/// Feeds `reply` from each node's connection in turn, draining after each (the client's
/// contract).
fn reply_from_all(
    client: &mut Client<ChaCha20Rng>,
    clock: &mut Clock,
    conns: &[ConnId],
    reply: &[u8],
    t: &mut Trace,
) {
    for &conn in conns {
        let now = clock.tick();
        let mut buf = std::mem::take(&mut clock.buf);
        let bytes = if std::mem::take(&mut t.timed[conn.node().index()]) {
            // The node answers the request, then the `TIME` that rode with it.
            buf.clear();
            buf.extend_from_slice(reply);
            clock.time_reply(now, &mut buf);
            &buf[..]
        } else {
            reply
        };
        let input = Input::Received { now, conn, bytes };
        client.handle_input(input).expect("drained");
        clock.buf = buf;
        drain(client, t);
    }
}

/// Polls until `Timeout` or `Idle`; "writes" each transmit by noting its length.
fn drain(client: &mut Client<ChaCha20Rng>, t: &mut Trace) {
    loop {
        match client.poll_output() {
            Output::Transmit(transmit) => {
                t.transmits += 1;
                t.bytes += black_box(&transmit.bytes).len();
                if transmit.bytes.ends_with(TIME) {
                    t.samples += 1;
                    t.timed[transmit.node.index()] = true;
                }
            }
            Output::Event(Event::Acquired(a)) => {
                t.acquired = Some(a.op);
                t.locked = count(&a.stats.nodes, |n| n.outcome == AcquireOutcome::Locked);
            }
            Output::Event(Event::Released { op, nodes }) => {
                t.released = Some(op);
                t.unlocked = count(&nodes, |o| *o == ReleaseOutcome::Released);
            }
            Output::Event(other) => panic!("unexpected event {other:?}"),
            Output::Connect(conn) | Output::Disconnect(conn) => {
                panic!("unexpected connection change on {conn}")
            }
            Output::Timeout(_) | Output::Idle => break,
        }
    }
}

// ---- the decoder ----

fn new_decoder() -> Decoder {
    Decoder::new(DEFAULT_MAX_REPLY_SIZE, DEFAULT_MAX_READ_BUFFER)
}

/// [`PIPELINED`] replies, cycling through every kind our commands get back.
fn pipelined_stream() -> Vec<u8> {
    let kinds: [&[u8]; 5] = [
        b"+OK\r\n",
        b":1\r\n",
        b"$-1\r\n",
        b":-1\r\n",
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    ];
    kinds
        .iter()
        .cycle()
        .take(PIPELINED)
        .copied()
        .flatten()
        .copied()
        .collect()
}

/// The stream cut in a fixed mix of chunk sizes, most of which split a reply.
fn chunks(stream: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = stream;
    let mut sizes = CHUNK_SIZES.iter().cycle();
    std::iter::from_fn(move || {
        let size = (*sizes.next()?).min(rest.len());
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        (!chunk.is_empty()).then_some(chunk)
    })
}

/// Pushes every chunk, taking all complete replies after each; checks the count.
fn decode<'a>(decoder: &mut Decoder, chunks: impl Iterator<Item = &'a [u8]>) {
    let mut replies = 0;
    for chunk in chunks {
        decoder.push(chunk);
        while let Some(reply) = decoder.next_reply().expect("well-formed stream") {
            black_box(&reply);
            replies += 1;
        }
    }
    assert_eq!(replies, PIPELINED);
    assert_eq!(decoder.buffered(), 0);
}

// ---- helpers and constants ----

fn count<T>(items: &[T], f: impl Fn(&T) -> bool) -> usize {
    items.iter().filter(|&item| f(item)).count()
}

fn snapshot(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

fn count_alloc(bytes: usize) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    ALLOCATED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

const NODES: usize = 5;

/// Time the driver's clock moves per input: a few µs, far below every core timeout.
const STEP: Duration = Duration::from_micros(3);

/// A small rotating set: each lock is released before its name comes round again.
const RESOURCES: [&str; 8] = [
    "bench:lock:0",
    "bench:lock:1",
    "bench:lock:2",
    "bench:lock:3",
    "bench:lock:4",
    "bench:lock:5",
    "bench:lock:6",
    "bench:lock:7",
];

/// How `HELLO` appears in the RESP the client writes.
/// (`HELLO 3` with release notifications on, the default; this server answers in RESP2, so
/// the connection stays RESP2, as it would on a RESP2-only proxy.)
const HELLO: &[u8] = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n";

/// `TIME`, as the client writes it.
const TIME: &[u8] = b"*1\r\n$4\r\nTIME\r\n";

/// The nodes' clocks at the bench's origin, in seconds since the epoch.
const NODE_SECS: u64 = 1_795_190_400;

/// How `SCRIPT LOAD` appears in the RESP the client writes.
const LOAD: &[u8] = b"$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n";

/// Replies per decode run.
const PIPELINED: usize = 64;

/// Chunk sizes for [`chunks`], cycled: single bytes, odd splits, and a large read.
const CHUNK_SIZES: [usize; 8] = [1, 3, 7, 16, 2, 64, 5, 29];
