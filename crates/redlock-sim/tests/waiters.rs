//! The waiters' queue's liveness and fairness (docs/design.md, "The waiters' queue"): a
//! waiter that dies cannot block the live ones for longer than its place's patience, and
//! the queue serves the waiters of all processes in the order they came, within the clock
//! error. Each property has its negative control: a queue that never prunes a dead
//! waiter's place (`Mutant::QueueNeverPrunes`), a patience longer than the run, and no
//! queue at all (every waiter races).

mod common;

use std::time::Duration;

use common::{
    FAIR_BUDGET, FAIR_DETECTION, IDLE_BOUND, IDLE_DETECTION, OVERTAKE_BOUND, SILENT_BUDGET,
    SILENT_DETECTION, SILENT_LATENESS, WAITERS_BUDGET, WAITERS_DETECTION, fair, fair_lines,
    fair_lines_silent, fair_slow, first_where, most_overtakes, overtaken, overtaken_by_calls,
    silent_lateness, starved, waiters,
};
use redlock_core::{Mutant, WaiterQueue};
use redlock_sim::{Report, Scenario, Sim};

/// A family of scenarios, a function of the seed.
type Family = fn(u64) -> Scenario;

/// Runs `scenario`: safety must hold whatever else the test looks at.
fn run(scenario: &Scenario) -> Report {
    let report = Sim::new(scenario.clone()).run();
    if let Some(v) = &report.violation {
        panic!("property (S) broken: {v}");
    }
    report
}

#[test]
fn no_live_waiter_starves_while_others_die_in_the_queue() {
    let mut cut_short = 0;
    for seed in 0..WAITERS_BUDGET {
        let scenario = waiters(seed, |b| b);
        let report = run(&scenario);
        if let Some(s) = starved(&report) {
            panic!("{s}");
        }
        // Every live client finished its work; the dead ones only are left undone.
        assert!(
            report.workloads_done,
            "seed {seed}: a live client never finished"
        );
        let checker = &report.checker;
        cut_short += usize::from(checker.ops().iter().any(|op| checker.cut_short(op)));
    }
    // Most runs had a client die with a call open (waiting, or in its first attempt).
    assert!(
        cut_short as u64 >= WAITERS_BUDGET * 2 / 3,
        "{cut_short} runs of {WAITERS_BUDGET} had a call cut short"
    );
}

#[test]
fn a_queue_that_never_prunes_lets_a_dead_waiter_starve_the_live_ones() {
    let family = |seed| waiters(seed, |b| b.mutant(Mutant::QueueNeverPrunes));
    let found = first_where(WAITERS_DETECTION, family, |_, r| starved(r).is_some());
    let (scenario, report) = found.expect("the never-pruning queue was not found");
    let s = starved(&report).expect("found by starvation");
    // The evidence: a client died while the starved call waited, and the starved one is
    // alive; the lock was free at the end.
    let deaths = report.checker.deaths();
    assert!(!deaths.is_empty(), "seed {}: no death, {s}", scenario.seed);
    assert!(deaths.iter().all(|(c, _)| *c != s.op.client), "{s}");
    assert!(deaths.iter().any(|(_, at)| *at < s.until), "{s}");
    let checker = &report.checker;
    let open = (checker.ops().iter()).filter(|op| checker.cut_short(op));
    assert!(open.count() > 0, "no dead client had a call open: {s}");
    println!(
        "QueueNeverPrunes found at seed {} (of {WAITERS_DETECTION}): {s}",
        scenario.seed
    );
}

#[test]
fn a_patience_longer_than_the_wait_lets_a_dead_waiter_starve_the_live_ones() {
    let patience = WaiterQueue {
        patience: Some(Duration::from_secs(60)),
    };
    let family = |seed| waiters(seed, |b| b.waiter_queue(Some(patience)));
    let found = first_where(WAITERS_DETECTION, family, |_, r| starved(r).is_some());
    let (scenario, report) = found.expect("a 60 s patience did not starve anyone");
    assert!(!report.checker.deaths().is_empty());
    println!(
        "patience 60 s found at seed {}: {}",
        scenario.seed,
        starved(&report).expect("found by starvation")
    );
}

