//! The command line: subcommands and options as clap derives them, and the checks clap
//! cannot make (a missing `--`, an empty resource, no nodes, what several `exec` names
//! cannot go with). Nothing here touches a node.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit::{EXIT_CODES, Exit};
use crate::kind::ExecKind;

/// A distributed flock: run a command while holding a Redlock lock over N independent
/// Redis or Valkey nodes, see who holds a lock, release one on purpose, or watch the
/// algorithm work in a local demo.
#[derive(Debug, Parser)]
#[command(name = "redlock", version, after_long_help = EXIT_CODES, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Acquire RESOURCE (or several, all at once), run CMD while holding it (auto-extended),
    /// release when CMD and every process it left in its process group have exited, and
    /// exit with CMD's status.
    #[command(after_help = EXEC_ENV, after_long_help = EXEC_ENV)]
    Exec(ExecArgs),
    /// Show who holds RESOURCE on each node, whether a quorum agrees, and for how long;
    /// readers, a waiting writer and permit holders too, when there are any.
    Status(StatusArgs),
    /// Release RESOURCE where it holds exactly the given token (a stuck holder's).
    Release(ReleaseArgs),
    /// Start 5 local nodes (or use --nodes) and show K workers incrementing a counter with
    /// and without the lock, a local node killed and restarted midway.
    Demo(DemoArgs),
}

/// Where the nodes are, and how much to say.
#[derive(Debug, Args)]
pub(crate) struct NodeArgs {
    #[command(flatten)]
    pub(crate) source: NodeSource,
    /// Say nothing on stderr but errors.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

/// Where the node URLs come from: `--nodes`, `--nodes-file`, then the environment's
/// `REDLOCK_NODES`, then `REDLOCK_NODES_FILE` (the command line first, as always). The
/// environment is read here, not by clap, whose `--help` would show the variable's value,
/// passwords and all.
#[derive(Debug, Args)]
pub(crate) struct NodeSource {
    /// The nodes, comma-separated: `redis://[user:password@]host:port[/db]` or `host:port`;
    /// without it, REDLOCK_NODES. A password given here shows in `ps` while redlock runs:
    /// prefer --nodes-file.
    #[arg(long, value_delimiter = ',', value_name = "URL,...")]
    pub(crate) nodes: Vec<String>,
    /// A file with the node URLs, separated by commas, spaces or lines (`#` starts a
    /// comment); without it, REDLOCK_NODES_FILE. Keeps passwords out of `ps` and of the
    /// command's environment.
    #[arg(long, value_name = "PATH", conflicts_with = "nodes")]
    pub(crate) nodes_file: Option<PathBuf>,
}

impl NodeSource {
    /// Fills `nodes` from the first source given; empty when none is.
    fn resolve(&mut self) -> Result<(), Exit> {
        if self.nodes.iter().any(|n| !n.trim().is_empty()) {
            return Ok(());
        }
        if let Some(path) = &self.nodes_file {
            self.nodes = read_nodes_file(path)?;
            return Ok(());
        }
        if let Some(urls) = std::env::var_os("REDLOCK_NODES").filter(|v| !v.is_empty()) {
            let Some(urls) = urls.to_str() else {
                return Err(Exit::usage("REDLOCK_NODES is not UTF-8".into()));
            };
            self.nodes = urls.split(',').map(str::to_owned).collect();
            return Ok(());
        }
        if let Some(path) = std::env::var_os("REDLOCK_NODES_FILE").filter(|v| !v.is_empty()) {
            self.nodes = read_nodes_file(Path::new(&path))?;
        }
        Ok(())
    }
}

/// The URLs in a nodes file; its contents are never shown, only its path.
fn read_nodes_file(path: &Path) -> Result<Vec<String>, Exit> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Exit::usage(format!(
            "cannot read the nodes file {}: {e}",
            path.display()
        ))
    })?;
    let urls: Vec<String> = (text.lines())
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.split(|c: char| c == ',' || c.is_whitespace()))
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect();
    if urls.is_empty() {
        let message = format!("the nodes file {} names no node", path.display());
        return Err(Exit::usage(message));
    }
    Ok(urls)
}

