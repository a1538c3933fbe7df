//! `raw-grant`: the floor of a hand-off between processes over N independent nodes, for the
//! contended scenarios (benches/README.md, "The floor of a hand-off between processes").
//!
//! The workers take the key in a fixed ring that alternates processes (worker `i` of every
//! process, then worker `i + 1` of every process, ...), so the turn order is known in advance
//! and nothing is spent finding the next holder: no queue, no attempts, no retry, no
//! validity, drift or fencing. A holder's release is one script on every node that, if the
//! node still holds its value, sets the next worker's value and publishes it on that
//! worker's own channel; the next worker holds once a majority of the nodes has told it so.
//! That is one fan-out and one push per node per hand-off, the least any lock whose holder
//! is decided by a majority of independent nodes can do; our grants
//! (docs/design.md, "A release that grants") do the same plus the queue's bookkeeping.
//! `raw-grant-all` publishes every grant on one channel per key instead, which every process
//! hears, as ours go on the resource's release channel: the difference is the price of
//! waking the processes a grant is not for. `raw-grant-q` keeps the addressed grant but
//! runs QUEUE_RELEASE's calls on the path that grants (two sorted sets beside the key: the
//! holder's place left, the next worker's taken, pruned, ranked, its deadline read): the
//! difference is the price of the queue's script. Neither changes who holds next.
//!
//! The round's first holder (worker 0, position 0) sets the key unconditionally. It is not
//! a lock: it assumes every worker takes its turn, and a round ends with the key given to a
//! worker that has stopped (it expires). Every process counts its rounds, which run in step,
//! and a value carries its round's number: a grant from a round's end that comes late is
//! never taken in the next. Pipelined commands go over [`RawClient`]'s connections; pushes
//! come on one more connection per node in RESP2 subscriber mode.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redlock_testkit::resp::{self, Reply};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::raw::{self, RawClient, Release};

/// The release: if the node holds the holder's value, give the key to the next worker and
/// tell it on its channel. `KEYS[1]` the key; `ARGV` the holder's value, the next value,
/// the ttl in ms, the next worker's channel.
const GRANT_SCRIPT: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) \
     redis.call('PUBLISH', ARGV[4], ARGV[2]) return 1 end return 0";

/// [`GRANT_SCRIPT`] with QUEUE_RELEASE's calls on the path that grants, in its order
/// (`KEYS[2]`, `KEYS[3]`: the places by ticket and by deadline): its cost, not its queue;
/// each set holds the next worker's place alone.
const QUEUED_GRANT_SCRIPT: &str = "local t = redis.call('TIME') \
     local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
     local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] \
     local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64) \
     for i = 1, #gone do redis.call('ZREM', KEYS[2], gone[i]) redis.call('ZREM', KEYS[3], gone[i]) end \
     redis.call('ZREM', KEYS[2], ARGV[1]) redis.call('ZREM', KEYS[3], ARGV[1]) \
     redis.call('ZADD', KEYS[2], now, ARGV[2]) redis.call('ZADD', KEYS[3], now + 10000, ARGV[2]) \
     for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < 10000 then redis.call('PEXPIRE', KEYS[i], 10000) end end \
     local rank = redis.call('ZRANK', KEYS[2], ARGV[2]) \
     local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] \
     if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) \
     local left = tonumber(redis.call('ZSCORE', KEYS[3], head) or 0) - now \
     redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) \
     redis.call('PUBLISH', ARGV[4], ARGV[2]) return 1 end return 0";

/// Which floor: how a grant is told and what the nodes do besides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Floor {
    /// `raw-grant`: the grant on the next worker's channel.
    Addressed,
    /// `raw-grant-all`: every grant on one channel that every process hears.
    Broadcast,
    /// `raw-grant-q`: addressed, with QUEUE_RELEASE's calls ([`QUEUED_GRANT_SCRIPT`]).
    Queued,
}

impl Floor {
    /// The floor a subject name asks for.
    pub(crate) fn named(name: &str) -> Option<Self> {
        match name {
            "raw-grant" => Some(Self::Addressed),
            "raw-grant-all" => Some(Self::Broadcast),
            "raw-grant-q" => Some(Self::Queued),
            _ => None,
        }
    }
}

/// How long subscribing to a process's channels may take.
const SUBSCRIBE_BOUND: Duration = Duration::from_secs(5);

/// The raw client plus one subscriber connection per node and the workers' mailboxes.
pub(crate) struct RawGrant {
    raw: RawClient,
    floor: Floor,
    grant_sha: Vec<u8>,
    ttl_ms: Vec<u8>,
    /// The subscriber connections, written to when subscribing (their readers own reading).
    subscribers: Vec<Arc<TcpStream>>,
    readers: Vec<JoinHandle<()>>,
    mailbox: Arc<Mailbox>,
    /// Distinct values across hand-offs and processes.
    next_value: AtomicU64,
    salt: u64,
}

