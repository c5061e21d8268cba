//! What one request carries beside its body: its own headers, when the scenario gives up
//! on it (`cancel`: after N output tokens and/or T ms after the send, as a chat user who
//! stops reading does), and the secrets among its headers. Built on the scenario thread,
//! off the I/O path.

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;

use super::exchange::Exchange;
use super::headers::{self, HeaderError};
use crate::safeguards::redact::Redactor;
use crate::workloads::scenario::{Cancel, RequestSpec};

/// A request's own headers and cancel point.
#[derive(Clone, Debug, Default)]
pub struct RequestExtras {
    /// Sent with the request, replacing `--header`s of the same names.
    pub headers: HeaderMap,
    pub cancel: Option<CancelPoint>,
    /// The values of its secret-looking headers, hidden in its record.
    pub secrets: Option<Redactor>,
}

impl RequestExtras {
    /// The extras of a scenario's request; an invalid header is the scenario's error.
    pub fn of(spec: &RequestSpec) -> Result<RequestExtras, HeaderError> {
        Ok(RequestExtras {
            headers: headers::header_map(&spec.headers)?,
            cancel: spec.cancel.as_ref().and_then(CancelPoint::new),
            secrets: headers::secrets(&spec.headers),
        })
    }
}

/// When the client drops a request's stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CancelPoint {
    /// Once this many output tokens arrived.
    pub after_tokens: Option<u64>,
    /// This long after the send.
    pub after: Option<Duration>,
}

impl CancelPoint {
    /// `None` when neither limit is set (or the time is not a duration).
    pub fn new(cancel: &Cancel) -> Option<CancelPoint> {
        let after = cancel
            .after_ms
            .and_then(|ms| Duration::try_from_secs_f64(ms.max(0.0) / 1e3).ok());
        (cancel.after_tokens.is_some() || after.is_some()).then_some(CancelPoint {
            after_tokens: cancel.after_tokens,
            after,
        })
    }

    /// The moment to give up, for a request sent at `sent`.
    pub fn deadline(&self, sent: Instant) -> Option<Instant> {
        self.after.and_then(|d| sent.checked_add(d))
    }

    /// Whether enough output has arrived to give up now.
    pub fn tokens_reached(&self, ex: &Exchange) -> bool {
        self.after_tokens
            .is_some_and(|n| output_tokens_so_far(ex) >= n)
    }
}

/// Output tokens received so far, cheaply, on the I/O thread: the server's cumulative
/// usage when it reports it on every chunk (vLLM's `continuous_usage_stats`), else one per
/// content chunk (what vLLM and the simulator stream). The record's count, made later with
/// the tokenizer, may differ when a server packs several tokens into one chunk.
pub fn output_tokens_so_far(ex: &Exchange) -> u64 {
    ex.chunks
        .last()
        .and_then(|c| c.cumulative_tokens)
        .unwrap_or(ex.chunks.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exchange that received `chunks` completion chunks, each with the server's
    /// running count `cumulative` when given.
    fn exchange(chunks: usize, cumulative: Option<u64>) -> Exchange {
        let mut ex = Exchange::new();
        let message = match cumulative {
            Some(n) => {
                format!(r#"{{"choices":[{{"text":" a"}}],"usage":{{"completion_tokens":{n}}}}}"#)
            }
            None => r#"{"choices":[{"text":" a"}]}"#.to_string(),
        };
        for _ in 0..chunks {
            ex.message(message.as_bytes(), Instant::now());
        }
        assert_eq!(ex.chunks.len(), chunks);
        ex
    }

    #[test]
    fn a_cancel_point_needs_a_limit() {
        assert_eq!(CancelPoint::new(&Cancel::default()), None);
        let p = CancelPoint::new(&Cancel {
            after_tokens: None,
            after_ms: Some(250.0),
        })
        .unwrap();
        let sent = Instant::now();
        assert_eq!(p.deadline(sent), Some(sent + Duration::from_millis(250)));
        assert!(!p.tokens_reached(&exchange(100, None)));
        // A time that is no duration sets no deadline.
        assert_eq!(
            CancelPoint::new(&Cancel {
                after_tokens: None,
                after_ms: Some(f64::INFINITY),
            }),
            None
        );
    }

    #[test]
    fn tokens_are_chunks_or_the_servers_running_count() {
        let p = CancelPoint::new(&Cancel {
            after_tokens: Some(5),
            after_ms: None,
        })
        .unwrap();
        assert_eq!(p.deadline(Instant::now()), None);
        assert!(!p.tokens_reached(&exchange(4, None)));
        assert!(p.tokens_reached(&exchange(5, None)));
        assert!(p.tokens_reached(&exchange(2, Some(6))));
        assert!(!p.tokens_reached(&exchange(3, Some(3))));
    }

    #[test]
    fn extras_carry_headers_and_their_secrets() {
        let spec = RequestSpec {
            headers: vec![
                ("x-tenant".into(), "acme".into()),
                ("x-api-key".into(), "k-1".into()),
            ],
            ..RequestSpec::new(crate::workloads::scenario::Prompt::Text("hi".into()), 1)
        };
        let extras = RequestExtras::of(&spec).unwrap();
        assert_eq!(extras.headers.len(), 2);
        assert!(extras.cancel.is_none());
        assert_eq!(extras.secrets.unwrap().text("k-1"), "[redacted]");
        let bad = RequestSpec {
            headers: vec![("content-length".into(), "1".into())],
            ..spec
        };
        assert!(RequestExtras::of(&bad).is_err());
    }
}
