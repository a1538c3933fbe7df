//! The lock kinds' script bodies the kinds rows send (docs/kinds.md, "Scripts": the Lua
//! bodies, which are normative), and the mutant bodies a negative control sends in their
//! place.
//!
//! This is the one place that says where a body comes from: the core's own `Script`
//! constants, which the simulation's models (`redlock_sim::kinds::*_SOURCE`) must match
//! word for word (a run on the model answers `NOSCRIPT` otherwise); the mutant bodies are
//! the simulation's copies.

use redlock_sim::kinds::{rw, semaphore};

use crate::kinds::KindsScript;

/// The bodies a kinds run sends, one per script: [`KindsScripts::SPEC`], or the same with a
/// mutant body in one script's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindsScripts {
    /// MULTI_ACQUIRE.
    pub multi_acquire: &'static str,
    /// MULTI_RELEASE.
    pub multi_release: &'static str,
    /// MULTI_EXTEND.
    pub multi_extend: &'static str,
    /// READ_ACQUIRE.
    pub read_acquire: &'static str,
    /// WRITE_ACQUIRE.
    pub write_acquire: &'static str,
    /// WRITE_ABANDON.
    pub write_abandon: &'static str,
    /// WRITE_RELEASE.
    pub write_release: &'static str,
    /// READ_RELEASE.
    pub read_release: &'static str,
    /// READ_EXTEND.
    pub read_extend: &'static str,
    /// SEM_ACQUIRE.
    pub sem_acquire: &'static str,
    /// SEM_RELEASE.
    pub sem_release: &'static str,
    /// SEM_EXTEND.
    pub sem_extend: &'static str,
}

impl KindsScripts {
    /// The bodies of docs/kinds.md, as the core sends them.
    pub const SPEC: Self = Self {
        multi_acquire: redlock_core::MULTI_ACQUIRE_SCRIPT.body,
        multi_release: redlock_core::MULTI_RELEASE_SCRIPT.body,
        multi_extend: redlock_core::MULTI_EXTEND_SCRIPT.body,
        read_acquire: redlock_core::READ_ACQUIRE_SCRIPT.body,
        write_acquire: redlock_core::WRITE_ACQUIRE_SCRIPT.body,
        write_abandon: redlock_core::WRITE_ABANDON_SCRIPT.body,
        write_release: redlock_core::WRITE_RELEASE_SCRIPT.body,
        read_release: redlock_core::READ_RELEASE_SCRIPT.body,
        read_extend: redlock_core::READ_EXTEND_SCRIPT.body,
        sem_acquire: redlock_core::SEM_ACQUIRE_SCRIPT.body,
        sem_release: redlock_core::SEM_RELEASE_SCRIPT.body,
        sem_extend: redlock_core::SEM_EXTEND_SCRIPT.body,
    };

    /// The body sent where the core sends `script`.
    pub fn body(&self, script: KindsScript) -> &'static str {
        match script {
            KindsScript::MultiAcquire => self.multi_acquire,
            KindsScript::MultiRelease => self.multi_release,
            KindsScript::MultiExtend => self.multi_extend,
            KindsScript::ReadAcquire => self.read_acquire,
            KindsScript::WriteAcquire => self.write_acquire,
            KindsScript::WriteAbandon => self.write_abandon,
            KindsScript::WriteRelease => self.write_release,
            KindsScript::ReadRelease => self.read_release,
            KindsScript::ReadExtend => self.read_extend,
            KindsScript::SemAcquire => self.sem_acquire,
            KindsScript::SemRelease => self.sem_release,
            KindsScript::SemExtend => self.sem_extend,
        }
    }
}

/// SEM_ACQUIRE_OFF_BY_ONE (redlock-core's kinds/scripts.rs, the negative controls): `n > k` in place of `n >= k`,
/// so a node lets k + 1 holders in. Sent as `sem_acquire`, the contract must fail.
pub const SEM_ACQUIRE_OFF_BY_ONE: &str = semaphore::SEM_ACQUIRE_OFF_BY_ONE_SOURCE;

/// WRITE_ACQUIRE_IGNORES_READERS (redlock-core's kinds/scripts.rs, the negative controls): the writer checks only
/// `R`, so it gets in beside live readers. Sent as `write_acquire`, the contract must fail.
pub const WRITE_ACQUIRE_IGNORES_READERS: &str = rw::WRITE_ACQUIRE_IGNORES_READERS_SOURCE;

/// READ_EXTEND_RESURRECTS (redlock-core's kinds/scripts.rs, the negative controls): an extension that re-creates a
/// pruned reader slot. Sent as `read_extend`, the contract must fail.
pub const READ_EXTEND_RESURRECTS: &str = rw::READ_EXTEND_RESURRECTS_SOURCE;
