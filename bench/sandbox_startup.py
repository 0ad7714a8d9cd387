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

The Node rows come twice: "before", from a copy of the client as it was at ``BEFORE_REVISION``
(its own HTTP/2, HPACK and Protocol Buffers codec; ``git archive`` into a temporary directory,
given to the daemon with ``TOOLBRIDGE_NODE_CLIENT``), and "after", the checkout's client
(``node:http2`` and protobuf-es), in the same run, round after round in turn. Issue 34 set the
target at 1.5x ``node -e "require('inngest_tools')"``. A last Node row makes the same one call
through ``@connectrpc/connect-node``'s gRPC transport and the same generated messages (the
transport the client did not take: see clients/node/lib/transport.js), under the process
launcher, which lets it load the checkout's devDependencies.

Usage: python bench/sandbox_startup.py [--starts 30] [--rounds 3]

Figures are medians of each round's median, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from toolbridge import Bridge
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher
from toolbridge._sandbox.launcher import Launcher, LaunchSpec, StopSignal
from toolbridge._sandbox.process import ProcessLauncher
from toolbridge._sandbox.runtime.python import build_runtime

ROOT = Path(__file__).resolve().parent.parent
NODE_CLIENT = ROOT / "clients" / "node"
BEFORE_REVISION = "03fc37ea57ebd4a66e10dc4c39a1d91f7e9e912d"
"""main before issue 34: the Node client with its own HTTP/2 (lib/h2.js), HPACK and codec."""
CALL_ONE_TOOL_CONNECT = """\
const { createClient } = require(%(connect)s);
const { createGrpcTransport } = require(%(connect_node)s);
const net = require("node:net");
const { ToolBridgeService } = require(%(generated)s);
const address = process.env.TOOLBRIDGE_ADDRESS;
const transport = createGrpcTransport({
  baseUrl: "http://localhost",
  nodeOptions: { createConnection: () => net.connect(address.slice("unix:".length)) },
});
const client = createClient(ToolBridgeService, transport);
async function* calls() {
  yield { callId: 1n, call: { toolName: "ping" } };
}
(async () => {
  const headers = { "x-toolbridge-token": process.env.TOOLBRIDGE_TOKEN };
  for await (const answer of client.callToolStream(calls(), { headers })) {
    if (answer.answer.case !== "response") throw new Error(JSON.stringify(answer));
    process.exit(0);
  }
})();
"""
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


def _copy_tree(source: Path, target: Path) -> None:
    try:
        shutil.copytree(source, target, copy_function=os.link)
    except OSError:  # another file system: copied
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)


