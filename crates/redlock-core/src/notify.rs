//! Release notifications: the channel a release is announced on, the commands that
//! subscribe to it, and reading the RESP3 push frames that carry the announcements.
//!
//! A release that deletes its key publishes an empty message on the resource's channel
//! ([`release_channel`]): the release script does it itself, and after a native release
//! that deleted, the client publishes it. A waiter subscribes on every node that speaks
//! RESP3 (`HELLO 3` on its one connection: no second connection per node) and tries again as
//! soon as a quorum of nodes announced a release, after a small random delay so that the
//! waiters of several processes do not all collide (docs/design.md, "Release
//! notifications"). A notification is only a hint: one can be lost (a node down, a
//! subscription not yet active, a lock that expired instead), so the retry timer stays, and
//! an early attempt that finds the lock still held is only a failed attempt.
//!
//! The other way round, a waiter tells holders that it waits: when a lock call first finds
//! the lock held by another client, its client publishes an empty message on the
//! resource's *waiting* channel
//! ([`waiting_channel`]), and a client whose line for the resource may hand over (a call
//! has waited behind its first, and the line is not contested) listens there. A line that
//! hears it counts as contested at once, so it stops handing the hold from call to call (a hand-over,
//! which sends nothing and so hears nobody) and lets the waiter take its turn, instead of
//! hearing of it at its next release through the nodes (docs/design.md, "Hearing of
//! waiters"). A hint too: lost, it costs the waiter what the line's periodic release
//! through the nodes bounds.
//!
//! A lock keeps its release channel from its first wait while it holds, and its line's next
//! call takes it over (docs/design.md, "Kept while held"): a contended key changes hands
//! without unsubscribing and subscribing again on every node. A release that nothing of the
//! line waits behind gives it up ahead of itself, so that the release's count of listeners
//! is of other clients.
//!
//! The client's routing of them is [`Watching`]: which lock waits on which channel and
//! which line listens on which, what each node must subscribe to or unsubscribe from for
//! that, and whom an announcement is for. The client calls it as it calls `Lines`
//! (queue.rs); it reaches the nodes through [`Subscriber`], which node.rs implements.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::{Bytes, BytesMut};

use crate::grant::GRANT_PREFIX;
use crate::id::{NodeId, OpId};
use crate::resp::{self, ProtocolError, Reply};
use crate::token::Resource;
use crate::waiters::NEXT_PREFIX;

/// The prefix of every release channel: `redlock:released:` then the key.
pub const RELEASE_CHANNEL_PREFIX: &str = "redlock:released:";

/// The channel a release of `resource` is announced on: [`RELEASE_CHANNEL_PREFIX`] and the
/// key. Channels are global to a server (not per database), so locks of the same name in
/// two databases share one: a notification is a hint, and a spurious one costs an attempt.
///
/// ```
/// use redlock_core::{Resource, release_channel};
/// assert_eq!(&release_channel(&Resource::from("jobs:42"))[..], b"redlock:released:jobs:42");
/// ```
pub fn release_channel(resource: &Resource) -> Bytes {
    channel(RELEASE_CHANNEL_PREFIX, resource)
}

/// `prefix` and the key of `resource`: a channel's name.
fn channel(prefix: &str, resource: &Resource) -> Bytes {
    let mut channel = BytesMut::with_capacity(prefix.len() + resource.as_bytes().len());
    channel.extend_from_slice(prefix.as_bytes());
    channel.extend_from_slice(resource.as_bytes());
    channel.freeze()
}

/// The prefix of every waiting channel: `redlock:waiting:` then the key.
pub const WAITING_CHANNEL_PREFIX: &str = "redlock:waiting:";

/// The channel on which a waiter of `resource` tells its holders that it waits:
/// [`WAITING_CHANNEL_PREFIX`] and the key. Apart from the release channel, so that the
/// release scripts' count of subscribers (the waiters told of a release) counts waiters
/// only.
///
/// ```
/// use redlock_core::{Resource, waiting_channel};
/// assert_eq!(&waiting_channel(&Resource::from("jobs:42"))[..], b"redlock:waiting:jobs:42");
/// ```
pub fn waiting_channel(resource: &Resource) -> Bytes {
    channel(WAITING_CHANNEL_PREFIX, resource)
}

/// Appends `PUBLISH channel ""`: a waiter's announcement on a waiting channel.
pub(crate) fn encode_announcement(buf: &mut BytesMut, channel: &[u8]) {
    resp::encode(buf, &[b"PUBLISH", channel, b""]);
}

/// Appends `SUBSCRIBE channel`. In RESP3 its only answer is a push frame, so no reply is
/// awaited for it.
pub(crate) fn encode_subscribe(buf: &mut BytesMut, channel: &[u8]) {
    resp::encode(buf, &[b"SUBSCRIBE", channel]);
}

