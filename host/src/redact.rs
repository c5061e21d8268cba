//! Secrets never leave the process: the API key, the credentials of the target URL and the
//! values of secret-looking headers (`--header 'Authorization: …'`, a scenario's
//! per-request `headers`) are replaced by `[redacted]` in every string bound for a record,
//! a report, the terminal or a result file. A server may echo them back (in an error body, in llama.cpp-style
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
        if let Some(target) = target {
            r.add_target(target);
        }
        r
    }

    /// The user name and password of a target URL, if it has any.
    pub fn add_target(&mut self, target: &str) {
        if let Some((user, password)) = url_credentials(target) {
            self.add(&password);
            // A URL's user name is a secret too when it carries the token alone
            // (`https://TOKEN@host`).
            if password.is_empty() {
                self.add(&user);
            }
        }
    }

    /// The secret-looking values among `--header NAME: VALUE` arguments as written (valid
    /// or not: an invalid one's error must not show its value either).
    pub fn add_header_args(&mut self, args: &[String]) {
        let pairs: Vec<(String, String)> = args
            .iter()
            .filter_map(|a| a.split_once(':'))
            .map(|(n, v)| (n.trim().to_string(), v.to_string()))
            .collect();
        self.add_headers(&pairs);
    }

    /// The values of the headers among `headers` whose name looks secret
    /// ([`secret_header`]): the whole value, and its credentials without an
    /// `Authorization`-style scheme (`Bearer t0k` hides `t0k` too, as a server may echo it).
    pub fn add_headers(&mut self, headers: &[(String, String)]) {
        for (_, value) in headers.iter().filter(|(n, _)| secret_header(n)) {
            self.add(value.trim());
            if let Some((_, credentials)) = value.trim().split_once(' ') {
                self.add(credentials.trim());
            }
        }
    }

    /// No secret to hide.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Adds every secret of `other`.
    pub fn extend(&mut self, other: &Redactor) {
        for secret in &other.secrets {
            self.add(secret);
        }
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

/// Parts of header names that mark their values as secrets: credentials, tokens, cookies
/// (what curl's and reqwest's own redaction of sensitive headers covers, and the spellings
/// API gateways use: `x-api-key`, `api-key`, `x-auth-token`).
const SECRET_HEADER_PARTS: [&str; 11] = [
    "authorization",
    "auth",
    "api-key",
    "api_key",
    "apikey",
    "token",
    "cookie",
    "secret",
    "password",
    "passwd",
    "credential",
];

/// Whether a header's value must never be printed or written, judged by its name.
pub fn secret_header(name: &str) -> bool {
    let name = name.trim().to_ascii_lowercase();
    SECRET_HEADER_PARTS.iter().any(|part| name.contains(part))
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
    fn secret_looking_header_values_are_secrets() {
        for name in [
            "Authorization",
            "proxy-authorization",
            "X-Api-Key",
            "api-key",
            "x-auth-token",
            "Cookie",
            "x-client-secret",
            "X-Password",
        ] {
            assert!(secret_header(name), "{name}");
        }
        for name in ["x-tenant", "x-session-affinity", "accept", "user-agent"] {
            assert!(!secret_header(name), "{name}");
        }
        let mut r = Redactor::default();
        r.add_headers(&[
            ("x-tenant".into(), "acme".into()),
            ("Authorization".into(), "Bearer t0k3n".into()),
            ("x-api-key".into(), " k-42 ".into()),
        ]);
        assert_eq!(
            r.text("acme: Bearer t0k3n, t0k3n, k-42"),
            "acme: [redacted], [redacted], [redacted]"
        );
    }

    #[test]
    fn a_longer_secret_is_replaced_before_one_it_contains() {
        let mut r = Redactor::default();
        r.add("abc");
        r.add("abcdef");
        assert_eq!(r.text("abcdef abc"), "[redacted] [redacted]");
    }
}
