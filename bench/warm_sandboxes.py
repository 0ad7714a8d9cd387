"""Warm sandboxes: a snippet's time to its result, beside starting the client cold.

Under each launcher, round after round in turn, through three bridges open side by side:

- the baseline: a command that only imports the client, ``python3 -c "import inngest_tools"``
  (``node -e "require('inngest_tools')"``), started through ``step.sandbox.commands.run``;
- a snippet making one tool call, from ``step.sandbox.python(...)`` (``.typescript``) to its
  result, on a bridge without warm sandboxes (cold) and on one with ``warm_sandboxes=2``,
  whose pool is given time to be ready before each (its sandboxes are waiting on stdin);
- the same with a turn of ten calls;
- a burst of 16 snippets at once (each making one call), with the pool ready beforehand:
  2 run warm, the others start cold (the pool running dry), beside the same burst cold.

The target (issue 35): a warm one-call snippet at a p50 of at most 0.5x the baseline. It also
prints the memory of a ready pool: each warm sandbox's interpreter (RSS and PSS, from
``/proc``), and per sandbox all its processes (bubblewrap's stages too) by PSS.

Usage: python bench/warm_sandboxes.py [--runs 15] [--rounds 2]

Figures are medians of each round's median, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from toolbridge import Bridge

POOL = 2
BURST = 16
READY_TIMEOUT = 30.0
BOOT_MARK = {"python": b"inngest_tools._warm", "typescript": b"lib/warm.js"}
IMPORT_ONLY = {
    "python": ["python3", "-c", "import inngest_tools"],
    "typescript": ["node", "-e", "require('inngest_tools')"],
}
ONE_CALL = {"python": "return await tools.ping()", "typescript": "return await tools.ping();"}
TEN_CALLS = {
    "python": "for _ in range(10):\n    await tools.ping()\nreturn 'done'",
    "typescript": "for (let i = 0; i < 10; i++) await tools.ping();\nreturn 'done';",
}
TOOLS = {"ping": lambda: "pong"}
Sandbox = Literal["process", "bwrap"]


def _private_dir(bridge: Bridge) -> bytes:
    return os.fsencode(Path(bridge.address.removeprefix("unix:")).parent)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return b""


def _pool_processes(bridge: Bridge) -> list[int]:
    """Every process whose environment names the bridge's private directory."""
    private = _private_dir(bridge)
    return [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and private in _read(f"/proc/{entry}/environ")
    ]


