//! Lock tokens and resource names: the two byte strings every lock command carries.
//!
//! A [`Token`] is what makes release and extension safe (compare-and-delete,
//! compare-and-expire); it must be unpredictable, so it is drawn from the caller's CSPRNG.
//! This module does not decide when a token is made; the lock lifecycle does.

use std::fmt;
use std::hash::{Hash, Hasher};

use bytes::Bytes;
use rand_core::CryptoRng;

use crate::error::UsageError;

/// A lock token: the value stored under the lock key on every node.
///
/// Generated tokens are [`TOKEN_RANDOM_BYTES`] bytes from a cryptographically secure RNG,
/// hex-encoded (40 ASCII characters), as the
/// [algorithm note](https://valkey.io/topics/distlock/) asks. A caller may supply its own
/// token with [`Token::new`].
#[derive(Clone)]
pub struct Token(Repr);

/// A generated token is kept inline: making and cloning it allocates nothing.
#[derive(Clone)]
enum Repr {
    Generated([u8; TOKEN_RANDOM_BYTES * 2]),
    Supplied(Bytes),
}

impl Token {
    /// Draws a fresh token from `rng`: 20 random bytes, hex-encoded.
    pub fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut raw = [0u8; TOKEN_RANDOM_BYTES];
        rng.fill_bytes(&mut raw);
        let mut hex = [0u8; TOKEN_RANDOM_BYTES * 2];
        for (i, byte) in raw.iter().enumerate() {
            hex[2 * i] = HEX[usize::from(byte >> 4)];
            hex[2 * i + 1] = HEX[usize::from(byte & 0x0f)];
        }
        Self(Repr::Generated(hex))
    }

    /// Accepts a caller-supplied token.
    ///
    /// The token must be non-empty and at most [`MAX_TOKEN_LEN`] bytes. It must be unique per
    /// acquisition: two holders with the same token can release each other's locks.
    pub fn new(token: impl Into<Bytes>) -> Result<Self, UsageError> {
        let token = token.into();
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return Err(UsageError::InvalidToken { len: token.len() });
        }
        Ok(Self(Repr::Supplied(token)))
    }

    /// The token's bytes, exactly as stored on the nodes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Generated(hex) => hex,
            Repr::Supplied(bytes) => bytes,
        }
    }
}

impl PartialEq for Token {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Token {}

impl Hash for Token {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({})", self)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

/// The name of a locked resource: a binary-safe key, used on the nodes exactly as given.
///
/// No prefix is added, so other Redlock clients that lock the same key contend with us.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource(Bytes);

impl Resource {
    /// Wraps a key. Any bytes are allowed; an empty key is rejected when a lock is requested.
    pub fn new(key: impl Into<Bytes>) -> Self {
        Self(key.into())
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub(crate) fn bytes(&self) -> &Bytes {
        &self.0
    }
}

impl From<&'static str> for Resource {
    fn from(key: &'static str) -> Self {
        Self(Bytes::from_static(key.as_bytes()))
    }
}

impl From<String> for Resource {
    fn from(key: String) -> Self {
        Self(Bytes::from(key))
    }
}

impl From<Vec<u8>> for Resource {
    fn from(key: Vec<u8>) -> Self {
        Self(Bytes::from(key))
    }
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Resource({:?})", String::from_utf8_lossy(&self.0))
    }
}

/// Random bytes in a generated token (before hex encoding).
pub const TOKEN_RANDOM_BYTES: usize = 20;

/// Longest caller-supplied token accepted, in bytes.
pub const MAX_TOKEN_LEN: usize = 512;

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use chacha20::ChaCha20Rng;
    use rand_core::SeedableRng;

    use super::*;

    #[test]
    fn generated_tokens_are_40_hex_chars_and_differ() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let a = Token::generate(&mut rng);
        let b = Token::generate(&mut rng);
        assert_eq!(a.as_bytes().len(), 40);
        assert!(a.as_bytes().iter().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        // Equal bytes are the same token, however it was made.
        let supplied = Token::new(a.as_bytes().to_vec()).unwrap();
        assert_eq!(supplied, a);
        let state = std::collections::hash_map::RandomState::new();
        assert_eq!(state.hash_one(&supplied), state.hash_one(&a));
    }

    #[test]
    fn supplied_tokens_are_checked() {
        assert!(Token::new("abc").is_ok());
        assert_eq!(Token::new(""), Err(UsageError::InvalidToken { len: 0 }));
        assert!(Token::new(vec![b'x'; MAX_TOKEN_LEN + 1]).is_err());
    }
}
