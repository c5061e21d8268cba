"""The runner's services: parameters, seeded randomness, the run's tokenizer, the
package's files, the log and the run's results. Thin wrappers over the `host` imports of
wit/scenario.wit that speak plain Python values and raise `ScenarioError`."""

from componentize_py_types import Err
from wit_world.imports import host as _host
from wit_world.imports import types as _wit

from .errors import ScenarioError

_U32_MAX = 2**32 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def to_value(v):
    """A Python value as a WIT `value`: bool, int, float or str (bool first: it is an int)."""
    if isinstance(v, bool):
        return _wit.Value_Boolean(v)
    if isinstance(v, int):
        if not _I64_MIN <= v <= _I64_MAX:
            raise ScenarioError(f"integer {v} does not fit 64 bits")
        return _wit.Value_Integer(v)
    if isinstance(v, float):
        return _wit.Value_Number(v)
    if isinstance(v, str):
        return _wit.Value_Text(v)
    raise ScenarioError(f"a value must be a bool, int, float or str, not {type(v).__name__}")


def _call(f, *args):
    """Calls a host function whose WIT result is `result<T, string>`."""
    try:
        return f(*args)
    except Err as e:
        raise ScenarioError(e.value) from None


def param(name):
    """This run's value of a parameter declared in `describe` (bool, int, float or str),
    or None for an unknown name."""
    v = _host.param(name)
    return None if v is None else v.value


_KINDS = {
    _wit.Value_Integer: "an integer",
    _wit.Value_Number: "a number",
    _wit.Value_Boolean: "a boolean",
    _wit.Value_Text: "a string",
}


def _typed(name, want, *cases):
    v = _host.param(name)
    if isinstance(v, cases):
        return v.value
    if v is None:
        raise ScenarioError(f"no parameter `{name}`; declare it in describe()")
    raise ScenarioError(f"parameter `{name}` is {_KINDS[type(v)]}, not {want}")


def param_i64(name):
    """An integer parameter."""
    return _typed(name, "an integer", _wit.Value_Integer)


def param_u64(name):
    """A non-negative integer parameter."""
    v = param_i64(name)
    if v < 0:
        raise ScenarioError(f"parameter `{name}` must be >= 0, got {v}")
    return v


def param_u32(name):
    """A non-negative integer parameter that fits 32 bits (token counts)."""
    v = param_i64(name)
    if not 0 <= v <= _U32_MAX:
        raise ScenarioError(f"parameter `{name}` must be in 0..={_U32_MAX}, got {v}")
    return v


def param_f64(name):
    """A number parameter (an integer parameter is accepted too)."""
    return float(_typed(name, "a number", _wit.Value_Number, _wit.Value_Integer))


def param_bool(name):
    return _typed(name, "a boolean", _wit.Value_Boolean)


def param_str(name):
    return _typed(name, "a string", _wit.Value_Text)


def random():
    """Uniform in [0, 1) from the run's seeded generator."""
    return _host.random()


def rand_int(lo, hi):
    """Uniform integer in [lo, hi]."""
    return _call(_host.rand_int, lo, hi)


def uniform(lo, hi):
    """Uniform in [lo, hi)."""
    return _call(_host.uniform, lo, hi)


def normal(mean, std_dev):
    return _call(_host.normal, mean, std_dev)


def exponential(rate):
    """Exponential with this rate: the gap of a Poisson process, mean 1/rate."""
    return _call(_host.exponential, rate)


def gamma(shape, scale):
    return _call(_host.gamma, shape, scale)


def _count(what, n):
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= _U32_MAX:
        raise ScenarioError(f"{what}({n!r}): need a count in 0..={_U32_MAX}")
    return n


def synthetic_text(n):
    """Readable text of exactly `n` tokens under the run's tokenizer."""
    return _host.synthetic_text(_count("synthetic_text", n))


def random_token_text(n):
    """The text of `n` random token ids (vLLM's "random" dataset)."""
    return _host.random_token_text(_count("random_token_text", n))


def count_tokens(text):
    return _host.count_tokens(text)


def encode(text):
    return _host.encode(text)


def decode(ids):
    return _call(_host.decode, list(ids))


def read_file(path):
    """A file of the scenario's own directory, by a path relative to it, as text."""
    return _call(_host.read_file, path)


def log(message):
    """A line on the runner's stderr, as `[scenario-name] message`."""
    _host.log(str(message))


def note(key, value):
    """Reports a result of the run (the rate a search found): shown in the report's
    "Scenario Result" block and stored in result.json under `scenario_result`."""
    _call(_host.note, key, to_value(value))
