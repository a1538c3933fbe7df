use super::*;
use crate::address::NodeAddress;
use crate::options::LockOptions;
use crate::policy::{AutoExtend, NodeSettings, RetryPolicy};

/// The same server given twice, under any spelling or database, is refused naming both
/// entries; different servers build.
#[test]
fn one_server_may_be_one_node_only() {
    let build = |urls: &[&str]| {
        let mut config = Config::builder(urls.len());
        for (i, url) in urls.iter().enumerate() {
            config = config.address(i, &NodeAddress::parse(url).unwrap());
        }
        config.build()
    };
    let err = build(&[
        "redis://127.0.0.1:7450",
        "redis://127.0.0.1:7451",
        "redis://localhost:7450",
    ])
    .unwrap_err();
    assert_eq!(err.field(), "nodes");
    assert_eq!(
        err.rule(),
        "node 0 (`127.0.0.1:7450`) and node 2 (`localhost:7450`) are the same server; each \
         server may be one node only, or its one failure would count as several: give N \
         different servers"
    );
    let err = build(&[
        "redis://127.0.0.1:7450/0",
        "redis://:hunter2@127.0.0.1:7450/1",
        "redis://127.0.0.1:7450/2",
    ])
    .unwrap_err();
    assert!(
        err.rule()
            .starts_with("node 0 (`127.0.0.1:7450`) and node 1 (`127.0.0.1:7450/1`) are"),
        "{err}"
    );
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let err = build(&["127.0.0.1:7450", "redis://127.0.0.1:7450"]).unwrap_err();
    assert_eq!(err.field(), "nodes", "{err}");
    build(&["127.0.0.1:7450", "127.0.0.1:7451", "127.0.0.2:7450"]).unwrap();
}

#[test]
fn defaults_follow_the_algorithm_note() {
    let c = Config::builder(5).build().unwrap();
    assert_eq!(c.quorum(), 3);
    assert_eq!(c.ttl(), Duration::from_secs(10));
    assert_eq!(c.drift(), Duration::from_millis(102));
    assert_eq!(c.attempt_timeout(), Duration::from_millis(500));
    assert_eq!(Config::builder(4).build().unwrap().quorum(), 3);
    assert_eq!(Config::builder(1).build().unwrap().quorum(), 1);
    let long = Config::builder(3).ttl(Duration::from_secs(60)).build();
    assert_eq!(long.unwrap().attempt_timeout(), Duration::from_secs(1));
}

/// The features' defaults: the restart quarantine, the clock check and release
/// notifications on, with their settings off or none; locks fenced only where they ask.
#[test]
fn every_feature_has_its_default() {
    let c = Config::builder(3).build().unwrap();
    let quarantine = RestartQuarantine {
        ttl: None,
        young_nodes: false,
    };
    assert_eq!(c.restart_quarantine(), Some(&quarantine));
    assert_eq!(c.clock_check(), Some(&ClockCheck { quarantine: false }));
    let notifications = ReleaseNotifications {
        jitter: Duration::ZERO,
    };
    assert_eq!(c.release_notifications(), Some(&notifications));
    assert_eq!(c.fencing().suffix, ":fence");
    assert!(!c.fencing().by_default);
    assert!(Fencing::every_lock().by_default);
    assert_eq!(c.auto_extend(), None);
}

/// The features' value rules name the field inside the feature.
#[test]
fn feature_rules_name_their_field() {
    let field = |b: ConfigBuilder| b.build().unwrap_err().field();
    let quarantine = |ttl| {
        Some(RestartQuarantine {
            ttl: Some(ttl),
            ..RestartQuarantine::default()
        })
    };
    let builder = || Config::builder(3);
    let zero = builder().restart_quarantine(quarantine(Duration::ZERO));
    assert_eq!(field(zero), "restart_quarantine.ttl");
    let max = Duration::from_millis(MAX_TTL_MS);
    let above = builder().restart_quarantine(quarantine(max + Duration::from_millis(1)));
    assert_eq!(field(above), "restart_quarantine.ttl");
    assert!(
        builder()
            .restart_quarantine(quarantine(max))
            .build()
            .is_ok()
    );
    let empty = Fencing {
        suffix: String::new(),
        ..Fencing::default()
    };
    assert_eq!(field(builder().fencing(empty)), "fencing.suffix");
}

