//! The TCP proxy in front of a real node: forwarding, latency (lower bounds only), blackhole,
//! cut, a close right behind a reply, node death behind the proxy, and a bounded drop.

use std::thread;
use std::time::{Duration, Instant};

use redlock_testkit::{Cluster, Conn, Proxy, Reply};

const TIMEOUT: Duration = Duration::from_secs(5);

fn pong() -> Reply {
    Reply::simple("PONG")
}

/// Polls `cond` every 5 ms for at most 5 s.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn forwards_both_ways() {
    let cluster = Cluster::start(1).unwrap();
    let proxy = cluster.proxy(0);
    assert_eq!(proxy.target(), cluster.node(0).addr());
    assert!(proxy.addr().ip().is_loopback());
    assert_ne!(proxy.addr(), cluster.node(0).addr());
    assert_eq!(
        proxy.url(),
        format!("redis://127.0.0.1:{}", proxy.addr().port())
    );

    let mut conn = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(
        conn.command(&["SET", "k", "v"]).unwrap(),
        Reply::simple("OK")
    );
    assert_eq!(
        cluster.node(0).command(&["GET", "k"]).unwrap(),
        Reply::bulk("v")
    );
    // A reply larger than one read chunk arrives whole and in order.
    let big = "x".repeat(200_000);
    assert_eq!(
        conn.command(&["SET", "big", &big]).unwrap(),
        Reply::simple("OK")
    );
    assert_eq!(conn.command(&["GET", "big"]).unwrap(), Reply::bulk(&big));
    eventually("one open connection", || proxy.connections() == 1);
    drop(conn);
    eventually("no open connection", || proxy.connections() == 0);
}

#[test]
fn latency_adds_at_least_the_delay_each_way() {
    let cluster = Cluster::start(1).unwrap();
    let proxy = cluster.proxy(0);
    let mut conn = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(conn.command(&["PING"]).unwrap(), pong());

    let latency = Duration::from_millis(100);
    proxy.set_latency(latency);
    assert_eq!(proxy.latency(), latency);
    let started = Instant::now();
    assert_eq!(conn.command(&["PING"]).unwrap(), pong());
    let rtt = started.elapsed();
    assert!(rtt >= 2 * latency, "round trip {rtt:?} < 2 x {latency:?}");

    // Pipelined commands keep their order under latency.
    for i in 0..5 {
        conn.send(&["ECHO", &i.to_string()]).unwrap();
    }
    for i in 0..5 {
        assert_eq!(conn.recv().unwrap(), Reply::bulk(&i.to_string()));
    }
}

#[test]
fn blackhole_makes_reads_time_out_until_lifted() {
    let cluster = Cluster::start(1).unwrap();
    let proxy = cluster.proxy(0);
    let mut conn = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(conn.command(&["PING"]).unwrap(), pong());

    proxy.blackhole(true);
    assert!(proxy.is_blackholed());
    let short = Duration::from_millis(200);
    conn.set_timeout(short).unwrap();
    let err = conn.command(&["PING"]).unwrap_err();
    assert!(err.is_timeout(), "{err}");

    // New connections are accepted but held: connect works, replies never come.
    let mut held = Conn::open(proxy.addr(), short).unwrap();
    assert!(held.command(&["PING"]).unwrap_err().is_timeout());
    assert_eq!(cluster.node(0).command(&["PING"]).unwrap(), pong());
    // Both PINGs (14 bytes each), on the old connection and on the held one, were dropped.
    assert_eq!(
        proxy.dropped_to_node(),
        2 * b"*1\r\n$4\r\nPING\r\n".len() as u64
    );

    proxy.blackhole(false);
    let mut fresh = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(fresh.command(&["PING"]).unwrap(), pong());
    // The held connection is forwarded from now on (its earlier PING was dropped).
    held.set_timeout(TIMEOUT).unwrap();
    assert_eq!(
        held.command(&["ECHO", "after"]).unwrap(),
        Reply::bulk("after")
    );
}

#[test]
fn cut_closes_the_clients_connection() {
    let cluster = Cluster::start(1).unwrap();
    let proxy = cluster.proxy(0);
    let mut conn = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(conn.command(&["PING"]).unwrap(), pong());

    proxy.cut();
    assert_eq!(proxy.connections(), 0);
    let err = conn.recv().unwrap_err();
    assert!(err.is_disconnect(), "{err}");

    let mut again = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(again.command(&["PING"]).unwrap(), pong());
}

