//! Writes to stdout and stderr that never panic. `print!` and `eprint!` panic when the write
//! fails, e.g. with EPIPE when the reader of a pipe is gone (`redlock status | head -c 10`, or
//! a log collector that died); `redlock` must go on to tell the command and release the lock.
//! A failed write here is dropped: there is nobody left to read it. `main.rs` denies the
//! print macros, so every write goes through [`say!`] or [`note!`].

use std::fmt;
use std::io::Write;

/// Writes to stdout; a failed write is dropped.
pub(crate) fn stdout(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(args);
    let _ = out.flush();
}

/// Writes to stderr; a failed write is dropped.
pub(crate) fn stderr(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args);
    let _ = err.flush();
}

/// `println!` on stdout that never panics.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` on stderr that never panics.
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {note, say};
