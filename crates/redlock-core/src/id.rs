//! The identifiers every other module names: nodes, lock operations and the requests of
//! one operation. A leaf: it depends on nothing else in the crate.

use std::fmt;

/// Most nodes a configuration may name (node ids are 16-bit).
pub const MAX_NODES: usize = 1 << 12;

/// Index of a node (a Redis or Valkey primary) in the configured node list, `0..N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u16);

impl NodeId {
    /// The node at position `index` of the configuration.
    ///
    /// # Panics
    /// If `index` exceeds [`MAX_NODES`], a limit that configurations
    /// already enforce.
    #[inline]
    pub fn new(index: usize) -> Self {
        match u16::try_from(index) {
            Ok(i) => Self(i),
            Err(_) => panic!("node index {index} exceeds the node limit"),
        }
    }

    /// The node's position in the configuration.
    #[inline]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node#{}", self.0)
    }
}

/// Identifies one lock operation: an acquisition and, once acquired, the lock it holds.
///
/// Every event about the lock (extensions, loss, release) carries the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(u64);

impl OpId {
    /// Makes an id from a raw number. The connection layer numbers its operations itself;
    /// users of the operation layer ([`Lock`](crate::Lock)) may pick any numbering.
    pub fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw number.
    pub fn as_raw(self) -> u64 {
        self.0
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op#{}", self.0)
    }
}

/// Names one request of the operation layer: which round of the lock, and which node.
///
/// Hand it back with the node's reply to [`Lock::handle_reply`](crate::Lock::handle_reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(u64);

impl RequestId {
    #[inline]
    pub(crate) fn new(round: u32, node: NodeId) -> Self {
        Self((u64::from(round) << 16) | node.index() as u64)
    }

    #[inline]
    pub(crate) fn round(self) -> u32 {
        (self.0 >> 16) as u32
    }

    #[inline]
    pub(crate) fn node(self) -> NodeId {
        NodeId::new((self.0 & 0xffff) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_round_trip() {
        let id = RequestId::new(u32::MAX, NodeId::new(65_535));
        assert_eq!(id.round(), u32::MAX);
        assert_eq!(id.node(), NodeId::new(65_535));
    }
}
