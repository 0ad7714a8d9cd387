"""Warm sandboxes for snippets: which snippets take one, and what one is started with.

A snippet takes a warm sandbox (``Bridge(warm_sandboxes=N)``, see ``_sandbox.warm``) when it
runs for the first time in its run (a step run again after a crash is given its recorded
calls, which a warm sandbox was not started with), has no door (no ``egress``, no shims) and
sets no variable an interpreter reads as it starts. Everything else about it is as a fresh
sandbox's: the same launcher, limits, working directory, paths and socket directory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from toolbridge._commands.services import Services, command_environment
from toolbridge._sandbox.launcher import LaunchSpec
from toolbridge._sandbox.warm import LIFETIME, WarmSandbox, read_at_start
from toolbridge._tools.tool import Tool

__all__ = ["take_warm"]

SCRATCH_PREFIX = "toolbridge-snippet-"


def take_warm(
    services: Services,
    kind: str,
    runner: Sequence[str],
    boot: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    door: bool,
    tools: Mapping[str, Tool],
    output_limit: int,
) -> tuple[WarmSandbox | None, Callable[[], None] | None]:
    """A warm sandbox for a snippet of ``kind`` (run by ``runner``), or ``None`` (none is
    ready, the bridge keeps none, or the snippet needs what a warm one was not started with);
    and, when the snippet takes none but could have, what to call once it has ended (the pool
    of its kind is topped up then).

    Args:
        boot: The first stage a warm sandbox of ``kind`` is started with.
        door: The snippet has a door of its own (``egress``).
    """
    pools = services.warm
    if pools is None or door or any(tool.shim is not None for tool in tools.values()):
        return None, None
    if not getattr(services.launcher, "takes_stdin", False):
        return None, None  # a launcher that would not give it its stdin
    if any(read_at_start(name) for name in env or {}):
        return None, None
    key = (services.launcher.name, kind)

    def start() -> WarmSandbox:
        return _start(services, runner, boot, output_limit)

    taken = pools.take(key, start)
    return taken, (None if taken is not None else lambda: pools.refill(key, start))


def _start(services: Services, runner: Sequence[str], boot: Sequence[str], output_limit: int) -> WarmSandbox:
    work_dir = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    owned = [work_dir]
    socket_dir: Path | None
    if services.doors is not None:
        address, socket_dir = services.doors.reserve()
        owned.append(socket_dir)
    else:
        address, socket_dir = services.address, services.socket_dir
    environment = command_environment(services, address, "", None)
    del environment["TOOLBRIDGE_TOKEN"]  # its command's, handed over with the command
    spec = LaunchSpec(
        argv=list(boot),
        env=environment,
        cwd=work_dir,
        timeout=LIFETIME,
        output_limit=output_limit,
        read_only_paths=list(services.runtime.read_only_paths),
        writable_paths=[work_dir],
        socket_dir=socket_dir,
        hidden_paths=services.state_paths,
    )
    return WarmSandbox(services.launcher, spec, runner, owned)
