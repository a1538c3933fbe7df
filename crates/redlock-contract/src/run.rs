//! One runner for every target and both tables (the lock key's [`CONTRACT`] and the fencing
//! rows, [`FENCE_CONTRACT`]): per case, put the keys in their state, send the command, and
//! compare the reply, the values and the PTTLs with the table. A native command the target
//! lacks is skipped, never assumed: the runner asks the target first.

use std::fmt;
use std::ops::RangeInclusive;

use redlock_testkit::Reply;

use crate::fence::{self, FENCE_CONTRACT, FenceCase};
use crate::form::{CoreCommands, FenceForm, Scripts};
use crate::table::{
    ANOTHER_TOKEN, After, CONTRACT, Case, Expected, Form, LONG_TTL_MS, SHORT_TTL_MS, Send, State,
    TTL_MS,
};
use crate::target::Target;

/// What one run of the contract found.
#[derive(Debug)]
pub struct Report {
    /// The target, as it describes itself.
    pub target: String,
    /// Cases whose reply and effect matched the table.
    pub passed: Vec<Case>,
    /// Cases not run because the target lacks their command, with what it answered.
    pub skipped: Vec<(Case, String)>,
    /// Cases that broke the contract, with what was seen.
    pub failed: Vec<(Case, String)>,
    /// Fencing rows whose reply and effect on K and F matched the table.
    pub fence_passed: Vec<FenceCase>,
    /// Fencing rows that broke the contract, with what was seen.
    pub fence_failed: Vec<(FenceCase, String)>,
    /// Fencing rows not run because the target lacks their command (`ZADD ... GT` before
    /// Redis 6.2), with what it answered.
    pub fence_skipped: Vec<(FenceCase, String)>,
    /// Native commands whose availability the target reported otherwise than the table's
    /// marks say for its version.
    pub disagreements: Vec<String>,
}

impl Report {
    /// Every case ran or was rightly skipped, and each one ran as the table says.
    pub fn is_clean(&self) -> bool {
        self.failed.is_empty() && self.fence_failed.is_empty() && self.disagreements.is_empty()
    }
}

/// Runs the whole contract ([`CONTRACT`] and [`FENCE_CONTRACT`]) against `target`, sending
/// `scripts` where the core sends its scripts. `Err` only if the target itself failed.
pub fn run(target: &mut dyn Target, scripts: Scripts) -> Result<Report, String> {
    run_rows(target, scripts, CONTRACT, FENCE_CONTRACT)
}

/// Runs the given rows of either table against `target`, as [`run`] runs them all: what a
/// negative control uses to show that a wrong row is caught.
pub fn run_rows(
    target: &mut dyn Target,
    scripts: Scripts,
    cases: &[Case],
    fence_rows: &[FenceCase],
) -> Result<Report, String> {
    let mut report = Report {
        target: target.describe(),
        passed: Vec::new(),
        skipped: Vec::new(),
        failed: Vec::new(),
        fence_passed: Vec::new(),
        fence_failed: Vec::new(),
        fence_skipped: Vec::new(),
        disagreements: Vec::new(),
    };
    let mut support = Vec::new();
    for form in Form::ALL {
        let answer = ask(target, form)?;
        if let (Some((family, major, minor)), Some(have)) = (target.version(), &answer) {
            let marked = form.available_on(family, major, minor);
            if marked != have.0 {
                report.disagreements.push(format!(
                    "{form}: the table says {family} {major}.{minor} {} it, but {}",
                    if marked { "has" } else { "lacks" },
                    have.1
                ));
            }
        }
        support.push((form, answer));
    }
    for (i, case) in cases.iter().enumerate() {
        match support.iter().find(|(f, _)| *f == case.form) {
            Some((_, Some((false, why)))) => report.skipped.push((*case, why.clone())),
            _ => match run_case(target, *case, i, scripts)? {
                None => report.passed.push(*case),
                Some(why) => report.failed.push((*case, why)),
            },
        }
    }
    // The fencing scripts need scripting only, which every server the core supports has;
    // the script-free acquire needs `ZADD ... GT`, which older servers lack.
    let zadd_gt = fence::zadd_gt_support(target)?;
    if let (Some((family, major, minor)), (have, why)) = (target.version(), &zadd_gt) {
        let marked = FenceForm::ZaddGt.available_on(family, major, minor);
        if marked != *have {
            let verb = if marked { "has" } else { "lacks" };
            let form = FenceForm::ZaddGt;
            let d = format!("{form}: the table says {family} {major}.{minor} {verb} it, but {why}");
            report.disagreements.push(d);
        }
    }
    for (i, case) in fence_rows.iter().enumerate() {
        if case.form == FenceForm::ZaddGt && !zadd_gt.0 {
            report.fence_skipped.push((*case, zadd_gt.1.clone()));
            continue;
        }
        match fence::run_case(target, *case, i, scripts)? {
            None => report.fence_passed.push(*case),
            Some(why) => report.fence_failed.push((*case, why)),
        }
    }
    Ok(report)
}

