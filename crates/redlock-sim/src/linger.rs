//! The release property (docs/algorithm.md §6): once a release's deadline (the release timeout, counted
//! from the release call) has passed, its key is gone from every node the client could
//! reach, whether the node answered before the release was decided, was still pending and
//! was released in the background, had its connection broken and got the release again on
//! the next one, or had its script cache flushed. Safety is the checker's; this is about
//! keys a released lock leaves behind to block everyone else until their ttl.
//!
//! "Could reach" is judged when the deadline has passed (plus the network's longest delay
//! twice, for the last request to arrive, and the scenario's
//! [`release_check_delay`](crate::Scenario::release_check_delay), for replies a slow link
//! holds back): the node runs (not paused, not down) and the
//! client's link to it is open, and has been since at least the scenario's grace
//! ([`Scenario::release_linger`](crate::Scenario::release_linger)) before the deadline, so
//! a release sent again after a reconnect had time to go out. A node crashed in between
//! lost the key anyway.
//!
//! A leaf: the checker keeps what this finds, and `release_watch.rs` looks.

use std::fmt;

use redlock_core::{OpId, Resource};

use crate::clock::SimTime;

/// A released lock's key found on a reachable node after its release's deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linger {
    /// The scenario seed that produced it.
    pub seed: u64,
    /// The releasing client.
    pub client: usize,
    /// Its operation.
    pub op: OpId,
    /// The resource released.
    pub resource: Resource,
    /// The node that still holds the key with the released lock's value.
    pub node: usize,
    /// The release's deadline, in true time.
    pub deadline: SimTime,
    /// When the key was found.
    pub checked: SimTime,
}

impl fmt::Display for Linger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: client {} {} released {:?}, yet node {} still held its key at {} \
             (release deadline {})",
            self.seed,
            self.client,
            self.op,
            String::from_utf8_lossy(self.resource.as_bytes()),
            self.node,
            self.checked,
            self.deadline
        )
    }
}
