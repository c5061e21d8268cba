"""Gaps between requests for phases with custom arrivals (`Phase.custom`), drawn from the
run's seeded generator: return one of these from `Scenario.arrival`, or mix them (an
on/off process switches between two Poisson rates)."""

from .errors import ScenarioError
from .host import exponential, gamma as _gamma


def poisson(rate):
    """A Poisson process at `rate` requests per second: exponential gaps, mean 1/rate."""
    return exponential(rate)


def gamma(rate, burstiness):
    """Gamma gaps with mean 1/rate and shape `burstiness` (1 is Poisson, larger is more
    regular), as vLLM's `--burstiness`."""
    if not (rate > 0 and burstiness > 0):
        raise ScenarioError(f"gaps.gamma({rate}, {burstiness}): rate and burstiness must be > 0")
    return _gamma(burstiness, 1.0 / (rate * burstiness))


def constant(rate):
    """One request every 1/rate seconds."""
    if not (0 < rate < float("inf")):
        raise ScenarioError(f"gaps.constant({rate}): rate must be > 0")
    return 1.0 / rate
