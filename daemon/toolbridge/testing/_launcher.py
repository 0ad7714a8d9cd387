"""``FakeLauncher``: a launcher that runs no process, but a script of the test's."""

from __future__ import annotations

import asyncio
import contextlib
import os
import traceback
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from toolbridge._calls.scope import CommandScope
from toolbridge._errors import ProtocolError, ToolbridgeError
from toolbridge._sandbox.launcher import LaunchSpec, ProcessOutcome, StopSignal
from toolbridge.testing._call import SandboxCall, call_as_sandbox, encode_call, refused

if TYPE_CHECKING:
    from toolbridge._bridge import Bridge


__all__ = ["FakeLauncher", "FakeSandbox", "Script"]


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
            return refused(ProtocolError("UNAUTHENTICATED", "invalid or expired token"))
        return await call_as_sandbox(scope, name, positional_json, named_json)


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
