//! Signals in and out: the INT, TERM and HUP that `redlock` catches (so that it outlives
//! them long enough to pass them on and release), and sending a signal to the child, through
//! `rustix`'s safe `kill` (std can only send SIGKILL).

use std::io;

use rustix::process::{Pid, Signal, kill_process};
use tokio::signal::unix::{SignalKind, signal};

/// The signals `redlock` catches once it has started.
pub(crate) struct Caught {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Caught {
    /// Catches INT, TERM and HUP from now on (their default action, exiting, no longer
    /// applies).
    pub(crate) fn install() -> io::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal caught.
    pub(crate) async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::INT,
            _ = self.term.recv() => Signal::TERM,
            _ = self.hup.recv() => Signal::HUP,
        }
    }
}

/// Sends `signal` to the process `pid`. A process already gone is not an error: it was
/// reaped, or is about to be.
pub(crate) fn send(pid: u32, signal: Signal) {
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    if let Some(pid) = pid {
        let _ = kill_process(pid, signal);
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
        Signal::KILL => "SIGKILL",
        _ => "a signal",
    }
}
