//! WIT values to the contract's types and back, for each interface version the host runs.
//! The WIT types already fix the shape; what is left here is the JSON text of
//! `extra-json`. The ranges (a rate above 0, a closed loop of at least one request, header
//! names that are HTTP tokens) are checked by `scenario::validate`, the rules Rhai scripts
//! follow too.
//!
//! The bindings of each version are types of their own, but the records they share have
//! the same fields, so one macro writes the conversions of all three: each version names
//! only what it adds. A component of an earlier version gets the defaults of the request
//! fields it lacks (0.2: no headers, no cancel, round-robin; both: no tools, plain chat
//! messages) and never has sessions, and its outcomes, snapshots and phase summaries
//! leave out what it cannot receive (0.3: the tool calls).

use crate::workloads::scenario::params::{ParamSpec, ParamValue};
use crate::workloads::scenario::spec::{
    self, LatencySummary, Next, Outcome, PhaseReport, PhaseSpec, Prompt, ToolCall, ToolSpec,
};
use crate::workloads::scenario::{validate, Description};

/// The optional exports a component announced in `describe`, whatever its version.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hooks {
    pub on_response: bool,
    pub stop: bool,
    pub next_phase: bool,
    /// `session-step` (0.4 on).
    pub sessions: bool,
}

/// The `extra-json` text of a request as the JSON object it must be.
fn extra_json(text: Option<String>) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match text {
        None => Ok(serde_json::Map::new()),
        Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(m)) => Ok(m),
            Ok(_) => Err("`extra-json` must be the text of a JSON object".into()),
            Err(e) => Err(format!("`extra-json` is not valid JSON: {e}")),
        },
    }
}

/// A chat message in OpenAI's shape. `tool_calls` and `tool_call_id` are written only
/// when given, so a plain message is `{"role", "content"}` as before 0.4 and the request
/// digest of a scenario without tools does not change.
fn chat_message(
    role: String,
    content: String,
    tool_calls: Vec<ToolCall>,
    tool_call_id: Option<String>,
) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("role".into(), role.into());
    m.insert("content".into(), content.into());
    if !tool_calls.is_empty() {
        let calls = tool_calls
            .into_iter()
            .map(|c| {
                serde_json::json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments },
                })
            })
            .collect();
        m.insert("tool_calls".into(), serde_json::Value::Array(calls));
    }
    if let Some(id) = tool_call_id {
        m.insert("tool_call_id".into(), id.into());
    }
    serde_json::Value::Object(m)
}

/// A tool of a request; its schema must be the text of a JSON object, as `extra-json`.
fn tool(
    i: usize,
    name: String,
    description: String,
    parameters_json: &str,
) -> Result<ToolSpec, String> {
    let parameters = match serde_json::from_str::<serde_json::Value>(parameters_json) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(_) => {
            return Err(format!(
                "`tools[{i}].parameters-json` must be the text of a JSON object (a JSON Schema)"
            ))
        }
        Err(e) => {
            return Err(format!(
                "`tools[{i}].parameters-json` is not valid JSON: {e}"
            ))
        }
    };
    Ok(ToolSpec {
        name,
        description,
        parameters,
    })
}

