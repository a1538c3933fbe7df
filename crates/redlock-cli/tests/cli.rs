//! The `redlock` binary as a user runs it: real processes against real nodes started by the
//! test kit, on 127.0.0.1 only. Every wait is bounded; every process started is killed by a
//! guard if a test fails midway.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redlock_testkit::Cluster;

/// The binary under test: this build's, or `REDLOCK_CLI_BIN` (an older build, to see a new
/// test fail on the behaviour it was written against).
fn bin() -> String {
    std::env::var("REDLOCK_CLI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_redlock").into())
}

const USAGE: i32 = 64;
const NODE_ERROR: i32 = 69;
const NOT_ACQUIRED: i32 = 75;
const LOST: i32 = 76;

/// A `redlock` run to completion, with the cluster's nodes; at most 30 s.
fn redlock(c: &Cluster, args: &[&str]) -> Output {
    let mut command = Command::new(bin());
    command.args(args).env("REDLOCK_NODES", c.urls().join(","));
    finish(Running::spawn(command, false), Duration::from_secs(30))
}

/// A `redlock` process in the background, killed on drop; its stdout lines arrive on a
/// channel (when piped).
struct Running {
    child: Child,
    lines: Option<mpsc::Receiver<String>>,
}

impl Running {
    fn spawn(command: Command, lines: bool) -> Self {
        Self::spawn_io(command, lines, Stdio::piped(), Stdio::piped())
    }

    /// As [`spawn`](Self::spawn), with the stdout and stderr given.
    fn spawn_io(mut command: Command, lines: bool, stdout: Stdio, stderr: Stdio) -> Self {
        // A group of its own, as a shell's job has: a signal to the group is what a terminal
        // sends on Ctrl-C.
        command.stdout(stdout).stderr(stderr).process_group(0);
        let mut child = command.spawn().expect("start redlock");
        let lines = lines.then(|| {
            let stdout = child.stdout.take().expect("piped");
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
            rx
        });
        Self { child, lines }
    }

    /// `redlock exec` in the background with `args`, on the cluster's nodes.
    fn exec(c: &Cluster, args: &[&str]) -> Self {
        let mut command = Command::new(bin());
        command
            .arg("exec")
            .args(args)
            .env("REDLOCK_NODES", c.urls().join(","));
        Self::spawn(command, true)
    }

