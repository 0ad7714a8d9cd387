"""Partitions between daemons and their shared PostgreSQL journal, each on a host of its own.

Daemon A holds run ``jr`` and is inside work(2) when its link is cut. Its lease runs out;
daemon B, on another host, takes the run over and completes it. A's work(2) then returns:
its outcome cannot be committed, and the call is answered ``UNAVAILABLE`` (never as if it
had committed). The link heals: A's late writes are refused by the fence, and A's run ends
with ``RunLeaseLostError``. Then the other way round: B, having taken the run, is cut off in
turn, and A (healed, entering again) takes it back while B's late writes are refused.

Then PostgreSQL itself is restarted (a crash, and a clean fast stop) under two daemons running
commands that call tools in a loop: calls meeting the outage fail ``UNAVAILABLE`` and succeed
when called again, a call in flight across it is answered, both daemons reconnect on their
own, A's lease outlives the outage (a third daemon trying to enter A's run never gets it), and
the history checker finds nothing lost, rerun or doubled.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.hosts import netns
from tests.hosts.conftest import until
from tests.hosts.history import Figures, check_books
from tests.hosts.journal import tool_steps
from tests.pg_cluster import Cluster, running_cluster, unavailable_reason
from tests.postgres.fleet import Host as Daemon
from tests.postgres.fleet import lines

PG_DAEMON = Path(__file__).with_name("pg_daemon.py")
PG_LOOP = Path(__file__).with_name("pg_loop.py")
REPO = PG_DAEMON.parents[2]
LEASE = 2.0
RESTART_LEASE = 9.0  # over three times what PostgreSQL takes to stop and start again
WAIT = 60.0


@pytest.fixture
def postgres(net: netns.Network) -> Iterator[tuple[netns.Host, Cluster]]:
    yield from _postgres(net, durable=False)


@pytest.fixture
def durable_postgres(net: netns.Network) -> Iterator[tuple[netns.Host, Cluster]]:
    """On disk as in production (fsync on): a crash loses only what was not flushed."""
    yield from _postgres(net, durable=True)


def _postgres(net: netns.Network, *, durable: bool) -> Iterator[tuple[netns.Host, Cluster]]:
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("TOOLBRIDGE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"TOOLBRIDGE_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    host = net.host("pg")
    with running_cluster(netns=host.name, listen=host.address, durable=durable) as cluster:
        yield host, cluster


def database(cluster: Cluster) -> tuple[str, str]:
    """A fresh database: its URL over the namespaces' network, and through the local socket."""
    local = cluster.create_database("hosts")
    name = local.split("@/", 1)[1].split("?")[0]
    return cluster.tcp_url(name), local


async def start(host: netns.Host, name: str, url: str, work: Path, *more: str) -> Daemon:
    work.mkdir(exist_ok=True)
    for fifo in ("agent-said", "agent-go"):
        if not (work / fifo).exists():
            os.mkfifo(work / fifo)
    return await launch(host, PG_DAEMON, name, url, work, str(LEASE), *more)


async def launch(host: netns.Host, script: Path, name: str, url: str, work: Path, *args: str) -> Daemon:
    """``script URL WORK NAME ARGS`` on ``host``; its reports are ``daemon.reports``."""
    work.mkdir(exist_ok=True)
    stderr = work / f"{name}.stderr"
    with stderr.open("ab") as sink:
        process = await asyncio.create_subprocess_exec(
            *host.exec(sys.executable, str(script), url, str(work), name, *args),
            stdout=asyncio.subprocess.PIPE, stderr=sink, cwd=REPO,
        )  # fmt: skip
    daemon = Daemon(name, process, stderr_path=stderr)
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
    a = await start(host_a, "a", url, tmp_path / "a", "hold")
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


async def test_the_first_holder_takes_its_run_back_when_the_second_is_cut_off_in_turn(
    net: netns.Network, postgres: tuple[netns.Host, Cluster], tmp_path: Path
) -> None:
    _, cluster = postgres
    url, local = database(cluster)
    host_a, host_b = net.host("a"), net.host("b")
    a = await start(host_a, "a", url, tmp_path / "a", "hold", "again")
    b: Daemon | None = None
    try:
        await a.report("holding", WAIT)
        host_a.cut()  # A, inside work(2), can no longer reach the journal
        b = await start(host_b, "b", url, tmp_path / "b", "hold")
        await b.report("holding", WAIT)  # B took the run over once A's lease ran out
        host_b.cut()  # and B, inside its own work(2), is cut off in turn

        a.signal(signal.SIGUSR1)  # A's work(2) returns while A is still cut off
        assert await fifo_line(tmp_path / "a" / "agent-said") == "Unavailable"
        host_a.heal()
        await fifo_write(tmp_path / "a" / "agent-go")
        lost = await a.report("lease_lost", WAIT)  # A's late writes are refused: B holds the run
        assert "taken over" in lost["message"]
        try:
            done = await a.report(
                "done", WAIT
            )  # A enters again, and takes the run back once B's lease ran out
        except AssertionError:
            raise AssertionError(f"A said {a.reports}") from None
        assert done["exit_code"] == 0, done["stderr"]
        said = [json.loads(line) for line in done["stdout"].splitlines()]
        assert said == [{"n": n, "value": {"n": n, "by": "a"}} for n in (1, 2, 3)]

        b.signal(signal.SIGUSR1)  # B's work(2) returns while B is still cut off
        assert await fifo_line(tmp_path / "b" / "agent-said") == "Unavailable"  # not "committed"
        host_b.heal()
        await fifo_write(tmp_path / "b" / "agent-go")
        lost = await b.report("lease_lost", WAIT)  # fenced out in turn
        assert "taken over" in lost["message"]
    finally:
        for daemon in (a, b):
            if daemon is not None:
                await daemon.kill()

    steps = await tool_steps(local, "jr")
    assert sorted(step.output["by"] for step in steps.values() if step.status == "completed") == ["a"] * 3
    executions = lines(tmp_path / "a" / "ledger.jsonl") + lines(tmp_path / "b" / "ledger.jsonl")
    # work(2) ran three times, never committed but by the last holder: at least once, as a
    # step left running by a holder cut off is run again by the next.
    ran = sorted((entry["step"], entry["daemon"]) for entry in executions)
    assert ran == [(1, "a"), (2, "a"), (2, "a"), (2, "b"), (3, "a")]
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("".join(json.dumps(entry) + "\n" for entry in executions))
    acknowledged = [{"tool": "work", "n": line["n"], "attempts": 1, "result": line["value"]} for line in said]
    figures = Figures(seed=0)
    check_books(figures, acknowledged, {"jr": steps}, ledger)
    assert figures.results_checked == 3
    assert figures.lost == []
    assert figures.completed_run_again == []
    assert figures.at_most_once_doubled == []


