//! A waiting call's place in the waiters' queue (docs/design.md, "The waiters' queue"), as
//! far as the call knows it: its id, ticket and patience, whether it heads the queue on each
//! node (from its attempts' answers and the nodes' `next:` announcements, each read in the
//! order the node sent them), and the grants of the key that releases made to it (grant.rs).

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::pack;
use crate::grant::Grants;
use crate::id::NodeId;
use crate::io::NodeFault;
use crate::token::Token;
use crate::vote::Vote;

/// A waiting call's place in the queues of the nodes, as far as it knows.
#[derive(Debug)]
pub(crate) struct Place {
    /// The waiter's id: drawn once per call, the same on every node and every attempt.
    id: Token,
    /// The ticket sent: 0 until a node gave one, then the largest any gave.
    ticket: u64,
    /// How long a place lasts after its last renewal, in ms.
    patience_ms: u64,
    /// Per node: whether the call heads the queue there, as last heard (a rank, or a grant's
    /// `next:` announcement).
    head: Vec<bool>,
    /// Whether the last attempt had answers from fewer than a quorum: the next attempt is
    /// a plain one, which renews no place (so the places it cannot reach lapse).
    lapsed: bool,
    /// Whether a node answered with the call's place yet.
    placed: bool,
    /// The ticket the last attempt sent (0: the nodes gave their own clocks).
    sent: u64,
    /// Per node: whether its answer to the attempt in flight was read (each is read as it
    /// comes, in order with the node's announcements: a later `next:` wins over an earlier
    /// rank, and the other way round).
    read: Vec<bool>,
    /// How many nodes' answers to the attempt in flight showed the script ran there.
    answered: usize,
    /// Per node, what its announcements said while the call waited in its client's line,
    /// its place taken by the release of the call ahead but its ranks not read yet
    /// ([`Place::on_early_next`]): whether the last `next:` named it, and whether a release
    /// followed.
    early: Vec<Early>,
    /// The grants of the key to the call that releases made (grant.rs).
    grants: Grants,
}

/// What a node announced to a placed call before its ranks were read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Early {
    /// The last `next:` heard: whether it named the call (`None`: none heard).
    next: Option<bool>,
    /// A release was announced after it (or with no `next:` heard).
    released: bool,
}

impl Place {
    /// A new place for a call over `nodes` nodes, drawn at `drawn`, with `patience_ms` and
    /// its `ticket` (0: the nodes give one).
    pub(crate) fn new(
        id: Token,
        (nodes, drawn): (usize, Instant),
        patience_ms: u64,
        ticket: u64,
    ) -> Self {
        Self {
            grants: Grants::new(nodes, drawn),
            id,
            ticket,
            patience_ms,
            head: vec![false; nodes],
            lapsed: false,
            placed: false,
            sent: 0,
            read: vec![false; nodes],
            answered: 0,
            early: Vec::new(),
        }
    }

    /// The waiter's id.
    pub(crate) fn id(&self) -> &Token {
        &self.id
    }

    /// The packed ticket, patience and id the next QUEUE_ACQUIRE carries; `None` while the
    /// place has lapsed (the next attempt is a plain one).
    pub(crate) fn args(&mut self) -> Option<Bytes> {
        if self.lapsed {
            return None;
        }
        self.sent = self.ticket;
        self.read.fill(false);
        self.answered = 0;
        Some(pack(self.ticket, self.patience_ms, &self.id))
    }

    /// Whether the places were taken with the nodes' own clocks as tickets (the client had
    /// no reading of them yet): they may order the waiters differently, so the call sends
    /// the ticket it agreed on (the largest) at once, not at its next retry.
    pub(crate) fn needs_agreement(&self) -> bool {
        self.placed && self.sent == 0 && !self.lapsed
    }

