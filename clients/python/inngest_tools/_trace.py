"""The caller's trace context for each call, so spans made in the sandbox join the host's trace.

The client never depends on OpenTelemetry: when ``opentelemetry`` is importable and a span is
current, its W3C ``traceparent`` goes with the call; otherwise the ``TRACEPARENT`` the daemon
gave the command (its command's span) does, and with neither, nothing.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

TRACEPARENT_VARIABLE = "TRACEPARENT"

_trace_api: Any = None
_looked_up = False


def _opentelemetry_trace() -> Any:
    """``opentelemetry.trace`` if the sandbox has it, else ``None`` (looked up once)."""
    global _trace_api, _looked_up
    if not _looked_up:
        _looked_up = True
        try:
            _trace_api = importlib.import_module("opentelemetry.trace")
        except ImportError:
            _trace_api = None
    return _trace_api


def current_traceparent() -> str:
    """The ``traceparent`` of the current span, else ``$TRACEPARENT``, else ``""``."""
    trace = _opentelemetry_trace()
    if trace is not None:
        try:
            context = trace.get_current_span().get_span_context()
        except Exception:  # a broken tracing setup never fails a tool call
            context = None
        if context is not None and context.is_valid:
            return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    return os.environ.get(TRACEPARENT_VARIABLE, "")
