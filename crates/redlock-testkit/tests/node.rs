//! Node control against real servers: commands, kill and restart with and without AOF,
//! SIGSTOP/SIGCONT, AUTH, denied commands, maxmemory and replicas. Every wait is bounded by a
//! command timeout.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use redlock_testkit::{Cluster, Error, Reply};

fn ok() -> Reply {
    Reply::simple("OK")
}

#[test]
fn three_nodes_answer_ping_on_distinct_ports() {
    let cluster = Cluster::start(3).unwrap();
    assert_eq!(cluster.len(), 3);
    let mut ports: Vec<u16> = cluster.nodes().iter().map(|n| n.port()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 3, "{ports:?}");
    for node in cluster.nodes() {
        assert!(node.addr().ip().is_loopback());
        assert_eq!(node.url(), format!("redis://127.0.0.1:{}", node.port()));
        assert!(node.is_running());
        assert_eq!(node.command(&["PING"]).unwrap(), Reply::simple("PONG"));
    }
}

#[test]
fn commands_tests_rely_on() {
    let cluster = Cluster::start(1).unwrap();
    let node = cluster.node(0);
    assert_eq!(
        node.command(&["SET", "k", "v", "PX", "60000"]).unwrap(),
        ok()
    );
    assert_eq!(node.command(&["GET", "k"]).unwrap(), Reply::bulk("v"));
    let pttl = node.command(&["PTTL", "k"]).unwrap().as_int().unwrap();
    assert!((1..=60_000).contains(&pttl), "{pttl}");
    assert_eq!(node.command(&["GET", "missing"]).unwrap(), Reply::Nil);
    assert_eq!(node.command(&["DBSIZE"]).unwrap(), Reply::Int(1));
    assert_eq!(
        node.command(&["KEYS", "*"]).unwrap(),
        Reply::Array(vec![Reply::bulk("k")])
    );
    assert_eq!(node.command(&["SCRIPT", "FLUSH"]).unwrap(), ok());
    assert_eq!(node.command(&["DEBUG", "SLEEP", "0"]).unwrap(), ok());
    let unknown = node.command(&["NOSUCHCOMMAND"]).unwrap();
    assert!(
        matches!(&unknown, Reply::Error(e) if e.starts_with("ERR")),
        "{unknown}"
    );
}

#[test]
fn restart_empty_loses_keys_on_the_same_port() {
    let cluster = Cluster::start(1).unwrap();
    let node = cluster.node(0);
    let (port, pid) = (node.port(), node.pid().unwrap());
    assert_eq!(node.command(&["SET", "k", "v"]).unwrap(), ok());

    node.kill().unwrap();
    assert!(!node.is_running());
    assert_eq!(node.pid(), None);
    assert!(!pid_alive(pid));
    let err = node.command(&["PING"]).unwrap_err();
    assert!(err.is_disconnect(), "{err}");
    node.kill().unwrap(); // idempotent

    node.restart_empty().unwrap();
    assert_eq!(node.port(), port);
    assert_ne!(node.pid(), Some(pid));
    assert_eq!(node.command(&["GET", "k"]).unwrap(), Reply::Nil);
    assert_eq!(node.command(&["DBSIZE"]).unwrap(), Reply::Int(0));
}

#[test]
fn aof_restart_keeps_acknowledged_writes() {
    let cluster = Cluster::builder().nodes(1).aof(true).start().unwrap();
    let node = cluster.node(0);
    assert_eq!(node.command(&["SET", "k", "v"]).unwrap(), ok());
    node.kill().unwrap();
    node.restart().unwrap();
    assert_eq!(node.command(&["GET", "k"]).unwrap(), Reply::bulk("v"));

    // Without the data dir the same node comes back empty, AOF or not.
    node.restart_empty().unwrap();
    assert_eq!(node.command(&["GET", "k"]).unwrap(), Reply::Nil);
}

#[test]
fn without_aof_a_restart_loses_keys() {
    let cluster = Cluster::start(1).unwrap();
    let node = cluster.node(0);
    assert_eq!(node.command(&["SET", "k", "v"]).unwrap(), ok());
    node.restart().unwrap();
    assert_eq!(node.command(&["GET", "k"]).unwrap(), Reply::Nil);
}

