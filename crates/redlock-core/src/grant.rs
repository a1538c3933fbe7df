//! A release that grants (docs/design.md, "A release that grants"): when the holder of a
//! contended mutex releases through the waiters' queue (waiters/mod.rs,
//! [`QUEUE_RELEASE_SCRIPT`](crate::QUEUE_RELEASE_SCRIPT)), each node may set the key for the
//! queue's head in the same step, to the head's id, and tell it on the release channel
//! (`grant:<id>`). A head that hears a quorum of grants holds at once, without an attempt
//! of its own: a hand-off across processes costs one fan-out, not two.
//!
//! Only a call that a release placed (its line's predecessor's, waiters/mod.rs `Succession`)
//! and that listens for releases has an id that carries its ttl (`<40 hex>~<ttl ms>`), the
//! mark a node grants by; a node sets the key for the ttl or for what is left of the head's
//! place, whichever is shorter, so that a head that died holds the key no longer than its
//! place would have held the queue. A release never grants the call it places itself.
//!
//! The validity of a hold by grants counts from the moment the call's place was drawn: no
//! node can have placed the call, so granted it the key, before. It lasts `min(ttl,
//! patience)` from there: the node set the key for the ttl or for what was left of the
//! place, which lasted at least its patience from its draw. A grant counts only while the
//! call has sent no attempt with its place (an attempt turns a grant it meets into its own
//! hold, which its cleanup may delete): then nothing of the call's can have taken the
//! grant, and no other client deletes a key holding the call's id. So the hold needs
//! nothing of the announcements but that they were made: one lost, written twice or held
//! back behind later replies counts from the same origin, and one that comes after the
//! grant ended finds no validity left. A call claims a grant it heard and does not hold by
//! with an attempt, which takes the grant as its own hold. Order only adds no safety: the
//! key is set by one atomic step per node, and a quorum of them decides (algorithm.md §3,
//! §4).

use std::time::{Duration, Instant};

use bytes::BytesMut;
use rand_core::CryptoRng;

use crate::id::NodeId;
use crate::token::Token;

/// What a release that grants the key publishes on the release channel, before the head's
/// id (in place of the release's empty message).
pub const GRANT_PREFIX: &[u8] = b"grant:";

/// How long a waiter that heard a grant it can count waits for the other nodes' grants
/// before it claims the key by an attempt: a release's nodes grant within its fan-out, a
/// fraction of a millisecond apart on a LAN, so a quorum of them normally comes at once,
/// and a grant that a node made while the others did not (their keys held otherwise, their
/// pushes lost or never sent on RESP2) is claimed soon.
pub(crate) const GRANT_GATHER: Duration = Duration::from_millis(5);

/// The separator between a waiter's random id and the ttl it carries.
const TTL_SEPARATOR: u8 = b'~';

/// A waiter's id: 40 random hex characters, and, if the call may be granted the key
/// (`grant_ttl_ms`), `~` and its ttl in ms, which a granting node reads.
pub(crate) fn place_id<R: CryptoRng + ?Sized>(rng: &mut R, grant_ttl_ms: Option<u64>) -> Token {
    let random = Token::generate(rng);
    let Some(ttl_ms) = grant_ttl_ms else {
        return random;
    };
    let ttl = ttl_ms.to_string();
    let mut id = BytesMut::with_capacity(random.as_bytes().len() + 1 + ttl.len());
    id.extend_from_slice(random.as_bytes());
    id.extend_from_slice(&[TTL_SEPARATOR]);
    id.extend_from_slice(ttl.as_bytes());
    // 40 + 1 + at most 20 bytes: always a valid token.
    Token::new(id.freeze()).unwrap_or(random)
}

/// How long a hold by grants lasts at the least from its origin: the node set the key for
/// the ttl or for what was left of the place, which was at least its patience from the
/// origin.
pub(crate) fn span(ttl: Duration, patience_ms: u64) -> Duration {
    ttl.min(Duration::from_millis(patience_ms))
}

