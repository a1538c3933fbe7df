//! Lock tokens and resource names: the two byte strings every lock command carries.
//!
//! A [`Token`] is what makes release and extension safe (compare-and-delete,
//! compare-and-expire); it must be unpredictable, so it is drawn from the caller's CSPRNG,
//! and it must be unique per attempt, so a caller-supplied value is stamped with a fresh
//! nonce before it is stored. This module does not decide when a token is made; the lock
//! lifecycle does.

use std::fmt;
use std::hash::{Hash, Hasher};

use bytes::{Bytes, BytesMut};
use rand_core::CryptoRng;

use crate::error::UsageError;

/// A lock token: the value stored under the lock key on every node.
///
/// Generated tokens are [`TOKEN_RANDOM_BYTES`] bytes from a cryptographically secure RNG,
/// hex-encoded (40 ASCII characters), drawn afresh for every attempt (algorithm.md §5).
///
/// A caller may supply its own value with [`Token::new`] (an owner id such as
/// `hostname:pid`, the same for every lock call if it likes). That value is never stored as
/// is: each attempt stores it **stamped** with a fresh nonce, in this format, which other
/// tools can parse:
///
/// ```text
/// <supplied value> ":" <40 lowercase hex digits>
/// ```
///
/// that is, the supplied bytes, one `:` and [`TOKEN_RANDOM_BYTES`] random bytes in hex;
/// strip the last [`STAMP_LEN`] bytes to get the supplied value back, whatever it contains.
/// [`Token::supplied`] returns it. Stamping is what makes a reused value safe: a late release
/// or extension of an earlier attempt or lock call, still in flight on some connection,
/// compares the whole stored value and so can never touch a later attempt's key.
///
/// ```
/// # use rand_core::SeedableRng;
/// # let mut rng = chacha20::ChaCha20Rng::seed_from_u64(1);
/// use redlock_core::{STAMP_LEN, Token};
///
/// let owner = Token::new("worker-7:4242").unwrap();
/// let stored = owner.stamped(&mut rng);
/// assert_eq!(stored.supplied(), Some(&b"worker-7:4242"[..]));
/// assert_eq!(stored.as_bytes().len(), "worker-7:4242".len() + STAMP_LEN);
/// assert!(stored.as_bytes().starts_with(b"worker-7:4242:"));
/// assert_ne!(stored, owner.stamped(&mut rng), "a fresh nonce each time");
/// ```
#[derive(Clone)]
pub struct Token(Repr);

/// A generated token is kept inline: making and cloning it allocates nothing.
#[derive(Clone)]
enum Repr {
    Generated([u8; TOKEN_RANDOM_BYTES * 2]),
    /// A caller's value, before stamping (what [`Token::new`] returns).
    Supplied(Bytes),
    /// A caller's value with its nonce, as stored: `value:hex`.
    Stamped(Bytes),
}

impl Token {
    /// Draws a fresh token from `rng`: 20 random bytes, hex-encoded.
    pub fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Self {
        Self(Repr::Generated(random_hex(rng)))
    }

    /// Accepts a caller-supplied value: non-empty, at most [`MAX_TOKEN_LEN`] bytes, any
    /// bytes otherwise.
    ///
    /// The value need not be unique: a lock stores it [stamped](Self::stamped) with a fresh
    /// nonce per attempt, so one value may be passed to every lock call (an owner id such as
    /// `hostname:pid`). What it must not be is a secret, or a way to tell holders apart for
    /// safety: it is visible to anyone who can read the keys, and the nonce, not the value,
    /// is what keeps one acquisition's commands off another's key.
    pub fn new(token: impl Into<Bytes>) -> Result<Self, UsageError> {
        let token = token.into();
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return Err(UsageError::InvalidToken {
                len: token.len(),
                max: MAX_TOKEN_LEN,
            });
        }
        Ok(Self(Repr::Supplied(token)))
    }

    /// The value one attempt stores: this token's supplied value, `:`, and
    /// [`TOKEN_RANDOM_BYTES`] fresh random bytes in lowercase hex (see the type's docs).
    ///
    /// A generated token is unique already and is returned as it is; a stamped one is
    /// stamped afresh from its supplied value.
    pub fn stamped<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> Self {
        let value = match &self.0 {
            Repr::Generated(_) => return self.clone(),
            Repr::Supplied(value) => &value[..],
            Repr::Stamped(stored) => &stored[..stored.len() - STAMP_LEN],
        };
        let mut stored = BytesMut::with_capacity(value.len() + STAMP_LEN);
        stored.extend_from_slice(value);
        stored.extend_from_slice(b":");
        stored.extend_from_slice(&random_hex(rng));
        Self(Repr::Stamped(stored.freeze()))
    }

    /// The caller-supplied value this token was made from, without its nonce; `None` for a
    /// generated token.
    pub fn supplied(&self) -> Option<&[u8]> {
        match &self.0 {
            Repr::Generated(_) => None,
            Repr::Supplied(value) => Some(value),
            Repr::Stamped(stored) => Some(&stored[..stored.len() - STAMP_LEN]),
        }
    }

    /// The token's bytes, exactly as stored on the nodes (for a stamped token, the value
    /// with its nonce).
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Generated(hex) => hex,
            Repr::Supplied(bytes) | Repr::Stamped(bytes) => bytes,
        }
    }
}