/// A hold: the value this worker's turn stored, and how many commands it took (1 for the
/// round's first holder, 0 for a turn given by a grant).
pub(crate) struct Hold {
    pub(crate) value: Vec<u8>,
    pub(crate) attempts: u32,
}

impl RawGrant {
    /// Connects the raw client and one subscriber connection per node, and loads the
    /// release script.
    pub(crate) async fn connect(
        addrs: &[SocketAddr],
        ttl: Duration,
        floor: Floor,
    ) -> Result<Self, String> {
        let raw = RawClient::connect(addrs, ttl, Release::EvalSha).await?;
        let script = match floor {
            Floor::Queued => QUEUED_GRANT_SCRIPT,
            Floor::Addressed | Floor::Broadcast => GRANT_SCRIPT,
        };
        let grant_sha = raw.load(script.as_bytes()).await?;
        let mailbox = Arc::new(Mailbox::new(raw.quorum()));
        let mut subscribers = Vec::new();
        let mut readers = Vec::new();
        for addr in addrs {
            let stream = Arc::new(raw::connect(*addr, "raw-grant").await?);
            let reader = listen(Arc::clone(&stream), Arc::clone(&mailbox));
            readers.push(tokio::spawn(reader));
            subscribers.push(stream);
        }
        Ok(Self {
            raw,
            floor,
            grant_sha,
            ttl_ms: ttl.as_millis().to_string().into_bytes(),
            subscribers,
            readers,
            mailbox,
            next_value: AtomicU64::new(0),
            salt: u64::from(std::process::id()) << 32,
        })
    }

    /// The raw client underneath (the warm-up's cycles).
    pub(crate) fn raw(&self) -> &RawClient {
        &self.raw
    }

    /// This process runs workers `first..first + count` of `total` on `key`: subscribes to
    /// their channels on every node the first time (waiting for every confirmation), and
    /// if `round`, starts this process's next round (grants of earlier ones are dropped).
    pub(crate) async fn prepare(&self, key: &str, ring: Ring, round: bool) -> Result<(), String> {
        let channels: Vec<Vec<u8>> = (ring.first..ring.first + ring.count)
            .map(|w| self.channel(key, w))
            .collect();
        let (fresh, subscribed) = self.mailbox.open(ring, channels, round);
        if fresh.is_empty() {
            return Ok(());
        }
        let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
        args.extend(fresh.iter().map(Vec::as_slice));
        let mut bytes = Vec::new();
        resp::encode_command(&mut bytes, &args);
        // Every channel so far, on every node: confirmations are counted since the start.
        let want = subscribed * self.subscribers.len();
        let subscribe = async {
            for stream in &self.subscribers {
                write_all(stream, &bytes).await?;
            }
            self.mailbox.confirmed(want).await;
            Ok(())
        };
        tokio::time::timeout(SUBSCRIBE_BOUND, subscribe)
            .await
            .map_err(|_| format!("raw-grant: {want} subscriptions not confirmed"))?
    }

    /// Waits for `worker`'s turn on `key`, until `until`: `None` if the round ended first.
    /// The round's first holder takes the key at once.
    pub(crate) async fn hold(
        &self,
        key: &str,
        worker: u32,
        until: Instant,
    ) -> Result<Option<Hold>, String> {
        if self.mailbox.starts(worker) {
            let value = self.value(worker, self.mailbox.round());
            let set: [&[u8]; 5] = [b"SET", key.as_bytes(), &value, b"PX", &self.ttl_ms];
            let ok = |r: &Reply| matches!(r, Reply::Simple(s) if s == "OK");
            if !self.raw.at_quorum(&set, ok).await {
                return Err("raw-grant: the round's first SET failed".to_owned());
            }
            return Ok(Some(Hold { value, attempts: 1 }));
        }
        let notify = self.mailbox.notify(worker)?;
        loop {
            if let Some(value) = self.mailbox.take(worker) {
                return Ok(Some(Hold { value, attempts: 0 }));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notify.notified()).await.is_err() {
                return Ok(None);
            }
        }
    }

