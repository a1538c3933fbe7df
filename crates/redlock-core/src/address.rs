//! Node addresses as users write them: `redis://[user:password@]host:port[/db]` or a bare
//! `host:port`, parsed once here so that every driver accepts the same strings.
//!
//! Parsing is pure; resolving the host and connecting is the driver's job.

use std::fmt;

use crate::policy::NodeSettings;

/// Where a node is and how to open a session on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// `AUTH` and `SELECT` settings taken from the URL.
    pub settings: NodeSettings,
}

impl NodeAddress {
    /// Parses `redis://[user:password@]host[:port][/db]` (port default 6379) or `host:port`.
    ///
    /// `rediss://` (TLS) is refused with a clear error: it is not supported yet. User and
    /// password may be percent-encoded; `redis://secret@host` is a password without a user.
    /// Each defect has its own [`AddressError::reason`], which says what was expected; it
    /// quotes the host, port or database it found, never the user info.
    pub fn parse(url: &str) -> Result<Self, AddressError> {
        let err = |reason: String| AddressError {
            url: redact(url),
            reason,
        };
        let rest = match split_scheme(url) {
            Some(("redis", rest)) => rest,
            Some(("rediss", _)) => return Err(err("TLS (rediss://) is not supported yet".into())),
            Some((scheme, _)) => {
                return Err(err(format!(
                    "unknown scheme `{scheme}://`: expected redis://"
                )));
            }
            None => {
                check_bare(url).map_err(|reason| err(reason.to_owned()))?;
                url
            }
        };
        // The last `@` ends the user info: a host, port or database never holds one, so a
        // password with a stray `/` or `@` is never mistaken for (and quoted as) a host.
        let (userinfo, hostpath) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let (hostport, path) = hostpath.split_once('/').unwrap_or((hostpath, ""));
        let mut settings = NodeSettings::default();
        if let Some(userinfo) = userinfo {
            let (user, password) = userinfo.split_once(':').unwrap_or(("", userinfo));
            let user = percent_decode(user)
                .ok_or_else(|| err("bad percent-encoding in the user name".into()))?;
            let password = percent_decode(password)
                .ok_or_else(|| err("bad percent-encoding in the password".into()))?;
            if password.is_empty() {
                return Err(err(
                    "a user name needs a password: expected redis://user:password@host:port".into(),
                ));
            }
            settings.username = (!user.is_empty()).then_some(user);
            settings.password = Some(password);
        }
        let (host, port) = split_host_port(hostport).map_err(err)?;
        let db = path.trim_end_matches('/');
        if !db.is_empty() {
            settings.db = db.parse().map_err(|_| {
                err(format!(
                    "database `{db}` is not a number: expected redis://host:port/0"
                ))
            })?;
        }
        Ok(Self {
            host,
            port,
            settings,
        })
    }
}

impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A node URL that could not be parsed. The password, if any, is not repeated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressError {
    url: String,
    reason: String,
}

impl AddressError {
    /// The URL (with any password replaced by `***`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid node URL `{}`: {}", self.url, self.reason)
    }
}

impl std::error::Error for AddressError {}

/// `scheme` and the rest of `scheme://rest`, if the text before `://` is a scheme (a letter,
/// then letters, digits, `+`, `-` or `.`), so that no other text is ever quoted as one.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// The bare form is `host:port` only: credentials and a database need `redis://`.
fn check_bare(url: &str) -> Result<(), &'static str> {
    if url.contains('@') {
        return Err("credentials need the URL form: expected redis://user:password@host:port");
    }
    if url.contains('/') {
        return Err("a database needs the URL form: expected redis://host:port/db");
    }
    if !url.contains(':') {
        return Err("no port: expected host:port, or redis://host for port 6379");
    }
    Ok(())
}

/// `host:port`, `[v6]:port`, `host` or `[v6]` (port 6379); each defect has its own reason.
fn split_host_port(s: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err("no `]` after the IPv6 address: expected [address]:port".into());
        };
        match after.strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None if after.is_empty() => (host, None),
            None => return Err(format!("`{after}` after `]`: expected [address]:port")),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("an IPv6 address needs brackets: expected [address]:port".into());
            }
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return Err("no host: expected redis://host:port".into());
    }
    let port = match port {
        Some(p) => parse_port(p)?,
        None => DEFAULT_PORT,
    };
    Ok((host.to_owned(), port))
}

