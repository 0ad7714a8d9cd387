"""``step.sandbox``: commands and snippets whose code calls the host's tools.

A command is a durable step. While it runs, its process holds a token granting its own
tools; every tool call it makes is a step nested under it. A command that completed is not
run again on replay; one interrupted by a crash runs again, and the calls it had completed
are answered from the journal.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from toolbridge._commands.command import CommandPlan, CommandRun
from toolbridge._commands.services import Services
from toolbridge._door.policy import Egress, EgressRule, as_egress
from toolbridge._durable.identity import env_identity, expect_step
from toolbridge._durable.runstate import RunState
from toolbridge._durable.steps import ClaimStep
from toolbridge._durations import Duration, optional_seconds
from toolbridge._json import dumps
from toolbridge._options import ToolOptions
from toolbridge._tools.convert import to_tools

__all__ = ["CommandResult", "Commands"]


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

        plan = CommandPlan(
            kind="command",
            name=name,
            argv=argv,
            tools=tool_map,
            options=options,
            identity={**identity, "cwd": str(work_dir)},
            cwd=work_dir,
            timeout=timeout,
            env=env,
            egress=door_egress,
        )

        async def work() -> CommandResult:
            done = await CommandRun(self._services, self._run, key, plan).execute()
            process = done.process
            result = CommandResult(
                exit_code=process.exit_code,
                stdout=process.stdout.decode(errors="replace"),
                stderr=process.stderr.decode(errors="replace"),
                stopped=process.stopped if process.stopped in ("timeout", "max_calls") else None,
                not_asked_again=done.not_asked_again,
            )
            recorded = asdict(result)
            del recorded["replayed"]
            done.step.complete(dumps(recorded))
            await self._run.journal.write(done.step)
            return result

        return await self._run.single_flight(key, work, shield=False)
