"""The egress door: an HTTP proxy the daemon serves to one command, and nothing else out.

A request reaches it as ``CONNECT host:port`` (HTTPS: the door ends the sandbox's TLS with
the command's own CA, see :mod:`toolbridge._door.ca`, and speaks TLS again upstream with the
system's trust) or as an absolute-form ``GET http://...`` (plain HTTP). Every request is
checked, in order: the proxy token; the budget (``429``); a placeholder bound to another
host anywhere in it (``403``); the host and method allowed (``403``); a person's approval
when the rule asks for one. Then the placeholders of secrets bound to the host are swapped
for the secrets in its headers, it goes upstream, and the answer streams back. Each request
is a step of the command (kind ``egress``): method, URL, status, sizes, timing, and the
names of the secrets used, never their values.

HTTP/1.1 is parsed by h11 on both sides; nothing here parses HTTP by hand.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import ipaddress
import logging
import socket
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import h11
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from toolbridge._calls import approvals
from toolbridge._calls.scope import CommandScope
from toolbridge._door.ca import CommandCA
from toolbridge._door.policy import Egress, EgressRule
from toolbridge._json import canonical, digest, dumps
from toolbridge._records import StepRecord
from toolbridge._telemetry import tracing
from toolbridge._tools.tool import BoundCall, Tool

__all__ = ["EgressDoor"]

log = logging.getLogger("toolbridge")

READ = 65536
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
        b"expect",  # answered here (100 Continue); the body goes upstream whole
    }
)
PLAIN_PORT = 80
"""A ``CONNECT`` to this port carries plain HTTP; to any other, TLS."""

_ENDED = (h11.ProtocolError, ConnectionError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError)
"""How a connection with the sandbox or upstream ends early."""

_APPROVAL = Tool(kind="step", handler=lambda *_: None, requires_confirmation=True, name="egress")


class _Refusal(Exception):  # noqa: N818 (an answer, not a fault)
    def __init__(self, status: int, message: str, *, recorded: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.recorded = recorded


@dataclass
class _Target:
    scheme: str
    host: str
    port: int

    @property
    def authority(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


@dataclass
class _Upstream:
    """One connection upstream, kept for the next request of the same tunnel."""

    target: _Target
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    conn: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))

    def close(self) -> None:
        self.writer.close()


async def _next_event(
    conn: h11.Connection, reader: asyncio.StreamReader, timeout: float | None = None
) -> Any:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        if timeout is None:
            data = await reader.read(READ)
        else:
            async with asyncio.timeout(timeout):
                data = await reader.read(READ)
        conn.receive_data(data)


class _TLSProtocol(asyncio.StreamReaderProtocol):
    def eof_received(self) -> bool:
        super().eof_received()
        return False  # over TLS a half-close means nothing: the stream ends


async def _serve_tls(
    writer: asyncio.StreamWriter, context: ssl.SSLContext
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The server side of TLS on an accepted connection, as new streams.

    Not ``StreamWriter.start_tls``: on Python 3.11 a server-side upgrade calls the server's
    connection callback a second time, with the decrypted streams, and the first handler
    sees an end of file.
    """
    loop = asyncio.get_running_loop()
    await writer.drain()
    reader = asyncio.StreamReader(limit=READ)
    protocol = _TLSProtocol(reader)
    transport = await loop.start_tls(writer.transport, protocol, context, server_side=True)
    if transport is None:
        raise ConnectionResetError("the sandbox closed the connection during the TLS handshake")
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def _span(scope: CommandScope, method: str, target: _Target, path: str) -> trace.Span:
    """A client span for one request, under the command's span (HTTP semantic conventions)."""
    return trace.get_tracer(tracing.TRACER_NAME).start_span(
        f"{method} {target.authority}",
        context=scope.trace_context,
        kind=SpanKind.CLIENT,
        attributes={
            "http.request.method": method,
            "server.address": target.host,
            "server.port": target.port,
            "url.scheme": target.scheme,
            "url.path": urlsplit(path).path,
            tracing.RUN_ID: scope.run.run_id,
            tracing.STEP_KIND: "egress",
        },
    )


