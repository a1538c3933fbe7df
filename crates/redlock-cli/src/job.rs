//! The job `exec` runs under the lock: the command, in a process group of its own, and
//! everything it starts in that group. Starts it, passes signals on to the group, tells the
//! group when the lock is lost, and waits until the group is empty: a background child
//! (`sh -c 'work &'`) keeps the lock as long as it runs, as flock's does. What leaves the
//! group (`setsid`, `setpgid`, a daemon) is out of its reach; the CLI README says so.
//!
//! Nothing here locks or releases: `exec` does, before and after.

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlock_tokio::{LockGuard, LostReason, Resource};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions};
use tokio::process::{Child, Command};

use crate::cli::OnLost;
use crate::exit::{self, Exit};
use crate::kind::ExecKind;
use crate::out::note;
use crate::signals::{self, Caught, JobControl};

/// What `exec` needs to know about the job it runs.
pub(crate) struct Job<'a> {
    /// The lock's name, or a multi-lock's names (`a, b`), for messages.
    pub(crate) locked: &'a str,
    /// The program and its arguments.
    pub(crate) command: &'a [String],
    /// What to do to the group when the lock is lost.
    pub(crate) on_lost: OnLost,
    /// With `OnLost::Term`: how long after SIGTERM the group gets SIGKILL.
    pub(crate) grace: Duration,
    /// The kind of lock held, for `REDLOCK_KIND` and `REDLOCK_PERMITS`.
    pub(crate) kind: ExecKind,
}

/// How the job ended: its leader's status, and whether the lock covered it to the end.
#[derive(Debug)]
pub(crate) struct Ended {
    /// The command's own status (the group's leader).
    pub(crate) status: ExitStatus,
    /// Why the lock did not cover the whole job, if it did not.
    pub(crate) broken: Option<Broken>,
}

/// Why the lock did not cover the whole job.
#[derive(Debug)]
pub(crate) enum Broken {
    /// The lock was lost while the group ran; the group was told per `--on-lost`.
    Lost(LostReason),
    /// The group's end was seen this long after the lock's deadline (`redlock` was paused
    /// past it): nothing shows that the job ended while the lock was held.
    Late(Duration),
}

/// Starts the command with the lock's environment, as the leader of a process group of its
/// own. On Linux `redlock` becomes a subreaper first, so that the children the command
/// leaves behind are reparented to it and reaped when they exit (a zombie would keep the
/// group, and the lock, alive).
pub(crate) fn spawn(job: &Job<'_>, guard: &LockGuard) -> Result<Child, Exit> {
    let Some((program, rest)) = job.command.split_first() else {
        return Err(Exit::usage("no command to run".into()));
    };
    let mut command = Command::new(program);
    command
        .args(rest)
        // The nodes' URLs may hold passwords; the job has no use for them. A nested
        // `redlock` finds the nodes through REDLOCK_NODES_FILE, which names a file.
        .env_remove("REDLOCK_NODES")
        .env("REDLOCK_TOKEN", OsStr::from_bytes(guard.token().as_bytes()))
        .env(
            "REDLOCK_DEADLINE_MS",
            deadline_ms(guard.validity()).to_string(),
        );
    // What an outer `exec` told its command and this lock does not hold is not passed on.
    for variable in [
        "REDLOCK_RESOURCE",
        "REDLOCK_RESOURCES",
        "REDLOCK_PERMITS",
        "REDLOCK_FENCING_TOKEN",
    ] {
        command.env_remove(variable);
    }
    let (variable, names) = names_env(guard.resources());
    command.env(variable, OsStr::from_bytes(&names));
    let (kind, permits) = job.kind.env();
    command.env("REDLOCK_KIND", kind);
    if let Some(permits) = permits {
        command.env("REDLOCK_PERMITS", permits.to_string());
    }
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
    become_subreaper();
    command.spawn().map_err(|e| {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => exit::NOT_FOUND,
            _ => exit::CANNOT_RUN,
        };
        Exit::with(code, format_args!("cannot run {program}: {e}"))
    })
}

/// The variable that names what the lock holds, and its value: `REDLOCK_RESOURCE`, the
/// name, for one resource; `REDLOCK_RESOURCES` for a multi-lock: its names as the guard
/// lists them (sorted by bytes, each once), one a line, no newline after the last, which
/// `while IFS= read -r name` reads back exactly (crate::cli refuses a newline in them).
fn names_env(resources: &[Resource]) -> (&'static str, Vec<u8>) {
    match resources {
        [one] => ("REDLOCK_RESOURCE", one.as_bytes().to_vec()),
        several => {
            let names: Vec<&[u8]> = several.iter().map(Resource::as_bytes).collect();
            ("REDLOCK_RESOURCES", names.join(&b'\n'))
        }
    }
}

