//! One fan-out: the same command to all N nodes at once, one vote per node, a deadline, and
//! the decision as early as the votes allow.
//!
//! A round knows nothing of locks: acquire, extend and release each read its result. It
//! sends each node the node's native command where it has one (server.rs), resends a script
//! as `EVAL` once per node on `-NOSCRIPT` and a refused native command once as the script,
//! and turns every node that has not voted by the deadline into a [`NodeFault::Timeout`].

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::command::{Command, CommandKind, Encoder, Native, Vote};
use crate::id::{NodeId, NodeName, RequestId};
use crate::io::NodeFault;
use crate::quorum::{Decision, Tally};
use crate::resp::Reply;
#[cfg(test)]
use crate::server::NodeCommands;
use crate::server::Offer;

/// One node's part in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Not handed out yet.
    Unsent,
    /// Sent in this form, no vote yet.
    Sent(Form),
    /// To be handed out again in this form: as `EVAL` after `-NOSCRIPT`, or as the script
    /// after the node refused a native command.
    Resend(Form),
    /// Voted.
    Done(Vote),
    /// Not part of this round (a fence write-back goes only to the nodes that need it).
    Skipped,
    /// Sent, but the node's connection broke (or was down) before it answered; handed out
    /// again, on the node's next connection, once the resend is due. Only in rounds that
    /// resend (background releases).
    Broken,
}

/// Which form of the round's command a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// The command as made (`SET`, or a script's `EVALSHA`).
    Plain,
    /// A script's `EVAL`, resent once after `-NOSCRIPT` (algorithm.md §12).
    Eval,
    /// The node's own command for what the script does (server.rs): `DELIFEQ`, `DELEX` or
    /// `SET … IFEQ`.
    Native(Native),
}

#[derive(Debug)]
pub(crate) struct Round {
    pub(crate) seq: u32,
    pub(crate) command: Command,
    /// The RESP bytes of the first form handed out, encoded once and shared by every
    /// node's transmit of that form.
    first: Option<(Form, Bytes)>,
    /// The same for other forms: `EVAL` for a node that lost its script cache, or a second
    /// kind of node in a mixed cluster. Empty (no allocation) in the usual round.
    more: Vec<(Form, Bytes)>,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    pub(crate) slots: Vec<Slot>,
    tally: Tally,
    /// Lowest node index that may still have something to hand out.
    cursor: usize,
    open: usize,
    /// Set for a round whose requests go out again after a broken connection.
    resend: Option<Resend>,
}

/// When a resending round hands its broken requests out again: after a delay that doubles
/// from [`RESEND_DELAY_MIN`] each time, until the round's deadline.
#[derive(Debug, Clone, Copy)]
struct Resend {
    at: Option<Instant>,
    delay: Duration,
}

/// The first wait before a request whose connection broke is sent again. The node's own
/// reconnection takes at least its backoff (50 ms by default); a resend before that fails
/// at once, costs nothing, and waits twice as long next time.
const RESEND_DELAY_MIN: Duration = Duration::from_millis(5);

impl Round {
    /// A round over `nodes` nodes needing `quorum` yes votes. `slots` may be a finished
    /// round's, to reuse its allocation; its contents are replaced.
    pub(crate) fn new(
        seq: u32,
        command: Command,
        started: Instant,
        deadline: Instant,
        (nodes, quorum): (usize, usize),
        mut slots: Vec<Slot>,
    ) -> Self {
        slots.clear();
        slots.extend((0..nodes).map(|_| Slot::Unsent));
        Self {
            seq,
            command,
            first: None,
            more: Vec::new(),
            started,
            deadline,
            slots,
            tally: Tally::new(nodes, quorum),
            cursor: 0,
            open: nodes,
            resend: None,
        }
    }

    /// Makes the round send a request again, on the node's next connection, when the
    /// connection it went out on broke before the answer (until the deadline). For
    /// background releases: compare-and-delete makes a repeat harmless, and a key whose
    /// release was lost would otherwise block every other client until its ttl.
    pub(crate) fn resending(mut self) -> Self {
        self.resend.get_or_insert(Resend {
            at: None,
            delay: RESEND_DELAY_MIN,
        });
        self
    }

