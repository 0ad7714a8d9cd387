"""One suite, both journals, through the public API: what a user sees must not depend on where
the journal lives. Each test runs on a SQLite file and on a fresh PostgreSQL database.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import (
    Bridge,
    FunctionContext,
    ReplayMismatchError,
    RunBusyError,
    StepError,
    ToolContext,
    ToolError,
    ToolOptions,
    event_type,
    tool,
)

FAST_RETRIES = ToolOptions(retry_backoff=0.001, retry_backoff_max=0.001)


async def test_a_completed_step_replays_without_running(journal_url: str) -> None:
    ran: list[str] = []

    def work(name: str) -> dict[str, str]:
        ran.append(name)
        return {"made": name}

    for _ in range(2):
        async with Bridge(journal=journal_url) as bridge, bridge.run("replay") as step:
            assert await step.run("a", work, "a") == {"made": "a"}
            assert await step.run("b", work, "b") == {"made": "b"}
    assert ran == ["a", "b"]


class Charge(BaseModel):
    amount: int


async def test_retries_keep_one_idempotency_key_and_replay_keeps_the_outcome(journal_url: str) -> None:
    keys: list[str] = []

    def charge(args: Charge, ctx: ToolContext) -> dict[str, int]:
        keys.append(ctx.idempotency_key)
        if len(keys) < 3:
            raise ToolError("flaky", retryable=True)
        return {"charged": args.amount}

    charge_tool = tool.step(description="Charge", input=Charge, run=charge)
    for _ in range(2):
        async with Bridge(journal=journal_url, tools={"charge": charge_tool}) as bridge:
            result = await bridge.call_tool("charge", {"amount": 5}, run_id="pay", tool_options=FAST_RETRIES)
            assert result == {"charged": 5}
    assert len(keys) == 3
    assert len(set(keys)) == 1


async def test_a_failed_step_fails_again_on_replay_without_running(journal_url: str) -> None:
    ran = 0

    def boom() -> None:
        nonlocal ran
        ran += 1
        raise ToolError("no", type="Refused")

    for _ in range(2):
        async with Bridge(journal=journal_url) as bridge:
            with pytest.raises(StepError, match="no"):
                async with bridge.run("fails") as step:
                    await step.run("boom", boom)
    assert ran == 1


async def test_a_changed_step_kind_on_replay_is_a_divergence(journal_url: str) -> None:
    async with Bridge(journal=journal_url) as bridge, bridge.run("diverge") as step:
        await step.run("x", lambda: 1)
    async with Bridge(journal=journal_url) as bridge:
        with pytest.raises(ReplayMismatchError, match="changed"):
            async with bridge.run("diverge") as step:
                await step.sleep("x", 0)


async def _wait_while_sending(waiter: Bridge, sender: Bridge, ready: asyncio.Event) -> Any:
    """Wait in a run of ``waiter``; send from ``sender`` until the wait has its event.

    The wait counts events sent after it began, a moment after it says it is ready, so keep
    sending until it has taken one (as a person would press a button again).
    """

    async def wait() -> Any:
        async with waiter.run("waits") as step:
            await step.run("ready", ready.set)
            return await step.wait_for_event("paid", event="order/paid", timeout=60)

    waiting = asyncio.create_task(wait())
    await asyncio.wait_for(ready.wait(), 10)
    async with asyncio.timeout(10):  # far below the wait window (20 s): woken, not polled
        while not waiting.done():
            await sender.send_event("order/paid", {"order": 7})
            await asyncio.wait({waiting}, timeout=0.05)
    return await waiting


async def test_an_event_sent_wakes_a_wait_in_another_run(journal_url: str) -> None:
    async with Bridge(journal=journal_url) as bridge:
        found = await _wait_while_sending(bridge, bridge, asyncio.Event())
    assert found is not None
    assert found.data == {"order": 7}


async def test_an_event_sent_by_one_daemon_wakes_a_wait_on_another(pg_url: str) -> None:
    # Two bridges, each with its own connections and owner: as two hosts, they share only
    # the database. Without NOTIFY the wait would see the event only in its next window.
    async with Bridge(journal=pg_url) as host_a, Bridge(journal=pg_url) as host_b:
        found = await _wait_while_sending(host_b, host_a, asyncio.Event())
    assert found is not None
    assert found.data == {"order": 7}


async def test_sidecar_tokens_minted_on_one_bridge_are_seen_and_revoked_on_another(journal_url: str) -> None:
    tools = {"echo": lambda value: value}
    async with Bridge(journal=journal_url, tools=tools) as a, Bridge(journal=journal_url, tools=tools) as b:
        minted = await a.mint_token(run_id="side", tools=["echo"], max_calls=3, ttl=60)
        (listed,) = await b.list_tokens()
        assert (listed.id, listed.max_calls, listed.tools, listed.token) == (minted.id, 3, ("echo",), None)
        assert await b.revoke_token(minted.id) is True
        (revoked,) = await a.list_tokens()
        assert revoked.revoked_at is not None


async def test_a_run_held_by_one_bridge_is_busy_for_another_until_it_leaves(journal_url: str) -> None:
    async with Bridge(journal=journal_url) as a, Bridge(journal=journal_url) as b:
        async with a.run("held") as step:
            await step.run("first", lambda: 1)
            with pytest.raises(RunBusyError):
                async with b.run("held", wait=0):
                    pass
        async with b.run("held") as step:
            assert await step.run("first", lambda: 2) == 1  # replayed: B took the run over


async def test_recover_resumes_a_function_run_its_daemon_left_mid_way(journal_url: str) -> None:
    started, paid = asyncio.Event(), asyncio.Event()
    ran: list[str] = []

    def pay() -> None:
        ran.append("pay")
        paid.set()

    def declare(bridge: Bridge, *, block: bool) -> None:
        @bridge.function(id="refund", trigger=event_type("refund/asked"))
        async def refund(ctx: FunctionContext) -> str:
            await ctx.step.run("look-up", lambda: ran.append("look-up"))
            if block:
                started.set()
                await asyncio.Event().wait()  # the daemon goes away here
            await ctx.step.run("pay", pay)
            return "refunded"

    first = Bridge(journal=journal_url)
    declare(first, block=True)
    async with first:
        await first.send_event("refund/asked", {"order": 1})
        await asyncio.wait_for(started.wait(), 10)
    # The first daemon is gone with the run unfinished: a recovering daemon resumes it.
    second = Bridge(journal=journal_url, recover=True, run_lease=0.5)
    declare(second, block=False)
    async with second:
        await asyncio.wait_for(paid.wait(), 15)
    assert ran == ["look-up", "pay"]  # the look-up replayed from the journal
