"""``tool.shim(name, handler)``: a program on a command's PATH whose every run asks the host.

The program the sandbox runs is a small script (see :mod:`toolbridge._door`); what it runs
is a tool call like any other (journaled, counted against ``max_calls``, approved by a
person when the shim asks for it), whose handler receives a :class:`ShimCall` and answers
with one of its three replies:

- :meth:`ShimCall.reply`: stdout, stderr and an exit code the handler made itself;
- :meth:`ShimCall.run`: a real program the host runs outside the sandbox, with the argv,
  environment and stdin the handler chooses, its output streamed back as it comes;
- :meth:`ShimCall.refuse`: a message on stderr and an exit code.

The program's bytes (stdin in, stdout and stderr out) travel beside the call, not in it:
the door hands them to the handler through :data:`SHIM_IO`. The step's input holds the
argv, the working folder, the declared variables and stdin's size and digest; its result
holds the exit code, the outputs' sizes and digests, and the outputs themselves when they
fit in a reply (so that a replay can give them back). The environment a ``run`` is given
is never recorded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import hashlib
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbridge._errors import ToolError
from toolbridge._sandbox.orphans import die_with_parent
from toolbridge._tools.context import ToolContext
from toolbridge._tools.invoke import call_maybe_async

__all__ = [
    "SHIM_IO",
    "ShimCall",
    "ShimIO",
    "ShimSpec",
    "check_program_name",
    "make_shim",
    "replay_output",
]

PROGRAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")

CHUNK = 64 * 1024
"""Bytes of output read from a ``run`` program and sent on at a time."""


def check_program_name(name: object) -> str:
    if not isinstance(name, str) or not PROGRAM_NAME.fullmatch(name):
        raise ValueError(
            f"shim name {name!r} is not a program name: use letters, digits and . _ + - "
            "(at most 64, starting with a letter or digit)"
        )
    return name


@dataclass
class ShimIO:
    """The bytes of one shim run, beside its call: set by the door for the handler.

    Attributes:
        stdin: Everything the program read on its stdin.
        write: ``write(stream, data)`` sends output to the program (1: stdout, 2: stderr).
        keep: Bytes of output the step may record for a replay (the command's reply limit).
    """

    stdin: bytes
    write: Callable[[int, bytes], Awaitable[None]]
    keep: int
    streamed: bool = False


SHIM_IO: contextvars.ContextVar[ShimIO] = contextvars.ContextVar("toolbridge_shim_io")


@dataclass(frozen=True)
class _Reply:
    stdout: bytes
    stderr: bytes
    exit_code: int


@dataclass(frozen=True)
class _Run:
    argv: tuple[str, ...]
    env: Mapping[str, str] | None
    stdin: bytes | None
    cwd: str | None


@dataclass(frozen=True)
class ShimCall:
    """One run of a shimmed program in the sandbox, as its handler sees it.

    Attributes:
        name: The program's name.
        argv: Its arguments (without the program's name).
        cwd: The sandbox's working folder when it ran, relative to the command's (``"."``
            for the same folder); an absolute path when it was outside the command's.
        env: The variables the shim declared it reads (``env=``), as the sandbox had them.
        stdin: What the program read on its stdin.
        idempotency_key: The same for every attempt and every replay of this run.
        attempt: 1 for the first attempt.
    """

    name: str
    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    stdin: bytes
    idempotency_key: str
    attempt: int

    def reply(self, stdout: bytes | str = b"", stderr: bytes | str = b"", exit_code: int = 0) -> object:
        """Answer with output the handler made itself."""
        return _Reply(_bytes(stdout), _bytes(stderr), _exit_code(exit_code))

    def refuse(self, message: str, exit_code: int = 1) -> object:
        """Refuse: ``message`` goes to the program's stderr, and it exits with ``exit_code``."""
        text = message if message.endswith("\n") else message + "\n"
        return _Reply(b"", f"{self.name}: {text}".encode(), _exit_code(exit_code))

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: bytes | str | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> object:
        """Run a real program on the host, outside the sandbox, its output streamed back.

        Args:
            argv: The program (looked up on ``env["PATH"]``, or the host's PATH) and its
                arguments.
            env: Its whole environment (credentials included: they are never recorded);
                the host's own environment when not given.
            stdin: What it reads; the sandbox program's stdin when not given.
            cwd: Its working directory on the host; the daemon's when not given.
        """
        if isinstance(argv, (str, bytes)) or not argv:
            raise TypeError("run() takes the program and its arguments as a non-empty list")
        return _Run(
            tuple(str(part) for part in argv),
            None if env is None else dict(env),
            None if stdin is None else _bytes(stdin),
            None if cwd is None else os.fspath(cwd),
        )


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _exit_code(code: int) -> int:
    if not isinstance(code, int) or not 0 <= code <= 255:
        raise ValueError(f"an exit code is a whole number from 0 to 255, got {code!r}")
    return code


@dataclass(frozen=True)
class ShimSpec:
    """What ``tool.shim`` declared: the program's name and what its script sends."""

    program: str
    env: tuple[str, ...] = ()


@dataclass
class _Output:
    """One output stream of a run: sent on as it comes, digested, kept while it fits."""

    size: int = 0
    sha: Any = field(default_factory=hashlib.sha256)
    kept: bytearray = field(default_factory=bytearray)

    def add(self, data: bytes, room: int) -> None:
        self.size += len(data)
        self.sha.update(data)
        if len(self.kept) + len(data) <= room:
            self.kept += data

    def record(self) -> dict[str, Any]:
        return {"size": self.size, "sha256": self.sha.hexdigest()}


async def _run_program(order: _Run, io: ShimIO, outputs: tuple[_Output, _Output]) -> int:
    stdin = io.stdin if order.stdin is None else order.stdin
    env = dict(os.environ) if order.env is None else dict(order.env)
    try:
        process = await asyncio.create_subprocess_exec(
            *die_with_parent(order.argv),  # a killed daemon takes the program with it
            env=env,
            cwd=order.cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        message = f"{order.argv[0]}: cannot run on the host: {exc.strerror or exc}\n".encode()
        await _send(io, outputs, 2, message)
        return 127
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None

    async def feed() -> None:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(stdin)
            await process.stdin.drain()
        process.stdin.close()

    async def pump(stream: asyncio.StreamReader, number: int) -> None:
        while chunk := await stream.read(CHUNK):
            await _send(io, outputs, number, chunk)

    try:
        await asyncio.gather(feed(), pump(process.stdout, 1), pump(process.stderr, 2))
        return await process.wait()
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            await process.wait()


async def _send(io: ShimIO, outputs: tuple[_Output, _Output], number: int, data: bytes) -> None:
    room = io.keep - len(outputs[0].kept) - len(outputs[1].kept)
    outputs[number - 1].add(data, max(0, room))
    io.streamed = True
    await io.write(number, data)


def make_shim(
    program: str, handler: Callable[[ShimCall], Any], env: Sequence[str]
) -> Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]:
    """The tool handler of a shim: the door's bytes in, the user's handler, a result out."""

    async def run(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        io = SHIM_IO.get(None)
        if io is None:
            raise ToolError(
                f"{ctx.tool_name!r} is a program: run it as `{program} ...` in the sandbox", type="ShimOnly"
            )
        call = ShimCall(
            name=program,
            argv=tuple(args.get("argv", ())),
            cwd=str(args.get("cwd", ".")),
            env={name: value for name, value in dict(args.get("env", {})).items() if name in env},
            stdin=io.stdin,
            idempotency_key=ctx.idempotency_key,
            attempt=ctx.attempt,
        )
        answer = await call_maybe_async(handler, call)
        outputs = (_Output(), _Output())
        if isinstance(answer, _Reply):
            for number, data in ((1, answer.stdout), (2, answer.stderr)):
                if data:
                    await _send(io, outputs, number, data)
            code = answer.exit_code
        elif isinstance(answer, _Run):
            code = await _run_program(answer, io, outputs)
        else:
            raise TypeError(
                f"the handler of shim {program!r} returned {answer!r}: return call.reply(...), "
                "call.run(...) or call.refuse(...)"
            )
        result: dict[str, Any] = {
            "exit_code": code,
            "stdout": outputs[0].record(),
            "stderr": outputs[1].record(),
        }
        if all(len(out.kept) == out.size for out in outputs):
            result["replay"] = [base64.b64encode(out.kept).decode() for out in outputs]
        return result

    return run


def replay_output(result: Mapping[str, Any]) -> tuple[bytes, bytes, int]:
    """stdout, stderr and exit code of a recorded shim run, for the program run again."""
    code = int(result.get("exit_code", 1))
    kept = result.get("replay")
    if isinstance(kept, list) and len(kept) == 2:
        return base64.b64decode(kept[0]), base64.b64decode(kept[1]), code
    note = (
        "toolbridge: this run is replayed from the journal, whose record of its output "
        f"({result.get('stdout', {}).get('size')} + {result.get('stderr', {}).get('size')} bytes) "
        "was too large to keep\n"
    )
    return b"", note.encode(), code
