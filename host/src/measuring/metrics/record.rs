//! One finished request, as measured by the client. Everything downstream (statistics,
//! the JSONL record file, reports) is derived from these records.

use serde::{Deserialize, Serialize};

/// Why a request did not succeed. Each kind is counted separately in the report, so a
/// fault of the target shows as what it was: the kinds do not overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// HTTP 4xx other than 429 (a bad request, a wrong model, a refused key).
    #[serde(rename = "http_4xx")]
    Http4xx,
    /// HTTP 429: the server shed load; the message carries any `Retry-After`.
    RateLimited,
    /// HTTP 5xx.
    #[serde(rename = "http_5xx")]
    Http5xx,
    /// Any other non-2xx status a client does not follow (1xx, 3xx).
    HttpOther,
    /// Could not connect: refused, DNS, TLS.
    Connect,
    /// The connection broke (reset or closed) before a response arrived.
    Disconnect,
    /// The response started, then its body broke off before it was complete.
    StreamCut,
    /// No complete response within `--request-timeout`.
    Timeout,
    /// No generated content within `--first-token-timeout`.
    FirstTokenTimeout,
    /// The stream was not server-sent events (a line that is no SSE field, an event over
    /// the size limit).
    MalformedSse,
    /// An event or body that is not an OpenAI JSON message.
    MalformedJson,
    /// The server sent an error object (`{"error": …}`) instead of, or inside, the answer.
    ErrorObject,
    /// The response ended without a single content chunk.
    EmptyCompletion,
    /// The response passed what a record may hold (see `client::stream`'s limits): the
    /// rest of it was not read.
    TooLarge,
    /// The run stopped (drain limit, Ctrl-C) before the request finished.
    Cancelled,
}

impl ErrorKind {
    /// The kind of a non-2xx HTTP status.
    pub fn of_status(status: u16) -> ErrorKind {
        match status {
            429 => ErrorKind::RateLimited,
            400..=499 => ErrorKind::Http4xx,
            500..=599 => ErrorKind::Http5xx,
            _ => ErrorKind::HttpOther,
        }
    }

    /// Name in the text report.
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::Http4xx => "http 4xx",
            ErrorKind::RateLimited => "http 429 rate limited",
            ErrorKind::Http5xx => "http 5xx",
            ErrorKind::HttpOther => "http other status",
            ErrorKind::Connect => "connect failed",
            ErrorKind::Disconnect => "connection lost",
            ErrorKind::StreamCut => "stream cut",
            ErrorKind::Timeout => "request timeout",
            ErrorKind::FirstTokenTimeout => "first-token timeout",
            ErrorKind::MalformedSse => "malformed sse",
            ErrorKind::MalformedJson => "malformed json",
            ErrorKind::ErrorObject => "error object",
            ErrorKind::EmptyCompletion => "empty completion",
            ErrorKind::TooLarge => "response too large",
            ErrorKind::Cancelled => "cancelled",
        }
    }

    /// Name in JSON (result.json keys, requests.jsonl `error.kind`).
    pub fn key(self) -> &'static str {
        match self {
            ErrorKind::Http4xx => "http_4xx",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Http5xx => "http_5xx",
            ErrorKind::HttpOther => "http_other",
            ErrorKind::Connect => "connect",
            ErrorKind::Disconnect => "disconnect",
            ErrorKind::StreamCut => "stream_cut",
            ErrorKind::Timeout => "timeout",
            ErrorKind::FirstTokenTimeout => "first_token_timeout",
            ErrorKind::MalformedSse => "malformed_sse",
            ErrorKind::MalformedJson => "malformed_json",
            ErrorKind::ErrorObject => "error_object",
            ErrorKind::EmptyCompletion => "empty_completion",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestError {
    pub kind: ErrorKind,
    pub message: String,
}

/// One SSE message that carried generated content (text, reasoning or a tool call).
/// Role-only opening deltas, finish-reason-only and usage-only messages are not chunks.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// When the bytes of this message arrived, in ns since the phase started: the
    /// kernel's receive time of the last of them where the socket gives one
    /// (`client::transport`), else the time the client read them.
    pub t_ns: u64,
    /// Tokens carried by this message (from continuous usage when the server reports it,
    /// else counted with the run's tokenizer; at least 1).
    pub tokens: u32,
    /// The client's own delay: when it read the message minus the kernel's receive
    /// time. `None` where the kernel gave no receive time (`t_ns` is then the read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_delay_ns: Option<u64>,
}

