//! Local queueing: the lock calls of one [`Client`](crate::Client) for one resource form a
//! line in arrival order. Only the first contends on the nodes (or holds the lock); the
//! others wait without sending anything, and the next one's first attempt starts as soon as
//! the one ahead lets go.
//!
//! Why: two lock calls of one client for one resource can never both hold it, so letting
//! both contend on the nodes only splits votes between them (with N nodes, neither may
//! reach a quorum) and leaves the order to random retry delays, which starves the unlucky.
//! In a line, a local hand-off through the nodes costs one round trip: the next call's
//! `SET NX` goes out right behind the release on each node's connection, and each node runs
//! them in that order. Calls in other processes still contend as before.
//!
//! Most local hand-offs cost nothing: the held lock is *handed over* to the next call as it
//! is, the same stored value until the same deadline, with nothing sent
//! ([`Lines::hand_over_to`]; lock/hand_over.rs; docs/design.md, "Hand-over"). Not when the
//! line is contested or owes a courtesy hand-off (below): those go through the nodes. And a
//! line hands over for at most [`HEAR_WAITERS_EVERY`] after it last went there, as a
//! release through the nodes hears whether another client waits; a line that hears every
//! waiter's announcement (it listens on every node: notify.rs) for at most
//! [`HEAR_SILENT_WAITERS_EVERY`], for the waiters that cannot announce.
//!
//! A line that met another client (an attempt found the lock held by someone else, or a
//! release found someone subscribed to it: the release script answers 2, in the last
//! second) is *contested*, and hands over fairly instead: the releasing call keeps its
//! place until its release is done, and the next call's first attempt starts
//! [`CONTESTED_YIELD`] after that. A waiter of another client hears of the same release
//! (notify.rs) at about that moment and tries at once, so it gets its turn; when it
//! releases, its own client's next call yields in the same way to ours. Without this the
//! next local call, whose `SET` follows the release on every connection, would win every
//! hand-off and starve the other processes.
//!
//! A waiter of another client may never hear of a release: it cannot subscribe (release
//! notifications off, a RESP2-only node or proxy, an ACL that denies the channel), or the
//! announcement is lost. It then tries on its retry timer, and a line that hands the lock
//! from call to call with no gap would starve it. So a line that has handed over locally
//! for [`COURTESY_AFTER`] without yielding yields once anyway (a *courtesy* hand-off): the
//! releasing call keeps its place until its release is done, and the next call's first
//! attempt starts the retry policy's longest delay later, by which time a waiter on the
//! same policy has tried again and found the lock free (unless its attempt was slowed past
//! that by a slow node: then at the next courtesy). It costs a line that is never contested
//! at most that gap in every [`COURTESY_AFTER`] of hand-offs.
//!
//! Pure bookkeeping: who is first, who is next. When a call starts or gives up is the
//! [`Lock`](crate::Lock)'s business (its queued phase).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::id::OpId;
use crate::token::Resource;

/// The lines, one per resource with a lock call in flight.
///
/// A `BTreeMap`: resources are chosen by the application (maybe from its users' input), and
/// a hash map would need keys from a random seed the core does not read; a comparison of
/// two short byte strings is cheap.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    lines: BTreeMap<Resource, Line>,
    /// A negative control's (`_mutants`): lines never yield unasked.
    no_courtesy: bool,
    /// A negative control's (`_mutants`): a line that listens on every node never goes
    /// through the nodes for the waiters that cannot announce.
    deaf_to_silent: bool,
    /// A node refused the waiters' queue's script (waiters/mod.rs): contested hand-offs yield
    /// as without the queue.
    queue_refused: bool,
    /// Resources whose line ended while contested, until when they count as contested: a
    /// new call for one of them takes its place in the waiters' queue from its first
    /// attempt, instead of a plain `SET` that would pass the waiters of other clients
    /// whenever it follows a release.
    recent: BTreeMap<Resource, Instant>,
    /// How many lines have had a call wait behind their first (each may listen for waiters:
    /// [`Lines::listens`]); none in the common case, which then costs no lookup.
    waited: usize,
}