/// `redlock exec`.
#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// The lock's name (the key on every node). Several names, each its own argument
    /// (`redlock exec a b -- CMD`), are locked together as one multi-resource lock: all at
    /// once or none, exclusive on every name (no --shared, --exclusive, --permits or
    /// --fenced). A name given again is locked once.
    #[arg(required = true, num_args = 1.., value_name = "RESOURCE")]
    pub(crate) resources: Vec<String>,
    /// The command to run and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD [ARGS...]")]
    pub(crate) command: Vec<String>,
    /// Run STRING with `sh -c` instead of a CMD after `--` (flock's -c; flock uses $SHELL,
    /// redlock always sh, as cron does).
    #[arg(
        short = 'c',
        long = "command",
        value_name = "STRING",
        conflicts_with = "command"
    )]
    pub(crate) shell: Option<String>,
    /// The exit code when the lock is not acquired: held elsewhere with --no-wait, or
    /// --wait ran out (flock's -E; default 75).
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = crate::exit::NOT_ACQUIRED)]
    pub(crate) conflict_exit_code: u8,
    #[command(flatten)]
    pub(crate) nodes: NodeArgs,
    /// The lock's time to live, at least 100ms; it is extended automatically while CMD
    /// runs.
    #[arg(long, default_value = "30s", value_parser = lock_ttl)]
    pub(crate) ttl: Duration,
    /// Wait at most this long for the lock (default: until it is free, as flock does).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DUR", conflicts_with = "no_wait")]
    pub(crate) wait: Option<Duration>,
    /// Make one attempt; exit "not acquired" at once if the lock is held (flock's -n).
    #[arg(long, short = 'n')]
    pub(crate) no_wait: bool,
    /// Stop extending after CMD has held the lock this long: the lock then expires and CMD
    /// is told, per --on-lost (default: no limit; held for as long as CMD runs, as flock
    /// does).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DUR")]
    pub(crate) max_hold: Option<Duration>,
    /// What to do to CMD when the lock is lost while it runs.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub(crate) on_lost: OnLost,
    /// With --on-lost term: how long CMD has after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "DUR")]
    pub(crate) grace: Duration,
    /// Take a fencing token and pass it to CMD as REDLOCK_FENCING_TOKEN (the mutex only:
    /// not with --shared, --exclusive or --permits).
    #[arg(long, conflicts_with_all = ["shared", "exclusive", "permits"])]
    pub(crate) fenced: bool,
    /// Hold RESOURCE as a reader (flock's -s): any number of --shared holders at once,
    /// none while an --exclusive one holds it or waits for it. Use --exclusive, not a
    /// plain exec, for the writers of a name that readers use: a plain exec takes the
    /// mutex, which does not see readers.
    #[arg(long, short = 's', conflicts_with_all = ["exclusive", "permits"])]
    pub(crate) shared: bool,
    /// Hold RESOURCE as its writer (flock's -x): excludes --shared holders, other
    /// --exclusive ones and plain execs. A writer that waits keeps new readers out
    /// meanwhile.
    #[arg(long, short = 'x', conflicts_with = "permits")]
    pub(crate) exclusive: bool,
    /// Hold one of at most K permits of RESOURCE (a counting semaphore: "at most 3 exports
    /// across the fleet"); every holder of RESOURCE must pass the same K (else exit 78).
    /// K >= 2 needs more than a majority of the N nodes: floor(K*N/(K+1)) + 1 of them (on
    /// 5 nodes: 4 for K = 2 or 3, all 5 for K >= 4). While more than N minus that many
    /// are down, no permit can be taken, and a held one's extensions fail: it is lost when
    /// its validity runs out (--on-lost). K = 1 needs a majority, as a plain exec does.
    #[arg(long, value_name = "K", value_parser = permits)]
    pub(crate) permits: Option<NonZeroU32>,
}

impl ExecArgs {
    /// The kind of lock the names and flags ask for.
    pub(crate) fn kind(&self) -> ExecKind {
        let names = self.resources.len();
        ExecKind::from_flags(names, self.shared, self.exclusive, self.permits)
    }

    /// The names locked, for messages: `a`, or `a, b` for a multi-lock.
    pub(crate) fn label(&self) -> String {
        self.resources.join(", ")
    }

