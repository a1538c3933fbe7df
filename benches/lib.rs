//! Benchmark support (see benches/).
