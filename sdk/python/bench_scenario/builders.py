"""Builders for the WIT records, so a scenario reads as
`Request.text(p).max_tokens(100).ignore_eos()` rather than a dataclass with ten fields.
Each builder's `wit()` gives the record the component returns."""

import json

from wit_world.imports import types as _wit

from .host import to_value

# What `next_request` returns when it has nothing to send: the phase's dataset is
# exhausted (DONE), or the next request needs an answer still in flight (WAIT; only with
# the on-response hook).
DONE = _wit.Next_Done()
WAIT = _wit.Next_Wait()


class Description:
    """Name, description, parameters and thresholds of a scenario."""

    def __init__(self, name, description):
        self._name = name
        self._description = description
        self._params = []
        self._thresholds = []

    def param(self, name, default, help):
        """Declares a parameter. The default's type is the parameter's type: `-p NAME=VALUE`
        must parse as it (`100` an integer, `1.0` a number, `True`, `"text"`)."""
        self._params.append(_wit.ParamSpec(name, to_value(default), help))
        return self

    def threshold(self, check):
        """A pass/fail check at the end of the run, as `--threshold` takes it:
        `"p99_ttft_ms<500"`. A failed one makes the run exit with 99."""
        self._thresholds.append(check)
        return self

    def wit(self, hooks):
        return _wit.Description(
            self._name, self._description, list(self._params), hooks, list(self._thresholds)
        )


class Phase:
    """A phase whose requests all start at once, with no limits; chain the methods below."""

    def __init__(self, name):
        self._name = name
        self._arrival = _wit.Arrival_Burst()
        self._max_concurrency = None
        self._max_requests = None
        self._max_duration = None
        self._warmup = False
        self._sessions = None

    def burst(self):
        """All requests at once."""
        self._arrival = _wit.Arrival_Burst()
        return self

    def poisson(self, rate):
        """Poisson arrivals at `rate` requests per second."""
        self._arrival = _wit.Arrival_Poisson(float(rate))
        return self

    def gamma(self, rate, burstiness):
        """Gamma gaps: mean 1/rate, shape `burstiness` (1 = Poisson)."""
        self._arrival = _wit.Arrival_Gamma(_wit.GammaArrival(float(rate), float(burstiness)))
        return self

    def constant(self, rate):
        """One request every 1/rate seconds."""
        self._arrival = _wit.Arrival_Constant(float(rate))
        return self

    def closed(self, concurrency):
        """Closed loop: keep `concurrency` requests in flight."""
        self._arrival = _wit.Arrival_Closed(concurrency)
        return self

    def custom(self):
        """Gaps from `Scenario.arrival` (see `gaps`)."""
        self._arrival = _wit.Arrival_Custom()
        return self

    def max_requests(self, n):
        self._max_requests = n
        return self

    def max_concurrency(self, n):
        self._max_concurrency = n
        return self

    def max_duration(self, seconds):
        """Stop sending after this many seconds; in-flight requests drain."""
        self._max_duration = float(seconds)
        return self

    def warmup(self):
        """Send and record, but leave the phase out of the statistics."""
        self._warmup = True
        return self

    def sessions(self, n):
        """A phase of `n` root sessions driven by `Scenario.session_step` (set
        `SESSIONS = True`); the arrival process times their starts, and a closed loop keeps
        that many sessions open at once."""
        self._sessions = n
        return self

    def wit(self):
        return _wit.Phase(
            self._name,
            self._arrival,
            self._max_concurrency,
            self._max_requests,
            self._max_duration,
            self._warmup,
            self._sessions,
        )


class Message:
    """Chat messages, as the WIT record: `Message.user("hi")`."""

    @staticmethod
    def new(role, content):
        return _wit.Message(role, content, [], None)

    @staticmethod
    def system(content):
        return Message.new("system", content)

    @staticmethod
    def user(content):
        return Message.new("user", content)

    @staticmethod
    def assistant(content):
        return Message.new("assistant", content)

    @staticmethod
    def assistant_tool_calls(calls):
        """An assistant turn that called tools (`ToolCall` records, as an outcome's
        `tool_calls` holds them), sent with empty content."""
        return _wit.Message("assistant", "", list(calls), None)

    @staticmethod
    def assistant_turn(outcome):
        """The model's answer as the turn that continues a history: its text, and its tool
        calls when it made any (Rhai's `assistant_turn(outcome)`)."""
        return _wit.Message("assistant", outcome.text, list(outcome.tool_calls), None)

    @staticmethod
    def tool_result(call_id, content):
        """The result of the tool call `call_id`, sent as a `tool` message."""
        return _wit.Message("tool", content, [], call_id)


def tool_call(id, name, arguments):
    """A tool call record (`id`, `name`, `arguments` as JSON text)."""
    return _wit.ToolCall(id, name, arguments)


def tool(name, description, parameters):
    """A tool the model may call: `parameters` its arguments' JSON Schema, a dict or
    the text of a JSON object (see `sessions.ToolSchema`)."""
    text = parameters if isinstance(parameters, str) else json.dumps(parameters)
    return _wit.Tool(name, description, text)