/// The conversions of one version's bindings, whose types module is in scope as `wit`.
/// The blocks name what the version has beyond the records every version shares: extra
/// `hooks` flags, how a chat `message` becomes JSON, extra cases of `prompt` (guest to
/// host), and extra fields of `request` and `phase` (guest to host) and of `outcome`,
/// `snapshot` and `phase-summary` (host to guest), each an expression of the value named
/// in parentheses.
macro_rules! conversions {
    (
        hooks($h:ident) { $($hook_field:ident: $hook_value:expr,)* }
        message($m:ident) => $message_value:expr;
        prompt { $($prompt_case:pat => $prompt_value:expr,)* }
        request($r:ident) { $($request_field:ident: $request_value:expr,)* }
        outcome($o:ident) { $($outcome_field:ident: $outcome_value:expr,)* }
        snapshot($s:ident) { $($snapshot_field:ident: $snapshot_value:expr,)* }
        phase_summary($p:ident) { $($summary_field:ident: $summary_value:expr,)* }
        phase($ph:ident) { $($phase_field:ident: $phase_value:expr,)* }
    ) => {
        use super::*;

        pub fn description(d: wit::Description) -> Result<(Description, Hooks), String> {
            let $h = d.hooks;
            let hooks = Hooks {
                on_response: $h.contains(wit::Hooks::ON_RESPONSE),
                stop: $h.contains(wit::Hooks::STOP),
                next_phase: $h.contains(wit::Hooks::NEXT_PHASE),
                $($hook_field: $hook_value,)*
            };
            let params = d
                .params
                .into_iter()
                .map(|p| ParamSpec {
                    name: p.name,
                    default: match p.default {
                        wit::Value::Integer(v) => ParamValue::Int(v),
                        wit::Value::Number(v) => ParamValue::Float(v),
                        wit::Value::Boolean(v) => ParamValue::Bool(v),
                        wit::Value::Text(v) => ParamValue::Str(v),
                    },
                    help: p.help,
                })
                .collect();
            let description = Description {
                name: d.name,
                description: d.description,
                params,
                thresholds: d.thresholds,
            };
            validate::description(&description).map(|()| (description, hooks))
        }

        pub fn phase(i: usize, $ph: wit::Phase) -> Result<PhaseSpec, String> {
            let arrival = match $ph.arrival {
                wit::Arrival::Burst => spec::ArrivalSpec::Burst,
                wit::Arrival::Poisson(rate) => spec::ArrivalSpec::Poisson { rate },
                wit::Arrival::Gamma(g) => spec::ArrivalSpec::Gamma {
                    rate: g.rate,
                    burstiness: g.burstiness,
                },
                wit::Arrival::Constant(rate) => spec::ArrivalSpec::Constant { rate },
                wit::Arrival::Closed(concurrency) => spec::ArrivalSpec::Closed { concurrency },
                wit::Arrival::Custom => spec::ArrivalSpec::Custom,
            };
            let max_duration = match $ph.max_duration {
                None => None,
                Some(secs) => Some(validate::max_duration(i, secs)?),
            };
            let spec = PhaseSpec {
                name: $ph.name,
                arrival,
                max_concurrency: $ph.max_concurrency,
                max_requests: $ph.max_requests,
                max_duration,
                warmup: $ph.warmup,
                // No WIT version has the phase's server calls yet: only
                // --reset-prefix-cache and --profile-phase reach a Wasm scenario's phases.
                control: Default::default(),
                // Nor a named steady-state window: the plateau rule finds a Wasm phase's.
                steady_window: None,
                $($phase_field: $phase_value,)*
            };
            validate::phase(i, spec)
        }

        /// A `next` answer; its rules are checked by the caller with [`validate::next`].
        pub fn next(n: wit::Next) -> Result<Next, String> {
            Ok(match n {
                wit::Next::Request(r) => Next::Request(Box::new(request(r)?)),
                wit::Next::Wait => Next::Wait,
                wit::Next::Done => Next::Done,
            })
        }

        fn request($r: wit::Request) -> Result<spec::RequestSpec, String> {
            let prompt = match $r.prompt {
                wit::Prompt::Text(t) => Prompt::Text(t),
                wit::Prompt::Tokens(ids) => Prompt::Tokens(ids),
                wit::Prompt::Messages(list) => Prompt::Messages(
                    list.into_iter().map(|$m| $message_value).collect(),
                ),
                $($prompt_case => $prompt_value,)*
            };
            Ok(spec::RequestSpec {
                prompt,
                max_tokens: $r.max_tokens,
                ignore_eos: $r.ignore_eos,
                stream: $r.stream,
                extra: extra_json($r.extra_json)?,
                tag: $r.tag,
                session: $r.session,
                at: $r.at,
                delay: $r.delay,
                input_tokens: $r.input_tokens,
                $($request_field: $request_value,)*
            })
        }

        pub fn outcome($o: &Outcome) -> wit::Outcome {
            wit::Outcome {
                phase: u32::try_from($o.phase).unwrap_or(u32::MAX),
                index: $o.index,
                tag: $o.tag.clone(),
                session: $o.session.clone(),
                ok: $o.ok,
                error: $o.error.clone(),
                text: $o.text.clone(),
                ttft_ms: $o.ttft_ms,
                e2el_ms: $o.e2el_ms,
                input_tokens: $o.input_tokens,
                output_tokens: $o.output_tokens,
                $($outcome_field: $outcome_value,)*
            }
        }

        pub fn snapshot($s: &spec::Snapshot) -> wit::Snapshot {
            wit::Snapshot {
                phase: u32::try_from($s.phase).unwrap_or(u32::MAX),
                elapsed: $s.elapsed_s,
                sent: $s.sent,
                completed: $s.completed,
                failed: $s.failed,
                in_flight: $s.in_flight,
                output_tokens: $s.output_tokens,
                ttft_p50_ms: $s.ttft_p50_ms,
                ttft_p99_ms: $s.ttft_p99_ms,
                e2el_p99_ms: $s.e2el_p99_ms,
                $($snapshot_field: $snapshot_value,)*
            }
        }

        /// A finished phase for `next-phase`.
        pub fn phase_summary($p: &PhaseReport) -> wit::PhaseSummary {
            let latency = |l: &LatencySummary| wit::Latency {
                mean: l.mean,
                p50: l.p50,
                p90: l.p90,
                p99: l.p99,
            };
            wit::PhaseSummary {
                index: u32::try_from($p.index).unwrap_or(u32::MAX),
                name: $p.name.clone(),
                warmup: $p.warmup,
                request_rate: $p.request_rate,
                max_concurrency: $p.max_concurrency,
                duration: $p.duration_s,
                completed: $p.completed,
                failed: $p.failed,
                request_throughput: $p.request_throughput,
                output_throughput: $p.output_throughput,
                goodput: $p.goodput,
                ttft: latency(&$p.ttft),
                tpot: latency(&$p.tpot),
                itl: latency(&$p.itl),
                e2el: latency(&$p.e2el),
                $($summary_field: $summary_value,)*
            }
        }
    };
}