def _waiting(pid: int) -> bool:
    """Blocked reading its stdin (a thread of it in read(0, ...)): loaded, waiting for a command."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(_read(f"/proc/{pid}/task/{task}/syscall").startswith(b"0 0x0 ") for task in tasks)


def _warm_interpreters(bridge: Bridge, language: str) -> list[int]:
    """The interpreters of the pool (not bubblewrap's stages, whose command lines name them)."""
    mark = BOOT_MARK[language]
    found = []
    for pid in _pool_processes(bridge):
        argv = _read(f"/proc/{pid}/cmdline").split(b"\0")
        if mark in b" ".join(argv) and os.path.basename(argv[0]) in (b"python3", b"node"):
            found.append(pid)
    return found


async def _pool_ready(bridge: Bridge, language: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while sum(_waiting(pid) for pid in _warm_interpreters(bridge, language)) < POOL:
        if time.monotonic() > deadline:
            raise SystemExit(f"the {language} pool was not ready within {READY_TIMEOUT:.0f} s")
        await asyncio.sleep(0.02)


def _memory_kib(pid: int, field: bytes, source: str) -> int:
    for line in _read(f"/proc/{pid}/{source}").splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def pool_memory(bridge: Bridge, language: str) -> tuple[float, float, float]:
    """MiB per warm sandbox: its interpreter's RSS and PSS, and all its processes' PSS."""
    interpreters = _warm_interpreters(bridge, language)
    rss = [_memory_kib(pid, b"VmRSS:", "status") for pid in interpreters]
    pss = [_memory_kib(pid, b"Pss:", "smaps_rollup") for pid in interpreters]
    everything = sum(_memory_kib(pid, b"Pss:", "smaps_rollup") for pid in _pool_processes(bridge))
    count = max(1, len(interpreters))
    return statistics.median(rss) / 1024, statistics.median(pss) / 1024, everything / count / 1024


async def _time(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return (time.perf_counter() - started) * 1000


async def one_round(sandbox: Sandbox, language: str, runs: int, work: Path) -> dict[str, Any]:
    names = ("import", "cold 1", "warm 1", "cold 10", "warm 10")
    times: dict[str, list[float]] = {name: [] for name in names}
    snippet = "python" if language == "python" else "typescript"
    async with (
        Bridge(journal=None, sandbox=sandbox) as cold,
        Bridge(journal=None, sandbox=sandbox, warm_sandboxes=POOL) as warm,
        cold.run() as cold_step,
        warm.run() as warm_step,
    ):
        counter = iter(range(1_000_000))

        def run(step: Any, code: str) -> Callable[[], Awaitable[Any]]:
            return lambda: getattr(step.sandbox, snippet)(f"s{next(counter)}", code, tools=TOOLS)

        async def imported() -> None:
            result = await cold_step.sandbox.commands.run(
                f"i{next(counter)}", IMPORT_ONLY[language], cwd=work, tools=TOOLS
            )
            if result.exit_code != 0:
                raise SystemExit(f"{IMPORT_ONLY[language]} failed: {result.stderr}")

        await run(warm_step, ONE_CALL[language])()  # the first fills the pool
        await run(cold_step, ONE_CALL[language])()
        await imported()
        for _ in range(runs):
            # Each one on a quiet machine: the pool's refill (after a warm snippet) done first.
            await _pool_ready(warm, language)
            times["import"].append(await _time(imported))
            for calls, code in (("1", ONE_CALL[language]), ("10", TEN_CALLS[language])):
                await _pool_ready(warm, language)
                times[f"cold {calls}"].append(await _time(run(cold_step, code)))
                await _pool_ready(warm, language)
                times[f"warm {calls}"].append(await _time(run(warm_step, code)))
        await _pool_ready(warm, language)
        memory = pool_memory(warm, language)
        bursts = {}
        for name, step in (("cold", cold_step), ("warm", warm_step)):
            await _pool_ready(warm, language)
            started = time.perf_counter()
            each = await asyncio.gather(*(_time(run(step, ONE_CALL[language])) for _ in range(BURST)))
            bursts[name] = ((time.perf_counter() - started) * 1000, statistics.median(each))
    figures: dict[str, Any] = {name: statistics.median(values) for name, values in times.items()}
    figures["memory"] = memory
    figures["burst"] = bursts
    return figures


async def main(runs: int, rounds: int) -> None:
    rows: dict[tuple[Sandbox, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="toolbridge-bench-") as scratch:
        work = Path(scratch)
        os.chmod(work, 0o755)  # the sandbox user must be able to enter it
        for _ in range(rounds):
            sandboxes: tuple[Sandbox, ...] = ("process", "bwrap")
            for sandbox in sandboxes:
                for language in ("python", "typescript"):
                    key = (sandbox, language)
                    rows.setdefault(key, []).append(await one_round(sandbox, language, runs, work))

    def median(key: tuple[Sandbox, str], name: str) -> float:
        return float(statistics.median(row[name] for row in rows[key]))

    print(
        f"medians of {rounds} rounds x {runs} runs (ms), uid {os.geteuid()}; a pool of {POOL} per "
        "language; baseline: a command only importing the client under the same launcher"
    )
    print(
        "| launcher | language | baseline: import only | cold snippet, 1 call | warm snippet, 1 call "
        "| warm / baseline (target <= 0.5) | warm / cold | cold, 10 calls | warm, 10 calls |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (sandbox, language), _ in rows.items():
        key = (sandbox, language)
        base, cold, warm = median(key, "import"), median(key, "cold 1"), median(key, "warm 1")
        print(
            f"| {sandbox} | {language} | {base:.1f} | {cold:.1f} | {warm:.1f} | {warm / base:.2f} "
            f"| {warm / cold:.2f} | {median(key, 'cold 10'):.1f} | {median(key, 'warm 10'):.1f} |"
        )
    print()
    print(
        f"a burst of {BURST} one-call snippets at once, the pool ({POOL}) ready beforehand then dry "
        "(ms: the whole burst, and the median snippet in it)"
    )
    print("| launcher | language | cold: burst | cold: median snippet | warm: burst | warm: median snippet |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (sandbox, language), found in rows.items():
        cold_burst = statistics.median(row["burst"]["cold"][0] for row in found)
        cold_each = statistics.median(row["burst"]["cold"][1] for row in found)
        warm_burst = statistics.median(row["burst"]["warm"][0] for row in found)
        warm_each = statistics.median(row["burst"]["warm"][1] for row in found)
        cold_figures = f"{cold_burst:.0f} | {cold_each:.0f}"
        print(f"| {sandbox} | {language} | {cold_figures} | {warm_burst:.0f} | {warm_each:.0f} |")
    print()
    print("memory of a ready pool, per warm sandbox (MiB)")
    print("| launcher | language | interpreter RSS | interpreter PSS | all its processes, PSS |")
    print("| --- | --- | ---: | ---: | ---: |")
    for (sandbox, language), found in rows.items():
        rss, pss, whole = (statistics.median(row["memory"][index] for row in found) for index in range(3))
        print(f"| {sandbox} | {language} | {rss:.1f} | {pss:.1f} | {whole:.1f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.rounds))
