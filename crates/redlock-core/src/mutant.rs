//! Deliberate bugs for the simulation's negative controls. Only option resolution
//! ([`LockOptions::resolve`](crate::LockOptions)) reads them: each one changes a resolved
//! parameter of the lock, never the lock's code.

/// Deliberate bugs for the simulation's negative controls (test-only feature `_mutants`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(unreachable_pub, dead_code)]
pub enum Mutant {
    /// Quorum lowered to N/2.
    QuorumHalf,
    /// Validity counted from the quorum reply instead of the attempt start.
    ValidityFromQuorum,
    /// Extensions sent after the deadline that re-create missing keys (RedLock.net).
    ResurrectingExtend,
    /// A supplied token stored as is, the same in every attempt and lock call, instead
    /// of stamped with a nonce per attempt (the bug the late-delivery fault finds).
    SharedStoredValue,
}
