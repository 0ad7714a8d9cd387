"""`toolbridge trace RUN --export otlp=URL`, run as a user would, against a tiny OTLP receiver.

The receiver is a plain HTTP server on loopback that decodes each request body as OTLP's
``ExportTraceServiceRequest`` (protobuf), as a collector would.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from toolbridge import Bridge, ToolError, ToolOptions
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import StepRecord
from toolbridge._telemetry.otlp import span_id_for, trace_id_for

CLI = Path(sys.executable).with_name("toolbridge")


@dataclass
class Receiver:
    """What the receiver got: one decoded request per POST, and the paths posted to."""

    url: str
    status: int = 200
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def spans(self, index: int = -1) -> list[Any]:
        request = self.requests[index]
        return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            assert self.headers["Content-Type"] == "application/x-protobuf"
            state.paths.append(self.path)
            state.requests.append(ExportTraceServiceRequest.FromString(body))
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def toolbridge(*args: str, content: bool = False) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.pop("TOOLBRIDGE_TRACE_CONTENT", None)
    if content:
        env["TOOLBRIDGE_TRACE_CONTENT"] = "1"
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=60, check=False, env=env)


AGENT = (
    "import asyncio\n"
    "from inngest_tools import tools, ToolError\n"
    "async def main():\n"
    "    print(await tools.lookup('cus_1'))\n"
    "    print(await tools.flaky())\n"
    "    try:\n"
    "        await tools.charge()\n"
    "    except ToolError as error:\n"
    "        print(error.type)\n"
    "asyncio.run(main())\n"
)


@pytest.fixture
async def recorded(tmp_path: Path) -> tuple[Path, dict[str, StepRecord]]:
    """A journal holding run order-7 (a command and its three calls) and a run still running."""
    path = tmp_path / "trace.db"
    (tmp_path / "agent.py").write_text(AGENT)
    tries: list[int] = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise ToolError("busy", type="Busy", retryable=True)
        return "ok"

    def charge() -> None:
        raise ToolError("declined", type="CardDeclined")

    async with Bridge(journal=path) as bridge:
        async with bridge.run("order-7") as step:
            result = await step.sandbox.commands.run(
                "agent",
                "python3 agent.py",
                cwd=tmp_path,
                tools={"lookup": lambda customer_id: {"id": customer_id}, "flaky": flaky, "charge": charge},
                tool_options=ToolOptions(retry_backoff=0.001),
            )
        assert result.exit_code == 0, result.stderr
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        await journal.enter_run("still-going", lease=30.0)
        steps = {rec.key: rec for rec in await journal.load_steps("order-7")}
    finally:
        await journal.close()
    return path, steps


def _by_name(spans: list[Any]) -> dict[str, Any]:
    return {span.name: span for span in spans}


def _attributes(span: Any) -> dict[str, Any]:
    values = {}
    for item in span.attributes:
        value = item.value
        values[item.key] = getattr(value, value.WhichOneof("value"))
    return values


def test_a_finished_run_is_exported_as_spans_with_the_recorded_times(
    recorded: tuple[Path, dict[str, StepRecord]], receiver: Receiver
) -> None:
    path, steps = recorded
    done = toolbridge("trace", "order-7", "--journal", str(path), "--export", f"otlp={receiver.url}")
    assert done.returncode == 0, done.stderr
    trace_id = trace_id_for("order-7")
    assert done.stdout.strip() == f"exported run order-7: 5 spans, trace id {trace_id:032x}"
    assert receiver.paths == ["/v1/traces"]
    (resource_spans,) = receiver.requests[0].resource_spans
    assert {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"] == (
        "toolbridge"
    )
    spans = _by_name(receiver.spans())
    assert set(spans) == {
        "toolbridge.run",
        "toolbridge.command agent",
        "execute_tool lookup",
        "execute_tool flaky",
        "execute_tool charge",
    }
    assert {span.trace_id for span in spans.values()} == {trace_id.to_bytes(16, "big")}
    run_span, command = spans["toolbridge.run"], spans["toolbridge.command agent"]
    assert run_span.parent_span_id == b""
    assert command.parent_span_id == run_span.span_id
    command_step = steps["agent"]
    assert command.span_id == span_id_for("order-7", "agent", command_step.attempts).to_bytes(8, "big")
    assert command.start_time_unix_nano == int(command_step.started_at * 1e9)
    assert command.end_time_unix_nano == int((command_step.finished_at or 0) * 1e9)
    assert _attributes(command)["process.exit.code"] == 0

    for name in ("lookup", "flaky", "charge"):
        span = spans[f"execute_tool {name}"]
        (step,) = [rec for rec in steps.values() if rec.name == name]
        assert span.parent_span_id == command.span_id
        assert span.start_time_unix_nano == int(step.started_at * 1e9)
        attributes = _attributes(span)
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == name
        assert attributes["gen_ai.tool.call.id"] == step.key
        assert "gen_ai.tool.call.arguments" not in attributes
        assert "gen_ai.tool.call.result" not in attributes
    flaky = spans["execute_tool flaky"]
    assert [event.name for event in flaky.events] == ["toolbridge.attempt", "toolbridge.attempt"]
    assert _attributes(flaky.events[0])["error.type"] == "Busy"
    charge = spans["execute_tool charge"]
    assert _attributes(charge)["error.type"] == "CardDeclined"
    assert charge.status.code == charge.status.STATUS_CODE_ERROR
    assert charge.status.message == "declined"
    assert "cus_1" not in str(receiver.requests[0])


def test_exporting_again_sends_the_same_spans_and_content_needs_the_opt_in(
    recorded: tuple[Path, dict[str, StepRecord]], receiver: Receiver
) -> None:
    path, _ = recorded
    args = ("trace", "order-7", "--journal", str(path), "--export", f"otlp={receiver.url}")
    assert toolbridge(*args).returncode == 0
    assert toolbridge(*args, content=True).returncode == 0
    first, second = receiver.spans(0), receiver.spans(1)
    assert [(s.span_id, s.parent_span_id) for s in first] == [(s.span_id, s.parent_span_id) for s in second]
    lookup = _attributes(_by_name(second)["execute_tool lookup"])
    assert json.loads(lookup["gen_ai.tool.call.arguments"]) == ["cus_1"]
    assert json.loads(lookup["gen_ai.tool.call.result"]) == {"id": "cus_1"}


def test_a_running_run_a_bad_target_and_a_refusing_collector_are_clear_errors(
    recorded: tuple[Path, dict[str, StepRecord]], receiver: Receiver
) -> None:
    path, _ = recorded
    running = toolbridge("trace", "still-going", "--journal", str(path), "--export", f"otlp={receiver.url}")
    assert running.returncode != 0
    assert "still running: export it once it has finished" in running.stderr
    bad = toolbridge("trace", "order-7", "--journal", str(path), "--export", "jaeger")
    assert bad.returncode == 2
    assert "use otlp or otlp=http://HOST:PORT/v1/traces" in bad.stderr
    receiver.status = 400
    refused = toolbridge("trace", "order-7", "--journal", str(path), "--export", f"otlp={receiver.url}")
    assert refused.returncode != 0
    assert f"the OTLP collector at {receiver.url} did not accept the spans" in refused.stderr
    assert len(receiver.requests) == 1  # it was received, decoded and refused
