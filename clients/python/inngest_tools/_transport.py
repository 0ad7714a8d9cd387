"""The connection to the daemon: one channel and one call stream per event loop.

Calls are multiplexed over a single long-lived ``CallToolStream``: a message on an open stream
costs about half of a unary RPC. Each call carries an id, and its answer may come back in any
order. Calls made while a write is in flight wait in an outbox and go out together, in one
message, once the daemon has said it reads batches (and answers come back batched the same
way): many calls in flight cost few messages. This is the one module that imports the
generated code: the wire (requests, answers, definitions) and the connection; the API that
sandboxed code calls (``tools``, ``definitions``) is :mod:`._client`'s.

A stream is replaced once it is older than ``STREAM_LIFETIME`` and has no call in flight. The
daemon tells a connection to go away after an hour (``max_connection_age``), and grpcio never
moves an open stream to a new connection: a stream kept for the life of the process would
keep its connection past that age for as long as the process lives. A new stream goes on a
new connection once the old one has been told to go.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import secrets
from typing import Any

import grpc

from inngest_tools._channel import open_channel, reconnect_window
from inngest_tools._errors import ToolError
from inngest_tools._proto import toolbridge_pb2 as pb
from inngest_tools._proto import toolbridge_pb2_grpc as pb_grpc
from inngest_tools._status import rpc_error as _rpc_error
from inngest_tools._status import status_error as _status_error
from inngest_tools._tls import diagnose, tls_failure
from inngest_tools._trace import current_traceparent

TOKEN_METADATA_KEY = "x-toolbridge-token"
BATCHES_METADATA_KEY = "x-toolbridge-batches"
BATCH_BYTES_METADATA_KEY = "x-toolbridge-batch-bytes"
SESSION_METADATA_KEY = "x-toolbridge-session"
"""A random id of this connection's life: with a call's id, it names the call to the daemon,
so that a call sent again after its connection was lost meets the call already made."""
BATCH_ENTRY_BYTES = 6
"""What a call adds to a batch besides itself: its field tag and length in ``more``."""
STREAM_LIFETIME = 600.0
"""Seconds a call stream takes new calls for, at least: well inside the daemon's hour."""
RETIRE_WAIT = 10.0
"""Seconds a replaced stream's end is waited for before it is cancelled."""

FORMATS = {
    "anthropic": pb.DEFINITION_FORMAT_ANTHROPIC,
    "openai": pb.DEFINITION_FORMAT_OPENAI,
    "openai-strict": pb.DEFINITION_FORMAT_OPENAI_STRICT,
    "mcp": pb.DEFINITION_FORMAT_MCP,
}

# Built once: json.dumps with any option builds an encoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_ASCII_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def _encode(value: Any) -> bytes:
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"arguments must be JSON values: {exc}", type="InvalidArgument") from None
    try:
        return text.encode()
    except UnicodeEncodeError:
        # A lone surrogate: sent escaped, as JSON.stringify does in the Node client, so
        # that the daemon refuses it the same way for both (INVALID_ARGUMENT).
        return _ASCII_ENCODER.encode(value).encode()


def encode_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bytes, bytes]:
    """The wire form of a call's arguments: a JSON array and a JSON object, empty if none."""
    return (_encode(list(args)) if args else b"", _encode(kwargs) if kwargs else b"")


def stream_request(
    call_id: int, name: str, positional: bytes, named: bytes, traceparent: str = ""
) -> pb.CallToolStreamRequest:
    """The ``CallToolStreamRequest`` for one call, arguments already encoded."""
    return pb.CallToolStreamRequest(
        call_id=call_id,
        call=pb.CallToolRequest(
            tool_name=name,
            positional_arguments_json=positional,
            named_arguments_json=named,
            traceparent=traceparent,
        ),
    )


def decode_response(response: Any) -> Any:
    """The result of a ``CallToolResponse``, or the ``ToolError`` it carries, raised."""
    outcome = response.WhichOneof("outcome")
    if outcome == "error":
        error = response.error
        raise ToolError(error.message, type=error.type, retryable=error.retryable, error_id=error.error_id)
    if outcome != "result_json":
        raise ToolError("the daemon answered with neither a result nor an error", type="ProtocolError")
    return json.loads(response.result_json)


def decode_stream_answer(answer: Any) -> Any:
    """The result of a ``CallToolStreamResponse``, or the ``ToolError`` it means, raised."""
    kind = answer.WhichOneof("answer")
    if kind == "status":
        raise _status_error(answer.status.code, answer.status.message)
    if kind != "response":
        raise ToolError("the daemon answered a call with nothing", type="ProtocolError")
    return decode_response(answer.response)


def decode_definitions(response: Any) -> list[dict[str, Any]]:
    """The definitions listed in a ``ListToolsResponse``."""
    return [json.loads(entry.definition_json) for entry in response.tools]


