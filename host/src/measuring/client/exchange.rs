//! What one request saw on the wire, and how an OpenAI JSON message adds to it: the
//! types every API's decoder shares (in its own module so the per-API decoders in
//! `client::api` and the dispatch over them in `client::stream` both sit above it).

use crate::both_sides::clock;
use std::borrow::Cow;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::tool_calls::{ToolCalls, ToolDelta};
use super::trace_context::TraceParent;
use crate::measuring::metrics::record::{ErrorKind, RequestError};

/// What one request saw on the wire, timed with the monotonic clock.
#[derive(Debug)]
pub struct Exchange {
    pub status: Option<u16>,
    /// When the first write of the request's bytes to the socket started; `None` when the
    /// transport could not tell (the record then keeps the hand-off time).
    pub sent_at: Option<Instant>,
    /// How long that write took, ns: the bound on `sent_at`'s error.
    pub send_write_ns: Option<u64>,
    pub first_byte: Option<Instant>,
    /// Content chunks in arrival order.
    pub chunks: Vec<ContentChunk>,
    pub text: String,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Of `completion_tokens`, those the server says the model spent reasoning
    /// (`completion_tokens_details.reasoning_tokens`, Responses' `output_tokens_details`).
    pub reasoning_tokens: Option<u64>,
    /// Of `prompt_tokens`, those the server read from its prefix cache, where it says
    /// (`prompt_tokens_details.cached_tokens`, Responses' `input_tokens_details`,
    /// Anthropic's `cache_read_input_tokens`).
    pub cached_prompt_tokens: Option<u64>,
    /// The tool calls the answer made, from their deltas.
    pub tool_calls: ToolCalls,
    /// How much of the tool calls' text the chunks so far carried.
    tool_mark: usize,
    /// A `timings` object the server sent (llama.cpp does, on the final chunk).
    pub server_timings: Option<serde_json::Value>,
    pub error: Option<RequestError>,
    pub end: Instant,
    /// Sent a second time after its pooled connection closed with no answer.
    pub retried: bool,
    /// The scenario gave up on it (its cancel point): the stream was dropped there.
    pub cancelled: bool,
    /// The `traceparent` it was sent with.
    pub trace: Option<TraceParent>,
}

/// One message that carried generated content.
#[derive(Clone, Debug, PartialEq)]
pub struct ContentChunk {
    /// When its bytes arrived: the kernel's receive time where the socket gave one, else
    /// when they were read.
    pub at: Instant,
    /// The client's own delay: read time minus the kernel's receive time (`None`
    /// without one).
    pub read_delay: Option<Duration>,
    /// The byte range of its text in [`Exchange::text`].
    pub text: std::ops::Range<usize>,
    /// Bytes at the start of `text` that are reasoning (a chunk that crosses from
    /// reasoning to the answer carries both, reasoning first).
    pub reasoning: usize,
    /// It carried answer content or a tool call: the first such chunk is the first
    /// answer token.
    pub answer: bool,
    /// It carried (part of) a tool call.
    pub tool_call: bool,
    /// The byte range of the tool-call names and arguments it carried in the calls'
    /// arrival-order text ([`ToolCalls::text`]).
    pub tool_text: std::ops::Range<usize>,
    /// The completion tokens so far, when the server reports usage on every chunk.
    pub cumulative_tokens: Option<u64>,
}

/// What one message generated, whatever the API: reasoning, then answer text, or a call.
#[derive(Clone, Copy, Debug, Default)]
pub struct Generated<'a> {
    pub reasoning: &'a str,
    pub answer: &'a str,
    pub tool_call: bool,
}

impl Generated<'_> {
    fn is_empty(&self) -> bool {
        self.reasoning.is_empty() && self.answer.is_empty() && !self.tool_call
    }
}

impl Default for Exchange {
    fn default() -> Exchange {
        Exchange::new()
    }
}

impl Exchange {
    pub fn new() -> Exchange {
        Exchange {
            status: None,
            sent_at: None,
            send_write_ns: None,
            first_byte: None,
            chunks: Vec::new(),
            text: String::new(),
            prompt_tokens: None,
            completion_tokens: None,
            reasoning_tokens: None,
            cached_prompt_tokens: None,
            tool_calls: ToolCalls::default(),
            tool_mark: 0,
            server_timings: None,
            retried: false,
            cancelled: false,
            error: None,
            end: clock::now(),
            trace: None,
        }
    }

