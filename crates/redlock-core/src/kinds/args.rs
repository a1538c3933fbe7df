//! What a kind's script call carries and answers, as command.rs needs it: which script
//! ([`KindUse`]), the lock's keys and number, packed ([`KindArgs`]), which of them each script takes,
//! and what its replies mean ([`Answer`]). It depends on nothing of the lock, so that the
//! commands can read it (docs/kinds.md, "Scripts").

use std::io::Write as _;

use bytes::{Bytes, BytesMut};

use crate::resp::{self, Reply};

/// Which script of a kind a command runs, and so its arguments and how its reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KindUse {
    /// MULTI_ACQUIRE: 1 or 0.
    MultiAcquire,
    /// MULTI_RELEASE: 1 or 2, 0, -1.
    MultiRelease,
    /// MULTI_EXTEND: 1 or 0.
    MultiExtend,
    /// READ_ACQUIRE: 1 or 0.
    ReadAcquire,
    /// READ_RELEASE: 1 or 2, -1.
    ReadRelease,
    /// READ_EXTEND: 1 or 0.
    ReadExtend,
    /// WRITE_ACQUIRE: 1 or 0.
    WriteAcquire,
    /// WRITE_ABANDON: 1 or 0.
    WriteAbandon,
    /// WRITE_RELEASE: 1 or 2, 0, -1.
    WriteRelease,
    /// SEM_ACQUIRE: 1 or 0, or the error `-PERMITS k`.
    SemAcquire,
    /// SEM_RELEASE: 1 or 2, -1.
    SemRelease,
    /// SEM_EXTEND: 1 or 0.
    SemExtend,
}

/// A kind's script reply read as a vote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Locked / extended / released (2: released, and a subscriber heard).
    Yes,
    /// Held by another / not ours.
    No,
    /// Release only: nothing of ours was there.
    Missing,
}

impl KindUse {
    /// The lock's keys this script takes as `KEYS` (kinds/mod.rs, `Kinded::new`, gives their
    /// order: R, R:readers, R:writer-waiting; R:permits, R:permits:limit, R; or a
    /// multi-lock's resources).
    pub(crate) fn keys<'k>(self, all: &'k [&'k [u8]]) -> &'k [&'k [u8]] {
        let range = match self {
            Self::ReadExtend => 1..2,
            Self::WriteAbandon => 2..3,
            Self::SemExtend => 0..2,
            _ => 0..all.len(),
        };
        all.get(range).unwrap_or(all)
    }

    /// Whether `ARGV` carries the ttl after the token, and then the lock's number (the
    /// writer's patience, the semaphore's k).
    pub(crate) fn argv(self) -> (bool, bool) {
        match self {
            Self::MultiRelease
            | Self::ReadRelease
            | Self::SemRelease
            | Self::WriteRelease
            | Self::WriteAbandon => (false, false),
            Self::WriteAcquire | Self::SemAcquire => (true, true),
            _ => (true, false),
        }
    }

    /// The script's integer reply, `None` if it is not one the script answers.
    #[inline]
    pub(crate) fn answer(self, n: i64) -> Option<Answer> {
        let release = matches!(
            self,
            Self::MultiRelease | Self::ReadRelease | Self::SemRelease | Self::WriteRelease
        );
        match (release, n) {
            (_, 1) | (true, 2) => Some(Answer::Yes),
            (_, 0) => Some(Answer::No),
            (true, -1) => Some(Answer::Missing),
            _ => None,
        }
    }

    /// The k of SEM_ACQUIRE's error reply `-PERMITS <k in place>`, if `message` is one.
    pub(crate) fn permits(self, message: &[u8]) -> Option<u32> {
        let k = (message.strip_prefix(b"PERMITS ")).filter(|_| self == Self::SemAcquire)?;
        std::str::from_utf8(k).ok()?.trim().parse().ok()
    }
}

/// The keys and number a lock of a kind sends with each of its scripts, packed once per
/// lock into one [`Bytes`] that its commands share (in the slot a fenced command keeps its
/// counter key in, so that a command is no larger for it): the number as 8 bytes
/// little-endian, then each key as its length (4 bytes little-endian) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KindArgs(Bytes);

impl KindArgs {
    /// The arguments of a lock with these keys (`KEYS` of its widest script, see
    /// [`KindUse::keys`]) and number (the writer's patience in ms, the semaphore's k).
    pub(crate) fn new(keys: &[Bytes], number: u64) -> Self {
        let size = 8 + keys.iter().map(|k| 4 + k.len()).sum::<usize>();
        let mut packed = BytesMut::with_capacity(size);
        packed.extend_from_slice(&number.to_le_bytes());
        for key in keys {
            let len = u32::try_from(key.len()).unwrap_or(u32::MAX);
            packed.extend_from_slice(&len.to_le_bytes());
            packed.extend_from_slice(key);
        }
        Self(packed.freeze())
    }

    /// The packed bytes, as a command carries them.
    pub(crate) fn packed(&self) -> &Bytes {
        &self.0
    }

