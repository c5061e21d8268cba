//! `/v1/embeddings`: a batch of inputs (`Prompt::Inputs`; a text prompt or token ids is a
//! batch of one), never streamed; the answer's `usage.prompt_tokens` is the batch's input
//! tokens. The whole answer is one chunk at the time its body ended, so the request's
//! latency is its end-to-end latency.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::measuring::client::exchange::{error_object_text, head, Exchange, Generated};
use crate::measuring::metrics::record::ErrorKind;
use crate::workloads::scenario::{Prompt, RequestSpec};

pub(super) fn fill(body: &mut Map<String, Value>, spec: &RequestSpec) -> Result<(), String> {
    let input = match &spec.prompt {
        Prompt::Inputs(inputs) => json!(inputs),
        Prompt::Text(t) => json!([t]),
        Prompt::Tokens(ids) => json!([ids]),
        Prompt::Messages(_) => return Err("chat messages cannot be embedded".into()),
    };
    body.insert("input".into(), input);
    body.insert("encoding_format".into(), json!("float"));
    Ok(())
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    data: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
}

/// The whole answer: one chunk holding no text, its usage the batch's input tokens.
pub(crate) fn whole(ex: &mut Exchange, data: &[u8], at: Instant) {
    let answer: Answer = match serde_json::from_slice(data) {
        Ok(a) => a,
        Err(e) => {
            return ex.fail(
                ErrorKind::MalformedJson,
                format!("not an embeddings answer ({e}): {}", head(data)),
            )
        }
    };
    if let Some(err) = answer.error.filter(|e| !e.is_null()) {
        return ex.fail(ErrorKind::ErrorObject, error_object_text(&err));
    }
    if answer.data.is_none_or(|d| d.is_empty()) {
        return ex.fail(
            ErrorKind::EmptyCompletion,
            "the embeddings answer carried no `data`",
        );
    }
    if let Some(u) = answer.usage {
        ex.usage(u.prompt_tokens, None, None);
    }
    // An answer with no text: the chunk marks when it arrived.
    let generated = Generated {
        tool_call: true,
        ..Generated::default()
    };
    ex.generated(at, generated, None);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::{Api, BodyDecoder};

    fn decode(body: &[u8]) -> Exchange {
        let mut ex = Exchange::new();
        let mut d = BodyDecoder::for_api(Api::Embeddings, false);
        d.feed(&mut ex, body, Instant::now());
        d.finish(&mut ex, Instant::now());
        ex
    }

    #[test]
    fn an_answer_is_one_chunk_with_the_input_tokens() {
        let ex = decode(
            br#"{"object":"list","data":[{"embedding":[0.1]},{"embedding":[0.2]}],"usage":{"prompt_tokens":12,"total_tokens":12}}"#,
        );
        assert_eq!((ex.error, ex.chunks.len()), (None, 1));
        assert_eq!((ex.prompt_tokens, ex.completion_tokens), (Some(12), None));
        let e = decode(br#"{"data":[]}"#).error.expect("empty");
        assert_eq!(e.kind, ErrorKind::EmptyCompletion);
        let e = decode(br#"{"error":{"message":"too long"}}"#)
            .error
            .expect("error");
        assert_eq!(e.kind, ErrorKind::ErrorObject);
    }

    #[test]
    fn a_text_prompt_is_a_batch_of_one() {
        let mut body = Map::new();
        fill(
            &mut body,
            &super::super::test_spec(Prompt::Text("a".into())),
        )
        .expect("body");
        assert_eq!(body["input"], json!(["a"]));
    }
}