/// The grants a waiting call heard, per node.
#[derive(Debug)]
pub(crate) struct Grants {
    /// When the call's place was drawn: before any node could have placed it, so before
    /// any grant to it.
    drawn: Instant,
    /// Whether the call sent an attempt with its place: an attempt turns a grant it meets
    /// into its own hold, which its cleanup may delete, so a grant heard since may be gone.
    attempted: bool,
    /// Per node: whether it granted the key to the call.
    granted: Vec<bool>,
    /// Whether any grant to the call was heard since its last attempt.
    heard: bool,
}

impl Grants {
    /// No grant yet, for a place drawn at `drawn` over `nodes` nodes.
    pub(crate) fn new(nodes: usize, drawn: Instant) -> Self {
        Self {
            drawn,
            attempted: false,
            granted: vec![false; nodes],
            heard: false,
        }
    }

    /// An attempt of the call goes out with its place: its grants no longer count.
    pub(crate) fn attempted(&mut self) {
        self.attempted = true;
        self.heard = false;
        self.granted.fill(false);
    }

    /// `node` granted the key to the call: counted unless the call sent an attempt.
    pub(crate) fn heard(&mut self, node: NodeId) {
        self.heard = true;
        if let Some(granted) = self
            .granted
            .get_mut(node.index())
            .filter(|_| !self.attempted)
        {
            *granted = true;
        }
    }

    /// With grants counted from at least `quorum` nodes: the moment the hold's validity
    /// counts from, the place's draw.
    pub(crate) fn origin(&self, quorum: usize) -> Option<Instant> {
        let counted = self.granted.iter().filter(|g| **g).count();
        (counted >= quorum).then_some(self.drawn)
    }

    /// Whether a grant was heard that the call does not hold by (counted or not).
    pub(crate) fn heard_any(&self) -> bool {
        self.heard
    }

    /// Whether the grants heard count (the call sent no attempt with its place).
    pub(crate) fn count(&self) -> bool {
        !self.attempted
    }

    /// Per node, whether its grant is counted.
    pub(crate) fn counted(&self) -> impl Iterator<Item = bool> + '_ {
        self.granted.iter().copied()
    }

    /// Forgets the grants heard (too little validity was left: the next attempt turns them
    /// into its own hold).
    pub(crate) fn forget(&mut self) {
        self.granted.fill(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chacha20::ChaCha20Rng;
    use rand_core::SeedableRng;

    #[test]
    fn an_id_carries_the_ttl_only_when_the_call_may_be_granted() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let granted = place_id(&mut rng, Some(10_000));
        let (random, ttl) = granted.as_bytes().split_at(40);
        assert!(random.iter().all(u8::is_ascii_hexdigit));
        assert_eq!(ttl, b"~10000");
        assert_eq!(place_id(&mut rng, None).as_bytes().len(), 40);
    }

    #[test]
    fn grants_count_from_the_draw_until_the_call_attempts() {
        let t0 = crate::test_epoch::epoch();
        let mut grants = Grants::new(3, t0);
        grants.heard(NodeId::new(0));
        grants.heard(NodeId::new(1));
        assert_eq!(grants.origin(3), None);
        assert_eq!(grants.origin(2), Some(t0));
        assert_eq!(grants.counted().collect::<Vec<_>>(), [true, true, false]);
        // An attempt may take a grant as its own hold: none counts from then on.
        grants.attempted();
        assert_eq!(grants.origin(1), None);
        grants.heard(NodeId::new(2));
        assert_eq!(grants.origin(1), None);
    }

    #[test]
    fn a_hold_by_grants_spans_the_ttl_or_the_patience() {
        assert_eq!(
            span(Duration::from_secs(10), 900),
            Duration::from_millis(900)
        );
        assert_eq!(
            span(Duration::from_millis(300), 900),
            Duration::from_millis(300)
        );
    }
}
