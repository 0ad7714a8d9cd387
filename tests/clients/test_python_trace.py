"""The Python client's trace context: from a span the process has, else from TRACEPARENT."""

from __future__ import annotations

import subprocess
import sys

FROM_ENV = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

# OpenTelemetry's API and SDK are installed in the interpreter this runs with (the test venv).
PROBE = """
import sys
from inngest_tools._trace import current_traceparent
print(current_traceparent())
print("opentelemetry.trace" in sys.modules)
if sys.argv[1] == "span":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    trace.set_tracer_provider(TracerProvider())
    with trace.get_tracer("t").start_as_current_span("s") as span:
        context = span.get_span_context()
        flags = int(context.trace_flags)
        print(current_traceparent() == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}")
"""


def _probe(mode: str) -> list[str]:
    env = {"TRACEPARENT": FROM_ENV, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.split()


def test_a_process_that_never_imported_opentelemetry_sends_traceparent_and_never_loads_it() -> None:
    assert _probe("plain") == [FROM_ENV, "False"]


def test_the_current_span_of_a_process_that_uses_opentelemetry_goes_with_the_call() -> None:
    assert _probe("span") == [FROM_ENV, "False", "True"]