    /// Reads the answers to the attempt in flight that came since the last call (`votes`:
    /// one per node, `None` while unanswered): each node's rank, and the largest ticket
    /// given.
    pub(crate) fn on_answers<'v>(&mut self, votes: impl Iterator<Item = Option<&'v Vote>>) {
        let nodes = self.head.iter_mut().zip(&mut self.read);
        for ((head, read), vote) in nodes.zip(votes) {
            let Some(vote) = vote.filter(|_| !*read) else {
                continue;
            };
            *read = true;
            let (is_head, ran) = match vote {
                Vote::Queued { rank, ticket } => {
                    self.ticket = self.ticket.max(*ticket);
                    self.placed = true;
                    (*rank == 0, true)
                }
                // Granted here: this call heads the queue there, its place kept (a grant
                // on too few nodes keeps the turn).
                Vote::Yes => (true, true),
                // The script ran (a quarantined node's answer is vetoed, not lost): the
                // place was renewed there.
                Vote::No | Vote::Fault(NodeFault::Quarantined { .. }) => (false, true),
                _ => (false, false),
            };
            *head = is_head;
            self.answered += usize::from(ran);
        }
    }

    /// The attempt in flight ended: a node that never answered counts as not headed by
    /// this call, and a place with answers from fewer than `quorum` nodes lapses until an
    /// attempt has them again.
    pub(crate) fn on_attempt_end(&mut self, quorum: usize) {
        for (head, read) in self.head.iter_mut().zip(&self.read) {
            *head &= *read;
        }
        self.lapsed = self.answered < quorum;
    }

    /// The release of the call ahead in its client's line placed this call
    /// ([`Succession`]): `ranks`, its rank on each node that answered. Returns whether a
    /// quorum did; if so the place stands as after an attempt, else the call's next attempt
    /// takes it with the same id and ticket.
    pub(crate) fn on_placed(&mut self, ranks: &[Option<u64>], quorum: usize) -> bool {
        let ticket = self.ticket;
        let votes: Vec<Option<Vote>> = (ranks.iter())
            .map(|r| r.map(|rank| Vote::Queued { rank, ticket }))
            .collect();
        self.on_answers(votes.iter().map(Option::as_ref));
        let placed = self.answered >= quorum;
        if placed {
            self.on_attempt_end(quorum);
        }
        placed
    }

    /// `node` announced `id` as its queue's next head while the call waited in its line,
    /// placed by the release of the call ahead (it listens from when that release went out:
    /// docs/design.md, "The waiters' queue"). Read after the ranks that release answered
    /// ([`apply_early`](Self::apply_early)): on each connection a node's announcements
    /// follow its answer to the release, so they are the later word.
    pub(crate) fn on_early_next(&mut self, node: NodeId, id: &[u8]) {
        let heads = id == self.id.as_bytes();
        if let Some(early) = self.early_at(node) {
            *early = Early {
                next: Some(heads),
                released: false,
            };
        }
    }

    /// `node` announced that a release granted the key to `id` while the call waited in its
    /// line (see [`on_early_next`](Self::on_early_next)); a grant to this call counts from
    /// the moment its place was drawn, before the release that placed it went out.
    pub(crate) fn on_early_grant(&mut self, node: NodeId, id: &[u8]) {
        self.on_early_next(node, id);
        if id == self.id.as_bytes() {
            self.grants.heard(node);
        }
    }

    /// `node` announced a release while the call waited in its line (see
    /// [`on_early_next`](Self::on_early_next)).
    pub(crate) fn on_early_release(&mut self, node: NodeId) {
        if let Some(early) = self.early_at(node) {
            early.released = true;
        }
    }

    fn early_at(&mut self, node: NodeId) -> Option<&mut Early> {
        if self.early.is_empty() {
            self.early = vec![Early::default(); self.head.len()];
        }
        self.early.get_mut(node.index())
    }

    /// Once the ranks are read ([`on_placed`](Self::on_placed)): the announcements heard
    /// before them win, and the nodes the call heads that announced a release since are
    /// returned, each a notice the call's wait counts.
    pub(crate) fn apply_early(&mut self) -> Vec<NodeId> {
        let mut released = Vec::new();
        for (i, early) in std::mem::take(&mut self.early).into_iter().enumerate() {
            if let (Some(heads), Some(head)) = (early.next, self.head.get_mut(i)) {
                *head = heads;
            }
            if early.released && self.head.get(i).is_some_and(|h| *h) {
                released.push(NodeId::new(i));
            }
        }
        released
    }

    /// `node` announced `id` as its queue's next head.
    pub(crate) fn on_next(&mut self, node: NodeId, id: &[u8]) {
        if let Some(head) = self.head.get_mut(node.index()) {
            *head = id == self.id.as_bytes();
        }
    }

    /// `node` announced that a release granted the key to `id` (grant.rs): if it is this
    /// call's, the call heads the queue there and the grant is counted where it may be.
    /// Returns whether it was this call's.
    pub(crate) fn on_grant(&mut self, node: NodeId, id: &[u8]) -> bool {
        self.on_next(node, id);
        let ours = id == self.id.as_bytes();
        if ours {
            self.grants.heard(node);
        }
        ours
    }

    /// The grants of the key to the call that releases made (grant.rs).
    pub(crate) fn grants(&self) -> &Grants {
        &self.grants
    }

    /// [`grants`](Self::grants), to change.
    pub(crate) fn grants_mut(&mut self) -> &mut Grants {
        &mut self.grants
    }

    /// With grants counted from `quorum` nodes: the moment the hold's validity counts from,
    /// and how long it lasts at the least from there (grant.rs).
    pub(crate) fn granted(&self, quorum: usize, ttl: Duration) -> Option<(Instant, Duration)> {
        let origin = self.grants.origin(quorum)?;
        Some((origin, crate::grant::span(ttl, self.patience_ms)))
    }

    /// Whether the call has a place and heads the queue on fewer than `quorum` nodes: a
    /// release wakes another waiter.
    pub(crate) fn is_behind(&self, quorum: usize) -> bool {
        self.placed && !self.is_head(quorum)
    }

    /// How often a waiter behind the head renews its place: a third of its patience, so
    /// that the place is renewed twice before it would lapse.
    pub(crate) fn renew_every(&self) -> Duration {
        Duration::from_millis(self.patience_ms / 3)
    }

    /// Whether the call heads the queue on `node`, as last heard.
    pub(crate) fn heads(&self, node: NodeId) -> bool {
        self.head.get(node.index()).is_some_and(|h| *h)
    }

    /// Whether the call heads the queue on at least `quorum` nodes: the one waiter a
    /// release wakes.
    pub(crate) fn is_head(&self, quorum: usize) -> bool {
        self.head.iter().filter(|h| **h).count() >= quorum
    }
}