/// `bench:scenario@0.4`, wit/scenario.wit.
pub mod current {
    use super::super::bindings::bench::scenario::types as wit;
    use crate::workloads::scenario::spec::SessionState;

    conversions! {
        hooks(h) {
            sessions: h.contains(wit::Hooks::SESSIONS),
        }
        message(m) => chat_message(
            m.role,
            m.content,
            m.tool_calls.into_iter().map(tool_call_in).collect(),
            m.tool_call_id,
        );
        prompt {
            wit::Prompt::Inputs(list) => Prompt::Inputs(list),
        }
        request(r) {
            headers: r.headers.into_iter().map(|h| (h.name, h.value)).collect(),
            cancel: r.cancel.map(|c| spec::Cancel {
                after_tokens: c.after_tokens,
                after_ms: c.after_ms,
            }),
            // A u32 index always fits a usize on the 32- and 64-bit hosts the runner
            // builds for; saturating keeps an absurd one out of range for validation.
            target: r.target.map(|t| usize::try_from(t).unwrap_or(usize::MAX)),
            tools: r
                .tools
                .into_iter()
                .enumerate()
                .map(|(i, t)| tool(i, t.name, t.description, &t.parameters_json))
                .collect::<Result<_, _>>()?,
        }
        outcome(o) {
            cancelled: o.cancelled,
            ttfa_ms: o.ttfa_ms,
            reasoning_tokens: o.reasoning_tokens,
            tool_calls: o
                .tool_calls
                .iter()
                .map(|c| wit::ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
        }
        snapshot(s) {
            server: s
                .server
                .iter()
                .map(|(name, value)| wit::ServerValue {
                    name: name.clone(),
                    value: *value,
                })
                .collect(),
        }
        phase_summary(p) {
            server: p
                .server
                .iter()
                .map(|s| wit::ServerStat {
                    name: s.name.clone(),
                    last: s.last,
                    mean: s.mean,
                    max: s.max,
                })
                .collect(),
        }
        phase(p) {
            sessions: p.sessions,
        }
    }

    fn tool_call_in(c: wit::ToolCall) -> ToolCall {
        ToolCall {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        }
    }

    /// Where a session stands, for `session-step`.
    pub fn session_state(s: &SessionState) -> wit::SessionState {
        wit::SessionState {
            phase: u32::try_from(s.phase).unwrap_or(u32::MAX),
            id: s.id.clone(),
            step: s.step,
            last: s.last.as_ref().map(outcome),
            joined: s.joined.clone(),
        }
    }

    /// A `step` answer; its rules are checked by the caller with [`validate::step`].
    pub fn step(s: wit::Step) -> Result<spec::Step, String> {
        Ok(match s {
            wit::Step::Send(send) => spec::Step::Send {
                request: Box::new(request(send.request)?),
                after: send.after,
            },
            wit::Step::FanOut(names) => spec::Step::FanOut(names),
            wit::Step::End => spec::Step::End,
        })
    }
}

/// `bench:scenario@0.3`, wit/compat/0.3.0/scenario.wit: no sessions and no tools, so its
/// requests carry none and its outcomes leave out the tool calls.
pub mod v0_3 {
    use super::super::v0_3::bench::scenario::types as wit;

