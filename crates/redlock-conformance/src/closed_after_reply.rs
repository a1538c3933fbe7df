//! A node that closes the connection right after a reply (docs/design.md, "Connections:
//! generations and reasons"; `Client`'s MUST list, duty 6): the driver reads the end of
//! stream that came with the reply and reports the connection dropped, so an idle client
//! reconnects at once instead of finding the connection closed only when its next request
//! fails to be written.

use std::time::Duration;

use redlock_core::KeyState;

use crate::Driver;
use crate::scenarios::{cluster, eventually};

/// Three nodes behind proxies; a client with the default configuration, connected and idle.
/// Round after round, node 0's proxy forwards the node's answer to an inspection and shuts
/// the client's side down right behind it, so that the reply and the end of stream reach
/// the client back to back, often in one readiness event; then, with no further request
/// from the client, the client must connect again (the proxy accepts a new connection)
/// within `RECONNECT`. Twenty rounds, as in some the end comes after the client has read
/// the reply, which even a driver that misses the other case notices.
///
/// Nothing but the end of stream can make an idle client reconnect here: with no lock held
/// and no call waiting, the core writes nothing to a node (no extension, no `PTTL` probe, no
/// subscription; the clock-rate check's `TIME` only rides along with a request), and a
/// request's timeout never closes a connection. So a driver that misses the end of stream
/// keeps the dead connection for the whole bound, while one that reads it reconnects after
/// the first backoff delay (25 to 75 ms, as the reply reset it).
pub fn a_node_that_closes_right_after_a_reply_is_reconnected_while_idle<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.proxy_urls(), |b| b).unwrap();
    let proxy = c.proxy(0);
    // Node 0 answered an inspection: connected, its handshake done, nothing in flight.
    let answered = || {
        d.inspect(KEY)
            .is_ok_and(|seen| seen.nodes.first() == Some(&KeyState::Free))
    };
    for round in 0..ROUNDS {
        assert!(
            eventually(SETTLE, answered),
            "round {round}: node 0 never answered"
        );
        let accepted = proxy.accepted();
        proxy.close_after_next_reply();
        // Node 0's answer is the last thing it sends on this connection; the other two
        // answer as usual.
        d.inspect(KEY).expect("an inspection");
        let again = eventually(RECONNECT, || proxy.accepted() > accepted);
        assert!(
            again,
            "round {round}: the client did not notice node 0 closing the connection right \
             after its reply within {RECONNECT:?}, and did not reconnect"
        );
    }
}

const KEY: &str = "closed-after-reply";
/// Rounds of a close right after a reply: enough that the reply and the end of stream come
/// in one readiness event in some of them.
const ROUNDS: usize = 20;
/// A reconnected node answers well within this.
const SETTLE: Duration = Duration::from_secs(3);
/// The first reconnect delay is at most 75 ms; this leaves ample room on a busy machine.
const RECONNECT: Duration = Duration::from_secs(3);