/// A TCP port, 1 to 65535, in decimal digits only (`u16::from_str` would also take `+1`).
fn parse_port(p: &str) -> Result<u16, String> {
    if p.is_empty() {
        return Err("no port after `:`: expected host:port".into());
    }
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port `{p}` is not a number"));
    }
    match p.parse::<u16>() {
        Ok(0) => Err("port 0 is not a valid port (1 to 65535)".into()),
        Ok(port) => Ok(port),
        Err(_) => Err(format!("port {p} is out of range (1 to 65535)")),
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The URL with the password part of its user info replaced. The user info is everything
/// before the last `@` (after the scheme, if any), as [`NodeAddress::parse`] splits it, so a
/// password with a stray `/`, `:` or `@` is hidden whole; a URL without `@` has none.
fn redact(url: &str) -> String {
    let Some(at) = url.rfind('@') else {
        return url.to_owned();
    };
    let start = split_scheme(url).map_or(0, |(scheme, _)| scheme.len() + "://".len());
    let (head, userinfo, host) = (&url[..start], &url[start..at], &url[at..]);
    // `user:password`, or a password alone: only a user name before a `:` is kept.
    let user = userinfo.split_once(':').map_or("", |(u, _)| u);
    format!("{head}{user}:***{host}")
}

/// The port of `redis://host` without one, Redis's default.
const DEFAULT_PORT: u16 = 6379;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_accepted_forms() {
        let a = NodeAddress::parse("redis://127.0.0.1:7001").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 7001));
        assert_eq!(a.settings, NodeSettings::default());
        let a = NodeAddress::parse("127.0.0.1:7002").unwrap();
        assert_eq!(a.port, 7002);
        let a = NodeAddress::parse("redis://app:p%40ss@localhost:6380/3").unwrap();
        assert_eq!(a.settings.username.as_deref(), Some("app"));
        assert_eq!(a.settings.password.as_deref(), Some("p@ss"));
        assert_eq!(a.settings.db, 3);
        let a = NodeAddress::parse("redis://:secret@[::1]:7003").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("::1", 7003));
        assert_eq!(a.settings.username, None);
        assert_eq!(a.settings.password.as_deref(), Some("secret"));
        assert_eq!(a.to_string(), "[::1]:7003");
        assert_eq!(NodeAddress::parse("redis://h").unwrap().port, 6379);
    }

    /// Each defect, with its exact message: what is wrong, and what was expected.
    #[test]
    fn each_defect_has_its_own_message() {
        for (url, message) in [
            ("redis://", "no host: expected redis://host:port"),
            ("redis://:6379", "no host: expected redis://host:port"),
            ("redis://[]:1", "no host: expected redis://host:port"),
            ("redis://h:0", "port 0 is not a valid port (1 to 65535)"),
            ("redis://h:99999", "port 99999 is out of range (1 to 65535)"),
            (
                "h:123456789012345678901",
                "port 123456789012345678901 is out of range (1 to 65535)",
            ),
            ("redis://h:abc", "port `abc` is not a number"),
            ("redis://h:+1", "port `+1` is not a number"),
            ("redis://h:", "no port after `:`: expected host:port"),
            ("http://h:1", "unknown scheme `http://`: expected redis://"),
            (
                "unix:///tmp/redis.sock",
                "unknown scheme `unix://`: expected redis://",
            ),
            ("rediss://h:1", "TLS (rediss://) is not supported yet"),
            (
                "h",
                "no port: expected host:port, or redis://host for port 6379",
            ),
            (
                "u:p@h:1",
                "credentials need the URL form: expected redis://user:password@host:port",
            ),
            (
                "h:1/2",
                "a database needs the URL form: expected redis://host:port/db",
            ),
            (
                "::1:5",
                "an IPv6 address needs brackets: expected [address]:port",
            ),
            (
                "redis://[::1:5",
                "no `]` after the IPv6 address: expected [address]:port",
            ),
            ("redis://[::1]5", "`5` after `]`: expected [address]:port"),
            (
                "redis://h:1/x",
                "database `x` is not a number: expected redis://host:port/0",
            ),
            ("redis://%zz:p@h:1", "bad percent-encoding in the user name"),
            ("redis://u:%zz@h:1", "bad percent-encoding in the password"),
            (
                "redis://u:@h:1",
                "a user name needs a password: expected redis://user:password@host:port",
            ),
        ] {
            let err = NodeAddress::parse(url).expect_err(url);
            assert_eq!(err.reason(), message, "{url}");
            assert_eq!(
                err.to_string(),
                format!("invalid node URL `{}`: {message}", err.url())
            );
        }
        let err = NodeAddress::parse("redis://h:0").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid node URL `redis://h:0`: port 0 is not a valid port (1 to 65535)"
        );
    }

    /// The URL in an error never holds the password, whatever the defect; nor does the
    /// reason, which quotes only the host, port, database or scheme.
    #[test]
    fn errors_never_show_the_password() {
        for (url, shown) in [
            ("rediss://u:hunter2@h:1", "rediss://u:***@h:1"),
            ("redis://u:hunter2@h:0", "redis://u:***@h:0"),
            ("redis://u:hunter2@:1", "redis://u:***@:1"),
            ("redis://hunter2@h:x", "redis://:***@h:x"),
            ("redis://:hunter2@h:1/x", "redis://:***@h:1/x"),
            ("http://u:hunter2@h:1", "http://u:***@h:1"),
            // A stray `/`, `:` or `@` in the password hides the whole password.
            ("redis://u:hun/ter2@h:0", "redis://u:***@h:0"),
            ("redis://u:hun@ter2@h:0", "redis://u:***@h:0"),
            ("u:hunter2@h:1", "u:***@h:1"),
        ] {
            let err = NodeAddress::parse(url).expect_err(url);
            assert_eq!(err.url(), shown);
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(
                    !text.contains("hunter2") && !text.contains("ter2"),
                    "{text}"
                );
            }
        }
        // A password with a stray `/` is still the password, not a path.
        let a = NodeAddress::parse("redis://u:hun/ter2@h:1/3").unwrap();
        assert_eq!(a.settings.password.as_deref(), Some("hun/ter2"));
        assert_eq!((a.host.as_str(), a.port, a.settings.db), ("h", 1, 3));
    }
}
