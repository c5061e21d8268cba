//! Constructors and builder methods for the WIT records, so a scenario reads as
//! `Request::text(p).max_tokens(100).ignore_eos()` rather than a struct literal.

use crate::{
    Arrival, Description, GammaArrival, Hooks, Message, Next, ParamSpec, Phase, Prompt, Request,
    Snapshot, Value,
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
}

impl Message {
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.to_string(),
            content: content.into(),
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
}

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
}
