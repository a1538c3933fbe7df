//! The hasher of the driver's tables keyed by the client's own numbers ([`OpMap`]): operation
//! ids and `lock()` tickets. It is not for keys anyone else picks.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by an [`OpId`](redlock_core::OpId) or a ticket, hashed by [`OpHasher`].
pub(crate) type OpMap<K, V> = HashMap<K, V, BuildHasherDefault<OpHasher>>;

/// Hashes an [`OpId`](redlock_core::OpId) or a ticket (one `u64`, counted up from 0) by one
/// multiplication: SipHash would cost more than the rest of the map (about 1,400 instructions
/// of a concurrent lock cycle in the waiters' tables; benches/README.md, "Client CPU per
/// lock"), and nobody hostile picks the keys.
#[derive(Default)]
pub(crate) struct OpHasher(u64);

impl Hasher for OpHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
