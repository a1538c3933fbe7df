//! Fencing tokens (docs/safety.md, "Fencing tokens"): everything that makes a node's
//! fencing counter a token, in one place.
//!
//! - The commands' forms: the fenced acquire and its write-back as scripts
//!   ([`FENCED_ACQUIRE_SCRIPT`], [`RAISE_FENCE_SCRIPT`]), and the fenced acquire without a
//!   script, `SET key token NX PX ttl`, `ZADD fence GT floor n`, `ZINCRBY fence 1 n`
//!   written together ([`encode_counter_commands`] appends the last two).
//! - The floor ("Why the tokens grow"): the node's clock in whole seconds times 2^20
//!   ([`NodeClock::floor`]), so that a node that restarts empty starts above every number
//!   it issued before; the spread of the nodes' wall clocks ([`wall_spread`]) and the floor's
//!   step ([`FENCE_FLOOR_STEP`]) make the fenced part of the restart quarantine's window
//!   ("Restarts and lost writes"; `Config::fence_window`, health.rs).
//! - The token's reading: a fenced acquire's reply (the script's integer, or the
//!   pipeline's three replies) becomes a counter ([`counter`], [`read_pipeline`]), and a
//!   quorum's counters the token ([`quorum_token`]: the largest, final once a quorum holds
//!   it; lock/acquire.rs writes it back to the nodes behind).

use std::time::{Duration, Instant};

use crate::resp::{self, Reply};
use crate::script::Script;

/// Fenced acquire (docs/safety.md, "Fencing"): `SET K token NX PX ttl`; on success the
/// counter (member `n` of the sorted set F) becomes `max(F, floor) + 1` and is returned,
/// else nil. The floor is the node's clock in whole seconds times 2^20 (`TIME`), so a node
/// that restarts empty after more than a second (and its clock offset) starts above every
/// number it issued before; within one second the counter counts, so nodes that agree stay
/// in agreement and an acquisition costs one round trip. Numbers stay below 2^53, exact in
/// Lua's doubles and in a sorted set's scores. The script form of
/// [`FenceCommand::Pipeline`](crate::FenceCommand::Pipeline), for servers without
/// `ZADD … GT` and nodes whose clock is not known yet; `ZSCORE` and `ZADD` keep it working
/// on any server.
pub const FENCED_ACQUIRE_SCRIPT: Script = Script {
    body: "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then local floor = tonumber(redis.call('TIME')[1]) * 1048576 local n = tonumber(redis.call('ZSCORE', KEYS[2], 'n')) if n == nil or n < floor then redis.call('ZADD', KEYS[2], floor, 'n') end return tonumber(redis.call('ZINCRBY', KEYS[2], 1, 'n')) else return false end",
    sha1: "884cdd9ecd5b1458789c7dc2e1a1cbbc8dc11eae",
};

/// The write-back of a fenced acquire: raises the counter (member `n` of the sorted set F)
/// to `ARGV[2]` only while K still holds our token, and says whether it did (1) or K is no
/// longer ours (0). A node that answers 1 holds F at least at the token for as long as our
/// key is on it.
pub const RAISE_FENCE_SCRIPT: Script = Script {
    body: "if redis.call('GET', KEYS[1]) == ARGV[1] then local n = tonumber(redis.call('ZSCORE', KEYS[2], 'n')) if n == nil or n < tonumber(ARGV[2]) then redis.call('ZADD', KEYS[2], ARGV[2], 'n') end return 1 else return 0 end",
    sha1: "e10aa1b19bc679ad9d458a1ef3c1afb12d112ce1",
};

/// The fenced acquire without its floor, for the simulation's negative control only: the
/// counter restarts from 1 on a node that restarts empty.
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub const NO_FLOOR_FENCED_ACQUIRE_SCRIPT: Script = Script {
    body: "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return tonumber(redis.call('ZINCRBY', KEYS[2], 1, 'n')) else return false end",
    sha1: "47ac86c36f94a5b648cb8469165e07a55d714d45",
};

