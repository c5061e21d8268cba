//! One finished request to its [`RequestRecord`] (and, for a scenario that hears of
//! responses, its [`Outcome`]). Runs on the record builders (`record_builder.rs`), never
//! on the I/O threads: counting the tokens of a response is CPU work on text of any size.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::Planned;
use crate::measuring::client::Api;
use crate::measuring::client::Exchange;
use crate::measuring::metrics::answer::AnswerRecord;
use crate::measuring::metrics::record::{Chunk, ErrorKind, Reach, RequestRecord};
use crate::workloads::scenario::{Outcome, ToolCall};
use crate::workloads::tokenizer::Tokenizer;

/// A request as it was sent: what the record needs besides the exchange itself.
pub(super) struct SentRequest {
    pub(super) phase: usize,
    pub(super) planned: Box<Planned>,
    pub(super) request_id: String,
    pub(super) phase_start: Instant,
    /// When it was due: its send time, or the moment a concurrency slot let it go.
    pub(super) scheduled: Instant,
    pub(super) sent: Instant,
    /// The index of its target, when the run has several.
    pub(super) target: Option<usize>,
}

impl SentRequest {
    /// The record of the exchange, and the outcome when `wants_outcome`.
    pub(super) fn record(
        self,
        ex: Exchange,
        tokenizer: &Tokenizer,
        wants_outcome: bool,
        keep_text: Option<&AnswerTextBudget>,
    ) -> (RequestRecord, Option<Outcome>) {
        let ns = |t: Instant| t.saturating_duration_since(self.phase_start).as_nanos() as u64;
        let usage_output = ex.completion_tokens.filter(|&n| n > 0);
        let tool_call_tokens = tool_call_tokens(&ex, tokenizer);
        // Tool calls are generated tokens too: counted with the text where usage is absent.
        let text_tokens = (tokenizer.count(&ex.text) as u64).saturating_add(tool_call_tokens);
        let chunks = chunk_tokens(&ex, usage_output, text_tokens, tokenizer)
            .zip(&ex.chunks)
            .map(|(tokens, c)| Chunk {
                t_ns: ns(c.at),
                tokens,
                client_delay_ns: c.read_delay.map(|d| d.as_nanos() as u64),
            })
            .collect();
        let planned = self.planned;
        let mut answer = answer_record(&ex, planned.prepared.api, tokenizer, tool_call_tokens, ns);
        answer.text = keep_text.map(|budget| budget.take(&ex.answer_text()));
        let (text, tool_calls) = heard(&ex, wants_outcome);
        let record = RequestRecord {
            phase: self.phase,
            index: planned.index,
            tag: planned.tag.clone(),
            request_id: self.request_id,
            trace: ex.trace.map(|t| t.ids()).unwrap_or_default(),
            scheduled_ns: ns(self.scheduled),
            sent_ns: ns(ex.sent_at.unwrap_or(self.sent)),
            first_byte_ns: ex.first_byte.map(ns),
            chunks,
            end_ns: ns(ex.end),
            input_tokens: ex
                .prompt_tokens
                .filter(|&n| n > 0)
                .unwrap_or(planned.input_tokens),
            output_tokens: match ex.error {
                None => usage_output.unwrap_or(text_tokens),
                Some(_) => 0,
            },
            usage_output_tokens: usage_output,
            text_tokens,
            warmup: planned.warmup,
            http_status: ex.status,
            reached: reach(&ex),
            error: ex.error,
            retried: ex.retried,
            send_write_ns: ex.send_write_ns,
            server_timings: ex.server_timings,
            cancelled: ex.cancelled,
            target: self.target,
            answer,
            session: planned.session_record.clone(),
        };
        let outcome = wants_outcome.then(|| Outcome {
            phase: self.phase,
            index: planned.index,
            tag: planned.tag.clone(),
            session: planned.session.clone(),
            ok: record.succeeded(),
            error: record.error.as_ref().map(|e| e.message.clone()),
            text,
            ttft_ms: record.ttft_ns().unwrap_or(0) as f64 / 1e6,
            e2el_ms: record.e2el_ns().unwrap_or(0) as f64 / 1e6,
            input_tokens: record.input_tokens,
            output_tokens: record.output_tokens,
            ttfa_ms: record.ttfa_ns().map(|t| t as f64 / 1e6),
            reasoning_tokens: record.answer.reasoning_tokens,
            cancelled: record.cancelled,
            end_s: record.end_ns as f64 / 1e9,
            tool_calls,
        });
        (record, outcome)
    }
}

