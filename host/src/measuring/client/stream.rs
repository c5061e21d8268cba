//! The response side of one request: decoding a body (an SSE stream of OpenAI JSON
//! messages, or one whole JSON answer) into timed content chunks, token usage and, when
//! the server misbehaves, the first error, classified. Pure: bytes and instants in, no I/O,
//! so the property tests can feed it anything split anyhow.

use std::time::Instant;

use super::api::{embeddings, messages, responses, Api};
use super::exchange::Exchange;
use super::sse::{SseError, SseParser, MAX_EVENT_BYTES};
use crate::measuring::metrics::record::ErrorKind;

/// Turns the reads of one response body into messages of an [`Exchange`]. An SSE body is
/// decoded as it arrives, so each chunk keeps the time its bytes were read; any other body
/// is one JSON answer, decoded when it ends. Decoding stops at the first error.
pub struct BodyDecoder {
    /// Whose events (or whole answer) the body holds.
    api: Api,
    sse: bool,
    parser: SseParser,
    whole: Vec<u8>,
    /// `[DONE]` was seen: what follows is ignored.
    done: bool,
}

impl BodyDecoder {
    /// A decoder of OpenAI completions or chat answers.
    pub fn new(sse: bool) -> BodyDecoder {
        BodyDecoder::for_api(Api::Chat, sse)
    }

    /// A decoder of `api`'s answers.
    pub fn for_api(api: Api, sse: bool) -> BodyDecoder {
        BodyDecoder {
            api,
            sse,
            parser: SseParser::default(),
            whole: Vec::new(),
            done: false,
        }
    }

    /// One read of the body, stamped with the time it was read.
    pub fn feed(&mut self, ex: &mut Exchange, bytes: &[u8], at: Instant) {
        if ex.error.is_some() {
            return;
        }
        if !self.sse {
            if self.whole.len() + bytes.len() > MAX_EVENT_BYTES {
                return ex.fail(
                    ErrorKind::MalformedJson,
                    format!("a JSON answer over {MAX_EVENT_BYTES} bytes"),
                );
            }
            return self.whole.extend_from_slice(bytes);
        }
        let (done, api) = (&mut self.done, self.api);
        self.parser
            .push(bytes, |event| on_event(ex, api, done, event, at));
    }

    /// The body ended normally.
    pub fn finish(&mut self, ex: &mut Exchange, at: Instant) {
        if ex.error.is_some() {
            return;
        }
        if self.sse {
            let (done, api) = (&mut self.done, self.api);
            self.parser
                .finish(|event| on_event(ex, api, done, event, at));
        } else {
            // A whole JSON answer: one chunk, at the time the body ended.
            let whole = std::mem::take(&mut self.whole);
            match self.api {
                Api::Completions | Api::Chat => ex.message(&whole, at),
                Api::Responses => responses::whole(ex, &whole, at),
                Api::Messages => messages::whole(ex, &whole, at),
                Api::Embeddings => embeddings::whole(ex, &whole, at),
            }
        }
    }
}

fn on_event(
    ex: &mut Exchange,
    api: Api,
    done: &mut bool,
    event: Result<&[u8], SseError>,
    at: Instant,
) {
    if *done || ex.error.is_some() {
        return;
    }
    match (event, api) {
        (Ok(b"[DONE]"), _) => *done = true,
        // A `data:` line with nothing after it: the event carries no message (a keep-alive,
        // as some proxies send), not a malformed one.
        (Ok(b""), _) => {}
        (Ok(data), Api::Responses) => responses::event(ex, data, at),
        (Ok(data), Api::Messages) => messages::event(ex, data, at),
        // Embeddings are never streamed: a stream of them is read as OpenAI's.
        (Ok(data), _) => ex.message(data, at),
        (Err(e), _) => ex.fail(
            ErrorKind::MalformedSse,
            format!("the stream is not server-sent events: {e}"),
        ),
    }
}

