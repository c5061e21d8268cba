//! What a guest says when it fails, as the one line its error quotes: the message of an
//! `err` result, and what a trapped guest wrote to stderr: a Rust panic's message and
//! place, the exception and line of a Python traceback (componentize-py prints one, then
//! panics with a message of its own), a JavaScript error's message and line as
//! ComponentizeJS prints it, else the last lines. Never the hints meant for a
//! terminal beside the guest (`run with RUST_BACKTRACE=1`): the sandbox has no
//! environment, so nobody can follow them.

/// The longest quote, in characters: a message of megabytes would bury the error.
const MAX_QUOTE_CHARS: usize = 1_000;

/// How many of the last lines are quoted when nothing in them is recognised.
const TAIL_LINES: usize = 3;

/// The Rust standard library's hint after a panic message.
const BACKTRACE_HINT: &str = "note: run with `RUST_BACKTRACE=1`";

/// componentize-py's panic after it printed the traceback of an uncaught exception.
const PYTHON_PANIC: &str = "Python function threw an unexpected exception";

/// What SpiderMonkey (ComponentizeJS's engine) writes when the guest aborts.
const ABORT_NOTE: &str = "Redirecting call to abort() to mozalloc_abort";

/// The first line of a Python traceback.
const TRACEBACK: &str = "Traceback (most recent call last):";

/// `message` on one line (its lines joined by " / ") and at most [`MAX_QUOTE_CHARS`].
pub fn one_line(message: &str) -> String {
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    clip(&lines.join(" / "))
}

/// What a trapped guest wrote to stderr, read.
#[derive(Debug, PartialEq)]
pub enum Said {
    /// `panicked at FILE:LINE:COL: MESSAGE`
    Panic(String),
    /// `TYPE: MESSAGE (at FILE:LINE, in FUNCTION)`
    Exception(String),
    /// Its last lines, none of them recognised.
    Tail(String),
}

impl Said {
    pub fn text(&self) -> &str {
        match self {
            Said::Panic(t) | Said::Exception(t) | Said::Tail(t) => t,
        }
    }
}

/// What a trapped guest wrote to stderr, if it wrote anything.
pub fn summary(stderr: &str) -> Option<Said> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let mut found: Vec<(usize, Said)> = [
        last_panic(&lines).map(|(at, t)| (at, Said::Panic(t))),
        last_traceback(&lines).map(|(at, t)| (at, Said::Exception(t))),
        last_js_error(&lines).map(|(at, t)| (at, Said::Exception(t))),
    ]
    .into_iter()
    .flatten()
    .collect();
    // componentize-py's panic after the traceback says only that there was one.
    if found.iter().any(|(_, s)| matches!(s, Said::Exception(_))) {
        found.retain(|(_, s)| !matches!(s, Said::Panic(p) if p.contains(PYTHON_PANIC)));
    }
    // Otherwise the last one written is what ended the guest.
    match found.into_iter().max_by_key(|(at, _)| *at) {
        Some((_, said)) => Some(said),
        None => tail(&lines).map(Said::Tail),
    }
}

/// The last lines, without the backtrace hint.
fn tail(lines: &[&str]) -> Option<String> {
    let kept: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.starts_with(BACKTRACE_HINT) && *l != ABORT_NOTE)
        .collect();
    let start = kept.len().checked_sub(1)?.saturating_sub(TAIL_LINES - 1);
    Some(one_line(&kept[start..].join("\n")))
}

/// The last panic (`thread 'NAME' (ID) panicked at FILE:LINE:COL:` and the message
/// lines up to the hint) as `panicked at FILE:LINE:COL: MESSAGE`, with the index of its
/// first line.
fn last_panic(lines: &[&str]) -> Option<(usize, String)> {
    let at = lines
        .iter()
        .rposition(|l| l.starts_with("thread '") && l.contains(" panicked at "))?;
    let head = lines[at];
    let place = &head[head.find(" panicked at ")? + 1..];
    let message: Vec<&str> = lines[at + 1..]
        .iter()
        .copied()
        .take_while(|l| !l.starts_with(BACKTRACE_HINT))
        .collect();
    Some((at, one_line(&format!("{place} {}", message.join("\n")))))
}

