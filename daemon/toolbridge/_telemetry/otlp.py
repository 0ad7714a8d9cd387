"""A finished run rebuilt from its journal as OpenTelemetry spans, and sent over OTLP.

``toolbridge trace RUN --export otlp[=URL]`` uses it. The spans are the ones a live host
would make (:mod:`toolbridge._telemetry.tracing`): the run, its commands, its tool calls with
the GenAI attributes, attempts and hooks as events, at the times the journal recorded. Their
ids are derived, not random: the trace id from the run id, a span id from the run id, the
step key and the step's attempt count. Exporting the same run twice sends the same spans (a
backend keeps one copy), and a step that ran again after a crash is a new span.

Needs ``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-http``, the ``otlp`` extra
(``pip install 'toolbridge[otlp]'``); they are imported only when a run is exported.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from toolbridge._errors import ToolbridgeError
from toolbridge._records import RunSummary, StepRecord
from toolbridge._telemetry import tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["ExportReport", "export_run", "run_spans", "span_id_for", "trace_id_for"]

EXTRA_HINT = "pip install 'toolbridge[otlp]'"


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(("toolbridge", *parts)).encode()).digest()


def trace_id_for(run_id: str) -> int:
    """The trace id of a run's export: 128 bits derived from the run id (never zero)."""
    return int.from_bytes(_digest("trace", run_id)[:16], "big") or 1


def span_id_for(run_id: str, step_key: str, attempts: int) -> int:
    """A span id derived from the run, the step key (``""`` for the run) and the attempt count."""
    return int.from_bytes(_digest("span", run_id, step_key, str(attempts))[:8], "big") or 1


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


@dataclass(frozen=True)
class ExportReport:
    """What an export sent: the trace id (hex) and the number of spans."""

    trace_id: str
    spans: int


def _step_attributes(step: StepRecord, content: bool) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        tracing.RUN_ID: step.run_id,
        tracing.STEP_KEY: step.key,
        tracing.STEP_KIND: step.kind,
        tracing.IDEMPOTENCY_KEY: step.idempotency_key,
        "toolbridge.step.status": step.status,
        "toolbridge.attempts": step.attempts,
    }
    if step.stale:
        attributes["toolbridge.step.stale"] = True
    if step.kind == "tool":
        attributes.update(
            {
                tracing.OPERATION: "execute_tool",
                tracing.TOOL_NAME: step.name,
                tracing.TOOL_TYPE: "function",
                tracing.CALL_ID: step.key,
            }
        )
        if content and step.input_json is not None:
            attributes[tracing.CALL_ARGUMENTS] = step.input_json
        if content and step.output_json is not None:
            attributes[tracing.CALL_RESULT] = step.output_json
    elif step.kind != "tool" and step.output_json is not None:
        recorded = json.loads(step.output_json)
        if isinstance(recorded, dict) and isinstance(recorded.get("exit_code"), int):
            attributes["process.exit.code"] = recorded["exit_code"]
            if recorded.get("stopped"):
                attributes["toolbridge.command.stopped"] = str(recorded["stopped"])
            if recorded["exit_code"] != 0:  # as the live span says it
                attributes[tracing.ERROR_TYPE] = str(recorded.get("stopped") or "exit_code")
    if step.error is not None:
        attributes[tracing.ERROR_TYPE] = str(step.error.get("type") or "error")
    return attributes


def _events(step: StepRecord) -> list[Any]:
    from opentelemetry.sdk.trace import Event

    events = (tracing.entry_event(entry) for entry in step.attempt_log)
    return [Event(name, attributes, stamp) for name, attributes, stamp in filter(None, events)]


def run_spans(run: RunSummary, steps: Sequence[StepRecord], *, content: bool = False) -> list[ReadableSpan]:
    """The spans of a recorded run, parents before children.

    Args:
        content: Put arguments and results on the tool spans.

    Raises:
        ToolbridgeError: when the run has not finished, or the SDK is not installed.
    """
    if run.finished_at is None or run.status == "running":
        raise ToolbridgeError(f"run {run.run_id!r} is still running: export it once it has finished")
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    except ImportError as exc:
        raise ToolbridgeError(f"exporting a trace needs the OpenTelemetry SDK: {EXTRA_HINT}") from exc
    trace_id = trace_id_for(run.run_id)
    resource = Resource.create({"service.name": "toolbridge"})
    scope = InstrumentationScope(tracing.TRACER_NAME)

    def context(span_id: int) -> SpanContext:
        return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    run_context = context(span_id_for(run.run_id, "", 0))
    run_status = (
        Status(StatusCode.ERROR, run.error or "the run failed") if run.status == "failed" else Status()
    )
    spans = [
        ReadableSpan(
            name="toolbridge.run",
            context=run_context,
            resource=resource,
            attributes={tracing.RUN_ID: run.run_id, "toolbridge.run.entries": run.entries},
            kind=SpanKind.INTERNAL,
            status=run_status,
            start_time=_ns(run.started_at),
            end_time=_ns(run.finished_at),
            instrumentation_scope=scope,
        )
    ]
    by_key = {step.key: step for step in steps}
    for step in sorted(steps, key=lambda s: s.seq):
        parent = by_key.get(step.parent_key or "")
        parent_context = (
            run_context if parent is None else context(span_id_for(run.run_id, parent.key, parent.attempts))
        )
        name = f"execute_tool {step.name}" if step.kind == "tool" else f"toolbridge.{step.kind} {step.name}"
        attributes = _step_attributes(step, content)
        exit_code = attributes.get("process.exit.code", 0)
        failed = step.status == "failed" or exit_code != 0
        message = str((step.error or {}).get("message") or f"exit code {exit_code}")
        spans.append(
            ReadableSpan(
                name=name,
                context=context(span_id_for(run.run_id, step.key, step.attempts)),
                parent=parent_context,
                resource=resource,
                attributes=attributes,
                events=_events(step),
                kind=SpanKind.INTERNAL,
                status=Status(StatusCode.ERROR, message) if failed else Status(),
                start_time=_ns(step.started_at),
                # A step left running by a crash ends, in the trace, when its run did.
                end_time=_ns(step.finished_at if step.finished_at is not None else run.finished_at),
                instrumentation_scope=scope,
            )
        )
    return spans


def export_run(
    run: RunSummary, steps: Sequence[StepRecord], *, endpoint: str | None, content: bool = False
) -> ExportReport:
    """Send a finished run's spans over OTLP/HTTP (protobuf).

    Args:
        endpoint: The collector's traces URL; ``None`` for the exporter's default
            (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``http://localhost:4318/v1/traces``).
        content: Put arguments and results on the tool spans.

    Raises:
        ToolbridgeError: when the run is not finished, the extra is missing, or the
            collector refused the spans or could not be reached.
    """
    spans = run_spans(run, steps, content=content)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ImportError as exc:
        raise ToolbridgeError(f"exporting over OTLP needs the OTLP exporter: {EXTRA_HINT}") from exc
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=30)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    if result is not SpanExportResult.SUCCESS:
        where = endpoint or "the default OTLP endpoint"
        raise ToolbridgeError(f"the OTLP collector at {where} did not accept the spans (see the log above)")
    return ExportReport(trace_id=f"{trace_id_for(run.run_id):032x}", spans=len(spans))
