//! One request record as an OTLP span: the ids of the `traceparent` it was sent with, from
//! its send to the end of its stream, an event at its first token and one at its first
//! answer token (requests.jsonl's `chunks[0].t_ns` and `first_answer_ns`), and its tokens,
//! outcome, phase, tag and request id as attributes. Names follow OpenTelemetry's semantic
//! conventions where one exists (`gen_ai.usage.*`, `error.type`,
//! `http.response.status_code`); the runner's own are `runner.*`.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span, status, Span, Status};

use crate::measuring::metrics::RequestRecord;

/// The most of an error message a span carries (the record keeps it whole).
const STATUS_MESSAGE_CHARS: usize = 300;

/// An attribute of a string value.
pub(super) fn text(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

fn int(key: &str, value: u64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(
                i64::try_from(value).unwrap_or(i64::MAX),
            )),
        }),
        ..Default::default()
    }
}

/// `ok`, `failed` or `cancelled` (the scenario gave up on it: neither).
fn outcome(r: &RequestRecord) -> &'static str {
    match (r.cancelled, &r.error) {
        (true, _) => "cancelled",
        (false, None) => "ok",
        (false, Some(_)) => "failed",
    }
}

fn attributes(r: &RequestRecord) -> Vec<KeyValue> {
    let mut a = vec![
        text("runner.request_id", r.request_id.as_str()),
        int("runner.phase", r.phase as u64),
        int("runner.index", r.index),
        text("runner.outcome", outcome(r)),
        int("gen_ai.usage.input_tokens", r.input_tokens),
        int("gen_ai.usage.output_tokens", r.output_tokens),
    ];
    if let Some(tag) = &r.tag {
        a.push(text("runner.tag", tag.as_str()));
    }
    if let Some(e) = &r.error {
        a.push(text("error.type", e.kind.key()));
    }
    if let Some(status) = r.http_status {
        a.push(int("http.response.status_code", u64::from(status)));
    }
    if r.warmup {
        a.push(text("runner.warmup", "true"));
    }
    a
}

/// The record's span, its times on the wall clock of `phase_started` (the moment its
/// phase's monotonic clock read zero); `None` when the record carries no valid ids.
pub(super) fn span(r: &RequestRecord, phase_started: SystemTime) -> Option<Span> {
    let trace_id = hex::decode(&r.trace.trace_id)
        .ok()
        .filter(|b| b.len() == 16)?;
    let span_id = hex::decode(&r.trace.span_id)
        .ok()
        .filter(|b| b.len() == 8)?;
    let zero = phase_started
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let at = |ns: u64| zero.saturating_add(ns);
    let event = |name: &str, ns: u64| span::Event {
        time_unix_nano: at(ns),
        name: name.into(),
        ..Default::default()
    };
    let mut events = Vec::with_capacity(2);
    if let Some(first) = r.chunks.first() {
        events.push(event("first_token", first.t_ns));
    }
    if let Some(ns) = r.answer.first_answer_ns {
        events.push(event("first_answer", ns));
    }
    let status = r.error.as_ref().map(|e| Status {
        code: status::StatusCode::Error as i32,
        message: e.message.chars().take(STATUS_MESSAGE_CHARS).collect(),
    });
    let name = match r.answer.endpoint.as_str() {
        "" => "POST".to_string(),
        path => format!("POST {path}"),
    };
    Some(Span {
        trace_id,
        span_id,
        name,
        kind: span::SpanKind::Client as i32,
        start_time_unix_nano: at(r.sent_ns),
        end_time_unix_nano: at(r.end_ns.max(r.sent_ns)),
        attributes: attributes(r),
        events,
        status,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(extra: serde_json::Value) -> RequestRecord {
        let mut r = json!({
            "phase": 1, "index": 4, "request_id": "r-1-4", "tag": "long",
            "trace_id": "ab".repeat(16), "span_id": "0c".repeat(8),
            "scheduled_ns": 0, "sent_ns": 1_000, "end_ns": 9_000,
            "chunks": [{"t_ns": 3_000, "tokens": 1}, {"t_ns": 8_000, "tokens": 1}],
            "first_answer_ns": 8_000, "endpoint": "/v1/chat/completions",
            "input_tokens": 12, "output_tokens": 2, "text_tokens": 2, "http_status": 200,
        });
        r.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(r).expect("a record")
    }

    fn attribute<'a>(s: &'a Span, key: &str) -> Option<&'a any_value::Value> {
        let kv = s.attributes.iter().find(|kv| kv.key == key)?;
        kv.value.as_ref()?.value.as_ref()
    }

    #[test]
    fn a_record_is_a_client_span_on_its_phase_s_wall_clock() {
        let zero = UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let s = span(&record(json!({})), zero).expect("a span");
        assert_eq!(
            (s.trace_id.clone(), s.span_id.clone()),
            (vec![0xab; 16], vec![0x0c; 8])
        );
        assert_eq!(s.name, "POST /v1/chat/completions");
        assert_eq!(s.kind, span::SpanKind::Client as i32);
        let at = |ns: u64| 1_000_000_000_000 + ns;
        assert_eq!(
            (s.start_time_unix_nano, s.end_time_unix_nano),
            (at(1_000), at(9_000))
        );
        let events: Vec<(&str, u64)> = s
            .events
            .iter()
            .map(|e| (e.name.as_str(), e.time_unix_nano))
            .collect();
        assert_eq!(
            events,
            [("first_token", at(3_000)), ("first_answer", at(8_000))]
        );
        let text = |v: &str| Some(any_value::Value::StringValue(v.into()));
        assert_eq!(attribute(&s, "runner.tag").cloned(), text("long"));
        assert_eq!(attribute(&s, "runner.outcome").cloned(), text("ok"));
        assert_eq!(
            attribute(&s, "gen_ai.usage.input_tokens").cloned(),
            Some(any_value::Value::IntValue(12))
        );
        assert!(s.status.is_none() && attribute(&s, "error.type").is_none());
    }

    #[test]
    fn a_failure_is_an_error_status_and_a_record_without_ids_no_span() {
        let failed = record(json!({
            "chunks": [], "first_answer_ns": null, "output_tokens": 0, "http_status": 503,
            "error": {"kind": "http_5xx", "message": "overloaded"},
        }));
        let s = span(&failed, UNIX_EPOCH).expect("a span");
        assert!(s.events.is_empty());
        let status = s.status.as_ref().expect("a status");
        assert_eq!(status.code, status::StatusCode::Error as i32);
        assert_eq!(status.message, "overloaded");
        assert_eq!(
            attribute(&s, "error.type").cloned(),
            Some(any_value::Value::StringValue("http_5xx".into()))
        );
        for ids in [json!({"trace_id": ""}), json!({"span_id": "0c0c"})] {
            assert!(span(&record(ids), UNIX_EPOCH).is_none());
        }
    }
}
