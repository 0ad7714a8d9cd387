"""The gRPC edge: the one hand-written module that imports the generated code.

It authenticates every RPC by the token in its metadata, hands calls to :mod:`_calls`, and
answers whatever goes wrong with one status, through one table (:mod:`_server.failures`), on
every RPC alike (the unary ``CallTool``, each call on ``CallToolStream``, ``ListTools``). A
tool failure is never a status: it travels inside a successful response.

Requests arrive as bytes and are parsed here, not by grpc: a message grpc cannot parse (a
tool name that is not UTF-8) would otherwise fail before any handler runs, as ``UNKNOWN``,
and on a stream it would end every call the stream carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from grpc import aio

from toolbridge._calls.approvals import OnWaiting
from toolbridge._calls.call import CallOutcome, call_tool
from toolbridge._calls.limits import stream_slot
from toolbridge._calls.scope import CommandScope
from toolbridge._definitions.build import FORMATS, definition
from toolbridge._errors import ProtocolError
from toolbridge._journal.approvals import ApprovalRequest
from toolbridge._options import ToolOptions
from toolbridge._server import transport
from toolbridge._server._proto import toolbridge_pb2 as pb
from toolbridge._server.failures import Status, status_of
from toolbridge._server.replies import Replies
from toolbridge._server.transport import DEFAULT_CONNECTION_IDLE, ENVELOPE_BYTES, add_ports, server_options
from toolbridge._tls import TLSConfig

TOKEN_METADATA_KEY = "x-toolbridge-token"
BATCHES_METADATA_KEY = "x-toolbridge-batches"
"""Sent by a client opening a call stream ("1"): it sends and reads batches (``more``)."""
BATCH_BYTES_METADATA_KEY = "x-toolbridge-batch-bytes"
"""The daemon's answer to it: the largest message (so the largest batch) the stream reads."""
SERVICE_NAME = "toolbridge.v1.ToolBridgeService"

DEFAULT_MAX_REQUEST_BYTES = ToolOptions().max_request_bytes
"""The largest call the transport accepts by default: the default per-command limit."""

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


def _metadata(context: aio.ServicerContext, name: str) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return str(value)
    return ""


def _token(context: aio.ServicerContext) -> str:
    return _metadata(context, TOKEN_METADATA_KEY)


def _reads_batches(context: aio.ServicerContext) -> bool:
    return _metadata(context, BATCHES_METADATA_KEY) == "1"


def _lenient_classes() -> tuple[type[Message], type[Message]]:
    """``CallToolRequest`` and ``CallToolStreamRequest`` with every string field as bytes.

    They parse what grpc's own classes refuse (a string that is not UTF-8), so that such a
    call can be answered in words, and on a stream under its own call id.
    """
    file = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(file)
    for message in file.message_type:
        for field in message.field:
            if field.type == field.TYPE_STRING:
                field.type = field.TYPE_BYTES
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("toolbridge.v1.CallToolRequest")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("toolbridge.v1.CallToolStreamRequest")),
    )


_LenientCall, _LenientStreamCall = _lenient_classes()


def _utf8_problem(call: Any) -> ProtocolError:
    """Why a call that parsed only leniently was refused: its tool name is not UTF-8."""
    name = bytes(call.tool_name)
    try:
        name.decode()
    except UnicodeDecodeError as exc:
        return ProtocolError(
            "INVALID_ARGUMENT",
            f"the tool name is not valid UTF-8 (byte 0x{name[exc.start]:02x} at offset {exc.start})",
        )
    return ProtocolError("INVALID_ARGUMENT", "the call is not a valid CallToolRequest")


def _parse_call(data: bytes) -> pb.CallToolRequest:
    try:
        return pb.CallToolRequest.FromString(data)
    except DecodeError:
        pass
    try:
        lenient = _LenientCall.FromString(data)
    except DecodeError:
        raise ProtocolError("INVALID_ARGUMENT", "the request is not a CallToolRequest message") from None
    raise _utf8_problem(lenient)


StreamCall = tuple[int, "pb.CallToolRequest | ProtocolError"]
"""One call read from a stream: its id, and the call or why it is refused."""


def _parse_stream_calls(data: bytes) -> list[StreamCall]:
    """The calls one stream message carries (its own, then those in ``more``).

    Raises:
        ProtocolError: when not even the call ids can be read: the message is not a
            ``CallToolStreamRequest`` at all, and there is no call to answer.
    """
    try:
        request = pb.CallToolStreamRequest.FromString(data)
    except DecodeError:
        return _parse_leniently(data)
    calls: list[StreamCall] = [(request.call_id, request.call)]
    calls.extend((entry.call_id, _NESTED if entry.more else entry.call) for entry in request.more)
    return calls


_NESTED = ProtocolError("INVALID_ARGUMENT", "a call in a batch carries more calls of its own")


