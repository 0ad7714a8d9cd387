"""Sandboxed code tries to reach a listener on the host's loopback, over TCP and UDP."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from toolbridge import Bridge

PROBE = """
import errno, json, socket, sys
tcp_port, udp_port = int(sys.argv[1]), int(sys.argv[2])
out = {"interfaces": [name for _, name in socket.if_nameindex()]}
def attempt(label, action):
    try:
        action()
        out[label] = "ok"
    except OSError as exc:
        out[label] = errno.errorcode.get(exc.errno, str(exc))
def tcp(host):
    with socket.create_connection((host, tcp_port), timeout=5):
        pass
def udp(host):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"leak", (host, udp_port))
attempt("tcp_loopback", lambda: tcp("127.0.0.1"))
attempt("tcp_outside", lambda: tcp("192.0.2.1"))
attempt("udp_loopback", lambda: udp("127.0.0.1"))
attempt("udp_outside", lambda: udp("192.0.2.1"))
print(json.dumps(out))
"""


class HostListeners:
    """A TCP and a UDP listener on the host's loopback that count what reaches them."""

    def __init__(self) -> None:
        self.tcp_connections = 0
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.server: asyncio.Server | None = None

    async def start(self) -> None:
        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.tcp_connections += 1
            writer.close()

        self.server = await asyncio.start_server(accepted, "127.0.0.1", 0)

    @property
    def ports(self) -> tuple[int, int]:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1], self.udp.getsockname()[1]

    def datagrams(self) -> int:
        # Loopback delivery happens within sendto(), so by the time the command has
        # exited, anything it sent is already queued here: no waiting needed.
        count = 0
        while True:
            try:
                self.udp.recv(64)
            except BlockingIOError:
                return count
            count += 1

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        self.udp.close()


@pytest.fixture
async def listeners() -> AsyncIterator[HostListeners]:
    opened = HostListeners()
    await opened.start()
    yield opened
    await opened.close()


async def _probe(bridge: Bridge, work_dir: Path, ports: tuple[int, int]) -> dict[str, object]:
    async with bridge.run() as step:
        result = await step.sandbox.commands.run(
            "probe", ["python3", "probe.py", *map(str, ports)], cwd=work_dir, timeout=60
        )
    assert result.exit_code == 0, result.stderr
    seen: dict[str, object] = json.loads(result.stdout)
    return seen


async def test_host_loopback_listeners_are_out_of_reach(
    sandboxed: Bridge,
    unsandboxed: Bridge,
    listeners: HostListeners,
    work_dir: Path,
    write_script: Callable[[str, str], Path],
) -> None:
    write_script("probe.py", PROBE)

    control = await _probe(unsandboxed, work_dir, listeners.ports)
    assert control["tcp_loopback"] == "ok"
    assert listeners.tcp_connections == 1
    assert listeners.datagrams() == 1

    seen = await _probe(sandboxed, work_dir, listeners.ports)
    # Its own network namespace: only its own loopback, where nothing listens.
    assert seen["interfaces"] == ["lo"]
    assert seen["tcp_loopback"] == "ECONNREFUSED"
    assert seen["tcp_outside"] == "ENETUNREACH"
    assert seen["udp_outside"] == "ENETUNREACH"
    assert listeners.tcp_connections == 1  # nothing more arrived
    assert listeners.datagrams() == 0  # its datagram went to its own loopback
