"""OpenTelemetry spans for runs, commands and tool calls, through the API alone.

``opentelemetry-api`` is a no-op until the application configures an SDK, so every function
here costs next to nothing in a host that does not trace. When one is configured:

- each entry of a run is a span ``toolbridge.run`` (current while the run's body runs);
- each command (and runner snippet) is a span ``toolbridge.command {name}``, a child of the run,
  whose W3C context the command receives as ``TRACEPARENT``;
- each tool call that runs is a span ``execute_tool {name}`` with the GenAI semantic
  conventions, a child of the caller's context when the call carries one (the sandbox's own
  span), else of its command, else of the current span (a host call). Attempts and hooks are
  its events, at the times the journal recorded.

A call answered from the journal (replay) runs nothing, so it makes no span: it would
duplicate the span of the execution that recorded it. It leaves a ``toolbridge.replayed``
event on its command's span (or the current one) instead. The API gives a caller no say
over span ids, so live spans carry the ids the SDK picks; ``toolbridge trace --export``
(:mod:`toolbridge._telemetry.otlp`) rebuilds a run from the journal with ids derived from the
run id, the step key and its attempts, so exporting a run twice yields the same spans.

Arguments and results go on spans only when ``TOOLBRIDGE_TRACE_CONTENT=1``: they may hold
what the tools' owners never meant to leave the host.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from toolbridge._errors import ToolError
from toolbridge._records import StepRecord, now

__all__ = [
    "CONTENT_VARIABLE",
    "CommandTrace",
    "RunTrace",
    "ToolTrace",
    "command_trace",
    "entry_event",
    "parse_traceparent",
    "replayed",
    "resumed",
    "run_trace",
    "tool_trace",
    "traceparent_of",
    "waiting",
]

TRACER_NAME = "toolbridge"
CONTENT_VARIABLE = "TOOLBRIDGE_TRACE_CONTENT"
"""Set to ``1`` to put tool arguments and results on spans (off by default)."""

# GenAI semantic conventions (execute_tool spans) and toolbridge's own attributes.
OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
CALL_ID = "gen_ai.tool.call.id"
CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
RUN_ID = "toolbridge.run.id"
STEP_KEY = "toolbridge.step.key"
STEP_KIND = "toolbridge.step.kind"
IDEMPOTENCY_KEY = "toolbridge.idempotency_key"
WAITING = "toolbridge.waiting"

# version-format "-" trace-id "-" parent-id "-" trace-flags, lowercase hex (W3C Trace Context).
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@functools.cache
def _tracer() -> trace.Tracer:
    # Asked for once: before an SDK is configured this is a proxy that finds it later, and
    # asking the SDK again on every span costs as much as making the span.
    return trace.get_tracer(TRACER_NAME)


def content_enabled() -> bool:
    """Whether arguments and results may go on spans (``TOOLBRIDGE_TRACE_CONTENT=1``)."""
    return os.environ.get(CONTENT_VARIABLE, "").strip().lower() in {"1", "true", "yes"}


def traceparent_of(span_context: SpanContext) -> str | None:
    """The W3C ``traceparent`` of a span, or ``None`` for an invalid (untraced) one."""
    if not span_context.is_valid:
        return None
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"


def parse_traceparent(value: str) -> SpanContext | None:
    """The remote span a ``traceparent`` names, or ``None`` when it is empty or invalid.

    An invalid value is ignored rather than refused, as W3C Trace Context asks: tracing
    never fails a call.
    """
    match = _TRACEPARENT.match(value.strip()) if value and len(value) <= 64 else None
    if match is None:
        return None
    version, trace_id, span_id, flags = match.groups()
    if version == "ff" or (version == "00" and len(value.strip()) != 55):
        return None
    context = SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))
    )
    return context if context.is_valid else None


class RunTrace:
    """The span of one entry of a run, current from :func:`run_trace` until :meth:`end`."""

    def __init__(self, run_id: str) -> None:
        self.span = _tracer().start_span(
            "toolbridge.run", kind=SpanKind.INTERNAL, attributes={RUN_ID: run_id}
        )
        self._token: object | None = otel_context.attach(trace.set_span_in_context(self.span))

    def fail(self, exc: BaseException) -> None:
        self.span.record_exception(exc)
        self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self.span.set_attribute(ERROR_TYPE, type(exc).__name__)

    def end(self) -> None:
        """End the span and restore the context (once; later calls do nothing)."""
        if self._token is None:
            return
        otel_context.detach(self._token)  # type: ignore[arg-type]
        self._token = None
        self.span.end()


def run_trace(run_id: str) -> RunTrace:
    """Start the span of a run's entry and make it current; the caller must :meth:`~RunTrace.end` it."""
    return RunTrace(run_id)


