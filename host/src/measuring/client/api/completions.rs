//! `/v1/completions`: a text prompt or token ids, `max_tokens` (vLLM's benchmark client's
//! names). Its answers are decoded with chat's (`client::stream`).

use serde_json::{json, Map, Value};

use super::stream_options;
use super::UsageRequest;
use crate::workloads::scenario::{Prompt, RequestSpec};

pub(super) fn fill(
    body: &mut Map<String, Value>,
    spec: &RequestSpec,
    usage: UsageRequest,
) -> Result<(), String> {
    let prompt = match &spec.prompt {
        Prompt::Text(t) => json!(t),
        Prompt::Tokens(ids) => json!(ids),
        Prompt::Messages(_) | Prompt::Inputs(_) => {
            return Err("/v1/completions takes a text prompt or token ids".into())
        }
    };
    body.insert("prompt".into(), prompt);
    body.insert("max_tokens".into(), json!(spec.max_tokens));
    body.insert("stream".into(), json!(spec.stream));
    stream_options(body, spec.stream, usage);
    if spec.ignore_eos {
        body.insert("ignore_eos".into(), json!(true));
    }
    Ok(())
}
