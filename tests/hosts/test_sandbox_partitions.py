"""Partitions between a sandbox's host and its daemon's host, over mutual TLS.

The daemon (``toolbridge serve``) runs on one namespace, the sandbox's client on another.
The sandbox's link is cut while a tool runs: the client finds the connection dead (its
keepalive), and once the link heals sends its calls again on a new connection under the
same ids; the daemon answers each from the call it already made. A partition longer than
the client's reconnect window ends the call with a retryable ``Unavailable``, and the step's
outcome is journaled all the same. Delay and loss slow calls and lose or double none. The
cut and the long partition are met by both clients, Python's and Node's.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.hosts import netns
from tests.hosts.conftest import PORT, App, Daemon, serving, toolbridge, until
from tests.hosts.journal import tool_steps
from tests.hosts.sandbox import answers, run_client, start_client
from tests.tls_certs import CA


@pytest.fixture
async def daemon(net: netns.Network, app: App, ca: CA, tmp_path: Path) -> AsyncIterator[Daemon]:
    host = net.host("daemon")
    server = ca.issue(f"daemon-{net.tag}", hosts=(host.address,))
    flags = ("--tls-cert", str(server.cert), "--tls-key", str(server.key), "--tls-client-ca", str(ca.cert))
    async with serving(app, host, str(tmp_path / "journal.db"), *flags) as served:
        yield served


async def sandbox_env(app: App, ca: CA, daemon: Daemon, tmp_path: Path, **extra: str) -> dict[str, str]:
    token = await toolbridge(
        app, "token", "mint", "hosts_app:bridge", "--journal", str(tmp_path / "journal.db"),
        "--run", "remote", "--all-tools", "--max-calls", "1000",
    )  # fmt: skip
    client = ca.issue("sandbox-client", client=True, hosts=())
    return {
        "TOOLBRIDGE_ADDRESS": daemon.address,
        "TOOLBRIDGE_TOKEN": token.splitlines()[0],
        "TOOLBRIDGE_TLS_CA": str(ca.cert),
        "TOOLBRIDGE_TLS_CERT": str(client.cert),
        "TOOLBRIDGE_TLS_KEY": str(client.key),
        **extra,
    }


async def journaled(tmp_path: Path) -> dict[str, tuple[str, Any]]:
    """The tool steps of run ``remote``: key -> (status, output)."""
    steps = await tool_steps(str(tmp_path / "journal.db"), "remote")
    return {key: (step.status, step.output) for key, step in steps.items()}


CLIENTS = pytest.mark.parametrize("node", [False, True], ids=["python", "node"])


@CLIENTS
async def test_a_cut_mid_call_is_survived_the_tools_run_once_and_answer(
    net: netns.Network, app: App, ca: CA, daemon: Daemon, tmp_path: Path, node: bool
) -> None:
    sandbox = net.host("sandbox")
    daemon_host = net.hosts["daemon"]
    app.fifos.expect("a")
    app.fifos.expect("b")
    env = await sandbox_env(app, ca, daemon, tmp_path)
    client = await start_client(
        tmp_path,
        [("hold", {"label": "a"}), ("hold", {"label": "b"})],
        env,
        netns=sandbox.name,
        at_once=True,
        node=node,
    )
    assert {await app.fifos.started(), await app.fifos.started()} == {"a", "b"}
    [first] = sandbox.connections(daemon_host.address, PORT)

    sandbox.cut()  # both tools still running
    await until(
        lambda: not sandbox.connections(daemon_host.address, PORT), "the client to drop its connection"
    )
    await app.fifos.release("a")  # "a" ends while the sandbox is cut off: its answer is lost
    sandbox.heal()
    await until(lambda: sandbox.connections(daemon_host.address, PORT), "the client to reconnect")
    [second] = sandbox.connections(daemon_host.address, PORT)
    await app.fifos.release("b")  # "b" ends after: the call sent again waits for it

    assert await answers(client) == [{"result": {"held": "a"}}, {"result": {"held": "b"}}]
    assert second != first  # a new connection, not the old one recovered
    ran = [entry["what"] for entry in app.executions()]
    assert sorted(ran) == ["hold a", "hold b"]  # each ran once
    steps = await journaled(tmp_path)
    assert sorted(output["held"] for _, output in steps.values()) == ["a", "b"]
    assert all(status == "completed" for status, _ in steps.values())
    assert not any("#" in key for key in steps)  # no call was taken for a second occurrence


@CLIENTS
async def test_a_partition_longer_than_the_window_is_a_retryable_error_and_the_outcome_is_journaled(
    net: netns.Network, app: App, ca: CA, daemon: Daemon, tmp_path: Path, node: bool
) -> None:
    sandbox = net.host("sandbox")
    daemon_host = net.hosts["daemon"]
    app.fifos.expect("long")
    env = await sandbox_env(app, ca, daemon, tmp_path, TOOLBRIDGE_RECONNECT_WINDOW="1")
    client = await start_client(tmp_path, [("hold", {"label": "long"})], env, netns=sandbox.name, node=node)
    assert await app.fifos.started() == "long"
    sandbox.cut()
    await until(
        lambda: not sandbox.connections(daemon_host.address, PORT), "the client to drop its connection"
    )
    [answer] = await answers(client)  # given up while the link is still cut
    assert answer["error"] == "Unavailable"
    assert answer["retryable"] is True
    assert "unreachable for 1 s" in answer["message"]
    await app.fifos.release("long")
    sandbox.heal()

    async def completed() -> bool:
        return [status for status, _ in (await journaled(tmp_path)).values()] == ["completed"]

    await until(completed, "the step's outcome")
    assert list((await journaled(tmp_path)).values()) == [("completed", {"held": "long"})]
    assert [entry["what"] for entry in app.executions()] == ["hold long"]


async def flap(host: netns.Host, stop: asyncio.Event, seed: int) -> int:
    """Cut ``host``'s link for 50-400 ms at a time, every 0.2-1 s, until ``stop``; the cuts made."""
    rng = random.Random(seed)
    cuts = 0
    while not stop.is_set():
        if cuts:  # the first cut at once: a quick workload still meets one
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), rng.uniform(0.2, 1.0))
            if stop.is_set():
                break
        host.cut()
        cuts += 1
        await asyncio.sleep(rng.uniform(0.05, 0.4))  # the blackout itself: its length is the point
        host.reconnect()
    return cuts


