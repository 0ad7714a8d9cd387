"""``step.sandbox``: commands and snippets whose code calls the host's tools.

A command is a durable step. While it runs, its process holds a token granting its own
tools; every tool call it makes is a step nested under it. A command that completed is not
run again on replay; one interrupted by a crash runs again, and the calls it had completed
are answered from the journal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from toolbridge._calls.scope import CommandScope
from toolbridge._commands.replay import REPLAY_VARIABLE, ClientReplay
from toolbridge._commands.services import Services, command_environment
from toolbridge._door.door import open_door
from toolbridge._door.policy import Egress, EgressRule, as_egress
from toolbridge._durable.identity import env_identity, expect_kind, expect_step
from toolbridge._durable.runstate import RunState
from toolbridge._durable.steps import ClaimStep
from toolbridge._durations import Duration, optional_seconds
from toolbridge._errors import RunWaiting, SandboxError
from toolbridge._json import canonical, dumps
from toolbridge._options import DEFAULT_COMMAND_TIMEOUT, ToolOptions
from toolbridge._records import StepRecord
from toolbridge._sandbox.launcher import LaunchSpec, ProcessOutcome
from toolbridge._telemetry import tracing
from toolbridge._tools.convert import to_tools

__all__ = ["CommandResult", "Commands", "execute_command"]

log = logging.getLogger("toolbridge")

OUTPUT_LIMIT = 1024 * 1024
"""Bytes of a command's stdout, and of its stderr, that are kept."""


@dataclass(frozen=True)
class CommandResult:
    """How a command ended.

    Attributes:
        exit_code: The process's exit code; negative when it was killed by a signal.
        stdout: What it wrote to stdout (the first MiB), decoded as UTF-8.
        stderr: What it wrote to stderr (the first MiB), decoded as UTF-8.
        stopped: Why toolbridge stopped it, if it did: ``"timeout"`` or ``"max_calls"``.
        replayed: True when this result came from the journal without running anything.
        not_asked_again: When an interrupted command ran again: the step keys of the tool
            calls it had made before, with their recorded results, that this run did not
            make again (its code asked for other arguments). They stay in the journal,
            marked in the trace; nothing else happens to them.
    """

    exit_code: int
    stdout: str
    stderr: str
    stopped: Literal["timeout", "max_calls"] | None = None
    replayed: bool = False
    not_asked_again: tuple[str, ...] = ()


