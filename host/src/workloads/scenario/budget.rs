//! What one host-function call may cost. Host functions run outside the guest's own
//! limits (the Rhai operation count, the Wasm memory cap), so each checks its request
//! against these bounds before allocating anything, and a scenario asking for more gets
//! an error naming the function and the limit instead of exhausting the runner.
//!
//! The bounds leave room for long-context benchmarks: 4 Mi tokens is four times the
//! longest context windows served today, and its synthetic text is about 28 MiB.

/// Most tokens one call may produce or take: `synthetic_text`, the ids given to
/// `decode` and those `encode` returns.
pub const MAX_TOKENS_PER_CALL: u64 = 4 << 20;

/// `random_token_text` takes less: its text is mostly not ASCII, and re-encoding it to hit
/// the count exactly takes about 3 s for 1 Mi tokens in a release build (30 s for 4 Mi).
pub const MAX_RANDOM_TEXT_TOKENS_PER_CALL: u64 = 1 << 20;

/// Most bytes of text one call may take or produce: the text given to `encode` and
/// `count_tokens`, and the text `decode` would return. Rhai's own string cap is the same.
pub const MAX_TEXT_BYTES_PER_CALL: u64 = 64 << 20;

/// One `log` message is cut to this many bytes, with a marker saying how long it was.
pub const MAX_LOG_MESSAGE_BYTES: usize = 4 << 10;

/// Log bytes a scenario may write in one run; later messages are dropped after one
/// line saying so.
pub const MAX_LOG_BYTES_PER_RUN: usize = 1 << 20;

/// Most distinct keys a scenario may `note` in one run.
pub const MAX_NOTES_PER_RUN: usize = 1_000;

/// Most bytes of keys and values a scenario's notes may hold together (a number counts 8).
pub const MAX_NOTE_BYTES_PER_RUN: usize = 16 << 20;

/// What a run's notes hold, checked before a note is kept: past either limit the note is
/// refused (the call fails with the reason) and the notes already kept stay.
#[derive(Debug, Default)]
pub struct NoteBudget {
    bytes: usize,
}

impl NoteBudget {
    /// Takes a note of `bytes` in place of one of `replaced` bytes (0 when the key is
    /// new), `count` notes being kept so far; refused past the run's limits.
    pub fn admit(
        &mut self,
        key: &str,
        bytes: usize,
        replaced: Option<usize>,
        count: usize,
    ) -> Result<(), String> {
        let count = count + usize::from(replaced.is_none());
        let total = self.bytes - replaced.unwrap_or(0) + bytes;
        if count > MAX_NOTES_PER_RUN {
            return Err(format!(
                "note({}): over the limit of {MAX_NOTES_PER_RUN} notes per run",
                summary(key)
            ));
        }
        if total > MAX_NOTE_BYTES_PER_RUN {
            return Err(format!(
                "note({}): {total} bytes of notes would be over the limit of {} MiB per run",
                summary(key),
                MAX_NOTE_BYTES_PER_RUN >> 20
            ));
        }
        self.bytes = total;
        Ok(())
    }
}

/// A key as an error quotes it: its first 40 characters.
fn summary(key: &str) -> String {
    match key.char_indices().nth(40) {
        Some((cut, _)) => format!("{:?}…", &key[..cut]),
        None => format!("{key:?}"),
    }
}

/// A host-function call that asked for more than its budget.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{function}({argument}): {amount} {unit} is over the limit of {limit} {unit} per call")]
pub struct OverBudget {
    pub function: String,
    /// The argument as the scenario gave it (a count, or a summary of a text).
    pub argument: String,
    pub amount: u64,
    pub limit: u64,
    pub unit: &'static str,
}

impl OverBudget {
    /// The same error named as a WIT function (`synthetic-text`), for a component.
    pub fn in_wit(mut self) -> OverBudget {
        self.function = self.function.replace('_', "-");
        self
    }
}

/// Refuses a token count over [`MAX_TOKENS_PER_CALL`] (or negative, which the callers
/// report themselves before converting).
pub fn check_tokens(function: &str, argument: impl ToString, n: u64) -> Result<(), OverBudget> {
    check(
        function,
        argument.to_string(),
        n,
        MAX_TOKENS_PER_CALL,
        "tokens",
    )
}

/// Refuses a `random_token_text` count over [`MAX_RANDOM_TEXT_TOKENS_PER_CALL`].
pub fn check_random_tokens(n: u64) -> Result<(), OverBudget> {
    check(
        "random_token_text",
        n.to_string(),
        n,
        MAX_RANDOM_TEXT_TOKENS_PER_CALL,
        "tokens",
    )
}

/// Refuses a text over [`MAX_TEXT_BYTES_PER_CALL`] bytes.
pub fn check_text(function: &str, argument: &str, bytes: u64) -> Result<(), OverBudget> {
    check(
        function,
        argument.into(),
        bytes,
        MAX_TEXT_BYTES_PER_CALL,
        "bytes",
    )
}

