//! Constructors and builder methods for the WIT records, so a scenario reads as
//! `Request::text(p).max_tokens(100).ignore_eos()` rather than a struct literal.

use crate::{
    Arrival, Cancel, Description, GammaArrival, Header, Hooks, Message, Next, Outcome, ParamSpec,
    Phase, PhaseSummary, Prompt, Request, SendStep, ServerStat, Snapshot, Step, Tool, ToolCall,
    Value,
};

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Integer(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Integer(i64::from(v))
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Integer(i64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Number(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Boolean(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl Description {
    pub fn new(name: &str, description: &str) -> Description {
        Description {
            name: name.to_string(),
            description: description.to_string(),
            params: vec![],
            hooks: Hooks::empty(),
            thresholds: vec![],
        }
    }

    /// A pass/fail check at the end of the run, as `--threshold` takes it:
    /// `"p99_ttft_ms<500"`, `"error_rate<0.01"`. A failed one makes the run exit with 99.
    pub fn threshold(mut self, check: &str) -> Description {
        self.thresholds.push(check.to_string());
        self
    }

    /// Declares a parameter. The default's type is the parameter's type: `-p NAME=VALUE`
    /// must parse as it (`100` an integer, `1.0` a number, `true`, `"text"`).
    pub fn param(mut self, name: &str, default: impl Into<Value>, help: &str) -> Description {
        self.params.push(ParamSpec {
            name: name.to_string(),
            default: default.into(),
            help: help.to_string(),
        });
        self
    }
}

impl Phase {
    /// A phase whose requests all start at once, with no limits; chain the methods below.
    pub fn new(name: &str) -> Phase {
        Phase {
            name: name.to_string(),
            arrival: Arrival::Burst,
            max_concurrency: None,
            max_requests: None,
            max_duration: None,
            warmup: false,
            sessions: None,
        }
    }

    /// All requests at once.
    pub fn burst(mut self) -> Phase {
        self.arrival = Arrival::Burst;
        self
    }

    /// Poisson arrivals at `rate` requests per second.
    pub fn poisson(mut self, rate: f64) -> Phase {
        self.arrival = Arrival::Poisson(rate);
        self
    }

    /// Gamma gaps: mean 1/rate, shape `burstiness` (1 = Poisson).
    pub fn gamma(mut self, rate: f64, burstiness: f64) -> Phase {
        self.arrival = Arrival::Gamma(GammaArrival { rate, burstiness });
        self
    }

    /// One request every 1/rate seconds.
    pub fn constant(mut self, rate: f64) -> Phase {
        self.arrival = Arrival::Constant(rate);
        self
    }

    /// Closed loop: keep `concurrency` requests in flight.
    pub fn closed(mut self, concurrency: u64) -> Phase {
        self.arrival = Arrival::Closed(concurrency);
        self
    }

    /// Gaps from `Scenario::arrival` (see `gaps`).
    pub fn custom(mut self) -> Phase {
        self.arrival = Arrival::Custom;
        self
    }

    pub fn max_requests(mut self, n: u64) -> Phase {
        self.max_requests = Some(n);
        self
    }

    pub fn max_concurrency(mut self, n: u64) -> Phase {
        self.max_concurrency = Some(n);
        self
    }

    /// Stop sending after this many seconds; in-flight requests drain.
    pub fn max_duration(mut self, seconds: f64) -> Phase {
        self.max_duration = Some(seconds);
        self
    }

    /// Send and record, but leave the phase out of the statistics.
    pub fn warmup(mut self) -> Phase {
        self.warmup = true;
        self
    }

    /// A phase of `n` root sessions driven by `Scenario::session_step` (set
    /// `Scenario::SESSIONS`); the arrival process times their starts, and a closed loop
    /// keeps that many sessions open at once.
    pub fn sessions(mut self, n: u64) -> Phase {
        self.sessions = Some(n);
        self
    }
}

impl Message {
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.to_string(),
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: None,
        }
    }

    /// An assistant turn that called tools (its content empty), sent as OpenAI's
    /// `{"role": "assistant", "content": "", "tool_calls": [...]}`.
    pub fn assistant_tool_calls(calls: Vec<ToolCall>) -> Message {
        Message {
            tool_calls: calls,
            ..Message::new("assistant", "")
        }
    }

    /// The model's answer as the turn that continues a history: its text, and its tool
    /// calls when it made any (Rhai's `assistant_turn(outcome)`).
    pub fn assistant_turn(outcome: &Outcome) -> Message {
        Message {
            tool_calls: outcome.tool_calls.clone(),
            ..Message::new("assistant", outcome.text.clone())
        }
    }

    /// The result of the tool call `call_id`, sent as `{"role": "tool", "tool_call_id":
    /// …, "content": …}`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            tool_call_id: Some(call_id.into()),
            ..Message::new("tool", content)
        }
    }

    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }

    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }

    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
}

