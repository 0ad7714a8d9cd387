"""A command's door: the directory, sockets and variables its shims (and egress) need.

One directory per command (world-readable: scripts, a socket and, with egress, a CA
certificate, none secret), shown read-only to a bubblewrap sandbox at the same path. Its
socket takes only the command's own door token, which only the command's environment holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toolbridge._calls.scope import CommandScope
from toolbridge._door.policy import Egress
from toolbridge._door.shims import serve_shim
from toolbridge._errors import SandboxError

if TYPE_CHECKING:
    from toolbridge._door.egress import EgressDoor

__all__ = ["Door", "open_door"]

PROGRAMS = Path(__file__).parent / "programs"

SANDBOX_PROXY_PORT = 3128
"""The egress port on a bubblewrap sandbox's own loopback (its network namespace is its own)."""


@dataclass
class Door:
    """What a command's launch adds for its door.

    Attributes:
        env: Variables to add to the command's environment (``PATH`` is prefixed by
            :meth:`environment`).
        read_only_paths: Paths a real sandbox must show.
        bin_dir: The directory of shim scripts, first on the command's PATH.
        prefix: Put in front of the command's argv (the in-sandbox egress forwarder).
    """

    directory: Path
    token: str
    bin_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    read_only_paths: list[Path] = field(default_factory=list)
    prefix: list[str] = field(default_factory=list)
    egress: EgressDoor | None = None
    node_options: str = ""

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        merged = {**base, **self.env}
        if self.node_options:
            merged["NODE_OPTIONS"] = f"{base.get('NODE_OPTIONS', '')} {self.node_options}".strip()
        merged["PATH"] = os.pathsep.join([str(self.bin_dir), base.get("PATH", "")]).rstrip(os.pathsep)
        return merged

    def argv(self, argv: Sequence[str]) -> list[str]:
        return [*self.prefix, *argv]


def _write_shims(door: Door, scope: CommandScope, python: Path) -> None:
    door.bin_dir.mkdir(mode=0o755)
    script = door.directory / "shim.py"
    shutil.copyfile(PROGRAMS / "shim.py", script)
    script.chmod(0o644)
    for tool_name, tool in scope.tools.items():
        if tool.shim is None:
            continue
        path = door.bin_dir / tool.shim.program
        words = [str(python), "-I", str(script), tool_name, ",".join(tool.shim.env)]
        path.write_text(f'#!/bin/sh\nexec {shlex.join(words)} "$@"\n', encoding="utf-8")
        path.chmod(0o755)


def _copy_program(door: Door, name: str) -> Path:
    path = door.directory / name
    shutil.copyfile(PROGRAMS / name, path)
    path.chmod(0o644)
    return path


async def _open_egress(
    door: Door, scope: CommandScope, egress: Egress, python: Path, confined: bool
) -> asyncio.Server:
    try:  # the optional parts egress needs (``pip install 'toolbridge[egress]'``)
        from toolbridge._door.egress import EgressDoor
    except ImportError as exc:
        raise SandboxError(
            f"egress= needs {exc.name!r}: install toolbridge with its egress extra "
            "(pip install 'toolbridge[egress]')"
        ) from exc
    placeholders = egress.placeholders()
    proxy = EgressDoor(scope, egress, placeholders, door.token)
    door.egress = proxy
    ca = door.directory / "ca.pem"
    ca.write_bytes(proxy.ca.pem())
    ca.chmod(0o644)
    if confined:  # no network in the sandbox: its own loopback port, relayed to a socket here
        socket = door.directory / "egress.sock"
        server = await asyncio.start_unix_server(proxy.serve, path=str(socket))
        socket.chmod(0o666)  # the proxy token, not the mode, keeps others out
        port = SANDBOX_PROXY_PORT
        forward = _copy_program(door, "forward.py")
        door.prefix = [str(python), "-I", str(forward), str(port), str(socket), "--"]
    else:  # the process launcher: the host's loopback, offered but not enforced
        server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
    url = f"http://door:{door.token}@127.0.0.1:{port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        door.env[name] = url
    door.env["NO_PROXY"] = door.env["no_proxy"] = ""
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"):
        door.env[name] = str(ca)
    door.env.update(placeholders)
    door.node_options = f"--require {_copy_program(door, 'node_proxy.js')}"
    return server


@contextlib.asynccontextmanager
async def open_door(
    scope: CommandScope, *, python: Path, cwd: Path, egress: Egress | None = None, confined: bool = False
) -> AsyncIterator[Door | None]:
    """The command's door while it runs, or ``None`` when it needs none (and costs nothing).

    Args:
        scope: The command's scope: its tools, its run, its budget.
        python: The sandbox runtime's interpreter, which runs the shim scripts.
        cwd: The command's working directory (shim runs say theirs relative to it).
        egress: What HTTP(S) the command may make; none when ``None``.
        confined: The sandbox has a network namespace of its own (bubblewrap): egress is
            relayed from its own loopback. Otherwise the proxy listens on the host's.
    """
    if egress is None and not any(tool.shim is not None for tool in scope.tools.values()):
        yield None
        return
    directory = Path(tempfile.mkdtemp(prefix="toolbridge-door-"))
    os.chmod(directory, 0o755)  # the sandbox's user (another uid under a root daemon) reads it
    token = secrets.token_urlsafe(24)
    door = Door(directory=directory, token=token, bin_dir=directory / "bin")
    door.read_only_paths = [directory]
    handlers: set[asyncio.Task[None]] = set()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await serve_shim(scope, token, cwd, reader, writer)
        finally:
            handlers.discard(task)

    servers: list[asyncio.Server] = []
    try:
        _write_shims(door, scope, python)
        socket = directory / "door.sock"
        servers.append(await asyncio.start_unix_server(connected, path=str(socket)))
        socket.chmod(0o666)  # the token, not the mode, keeps others out
        door.env.update({"TOOLBRIDGE_DOOR": str(socket), "TOOLBRIDGE_DOOR_TOKEN": token})
        if egress is not None:
            servers.append(await _open_egress(door, scope, egress, python, confined))
        yield door
    finally:
        for server in servers:
            server.close()
        # A run still answering (its sandbox is gone) finishes and records its outcome.
        if handlers:
            await asyncio.gather(*handlers, return_exceptions=True)
        shutil.rmtree(directory, ignore_errors=True)
