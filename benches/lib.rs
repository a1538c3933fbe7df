//! Benchmark support (see benches/).

/// `hello`, a scripted node's handshake replies holding `run_id:abc`, with node `i`'s own
/// run id instead (one run id twice is one server named twice, which the client counts
/// once).
///
/// # Panics
/// If `hello` holds no `run_id:abc`.
pub fn own_run_id(hello: &[u8], i: usize) -> Vec<u8> {
    let at = (hello.windows(10))
        .position(|w| w == b"run_id:abc")
        .expect("a run id");
    let mut out = hello.to_vec();
    out[at + 9] = b'0' + (i % 10) as u8;
    out
}
