//! Native models of the lock kinds' scripts beyond the mutex: the multi-resource lock
//! ([`multi`]), the reader-writer lock ([`rw`]), the counting semaphore ([`semaphore`]),
//! and the mutex's cross-process waiters' queue ([`queue`], and its release in
//! [`queue_release`]),
//! each registered under the exact Lua body the core sends (as `script.rs` explains for
//! the release and extend scripts), with a table of cases per script ([`case`]) that the
//! contract crate can mirror against real servers.
//!
//! The reader and semaphore scripts keep one deadline per holder as a sorted-set score in
//! milliseconds of the node's own `TIME`, prune the members whose deadline is `<= now`
//! before counting, and keep the set's own expiry at least as far out as the deadline they
//! add (docs/algorithm.md, the drift section, is why this is the same clock `PX` uses).
//! The helpers below are those shared steps, each one call of the scripts.

pub mod case;
pub mod multi;
pub mod queue;
pub mod queue_release;
pub mod rw;
pub mod semaphore;

use bytes::Bytes;

use crate::keyspace::Keys;
use crate::lua::{ScriptFn, TIME_DENIED_IN_SCRIPT, lua_tonumber, millis_arg, release_channel};
use crate::resp::ServerReply;

/// The models of the normative kinds' scripts under their bodies (what `Scripts::default`
/// registers).
pub const MODELS: &[(&str, ScriptFn)] = &[
    (multi::MULTI_ACQUIRE_SOURCE, multi::multi_acquire),
    (multi::MULTI_RELEASE_SOURCE, multi::multi_release),
    (multi::MULTI_EXTEND_SOURCE, multi::multi_extend),
    (rw::READ_ACQUIRE_SOURCE, rw::read_acquire),
    (rw::WRITE_ACQUIRE_SOURCE, rw::write_acquire),
    (rw::WRITE_ABANDON_SOURCE, rw::write_abandon),
    (rw::WRITE_RELEASE_SOURCE, rw::write_release),
    (rw::READ_RELEASE_SOURCE, rw::read_release),
    (rw::READ_EXTEND_SOURCE, rw::read_extend),
    (semaphore::SEM_ACQUIRE_SOURCE, semaphore::sem_acquire),
    (semaphore::SEM_RELEASE_SOURCE, semaphore::sem_release),
    (semaphore::SEM_EXTEND_SOURCE, semaphore::sem_extend),
    (queue::QUEUE_ACQUIRE_SOURCE, queue::queue_acquire),
    (queue::QUEUE_LEAVE_SOURCE, queue::queue_leave),
    (
        queue_release::QUEUE_RELEASE_SOURCE,
        queue_release::queue_release,
    ),
];

/// The models of the kinds' mutant scripts (negative controls behind the core's `_mutants`
/// feature) under their bodies: a scenario that runs a mutant registers them on its
/// `scripts` (`Scripts::register_all`), as tests/fencing.rs registers the no-floor fenced
/// acquire.
pub const MUTANT_MODELS: &[(&str, ScriptFn)] = &[
    (
        semaphore::SEM_ACQUIRE_OFF_BY_ONE_SOURCE,
        semaphore::sem_acquire_off_by_one,
    ),
    (
        rw::WRITE_ACQUIRE_IGNORES_READERS_SOURCE,
        rw::write_acquire_ignoring_readers,
    ),
    (
        rw::READ_EXTEND_RESURRECTS_SOURCE,
        rw::read_extend_resurrecting,
    ),
    (
        queue::QUEUE_ACQUIRE_NEVER_PRUNES_SOURCE,
        queue::queue_acquire_never_pruning,
    ),
];

/// The prefix of the one error a kinds script returns (`redis.error_reply`) rather than
/// raises: SEM_ACQUIRE's `-PERMITS <k in place>`.
pub const PERMITS_ERROR_PREFIX: &str = "PERMITS ";

/// Whether `message` is an error a script returned with `redis.error_reply`: a server sends
/// it as it is, without the ` script: <sha>, on @user_script:1.` it adds to an error a
/// `redis.call` raised (Redis 7, `luaReplyToRedisReply`).
pub(crate) fn is_returned_error(message: &str) -> bool {
    message.starts_with(PERMITS_ERROR_PREFIX)
}

