//! The acquiring phase's part in a release that grants (grant.rs; docs/design.md, "A
//! release that grants"): a waiter that hears a quorum of grants of the key to its id holds
//! with that id as its value, without an attempt of its own.

use std::time::Instant;

use rand_core::CryptoRng;

use super::super::Phase;
use super::{Acquiring, Ctx};
use crate::grant::GRANT_GATHER;
use crate::id::NodeId;
use crate::io::{AcquireOutcome, NodeOutcome};
use crate::time;

impl Acquiring {
    /// `node` announced that a release granted the key to `id`. This call's grant makes it
    /// the head there (as a `next:` would) and is counted where it may be; with a quorum
    /// counted and no attempt in flight, the call holds. Short of that, the grant counts as a
    /// `next:` and a release from that node: a call that heads the queue on a quorum tries
    /// at once, and its attempt turns each grant it meets into its own hold.
    pub(crate) fn on_grant<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        (node, id): (NodeId, &[u8]),
        rng: &mut R,
    ) -> Option<Phase> {
        let place = self.place.as_mut()?;
        let was_head = place.is_head(ctx.params.quorum);
        if !place.on_grant(node, id) {
            return None;
        }
        if let Some(held) = self.hold_by_grants(ctx, now) {
            return Some(held);
        }
        // Not held by grants (yet, or at all once the call attempted): the grant also says
        // what a `next:` and a release would have, that the key was let go for this call.
        self.try_as_head(ctx, now, was_head, rng);
        self.on_notice(ctx, now, node, rng);
        self.claim_grants(ctx, now, rng);
        None
    }

    /// A call that heard a grant it does not hold by claims it soon: at once if it cannot
    /// count it (it attempted), else once the other nodes' grants had [`GRANT_GATHER`] to
    /// come. Its attempt turns each grant it meets into its own hold, or, failing, gives the
    /// keys back. Unclaimed, a grant would keep the key from everyone until the call's next
    /// attempt or the grant's end (docs/design.md, "A release that grants").
    pub(crate) fn claim_grants<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) {
        let Some(place) = self.place.as_ref().filter(|p| p.grants().heard_any()) else {
            return;
        };
        let at = match place.grants().count() {
            true => time::add(now, GRANT_GATHER),
            false => now,
        };
        if let Some(wait) = self.wait.as_mut().filter(|_| self.round.is_none()) {
            wait.poll_by(at);
            self.on_timer(ctx, now, rng);
        }
    }

    /// Holds if grants from a quorum are counted (only a call that never attempted counts
    /// them: an attempt turns the grants it meets into its own hold). The validity counts
    /// from the grants' origin over what the nodes set the key for at the least (grant.rs);
    /// a hold shorter than the ttl is extended to it once half of it is gone. With too
    /// little validity left, the grants are forgotten: the next attempt turns them into its
    /// own hold.
    pub(crate) fn hold_by_grants(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        let place = self.place.as_mut()?;
        let ttl = ctx.params.timing.ttl();
        let (origin, mut span) = place.granted(ctx.params.quorum, ttl)?;
        if !ctx.params.grant_within_place {
            span = ttl;
        }
        let nodes: Vec<NodeOutcome> = (ctx.names.iter().zip(place.grants().counted()))
            .map(|(node, counted)| NodeOutcome {
                node: node.clone(),
                outcome: match counted {
                    true => AcquireOutcome::Locked,
                    false => AcquireOutcome::Pending,
                },
            })
            .collect();
        let deadline = ctx.deadline_over(origin, span, now);
        let id = place.id().clone();
        let token = std::mem::replace(&mut self.token, id);
        match self.hold(ctx, now, deadline, (None, nodes, Vec::new())) {
            Ok(mut held) => {
                self.wait = None;
                if span < ttl {
                    // The grant was as long as the place had left: extended to the ttl, as
                    // an attempt's hold lasts, before half of it is gone.
                    held.top_up(now);
                }
                Some(Phase::Held(held))
            }
            Err(_) => {
                self.token = token;
                if let Some(place) = &mut self.place {
                    place.grants_mut().forget();
                }
                None
            }
        }
    }
}
