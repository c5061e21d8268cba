//! Secrets never leave the process: the API key and the credentials of the target URL are
//! replaced by `[redacted]` in every string bound for a record, a report, the terminal or
//! a result file. A server may echo them back (in an error body, in llama.cpp-style
//! `timings`, in a model name), and reqwest quotes the request URL in its errors.
//!
//! Redaction runs on whole strings before anything cuts them: an excerpt of an already
//! redacted body can hold no prefix of a secret.

use std::borrow::Cow;
use std::sync::OnceLock;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What a secret is replaced with.
pub const MARK: &str = "[redacted]";

/// The secrets of one run, longest first so a secret that contains another is replaced
/// whole.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// The secrets of a run: its API key, and the user name and password of its target URL.
    pub fn new(api_key: Option<&str>, target: Option<&str>) -> Redactor {
        let mut r = Redactor::default();
        if let Some(key) = api_key {
            r.add(key);
        }
        if let Some((user, password)) = target.and_then(url_credentials) {
            r.add(&password);
            // A URL's user name is a secret too when it carries the token alone
            // (`https://TOKEN@host`).
            if password.is_empty() {
                r.add(&user);
            }
        }
        r
    }

    /// Adds one secret (an empty one hides nothing).
    pub fn add(&mut self, secret: &str) {
        if secret.is_empty() || self.secrets.iter().any(|s| s == secret) {
            return;
        }
        // Its percent-encoded form too: that is how it appears in a URL.
        let encoded = percent_encode(secret);
        self.secrets.push(secret.to_string());
        if encoded != secret {
            self.secrets.push(encoded);
        }
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// `text` with every secret replaced; borrowed when there was none.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), MARK));
            }
        }
        strip_url_credentials(out)
    }

    /// Owned variant of [`Redactor::text`].
    pub fn string(&self, text: String) -> String {
        match self.text(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(s) => s,
        }
    }

    /// Every string and key of a JSON value copied from a server, redacted in place.
    pub fn json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => *s = self.string(std::mem::take(s)),
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::Object(map) => {
                let needs_key_change = map.keys().any(|k| self.text(k) != k.as_str());
                if needs_key_change {
                    let old = std::mem::take(map);
                    for (k, mut v) in old {
                        self.json(&mut v);
                        map.insert(self.string(k), v);
                    }
                } else {
                    map.values_mut().for_each(|v| self.json(v));
                }
            }
            _ => {}
        }
    }
}

static PROCESS: OnceLock<Redactor> = OnceLock::new();

/// Sets the secrets of this process (the first call wins; the CLI makes it once, before
/// anything is sent or printed).
pub fn install(redactor: Redactor) {
    let _ = PROCESS.set(redactor);
}

/// The secrets of this process (none before [`install`]).
pub fn process() -> &'static Redactor {
    static NONE: OnceLock<Redactor> = OnceLock::new();
    PROCESS
        .get()
        .unwrap_or_else(|| NONE.get_or_init(Redactor::default))
}

/// [`Redactor::text`] with the secrets of this process.
pub fn text(text: &str) -> Cow<'_, str> {
    process().text(text)
}

/// [`Redactor::string`] with the secrets of this process.
pub fn string(text: String) -> String {
    process().string(text)
}

/// At most `max_chars` characters of `text`, redacted with the secrets of this process
/// before it is cut, so the cut cannot leave the start of a secret behind.
pub fn excerpt(text: &str, max_chars: usize) -> String {
    process().text(text).chars().take(max_chars).collect()
}

/// The user name and password of an `scheme://user:password@host` URL, if it has any.
fn url_credentials(url: &str) -> Option<(String, String)> {
    let parsed = reqwest::Url::parse(url.trim()).ok()?;
    // The URL keeps them percent-encoded; a server echoes them decoded.
    let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
    let user = decode(parsed.username());
    let password = decode(parsed.password().unwrap_or_default());
    (!user.is_empty() || !password.is_empty()).then_some((user, password))
}

/// Any `scheme://userinfo@` in `text` becomes `scheme://[redacted]@`: credentials of a URL
/// the run was not told about (a redirect's Location, a server's message) are hidden too.
fn strip_url_credentials(text: Cow<'_, str>) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        // The authority ends at the first `/`, `?`, `#` or whitespace; userinfo is what
        // comes before its last `@`.
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(i) if i > 0 && authority[..i] != *MARK => {
                out.push_str(MARK);
                out.push_str(&authority[i..]);
                changed = true;
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    if !changed {
        return text;
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// What a URL's userinfo escapes: everything but RFC 3986's unreserved characters.
const USERINFO: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `secret` as it appears percent-encoded in a URL's userinfo.
fn percent_encode(secret: &str) -> String {
    utf8_percent_encode(secret, USERINFO).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_replaced_wherever_it_appears() {
        let r = Redactor::new(Some("sk-SECRET123"), None);
        assert_eq!(
            r.text("bad key sk-SECRET123, again sk-SECRET123"),
            "bad key [redacted], again [redacted]"
        );
        assert!(matches!(r.text("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn url_credentials_are_secrets_and_are_stripped_from_any_url() {
        let r = Redactor::new(None, Some("http://ada:pa%24%24@127.0.0.1:8000/v1"));
        let shown = r.text(
            "error sending request for url (http://ada:pa%24%24@127.0.0.1:8000/v1/completions)",
        );
        assert!(
            !shown.contains("pa%24%24") && !shown.contains("ada"),
            "{shown}"
        );
        assert!(shown.contains("http://[redacted]@127.0.0.1:8000/v1/completions"));
        // The decoded password, as a server might echo it.
        assert_eq!(r.text("you said pa$$"), "you said [redacted]");
        // Credentials of another URL are hidden as well.
        assert_eq!(
            Redactor::default().text("see https://u:p@example.invalid/x"),
            "see https://[redacted]@example.invalid/x"
        );
        // An e-mail address after a URL is not userinfo.
        assert_eq!(
            Redactor::default().text("http://h/x mail a@b"),
            "http://h/x mail a@b"
        );
    }

    #[test]
    fn a_token_given_as_the_user_name_is_a_secret() {
        let r = Redactor::new(None, Some("https://tok3n@127.0.0.1/"));
        assert_eq!(r.text("echo tok3n"), "echo [redacted]");
    }

    #[test]
    fn json_strings_and_keys_are_redacted() {
        let r = Redactor::new(Some("sk-SECRET123"), None);
        let mut v = serde_json::json!({
            "prompt_ms": 1.5,
            "auth": "Bearer sk-SECRET123",
            "sk-SECRET123": [ "x sk-SECRET123", 2 ],
        });
        r.json(&mut v);
        let text = v.to_string();
        assert!(!text.contains("SECRET"), "{text}");
        assert_eq!(v["prompt_ms"], 1.5);
        assert_eq!(v["auth"], "Bearer [redacted]");
    }

    #[test]
    fn a_longer_secret_is_replaced_before_one_it_contains() {
        let mut r = Redactor::default();
        r.add("abc");
        r.add("abcdef");
        assert_eq!(r.text("abcdef abc"), "[redacted] [redacted]");
    }
}
