"""The host side of a shimmed program: one connection, one tool call, the bytes beside it.

The program's script (``programs/shim.py``) sends its argv, working folder, declared
variables and stdin; the run is a tool call of the command (``call_tool``: journaled,
counted, approved, replayed), whose handler reaches the bytes through ``SHIM_IO``. A
replayed run's output comes from its record.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
from pathlib import Path
from typing import Any

from toolbridge._calls.call import call_tool
from toolbridge._calls.scope import CommandScope
from toolbridge._door.programs.shim import EXIT, HEADER, HELLO, STDERR, STDIN, STDIN_END, STDOUT
from toolbridge._errors import ProtocolError
from toolbridge._tools.shim import SHIM_IO, ShimIO, replay_output

__all__ = ["MAX_STDIN", "serve_shim"]

log = logging.getLogger("toolbridge")

MAX_STDIN = 64 * 1024 * 1024
"""Bytes of stdin a shimmed program may send (read whole before the call: its digest is part
of the step's input)."""

MAX_HELLO = 1024 * 1024
CHUNK = 64 * 1024


class _RefusedError(Exception):
    pass


async def _frame(reader: asyncio.StreamReader, limit: int) -> tuple[bytes, bytes]:
    kind, size = HEADER.unpack(await reader.readexactly(HEADER.size))
    if size > limit:
        raise _RefusedError(f"a message of {size} bytes is more than the {limit} allowed")
    return kind, await reader.readexactly(size)


def _relative(cwd: str, command_cwd: Path) -> str:
    if not cwd:
        return "."
    relative = os.path.relpath(cwd, command_cwd)
    return cwd if relative == ".." or relative.startswith("../") else relative


async def serve_shim(
    scope: CommandScope,
    token: str,
    command_cwd: Path,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    """Answer one run of a shimmed program, from its hello to its exit frame."""
    lost = False

    async def write(kind: bytes, data: bytes) -> None:
        nonlocal lost
        if lost or not data:
            return
        try:
            for start in range(0, max(len(data), 1), CHUNK):
                piece = data[start : start + CHUNK]
                writer.write(HEADER.pack(kind, len(piece)) + piece)
                await writer.drain()
        except (ConnectionError, OSError):
            lost = True  # the sandbox is gone; the run goes on to its recorded end

    try:
        kind, payload = await _frame(reader, MAX_HELLO)
        hello: dict[str, Any] = json.loads(payload) if kind == HELLO else {}
        if not hmac.compare_digest(str(hello.get("token", "")).encode(), token.encode()):
            raise _RefusedError("this door is not yours")
        tool_name = str(hello.get("tool", ""))
        tool = scope.tools.get(tool_name)
        if tool is None or tool.shim is None:
            raise _RefusedError(f"no shim named {tool_name!r} for this command")
        stdin = bytearray()
        while True:
            kind, data = await _frame(reader, CHUNK)
            if kind == STDIN_END:
                break
            if kind != STDIN:
                raise _RefusedError("unexpected message")
            stdin += data
            if len(stdin) > MAX_STDIN:
                raise _RefusedError(f"stdin is more than the {MAX_STDIN} bytes a shimmed program may read")
        named = {
            "argv": [str(part) for part in hello.get("argv", [])],
            "cwd": _relative(str(hello.get("cwd", "")), command_cwd),
            "env": {str(k): str(v) for k, v in dict(hello.get("env", {})).items() if k in tool.shim.env},
            "stdin": {"size": len(stdin), "sha256": hashlib.sha256(stdin).hexdigest()},
        }
        io = ShimIO(
            stdin=bytes(stdin),
            write=lambda number, data: write(STDOUT if number == 1 else STDERR, data),
            keep=scope.options.max_reply_bytes // 2,  # base64 of both outputs fits in a reply
        )
        SHIM_IO.set(io)
        program = tool.shim.program
        try:
            outcome = await call_tool(scope, tool_name, b"", json.dumps(named).encode())
        except ProtocolError as exc:
            raise _RefusedError(str(exc)) from None
        if outcome.error is not None:
            await write(STDERR, f"{program}: toolbridge: {outcome.error.message}\n".encode())
            code = 1
        else:
            stdout, stderr, code = replay_output(json.loads(outcome.result_json or "{}"))
            if outcome.replayed or not io.streamed:
                await write(STDOUT, stdout)
                await write(STDERR, stderr)
        await write(EXIT, json.dumps({"code": code}).encode())
    except _RefusedError as exc:
        await write(STDERR, f"toolbridge: shim refused: {exc}\n".encode())
        await write(EXIT, b'{"code": 126}')
    except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
        log.debug("a shimmed program's connection ended early: %s", exc)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
