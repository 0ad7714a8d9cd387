"""What sandboxed code calls: ``tools.name(...)`` and ``definitions()``, over one connection
per event loop (:mod:`._transport`) to the daemon named in the environment.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

from inngest_tools import _replay
from inngest_tools._errors import ToolError
from inngest_tools._transport import (
    FORMATS,
    Connection,
    decode_definitions,
    decode_stream_answer,
    encode_arguments,
)

ADDRESS_VARIABLE = "TOOLBRIDGE_ADDRESS"
TOKEN_VARIABLE = "TOOLBRIDGE_TOKEN"

_connections: dict[int, Connection] = {}
_last: Connection | None = None  # the one used last: nearly always the one asked for


def _connection() -> Connection:
    global _last
    loop = asyncio.get_running_loop()
    if _last is not None and _last.loop is loop:
        return _last
    connection = _connections.get(id(loop))
    if connection is None or connection.loop is not loop:
        address = os.environ.get(ADDRESS_VARIABLE, "")
        token = os.environ.get(TOKEN_VARIABLE, "")
        if not address or not token:
            raise ToolError(
                f"not connected to a toolbridge daemon: {ADDRESS_VARIABLE} and {TOKEN_VARIABLE} "
                "are not set; run this code through step.sandbox, or set them to the address "
                "and token a host minted for this sandbox",
                type="NotConfigured",
            )
        connection = Connection(address, token)
        _connections[id(loop)] = connection
    _last = connection
    return connection


async def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call the tool ``name``; ``tools.name(...)`` is the same call."""
    positional, named = encode_arguments(args, kwargs)
    replay = _replay.current()
    if replay is not None and (record := replay.find(name, positional, named)) is not None:
        return _replay.answer(record)  # recorded by an earlier run of this command
    answer = await _connection().call(name, positional, named)
    return decode_stream_answer(answer)


async def definitions(format: str = "anthropic") -> list[dict[str, Any]]:
    """The definitions of this command's tools, in a model API's format.

    Args:
        format: ``"anthropic"``, ``"openai"``, ``"openai-strict"`` or ``"mcp"``.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    return decode_definitions(await _connection().list_tools(FORMATS[format]))


_callers: dict[str, Callable[..., Awaitable[Any]]] = {}  # made once per name: a loop calls often


class Tools:
    """``tools.name(...)`` calls the host tool ``name``; ``tools["name"]`` works too."""

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def __getitem__(self, name: str) -> Callable[..., Awaitable[Any]]:
        function = _callers.get(name)
        if function is None:

            async def call_tool(*args: Any, **kwargs: Any) -> Any:
                return await call(name, *args, **kwargs)

            call_tool.__name__ = call_tool.__qualname__ = name
            function = _callers[name] = call_tool
        return function

    def __repr__(self) -> str:
        return "<inngest_tools.tools>"


tools = Tools()
