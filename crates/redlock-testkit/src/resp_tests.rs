//! Tests of the shared RESP2 codec: every kind, every split point, hostile input.

use super::*;

/// A command's arguments, owned.
type Args = Vec<Vec<u8>>;

/// Takes every command off the front of `buf`, or the first error.
fn commands(buf: &[u8]) -> Result<(Vec<Args>, usize), ProtocolError> {
    let mut at = 0;
    let mut out = Vec::new();
    while let Some(cmd) = parse_command(&buf[at..])? {
        out.push(cmd.args(&buf[at..]).map(<[u8]>::to_vec).collect());
        at += cmd.frame_len();
    }
    Ok((out, at))
}

/// Takes every reply off the front of `buf`, or the first error.
fn replies(buf: &[u8]) -> Result<(Vec<Reply>, usize), ProtocolError> {
    let mut at = 0;
    let mut out = Vec::new();
    while let Some((reply, used)) = parse_reply(&buf[at..])? {
        out.push(reply);
        at += used;
    }
    Ok((out, at))
}

fn args(v: &[&str]) -> Args {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn every_reply_kind() -> Vec<Reply> {
    vec![
        Reply::simple("OK"),
        Reply::Error("NOSCRIPT x".into()),
        Reply::Int(-7),
        Reply::Int(i64::from(i32::MAX) * 4),
        Reply::bulk("a\rb\r\n"),
        Reply::Bulk(Vec::new()),
        Reply::Nil,
        Reply::Array(vec![Reply::bulk("k"), Reply::Array(vec![Reply::Int(1)])]),
        Reply::Array(Vec::new()),
    ]
}

#[test]
fn commands_round_trip_however_the_bytes_are_split() {
    let sent = [
        args(&["SET", "k", "v\r\n", "NX", "PX", "100"]),
        args(&["GET", ""]),
    ];
    let mut wire = Vec::new();
    for cmd in &sent {
        encode_command(&mut wire, cmd);
    }
    assert_eq!(&wire[..22], b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$3");
    for cut in 0..=wire.len() {
        // The first part alone: whole commands only, never an error.
        let (head, used) = commands(&wire[..cut]).unwrap();
        assert!(used <= cut && head.len() <= sent.len(), "cut {cut}");
        let (rest, more) = commands(&wire[used..]).unwrap();
        assert_eq!([head, rest].concat(), sent, "cut {cut}");
        assert_eq!(used + more, wire.len());
    }
}

#[test]
fn replies_round_trip_however_the_bytes_are_split() {
    let sent = every_reply_kind();
    let mut wire = Vec::new();
    for reply in &sent {
        reply.encode(&mut wire);
    }
    wire.extend_from_slice(b"*-1\r\n");
    let mut expected = sent.clone();
    expected.push(Reply::Nil);
    for cut in 0..=wire.len() {
        let (head, used) = replies(&wire[..cut]).unwrap();
        assert!(used <= cut, "cut {cut}");
        let (rest, more) = replies(&wire[used..]).unwrap();
        assert_eq!([head, rest].concat(), expected, "cut {cut}");
        assert_eq!(used + more, wire.len());
    }
}

#[test]
fn encoded_lines_cannot_be_broken() {
    let mut out = Vec::new();
    Reply::Error("ERR x\r\ny".into()).encode(&mut out);
    Reply::simple("a\nb").encode(&mut out);
    assert_eq!(out, b"-ERR x  y\r\n+a b\r\n");
}

#[test]
fn hostile_commands_are_errors() {
    for bad in [
        &b"GET k\r\n"[..],
        b"*1\r\n:1\r\n",
        b"*x\r\n",
        b"*\r\n",
        b"*-1\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$1\r\nab\r\n",
        b"*1\r\n$1\rx",
        b"*+1\r\n",
        b"* 1\r\n",
        b"*1025\r\n",
        b"*1\r\n$1048577\r\n",
        b"*99999999999999999999\r\n",
        b"*1\r\n$-9223372036854775808\r\n",
    ] {
        assert!(
            parse_command(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // A header line that never ends is cut off at the cap, not buffered forever.
    let long = [b"*".as_slice(), &[b'1'; MAX_LINE]].concat();
    assert!(parse_command(&long).is_err());
    assert_eq!(parse_command(&long[..MAX_LINE]), Ok(None));
}

#[test]
fn hostile_replies_are_errors() {
    for bad in [
        &b"?x\r\n"[..],
        b"\r\n",
        b"+OK\rx",
        b":x\r\n",
        b":\r\n",
        b":1234567890123456789\r\n",
        b"$-2\r\n",
        b"$2\r\nabcd",
        b"$1048577\r\n",
        b"*-2\r\n",
        b"*1025\r\n",
    ] {
        assert!(
            parse_reply(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    let deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
    assert!(parse_reply(&deep).is_err());
    let shallow = [b"*1\r\n".repeat(MAX_DEPTH - 1), b":1\r\n".to_vec()].concat();
    assert!(matches!(parse_reply(&shallow), Ok(Some(_))));
    // A huge array header allocates nothing up front: it just waits for elements.
    assert_eq!(parse_reply(b"*1024\r\n:1\r\n"), Ok(None));
}

/// Random bytes, and valid frames with random bytes flipped: never a panic, and any frame
/// taken is within the input.
#[test]
fn random_and_corrupted_input_never_panics() {
    let mut valid = Vec::new();
    encode_command(&mut valid, &args(&["EVALSHA", "abc", "1", "k", "t", "100"]));
    for reply in every_reply_kind() {
        reply.encode(&mut valid);
    }
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        // xorshift64: deterministic, so a failure replays.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..20_000 {
        let mut input = if round % 2 == 0 {
            valid.clone()
        } else {
            (0..next() % 64)
                .map(|_| b"*$:+-\r\n0123456789-x"[next() as usize % 19])
                .collect()
        };
        for _ in 0..next() % 4 {
            if !input.is_empty() {
                let at = next() as usize % input.len();
                input[at] = next() as u8;
            }
        }
        if let Ok(Some(cmd)) = parse_command(&input) {
            assert!(cmd.frame_len() <= input.len());
            assert_eq!(cmd.args(&input).count(), cmd.arg_ranges().len());
        }
        if let Ok(Some((_, used))) = parse_reply(&input) {
            assert!(used <= input.len());
        }
    }
}