/// The last Python traceback as `TYPE: MESSAGE (at FILE:LINE, in FUNCTION)`, naming its
/// innermost frame, with the index of its first line.
fn last_traceback(lines: &[&str]) -> Option<(usize, String)> {
    let at = lines.iter().rposition(|l| *l == TRACEBACK)?;
    let body = &lines[at + 1..];
    // Frames and their source lines are indented; the exception is the first line that
    // is not.
    let exception = body.iter().position(|l| !l.starts_with(' '))?;
    let frame = body[..exception]
        .iter()
        .rev()
        .find_map(|l| python_frame(l.trim_start()));
    let text = body[exception];
    let quote = match frame {
        Some((file, line, function)) => format!("{text} (at {file}:{line}, in {function})"),
        None => text.to_string(),
    };
    Some((at, one_line(&quote)))
}

/// The last uncaught JavaScript error as ComponentizeJS prints it (its message, `Stack:`,
/// then its frames indented, `FUNCTION@FILE:LINE:COLUMN`, the innermost first) as
/// `MESSAGE (at FILE:LINE, in FUNCTION)`, with the index of its first line.
fn last_js_error(lines: &[&str]) -> Option<(usize, String)> {
    let stack = lines.iter().rposition(|l| *l == "Stack:")?;
    let at = stack.checked_sub(1)?;
    let message = lines[at];
    let frame = lines[stack + 1..]
        .iter()
        .take_while(|l| l.starts_with(' '))
        .find_map(|l| js_frame(l.trim_start()));
    let quote = match frame {
        Some(("", file, line)) => format!("{message} (at {file}:{line})"),
        Some((function, file, line)) => format!("{message} (at {file}:{line}, in {function})"),
        None => message.to_string(),
    };
    Some((at, one_line(&quote)))
}

/// `FUNCTION@FILE:LINE:COLUMN` as FUNCTION, FILE and LINE.
fn js_frame(frame: &str) -> Option<(&str, &str, &str)> {
    let (function, place) = frame.split_once('@')?;
    let (place, _column) = place.rsplit_once(':')?;
    let (file, line) = place.rsplit_once(':')?;
    line.bytes()
        .all(|b| b.is_ascii_digit())
        .then_some((function, file, line))
}

/// `File "PATH", line N, in FUNCTION` as its parts, PATH without the `/0/` that
/// componentize-py puts before the files of its first `-p` directory (`/1/` the second,
/// …), so the file reads as it does beside the scenario.
fn python_frame(line: &str) -> Option<(&str, &str, &str)> {
    let rest = line.strip_prefix("File \"")?;
    let (path, rest) = rest.split_once("\", line ")?;
    let (number, function) = rest.split_once(", in ")?;
    Some((strip_mount(path), number, function))
}

/// `/0/scenario.py` → `scenario.py`; any other path unchanged.
fn strip_mount(path: &str) -> &str {
    let Some(rest) = path.strip_prefix('/') else {
        return path;
    };
    match rest.split_once('/') {
        Some((dir, file)) if !dir.is_empty() && dir.bytes().all(|b| b.is_ascii_digit()) => file,
        _ => path,
    }
}

