//! One fan-out: the same command to all N nodes at once, one vote per node, a deadline, and
//! the decision as early as the votes allow.
//!
//! A round knows nothing of locks: acquire, extend and release each read its result. It
//! resends a script as `EVAL` once per node on `-NOSCRIPT`, and turns every node that has
//! not voted by the deadline into a [`NodeFault::Timeout`].

use std::time::Instant;

use bytes::Bytes;

use crate::command::{Command, Encoder, Vote};
use crate::id::{NodeId, NodeName, RequestId};
use crate::io::NodeFault;
use crate::quorum::{Decision, Tally};

/// One node's part in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Not handed out yet.
    Unsent,
    /// Sent, no vote yet.
    Pending,
    /// `-NOSCRIPT` came back; the `EVAL` retry is waiting to be handed out.
    Resend,
    /// Resent as `EVAL`, no vote yet.
    Resent,
    /// Voted.
    Done(Vote),
}

/// Which form of the round's command a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// The command as made (`SET`, or a script's `EVALSHA`).
    Plain,
    /// A script's `EVAL`, resent once after `-NOSCRIPT` (algorithm.md §12).
    Eval,
}

#[derive(Debug)]
pub(crate) struct Round {
    pub(crate) seq: u32,
    pub(crate) command: Command,
    /// The RESP bytes of the plain form, encoded when first sent and shared by every node's
    /// transmit.
    plain: Option<Bytes>,
    /// The same for the `EVAL` form, which only a node that lost its script cache needs:
    /// boxed, so that every round (moved whole on each phase change) stays small.
    eval: Option<Box<Bytes>>,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    pub(crate) slots: Vec<Slot>,
    tally: Tally,
    /// Lowest node index that may still have something to hand out.
    cursor: usize,
    open: usize,
}

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
            plain: None,
            eval: None,
            started,
            deadline,
            slots,
            tally: Tally::new(nodes, quorum),
            cursor: 0,
            open: nodes,
        }
    }

    /// The next request to hand out, in node order, and the form of the command it carries.
    #[inline]
    pub(crate) fn next_send(&mut self) -> Option<(RequestId, NodeId, Form)> {
        while self.cursor < self.slots.len() {
            let i = self.cursor;
            self.cursor += 1;
            let (form, sent) = match self.slots[i] {
                Slot::Unsent => (Form::Plain, Slot::Pending),
                Slot::Resend => (Form::Eval, Slot::Resent),
                _ => continue,
            };
            self.slots[i] = sent;
            let node = NodeId::new(i);
            return Some((RequestId::new(self.seq, node), node, form));
        }
        None
    }

    /// The command of a request handed out by [`next_send`](Self::next_send).
    pub(crate) fn command_for(&self, form: Form) -> Command {
        match form {
            Form::Plain => self.command.clone(),
            Form::Eval => Self::eval_of(&self.command),
        }
    }

    /// The RESP bytes of a request handed out by [`next_send`](Self::next_send): encoded
    /// once per form, then shared.
    #[inline]
    pub(crate) fn encoded(&mut self, form: Form, encoder: &mut Encoder) -> &Bytes {
        let command = &self.command;
        match form {
            Form::Plain => self.plain.get_or_insert_with(|| encoder.encode(command)),
            Form::Eval => self
                .eval
                .get_or_insert_with(|| Box::new(encoder.encode(&Self::eval_of(command)))),
        }
    }

    /// The `EVAL` form; only script commands are ever resent (see `handle_reply`).
    fn eval_of(command: &Command) -> Command {
        command.as_eval().unwrap_or_else(|| command.clone())
    }

    /// Records a node's reply (or failure). Late or duplicate replies are ignored.
    #[inline]
    pub(crate) fn handle_reply(&mut self, node: NodeId, vote: Vote) {
        let i = node.index();
        let Some(slot) = self.slots.get(i) else {
            return;
        };
        match (slot, vote) {
            (Slot::Pending, Vote::NoScript) => {
                self.slots[i] = Slot::Resend;
                self.cursor = self.cursor.min(i);
            }
            (Slot::Resent, Vote::NoScript) => {
                let fault = NodeFault::Server {
                    command: "EVAL",
                    message: "NOSCRIPT after EVAL".into(),
                };
                self.record(i, Vote::Fault(fault));
            }
            (Slot::Pending | Slot::Resent, vote) => self.record(i, vote),
            // A reply for a slot not waiting (already timed out, or a stray): swallowed.
            _ => {}
        }
    }

    /// Marks every node without a vote as timed out.
    pub(crate) fn expire(&mut self) {
        for i in 0..self.slots.len() {
            if !matches!(self.slots[i], Slot::Done(_)) {
                self.record(i, Vote::Fault(NodeFault::Timeout));
            }
        }
    }

    #[inline]
    fn record(&mut self, i: usize, vote: Vote) {
        self.tally.add(vote == Vote::Yes);
        self.slots[i] = Slot::Done(vote);
        self.open -= 1;
    }

    #[inline]
    pub(crate) fn decision(&self) -> Decision {
        self.tally.decision()
    }

    /// Every node has voted (or timed out).
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.open == 0
    }

    /// Nodes whose vote was [`Vote::No`], by name.
    pub(crate) fn nodes_voting_no(&self, names: &[NodeName]) -> Vec<NodeName> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Slot::Done(Vote::No) => Some(name(names, i)),
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
    use crate::resp::Reply;
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

    #[test]
    fn hands_out_one_request_per_node_then_resends_noscript_once() {
        let cmd = Command::release(&Resource::from("k"), &Token::new("t").unwrap());
        let mut r = round(cmd.clone());
        let sent: Vec<_> = std::iter::from_fn(|| r.next_send()).collect();
        assert_eq!(sent.len(), 3);
        assert!(sent.iter().all(|(_, _, form)| *form == Form::Plain));
        assert_eq!(r.command_for(Form::Plain), cmd);
        let noscript = Reply::Error(Bytes::from_static(b"NOSCRIPT"));
        r.handle_reply(NodeId::new(1), cmd.vote(&noscript));
        let (_, node, form) = r.next_send().unwrap();
        assert_eq!(node, NodeId::new(1));
        assert_eq!(form, Form::Eval);
        let eval = r.command_for(Form::Eval);
        let mut encoder = Encoder::default();
        let mut bytes = bytes::BytesMut::new();
        eval.encode(&mut bytes);
        assert_eq!(r.encoded(Form::Eval, &mut encoder)[..], bytes[..]);
        assert_eq!(Some(eval.clone()), cmd.as_eval());
        assert!(r.next_send().is_none());
        // A second NOSCRIPT (after EVAL) is a fault, not another resend.
        r.handle_reply(NodeId::new(1), eval.vote(&noscript));
        assert!(r.next_send().is_none());
        assert_eq!(r.faults(&[]).len(), 1);
    }

    #[test]
    fn late_replies_after_expiry_are_swallowed() {
        let cmd = Command::set_nx_px(&Resource::from("k"), &Token::new("t").unwrap(), 100);
        let mut r = round(cmd);
        while r.next_send().is_some() {}
        r.handle_reply(NodeId::new(0), Vote::Yes);
        r.expire();
        assert!(r.is_complete());
        assert_eq!(r.decision(), Decision::Impossible);
        r.handle_reply(NodeId::new(1), Vote::Yes);
        r.handle_reply(NodeId::new(9), Vote::Yes);
        assert_eq!(r.decision(), Decision::Impossible);
        assert_eq!(r.faults(&[]).len(), 2);
    }
}
