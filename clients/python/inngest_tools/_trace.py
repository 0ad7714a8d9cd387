"""The caller's trace context for each call, so spans made in the sandbox join the host's trace.

The client never depends on OpenTelemetry: when the process uses it (``opentelemetry.trace`` is
imported) and a span is current, its W3C ``traceparent`` goes with the call; otherwise the
``TRACEPARENT`` the daemon gave the command (its command's span) does, and with neither,
nothing. A span can only be current in a process that imported the API, so the client looks
in ``sys.modules`` on each call rather than importing it: a sandbox without OpenTelemetry
pays no import search, and one with it installed but unused never loads it.
"""

from __future__ import annotations

import os
import sys

TRACEPARENT_VARIABLE = "TRACEPARENT"
_TRACE_MODULE = "opentelemetry.trace"


def current_traceparent() -> str:
    """The ``traceparent`` of the current span, else ``$TRACEPARENT``, else ``""``."""
    trace = sys.modules.get(_TRACE_MODULE)
    if trace is not None:
        try:
            context = trace.get_current_span().get_span_context()
        except Exception:  # a broken tracing setup never fails a tool call
            context = None
        if context is not None and context.is_valid:
            return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    return os.environ.get(TRACEPARENT_VARIABLE, "")
