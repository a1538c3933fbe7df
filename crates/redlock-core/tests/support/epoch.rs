//! A base instant for tests. Only tests read the clock: the core takes `now` from its caller.
//! Tests use the value as an arbitrary origin; nothing depends on what time it is.

use std::time::Instant;

/// An arbitrary origin for virtual time in tests.
#[allow(clippy::disallowed_methods, dead_code)]
pub(crate) fn epoch() -> Instant {
    Instant::now()
}