    /// The kind flag given, if any, by its name on the command line.
    fn kind_flag(&self) -> Option<&'static str> {
        [
            (self.shared, "--shared"),
            (self.exclusive, "--exclusive"),
            (self.permits.is_some(), "--permits"),
            (self.fenced, "--fenced"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// What `exec` does to the command when the lock is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnLost {
    /// SIGTERM, then SIGKILL after --grace.
    Term,
    /// SIGKILL at once.
    Kill,
    /// Let it run; the exit code still says the lock was lost.
    Ignore,
}

/// `redlock status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The lock's name.
    pub(crate) resource: String,
    #[command(flatten)]
    pub(crate) nodes: NodeArgs,
    /// Print JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// The holders' ttl, for the drift allowance in the validity shown.
    #[arg(long, default_value = "30s", value_parser = lock_ttl)]
    pub(crate) ttl: Duration,
}

/// `redlock release`.
#[derive(Debug, Args)]
pub(crate) struct ReleaseArgs {
    /// The lock's name.
    pub(crate) resource: String,
    /// The holder's token, exactly as `redlock status` shows it (required: nothing is
    /// released without it).
    #[arg(long)]
    pub(crate) token: Option<String>,
    #[command(flatten)]
    pub(crate) nodes: NodeArgs,
    /// Print JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `redlock demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Run on these nodes instead of starting 5 local ones: the lock on all of them, the
    /// counter on the first. Nodes not started by the demo are never killed or restarted.
    #[command(flatten)]
    pub(crate) source: NodeSource,
    /// Workers incrementing the counter.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) workers: u16,
    /// How long each phase (with the lock, without it) runs; above zero.
    #[arg(long, default_value = "4s", value_parser = positive, value_name = "DUR")]
    pub(crate) duration: Duration,
    /// The lock's ttl; the killed node restarts after it.
    #[arg(long, default_value = "1s", value_parser = lock_ttl)]
    pub(crate) ttl: Duration,
    /// Say only the verdicts.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Print the verdicts as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Parses the command line; clap's errors and the checks it cannot make become one line and
/// the usage exit code (help and version print and exit 0).
pub(crate) fn parse() -> Result<Cli, Exit> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cli = Cli::try_parse_from(&args).map_err(|e| clap_exit(&e, &args))?;
    match &mut cli.command {
        Command::Exec(a) => {
            if let Some(shell) = a.shell.take() {
                a.command = vec!["sh".into(), "-c".into(), shell];
            }
            a.nodes.source.resolve()?;
        }
        Command::Status(a) => a.nodes.source.resolve()?,
        Command::Release(a) => a.nodes.source.resolve()?,
        Command::Demo(a) => a.source.resolve()?,
    }
    check(&cli)?;
    if let Command::Exec(a) = &mut cli.command {
        // `a b a` is the set {a, b}, as the core counts it; the first place of each name
        // stays, for messages.
        let mut seen = std::collections::HashSet::new();
        a.resources.retain(|name| seen.insert(name.clone()));
    }
    Ok(cli)
}

fn clap_exit(e: &clap::Error, args: &[std::ffi::OsString]) -> Exit {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return Exit::code(0);
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return Exit::usage(String::new());
        }
        _ => {}
    }
    let exec = args.get(1).is_some_and(|a| a == "exec");
    let shell = (args.iter().filter_map(|a| a.to_str()))
        .any(|a| a == "--command" || a.starts_with("--command=") || a.starts_with("-c"));
    if exec && !shell && !args.iter().any(|a| a == "--") {
        return Exit::usage(MISSING_DASHES.into());
    }
    // clap's whole message: what is wrong, the values it takes, the usage line. It may
    // quote what was typed, so node URLs in it lose their passwords.
    let text = e.render().to_string();
    let text = text.trim().trim_start_matches("error: ");
    Exit::usage(redact_args(text, args))
}

/// `text` with every password that a URL among `args` holds replaced by `***`.
fn redact_args(text: &str, args: &[std::ffi::OsString]) -> String {
    let mut pieces: Vec<&str> = (args.iter().filter_map(|a| a.to_str()))
        .flat_map(|a| [a, a.split_once('=').map_or("", |(_, v)| v)])
        .flat_map(|a| std::iter::once(a).chain(a.split(',')))
        .filter(|p| p.contains('@') || p.contains("password="))
        .collect();
    // The longest first, so that a whole argument is redacted before a piece of it.
    pieces.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let mut text = text.to_owned();
    for piece in pieces {
        text = text.replace(piece, &redact_url(piece));
    }
    text
}