/// Appends `UNSUBSCRIBE channel` (answered by a push frame, like `SUBSCRIBE`).
pub(crate) fn encode_unsubscribe(buf: &mut BytesMut, channel: &[u8]) {
    resp::encode(buf, &[b"UNSUBSCRIBE", channel]);
}

/// Appends `PUBLISH <release channel of key> ""`, the announcement that rides with a
/// native release (command.rs), as the release script publishes its own. Written from the key,
/// without building the channel name.
pub(crate) fn encode_publish(buf: &mut BytesMut, key: &[u8]) {
    let mut len = [0u8; 20];
    let mut at = len.len();
    let mut n = RELEASE_CHANNEL_PREFIX.len() + key.len();
    loop {
        at -= 1;
        len[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(b"*3\r\n$7\r\nPUBLISH\r\n$");
    buf.extend_from_slice(&len[at..]);
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(RELEASE_CHANNEL_PREFIX.as_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(b"\r\n$0\r\n\r\n");
}

/// What an announcement on a release channel says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// A release (an empty message; anything else but a queue's announcement reads so too:
    /// a notification is a hint).
    Released,
    /// The resource's waiters' queue has this id at its head now (waiters/mod.rs).
    Next(Bytes),
    /// A release granted the key to this id, now the queue's head there (grant.rs).
    Grant(Bytes),
}

/// A RESP3 push frame, as far as the client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Push {
    /// `message channel payload`: something was published on `channel`.
    Message {
        /// The channel.
        channel: Bytes,
        /// What was published: empty for a release, `next:<id>` for a queue's new head.
        payload: Bytes,
    },
    /// `subscribe channel count` or `unsubscribe channel count`: the answer to a
    /// `SUBSCRIBE` or `UNSUBSCRIBE` (RESP3 answers them with a push, in the order of
    /// replies).
    Confirmation,
    /// Anything else: pushes the client never asked for.
    Other,
}

/// Reads the push frame at the start of `buf` (which starts with `>`): the push and its
/// length, or `None` if `buf` holds only part of it. Elements are strings, integers or
/// nulls; a nested aggregate is refused (no push we subscribe to has one), and the frame is
/// held to `max_reply` bytes like any reply.
pub(crate) fn decode_push(
    buf: &[u8],
    max_reply: usize,
) -> Result<Option<(Push, usize)>, ProtocolError> {
    match buf.first() {
        None => return Ok(None),
        Some(b'>') => {}
        Some(_) => return Err(ProtocolError("expected a push frame".into())),
    }
    let Some((count, mut pos)) = resp::aggregate_header(buf, 0, max_reply)? else {
        return Ok(None);
    };
    let mut parts: [Option<Bytes>; 3] = [None, None, None];
    for i in 0..count {
        if pos > max_reply {
            return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
        }
        let Some((element, len)) = resp::decode(&buf[pos..], max_reply)? else {
            return Ok(None);
        };
        pos += len;
        if let (Some(part), Reply::Bulk(text) | Reply::Status(text)) = (parts.get_mut(i), element) {
            *part = Some(text);
        }
    }
    if pos > max_reply {
        return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
    }
    let push = match parts {
        [Some(kind), Some(channel), payload] if count == 3 && &kind[..] == b"message" => {
            Push::Message {
                channel,
                payload: payload.unwrap_or_default(),
            }
        }
        [Some(kind), _, _]
            if count == 3 && (&kind[..] == b"subscribe" || &kind[..] == b"unsubscribe") =>
        {
            Push::Confirmation
        }
        _ => Push::Other,
    };
    Ok(Some((push, pos)))
}

/// The channels the client watches, each for one lock or line, and the subscriptions that
/// follow on every node. A `BTreeMap` for the reason `Lines` is one (queue.rs): the keys come
/// from the application.
#[derive(Debug, Default)]
pub(crate) struct Watching {
    /// Each watched channel and whom its messages are for.
    channels: BTreeMap<Bytes, Watcher>,
    /// The resources whose waiting channel is watched for the client's line.
    lines: BTreeSet<Resource>,
}

/// Whom the messages of a watched channel are for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Watcher {
    /// A release channel: the lock waiting for the release.
    Lock(OpId),
    /// A waiting channel: the client's line for the resource.
    Line(Resource),
}

/// What a message on a watched channel is, and for whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    /// For the lock waiting on the release channel.
    Lock(OpId, Notice),
    /// A waiter of `resource` announced itself: for the client's line.
    Waiter(Resource),
}

