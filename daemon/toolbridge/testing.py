"""Fakes for testing tools and durable code fast: no sandbox process, no gRPC.

Two fakes, each standing in for one real part and nothing else:

- :class:`ToolHarness` calls a tool the way a sandbox does: the arguments as the exact JSON
  bytes the ``inngest_tools`` client sends, through the daemon's real call path (validation,
  hooks, attempts, replay), over a real SQLite journal in a temp dir. Only the gRPC hop is
  left out. :meth:`ToolHarness.restart` stands for a host that restarted, so replay can be
  tested too.
- :class:`FakeLauncher` is a :class:`~toolbridge._sandbox.launcher.Launcher` that runs no
  process: give it to ``Bridge(sandbox=...)`` and ``step.sandbox.commands.run(...)`` runs an
  async script of yours instead, which may call the command's tools as its code would.

Example::

    from toolbridge.testing import ToolHarness

    async def test_refund() -> None:
        async with ToolHarness({"refund": refund}) as harness:
            call = await harness.call("refund", order_id="o-1")
            assert call.result == {"refunded": True}
            await harness.restart()
            again = await harness.call("refund", order_id="o-1")
            assert again.replayed and again.result == call.result
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import traceback
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from toolbridge._calls.call import CallOutcome, call_tool
from toolbridge._calls.host import _REFUSAL_TYPES
from toolbridge._calls.scope import CommandScope
from toolbridge._durable.eventbus import EventBus
from toolbridge._durable.runs import Runs
from toolbridge._durable.runstate import RunState
from toolbridge._durable.steps import Steps, nested_steps
from toolbridge._errors import ProtocolError, ToolbridgeError, ToolError
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._options import ToolOptions
from toolbridge._records import StepRecord
from toolbridge._sandbox.launcher import LaunchSpec, ProcessOutcome, StopSignal
from toolbridge._tools.tool import to_tools

if TYPE_CHECKING:
    from toolbridge._bridge import Bridge

__all__ = ["FakeLauncher", "FakeSandbox", "SandboxCall", "ToolHarness", "encode_call"]


def encode_call(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """The bytes the sandbox client sends for ``tools.name(*args, **kwargs)``.

    A JSON array of the positional arguments and a JSON object of the named ones, each empty
    when there is none, encoded as ``inngest_tools`` encodes them (compact, UTF-8, no NaN).

    Raises:
        ToolError: ``InvalidArgument`` for values that are not JSON, as the client raises.
    """

    def encode(value: Any) -> bytes:
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            raise ToolError(f"arguments must be JSON values: {exc}", type="InvalidArgument") from None

    return (encode(list(args)) if args else b"", encode(dict(kwargs)) if kwargs else b"")


@dataclass(frozen=True)
class SandboxCall:
    """What the sandbox received for one call.

    Attributes:
        step_key: The call's step in the run (empty for a call refused before it had one).
        result_json: The result as the sandbox received it, when the call succeeded.
        error: The error the sandbox's client raises, when it failed (refusals included:
            ``ToolNotFound``, ``InvalidArgument``, ``RequestTooLarge``, ``Unauthenticated``).
        replayed: True when the outcome came from the journal without running the tool.
    """

    step_key: str
    result_json: str | None = None
    error: ToolError | None = None
    replayed: bool = False

    @property
    def result(self) -> Any:
        """The result as JSON data, as ``await tools.name(...)`` returns it.

        Raises:
            ToolError: the call's error, as ``await tools.name(...)`` raises it.
        """
        if self.error is not None:
            raise self.error
        return json.loads(self.result_json or "null")


def _sandbox_call(outcome: CallOutcome) -> SandboxCall:
    return SandboxCall(outcome.step_key, outcome.result_json, outcome.error, outcome.replayed)


def _refused(exc: ProtocolError) -> SandboxCall:
    return SandboxCall("", error=ToolError(exc.message, type=_REFUSAL_TYPES.get(exc.code, "ProtocolError")))


async def _call(scope: CommandScope, name: str, positional_json: bytes, named_json: bytes) -> SandboxCall:
    try:
        return _sandbox_call(await call_tool(scope, name, positional_json, named_json))
    except ProtocolError as exc:
        return _refused(exc)


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
        return await _call(scope, name, positional_json, named_json)

    async def recorded(self) -> list[StepRecord]:
        """Every step of the run as the journal holds it now, in the order they began."""
        self._open()
        assert self._journal is not None
        return await self._journal.load_steps(self.run_id)


Script = Callable[["FakeSandbox"], Awaitable["int | ProcessOutcome | None"]]
"""What a :class:`FakeLauncher` runs instead of a process: an exit code, an outcome, or None (0)."""


class FakeSandbox:
    """What a :class:`FakeLauncher`'s script gets: the command's spec and its tool calls.

    Attributes:
        spec: The command as the daemon asked for it (``argv``, ``env``, ``cwd``...).
        stdout: What the command printed: :meth:`write` appends to it, and so does
            ``print(..., file=sandbox)``.
        stderr: What the command wrote to stderr (the traceback, when the script raised).
    """

    def __init__(self, spec: LaunchSpec, resolve: Callable[[str], Awaitable[CommandScope | None]] | None):
        self.spec = spec
        self.stdout = ""
        self.stderr = ""
        self._resolve = resolve

    def write(self, text: str) -> int:
        """Append to the command's stdout."""
        self.stdout += text
        return len(text)

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``await tools.name(*args, **kwargs)`` as the command's code: the result, or raise.

        Raises:
            ToolError: the call's error, as the client raises it.
        """
        positional, named = encode_call(args, kwargs)
        return (await self.call_json(name, positional, named)).result

    async def call_json(
        self, name: str, positional_json: bytes = b"", named_json: bytes = b""
    ) -> SandboxCall:
        """Call ``name`` with the request's argument bytes exactly as given."""
        if self._resolve is None:
            raise ToolbridgeError(
                "this FakeLauncher is not attached to a bridge: use `launcher.bridge(...)` or "
                "`launcher.attach(bridge)`"
            )
        scope = await self._resolve(self.spec.env.get("TOOLBRIDGE_TOKEN", ""))
        if scope is None:
            return _refused(ProtocolError("UNAUTHENTICATED", "invalid or expired token"))
        return await _call(scope, name, positional_json, named_json)


