//! Node settings shared by a cluster and their rendering as a server config file: loopback
//! only, persistence and credentials as asked. Which options exist is the builder's concern.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::ServerBin;

/// Settings shared by all nodes of a cluster; built by [`ClusterBuilder`](crate::ClusterBuilder).
#[derive(Debug, Clone)]
pub(crate) struct NodeConfig {
    pub(crate) bin: ServerBin,
    pub(crate) aof: bool,
    pub(crate) auth: Auth,
    pub(crate) start_timeout: Duration,
    pub(crate) command_timeout: Duration,
}

impl NodeConfig {
    /// The config file for a node on `port` keeping its data in `data_dir`.
    pub(crate) fn render(&self, port: u16, data_dir: &Path) -> String {
        render(self.aof, &self.auth, self.bin.major(), port, data_dir)
    }
}

/// How clients must authenticate.
#[derive(Debug, Clone, Default)]
pub(crate) enum Auth {
    /// Anyone on loopback may run any command.
    #[default]
    None,
    /// `requirepass`: clients send `AUTH password`.
    Password(String),
    /// An ACL user with all permissions; the default user is off.
    User { name: String, password: String },
}

/// The config file: bound to 127.0.0.1 only, logging to stdout (which the node redirects to
/// a file), no RDB snapshots, and AOF with `appendfsync always` only when asked.
fn render(aof: bool, auth: &Auth, major: u32, port: u16, data_dir: &Path) -> String {
    let mut out = String::new();
    let mut line = |l: &str| {
        out.push_str(l);
        out.push('\n');
    };
    line("bind 127.0.0.1");
    line(&format!("port {port}"));
    line(&format!("dir {}", quote(&data_dir.to_string_lossy())));
    line("daemonize no");
    line("logfile \"\"");
    line("save \"\"");
    if aof {
        line("appendonly yes");
        line("appendfsync always");
    } else {
        line("appendonly no");
    }
    // Redis 7 and Valkey refuse DEBUG (tests use DEBUG SLEEP) unless enabled; Redis 6 does
    // not know the option and would refuse to start.
    if major >= 7 {
        line("enable-debug-command yes");
    }
    match auth {
        Auth::None => {}
        Auth::Password(pass) => line(&format!("requirepass {}", quote(pass))),
        Auth::User { name, password } => {
            // With the default user off, unauthenticated connections get NOAUTH.
            line("user default off");
            let rule = quote(&format!(">{password}"));
            line(&format!("user {} on {rule} ~* &* +@all", quote(name)));
        }
    }
    out
}

/// Double-quotes a config value, escaping what the server's argument splitter would eat.
fn quote(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' | '\\' => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\{c}");
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(aof: bool, auth: &Auth, major: u32) -> Vec<String> {
        render(aof, auth, major, 6390, Path::new("/tmp/x y/data"))
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn default_is_loopback_without_persistence() {
        let conf = lines(false, &Auth::None, 7);
        for want in [
            "bind 127.0.0.1",
            "port 6390",
            "dir \"/tmp/x y/data\"",
            "save \"\"",
            "appendonly no",
            "enable-debug-command yes",
        ] {
            assert!(
                conf.iter().any(|l| l == want),
                "{want} missing from {conf:?}"
            );
        }
        assert!(!conf.iter().any(|l| l.contains("appendfsync")));
        assert!(
            !conf
                .iter()
                .any(|l| l.contains("requirepass") || l.contains("user"))
        );
    }

    #[test]
    fn aof_fsyncs_every_write() {
        let conf = lines(true, &Auth::None, 7);
        assert!(conf.contains(&"appendonly yes".to_owned()));
        assert!(conf.contains(&"appendfsync always".to_owned()));
    }

    #[test]
    fn old_servers_get_no_debug_option() {
        let conf = lines(false, &Auth::None, 6);
        assert!(!conf.iter().any(|l| l.starts_with("enable-debug-command")));
    }

    #[test]
    fn credentials_are_quoted() {
        let conf = lines(false, &Auth::Password("a \"b\"\\".to_owned()), 7);
        assert!(
            conf.contains(&r#"requirepass "a \"b\"\\""#.to_owned()),
            "{conf:?}"
        );
        let user = Auth::User {
            name: "locker".to_owned(),
            password: "p w".to_owned(),
        };
        let conf = lines(false, &user, 7);
        assert!(conf.contains(&"user default off".to_owned()));
        assert!(conf.contains(&r#"user "locker" on ">p w" ~* &* +@all"#.to_owned()));
    }

    #[test]
    fn quote_escapes_line_breaks() {
        assert_eq!(quote("a\nb\rc"), r#""a\nb\rc""#);
    }
}
