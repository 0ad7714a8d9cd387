"""OpenTelemetry as a user would set it up: an SDK in the host, another in a real sandbox process.

The host configures the SDK with its in-memory exporter (once per test process: the API lets a
process set its tracer provider only once). The sandboxed command is a real Python process
given ``PYTHONPATH`` to a test-only folder that links opentelemetry-api and -sdk from this venv
(the sandbox runtime itself holds only ``inngest_tools`` and its dependencies), and makes its
own span around a tool call with the API, parented on the ``TRACEPARENT`` it was given.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from tests.helpers import call_request, held_command, raw_call, result_of
from toolbridge import Bridge, ToolError, ToolOptions, tool
from toolbridge._telemetry import tracing
from toolbridge._tools.context import ToolContext

_EXPORTER = InMemorySpanExporter()
_ATTACHED: list[TracerProvider] = []


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The host's finished spans, from an SDK configured the way an application would."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if not _ATTACHED:  # another test module may have set the (process-wide) provider first
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        _ATTACHED.append(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


@pytest.fixture(scope="session")
def otel_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A folder for the sandbox's PYTHONPATH holding opentelemetry-api and -sdk, and nothing else."""
    site = Path(trace.__file__).parents[2]
    folder = tmp_path_factory.mktemp("sandbox-otel")
    names = ["opentelemetry", "typing_extensions.py"]
    names += [p.name for p in site.glob("opentelemetry_*.dist-info")]
    for name in names:
        (folder / name).symlink_to(site / name)
    return str(folder)


AGENT = textwrap.dedent(
    """
    import asyncio, json, os
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    from inngest_tools import ToolError, tools

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    parent = TraceContextTextMapPropagator().extract({"traceparent": os.environ["TRACEPARENT"]})

    async def main():
        with trace.get_tracer("agent").start_as_current_span("agent.lookup", context=parent):
            customer = await tools.getCustomer(id="cus_1")
        try:
            await tools.charge(customer["name"])  # no span of its own: TRACEPARENT is its parent
        except ToolError as error:
            failure = error.type
        spans = [
            {
                "name": s.name,
                "trace_id": f"{s.context.trace_id:032x}",
                "span_id": f"{s.context.span_id:016x}",
                "parent_id": f"{s.parent.span_id:016x}" if s.parent else None,
            }
            for s in exporter.get_finished_spans()
        ]
        print(json.dumps({"traceparent": os.environ["TRACEPARENT"], "failure": failure, "spans": spans}))

    asyncio.run(main())
    """
)


class CustomerId(BaseModel):
    id: str


def _hex(span_id: int) -> str:
    return f"{span_id:016x}"


def _one(finished: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in finished if s.name == name]
    assert len(found) == 1, [s.name for s in finished]
    return found[0]


def _parent_id(span: ReadableSpan) -> str | None:
    return _hex(span.parent.span_id) if span.parent is not None else None


async def test_a_sandbox_span_nests_under_the_command_and_the_tool_call_under_it(
    bridge: Bridge, tmp_path: Path, spans: InMemorySpanExporter, otel_path: str
) -> None:
    call_ids: list[str] = []

    def get_customer(args: CustomerId, ctx: ToolContext) -> dict[str, Any]:
        call_ids.append(ctx.step_key)
        return {"id": args.id, "name": "Acme"}

    def charge(name: str) -> None:
        raise ToolError(f"card of {name} declined", type="CardDeclined")

    (tmp_path / "agent.py").write_text(AGENT)
    async with bridge.run("traced") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "python agent.py",
            tools={"getCustomer": tool.step(input=CustomerId, run=get_customer), "charge": charge},
            env={"PYTHONPATH": otel_path},
            cwd=tmp_path,
        )
    assert result.exit_code == 0, result.stderr
    sandbox = json.loads(result.stdout)
    assert sandbox["failure"] == "CardDeclined"
    (agent_span,) = sandbox["spans"]

    finished = list(spans.get_finished_spans())
    run_span = _one(finished, "toolbridge.run")
    command = _one(finished, "toolbridge.command agent")
    lookup = _one(finished, "execute_tool getCustomer")
    failed = _one(finished, "execute_tool charge")
    trace_id = f"{run_span.context.trace_id:032x}"

    # One trace: run → command → the sandbox's own span → the host's execute_tool span.
    assert {f"{s.context.trace_id:032x}" for s in finished} == {trace_id}
    assert agent_span["trace_id"] == trace_id
    assert _parent_id(command) == _hex(run_span.context.span_id)
    assert sandbox["traceparent"] == tracing.traceparent_of(command.context)
    assert sandbox["traceparent"].startswith(f"00-{trace_id}-{_hex(command.context.span_id)}-")
    assert agent_span["parent_id"] == _hex(command.context.span_id)
    assert _parent_id(lookup) == agent_span["span_id"]
    assert lookup.parent is not None
    assert lookup.parent.is_remote
    # A call made outside any sandbox span has the command's TRACEPARENT as its parent.
    assert _parent_id(failed) == _hex(command.context.span_id)

    # The GenAI semantic conventions, with the step key as the call id.
    attributes = dict(lookup.attributes or {})
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "getCustomer"
    assert attributes["gen_ai.tool.call.id"] == call_ids[0]
    assert attributes["toolbridge.run.id"] == "traced"
    assert "error.type" not in attributes
    assert lookup.status.status_code is not StatusCode.ERROR
    # No arguments or results without the opt-in.
    for span in (lookup, failed):
        assert "gen_ai.tool.call.arguments" not in (span.attributes or {})
        assert "gen_ai.tool.call.result" not in (span.attributes or {})
    assert "cus_1" not in json.dumps([dict(s.attributes or {}) for s in finished])

    # A failing call: error.type is the ToolError's type, and the status says why.
    assert dict(failed.attributes or {})["error.type"] == "CardDeclined"
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "card of Acme declined"
    assert [e.name for e in failed.events] == ["toolbridge.attempt"]