/// A link told to close after its next reply delivers that reply whole, then the end of
/// stream; the proxy counts the client's new connection, which is not closed after its own.
#[test]
fn close_after_next_reply_delivers_the_reply_then_the_end() {
    let cluster = Cluster::start(1).unwrap();
    let proxy = cluster.proxy(0);
    let mut conn = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(conn.command(&["PING"]).unwrap(), pong());
    assert_eq!(proxy.accepted(), 1);

    proxy.close_after_next_reply();
    assert_eq!(
        conn.command(&["ECHO", "last"]).unwrap(),
        Reply::bulk("last")
    );
    let err = conn.recv().unwrap_err();
    assert!(err.is_disconnect(), "{err}");
    eventually("no open connection", || proxy.connections() == 0);

    let mut again = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    for _ in 0..2 {
        assert_eq!(again.command(&["PING"]).unwrap(), pong());
    }
    assert_eq!(proxy.accepted(), 2);
}

#[test]
fn node_death_behind_the_proxy_closes_and_restart_heals() {
    let cluster = Cluster::start(1).unwrap();
    let (node, proxy) = (cluster.node(0), cluster.proxy(0));
    let mut conn = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(conn.command(&["PING"]).unwrap(), pong());

    node.kill().unwrap();
    let err = conn.recv().unwrap_err();
    assert!(err.is_disconnect(), "{err}");
    // With the node down the proxy still accepts, then closes: the client sees a disconnect.
    let mut refused = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert!(refused.command(&["PING"]).unwrap_err().is_disconnect());

    node.restart_empty().unwrap();
    let mut again = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(again.command(&["PING"]).unwrap(), pong());
}

#[test]
fn drop_closes_connections_and_returns_under_long_latency() {
    let cluster = Cluster::start(1).unwrap();
    let proxy = Proxy::start(cluster.node(0).addr()).unwrap();
    let addr = proxy.addr();
    let mut conn = Conn::open(addr, TIMEOUT).unwrap();
    assert_eq!(conn.command(&["PING"]).unwrap(), pong());
    proxy.set_latency(Duration::from_secs(30));
    conn.send(&["PING"]).unwrap();
    // Give the proxy a moment to read the request into its delay line.
    thread::sleep(Duration::from_millis(50));

    let started = Instant::now();
    drop(proxy);
    // Bound, not speed: far below the 30 s latency still in flight.
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(conn.recv().unwrap_err().is_disconnect());
    // The listener is gone with the proxy.
    assert!(Conn::open(addr, TIMEOUT).is_err());
}

/// A held connection whose client side is cut still delivers its bytes to the node later,
/// after a newer connection's: the late write wins, and its reply is kept, not lost.
#[test]
fn held_bytes_reach_the_node_after_the_client_side_is_cut() {
    let cluster = Cluster::start(1).unwrap();
    let proxy = cluster.proxy(0);
    let node = cluster.node(0);
    let mut old = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(old.command(&["PING"]).unwrap(), pong());
    proxy.hold_current();
    old.send(&["SET", "k", "old"]).unwrap();
    eventually("the old SET held", || {
        String::from_utf8_lossy(&proxy.held_bytes()).contains("old")
    });
    assert_eq!(node.command(&["EXISTS", "k"]).unwrap(), Reply::Int(0));
    proxy.cut_client_side();
    old.set_timeout(TIMEOUT).unwrap();
    assert!(old.recv().is_err(), "the client side is closed");
    // A new connection is not held.
    let mut new = Conn::open(proxy.addr(), TIMEOUT).unwrap();
    assert_eq!(
        new.command(&["SET", "k", "new"]).unwrap(),
        Reply::simple("OK")
    );
    assert_eq!(node.command(&["GET", "k"]).unwrap(), Reply::bulk("new"));
    assert!(proxy.late_replies().is_empty());
    proxy.deliver_held();
    eventually("the late reply", || proxy.late_replies() == b"+OK\r\n");
    assert_eq!(node.command(&["GET", "k"]).unwrap(), Reply::bulk("old"));
    assert!(proxy.held_bytes().is_empty());
}
