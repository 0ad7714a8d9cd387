"""Run every benchmark once and write their tables to ``bench/results.md`` (``make bench``).

Each benchmark prints its own figures beside a baseline it measured in the same run; this
only runs them one after another and collects what they print, under a heading each.

Usage: python bench/run_all.py [--quick] [--out bench/results.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (heading, script and arguments, arguments for --quick)
BENCHMARKS: list[tuple[str, list[str], list[str]]] = [
    ("A durable call beside a bare gRPC unary echo", ["hot_path.py"], ["--rounds", "3"]),
    ("The same on uvloop", ["hot_path.py", "--uvloop"], ["--rounds", "3"]),
    ("The least a durable call costs here: a bare handler, one commit", ["floor.py"], ["--rounds", "3"]),
    ("Throughput by callers and commands; p99 beside a flood", ["concurrency.py"], ["--rounds", "1"]),
    ("Latency by client, beside raw unary and stream echoes", ["call_latency.py"], ["--rounds", "1"]),
    ("Peers: MCP SDK stdio, DBOS steps", ["peers.py"], ["--rounds", "3", "--calls", "500"]),
    ("Sandbox start-up", ["sandbox_startup.py"], []),
    ("Warm sandboxes: a snippet beside starting the client cold", ["warm_sandboxes.py"], ["--rounds", "1"]),
    ("Durability: replay and crash recovery", ["durability.py"], []),
    ("Validation", ["validation.py"], []),
    ("A fresh install and its first command", ["first_command.py"], ["--rounds", "1"]),
    ("A call that waits for a person, from decision to answer", ["approval_latency.py"], []),
    ("OpenTelemetry: the cost of spans per call", ["tracing_overhead.py"], []),
    ("PostgreSQL drivers: one durable commit, a 32-row batch", ["pg_driver.py"], []),
    ("A durable call on PostgreSQL beside SQLite; fleets of daemons", ["pg_journal.py"], []),
    (
        "PostgreSQL at SQLite's pace: p50 and calls/s, interleaved",
        ["pg_pace.py"],
        ["--rounds", "1", "--sequential", "300"],
    ),
    ("MCP over stdio and Streamable HTTP, beside an SDK MCPServer", ["mcp_call.py"], ["--rounds", "1"]),
    (
        "function_ref served by another daemon of the journal, beside a local one",
        ["function_ref_remote.py"],
        ["--rounds", "1", "--calls", "50"],
    ),
    ("The web view's run list at 100,000 runs", ["run_view.py"], ["--runs", "20000", "--repeat", "3"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--out", type=Path, default=HERE / "results.md")
    args = parser.parse_args()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = [
        "# Benchmark results\n",
        f"Written by `make bench` ({stamp}; Python {platform.python_version()}, {os.cpu_count()} cores, "
        f"{platform.machine()}{'; --quick: fewer rounds' if args.quick else ''}). "
        "Every ratio is to a baseline measured in the same run.\n",
    ]
    for heading, script, quick in BENCHMARKS:
        argv = [sys.executable, str(HERE / script[0]), *script[1:], *(quick if args.quick else [])]
        print(f"== {heading}: {' '.join(argv[1:])}", flush=True)
        done = subprocess.run(argv, cwd=HERE.parent, capture_output=True, text=True)
        output = done.stdout.strip()
        if done.returncode != 0:
            output = f"failed ({done.returncode}):\n{done.stderr.strip()}"
        print(output, flush=True)
        body = output if "| ---" in output else f"```\n{output}\n```"
        sections.append(f"## {heading}\n\n`python bench/{' '.join(script)}`\n\n{body}\n")
    args.out.write_text("\n".join(sections))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
