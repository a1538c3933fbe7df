//! No password in `Debug` or error output: the handle, its builder, and the errors a URL
//! with a password can cause (`***` stands in for it).

use redlock_tokio::{LockError, Redlock};

const SECRET: &str = "hunter2";

fn assert_hidden(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} shows the password: {text}");
}

#[tokio::test]
async fn handle_and_builder_debug_hide_the_password() {
    // Nothing listens on port 1: the handle exists without a node.
    let urls = [
        format!("redis://app:{SECRET}@127.0.0.1:1/2"),
        format!("redis://{SECRET}@127.0.0.1:2"),
    ];
    let builder = Redlock::builder(urls.clone()).unwrap();
    assert_hidden("Builder", &format!("{builder:?}"));
    let redlock = builder.build().unwrap();
    let text = format!("{redlock:?}");
    assert_hidden("Redlock", &text);
    assert!(text.contains("***"), "{text}");
}

#[test]
fn url_errors_hide_the_password() {
    for url in [
        format!("redis://app:{SECRET}@127.0.0.1:99999"),
        format!("redis://app:{SECRET}@:6379"),
        format!("rediss://app:{SECRET}@127.0.0.1:6379"),
    ] {
        let err: LockError = Redlock::builder([url]).unwrap_err();
        assert_hidden("LockError's Display", &err.to_string());
        assert_hidden("LockError's Debug", &format!("{err:?}"));
    }
}
