//! A node's data: keys with optional expiry, expired lazily against the node's own clock, in
//! numbered databases. A key holds a string (every lock key the core writes), a sorted set
//! (the fencing counter F, whose member `n` carries the count; a reader or semaphore
//! resource's holders, each scored by its deadline: `kinds`) or a
//! list (only so that tests can put a key of the wrong type in a lock's way).
//!
//! [`Keys`] is the view a command or script gets: one database at one local instant, and
//! the messages a script publishes from it (which the node delivers afterwards). Nothing
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
    value: Value,
    /// Local nanoseconds (node clock) at which the key is gone; `None` = persistent.
    expires_at: Option<u64>,
}

#[derive(Debug, Clone)]
enum Value {
    Str(Bytes),
    List(Vec<Bytes>),
    /// Members and their scores (never NaN: the commands refuse to store one).
    ZSet(BTreeMap<Bytes, f64>),
}

/// An ACL denies `TIME` to the client, in a script as well as on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeDenied;

/// The key holds a value of another type than the command reads (Redis's `-WRONGTYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongType;

impl Keyspace {
    /// An empty keyspace.
    pub fn new() -> Self {
        Self::default()
    }

    /// A view of database `db` at the node's local time `now_nanos`, whose wall clock
    /// (`TIME`) reads [`WALL_EPOCH_NANOS`] plus `now_nanos`.
    pub fn view(&mut self, db: u32, now_nanos: u64) -> Keys<'_> {
        self.view_at(db, now_nanos, WALL_EPOCH_NANOS.saturating_add(now_nanos))
    }

    /// A view of database `db` at the node's local time `now_nanos` (expiry) and wall clock
    /// `wall_nanos` (Unix nanoseconds, what a script's `TIME` reads).
    pub fn view_at(&mut self, db: u32, now_nanos: u64, wall_nanos: u64) -> Keys<'_> {
        Keys {
            space: self,
            db,
            now: now_nanos,
            wall: Some(wall_nanos),
            channels: true,
            published: Vec::new(),
            receivers: BTreeMap::new(),
        }
    }

    /// Every key with a time to live still alive at local time `now_nanos`: what a
    /// `volatile-*` eviction policy may evict (a lock's key, never its fencing counter).
    pub fn volatile(&self, now_nanos: u64) -> Vec<(u32, Bytes)> {
        (self.entries.iter())
            .filter(|(_, e)| e.expires_at.is_some() && !e.expired(now_nanos))
            .map(|((db, k), _)| (*db, k.clone()))
            .collect()
    }

    /// Deletes one key (eviction): true if it was there.
    pub fn evict(&mut self, db: u32, key: &Bytes) -> bool {
        self.entries.remove(&(db, key.clone())).is_some()
    }

    /// Every string key still alive at local time `now_nanos`, with its value, in key order
    /// (lists are never a lock's key).
    pub fn live(&self, now_nanos: u64) -> Vec<(u32, Bytes, Bytes)> {
        self.entries
            .iter()
            .filter(|(_, e)| !e.expired(now_nanos))
            .filter_map(|((db, k), e)| match &e.value {
                Value::Str(v) => Some((*db, k.clone(), v.clone())),
                Value::List(_) | Value::ZSet(_) => None,
            })
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
    /// The wall clock in Unix nanoseconds; `None` where an ACL denies `TIME`.
    wall: Option<u64>,
    /// Whether an ACL lets the script publish.
    channels: bool,
    /// `(channel, message)` a script published, in order.
    published: Vec<(Bytes, Bytes)>,
    /// How many connections are subscribed to each channel (the node's, for a script):
    /// what a script's `PUBLISH` answers.
    receivers: BTreeMap<Bytes, i64>,
}

/// An ACL denies pub/sub channels to the client, in a script as well as on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelDenied;

/// What a node's wall clock reads at its local time zero: 2023-11-14, Unix seconds
/// 1,700,000,000, so a fencing floor (seconds * 2^20) is about 1.8e15, as on a real server.
pub const WALL_EPOCH_NANOS: u64 = 1_700_000_000 * 1_000_000_000;

