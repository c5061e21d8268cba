//! Extra HTTP headers: `--header 'K: V'` on every request, and a scenario's per-request
//! `headers` (session affinity for a router, a tenant id). A per-request header replaces a
//! `--header` of the same name. Values of headers whose name looks secret are hidden in
//! everything the run prints or writes (`redact::secret_header`).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::safeguards::redact::{self, Redactor};

/// Headers the client sets itself: a scenario or `--header` changing them would break the
/// request's framing, its JSON body or its match with requests.jsonl.
///
/// `traceparent` among them: a scenario's own would file the request under a span that
/// requests.jsonl and `--otlp` do not name (or several requests under one), and the
/// server's traces could no longer be joined to the records. Refused, not overridden in
/// silence, so a scenario that sets one hears why; the run's trace id is in result.json.
const RESERVED: [&str; 8] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "content-type",
    "te",
    crate::both_sides::wire::REQUEST_ID,
    crate::both_sides::wire::TRACEPARENT,
];

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum HeaderError {
    #[error("header `{0}`: expected NAME: VALUE, e.g. 'x-tenant: a'")]
    Syntax(String),
    #[error("header name `{0}` is not a valid HTTP header name")]
    Name(String),
    #[error("header `{name}`: its value holds a character HTTP does not allow (a line break, a control character)")]
    Value { name: String },
    #[error("header `{0}` is set by the runner itself and cannot be replaced{hint}", hint = reserved_hint(.0))]
    Reserved(String),
}

fn reserved_hint(name: &str) -> &'static str {
    if name.eq_ignore_ascii_case(crate::both_sides::wire::REQUEST_ID) {
        " (its prefix is --request-id-prefix)"
    } else if name.eq_ignore_ascii_case(crate::both_sides::wire::TRACEPARENT) {
        " (each request is a span of the run's own trace: its ids are in requests.jsonl)"
    } else {
        ""
    }
}

/// `NAME: VALUE` as written after `--header`: the name trimmed, the value trimmed of the
/// spaces around it.
pub fn parse_header_arg(text: &str) -> Result<(String, String), HeaderError> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| HeaderError::Syntax(shown(text)))?;
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty() {
        return Err(HeaderError::Syntax(shown(text)));
    }
    check(name, value)?;
    Ok((name.to_string(), value.to_string()))
}

/// A header as an error shows it: a secret-looking value hidden (without a `:` all but
/// the first word may be a value: `Authorization Bearer …`).
fn shown(text: &str) -> String {
    let (name, value) = match text.split_once(':') {
        Some((name, value)) => (name.trim(), value),
        None => text
            .trim()
            .split_once(char::is_whitespace)
            .unwrap_or((text.trim(), "")),
    };
    match (redact::secret_header(name), value.is_empty()) {
        (true, false) => format!("{name}: {}", redact::MARK),
        _ => text.to_string(),
    }
}

/// The typed header, or why it cannot be sent.
fn check(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), HeaderError> {
    let header =
        HeaderName::from_bytes(name.as_bytes()).map_err(|_| HeaderError::Name(name.into()))?;
    if RESERVED.contains(&header.as_str()) {
        return Err(HeaderError::Reserved(name.into()));
    }
    let mut value =
        HeaderValue::from_str(value).map_err(|_| HeaderError::Value { name: name.into() })?;
    // Kept out of HTTP/2's header compression tables, as reqwest does for credentials.
    value.set_sensitive(redact::secret_header(name));
    Ok((header, value))
}

/// Name-value pairs as a header map; a later pair replaces an earlier one of the same name.
pub fn header_map(pairs: &[(String, String)]) -> Result<HeaderMap, HeaderError> {
    let mut map = HeaderMap::with_capacity(pairs.len());
    for (name, value) in pairs {
        let (name, value) = check(name, value)?;
        map.insert(name, value);
    }
    Ok(map)
}

/// `global`, each of its names replaced by `own`'s header of that name, and `own`'s others.
pub fn merged(global: &HeaderMap, own: &HeaderMap) -> HeaderMap {
    let mut out = global.clone();
    for (name, value) in own {
        out.insert(name.clone(), value.clone());
    }
    out
}

/// The secrets among `pairs` (values of secret-looking names), to hide; `None` if none.
pub fn secrets(pairs: &[(String, String)]) -> Option<Redactor> {
    let mut r = Redactor::default();
    r.add_headers(pairs);
    (!r.is_empty()).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_arguments_are_name_colon_value() {
        assert_eq!(
            parse_header_arg("X-Tenant:  a b "),
            Ok(("X-Tenant".into(), "a b".into()))
        );
        assert_eq!(
            parse_header_arg("x-empty:"),
            Ok(("x-empty".into(), String::new()))
        );
        assert!(matches!(
            parse_header_arg("no colon"),
            Err(HeaderError::Syntax(_))
        ));
        assert!(matches!(
            parse_header_arg(": v"),
            Err(HeaderError::Syntax(_))
        ));
        assert!(matches!(
            parse_header_arg("bad name: v"),
            Err(HeaderError::Name(_))
        ));
        assert!(matches!(
            parse_header_arg("x-a: line\nbreak"),
            Err(HeaderError::Value { .. })
        ));
        let e = parse_header_arg("X-Request-Id: 1").unwrap_err().to_string();
        assert!(e.contains("--request-id-prefix"), "{e}");
        assert!(matches!(
            parse_header_arg("Content-Length: 1"),
            Err(HeaderError::Reserved(_))
        ));
        let e = parse_header_arg(
            "Traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("the run's own trace"), "{e}");
    }

    #[test]
    fn a_secret_value_never_appears_in_an_error() {
        let e = parse_header_arg("Authorization").unwrap_err().to_string();
        assert!(e.contains("Authorization"), "{e}");
        let e = shown("X-Api-Key: sk-123: more");
        assert_eq!(e, "X-Api-Key: [redacted]");
        let e = parse_header_arg("Authorization Bearer s3cret")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cret") && e.contains("Authorization"), "{e}");
        assert_eq!(shown("x-tenant acme"), "x-tenant acme");
    }

    #[test]
    fn own_headers_replace_global_ones_of_the_same_name() {
        let global = header_map(&[
            ("x-tenant".into(), "global".into()),
            ("x-route".into(), "r1".into()),
        ])
        .unwrap();
        let own = header_map(&[("X-Tenant".into(), "mine".into())]).unwrap();
        let m = merged(&global, &own);
        assert_eq!(m.get_all("x-tenant").iter().count(), 1);
        assert_eq!(m["x-tenant"], "mine");
        assert_eq!(m["x-route"], "r1");
        assert!(!m["x-route"].is_sensitive());
        let secret = header_map(&[("Authorization".into(), "Bearer t0k".into())]).unwrap();
        assert!(secret["authorization"].is_sensitive());
    }

    #[test]
    fn only_secret_looking_values_are_secrets() {
        assert!(secrets(&[("x-tenant".into(), "a".into())]).is_none());
        let r = secrets(&[
            ("x-tenant".into(), "acme".into()),
            ("Authorization".into(), "Bearer t0k3n-4b9d".into()),
        ])
        .unwrap();
        assert_eq!(
            r.text("acme Bearer t0k3n-4b9d and t0k3n-4b9d"),
            "acme [redacted] and [redacted]"
        );
    }
}
