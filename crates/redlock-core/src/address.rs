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
    pub fn parse(url: &str) -> Result<Self, AddressError> {
        let err = |reason: &str| AddressError {
            url: redact(url),
            reason: reason.to_owned(),
        };
        let rest = if let Some(rest) = url.strip_prefix("redis://") {
            rest
        } else if url.starts_with("rediss://") {
            return Err(err("TLS (rediss://) is not supported yet"));
        } else if url.contains("://") {
            return Err(err("the scheme must be redis://"));
        } else {
            if !url.contains(':') || url.contains('@') || url.contains('/') {
                return Err(err(
                    "expected redis://[user:password@]host:port[/db] or host:port",
                ));
            }
            url
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let mut settings = NodeSettings::default();
        if let Some(userinfo) = userinfo {
            let (user, password) = userinfo.split_once(':').unwrap_or(("", userinfo));
            let user = percent_decode(user).ok_or_else(|| err("bad percent-encoding in user"))?;
            let password =
                percent_decode(password).ok_or_else(|| err("bad percent-encoding in password"))?;
            if password.is_empty() {
                return Err(err("a user name needs a password"));
            }
            settings.username = (!user.is_empty()).then_some(user);
            settings.password = Some(password);
        }
        let (host, port) = split_host_port(hostport).ok_or_else(|| err("bad host or port"))?;
        let db = path.trim_end_matches('/');
        if !db.is_empty() {
            settings.db = db
                .parse()
                .map_err(|_| err("the database must be a number"))?;
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

fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p,
            None if after.is_empty() => "6379",
            None => return None,
        };
        (host, port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, p),
            Some(_) => return None,
            None => (s, "6379"),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    Some((host.to_owned(), port))
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

/// The URL with the password part of its user info replaced.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or("", |(u, _)| u);
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_owned(),
    }
}

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

    #[test]
    fn rejects_with_a_reason_and_no_password() {
        let e = NodeAddress::parse("rediss://u:hunter2@h:1").unwrap_err();
        assert!(e.reason().contains("TLS"));
        assert!(!e.to_string().contains("hunter2"));
        assert!(e.to_string().contains("u:***@h:1"));
        for bad in [
            "http://h:1",
            "h",
            "redis://h:0",
            "redis://h:99999",
            "redis://:1",
            "redis://h:1/x",
            "redis://%zz:p@h:1",
            "::1:5",
        ] {
            assert!(NodeAddress::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
