//! The README's example is the compiled `examples/readme_blocking.rs`, word for word.

#[test]
fn readme_example_is_the_compiled_example() {
    let example = include_str!("../examples/readme_blocking.rs");
    let (_, code) = example
        .split_once("\n\n")
        .expect("a doc line, then the program");
    assert!(
        include_str!("../README.md").contains(code),
        "README.md's example differs from examples/readme_blocking.rs"
    );
}