/// All times are nanoseconds since the start of the request's phase, on a monotonic clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub phase: usize,
    /// Index of the request within its phase, in generation order.
    pub index: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The `x-request-id` it was sent with, to find it in the server's logs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub request_id: String,
    /// The `traceparent` it was sent with: the run's trace id and its own span id.
    #[serde(flatten)]
    pub trace: TraceIds,
    /// When the schedule wanted the request sent.
    pub scheduled_ns: u64,
    /// When it was sent: the start of the first write of its bytes to the socket, where
    /// the client's own socket saw it (`client::transport`), else when it was handed to
    /// the HTTP client (after any concurrency wait).
    pub sent_ns: u64,
    /// How long that first write took: the bound on the send time's error (the bytes
    /// were in the kernel by its end). `None` when the send is the hand-off time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_write_ns: Option<u64>,
    /// First byte of the response body (or headers for a non-streaming response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ns: Option<u64>,
    /// Content chunks in arrival order. A non-streaming response is one chunk.
    pub chunks: Vec<Chunk>,
    /// The response ended (stream closed, `[DONE]`, or failure).
    pub end_ns: u64,
    /// Prompt tokens: `usage.prompt_tokens` when reported, else the tokenizer's count.
    pub input_tokens: u64,
    /// Generated tokens: `usage.completion_tokens` when reported, else the tokenizer's count
    /// of the text (0 for a failed request).
    pub output_tokens: u64,
    /// `usage.completion_tokens` as the server reported it, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_output_tokens: Option<u64>,
    /// The run's tokenizer's count of the generated text (the second of three counts; the
    /// third is the number of content chunks).
    pub text_tokens: u64,
    /// Sent in a warm-up phase: kept on disk, left out of the statistics.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warmup: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RequestError>,
    /// Whether the request reached the server, as far as the client can know.
    #[serde(default)]
    pub reached: Reach,
    /// Sent a second time, once: its pooled connection closed before any byte of an
    /// answer, as llama.cpp's server does after each stream. The server may have received
    /// the first copy too; such requests are counted (`retried_requests`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retried: bool,
    /// The server's own account of the request's timing, as it sent it: llama.cpp's
    /// `timings` object (`prompt_ms`, `predicted_per_token_ms`, …) on the final chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<serde_json::Value>,
    /// The scenario gave up on it mid-stream (its `cancel`): neither a success nor a
    /// failure; only its TTFT enters the statistics.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// The index of the `--target` it went to, when the run had several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<usize>,
    /// Its endpoint, time to first answer token and reasoning tokens.
    #[serde(flatten)]
    pub answer: AnswerRecord,
    /// Its session and step, when a session sent it.
    #[serde(flatten)]
    pub session: SessionRecord,
}

impl RequestRecord {
    /// Neither failed nor cancelled by the scenario.
    pub fn succeeded(&self) -> bool {
        self.error.is_none() && !self.cancelled
    }

    /// Time to first token, ns: first content chunk minus send.
    pub fn ttft_ns(&self) -> Option<u64> {
        self.chunks
            .first()
            .map(|c| c.t_ns.saturating_sub(self.sent_ns))
    }

    /// End-to-end latency, ns: last content chunk minus send.
    pub fn e2el_ns(&self) -> Option<u64> {
        self.chunks
            .last()
            .map(|c| c.t_ns.saturating_sub(self.sent_ns))
    }

    /// Time per output token excluding the first, ns; only for more than one output token.
    pub fn tpot_ns(&self) -> Option<f64> {
        if self.output_tokens <= 1 {
            return None;
        }
        // Saturating: a record read from a file (or a client clock that stepped back)
        // may put its last chunk before its first; that is no decode time, not 2⁶⁴ ns.
        let (ttft, e2el) = (self.ttft_ns()?, self.e2el_ns()?);
        Some(e2el.saturating_sub(ttft) as f64 / (self.output_tokens - 1) as f64)
    }

    /// Gaps between consecutive content chunks, ns (one per chunk after the first).
    pub fn itls_ns(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks
            .windows(2)
            .map(|w| w[1].t_ns.saturating_sub(w[0].t_ns))
    }