/// The largest counter a node may report: every integer up to 2^53 is exact in a sorted
/// set's scores (doubles) and in Lua's numbers; past it, `ZINCRBY` could not count up.
pub(crate) const MAX_FENCE: u64 = 1 << 53;

/// How old a node's clock reading may get before a fenced pipeline asks `TIME` again. Two
/// nodes' readings then differ in age by less than this, so their floors, each lowered by
/// `drift_factor` of its reading's age, differ by less than `drift_factor` of it (10 ms at
/// 0.01): a floor in whole seconds rarely straddles that.
pub(crate) const CLOCK_READING_MAX_AGE: Duration = Duration::from_secs(1);

/// A node's clock as one `TIME` reply gave it, and when the reply was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeClock {
    /// The node's clock since the epoch, as its `TIME` gave it (seconds and microseconds).
    pub(crate) since_epoch: Duration,
    /// When the reply was read, on the client's clock.
    pub(crate) read_at: Instant,
}

impl NodeClock {
    /// The counter floor of a fenced pipeline sent at `now`: the node's clock in whole
    /// seconds, estimated low, times 2^20 (docs/safety.md, "Fencing").
    ///
    /// Low, never high: the node ran `TIME` before its reply was read, and the time since
    /// counts only at `1 - drift_factor` of our clock's rate, the most by which the lock
    /// already assumes the two clocks' rates differ. So the floor never passes the node's
    /// own `TIME`-based floor of the same moment, and a counter a restart lost is still
    /// covered by the next connection's reading. Fenced pipelines read the clock again
    /// once a reading is a second old, so the nodes' readings are of about the same age,
    /// their floors are lowered alike, and nodes whose counters agree stay in agreement when
    /// the floor passes them (a floor that differed per node would cost a write-back each
    /// time).
    pub(crate) fn floor(self, now: Instant, drift_factor: f64) -> u64 {
        let since = now.saturating_duration_since(self.read_at);
        let since = since.mul_f64((1.0 - drift_factor).clamp(0.0, 1.0));
        let secs = self.since_epoch.saturating_add(since).as_secs();
        secs.saturating_mul(1 << 20).min(MAX_FENCE)
    }
}

/// How often the fencing floor moves: it counts the node's clock in whole seconds.
pub(crate) const FENCE_FLOOR_STEP: Duration = Duration::from_secs(1);