async def test_a_replayed_call_makes_no_second_span(bridge: Bridge, spans: InMemorySpanExporter) -> None:
    @bridge.tool
    def lookup(customer_id: str) -> dict[str, str]:
        return {"id": customer_id}

    assert await bridge.call_tool("lookup", ["cus_1"], run_id="again") == {"id": "cus_1"}
    first = list(spans.get_finished_spans())
    assert await bridge.call_tool("lookup", ["cus_1"], run_id="again") == {"id": "cus_1"}
    every = list(spans.get_finished_spans())

    span_ids = [s.context.span_id for s in every]
    assert len(span_ids) == len(set(span_ids))
    tool_spans = [s for s in every if s.name == "execute_tool lookup"]
    assert len(tool_spans) == 1, "the replayed call must not make a span of its own"
    assert tool_spans[0] in first
    # The second entry of the run is its own span, carrying the replay as an event.
    runs = [s for s in every if s.name == "toolbridge.run"]
    assert len(runs) == 2
    (replayed,) = [e for e in runs[1].events if e.name == "toolbridge.replayed"]
    assert (
        dict(replayed.attributes or {})["gen_ai.tool.call.id"]
        == dict(tool_spans[0].attributes or {})["gen_ai.tool.call.id"]
    )
    # The host call's span is a child of its run's span.
    assert _parent_id(tool_spans[0]) == _hex(runs[0].context.span_id)