impl Keys<'_> {
    /// The node's wall clock, as `TIME` answers it: whole Unix seconds and microseconds;
    /// [`TimeDenied`] where an ACL denies `TIME` ([`Keys::deny_time`]).
    pub fn time(&self) -> Result<(u64, u64), TimeDenied> {
        let wall = self.wall.ok_or(TimeDenied)?;
        Ok((wall / 1_000_000_000, wall % 1_000_000_000 / 1_000))
    }

    /// From now on `TIME` is denied in this view (the node's ACL says so).
    pub fn deny_time(&mut self) {
        self.wall = None;
    }

    /// From now on `PUBLISH` is denied in this view (the node's ACL says so).
    pub fn deny_channels(&mut self) {
        self.channels = false;
    }

    /// Tells this view how many connections are subscribed to each channel (by default
    /// none): what [`publish`](Self::publish) answers.
    pub fn set_receivers(&mut self, receivers: BTreeMap<Bytes, i64>) {
        self.receivers = receivers;
    }

    /// A script's `PUBLISH channel message`: recorded for the node to deliver once the
    /// script is over; answers how many connections receive it, as `PUBLISH` does;
    /// [`ChannelDenied`] where an ACL denies channels.
    pub fn publish(&mut self, channel: Bytes, message: Bytes) -> Result<i64, ChannelDenied> {
        if !self.channels {
            return Err(ChannelDenied);
        }
        let receivers = self.receivers.get(&channel).copied().unwrap_or(0);
        self.published.push((channel, message));
        Ok(receivers)
    }

    /// What scripts published in this view so far, in order (taken: a second call is empty).
    pub fn take_published(&mut self) -> Vec<(Bytes, Bytes)> {
        std::mem::take(&mut self.published)
    }

    /// The string value of the key, if it exists and has not expired (an expired key is
    /// removed); [`WrongType`] if it holds a list.
    pub fn get(&mut self, key: &Bytes) -> Result<Option<Bytes>, WrongType> {
        match self.entry(key).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::Str(v)) => Ok(Some(v.clone())),
            Some(Value::List(_) | Value::ZSet(_)) => Err(WrongType),
        }
    }

    /// The score of `member` in the sorted set at `key` (`ZSCORE`): `None` if the key or the
    /// member is missing; [`WrongType`] if the key holds another type.
    pub fn zscore(&mut self, key: &Bytes, member: &Bytes) -> Result<Option<f64>, WrongType> {
        match self.entry(key).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::ZSet(set)) => Ok(set.get(member).copied()),
            Some(_) => Err(WrongType),
        }
    }

    /// Updates the score of `member` in the sorted set at `key`: `update` gets the old
    /// score (`None` if the key or member is missing) and returns the new one, or `None` to
    /// leave the set alone (a missing key is then not created). A created set is persistent.
    /// Returns the old score; [`WrongType`] if the key holds another type.
    pub fn zset_update(
        &mut self,
        key: &Bytes,
        member: &Bytes,
        update: impl FnOnce(Option<f64>) -> Option<f64>,
    ) -> Result<Option<f64>, WrongType> {
        let old = self.zscore(key, member)?;
        if let Some(new) = update(old) {
            self.zset_mut(key)?.insert(member.clone(), new);
        }
        Ok(old)
    }

    /// `ZCARD key`: how many members the sorted set at `key` has (0 if missing);
    /// [`WrongType`] if the key holds another type.
    pub fn zcard(&mut self, key: &Bytes) -> Result<usize, WrongType> {
        match self.entry(key).map(|e| &e.value) {
            None => Ok(0),
            Some(Value::ZSet(set)) => Ok(set.len()),
            Some(_) => Err(WrongType),
        }
    }

    /// The members of the sorted set at `key` with their scores, in the order `ZRANGE`
    /// gives them: by score, then by member's bytes (empty if missing); [`WrongType`] if
    /// the key holds another type.
    pub fn zset_in_order(&mut self, key: &Bytes) -> Result<Vec<(Bytes, f64)>, WrongType> {
        let mut members: Vec<(Bytes, f64)> = match self.entry(key).map(|e| &e.value) {
            None => Vec::new(),
            Some(Value::ZSet(set)) => set.iter().map(|(m, s)| (m.clone(), *s)).collect(),
            Some(_) => return Err(WrongType),
        };
        // Scores are never NaN (and -0 equals 0, as in Redis); members are already in byte
        // order (a `BTreeMap`'s keys) and the sort is stable.
        members.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
        Ok(members)
    }

    /// `ZREM key member`: whether the member was there; a set left empty is deleted, as a
    /// real server never keeps one. [`WrongType`] if the key holds another type.
    pub fn zrem(&mut self, key: &Bytes, member: &Bytes) -> Result<bool, WrongType> {
        self.zset_remove(key, |m, _| m == member)
    }

    /// `ZREMRANGEBYSCORE key -inf max`: removes every member scored `<= max` and answers
    /// how many; a set left empty is deleted. [`WrongType`] if the key holds another type.
    pub fn zrem_up_to(&mut self, key: &Bytes, max: f64) -> Result<usize, WrongType> {
        let before = self.zcard(key)?;
        self.zset_remove(key, |_, score| score <= max)?;
        Ok(before - self.zcard(key)?)
    }

    /// Removes the members of the sorted set at `key` that `gone` picks, deleting the key
    /// when none is left; whether any was removed.
    fn zset_remove(
        &mut self,
        key: &Bytes,
        gone: impl Fn(&Bytes, f64) -> bool,
    ) -> Result<bool, WrongType> {
        if self.zcard(key)? == 0 {
            return Ok(false);
        }
        let id = (self.db, key.clone());
        let Some(Entry {
            value: Value::ZSet(set),
            ..
        }) = self.space.entries.get_mut(&id)
        else {
            return Ok(false);
        };
        let before = set.len();
        set.retain(|m, score| !gone(m, *score));
        let removed = set.len() < before;
        if set.is_empty() {
            self.space.entries.remove(&id);
        }
        Ok(removed)
    }

    /// The sorted set at `key`, created empty and persistent if missing (the caller adds a
    /// member at once: a real server never keeps an empty set); [`WrongType`] if the key
    /// holds another type.
    fn zset_mut(&mut self, key: &Bytes) -> Result<&mut BTreeMap<Bytes, f64>, WrongType> {
        if self.entry(key).is_none() {
            let entry = Entry {
                value: Value::ZSet(BTreeMap::new()),
                expires_at: None,
            };
            self.space.entries.insert((self.db, key.clone()), entry);
        }
        match self.space.entries.get_mut(&(self.db, key.clone())) {
            Some(Entry {
                value: Value::ZSet(set),
                ..
            }) => Ok(set),
            _ => Err(WrongType),
        }
    }

    /// Whether the key exists (of any type) and has not expired.
    pub fn exists(&mut self, key: &Bytes) -> bool {
        self.entry(key).is_some()
    }

    /// Sets the key to a string, replacing any value of any type; `px` is the time to live,
    /// `None` for persistent.
    pub fn set(&mut self, key: &Bytes, value: Bytes, px: Option<Duration>) {
        let expires_at = px.map(|d| self.after(d));
        let entry = Entry {
            value: Value::Str(value),
            expires_at,
        };
        self.space.entries.insert((self.db, key.clone()), entry);
    }

    /// Appends `values` to the list at `key` (created persistent if missing) and returns its
    /// length; [`WrongType`] if the key holds a string.
    pub fn rpush(&mut self, key: &Bytes, values: &[Bytes]) -> Result<usize, WrongType> {
        if self.entry(key).is_none() {
            let entry = Entry {
                value: Value::List(Vec::new()),
                expires_at: None,
            };
            self.space.entries.insert((self.db, key.clone()), entry);
        }
        match self.space.entries.get_mut(&(self.db, key.clone())) {
            Some(Entry {
                value: Value::List(list),
                ..
            }) => {
                list.extend_from_slice(values);
                Ok(list.len())
            }
            _ => Err(WrongType),
        }
    }

    /// Sets a new time to live on an existing key; false if the key does not exist.
    /// A zero ttl deletes the key (and still answers true), as Redis does.
    pub fn pexpire(&mut self, key: &Bytes, ttl: Duration) -> bool {
        if !self.exists(key) {
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
        let now = self.now;
        let e = self.entry(key)?;
        Some(e.expires_at.map(|at| Duration::from_nanos(at - now)))
    }

    /// `PTTL key` as a server answers it: the remaining milliseconds (rounded down), -1 for
    /// a key without expiry, -2 for a missing key; of any type.
    pub fn pttl_reply(&mut self, key: &Bytes) -> i64 {
        match self.pttl(key) {
            None => -2,
            Some(None) => -1,
            Some(Some(left)) => i64::try_from(left.as_millis()).unwrap_or(i64::MAX),
        }
    }

    /// Deletes the key, of any type; true if it existed (and had not expired).
    pub fn del(&mut self, key: &Bytes) -> bool {
        let existed = self.exists(key);
        self.space.entries.remove(&(self.db, key.clone()));
        existed
    }

    /// The key's entry if it has not expired; an expired one is removed.
    fn entry(&mut self, key: &Bytes) -> Option<&Entry> {
        let id = (self.db, key.clone());
        if self.space.entries.get(&id)?.expired(self.now) {
            self.space.entries.remove(&id);
            return None;
        }
        self.space.entries.get(&id)
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
        assert_eq!(space.view(1, 0).get(&k), Ok(None), "databases are separate");
        assert_eq!(
            space.view(0, 9_999_999).pttl(&k),
            Some(Some(ms(0) + Duration::from_nanos(1)))
        );
        assert!(space.view(0, 5_000_000).pexpire(&k, ms(10)));
        assert!(space.view(0, 14_999_999).exists(&k));
        assert_eq!(space.live(15_000_000).len(), 0);
        assert_eq!(space.view(0, 15_000_000).get(&k), Ok(None));
        assert!(!space.view(0, 15_000_000).pexpire(&k, ms(10)));
        space.view(0, 0).set(&k, Bytes::new(), None);
        assert_eq!(space.view(0, u64::MAX).pttl(&k), Some(None));
        assert!(space.view(0, 0).del(&k));
        assert!(!space.view(0, 0).del(&k));
    }

    #[test]
    fn sorted_sets_count_prune_and_vanish_when_emptied() {
        let mut space = Keyspace::new();
        let mut keys = space.view(0, 0);
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let z = b("z");
        assert_eq!(keys.zcard(&z), Ok(0), "a missing set is empty");
        assert_eq!(keys.zrem(&z, &b("a")), Ok(false));
        assert_eq!(keys.zrem_up_to(&z, 10.0), Ok(0));
        assert_eq!(keys.pttl_reply(&z), -2, "missing");
        for (member, score) in [("a", 5.0), ("b", 10.0), ("c", 10.5)] {
            keys.zset_update(&z, &b(member), |_| Some(score)).unwrap();
        }
        assert_eq!(keys.zcard(&z), Ok(3));
        assert!(keys.exists(&z), "EXISTS sees a sorted set");
        assert_eq!(keys.get(&z), Err(WrongType), "GET refuses it");
        assert_eq!(keys.pttl_reply(&z), -1, "a new set is persistent");
        assert!(keys.pexpire(&z, Duration::from_millis(40)));
        assert_eq!(keys.pttl_reply(&z), 40, "PEXPIRE and PTTL work on a set");
        // `ZADD XX`: only an existing member moves.
        keys.zset_update(&z, &b("x"), |old| old.map(|_| 1.0))
            .unwrap();
        assert_eq!(keys.zscore(&z, &b("x")), Ok(None));
        assert_eq!(keys.zrem_up_to(&z, 10.0), Ok(2), "scores <= max go");
        assert_eq!(keys.zscore(&z, &b("c")), Ok(Some(10.5)));
        assert_eq!(keys.pttl_reply(&z), 40, "pruning keeps the expiry");
        assert_eq!(keys.zrem(&z, &b("c")), Ok(true));
        assert!(!keys.exists(&z), "the emptied set is deleted");
        keys.set(&z, b("v"), None);
        assert_eq!(keys.zcard(&z), Err(WrongType));
        assert_eq!(keys.zrem(&z, &b("v")), Err(WrongType));
        assert_eq!(keys.zrem_up_to(&z, 1.0), Err(WrongType));
        keys.set(&z, b("v"), Some(Duration::from_micros(2_500)));
        assert_eq!(keys.pttl_reply(&z), 2, "whole milliseconds, rounded down");
    }

    #[test]
    fn a_list_is_of_the_wrong_type_for_string_reads() {
        let mut space = Keyspace::new();
        let mut keys = space.view(0, 0);
        let (k, v) = (Bytes::from_static(b"k"), Bytes::from_static(b"x"));
        assert_eq!(keys.rpush(&k, &[v.clone(), v.clone()]), Ok(2));
        assert_eq!(keys.get(&k), Err(WrongType));
        assert!(keys.exists(&k));
        assert_eq!(keys.pttl(&k), Some(None), "a new list is persistent");
        assert!(space.live(0).is_empty(), "lists are never a lock's key");
        let mut keys = space.view(0, 0);
        keys.set(&k, v.clone(), None);
        assert_eq!(keys.rpush(&k, std::slice::from_ref(&v)), Err(WrongType));
        assert!(keys.del(&k));
        assert_eq!(keys.rpush(&k, &[v]), Ok(1), "RPUSH creates a missing list");
    }
}
