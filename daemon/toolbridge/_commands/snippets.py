"""``step.sandbox.python`` / ``step.sandbox.typescript``: snippets run as durable steps.

A snippet is a command whose runner defines ``tools``, allows top-level ``await`` and
``return``, and writes the returned value to a result file the daemon reads back.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

from toolbridge._commands.command import OUTPUT_LIMIT, CommandPlan, CommandRun
from toolbridge._commands.commands import Commands
from toolbridge._commands.services import Services
from toolbridge._commands.warm import SCRATCH_PREFIX, take_warm
from toolbridge._door.policy import Egress, EgressRule, as_egress
from toolbridge._durable.identity import env_identity, expect_step
from toolbridge._durable.runstate import RunState
from toolbridge._durable.steps import ClaimStep
from toolbridge._durations import Duration, optional_seconds
from toolbridge._errors import SandboxError, SnippetError
from toolbridge._json import canonical, digest
from toolbridge._options import ToolOptions
from toolbridge._records import StepRecord
from toolbridge._sandbox.launcher import ProcessOutcome
from toolbridge._sandbox.runtime.python import SandboxRuntime
from toolbridge._schema.schema import Schema, SchemaValidationError, schema_from
from toolbridge._tools.convert import to_tools

__all__ = ["LANGUAGES", "Language", "Sandbox", "SnippetOptions"]

STDERR_TAIL = 4000
"""Characters of a failed snippet's stderr quoted in its error."""


class SnippetOptions(TypedDict, total=False):
    """What a snippet may be given besides its code (the same for every language)."""

    tools: Mapping[str, object] | Sequence[object] | None
    output: Any
    tool_options: ToolOptions | None
    timeout: Duration | None
    env: Mapping[str, str] | None
    egress: Egress | Sequence[str | EgressRule] | None


@dataclass(frozen=True)
class Language:
    """How a snippet in one language is run: the file it is written to, and its runner.

    Attributes:
        kind: The step's kind (``"python"``, ``"typescript"``).
        filename: The file in the snippet's scratch directory that holds its code.
        runner: The runner's command line (the file name follows it), from the runtime;
            raises :class:`SandboxError` when the runtime cannot run the language.
        boot: The command line of a warm sandbox standing for the runner (``_commands.warm``).
    """

    kind: str
    filename: str
    runner: Callable[[SandboxRuntime], list[str]]
    boot: Callable[[SandboxRuntime], list[str]]


def _node_runner(runtime: SandboxRuntime) -> list[str]:
    if runtime.node_path is None or runtime.node_problem is not None:
        problem = runtime.node_problem or "the Node client is not set up"
        raise SandboxError(f"cannot run TypeScript snippets: {problem}")
    return ["node", str(runtime.node_path / "inngest_tools" / "runner.js")]


def _node_boot(runtime: SandboxRuntime) -> list[str]:
    assert runtime.node_path is not None  # the runner checked it
    return ["node", str(runtime.node_path / "inngest_tools" / "lib" / "warm.js")]


LANGUAGES = {
    "python": Language(
        "python",
        "snippet.py",
        lambda _: ["python3", "-m", "inngest_tools._runner"],
        lambda _: ["python3", "-m", "inngest_tools._warm"],
    ),
    "typescript": Language("typescript", "snippet.ts", _node_runner, _node_boot),
}
"""The languages a snippet may be written in, by name."""


