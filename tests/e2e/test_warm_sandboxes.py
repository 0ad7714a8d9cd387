"""``Bridge(warm_sandboxes=N)``: snippets in sandboxes started ahead of need, under both launchers.

A bridge's first snippet of a language starts cold and fills the pool; the next one takes a
warm sandbox (taking one never waits for it to be ready). A warm sandbox started without any
command's token, so its ``/proc/self/environ`` (the environment it was started with) names
none while its ``os.environ`` holds its own: that tells the tests which kind ran.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.node_launchers import LAUNCHERS
from tests.helpers import WAIT, wait_until
from toolbridge import Bridge, SnippetError, ToolOptions
from toolbridge._sandbox.warm import WarmPools, read_at_start

PROBE_PY = """
import os
started_with = open("/proc/self/environ", "rb").read().split(b"\\0")
return {
    "token_at_start": any(v.startswith(b"TOOLBRIDGE_TOKEN=") for v in started_with),
    "token_now": bool(os.environ.get("TOOLBRIDGE_TOKEN")),
    "secret": os.environ.get("SECRET"),
    "sum": await tools.add(1, 2),
}
"""
PROBE_TS = """
const fs = require("node:fs");
const startedWith = fs.readFileSync("/proc/self/environ", "latin1").split("\\0");
return {
  token_at_start: startedWith.some((v) => v.startsWith("TOOLBRIDGE_TOKEN=")),
  token_now: Boolean(process.env.TOOLBRIDGE_TOKEN),
  secret: process.env.SECRET ?? null,
  sum: await tools.add(1, 2),
};
"""
PROBES = {"python": PROBE_PY, "typescript": PROBE_TS}


async def add(a: int, b: int) -> int:
    return a + b


TOOLS = {"add": add}


@pytest.fixture(params=LAUNCHERS)
def sandbox(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def warm(journal_path: Path, sandbox: str) -> AsyncIterator[Bridge]:
    journal_path.parent.chmod(0o755)
    async with Bridge(journal=journal_path, sandbox=sandbox, warm_sandboxes=2) as opened:  # type: ignore[arg-type]
        yield opened


async def _snippet(bridge: Bridge, language: str, step_id: str, code: str, **options: Any) -> Any:
    """Run a snippet; then, on a bridge keeping warm sandboxes, wait until its pool is full
    again (it is topped up a moment after each snippet), so that the next one takes one."""
    try:
        async with bridge.run() as step:
            return await getattr(step.sandbox, language)(step_id, code, tools=TOOLS, **options)
    finally:
        pools = bridge._parts.warm
        if pools.size:
            key = (bridge._parts.launcher.name, language)
            await wait_until(lambda: len(pools.ready(key)) == pools.size)


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_the_first_snippet_starts_cold_and_the_next_warm_with_its_token_handed_over(
    warm: Bridge, language: str
) -> None:
    cold = await _snippet(warm, language, "first", PROBES[language], env={"SECRET": "first-secret"})
    assert cold == {"token_at_start": True, "token_now": True, "secret": "first-secret", "sum": 3}
    # The warm one started before it had a command: no token, no variable of its command's,
    # until its assignment (and never another command's).
    second = await _snippet(warm, language, "second", PROBES[language], env={"SECRET": "second-secret"})
    assert second == {"token_at_start": False, "token_now": True, "secret": "second-secret", "sum": 3}
    third = await _snippet(warm, language, "third", PROBES[language])
    assert third == {"token_at_start": False, "token_now": True, "secret": None, "sum": 3}


async def test_a_warm_sandbox_is_never_reused(warm: Bridge, sandbox: str) -> None:
    mark = "import os\nreturn [os.getpid(), os.path.exists('/tmp/left-by-a-snippet'), os.getcwd()]\n"
    leave = "open('/tmp/left-by-a-snippet', 'w').write('x')\n" + mark
    await _snippet(warm, "python", "prime", mark)
    first = await _snippet(warm, "python", "first", leave)
    second = await _snippet(warm, "python", "second", mark)
    if sandbox == "bwrap":
        assert second[1] is False  # a fresh private /tmp
    else:
        os.remove("/tmp/left-by-a-snippet")
    assert second[2] != first[2]  # a fresh scratch directory
    assert not Path(first[2]).exists()


CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("value", "print('out'); return {'n': [1, 2.5, None, 'x']}", {}),
    ("raises", "await tools.add(1, 2)\nraise ValueError('no luck')", {}),
    ("exits", "import sys\nsys.exit(7)", {}),
    ("tool error", "return await tools.add('a', None)", {}),
    ("output", "return 'twelve'", {"output": int}),
    ("timeout", "import asyncio\nawait asyncio.sleep(60)", {"timeout": "1s"}),
    (
        "max_calls",
        "for _ in range(5):\n    await tools.add(1, 2)\nreturn 'done'",
        {"tool_options": ToolOptions(max_calls=2)},
    ),
]


def _outcome(result: Any) -> Any:
    if isinstance(result, SnippetError):
        return ("error", str(result), result.exit_code)
    return ("value", result)


@pytest.mark.parametrize(("name", "code", "options"), CASES, ids=[case[0] for case in CASES])
async def test_a_warm_snippet_ends_as_a_cold_one(
    warm: Bridge, journal_path: Path, sandbox: str, name: str, code: str, options: dict[str, Any]
) -> None:
    await _snippet(warm, "python", "prime", "return 1")  # the pool fills
    outcomes = []
    async with Bridge(journal=journal_path.with_name("cold.db"), sandbox=sandbox) as cold:  # type: ignore[arg-type]
        for bridge in (cold, warm):
            try:
                result = await _snippet(bridge, "python", name.replace(" ", "-"), code, **options)
            except SnippetError as exc:
                result = exc
            outcomes.append(_outcome(result))
    assert outcomes[0] == outcomes[1]
    if name == "timeout":
        assert outcomes[1] == ("error", "the snippet was stopped (timeout)", outcomes[1][2])


async def test_a_warm_snippets_clock_starts_at_its_assignment(warm: Bridge) -> None:
    await _snippet(warm, "python", "prime", "return 1")
    # The sandboxes taken next were started before this one ran for 1.5 s.
    await _snippet(warm, "python", "slow", "import asyncio\nawait asyncio.sleep(1.5)\nreturn 1")
    probe = await _snippet(warm, "python", "quick", PROBE_PY, timeout="1s")
    assert probe["token_at_start"] is False
    assert probe["sum"] == 3


async def test_a_warm_snippet_is_replayed_from_the_journal(warm: Bridge) -> None:
    calls: list[int] = []

    async def count(n: int) -> int:
        calls.append(n)
        return n * 2

    code = "return [await tools.count(1), await tools.count(2)]"
    await _snippet(warm, "python", "prime", "return 1")
    for _ in range(2):
        async with warm.run("replayed") as step:
            assert await step.sandbox.python("twice", code, tools={"count": count}) == [2, 4]
    assert calls == [1, 2]


async def test_a_warm_snippet_cut_off_runs_again_answering_its_recorded_calls(
    journal_path: Path, sandbox: str
) -> None:
    calls: list[str] = []
    blocked, release = asyncio.Event(), asyncio.Event()

    async def count(n: int) -> int:
        calls.append("count")
        return n + 1

    async def block() -> str:
        calls.append("block")
        blocked.set()
        await release.wait()
        return "done"

    code = "return [await tools.count(1), await tools.block()]"
    tools = {"count": count, "block": block}
    journal_path.parent.chmod(0o755)
    async with Bridge(journal=journal_path, sandbox=sandbox, warm_sandboxes=2) as bridge:  # type: ignore[arg-type]
        await _snippet(bridge, "python", "prime", "return 1")
        async with bridge.run("cut-off") as step:
            # Taken warm, stopped mid-way as a dying host would stop it.
            task = asyncio.ensure_future(step.sandbox.python("agent", code, tools=tools))
            await asyncio.wait_for(blocked.wait(), WAIT)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    release.set()
    async with Bridge(journal=journal_path, sandbox=sandbox, warm_sandboxes=2) as bridge:  # type: ignore[arg-type]
        await _snippet(bridge, "python", "prime", "return 1")
        async with bridge.run("cut-off") as step:
            assert await step.sandbox.python("agent", code, tools=tools) == [2, "done"]
    # The recorded call was answered from the journal; the one cut off ran again.
    assert calls == ["count", "block", "block"]


async def test_what_a_warm_sandbox_was_not_started_with_takes_a_cold_one(warm: Bridge) -> None:
    await _snippet(warm, "python", "prime", "return 1")
    # PYTHONHASHSEED is read as the interpreter starts: too late at an assignment.
    probe = PROBE_PY.replace("return {", "import sys\nreturn {'random': sys.flags.hash_randomization, ")
    result = await _snippet(warm, "python", "seeded", probe, env={"PYTHONHASHSEED": "0"})
    assert result["random"] == 0
    assert result["token_at_start"] is True
    result = await _snippet(warm, "python", "unseeded", probe)
    assert result["random"] == 1
    assert result["token_at_start"] is False


async def test_a_burst_beyond_the_pool_runs_every_snippet(warm: Bridge) -> None:
    await _snippet(warm, "python", "prime", "return 1")
    async with warm.run() as step:
        results = await asyncio.gather(
            *(
                step.sandbox.python(f"burst-{i}", f"return await tools.add({i}, 1)", tools=TOOLS)
                for i in range(16)
            )
        )
    assert results == [i + 1 for i in range(16)]
    assert len(_pools(warm).ready((warm._parts.launcher.name, "python"))) <= 2


def _pools(bridge: Bridge) -> WarmPools:
    return bridge._parts.warm


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if text.encode() in environ.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


async def test_the_pool_is_bounded_and_gone_with_the_bridge(journal_path: Path, sandbox: str) -> None:
    journal_path.parent.chmod(0o755)
    bridge = Bridge(journal=journal_path, sandbox=sandbox, warm_sandboxes=2)  # type: ignore[arg-type]
    async with bridge:
        private = str(Path(bridge.address.removeprefix("unix:")).parent)
        assert _processes_naming(private) == []  # nothing started before a snippet asks
        for index in range(3):
            await _snippet(bridge, "python", f"s{index}", "return 1")
        await _snippet(bridge, "typescript", "t", "return 1;")
        pools = _pools(bridge)
        assert len(pools.ready((sandbox, "python"))) == 2
        assert len(pools.ready((sandbox, "typescript"))) == 2
        assert _processes_naming(private) != []
    assert _processes_naming(private) == []


KILLED_HOST = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from toolbridge import Bridge

    async def main():
        async with Bridge(None, sandbox=sys.argv[1], warm_sandboxes=2) as bridge, bridge.run() as step:
            await step.sandbox.python("first", "return 1")
            print(Path(bridge.address.removeprefix("unix:")).parent, flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())
    """
)


async def test_a_killed_host_leaves_no_warm_sandbox(tmp_path: Path, sandbox: str) -> None:
    host = tmp_path / "host.py"
    host.write_text(KILLED_HOST)
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(host), sandbox, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        private = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        # Both of the pool's sandboxes started (their processes name the host's directory).
        await wait_until(lambda: len(_processes_naming(private)) >= 2)
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    # The parent-death signal takes what had started; a sandbox whose start the kill cut
    # short (the signal is armed a moment after the fork: see _sandbox/orphans.py) is swept
    # by the next daemon to start on this machine, as a command's would be.
    async with Bridge(None, sandbox=sandbox):  # type: ignore[arg-type]
        await wait_until(lambda: _processes_naming(private) == [])


def test_the_variables_read_at_start_and_the_pool_size() -> None:
    assert all(read_at_start(name) for name in ("PYTHONPATH", "NODE_OPTIONS", "LD_PRELOAD", "LC_ALL", "TZ"))
    assert not any(read_at_start(name) for name in ("SECRET", "OPENAI_API_KEY", "TOOLBRIDGE_TOKEN"))
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="warm_sandboxes"):
            WarmPools(bad)  # type: ignore[arg-type]
