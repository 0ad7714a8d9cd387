"""Hosts for the tests: network namespaces joined by veth pairs to a switch (a Linux bridge).

Each host is a namespace with one interface, ``eth0``, at ``10.213.0.N/24``; a switch
namespace holds the bridge and the other end of every host's link. Cutting a host's link
takes its port off the bridge: every packet both ways is dropped, silently, as a dead switch
port drops them, with no reset for either side to hear and the host's own interface still
up. A slow link is a token bucket (``tc tbf``) on both ends: packets queue (delay) and a full
queue drops them (loss). Loss on its own is made by flapping the link (short cuts, see the
tests). This machine's kernel has no ``sch_netem`` (nor classifiers or actions), the usual
tool for delay and loss; ``tbf`` and the bridge are what it has.

Every name carries a tag unique to the test run, so parallel runs never meet; every address
lives only inside the namespaces made here. :meth:`Network.close` deletes the namespaces
(with them their links) and is run by the fixture even after a failure; namespaces left by a
run killed outright carry its tag and pid, and are swept by the next run (see :func:`sweep`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["Host", "Network", "available", "network"]

SUBNET = "10.213.0"


def available() -> str | None:
    """Why namespaces cannot be made here, or ``None`` when they can (root, iproute2)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    return None


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _tc(namespace: str, *args: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", namespace, "tc", *args], capture_output=True, text=True, check=True
    )


@dataclass
class Host:
    """One host: a namespace with an address, linked to the switch."""

    name: str  # the namespace
    address: str
    port: str  # its link's end in the switch namespace
    switch: str
    shaped: bool = field(default=False)

    def exec(self, *argv: str) -> list[str]:
        """``argv`` run on this host."""
        return ["ip", "netns", "exec", self.name, *argv]

    def cut(self) -> None:
        """Drop every packet to and from this host, silently (its port leaves the switch)."""
        ip("-n", self.switch, "link", "set", self.port, "nomaster")

    def reconnect(self) -> None:
        """Put the host's port back on the switch (a cut ends; the link's pace is kept)."""
        ip("-n", self.switch, "link", "set", self.port, "master", "br0")

    def slow(self, *, kbit: int, queue_ms: int) -> None:
        """A slow link both ways: ``kbit`` per second, packets queued up to ``queue_ms``, then dropped."""
        verb = "change" if self.shaped else "add"
        for namespace, device in ((self.name, "eth0"), (self.switch, self.port)):
            _tc(namespace, "qdisc", verb, "dev", device, "root", "tbf",
                "rate", f"{kbit}kbit", "burst", "1600", "latency", f"{queue_ms}ms")  # fmt: skip
        self.shaped = True

    def heal(self) -> None:
        """The link as it was: on the switch, at full speed."""
        self.reconnect()
        if self.shaped:
            _tc(self.name, "qdisc", "del", "dev", "eth0", "root")
            _tc(self.switch, "qdisc", "del", "dev", self.port, "root")
            self.shaped = False

    def connections(self, peer: str, port: int) -> set[int]:
        """The local ports of this host's established TCP connections to ``peer:port``."""
        done = subprocess.run(
            self.exec("ss", "-tnH", "state", "established", "dst", f"{peer}:{port}"),
            capture_output=True,
            text=True,
            check=True,
        )
        ports = set()
        for line in done.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 3:
                ports.add(int(fields[-2].rsplit(":", 1)[1]))
        return ports


class Network:
    """A switch and hosts on it, all namespaces of this run (see the module docstring)."""

    def __init__(self) -> None:
        self.tag = f"tb{os.getpid()}x{secrets.token_hex(3)}"
        self.switch = f"{self.tag}-sw"
        self.hosts: dict[str, Host] = {}
        self._made: list[str] = []
        self._netns(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")

    def _netns(self, name: str) -> None:
        ip("netns", "add", name)
        self._made.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def host(self, name: str) -> Host:
        """A new host on the switch, at the next address."""
        namespace = f"{self.tag}-{name}"
        number = len(self.hosts) + 1
        port = f"p{number}"
        self._netns(namespace)
        ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        ip("-n", self.switch, "link", "set", port, "master", "br0")
        ip("-n", self.switch, "link", "set", port, "up")
        address = f"{SUBNET}.{number}"
        ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", namespace, "link", "set", "eth0", "up")
        host = Host(namespace, address, port, self.switch)
        self.hosts[name] = host
        return host

    def close(self) -> None:
        """Delete every namespace made (their links go with them)."""
        for name in reversed(self._made):
            _kill_inside(name)
            ip("netns", "del", name, check=False)
        self._made.clear()


def _kill_inside(namespace: str) -> None:
    """Kill what still runs in ``namespace``: a namespace with processes outlives its name."""
    done = ip("netns", "pids", namespace, check=False)
    for pid in done.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)


def sweep() -> None:
    """Delete namespaces left by runs that died (named ``tb<pid>x...``, pid gone)."""
    listed = ip("netns", "list", check=False).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith("tb") or "x" not in name:
            continue
        pid = name[2:].split("x", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _kill_inside(name)
            ip("netns", "del", name, check=False)


@contextlib.contextmanager
def network() -> Iterator[Network]:
    """A network of this run's own, deleted on the way out whatever happened."""
    sweep()
    made = Network()
    try:
        yield made
    finally:
        made.close()
