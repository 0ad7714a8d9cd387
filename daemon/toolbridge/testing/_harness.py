"""``ToolHarness``: tools called as a sandbox would, over a real journal, without gRPC."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from toolbridge._calls.hub import ApprovalHub
from toolbridge._calls.scope import CommandScope
from toolbridge._durable.eventbus import EventBus
from toolbridge._durable.runs import Runs
from toolbridge._durable.runstate import RunState
from toolbridge._durable.steps import Steps, nested_steps
from toolbridge._errors import ToolbridgeError
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._options import ToolOptions
from toolbridge._records import StepRecord
from toolbridge._tools.convert import to_tools
from toolbridge.testing._call import SandboxCall, call_as_sandbox, encode_call

__all__ = ["ToolHarness"]


class ToolHarness:
    """Calls tools as a sandbox would, with no process and no gRPC, over a real journal.

    Use it as an async context manager. Each call takes the daemon's own path from the
    request bytes to the journaled outcome; calls are steps of one run (``run_id``), made by
    one command (``command``) the way its code would make them.

    Args:
        tools: The tools the command may call, by name (functions or ``tool.step(...)``).
        journal: The SQLite file to record in; a fresh one in a temp dir (removed on exit)
            when omitted.
        run_id: The run the calls belong to.
        command: The key of the command making the calls, or ``None`` for calls the host
            makes itself (``Bridge.call_tool``): they are then top-level steps of the run.
        options: Timeout, attempts, limits (``ToolOptions()`` by default).
    """

    def __init__(
        self,
        tools: Mapping[str, object],
        *,
        journal: str | os.PathLike[str] | None = None,
        run_id: str = "test-run",
        command: str | None = "command",
        options: ToolOptions | None = None,
    ) -> None:
        self._tools = to_tools(tools)
        self._path = None if journal is None else Path(journal)
        self._temp_dir: Path | None = None
        self.run_id = run_id
        self._command = command or ""
        self.options = options or ToolOptions()
        self._journal: SQLiteJournal | None = None
        self._run: RunState | None = None
        self._scope: CommandScope | None = None
        self._runs: Runs | None = None
        self._events: EventBus | None = None
        self._background: set[asyncio.Future[Any]] = set()

    @property
    def journal_path(self) -> Path:
        """The SQLite file the calls are recorded in."""
        if self._path is None:
            raise ToolbridgeError("the harness is not open: use `async with ToolHarness(...)`")
        return self._path

    @property
    def step(self) -> Steps:
        """The run's top-level durable steps (``step.run(...)`` and friends), as a run has."""
        run, events = self._open()
        return Steps(events, run, None, self.options)

    async def __aenter__(self) -> ToolHarness:
        if self._path is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="toolbridge-test-"))
            self._path = self._temp_dir / "journal.db"
        await self._enter()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._leave()
        finally:
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)
                self._temp_dir = self._path = None

    async def _enter(self) -> None:
        journal = SQLiteJournal(self.journal_path)
        await journal.open()
        self._journal = journal
        self._events = EventBus(journal)
        self._approvals = ApprovalHub(journal)
        self._runs = Runs(journal, self._background)
        self._run = await self._runs.enter(self.run_id)
        # A command's calls share one scope (its budget, its key counter), as they share a token.
        self._scope = self._new_scope(self._run, self._events) if self._command else None

    def _new_scope(self, run: RunState, events: EventBus) -> CommandScope:
        return CommandScope(
            run=run,
            command_key=self._command,
            tools=dict(self._tools),
            options=self.options,
            steps_factory=nested_steps(events),
            approvals=self._approvals,
        )

    async def _leave(self) -> None:
        # As a bridge closing: calls still in flight are abandoned and stay `running`.
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        try:
            if self._runs is not None and self._run is not None:
                await self._runs.leave(self._run, None)
        finally:
            if self._journal is not None:
                await self._journal.close()
            self._journal = self._run = self._scope = self._runs = self._events = None

    def _open(self) -> tuple[RunState, EventBus]:
        if self._run is None or self._events is None:
            raise ToolbridgeError("the harness is not open: use `async with ToolHarness(...)`")
        return self._run, self._events

    async def restart(self) -> None:
        """Stand for a host that stopped and started again on the same journal.

        Calls still running are abandoned (left ``running`` in the journal, as a killed
        host leaves them), the run's entry is left and the journal closed, as a closing
        bridge does; then the journal is opened again and the run entered afresh from what
        the journal holds: calls made again are replayed from it.
        """
        self._open()
        await self._leave()
        await self._enter()

    async def call(self, name: str, *args: Any, **kwargs: Any) -> SandboxCall:
        """Call ``name(*args, **kwargs)`` as the sandbox's ``await tools.name(...)`` does."""
        positional, named = encode_call(args, kwargs)
        return await self.call_json(name, positional, named)

    async def call_json(
        self, name: str, positional_json: bytes = b"", named_json: bytes = b""
    ) -> SandboxCall:
        """Call ``name`` with the request's argument bytes exactly as given (malformed or not)."""
        run, events = self._open()
        scope = self._scope
        if scope is None:
            # The host makes each call on its own, as Bridge.call_tool does: two identical
            # calls at once have one step key, and run once.
            scope = self._new_scope(run, events)
        return await call_as_sandbox(scope, name, positional_json, named_json)

    async def recorded(self) -> list[StepRecord]:
        """Every step of the run as the journal holds it now, in the order they began."""
        self._open()
        assert self._journal is not None
        return await self._journal.load_steps(self.run_id)