def _split_authority(authority: str) -> tuple[str, int] | None:
    host, sep, port = authority.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    host = host.strip("[]").lower()
    return host, int(port)


class EgressDoor:
    """The proxy of one command.

    Args:
        scope: The command's scope (its run, where requests are journaled and approved).
        egress: What it may do.
        placeholders: Secret name -> the placeholder the sandbox holds.
        token: The proxy credential (``Proxy-Authorization: Basic``, user ``door``).
    """

    def __init__(
        self, scope: CommandScope, egress: Egress, placeholders: Mapping[str, str], token: str
    ) -> None:
        self.scope = scope
        self.egress = egress
        self.ca = CommandCA()
        self.requests = 0
        self._token = token
        self._secrets = {s.name: s for s in egress.secrets}
        self._placeholders = dict(placeholders)
        self._upstream_tls = ssl.create_default_context()
        if egress.upstream_ca is not None:
            self._upstream_tls.load_verify_locations(cafile=str(egress.upstream_ca))
        self._upstream_tls.set_alpn_protocols(["http/1.1"])

    # The connection from the sandbox ---------------------------------------------------

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        upstream: _Upstream | None = None
        tunneled = False  # the streams were handed to TLS: only its own close ends them
        try:
            while True:
                event = await _next_event(conn, reader)
                if not isinstance(event, h11.Request):
                    return
                if not self._authorized(event):
                    await self._answer(conn, writer, 407, "toolbridge egress: proxy credentials needed")
                    return
                if event.method == b"CONNECT":
                    tunneled = True
                    await self._tunnel(conn, reader, writer, event)
                    return
                try:
                    target, path = self._absolute(event)
                except _Refusal as refusal:
                    await self._answer(conn, writer, refusal.status, str(refusal))
                    return
                upstream = await self._exchange(conn, reader, writer, event, target, path, upstream)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (
            h11.ProtocolError,
            ConnectionError,
            TimeoutError,
            asyncio.IncompleteReadError,
            ssl.SSLError,
        ) as exc:
            log.debug("an egress connection ended: %r", exc)
        finally:
            if upstream is not None:
                upstream.close()
            writer.close()
            if not tunneled:
                with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
                    await writer.wait_closed()

    def _authorized(self, request: h11.Request) -> bool:
        for name, value in request.headers:
            if name == b"proxy-authorization" and value[:6].lower() == b"basic ":
                try:
                    _user, _, password = base64.b64decode(value[6:].strip()).partition(b":")
                except (binascii.Error, ValueError):
                    return False
                return hmac.compare_digest(password, self._token.encode())
        return False

    def _absolute(self, request: h11.Request) -> tuple[_Target, str]:
        url = urlsplit(request.target.decode("ascii", "replace"))
        if url.scheme != "http" or not url.hostname:
            raise _Refusal(
                400, "toolbridge egress: send http:// URLs in absolute form, https:// through CONNECT"
            )
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        return _Target("http", url.hostname.lower(), url.port or 80), path

    async def _tunnel(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: h11.Request,
    ) -> None:
        split = _split_authority(request.target.decode("ascii", "replace"))
        if split is None:
            await self._answer(conn, writer, 400, "toolbridge egress: CONNECT needs host:port")
            return
        host, port = split
        target = _Target("http" if port == PLAIN_PORT else "https", host, port)
        if self.egress.rule(host, port) is None:
            # Refused before any byte of the request is seen: journaled as a CONNECT.
            message = f"toolbridge egress: {target.authority} is not an allowed host for this command"
            await self._record_refusal("CONNECT", target, "", 403, message)
            await self._answer(conn, writer, 403, message)
            return
        writer.write(conn.send(h11.Response(status_code=200, headers=[], reason=b"Connection established")))
        await writer.drain()
        if target.scheme == "https":
            reader, writer = await _serve_tls(writer, self.ca.context_for(host))
        inner = h11.Connection(h11.SERVER)
        if conn.trailing_data[0]:  # (h11 takes b"" for the end of the stream)
            inner.receive_data(conn.trailing_data[0])
        upstream: _Upstream | None = None
        try:
            while True:
                event = await _next_event(inner, reader)
                if not isinstance(event, h11.Request):
                    return
                path = event.target.decode("ascii", "replace")
                if not path.startswith("/"):
                    path = urlsplit(path).path or "/"
                upstream = await self._exchange(inner, reader, writer, event, target, path, upstream)
                if inner.our_state is h11.MUST_CLOSE or inner.their_state is h11.MUST_CLOSE:
                    return
                inner.start_next_cycle()
        finally:
            if upstream is not None:
                upstream.close()
            writer.close()
            with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
                await writer.wait_closed()

    # One request -------------------------------------------------------------------------

    async def _exchange(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        target: _Target,
        path: str,
        upstream: _Upstream | None,
    ) -> _Upstream | None:
        method = request.method.decode("ascii", "replace").upper()
        started = time.monotonic()
        body = bytearray()
        if conn.they_are_waiting_for_100_continue:  # curl waits a second for it otherwise
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        while True:
            event = await _next_event(conn, reader)
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.egress.max_body:
                    await self._answer(conn, writer, 413, "toolbridge egress: the request body is too large")
                    raise ConnectionResetError("request body too large")
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise ConnectionResetError("the request ended early")
        span = _span(self.scope, method, target, path)
        try:
            return await self._answer_request(
                conn, writer, request, target, path, upstream, body, started, span
            )
        finally:
            span.end()

    async def _answer_request(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        target: _Target,
        path: str,
        upstream: _Upstream | None,
        body: bytearray,
        started: float,
        span: trace.Span,
    ) -> _Upstream | None:
        method = request.method.decode("ascii", "replace").upper()
        rec: StepRecord | None = None
        try:
            used = self._check(method, target, path, request.headers, bytes(body))
            rec = await self._step(method, target, path, used)
            await self._confirm(method, target, path, rec)
            headers = self._outgoing_headers(request.headers, target, used, len(body), method)
            upstream, response, sent = await self._forward(
                conn, writer, upstream, target, method, path, headers, bytes(body)
            )
        except _Refusal as refusal:
            span.set_attribute("http.response.status_code", refusal.status)
            span.set_status(Status(StatusCode.ERROR, str(refusal)))
            if refusal.recorded:
                await self._record_refusal(method, target, path, refusal.status, str(refusal), rec=rec)
            await self._answer(conn, writer, refusal.status, str(refusal))
            return upstream
        except (OSError, TimeoutError, ssl.SSLError, h11.ProtocolError) as exc:
            message = f"toolbridge egress: {target.authority} could not be reached: {exc!r}"
            span.set_status(Status(StatusCode.ERROR, message))
            if rec is not None:
                rec.fail({"type": "EgressUpstreamError", "message": message, "status": 502})
                await self.scope.run.journal.write(rec)
            if upstream is not None:
                upstream.close()
            with contextlib.suppress(h11.LocalProtocolError):
                await self._answer(conn, writer, 502, message)
            return None
        assert rec is not None
        span.set_attribute("http.response.status_code", response)
        span.set_attribute("toolbridge.egress.secrets", sorted(used))  # names, never values
        span.set_attribute(tracing.STEP_KEY, rec.key)
        rec.complete(
            dumps(
                {
                    "status": response,
                    "request_bytes": len(body),
                    "response_bytes": sent,
                    "duration_ms": round((time.monotonic() - started) * 1000, 2),
                    "secrets": sorted(used),
                }
            )
        )
        await self.scope.run.journal.write(rec)
        return upstream

    def _check(
        self, method: str, target: _Target, path: str, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> set[str]:
        """The names of the secrets the request may have swapped in; raises to refuse it."""
        self.requests += 1
        if self.requests > self.egress.max_requests:
            raise _Refusal(
                429, f"toolbridge egress: this command made more than {self.egress.max_requests} requests"
            )
        found = self._placeholders_in(path.encode(), headers, body)
        foreign = sorted(name for name in found if not self._secrets[name].bound_to(target.host, target.port))
        if foreign:
            raise _Refusal(
                403,
                f"toolbridge egress: refused: this request to {target.authority} carries the placeholder "
                f"of secret {', '.join(foreign)}, which is not bound to that host",
            )
        rule = self.egress.rule(target.host, target.port)
        if rule is None:
            raise _Refusal(
                403, f"toolbridge egress: {target.authority} is not an allowed host for this command"
            )
        if not rule.allows(method):
            raise _Refusal(403, f"toolbridge egress: {method} is not allowed to {target.authority}")
        return found

    def _placeholders_in(self, path: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> set[str]:
        texts = [path, body]
        for name, value in headers:
            texts.append(value)
            if name in (b"authorization", b"proxy-authorization") and value[:6].lower() == b"basic ":
                with contextlib.suppress(binascii.Error, ValueError):
                    texts.append(base64.b64decode(value[6:].strip()))
        return {
            name
            for name, placeholder in self._placeholders.items()
            if any(placeholder.encode() in text for text in texts)
        }

    def _rule(self, target: _Target) -> EgressRule:
        rule = self.egress.rule(target.host, target.port)
        assert rule is not None
        return rule

    async def _step(self, method: str, target: _Target, path: str, used: set[str]) -> StepRecord:
        scope, run = self.scope, self.scope.run
        url = f"{target.scheme}://{target.authority}{path}"
        input_json = canonical({"method": method, "url": url, "secrets": sorted(used)})
        key = await scope.keys.key(f"{scope.command_key}/egress@{digest(input_json, 12)}")
        rec = await run.claim(key, by=scope.keys)
        if rec is None:
            rec = run.new_step(
                key,
                parent_key=scope.command_key or None,
                kind="egress",
                name=f"{method} {target.authority}",
                input_json=input_json,
            )
            # A request still going after a moment is journaled as running: a host killed
            # meanwhile leaves it interrupted in the trace, not missing.
            run.start_records.watch(rec)
        elif not approvals.was_waiting(rec):
            # Made again by a command that ran again: a request is not replayed from the
            # journal (its answer is not recorded), it is made again and recorded anew.
            rec.status, rec.output_json, rec.error, rec.finished_at = "running", None, None, None
        rec.attempts += 1
        return rec

    async def _confirm(self, method: str, target: _Target, path: str, rec: StepRecord) -> None:
        if not self._rule(target).confirms(method):
            return
        request = {"method": method, "url": f"{target.scheme}://{target.authority}{path}"}
        bound = BoundCall([request], {}, lambda: request)
        verdict = await approvals.gate(self.scope, _APPROVAL, "egress", rec, bound)
        if verdict is None:
            return
        if verdict.suspended is not None:
            raise _Refusal(
                503, "toolbridge egress: the request waits for a person; the command stops", recorded=False
            )
        error = verdict.error
        raise _Refusal(403, f"toolbridge egress: {error.message if error else 'not approved'}")

    def _outgoing_headers(
        self,
        headers: Sequence[tuple[bytes, bytes]],
        target: _Target,
        used: set[str],
        length: int,
        method: str,
    ) -> list[tuple[bytes, bytes]]:
        swaps = [(self._placeholders[n].encode(), self._secrets[n].value.encode()) for n in used]
        out: list[tuple[bytes, bytes]] = [(b"host", target.authority.encode())]
        for name, value in headers:
            if name in HOP_BY_HOP:
                continue
            if swaps and name == b"authorization" and value[:6].lower() == b"basic ":
                with contextlib.suppress(binascii.Error, ValueError):
                    decoded = base64.b64decode(value[6:].strip())
                    for placeholder, secret in swaps:
                        decoded = decoded.replace(placeholder, secret)
                    value = b"Basic " + base64.b64encode(decoded)
            for placeholder, secret in swaps:
                value = value.replace(placeholder, secret)
            out.append((name, value))
        if length or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
            out.append((b"content-length", str(length).encode()))
        return out

    async def _forward(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        upstream: _Upstream | None,
        target: _Target,
        method: str,
        path: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> tuple[_Upstream | None, int, int]:
        if upstream is not None and (upstream.target != target or upstream.conn.our_state is not h11.IDLE):
            upstream.close()
            upstream = None
        if upstream is None:
            tls = self._upstream_tls if target.scheme == "https" else None
            async with asyncio.timeout(self.egress.timeout):
                address = await self._address(target)
                up_reader, up_writer = await asyncio.open_connection(
                    address, target.port, ssl=tls, server_hostname=target.host if tls else None
                )
            upstream = _Upstream(target, up_reader, up_writer)
        up = upstream.conn
        data = up.send(h11.Request(method=method, target=path, headers=headers))
        if body:
            data += up.send(h11.Data(data=body))
        data += up.send(h11.EndOfMessage())
        upstream.writer.write(data)
        await upstream.writer.drain()
        response = await _next_event(up, upstream.reader, self.egress.timeout)
        while isinstance(response, h11.InformationalResponse):
            response = await _next_event(up, upstream.reader, self.egress.timeout)
        if not isinstance(response, h11.Response):
            raise h11.RemoteProtocolError("no response upstream")
        kept = [(n, v) for n, v in response.headers if n not in HOP_BY_HOP or n == b"content-length"]
        writer.write(
            conn.send(h11.Response(status_code=response.status_code, headers=kept, reason=response.reason))
        )
        sent = 0
        while True:
            event = await _next_event(up, upstream.reader, self.egress.timeout)
            if isinstance(event, h11.Data):
                sent += len(event.data)
                writer.write(conn.send(h11.Data(data=event.data)))
                await writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                break
            else:
                raise h11.RemoteProtocolError("the answer upstream ended early")
        if up.our_state is h11.DONE and up.their_state is h11.DONE:
            up.start_next_cycle()
            return upstream, response.status_code, sent
        upstream.close()  # the server closes after this answer: the next request connects anew
        return None, response.status_code, sent

    async def _address(self, target: _Target) -> str:
        """The address to connect to: resolved once, here, and checked (no second lookup for
        the connection to be rebound to)."""
        try:
            literal = ipaddress.ip_address(target.host)
        except ValueError:
            literal = None
        if literal is not None or target.host == "localhost":
            return target.host  # written as an address: it means what it says
        found = await asyncio.get_running_loop().getaddrinfo(
            target.host, target.port, type=socket.SOCK_STREAM
        )
        addresses = [str(info[4][0]) for info in found]
        if not self._rule(target).private:
            inside = [a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_global]
            if inside:
                raise _Refusal(
                    403,
                    f"toolbridge egress: {target.host} resolves to {inside[0]}, a non-public address: "
                    "refused (EgressRule(private=True) allows it)",
                )
        return addresses[0]

    # Answers and records ---------------------------------------------------------------

    async def _answer(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int, message: str
    ) -> None:
        body = (message + "\n").encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()

    async def _record_refusal(
        self,
        method: str,
        target: _Target,
        path: str,
        status: int,
        message: str,
        *,
        rec: StepRecord | None = None,
    ) -> None:
        if rec is None:
            rec = await self._step(method, target, path, set())
        rec.fail({"type": "EgressRefused", "message": message, "status": status})
        await self.scope.run.journal.write(rec)
