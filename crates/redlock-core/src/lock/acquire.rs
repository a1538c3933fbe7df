//! Acquiring: one attempt's fan-out, the decision at quorum (validity from `t0`), and the
//! retry or final failure. A failed attempt always hands its token to a cleanup release.

use std::time::Instant;

use rand_core::CryptoRng;

use super::{Held, Lock, Phase};
use crate::command::{Command, Vote};
use crate::io::{AcquireFailure, AcquireOutcome, Acquired, Event, NodeFault};
use crate::options::LockParams;
use crate::quorum;
use crate::round::{Round, Slot};
use crate::time;
use crate::token::Token;

impl Lock {
    pub(super) fn start_attempt<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        rng: Option<&mut R>,
    ) {
        let Phase::Acquiring {
            attempts, token, ..
        } = &mut self.phase
        else {
            return;
        };
        if let Some(rng) = rng {
            *token = attempt_token(self.supplied_token.as_ref(), &self.params, rng);
        }
        *attempts += 1;
        let command = Command::set_nx_px(&self.resource, token, self.params.timing.ttl_ms);
        // algorithm.md §2: one command to all N nodes at once, each with until
        // t0 + attempt_timeout to answer.
        let deadline = time::add(now, self.params.timing.attempt_timeout);
        self.main = Some(self.new_round(command, now, deadline));
    }

    pub(super) fn on_acquire_quorum<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        let Some(round) = self.main.take() else {
            return;
        };
        let Phase::Acquiring {
            attempts, token, ..
        } = &self.phase
        else {
            return;
        };
        // algorithm.md §4: validity = ttl - (t1 - t0) - drift, t0 = the attempt's
        // start, and the deadline is t0 + ttl - drift.
        let deadline = self.deadline_from(round.started, now);
        match quorum::validity(deadline, now) {
            Some(validity) if validity > self.params.timing.min_validity => {
                let token = token.clone();
                let acquired = Acquired {
                    op: self.op,
                    resource: self.resource.clone(),
                    token: token.clone(),
                    deadline,
                    validity,
                    attempts: *attempts,
                    nodes: round.slots.iter().map(acquire_outcome).collect(),
                };
                let mut held = Held {
                    token,
                    deadline,
                    acquired_at: now,
                    renewals: 0,
                    renew_at: None,
                    retry_at: None,
                    last_failure: None,
                };
                held.renew_at = self.renewal_time(&held, now);
                self.phase = Phase::Held(held);
                self.events.push_back(Event::Acquired(acquired));
                self.recycle(round);
            }
            _ => {
                self.main = Some(round);
                self.on_attempt_failed(now, rng, AcquireFailure::ValidityExhausted);
            }
        }
    }

    pub(super) fn on_attempt_failed<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        rng: &mut R,
        reason: AcquireFailure,
    ) {
        if let Some(round) = self.main.take() {
            self.recycle(round);
        }
        let Phase::Acquiring {
            attempts,
            first_start,
            token,
            ..
        } = &self.phase
        else {
            return;
        };
        let (attempts, first_start, token) = (*attempts, *first_start, token.clone());
        // algorithm.md §6: release on ALL N nodes, also those that did not answer,
        // since a lost reply can hide a successful SET.
        self.push_cleanup(now, &token);
        let retry = self.params.retry;
        if retry.max_attempts.is_some_and(|max| attempts >= max) {
            return self.finish_acquire(reason);
        }
        // Never retry in the same instant (a zero delay with every node down would spin).
        let delay = time::uniform(rng, retry.delay_min, retry.delay_max);
        let next = time::add(now, delay.max(time::MIN_RETRY_DELAY));
        if retry
            .max_wait
            .is_some_and(|wait| next > time::add(first_start, wait))
        {
            return self.finish_acquire(AcquireFailure::WaitDeadline);
        }
        if let Phase::Acquiring { retry_at, .. } = &mut self.phase {
            *retry_at = Some(next);
        }
    }

    pub(super) fn finish_acquire(&mut self, reason: AcquireFailure) {
        if let Phase::Acquiring { attempts, .. } = self.phase {
            self.events.push_back(Event::AcquireFailed {
                op: self.op,
                resource: self.resource.clone(),
                reason,
                attempts,
            });
        }
        self.phase = Phase::Finished;
    }

    pub(super) fn acquire_failure(round: &Round) -> AcquireFailure {
        let held = round.nodes_voting_no();
        if held.is_empty() {
            AcquireFailure::QuorumUnreachable {
                errors: round.faults(),
            }
        } else {
            AcquireFailure::Contended { nodes: held }
        }
    }
}

/// The value one attempt stores: a fresh generated token, or the supplied value stamped
/// with a fresh nonce. No two attempts, of one lock call or of any two, store the same
/// value, so a command of an earlier attempt that reaches a node late, on any connection
/// (a cleanup release, a resent `EVAL`, a release or extension of an earlier lock call with
/// the same supplied value), compares a value that is not this attempt's and leaves its key
/// alone. Ordering commands per connection cannot give that: a dead connection's bytes may
/// still reach the node after a new connection's (docs/design.md, "Stored values").
pub(super) fn attempt_token<R: CryptoRng + ?Sized>(
    supplied: Option<&Token>,
    params: &LockParams,
    rng: &mut R,
) -> Token {
    match supplied {
        Some(value) if params.stamp_supplied => value.stamped(rng),
        Some(value) => value.clone(),
        None => Token::generate(rng),
    }
}

pub(super) fn acquire_outcome(slot: &Slot) -> AcquireOutcome {
    match slot {
        Slot::Done(Vote::Yes) => AcquireOutcome::Locked,
        Slot::Done(Vote::No) => AcquireOutcome::Held,
        Slot::Done(Vote::Fault(f)) => AcquireOutcome::Failed(f.clone()),
        Slot::Done(other) => {
            AcquireOutcome::Failed(NodeFault::Protocol(format!("unexpected vote {other:?}")))
        }
        _ => AcquireOutcome::Pending,
    }
}
