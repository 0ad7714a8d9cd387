"""Fixtures for the hosts tests: certificates, a network of namespaces, daemons on its hosts."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.hosts import netns
from tests.tls_certs import CA, new_ca

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
WAIT = 60.0
PORT = 7443  # inside a namespace of this run's own: nothing else listens there


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return new_ca(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def net() -> Iterator[netns.Network]:
    reason = netns.available()
    if reason is not None:
        if os.environ.get("TOOLBRIDGE_REQUIRE_NETNS") == "1":
            pytest.fail(f"TOOLBRIDGE_REQUIRE_NETNS=1 but {reason}")
        pytest.skip(reason)
    with netns.network() as made:
        yield made


class Fifos:
    """The ``hold`` tool's signals: it says ``started`` and waits for ``release-<label>``."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(exist_ok=True)
        os.mkfifo(directory / "started")
        # Held open for reading and writing: a tool's open never blocks, and no EOF comes.
        self._started = os.open(directory / "started", os.O_RDWR | os.O_NONBLOCK)
        self._buffer = b""
        self._lines: asyncio.Queue[str] = asyncio.Queue()

    def expect(self, label: str) -> None:
        os.mkfifo(self.dir / f"release-{label}")

    def _readable(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._buffer += os.read(self._started, 4096)
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._lines.put_nowait(line.decode())

    async def started(self) -> str:
        """The label of the next ``hold`` call that started."""
        loop = asyncio.get_running_loop()
        loop.add_reader(self._started, self._readable)
        try:
            return await asyncio.wait_for(self._lines.get(), WAIT)
        finally:
            loop.remove_reader(self._started)

    async def release(self, label: str) -> None:
        def write() -> None:
            with open(self.dir / f"release-{label}", "w") as fifo:  # waits for the tool's read end
                fifo.write("go\n")

        await asyncio.wait_for(asyncio.to_thread(write), WAIT)

    def close(self) -> None:
        os.close(self._started)


@dataclass
class App:
    """The hosts app (tests/hosts/app.py) in a directory, with its ledger and signals."""

    dir: Path
    ledger: Path
    fifos: Fifos
    env: dict[str, str] = field(default_factory=dict)

    def executions(self) -> list[dict[str, Any]]:
        import json

        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines()]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    directory = tmp_path / "app"
    directory.mkdir()
    shutil.copy(Path(__file__).with_name("app.py"), directory / "hosts_app.py")
    fifos = Fifos(tmp_path / "fifos")
    ledger = tmp_path / "ledger.jsonl"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOSTS_LEDGER": str(ledger),
        "HOSTS_FIFOS": str(fifos.dir),
    }
    try:
        yield App(directory, ledger, fifos, env)
    finally:
        fifos.close()


async def toolbridge(app: App, *args: str) -> str:
    """Run ``toolbridge ARGS`` on this machine (not in a namespace); its standard output."""
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, *args, cwd=app.dir, env=app.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, stderr.decode()
    return stdout.decode().strip()


@dataclass
class Daemon:
    """``toolbridge serve`` running on one host."""

    name: str
    address: str
    process: asyncio.subprocess.Process
    log: Path

    async def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signum)
        return await asyncio.wait_for(self.process.wait(), WAIT)


@contextlib.asynccontextmanager
async def serving(
    app: App, host: netns.Host, journal: str, *flags: str, name: str = "A"
) -> AsyncIterator[Daemon]:
    """``toolbridge serve`` on ``host`` until the block ends (killed if still running)."""
    log = app.dir.parent / f"daemon-{name}.log"
    with open(log, "ab") as errors:
        process = await asyncio.create_subprocess_exec(
            *host.exec(
                TOOLBRIDGE, "serve", "hosts_app:bridge", "--journal", journal,
                "--listen", f"{host.address}:{PORT}", *flags,
            ),
            cwd=app.dir, env={**app.env, "HOSTS_DAEMON": name},
            stdout=asyncio.subprocess.PIPE, stderr=errors,
        )  # fmt: skip
    assert process.stdout is not None
    daemon = None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        assert line.startswith("TOOLBRIDGE_ADDRESS="), f"{line!r}: {log.read_text()}"
        daemon = Daemon(name, line.removeprefix("TOOLBRIDGE_ADDRESS="), process, log)
        yield daemon
    finally:
        if process.returncode is None:
            process.kill()
        await asyncio.wait_for(process.wait(), WAIT)


async def until(condition: object, what: str, timeout: float = WAIT) -> None:
    """Wait until ``condition()`` holds, looking every 0.1 s, for at most ``timeout`` s.

    For states the kernel or another process keeps (a TCP connection's, a file's), which
    offer nothing to wait on.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        held = condition()  # type: ignore[operator]
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        if loop.time() > deadline:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        await asyncio.sleep(0.1)