/// At most [`MAX_QUOTE_CHARS`] characters, with a marker when cut.
fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTE_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… [cut: {} bytes in all]", &text[..cut], text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rust_panic_is_its_place_and_message_without_the_hint() {
        let stderr = "[log] hello\n\
            thread '<unnamed>' (1) panicked at src/lib.rs:135:24:\n\
            probe panicked on purpose at request 0\n\
            note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            summary(stderr),
            Some(Said::Panic(
                "panicked at src/lib.rs:135:24: probe panicked on purpose at request 0".into()
            ))
        );
    }

    #[test]
    fn a_python_traceback_is_its_exception_and_innermost_line() {
        let stderr = "Traceback (most recent call last):\n  \
            File \"/0/scenario.py\", line 16, in next_request\n    \
            rate(-1)\n  \
            File \"/0/scenario.py\", line 13, in rate\n    \
            raise ValueError(\"bad rate\")\n\
            ValueError: bad rate\n\
            thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:\n\
            Python function threw an unexpected exception\n\
            note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            summary(stderr),
            Some(Said::Exception(
                "ValueError: bad rate (at scenario.py:13, in rate)".into()
            ))
        );
    }

    #[test]
    fn the_last_of_several_tracebacks_counts() {
        let stderr = "Traceback (most recent call last):\n  \
            File \"/0/a.py\", line 1, in f\n\
            KeyError: 'x'\n\n\
            During handling of the above exception, another exception occurred:\n\n\
            Traceback (most recent call last):\n  \
            File \"/0/a.py\", line 3, in f\n\
            TypeError: no\n";
        assert_eq!(
            summary(stderr),
            Some(Said::Exception("TypeError: no (at a.py:3, in f)".into()))
        );
    }

    #[test]
    fn a_panic_after_a_printed_traceback_is_the_cause() {
        let stderr = "Traceback (most recent call last):\n  \
            File \"/0/a.py\", line 1, in f\n\
            KeyError: 'x'\n\
            thread 'main' panicked at src/x.rs:1:1:\n\
            index out of bounds\n";
        assert_eq!(
            summary(stderr),
            Some(Said::Panic(
                "panicked at src/x.rs:1:1: index out of bounds".into()
            ))
        );
    }

    #[test]
    fn a_javascript_error_is_its_message_and_innermost_line() {
        let stderr = "bad description\n\
            Stack:\n  \
            describe@scenario.js:5:11\n  \
            describe@bench_scenario/export.js:134:11\n  \
            export_workload_0_3_0$describe@/tmp/8955978bf1f7/sources/initializer.js:783:15\n\n\
            Redirecting call to abort() to mozalloc_abort\n";
        assert_eq!(
            summary(stderr),
            Some(Said::Exception(
                "bad description (at scenario.js:5, in describe)".into()
            ))
        );
        assert_eq!(
            summary("oops\nStack:\n  @scenario.js:1:7\n"),
            Some(Said::Exception("oops (at scenario.js:1)".into()))
        );
    }

    #[test]
    fn otherwise_the_last_lines_are_quoted() {
        assert_eq!(summary("\n \n"), None);
        assert_eq!(
            summary("a\nb\n\nc\nd\n"),
            Some(Said::Tail("b / c / d".into()))
        );
        assert_eq!(
            summary("abort\nnote: run with `RUST_BACKTRACE=1` environment variable\n"),
            Some(Said::Tail("abort".into()))
        );
        assert_eq!(
            summary(
                "uncaught exception: undefined\nRedirecting call to abort() to mozalloc_abort\n"
            ),
            Some(Said::Tail("uncaught exception: undefined".into()))
        );
    }

    #[test]
    fn a_quote_is_one_bounded_line() {
        assert_eq!(one_line("first\n\n  second  \n"), "first /   second");
        let long = one_line(&"é".repeat(5_000));
        assert!(long.starts_with(&"é".repeat(MAX_QUOTE_CHARS)));
        assert!(long.ends_with("… [cut: 10000 bytes in all]"), "{long}");
        assert!(!long.contains('\n'));
    }

    #[test]
    fn only_componentize_pys_mount_points_are_stripped() {
        assert_eq!(strip_mount("/0/scenario.py"), "scenario.py");
        assert_eq!(strip_mount("/12/sub/m.py"), "sub/m.py");
        assert_eq!(
            strip_mount("/python/json/decoder.py"),
            "/python/json/decoder.py"
        );
        assert_eq!(strip_mount("scenario.py"), "scenario.py");
        assert_eq!(strip_mount("//x.py"), "//x.py");
    }
}
