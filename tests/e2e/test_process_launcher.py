"""The plain process launcher: a scrubbed environment, bounded output, a tree killed with its command."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import wait_until
from toolbridge import Bridge, SandboxError


def is_running(pid: int) -> bool:
    """True for a live process; a killed one may linger as a zombie until it is reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


ENV_DUMP = """
import json, os, sys
json.dump({"env": dict(os.environ), "python": sys.executable, "cwd": os.getcwd()}, open("env.json", "w"))
import inngest_tools
"""


async def test_the_environment_holds_only_what_the_client_needs(
    bridge: Bridge, tmp_path: Path, script: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOST_SECRET_CANARY", "s3cr3t")
    script("dump.py", ENV_DUMP)
    async with bridge.run() as step:
        result = await step.sandbox.commands.run(
            "dump", "python dump.py", tools={"noop": lambda: None}, env={"MY_SETTING": "on"}, cwd=tmp_path
        )
    assert result.exit_code == 0, result.stderr
    seen = json.loads((tmp_path / "env.json").read_text())
    env = seen["env"]
    assert "HOST_SECRET_CANARY" not in env
    assert "s3cr3t" not in json.dumps(env)
    assert set(env) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "TOOLBRIDGE_ADDRESS",
        "TOOLBRIDGE_TOKEN",
        "NODE_PATH",
        "NODE_OPTIONS",  # a preload that lets Node's `import` find inngest_tools
        "MY_SETTING",
        "LC_CTYPE",
        # The command's span, given when a tracer provider is set (one an earlier test in the
        # same process set stays): the client continues the trace with it.
        "TRACEPARENT",
    }
    assert env["MY_SETTING"] == "on"
    # The command's own socket (see _server.doors), beside the bridge's.
    own = Path(env["TOOLBRIDGE_ADDRESS"].removeprefix("unix:"))
    assert own.parent.parent == Path(bridge.address.removeprefix("unix:")).parent
    assert own.parent.name.startswith("command-")
    assert env["TOOLBRIDGE_TOKEN"].startswith("tb1.")
    # `python` is the sandbox runtime, which imports inngest_tools and none of the host's packages.
    assert Path(seen["python"]).parent.parent.name.startswith("py-")  # the cached runtime venv
    assert seen["cwd"] == str(tmp_path)


async def test_the_runtime_has_none_of_the_hosts_packages(
    bridge: Bridge, tmp_path: Path, script: Callable[[str, str], Path]
) -> None:
    script(
        "probe.py",
        "import importlib.util as u\n"
        "print([m for m in ('pydantic', 'toolbridge', 'aiosqlite') if u.find_spec(m)])\n",
    )
    async with bridge.run() as step:
        result = await step.sandbox.commands.run("probe", ["python3", "probe.py"], tools={}, cwd=tmp_path)
    assert result.stdout == "[]\n", result.stderr


async def test_the_client_is_imported_from_bytecode_compiled_when_the_runtime_was_built(
    bridge: Bridge, tmp_path: Path, script: Callable[[str, str], Path]
) -> None:
    # The sandbox writes no bytecode, so without the runtime's own every command would compile
    # the client again. The compiled code names the runtime's final path, not the build's.
    script(
        "probe.py",
        "import json, marshal, sys\n"
        "import inngest_tools\n"
        "cached = inngest_tools.__spec__.cached\n"
        "with open(cached, 'rb') as f:\n"
        "    code_file = marshal.loads(f.read()[16:]).co_filename\n"
        "print(json.dumps({'file': inngest_tools.__file__, 'code_file': code_file,\n"
        "    'flag': sys.flags.dont_write_bytecode}))\n",
    )
    async with bridge.run() as step:
        result = await step.sandbox.commands.run("probe", ["python3", "probe.py"], tools={}, cwd=tmp_path)
    seen = json.loads(result.stdout)  # fails (no such file) when nothing was compiled
    assert seen["flag"] == 1, result.stderr  # PYTHONDONTWRITEBYTECODE stays set in the sandbox
    assert seen["code_file"] == seen["file"]  # compiled under the final path, not the build's


async def test_a_timeout_kills_the_whole_process_tree(
    bridge: Bridge, tmp_path: Path, script: Callable[[str, str], Path]
) -> None:
    script(
        "tree.py",
        """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open("child.pid", "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(600)
        """,
    )
    async with bridge.run() as step:
        result = await step.sandbox.commands.run(
            "tree", "python3 tree.py", tools={}, timeout=1.5, cwd=tmp_path
        )
    assert result.stopped == "timeout"
    assert result.exit_code < 0
    assert result.stdout == "started\n"  # output written before the kill is kept
    child = int((tmp_path / "child.pid").read_text())
    await wait_until(lambda: not is_running(child), timeout=5)


async def test_output_is_kept_up_to_one_mib(
    bridge: Bridge, tmp_path: Path, script: Callable[[str, str], Path]
) -> None:
    script("loud.py", "import sys\nsys.stdout.write('a' * 3 * 1024 * 1024)\nsys.stderr.write('b' * 10)\n")
    async with bridge.run() as step:
        result = await step.sandbox.commands.run("loud", "python3 loud.py", tools={}, cwd=tmp_path)
    assert result.exit_code == 0
    assert len(result.stdout) == 1024 * 1024
    assert result.stderr == "b" * 10


async def test_a_command_string_is_split_like_a_shell_without_one(
    bridge: Bridge, tmp_path: Path, script: Callable[[str, str], Path]
) -> None:
    script("args.py", "import sys, json\nprint(json.dumps(sys.argv[1:]))\n")
    async with bridge.run() as step:
        result = await step.sandbox.commands.run(
            "args", "python3 args.py 'two words' $HOME ';' '|'", tools={}, cwd=tmp_path
        )
    assert json.loads(result.stdout) == ["two words", "$HOME", ";", "|"]


async def test_a_missing_program_is_a_sandbox_error(bridge: Bridge, tmp_path: Path) -> None:
    async with bridge.run() as step:
        with pytest.raises(SandboxError, match="not found on the sandbox PATH"):
            await step.sandbox.commands.run("nope", "definitely-not-a-program --x", tools={}, cwd=tmp_path)


async def test_an_empty_command_is_refused(bridge: Bridge) -> None:
    async with bridge.run() as step:
        with pytest.raises(ValueError, match="command is empty"):
            await step.sandbox.commands.run("empty", "  ", tools={})
