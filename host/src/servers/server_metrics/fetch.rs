//! One scrape over HTTP: a GET of the metrics URL with a bounded time and a bounded body
//! (the size is checked before anything is kept, so a hostile endpoint cannot exhaust
//! memory), answered by a parsed exposition or why there is none.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};

use super::exposition::Exposition;

/// Largest body read: vLLM's /metrics is ~100 KB, a large multi-model server's a few MB.
pub const MAX_BODY: usize = 16 << 20;

/// Why a scrape brought no metrics.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{0}")]
    Http(String),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("the body is over {} MiB", MAX_BODY >> 20)]
    TooLarge,
    #[error("the answer is not Prometheus text ({0})")]
    NotPrometheus(String),
    #[error("no answer in time: {0}")]
    Timeout(String),
}

impl FetchError {
    /// A busy server may answer the next scrape: a server that is not there, or whose
    /// answer is not metrics, will not.
    pub fn is_transient(&self) -> bool {
        matches!(self, FetchError::Timeout(_))
    }
}

/// The HTTP side of the scraper: its own connection pool, never the benchmark's.
pub struct Fetcher {
    http: reqwest::Client,
    url: reqwest::Url,
    api_key: Option<String>,
}

impl Fetcher {
    /// A fetcher of `url` whose every scrape ends within `timeout`.
    pub fn new(
        url: reqwest::Url,
        api_key: Option<String>,
        timeout: Duration,
    ) -> Result<Fetcher, FetchError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(3))
            .connect_timeout(timeout)
            .timeout(timeout)
            .pool_max_idle_per_host(1)
            .build()
            .map_err(|e| FetchError::Http(e.to_string()))?;
        Ok(Fetcher { http, url, api_key })
    }

    pub async fn fetch(&self) -> Result<Exposition, FetchError> {
        let mut request = self.http.get(self.url.clone());
        if let Some(key) = &self.api_key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        let mut response = request.send().await.map_err(describe)?;
        if !response.status().is_success() {
            return Err(FetchError::Status(response.status().as_u16()));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.contains("html") || content_type.contains("json") {
            return Err(FetchError::NotPrometheus(content_type));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BODY as u64)
        {
            return Err(FetchError::TooLarge);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(describe)? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(FetchError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body);
        let exposition = Exposition::parse(&text);
        if exposition.is_empty() {
            return Err(FetchError::NotPrometheus("no metric in it".into()));
        }
        Ok(exposition)
    }
}

/// The error and its causes on one line (reqwest's own message is only the outermost).
fn describe(e: reqwest::Error) -> FetchError {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    if e.is_timeout() {
        FetchError::Timeout(text)
    } else {
        FetchError::Http(text)
    }
}
