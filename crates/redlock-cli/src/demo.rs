//! `redlock demo`: the algorithm at work, and what goes wrong without it, in one command.
//!
//! Six local nodes it starts (crate::local_nodes): five for the lock, one holding a counter.
//! K workers increment the counter with a `GET` then a `SET` (two round trips, so an
//! unprotected increment can be lost), first inside the lock, with one lock node killed a
//! third of the way in and restarted once the longest ttl has passed (a restart without
//! persistence must wait that long: docs/safety.md); then without the lock. The verdicts: with the lock the
//! counter equals the number of sections; without it, the difference is the lost updates.
//! Every node stops when the demo ends, is interrupted (INT, TERM, HUP, QUIT) or fails.
//!
//! With `--nodes` (or `REDLOCK_NODES`) it runs on those instead, the counter on the first:
//! they are not the demo's to kill, so that phase is skipped and the output says so. The
//! demo's keys (`redlock-demo:*`) are deleted after each run.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlock_core::{NodeAddress, Transport};
use redlock_tokio::{Redlock, RetryPolicy};
use tokio::task::JoinSet;

use crate::cli::DemoArgs;
use crate::counter::Counter;
use crate::exit::{self, Exit};
use crate::json;
use crate::local_nodes::LocalNodes;
use crate::out::{note, say};
use crate::progress::seconds;
use crate::signals::{self, Caught};

/// Runs `redlock demo`; exits 0 when the locked run's verdict holds.
pub(crate) async fn run(args: DemoArgs) -> Exit {
    let mut caught = match Caught::install() {
        Ok(caught) => caught,
        Err(e) => return Exit::with(exit::NODE_ERROR, format_args!("cannot catch signals: {e}")),
    };
    let given: Vec<String> = (args.source.nodes.iter().map(|n| n.trim()))
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    if given.is_empty() {
        return run_local(&args, &mut caught).await;
    }
    let mut nodes = match Nodes::given(given) {
        Ok(nodes) => nodes,
        Err(exit) => return exit,
    };
    // Interrupted, a worker's lock key expires within the ttl; the counters stay behind.
    tokio::select! {
        exit = both_runs(&mut nodes, &args) => exit,
        signal = caught.recv() => Exit::with(signals::exit_code(signal), "interrupted"),
    }
}

/// The demo on local nodes it starts (and stops, whatever happens).
async fn run_local(args: &DemoArgs, caught: &mut Caught) -> Exit {
    // Interrupted while starting, the nodes started so far are killed as they are dropped.
    let local = tokio::select! {
        started = LocalNodes::start(LOCK_NODES + 1) => started,
        signal = caught.recv() => return Exit::code(signals::exit_code(signal)),
    };
    let mut nodes = match local.map(Nodes::local) {
        Ok(Ok(nodes)) => nodes,
        Ok(Err(exit)) => return exit,
        Err(e) => return Exit::with(exit::NODE_ERROR, format_args!("cannot start nodes: {e}")),
    };
    let exit = tokio::select! {
        exit = both_runs(&mut nodes, args) => exit,
        signal = caught.recv() => Exit::with(signals::exit_code(signal), "interrupted; stopping the nodes"),
    };
    if let Some(local) = nodes.local {
        local.stop().await;
    }
    exit
}

/// Where the demo runs: on nodes it started, which it may kill and restart, or on the
/// user's (`--nodes`), which it never touches but for its own keys.
struct Nodes {
    /// The nodes it started; `None` on the user's.
    local: Option<LocalNodes>,
    /// The lock's nodes.
    lock: Vec<String>,
    /// The counter's node.
    counter: NodeAddress,
    /// What the nodes are, for the first line.
    about: String,
}

