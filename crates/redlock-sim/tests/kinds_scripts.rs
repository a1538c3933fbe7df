//! The lock kinds' script models (`redlock_sim::kinds`): each is registered under the exact
//! body it was copied from, which a literal SHA1 pins, and the mutants only on demand.

use redlock_sim::Scripts;
use redlock_sim::kinds::{MODELS, MUTANT_MODELS, multi, queue, queue_release, rw, semaphore};
use redlock_sim::script::sha1_hex;

/// Every modelled body and its SHA1 as `sha1sum` printed it when the body was copied from
/// the design of the kinds.
const SHA1S: [(&str, &str); 19] = [
    (
        multi::MULTI_ACQUIRE_SOURCE,
        "dc07deb80cfd3448180030e6296446cfc2fdfe04",
    ),
    (
        multi::MULTI_RELEASE_SOURCE,
        "6ef052ea23ac6e17fe9814b09b580fe545fb4c43",
    ),
    (
        multi::MULTI_EXTEND_SOURCE,
        "56159681025295dcd63df963c495694f593a40ce",
    ),
    (
        rw::READ_ACQUIRE_SOURCE,
        "c6828516496aeb2aaff6faff4aee5f987af2a21b",
    ),
    (
        rw::WRITE_ACQUIRE_SOURCE,
        "6e29c1230d98787635fb1a5cf272559eb221803f",
    ),
    (
        rw::WRITE_ABANDON_SOURCE,
        "e212a91aa9756e471f2c4b7c088d396d70748b11",
    ),
    (
        rw::WRITE_RELEASE_SOURCE,
        "5a869c2fb819934263bd828a9ca749afea8ddca2",
    ),
    (
        rw::READ_RELEASE_SOURCE,
        "445e27ac61f3e2dd5b8c2e4d863f1d16b12be140",
    ),
    (
        rw::READ_EXTEND_SOURCE,
        "1ce34b6bde9b739bdb4e8ebad47f8d7f476ba221",
    ),
    (
        semaphore::SEM_ACQUIRE_SOURCE,
        "733158110e8faa37adcdbff159f8796dfc5f4ca0",
    ),
    (
        semaphore::SEM_RELEASE_SOURCE,
        "20a51b377419d9d5c2be03a16f76f6d021b89533",
    ),
    (
        semaphore::SEM_EXTEND_SOURCE,
        "b3a4cd9bb9d5321973bf23ba70c08ed02e651c2b",
    ),
    (
        semaphore::SEM_ACQUIRE_OFF_BY_ONE_SOURCE,
        "fd0d8a50070b58678fd9a86bfac66e85df120b32",
    ),
    (
        rw::WRITE_ACQUIRE_IGNORES_READERS_SOURCE,
        "db1c692439a0108d608e4253fedb49359833e985",
    ),
    (
        rw::READ_EXTEND_RESURRECTS_SOURCE,
        "b93a1f11d669bbc5760a8b551aa98e9c42a7984b",
    ),
    (
        queue::QUEUE_ACQUIRE_SOURCE,
        "be6c33dc24a3b66256bbbb56a099fca83ec3027c",
    ),
    (
        queue::QUEUE_LEAVE_SOURCE,
        "981baee101392ca6685fa8288bd2894386a0af56",
    ),
    (
        queue_release::QUEUE_RELEASE_SOURCE,
        "12dfd65967c5704cb57c9e933afa3d6e47c50b3b",
    ),
    (
        queue::QUEUE_ACQUIRE_NEVER_PRUNES_SOURCE,
        "fbef26a1c0e8dec6738f9966f3ee2e34dde91d7e",
    ),
];

/// The tripwire: an edit to a body (here or in the design it was copied from) shows as a
/// SHA1 that no longer matches its literal.
#[test]
fn each_body_is_the_one_copied_and_its_model_answers_to_it() {
    let mut scripts = Scripts::default();
    scripts.register_all(MUTANT_MODELS);
    for (body, sha1) in SHA1S {
        assert_eq!(sha1_hex(body), sha1, "the body changed: {body}");
        let model = scripts.by_sha(sha1.as_bytes()).expect("registered");
        assert_eq!(model.body, body);
    }
    for &(body, run) in MODELS.iter().chain(MUTANT_MODELS) {
        let model = scripts.by_body(body.as_bytes()).expect("registered");
        assert!(
            std::ptr::fn_addr_eq(model.run, run),
            "{body} runs its own model"
        );
    }
    assert_eq!(MODELS.len() + MUTANT_MODELS.len(), SHA1S.len());
    let normative = Scripts::default();
    for (body, _) in MUTANT_MODELS {
        assert!(
            normative.by_body(body.as_bytes()).is_none(),
            "mutants are opt-in"
        );
    }
}

#[test]
fn the_mutants_differ_from_their_scripts_in_one_place() {
    let off_by_one = semaphore::SEM_ACQUIRE_SOURCE.replace(
        "if n >= tonumber(ARGV[3]) then",
        "if n > tonumber(ARGV[3]) then",
    );
    assert_eq!(off_by_one, semaphore::SEM_ACQUIRE_OFF_BY_ONE_SOURCE);
    let ignores =
        rw::WRITE_ACQUIRE_SOURCE.replace(" and redis.call('ZCARD', KEYS[2]) == 0 then", " then");
    assert_eq!(ignores, rw::WRITE_ACQUIRE_IGNORES_READERS_SOURCE);
    let prune = "local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64) \
                 for i = 1, #gone do redis.call('ZREM', KEYS[2], gone[i]) \
                 redis.call('ZREM', KEYS[3], gone[i]) end ";
    let never_prunes = queue::QUEUE_ACQUIRE_SOURCE.replace(prune, "");
    assert_eq!(never_prunes, queue::QUEUE_ACQUIRE_NEVER_PRUNES_SOURCE);
}
