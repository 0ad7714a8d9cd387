"""``Bridge``: opens the journal, serves gRPC to sandboxes, and runs durable runs."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, TypeVar, overload

from toolbridge._calls.decisions import Approvals
from toolbridge._calls.hub import ApprovalHub
from toolbridge._calls.scope import CommandScope
from toolbridge._commands.services import Services
from toolbridge._durable.eventbus import EventBus
from toolbridge._durable.runs import Runs
from toolbridge._durable.serving import FunctionServing
from toolbridge._durable.steps import nested_steps
from toolbridge._durable.triggers import Triggers
from toolbridge._durations import Duration, seconds
from toolbridge._errors import ToolbridgeError
from toolbridge._journal.base import FROM_ENVIRONMENT, Durability, FromEnvironment, Journal, open_journal
from toolbridge._options import ToolOptions
from toolbridge._records import check_run_id
from toolbridge._sandbox.kinds import SandboxKind, launcher_for
from toolbridge._sandbox.launcher import Launcher
from toolbridge._sandbox.runtime.python import build_runtime
from toolbridge._secrets import SecretBox, key_file_beside, state_dir
from toolbridge._server.endpoint import Endpoint
from toolbridge._server.service import DEFAULT_MAX_REQUEST_BYTES
from toolbridge._server.shutdown import Shutdown
from toolbridge._server.sidecar import SidecarScopes, SidecarToken
from toolbridge._server.transport import DEFAULT_CONNECTION_IDLE
from toolbridge._step import Step
from toolbridge._tls import TLSConfig
from toolbridge._tokens import TokenRegistry
from toolbridge._tools.events import Event, EventType
from toolbridge._tools.functions import DurableFunction, FunctionContext
from toolbridge._tools.registry import Registry
from toolbridge._tools.tool import Tool

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["Bridge"]


class Bridge:
    """Serves tools to sandboxed commands, recording every call in a journal.

    Use it as an async context manager: entering opens the journal and starts serving;
    leaving stops the server and closes the journal.

    Args:
        journal: A SQLite file (created if missing), a ``postgresql://user:pass@host/db``
            URL (daemons on many hosts may share one), or ``None`` to record nothing (no
            replay, no trace); when omitted, ``TOOLBRIDGE_JOURNAL``.
        sandbox: ``"process"`` (plain child processes; no isolation) or ``"bwrap"``
            (bubblewrap: no network, read-only system, private /tmp).
        socket: The Unix socket to serve on; by default one in a fresh private (0700)
            directory.
        listen: A TCP ``HOST:PORT`` to serve on instead of a Unix socket (for sandboxes on
            other machines; ``127.0.0.1:0`` picks a free port).
        durability: ``"normal"`` survives a killed daemon; ``"full"`` a power loss too.
        tools: Tools registered on the bridge, for use outside a single command (the
            ``toolbridge`` CLI, sidecar mode). More can be added with :meth:`tool`.
        max_request_bytes: The largest call the transport reads (``RESOURCE_EXHAUSTED`` above
            it): at least the largest ``ToolOptions.max_request_bytes`` in use.
        run_lease: Seconds a run entered by this bridge stays its own without renewal. The
            bridge renews it while the run is open; another bridge entering the run meanwhile
            gets ``RunBusyError``, and takes the run over once a dead holder's lease expires.
        recover: Resume its durable functions' runs whose daemon died (lease expired).
        shutdown_grace: Seconds that calls in flight get to finish when the bridge closes
            (new calls are refused meanwhile); then they are cancelled and stay ``running``.
        connection_idle: Seconds a sandbox's connection may carry no call before it is closed.
        tls_cert: With ``listen``: serve TLS with this certificate chain (a PEM file).
        tls_key: The certificate's private key (a PEM file).
        tls_client_ca: Require clients to present a certificate from this CA (mutual TLS).
        insecure: Serve a non-loopback ``listen`` without TLS all the same (tokens then
            travel in clear text; it warns). Without it, that is refused with ``TLSError``.
        secret_key: The host's key for secrets kept in the journal (sealed results, keyed
            hashes of secret arguments): 32 bytes, or a key file (created ``0600`` when
            missing). By default a ``.key`` file beside a SQLite journal; give the same key to
            every host sharing a PostgreSQL journal.

    Every time option takes seconds as a number or a duration string (``"250ms"``, ``"10s"``,
    ``"5m"``, ``"1h30m"``); a bad one raises ``ValueError`` naming the option.

    Example::

        async with Bridge(journal="toolbridge.db") as bridge:
            async with bridge.run("order-42") as step:
                result = await step.sandbox.commands.run(
                    "agent", "python3 agent.py", tools={"getCustomer": get_customer}
                )
    """

    def __init__(
        self,
        journal: str | os.PathLike[str] | FromEnvironment | None = FROM_ENVIRONMENT,
        *,
        sandbox: SandboxKind | Launcher = "process",
        socket: str | os.PathLike[str] | None = None,
        listen: str | None = None,
        durability: Durability = "normal",
        tools: Mapping[str, object] | Sequence[object] | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        run_lease: Duration = 30.0,
        recover: bool = False,
        shutdown_grace: Duration = 5.0,
        connection_idle: Duration = DEFAULT_CONNECTION_IDLE,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_client_ca: str | os.PathLike[str] | None = None,
        insecure: bool = False,
        secret_key: bytes | str | os.PathLike[str] | None = None,
    ) -> None:
        self._endpoint = Endpoint(
            socket=socket,
            listen=listen,
            max_bytes=max_request_bytes,
            idle=seconds(connection_idle, option="connection_idle"),
            tls=TLSConfig.from_options(tls_cert, tls_key, tls_client_ca),
            insecure=insecure,
        )
        self._journal: Journal = open_journal(journal, durability=durability)
        self._launcher = launcher_for(sandbox)
        self._tokens: TokenRegistry[CommandScope] = TokenRegistry()
        self._registry = Registry(tools or {})
        self._tools = self._registry.tools
        self._background: set[asyncio.Future[Any]] = set()
        self._key_file = None if secret_key is None or isinstance(secret_key, bytes) else Path(secret_key)
        secrets = None
        if isinstance(secret_key, bytes):
            secrets = SecretBox(secret_key)
        elif self._key_file is not None:
            secrets = SecretBox.from_file(self._key_file)
        self._runs = Runs(
            self._journal, self._background, lease=seconds(run_lease, option="run_lease"), secrets=secrets
        )
        self._events = EventBus(self._journal)
        self._triggers = Triggers(self._registry, self.run, self._runs, self._background, recover=recover)
        self._events.on_event.append(self._triggers.on_event)
        self._serving = FunctionServing(self._registry, self.run, self._runs, self._background)
        self._services: Services | None = None
        self._shutdown = Shutdown(seconds(shutdown_grace, option="shutdown_grace", allow_zero=True))
        self._approval_hub = hub = ApprovalHub(self._journal)
        self._sidecar = SidecarScopes(
            self._journal,
            self._tools,
            self._runs,
            nested_steps(self._events, self._registry.functions, self._journal.functions),
            hub,
        )

    @property
    def address(self) -> str:
        """Where sandboxes reach this bridge while it is open: ``unix:PATH``, ``HOST:PORT``, or
        ``tls://HOST:PORT`` when it serves TLS."""
        return self._endpoint.address

    @functools.cached_property
    def approvals(self) -> Approvals:
        """Requests for a person's decision, and deciding them (``.list``, ``.approve``, ...)."""
        return Approvals(self._approval_hub, channel="api")

    @property
    def shutdown_grace(self) -> float:
        """Seconds calls in flight get to finish when the bridge closes (settable)."""
        return self._shutdown.grace

    @shutdown_grace.setter
    def shutdown_grace(self, seconds: float) -> None:
        self._shutdown.grace = seconds

    def install_signal_handlers(self, signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        """On SIGTERM (or SIGINT), shut down gracefully; call it inside ``async with bridge``.

        The first signal stops the running commands (their steps stay ``running``, for a
        replay), refuses new calls, gives calls in flight :attr:`shutdown_grace` to finish,
        closes the bridge and ends the program with status 0. A second one is not caught.
        """
        self._shutdown.install(signals)

    @property
    def journal_location(self) -> str | None:
        """Where the journal is (the path or URL given as ``journal=``), or ``None`` without one."""
        return self._journal.location

    def serve_on(
        self,
        *,
        socket: str | os.PathLike[str] | None = None,
        listen: str | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_client_ca: str | os.PathLike[str] | None = None,
        insecure: bool = False,
    ) -> Bridge:
        """Serve elsewhere than configured, before entering (``serve --socket/--listen``); returns self.

        Args:
            socket: A Unix socket to serve on (by default, one in a fresh private directory).
            listen: A TCP ``HOST:PORT`` instead.
            tls_cert: As for :class:`Bridge`.
            tls_key: As for :class:`Bridge`.
            tls_client_ca: As for :class:`Bridge`.
            insecure: As for :class:`Bridge`.

        Raises:
            ValueError: when both are given.
            TLSError: for clear text off loopback without ``insecure``, or half a TLS setting.
            ToolbridgeError: when the bridge is already serving.
        """
        tls = TLSConfig.from_options(tls_cert, tls_key, tls_client_ca)
        self._endpoint.move(socket=socket, listen=listen, tls=tls, insecure=insecure)
        return self

    def enable_recovery(self) -> Bridge:
        """Resume orphaned function runs, as ``recover=True`` does; returns the bridge."""
        self._triggers.recovering = True
        return self

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The tools registered on this bridge, by name."""
        return MappingProxyType(self._tools)

    @overload
    def tool(self, func: F, /) -> F: ...

    @overload
    def tool(self, name: str | None = None, /) -> Callable[[F], F]: ...

    def tool(self, target: F | str | None = None, /) -> F | Callable[[F], F]:
        """Register a tool on the bridge: ``@bridge.tool`` or ``@bridge.tool("name")``.

        Decorates a function (registered as a plain tool) and returns it unchanged. To
        register a ``tool.step(...)``, pass it in ``Bridge(tools=...)`` instead.

        Raises:
            ValueError: for an invalid or already registered name.
        """

        def register(func: F, name: str | None = None) -> F:
            self._registry.add_tool(func, name)
            return func

        if target is None or isinstance(target, str):
            return lambda func: register(func, target)
        return register(target)

    def function(
        self, *, id: str, trigger: EventType | None = None, description: str | None = None
    ) -> Callable[[Callable[[FunctionContext], Any]], DurableFunction]:
        """Declare a durable function: ``@bridge.function(id="refund", trigger=event_type(...))``.

        The function runs as its own durable run whenever its trigger event is sent (with
        ``step.send_event`` or :meth:`send_event`), as a nested step through ``step.invoke``,
        and as a tool when given to a command: named arguments become the event data,
        checked against the trigger's schema, and the caller gets the function's result.
        While the bridge is open it also serves the function to the other daemons of its
        journal: their ``function_ref(id)`` calls run it here, as runs of their own.

        Raises:
            ValueError: for an empty id or one already declared on this bridge.
        """

        return lambda handler: self._registry.declare(
            handler, id=id, trigger=trigger, description=description
        )

    async def send_event(self, name: str, data: Mapping[str, Any] | None = None) -> Event:
        """Send an event from the host: it wakes matching waits and starts triggered functions.

        Raises:
            ToolbridgeError: when the bridge is not open.
        """
        self._require_open()
        return await self._events.publish(name, data or {})

    def _require_open(self) -> Services:
        if self._services is None:
            raise ToolbridgeError("the bridge is not open: use `async with Bridge(...)`")
        return self._services

    async def __aenter__(self) -> Bridge:
        await self._journal.open()
        try:
            await self._serve()
        except BaseException:
            await self._journal.close()
            raise
        self._triggers.opened()
        try:
            await self._serving.open()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def _serve(self) -> None:
        address = await self._endpoint.start(self._authenticate)
        self._services = Services(
            journal=self._journal,
            launcher=self._launcher,
            runtime=build_runtime(),
            tokens=self._tokens,
            address=address,
            socket_dir=self._endpoint.socket_dir,
            doors=self._endpoint.doors,
            events=self._events,
            steps_factory=nested_steps(self._events, self._registry.functions, self._journal.functions),
            approvals=self._approval_hub,
            functions=self._registry.functions,
            state_paths=(*_state_paths(self._journal), *([self._key_file] if self._key_file else [])),
        )

    async def _authenticate(self, token: str) -> CommandScope | None:
        self._shutdown.refuse_if_draining()
        # A running command's token first (in memory), then a sidecar token (in the journal).
        return self._tokens.resolve(token) or await self._sidecar.resolve(token)

    async def mint_token(
        self, *, run_id: str, tools: Sequence[str], max_calls: int = 100, ttl: Duration = 3600.0
    ) -> SidecarToken:
        """Mint a token for a sandbox started outside this daemon (sidecar mode).

        Give the sandbox ``token.token`` as ``TOOLBRIDGE_TOKEN`` and this bridge's
        :attr:`address` as ``TOOLBRIDGE_ADDRESS``. Its calls are steps of run ``run_id``.
        The token is stored in the journal (a hash of it), so a bridge serving the same
        journal in another process (``toolbridge serve``) accepts it too.

        Args:
            run_id: The durable run the sandbox's calls are recorded in.
            tools: Names of registered tools (:attr:`tools`) the sandbox may call.
            max_calls: Calls the token allows in all; the next one gets ``MaxCallsExceeded``.
            ttl: Seconds until the token expires (at most 30 days).

        Returns:
            The :class:`SidecarToken`, whose ``token`` is the secret to hand over.

        Raises:
            ValueError: for an unknown tool or a bad run id, budget or lifetime.
            ToolbridgeError: when the bridge has no journal file or is not open.
        """
        self._require_open()
        return await self._sidecar.mint(
            run_id=run_id, tools=tools, max_calls=max_calls, ttl=seconds(ttl, option="ttl")
        )

    async def check_token(self, token: str) -> SidecarToken | None:
        """The grant of a presented sidecar token if it is valid and active, else ``None``.

        For faces taking bearer tokens (``toolbridge mcp --http``); checked in constant time.
        """
        self._require_open()
        return await self._sidecar.check(token)

    async def revoke_token(self, token_id: str) -> bool:
        """Revoke a sidecar token: its next call, on any daemon serving this journal, fails.

        Returns:
            False when no such token exists or it was already revoked.
        """
        self._require_open()
        return await self._sidecar.revoke(token_id)

    async def list_tokens(self) -> list[SidecarToken]:
        """Every sidecar token in the journal, newest first (without their secrets)."""
        self._require_open()
        return await self._sidecar.store.list()

    def serve_ui(self, *, port: int = 0) -> contextlib.AbstractAsyncContextManager[str]:
        """Serve the web view of the journal on 127.0.0.1 while the block runs; yields its
        login URL (``http://127.0.0.1:PORT/?token=...``).

        ``async with bridge.serve_ui(port=8766) as url: ...`` (``port=0`` picks one). Opening
        the URL once logs a browser in (the token then is spent); every page and decision
        needs that login. Give the URL to the person who decides, never to a sandbox. Needs
        ``toolbridge[ui]``.
        """
        self._require_open()
        from toolbridge._ui.server import serve_journal

        return serve_journal(self._journal, port=port)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
        self._shutdown.exit_if_signalled(exc)

    async def aclose(self) -> None:
        """Refuse new calls, give those in flight :attr:`shutdown_grace`, stop serving, close."""
        try:
            await self._serving.stop()  # no new invocations; those in flight get the grace
            await self._shutdown.drain(self._background, stop_serving=self._endpoint.stop)
            await self._serving.unregister()
            await self._runs.close()
            await self._sidecar.close()
        finally:
            self._shutdown.remove()
            # Whatever failed above, the journal is closed: its connection's thread would
            # otherwise keep the host process from exiting.
            self._services = None
            await self._journal.close()

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | Sequence[Any] | None = None,
        *,
        run_id: str | None = None,
        tool_options: ToolOptions | None = None,
        wait: Duration | None = None,
    ) -> Any:
        """Call a registered tool from the host, as a durable step of its own run.

        The call is validated, hooked, retried and journaled exactly as a call from a
        sandbox; ``toolbridge call`` uses it. Calling again with the same ``run_id``
        replays the run: the recorded result (or error) comes back without running the tool.

        Args:
            name: The registered tool's name.
            arguments: Named arguments as a dict, or positional ones as a list.
            run_id: The run the call belongs to; a fresh one when omitted.
            tool_options: Timeout, attempts and size limits (``ToolOptions()`` by default).
            wait: Seconds to wait for another bridge holding the run (see :meth:`run`).

        Returns:
            The tool's result, as JSON data.

        Raises:
            ToolError: when the call fails (``ToolNotFound`` for an unknown name,
                ``ValidationError`` for bad arguments, or the tool's own error); the run is
                then recorded as failed.
            TypeError: for arguments that are neither a dict nor a list of JSON data.
        """
        from toolbridge._calls.host import call_registered_tool

        run_id = check_run_id(run_id or uuid.uuid4().hex)
        async with self.run(run_id, wait=wait):
            state = self._runs.get(run_id)
            assert self._services is not None  # run() has checked that the bridge is open
            assert state is not None
            return await call_registered_tool(
                self._services.steps_factory,
                state,
                self._tools,
                name,
                arguments,
                tool_options or ToolOptions(),
                self._approval_hub,
            )

    @contextlib.asynccontextmanager
    async def run(self, run_id: str | None = None, *, wait: Duration | None = None) -> AsyncIterator[Step]:
        """Enter a durable run; entering the same id again replays it.

        A run held by a process of this machine that is gone (a host killed and started
        again) is taken over at once. A run another live bridge holds is waited for.

        Args:
            run_id: The run's id; a fresh one when omitted.
            wait: Seconds to wait for a live holder to leave or its lease to end (a little
                over ``run_lease`` by default; ``0`` does not wait).

        Raises:
            RunBusyError: when a live holder still holds the run after ``wait``, naming it.

        Yields:
            The run's :class:`Step`: ``step.sandbox.commands.run(...)``, ``step.run(...)``.
        """
        services = self._require_open()
        run_id = check_run_id(run_id or uuid.uuid4().hex)
        async with self._runs.session(run_id, wait=wait) as state:
            yield Step(services, state)


def _state_paths(journal: Journal) -> tuple[Path, ...]:
    """The daemon's own files, hidden from every sandbox (see ``LaunchSpec.hidden_paths``)."""
    found: list[Path] = [state_dir()]
    path = getattr(journal, "path", None)
    if path is not None:
        base = os.path.abspath(path)
        found += [Path(base + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
        found.append(key_file_beside(base))
    return tuple(found)
