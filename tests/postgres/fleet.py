"""Daemon processes on one PostgreSQL database, for the multi-host tests.

Each :class:`Host` is ``host.py`` in a process of its own, with its own private socket dir
(the bridge makes a fresh one per process) and its own owner id: to the journal, as separate
as two machines. Its stdout is read line by line as JSON reports, which tests wait on with a
timeout (never a sleep).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = Path(__file__).with_name("host.py")
REPO = HOST.parents[2]


@dataclass(eq=False)
class Host:
    """One daemon process; ``await host.report(event)`` waits for a report it printed."""

    name: str
    process: asyncio.subprocess.Process
    reports: list[dict[str, Any]] = field(default_factory=list)
    # Notified at every report; hosts of one fleet may share it, to wait on all of them.
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    _reader: asyncio.Task[None] | None = None
    stderr_path: Path | None = None

    @classmethod
    async def start(cls, name: str, *args: str, work: Path, arrived: asyncio.Condition | None = None) -> Host:
        stderr = work / f"{name}-{len(list(work.glob(f'{name}-*.stderr')))}.stderr"
        with stderr.open("wb") as sink:
            process = await asyncio.create_subprocess_exec(
                sys.executable, str(HOST), *args, stdout=asyncio.subprocess.PIPE, stderr=sink, cwd=REPO
            )
        host = cls(name, process, stderr_path=stderr, arrived=arrived or asyncio.Condition())
        host._reader = asyncio.create_task(host._read())
        return host

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                report = json.loads(line)
                async with self.arrived:
                    self.reports.append(report)
                    self.arrived.notify_all()
        async with self.arrived:
            self.arrived.notify_all()

    async def report(self, event: str, timeout: float = 60.0) -> dict[str, Any]:
        """The first report of ``event``; fails when the process ends or time runs out first."""

        def found() -> dict[str, Any] | None:
            return next((r for r in self.reports if r.get("event") == event), None)

        async with asyncio.timeout(timeout), self.arrived:
            while (report := found()) is None:
                if self._reader is not None and self._reader.done():
                    raise AssertionError(f"host {self.name} ended without {event!r}: {self.stderr()}")
                await self.arrived.wait()
        return report

    def stderr(self) -> str:
        return "" if self.stderr_path is None else self.stderr_path.read_text()[-3000:]

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signum)

    async def wait(self, timeout: float = 60.0) -> int:
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
            if self._reader is not None:
                await self._reader
        return code

    async def kill(self) -> None:
        self.signal(signal.SIGCONT)  # a stopped process dies of SIGKILL too, but say it plainly
        self.signal(signal.SIGKILL)
        await self.wait()


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
