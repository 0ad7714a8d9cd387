"""What a :class:`~toolbridge.Bridge` is made of, built from its options when it is constructed.

Every option is checked here, at construction (a bad duration or limit, half a TLS setting,
an unreadable key file fail at once, naming the option); nothing is opened or started: that is
:mod:`toolbridge._bridge.lifecycle`'s job, when the bridge is entered.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolbridge._calls.hub import ApprovalHub
from toolbridge._calls.scope import CommandScope
from toolbridge._durable.eventbus import EventBus
from toolbridge._durable.runs import Runs
from toolbridge._durable.serving import FunctionServing
from toolbridge._durable.steps import nested_steps
from toolbridge._durable.triggers import EnterRun, Triggers
from toolbridge._durations import Duration, seconds
from toolbridge._journal.base import Durability, FromEnvironment, Journal, open_journal
from toolbridge._sandbox.kinds import SandboxKind, launcher_for
from toolbridge._sandbox.launcher import Launcher
from toolbridge._sandbox.warm import WarmPools
from toolbridge._secrets import SecretBox
from toolbridge._server.endpoint import Endpoint
from toolbridge._server.shutdown import Shutdown
from toolbridge._server.sidecar import SidecarScopes
from toolbridge._tls import TLSConfig
from toolbridge._tokens import TokenRegistry
from toolbridge._tools.registry import Registry

__all__ = ["Parts", "build_parts"]


@dataclass(frozen=True, kw_only=True)
class Parts:
    """A bridge's collaborators, each doing one job; the bridge is a facade over them."""

    endpoint: Endpoint
    journal: Journal
    launcher: Launcher
    tokens: TokenRegistry[CommandScope]  # running commands' tokens (in memory)
    registry: Registry
    background: set[asyncio.Future[Any]]  # runs started by the bridge; cancelled when it closes
    key_file: Path | None
    runs: Runs
    events: EventBus
    triggers: Triggers
    serving: FunctionServing  # its durable functions, served to the other daemons of the journal
    shutdown: Shutdown
    approval_hub: ApprovalHub
    sidecar: SidecarScopes
    warm: WarmPools  # snippet sandboxes started ahead of need (none when its size is 0)


def build_parts(
    journal: str | os.PathLike[str] | FromEnvironment | None,
    *,
    enter_run: EnterRun,
    sandbox: SandboxKind | Launcher,
    socket: str | os.PathLike[str] | None,
    listen: str | None,
    durability: Durability,
    tools: Mapping[str, object] | Sequence[object] | None,
    max_request_bytes: int,
    run_lease: Duration,
    recover: bool,
    shutdown_grace: Duration,
    connection_idle: Duration,
    tls_cert: str | os.PathLike[str] | None,
    tls_key: str | os.PathLike[str] | None,
    tls_client_ca: str | os.PathLike[str] | None,
    insecure: bool,
    secret_key: bytes | str | os.PathLike[str] | None,
    warm_sandboxes: int = 0,
) -> Parts:
    """The parts of a bridge with these options, each as :class:`~toolbridge.Bridge` takes it.

    ``enter_run`` enters a run (the bridge's ``run``), for the functions its events trigger.

    Raises:
        ValueError: for a bad duration or limit, naming the option.
        TLSError: for half a TLS setting.
    """
    endpoint = Endpoint(
        socket=socket,
        listen=listen,
        max_bytes=max_request_bytes,
        idle=seconds(connection_idle, option="connection_idle"),
        tls=TLSConfig.from_options(tls_cert, tls_key, tls_client_ca),
        insecure=insecure,
    )
    opened = open_journal(journal, durability=durability)
    launcher = launcher_for(sandbox)
    registry = Registry(tools or {})
    background: set[asyncio.Future[Any]] = set()
    key_file = None if secret_key is None or isinstance(secret_key, bytes) else Path(secret_key)
    secrets = None
    if isinstance(secret_key, bytes):
        secrets = SecretBox(secret_key)
    elif key_file is not None:
        secrets = SecretBox.from_file(key_file)
    runs = Runs(opened, background, lease=seconds(run_lease, option="run_lease"), secrets=secrets)
    events = EventBus(opened)
    triggers = Triggers(registry, enter_run, runs, background, recover=recover)
    events.on_event.append(triggers.on_event)
    serving = FunctionServing(registry, enter_run, runs, background)
    shutdown = Shutdown(seconds(shutdown_grace, option="shutdown_grace", allow_zero=True))
    hub = ApprovalHub(opened)
    steps = nested_steps(events, registry.functions, opened.functions)
    sidecar = SidecarScopes(opened, registry.tools, runs, steps, hub)
    return Parts(
        endpoint=endpoint,
        journal=opened,
        launcher=launcher,
        tokens=TokenRegistry(),
        registry=registry,
        background=background,
        key_file=key_file,
        runs=runs,
        events=events,
        triggers=triggers,
        serving=serving,
        shutdown=shutdown,
        approval_hub=hub,
        sidecar=sidecar,
        warm=WarmPools(warm_sandboxes),
    )