#[derive(Debug)]
struct Line {
    /// Contends on the nodes, or holds the lock.
    first: OpId,
    /// Wait, in arrival order.
    waiting: VecDeque<OpId>,
    /// Until when the line counts as contested: an attempt found the lock held by another
    /// client less than [`CONTESTED_FOR`] ago.
    contested_until: Option<Instant>,
    /// Since when the line has handed over locally without yielding to other clients.
    streak_since: Instant,
    /// When a call of the line last went to the nodes for the lock (its first acquisition,
    /// or a hand-off through the nodes): a release there hears whether another client waits
    /// (the release script answers 2), a hand-over does not. `None` once the line starts
    /// listening, until its next hand-off through the nodes.
    heard_at: Option<Instant>,
    /// Whether a call has waited behind the first: the line may hand over, and so listens
    /// for waiters of other clients on the resource's waiting channel (notify.rs) while it
    /// is not contested ([`Lines::listens`]). A waiter that announced itself before the line
    /// listened is not heard there, so once a node subscribed, the line's next hand-off goes
    /// through the nodes, whose release hears it ([`Lines::started_listening`]).
    has_waited: bool,
}

impl Line {
    /// Whether the line counts as contested at `now` (see `contested_until`).
    fn is_contested(&self, now: Instant) -> bool {
        self.contested_until.is_some_and(|t| now < t)
    }
}

/// How the next call of a line starts once the call ahead let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandOff {
    /// At once: its `SET` follows the release on every connection.
    Direct,
    /// [`CONTESTED_YIELD`] later: a waiter of another client heard of the release.
    Contested,
    /// At once, in the waiters' queue on the nodes (waiters/mod.rs): a waiter of another client
    /// heard of the release, and the nodes keep the order, so there is nothing to yield.
    /// [`Contested`](Self::Contested) for a lock that does not queue.
    Queued,
    /// The retry policy's longest delay later: a waiter of another client that hears of no
    /// release tries on its timer within that time.
    Courtesy,
}

/// How long a line may hand over locally without yielding before it yields once anyway (a
/// courtesy hand-off).
pub(crate) const COURTESY_AFTER: Duration = Duration::from_secs(1);

/// How long a line that does not listen for waiters on every node may hand the hold from
/// call to call (a hand-over, which sends nothing) before one hand-off goes through the nodes
/// again: that release is how such a line hears of a waiter of another client whose
/// announcement it missed (the release script answers 2: someone is subscribed), and turns
/// contested. A waiter of another client that starts waiting while a line hands over
/// is heard within this time and a section or two, at the cost of one round trip per this
/// time (0.2-0.6% of it on a LAN).
pub(crate) const HEAR_WAITERS_EVERY: Duration = Duration::from_millis(50);

/// [`HEAR_WAITERS_EVERY`] for a line that listens for waiters on every node: it hears every
/// waiter that announces itself, so its trip through the nodes is only for a waiter that
/// cannot announce (a client of a version before announcements, or one with no RESP3
/// connection) but waits in the waiters' queue, where the next call's attempt behind the
/// release finds it. Such a waiter is heard within this time instead of at the line's next
/// courtesy hand-off ([`COURTESY_AFTER`]), for a round trip per this time.
pub(crate) const HEAR_SILENT_WAITERS_EVERY: Duration = Duration::from_millis(250);

/// The most resources [`Lines`] remembers as recently contested with no line in flight
/// (beyond it, a resource is forgotten at once: its next call starts with a plain `SET`).
const RECENT_CAP: usize = 1024;

/// How long a line stays contested after it met another client.
pub(crate) const CONTESTED_FOR: Duration = Duration::from_secs(1);

/// How long the next call of a contested line waits, once the release is done, before its
/// first attempt: the waiters of other clients are told of the release at about that
/// moment and try at once; this lets the first of them reach every node first (about one
/// round trip on a LAN), so the two do not split the nodes' votes. One millisecond: the
/// drivers' timers count in whole milliseconds anyway.
pub(crate) const CONTESTED_YIELD: Duration = Duration::from_millis(1);

impl Lines {
    /// Whether no lock call of this client is in line for `resource`: a new one goes first.
    pub(crate) fn is_free(&self, resource: &Resource) -> bool {
        !self.lines.contains_key(resource)
    }

    /// Whether a new call for `resource` at `now` finds no line but one that ended while
    /// contested less than [`CONTESTED_FOR`] ago: it starts in the waiters' queue
    /// (client/operations.rs).
    pub(crate) fn recently_contested(&self, resource: &Resource, now: Instant) -> bool {
        !self.recent.is_empty() && (self.recent.get(resource)).is_some_and(|&until| now < until)
    }

    /// Remembers that `resource` counts as contested until `until`, its line gone; forgets
    /// the ones that no longer do once there are many.
    fn remember(&mut self, resource: &Resource, until: Instant, now: Instant) {
        if self.recent.len() >= RECENT_CAP {
            self.recent.retain(|_, &mut t| now < t);
        }
        if self.recent.len() < RECENT_CAP {
            self.recent.insert(resource.clone(), until);
        }
    }