/// What [`Watching`] needs of a node's connection (node.rs implements it for `Node`).
pub(crate) trait Subscriber {
    /// Whether the connection is up.
    fn is_up(&self) -> bool;
    /// The release channels subscribed on the current connection.
    fn subscribed(&self) -> &[Bytes];
    /// Whether a channel may be subscribed to on the current connection: it speaks RESP3,
    /// and refused no subscription yet.
    fn may_subscribe(&self) -> bool;
    /// Queues `SUBSCRIBE channel` and counts the channel as subscribed.
    fn subscribe(&mut self, channel: &Bytes);
    /// Queues `UNSUBSCRIBE` for the subscribed channel at `at` in
    /// [`subscribed`](Self::subscribed).
    fn unsubscribe(&mut self, at: usize);
    /// A push confirmed a subscription: the one at the front of the node's queue, if it is
    /// one, is answered (a confirmation nobody asked for is dropped).
    fn confirm_subscription(&mut self);
    /// Marks the node as having bytes to write: true if it was not marked yet (it then
    /// joins the client's list of nodes to write to).
    fn mark_dirty(&mut self) -> bool;
}

/// How many of `nodes` can tell this client of a release or of its turn in the waiters'
/// queue: each up, speaking RESP3 and allowed channels.
pub(crate) fn hearing<N: Subscriber>(nodes: &[N]) -> usize {
    (nodes.iter())
        .filter(|n| n.is_up() && n.may_subscribe())
        .count()
}

impl Watching {
    /// Watches `resource`'s release channel for `op` if `wants`, or stops watching it if
    /// `op` watched it, and subscribes or unsubscribes every node that is up to match;
    /// each node that got a command to send joins `dirty`.
    pub(crate) fn watch<N: Subscriber>(
        &mut self,
        op: OpId,
        resource: &Resource,
        wants: bool,
        nodes: &mut [N],
        dirty: &mut VecDeque<NodeId>,
    ) {
        let channel = release_channel(resource);
        if wants {
            self.channels.insert(channel.clone(), Watcher::Lock(op));
        } else if self.channels.get(&channel) == Some(&Watcher::Lock(op)) {
            self.channels.remove(&channel);
        } else {
            return;
        }
        subscribe(&channel, wants, nodes, dirty);
    }

    /// The line of `resource` hands off from `from` to its next call `to`: the release
    /// channel `from` watched is now `to`'s, still subscribed on every node that had it, so
    /// the line's next wait needs no `SUBSCRIBE` (client/locks.rs, `wants_channel`).
    /// Whether `from` watched it.
    pub(crate) fn pass(&mut self, resource: &Resource, (from, to): (OpId, OpId)) -> bool {
        match self.channels.get_mut(&release_channel(resource)) {
            Some(w) if *w == Watcher::Lock(from) => {
                *w = Watcher::Lock(to);
                true
            }
            _ => false,
        }
    }

    /// Listens on `resource`'s waiting channel for the client's line if `wants`, or stops
    /// (see the module docs); a no-op if that is so already. Nodes as for
    /// [`watch`](Self::watch). Whether a node was subscribed.
    pub(crate) fn listen<N: Subscriber>(
        &mut self,
        resource: &Resource,
        wants: bool,
        nodes: &mut [N],
        dirty: &mut VecDeque<NodeId>,
    ) -> bool {
        if wants == self.lines.contains(resource) {
            return false;
        }
        let channel = waiting_channel(resource);
        if wants {
            self.channels
                .insert(channel.clone(), Watcher::Line(resource.clone()));
            self.lines.insert(resource.clone());
        } else {
            self.channels.remove(&channel);
            self.lines.remove(resource);
        }
        subscribe(&channel, wants, nodes, dirty) && wants
    }

    /// Whether `resource`'s line hears every waiter of another client that announces itself
    /// (docs/design.md, "Hearing of waiters"): it listens on the resource's waiting channel
    /// on every node, each up and speaking RESP3. A waiter announces on every node that
    /// speaks RESP3 with it, so its announcement reaches the line on one of them at least.
    pub(crate) fn hears_everywhere<N: Subscriber>(&self, resource: &Resource, nodes: &[N]) -> bool {
        if !self.lines.contains(resource) {
            return false;
        }
        let channel = waiting_channel(resource);
        (nodes.iter()).all(|n| n.is_up() && n.may_subscribe() && n.subscribed().contains(&channel))
    }

    /// The resources whose lines listen on their waiting channel.
    pub(crate) fn listening(&self) -> impl Iterator<Item = &Resource> {
        self.lines.iter()
    }

    /// Whether a line listens on its waiting channel: cheap, for the client to skip the
    /// lookups of [`listen`](Self::listen) when none does.
    #[inline]
    pub(crate) fn listens(&self) -> bool {
        !self.lines.is_empty()
    }