def _parse_leniently(data: bytes) -> list[StreamCall]:
    try:
        lenient: Any = _LenientStreamCall.FromString(data)
    except DecodeError:
        raise ProtocolError(
            "INVALID_ARGUMENT", "a message on the stream is not a CallToolStreamRequest"
        ) from None
    calls: list[StreamCall] = []
    for depth, entry in ((0, lenient), *((1, entry) for entry in lenient.more)):
        if depth and entry.more:
            calls.append((entry.call_id, _NESTED))
            continue
        try:
            calls.append((entry.call_id, pb.CallToolRequest.FromString(entry.call.SerializeToString())))
        except DecodeError:
            calls.append((entry.call_id, _utf8_problem(entry.call)))
    return calls


def _batch(answers: list[pb.CallToolStreamResponse]) -> pb.CallToolStreamResponse:
    """One message carrying ``answers`` (the first in its own fields, the rest in ``more``)."""
    first = answers[0]
    first.more.extend(answers[1:])
    return first


def _parse_list(data: bytes) -> pb.ListToolsRequest:
    try:
        return pb.ListToolsRequest.FromString(data)
    except DecodeError:
        raise ProtocolError("INVALID_ARGUMENT", "the request is not a ListToolsRequest message") from None


def _fill(response: pb.CallToolResponse, outcome: CallOutcome) -> None:
    """Write ``outcome`` into ``response`` (a stream's answer's own, so nothing is copied)."""
    response.step_key = outcome.step_key
    response.replayed = outcome.replayed
    if outcome.error is not None:
        error = outcome.error
        sent = response.error
        sent.type = error.type
        sent.message = error.message
        sent.retryable = error.retryable
        sent.error_id = error.error_id
    else:
        response.result_json = (outcome.result_json or "null").encode()


def _waiting(req: ApprovalRequest) -> pb.CallWaiting:
    return pb.CallWaiting(
        request_id=req.id, kind=req.kind, summary=req.summary, expires_at_ms=round(req.expires_at * 1000)
    )


class _Servicer:
    """The three RPCs. Each catches everything and answers through :func:`_status`."""

    def __init__(self, authenticate: Authenticate, read_limit: int) -> None:
        self._authenticate = authenticate
        self._read_limit = read_limit  # the largest message the transport reads

    async def _scope(self, token: str) -> CommandScope:
        scope = await self._authenticate(token)
        if scope is None:
            raise ProtocolError("UNAUTHENTICATED", UNAUTHENTICATED_MESSAGE)
        return scope

    @staticmethod
    async def _call(
        scope: CommandScope,
        call: pb.CallToolRequest,
        response: pb.CallToolResponse,
        *,
        on_waiting: OnWaiting | None = None,
        detached: bool = False,
        call_id: tuple[str, int] | None = None,
    ) -> None:
        """Answer ``call``, into ``response``."""
        outcome = await call_tool(
            scope,
            call.tool_name,
            call.positional_arguments_json,
            call.named_arguments_json,
            on_waiting=on_waiting,
            traceparent=call.traceparent,
            detached=detached,
            call_id=call_id,
        )
        _fill(response, outcome)

    async def CallTool(self, data: bytes, context: aio.ServicerContext) -> pb.CallToolResponse:
        try:
            scope = await self._scope(_token(context))  # a bad token hears nothing else
            response = pb.CallToolResponse()
            await self._call(scope, _parse_call(data), response)
            return response
        except Exception as exc:
            status = status_of(exc, "CallTool")
        await context.abort(status.code, status.message)
        raise AssertionError("abort raises")  # pragma: no cover

    async def CallToolStream(
        self, request_iterator: AsyncIterator[bytes], context: aio.ServicerContext
    ) -> None:
        # No check up front: aborting a stream the client is still writing to races with its
        # writes (the client may see INTERNAL). Each call is checked and a bad token answered
        # in that call's status, as any per-call problem is; the stream stays open.
        token = _token(context)
        try:
            opening = await self._authenticate(token)
        except Exception:  # each call meets the failure again, and answers it through the table
            opening = None
        held = contextlib.ExitStack()  # one of the command's max_streams, for the stream's life
        try:
            held.enter_context(stream_slot(opening))
        except ProtocolError as exc:  # too many open: refused before any call is read
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, exc.message)
        batches = _reads_batches(context)
        session = _metadata(context, transport.SESSION_METADATA_KEY)[: transport.MAX_SESSION_CHARS]
        if batches:  # say how large a batch this stream reads
            await context.send_initial_metadata(((BATCH_BYTES_METADATA_KEY, str(self._read_limit)),))
        replies = Replies(context, _batch if batches else None)
        # A task per call, never cancelled when the stream ends: a call that started runs to
        # its recorded outcome (so it runs in its own task: see call_tool's ``detached``).
        calls: set[asyncio.Task[None]] = set()

        async def answer(call_id: int, call: pb.CallToolRequest | ProtocolError) -> None:
            try:
                # Every call checks the token again: a stream outlives a revoked token.
                scope = await self._scope(token)
                if isinstance(call, ProtocolError):
                    raise call

                def waiting(req: ApprovalRequest) -> None:  # tell the client: no deadline now
                    replies.post(pb.CallToolStreamResponse(call_id=call_id, waiting=_waiting(req)))

                reply = pb.CallToolStreamResponse(call_id=call_id)
                ids = (session, call_id) if session else None  # the call's name across connections
                await self._call(scope, call, reply.response, on_waiting=waiting, detached=True, call_id=ids)
            except Exception as exc:
                status = status_of(exc, "CallToolStream")
                reply = pb.CallToolStreamResponse(
                    call_id=call_id, status=pb.CallStatus(code=status.code.value[0], message=status.message)
                )
            await replies.flush()  # a waiting notice goes before the answer
            await replies.send(reply)
            this = asyncio.current_task()  # forgotten here, not by a done callback: a turn fewer
            assert this is not None
            calls.discard(this)

        ending: Status | None = None
        try:
            async for data in request_iterator:
                try:
                    read = _parse_stream_calls(data)
                except ProtocolError as exc:
                    ending = status_of(exc, "CallToolStream")  # no call id: end the stream
                    break
                for call_id, call in read:
                    calls.add(asyncio.create_task(answer(call_id, call)))
            while calls:  # unlike gather, a wait cancelled (the client left) cancels no call
                await asyncio.wait(set(calls))
                calls.difference_update([task for task in calls if task.done()])  # cancelled ones
        finally:
            held.close()
        if ending is not None:
            await context.abort(ending.code, ending.message)

    async def ListTools(self, data: bytes, context: aio.ServicerContext) -> pb.ListToolsResponse:
        try:
            scope = await self._scope(_token(context))
            return _definitions(scope, _parse_list(data))
        except Exception as exc:
            status = status_of(exc, "ListTools")
        await context.abort(status.code, status.message)
        raise AssertionError("abort raises")  # pragma: no cover


