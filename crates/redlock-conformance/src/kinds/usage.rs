//! The kinds' calls that are wrong, refused before anything is sent, each with the message
//! docs/errors.md ("Lock kinds") shows: a variant of `LockError` a caller can match.

use crate::scenarios::cluster;
use crate::{Driver, LockError, LockKind, LockOptions, RetryPolicy};

/// 0 permits, a multi-lock of readers and a fenced reader are `LockError::Config` naming
/// the field (`kind`, `fenced`); an empty set and a set naming one resource twice are
/// `LockError::Usage`. Each message is exactly docs/errors.md's.
pub fn the_kinds_wrong_calls_are_refused_with_their_messages<D: Driver>() {
    let c = cluster(1);
    let d = D::build(&c.urls(), |b| b.retry(RetryPolicy::once())).expect("driver");
    let kind = |k| LockOptions::default().kind(k);
    let refused = |r: Result<D::Guard, LockError>| r.err().expect("refused");

    let zero = refused(d.lock_with("pool", kind(LockKind::semaphore(0))));
    assert!(
        matches!(&zero, LockError::Config(e) if e.field() == "kind"),
        "{zero}"
    );
    assert_eq!(
        zero.to_string(),
        "bad configuration: invalid `kind`: a semaphore of 0 permits can never be held; ask \
         for at least 1"
    );
    let readers = refused(d.lock_all_with(&["a", "b"], kind(LockKind::Read)));
    assert!(
        matches!(&readers, LockError::Config(e) if e.field() == "kind"),
        "{readers}"
    );
    assert_eq!(
        readers.to_string(),
        "bad configuration: invalid `kind`: a lock of several resources is a mutex of each; \
         readers, writers and semaphores lock one resource"
    );
    let fenced = refused(d.lock_with("doc", kind(LockKind::Read).fenced(true)));
    assert!(
        matches!(&fenced, LockError::Config(e) if e.field() == "fenced"),
        "{fenced}"
    );
    assert_eq!(
        fenced.to_string(),
        "bad configuration: invalid `fenced`: only a mutex can be fenced for now; turn fencing \
         off for readers, writers, semaphores and multi-resource locks"
    );
    let empty = refused(d.lock_all_with(&[], LockOptions::default()));
    assert!(matches!(&empty, LockError::Usage(_)), "{empty}");
    assert_eq!(
        empty.to_string(),
        "API misuse: the list of resources to lock together is empty; name at least one \
         resource"
    );
    let twice = refused(d.lock_all_with(&["a", "a"], LockOptions::default()));
    assert!(matches!(&twice, LockError::Usage(_)), "{twice}");
    assert_eq!(
        twice.to_string(),
        "API misuse: the list of resources to lock together names one resource 2 times and \
         nothing else; lock it alone"
    );
}
