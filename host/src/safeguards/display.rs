//! Text from sources the runner does not control (package manifests, scenarios, servers)
//! made safe to show on a terminal or write into a text report: control characters that
//! would move the cursor, recolour or retitle the terminal, or reorder what is shown, are
//! written visibly as Rust-style escapes (`\u{1b}`) instead of being passed through.

use std::borrow::Cow;

/// Escapes every control character, line breaks and tabs included: for text shown on one
/// line (a name, a field, a table cell).
pub fn escape_control(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Escapes control characters but keeps `\n`: for text that is meant to span lines (a
/// description, notes). `\r` is escaped, so a line cannot overwrite the one before.
pub fn escape_control_multiline(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// The most characters of outside text one error line quotes.
pub const EXCERPT_CHARS: usize = 200;

/// Outside text quoted in one line: escaped as [`escape_control`] does and cut after
/// [`EXCERPT_CHARS`] characters, saying how long it was, so a megabyte of it never becomes
/// a megabyte of error line.
pub fn excerpt(text: &str) -> Cow<'_, str> {
    let shown = escape_control(text);
    match shown.char_indices().nth(EXCERPT_CHARS) {
        None => shown,
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", &shown[..cut], text.len())),
    }
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| needs_escape(c) && !(keep_newlines && c == '\n');
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// C0 and C1 controls and DEL (`char::is_control`), and the Unicode bidirectional
/// overrides and isolates, which reorder what a terminal shows ("Trojan Source",
/// CVE-2021-42574).
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_cut_after_its_limit_and_says_the_length() {
        assert!(matches!(excerpt("short"), Cow::Borrowed("short")));
        let long = "é".repeat(1 << 20);
        let shown = excerpt(&long);
        assert!(shown.chars().count() < EXCERPT_CHARS + 20, "{shown}");
        assert!(
            shown.ends_with(&format!("… ({} bytes)", 2 << 20)),
            "{shown}"
        );
        assert_eq!(excerpt("\u{1b}[2J"), "\\u{1b}[2J");
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "Chat mix — 500 conversations, naïve café";
        assert!(matches!(escape_control(text), Cow::Borrowed(t) if t == text));
        assert!(matches!(
            escape_control_multiline("a\nb"),
            Cow::Borrowed("a\nb")
        ));
    }

    #[test]
    fn terminal_escapes_are_shown_not_obeyed() {
        assert_eq!(
            escape_control("\u{1b}]0;pwned\u{7}red\u{1b}[31m"),
            "\\u{1b}]0;pwned\\u{7}red\\u{1b}[31m"
        );
        assert_eq!(
            escape_control("a\r\nb\tc\u{7f}\u{9b}"),
            "a\\u{d}\\u{a}b\\u{9}c\\u{7f}\\u{9b}"
        );
        assert_eq!(escape_control("x\u{202e}y\u{2066}"), "x\\u{202e}y\\u{2066}");
    }

    #[test]
    fn multiline_text_keeps_its_line_breaks_only() {
        assert_eq!(
            escape_control_multiline("one\ntwo\rthree\u{1b}"),
            "one\ntwo\\u{d}three\\u{1b}"
        );
    }
}