def outcomes(work: Path) -> list[dict[str, Any]]:
    """What an agent of pg_loop.py was answered, call by call."""
    return lines(work / "outcomes.jsonl")


def stderr_of(daemon: Daemon) -> str:
    assert daemon.stderr_path is not None
    return daemon.stderr_path.read_text()


async def lease_expiry(local: str, run_id: str) -> float:
    """When the run's lease ends, as the journal says (seconds since the epoch; 0 for none)."""
    conn = await asyncpg.connect(local)
    try:
        expires = await conn.fetchval("SELECT lease_expires_at FROM runs WHERE run_id = $1", run_id)
    finally:
        await conn.close()
    return 0.0 if expires is None else expires / 1000


@pytest.mark.parametrize("crash", [True, False], ids=["immediate", "fast"])
async def test_postgresql_restarted_under_two_daemons_loses_doubles_and_takes_over_nothing(
    net: netns.Network, durable_postgres: tuple[netns.Host, Cluster], tmp_path: Path, crash: bool
) -> None:
    _, cluster = durable_postgres
    url, local = database(cluster)
    host_a, host_b = net.host("a"), net.host("b")
    lease = str(RESTART_LEASE)
    # A and B each run a command calling record/charge in a loop; A's agent is inside hold(7)
    # across the restart (so nothing but A's renewals keeps its lease); C, on B's host, tries
    # to enter A's run all along.
    a = await launch(host_a, PG_LOOP, "a", url, tmp_path / "a", lease, "serve", "ra", "7")
    b = await launch(host_b, PG_LOOP, "b", url, tmp_path / "b", lease, "serve", "rb", "0")
    c: Daemon | None = None
    try:
        await a.report("holding", WAIT)
        c = await launch(host_b, PG_LOOP, "c", url, tmp_path / "c", lease, "contend", "ra")
        await c.report("busy", WAIT)
        await until(lambda: len(outcomes(tmp_path / "b")) >= 10, "B's first calls")

        cluster.halt(crash=crash)
        await until(lambda: "could not renew the lease on run 'ra'" in stderr_of(a), "A's renewal to fail")
        await until(lambda: "could not renew the lease on run 'rb'" in stderr_of(b), "B's renewal to fail")
        cluster.resume()
        back = time.time()
        before = len(outcomes(tmp_path / "b"))

        # A's lease outlives the restart: A renews it again, and C never gets the run.
        def entered() -> bool:
            return any(report.get("event") == "entered" for report in c.reports)

        async def renewed() -> bool:
            return entered() or await lease_expiry(local, "ra") > back + RESTART_LEASE

        await until(renewed, "A's lease to be renewed after the restart")
        assert not entered(), "C took A's run while A held it"
        await until(lambda: len(outcomes(tmp_path / "b")) >= before + 10, "B's calls after the restart")
        await c.kill()

        a.signal(signal.SIGUSR1)  # hold(7) returns: its outcome commits on a new connection
        await until(lambda: len(outcomes(tmp_path / "a")) >= 10, "A's calls after the restart")
        for daemon in (a, b):
            (tmp_path / daemon.name / "stop").touch()
        for daemon in (a, b):
            done = await daemon.report("done", WAIT)
            assert done["exit_code"] == 0, done["stderr"]
            assert done["read"] == 4, done["read"]  # the pool reads again
        for daemon in (a, b):
            assert "renewed the lease on run" in stderr_of(daemon)
    finally:
        for running in (a, b, c):
            if running is not None:
                await running.kill()

    said = outcomes(tmp_path / "a") + outcomes(tmp_path / "b")
    assert [o for o in said if "error" in o] == []  # every call answered, after retries if need be
    held = next(o for o in said if o["tool"] == "hold")
    assert held["result"] == {"held": 7, "by": "a"}
    assert held["attempts"] == 1  # in flight across the restart, and answered
    figures = Figures(seed=0)
    journal = {run: await tool_steps(local, run) for run in ("ra", "rb")}
    check_books(figures, said, journal, tmp_path / "ledger.jsonl")
    print("\n".join(figures.lines()))
    assert figures.results_checked == len(said)
    assert figures.lost == []
    assert figures.completed_run_again == []
    assert figures.at_most_once_doubled == []
    assert set(figures.executions_by_daemon) == {"a", "b"}