    /// Gives the key from `worker`'s `hold` to the next worker in the ring; an error unless a
    /// majority of the nodes still held the value.
    pub(crate) async fn grant(&self, key: &str, worker: u32, hold: &Hold) -> Result<(), String> {
        let next = self.mailbox.next(worker)?;
        let value = self.value(next, self.mailbox.round());
        let to = self.channel(key, next);
        let (places, until) = (format!("{key}:q"), format!("{key}:q:until"));
        let mut args: Vec<&[u8]> = vec![b"EVALSHA", &self.grant_sha];
        match self.floor {
            Floor::Queued => {
                args.extend([b"3", key.as_bytes(), places.as_bytes(), until.as_bytes()])
            }
            Floor::Addressed | Floor::Broadcast => args.extend([b"1", key.as_bytes()]),
        }
        args.extend([&hold.value[..], &value, &self.ttl_ms, &to]);
        if self.raw.at_quorum(&args, |r| *r == Reply::Int(1)).await {
            Ok(())
        } else {
            Err(format!("raw-grant: worker {worker} no longer held {key}"))
        }
    }

    /// The channel `worker`'s grants on `key` go on: its own, or the key's one.
    fn channel(&self, key: &str, worker: u32) -> Vec<u8> {
        match self.floor {
            Floor::Broadcast => format!("{key}:grant").into_bytes(),
            Floor::Addressed | Floor::Queued => format!("{key}:grant:{worker}").into_bytes(),
        }
    }

    /// A fresh value for `worker` in `round`: the round's number, the worker's
    /// ([`round_of`], [`worker_of`]), a counter.
    fn value(&self, worker: u32, round: u64) -> Vec<u8> {
        let n = self.next_value.fetch_add(1, Ordering::Relaxed) ^ self.salt;
        format!("{round}:{worker}:{n:x}").into_bytes()
    }
}