/// Runs one case on key `contract:<i>`; `Ok(Some(why))` if it broke the contract.
fn run_case(
    target: &mut dyn Target,
    case: Case,
    i: usize,
    scripts: Scripts,
) -> Result<Option<String>, String> {
    let key = format!("contract:{i}");
    let core = CoreCommands::new(&key, i as u64);
    let token = core.token.as_str();
    call(target, &["DEL", &key])?;
    let unready = match set_state(target, &key, case.state, token)? {
        Some(why) => Some(format!("setting up {}: {why}", case.state)),
        None => set_cache(target, case.form, scripts)?,
    };
    if let Some(why) = unready {
        call(target, &["DEL", &key])?;
        return Ok(Some(why));
    }
    let args = core.args(case.form, scripts);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let reply = call(target, &args)?;
    let value = call(target, &["GET", &key])?;
    let pttl = call(target, &["PTTL", &key])?;
    call(target, &["DEL", &key])?;
    let mut why = Vec::new();
    if !matches_reply(case.reply, &reply) {
        why.push(format!("reply {reply}, expected {}", case.reply));
    }
    let rule = KeyRule::after(case.state, case.after, token);
    let seen = Seen::read(&value, &pttl);
    if !rule.admits(&seen) {
        why.push(format!("key {seen}, expected {rule}"));
    }
    Ok((!why.is_empty()).then(|| why.join("; ")))
}

/// Puts `key` (deleted before) in `state`; `Ok(Some(why))` if the target would not.
fn set_state(
    target: &mut dyn Target,
    key: &str,
    state: State,
    token: &str,
) -> Result<Option<String>, String> {
    let (long, short) = (LONG_TTL_MS.to_string(), SHORT_TTL_MS.to_string());
    match state {
        State::Absent => Ok(None),
        State::Ours => expect_ok(target, &["SET", key, token, "PX", &long]),
        State::Another => expect_ok(target, &["SET", key, ANOTHER_TOKEN, "PX", &long]),
        State::Expiring => expect_ok(target, &["SET", key, token, "PX", &short]),
        State::WrongType => {
            let reply = call(target, &["RPUSH", key, "not-a-lock"])?;
            Ok((reply != Reply::Int(1)).then(|| format!("`RPUSH` answered {reply}")))
        }
    }
}

/// Loads the form's script (`EVALSHA`) or empties the cache (`EVALSHA` on a flushed cache,
/// and `EVAL`, which the core sends only after `-NOSCRIPT`); `Ok(Some(why))` if the target
/// would not.
fn set_cache(
    target: &mut dyn Target,
    form: Form,
    scripts: Scripts,
) -> Result<Option<String>, String> {
    let (Some(script), Some(send)) = (scripts.of(form), form.send()) else {
        return Ok(None);
    };
    if send != Send::Sha {
        return expect_ok(target, &["SCRIPT", "FLUSH"]);
    }
    // The server names the script by its own SHA1 of the body: a constant that does not
    // match its body fails here rather than as a puzzling NOSCRIPT.
    let reply = call(target, &["SCRIPT", "LOAD", script.body])?;
    let want = Reply::Bulk(script.sha1.as_bytes().to_vec());
    Ok((reply != want).then(|| {
        format!(
            "loading the script: SCRIPT LOAD answered {reply}, its SHA1 is {}",
            script.sha1
        )
    }))
}

/// Asks `target` whether it has `form`'s command: `None` for the forms every server has;
/// else `(has it, how we know)`.
fn ask(target: &mut dyn Target, form: Form) -> Result<Option<(bool, String)>, String> {
    let (known, probe): (_, &[&str]) = match form {
        Form::SetNxPx | Form::Release(_) | Form::Extend(_) => return Ok(None),
        Form::DelIfEq => (
            command_info(target, "DELIFEQ")?,
            &["DELIFEQ", PROBE_KEY, "x"],
        ),
        Form::DelExIfEq => (
            command_info(target, "DELEX")?,
            &["DELEX", PROBE_KEY, "IFEQ", "x"],
        ),
        Form::SetIfEqPx => (
            set_documents_ifeq(target)?,
            &["SET", PROBE_KEY, "x", "IFEQ", "x", "PX", "1000"],
        ),
    };
    if let Some(known) = known {
        return Ok(Some(known));
    }
    // The server would not say (no `COMMAND`, or it is denied): send the command itself on a
    // scratch key and read the error, if any.
    call(target, &["DEL", PROBE_KEY])?;
    let reply = call(target, probe)?;
    call(target, &["DEL", PROBE_KEY])?;
    let lacks = matches!(&reply, Reply::Error(e)
        if e.starts_with("ERR unknown command") || e.starts_with("ERR syntax error"));
    Ok(Some((
        !lacks,
        format!("`{}` answered {reply}", probe.join(" ")),
    )))
}