/// A model's steps run with `?`: the `Err` is the error that ends the script (writes made
/// before it stay, as on a real server); both sides are the reply.
type Steps = Result<ServerReply, ServerReply>;

/// The reply of a model's steps, whether they ran to the end or stopped at an error.
fn reply(steps: Steps) -> ServerReply {
    steps.unwrap_or_else(|error| error)
}

/// `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 +
/// math.floor(tonumber(t[2]) / 1000)`: the node's wall clock in whole milliseconds; the
/// error `TIME` raises where an ACL denies it (as `fenced_acquire` in script.rs).
fn node_now(keys: &Keys<'_>) -> Result<i64, ServerReply> {
    let (secs, micros) = keys
        .time()
        .map_err(|_| ServerReply::error(TIME_DENIED_IN_SCRIPT))?;
    let ms = secs.saturating_mul(1000).saturating_add(micros / 1000);
    Ok(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// `tonumber(arg)` where the script computes or compares with it: the number, or the error
/// Lua raises when it is nil.
fn number(arg: &[u8]) -> Result<f64, ServerReply> {
    lua_tonumber(arg).ok_or_else(|| {
        ServerReply::error("ERR user_script:1: attempt to perform arithmetic on a nil value")
    })
}

/// `redis.call('ZREMRANGEBYSCORE', key, '-inf', now)`: drops the expired holders.
#[inline]
fn prune(keys: &mut Keys<'_>, key: &Bytes, now: i64) -> Result<(), ServerReply> {
    keys.zrem_up_to(key, now as f64)?;
    Ok(())
}

/// `redis.call('ZADD', key, [XX,] score, member)`: adds or moves `member` (only moves it
/// with `xx`).
fn zadd(
    keys: &mut Keys<'_>,
    key: &Bytes,
    member: &Bytes,
    (score, xx): (f64, bool),
) -> Result<(), ServerReply> {
    keys.zset_update(key, member, |old| (!xx || old.is_some()).then_some(score))?;
    Ok(())
}

/// `if redis.call('PTTL', key) < tonumber(ttl) then redis.call('PEXPIRE', key, ttl) end`:
/// the set lives at least as long as the deadline just written.
fn expire_at_least(keys: &mut Keys<'_>, key: &Bytes, ttl: &Bytes) -> Result<(), ServerReply> {
    if (keys.pttl_reply(key) as f64) < number(ttl)? {
        keys.pexpire(key, millis_arg(ttl)?);
    }
    Ok(())
}

/// `redis.pcall('PUBLISH', 'redlock:released:' .. resource, '')`: whether a subscriber
/// heard it (a denied channel is gone past, as `pcall` does).
fn announce(keys: &mut Keys<'_>, resource: &[u8]) -> bool {
    matches!(keys.publish(release_channel(resource), Bytes::new()), Ok(n) if n > 0)
}

/// 2 when a subscriber heard the release's announcement (a waiter), else 1: what every
/// release that freed something answers (queue.rs in the core reads 2).
fn freed(heard: bool) -> ServerReply {
    ServerReply::Int(if heard { 2 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::Keyspace;

    /// Every script that reads `TIME` fails as `redis.call('TIME')` does where an ACL
    /// denies it, before anything is written.
    #[test]
    fn a_denied_time_fails_the_scripts_that_read_it() {
        let bytes = |s: [&'static str; 3]| s.map(|s| Bytes::from_static(s.as_bytes()));
        let (names, args) = (bytes(["r", "r:x", "r:y"]), bytes(["t", "100", "2"]));
        for &(body, run) in MODELS.iter().chain(MUTANT_MODELS) {
            let mut space = Keyspace::new();
            let mut keys = space.view(0, 0);
            keys.deny_time();
            let reply = run(&mut keys, &names, &args);
            let reads_time = body.starts_with("local t = redis.call('TIME')");
            let denied = ServerReply::error(TIME_DENIED_IN_SCRIPT);
            assert_eq!(reply == denied, reads_time, "{body}");
            if reads_time {
                assert!(space.live(0).is_empty() && space.volatile(0).is_empty());
            }
        }
    }

    #[test]
    fn the_permits_error_alone_is_returned_as_it_is() {
        assert!(is_returned_error("PERMITS 3"));
        assert!(!is_returned_error("WRONGTYPE Operation against a key"));
        assert!(!is_returned_error(TIME_DENIED_IN_SCRIPT));
    }
}
