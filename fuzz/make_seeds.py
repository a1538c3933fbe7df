#!/usr/bin/env python3
"""Writes the hand-made seed corpus under fuzz/corpus/<target>/seed-*.

Each seed is a scenario spelled out in the byte language the target reads (see the `//!` docs
of fuzz_targets/*.rs). Run from anywhere: `python3 fuzz/make_seeds.py`. The files are
checked in; rerun only after changing a target's input layout.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
RELEASE_SHA = b"63a5d32a929e2ae5edfa6ed689e1ed3702d55f56"
EXTEND_SHA = b"3c47f94dc28d90f47ce03eabe2ebe59e85e54bf1"


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "seed-" + name), "wb") as f:
        f.write(bytes(data))


# ---- resp_decode: [caps, k, len_1..len_k, stream...] ----

EVERY_REPLY = (
    b"+OK\r\n$-1\r\n:1\r\n:-1\r\n:0\r\n-NOSCRIPT No matching script. Please use EVAL.\r\n"
    b"$3\r\nabc\r\n+QUEUED\r\n$40\r\n" + RELEASE_SHA + b"\r\n:42\r\n$0\r\n\r\n"
)


def resp(name, caps, lens, stream):
    write("resp_decode", name, bytes([caps, len(lens)]) + bytes(lens) + stream)


resp("every-reply-whole", 0x0F, [], EVERY_REPLY)
resp("every-reply-bytewise", 0x0F, [1] * 31, EVERY_REPLY)
resp("split-inside-crlf", 0x0F, [4, 1, 5, 1, 3], b"+OK\r\n:-1\r\n$4\r\n\r\n\r\n\r\n$-1\r\n")
resp("binary-bulk", 0x0F, [7, 3], b"$10\r\n\r\n\x00\xff+OK\r\n\r\n:7\r\n")
resp("integer-limits", 0x0F, [9], b":-9223372036854775808\r\n:9223372036854775807\r\n:+5\r\n")
resp("small-cap-bulk", 0x00, [2, 2], b"$100\r\n" + b"x" * 30)
resp("small-cap-status", 0x01, [10], b"+" + b"a" * 80 + b"\r\n+OK\r\n")
resp("array-refused", 0x0F, [2], b":1\r\n*1\r\n:1\r\n")
resp("integer-overflow", 0x0F, [3], b":99999999999999999999999\r\n")
resp("not-resp", 0x0F, [], b"HTTP/1.1 200 OK\r\n_\r\n$-7\r\n")

# ---- client_inputs: header [n, ttl, flags, caps, retry, timing, seed], then steps ----
# Every step starts with an opcode byte and a node byte.

AUTO, SHAPED, RAW, FLOOD, UP, DOWN, ADVANCE, AT_DEADLINE, SILENT = 0, 3, 4, 5, 6, 7, 8, 10, 11
ACQUIRE, TRY_ACQUIRE, ACQUIRE_WITH, EXTEND, RELEASE, CANCEL = 12, 13, 14, 15, 16, 17
GOOD, REFUSE, NOSCRIPT = 1, 0x00, 0x00  # reply modes: good; SET -> $-1; EVALSHA -> -NOSCRIPT
WRONG = 0x04  # EVALSHA -> :0 ; SET -> -READONLY
AUTH_FAIL = 0x00  # AUTH/SELECT -> -WRONGPASS


def header(n, ttl_index, flags=0, caps=0, retry=0, timing=0, seed=1):
    return [n - 1, ttl_index, flags, caps, retry, timing, seed]


def auto(node, *modes):
    assert 1 <= len(modes) <= 4
    return [AUTO, node, len(modes) - 1, *modes]


def step(op, node=0, *operands):
    return [op, node, *operands]


def connect_all(n, preload=True):
    out = []
    for i in range(n):
        out += step(UP, i)
        if preload:
            out += auto(i, GOOD, GOOD)
    return out


def each(n, *modes, skip=()):
    out = []
    for i in range(n):
        if i not in skip:
            out += auto(i, *modes)
    return out


def client(name, data):
    write("client_inputs", name, data)


# A whole cycle on 3 nodes: acquire, extend, release.
client(
    "cycle-3-nodes",
    header(3, 2)
    + connect_all(3)
    + step(ACQUIRE, 0, 0)
    + each(3, GOOD)
    + step(EXTEND, 0, 0)
    + each(3, GOOD)
    + step(RELEASE, 0, 0)
    + each(3, GOOD)
    + step(ADVANCE, 0, 50),
)

# Auto-extension on 5 nodes, one never connected; then every node drops and the lock is lost.
client(
    "auto-extend-then-lost",
    header(5, 1, flags=0x02 | 0x40, retry=0x04)
    + connect_all(4)
    + step(ACQUIRE, 0, 1)
    + each(4, GOOD)
    + step(AT_DEADLINE, 0, 0)
    + each(4, GOOD)
    + step(AT_DEADLINE, 0, 0)
    + each(4, GOOD)
    + sum((step(DOWN, i) for i in range(4)), [])
    + step(AT_DEADLINE, 0, 0)
    + step(AT_DEADLINE, 0, 0)
    + step(ADVANCE, 0, 0x90),
)

# No preloaded scripts: EVALSHA meets -NOSCRIPT and is resent as EVAL, for extend and release.
client(
    "noscript-resend",
    header(1, 4, flags=0x01)
    + step(UP, 0)
    + step(ACQUIRE, 0, 2)
    + auto(0, GOOD)
    + step(EXTEND, 0, 0)
    + auto(0, NOSCRIPT)
    + auto(0, GOOD)
    + step(RELEASE, 0, 0)
    + auto(0, NOSCRIPT)
    + auto(0, GOOD),
)

# Floods: more than the read-buffer cap without a complete reply, in one and in three pushes.
client(
    "flood-read-buffer",
    header(2, 0, caps=0x03)
    + connect_all(2)
    + step(FLOOD, 0, 3, 0, 0)
    + step(AT_DEADLINE, 0, 0)
    + step(UP, 0)
    + step(FLOOD, 1, 4, 1, 2)
    + step(FLOOD, 0, 0, 2, 1)
    + step(ACQUIRE, 0, 0)
    + step(FLOOD, 0, 5, 3, 1),
)

# AUTH + SELECT handshake refused, reconnect, then a lock (strict driver).
client(
    "handshake-refused",
    header(2, 2, flags=0x04 | 0x08 | 0x10)
    + step(UP, 0)
    + step(UP, 1)
    + auto(0, AUTH_FAIL)
    + auto(1, GOOD, GOOD, GOOD, GOOD)
    + step(AT_DEADLINE, 0, 0)
    + step(UP, 0)
    + auto(0, GOOD, GOOD, GOOD)
    + step(ACQUIRE, 0, 0)
    + each(2, GOOD)
    + step(RELEASE, 0, 0)
    + each(2, GOOD),
)

# Contention on 3 nodes with retries, then a supplied-token acquisition with its own retry.
client(
    "contended-retry",
    header(3, 3, retry=0x03 | 0x10)
    + connect_all(3)
    + step(ACQUIRE, 0, 0)
    + auto(0, REFUSE)
    + auto(1, REFUSE)
    + auto(2, GOOD)
    + each(3, GOOD)
    + step(AT_DEADLINE, 0, 0)
    + each(3, GOOD)
    + step(ACQUIRE_WITH, 0, 1, 0x08 | 0x10 | 0x40 | 0x05)
    + auto(0, GOOD)
    + auto(1, REFUSE)
    + auto(2, GOOD)
    + step(AT_DEADLINE, 0, 0)
    + each(3, GOOD, GOOD),
)

# Node 0 connects only after the lock was extended and released: its queued requests flush.
client(
    "first-connection-flush",
    header(3, 2)
    + step(UP, 1)
    + auto(1, GOOD, GOOD)
    + step(UP, 2)
    + auto(2, GOOD, GOOD)
    + step(ACQUIRE, 0, 0)
    + each(3, GOOD, skip=(0,))
    + step(EXTEND, 0, 0)
    + each(3, GOOD, skip=(0,))
    + step(RELEASE, 0, 0)
    + step(UP, 0)
    + auto(0, GOOD, GOOD, GOOD, GOOD)
    + auto(0, GOOD)
    + each(3, GOOD, skip=(0,)),
)

# Cancel while acquiring, late replies, a bogus id, and replies nobody asked for.
client(
    "cancel-and-late-replies",
    header(3, 0, retry=0x02, timing=0x08)
    + connect_all(3)
    + step(TRY_ACQUIRE, 0, 1)
    + step(CANCEL, 0, 0)
    + each(3, GOOD, GOOD)
    + step(RELEASE, 0, 0xFF)
    + step(SHAPED, 1, 3, 0, 2, 5, 1, 7)
    + step(RAW, 2, 8)
    + list(b"$5\r\nab\r\n")
    + step(SILENT, 0, 200)
    + step(AT_DEADLINE, 0, 0),
)