/// The servers are drawn: on some nodes no client can hear releases (no `HELLO`, channels
/// denied), and a waiter that heads the queue there polls (waiters.rs,
/// `UNHEARD_POLL_EVERY`), so the lock never sits free for long while a call waits.
#[test]
fn the_queue_serves_waiters_in_order_within_the_slack() {
    let (mut unfair, mut idle) = (Vec::new(), Vec::new());
    for seed in 0..FAIR_BUDGET {
        let scenario = fair(seed, |b| b);
        let report = run(&scenario);
        assert!(report.workloads_done, "seed {seed}: unfinished");
        if let Some(o) = overtaken(&scenario, &report, OVERTAKE_BOUND) {
            println!("{o}");
            unfair.push(seed);
        }
        if let Some(i) =
            (report.checker.idle_while_waiting(report.end)).filter(|i| i.gap > IDLE_BOUND)
        {
            println!("{i}");
            idle.push(seed);
        }
    }
    assert!(unfair.is_empty(), "seeds {unfair:?} break the bound");
    assert!(idle.is_empty(), "seeds {idle:?} left the lock idle");
}

#[test]
fn without_the_queue_waiters_are_overtaken_past_the_bound() {
    let family = |seed| fair(seed, |b| b.waiter_queue(None));
    let found = first_where(FAIR_DETECTION, family, |s, r| {
        overtaken(s, r, OVERTAKE_BOUND).is_some()
    });
    let (scenario, report) = found.expect("racing waiters kept the bound");
    let o = overtaken(&scenario, &report, OVERTAKE_BOUND).expect("found");
    assert!(o.by.len() > OVERTAKE_BOUND);
    println!("no queue found at seed {}: {o}", scenario.seed);
}

#[test]
fn lines_hear_waiters_of_other_clients_and_keep_the_order() {
    let mut unfair = Vec::new();
    for seed in 0..FAIR_BUDGET {
        let scenario = fair_lines(seed, true, |b| b);
        let report = run(&scenario);
        assert!(report.workloads_done, "seed {seed}: unfinished");
        if let Some(o) = overtaken_by_calls(&scenario, &report, OVERTAKE_BOUND) {
            println!("{o}");
            unfair.push(seed);
        }
    }
    assert!(unfair.is_empty(), "seeds {unfair:?} break the bound");
}

#[test]
fn a_line_deaf_to_announcements_hands_over_past_waiters() {
    let family = |seed| fair_lines(seed, true, |b| b.mutant(Mutant::DeafToAnnouncements));
    let found = first_where(FAIR_DETECTION, family, |s, r| {
        overtaken_by_calls(s, r, OVERTAKE_BOUND).is_some()
    });
    let (scenario, report) = found.expect("a deaf line kept the bound");
    let o = overtaken_by_calls(&scenario, &report, OVERTAKE_BOUND).expect("found");
    // The evidence: the calls that passed are of one other client, most of them handed
    // the hold by the call ahead of them in its line (no attempt of their own).
    let by_one = o.by.iter().all(|b| b.client == o.by[0].client);
    let handed = o.by.iter().filter(|b| b.acquired_after == Some(0)).count();
    assert!(by_one && handed * 2 > o.by.len(), "{o}");
    println!("DeafToAnnouncements found at seed {}: {o}", scenario.seed);
}

/// Every waiter hears its turn: a resource never sits free for long while a call waits
/// for it (the waiter subscribes before any announcement for its place can be made, and a
/// head announced with no release behind it tries at once: docs/design.md, "The waiters'
/// queue").
#[test]
fn a_free_lock_does_not_wait_for_a_waiters_timer() {
    let mut idle = Vec::new();
    for seed in 0..FAIR_BUDGET {
        let scenario = fair_lines(seed, true, |b| b);
        let report = run(&scenario);
        if let Some(i) = report.checker.idle_while_waiting(report.end)
            && i.gap > IDLE_BOUND
        {
            println!("{i}");
            idle.push(seed);
        }
    }
    assert!(idle.is_empty(), "seeds {idle:?} left the lock idle");
}

