//! Secrets never leave the process: the API key, the credentials of the target URL and the
//! values of secret-looking headers (`--header 'Authorization: …'`, a scenario's
//! per-request `headers`) are replaced by `[redacted]` in every string bound for a record,
//! a report, the terminal or a result file. A server may echo them back (in an error body, in llama.cpp-style
//! `timings`, in a model name), and reqwest quotes the request URL in its errors.
//!
//! Redaction runs on values where they enter (a server's message, a scenario's note or log
//! line, a metric name), never on serialised output: replacing a piece of `{"tokens": 1}`
//! breaks its structure. It runs on whole strings before anything cuts them: an excerpt
//! of an already redacted body can hold no prefix of a secret.
//!
//! A secret shorter than [`SAFE_LEN`] bytes (`OPENAI_API_KEY=1`, a password `p`) is hidden
//! only where a whole value equals it: as a piece of longer text it would hide parts of
//! ordinary words and numbers. The run says so in one warning line ([`Redactor::warning`]).

use std::borrow::Cow;
use std::sync::OnceLock;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What a secret is replaced with.
pub const MARK: &str = "[redacted]";

/// The shortest secret hidden wherever it appears inside a text; a shorter one is hidden
/// only as a whole value.
pub const SAFE_LEN: usize = 8;

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
            // The header it is sent in, as a server may echo it: long enough to be hidden
            // inside any text even when the key alone is not.
            r.add(&format!("Bearer {key}"));
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

    /// The one warning line a run prints when a secret is too short to be hidden inside
    /// longer text.
    pub fn warning(&self) -> Option<String> {
        self.secrets.iter().any(|s| s.len() < SAFE_LEN).then(|| {
            format!(
                "warning: a secret of this run (the API key, a password in the target URL or \
                 a secret header) is shorter than {SAFE_LEN} bytes: it is hidden where a whole \
                 value equals it, not inside longer text"
            )
        })
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

    /// `text` (one value: a message, a name, a line) with every secret replaced, a short
    /// one only when it is the whole value (surrounding whitespace aside); borrowed when
    /// there was none.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if secret.len() < SAFE_LEN {
                if out.trim() == secret {
                    out = Cow::Owned(MARK.to_string());
                }
            } else if out.contains(secret.as_str()) {
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
                        let key = unused_key(map, self.string(k));
                        map.insert(key, v);
                    }
                } else {
                    map.values_mut().for_each(|v| self.json(v));
                }
            }
            _ => {}
        }
    }
}

/// `key`, or `key #2`, `key #3`…, whichever `map` does not hold yet: two keys redacted
/// to the same text keep both their values.
fn unused_key(map: &serde_json::Map<String, serde_json::Value>, key: String) -> String {
    if !map.contains_key(&key) {
        return key;
    }
    (2..)
        .map(|n| format!("{key} #{n}"))
        .find(|k| !map.contains_key(k))
        .unwrap_or(key)
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
        let r = Redactor::new(None, Some("http://ada:pa%24%24word@127.0.0.1:8000/v1"));
        let shown = r.text(
            "error sending request for url (http://ada:pa%24%24word@127.0.0.1:8000/v1/completions)",
        );
        assert!(
            !shown.contains("pa%24%24word") && !shown.contains("ada"),
            "{shown}"
        );
        assert!(shown.contains("http://[redacted]@127.0.0.1:8000/v1/completions"));
        // The decoded password, as a server might echo it.
        assert_eq!(r.text("you said pa$$word"), "you said [redacted]");
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
        let r = Redactor::new(None, Some("https://tok3n-abc@127.0.0.1/"));
        assert_eq!(r.text("echo tok3n-abc"), "echo [redacted]");
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
        // The header the key is sent in is hidden whole.
        assert_eq!(v["auth"], "[redacted]");
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
            ("Authorization".into(), "Bearer t0k3n-abc".into()),
            ("x-api-key".into(), " k-42-abcd ".into()),
        ]);
        assert_eq!(
            r.text("acme: Bearer t0k3n-abc, t0k3n-abc, k-42-abcd"),
            "acme: [redacted], [redacted], [redacted]"
        );
    }

    #[test]
    fn a_short_secret_is_hidden_as_a_whole_value_only() {
        let r = Redactor::new(Some("e"), Some("http://admin:p@127.0.0.1/"));
        assert!(r.warning().is_some_and(|w| w.starts_with("warning: ")));
        assert_eq!(r.text("Successful requests"), "Successful requests");
        assert_eq!(r.text("e"), MARK);
        assert_eq!(r.text(" p\n"), MARK);
        assert_eq!(r.text("HTTP 401: e"), "HTTP 401: e");
        let mut v = serde_json::json!({"tokens": 1, "e": ["e", "p", "ep", null]});
        r.json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"tokens": 1, "[redacted]": ["[redacted]", "[redacted]", "ep", null]})
        );
        assert!(Redactor::new(Some("sk-long-enough"), None)
            .warning()
            .is_none());
    }

    #[test]
    fn keys_redacted_to_the_same_text_keep_both_values() {
        let r = Redactor::new(Some("sk-SECRET123"), None);
        let mut v = serde_json::json!({"sk-SECRET123": 1, "[redacted]": 2});
        r.json(&mut v);
        let map = v.as_object().unwrap();
        assert_eq!(map.len(), 2, "{v}");
        let mut values: Vec<i64> = map.values().map(|x| x.as_i64().unwrap()).collect();
        values.sort();
        assert_eq!(values, [1, 2]);
    }

    #[test]
    fn a_longer_secret_is_replaced_before_one_it_contains() {
        let mut r = Redactor::default();
        r.add("abcdefgh");
        r.add("abcdefghijk");
        assert_eq!(r.text("abcdefghijk abcdefgh"), "[redacted] [redacted]");
    }
}

