//! The control calls' HTTP: their own client (never the benchmark's connection pool), the
//! run's API key as a bearer token, a bounded time per call and a bounded body, a line on
//! stderr when an answer is slow to come (what is waited for, and for how long at most),
//! and every error with its URL's secrets hidden.

use std::time::Duration;

use reqwest::header::AUTHORIZATION;
use reqwest::Method;

/// Longest wait for a connection to a target.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Most of an answer's body kept: llama.cpp's `/props` carries its chat template.
const MAX_BODY: usize = 1 << 20;
/// A call not answered by then is said on stderr: a run that waits says why.
const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// An answer: its status and (the start of) its body.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    /// Its `content-type`, lower case ("" without one).
    pub(super) content_type: String,
    pub(super) body: String,
}

impl Answer {
    pub(super) fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// A success that is no control route's answer: an event stream or a web page, from a
    /// server that answers every path alike.
    pub(super) fn stray(&self) -> Option<&str> {
        ["text/event-stream", "text/html"]
            .into_iter()
            .find(|t| self.content_type.contains(t))
    }

    /// The body as JSON, when it is.
    pub(super) fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The body's start on one line, for a warning.
    pub(super) fn excerpt(&self) -> String {
        let line = self.body.split_whitespace().collect::<Vec<_>>().join(" ");
        crate::safeguards::redact::excerpt(&line, 200)
    }
}

pub(super) struct Http {
    client: reqwest::Client,
    api_key: Option<String>,
}

impl Http {
    pub(super) fn new(api_key: Option<&str>) -> Result<Http, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_max_idle_per_host(1)
            .build()
            .map_err(|e| describe(&e))?;
        Ok(Http {
            client,
            api_key: api_key.map(str::to_string),
        })
    }

    /// `method root+path` with no body, answered within `timeout` (body included); an
    /// error is the reason on one line, with the URL's secrets hidden. Past
    /// [`NOTICE_AFTER`] without an answer, stderr says what the run waits for.
    pub(super) async fn call(
        &self,
        method: Method,
        root: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<Answer, String> {
        let what = format!("{method} {path}");
        let url = format!("{root}{path}");
        let answer = tokio::time::timeout(timeout, self.answer(method, &url));
        tokio::pin!(answer);
        let answer = tokio::select! {
            done = &mut answer => done,
            _ = tokio::time::sleep(NOTICE_AFTER.min(timeout)) => {
                crate::errln!(
                    "note: waiting for {} to answer {what} (server control; at most {} s, Ctrl-C stops waiting)",
                    crate::safeguards::redact::string(root.to_string()),
                    timeout.as_secs()
                );
                answer.await
            }
        };
        answer.unwrap_or_else(|_| Err(format!("no answer in {} s", timeout.as_secs())))
    }

    async fn answer(&self, method: Method, url: &str) -> Result<Answer, String> {
        let mut request = self.client.request(method, url);
        if let Some(key) = &self.api_key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        let mut response = request.send().await.map_err(|e| describe(&e))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
            let room = MAX_BODY.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if room <= chunk.len() {
                break;
            }
        }
        let body = crate::safeguards::redact::string(String::from_utf8_lossy(&body).into_owned());
        Ok(Answer {
            status,
            content_type,
            body,
        })
    }
}

/// The error and its causes on one line (reqwest's own message is only the outermost), the
/// URL's secrets hidden.
fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "no answer in time".to_string()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    crate::safeguards::redact::string(text)
}