    /// The number: the writer's patience in ms, or the semaphore's k.
    pub(crate) fn number(&self) -> u64 {
        (self.0.first_chunk::<8>()).map_or(0, |n| u64::from_le_bytes(*n))
    }
}

/// The number and the keys of packed [`KindArgs`]; a truncated packing (never made) ends
/// the keys early.
fn unpack(packed: &[u8]) -> (u64, Vec<&[u8]>) {
    let Some((number, mut rest)) = packed.split_first_chunk::<8>() else {
        return (0, Vec::new());
    };
    let mut keys = Vec::new();
    while let Some((len, after)) = rest.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        let Some((key, after)) = after.split_at_checked(len) else {
            break;
        };
        keys.push(key);
        rest = after;
    }
    (u64::from_le_bytes(*number), keys)
}

/// A kind's script call's arguments: `[EVALSHA sha | EVAL body] numkeys keys... token
/// [ttl] [number]`, handed to `f`.
#[cold]
pub(crate) fn script_args(
    call: [&[u8]; 2],
    usage: KindUse,
    packed: &[u8],
    [token, ttl]: [&[u8]; 2],
    f: impl FnOnce(&[&[u8]]),
) {
    let (lock_number, all) = unpack(packed);
    let keys = usage.keys(&all);
    let (mut count, mut number) = ([0u8; 20], [0u8; 20]);
    let mut out: Vec<&[u8]> = Vec::with_capacity(keys.len() + 6);
    out.extend(call);
    out.push(decimal(keys.len() as u64, &mut count));
    out.extend_from_slice(keys);
    out.push(token);
    let (with_ttl, with_number) = usage.argv();
    if with_ttl {
        out.push(ttl);
    }
    if with_number {
        out.push(decimal(lock_number, &mut number));
    }
    f(&out);
}

/// `n` in decimal digits, written into `buf`.
fn decimal(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut cursor = &mut buf[..];
    // 20 digits hold every u64: the write cannot fail.
    let _ = write!(cursor, "{n}");
    let left = cursor.len();
    &buf[..20 - left]
}

/// Appends a negative control's `SET key token NX PX ttl` for every key of `packed`
/// ([`KindArgs`]) but the first, whose `SET` the command wrote already (command.rs,
/// `Native::SetEach`).
#[cold]
pub(crate) fn encode_set_each(buf: &mut BytesMut, packed: &[u8], token: &[u8], ttl: &[u8]) {
    for key in unpack(packed).1.into_iter().skip(1) {
        resp::encode(buf, &[b"SET", key, token, b"NX", b"PX", ttl]);
    }
}

/// The replies of the `SET`s of `encode_set_each` read as the first key's alone (the
/// negative control's bug: the other keys may be another client's); `None` if unexpected.
#[cold]
pub(crate) fn first_key(reply: &Reply) -> Option<Answer> {
    match reply {
        Reply::Replies(parts) => match parts.first()? {
            Reply::Ok => Some(Answer::Yes),
            Reply::Nil => Some(Answer::No),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_args_unpack_to_their_keys_and_number() {
        let keys = [
            Bytes::from_static(b"a"),
            Bytes::new(),
            Bytes::from_static(b"ccc"),
        ];
        let args = KindArgs::new(&keys, 7);
        let (number, unpacked) = unpack(args.packed());
        assert_eq!((number, args.number()), (7, 7));
        assert_eq!(unpacked, [&b"a"[..], b"", b"ccc"]);
        assert_eq!(unpack(&args.packed()[..10]), (7, Vec::new()));
        assert_eq!(unpack(b"short"), (0, Vec::new()));
    }

    #[test]
    fn kind_replies_are_read_per_script() {
        assert_eq!(KindUse::SemAcquire.answer(1), Some(Answer::Yes));
        assert_eq!(KindUse::SemAcquire.answer(0), Some(Answer::No));
        assert_eq!(KindUse::SemAcquire.answer(2), None);
        assert_eq!(KindUse::ReadRelease.answer(2), Some(Answer::Yes));
        assert_eq!(KindUse::MultiRelease.answer(-1), Some(Answer::Missing));
        assert_eq!(KindUse::MultiExtend.answer(-1), None);
        assert_eq!(KindUse::SemAcquire.permits(b"PERMITS 3"), Some(3));
        assert_eq!(KindUse::SemAcquire.permits(b"PERMITS x"), None);
        assert_eq!(KindUse::ReadAcquire.permits(b"PERMITS 3"), None);
    }

    #[test]
    fn each_script_takes_its_keys() {
        let keys: Vec<&[u8]> = vec![b"r", b"r:readers", b"r:writer-waiting"];
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(u64::MAX, &mut buf), b"18446744073709551615");
        assert_eq!(KindUse::ReadExtend.keys(&keys), &keys[1..2]);
        assert_eq!(KindUse::WriteAbandon.keys(&keys), &keys[2..3]);
        assert_eq!(KindUse::SemExtend.keys(&keys), &keys[0..2]);
        assert_eq!(KindUse::ReadAcquire.keys(&keys), &keys[..]);
    }
}
