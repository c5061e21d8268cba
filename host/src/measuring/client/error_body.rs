//! What an error response's body may add to its message: a text body is quoted (by the
//! caller, redacted and cut short), anything else is only described. A compressed or
//! binary body printed as text would put arbitrary bytes into the report and on the
//! terminal.

/// The body's bytes in a message are replaced by this summary when they are not text:
/// its content type, its encoding and its length (`None` when the body is text).
pub fn summary(
    content_type: Option<&str>,
    encoding: Option<&str>,
    body: &[u8],
    length: Option<u64>,
) -> Option<String> {
    let encoded = encoding.is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity"));
    let texty = content_type.is_none_or(is_text_type);
    if !encoded && texty && is_utf8_text(body) {
        return None;
    }
    let what = match (content_type, encoding) {
        (Some(t), Some(e)) if encoded => format!("{} ({})", clean(t), clean(e)),
        (Some(t), _) => clean(t),
        (None, Some(e)) if encoded => clean(e),
        _ => "binary data".to_string(),
    };
    let size = match length {
        Some(n) => format!("{n} bytes"),
        None => format!("at least {} bytes", body.len()),
    };
    Some(format!("a body of {size} of {what}, not shown"))
}

/// `text/*`, JSON and XML media types (with or without parameters).
fn is_text_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || essence.ends_with("/json")
        || essence.ends_with("+json")
        || essence.ends_with("/xml")
        || essence.ends_with("+xml")
}

/// UTF-8 (a character cut by the read limit at the very end still counts) without NUL
/// bytes, which no text body has.
fn is_utf8_text(body: &[u8]) -> bool {
    let utf8 = match std::str::from_utf8(body) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    utf8 && memchr::memchr(0, body).is_none()
}

/// A header value as it may appear in a message: short, printable ASCII.
fn clean(value: &str) -> String {
    value
        .chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_bodies_are_quoted_others_described() {
        let json = br#"{"error":{"message":"overloaded"}}"#;
        assert_eq!(summary(Some("application/json"), None, json, None), None);
        assert_eq!(summary(None, None, b"plain words", Some(11)), None);
        assert_eq!(
            summary(
                Some("text/html; charset=utf-8"),
                Some("identity"),
                b"<p>",
                None
            ),
            None
        );
        let gz = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03";
        assert_eq!(
            summary(Some("application/json"), Some("gzip"), gz, Some(30)).as_deref(),
            Some("a body of 30 bytes of application/json (gzip), not shown")
        );
        assert_eq!(
            summary(Some("application/octet-stream"), None, b"abc", None).as_deref(),
            Some("a body of at least 3 bytes of application/octet-stream, not shown")
        );
        assert_eq!(
            summary(None, None, &[0xff, 0xfe, 0x00], Some(3)).as_deref(),
            Some("a body of 3 bytes of binary data, not shown")
        );
        // Valid UTF-8 cut in the middle of a character by the read limit is still text.
        assert_eq!(summary(None, None, &"é".as_bytes()[..1], None), None);
        // Header values are cleaned too.
        let odd = summary(Some("image/\u{1b}[31mpng"), None, b"x", Some(1)).unwrap();
        assert!(!odd.contains('\u{1b}'), "{odd}");
    }
}