#[test]
fn every_rule_names_its_field() {
    let field = |b: ConfigBuilder| b.build().unwrap_err().field();
    assert_eq!(field(Config::builder(0)), "nodes");
    assert_eq!(field(Config::builder(5).quorum(2)), "quorum");
    assert_eq!(field(Config::builder(5).quorum(6)), "quorum");
    assert!(Config::builder(5).quorum(5).build().is_ok());
    assert_eq!(field(Config::builder(5).ttl(Duration::ZERO)), "ttl");
    assert_eq!(
        field(Config::builder(5).ttl(Duration::from_micros(1500))),
        "ttl"
    );
    assert_eq!(
        field(Config::builder(5).ttl(Duration::from_millis(MAX_TTL_MS + 1))),
        "ttl"
    );
    assert_eq!(field(Config::builder(5).drift_factor(0.5)), "drift_factor");
    assert_eq!(field(Config::builder(5).drift_factor(-0.1)), "drift_factor");
    assert_eq!(
        field(Config::builder(5).drift_factor(f64::NAN)),
        "drift_factor"
    );
    assert_eq!(
        field(Config::builder(5).attempt_timeout(Duration::from_secs(10))),
        "attempt_timeout"
    );
    // 3 ms ttl: drift is 2.03 ms, which leaves 0.97 ms, above the default attempt
    // timeout of 0.15 ms. 2 ms leaves nothing, which is the ttl's fault.
    assert!(
        Config::builder(5)
            .ttl(Duration::from_millis(3))
            .build()
            .is_ok()
    );
    assert_eq!(
        field(Config::builder(5).ttl(Duration::from_millis(2))),
        "ttl"
    );
    assert_eq!(
        field(Config::builder(5).ttl(Duration::from_millis(1))),
        "ttl"
    );
    let retry = RetryPolicy {
        max_attempts: None,
        ..RetryPolicy::default()
    };
    assert_eq!(field(Config::builder(5).retry(retry)), "retry");
    let auto = AutoExtend {
        max_hold: None,
        ..AutoExtend::default()
    };
    assert_eq!(
        field(Config::builder(5).auto_extend(Some(auto))),
        "auto_extend"
    );
    let user_only = NodeSettings {
        username: Some("u".into()),
        ..NodeSettings::default()
    };
    assert_eq!(
        field(Config::builder(2).node(1, user_only)),
        "node.username"
    );
    assert_eq!(
        field(Config::builder(2).node(2, NodeSettings::default())),
        "node"
    );
    assert_eq!(
        field(Config::builder(2).max_reply_size(1)),
        "max_reply_size"
    );
    assert_eq!(
        field(Config::builder(2).reconnect_backoff(Duration::ZERO, Duration::from_secs(1))),
        "reconnect_backoff"
    );
    assert_eq!(field(Config::builder(2).max_in_flight(0)), "max_in_flight");
    assert!(Config::builder(2).max_in_flight(1).build().is_ok());
}

