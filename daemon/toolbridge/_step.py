"""``Step``: what ``bridge.run()`` yields, the handle on one durable run."""

from __future__ import annotations

from toolbridge._commands.services import Services
from toolbridge._commands.snippets import Sandbox
from toolbridge._durable.runstate import RunState
from toolbridge._durable.steps import Steps
from toolbridge._options import ToolOptions

__all__ = ["Step"]


class Step(Steps):
    """What ``bridge.run()`` yields: the run's top-level steps and its sandbox.

    Attributes:
        sandbox: Run commands and snippets whose code can call tools.
    """

    def __init__(self, services: Services, run: RunState) -> None:
        super().__init__(
            services.events,
            run,
            None,
            ToolOptions(),
            functions=services.functions,
            remote=services.journal.functions,
        )
        self.sandbox: Sandbox = Sandbox(services, run, self._claim)
