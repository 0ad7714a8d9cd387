"""What the bubblewrap sandbox adds to starting a command, beside the plain process launcher.

Each round starts ``python -c pass`` (the sandbox runtime's interpreter) through each launcher
directly, alternating them so both see the same machine load, and a bare
``subprocess`` start of the same interpreter as the floor. A last column runs a command that
calls one tool, through a whole ``Bridge``, under each launcher, beside the import of the
client alone by the same interpreter under the same launcher (``python -c "import
inngest_tools"``, ``node -e "require('inngest_tools')"``): the target is 1.3x. And beside the
same import from a file, run as the one-call command is: ``node -e`` costs Node tens of
milliseconds more than ``node file.js``, because the daemon's preload cannot tell whether code
that is not a file imports, so it starts the ES module resolve hook's loader thread for it
(see clients/node/register.js). The last ratio compares like with like.

Usage: python bench/sandbox_startup.py [--starts 30] [--rounds 3]

Figures are medians of each round's median, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from toolbridge import Bridge
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher
from toolbridge._sandbox.launcher import Launcher, LaunchSpec, StopSignal
from toolbridge._sandbox.process import ProcessLauncher
from toolbridge._sandbox.runtime.python import build_runtime

CALL_ONE_TOOL = "import asyncio\nfrom inngest_tools import tools\nasyncio.run(tools.ping())\n"
CALL_ONE_TOOL_JS = "const { tools } = require('inngest_tools');\ntools.ping().then(() => process.exit(0));\n"
IMPORT_ONLY = {
    "python": ["python3", "-c", "import inngest_tools"],
    "node": ["node", "-e", "require('inngest_tools')"],
}
IMPORT_FILE = {
    "python": ("import_only.py", "import inngest_tools\n"),
    "node": ("import_only.js", "require('inngest_tools');\n"),
}


async def _start(launcher: Launcher | None, spec: LaunchSpec) -> float:
    started = time.perf_counter()
    if launcher is None:
        process = await asyncio.create_subprocess_exec(*spec.argv, env=dict(spec.env), cwd=spec.cwd)
        code = await process.wait()
    else:
        code = (await launcher.run(spec, StopSignal())).exit_code
    elapsed = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"python -c pass failed under {launcher}: exit {code}")
    return elapsed


def _spec(work: Path) -> LaunchSpec:
    runtime = build_runtime()
    socket_dir = work / "socket"
    socket_dir.mkdir(mode=0o700, exist_ok=True)
    (socket_dir / "bridge.sock").touch()  # bwrap binds the socket's directory; nothing connects
    return LaunchSpec(
        argv=[str(runtime.bin_dir / "python3"), "-c", "pass"],
        env={"PATH": runtime.path, "TOOLBRIDGE_ADDRESS": f"unix:{socket_dir / 'bridge.sock'}"},
        cwd=work,
        timeout=60,
        read_only_paths=runtime.read_only_paths,
        socket_dir=socket_dir,
    )


async def launchers(work: Path, starts: int) -> dict[str, float]:
    spec = _spec(work)
    timings: dict[str, list[float]] = {"subprocess": [], "process": [], "bwrap": []}
    chosen: dict[str, Launcher | None] = {
        "subprocess": None,
        "process": ProcessLauncher(),
        "bwrap": BwrapLauncher(),
    }
    for launcher in chosen.values():  # warm up caches once each
        await _start(launcher, spec)
    for _ in range(starts):
        for name, launcher in chosen.items():
            timings[name].append(await _start(launcher, spec))
    return {name: statistics.median(values) * 1000 for name, values in timings.items()}


async def bridge_commands(work: Path, starts: int) -> dict[str, float]:
    """Per launcher and language: a command calling one tool, and one only importing the client."""
    (work / "ping.py").write_text(CALL_ONE_TOOL)
    (work / "ping.js").write_text(CALL_ONE_TOOL_JS)
    for name, text in IMPORT_FILE.values():
        (work / name).write_text(text)
    commands = {
        "python call": "python3 ping.py",
        "python import": IMPORT_ONLY["python"],
        "python import file": f"python3 {IMPORT_FILE['python'][0]}",
        "node call": "node ping.js",
        "node import": IMPORT_ONLY["node"],
        "node import file": f"node {IMPORT_FILE['node'][0]}",
    }
    figures = {}
    for sandbox in ("process", "bwrap"):
        async with Bridge(journal=None, sandbox=sandbox) as bridge, bridge.run() as step:
            timings: dict[str, list[float]] = {name: [] for name in commands}
            for index in range(starts):
                for name, command in commands.items():  # interleaved
                    started = time.perf_counter()
                    result = await step.sandbox.commands.run(
                        f"{name.replace(' ', '-')}{index}", command, cwd=work, tools={"ping": lambda: "pong"}
                    )
                    timings[name].append(time.perf_counter() - started)
                    if result.exit_code != 0:
                        raise SystemExit(f"{name} failed under {sandbox}: {result.stderr}")
        for name, values in timings.items():
            figures[f"{sandbox} {name}"] = statistics.median(values) * 1000
    return figures


async def main(starts: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="toolbridge-bench-") as scratch:
        work = Path(scratch)
        os.chmod(work, 0o755)  # the sandbox user must be able to enter it
        starts_by_round = [await launchers(work, starts) for _ in range(rounds)]
        calls_by_round = [await bridge_commands(work, max(5, starts // 3)) for _ in range(rounds)]

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    bare, process, bwrap = (median(starts_by_round, key) for key in ("subprocess", "process", "bwrap"))
    print(f"python -c pass, median of {rounds} rounds x {starts} starts (ms), uid {os.geteuid()}")
    print(f"  {'bare subprocess':<28}{bare:8.1f}")
    print(f"  {'process launcher':<28}{process:8.1f}")
    print(f"  {'bubblewrap launcher':<28}{bwrap:8.1f}   (+{bwrap - process:.1f} over the process launcher)")
    print("a command calling one tool through a Bridge, beside one importing the client (ms)")
    print(
        "| launcher | language | one tool call | import only (-c, -e) | ratio (target <= 1.3) "
        "| import only, from a file | ratio |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for sandbox in ("process", "bwrap"):
        for language in ("python", "node"):
            call = median(calls_by_round, f"{sandbox} {language} call")
            imported = median(calls_by_round, f"{sandbox} {language} import")
            from_file = median(calls_by_round, f"{sandbox} {language} import file")
            print(
                f"| {sandbox} | {language} | {call:.1f} | {imported:.1f} | {call / imported:.2f} "
                f"| {from_file:.1f} | {call / from_file:.2f} |"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.starts, args.rounds))
