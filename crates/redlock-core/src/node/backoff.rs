//! Reconnect backoff (node/mod.rs; docs/design.md, "Connections: generations and reasons"):
//! jittered, doubling from the least to the most delay, reset by a reply.

use std::time::{Duration, Instant};

use rand_core::Rng;

use crate::time;

/// A node's reconnection delays.
#[derive(Debug)]
pub(crate) struct Backoff {
    /// The delay the next disconnection waits, before jitter.
    pub(crate) current: Duration,
    /// The first delay, and the one after a reply.
    pub(crate) min: Duration,
    /// The longest delay.
    max: Duration,
}

impl Backoff {
    /// Starting at `min`, doubling up to `max`.
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self {
            current: min,
            min,
            max,
        }
    }

    /// A reply was read: the next reconnect starts fresh.
    #[inline]
    pub(crate) fn reset(&mut self) {
        self.current = self.min;
    }

    /// When to reconnect after a disconnection at `now`: uniform in half to one and a half
    /// of the current delay, which then doubles.
    pub(crate) fn next<R: Rng + ?Sized>(&mut self, now: Instant, rng: &mut R) -> Instant {
        // Saturating: the builder caps the backoff, but a `Duration` near its maximum must
        // still never overflow here (a panic at a disconnect would take every lock with it).
        let delay = time::uniform(
            rng,
            self.current / 2,
            self.current.saturating_add(self.current / 2),
        );
        self.current = self.current.saturating_mul(2).min(self.max);
        time::add(now, delay)
    }
}