#[cfg(test)]
mod tests {
    use super::super::unpack;
    use super::*;

    #[test]
    fn a_place_follows_ranks_tickets_and_announcements() {
        let mut place = Place::new(
            Token::new("w1").unwrap(),
            (3, crate::test_epoch::epoch()),
            500,
            0,
        );
        let votes = [
            Vote::Queued { rank: 0, ticket: 5 },
            Vote::Queued { rank: 1, ticket: 9 },
            Vote::Fault(NodeFault::Timeout),
        ];
        place.args();
        place.on_answers(votes.iter().map(Some));
        place.on_attempt_end(2);
        assert!(!place.is_head(2));
        assert!(place.needs_agreement(), "placed with the nodes' tickets");
        assert_eq!(unpack(&place.args().unwrap()), (9, 500, &b"w1"[..]));
        assert!(!place.needs_agreement(), "the agreed ticket sent");
        place.on_next(NodeId::new(1), b"w1");
        assert!(place.is_head(2));
        place.on_next(NodeId::new(1), b"w2");
        assert!(!place.is_head(2));
        // An announcement read after a node's answer wins over it.
        place.args();
        place.on_answers([None, Some(&votes[1]), None].into_iter());
        place.on_next(NodeId::new(1), b"w1");
        place.on_answers([None, Some(&votes[1]), None].into_iter());
        assert!(place.head[1], "the rank read once, before the announcement");
        // Answers from one node of three: lapsed, the next attempt plain.
        place.on_attempt_end(2);
        assert_eq!(place.args(), None);
        assert!(!place.needs_agreement());
    }
}
