//! Which lock kind each workload call takes (docs/kinds.md): [`KindMix`], a knob of the
//! workload, and the draw of one call's kind and resources from it.
//!
//! Each kind draws from a pool of its own, as docs/kinds.md asks ("do not mix readers with
//! plain mutexes on one name"): mutexes and multi-locks share the workload's resources
//! (`r<i>`, or `c<client>` and `c<client>.<j>` per client), so that a mutex is a holder of
//! a one-element set beside the sets; readers and writers lock `rw<i>`; permit holders lock
//! `s<i>`, whose semaphore has `permits + i` permits (one k per resource).

use redlock_core::{LockKind, Resource};

use crate::holds::Hold;
use crate::random::Dice;

/// The share of a workload's calls that take each lock kind, as relative weights, and the
/// resources each kind draws from. Every weight but the mutex's is zero by default: every
/// call is a mutex, and no die is cast for the kind, so that scenarios that leave the mix
/// alone keep their runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindMix {
    /// Weight of mutexes (on the workload's resources).
    pub mutex: u32,
    /// Weight of multi-resource locks (on sets of the workload's resources).
    pub multi: u32,
    /// Weight of readers (on `rw<i>`).
    pub read: u32,
    /// Weight of writers (on `rw<i>`).
    pub write: u32,
    /// Weight of permit holders (on `s<i>`).
    pub permit: u32,
    /// A multi-lock holds from 2 to this many of the workload's resources (at most as many
    /// as there are), given in a random order (the core sorts them).
    pub multi_max: usize,
    /// How many reader-writer resources there are.
    pub rw_resources: usize,
    /// How many semaphores there are.
    pub semaphores: usize,
    /// The semaphore `s<i>` has `permits + i` permits.
    pub permits: u32,
    /// This client asks every semaphore for one permit more than it has (a negative
    /// scenario: the core must refuse it with `PermitsMismatch` wherever holders with the
    /// right k are in place, and never admit it beside them).
    pub other_k_client: Option<usize>,
}

impl Default for KindMix {
    /// Mutexes only.
    fn default() -> Self {
        Self {
            mutex: 1,
            multi: 0,
            read: 0,
            write: 0,
            permit: 0,
            multi_max: 3,
            rw_resources: 1,
            semaphores: 1,
            permits: 2,
            other_k_client: None,
        }
    }
}

impl KindMix {
    /// Every kind on an equal share of the calls (a mutex, a multi-lock, a reader, a writer,
    /// a permit: one in five each), the other settings as [`Default`] has them.
    pub fn every_kind() -> Self {
        Self {
            mutex: 1,
            multi: 1,
            read: 1,
            write: 1,
            permit: 1,
            ..Self::default()
        }
    }

    /// Whether every call is a mutex (no kind is drawn).
    pub fn mutex_only(&self) -> bool {
        self.multi == 0 && self.read == 0 && self.write == 0 && self.permit == 0
    }

    /// The permits of semaphore `s<i>` as `client` asks for them.
    pub fn permits_of(&self, i: usize, client: usize) -> u32 {
        let k = self
            .permits
            .saturating_add(u32::try_from(i).unwrap_or(u32::MAX));
        match self.other_k_client {
            Some(other) if other == client => k + 1,
            _ => k,
        }
    }

    /// Draws the next call of `client`, whose mutexes and multi-locks share `shared`
    /// resources (`None`: each client has its own, `Resources::PerClient`): what it holds
    /// once acquired (the checker's [`Hold`]: a multi-lock's set sorted, as the core sorts
    /// it) and the kind its options ask for, with the resources in the order the call
    /// passes them.
    pub(crate) fn draw(
        &self,
        dice: &mut Dice,
        client: usize,
        shared: Option<usize>,
    ) -> (Hold, LockKind, Vec<Resource>) {
        let weights = [self.mutex, self.multi, self.read, self.write, self.permit];
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut pick = dice.range(0, total.max(1) - 1);
        let chosen = weights
            .iter()
            .position(|&w| {
                let hit = pick < u64::from(w);
                pick = pick.saturating_sub(u64::from(w));
                hit
            })
            .unwrap_or(0);
        let pool = |i: usize| pool_resource(shared, client, i);
        match chosen {
            1 => {
                let set = self.multi_set(dice, client, shared);
                let mut sorted = set.clone();
                sorted.sort();
                sorted.dedup();
                (Hold::Exclusive(sorted), LockKind::Mutex, set)
            }
            2 | 3 => {
                let r = Resource::from(format!("rw{}", dice.index(self.rw_resources.max(1))));
                let (hold, kind) = match chosen {
                    2 => (Hold::Reader(r.clone()), LockKind::Read),
                    _ => (Hold::Writer(r.clone()), LockKind::Write),
                };
                (hold, kind, vec![r])
            }
            4 => {
                let i = dice.index(self.semaphores.max(1));
                let resource = Resource::from(format!("s{i}"));
                let k = self.permits_of(i, client);
                let hold = Hold::Permit {
                    resource: resource.clone(),
                    k,
                };
                (hold, LockKind::semaphore(k), vec![resource])
            }
            _ => {
                let r = pool(dice.index(pool_size(shared)));
                (Hold::Exclusive(vec![r.clone()]), LockKind::Mutex, vec![r])
            }
        }
    }