class Connection:
    """One channel to the daemon and its call stream, for one event loop."""

    def __init__(self, address: str, token: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.address = address
        self._channel, self._tls = open_channel(address)
        self._stub = pb_grpc.ToolBridgeServiceStub(self._channel)
        self._metadata = ((TOKEN_METADATA_KEY, token),)
        self._session = secrets.token_hex(16)
        self._connected = False  # a stream of this connection has been answered by a daemon
        self._sent: dict[int, pb.CallToolStreamRequest] = {}  # calls pending, to send again
        self._reconnecting: asyncio.Task[None] | None = None
        self._window = reconnect_window()
        self._stream: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._opened_at = 0.0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.waiting: dict[int, Any] = {}  # call_id -> CallWaiting, for calls waiting on a person
        self._ids = itertools.count(1)
        self._outbox: collections.deque[pb.CallToolStreamRequest] = collections.deque()
        self._writing = False  # a write is in flight: calls made now wait in the outbox
        self._drainer: asyncio.Task[None] | None = None  # held: the loop keeps tasks only weakly
        self._batch_bytes = 0  # the largest batch the open stream reads; 0 until the daemon says

    def _open_stream(self) -> Any:
        self._batch_bytes = 0
        self._opened_at = self.loop.time()
        self._stream = self._stub.CallToolStream(
            metadata=(*self._metadata, (BATCHES_METADATA_KEY, "1"), (SESSION_METADATA_KEY, self._session))
        )
        self._reader = self.loop.create_task(self._read(self._stream))
        return self._stream

    async def _replace_stream(self) -> Any:
        """Close the open stream, which carries no call, and open another once it has ended.

        Its end is waited for, so that the command never holds one stream more than it did
        (its ``max_streams`` may be 1): a round trip, once per ``STREAM_LIFETIME``.
        """
        stream, reader = self._stream, self._reader
        self._stream = self._reader = None
        with contextlib.suppress(grpc.RpcError, asyncio.InvalidStateError):
            await stream.done_writing()
        if reader is not None:
            await asyncio.wait({reader}, timeout=RETIRE_WAIT)
            if not reader.done():  # a daemon that never ends it: the stream is dropped
                stream.cancel()
                await asyncio.wait({reader})
        return self._open_stream()

    async def _read(self, stream: Any) -> None:
        failure: ToolError
        try:
            self._batch_bytes = _batch_bytes(await stream.initial_metadata())
            # The daemon's first answer on a stream says how large a batch it reads: a stream
            # that fails before any answer gives empty metadata, and reached no daemon.
            self._connected = self._connected or self._batch_bytes > 0
            async for message in stream:
                self._answer(message)
                for answer in message.more:
                    self._answer(answer)
            failure = ToolError("the connection to the daemon closed", type="Unavailable", retryable=True)
        except grpc.RpcError as exc:
            failure = _rpc_error(exc)
        except asyncio.CancelledError:
            failure = ToolError("the connection to the daemon was closed", type="Unavailable", retryable=True)
        except Exception as exc:  # an answer this client cannot read: fail the calls, never hang
            failure = ToolError(f"the daemon's answer could not be read: {exc!r}", type="ProtocolError")
            stream.cancel()
        if self._stream is not stream:
            return  # retired with no call in flight: the calls pending are the next stream's
        self._stream = None
        if failure.type == "Unavailable" and self._tls:
            failure = tls_failure(failure.message, self.address) or failure
        if self._reconnecting is not None:
            return  # a stream opened meanwhile: its calls are sent again with the others
        if failure.type == "Unavailable" and self._connected and self._pending and self._window > 0:
            # The connection was lost (a network cut, a daemon restarted): the calls it
            # carried, and those waiting to be sent, go again on a new one, under the same
            # ids, so that the daemon answers each from the call it already made.
            self._writing = True  # calls made meanwhile wait in the outbox
            self._reconnecting = self.loop.create_task(self._reconnect(failure))
        elif failure.type == "Unavailable" and self._tls and not self._connected:
            self._writing = True
            self._reconnecting = self.loop.create_task(self._fail_diagnosed(failure))
        else:
            self._fail_all(failure)

    def _fail_all(self, failure: ToolError) -> None:
        """Fail what the stream carried and what waits to be sent (so that nothing failed here
        runs later on another stream), and let the next call open a new one."""
        self._outbox.clear()
        self._sent.clear()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(failure)
        self._pending.clear()
        self._writing = False

    async def _fail_diagnosed(self, failure: ToolError) -> None:
        """A TLS connection that never carried a call: say why in one line, when TLS is why."""
        try:
            found = await diagnose(self.address, failure.message)
        finally:
            self._reconnecting = None
        self._fail_all(found or failure)

    async def _reconnect(self, failure: ToolError) -> None:
        try:
            await asyncio.wait_for(self._channel.channel_ready(), self._window)
        except TimeoutError:
            self._fail_all(
                ToolError(
                    f"the daemon at {self.address} was unreachable for {self._window:g} s "
                    f"({failure.message}); the call's outcome, if it ran, is in the daemon's journal",
                    type="Unavailable",
                    retryable=True,
                )
            )
            return
        finally:
            self._reconnecting = None
        waiting = {request.call_id for request in self._outbox}
        again = [request for call_id, request in sorted(self._sent.items()) if call_id not in waiting]
        self._outbox.extendleft(reversed(again))
        self._drainer = self.loop.create_task(self._drain())

    def _answer(self, answer: Any) -> None:
        if answer.WhichOneof("answer") == "waiting":
            # Not an answer: the call waits for a person, for as long as it takes. This client
            # sets no deadline on a call, so there is none to lift; the call stays pending
            # until its answer arrives.
            self.waiting[answer.call_id] = answer.waiting
            return
        self.waiting.pop(answer.call_id, None)
        self._sent.pop(answer.call_id, None)
        future = self._pending.pop(answer.call_id, None)
        if future is not None and not future.done():
            future.set_result(answer)

    async def call(self, name: str, positional: bytes, named: bytes) -> Any:
        call_id = next(self._ids)
        try:
            request = stream_request(call_id, name, positional, named, current_traceparent())
        except UnicodeEncodeError:
            raise ToolError(
                f"the tool name {name!r} is not valid Unicode (it holds a lone surrogate)",
                type="InvalidArgument",
            ) from None
        future: asyncio.Future[Any] = self.loop.create_future()
        self._pending[call_id] = future
        self._sent[call_id] = request
        self._outbox.append(request)
        if not self._writing:
            await self._write_first()
        return await future

    async def _write_first(self) -> None:
        """Write what the outbox holds; a task writes what comes meanwhile (not this caller)."""
        self._writing = True
        try:
            await self._write_batch()
        finally:
            if self._reconnecting is not None:
                pass  # the reconnection sends the outbox once a connection is ready
            elif self._outbox:
                self._drainer = self.loop.create_task(self._drain())
            else:
                self._writing = False

    async def _drain(self) -> None:
        try:
            while self._outbox and self._reconnecting is None:
                await self._write_batch()
        finally:
            if self._reconnecting is None:
                self._writing = False

    async def _write_batch(self) -> None:
        stream = self._stream
        if stream is None:
            stream = self._open_stream()
        elif not self._in_flight() and self.loop.time() - self._opened_at > STREAM_LIFETIME:
            stream = await self._replace_stream()
        batch = self._take_batch()
        message = batch[0]
        if len(batch) > 1:
            message.more.extend(batch[1:])
        try:
            await stream.write(message)
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            failure = await _write_failure(exc, stream)
            if failure.type == "Unavailable" and ((self._connected and self._window > 0) or self._tls):
                return  # the stream's reader sends them again, or says why TLS failed
            for request in batch:
                self._sent.pop(request.call_id, None)
                future = self._pending.pop(request.call_id, None)
                if future is not None and not future.done():
                    future.set_exception(failure)

    def _in_flight(self) -> int:
        """Calls written to the open stream and not answered: every call pending but not yet
        sent is in the outbox (a waiting call is pending until its answer)."""
        return len(self._pending) - len(self._outbox)

    def _take_batch(self) -> list[pb.CallToolStreamRequest]:
        """The next message's calls: the first waiting, and as many more as the daemon reads."""
        outbox = self._outbox
        batch = [outbox.popleft()]
        if not outbox or not self._batch_bytes:
            return batch
        size = batch[0].ByteSize()
        while outbox and size + (more := outbox[0].ByteSize() + BATCH_ENTRY_BYTES) <= self._batch_bytes:
            batch.append(outbox.popleft())
            size += more
        return batch

    async def list_tools(self, format_value: pb.DefinitionFormat) -> Any:
        try:
            return await self._stub.ListTools(
                pb.ListToolsRequest(format=format_value), metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None


def _batch_bytes(metadata: Any) -> int:
    """The largest batch the daemon said it reads, from a stream's initial metadata (0: none)."""
    for key, value in metadata or ():
        if key == BATCH_BYTES_METADATA_KEY:
            try:
                return max(0, int(value))
            except ValueError:
                return 0
    return 0


async def _write_failure(exc: BaseException, stream: Any) -> ToolError:
    """What a call whose write failed is told."""
    if isinstance(exc, grpc.RpcError):
        return _rpc_error(exc)
    # The stream ended before the write: the daemon's status says why (for example a revoked
    # token), unless the connection itself is gone.
    code = await stream.code()
    if code is not None and code != grpc.StatusCode.OK:
        return _status_error(code.value[0], await stream.details() or code.name)
    return ToolError("the connection to the daemon closed", type="Unavailable", retryable=True)
