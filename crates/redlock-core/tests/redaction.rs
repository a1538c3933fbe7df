//! No public type that can hold a password prints it: `Debug` shows `***`, and errors about
//! a URL repeat it without its password.

use redlock_core::{Config, NodeAddress, NodeSettings};

const SECRET: &str = "hunter2";

fn settings() -> NodeSettings {
    NodeSettings {
        username: Some("app".into()),
        password: Some(SECRET.into()),
        db: 2,
    }
}

fn assert_hidden(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} shows the password: {text}");
}

#[test]
fn node_settings_debug_shows_stars() {
    let text = format!("{:?}", settings());
    assert_hidden("NodeSettings", &text);
    assert!(text.contains("***") && text.contains("app"), "{text}");
    let none = format!("{:?}", NodeSettings::default());
    assert!(none.contains("password: None"), "{none}");
}

#[test]
fn node_address_debug_hides_the_password() {
    let address = NodeAddress::parse(&format!("redis://app:{SECRET}@127.0.0.1:7001/2")).unwrap();
    assert_hidden("NodeAddress", &format!("{address:?}"));
    let address = NodeAddress::parse(&format!("redis://{SECRET}@127.0.0.1:7001")).unwrap();
    assert_hidden("NodeAddress without a user", &format!("{address:?}"));
}

#[test]
fn config_and_its_builder_hide_the_password() {
    let builder = Config::builder(3)
        .restart_quarantine(None)
        .node(1, settings());
    assert_hidden("ConfigBuilder", &format!("{builder:?}"));
    let config = builder.build().unwrap();
    assert_hidden("Config", &format!("{config:?}"));
}

#[test]
fn address_errors_hide_the_password() {
    for url in [
        format!("redis://app:{SECRET}@127.0.0.1:99999"),
        format!("redis://app:{SECRET}@:6379"),
        format!("rediss://app:{SECRET}@127.0.0.1:6379?tls=1"),
        format!("unix:///tmp/redis.sock?user=app&password={SECRET}&db=x"),
        format!("redis://app:{SECRET}@127.0.0.1:0"),
    ] {
        let err = NodeAddress::parse(&url).unwrap_err();
        assert_hidden("AddressError's Display", &err.to_string());
        assert_hidden("AddressError's Debug", &format!("{err:?}"));
    }
}
