//! `redlock exec`: acquire, run the job under auto-extension (crate::job), release once its
//! process group is empty, exit with the command's status. The lock is one resource's, of
//! the kind the flags ask for, or a multi-resource lock of several names (crate::kind):
//! one guard either way, so everything after the acquisition is the same.
//!
//! Every way out releases what it may have set before `redlock` exits: a failed or
//! interrupted acquisition waits for its cleanup releases ([`settle`]); a command that could
//! not start, or whose group has ended, is followed by the guard's release.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redlock_tokio::{
    AcquireFailure, AutoExtend, Inspection, LockError, LockGuard, LockOptions, LostReason, Redlock,
    ReleaseOutcome, RetryPolicy,
};

use crate::cli::ExecArgs;
use crate::exit::{self, Exit};
use crate::job::{self, Broken, Ended, Job};
use crate::kind::ExecKind;
use crate::out::note;
use crate::progress::{WaitLine, seconds};
use crate::signals::{self, Caught, JobControl};

/// Runs `redlock exec`.
pub(crate) async fn run(args: ExecArgs) -> Exit {
    let redlock = match crate::connect(&args.nodes, args.ttl) {
        Ok(redlock) => redlock,
        Err(exit) => return exit,
    };
    // Before anything is locked: from here on INT, TERM and HUP no longer kill `redlock`.
    let mut caught = match Caught::install() {
        Ok(caught) => caught,
        Err(e) => return Exit::with(exit::NODE_ERROR, format_args!("cannot catch signals: {e}")),
    };
    let guard = match acquire(&redlock, &args, &mut caught).await {
        Ok(guard) => guard,
        // flock's -E: a conflict, or a wait that ran out, exits with the code asked for.
        Err(exit) if exit.code == exit::NOT_ACQUIRED => {
            return Exit {
                code: args.conflict_exit_code,
                ..exit
            };
        }
        Err(exit) => return exit,
    };
    // Before the command starts, so that no Ctrl-Z can stop `redlock` alone: without it,
    // the command would run on and be told only when `redlock` resumes and finds the lock
    // lost.
    let jobs = JobControl::install().ok();
    let locked = args.label();
    let job = Job {
        locked: &locked,
        command: &args.command,
        on_lost: args.on_lost,
        grace: args.grace,
        kind: args.kind(),
    };
    let child = match job::spawn(&job, &guard) {
        Ok(child) => child,
        Err(exit) => {
            report_release(&redlock, guard.release().await, args.nodes.quiet);
            settle(&redlock, &args).await;
            return exit;
        }
    };
    let acquired = Instant::now();
    let why = |reason: &LostReason| describe_loss(reason, args.max_hold, acquired.elapsed());
    let ended = job::supervise(child, &guard, &job, &mut caught, jobs, why).await;
    // Only now, with the command's whole process group gone (crate::job).
    report_release(&redlock, guard.release().await, args.nodes.quiet);
    // The release returns at a quorum; the other nodes' share runs before `redlock` exits.
    settle(&redlock, &args).await;
    verdict(ended, &locked, why)
}

/// How `exec` exits once the job has ended and the lock is released: with the command's
/// status, or "lost" when the lock did not cover the whole job. `locked` names what was
/// locked; `why` says why a lock was lost.
fn verdict(
    ended: std::io::Result<Ended>,
    locked: &str,
    why: impl Fn(&LostReason) -> String,
) -> Exit {
    match ended {
        Err(e) => Exit::with(
            exit::CANNOT_RUN,
            format_args!("waiting for the command: {e}"),
        ),
        Ok(Ended {
            broken: Some(Broken::Lost(reason)),
            ..
        }) => Exit::with(
            exit::LOST,
            format_args!(
                "lost the lock on {} while the command ran: {}{}",
                locked,
                why(&reason),
                exit::lost_hint(&reason)
            ),
        ),
        Ok(Ended {
            broken: Some(Broken::Late(late)),
            ..
        }) => Exit::with(
            exit::LOST,
            format_args!(
                "lost the lock on {}: the command's end was seen {} after the lock's \
                 validity ended (was redlock paused?), so it cannot be shown to have \
                 finished while the lock was held",
                locked,
                seconds(late),
            ),
        ),
        Ok(Ended {
            status,
            broken: None,
        }) => Exit::code(job::status_code(status)),
    }
}

/// Why the lock was lost, for messages: a lock whose extensions stopped at `--max-hold`
/// was not lost to a failure, and says so.
fn describe_loss(reason: &LostReason, max_hold: Option<Duration>, held: Duration) -> String {
    match (reason, max_hold) {
        (LostReason::DeadlinePassed, Some(max_hold)) if held >= max_hold => format!(
            "held for --max-hold ({}); not extended further",
            humantime::format_duration(max_hold)
        ),
        _ => reason.to_string(),
    }
}