#[test]
fn a_head_that_waits_for_a_release_leaves_the_lock_idle() {
    let family = |seed| fair_lines(seed, true, |b| b.mutant(Mutant::HeadWaitsForRelease));
    let found = first_where(IDLE_DETECTION, family, |_, r| {
        (r.checker.idle_while_waiting(r.end)).is_some_and(|i| i.gap > IDLE_BOUND)
    });
    let (scenario, report) = found.expect("a head waiting for a release was not found");
    let idle = report
        .checker
        .idle_while_waiting(report.end)
        .expect("found");
    println!(
        "HeadWaitsForRelease found at seed {}: {idle}",
        scenario.seed
    );
}

/// A waiter that cannot announce itself (a RESP2 client, `fair_lines_silent`) is let in
/// within the trip through the nodes of a line that hears everywhere (queue.rs,
/// `HEAR_SILENT_WAITERS_EVERY`), and as the queue's head it polls (waiters.rs,
/// `UNHEARD_POLL_EVERY`), so the lock never sits free for long while it or anyone waits.
#[test]
fn a_silent_waiter_is_let_in_within_the_lines_trip() {
    let (mut late, mut idle, mut waited) = (Vec::new(), Vec::new(), 0);
    for seed in 0..SILENT_BUDGET {
        let scenario = fair_lines_silent(seed, |b| b);
        let report = run(&scenario);
        assert!(report.workloads_done, "seed {seed}: unfinished");
        let lateness = silent_lateness(&scenario, &report);
        waited += lateness.len();
        if let Some(l) = lateness.iter().find(|l| **l > SILENT_LATENESS) {
            println!("seed {seed}: a silent waiter let in {l:?} late");
            late.push(seed);
        }
        // A busy line that no longer counts as contested yields once a second anyway (its
        // courtesy hand-off, queue.rs): the lock sits free for the retry policy's longest
        // delay on purpose then, while the line's next calls wait.
        let config = &scenario.config;
        let jitter = (config.release_notifications()).map_or(Duration::ZERO, |n| n.jitter);
        let courtesy = config.retry().delay_max + jitter + IDLE_BOUND;
        let idle_now = report
            .checker
            .idle_while_waiting_but_courtesy(report.end, courtesy);
        if let Some(i) = idle_now.filter(|i| i.gap > IDLE_BOUND) {
            println!("{i}");
            idle.push(seed);
        }
    }
    assert!(
        late.is_empty(),
        "seeds {late:?} let a silent waiter in late"
    );
    assert!(idle.is_empty(), "seeds {idle:?} left the lock idle");
    // Most runs had the silent client wait at least once.
    assert!(
        waited as u64 >= SILENT_BUDGET,
        "{waited} silent waiting calls"
    );
}

#[test]
fn a_line_that_never_makes_the_trip_keeps_a_silent_waiter_out() {
    let family = |seed| fair_lines_silent(seed, |b| b.mutant(Mutant::SilentWaitersUnheard));
    let found = first_where(SILENT_DETECTION, family, |s, r| {
        silent_lateness(s, r).iter().any(|l| *l > SILENT_LATENESS)
    });
    let (scenario, report) = found.expect("a line that never makes the trip was not found");
    let worst = silent_lateness(&scenario, &report).into_iter().max();
    println!(
        "SilentWaitersUnheard found at seed {}: a silent waiter let in {worst:?} late",
        scenario.seed
    );
}

#[test]
fn a_waiter_that_cannot_hear_and_does_not_poll_leaves_the_lock_idle() {
    let family = |seed| fair_lines_silent(seed, |b| b.mutant(Mutant::UnheardWaitersDoNotPoll));
    let found = first_where(SILENT_DETECTION, family, |_, r| {
        (r.checker.idle_while_waiting(r.end)).is_some_and(|i| i.gap > IDLE_BOUND)
    });
    let (scenario, report) = found.expect("a waiter that does not poll was not found");
    let idle = report
        .checker
        .idle_while_waiting(report.end)
        .expect("found");
    println!(
        "UnheardWaitersDoNotPoll found at seed {}: {idle}",
        scenario.seed
    );
}

