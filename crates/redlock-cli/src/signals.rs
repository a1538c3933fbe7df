//! Signals in and out: the INT, TERM, HUP and QUIT that `redlock` catches (so that it
//! outlives them long enough to pass them on and release), the job control it passes on
//! (TSTP, CONT), and sending a signal to the command's process group, through `rustix`'s
//! safe `kill` (std can only send SIGKILL).
//!
//! The command runs in a process group of its own, in the terminal's background: a key the
//! terminal turns into a signal (Ctrl-C, Ctrl-\, Ctrl-Z) reaches `redlock` alone, which
//! passes it on exactly once. Sharing `redlock`'s group, the command would get the
//! terminal's signal and then `redlock`'s copy.

use std::io;

use rustix::process::{Pid, Signal, getpid, kill_process, kill_process_group};
use tokio::signal::unix::{SignalKind, signal};

/// The signals `redlock` catches once it has started.
pub(crate) struct Caught {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Caught {
    /// Catches INT, TERM, HUP and QUIT from now on (their default action, exiting, no
    /// longer applies).
    pub(crate) fn install() -> io::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    /// The next signal caught.
    pub(crate) async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::INT,
            _ = self.term.recv() => Signal::TERM,
            _ = self.hup.recv() => Signal::HUP,
            _ = self.quit.recv() => Signal::QUIT,
        }
    }
}

/// Job control while the command runs: Ctrl-Z (TSTP) and the CONT that resumes `redlock`
/// must reach the command too, or it would run on while `redlock`, stopped, extends
/// nothing.
pub(crate) struct JobControl {
    tstp: tokio::signal::unix::Signal,
    cont: tokio::signal::unix::Signal,
}

impl JobControl {
    /// Catches TSTP and CONT from now on; install it only once the command runs, since a
    /// caught TSTP no longer stops `redlock` by itself.
    pub(crate) fn install() -> io::Result<Self> {
        Ok(Self {
            tstp: signal(SignalKind::from_raw(Signal::TSTP.as_raw()))?,
            cont: signal(SignalKind::from_raw(Signal::CONT.as_raw()))?,
        })
    }

    /// Waits for TSTP or CONT and passes it on to the group `pgid`; on TSTP, then stops
    /// `redlock` itself (the CONT that resumes it is passed on in turn).
    pub(crate) async fn pass_on(&mut self, pgid: u32) {
        tokio::select! {
            _ = self.tstp.recv() => {
                send_group(pgid, Signal::TSTP);
                let _ = kill_process(getpid(), Signal::STOP);
            }
            _ = self.cont.recv() => send_group(pgid, Signal::CONT),
        }
    }
}

/// Sends `signal` to the process group `pgid` (the command and whatever it started). A
/// group already gone is not an error: it exited, or is about to.
pub(crate) fn send_group(pgid: u32, signal: Signal) {
    let pgid = i32::try_from(pgid).ok().and_then(Pid::from_raw);
    if let Some(pgid) = pgid {
        let _ = kill_process_group(pgid, signal);
    }
}

/// The shell's exit code for death by `signal`: 128 + its number.
pub(crate) fn exit_code(signal: Signal) -> u8 {
    u8::try_from(128 + signal.as_raw()).unwrap_or(u8::MAX)
}

/// The signal's name, for messages (`SIGTERM`).
pub(crate) fn name(signal: Signal) -> &'static str {
    match signal {
        Signal::INT => "SIGINT",
        Signal::TERM => "SIGTERM",
        Signal::HUP => "SIGHUP",
        Signal::QUIT => "SIGQUIT",
        Signal::KILL => "SIGKILL",
        _ => "a signal",
    }
}