    /// A multi-lock's set: from 2 to `multi_max` distinct resources of the pool, in the
    /// order drawn (a single resource where the pool has only one).
    fn multi_set(&self, dice: &mut Dice, client: usize, shared: Option<usize>) -> Vec<Resource> {
        let n = pool_size(shared);
        let most = self.multi_max.clamp(1, n);
        let size = dice.range(2.min(most as u64), most as u64) as usize;
        let mut order: Vec<usize> = (0..n).collect();
        // A partial Fisher-Yates shuffle: the first `size` entries are the set.
        for i in 0..size {
            let j = i + dice.index(n - i);
            order.swap(i, j);
        }
        (order[..size].iter())
            .map(|&i| pool_resource(shared, client, i))
            .collect()
    }
}

/// How many resources a multi-lock of the workload may draw from: the shared ones, or the
/// client's own (`c<client>` and three more).
fn pool_size(shared: Option<usize>) -> usize {
    shared.map_or(4, |n| n.max(1))
}

/// Resource `i` of the pool mutexes and multi-locks share: `r<i>`, or per client
/// `c<client>` (the one a mutex takes) and `c<client>.<i>`.
fn pool_resource(shared: Option<usize>, client: usize, i: usize) -> Resource {
    match (shared, i) {
        (Some(_), _) => Resource::from(format!("r{i}")),
        (None, 0) => Resource::from(format!("c{client}")),
        (None, _) => Resource::from(format!("c{client}.{i}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix() -> KindMix {
        KindMix {
            rw_resources: 2,
            semaphores: 3,
            other_k_client: Some(1),
            ..KindMix::every_kind()
        }
    }

    #[test]
    fn the_default_mix_is_mutexes_only() {
        assert!(KindMix::default().mutex_only());
        assert!(!mix().mutex_only());
    }

    #[test]
    fn every_kind_is_drawn_from_its_own_pool() {
        let mut dice = Dice::new(7);
        let (mut multi, mut read, mut write, mut permit, mut mutex) = (0, 0, 0, 0, 0);
        for _ in 0..500 {
            let (hold, kind, passed) = mix().draw(&mut dice, 0, Some(4));
            match (&hold, kind) {
                (Hold::Exclusive(set), LockKind::Mutex) if set.len() > 1 => {
                    multi += 1;
                    assert!(set.len() <= 3 && set.windows(2).all(|w| w[0] < w[1]));
                    let mut again = passed.clone();
                    again.sort();
                    assert_eq!(&again, set, "the hold is the set passed, sorted");
                    assert!(set.iter().all(|r| r.as_bytes().starts_with(b"r")));
                }
                (Hold::Exclusive(set), LockKind::Mutex) => {
                    mutex += 1;
                    assert_eq!(set, &passed);
                }
                (Hold::Reader(r), LockKind::Read) => {
                    read += 1;
                    assert!(r.as_bytes().starts_with(b"rw"));
                }
                (Hold::Writer(r), LockKind::Write) => {
                    write += 1;
                    assert!(r.as_bytes().starts_with(b"rw"));
                }
                (Hold::Permit { resource, k }, LockKind::Semaphore { permits }) => {
                    permit += 1;
                    assert_eq!(*k, permits);
                    let i: u32 = std::str::from_utf8(&resource.as_bytes()[1..])
                        .expect("ascii")
                        .parse()
                        .expect("s<i>");
                    assert_eq!(*k, 2 + i, "one k per semaphore");
                }
                other => panic!("a hold and a kind that do not match: {other:?}"),
            }
        }
        for n in [multi, read, write, permit, mutex] {
            assert!(n > 50, "every kind drawn: {n}");
        }
    }

    #[test]
    fn the_other_k_client_asks_one_permit_more() {
        assert_eq!(mix().permits_of(0, 0), 2);
        assert_eq!(mix().permits_of(2, 0), 4);
        assert_eq!(mix().permits_of(2, 1), 5);
    }

    #[test]
    fn a_per_client_pool_keeps_each_client_to_its_own_names() {
        let mut dice = Dice::new(3);
        let only_multi = KindMix {
            mutex: 0,
            multi: 1,
            read: 0,
            write: 0,
            permit: 0,
            ..mix()
        };
        for _ in 0..50 {
            let (hold, _, _) = only_multi.draw(&mut dice, 5, None);
            let Hold::Exclusive(set) = hold else {
                panic!("a multi-lock")
            };
            assert!(set.len() >= 2);
            assert!(set.iter().all(|r| r.as_bytes().starts_with(b"c5")));
        }
    }
}