class Request:
    """One request; start with `Request.text`, `Request.tokens` or `Request.chat`, and set
    `max_tokens` (the runner refuses a request without it)."""

    def __init__(self, prompt):
        self._r = _wit.Request(
            prompt=prompt,
            max_tokens=0,
            ignore_eos=False,
            stream=True,
            extra_json=None,
            tag=None,
            session=None,
            at=None,
            delay=None,
            input_tokens=None,
            headers=[],
            cancel=None,
            target=None,
            tools=[],
        )

    @staticmethod
    def text(prompt):
        """A text prompt (the completions endpoint, or one user message with `--api chat`)."""
        return Request(_wit.Prompt_Text(prompt))

    @staticmethod
    def tokens(ids):
        """A prompt of token ids of the run's tokenizer."""
        return Request(_wit.Prompt_Tokens(list(ids)))

    @staticmethod
    def chat(messages):
        """A conversation, sent to the chat endpoint."""
        return Request(_wit.Prompt_Messages(list(messages)))

    @staticmethod
    def embeddings(inputs):
        """A batch of texts to embed in one request (`--api embeddings`): at least one, at
        most 2048. Set `max_tokens` all the same (1 will do)."""
        return Request(_wit.Prompt_Inputs([str(i) for i in inputs]))

    def max_tokens(self, n):
        self._r.max_tokens = n
        return self

    def ignore_eos(self):
        """Generate exactly `max_tokens` (the server ignores end-of-sequence)."""
        self._r.ignore_eos = True
        return self

    def no_stream(self):
        """Ask for the whole answer at once instead of a stream (no TTFT or ITL then)."""
        self._r.stream = False
        return self

    def extra_json(self, fields):
        """Extra JSON body fields: a dict, or the text of a JSON object."""
        self._r.extra_json = fields if isinstance(fields, str) else json.dumps(fields)
        return self

    def tag(self, tag):
        self._r.tag = tag
        return self

    def session(self, session):
        self._r.session = session
        return self

    def at(self, seconds):
        """Send at this offset from the phase start, seconds (trace replay)."""
        self._r.at = float(seconds)
        return self

    def delay(self, seconds):
        """Send this long after the previous request's scheduled time, seconds."""
        self._r.delay = float(seconds)
        return self

    def input_tokens(self, n):
        """The prompt's length in tokens, used when the server reports no usage."""
        self._r.input_tokens = n
        return self

    def header(self, name, value):
        """An HTTP header of this request only, sent after the run's `--header`s (a
        router's session-affinity key, a tenant id); call again for more, at most 64."""
        self._r.headers.append(_wit.Header(name, value))
        return self

    def cancel_after_tokens(self, n):
        """Give up on the request once `n` (> 0) output tokens have arrived; counted as
        cancelled, not failed. With `cancel_after_ms`: whichever comes first."""
        after_ms = self._r.cancel.after_ms if self._r.cancel else None
        self._r.cancel = _wit.Cancel(n, after_ms)
        return self

    def cancel_after_ms(self, ms):
        """Give up on the request this many milliseconds (> 0) after it was sent."""
        after_tokens = self._r.cancel.after_tokens if self._r.cancel else None
        self._r.cancel = _wit.Cancel(after_tokens, float(ms))
        return self

    def target(self, index):
        """Send to the `--target` at this index (from 0, in the order given) instead of
        the next one round-robin."""
        self._r.target = index
        return self

    def tool(self, t):
        """A tool the model may call (`tool(...)` or `ToolSchema(...).build()`); call
        again for more."""
        self._r.tools.append(t)
        return self

    def tools(self, ts):
        """Tools the model may call, after any given before."""
        self._r.tools.extend(ts)
        return self

    def record(self):
        """The WIT `request` record."""
        return self._r

    def wit(self):
        return _wit.Next_Request(self._r)


END = _wit.Step_End()


class Step:
    """What `session_step` returns: `Step.send(request, after)`, `Step.fan_out(names)`
    or `END` (a `Request` alone is sent at once)."""

    @staticmethod
    def send(request, after=0.0):
        """Send `request` `after` seconds after the session's previous step ended (think
        time, a tool's latency)."""
        r = request.record() if isinstance(request, Request) else request
        return _wit.Step_Send(_wit.SendStep(r, float(after)))

    @staticmethod
    def fan_out(names):
        """Open these children now; the session's next step comes once all have ended."""
        return _wit.Step_FanOut([str(n) for n in names])


def error_rate(snapshot):
    """Failed over finished requests so far in a `stop` snapshot (0 before any finished)."""
    finished = snapshot.completed + snapshot.failed
    return snapshot.failed / finished if finished else 0.0


def server_value(snapshot, name):
    """The server metric `name` at the latest scrape in a `stop` snapshot
    (`"vllm:num_requests_waiting"`), or None when the server does not export it or is not
    scraped."""
    return next((v.value for v in snapshot.server if v.name == name), None)


def server_stat(summary, name):
    """The server metric `name` over a finished phase of `next_phase`'s history (a record
    of `last`, `mean` and `max`), or None."""
    return next((s for s in summary.server if s.name == name), None)