/// How much answer text a run keeps in its records (`--keep-answer-text`): vLLM's client
/// keeps every answer whole in memory; a record file must not grow without bound, so each
/// answer is cut at [`ANSWER_TEXT_PER_REQUEST`] bytes and the run keeps at most
/// [`ANSWER_TEXT_TOTAL`] bytes, then keeps "" (and counts the answers it cut or left out).
#[derive(Debug, Default)]
pub struct AnswerTextBudget {
    kept: AtomicU64,
    cut: AtomicU64,
}

/// The most bytes of one answer kept.
pub const ANSWER_TEXT_PER_REQUEST: usize = 64 << 10;
/// The most bytes of answer text one run keeps.
pub const ANSWER_TEXT_TOTAL: u64 = 64 << 20;

impl AnswerTextBudget {
    /// What of `text` to keep: its first bytes up to the per-request cap (on a character
    /// boundary) while the run's total allows, else "".
    pub fn take(&self, text: &str) -> String {
        let mut end = text.len().min(ANSWER_TEXT_PER_REQUEST);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let granted = self
            .kept
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |kept| {
                kept.checked_add(end as u64)
                    .filter(|&k| k <= ANSWER_TEXT_TOTAL)
            })
            .is_ok();
        let end = if granted { end } else { 0 };
        if end < text.len() {
            self.cut.fetch_add(1, Ordering::Relaxed);
        }
        text[..end].to_string()
    }

    /// Answers cut short or left out so far.
    pub fn cut(&self) -> u64 {
        self.cut.load(Ordering::Relaxed)
    }
}

/// The endpoint, first answer chunk, reasoning tokens, tool calls and cached prompt tokens
/// of an exchange sent to `api` (its tool-call tokens are counted with the text).
/// Reasoning tokens are the server's count where it gave one, else the tokenizer's count
/// of the reasoning text; none for a failed request (as its output tokens).
fn answer_record(
    ex: &Exchange,
    api: Api,
    tokenizer: &Tokenizer,
    tool_call_tokens: u64,
    ns: impl Fn(Instant) -> u64,
) -> AnswerRecord {
    let first_answer_ns = ex
        .chunks
        .iter()
        .find(|c| c.answer)
        .filter(|_| api.generates())
        .map(|c| ns(c.at));
    let reasoned = ex.chunks.iter().any(|c| c.reasoning > 0);
    let reasoning_tokens = match (&ex.error, reasoned) {
        (None, true) => ex.reasoning_tokens.unwrap_or_else(|| {
            let reasoning = |c: &crate::measuring::client::ContentChunk| {
                tokenizer.count(&ex.text[c.text.start..c.text.start + c.reasoning]) as u64
            };
            ex.chunks.iter().map(reasoning).sum()
        }),
        _ => 0,
    };
    let first_tool_call_ns = ex.chunks.iter().find(|c| c.tool_call).map(|c| ns(c.at));
    AnswerRecord {
        endpoint: api.path().to_string(),
        first_answer_ns,
        reasoning_tokens,
        // As output tokens: none for a failed request.
        tool_calls: match ex.error {
            None => u32::try_from(ex.tool_calls.len()).unwrap_or(u32::MAX),
            Some(_) => 0,
        },
        tool_call_tokens: if ex.error.is_none() {
            tool_call_tokens
        } else {
            0
        },
        first_tool_call_ns,
        cached_prompt_tokens: ex.cached_prompt_tokens,
        text: None,
    }
}

