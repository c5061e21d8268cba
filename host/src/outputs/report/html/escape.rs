//! Text made safe for HTML content and attribute values, shared by report.html's page
//! (html.rs) and the parts other modules render into it (ended.rs).

/// Escapes text for HTML content and attribute values. Control characters and the bidi
/// overrides (ESC, BEL, RLO from a scenario's tag) are first written visibly, as on the
/// terminal (`display`): a page must show the bytes it was given, not be reordered by them.
pub fn escape(s: &str) -> String {
    let s = crate::safeguards::display::escape_control_multiline(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_are_shown_as_text() {
        assert_eq!(escape("<b>&\"'"), "&lt;b&gt;&amp;&quot;&#39;");
        assert_eq!(
            escape("a\u{1b}[31m\u{7}\u{202e}b\nc"),
            "a\\u{1b}[31m\\u{7}\\u{202e}b\nc"
        );
    }
}