async def test_delay_and_loss_slow_calls_and_lose_or_double_none(
    net: netns.Network, app: App, ca: CA, daemon: Daemon, tmp_path: Path
) -> None:
    sandbox = net.host("sandbox")
    sandbox.slow(kbit=256, queue_ms=80)  # delay: a queue; loss: it overflows, and the flaps
    env = await sandbox_env(app, ca, daemon, tmp_path)
    calls = [("record", {"n": n}) for n in range(40)]
    stop = asyncio.Event()
    flapping = asyncio.ensure_future(flap(sandbox, stop, seed=30))
    try:
        got = await run_client(tmp_path, calls, env, netns=sandbox.name, timeout=120)
    finally:
        stop.set()
        cuts = await flapping
    assert cuts > 0
    assert got == [{"result": {"n": n, "daemon": "A"}} for n in range(40)]
    assert sorted(entry["what"] for entry in app.executions()) == sorted(f"record {n}" for n in range(40))
    assert len(await journaled(tmp_path)) == 40


async def test_the_node_client_calls_over_mutual_tls_from_another_host(
    net: netns.Network, app: App, ca: CA, daemon: Daemon, tmp_path: Path
) -> None:
    sandbox = net.host("sandbox")
    env = await sandbox_env(app, ca, daemon, tmp_path)
    got = await run_client(tmp_path, [("record", {"n": 1})], env, netns=sandbox.name, node=True)
    assert got == [{"result": {"n": 1, "daemon": "A"}}]
    without = {k: v for k, v in env.items() if k not in ("TOOLBRIDGE_TLS_CERT", "TOOLBRIDGE_TLS_KEY")}
    [refused] = await run_client(tmp_path, [("record", {"n": 2})], without, netns=sandbox.name, node=True)
    assert refused["error"] == "TLSError", refused
    assert [entry["what"] for entry in app.executions()] == ["record 1"]


async def test_a_slow_flapping_link_loses_or_doubles_no_call_of_the_node_client(
    net: netns.Network, app: App, ca: CA, daemon: Daemon, tmp_path: Path
) -> None:
    sandbox = net.host("sandbox")
    sandbox.slow(kbit=256, queue_ms=80)
    env = await sandbox_env(app, ca, daemon, tmp_path)
    stop = asyncio.Event()
    flapping = asyncio.ensure_future(flap(sandbox, stop, seed=31))
    try:
        got = await run_client(
            tmp_path,
            [("record", {"n": n}) for n in range(30)],
            env,
            netns=sandbox.name,
            node=True,
            timeout=120,
        )
    finally:
        stop.set()
        assert await flapping > 0
    assert got == [{"result": {"n": n, "daemon": "A"}} for n in range(30)]
    assert sorted(entry["what"] for entry in app.executions()) == sorted(f"record {n}" for n in range(30))