/// The lock options `exec` asks for: its ttl, auto-extension, fencing, its kind
/// (crate::kind), and how long to wait.
fn lock_options(redlock: &Redlock, args: &ExecArgs) -> LockOptions {
    let options = (LockOptions::default().ttl(args.ttl))
        .auto_extend(Some(auto_extend(args.max_hold)))
        .fenced(args.fenced)
        .kind(args.kind().lock_kind());
    match (args.no_wait, args.wait) {
        (true, _) => options.retry(RetryPolicy::once()),
        (false, Some(wait)) => options.max_wait(redlock.config(), wait),
        (false, None) => options.max_wait(redlock.config(), WAIT_FOREVER),
    }
}

/// Auto-extension for as long as the job runs, or until `--max-hold`. Without it there is
/// no limit, as with flock: the lock lives with the `redlock` process, whose end (or a
/// `redlock release` of its token) ends it; the core's bound on renewals is there for a
/// guard a program forgets, which a process that waits on its job cannot do.
fn auto_extend(max_hold: Option<Duration>) -> AutoExtend {
    AutoExtend {
        max_hold: Some(max_hold.unwrap_or(HOLD_FOREVER)),
        ..AutoExtend::default()
    }
}

/// Acquires, drawing the waiting line; a signal gives up (nothing stays locked).
async fn acquire(
    redlock: &Redlock,
    args: &ExecArgs,
    caught: &mut Caught,
) -> Result<LockGuard, Exit> {
    let locked = args.label();
    let wait_end = (args.wait).and_then(|wait| tokio::time::Instant::now().checked_add(wait));
    if !args.no_wait {
        in_reach(redlock, args).await?;
    }
    let mut line = WaitLine::new(&locked, args.nodes.quiet);
    let started = Instant::now();
    let mut lock = Box::pin(lock_until(redlock, args, wait_end));
    let first = tokio::time::Instant::now() + LINE_AFTER;
    let mut tick = tokio::time::interval_at(first, LINE_EVERY);
    let result = loop {
        tokio::select! {
            result = &mut lock => break result,
            signal = caught.recv() => {
                line.clear();
                // Dropping the `lock()` future cancels the attempt and releases what it set.
                drop(lock);
                settle(redlock, args).await;
                let name = signals::name(signal);
                let message = format!("got {name} while waiting for {locked}; not run");
                return Err(Exit::with(signals::exit_code(signal), message));
            }
            _ = tick.tick(), if line.is_on() => {
                let seen = holder_seen(redlock, args).await;
                line.draw(started.elapsed(), seen.as_ref());
            }
        }
    };
    line.clear();
    match result {
        Ok(guard) => Ok(guard),
        Err(e) => {
            // A failed acquisition has sent its releases; exit only once they have run. The
            // inspections that wait for them also tell a key that is not a lock from a
            // holder, as `status` does.
            let names = redlock.config().node_names();
            for resource in &args.resources {
                let seen = redlock.inspect(resource).await;
                if let Some(why) = seen.ok().and_then(|s| crate::status::not_a_lock(&s, names)) {
                    let message = format!("could not acquire {locked}: {why}");
                    return Err(Exit::with(exit::USAGE, message));
                }
            }
            Err(Exit::lock_error(&format!("could not acquire {locked}"), &e))
        }
    }
}

/// What the waiting line shows: the first of the names found held. Only the mutex and the
/// multi-lock wait on the keys alone: for another kind, a free key is no news (readers,
/// permits or a waiting writer keep it out unseen), and nothing is shown.
async fn holder_seen(redlock: &Redlock, args: &ExecArgs) -> Option<Inspection> {
    let mut free = None;
    for resource in &args.resources {
        let seen = redlock.inspect(resource).await.ok()?;
        if seen.holder.is_some() {
            return Some(seen);
        }
        free = Some(seen);
    }
    free.filter(|_| args.kind().waits_on_the_key_alone())
}

/// Whether the lock `exec` asks for is in reach before it starts to wait: a wait rides
/// out nodes that go down while it waits, but one that starts with no quorum in reach (or
/// with a name taken by a key that is not a lock) is a setup error, said now rather than
/// after waiting for ever. Each name is looked at, with the quorum of the kind
/// ([`ExecKind::quorum`]; a multi-lock's is the configuration's, docs/kinds.md). A
/// semaphore of K >= 2 needs more nodes than the configuration's quorum (docs/kinds.md,
/// "The semaphore's quorum"), and the message says so.
async fn in_reach(redlock: &Redlock, args: &ExecArgs) -> Result<(), Exit> {
    for resource in &args.resources {
        name_in_reach(redlock, args, resource).await?;
    }
    Ok(())
}

