"""A command step as three objects: its plan, its run, its outcome.

:class:`CommandPlan` says what is to run (built complete, before anything starts);
:class:`CommandRun` runs it once: it opens the step (or reopens one a crash interrupted),
gives the command a scope and a token of its own, launches the process through the
command's door, and settles what the process left; :class:`CommandOutcome` is what the
caller records. ``step.sandbox.commands`` and the snippets (:mod:`.snippets`) share it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolbridge._calls.scope import CommandScope
from toolbridge._commands.replay import REPLAY_VARIABLE, ClientReplay
from toolbridge._commands.services import Services, command_environment
from toolbridge._door.door import Door, open_door
from toolbridge._door.policy import Egress
from toolbridge._durable.identity import expect_kind, expect_step
from toolbridge._durable.runstate import RunState
from toolbridge._errors import RunWaiting, SandboxError
from toolbridge._json import canonical
from toolbridge._options import DEFAULT_COMMAND_TIMEOUT, ToolOptions
from toolbridge._records import StepRecord
from toolbridge._sandbox.launcher import LaunchSpec, ProcessOutcome
from toolbridge._sandbox.warm import WarmSandbox
from toolbridge._telemetry import tracing
from toolbridge._tools.tool import Tool

__all__ = ["OUTPUT_LIMIT", "CommandOutcome", "CommandPlan", "CommandRun"]

log = logging.getLogger("toolbridge")

OUTPUT_LIMIT = 1024 * 1024
"""Bytes of a command's stdout, and of its stderr, that are kept."""


@dataclass(frozen=True, kw_only=True)
class CommandPlan:
    """What a command step runs, decided before anything starts.

    Attributes:
        kind: The step's kind: ``"command"``, ``"python"`` or ``"typescript"``.
        name: The step id in the run.
        argv: The program and its arguments.
        tools: The tools the command may call, by name.
        options: Limits and retries for its calls.
        identity: What the step records as its input; a step a crash interrupted runs again
            only if what runs is the same (where and with which variables may differ).
        cwd: The working directory (absolute).
        timeout: Seconds before the process tree is killed (5 minutes when ``None``).
        env: Variables added to the command's scrubbed environment.
        writable: Paths the command may write (a snippet's scratch directory).
        egress: HTTP(S) the command may make through its door; ``None``: none.
        warm: A sandbox started ahead of need to run it in (its ``cwd`` is the sandbox's);
            when the command does not fit it after all, the launcher starts one.
    """

    kind: str
    name: str
    argv: Sequence[str]
    tools: Mapping[str, Tool]
    options: ToolOptions
    identity: Mapping[str, Any]
    cwd: Path
    timeout: float | None = None
    env: Mapping[str, str] | None = None
    writable: Sequence[Path] = ()
    egress: Egress | None = None
    warm: WarmSandbox | None = None


@dataclass(frozen=True)
class CommandOutcome:
    """How a command step's process ended; the caller records the step's outcome.

    Attributes:
        step: The step, still ``running``: the caller completes or fails it and writes it.
        process: The process's exit code, output and why it was stopped, if it was.
        not_asked_again: Keys of recorded calls a command run again did not make again.
    """

    step: StepRecord
    process: ProcessOutcome
    not_asked_again: tuple[str, ...]


