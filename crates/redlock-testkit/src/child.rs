//! One test of the running test binary, run again in a child process that the test can stop
//! (SIGSTOP), resume and talk to over its stdin and stdout: a lock holder paused for real,
//! not a thread that sleeps. Every wait is bounded, and the child is killed on drop.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use crate::Error;
use crate::process::{signal, wait_stopped};

/// The calling test, run again in a child process with an environment variable that tells
/// it to play its part (see [`ChildTest::spawn`]).
#[derive(Debug)]
pub struct ChildTest {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl ChildTest {
    /// Runs the current test (named by its thread, as libtest names each test's thread) in
    /// a child run of this binary, with `var` set to `value`. The test MUST check `var`
    /// first and, when it is set, play the child's part and return.
    pub fn spawn(var: &str, value: &str) -> Result<Self, Error> {
        let current = thread::current();
        let test = current
            .name()
            .filter(|name| *name != "main")
            .ok_or_else(|| Error::Config("ChildTest::spawn outside a libtest test".into()))?;
        let exe = std::env::current_exe().map_err(|e| Error::io("finding the test binary", e))?;
        let mut child = Command::new(exe)
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(var, value)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io(format!("running {test} in a child process"), e))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        // The child's lines, read on a thread so that every wait in `line` is bounded.
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
        })
    }

    /// The rest of the first line the child prints after `prefix` (anywhere in the line: the
    /// test harness may print the test's name before it), waiting at most `within`.
    pub fn line(&self, prefix: &str, within: Duration) -> Result<String, Error> {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                break;
            };
            if let Some(at) = line.find(prefix) {
                return Ok(line[at + prefix.len()..].trim().to_owned());
            }
        }
        Err(Error::Config(format!(
            "the child did not print {prefix:?} within {within:?}"
        )))
    }

    /// Sends one line to the child's stdin.
    pub fn send_line(&mut self, line: &str) -> Result<(), Error> {
        let stdin = self.stdin.as_mut().expect("stdin is kept until drop");
        writeln!(stdin, "{line}").map_err(|e| Error::io("writing to the child", e))
    }

    /// Stops the child (SIGSTOP) and returns once the kernel shows it stopped.
    pub fn pause(&self) -> Result<(), Error> {
        signal(self.child.id(), "STOP")?;
        wait_stopped(self.child.id(), true, Duration::from_secs(2));
        Ok(())
    }

    /// Lets a stopped child run on (SIGCONT).
    pub fn resume(&self) -> Result<(), Error> {
        signal(self.child.id(), "CONT")?;
        wait_stopped(self.child.id(), false, Duration::from_secs(2));
        Ok(())
    }

    /// Waits at most `within` for the child to exit; whether it exited successfully. A
    /// child still running then is killed and counts as a failure.
    pub fn wait(mut self, within: Duration) -> Result<bool, Error> {
        let deadline = Instant::now() + within;
        loop {
            let status = self.child.try_wait();
            match status.map_err(|e| Error::io("waiting for the child", e))? {
                Some(status) => return Ok(status.success()),
                None if Instant::now() >= deadline => return Ok(false),
                None => thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

impl Drop for ChildTest {
    fn drop(&mut self) {
        // Best effort: a stopped child is resumed so that SIGKILL ends it at once.
        let _ = signal(self.child.id(), "CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
