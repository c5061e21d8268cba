"""Common stop conditions for `Scenario.stop`: build one in `__init__`, then return
`self.stop_when.check(snapshot)`.

    stop = StopWhen().p99_ttft_above_ms(500).error_rate_above(0.05)
"""

from .builders import error_rate, server_value


class StopWhen:
    """A set of conditions, any of which ends the phase. Latency and error-rate conditions
    are judged only once `min_completed` requests have finished (10 by default), so one
    slow first request does not end a phase."""

    def __init__(self):
        self._p99_ttft_ms = None
        self._p99_e2el_ms = None
        self._error_rate = None
        self._failures = None
        self._seconds = None
        self._output_tokens = None
        self._server = []
        self._min_completed = 10

    def p99_ttft_above_ms(self, ms):
        self._p99_ttft_ms = ms
        return self

    def p99_e2el_above_ms(self, ms):
        self._p99_e2el_ms = ms
        return self

    def error_rate_above(self, rate):
        """When more than this share of finished requests failed (0.05 = 5 %)."""
        self._error_rate = rate
        return self

    def failures_at_least(self, n):
        self._failures = n
        return self

    def after_seconds(self, seconds):
        self._seconds = seconds
        return self

    def after_output_tokens(self, n):
        self._output_tokens = n
        return self

    def server_above(self, name, limit):
        """When the server metric `name` passes `limit` at a scrape (KV-cache use,
        `"vllm:kv_cache_usage_perc"` above 0.95). A metric the server does not export
        never fires."""
        self._server.append((name, limit))
        return self

    def min_completed(self, n):
        """Requests that must finish before latency and error-rate conditions count."""
        self._min_completed = n
        return self

    def reason(self, s):
        """Why the phase should stop now, or None."""
        if self._seconds is not None and s.elapsed >= self._seconds:
            return f"ran {s.elapsed:.1f} s (limit {self._seconds} s)"
        if self._output_tokens is not None and s.output_tokens >= self._output_tokens:
            return f"{s.output_tokens} output tokens (limit {self._output_tokens})"
        if self._failures is not None and s.failed >= self._failures:
            return f"{s.failed} failed requests (limit {self._failures})"
        for name, limit in self._server:
            value = server_value(s, name)
            if value is not None and value > limit:
                return f"server {name} {value} above {limit}"
        if s.completed + s.failed < self._min_completed:
            return None
        rate = error_rate(s)
        if self._error_rate is not None and rate > self._error_rate:
            return f"error rate {rate:.3f} above {self._error_rate}"
        if self._p99_ttft_ms is not None and s.ttft_p99_ms > self._p99_ttft_ms:
            return f"p99 TTFT {s.ttft_p99_ms:.1f} ms above {self._p99_ttft_ms} ms"
        if self._p99_e2el_ms is not None and s.e2el_p99_ms > self._p99_e2el_ms:
            return f"p99 E2EL {s.e2el_p99_ms:.1f} ms above {self._p99_e2el_ms} ms"
        return None

    def check(self, s):
        """Whether any condition holds."""
        return self.reason(s) is not None
