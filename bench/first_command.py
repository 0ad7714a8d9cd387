"""What a fresh install costs: artifact sizes, the install, and the first command after it.

Builds the wheels, sdists and npm tarball (sizes), installs ``toolbridge`` into a fresh venv
from them with no index (time), then runs a host program in that venv, rounds times over:
once with an empty runtime cache (the first command after a fresh install: the sandbox runtime
is built, the Node client copied, the TypeScript code cache written) and once more with the
cache that run left (the baseline: every later process). Each run opens a bridge and runs a
Python command, a Node command and a TypeScript snippet, each calling a tool, under the
process launcher.

Usage: python bench/first_command.py [--rounds 3]

Figures are medians over the rounds, in seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.install.artifacts

from tests.install import artifacts

HOST = """\
import asyncio, json, sys, time
started = time.perf_counter()
from toolbridge import Bridge

def ping(n: int) -> int:
    return n + 1

async def main(work):
    times = {}
    mark = time.perf_counter()
    async with Bridge(journal=None) as bridge, bridge.run("first") as step:
        times["open a bridge (builds the runtime when the cache is empty)"] = time.perf_counter() - mark
        for name, line in (("python", "python agent.py"), ("node", "node agent.js")):
            mark = time.perf_counter()
            done = await step.sandbox.commands.run(name, line, tools={"ping": ping}, cwd=work)
            assert (done.exit_code, done.stdout) == (0, "2\\n"), done.stderr
            times[f"first {name} command calling a tool"] = time.perf_counter() - mark
        mark = time.perf_counter()
        assert await step.sandbox.typescript("ts", "return await tools.ping(1);", tools={"ping": ping}) == 2
        times["first TypeScript snippet calling a tool"] = time.perf_counter() - mark
    times["whole program: start to the snippet's result"] = time.perf_counter() - started
    print(json.dumps(times))

asyncio.run(main(sys.argv[1]))
"""
PYTHON_AGENT = "import asyncio\nfrom inngest_tools import tools\nprint(asyncio.run(tools.ping(1)))\n"
NODE_AGENT = 'require("inngest_tools").tools.ping(1).then((n) => console.log(n));\n'
MB = 1_000_000


def _size(size: int) -> str:
    return f"{size / MB:.2f} MB" if size >= MB else f"{size / 1000:.1f} kB"


def _sizes(dist: Path) -> list[tuple[str, str]]:
    rows = [(path.name, _size(path.stat().st_size)) for path in sorted(dist.iterdir())]
    wheel = next(dist.glob("toolbridge-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        node = [i for i in archive.infolist() if "/node_client/" in i.filename]
    unpacked = sum(i.file_size for i in node) / MB
    packed = sum(i.compress_size for i in node) / MB
    rows.append(
        ("  of which the Node client", f"{packed:.2f} MB ({unpacked:.1f} MB unpacked, {len(node)} files)")
    )
    return rows


def _run_host(root: Path, runtime: Path) -> dict[str, float]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(root), "TOOLBRIDGE_RUNTIME_DIR": str(runtime)}
    out = artifacts.run(
        [root / "venv" / "bin" / "python", root / "host.py", root / "work"], cwd=root, env=env
    )
    times: dict[str, float] = json.loads(out)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolbridge-first-") as folder:
        root = Path(folder)
        dist = root / "dist"
        dist.mkdir()
        mark = time.perf_counter()
        artifacts.build(dist)
        built = time.perf_counter() - mark
        sizes = _sizes(dist)
        wheels = artifacts.wheel_cache(Path.home() / ".cache" / "toolbridge-bench" / "wheels")
        mark = time.perf_counter()
        artifacts.install_venv(root / "venv", dist, wheels)
        installed = time.perf_counter() - mark
        (root / "host.py").write_text(HOST)
        (root / "work").mkdir()
        (root / "work" / "agent.py").write_text(PYTHON_AGENT)
        (root / "work" / "agent.js").write_text(NODE_AGENT)

        cold: list[dict[str, float]] = []
        warm: list[dict[str, float]] = []
        for round_ in range(args.rounds):
            runtime = root / f"runtime-{round_}"
            cold.append(_run_host(root, runtime))
            warm.append(_run_host(root, runtime))

    print("artifacts (python -m build, npm pack):")
    for name, size in sizes:
        print(f"  {name:<44} {size}")
    print(f"build: {built:.1f} s; pip install --no-index from them into a fresh venv: {installed:.1f} s")
    print(
        f"\nmedians of {args.rounds} rounds, seconds | empty runtime cache (fresh install) | cached | extra"
    )
    for key in cold[0]:
        first = statistics.median(r[key] for r in cold)
        later = statistics.median(r[key] for r in warm)
        print(f"  {key:<58} {first:7.2f} {later:7.2f} {first - later:+7.2f}")


if __name__ == "__main__":
    main()
