//! The sorted-set commands of the fencing counter F (a sorted set whose member `n` carries
//! the count): `ZADD` with its options, `ZINCRBY` and `ZSCORE`, parsed and answered as
//! Redis 7.0.15 (`t_zset.c`, `zaddGenericCommand`) does. `ZADD ... GT|LT` exists from
//! Redis 6.2 and on every Valkey; a profile of an older Redis refuses it as that server's
//! parser does (`ERR syntax error`).
//!
//! Scores are `f64`. A reply prints one as the servers do for the numbers a counter holds
//! (integers below 2^53 as plain digits, `inf`); other values in Rust's shortest form
//! (`0.1`, where Redis 7.0 prints `%.17g`, `0.10000000000000001`). Score arguments are
//! read as `strtod` reads them, except hexadecimal (`0x10`), which no client of ours sends.
//! The replies and errors in this file's tests were checked against redis-server 7.0.15.

use bytes::Bytes;

use crate::keyspace::Keys;
use crate::profile::ServerProfile;
use crate::resp::ServerReply;

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`; `None` for a
/// wrong arity.
pub(crate) fn zadd(
    keys: &mut Keys<'_>,
    profile: &ServerProfile,
    rest: &[Bytes],
) -> Option<ServerReply> {
    let [key, args @ ..] = rest else {
        return None;
    };
    if args.len() < 2 {
        return None;
    }
    let (flags, pairs) = match ZaddFlags::parse(args, profile) {
        Ok(parsed) => parsed,
        Err(e) => return Some(e),
    };
    Some(add(keys, key, flags, pairs))
}

/// `ZINCRBY key increment member`: the member's new score (a missing key or member counts
/// from 0), exactly `ZADD key INCR increment member`, as the server runs it; `None` for a
/// wrong arity.
pub(crate) fn zincrby(keys: &mut Keys<'_>, rest: &[Bytes]) -> Option<ServerReply> {
    let [key, increment, member] = rest else {
        return None;
    };
    let flags = ZaddFlags {
        incr: true,
        ..ZaddFlags::default()
    };
    Some(add(keys, key, flags, &[increment.clone(), member.clone()]))
}

/// Adds or updates each `score member` of `pairs` (already checked to be pairs) as `flags`
/// say, and answers as `ZADD` does.
fn add(keys: &mut Keys<'_>, key: &Bytes, flags: ZaddFlags, pairs: &[Bytes]) -> ServerReply {
    let mut scored = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks_exact(2) {
        match parse_score(&pair[0]) {
            Some(score) => scored.push((score, &pair[1])),
            None => return ServerReply::error(NOT_A_FLOAT),
        }
    }
    let (mut added, mut changed, mut incr_result) = (0, 0, None);
    for (score, member) in scored {
        let mut new = None;
        // A NaN score is refused before anything is stored.
        let old = keys.zset_update(key, member, |old| {
            new = flags.apply(old, score);
            new.filter(|n| !n.is_nan())
        });
        match (old, new) {
            (Err(e), _) => return e.into(),
            (Ok(_), Some(n)) if n.is_nan() => return ServerReply::error(NAN_SCORE),
            (Ok(None), Some(_)) => added += 1,
            (Ok(Some(o)), Some(n)) if o != n => changed += 1,
            _ => {}
        }
        incr_result = new;
    }
    match (flags.incr, incr_result) {
        (true, Some(score)) => score_reply(score),
        (true, None) => ServerReply::Nil,
        (false, _) if flags.ch => ServerReply::Int(added + changed),
        (false, _) => ServerReply::Int(added),
    }
}

/// `ZSCORE key member`: the score, or nil; `None` for a wrong arity.
pub(crate) fn zscore(keys: &mut Keys<'_>, rest: &[Bytes]) -> Option<ServerReply> {
    let [key, member] = rest else {
        return None;
    };
    Some(match keys.zscore(key, member) {
        Ok(score) => score.map_or(ServerReply::Nil, score_reply),
        Err(e) => e.into(),
    })
}

/// A score as a bulk reply prints it: see the module docs.
pub(crate) fn format_score(score: f64) -> String {
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if score.fract() == 0.0 && score.abs() < MAX_EXACT {
        // Exact: an integral f64 below 2^53 converts to i64 without loss.
        return (score as i64).to_string();
    }
    score.to_string()
}

/// A score argument as the servers read it (`strtod` over the whole argument): `None`
/// where they answer "not a valid float" (empty, spaces, trailing text, NaN, overflow to
/// infinity, underflow to zero).
pub(crate) fn parse_score(arg: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(arg).ok()?;
    let value: f64 = text.parse().ok()?;
    let lower = text.to_ascii_lowercase();
    let spelled_inf = lower.trim_start_matches(['+', '-']).starts_with("inf");
    let overflow = value.is_infinite() && !spelled_inf;
    let digits = lower.split('e').next().unwrap_or("");
    let underflow = value == 0.0 && digits.bytes().any(|b| matches!(b, b'1'..=b'9'));
    (!value.is_nan() && !overflow && !underflow).then_some(value)
}

/// `ZADD`'s options.
#[derive(Debug, Clone, Copy, Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

impl ZaddFlags {
    /// Reads the options before the first score, as the server's loop does: it stops at the
    /// first word it does not know (`GT`/`LT` on a server before 6.2), and what is left must
    /// be score-member pairs. Returns the flags and the pairs, or the server's error.
    fn parse<'a>(
        args: &'a [Bytes],
        profile: &ServerProfile,
    ) -> Result<(Self, &'a [Bytes]), ServerReply> {
        let mut flags = Self::default();
        let mut at = 0;
        while let Some(word) = args.get(at) {
            let word = word.to_ascii_uppercase();
            let gt_lt = profile.has_zadd_gt();
            match &word[..] {
                b"NX" => flags.nx = true,
                b"XX" => flags.xx = true,
                b"CH" => flags.ch = true,
                b"INCR" => flags.incr = true,
                b"GT" if gt_lt => flags.gt = true,
                b"LT" if gt_lt => flags.lt = true,
                _ => break,
            }
            at += 1;
        }
        let pairs = &args[at..];
        if pairs.is_empty() || pairs.len() % 2 == 1 {
            return Err(ServerReply::error("ERR syntax error"));
        }
        if flags.nx && flags.xx {
            return Err(ServerReply::error(
                "ERR XX and NX options at the same time are not compatible",
            ));
        }
        if (flags.gt || flags.lt) && (flags.nx || flags.gt && flags.lt) {
            return Err(ServerReply::error(
                "ERR GT, LT, and/or NX options at the same time are not compatible",
            ));
        }
        if flags.incr && pairs.len() > 2 {
            return Err(ServerReply::error(
                "ERR INCR option supports a single increment-element pair",
            ));
        }
        Ok((flags, pairs))
    }

    /// The member's new score given its old one (`None`: absent), or `None` to leave it
    /// (`zsetAdd`): `NX`/`XX` on existence, `GT`/`LT` against the old score, `INCR` adds.
    fn apply(self, old: Option<f64>, score: f64) -> Option<f64> {
        let Some(old) = old else {
            return (!self.xx).then_some(score);
        };
        let new = if self.incr { old + score } else { score };
        let refused = self.nx || (self.gt && new <= old) || (self.lt && new >= old);
        (!refused && (new != old || self.incr)).then_some(new)
    }
}

fn score_reply(score: f64) -> ServerReply {
    ServerReply::Bulk(Bytes::from(format_score(score)))
}

/// 2^53: every integer below it is an exact `f64`.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;
/// The servers' reply to a score argument that is not a number.
const NOT_A_FLOAT: &str = "ERR value is not a valid float";
/// The servers' reply when a score would become NaN (`inf` plus `-inf`).
const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::Keyspace;

    fn args(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn bulk(s: &str) -> ServerReply {
        ServerReply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn err(e: &str) -> ServerReply {
        ServerReply::error(e)
    }

    #[test]
    fn zadd_gt_adds_raises_and_never_lowers() {
        let mut space = Keyspace::new();
        let mut keys = space.view(0, 0);
        let p = ServerProfile::REDIS_7_0;
        let mut zadd = |a: &[&str]| zadd(&mut keys, &p, &args(a)).expect("arity");
        assert_eq!(zadd(&["f", "GT", "10", "n"]), ServerReply::Int(1), "added");
        assert_eq!(zadd(&["f", "gt", "20", "n"]), ServerReply::Int(0), "raised");
        assert_eq!(zadd(&["f", "GT", "CH", "30", "n"]), ServerReply::Int(1));
        assert_eq!(zadd(&["f", "GT", "CH", "5", "n"]), ServerReply::Int(0));
        assert_eq!(zadd(&["f", "5", "m"]), ServerReply::Int(1));
        assert_eq!(
            zadd(&["f", "XX", "CH", "1", "m", "2", "x"]),
            ServerReply::Int(1)
        );
        assert_eq!(zadd(&["f", "NX", "CH", "9", "m"]), ServerReply::Int(0));
        assert_eq!(zadd(&["f", "INCR", "2", "m"]), bulk("3"));
        assert_eq!(zadd(&["f", "GT", "INCR", "-1", "m"]), ServerReply::Nil);
        assert_eq!(zadd(&["g", "XX", "INCR", "1", "m"]), ServerReply::Nil);
        assert_eq!(zadd(&["g", "XX", "1", "m"]), ServerReply::Int(0));
        assert_eq!(zadd(&["f", "GT", "10"]), err("ERR syntax error"));
        assert_eq!(zadd(&["f", "GT", "LT", "1", "n"]), err(GT_LT_NX));
        assert_eq!(zadd(&["f", "GT", "NX", "1", "n"]), err(GT_LT_NX));
        assert_eq!(zadd(&["f", "NX", "XX", "1", "n"]), err(NX_XX));
        assert_eq!(zadd(&["f", "INCR", "1", "n", "2", "m"]), err(INCR_PAIR));
        assert_eq!(zadd(&["f", "GT", "1e400", "n"]), err(NOT_A_FLOAT));
        assert_eq!(zadd(&["f", "nan", "n"]), err(NOT_A_FLOAT));
        assert_eq!(zadd(&["f", "inf", "i", "-inf", "j"]), ServerReply::Int(2));
        assert_eq!(zadd(&["f", "INCR", "-inf", "i"]), err(NAN_SCORE));
        assert_eq!(zscore(&mut keys, &args(&["f", "i"])), Some(bulk("inf")));
        assert_eq!(zscore(&mut keys, &args(&["f", "n"])), Some(bulk("30")));
        assert_eq!(zscore(&mut keys, &args(&["f", "m"])), Some(bulk("3")));
        let absent = zscore(&mut keys, &args(&["f", "x"]));
        assert_eq!(absent, Some(ServerReply::Nil), "XX adds no member");
        assert_eq!(
            zscore(&mut keys, &args(&["g", "n"])),
            Some(ServerReply::Nil)
        );
        assert!(
            !keys.exists(&Bytes::from_static(b"g")),
            "XX creates nothing"
        );
        assert_eq!(super::zadd(&mut keys, &p, &[]), None);
        assert_eq!(super::zadd(&mut keys, &p, &args(&["f", "1"])), None);
    }

    #[test]
    fn a_server_before_6_2_refuses_gt_as_its_parser_does() {
        let mut space = Keyspace::new();
        let mut keys = space.view(0, 0);
        let old = ServerProfile::REDIS_5_0;
        assert!(!old.has_zadd_gt());
        assert!(ServerProfile::REDIS_7_0.has_zadd_gt());
        assert!(ServerProfile::VALKEY_8_1.has_zadd_gt());
        let mut zadd = |a: &[&str]| zadd(&mut keys, &old, &args(a)).expect("arity");
        assert_eq!(zadd(&["f", "GT", "10", "n"]), err("ERR syntax error"));
        assert_eq!(zadd(&["f", "LT", "1", "n", "m"]), err(NOT_A_FLOAT));
        assert_eq!(zadd(&["f", "10", "n"]), ServerReply::Int(1));
    }

    #[test]
    fn zincrby_counts_from_zero_and_refuses_other_types() {
        let mut space = Keyspace::new();
        let mut keys = space.view(0, 0);
        let mut incr = |a: &[&str]| zincrby(&mut keys, &args(a)).expect("arity");
        assert_eq!(incr(&["f", "1", "n"]), bulk("1"));
        assert_eq!(
            incr(&["f", "1882849641776000", "n"]),
            bulk("1882849641776001")
        );
        assert_eq!(incr(&["f", "0.5", "m"]), bulk("0.5"));
        assert_eq!(incr(&["f", "x", "n"]), err(NOT_A_FLOAT));
        assert_eq!(incr(&["f", "inf", "m"]), bulk("inf"));
        assert_eq!(incr(&["f", "-inf", "m"]), err(NAN_SCORE));
        assert_eq!(zscore(&mut keys, &args(&["f", "m"])), Some(bulk("inf")));
        keys.set(&Bytes::from_static(b"s"), Bytes::from_static(b"5"), None);
        keys.rpush(&Bytes::from_static(b"l"), &args(&["x"]))
            .unwrap();
        for key in ["s", "l"] {
            let wrong = zincrby(&mut keys, &args(&[key, "1", "n"]));
            assert!(matches!(wrong, Some(ServerReply::Error(e)) if e.starts_with("WRONGTYPE")));
            let wrong = zscore(&mut keys, &args(&[key, "n"]));
            assert!(matches!(wrong, Some(ServerReply::Error(e)) if e.starts_with("WRONGTYPE")));
            let p = ServerProfile::VALKEY_9_1;
            let wrong = zadd(&mut keys, &p, &args(&[key, "GT", "1", "n"]));
            assert!(matches!(wrong, Some(ServerReply::Error(e)) if e.starts_with("WRONGTYPE")));
        }
        let get = keys.get(&Bytes::from_static(b"f"));
        assert_eq!(get, Err(crate::keyspace::WrongType), "GET refuses a zset");
        assert_eq!(zincrby(&mut keys, &args(&["f", "1"])), None, "arity");
    }

    #[test]
    fn scores_read_and_print_as_the_servers_do() {
        for ok in [
            "1", "-1", "+2", "1.5", "1e3", "inf", "-Inf", "+inf", "0", "0.0",
        ] {
            assert!(parse_score(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in [
            "", " 1", "1 ", "x", "nan", "1e400", "-1e400", "1e-400", "1.5x",
        ] {
            assert_eq!(parse_score(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(format_score(1_882_849_641_776_001.0), "1882849641776001");
        assert_eq!(format_score(-1.0), "-1");
        assert_eq!(format_score(1.5), "1.5");
        assert_eq!(format_score(f64::NEG_INFINITY), "-inf");
        assert_eq!(
            parse_score(b"9007199254740993"),
            Some(9_007_199_254_740_992.0)
        );
    }

    const GT_LT_NX: &str = "ERR GT, LT, and/or NX options at the same time are not compatible";
    const NX_XX: &str = "ERR XX and NX options at the same time are not compatible";
    const INCR_PAIR: &str = "ERR INCR option supports a single increment-element pair";
}
