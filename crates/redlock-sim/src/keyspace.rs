//! A node's data: string keys with optional expiry, expired lazily against the node's own
//! clock, in numbered databases.
//!
//! [`Keys`] is the view a command or script gets: one database at one local instant. Nothing
//! here knows about connections, scripts caches or faults.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

/// All databases of one node incarnation.
#[derive(Debug, Clone, Default)]
pub struct Keyspace {
    entries: BTreeMap<(u32, Bytes), Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    value: Bytes,
    /// Local nanoseconds (node clock) at which the key is gone; `None` = persistent.
    expires_at: Option<u64>,
}

impl Keyspace {
    /// An empty keyspace.
    pub fn new() -> Self {
        Self::default()
    }

    /// A view of database `db` at the node's local time `now_nanos`.
    pub fn view(&mut self, db: u32, now_nanos: u64) -> Keys<'_> {
        Keys {
            space: self,
            db,
            now: now_nanos,
        }
    }

    /// Every key still alive at local time `now_nanos`, with its value, in key order.
    pub fn live(&self, now_nanos: u64) -> Vec<(u32, Bytes, Bytes)> {
        self.entries
            .iter()
            .filter(|(_, e)| !e.expired(now_nanos))
            .map(|((db, k), e)| (*db, k.clone(), e.value.clone()))
            .collect()
    }
}

impl Entry {
    fn expired(&self, now: u64) -> bool {
        // Redis deletes a key once its expiry time is reached; `>=` is the earlier choice,
        // which only makes the simulation harsher on the client.
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// One database of a node at one local instant: what commands and scripts operate on.
#[derive(Debug)]
pub struct Keys<'a> {
    space: &'a mut Keyspace,
    db: u32,
    now: u64,
}

impl Keys<'_> {
    /// The key's value, if it exists and has not expired (an expired key is removed).
    pub fn get(&mut self, key: &Bytes) -> Option<Bytes> {
        let id = (self.db, key.clone());
        match self.space.entries.get(&id) {
            Some(e) if e.expired(self.now) => {
                self.space.entries.remove(&id);
                None
            }
            Some(e) => Some(e.value.clone()),
            None => None,
        }
    }

    /// Sets the key, replacing any value; `px` is the time to live, `None` for persistent.
    pub fn set(&mut self, key: &Bytes, value: Bytes, px: Option<Duration>) {
        let expires_at = px.map(|d| self.after(d));
        let entry = Entry { value, expires_at };
        self.space.entries.insert((self.db, key.clone()), entry);
    }

    /// Sets a new time to live on an existing key; false if the key does not exist.
    /// A zero ttl deletes the key (and still answers true), as Redis does.
    pub fn pexpire(&mut self, key: &Bytes, ttl: Duration) -> bool {
        if self.get(key).is_none() {
            return false;
        }
        if ttl.is_zero() {
            self.del(key);
            return true;
        }
        let at = self.after(ttl);
        if let Some(e) = self.space.entries.get_mut(&(self.db, key.clone())) {
            e.expires_at = Some(at);
        }
        true
    }

    /// Remaining time to live: `None` if the key is missing, `Some(None)` if persistent.
    pub fn pttl(&mut self, key: &Bytes) -> Option<Option<Duration>> {
        self.get(key)?;
        let e = self.space.entries.get(&(self.db, key.clone()))?;
        Some(e.expires_at.map(|at| Duration::from_nanos(at - self.now)))
    }

    /// Deletes the key; true if it existed (and had not expired).
    pub fn del(&mut self, key: &Bytes) -> bool {
        let existed = self.get(key).is_some();
        self.space.entries.remove(&(self.db, key.clone()));
        existed
    }

    fn after(&self, d: Duration) -> u64 {
        self.now
            .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_expire_lazily_on_the_local_clock() {
        let mut space = Keyspace::new();
        let k = Bytes::from_static(b"k");
        let ms = |n| Duration::from_millis(n);
        space
            .view(0, 0)
            .set(&k, Bytes::from_static(b"v"), Some(ms(10)));
        assert_eq!(space.view(1, 0).get(&k), None, "databases are separate");
        assert_eq!(
            space.view(0, 9_999_999).pttl(&k),
            Some(Some(ms(0) + Duration::from_nanos(1)))
        );
        assert!(space.view(0, 5_000_000).pexpire(&k, ms(10)));
        assert!(space.view(0, 14_999_999).get(&k).is_some());
        assert_eq!(space.live(15_000_000).len(), 0);
        assert_eq!(space.view(0, 15_000_000).get(&k), None);
        assert!(!space.view(0, 15_000_000).pexpire(&k, ms(10)));
        space.view(0, 0).set(&k, Bytes::new(), None);
        assert_eq!(space.view(0, u64::MAX).pttl(&k), Some(None));
        assert!(space.view(0, 0).del(&k));
        assert!(!space.view(0, 0).del(&k));
    }
}