impl Nodes {
    /// The nodes it started: the lock on the first [`LOCK_NODES`], the counter on the last.
    fn local(local: LocalNodes) -> Result<Self, Exit> {
        let counter = local.url(LOCK_NODES);
        Ok(Self {
            lock: (0..LOCK_NODES).map(|i| local.url(i)).collect(),
            counter: NodeAddress::parse(&counter).map_err(|e| Exit::usage(e.to_string()))?,
            about: format!(
                "{LOCK_NODES} local lock nodes, 1 counter node ({})",
                local.server()
            ),
            local: Some(local),
        })
    }

    fn given(urls: Vec<String>) -> Result<Self, Exit> {
        // `given` is not empty: the caller checked.
        let counter = NodeAddress::parse(&urls[0]).map_err(|e| Exit::usage(e.to_string()))?;
        if matches!(counter.transport, Transport::Tls(_)) {
            let name = crate::counter::name(&counter);
            let message = format!("the counter's node {name} {}", crate::counter::PLAIN_ONLY);
            return Err(Exit::usage(message));
        }
        Ok(Self {
            local: None,
            about: format!(
                "{} lock nodes of yours (--nodes), the counter on the first",
                urls.len()
            ),
            lock: urls,
            counter,
        })
    }
}

/// The locked run, then the unlocked one, then the verdicts.
async fn both_runs(nodes: &mut Nodes, args: &DemoArgs) -> Exit {
    let say = !args.quiet && !args.json;
    if say {
        say!(
            "redlock demo: {}, {} workers, {} per run, ttl {}",
            nodes.about,
            args.workers,
            seconds(args.duration),
            seconds(args.ttl)
        );
        if nodes.local.is_none() {
            say!(
                "  the nodes are yours: none is killed or restarted (that phase is skipped); \
                 the demo's keys ({RESOURCE}, {LOCKED}, {UNLOCKED}) are deleted after"
            );
        }
    }
    let redlock = match Redlock::builder(&nodes.lock).and_then(|b| {
        b.config(|c| c.ttl(args.ttl).retry(patient(args.duration)))
            .build()
    }) {
        Ok(redlock) => redlock,
        Err(e) => return Exit::lock_error("demo", &e),
    };
    // Workers that cannot lock only try again: nodes that cannot be reached would end in a
    // verdict about nothing. Say which, as `exec` and `status` do.
    match redlock.inspect(RESOURCE).await {
        Ok(seen) => {
            if let Some(why) = crate::status::unusable(&seen, redlock.config().node_names()) {
                return Exit::with(why.code, format_args!("the lock's nodes: {}", why.message));
            }
        }
        Err(e) => return Exit::lock_error("the lock's nodes", &e),
    }
    let locked = match one_run(nodes, Some(redlock), args, LOCKED).await {
        Ok(run) => run,
        Err(e) => return Exit::with(exit::NODE_ERROR, format_args!("the locked run failed: {e}")),
    };
    let unlocked = match one_run(nodes, None, args, UNLOCKED).await {
        Ok(run) => run,
        Err(e) => {
            return Exit::with(
                exit::NODE_ERROR,
                format_args!("the unlocked run failed: {e}"),
            );
        }
    };
    verdicts(&locked, &unlocked, args, nodes.local.is_some())
}

/// What one run counted.
#[derive(Debug, Default)]
struct Tally {
    sections: AtomicU64,
    waits: AtomicU64,
    wait_us: AtomicU64,
    /// Sections given up because the lock had no validity left when the write was due.
    expired: AtomicU64,
}

/// One run's result.
struct Run {
    sections: u64,
    counter: u64,
    waits: u64,
    expired: u64,
    elapsed: Duration,
}

