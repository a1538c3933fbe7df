//! A connection's write buffer (node/mod.rs): the bytes queued for the node, written by
//! the driver in the order they were queued (docs/design.md, "The loop"), and the mark that
//! the client's dirty list holds the node.

use bytes::{Bytes, BytesMut};

/// The bytes queued for one node's connection.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// Encoded commands, in order.
    out: BytesMut,
    /// A round's encoded command queued on its own, shared with the other nodes instead of
    /// copied into `out`; `out` is empty while this is set.
    shared: Option<Bytes>,
    /// Whether the client's dirty list holds this node.
    dirty: bool,
}

impl Outbox {
    /// Queues `encoded` behind everything queued.
    #[inline]
    pub(crate) fn push(&mut self, encoded: &Bytes) {
        if self.out.is_empty() && self.shared.is_none() {
            // Alone in the queue: the transmit can be these very bytes.
            self.shared = Some(encoded.clone());
        } else {
            self.unshare();
            self.out.extend_from_slice(encoded);
        }
    }

    /// The buffer to encode more commands into, behind everything queued.
    pub(crate) fn buf(&mut self) -> &mut BytesMut {
        self.unshare();
        &mut self.out
    }

    /// Puts `first` ahead of everything queued (a new connection's handshake).
    pub(crate) fn prepend(&mut self, mut first: BytesMut) {
        self.unshare();
        first.extend_from_slice(&self.out);
        self.out = first;
    }

    /// Moves a shared command into `out`, so that more bytes can follow it.
    pub(crate) fn unshare(&mut self) {
        if let Some(bytes) = self.shared.take() {
            self.out.extend_from_slice(&bytes);
        }
    }

    /// Notes that bytes were queued; true if the node was not already listed as dirty.
    #[inline]
    pub(crate) fn mark_dirty(&mut self) -> bool {
        !std::mem::replace(&mut self.dirty, true)
    }

    /// The bytes to write, if `up` and anything is queued. Clears the dirty mark: bytes
    /// queued before the connection is up are marked again when it is.
    #[inline]
    pub(crate) fn take(&mut self, up: bool) -> Option<Bytes> {
        self.dirty = false;
        if !up {
            None
        } else if let Some(bytes) = self.shared.take() {
            Some(bytes)
        } else if !self.out.is_empty() {
            Some(self.out.split().freeze())
        } else {
            None
        }
    }

    /// Forgets everything queued (the connection is gone).
    pub(crate) fn clear(&mut self) {
        self.out.clear();
        self.shared = None;
    }
}