/// The timing rules with their exact messages: each names the field the user set and
/// says the rule with numbers.
#[test]
fn timing_rules_say_why_with_numbers() {
    let rule = |b: ConfigBuilder| {
        let e = b.build().unwrap_err();
        (e.field(), e.rule().to_owned())
    };
    let ms = Duration::from_millis;
    let ttl = |d| rule(Config::builder(3).ttl(d));
    assert_eq!(
        ttl(Duration::ZERO),
        (
            "ttl",
            "zero, but a lock must expire; use at least 3ms".into()
        )
    );
    assert_eq!(
        ttl(ms(1)),
        (
            "ttl",
            "1ms leaves no validity after the drift allowance of 2.01ms (ttl * 0.01 + 2ms); \
             use at least 3ms"
                .into()
        )
    );
    assert_eq!(
        ttl(ms(2)).1,
        "2ms leaves no validity after the drift allowance of 2.02ms (ttl * 0.01 + 2ms); \
         use at least 3ms"
    );
    // 3 ms is the least: 3 - 2.03 = 0.97 ms of validity, above the default attempt
    // timeout of 0.15 ms.
    assert!(Config::builder(3).ttl(ms(3)).build().is_ok());
    assert_eq!(
        ttl(Duration::from_micros(1500)),
        (
            "ttl",
            "1.5ms is not whole milliseconds (PX takes milliseconds)".into()
        )
    );
    assert_eq!(
        ttl(ms(MAX_TTL_MS + 1)),
        (
            "ttl",
            "1125899906842625ms is above the limit of 1125899906842624ms (2^50 ms, about \
             35,700 years)"
                .into()
        )
    );
    assert!(Config::builder(3).ttl(ms(MAX_TTL_MS)).build().is_ok());
    // A large drift floor: the ttl is still at fault while a longer one would do.
    assert_eq!(
        rule(Config::builder(3).drift_floor(Duration::from_secs(20))),
        (
            "ttl",
            "10s leaves no validity after the drift allowance of 20.1s (ttl * 0.01 + 20s); \
             use at least 21.213s"
                .into()
        )
    );
    assert!(
        Config::builder(3)
            .drift_floor(Duration::from_secs(20))
            .ttl(ms(21_213))
            .build()
            .is_ok()
    );
    assert_eq!(
        rule(Config::builder(3).drift_floor(Duration::MAX)).0,
        "drift_floor"
    );
    assert_eq!(
        rule(Config::builder(3).drift_factor(0.7)),
        ("drift_factor", "0.7 is outside [0, 0.5)".into())
    );
    assert_eq!(
        rule(Config::builder(3).attempt_timeout(Duration::ZERO)),
        (
            "attempt_timeout",
            "zero gives no node time to answer; it must be above zero and below ttl - \
             drift allowance = 10s - 102ms = 9.898s"
                .into()
        )
    );
    assert_eq!(
        rule(
            Config::builder(3)
                .ttl(ms(3))
                .attempt_timeout(Duration::from_secs(1))
        ),
        (
            "attempt_timeout",
            "1s must be below ttl - drift allowance = 3ms - 2.03ms = 970µs".into()
        )
    );
    assert_eq!(
        rule(Config::builder(3).min_validity(Duration::from_secs(10))),
        (
            "min_validity",
            "10s must be below ttl - drift allowance = 10s - 102ms = 9.898s".into()
        )
    );
    // The same rules, with the same words, for a per-lock ttl.
    let c = Config::builder(3).build().unwrap();
    let per_lock = LockOptions::default().ttl(ms(1)).resolve(&c).unwrap_err();
    assert_eq!(
        per_lock.to_string(),
        format!("invalid `ttl`: {}", ttl(ms(1)).1)
    );
}

#[test]
fn reconnect_backoff_is_capped() {
    let build = |min, max| Config::builder(3).reconnect_backoff(min, max).build();
    let cap = MAX_RECONNECT_BACKOFF;
    let err = build(Duration::MAX, Duration::MAX).unwrap_err();
    assert_eq!(err.field(), "reconnect_backoff");
    assert_eq!(err.rule(), "max must be at most 3600s");
    let err = build(Duration::from_secs(1), Duration::MAX).unwrap_err();
    assert_eq!(err.field(), "reconnect_backoff");
    let err = build(Duration::from_secs(1), cap + Duration::from_nanos(1)).unwrap_err();
    assert_eq!(err.field(), "reconnect_backoff");
    assert!(build(cap, cap).is_ok());
    assert!(build(Duration::from_nanos(1), cap).is_ok());
}

#[test]
fn per_lock_ttl_rescales_the_default_attempt_timeout() {
    let c = Config::builder(3).build().unwrap();
    let p = LockOptions::default()
        .ttl(Duration::from_millis(100))
        .resolve(&c)
        .unwrap();
    assert_eq!(p.timing.attempt_timeout, Duration::from_millis(5));
    let bad = LockOptions::default().ttl(Duration::ZERO).resolve(&c);
    assert_eq!(bad.unwrap_err().field(), "ttl");
}