#[test]
fn restart_on_a_taken_port_reports_the_server_log() {
    let cluster = Cluster::start(1).unwrap();
    let node = cluster.node(0);
    node.kill().unwrap();
    let squatter = TcpListener::bind(node.addr()).unwrap();
    let err = node.restart().unwrap_err();
    assert!(matches!(err, Error::Start { .. }), "{err:?}");
    assert!(err.to_string().contains("Address already in use"), "{err}");
    assert!(!node.is_running());

    drop(squatter);
    node.restart().unwrap();
    assert_eq!(node.command(&["PING"]).unwrap(), Reply::simple("PONG"));
}

#[test]
fn pause_times_out_and_resume_answers() {
    let cluster = Cluster::start(1).unwrap();
    let node = cluster.node(0);
    let mut conn = node.connect().unwrap();
    assert_eq!(conn.command(&["PING"]).unwrap(), Reply::simple("PONG"));

    node.pause().unwrap();
    assert!(node.is_paused() && node.is_running());
    let timeout = Duration::from_millis(200);
    let started = Instant::now();
    let err = node.command_with_timeout(&["PING"], timeout).unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() >= timeout);

    // A request sent while paused is answered once the process runs again.
    conn.set_timeout(timeout).unwrap();
    conn.send(&["ECHO", "late"]).unwrap();
    assert!(conn.recv().unwrap_err().is_timeout());
    node.resume().unwrap();
    assert!(!node.is_paused());
    conn.set_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(conn.recv().unwrap(), Reply::bulk("late"));
    assert_eq!(node.command(&["PING"]).unwrap(), Reply::simple("PONG"));
}

#[test]
fn pause_and_resume_need_a_running_node() {
    let cluster = Cluster::start(1).unwrap();
    let node = cluster.node(0);
    node.resume().unwrap(); // not paused: a no-op
    node.pause().unwrap();
    node.kill().unwrap(); // SIGCONT + SIGKILL
    assert!(!node.is_paused());
    assert!(matches!(node.pause(), Err(Error::NotRunning { .. })));
    assert!(matches!(node.resume(), Err(Error::NotRunning { .. })));
}

#[test]
fn debug_sleep_blocks_other_clients() {
    let cluster = Cluster::start(1).unwrap();
    let node = cluster.node(0);
    let mut sleeper = node.connect().unwrap();
    sleeper.send(&["DEBUG", "SLEEP", "0.3"]).unwrap();
    let err = node
        .command_with_timeout(&["PING"], Duration::from_millis(100))
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(sleeper.recv().unwrap(), ok());
}

#[test]
fn password_is_required_and_used() {
    let cluster = Cluster::builder()
        .nodes(1)
        .password("s3 \"cret\"")
        .start()
        .unwrap();
    let node = cluster.node(0);
    assert_eq!(node.command(&["PING"]).unwrap(), Reply::simple("PONG"));
    assert!(raw_ping(node.addr()).starts_with("-NOAUTH"));
}

#[test]
fn acl_user_is_required_and_used() {
    let cluster = Cluster::builder()
        .nodes(1)
        .user("locker", "pw")
        .start()
        .unwrap();
    let node = cluster.node(0);
    assert_eq!(node.command(&["SET", "k", "v"]).unwrap(), ok());
    assert!(raw_ping(node.addr()).starts_with("-NOAUTH"));
    let mut conn = redlock_testkit::Conn::open(node.addr(), Duration::from_secs(2)).unwrap();
    let wrong = conn.command(&["AUTH", "locker", "nope"]).unwrap();
    assert!(
        matches!(&wrong, Reply::Error(e) if e.starts_with("WRONGPASS")),
        "{wrong}"
    );
}