/// Runs the workers for the configured time (killing and restarting a lock node when
/// locked), then reads the counter.
async fn one_run(
    nodes: &mut Nodes,
    redlock: Option<Redlock>,
    args: &DemoArgs,
    key: &str,
) -> std::io::Result<Run> {
    let chaos = redlock.is_some() && nodes.local.is_some();
    // Counts from zero, on nodes of the user's too.
    Counter::connect(&nodes.counter, key)
        .await?
        .delete()
        .await?;
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let stop_at = started + args.duration;
    let mut workers = JoinSet::new();
    for _ in 0..args.workers {
        let counter = Counter::connect(&nodes.counter, key).await?;
        workers.spawn(worker(
            redlock.clone(),
            counter,
            Arc::clone(&tally),
            stop_at,
        ));
    }
    let mut line = Line::new(
        if redlock.is_some() {
            "with the lock"
        } else {
            "without it"
        },
        args,
    );
    let mut chaos = chaos.then(|| Chaos::new(started, args));
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            joined = workers.join_next() => match joined {
                None => break,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => return Err(e),
                Some(Err(e)) => return Err(std::io::Error::other(e)),
            },
            _ = tick.tick() => {
                if let (Some(chaos), Some(local)) = (&mut chaos, &mut nodes.local) {
                    chaos.step(local, &mut line).await?;
                }
                line.draw(started.elapsed(), &tally, health(nodes.local.as_mut()));
            }
        }
    }
    line.finish(started.elapsed(), &tally, health(nodes.local.as_mut()));
    let mut reader = Counter::connect(&nodes.counter, key).await?;
    let counter = reader.get().await?;
    reader.delete().await?;
    Ok(Run {
        sections: tally.sections.load(Ordering::Relaxed),
        counter,
        waits: tally.waits.load(Ordering::Relaxed),
        expired: tally.expired.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
    })
}