def _definitions(scope: CommandScope, request: pb.ListToolsRequest) -> pb.ListToolsResponse:
    format_name = _FORMATS_BY_ENUM.get(request.format)
    if format_name is None:
        raise ProtocolError("INVALID_ARGUMENT", f"unknown definition format {request.format}")
    try:
        entries = [
            pb.ToolDefinition(name=name, definition_json=_json_bytes(definition(name, tool, format_name)))  # type: ignore[arg-type]
            for name, tool in sorted(scope.tools.items())
            if tool.shim is None  # a shim is a program on the PATH, not a tool for a model
        ]
    except ValueError as exc:  # a tool whose input is not an object: the host must fix it
        raise ProtocolError("FAILED_PRECONDITION", str(exc)) from None
    return pb.ListToolsResponse(tools=entries)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _handlers(servicer: _Servicer) -> dict[str, grpc.RpcMethodHandler]:
    # No request deserializers: the servicer parses the bytes itself (see the module docstring).
    return {
        "CallTool": grpc.unary_unary_rpc_method_handler(
            servicer.CallTool, response_serializer=pb.CallToolResponse.SerializeToString
        ),
        "CallToolStream": grpc.stream_stream_rpc_method_handler(
            servicer.CallToolStream, response_serializer=pb.CallToolStreamResponse.SerializeToString
        ),
        "ListTools": grpc.unary_unary_rpc_method_handler(
            servicer.ListTools, response_serializer=pb.ListToolsResponse.SerializeToString
        ),
    }


async def start_server(
    authenticate: Authenticate,
    addresses: list[str],
    *,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    connection_idle: float = DEFAULT_CONNECTION_IDLE,
    max_connections: int | None = None,
    tls: TLSConfig | None = None,
) -> tuple[aio.Server, list[str]]:
    """Start serving on ``addresses`` (``unix:PATH`` or ``HOST:PORT``).

    Args:
        authenticate: Token -> the scope it grants.
        addresses: Where to listen.
        max_request_bytes: The largest call any command may send. The transport refuses a
            message above it (plus a small envelope) with ``RESOURCE_EXHAUSTED`` before
            it is read into memory; each command's own ``ToolOptions.max_request_bytes``
            is checked per call, below it.
        connection_idle: Seconds a connection may carry no call before it is closed.
        max_connections: Connections open at once (see ``server_options``).
        tls: Serve the TCP addresses with TLS (see ``add_ports``).

    Returns:
        The server and the bound addresses, with real ports for any ``:0``; a TCP address
        served with TLS as ``tls://HOST:PORT``, as clients take it.
    """
    options = server_options(
        max_request_bytes=max_request_bytes, connection_idle=connection_idle, max_connections=max_connections
    )
    server = aio.server(options=options)
    handlers = _handlers(_Servicer(authenticate, max_request_bytes + ENVELOPE_BYTES))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)
    bound = add_ports(server, addresses, tls)
    await server.start()
    return server, bound