    /// Records the first failure; later ones are consequences of it.
    pub fn fail(&mut self, kind: ErrorKind, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(RequestError {
                kind,
                message: message.into(),
            });
        }
    }

    /// Handles one JSON message (an SSE event or a whole non-streaming body). Generated
    /// content is text, reasoning or a tool call; a role-only delta is not content.
    pub fn message(&mut self, data: &[u8], at: Instant) {
        let msg: Message = match serde_json::from_slice(data) {
            Ok(m) => m,
            Err(e) => {
                return self.fail(
                    ErrorKind::MalformedJson,
                    format!("not an OpenAI JSON message ({e}): {}", head(data)),
                );
            }
        };
        if let Some(err) = &msg.error {
            return self.fail(ErrorKind::ErrorObject, error_object_text(err));
        }
        let cumulative_tokens = msg.usage.as_ref().and_then(|u| u.completion_tokens);
        if let Some(u) = msg.usage {
            let reasoning = u.completion_tokens_details.and_then(|d| d.reasoning_tokens);
            self.usage(u.prompt_tokens, u.completion_tokens, reasoning);
            self.cached(u.prompt_tokens_details.and_then(|d| d.cached_tokens));
            if self.error.is_some() {
                return;
            }
        }
        if let Some(t) = msg.timings {
            // Kept in every record: a server's object of any size is not.
            if t.to_string().len() <= MAX_TIMINGS_BYTES {
                self.server_timings = Some(t);
            }
        }
        let Some(choice) = &msg.choice else {
            return;
        };
        let mut generated = Generated::default();
        for d in [&choice.delta, &choice.message].into_iter().flatten() {
            // vLLM has sent the reasoning as `reasoning_content`, newer servers as
            // `reasoning`: one of them, never both counted.
            let reasoning = [&d.reasoning_content, &d.reasoning]
                .into_iter()
                .flatten()
                .find(|r| !r.is_empty());
            generated.reasoning = reasoning.map_or("", |r| r);
            generated.answer = d.content.as_deref().unwrap_or("");
            let calls = d.tool_calls.as_deref().unwrap_or_default();
            generated.tool_call = !calls.is_empty();
            self.chat_tool_calls(calls);
        }
        if self.error.is_some() {
            return;
        }
        if let Some(t) = &choice.text {
            generated.answer = t;
        }
        self.generated(at, generated, cumulative_tokens);
    }

    /// Token counts a server reported (any of them may be absent); an implausible one
    /// fails the exchange and is not kept.
    pub fn usage(&mut self, prompt: Option<u64>, completion: Option<u64>, reasoning: Option<u64>) {
        let counts = [
            ("prompt_tokens", prompt),
            ("completion_tokens", completion),
            ("reasoning_tokens", reasoning),
        ];
        let implausible = counts
            .into_iter()
            .find_map(|(name, n)| n.filter(|&n| n > MAX_USAGE_TOKENS).map(|n| (name, n)));
        if let Some((name, n)) = implausible {
            return self.fail(
                ErrorKind::MalformedJson,
                format!("usage.{name} of {n} is beyond any real count (over {MAX_USAGE_TOKENS})"),
            );
        }
        self.prompt_tokens = prompt.or(self.prompt_tokens);
        self.completion_tokens = completion.or(self.completion_tokens);
        self.reasoning_tokens = reasoning.or(self.reasoning_tokens);
    }

    /// Chat's tool-call deltas (or a whole message's calls, which have no index: each
    /// one's place in the list is its index).
    fn chat_tool_calls(&mut self, calls: &[ChatToolCall<'_>]) {
        for (position, call) in calls.iter().enumerate() {
            let function = call.function.as_ref();
            self.tool_delta(ToolDelta {
                index: call.index.unwrap_or(position as u64),
                id: call.id.as_deref(),
                name: function.and_then(|f| f.name.as_deref()),
                arguments: function.and_then(|f| f.arguments.as_deref()).unwrap_or(""),
            });
        }
    }

    /// Adds a piece of a tool call; a response whose calls pass what a record holds fails.
    pub fn tool_delta(&mut self, d: ToolDelta<'_>) {
        if let Err(e) = self.tool_calls.add(d) {
            self.fail(ErrorKind::TooLarge, e.to_string());
        }
    }

    /// Call `index`'s whole arguments, sent after their pieces (or in place of them).
    pub fn tool_arguments(&mut self, index: u64, arguments: &str) {
        if let Err(e) = self.tool_calls.set_arguments(index, arguments) {
            self.fail(ErrorKind::TooLarge, e.to_string());
        }
    }

    /// The prompt tokens a server read from its cache, where it said; an implausible
    /// count is dropped as the other usage counts are refused.
    pub fn cached(&mut self, tokens: Option<u64>) {
        if let Some(n) = tokens.filter(|&n| n <= MAX_USAGE_TOKENS) {
            self.cached_prompt_tokens = Some(n);
        }
    }

    /// Appends what one message generated as a content chunk read at `at`; a message that
    /// generated nothing (a role-only delta, an empty text) is no chunk.
    pub fn generated(&mut self, at: Instant, g: Generated<'_>, cumulative_tokens: Option<u64>) {
        if g.is_empty() {
            return;
        }
        if self.chunks.len() >= MAX_CHUNKS || self.text.len() > MAX_TEXT_BYTES {
            return self.fail(
                ErrorKind::TooLarge,
                format!(
                    "the response passed {MAX_CHUNKS} content chunks or {} MiB of text, the most a record holds",
                    MAX_TEXT_BYTES >> 20
                ),
            );
        }
        let start = self.text.len();
        self.text.push_str(g.reasoning);
        self.text.push_str(g.answer);
        let tool_end = self.tool_calls.text().len();
        self.chunks.push(ContentChunk {
            at,
            read_delay: None,
            text: start..self.text.len(),
            reasoning: g.reasoning.len(),
            answer: !g.answer.is_empty() || g.tool_call,
            tool_call: g.tool_call,
            tool_text: self.tool_mark.min(tool_end)..tool_end,
            cumulative_tokens,
        });
        self.tool_mark = tool_end;
    }

    /// The generated text without its reasoning: what a scenario hears as the answer.
    pub fn answer_text(&self) -> String {
        if self.chunks.iter().all(|c| c.reasoning == 0) {
            return self.text.clone();
        }
        self.chunks
            .iter()
            .map(|c| &self.text[c.text.start + c.reasoning..c.text.end])
            .collect()
    }
}