class CommandTrace:
    """A command's span: its calls' parent, and the ``TRACEPARENT`` the command gets."""

    def __init__(self, run_id: str, key: str, *, kind: str, name: str) -> None:
        self.span = _tracer().start_span(
            f"toolbridge.{kind} {name}",
            kind=SpanKind.INTERNAL,
            attributes={RUN_ID: run_id, STEP_KEY: key, STEP_KIND: kind},
        )
        self.context: Context = trace.set_span_in_context(self.span)
        self._ended = False

    def environment(self, given: Mapping[str, str] | None) -> dict[str, str]:
        """``{"TRACEPARENT": ...}`` for the command, unless untraced or given by the caller."""
        value = traceparent_of(self.span.get_span_context())
        if value is None or (given is not None and "TRACEPARENT" in given):
            return {}
        return {"TRACEPARENT": value}

    def finish(self, exit_code: int, stopped: str | None) -> None:
        self.span.set_attribute("process.exit.code", exit_code)
        if stopped:
            self.span.set_attribute("toolbridge.command.stopped", stopped)
        if exit_code != 0:
            self.span.set_status(Status(StatusCode.ERROR, f"exit code {exit_code}"))
            self.span.set_attribute(ERROR_TYPE, stopped or "exit_code")

    def fail(self, exc: BaseException) -> None:
        self.span.record_exception(exc)
        self.span.set_status(Status(StatusCode.ERROR, str(exc)))
        self.span.set_attribute(ERROR_TYPE, type(exc).__name__)

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self.span.end()


def command_trace(run_id: str, key: str, *, kind: str, name: str) -> CommandTrace:
    """Start a command's span, a child of the current one (the run's)."""
    return CommandTrace(run_id, key, kind=kind, name=name)


def _parent(traceparent: str, scope_context: Context | None, from_host: bool) -> Context:
    remote = parse_traceparent(traceparent)
    if remote is not None:
        return trace.set_span_in_context(trace.NonRecordingSpan(remote))
    if scope_context is not None:
        return scope_context
    # A host call runs in the host's own context; a call from elsewhere (a sidecar token)
    # must not inherit whatever was current when the server started: a root span.
    return otel_context.get_current() if from_host else Context()


class ToolTrace:
    """The ``execute_tool`` span of one call that runs; current while it runs."""

    def __init__(self, span: Span, started_at: float) -> None:
        self.span = span
        self._started_at = started_at

    def finish(self, rec: StepRecord | None, error: ToolError | None, result_json: str | None) -> None:
        """Add the attempts and hooks the journal recorded, and the outcome."""
        span = self.span
        if not span.is_recording():
            return  # no SDK, or not sampled: nothing would keep what is added
        if rec is not None:
            span.set_attribute(IDEMPOTENCY_KEY, rec.idempotency_key)
            for entry in rec.attempt_log:
                _add_entry_event(span, entry, since=self._started_at)
            if content_enabled() and rec.input_json is not None:
                span.set_attribute(CALL_ARGUMENTS, rec.input_json)
        if error is not None:
            span.set_attribute(ERROR_TYPE, error.type or "ToolError")
            span.set_status(Status(StatusCode.ERROR, error.message))
        elif content_enabled() and result_json is not None:
            span.set_attribute(CALL_RESULT, result_json)


_UNTRACED = ToolTrace(trace.INVALID_SPAN, 0.0)
_NOT_TRACED = nullcontext(_UNTRACED)  # one for every untraced call: entering it costs nothing


def _untraced() -> bool:
    """Whether no tracer provider is set up, so that no span could be recorded.

    Asked on every call. Until a provider is set, ``get_tracer_provider()`` looks for
    ``OTEL_PYTHON_TRACER_PROVIDER`` in ``os.environ`` each time (a few microseconds on the
    hot path); the provider it finds or is given lands in ``trace._TRACER_PROVIDER``, set
    once, so that global is read first and the public call made only while it is unset and
    the environment names a provider.
    """
    provider = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None and not _PROVIDER_FROM_ENVIRONMENT:
        return True
    if provider is None or provider is _UNKNOWN:
        provider = trace.get_tracer_provider()
    return isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


