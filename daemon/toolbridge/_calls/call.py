"""A tool call from a sandbox, from the bytes received to the outcome journaled.

Protocol problems (unknown tool, malformed JSON, oversized request) raise
:class:`ProtocolError`, which the server turns into a gRPC status. Everything else, including
every failure of the tool itself, becomes a :class:`CallOutcome` carrying a ``ToolError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolbridge._calls import approvals
from toolbridge._calls.hooks import error_hook, finish_hook, start_hook
from toolbridge._calls.limits import call_slot
from toolbridge._calls.scope import CommandScope
from toolbridge._calls.secrets import journaled_arguments, journaled_result, opened_result
from toolbridge._durable import failpoints as _failpoints
from toolbridge._durable.attempts import run_attempts
from toolbridge._durable.boundary import Kind, catch
from toolbridge._errors import JournalError, ProtocolError, ToolError
from toolbridge._json import JSONFormatError, canonical, digest, loads_strict
from toolbridge._records import StepRecord
from toolbridge._schema.schema import SchemaValidationError
from toolbridge._secrets import SecretBox
from toolbridge._telemetry import tracing
from toolbridge._tools.context import ToolContext
from toolbridge._tools.tool import Tool

STOP_GRACE = 0.25
"""Seconds a command over its call budget has to see its last error before it is killed."""


@dataclass(frozen=True)
class CallOutcome:
    """What the sandbox receives for one call: a JSON result or a ToolError."""

    step_key: str
    result_json: str | None = None
    error: ToolError | None = None
    replayed: bool = False


def _outcome(rec: StepRecord, *, replayed: bool, box: SecretBox) -> CallOutcome:
    if rec.status == "completed":  # a secret in it is sealed in the journal, opened for the sandbox
        return CallOutcome(rec.key, result_json=opened_result(rec.output_json, box), replayed=replayed)
    return CallOutcome(rec.key, error=ToolError.from_dict(rec.error or {}), replayed=replayed)


def _parse_arguments(positional_json: bytes, named_json: bytes) -> tuple[list[Any], dict[str, Any]]:
    try:
        positional = loads_strict(positional_json) if positional_json else []
        named = loads_strict(named_json) if named_json else {}
    except JSONFormatError as exc:
        raise ProtocolError("INVALID_ARGUMENT", f"arguments: {exc}") from None
    if not isinstance(positional, list):
        raise ProtocolError("INVALID_ARGUMENT", "positional arguments must be a JSON array")
    if not isinstance(named, dict):
        raise ProtocolError("INVALID_ARGUMENT", "named arguments must be a JSON object")
    return positional, named


def _call_input(positional: list[Any], named: dict[str, Any]) -> str:
    """The call as the journal records it and its step key hashes it."""
    if named and not positional:
        return canonical(named)
    if positional and not named:
        return canonical(positional)
    return canonical({"args": positional, "kwargs": named})


async def call_tool(
    scope: CommandScope,
    tool_name: str,
    positional_json: bytes,
    named_json: bytes,
    *,
    on_waiting: approvals.OnWaiting | None = None,
    traceparent: str = "",
    detached: bool = False,
    call_id: tuple[str, int] | None = None,
) -> CallOutcome:
    """Answer one call from a sandbox: replay it from the journal, or run it as a step.

    ``on_waiting`` is told when the call starts to wait for a person's decision;
    ``traceparent`` is the caller's W3C trace context, the parent of the call's span.
    ``detached``: the calling task is never cancelled by the asker (see
    :meth:`RunState.single_flight`), so the call runs in it. ``call_id``: the id the client
    gave the call (its session and number); a call sent again under an id already seen (its
    connection was lost) is the same call: it joins the one in flight or gets its recorded
    outcome, is not counted again, and never runs twice.

    Raises:
        ProtocolError: for calls the protocol refuses before any tool is involved
            (``RESOURCE_EXHAUSTED`` too when the command has its most calls in flight).
    """
    async with call_slot(scope):
        return await _call_tool(
            scope, tool_name, positional_json, named_json, on_waiting, traceparent, detached, call_id
        )


async def _call_tool(
    scope: CommandScope,
    tool_name: str,
    positional_json: bytes,
    named_json: bytes,
    on_waiting: approvals.OnWaiting | None,
    traceparent: str,
    detached: bool,
    call_id: tuple[str, int] | None,
) -> CallOutcome:
    options = scope.options
    size = len(tool_name) + len(positional_json) + len(named_json)
    if size > options.max_request_bytes:
        raise ProtocolError(
            "RESOURCE_EXHAUSTED",
            f"the call is {size} bytes; a call may be at most {options.max_request_bytes} bytes",
        )
    tool = scope.tools.get(tool_name)
    if tool is None:
        # The same answer for a tool that does not exist and one given to another command.
        raise ProtocolError("NOT_FOUND", f"no tool named {tool_name!r} for {scope.caller}")
    positional, named = _parse_arguments(positional_json, named_json)
    if tool.input_may_hold_secrets:  # journaled (and keyed) with each secret as its keyed hash
        input_json = _call_input(*journaled_arguments(tool, positional, named, scope.run.secrets))
    else:
        input_json = _call_input(positional, named)
    prefix = f"{scope.command_key}/" if scope.command_key else ""  # no command: the host called
    base = f"{prefix}{tool_name}@{digest(input_json, 12)}"
    key = None if call_id is None else scope.sent.get(call_id)
    if key is None or key.partition("#")[0] != base:  # a first sending (an id reused for
        # another call is a new call too): counted, and given the next occurrence's key
        scope.calls += 1
        allowed = (
            scope.calls <= options.max_calls if scope.count_call is None else await scope.count_call(scope)
        )
        if not allowed:
            scope.stop.note("max_calls")  # the outcome says so even if the command ends first
            asyncio.get_running_loop().call_later(STOP_GRACE, scope.stop.stop, "max_calls")
            return CallOutcome(
                "",
                error=ToolError(
                    f"{scope.caller} made more than {options.max_calls} tool calls; "
                    + ("it is being stopped" if scope.caller == "this command" else "it may make no more"),
                    type="MaxCallsExceeded",
                ),
            )
        key = await scope.keys.key(base)
        if call_id is not None:
            scope.remember(call_id, key)
    run = scope.run
    recorded = await run.claim(key, by=scope.keys)
    if recorded is not None and recorded.done:
        tracing.replayed(recorded, scope.trace_context)
        return _outcome(recorded, replayed=True, box=scope.run.secrets)

    step = _run_lean_step if recorded is None and _is_lean(tool) else _run_tool_step

    async def work() -> CallOutcome:
        with tracing.tool_trace(
            run_id=run.run_id,
            tool_name=tool_name,
            key=key,
            traceparent=traceparent,
            scope_context=scope.trace_context,
            from_host=not scope.command_key,
        ) as span:
            if step is _run_lean_step:
                outcome = await step(scope, tool, tool_name, key, input_json, positional, named, named_json)
            else:
                outcome = await _run_tool_step(
                    scope, tool, tool_name, key, input_json, positional, named, named_json, on_waiting
                )
            record = run.record(key)
            # The journal's form: a secret in the result stays sealed in the span.
            shown = record.output_json if record is not None else outcome.result_json
            span.finish(record, outcome.error, shown)
        return outcome

    return await run.single_flight(key, work, shield=True, detached=detached)


def _is_lean(tool: Tool) -> bool:
    """Whether a call of ``tool`` may take the lean path: nothing around the tool to run."""
    return (
        tool.on_start is None
        and tool.on_finish is None
        and tool.on_error is None
        and not tool.at_most_once
        and tool.kind != "group"
        and not tool.requires_confirmation
        and tool.human is None
    )


async def _run_lean_step(
    scope: CommandScope,
    tool: Tool,
    tool_name: str,
    key: str,
    input_json: str,
    positional: list[Any],
    named: dict[str, Any],
    named_json: bytes,
) -> CallOutcome:
    """:func:`_run_tool_step` for the common tool (see :func:`_is_lean`), a first call of its key.

    The same guarantees (single flight and shielding by the caller, attempts, ``tool_timeout``,
    the outcome committed before the reply, the failpoints), without what only hooks, groups
    and at-most-once tools need: no hook calls, and no context built for a handler that takes
    none (a plain callable).
    """
    run = scope.run
    if await run.take(key) is not None:  # recorded while we waited to start: the general path decides
        return await _run_tool_step(scope, tool, tool_name, key, input_json, positional, named, named_json)
    _failpoints.hit("before_step_started")
    rec = run.new_step(
        key, parent_key=scope.command_key or None, kind="tool", name=tool_name, input_json=input_json
    )
    run.start_records.watch(rec)
    _failpoints.hit("after_step_started")
    try:
        bound = tool.bind(positional, named, named_json)
    except SchemaValidationError as exc:
        return await _finish(rec, scope, error=ToolError(f"invalid arguments: {exc}", type="ValidationError"))
    takes_context = tool.kind != "function" and tool.handler_takes_context

    def attempt(number: int) -> Awaitable[Any]:  # the handler's own awaitable: no layer between
        context = _context(scope, rec, number, tool_name) if takes_context else None
        return _failpoints.during("while_tool_runs", tool.run_handler(bound, context))

    return await _attempts_then_finish(scope, tool, tool_name, rec, attempt)


def _context(scope: CommandScope, rec: StepRecord, number: int, tool_name: str) -> ToolContext:
    return ToolContext(
        run_id=scope.run.run_id,
        step_key=rec.key,
        idempotency_key=rec.idempotency_key,
        attempt=number,
        tool_name=tool_name,
        step=scope.steps_factory(scope.run, rec.key, scope.options),
        state=scope.run.memory,
    )


async def _run_tool_step(
    scope: CommandScope,
    tool: Tool,
    tool_name: str,
    key: str,
    input_json: str,
    positional: list[Any],
    named: dict[str, Any],
    named_json: bytes,
    on_waiting: approvals.OnWaiting | None = None,
) -> CallOutcome:
    run = scope.run
    journal = run.journal
    rec = await run.take(key)
    if rec is not None and rec.done:  # finished while we waited to start
        return _outcome(rec, replayed=True, box=scope.run.secrets)
    _failpoints.hit("before_step_started")
    if rec is None:
        rec = run.new_step(
            key, parent_key=scope.command_key or None, kind="tool", name=tool_name, input_json=input_json
        )
        if tool.at_most_once:
            # The record that the tool started must be on disk before it can run at all.
            await journal.write(rec)
        else:
            # A fast call reaches the journal once, with its outcome. Nothing is lost without
            # a start record: a crash re-runs the call on replay, with the same idempotency
            # key, either way. A call still running after a moment is recorded as running, so
            # that the trace shows it.
            run.start_records.watch(rec)
    elif tool.at_most_once and not approvals.was_waiting(rec):
        # A crash interrupted this call after it may have started: never run it again.
        return await _finish(
            rec,
            scope,
            error=ToolError(
                "this call was interrupted before its outcome was recorded, and the tool is "
                "declared at-most-once, so it was not run again",
                type="StepInterrupted",
            ),
        )
    _failpoints.hit("after_step_started")
    try:
        bound = tool.bind(positional, named, named_json)
    except SchemaValidationError as exc:
        return await _finish(rec, scope, error=ToolError(f"invalid arguments: {exc}", type="ValidationError"))
    try:
        bound = await start_hook(tool, bound, rec)
    except ToolError as exc:
        return await _finish(rec, scope, error=exc)
    verdict = await approvals.gate(scope, tool, tool_name, rec, bound, on_waiting)
    if verdict is not None:  # it needed a person, who said no (or answered), or it still waits
        if verdict.suspended is not None:
            return CallOutcome(key, error=verdict.suspended)  # not recorded: the step waits on
        return await _finish(rec, scope, result=verdict.result, error=verdict.error)

    async def attempt(number: int) -> Any:
        context = ToolContext(
            run_id=run.run_id,
            step_key=key,
            idempotency_key=rec.idempotency_key,
            attempt=number,
            tool_name=tool_name,
            step=scope.steps_factory(run, key, scope.options),
            state=run.memory,
        )
        value = await _failpoints.during("while_tool_runs", tool.run_handler(bound, context))
        if tool.kind == "group":
            await run.mark_stale(key)
        return value

    return await _attempts_then_finish(scope, tool, tool_name, rec, attempt)


async def _attempts_then_finish(
    scope: CommandScope, tool: Tool, tool_name: str, rec: StepRecord, attempt: Callable[[int], Awaitable[Any]]
) -> CallOutcome:
    """What both paths do once the tool may run: its attempts, ``on_finish``, the outcome
    validated and committed before the reply."""
    try:
        value = await run_attempts(
            rec,
            attempt,
            attempts=tool.attempts or scope.options.attempts,
            options=scope.options,
            journal=scope.run.journal,
            timeout=tool.timeout or scope.options.tool_timeout,
            what=f"tool {tool_name!r}",
        )
    except ToolError as exc:
        return await _finish(rec, scope, error=await error_hook(tool, tool_name, exc, rec))
    _failpoints.hit("after_tool_returned")
    if tool.on_finish is not None:  # (never on the lean path)
        try:
            value = await finish_hook(tool, tool_name, value, rec)
        except ToolError as exc:
            return await _finish(rec, scope, error=await error_hook(tool, tool_name, exc, rec))
    result = _result_json(tool, tool_name, value, rec, scope)
    if isinstance(result, ToolError) and tool.on_error is not None:
        result = await error_hook(tool, tool_name, result, rec)
    return await _finish(rec, scope, result=result)


def _result_json(
    tool: Tool, tool_name: str, value: Any, rec: StepRecord, scope: CommandScope
) -> str | ToolError:
    """Validate and serialize a result (each secret sealed), or say why it cannot be sent."""
    options = scope.options
    try:
        text = journaled_result(tool, value, scope.run.secrets)
    except Exception as exc:
        kind: Kind = "OutputValidationError" if isinstance(exc, SchemaValidationError) else "InternalError"
        caught = catch(exc, what=f"tool {tool_name!r}", kind=kind)
        rec.attempt_log[-1]["output_error"] = caught.entry
        return caught.error
    size = len(text.encode())
    if size > options.max_reply_bytes:
        return ToolError(
            f"tool {tool_name!r} returned {size} bytes; a reply may be at most "
            f"{options.max_reply_bytes} bytes, so return less (for example, a page at a time)",
            type="ReplyTooLarge",
        )
    return text


async def _finish(
    rec: StepRecord,
    scope: CommandScope,
    *,
    result: str | ToolError | None = None,
    error: ToolError | None = None,
) -> CallOutcome:
    """Record the outcome and wait for the commit: a reply never runs ahead of the journal."""
    if isinstance(result, ToolError):
        error, result = result, None
    if error is not None:
        rec.fail(error.to_dict())
    else:
        assert result is not None
        rec.complete(result)
    try:
        await scope.run.journal.write(rec)
    except JournalError:
        # The outcome is not on disk, so it must not be in memory either: a replay while the
        # run is live then does what it does after a crash (runs the call again, with the
        # same idempotency key, or refuses an at-most-once tool), and no reply runs ahead of
        # the journal. The server answers UNAVAILABLE.
        rec.take_back()
        raise
    _failpoints.hit("after_result_recorded")
    return _outcome(rec, replayed=False, box=scope.run.secrets)
