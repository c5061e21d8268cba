//! The runner's own lines on stdout and stderr. `println!` panics when a write fails, and
//! with SIGPIPE ignored (so that a server closing a socket is an error, not death: see
//! `main.rs`) `runner … | head -1` makes every write after the first line fail with EPIPE;
//! a closed terminal (SIGHUP) makes them fail with EIO. Here a stream that failed once is
//! given up quietly for the rest of the process, and the run goes on to finish and write
//! its files. Control characters from servers, scenarios and packages are shown escaped,
//! never obeyed (see [`crate::safeguards::display`]).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout, control characters but line breaks escaped.
pub fn out(text: &str) {
    write(&mut std::io::stdout().lock(), &STDOUT_GONE, text);
}

/// Writes `text` to stderr, control characters but line breaks escaped.
pub fn err(text: &str) {
    write(&mut std::io::stderr().lock(), &STDERR_GONE, text);
}

fn write(stream: &mut impl Write, gone: &AtomicBool, text: &str) {
    if gone.load(Ordering::Relaxed) {
        return;
    }
    let text = crate::safeguards::display::escape_control_multiline(text);
    if stream
        .write_all(text.as_bytes())
        .and_then(|()| stream.flush())
        .is_err()
    {
        gone.store(true, Ordering::Relaxed);
    }
}

/// `print!` that never panics: see [`out`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::outputs::console::out(&format!($($arg)*)) };
}

/// `println!` that never panics: see [`out`].
#[macro_export]
macro_rules! outln {
    () => { $crate::outputs::console::out("\n") };
    ($($arg:tt)*) => { $crate::outputs::console::out(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics: see [`err`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => { $crate::outputs::console::err(&format!("{}\n", format_args!($($arg)*))) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream whose reader went away.
    struct Closed(usize);

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            self.0 += 1;
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stream_is_given_up_after_one_failure() {
        let gone = AtomicBool::new(false);
        let mut closed = Closed(0);
        write(&mut closed, &gone, "one\n");
        write(&mut closed, &gone, "two\n");
        assert!(gone.load(Ordering::Relaxed));
        assert_eq!(closed.0, 1);
    }

    #[test]
    fn control_characters_are_escaped_line_breaks_kept() {
        let gone = AtomicBool::new(false);
        let mut buf = Vec::new();
        write(&mut buf, &gone, "a\u{1b}[2J\nb\n");
        assert_eq!(String::from_utf8(buf).unwrap(), "a\\u{1b}[2J\nb\n");
    }
}
