"""The `Scenario` base class, and `export`, which turns a subclass into the `Workload`
class componentize-py looks for: it builds the scenario's state on the first call after
`describe` (when the run's parameters are known), converts the builders to WIT records,
and turns `ScenarioError` into the WIT function's `err`, and any other exception into an
`err` naming its type, message and line."""

import os
import sys

from componentize_py_types import Err
from wit_world.imports import types as _wit

from .builders import END, Phase, Request, Step
from .errors import ScenarioError


class Scenario:
    """A benchmark scenario. The runner calls `describe` first (parameters are not known
    yet), then builds the scenario (`__init__`) once the `-p` overrides are resolved,
    then `phases`, then for each phase `next_request(phase, 0)`, `next_request(phase, 1)`,
    … ahead of send time. Calls come one at a time; keep your state on `self`."""

    # Set to True to have the runner call `on_response` (it then keeps every answer's
    # text), poll `stop` during each phase, or call `next_phase` after the phases given.
    ON_RESPONSE = False
    STOP = False
    NEXT_PHASE = False
    # Set to True to have the runner call `session_step` for the phases with `sessions`.
    SESSIONS = False

    @staticmethod
    def describe():
        """A `Description`: name, description and parameters with defaults."""
        raise NotImplementedError("a scenario must define describe()")

    def phases(self):
        """The phases of the run, in order: a list of `Phase`."""
        raise NotImplementedError("a scenario must define phases()")

    def next_request(self, phase, index):
        """Request `index` of `phase` (both from 0): a `Request`, `DONE` when the phase's
        dataset is exhausted, or `WAIT` to be asked again after the next response. A
        scenario whose phases all have sessions may leave it out."""
        raise NotImplementedError("a scenario with a phase without sessions must define next_request()")

    def arrival(self, phase, index):
        """For `Phase.custom` arrivals: seconds after the previous request's scheduled
        time (see `gaps`)."""
        return 0.0

    def on_response(self, outcome):
        """A finished request (only when ON_RESPONSE is True)."""

    def stop(self, snapshot):
        """Whether to end the current phase now (only when STOP is True)."""
        return False

    def next_phase(self, history):
        """The next `Phase`, from every finished phase's summary, or None to end the run
        (only when NEXT_PHASE is True)."""
        return None

    def session_step(self, state):
        """The next step of a session (only when SESSIONS is True): called when it
        starts (`state.step == 0`), after each of its requests ends (`state.last`), and
        once the children of a fan-out have all ended (`state.joined`). Return
        `Step.send(request, after)` (a `Request` alone is sent at once),
        `Step.fan_out(names)` or `END`. The random functions draw from the session's own
        stream here. See `sessions` for the helpers."""
        raise NotImplementedError("a scenario with sessions must define session_step()")


def _next(value):
    if isinstance(value, Request):
        return value.wit()
    if isinstance(value, (_wit.Next_Request, _wit.Next_Done, _wit.Next_Wait)):
        return value
    if isinstance(value, _wit.Request):
        return _wit.Next_Request(value)
    raise ScenarioError(f"next_request returned {type(value).__name__}: want a Request, DONE or WAIT")


def _step(value):
    if value is None:
        return END
    if isinstance(value, Request):
        return Step.send(value)
    if isinstance(value, (_wit.Step_Send, _wit.Step_FanOut, _wit.Step_End)):
        return value
    raise ScenarioError(
        f"session_step returned {type(value).__name__}: want Step.send(...), Step.fan_out(...) or END"
    )


def _phase(value):
    if isinstance(value, Phase):
        return value.wit()
    if isinstance(value, _wit.Phase):
        return value
    raise ScenarioError(f"want a Phase, got {type(value).__name__}")


# Where the helper's files are: a frame there is not the scenario's own line.
_HELPER = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _own_frame(tb):
    """The innermost frame of the traceback `tb` in the scenario's own code (not in this
    helper, not in Python's library), else the innermost frame."""
    own = last = None
    while tb is not None:
        last = tb
        file = tb.tb_frame.f_code.co_filename
        if not file.startswith((_HELPER, sys.prefix + os.sep, "<")):
            own = tb
        tb = tb.tb_next
    return own or last


def _where(path):
    """componentize-py mounts the directories of its `-p` options at /0, /1, …: the
    scenario's files read as they do beside it without that prefix."""
    parts = path.split("/", 2)
    if len(parts) == 3 and parts[0] == "" and parts[1].isdigit():
        return parts[2]
    return path


def _quote(e):
    """`ValueError: bad rate (at scenario.py:13, in rate)`, on one line; the type named
    as Python's own traceback names it (`json.decoder.JSONDecodeError`)."""
    kind = type(e)
    name = kind.__qualname__
    if kind.__module__ not in ("builtins", "__main__"):
        name = f"{kind.__module__}.{name}"
    text = f"{name}: {e}" if str(e) else name
    tb = _own_frame(e.__traceback__)
    if tb is not None:
        code = tb.tb_frame.f_code
        text += f" (at {_where(code.co_filename)}:{tb.tb_lineno}, in {code.co_name})"
    return " / ".join(line for line in text.splitlines() if line.strip())


def export(cls):
    """The `Workload` class for scenario class `cls`: `Workload = export(MyScenario)`."""
    state = []

    def run(f):
        try:
            if not state:
                state.append(cls())
            return f(state[0])
        except ScenarioError as e:
            raise Err(str(e)) from None
        except MemoryError:
            # Past the sandbox's memory cap: the trap lets the runner say so.
            raise
        except Exception as e:
            # Uncaught, it would trap the component and the runner would see only
            # componentize-py's "unexpected exception"; as the `err` it keeps its type,
            # message and line.
            raise Err(_quote(e)) from None

    class Workload:
        def describe(self):
            hooks = _wit.Hooks(0)
            for on, flag in [
                (cls.ON_RESPONSE, _wit.Hooks.ON_RESPONSE),
                (cls.STOP, _wit.Hooks.STOP),
                (cls.NEXT_PHASE, _wit.Hooks.NEXT_PHASE),
                (cls.SESSIONS, _wit.Hooks.SESSIONS),
            ]:
                if on:
                    hooks |= flag
            return cls.describe().wit(hooks)

        def phases(self):
            return run(lambda s: [_phase(p) for p in s.phases()])

        def next_request(self, phase, index):
            return run(lambda s: _next(s.next_request(phase, index)))

        def arrival(self, phase, index):
            return run(lambda s: float(s.arrival(phase, index)))

        def on_response(self, outcome):
            run(lambda s: s.on_response(outcome))

        def stop(self, snapshot):
            return run(lambda s: bool(s.stop(snapshot)))

        def next_phase(self, history):
            def step(s):
                p = s.next_phase(history)
                return None if p is None else _phase(p)

            return run(step)

        def session_step(self, state):
            return run(lambda s: _step(s.session_step(state)))

    return Workload