fn check(
    function: &str,
    argument: String,
    amount: u64,
    limit: u64,
    unit: &'static str,
) -> Result<(), OverBudget> {
    if amount <= limit {
        return Ok(());
    }
    Err(OverBudget {
        function: function.into(),
        argument,
        amount,
        limit,
        unit,
    })
}

/// Keeps a scenario's log within [`MAX_LOG_MESSAGE_BYTES`] per message and
/// [`MAX_LOG_BYTES_PER_RUN`] per run.
#[derive(Debug, Default)]
pub struct LogBudget {
    written: usize,
    muted: bool,
}

impl LogBudget {
    /// The text to print for `message`, or `None` once the run's volume is spent. The
    /// message that crosses the limit is replaced by a line saying the rest is dropped.
    pub fn admit(&mut self, message: &str) -> Option<String> {
        if self.muted {
            return None;
        }
        let line = truncate_message(message);
        if self.written + line.len() > MAX_LOG_BYTES_PER_RUN {
            self.muted = true;
            return Some(format!(
                "(log limit of {} KiB per run reached: further messages are dropped)",
                MAX_LOG_BYTES_PER_RUN >> 10
            ));
        }
        self.written += line.len();
        Some(line)
    }
}

/// `message` cut to at most [`MAX_LOG_MESSAGE_BYTES`] (on a character boundary) plus a
/// marker giving its full length.
fn truncate_message(message: &str) -> String {
    if message.len() <= MAX_LOG_MESSAGE_BYTES {
        return message.to_string();
    }
    let mut cut = MAX_LOG_MESSAGE_BYTES;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}… [truncated: the message was {} bytes]",
        &message[..cut],
        message.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_refused_past_their_count_or_bytes_and_a_replacement_counts_its_difference() {
        let mut b = NoteBudget::default();
        for i in 0..MAX_NOTES_PER_RUN {
            b.admit("k", 10, None, i).unwrap();
        }
        let e = b.admit("k", 10, None, MAX_NOTES_PER_RUN).unwrap_err();
        assert!(e.contains("1000 notes"), "{e}");
        b.admit("k", 20, Some(10), MAX_NOTES_PER_RUN).unwrap();
        let mut b = NoteBudget::default();
        b.admit("big", MAX_NOTE_BYTES_PER_RUN - 1, None, 0).unwrap();
        let e = b.admit("more", 2, None, 1).unwrap_err();
        assert!(e.contains("16 MiB"), "{e}");
        b.admit("big", 1, Some(MAX_NOTE_BYTES_PER_RUN - 1), 1)
            .unwrap();
        b.admit("more", 2, None, 1).unwrap();
    }

    #[test]
    fn token_counts_over_the_limit_are_refused_naming_function_and_limit() {
        assert!(check_tokens("synthetic_text", 10, 10).is_ok());
        assert!(check_tokens("synthetic_text", MAX_TOKENS_PER_CALL, MAX_TOKENS_PER_CALL).is_ok());
        let err =
            check_tokens("synthetic_text", 1_000_000_000_000u64, 1_000_000_000_000).unwrap_err();
        let text = err.to_string();
        assert_eq!(
            text,
            "synthetic_text(1000000000000): 1000000000000 tokens is over the limit of 4194304 tokens per call"
        );
        assert!(err.in_wit().to_string().starts_with("synthetic-text("));
        assert!(check_random_tokens(MAX_RANDOM_TEXT_TOKENS_PER_CALL).is_ok());
        let err = check_random_tokens(MAX_RANDOM_TEXT_TOKENS_PER_CALL + 1).unwrap_err();
        assert_eq!(err.function, "random_token_text");
    }

    #[test]
    fn text_over_the_limit_is_refused() {
        assert!(check_text("encode", "text", MAX_TEXT_BYTES_PER_CALL).is_ok());
        let err = check_text("encode", "text", MAX_TEXT_BYTES_PER_CALL + 1).unwrap_err();
        assert!(err
            .to_string()
            .contains("67108865 bytes is over the limit of 67108864 bytes"));
    }

    #[test]
    fn long_messages_are_cut_with_a_marker() {
        let mut log = LogBudget::default();
        assert_eq!(log.admit("short").as_deref(), Some("short"));
        let long = "é".repeat(10_000);
        let line = log.admit(&long).unwrap();
        assert!(line.len() <= MAX_LOG_MESSAGE_BYTES + 64, "{}", line.len());
        assert!(
            line.ends_with("[truncated: the message was 20000 bytes]"),
            "{line}"
        );
    }

    #[test]
    fn the_run_volume_is_capped_with_one_notice() {
        let mut log = LogBudget::default();
        let message = "x".repeat(MAX_LOG_MESSAGE_BYTES);
        let mut printed = 0;
        let mut lines = 0;
        for _ in 0..10_000 {
            if let Some(line) = log.admit(&message) {
                printed += line.len();
                lines += 1;
            }
        }
        assert!(printed <= MAX_LOG_BYTES_PER_RUN + 200, "{printed}");
        assert_eq!(lines, MAX_LOG_BYTES_PER_RUN / MAX_LOG_MESSAGE_BYTES + 1);
        assert!(log.admit("more").is_none());
    }
}