    conversions! {
        hooks(h) {
            sessions: false,
        }
        message(m) => chat_message(m.role, m.content, vec![], None);
        prompt {
            wit::Prompt::Inputs(list) => Prompt::Inputs(list),
        }
        request(r) {
            headers: r.headers.into_iter().map(|h| (h.name, h.value)).collect(),
            cancel: r.cancel.map(|c| spec::Cancel {
                after_tokens: c.after_tokens,
                after_ms: c.after_ms,
            }),
            target: r.target.map(|t| usize::try_from(t).unwrap_or(usize::MAX)),
            tools: vec![],
        }
        outcome(o) {
            cancelled: o.cancelled,
            ttfa_ms: o.ttfa_ms,
            reasoning_tokens: o.reasoning_tokens,
        }
        snapshot(s) {
            server: s
                .server
                .iter()
                .map(|(name, value)| wit::ServerValue {
                    name: name.clone(),
                    value: *value,
                })
                .collect(),
        }
        phase_summary(p) {
            server: p
                .server
                .iter()
                .map(|s| wit::ServerStat {
                    name: s.name.clone(),
                    last: s.last,
                    mean: s.mean,
                    max: s.max,
                })
                .collect(),
        }
        phase(p) {
            sessions: None,
        }
    }
}

/// `bench:scenario@0.2`, wit/compat/0.2.0/scenario.wit: requests get the defaults of the
/// fields it lacks, and what it cannot receive is dropped.
pub mod v0_2 {
    use super::super::v0_2::bench::scenario::types as wit;