/// One worker: increments until `stop_at`, inside the lock when there is one.
async fn worker(
    redlock: Option<Redlock>,
    mut counter: Counter,
    tally: Arc<Tally>,
    stop_at: Instant,
) -> std::io::Result<()> {
    while Instant::now() < stop_at {
        let guard = match &redlock {
            Some(redlock) => {
                let asked = Instant::now();
                let Ok(guard) = redlock.lock(RESOURCE).await else {
                    continue;
                };
                tally.waits.fetch_add(1, Ordering::Relaxed);
                let waited = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
                tally.wait_us.fetch_add(waited, Ordering::Relaxed);
                Some(guard)
            }
            None => None,
        };
        let value = counter.get().await?;
        // Let the other workers run between the read and the write, as a real job would.
        tokio::task::yield_now().await;
        if guard.as_ref().is_some_and(|g| g.validity().is_zero()) {
            // Never write without a valid lock.
            tally.expired.fetch_add(1, Ordering::Relaxed);
        } else {
            counter.set(value + 1).await?;
            tally.sections.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(guard) = guard {
            let _ = guard.release().await;
        }
    }
    Ok(())
}

/// Kills the last lock node a third of the way in, restarts it once the ttl has passed.
struct Chaos {
    kill_at: Instant,
    restart_at: Option<Instant>,
    done: bool,
}

impl Chaos {
    fn new(started: Instant, args: &DemoArgs) -> Self {
        Self {
            kill_at: started + args.duration / 3,
            restart_at: None,
            done: false,
        }
    }

    async fn step(&mut self, local: &mut LocalNodes, line: &mut Line) -> std::io::Result<()> {
        let now = Instant::now();
        if self.done {
            return Ok(());
        }
        match self.restart_at {
            None if now >= self.kill_at => {
                local.kill(LOCK_NODES - 1).await?;
                line.say("killed lock node 5; restarting it once the ttl has passed");
                self.restart_at = Some(now + line.ttl + Duration::from_millis(100));
            }
            Some(at) if now >= at => {
                local.restart(LOCK_NODES - 1).await?;
                line.say("restarted lock node 5 (empty)");
                self.done = true;
            }
            _ => {}
        }
        Ok(())
    }
}

/// The lock nodes' health for the progress line, `  nodes [UUUU-]` (`U` runs, `-` was
/// killed), on the nodes it started only: the user's are not watched.
fn health(local: Option<&mut LocalNodes>) -> String {
    match local {
        Some(local) => {
            let nodes: String = (0..LOCK_NODES)
                .map(|i| if local.is_running(i) { 'U' } else { '-' })
                .collect();
            format!("  nodes [{nodes}]")
        }
        None => String::new(),
    }
}

/// The live progress line (stderr, on a terminal, unless quiet) and the run's messages.
struct Line {
    name: &'static str,
    live: bool,
    say: bool,
    ttl: Duration,
}

impl Line {
    fn new(name: &'static str, args: &DemoArgs) -> Self {
        let say = !args.quiet && !args.json;
        Self {
            name,
            live: say && std::io::stderr().is_terminal(),
            say,
            ttl: args.ttl,
        }
    }

    fn text(&self, elapsed: Duration, tally: &Tally, health: String) -> String {
        let sections = tally.sections.load(Ordering::Relaxed);
        let rate = sections as f64 / elapsed.as_secs_f64().max(0.001);
        let waits = tally.waits.load(Ordering::Relaxed);
        let avg_wait = match waits {
            0 => "-".to_owned(),
            n => format!(
                "{:.1}ms",
                tally.wait_us.load(Ordering::Relaxed) as f64 / n as f64 / 1e3
            ),
        };
        format!(
            "  {:<14} {:>5}  sections {sections:>6} ({rate:>6.0}/s)  lock waits {waits} (avg {avg_wait}){health}",
            self.name,
            seconds(elapsed)
        )
    }

    fn draw(&self, elapsed: Duration, tally: &Tally, health: String) {
        if self.live {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{}\x20", self.text(elapsed, tally, health));
            let _ = err.flush();
        }
    }

    fn say(&self, message: &str) {
        if self.live {
            crate::out::stderr(format_args!("\r{:100}\r", ""));
        }
        if self.say {
            note!("  {}: {message}", self.name);
        }
    }

    fn finish(&self, elapsed: Duration, tally: &Tally, health: String) {
        if self.live {
            crate::out::stderr(format_args!("\r{:100}\r", ""));
        }
        if self.say {
            note!("{}", self.text(elapsed, tally, health));
        }
    }
}

/// Prints both verdicts; the exit code is the locked run's.
fn verdicts(locked: &Run, unlocked: &Run, args: &DemoArgs, killed: bool) -> Exit {
    let passed = locked.counter == locked.sections && locked.sections > 0;
    let lost = unlocked.sections.saturating_sub(unlocked.counter);
    if args.json {
        let run = |r: &Run| {
            json::object(&[
                ("sections", r.sections.to_string()),
                ("counter", r.counter.to_string()),
                ("lock_waits", r.waits.to_string()),
                ("expired", r.expired.to_string()),
                ("elapsed_ms", r.elapsed.as_millis().to_string()),
            ])
        };
        let fields = [
            ("locked", run(locked)),
            ("unlocked", run(unlocked)),
            ("passed", passed.to_string()),
            ("lost_updates", lost.to_string()),
        ];
        say!("{}", json::object(&fields));
    } else {
        let verdict = if passed { "PASS" } else { "FAIL" };
        let chaos = match killed {
            true => " (a lock node was killed and restarted midway)",
            false => "",
        };
        say!(
            "with the lock:    {} sections, counter {}: {verdict}{chaos}",
            locked.sections,
            locked.counter
        );
        say!(
            "without the lock: {} increments, counter {}: {lost} lost updates",
            unlocked.sections,
            unlocked.counter
        );
    }
    if passed {
        Exit::code(0)
    } else {
        let message = format!(
            "the counter ({}) is not the number of sections ({})",
            locked.counter, locked.sections
        );
        Exit::with(1, message)
    }
}

/// Workers wait as long as the run lasts, retrying every few milliseconds.
fn patient(run: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: None,
        max_wait: Some(run + Duration::from_secs(1)),
        delay_min: Duration::from_millis(1),
        delay_max: Duration::from_millis(5),
    }
}

const LOCK_NODES: usize = 5;
const RESOURCE: &str = "redlock-demo:lock";
/// The counters of the run with the lock and of the run without it.
const LOCKED: &str = "redlock-demo:locked";
const UNLOCKED: &str = "redlock-demo:unlocked";
