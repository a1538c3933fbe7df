//! Fuzzes `redlock_core::Decoder` with arbitrary node bytes, split arbitrarily, under small and
//! large caps. Checks that it never panics, that decoding is split-invariant (the whole input
//! in one push and the split input give the same replies up to the first error, the same
//! error-or-not, and the same leftover), that an incomplete tail never exceeds the reply cap,
//! and that every decoded reply re-encodes canonically to itself.
//!
//! Input layout: byte 0 picks the caps and the chunk-length scale, byte 1 the number of split
//! points k (0..=31), the next k bytes the chunk lengths; the rest is the node's byte stream.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use redlock_core::{Decoder, Reply};

fuzz_target!(|data: &[u8]| {
    let (Some(&caps), Some(&k)) = (data.first(), data.get(1)) else {
        return;
    };
    let max_reply = [16, 64, 256, 64 * 1024][usize::from(caps & 3)];
    let max_buffer = [0, 64, 1024, 1 << 20][usize::from((caps >> 2) & 3)];
    let scale = [1, 4, 32, 256][usize::from((caps >> 4) & 3)];
    let k = usize::from(k % 32);
    let Some(lens) = data.get(2..2 + k) else {
        return;
    };
    let stream = &data[2 + k..];

    let whole = decode(max_reply, max_buffer, &[stream]);

    let mut chunks = Vec::with_capacity(k + 1);
    let mut rest = stream;
    for &len in lens {
        let (chunk, tail) = rest.split_at((usize::from(len) * scale).min(rest.len()));
        chunks.push(chunk);
        rest = tail;
    }
    chunks.push(rest);
    let split = decode(max_reply, max_buffer, &chunks);

    assert_eq!(whole.replies, split.replies, "replies depend on the split");
    assert_eq!(
        whole.error.is_some(),
        split.error.is_some(),
        "error depends on the split: whole {:?}, split {:?}",
        whole.error,
        split.error
    );
    if whole.error.is_none() {
        assert_eq!(
            whole.leftover, split.leftover,
            "leftover depends on the split"
        );
    }
    for reply in &whole.replies {
        assert_eq!(
            &reencode_and_decode(reply),
            reply,
            "reply does not round-trip"
        );
    }
});

/// What a decoder made of a stream pushed in `chunks`.
struct Decoded {
    replies: Vec<Reply>,
    error: Option<String>,
    leftover: usize,
}

/// Pushes each chunk and pulls every complete reply after it, stopping at the first error
/// (the stream cannot be resynchronised after one).
fn decode(max_reply: usize, max_buffer: usize, chunks: &[&[u8]]) -> Decoded {
    let mut d = Decoder::new(max_reply, max_buffer);
    let mut replies = Vec::new();
    for chunk in chunks {
        d.push(chunk);
        loop {
            let before = d.buffered();
            match d.next_reply() {
                Ok(Some(reply)) => {
                    assert!(d.buffered() < before, "a reply consumed no bytes");
                    replies.push(reply);
                }
                Ok(None) => {
                    assert_eq!(d.buffered(), before, "waiting for more consumed bytes");
                    assert!(
                        d.buffered() <= max_reply,
                        "incomplete tail of {} bytes above the {max_reply}-byte reply cap",
                        d.buffered()
                    );
                    break;
                }
                Err(e) => {
                    return Decoded {
                        replies,
                        error: Some(e.message().to_owned()),
                        leftover: d.buffered(),
                    };
                }
            }
        }
        if let Err(e) = d.check_buffer() {
            return Decoded {
                replies,
                error: Some(e.message().to_owned()),
                leftover: d.buffered(),
            };
        }
    }
    Decoded {
        replies,
        error: None,
        leftover: d.buffered(),
    }
}

/// Encodes a reply the canonical RESP2 way and decodes it again with generous caps.
fn reencode_and_decode(reply: &Reply) -> Reply {
    let mut out = Vec::new();
    let line = |out: &mut Vec<u8>, kind: u8, body: &[u8]| {
        out.push(kind);
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    };
    match reply {
        Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
        Reply::Status(s) => line(&mut out, b'+', s),
        Reply::Error(s) => line(&mut out, b'-', s),
        Reply::Integer(i) => line(&mut out, b':', i.to_string().as_bytes()),
        Reply::Bulk(b) => {
            line(&mut out, b'$', b.len().to_string().as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        // A reply kind added later: compare it with itself.
        other => return other.clone(),
    }
    let mut d = Decoder::new(1 << 20, 1 << 20);
    d.push(&out);
    let again = match d.next_reply() {
        Ok(Some(r)) => r,
        other => panic!(
            "canonical {:?} does not decode: {other:?}",
            Bytes::from(out)
        ),
    };
    assert_eq!(d.buffered(), 0, "canonical {reply:?} left bytes behind");
    again
}
