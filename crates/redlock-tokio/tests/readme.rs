//! The README shows the compiled `examples/readme_tokio.rs`, word for word, and that program
//! locks and says why it cannot (`redlock_conformance::readme`).

use redlock_conformance::readme::{assert_readme_shows, readme_program_locks_and_says_why};

const EXAMPLE: &str = include_str!("../examples/readme_tokio.rs");

#[test]
fn readme_example_is_the_compiled_example() {
    assert_readme_shows(include_str!("../README.md"), EXAMPLE);
}

#[test]
fn the_repository_readme_shows_the_same_program() {
    assert_readme_shows(include_str!("../../../README.md"), EXAMPLE);
}

/// The README's program itself, run against real nodes: what it returns is what it prints.
#[allow(dead_code, unreachable_pub)]
#[path = "../examples/readme_tokio.rs"]
mod program;

#[test]
fn the_readme_program_locks_and_says_why_it_cannot() {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    readme_program_locks_and_says_why(|nodes, id| rt.block_on(program::lock_invoice(nodes, id)));
}
