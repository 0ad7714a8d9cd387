"""The gRPC edge: the one hand-written module that imports the generated code.

It authenticates every RPC by the token in its metadata, hands calls to :mod:`_calls`, and
turns :class:`ProtocolError` into gRPC status codes. A tool failure is never a status: it
travels inside a successful response.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from grpc import aio

from toolbridge._calls.call import CallOutcome, call_tool
from toolbridge._calls.scope import CommandScope
from toolbridge._definitions.build import FORMATS, definition
from toolbridge._errors import ProtocolError
from toolbridge._server._proto import toolbridge_pb2 as pb
from toolbridge._server._proto import toolbridge_pb2_grpc as pb_grpc

log = logging.getLogger("toolbridge")

TOKEN_METADATA_KEY = "x-toolbridge-token"
TRANSPORT_MESSAGE_LIMIT = 64 * 1024 * 1024 + 64 * 1024
"""The transport's cap. Tool limits (256 KiB / 1 MiB by default) are enforced per call,
with clear errors, well below it; the cap only stops runaway messages."""

_FORMATS_BY_ENUM = {
    pb.DEFINITION_FORMAT_UNSPECIFIED: "anthropic",
    pb.DEFINITION_FORMAT_ANTHROPIC: "anthropic",
    pb.DEFINITION_FORMAT_OPENAI: "openai",
    pb.DEFINITION_FORMAT_OPENAI_STRICT: "openai-strict",
    pb.DEFINITION_FORMAT_MCP: "mcp",
}
assert set(_FORMATS_BY_ENUM.values()) == set(FORMATS)

Authenticate = Callable[[str], Awaitable[CommandScope | None]]
"""Token -> the scope it grants, or ``None`` for a missing, unknown, expired or revoked one."""

UNAUTHENTICATED_MESSAGE = "missing, unknown, expired or revoked token"


def _token(context: aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == TOKEN_METADATA_KEY:
            return str(value)
    return ""


def _response(outcome: CallOutcome) -> pb.CallToolResponse:
    response = pb.CallToolResponse(step_key=outcome.step_key, replayed=outcome.replayed)
    if outcome.error is not None:
        error = outcome.error
        response.error.CopyFrom(
            pb.ToolError(
                type=error.type, message=error.message, retryable=error.retryable, error_id=error.error_id
            )
        )
    else:
        response.result_json = (outcome.result_json or "null").encode()
    return response


class _Servicer(pb_grpc.ToolBridgeServiceServicer):  # type: ignore[misc]
    def __init__(self, authenticate: Authenticate) -> None:
        self._authenticate = authenticate

    async def _scope(self, context: aio.ServicerContext) -> CommandScope:
        scope = await self._authenticate(_token(context))
        if scope is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
        assert scope is not None
        return scope

    async def CallTool(
        self, request: pb.CallToolRequest, context: aio.ServicerContext
    ) -> pb.CallToolResponse:
        scope = await self._scope(context)
        try:
            outcome = await call_tool(
                scope,
                request.tool_name,
                request.positional_arguments_json,
                request.named_arguments_json,
                traceparent=request.traceparent,
            )
        except ProtocolError as exc:
            await context.abort(getattr(grpc.StatusCode, exc.code), exc.message)
        return _response(outcome)

    async def CallToolStream(
        self, request_iterator: AsyncIterator[pb.CallToolStreamRequest], context: aio.ServicerContext
    ) -> AsyncIterator[pb.CallToolStreamResponse]:
        # No check up front: aborting a stream the client is still writing to races with its
        # writes (the client may see INTERNAL). Each call is checked and a bad token answered
        # in that call's status, as any per-call protocol problem is; the stream stays open.
        token = _token(context)
        answers: asyncio.Queue[pb.CallToolStreamResponse | None] = asyncio.Queue()
        calls: set[asyncio.Task[None]] = set()

        async def answer(request: pb.CallToolStreamRequest) -> None:
            call = request.call
            try:
                # Every call checks the token again: a stream outlives a revoked token.
                scope = await self._authenticate(token)
                if scope is None:
                    raise ProtocolError("UNAUTHENTICATED", UNAUTHENTICATED_MESSAGE)
                outcome = await call_tool(
                    scope,
                    call.tool_name,
                    call.positional_arguments_json,
                    call.named_arguments_json,
                    traceparent=call.traceparent,
                )
                reply = pb.CallToolStreamResponse(call_id=request.call_id, response=_response(outcome))
            except ProtocolError as exc:
                status = pb.CallStatus(code=getattr(grpc.StatusCode, exc.code).value[0], message=exc.message)
                reply = pb.CallToolStreamResponse(call_id=request.call_id, status=status)
            await answers.put(reply)

        async def read() -> None:
            try:
                async for request in request_iterator:
                    task = asyncio.create_task(answer(request))
                    calls.add(task)
                    task.add_done_callback(calls.discard)
                if calls:
                    await asyncio.gather(*calls)
            finally:
                await answers.put(None)

        reader = asyncio.create_task(read())
        try:
            while (reply := await answers.get()) is not None:
                yield reply
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def ListTools(
        self, request: pb.ListToolsRequest, context: aio.ServicerContext
    ) -> pb.ListToolsResponse:
        scope = await self._scope(context)
        format_name = _FORMATS_BY_ENUM.get(request.format)
        if format_name is None:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"unknown definition format {request.format}"
            )
        assert format_name is not None
        try:
            entries = [
                pb.ToolDefinition(name=name, definition_json=_json_bytes(definition(name, tool, format_name)))  # type: ignore[arg-type]
                for name, tool in sorted(scope.tools.items())
            ]
        except ValueError as exc:  # a tool whose input is not an object: the host must fix it
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return pb.ListToolsResponse(tools=entries)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


async def start_server(authenticate: Authenticate, addresses: list[str]) -> tuple[aio.Server, list[str]]:
    """Start serving on ``addresses`` (``unix:PATH`` or ``HOST:PORT``).

    Returns:
        The server and the bound addresses, with real ports for any ``:0``.
    """
    server = aio.server(
        options=[
            ("grpc.max_receive_message_length", TRANSPORT_MESSAGE_LIMIT),
            ("grpc.max_send_message_length", TRANSPORT_MESSAGE_LIMIT),
            ("grpc.so_reuseport", 0),
        ]
    )
    pb_grpc.add_ToolBridgeServiceServicer_to_server(_Servicer(authenticate), server)
    bound: list[str] = []
    for address in addresses:
        port = server.add_insecure_port(address)
        if address.startswith("unix:"):
            bound.append(address)
        else:
            if port == 0:
                raise OSError(f"cannot listen on {address}")
            host = address.rsplit(":", 1)[0]
            bound.append(f"{host}:{port}")
    await server.start()
    return server, bound