/// [`in_reach`] for one of the names.
async fn name_in_reach(redlock: &Redlock, args: &ExecArgs, resource: &str) -> Result<(), Exit> {
    let locked = args.label();
    let mut seen = match redlock.inspect(resource).await {
        Ok(seen) => seen,
        Err(e) => {
            let doing = format!("could not acquire {locked}");
            return Err(Exit::lock_error(&doing, &e));
        }
    };
    let quorum = seen.quorum;
    seen.quorum = args.kind().quorum(seen.nodes.len(), quorum);
    let names = redlock.config().node_names();
    let Some(why) = crate::status::unusable(&seen, names) else {
        return Ok(());
    };
    let mut message = format!("could not acquire {locked}: {}", why.message);
    if let (ExecKind::Permits(k), true) = (args.kind(), seen.quorum > quorum) {
        let _ = write!(
            message,
            " (--permits {k} needs {} of the {} nodes: floor(K*N/(K+1)) + 1)",
            seen.quorum,
            seen.nodes.len()
        );
    }
    Err(Exit::with(why.code, message))
}

/// Locks with `exec`'s options. With `--wait`, waits the full time, as `flock -w` does:
/// the core gives up once its next retry would start after the wait, up to a retry delay
/// early, so one last attempt is made when the wait ends.
async fn lock_until(
    redlock: &Redlock,
    args: &ExecArgs,
    wait_end: Option<tokio::time::Instant>,
) -> Result<LockGuard, LockError> {
    let first = lock(redlock, args, lock_options(redlock, args)).await;
    let gave_up_early = matches!(
        first.as_ref().err().and_then(LockError::acquire_failure),
        Some(AcquireFailure::WaitDeadline { .. })
    );
    let Some(wait_end) = wait_end.filter(|_| gave_up_early) else {
        return first;
    };
    tokio::time::sleep_until(wait_end).await;
    let once = lock_options(redlock, args).retry(RetryPolicy::once());
    match lock(redlock, args, once).await {
        // Still the wait's failure, with the last attempt's reason.
        Err(LockError::Acquire { reason, stats }) => Err(LockError::Acquire {
            reason: AcquireFailure::WaitDeadline {
                last: Some(Box::new(reason)),
            },
            stats,
        }),
        other => other,
    }
}

/// Locks what `args` names with `options`: the one resource, or all of several at once
/// (the driver's `lock_all_with`, which sorts and deduplicates them).
async fn lock(
    redlock: &Redlock,
    args: &ExecArgs,
    options: LockOptions,
) -> Result<LockGuard, LockError> {
    match &args.resources[..] {
        [one] => redlock.lock_with(one, options).await,
        // Several (none, which crate::cli refuses, would be the core's usage error).
        names => redlock.lock_all_with(names, options).await,
    }
}

/// Waits until every release sent so far has run on the nodes that answer: an inspection
/// (of the first name: a multi-lock's release is one command per node) is queued behind
/// them on each node's connection, which answers in order. (Dropping a `lock()` future
/// releases in the background, and a release returns at a quorum while the other nodes'
/// share goes on in the background; `redlock` must not exit first.)
async fn settle(redlock: &Redlock, args: &ExecArgs) {
    if let Some(resource) = args.resources.first() {
        let _ = redlock.inspect(resource).await;
    }
}

/// Says which nodes a release could not reach (their keys expire on their own); nothing
/// when every node answered.
fn report_release(
    redlock: &Redlock,
    released: Result<Vec<ReleaseOutcome>, LockError>,
    quiet: bool,
) {
    if quiet {
        return;
    }
    let names = redlock.config().node_names();
    match released {
        Ok(nodes) => {
            for (name, outcome) in names.iter().zip(&nodes) {
                if let ReleaseOutcome::Failed(fault) = outcome {
                    note!(
                        "redlock: release on {name} failed ({fault}); its key expires on its own"
                    );
                }
            }
        }
        Err(e) => note!("redlock: release: {e}; the keys expire on their own"),
    }
}

/// No hold limit: a bound the core needs, which no job reaches.
const HOLD_FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);
/// "Until it is free": a wait bound no job outlives (the retry policy needs one).
const WAIT_FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);
/// A lock acquired within this long never shows the waiting line.
const LINE_AFTER: Duration = Duration::from_millis(300);
/// How often the waiting line is redrawn (each time after an inspection).
const LINE_EVERY: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_max_hold_is_no_limit_and_one_reached_says_so() {
        let unbounded = auto_extend(None);
        assert!(unbounded.max_hold >= Some(Duration::from_secs(99 * 365 * 86_400)));
        assert_eq!(unbounded.max_renewals, None);
        let hour = Duration::from_secs(3600);
        assert_eq!(auto_extend(Some(hour)).max_hold, Some(hour));
        let passed = LostReason::DeadlinePassed;
        assert_eq!(
            describe_loss(&passed, Some(hour), hour + Duration::from_secs(1)),
            "held for --max-hold (1h); not extended further"
        );
        // Before --max-hold, or without it, a passed deadline is what it says.
        assert_eq!(
            describe_loss(&passed, Some(hour), hour / 2),
            passed.to_string()
        );
        assert_eq!(describe_loss(&passed, None, hour * 2), passed.to_string());
    }
}