def saved_client(work: Path) -> Path:
    """The Node client as it was at BEFORE_REVISION, with the typescript it depended on."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", BEFORE_REVISION, "clients/node"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(work / "before", filter="data")
    client = work / "before" / "clients" / "node"
    _copy_tree(NODE_CLIENT / "node_modules" / "typescript", client / "node_modules" / "typescript")
    return client


@contextmanager
def node_client(directory: Path | None) -> Iterator[None]:
    """Give the daemon this Node client (None: the checkout's) while the block runs."""
    saved = os.environ.pop("TOOLBRIDGE_NODE_CLIENT", None)
    if directory is not None:
        os.environ["TOOLBRIDGE_NODE_CLIENT"] = str(directory)
    try:
        yield
    finally:
        os.environ.pop("TOOLBRIDGE_NODE_CLIENT", None)
        if saved is not None:
            os.environ["TOOLBRIDGE_NODE_CLIENT"] = saved


def _write_scripts(work: Path) -> None:
    (work / "ping.py").write_text(CALL_ONE_TOOL)
    (work / "ping.js").write_text(CALL_ONE_TOOL_JS)
    modules = NODE_CLIENT / "node_modules"
    (work / "ping_connect.js").write_text(
        CALL_ONE_TOOL_CONNECT
        % {
            "connect": json.dumps(str(modules / "@connectrpc" / "connect")),
            "connect_node": json.dumps(str(modules / "@connectrpc" / "connect-node")),
            "generated": json.dumps(str(NODE_CLIENT / "proto" / "toolbridge" / "v1" / "toolbridge_pb.js")),
        }
    )
    for name, text in IMPORT_FILE.values():
        (work / name).write_text(text)


async def _timed(
    commands: Mapping[str, str | Sequence[str]], sandbox: Literal["process", "bwrap"], work: Path, starts: int
) -> dict[str, float]:
    """Each command `starts` times, interleaved, through one Bridge: median ms by name."""
    timings: dict[str, list[float]] = {name: [] for name in commands}
    async with Bridge(journal=None, sandbox=sandbox) as bridge, bridge.run() as step:
        for index in range(starts):
            for name, command in commands.items():
                started = time.perf_counter()
                result = await step.sandbox.commands.run(
                    f"{name.replace(' ', '-')}{index}", command, cwd=work, tools={"ping": lambda: "pong"}
                )
                timings[name].append(time.perf_counter() - started)
                if result.exit_code != 0:
                    raise SystemExit(f"{name} failed under {sandbox}: {result.stderr}")
    return {f"{sandbox} {name}": statistics.median(values) * 1000 for name, values in timings.items()}


async def bridge_commands(work: Path, before: Path, starts: int, after_first: bool) -> dict[str, float]:
    """Per launcher: a command calling one tool, and one only importing the client; Python,
    then Node before (the saved client) and after (the checkout's), one Bridge after another
    (after first in every other round, so that neither always runs on a warmer machine)."""
    _write_scripts(work)
    python = {
        "python call": "python3 ping.py",
        "python import": IMPORT_ONLY["python"],
        "python import file": f"python3 {IMPORT_FILE['python'][0]}",
    }
    node = {
        "call": "node ping.js",
        "import": IMPORT_ONLY["node"],
        "import file": f"node {IMPORT_FILE['node'][0]}",
    }
    figures: dict[str, float] = {}
    sandboxes: tuple[Literal["process", "bwrap"], ...] = ("process", "bwrap")
    for sandbox in sandboxes:
        figures |= await _timed(python, sandbox, work, starts)
        after = {f"node after {k}": v for k, v in node.items()}
        if sandbox == "process":
            after["node connect call"] = "node ping_connect.js"
        if after_first:
            figures |= await _timed(after, sandbox, work, starts)
        with node_client(before):
            figures |= await _timed({f"node before {k}": v for k, v in node.items()}, sandbox, work, starts)
        if not after_first:
            figures |= await _timed(after, sandbox, work, starts)
    return figures


async def main(starts: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="toolbridge-bench-") as scratch:
        work = Path(scratch)
        os.chmod(work, 0o755)  # the sandbox user must be able to enter it
        before = saved_client(work / "saved")
        starts_by_round = [await launchers(work, starts) for _ in range(rounds)]
        calls_by_round = [
            await bridge_commands(work, before, max(5, starts // 3), after_first=index % 2 == 1)
            for index in range(rounds)
        ]

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    bare, process, bwrap = (median(starts_by_round, key) for key in ("subprocess", "process", "bwrap"))
    print(f"python -c pass, median of {rounds} rounds x {starts} starts (ms), uid {os.geteuid()}")
    print(f"  {'bare subprocess':<28}{bare:8.1f}")
    print(f"  {'process launcher':<28}{process:8.1f}")
    print(f"  {'bubblewrap launcher':<28}{bwrap:8.1f}   (+{bwrap - process:.1f} over the process launcher)")
    print("a command calling one tool through a Bridge, beside one importing the client (ms)")
    print(
        f"Node before: the client at {BEFORE_REVISION[:12]} (its own HTTP/2); after: node:http2 + protobuf-es"
    )
    print(
        "| launcher | client | one tool call | import only (-c, -e) "
        "| ratio (target: python <= 1.3, node <= 1.5) | import only, from a file | ratio |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for sandbox in ("process", "bwrap"):
        for client in ("python", "node before", "node after"):
            call = median(calls_by_round, f"{sandbox} {client} call")
            imported = median(calls_by_round, f"{sandbox} {client} import")
            from_file = median(calls_by_round, f"{sandbox} {client} import file")
            print(
                f"| {sandbox} | {client} | {call:.1f} | {imported:.1f} | {call / imported:.2f} "
                f"| {from_file:.1f} | {call / from_file:.2f} |"
            )
    connect = median(calls_by_round, "process node connect call")
    imported = median(calls_by_round, "process node after import")
    from_file = median(calls_by_round, "process node after import file")
    print(
        f"| process | node via @connectrpc/connect-node | {connect:.1f} | {imported:.1f} "
        f"| {connect / imported:.2f} | {from_file:.1f} | {connect / from_file:.2f} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.starts, args.rounds))