    /// Puts `op` at the end of `resource`'s line (first, if there is none) at `now`.
    pub(crate) fn join(&mut self, resource: &Resource, op: OpId, now: Instant) {
        match self.lines.get_mut(resource) {
            Some(line) => {
                line.waiting.push_back(op);
                if !std::mem::replace(&mut line.has_waited, true) {
                    self.waited += 1;
                }
            }
            None => {
                let recent = (self.recent.remove(resource)).filter(|&until| now < until);
                let line = Line {
                    first: op,
                    waiting: VecDeque::new(),
                    contested_until: recent,
                    streak_since: now,
                    heard_at: Some(now),
                    has_waited: false,
                };
                self.lines.insert(resource.clone(), line);
            }
        }
    }

    /// Whether `resource`'s line listens for waiters of other clients at `now` (notify.rs,
    /// `Watching::listen`): a call has waited behind its first, so it may hand over, and it
    /// is not contested. A contested line does not hand over, so it need not hear of more
    /// waiters: it stops listening, and the nodes stop sending it every waiter's
    /// announcement.
    pub(crate) fn listens(&self, resource: &Resource, now: Instant) -> bool {
        self.waited > 0
            && (self.lines.get(resource)).is_some_and(|l| l.has_waited && !l.is_contested(now))
    }

    /// Whether any line has had a call wait behind its first. Only such a line may listen for
    /// waiters, hand over, or place its next call in the waiters' queue: none in the common
    /// case, which then costs no lookup.
    #[inline]
    pub(crate) fn any_waited(&self) -> bool {
        self.waited > 0
    }

    /// `resource`'s line now listens on at least one node: its next hand-off goes through
    /// the nodes, whose release hears a waiter that announced itself before.
    pub(crate) fn started_listening(&mut self, resource: &Resource) {
        if let Some(line) = self.lines.get_mut(resource) {
            line.heard_at = None;
        }
    }

    /// Whether a lock call for `resource` that starts waiting for another client's release
    /// announces so (notify.rs): a call in the resource's line does; a call in no line (a
    /// reader, a multi-lock) does not.
    pub(crate) fn announces(&self, resource: &Resource) -> bool {
        self.lines.contains_key(resource)
    }

    /// `resource`'s line met another client at `now`.
    pub(crate) fn contest(&mut self, resource: &Resource, now: Instant) {
        let until = crate::time::add(now, CONTESTED_FOR);
        match self.lines.get_mut(resource) {
            Some(line) => line.contested_until = Some(until),
            None => self.remember(resource, until, now),
        }
    }

    /// Whether `resource`'s line is contested at `now`: then its hand-off waits for the
    /// release to be done and lets a waiter of another client, told of the release at that
    /// moment, try first.
    pub(crate) fn is_contested(&self, resource: &Resource, now: Instant) -> bool {
        (self.lines.get(resource)).is_some_and(|l| l.is_contested(now))
    }

    /// A node refused the waiters' queue's script: from now on a contested line yields as
    /// without the queue (the client's calls wait without it too: client/locks.rs).
    pub(crate) fn refuse_queue(&mut self) {
        self.queue_refused = true;
    }

    /// Whether a node refused the waiters' queue's script.
    pub(crate) fn queue_refused(&self) -> bool {
        self.queue_refused
    }

    /// Lines that yield unasked (a courtesy hand-off) if `courtesy`, and that go through
    /// the nodes every [`HEAR_SILENT_WAITERS_EVERY`] while they listen on every node if
    /// `silent`: both `true` but for a negative control (`_mutants`; client/controls.rs).
    pub(crate) fn controlled(courtesy: bool, silent: bool) -> Self {
        Self {
            no_courtesy: !courtesy,
            deaf_to_silent: !silent,
            ..Self::default()
        }
    }

    /// Whether `resource`'s line has handed over locally for [`COURTESY_AFTER`] at `now`,
    /// with a call waiting: its next hand-off is a courtesy one.
    pub(crate) fn owes_courtesy(&self, resource: &Resource, now: Instant) -> bool {
        !self.no_courtesy
            && (self.lines.get(resource)).is_some_and(|l| {
                !l.waiting.is_empty()
                    && now.saturating_duration_since(l.streak_since) >= COURTESY_AFTER
            })
    }