/// What a scenario hears of the answer when it `wants_outcome`: the text without the
/// reasoning, and the tool calls (none from a failed request).
fn heard(ex: &Exchange, wants_outcome: bool) -> (String, Vec<ToolCall>) {
    if !wants_outcome {
        return (String::new(), Vec::new());
    }
    let calls = match ex.error {
        None => ex.tool_calls.calls().cloned().collect(),
        Some(_) => Vec::new(),
    };
    (ex.answer_text(), calls)
}

/// The run tokenizer's count of the tool calls' names and arguments, each on its own
/// (a name and its arguments are separate texts to the model).
fn tool_call_tokens(ex: &Exchange, tokenizer: &Tokenizer) -> u64 {
    ex.tool_calls
        .calls()
        .map(|c| (tokenizer.count(&c.name) + tokenizer.count(&c.arguments)) as u64)
        .sum()
}

/// Whether the request reached the server: an answer says yes; a refused connection on
/// the only attempt says no; anything else cannot be known from the client.
fn reach(ex: &Exchange) -> Reach {
    let refused = ex
        .error
        .as_ref()
        .is_some_and(|e| e.kind == ErrorKind::Connect);
    match (ex.status, refused && !ex.retried) {
        (Some(_), _) => Reach::Yes,
        (None, true) => Reach::No,
        (None, false) => Reach::Unknown,
    }
}

/// Tokens carried by each content chunk: from the server's cumulative usage when it
/// reports it on every chunk; one each when its final count equals the number of chunks;
/// else the tokenizer's count of each chunk's text. Never 0 for a chunk with content.
fn chunk_tokens<'a>(
    ex: &'a Exchange,
    usage_output: Option<u64>,
    text_tokens: u64,
    tokenizer: &'a Tokenizer,
) -> impl Iterator<Item = u32> + 'a {
    let continuous =
        !ex.chunks.is_empty() && ex.chunks.iter().all(|c| c.cumulative_tokens.is_some());
    let ones = usage_output == Some(ex.chunks.len() as u64);
    // One chunk holds the whole text, already counted.
    let whole = ex.chunks.len() == 1;
    let mut previous = 0u64;
    ex.chunks.iter().map(move |chunk| {
        let n = if continuous {
            let now = chunk.cumulative_tokens.unwrap_or(previous);
            let n = now.saturating_sub(previous);
            previous = now;
            n
        } else if ones {
            1
        } else if whole {
            text_tokens
        } else {
            let tools = ex
                .tool_calls
                .text()
                .get(chunk.tool_text.clone())
                .unwrap_or("");
            (tokenizer.count(&ex.text[chunk.text.clone()]) + tokenizer.count(tools)) as u64
        };
        n.clamp(1, u64::from(u32::MAX)) as u32
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 58: bench serve's `generated_texts` were all "": the records kept no text.
    /// Kept, each answer is cut at its cap on a character boundary, and the run's total
    /// is bounded.
    #[test]
    fn answer_text_is_kept_within_its_caps() {
        let budget = AnswerTextBudget::default();
        assert_eq!(budget.take("a short answer"), "a short answer");
        let long = "é".repeat(ANSWER_TEXT_PER_REQUEST);
        let kept = budget.take(&long);
        assert!(kept.len() <= ANSWER_TEXT_PER_REQUEST && !kept.is_empty());
        assert!(long.starts_with(&kept));
        assert_eq!(budget.cut(), 1);
        let full = ANSWER_TEXT_TOTAL / ANSWER_TEXT_PER_REQUEST as u64;
        let chunk = "x".repeat(ANSWER_TEXT_PER_REQUEST);
        let kept: usize = (0..full + 2).map(|_| budget.take(&chunk).len()).sum();
        assert!(kept as u64 <= ANSWER_TEXT_TOTAL, "{kept}");
        assert_eq!(budget.take(&chunk), "", "past the run's total");
        assert!(budget.cut() >= 2);
    }
}
