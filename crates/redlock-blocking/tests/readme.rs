//! The README shows the compiled `examples/readme_blocking.rs`, word for word, and that
//! program locks and says why it cannot (`redlock_conformance::readme`).

use redlock_conformance::readme::{assert_readme_shows, readme_program_locks_and_says_why};

#[test]
fn readme_example_is_the_compiled_example() {
    let example = include_str!("../examples/readme_blocking.rs");
    assert_readme_shows(include_str!("../README.md"), example);
}

/// The README's program itself, run against real nodes: what it returns is what it prints.
#[allow(dead_code, unreachable_pub)]
#[path = "../examples/readme_blocking.rs"]
mod program;

#[test]
fn the_readme_program_locks_and_says_why_it_cannot() {
    readme_program_locks_and_says_why(program::lock_invoice);
}
