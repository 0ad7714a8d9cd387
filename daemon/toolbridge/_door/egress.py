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

This module is the proxy: connections and requests from the sandbox, connections upstream.
The checks and the journal are :mod:`toolbridge._door.gate`'s, the swap
:mod:`toolbridge._door.placeholders`', the HTTP/1.1 (h11 on both sides; nothing here parses
HTTP by hand) :mod:`toolbridge._door.http`'s.
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
from collections.abc import Mapping
from urllib.parse import urlsplit

import h11
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from toolbridge._calls.scope import CommandScope
from toolbridge._door.ca import CommandCA
from toolbridge._door.gate import Gate, Refusal, span
from toolbridge._door.http import (
    ENDED,
    PLAIN_PORT,
    Target,
    Upstream,
    answer,
    next_event,
    outgoing_headers,
    relay,
    serve_tls,
    split_authority,
)
from toolbridge._door.placeholders import Placeholders
from toolbridge._door.policy import Egress
from toolbridge._records import StepRecord
from toolbridge._telemetry import tracing

__all__ = ["EgressDoor"]

log = logging.getLogger("toolbridge")


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
        self._token = token
        self._placeholders = Placeholders(egress.secrets, placeholders)
        self._gate = Gate(scope, egress, self._placeholders)
        self._upstream_tls = ssl.create_default_context()
        if egress.upstream_ca is not None:
            self._upstream_tls.load_verify_locations(cafile=str(egress.upstream_ca))
        self._upstream_tls.set_alpn_protocols(["http/1.1"])

    @property
    def requests(self) -> int:
        """The requests the command has made through the door."""
        return self._gate.requests

    # The connection from the sandbox ---------------------------------------------------

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        upstream: Upstream | None = None
        tunneled = False  # the streams were handed to TLS: only its own close ends them
        try:
            while True:
                event = await next_event(conn, reader)
                if not isinstance(event, h11.Request):
                    return
                if not self._authorized(event):
                    await answer(conn, writer, 407, "toolbridge egress: proxy credentials needed")
                    return
                if event.method == b"CONNECT":
                    tunneled = True
                    await self._tunnel(conn, reader, writer, event)
                    return
                try:
                    target, path = self._absolute(event)
                except Refusal as refusal:
                    await answer(conn, writer, refusal.status, str(refusal))
                    return
                upstream = await self._exchange(conn, reader, writer, event, target, path, upstream)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except ENDED as exc:
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

    def _absolute(self, request: h11.Request) -> tuple[Target, str]:
        url = urlsplit(request.target.decode("ascii", "replace"))
        if url.scheme != "http" or not url.hostname:
            raise Refusal(
                400, "toolbridge egress: send http:// URLs in absolute form, https:// through CONNECT"
            )
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        return Target("http", url.hostname.lower(), url.port or 80), path

    async def _tunnel(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: h11.Request,
    ) -> None:
        split = split_authority(request.target.decode("ascii", "replace"))
        if split is None:
            await answer(conn, writer, 400, "toolbridge egress: CONNECT needs host:port")
            return
        host, port = split
        target = Target("http" if port == PLAIN_PORT else "https", host, port)
        if self.egress.rule(host, port) is None:
            # Refused before any byte of the request is seen: journaled as a CONNECT.
            message = f"toolbridge egress: {target.authority} is not an allowed host for this command"
            await self._gate.refused("CONNECT", target, "", 403, message)
            await answer(conn, writer, 403, message)
            return
        writer.write(conn.send(h11.Response(status_code=200, headers=[], reason=b"Connection established")))
        await writer.drain()
        if target.scheme == "https":
            reader, writer = await serve_tls(writer, self.ca.context_for(host))
        inner = h11.Connection(h11.SERVER)
        if conn.trailing_data[0]:  # (h11 takes b"" for the end of the stream)
            inner.receive_data(conn.trailing_data[0])
        upstream: Upstream | None = None
        try:
            while True:
                event = await next_event(inner, reader)
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
        target: Target,
        path: str,
        upstream: Upstream | None,
    ) -> Upstream | None:
        method = request.method.decode("ascii", "replace").upper()
        started = time.monotonic()
        body = bytearray()
        if conn.they_are_waiting_for_100_continue:  # curl waits a second for it otherwise
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        while True:
            event = await next_event(conn, reader)
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.egress.max_body:
                    await answer(conn, writer, 413, "toolbridge egress: the request body is too large")
                    raise ConnectionResetError("request body too large")
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise ConnectionResetError("the request ended early")
        request_span = span(self.scope, method, target, path)
        try:
            return await self._answer_request(
                conn, writer, request, target, path, upstream, body, started, request_span
            )
        finally:
            request_span.end()

    async def _answer_request(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        target: Target,
        path: str,
        upstream: Upstream | None,
        body: bytearray,
        started: float,
        span: trace.Span,
    ) -> Upstream | None:
        method = request.method.decode("ascii", "replace").upper()
        rec: StepRecord | None = None
        try:
            used = self._gate.check(method, target, path, request.headers, bytes(body))
            rec = await self._gate.step(method, target, path, used)
            await self._gate.confirm(method, target, path, rec)
            headers = outgoing_headers(
                self._placeholders.swap(request.headers, used), target, len(body), method
            )
            upstream, response, sent = await self._forward(
                conn,
                writer,
                upstream,
                target,
                h11.Request(method=method, target=path, headers=headers),
                bytes(body),
            )
        except Refusal as refusal:
            span.set_attribute("http.response.status_code", refusal.status)
            span.set_status(Status(StatusCode.ERROR, str(refusal)))
            if refusal.recorded:
                await self._gate.refused(method, target, path, refusal.status, str(refusal), rec=rec)
            await answer(conn, writer, refusal.status, str(refusal))
            return upstream
        except (OSError, TimeoutError, ssl.SSLError, h11.ProtocolError) as exc:
            message = f"toolbridge egress: {target.authority} could not be reached: {exc!r}"
            span.set_status(Status(StatusCode.ERROR, message))
            if rec is not None:
                await self._gate.failed(
                    rec, {"type": "EgressUpstreamError", "message": message, "status": 502}
                )
            if upstream is not None:
                upstream.close()
            with contextlib.suppress(h11.LocalProtocolError):
                await answer(conn, writer, 502, message)
            return None
        assert rec is not None
        span.set_attribute("http.response.status_code", response)
        span.set_attribute("toolbridge.egress.secrets", sorted(used))  # names, never values
        span.set_attribute(tracing.STEP_KEY, rec.key)
        await self._gate.completed(
            rec, status=response, request_bytes=len(body), response_bytes=sent, started=started, used=used
        )
        return upstream

    async def _forward(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        upstream: Upstream | None,
        target: Target,
        request: h11.Request,
        body: bytes,
    ) -> tuple[Upstream | None, int, int]:
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
            upstream = Upstream(target, up_reader, up_writer)
        return await relay(conn, writer, upstream, request, body, self.egress.timeout)

    async def _address(self, target: Target) -> str:
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
        if not self._gate.rule(target).private:
            inside = [a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_global]
            if inside:
                raise Refusal(
                    403,
                    f"toolbridge egress: {target.host} resolves to {inside[0]}, a non-public address: "
                    "refused (EgressRule(private=True) allows it)",
                )
        return addresses[0]
