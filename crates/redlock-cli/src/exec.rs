//! `redlock exec`: acquire, run the command under auto-extension, tell it when the lock is
//! lost, pass on the signals `redlock` gets, release after it exits, exit with its status.
//!
//! Every way out releases what it may have set before `redlock` exits: a failed or
//! interrupted acquisition waits for its cleanup releases ([`settle`]); a command that could
//! not start, exited, or was killed is followed by the guard's release.

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redlock_tokio::{
    AutoExtend, LockGuard, LockOptions, LostReason, Redlock, ReleaseOutcome, RetryPolicy,
};
use rustix::process::Signal;
use tokio::process::{Child, Command};

use crate::cli::{ExecArgs, OnLost};
use crate::exit::{self, Exit};
use crate::progress::WaitLine;
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
        Err(exit) => return exit,
    };
    // Before the command starts, so that no Ctrl-Z can stop `redlock` alone: without it,
    // the command would run on and be told only when `redlock` resumes and finds the lock
    // lost.
    let jobs = JobControl::install().ok();
    let child = match spawn(&args, &guard) {
        Ok(child) => child,
        Err(exit) => {
            report_release(&redlock, guard.release().await, args.nodes.quiet);
            return exit;
        }
    };
    let ended = supervise(child, &guard, &args, &mut caught, jobs).await;
    report_release(&redlock, guard.release().await, args.nodes.quiet);
    match ended {
        Err(e) => Exit::with(
            exit::CANNOT_RUN,
            format_args!("waiting for the command: {e}"),
        ),
        Ok((_, Some(reason))) => Exit::with(
            exit::LOST,
            format_args!(
                "lost the lock on {} while the command ran: {reason}{}",
                args.resource,
                exit::lost_hint(&reason)
            ),
        ),
        Ok((status, None)) => Exit::code(status_code(status)),
    }
}

/// The lock options `exec` asks for: its ttl, auto-extension bounded by `--max-hold`,
/// fencing, and how long to wait.
fn lock_options(redlock: &Redlock, args: &ExecArgs) -> LockOptions {
    let auto = AutoExtend {
        max_hold: Some(args.max_hold),
        ..AutoExtend::default()
    };
    let options = (LockOptions::default().ttl(args.ttl))
        .auto_extend(Some(auto))
        .fenced(args.fenced);
    match (args.no_wait, args.wait) {
        (true, _) => options.retry(RetryPolicy::once()),
        (false, Some(wait)) => options.max_wait(redlock.config(), wait),
        (false, None) => options.max_wait(redlock.config(), WAIT_FOREVER),
    }
}

/// Acquires, drawing the waiting line; a signal gives up (nothing stays locked).
async fn acquire(
    redlock: &Redlock,
    args: &ExecArgs,
    caught: &mut Caught,
) -> Result<LockGuard, Exit> {
    let resource = args.resource.as_str();
    if !args.no_wait {
        // A wait rides out nodes that go down while it waits, but one that starts with no
        // quorum in reach is a setup error: say so now rather than wait for ever.
        let seen = redlock.inspect(resource).await;
        let names = redlock.config().node_names();
        match seen
            .as_ref()
            .map(|seen| crate::status::unreachable(seen, names))
        {
            Ok(None) => {}
            Ok(Some(why)) => {
                let message = format!("could not acquire {resource}: {why}");
                return Err(Exit::with(exit::NODE_ERROR, message));
            }
            Err(e) => {
                return Err(Exit::lock_error(
                    &format!("could not acquire {resource}"),
                    e,
                ));
            }
        }
    }
    let mut line = WaitLine::new(resource, args.nodes.quiet);
    let started = Instant::now();
    let mut lock = Box::pin(redlock.lock_with(resource, lock_options(redlock, args)));
    let first = tokio::time::Instant::now() + LINE_AFTER;
    let mut tick = tokio::time::interval_at(first, LINE_EVERY);
    let result = loop {
        tokio::select! {
            result = &mut lock => break result,
            signal = caught.recv() => {
                line.clear();
                // Dropping the `lock()` future cancels the attempt and releases what it set.
                drop(lock);
                settle(redlock, resource).await;
                let name = signals::name(signal);
                let message = format!("got {name} while waiting for {resource}; not run");
                return Err(Exit::with(signals::exit_code(signal), message));
            }
            _ = tick.tick(), if line.is_on() => {
                let seen = redlock.inspect(resource).await.ok();
                line.draw(started.elapsed(), seen.as_ref());
            }
        }
    };
    line.clear();
    match result {
        Ok(guard) => Ok(guard),
        Err(e) => {
            // A failed acquisition has sent its releases; exit only once they have run.
            settle(redlock, resource).await;
            Err(Exit::lock_error(
                &format!("could not acquire {resource}"),
                &e,
            ))
        }
    }
}

