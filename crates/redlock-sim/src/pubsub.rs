//! Pub/sub on a simulated node: each connection's [`Session`] (its database, protocol and
//! channels), the node's channel registry, and the `SUBSCRIBE`, `UNSUBSCRIBE` and `PUBLISH`
//! commands, answered as redis-server 7.0.15 and valkey-server 9.1.2 answer them.
//!
//! A publication becomes [`Delivery`]s, one per subscribed connection of the node (channels
//! are global across databases); carrying them over the network, and the faults on the way,
//! is the scheduler's (`push.rs`). Nothing here knows about links or time.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::profile::ServerProfile;
use crate::resp::{Frame, Protocol, ServerReply};

/// One connection as the node sees it: an id, the selected database, the protocol, and the
/// channels it is subscribed to. It lives as long as the connection; closing it (or a node
/// restart) ends its subscriptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    /// The node's id for the connection (`HELLO`'s `id`); 0 for a connection never accepted.
    pub(crate) id: u64,
    /// The database the connection selected.
    pub db: u32,
    /// The protocol the connection speaks.
    pub protocol: Protocol,
    channels: BTreeSet<Bytes>,
    /// The connection's user may not run `HELLO` (an ACL), whatever the server: it is
    /// answered `-NOPERM` and the connection stays on RESP2.
    hello_denied: bool,
}

/// A message for one subscribed connection of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The receiving connection ([`Session::id`]).
    pub session: u64,
    /// The channel published to.
    pub channel: Bytes,
    /// The message.
    pub payload: Bytes,
}

/// The node's subscriptions by channel, and the deliveries its publications left.
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    subscribers: BTreeMap<Bytes, BTreeSet<u64>>,
    outbox: Vec<Delivery>,
}

impl Session {
    /// A connection the node just accepted as `id`.
    pub(crate) fn accepted(id: u64) -> Self {
        Self {
            id,
            ..Self::default()
        }
    }

    /// The node's id for this connection.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// From now on the connection's user may not run `HELLO` (an ACL of that user's).
    pub(crate) fn deny_hello(&mut self) {
        self.hello_denied = true;
    }

    /// Whether the connection's user may not run `HELLO`.
    pub(crate) fn hello_denied(&self) -> bool {
        self.hello_denied
    }

    /// The channels the connection is subscribed to, in order.
    pub fn channels(&self) -> impl Iterator<Item = &Bytes> + '_ {
        self.channels.iter()
    }

    /// Whether RESP2 restricts the connection to the pub/sub commands: it has a
    /// subscription and speaks RESP2.
    pub(crate) fn in_subscribed_context(&self) -> bool {
        self.protocol == Protocol::Resp2 && !self.channels.is_empty()
    }
}

impl Delivery {
    /// The message frame: `message`, the channel, the payload (a push frame in RESP3).
    pub fn frame(&self) -> Frame {
        Frame::Push(vec![
            Frame::text("message"),
            Frame::Bulk(self.channel.clone()),
            Frame::Bulk(self.payload.clone()),
        ])
    }
}

impl Registry {
    /// Forgets every subscription (a restart: no connection survives it).
    pub(crate) fn clear(&mut self) {
        self.subscribers.clear();
        self.outbox.clear();
    }

    /// The connection closed: its subscriptions end.
    pub(crate) fn close(&mut self, session: &Session) {
        for channel in &session.channels {
            self.remove(session.id, channel);
        }
    }

    /// Delivers `payload` to every connection subscribed to `channel`; returns how many.
    pub(crate) fn publish(&mut self, channel: &Bytes, payload: &Bytes) -> i64 {
        let Some(ids) = self.subscribers.get(channel) else {
            return 0;
        };
        for &session in ids {
            self.outbox.push(Delivery {
                session,
                channel: channel.clone(),
                payload: payload.clone(),
            });
        }
        ids.len() as i64
    }

    /// How many connections are subscribed to each channel that has any: what a `PUBLISH`
    /// on it would answer.
    pub(crate) fn counts(&self) -> BTreeMap<Bytes, i64> {
        (self.subscribers.iter())
            .filter(|(_, ids)| !ids.is_empty())
            .map(|(channel, ids)| (channel.clone(), ids.len() as i64))
            .collect()
    }