    /// Readies the round, decided at `now`, to go on in the background for the nodes that
    /// have not answered and those whose connection broke before they answered (sent again
    /// at once, on their next connection): a resending round, until its deadline. Says
    /// whether anything is left to do (not once every node answered or the deadline passed).
    pub(crate) fn continue_in_background(&mut self, now: Instant) -> bool {
        if self.deadline <= now {
            return false;
        }
        for i in 0..self.slots.len() {
            if let Slot::Done(Vote::Fault(NodeFault::Connection(_))) = self.slots[i] {
                // Counted as open again; the vote it had no longer matters once decided.
                self.slots[i] = Slot::Unsent;
                self.cursor = self.cursor.min(i);
                self.open += 1;
            }
        }
        if self.is_complete() {
            return false;
        }
        self.resend.get_or_insert(Resend {
            at: None,
            delay: RESEND_DELAY_MIN,
        });
        true
    }

    /// When broken requests are due to go out again, if any wait.
    #[inline]
    pub(crate) fn resend_at(&self) -> Option<Instant> {
        self.resend.and_then(|r| r.at)
    }

    /// Arms the resend of broken requests, if any wait and none is armed.
    pub(crate) fn arm_resend(&mut self, now: Instant) {
        let broken = self.slots.contains(&Slot::Broken);
        if let Some(resend) = &mut self.resend
            && broken
            && resend.at.is_none()
        {
            resend.at = Some(crate::time::add(now, resend.delay));
            resend.delay = resend.delay.saturating_mul(2);
        }
    }

    /// Hands the broken requests out again if their resend is due at `now`.
    pub(crate) fn resend_due(&mut self, now: Instant) {
        let Some(resend) = &mut self.resend else {
            return;
        };
        if resend.at.is_none_or(|at| at > now) {
            return;
        }
        resend.at = None;
        for i in 0..self.slots.len() {
            if self.slots[i] == Slot::Broken {
                // Unsent, not the form it went out in: the node's next connection may offer
                // other commands.
                self.slots[i] = Slot::Unsent;
                self.cursor = self.cursor.min(i);
            }
        }
    }

    /// A round of `command` to the nodes `targets` marks (by index; the others are
    /// [`Slot::Skipped`]), needing `quorum` yes votes among them.
    pub(crate) fn to_nodes(
        seq: u32,
        command: Command,
        (started, deadline): (Instant, Instant),
        targets: &[bool],
        quorum: usize,
        slots: Vec<Slot>,
    ) -> Self {
        let asked = targets.iter().filter(|&&t| t).count();
        let mut round = Self::new(seq, command, started, deadline, (asked, quorum), slots);
        round.slots.clear();
        round
            .slots
            .extend((targets.iter()).map(|&t| if t { Slot::Unsent } else { Slot::Skipped }));
        round
    }

    /// The next request to hand out, in node order, and the form of the command it carries:
    /// the node's native command where `commands` says it has one, else the command as
    /// made.
    #[inline]
    pub(crate) fn next_send<O: Into<Offer>>(
        &mut self,
        commands: impl Fn(NodeId) -> O,
    ) -> Option<(RequestId, NodeId, Form)> {
        while self.cursor < self.slots.len() {
            let i = self.cursor;
            self.cursor += 1;
            let node = NodeId::new(i);
            let form = match self.slots[i] {
                // Only a script has a native twin: an acquire round asks nothing.
                Slot::Unsent => match self.command.kind() {
                    CommandKind::EvalSha(..) => match self.command.native(&commands(node).into()) {
                        Some(native) => Form::Native(native),
                        None => Form::Plain,
                    },
                    // Made as a native command (a negative control's `SetEach`): its replies
                    // are gathered as the native form's.
                    CommandKind::Native(native) => Form::Native(native),
                    _ => Form::Plain,
                },
                Slot::Resend(form) => form,
                _ => continue,
            };
            self.slots[i] = Slot::Sent(form);
            return Some((RequestId::new(self.seq, node), node, form));
        }
        None
    }

    /// The command of a request handed out by [`next_send`](Self::next_send).
    pub(crate) fn command_for(&self, form: Form) -> Command {
        self.command.with_kind(self.kind_of(form))
    }

    /// The command kind a form sends.
    #[inline]
    fn kind_of(&self, form: Form) -> CommandKind {
        match form {
            Form::Plain => self.command.kind(),
            // Only script commands are ever resent as `EVAL` (see `handle_reply`).
            Form::Eval => self.command.kind().as_eval().unwrap_or(self.command.kind()),
            Form::Native(native) => CommandKind::Native(native),
        }
    }