/// An unauthenticated inline PING; returns the reply line.
fn raw_ping(addr: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    stream.write_all(b"PING\r\n").unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// `deny` takes SET and EVALSHA from the clients' user (NOPERM names the command, in words
/// that differ between Redis 7.0 and Valkey), while the kit's own connection runs them.
#[test]
fn denied_commands_get_noperm_and_the_kit_keeps_them() {
    let cluster = Cluster::builder()
        .nodes(1)
        .user("locker", "p@ss w")
        .deny(["SET", "evalsha"])
        .start()
        .unwrap();
    let node = cluster.node(0);
    assert_eq!(
        node.client_url(),
        format!("redis://locker:p%40ss%20w@127.0.0.1:{}", node.port())
    );
    let mut conn = redlock_testkit::Conn::open(node.addr(), Duration::from_secs(2)).unwrap();
    assert_eq!(conn.command(&["AUTH", "locker", "p@ss w"]).unwrap(), ok());
    for (args, command) in [
        (&["SET", "k", "v"][..], "'set' command"),
        (
            &["EVALSHA", "0123456789012345678901234567890123456789", "0"][..],
            "'evalsha' command",
        ),
    ] {
        let refused = conn.command(args).unwrap();
        assert!(
            matches!(&refused, Reply::Error(e) if e.starts_with("NOPERM") && e.ends_with(command)),
            "{refused}"
        );
    }
    assert_eq!(conn.command(&["GET", "k"]).unwrap(), Reply::Nil);
    assert_eq!(node.command(&["SET", "k", "v"]).unwrap(), ok());
    assert_eq!(conn.command(&["GET", "k"]).unwrap(), Reply::bulk("v"));
}

/// Without credentials, `deny` applies to the default user; a password is still required.
#[test]
fn denied_commands_apply_to_the_default_user() {
    let cluster = Cluster::builder().nodes(1).deny(["set"]).start().unwrap();
    let node = cluster.node(0);
    assert_eq!(node.client_url(), node.url());
    let mut conn = redlock_testkit::Conn::open(node.addr(), Duration::from_secs(2)).unwrap();
    let refused = conn.command(&["SET", "k", "v"]).unwrap();
    assert!(
        matches!(&refused, Reply::Error(e) if e.starts_with("NOPERM")),
        "{refused}"
    );
    assert_eq!(node.command(&["SET", "k", "v"]).unwrap(), ok());

    let cluster = Cluster::builder()
        .nodes(1)
        .password("pw")
        .deny(["set"])
        .start()
        .unwrap();
    let node = cluster.node(0);
    assert_eq!(
        node.client_url(),
        format!("redis://:pw@127.0.0.1:{}", node.port())
    );
    assert!(raw_ping(node.addr()).starts_with("-NOAUTH"));
    let mut conn = redlock_testkit::Conn::open(node.addr(), Duration::from_secs(2)).unwrap();
    assert_eq!(conn.command(&["AUTH", "pw"]).unwrap(), ok());
    let refused = conn.command(&["SET", "k", "v"]).unwrap();
    assert!(
        matches!(&refused, Reply::Error(e) if e.starts_with("NOPERM")),
        "{refused}"
    );
}

/// At `maxmemory` 1 a write gets OOM, reads and DEL still work; 0 lifts the limit.
#[test]
fn maxmemory_refuses_writes_until_lifted() {
    let cluster = Cluster::start(1).unwrap();
    let node = cluster.node(0);
    assert_eq!(node.command(&["SET", "k", "v"]).unwrap(), ok());
    node.set_maxmemory(1).unwrap();
    let oom = Reply::Error("OOM command not allowed when used memory > 'maxmemory'.".into());
    assert_eq!(
        node.command(&["SET", "k2", "v", "NX", "PX", "1000"])
            .unwrap(),
        oom
    );
    assert_eq!(node.command(&["GET", "k"]).unwrap(), Reply::bulk("v"));
    assert_eq!(node.command(&["DEL", "k"]).unwrap(), Reply::Int(1));
    node.set_maxmemory(0).unwrap();
    assert_eq!(node.command(&["SET", "k2", "v"]).unwrap(), ok());
}

/// A replica (also of a primary with credentials) has the primary's data and refuses writes
/// with READONLY until promoted.
#[test]
fn a_replica_refuses_writes_until_promoted() {
    let readonly = Reply::Error("READONLY You can't write against a read only replica.".into());
    for cluster in [
        Cluster::start(2).unwrap(),
        Cluster::builder().nodes(2).password("pw").start().unwrap(),
        Cluster::builder()
            .nodes(2)
            .user("locker", "pw")
            .deny(["set"])
            .start()
            .unwrap(),
    ] {
        let (primary, replica) = (cluster.node(0), cluster.node(1));
        assert_eq!(primary.command(&["SET", "k", "v"]).unwrap(), ok());
        replica.replicate(primary).unwrap();
        assert_eq!(replica.command(&["GET", "k"]).unwrap(), Reply::bulk("v"));
        assert_eq!(replica.command(&["SET", "k", "w"]).unwrap(), readonly);
        replica.promote().unwrap();
        assert_eq!(replica.command(&["SET", "k", "w"]).unwrap(), ok());
        assert_eq!(primary.command(&["GET", "k"]).unwrap(), Reply::bulk("v"));
    }
}