    /// The node's connection now speaks RESP3: it subscribes to every watched channel (a
    /// reconnection subscribes again). Whether it may have commands to send.
    pub(crate) fn subscribe_all<N: Subscriber>(&self, node: &mut N) -> bool {
        for channel in self.channels.keys() {
            if !node.subscribed().contains(channel) {
                node.subscribe(channel);
            }
        }
        !self.channels.is_empty()
    }

    /// Routes a push frame from `node`: a release announced on a watched channel is for
    /// the lock waiting on it, a waiter's announcement for the line listening for it, both
    /// returned; a subscription's confirmation answers the node's subscription; anything
    /// else is dropped.
    pub(crate) fn route<N: Subscriber>(&self, push: Push, node: &mut N) -> Option<Heard> {
        match push {
            Push::Message { channel, payload } => match self.channels.get(&channel)? {
                Watcher::Lock(op) => {
                    let notice = if let Some(id) = payload.strip_prefix(NEXT_PREFIX) {
                        Notice::Next(payload.slice_ref(id))
                    } else if let Some(id) = payload.strip_prefix(GRANT_PREFIX) {
                        Notice::Grant(payload.slice_ref(id))
                    } else {
                        Notice::Released
                    };
                    Some(Heard::Lock(*op, notice))
                }
                Watcher::Line(resource) => Some(Heard::Waiter(resource.clone())),
            },
            Push::Confirmation => {
                node.confirm_subscription();
                None
            }
            Push::Other => None,
        }
    }
}

/// Subscribes every node that is up to `channel` (if `wants` and it may) or unsubscribes
/// it (if it is subscribed); each node that got a command to send joins `dirty`. Whether
/// any node got one.
fn subscribe<N: Subscriber>(
    channel: &Bytes,
    wants: bool,
    nodes: &mut [N],
    dirty: &mut VecDeque<NodeId>,
) -> bool {
    let mut sent = false;
    for (i, node) in nodes.iter_mut().enumerate() {
        if !node.is_up() {
            continue;
        }
        let had = node.subscribed().iter().position(|c| c == channel);
        match (wants, had) {
            (true, None) if node.may_subscribe() => node.subscribe(channel),
            (false, Some(at)) => node.unsubscribe(at),
            _ => continue,
        }
        sent = true;
        if node.mark_dirty() {
            dirty.push_back(NodeId::new(i));
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(bytes: &[u8]) -> Result<Option<(Push, usize)>, ProtocolError> {
        decode_push(bytes, 1024)
    }

    #[test]
    fn a_message_names_its_channel_and_confirmations_are_told_apart() {
        let message = b">3\r\n$7\r\nmessage\r\n$19\r\nredlock:released:ab\r\n$0\r\n\r\n";
        assert_eq!(
            push(message).unwrap(),
            Some((
                Push::Message {
                    channel: Bytes::from_static(b"redlock:released:ab"),
                    payload: Bytes::new(),
                },
                message.len()
            ))
        );
        let confirm = b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n";
        assert_eq!(
            push(confirm).unwrap(),
            Some((Push::Confirmation, confirm.len()))
        );
        // Unsubscribing from every channel while subscribed to none names no channel.
        let none = b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n";
        assert_eq!(push(none).unwrap(), Some((Push::Confirmation, none.len())));
        // pmessage has four elements: not ours.
        let pmessage = b">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$1\r\nc\r\n$0\r\n\r\n";
        assert_eq!(push(pmessage).unwrap(), Some((Push::Other, pmessage.len())));
    }

    #[test]
    fn a_partial_push_waits_and_a_hostile_one_is_an_error() {
        let message = b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$0\r\n\r\n";
        for cut in 0..message.len() {
            assert_eq!(push(&message[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert!(push(b">1\r\n*1\r\n:1\r\n").is_err(), "nested aggregate");
        assert!(push(b">99999999999999999999\r\n").is_err());
        let mut long = b">2000\r\n".to_vec();
        long.extend(std::iter::repeat_n(&b":1\r\n"[..], 2000).flatten());
        assert!(push(&long).is_err(), "held to the reply cap");
    }

    #[test]
    fn publish_is_the_channels_command() {
        for key in [
            &b"k"[..],
            &[b'x'; 983][..],
            &[b'x'; 82][..],
            &[b'x'; 83][..],
            b"",
        ] {
            let mut ours = BytesMut::new();
            encode_publish(&mut ours, key);
            let mut theirs = BytesMut::new();
            let channel = release_channel(&Resource::from(key));
            resp::encode(&mut theirs, &[b"PUBLISH", &channel, b""]);
            assert_eq!(ours, theirs, "{} bytes", key.len());
        }
    }

    #[test]
    fn the_channel_is_the_prefix_and_the_key() {
        let channel = release_channel(&Resource::from(&b"k\r\n\x00"[..]));
        assert_eq!(&channel[..], b"redlock:released:k\r\n\x00");
    }
}