impl Request {
    fn with_prompt(prompt: Prompt) -> Request {
        Request {
            prompt,
            max_tokens: 0,
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
            target: None,
            tools: vec![],
        }
    }

    /// A text prompt (the completions endpoint, or one user message with `--api chat`).
    /// Set [`Request::max_tokens`]: the runner refuses a request without it.
    pub fn text(prompt: impl Into<String>) -> Request {
        Request::with_prompt(Prompt::Text(prompt.into()))
    }

    /// A prompt of token ids of the run's tokenizer.
    pub fn tokens(ids: Vec<u32>) -> Request {
        Request::with_prompt(Prompt::Tokens(ids))
    }

    /// A conversation, sent to the chat endpoint.
    pub fn chat(messages: Vec<Message>) -> Request {
        Request::with_prompt(Prompt::Messages(messages))
    }

    /// A batch of texts to embed in one request (`--api embeddings`): at least one, at
    /// most 2048. Set [`Request::max_tokens`] all the same (1 will do): the runner
    /// refuses a request without it.
    pub fn embeddings<S: Into<String>>(inputs: impl IntoIterator<Item = S>) -> Request {
        Request::with_prompt(Prompt::Inputs(inputs.into_iter().map(Into::into).collect()))
    }

    pub fn max_tokens(mut self, n: u64) -> Request {
        self.max_tokens = n;
        self
    }

    /// Generate exactly `max_tokens` (the server ignores end-of-sequence).
    pub fn ignore_eos(mut self) -> Request {
        self.ignore_eos = true;
        self
    }

    /// Ask for the whole answer at once instead of a stream (no TTFT or ITL then).
    pub fn no_stream(mut self) -> Request {
        self.stream = false;
        self
    }

    /// Extra JSON body fields, as the text of an object: `r#"{"temperature": 0.7}"#`.
    pub fn extra_json(mut self, json: impl Into<String>) -> Request {
        self.extra_json = Some(json.into());
        self
    }

    pub fn tag(mut self, tag: impl Into<String>) -> Request {
        self.tag = Some(tag.into());
        self
    }

    pub fn session(mut self, session: impl Into<String>) -> Request {
        self.session = Some(session.into());
        self
    }

    /// Send at this offset from the phase start, seconds (trace replay).
    pub fn at(mut self, seconds: f64) -> Request {
        self.at = Some(seconds);
        self
    }

    /// Send this long after the previous request's scheduled time, seconds.
    pub fn delay(mut self, seconds: f64) -> Request {
        self.delay = Some(seconds);
        self
    }

    /// The prompt's length in tokens, used when the server reports no usage.
    pub fn input_tokens(mut self, n: u64) -> Request {
        self.input_tokens = Some(n);
        self
    }

    /// An HTTP header of this request only, sent after the run's `--header`s (a router's
    /// session-affinity key, a tenant id); call again for more, at most 64. The name must
    /// be an HTTP token, the value at most 8 KiB with no line break.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Request {
        self.headers.push(Header {
            name: name.into(),
            value: value.into(),
        });
        self
    }

    /// Give up on the request once this many output tokens (> 0) have arrived, as a
    /// reader who stops early does; counted as cancelled, not failed. Combines with
    /// [`Request::cancel_after_ms`]: whichever comes first.
    pub fn cancel_after_tokens(mut self, n: u64) -> Request {
        self.cancel = Some(Cancel {
            after_tokens: Some(n),
            ..self.cancel.unwrap_or(NO_CANCEL)
        });
        self
    }

    /// Give up on the request this many milliseconds (> 0) after it was sent.
    pub fn cancel_after_ms(mut self, ms: f64) -> Request {
        self.cancel = Some(Cancel {
            after_ms: Some(ms),
            ..self.cancel.unwrap_or(NO_CANCEL)
        });
        self
    }

    /// Send to the `--target` at this index (from 0, in the order given) instead of the
    /// next one round-robin.
    pub fn target(mut self, index: u32) -> Request {
        self.target = Some(index);
        self
    }

    /// A tool the model may call (see `sessions::ToolSchema` to build one); call again
    /// for more.
    pub fn tool(mut self, tool: Tool) -> Request {
        self.tools.push(tool);
        self
    }

    /// Tools the model may call, after any given before.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Request {
        self.tools.extend(tools);
        self
    }
}