class CommandRun:
    """One execution of a planned command step, from its record opened to its process's end."""

    def __init__(self, services: Services, run: RunState, key: str, plan: CommandPlan) -> None:
        self._services = services
        self._run = run
        self._key = key
        self._plan = plan

    async def execute(self) -> CommandOutcome:
        """Start the step (or restart an interrupted one) and run its command to the end.

        A command that could not start is recorded as failed and raises; replay starts it
        again, since the cause is usually the machine.

        Raises:
            SandboxError: when the sandbox cannot start the command.
            RunWaiting: when a call of the command still waits for a person.
            RunLeaseLostError: when another daemon took the run over meanwhile.
        """
        services, run, plan = self._services, self._run, self._plan
        rec, rerun = await self._open_step()
        span = tracing.command_trace(run.run_id, self._key, kind=plan.kind, name=plan.name)
        scope = CommandScope(
            run=run,
            command_key=self._key,
            tools=dict(plan.tools),
            options=plan.options,
            steps_factory=services.steps_factory,
            approvals=services.approvals,
            trace_context=span.context,
        )
        token, token_id = services.tokens.mint(scope)
        # Run again, the command answers its recorded calls itself (see _commands.replay).
        replay = await ClientReplay.prepare(run, self._key, set(plan.tools), plan.options) if rerun else None
        if replay is not None:
            scope.keys, scope.count_call = replay.keys(run), replay.count_call
        # A run taken over by another daemon stops here: its new holder runs it now.
        forget = run.on_lost(lambda _: scope.stop.stop("cancelled"))
        try:
            process = await self._launch(scope, token, span, replay)
            if replay is not None:
                await replay.finish(run, scope)  # what the sandbox answered itself was asked again
            span.finish(process.exit_code, process.stopped)
        except SandboxError as exc:
            span.fail(exc)
            rec.fail({"type": "SandboxError", "message": str(exc)})
            await run.journal.write(rec)
            raise
        finally:
            forget()
            services.tokens.revoke(token_id)
            span.end()
            if replay is not None:
                replay.close()
        return await self._settle(rec, process)

    async def _open_step(self) -> tuple[StepRecord, bool]:
        """The step's record, new or reopened, held and queued as running; whether it reruns."""
        run, plan = self._run, self._plan
        rec = await run.lookup(self._key)
        rerun = rec is not None
        if rec is None:
            rec = run.new_step(
                self._key,
                parent_key=None,
                kind=plan.kind,
                name=plan.name,
                input_json=canonical(dict(plan.identity)),
            )
        elif rec.status == "failed" and (rec.error or {}).get("type") == "SandboxError":
            # It never started: nothing of it ran, so it may start now as it is asked for.
            expect_kind(rec, plan.kind)
            rec.input_json = canonical(dict(plan.identity))
        else:
            # Run again (not answered from its record): where and with which variables may
            # differ (a restart's new credentials); what runs may not.
            same = {name: value for name, value in plan.identity.items() if name not in ("cwd", "env")}
            expect_step(rec, plan.kind, same)
            rec.reopen()
        run.hold(rec)  # it runs again: in memory until its work ends
        rec.attempts += 1
        run.journal.write_soon(rec)
        return rec, rerun

    async def _launch(
        self, scope: CommandScope, token: str, span: tracing.CommandTrace, replay: ClientReplay | None
    ) -> ProcessOutcome:
        """Open the command's doors (its socket; shims and egress) and run its process."""
        services, plan = self._services, self._plan
        async with (
            self._socket(scope) as (address, socket_dir),
            open_door(
                scope,
                python=services.runtime.bin_dir / "python3",
                cwd=plan.cwd,
                egress=plan.egress,
                confined=services.launcher.name == "bwrap",
            ) as door,
        ):
            spec = self._spec(address, socket_dir, token, span, door, replay)
            launcher = services.launcher if plan.warm is None else plan.warm
            return await launcher.run(spec, scope.stop)

    def _socket(self, scope: CommandScope) -> AbstractAsyncContextManager[tuple[str, Path | None]]:
        """The command's own socket (capped at its ``max_connections``), or the bridge's on TCP."""
        services = self._services
        if services.doors is None:
            return contextlib.nullcontext((services.address, services.socket_dir))
        warm = self._plan.warm
        directory = None if warm is None else warm.socket_dir
        return services.doors.open(scope, scope.options.max_connections, directory)

    def _spec(
        self,
        address: str,
        socket_dir: Path | None,
        token: str,
        span: tracing.CommandTrace,
        door: Door | None,
        replay: ClientReplay | None,
    ) -> LaunchSpec:
        """What the launcher starts: the command, its environment, what it may see and write."""
        services, plan = self._services, self._plan
        environment = {
            **command_environment(services, address, token, plan.env),
            **span.environment(plan.env),
        }
        environment.pop(REPLAY_VARIABLE, None)  # only the daemon's own records are answered from
        if door is not None:  # shims (and egress): see toolbridge._door
            environment = door.environment(environment)
        return LaunchSpec(
            argv=plan.argv if door is None else door.argv(list(plan.argv)),
            env={**environment, **(replay.environment if replay else {})},
            cwd=plan.cwd,
            timeout=DEFAULT_COMMAND_TIMEOUT if plan.timeout is None else plan.timeout,
            output_limit=OUTPUT_LIMIT,
            read_only_paths=[*services.runtime.read_only_paths, *(door.read_only_paths if door else [])],
            writable_paths=[*plan.writable, *(replay.writable_paths if replay else [])],
            socket_dir=socket_dir,
            hidden_paths=services.state_paths,
        )

    async def _settle(self, rec: StepRecord, process: ProcessOutcome) -> CommandOutcome:
        """After the process: still the run's holder, not waiting on a person, stale calls marked."""
        run, services = self._run, self._services
        await run.check_lease()
        if process.stopped == "suspended":  # a call waits on a person: the step stays running
            pending = await services.approvals.store.list(run_id=run.run_id, states=["pending"])
            raise RunWaiting(run.run_id, pending)
        stale = await run.mark_stale(self._key)
        if stale:
            log.warning(
                "command %r ran again without asking for %d recorded call(s): %s",
                self._key,
                len(stale),
                stale,
            )
        return CommandOutcome(rec, process, tuple(stale))