async def test_attempts_and_hook_changes_are_events_and_content_needs_the_opt_in(
    journal_path: Path, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[int] = []

    def flaky(args: CustomerId) -> dict[str, str]:
        tries.append(1)
        if len(tries) == 1:
            raise ToolError("try again", type="Busy", retryable=True)
        return {"id": args.id, "secret": "s3cr3t"}

    flaky_tool = tool.step(input=CustomerId, run=flaky, on_start=lambda args: {"id": args["id"].upper()})
    monkeypatch.setenv(tracing.CONTENT_VARIABLE, "1")
    options = ToolOptions(retry_backoff=0.001)
    async with Bridge(journal=journal_path, tools={"flaky": flaky_tool}) as bridge:
        result = await bridge.call_tool("flaky", {"id": "cus_9"}, tool_options=options)
    assert result == {"id": "CUS_9", "secret": "s3cr3t"}
    span = _one(list(spans.get_finished_spans()), "execute_tool flaky")
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert [name for name, _ in events] == ["toolbridge.hook", "toolbridge.attempt", "toolbridge.attempt"]
    assert events[0][1]["toolbridge.hook"] == "on_start"
    assert events[0][1]["toolbridge.hook.changed"] is True
    assert events[1][1]["error.type"] == "Busy"
    assert events[1][1]["toolbridge.attempt"] == 1
    assert "error.type" not in events[2][1]
    assert all(e.timestamp >= span.start_time for e in span.events if span.start_time and e.timestamp)
    attributes = dict(span.attributes or {})
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {"id": "cus_9"}
    assert json.loads(str(attributes["gen_ai.tool.call.result"])) == {"id": "CUS_9", "secret": "s3cr3t"}


async def test_an_invalid_traceparent_is_ignored_and_the_command_is_the_parent(
    bridge: Bridge, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    async with held_command(bridge, tmp_path, {"echo": lambda value: value}) as held:
        for value in [
            "garbage",
            "00-" + "0" * 32 + "-" + "1" * 16 + "-01",
            "ff-" + "a" * 32 + "-" + "b" * 16 + "-01",
        ]:
            request = call_request("echo", b'["x"]')
            request.traceparent = value
            assert result_of(await raw_call(held, request)) == "x"
    finished = list(spans.get_finished_spans())
    command = _one(finished, "toolbridge.command held")
    echoes = [s for s in finished if s.name == "execute_tool echo"]
    assert len(echoes) == 3
    assert {_parent_id(s) for s in echoes} == {_hex(command.context.span_id)}


UNTRACED_HOST = """
import asyncio, sys
from toolbridge import Bridge

async def main():
    async with Bridge(journal=None) as bridge:
        async with bridge.run("untraced") as step:
            out = await step.sandbox.commands.run(
                "env", ["python", "-c", "import os; print(os.environ.get('TRACEPARENT', 'none'))"]
            )
    print(out.stdout.strip())

asyncio.run(main())
"""


def test_a_host_without_an_sdk_gives_commands_no_traceparent(tmp_path: Path) -> None:
    # In a process of its own: this one has configured an SDK, and that cannot be undone.
    host = tmp_path / "host.py"
    host.write_text(UNTRACED_HOST)
    done = subprocess.run(
        [sys.executable, str(host)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "none"


async def test_the_waiting_seam_ends_a_span_as_waiting_and_the_resumed_one_links_to_it(
    bridge: Bridge, spans: InMemorySpanExporter
) -> None:
    parked: list[str | None] = []

    @bridge.tool
    def approve_refund(order: str) -> str:
        parked.append(tracing.waiting("approval"))
        return "pending"

    @bridge.tool
    def refund(order: str) -> str:
        tracing.resumed(parked[0])
        return "refunded"

    await bridge.call_tool("approve_refund", ["o/1"], run_id="hitl")
    await bridge.call_tool("refund", ["o/1"], run_id="hitl")
    finished = list(spans.get_finished_spans())
    waited = _one(finished, "execute_tool approve_refund")
    resumed = _one(finished, "execute_tool refund")
    assert dict(waited.attributes or {})["toolbridge.waiting"] == "approval"
    assert waited.status.status_code is not StatusCode.ERROR
    assert parked[0] == tracing.traceparent_of(waited.context)
    (link,) = resumed.links
    assert link.context.span_id == waited.context.span_id


@pytest.mark.parametrize(
    ("language", "script", "code"),
    [
        (
            "python",
            "agent.py",
            "import asyncio\nfrom inngest_tools import tools\nasyncio.run(tools.echo('x'))\n",
        ),
        ("node", "agent.js", 'require("inngest_tools").tools.echo("x").then(() => process.exit(0));\n'),
    ],
)
async def test_a_client_without_opentelemetry_sends_the_commands_traceparent(
    bridge: Bridge, tmp_path: Path, spans: InMemorySpanExporter, language: str, script: str, code: str
) -> None:
    (tmp_path / script).write_text(code)
    async with bridge.run(f"plain-{language}") as step:
        result = await step.sandbox.commands.run(
            "agent", [language, script], tools={"echo": lambda value: value}, cwd=tmp_path
        )
    assert result.exit_code == 0, result.stderr
    finished = list(spans.get_finished_spans())
    command = _one(finished, "toolbridge.command agent")
    echo = _one(finished, "execute_tool echo")
    assert echo.parent is not None
    assert echo.parent.is_remote, "the parent came over the wire, from TRACEPARENT"
    assert _parent_id(echo) == _hex(command.context.span_id)


async def test_a_command_that_exits_non_zero_is_an_error_span(
    bridge: Bridge, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    async with bridge.run("exits") as step:
        result = await step.sandbox.commands.run(
            "agent", ["python", "-c", "raise SystemExit(3)"], cwd=tmp_path
        )
    assert result.exit_code == 3
    command = _one(list(spans.get_finished_spans()), "toolbridge.command agent")
    attributes = dict(command.attributes or {})
    assert attributes["process.exit.code"] == 3
    assert attributes["error.type"] == "exit_code"
    assert command.status.status_code is StatusCode.ERROR


async def test_calls_answered_in_a_rerun_sandbox_are_shown_replayed_on_its_commands_span(
    journal_path: Path, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """Client-side replay: the calls a re-run command answered from its records are still traced."""
    (tmp_path / "agent.py").write_text(
        "import asyncio, os\nfrom inngest_tools import tools\n"
        "async def main():\n    await tools.add(1, 2)\n    await tools.add(3, 4)\n"
        "    if os.environ['ENTRY'] == '1':\n        await tools.block()\n"
        "asyncio.run(main())\n"
    )
    blocked = asyncio.Event()
    ran: list[int] = []

    async def block() -> None:
        blocked.set()
        await asyncio.Event().wait()

    def add(a: int, b: int) -> int:
        ran.append(a)
        return a + b

    async def enter(entry: str) -> Any:
        async with Bridge(journal=journal_path) as bridge, bridge.run("traced-replay") as step:
            return await step.sandbox.commands.run(
                "agent",
                "python3 agent.py",
                tools={"add": add, "block": block},
                cwd=tmp_path,
                env={"ENTRY": entry},
            )

    first = asyncio.create_task(enter("1"))
    await asyncio.wait_for(blocked.wait(), 30)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    spans.clear()
    result = await enter("2")
    assert result.exit_code == 0, result.stderr
    assert ran == [1, 3]  # nothing ran again
    (command,) = [s for s in spans.get_finished_spans() if s.name == "toolbridge.command agent"]
    replayed = [dict(e.attributes or {}) for e in command.events if e.name == "toolbridge.replayed"]
    assert sorted(str(attributes["gen_ai.tool.call.id"]).split("@")[0] for attributes in replayed) == [
        "agent/add",
        "agent/add",
    ]
    assert not [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
