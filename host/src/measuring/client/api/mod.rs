//! The APIs a request can speak. Each module has one concern: the body it sends for a
//! scenario request and, where its answers differ from OpenAI's completions, how its
//! events become the content chunks of an [`Exchange`](super::Exchange).

pub mod chat;
pub mod completions;
pub mod embeddings;
pub mod messages;
pub mod responses;
mod tools;

use serde_json::{Map, Value};

use crate::workloads::scenario::{Prompt, RequestSpec};

/// The endpoint a request goes to (`--api`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Api {
    /// `/v1/completions`
    Completions,
    /// `/v1/chat/completions`
    Chat,
    /// `/v1/responses` (OpenAI Responses)
    Responses,
    /// `/v1/messages` (Anthropic Messages)
    Messages,
    /// `/v1/embeddings` (not streamed)
    Embeddings,
}

/// Every API, in `--api`'s order.
pub const APIS: [Api; 5] = [
    Api::Completions,
    Api::Chat,
    Api::Responses,
    Api::Messages,
    Api::Embeddings,
];

impl Api {
    /// The `--api` value.
    pub fn name(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Embeddings => "embeddings",
        }
    }

    /// vLLM's `--backend` name for this endpoint, used in result JSON (vLLM has none for
    /// Responses and Messages: theirs follow its naming).
    pub fn backend(self) -> &'static str {
        match self {
            Api::Completions => "openai",
            Api::Chat => "openai-chat",
            Api::Responses => "openai-responses",
            Api::Messages => "anthropic-messages",
            Api::Embeddings => "openai-embeddings",
        }
    }

    /// The path the request is posted to, below the target's base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
            Api::Embeddings => crate::measuring::metrics::answer::EMBEDDINGS_PATH,
        }
    }

    /// The API whose [`Api::path`] is `path`.
    pub fn of_path(path: &str) -> Option<Api> {
        APIS.into_iter().find(|a| a.path() == path)
    }

    /// The API whose [`Api::name`] is `name`.
    pub fn of_name(name: &str) -> Option<Api> {
        APIS.into_iter().find(|a| a.name() == name)
    }

    /// Whether its answers are generated text (every API but embeddings).
    pub fn generates(self) -> bool {
        self != Api::Embeddings
    }

    /// Where a request of `prompt` goes on a run with `--api self`: chat messages sent
    /// with `--api completions` go to chat (completions has no messages); the rest stay.
    pub fn for_prompt(self, prompt: &Prompt) -> Result<Api, String> {
        match (prompt, self) {
            (Prompt::Messages(_), Api::Completions) => Ok(Api::Chat),
            (Prompt::Messages(_), Api::Embeddings) => {
                Err("chat messages cannot be embedded; give `inputs` or a text prompt".into())
            }
            (Prompt::Tokens(_), Api::Chat | Api::Responses | Api::Messages) => Err(format!(
                "a prompt of token ids can only be sent to /v1/completions or /v1/embeddings, not with --api {}",
                self.name()
            )),
            (Prompt::Inputs(_), api) if api != Api::Embeddings => {
                Err("a batch of embedding inputs needs --api embeddings".into())
            }
            (_, api) => Ok(api),
        }
    }

    /// The JSON body of `spec` for this API, before the scenario's extra fields.
    pub(super) fn body(
        self,
        spec: &RequestSpec,
        model: &str,
        usage: UsageRequest,
    ) -> Result<Map<String, Value>, String> {
        let mut body = Map::new();
        body.insert("model".into(), model.into());
        match self {
            Api::Completions => completions::fill(&mut body, spec, usage),
            Api::Chat => chat::fill(&mut body, spec, usage),
            Api::Responses => responses::fill(&mut body, spec),
            Api::Messages => messages::fill(&mut body, spec),
            Api::Embeddings => embeddings::fill(&mut body, spec),
        }?;
        tools::fill(&mut body, spec, self)?;
        Ok(body)
    }
}

