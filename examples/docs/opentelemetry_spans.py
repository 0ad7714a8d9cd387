"""OpenTelemetry: configure an SDK and every run, command and tool call is a span."""

import asyncio

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolbridge import Bridge

# --8<-- [start:setup]
exporter = InMemorySpanExporter()  # in production: BatchSpanProcessor(OTLPSpanExporter())
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
# ... then use Bridge as usual
# --8<-- [end:setup]


async def main() -> None:
    async with Bridge(journal="toolbridge.db") as bridge, bridge.run("order-42") as step:
        await step.sandbox.python(
            "total", 'return await tools.getCustomer("cus_1")', tools={"getCustomer": lambda id: {"id": id}}
        )
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert sorted(spans) == ["execute_tool getCustomer", "toolbridge.python total", "toolbridge.run"], spans
    call, snippet = spans["execute_tool getCustomer"], spans["toolbridge.python total"]
    assert call.parent is not None and call.parent.span_id == snippet.context.span_id
    assert call.attributes is not None and call.attributes["gen_ai.tool.name"] == "getCustomer"


asyncio.run(main())
