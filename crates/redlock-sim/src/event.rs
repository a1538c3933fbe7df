//! What the simulation schedules on its heap ([`Ev`]): deliveries, timers, faults. A leaf
//! module: the scheduler in `sim.rs` dispatches these, the trace in `report.rs` hashes them.

use bytes::Bytes;
use redlock_core::OpId;

use crate::clock::SimTime;

/// Something scheduled on the heap.
#[derive(Debug)]
pub(crate) enum Ev {
    /// A client's timer (core deadline or workload action).
    Wake { client: usize, epoch: u64 },
    /// Bytes arriving at a node.
    ToNode {
        client: usize,
        node: usize,
        epoch: u64,
        bytes: Bytes,
    },
    /// Bytes arriving at a client.
    ToClient {
        client: usize,
        node: usize,
        epoch: u64,
        bytes: Bytes,
    },
    /// The outcome of a TCP connect is known.
    ConnectDone {
        client: usize,
        node: usize,
        epoch: u64,
    },
    /// Inject a random fault.
    Fault,
    /// A paused node resumes (if still the same incarnation and paused).
    Resume { node: usize, incarnation: u32 },
    /// A crashed node restarts empty.
    Restart { node: usize },
    /// The client side of a held link dies (if it is still that generation and open).
    HalfClose {
        client: usize,
        node: usize,
        epoch: u64,
    },
    /// The middlebox delivers what it held for an orphan.
    LateDelivery { orphan: usize },
    /// A release's keys should be gone from every reachable node (`linger.rs`).
    ReleaseCheck {
        client: usize,
        op: OpId,
        /// The release's deadline, in true time.
        deadline: SimTime,
    },
    /// A late client starts: its core is drained for the first time (it connects).
    Start { client: usize },
    /// The scenario's death number `death` of a client is due (`death.rs`): now, or once a
    /// call of it waits.
    Death { death: usize },
    /// A held-back pub/sub message is written to its connection now (if still open).
    Push {
        client: usize,
        node: usize,
        epoch: u64,
        channel: Bytes,
        bytes: Bytes,
    },
}

impl Ev {
    /// Whether the event carries bytes or a connection change that can still alter a node's
    /// data (counted in flight for [`Sim::is_quiet`](crate::Sim::is_quiet)).
    pub(crate) fn in_transit(&self) -> bool {
        matches!(
            self,
            Self::ToNode { .. }
                | Self::ToClient { .. }
                | Self::ConnectDone { .. }
                | Self::HalfClose { .. }
                | Self::LateDelivery { .. }
                | Self::Push { .. }
        )
    }
}