    conversions! {
        hooks(h) {
            sessions: false,
        }
        message(m) => chat_message(m.role, m.content, vec![], None);
        prompt {}
        request(r) {
            headers: vec![],
            cancel: None,
            target: None,
            tools: vec![],
        }
        outcome(o) {}
        snapshot(s) {}
        phase_summary(p) {}
        phase(p) {
            sessions: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::bindings::bench::scenario::types as v4;
    use super::super::v0_2::bench::scenario::types as v2;
    use super::super::v0_3::bench::scenario::types as v3;
    use super::*;
    use crate::workloads::scenario::spec::{
        Cancel, RequestSpec, ServerStat, SessionState, Snapshot, Step,
    };

    fn v4_request(prompt: v4::Prompt) -> v4::Request {
        v4::Request {
            prompt,
            max_tokens: 8,
            ignore_eos: true,
            stream: true,
            extra_json: Some(r#"{"temperature": 0.5}"#.into()),
            tag: Some("t".into()),
            session: None,
            at: None,
            delay: Some(0.25),
            input_tokens: Some(3),
            headers: vec![v4::Header {
                name: "x-tenant".into(),
                value: "a".into(),
            }],
            cancel: Some(v4::Cancel {
                after_tokens: Some(5),
                after_ms: None,
            }),
            target: Some(1),
            tools: vec![],
        }
    }

    fn request_of(next: Next) -> RequestSpec {
        match next {
            Next::Request(r) => *r,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    #[test]
    fn the_new_request_fields_reach_the_spec() {
        let r = request_of(
            current::next(v4::Next::Request(v4_request(v4::Prompt::Text("hi".into())))).unwrap(),
        );
        assert_eq!(r.headers, [("x-tenant".to_string(), "a".to_string())]);
        assert_eq!(
            r.cancel,
            Some(Cancel {
                after_tokens: Some(5),
                after_ms: None
            })
        );
        assert_eq!(r.target, Some(1));
        assert_eq!(r.delay, Some(0.25));
        assert_eq!(r.extra["temperature"], 0.5);
        let inputs = v4::Prompt::Inputs(vec!["a".into(), "b".into()]);
        let r = request_of(current::next(v4::Next::Request(v4_request(inputs))).unwrap());
        assert_eq!(r.prompt, Prompt::Inputs(vec!["a".into(), "b".into()]));
    }

    fn v2_request(prompt: v2::Prompt, extra_json: Option<&str>) -> v2::Next {
        v2::Next::Request(v2::Request {
            prompt,
            max_tokens: 4,
            ignore_eos: false,
            stream: true,
            extra_json: extra_json.map(String::from),
            tag: None,
            session: Some("s".into()),
            at: Some(1.5),
            delay: None,
            input_tokens: None,
        })
    }

    #[test]
    fn a_previous_version_request_gets_the_defaults_of_the_new_fields() {
        let chat = v2::Prompt::Messages(vec![v2::Message {
            role: "user".into(),
            content: "hi".into(),
        }]);
        let r = request_of(v0_2::next(v2_request(chat, None)).unwrap());
        assert_eq!(
            r.prompt,
            Prompt::Messages(vec![serde_json::json!({"role": "user", "content": "hi"})])
        );
        assert_eq!(
            (r.max_tokens, r.at, r.session.as_deref()),
            (4, Some(1.5), Some("s"))
        );
        assert!(r.headers.is_empty() && r.cancel.is_none() && r.target.is_none());
        let text = || v2::Prompt::Text("x".into());
        assert!(v0_2::next(v2_request(text(), Some("[1]")))
            .unwrap_err()
            .contains("JSON object"));
        assert!(v0_2::next(v2_request(text(), Some("{")))
            .unwrap_err()
            .contains("not valid JSON"));
    }

    #[test]
    fn outcomes_snapshots_and_summaries_carry_the_new_fields_to_the_current_version() {
        let o = Outcome {
            ok: false,
            cancelled: true,
            ttfa_ms: Some(12.5),
            reasoning_tokens: 7,
            output_tokens: 9,
            ..Outcome::default()
        };
        let new = current::outcome(&o);
        assert_eq!(
            (
                new.cancelled,
                new.ttfa_ms,
                new.reasoning_tokens,
                new.output_tokens
            ),
            (true, Some(12.5), 7, 9)
        );
        let old = v0_2::outcome(&o);
        assert_eq!((old.ok, old.output_tokens), (false, 9));

        let s = Snapshot {
            completed: 3,
            server: vec![("vllm:num_requests_waiting".into(), 4.0)],
            ..Snapshot::default()
        };
        let new = current::snapshot(&s);
        assert_eq!(new.server.len(), 1);
        assert_eq!(
            (new.server[0].name.as_str(), new.server[0].value),
            ("vllm:num_requests_waiting", 4.0)
        );
        assert_eq!(v0_2::snapshot(&s).completed, 3);

        let stat = ServerStat {
            name: "vllm:kv_cache_usage_perc".into(),
            last: 0.5,
            mean: 0.4,
            max: 0.9,
        };
        let r = PhaseReport {
            index: 2,
            server: vec![stat],
            ..PhaseReport::default()
        };
        let new = current::phase_summary(&r);
        assert_eq!(
            (new.server[0].last, new.server[0].mean, new.server[0].max),
            (0.5, 0.4, 0.9)
        );
        assert_eq!(v0_2::phase_summary(&r).index, 2);
    }

    #[test]
    fn hooks_read_the_same_from_either_version() {
        let described = |hooks| v2::Description {
            name: "n".into(),
            description: String::new(),
            params: vec![],
            hooks,
            thresholds: vec![],
        };
        let (_, h) = v0_2::description(described(v2::Hooks::STOP | v2::Hooks::NEXT_PHASE)).unwrap();
        assert!(h.stop && h.next_phase && !h.on_response);
        let (d, h) = current::description(v4::Description {
            name: "n".into(),
            description: String::new(),
            params: vec![],
            hooks: v4::Hooks::ON_RESPONSE | v4::Hooks::SESSIONS,
            thresholds: vec!["error_rate<0.1".into()],
        })
        .unwrap();
        assert!(h.on_response && h.sessions && !h.stop);
        assert_eq!(d.thresholds, ["error_rate<0.1"]);
        let (_, h) = v0_3::description(v3::Description {
            name: "n".into(),
            description: String::new(),
            params: vec![],
            hooks: v3::Hooks::ON_RESPONSE,
            thresholds: vec![],
        })
        .unwrap();
        assert!(h.on_response && !h.sessions);
    }

    fn message(role: &str, content: &str) -> v4::Message {
        v4::Message {
            role: role.into(),
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: None,
        }
    }

    fn tool_call(id: &str) -> v4::ToolCall {
        v4::ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: r#"{"path": "a.rs"}"#.into(),
        }
    }

    #[test]
    fn tool_turns_are_sent_in_the_openai_shape_and_plain_messages_as_before() {
        let chat = vec![
            message("user", "fix it"),
            v4::Message {
                tool_calls: vec![tool_call("call_1")],
                ..message("assistant", "")
            },
            v4::Message {
                tool_call_id: Some("call_1".into()),
                ..message("tool", "fn main() {}")
            },
        ];
        let r = request_of(
            current::next(v4::Next::Request(v4_request(v4::Prompt::Messages(chat)))).unwrap(),
        );
        let Prompt::Messages(list) = r.prompt else {
            panic!("expected messages, got {:?}", r.prompt)
        };
        // A plain message serialises exactly as 0.3's did: its digest does not change.
        assert_eq!(
            serde_json::to_string(&list[0]).unwrap(),
            r#"{"content":"fix it","role":"user"}"#
        );
        assert_eq!(
            list[1],
            serde_json::json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "read_file", "arguments": "{\"path\": \"a.rs\"}"}}]})
        );
        assert_eq!(
            list[2],
            serde_json::json!({"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"})
        );
    }

