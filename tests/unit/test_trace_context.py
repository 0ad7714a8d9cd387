"""The pure parts of tracing: reading a traceparent, derived span ids, the export's refusals."""

from __future__ import annotations

import sys

import pytest
from opentelemetry.trace import SpanContext, StatusCode, TraceFlags

from toolbridge._errors import ToolbridgeError
from toolbridge._records import RunSummary, StepRecord
from toolbridge._telemetry import otlp, tracing

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        VALID.upper(),  # W3C: lowercase hex only
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero span id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # forbidden version
        VALID + "-extra",  # version 00 has exactly four fields
        VALID + "x" * 100,
    ],
)
def test_an_invalid_traceparent_is_ignored(value: str) -> None:
    assert tracing.parse_traceparent(value) is None


def test_a_valid_traceparent_names_a_remote_span_and_round_trips() -> None:
    context = tracing.parse_traceparent(VALID)
    assert context is not None
    assert context.is_remote
    assert context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert context.span_id == 0x00F067AA0BA902B7
    assert context.trace_flags.sampled
    assert tracing.traceparent_of(context) == VALID
    # A later version, in the same four fields, is read too.
    assert tracing.parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") is not None


def test_an_untraced_span_has_no_traceparent() -> None:
    assert tracing.traceparent_of(SpanContext(0, 0, is_remote=False, trace_flags=TraceFlags(0))) is None


def test_export_ids_are_derived_from_run_step_and_attempts() -> None:
    assert otlp.trace_id_for("order-7") == otlp.trace_id_for("order-7")
    assert otlp.trace_id_for("order-7") != otlp.trace_id_for("order-8")
    ids = {otlp.span_id_for("r", key, attempts) for key in ("", "a", "a/t@x") for attempts in (0, 1, 2)}
    assert len(ids) == 9
    assert all(0 < span_id < 2**64 for span_id in ids)


def _run(status: str = "completed", finished_at: float | None = 2.0) -> RunSummary:
    return RunSummary("r", status, 1.0, 2.0, finished_at, 1, 1, None)  # type: ignore[arg-type]


def _step() -> StepRecord:
    return StepRecord("r", "a", None, 1, "tool", "a", "tbk_x", started_at=1.1, status="running")


def test_a_step_left_running_by_a_crash_ends_with_its_run() -> None:
    (run_span, step_span) = otlp.run_spans(_run(), [_step()])
    assert step_span.end_time == run_span.end_time == 2_000_000_000
    assert step_span.parent is not None
    assert step_span.parent.span_id == run_span.context.span_id
    assert dict(step_span.attributes or {})["toolbridge.step.status"] == "running"


def test_a_running_run_is_not_exported() -> None:
    with pytest.raises(ToolbridgeError, match="still running"):
        otlp.run_spans(_run("running", None), [])


def test_without_the_extra_the_export_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ToolbridgeError, match=r"pip install 'toolbridge\[otlp\]'"):
        otlp.export_run(_run(), [_step()], endpoint="http://127.0.0.1:9/v1/traces")
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ToolbridgeError, match=r"needs the OpenTelemetry SDK: pip install"):
        otlp.run_spans(_run(), [_step()])


def test_a_command_that_exited_non_zero_is_an_error_in_the_export_as_live() -> None:
    command = StepRecord("r", "agent", None, 1, "command", "agent", "tbk_c", started_at=1.1)
    command.complete('{"exit_code": -9, "stdout": "", "stderr": "", "stopped": "timeout"}')
    (_, span) = otlp.run_spans(_run(), [command])
    attributes = dict(span.attributes or {})
    assert attributes["process.exit.code"] == -9
    assert attributes["error.type"] == "timeout"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "exit code -9"
