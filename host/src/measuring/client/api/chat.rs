//! `/v1/chat/completions`: messages (a text prompt as one user message),
//! `max_completion_tokens` (vLLM's benchmark client's name). Its answers, reasoning
//! deltas included, are decoded in `client::stream`.

use serde_json::{json, Map, Value};

use super::UsageRequest;
use super::{messages_of, stream_options};
use crate::workloads::scenario::RequestSpec;

pub(super) fn fill(
    body: &mut Map<String, Value>,
    spec: &RequestSpec,
    usage: UsageRequest,
) -> Result<(), String> {
    body.insert("messages".into(), Value::Array(messages_of(&spec.prompt)?));
    body.insert("max_completion_tokens".into(), json!(spec.max_tokens));
    body.insert("stream".into(), json!(spec.stream));
    stream_options(body, spec.stream, usage);
    if spec.ignore_eos {
        body.insert("ignore_eos".into(), json!(true));
    }
    Ok(())
}
