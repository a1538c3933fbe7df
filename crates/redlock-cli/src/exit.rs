//! Exit codes, in the spirit of flock's `-E`: each failure of `redlock` itself has a code of
//! its own, chosen from sysexits.h so that it rarely collides with a command's; anything else
//! is the command's own status. [`Exit`] is how every path out of `redlock` says its code
//! and its one line.

use std::fmt;

use redlock_tokio::{AcquireFailure, LockError, LostReason};

/// Usage or configuration error: bad option, URL or duration, missing `--`, empty
/// resource, no nodes, an unusable TLS file, a key that is not a lock (sysexits
/// `EX_USAGE`).
pub(crate) const USAGE: u8 = 64;
/// Too few nodes answered to decide (down, refused, timed out) (sysexits `EX_UNAVAILABLE`).
pub(crate) const NODE_ERROR: u8 = 69;
/// The lock is held by someone else (`--no-wait`), or `--wait` ran out; for `release`, the
/// token held nothing (sysexits `EX_TEMPFAIL`).
pub(crate) const NOT_ACQUIRED: u8 = 75;
/// The lock was lost while the command ran; the command was told per `--on-lost`.
pub(crate) const LOST: u8 = 76;
/// `exec --permits K`: the semaphore's holders in place use another K (docs/kinds.md,
/// "Counting semaphore"); every holder of one resource must ask for the same K. Not
/// retried: the command line is wrong, not unlucky (sysexits `EX_CONFIG`).
pub(crate) const PERMITS_MISMATCH: u8 = 78;
/// The command could not be run: not executable.
pub(crate) const CANNOT_RUN: u8 = 126;
/// The command could not be run: not found.
pub(crate) const NOT_FOUND: u8 = 127;

/// The exit-code table `--help` ends with.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0..=255  exec: the command's own status once its process group is empty (128+N if it
           died of signal N)
  64       usage or configuration error (bad option, URL or duration, missing --,
           empty resource, no nodes, a TLS file that cannot be read or used, a key
           that holds something other than a lock)
  69       node error: too few nodes answered
  75       not acquired: held elsewhere (--no-wait) or --wait ran out (exec -E CODE
           changes it); release: the token held nothing where a quorum answered
  76       lost: the lock was lost while the command's group ran (extensions failed
           past the validity, were refused for good: ACL, replica, another writer, or
           stopped at --max-hold), or the job's end was seen after the lock's deadline
  78       exec --permits K: the resource is held with another K (every holder of one
           resource must pass the same K)
  126/127  exec: the command could not be run / was not found
  128+N    exec: redlock got signal N while waiting for the lock (nothing ran)

