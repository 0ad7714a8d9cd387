"""What OpenTelemetry costs per tool call, beside the same calls untraced in the same run.

Each round runs two host processes, one after the other: ``untraced`` (opentelemetry-api with
no SDK, its no-op: what every host pays) and ``traced`` (the SDK with a batch processor whose
exporter drops the spans: the cost of making them, without a network). Each host runs a real
sandboxed command (``bench/clients/python_client.py``) calling a trivial ``echo`` tool, so the
calls take the whole path: gRPC, validation, journal, spans. Rounds alternate the two modes, so
that a machine busy with something else slows both.

Usage: python bench/tracing_overhead.py [--rounds 5] [--sequential 1000] [--per-caller 50] [--callers 16]

Each figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolbridge import Bridge, ToolOptions

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "clients" / "python_client.py"
MODES = ("untraced", "traced")


def _configure_sdk() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)


async def _host(sizes: list[str]) -> dict[str, Any]:
    options = ToolOptions(max_calls=10_000_000)
    with tempfile.TemporaryDirectory() as scratch:
        async with Bridge(journal=Path(scratch) / "bench.db") as bridge, bridge.run("bench") as step:
            result = await step.sandbox.commands.run(
                "client",
                ["python3", str(CLIENT), *sizes],
                tools={"echo": lambda value: value},
                tool_options=options,
            )
    if result.exit_code != 0:
        raise SystemExit(f"the client failed: {result.stderr}")
    report = json.loads(result.stdout)
    concurrent = report["concurrent"]
    return {
        "p50_ms": statistics.median(report["sequential_ms"]),
        "calls_per_s": concurrent["calls"] / concurrent["seconds"],
    }


def _round(mode: str, sizes: list[str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--host", mode, *sizes], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sequential", type=int, default=1000)
    parser.add_argument("--per-caller", type=int, default=50)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--host", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("sizes", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.host is not None:  # one host process of a round
        if args.host == "traced":
            _configure_sdk()
        print(json.dumps(asyncio.run(_host(args.sizes))))
        return
    sizes = [str(args.sequential), str(args.per_caller), str(args.callers)]
    rounds: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            rounds[mode].append(_round(mode, sizes))
    print(f"{'mode':<10} {'p50 ms/call':>12} {'calls/s (concurrent)':>22}   (median of {args.rounds} rounds)")
    medians = {
        mode: {key: statistics.median(r[key] for r in rows) for key in ("p50_ms", "calls_per_s")}
        for mode, rows in rounds.items()
    }
    for mode, figures in medians.items():
        print(f"{mode:<10} {figures['p50_ms']:>12.3f} {figures['calls_per_s']:>22.0f}")
    extra = medians["traced"]["p50_ms"] - medians["untraced"]["p50_ms"]
    print(f"tracing adds {extra * 1000:.0f} µs per sequential call (p50)")


if __name__ == "__main__":
    main()
