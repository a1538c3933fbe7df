//! Node settings shared by a cluster and their rendering as a server config file: loopback
//! only, persistence, credentials and denied commands as asked. Which options exist is the
//! builder's concern.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::{ServerBin, ServerCert, TlsCerts};

/// Settings shared by all nodes of a cluster; built by [`ClusterBuilder`](crate::ClusterBuilder).
#[derive(Debug, Clone)]
pub(crate) struct NodeConfig {
    pub(crate) bin: ServerBin,
    pub(crate) aof: bool,
    pub(crate) auth: Auth,
    /// Commands taken away from the user clients log in as (lowercase names).
    pub(crate) deny: Vec<String>,
    pub(crate) start_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// A TLS port besides the plain one (which the kit itself uses).
    pub(crate) tls: Option<NodeTls>,
    /// A unix socket instead of any TCP port.
    pub(crate) unix: bool,
    /// A unix socket besides the TCP port.
    pub(crate) unix_too: bool,
}

/// A TLS listener's certificates, and whether clients must present one of their own.
#[derive(Debug, Clone)]
pub(crate) struct NodeTls {
    pub(crate) certs: Arc<TlsCerts>,
    pub(crate) client_cert: bool,
    /// Which certificate the TLS port presents.
    pub(crate) server_cert: ServerCert,
}

impl NodeConfig {
    /// The config file for a node on `port` (and `tls_port` if TLS, or only the unix socket
    /// `socket` if asked) keeping its data in `data_dir`.
    pub(crate) fn render(
        &self,
        port: u16,
        tls_port: u16,
        socket: &Path,
        data_dir: &Path,
    ) -> String {
        let mut out = render(
            &Access {
                auth: &self.auth,
                deny: &self.deny,
            },
            self.aof,
            self.bin.major(),
            if self.unix { 0 } else { port },
            data_dir,
        );
        let mut line = |l: String| {
            out.push_str(&l);
            out.push('\n');
        };
        if let Some(tls) = &self.tls {
            let path = |p: &Path| quote(&p.to_string_lossy());
            line(format!("tls-port {tls_port}"));
            let (cert, key) = tls.certs.server_files(tls.server_cert);
            line(format!("tls-cert-file {}", path(&cert)));
            line(format!("tls-key-file {}", path(&key)));
            line(format!("tls-ca-cert-file {}", path(&tls.certs.ca())));
            let auth = if tls.client_cert { "yes" } else { "no" };
            line(format!("tls-auth-clients {auth}"));
        }
        if self.unix || self.unix_too {
            line(format!("unixsocket {}", quote(&socket.to_string_lossy())));
            line("unixsocketperm 700".to_owned());
        }
        out
    }

    /// The credentials the kit itself logs in with: its admin user when commands are
    /// denied (so the test can still run them), else the clients' own, if any.
    pub(crate) fn kit_login(&self) -> Option<(Option<&str>, &str)> {
        kit_login(&self.auth, &self.deny)
    }
}

/// `(user, password)` for [`NodeConfig::kit_login`].
fn kit_login<'a>(auth: &'a Auth, deny: &[String]) -> Option<(Option<&'a str>, &'a str)> {
    if !deny.is_empty() {
        return Some((Some(ADMIN_USER), ADMIN_PASSWORD));
    }
    match auth {
        Auth::None => None,
        Auth::Password(pass) => Some((None, pass)),
        Auth::User { name, password } => Some((Some(name), password)),
    }
}

/// The kit's own user when commands are denied to the clients' user: every permission.
/// Loopback test servers only, so a fixed password does no harm.
pub(crate) const ADMIN_USER: &str = "redlock-testkit-admin";
const ADMIN_PASSWORD: &str = "redlock-testkit-admin-password";