class Sandbox:
    """``step.sandbox``: commands, and snippets with ``tools`` already defined."""

    def __init__(self, services: Services, run: RunState, claim: ClaimStep) -> None:
        self._services = services
        self._run = run
        self._claim = claim
        self.commands = Commands(services, run, claim)

    async def python(self, step_id: str, code: str, **options: Unpack[SnippetOptions]) -> Any:
        """Run a Python snippet in the sandbox as a durable step and return its value.

        The snippet may use top-level ``await`` and ``return``; ``tools``, ``ToolError`` and
        ``definitions`` are defined without an import. The returned value travels as JSON
        and is validated strictly against ``output`` (a type, a pydantic model or a JSON
        Schema): ``"12"`` or ``12.0`` is not an ``int``, and objects are closed.

        Args:
            step_id: The snippet's step id in the run.
            code: The snippet.
            **options: ``tools`` (as for ``commands.run``), ``output`` (what the value must
                match), ``tool_options``, ``timeout``, ``env``, and ``egress`` (HTTP(S)
                through the snippet's own door, as for ``commands.run``).

        Raises:
            SnippetError: when the snippet raises, exits non-zero, or returns a value that
                fails validation (recorded, so a replay raises it again).
            SandboxError: when the sandbox cannot start.
        """
        return await self._snippet("python", step_id, code, **options)

    async def typescript(self, step_id: str, code: str, **options: Unpack[SnippetOptions]) -> Any:
        """Run a TypeScript snippet under Node as a durable step; see :meth:`python`."""
        return await self._snippet("typescript", step_id, code, **options)

    async def _snippet(
        self, language: str, step_id: str, code: str, **options: Unpack[SnippetOptions]
    ) -> Any:
        """Run a snippet in ``language`` (a name in :data:`LANGUAGES`); see :meth:`python`."""
        if language not in LANGUAGES:
            raise ValueError(f"unknown snippet language {language!r}; use one of {', '.join(LANGUAGES)}")
        if not isinstance(code, str):
            raise TypeError("code must be a string")
        lang = LANGUAGES[language]
        timeout = optional_seconds(options.get("timeout"), option="timeout")
        runner = lang.runner(self._services.runtime)
        env = options.get("env")
        tool_map = to_tools(options.get("tools") or {})
        output_schema = schema_from(options.get("output"))
        key, rec = await self._claim(step_id)
        # A snippet that could not start is tried again; any other outcome is replayed.
        identity = {
            "code_sha256": digest(code, 64),
            "tools": sorted(tool_map),
            "env": env_identity(env, self._run.secrets),
        }
        if rec is not None and rec.done and not _failed_to_start(rec):
            return _result(expect_step(rec, lang.kind, identity), output_schema)

        egress = as_egress(options.get("egress"))

        async def work() -> Any:
            # A snippet's first run may take a sandbox started ahead of need (see _commands.warm).
            warm, ended = None, None
            if rec is None:
                boot = lang.boot(self._services.runtime)
                warm, ended = take_warm(
                    self._services,
                    lang.kind,
                    runner,
                    boot,
                    env=env,
                    door=egress is not None,
                    tools=tool_map,
                    output_limit=OUTPUT_LIMIT,
                )
            work_dir = warm.work_dir if warm else Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
            try:
                (work_dir / lang.filename).write_text(code, encoding="utf-8")
                result_path = work_dir / "result.json"
                plan = CommandPlan(
                    kind=lang.kind,
                    name=step_id,
                    argv=[*runner, lang.filename],
                    tools=tool_map,
                    options=options.get("tool_options") or ToolOptions(),
                    identity={"code": code, **identity},
                    cwd=work_dir,
                    timeout=timeout,
                    env={**(env or {}), "TOOLBRIDGE_RESULT_PATH": str(result_path)},
                    writable=[work_dir],
                    egress=egress,
                    warm=warm,
                )
                done = await CommandRun(self._services, self._run, key, plan).execute()
                _record_snippet(done.step, done.process, result_path, output_schema)
            finally:
                if warm is not None:
                    warm.discard()  # when it never ran the snippet
                if ended is not None:
                    ended()  # a cold start its pool may now make up for
                shutil.rmtree(work_dir, ignore_errors=True)
            await self._run.journal.write(done.step)
            return _result(done.step, output_schema)

        return await self._run.single_flight(key, work, shield=False)


def _result(step: StepRecord, output_schema: Schema | None) -> Any:
    """A finished snippet's value, or its recorded failure raised again."""
    if step.status == "failed":
        error = step.error or {}
        raise SnippetError(
            str(error.get("message", "the snippet failed")),
            exit_code=error.get("exit_code"),
            stderr=str(error.get("stderr", "")),
        )
    if output_schema is None:
        return json.loads(step.output_json or "null")
    try:
        return output_schema.validate_json(step.output_json or "null", strict=True)
    except SchemaValidationError as exc:
        raise SnippetError(f"the snippet's value does not match output: {exc}") from None


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
            # Strict, as a strict tool's arguments are (and as the seed's ``z.number()``
            # is): ``"12"`` or ``12.0`` is not an ``int``, and no fields beyond the schema's.
            output_schema.validate_json(text, strict=True)
    except (ValueError, SchemaValidationError) as exc:
        step.fail({**failure, "message": f"the snippet's value does not match output: {exc}"})
        return
    step.complete(canonical(value))
