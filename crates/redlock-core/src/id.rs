//! The identifiers every other module names: nodes and their names, connections, lock
//! operations and the requests of one operation. A leaf: it depends on nothing else in the
//! crate.

use std::fmt;
use std::sync::Arc;

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

/// A node as people name it: its [`NodeId`] and the address the user wrote (`host:port`,
/// never with a password), or `node#N` when the configuration names none.
///
/// Failure reasons carry it, so an error prints `127.0.0.1:7001: connection refused`
/// wherever it travels. Cloning is cheap (a shared string).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeName {
    id: NodeId,
    name: Arc<str>,
}

impl NodeName {
    /// Names node `id`.
    pub fn new(id: NodeId, name: impl Into<Arc<str>>) -> Self {
        Self {
            id,
            name: name.into(),
        }
    }

    /// The default name of node `id`: `node#N`.
    pub fn unnamed(id: NodeId) -> Self {
        Self::new(id, id.to_string())
    }

    /// The node's position in the configuration.
    #[inline]
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The name, as [`Display`](fmt::Display) prints it.
    pub fn as_str(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// A name is its node, for comparisons in tests and matching code.
impl PartialEq<NodeId> for NodeName {
    fn eq(&self, other: &NodeId) -> bool {
        self.id == *other
    }
}

/// One connection to one node: the node, and which of the connections the client has asked
/// for it (a generation, counted from 0 by the client).
///
/// The client hands a new one out with every [`Output::Connect`](crate::Output::Connect),
/// and inputs name the connection they come from. Input from any connection but the node's
/// current one is ignored, so the bytes or the close of a connection the client gave up on
/// can never be credited to its successor, however late a driver delivers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId {
    node: NodeId,
    generation: u32,
}

impl ConnId {
    /// The `generation`th connection to `node`. A driver gets its ids from
    /// [`Output::Connect`](crate::Output::Connect); tests and replays may make their own.
    pub fn new(node: NodeId, generation: u32) -> Self {
        Self { node, generation }
    }

    /// The node this connection goes to.
    #[inline]
    pub fn node(self) -> NodeId {
        self.node
    }

    /// Which connection to the node this is: 0 for the first, one more for each after.
    #[inline]
    pub fn generation(self) -> u32 {
        self.generation
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/conn#{}", self.node, self.generation)
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

/// Hashes the client's own operation ids (never attacker-chosen, so no flooding concern)
/// with one multiply instead of SipHash: the hasher of the client's table of locks and of
/// its timers (client.rs; time.rs, `Timer`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OpIdHasher(u64);

impl std::hash::Hasher for OpIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the high bits, which the table uses, depend on every input bit.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
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