/// The message of an `error` object a server sent in place of content, redacted and cut.
pub(super) fn error_object_text(err: &serde_json::Value) -> String {
    let text = err
        .get("message")
        .and_then(|m| m.as_str())
        .map(|m| crate::safeguards::redact::excerpt(m, 300))
        .unwrap_or_else(|| crate::safeguards::redact::excerpt(&err.to_string(), 300));
    format!("error object in the response: {text}")
}

/// The most content chunks one response may bring: each is a timestamp in the record,
/// so an endless stream must end somewhere (a million tokens is beyond any model's output).
pub(super) const MAX_CHUNKS: usize = 1 << 20;

/// The most generated text kept for one response (counted, and handed to `on_response`).
const MAX_TEXT_BYTES: usize = 64 << 20;

/// The largest llama.cpp-style `timings` object kept in a record.
const MAX_TIMINGS_BYTES: usize = 64 << 10;

/// The most tokens a `usage` count may claim: far beyond any context window (10^9), far
/// below where totals over a run could wrap.
const MAX_USAGE_TOKENS: u64 = 1_000_000_000;

/// The start of a message a server sent, for an error: redacted before it is cut.
pub(super) fn head(data: &[u8]) -> String {
    // A secret is far shorter than 4 KiB: redacting that much catches one at the cut.
    let window = String::from_utf8_lossy(&data[..data.len().min(4096)]);
    crate::safeguards::redact::excerpt(&window, 120)
}

#[derive(Deserialize)]
struct Message<'a> {
    /// The first of `choices` (the runner asks for one).
    #[serde(default, borrow, rename = "choices", deserialize_with = "first_choice")]
    choice: Option<Choice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default)]
    timings: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// Non-streaming chat responses.
    #[serde(default, borrow)]
    message: Option<Delta<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ChatToolCall<'a>>>,
}

/// One entry of chat's `delta.tool_calls` (or a whole message's `tool_calls`).
#[derive(Deserialize)]
struct ChatToolCall<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<ChatFunction<'a>>,
}

#[derive(Deserialize)]
struct ChatFunction<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

/// The first element of a `choices` array (or `null`), the others skipped: no vector is
/// built for each chunk of a stream.
fn first_choice<'de: 'a, 'a, D>(d: D) -> Result<Option<Choice<'a>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct First<'a>(Option<Choice<'a>>);

    impl<'de: 'a, 'a> Deserialize<'de> for First<'a> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_seq(FirstVisitor(std::marker::PhantomData))
        }
    }

    struct FirstVisitor<'a>(std::marker::PhantomData<Choice<'a>>);

    impl<'de: 'a, 'a> serde::de::Visitor<'de> for FirstVisitor<'a> {
        type Value = First<'a>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of choices")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<First<'a>, A::Error> {
            let first = seq.next_element::<Choice<'a>>()?;
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(First(first))
        }
    }

    Ok(Option::<First<'a>>::deserialize(d)?.and_then(|f| f.0))
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens_details: Option<UsageDetails>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

/// `prompt_tokens_details` (OpenAI, vLLM) or `input_tokens_details` (Responses).
#[derive(Deserialize)]
pub(super) struct PromptDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
}

/// `completion_tokens_details` (OpenAI, vLLM) or `output_tokens_details` (Responses).
#[derive(Deserialize)]
pub(super) struct UsageDetails {
    #[serde(default)]
    pub(super) reasoning_tokens: Option<u64>,
}
