//! The `tracing` and `metrics` features of the tokio driver, seen by a capturing subscriber
//! and recorder while it locks on real nodes (`redlock_conformance::observe`). A binary of
//! its own: the subscriber and the recorder are the process's global ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_conformance::observe::{self, Subject};
use redlock_conformance::{ConfigBuilder, Inspection, LockError, ReleaseOutcome};
use redlock_tokio::{LockGuard, Redlock};
use tokio::runtime::Runtime;

#[derive(Clone)]
struct Tokio {
    rt: Arc<Runtime>,
    redlock: Redlock,
}

struct Guard {
    guard: LockGuard,
    rt: Arc<Runtime>,
}

impl Subject for Tokio {
    type Guard = Guard;

    fn start_with(
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let redlock = {
            let _entered = rt.enter();
            (Redlock::builder(urls)?)
                .config(|c| configure(c.ttl(Duration::from_secs(10))))
                .build()?
        };
        Ok(Self {
            rt: Arc::new(rt),
            redlock,
        })
    }

    fn lock(&self, resource: &str) -> Result<Guard, LockError> {
        let guard = self.rt.block_on(self.redlock.lock(resource))?;
        let rt = Arc::clone(&self.rt);
        Ok(Guard { guard, rt })
    }

    fn try_lock(&self, resource: &str) -> Result<Guard, LockError> {
        let guard = self.rt.block_on(self.redlock.try_lock(resource))?;
        let rt = Arc::clone(&self.rt);
        Ok(Guard { guard, rt })
    }

    fn inspect(&self, resource: &str) -> Result<Inspection, LockError> {
        self.rt.block_on(self.redlock.inspect(resource))
    }

    fn token(guard: &Guard) -> String {
        guard.guard.token().to_string()
    }

    fn extend(guard: &Guard) -> Result<Instant, LockError> {
        guard.rt.block_on(guard.guard.extend())
    }

    fn release(guard: Guard) -> Result<Vec<ReleaseOutcome>, LockError> {
        guard.rt.block_on(guard.guard.release())
    }
}

#[test]
fn traced_lock() {
    observe::traced_lock::<Tokio>();
}

#[test]
fn traced_fallback() {
    observe::traced_fallback::<Tokio>();
}

#[test]
fn traced_refusal_and_noscript() {
    observe::traced_refusal_and_noscript::<Tokio>();
}

#[test]
fn traced_quarantine() {
    observe::traced_quarantine::<Tokio>();
}

#[test]
fn counted_lock() {
    observe::counted_lock::<Tokio>();
}

#[test]
fn nodes_up_per_node_and_handle() {
    observe::nodes_up_per_node_and_handle::<Tokio>();
}

#[test]
fn healthy_clocks() {
    observe::healthy_clocks::<Tokio>();
}