/// `body` as one piece of a response from `api`, decoded, for tests.
#[cfg(test)]
pub(crate) fn decode_whole(api: Api, sse: bool, body: &[u8]) -> Exchange {
    let mut ex = Exchange::new();
    let mut d = BodyDecoder::for_api(api, sse);
    d.feed(&mut ex, body, Instant::now());
    d.finish(&mut ex, Instant::now());
    ex
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::exchange::MAX_CHUNKS;

    #[test]
    fn role_only_delta_is_not_content_but_reasoning_is() {
        let mut ex = Exchange::new();
        let t = Instant::now();
        ex.message(
            br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            t,
        );
        assert!(ex.chunks.is_empty());
        ex.message(
            br#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
            t,
        );
        ex.message(br#"{"choices":[{"delta":{"content":" hi"}}]}"#, t);
        ex.message(br#"{"choices":[{"delta":{"tool_calls":[{"id":"x"}]}}]}"#, t);
        ex.message(
            br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            t,
        );
        assert_eq!(ex.chunks.len(), 3);
        assert_eq!(ex.text, "think hi");
        assert_eq!((ex.prompt_tokens, ex.completion_tokens), (Some(3), Some(4)));
    }

    #[test]
    fn an_implausible_usage_count_is_malformed_not_a_wrapped_total() {
        let mut ex = Exchange::new();
        let t = Instant::now();
        ex.message(br#"{"choices":[{"text":"a"}]}"#, t);
        ex.message(
            br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":18446744073709551615}}"#,
            t,
        );
        let e = ex.error.expect("refused");
        assert_eq!(e.kind, ErrorKind::MalformedJson);
        assert!(
            e.message.contains("usage.completion_tokens"),
            "{}",
            e.message
        );
        assert_eq!(ex.completion_tokens, None);
    }

    #[test]
    fn an_endless_response_ends_as_too_large() {
        let mut ex = Exchange::new();
        let t = Instant::now();
        for _ in 0..=MAX_CHUNKS {
            ex.message(br#"{"choices":[{"text":"a"}]}"#, t);
        }
        assert_eq!(ex.chunks.len(), MAX_CHUNKS);
        let e = ex.error.expect("ended");
        assert_eq!(e.kind, ErrorKind::TooLarge);
    }

    fn decode(sse: bool, body: &[u8]) -> Exchange {
        decode_whole(Api::Chat, sse, body)
    }

    fn kind(sse: bool, body: &[u8]) -> Option<ErrorKind> {
        decode(sse, body).error.map(|e| e.kind)
    }

    #[test]
    fn each_kind_of_bad_body_has_its_own_error() {
        let e = decode(true, b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n")
            .error
            .unwrap();
        assert_eq!(e.kind, ErrorKind::ErrorObject);
        assert!(e.message.contains("overloaded"), "{}", e.message);
        assert_eq!(kind(false, b"<html>"), Some(ErrorKind::MalformedJson));
        assert_eq!(
            kind(true, b"data: {\"choices\":[{\"text\":\"a\"}\n\n"),
            Some(ErrorKind::MalformedJson)
        );
        assert_eq!(
            kind(true, b"{\"choices\":[{\"text\":\"a\"}]}\n"),
            Some(ErrorKind::MalformedSse)
        );
        assert_eq!(
            kind(false, br#"{"error":{"message":"no"}}"#),
            Some(ErrorKind::ErrorObject)
        );
    }

    /// `data:` with nothing after it (with or without its space, or a CR line end) is
    /// skipped in every API's stream; a payload of a newline is still no JSON.
    #[test]
    fn an_event_with_empty_data_is_skipped_not_malformed() {
        let body = b"data:\n\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: \r\rdata:\n\n";
        let ex = decode(true, body);
        assert_eq!((ex.text.as_str(), ex.error), ("a", None));
        for api in [Api::Responses, Api::Messages] {
            let ex = decode_whole(api, true, b"data:\n\n");
            assert_eq!(ex.error, None, "{api:?}");
        }
        assert_eq!(
            kind(true, b"data:\ndata:\n\n"),
            Some(ErrorKind::MalformedJson)
        );
    }

    #[test]
    fn only_the_first_choice_counts_and_choices_must_be_an_array() {
        let ex = decode(
            true,
            b"data: {\"choices\":[{\"text\":\"a\"},{\"text\":\"b\"}]}\n\ndata: {\"choices\":null}\n\n",
        );
        assert_eq!(
            (ex.text.as_str(), ex.chunks.len(), ex.error),
            ("a", 1, None)
        );
        assert_eq!(
            kind(true, b"data: {\"choices\":{\"text\":\"a\"}}\n\n"),
            Some(ErrorKind::MalformedJson)
        );
    }

    #[test]
    fn nothing_after_done_counts() {
        let ex = decode(
            true,
            b"data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\ngarbage\ndata: {\n\n",
        );
        assert_eq!((ex.text.as_str(), ex.error), ("a", None));
    }

    #[test]
    fn llama_cpp_streams_keep_usage_and_the_server_timings() {
        // Completions: usage and timings ride on the final chunk with finish_reason.
        let ex = decode(
            true,
            b"data: {\"choices\":[{\"text\":\" a\",\"finish_reason\":null}]}\n\n\
              data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":9},\"timings\":{\"prompt_ms\":5.9,\"predicted_per_token_ms\":1.4}}\n\n\
              data: [DONE]\n\n",
        );
        assert_eq!((ex.chunks.len(), ex.completion_tokens), (1, Some(1)));
        let timings = ex.server_timings.expect("timings kept");
        assert_eq!(timings["prompt_ms"], 5.9);
        // Chat: a role with null content first, usage and timings in a chunk of no choices.
        let ex = decode(
            true,
            b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n\
              data: {\"choices\":[{\"delta\":{\"content\":\" b\"}}]}\n\n\
              data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n\
              data: {\"choices\":[],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":16},\"timings\":{\"prompt_n\":16}}\n\n",
        );
        assert_eq!((ex.chunks.len(), ex.text.as_str()), (1, " b"));
        assert_eq!(
            (ex.prompt_tokens, ex.completion_tokens),
            (Some(16), Some(1))
        );
        assert_eq!(ex.server_timings.expect("timings kept")["prompt_n"], 16);
        assert!(decode(true, b"data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
            .server_timings
            .is_none());
    }

    #[test]
    fn chat_tool_call_deltas_join_by_index_and_count_as_content() {
        let ex = decode(
            true,
            b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n\
              data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n\
              data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n\
              data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":{\"name\":\"now\",\"arguments\":\"{}\"}}]}}]}\n\n\
              data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]}}]}\n\n\
              data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n\
              data: [DONE]\n\n",
        );
        assert_eq!(ex.error, None);
        let calls: Vec<_> = ex.tool_calls.calls().cloned().collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_a", "get_weather")
        );
        assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
        assert_eq!(
            (calls[1].name.as_str(), calls[1].arguments.as_str()),
            ("now", "{}")
        );
        assert_eq!(ex.chunks.len(), 4);
        assert!(ex.chunks.iter().all(|c| c.tool_call && c.answer));
        let texts: Vec<&str> = ex
            .chunks
            .iter()
            .map(|c| &ex.tool_calls.text()[c.tool_text.clone()])
            .collect();
        assert_eq!(texts, ["get_weather", "{\"city\":", "now{}", "\"Paris\"}"]);
        assert_eq!(ex.text, "");
        assert_eq!(ex.cached_prompt_tokens, Some(8));
    }

    #[test]
    fn a_whole_chat_message_keeps_its_calls() {
        let ex = decode(
            false,
            br#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
                {"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},
                {"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},
                "finish_reason":"tool_calls"}],"usage":{"completion_tokens":9}}"#,
        );
        assert_eq!(ex.error, None);
        let names: Vec<&str> = ex.tool_calls.calls().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["f", "g"]);
        assert_eq!((ex.chunks.len(), ex.chunks[0].tool_call), (1, true));
    }

    #[test]
    fn endless_tool_call_arguments_end_as_too_large() {
        use crate::measuring::client::tool_calls::MAX_TOOL_CALL_BYTES;
        let mut ex = Exchange::new();
        let mut d = BodyDecoder::for_api(Api::Chat, true);
        let piece = "x".repeat(64 << 10);
        let event = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"{piece}\"}}}}]}}}}]}}\n\n"
        );
        let t = Instant::now();
        for _ in 0..(MAX_TOOL_CALL_BYTES / piece.len() + 2) {
            d.feed(&mut ex, event.as_bytes(), t);
        }
        let e = ex.error.expect("refused");
        assert_eq!(e.kind, ErrorKind::TooLarge);
        assert!(ex.tool_calls.text().len() <= MAX_TOOL_CALL_BYTES);
    }

    #[test]
    fn a_whole_answer_is_one_chunk() {
        let ex = decode(
            false,
            br#"{"choices":[{"message":{"content":"hello"}}],"usage":{"completion_tokens":2}}"#,
        );
        assert_eq!((ex.chunks.len(), ex.text.as_str()), (1, "hello"));
        assert_eq!(ex.completion_tokens, Some(2));
    }
}