Signals (exec):
  INT, TERM, HUP, QUIT sent to redlock go once to the command's process group; the lock
  is released after the group is empty. The command has a process group of its own: Ctrl-C
  reaches it once, Ctrl-Z stops it with redlock and fg resumes both; it cannot read the
  terminal (stdin is /dev/null when redlock's is a terminal). On a lost lock: --on-lost.

Cron, one machine of the fleet at a time:
  */5 * * * * REDLOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379 \\
              redlock exec --no-wait nightly-report -- ./report.sh
  The lock is held for as long as the job runs, with no time limit (as with flock);
  --max-hold DUR sets one, after which the lock expires and the job is told (--on-lost).";

/// How `redlock` ends: a code and, unless empty, one line for stderr.
#[derive(Debug)]
pub(crate) struct Exit {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Exit {
    /// Exits with `code`, saying nothing.
    pub(crate) fn code(code: u8) -> Self {
        Self {
            code,
            message: String::new(),
        }
    }

    /// A usage error.
    pub(crate) fn usage(message: String) -> Self {
        Self {
            code: USAGE,
            message,
        }
    }

    /// Exits with `code`, saying `message`.
    pub(crate) fn with(code: u8, message: impl fmt::Display) -> Self {
        Self {
            code,
            message: message.to_string(),
        }
    }

    /// A driver error, with the code its kind calls for; `doing` says what failed. A failed
    /// acquisition gives its reason alone: `doing` already says what the driver's "could
    /// not acquire the lock" would say again.
    pub(crate) fn lock_error(doing: &str, e: &LockError) -> Self {
        let code = lock_error_code(e);
        match e {
            LockError::Acquire { reason, .. } => match permits_mismatch(reason) {
                Some(mismatch) => Self::with(code, format_args!("{doing}: {mismatch}")),
                None => Self::with(code, format_args!("{doing}: {reason}")),
            },
            _ => Self::with(code, format_args!("{doing}: {e}")),
        }
    }

    /// A driver error whose message already says what failed ("bad configuration: …").
    pub(crate) fn bare_lock_error(e: &LockError) -> Self {
        Self::with(lock_error_code(e), e)
    }
}

/// The exit code a driver error's kind calls for.
fn lock_error_code(e: &LockError) -> u8 {
    match e {
        LockError::Acquire { reason, .. } => acquire_code(reason),
        // A TLS file that cannot be read or used is the configuration's fault, found before
        // any node is asked.
        LockError::Config(_)
        | LockError::Address(_)
        | LockError::Usage(_)
        | LockError::Tls { .. } => USAGE,
        LockError::Lost(_) => LOST,
        _ => NODE_ERROR,
    }
}

/// `asked for --permits 3, but its holders hold it with --permits 2 (on …)`, in the
/// command line's words, when `reason` is a semaphore's mismatch (also as a wait's last
/// attempt); `None` otherwise.
fn permits_mismatch(reason: &AcquireFailure) -> Option<String> {
    match reason {
        AcquireFailure::WaitDeadline { last: Some(last) } => permits_mismatch(last),
        AcquireFailure::PermitsMismatch {
            asked,
            in_place,
            nodes,
        } => {
            let nodes: Vec<String> = nodes.iter().map(ToString::to_string).collect();
            Some(format!(
                "asked for --permits {asked}, but its holders hold it with --permits \
                 {in_place} (on {}); every holder of one resource must pass the same K",
                nodes.join(", ")
            ))
        }
        _ => None,
    }
}

/// Not acquired when someone holds it: another client on the nodes, or another lock call
/// of this process (`HeldLocally`; `exec` makes one lock call, so another `redlock` process
/// is the one that waits on the nodes), or the wait ran out with them holding it. A node
/// error when too few nodes answered to decide.
fn acquire_code(reason: &AcquireFailure) -> u8 {
    match reason {
        AcquireFailure::QuorumUnreachable { .. } => NODE_ERROR,
        AcquireFailure::WaitDeadline { last: Some(last) } => acquire_code(last),
        AcquireFailure::Contended { .. } | AcquireFailure::HeldLocally => NOT_ACQUIRED,
        AcquireFailure::PermitsMismatch { .. } => PERMITS_MISMATCH,
        // Too late to leave validity, out of time before a decision, cancelled: nobody said
        // the nodes were broken, so try again later.
        _ => NOT_ACQUIRED,
    }
}

/// What an operator should check when the lock was lost, after the reason itself: a
/// refusal for good comes from the nodes' setup, not from a slow network or a pause.
pub(crate) fn lost_hint(reason: &LostReason) -> &'static str {
    match reason {
        LostReason::Refused { .. } => {
            "; the nodes refuse for good: check their ACL (NOPERM), that they are primaries \
             (READONLY), and that nothing else writes the key (WRONGTYPE)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_held_here_or_elsewhere_is_not_acquired_and_unreachable_is_a_node_error() {
        let contended = AcquireFailure::Contended { nodes: Vec::new() };
        let unreachable = AcquireFailure::QuorumUnreachable { errors: Vec::new() };
        let after = |last: AcquireFailure| AcquireFailure::WaitDeadline {
            last: Some(Box::new(last)),
        };
        assert_eq!(acquire_code(&contended), NOT_ACQUIRED);
        assert_eq!(acquire_code(&AcquireFailure::HeldLocally), NOT_ACQUIRED);
        assert_eq!(
            acquire_code(&after(AcquireFailure::HeldLocally)),
            NOT_ACQUIRED
        );
        assert_eq!(acquire_code(&after(contended)), NOT_ACQUIRED);
        assert_eq!(acquire_code(&unreachable), NODE_ERROR);
        assert_eq!(acquire_code(&after(unreachable)), NODE_ERROR);
        let none = AcquireFailure::WaitDeadline { last: None };
        assert_eq!(acquire_code(&none), NOT_ACQUIRED);
        let message = AcquireFailure::HeldLocally.to_string();
        assert!(message.contains("another lock call"), "{message}");
    }

    #[test]
    fn a_permits_mismatch_has_its_own_code_and_names_both_numbers() {
        let mismatch = AcquireFailure::PermitsMismatch {
            asked: 3,
            in_place: 2,
            nodes: Vec::new(),
        };
        assert_eq!(acquire_code(&mismatch), PERMITS_MISMATCH);
        let waited = AcquireFailure::WaitDeadline {
            last: Some(Box::new(mismatch.clone())),
        };
        assert_eq!(acquire_code(&waited), PERMITS_MISMATCH);
        let e = LockError::Acquire {
            reason: waited,
            stats: Default::default(),
        };
        let exit = Exit::lock_error("could not acquire pool", &e);
        assert_eq!(exit.code, PERMITS_MISMATCH);
        let message = exit.message;
        assert!(message.starts_with("could not acquire pool: "), "{message}");
        assert!(message.contains("--permits 3"), "{message}");
        assert!(message.contains("--permits 2"), "{message}");
    }

    #[test]
    fn a_refused_loss_is_lost_and_says_what_to_check() {
        let refused = LostReason::Refused {
            errors: Vec::new(),
            not_ours: Vec::new(),
        };
        let exit = Exit::lock_error("extending", &LockError::Lost(refused.clone()));
        assert_eq!(exit.code, LOST);
        assert!(
            exit.message.contains("refused for good"),
            "{}",
            exit.message
        );
        assert!(lost_hint(&refused).contains("ACL"));
        assert_eq!(lost_hint(&LostReason::DeadlinePassed), "");
    }
}