/// The numbers behind [`OVERTAKE_BOUND`] and the detection budgets: per run of the fairness
/// families, with and without the queue, with lines that hear waiters or are deaf to them,
/// the most overtakes of one waiting call, by waiters, by newcomers and by both; and the runs of the waiters family whose live waiters starved, for the
/// correct core and the never-pruning queue.
/// `cargo test -p redlock-sim --test waiters -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints distributions"]
fn measure_overtakes_and_starvation() {
    let seeds = 300;
    let families: [(&str, Family); 6] = [
        ("fair, queue", |seed| fair(seed, |b| b)),
        ("fair, no queue", |seed| {
            fair(seed, |b| b.waiter_queue(None))
        }),
        ("fair_slow, queue", |seed| fair_slow(seed, |b| b)),
        ("fair_lines, RESP3", |seed| fair_lines(seed, true, |b| b)),
        ("fair_lines, RESP3, deaf to announcements", |seed| {
            fair_lines(seed, true, |b| b.mutant(Mutant::DeafToAnnouncements))
        }),
        ("fair_lines, servers drawn", |seed| {
            fair_lines(seed, false, |b| b)
        }),
    ];
    for (name, family) in families {
        let mut hists = [[0usize; 16]; 3];
        let mut worst = (0, 0);
        for seed in 0..seeds {
            let scenario = family(seed);
            let (w, n, all) = most_overtakes(&scenario, &run(&scenario));
            for (hist, count) in hists.iter_mut().zip([w, n, all]) {
                hist[count.min(15)] += 1;
            }
            worst = worst.max((all, seed));
        }
        println!("{name}, {seeds} runs, most overtakes of a call per run (0..15+):");
        println!("  by waiters   {:?}", hists[0]);
        println!("  by newcomers {:?}", hists[1]);
        println!("  by both      {:?}", hists[2]);
        println!("  worst by both: {} at seed {}", worst.0, worst.1);
    }
    for mutant in [false, true] {
        let (mut starved_runs, mut first, mut deaths) = (0, None, 0);
        for seed in 0..seeds {
            let scenario = match mutant {
                true => waiters(seed, |b| b.mutant(Mutant::QueueNeverPrunes)),
                false => waiters(seed, |b| b),
            };
            let report = run(&scenario);
            deaths += report.checker.deaths().len();
            if starved(&report).is_some() {
                starved_runs += 1;
                first.get_or_insert(seed);
            }
        }
        println!(
            "never-prunes {mutant}: {starved_runs} of {seeds} runs starved (first seed \
             {first:?}), {deaths} deaths"
        );
    }
}

/// How late a silent client's waiting call is served, with and without the line's trip
/// through the nodes: `cargo test --release -p redlock-sim --test waiters -- --ignored
/// --nocapture measure_silent`.
#[test]
#[ignore = "a measurement: prints distributions"]
fn measure_silent_waiters() {
    let seeds = 100;
    for (name, mutant) in [
        ("correct", None),
        ("SilentWaitersUnheard", Some(Mutant::SilentWaitersUnheard)),
    ] {
        let mut worst = Vec::new();
        let mut waiting = 0;
        for seed in 0..seeds {
            let scenario = fair_lines_silent(seed, |b| match mutant {
                Some(m) => b.mutant(m),
                None => b,
            });
            let report = run(&scenario);
            let late = silent_lateness(&scenario, &report);
            waiting += late.len();
            worst.push((
                late.iter().max().copied().unwrap_or_default(),
                seed,
                report.workloads_done,
            ));
        }
        worst.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let q = |p: f64| ms(worst[((worst.len() - 1) as f64 * p) as usize].0);
        println!(
            "{name}: {seeds} runs, {waiting} silent waiting calls; worst lateness per run p50 {:.0} ms, p90 {:.0}, max {:.0} (seed {}), unfinished runs {}",
            q(0.5),
            q(0.9),
            q(1.0),
            worst.last().unwrap().1,
            worst.iter().filter(|w| !w.2).count()
        );
        let hist: Vec<usize> = (0..8)
            .map(|i| {
                worst
                    .iter()
                    .filter(|w| ms(w.0) >= i as f64 * 200.0 && ms(w.0) < (i + 1) as f64 * 200.0)
                    .count()
            })
            .collect();
        println!("  per 200 ms: {hist:?}");
    }
}