/// `COMMAND INFO name`: an entry if the server has the command, nil if not; `None` if the
/// server does not answer that question.
fn command_info(target: &mut dyn Target, name: &str) -> Result<Option<(bool, String)>, String> {
    let reply = call(target, &["COMMAND", "INFO", name])?;
    let asked = format!("COMMAND INFO {name}");
    Ok(match &reply {
        Reply::Array(entries) => match entries.as_slice() {
            [Reply::Nil] => Some((false, format!("{asked} answered nil"))),
            [Reply::Array(_)] => Some((true, format!("{asked} describes it"))),
            _ => None,
        },
        _ => None,
    })
}

/// `COMMAND DOCS SET`: whether its arguments include the `IFEQ` token; `None` if the server
/// does not answer that question.
fn set_documents_ifeq(target: &mut dyn Target) -> Result<Option<(bool, String)>, String> {
    let reply = call(target, &["COMMAND", "DOCS", "SET"])?;
    fn has_ifeq(reply: &Reply) -> bool {
        match reply {
            Reply::Bulk(b) => b.eq_ignore_ascii_case(b"IFEQ"),
            Reply::Simple(s) => s.eq_ignore_ascii_case("IFEQ"),
            Reply::Array(items) => items.iter().any(has_ifeq),
            _ => false,
        }
    }
    Ok(match &reply {
        Reply::Array(docs) if !docs.is_empty() => Some(if has_ifeq(&reply) {
            (true, "COMMAND DOCS SET lists the IFEQ argument".to_owned())
        } else {
            (false, "COMMAND DOCS SET has no IFEQ argument".to_owned())
        }),
        _ => None,
    })
}

fn call(target: &mut dyn Target, args: &[&str]) -> Result<Reply, String> {
    target
        .call(args)
        .map_err(|e| format!("{}: `{}` failed: {e}", target.describe(), args[0]))
}

/// Sends a setup command that must answer `+OK`; `Ok(Some(why))` if it did not.
fn expect_ok(target: &mut dyn Target, args: &[&str]) -> Result<Option<String>, String> {
    let reply = call(target, args)?;
    Ok((reply != Reply::Simple("OK".into())).then(|| format!("`{}` answered {reply}", args[0])))
}

/// Whether `got` is the reply the table expects; errors compare by their code only.
fn matches_reply(expected: Expected, got: &Reply) -> bool {
    match (expected, got) {
        (Expected::Ok, Reply::Simple(s)) => s == "OK",
        (Expected::Nil, Reply::Nil) => true,
        (Expected::Int(n), Reply::Int(m)) => n == *m,
        (Expected::Error(code), Reply::Error(e)) => e.split(' ').next() == Some(code),
        _ => false,
    }
}

/// The key as `GET` and `PTTL` show it after the command.
#[derive(Debug)]
struct Seen {
    value: Value,
    pttl: Option<i64>,
}

/// What a key holds, as far as the contract cares.
#[derive(Debug, PartialEq, Eq)]
enum Value {
    Absent,
    Str(Vec<u8>),
    /// `GET` answered `WRONGTYPE`: a list here.
    WrongType,
    /// Anything else `GET` answered.
    Odd(String),
}

/// What the table allows the key to look like afterwards.
#[derive(Debug)]
struct KeyRule {
    value: Value,
    /// The PTTL range (-2: no key, -1: no ttl).
    pttl: RangeInclusive<i64>,
}

impl Seen {
    fn read(get: &Reply, pttl: &Reply) -> Self {
        let value = match get {
            Reply::Nil => Value::Absent,
            Reply::Bulk(v) => Value::Str(v.clone()),
            Reply::Error(e) if e.starts_with("WRONGTYPE") => Value::WrongType,
            other => Value::Odd(other.to_string()),
        };
        let pttl = match pttl {
            Reply::Int(ms) => Some(*ms),
            _ => None,
        };
        Self { value, pttl }
    }
}

impl KeyRule {
    fn after(state: State, after: After, token: &str) -> Self {
        let ms = |n: u64| i64::try_from(n).expect("the contract's ttls fit an i64");
        let ours = || Value::Str(token.as_bytes().to_vec());
        let (value, pttl) = match (after, state) {
            (After::Absent, _) | (After::Unchanged, State::Absent) => (Value::Absent, -2..=-2),
            (After::OursWithTtl, _) => (ours(), ms(SHORT_TTL_MS) + 1..=ms(TTL_MS)),
            (After::Unchanged, State::Ours) => (ours(), ms(TTL_MS) + 1..=ms(LONG_TTL_MS)),
            (After::Unchanged, State::Another) => (
                Value::Str(ANOTHER_TOKEN.as_bytes().to_vec()),
                ms(TTL_MS) + 1..=ms(LONG_TTL_MS),
            ),
            (After::Unchanged, State::WrongType) => (Value::WrongType, -1..=-1),
            (After::Unchanged, State::Expiring) => (ours(), 1..=ms(SHORT_TTL_MS)),
        };
        Self { value, pttl }
    }

