"""What commands need from the bridge that runs them, and the environment a command gets."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from toolbridge._calls.hub import ApprovalHub
from toolbridge._calls.scope import CommandScope
from toolbridge._durable.eventbus import EventBus
from toolbridge._durable.steps import StepsFactory
from toolbridge._journal.base import Journal
from toolbridge._sandbox.launcher import Launcher
from toolbridge._sandbox.runtime.python import SandboxRuntime
from toolbridge._sandbox.warm import WarmPools
from toolbridge._tokens import TokenRegistry
from toolbridge._tools.functions import DurableFunction

__all__ = ["CommandDoors", "Services", "command_environment"]


class CommandDoors(Protocol):
    """Gives each command a socket of its own while it runs (``_server.doors``)."""

    def open(
        self, scope: CommandScope, max_connections: int, directory: Path | None = None
    ) -> AbstractAsyncContextManager[tuple[str, Path]]:
        """The command's address and the directory holding its socket (``directory`` when
        given, from :meth:`reserve`), until it ends; only the command's own token is taken there."""
        ...

    def reserve(self) -> tuple[str, Path]:
        """A directory for a door opened later, and the address the door will have there."""
        ...


@dataclass(frozen=True)
class Services:
    """What commands need from the bridge that runs them."""

    journal: Journal
    launcher: Launcher
    runtime: SandboxRuntime
    tokens: TokenRegistry[CommandScope]
    address: str
    socket_dir: Path | None
    doors: CommandDoors | None  # None when serving on TCP: commands share the address
    events: EventBus
    steps_factory: StepsFactory
    approvals: ApprovalHub
    functions: Mapping[str, DurableFunction] = field(default_factory=dict)  # (live: read at call time)
    state_paths: tuple[Path, ...] = ()
    """The daemon's own files (journal, its -wal/-shm, secret key): never shown to a sandbox."""
    warm: WarmPools | None = None
    """Snippet sandboxes started ahead of need (``Bridge(warm_sandboxes=...)``)."""


def command_environment(
    services: Services, address: str, token: str, extra: Mapping[str, str] | None
) -> dict[str, str]:
    """A command's whole environment: nothing of the host's, only what the client needs."""
    runtime = services.runtime
    env = {
        "PATH": runtime.path,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TOOLBRIDGE_ADDRESS": address,
        "TOOLBRIDGE_TOKEN": token,
    }
    env.update(runtime.node_environment)
    for name, value in (extra or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError("env= must map strings to strings")
        # Node options given by the caller come after the daemon's (its module hook).
        if name == "NODE_OPTIONS" and "NODE_OPTIONS" in env:
            value = f"{env[name]} {value}"
        env[name] = value
    return env
