//! The one stderr line `exec` keeps up to date while it waits on a terminal: what it waits
//! for, for how long, and the holder's remaining validity. Plain `\r`; nothing at all when
//! stderr is not a terminal or with `--quiet`.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use redlock_tokio::{Inspection, KeyState};

/// The waiting line, or nothing.
pub(crate) struct WaitLine {
    resource: String,
    on: bool,
    /// Width of the last line drawn, to blank it out.
    drawn: usize,
}

impl WaitLine {
    /// A line for `resource`, drawn only on a terminal and unless `quiet`.
    pub(crate) fn new(resource: &str, quiet: bool) -> Self {
        Self {
            resource: resource.to_owned(),
            on: !quiet && std::io::stderr().is_terminal(),
            drawn: 0,
        }
    }

    /// Whether the line is drawn at all (so whether to inspect for it).
    pub(crate) fn is_on(&self) -> bool {
        self.on
    }

    /// Redraws the line: waited `waited` so far; `seen` is the latest inspection, if any.
    pub(crate) fn draw(&mut self, waited: Duration, seen: Option<&Inspection>) {
        if !self.on {
            return;
        }
        let holder = match seen {
            Some(i) => describe_holder(i),
            None => String::new(),
        };
        let line = format!(
            "redlock: waiting for {} ({}){holder}",
            self.resource,
            seconds(waited)
        );
        let pad = self.drawn.saturating_sub(line.chars().count());
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r{line}{:pad$}", "");
        let _ = stderr.flush();
        self.drawn = line.chars().count();
    }

    /// Blanks the line out, leaving the cursor at its start.
    pub(crate) fn clear(&mut self) {
        if self.on && self.drawn > 0 {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r{:width$}\r", "", width = self.drawn);
            let _ = stderr.flush();
            self.drawn = 0;
        }
    }
}

/// `; held by T, valid for 8.1s` (or by no quorum).
fn describe_holder(i: &Inspection) -> String {
    match (&i.holder, i.validity) {
        (Some(holder), _) if never_expires(i) => {
            format!("; held by {}, with no expiry", short(holder))
        }
        (Some(holder), Some(validity)) => format!(
            "; held by {}, valid for {}",
            short(holder),
            seconds(validity)
        ),
        (Some(holder), None) => format!("; held by {}, expiring", short(holder)),
        (None, _) if i.agreeing == 0 => "; free now".to_owned(),
        (None, _) => format!(
            "; no quorum holds it ({} of {} agree)",
            i.agreeing, i.quorum
        ),
    }
}

/// A token, cut to 16 characters for the line.
fn short(token: &[u8]) -> String {
    let text = String::from_utf8_lossy(token);
    match text.char_indices().nth(16) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.into_owned(),
    }
}

/// `3.2s`.
pub(crate) fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Whether a quorum of the nodes that agree on the holder have its key without expiry:
/// its validity would be counted from no ttl at all (a century, by the core's reckoning).
/// No Redlock client sets such a key; something else wrote it, or made it persist.
pub(crate) fn never_expires(seen: &Inspection) -> bool {
    let Some(holder) = &seen.holder else {
        return false;
    };
    let forever = (seen.nodes.iter())
        .filter(|n| matches!(n, KeyState::Held { value, ttl: None } if value == holder))
        .count();
    forever >= seen.quorum
}
