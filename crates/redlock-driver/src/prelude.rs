//! The names every driver re-exports at its root, written once: the core's lock options,
//! outcomes, identifiers and failure reasons, and this crate's two error types. Each driver
//! (`redlock-tokio`, `redlock-async-std`, `redlock-blocking`) has
//! `pub use redlock_driver::prelude::*;`, so `redlock_tokio::RetryPolicy`,
//! `redlock_blocking::RetryPolicy` and [`redlock_core::RetryPolicy`] are one type.
//!
//! What not every driver exports stays in the drivers: each one's `Redlock`, `Builder` and
//! runtime, the async drivers' [`Handle`](crate::Handle), [`LockGuard`](crate::LockGuard)
//! and [`LockRef`](crate::LockRef), and the blocking driver's own guards.

pub use redlock_core::{
    AcquireFailure, AcquireOutcome, AcquireStats, Agreed, AutoExtend, ConnectionError, DelayInput,
    HolderSet, Inspection, KeyState, LockKind, LockOptions, LostReason, MAX_INSPECTED_HOLDERS,
    NodeFault, NodeId, NodeName, NodeOutcome, ReleaseOutcome, Resource, RetryDelay, RetryPolicy,
    SharedHolders, SharedKeys, SlotHolder, Token,
};

pub use crate::error::{LockError, WithLockError};