/// How far apart the nodes' wall clocks are at `now`, from each node's last `TIME` reading
/// (`None`: no node read yet): the largest estimate minus the smallest, each reading
/// carried forward on our clock. Each estimate is low by at most its reading's round trip.
pub(crate) fn wall_spread(readings: impl Iterator<Item = NodeClock>, now: Instant) -> Duration {
    let (mut low, mut high) = (u128::MAX, 0u128);
    for c in readings {
        let at = (c
            .since_epoch
            .saturating_add(now.saturating_duration_since(c.read_at)))
        .as_nanos();
        low = low.min(at);
        high = high.max(at);
    }
    let nanos = high.saturating_sub(low);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The member of the fencing counter's sorted set that holds the count.
const FENCE_MEMBER: &[u8] = b"n";

/// Appends the fenced pipeline's counter commands, `ZADD fence GT floor n` and `ZINCRBY
/// fence 1 n`, behind its `SET` (command.rs, `Command::encode`); `floor` in decimal digits.
#[inline]
pub(crate) fn encode_counter_commands(buf: &mut bytes::BytesMut, fence: &[u8], floor: &[u8]) {
    resp::encode(buf, &[b"ZADD", fence, b"GT", floor, FENCE_MEMBER]);
    resp::encode(buf, &[b"ZINCRBY", fence, b"1", FENCE_MEMBER]);
}

/// The fenced acquire script's integer reply as a counter: a number from 1 to
/// [`MAX_FENCE`], else `None` (the reply is not a counter).
#[inline]
pub(crate) fn counter(n: i64) -> Option<u64> {
    (1..=MAX_FENCE as i64)
        .contains(&n)
        .then(|| n.unsigned_abs())
}

/// What the fenced pipeline's three replies (`SET`, `ZADD`, `ZINCRBY`; the client hands
/// them over as one array) say.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PipelineReply<'a> {
    /// `SET` locked: the node's counter is now this number.
    Counter(u64),
    /// `SET` did not lock (the key is held).
    NotLocked,
    /// An error reply to the named command: its refusal ("unknown command" or a syntax
    /// error, a server without `ZADD … GT`, asks for the script instead: command.rs).
    Refused(&'static str, &'a Reply),
    /// Not what the pipeline answers: this reply (or part of it) is unexpected.
    Unexpected(&'a Reply),
}

/// Reads the fenced pipeline's three replies as one: the counter if `SET` locked, "no" if
/// it did not, the first refusal among them if any.
pub(crate) fn read_pipeline(reply: &Reply) -> PipelineReply<'_> {
    let Reply::Replies(parts) = reply else {
        return PipelineReply::Unexpected(reply);
    };
    let [set, zadd, zincrby] = &parts[..] else {
        return PipelineReply::Unexpected(reply);
    };
    for (part, command) in [(set, "SET"), (zadd, "ZADD"), (zincrby, "ZINCRBY")] {
        if matches!(part, Reply::Error(_)) {
            return PipelineReply::Refused(command, part);
        }
    }
    match (set, zadd, zincrby) {
        (Reply::Nil, Reply::Integer(_), _) => PipelineReply::NotLocked,
        (Reply::Ok, Reply::Integer(_), Reply::Bulk(score)) => match parse_score(&score[..]) {
            Some(n) => PipelineReply::Counter(n),
            None => PipelineReply::Unexpected(zincrby),
        },
        _ => PipelineReply::Unexpected(reply),
    }
}

/// How a fenced quorum's counters become its fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FenceQuorum {
    /// The largest counter, final once a quorum holds it (written back to the nodes behind
    /// while they still hold our key): the correct rule.
    Max,
    /// The smallest counter handed out (a deliberate bug, for the negative controls).
    #[cfg_attr(not(feature = "_mutants"), allow(dead_code))]
    Min,
    /// The largest counter, final at once (a deliberate bug).
    #[cfg_attr(not(feature = "_mutants"), allow(dead_code))]
    NoWriteBack,
    /// A write-back answered 0 counted as raised (a deliberate bug).
    #[cfg_attr(not(feature = "_mutants"), allow(dead_code))]
    CountRefused,
}

/// What a fenced quorum's counters make of the fencing token (docs/safety.md, "The
/// protocol"): the largest counter, final at once if a quorum's counters are already
/// there, else once the nodes behind are raised to it (lock/acquire.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QuorumToken {
    /// The largest counter: what the nodes behind are raised to.
    pub(crate) value: u64,
    /// How many nodes' counters are at `value`.
    pub(crate) agreed: usize,
    /// The token handed out: `value` (a negative control may pick another).
    pub(crate) token: u64,
    /// Whether the token is final without a write-back.
    pub(crate) final_now: bool,
}

/// Reads the `counters` of a fenced attempt's quorum (one per node, `None` where the node
/// gave none) as its token, by `rule` (`FenceQuorum::Max` but in a negative control), for
/// a `quorum` of nodes.
pub(crate) fn quorum_token(
    counters: &[Option<u64>],
    quorum: usize,
    rule: FenceQuorum,
) -> QuorumToken {
    let value = counters.iter().flatten().copied().max().unwrap_or(0);
    let agreed = counters.iter().filter(|c| **c == Some(value)).count();
    let token = match rule {
        FenceQuorum::Min => counters.iter().flatten().copied().min().unwrap_or(0),
        _ => value,
    };
    QuorumToken {
        value,
        agreed,
        token,
        final_now: agreed >= quorum || rule == FenceQuorum::NoWriteBack,
    }
}

