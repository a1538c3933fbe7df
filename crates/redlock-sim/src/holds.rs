//! What a hold holds, by lock kind, and which holds may not overlap in time: the rules the
//! checker applies beyond the mutex's (docs/safety.md, "Lock kinds").
//!
//! - Exclusive holds (a mutex: one resource; a multi-resource lock: several) and writers
//!   exclude each other on every resource they share: they all write the resource's key.
//! - A writer excludes the readers of its resource; readers share it. A mutex or a
//!   multi-lock does not look at the readers (mixing them on one name is the user's error,
//!   not the algorithm's), so neither conflicts with a reader here.
//! - Permit holders of a resource live in their own keys: they conflict with nothing but
//!   each other, beyond k at once, or when they disagree on k (the core must refuse that).

use redlock_core::Resource;

/// The kind of one hold, as the checker keeps it beside its resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldKind {
    /// A mutex or a multi-resource lock: exclusive on each of its resources.
    Exclusive,
    /// A reader of one resource: shares it with other readers.
    Reader,
    /// A writer of one resource: exclusive, and excludes its readers.
    Writer,
    /// One of at most k holders of a resource's semaphore.
    Permit(u32),
}

/// One hold as a workload records it ([`Checker::held`](crate::Checker::held)): its kind
/// and resources in one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// A mutex (one resource) or a multi-resource lock (the core's sorted, deduplicated
    /// set; never empty: the core refuses an empty one).
    Exclusive(Vec<Resource>),
    /// A reader of the resource.
    Reader(Resource),
    /// A writer of the resource.
    Writer(Resource),
    /// A permit of the resource's semaphore of `k` permits.
    Permit {
        /// The semaphore's resource.
        resource: Resource,
        /// How many permits the holder asked the semaphore to have.
        k: u32,
    },
}

impl Hold {
    /// The kind, the first resource and the rest of a multi-lock's set; `None` for an
    /// empty set.
    pub(crate) fn split(self) -> Option<(HoldKind, Resource, Vec<Resource>)> {
        Some(match self {
            Self::Exclusive(mut set) => {
                if set.is_empty() {
                    return None;
                }
                let first = set.remove(0);
                (HoldKind::Exclusive, first, set)
            }
            Self::Reader(r) => (HoldKind::Reader, r, Vec::new()),
            Self::Writer(r) => (HoldKind::Writer, r, Vec::new()),
            Self::Permit { resource, k } => (HoldKind::Permit(k), resource, Vec::new()),
        })
    }
}

impl From<Resource> for Hold {
    /// A mutex of the resource.
    fn from(resource: Resource) -> Self {
        Self::Exclusive(vec![resource])
    }
}

/// How two holds broke the rules of the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// Two exclusive holds (mutex, multi-lock, writer) of a resource at once: property (S).
    Exclusive,
    /// A writer and a reader of one resource at once.
    WriterAndReader,
    /// More permit holders of one resource at once than the smallest k among them.
    OverPermits {
        /// The smallest k among the holders.
        k: u32,
        /// How many held at that moment (the violation lists them).
        holders: usize,
    },
    /// Two permit holders of one resource at once with different k.
    PermitsDisagree,
}

/// Whether two holds of a common resource may not overlap in time, and why; `None` where
/// they may (readers together, anything with a permit, a reader with an exclusive hold).
pub(crate) fn conflict(a: HoldKind, b: HoldKind) -> Option<Conflict> {
    use HoldKind::{Exclusive, Reader, Writer};
    match (a, b) {
        (Exclusive | Writer, Exclusive | Writer) => Some(Conflict::Exclusive),
        (Writer, Reader) | (Reader, Writer) => Some(Conflict::WriterAndReader),
        _ => None,
    }
}

/// How many permit holders `ks` (the k of each hold in place at one moment, one per hold)
/// may not be: [`Conflict::PermitsDisagree`] when two differ, else
/// [`Conflict::OverPermits`] when there are more than k.
pub(crate) fn permits_conflict(ks: &[u32]) -> Option<Conflict> {
    let (&first, rest) = ks.split_first()?;
    if rest.iter().any(|&k| k != first) {
        return Some(Conflict::PermitsDisagree);
    }
    let k = first;
    (ks.len() > usize::try_from(k).unwrap_or(usize::MAX)).then_some(Conflict::OverPermits {
        k,
        holders: ks.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use HoldKind::{Exclusive, Permit, Reader, Writer};

    #[test]
    fn exclusive_holds_and_writers_exclude_each_other_and_readers_only_writers() {
        for (a, b) in [
            (Exclusive, Exclusive),
            (Exclusive, Writer),
            (Writer, Writer),
        ] {
            assert_eq!(conflict(a, b), Some(Conflict::Exclusive));
            assert_eq!(conflict(b, a), Some(Conflict::Exclusive));
        }
        assert_eq!(conflict(Writer, Reader), Some(Conflict::WriterAndReader));
        assert_eq!(conflict(Reader, Writer), Some(Conflict::WriterAndReader));
        assert_eq!(conflict(Reader, Reader), None, "readers share");
        assert_eq!(conflict(Exclusive, Reader), None, "a mutex ignores readers");
        for other in [Exclusive, Reader, Writer, Permit(2)] {
            assert_eq!(
                conflict(Permit(2), other),
                None,
                "permits are counted apart"
            );
        }
    }

    #[test]
    fn permits_are_counted_against_k_and_must_agree_on_it() {
        assert_eq!(permits_conflict(&[]), None);
        assert_eq!(permits_conflict(&[2, 2]), None);
        assert_eq!(
            permits_conflict(&[2, 2, 2]),
            Some(Conflict::OverPermits { k: 2, holders: 3 })
        );
        assert_eq!(permits_conflict(&[2, 3]), Some(Conflict::PermitsDisagree));
        assert_eq!(
            permits_conflict(&[0]),
            Some(Conflict::OverPermits { k: 0, holders: 1 })
        );
    }

    #[test]
    fn a_hold_splits_into_its_kind_and_resources() {
        let (a, b) = (Resource::from("a"), Resource::from("b"));
        let multi = Hold::Exclusive(vec![a.clone(), b.clone()]).split();
        assert_eq!(multi, Some((Exclusive, a.clone(), vec![b])));
        assert_eq!(Hold::Exclusive(Vec::new()).split(), None);
        let permit = Hold::Permit {
            resource: a.clone(),
            k: 3,
        };
        assert_eq!(permit.split(), Some((Permit(3), a, Vec::new())));
    }
}
