"""The error a scenario raises to end the run with its own message."""


class ScenarioError(Exception):
    """Raise it from any method of a `Scenario` to end the run with this message (the
    `err` of the WIT function). Any other exception ends the run too, with its type,
    message and line: `ValueError: bad rate (at scenario.py:13, in rate)`."""