    /// How late the request left compared to its schedule, ns.
    pub fn lateness_ns(&self) -> u64 {
        self.sent_ns.saturating_sub(self.scheduled_ns)
    }
}

/// A record's W3C trace context ids (flattened into requests.jsonl), lowercase hex; empty
/// in records of runs from before they were sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceIds {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub span_id: String,
}

/// Whether a request reached the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reach {
    /// An answer (a status line) came back.
    Yes,
    /// Written, or partly written, with no answer: the server may or may not have read it.
    #[default]
    Unknown,
    /// No connection was made: the server never saw it.
    No,
}

/// A record's answer fields (flattened into requests.jsonl). Here, not in `metrics::answer`:
/// a record holds them, and answer's statistics read records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerRecord {
    /// The path it was posted to (`/v1/chat/completions`, `/v1/embeddings`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub endpoint: String,
    /// The first chunk of answer content or a tool call, after any reasoning, ns since
    /// the phase started; the first content chunk when the model did not reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_answer_ns: Option<u64>,
    /// Of `output_tokens`, those spent reasoning: the server's
    /// `completion_tokens_details.reasoning_tokens` where it gives them, else counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Tool calls the model made in the answer.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub tool_calls: u32,
    /// The first chunk of a tool call, ns since the phase started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_tool_call_ns: Option<u64>,
    /// Of `output_tokens`, those in tool calls (counted with the run's tokenizer over
    /// the calls' names and arguments).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_call_tokens: u64,
    /// Of `input_tokens`, those the server read from its prefix cache, where its usage
    /// says (`prompt_tokens_details.cached_tokens`, Responses' `input_tokens_details`,
    /// Anthropic's `cache_read_input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u64>,
    /// The answer's text without its reasoning, kept only when the run asked
    /// (`--keep-answer-text`, which bench serve's --save-detailed gives), bounded there.
    #[serde(
        default,
        rename = "answer_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub text: Option<String>,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// A record's session fields (flattened into requests.jsonl): which session sent it, at
/// which step, and how long the session waited before it (think time or a tool's latency).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session's id (`"7"`, a child `"7/review-2"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The session's step that sent it, from 0 (steps that opened children count too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_step: Option<u32>,
    /// Requests the session sent before this one (its turn index, from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The wait the session asked for before it (think time or a tool's latency), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ns: Option<u64>,
    /// The wait was for tool results: the previous answer made tool calls.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_wait: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::ERROR_KINDS;

    #[test]
    fn json_keys_match_serde_and_labels_are_distinct() {
        let mut labels = std::collections::HashSet::new();
        for kind in ERROR_KINDS {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.key());
            assert_eq!(
                serde_json::from_value::<ErrorKind>(kind.key().into()).unwrap(),
                kind
            );
            assert!(labels.insert(kind.label()), "{kind:?}");
        }
    }

    #[test]
    fn a_last_chunk_stamped_before_the_first_gives_no_decode_time() {
        let chunk = |t_ns| Chunk {
            t_ns,
            tokens: 1,
            client_delay_ns: None,
        };
        let json = r#"{"phase":0,"index":0,"scheduled_ns":0,"sent_ns":1000,"chunks":[],"end_ns":9000,"input_tokens":1,"output_tokens":256,"text_tokens":256}"#;
        let mut record: RequestRecord = serde_json::from_str(json).unwrap();
        // The step back seen against a zero-delay server: 1.8 µs.
        record.chunks = vec![chunk(5000), chunk(3200)];
        assert_eq!(record.tpot_ns(), Some(0.0));
        assert!(record.itls_ns().all(|gap| gap == 0));
        record.chunks = vec![chunk(5000), chunk(7550)];
        assert_eq!(record.tpot_ns(), Some(10.0));
    }

    #[test]
    fn statuses_fall_in_their_own_kinds() {
        assert_eq!(ErrorKind::of_status(429), ErrorKind::RateLimited);
        assert_eq!(ErrorKind::of_status(400), ErrorKind::Http4xx);
        assert_eq!(ErrorKind::of_status(404), ErrorKind::Http4xx);
        assert_eq!(ErrorKind::of_status(503), ErrorKind::Http5xx);
        assert_eq!(ErrorKind::of_status(304), ErrorKind::HttpOther);
    }
}
