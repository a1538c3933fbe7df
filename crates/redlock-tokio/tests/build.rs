//! Building needs a tokio runtime to spawn the driver task on; without one the error says so.

use redlock_tokio::{LockError, Redlock};

#[test]
fn build_outside_a_runtime_is_a_clear_error() {
    let err = Redlock::new(["127.0.0.1:1"]).unwrap_err();
    assert!(matches!(err, LockError::Start(_)), "{err:?}");
    assert!(err.to_string().contains("no tokio runtime"), "{err}");
}