    /// Takes `op` out of `resource`'s line at `now`. If it was first, the next call (if any)
    /// becomes first and is returned, with how it starts: `yields` if it lets another
    /// client's waiter go first (a contested line), else a courtesy hand-off if the line
    /// owes one, else at once.
    pub(crate) fn leave(
        &mut self,
        resource: &Resource,
        op: OpId,
        now: Instant,
        yields: bool,
    ) -> Option<(OpId, HandOff)> {
        let courtesy = self.owes_courtesy(resource, now);
        let line = self.lines.get_mut(resource)?;
        if line.first != op {
            line.waiting.retain(|&w| w != op);
            return None;
        }
        match line.waiting.pop_front() {
            Some(next) => {
                line.first = next;
                line.heard_at = Some(now);
                let how = if yields && !self.queue_refused {
                    HandOff::Queued
                } else if yields {
                    HandOff::Contested
                } else if courtesy {
                    HandOff::Courtesy
                } else {
                    HandOff::Direct
                };
                if how != HandOff::Direct {
                    line.streak_since = now;
                }
                Some((next, how))
            }
            None => {
                let line = self.lines.remove(resource);
                if line.as_ref().is_some_and(|l| l.has_waited) {
                    self.waited = self.waited.saturating_sub(1);
                }
                let until = line.and_then(|l| l.contested_until);
                if let Some(until) = until.filter(|&t| now < t) {
                    self.remember(resource, until, now);
                }
                None
            }
        }
    }

    /// The call that would take `op`'s hold by a hand-over at `now`, if the line allows one:
    /// `op` is first in `resource`'s line with a call behind it, the line is not contested,
    /// owes no courtesy hand-off, and went to the nodes less than [`HEAR_WAITERS_EVERY`]
    /// ago, or [`HEAR_SILENT_WAITERS_EVERY`] if it listens for waiters on every node
    /// (`everywhere`: notify.rs, `Watching::hears_everywhere`), where every waiter that can
    /// announce itself is heard.
    /// Whether the two locks can share the hold is theirs to say (lock/hand_over.rs).
    pub(crate) fn hand_over_to(
        &self,
        resource: &Resource,
        op: OpId,
        (now, everywhere): (Instant, bool),
    ) -> Option<OpId> {
        let line = self.lines.get(resource)?;
        let next = *line.waiting.front()?;
        let every = match everywhere {
            true => HEAR_SILENT_WAITERS_EVERY,
            false => HEAR_WAITERS_EVERY,
        };
        let since = |at| now.saturating_duration_since(at);
        let heard = (line.heard_at)
            .is_some_and(|at| since(at) < every || (everywhere && self.deaf_to_silent));
        let fair = !self.is_contested(resource, now) && !self.owes_courtesy(resource, now);
        (line.first == op && heard && fair).then_some(next)
    }

    /// The call whose place in the waiters' queue `op`'s release takes (waiters/mod.rs,
    /// `Succession`): the next in `resource`'s line if `op` is first, while the line is
    /// contested at `now` and the nodes run the queue's script.
    pub(crate) fn next_to_place(
        &self,
        resource: &Resource,
        op: OpId,
        now: Instant,
    ) -> Option<OpId> {
        let line = self.lines.get(resource)?;
        let next = *line.waiting.front()?;
        let queues = self.is_contested(resource, now) && !self.queue_refused;
        (line.first == op && queues).then_some(next)
    }

    /// `op` handed its hold over to the next call of `resource`'s line, which is now first
    /// (see [`hand_over_to`](Self::hand_over_to)). A local hand-off: the streak goes on.
    pub(crate) fn hand_over(&mut self, resource: &Resource, op: OpId) {
        if let Some(line) = self.lines.get_mut(resource)
            && line.first == op
            && let Some(next) = line.waiting.pop_front()
        {
            line.first = next;
        }
    }

