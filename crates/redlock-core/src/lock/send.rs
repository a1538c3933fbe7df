//! The send path of a [`Lock`]: which request goes out next (cleanup releases first, then
//! the phase's rounds), in which form each node is sent it (script, `EVAL`, or the node's own
//! command: server.rs, `Offer`), and its bytes, shared by the nodes sent the same form. The
//! operation layer reads it as [`Request`]s; [`Client`](crate::Client) as RESP bytes
//! (client/pump.rs).

use bytes::{Bytes, BytesMut};

use super::{Lock, Request};
use crate::command::Encoder;
use crate::id::{NodeId, RequestId};
use crate::round::{Form, Round};
use crate::server::{NativeUse, NodeCommands, Offer};

impl Lock {
    /// The next request to send, if any, releasing and extending by script on every node.
    /// Drain after every call that changes the lock.
    pub fn poll_request(&mut self) -> Option<Request> {
        self.poll_request_using(|_| NodeCommands::SCRIPTS)
    }

    /// The next request to send, if any, releasing and extending each node by the commands
    /// `commands` names for it (see [`NodeCommands`]; the scripts work everywhere).
    ///
    /// A node that answers a native command with "unknown command" or a syntax error gets
    /// the request again as the script, at once; say [`NodeCommands::SCRIPTS`] for that node
    /// from then on to save the round trip.
    pub fn poll_request_using(
        &mut self,
        commands: impl Fn(NodeId) -> NodeCommands,
    ) -> Option<Request> {
        let (round, id, node, form) = self.next_send(commands)?;
        let command = round.command_for(form);
        Some(Request { id, node, command })
    }

    /// The next request as its id, its node, what it uses a native command for (if it does)
    /// and its RESP bytes, shared with the other nodes' requests of its round of that form.
    #[inline]
    pub(crate) fn next_transmit<O: Into<Offer>>(
        &mut self,
        encoder: &mut Encoder,
        commands: impl Fn(NodeId) -> O,
    ) -> Option<(RequestId, NodeId, Option<NativeUse>, &Bytes)> {
        let (round, id, node, form) = self.next_send(commands)?;
        let native = match form {
            Form::Native(native) => Some(native.used_for()),
            Form::Plain | Form::Eval => None,
        };
        Some((id, node, native, round.encoded(form, encoder)))
    }

    /// Whether the request `id` is the release of a held lock, whose native form the
    /// client follows with the release's announcement (command.rs, `announce`).
    pub(crate) fn announces(&mut self, id: RequestId) -> bool {
        let seq = id.round();
        match self.ctx.cleanup.iter().find(|r| r.seq == seq) {
            Some(round) => round.command.announces(),
            None => (self.phase.round_with_seq(seq)).is_some_and(|r| r.command.announces()),
        }
    }

    /// The script form of the request `id`, as `EVAL` (never answered `-NOSCRIPT`), to be
    /// sent in its place if the node refuses its native command after the lock stopped
    /// waiting for it (client.rs). None if its round is gone or its command is no script.
    pub(crate) fn script_form(&mut self, id: RequestId) -> Option<Bytes> {
        self.eval_form(id, |_| true)
    }

    /// The `EVAL` form of the request `id` if it is a kind's release or a writer's abandon
    /// ([`Command::lets_go`](crate::command::Command::lets_go)), to be sent in its place if the
    /// node answers `-NOSCRIPT` after the lock stopped waiting for it (client.rs).
    pub(crate) fn lets_go_form(&mut self, id: RequestId) -> Option<Bytes> {
        self.eval_form(id, crate::command::Command::lets_go)
    }

    /// The `EVAL` form of the request `id`, if its round is still known and `wanted` says
    /// yes to its command.
    fn eval_form(
        &mut self,
        id: RequestId,
        wanted: impl Fn(&crate::command::Command) -> bool,
    ) -> Option<Bytes> {
        let seq = id.round();
        let round = match self.ctx.cleanup.iter().find(|r| r.seq == seq) {
            Some(round) => round,
            None => self.phase.round_with_seq(seq)?,
        };
        let eval = Some(&round.command).filter(|c| wanted(c))?.as_eval()?;
        let mut buf = BytesMut::new();
        eval.encode(&mut buf);
        Some(buf.freeze())
    }

    /// The next request, with its round: cleanup releases first, then the phase's round.
    ///
    /// No order between rounds is needed for safety: every attempt stores its own value, so
    /// an older round's command that runs after a newer one's, on this connection or on a
    /// dead one whose bytes arrive late, compares another value and touches nothing of the
    /// newer attempt (algorithm.md §5).
    #[inline]
    fn next_send<O: Into<Offer>>(
        &mut self,
        commands: impl Fn(NodeId) -> O,
    ) -> Option<(&mut Round, RequestId, NodeId, Form)> {
        let floor = self.ctx.params.pipeline_floor;
        let commands = |n: NodeId| {
            let mut offer: Offer = commands(n).into();
            // A negative control's (`_mutants`): the pipeline without its floor.
            offer.floorless = !floor;
            offer
        };
        for round in &mut self.ctx.cleanup {
            if let Some((id, node, form)) = round.next_send(commands) {
                return Some((round, id, node, form));
            }
        }
        let (round, more) = self.phase.rounds_mut();
        if let Some(round) = round
            && let Some((id, node, form)) = round.next_send(commands)
        {
            return Some((round, id, node, form));
        }
        // The rounds sent after it (a probe; an inspection's reads), each to every node
        // before the next, so that each node gets them in one order.
        for round in more {
            if let Some((id, node, form)) = round.next_send(commands) {
                return Some((round, id, node, form));
            }
        }
        None
    }
}