    /// The deliveries left since the last call, in publication order.
    pub(crate) fn take_deliveries(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.outbox)
    }

    /// `SUBSCRIBE`, `UNSUBSCRIBE` or `PUBLISH` (`upper`, upper case) with arguments `rest`
    /// from `session`; `None` for a wrong arity.
    pub(crate) fn command(
        &mut self,
        session: &mut Session,
        upper: &[u8],
        rest: &[Bytes],
        profile: &ServerProfile,
        ignore_subscribe: bool,
    ) -> Option<Frame> {
        match (upper, rest) {
            (b"SUBSCRIBE", channels) => {
                self.subscribe(session, channels, profile, ignore_subscribe)
            }
            (b"UNSUBSCRIBE", channels) => Some(self.unsubscribe(session, channels)),
            (b"PUBLISH", [channel, message]) if profile.channels => {
                Some(Frame::Int(self.publish(channel, message)))
            }
            (b"PUBLISH", [_, _]) => Some(channels_denied(profile).into()),
            _ => None,
        }
    }

    /// `SUBSCRIBE channel...`: one confirmation per channel, `subscribe <channel> <count>`.
    /// With `ignore` (a fault) the confirmations go out and nothing is registered; a
    /// profile whose ACL denies channels answers `-NOPERM`, a normal reply even in RESP3.
    fn subscribe(
        &mut self,
        session: &mut Session,
        channels: &[Bytes],
        profile: &ServerProfile,
        ignore: bool,
    ) -> Option<Frame> {
        if channels.is_empty() {
            return None;
        }
        if !profile.channels {
            return Some(channels_denied(profile).into());
        }
        let mut frames = Vec::with_capacity(channels.len());
        for channel in channels {
            if !ignore && session.channels.insert(channel.clone()) {
                (self.subscribers.entry(channel.clone()).or_default()).insert(session.id);
            }
            // Ignored, the confirmation still counts the channel, as if it were registered.
            let count = (session.channels.len() + usize::from(ignore)) as i64;
            frames.push(confirmation("subscribe", Some(channel), count));
        }
        Some(Frame::Frames(frames))
    }

    /// `UNSUBSCRIBE [channel...]`: one confirmation per channel named (subscribed or not),
    /// or per channel subscribed when none is named, or `unsubscribe <null> 0` when there is
    /// none.
    fn unsubscribe(&mut self, session: &mut Session, channels: &[Bytes]) -> Frame {
        let named: Vec<Bytes> = match channels {
            [] => session.channels.iter().cloned().collect(),
            named => named.to_vec(),
        };
        if named.is_empty() {
            return Frame::Frames(vec![confirmation("unsubscribe", None, 0)]);
        }
        let mut frames = Vec::with_capacity(named.len());
        for channel in &named {
            if session.channels.remove(channel) {
                self.remove(session.id, channel);
            }
            let count = session.channels.len() as i64;
            frames.push(confirmation("unsubscribe", Some(channel), count));
        }
        Frame::Frames(frames)
    }

    fn remove(&mut self, id: u64, channel: &Bytes) {
        if let Some(ids) = self.subscribers.get_mut(channel) {
            ids.remove(&id);
            if ids.is_empty() {
                self.subscribers.remove(channel);
            }
        }
    }
}

/// The reply to `PUBLISH` or `SUBSCRIBE` where the node's ACL denies every channel
/// (`ACL SETUSER default resetchannels`), in the server's words.
pub(crate) fn channels_denied(profile: &ServerProfile) -> ServerReply {
    ServerReply::error(if profile.server == "valkey" {
        "NOPERM No permissions to access a channel"
    } else {
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    })
}

/// The commands a RESP2 connection with a subscription may still run.
pub(crate) fn allowed_in_subscribed_context(upper: &[u8]) -> bool {
    matches!(
        upper,
        b"SUBSCRIBE"
            | b"UNSUBSCRIBE"
            | b"PSUBSCRIBE"
            | b"PUNSUBSCRIBE"
            | b"SSUBSCRIBE"
            | b"SUNSUBSCRIBE"
            | b"PING"
            | b"QUIT"
            | b"RESET"
    )
}

/// The reply to any other command there, in Redis 7.0.15's words.
pub(crate) fn not_in_subscribed_context(upper: &[u8]) -> ServerReply {
    let name = String::from_utf8_lossy(upper).to_lowercase();
    ServerReply::error(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
         RESET are allowed in this context"
    ))
}

/// `<kind> <channel or null> <count>`, out of band.
fn confirmation(kind: &str, channel: Option<&Bytes>, count: i64) -> Frame {
    Frame::Push(vec![
        Frame::text(kind),
        channel.map_or(Frame::Nil, |c| Frame::Bulk(c.clone())),
        Frame::Int(count),
    ])
}