    /// The next stdout line, within 10 s.
    fn line(&self) -> String {
        let lines = self.lines.as_ref().expect("lines piped");
        lines
            .recv_timeout(Duration::from_secs(10))
            .expect("a line from the command within 10 s")
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Waits at most `bound` for the exit status.
    fn wait(&mut self, bound: Duration) -> ExitStatus {
        let until = Instant::now() + bound;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("redlock did not exit within {bound:?}");
    }
}

impl Drop for Running {
    /// A `redlock` still running (a test failed midway) gets SIGCONT and SIGTERM, which it
    /// passes on to its command's process group, then SIGKILL after at most 3 s.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let pid = self.pid();
            for name in ["-CONT", "-TERM"] {
                let _ = Command::new("kill").args([name, "--", &pid]).status();
            }
            let until = Instant::now() + Duration::from_secs(3);
            while Instant::now() < until && matches!(self.child.try_wait(), Ok(None)) {
                thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn finish(mut running: Running, bound: Duration) -> Output {
    let status = running.wait(bound);
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut out) = running.child.stdout.take() {
        std::io::Read::read_to_end(&mut out, &mut stdout).expect("stdout");
    }
    if let Some(mut err) = running.child.stderr.take() {
        std::io::Read::read_to_end(&mut err, &mut stderr).expect("stderr");
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

/// `kill NAME PID`; a PID of `-N` is the process group N.
fn signal(pid: &str, name: &str) {
    let status = Command::new("kill")
        .args([name, "--", pid])
        .status()
        .expect("kill");
    assert!(status.success(), "kill {name} {pid}");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether any node still has `key`.
fn key_anywhere(c: &Cluster, key: &str) -> bool {
    (c.nodes().iter()).any(|n| n.command(&["EXISTS", key]).unwrap().as_int() != Some(0))
}

/// Asserts that `out` exited with `code` and its stderr says `needle`; the stderr.
fn fails_with(out: &Output, code: i32, needle: &str) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "{err}");
    err
}

#[test]
fn exec_runs_the_command_and_exits_with_its_status_leaving_nothing_locked() {
    let c = Cluster::start(3).unwrap();
    let out = redlock(&c, &["exec", "job", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    assert!(!key_anywhere(&c, "job"));
    let out = redlock(&c, &["exec", "job", "--", "true"]);
    assert_eq!(out.status.code(), Some(0));
    let out = redlock(&c, &["exec", "job", "--", "/nonexistent/cmd"]);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    assert!(
        !key_anywhere(&c, "job"),
        "released after a command that was not found"
    );
    let file = std::env::temp_dir().join(format!("redlock-cli-test-{}", std::process::id()));
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    let out = redlock(&c, &["exec", "job", "--", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    assert!(
        !key_anywhere(&c, "job"),
        "released after a command that could not be run"
    );
}

#[test]
fn a_background_child_keeps_the_lock_until_the_process_group_is_empty() {
    let c = Cluster::start(3).unwrap();
    // `sh` exits at once, with 3; the subshell it left in the background runs on for 1.5 s.
    let script = "(sleep 1.5; echo background-done) & echo parent-exits; exit 3";
    let mut first = Running::exec(&c, &["bg", "--", "sh", "-c", script]);
    assert_eq!(first.line(), "parent-exits");
    thread::sleep(Duration::from_millis(300));
    let out = redlock(&c, &["exec", "bg", "--no-wait", "--", "echo", "second"]);
    assert_eq!(
        out.status.code(),
        Some(NOT_ACQUIRED),
        "still held for the background child: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).is_empty(),
        "the second command did not run"
    );
    assert_eq!(first.line(), "background-done");
    let status = first.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(3), "the leader's status");
    assert!(!key_anywhere(&c, "bg"), "released once the group was empty");

    // A lost lock tells the leftovers too: the whole group gets --on-lost's signal.
    let script = "(trap 'echo leftover-told; exit 0' TERM; echo leftover-ready; \
        i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done) & exit 0";
    let job = Running::exec(&c, &["bg-lost", "--ttl", "1s", "--", "sh", "-c", script]);
    assert_eq!(job.line(), "leftover-ready");
    for node in c.nodes() {
        node.command(&["FLUSHALL"]).unwrap();
    }
    assert_eq!(job.line(), "leftover-told");
    let out = finish(job, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(LOST), "{}", text(&out.stderr));
}

#[test]
fn sigterm_while_waiting_gives_up_and_leaves_nothing_of_its_own() {
    let c = Cluster::start(3).unwrap();
    // Another holder on nodes 0 and 1: each attempt sets the key on node 2, then undoes it.
    for node in &c.nodes()[..2] {
        node.command(&["SET", "waited", "other", "PX", "30000"])
            .unwrap();
    }
    // One name, and a multi-lock of it and another (which it sets on node 2 too).
    for names in [&["waited"][..], &["waited-too", "waited"][..]] {
        let mut args = names.to_vec();
        args.extend(["--wait", "20s", "--", "echo", "ran"]);
        let mut waiter = Running::exec(&c, &args);
        thread::sleep(Duration::from_millis(700));
        signal(&waiter.pid(), "-TERM");
        let status = waiter.wait(Duration::from_secs(10));
        assert_eq!(status.code(), Some(128 + 15), "{names:?}: 128 + SIGTERM");
        assert!(
            waiter.lines.as_ref().unwrap().try_recv().is_err(),
            "{names:?}: the command never ran"
        );
        assert!(!key_anywhere(&c, "waited-too"), "{names:?}");
        let on = |i: usize| c.node(i).command(&["GET", "waited"]).unwrap();
        assert_eq!(
            on(2).as_str(),
            None,
            "{names:?}: nothing of its own is left"
        );
        assert_eq!(
            on(0).as_str(),
            Some("other"),
            "the holder's keys are untouched"
        );
        assert_eq!(on(1).as_str(), Some("other"));
    }
}

#[test]
fn a_lock_lost_to_paused_nodes_terminates_the_command_and_leaves_nothing_locked() {
    let c = Cluster::start(3).unwrap();
    let script = "trap 'echo told; exit 0' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let args = ["outlived", "--ttl", "1s", "--", "sh", "-c", script];
    let mut job = Running::exec(&c, &args);
    assert_eq!(job.line(), "ready");
    c.node(0).pause().unwrap();
    c.node(1).pause().unwrap();
    let told = job
        .lines
        .as_ref()
        .unwrap()
        .recv_timeout(Duration::from_secs(10));
    c.node(0).resume().unwrap();
    c.node(1).resume().unwrap();
    assert_eq!(told.as_deref(), Ok("told"), "the command is told");
    let status = job.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(LOST));
    // The paused nodes' keys expired at their ttl; the third was released.
    thread::sleep(Duration::from_millis(1100));
    assert!(!key_anywhere(&c, "outlived"));
}

#[test]
fn the_command_sees_the_lock_in_its_environment() {
    let c = Cluster::start(3).unwrap();
    let script =
        r#"echo "$REDLOCK_RESOURCE|$REDLOCK_TOKEN|$REDLOCK_DEADLINE_MS|$REDLOCK_FENCING_TOKEN""#;
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let args = [
        "exec", "env-job", "--ttl", "10s", "--fenced", "--", "sh", "-c", script,
    ];
    let out = redlock(&c, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let fields: Vec<&str> = stdout.trim().split('|').collect();
    assert_eq!(fields[0], "env-job");
    assert_eq!(fields[1].len(), 40, "a 20-byte hex token: {stdout}");
    assert!(fields[1].bytes().all(|b| b.is_ascii_hexdigit()));
    let deadline: u128 = fields[2].parse().expect("a number");
    assert!(
        deadline > before + 5_000 && deadline <= before + 11_000,
        "{deadline} vs {before}"
    );
    let fence: u64 = fields[3].parse().expect("a fencing token");
    assert!(fence > 0);
}

#[test]
fn node_urls_reach_neither_the_command_nor_its_arguments() {
    let c = Cluster::start(3).unwrap();
    let script = r#"echo "nodes=${REDLOCK_NODES-unset}""#;
    // From REDLOCK_NODES: the command does not inherit it (its URLs may hold passwords).
    let out = redlock(&c, &["exec", "env-nodes", "--", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "nodes=unset\n");
    // From a file, by option or by variable: no URL in argv (what `ps` shows) or in the
    // environment.
    let file = std::env::temp_dir().join(format!("redlock-cli-nodes-{}", std::process::id()));
    let urls = c.urls();
    let listing = format!(
        "# the lock's nodes\n{}\n{}, {}\n",
        urls[0], urls[1], urls[2]
    );
    std::fs::write(&file, listing).unwrap();
    let path = file.to_str().unwrap();
    let runs = [
        Command::new(bin())
            .args([
                "exec",
                "file-nodes",
                "--nodes-file",
                path,
                "--",
                "sh",
                "-c",
                script,
            ])
            .env_remove("REDLOCK_NODES")
            .output()
            .unwrap(),
        Command::new(bin())
            .args(["exec", "file-nodes", "--", "sh", "-c", script])
            .env_remove("REDLOCK_NODES")
            .env("REDLOCK_NODES_FILE", path)
            .output()
            .unwrap(),
    ];
    for out in runs {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "nodes=unset\n");
    }
    let out = redlock(&c, &["status", "file-nodes", "--nodes-file", path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).matches(": free").count(),
        3,
        "{}",
        text(&out.stdout)
    );
    // Both options at once, or a file that cannot be read, is a usage error.
    let out = redlock(
        &c,
        &["status", "r", "--nodes", &urls[0], "--nodes-file", path],
    );
    assert_eq!(out.status.code(), Some(USAGE), "{}", text(&out.stderr));
    let _ = std::fs::remove_file(&file);
    let out = redlock(&c, &["status", "r", "--nodes-file", path]);
    fails_with(&out, USAGE, "cannot read the nodes file");
}

#[test]
fn flock_habits_a_shell_string_a_conflict_exit_code_and_the_variables_in_help() {
    let c = Cluster::start(3).unwrap();
    let out = redlock(&c, &["exec", "habits", "-c", "echo a | tr a b; exit 4"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "b\n");
    let out = redlock(&c, &["exec", "habits", "-c", "true", "--", "true"]);
    assert_eq!(out.status.code(), Some(USAGE), "-c or a command, not both");

    for node in c.nodes() {
        node.command(&["SET", "habits", "other", "PX", "30000"])
            .unwrap();
    }
    for args in [
        &["exec", "habits", "-n", "-E", "1", "--", "true"][..],
        &[
            "exec",
            "habits",
            "--wait",
            "200ms",
            "--conflict-exit-code",
            "1",
            "-c",
            "true",
        ][..],
    ] {
        let out = redlock(&c, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("another client holds it"), "{args:?}: {err}");
    }
    // Other failures keep their own codes.
    let out = redlock(
        &c,
        &["exec", "habits", "-E", "1", "--ttl", "ten", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(USAGE));

    let out = Command::new(bin())
        .args(["exec", "--help"])
        .output()
        .unwrap();
    let help = text(&out.stdout);
    for variable in [
        "REDLOCK_RESOURCE",
        "REDLOCK_TOKEN",
        "REDLOCK_DEADLINE_MS",
        "REDLOCK_FENCING_TOKEN",
    ] {
        assert!(help.contains(variable), "{help}");
    }
}

#[test]
fn a_second_exec_without_waiting_is_not_acquired_and_one_that_waits_gets_it() {
    let c = Cluster::start(3).unwrap();
    let mut first = Running::exec(&c, &["shared", "--", "sh", "-c", "echo held; sleep 1"]);
    assert_eq!(first.line(), "held");
    let started = Instant::now();
    let out = redlock(&c, &["exec", "shared", "--no-wait", "--", "echo", "ran"]);
    assert_eq!(
        out.status.code(),
        Some(NOT_ACQUIRED),
        "{}",
        text(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(3), "at once");
    assert!(text(&out.stdout).is_empty(), "the command did not run");
    assert!(
        text(&out.stderr).contains("another client holds it"),
        "{}",
        text(&out.stderr)
    );
    let out = redlock(
        &c,
        &["exec", "shared", "--wait", "20s", "--", "echo", "ran"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ran\n");
    let status = first.wait(Duration::from_secs(5));
    assert_eq!(
        status.code(),
        Some(0),
        "the first had finished before the second ran"
    );
    let out = redlock(&c, &["exec", "shared", "--wait", "300ms", "--", "true"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn sigterm_reaches_the_command_and_the_lock_is_released_after_it_exits() {
    let c = Cluster::start(3).unwrap();
    let script = "trap 'echo got-term; exit 3' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let mut first = Running::exec(&c, &["term-job", "--", "sh", "-c", script]);
    assert_eq!(first.line(), "ready");
    assert!(key_anywhere(&c, "term-job"));
    signal(&first.pid(), "-TERM");
    assert_eq!(first.line(), "got-term");
    let status = first.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(3), "the command's own status");
    assert!(!key_anywhere(&c, "term-job"), "released");
}

#[test]
fn ctrl_c_on_a_terminal_reaches_the_command_exactly_once() {
    let c = Cluster::start(3).unwrap();
    // Counts the INTs it gets for 1.5 s after the first (at most 10 s in all), then says.
    // `wait` returns as soon as a trapped signal arrives, so the trap runs at once and a
    // second INT a moment later counts again. It also says its process group (the 5th
    // field of /proc/PID/stat).
    let script = "n=0; trap 'n=$((n+1))' INT; echo \"pgid=$(cut -d' ' -f5 /proc/$$/stat)\"; \
        i=0; j=0; while [ $i -lt 200 ]; do sleep 0.05 & wait $!; i=$((i+1)); \
        if [ $n -gt 0 ]; then j=$((j+1)); [ $j -ge 30 ] && break; fi; done; echo \"ints=$n\"";
    let mut job = Running::exec(&c, &["ctrl-c", "--", "sh", "-c", script]);
    let pgid = job.line();
    assert_ne!(
        pgid,
        format!("pgid={}", job.pid()),
        "not in redlock's group"
    );
    // What the terminal does on Ctrl-C: INT to every process of the foreground group.
    signal(&format!("-{}", job.pid()), "-INT");
    assert_eq!(
        job.line(),
        "ints=1",
        "the terminal's INT and redlock's copy"
    );
    let status = job.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "the command's own status");
    assert!(!key_anywhere(&c, "ctrl-c"), "released after it exited");
}

#[test]
fn ctrl_z_stops_the_command_with_redlock_and_fg_resumes_both() {
    let c = Cluster::start(3).unwrap();
    let script = "echo $$; i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done";
    let mut job = Running::exec(&c, &["ctrl-z", "--", "sh", "-c", script]);
    let command = job.line();
    // The terminal's Ctrl-Z, then the shell's `fg`: TSTP, then CONT, to redlock's group.
    signal(&format!("-{}", job.pid()), "-TSTP");
    wait_for_state(&job.pid(), true);
    wait_for_state(&command, true);
    signal(&format!("-{}", job.pid()), "-CONT");
    wait_for_state(&job.pid(), false);
    wait_for_state(&command, false);
    signal(&job.pid(), "-TERM");
    let status = job.wait(Duration::from_secs(10));
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "the command died of the TERM passed on"
    );
    assert!(!key_anywhere(&c, "ctrl-z"), "released after it exited");
}

/// Waits at most 5 s for the process `pid` to be stopped (`T`), or not.
fn wait_for_state(pid: &str, stopped: bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command's name, which is in parentheses.
        let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
        if (state == Some('T')) == stopped {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("process {pid} not stopped={stopped} within 5 s");
}

#[test]
fn status_shows_the_holder_release_by_token_frees_it_and_the_holder_is_told() {
    let c = Cluster::start(5).unwrap();
    let script = "echo \"$REDLOCK_TOKEN\"; trap 'exit 0' TERM; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let args = ["ops", "--ttl", "2s", "--", "sh", "-c", script];
    let mut holder = Running::exec(&c, &args);
    let token = holder.line();
    let out = redlock(&c, &["status", "ops", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json = text(&out.stdout);
    assert!(json.contains(&format!(r#""holder":"{token}""#)), "{json}");
    assert!(
        json.contains(r#""agreeing":5"#) && json.contains(r#""quorum":3"#),
        "{json}"
    );
    let out = redlock(&c, &["status", "ops"]);
    let plain = text(&out.stdout);
    assert!(
        plain.contains(&format!("5 of 5 nodes agree on {token}")),
        "{plain}"
    );

    let out = redlock(&c, &["release", "ops", "--token", "someone-else"]);
    assert_eq!(
        out.status.code(),
        Some(NOT_ACQUIRED),
        "{}",
        text(&out.stdout)
    );
    let out = redlock(&c, &["status", "ops", "--json"]);
    assert!(
        text(&out.stdout).contains(&token),
        "a wrong token changes nothing"
    );

    let out = redlock(&c, &["release", "ops", "--token", &token]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).matches(": released").count(),
        5,
        "{}",
        text(&out.stdout)
    );
    let out = redlock(&c, &["status", "ops", "--json"]);
    assert!(
        text(&out.stdout).contains(r#""holder":null"#),
        "{}",
        text(&out.stdout)
    );
    // Its next extension finds the key gone: the holder is told, and says "lost".
    let status = holder.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(LOST));
    assert!(!key_anywhere(&c, "ops"));
}

#[test]
fn a_release_that_fewer_than_a_quorum_answered_is_a_node_error() {
    let c = Cluster::start(3).unwrap();
    c.node(0)
        .command(&["SET", "few", "other", "PX", "30000"])
        .unwrap();
    c.node(1).kill().unwrap();
    c.node(2).kill().unwrap();
    let out = redlock(&c, &["release", "few", "--token", "mine"]);
    let err = fails_with(&out, NODE_ERROR, "only 1 of 3 nodes answered");
    assert!(!err.contains("held nothing"), "{err}");
    // With a quorum answering, nothing held is nothing held.
    c.node(1).restart().unwrap();
    let out = redlock(&c, &["release", "few", "--token", "mine"]);
    fails_with(&out, NOT_ACQUIRED, "the token held nothing");
}

#[test]
fn a_key_that_is_not_a_lock_gets_one_answer_from_status_and_exec() {
    let c = Cluster::start(3).unwrap();
    // Another program keeps a list under the lock's name on every node.
    for node in c.nodes() {
        node.command(&["RPUSH", "listed", "x"]).unwrap();
    }
    let says = "listed holds something that is not a lock on ";
    for args in [
        &["status", "listed"][..],
        &["status", "listed", "--json"][..],
        &["exec", "listed", "--no-wait", "--", "echo", "ran"][..],
        &["exec", "listed", "--wait", "1h", "--", "echo", "ran"][..],
        &["exec", "listed", "--", "echo", "ran"][..],
    ] {
        let out = redlock(&c, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(USAGE), "{args:?}: {err}");
        assert!(
            err.contains(says) && err.contains("another program"),
            "{args:?}: {err}"
        );
        assert!(!text(&out.stdout).contains("ran"), "{args:?}");
    }
    let out = redlock(&c, &["status", "listed", "--json"]);
    assert!(
        text(&out.stdout).contains(r#""state":"not_a_lock""#),
        "{}",
        text(&out.stdout)
    );
    // On one node of three it leaves a quorum: the lock works, status says what is there.
    for node in &c.nodes()[1..] {
        node.command(&["DEL", "listed"]).unwrap();
    }
    let out = redlock(&c, &["status", "listed"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("not a lock: "),
        "{}",
        text(&out.stdout)
    );
    let out = redlock(&c, &["exec", "listed", "--no-wait", "--", "echo", "ran"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ran\n");
}

#[test]
fn a_failed_acquisition_says_could_not_acquire_once() {
    let c = Cluster::start(3).unwrap();
    for node in c.nodes() {
        node.command(&["SET", "once", "other", "PX", "30000"])
            .unwrap();
    }
    for wait in [&["--no-wait"][..], &["--wait", "200ms"][..]] {
        let mut args = vec!["exec", "once"];
        args.extend(wait);
        args.extend(["--", "true"]);
        let out = redlock(&c, &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(NOT_ACQUIRED), "{err}");
        assert!(
            err.starts_with("redlock: could not acquire once: "),
            "{err}"
        );
        assert_eq!(err.matches("could not acquire").count(), 1, "{err}");
        assert!(err.contains("another client holds it"), "{err}");
    }
}

#[test]
fn wait_waits_the_full_time_as_flock_does() {
    let c = Cluster::start(3).unwrap();
    for node in c.nodes() {
        node.command(&["SET", "full", "other", "PX", "30000"])
            .unwrap();
    }
    // Three at once: the old early give-up came 0 to 250 ms before the end.
    let elapsed: Vec<(Duration, Option<i32>)> = thread::scope(|s| {
        let runs: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let started = Instant::now();
                    let out = redlock(&c, &["exec", "full", "--wait", "1s", "--", "true"]);
                    (started.elapsed(), out.status.code())
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for (took, code) in elapsed {
        assert_eq!(code, Some(NOT_ACQUIRED));
        assert!(took >= Duration::from_secs(1), "gave up after {took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
    // A lock freed in the last moment of the wait is taken.
    for node in c.nodes() {
        node.command(&["SET", "full", "other", "PX", "900"])
            .unwrap();
    }
    let out = redlock(&c, &["exec", "full", "--wait", "1s", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn status_of_a_key_without_expiry_says_it_has_none() {
    let c = Cluster::start(3).unwrap();
    for node in c.nodes() {
        node.command(&["SET", "forever", "tok"]).unwrap();
    }
    let out = redlock(&c, &["status", "forever"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("validity: none known: the key has no expiry"),
        "{stdout}"
    );
    let out = redlock(&c, &["status", "forever", "--json"]);
    let json = text(&out.stdout);
    assert!(json.contains(r#""validity_ms":null"#), "{json}");
    assert!(json.contains(r#""no_expiry":true"#), "{json}");
}

#[test]
fn a_demo_that_runs_for_no_time_is_a_usage_error() {
    let out = Command::new(bin())
        .args(["demo", "--duration", "0s"])
        .env_remove("REDLOCK_NODES")
        .output()
        .unwrap();
    fails_with(&out, USAGE, "must be above zero");
    assert!(!text(&out.stdout).contains("FAIL"), "{}", text(&out.stdout));
}

#[test]
fn a_demo_without_a_server_binary_says_what_it_looked_for_and_how_to_provide_one() {
    let demo = |path: &str, server_bin: Option<&str>| {
        let mut command = Command::new(bin());
        command
            .args(["demo", "--duration", "1s"])
            .env_remove("REDLOCK_NODES")
            .env("PATH", path);
        match server_bin {
            Some(server_bin) => command.env("REDLOCK_SERVER_BIN", server_bin),
            None => command.env_remove("REDLOCK_SERVER_BIN"),
        };
        command.output().unwrap()
    };
    // What it looked for, and the three ways out: install one, name one, or bring nodes.
    let err = fails_with(
        &demo("/nonexistent", None),
        NODE_ERROR,
        "no redis-server or valkey-server on PATH",
    );
    for how in [
        "apt-get install redis-server",
        "REDLOCK_SERVER_BIN",
        "--nodes",
    ] {
        assert!(err.contains(how), "{err}");
    }
    let err = fails_with(
        &demo("/nonexistent", Some("/nonexistent/redis-server")),
        NODE_ERROR,
        "REDLOCK_SERVER_BIN=/nonexistent/redis-server cannot be used",
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_redlock_stopped_past_its_validity_loses_the_lock_and_its_command_is_terminated() {
    let c = Cluster::start(3).unwrap();
    let script = "trap 'echo told; exit 0' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let args = [
        "paused", "--ttl", "1s", "--grace", "2s", "--", "sh", "-c", script,
    ];
    let mut first = Running::exec(&c, &args);
    assert_eq!(first.line(), "ready");
    signal(&first.pid(), "-STOP");
    thread::sleep(Duration::from_millis(1500));
    let out = redlock(
        &c,
        &["exec", "paused", "--wait", "10s", "--", "echo", "second"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    signal(&first.pid(), "-CONT");
    assert_eq!(
        first.line(),
        "told",
        "the command is told, not left running"
    );
    let status = first.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(LOST));
    assert!(
        !key_anywhere(&c, "paused"),
        "the second released; the first left nothing"
    );
}

/// A pipe whose reader is gone: every write to it fails with EPIPE.
fn broken_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    writer.into()
}

#[test]
fn a_lost_lock_with_a_broken_stderr_still_tells_the_command() {
    let c = Cluster::start(3).unwrap();
    // The command itself writes nothing to the broken stderr ("Terminated", a shell's note
    // on its killed `sleep`, would kill it with SIGPIPE).
    let script = "exec 2>/dev/null; trap 'echo told; exit 0' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let mut command = Command::new(bin());
    command
        .args([
            "exec",
            "broken-stderr",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            script,
        ])
        .env("REDLOCK_NODES", c.urls().join(","));
    let mut job = Running::spawn_io(command, true, Stdio::piped(), broken_pipe());
    assert_eq!(job.line(), "ready");
    for node in c.nodes() {
        node.command(&["FLUSHALL"]).unwrap();
    }
    assert_eq!(
        job.line(),
        "told",
        "the command is told before anything is said"
    );
    let status = job.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(LOST), "not a panic (101)");
}

#[test]
fn a_closed_stdout_is_no_panic() {
    let c = Cluster::start(3).unwrap();
    c.node(0)
        .command(&["SET", "closed", "someone", "PX", "30000"])
        .unwrap();
    let cases: [(&[&str], i32); 5] = [
        (&["status", "closed"], 0),
        (&["status", "closed", "--json"], 0),
        (&["release", "closed", "--token", "someone"], 0),
        (
            &["release", "closed", "--token", "someone", "--json"],
            NOT_ACQUIRED,
        ),
        (
            &[
                "demo",
                "--duration",
                "300ms",
                "--ttl",
                "500ms",
                "--workers",
                "2",
            ],
            0,
        ),
    ];
    for (args, code) in cases {
        let mut command = Command::new(bin());
        command.args(args).env("REDLOCK_NODES", c.urls().join(","));
        let running = Running::spawn_io(command, false, broken_pipe(), Stdio::piped());
        let out = finish(running, Duration::from_secs(30));
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    }
}

#[test]
fn a_command_that_ends_while_redlock_is_stopped_past_the_validity_is_lost_every_time() {
    let c = Cluster::start(3).unwrap();
    // Six at once: the old random pick said "exited in time" in about 11 runs of 16, so
    // all six right by chance is about 1 in 1000.
    let codes: Vec<Option<i32>> = thread::scope(|s| {
        let runs: Vec<_> = (0..6)
            .map(|i| {
                let c = &c;
                s.spawn(move || {
                    let resource = format!("paused-end-{i}");
                    let script = "echo started; sleep 1.5";
                    let args = [&resource, "--ttl", "1s", "--", "sh", "-c", script];
                    let job = Running::exec(c, &args);
                    assert_eq!(job.line(), "started");
                    thread::sleep(Duration::from_millis(300));
                    // The command ends at 1.5 s, the lock's validity at 1 s: redlock sees
                    // both when it resumes.
                    signal(&job.pid(), "-STOP");
                    thread::sleep(Duration::from_millis(2500));
                    signal(&job.pid(), "-CONT");
                    let out = finish(job, Duration::from_secs(10));
                    if out.status.code() == Some(LOST) {
                        let err = text(&out.stderr);
                        assert!(
                            err.contains(&format!("lost the lock on {resource}")),
                            "{err}"
                        );
                    }
                    out.status.code()
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert!(codes.iter().all(|c| *c == Some(LOST)), "{codes:?}");
}

#[test]
fn max_hold_says_the_lock_was_held_that_long_not_that_an_extension_failed() {
    let c = Cluster::start(3).unwrap();
    let script = "trap 'echo told; exit 0' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let args = [
        "held",
        "--ttl",
        "1s",
        "--max-hold",
        "1s",
        "--",
        "sh",
        "-c",
        script,
    ];
    let job = Running::exec(&c, &args);
    assert_eq!(job.line(), "ready");
    let started = Instant::now();
    assert_eq!(job.line(), "told");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "at --max-hold, then the ttl"
    );
    let out = finish(job, Duration::from_secs(10));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(LOST), "{err}");
    assert!(
        err.contains("held for --max-hold (1s); not extended further"),
        "{err}"
    );
    assert!(!err.contains("before an extension succeeded"), "{err}");
}

#[test]
fn a_lost_lock_with_on_lost_kill_kills_the_command() {
    let c = Cluster::start(3).unwrap();
    let script =
        "trap '' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let args = [
        "killed",
        "--ttl",
        "1s",
        "--on-lost",
        "kill",
        "--",
        "sh",
        "-c",
        script,
    ];
    let mut first = Running::exec(&c, &args);
    assert_eq!(first.line(), "ready");
    for node in c.nodes() {
        node.command(&["FLUSHALL"]).unwrap();
    }
    let status = first.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(LOST));
    assert!(
        !key_anywhere(&c, "paused"),
        "the second released; the first left nothing"
    );
}

#[test]
fn an_extension_refused_for_good_is_lost_at_once_with_what_to_check() {
    let c = Cluster::start(3).unwrap();
    let script = "trap 'echo told; exit 0' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let args = ["refused", "--ttl", "3s", "--", "sh", "-c", script];
    let job = Running::exec(&c, &args);
    assert_eq!(job.line(), "ready");
    // Something else writes the key on a majority: the extension's GET gets WRONGTYPE
    // there, which no retry can heal.
    for node in &c.nodes()[..2] {
        node.command(&["DEL", "refused"]).unwrap();
        node.command(&["RPUSH", "refused", "x"]).unwrap();
    }
    let started = Instant::now();
    assert_eq!(job.line(), "told");
    let out = finish(job, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(LOST), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("refused for good") && err.contains("WRONGTYPE"),
        "{err}"
    );
    assert!(err.contains("check their ACL"), "{err}");
    // At the first extension (a third of the ttl), not at the deadline.
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    let on_third = c.node(2).command(&["EXISTS", "refused"]).unwrap();
    assert_eq!(on_third.as_int(), Some(0), "its own key was released");
}

#[test]
fn every_bad_input_is_the_usage_code_without_a_password() {
    let c = Cluster::start(1).unwrap();
    let cases: [&[&str]; 7] = [
        &[
            "exec",
            "r",
            "--nodes",
            "redis://u:hunter2@h:port",
            "--",
            "true",
        ],
        &["exec", "r", "--ttl", "ten", "--", "true"],
        &["exec", "r", "true"],
        &["exec", "", "--", "true"],
        &["status", ""],
        &["release", "r"],
        &["exec", "r", "--wait", "1s", "--no-wait", "--", "true"],
    ];
    for args in cases {
        let out = redlock(&c, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(USAGE), "{args:?}: {err}");
        assert!(err.starts_with("redlock: "), "{args:?}: {err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
    let out = Command::new(bin())
        .args(["exec", "r", "--", "true"])
        .env_remove("REDLOCK_NODES")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(USAGE));
    assert!(
        text(&out.stderr).contains("no nodes"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_usage_error_shows_clap_s_whole_message_and_no_password() {
    let c = Cluster::start(1).unwrap();
    let out = redlock(&c, &["exec", "--", "true"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{err}");
    assert!(
        err.contains("the following required arguments were not provided:")
            && err.contains("<RESOURCE>")
            && err.contains("Usage: redlock exec"),
        "{err}"
    );
    let out = redlock(&c, &["exec", "r", "--on-lost", "foo", "--", "true"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{err}");
    assert!(
        err.contains("[possible values: term, kill, ignore]"),
        "{err}"
    );
    // What clap quotes from the command line, and the environment --help shows.
    let out = redlock(&c, &["status", "r", "redis://u:hunter2@h:1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{err}");
    assert!(
        err.contains("redis://u:***@h:1") && !err.contains("hunter2"),
        "{err}"
    );
    let out = Command::new(bin())
        .args(["exec", "--help"])
        .env("REDLOCK_NODES", "redis://u:hunter2@h:1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !text(&out.stdout).contains("hunter2"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn unreachable_nodes_are_a_node_error_at_once_even_when_waiting() {
    // Three ports: one server named three times is refused before any connection.
    let refused = redlock_testkit::refused_ports(3).unwrap();
    let nodes = format!("{},{},{}", refused[0], refused[1], refused[2]);
    for wait in [&["--no-wait"][..], &[][..], &["--wait", "1h"][..]] {
        let mut command = Command::new(bin());
        command
            .args(["exec", "r", "--nodes", &nodes])
            .args(wait)
            .args(["--", "true"]);
        // Within 10 s: a wait that retried the unreachable nodes would run for an hour.
        let out = finish(Running::spawn(command, false), Duration::from_secs(10));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(NODE_ERROR), "{wait:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{wait:?}: {err}");
        assert!(err.contains("could not acquire r"), "{wait:?}: {err}");
    }
}

/// One server given as several nodes is no quorum: refused at once, naming both entries.
#[test]
fn one_server_named_twice_is_a_configuration_error() {
    let port = redlock_testkit::refused_port().unwrap().port();
    for nodes in [
        format!("redis://127.0.0.1:{port},127.0.0.1:{port},redis://localhost:{port}"),
        format!("redis://127.0.0.1:{port}/0,redis://127.0.0.1:{port}/1,redis://127.0.0.1:{port}/2"),
    ] {
        let mut command = Command::new(bin());
        command.args(["exec", "r", "--no-wait", "--nodes", &nodes, "--", "true"]);
        let out = finish(Running::spawn(command, false), Duration::from_secs(10));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(USAGE), "{nodes}: {err}");
        assert!(err.contains("same server"), "{nodes}: {err}");
    }
}

#[test]
fn a_configuration_error_says_so_once() {
    let c = Cluster::start(1).unwrap();
    let out = redlock(&c, &["exec", "r", "--ttl", "100ms 500us", "--", "true"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{err}");
    assert_eq!(err.matches("bad configuration").count(), 1, "{err}");
    assert!(err.contains("not whole milliseconds"), "{err}");
}

#[test]
fn a_ttl_too_short_for_the_nodes_to_answer_is_a_usage_error_and_the_minimum_works() {
    let c = Cluster::start(3).unwrap();
    for ttl in ["0s", "3ms", "5ms", "99ms"] {
        for args in [
            &["exec", "short", "--no-wait", "--ttl", ttl, "--", "true"][..],
            &["exec", "short", "--ttl", ttl, "--", "true"][..],
            &["status", "short", "--ttl", ttl][..],
        ] {
            let out = redlock(&c, args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(USAGE), "{args:?}: {err}");
            assert!(
                err.contains("is too short: use at least 100ms"),
                "{args:?}: {err}"
            );
        }
    }
    let out = redlock(
        &c,
        &[
            "exec",
            "short",
            "--ttl",
            "100ms",
            "--",
            "sh",
            "-c",
            "sleep 0.3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = redlock(&c, &["status", "short", "--ttl", "100ms"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn an_unusable_tls_file_is_a_configuration_error() {
    let not_pem = std::env::temp_dir().join(format!("redlock-cli-ca-{}", std::process::id()));
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let cases = [
        ("/nonexistent/redlock/ca.pem", "cannot read the CA file"),
        (not_pem.to_str().unwrap(), "no PEM certificate"),
    ];
    for (ca, says) in cases {
        let nodes = format!("rediss://127.0.0.1:1?ca={ca}");
        for args in [
            &["exec", "r", "--no-wait", "--nodes", &nodes, "--", "true"][..],
            &["status", "r", "--nodes", &nodes][..],
        ] {
            let out = Command::new(bin()).args(args).output().unwrap();
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(USAGE), "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {err}");
        }
    }
    let _ = std::fs::remove_file(&not_pem);
}

#[test]
fn a_grace_too_long_to_count_still_terminates_the_command_of_a_lost_lock() {
    let c = Cluster::start(3).unwrap();
    let script = "trap 'echo told; exit 0' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let args = [
        "grace",
        "--ttl",
        "1s",
        "--grace",
        "500000000000y",
        "--",
        "sh",
        "-c",
        script,
    ];
    let job = Running::exec(&c, &args);
    assert_eq!(job.line(), "ready");
    for node in c.nodes() {
        node.command(&["FLUSHALL"]).unwrap();
    }
    assert_eq!(job.line(), "told");
    let out = finish(job, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(LOST), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_demo_reaches_a_passing_verdict() {
    let out = Command::new(bin())
        .args([
            "demo",
            "--duration",
            "1500ms",
            "--ttl",
            "500ms",
            "--workers",
            "4",
            "--json",
        ])
        .env_remove("REDLOCK_NODES")
        .output()
        .unwrap();
    let json = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{json} {}", text(&out.stderr));
    assert!(json.contains(r#""passed":true"#), "{json}");
}

#[test]
fn the_demo_on_given_nodes_uses_them_kills_none_and_leaves_no_key() {
    let c = Cluster::start(3).unwrap();
    let args = [
        "demo",
        "--duration",
        "1s",
        "--ttl",
        "500ms",
        "--workers",
        "4",
    ];
    let out = redlock(&c, &args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout} {}", text(&out.stderr));
    assert!(stdout.contains("3 lock nodes of yours"), "{stdout}");
    assert!(stdout.contains("none is killed or restarted"), "{stdout}");
    assert!(stdout.contains("PASS") && !stdout.contains("killed and restarted midway"));
    for node in c.nodes() {
        assert!(node.is_running(), "every node still runs");
        let keys = node.command(&["DBSIZE"]).unwrap().as_int();
        assert_eq!(keys, Some(0), "the demo's keys are deleted");
    }
    let mut args = args.to_vec();
    args.extend(["--json", "--nodes", "redis://127.0.0.1:notaport"]);
    let out = redlock(&c, &args);
    assert_eq!(
        out.status.code(),
        Some(USAGE),
        "--nodes wins over REDLOCK_NODES"
    );
}

#[test]
fn the_demo_runs_on_unix_sockets_and_names_the_node_it_cannot_use() {
    let c = Cluster::builder().unix_socket().start().unwrap();
    let urls = c.urls().join(",");
    assert!(urls.starts_with("unix://"), "{urls}");
    let run = [
        "demo",
        "--duration",
        "500ms",
        "--ttl",
        "500ms",
        "--workers",
        "2",
    ];
    let out = Command::new(bin())
        .args(run)
        .args(["--nodes", &urls])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout} {}", text(&out.stderr));
    assert!(stdout.contains("PASS"), "{stdout}");

    // The counter cannot speak TLS: said before anything runs, naming the node.
    let out = Command::new(bin())
        .args(run)
        .args(["--nodes", "rediss://127.0.0.1:7001,127.0.0.1:7002"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{err}");
    assert!(
        err.contains("the counter's node 127.0.0.1:7001 is rediss://"),
        "{err}"
    );
    // A lock node nobody answers on is named, not a verdict about nothing.
    // Three ports: one server named three times is refused before any connection.
    let refused = redlock_testkit::refused_ports(3).unwrap();
    let (r1, r2, r3) = (refused[0], refused[1], refused[2]);
    let out = Command::new(bin())
        .args(run)
        .args(["--nodes", &format!("{urls},{r1},{r2},{r3}")])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(NODE_ERROR), "{err}");
    assert!(err.contains(&format!("{r1}: connection refused")), "{err}");
    assert!(!text(&out.stdout).contains("FAIL"), "{}", text(&out.stdout));
}

#[test]
fn help_documents_every_exit_code() {
    let out = Command::new(bin()).arg("--help").output().unwrap();
    let help = text(&out.stdout);
    for code in ["64", "69", "75", "76", "126/127", "128+N"] {
        assert!(help.contains(code), "{help}");
    }
}

/// `exec --permits K` exits with this when the holders in place use another K.
const PERMITS_MISMATCH: i32 = 78;

/// A directory of its own for one test's marker files, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "redlock-cli-{name}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(dir.join("active")).unwrap();
        Self(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp dir")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn permits_k_never_runs_more_than_k_jobs_at_once_and_some_do_overlap() {
    let c = Cluster::start(3).unwrap();
    let urls = c.urls().join(",");
    let dir = Scratch::new("permits");
    // Each job enters `active` (an atomic mkdir), counts who is there, stays a while and
    // leaves before it exits: an entry lives only while its job holds a permit.
    let script = format!(
        "mkdir {d}/active/$$; ls {d}/active | wc -l >> {d}/seen; sleep 0.2; rmdir {d}/active/$$",
        d = dir.path()
    );
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..4 {
                    let mut command = Command::new(bin());
                    command
                        .args(["exec", "pool", "--permits", "2", "--wait", "25s"])
                        .args(["--", "sh", "-c", &script])
                        .env("REDLOCK_NODES", &urls);
                    let out = finish(Running::spawn(command, false), Duration::from_secs(30));
                    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
                }
            });
        }
    });
    let seen = std::fs::read_to_string(dir.0.join("seen")).unwrap();
    let counts: Vec<usize> = (seen.lines()).map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(counts.len(), 16, "{seen}");
    let max = counts.iter().copied().max().unwrap_or_default();
    assert!(max <= 2, "more than 2 holders at once: {counts:?}");
    assert_eq!(max, 2, "no two jobs ever held together: {counts:?}");
    // pool:permits:limit outlives the last holder until its expiry (SEM_RELEASE leaves it).
    for key in ["pool:permits", "pool"] {
        assert!(!key_anywhere(&c, key), "{key} left behind");
    }
}

/// Whether the events in `log` (`R+ name`, `R- name`, `W+`, `W-`, one a line) ever have a
/// writer together with anyone: the number of readers and writers at each event.
fn check_exclusion(log: &str) {
    let (mut readers, mut writers) = (0_i32, 0_i32);
    for line in log.lines() {
        match line.split_whitespace().next() {
            Some("R+") => readers += 1,
            Some("R-") => readers -= 1,
            Some("W+") => writers += 1,
            Some("W-") => writers -= 1,
            other => panic!("unexpected event {other:?} in {log}"),
        }
        assert!(
            writers == 0 || (writers == 1 && readers == 0),
            "a writer with someone else at {line:?}: {log}"
        );
    }
}

#[test]
fn shared_holders_overlap_and_an_exclusive_one_overlaps_nothing() {
    let c = Cluster::start(3).unwrap();
    let dir = Scratch::new("shared");
    let d = dir.path();
    let writer = format!("echo W+ >> {d}/log; echo held; sleep 0.8; echo W- >> {d}/log");
    // Each reader waits (bounded) for the other's marker: both hold at once, or it exits 3.
    let reader = |me: &str, other: &str| {
        format!(
            "echo 'R+ {me}' >> {d}/log; touch {d}/{me}; i=0; \
             while [ ! -e {d}/{other} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
             [ -e {d}/{other} ] || exit 3; sleep 0.5; echo 'R- {me}' >> {d}/log"
        )
    };
    let mut first = Running::exec(&c, &["doc", "--exclusive", "--", "sh", "-c", &writer]);
    assert_eq!(first.line(), "held");
    let (a, b) = (reader("a", "b"), reader("b", "a"));
    let mut ra = Running::exec(&c, &["doc", "--shared", "--wait", "20s", "-c", &a]);
    let mut rb = Running::exec(&c, &["doc", "-s", "--wait", "20s", "-c", &b]);
    // Once both readers hold, a second writer comes and must wait for both to leave.
    let until = Instant::now() + Duration::from_secs(15);
    while !(dir.0.join("a").exists() && dir.0.join("b").exists()) {
        assert!(Instant::now() < until, "the readers never both held");
        thread::sleep(Duration::from_millis(20));
    }
    let second = format!("echo W+ >> {d}/log; sleep 0.2; echo W- >> {d}/log");
    let out = redlock(&c, &["exec", "doc", "-x", "--wait", "20s", "-c", &second]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (name, running) in [("first", &mut first), ("a", &mut ra), ("b", &mut rb)] {
        let status = running.wait(Duration::from_secs(10));
        assert_eq!(status.code(), Some(0), "{name}: the readers held together");
    }
    let log = std::fs::read_to_string(dir.0.join("log")).unwrap();
    assert_eq!(log.lines().count(), 8, "{log}");
    check_exclusion(&log);
    for key in ["doc", "doc:readers", "doc:writer-waiting"] {
        assert!(!key_anywhere(&c, key), "{key} left behind");
    }
}

#[test]
fn a_permits_mismatch_has_its_own_code_and_names_both_numbers() {
    let c = Cluster::start(3).unwrap();
    let mut first = Running::exec(
        &c,
        &[
            "exports",
            "--permits",
            "2",
            "--",
            "sh",
            "-c",
            "echo held; sleep 30",
        ],
    );
    assert_eq!(first.line(), "held");
    for wait in ["--no-wait", "--wait=20s"] {
        let started = Instant::now();
        let args = [
            "exec",
            "exports",
            "--permits",
            "3",
            wait,
            "--",
            "echo",
            "ran",
        ];
        let out = redlock(&c, &args);
        let err = fails_with(&out, PERMITS_MISMATCH, "could not acquire exports");
        assert!(err.contains("--permits 3"), "{err}");
        assert!(err.contains("--permits 2"), "{err}");
        assert!(text(&out.stdout).is_empty(), "the command did not run");
        // Not retried: the command line is wrong, not unlucky.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{wait}: at once"
        );
    }
    // The same K is one more holder.
    let out = redlock(
        &c,
        &[
            "exec",
            "exports",
            "--permits",
            "2",
            "-n",
            "--",
            "echo",
            "ran",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    signal(&first.pid(), "-TERM");
    first.wait(Duration::from_secs(10));
    assert!(!key_anywhere(&c, "exports:permits"));
}

#[test]
fn the_command_is_told_the_kind_it_holds() {
    let c = Cluster::start(3).unwrap();
    let script = r#"echo "$REDLOCK_KIND|$REDLOCK_PERMITS|$REDLOCK_FENCING_TOKEN""#;
    for (flags, expected) in [
        (&[][..], "mutex||"),
        (&["--shared"][..], "shared||"),
        (&["--exclusive"][..], "exclusive||"),
        (&["--permits", "3"][..], "permits|3|"),
    ] {
        let mut args = vec!["exec", "kind-job"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let out = redlock(&c, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{flags:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stdout).trim(), expected, "{flags:?}");
    }
}

#[test]
fn kind_flags_that_conflict_or_zero_permits_are_usage_errors() {
    let c = Cluster::start(1).unwrap();
    for (flags, needle) in [
        (&["--permits", "0"][..], "at least 1"),
        (&["--permits", "two"][..], "not a number of permits"),
        (&["--shared", "--permits", "2"][..], "cannot be used with"),
        (&["--shared", "--exclusive"][..], "cannot be used with"),
        (&["-x", "--permits", "2"][..], "cannot be used with"),
        (&["--fenced", "--shared"][..], "cannot be used with"),
    ] {
        let mut args = vec!["exec", "r"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "true"]);
        let out = redlock(&c, &args);
        let err = fails_with(&out, USAGE, needle);
        assert!(err.starts_with("redlock: "), "{flags:?}: {err}");
    }
    assert!(!key_anywhere(&c, "r"));
}

#[test]
fn help_documents_the_kinds_their_code_and_the_semaphore_s_quorum() {
    let out = Command::new(bin()).arg("--help").output().unwrap();
    assert!(text(&out.stdout).contains("78"), "{}", text(&out.stdout));
    let out = Command::new(bin())
        .args(["exec", "--help"])
        .output()
        .unwrap();
    let help = text(&out.stdout);
    for needle in [
        "--shared",
        "--exclusive",
        "--permits <K>",
        "floor(K*N/(K+1)) + 1",
        "REDLOCK_KIND",
        "REDLOCK_PERMITS",
        // Several names: the multi-resource lock, with an example.
        "redlock exec [OPTIONS] <RESOURCE>...",
        "redlock exec account:3 account:7 -- ./transfer.sh 3 7",
        "REDLOCK_RESOURCES",
        "multi (several names)",
        "all at once or none",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

#[test]
fn permits_k_with_too_few_nodes_for_its_quorum_is_a_node_error_at_once() {
    let c = Cluster::start(2).unwrap();
    // Two nodes up of three: a majority, but a semaphore of 2 permits on 3 nodes needs all 3.
    let refused = redlock_testkit::refused_port().unwrap();
    let nodes = format!("{},{refused}", c.urls().join(","));
    let run = |flags: &[&str]| {
        let mut command = Command::new(bin());
        command
            .args(["exec", "r", "--nodes", &nodes, "--wait", "1h"])
            .args(flags)
            .args(["--", "true"]);
        finish(Running::spawn(command, false), Duration::from_secs(10))
    };
    let out = run(&["--permits", "2"]);
    let err = fails_with(
        &out,
        NODE_ERROR,
        "could not acquire r: only 2 of 3 nodes answered",
    );
    assert!(err.contains("--permits 2 needs 3 of the 3 nodes"), "{err}");
    // A majority is enough for a single permit and for the other kinds.
    for flags in [&["--permits", "1"][..], &["--shared"][..], &[][..]] {
        let out = run(flags);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{flags:?}: {}",
            text(&out.stderr)
        );
    }
}

// Several resources in one `exec`: a multi-resource lock (docs/kinds.md, "Multi-resource
// lock"), the mutex key of every name, all taken at once or none.

/// Asserts that no node keeps any of `names`.
fn none_left(c: &Cluster, names: &[&str]) {
    for name in names {
        assert!(!key_anywhere(c, name), "{name} left behind");
    }
}

#[test]
fn multi_execs_sharing_a_name_never_overlap_and_ones_on_disjoint_sets_do() {
    let c = Cluster::start(3).unwrap();
    let urls = c.urls().join(",");
    let dir = Scratch::new("multi");
    let d = dir.path();
    // Every two of these sets share a name, each given in its own order: a job enters
    // `active` (an atomic mkdir), counts who is there, stays a while and leaves.
    let script = format!(
        "mkdir {d}/active/$$; ls {d}/active | wc -l >> {d}/seen; sleep 0.2; rmdir {d}/active/$$"
    );
    let sets: [&[&str]; 3] = [&["p", "q"], &["r", "q"], &["p", "r", "q"]];
    thread::scope(|s| {
        for set in sets {
            let (script, urls) = (&script, &urls);
            s.spawn(move || {
                for _ in 0..4 {
                    let mut command = Command::new(bin());
                    command
                        .arg("exec")
                        .args(set)
                        .args(["--wait", "25s", "-c", script])
                        .env("REDLOCK_NODES", urls);
                    let out = finish(Running::spawn(command, false), Duration::from_secs(30));
                    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
                }
            });
        }
    });
    let seen = std::fs::read_to_string(dir.0.join("seen")).unwrap();
    let counts: Vec<usize> = (seen.lines()).map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(counts.len(), 12, "{seen}");
    assert!(
        counts.iter().all(|n| *n == 1),
        "two held at once: {counts:?}"
    );

    // Disjoint sets: each job waits (bounded) for the other's marker, so both exit 0 only
    // if they held at once.
    let job = |me: &str, other: &str| {
        format!(
            "touch {d}/{me}; i=0; \
             while [ ! -e {d}/{other} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
             [ -e {d}/{other} ] || exit 3"
        )
    };
    let (one, two) = (job("one", "two"), job("two", "one"));
    let mut first = Running::exec(&c, &["a", "b", "--wait", "20s", "-c", &one]);
    let mut second = Running::exec(&c, &["d", "c", "--wait", "20s", "-c", &two]);
    for (name, running) in [("{a, b}", &mut first), ("{c, d}", &mut second)] {
        let status = running.wait(Duration::from_secs(20));
        assert_eq!(
            status.code(),
            Some(0),
            "{name}: disjoint sets held together"
        );
    }
    none_left(&c, &["p", "q", "r", "a", "b", "c", "d"]);
}

#[test]
fn a_single_name_exec_conflicts_with_a_multi_exec_on_that_name_and_back() {
    let c = Cluster::start(3).unwrap();
    let mut multi = Running::exec(&c, &["m1", "m2", "-c", "echo held; sleep 30"]);
    assert_eq!(multi.line(), "held");
    for args in [
        &["exec", "m2", "-n", "--", "echo", "ran"][..],
        &["exec", "m1", "--exclusive", "-n", "--", "echo", "ran"][..],
        &["exec", "m3", "m2", "-n", "--", "echo", "ran"][..],
        &["exec", "m1", "--wait", "300ms", "-c", "echo ran"][..],
    ] {
        let out = redlock(&c, args);
        fails_with(&out, NOT_ACQUIRED, "another client holds it");
        assert!(text(&out.stdout).is_empty(), "{args:?}: the command ran");
    }
    // -E applies to a multi-lock too; the failed attempt kept none of its names.
    let out = redlock(&c, &["exec", "m2", "m3", "-n", "-E", "1", "--", "true"]);
    fails_with(&out, 1, "could not acquire m2, m3: another client holds it");
    none_left(&c, &["m3"]);
    let out = redlock(&c, &["exec", "m3", "-n", "--", "echo", "ran"]);
    assert_eq!(text(&out.stdout), "ran\n", "{}", text(&out.stderr));
    signal(&multi.pid(), "-TERM");
    multi.wait(Duration::from_secs(10));
    none_left(&c, &["m1", "m2", "m3"]);

    // A plain exec on one name keeps a multi-lock of it out, and the multi-lock leaves
    // nothing on its other names.
    let mut single = Running::exec(&c, &["m2", "-c", "echo held; sleep 30"]);
    assert_eq!(single.line(), "held");
    let out = redlock(&c, &["exec", "m1", "m2", "m3", "-n", "--", "echo", "ran"]);
    fails_with(&out, NOT_ACQUIRED, "could not acquire m1, m2, m3");
    none_left(&c, &["m1", "m3"]);
    signal(&single.pid(), "-TERM");
    single.wait(Duration::from_secs(10));
    none_left(&c, &["m1", "m2", "m3"]);
}

#[test]
fn a_multi_exec_tells_its_command_every_name_and_nothing_of_an_outer_exec() {
    let c = Cluster::start(3).unwrap();
    let script = r#"printf '%s|%s|%s|%s' "$REDLOCK_KIND" "${REDLOCK_RESOURCE-none}" "$REDLOCK_RESOURCES" "${REDLOCK_PERMITS-none}"
printf '%s\n' "$REDLOCK_RESOURCES" | while IFS= read -r name; do printf '|<%s>' "$name"; done"#;
    // As an outer `exec --permits 2 x` would have left them for a nested one.
    let mut command = Command::new(bin());
    command
        .args(["exec", "b c", "a", "b c", "-c", script])
        .env("REDLOCK_NODES", c.urls().join(","))
        .env("REDLOCK_RESOURCE", "outer")
        .env("REDLOCK_PERMITS", "2");
    let out = finish(Running::spawn(command, false), Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Sorted by bytes, each once, one a line.
    assert_eq!(text(&out.stdout), "multi|none|a\nb c|none|<a>|<b c>");
    // One name is REDLOCK_RESOURCE, as before, and an outer multi-lock's list is not passed on.
    let script = r#"printf '%s|%s' "$REDLOCK_RESOURCE" "${REDLOCK_RESOURCES-none}""#;
    let mut command = Command::new(bin());
    command
        .args(["exec", "one", "-c", script])
        .env("REDLOCK_NODES", c.urls().join(","))
        .env("REDLOCK_RESOURCES", "x\ny");
    let out = finish(Running::spawn(command, false), Duration::from_secs(30));
    assert_eq!(text(&out.stdout), "one|none", "{}", text(&out.stderr));
    none_left(&c, &["a", "b c", "one"]);
}

#[test]
fn several_names_with_a_kind_flag_one_name_repeated_or_a_newline_are_usage_errors() {
    let c = Cluster::start(1).unwrap();
    for (args, needle) in [
        (
            &["a", "b", "--shared"][..],
            "--shared takes one resource, and 2 were named: a lock of several resources is exclusive on every name",
        ),
        (
            &["a", "b", "c", "-x"][..],
            "--exclusive takes one resource, and 3 were named",
        ),
        (
            &["a", "b", "--permits", "2"][..],
            "--permits takes one resource",
        ),
        (&["a", "b", "--fenced"][..], "--fenced takes one resource"),
        (
            &["dup", "dup"][..],
            r#""dup" is named 2 times and nothing else"#,
        ),
        (&["a", "b\nc"][..], r#"the resource "b\nc" holds a newline"#),
        (&["a", ""][..], "the resource is empty"),
    ] {
        let mut argv = vec!["exec"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--", "echo", "ran"]);
        let out = redlock(&c, &argv);
        let err = fails_with(&out, USAGE, needle);
        assert!(err.starts_with("redlock: "), "{args:?}: {err}");
        assert!(text(&out.stdout).is_empty(), "{args:?}: the command ran");
    }
    // Without `--`, the names and the command cannot be told apart: the usual message.
    let out = redlock(&c, &["exec", "a", "b", "echo", "ran"]);
    fails_with(&out, USAGE, "exec needs `--` before the command");
    // A name given again among others is locked once.
    let script = r#"printf '%s' "$REDLOCK_RESOURCES""#;
    let out = redlock(&c, &["exec", "b", "a", "b", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "a\nb");
    none_left(&c, &["a", "b", "dup"]);
}

#[test]
fn a_multi_exec_looks_at_every_name_and_its_quorum_before_waiting() {
    let c = Cluster::start(2).unwrap();
    // Another program keeps a list under one of the names on every node.
    for node in c.nodes() {
        node.command(&["RPUSH", "listy", "x"]).unwrap();
    }
    let args = ["exec", "fine", "listy", "--wait", "1h", "--", "echo", "ran"];
    let out = redlock(&c, &args);
    fails_with(
        &out,
        USAGE,
        "could not acquire fine, listy: listy holds something that is not a lock",
    );
    none_left(&c, &["fine"]);
    // Two nodes up of three: a majority, which is a multi-lock's quorum too.
    let refused = redlock_testkit::refused_port().unwrap();
    let nodes = format!("{},{refused}", c.urls().join(","));
    let out = redlock(
        &c,
        &[
            "exec", "x", "y", "--nodes", &nodes, "--wait", "1h", "--", "echo", "ran",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ran\n");
    none_left(&c, &["x", "y"]);
    // One node up of three: not acquired, said at once although it would wait.
    c.node(1).kill().unwrap();
    let out = redlock(
        &c,
        &[
            "exec", "x", "y", "--nodes", &nodes, "--wait", "1h", "--", "echo", "ran",
        ],
    );
    fails_with(
        &out,
        NODE_ERROR,
        "could not acquire x, y: only 1 of 3 nodes answered (a quorum is 2)",
    );
    let left = c.node(0).command(&["EXISTS", "x", "y"]).unwrap().as_int();
    assert_eq!(left, Some(0), "x or y left behind");
}

#[test]
fn a_multi_exec_is_extended_while_its_job_runs_and_stops_at_max_hold() {
    let c = Cluster::start(3).unwrap();
    // A job that outlives several ttls is still covered: extensions renew every name.
    let out = redlock(
        &c,
        &["exec", "e1", "e2", "--ttl", "300ms", "--", "sleep", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let script = "trap 'echo told; exit 0' TERM; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";
    let args = ["e1", "e2", "--ttl", "1s", "--max-hold", "1s", "-c", script];
    let job = Running::exec(&c, &args);
    assert_eq!(job.line(), "ready");
    assert_eq!(job.line(), "told");
    let out = finish(job, Duration::from_secs(10));
    fails_with(
        &out,
        LOST,
        "lost the lock on e1, e2 while the command ran: held for --max-hold (1s)",
    );
    none_left(&c, &["e1", "e2"]);
}

// ---- `redlock status` of the shared kinds: readers, a waiting writer, permit holders ----

/// A job that prints its token, then holds until `done` appears in `dir` (at most 15 s).
fn holder_script(dir: &Scratch) -> String {
    format!(
        "echo \"$REDLOCK_TOKEN\"; i=0; \
         while [ ! -e {d}/done ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done",
        d = dir.path()
    )
}

/// Lets every [`holder_script`] job go, and checks each exited 0.
fn let_go(dir: &Scratch, jobs: Vec<Running>) {
    std::fs::write(dir.0.join("done"), "").unwrap();
    for mut job in jobs {
        let status = job.wait(Duration::from_secs(10));
        assert_eq!(status.code(), Some(0), "a holder let go");
    }
}

#[test]
fn status_shows_two_readers_on_a_quorum() {
    let c = Cluster::start(3).unwrap();
    let dir = Scratch::new("status-readers");
    // Nothing shared yet: the report reads as a plain mutex's always did.
    let out = redlock(&c, &["status", "doc"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plain = text(&out.stdout);
    assert!(
        !plain.contains("readers") && !plain.contains("permits"),
        "{plain}"
    );
    let json = text(&redlock(&c, &["status", "doc", "--json"]).stdout);
    assert!(
        !json.contains("readers") && !json.contains("writer_waiting"),
        "{json}"
    );

    let script = holder_script(&dir);
    let jobs: Vec<Running> = (0..2)
        .map(|_| Running::exec(&c, &["doc", "--shared", "--", "sh", "-c", &script]))
        .collect();
    let tokens: Vec<String> = jobs.iter().map(Running::line).collect();
    let out = redlock(&c, &["status", "doc"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(
        report.contains("quorum: none"),
        "no exclusive holder: {report}"
    );
    assert!(report.contains("\nreaders:\n"), "{report}");
    assert!(
        report.contains("readers on a quorum (2 of 3): "),
        "{report}"
    );
    // An attempt is decided at a quorum: a node may answer after the job starts.
    let quorum_line = (report.lines())
        .find(|l| l.starts_with("readers on a quorum"))
        .unwrap_or_default();
    for token in &tokens {
        assert!(quorum_line.contains(&format!("{token} on ")), "{report}");
        // Listed on the line of each node that holds it too.
        assert!(report.matches(token.as_str()).count() >= 3, "{report}");
    }
    let json = text(&redlock(&c, &["status", "doc", "--json"]).stdout);
    assert!(
        json.contains(r#""readers":{"quorum":2,"holders":[{"token":""#),
        "{json}"
    );
    for token in &tokens {
        assert!(
            json.contains(&format!(r#""token":"{token}","nodes":"#)),
            "{json}"
        );
    }
    assert!(!json.contains("permits"), "{json}");
    let_go(&dir, jobs);
}

#[test]
fn status_shows_a_waiting_writers_mark() {
    let c = Cluster::start(3).unwrap();
    let dir = Scratch::new("status-mark");
    let script = holder_script(&dir);
    let reader = Running::exec(&c, &["doc", "--shared", "--", "sh", "-c", &script]);
    let reader_token = reader.line();
    // A writer waits behind the reader: it leaves its mark, so no new reader gets in.
    let mut writer = Running::exec(
        &c,
        &[
            "doc",
            "--exclusive",
            "--wait",
            "20s",
            "-q",
            "--",
            "echo",
            "wrote",
        ],
    );
    let until = Instant::now() + Duration::from_secs(10);
    let report = loop {
        let report = text(&redlock(&c, &["status", "doc"]).stdout);
        if report.contains("writer waiting: ") {
            break report;
        }
        assert!(Instant::now() < until, "no mark within 10 s: {report}");
        thread::sleep(Duration::from_millis(50));
    };
    assert!(report.contains("\nwriter waiting:\n"), "{report}");
    assert!(report.contains("(no new reader gets in there)"), "{report}");
    assert!(report.contains(&format!("{reader_token} on ")), "{report}");
    let json = text(&redlock(&c, &["status", "doc", "--json"]).stdout);
    assert!(
        json.contains(r#""writer_waiting":{"mark":{"token":""#),
        "{json}"
    );
    assert!(json.contains(r#""state":"held""#), "{json}");
    let_go(&dir, vec![reader]);
    assert_eq!(writer.wait(Duration::from_secs(15)).code(), Some(0));
    assert_eq!(writer.line(), "wrote");
}

#[test]
fn status_shows_permit_holders_and_k() {
    let c = Cluster::start(3).unwrap();
    let dir = Scratch::new("status-permits");
    let script = holder_script(&dir);
    let jobs: Vec<Running> = (0..2)
        .map(|_| Running::exec(&c, &["pool", "--permits", "3", "--", "sh", "-c", &script]))
        .collect();
    let tokens: Vec<String> = jobs.iter().map(Running::line).collect();
    let out = redlock(&c, &["status", "pool"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("\npermits (k = 3):\n"), "{report}");
    // k = 3 on 3 nodes: floor(9/4) + 1 = 3.
    assert!(
        report.contains("permits on the semaphore's quorum (3 of 3): "),
        "{report}"
    );
    for token in &tokens {
        assert!(
            report.contains(&format!("{token} on 3 of 3 nodes")),
            "{report}"
        );
    }
    assert!(!report.contains("readers"), "{report}");
    let json = text(&redlock(&c, &["status", "pool", "--json"]).stdout);
    assert!(
        json.contains(r#""permits":{"limit":3,"quorum":3,"holders":["#),
        "{json}"
    );
    for token in &tokens {
        assert!(
            json.contains(&format!(r#""token":"{token}","nodes":3,"#)),
            "{json}"
        );
    }
    let_go(&dir, jobs);
}