/// Waits until every release sent so far for `resource` has run on the nodes that answer:
/// an inspection is queued behind them on each node's connection, which answers in order.
/// (Dropping a `lock()` future releases in the background; `redlock` must not exit first.)
async fn settle(redlock: &Redlock, resource: &str) {
    let _ = redlock.inspect(resource).await;
}

/// Starts the command with the lock's environment.
fn spawn(args: &ExecArgs, guard: &LockGuard) -> Result<Child, Exit> {
    let Some((program, rest)) = args.command.split_first() else {
        return Err(Exit::usage("no command to run".into()));
    };
    let mut command = Command::new(program);
    command
        .args(rest)
        .env("REDLOCK_RESOURCE", &args.resource)
        .env("REDLOCK_TOKEN", OsStr::from_bytes(guard.token().as_bytes()))
        .env(
            "REDLOCK_DEADLINE_MS",
            deadline_ms(guard.validity()).to_string(),
        );
    if let Some(fence) = guard.fencing_token() {
        command.env("REDLOCK_FENCING_TOKEN", fence.to_string());
    }
    // A group of its own, so that the terminal's signals reach `redlock` alone and the
    // command gets each once (crate::signals). It is then in the terminal's background,
    // where reading the terminal would stop it while `redlock` kept the lock: it reads
    // nothing instead.
    command.process_group(0);
    if std::io::stdin().is_terminal() {
        command.stdin(Stdio::null());
    }
    command.spawn().map_err(|e| {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => exit::NOT_FOUND,
            _ => exit::CANNOT_RUN,
        };
        Exit::with(code, format_args!("cannot run {program}: {e}"))
    })
}

/// Waits for the command to exit, passing on the signals `redlock` catches and telling
/// the command, per `--on-lost`, when the lock is lost. Its status, and why the lock was
/// lost if it was.
async fn supervise(
    mut child: Child,
    guard: &LockGuard,
    args: &ExecArgs,
    caught: &mut Caught,
    mut jobs: Option<JobControl>,
) -> std::io::Result<(ExitStatus, Option<LostReason>)> {
    // `None` only once the child has been reaped, which ends this loop. The child leads
    // its own process group: signals go to the group, the command and what it started.
    let pid = child.id().unwrap_or_default();
    let mut lost = None;
    let mut kill_at = None;
    loop {
        let kill_due = tokio::time::sleep_until(kill_at.unwrap_or_else(far_future));
        tokio::select! {
            status = child.wait() => return status.map(|s| (s, lost)),
            reason = guard.lost(), if lost.is_none() => {
                eprintln!("redlock: lost the lock on {}: {reason}; {}", args.resource, tell(args.on_lost));
                match args.on_lost {
                    OnLost::Term => {
                        signals::send_group(pid, Signal::TERM);
                        let now = tokio::time::Instant::now();
                        kill_at = Some(now.checked_add(args.grace).unwrap_or_else(far_future));
                    }
                    OnLost::Kill => signals::send_group(pid, Signal::KILL),
                    OnLost::Ignore => {}
                }
                lost = Some(reason);
            }
            signal = caught.recv() => signals::send_group(pid, signal),
            () = pass_on(&mut jobs, pid) => {}
            () = kill_due, if kill_at.is_some() => {
                signals::send_group(pid, Signal::KILL);
                kill_at = None;
            }
        }
    }
}

/// Passes job control on to the group `pgid`; pending for ever when it is not caught.
async fn pass_on(jobs: &mut Option<JobControl>, pgid: u32) {
    match jobs {
        Some(jobs) => jobs.pass_on(pgid).await,
        None => std::future::pending().await,
    }
}

/// What `--on-lost` does, for the message.
fn tell(on_lost: OnLost) -> &'static str {
    match on_lost {
        OnLost::Term => "sending SIGTERM to the command",
        OnLost::Kill => "sending SIGKILL to the command",
        OnLost::Ignore => "the command runs on (--on-lost ignore)",
    }
}

/// Says which nodes a release could not reach (their keys expire on their own); nothing
/// when every node answered.
fn report_release(
    redlock: &Redlock,
    released: Result<Vec<ReleaseOutcome>, redlock_tokio::LockError>,
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
                    eprintln!(
                        "redlock: release on {name} failed ({fault}); its key expires on its own"
                    );
                }
            }
        }
        Err(e) => eprintln!("redlock: release: {e}; the keys expire on their own"),
    }
}

/// The command's status as an exit code: its own, or 128 + the signal that killed it.
fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
        (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(u8::MAX),
        (None, None) => u8::MAX,
    }
}

/// Unix time in ms at which `validity` from now ends.
fn deadline_ms(validity: Duration) -> u128 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (now + validity).as_millis()
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365)
}

/// "Until it is free": a wait bound no job outlives (the retry policy needs one).
const WAIT_FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);
/// A lock acquired within this long never shows the waiting line.
const LINE_AFTER: Duration = Duration::from_millis(300);
/// How often the waiting line is redrawn (each time after an inspection).
const LINE_EVERY: Duration = Duration::from_secs(1);