_UNKNOWN = object()  # a version of opentelemetry-api without that global: ask the public call
_PROVIDER_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def entry_event(entry: Mapping[str, Any]) -> tuple[str, dict[str, Any], int] | None:
    """An attempt or hook entry of a step's ``attempt_log`` as a span event.

    Returns:
        ``(name, attributes, timestamp in ns)``, or ``None`` for an entry without times.
    """
    started = entry.get("started_at")
    if not isinstance(started, (int, float)):
        return None
    finished = entry.get("finished_at") or started
    attributes: dict[str, Any] = {}
    error = entry.get("error")
    if isinstance(error, Mapping):
        attributes[ERROR_TYPE] = str(error.get("type") or "error")
        if error.get("error_id"):
            attributes["toolbridge.error_id"] = str(error["error_id"])
    stamp = int(finished * 1_000_000_000)
    if "attempt" in entry:
        attributes["toolbridge.attempt"] = int(entry["attempt"])
        attributes["toolbridge.duration_s"] = float(finished - started)
        return "toolbridge.attempt", attributes, stamp
    if "hook" in entry:
        attributes["toolbridge.hook"] = str(entry["hook"])
        attributes["toolbridge.hook.changed"] = "input" in entry or "tool_result" in entry
        return "toolbridge.hook", attributes, stamp
    return None


def _add_entry_event(span: Span, entry: Mapping[str, Any], *, since: float) -> None:
    if entry.get("started_at", 0) < since:
        return  # an entry of an earlier execution (before a crash): not this span's
    event = entry_event(entry)
    if event is not None:
        name, attributes, stamp = event
        span.add_event(name, attributes, timestamp=stamp)


def tool_trace(
    *,
    run_id: str,
    tool_name: str,
    key: str,
    traceparent: str,
    scope_context: Context | None,
    from_host: bool,
) -> AbstractContextManager[ToolTrace]:
    """An ``execute_tool {name}`` span, current inside the block (hooks, attempts, steps).

    Args:
        traceparent: The caller's context from the wire (may be empty or invalid).
        scope_context: The command's span context, for calls that carry none.
        from_host: Whether the host itself made the call (it may inherit the current span).
    """
    if _untraced():
        return _NOT_TRACED  # nothing would record the span: no context to build and switch to
    return _tool_span(run_id, tool_name, key, _parent(traceparent, scope_context, from_host))


@contextmanager
def _tool_span(run_id: str, tool_name: str, key: str, parent: Context) -> Iterator[ToolTrace]:
    started_at = now()
    span = _tracer().start_span(
        f"execute_tool {tool_name}",
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes={
            OPERATION: "execute_tool",
            TOOL_NAME: tool_name,
            TOOL_TYPE: "function",
            CALL_ID: key,
            RUN_ID: run_id,
        },
    )
    with trace.use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True):
        yield ToolTrace(span, started_at)


def replayed(rec: StepRecord, scope_context: Context | None) -> None:
    """Note a call answered from the journal, on its command's span (or the current one)."""
    span = trace.get_current_span(scope_context)
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {TOOL_NAME: rec.name, CALL_ID: rec.key, "toolbridge.step.status": rec.status}
    if rec.error:
        attributes[ERROR_TYPE] = str(rec.error.get("type") or "ToolError")
    span.add_event("toolbridge.replayed", attributes)


# The seam for a person in the loop: the call that waits marks its span, and the call that
# resumes (another span, maybe in another process) links to it.


def waiting(reason: str) -> str | None:
    """Mark the current ``execute_tool`` span as waiting on a person.

    Call it from the code that parks a call for a decision; the span then ends, when the
    call returns, as waiting (attribute ``toolbridge.waiting``, no error status).

    Returns:
        The span's ``traceparent``, to keep with the pending request (``None`` untraced),
        for :func:`resumed` to link to.
    """
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    span.set_attribute(WAITING, reason)
    span.add_event("toolbridge.waiting", {WAITING: reason})
    return traceparent_of(span.get_span_context())


def resumed(waiting_traceparent: str | None) -> None:
    """Link the current ``execute_tool`` span to the span that waited (see :func:`waiting`)."""
    remote = parse_traceparent(waiting_traceparent or "")
    span = trace.get_current_span()
    if remote is None or not span.is_recording():
        return
    span.add_link(remote, {"toolbridge.link": "resumed_from_waiting"})
    span.add_event("toolbridge.resumed", {"toolbridge.resumed_from": waiting_traceparent or ""})