    /// The RESP bytes of a request handed out by [`next_send`](Self::next_send): encoded
    /// once per form, then shared.
    #[inline]
    pub(crate) fn encoded(&mut self, form: Form, encoder: &mut Encoder) -> &Bytes {
        match &self.first {
            Some((f, _)) if *f == form => {}
            None => {
                let bytes = encoder.encode(&self.command_for(form));
                self.first = Some((form, bytes));
            }
            Some(_) => return self.encoded_more(form, encoder),
        }
        match &self.first {
            Some((_, bytes)) => bytes,
            None => unreachable!("set above"),
        }
    }

    #[cold]
    fn encoded_more(&mut self, form: Form, encoder: &mut Encoder) -> &Bytes {
        let i = match self.more.iter().position(|(f, _)| *f == form) {
            Some(i) => i,
            None => {
                let bytes = encoder.encode(&self.command_for(form));
                self.more.push((form, bytes));
                self.more.len() - 1
            }
        };
        &self.more[i].1
    }

    /// Records a node's reply (or failure), read as the form it was sent in. Late or
    /// duplicate replies are ignored.
    #[cfg(test)]
    pub(crate) fn handle_reply(&mut self, node: NodeId, reply: Result<&Reply, NodeFault>) {
        self.handle_reply_vetoed(node, reply, None);
    }

    /// [`handle_reply`](Self::handle_reply), recording a "yes" as `veto` if there is one (a
    /// quarantined node's grant: quarantine.rs).
    #[inline]
    pub(crate) fn handle_reply_vetoed(
        &mut self,
        node: NodeId,
        reply: Result<&Reply, NodeFault>,
        veto: Option<NodeFault>,
    ) {
        let i = node.index();
        let Some(&Slot::Sent(form)) = self.slots.get(i) else {
            // A reply for a slot not waiting (already timed out, or a stray): swallowed.
            return;
        };
        let vote = match reply {
            Ok(reply) => self.kind_of(form).vote(reply),
            Err(NodeFault::Connection(_)) if self.resend.is_some() => {
                self.slots[i] = Slot::Broken;
                return;
            }
            Err(fault) => Vote::Fault(fault),
        };
        let vote = match (vote, veto) {
            (Vote::Yes | Vote::Counter(_), Some(fault)) => Vote::Fault(fault),
            (vote, _) => vote,
        };
        match (form, vote) {
            (Form::Plain, Vote::NoScript) => self.resend(i, Form::Eval),
            (_, Vote::NoScript) => {
                let fault = NodeFault::Server {
                    command: "EVAL",
                    message: "NOSCRIPT after EVAL".into(),
                };
                self.record(i, Vote::Fault(fault));
            }
            // The node lacks the native command: once more as the script (the client has
            // turned the node over to scripts, so later rounds send the script first).
            (Form::Native(_), Vote::Unsupported(_)) => self.resend(i, Form::Plain),
            (_, Vote::Unsupported(fault)) => self.record(i, Vote::Fault(fault)),
            (_, vote) => self.record(i, vote),
        }
    }

    fn resend(&mut self, i: usize, form: Form) {
        self.slots[i] = Slot::Resend(form);
        self.cursor = self.cursor.min(i);
    }

    /// Marks every node without a vote as timed out.
    pub(crate) fn expire(&mut self) {
        for i in 0..self.slots.len() {
            if !matches!(self.slots[i], Slot::Done(_) | Slot::Skipped) {
                self.record(i, Vote::Fault(NodeFault::Timeout));
            }
        }
    }

    #[inline]
    fn record(&mut self, i: usize, vote: Vote) {
        self.tally.add(matches!(vote, Vote::Yes | Vote::Counter(_)));
        self.slots[i] = Slot::Done(vote);
        self.open -= 1;
    }

    #[inline]
    pub(crate) fn decision(&self) -> Decision {
        self.tally.decision()
    }

    /// Whether `node` has not answered yet.
    pub(crate) fn awaits(&self, node: usize) -> bool {
        (self.slots.get(node)).is_some_and(|s| !matches!(s, Slot::Done(_) | Slot::Skipped))
    }