/// A counter as `ZINCRBY` prints it: a whole number from 1 to 2^53, in plain digits (as
/// Redis and Valkey print such scores) or in a float form that denotes one exactly.
fn parse_score(score: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(score).ok()?;
    let n = match text.parse::<u64>() {
        Ok(n) => n,
        Err(_) => {
            let f = text.parse::<f64>().ok()?;
            // `as` saturates; the round trip rejects fractions, NaN and the infinities.
            let n = f as u64;
            ((n as f64) == f).then_some(n)?
        }
    };
    (1..=MAX_FENCE).contains(&n).then_some(n)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn a_quorum_token_is_the_largest_counter() {
        let counters = [Some(7), None, Some(9), Some(9)];
        let t = quorum_token(&counters, 3, FenceQuorum::Max);
        assert_eq!((t.value, t.agreed, t.token, t.final_now), (9, 2, 9, false));
        assert!(quorum_token(&counters, 2, FenceQuorum::Max).final_now);
        assert_eq!(quorum_token(&counters, 3, FenceQuorum::Min).token, 7);
        assert!(quorum_token(&counters, 3, FenceQuorum::NoWriteBack).final_now);
        assert_eq!(quorum_token(&[None, None], 2, FenceQuorum::Max).value, 0);
    }

    #[test]
    fn counters_and_pipeline_replies() {
        assert_eq!(counter(1), Some(1));
        assert_eq!(counter(MAX_FENCE as i64), Some(MAX_FENCE));
        assert_eq!(counter(0), None);
        assert_eq!(counter(MAX_FENCE as i64 + 1), None);
        let score = |s: &'static [u8]| Reply::Bulk(Bytes::from_static(s));
        let replies = |set, zincrby| Reply::Replies(vec![set, Reply::Integer(0), zincrby]);
        assert_eq!(
            read_pipeline(&replies(Reply::Ok, score(b"1048577"))),
            PipelineReply::Counter(1_048_577)
        );
        assert_eq!(
            read_pipeline(&replies(Reply::Ok, score(b"1.5e1"))),
            PipelineReply::Counter(15)
        );
        assert_eq!(
            read_pipeline(&replies(Reply::Nil, score(b"3"))),
            PipelineReply::NotLocked
        );
        let refused = Reply::Error(Bytes::from_static(b"ERR syntax error"));
        assert_eq!(
            read_pipeline(&Reply::Replies(vec![
                Reply::Ok,
                refused.clone(),
                score(b"3")
            ])),
            PipelineReply::Refused("ZADD", &refused)
        );
        let odd = score(b"0.5");
        assert_eq!(
            read_pipeline(&replies(Reply::Ok, odd.clone())),
            PipelineReply::Unexpected(&odd)
        );
        assert!(matches!(
            read_pipeline(&Reply::Ok),
            PipelineReply::Unexpected(_)
        ));
    }

    #[test]
    fn the_floor_is_low_and_the_spread_is_the_clocks_gap() {
        let read_at = crate::test_epoch::epoch();
        let clock = NodeClock {
            since_epoch: Duration::from_secs(100),
            read_at,
        };
        // 1 s later at a drift factor of 0.01: 100.99 s, floored to 100 s.
        assert_eq!(
            clock.floor(read_at + Duration::from_secs(1), 0.01),
            100 << 20
        );
        assert_eq!(
            clock.floor(read_at + Duration::from_secs(2), 0.01),
            101 << 20
        );
        let ahead = NodeClock {
            since_epoch: Duration::from_millis(100_250),
            read_at,
        };
        let later = read_at + Duration::from_secs(5);
        assert_eq!(
            wall_spread([clock, ahead].into_iter(), later),
            Duration::from_millis(250)
        );
        assert_eq!(wall_spread(std::iter::empty(), later), Duration::ZERO);
    }
}
