"""Write benchmark scenarios for `runner` in Python, as WebAssembly components.

The Python counterpart of the Rust SDK (sdk/rust): a `Scenario` base class, builders for
requests and phases, the host's seeded randomness and tokenizer, and helpers for arrival
processes (`gaps`), stop conditions (`stops`) and sessions (`sessions`: chat history, tool
schemas, think times, fan-out and join, a growing shared prefix). A scenario module ends
with `Workload = export(MyScenario)`; componentize-py (see build.sh) turns it into a
component implementing `bench:scenario@0.4.0` (wit/scenario.wit, the contract itself).

    from bench_scenario import *

    class LongPrompts(Scenario):
        @staticmethod
        def describe():
            return (Description("long_prompts", "Long prompts at a steady Poisson rate.")
                    .param("requests", 100, "number of requests")
                    .param("input_tokens", 32000, "prompt length, tokens")
                    .param("rate", 1.0, "offered request rate, req/s")
                    .param("seed", 42, "random seed"))

        def __init__(self):
            self.input_tokens = param_u32("input_tokens")

        def phases(self):
            return [Phase("main").poisson(param_f64("rate")).max_requests(param_u64("requests"))]

        def next_request(self, phase, index):
            return (Request.text(synthetic_text(self.input_tokens))
                    .max_tokens(100).ignore_eos().input_tokens(self.input_tokens))

    Workload = export(LongPrompts)

The sandbox is the same for every language: no network, no environment, no real clock
(time starts at zero), a read-only view of the scenario's own directory, one second per
call (ten for `phases`), 1 GiB of memory. Draw randomness from `random` and its siblings
here, never from Python's `random` module, so the same seed gives the same requests.
"""

from .builders import (
    DONE,
    END,
    WAIT,
    Description,
    Message,
    Phase,
    Request,
    Step,
    error_rate,
    server_stat,
    server_value,
    tool,
    tool_call,
)
from .export import Scenario, ScenarioError, export
from .host import (
    count_tokens,
    decode,
    encode,
    exponential,
    gamma,
    log,
    normal,
    note,
    param,
    param_bool,
    param_f64,
    param_i64,
    param_str,
    param_u32,
    param_u64,
    rand_int,
    random,
    random_token_text,
    read_file,
    synthetic_text,
    uniform,
)
from . import gaps, sessions, stops
from .sessions import Chat, Prefix, ThinkTime, ToolSchema
from .stops import StopWhen

# The version of the WIT package this helper implements; the runner refuses components
# built against an incompatible one.
WIT_VERSION = "0.4.0"

__all__ = [
    "DONE",
    "END",
    "WAIT",
    "WIT_VERSION",
    "Chat",
    "Description",
    "Message",
    "Phase",
    "Prefix",
    "Request",
    "Scenario",
    "ScenarioError",
    "Step",
    "StopWhen",
    "ThinkTime",
    "ToolSchema",
    "count_tokens",
    "decode",
    "encode",
    "error_rate",
    "export",
    "exponential",
    "gamma",
    "gaps",
    "log",
    "normal",
    "note",
    "param",
    "param_bool",
    "param_f64",
    "param_i64",
    "param_str",
    "param_u32",
    "param_u64",
    "rand_int",
    "random",
    "random_token_text",
    "read_file",
    "server_stat",
    "server_value",
    "sessions",
    "stops",
    "synthetic_text",
    "tool",
    "tool_call",
    "uniform",
]