impl Drop for RawGrant {
    fn drop(&mut self) {
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// One process's place in the ring: its workers `first..first + count` of `total`, every
/// process running `count`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ring {
    pub(crate) first: u32,
    pub(crate) count: u32,
    pub(crate) total: u32,
}

impl Ring {
    /// The worker after `worker`: the ring runs worker `i` of every process in turn, then
    /// worker `i + 1` of every process, so consecutive holders are in different processes.
    fn next(self, worker: u32) -> u32 {
        let each = self.count.max(1);
        let processes = (self.total / each).max(1);
        let position = (worker % each) * processes + worker / each;
        let next = (position + 1) % (each * processes);
        (next % processes) * each + next / processes
    }
}

/// The round a value was made in ([`RawGrant::value`]); `None` if it is not one of ours.
fn round_of(value: &[u8]) -> Option<u64> {
    let end = value.iter().position(|b| *b == b':')?;
    std::str::from_utf8(&value[..end]).ok()?.parse().ok()
}

/// The worker a value was made for ([`RawGrant::value`]).
fn worker_of(value: &[u8]) -> Option<u32> {
    let mut fields = value.split(|b| *b == b':');
    let worker = fields.nth(1)?;
    std::str::from_utf8(worker).ok()?.parse().ok()
}

/// This process's workers' mailboxes, and its subscriptions.
struct Mailbox {
    quorum: usize,
    state: Mutex<Boxes>,
    confirmations: Notify,
}

#[derive(Default)]
struct Boxes {
    by_worker: HashMap<u32, WorkerBox>,
    /// The channels subscribed to, and the confirmations heard.
    channels: HashSet<Vec<u8>>,
    confirmed: usize,
    /// This process's rounds so far: the current one's number.
    round: u64,
}

/// One worker's grants heard, by value, and the value a majority told it of.
struct WorkerBox {
    ring: Ring,
    heard: HashMap<Vec<u8>, usize>,
    granted: Option<Vec<u8>>,
    /// Not yet held this round (the round's first holder sets the key itself).
    fresh: bool,
    notify: Arc<Notify>,
}

impl Mailbox {
    fn new(quorum: usize) -> Self {
        Self {
            quorum,
            state: Mutex::new(Boxes::default()),
            confirmations: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Boxes> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens the boxes of `ring`'s workers not there yet and, if `next_round`, starts a new
    /// round for all of them, dropping what earlier rounds granted. Of `channels`, those not
    /// subscribed to yet, and how many channels that makes in all.
    fn open(&self, ring: Ring, channels: Vec<Vec<u8>>, next_round: bool) -> (Vec<Vec<u8>>, usize) {
        let mut boxes = self.lock();
        boxes.round += u64::from(next_round);
        let round = boxes.round;
        let current = |v: &Vec<u8>| round_of(v).is_some_and(|r| r >= round);
        let mut fresh = Vec::new();
        for channel in channels {
            if boxes.channels.insert(channel.clone()) {
                fresh.push(channel);
            }
        }
        for worker in ring.first..ring.first + ring.count {
            let entry = boxes.by_worker.entry(worker).or_insert_with(|| WorkerBox {
                ring,
                heard: HashMap::new(),
                granted: None,
                fresh: true,
                notify: Arc::new(Notify::new()),
            });
            entry.heard.retain(|v, _| current(v));
            entry.granted = entry.granted.take().filter(current);
            entry.fresh = true;
        }
        (fresh, boxes.channels.len())
    }

    /// Waits until `want` subscriptions are confirmed in all.
    async fn confirmed(&self, want: usize) {
        loop {
            let notified = self.confirmations.notified();
            if self.lock().confirmed >= want {
                return;
            }
            notified.await;
        }
    }

    /// Whether `worker` is the round's first holder and has not held yet this round.
    fn starts(&self, worker: u32) -> bool {
        let mut boxes = self.lock();
        let Some(b) = boxes.by_worker.get_mut(&worker) else {
            return false;
        };
        let starts = b.fresh && worker == 0;
        b.fresh = false;
        starts
    }

    fn notify(&self, worker: u32) -> Result<Arc<Notify>, String> {
        (self.lock().by_worker.get(&worker))
            .map(|b| Arc::clone(&b.notify))
            .ok_or_else(|| "raw-grant: a worker with no mailbox".to_owned())
    }

    fn next(&self, worker: u32) -> Result<u32, String> {
        (self.lock().by_worker.get(&worker))
            .map(|b| b.ring.next(worker))
            .ok_or_else(|| "raw-grant: a worker with no mailbox".to_owned())
    }

    /// The current round's number.
    fn round(&self) -> u64 {
        self.lock().round
    }

    /// The value a majority granted `worker` in this round, once; what else was heard in
    /// this round is dropped.
    fn take(&self, worker: u32) -> Option<Vec<u8>> {
        let mut boxes = self.lock();
        let round = boxes.round;
        let b = boxes.by_worker.get_mut(&worker)?;
        if b.granted.as_deref().and_then(round_of) != Some(round) {
            return None;
        }
        b.heard
            .retain(|v, _| round_of(v).is_some_and(|r| r > round));
        b.granted.take()
    }

    /// A grant of `value` heard from one node, for the worker the value names if it is one
    /// of this process's; dropped if it is of a round that is over (a later round's is kept:
    /// another process may start it first).
    fn deliver(&self, value: Vec<u8>) {
        let mut boxes = self.lock();
        let round = boxes.round;
        if round_of(&value).is_none_or(|r| r < round) {
            return;
        }
        let Some(b) = worker_of(&value).and_then(|w| boxes.by_worker.get_mut(&w)) else {
            return;
        };
        let heard = b.heard.entry(value.clone()).or_insert(0);
        *heard += 1;
        if *heard == self.quorum {
            b.granted = Some(value);
            b.notify.notify_one();
        }
    }

    fn subscribed(&self) {
        self.lock().confirmed += 1;
        self.confirmations.notify_waiters();
    }
}

/// Writes all of `bytes` to a subscriber connection.
async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> Result<(), String> {
    while !bytes.is_empty() {
        stream
            .writable()
            .await
            .map_err(|e| format!("raw-grant: {e}"))?;
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("raw-grant: subscribe: {e}")),
        }
    }
    Ok(())
}

/// Reads one subscriber connection until it fails: confirmations and grants.
async fn listen(stream: Arc<TcpStream>, mailbox: Arc<Mailbox>) {
    let mut buf = vec![0u8; 64 * 1024];
    let (mut start, mut end) = (0, 0);
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        match stream.try_read(&mut buf[end..]) {
            Ok(0) => return,
            Ok(n) => end += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
        while let Ok(Some((reply, used))) = resp::parse_reply(&buf[start..end]) {
            start += used;
            let Reply::Array(items) = reply else { continue };
            match items.as_slice() {
                [Reply::Bulk(kind), _, Reply::Int(_)] if kind == b"subscribe" => {
                    mailbox.subscribed();
                }
                [Reply::Bulk(kind), _, Reply::Bulk(value)] if kind == b"message" => {
                    mailbox.deliver(value.clone());
                }
                _ => {}
            }
        }
        buf.copy_within(start..end, 0);
        end -= start;
        start = 0;
        if end == buf.len() {
            return; // a frame larger than the buffer: not one of ours
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn the_ring_alternates_processes_and_visits_every_worker() {
        for (count, total) in [(4, 8), (2, 8), (8, 8), (3, 9)] {
            let ring = Ring {
                first: 0,
                count,
                total,
            };
            let mut seen = vec![false; total as usize];
            let mut w = 0;
            for _ in 0..total {
                assert!(!seen[w as usize], "{count}x{total}: {w} twice");
                seen[w as usize] = true;
                let next = ring.next(w);
                if total > count {
                    assert_ne!(next / count, w / count, "{count}x{total}: same process");
                }
                w = next;
            }
            assert_eq!(w, 0);
            assert!(seen.iter().all(|s| *s));
        }
    }
}