class FakeLauncher:
    """A launcher that runs no process: each command runs ``script`` in the host instead.

    Every :class:`LaunchSpec` it gets is kept in :attr:`specs`. The script gets a
    :class:`FakeSandbox` and may call the command's tools, which reach the bridge's real call
    path with the command's token (as the sandbox client would, without gRPC). It returns the
    command's exit code; with no script, every command exits with ``exit_code`` and prints
    ``stdout``. A script that raises ends the command with exit code 1 and the traceback on
    stderr, as an uncaught exception ends a program. A script still running when the
    command's budget stops it, or at its timeout, is cancelled, and the command ends with exit
    code -9, as a killed one does.

    Args:
        script: What each command runs, or ``None``.
        exit_code: The exit code when there is no script or it returns ``None``.
        stdout: What a command without a script prints.
    """

    name = "fake"

    def __init__(self, script: Script | None = None, *, exit_code: int = 0, stdout: str = "") -> None:
        self.script = script
        self.exit_code = exit_code
        self.stdout = stdout
        self.specs: list[LaunchSpec] = []
        self._resolve: Callable[[str], Awaitable[CommandScope | None]] | None = None

    def attach(self, bridge: Bridge) -> None:
        """Let scripts call tools through ``bridge`` (the one that runs their commands)."""
        # The bridge's own token check: a command's token, then a sidecar token.
        self._resolve = bridge._authenticate

    def bridge(self, journal: str | os.PathLike[str] | None, **options: Any) -> Bridge:
        """A :class:`~toolbridge.Bridge` that runs its commands with this launcher."""
        from toolbridge._bridge import Bridge

        bridge = Bridge(journal, sandbox=self, **options)
        self.attach(bridge)
        return bridge

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        """Run the script for ``spec`` (or nothing), as a process would run."""
        self.specs.append(spec)
        sandbox = FakeSandbox(spec, self._resolve)
        if self.script is None:
            return ProcessOutcome(exit_code=self.exit_code, stdout=self.stdout.encode(), stderr=b"")
        script = asyncio.ensure_future(self.script(sandbox))
        stopped = asyncio.ensure_future(stop.event.wait())
        try:
            done, _ = await asyncio.wait(
                {script, stopped}, timeout=spec.timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if script not in done and stop.reason is None:
                stop.stop("timeout")
        except asyncio.CancelledError:
            stop.stop("cancelled")
            raise
        finally:
            stopped.cancel()
            if not script.done():
                script.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await script
        if script.cancelled():
            outcome: int | ProcessOutcome | None = -9
        elif (error := script.exception()) is not None:
            # As a program that dies of an uncaught exception: exit 1, the traceback on stderr.
            sandbox.stderr += "".join(traceback.format_exception(error))
            outcome = 1
        else:
            outcome = script.result()
        if isinstance(outcome, ProcessOutcome):
            return outcome
        return ProcessOutcome(
            exit_code=self.exit_code if outcome is None else outcome,
            stdout=sandbox.stdout.encode(),
            stderr=sandbox.stderr.encode(),
            stopped=stop.reason if stop.reason != "cancelled" else None,
        )