/// Body fields the runner sets whatever the request, and what sets them instead.
pub const OWNED_FIELDS: [(&str, &str); 2] = [
    (
        "stream",
        "the request's own `stream` field (`stream: false` for an unstreamed request)",
    ),
    ("stream_options", "--no-usage or --continuous-usage"),
];

/// Why an extra body field (a scenario's `extra`, bench serve's `--extra-body`) may not
/// be sent: it is one the runner owns ([`OWNED_FIELDS`]: `"stream": false` would make
/// every TTFT the whole response time), or it would replace a field the runner built
/// from the request's own (`prompt`, `messages`, `max_tokens`, …: requests.jsonl would
/// record what was not sent). `model` may be replaced: a request may name its own model
/// (a LoRA adapter, as bench serve's `--lora-modules` does).
pub fn owned_field(key: &str, body: &Map<String, Value>) -> Option<String> {
    if let Some((_, instead)) = OWNED_FIELDS.iter().find(|(k, _)| *k == key) {
        return Some(format!(
            "`extra.{key}`: the runner sets `{key}` itself and measures by it: use {instead}"
        ));
    }
    (key != "model" && body.contains_key(key)).then(|| {
        format!("`extra.{key}` would replace the `{key}` the runner wrote from the request's own fields (requests.jsonl would record what was not sent): set the request's field instead")
    })
}

/// How to ask for token usage in a stream (here, below `client::openai`, because each
/// API's body builder reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageRequest {
    /// Ask for nothing (for servers that reject `stream_options`).
    None,
    /// `stream_options.include_usage`: one usage report at the end.
    Final,
    /// Also vLLM's `continuous_usage_stats`: cumulative usage on every chunk.
    Continuous,
}

/// `stream_options` as `usage` asks, on a streamed request (completions and chat).
fn stream_options(body: &mut Map<String, Value>, stream: bool, usage: UsageRequest) {
    use serde_json::json;
    let options = match (stream, usage) {
        (true, UsageRequest::Final) => json!({"include_usage": true}),
        (true, UsageRequest::Continuous) => {
            json!({"include_usage": true, "continuous_usage_stats": true})
        }
        _ => return,
    };
    body.insert("stream_options".into(), options);
}

/// The scenario's messages, or a text prompt as one user message.
fn messages_of(prompt: &Prompt) -> Result<Vec<Value>, String> {
    match prompt {
        Prompt::Messages(m) => Ok(m.clone()),
        Prompt::Text(t) => Ok(vec![serde_json::json!({"role": "user", "content": t})]),
        Prompt::Tokens(_) | Prompt::Inputs(_) => {
            Err("this API takes a text prompt or chat messages".into())
        }
    }
}

/// A request of `prompt` with the other fields plain, for tests.
#[cfg(test)]
pub(crate) fn test_spec(prompt: Prompt) -> RequestSpec {
    RequestSpec::new(prompt, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_round_trip() {
        for api in APIS {
            assert_eq!(Api::of_path(api.path()), Some(api));
            assert_eq!(Api::of_name(api.name()), Some(api));
            let value = <Api as clap::ValueEnum>::from_str(api.name(), false);
            assert_eq!(value, Ok(api));
        }
    }

    #[test]
    fn each_prompt_goes_where_it_can() {
        let messages = Prompt::Messages(vec![]);
        assert_eq!(Api::Completions.for_prompt(&messages), Ok(Api::Chat));
        assert_eq!(Api::Messages.for_prompt(&messages), Ok(Api::Messages));
        assert!(Api::Embeddings.for_prompt(&messages).is_err());
        let tokens = Prompt::Tokens(vec![1]);
        assert!(Api::Responses.for_prompt(&tokens).is_err());
        assert_eq!(Api::Embeddings.for_prompt(&tokens), Ok(Api::Embeddings));
        let inputs = Prompt::Inputs(vec!["a".into()]);
        assert!(Api::Chat.for_prompt(&inputs).is_err());
        let text = Prompt::Text("a".into());
        assert_eq!(Api::Embeddings.for_prompt(&text), Ok(Api::Embeddings));
    }
}