    /// Every node has voted (or timed out).
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.open == 0
    }

    /// Nodes whose vote was [`Vote::Yes`], by name.
    pub(crate) fn nodes_voting_yes(&self, names: &[NodeName]) -> Vec<NodeName> {
        (self.slots.iter().enumerate())
            .filter(|(_, s)| **s == Slot::Done(Vote::Yes))
            .map(|(i, _)| name(names, i))
            .collect()
    }

    /// Nodes whose vote was [`Vote::No`] (or a waiter's place behind another: a "no" too),
    /// by name.
    pub(crate) fn nodes_voting_no(&self, names: &[NodeName]) -> Vec<NodeName> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Slot::Done(Vote::No | Vote::Queued { .. }) => Some(name(names, i)),
                _ => None,
            })
            .collect()
    }

    /// Nodes that failed, by name, with their faults.
    pub(crate) fn faults(&self, names: &[NodeName]) -> Vec<(NodeName, NodeFault)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Slot::Done(Vote::Fault(f)) => Some((name(names, i), f.clone())),
                _ => None,
            })
            .collect()
    }
}

/// Node `i`'s name; `node#i` if the list is short (it never is for a checked configuration).
pub(crate) fn name(names: &[NodeName], i: usize) -> NodeName {
    names
        .get(i)
        .cloned()
        .unwrap_or_else(|| NodeName::unnamed(NodeId::new(i)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;
    use crate::server::{ExtendCommand, ReleaseCommand};
    use crate::token::{Resource, Token};

    fn round(command: Command) -> Round {
        let t = crate::test_epoch::epoch();
        Round::new(
            7,
            command,
            t,
            t + Duration::from_millis(10),
            (3, 2),
            Vec::new(),
        )
    }

    const SCRIPTS: fn(NodeId) -> NodeCommands = |_| NodeCommands::SCRIPTS;

    fn error(text: &'static str) -> Reply {
        Reply::Error(Bytes::from_static(text.as_bytes()))
    }

    #[test]
    fn hands_out_one_request_per_node_then_resends_noscript_once() {
        let cmd = Command::release(&Resource::from("k"), &Token::new("t").unwrap());
        let mut r = round(cmd.clone());
        let sent: Vec<_> = std::iter::from_fn(|| r.next_send(SCRIPTS)).collect();
        assert_eq!(sent.len(), 3);
        assert!(sent.iter().all(|(_, _, form)| *form == Form::Plain));
        assert_eq!(r.command_for(Form::Plain), cmd);
        let noscript = error("NOSCRIPT");
        r.handle_reply(NodeId::new(1), Ok(&noscript));
        let (_, node, form) = r.next_send(SCRIPTS).unwrap();
        assert_eq!(node, NodeId::new(1));
        assert_eq!(form, Form::Eval);
        let eval = r.command_for(Form::Eval);
        let mut encoder = Encoder::default();
        let mut bytes = bytes::BytesMut::new();
        eval.encode(&mut bytes);
        assert_eq!(r.encoded(Form::Eval, &mut encoder)[..], bytes[..]);
        assert_eq!(Some(eval.clone()), cmd.as_eval());
        assert!(r.next_send(SCRIPTS).is_none());
        // A second NOSCRIPT (after EVAL) is a fault, not another resend.
        r.handle_reply(NodeId::new(1), Ok(&noscript));
        assert!(r.next_send(SCRIPTS).is_none());
        assert_eq!(r.faults(&[]).len(), 1);
    }

    #[test]
    fn native_nodes_get_their_command_and_a_refusal_is_resent_as_the_script() {
        let cmd = Command::release(&Resource::from("k"), &Token::new("t").unwrap());
        let mut r = round(cmd.clone());
        // Node 1 has DELIFEQ, the others do not.
        let valkey = NodeCommands {
            release: ReleaseCommand::DelIfEq,
            ..NodeCommands::SCRIPTS
        };
        let commands = |n: NodeId| {
            if n.index() == 1 {
                valkey
            } else {
                NodeCommands::SCRIPTS
            }
        };
        let sent: Vec<_> = std::iter::from_fn(|| r.next_send(commands)).collect();
        let forms: Vec<_> = sent.iter().map(|s| s.2).collect();
        let native = Form::Native(Native::Delifeq);
        assert_eq!(forms, [Form::Plain, native, Form::Plain]);
        let mut encoder = Encoder::default();
        let plain = r.encoded(Form::Plain, &mut encoder).clone();
        let delifeq = r.encoded(native, &mut encoder).clone();
        assert!(plain.starts_with(b"*5\r\n$7\r\nEVALSHA"));
        assert_eq!(
            &delifeq[..],
            b"*3\r\n$7\r\nDELIFEQ\r\n$1\r\nk\r\n$1\r\nt\r\n"
        );
        // Each form is encoded once and shared.
        assert_eq!(
            r.encoded(Form::Plain, &mut encoder).as_ptr(),
            plain.as_ptr()
        );
        assert_eq!(r.encoded(native, &mut encoder).as_ptr(), delifeq.as_ptr());
        // DELIFEQ's 0 cannot say whose key it was, or whether there was one.
        r.handle_reply(NodeId::new(1), Ok(&Reply::Integer(0)));
        assert_eq!(r.slots[1], Slot::Done(Vote::NotHeldOrMissing));
        r.handle_reply(NodeId::new(0), Ok(&Reply::Integer(-1)));
        assert_eq!(r.slots[0], Slot::Done(Vote::Missing));

        // A node that does not know the command gets the script, once; its refusal of the
        // script is a fault like any other.
        let mut r = round(cmd);
        let all_native = |_| valkey;
        while r.next_send(all_native).is_some() {}
        let unknown = error("ERR unknown command 'DELIFEQ', with args beginning with: 'k' 't'");
        r.handle_reply(NodeId::new(2), Ok(&unknown));
        assert_eq!(r.slots[2], Slot::Resend(Form::Plain));
        assert_eq!(
            r.next_send(all_native).map(|s| (s.1, s.2)),
            Some((NodeId::new(2), Form::Plain))
        );
        r.handle_reply(NodeId::new(2), Ok(&unknown));
        assert!(matches!(
            &r.slots[2],
            Slot::Done(Vote::Fault(NodeFault::Server {
                command: "EVALSHA",
                ..
            }))
        ));
        // A permission error on the native command is the node's answer, not a resend.
        r.handle_reply(NodeId::new(0), Ok(&error("NOPERM no")));
        assert!(matches!(
            &r.slots[0],
            Slot::Done(Vote::Fault(NodeFault::Server {
                command: "DELIFEQ",
                ..
            }))
        ));
    }

    #[test]
    fn extensions_use_set_ifeq_only_for_our_own_extend_script() {
        let (k, t) = (Resource::from("k"), Token::new("t").unwrap());
        let native = NodeCommands {
            extend: ExtendCommand::SetIfEq,
            ..NodeCommands::SCRIPTS
        };
        let mut r = round(Command::extend(&k, &t, 500, &crate::command::EXTEND_SCRIPT));
        let (_, _, form) = r.next_send(|_| native).unwrap();
        assert_eq!(form, Form::Native(Native::SetIfeq));
        let args = r.command_for(form).args();
        assert_eq!(args, ["SET", "k", "t", "IFEQ", "t", "PX", "500"]);
        r.handle_reply(NodeId::new(0), Ok(&Reply::Nil));
        assert_eq!(r.slots[0], Slot::Done(Vote::No));
        let (_, _, _) = r.next_send(|_| native).unwrap();
        r.handle_reply(NodeId::new(1), Ok(&Reply::Ok));
        assert_eq!(r.slots[1], Slot::Done(Vote::Yes));
        let (_, _, _) = r.next_send(|_| native).unwrap();
        r.handle_reply(NodeId::new(2), Ok(&error("ERR syntax error")));
        assert_eq!(r.slots[2], Slot::Resend(Form::Plain));
        // Acquisitions never change form.
        let mut r = round(Command::set_nx_px(&k, &t, 500));
        assert_eq!(r.next_send(|_| native).unwrap().2, Form::Plain);
    }

    #[test]
    fn late_replies_after_expiry_are_swallowed() {
        let cmd = Command::set_nx_px(&Resource::from("k"), &Token::new("t").unwrap(), 100);
        let mut r = round(cmd);
        while r.next_send(SCRIPTS).is_some() {}
        r.handle_reply(NodeId::new(0), Ok(&Reply::Ok));
        r.expire();
        assert!(r.is_complete());
        assert_eq!(r.decision(), Decision::Impossible);
        r.handle_reply(NodeId::new(1), Ok(&Reply::Ok));
        r.handle_reply(NodeId::new(9), Ok(&Reply::Ok));
        assert_eq!(r.decision(), Decision::Impossible);
        assert_eq!(r.faults(&[]).len(), 2);
    }
}
