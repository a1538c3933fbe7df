//! Running the kinds rows (kinds.rs) against any [`Target`]: set each key up, load or flush
//! the script, listen where the row says, send, read every key back, compare. One
//! [`KindsReport`] per run; every row runs by `EVALSHA`, by `EVAL`, and by `EVALSHA` on an
//! empty cache.

use std::fmt;

use redlock_core::RELEASE_CHANNEL_PREFIX;
use redlock_sim::script::sha1_hex;
use redlock_testkit::Reply;

use crate::kinds::{KINDS_CONTRACT, KindsCase, KindsKey, KindsReply, KindsScript, Life, SLACK_MS};
use crate::kinds_scripts::KindsScripts;
use crate::rows::{Row, RowsReport, run_each};
use crate::table::Send;
use crate::target::Target;

/// What a kinds run found.
pub type KindsReport = RowsReport<KindsCase>;

impl Row for KindsCase {
    type Script = KindsScript;

    fn script(&self) -> KindsScript {
        self.script
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

/// Runs the whole kinds table on `target`, sending `scripts`' bodies.
pub fn run_kinds(target: &mut dyn Target, scripts: KindsScripts) -> Result<KindsReport, String> {
    run_kinds_rows(target, scripts, KINDS_CONTRACT)
}

/// Runs `rows` (a wrong copy of a row, in a negative control) on `target`; `Err` only when
/// the target itself fails.
pub fn run_kinds_rows(
    target: &mut dyn Target,
    scripts: KindsScripts,
    rows: &[KindsCase],
) -> Result<KindsReport, String> {
    run_each(target, "kinds", rows, |target, case, send, i| {
        run_case(target, case, send, i, scripts.body(case.script))
    })
}

/// The row's keys, channels and script on a target: `kinds-contract:<row>:` before each
/// name of the row.
struct Place {
    prefix: String,
    keys: Vec<String>,
    /// `numkeys`.
    count: String,
    body: &'static str,
    sha: String,
}

impl Place {
    fn new(case: &KindsCase, i: usize, body: &'static str) -> Self {
        let prefix = format!("kinds-contract:{i}:");
        let keys = case.script.keys().iter();
        let keys = keys.map(|k| format!("{prefix}{k}")).collect();
        let sha = sha1_hex(body);
        Self {
            prefix,
            count: case.script.keys().len().to_string(),
            keys,
            body,
            sha,
        }
    }

    /// The release channel of a resource of the row.
    fn channel(&self, resource: &str) -> String {
        format!("{RELEASE_CHANNEL_PREFIX}{}{resource}", self.prefix)
    }

    /// The script call, as the core sends it.
    fn command<'a>(&'a self, send: Send, argv: &[&'a str]) -> Vec<&'a str> {
        let mut args = match send {
            Send::Eval => vec!["EVAL", self.body],
            Send::Sha | Send::ShaFlushed => vec!["EVALSHA", self.sha.as_str()],
        };
        args.push(self.count.as_str());
        args.extend(self.keys.iter().map(String::as_str));
        args.extend(argv);
        args
    }
}

/// What a row sent one way must come to: the table's row, or (an empty cache under
/// `EVALSHA`) `-NOSCRIPT` with nothing changed and nothing heard.
fn expected(case: &KindsCase, send: Send) -> (KindsReply, &'static [KindsKey], Vec<&'static str>) {
    if send == Send::ShaFlushed {
        return (KindsReply::Error("NOSCRIPT"), case.before, Vec::new());
    }
    let heard = case.published.iter().filter(|r| case.heard.contains(r));
    (case.reply, case.after, heard.copied().collect())
}

/// Runs one row one way; `Ok(Some(why))` if it broke the contract.
fn run_case(
    target: &mut dyn Target,
    case: &KindsCase,
    send: Send,
    i: usize,
    body: &'static str,
) -> Result<Option<String>, String> {
    let place = Place::new(case, i, body);
    let keys: Vec<&str> = place.keys.iter().map(String::as_str).collect();
    delete(target, &keys)?;
    let unready = set_up(target, &place, case, send)?;
    if let Some(why) = unready {
        delete(target, &keys)?;
        return Ok(Some(why));
    }
    let listening = !case.heard.is_empty();
    if listening {
        let channels: Vec<String> = case.heard.iter().map(|r| place.channel(r)).collect();
        target.listen(&channels)?;
    }
    let reply = call(target, &place.command(send, case.argv))?;
    let heard = if listening {
        target
            .heard()?
            .into_iter()
            .map(|(channel, _)| channel)
            .collect()
    } else {
        Vec::new()
    };
    let now = time_ms(target)?;
    let mut seen = Vec::new();
    for (key, (before, after)) in keys.iter().zip(case.before.iter().zip(case.after)) {
        let members = candidates(case.argv, [before, after]);
        seen.push(read_key(target, key, &members)?);
    }
    delete(target, &keys)?;
    let (want_reply, want_after, want_heard) = expected(case, send);
    let mut why = Vec::new();
    if !reply_matches(want_reply, &reply) {
        why.push(format!("reply {reply}, expected {want_reply:?}"));
    }
    for ((name, want), seen) in case.script.keys().iter().zip(want_after).zip(&seen) {
        if !seen.admits(*want, now) {
            why.push(format!("{name}: {seen}, expected {want:?}"));
        }
    }
    let want_heard: Vec<String> = want_heard.iter().map(|r| place.channel(r)).collect();
    if heard != want_heard {
        why.push(format!("heard on {heard:?}, expected {want_heard:?}"));
    }
    Ok((!why.is_empty()).then(|| why.join("; ")))
}

/// Puts the row's keys in their states before (deadlines from the node's `TIME`), then
/// loads the script (`EVALSHA`) or empties the cache; `Ok(Some(why))` if the target would
/// not.
fn set_up(
    target: &mut dyn Target,
    place: &Place,
    case: &KindsCase,
    send: Send,
) -> Result<Option<String>, String> {
    let now = time_ms(target)?;
    for (key, state) in place.keys.iter().zip(case.before) {
        if let Some(why) = put(target, key, *state, now)? {
            return Ok(Some(format!("setting up {key}: {why}")));
        }
    }
    if send != Send::Sha {
        let reply = call(target, &["SCRIPT", "FLUSH"])?;
        return Ok((reply != Reply::Simple("OK".into())).then(|| format!("SCRIPT FLUSH: {reply}")));
    }
    let reply = call(target, &["SCRIPT", "LOAD", place.body])?;
    let want = Reply::Bulk(place.sha.as_bytes().to_vec());
    Ok((reply != want).then(|| format!("loading the script: SCRIPT LOAD answered {reply}")))
}

/// Writes `state` at `key` (absent before), deadlines from `now`.
pub(crate) fn put(
    target: &mut dyn Target,
    key: &str,
    state: KindsKey,
    now: i64,
) -> Result<Option<String>, String> {
    let ttl = |life: Life| life.ms().filter(|ms| *ms > 0).map(|ms| ms.to_string());
    let mut commands: Vec<Vec<String>> = Vec::new();
    let owned = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    match state {
        KindsKey::Absent => {}
        KindsKey::Str(value, life) => commands.push(match ttl(life) {
            Some(ms) => owned(&["SET", key, value, "PX", &ms]),
            None => owned(&["SET", key, value]),
        }),
        KindsKey::Holders(members, life) => {
            for (member, deadline) in members {
                let score = (now + deadline.ms().unwrap_or(0)).to_string();
                commands.push(owned(&["ZADD", key, &score, member]));
            }
            if let Some(ms) = ttl(life) {
                commands.push(owned(&["PEXPIRE", key, &ms]));
            }
        }
        KindsKey::List => commands.push(owned(&["RPUSH", key, "not-a-lock"])),
    }
    for args in commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = call(target, &args)?;
        if matches!(reply, Reply::Error(_) | Reply::Int(0)) {
            return Ok(Some(format!("`{}` answered {reply}", args.join(" "))));
        }
    }
    Ok(None)
}

/// Every member a key may hold after the row: those of its states and the row's token.
fn candidates(argv: &[&'static str], states: [&KindsKey; 2]) -> Vec<&'static str> {
    let mut members: Vec<&'static str> = argv.first().copied().into_iter().collect();
    for state in states {
        if let KindsKey::Holders(list, _) = state {
            members.extend(list.iter().map(|(m, _)| *m));
        }
    }
    members.sort_unstable();
    members.dedup();
    members
}

/// A key as the runner read it back.
#[derive(Debug)]
pub(crate) enum Seen {
    /// No key.
    Absent,
    /// A string and its PTTL.
    Str(Vec<u8>, i64),
    /// A sorted set: each candidate member's score (`None`: not a member), and its PTTL.
    Set(Vec<(&'static str, Option<f64>)>, i64),
    /// A list and its PTTL.
    List(i64),
    /// Anything else, as read.
    Odd(String),
}

/// Reads `key` back with commands every target has (`GET`, `PTTL`, `ZSCORE`).
pub(crate) fn read_key(
    target: &mut dyn Target,
    key: &str,
    members: &[&'static str],
) -> Result<Seen, String> {
    let get = call(target, &["GET", key])?;
    let pttl = match call(target, &["PTTL", key])? {
        Reply::Int(ms) => ms,
        other => return Ok(Seen::Odd(format!("PTTL {other}"))),
    };
    let wrong = |r: &Reply| matches!(r, Reply::Error(e) if e.starts_with("WRONGTYPE"));
    Ok(match get {
        Reply::Nil if pttl == -2 => Seen::Absent,
        Reply::Bulk(v) => Seen::Str(v, pttl),
        ref r if wrong(r) => {
            let mut scores = Vec::new();
            for member in members {
                match call(target, &["ZSCORE", key, member])? {
                    r if wrong(&r) => return Ok(Seen::List(pttl)),
                    Reply::Nil => scores.push((*member, None)),
                    Reply::Bulk(b) => {
                        let score = String::from_utf8_lossy(&b).parse::<f64>().ok();
                        scores.push((*member, Some(score.unwrap_or(f64::NAN))));
                    }
                    other => return Ok(Seen::Odd(format!("ZSCORE {member}: {other}"))),
                }
            }
            Seen::Set(scores, pttl)
        }
        other => Seen::Odd(format!("GET {other}, PTTL {pttl}")),
    })
}

/// Whether a time read back (`ms` from the node's now) is `life`: in `(life - SLACK_MS,
/// life]`, or -1 (no expiry) for [`Life::Forever`].
pub(crate) fn within(life: Life, ms: i64) -> bool {
    match life.ms() {
        None => ms == -1,
        Some(l) => (l - SLACK_MS + 1..=l).contains(&ms),
    }
}

impl Seen {
    /// Whether the key read back at the node's `now` (ms) is `want`.
    pub(crate) fn admits(&self, want: KindsKey, now: i64) -> bool {
        match (want, self) {
            (KindsKey::Absent, Self::Absent) => true,
            (KindsKey::Str(value, life), Self::Str(v, pttl)) => {
                v == value.as_bytes() && within(life, *pttl)
            }
            (KindsKey::List, Self::List(pttl)) => *pttl == -1,
            (KindsKey::Holders(members, life), Self::Set(scores, pttl)) => {
                let member = |m: &str| members.iter().find(|(name, _)| *name == m);
                let each = scores.iter().all(|(m, score)| match (member(m), score) {
                    (None, None) => true,
                    (Some((_, deadline)), Some(s)) => within(*deadline, (*s as i64) - now),
                    _ => false,
                });
                each && within(life, *pttl)
            }
            _ => false,
        }
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Absent => f.write_str("absent"),
            Self::Str(v, pttl) => write!(f, "{:?} (PTTL {pttl})", String::from_utf8_lossy(v)),
            Self::Set(scores, pttl) => write!(f, "a sorted set {scores:?} (PTTL {pttl})"),
            Self::List(pttl) => write!(f, "a list (PTTL {pttl})"),
            Self::Odd(what) => f.write_str(what),
        }
    }
}

/// Whether `got` is the reply the row expects: a raised error by its start, a returned one
/// exactly.
fn reply_matches(want: KindsReply, got: &Reply) -> bool {
    match (want, got) {
        (KindsReply::Int(n), Reply::Int(m)) => n == *m,
        (KindsReply::Error(start), Reply::Error(e)) => e.starts_with(start),
        (KindsReply::Returned(text), Reply::Error(e)) => e == text,
        _ => false,
    }
}

/// The node's `TIME` in whole milliseconds, as the scripts compute `now`.
pub(crate) fn time_ms(target: &mut dyn Target) -> Result<i64, String> {
    let reply = call(target, &["TIME"])?;
    let number = |r: &Reply| match r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).parse::<i64>().ok(),
        _ => None,
    };
    match &reply {
        Reply::Array(parts) => match parts.as_slice() {
            [secs, micros] => number(secs)
                .zip(number(micros))
                .map(|(s, us)| s * 1000 + us / 1000),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| format!("`TIME` answered {reply}"))
}

/// `DEL keys...`.
pub(crate) fn delete(target: &mut dyn Target, keys: &[&str]) -> Result<(), String> {
    let mut args = vec!["DEL"];
    args.extend(keys);
    call(target, &args).map(drop)
}

/// Sends `args`; a target that fails is an `Err` naming the command.
pub(crate) fn call(target: &mut dyn Target, args: &[&str]) -> Result<Reply, String> {
    target
        .call(args)
        .map_err(|e| format!("{}: `{}` failed: {e}", target.describe(), args[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_read_back_is_one_life_only() {
        let now = 1_000_000_000;
        let string = |pttl| Seen::Str(b"t".to_vec(), pttl);
        let set = KindsKey::Str("t", Life::Command);
        assert!(string(99_000).admits(set, now));
        assert!(!string(99_000).admits(KindsKey::Str("t", Life::Long), now));
        assert!(!string(9_000).admits(set, now), "not lengthened");
        assert!(!string(-1).admits(set, now), "no expiry");
        let holders = |score: i64| Seen::Set(vec![("t", Some((now + score) as f64))], 9_999);
        let short = KindsKey::Holders(&[("t", Life::Short)], Life::Short);
        assert!(holders(9_990).admits(short, now));
        assert!(
            !holders(99_990).admits(short, now),
            "moved to the command's deadline"
        );
        assert!(!holders(-1).admits(short, now), "expired");
        let gone = Seen::Set(vec![("t", None)], 9_999);
        assert!(!gone.admits(short, now), "a member missing");
    }

    #[test]
    fn a_returned_error_is_matched_whole_a_raised_one_by_its_start() {
        let permits = Reply::Error("PERMITS 3".into());
        assert!(reply_matches(KindsReply::Returned("PERMITS 3"), &permits));
        assert!(!reply_matches(KindsReply::Returned("PERMITS 2"), &permits));
        let raised = Reply::Error("PERMITS 3 script: on @user_script:1.".into());
        assert!(!reply_matches(KindsReply::Returned("PERMITS 3"), &raised));
        let wrong = Reply::Error("WRONGTYPE Operation against a key script: x".into());
        assert!(reply_matches(KindsReply::Error("WRONGTYPE"), &wrong));
    }
}
