//! Which API a generation request came in on, and the writer of its answers: OpenAI's
//! completions and chat (`openai`), OpenAI Responses (`responses`) or Anthropic Messages
//! (`messages`). The two newer APIs are parsed by turning their request into the chat
//! request it means, so every API shares chat's validation, token counting and reasoning.

use bytes::Bytes;

use super::answer::Answer;
use super::openai::{self, ApiError, GenerationEndpoint, Job, Writer};
use super::profile::SimConfig;
use super::{messages, responses};

/// The endpoint of a generation request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    OpenAi(GenerationEndpoint),
    Responses,
    Messages,
}

impl Route {
    /// Parses and validates a request body.
    pub fn parse(self, body: &[u8], config: &SimConfig) -> Result<Job, ApiError> {
        match self {
            Route::OpenAi(endpoint) => openai::parse(endpoint, body, config),
            Route::Responses => {
                openai::parse(GenerationEndpoint::Chat, &responses::as_chat(body)?, config)
            }
            Route::Messages => {
                openai::parse(GenerationEndpoint::Chat, &messages::as_chat(body)?, config)
            }
        }
    }
}

/// The answers of one request, in its API's wire format.
pub enum Wire {
    OpenAi(Writer),
    Responses(Answer),
    Messages(Answer),
}

impl Wire {
    /// `model_json` is the model name already encoded as a JSON string.
    pub fn new(route: Route, job: &Job, id: u64, created: u64, model_json: &str) -> Wire {
        let answer = || Answer {
            id,
            model_json: model_json.to_string(),
            prompt_tokens: job.prompt_tokens,
            max_tokens: job.max_tokens,
            reasoning_tokens: job.reasoning_tokens,
            emitted: 0,
            tool_call: job.tool_call.clone(),
        };
        match route {
            Route::OpenAi(endpoint) => {
                Wire::OpenAi(Writer::new(endpoint, job, id, created, model_json))
            }
            Route::Responses => Wire::Responses(answer()),
            Route::Messages => Wire::Messages(answer()),
        }
    }

    /// What is sent when the request is admitted (chat's role delta, the start events).
    pub fn role_chunk(&self) -> Option<Bytes> {
        match self {
            Wire::OpenAi(w) => w.role_chunk(),
            Wire::Responses(a) => Some(responses::created(a)),
            Wire::Messages(a) => Some(messages::start(a)),
        }
    }

    /// The events carrying the next `tokens` tokens.
    pub fn content_chunk(&mut self, tokens: usize) -> Bytes {
        match self {
            Wire::OpenAi(w) => w.content_chunk(tokens),
            Wire::Responses(a) => {
                a.emitted += tokens;
                responses::delta(a, a.emitted - tokens)
            }
            Wire::Messages(a) => {
                a.emitted += tokens;
                messages::delta(a, a.emitted - tokens)
            }
        }
    }

    /// The events after the last token: chat's usage chunk (when asked for), the final
    /// response of Responses, the closing events of Messages (both with usage).
    pub fn usage_chunk(&self) -> Bytes {
        match self {
            Wire::OpenAi(w) => w.usage_chunk(),
            Wire::Responses(a) => responses::completed(a),
            Wire::Messages(a) => messages::stop(a),
        }
    }

    /// The stream's last event: `[DONE]` for the OpenAI endpoints; the others have none.
    pub fn done(&self) -> Option<Bytes> {
        matches!(self, Wire::OpenAi(_)).then(|| Bytes::from_static(openai::DONE))
    }

    /// The prompt tokens the engine found in its prefix cache (in OpenAI's usage; the
    /// Responses and Messages writers leave them out).
    pub fn cached(&mut self, cached: Option<usize>) {
        if let Wire::OpenAi(w) = self {
            w.cached(cached);
        }
    }

    /// Counts tokens generated for a non-streaming response.
    pub fn add_tokens(&mut self, tokens: usize) {
        match self {
            Wire::OpenAi(w) => w.add_tokens(tokens),
            Wire::Responses(a) | Wire::Messages(a) => a.emitted += tokens,
        }
    }

    /// The whole non-streaming response body.
    pub fn full_response(&self) -> String {
        match self {
            Wire::OpenAi(w) => w.full_response(),
            Wire::Responses(a) => responses::whole(a),
            Wire::Messages(a) => messages::whole(a),
        }
    }
}