/// Who may connect and run what.
struct Access<'a> {
    auth: &'a Auth,
    deny: &'a [String],
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
/// a file), no RDB snapshots, AOF with `appendfsync always` only when asked, and replication
/// without the diskless-sync delay (a replica is in sync at once).
fn render(access: &Access<'_>, aof: bool, major: u32, port: u16, data_dir: &Path) -> String {
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
    line("repl-diskless-sync-delay 0");
    // Redis 7 and Valkey refuse DEBUG (tests use DEBUG SLEEP) unless enabled; Redis 6 does
    // not know the option and would refuse to start.
    if major >= 7 {
        line("enable-debug-command yes");
    }
    // `-set -evalsha`: ACL rules that take the denied commands away.
    let denied: String = access.deny.iter().map(|c| format!(" -{c}")).collect();
    match access.auth {
        Auth::None if denied.is_empty() => {}
        Auth::None => line(&format!("user default on nopass ~* &* +@all{denied}")),
        Auth::Password(pass) if denied.is_empty() => {
            line(&format!("requirepass {}", quote(pass)));
        }
        Auth::Password(pass) => {
            let rule = quote(&format!(">{pass}"));
            line(&format!("user default on {rule} ~* &* +@all{denied}"));
        }
        Auth::User { name, password } => {
            // With the default user off, unauthenticated connections get NOAUTH.
            line("user default off");
            let rule = quote(&format!(">{password}"));
            line(&format!(
                "user {} on {rule} ~* &* +@all{denied}",
                quote(name)
            ));
        }
    }
    if !denied.is_empty() {
        let rule = quote(&format!(">{ADMIN_PASSWORD}"));
        line(&format!("user {ADMIN_USER} on {rule} ~* &* +@all"));
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
        denying(auth, &[], aof, major)
    }

    fn denying(auth: &Auth, deny: &[&str], aof: bool, major: u32) -> Vec<String> {
        let deny: Vec<String> = deny.iter().map(|c| (*c).to_owned()).collect();
        let access = Access { auth, deny: &deny };
        render(&access, aof, major, 6390, Path::new("/tmp/x y/data"))
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
            "repl-diskless-sync-delay 0",
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

    /// Denied commands go to the user clients log in as (the default user without
    /// credentials or with a password, else the ACL user), and an admin user with every
    /// permission is added for the kit.
    #[test]
    fn denied_commands_are_taken_from_the_clients_user() {
        let admin = format!("user {ADMIN_USER} on \">{ADMIN_PASSWORD}\" ~* &* +@all");
        let conf = denying(&Auth::None, &["set", "evalsha"], false, 7);
        assert!(conf.contains(&"user default on nopass ~* &* +@all -set -evalsha".to_owned()));
        assert!(conf.contains(&admin), "{conf:?}");
        let conf = denying(&Auth::Password("pw".to_owned()), &["set"], false, 7);
        assert!(conf.contains(&r#"user default on ">pw" ~* &* +@all -set"#.to_owned()));
        assert!(
            !conf.iter().any(|l| l.starts_with("requirepass")),
            "{conf:?}"
        );
        assert!(conf.contains(&admin), "{conf:?}");
        let user = Auth::User {
            name: "locker".to_owned(),
            password: "pw".to_owned(),
        };
        let conf = denying(&user, &["evalsha"], false, 7);
        assert!(conf.contains(&"user default off".to_owned()));
        assert!(conf.contains(&r#"user "locker" on ">pw" ~* &* +@all -evalsha"#.to_owned()));
        assert!(conf.contains(&admin), "{conf:?}");
        // Nothing denied: no admin user, and the kit logs in as the clients do.
        assert!(
            !lines(false, &user, 7)
                .iter()
                .any(|l| l.contains(ADMIN_USER))
        );
    }

    #[test]
    fn the_kit_logs_in_as_admin_only_when_commands_are_denied() {
        let user = Auth::User {
            name: "locker".to_owned(),
            password: "pw".to_owned(),
        };
        let set = ["set".to_owned()];
        assert_eq!(kit_login(&Auth::None, &[]), None);
        assert_eq!(
            kit_login(&Auth::Password("pw".to_owned()), &[]),
            Some((None, "pw"))
        );
        assert_eq!(kit_login(&user, &[]), Some((Some("locker"), "pw")));
        for auth in [Auth::None, Auth::Password("pw".to_owned()), user] {
            assert_eq!(
                kit_login(&auth, &set),
                Some((Some(ADMIN_USER), ADMIN_PASSWORD))
            );
        }
    }

    #[test]
    fn quote_escapes_line_breaks() {
        assert_eq!(quote("a\nb\rc"), r#""a\nb\rc""#);
    }
}
