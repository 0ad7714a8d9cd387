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
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from toolbridge._calls import CommandScope
from toolbridge._errors import SandboxError, SnippetError
from toolbridge._events import EventBus
from toolbridge._journal import Journal
from toolbridge._json import canonical, dumps
from toolbridge._launch import Launcher, LaunchSpec, ProcessOutcome
from toolbridge._options import DEFAULT_COMMAND_TIMEOUT, ToolOptions
from toolbridge._records import StepRecord
from toolbridge._runstate import RunState
from toolbridge._runtime import SandboxRuntime
from toolbridge._schema import SchemaValidationError, schema_from
from toolbridge._steps import expect_kind, nested_steps
from toolbridge._tokens import TokenRegistry
from toolbridge._tool import to_tools

__all__ = ["CommandResult", "Commands", "Sandbox", "Services"]

OUTPUT_LIMIT = 1024 * 1024
"""Bytes of a command's stdout, and of its stderr, that are kept."""

STDERR_TAIL = 4000
"""Characters of a failed snippet's stderr quoted in its error."""


@dataclass(frozen=True)
class Services:
    """What commands need from the bridge that runs them."""

    journal: Journal
    launcher: Launcher
    runtime: SandboxRuntime
    tokens: TokenRegistry[CommandScope]
    address: str
    socket_dir: Path | None
    events: EventBus


@dataclass(frozen=True)
class CommandResult:
    """How a command ended.

    Attributes:
        exit_code: The process's exit code; negative when it was killed by a signal.
        stdout: What it wrote to stdout (the first MiB), decoded as UTF-8.
        stderr: What it wrote to stderr (the first MiB), decoded as UTF-8.
        stopped: Why toolbridge stopped it, if it did: ``"timeout"`` or ``"max_calls"``.
        replayed: True when this result came from the journal without running anything.
    """

    exit_code: int
    stdout: str
    stderr: str
    stopped: Literal["timeout", "max_calls"] | None = None
    replayed: bool = False