impl Tool {
    /// A tool whose arguments' JSON Schema is the text `parameters_json` (an object).
    pub fn new(name: &str, description: &str, parameters_json: impl Into<String>) -> Tool {
        Tool {
            name: name.to_string(),
            description: description.to_string(),
            parameters_json: parameters_json.into(),
        }
    }
}

impl Step {
    /// Send `request` `after` seconds after the session's previous step ended (think
    /// time, a tool's latency).
    pub fn send(request: Request, after: f64) -> Step {
        Step::Send(SendStep { request, after })
    }

    /// Open these children now; the session's next step comes once all have ended.
    pub fn fan_out<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Step {
        Step::FanOut(names.into_iter().map(Into::into).collect())
    }
}

/// A request sent at once.
impl From<Request> for Step {
    fn from(r: Request) -> Step {
        Step::send(r, 0.0)
    }
}

const NO_CANCEL: Cancel = Cancel {
    after_tokens: None,
    after_ms: None,
};

impl From<Request> for Next {
    fn from(r: Request) -> Next {
        Next::Request(r)
    }
}

impl Snapshot {
    /// Failed over finished requests so far (0 before any finished).
    pub fn error_rate(&self) -> f64 {
        let finished = self.completed + self.failed;
        if finished == 0 {
            0.0
        } else {
            self.failed as f64 / finished as f64
        }
    }

    /// The server metric `name` at the latest scrape (`"vllm:num_requests_waiting"`);
    /// `None` when the server does not export it or is not scraped.
    pub fn server(&self, name: &str) -> Option<f64> {
        self.server.iter().find(|v| v.name == name).map(|v| v.value)
    }
}

impl PhaseSummary {
    /// The server metric `name` over the phase (its last, mean and max); `None` when the
    /// server does not export it or is not scraped.
    pub fn server(&self, name: &str) -> Option<&ServerStat> {
        self.server.iter().find(|s| s.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_builders_set_the_new_fields() {
        let r = Request::text("hi")
            .max_tokens(8)
            .header("x-tenant", "a")
            .header("x-session", "s1")
            .cancel_after_tokens(5)
            .cancel_after_ms(250.0)
            .target(1);
        let headers: Vec<(&str, &str)> = r
            .headers
            .iter()
            .map(|h| (h.name.as_str(), h.value.as_str()))
            .collect();
        assert_eq!(headers, [("x-tenant", "a"), ("x-session", "s1")]);
        let cancel = r.cancel.expect("a cancel");
        assert_eq!(
            (cancel.after_tokens, cancel.after_ms),
            (Some(5), Some(250.0))
        );
        assert_eq!(r.target, Some(1));
        let plain = Request::text("hi");
        assert!(plain.headers.is_empty() && plain.cancel.is_none() && plain.target.is_none());
        match Request::embeddings(["a", "b"]).prompt {
            Prompt::Inputs(list) => assert_eq!(list, ["a", "b"]),
            other => panic!("expected inputs, got {other:?}"),
        }
    }

    #[test]
    fn server_metrics_read_by_name() {
        let summary = PhaseSummary {
            index: 0,
            name: "p".into(),
            warmup: false,
            request_rate: None,
            max_concurrency: None,
            duration: 1.0,
            completed: 0,
            failed: 0,
            request_throughput: 0.0,
            output_throughput: 0.0,
            goodput: None,
            ttft: crate::Latency {
                mean: 0.0,
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
            },
            tpot: crate::Latency {
                mean: 0.0,
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
            },
            itl: crate::Latency {
                mean: 0.0,
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
            },
            e2el: crate::Latency {
                mean: 0.0,
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
            },
            server: vec![ServerStat {
                name: "vllm:kv_cache_usage_perc".into(),
                last: 0.5,
                mean: 0.4,
                max: 0.9,
            }],
        };
        let kv = summary
            .server("vllm:kv_cache_usage_perc")
            .expect("exported");
        assert_eq!((kv.last, kv.mean, kv.max), (0.5, 0.4, 0.9));
        assert!(summary.server("vllm:num_requests_waiting").is_none());
    }
}
