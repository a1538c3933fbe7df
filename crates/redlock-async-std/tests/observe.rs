//! The `tracing` and `metrics` features of this driver, seen by a capturing subscriber and
//! recorder while it locks on real nodes (`redlock_conformance::observe`), every call under
//! `async_std::task::block_on`. A binary of its own: the subscriber and the recorder are the
//! process's global ones.

use std::time::{Duration, Instant};

use async_std::task::block_on;
use redlock_async_std::{LockGuard, Redlock};
use redlock_conformance::observe::{self, Subject};
use redlock_conformance::{ConfigBuilder, Inspection, LockError, ReleaseOutcome};

#[derive(Clone)]
struct AsyncStd(Redlock);

impl Subject for AsyncStd {
    type Guard = LockGuard;

    fn start_with(
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError> {
        let builder = Redlock::builder(urls)?.config(|c| configure(c.ttl(Duration::from_secs(10))));
        builder.build().map(Self)
    }

    fn lock(&self, resource: &str) -> Result<LockGuard, LockError> {
        block_on(self.0.lock(resource))
    }

    fn try_lock(&self, resource: &str) -> Result<LockGuard, LockError> {
        block_on(self.0.try_lock(resource))
    }

    fn inspect(&self, resource: &str) -> Result<Inspection, LockError> {
        block_on(self.0.inspect(resource))
    }

    fn token(guard: &LockGuard) -> String {
        guard.token().to_string()
    }

    fn extend(guard: &LockGuard) -> Result<Instant, LockError> {
        block_on(guard.extend())
    }

    fn release(guard: LockGuard) -> Result<Vec<ReleaseOutcome>, LockError> {
        block_on(guard.release())
    }
}

#[test]
fn traced_lock() {
    observe::traced_lock::<AsyncStd>();
}

#[test]
fn traced_fallback() {
    observe::traced_fallback::<AsyncStd>();
}

#[test]
fn traced_refusal_and_noscript() {
    observe::traced_refusal_and_noscript::<AsyncStd>();
}

#[test]
fn traced_quarantine() {
    observe::traced_quarantine::<AsyncStd>();
}

#[test]
fn counted_lock() {
    observe::counted_lock::<AsyncStd>();
}

#[test]
fn nodes_up_per_node_and_handle() {
    observe::nodes_up_per_node_and_handle::<AsyncStd>();
}

#[test]
fn healthy_clocks() {
    observe::healthy_clocks::<AsyncStd>();
}
