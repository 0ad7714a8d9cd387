"""``Bridge``, the public facade: each method says what it does and hands it to a part."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import Any, TypeVar, overload

from toolbridge._bridge.calls import HostCalls
from toolbridge._bridge.lifecycle import Lifecycle
from toolbridge._bridge.parts import build_parts
from toolbridge._calls.decisions import Approvals
from toolbridge._calls.scope import CommandScope
from toolbridge._durations import Duration, seconds
from toolbridge._journal.base import FROM_ENVIRONMENT, Durability, FromEnvironment
from toolbridge._options import ToolOptions
from toolbridge._records import check_run_id
from toolbridge._sandbox.kinds import SandboxKind
from toolbridge._sandbox.launcher import Launcher
from toolbridge._server.service import DEFAULT_MAX_REQUEST_BYTES
from toolbridge._server.sidecar import SidecarToken
from toolbridge._server.transport import DEFAULT_CONNECTION_IDLE
from toolbridge._step import Step
from toolbridge._tls import TLSConfig
from toolbridge._tools.events import Event, EventType
from toolbridge._tools.functions import DurableFunction, FunctionContext
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
        warm_sandboxes: Snippet sandboxes kept started ahead of need, per language (``0``,
            the default: none). See the guide's "Warm sandboxes".

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
        warm_sandboxes: int = 0,
    ) -> None:
        self._parts = build_parts(
            journal,
            enter_run=self.run,
            sandbox=sandbox,
            socket=socket,
            listen=listen,
            durability=durability,
            tools=tools,
            max_request_bytes=max_request_bytes,
            run_lease=run_lease,
            recover=recover,
            shutdown_grace=shutdown_grace,
            connection_idle=connection_idle,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_client_ca=tls_client_ca,
            insecure=insecure,
            secret_key=secret_key,
            warm_sandboxes=warm_sandboxes,
        )
        self._life = Lifecycle(self._parts)
        self._host = HostCalls(self._parts, self._life, self.run)

    @property
    def address(self) -> str:
        """Where sandboxes reach this bridge while it is open: ``unix:PATH``, ``HOST:PORT``, or
        ``tls://HOST:PORT`` when it serves TLS."""
        return self._parts.endpoint.address

    @functools.cached_property
    def approvals(self) -> Approvals:
        """Requests for a person's decision, and deciding them (``.list``, ``.approve``, ...)."""
        return Approvals(self._parts.approval_hub, channel="api")

    @property
    def shutdown_grace(self) -> float:
        """Seconds calls in flight get to finish when the bridge closes (settable)."""
        return self._parts.shutdown.grace

    @shutdown_grace.setter
    def shutdown_grace(self, seconds: float) -> None:
        self._parts.shutdown.grace = seconds

    def install_signal_handlers(self, signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        """On SIGTERM (or SIGINT), shut down gracefully; call it inside ``async with bridge``.

        The first signal stops the running commands (their steps stay ``running``, for a
        replay), refuses new calls, gives calls in flight :attr:`shutdown_grace` to finish,
        closes the bridge and ends the program with status 0. A second one is not caught.
        """
        self._parts.shutdown.install(signals)

    @property
    def journal_location(self) -> str | None:
        """Where the journal is (the path or URL given as ``journal=``), or ``None`` without one."""
        return self._parts.journal.location

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
        self._parts.endpoint.move(socket=socket, listen=listen, tls=tls, insecure=insecure)
        return self

    def enable_recovery(self) -> Bridge:
        """Resume orphaned function runs, as ``recover=True`` does; returns the bridge."""
        self._parts.triggers.recovering = True
        return self

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The tools registered on this bridge, by name."""
        return MappingProxyType(self._parts.registry.tools)

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

        if target is None or isinstance(target, str):
            return self._parts.registry.decorator(target)
        return self._parts.registry.decorator(None)(target)

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

        return lambda handler: self._parts.registry.declare(
            handler, id=id, trigger=trigger, description=description
        )

    async def send_event(self, name: str, data: Mapping[str, Any] | None = None) -> Event:
        """Send an event from the host: it wakes matching waits and starts triggered functions.

        Raises:
            ToolbridgeError: when the bridge is not open.
        """
        self._life.require_open()
        return await self._parts.events.publish(name, data or {})

    async def __aenter__(self) -> Bridge:
        await self._life.open()
        return self

    async def _authenticate(self, token: str) -> CommandScope | None:
        # What a sandbox's token grants (``toolbridge.testing.FakeLauncher`` checks tokens here).
        return await self._life.authenticate(token)

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
        self._life.require_open()
        return await self._parts.sidecar.mint(
            run_id=run_id, tools=tools, max_calls=max_calls, ttl=seconds(ttl, option="ttl")
        )

    async def check_token(self, token: str) -> SidecarToken | None:
        """The grant of a presented sidecar token if it is valid and active, else ``None``.

        For faces taking bearer tokens (``toolbridge mcp --http``); checked in constant time.
        """
        self._life.require_open()
        return await self._parts.sidecar.check(token)

    async def revoke_token(self, token_id: str) -> bool:
        """Revoke a sidecar token: its next call, on any daemon serving this journal, fails.

        Returns:
            False when no such token exists or it was already revoked.
        """
        self._life.require_open()
        return await self._parts.sidecar.revoke(token_id)

    async def list_tokens(self) -> list[SidecarToken]:
        """Every sidecar token in the journal, newest first (without their secrets)."""
        self._life.require_open()
        return await self._parts.sidecar.store.list()

    def serve_ui(self, *, port: int = 0) -> contextlib.AbstractAsyncContextManager[str]:
        """Serve the web view of the journal on 127.0.0.1 while the block runs; yields its
        login URL (``http://127.0.0.1:PORT/?token=...``).

        ``async with bridge.serve_ui(port=8766) as url: ...`` (``port=0`` picks one). Opening
        the URL once logs a browser in (the token then is spent); every page and decision
        needs that login. Give the URL to the person who decides, never to a sandbox. Needs
        ``toolbridge[ui]``.
        """
        self._life.require_open()
        from toolbridge._ui.server import serve_journal

        return serve_journal(self._parts.journal, port=port)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
        self._parts.shutdown.exit_if_signalled(exc)

    async def aclose(self) -> None:
        """Refuse new calls, give those in flight :attr:`shutdown_grace`, stop serving, close."""
        await self._life.close()

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
        return await self._host.call(name, arguments, run_id=run_id, tool_options=tool_options, wait=wait)

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
        services = self._life.require_open()
        run_id = check_run_id(run_id or uuid.uuid4().hex)
        async with self._parts.runs.session(run_id, wait=wait) as state:
            yield Step(services, state)
