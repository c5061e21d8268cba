//! `/v1/embeddings`: a batch of inputs (a string, strings, token ids, or lists of ids)
//! answered after a time that grows with the batch's input tokens (one forward pass:
//! the `default` profile's step time with that many prompt tokens, the `fixed` profile's
//! TTFT plus 1 µs per token), with a small deterministic vector per input and
//! `usage.prompt_tokens`. Not batched with generation: its latency does not grow with load.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::openai::ApiError;
use super::profile::{SimConfig, Timing};

/// Numbers in each returned vector.
const DIMENSIONS: usize = 8;

#[derive(Deserialize)]
struct Request {
    model: Option<String>,
    input: Option<Value>,
}

/// What a valid embeddings request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// Input tokens of each input.
    pub tokens: Vec<usize>,
}

impl Batch {
    pub fn total_tokens(&self) -> usize {
        self.tokens.iter().sum()
    }
}

pub fn parse(body: &[u8], config: &SimConfig) -> Result<Batch, ApiError> {
    let r: Request = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    if let Some(name) = r.model.filter(|m| *m != config.model) {
        return Err(ApiError::not_found(format!(
            "The model `{name}` does not exist; this server serves `{}`.",
            config.model
        )));
    }
    let inputs = match r.input {
        Some(Value::Array(items)) if items.iter().all(Value::is_u64) => {
            vec![Value::Array(items)]
        }
        Some(Value::Array(items)) => items,
        Some(single @ Value::String(_)) => vec![single],
        _ => return Err(ApiError::bad_request("the field `input` is required")),
    };
    let count = |input: &Value| match input {
        Value::String(s) if !s.is_empty() => Some(config.count_prompt_tokens(s)),
        Value::Array(ids) if !ids.is_empty() && ids.iter().all(Value::is_u64) => Some(ids.len()),
        _ => None,
    };
    let tokens: Option<Vec<usize>> = inputs.iter().map(count).collect();
    match tokens {
        Some(tokens) if !tokens.is_empty() => Ok(Batch { tokens }),
        _ => Err(ApiError::bad_request(
            "`input` must be a non-empty string, array of strings or of token ids",
        )),
    }
}

/// How long the batch takes to embed.
pub fn latency(batch: &Batch, config: &SimConfig) -> Duration {
    let tokens = batch.total_tokens();
    match &config.timing {
        Timing::Batching(params) => params.step_time(0, tokens),
        Timing::Fixed { ttft, .. } => *ttft + Duration::from_micros(tokens as u64),
        Timing::Zero => Duration::ZERO,
    }
}

/// The answer: one vector per input, in order, and the batch's usage.
pub fn answer(batch: &Batch, model_json: &str) -> String {
    let data: Vec<String> = batch
        .tokens
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let vector: Vec<String> = (0..DIMENSIONS)
                .map(|d| format!("{:.4}", ((i + d + n) % 7) as f64 / 7.0))
                .collect();
            format!(
                r#"{{"object":"embedding","index":{i},"embedding":[{}]}}"#,
                vector.join(",")
            )
        })
        .collect();
    let tokens = batch.total_tokens();
    format!(
        r#"{{"object":"list","model":{model_json},"data":[{}],"usage":{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}}}"#,
        data.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_shape_is_counted_and_answered() {
        let config = SimConfig::default();
        let batch = |body: &str| parse(body.as_bytes(), &config).map(|b| b.tokens).ok();
        assert_eq!(batch(r#"{"input":"abcdefgh"}"#), Some(vec![2]));
        assert_eq!(batch(r#"{"input":["abcd","abcdefgh"]}"#), Some(vec![1, 2]));
        assert_eq!(batch(r#"{"input":[1,2,3]}"#), Some(vec![3]));
        assert_eq!(batch(r#"{"input":[[1],[2,3]]}"#), Some(vec![1, 2]));
        assert_eq!(batch(r#"{"input":[]}"#), None);
        assert_eq!(batch(r#"{"input":[""]}"#), None);
        assert_eq!(batch(r#"{"input":"a","model":"other"}"#), None);
        let b = Batch { tokens: vec![1, 2] };
        let v: Value = serde_json::from_str(&answer(&b, r#""m""#)).expect("json");
        assert_eq!(v["data"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["usage"]["prompt_tokens"], 3);
    }

    #[test]
    fn latency_grows_with_the_input_tokens() {
        let config = SimConfig::default();
        let small = latency(&Batch { tokens: vec![10] }, &config);
        let large = latency(
            &Batch {
                tokens: vec![10; 100],
            },
            &config,
        );
        assert!(large > small, "{small:?} {large:?}");
    }
}
