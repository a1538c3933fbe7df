//! Holding: extension rounds (manual or automatic), their retries within the remaining
//! validity, and the auto-extension schedule. Never sent after the deadline.

use std::time::Instant;

use rand_core::CryptoRng;

use super::{Held, Lock, Phase};
use crate::command::Command;
use crate::io::{Event, LostReason};
use crate::quorum;
use crate::time;

impl Lock {
    pub(super) fn start_extend(&mut self, now: Instant) {
        let ends = self.params.deadline_ends_lock;
        let Phase::Held(h) = &mut self.phase else {
            return;
        };
        if now >= h.deadline && ends {
            let reason = Self::deadline_reason(h);
            return self.lose(now, reason);
        }
        h.renew_at = None;
        h.retry_at = None;
        let timing = &self.params.timing;
        let script = self.params.extend_script;
        let command = Command::extend(&self.resource, &h.token, timing.ttl_ms, script);
        let mut deadline = time::add(now, timing.attempt_timeout);
        if ends {
            // Votes after the lock's deadline cannot save it.
            deadline = deadline.min(h.deadline);
        }
        self.main = Some(self.new_round(command, now, deadline));
    }

    pub(super) fn on_extend_quorum<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        let Some(round) = self.main.take() else {
            return;
        };
        // algorithm.md §8: validity counted from the extension's own t0.
        let deadline = self.deadline_from(round.started, now);
        let min = self.params.timing.min_validity;
        let Some(validity) = quorum::validity(deadline, now).filter(|v| *v > min) else {
            self.main = Some(round);
            return self.on_extend_failed(now, rng);
        };
        let Phase::Held(h) = &mut self.phase else {
            return;
        };
        h.deadline = deadline;
        h.renewals += 1;
        h.last_failure = None;
        let renew_at = self.renewal_time_of(now);
        if let Phase::Held(h) = &mut self.phase {
            h.renew_at = renew_at;
        }
        self.events.push_back(Event::Extended {
            op: self.op,
            deadline,
            validity,
        });
        self.recycle(round);
    }

    pub(super) fn on_extend_failed<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        let Some(round) = self.main.take() else {
            return;
        };
        let not_ours = round.nodes_voting_no();
        // algorithm.md §9: more than N - q nodes without our key means another
        // client may hold the lock now.
        if not_ours.len() > self.params.nodes - self.params.quorum {
            return self.lose(now, LostReason::NotOwned { nodes: not_ours });
        }
        let ends = self.params.deadline_ends_lock;
        let retry = self.params.retry;
        let Phase::Held(h) = &mut self.phase else {
            return;
        };
        h.last_failure = Some(round.faults());
        self.spare_slots = round.slots;
        // A failed extension does not delete a healthy lock: try again within the
        // remaining validity. If none is left, the deadline timer reports the loss.
        let remaining = h.deadline.saturating_duration_since(now);
        let mut delay = time::uniform(rng, retry.delay_min, retry.delay_max);
        if ends {
            delay = delay.min(remaining / 2);
        }
        // Never retry in the same instant: with every node down the retry fails at once and
        // would be due again at once (found by fuzzing).
        let retry_at = time::add(now, delay.max(time::MIN_RETRY_DELAY));
        if !ends || retry_at < h.deadline {
            h.retry_at = Some(retry_at);
        }
    }

    pub(super) fn renewal_time_of(&self, now: Instant) -> Option<Instant> {
        match &self.phase {
            Phase::Held(h) => self.renewal_time(h, now),
            _ => None,
        }
    }

    /// When auto-extension renews next, or `None` if it is off or its bounds are reached.
    pub(super) fn renewal_time(&self, h: &Held, now: Instant) -> Option<Instant> {
        let auto = self.params.auto_extend?;
        if auto.max_renewals.is_some_and(|max| h.renewals >= max) {
            return None;
        }
        let margin = self.params.timing.ttl().mul_f64(auto.renew_below);
        let at = h.deadline.checked_sub(margin).unwrap_or(now).max(now);
        if auto
            .max_hold
            .is_some_and(|max_hold| at >= time::add(h.acquired_at, max_hold))
        {
            return None;
        }
        Some(at)
    }

    pub(super) fn deadline_reason(h: &Held) -> LostReason {
        match &h.last_failure {
            Some(errors) => LostReason::QuorumUnreachable {
                errors: errors.clone(),
            },
            None => LostReason::DeadlinePassed,
        }
    }
}