/// Waits until the command has exited and its process group is empty, passing on the
/// signals `redlock` catches and telling the group, per `--on-lost`, when the lock is lost.
///
/// Whether the lock covered the job does not depend on which `select!` branch happens to
/// be polled first: a loss is looked at first, and a job whose end is seen after the lock's
/// deadline cannot be shown to have ended in time.
pub(crate) async fn supervise(
    mut child: Child,
    guard: &LockGuard,
    job: &Job<'_>,
    caught: &mut Caught,
    mut jobs: Option<JobControl>,
    lost_why: impl Fn(&LostReason) -> String,
) -> std::io::Result<Ended> {
    // `None` only once the child has been reaped, which comes after this. The child leads
    // its own process group: signals go to the group, the command and what it started.
    let pgid = child.id().unwrap_or_default();
    let mut lost = None;
    let mut leader = None;
    let mut kill_at = None;
    let mut poll = tokio::time::interval(GROUP_POLL);
    loop {
        let kill_due = tokio::time::sleep_until(kill_at.unwrap_or_else(far_future));
        tokio::select! {
            // A loss is looked at first: with both ready (on resuming from a pause past the
            // validity), a random pick would say "exited in time" as often as not.
            biased;
            reason = guard.lost(), if lost.is_none() => {
                // Act first, then report: the group is told even if stderr is broken
                // (crate::out).
                match job.on_lost {
                    OnLost::Term => {
                        signals::send_group(pgid, Signal::TERM);
                        let now = tokio::time::Instant::now();
                        kill_at = Some(now.checked_add(job.grace).unwrap_or_else(far_future));
                    }
                    OnLost::Kill => signals::send_group(pgid, Signal::KILL),
                    OnLost::Ignore => {}
                }
                note!("redlock: lost the lock on {}: {}; {}", job.locked, lost_why(&reason), tell(job.on_lost));
                lost = Some(reason);
            }
            signal = caught.recv() => signals::send_group(pgid, signal),
            () = pass_on(&mut jobs, pgid) => {}
            () = kill_due, if kill_at.is_some() => {
                signals::send_group(pgid, Signal::KILL);
                kill_at = None;
            }
            status = child.wait(), if leader.is_none() => {
                leader = Some(status?);
                if group_gone(pgid) {
                    break;
                }
            }
            _ = poll.tick(), if leader.is_some() => {
                if group_gone(pgid) {
                    break;
                }
            }
        }
    }
    // The loop ends only once the leader's status is known.
    let status = leader.unwrap_or_else(|| ExitStatus::from_raw(0));
    let broken = match lost {
        Some(reason) => Some(Broken::Lost(reason)),
        None => late(guard).map(Broken::Late),
    };
    Ok(Ended { status, broken })
}

/// How long after the lock's deadline the job's end is seen now; `None` while the lock is
/// still valid. Read on the driver's clock, which the deadline is an instant of: the
/// driver may not yet have run to report the loss.
fn late(guard: &LockGuard) -> Option<Duration> {
    let now = tokio::time::Instant::now().into_std();
    let deadline = guard.deadline();
    (now >= deadline).then(|| now.saturating_duration_since(deadline))
}

/// Whether the process group `pgid` has no process left, after reaping those of its
/// members that were reparented to `redlock` and have exited.
fn group_gone(pgid: u32) -> bool {
    let Some(pgid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return true;
    };
    // Bounded: each call reaps one exited child of this group, and there are finitely many.
    for _ in 0..REAP_AT_ONCE {
        match rustix::process::waitpgid(pgid, WaitOptions::NOHANG) {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    // A member we may not signal (another user's, after a setuid exec) still counts.
    matches!(
        rustix::process::test_kill_process_group(pgid),
        Err(Errno::SRCH)
    )
}

/// On Linux, makes `redlock` the reaper of its orphaned descendants. Elsewhere, init reaps
/// them, as quickly as it does.
fn become_subreaper() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
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
        OnLost::Term => "sent SIGTERM to the command's process group",
        OnLost::Kill => "sent SIGKILL to the command's process group",
        OnLost::Ignore => "the command runs on (--on-lost ignore)",
    }
}

/// The command's status as an exit code: its own, or 128 + the signal that killed it.
pub(crate) fn status_code(status: ExitStatus) -> u8 {
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

/// How often an exited leader's group is looked at until it is empty.
const GROUP_POLL: Duration = Duration::from_millis(50);
/// Exited members reaped per look; the rest wait for the next.
const REAP_AT_ONCE: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_name_is_redlock_resource_and_several_are_one_a_line() {
        let one = [Resource::from("a b")];
        assert_eq!(names_env(&one), ("REDLOCK_RESOURCE", b"a b".to_vec()));
        let several = [
            Resource::from("a"),
            Resource::from("b c"),
            Resource::from("d"),
        ];
        assert_eq!(
            names_env(&several),
            ("REDLOCK_RESOURCES", b"a\nb c\nd".to_vec())
        );
    }
}
