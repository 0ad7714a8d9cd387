"""Partitions between daemons and their shared PostgreSQL journal, each on a host of its own.

Daemon A holds run ``jr`` and is inside work(2) when its link is cut. Its lease runs out;
daemon B, on another host, takes the run over and completes it. A's work(2) then returns:
its outcome cannot be committed, and the call is answered ``UNAVAILABLE`` (never as if it
had committed). The link heals: A's late writes are refused by the fence, and A's run ends
with ``RunLeaseLostError``. Then PostgreSQL itself is restarted under two serving daemons.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hosts import netns
from tests.hosts.journal import tool_steps
from tests.pg_cluster import Cluster, running_cluster, unavailable_reason
from tests.postgres.fleet import Host as Daemon
from tests.postgres.fleet import lines

PG_DAEMON = Path(__file__).with_name("pg_daemon.py")
REPO = PG_DAEMON.parents[2]
LEASE = 2.0
WAIT = 60.0


@pytest.fixture
def postgres(net: netns.Network) -> Iterator[tuple[netns.Host, Cluster]]:
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("TOOLBRIDGE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"TOOLBRIDGE_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    host = net.host("pg")
    with running_cluster(netns=host.name, listen=host.address) as cluster:
        yield host, cluster


def database(cluster: Cluster) -> tuple[str, str]:
    """A fresh database: its URL over the namespaces' network, and through the local socket."""
    local = cluster.create_database("hosts")
    name = local.split("@/", 1)[1].split("?")[0]
    return cluster.tcp_url(name), local


async def start(host: netns.Host, name: str, url: str, work: Path) -> Daemon:
    work.mkdir(exist_ok=True)
    for fifo in ("agent-said", "agent-go"):
        if not (work / fifo).exists():
            os.mkfifo(work / fifo)
    stderr = work / f"{name}.stderr"
    with stderr.open("ab") as sink:
        process = await asyncio.create_subprocess_exec(
            *host.exec(sys.executable, str(PG_DAEMON), url, str(work), name, str(LEASE)),
            stdout=asyncio.subprocess.PIPE, stderr=sink, cwd=REPO,
        )  # fmt: skip
    daemon = Daemon(name, process, stderr_path=stderr)  # reports: daemon.reports
    daemon._reader = asyncio.create_task(daemon._read())
    return daemon


async def fifo_line(path: Path) -> str:
    def read() -> str:
        with open(path) as fifo:
            return fifo.readline().strip()

    return await asyncio.wait_for(asyncio.to_thread(read), WAIT)


async def fifo_write(path: Path) -> None:
    def write() -> None:
        with open(path, "w") as fifo:
            fifo.write("go\n")

    await asyncio.wait_for(asyncio.to_thread(write), WAIT)


async def test_a_daemon_cut_from_the_journal_is_fenced_out_after_another_takes_its_run(
    net: netns.Network, postgres: tuple[netns.Host, Cluster], tmp_path: Path
) -> None:
    _, cluster = postgres
    url, local = database(cluster)
    host_a, host_b = net.host("a"), net.host("b")
    a = await start(host_a, "a", url, tmp_path / "a")
    b: Daemon | None = None
    try:
        await a.report("holding", WAIT)
        host_a.cut()  # A, inside work(2), can no longer reach the journal

        b = await start(host_b, "b", url, tmp_path / "b")
        try:
            done = await b.report("done", WAIT)  # once A's lease ran out
        except AssertionError:
            raise AssertionError(f"B said {b.reports}") from None
        assert done["exit_code"] == 0, done["stderr"]
        assert list(done["stdout"].splitlines()) == [
            '{"n": 1, "value": {"n": 1, "by": "a"}}',  # A's, replayed from the journal
            '{"n": 2, "value": {"n": 2, "by": "b"}}',
            '{"n": 3, "value": {"n": 3, "by": "b"}}',
        ]

        a.signal(signal.SIGUSR1)  # A's work(2) returns while A is still cut off
        assert await fifo_line(tmp_path / "a" / "agent-said") == "Unavailable"  # not "committed"
        host_a.heal()
        await fifo_write(tmp_path / "a" / "agent-go")
        lost = await a.report("lease_lost", WAIT)
        assert "taken over" in lost["message"]
    finally:
        for daemon in (a, b):
            if daemon is not None:
                await daemon.kill()

    steps = await tool_steps(local, "jr")
    outputs = sorted(step.output["by"] for step in steps.values() if step.status == "completed")
    assert outputs == ["a", "b", "b"]  # A's late work(2) never landed
    ran = [(entry["step"], entry["daemon"]) for entry in lines(tmp_path / "a" / "ledger.jsonl")]
    ran += [(entry["step"], entry["daemon"]) for entry in lines(tmp_path / "b" / "ledger.jsonl")]
    # work(2) ran on both: A's run of it never committed, so B's takeover ran it again.
    assert sorted(ran) == [(1, "a"), (2, "a"), (2, "b"), (3, "b")]