/// [`TOKEN_RANDOM_BYTES`] bytes from `rng`, in lowercase hex.
fn random_hex<R: CryptoRng + ?Sized>(rng: &mut R) -> [u8; TOKEN_RANDOM_BYTES * 2] {
    let mut raw = [0u8; TOKEN_RANDOM_BYTES];
    rng.fill_bytes(&mut raw);
    let mut hex = [0u8; TOKEN_RANDOM_BYTES * 2];
    for (i, byte) in raw.iter().enumerate() {
        hex[2 * i] = HEX[usize::from(byte >> 4)];
        hex[2 * i + 1] = HEX[usize::from(byte & 0x0f)];
    }
    hex
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

impl Resource {
    /// A key known at compile time, used without copying it.
    pub const fn from_static(key: &'static str) -> Self {
        Self(Bytes::from_static(key.as_bytes()))
    }
}

/// Copies the key, so `lock(&key)` works for any borrowed string.
impl From<&str> for Resource {
    fn from(key: &str) -> Self {
        Self(Bytes::copy_from_slice(key.as_bytes()))
    }
}

impl From<&String> for Resource {
    fn from(key: &String) -> Self {
        Self::from(key.as_str())
    }
}

/// Copies the key.
impl From<&[u8]> for Resource {
    fn from(key: &[u8]) -> Self {
        Self(Bytes::copy_from_slice(key))
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

impl From<Bytes> for Resource {
    fn from(key: Bytes) -> Self {
        Self(key)
    }
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Resource({:?})", String::from_utf8_lossy(&self.0))
    }
}

/// Random bytes in a generated token (before hex encoding).
pub const TOKEN_RANDOM_BYTES: usize = 20;

/// Longest caller-supplied value accepted, in bytes (the stored value is [`STAMP_LEN`]
/// longer).
pub const MAX_TOKEN_LEN: usize = 512;

/// Bytes a [stamped](Token::stamped) token adds to the supplied value: `:` and 40 hex digits.
pub const STAMP_LEN: usize = 1 + TOKEN_RANDOM_BYTES * 2;

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
    fn stamped_tokens_keep_the_supplied_value_and_differ_per_stamp() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        // A value that itself looks like a stamp still parses back by length.
        let tricky = format!("a:{}", "0".repeat(40));
        let owner = Token::new(tricky.clone()).unwrap();
        let one = owner.stamped(&mut rng);
        let two = owner.stamped(&mut rng);
        assert_ne!(one, two);
        assert_ne!(one, owner);
        for t in [&one, &two] {
            assert_eq!(t.supplied(), Some(tricky.as_bytes()));
            let (value, stamp) = t.as_bytes().split_at(tricky.len());
            assert_eq!(value, tricky.as_bytes());
            assert_eq!(stamp.len(), STAMP_LEN);
            assert_eq!(stamp[0], b':');
            assert!(
                stamp[1..]
                    .iter()
                    .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
            );
        }
        // Restamping replaces the nonce, never stacks a second one.
        let three = one.stamped(&mut rng);
        assert_eq!(three.supplied(), Some(tricky.as_bytes()));
        assert_eq!(three.as_bytes().len(), tricky.len() + STAMP_LEN);
        assert_ne!(three, one);
        // A generated token is unique already and is not stamped.
        let generated = Token::generate(&mut rng);
        assert_eq!(generated.stamped(&mut rng), generated);
        assert_eq!(generated.supplied(), None);
        // The longest supplied value is accepted and stamped.
        let longest = Token::new(vec![b'x'; MAX_TOKEN_LEN]).unwrap();
        assert_eq!(
            longest.stamped(&mut rng).as_bytes().len(),
            MAX_TOKEN_LEN + STAMP_LEN
        );
    }

    #[test]
    fn resources_from_any_borrowed_or_owned_key() {
        fn borrowed(key: &str) -> Resource {
            Resource::from(key)
        }
        let owned = String::from("invoices:42");
        let all = [
            borrowed(&owned),
            Resource::from(&owned),
            Resource::from(owned.as_bytes()),
            Resource::from(owned.clone()),
            Resource::from(owned.clone().into_bytes()),
            Resource::from(Bytes::from(owned.clone())),
            Resource::from_static("invoices:42"),
        ];
        assert!(all.iter().all(|r| r.as_bytes() == b"invoices:42"));
    }

    #[test]
    fn supplied_tokens_are_checked() {
        assert!(Token::new("abc").is_ok());
        assert_eq!(
            Token::new(""),
            Err(UsageError::InvalidToken {
                len: 0,
                max: MAX_TOKEN_LEN
            })
        );
        assert!(Token::new(vec![b'x'; MAX_TOKEN_LEN + 1]).is_err());
    }
}
