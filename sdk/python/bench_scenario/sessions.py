"""Helpers for scenarios of sessions (`Scenario.session_step`): a chat history with tool
turns (`Chat`), tool schemas (`ToolSchema`), think times and tool latencies drawn from
named distributions (`ThinkTime`), fan-out and join (`children` and the state helpers),
and a context that grows by blocks of synthetic tokens (`Prefix`). The same helpers as
the Rust SDK's `sessions` module, drawing through the host's random functions in the same
order, so twins in either language send the same requests."""

import math

from .builders import Message, Request
from .builders import tool as _tool
from .errors import ScenarioError
from .host import exponential, normal, synthetic_text, uniform


class Chat:
    """A conversation's messages, in order, with the turns an agent adds: the user's, the
    assistant's answers and tool calls, and the tools' results. Each method returns the
    chat, so calls chain."""

    def __init__(self):
        self.messages = []

    def push(self, message):
        self.messages.append(message)
        return self

    def system(self, content):
        return self.push(Message.system(content))

    def user(self, content):
        return self.push(Message.user(content))

    def assistant(self, content):
        return self.push(Message.assistant(content))

    def assistant_tool_calls(self, calls):
        """An assistant turn that called these tools (empty content)."""
        return self.push(Message.assistant_tool_calls(calls))

    def tool_result(self, call_id, content):
        """The result of the tool call `call_id`."""
        return self.push(Message.tool_result(call_id, content))

    def answer(self, outcome):
        """The model's turn from a finished request: its text, and the tool calls it made
        (Rhai's `assistant_turn(outcome)`)."""
        return self.push(Message.assistant_turn(outcome))

    def __len__(self):
        return len(self.messages)

    def request(self):
        """A chat request of the whole history so far (set its `max_tokens`)."""
        return Request.chat(list(self.messages))


def tool(name, description, properties):
    """A tool whose arguments are an object of these properties (a dict of name to JSON
    type, "string", "integer", ...), all required: Rhai's `tool(name, description, #{
    path: "string" })`, which lists them in name order, as this does."""
    schema = ToolSchema(name, description)
    for prop, json_type in properties.items():
        schema.param(prop, json_type)
    return schema.build()


class ToolSchema:
    """A tool's JSON Schema, built parameter by parameter: `{"type": "object",
    "properties": {...}, "required": [...]}`. `required` lists the names in name order, as
    Rhai's `tool` does, so a twin sends the same bytes."""

    def __init__(self, name, description):
        self.name = name
        self.description = description
        self._properties = {}
        self._required = []

    def param(self, name, json_type):
        """A required parameter of a JSON type ("string", "integer", "number", "boolean")."""
        return self.schema(name, {"type": json_type}, True)

    def described(self, name, json_type, description):
        """A required parameter of a JSON type, with a description for the model."""
        return self.schema(name, {"type": json_type, "description": description}, True)

    def optional(self, name, json_type):
        """A parameter the model may leave out."""
        return self.schema(name, {"type": json_type}, False)

    def schema(self, name, schema, required):
        """A parameter whose schema is this dict."""
        self._properties[name] = schema
        if required:
            self._required.append(name)
        return self

    def string(self, name):
        return self.param(name, "string")

    def integer(self, name):
        return self.param(name, "integer")

    def parameters(self):
        """The schema, as a dict."""
        return {
            "type": "object",
            "properties": dict(self._properties),
            "required": sorted(self._required),
        }

    def build(self):
        """The tool, to pass to `Request.tool`."""
        return _tool(self.name, self.description, self.parameters())


class ThinkTime:
    """A distribution of seconds (think time, a tool's latency), drawn through the host's
    random functions so the seed fixes every draw, as Rhai's `draw(#{ dist: ... })` draws:
    `ThinkTime.named("lognormal", median, sigma).draw()`."""

    KINDS = ("constant", "uniform", "exponential", "lognormal")

    def __init__(self, kind, a, b=0.0):
        if kind not in self.KINDS:
            raise ScenarioError(
                f"unknown distribution `{kind}`: constant, uniform, exponential or lognormal"
            )
        self.kind, self.a, self.b = kind, float(a), float(b)

    @staticmethod
    def named(kind, a, b=0.0):
        """`constant` (a = seconds), `uniform` (a = lo, b = hi), `exponential` (a =
        mean), `lognormal` (a = median, b = sigma of the underlying normal)."""
        return ThinkTime(kind, a, b)

    def draw(self):
        """One draw, seconds: constant draws nothing, uniform one `uniform(lo, hi)`,
        exponential one `exponential(1 / mean)`, lognormal `exp(normal(ln median,
        sigma))`."""
        if self.kind == "constant":
            return self.a
        if self.kind == "uniform":
            return uniform(self.a, self.b)
        if self.kind == "exponential":
            if not (self.a > 0 and math.isfinite(self.a)):
                raise ScenarioError(f"exponential think time: the mean must be > 0, got {self.a}")
            return exponential(1.0 / self.a)
        if not (self.a > 0 and math.isfinite(self.a)):
            raise ScenarioError(f"lognormal think time: the median must be > 0, got {self.a}")
        return math.exp(normal(math.log(self.a), self.b))

    def draw_within(self, lo, hi):
        """One draw, clamped to [lo, hi]."""
        return min(max(self.draw(), lo), hi)


def children(prefix, n):
    """`n` child names for a fan-out: `prefix-1` ... `prefix-n`."""
    return [f"{prefix}-{i}" for i in range(1, n + 1)]


def is_child(state):
    """A child of a fan-out (its id has a parent part)."""
    return "/" in state.id


def name(state):
    """The name the fan-out gave this session (`review-2` of `7/review-2`), or the root
    session's number."""
    return state.id.rsplit("/", 1)[-1]


def parent(state):
    """The parent's id (`7` of `7/review-2`); None for a root session."""
    return state.id.rsplit("/", 1)[0] if "/" in state.id else None


def root(state):
    """The root session's id (`7` of `7/a/b`)."""
    return state.id.split("/", 1)[0]


class Prefix:
    """A context shared across turns (or sessions) that grows by blocks of synthetic text;
    blocks are joined by a newline."""

    def __init__(self):
        self._blocks = []
        self.tokens = 0

    def grow(self, n):
        """Appends a block of `n` synthetic tokens (one `synthetic_text(n)`) and returns
        it."""
        block = synthetic_text(n)
        self._blocks.append(block)
        self.tokens += n
        return block

    def text(self):
        """The whole context so far."""
        return "\n".join(self._blocks)