    fn admits(&self, seen: &Seen) -> bool {
        seen.value == self.value && seen.pttl.is_some_and(|ms| self.pttl.contains(&ms))
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Absent => f.write_str("absent"),
            Self::Str(v) => write!(f, "{:?}", String::from_utf8_lossy(v)),
            Self::WrongType => f.write_str("of the wrong type"),
            Self::Odd(reply) => write!(f, "read by GET as {reply}"),
        }
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pttl {
            Some(ms) => write!(f, "{} with PTTL {ms}", self.value),
            None => write!(f, "{} with no PTTL reply", self.value),
        }
    }
}

impl fmt::Display for KeyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (lo, hi) = (self.pttl.start(), self.pttl.end());
        if lo == hi {
            write!(f, "{} with PTTL {lo}", self.value)
        } else {
            write!(f, "{} with PTTL in {lo}..={hi}", self.value)
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.passed.len() + self.skipped.len() + self.failed.len();
        let fence_total =
            self.fence_passed.len() + self.fence_failed.len() + self.fence_skipped.len();
        writeln!(
            f,
            "command contract on {}: {} of {total} lock cases passed, {} failed, {} skipped; \
             {} of {fence_total} fencing cases passed, {} failed, {} skipped",
            self.target,
            self.passed.len(),
            self.failed.len(),
            self.skipped.len(),
            self.fence_passed.len(),
            self.fence_failed.len(),
            self.fence_skipped.len()
        )?;
        if let Some((case, why)) = self.fence_skipped.first() {
            let form = case.form;
            writeln!(
                f,
                "  SKIPPED {form} (every state): the target lacks it: {why}"
            )?;
        }
        let mut skipped_forms: Vec<(Form, &str)> = Vec::new();
        for (case, why) in &self.skipped {
            if !skipped_forms.iter().any(|(f, _)| *f == case.form) {
                skipped_forms.push((case.form, why));
            }
        }
        for (form, why) in skipped_forms {
            writeln!(
                f,
                "  SKIPPED {form} (every state): the target lacks it: {why}"
            )?;
        }
        for (case, why) in &self.failed {
            writeln!(f, "  FAILED {} × {}: {why}", case.form, case.state)?;
        }
        for (case, why) in &self.fence_failed {
            let (form, key, fence) = (case.form, case.key, case.fence);
            writeln!(f, "  FAILED {form} × K {key}, F {fence}: {why}")?;
        }
        for d in &self.disagreements {
            writeln!(f, "  WRONG MARK {d}")?;
        }
        Ok(())
    }
}

/// The scratch key the support probes use.
const PROBE_KEY: &str = "contract:probe";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_compare_by_code_only() {
        let redis = Reply::Error(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: \
             cc3a6373940e9b7ed832c7647621be7097036012, on @user_script:1."
                .into(),
        );
        let valkey = Reply::Error(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: on \
             @user_script:1."
                .into(),
        );
        for reply in [&redis, &valkey] {
            assert!(matches_reply(Expected::Error("WRONGTYPE"), reply));
            assert!(!matches_reply(Expected::Error("WRONG"), reply));
            assert!(!matches_reply(Expected::Int(0), reply));
        }
        assert!(matches_reply(Expected::Ok, &Reply::Simple("OK".into())));
        assert!(!matches_reply(
            Expected::Ok,
            &Reply::Simple("QUEUED".into())
        ));
        assert!(!matches_reply(Expected::Nil, &Reply::Int(0)));
    }

    #[test]
    fn the_ttl_ranges_are_disjoint() {
        let t = "tok";
        let set = KeyRule::after(State::Ours, After::OursWithTtl, t).pttl;
        let ours = KeyRule::after(State::Ours, After::Unchanged, t).pttl;
        let expiring = KeyRule::after(State::Expiring, After::Unchanged, t).pttl;
        assert!(expiring.end() < set.start() && set.end() < ours.start());
        let seen = |ms: i64| Seen {
            value: Value::Str(b"tok".to_vec()),
            pttl: Some(ms),
        };
        let rule = KeyRule::after(State::Expiring, After::OursWithTtl, t);
        assert!(rule.admits(&seen(TTL_MS as i64)));
        assert!(!rule.admits(&seen(SHORT_TTL_MS as i64)), "not lengthened");
        assert!(!rule.admits(&seen(TTL_MS as i64 + 1)));
    }
}
