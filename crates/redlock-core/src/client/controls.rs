//! The client's negative controls (`_mutants`): test scaffolding that turns off one
//! behaviour of the client itself, read once when the client is built, as option
//! resolution reads the lock's (options.rs, `with_mutant`; mutant.rs lists them all).

use crate::config::Config;
#[cfg(feature = "_mutants")]
use crate::mutant::Mutant;
use crate::queue::Lines;

/// The client's own negative controls: test scaffolding, each `true` in a correct client and
/// `false` only under its mutant (`_mutants`). Read once, where the client is built
/// (`Client::new`), as option resolution reads the lock's
/// (options.rs, `with_mutant`).
#[derive(Debug, Clone, Copy)]
pub(super) struct ClientControls {
    /// Whether a native release's `PUBLISH` count is read (server.rs, `fold_release`), and
    /// lines yield unasked (queue.rs, `Lines::controlled`);
    /// off under `Mutant::LineDeafToWaiters`.
    pub(super) count_waiters: bool,
    /// Whether a probed native release refused after its lock stopped waiting is sent
    /// again as the script (client.rs, `answer`); off under `Mutant::LateRefusalDropped`.
    pub(super) resend_late: bool,
    /// Whether a line turns contested when it hears a waiter's announcement (client.rs,
    /// `on_push`; client/hearing.rs); off under `Mutant::DeafToAnnouncements`.
    pub(super) hear_waiters: bool,
    /// Whether a line that listens for waiters on every node still goes through the nodes
    /// now and then, for the waiters that cannot announce (queue.rs,
    /// `HEAR_SILENT_WAITERS_EVERY`); off under `Mutant::SilentWaitersUnheard`.
    hear_silent_waiters: bool,
    /// Whether a waiter that cannot hear its turn on a quorum of nodes polls (client/pump.rs;
    /// waiters/mod.rs, `UNHEARD_POLL_EVERY`); off under `Mutant::UnheardWaitersDoNotPoll`.
    pub(super) poll_unheard: bool,
    /// Whether a lock gives up the release channel it kept while it held ahead of a release
    /// that nothing of its line waits behind (client/locks.rs, `Entry::wants_channel`); off
    /// under `Mutant::ChannelKeptThroughRelease`.
    pub(super) free_channel_to_release: bool,
}

impl ClientControls {
    /// The controls `config` asks for: all on unless its mutant turns one off.
    #[cfg_attr(not(feature = "_mutants"), allow(unused_variables))]
    pub(super) fn of(config: &Config) -> Self {
        #[cfg_attr(not(feature = "_mutants"), allow(unused_mut))]
        let mut controls = Self {
            count_waiters: true,
            resend_late: true,
            hear_waiters: true,
            hear_silent_waiters: true,
            poll_unheard: true,
            free_channel_to_release: true,
        };
        #[cfg(feature = "_mutants")]
        {
            let off = match config.mutant {
                Some(Mutant::LineDeafToWaiters) => &mut controls.count_waiters,
                Some(Mutant::LateRefusalDropped) => &mut controls.resend_late,
                Some(Mutant::DeafToAnnouncements) => &mut controls.hear_waiters,
                Some(Mutant::SilentWaitersUnheard) => &mut controls.hear_silent_waiters,
                Some(Mutant::UnheardWaitersDoNotPoll) => &mut controls.poll_unheard,
                Some(Mutant::ChannelKeptThroughRelease) => &mut controls.free_channel_to_release,
                _ => return controls,
            };
            *off = false;
        }
        controls
    }

    /// The client's lines, as these controls make them: yielding unasked, and going through
    /// the nodes for the waiters that cannot announce, unless a control is off.
    pub(super) fn lines(&self) -> Lines {
        Lines::controlled(self.count_waiters, self.hear_silent_waiters)
    }
}