def _argv(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    if not argv:
        raise ValueError("command is empty")
    return argv


def _environment(services: Services, token: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    """A command's whole environment: nothing of the host's, only what the client needs."""
    runtime = services.runtime
    env = {
        "PATH": runtime.path,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TOOLBRIDGE_ADDRESS": services.address,
        "TOOLBRIDGE_TOKEN": token,
    }
    env.update(runtime.node_environment)
    for name, value in (extra or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError("env= must map strings to strings")
        # Node options given by the caller come after the daemon's (its module hook).
        if name == "NODE_OPTIONS" and "NODE_OPTIONS" in env:
            value = f"{env[name]} {value}"
        env[name] = value
    return env


class Commands:
    """``step.sandbox.commands``: run a command whose code may call tools."""

    def __init__(self, services: Services, run: RunState, key_for: Callable[[str], str]) -> None:
        self._services = services
        self._run = run
        self._key_for = key_for

    async def run(
        self,
        name: str,
        command: str | Sequence[str],
        *,
        tools: Mapping[str, object] | None = None,
        tool_options: ToolOptions | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> CommandResult:
        """Run ``command`` as a durable step; its code calls ``tools`` by name.

        Args:
            name: The step id of the command in the run.
            command: A string (split like a shell would, but run without one) or a list.
            tools: Name -> tool: a function, ``tool.step(...)``, ``tool.group(...)``.
            tool_options: Limits and retries for the calls (``ToolOptions()`` by default).
            timeout: Seconds before the command's process tree is killed (5 minutes).
            env: Variables added to the command's scrubbed environment.
            cwd: Working directory; the host's current directory by default.

        Returns:
            The command's :class:`CommandResult`; on replay, the recorded one.

        Raises:
            ValueError, TypeError: for invalid tools, names or options, before anything runs.
            SandboxError: when the sandbox cannot start the command.
        """
        argv = _argv(command)
        tool_map = to_tools(tools or {})
        options = tool_options or ToolOptions()
        work_dir = Path(cwd) if cwd is not None else Path.cwd()
        key = self._key_for(name)
        rec = self._run.claim(key)
        if rec is not None and rec.status == "completed":
            recorded = json.loads(expect_kind(rec, "command").output_json or "{}")
            return CommandResult(**{**recorded, "replayed": True})

        async def work() -> CommandResult:
            step, outcome = await execute_command(
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
            )
            result = CommandResult(
                exit_code=outcome.exit_code,
                stdout=outcome.stdout.decode(errors="replace"),
                stderr=outcome.stderr.decode(errors="replace"),
                stopped=outcome.stopped if outcome.stopped != "cancelled" else None,
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
    writable: Sequence[Path] = (),
) -> tuple[StepRecord, ProcessOutcome]:
    """Start a command step (or restart an interrupted one) and run it to its end.

    The caller records the step's outcome. A command that could not start is recorded as
    failed and raises; replay starts it again, since the cause is usually the machine.
    """
    rec = run.steps.get(key)
    if rec is None:
        rec = run.new_step(
            key,
            parent_key=None,
            kind=kind,
            name=name,
            input_json=canonical({"argv": argv, "tools": sorted(tools), "cwd": str(cwd)}),
        )
    else:
        expect_kind(rec, kind)
        rec.status, rec.error, rec.finished_at = "running", None, None
    rec.attempts += 1
    run.journal.write(rec)
    run.executed_parents.add(key)
    scope = CommandScope(run=run, command_key=key, tools=dict(tools), options=options)
    scope.steps_factory = nested_steps(services)
    token, token_id = services.tokens.mint(scope)
    spec = LaunchSpec(
        argv=argv,
        env=_environment(services, token, env),
        cwd=cwd,
        timeout=DEFAULT_COMMAND_TIMEOUT if timeout is None else timeout,
        output_limit=OUTPUT_LIMIT,
        read_only_paths=services.runtime.read_only_paths,
        writable_paths=list(writable),
        socket_dir=services.socket_dir,
    )
    try:
        outcome = await services.launcher.run(spec, scope.stop)
    except SandboxError as exc:
        rec.fail({"type": "SandboxError", "message": str(exc)})
        await run.journal.write(rec)
        raise
    finally:
        services.tokens.revoke(token_id)
    run.mark_stale(key)
    return rec, outcome


class Sandbox:
    """``step.sandbox``: commands, and snippets with ``tools`` already defined."""

    def __init__(self, services: Services, run: RunState, key_for: Callable[[str], str]) -> None:
        self._services = services
        self._run = run
        self._key_for = key_for
        self.commands = Commands(services, run, key_for)

    async def python(
        self,
        step_id: str,
        code: str,
        *,
        tools: Mapping[str, object] | None = None,
        output: Any = None,
        tool_options: ToolOptions | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Any:
        """Run a Python snippet in the sandbox as a durable step and return its value.

        The snippet may use top-level ``await`` and ``return``; ``tools``, ``ToolError`` and
        ``definitions`` are defined without an import. The returned value travels as JSON
        and is validated against ``output`` (a type, a pydantic model or a JSON Schema).

        Raises:
            SnippetError: when the snippet raises, exits non-zero, or returns a value that
                fails validation (recorded, so a replay raises it again).
            SandboxError: when the sandbox cannot start.
        """
        return await self._snippet(
            "python",
            step_id,
            code,
            "snippet.py",
            ["python3", "-m", "inngest_tools._runner"],
            tools=tools,
            output=output,
            tool_options=tool_options,
            timeout=timeout,
            env=env,
        )

    async def typescript(
        self,
        step_id: str,
        code: str,
        *,
        tools: Mapping[str, object] | None = None,
        output: Any = None,
        tool_options: ToolOptions | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Any:
        """Run a TypeScript snippet under Node as a durable step; see :meth:`python`."""
        runtime = self._services.runtime
        runner = runtime.node_path
        if runner is None or runtime.node_problem is not None:
            raise SandboxError(
                f"cannot run TypeScript snippets: {runtime.node_problem or 'the Node client is not set up'}"
            )
        return await self._snippet(
            "typescript",
            step_id,
            code,
            "snippet.ts",
            ["node", str(runner / "inngest_tools" / "runner.js")],
            tools=tools,
            output=output,
            tool_options=tool_options,
            timeout=timeout,
            env=env,
        )

    async def _snippet(
        self,
        kind: str,
        step_id: str,
        code: str,
        filename: str,
        runner: list[str],
        *,
        tools: Mapping[str, object] | None,
        output: Any,
        tool_options: ToolOptions | None,
        timeout: float | None,
        env: Mapping[str, str] | None,
    ) -> Any:
        if not isinstance(code, str):
            raise TypeError("code must be a string")
        tool_map = to_tools(tools or {})
        output_schema = schema_from(output)
        options = tool_options or ToolOptions()
        key = self._key_for(step_id)
        rec = self._run.claim(key)

        def result(step: StepRecord) -> Any:
            if step.status == "failed":
                error = step.error or {}
                raise SnippetError(
                    str(error.get("message", "the snippet failed")),
                    exit_code=error.get("exit_code"),
                    stderr=str(error.get("stderr", "")),
                )
            value = json.loads(step.output_json or "null")
            if output_schema is None:
                return value
            try:
                return output_schema.validate_python(value, strict=False)
            except SchemaValidationError as exc:
                raise SnippetError(f"the snippet's value does not match output: {exc}") from None

        # A snippet that could not start is tried again; any other outcome is replayed.
        if rec is not None and rec.done and not _failed_to_start(expect_kind(rec, kind)):
            return result(rec)

        async def work() -> Any:
            work_dir = Path(tempfile.mkdtemp(prefix="toolbridge-snippet-"))
            try:
                (work_dir / filename).write_text(code, encoding="utf-8")
                result_path = work_dir / "result.json"
                step, outcome = await execute_command(
                    self._services,
                    self._run,
                    key,
                    kind=kind,
                    name=step_id,
                    argv=[*runner, filename],
                    tools=tool_map,
                    options=options,
                    timeout=timeout,
                    env={**(env or {}), "TOOLBRIDGE_RESULT_PATH": str(result_path)},
                    cwd=work_dir,
                    writable=[work_dir],
                )
                step.input_json = canonical({"code": code, "tools": sorted(tool_map)})
                _record_snippet(step, outcome, result_path, output_schema)
            finally:
                shutil.rmtree(work_dir, ignore_errors=True)
            await self._run.journal.write(step)
            return result(step)

        return await self._run.single_flight(key, work, shield=False)


def _failed_to_start(rec: StepRecord) -> bool:
    return rec.status == "failed" and (rec.error or {}).get("type") == "SandboxError"


RESULT_LIMIT = 16 * 1024 * 1024
"""Bytes of a snippet's returned value that are read back."""


def _read_result(path: Path) -> str | None:
    """The snippet's result file, if it is a plain file the sandbox wrote.

    The sandbox controls its work directory: the result could be a symlink to a host file
    (which the daemon must not read for it) or a FIFO (which would block the daemon).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = handle.read(RESULT_LIMIT + 1)
    if len(data) > RESULT_LIMIT:
        return None
    return data.decode("utf-8", errors="replace")


def _record_snippet(step: StepRecord, outcome: ProcessOutcome, result_path: Path, output_schema: Any) -> None:
    stderr = outcome.stderr.decode(errors="replace")[-STDERR_TAIL:]
    failure: dict[str, Any] = {"type": "SnippetError", "exit_code": outcome.exit_code, "stderr": stderr}
    if outcome.stopped is not None:
        step.fail({**failure, "message": f"the snippet was stopped ({outcome.stopped})"})
        return
    if outcome.exit_code != 0:
        last_line = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        step.fail(
            {**failure, "message": f"the snippet failed with exit code {outcome.exit_code}: {last_line}"}
        )
        return
    text = _read_result(result_path)
    if text is None:
        message = "the snippet left no result (no plain result file of at most 16 MiB)"
        step.fail({**failure, "message": message})
        return
    try:
        value = json.loads(text)
        if output_schema is not None:
            output_schema.validate_python(value, strict=False)
    except (ValueError, SchemaValidationError) as exc:
        step.fail({**failure, "message": f"the snippet's value does not match output: {exc}"})
        return
    step.complete(canonical(value))
