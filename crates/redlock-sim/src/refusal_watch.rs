//! The refusal watch (docs/algorithm.md §9): an explicit extension called while more than
//! `N - q` nodes hold another type of key under the lock's name (they refuse it for good,
//! `WRONGTYPE`) cannot succeed, and must be reported lost at once, within one attempt
//! timeout, rather than retried until the lock's deadline. The watch records when the first
//! such call was made ([`OpRecord::doomed_extend`](crate::OpRecord::doomed_extend)); the
//! loss and its time are in [`OpRecord::lost_at`](crate::OpRecord::lost_at).

use redlock_core::OpId;

use crate::node::NodeState;
use crate::sim::Sim;

impl Sim {
    /// Client `c` called an explicit extension of `op` that the core accepted.
    pub(crate) fn watch_extend(&mut self, c: usize, op: OpId) {
        let now = self.now;
        let ops = self.checker.ops();
        let Some(record) = (ops.iter().rev()).find(|r| r.client == c && r.op == op) else {
            return;
        };
        if record.doomed_extend.is_some() {
            return;
        }
        let key = record.resource.clone();
        let mut refusing = 0;
        for node in &mut self.nodes {
            if node.state() != NodeState::Down && node.holds_other_type(now, key.as_bytes()) {
                refusing += 1;
            }
        }
        let config = &self.scenario.config;
        if refusing > config.nodes() - config.quorum() {
            self.checker.record(c, op, |r| r.doomed_extend = Some(now));
        }
    }
}