/// Property tests: random secrets (1 to 64 bytes, any characters) against random outputs
/// never change an output's structure. Cases: `PROPTEST_CASES` (default 2,000).
#[cfg(test)]
mod props {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;

    fn config() -> ProptestConfig {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    /// 1 to 64 bytes of any characters.
    fn secret() -> impl Strategy<Value = String> {
        secret_under(65)
    }

    /// 1 to `limit - 1` bytes of any characters.
    fn secret_under(limit: usize) -> impl Strategy<Value = String> {
        proptest::collection::vec(any::<char>(), 1..limit).prop_map(move |chars| {
            let mut s = String::new();
            for c in chars {
                if s.len() + c.len_utf8() >= limit {
                    break;
                }
                s.push(c);
            }
            s
        })
    }

    /// Text made of the secret, pieces of JSON syntax and random characters, so that
    /// secrets occur whole, inside longer text and beside what serialising escapes.
    fn text(secret: String) -> impl Strategy<Value = String> {
        let pieces = prop_oneof![
            Just(secret.clone()),
            Just(secret.chars().take(3).collect::<String>()),
            prop::sample::select(vec![
                "\"",
                "\\",
                "{",
                "}",
                ":",
                ",",
                "[redacted]",
                "http://u:"
            ])
            .prop_map(str::to_string),
            prop::sample::select(vec!["@h/", " ", "\n", "tokens", "null", "0.0", "1"])
                .prop_map(str::to_string),
            any::<String>(),
        ];
        proptest::collection::vec(pieces, 0..5).prop_map(|p| p.concat())
    }

    /// A JSON value whose strings and keys are such texts.
    fn value(secret: String) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            text(secret.clone()).prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 40, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((text(secret.clone()), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// The structure of a value: every string replaced by one mark, everything else kept.
    fn shape(v: &Value) -> String {
        match v {
            Value::String(_) => "s".into(),
            Value::Array(items) => format!(
                "[{}]",
                items.iter().map(shape).collect::<Vec<_>>().join(",")
            ),
            Value::Object(map) => {
                let mut fields: Vec<String> = map.values().map(shape).collect();
                fields.sort();
                format!("{{{}}}", fields.join(","))
            }
            other => other.to_string(),
        }
    }

    fn redactor(key: &str, password: &str) -> Redactor {
        let target = format!("http://admin:{}@127.0.0.1:1/", percent_encode(password));
        Redactor::new(Some(key), Some(&target))
    }

    proptest! {
        #![proptest_config(config())]

        /// A redacted value serialises to JSON that parses back to the same shape.
        #[test]
        fn a_redacted_value_keeps_its_structure(
            (key, password, v) in (secret(), secret())
                .prop_flat_map(|(k, p)| (Just(k.clone()), Just(p), value(k)))
        ) {
            let r = redactor(&key, &password);
            let mut redacted = v.clone();
            r.json(&mut redacted);
            let line = serde_json::to_string(&redacted).unwrap();
            let back: Value = serde_json::from_str(&line).unwrap();
            prop_assert_eq!(shape(&back), shape(&v));
        }

        /// A short secret changes no text but one that is the secret itself (or a URL's
        /// credentials): the words and numbers around it stay as they were.
        #[test]
        fn a_short_secret_changes_only_a_whole_value(
            (key, t) in secret_under(SAFE_LEN)
                .prop_flat_map(|k| (Just(k.clone()), text(k)))
        ) {
            let r = Redactor::new(Some(&key), None);
            let shown = r.text(&t);
            if t.trim() != key && !(t.contains("://") && t.contains('@')) {
                prop_assert_eq!(shown.as_ref(), t.as_str());
            }
        }

        /// A long secret is gone from every text it was in, unless the mark itself holds
        /// it or the replacement builds it anew from its neighbours.
        #[test]
        fn a_long_secret_is_gone(
            (key, t) in secret()
                .prop_filter("long, no bracket", |k| k.len() >= SAFE_LEN && !k.contains(['[', ']']))
                .prop_flat_map(|k| (Just(k.clone()), text(k)))
        ) {
            let r = Redactor::new(Some(&key), None);
            prop_assert!(!r.text(&t).contains(key.as_str()), "{:?}", r.text(&t));
        }
    }
}
