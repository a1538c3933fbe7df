//! The `metrics` feature, exported for Prometheus: counters (`redlock_acquired_total`,
//! `redlock_acquire_failed_total{reason}`, `redlock_extended_total`,
//! `redlock_lost_total{reason}`, `redlock_released_total`), histograms
//! (`redlock_acquire_seconds`, `redlock_handoff_wait_seconds`,
//! `redlock_node_round_trip_seconds{node}`) and gauges (`redlock_held_locks`,
//! `redlock_nodes_up{handle,node}`: 1 while that handle's connection to the node is up).
//!
//! Run with `cargo run -p redlock-tokio --features metrics --example prometheus`
//! (`redis-server` on PATH): it starts 3 nodes, installs the exporter's recorder, takes a
//! few locks, serves the metrics on `http://127.0.0.1:PORT/metrics`, scrapes that page once
//! itself, prints it and exits. With `-- SECONDS` it keeps serving for that long (at most
//! an hour) for a Prometheus on this machine to scrape.
//!
//! The exporter is built without its default features (no HTTP listener of its own, no
//! push gateway, no TLS stack): `PrometheusHandle::render` gives the text, and a few lines
//! of `std::net` serve it, bound to 127.0.0.1 only.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use redlock_testkit::Cluster;
use redlock_tokio::Redlock;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve_for = match std::env::args().nth(1) {
        Some(secs) => Duration::from_secs(secs.parse::<u64>()?.min(3600)),
        None => Duration::ZERO,
    };
    let nodes = Cluster::start(3)?;
    // Install the recorder before building the handle: the driver registers its metrics
    // when its loop starts.
    let metrics = PrometheusBuilder::new().install_recorder()?;
    let redlock = Redlock::builder(nodes.urls())?.build()?;
    for i in 0..5 {
        let guard = redlock.lock(format!("invoices:{i}")).await?;
        guard.extend().await?;
        guard.release().await?;
    }
    // Held elsewhere: one attempt fails as contended.
    let guard = redlock.lock("invoices:0").await?;
    let other = Redlock::builder(nodes.urls())?.build()?;
    let _ = other.try_lock("invoices:0").await;
    guard.release().await?;

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    println!("serving http://{addr}/metrics for {serve_for:?}");
    let server = std::thread::spawn(move || serve(&listener, &metrics, serve_for));
    print!("{}", scrape(&format!("{addr}"))?);
    server.join().expect("the server thread")?;
    Ok(())
}

/// Answers every request with the metrics, until `serve_for` has passed (and at least one
/// request was answered).
fn serve(
    listener: &TcpListener,
    metrics: &PrometheusHandle,
    serve_for: Duration,
) -> std::io::Result<()> {
    let until = Instant::now() + serve_for;
    listener.set_nonblocking(true)?;
    let mut answered = 0;
    while answered == 0 || Instant::now() < until {
        let mut stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => return Err(e),
        };
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        // The request itself does not matter: every path is the metrics page.
        let mut request = [0; 1024];
        let _ = stream.read(&mut request)?;
        metrics.run_upkeep();
        let body = metrics.render();
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        answered += 1;
    }
    Ok(())
}

/// One `GET /metrics` from `addr`; the body.
fn scrape(addr: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut page = String::new();
    stream.read_to_string(&mut page)?;
    Ok(page
        .split_once("\r\n\r\n")
        .map_or(page.clone(), |(_, body)| body.to_owned()))
}