/// A node URL with the password of its user info, and any `password=` option, replaced
/// by `***`, as the driver shows URLs: the user info is everything before the last `@`.
fn redact_url(url: &str) -> String {
    let url = match url.split_once('?') {
        Some((head, query)) => {
            let pairs: Vec<&str> = (query.split('&'))
                .map(|pair| match pair.split_once('=') {
                    Some(("password", _)) => "password=***",
                    _ => pair,
                })
                .collect();
            format!("{head}?{}", pairs.join("&"))
        }
        None => url.to_owned(),
    };
    let Some(at) = url.rfind('@') else {
        return url;
    };
    let start = url.find("://").map_or(0, |i| i + "://".len()).min(at);
    let user = url[start..at].split_once(':').map_or("", |(u, _)| u);
    format!("{}{user}:***{}", &url[..start], &url[at..])
}

/// A lock's ttl: a duration of at least [`MIN_TTL`]. Each attempt waits at most 5% of the
/// ttl for the nodes' answers (the core's default attempt timeout, algorithm.md §2), and
/// `exec` extends the lock every third of it: a ttl of a few milliseconds passes the
/// core's own check but gives a node on loopback too little time to answer, and the
/// nodes would look down.
fn lock_ttl(text: &str) -> Result<Duration, String> {
    let ttl = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if ttl < MIN_TTL {
        return Err(format!(
            "{} is too short: use at least {} (an attempt waits at most 5% of the ttl for \
             the nodes to answer, and the lock is extended every third of it)",
            humantime::format_duration(ttl),
            humantime::format_duration(MIN_TTL),
        ));
    }
    Ok(ttl)
}

/// `--permits K`: a whole number of at least 1 (a semaphore of 0 permits can never be
/// held; docs/kinds.md).
fn permits(text: &str) -> Result<NonZeroU32, String> {
    let k: u32 = text
        .parse()
        .map_err(|e| format!("{text} is not a number of permits: {e}"))?;
    NonZeroU32::new(k).ok_or_else(|| "0 permits can never be held; ask for at least 1".into())
}

/// A duration above zero: a demo that runs for no time has no verdict to give.
fn positive(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("must be above zero".into()),
        d => Ok(d),
    }
}

/// What clap cannot check: a resource, a command after `--`, a token, some nodes, and
/// what several names of `exec` cannot go with.
fn check(cli: &Cli) -> Result<(), Exit> {
    let (resources, nodes) = match &cli.command {
        Command::Exec(a) => {
            if a.command.is_empty() {
                return Err(Exit::usage(MISSING_DASHES.into()));
            }
            (&a.resources[..], &a.nodes)
        }
        Command::Status(a) => (std::slice::from_ref(&a.resource), &a.nodes),
        Command::Release(a) => {
            if a.token.as_deref().is_none_or(str::is_empty) {
                let msg =
                    "release needs --token T: the holder's token, as `redlock status` shows it";
                return Err(Exit::usage(msg.into()));
            }
            (std::slice::from_ref(&a.resource), &a.nodes)
        }
        Command::Demo(_) => return Ok(()),
    };
    if resources.iter().any(String::is_empty) {
        return Err(Exit::usage("the resource is empty: name the lock".into()));
    }
    if let Command::Exec(a) = &cli.command {
        check_several(a).map_err(Exit::usage)?;
    }
    if nodes.source.nodes.iter().all(|n| n.trim().is_empty()) {
        let msg = "no nodes: pass --nodes URL,... or --nodes-file PATH, or set REDLOCK_NODES \
                   or REDLOCK_NODES_FILE";
        return Err(Exit::usage(msg.into()));
    }
    Ok(())
}

