"""The error a scenario raises to end the run with its own message."""


class ScenarioError(Exception):
    """Raise it from any method of a `Scenario` to end the run with this message (the
    `err` of the WIT function). Any other exception traps the component: the runner
    then quotes the end of the traceback."""
