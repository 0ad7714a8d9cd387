"""Sandboxed code tries to read a canary secret from the host's environment and files.

Each attempt runs twice: under the process launcher (the control, where it succeeds, which
shows the probe works) and under bubblewrap (where it must fail, for the stated reason).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge

ENV_PROBE = """
import json, os, sys
daemon_pid = int(sys.argv[1])
seen = {"own_env": dict(os.environ)}
try:
    seen["daemon_environ"] = open(f"/proc/{daemon_pid}/environ", "rb").read().decode(errors="replace")
except OSError as exc:
    seen["daemon_environ_error"] = type(exc).__name__
visible = {}
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            visible[entry] = open(f"/proc/{entry}/environ", "rb").read().decode(errors="replace")
        except OSError:
            pass
seen["all_visible_environs"] = visible
print(json.dumps(seen))
"""


HOST = """
import asyncio, sys
from toolbridge import Bridge
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher

async def main():
    sandbox = BwrapLauncher() if sys.argv[1] == "bwrap" else "process"
    async with Bridge(journal=None, sandbox=sandbox) as bridge:
        async with bridge.run() as step:
            result = await step.sandbox.commands.run(
                "probe", ["python3", "probe.py", str(os.getpid())], cwd=sys.argv[2], timeout=60
            )
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(result.exit_code)

import os
asyncio.run(main())
"""


async def _probe_env(sandbox: str, work_dir: Path, canary: str) -> dict[str, object]:
    """Run a daemon in a fresh process whose own environment holds ``canary``."""
    host = work_dir.parent / "host.py"
    host.write_text(HOST)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(host),
        sandbox,
        str(work_dir),
        env={**os.environ, "TOOLBRIDGE_CANARY_SECRET": canary},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, stderr.decode()
    seen: dict[str, object] = json.loads(stdout)
    return seen


async def test_host_environment_canary_is_out_of_reach(
    work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    canary = "canary-" + secrets.token_hex(16)
    write_script("probe.py", ENV_PROBE)

    control = await _probe_env("process", work_dir, canary)
    assert canary not in json.dumps(control["own_env"])  # the scrubbed environment
    assert canary in str(control["daemon_environ"])  # but the daemon's /proc is open to it

    seen = await _probe_env("bwrap", work_dir, canary)
    assert canary not in json.dumps(seen)
    # Its own pid namespace: the daemon's pid does not exist in there (or is another process).
    assert seen.get("daemon_environ_error", "FileNotFoundError") == "FileNotFoundError"
    own = seen["own_env"]
    assert isinstance(own, dict)
    assert set(own) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "TOOLBRIDGE_ADDRESS",
        "TOOLBRIDGE_TOKEN",
        "NODE_PATH",  # where inngest_tools is for Node
        "NODE_OPTIONS",  # preloads its registration hook
        "PWD",
    }


FILE_PROBE = """
import json, sys
out = {}
for path in sys.argv[1:]:
    try:
        out[path] = open(path).read()
    except OSError as exc:
        out[path] = type(exc).__name__
print(json.dumps(out))
"""


async def test_host_file_canary_is_out_of_reach(
    sandboxed: Bridge,
    unsandboxed: Bridge,
    tmp_path: Path,
    work_dir: Path,
    write_script: Callable[[str, str], Path],
) -> None:
    canary = "canary-" + secrets.token_hex(16)
    # World-readable on purpose: what keeps it out is that it is not in the sandbox at all.
    outside = tmp_path / "host-secret.txt"
    outside.write_text(canary)
    outside.chmod(0o644)
    # Inside the command's folder but readable only by its owner (the daemon's user).
    private = work_dir / ".env"
    private.write_text(canary)
    private.chmod(0o600)
    write_script("probe.py", FILE_PROBE)
    argv = ["python3", "probe.py", str(outside), str(private), "/etc/shadow", "/root/.bash_history"]

    async with unsandboxed.run("control") as step:
        control = await step.sandbox.commands.run("probe", argv, cwd=work_dir)
    assert json.loads(control.stdout)[str(outside)] == canary

    async with sandboxed.run("sandboxed") as step:
        result = await step.sandbox.commands.run("probe", argv, cwd=work_dir)
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    assert canary not in result.stdout
    assert seen[str(outside)] == "FileNotFoundError"  # not mounted
    if os.geteuid() == 0:
        assert seen[str(private)] == "PermissionError"  # an unprivileged uid, not root
    assert seen["/etc/shadow"] == "FileNotFoundError"
    assert seen["/root/.bash_history"] == "FileNotFoundError"


async def test_host_python_packages_are_hidden(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script(
        "probe.py",
        """
        import importlib.util, json, sys, sysconfig
        base = sys.base_prefix + "/lib/python%d.%d/site-packages" % sys.version_info[:2]
        import os
        print(json.dumps({
            "pydantic": importlib.util.find_spec("pydantic") is not None,
            "inngest_tools": importlib.util.find_spec("inngest_tools") is not None,
            "base_site_packages": os.listdir(base) if os.path.isdir(base) else None,
        }))
        """,
    )
    async with sandboxed.run("packages") as step:
        result = await step.sandbox.commands.run("probe", "python3 probe.py", cwd=work_dir)
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen == {"pydantic": False, "inngest_tools": True, "base_site_packages": []}