    #[test]
    fn tools_reach_the_spec_with_their_schema_and_a_bad_schema_is_refused() {
        let tool = |schema: &str| v4::Tool {
            name: "grep".into(),
            description: "search the repository".into(),
            parameters_json: schema.into(),
        };
        let with_tools = |tools| {
            current::next(v4::Next::Request(v4::Request {
                tools,
                ..v4_request(v4::Prompt::Text("hi".into()))
            }))
        };
        let r = request_of(with_tools(vec![tool(r#"{"type": "object"}"#)]).unwrap());
        assert_eq!(
            r.tools,
            [ToolSpec {
                name: "grep".into(),
                description: "search the repository".into(),
                parameters: serde_json::json!({"type": "object"}),
            }]
        );
        let e = with_tools(vec![tool(r#"{"type": "object"}"#), tool("[]")]).unwrap_err();
        assert!(
            e.contains("tools[1].parameters-json") && e.contains("JSON object"),
            "{e}"
        );
        let e = with_tools(vec![tool("{")]).unwrap_err();
        assert!(e.contains("not valid JSON"), "{e}");
    }

    #[test]
    fn a_session_state_goes_out_with_its_last_outcome_and_a_step_comes_back() {
        let state = SessionState {
            phase: 1,
            id: "7/review-2".into(),
            step: 3,
            last: Some(Outcome {
                ok: true,
                tool_calls: vec![ToolCall {
                    id: "call_9".into(),
                    name: "run_tests".into(),
                    arguments: "{}".into(),
                }],
                ..Outcome::default()
            }),
            joined: vec!["7/a".into()],
        };
        let out = current::session_state(&state);
        assert_eq!((out.phase, out.id.as_str(), out.step), (1, "7/review-2", 3));
        let last = out.last.expect("the last outcome");
        assert_eq!(last.tool_calls.len(), 1);
        assert_eq!(
            (
                last.tool_calls[0].id.as_str(),
                last.tool_calls[0].name.as_str()
            ),
            ("call_9", "run_tests")
        );
        assert_eq!(out.joined, ["7/a"]);

        let send = v4::Step::Send(v4::SendStep {
            request: v4_request(v4::Prompt::Text("hi".into())),
            after: 1.5,
        });
        match current::step(send).unwrap() {
            Step::Send { request, after } => {
                assert_eq!((request.max_tokens, after), (8, 1.5));
            }
            other => panic!("expected a send, got {other:?}"),
        }
        let names = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            current::step(v4::Step::FanOut(names.clone())).unwrap(),
            Step::FanOut(names)
        );
        assert_eq!(current::step(v4::Step::End).unwrap(), Step::End);
    }

    #[test]
    fn a_0_3_component_sends_no_tools_and_receives_no_tool_calls() {
        let chat = v3::Prompt::Messages(vec![v3::Message {
            role: "user".into(),
            content: "hi".into(),
        }]);
        let next = v3::Next::Request(v3::Request {
            prompt: chat,
            max_tokens: 4,
            ignore_eos: false,
            stream: true,
            extra_json: None,
            tag: None,
            session: None,
            at: None,
            delay: None,
            input_tokens: None,
            headers: vec![],
            cancel: None,
            target: Some(0),
        });
        let r = request_of(v0_3::next(next).unwrap());
        assert_eq!(
            r.prompt,
            Prompt::Messages(vec![serde_json::json!({"role": "user", "content": "hi"})])
        );
        assert!(r.tools.is_empty());
        assert_eq!(r.target, Some(0));
        let o = Outcome {
            reasoning_tokens: 2,
            tool_calls: vec![ToolCall::default()],
            ..Outcome::default()
        };
        assert_eq!(v0_3::outcome(&o).reasoning_tokens, 2);
    }
}
