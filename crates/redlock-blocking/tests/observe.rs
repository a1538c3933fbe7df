//! The `tracing` and `metrics` features of the blocking driver, seen by a capturing
//! subscriber and recorder while it locks on real nodes (`redlock_conformance::observe`). A
//! binary of its own: the subscriber and the recorder are the process's global ones.

use std::time::{Duration, Instant};

use redlock_blocking::{LockGuard, Redlock};
use redlock_conformance::observe::{self, Subject};
use redlock_conformance::{ConfigBuilder, Inspection, LockError, ReleaseOutcome};

#[derive(Clone)]
struct Blocking(Redlock);

impl Subject for Blocking {
    type Guard = LockGuard;

    fn start_with(
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError> {
        let builder = Redlock::builder(urls)?.config(|c| configure(c.ttl(Duration::from_secs(10))));
        builder.build().map(Self)
    }

    fn lock(&self, resource: &str) -> Result<LockGuard, LockError> {
        self.0.lock(resource)
    }

    fn try_lock(&self, resource: &str) -> Result<LockGuard, LockError> {
        self.0.try_lock(resource)
    }

    fn inspect(&self, resource: &str) -> Result<Inspection, LockError> {
        self.0.inspect(resource)
    }

    fn token(guard: &LockGuard) -> String {
        guard.token().to_string()
    }

    fn extend(guard: &LockGuard) -> Result<Instant, LockError> {
        guard.extend()
    }

    fn release(guard: LockGuard) -> Result<Vec<ReleaseOutcome>, LockError> {
        guard.release()
    }
}

#[test]
fn traced_lock() {
    observe::traced_lock::<Blocking>();
}

#[test]
fn traced_fallback() {
    observe::traced_fallback::<Blocking>();
}

#[test]
fn traced_refusal_and_noscript() {
    observe::traced_refusal_and_noscript::<Blocking>();
}

#[test]
fn traced_quarantine() {
    observe::traced_quarantine::<Blocking>();
}

#[test]
fn counted_lock() {
    observe::counted_lock::<Blocking>();
}

#[test]
fn nodes_up_per_node_and_handle() {
    observe::nodes_up_per_node_and_handle::<Blocking>();
}

#[test]
fn healthy_clocks() {
    observe::healthy_clocks::<Blocking>();
}
