//! The bench's own queries to the nodes in `held` (and `kinds`' script count), over blocking
//! test-kit connections on the blocking pool: script call counts, key counts, every key's
//! PTTL. Never the driver's path.

use std::net::SocketAddr;
use std::time::Duration;

use redlock_testkit::{Conn, Reply};

/// Runs a blocking node query on every node (one thread each), in node order.
pub(crate) async fn on_nodes<T, F>(addrs: &[SocketAddr], query: F) -> Result<Vec<T>, String>
where
    T: Send + 'static,
    F: Fn(SocketAddr) -> Result<T, String> + Clone + Send + 'static,
{
    let tasks: Vec<_> = addrs
        .iter()
        .map(|&addr| {
            let query = query.clone();
            tokio::task::spawn_blocking(move || query(addr))
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(
            task.await
                .map_err(|e| format!("node query panicked: {e}"))??,
        );
    }
    Ok(out)
}

fn open(addr: SocketAddr) -> Result<Conn, String> {
    Conn::open(addr, NODE_TIMEOUT).map_err(|e| format!("node {addr}: {e}"))
}

fn command(conn: &mut Conn, addr: SocketAddr, args: &[&str]) -> Result<Reply, String> {
    let name = args.first().unwrap_or(&"");
    match conn.command(args) {
        Ok(Reply::Error(e)) => Err(format!("node {addr}: {name}: {e}")),
        Ok(reply) => Ok(reply),
        Err(e) => Err(format!("node {addr}: {name}: {e}")),
    }
}

pub(super) fn dbsize(addr: SocketAddr) -> Result<u64, String> {
    let reply = command(&mut open(addr)?, addr, &["DBSIZE"])?;
    reply
        .as_int()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| format!("held: node {addr}: DBSIZE: {reply:?}"))
}

/// Scripts the node ran (`EVALSHA` and `EVAL` calls, from `INFO commandstats`). Between the
/// last acquire and the first release these are extensions only.
pub(crate) fn script_calls(addr: SocketAddr) -> Result<u64, String> {
    let reply = command(&mut open(addr)?, addr, &["INFO", "commandstats"])?;
    let text = reply
        .as_str()
        .ok_or_else(|| format!("node {addr}: INFO: {reply:?}"))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("cmdstat_evalsha:calls=")
                .or_else(|| l.strip_prefix("cmdstat_eval:calls="))
        })
        .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
        .sum())
}

/// The PTTLs of `keys` on one node: the smallest, and how many keys are missing or have no
/// expiry.
pub(super) struct Pttls {
    pub(super) min: Option<Duration>,
    pub(super) missing: u64,
}

/// Reads every key's PTTL on `addr`, [`PTTL_BATCH`] keys per server-side script.
pub(super) fn pttl_scan(addr: SocketAddr, keys: &[String]) -> Result<Pttls, String> {
    let mut conn = open(addr)?;
    let mut out = Pttls {
        min: None,
        missing: 0,
    };
    for batch in keys.chunks(PTTL_BATCH) {
        let count = batch.len().to_string();
        let mut args = vec!["EVAL", PTTL_SCRIPT, &count];
        args.extend(batch.iter().map(String::as_str));
        let reply = command(&mut conn, addr, &args)?;
        let (min, missing) = match &reply {
            Reply::Array(v) => match (v.first().and_then(Reply::as_int), v.get(1)) {
                (Some(min), Some(missing)) => (min, missing.as_int()),
                _ => (-1, None),
            },
            _ => (-1, None),
        };
        let missing = missing
            .and_then(|m| u64::try_from(m).ok())
            .ok_or_else(|| format!("held: node {addr}: PTTL script: {reply:?}"))?;
        out.missing += missing;
        if let Ok(ms) = u64::try_from(min) {
            let min = Duration::from_millis(ms);
            out.min = Some(out.min.map_or(min, |m| m.min(min)));
        }
    }
    Ok(out)
}

/// Returns `{smallest PTTL of KEYS (-1 if none has one), keys without a PTTL}`.
const PTTL_SCRIPT: &str = "local min, missing = -1, 0 \
    for _, k in ipairs(KEYS) do \
      local t = redis.call('PTTL', k) \
      if t < 0 then missing = missing + 1 elseif min < 0 or t < min then min = t end \
    end \
    return {min, missing}";

/// Keys per PTTL script call.
const PTTL_BATCH: usize = 1_000;

/// Connect, write and reply timeout of the bench's own node queries.
const NODE_TIMEOUT: Duration = Duration::from_secs(5);