/// What several names of `exec` cannot go with (docs/kinds.md, "Multi-resource lock"):
/// one name and nothing else, given again (the core's `OneResourceRepeated`, said here
/// with the name); a kind flag (a multi-lock is the mutex of every name); a newline in a
/// name (`REDLOCK_RESOURCES`, in the command's environment, lists the names one a line).
fn check_several(a: &ExecArgs) -> Result<(), String> {
    let [first, rest @ ..] = &a.resources[..] else {
        return Ok(());
    };
    if rest.is_empty() {
        return Ok(());
    }
    if rest.iter().all(|name| name == first) {
        return Err(format!(
            "{first:?} is named {} times and nothing else: a lock of several resources \
             needs different names; to lock {first:?} alone, name it once",
            a.resources.len()
        ));
    }
    if let Some(flag) = a.kind_flag() {
        let why = match flag {
            "--fenced" => "only a mutex of one name hands out fencing tokens for now",
            _ => "a lock of several resources is exclusive on every name (the mutex of each)",
        };
        return Err(format!(
            "{flag} takes one resource, and {} were named: {why}",
            a.resources.len()
        ));
    }
    match a.resources.iter().find(|name| name.contains('\n')) {
        Some(name) => Err(format!(
            "the resource {name:?} holds a newline, which a name locked with others may \
             not: the command gets the names one a line, in REDLOCK_RESOURCES"
        )),
        None => Ok(()),
    }
}

/// The shortest `--ttl`: its attempts wait 5 ms for the nodes' answers.
const MIN_TTL: Duration = Duration::from_millis(100);

const MISSING_DASHES: &str = "exec needs `--` before the command: redlock exec RESOURCE... \
     [OPTIONS] -- CMD [ARGS...] (or -c 'SHELL STRING')";

/// What `exec --help` ends with: what the command gets, and what it does not.
const EXEC_ENV: &str = "\
The command's environment:
  REDLOCK_RESOURCE       the lock's name (one name)
  REDLOCK_RESOURCES      with several names: each locked name on a line of its own, sorted
                         by bytes, duplicates once, no newline after the last (a name
                         locked with others may not hold a newline)
  REDLOCK_TOKEN          the lock's token on the nodes (what `redlock release --token` takes)
  REDLOCK_DEADLINE_MS    Unix time in ms when the first validity ends (extensions move the
                         lock's deadline later; this value is not updated)
  REDLOCK_FENCING_TOKEN  with --fenced: the fencing token, for every write the lock guards
  REDLOCK_KIND           what is held: mutex (no kind flag), shared (--shared), exclusive
                         (--exclusive), permits (--permits K) or multi (several names)
  REDLOCK_PERMITS        with --permits K: K
  REDLOCK_NODES is removed (its URLs may hold passwords); REDLOCK_NODES_FILE is kept.

Kinds: a plain exec takes the mutex, as flock without -s does. Readers (--shared) and the
mutex do not see each other: on a name that readers use, take the exclusive side with
--exclusive. --permits K holds apart from both (keys of its own).

Several resources: each name its own argument, locked together as one multi-resource lock,
all at once or none, so two execs naming overlapping sets never deadlock:
  redlock exec account:3 account:7 -- ./transfer.sh 3 7
  redlock exec -n stock:2 invoice:9 -c './ship 9 && ./restock 2'
It is the mutex of every name: it excludes plain execs, --exclusive holders and other
multi-locks of any of the names (and, like a plain exec, does not see --shared readers),
so it takes no kind flag (nor --fenced). A name given again is locked once.

The lock is held from acquisition until the command and every process left in its process
group have exited; see the exit codes in `redlock --help`.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_is_at_least_the_minimum() {
        assert_eq!(lock_ttl("100ms"), Ok(MIN_TTL));
        let err = lock_ttl("5ms").unwrap_err();
        assert!(
            err.contains("5ms is too short: use at least 100ms"),
            "{err}"
        );
        assert!(lock_ttl("ten").is_err());
    }

    #[test]
    fn passwords_in_urls_are_redacted_wherever_they_were_typed() {
        assert_eq!(redact_url("redis://u:hunter2@h:1"), "redis://u:***@h:1");
        assert_eq!(redact_url("redis://hunter2@h:1/2"), "redis://:***@h:1/2");
        assert_eq!(redact_url("u:p@ss@h:1"), "u:***@h:1");
        assert_eq!(
            redact_url("unix:///s.sock?user=u&password=hunter2"),
            "unix:///s.sock?user=u&password=***"
        );
        let args: Vec<std::ffi::OsString> = ["redlock", "--nodes=h:1,redis://:hunter2@h:2", "x"]
            .iter()
            .map(Into::into)
            .collect();
        let text = "unexpected 'redis://:hunter2@h:2' in '--nodes=h:1,redis://:hunter2@h:2'";
        let redacted = redact_args(text, &args);
        assert!(!redacted.contains("hunter2"), "{redacted}");
        assert!(redacted.contains("redis://:***@h:2"), "{redacted}");
    }
}