def _argv(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    if not argv:
        raise ValueError("command is empty")
    return argv


class Commands:
    """``step.sandbox.commands``: run a command whose code may call tools."""

    def __init__(self, services: Services, run: RunState, claim: ClaimStep) -> None:
        self._services = services
        self._run = run
        self._claim = claim

    async def run(
        self,
        name: str,
        command: str | Sequence[str],
        *,
        tools: Mapping[str, object] | Sequence[object] | None = None,
        tool_options: ToolOptions | None = None,
        timeout: Duration | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        egress: Egress | Sequence[str | EgressRule] | None = None,
    ) -> CommandResult:
        """Run ``command`` as a durable step; its code calls ``tools`` by name.

        Args:
            name: The step id of the command in the run.
            command: A string (split like a shell would, but run without one) or a list.
            tools: Name -> tool: a function, ``tool.step(...)``, ``tool.group(...)``; or a
                list of named tools (``tool.step(name=...)``, ``toolbridge.ask_user()``).
            tool_options: Limits and retries for the calls (``ToolOptions()`` by default).
            timeout: Seconds (or a duration string, ``"10m"``) before the command's
                process tree is killed (5 minutes).
            env: Variables added to the command's scrubbed environment.
            cwd: Working directory (a relative one is taken from the host's current
                directory); the host's current directory by default.
            egress: HTTP and HTTPS the command may make, through a proxy the daemon serves
                to it alone: a list of allowed hosts, or an ``Egress`` (rules, secrets
                swapped in for placeholders, a request budget). Enforced under bubblewrap;
                offered, not enforced, under the process launcher. None: no egress.

        Returns:
            The command's :class:`CommandResult`; on replay, the recorded one.

        Raises:
            ValueError, TypeError: for invalid tools, names or options, before anything runs.
            SandboxError: when the sandbox cannot start the command.
            RunWaiting: when a call still waits for a person after
                ``tool_options.approval_hold``; the command was stopped, and entering the
                run again once it is decided resumes it.
            RunLeaseLostError: when another daemon took the run over (its lease had run out):
                the command was stopped, and the run goes on there.
        """
        argv = _argv(command)
        timeout = optional_seconds(timeout, option="timeout")
        tool_map = to_tools(tools or {})
        door_egress = as_egress(egress)
        options = tool_options or ToolOptions()
        # A relative cwd means the host's current directory's, under every launcher (bwrap
        # changes directory inside its own mount namespace, where a relative path means nothing).
        work_dir = Path.cwd() / cwd if cwd is not None else Path.cwd()
        key, rec = await self._claim(name)
        identity = {"argv": argv, "tools": sorted(tool_map), "env": env_identity(env, self._run.secrets)}
        if rec is not None and rec.status == "completed":
            recorded = json.loads(expect_step(rec, "command", identity).output_json or "{}")
            recorded["not_asked_again"] = tuple(recorded.get("not_asked_again", ()))
            return CommandResult(**{**recorded, "replayed": True})

        async def work() -> CommandResult:
            step, outcome, stale = await execute_command(
                self._services,
                self._run,
                key,
                kind="command",
                name=name,
                argv=argv,
                tools=tool_map,
                options=options,
                timeout=timeout,
                env=env,
                cwd=work_dir,
                identity={**identity, "cwd": str(work_dir)},
                egress=door_egress,
            )
            result = CommandResult(
                exit_code=outcome.exit_code,
                stdout=outcome.stdout.decode(errors="replace"),
                stderr=outcome.stderr.decode(errors="replace"),
                stopped=outcome.stopped if outcome.stopped in ("timeout", "max_calls") else None,
                not_asked_again=tuple(stale),
            )
            recorded = asdict(result)
            del recorded["replayed"]
            step.complete(dumps(recorded))
            await self._run.journal.write(step)
            return result

        return await self._run.single_flight(key, work, shield=False)


async def execute_command(
    services: Services,
    run: RunState,
    key: str,
    *,
    kind: str,
    name: str,
    argv: list[str],
    tools: Mapping[str, Any],
    options: ToolOptions,
    timeout: float | None,
    env: Mapping[str, str] | None,
    cwd: Path,
    identity: Mapping[str, Any],
    writable: Sequence[Path] = (),
    egress: Egress | None = None,
) -> tuple[StepRecord, ProcessOutcome, list[str]]:
    """Start a command step (or restart an interrupted one) and run it to its end.

    ``identity`` is what the step records as its input, checked when an interrupted step
    runs again. The caller records the step's outcome. A command that could not start is
    recorded as failed and raises; replay starts it again, since the cause is usually the
    machine.

    Returns:
        The step, how the process ended, and the keys of recorded calls it did not make
        again (when it was run again after an interruption).
    """
    rec = await run.lookup(key)
    rerun = rec is not None
    if rec is None:
        rec = run.new_step(key, parent_key=None, kind=kind, name=name, input_json=canonical(dict(identity)))
    elif rec.status == "failed" and (rec.error or {}).get("type") == "SandboxError":
        # It never started: nothing of it ran, so it may start now as it is asked for.
        expect_kind(rec, kind)
        rec.input_json = canonical(dict(identity))
    else:
        # Run again (not answered from its record): where and with which variables may differ
        # (a restart's new credentials); what runs may not.
        expect_step(
            rec, kind, {name: value for name, value in identity.items() if name not in ("cwd", "env")}
        )
        rec.reopen()
    run.hold(rec)  # it runs again: in memory until its work ends
    rec.attempts += 1
    run.journal.write_soon(rec)
    span = tracing.command_trace(run.run_id, key, kind=kind, name=name)
    scope = CommandScope(
        run=run,
        command_key=key,
        tools=dict(tools),
        options=options,
        steps_factory=services.steps_factory,
        approvals=services.approvals,
        trace_context=span.context,
    )
    token, token_id = services.tokens.mint(scope)
    # Run again, the command answers its recorded calls itself (see _commands.replay).
    replay = await ClientReplay.prepare(run, key, set(tools), options) if rerun else None
    if replay is not None:
        scope.keys, scope.count_call = replay.keys(run), replay.count_call
    # A run taken over by another daemon stops here: its new holder runs it now.
    forget = run.on_lost(lambda _: scope.stop.stop("cancelled"))
    try:
        async with (
            _door(services, scope) as (address, socket_dir),
            open_door(
                scope,
                python=services.runtime.bin_dir / "python3",
                cwd=cwd,
                egress=egress,
                confined=services.launcher.name == "bwrap",
            ) as door,
        ):
            environment = {**command_environment(services, address, token, env), **span.environment(env)}
            environment.pop(REPLAY_VARIABLE, None)  # only the daemon's own records are answered from
            if door is not None:  # shims (and egress): see toolbridge._door
                environment = door.environment(environment)
            spec = LaunchSpec(
                argv=argv if door is None else door.argv(argv),
                env={**environment, **(replay.environment if replay else {})},
                cwd=cwd,
                timeout=DEFAULT_COMMAND_TIMEOUT if timeout is None else timeout,
                output_limit=OUTPUT_LIMIT,
                read_only_paths=[*services.runtime.read_only_paths, *(door.read_only_paths if door else [])],
                writable_paths=[*writable, *(replay.writable_paths if replay else [])],
                socket_dir=socket_dir,
                hidden_paths=services.state_paths,
            )
            outcome = await services.launcher.run(spec, scope.stop)
        if replay is not None:
            await replay.finish(run, scope)  # what the sandbox answered itself was asked again
        span.finish(outcome.exit_code, outcome.stopped)
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
    await run.check_lease()
    if outcome.stopped == "suspended":  # a call waits on a person: the step stays running
        pending = await services.approvals.store.list(run_id=run.run_id, states=["pending"])
        raise RunWaiting(run.run_id, pending)
    stale = await run.mark_stale(key)
    if stale:
        log.warning("command %r ran again without asking for %d recorded call(s): %s", key, len(stale), stale)
    return rec, outcome, stale


def _door(services: Services, scope: CommandScope) -> AbstractAsyncContextManager[tuple[str, Path | None]]:
    """The command's own socket (capped at its ``max_connections``), or the bridge's on TCP."""
    if services.doors is None:
        return contextlib.nullcontext((services.address, services.socket_dir))
    return services.doors.open(scope, scope.options.max_connections)
