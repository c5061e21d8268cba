"""A Python scenario that raises, for tests/e2e/languages.rs (which reads the lines of
the `raise` statements from this file). `-p raise=value`: `next_request` calls `rate`,
which raises ValueError("bad rate"); the helper turns it into the call's error.
`-p raise=fatal`: `next_request` raises an exception that is not an `Exception`, which
the helper lets through, so the component traps and the runner reads the traceback
componentize-py prints. Either way the run ends with one error line naming the
exception's type, its message and the line.

Build: sdk/python/build.sh tests/guests/python/python_raises.py python_raises.wasm
"""

from bench_scenario import Description, Phase, Scenario, export, param_str


class Fatal(BaseException):
    pass


def rate(value):
    raise ValueError("bad rate")


class Raises(Scenario):
    @staticmethod
    def describe():
        return Description("python_raises", "Raises from next_request.").param(
            "raise", "value", "value: a ValueError; fatal: a BaseException"
        )

    def __init__(self):
        self.kind = param_str("raise")

    def phases(self):
        return [Phase("main").max_requests(1)]

    def next_request(self, phase, index):
        if self.kind == "fatal":
            raise Fatal("gave up")
        return rate(-1.0)


Workload = export(Raises)