    /// How many lock calls wait behind the first, over all resources.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lines.values().map(|l| l.waiting.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(n: u64) -> OpId {
        OpId::from_raw(n)
    }

    fn now() -> Instant {
        crate::test_epoch::epoch()
    }

    #[test]
    fn first_in_first_out_and_a_line_ends_with_its_last_call() {
        let r = Resource::new("r");
        let mut lines = Lines::default();
        assert!(lines.is_free(&r));
        for n in 0..4 {
            lines.join(&r, op(n), now());
        }
        assert!(!lines.is_free(&r));
        assert_eq!(lines.waiting(), 3);
        // One in the middle gives up: it leaves, nobody moves up.
        let direct = |n| Some((op(n), HandOff::Direct));
        assert_eq!(lines.leave(&r, op(2), now(), false), None);
        assert_eq!(lines.leave(&r, op(0), now(), false), direct(1));
        assert_eq!(lines.leave(&r, op(1), now(), false), direct(3));
        assert_eq!(lines.leave(&r, op(3), now(), false), None);
        assert!(lines.is_free(&r));
        // Leaving twice, or a line that is gone, changes nothing.
        assert_eq!(lines.leave(&r, op(3), now(), false), None);
    }

    #[test]
    fn resources_have_lines_of_their_own() {
        let (a, b) = (Resource::new("a"), Resource::new("b"));
        let mut lines = Lines::default();
        lines.join(&a, op(0), now());
        lines.join(&b, op(1), now());
        lines.join(&a, op(2), now());
        assert_eq!(lines.leave(&b, op(1), now(), false), None);
        assert!(lines.is_free(&b));
        assert_eq!(
            lines.leave(&a, op(0), now(), false),
            Some((op(2), HandOff::Direct))
        );
    }

    /// A line on `r` of calls 0 to 3, all joined at the returned instant.
    fn line_of_four() -> (Resource, Lines, Instant) {
        let r = Resource::new("r");
        let mut lines = Lines::default();
        let t0 = now();
        for n in 0..4 {
            lines.join(&r, op(n), t0);
        }
        (r, lines, t0)
    }

    #[test]
    fn a_line_hands_over_while_it_is_fair_and_heard_from_the_nodes_lately() {
        let (r, mut lines, t0) = line_of_four();
        let at = |ms| t0 + Duration::from_millis(ms);
        // The line listens for waiters since its second call joined; once a node subscribed,
        // its next hand-off goes through the nodes, whose release hears a waiter that
        // announced itself before the line listened.
        assert!(lines.listens(&r, at(10)));
        assert_eq!(lines.hand_over_to(&r, op(0), (at(10), false)), Some(op(1)));
        lines.started_listening(&r);
        assert_eq!(lines.hand_over_to(&r, op(0), (at(10), false)), None);
        assert_eq!(lines.hand_over_to(&r, op(0), (at(10), true)), None);
        assert_eq!(
            lines.leave(&r, op(0), at(10), false),
            Some((op(1), HandOff::Direct))
        );
        // Only the first call hands over, to the next in line.
        assert_eq!(lines.hand_over_to(&r, op(2), (at(20), false)), None);
        assert_eq!(lines.hand_over_to(&r, op(1), (at(20), false)), Some(op(2)));
        lines.hand_over(&r, op(1));
        assert_eq!(lines.waiting(), 1);
        // 50 ms after the line last went to the nodes, it goes there again, unless it hears
        // waiters on every node.
        assert_eq!(lines.hand_over_to(&r, op(2), (at(59), false)), Some(op(3)));
        assert_eq!(lines.hand_over_to(&r, op(2), (at(60), false)), None);
        assert_eq!(lines.hand_over_to(&r, op(2), (at(259), true)), Some(op(3)));
        assert_eq!(lines.hand_over_to(&r, op(2), (at(260), true)), None);
        // A contested line does not hand over.
        lines.contest(&r, at(55));
        assert_eq!(lines.hand_over_to(&r, op(2), (at(56), false)), None);
        // Nobody behind: nothing to hand over to.
        assert_eq!(
            lines.leave(&r, op(2), at(61), false),
            Some((op(3), HandOff::Direct))
        );
        assert_eq!(lines.hand_over_to(&r, op(3), (at(62), false)), None);
    }

    #[test]
    fn a_line_that_never_yielded_yields_once_after_a_while() {
        let (r, mut lines, t0) = line_of_four();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert!(!lines.owes_courtesy(&r, at(999)));
        assert_eq!(
            lines.leave(&r, op(0), at(999), false),
            Some((op(1), HandOff::Direct))
        );
        assert!(lines.owes_courtesy(&r, at(1_000)));
        assert_eq!(
            lines.leave(&r, op(1), at(1_000), false),
            Some((op(2), HandOff::Courtesy))
        );
        // The streak starts again with that hand-off; a contested one restarts it too.
        assert!(!lines.owes_courtesy(&r, at(1_999)));
        assert_eq!(
            lines.leave(&r, op(2), at(2_500), true),
            Some((op(3), HandOff::Queued))
        );
        // Nobody waits behind the last call: nothing is owed.
        assert!(!lines.owes_courtesy(&r, at(9_000)));
    }

    #[test]
    fn a_client_whose_nodes_refuse_the_queue_yields_instead() {
        let (r, mut lines, t0) = line_of_four();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(
            lines.leave(&r, op(0), at(1), true),
            Some((op(1), HandOff::Queued))
        );
        lines.refuse_queue();
        assert!(lines.queue_refused());
        assert_eq!(
            lines.leave(&r, op(1), at(2), true),
            Some((op(2), HandOff::Contested))
        );
    }
}
